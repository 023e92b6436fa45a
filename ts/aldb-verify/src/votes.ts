/**
 * The vote chain (docs/SPEC.md §10): accept a state root because validators holding more than
 * 2/3 of a configured set's stake voted, in TowerSync vote transactions, for a bank hash
 * `sha256(h || root)`, then an account proven against that root. Slots and stakes are bigints.
 */

import { sha256 } from "@noble/hashes/sha2.js";
import { Hash, u64le } from "./commitment.js";
import { verifyEd25519Strict } from "./ed25519.js";
import { base58DecodeExact, base58Encode, base64Decode, bytesEqual, concatBytes } from "./encoding.js";
import { AldbError, VoteErrorCode } from "./errors.js";
import { JsonValue, parseJson } from "./json.js";
import { AccountJson, verifyAccountProof, VerifiedAccount } from "./account.js";

/** The largest Solana transaction (`PACKET_DATA_SIZE`). */
export const PACKET_DATA_SIZE = 1232;
/** The most lockouts a TowerSync may hold (`MAX_LOCKOUT_HISTORY`). */
export const MAX_LOCKOUTS = 31;
/** `VoteInstruction::TowerSync` and `TowerSyncSwitch`'s bincode tags. */
export const TAG_TOWER_SYNC = 14;
export const TAG_TOWER_SYNC_SWITCH = 15;
/** The most votes one piece of evidence may carry. */
export const MAX_EVIDENCE_VOTES = 4096;
/** `Vote111111111111111111111111111111111111111`. */
export const VOTE_PROGRAM_ID: Uint8Array = base58DecodeExact("Vote111111111111111111111111111111111111111", 32, "vote program");

const U64_MAX = (1n << 64n) - 1n;

/** `sha256(h || root)`. */
export function mixRoot(h: Hash, root: Hash): Hash {
  return sha256(concatBytes(h, root));
}

/** The bank hash of §10.1: the mix, then the hard-fork count (u64 LE) when the slot has one. */
export function bankHash(h: Hash, root: Hash, hardForks: bigint | null): Hash {
  const mixed = mixRoot(h, root);
  return hardForks === null ? mixed : sha256(concatBytes(mixed, u64le(hardForks)));
}

/** `sha256(h || root || nextSetHash)` (§11.1). */
export function mixRootAndSet(h: Hash, root: Hash, nextSetHash: Hash): Hash {
  return sha256(concatBytes(h, root, nextSetHash));
}

/** §11.1: the mix with the next set, then the hard-fork count (u64 LE) when the slot has one. */
export function bankHashWithSet(h: Hash, root: Hash, nextSetHash: Hash, hardForks: bigint | null): Hash {
  const mixed = mixRootAndSet(h, root, nextSetHash);
  return hardForks === null ? mixed : sha256(concatBytes(mixed, u64le(hardForks)));
}

export interface Lockout {
  slot: bigint;
  confirmationCount: number;
}

export interface TowerSync {
  root: bigint | null;
  lockouts: Lockout[];
  /** The bank hash of the last lockout's slot. */
  hash: Hash;
  timestamp: bigint | null;
  blockId: Hash;
  switchHash: Hash | null;
  /** The slot voted for: the last lockout's. */
  slot: bigint;
}

export interface VoteTransaction {
  message: Uint8Array;
  signatures: Uint8Array[];
  /** The signers' keys, the fee payer first. */
  signers: Uint8Array[];
  voteAccount: Uint8Array;
  /** The instruction's accounts that sign: any may be the authorized voter. */
  instructionSigners: Uint8Array[];
  recentBlockhash: Hash;
  tower: TowerSync;
}

class Reader {
  at = 0;
  constructor(readonly b: Uint8Array, readonly code: VoteErrorCode, readonly what: string) {}
  fail(why: string): never {
    throw new AldbError(this.code, `${this.what}: ${why}`);
  }
  done(): boolean {
    return this.at === this.b.length;
  }
  take(n: number): Uint8Array {
    if (this.at + n > this.b.length) this.fail("truncated");
    const out = this.b.subarray(this.at, this.at + n);
    this.at += n;
    return out;
  }
  u8(): number {
    return this.take(1)[0];
  }
  u32(): number {
    const b = this.take(4);
    return (b[0] | (b[1] << 8) | (b[2] << 16)) + b[3] * 0x1000000;
  }
  u64(): bigint {
    const b = this.take(8);
    let x = 0n;
    for (let i = 7; i >= 0; i--) x = (x << 8n) | BigInt(b[i]);
    return x;
  }
  /** solana-short-vec: at most 3 bytes, at most 0xffff, shortest form only. */
  shortVec(): number {
    let v = 0;
    for (let nth = 0; nth < 3; nth++) {
      const byte = this.u8();
      if (byte === 0 && nth > 0) this.fail("short_vec alias");
      if (nth === 2 && byte & 0x80) this.fail("short_vec longer than 3 bytes");
      v |= (byte & 0x7f) << (7 * nth);
      if (v > 0xffff) this.fail("short_vec above 65535");
      if (!(byte & 0x80)) return v;
    }
    return this.fail("short_vec");
  }
  /** solana-serde-varint u64: at most 10 bytes, within u64, no trailing zero byte. */
  varint(): bigint {
    let v = 0n;
    for (let nth = 0; nth < 10; nth++) {
      const byte = this.u8();
      v |= BigInt(byte & 0x7f) << BigInt(7 * nth);
      if (!(byte & 0x80)) {
        if (byte === 0 && nth > 0) this.fail("varint with a trailing zero byte");
        if (v > U64_MAX) this.fail("varint above u64");
        return v;
      }
    }
    return this.fail("varint longer than 10 bytes");
  }
}

/** Decodes a vote instruction's data (§10.2). Throws `not_tower_sync` or `malformed_vote`. */
export function decodeTowerSync(data: Uint8Array): TowerSync {
  if (data.length < 4) throw new AldbError("not_tower_sync", "instruction data shorter than a tag");
  const r = new Reader(data, "malformed_vote", "TowerSync");
  const tag = r.u32();
  if (tag !== TAG_TOWER_SYNC && tag !== TAG_TOWER_SYNC_SWITCH) throw new AldbError("not_tower_sync", `instruction tag ${tag}`);
  const rawRoot = r.u64();
  const root = rawRoot === U64_MAX ? null : rawRoot;
  const n = r.shortVec();
  if (n === 0) r.fail("no lockouts");
  if (n > MAX_LOCKOUTS) r.fail(`${n} lockouts`);
  const lockouts: Lockout[] = [];
  let slot = root ?? 0n;
  for (let i = 0; i < n; i++) {
    const offset = r.varint();
    const confirmationCount = r.u8();
    if (offset === 0n && (i > 0 || root !== null)) r.fail("lockout slots do not increase");
    slot += offset;
    if (slot > U64_MAX) r.fail("lockout slot overflows");
    lockouts.push({ slot, confirmationCount });
  }
  const hash = r.take(32);
  const opt = r.u8();
  if (opt > 1) r.fail("timestamp option tag");
  let timestamp: bigint | null = null;
  if (opt === 1) timestamp = BigInt.asIntN(64, r.u64());
  const blockId = r.take(32);
  const switchHash = tag === TAG_TOWER_SYNC_SWITCH ? r.take(32) : null;
  if (!r.done()) r.fail("bytes after the instruction");
  return { root, lockouts, hash, timestamp, blockId, switchHash, slot };
}

/** Decodes a legacy vote transaction by the rules of §10.3, in their order. */
export function parseVoteTransaction(bytes: Uint8Array): VoteTransaction {
  if (bytes.length > PACKET_DATA_SIZE) throw new AldbError("oversized", `${bytes.length} bytes`);
  const r = new Reader(bytes, "malformed", "transaction");
  const nSig = r.shortVec();
  const signatures: Uint8Array[] = [];
  for (let i = 0; i < nSig; i++) signatures.push(r.take(64));
  const messageStart = r.at;
  if (r.at < bytes.length && bytes[r.at] & 0x80) throw new AldbError("versioned", "a versioned message");
  const [nRequired, nReadonlySigned, nReadonlyUnsigned] = r.take(3);
  const nKeys = r.shortVec();
  const keys: Uint8Array[] = [];
  for (let i = 0; i < nKeys; i++) keys.push(r.take(32));
  const recentBlockhash = r.take(32);
  const nIx = r.shortVec();
  const ixs: { program: number; accounts: Uint8Array; data: Uint8Array }[] = [];
  for (let i = 0; i < nIx; i++) {
    const program = r.u8();
    const accounts = r.take(r.shortVec());
    const data = r.take(r.shortVec());
    ixs.push({ program, accounts, data });
  }
  if (!r.done()) r.fail("bytes after the message");
  if (nSig === 0 || nRequired !== nSig) r.fail("signature count is not the header's");
  if (nReadonlySigned >= nRequired) r.fail("the fee payer is read-only");
  if (nRequired + nReadonlyUnsigned > keys.length) r.fail("header counts exceed the keys");
  const seen = new Set(keys.map(hexKey));
  if (seen.size !== keys.length) r.fail("a key is listed twice");
  for (const ix of ixs) {
    if (ix.program === 0 || ix.program >= keys.length || ix.accounts.some((a) => a >= keys.length)) r.fail("an index is out of range");
  }
  if (ixs.length !== 1 || !bytesEqual(keys[ixs[0].program], VOTE_PROGRAM_ID)) {
    throw new AldbError("not_tower_sync", "not a single vote program instruction");
  }
  const ix = ixs[0];
  const tower = decodeTowerSync(ix.data);
  if (ix.accounts.length === 0) throw new AldbError("malformed_vote", "no vote account");
  const instructionSigners = [...new Set(Array.from(ix.accounts).filter((a) => a < nRequired))].map((a) => keys[a]);
  return {
    message: bytes.subarray(messageStart),
    signatures,
    signers: keys.slice(0, nRequired),
    voteAccount: keys[ix.accounts[0]],
    instructionSigners,
    recentBlockhash,
    tower,
  };
}

/** Whether every signature of the transaction verifies, strictly (§9.3's rules). */
export function verifyVoteSignatures(tx: VoteTransaction): boolean {
  return tx.signers.every((k, i) => verifyEd25519Strict(k, tx.message, tx.signatures[i]));
}

export interface Validator {
  voteAccount: Uint8Array;
  authorizedVoter: Uint8Array;
  stake: bigint;
}

export interface ValidatorSet {
  members: Map<string, Validator>;
  totalStake: bigint;
}

const hexKey = (b: Uint8Array): string => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");

function toStake(x: unknown): bigint {
  if (typeof x === "bigint" && x >= 0n && x <= U64_MAX) return x;
  if (typeof x === "number" && Number.isSafeInteger(x) && x >= 0) return BigInt(x);
  throw new AldbError("bad_type", "stake is not a u64 (parse with parseJson to keep large values exact)");
}

/**
 * A validator set from `[{voteAccount, authorizedVoter, stake}]` (base58 keys or bytes). Throws
 * `invalid_argument` for a repeated vote account or a zero total stake.
 */
export function validatorSet(
  members: readonly { voteAccount: string | Uint8Array; authorizedVoter: string | Uint8Array; stake: bigint | number }[],
): ValidatorSet {
  if (!Array.isArray(members)) throw new AldbError("bad_type", "a validator set is an array");
  const out = new Map<string, Validator>();
  let total = 0n;
  for (const m of members) {
    const key = (k: string | Uint8Array, what: string) => (typeof k === "string" ? base58DecodeExact(k, 32, what) : k);
    const v: Validator = {
      voteAccount: key(m.voteAccount, "voteAccount"),
      authorizedVoter: key(m.authorizedVoter, "authorizedVoter"),
      stake: toStake(m.stake),
    };
    if (v.voteAccount.length !== 32 || v.authorizedVoter.length !== 32) throw new AldbError("invalid_argument", "keys are 32 bytes");
    const id = hexKey(v.voteAccount);
    if (out.has(id)) throw new AldbError("invalid_argument", `vote account ${base58Encode(v.voteAccount)} is listed twice`);
    out.set(id, v);
    total += v.stake;
  }
  if (total === 0n) throw new AldbError("invalid_argument", "the validator set has no stake");
  return { members: out, totalStake: total };
}

export type VoteOutcome = { counted: true; stake: bigint } | { counted: false; error: VoteErrorCode };

export interface Tally {
  outcomes: VoteOutcome[];
  stake: bigint;
  totalStake: bigint;
}

/** Checks each vote against `slot` and `bankHash` in §10.4's order; signatures last. */
export function tallyVotes(set: ValidatorSet, slot: bigint, expectedHash: Hash, votes: readonly Uint8Array[]): Tally {
  const counted = new Set<string>();
  const outcomes: VoteOutcome[] = [];
  let stake = 0n;
  for (const bytes of votes) {
    let error: VoteErrorCode | null = null;
    let member: Validator | undefined;
    let id = "";
    try {
      const tx = parseVoteTransaction(bytes);
      id = hexKey(tx.voteAccount);
      member = set.members.get(id);
      if (member === undefined) error = "unknown_vote_account";
      else if (!tx.instructionSigners.some((s) => bytesEqual(s, member!.authorizedVoter))) error = "wrong_signer";
      else if (tx.tower.slot !== slot) error = "wrong_slot";
      else if (!bytesEqual(tx.tower.hash, expectedHash)) error = "wrong_hash";
      else if (counted.has(id)) error = "duplicate";
      else if (!verifyVoteSignatures(tx)) error = "bad_signature";
    } catch (e) {
      if (!(e instanceof AldbError)) throw e;
      error = e.code as VoteErrorCode;
    }
    if (error === null && member !== undefined) {
      counted.add(id);
      stake += member.stake;
      outcomes.push({ counted: true, stake: member.stake });
    } else {
      outcomes.push({ counted: false, error: error ?? "malformed" });
    }
  }
  return { outcomes, stake, totalStake: set.totalStake };
}

export interface AcceptedRoot {
  slot: bigint;
  bankHash: Hash;
  root: Hash;
  stake: bigint;
  totalStake: bigint;
  voters: number;
  /**
   * The newest time (Unix seconds, the voters' clocks) that counted votes of vote accounts holding
   * more than 1/3 of the total stake carry or exceed in their timestamps; null when the stamped
   * votes hold 1/3 or less (§10.4, freshness).
   */
  vouchedTime: bigint | null;
}

/** The newest `t` such that the votes stamped `t` or later hold more than 1/3 of `total`. */
function vouchedTime(stamped: [bigint, bigint][], total: bigint): bigint | null {
  stamped.sort((a, b) => (a[0] > b[0] ? -1 : a[0] < b[0] ? 1 : 0));
  let stake = 0n;
  for (const [t, s] of stamped) {
    stake += s;
    if (3n * stake > total) return t;
  }
  return null;
}

/**
 * Refuses an accepted root whose votes were cast more than `maxAgeSeconds` before `nowSeconds`
 * (Unix seconds, the client's clock) by its `vouchedTime`, or whose votes do not say when they
 * were cast. Throws `too_old` or `unstamped`. A server may answer an old slot's valid evidence:
 * this bounds how old an answer a client asking for the newest accepts.
 */
export function checkVoteAge(accepted: AcceptedRoot, nowSeconds: bigint | number, maxAgeSeconds: bigint | number): void {
  const now = BigInt(nowSeconds);
  const max = BigInt(maxAgeSeconds);
  if (accepted.vouchedTime === null) {
    throw new AldbError("unstamped", "the votes do not say when they were cast: those with a timestamp hold 1/3 of the stake or less");
  }
  const age = now - accepted.vouchedTime;
  if (age > max) {
    throw new AldbError("too_old", `the votes were cast ${age} s ago (timestamp ${accepted.vouchedTime}, vouched by more than 1/3 of the stake), more than the ${max} s allowed`);
  }
}

/**
 * getSlotVotes' `voteAccounts` for `set` (§10.5): each vote account with its authorized voter, so
 * the service serves their votes whatever else landed in the blocks. A set larger than a request
 * may name (MAX_EVIDENCE_VOTES) sends its largest stakes.
 */
export function voteAccountsParam(set: ValidatorSet): [string, string][] {
  let members = [...set.members.values()];
  if (members.length > MAX_EVIDENCE_VOTES) {
    const key = (m: Validator) => hexKey(m.voteAccount);
    members.sort((a, b) => (a.stake !== b.stake ? (a.stake > b.stake ? -1 : 1) : key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
    members = members.slice(0, MAX_EVIDENCE_VOTES);
  }
  return members.map((m) => [base58Encode(m.voteAccount), base58Encode(m.authorizedVoter)]);
}

/**
 * Accepts `root` for `slot` when more than 2/3 of the set's stake voted `bankHash(h, root, hardForks)`,
 * or §11.1's `bankHashWithSet` when the evidence carries a `nextSetHash` (§10.5).
 */
export function verifyRootByVotes(
  set: ValidatorSet,
  e: { slot: bigint; h: Hash; root: Hash; hardForks: bigint | null; nextSetHash?: Hash | null; votes: readonly Uint8Array[] },
): AcceptedRoot {
  if (e.votes.length > MAX_EVIDENCE_VOTES) throw new AldbError("too_many_votes", `${e.votes.length} votes`);
  const expected =
    e.nextSetHash === undefined || e.nextSetHash === null
      ? bankHash(e.h, e.root, e.hardForks)
      : bankHashWithSet(e.h, e.root, e.nextSetHash, e.hardForks);
  const t = tallyVotes(set, e.slot, expected, e.votes);
  if (!(3n * t.stake > 2n * t.totalStake)) {
    throw new AldbError("insufficient_stake", `votes of stake ${t.stake} of ${t.totalStake} agree, not more than 2/3`);
  }
  const stamped: [bigint, bigint][] = [];
  t.outcomes.forEach((o, i) => {
    if (!o.counted) return;
    const ts = parseVoteTransaction(e.votes[i]).tower.timestamp;
    if (ts !== null) stamped.push([ts, o.stake]);
  });
  return {
    slot: e.slot,
    bankHash: expected,
    root: e.root,
    stake: t.stake,
    totalStake: t.totalStake,
    voters: t.outcomes.filter((o) => o.counted).length,
    vouchedTime: vouchedTime(stamped, t.totalStake),
  };
}

export interface VoteEvidence {
  slot: bigint;
  h: Hash;
  root: Hash;
  hardForks: bigint | null;
  /** §11.4's next set hash, on a chain whose bank hashes bind it; null otherwise. */
  nextSetHash: Hash | null;
  votes: Uint8Array[];
  pubkey: Uint8Array;
  account: AccountJson | null;
  proof: unknown;
}

function u64Field(o: Record<string, JsonValue>, k: string): bigint {
  const x = o[k];
  if (typeof x === "bigint" && x >= 0n && x <= U64_MAX) return x;
  if (typeof x === "number" && Number.isSafeInteger(x) && x >= 0) return BigInt(x);
  throw new AldbError("bad_type", `${k} is not a u64`);
}

/** Reads the evidence JSON of §10.5 (text, parsed with big integers kept exact, or a value). */
export function voteEvidenceFromJson(input: string | unknown): VoteEvidence {
  const v = (typeof input === "string" ? parseJson(input) : input) as Record<string, JsonValue>;
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new AldbError("bad_type", "evidence is not an object");
  for (const k of ["version", "slot", "h", "root", "hardForks", "votes", "pubkey", "account", "proof"]) {
    if (!(k in v)) throw new AldbError("missing_field", k);
  }
  if (u64Field(v, "version") !== 1n) throw new AldbError("version", "vote evidence version is not 1");
  const votes = v.votes;
  if (!Array.isArray(votes) || votes.some((x) => typeof x !== "string")) throw new AldbError("bad_type", "votes is not an array of base64 strings");
  if (votes.length > MAX_EVIDENCE_VOTES) throw new AldbError("too_many_votes", `${votes.length} votes`);
  const hardForks = v.hardForks === null ? null : u64Field(v, "hardForks");
  if (hardForks === 0n) throw new AldbError("bad_type", "hardForks is null or positive");
  const hash = (k: string) => {
    if (typeof v[k] !== "string") throw new AldbError("bad_type", `${k} is not base58`);
    return base58DecodeExact(v[k] as string, 32, k);
  };
  return {
    slot: u64Field(v, "slot"),
    h: hash("h"),
    root: hash("root"),
    hardForks,
    nextSetHash: v.nextSetHash === undefined || v.nextSetHash === null ? null : hash("nextSetHash"),
    votes: (votes as string[]).map((s) => base64Decode(s)),
    pubkey: hash("pubkey"),
    account: v.account as unknown as AccountJson | null,
    proof: v.proof,
  };
}

export interface AccountByVotes {
  accepted: AcceptedRoot;
  /** The account, null when proven absent. */
  account: VerifiedAccount | null;
}

/**
 * The vote chain end to end: the root by the votes of `set`, then the account by its proof
 * against that root. Throws `insufficient_stake`, `too_many_votes`, a proof error, or
 * `account_mismatch`.
 */
export function verifyAccountByVotes(evidence: VoteEvidence | string | unknown, set: ValidatorSet): AccountByVotes {
  const e = isEvidence(evidence) ? evidence : voteEvidenceFromJson(evidence);
  const accepted = verifyRootByVotes(set, e);
  const answer = verifyAccountProof(e.pubkey, accepted.root, e.proof, e.account);
  return { accepted, account: answer.account };
}

function isEvidence(x: unknown): x is VoteEvidence {
  return typeof x === "object" && x !== null && (x as VoteEvidence).votes !== undefined && (x as VoteEvidence).h instanceof Uint8Array;
}
