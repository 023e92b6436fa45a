// tests/vectors/epochs-v1.json (docs/SPEC.md §11): the epoch schedule, the set's encoding and
// hash, the bank hash with the next set, every light-client scenario step by step, and the
// misbehaviour files; then mutated sets and transitions never throwing anything but an AldbError
// and never moving the client to another set.
import { test } from "node:test";
import assert from "node:assert/strict";
import { aldb, b58, hex, loadVectors } from "./helpers.mjs";

const v = loadVectors("epochs-v1.json");
const big = (x) => (x === null ? null : BigInt(x));
const enc58 = (b) => aldb.base58Encode(b);
// JSON as the vectors hold it: every integer a bigint, so that values compare whatever their size.
const norm = (x) =>
  typeof x === "number" ? BigInt(x) : Array.isArray(x) ? x.map(norm) : x && typeof x === "object" ? Object.fromEntries(Object.entries(x).map(([k, y]) => [k, norm(y)])) : x;

test("epochs-v1.json: constants", () => {
  const c = v.constants;
  assert.equal(hex(aldb.SET_DOMAIN), c.set_domain);
  assert.equal(BigInt(aldb.MAX_SET_MEMBERS), big(c.max_set_members));
  assert.equal(aldb.MINIMUM_SLOTS_PER_EPOCH, big(c.minimum_slots_per_epoch));
  assert.equal(BigInt(aldb.MAX_EVIDENCE_VOTES), big(c.max_evidence_votes));
});

test("epochs-v1.json: schedules", () => {
  for (const c of v.schedules) {
    const s = aldb.scheduleFromJson(c.schedule);
    assert.deepEqual(aldb.epochSchedule(s.slotsPerEpoch, s.leaderScheduleSlotOffset, s.warmup), s, c.name);
    for (const p of c.slots) {
      const slot = big(p.slot);
      const epoch = aldb.epochOf(s, slot);
      assert.equal(epoch, big(p.epoch), `${c.name} ${slot}`);
      assert.equal(aldb.firstSlot(s, epoch), big(p.first_slot), `${c.name} ${slot}`);
      if (p.leader_schedule_epoch !== null) assert.equal(aldb.leaderScheduleEpoch(s, slot), big(p.leader_schedule_epoch), `${c.name} ${slot}`);
      if (p.next_set_from !== null) assert.equal(aldb.nextSetFrom(s, epoch), big(p.next_set_from), `${c.name} ${slot}`);
    }
  }
  for (const c of v.invalid_schedules) {
    assert.throws(() => aldb.scheduleFromJson(c.schedule), (e) => e instanceof aldb.AldbError && e.code === c.error, c.name);
  }
});

test("epochs-v1.json: sets encode and hash", () => {
  for (const c of v.sets) {
    const s = aldb.epochSetFromJson(c.set);
    assert.equal(hex(s.encoding), c.encoding, c.name);
    assert.equal(enc58(s.hash), c.hash, c.name);
    const d = aldb.decodeEpochSet(aldb.hexDecode(c.encoding));
    assert.equal(enc58(d.hash), c.hash, c.name);
    assert.deepEqual(norm(aldb.epochSetToJson(s)), norm(c.set), c.name);
  }
  for (const c of v.invalid_sets) {
    assert.throws(() => aldb.decodeEpochSet(aldb.hexDecode(c.encoding)), (e) => e instanceof aldb.AldbError && e.code === c.error, c.name);
  }
  for (const c of v.invalid_set_json) {
    assert.throws(() => aldb.epochSetFromJson(c.set), (e) => e instanceof aldb.AldbError && e.code === c.error, c.name);
  }
});

test("epochs-v1.json: the bank hash with the next set", () => {
  for (const c of v.bank_hash) {
    const [h, root, nsh] = [b58(c.h), b58(c.root), b58(c.next_set_hash)];
    const forks = big(c.hard_forks);
    assert.equal(enc58(aldb.mixRootAndSet(h, root, nsh)), c.mixed, c.name);
    assert.equal(enc58(aldb.bankHashWithSet(h, root, nsh, forks)), c.bank_hash, c.name);
    assert.equal(enc58(aldb.bankHash(h, root, forks)), c.bank_hash_without_set, c.name);
  }
});

function outcome(step, client) {
  const now = big(step.now);
  try {
    if (step.op === "advance") {
      const r = client.advance(aldb.transitionFromJson(step.transition), now);
      const base = { ok: r.ok, epoch: r.epoch };
      if (r.ok === "advanced") Object.assign(base, { set_hash: enc58(r.setHash), time: r.time });
      return { ...base, stake: r.vouched.stake.toString(), total_stake: r.vouched.totalStake.toString() };
    }
    if (step.op === "accept_root") {
      const r = client.acceptRoot(aldb.slotEvidenceFromJson(step.evidence), now);
      return {
        ok: "accepted",
        slot: r.slot,
        epoch: r.epoch,
        bank_hash: enc58(r.bankHash),
        root: enc58(r.root),
        next_set_hash: enc58(r.nextSetHash),
        stake: r.vouched.stake.toString(),
        total_stake: r.vouched.totalStake.toString(),
      };
    }
    const kind = client.submitMisbehaviour(aldb.slotEvidenceFromJson(step.first), aldb.slotEvidenceFromJson(step.second), now);
    return { error: "misbehaviour", kind, misbehaviour: aldb.misbehaviourToJson(client.frozen) };
  } catch (e) {
    if (!(e instanceof aldb.AldbError)) throw e;
    if (e.code === "misbehaviour") return { error: e.code, kind: client.frozen.kind, misbehaviour: aldb.misbehaviourToJson(client.frozen) };
    return { error: e.code };
  }
}

const summary = (c) => ({
  epoch: c.epoch,
  set_hash: enc58(c.newest.set.hash),
  time: c.newest.time,
  held_epochs: c.held.map((e) => e.set.epoch),
  last_verified_slot: c.lastVerifiedSlot,
  frozen: c.frozen === null ? null : c.frozen.kind,
});

test("epochs-v1.json: scenarios, step by step", () => {
  assert.ok(v.scenarios.length >= 7);
  for (const sc of v.scenarios) {
    const client = new aldb.LightClient(aldb.checkpointFromJson(sc.checkpoint));
    for (const step of sc.steps) {
      const label = `${sc.name} / ${step.name}`;
      const before = summary(client);
      const got = outcome(step, client);
      assert.deepEqual(norm(got), norm(step.expect), label);
      assert.deepEqual(norm(summary(client)), norm(step.state), label);
      if (got.error !== undefined && got.error !== "misbehaviour") assert.deepEqual(summary(client), before, `${label}: a refusal changes nothing`);
    }
    // The state file: as the independent implementation writes it, and read back.
    assert.deepEqual(norm(client.toStateJson()), norm(sc.final_state), sc.name);
    const again = aldb.LightClient.fromStateJson(aldb.stringifyJson(sc.final_state));
    assert.deepEqual(norm(again.toStateJson()), norm(sc.final_state), sc.name);
  }
});

test("epochs-v1.json: invalid state files", () => {
  for (const c of v.invalid_states) {
    assert.throws(() => aldb.LightClient.fromStateJson(c.state), (e) => e instanceof aldb.AldbError && e.code === c.error, c.name);
  }
});

test("epochs-v1.json: misbehaviour files", () => {
  for (const c of v.misbehaviour_files) {
    const m = aldb.misbehaviourFromJson(c.file);
    // setHash is for people and not read; a tampered file's is stale.
    const { setHash: _written, ...rest } = norm(aldb.misbehaviourToJson(m));
    const { setHash: _given, ...want } = norm(c.file);
    assert.deepEqual(rest, want, c.name);
    const trusted = c.trusted_set_hash === null ? undefined : b58(c.trusted_set_hash);
    if (c.valid) assert.equal(aldb.verifyMisbehaviour(m, trusted), c.kind, c.name);
    else assert.throws(() => aldb.verifyMisbehaviour(m, trusted), (e) => e instanceof aldb.AldbError && e.code === c.error, c.name);
  }
});

// A small deterministic generator (xorshift) so the mutations are the same on every run.
function rng(seed) {
  let x = BigInt(seed) || 1n;
  return (n) => {
    x ^= (x << 13n) & 0xffffffffffffffffn;
    x ^= x >> 7n;
    x ^= (x << 17n) & 0xffffffffffffffffn;
    return Number(x % BigInt(n));
  };
}

test("mutated set encodings decode to nothing else with the same hash, and never throw anything but an AldbError", () => {
  const r = rng(11);
  const originals = v.sets.map((c) => aldb.hexDecode(c.encoding));
  for (let i = 0; i < 2000; i++) {
    const orig = originals[r(originals.length)];
    const b = Uint8Array.from(orig);
    const edits = 1 + r(3);
    let m = b;
    for (let k = 0; k < edits; k++) {
      const at = r(Math.max(m.length, 1));
      const op = r(3);
      if (op === 0 && m.length > 0) m[at] ^= 1 + r(255);
      else if (op === 1) m = m.slice(0, at);
      else m = Uint8Array.from([...m.slice(0, at), r(256), ...m.slice(at)]);
    }
    try {
      const s = aldb.decodeEpochSet(m);
      assert.equal(hex(s.encoding), hex(m), "a decoded set re-encodes to its bytes");
      if (hex(m) !== hex(orig)) assert.notEqual(enc58(s.hash), enc58(aldb.decodeEpochSet(orig).hash));
    } catch (e) {
      assert.ok(e instanceof aldb.AldbError, String(e));
    }
  }
});

test("a mutated transition never moves the client to another set", () => {
  const r = rng(27);
  const sc = v.scenarios.find((s) => s.name === "follow");
  const step = sc.steps.find((s) => s.name === "to_epoch_1");
  const genuine = aldb.transitionFromJson(step.transition);
  for (let i = 0; i < 300; i++) {
    const client = new aldb.LightClient(aldb.checkpointFromJson(sc.checkpoint));
    const t = aldb.transitionFromJson(step.transition);
    const what = r(6);
    if (what === 0) {
      const m = t.set.members.map((x) => ({ ...x }));
      const j = r(m.length);
      m[j].stake = m[j].stake + 1n + BigInt(r(1000));
      try {
        t.set = aldb.epochSet(t.set.epoch, t.set.totalStake + 2000n, m);
      } catch (e) {
        assert.ok(e instanceof aldb.AldbError);
        continue;
      }
    } else if (what === 1) t.evidence.h = Uint8Array.from(t.evidence.h, (x, k) => (k === r(32) ? x ^ 1 : x));
    else if (what === 2) t.evidence.root = Uint8Array.from(t.evidence.root, (x, k) => (k === 0 ? x ^ (1 + r(255)) : x));
    else if (what === 3) t.evidence.slot = t.evidence.slot + 1n + BigInt(r(5));
    else if (what === 4) t.evidence.hardForks = 1n + BigInt(r(3));
    else {
      const k = r(t.evidence.votes.length);
      const b = Uint8Array.from(t.evidence.votes[k]);
      b[r(b.length)] ^= 1 + r(255);
      t.evidence.votes[k] = b;
    }
    try {
      client.advance(t, big(step.now));
      assert.equal(enc58(client.newest.set.hash), enc58(genuine.set.hash), `mutation ${what} advanced to another set`);
    } catch (e) {
      assert.ok(e instanceof aldb.AldbError, String(e));
      assert.equal(client.epoch, 0n);
    }
  }
});
