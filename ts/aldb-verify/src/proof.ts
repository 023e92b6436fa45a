/** Proofs (§6): verification, and the JSON (§7.1) and wire (§7.2) forms. */

import { bit, branchHash, Hash, keyPath, leafHash } from "./commitment.js";
import { base58DecodeExact, base58Encode, bytesEqual } from "./encoding.js";
import { AldbError } from "./errors.js";
import { JsonValue, parseJson } from "./json.js";

export const PROOF_VERSION = 1;

export interface Sibling {
  depth: number;
  hash: Hash;
}

export type Terminal = { kind: "empty" } | { kind: "leaf"; path: Hash; value: Hash };

export interface Proof {
  /** Root first (§6). */
  siblings: Sibling[];
  terminal: Terminal;
}

export type Claim = { present: true; value: Hash } | { present: false };

/**
 * Verifies `proof` for the key with path `path` under `root` (§6.1) and returns the claim.
 * Throws an {@link AldbError} whose code is `depths_not_increasing`, `empty_with_siblings`,
 * `terminal_off_path` or `root_mismatch`; the shape rules are checked before any hashing.
 */
export function verifyProofPath(proof: Proof, root: Hash, path: Hash): Claim {
  if (root.length !== 32 || path.length !== 32) throw new AldbError("invalid_argument", "root and path must be 32 bytes");
  const sibs = proof.siblings;
  const n = sibs.length;
  for (let i = 1; i < n; i++) {
    if (sibs[i].depth <= sibs[i - 1].depth) {
      throw new AldbError("depths_not_increasing", `sibling ${i} has depth ${sibs[i].depth} after ${sibs[i - 1].depth}`);
    }
  }
  const t = proof.terminal;
  let acc: Hash;
  let claim: Claim;
  if (t.kind === "empty") {
    if (n > 0) throw new AldbError("empty_with_siblings", `empty terminal with ${n} siblings`);
    acc = new Uint8Array(32);
    claim = { present: false };
  } else {
    for (let i = 0; i < n; i++) {
      const d = sibs[i].depth;
      if (bit(t.path, d) !== bit(path, d)) {
        throw new AldbError("terminal_off_path", `terminal leaf leaves the key's route at depth ${d}`);
      }
    }
    claim = bytesEqual(t.path, path) ? { present: true, value: t.value } : { present: false };
    acc = leafHash(t.path, t.value);
    for (let i = n - 1; i >= 0; i--) {
      const { depth, hash } = sibs[i];
      acc = bit(path, depth) === 0 ? branchHash(depth, acc, hash) : branchHash(depth, hash, acc);
    }
  }
  if (!bytesEqual(acc, root)) throw new AldbError("root_mismatch", "the proof does not hash to the root");
  return claim;
}

/** {@link verifyProofPath} for a public key (its path is `H_path(pubkey)`). */
export function verifyProof(proof: Proof, root: Hash, pubkey: Uint8Array): Claim {
  return verifyProofPath(proof, root, keyPath(pubkey));
}

// ---------------------------------------------------------------------------------------------
// Wire form (§7.2).

/** The canonical binary encoding of a proof. */
export function encodeProofWire(proof: Proof): Uint8Array {
  const n = proof.siblings.length;
  if (n > 0xffff) throw new AldbError("invalid_argument", "too many siblings");
  const t = proof.terminal;
  const head = t.kind === "leaf" ? 66 : 2;
  const out = new Uint8Array(head + 2 + 33 * n);
  out[0] = PROOF_VERSION;
  if (t.kind === "leaf") {
    out[1] = 1;
    out.set(t.path, 2);
    out.set(t.value, 34);
  }
  out[head] = n & 0xff;
  out[head + 1] = n >> 8;
  for (let i = 0; i < n; i++) {
    const s = proof.siblings[i];
    out[head + 2 + 33 * i] = s.depth;
    out.set(s.hash, head + 3 + 33 * i);
  }
  return out;
}

/**
 * Decodes the wire form strictly (§7.2): rejects empty input, another version, an unknown
 * terminal kind, input that ends early, a sibling count over 256 and any trailing bytes. Depth
 * order and an empty terminal with siblings are left to verification, which rejects them.
 */
export function decodeProofWire(bytes: Uint8Array): Proof {
  if (bytes.length === 0) throw new AldbError("truncated", "empty input");
  if (bytes[0] !== PROOF_VERSION) throw new AldbError("version", `proof version ${bytes[0]}, expected ${PROOF_VERSION}`);
  if (bytes.length < 2) throw new AldbError("truncated", "no terminal kind");
  let terminal: Terminal;
  let off: number;
  if (bytes[1] === 0) {
    terminal = { kind: "empty" };
    off = 2;
  } else if (bytes[1] === 1) {
    if (bytes.length < 66) throw new AldbError("truncated", "input ends inside the terminal leaf");
    terminal = { kind: "leaf", path: bytes.slice(2, 34), value: bytes.slice(34, 66) };
    off = 66;
  } else {
    throw new AldbError("terminal_kind", `terminal kind ${bytes[1]}`);
  }
  if (bytes.length < off + 2) throw new AldbError("truncated", "input ends before the sibling count");
  const n = bytes[off] | (bytes[off + 1] << 8);
  if (n > 256) throw new AldbError("too_many_siblings", `${n} siblings (at most 256)`);
  off += 2;
  const end = off + 33 * n;
  if (bytes.length < end) throw new AldbError("truncated", `input ends inside the siblings (${n} declared)`);
  if (bytes.length > end) throw new AldbError("trailing_bytes", `${bytes.length - end} bytes after the last sibling`);
  const siblings: Sibling[] = [];
  for (let i = 0; i < n; i++, off += 33) siblings.push({ depth: bytes[off], hash: bytes.slice(off + 1, off + 33) });
  return { siblings, terminal };
}

// ---------------------------------------------------------------------------------------------
// JSON form (§7.1).

export interface ProofJson {
  version: number;
  siblings: { depth: number; hash: string }[];
  terminal: { kind: "empty" } | { kind: "leaf"; path: string; value: string };
}

export function proofToJson(proof: Proof): ProofJson {
  const t = proof.terminal;
  return {
    version: PROOF_VERSION,
    siblings: proof.siblings.map((s) => ({ depth: s.depth, hash: base58Encode(s.hash) })),
    terminal: t.kind === "empty" ? { kind: "empty" } : { kind: "leaf", path: base58Encode(t.path), value: base58Encode(t.value) },
  };
}

function isObject(x: unknown): x is { [k: string]: unknown } {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

function onlyFields(o: { [k: string]: unknown }, allowed: string[], what: string): void {
  for (const k of Object.keys(o)) {
    if (!allowed.includes(k)) throw new AldbError("unknown_field", `${what} has unknown field ${JSON.stringify(k)}`);
  }
  for (const k of allowed) {
    if (!(k in o)) throw new AldbError("missing_field", `${what} has no ${JSON.stringify(k)}`);
  }
}

/**
 * Decodes the JSON form strictly (§7.1): the version is checked first, then every field; unknown
 * fields are rejected, as the reference parser does. Accepts a parsed value or JSON text.
 */
export function proofFromJson(input: JsonValue | string | unknown): Proof {
  const doc = typeof input === "string" ? parseJson(input) : input;
  if (!isObject(doc)) throw new AldbError("bad_type", "proof is not a JSON object");
  if (!("version" in doc)) throw new AldbError("missing_field", "proof has no \"version\"");
  if (doc.version !== PROOF_VERSION) throw new AldbError("version", `proof version ${String(doc.version)}, expected ${PROOF_VERSION}`);
  onlyFields(doc, ["version", "siblings", "terminal"], "proof");
  if (!Array.isArray(doc.siblings)) throw new AldbError("bad_type", "siblings is not an array");
  const siblings: Sibling[] = doc.siblings.map((s: unknown, i: number) => {
    if (!isObject(s)) throw new AldbError("bad_type", `sibling ${i} is not an object`);
    onlyFields(s, ["depth", "hash"], `sibling ${i}`);
    const d = s.depth;
    if (typeof d !== "number" && typeof d !== "bigint") throw new AldbError("bad_type", `sibling ${i} depth is not a number`);
    if (typeof d === "bigint" || !Number.isInteger(d) || d < 0 || d > 255) {
      throw new AldbError("depth_range", `sibling ${i} depth ${String(d)} is not an integer in 0..=255`);
    }
    if (typeof s.hash !== "string") throw new AldbError("bad_type", `sibling ${i} hash is not a string`);
    return { depth: d, hash: base58DecodeExact(s.hash, 32, `sibling ${i} hash`) };
  });
  const t = doc.terminal;
  if (!isObject(t)) throw new AldbError("bad_type", "terminal is not an object");
  let terminal: Terminal;
  if (t.kind === "empty") {
    onlyFields(t, ["kind"], "empty terminal");
    terminal = { kind: "empty" };
  } else if (t.kind === "leaf") {
    onlyFields(t, ["kind", "path", "value"], "leaf terminal");
    if (typeof t.path !== "string" || typeof t.value !== "string") throw new AldbError("bad_type", "terminal path and value must be strings");
    terminal = { kind: "leaf", path: base58DecodeExact(t.path, 32, "terminal path"), value: base58DecodeExact(t.value, 32, "terminal value") };
  } else if (!("kind" in t)) {
    throw new AldbError("missing_field", "terminal has no \"kind\"");
  } else {
    throw new AldbError("terminal_kind", `terminal kind ${JSON.stringify(t.kind)}`);
  }
  return { siblings, terminal };
}
