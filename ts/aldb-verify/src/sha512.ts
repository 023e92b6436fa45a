/** SHA-512 (FIPS 180-4) from `@noble/hashes`, synchronous, so Ed25519 verification stays synchronous. */

import { sha512 as nobleSha512 } from "@noble/hashes/sha2.js";

/** SHA-512 of `data`. */
export function sha512(data: Uint8Array): Uint8Array {
  return nobleSha512(data);
}
