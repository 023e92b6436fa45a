/** The v1 state commitment: the four hashes (§2, §3), bit order (§4) and the empty root (§5). */

import { blake2sHasher } from "./blake2s.js";
import { ascii, concatBytes } from "./encoding.js";
import { AldbError } from "./errors.js";

export type Hash = Uint8Array;

/** The root of the empty tree: 32 zero bytes. */
export const EMPTY_ROOT: Hash = new Uint8Array(32);

const H_PATH = blake2sHasher({ personal: ascii("aldbpath") });
const H_ACCT = blake2sHasher({ personal: ascii("aldbacct") });
const H_LEAF = blake2sHasher({ personal: ascii("aldbleaf") });
const U64_MAX = (1n << 64n) - 1n;

function need32(x: Uint8Array, what: string): void {
  if (!(x instanceof Uint8Array) || x.length !== 32) {
    throw new AldbError("invalid_argument", `${what} must be 32 bytes`);
  }
}

/** `H_path(pubkey)` (§3.1). */
export function keyPath(pubkey: Uint8Array): Hash {
  need32(pubkey, "pubkey");
  return H_PATH(pubkey);
}

/** An account as the commitment sees it (§3.2). */
export interface AccountFields {
  /** u64; a bigint, or a number that is a safe integer. */
  lamports: bigint | number;
  owner: Uint8Array;
  executable: boolean;
  data: Uint8Array;
}

export function toU64(x: bigint | number, what: string): bigint {
  if (typeof x === "number") {
    if (!Number.isSafeInteger(x)) throw new AldbError("invalid_argument", `${what} is not an exact integer`);
    x = BigInt(x);
  }
  if (typeof x !== "bigint" || x < 0n || x > U64_MAX) throw new AldbError("invalid_argument", `${what} is not a u64`);
  return x;
}

export function u64le(x: bigint): Uint8Array {
  const out = new Uint8Array(8);
  for (let i = 0; i < 8; i++) out[i] = Number((x >> BigInt(8 * i)) & 0xffn);
  return out;
}

export function readU64le(b: Uint8Array, off: number): bigint {
  let x = 0n;
  for (let i = 7; i >= 0; i--) x = (x << 8n) | BigInt(b[off + i]);
  return x;
}

/** `H_acct(lamports || owner || executable || data_len || data)` (§3.2). */
export function accountValue(account: AccountFields): Hash {
  const lamports = toU64(account.lamports, "lamports");
  need32(account.owner, "owner");
  const data = account.data;
  const msg = new Uint8Array(49 + data.length);
  msg.set(u64le(lamports), 0);
  msg.set(account.owner, 8);
  msg[40] = account.executable ? 1 : 0;
  msg.set(u64le(BigInt(data.length)), 41);
  msg.set(data, 49);
  return H_ACCT(msg);
}

/** `H_leaf(path || value)` (§3.3). */
export function leafHash(path: Hash, value: Hash): Hash {
  need32(path, "path");
  need32(value, "value");
  return H_LEAF(concatBytes(path, value));
}

// One hasher per depth: the depth is the first salt byte.
const H_NODE: ((data: Uint8Array) => Uint8Array)[] = [];
for (let d = 0; d < 256; d++) {
  const salt = new Uint8Array(8);
  salt[0] = d;
  H_NODE.push(blake2sHasher({ personal: ascii("aldbnode"), salt }));
}

/** `H_node(d, left || right)` (§3.4), `0 <= depth <= 255`. */
export function branchHash(depth: number, left: Hash, right: Hash): Hash {
  if (!Number.isInteger(depth) || depth < 0 || depth > 255) throw new AldbError("invalid_argument", "depth must be 0..255");
  need32(left, "left");
  need32(right, "right");
  return H_NODE[depth](concatBytes(left, right));
}

/** Bit `d` of a path: bit 0 is the most significant bit of byte 0 (§4). */
export function bit(path: Hash, d: number): number {
  return (path[d >> 3] >> (7 - (d & 7))) & 1;
}

