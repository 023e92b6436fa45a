#!/usr/bin/env python3
"""Test vectors for aldb root records and attestations (docs/SPEC.md §9).

A second, deliberately simple implementation of §9, written from the spec alone and sharing no
code with the Rust crates or the TypeScript package: the record layout is built and parsed field
by field, H_rec is hashlib's BLAKE2s, and Ed25519 is the reference code of RFC 8032 §6 (big
Python integers, extended coordinates) with the strict rules of §9.3 added to its verify. The
hashes and Ed25519 live in specref.py, the reference code shared with gen_vectors.py and
gen_votes.py.

Standard library only (Python 3.11). Nothing comes from the operating system's randomness: keys
come from fixed 32-byte seeds, other bytes from random.Random(SEED), and Ed25519 signing is
deterministic, so running the script again rewrites tests/vectors/records-v1.json byte for byte.

    python3 tools/vectors/gen_records.py            # write the file
    python3 tools/vectors/gen_records.py --check    # exit 1 if the checked-in file differs
"""

import hashlib
import random
import sys
from pathlib import Path

# specref.py sits beside this script. Putting its folder first on the path makes the import work
# however the script is started: from any directory, with `python3 -P`, or through runpy.
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
from specref import (  # noqa: E402
    G,
    IDENTITY,
    U64_MAX,
    ZERO,
    b58encode,
    b64,
    check_signature,
    p,
    point_add,
    point_compress,
    point_decompress,
    point_equal,
    point_mul,
    point_neg,
    q,
    record_hash,
    secret_expand,
    secret_to_public,
    sha512_modq,
    sign,
    small_order,
    verify_strict,
    write_or_check,
)
from specref import self_test as specref_self_test  # noqa: E402

SEED = 0xA1DB_0009
OUT = Path(__file__).resolve().parent.parent.parent / "tests" / "vectors" / "records-v1.json"

# --------------------------------------------------------------------------------------------
# Root records (§9.1, §9.2).

RECORD_LEN = 187
RECORD_LEN_SLOT_BANK_HASH = 219
PARENT, CHAINED, BLOCK, BANK_HASH, SLOT_BANK_HASH = 0x01, 0x02, 0x04, 0x08, 0x10
KNOWN_FLAGS = PARENT | CHAINED | BLOCK | BANK_HASH | SLOT_BANK_HASH
FLAG_NAMES = [(PARENT, "PARENT"), (CHAINED, "CHAINED"), (BLOCK, "BLOCK"), (BANK_HASH, "BANK_HASH"), (SLOT_BANK_HASH, "SLOT_BANK_HASH")]
COMMITMENTS = {1: "confirmed", 2: "finalized"}
ATTEST_PREFIX = b"aldb-attest-v1"
assert ATTEST_PREFIX.hex() == "616c64622d6174746573742d7631"


def encode_record(r):
    """r: dict of the eleven fields and `bank_hash`, appended when the flags have SLOT_BANK_HASH.
    No checks: invalid records are built with it too."""
    out = (
        bytes([r["version"]])
        + r["genesis_hash"]
        + r["slot"].to_bytes(8, "little")
        + r["parent_slot"].to_bytes(8, "little")
        + bytes([r["commitment"], r["flags"]])
        + r["state_root"]
        + r["parent_record_hash"]
        + r["blockhash"]
        + r["block_height"].to_bytes(8, "little")
        + r["parent_bank_hash"]
    )
    assert len(out) == RECORD_LEN
    if r["flags"] & SLOT_BANK_HASH:
        out += r["bank_hash"]
    return out


def parse_fields(b):
    u64 = lambda i: int.from_bytes(b[i : i + 8], "little")
    return {
        "version": b[0],
        "genesis_hash": b[1:33],
        "slot": u64(33),
        "parent_slot": u64(41),
        "commitment": b[49],
        "flags": b[50],
        "state_root": b[51:83],
        "parent_record_hash": b[83:115],
        "blockhash": b[115:147],
        "block_height": u64(147),
        "parent_bank_hash": b[155:187],
        # Zero when absent, like an unset field in a dict; the flags say whether it is there.
        "bank_hash": b[187:219] if len(b) == RECORD_LEN_SLOT_BANK_HASH else ZERO,
    }


def record_errors(b):
    """The decoder rules of §9.1 that `b` breaks, each evaluated on its own."""
    if len(b) not in (RECORD_LEN, RECORD_LEN_SLOT_BANK_HASH):
        return ["length"]
    f = parse_fields(b)
    broken = []
    # The length the flags call for: the one length rule, so a record breaks it at most once.
    if len(b) != (RECORD_LEN_SLOT_BANK_HASH if f["flags"] & SLOT_BANK_HASH else RECORD_LEN):
        broken.append("length")
    if f["version"] != 1:
        broken.append("version")
    if f["commitment"] not in COMMITMENTS:
        broken.append("commitment")
    flags = f["flags"]
    if flags & ~KNOWN_FLAGS:
        broken.append("unknown_flag")
    if flags & (CHAINED | BANK_HASH) and not flags & PARENT:
        broken.append("flag_without_parent")
    if flags & PARENT and f["parent_slot"] >= f["slot"]:
        broken.append("parent_slot_not_below_slot")
    unset_nonzero = (
        (not flags & PARENT and f["parent_slot"] != 0)
        or (not flags & CHAINED and f["parent_record_hash"] != ZERO)
        or (not flags & BLOCK and (f["blockhash"] != ZERO or f["block_height"] != 0))
        or (not flags & BANK_HASH and f["parent_bank_hash"] != ZERO)
    )
    if unset_nonzero:
        broken.append("unset_field_not_zero")
    return broken


def attest_message(rec_bytes):
    return ATTEST_PREFIX + record_hash(rec_bytes)


def extends(child, parent):
    """§9.4: does record `child` extend accepted record `parent`? (Both as field dicts.)"""
    return (
        child["flags"] & PARENT != 0
        and child["parent_slot"] == parent["slot"]
        and child["flags"] & CHAINED != 0
        and child["parent_record_hash"] == record_hash(encode_record(parent))
        and child["genesis_hash"] == parent["genesis_hash"]
    )


def quorum(identities, threshold, rec_bytes, attestations):
    """§9.4: (attested?, number of distinct identities of the set with a valid attestation)."""
    msg = attest_message(rec_bytes)
    good = set()
    for ident, sig in attestations:
        if ident in identities and ident not in good and verify_strict(ident, msg, sig):
            good.add(ident)
    return len(good) >= threshold, len(good)


# --------------------------------------------------------------------------------------------
# Rendering.


def fields_json(f):
    out = {
        "version": f["version"],
        "genesis_hash": b58encode(f["genesis_hash"]),
        "slot": f["slot"],
        "parent_slot": f["parent_slot"],
        "commitment": COMMITMENTS[f["commitment"]],
        "flags": f["flags"],
        "flag_names": [n for bit, n in FLAG_NAMES if f["flags"] & bit],
        "state_root": b58encode(f["state_root"]),
        "parent_record_hash": b58encode(f["parent_record_hash"]),
        "blockhash": b58encode(f["blockhash"]),
        "block_height": f["block_height"],
        "parent_bank_hash": b58encode(f["parent_bank_hash"]),
    }
    # Not a field of the 187 bytes: there only when the record has it.
    if f["flags"] & SLOT_BANK_HASH:
        out["bank_hash"] = b58encode(f["bank_hash"])
    return out


def record_json_form(f, attestations):
    """The JSON form of §9.5 (null for an unset flag's field; no `bankHash` without SLOT_BANK_HASH)."""
    b = encode_record(f)
    fl = f["flags"]
    opt = lambda flag, v: v if fl & flag else None
    out = {
        "version": 1,
        "genesisHash": b58encode(f["genesis_hash"]),
        "slot": f["slot"],
        "parentSlot": opt(PARENT, f["parent_slot"]),
        "commitment": COMMITMENTS[f["commitment"]],
        "stateRoot": b58encode(f["state_root"]),
        "parentRecordHash": opt(CHAINED, b58encode(f["parent_record_hash"])),
        "blockhash": opt(BLOCK, b58encode(f["blockhash"])),
        "blockHeight": opt(BLOCK, f["block_height"]),
        "parentBankHash": opt(BANK_HASH, b58encode(f["parent_bank_hash"])),
    }
    if fl & SLOT_BANK_HASH:
        out["bankHash"] = b58encode(f["bank_hash"])
    out["recordHash"] = b58encode(record_hash(b))
    out["bytes"] = b64(b)
    out["attestations"] = [{"identity": b58encode(i), "signature": b58encode(s)} for i, s in attestations]
    return out


# --------------------------------------------------------------------------------------------
# The records.


def build_records(rng):
    genesis = rng.randbytes(32)
    other_genesis = rng.randbytes(32)
    recs = []  # (name, description, fields)

    def rec(name, description, **kw):
        f = {
            "version": 1,
            "genesis_hash": genesis,
            "slot": 0,
            "parent_slot": 0,
            "commitment": 2,
            "flags": 0,
            "state_root": rng.randbytes(32),
            "parent_record_hash": ZERO,
            "blockhash": ZERO,
            "block_height": 0,
            "parent_bank_hash": ZERO,
            "bank_hash": ZERO,
        }
        f.update(kw)
        b = encode_record(f)
        assert record_errors(b) == [], (name, record_errors(b))
        assert parse_fields(b) == f
        recs.append((name, description, f))
        return f

    def full(parent, slot, **kw):
        """A fully populated record chained to `parent`."""
        height = parent["block_height"] + 1 if parent["flags"] & BLOCK else 1
        args = dict(
            slot=slot,
            parent_slot=parent["slot"],
            flags=PARENT | CHAINED | BLOCK | BANK_HASH,
            parent_record_hash=record_hash(encode_record(parent)),
            blockhash=rng.randbytes(32),
            block_height=height,
            parent_bank_hash=rng.randbytes(32),
        )
        args.update(kw)
        return args

    rec("genesis", "The genesis slot: slot 0, no flags, every optional field zero.", slot=0, commitment=2)
    start = rec(
        "startup",
        "The first slot after a start from a snapshot: the parent is unknown, so only BLOCK is set.",
        slot=310_000_000,
        commitment=1,
        flags=BLOCK,
        blockhash=rng.randbytes(32),
        block_height=290_000_000,
    )
    c1 = rec("chain_1", "Fully populated, chained to `startup`.", commitment=1, **full(start, start["slot"] + 1))
    c2 = rec("chain_2", "Fully populated, chained to `chain_1`.", commitment=2, **full(c1, c1["slot"] + 1))
    c3 = rec("chain_3", "Fully populated, chained to `chain_2` across a skipped slot (parent_slot = slot - 2).", commitment=2, **full(c2, c2["slot"] + 2))
    c4 = rec("chain_4", "Fully populated, chained to `chain_3`.", commitment=1, **full(c3, c3["slot"] + 1))
    rec(
        "parent_only",
        "After a restart: the parent slot is known but its record is not (PARENT only); the start of a new chain segment.",
        slot=c4["slot"] + 1,
        parent_slot=c4["slot"],
        flags=PARENT,
        commitment=1,
    )
    rec(
        "parent_bank_hash",
        "PARENT and BANK_HASH, without CHAINED or BLOCK.",
        slot=c4["slot"] + 2,
        parent_slot=c4["slot"] + 1,
        flags=PARENT | BANK_HASH,
        parent_bank_hash=rng.randbytes(32),
        commitment=2,
    )
    rec(
        "parent_block",
        "PARENT and BLOCK, without CHAINED or BANK_HASH; block height 0.",
        slot=77,
        parent_slot=76,
        flags=PARENT | BLOCK,
        blockhash=rng.randbytes(32),
        block_height=0,
        commitment=2,
    )
    rec(
        "fork_of_chain_2",
        "A fork: chained to `chain_2` like `chain_3`, at another slot with another state root.",
        commitment=1,
        **full(c2, c2["slot"] + 1),
    )
    rec(
        "bad_link",
        "Claims `chain_2`'s slot as parent and is CHAINED, but its parent_record_hash is `chain_1`'s record hash.",
        commitment=1,
        **full(c2, c2["slot"] + 3, parent_record_hash=record_hash(encode_record(c1))),
    )
    rec(
        "other_cluster",
        "Chained to `chain_4` (slot and record hash) but with another genesis hash.",
        genesis_hash=other_genesis,
        commitment=2,
        **full(c4, c4["slot"] + 5),
    )
    rec(
        "max_slot",
        "Slot, parent slot and block height at the top of the u64 range: slot 2^64 - 1, parent 2^64 - 2.",
        slot=U64_MAX,
        parent_slot=U64_MAX - 1,
        flags=PARENT | CHAINED | BLOCK | BANK_HASH,
        parent_record_hash=rng.randbytes(32),
        blockhash=rng.randbytes(32),
        block_height=U64_MAX,
        parent_bank_hash=rng.randbytes(32),
        commitment=2,
    )
    rec(
        "all_ones_hashes",
        "Every hash field 0xff..ff (their base58 has no leading 1) and slot 2^63.",
        genesis_hash=bytes([0xFF]) * 32,
        slot=1 << 63,
        parent_slot=(1 << 63) - 1,
        flags=PARENT | CHAINED | BLOCK | BANK_HASH,
        state_root=bytes([0xFF]) * 32,
        parent_record_hash=bytes([0xFF]) * 32,
        blockhash=bytes([0xFF]) * 32,
        block_height=(1 << 53) + 1,
        parent_bank_hash=bytes([0xFF]) * 32,
        commitment=1,
    )

    # SLOT_BANK_HASH records come last, so every record above keeps the bytes it had before the
    # flag existed (the generator draws from one seeded stream, in order). Their bank hashes are
    # made the way a chain carrying the aldb consensus patch makes them, sha256(h || state_root)
    # (§10.1), with h drawn at random.
    def mixed(root):
        h = rng.randbytes(32)
        return h, hashlib.sha256(h + root).digest()

    root = rng.randbytes(32)
    h, bank = mixed(root)
    sb = rec(
        "slot_bank_hash",
        f"All five flags, chained to `chain_4`: a 219-byte record whose bank_hash is sha256(h || state_root) with h = {h.hex()}.",
        commitment=2,
        state_root=root,
        bank_hash=bank,
        **full(c4, c4["slot"] + 1, flags=PARENT | CHAINED | BLOCK | BANK_HASH | SLOT_BANK_HASH),
    )
    rec(
        "after_slot_bank_hash",
        "All flags but SLOT_BANK_HASH (187 bytes), chained to `slot_bank_hash`: a record without the slot's bank hash links to one with it.",
        commitment=2,
        **full(sb, sb["slot"] + 1),
    )
    rec(
        "slot_bank_hash_other",
        "`slot_bank_hash` with another bank_hash only: another record, with another record hash.",
        **{**sb, "bank_hash": mixed(sb["state_root"])[1]},
    )
    root = rng.randbytes(32)
    rec(
        "slot_bank_hash_only",
        "SLOT_BANK_HASH alone: slot 0 with its bank hash, every other optional field zero.",
        slot=0,
        commitment=1,
        flags=SLOT_BANK_HASH,
        state_root=root,
        bank_hash=mixed(root)[1],
    )
    root = rng.randbytes(32)
    rec(
        "parent_slot_bank_hash",
        "PARENT and SLOT_BANK_HASH, without CHAINED, BLOCK or BANK_HASH: the start of a new chain segment that carries the slot's bank hash.",
        slot=c4["slot"] + 9,
        parent_slot=c4["slot"] + 8,
        flags=PARENT | SLOT_BANK_HASH,
        state_root=root,
        bank_hash=mixed(root)[1],
        commitment=2,
    )
    rec(
        "slot_bank_hash_all_ones",
        "All five flags with every hash field 0xff..ff and slot, parent slot and block height at 2^64 - 1, 2^64 - 2, 2^64 - 1.",
        genesis_hash=bytes([0xFF]) * 32,
        slot=U64_MAX,
        parent_slot=U64_MAX - 1,
        flags=PARENT | CHAINED | BLOCK | BANK_HASH | SLOT_BANK_HASH,
        state_root=bytes([0xFF]) * 32,
        parent_record_hash=bytes([0xFF]) * 32,
        blockhash=bytes([0xFF]) * 32,
        block_height=U64_MAX,
        parent_bank_hash=bytes([0xFF]) * 32,
        bank_hash=bytes([0xFF]) * 32,
        commitment=2,
    )
    return recs


def build_chain_cases(recs):
    by = {n: f for n, _, f in recs}
    cases = [
        ("chain_1", "startup", True, "chained to its parent's record"),
        ("chain_2", "chain_1", True, "chained to its parent's record"),
        ("chain_3", "chain_2", True, "chained across a skipped slot"),
        ("chain_4", "chain_3", True, "chained to its parent's record"),
        ("fork_of_chain_2", "chain_2", True, "a fork extends its own parent; the relayer's one-record-per-slot rule is what rejects forks"),
        ("chain_3", "chain_1", False, "parent_slot is not the accepted record's slot"),
        ("chain_2", "chain_2", False, "a record does not extend itself"),
        ("parent_only", "chain_4", False, "parent_slot matches but the record is not CHAINED"),
        ("parent_bank_hash", "parent_only", False, "parent_slot matches but the record is not CHAINED"),
        ("bad_link", "chain_2", False, "parent_slot matches and CHAINED, but parent_record_hash is another record's hash"),
        ("other_cluster", "chain_4", False, "chained to the parent's record but with another genesis hash"),
        ("chain_1", "genesis", False, "parent_slot is not the accepted record's slot"),
        ("startup", "genesis", False, "not PARENT"),
        ("slot_bank_hash", "chain_4", True, "a record with the slot's bank hash chained to its parent's record"),
        ("after_slot_bank_hash", "slot_bank_hash", True, "chained to a parent record that carries the slot's bank hash: the link is the hash of all 219 bytes"),
        ("after_slot_bank_hash", "slot_bank_hash_other", False, "the parent differs from the linked record in its bank_hash only, which the record hash covers"),
        ("slot_bank_hash_other", "chain_4", True, "chained to its parent's record, like `slot_bank_hash`: two records for one slot, which the one-record-per-slot rule rejects"),
        ("parent_slot_bank_hash", "chain_4", False, "not CHAINED"),
    ]
    out = []
    for child, parent, expect, why in cases:
        assert extends(by[child], by[parent]) == expect, (child, parent)
        out.append({"child": child, "parent": parent, "extends": expect, "description": why})
    return out


# --------------------------------------------------------------------------------------------
# Records a decoder must reject.


def build_invalid_records(recs):
    by = {n: f for n, _, f in recs}
    out = []

    def add(name, description, b, error):
        got = record_errors(b)
        assert got == [error], (name, got)
        out.append({"name": name, "description": description, "bytes": b.hex(), "error": error})

    def variant(base, **kw):
        f = dict(by[base])
        f.update(kw)
        return encode_record(f)

    full = encode_record(by["chain_2"])
    none = encode_record(by["genesis"])
    add("empty", "No bytes at all.", b"", "length")
    add("short", "A valid record with its last byte cut off (186 bytes).", full[:-1], "length")
    add("long", "A valid record with a zero byte appended (188 bytes).", full + b"\0", "length")
    add("double", "Two valid records back to back (374 bytes).", full + full, "length")
    add("version_0", "Version byte 0.", variant("chain_2", version=0), "version")
    add("version_2", "Version byte 2.", variant("chain_2", version=2), "version")
    add("commitment_0", "Commitment 0 (processed is never committed).", variant("chain_2", commitment=0), "commitment")
    add("commitment_3", "Commitment 3.", variant("genesis", commitment=3), "commitment")
    add("flag_0x20", "Unknown flag bit 0x20 beside the four flags of a 187-byte record.", variant("chain_2", flags=0x2F), "unknown_flag")
    add("flag_0x80", "Unknown flag bit 0x80 alone.", variant("genesis", flags=0x80), "unknown_flag")
    add(
        "chained_without_parent",
        "CHAINED (with a nonzero parent_record_hash) but not PARENT; parent_slot is zero.",
        variant("genesis", slot=5, flags=CHAINED, parent_record_hash=by["chain_2"]["parent_record_hash"]),
        "flag_without_parent",
    )
    add(
        "bank_hash_without_parent",
        "BANK_HASH (with a nonzero parent_bank_hash) but not PARENT; parent_slot is zero.",
        variant("genesis", slot=5, flags=BANK_HASH, parent_bank_hash=by["chain_2"]["parent_bank_hash"]),
        "flag_without_parent",
    )
    add("parent_slot_equal", "PARENT with parent_slot equal to slot.", variant("chain_2", parent_slot=by["chain_2"]["slot"]), "parent_slot_not_below_slot")
    add("parent_slot_above", "PARENT with parent_slot one above slot.", variant("chain_2", parent_slot=by["chain_2"]["slot"] + 1), "parent_slot_not_below_slot")
    add("parent_of_slot_0", "PARENT at slot 0 with parent_slot 0.", variant("genesis", flags=PARENT), "parent_slot_not_below_slot")
    add("max_slot_parent_max", "PARENT at slot 2^64 - 1 with parent_slot 2^64 - 1.", variant("max_slot", parent_slot=U64_MAX), "parent_slot_not_below_slot")

    # One nonzero byte (the field's last) in the field of an unset flag: the whole field must be
    # checked, not only its first byte.
    def poke(b, offset):
        b = bytearray(b)
        b[offset] = 0x01
        return bytes(b)

    add("parent_slot_without_parent", "No PARENT, but parent_slot's last byte is 1 (parent_slot 2^56).", poke(none, 48), "unset_field_not_zero")
    add("parent_record_hash_without_chained", "PARENT without CHAINED, but parent_record_hash's last byte is 1.", poke(encode_record(by["parent_only"]), 114), "unset_field_not_zero")
    add("blockhash_without_block", "No BLOCK, but blockhash's last byte is 1.", poke(none, 146), "unset_field_not_zero")
    add("block_height_without_block", "No BLOCK, but block_height's last byte is 1.", poke(encode_record(by["parent_bank_hash"]), 154), "unset_field_not_zero")
    add("parent_bank_hash_without_bank_hash", "No BANK_HASH, but parent_bank_hash's last byte is 1.", poke(encode_record(by["startup"]), 186), "unset_field_not_zero")
    add("parent_bank_hash_first_byte", "No BANK_HASH, but parent_bank_hash's first byte is 1.", poke(none, 155), "unset_field_not_zero")

    # SLOT_BANK_HASH: the record is 219 bytes exactly when the flag is set.
    sb = encode_record(by["slot_bank_hash"])
    assert len(sb) == RECORD_LEN_SLOT_BANK_HASH
    add("slot_bank_hash_cut", "SLOT_BANK_HASH set but the bank hash cut off: the first 187 bytes of `slot_bank_hash`.", sb[:RECORD_LEN], "length")
    add("slot_bank_hash_short", "`slot_bank_hash` with its last byte cut off (218 bytes).", sb[:-1], "length")
    add("slot_bank_hash_long", "`slot_bank_hash` with a zero byte appended (220 bytes).", sb + b"\0", "length")
    add(
        "bank_hash_without_slot_bank_hash",
        "A valid 187-byte record (`chain_2`) with 32 bytes appended but no SLOT_BANK_HASH (219 bytes).",
        full + by["slot_bank_hash"]["bank_hash"],
        "length",
    )
    add(
        "slot_bank_hash_flag_cleared",
        "`slot_bank_hash` with SLOT_BANK_HASH cleared and nothing else changed (219 bytes).",
        sb[:50] + bytes([sb[50] & ~SLOT_BANK_HASH]) + sb[51:],
        "length",
    )
    add("slot_bank_hash_flag_0x40", "Unknown flag bit 0x40 beside all five known ones, in a 219-byte record.", sb[:50] + bytes([sb[50] | 0x40]) + sb[51:], "unknown_flag")
    add("slot_bank_hash_version_2", "`slot_bank_hash` with version byte 2.", bytes([2]) + sb[1:], "version")
    only = encode_record(by["slot_bank_hash_only"])
    add(
        "slot_bank_hash_chained_without_parent",
        "`slot_bank_hash_only` (219 bytes) with CHAINED and a nonzero parent_record_hash but not PARENT.",
        variant("slot_bank_hash_only", flags=SLOT_BANK_HASH | CHAINED, parent_record_hash=by["chain_2"]["parent_record_hash"]),
        "flag_without_parent",
    )
    add("slot_bank_hash_parent_bank_hash_not_zero", "`slot_bank_hash_only` (219 bytes) without BANK_HASH, but parent_bank_hash's last byte is 1.", poke(only, 186), "unset_field_not_zero")
    return out


# --------------------------------------------------------------------------------------------
# Signers and attestations.

SIGNER_SEEDS = [
    # RFC 8032 §7.1 TEST 1's secret key, then three more fixed seeds.
    bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"),
    hashlib.sha256(b"aldb records-v1 signer 1").digest(),
    hashlib.sha256(b"aldb records-v1 signer 2").digest(),
    hashlib.sha256(b"aldb records-v1 signer 3").digest(),
]

# Which signers attest which records (signer 3 is the one left out of most quorum sets).
ATTESTERS = {
    "genesis": [0, 1, 2],
    "startup": [0, 1],
    "chain_1": [0, 1, 2],
    "chain_2": [0, 1, 2, 3],
    "chain_3": [0, 2],
    "chain_4": [1],
    "parent_only": [0, 3],
    "parent_bank_hash": [2],
    "parent_block": [3],
    "fork_of_chain_2": [3],
    "bad_link": [],
    "other_cluster": [1],
    "max_slot": [0, 1, 2, 3],
    "all_ones_hashes": [2],
    "slot_bank_hash": [0, 1, 2],
    "after_slot_bank_hash": [0, 1],
    "slot_bank_hash_other": [3],
    "slot_bank_hash_only": [1],
    "parent_slot_bank_hash": [2, 3],
    "slot_bank_hash_all_ones": [0],
}


def small_order_points():
    """The eight points of order dividing 8, by encoding: [L]P for points P until all are seen."""
    found = {}
    y = 2
    while len(found) < 8:
        P = point_decompress(int.to_bytes(y, 32, "little"))
        y += 1
        if P is None:
            continue
        for sign in (0, 1):
            T = point_mul(q, P if sign == 0 else point_neg(P))
            assert small_order(T)
            found[point_compress(T)] = T
    return found


def non_point_encoding(start):
    """The smallest y >= start (canonical, sign 0) that is not the y-coordinate of a point."""
    y = start
    while point_decompress(int.to_bytes(y, 32, "little")) is not None:
        y += 1
    return int.to_bytes(y, 32, "little")


def build_attestations(recs, rng):
    by = {n: f for n, _, f in recs}
    signers = [(seed, secret_to_public(seed)) for seed in SIGNER_SEEDS]
    atts = []
    per_record = {}
    for name, _, f in recs:
        b = encode_record(f)
        msg = attest_message(b)
        per_record[name] = []
        for i in ATTESTERS[name]:
            seed, pub = signers[i]
            sig = sign(seed, msg)
            assert verify_strict(pub, msg, sig)
            per_record[name].append((pub, sig))
            atts.append({"record": name, "signer": i, "identity": b58encode(pub), "message": msg.hex(), "signature": b58encode(sig)})
    return signers, atts, per_record


def build_invalid_attestations(recs, signers, per_record):
    by = {n: f for n, _, f in recs}
    out = []

    def add(name, description, record, identity, sig, error, rule, also=()):
        # `error` is the one rule broken, or (only where no other choice exists, see r_order_8)
        # the first broken rule in §9.3's order; check_signature lists them in that order.
        msg = attest_message(encode_record(by[record]))
        got = check_signature(identity, msg, sig)
        assert got == [error, *also], (name, got)
        out.append(
            {
                "name": name,
                "description": description,
                "record": record,
                "message": msg.hex(),
                "identity": b58encode(identity),
                "signature": b58encode(sig),
                "rule": rule,
                "error": error,
            }
        )

    rec = "chain_2"
    msg = attest_message(encode_record(by[rec]))
    seed0, pub0 = signers[0]
    seed1, pub1 = signers[1]
    good = sign(seed0, msg)
    a0, _ = secret_expand(seed0)

    def flip(b, i, bit=1):
        b = bytearray(b)
        b[i] ^= bit
        return bytes(b)

    bit = 1
    while point_decompress(flip(good, 0, bit)[:32]) is None:
        bit <<= 1
    add("tampered_r", "A valid signature with one bit of R's first byte flipped, chosen so that R still decodes.", rec, pub0, flip(good, 0, bit), "equation", 4)
    add("tampered_s", "A valid signature with one bit of S flipped (byte 32).", rec, pub0, flip(good, 32), "equation", 4)
    add("wrong_identity", "Signer 0's valid signature presented with signer 1's identity.", rec, pub1, good, "equation", 4)
    other = sign(seed0, attest_message(encode_record(by["chain_1"])))
    add("other_record", "Signer 0's valid signature over `chain_1` presented for `chain_2`.", rec, pub0, other, "equation", 4)
    raw = sign(seed0, encode_record(by[rec]))
    add("unprefixed_bytes", "Signer 0's signature over the record's 187 bytes themselves rather than the attestation message.", rec, pub0, raw, "equation", 4)
    bare = sign(seed0, record_hash(encode_record(by[rec])))
    add("unprefixed_hash", "Signer 0's signature over the bare record hash, without the \"aldb-attest-v1\" prefix.", rec, pub0, bare, "equation", 4)

    s = int.from_bytes(good[32:], "little")
    add("s_plus_l", "A valid signature with S replaced by S + L: the equation still holds mod L, only the range check rejects it.", rec, pub0, good[:32] + int.to_bytes(s + q, 32, "little"), "s_not_reduced", 1)
    m = ((1 << 256) - 1 - s) // q
    add("s_plus_many_l", f"A valid signature with S replaced by S + {m}L, the largest such value below 2^256.", rec, pub0, good[:32] + int.to_bytes(s + m * q, 32, "little"), "s_not_reduced", 1)

    # Small-order identities whose signature satisfies the cofactorless equation: for the neutral
    # point, [S]B - [k]A = [S]B, so R = [S]B with any S verifies unless rule 3 is applied.
    small = small_order_points()
    neutral = point_compress(IDENTITY)
    r = 0x1234567
    sig = point_compress(point_mul(r, G)) + int.to_bytes(r, 32, "little")
    add("identity_neutral_point", "Identity 0100..00 (the neutral point, order 1) with R = [S]B: the cofactorless equation holds; only the small-order rule rejects it.", rec, neutral, sig, "identity_small_order", 3)
    # Identities of order 2, 4 and 8: with R = [r]B + U for a small-order U, the equation holds
    # when [k]A = -U, which a search over r and U finds quickly.
    def forge(A_enc):
        A = small[A_enc]
        for r in range(1, 400):
            for U_enc in sorted(small):
                Rs = point_compress(point_add(point_mul(r, G), small[U_enc]))
                k = sha512_modq(Rs + A_enc + msg)
                if point_equal(point_add(point_mul(k, A), small[U_enc]), IDENTITY):
                    return Rs + int.to_bytes(r, 32, "little")
        raise AssertionError("no signature found")

    def order(P):
        return next(n for n in (1, 2, 4, 8) if point_equal(point_mul(n, P), IDENTITY))

    by_order = {n: sorted(e for e, P in small.items() if order(P) == n) for n in (1, 2, 4, 8)}
    order8 = by_order[8]
    add("identity_order_2", "Identity ecff..7f (y = -1, the point of order 2) with a signature that satisfies the cofactorless equation; only the small-order rule rejects it.", rec, by_order[2][0], forge(by_order[2][0]), "identity_small_order", 3)
    add("identity_order_4", "Identity 0000..00 (y = 0, a point of order 4) with a signature that satisfies the cofactorless equation.", rec, by_order[4][0], forge(by_order[4][0]), "identity_small_order", 3)
    add("identity_order_8", "An identity of order 8 with a signature that satisfies the cofactorless equation.", rec, order8[0], forge(order8[0]), "identity_small_order", 3)

    # Small-order R: with a real key, [S]B - [k]A is in the prime-order subgroup, so the only
    # small-order R that can satisfy the equation is the neutral point: S = k * a.
    k = sha512_modq(neutral + pub0 + msg)
    sig = neutral + int.to_bytes(k * a0 % q, 32, "little")
    add("r_neutral_point", "R = 0100..00 (the neutral point) and S = k * a: the cofactorless equation holds for signer 0's key; only the small-order rule rejects it.", rec, pub0, sig, "r_small_order", 3)
    add("r_order_8", "R of order 8 with signer 0's S. (No R of order 8 can satisfy the equation for a key of prime order, so this one breaks rule 4 as well.)", rec, pub0, order8[1] + good[32:], "r_small_order", 3, also=["equation"])

    bad = non_point_encoding(2)
    add("identity_not_on_curve", f"Identity with y = {int.from_bytes(bad, 'little')}, which is not the y-coordinate of any curve point.", rec, bad, good, "identity_not_a_point", 2)
    add("r_not_on_curve", f"R replaced by y = {int.from_bytes(bad, 'little')}, not the y-coordinate of any point (so, necessarily, the equation fails too).", rec, pub0, bad + good[32:], "r_not_a_point", 2, also=["equation"])
    neg_zero = int.to_bytes(1 | (1 << 255), 32, "little")
    add("identity_negative_zero", "Identity 0100..80: y = 1 with the sign bit set although x = 0 (RFC 8032 §5.1.3 rejects it).", rec, neg_zero, good, "identity_not_a_point", 2)
    # y >= p is a non-canonical encoding, which RFC 8032 §5.1.3 rejects. Find one whose y - p is a
    # point's y-coordinate, so the decoding rule and not the curve equation is what rejects it.
    y = p + 2
    while point_decompress(int.to_bytes(y - p, 32, "little")) is None:
        y += 1
    noncanon = int.to_bytes(y, 32, "little")
    assert not small_order(point_decompress(int.to_bytes(y - p, 32, "little")))
    add("identity_non_canonical", f"Identity with y = p + {y - p} (non-canonical; y - p is a point of large order).", rec, noncanon, good, "identity_not_a_point", 2)
    add("r_non_canonical", f"R with y = p + {y - p} (non-canonical; the equation, compared by encoding, necessarily fails too).", rec, pub0, noncanon + good[32:], "r_not_a_point", 2, also=["equation"])
    return out


def build_quorum(recs, signers, per_record):
    by = {n: f for n, _, f in recs}
    out = []
    pubs = [pub for _, pub in signers]

    def add(name, description, record, members, threshold, attestations, expect_ok, expect_count):
        b = encode_record(by[record])
        ids = [pubs[i] if isinstance(i, int) else i for i in members]
        assert 1 <= threshold <= len(ids) and len(set(ids)) == len(ids)
        ok, count = quorum(set(ids), threshold, b, attestations)
        assert (ok, count) == (expect_ok, expect_count), (name, ok, count)
        out.append(
            {
                "name": name,
                "description": description,
                "record": record,
                "identities": [b58encode(i) for i in ids],
                "threshold": threshold,
                "attestations": [{"identity": b58encode(i), "signature": b58encode(s)} for i, s in attestations],
                "accepted": ok,
                "valid_identities": count,
            }
        )

    rec = "chain_2"
    msg = attest_message(encode_record(by[rec]))
    sig = {i: sign(signers[i][0], msg) for i in range(4)}
    att = lambda i: (pubs[i], sig[i])
    bad = lambda i: (pubs[i], sig[i][:32] + bytes([sig[i][32] ^ 1]) + sig[i][33:])
    wrong_rec = lambda i: (pubs[i], sign(signers[i][0], attest_message(encode_record(by["chain_1"]))))

    add("two_of_three", "Signers 0 and 1 of {0, 1, 2}, threshold 2.", rec, [0, 1, 2], 2, [att(0), att(1)], True, 2)
    add("three_of_three", "All three of {0, 1, 2}, threshold 3.", rec, [0, 1, 2], 3, [att(2), att(0), att(1)], True, 3)
    add("one_of_three_missing", "Only signer 0 of {0, 1, 2}, threshold 2.", rec, [0, 1, 2], 2, [att(0)], False, 1)
    add("duplicate_identity", "Signer 0's attestation twice: one identity counts once.", rec, [0, 1, 2], 2, [att(0), att(0)], False, 1)
    add("outsider", "Signer 0 and signer 3, who is not in {0, 1, 2}: the outsider counts for nothing.", rec, [0, 1, 2], 2, [att(0), att(3)], False, 1)
    add("invalid_signature", "Signer 0 valid, signer 1's signature with a flipped bit.", rec, [0, 1, 2], 2, [att(0), bad(1)], False, 1)
    add("other_record_signature", "Signer 0 valid, signer 1's signature over another record.", rec, [0, 1, 2], 2, [att(0), wrong_rec(1)], False, 1)
    add("invalid_then_valid", "Signer 1's invalid attestation before its valid one: the invalid one must not use up the identity.", rec, [0, 1, 2], 2, [bad(1), att(0), att(1)], True, 2)
    add("no_attestations", "No attestations, threshold 1.", rec, [0, 1, 2], 1, [], False, 0)
    add("only_outsiders", "Only signer 3, not in {0, 1, 2}, threshold 1.", rec, [0, 1, 2], 1, [att(3)], False, 0)
    add("one_of_one", "Set {3}, threshold 1, signer 3's attestation.", rec, [3], 1, [att(3)], True, 1)
    add(
        "three_of_four_with_noise",
        "Set {0, 1, 2, 3}, threshold 3: signers 3, 1 (twice), an invalid one from 2, and 0.",
        rec,
        [0, 1, 2, 3],
        3,
        [att(3), att(1), bad(2), att(1), att(0)],
        True,
        3,
    )
    add("threshold_above_valid", "Set {0, 1, 2, 3}, threshold 4, three valid.", rec, [0, 1, 2, 3], 4, [att(0), att(1), att(2), att(1)], False, 3)
    # A small-order identity configured in the set with a signature that satisfies the
    # cofactorless equation still counts for nothing.
    neutral = point_compress(IDENTITY)
    r = 0x7654321
    weak = point_compress(point_mul(r, G)) + int.to_bytes(r, 32, "little")
    add(
        "small_order_member",
        "Set {0, neutral point 0100..00}, threshold 2: signer 0 valid and the neutral point with a signature satisfying the cofactorless equation, which §9.3 rule 3 rejects.",
        rec,
        [0, neutral],
        2,
        [att(0), (neutral, weak)],
        False,
        1,
    )
    return out


# --------------------------------------------------------------------------------------------


def self_test():
    specref_self_test()
    # The eight points of small order, which the invalid attestations are built from.
    assert len(small_order_points()) == 8


def main():
    self_test()
    rng = random.Random(SEED)
    recs = build_records(rng)
    signers, atts, per_record = build_attestations(recs, rng)
    records = []
    for name, description, f in recs:
        b = encode_record(f)
        records.append(
            {
                "name": name,
                "description": description,
                "fields": fields_json(f),
                "bytes": b.hex(),
                "record_hash": b58encode(record_hash(b)),
                "json": record_json_form(f, per_record[name]),
            }
        )
    doc = {
        "version": 1,
        "description": "aldb root records and attestations (docs/SPEC.md §9) test vectors. Generated by tools/vectors/gen_records.py; do not edit by hand.",
        "attestation_prefix": ATTEST_PREFIX.hex(),
        "records": records,
        "chain": build_chain_cases(recs),
        "invalid_records": build_invalid_records(recs),
        "signers": [{"seed": seed.hex(), "identity": b58encode(pub)} for seed, pub in signers],
        "attestations": atts,
        "invalid_attestations": build_invalid_attestations(recs, signers, per_record),
        "quorum": build_quorum(recs, signers, per_record),
    }
    summary = (
        f"{len(doc['records'])} records, {len(doc['chain'])} chain cases, "
        f"{len(doc['invalid_records'])} invalid records, {len(doc['signers'])} signers, {len(atts)} attestations, "
        f"{len(doc['invalid_attestations'])} invalid attestations, {len(doc['quorum'])} quorum cases"
    )
    return write_or_check(OUT, "gen_records.py", doc, 2, summary)


if __name__ == "__main__":
    sys.exit(main())
