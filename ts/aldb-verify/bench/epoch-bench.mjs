// What an epoch transition (docs/SPEC.md §11.4) costs @aldb/verify, one thread: the transition's
// JSON bytes, reading it, and a client's advance over it (the set's hash, every vote parsed and
// every signature verified), for sets of N validators that all vote. Each vote is a legacy
// TowerSync transaction paid by its node identity and signed by its authorized voter (two
// signatures), as agave 4.2.0 builds them, with noble's ed25519 from a fixed seed.
// Anchor, same process: noble's own `ed25519.verify` (zip215 off) over the same signatures and
// messages and nothing else; `ratio_vs_signatures` (advance ÷ anchor) is the figure that holds on
// a slower or busier host.
//
//   node bench/epoch-bench.mjs [--validators 1000,4000] [--runs 5]
//
// Prints one line per size (the median of the runs), then one JSON line.
import { ed25519 } from "@noble/curves/ed25519.js";
import * as aldb from "../dist/index.js";

const args = process.argv.slice(2);
const opt = (name) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined);
const sizes = (opt("--validators") || "1000,4000").split(",").map(Number);
const runs = Number(opt("--runs") || 0) || 5;

let s = 20261128;
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

const schedule = aldb.epochSchedule(432000n, 432000n, false);
const slot = 7n * 432000n + 1000n;
const results = [];
for (const n of sizes) {
  const keys = [];
  const members = [];
  for (let i = 0; i < n; i++) {
    const node = bytes(32);
    const voter = bytes(32);
    const k = { node, voter, nodePub: ed25519.getPublicKey(node), voterPub: ed25519.getPublicKey(voter), voteAccount: bytes(32) };
    keys.push(k);
    members.push({ voteAccount: k.voteAccount, authorizedVoter: k.voterPub, stake: 1000000n + BigInt(i) });
  }
  const total = members.reduce((a, m) => a + m.stake, 0n);
  const current = aldb.epochSet(7n, total, members);
  const next = aldb.epochSet(8n, total, members);
  const h = bytes(32);
  const root = bytes(32);
  const hash = aldb.bankHashWithSet(h, root, next.hash, null);
  const votes = keys.map((k) => {
    const data = cat(
      Uint8Array.of(14, 0, 0, 0), u64(slot - 40n), Uint8Array.of(5, 36, 5, 1, 4, 1, 3, 1, 2, 1, 1),
      hash, Uint8Array.of(1), u64(1760000000n), new Uint8Array(32).fill(9),
    );
    const msg = cat(
      Uint8Array.of(2, 1, 1, 4), k.nodePub, k.voterPub, k.voteAccount, aldb.VOTE_PROGRAM_ID, new Uint8Array(32).fill(7),
      Uint8Array.of(1, 3, 2, 2, 1, data.length), data,
    );
    return cat(Uint8Array.of(2), ed25519.sign(msg, k.node), ed25519.sign(msg, k.voter), msg);
  });
  const signed = votes.flatMap((tx, i) => [
    [tx.subarray(1, 65), tx.subarray(129), keys[i].nodePub],
    [tx.subarray(65, 129), tx.subarray(129), keys[i].voterPub],
  ]);
  const transition = { version: 1, set: aldb.epochSetToJson(next), evidence: aldb.slotEvidenceToJson({ slot, h, root, hardForks: null, nextSetHash: next.hash, votes }) };
  const text = aldb.stringifyJson(transition);
  const read = [];
  const advance = [];
  const anchor = [];
  for (let r = 0; r < runs; r++) {
    const ta = process.hrtime.bigint();
    for (const [sig, msg, pub] of signed) {
      if (!ed25519.verify(sig, msg, pub, { zip215: false })) throw new Error("a signature did not verify");
    }
    anchor.push(Number(process.hrtime.bigint() - ta) / 1e6);
    const t0 = process.hrtime.bigint();
    const t = aldb.transitionFromJson(text);
    const t1 = process.hrtime.bigint();
    const client = new aldb.LightClient({ schedule, set: current, time: 1760000000n, trustingPeriod: 432000n });
    const a = client.advance(t, 1760000000n);
    const t2 = process.hrtime.bigint();
    if (a.ok !== "advanced" || a.vouched.voters !== n) throw new Error("the transition was not followed");
    read.push(Number(t1 - t0) / 1e6);
    advance.push(Number(t2 - t1) / 1e6);
  }
  const median = (xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const row = { validators: n, set_bytes: current.encoding.length, json_bytes: text.length, read_ms: median(read), advance_ms: median(advance), signatures_ms: median(anchor) };
  row.ratio_vs_signatures = row.advance_ms / row.signatures_ms;
  results.push(row);
  console.log(`${n} validators: transition ${text.length} bytes of JSON (set ${row.set_bytes} bytes encoded); read ${row.read_ms.toFixed(1)} ms, advance ${row.advance_ms.toFixed(1)} ms; anchor: ${signed.length} signatures ${row.signatures_ms.toFixed(1)} ms, ratio ${row.ratio_vs_signatures.toFixed(3)}`);
}
console.log(JSON.stringify({ bench: "epoch-transition", runs, results }));
