#!/usr/bin/env python3
"""Test vectors for the aldb v1 state commitment (docs/SPEC.md §3-§8).

This is a second, deliberately naive implementation of the commitment, written from the spec
alone and sharing no code with the Rust crates or the TypeScript package: the root is a plain
recursion over the sorted leaf set and a proof is a walk down that recursion (both in specref.py,
the reference code this script shares with gen_records.py and gen_votes.py). Vectors are only
worth something if the two sides can disagree, so nothing here is optimised or clever.

Standard library only (Python 3.11). The output is a pure function of SEED: running the script
again rewrites tests/vectors/v1.json byte for byte.

    python3 tools/vectors/gen_vectors.py            # write the file
    python3 tools/vectors/gen_vectors.py --check    # exit 1 if the checked-in file differs
"""

import random
import sys
from pathlib import Path

# specref.py sits beside this script. Putting its folder first on the path makes the import work
# however the script is started: from any directory, with `python3 -P`, or through runpy.
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
from specref import (  # noqa: E402
    U64_MAX,
    ZERO,
    account_value,
    b58decode,
    b58encode,
    b64,
    bit,
    branch_hash,
    check_proof,
    common_prefix_bits,
    first_difference,
    key_path,
    leaf_hash,
    proof_from_json,
    proof_json,
    proof_wire,
    prove,
    tree_root,
    verify_proof,
    write_or_check,
)
from specref import self_test as specref_self_test  # noqa: E402

SEED = 0xA1DB_0001
OUT = Path(__file__).resolve().parent.parent.parent / "tests" / "vectors" / "v1.json"


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
        root = tree_root(items)
        proofs = []
        for pk in proof_keys:
            path = key_path(pk)
            p = prove(items, path)
            claim = verify_proof(p, root, path)
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
# changed, chosen (and checked with check_proof()) so that it breaks exactly one structural rule,
# or none and then only the root comparison fails.


def build_invalid(cases):
    by_name = {c["name"]: c for c in cases}
    out = []

    def add(name, description, case, pubkey, proof, expect):
        root = b58decode(case["root"])
        path = key_path(pubkey)
        computed, _, broken = check_proof(proof, path)
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
    good = proof_from_json(deep["proof"])
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
            op = proof_from_json(other["proof"])
            if check_proof(op, key_path(pk))[2] == ["terminal_off_path"]:
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
    specref_self_test()
    # The worked example of docs/SPEC.md §8, whose numbers come from the spec's text, not from
    # this script: the root, and B's inclusion proof in its 134-byte wire form.
    items = sorted(
        [
            (key_path(bytes([1]) * 32), account_value(1_000_000_000, ZERO, False, b"")),
            (key_path(bytes([2]) * 32), account_value(2_039_280, bytes([0xAA]) * 32, False, b"hello, aldb")),
            (key_path(bytes([3]) * 32), account_value(1, ZERO, True, bytes(range(100)))),
        ]
    )
    root = tree_root(items)
    assert root.hex() == "8ae553c8c5a367d4fe354b3bb96058a876032b6013ccaedf98553348f3ff7110"
    assert b58encode(root) == "AMC5fovBYEXWh7yfRUvaqoMY9dVqVAEbF8qXJqtjjJr3"
    wire = proof_wire(prove(items, key_path(bytes([2]) * 32)))
    assert wire.hex() == (
        "0101"
        "fd43d7da0d3c33d5ae30df568c4e4e1e70b0a369df8fcb53e99b7bdd3374735e"
        "dec4a53e01e276ccdc48e5b1e4c57402338b957b353b60c26d41124e269a28eb"
        "0200"
        "00dd25c065e89274d749c357abe78275b6c9c52bf023783391df05014b27d48e6e"
        "02b22cfb73f87b0f2ec59231377ec7a5e2931de060628cf53a548ce6b042cedbf1"
    )


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
    nproofs = sum(len(c["proofs"]) for c in cases)
    summary = f"{len(primitives)} primitives, {len(cases)} cases, {nproofs} proofs, {len(invalid)} invalid proofs"
    return write_or_check(OUT, "gen_vectors.py", doc, 2, summary)


if __name__ == "__main__":
    sys.exit(main())
