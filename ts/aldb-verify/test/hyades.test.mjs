// End to end against the real service: `aldb simulate` writes a snapshot directory and root
// records signed by a fixed key, `hyades` serves it, and examples/fetch-proof.mjs fetches and
// verifies accounts over JSON-RPC against roots from each trust source (the roots the simulator
// printed, the signed records, the server's own word), checked against the printed roots. Needs
// target/debug/aldb and target/debug/hyades (`cargo build -p aldb-cli -p hyades`; CI's cargo test
// builds them) and is skipped without them. ALDB_TEST_PORT=P serves on 127.0.0.1:P (metrics on
// P+1; the kit test takes P+2) instead of ports the system picks.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { aldb, repoRoot } from "./helpers.mjs";
import { bin, missing, startHyades, workloadPubkey } from "./live.mjs";
import { fetchVerifiedAccount, readIdentities } from "../examples/fetch-proof.mjs";

const example = join(repoRoot, "ts", "aldb-verify", "examples", "fetch-proof.mjs");
const skip = missing.length ? `target/debug/${missing.join(", target/debug/")} not built (cargo build -p aldb-cli -p hyades)` : false;

test("fetch-proof example against aldb simulate + hyades, for each trust source", { skip, timeout: 120000 }, async () => {
  const tmp = mkdtempSync(join(tmpdir(), "aldb-ts-"));
  let server;
  try {
    const dir = join(tmp, "snap");
    const keypair = join(tmp, "signer.json");
    const identity = execFileSync(bin("aldb"), ["keygen", keypair, "--seed-hex", "11".repeat(32)], { encoding: "utf8" }).trim().split(/\s+/).pop();
    aldb.base58DecodeExact(identity);
    const out = execFileSync(
      bin("aldb"),
      ["simulate", "--dir", dir, "--slots", "12", "--leaves-log2", "10", "--slot-updates", "200", "--threads", "1", "--keypair", keypair],
      { encoding: "utf8" },
    );
    // The roots the producer committed: what a light client would trust, independent of the
    // server answering.
    const roots = new Map([...out.matchAll(/published slot=(\d+) root=(\w+)/g)].map((m) => [Number(m[1]), m[2]]));
    assert.equal(roots.size, 13);
    const identities = join(tmp, "identities.txt");
    writeFileSync(identities, `# the simulator's signer\n${identity}\n`);
    assert.deepEqual(readIdentities(`["${identity}"]`), [identity]);
    assert.throws(() => readIdentities(`["${identity}", 5]`), /not a JSON array/);

    server = await startHyades(dir);
    let present = 0;
    let absent = 0;
    for (const slot of [null, 0, 6]) {
      for (let i = 0; i < 1100; i += 37) {
        const pk = workloadPubkey(20240611n, i);
        const trusts = [{ identities: [identity], threshold: 1 }, { trustServer: true }];
        if (slot !== null) trusts.push({ root: roots.get(slot) });
        for (const trust of trusts) {
          const r = await fetchVerifiedAccount(server.url, pk, slot, trust);
          assert.equal(r.root, roots.get(r.slot), `slot ${r.slot}: root (${JSON.stringify(trust)})`);
          if (slot !== null) assert.equal(r.slot, slot);
          if (r.claim.present) present++;
          else absent++;
        }
      }
    }
    assert.ok(present > 0 && absent > 0, `${present} present, ${absent} absent`);

    const pk = workloadPubkey(20240611n, 1);
    // A root the server did not commit to for that slot is refused.
    await assert.rejects(fetchVerifiedAccount(server.url, pk, 3, { root: roots.get(4) }), { code: "root_mismatch" });
    // A record signed by someone outside the rule is refused.
    const stranger = aldb.base58Encode(new Uint8Array(32).fill(9));
    await assert.rejects(fetchVerifiedAccount(server.url, pk, 3, { identities: [stranger], threshold: 1 }), { code: "quorum" });

    // A record of another cluster is refused when the genesis hash is given.
    const genesis = "51ikJEpcxZMWLST5nSVjLqawCdqDNWBH93RVWHdLnZPB"; // aldb simulate's default
    await fetchVerifiedAccount(server.url, pk, 3, { identities: [identity], threshold: 1, genesisHash: genesis });
    await assert.rejects(fetchVerifiedAccount(server.url, pk, 3, { identities: [identity], threshold: 1, genesisHash: stranger }), { code: "genesis_hash" });

    // The command line: a trust source is required, --trust-server says so on stderr.
    const cli = (args) => spawnSync(process.execPath, [example, "--url", server.url, ...args], { encoding: "utf8" });
    const none = cli([pk]);
    assert.equal(none.status, 2, none.stderr);
    assert.match(none.stderr, /--root, --identities with --threshold, --trust-server/);
    const ts = cli(["--trust-server", pk]);
    assert.equal(ts.status, 0, ts.stderr);
    assert.match(ts.stderr, /warning: --trust-server/);
    const q = cli(["--identities", identities, "--threshold", "1", "--slot", "5", pk]);
    assert.equal(q.status, 0, q.stderr);
    assert.equal(q.stderr, "");
    assert.match(q.stdout, new RegExp(`verified against root ${roots.get(5)} at slot 5`));
    const bad = cli(["--root", roots.get(4), "--slot", "3", pk]);
    assert.equal(bad.status, 1);
    assert.match(bad.stderr, /root_mismatch/);
  } finally {
    server?.child.kill();
    rmSync(tmp, { recursive: true, force: true });
  }
});
