#!/usr/bin/env python3
"""Test vectors for the vote chain (docs/SPEC.md §10): the bank-hash rule and vote evidence.

A second implementation of §10 written from the spec and from agave 4.2.0's sources, sharing no
code with the Rust crates or the TypeScript package: legacy transactions are built byte by byte
as agave's vote client builds them (`new_tower_sync_transaction`, the legacy message compiler's
key order), TowerSync in the compact form of `serde_tower_sync`, and the checks of §10.4 are
evaluated one by one, so every invalid case is asserted to break the rule it is about. SHA-256
and BLAKE2s are hashlib's; Ed25519 is RFC 8032 §6's reference code with the strict verification
of §9.3. The account proof, the hashes and Ed25519 come from specref.py, the reference code this
script shares with gen_vectors.py and gen_records.py.

Standard library only (Python 3.11). Keys come from fixed seeds, other bytes from
random.Random(SEED), and Ed25519 signing is deterministic, so running the script again rewrites
tests/vectors/votes-v1.json byte for byte.

    python3 tools/vectors/gen_votes.py            # write the file
    python3 tools/vectors/gen_votes.py --check    # exit 1 if the checked-in file differs
"""

import random
import struct
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
    b64decode,
    key_path,
    proof_json,
    prove,
    secret_to_public,
    sha256,
    sign,
    tree_root,
    verify_strict,
    write_or_check,
)
from specref import self_test as specref_self_test  # noqa: E402

SEED = 0xA1DB_0015
OUT = Path(__file__).resolve().parent.parent.parent / "tests" / "vectors" / "votes-v1.json"

PACKET_DATA_SIZE = 1232  # solana-packet: the largest transaction on the wire
MAX_LOCKOUTS = 31  # MAX_LOCKOUT_HISTORY: the most lockouts a TowerSync may carry
TAG_TOWER_SYNC = 14  # VoteInstruction::TowerSync, the 15th variant
TAG_TOWER_SYNC_SWITCH = 15  # VoteInstruction::TowerSyncSwitch
MAX_EVIDENCE_VOTES = 4096

VOTE_PROGRAM = b58decode("Vote111111111111111111111111111111111111111")
SYSTEM_PROGRAM = ZERO
STAKE_PROGRAM = b58decode("Stake11111111111111111111111111111111111111")
assert len(VOTE_PROGRAM) == 32


# --------------------------------------------------------------------------------------------
# Wire pieces: short_vec (solana-short-vec), the serde varint (solana-serde-varint), bincode.


def short_vec(n):
    assert 0 <= n <= 0xFFFF
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def varint(n):
    assert 0 <= n <= U64_MAX
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def u32(n):
    return struct.pack("<I", n)


def u64(n):
    return struct.pack("<Q", n)


def tower_sync_bytes(t, lockout_bytes=None):
    """CompactTowerSync: root (u64, u64::MAX for none), short_vec of (varint offset, u8
    confirmation count), hash, Option<i64> timestamp, block_id."""
    out = u64(U64_MAX if t["root"] is None else t["root"])
    if lockout_bytes is None:
        prev = t["root"] or 0
        lockout_bytes = short_vec(len(t["lockouts"]))
        for slot, conf in t["lockouts"]:
            lockout_bytes += varint(slot - prev) + bytes([conf])
            prev = slot
    out += lockout_bytes
    out += t["hash"]
    out += b"\0" if t["timestamp"] is None else b"\1" + struct.pack("<q", t["timestamp"])
    return out + t["block_id"]


def instruction_data(t, switch_hash=None, lockout_bytes=None):
    if switch_hash is None:
        return u32(TAG_TOWER_SYNC) + tower_sync_bytes(t, lockout_bytes)
    return u32(TAG_TOWER_SYNC_SWITCH) + tower_sync_bytes(t, lockout_bytes) + switch_hash


def compile_message(payer, instructions, blockhash):
    """The legacy message compiler: the payer first, then writable signers, read-only signers,
    writable non-signers and read-only non-signers, each group in ascending key order (a
    BTreeMap); programs are read-only non-signers. `instructions` are (program, [(key, signer,
    writable)], data)."""
    meta = {}
    for program, accounts, _ in instructions:
        meta.setdefault(program, [False, False])
        for key, signer, writable in accounts:
            m = meta.setdefault(key, [False, False])
            m[0] |= signer
            m[1] |= writable
    meta.pop(payer, None)
    ws = [payer] + sorted(k for k, (s, w) in meta.items() if s and w)
    rs = sorted(k for k, (s, w) in meta.items() if s and not w)
    wn = sorted(k for k, (s, w) in meta.items() if not s and w)
    rn = sorted(k for k, (s, w) in meta.items() if not s and not w)
    keys = ws + rs + wn + rn
    out = bytes([len(ws) + len(rs), len(rs), len(rn)]) + short_vec(len(keys)) + b"".join(keys) + blockhash
    out += short_vec(len(instructions))
    for program, accounts, data in instructions:
        idx = [keys.index(k) for k, _, _ in accounts]
        out += bytes([keys.index(program)]) + short_vec(len(idx)) + bytes(idx) + short_vec(len(data)) + data
    return out, keys[: len(ws) + len(rs)]


def transaction(message, signer_keys, secrets):
    """Signatures in the order of the message's signer keys, then the message."""
    sigs = [sign(secrets[k], message) for k in signer_keys]
    return short_vec(len(sigs)) + b"".join(sigs) + message


def vote_transaction(v, tower, blockhash, switch_hash=None, data=None):
    """agave's `new_tower_sync_transaction`: the node identity pays, the authorized voter signs
    the instruction (`tower_sync`: vote account writable, voter a read-only signer)."""
    if data is None:
        data = instruction_data(tower, switch_hash)
    ix = (VOTE_PROGRAM, [(v["vote_account"], False, True), (v["voter"], True, False)], data)
    message, signer_keys = compile_message(v["node"], [ix], blockhash)
    return transaction(message, signer_keys, v["secrets"])


# --------------------------------------------------------------------------------------------
# The checks of §10.4, a second time: a transaction's decoding, then its weight for a slot.


class Reject(Exception):
    def __init__(self, error):
        super().__init__(error)
        self.error = error


class Reader:
    def __init__(self, b, error):
        self.b, self.i, self.error = b, 0, error

    def take(self, n):
        if self.i + n > len(self.b):
            raise Reject(self.error)
        out = self.b[self.i : self.i + n]
        self.i += n
        return out

    def u8(self):
        return self.take(1)[0]

    def short_vec(self):
        val = 0
        for nth in range(3):
            byte = self.u8()
            if byte == 0 and nth > 0:
                raise Reject(self.error)  # an alias: a longer encoding of a smaller number
            if nth == 2 and byte & 0x80:
                raise Reject(self.error)
            val |= (byte & 0x7F) << (7 * nth)
            if val > 0xFFFF:
                raise Reject(self.error)
            if not byte & 0x80:
                return val
        raise Reject(self.error)

    def varint(self):
        val = 0
        for nth in range(10):
            byte = self.u8()
            val |= (byte & 0x7F) << (7 * nth)
            if not byte & 0x80:
                if val > U64_MAX or (byte == 0 and nth > 0):
                    raise Reject(self.error)
                return val
        raise Reject(self.error)


def parse_transaction(b):
    """Returns the decoded vote or raises Reject with the error of §10.4 step 1."""
    if len(b) > PACKET_DATA_SIZE:
        raise Reject("oversized")
    r = Reader(b, "malformed")
    nsig = r.short_vec()
    sigs = [r.take(64) for _ in range(nsig)]
    msg_start = r.i
    if r.i < len(b) and b[r.i] & 0x80:
        raise Reject("versioned")
    nreq, nro_signed, nro_unsigned = r.take(3)
    keys = [r.take(32) for _ in range(r.short_vec())]
    blockhash = r.take(32)
    ixs = []
    for _ in range(r.short_vec()):
        program = r.u8()
        accounts = list(r.take(r.short_vec()))
        data = r.take(r.short_vec())
        ixs.append((program, accounts, data))
    if r.i != len(b):
        raise Reject("malformed")
    if nsig == 0 or nreq != nsig or nro_signed >= nreq or nreq + nro_unsigned > len(keys):
        raise Reject("malformed")
    if len(set(keys)) != len(keys):
        raise Reject("malformed")
    for program, accounts, _ in ixs:
        if program == 0 or program >= len(keys) or any(a >= len(keys) for a in accounts):
            raise Reject("malformed")
    if len(ixs) != 1 or keys[ixs[0][0]] != VOTE_PROGRAM:
        raise Reject("not_tower_sync")
    _, accounts, data = ixs[0]
    if len(data) < 4 or struct.unpack("<I", data[:4])[0] not in (TAG_TOWER_SYNC, TAG_TOWER_SYNC_SWITCH):
        raise Reject("not_tower_sync")
    switch = struct.unpack("<I", data[:4])[0] == TAG_TOWER_SYNC_SWITCH
    t = Reader(data[4:], "malformed_vote")
    root = struct.unpack("<Q", t.take(8))[0]
    root = None if root == U64_MAX else root
    n = t.short_vec()
    if n == 0 or n > MAX_LOCKOUTS:
        raise Reject("malformed_vote")
    lockouts, slot = [], root or 0
    for i in range(n):
        offset = t.varint()
        conf = t.u8()
        if offset == 0 and (i > 0 or root is not None):
            raise Reject("malformed_vote")
        slot += offset
        if slot > U64_MAX:
            raise Reject("malformed_vote")
        lockouts.append((slot, conf))
    vote_hash = t.take(32)
    tag = t.u8()
    if tag not in (0, 1):
        raise Reject("malformed_vote")
    timestamp = struct.unpack("<q", t.take(8))[0] if tag else None
    block_id = t.take(32)
    switch_hash = t.take(32) if switch else None
    if t.i != len(t.b):
        raise Reject("malformed_vote")
    if not accounts:
        raise Reject("malformed_vote")
    return {
        "message": b[msg_start:],
        "signatures": sigs,
        "signer_keys": keys[:nreq],
        "fee_payer": keys[0],
        "vote_account": keys[accounts[0]],
        "instruction_signers": sorted({keys[a] for a in accounts if a < nreq}),
        "recent_blockhash": blockhash,
        "root": root,
        "lockouts": lockouts,
        "slot": lockouts[-1][0],
        "hash": vote_hash,
        "timestamp": timestamp,
        "block_id": block_id,
        "switch_hash": switch_hash,
    }


def expected_bank_hash(h, root, hard_forks):
    mixed = sha256(h + root)
    return mixed if hard_forks is None else sha256(mixed + u64(hard_forks))


def vouched_time(stamped, total):
    """§10.4's freshness: the newest time t such that the counted votes stamped t or later hold
    more than 1/3 of the total stake, or None. `stamped` is (timestamp, stake) per counted vote."""
    acc = 0
    for t, s in sorted(stamped, key=lambda x: -x[0]):
        acc += s
        if 3 * acc > total:
            return t
    return None


def evaluate(evidence_bytes, members, slot, bank_hash, stamped=None):
    """§10.4 over a list of transactions: per vote the outcome, and the stake that agreed. The
    counted votes' (timestamp, stake) are appended to `stamped` when given."""
    counted, outcomes, stake = set(), [], 0
    for b in evidence_bytes:
        try:
            v = parse_transaction(b)
            member = members.get(v["vote_account"])
            if member is None:
                raise Reject("unknown_vote_account")
            if member["voter"] not in v["instruction_signers"]:
                raise Reject("wrong_signer")
            if v["slot"] != slot:
                raise Reject("wrong_slot")
            if v["hash"] != bank_hash:
                raise Reject("wrong_hash")
            if v["vote_account"] in counted:
                raise Reject("duplicate")
            if not all(verify_strict(k, v["message"], s) for k, s in zip(v["signer_keys"], v["signatures"])):
                raise Reject("bad_signature")
            counted.add(v["vote_account"])
            stake += member["stake"]
            outcomes.append("counted")
            if stamped is not None and v["timestamp"] is not None:
                stamped.append((v["timestamp"], member["stake"]))
        except Reject as e:
            outcomes.append(e.error)
    return outcomes, stake


# --------------------------------------------------------------------------------------------
# The validators, the slot and its state.

SLOT = 312_456_789


def seed(label):
    return sha256(b"aldb-votes-v1 " + label.encode())


def make_validator(name, stake, separate_voter=True):
    node_seed, vote_seed, voter_seed = seed(name + " node"), seed(name + " vote"), seed(name + " voter")
    node = secret_to_public(node_seed)
    voter = secret_to_public(voter_seed) if separate_voter else node
    secrets = {node: node_seed}
    if separate_voter:
        secrets[voter] = voter_seed
    return {
        "name": name,
        "node": node,
        "node_seed": node_seed,
        "vote_account": secret_to_public(vote_seed),
        "voter": voter,
        "voter_seed": voter_seed if separate_voter else node_seed,
        "stake": stake,
        "secrets": secrets,
    }


def tower_for(slot, bank_hash, rng, root_offset=40, timestamp=True, depth=5):
    """A tower as a validator in steady state sends it: the last `depth` slots, confirmation
    counts falling to 1 at the voted slot, a root behind them."""
    lockouts = [(slot - depth + 1 + i, depth - i) for i in range(depth)]
    return {
        "root": None if root_offset is None else slot - root_offset,
        "lockouts": lockouts,
        "hash": bank_hash,
        "timestamp": 1_760_000_000 + rng.randrange(1000) if timestamp else None,
        "block_id": rng.randbytes(32),
    }


def member_json(v):
    return {"voteAccount": b58encode(v["vote_account"]), "authorizedVoter": b58encode(v["voter"]), "stake": v["stake"]}


def account_json(acct):
    lamports, owner, executable, data = acct
    return {
        "lamports": lamports,
        "owner": b58encode(owner),
        "executable": bool(executable),
        "data": [b64(data), "base64"],
        "space": len(data),
    }


def self_test():
    specref_self_test()
    assert sha256(b"abc").hex() == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert short_vec(0x7F) == b"\x7f" and short_vec(0x80) == b"\x80\x01" and short_vec(0xFFFF) == b"\xff\xff\x03"
    assert varint(300) == b"\xac\x02" and len(varint(U64_MAX)) == 10
    for n in (0, 1, 127, 128, 300, 2**63, U64_MAX):
        assert Reader(varint(n), "x").varint() == n
    for n in (0, 127, 128, 0x3FFF, 0x4000, 0xFFFF):
        assert Reader(short_vec(n), "x").short_vec() == n


def main():
    self_test()
    rng = random.Random(SEED)

    # Bank hashes: h as 4.2.0 computes it before hard-fork data, then the mix, then hard forks.
    bank_hash_cases = []
    for name, sig_count, hard_forks in [
        ("typical", 1_234, None),
        ("no_signatures", 0, None),
        ("max_signature_count", U64_MAX, None),
        ("hard_fork", 77, 1),
        ("two_hard_forks", 77, 2),
    ]:
        parent_hash, last_blockhash, lt_hash, root = rng.randbytes(32), rng.randbytes(32), rng.randbytes(2048), rng.randbytes(32)
        h = sha256(sha256(parent_hash + u64(sig_count) + last_blockhash) + lt_hash)
        without = h if hard_forks is None else sha256(h + u64(hard_forks))
        bank_hash_cases.append(
            {
                "name": name,
                "parent_hash": b58encode(parent_hash),
                "signature_count": sig_count,
                "last_blockhash": b58encode(last_blockhash),
                "accounts_lt_hash": lt_hash.hex(),
                "hard_forks": hard_forks,
                "h": b58encode(h),
                "root": b58encode(root),
                "mixed": b58encode(sha256(h + root)),
                "bank_hash": b58encode(expected_bank_hash(h, root, hard_forks)),
                "bank_hash_without_feature": b58encode(without),
            }
        )
    empty = {"name": "empty_tree_root", "h": b58encode(ZERO), "root": b58encode(ZERO)}
    empty["bank_hash"] = b58encode(sha256(bytes(64)))
    bank_hash_cases.append(
        {
            "name": "zero_h_and_empty_root",
            "parent_hash": None,
            "signature_count": None,
            "last_blockhash": None,
            "accounts_lt_hash": None,
            "hard_forks": None,
            "h": empty["h"],
            "root": empty["root"],
            "mixed": empty["bank_hash"],
            "bank_hash": empty["bank_hash"],
            "bank_hash_without_feature": empty["h"],
        }
    )

    # The state at SLOT: a few accounts, one proved present, one absent.
    accounts = {}
    for i in range(9):
        data = rng.randbytes(rng.choice([0, 3, 80, 165]))
        accounts[rng.randbytes(32)] = (rng.randrange(1, 10**12), rng.randbytes(32), i == 4, data)
    items = sorted((key_path(k), account_value(*a)) for k, a in accounts.items())
    state_root = tree_root(items)
    present_key = sorted(accounts)[2]
    absent_key = rng.randbytes(32)
    h = rng.randbytes(32)
    bank_hash = expected_bank_hash(h, state_root, None)
    blockhash = rng.randbytes(32)

    # Validators: stakes 100, 100, 50, 50 (total 300), so two of the large ones are exactly 2/3.
    # v0 votes with its node identity as authorized voter (one signature); the others have a
    # separate voter key, the node paying (two signatures).
    vals = [
        make_validator("v0", 100, separate_voter=False),
        make_validator("v1", 100),
        make_validator("v2", 50),
        make_validator("v3", 50),
    ]
    outsider = make_validator("outsider", 1)
    big_vals = [make_validator(f"big{i}", s) for i, s in enumerate([U64_MAX, U64_MAX, U64_MAX - 1, 2])]
    sets = {
        "main": [member_json(v) for v in vals],
        "big": [member_json(v) for v in big_vals],
    }
    members = {"main": {v["vote_account"]: v for v in vals}, "big": {v["vote_account"]: v for v in big_vals}}

    def vote(v, slot=SLOT, hash_=bank_hash, **kw):
        switch = kw.pop("switch_hash", None)
        return vote_transaction(v, tower_for(slot, hash_, rng, **kw), blockhash, switch)

    def flip(tx, at):
        b = bytearray(tx)
        b[at] ^= 0x01
        return bytes(b)

    valid = [vote(v) for v in vals]
    hard_fork_hash = expected_bank_hash(h, state_root, 3)

    # Transactions the parser must accept, with what it must read from them.
    tx_cases = []

    def add_tx(name, description, tx):
        v = parse_transaction(tx)
        tx_cases.append(
            {
                "name": name,
                "description": description,
                "bytes": b64(tx),
                "fee_payer": b58encode(v["fee_payer"]),
                "signers": [b58encode(k) for k in v["signer_keys"]],
                "vote_account": b58encode(v["vote_account"]),
                "recent_blockhash": b58encode(v["recent_blockhash"]),
                "instruction": "tower_sync" if v["switch_hash"] is None else "tower_sync_switch",
                "root": v["root"],
                "lockouts": [[s, c] for s, c in v["lockouts"]],
                "slot": v["slot"],
                "hash": b58encode(v["hash"]),
                "timestamp": v["timestamp"],
                "block_id": b58encode(v["block_id"]),
                "switch_hash": None if v["switch_hash"] is None else b58encode(v["switch_hash"]),
                "signatures_valid": all(
                    verify_strict(k, v["message"], s) for k, s in zip(v["signer_keys"], v["signatures"])
                ),
            }
        )
        assert tx_cases[-1]["signatures_valid"]

    add_tx("one_signer", "the authorized voter is the node identity and pays the fee: one signature", valid[0])
    add_tx("two_signers", "the node identity pays, the authorized voter signs second", valid[1])
    add_tx("switch", "TowerSyncSwitch with a switching proof hash", vote(vals[2], switch_hash=rng.randbytes(32)))
    add_tx("no_root", "no root (u64::MAX on the wire): the first offset is the slot itself, a 5-byte varint", vote(vals[3], root_offset=None))
    add_tx("no_timestamp", "timestamp None", vote(vals[1], timestamp=False))
    add_tx("full_tower", f"{MAX_LOCKOUTS} lockouts, the most a TowerSync may hold", vote(vals[1], depth=MAX_LOCKOUTS))
    add_tx("max_slot", "voting on slot 2^64 - 1 (the root just below it)", vote(vals[2], slot=U64_MAX, root_offset=MAX_LOCKOUTS + 1, depth=2))
    add_tx("negative_timestamp", "a timestamp before 1970 (i64)", vote_transaction(vals[3], dict(tower_for(SLOT, bank_hash, rng), timestamp=-5), blockhash))

    # Transactions the parser must reject, each breaking one rule.
    bad_txs = []

    def add_bad(name, description, tx, error):
        try:
            parse_transaction(tx)
        except Reject as e:
            assert e.error == error, (name, e.error, error)
        else:
            raise AssertionError(f"{name} parses")
        bad_txs.append({"name": name, "description": description, "bytes": b64(tx), "error": error})

    good = valid[1]
    tower = tower_for(SLOT, bank_hash, rng)
    msg_at = 1 + 2 * 64  # the message of a two-signature transaction

    def with_data(v, data):
        return vote_transaction(v, tower, blockhash, data=data)

    def with_lockouts(raw):
        return with_data(vals[1], instruction_data(tower, lockout_bytes=raw))

    add_bad("empty", "no bytes", b"", "malformed")
    add_bad("truncated", "the last byte missing", good[:-1], "malformed")
    add_bad("trailing_byte", "one byte after the transaction", good + b"\0", "malformed")
    add_bad("no_signatures", "zero signatures (and a header that asks for none)", short_vec(0) + bytes([0]) + good[msg_at + 1 :], "malformed")
    add_bad("signature_count_alias", "the signature count as 0x82 0x00, an alias of 2", b"\x82\x00" + good[1:], "malformed")
    add_bad("signature_count_mismatch", "header asks for 3 signatures, 2 given", good[:msg_at] + b"\x03" + good[msg_at + 1 :], "malformed")
    # One signature more than the header's two: a valid one, the node's again over the message,
    # so only the count rule refuses it.
    extra = sign(vals[1]["secrets"][vals[1]["node"]], good[msg_at:])
    add_bad("signatures_above_required", "three signatures, the header requires two (the third a valid one)",
            short_vec(3) + good[1:msg_at] + extra + good[msg_at:], "malformed")
    add_bad("payer_read_only", "every signer read-only, the fee payer too", good[:msg_at + 1] + b"\x02" + good[msg_at + 2 :], "malformed")
    add_bad("versioned", "a v0 message (prefix 0x80)", good[:msg_at] + b"\x80" + good[msg_at:], "versioned")
    add_bad("oversized", f"a valid-looking vote with a memo-sized second instruction: more than {PACKET_DATA_SIZE} bytes",
            transaction(compile_message(vals[1]["node"], [
                (VOTE_PROGRAM, [(vals[1]["vote_account"], False, True), (vals[1]["voter"], True, False)], instruction_data(tower)),
                (rng.randbytes(32), [], bytes(1100)),
            ], blockhash)[0], [vals[1]["node"], vals[1]["voter"]], vals[1]["secrets"]), "oversized")
    # Keys: node, voter, vote account, vote program; a program index of 0 (the fee payer) or 4.
    keys_at = msg_at + 3 + 1
    ix_at = keys_at + 4 * 32 + 32 + 1
    add_bad("program_index_out_of_range", "the instruction's program index is past the keys", good[:ix_at] + b"\x04" + good[ix_at + 1 :], "malformed")
    add_bad("program_is_fee_payer", "the instruction's program index is 0", good[:ix_at] + b"\x00" + good[ix_at + 1 :], "malformed")
    add_bad("account_index_out_of_range", "an instruction account index past the keys", good[:ix_at + 2] + b"\x09" + good[ix_at + 3 :], "malformed")
    dup = bytearray(good)
    dup[keys_at + 64 : keys_at + 96] = dup[keys_at + 32 : keys_at + 64]
    add_bad("duplicate_key", "the vote account's key replaced by the voter's", bytes(dup), "malformed")
    add_bad("system_program", "a transfer, not a vote", transaction(compile_message(vals[1]["node"], [
        (SYSTEM_PROGRAM, [(vals[1]["node"], True, True), (vals[1]["vote_account"], False, True)], u32(2) + u64(5)),
    ], blockhash)[0], [vals[1]["node"]], vals[1]["secrets"]), "not_tower_sync")
    add_bad("two_instructions", "the TowerSync followed by a second vote instruction", transaction(compile_message(vals[1]["node"], [
        (VOTE_PROGRAM, [(vals[1]["vote_account"], False, True), (vals[1]["voter"], True, False)], instruction_data(tower)),
        (VOTE_PROGRAM, [(vals[1]["vote_account"], False, True), (vals[1]["voter"], True, False)], instruction_data(tower)),
    ], blockhash)[0], [vals[1]["node"], vals[1]["voter"]], vals[1]["secrets"]), "not_tower_sync")
    # A TowerSync tag and tower, as data for another program: the vote program's id with its last
    # byte changed, and the stake program's.
    near_vote = VOTE_PROGRAM[:31] + bytes([VOTE_PROGRAM[31] ^ 1])
    for name, program, what in [
        ("tower_sync_near_vote_program", near_vote, "the vote program's id with its last byte changed"),
        ("tower_sync_stake_program", STAKE_PROGRAM, "the stake program"),
    ]:
        add_bad(name, f"a valid TowerSync (tag 14) as the data of an instruction to {what}", transaction(compile_message(vals[1]["node"], [
            (program, [(vals[1]["vote_account"], False, True), (vals[1]["voter"], True, False)], instruction_data(tower)),
        ], blockhash)[0], [vals[1]["node"], vals[1]["voter"]], vals[1]["secrets"]), "not_tower_sync")
    for tag, what in [(2, "Vote"), (12, "CompactUpdateVoteState"), (16, "InitializeAccountV2"), (0x0100000E, "TowerSync with a nonzero high byte")]:
        add_bad(f"tag_{tag}", f"instruction tag {tag} ({what})", with_data(vals[1], u32(tag) + tower_sync_bytes(tower)), "not_tower_sync")
    add_bad("short_data", "three bytes of instruction data", with_data(vals[1], b"\x0e\0\0"), "not_tower_sync")
    full = tower_sync_bytes(tower)
    add_bad("tower_truncated", "the TowerSync without its last block_id byte", with_data(vals[1], u32(14) + full[:-1]), "malformed_vote")
    add_bad("tower_trailing", "one byte after the TowerSync", with_data(vals[1], u32(14) + full + b"\0"), "malformed_vote")
    add_bad("switch_without_hash", "TowerSyncSwitch without its switching proof hash", with_data(vals[1], u32(15) + full), "malformed_vote")
    offset = varint(tower["lockouts"][0][0] - tower["root"])
    rest = b"".join(varint(1) + bytes([c]) for _, c in tower["lockouts"][1:])
    first_conf = bytes([tower["lockouts"][0][1]])
    n5 = short_vec(5)
    add_bad("varint_trailing_zero", "an offset as 0xa3 0x00, an alias of one byte", with_lockouts(n5 + bytes([offset[0] | 0x80, 0]) + first_conf + rest), "malformed_vote")
    add_bad("varint_overflow", "an offset of 2^64 (ten bytes, the last 0x02)", with_lockouts(n5 + b"\x80" * 9 + b"\x02" + first_conf + rest), "malformed_vote")
    add_bad("varint_eleven_bytes", "an offset with eleven bytes", with_lockouts(n5 + b"\x80" * 10 + b"\x01" + first_conf + rest), "malformed_vote")
    add_bad("slot_overflow", "offsets summing past 2^64 - 1", with_lockouts(n5 + offset + first_conf + varint(U64_MAX) + rest[1:]), "malformed_vote")
    add_bad("zero_offset", "two lockouts on one slot", with_lockouts(n5 + offset + first_conf + varint(0) + rest[1:]), "malformed_vote")
    add_bad("no_lockouts", "an empty tower: no voted slot", with_lockouts(short_vec(0)), "malformed_vote")
    add_bad("too_many_lockouts", f"{MAX_LOCKOUTS + 1} lockouts", with_lockouts(short_vec(MAX_LOCKOUTS + 1) + offset + first_conf + (varint(1) + b"\x01") * MAX_LOCKOUTS), "malformed_vote")
    add_bad("lockout_count_alias", "the lockout count as 0x85 0x00", with_lockouts(b"\x85\x00" + offset + first_conf + rest), "malformed_vote")
    opt_at = len(full) - 32 - 8 - 1
    assert full[opt_at] == 1
    add_bad("timestamp_tag_2", "the timestamp's Option tag is 2", with_data(vals[1], u32(14) + full[:opt_at] + b"\x02" + full[opt_at + 1 :]), "malformed_vote")
    no_accounts = transaction(compile_message(vals[1]["node"], [(VOTE_PROGRAM, [], instruction_data(tower))], blockhash)[0], [vals[1]["node"]], vals[1]["secrets"])
    add_bad("no_accounts", "a TowerSync naming no vote account", no_accounts, "malformed_vote")

    # Vote evidence for SLOT.
    def evidence(votes, hard_forks=None, key=present_key, proof_items=items, h_=h, root_=state_root):
        acct = accounts.get(key)
        return {
            "version": 1,
            "slot": SLOT,
            "h": b58encode(h_),
            "root": b58encode(root_),
            "hardForks": hard_forks,
            "votes": [b64(v) for v in votes],
            "pubkey": b58encode(key),
            "account": None if acct is None else account_json(acct),
            "proof": proof_json(prove(proof_items, key_path(key))),
        }

    cases = []

    def add_case(name, description, votes, expect_outcomes, accepted, set_name="main", error=None, **kw):
        ev = evidence(votes, **kw)
        want_hash = expected_bank_hash(b58decode(ev["h"]), b58decode(ev["root"]), ev["hardForks"])
        stamped = []
        outcomes, stake = evaluate(votes, members[set_name], SLOT, want_hash, stamped)
        assert outcomes == expect_outcomes, (name, outcomes)
        total = sum(m["stake"] for m in sets[set_name])
        assert (3 * stake > 2 * total) == (accepted or error not in (None, "insufficient_stake")), name
        if error is None and not accepted:
            error = "insufficient_stake"
        acct = accounts.get(b58decode(ev["pubkey"]))
        cases.append(
            {
                "name": name,
                "description": description,
                "set": set_name,
                "evidence": ev,
                "bank_hash": b58encode(want_hash),
                "outcomes": outcomes,
                "stake": str(stake),
                "total_stake": str(total),
                "accepted": accepted,
                "error": error,
                "account": None
                if not accepted
                else {"present": acct is not None, "value": None if acct is None else b58encode(account_value(*acct))},
                "vouched_time": vouched_time(stamped, total) if accepted else None,
            }
        )

    C = "counted"
    add_case("all_vote", "every validator votes (S, H): 300 of 300", valid, [C] * 4, True)
    add_case("just_above", "100 + 100 + 50 = 250 of 300", valid[:3], [C] * 3, True)
    add_case("exactly_two_thirds", "100 + 100 = 200 of 300 is not more than 2/3", valid[:2], [C] * 2, False)
    add_case("absent_account", "250 of 300, proving an account absent", [valid[0], valid[1], valid[3]], [C] * 3, True, key=absent_key)
    add_case("bad_voter_signature", "v2's authorized voter signature has a flipped bit", valid[:2] + [flip(valid[2], 1 + 64 + 5)], [C, C, "bad_signature"], False)
    add_case("bad_fee_payer_signature", "v2's node signature (fee payer) has a flipped bit, the voter's is good", valid[:2] + [flip(valid[2], 1 + 40)], [C, C, "bad_signature"], False)
    add_case("bad_one_signer_signature", "v0's only signature has a flipped bit", [flip(valid[0], 1 + 63)] + valid[1:3], ["bad_signature", C, C], False)
    add_case("tampered_message", "v2's transaction with its recent blockhash changed after signing", valid[:2] + [flip(valid[2], len(valid[2]) - 120)], [C, C, "bad_signature"], False)
    add_case("unknown_vote_account", "the outsider votes; 200 of 300 from the set", valid[:2] + [vote(outsider)], [C, C, "unknown_vote_account"], False)
    stolen = dict(vals[2], voter=vals[3]["voter"], node=vals[3]["node"], secrets=vals[3]["secrets"])
    add_case("wrong_signer", "v2's vote account, signed by v3's voter and node", valid[:2] + [vote(stolen)], [C, C, "wrong_signer"], False)
    node_signs = dict(vals[2], voter=vals[2]["node"], secrets={vals[2]["node"]: vals[2]["node_seed"]})
    add_case("node_is_not_voter", "v2's node identity signs as the voter, but v2's configured voter is another key", valid[:2] + [vote(node_signs)], [C, C, "wrong_signer"], False)
    add_case("wrong_hash", "v2 votes on S with another bank hash", valid[:2] + [vote(vals[2], hash_=sha256(h + ZERO))], [C, C, "wrong_hash"], False)
    add_case("unmixed_hash", "v2 votes on S with h itself, the hash without the root", valid[:2] + [vote(vals[2], hash_=h)], [C, C, "wrong_hash"], False)
    add_case("wrong_slot", "v2's vote is for S + 1 with the same hash", valid[:2] + [vote(vals[2], slot=SLOT + 1)], [C, C, "wrong_slot"], False)
    add_case("earlier_lockout", "v2's tower holds S but votes for S + 1 (its last lockout)", valid[:2] + [vote(vals[2], slot=SLOT + 1, depth=3)], [C, C, "wrong_slot"], False)
    add_case("duplicate_voter", "v1 votes twice (another timestamp): counted once", valid[:2] + [vote(vals[1])], [C, C, "duplicate"], False)
    add_case("duplicate_then_more", "v1 twice, then v2: 250", valid[:2] + [vote(vals[1]), valid[2]], [C, C, "duplicate", C], True)
    add_case("invalid_then_valid", "a bad signature of v2, then v2's good vote, which counts", valid[:2] + [flip(valid[2], 1 + 64 + 5), valid[2]], [C, C, "bad_signature", C], True)
    malformed = vote_transaction(vals[2], tower, blockhash, data=instruction_data(tower, lockout_bytes=n5 + bytes([offset[0] | 0x80, 0]) + first_conf + rest))
    add_case("malformed_compact", "v2's signed vote with a non-canonical varint", valid[:2] + [malformed], [C, C, "malformed_vote"], False)
    add_case("switch", "v2 votes with TowerSyncSwitch", valid[:2] + [vote(vals[2], switch_hash=rng.randbytes(32))], [C] * 3, True)
    add_case("noise", "junk before the votes: not a vote, versioned, oversized, malformed", [
        b64decode(bad_txs_by(bad_txs, "system_program")),
        b64decode(bad_txs_by(bad_txs, "versioned")),
        b64decode(bad_txs_by(bad_txs, "oversized")),
        b"\x01",
    ] + valid[:3], ["not_tower_sync", "versioned", "oversized", "malformed", C, C, C], True)
    add_case("hard_fork", "a slot with hard-fork data (count 3): H = sha256(sha256(h || root) || 3)", [vote(v, hash_=hard_fork_hash) for v in vals[:3]], [C] * 3, True, hard_forks=3)
    add_case("hard_fork_ignored", "the same votes, evidence without the hard-fork count", [vote(v, hash_=hard_fork_hash) for v in vals[:2]], ["wrong_hash"] * 2, False)
    big = [vote(v) for v in big_vals]
    add_case("big_stakes", "stakes near 2^64 (total 3(2^64 - 1) + 1): 2(2^64 - 1) is not more than 2/3, the sums need more than 64 bits", big[:2], [C] * 2, False, set_name="big")
    add_case("big_stakes_accepted", "2(2^64 - 1) + 2 of 3(2^64 - 1) + 1 is", [big[0], big[1], big[3]], [C] * 3, True, set_name="big")
    add_case("no_votes", "no votes at all", [], [], False)
    # A proof against another root: enough stake, but the account does not verify.
    other_items = items[1:]
    add_case("proof_other_root", "enough votes, but the proof is against a tree without one account", valid, [C] * 4, False, error="proof", proof_items=other_items)
    acct = accounts[present_key]
    tampered = (acct[0] + 1,) + acct[1:]
    ev = evidence(valid)
    ev["account"] = account_json(tampered)
    want = expected_bank_hash(h, state_root, None)
    cases.append(
        {
            "name": "account_mismatch",
            "description": "enough votes and a valid proof, but the account's lamports were changed",
            "set": "main",
            "evidence": ev,
            "bank_hash": b58encode(want),
            "outcomes": [C] * 4,
            "stake": "300",
            "total_stake": "300",
            "accepted": False,
            "error": "account_mismatch",
            "account": None,
            "vouched_time": None,
        }
    )
    assert evidence(valid, proof_items=other_items)["proof"] != evidence(valid)["proof"]
    # Freshness: the votes holding more than 1/3 of the stake decide, whatever the others claim.
    # Added last, so the cases before keep their bytes.
    def stamped_vote(v, t):
        return vote_transaction(v, dict(tower_for(SLOT, bank_hash, rng), timestamp=t), blockhash)
    add_case("stamps_one_third_decides", "stamps 1000, 2000, 3000 (stakes 100, 100, 50) and none (50): the newest time more than 100 of 300 vouch for is 2000", [
        stamped_vote(vals[0], 1000), stamped_vote(vals[1], 2000), stamped_vote(vals[2], 3000), vote(vals[3], timestamp=False),
    ], [C] * 4, True)
    add_case("stamps_far_future_minority", "a validator of stake 50 stamps its vote 2^62: it alone vouches for nothing", [
        stamped_vote(vals[2], 2**62), stamped_vote(vals[0], 1_760_000_000), stamped_vote(vals[1], 1_760_000_100),
    ], [C] * 3, True)
    add_case("unstamped", "250 of 300 vote, only a vote of stake 50 carries a timestamp: no time is vouched for", [
        vote(vals[0], timestamp=False), vote(vals[1], timestamp=False), valid[2],
    ], [C] * 3, True)

    doc = {
        "version": 1,
        "description": "aldb vote chain (docs/SPEC.md §10) test vectors: the bank-hash rule, vote transactions and vote evidence. Generated by tools/vectors/gen_votes.py; do not edit by hand.",
        "constants": {
            "vote_program": b58encode(VOTE_PROGRAM),
            "packet_data_size": PACKET_DATA_SIZE,
            "max_lockouts": MAX_LOCKOUTS,
            "tower_sync_tag": TAG_TOWER_SYNC,
            "tower_sync_switch_tag": TAG_TOWER_SYNC_SWITCH,
            "max_evidence_votes": MAX_EVIDENCE_VOTES,
        },
        "bank_hash": bank_hash_cases,
        "validators": [
            {
                "name": v["name"],
                "node_seed": v["node_seed"].hex(),
                "node_identity": b58encode(v["node"]),
                "voter_seed": v["voter_seed"].hex(),
                "authorized_voter": b58encode(v["voter"]),
                "vote_account": b58encode(v["vote_account"]),
                "stake": v["stake"],
            }
            for v in vals + [outsider] + big_vals
        ],
        "sets": sets,
        "transactions": tx_cases,
        "invalid_transactions": bad_txs,
        "evidence": cases,
    }
    summary = (
        f"{len(bank_hash_cases)} bank hashes, {len(tx_cases)} transactions, {len(bad_txs)} invalid transactions, "
        f"{len(cases)} evidence cases"
    )
    return write_or_check(OUT, "gen_votes.py", doc, 2, summary)


def bad_txs_by(bad, name):
    return next(b["bytes"] for b in bad if b["name"] == name)


if __name__ == "__main__":
    sys.exit(main())
