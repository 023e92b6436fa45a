/**
 * Ed25519 signature verification (RFC 8032 §5.1.7) with the strict rules of docs/SPEC.md §9.3,
 * in BigInt arithmetic. Verification only: a light client never signs. Not constant-time, which
 * is fine for public inputs.
 */

import { sha512 } from "./sha512.js";
import type { AttestationErrorCode } from "./errors.js";

const P = (1n << 255n) - 19n;
/** The group order L. */
export const L = (1n << 252n) + 27742317777372353535851937790883648493n;
const D = mod(-121665n * inv(121666n));
const D2 = mod(2n * D);
const SQRT_M1 = pow(2n, (P - 1n) / 4n);

function mod(a: bigint): bigint {
  const r = a % P;
  return r < 0n ? r + P : r;
}

function pow(b: bigint, e: bigint): bigint {
  let r = 1n;
  b = mod(b);
  while (e > 0n) {
    if (e & 1n) r = (r * b) % P;
    b = (b * b) % P;
    e >>= 1n;
  }
  return r;
}

function inv(a: bigint): bigint {
  return pow(a, P - 2n);
}

/** A point in extended coordinates (X, Y, Z, T), x = X/Z, y = Y/Z, xy = T/Z. */
type Point = readonly [bigint, bigint, bigint, bigint];

const IDENTITY: Point = [0n, 1n, 1n, 0n];

function add(p: Point, q: Point): Point {
  const a = ((p[1] - p[0]) * (q[1] - q[0])) % P;
  const b = ((p[1] + p[0]) * (q[1] + q[0])) % P;
  const c = (p[3] * D2 % P) * q[3] % P;
  const d = (2n * p[2] * q[2]) % P;
  const e = b - a, f = d - c, g = d + c, h = b + a;
  return [mod(e * f), mod(g * h), mod(f * g), mod(e * h)];
}

function double(p: Point): Point {
  // dbl-2008-hwcd for a = -1.
  const a = (p[0] * p[0]) % P;
  const b = (p[1] * p[1]) % P;
  const c = (2n * p[2] * p[2]) % P;
  const h = a + b;
  const xy = p[0] + p[1];
  const e = h - ((xy * xy) % P);
  const g = a - b;
  const f = c + g;
  return [mod(e * f), mod(g * h), mod(f * g), mod(e * h)];
}

function negate(p: Point): Point {
  return [mod(-p[0]), p[1], p[2], mod(-p[3])];
}

function isIdentity(p: Point): boolean {
  return mod(p[0]) === 0n && mod(p[1] - p[2]) === 0n;
}

/** RFC 8032 §5.1.3, strict: y < p, x recovered, x = 0 with the sign bit set rejected. */
function decode(bytes: Uint8Array): Point | null {
  if (bytes.length !== 32) return null;
  let y = 0n;
  for (let i = 31; i >= 0; i--) y = (y << 8n) | BigInt(bytes[i]);
  const sign = y >> 255n;
  y &= (1n << 255n) - 1n;
  if (y >= P) return null;
  const y2 = (y * y) % P;
  const x2 = mod((y2 - 1n) * inv(D * y2 + 1n));
  if (x2 === 0n) {
    if (sign === 1n) return null;
    return [0n, y, 1n, 0n];
  }
  let x = pow(x2, (P + 3n) / 8n);
  if (mod(x * x - x2) !== 0n) x = (x * SQRT_M1) % P;
  if (mod(x * x - x2) !== 0n) return null;
  if ((x & 1n) !== sign) x = P - x;
  return [x, y, 1n, (x * y) % P];
}

/** RFC 8032 §5.1.2. */
function encode(p: Point): Uint8Array {
  const zi = inv(p[2]);
  const x = mod(p[0] * zi);
  let y = mod(p[1] * zi);
  if (x & 1n) y |= 1n << 255n;
  const out = new Uint8Array(32);
  for (let i = 0; i < 32; i++) {
    out[i] = Number(y & 0xffn);
    y >>= 8n;
  }
  return out;
}

const GY = mod(4n * inv(5n));
const G = decode(Uint8Array.from({ length: 32 }, (_, i) => Number((GY >> BigInt(8 * i)) & 0xffn))) as Point;

/** [8]P is the identity. */
function smallOrder(p: Point): boolean {
  return isIdentity(double(double(double(p))));
}

/** [a]P + [b]Q by one shared double-and-add (Straus-Shamir); a, b >= 0. */
function mulAdd(a: bigint, p: Point, b: bigint, q: Point): Point {
  const pq = add(p, q);
  let r = IDENTITY;
  const bits = Math.max(a.toString(2).length, b.toString(2).length);
  for (let i = bits - 1; i >= 0; i--) {
    r = double(r);
    const x = (a >> BigInt(i)) & 1n;
    const y = (b >> BigInt(i)) & 1n;
    if (x && y) r = add(r, pq);
    else if (x) r = add(r, p);
    else if (y) r = add(r, q);
  }
  return r;
}

function leInt(b: Uint8Array): bigint {
  let x = 0n;
  for (let i = b.length - 1; i >= 0; i--) x = (x << 8n) | BigInt(b[i]);
  return x;
}

/**
 * Checks `signature` by `publicKey` over `message` with the rules of §9.3, in their order (S
 * range, A then R decoding, A then R small order, the cofactorless equation by encoding), and
 * returns the first rule broken, or null when the signature is valid.
 */
export function checkEd25519Strict(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): AttestationErrorCode | null {
  if (publicKey.length !== 32 || signature.length !== 64) throw new RangeError("public key is 32 bytes, signature 64");
  const rBytes = signature.subarray(0, 32);
  const s = leInt(signature.subarray(32, 64));
  if (s >= L) return "s_not_reduced";
  const a = decode(publicKey);
  if (a === null) return "identity_not_a_point";
  const r = decode(rBytes);
  if (r === null) return "r_not_a_point";
  if (smallOrder(a)) return "identity_small_order";
  if (smallOrder(r)) return "r_small_order";
  const hashInput = new Uint8Array(64 + message.length);
  hashInput.set(rBytes, 0);
  hashInput.set(publicKey, 32);
  hashInput.set(message, 64);
  const k = leInt(sha512(hashInput)) % L;
  const check = encode(mulAdd(s, G, k, negate(a)));
  for (let i = 0; i < 32; i++) if (check[i] !== rBytes[i]) return "equation";
  return null;
}

/** True when `signature` is valid under §9.3. */
export function verifyEd25519Strict(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean {
  return checkEd25519Strict(publicKey, message, signature) === null;
}
