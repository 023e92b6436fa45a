// examples/follow-epochs.mjs against a loopback JSON-RPC server answering getEpochTransition and
// getSlotVotes with the transitions and slot evidence of tests/vectors/epochs-v1.json's
// scenarios (docs/SPEC.md §11): from the genesis checkpoint the client follows every epoch,
// naming each, accepts the newest root on its epoch's set and keeps its state in a file written
// atomically; a later run catches up from the state alone; a checkpoint past its trusting period
// is refused; two services answering one slot with two bank hashes, each voted for by the whole
// set, freeze the client, which writes the misbehaviour file and refuses every later run. The
// vectors' roots are random, so no account proof holds against them: an account's proof is shown
// to be checked against the voted root by one made for another root being refused.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { aldb, loadVectors, repoRoot } from "./helpers.mjs";
import { StateFile, followAndProve, report } from "../examples/follow-epochs.mjs";
import { answers, serve } from "./epochs-server.mjs";

const v = loadVectors("epochs-v1.json");
const votesV = loadVectors("votes-v1.json");
const scenario = (name) => v.scenarios.find((s) => s.name === name);
const example = join(repoRoot, "ts", "aldb-verify", "examples", "follow-epochs.mjs");

/** Runs the example without blocking this process, whose server it talks to. */
function run(args) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [example, ...args]);
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c) => (stdout += c));
    child.stderr.on("data", (c) => (stderr += c));
    child.on("close", (status) => resolve({ status, stdout, stderr }));
  });
}

function files(checkpoint) {
  const dir = mkdtempSync(join(tmpdir(), "aldb-epochs-"));
  const cp = join(dir, "checkpoint.json");
  writeFileSync(cp, aldb.stringifyJson(checkpoint));
  return { dir, cp };
}

test("follow-epochs: follows every epoch from the checkpoint, keeps its state, catches up from it", async () => {
  const s = scenario("follow");
  const svc = await serve(answers(s));
  const { dir, cp } = files(s.checkpoint);
  try {
    const now = 1760000500n;
    const file = new StateFile(cp);
    // Slot 100 is in epoch 2: epochs 1 and 2 are followed, the root accepted on epoch 2's set.
    const first = await followAndProve({ hyades: svc.url, file, slot: 100n, now });
    assert.deepEqual(first.followed.map((f) => f.epoch), [1n, 2n]);
    assert.equal(first.checkpoint.setHash, aldb.base58Encode(aldb.epochSetFromJson(s.checkpoint.set).hash));
    const step = (name) => s.steps.find((x) => x.name === name).expect;
    assert.equal(first.followed[1].setHash, step("to_epoch_2").set_hash);
    assert.equal(first.root.root, step("root_epoch_2_new_validator").root);
    assert.equal(first.root.bankHash, step("root_epoch_2_new_validator").bank_hash);
    assert.equal(aldb.LightClient.fromStateJson(readFileSync(file.path, "utf8")).epoch, 2n);
    assert.ok(!existsSync(`${file.path}.tmp`));

    // A leftover of a write a crash cut short does no harm. The next run follows only what is
    // new (epochs 3 to 5) and accepts the newest root, slot 1000, on epoch 5's set.
    writeFileSync(`${file.path}.tmp`, '{"version": 1, "sched');
    const second = await followAndProve({ hyades: svc.url, file, now });
    assert.deepEqual(second.followed.map((f) => f.epoch), [3n, 4n, 5n]);
    assert.deepEqual(second.followed.map((f) => [f.stake, f.totalStake]), [[360n, 360n], [300n, 310n], [300n, 300n]]);
    assert.equal(second.root.slot, 1000n);
    assert.equal(second.root.root, step("root_epoch_5").root);
    assert.equal(second.checkpoint, null);
    assert.ok(!existsSync(`${file.path}.tmp`));
    const lines = report(second, null);
    assert.match(lines[0], /^followed to epoch 3: set \w+, bound at slot 150 and voted for by stake 360 of 360 of epoch 2's set$/);
    assert.match(lines.at(-1), /client: trusts epoch 5/);

    // The command line prints the chain; with PUBKEY the account's proof must hold against the
    // voted root, and one for another root is refused.
    const cli = (args) => run(["--hyades", svc.url, "--checkpoint", cp, "--now", String(now), ...args]);
    const again = await cli([]);
    assert.equal(again.status, 0, again.stderr);
    assert.doesNotMatch(again.stdout, /followed to epoch/);
    assert.match(again.stdout, new RegExp(`root ${step("root_epoch_5").root} at slot 1000\n`));
    const pubkey = votesV.evidence.find((x) => x.name === "all_vote").evidence.pubkey;
    const refused = await cli([pubkey]);
    assert.equal(refused.status, 1);
    assert.equal(refused.stdout, "");
    assert.match(refused.stderr, /^error: [a-z_]+: /, "an AldbError: the proof, not the service, is refused");
    assert.equal((await cli(["--slot", "x"])).status, 2);

    // Too late: the set of epoch 5 is past its trusting period.
    await assert.rejects(followAndProve({ hyades: svc.url, file, now: 1760000300n + 432001n }), { code: "expired" });
  } finally {
    await svc.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("follow-epochs: a checkpoint past its trusting period is never followed", async () => {
  const s = scenario("follow");
  const svc = await serve(answers(s));
  const { dir, cp } = files(s.checkpoint);
  try {
    const now = BigInt(s.checkpoint.time) + BigInt(s.checkpoint.trustingPeriod) + 1n;
    await assert.rejects(followAndProve({ hyades: svc.url, file: new StateFile(cp), slot: 100n, now }), { code: "expired" });
    assert.equal(aldb.LightClient.fromStateJson(readFileSync(`${cp}.state`, "utf8")).epoch, 0n);
  } finally {
    await svc.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("follow-epochs: conflicting bank hashes freeze the client and write the misbehaviour file", async () => {
  const s = scenario("conflicting_roots");
  const honest = await serve(answers(s, ["root"]));
  const forked = await serve(answers(s, []));
  forked.state.svc.evidence.set(10n, s.steps.find((x) => x.name === "other_root_same_slot").evidence);
  const { dir, cp } = files(s.checkpoint);
  try {
    const now = 1760000100n;
    const file = new StateFile(cp, join(dir, "client.json"));
    await followAndProve({ hyades: honest.url, file, slot: 10n, now });
    assert.ok(!existsSync(file.misbehaviour));
    await assert.rejects(followAndProve({ hyades: forked.url, file, slot: 10n, now }), (e) => e.code === "misbehaviour" && e.message.includes(file.misbehaviour));
    const m = aldb.misbehaviourFromJson(readFileSync(file.misbehaviour, "utf8"));
    assert.equal(m.kind, "conflicting_bank_hashes");
    assert.equal(aldb.verifyMisbehaviour(m, aldb.epochSetFromJson(s.checkpoint.set).hash), "conflicting_bank_hashes");
    const frozen = readFileSync(file.path, "utf8");
    for (const url of [honest.url, forked.url]) {
      await assert.rejects(followAndProve({ hyades: url, file, slot: 10n, now }), { code: "frozen" });
      await assert.rejects(followAndProve({ hyades: url, file, now }), { code: "frozen" });
    }
    assert.equal(readFileSync(file.path, "utf8"), frozen);
  } finally {
    await honest.close();
    await forked.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
