/**
 * An account answer checked end to end: the proof against a root the caller trusts, then the
 * account's fields against the value hash the proof binds (§6.1), and a root taken from a
 * quorum-attested record (§9.4). Pubkeys are base58 strings, so `@solana/kit`'s `Address` (a
 * branded string) is accepted as it is, or 32 bytes.
 */

import { accountValue, Hash } from "./commitment.js";
import { base58DecodeExact, base58Encode, base64Decode, bytesEqual } from "./encoding.js";
import { AldbError } from "./errors.js";
import { Claim, proofFromJson, verifyProof } from "./proof.js";
import { checkQuorum, QuorumRule, recordFromJson, RootRecord } from "./record.js";

/**
 * An account as Hyades' `getAccountProof` and Solana's `getAccountInfo` (with `encoding:
 * "base64"`, as `@solana/kit` returns it) both present it. `data` may also be raw bytes.
 */
export interface AccountJson {
  lamports: bigint | number | string;
  owner: string;
  executable: boolean;
  data: readonly [string, string] | Uint8Array;
}

/** An account's fields decoded: what the proof's value hash was checked against. */
export interface VerifiedAccount {
  lamports: bigint;
  owner: string;
  executable: boolean;
  data: Uint8Array;
}

export interface VerifiedAnswer {
  claim: Claim;
  /** The account when the proof shows it present, null when it shows it absent. */
  account: VerifiedAccount | null;
}

function pubkeyBytes(pubkey: string | Uint8Array, what: string): Uint8Array {
  if (typeof pubkey === "string") return base58DecodeExact(pubkey, 32, what);
  if (pubkey.length !== 32) throw new AldbError("invalid_argument", `${what} must be 32 bytes`);
  return pubkey;
}

function lamportsOf(x: bigint | number | string): bigint {
  if (typeof x === "bigint") return x;
  if (typeof x === "number") {
    if (!Number.isSafeInteger(x)) throw new AldbError("bad_type", "lamports is not an exact integer (parse with parseJson)");
    return BigInt(x);
  }
  if (!/^[0-9]{1,20}$/.test(x)) throw new AldbError("bad_type", "lamports is not a decimal integer");
  return BigInt(x);
}

/** Decodes the account's fields; `data` as `[base64, "base64"]` or bytes. */
export function decodeAccount(a: AccountJson): VerifiedAccount {
  if (typeof a !== "object" || a === null) throw new AldbError("bad_type", "account is not an object");
  let data: Uint8Array;
  if (a.data instanceof Uint8Array) data = a.data;
  else if (Array.isArray(a.data) && a.data.length === 2 && a.data[1] === "base64" && typeof a.data[0] === "string") data = base64Decode(a.data[0]);
  else throw new AldbError("bad_type", 'account data is not ["<base64>", "base64"]');
  if (typeof a.executable !== "boolean") throw new AldbError("bad_type", "executable is not a boolean");
  if (typeof a.owner !== "string") throw new AldbError("bad_type", "owner is not a base58 string");
  base58DecodeExact(a.owner, 32, "owner");
  return { lamports: lamportsOf(a.lamports), owner: a.owner, executable: a.executable, data };
}

/**
 * Verifies `proof` (its JSON form, §7.1) for `pubkey` against `trustedRoot`, then checks that
 * `account` (null for none) is what the proof shows: absent when it proves absence, and fields
 * that hash to the proven value when it proves presence. Throws an {@link AldbError}:
 * the proof's own codes (`root_mismatch`, ...), or `account_mismatch`.
 */
export function verifyAccountProof(
  pubkey: string | Uint8Array,
  trustedRoot: string | Hash,
  proof: unknown,
  account: AccountJson | null,
): VerifiedAnswer {
  const key = pubkeyBytes(pubkey, "pubkey");
  const root = pubkeyBytes(trustedRoot, "root");
  const claim = verifyProof(proofFromJson(proof), root, key);
  if (!claim.present) {
    if (account !== null) throw new AldbError("account_mismatch", "the proof shows the account absent but an account was sent");
    return { claim, account: null };
  }
  if (account === null) throw new AldbError("account_mismatch", "the proof shows the account present but none was sent");
  const fields = decodeAccount(account);
  const value = accountValue({ ...fields, owner: base58DecodeExact(fields.owner, 32, "owner") });
  if (!bytesEqual(value, claim.value)) throw new AldbError("account_mismatch", "the account's fields do not hash to the proven value");
  return { claim, account: fields };
}

/** A root the caller may trust: its record passed the quorum rule. */
export interface AttestedRoot {
  slot: bigint;
  root: string;
  record: RootRecord;
  recordHash: string;
  /** The rule's identities whose attestations verified, base58. */
  signers: string[];
}

/**
 * Reads a §9.5 record document (as `getRootRecord` returns it), checks its attestations against
 * `rule` (§9.4) and returns the state root it attests. Throws `quorum` when fewer than the
 * threshold of the rule's identities signed it, and `genesis_hash` when `rule.genesisHash` is
 * given and the record names another cluster.
 */
export function attestedRoot(
  recordDocument: unknown,
  rule: { identities: (string | Uint8Array)[]; threshold: number; genesisHash?: string | Uint8Array },
): AttestedRoot {
  const { record, recordHash, attestations } = recordFromJson(recordDocument);
  if (rule.genesisHash !== undefined && !bytesEqual(record.genesisHash, pubkeyBytes(rule.genesisHash, "genesis hash"))) {
    throw new AldbError("genesis_hash", `the record names genesis ${base58Encode(record.genesisHash)}, not the cluster asked for`);
  }
  const quorum: QuorumRule = { identities: rule.identities.map((i) => pubkeyBytes(i, "identity")), threshold: rule.threshold };
  const { attested, validIdentities } = checkQuorum(quorum, recordHash, attestations);
  if (!attested) {
    throw new AldbError(
      "quorum",
      `the record for slot ${record.slot} has ${validIdentities.length} valid attestations from the rule's identities, ${rule.threshold} needed`,
    );
  }
  return {
    slot: record.slot,
    root: base58Encode(record.stateRoot),
    record,
    recordHash: base58Encode(recordHash),
    signers: validIdentities.map(base58Encode),
  };
}
