/**
 * BLAKE2s (RFC 7693) with the full parameter block's salt and personalisation, as docs/SPEC.md
 * §2 uses them. Sequential mode only (fanout 1, depth 1).
 */

import { AldbError } from "./errors.js";

const IV = new Uint32Array([
  0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
]);

// SIGMA[r] as one flat table of 10 rounds x 16 message-word indices.
const SIGMA = new Uint8Array([
  0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
  14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3,
  11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4,
  7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8,
  9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13,
  2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9,
  12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11,
  13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10,
  6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5,
  10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0,
]);

const v = new Uint32Array(16);
const m = new Uint32Array(16);

/** The compression function F over one 64-byte block at `block[off..off+64]`. */
function compress(h: Uint32Array, block: Uint8Array, off: number, t: number, last: boolean): void {
  for (let i = 0; i < 16; i++) {
    const j = off + 4 * i;
    m[i] = block[j] | (block[j + 1] << 8) | (block[j + 2] << 16) | (block[j + 3] << 24);
  }
  for (let i = 0; i < 8; i++) {
    v[i] = h[i];
    v[i + 8] = IV[i];
  }
  v[12] ^= t; // low word of the byte counter (messages here are far below 2^32 bytes)
  v[13] ^= Math.floor(t / 0x100000000);
  if (last) v[14] = ~v[14];
  for (let r = 0; r < 10; r++) {
    const s = r * 16;
    g(0, 4, 8, 12, m[SIGMA[s]], m[SIGMA[s + 1]]);
    g(1, 5, 9, 13, m[SIGMA[s + 2]], m[SIGMA[s + 3]]);
    g(2, 6, 10, 14, m[SIGMA[s + 4]], m[SIGMA[s + 5]]);
    g(3, 7, 11, 15, m[SIGMA[s + 6]], m[SIGMA[s + 7]]);
    g(0, 5, 10, 15, m[SIGMA[s + 8]], m[SIGMA[s + 9]]);
    g(1, 6, 11, 12, m[SIGMA[s + 10]], m[SIGMA[s + 11]]);
    g(2, 7, 8, 13, m[SIGMA[s + 12]], m[SIGMA[s + 13]]);
    g(3, 4, 9, 14, m[SIGMA[s + 14]], m[SIGMA[s + 15]]);
  }
  for (let i = 0; i < 8; i++) h[i] ^= v[i] ^ v[i + 8];
}

function g(a: number, b: number, c: number, d: number, x: number, y: number): void {
  let va = v[a], vb = v[b], vc = v[c], vd = v[d];
  va = (va + vb + x) | 0;
  vd ^= va;
  vd = (vd >>> 16) | (vd << 16);
  vc = (vc + vd) | 0;
  vb ^= vc;
  vb = (vb >>> 12) | (vb << 20);
  va = (va + vb + y) | 0;
  vd ^= va;
  vd = (vd >>> 8) | (vd << 24);
  vc = (vc + vd) | 0;
  vb ^= vc;
  vb = (vb >>> 7) | (vb << 25);
  v[a] = va;
  v[b] = vb;
  v[c] = vc;
  v[d] = vd;
}

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

/** BLAKE2s of `data` with the given parameter block fields. */
export function blake2s(data: Uint8Array, params: Blake2sParams = {}): Uint8Array {
  const outLen = params.outLen ?? 32;
  const key = params.key ?? new Uint8Array(0);
  if (!(outLen >= 1 && outLen <= 32)) throw new AldbError("invalid_argument", "BLAKE2s digest length must be 1..32");
  if (key.length > 32) throw new AldbError("invalid_argument", "BLAKE2s key is at most 32 bytes");
  const h = new Uint32Array(IV);
  // Parameter block word 0: digest length, key length, fanout 1, depth 1.
  h[0] ^= 0x01010000 | (key.length << 8) | outLen;
  for (const [field, word] of [[params.salt, 4], [params.personal, 6]] as const) {
    if (field === undefined) continue;
    if (field.length !== 8) throw new AldbError("invalid_argument", "BLAKE2s salt and personal are 8 bytes");
    h[word] ^= field[0] | (field[1] << 8) | (field[2] << 16) | (field[3] << 24);
    h[word + 1] ^= field[4] | (field[5] << 8) | (field[6] << 16) | (field[7] << 24);
  }
  let input = data;
  if (key.length > 0) {
    input = new Uint8Array(64 + data.length);
    input.set(key, 0);
    input.set(data, 64);
  }
  const n = input.length;
  // Every full block but the last is compressed as non-final; the last (possibly partial, or
  // an all-zero block for empty input) is padded and compressed with the final flag.
  let off = 0;
  while (n - off > 64) {
    compress(h, input, off, off + 64, false);
    off += 64;
  }
  if (n - off === 64) {
    compress(h, input, off, n, true);
  } else {
    const last = new Uint8Array(64);
    last.set(input.subarray(off));
    compress(h, last, 0, n, true);
  }
  const out = new Uint8Array(outLen);
  for (let i = 0; i < outLen; i++) out[i] = h[i >> 2] >>> (8 * (i & 3));
  return out;
}
