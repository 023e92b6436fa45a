/** Base58 (Bitcoin alphabet), base64 (RFC 4648, padded), hex and small byte helpers. */

import { AldbError } from "./errors.js";

const B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
const B58_INDEX = new Int8Array(128).fill(-1);
for (let i = 0; i < B58.length; i++) B58_INDEX[B58.charCodeAt(i)] = i;

/** Base58 text of `bytes`: one leading `1` per leading zero byte, then the rest as a number. */
export function base58Encode(bytes: Uint8Array): string {
  let zeros = 0;
  while (zeros < bytes.length && bytes[zeros] === 0) zeros++;
  // Base-58 digits, least significant first, by repeated multiply-add over the input bytes.
  const digits: number[] = [];
  for (let i = zeros; i < bytes.length; i++) {
    let carry = bytes[i];
    for (let j = 0; j < digits.length; j++) {
      carry += digits[j] << 8;
      digits[j] = carry % 58;
      carry = (carry / 58) | 0;
    }
    while (carry > 0) {
      digits.push(carry % 58);
      carry = (carry / 58) | 0;
    }
  }
  let out = "1".repeat(zeros);
  for (let i = digits.length - 1; i >= 0; i--) out += B58[digits[i]];
  return out;
}

/** Decodes base58 text; throws `base58` on a character outside the alphabet. */
export function base58Decode(text: string): Uint8Array {
  if (typeof text !== "string") throw new AldbError("bad_type", "base58 value is not a string");
  let zeros = 0;
  while (zeros < text.length && text[zeros] === "1") zeros++;
  const bytes: number[] = []; // least significant first
  for (let i = zeros; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const v = c < 128 ? B58_INDEX[c] : -1;
    if (v < 0) throw new AldbError("base58", `invalid base58 character ${JSON.stringify(text[i])}`);
    let carry = v;
    for (let j = 0; j < bytes.length; j++) {
      carry += bytes[j] * 58;
      bytes[j] = carry & 0xff;
      carry >>= 8;
    }
    while (carry > 0) {
      bytes.push(carry & 0xff);
      carry >>= 8;
    }
  }
  const out = new Uint8Array(zeros + bytes.length);
  for (let i = 0; i < bytes.length; i++) out[out.length - 1 - i] = bytes[i];
  return out;
}

/** Decodes base58 text that must be exactly `len` bytes (32 for hashes and keys, 64 for signatures). */
export function base58DecodeExact(text: string, len = 32, what = "value"): Uint8Array {
  const b = base58Decode(text);
  if (b.length !== len) {
    throw new AldbError("hash_length", `${what} decodes to ${b.length} bytes, not ${len}`);
  }
  return b;
}

const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const B64_INDEX = new Int8Array(128).fill(-1);
for (let i = 0; i < B64.length; i++) B64_INDEX[B64.charCodeAt(i)] = i;

export function base64Encode(bytes: Uint8Array): string {
  let out = "";
  let i = 0;
  for (; i + 3 <= bytes.length; i += 3) {
    const n = (bytes[i] << 16) | (bytes[i + 1] << 8) | bytes[i + 2];
    out += B64[n >> 18] + B64[(n >> 12) & 63] + B64[(n >> 6) & 63] + B64[n & 63];
  }
  const rest = bytes.length - i;
  if (rest === 1) {
    const n = bytes[i] << 16;
    out += B64[n >> 18] + B64[(n >> 12) & 63] + "==";
  } else if (rest === 2) {
    const n = (bytes[i] << 16) | (bytes[i + 1] << 8);
    out += B64[n >> 18] + B64[(n >> 12) & 63] + B64[(n >> 6) & 63] + "=";
  }
  return out;
}

/** Strict standard base64: length a multiple of 4, `=` only as final padding, zero pad bits. */
export function base64Decode(text: string): Uint8Array {
  if (typeof text !== "string") throw new AldbError("bad_type", "base64 value is not a string");
  if (text.length % 4 !== 0) throw new AldbError("bad_type", "base64 length is not a multiple of 4");
  let pad = 0;
  if (text.endsWith("==")) pad = 2;
  else if (text.endsWith("=")) pad = 1;
  const out = new Uint8Array((text.length / 4) * 3 - pad);
  let o = 0;
  for (let i = 0; i < text.length; i += 4) {
    let n = 0;
    for (let j = 0; j < 4; j++) {
      const c = text.charCodeAt(i + j);
      let v: number;
      if (c === 61 /* = */ && i + 4 === text.length && j >= 4 - pad) v = 0;
      else {
        v = c < 128 ? B64_INDEX[c] : -1;
        if (v < 0) throw new AldbError("bad_type", `invalid base64 character at ${i + j}`);
      }
      n = (n << 6) | v;
    }
    const b = [(n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff];
    const take = i + 4 === text.length ? 3 - pad : 3;
    for (let j = 0; j < take; j++) out[o++] = b[j];
    if (take < 3 && b.slice(take).some((x) => x !== 0)) {
      throw new AldbError("bad_type", "base64 padding bits are not zero");
    }
  }
  return out;
}

export function hexEncode(bytes: Uint8Array): string {
  let s = "";
  for (let i = 0; i < bytes.length; i++) s += (bytes[i] < 16 ? "0" : "") + bytes[i].toString(16);
  return s;
}

export function hexDecode(text: string): Uint8Array {
  if (text.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(text)) {
    throw new AldbError("bad_type", "not an even-length hex string");
  }
  const out = new Uint8Array(text.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(text.substr(i * 2, 2), 16);
  return out;
}

/** ASCII text to bytes (no TextEncoder needed). */
export function ascii(text: string): Uint8Array {
  const out = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c > 127) throw new AldbError("invalid_argument", "not ASCII");
    out[i] = c;
  }
  return out;
}

export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i] ^ b[i];
  return diff === 0;
}

export function concatBytes(...parts: Uint8Array[]): Uint8Array {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}
