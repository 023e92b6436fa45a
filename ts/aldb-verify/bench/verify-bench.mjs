// Proof verification throughput of @aldb/verify: every proof of tests/vectors/v1.json, decoded
// from the wire form once, then verified (key path, shape checks, hashing up, root comparison)
// round after round; also decode+verify, and strict Ed25519 attestation checks.
//
//   node bench/verify-bench.mjs [--seconds 3] [--impl PATH]
//
// --impl loads another build of the package (its dist/index.js) instead of ../dist, so two
// versions can be measured one after the other on the same machine with the same inputs.
import { readFileSync } from "node:fs";
import os from "node:os";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";

const args = process.argv.slice(2);
const opt = (name) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined);
const seconds = Number(opt("--seconds") || 0) || 3;
const impl = opt("--impl") ? pathToFileURL(resolve(opt("--impl"))).href : new URL("../dist/index.js", import.meta.url).href;
const aldb = await import(impl);
const root = new URL("../../../tests/vectors/", import.meta.url);
const v = aldb.parseJson(readFileSync(new URL("v1.json", root), "utf8"));
const r = aldb.parseJson(readFileSync(new URL("records-v1.json", root), "utf8"));

const items = [];
for (const c of v.cases) {
  for (const p of c.proofs) {
    items.push({ root: aldb.base58DecodeExact(c.root), pubkey: aldb.base58DecodeExact(p.pubkey), wire: aldb.hexDecode(p.wire) });
  }
}
for (const it of items) it.proof = aldb.decodeProofWire(it.wire);
const avgSiblings = items.reduce((s, it) => s + it.proof.siblings.length, 0) / items.length;

function run(name, unit, fn) {
  fn(); // warm up
  let n = 0;
  const t0 = process.hrtime.bigint();
  const end = t0 + BigInt(Math.round(seconds * 1e9));
  let now = t0;
  while (now < end) {
    n += fn();
    now = process.hrtime.bigint();
  }
  const rate = n / (Number(now - t0) / 1e9);
  console.log(`${name.padEnd(34)} ${rate.toFixed(0).padStart(9)} ${unit}/s`);
  return rate;
}

console.log(`node ${process.version}, ${os.cpus()[0]?.model ?? "?"} (${os.cpus().length} logical CPUs), one thread, load ${os.loadavg()[0].toFixed(1)}`);
console.log(`implementation ${impl}`);
console.log(`${items.length} proofs from tests/vectors/v1.json, ${avgSiblings.toFixed(1)} siblings on average; ${seconds}s per figure`);
const verify = run("verify (decoded proof)", "proofs", () => {
  for (const it of items) aldb.verifyProof(it.proof, it.root, it.pubkey);
  return items.length;
});
run("decode wire + verify", "proofs", () => {
  for (const it of items) aldb.verifyProof(aldb.decodeProofWire(it.wire), it.root, it.pubkey);
  return items.length;
});
// Synthesized proofs as deep as a large tree's: 2^30 accounts give about 31 siblings.
const DEPTH = 31;
const deep = [];
for (let i = 0; i < 64; i++) {
  const pubkey = aldb.sha512(new Uint8Array([i, 1])).slice(0, 32);
  const path = aldb.keyPath(pubkey);
  const value = aldb.sha512(new Uint8Array([i, 2])).slice(0, 32);
  const siblings = [];
  for (let d = 0; d < DEPTH; d++) siblings.push({ depth: d * 2, hash: aldb.sha512(new Uint8Array([i, 3, d])).slice(0, 32) });
  let acc = aldb.leafHash(path, value);
  for (let j = DEPTH - 1; j >= 0; j--) {
    const { depth, hash } = siblings[j];
    acc = aldb.bit(path, depth) === 0 ? aldb.branchHash(depth, acc, hash) : aldb.branchHash(depth, hash, acc);
  }
  const proof = { siblings, terminal: { kind: "leaf", path, value } };
  deep.push({ root: acc, pubkey, proof, wire: aldb.encodeProofWire(proof) });
}
const verifyDeep = run(`verify (synthesized, ${DEPTH} siblings)`, "proofs", () => {
  for (const it of deep) aldb.verifyProof(it.proof, it.root, it.pubkey);
  return deep.length;
});
const hashes = run("BLAKE2s of 64 bytes", "hashes", () => {
  const m = new Uint8Array(64);
  for (let i = 0; i < 1000; i++) aldb.blake2s(m);
  return 1000;
});

const atts = r.attestations.map((a) => ({
  hash: aldb.recordHash(aldb.hexDecode(r.records.find((x) => x.name === a.record).bytes)),
  att: { identity: aldb.base58DecodeExact(a.identity), signature: aldb.base58DecodeExact(a.signature, 64) },
}));
const sig = run("attestation (strict Ed25519)", "signatures", () => {
  for (const a of atts) if (!aldb.verifyAttestation(a.hash, a.att)) throw new Error("bad vector");
  return atts.length;
});
console.log(JSON.stringify({ proofs_per_s: Math.round(verify), deep_proofs_per_s: Math.round(verifyDeep), blake2s_64b_per_s: Math.round(hashes), attestations_per_s: Math.round(sig), load1: os.loadavg()[0], avg_siblings: avgSiblings, node: process.version }));
