// @solana/kit interoperation: kit's Address strings and address codec agree with this package's
// base58, and examples/kit-proof.ts (compiled to build/) reads an account through kit's Solana
// RPC client and proves it through Hyades. The Solana RPC is a loopback stand-in that answers
// getAccountInfo with the account Hyades holds at the slot it names (or a tampered one); the
// Hyades half is the real service over `aldb simulate` output with signed records.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createServer } from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { address, getAddressDecoder, getAddressEncoder } from "@solana/kit";
import { aldb } from "./helpers.mjs";
import { bin, missing, startHyades, workloadPubkey } from "./live.mjs";
import { proveSolanaAccount } from "../build/examples/kit-proof.js";

test("kit Address strings are this package's base58 pubkeys", () => {
  for (let i = 0; i < 50; i++) {
    const text = workloadPubkey(7n, i);
    const addr = address(text);
    const bytes = aldb.base58DecodeExact(addr);
    assert.deepEqual(new Uint8Array(getAddressEncoder().encode(addr)), bytes);
    assert.equal(getAddressDecoder().decode(bytes), aldb.base58Encode(bytes));
    assert.deepEqual(aldb.keyPath(bytes), aldb.keyPath(new Uint8Array(getAddressEncoder().encode(addr))));
  }
});

/** A Solana JSON-RPC stand-in: getAccountInfo at a fixed slot, from `lookup(pubkey)`. */
function standInSolanaRpc(slot, lookup) {
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", async () => {
      const msg = JSON.parse(body);
      assert.equal(msg.method, "getAccountInfo");
      assert.equal(msg.params[1].encoding, "base64");
      const value = await lookup(msg.params[0]);
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ jsonrpc: "2.0", id: msg.id, result: { context: { apiVersion: "4.2.0", slot }, value } }));
    });
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve({ server, url: `http://127.0.0.1:${server.address().port}` })));
}

const skip = missing.length ? `target/debug/${missing.join(", target/debug/")} not built (cargo build -p aldb-cli -p hyades)` : false;

test("kit-proof example: a Solana RPC answer proven through Hyades", { skip, timeout: 120000 }, async () => {
  const tmp = mkdtempSync(join(tmpdir(), "aldb-kit-"));
  let hyades;
  let solana;
  try {
    const dir = join(tmp, "snap");
    const keypair = join(tmp, "signer.json");
    const identity = execFileSync(bin("aldb"), ["keygen", keypair, "--seed-hex", "22".repeat(32)], { encoding: "utf8" }).trim().split(/\s+/).pop();
    execFileSync(bin("aldb"), ["simulate", "--dir", dir, "--slots", "8", "--leaves-log2", "8", "--slot-updates", "50", "--threads", "1", "--keypair", keypair]);
    hyades = await startHyades(dir, 2);
    const slot = 5;
    let tamper = false;
    solana = await standInSolanaRpc(slot, async (pubkey) => {
      const res = await fetch(hyades.url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "getAccountProof", params: [pubkey, { slot }] }),
      });
      const a = JSON.parse(await res.text()).result.value.account;
      if (a === null) return null;
      return { ...a, lamports: a.lamports + (tamper ? 1 : 0), rentEpoch: 0 };
    });
    const rule = { identities: [identity], threshold: 1 };
    const presentKeys = [];
    for (let i = 0; i < 300; i += 23) {
      const r = await proveSolanaAccount(solana.url, hyades.url, address(workloadPubkey(20240611n, i)), rule);
      assert.equal(r.slot, BigInt(slot));
      if (r.present) presentKeys.push(r.address);
    }
    assert.ok(presentKeys.length > 0 && presentKeys.length < 14, `${presentKeys.length} of 14 present`);
    const pk = presentKeys[0];
    const stranger = aldb.base58Encode(new Uint8Array(32).fill(3));
    await assert.rejects(proveSolanaAccount(solana.url, hyades.url, pk, { identities: [stranger], threshold: 1 }), { code: "quorum" });
    tamper = true;
    await assert.rejects(proveSolanaAccount(solana.url, hyades.url, pk, rule), { code: "account_mismatch" });
  } finally {
    hyades?.child.kill();
    solana?.server.close();
    rmSync(tmp, { recursive: true, force: true });
  }
});
