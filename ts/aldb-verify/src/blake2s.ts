/**
 * BLAKE2s (RFC 7693) with the parameter block's salt and personalisation, as docs/SPEC.md §2 uses
 * them, on `@noble/hashes`. Sequential mode only (fanout 1, depth 1), which is what noble builds.
 */

import { blake2s as nobleBlake2s } from "@noble/hashes/blake2.js";
import { AldbError } from "./errors.js";

export interface Blake2sParams {
  /** Digest length in bytes, 1 to 32 (default 32). */
  outLen?: number;
  /** Key, 0 to 32 bytes (default none). */
  key?: Uint8Array;
  /** Salt, 8 bytes (default zero). */
  salt?: Uint8Array;
  /** Personalisation, 8 bytes (default zero). */
  personal?: Uint8Array;
}

function checkParams(params: Blake2sParams): number {
  const outLen = params.outLen ?? 32;
  // Checked here so a bad argument is an AldbError like every other failure of this package.
  if (!(Number.isInteger(outLen) && outLen >= 1 && outLen <= 32)) {
    throw new AldbError("invalid_argument", "BLAKE2s digest length must be 1..32");
  }
  if (params.key !== undefined && params.key.length > 32) {
    throw new AldbError("invalid_argument", "BLAKE2s key is at most 32 bytes");
  }
  for (const f of [params.salt, params.personal]) {
    if (f !== undefined && f.length !== 8) throw new AldbError("invalid_argument", "BLAKE2s salt and personal are 8 bytes");
  }
  return outLen;
}

function nobleOpts(params: Blake2sParams, outLen: number) {
  return {
    dkLen: outLen,
    key: params.key !== undefined && params.key.length > 0 ? params.key : undefined,
    salt: params.salt,
    personalization: params.personal,
  };
}

/** BLAKE2s of `data` with the given parameter block fields. */
export function blake2s(data: Uint8Array, params: Blake2sParams = {}): Uint8Array {
  const outLen = checkParams(params);
  return nobleBlake2s(data, nobleOpts(params, outLen));
}

/**
 * A BLAKE2s function with fixed parameters. The commitment hashes messages of 32 to 64 bytes,
 * where setting up noble's hash object (parsing the options, allocating its buffers) costs more
 * than the compression itself, so the hasher sets it up once and, per call, copies that initial
 * state into one reused object (noble's own `clone` path) before hashing.
 */
export function blake2sHasher(params: Blake2sParams = {}): (data: Uint8Array) => Uint8Array {
  const outLen = checkParams(params);
  const initial = nobleBlake2s.create(nobleOpts(params, outLen));
  const scratch = initial.clone();
  return (data: Uint8Array) => {
    initial._cloneInto(scratch);
    scratch.update(data);
    const out = new Uint8Array(outLen);
    scratch.digestInto(out);
    return out;
  };
}
