// Shared by the tests that run the real binaries: target/debug/aldb and target/debug/hyades.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { aldb, repoRoot } from "./helpers.mjs";

export const bin = (name) => join(repoRoot, "target", "debug", name);
export const missing = ["aldb", "hyades"].filter((b) => !existsSync(bin(b)));

const M64 = (1n << 64n) - 1n;
function splitmix64(z) {
  z = (z + 0x9e3779b97f4a7c15n) & M64;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & M64;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & M64;
  return z ^ (z >> 31n);
}
/** aldb_workload::pubkey(seed, i): the workload's key `i`. */
export function workloadPubkey(seed, i) {
  const base = (splitmix64(seed ^ 0x5eed000000000000n) + BigInt(i) * 4n) & M64;
  const out = new Uint8Array(32);
  for (let k = 0; k < 4; k++) {
    let w = splitmix64((base + BigInt(k)) & M64);
    for (let j = 0; j < 8; j++, w >>= 8n) out[8 * k + j] = Number(w & 0xffn);
  }
  return aldb.base58Encode(out);
}

/**
 * Starts hyades over `dir` on a port the system picks, or with ALDB_TEST_PORT=P on P + `offset`
 * (metrics one above): the test files run at once, so each passes its own offset.
 */
export function startHyades(dir, offset = 0) {
  const port = process.env.ALDB_TEST_PORT ? Number(process.env.ALDB_TEST_PORT) + offset : 0;
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

