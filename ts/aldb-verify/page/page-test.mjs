// Drives the page in a real headless Chromium against a live Hyades: `aldb simulate` writes
// snapshots and signed root records, `hyades` serves them, page/serve.mjs serves the page, and
// the browser fills the form and reads the verdict. Cases: a present account and an absent one
// verified under a quorum-signed record, a tampered root and a stranger's record refused, and the
// trust-server mode verified with its warning shown. Then the validators' votes: a page server in
// front of a loopback service answering with tests/vectors/epochs-v1.json's "follow" scenario,
// where the chain from the genesis checkpoint through epochs 1-5 to slot 1000's bank hash and root
// is shown (the vectors' roots are random, so the account's proof is refused against it), and
// the same checkpoint, past its trusting period by this machine's clock, refused as expired. Run through scripts/page-test.sh, which
// builds what this needs; exits non-zero if a case fails.
//
//   CHROMIUM=/usr/bin/chromium node page/page-test.mjs
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";
import * as aldb from "../dist/index.js";
import { bin, missing, startHyades, workloadPubkey } from "../test/live.mjs";
import { answers, serve } from "../test/epochs-server.mjs";
import { loadVectors } from "../test/helpers.mjs";

const CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"];

function startPageServer(hyadesUrl) {
  const child = spawn(process.execPath, [new URL("serve.mjs", import.meta.url).pathname, "--hyades", hyadesUrl, "--addr", "127.0.0.1:0"], { stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (c) => {
      out += c;
      const m = /page on (http:\S+)/.exec(out);
      if (m) resolve({ child, url: m[1] });
    });
    child.on("exit", (code) => reject(new Error(`page server exited with ${code}`)));
  });
}

async function account(url, pubkey, slot) {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "getAccountProof", params: [pubkey, { slot }] }) });
  return JSON.parse(await res.text()).result.value.account;
}

async function main() {
  if (missing.length) throw new Error(`target/debug/${missing.join(", target/debug/")} not built`);
  const tmp = mkdtempSync(join(tmpdir(), "aldb-page-"));
  const cleanup = [];
  try {
    const dir = join(tmp, "snap");
    const keypair = join(tmp, "signer.json");
    const identity = execFileSync(bin("aldb"), ["keygen", keypair, "--seed-hex", "33".repeat(32)], { encoding: "utf8" }).trim().split(/\s+/).pop();
    const out = execFileSync(bin("aldb"), ["simulate", "--dir", dir, "--slots", "8", "--leaves-log2", "8", "--slot-updates", "50", "--threads", "1", "--keypair", keypair], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
    const roots = new Map([...out.matchAll(/published slot=(\d+) root=(\w+)/g)].map((m) => [Number(m[1]), m[2]]));
    const hyades = await startHyades(dir, 4);
    cleanup.push(() => hyades.child.kill());
    const page = await startPageServer(hyades.url);
    cleanup.push(() => page.child.kill());
    const slot = 5;
    let present = null;
    for (let i = 0; present === null && i < 500; i++) {
      const pk = workloadPubkey(20240611n, i);
      if ((await account(hyades.url, pk, slot)) !== null) present = pk;
    }
    const absent = aldb.base58Encode(new Uint8Array(32).fill(7));
    if (present === null || (await account(hyades.url, absent, slot)) !== null) throw new Error("no present/absent key pair found");
    const stranger = aldb.base58Encode(new Uint8Array(32).fill(9));

    const browser = await chromium.launch({ executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium", args: CHROMIUM_ARGS });
    cleanup.push(() => browser.close());
    const tab = await browser.newPage();
    const cases = [
      { name: "present account, quorum-signed record", pubkey: present, trust: "identities", identities: identity, expect: "verified", text: /exists at slot 5/ },
      { name: "absent account, quorum-signed record", pubkey: absent, trust: "identities", identities: identity, expect: "verified", text: /does not exist at slot 5/ },
      { name: "tampered root (slot 4's root for slot 5)", pubkey: present, trust: "root", root: roots.get(4), expect: "refused", text: /root_mismatch/ },
      { name: "record signed by a stranger", pubkey: present, trust: "identities", identities: stranger, expect: "refused", text: /quorum/ },
      { name: "trust-server, warning shown", pubkey: present, trust: "server", expect: "verified", text: /exists at slot 5/, warning: true },
    ];
    let failed = 0;
    for (const c of cases) {
      await tab.goto(page.url);
      await tab.waitForSelector("body[data-ready='1']");
      await tab.fill("#pubkey", c.pubkey);
      await tab.fill("#slot", String(slot));
      await tab.check(`input[name=trust][value=${c.trust}]`);
      if (c.identities) await tab.fill("#identities", c.identities);
      if (c.root) await tab.fill("#root", c.root);
      await tab.click("#verify");
      const v = await tab.waitForSelector("#verdict[data-verdict=verified], #verdict[data-verdict=refused], #verdict[data-verdict=error]", { timeout: 20000 });
      const kind = await v.getAttribute("data-verdict");
      const text = (await v.textContent()) ?? "";
      const warning = await tab.isVisible("#warning");
      const siblings = (await tab.$$("#path-table tr")).length - 2;
      const shownRoot = await tab.textContent("#root-table");
      let ok = kind === c.expect && c.text.test(text) && warning === Boolean(c.warning);
      if (c.expect === "verified") ok &&= siblings >= 0 && (shownRoot ?? "").includes(roots.get(slot));
      console.log(`${ok ? "ok  " : "FAIL"} ${c.name}: ${kind}: ${text}${warning ? " [warning shown]" : ""}${siblings >= 0 ? ` (${siblings} siblings shown)` : ""}`);
      if (!ok) failed++;
    }

    // The validators' votes, from the vectors' "follow" scenario.
    const follow = loadVectors("epochs-v1.json").scenarios.find((x) => x.name === "follow");
    const svc = await serve(answers(follow));
    cleanup.push(() => svc.close());
    const votesPage = await startPageServer(svc.url);
    cleanup.push(() => votesPage.child.kill());
    const expect5 = follow.steps.find((x) => x.name === "root_epoch_5").expect;
    const trusting = { ...follow.checkpoint, trustingPeriod: 1_000_000_000 };
    const votesCases = [
      {
        name: "validators' votes: chain from the checkpoint through epochs 1-5 shown",
        checkpoint: aldb.stringifyJson(trusting),
        expect: "refused",
        text: /./,
        chain: [/checkpoint\s*0/, ...[1, 2, 3, 4, 5].map((e) => new RegExp(`followed\\s*${e}`)), new RegExp(expect5.bank_hash), new RegExp(expect5.root)],
      },
      { name: "validators' votes: a checkpoint past its trusting period", checkpoint: aldb.stringifyJson(follow.checkpoint), expect: "refused", text: /expired/, chain: [/checkpoint\s*0/] },
    ];
    for (const c of votesCases) {
      await tab.goto(votesPage.url);
      await tab.waitForSelector("body[data-ready='1']");
      await tab.fill("#pubkey", present);
      await tab.check("input[name=trust][value=votes]");
      await tab.fill("#checkpoint", c.checkpoint);
      await tab.click("#verify");
      const v = await tab.waitForSelector("#verdict[data-verdict=verified], #verdict[data-verdict=refused], #verdict[data-verdict=error]", { timeout: 20000 });
      const kind = await v.getAttribute("data-verdict");
      const text = (await v.textContent()) ?? "";
      const chain = (await tab.textContent("#chain-table")) ?? "";
      const ok = kind === c.expect && c.text.test(text) && c.chain.every((re) => re.test(chain)) && (await tab.isVisible("#chain"));
      console.log(`${ok ? "ok  " : "FAIL"} ${c.name}: ${kind}: ${text} | chain: ${chain.slice(0, 300)}`);
      if (!ok) failed++;
    }
    console.log(JSON.stringify({ cases: cases.length + votesCases.length, failed, chromium: browser.version() }));
    return failed === 0 ? 0 : 1;
  } finally {
    for (const f of cleanup.reverse()) await f();
    rmSync(tmp, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.error(`error: ${e.stack ?? e.message}`);
    process.exit(1);
  },
);
