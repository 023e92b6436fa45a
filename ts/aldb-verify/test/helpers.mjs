// Shared by the tests: the package under test (compiled), the vector files, a naive tree.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import * as aldb from "../dist/index.js";

export { aldb };
export const repoRoot = fileURLToPath(new URL("../../../", import.meta.url));

/** A vector file, parsed so that u64 values above 2^53 stay exact (bigint). */
export function loadVectors(name) {
  return aldb.parseJson(readFileSync(`${repoRoot}tests/vectors/${name}`, "utf8"));
}

export const b58 = (s, len = 32) => aldb.base58DecodeExact(s, len);
export const hex = (b) => aldb.hexEncode(b);

/** The root of §5 by plain recursion over the sorted (path, value) set. */
export function naiveRoot(items) {
  if (items.length === 0) return new Uint8Array(32);
  if (items.length === 1) return aldb.leafHash(items[0].path, items[0].value);
  let d = 0;
  const lo = items[0].path;
  const hi = items[items.length - 1].path;
  while (aldb.bit(lo, d) === aldb.bit(hi, d)) d++;
  const left = items.filter((it) => aldb.bit(it.path, d) === 0);
  const right = items.filter((it) => aldb.bit(it.path, d) === 1);
  return aldb.branchHash(d, naiveRoot(left), naiveRoot(right));
}

export function sortedItems(state) {
  return [...state.values()].sort((a, b) => Buffer.compare(Buffer.from(a.path), Buffer.from(b.path)));
}
