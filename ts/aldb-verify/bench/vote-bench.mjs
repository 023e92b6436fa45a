// Vote-chain verification throughput of @aldb/verify (docs/SPEC.md §10), one thread: a slot's
// root accepted from the votes of N validators, each a legacy TowerSync transaction paid by its
// node identity and signed by its authorized voter, as agave 4.2.0 builds them (built here with
// noble's ed25519 from a fixed seed). Also decoding alone and the raw strict signature checks.
//
//   node bench/vote-bench.mjs [--validators 100] [--seconds 3]
//
// Prints readable lines, then one JSON line.
import os from "node:os";
import { ed25519 } from "@noble/curves/ed25519.js";
import * as aldb from "../dist/index.js";

const args = process.argv.slice(2);
const opt = (name) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined);
const seconds = Number(opt("--seconds") || 0) || 3;
const validators = Number(opt("--validators") || 0) || 100;

// A fixed-seed byte generator (xorshift32), so every run builds the same votes.
let s = 20251115;
const bytes = (n) => {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    out[i] = s & 0xff;
  }
  return out;
};
const cat = (...p) => aldb.hexDecode(p.map(aldb.hexEncode).join(""));
const u64 = (x) => { const b = new Uint8Array(8); new DataView(b.buffer).setBigUint64(0, BigInt(x), true); return b; };

const slot = 312456789n;
const h = bytes(32);
const root = bytes(32);
const hash = aldb.bankHash(h, root, null);
const members = [];
const votes = [];
for (let i = 0; i < validators; i++) {
  const node = bytes(32);
  const voter = bytes(32);
  const voteAccount = bytes(32);
  const nodePub = ed25519.getPublicKey(node);
  const voterPub = ed25519.getPublicKey(voter);
  members.push({ voteAccount, authorizedVoter: voterPub, stake: 1n + BigInt(i) * 1000n });
  const data = cat(
    Uint8Array.of(14, 0, 0, 0), u64(slot - 40n), Uint8Array.of(5, 36, 5, 1, 4, 1, 3, 1, 2, 1, 1),
    hash, Uint8Array.of(1), u64(1760000000n), new Uint8Array(32).fill(9),
  );
  const msg = cat(
    Uint8Array.of(2, 1, 1, 4), nodePub, voterPub, voteAccount, aldb.VOTE_PROGRAM_ID, new Uint8Array(32).fill(7),
    Uint8Array.of(1, 3, 2, 2, 1, data.length), data,
  );
  votes.push(cat(Uint8Array.of(2), ed25519.sign(msg, node), ed25519.sign(msg, voter), msg));
}
const set = aldb.validatorSet(members);

function run(fn) {
  fn();
  let n = 0;
  const t0 = process.hrtime.bigint();
  const end = t0 + BigInt(Math.round(seconds * 1e9));
  let now = t0;
  while (now < end) {
    n += fn();
    now = process.hrtime.bigint();
  }
  return n / (Number(now - t0) / 1e9);
}

const slotsPerSec = run(() => {
  const a = aldb.verifyRootByVotes(set, { slot, h, root, hardForks: null, votes });
  if (a.voters !== validators) throw new Error(`${a.voters} of ${validators} counted`);
  return 1;
});
const decodesPerSec = run(() => {
  for (const v of votes) aldb.parseVoteTransaction(v);
  return votes.length;
});
const parsed = votes.map(aldb.parseVoteTransaction);
const sigsPerSec = run(() => {
  for (const t of parsed) if (!aldb.verifyVoteSignatures(t)) throw new Error("signature");
  return parsed.length * 2;
});

const votesPerSec = slotsPerSec * validators;
console.log(`vote-bench (TypeScript): validators=${validators} seconds=${seconds} node ${process.version} on ${os.cpus()[0]?.model ?? "?"}`);
console.log(`votes: ${votes[0].length} bytes each, 2 signatures each; all ${validators} counted`);
console.log(`vote chain: ${slotsPerSec.toFixed(1)} slots/s = ${votesPerSec.toFixed(0)} votes/s (${(1e3 / slotsPerSec).toFixed(1)} ms per slot)`);
console.log(`decode only: ${decodesPerSec.toFixed(0)} votes/s`);
console.log(`anchor strict ed25519: ${sigsPerSec.toFixed(0)} signatures/s -> ceiling ${(sigsPerSec / 2).toFixed(0)} votes/s (ratio ${(votesPerSec / (sigsPerSec / 2)).toFixed(2)})`);
console.log(JSON.stringify({
  validators,
  seconds,
  slots_per_sec: Math.round(slotsPerSec * 10) / 10,
  votes_per_sec: Math.round(votesPerSec),
  decodes_per_sec: Math.round(decodesPerSec),
  ed25519_per_sec: Math.round(sigsPerSec),
  signature_efficiency: votesPerSec / (sigsPerSec / 2),
}));
