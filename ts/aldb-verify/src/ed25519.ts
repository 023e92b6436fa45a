/**
 * Ed25519 signature verification (RFC 8032 §5.1.7) with the strict rules of docs/SPEC.md §9.3,
 * on `@noble/curves`' Edwards points and `@noble/hashes`' SHA-512. Verification only: a light
 * client never signs.
 *
 * noble's own `ed25519.verify` is not used because it differs from §9.3 in two places: it checks
 * the cofactored equation (`[8]([S]B - R - [k]A) = 0`), where §9.3 wants the cofactorless one
 * (`[S]B - [k]A` encodes to exactly R), and it does not refuse a small-order R. What it does the
 * same way is kept: `Point.fromBytes(bytes, false)` decodes as RFC 8032 §5.1.3 says (y < p, and
 * x = 0 with the sign bit set refused), which is also what the Rust verifier's canonical-encoding
 * check accepts.
 */

import { ed25519 } from "@noble/curves/ed25519.js";
import type { EdwardsPoint } from "@noble/curves/abstract/edwards.js";
import { sha512 } from "./sha512.js";
import type { AttestationErrorCode } from "./errors.js";

const Point = ed25519.Point;

/** The group order L. */
export const L: bigint = Point.Fn.ORDER;

function leInt(b: Uint8Array): bigint {
  let x = 0n;
  for (let i = b.length - 1; i >= 0; i--) x = (x << 8n) | BigInt(b[i]);
  return x;
}

/** RFC 8032 §5.1.3, strict (zip215 off); null for bytes that are not a point's encoding. */
function decode(bytes: Uint8Array): EdwardsPoint | null {
  try {
    return Point.fromBytes(bytes, false);
  } catch {
    return null;
  }
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
  if (a.isSmallOrder()) return "identity_small_order";
  if (r.isSmallOrder()) return "r_small_order";
  const hashInput = new Uint8Array(64 + message.length);
  hashInput.set(rBytes, 0);
  hashInput.set(publicKey, 32);
  hashInput.set(message, 64);
  const k = leInt(sha512(hashInput)) % L;
  // Both scalars are public and below L, which multiplyUnsafe requires (0 included).
  const check = Point.BASE.multiplyUnsafe(s).subtract(a.multiplyUnsafe(k)).toBytes();
  for (let i = 0; i < 32; i++) if (check[i] !== rBytes[i]) return "equation";
  return null;
}

/** True when `signature` is valid under §9.3. */
export function verifyEd25519Strict(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean {
  return checkEd25519Strict(publicKey, message, signature) === null;
}
