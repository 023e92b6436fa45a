/** Root records (§9.1, §9.2), attestations (§9.3), the quorum and chain rules (§9.4), JSON (§9.5). */

import { blake2sHasher } from "./blake2s.js";
import { Hash, readU64le, toU64, u64le } from "./commitment.js";
import { checkEd25519Strict } from "./ed25519.js";
import { ascii, base58DecodeExact, base58Encode, base64Decode, base64Encode, bytesEqual } from "./encoding.js";
import { AldbError, AttestationErrorCode } from "./errors.js";
import { JsonValue, parseJson } from "./json.js";

/** Length of a record without `SLOT_BANK_HASH`. */
export const RECORD_LEN = 187;
/** Length of a record with `SLOT_BANK_HASH`: the 187 bytes, then the slot's own bank hash. */
export const RECORD_LEN_WITH_BANK_HASH = RECORD_LEN + 32;
export const RECORD_VERSION = 1;
export const FLAG_PARENT = 0x01;
export const FLAG_CHAINED = 0x02;
export const FLAG_BLOCK = 0x04;
export const FLAG_BANK_HASH = 0x08;
export const FLAG_SLOT_BANK_HASH = 0x10;
const KNOWN_FLAGS = FLAG_PARENT | FLAG_CHAINED | FLAG_BLOCK | FLAG_BANK_HASH | FLAG_SLOT_BANK_HASH;

function lengthError(len: number): AldbError {
  return new AldbError("length", `a record is ${RECORD_LEN} bytes, or ${RECORD_LEN_WITH_BANK_HASH} with SLOT_BANK_HASH, not ${len}`);
}

/** "aldb-attest-v1", the 14-byte prefix of every attestation message. */
export const ATTEST_PREFIX = ascii("aldb-attest-v1");
const H_REC = blake2sHasher({ personal: ascii("aldbrcrd") });

export type Commitment = "confirmed" | "finalized";

/**
 * A decoded record. An optional field is null exactly when its flag is unset (`bankHash`, newer
 * than the others, is absent instead, or null), so the flags are implied by the fields
 * ({@link recordFlags}); u64 values are bigints.
 */
export interface RootRecord {
  genesisHash: Hash;
  slot: bigint;
  /** Set with `PARENT`. */
  parentSlot: bigint | null;
  commitment: Commitment;
  stateRoot: Hash;
  /** Set with `CHAINED`. */
  parentRecordHash: Hash | null;
  /** Set with `BLOCK` (both or neither). */
  blockhash: Hash | null;
  blockHeight: bigint | null;
  /** Set with `BANK_HASH`. */
  parentBankHash: Hash | null;
  /**
   * The slot's own bank hash, set with `SLOT_BANK_HASH` (a 219-byte record). On a chain carrying
   * the aldb consensus patch it is sha256(h || stateRoot) (§10.1), the hash validators vote on.
   * Omitted or null: a 187-byte record.
   */
  bankHash?: Hash | null;
}

export function recordFlags(r: RootRecord): number {
  return (
    (r.parentSlot !== null ? FLAG_PARENT : 0) |
    (r.parentRecordHash !== null ? FLAG_CHAINED : 0) |
    (r.blockhash !== null ? FLAG_BLOCK : 0) |
    (r.parentBankHash !== null ? FLAG_BANK_HASH : 0) |
    (r.bankHash !== undefined && r.bankHash !== null ? FLAG_SLOT_BANK_HASH : 0)
  );
}

function isZero(b: Uint8Array): boolean {
  for (let i = 0; i < b.length; i++) if (b[i] !== 0) return false;
  return true;
}

/**
 * Decodes the encoding (187 bytes, or 219 with `SLOT_BANK_HASH`), rejecting everything §9.1 says a
 * decoder MUST reject. `bankHash` is in the result only when the record has it.
 */
export function decodeRecord(bytes: Uint8Array): RootRecord {
  if (bytes.length !== RECORD_LEN && bytes.length !== RECORD_LEN_WITH_BANK_HASH) throw lengthError(bytes.length);
  if (bytes[0] !== RECORD_VERSION) throw new AldbError("version", `record version ${bytes[0]}`);
  const c = bytes[49];
  if (c !== 1 && c !== 2) throw new AldbError("commitment", `commitment ${c}`);
  const flags = bytes[50];
  if (flags & ~KNOWN_FLAGS) throw new AldbError("unknown_flag", `flags 0x${flags.toString(16)} has unknown bits`);
  const withBankHash = (flags & FLAG_SLOT_BANK_HASH) !== 0;
  if (bytes.length !== (withBankHash ? RECORD_LEN_WITH_BANK_HASH : RECORD_LEN)) throw lengthError(bytes.length);
  const parent = (flags & FLAG_PARENT) !== 0;
  if (!parent && flags & (FLAG_CHAINED | FLAG_BANK_HASH)) {
    throw new AldbError("flag_without_parent", "CHAINED or BANK_HASH without PARENT");
  }
  const slot = readU64le(bytes, 33);
  const parentSlot = readU64le(bytes, 41);
  if (parent && parentSlot >= slot) throw new AldbError("parent_slot_not_below_slot", `parent slot ${parentSlot} >= slot ${slot}`);
  const field = (off: number) => bytes.slice(off, off + 32);
  const unset = (flag: number, name: string, ok: boolean) => {
    if (!(flags & flag) && !ok) throw new AldbError("unset_field_not_zero", `${name} is not zero although its flag is unset`);
  };
  unset(FLAG_PARENT, "parent_slot", parentSlot === 0n);
  unset(FLAG_CHAINED, "parent_record_hash", isZero(bytes.subarray(83, 115)));
  unset(FLAG_BLOCK, "blockhash", isZero(bytes.subarray(115, 147)));
  unset(FLAG_BLOCK, "block_height", isZero(bytes.subarray(147, 155)));
  unset(FLAG_BANK_HASH, "parent_bank_hash", isZero(bytes.subarray(155, 187)));
  const record: RootRecord = {
    genesisHash: field(1),
    slot,
    parentSlot: parent ? parentSlot : null,
    commitment: c === 1 ? "confirmed" : "finalized",
    stateRoot: field(51),
    parentRecordHash: flags & FLAG_CHAINED ? field(83) : null,
    blockhash: flags & FLAG_BLOCK ? field(115) : null,
    blockHeight: flags & FLAG_BLOCK ? readU64le(bytes, 147) : null,
    parentBankHash: flags & FLAG_BANK_HASH ? field(155) : null,
  };
  if (withBankHash) record.bankHash = field(RECORD_LEN);
  return record;
}

/** The encoding (187 or 219 bytes); throws `invalid_argument` for a record no decoder would accept. */
export function encodeRecord(r: RootRecord): Uint8Array {
  const bankHash = r.bankHash ?? null;
  const out = new Uint8Array(bankHash === null ? RECORD_LEN : RECORD_LEN_WITH_BANK_HASH);
  const put32 = (off: number, h: Hash | null, what: string) => {
    if (h === null) return;
    if (!(h instanceof Uint8Array) || h.length !== 32) throw new AldbError("invalid_argument", `${what} must be 32 bytes`);
    out.set(h, off);
  };
  if ((r.blockhash === null) !== (r.blockHeight === null)) {
    throw new AldbError("invalid_argument", "blockhash and blockHeight are set together (BLOCK) or not at all");
  }
  const flags = recordFlags(r);
  const slot = toU64(r.slot, "slot");
  out[0] = RECORD_VERSION;
  put32(1, r.genesisHash, "genesisHash");
  out.set(u64le(slot), 33);
  if (r.parentSlot !== null) out.set(u64le(toU64(r.parentSlot, "parentSlot")), 41);
  if (r.commitment !== "confirmed" && r.commitment !== "finalized") throw new AldbError("invalid_argument", "commitment");
  out[49] = r.commitment === "confirmed" ? 1 : 2;
  out[50] = flags;
  put32(51, r.stateRoot, "stateRoot");
  put32(83, r.parentRecordHash, "parentRecordHash");
  put32(115, r.blockhash, "blockhash");
  if (r.blockHeight !== null) out.set(u64le(toU64(r.blockHeight, "blockHeight")), 147);
  put32(155, r.parentBankHash, "parentBankHash");
  put32(RECORD_LEN, bankHash, "bankHash");
  try {
    decodeRecord(out);
  } catch (e) {
    throw new AldbError("invalid_argument", `not a valid record: ${(e as Error).message}`);
  }
  return out;
}

/** `record_hash = H_rec(record)` (§9.2) of the encoding, 187 or 219 bytes. */
export function recordHash(bytes: Uint8Array): Hash {
  if (bytes.length !== RECORD_LEN && bytes.length !== RECORD_LEN_WITH_BANK_HASH) throw lengthError(bytes.length);
  return H_REC(bytes);
}

/** The 46-byte message an attestation signs: "aldb-attest-v1" || record_hash. */
export function attestationMessage(recordHash: Hash): Uint8Array {
  if (recordHash.length !== 32) throw new AldbError("invalid_argument", "record hash must be 32 bytes");
  const m = new Uint8Array(46);
  m.set(ATTEST_PREFIX, 0);
  m.set(recordHash, 14);
  return m;
}

export interface Attestation {
  identity: Uint8Array;
  signature: Uint8Array;
}

/** The first rule of §9.3 the attestation breaks, or null when it is valid. */
export function checkAttestation(recordHash: Hash, att: Attestation): AttestationErrorCode | null {
  if (att.identity.length !== 32 || att.signature.length !== 64) {
    throw new AldbError("invalid_argument", "identity is 32 bytes and signature 64");
  }
  return checkEd25519Strict(att.identity, attestationMessage(recordHash), att.signature);
}

export function verifyAttestation(recordHash: Hash, att: Attestation): boolean {
  return checkAttestation(recordHash, att) === null;
}

export interface QuorumRule {
  /** `n` distinct identities. */
  identities: Uint8Array[];
  /** `1 <= threshold <= n`. */
  threshold: number;
}

export interface QuorumResult {
  attested: boolean;
  /** The distinct identities of the rule with a valid attestation, in the order first seen. */
  validIdentities: Uint8Array[];
}

/**
 * §9.4: the record is attested when at least `threshold` distinct identities of the rule each have
 * a valid attestation over it. Outsiders, invalid attestations and repeats count for nothing.
 */
export function checkQuorum(rule: QuorumRule, recordHash: Hash, attestations: Attestation[]): QuorumResult {
  const ids = rule.identities.map((i) => base58Encode(i));
  if (new Set(ids).size !== ids.length || rule.identities.some((i) => i.length !== 32)) {
    throw new AldbError("invalid_argument", "quorum identities must be distinct 32-byte keys");
  }
  if (!Number.isInteger(rule.threshold) || rule.threshold < 1 || rule.threshold > ids.length) {
    throw new AldbError("invalid_argument", `threshold must be 1..${ids.length}`);
  }
  const members = new Set(ids);
  const good = new Set<string>();
  const validIdentities: Uint8Array[] = [];
  for (const att of attestations) {
    const id = base58Encode(att.identity);
    if (!members.has(id) || good.has(id)) continue;
    if (att.signature.length !== 64) continue;
    if (verifyAttestation(recordHash, att)) {
      good.add(id);
      validIdentities.push(att.identity);
    }
  }
  return { attested: good.size >= rule.threshold, validIdentities };
}

/** §9.4: does `child` extend the accepted record `parent`? */
export function extendsRecord(child: RootRecord, parent: RootRecord): boolean {
  return (
    child.parentSlot !== null &&
    child.parentSlot === parent.slot &&
    child.parentRecordHash !== null &&
    bytesEqual(child.parentRecordHash, recordHash(encodeRecord(parent))) &&
    bytesEqual(child.genesisHash, parent.genesisHash)
  );
}

// ---------------------------------------------------------------------------------------------
// JSON form (§9.5).

export interface RecordWithAttestations {
  record: RootRecord;
  bytes: Uint8Array;
  recordHash: Hash;
  attestations: Attestation[];
}

function u64Json(x: bigint): number | bigint {
  return x <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(x) : x;
}

/**
 * The §9.5 object. u64 fields are numbers when exact, bigints otherwise (write it with
 * `stringifyJson`, which keeps them exact). `bankHash` is there only with `SLOT_BANK_HASH`.
 */
export function recordToJson(bytes: Uint8Array, attestations: Attestation[] = []): { [k: string]: JsonValue } {
  const r = decodeRecord(bytes);
  const b58 = (h: Hash | null) => (h === null ? null : base58Encode(h));
  const bankHash: { [k: string]: JsonValue } = r.bankHash ? { bankHash: base58Encode(r.bankHash) } : {};
  return {
    version: RECORD_VERSION,
    genesisHash: base58Encode(r.genesisHash),
    slot: u64Json(r.slot),
    parentSlot: r.parentSlot === null ? null : u64Json(r.parentSlot),
    commitment: r.commitment,
    stateRoot: base58Encode(r.stateRoot),
    parentRecordHash: b58(r.parentRecordHash),
    blockhash: b58(r.blockhash),
    blockHeight: r.blockHeight === null ? null : u64Json(r.blockHeight),
    parentBankHash: b58(r.parentBankHash),
    ...bankHash,
    recordHash: base58Encode(recordHash(bytes)),
    bytes: base64Encode(bytes),
    attestations: attestations.map((a) => ({ identity: base58Encode(a.identity), signature: base58Encode(a.signature) })),
  };
}

/**
 * Reads the §9.5 form as the spec advises: decodes `bytes` strictly, recomputes the record hash
 * (and rejects the document with `record_hash_mismatch` if `recordHash` disagrees), and takes the
 * record's fields from the bytes, not from the human-readable fields. Accepts JSON text (u64
 * values stay exact) or an already parsed value.
 */
export function recordFromJson(input: string | unknown): RecordWithAttestations {
  const doc = typeof input === "string" ? parseJson(input) : input;
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) throw new AldbError("bad_type", "record is not a JSON object");
  const o = doc as { [k: string]: unknown };
  if (o.version !== RECORD_VERSION) throw new AldbError("version", `record JSON version ${String(o.version)}`);
  if (typeof o.bytes !== "string") throw new AldbError("missing_field", "record JSON has no \"bytes\"");
  const bytes = base64Decode(o.bytes);
  const record = decodeRecord(bytes);
  const hash = recordHash(bytes);
  if (typeof o.recordHash !== "string") throw new AldbError("missing_field", "record JSON has no \"recordHash\"");
  if (!bytesEqual(base58DecodeExact(o.recordHash, 32, "recordHash"), hash)) {
    throw new AldbError("record_hash_mismatch", "recordHash is not the hash of bytes");
  }
  const list = o.attestations ?? [];
  if (!Array.isArray(list)) throw new AldbError("bad_type", "attestations is not an array");
  const attestations = list.map((a: unknown, i: number) => {
    const x = a as { identity?: unknown; signature?: unknown } | null;
    if (typeof x !== "object" || x === null || typeof x.identity !== "string" || typeof x.signature !== "string") {
      throw new AldbError("bad_type", `attestation ${i} needs identity and signature strings`);
    }
    return {
      identity: base58DecodeExact(x.identity, 32, `attestation ${i} identity`),
      signature: base58DecodeExact(x.signature, 64, `attestation ${i} signature`),
    };
  });
  return { record, bytes, recordHash: hash, attestations };
}
