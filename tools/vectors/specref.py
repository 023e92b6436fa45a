"""Reference implementation of the parts of docs/SPEC.md that the vector generators share.

gen_vectors.py (§3-§8), gen_records.py (§9), gen_votes.py (§10) and gen_epochs.py (§11) are a
second implementation of the spec, written from its text alone and sharing no code with the Rust
crates or the TypeScript package; this module is the part of that second implementation they have
in common, so each rule is written once:

- the encodings of §1 (base58, base64), and SHA-256 as hashlib's;
- the BLAKE2s domains of §2, §3 and §9.2;
- the tree of §5, the proofs of §6 and their encodings of §7, as a plain recursion over the
  sorted leaf set with no stored nodes;
- Ed25519 as RFC 8032 §6's reference code, with the strict verification of §9.3;
- writing a generator's vector file, or checking it (`--check`, as CI runs each generator).

Nothing here is optimised or clever: the vectors are only worth something if this side and the
Rust side can disagree. Standard library only (Python 3.11).
"""

import base64
import hashlib
import json
import sys
from pathlib import Path

ZERO = bytes(32)
U64_MAX = (1 << 64) - 1

# --------------------------------------------------------------------------------------------
# What every generator does with its document.


def write_or_check(out: Path, script: str, doc, indent: int, summary: str) -> int:
    """Writes `doc` as JSON to `out` (ASCII, byte for byte the same on every run), or, with
    `--check` on the command line, only compares it with the file there. `script` is the
    generator's file name, `summary` what was written. Returns the exit status: 1 when the
    checked-in file differs from what the generator produces."""
    text = json.dumps(doc, indent=indent, ensure_ascii=True) + "\n"
    if "--check" in sys.argv[1:]:
        # CI: the checked-in file must be exactly what this independent generator produces.
        if not out.exists() or out.read_bytes() != text.encode("ascii"):
            print(f"{out.name} differs from the generator's output; run tools/vectors/{script}")
            return 1
        print(f"{out.name} matches the generator")
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(text.encode("ascii"))
    print(f"wrote {out.relative_to(out.parent.parent.parent)}: {summary}")
    return 0


# --------------------------------------------------------------------------------------------
# §1: base58 and base64, written out so that nothing beyond the standard library is needed.

B58_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def b58encode(b: bytes) -> str:
    n = int.from_bytes(b, "big")
    digits = []
    while n:
        n, r = divmod(n, 58)
        digits.append(B58_ALPHABET[r])
    # Each leading zero byte is one leading '1'; the integer conversion above drops them.
    zeros = len(b) - len(b.lstrip(b"\0"))
    return "1" * zeros + "".join(reversed(digits))


def b58decode(s: str) -> bytes:
    n = 0
    for c in s:
        # str.index raises ValueError for a character outside the alphabet.
        n = n * 58 + B58_ALPHABET.index(c)
    zeros = len(s) - len(s.lstrip("1"))
    body = n.to_bytes((n.bit_length() + 7) // 8, "big") if n else b""
    return bytes(zeros) + body


def sha256(b: bytes) -> bytes:
    return hashlib.sha256(b).digest()


def b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


def b64decode(s: str) -> bytes:
    return base64.b64decode(s, validate=True)


# --------------------------------------------------------------------------------------------
# §2, §3, §9.2: the hash domains. hashlib's blake2s defaults are the rest of the parameter block
# of §2.1: key length 0, fanout 1, depth 1, leaf length 0, node offset 0, node depth 0, inner
# length 0; an empty salt is the all-zero salt.


def blake2s_256(message: bytes, personal: bytes, salt: bytes = bytes(8)) -> bytes:
    assert len(personal) == 8 and len(salt) == 8
    return hashlib.blake2s(message, digest_size=32, salt=salt, person=personal).digest()


def key_path(pubkey: bytes) -> bytes:
    """§3.1 H_path."""
    assert len(pubkey) == 32
    return blake2s_256(pubkey, b"aldbpath")


def account_value(lamports: int, owner: bytes, executable: bool, data: bytes) -> bytes:
    """§3.2 H_acct over the 49-byte header and the data."""
    assert 0 <= lamports <= U64_MAX and len(owner) == 32
    message = (
        lamports.to_bytes(8, "little")
        + owner
        + bytes([1 if executable else 0])
        + len(data).to_bytes(8, "little")
        + data
    )
    return blake2s_256(message, b"aldbacct")


def leaf_hash(path: bytes, value: bytes) -> bytes:
    """§3.3 H_leaf."""
    assert len(path) == 32 and len(value) == 32
    return blake2s_256(path + value, b"aldbleaf")


def branch_hash(depth: int, left: bytes, right: bytes) -> bytes:
    """§3.4 H_node, the depth in salt[0]."""
    assert 0 <= depth <= 255 and len(left) == 32 and len(right) == 32
    return blake2s_256(left + right, b"aldbnode", bytes([depth]) + bytes(7))


def record_hash(record: bytes) -> bytes:
    """§9.2 H_rec over a record's 187 or 219 bytes."""
    return blake2s_256(record, b"aldbrcrd")


# --------------------------------------------------------------------------------------------
# §4, §5: the tree. A tree is nothing but the list of (path, value) pairs sorted by path; the
# root and the proofs are computed from that list by recursion.


def bit(path: bytes, d: int) -> int:
    """§4: bit 0 is the most significant bit of byte 0; 0 goes left."""
    return (path[d // 8] >> (7 - d % 8)) & 1


def first_difference(a: bytes, b: bytes):
    """The first bit where two paths differ, or None when they are equal."""
    for d in range(256):
        if bit(a, d) != bit(b, d):
            return d
    return None


def common_prefix_bits(a: bytes, b: bytes) -> int:
    d = first_difference(a, b)
    return 256 if d is None else d


def split(items):
    """The branch at the top of a sorted set of two or more leaves: its depth, left and right."""
    # Sorted, so the smallest and largest paths differ first where the whole set first splits.
    d = first_difference(items[0][0], items[-1][0])
    left = [it for it in items if bit(it[0], d) == 0]
    right = [it for it in items if bit(it[0], d) == 1]
    return d, left, right


def tree_root(items):
    """§5: the root of the (path, value) pairs `items`, sorted by path."""
    if not items:
        return ZERO
    if len(items) == 1:
        path, value = items[0]
        return leaf_hash(path, value)
    d, left, right = split(items)
    return branch_hash(d, tree_root(left), tree_root(right))


# --------------------------------------------------------------------------------------------
# §6: proofs. A proof here is {"siblings": [(depth, hash), ...] root-down, "terminal": None for
# the empty terminal or (path, value) for a leaf}.


def prove(items, path):
    """Walk from the root along `path`'s bits; siblings root-down, then the leaf reached."""
    siblings = []
    node = items
    while len(node) > 1:
        d, left, right = split(node)
        taken, other = (left, right) if bit(path, d) == 0 else (right, left)
        siblings.append((d, tree_root(other)))
        node = taken
    if not node:
        return {"siblings": siblings, "terminal": None}
    leaf_path, value = node[0]
    return {"siblings": siblings, "terminal": (leaf_path, value)}


def check_proof(proof, path):
    """Every rule of §6.1, each evaluated on its own.

    Returns (root or None, claim or None, list of broken structural rules). Evaluating the rules
    separately, rather than stopping at the first, is what lets an invalid-proof vector be built
    so that it breaks exactly one rule.
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


def verify_proof(proof, root, path):
    """§6.1: the claim ("present", value) or ("absent", None), or None when the proof fails."""
    computed, claim, broken = check_proof(proof, path)
    if broken or computed != root:
        return None
    return claim


# --------------------------------------------------------------------------------------------
# §7: the JSON and wire forms of a proof.


def proof_json(proof):
    """§7.1."""
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


def proof_from_json(pj):
    """The inverse of proof_json (no checks: it reads invalid proofs too)."""
    sibs = [(s["depth"], b58decode(s["hash"])) for s in pj["siblings"]]
    t = pj["terminal"]
    term = None if t["kind"] == "empty" else (b58decode(t["path"]), b58decode(t["value"]))
    return {"siblings": sibs, "terminal": term}


def proof_wire(proof):
    """§7.2."""
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
# Ed25519: RFC 8032 §6 reference code, nearly verbatim (its names: p the field prime, q the group
# order L, d the curve constant, G the base point B), plus the rules of §9.3 in check_signature().

p = 2**255 - 19
q = 2**252 + 27742317777372353535851937790883648493


def sha512(s):
    return hashlib.sha512(s).digest()


def modp_inv(x):
    return pow(x, p - 2, p)


d = -121665 * modp_inv(121666) % p


def sha512_modq(s):
    return int.from_bytes(sha512(s), "little") % q


def point_add(P, Q):
    A, B = (P[1] - P[0]) * (Q[1] - Q[0]) % p, (P[1] + P[0]) * (Q[1] + Q[0]) % p
    C, D = 2 * P[3] * Q[3] * d % p, 2 * P[2] * Q[2] % p
    E, F, G, H = B - A, D - C, D + C, B + A
    return (E * F, G * H, F * G, E * H)


def point_mul(s, P):
    Q = (0, 1, 1, 0)  # neutral element
    while s > 0:
        if s & 1:
            Q = point_add(Q, P)
        P = point_add(P, P)
        s >>= 1
    return Q


def point_equal(P, Q):
    if (P[0] * Q[2] - Q[0] * P[2]) % p != 0:
        return False
    if (P[1] * Q[2] - Q[1] * P[2]) % p != 0:
        return False
    return True


modp_sqrt_m1 = pow(2, (p - 1) // 4, p)


def recover_x(y, sign):
    # y >= p is a non-canonical encoding, which RFC 8032 §5.1.3 (and so §9.3 rule 2) rejects.
    if y >= p:
        return None
    x2 = (y * y - 1) * modp_inv(d * y * y + 1)
    if x2 == 0:
        # x = 0 with the sign bit set: rejected too.
        if sign:
            return None
        else:
            return 0
    x = pow(x2, (p + 3) // 8, p)
    if (x * x - x2) % p != 0:
        x = x * modp_sqrt_m1 % p
    if (x * x - x2) % p != 0:
        return None
    if (x & 1) != sign:
        x = p - x
    return x


g_y = 4 * modp_inv(5) % p
g_x = recover_x(g_y, 0)
G = (g_x, g_y, 1, g_x * g_y % p)
IDENTITY = (0, 1, 1, 0)


def point_compress(P):
    zinv = modp_inv(P[2])
    x = P[0] * zinv % p
    y = P[1] * zinv % p
    return int.to_bytes(y | ((x & 1) << 255), 32, "little")


def point_decompress(s):
    if len(s) != 32:
        raise Exception("Invalid input length for decompression")
    y = int.from_bytes(s, "little")
    sign = y >> 255
    y &= (1 << 255) - 1
    x = recover_x(y, sign)
    if x is None:
        return None
    else:
        return (x, y, 1, x * y % p)


def secret_expand(secret):
    if len(secret) != 32:
        raise Exception("Bad size of private key")
    h = sha512(secret)
    a = int.from_bytes(h[:32], "little")
    a &= (1 << 254) - 8
    a |= 1 << 254
    return (a, h[32:])


def secret_to_public(secret):
    (a, dummy) = secret_expand(secret)
    return point_compress(point_mul(a, G))


def sign(secret, msg):
    a, prefix = secret_expand(secret)
    A = point_compress(point_mul(a, G))
    r = sha512_modq(prefix + msg)
    R = point_mul(r, G)
    Rs = point_compress(R)
    h = sha512_modq(Rs + A + msg)
    s = (r + h * a) % q
    return Rs + int.to_bytes(s, 32, "little")


def point_neg(P):
    return (p - P[0], P[1], P[2], p - P[3])


def small_order(P):
    """§9.3 rule 3: [8]P is the neutral point."""
    return point_equal(point_mul(8, P), IDENTITY)


def check_signature(public, msg, signature):
    """Every rule of §9.3, each evaluated on its own; returns the list of broken rule names, in
    the order of §9.3.

    Evaluating them separately is what lets an invalid vector be made to break exactly the one
    rule it is about (like check_proof()).
    """
    assert len(public) == 32 and len(signature) == 64
    broken = []
    Rs = signature[:32]
    s = int.from_bytes(signature[32:], "little")
    if s >= q:
        broken.append("s_not_reduced")
    A = point_decompress(public)
    R = point_decompress(Rs)
    if A is None:
        broken.append("identity_not_a_point")
    if R is None:
        broken.append("r_not_a_point")
    if A is not None and small_order(A):
        broken.append("identity_small_order")
    if R is not None and small_order(R):
        broken.append("r_small_order")
    if A is not None:
        # The cofactorless equation, compared by encoding: [S]B - [k]A must encode to R's bytes.
        # S is used as given (not reduced), so an S >= L breaks only rule 1.
        k = sha512_modq(Rs + public + msg)
        if point_compress(point_add(point_mul(s, G), point_neg(point_mul(k, A)))) != Rs:
            broken.append("equation")
    return broken


def verify_strict(public, msg, signature):
    """§9.3: the signature is accepted when it breaks none of the four rules."""
    return check_signature(public, msg, signature) == []


# RFC 8032 §7.1 TEST 1 and TEST 2 (secret, public, message, signature), so a slip in the code
# above cannot hide behind agreeing with itself.
RFC8032_TESTS = [
    (
        "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
        "",
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
    ),
    (
        "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
        "72",
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
    ),
]


# --------------------------------------------------------------------------------------------


def self_test():
    """Known answers from outside this module: base58 from Bitcoin's, the hashes from §8 of the
    spec, Ed25519 from RFC 8032 §7.1."""
    assert b58encode(b"") == ""
    assert b58encode(b"\0\0\x01") == "112" and b58decode("112") == b"\0\0\x01"
    assert b58encode(b"hello world") == "StV1DL6CwTryKyV"
    assert b58encode(ZERO) == "1" * 32
    for n in (0, 1, 2, 31, 32):
        for b in (bytes(n), bytes([0xFF]) * n, bytes([0]) + bytes([7]) * max(n - 1, 0)):
            assert b58decode(b58encode(b)) == b
    assert b64(b"hello") == "aGVsbG8=" and b64decode("aGVsbG8=") == b"hello"

    assert bit(bytes([0x80]) + bytes(31), 0) == 1 and bit(bytes(31) + b"\x01", 255) == 1
    known = [
        (key_path(ZERO), "553cb190f688ed86b029806d7216f34f3affab04b605747e398205d3fcb52086"),
        (account_value(1, ZERO, False, b""), "87dc049e9b96c7600a572243eb7c38b2517f390aefb6f47f6470f1c0f9850cc5"),
        (leaf_hash(ZERO, ZERO), "7b262ebd2ff0ba9580fb9421654917698b07ad779a1a4d77332491a0b3c167e7"),
        (branch_hash(0, ZERO, ZERO), "53945f2071672d7e5113909052844b08c6cdda313ad9f84c822a07c2faf6860d"),
    ]
    for got, want in known:
        assert got.hex() == want, (got.hex(), want)
    # H_rec differs from the other domains' hashes of the same bytes.
    assert record_hash(ZERO) != key_path(ZERO)

    for secret, public, msg, sig in RFC8032_TESTS:
        secret, public, msg, sig = map(bytes.fromhex, (secret, public, msg, sig))
        assert secret_to_public(secret) == public
        assert sign(secret, msg) == sig
        assert verify_strict(public, msg, sig)
        assert not verify_strict(public, msg + b"x", sig)
