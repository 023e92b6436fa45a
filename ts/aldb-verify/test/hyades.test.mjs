// End to end against the real service: `aldb simulate` writes a snapshot directory, `hyades`
// serves it, and examples/fetch-proof.mjs fetches and verifies accounts over JSON-RPC, with the
// roots checked against the ones the simulator printed. Needs target/debug/aldb and
// target/debug/hyades (`cargo build -p aldb-cli -p hyades`; CI's cargo test builds them) and is
// skipped without them. ALDB_TEST_PORT=P serves on 127.0.0.1:P (metrics on P+1) instead of
// ports the system picks.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { aldb, repoRoot } from "./helpers.mjs";
import { fetchVerifiedAccount } from "../examples/fetch-proof.mjs";

const bin = (name) => join(repoRoot, "target", "debug", name);
const missing = ["aldb", "hyades"].filter((b) => !existsSync(bin(b)));

const M64 = (1n << 64n) - 1n;
function splitmix64(z) {
  z = (z + 0x9e3779b97f4a7c15n) & M64;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & M64;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & M64;
  return z ^ (z >> 31n);
}
/** aldb_workload::pubkey(seed, i): the workload's key `i`. */
function workloadPubkey(seed, i) {
  const base = (splitmix64(seed ^ 0x5eed000000000000n) + BigInt(i) * 4n) & M64;
  const out = new Uint8Array(32);
  for (let k = 0; k < 4; k++) {
    let w = splitmix64((base + BigInt(k)) & M64);
    for (let j = 0; j < 8; j++, w >>= 8n) out[8 * k + j] = Number(w & 0xffn);
  }
  return aldb.base58Encode(out);
}

function startHyades(dir) {
  const port = Number(process.env.ALDB_TEST_PORT ?? 0);
  const args = ["--dir", dir, "--addr", `127.0.0.1:${port}`, "--metrics-addr", `127.0.0.1:${port ? port + 1 : 0}`, "--threads", "1"];
  const child = spawn(bin("hyades"), args, { env: { ...process.env, RUST_LOG: "info" }, stdio: ["ignore", "ignore", "pipe"] });
  return new Promise((resolve, reject) => {
    let log = "";
    const timer = setTimeout(() => {
      child.kill();
      reject(new Error(`hyades did not start within 30s:\n${log}`));
    }, 30000);
    child.stderr.on("data", (chunk) => {
      log += chunk;
      const m = / on (127\.0\.0\.1:\d+) /.exec(log);
      if (m) {
        clearTimeout(timer);
        resolve({ child, url: `http://${m[1]}` });
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`hyades exited with ${code}:\n${log}`));
    });
  });
}

test("fetch-proof example against aldb simulate + hyades", { skip: missing.length ? `target/debug/${missing.join(", target/debug/")} not built (cargo build -p aldb-cli -p hyades)` : false, timeout: 120000 }, async () => {
  const tmp = mkdtempSync(join(tmpdir(), "aldb-ts-"));
  let server;
  try {
    const dir = join(tmp, "snap");
    const out = execFileSync(
      bin("aldb"),
      ["simulate", "--dir", dir, "--slots", "12", "--leaves-log2", "10", "--slot-updates", "200", "--threads", "1"],
      { encoding: "utf8" },
    );
    // The roots the producer committed: what a light client would trust (in production via an
    // attested root record), independent of the server answering.
    const roots = new Map([...out.matchAll(/published slot=(\d+) root=(\w+)/g)].map((m) => [Number(m[1]), m[2]]));
    assert.equal(roots.size, 13);

    server = await startHyades(dir);
    let present = 0;
    let absent = 0;
    for (const slot of [null, 0, 6]) {
      for (let i = 0; i < 1100; i += 37) {
        const r = await fetchVerifiedAccount(server.url, workloadPubkey(20240611n, i), slot);
        assert.equal(r.root, roots.get(r.slot), `slot ${r.slot}: root`);
        if (slot !== null) assert.equal(r.slot, slot);
        if (r.claim.present) present++;
        else absent++;
      }
    }
    assert.ok(present > 0 && absent > 0, `${present} present, ${absent} absent`);

    // A proof verified against a root the server did not commit to is rejected.
    const pk = workloadPubkey(20240611n, 1);
    const res = await fetch(server.url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "getAccountProof", params: [pk, { slot: 3 }] }),
    });
    const answer = aldb.parseJson(await res.text()).result.value;
    const proof = aldb.proofFromJson(answer.proof);
    assert.throws(() => aldb.verifyProof(proof, aldb.base58DecodeExact(roots.get(4)), aldb.base58DecodeExact(pk)), { code: "root_mismatch" });
  } finally {
    server?.child.kill();
    rmSync(tmp, { recursive: true, force: true });
  }
});
