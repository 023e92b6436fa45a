#!/usr/bin/env python3
"""Test vectors for the aldb v1 state commitment (docs/SPEC.md).

This is a second, deliberately naive implementation of the commitment, written from the spec
alone and sharing no code with the Rust crates: the root is a plain recursion over the sorted
leaf set and a proof is a walk down that recursion. Vectors are only worth something if the two
sides can disagree, so nothing here is optimised or clever.

Standard library only (Python 3.11). The output is a pure function of SEED: running the script
again rewrites tests/vectors/v1.json byte for byte.

    python3 tools/vectors/gen_vectors.py
"""

import base64
import hashlib
import json
import random
import sys
from pathlib import Path

SEED = 0xA1DB_0001
OUT = Path(__file__).resolve().parent.parent.parent / "tests" / "vectors" / "v1.json"

ZERO = bytes(32)
U64_MAX = (1 << 64) - 1

# --------------------------------------------------------------------------------------------
# Encodings. Base58 is written out here rather than imported so the script needs nothing beyond
# the standard library.

B58_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
B58_INDEX = {c: i for i, c in enumerate(B58_ALPHABET)}


def b58encode(b: bytes) -> str:
    n = int.from_bytes(b, "big")
    out = []
    while n:
        n, r = divmod(n, 58)
        out.append(B58_ALPHABET[r])
    # Each leading zero byte is one leading '1'; the integer conversion above drops them.
    pad = len(b) - len(b.lstrip(b"\0"))
    return "1" * pad + "".join(reversed(out))


def b58decode(s: str) -> bytes:
    n = 0
    for c in s:
        n = n * 58 + B58_INDEX[c]
    pad = len(s) - len(s.lstrip("1"))
    body = n.to_bytes((n.bit_length() + 7) // 8, "big") if n else b""
    return b"\0" * pad + body


def b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


# --------------------------------------------------------------------------------------------
# The four hashes. hashlib's blake2s defaults are the rest of the parameter block the spec fixes:
# key length 0, fanout 1, depth 1, leaf length 0, node offset 0, node depth 0, inner length 0.


def key_path(pubkey: bytes) -> bytes:
    assert len(pubkey) == 32
    return hashlib.blake2s(pubkey, digest_size=32, person=b"aldbpath").digest()


def account_value(lamports: int, owner: bytes, executable: bool, data: bytes) -> bytes:
    assert 0 <= lamports <= U64_MAX and len(owner) == 32
    pre = (
        lamports.to_bytes(8, "little")
        + owner
        + bytes([1 if executable else 0])
        + len(data).to_bytes(8, "little")
        + data
    )
    return hashlib.blake2s(pre, digest_size=32, person=b"aldbacct").digest()


def leaf_hash(path: bytes, value: bytes) -> bytes:
    assert len(path) == 32 and len(value) == 32
    return hashlib.blake2s(path + value, digest_size=32, person=b"aldbleaf").digest()


def branch_hash(depth: int, left: bytes, right: bytes) -> bytes:
    assert 0 <= depth <= 255 and len(left) == 32 and len(right) == 32
    salt = bytes([depth, 0, 0, 0, 0, 0, 0, 0])
    return hashlib.blake2s(left + right, digest_size=32, person=b"aldbnode", salt=salt).digest()


def bit(path: bytes, d: int) -> int:
    # Most significant bit of byte 0 is bit 0; 0 goes left.
    return (path[d // 8] >> (7 - d % 8)) & 1


def first_difference(a: bytes, b: bytes):
    for d in range(256):
        if bit(a, d) != bit(b, d):
            return d
    return None


def common_prefix_bits(a: bytes, b: bytes) -> int:
    d = first_difference(a, b)
    return 256 if d is None else d


# --------------------------------------------------------------------------------------------
# The tree. A "tree" here is nothing but the list of (path, value) pairs sorted by path; the
# root and the proofs are computed from that list by recursion, with no stored nodes.


def subtree_root(items):
    if not items:
        return ZERO
    if len(items) == 1:
        path, value = items[0]
        return leaf_hash(path, value)
    # Sorted, so the smallest and largest paths differ first where the whole set first splits.
    d = first_difference(items[0][0], items[-1][0])
    left = [it for it in items if bit(it[0], d) == 0]
    right = [it for it in items if bit(it[0], d) == 1]
    return branch_hash(d, subtree_root(left), subtree_root(right))


def prove(items, path):
    """Walk from the root along `path`'s bits; siblings root-down, then the leaf reached."""
    siblings = []
    node = items
    while len(node) > 1:
        d = first_difference(node[0][0], node[-1][0])
        left = [it for it in node if bit(it[0], d) == 0]
        right = [it for it in node if bit(it[0], d) == 1]
        if bit(path, d) == 0:
            taken, other = left, right
        else:
            taken, other = right, left
        siblings.append((d, subtree_root(other)))
        node = taken
    if not node:
        return {"siblings": siblings, "terminal": None}
    leaf_path, value = node[0]
    return {"siblings": siblings, "terminal": (leaf_path, value)}


def check(proof, path):
    """Every rule the verifier enforces, each evaluated on its own.

    Returns (root or None, claim or None, list of broken structural rules). Evaluating the rules
    separately, rather than stopping at the first, is what lets the invalid-proof vectors below
    be built so that each breaks exactly one rule.
    """
    sibs = proof["siblings"]
    term = proof["terminal"]
    broken = []
    if any(sibs[i][0] >= sibs[i + 1][0] for i in range(len(sibs) - 1)):
        broken.append("depths_not_increasing")
    if term is None:
        if sibs:
            broken.append("empty_with_siblings")
            return None, None, broken
        return ZERO, ("absent", None), broken
    leaf_path, value = term
    if any(bit(leaf_path, d) != bit(path, d) for d, _ in sibs):
        broken.append("terminal_off_path")
    acc = leaf_hash(leaf_path, value)
    for d, h in reversed(sibs):
        acc = branch_hash(d, acc, h) if bit(path, d) == 0 else branch_hash(d, h, acc)
    claim = ("present", value) if leaf_path == path else ("absent", None)
    return acc, claim, broken


def verify(proof, root, path):
    computed, claim, broken = check(proof, path)
    if broken:
        return None
    if computed != root:
        return None
    return claim


# --------------------------------------------------------------------------------------------
# JSON and wire forms of a proof, as docs/SPEC.md states them.


def proof_json(proof):
    term = proof["terminal"]
    if term is None:
        terminal = {"kind": "empty"}
    else:
        terminal = {"kind": "leaf", "path": b58encode(term[0]), "value": b58encode(term[1])}
    return {
        "version": 1,
        "siblings": [{"depth": d, "hash": b58encode(h)} for d, h in proof["siblings"]],
        "terminal": terminal,
    }


def proof_wire(proof):
    term = proof["terminal"]
    out = bytearray([0x01])
    if term is None:
        out.append(0x00)
    else:
        out.append(0x01)
        out += term[0] + term[1]
    out += len(proof["siblings"]).to_bytes(2, "little")
    for d, h in proof["siblings"]:
        out.append(d)
        out += h
    return bytes(out)


# --------------------------------------------------------------------------------------------
# Scenarios.


class Scenario:
    def __init__(self, name, description):
        self.name = name
        self.description = description
        self.ops = []
        self.state = {}  # pubkey -> value hash, for accounts with lamports > 0
        self.ever = set()  # every pubkey an op touched

    def put(self, pubkey, lamports, owner, executable, data):
        self.ops.append((pubkey, lamports, owner, executable, data))
        self.ever.add(pubkey)
        if lamports == 0:
            self.state.pop(pubkey, None)
        else:
            self.state[pubkey] = account_value(lamports, owner, executable, data)

    def delete(self, pubkey):
        # What a closed Solana account looks like: no lamports, system-owned, no data. Only the
        # zero lamports matter to the commitment.
        self.put(pubkey, 0, ZERO, False, b"")

    def items(self):
        return sorted((key_path(pk), v) for pk, v in self.state.items())

    def render(self, proof_keys):
        items = self.items()
        root = subtree_root(items)
        proofs = []
        for pk in proof_keys:
            path = key_path(pk)
            p = prove(items, path)
            claim = verify(p, root, path)
            # The generator's proofs must pass its own verifier; a failure here is a bug in this
            # script, not a vector.
            assert claim is not None, (self.name, pk.hex())
            present = pk in self.state
            assert claim == (("present", self.state[pk]) if present else ("absent", None))
            proofs.append(
                {
                    "pubkey": b58encode(pk),
                    "path": b58encode(path),
                    "present": present,
                    "value": b58encode(self.state[pk]) if present else None,
                    "proof": proof_json(p),
                    "wire": proof_wire(p).hex(),
                }
            )
        return {
            "name": self.name,
            "description": self.description,
            "ops": [
                {
                    "pubkey": b58encode(pk),
                    "lamports": lam,
                    "owner": b58encode(owner),
                    "executable": ex,
                    "data": b64(data),
                }
                for pk, lam, owner, ex, data in self.ops
            ],
            "leaves": len(items),
            "root": b58encode(root),
            "proofs": proofs,
        }


def random_account(rng, max_data=300):
    lamports = rng.randrange(1, 10**12)
    owner = rng.randbytes(32)
    executable = rng.random() < 0.1
    data = rng.randbytes(rng.randrange(0, max_data + 1))
    return lamports, owner, executable, data


def pubkey_with_prefix(rng, target_path, bits):
    """A fresh pubkey whose path shares at least `bits` leading bits with `target_path`."""
    while True:
        pk = rng.randbytes(32)
        if common_prefix_bits(key_path(pk), target_path) >= bits:
            return pk


def build_cases(rng):
    cases = []
    never = [rng.randbytes(32) for _ in range(3)]

    s = Scenario("empty", "No accounts: the root is 32 zero bytes and every proof is the empty terminal.")
    cases.append(s.render(never))

    a = rng.randbytes(32)
    s = Scenario("single", "One account: the root is its leaf hash; absent keys are excluded by that leaf.")
    s.put(a, *random_account(rng))
    cases.append(s.render([a] + never))

    a = rng.randbytes(32)
    s = Scenario("single_deleted", "One account created, then set to zero lamports: the tree is empty again.")
    s.put(a, *random_account(rng))
    s.delete(a)
    cases.append(s.render([a] + never[:2]))

    a, b = rng.randbytes(32), rng.randbytes(32)
    s = Scenario("two", "Two accounts: one branch at the first bit where their paths differ; absent keys are excluded by either leaf.")
    s.put(a, *random_account(rng))
    s.put(b, *random_account(rng))
    # Absent keys on both sides of the one branch, so both leaves serve as exclusion terminals.
    sides = {}
    while len(sides) < 2:
        k = rng.randbytes(32)
        sides.setdefault(bit(key_path(k), first_difference(key_path(a), key_path(b))), k)
    cases.append(s.render([a, b, sides[0], sides[1]]))

    # The example docs/SPEC.md works through by hand. Fixed inputs, independent of SEED, so the
    # spec's numbers never change when the random cases do.
    s = Scenario("worked_example", "The three-account tree worked through in docs/SPEC.md: pubkeys 0x01.., 0x02.., 0x03.. (32 equal bytes each); 0x04.. and 0x00.. are absent.")
    s.put(bytes([1]) * 32, 1_000_000_000, ZERO, False, b"")
    s.put(bytes([2]) * 32, 2_039_280, bytes([0xAA]) * 32, False, b"hello, aldb")
    s.put(bytes([3]) * 32, 1, ZERO, True, bytes(range(100)))
    cases.append(s.render([bytes([i]) * 32 for i in (1, 2, 3, 4, 0)]))

    keys = [rng.randbytes(32) for _ in range(4)]
    s = Scenario("update", "Four accounts, then the first is rewritten (new lamports, owner and data) and the third gets new lamports only; the last write wins.")
    for k in keys:
        s.put(k, *random_account(rng))
    s.put(keys[0], *random_account(rng))
    _, owner, ex, data = s.ops[2][1:]
    s.put(keys[2], 77, owner, ex, data)
    cases.append(s.render(keys + never[:2]))

    keys = [rng.randbytes(32) for _ in range(6)]
    s = Scenario("delete_one_of_several", "Six accounts, then the fourth is set to zero lamports: its leaf is gone and its key is excluded by another leaf.")
    for k in keys:
        s.put(k, *random_account(rng))
    s.delete(keys[3])
    cases.append(s.render(keys + never[:2]))

    # Paths sharing long prefixes make deep branches and long proofs, and absent keys whose paths
    # share the same prefix make exclusion proofs that end deep in the tree at another leaf.
    anchor = rng.randbytes(32)
    anchor_path = key_path(anchor)
    group = [pubkey_with_prefix(rng, anchor_path, 12) for _ in range(4)]
    pair = pubkey_with_prefix(rng, anchor_path, 16)
    others = [rng.randbytes(32) for _ in range(3)]
    absent_near = [pubkey_with_prefix(rng, anchor_path, 12), pubkey_with_prefix(rng, anchor_path, 16)]
    s = Scenario("shared_prefixes", "Accounts whose paths share their first 12 or more bits with an anchor account (one shares 16 or more), a few unrelated accounts, and absent keys whose paths share the same prefixes.")
    for k in [anchor] + group + [pair] + others:
        s.put(k, *random_account(rng))
    deleted = group[1]
    s.delete(deleted)
    cases.append(s.render([anchor] + group + [pair] + others + absent_near + never[:2]))

    # A larger tree, built, then churned: updates, deletes, a delete of a key that never existed,
    # and accounts deleted and later created again.
    keys = [rng.randbytes(32) for _ in range(300)]
    s = Scenario("random_300", "300 random accounts with data of 0 to 300 bytes, then random updates, deletes, a delete of a never-created key, and re-creation of deleted accounts.")
    for k in keys:
        s.put(k, *random_account(rng))
    for k in rng.sample(keys, 40):
        s.put(k, *random_account(rng))
    gone = rng.sample(keys, 30)
    for k in gone:
        s.delete(k)
    ghost = rng.randbytes(32)
    s.delete(ghost)
    back = gone[:5]
    for k in back:
        s.put(k, *random_account(rng))
    present = sorted(s.state)
    sample = rng.sample(present, 20)
    absent = [k for k in gone if k not in s.state][:5] + [ghost] + [rng.randbytes(32) for _ in range(4)]
    cases.append(s.render(sample + back[:2] + absent))

    return cases


# --------------------------------------------------------------------------------------------
# Proofs a verifier must reject. Each is a valid proof from the cases above with one thing
# changed, chosen (and checked with check()) so that it breaks exactly one structural rule, or
# none and then only the root comparison fails.


def decode_proof(pj):
    sibs = [(s["depth"], b58decode(s["hash"])) for s in pj["siblings"]]
    t = pj["terminal"]
    term = None if t["kind"] == "empty" else (b58decode(t["path"]), b58decode(t["value"]))
    return {"siblings": sibs, "terminal": term}


def build_invalid(cases):
    by_name = {c["name"]: c for c in cases}
    out = []

    def add(name, description, case, pubkey, proof, expect):
        root = b58decode(case["root"])
        path = key_path(pubkey)
        computed, _, broken = check(proof, path)
        if expect == "root_mismatch":
            assert broken == [] and computed != root, name
        else:
            assert broken == [expect], (name, broken)
        out.append(
            {
                "name": name,
                "description": description,
                "root": case["root"],
                "pubkey": b58encode(pubkey),
                "proof": proof_json(proof),
                "wire": proof_wire(proof).hex(),
                "error": expect,
            }
        )

    sp = by_name["shared_prefixes"]
    deep = max(sp["proofs"], key=lambda p: (p["present"], len(p["proof"]["siblings"])))
    pk = b58decode(deep["pubkey"])
    good = decode_proof(deep["proof"])
    n = len(good["siblings"])
    assert n >= 3

    p = dict(good, siblings=good["siblings"][:])
    p["siblings"][0], p["siblings"][1] = p["siblings"][1], p["siblings"][0]
    add("swapped_siblings", "The first two siblings of a valid inclusion proof swapped, so depths decrease.", sp, pk, p, "depths_not_increasing")

    p = dict(good, siblings=good["siblings"][:])
    p["siblings"].insert(1, p["siblings"][1])
    add("repeated_depth", "A sibling of a valid inclusion proof repeated: depths must strictly increase, not merely not decrease.", sp, pk, p, "depths_not_increasing")

    p = {"siblings": good["siblings"][:1], "terminal": None}
    add("empty_with_siblings", "An empty terminal with one sibling.", sp, pk, p, "empty_with_siblings")

    # Another present key's inclusion proof offered for this key: the leaf's path turns away
    # from the key's at one of the branches, which the verifier must notice before hashing.
    for other in sp["proofs"]:
        opk = b58decode(other["pubkey"])
        if other["present"] and opk != pk:
            op = decode_proof(other["proof"])
            if check(op, key_path(pk))[2] == ["terminal_off_path"]:
                add("terminal_off_path", "Another account's valid inclusion proof offered for this key.", sp, pk, op, "terminal_off_path")
                break
    else:
        raise AssertionError("no off-path proof found")

    p = dict(good, siblings=good["siblings"][:])
    d, h = p["siblings"][-1]
    p["siblings"][-1] = (d, bytes([h[0] ^ 1]) + h[1:])
    add("tampered_sibling", "One bit of the deepest sibling hash flipped.", sp, pk, p, "root_mismatch")

    p = dict(good)
    lp, v = p["terminal"]
    p["terminal"] = (lp, bytes([v[0] ^ 0x80]) + v[1:])
    add("tampered_value", "An inclusion proof claiming a different value for the key.", sp, pk, p, "root_mismatch")

    # Shift a depth without breaking the order or the path agreement: only the depth inside the
    # branch hash can catch this, which is why the depth is hashed.
    path = key_path(pk)
    lp = good["terminal"][0]
    for i in range(n):
        d, h = good["siblings"][i]
        lo = good["siblings"][i - 1][0] if i else -1
        hi = good["siblings"][i + 1][0] if i + 1 < n else 256
        for nd in (d + 1, d - 1):
            if lo < nd < hi and bit(lp, nd) == bit(path, nd):
                p = dict(good, siblings=good["siblings"][:])
                p["siblings"][i] = (nd, h)
                break
        else:
            continue
        break
    else:
        raise AssertionError("no depth shift found")
    add("shifted_depth", "One sibling's depth moved by one, still increasing and still on the key's path.", sp, pk, p, "root_mismatch")

    p = dict(good, siblings=good["siblings"][:-1])
    add("dropped_sibling", "The deepest sibling of a valid inclusion proof left out.", sp, pk, p, "root_mismatch")

    add("empty_for_nonempty", "An empty terminal with no siblings, against a non-empty root.", sp, pk, {"siblings": [], "terminal": None}, "root_mismatch")

    # An exclusion proof for a key that is present, made by ending the walk one branch early at
    # the sibling leaf instead of the key's own: it cannot hash to the root.
    two = by_name["two"]
    pa = next(p for p in two["proofs"] if p["present"])
    pb = next(p for p in two["proofs"] if p["present"] and p is not pa)
    fake = {"siblings": [], "terminal": (b58decode(pb["path"]), b58decode(pb["value"]))}
    add("false_exclusion", "A present key claimed absent by presenting the other leaf of a two-leaf tree with no siblings.", two, b58decode(pa["pubkey"]), fake, "root_mismatch")

    return out


# --------------------------------------------------------------------------------------------
# Single-function vectors.


def build_primitives(rng):
    prims = []
    for pk in [ZERO, bytes([0xFF]) * 32, bytes(range(32))] + [rng.randbytes(32) for _ in range(3)]:
        prims.append({"function": "key_path", "input": {"pubkey": b58encode(pk)}, "output": b58encode(key_path(pk))})

    # Data lengths around the BLAKE2s block size (64 bytes): the 49-byte header plus 15 bytes of
    # data fills the first block exactly, plus 79 fills two, and 165 is an SPL token account.
    accounts = [
        (1, ZERO, False, b""),
        (U64_MAX, bytes([0xFF]) * 32, True, b""),
        (1_000_000_000, rng.randbytes(32), False, bytes(15)),
        (2_039_280, rng.randbytes(32), False, rng.randbytes(16)),
        (5, rng.randbytes(32), True, rng.randbytes(79)),
        (6, rng.randbytes(32), False, rng.randbytes(80)),
        (2_039_280, rng.randbytes(32), False, rng.randbytes(165)),
        (U64_MAX, rng.randbytes(32), True, rng.randbytes(200)),
        (0, ZERO, False, b""),  # the hash is defined for zero lamports, though no leaf holds it
    ]
    for lam, owner, ex, data in accounts:
        prims.append(
            {
                "function": "account_value",
                "input": {"lamports": lam, "owner": b58encode(owner), "executable": ex, "data": b64(data)},
                "output": b58encode(account_value(lam, owner, ex, data)),
            }
        )

    for path, value in [(ZERO, ZERO), (rng.randbytes(32), rng.randbytes(32)), (rng.randbytes(32), rng.randbytes(32))]:
        prims.append(
            {
                "function": "leaf",
                "input": {"path": b58encode(path), "value": b58encode(value)},
                "output": b58encode(leaf_hash(path, value)),
            }
        )

    l, r = rng.randbytes(32), rng.randbytes(32)
    for d, left, right in [(0, ZERO, ZERO), (0, l, r), (0, r, l), (7, l, r), (8, l, r), (255, l, r)]:
        prims.append(
            {
                "function": "branch",
                "input": {"depth": d, "left": b58encode(left), "right": b58encode(right)},
                "output": b58encode(branch_hash(d, left, right)),
            }
        )
    return prims


def self_test():
    # Known-answer checks of the encoders, so a bug in them cannot hide behind agreement with
    # itself.
    assert b58encode(b"") == ""
    assert b58encode(b"\0\0\x01") == "112"
    assert b58encode(b"hello world") == "StV1DL6CwTryKyV"
    assert b58encode(ZERO) == "1" * 32
    for n in (0, 1, 2, 31, 32):
        for b in (bytes(n), bytes([0xFF]) * n, bytes([0]) + bytes([7]) * max(n - 1, 0)):
            assert b58decode(b58encode(b)) == b
    assert bit(bytes([0x80]) + bytes(31), 0) == 1 and bit(bytes(31) + b"\x01", 255) == 1


def main():
    self_test()
    rng = random.Random(SEED)
    primitives = build_primitives(rng)
    cases = build_cases(rng)
    invalid = build_invalid(cases)
    doc = {
        "version": 1,
        "description": "aldb v1 state commitment test vectors; see docs/SPEC.md. Generated by tools/vectors/gen_vectors.py; do not edit by hand.",
        "primitives": primitives,
        "cases": cases,
        "invalid_proofs": invalid,
    }
    text = json.dumps(doc, indent=2, ensure_ascii=True) + "\n"
    if "--check" in sys.argv[1:]:
        # CI: the checked-in file must be exactly what this independent generator produces.
        if not OUT.exists() or OUT.read_bytes() != text.encode("ascii"):
            print(f"{OUT.name} differs from the generator's output; run tools/vectors/gen_vectors.py")
            return 1
        print(f"{OUT.name} matches the generator")
        return 0
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_bytes(text.encode("ascii"))
    nproofs = sum(len(c["proofs"]) for c in cases)
    print(
        f"wrote {OUT.relative_to(OUT.parent.parent.parent)}: {len(primitives)} primitives, "
        f"{len(cases)} cases, {nproofs} proofs, {len(invalid)} invalid proofs"
    )


if __name__ == "__main__":
    sys.exit(main())
