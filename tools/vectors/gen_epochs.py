#!/usr/bin/env python3
"""Test vectors for the epoch chain (docs/SPEC.md §11): the next epoch's validator set inside the
bank hash, transitions from one epoch's set to the next, and the light client that follows them.

A second implementation of §11 written from the spec alone, sharing no code with the Rust crates or
the TypeScript package: the epoch schedule as agave's `EpochSchedule`, the set's encoding and hash,
the bank hash with the set mixed in, and the client's rules (one epoch at a time, > 2/3 of a slot's
epoch set, the trusting period, misbehaviour that freezes it) are each written out plainly, and
every refusal in the vectors is asserted to be the one the step is about. Vote transactions, their
decoding and the tally of §10.4 are gen_votes.py's (the §10 reference, imported, not edited);
SHA-256 is hashlib's, Ed25519 RFC 8032 §6's from specref.py.

Standard library only (Python 3.11). Keys come from fixed seeds, other bytes from
random.Random(SEED), and Ed25519 signing is deterministic, so running the script again rewrites
tests/vectors/epochs-v1.json byte for byte.

    python3 tools/vectors/gen_epochs.py            # write the file
    python3 tools/vectors/gen_epochs.py --check    # exit 1 if the checked-in file differs
"""

import copy
import random
import sys
from pathlib import Path

# specref.py and gen_votes.py sit beside this script; see gen_votes.py on the path.
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
import gen_votes as votes  # noqa: E402  (§10: vote transactions, their decoding, the tally)
from specref import (  # noqa: E402
    U64_MAX,
    ZERO,
    b58decode,
    b58encode,
    b64,
    b64decode,
    secret_to_public,
    sha256,
    write_or_check,
)
from specref import self_test as specref_self_test  # noqa: E402

SEED = 0xA1DB_0011
OUT = Path(__file__).resolve().parent.parent.parent / "tests" / "vectors" / "epochs-v1.json"

SET_DOMAIN = b"aldb-epoch-set-v1"  # §11.2: the prefix of the hashed set
MAX_SET_MEMBERS = 65536
MINIMUM_SLOTS_PER_EPOCH = 32  # agave's MINIMUM_SLOTS_PER_EPOCH
HEADER = 20  # epoch u64, total stake u64, member count u32
MEMBER = 72  # vote account, authorized voter, stake u64
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1


class Refused(Exception):
    """A refusal of §11, named as the spec names it."""

    def __init__(self, error, kind=None):
        super().__init__(error if kind is None else f"{error} ({kind})")
        self.error = error
        self.kind = kind


# --------------------------------------------------------------------------------------------
# §11.1: the epoch schedule, as agave's EpochSchedule computes it.


def schedule(slots_per_epoch, warmup, offset=None):
    """`EpochSchedule::custom(slots_per_epoch, leader_schedule_slot_offset, warmup)`."""
    if warmup:
        p = 1
        while p < slots_per_epoch:
            p <<= 1
        first_normal_epoch = p.bit_length() - 1 - 5  # log2(next_power_of_two) - log2(32)
        first_normal_slot = p - MINIMUM_SLOTS_PER_EPOCH
    else:
        first_normal_epoch = first_normal_slot = 0
    return {
        "slotsPerEpoch": slots_per_epoch,
        "leaderScheduleSlotOffset": slots_per_epoch if offset is None else offset,
        "warmup": warmup,
        "firstNormalEpoch": first_normal_epoch,
        "firstNormalSlot": first_normal_slot,
    }


def check_schedule(s):
    spe = s["slotsPerEpoch"]
    if not MINIMUM_SLOTS_PER_EPOCH <= spe <= U64_MAX or not 0 <= s["leaderScheduleSlotOffset"] <= U64_MAX:
        raise Refused("schedule")
    want = schedule(spe, s["warmup"], s["leaderScheduleSlotOffset"])
    if (s["firstNormalEpoch"], s["firstNormalSlot"]) != (want["firstNormalEpoch"], want["firstNormalSlot"]):
        raise Refused("schedule")


def epoch_of(s, slot):
    """`get_epoch`: warmup epochs double from 32 slots; then slots_per_epoch each."""
    if slot < s["firstNormalSlot"]:
        # The epoch whose slots [32 (2^e - 1), 32 (2^(e+1) - 1)) hold the slot, found by counting.
        e = 0
        while MINIMUM_SLOTS_PER_EPOCH * ((1 << (e + 1)) - 1) <= slot:
            e += 1
        return e
    return s["firstNormalEpoch"] + (slot - s["firstNormalSlot"]) // s["slotsPerEpoch"]


def first_slot(s, epoch):
    if epoch <= s["firstNormalEpoch"]:
        return ((1 << epoch) - 1) * MINIMUM_SLOTS_PER_EPOCH
    return (epoch - s["firstNormalEpoch"]) * s["slotsPerEpoch"] + s["firstNormalSlot"]


def leader_schedule_epoch(s, slot):
    """`get_leader_schedule_epoch`: the epoch whose stakes a bank at `slot` has fixed."""
    if slot < s["firstNormalSlot"]:
        return epoch_of(s, slot) + 1
    return s["firstNormalEpoch"] + (slot - s["firstNormalSlot"] + s["leaderScheduleSlotOffset"]) // s["slotsPerEpoch"]


def set_available_from(s, epoch):
    """The first slot of `epoch` whose bank holds the set of epoch + 1 (§11.3)."""
    slot = first_slot(s, epoch)
    while leader_schedule_epoch(s, slot) < epoch + 1:
        slot += 1
    return slot


# --------------------------------------------------------------------------------------------
# §11.2: the set, its encoding and its hash.


def encode_set(epoch, total, members):
    """members: (vote_account, voter, stake) in the order given (vectors encode bad orders too)."""
    out = epoch.to_bytes(8, "little") + total.to_bytes(8, "little") + len(members).to_bytes(4, "little")
    for va, voter, stake in members:
        out += va + voter + stake.to_bytes(8, "little")
    return out


def decode_set(b):
    """§11.2's decoder, its rules in order; returns (epoch, total, members) or raises Refused."""
    if len(b) < HEADER:
        raise Refused("length")
    epoch = int.from_bytes(b[0:8], "little")
    total = int.from_bytes(b[8:16], "little")
    n = int.from_bytes(b[16:20], "little")
    if n == 0:
        raise Refused("empty")
    if n > MAX_SET_MEMBERS:
        raise Refused("too_many_members")
    if len(b) != HEADER + MEMBER * n:
        raise Refused("length")
    members, prev, stakes = [], None, 0
    for i in range(n):
        m = b[HEADER + MEMBER * i : HEADER + MEMBER * (i + 1)]
        va, voter, stake = m[0:32], m[32:64], int.from_bytes(m[64:72], "little")
        if prev is not None and va == prev:
            raise Refused("duplicate_vote_account")
        if prev is not None and va < prev:
            raise Refused("not_sorted")
        if stake == 0:
            raise Refused("zero_stake")
        prev = va
        stakes += stake
        members.append((va, voter, stake))
    if stakes > total:
        raise Refused("stake_exceeds_total")
    return epoch, total, members


def set_hash(encoding):
    return sha256(SET_DOMAIN + encoding)


def set_from_json(j):
    """The JSON form: validators in any order; sorted, then held to the encoding's rules."""
    members = sorted((b58decode(m["voteAccount"]), b58decode(m["authorizedVoter"]), m["stake"]) for m in j["validators"])
    enc = encode_set(j["epoch"], j["totalStake"], members)
    decode_set(enc)
    return enc


def set_json(epoch, total, members):
    return {
        "epoch": epoch,
        "totalStake": total,
        "validators": [
            {"voteAccount": b58encode(va), "authorizedVoter": b58encode(voter), "stake": stake}
            for va, voter, stake in sorted(members)
        ],
    }


def bank_hash(h, root, next_set_hash, hard_forks):
    """§11.3: sha256(h || root || next_set_hash), then hard-fork data as §10.1."""
    mixed = sha256(h + root + next_set_hash)
    return mixed if hard_forks is None else sha256(mixed + hard_forks.to_bytes(8, "little"))


# --------------------------------------------------------------------------------------------
# §11.4-§11.6: slot evidence, the quorum of a set, and the vouched time.


def evidence_parts(ev):
    return (
        ev["slot"],
        b58decode(ev["h"]),
        b58decode(ev["root"]),
        b58decode(ev["nextSetHash"]),
        ev["hardForks"],
        [b64decode(v) for v in ev["votes"]],
    )


def evidence_bank_hash(ev):
    slot, h, root, nsh, hf, _ = evidence_parts(ev)
    return bank_hash(h, root, nsh, hf)


def quorum(set_enc, ev):
    """> 2/3 of the set's total stake voted (slot, bank hash): (stake, total, time or None)."""
    _, total, members = decode_set(set_enc)
    slot, h, root, nsh, hf, vs = evidence_parts(ev)
    if len(vs) > votes.MAX_EVIDENCE_VOTES:
        raise Refused("too_many_votes")
    by_account = {va: {"voter": voter, "stake": stake} for va, voter, stake in members}
    outcomes, stake = votes.evaluate(vs, by_account, slot, bank_hash(h, root, nsh, hf))
    if not 3 * stake > 2 * total:
        raise Refused("insufficient_stake")
    # §11.4's vouched time: the latest t that votes holding more than 1/3 of the total stake reached.
    stamped = []
    for b, outcome in zip(vs, outcomes):
        if outcome == "counted":
            v = votes.parse_transaction(b)
            if v["timestamp"] is not None:
                stamped.append((v["timestamp"], by_account[v["vote_account"]]["stake"]))
    stamped.sort(key=lambda x: -x[0])
    acc, time = 0, None
    for ts, s in stamped:
        acc += s
        if 3 * acc > total:
            time = ts
            break
    return stake, total, time


def misbehaviour_file(kind, sched, set_enc, first, second):
    epoch, total, members = decode_set(set_enc)
    return {
        "version": 1,
        "kind": kind,
        "schedule": sched,
        "set": set_json(epoch, total, members),
        "setHash": b58encode(set_hash(set_enc)),
        "first": first,
        "second": second,
    }


def check_misbehaviour(f, trusted_set_hash=None):
    """§11.7: a misbehaviour file as a third party checks it. Returns the kind or raises."""
    check_schedule(f["schedule"])
    enc = set_from_json(f["set"])
    if trusted_set_hash is not None and set_hash(enc) != trusted_set_hash:
        raise Refused("untrusted_set")
    epoch = f["set"]["epoch"]
    a, b = f["first"], f["second"]
    for ev in (a, b):
        if epoch_of(f["schedule"], ev["slot"]) != epoch:
            raise Refused("slot_not_in_epoch")
    for ev in (a, b):
        quorum(enc, ev)
    kind = conflict(a, b)
    if kind is None:
        raise Refused("not_conflicting")
    if kind != f["kind"]:
        raise Refused("wrong_kind")
    return kind


def conflict(a, b):
    """The two conflicts of §11.7, bank hashes first."""
    if a["slot"] == b["slot"] and evidence_bank_hash(a) != evidence_bank_hash(b):
        return "conflicting_bank_hashes"
    na, nb = b58decode(a["nextSetHash"]), b58decode(b["nextSetHash"])
    if na != ZERO and nb != ZERO and na != nb:
        return "conflicting_next_sets"
    return None


# --------------------------------------------------------------------------------------------
# §11.6: the light client.


class Client:
    def __init__(self, checkpoint):
        if checkpoint["version"] != 1:
            raise Refused("version")
        check_schedule(checkpoint["schedule"])
        self.schedule = checkpoint["schedule"]
        self.period = checkpoint["trustingPeriod"]
        enc = set_from_json(checkpoint["set"])
        # The held epochs, oldest first, at most two: (epoch, set encoding, time, binding evidence).
        self.held = [{"epoch": checkpoint["set"]["epoch"], "set": enc, "time": checkpoint["time"], "binding": None}]
        self.last = None  # the evidence of the highest slot verified
        self.frozen = None

    def newest(self):
        return self.held[-1]

    def held_epoch(self, epoch):
        return next((e for e in self.held if e["epoch"] == epoch), None)

    def fresh(self, held, now):
        if now - held["time"] > self.period:
            raise Refused("expired")

    def stored(self):
        out = [e["binding"] for e in self.held if e["binding"] is not None]
        if self.last is not None and all(self.last is not s for s in out):
            out.append(self.last)
        return out

    def check_conflicts(self, ev, held):
        for y in self.stored():
            if y["slot"] == ev["slot"] and evidence_bank_hash(y) != evidence_bank_hash(ev):
                self.freeze("conflicting_bank_hashes", held, y, ev)
        for y in self.stored():
            if epoch_of(self.schedule, y["slot"]) == held["epoch"] and conflict(y, ev) == "conflicting_next_sets":
                self.freeze("conflicting_next_sets", held, y, ev)

    def freeze(self, kind, held, first, second):
        self.frozen = misbehaviour_file(kind, self.schedule, held["set"], first, second)
        raise Refused("misbehaviour", kind)

    def remember(self, ev):
        if self.last is None or ev["slot"] >= self.last["slot"]:
            self.last = ev

    def advance(self, t, now):
        if self.frozen is not None:
            raise Refused("frozen")
        new_epoch = t["set"]["epoch"]
        top = self.newest()
        if new_epoch > top["epoch"] + 1:
            raise Refused("skipped_epoch")
        if new_epoch < top["epoch"] or (new_epoch == top["epoch"] and len(self.held) < 2):
            raise Refused("stale_transition")
        signer = self.held_epoch(new_epoch - 1)
        ev = t["evidence"]
        if epoch_of(self.schedule, ev["slot"]) != signer["epoch"]:
            raise Refused("slot_not_in_epoch")
        self.fresh(signer, now)
        enc = set_from_json(t["set"])
        nsh = b58decode(ev["nextSetHash"])
        if nsh == ZERO:
            raise Refused("set_not_bound")
        if nsh != set_hash(enc):
            raise Refused("wrong_set")
        stake, total, time = quorum(signer["set"], ev)
        self.check_conflicts(ev, signer)
        if new_epoch == top["epoch"]:
            # Not a conflict (that was checked above): the same set again.
            return {"ok": "already_verified", "epoch": new_epoch, "stake": str(stake), "total_stake": str(total)}
        self.held = [top, {"epoch": new_epoch, "set": enc, "time": signer["time"] if time is None else time, "binding": ev}]
        self.remember(ev)
        return {
            "ok": "advanced",
            "epoch": new_epoch,
            "set_hash": b58encode(set_hash(enc)),
            "time": self.newest()["time"],
            "stake": str(stake),
            "total_stake": str(total),
        }

    def accept_root(self, ev, now):
        if self.frozen is not None:
            raise Refused("frozen")
        e = epoch_of(self.schedule, ev["slot"])
        if e > self.newest()["epoch"]:
            raise Refused("epoch_ahead")
        held = self.held_epoch(e)
        if held is None:
            raise Refused("epoch_behind")
        self.fresh(held, now)
        stake, total, _ = quorum(held["set"], ev)
        self.check_conflicts(ev, held)
        self.remember(ev)
        return {
            "ok": "accepted",
            "slot": ev["slot"],
            "epoch": e,
            "bank_hash": b58encode(evidence_bank_hash(ev)),
            "root": ev["root"],
            "next_set_hash": ev["nextSetHash"],
            "stake": str(stake),
            "total_stake": str(total),
        }

    def submit(self, a, b, now):
        if self.frozen is not None:
            raise Refused("frozen")
        e = epoch_of(self.schedule, a["slot"])
        if epoch_of(self.schedule, b["slot"]) != e:
            raise Refused("not_conflicting")
        if e > self.newest()["epoch"]:
            raise Refused("epoch_ahead")
        held = self.held_epoch(e)
        if held is None:
            raise Refused("epoch_behind")
        self.fresh(held, now)
        quorum(held["set"], a)
        quorum(held["set"], b)
        kind = conflict(a, b)
        if kind is None:
            raise Refused("not_conflicting")
        self.freeze(kind, held, a, b)

    def state_json(self):
        """§11.5's state file: everything the client holds."""
        return {
            "version": 1,
            "schedule": self.schedule,
            "trustingPeriod": self.period,
            "held": [
                {"set": set_json(*decode_set(e["set"])), "time": e["time"], "proof": e["binding"]} for e in self.held
            ],
            "last": self.last,
            "frozen": self.frozen,
        }

    @staticmethod
    def from_state_json(j):
        """The state file read back, its invariants checked (the error `state`)."""
        if j["version"] != 1:
            raise Refused("version")
        check_schedule(j["schedule"])
        held = [{"epoch": e["set"]["epoch"], "set": set_from_json(e["set"]), "time": e["time"], "binding": e["proof"]} for e in j["held"]]
        if len(held) not in (1, 2):
            raise Refused("state")
        if len(held) == 2 and held[1]["epoch"] != held[0]["epoch"] + 1:
            raise Refused("state")
        for i, e in enumerate(held):
            p = e["binding"]
            if p is None and i > 0:
                raise Refused("state")
            if p is not None and (epoch_of(j["schedule"], p["slot"]) != e["epoch"] - 1 or b58decode(p["nextSetHash"]) != set_hash(e["set"])):
                raise Refused("state")
        c = Client.__new__(Client)
        c.schedule, c.period, c.held, c.last, c.frozen = j["schedule"], j["trustingPeriod"], held, j["last"], j["frozen"]
        return c

    def summary(self):
        top = self.newest()
        return {
            "epoch": top["epoch"],
            "set_hash": b58encode(set_hash(top["set"])),
            "time": top["time"],
            "held_epochs": [e["epoch"] for e in self.held],
            "last_verified_slot": None if self.last is None else self.last["slot"],
            "frozen": None if self.frozen is None else self.frozen["kind"],
        }


# --------------------------------------------------------------------------------------------
# The simulated chain.

T0 = 1_760_000_000  # the checkpoint's time, unix seconds
PERIOD = 432_000  # the trusting period of the scenarios: 5 days
SCHED = schedule(432_000, True)  # a test validator's: warmup epochs of 32, 64, 128, ... slots


def make_validator(name, separate_voter=True):
    return votes.make_validator("epochs " + name, 0, separate_voter)


def with_voter(v, label):
    """The same vote account and node with a newly authorized voter."""
    voter_seed = sha256(b"aldb-epochs-v1 " + label.encode())
    voter = secret_to_public(voter_seed)
    return dict(v, voter=voter, voter_seed=voter_seed, secrets={v["node"]: v["node_seed"], voter: voter_seed})


def main():
    specref_self_test()
    votes.self_test()
    rng = random.Random(SEED)

    def rand32():
        return rng.randbytes(32)

    # Schedules and the epoch of slots.
    schedules = []
    for name, s, slots in [
        ("warmup_432000", SCHED, [0, 31, 32, 95, 96, 223, 224, 479, 480, 524_255, 524_256, 524_256 + 431_999, 524_256 + 432_000, U64_MAX]),
        ("warmup_8192", schedule(8192, True), [0, 31, 32, 8159, 8160, 8160 + 8191, 8160 + 8192, 10**12]),
        ("normal_432000", schedule(432_000, False), [0, 1, 431_999, 432_000, 864_000, U64_MAX]),
        ("normal_32", schedule(32, False), [0, 31, 32, 63, 64, U64_MAX]),
        ("warmup_32", schedule(32, True), [0, 31, 32, 33, 1000]),
        ("normal_100_offset_40", schedule(100, False, 40), [0, 59, 60, 99, 100, 159, 160]),
        ("normal_100_offset_250", schedule(100, False, 250), [0, 99, 100]),
    ]:
        check_schedule(s)
        cases = []
        for slot in slots:
            e = epoch_of(s, slot)
            # agave saturates slot + offset; past u64 the leader-schedule epoch is not a vector.
            in_range = slot < s["firstNormalSlot"] or slot - s["firstNormalSlot"] + s["leaderScheduleSlotOffset"] <= U64_MAX
            assert first_slot(s, e) <= slot and (e + 1 > U64_MAX or slot < first_slot(s, e + 1) or first_slot(s, e + 1) > U64_MAX)
            cases.append(
                {
                    "slot": slot,
                    "epoch": e,
                    "first_slot": first_slot(s, e),
                    "leader_schedule_epoch": leader_schedule_epoch(s, slot) if in_range else None,
                    "next_set_from": set_available_from(s, e) if in_range else None,
                }
            )
        schedules.append({"name": name, "schedule": s, "slots": cases})
    # The offsets below the epoch length bind the next set only late in the epoch.
    assert schedules[5]["slots"][1]["next_set_from"] == 60 and schedules[5]["slots"][0]["leader_schedule_epoch"] == 0
    invalid_schedules = []
    for name, s in [
        ("too_few_slots", dict(schedule(32, False), slotsPerEpoch=31)),
        ("warmup_first_normal_slot", dict(SCHED, firstNormalSlot=SCHED["firstNormalSlot"] + 1)),
        ("warmup_first_normal_epoch", dict(SCHED, firstNormalEpoch=SCHED["firstNormalEpoch"] - 1)),
        ("no_warmup_first_normal", dict(schedule(64, False), firstNormalEpoch=1, firstNormalSlot=32)),
        ("warmup_flag_without_warmup_fields", dict(schedule(64, False), warmup=True)),
    ]:
        try:
            check_schedule(s)
        except Refused as e:
            assert e.error == "schedule"
        else:
            raise AssertionError(name)
        invalid_schedules.append({"name": name, "schedule": s, "error": "schedule"})

    # Validators: A votes with its node identity (one signature), the others with separate voters.
    A = make_validator("A", separate_voter=False)
    B, C, D, E, F = (make_validator(n) for n in "BCDEF")
    X = make_validator("outsider")
    A2 = with_voter(A, "A rotated voter")  # A's vote account with a new authorized voter
    nobody = rand32()  # a staked vote account with no authorized voter for the epoch

    def m(v, stake):
        return (v["vote_account"], v["voter"], stake)

    # The sets of epochs 0-5 as the cluster's stake moves: E's stake activates, D leaves, B
    # shrinks, a vote account with stake but no voter counts in the total only, A's voter rotates.
    set_members = {
        0: ([m(A, 100), m(B, 100), m(C, 50), m(D, 50)], 300),
        1: ([m(A, 100), m(B, 100), m(C, 50), m(D, 50)], 300),
        2: ([m(A, 100), m(B, 100), m(C, 50), m(D, 50), m(E, 60)], 360),
        3: ([m(A, 100), m(B, 60), m(C, 50), m(E, 90)], 310),
        4: ([m(A2, 100), m(B, 60), m(C, 50), m(E, 90)], 300),
        5: ([m(A2, 100), m(B, 100), m(C, 100), m(E, 100), m(F, 100)], 500),
    }
    voters_of = {0: [A, B, C, D], 1: [A, B, C, D], 2: [A, B, C, D, E], 3: [A, B, C, E], 4: [A2, B, C, E], 5: [A2, B, C, E, F]}
    enc = {e: encode_set(e, t, sorted(ms)) for e, (ms, t) in set_members.items()}
    sjson = {e: set_json(e, t, ms) for e, (ms, t) in set_members.items()}
    H = {e: set_hash(enc[e]) for e in enc}
    assert enc[0][8:] == enc[1][8:] and H[0] != H[1]  # same members, another epoch: another hash

    sets = []
    for e in sorted(enc):
        sets.append({"name": f"epoch_{e}", "set": sjson[e], "encoding": enc[e].hex(), "hash": b58encode(H[e])})
    # A set whose stakes need all of u64 (the total is agave's u64).
    big_members = [(rand32(), rand32(), U64_MAX // 2), (rand32(), rand32(), U64_MAX // 2), (rand32(), rand32(), 1)]
    big = encode_set(7, U64_MAX, sorted(big_members))
    sets.append({"name": "u64_total", "set": set_json(7, U64_MAX, big_members), "encoding": big.hex(), "hash": b58encode(set_hash(big))})
    one = encode_set(U64_MAX, 1, [(ZERO, ZERO, 1)])
    sets.append({"name": "one_member_last_epoch", "set": set_json(U64_MAX, 1, [(ZERO, ZERO, 1)]), "encoding": one.hex(), "hash": b58encode(set_hash(one))})
    for s in sets:
        assert set_from_json(s["set"]) == bytes.fromhex(s["encoding"])

    invalid_sets = []

    def add_bad_set(name, description, b, error):
        try:
            decode_set(b)
        except Refused as e:
            assert e.error == error, (name, e.error)
        else:
            raise AssertionError(name)
        invalid_sets.append({"name": name, "description": description, "encoding": b.hex(), "error": error})

    e2 = enc[2]
    ms2 = sorted(set_members[2][0])
    add_bad_set("empty_input", "no bytes", b"", "length")
    add_bad_set("short_header", "19 bytes", e2[:19], "length")
    add_bad_set("truncated", "the last member's stake without its last byte", e2[:-1], "length")
    add_bad_set("trailing_byte", "one byte after the last member", e2 + b"\0", "length")
    add_bad_set("count_too_high", "the count says 6 members, 5 follow", e2[:16] + (6).to_bytes(4, "little") + e2[20:], "length")
    add_bad_set("no_members", "a count of zero (and total stake 0)", encode_set(2, 0, []), "empty")
    add_bad_set("too_many_members", f"a count of {MAX_SET_MEMBERS + 1}, nothing after it", encode_set(2, 1, [])[:16] + (MAX_SET_MEMBERS + 1).to_bytes(4, "little"), "too_many_members")
    add_bad_set("unsorted", "the first two members swapped", encode_set(2, 360, [ms2[1], ms2[0]] + ms2[2:]), "not_sorted")
    add_bad_set("duplicate", "a vote account twice (stakes still within the total)", encode_set(2, 360, [ms2[0], ms2[0]] + ms2[2:]), "duplicate_vote_account")
    add_bad_set("zero_stake", "a member with stake 0", encode_set(2, 360, ms2[:2] + [(ms2[2][0], ms2[2][1], 0)] + ms2[3:]), "zero_stake")
    add_bad_set("stake_exceeds_total", "members' stakes sum to 360, the total says 359", encode_set(2, 359, ms2), "stake_exceeds_total")
    add_bad_set("u64_overflow", "two stakes of 2^63 sum past u64; the total is u64::MAX", encode_set(7, U64_MAX, sorted([(rand32(), ZERO, 1 << 63), (rand32(), ZERO, 1 << 63)])), "stake_exceeds_total")

    invalid_set_json = []
    for name, j, error in [
        ("duplicate", dict(sjson[2], validators=sjson[2]["validators"] + sjson[2]["validators"][:1]), "duplicate_vote_account"),
        ("zero_stake", dict(sjson[2], validators=[dict(sjson[2]["validators"][0], stake=0)] + sjson[2]["validators"][1:]), "zero_stake"),
        ("stake_exceeds_total", dict(sjson[2], totalStake=359), "stake_exceeds_total"),
        ("empty", dict(sjson[2], validators=[], totalStake=0), "empty"),
    ]:
        try:
            set_from_json(j)
        except Refused as e:
            assert e.error == error, name
        else:
            raise AssertionError(name)
        invalid_set_json.append({"name": name, "set": j, "error": error})
    # Unsorted JSON is fine: the reader sorts.
    unsorted = dict(sjson[2], validators=list(reversed(sjson[2]["validators"])))
    assert set_from_json(unsorted) == enc[2]

    # The bank hash with the set mixed in.
    bank_hash_cases = []
    for name, nsh, hf in [("typical", H[1], None), ("not_yet_bound", ZERO, None), ("hard_fork", H[2], 1), ("two_hard_forks", H[2], 2)]:
        h, root = rand32(), rand32()
        bank_hash_cases.append(
            {
                "name": name,
                "h": b58encode(h),
                "root": b58encode(root),
                "next_set_hash": b58encode(nsh),
                "hard_forks": hf,
                "mixed": b58encode(sha256(h + root + nsh)),
                "bank_hash": b58encode(bank_hash(h, root, nsh, hf)),
                "bank_hash_without_set": b58encode(votes.expected_bank_hash(h, root, hf)),
            }
        )

    # Slot evidence: the votes of a slot's epoch set for its bank hash.
    offsets = {A["vote_account"]: 0, B["vote_account"]: 1, C["vote_account"]: -1, D["vote_account"]: 2, E["vote_account"]: 0, F["vote_account"]: 3, X["vote_account"]: 0}

    def slot_time(slot):
        return T0 + slot  # the vectors' chain runs at one slot a second

    def vote(v, slot, bh, timestamp="default"):
        if timestamp == "default":
            timestamp = slot_time(slot) + offsets[v["vote_account"]]
        depth = min(3, slot + 1)
        tower = {
            "root": slot - 10 if slot >= 10 else None,
            "lockouts": [(slot - depth + 1 + i, depth - i) for i in range(depth)],
            "hash": bh,
            "timestamp": timestamp,
            "block_id": rand32(),
        }
        return votes.vote_transaction(v, tower, rand32())

    def evidence(slot, voters, nsh, h=None, root=None, hard_forks=None, timestamps=None, vote_hash=None, extra=()):
        h = rand32() if h is None else h
        root = rand32() if root is None else root
        bh = bank_hash(h, root, nsh, hard_forks) if vote_hash is None else vote_hash
        ts = timestamps or {}
        txs = [vote(v, slot, bh, ts.get(v["name"], "default")) for v in voters] + list(extra)
        return {
            "version": 1,
            "slot": slot,
            "h": b58encode(h),
            "root": b58encode(root),
            "hardForks": hard_forks,
            "nextSetHash": b58encode(nsh),
            "votes": [b64(t) for t in txs],
        }

    def transition(epoch, slot, voters=None, set_=None, **kw):
        """The transition to `epoch`: its set and a slot of epoch - 1 that binds it."""
        s = sjson[epoch] if set_ is None else set_
        nsh = kw.pop("nsh", None)
        if nsh is None:
            nsh = set_hash(set_from_json(s))
        return {"version": 1, "set": s, "evidence": evidence(slot, voters_of[epoch - 1] if voters is None else voters, nsh, **kw)}

    def checkpoint(epoch=0, time=T0, period=PERIOD):
        return {"version": 1, "schedule": SCHED, "set": sjson[epoch], "time": time, "trustingPeriod": period}

    for e in range(6):
        # Every slot the scenarios use lies in the epoch they mean.
        assert set_available_from(SCHED, e) == first_slot(SCHED, e)

    scenarios = []
    clients = []

    class Scenario:
        def __init__(self, name, description, cp):
            self.doc = {"name": name, "description": description, "checkpoint": cp, "steps": []}
            self.client = Client(cp)
            scenarios.append(self.doc)
            clients.append(self.client)

        def step(self, name, op, now, expect, **inputs):
            try:
                if op == "advance":
                    result = self.client.advance(inputs["transition"], now)
                elif op == "accept_root":
                    result = self.client.accept_root(inputs["evidence"], now)
                else:
                    self.client.submit(inputs["first"], inputs["second"], now)
                    raise AssertionError("a submission either freezes or is refused")
            except Refused as e:
                result = {"error": e.error}
                if e.kind is not None:
                    result["kind"] = e.kind
                    result["misbehaviour"] = self.client.frozen
            want = expect if isinstance(expect, str) else None
            got = result.get("ok", result.get("error"))
            assert got == want, (self.doc["name"], name, result)
            self.doc["steps"].append({"name": name, "op": op, "now": now, **inputs, "expect": result, "state": self.client.summary()})
            return result

    ep_first = {e: first_slot(SCHED, e) for e in range(7)}

    # 1. Following the chain from the genesis set through five epoch changes.
    s = Scenario("follow", "from the genesis set through epochs 1-5, with roots accepted in each and in the epoch before the newest", checkpoint())
    now = T0 + 100
    s.step("root_epoch_0", "accept_root", now, "accepted", evidence=evidence(10, [A, B, C], H[1]))
    s.step("to_epoch_1", "advance", now, "advanced", transition=transition(1, 20))
    s.step("root_epoch_1", "accept_root", now, "accepted", evidence=evidence(40, [A, B, D], H[2]))
    # C's clock is far ahead; the vouched time stays with the honest majority.
    s.step("to_epoch_2", "advance", now, "advanced", transition=transition(2, 50, timestamps={C["name"]: T0 + 10**9}))
    s.step("root_epoch_2_new_validator", "accept_root", now, "accepted", evidence=evidence(100, [A, B, E], H[3]))
    s.step("to_epoch_3", "advance", now + 100, "advanced", transition=transition(3, 150))
    s.step("to_epoch_4", "advance", now + 200, "advanced", transition=transition(4, 300, voters=[A, B, C, E]))
    s.step("root_epoch_4_rotated_voter", "accept_root", now + 300, "accepted", evidence=evidence(500, [A2, B, E], H[5]))
    s.step("root_epoch_4_old_voter", "accept_root", now + 300, "insufficient_stake", evidence=evidence(501, [A, B, E], H[5]))
    # No vote carries a timestamp: the epoch keeps its predecessor's time.
    s.step("to_epoch_5_no_timestamps", "advance", now + 400, "advanced", transition=transition(5, 600, voters=[A2, B, C, E], timestamps={v["name"]: None for v in [A2, B, C, E]}))
    s.step("root_epoch_5", "accept_root", now + 400, "accepted", evidence=evidence(1000, [A2, B, C, F], ZERO))
    s.step("root_epoch_4_still_held", "accept_root", now + 400, "accepted", evidence=evidence(700, [A2, B, C], H[5]))
    s.step("to_epoch_5_again", "advance", now + 400, "already_verified", transition=transition(5, 650, voters=[A2, B, C]))
    s.step("root_epoch_3_dropped", "accept_root", now + 400, "epoch_behind", evidence=evidence(300, [A, B, C, E], H[4]))
    assert s.client.newest()["time"] == s.client.held[0]["time"]

    # 2. Refusals: each leaves the client as it was.
    s = Scenario("refusals", "transitions and roots the client refuses, each naming its rule; none changes the client", checkpoint())
    now = T0 + 100
    s.step("skip_to_epoch_2", "advance", now, "skipped_epoch", transition=transition(2, 20, voters=[A, B, C, D]))
    s.step("evidence_in_epoch_1", "advance", now, "slot_not_in_epoch", transition=transition(1, 40))
    s.step("evidence_after_epoch", "advance", now, "slot_not_in_epoch", transition=transition(1, ep_first[3]))
    s.step("set_not_bound", "advance", now, "set_not_bound", transition=transition(1, 20, nsh=ZERO))
    forged = copy.deepcopy(sjson[1])
    forged["validators"].append({"voteAccount": b58encode(X["vote_account"]), "authorizedVoter": b58encode(X["voter"]), "stake": 10**6})
    forged["totalStake"] += 10**6
    s.step("wrong_set", "advance", now, "wrong_set", transition=dict(transition(1, 20), set=forged))
    s.step("forged_set_two_thirds_exactly", "advance", now, "insufficient_stake", transition=transition(1, 20, voters=[A, B], set_=forged))
    s.step("forged_set_by_outsider", "advance", now, "insufficient_stake", transition=transition(1, 20, voters=[X], set_=forged))
    s.step("forged_set_by_its_own_members", "advance", now, "insufficient_stake", transition=transition(1, 20, voters=[X, C], set_=forged))
    s.step("votes_for_another_hash", "advance", now, "insufficient_stake", transition=transition(1, 20, vote_hash=rand32()))
    s.step("hard_fork_ignored", "advance", now, "insufficient_stake", transition=transition(1, 20, vote_hash=bank_hash(ZERO, ZERO, H[1], None), h=ZERO, root=ZERO, hard_forks=2))
    many = transition(1, 20)
    many["evidence"]["votes"] = many["evidence"]["votes"] + [b64(b"\x01")] * (votes.MAX_EVIDENCE_VOTES - 3)
    s.step("too_many_votes", "advance", now, "too_many_votes", transition=many)
    s.step("expired", "advance", T0 + PERIOD + 1, "expired", transition=transition(1, 20))
    s.step("root_epoch_ahead", "accept_root", now, "epoch_ahead", evidence=evidence(40, [A, B, C, D], H[2]))
    s.step("root_two_thirds_exactly", "accept_root", now, "insufficient_stake", evidence=evidence(11, [A, B], H[1]))
    s.step("root_expired", "accept_root", T0 + PERIOD + 1, "expired", evidence=evidence(12, [A, B, C], H[1]))
    s.step("root_at_period_end", "accept_root", T0 + PERIOD, "accepted", evidence=evidence(13, [A, B, C], H[1], hard_forks=1))
    s.step("to_epoch_1_at_period_end", "advance", T0 + PERIOD, "advanced", transition=transition(1, 21))
    s.step("stale_epoch_0", "advance", now, "stale_transition", transition={"version": 1, "set": sjson[0], "evidence": evidence(15, [A, B, C], H[0])})
    s.step("already_verified_other_slot", "advance", now, "already_verified", transition=transition(1, 25))
    s.step("to_epoch_2", "advance", now, "advanced", transition=transition(2, 60))
    s.step("epoch_0_dropped", "accept_root", now, "epoch_behind", evidence=evidence(16, [A, B, C], H[1]))
    s.step("stale_epoch_1", "advance", now, "stale_transition", transition=transition(1, 26))

    # 3. Misbehaviour: each freezes the client, which then refuses everything.
    s = Scenario("conflicting_roots", "two roots for one slot, each with more than 2/3: the client freezes", checkpoint())
    now = T0 + 100
    s.step("root", "accept_root", now, "accepted", evidence=evidence(10, [A, B, C], H[1]))
    s.step("other_root_same_slot", "accept_root", now, "misbehaviour", evidence=evidence(10, [A, B, D], H[1]))
    s.step("frozen_root", "accept_root", now, "frozen", evidence=evidence(11, [A, B, C], H[1]))
    s.step("frozen_advance", "advance", now, "frozen", transition=transition(1, 20))

    s = Scenario("conflicting_transitions", "a second set for epoch 1, bound by more than 2/3 of epoch 0's set", checkpoint())
    s.step("to_epoch_1", "advance", now, "advanced", transition=transition(1, 20))
    s.step("other_set_for_epoch_1", "advance", now, "misbehaviour", transition=transition(1, 25, set_=forged, voters=[A, B, C]))
    s.step("frozen", "accept_root", now, "frozen", evidence=evidence(40, [A, B, C], H[2]))

    s = Scenario("root_binds_other_next_set", "a root of epoch 1 with more than 2/3 binds another set for epoch 2 than one verified before", checkpoint())
    s.step("to_epoch_1", "advance", now, "advanced", transition=transition(1, 20))
    s.step("root_epoch_1", "accept_root", now, "accepted", evidence=evidence(40, [A, B, C], H[2]))
    s.step("root_other_next_set", "accept_root", now, "misbehaviour", evidence=evidence(45, [A, B, D], rand32()))

    s = Scenario("root_conflicts_with_binding", "a root at the slot that bound epoch 1's set, with another bank hash", checkpoint())
    s.step("to_epoch_1", "advance", now, "advanced", transition=transition(1, 20))
    s.step("other_bank_at_binding_slot", "accept_root", now, "misbehaviour", evidence=evidence(20, [A, B, C], H[1]))

    s = Scenario("submitted", "misbehaviour handed to the client: refused until the two pieces conflict and each holds more than 2/3", checkpoint())
    first = evidence(12, [A, B, C], H[1])
    same = copy.deepcopy(first)
    same["votes"] = same["votes"][:2] + [b64(vote(D, 12, evidence_bank_hash(first)))]
    other = evidence(12, [A, B, D], H[1])
    weak = evidence(12, [A, B], H[1])
    s.step("not_conflicting", "misbehaviour", now, "not_conflicting", first=first, second=same)
    s.step("other_epochs", "misbehaviour", now, "not_conflicting", first=first, second=evidence(40, [A, B, C], H[2]))
    s.step("epoch_ahead", "misbehaviour", now, "epoch_ahead", first=evidence(40, [A, B, C], H[2]), second=evidence(40, [A, B, D], H[2]))
    s.step("second_lacks_stake", "misbehaviour", now, "insufficient_stake", first=first, second=weak)
    s.step("expired", "misbehaviour", T0 + PERIOD + 1, "expired", first=first, second=other)
    s.step("conflict", "misbehaviour", now, "misbehaviour", first=first, second=other)
    s.step("frozen", "misbehaviour", now, "frozen", first=first, second=other)

    # Misbehaviour files as a person checks them, without a client.
    files = []
    produced = [st["expect"]["misbehaviour"] for sc in scenarios for st in sc["steps"] if "misbehaviour" in st["expect"]]
    assert len(produced) == 5

    # The state file: each scenario's client at its end, and states a reader refuses.
    for sc, client in zip(scenarios, clients):
        sc["final_state"] = client.state_json()
        again = Client.from_state_json(copy.deepcopy(sc["final_state"]))
        assert again.state_json() == sc["final_state"]
    followed = scenarios[0]["final_state"]
    invalid_states = []
    for name, description, j in [
        ("three_held", "three held epochs", dict(followed, held=followed["held"] + followed["held"][-1:])),
        ("not_consecutive", "held epochs 4 and 4", dict(followed, held=[followed["held"][0], followed["held"][0]])),
        ("proof_of_other_set", "the newest epoch's proof binds another set", dict(followed, held=[followed["held"][0], dict(followed["held"][1], proof=followed["held"][0]["proof"])])),
        ("newest_without_proof", "the newest of two held epochs has no proof", dict(followed, held=[followed["held"][0], dict(followed["held"][1], proof=None)])),
    ]:
        try:
            Client.from_state_json(j)
        except Refused as e:
            assert e.error == "state", name
        else:
            raise AssertionError(name)
        invalid_states.append({"name": name, "description": description, "state": j, "error": "state"})

    def add_file(name, description, f, error=None, trusted=None):
        try:
            kind = check_misbehaviour(f, trusted)
        except Refused as e:
            assert e.error == error, (name, e.error)
            files.append({"name": name, "description": description, "file": f, "trusted_set_hash": None if trusted is None else b58encode(trusted), "valid": False, "error": error})
        else:
            assert error is None, name
            files.append({"name": name, "description": description, "file": f, "trusted_set_hash": None if trusted is None else b58encode(trusted), "valid": True, "kind": kind})

    for f, sc in zip(produced, [sc for sc in scenarios if any("misbehaviour" in st["expect"] for st in sc["steps"])]):
        add_file(sc["name"], "as the client wrote it", f)
    base = produced[0]
    add_file("trusted_hash", "checked against the hash of the set its reader trusts", base, trusted=H[0])
    add_file("untrusted_set", "its set is not the one its reader trusts", base, "untrusted_set", trusted=H[1])
    add_file("not_conflicting", "the same evidence twice", dict(base, second=base["first"]), "not_conflicting")
    add_file("wrong_kind", "two bank hashes for one slot, called conflicting next sets", dict(base, kind="conflicting_next_sets"), "wrong_kind")
    add_file("second_lacks_stake", "the second evidence has 2/3 exactly", dict(base, second=weak), "insufficient_stake")
    add_file("slot_outside_set_epoch", "the second evidence is of epoch 1, the set of epoch 0", dict(base, second=evidence(40, [A, B, C], H[2])), "slot_not_in_epoch")
    add_file("set_tampered", "the set's total stake changed, so its hash is not the trusted one", dict(base, set=dict(base["set"], totalStake=base["set"]["totalStake"] + 1)), "untrusted_set", trusted=H[0])

    doc = {
        "version": 1,
        "description": "aldb epoch chain (docs/SPEC.md §11) test vectors: the epoch schedule, the validator set's encoding and hash, the bank hash with the next set, and the light client that follows epochs. Generated by tools/vectors/gen_epochs.py; do not edit by hand.",
        "constants": {
            "set_domain": SET_DOMAIN.hex(),
            "max_set_members": MAX_SET_MEMBERS,
            "minimum_slots_per_epoch": MINIMUM_SLOTS_PER_EPOCH,
            "max_evidence_votes": votes.MAX_EVIDENCE_VOTES,
        },
        "schedules": schedules,
        "invalid_schedules": invalid_schedules,
        "validators": [
            {
                "name": v["name"],
                "node_seed": v["node_seed"].hex(),
                "node_identity": b58encode(v["node"]),
                "voter_seed": v["voter_seed"].hex(),
                "authorized_voter": b58encode(v["voter"]),
                "vote_account": b58encode(v["vote_account"]),
            }
            for v in [A, A2, B, C, D, E, F, X]
        ],
        "sets": sets,
        "invalid_sets": invalid_sets,
        "invalid_set_json": invalid_set_json,
        "bank_hash": bank_hash_cases,
        "scenarios": scenarios,
        "misbehaviour_files": files,
        "invalid_states": invalid_states,
    }
    steps = sum(len(sc["steps"]) for sc in scenarios)
    summary = (
        f"{len(schedules)} schedules, {len(sets)} sets, {len(invalid_sets) + len(invalid_set_json)} invalid sets, "
        f"{len(scenarios)} scenarios of {steps} steps, {len(files)} misbehaviour files"
    )
    return write_or_check(OUT, "gen_epochs.py", doc, 1, summary)


if __name__ == "__main__":
    sys.exit(main())
