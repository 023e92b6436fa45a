/**
 * The epoch chain (docs/SPEC.md §11): follow the cluster's validator set from one trusted set
 * through any number of epochs, on votes alone. Every bank hash commits to the next epoch's set
 * beside the state root, `sha256(h || root || next_set_hash)`; a {@link LightClient} starts from a
 * checkpoint, advances one epoch at a time, accepts a root at slot S only on more than 2/3 of S's
 * epoch set, refuses sets older than its trusting period, and freezes on misbehaviour. Slots,
 * stakes and times are bigints. What shows that a set vouched for a bank hash is one small part
 * ({@link vouch}): TowerSync votes today.
 */

import { sha256 } from "@noble/hashes/sha2.js";
import { Hash, readU64le, u64le } from "./commitment.js";
import { ascii, base58DecodeExact, base58Encode, base64Decode, base64Encode, bytesEqual, concatBytes } from "./encoding.js";
import { AldbError, EpochErrorCode } from "./errors.js";
import { JsonValue, parseJson } from "./json.js";
import { bankHashWithSet, MAX_EVIDENCE_VOTES, parseVoteTransaction, tallyVotes, Validator, ValidatorSet, validatorSet } from "./votes.js";

/** The prefix hashed before a set's encoding. */
export const SET_DOMAIN: Uint8Array = ascii("aldb-epoch-set-v1");
/** The most members a followed set may have. */
export const MAX_SET_MEMBERS = 65536;
/** agave's MINIMUM_SLOTS_PER_EPOCH: the first warmup epoch's length. */
export const MINIMUM_SLOTS_PER_EPOCH = 32n;

const U64_MAX = (1n << 64n) - 1n;
const I64_MIN = -(1n << 63n);
const I64_MAX = (1n << 63n) - 1n;
const ZERO32 = new Uint8Array(32);

const fail = (code: EpochErrorCode, message: string): never => {
  throw new AldbError(code, message);
};

// ---------------------------------------------------------------------------------------------
// §11.2: the epoch schedule.

export interface EpochSchedule {
  slotsPerEpoch: bigint;
  leaderScheduleSlotOffset: bigint;
  warmup: boolean;
  firstNormalEpoch: bigint;
  firstNormalSlot: bigint;
}

/** `EpochSchedule::custom`: the warmup fields computed from the other three. */
export function epochSchedule(slotsPerEpoch: bigint, leaderScheduleSlotOffset: bigint, warmup: boolean): EpochSchedule {
  if (slotsPerEpoch < MINIMUM_SLOTS_PER_EPOCH || slotsPerEpoch > U64_MAX || leaderScheduleSlotOffset < 0n || leaderScheduleSlotOffset > U64_MAX) {
    fail("schedule", "slotsPerEpoch must be at least 32");
  }
  let firstNormalEpoch = 0n;
  let firstNormalSlot = 0n;
  if (warmup) {
    let p = 1n;
    let log = 0n;
    while (p < slotsPerEpoch) {
      p <<= 1n;
      log++;
    }
    if (p > U64_MAX) fail("schedule", "slotsPerEpoch has no power of two in u64");
    firstNormalEpoch = log - 5n;
    firstNormalSlot = p - MINIMUM_SLOTS_PER_EPOCH;
  }
  return { slotsPerEpoch, leaderScheduleSlotOffset, warmup, firstNormalEpoch, firstNormalSlot };
}

/** Throws `schedule` unless the five fields are a schedule agave makes. */
export function validateSchedule(s: EpochSchedule): void {
  const want = epochSchedule(s.slotsPerEpoch, s.leaderScheduleSlotOffset, s.warmup);
  if (want.firstNormalEpoch !== s.firstNormalEpoch || want.firstNormalSlot !== s.firstNormalSlot) {
    fail("schedule", "firstNormalEpoch and firstNormalSlot are not the ones warmup implies");
  }
}

/** The epoch of `slot`. */
export function epochOf(s: EpochSchedule, slot: bigint): bigint {
  if (slot < s.firstNormalSlot) {
    // Warmup epoch e holds [32 (2^e - 1), 32 (2^(e+1) - 1)): slot / 32 + 1 is in [2^e, 2^(e+1)).
    let x = slot / MINIMUM_SLOTS_PER_EPOCH + 1n;
    let e = -1n;
    while (x > 0n) {
      x >>= 1n;
      e++;
    }
    return e;
  }
  return s.firstNormalEpoch + (slot - s.firstNormalSlot) / s.slotsPerEpoch;
}

/** The first slot of `epoch`, or null past the last slot. */
export function firstSlot(s: EpochSchedule, epoch: bigint): bigint | null {
  const r = epoch <= s.firstNormalEpoch ? ((1n << epoch) - 1n) * MINIMUM_SLOTS_PER_EPOCH : (epoch - s.firstNormalEpoch) * s.slotsPerEpoch + s.firstNormalSlot;
  return r <= U64_MAX ? r : null;
}

/** The epoch whose stakes a bank at `slot` has fixed (saturating, as agave's). */
export function leaderScheduleEpoch(s: EpochSchedule, slot: bigint): bigint {
  if (slot < s.firstNormalSlot) return epochOf(s, slot) + 1n;
  const ahead = slot - s.firstNormalSlot + s.leaderScheduleSlotOffset;
  return s.firstNormalEpoch + (ahead > U64_MAX ? U64_MAX : ahead) / s.slotsPerEpoch;
}

/** The first slot of `epoch` whose bank holds the set of `epoch + 1` (§11.3), or null. */
export function nextSetFrom(s: EpochSchedule, epoch: bigint): bigint | null {
  const first = firstSlot(s, epoch);
  if (first === null) return null;
  if (first < s.firstNormalSlot) return first;
  // Normal slots: leaderScheduleEpoch(S) >= epoch + 1 from S = firstSlot(epoch + 1) - offset,
  // computed without the u64 bound (the next epoch may start past the last slot).
  const next = (epoch + 1n - s.firstNormalEpoch) * s.slotsPerEpoch + s.firstNormalSlot;
  const from = next > s.leaderScheduleSlotOffset ? next - s.leaderScheduleSlotOffset : 0n;
  const r = from > first ? from : first;
  return r <= U64_MAX ? r : null;
}

// ---------------------------------------------------------------------------------------------
// §11.2: the set.

export interface EpochSet {
  epoch: bigint;
  totalStake: bigint;
  /** Members sorted by vote account. */
  members: Validator[];
  /** The members as a §10.4 set, for the tally. */
  voters: ValidatorSet;
  encoding: Uint8Array;
  /** `sha256("aldb-epoch-set-v1" || encoding)`. */
  hash: Hash;
}

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return a[i] - b[i];
  return a.length - b.length;
}

function fromSorted(epoch: bigint, totalStake: bigint, members: Validator[]): EpochSet {
  if (members.length === 0) fail("empty", "the set has no members");
  if (members.length > MAX_SET_MEMBERS) fail("too_many_members", `${members.length} members; at most ${MAX_SET_MEMBERS}`);
  let sum = 0n;
  members.forEach((m, i) => {
    if (i > 0) {
      const c = compareBytes(m.voteAccount, members[i - 1].voteAccount);
      if (c === 0) fail("duplicate_vote_account", "a vote account is listed twice");
      if (c < 0) fail("not_sorted", "the vote accounts are not in ascending order");
    }
    if (m.stake === 0n) fail("zero_stake", "a member has no stake");
    sum += m.stake;
  });
  if (sum > totalStake) fail("stake_exceeds_total", `the members' stakes ${sum} exceed the total ${totalStake}`);
  const encoding = new Uint8Array(20 + 72 * members.length);
  encoding.set(u64le(epoch), 0);
  encoding.set(u64le(totalStake), 8);
  new DataView(encoding.buffer).setUint32(16, members.length, true);
  members.forEach((m, i) => {
    encoding.set(m.voteAccount, 20 + 72 * i);
    encoding.set(m.authorizedVoter, 52 + 72 * i);
    encoding.set(u64le(m.stake), 84 + 72 * i);
  });
  return { epoch, totalStake, members, voters: validatorSet(members), encoding, hash: sha256(concatBytes(SET_DOMAIN, encoding)) };
}

function u64Of(x: unknown, what: string): bigint {
  if (typeof x === "bigint" && x >= 0n && x <= U64_MAX) return x;
  if (typeof x === "number" && Number.isSafeInteger(x) && x >= 0) return BigInt(x);
  throw new AldbError("bad_type", `${what} is not a u64`);
}

function i64Of(x: unknown, what: string): bigint {
  if (typeof x === "bigint" && x >= I64_MIN && x <= I64_MAX) return x;
  if (typeof x === "number" && Number.isSafeInteger(x)) return BigInt(x);
  throw new AldbError("bad_type", `${what} is not an i64`);
}

/** A set from members in any order: sorted, then held to §11.2's rules. */
export function epochSet(
  epoch: bigint | number,
  totalStake: bigint | number,
  members: readonly { voteAccount: string | Uint8Array; authorizedVoter: string | Uint8Array; stake: bigint | number }[],
): EpochSet {
  if (members.length > MAX_SET_MEMBERS) fail("too_many_members", `${members.length} members; at most ${MAX_SET_MEMBERS}`);
  const key = (k: string | Uint8Array, what: string) => (typeof k === "string" ? base58DecodeExact(k, 32, what) : k);
  const list: Validator[] = members.map((m) => ({
    voteAccount: key(m.voteAccount, "voteAccount"),
    authorizedVoter: key(m.authorizedVoter, "authorizedVoter"),
    stake: u64Of(m.stake, "stake"),
  }));
  for (const m of list) if (m.voteAccount.length !== 32 || m.authorizedVoter.length !== 32) throw new AldbError("invalid_argument", "keys are 32 bytes");
  list.sort(
    (a, b) => compareBytes(a.voteAccount, b.voteAccount) || compareBytes(a.authorizedVoter, b.authorizedVoter) || (a.stake < b.stake ? -1 : a.stake > b.stake ? 1 : 0),
  );
  return fromSorted(u64Of(epoch, "epoch"), u64Of(totalStake, "totalStake"), list);
}

/** Decodes §11.2's encoding, its rules in the spec's order. */
export function decodeEpochSet(bytes: Uint8Array): EpochSet {
  if (bytes.length < 20) fail("length", "shorter than the set's header");
  const n = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(16, true);
  if (n === 0) fail("empty", "the set has no members");
  if (n > MAX_SET_MEMBERS) fail("too_many_members", `${n} members; at most ${MAX_SET_MEMBERS}`);
  if (bytes.length !== 20 + 72 * n) fail("length", "the length is not the header and the counted members");
  const members: Validator[] = [];
  for (let i = 0; i < n; i++) {
    const at = 20 + 72 * i;
    members.push({ voteAccount: bytes.slice(at, at + 32), authorizedVoter: bytes.slice(at + 32, at + 64), stake: readU64le(bytes, at + 64) });
  }
  return fromSorted(readU64le(bytes, 0), readU64le(bytes, 8), members);
}

export interface EpochSetJson {
  epoch: bigint | number;
  totalStake: bigint | number;
  validators: { voteAccount: string; authorizedVoter: string; stake: bigint | number }[];
}

function obj(x: unknown, what: string): Record<string, JsonValue> {
  if (typeof x !== "object" || x === null || Array.isArray(x)) throw new AldbError("bad_type", `${what} is not an object`);
  return x as Record<string, JsonValue>;
}

function need(o: Record<string, JsonValue>, keys: string[]): void {
  for (const k of keys) if (!(k in o)) throw new AldbError("missing_field", k);
}

/** Reads `{"epoch", "totalStake", "validators"}`, validators in any order. */
export function epochSetFromJson(input: string | unknown): EpochSet {
  const v = obj(typeof input === "string" ? parseJson(input) : input, "set");
  need(v, ["epoch", "totalStake", "validators"]);
  if (!Array.isArray(v.validators)) throw new AldbError("bad_type", "validators is not an array");
  return epochSet(
    u64Of(v.epoch, "epoch"),
    u64Of(v.totalStake, "totalStake"),
    v.validators.map((m) => {
      const o = obj(m, "validator");
      need(o, ["voteAccount", "authorizedVoter", "stake"]);
      if (typeof o.voteAccount !== "string" || typeof o.authorizedVoter !== "string") throw new AldbError("bad_type", "keys are base58 strings");
      return { voteAccount: o.voteAccount, authorizedVoter: o.authorizedVoter, stake: u64Of(o.stake, "stake") };
    }),
  );
}

/** The JSON form, validators sorted by vote account. */
export function epochSetToJson(s: EpochSet): EpochSetJson {
  return {
    epoch: s.epoch,
    totalStake: s.totalStake,
    validators: s.members.map((m) => ({ voteAccount: base58Encode(m.voteAccount), authorizedVoter: base58Encode(m.authorizedVoter), stake: m.stake })),
  };
}

// ---------------------------------------------------------------------------------------------
// §11.1, §11.4: the bank hash with the set, slot evidence, transitions.

// mixRootAndSet and bankHashWithSet live beside §10.1's bank hash (votes.ts), since §10 evidence
// from a chain binding sets uses them too; they are re-exported here.
export { bankHashWithSet, mixRootAndSet } from "./votes.js";

export interface SlotEvidence {
  slot: bigint;
  h: Hash;
  root: Hash;
  hardForks: bigint | null;
  /** Zero when the bank binds no next set. */
  nextSetHash: Hash;
  votes: Uint8Array[];
}

export interface SlotEvidenceJson {
  version: number;
  slot: bigint | number;
  h: string;
  root: string;
  hardForks: bigint | number | null;
  nextSetHash: string;
  votes: string[];
}

/** Reads `{"version": 1, "slot", "h", "root", "hardForks", "nextSetHash", "votes"}`. */
export function slotEvidenceFromJson(input: string | unknown): SlotEvidence {
  const v = obj(typeof input === "string" ? parseJson(input) : input, "evidence");
  need(v, ["version", "slot", "h", "root", "hardForks", "nextSetHash", "votes"]);
  if (u64Of(v.version, "version") !== 1n) fail("version", "slot evidence version is not 1");
  const votes = v.votes;
  if (!Array.isArray(votes) || votes.some((x) => typeof x !== "string")) throw new AldbError("bad_type", "votes is not an array of base64 strings");
  if (votes.length > MAX_EVIDENCE_VOTES) throw new AldbError("too_many_votes", `${votes.length} votes`);
  const hardForks = v.hardForks === null ? null : u64Of(v.hardForks, "hardForks");
  if (hardForks === 0n) throw new AldbError("bad_type", "hardForks is null or positive");
  const hash = (k: string) => {
    if (typeof v[k] !== "string") throw new AldbError("bad_type", `${k} is not base58`);
    return base58DecodeExact(v[k] as string, 32, k);
  };
  return {
    slot: u64Of(v.slot, "slot"),
    h: hash("h"),
    root: hash("root"),
    hardForks,
    nextSetHash: hash("nextSetHash"),
    votes: (votes as string[]).map((s) => base64Decode(s)),
  };
}

export function slotEvidenceToJson(e: SlotEvidence): SlotEvidenceJson {
  return {
    version: 1,
    slot: e.slot,
    h: base58Encode(e.h),
    root: base58Encode(e.root),
    hardForks: e.hardForks,
    nextSetHash: base58Encode(e.nextSetHash),
    votes: e.votes.map(base64Encode),
  };
}

/** The bank hash the evidence describes. */
export function evidenceBankHash(e: SlotEvidence): Hash {
  return bankHashWithSet(e.h, e.root, e.nextSetHash, e.hardForks);
}

export interface Vouched {
  stake: bigint;
  totalStake: bigint;
  voters: number;
  /** §11.4's vouched time, or null when too few counted votes carry a timestamp. */
  time: bigint | null;
}

/**
 * The one rule that depends on the evidence kind: more than 2/3 of the set's total stake voted
 * for the slot and the evidence's bank hash (§10.4's rules per vote). Throws `too_many_votes` or
 * `insufficient_stake`.
 */
export function vouch(set: EpochSet, e: SlotEvidence): Vouched {
  if (e.votes.length > MAX_EVIDENCE_VOTES) fail("too_many_votes", `${e.votes.length} votes`);
  const t = tallyVotes(set.voters, e.slot, evidenceBankHash(e), e.votes);
  if (!(3n * t.stake > 2n * set.totalStake)) {
    fail("insufficient_stake", `votes of stake ${t.stake} of ${set.totalStake} agree, not more than 2/3`);
  }
  const stamped: [bigint, bigint][] = [];
  t.outcomes.forEach((o, i) => {
    if (!o.counted) return;
    const ts = parseVoteTransaction(e.votes[i]).tower.timestamp;
    if (ts !== null) stamped.push([ts, o.stake]);
  });
  stamped.sort((a, b) => (a[0] > b[0] ? -1 : a[0] < b[0] ? 1 : 0));
  let acc = 0n;
  let time: bigint | null = null;
  for (const [ts, stake] of stamped) {
    acc += stake;
    if (3n * acc > set.totalStake) {
      time = ts;
      break;
    }
  }
  return { stake: t.stake, totalStake: set.totalStake, voters: t.outcomes.filter((o) => o.counted).length, time };
}

export interface Transition {
  set: EpochSet;
  evidence: SlotEvidence;
}

/** Reads `{"version": 1, "set", "evidence"}`. */
export function transitionFromJson(input: string | unknown): Transition {
  const v = obj(typeof input === "string" ? parseJson(input) : input, "transition");
  need(v, ["version", "set", "evidence"]);
  if (u64Of(v.version, "version") !== 1n) fail("version", "transition version is not 1");
  return { set: epochSetFromJson(v.set), evidence: slotEvidenceFromJson(v.evidence) };
}

// ---------------------------------------------------------------------------------------------
// §11.5, §11.6: the light client and misbehaviour.

export interface Checkpoint {
  schedule: EpochSchedule;
  set: EpochSet;
  /** Unix seconds at which the set was the cluster's. */
  time: bigint;
  /** Seconds a set is used after its time. */
  trustingPeriod: bigint;
}

export function scheduleFromJson(input: unknown): EpochSchedule {
  const v = obj(input, "schedule");
  need(v, ["slotsPerEpoch", "leaderScheduleSlotOffset", "warmup", "firstNormalEpoch", "firstNormalSlot"]);
  if (typeof v.warmup !== "boolean") throw new AldbError("bad_type", "warmup is not a boolean");
  const s: EpochSchedule = {
    slotsPerEpoch: u64Of(v.slotsPerEpoch, "slotsPerEpoch"),
    leaderScheduleSlotOffset: u64Of(v.leaderScheduleSlotOffset, "leaderScheduleSlotOffset"),
    warmup: v.warmup,
    firstNormalEpoch: u64Of(v.firstNormalEpoch, "firstNormalEpoch"),
    firstNormalSlot: u64Of(v.firstNormalSlot, "firstNormalSlot"),
  };
  validateSchedule(s);
  return s;
}

/** Reads `{"version": 1, "schedule", "set", "time", "trustingPeriod"}`. */
export function checkpointFromJson(input: string | unknown): Checkpoint {
  const v = obj(typeof input === "string" ? parseJson(input) : input, "checkpoint");
  need(v, ["version", "schedule", "set", "time", "trustingPeriod"]);
  if (u64Of(v.version, "version") !== 1n) fail("version", "checkpoint version is not 1");
  return { schedule: scheduleFromJson(v.schedule), set: epochSetFromJson(v.set), time: i64Of(v.time, "time"), trustingPeriod: u64Of(v.trustingPeriod, "trustingPeriod") };
}

export type MisbehaviourKind = "conflicting_bank_hashes" | "conflicting_next_sets";

export interface Misbehaviour {
  kind: MisbehaviourKind;
  schedule: EpochSchedule;
  /** The set of the epoch both evidences are of. */
  set: EpochSet;
  first: SlotEvidence;
  second: SlotEvidence;
}

/** The misbehaviour file of §11.6. */
export function misbehaviourToJson(m: Misbehaviour): unknown {
  return {
    version: 1,
    kind: m.kind,
    schedule: { ...m.schedule },
    set: epochSetToJson(m.set),
    setHash: base58Encode(m.set.hash),
    first: slotEvidenceToJson(m.first),
    second: slotEvidenceToJson(m.second),
  };
}

export function misbehaviourFromJson(input: string | unknown): Misbehaviour {
  const v = obj(typeof input === "string" ? parseJson(input) : input, "misbehaviour");
  need(v, ["version", "kind", "schedule", "set", "first", "second"]);
  if (u64Of(v.version, "version") !== 1n) fail("version", "misbehaviour version is not 1");
  if (v.kind !== "conflicting_bank_hashes" && v.kind !== "conflicting_next_sets") throw new AldbError("bad_type", "kind is not a misbehaviour kind");
  return { kind: v.kind, schedule: scheduleFromJson(v.schedule), set: epochSetFromJson(v.set), first: slotEvidenceFromJson(v.first), second: slotEvidenceFromJson(v.second) };
}

function conflict(a: SlotEvidence, b: SlotEvidence): MisbehaviourKind | null {
  if (a.slot === b.slot && !bytesEqual(evidenceBankHash(a), evidenceBankHash(b))) return "conflicting_bank_hashes";
  const bindsA = !bytesEqual(a.nextSetHash, ZERO32);
  const bindsB = !bytesEqual(b.nextSetHash, ZERO32);
  if (bindsA && bindsB && !bytesEqual(a.nextSetHash, b.nextSetHash)) return "conflicting_next_sets";
  return null;
}

/**
 * Checks a misbehaviour file without a client: the set's hash against `trustedSetHash` when given
 * (`untrusted_set`), both slots in the set's epoch, the set vouching for both, and the conflict it
 * names (`not_conflicting`, `wrong_kind`). No clock is involved.
 */
export function verifyMisbehaviour(m: Misbehaviour, trustedSetHash?: Hash): MisbehaviourKind {
  validateSchedule(m.schedule);
  if (trustedSetHash !== undefined && !bytesEqual(trustedSetHash, m.set.hash)) fail("untrusted_set", "the set is not the trusted one");
  for (const e of [m.first, m.second]) {
    const ep = epochOf(m.schedule, e.slot);
    if (ep !== m.set.epoch) fail("slot_not_in_epoch", `slot ${e.slot} is in epoch ${ep}, not ${m.set.epoch}`);
  }
  vouch(m.set, m.first);
  vouch(m.set, m.second);
  const kind = conflict(m.first, m.second);
  if (kind === null) fail("not_conflicting", "the two evidences do not conflict");
  if (kind !== m.kind) fail("wrong_kind", `they conflict as ${kind}, not ${m.kind}`);
  return kind as MisbehaviourKind;
}

export interface HeldEpoch {
  set: EpochSet;
  time: bigint;
  /** The evidence that proved the set; null for the checkpoint. */
  proof: SlotEvidence | null;
}

export type Advanced =
  | { ok: "advanced"; epoch: bigint; setHash: Hash; time: bigint; vouched: Vouched }
  | { ok: "already_verified"; epoch: bigint; vouched: Vouched };

export interface EpochRoot {
  slot: bigint;
  epoch: bigint;
  bankHash: Hash;
  root: Hash;
  nextSetHash: Hash;
  vouched: Vouched;
}

/** A light client that follows the validator set from a checkpoint, one epoch at a time (§11.5). */
export class LightClient {
  readonly schedule: EpochSchedule;
  readonly trustingPeriod: bigint;
  /** The held epochs, oldest first: the newest trusted one and, once advanced, the one before. */
  held: HeldEpoch[];
  /** The evidence of the highest slot verified. */
  last: SlotEvidence | null = null;
  /** The misbehaviour that froze the client. */
  frozen: Misbehaviour | null = null;

  /**
   * A client from its state file (§11.5), checked: a valid schedule, one or two held epochs,
   * consecutive, each but a checkpoint proven by evidence of the epoch before that binds its set.
   */
  static fromStateJson(input: string | unknown): LightClient {
    const v = obj(typeof input === "string" ? parseJson(input) : input, "state");
    need(v, ["version", "schedule", "trustingPeriod", "held", "last", "frozen"]);
    if (u64Of(v.version, "version") !== 1n) fail("version", "state version is not 1");
    if (!Array.isArray(v.held)) throw new AldbError("bad_type", "held is not an array");
    if (v.held.length < 1 || v.held.length > 2) fail("state", "one or two held epochs");
    const schedule = scheduleFromJson(v.schedule);
    const held: HeldEpoch[] = v.held.map((x) => {
      const e = obj(x, "held epoch");
      need(e, ["set", "time", "proof"]);
      return { set: epochSetFromJson(e.set), time: i64Of(e.time, "time"), proof: e.proof === null ? null : slotEvidenceFromJson(e.proof) };
    });
    if (held.length === 2 && held[1].set.epoch !== held[0].set.epoch + 1n) fail("state", "the held epochs are not consecutive");
    held.forEach((e, i) => {
      if (e.proof === null ? i > 0 : epochOf(schedule, e.proof.slot) !== e.set.epoch - 1n || !bytesEqual(e.proof.nextSetHash, e.set.hash)) {
        fail("state", `held epoch ${e.set.epoch} is not proven by its predecessor's evidence`);
      }
    });
    const client = new LightClient({ schedule, set: held[0].set, time: held[0].time, trustingPeriod: u64Of(v.trustingPeriod, "trustingPeriod") });
    client.held = held;
    client.last = v.last === null ? null : slotEvidenceFromJson(v.last);
    client.frozen = v.frozen === null ? null : misbehaviourFromJson(v.frozen);
    return client;
  }

  /** The state file (§11.5): everything the client holds, to store and read back. */
  toStateJson(): unknown {
    return {
      version: 1,
      schedule: { ...this.schedule },
      trustingPeriod: this.trustingPeriod,
      held: this.held.map((e) => ({ set: epochSetToJson(e.set), time: e.time, proof: e.proof === null ? null : slotEvidenceToJson(e.proof) })),
      last: this.last === null ? null : slotEvidenceToJson(this.last),
      frozen: this.frozen === null ? null : misbehaviourToJson(this.frozen),
    };
  }

  constructor(checkpoint: Checkpoint) {
    validateSchedule(checkpoint.schedule);
    this.schedule = checkpoint.schedule;
    this.trustingPeriod = checkpoint.trustingPeriod;
    this.held = [{ set: checkpoint.set, time: checkpoint.time, proof: null }];
  }

  /** The newest trusted epoch's set, time and proof. */
  get newest(): HeldEpoch {
    return this.held[this.held.length - 1];
  }

  get epoch(): bigint {
    return this.newest.set.epoch;
  }

  get lastVerifiedSlot(): bigint | null {
    return this.last === null ? null : this.last.slot;
  }

  private heldEpoch(epoch: bigint): HeldEpoch | undefined {
    return this.held.find((e) => e.set.epoch === epoch);
  }

  private fresh(h: HeldEpoch, now: bigint): void {
    if (now - h.time > this.trustingPeriod) {
      fail("expired", `the set of epoch ${h.set.epoch} is from ${h.time}, more than the trusting period (${this.trustingPeriod} s) before ${now}: start from a newer checkpoint`);
    }
  }

  private checkFrozen(): void {
    if (this.frozen !== null) fail("frozen", "the client found misbehaviour and accepts nothing more");
  }

  private stored(): SlotEvidence[] {
    const out = this.held.flatMap((e) => (e.proof === null ? [] : [e.proof]));
    if (this.last !== null && !out.includes(this.last)) out.push(this.last);
    return out;
  }

  private checkConflicts(e: SlotEvidence, set: EpochSet): void {
    const stored = this.stored();
    const bank = stored.find((y) => y.slot === e.slot && !bytesEqual(evidenceBankHash(y), evidenceBankHash(e)));
    if (bank !== undefined) this.freeze("conflicting_bank_hashes", set, bank, e);
    const next = stored.find((y) => epochOf(this.schedule, y.slot) === set.epoch && conflict(y, e) === "conflicting_next_sets");
    if (next !== undefined) this.freeze("conflicting_next_sets", set, next, e);
  }

  private freeze(kind: MisbehaviourKind, set: EpochSet, first: SlotEvidence, second: SlotEvidence): never {
    this.frozen = { kind, schedule: this.schedule, set, first, second };
    return fail("misbehaviour", `${kind}: the client is frozen`);
  }

  private remember(e: SlotEvidence): void {
    if (this.last === null || e.slot >= this.last.slot) this.last = e;
  }

  /** Follows a transition to the next epoch, or confirms one to the newest (§11.5, "Advance"). */
  advance(t: Transition, now: bigint): Advanced {
    this.checkFrozen();
    const offered = t.set.epoch;
    const trusted = this.epoch;
    if (offered > trusted + 1n) fail("skipped_epoch", `a transition to epoch ${offered} while ${trusted} is the newest trusted: epoch ${trusted + 1n} comes first`);
    const signer = offered >= trusted && offered > 0n ? this.heldEpoch(offered - 1n) : undefined;
    if (signer === undefined) return fail("stale_transition", `a transition to epoch ${offered}, which no held set can check`);
    const e = t.evidence;
    const slotEpoch = epochOf(this.schedule, e.slot);
    if (slotEpoch !== signer.set.epoch) fail("slot_not_in_epoch", `slot ${e.slot} is in epoch ${slotEpoch}, not ${signer.set.epoch}`);
    this.fresh(signer, now);
    if (bytesEqual(e.nextSetHash, ZERO32)) fail("set_not_bound", `slot ${e.slot}'s bank binds no next set`);
    if (!bytesEqual(e.nextSetHash, t.set.hash)) fail("wrong_set", "the set is not the one the slot's bank binds");
    const vouched = vouch(signer.set, e);
    this.checkConflicts(e, signer.set);
    if (offered === trusted) return { ok: "already_verified", epoch: offered, vouched };
    const time = vouched.time ?? signer.time;
    this.held = [this.newest, { set: t.set, time, proof: e }];
    this.remember(e);
    return { ok: "advanced", epoch: offered, setHash: t.set.hash, time, vouched };
  }

  private setFor(slot: bigint, now: bigint): HeldEpoch {
    const epoch = epochOf(this.schedule, slot);
    if (epoch > this.epoch) fail("epoch_ahead", `a slot of epoch ${epoch}, past the newest trusted epoch ${this.epoch}: follow the transitions first`);
    const held = this.heldEpoch(epoch);
    if (held === undefined) return fail("epoch_behind", `a slot of epoch ${epoch}, before the oldest held epoch ${this.held[0].set.epoch}`);
    this.fresh(held, now);
    return held;
  }

  /** Accepts the root of `e.slot` on the votes of its epoch's set (§11.5, "Accept a root"). */
  acceptRoot(e: SlotEvidence, now: bigint): EpochRoot {
    this.checkFrozen();
    const held = this.setFor(e.slot, now);
    const vouched = vouch(held.set, e);
    this.checkConflicts(e, held.set);
    this.remember(e);
    return { slot: e.slot, epoch: held.set.epoch, bankHash: evidenceBankHash(e), root: e.root, nextSetHash: e.nextSetHash, vouched };
  }

  /** Two evidences handed to the client (§11.6): when they conflict, it freezes and returns the kind. */
  submitMisbehaviour(first: SlotEvidence, second: SlotEvidence, now: bigint): MisbehaviourKind {
    this.checkFrozen();
    if (epochOf(this.schedule, first.slot) !== epochOf(this.schedule, second.slot)) fail("not_conflicting", "the two evidences are of different epochs");
    const held = this.setFor(first.slot, now);
    vouch(held.set, first);
    vouch(held.set, second);
    const kind = conflict(first, second);
    if (kind === null) return fail("not_conflicting", "the two evidences do not conflict");
    this.frozen = { kind, schedule: this.schedule, set: held.set, first, second };
    return kind;
  }
}
