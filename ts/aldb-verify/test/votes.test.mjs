// tests/vectors/votes-v1.json: the bank-hash rule, vote transactions, invalid transactions and
// vote evidence (docs/SPEC.md §10), and random mutations of real votes never throwing anything
// but an AldbError.
import { test } from "node:test";
import assert from "node:assert/strict";
import { aldb, b58, hex, loadVectors } from "./helpers.mjs";

const v = loadVectors("votes-v1.json");
const b64 = (s) => aldb.base64Decode(s);

test("votes-v1.json: constants", () => {
  const c = v.constants;
  assert.equal(aldb.base58Encode(aldb.VOTE_PROGRAM_ID), c.vote_program);
  assert.equal(BigInt(aldb.PACKET_DATA_SIZE), BigInt(c.packet_data_size));
  assert.equal(BigInt(aldb.MAX_LOCKOUTS), BigInt(c.max_lockouts));
  assert.equal(BigInt(aldb.TAG_TOWER_SYNC), BigInt(c.tower_sync_tag));
  assert.equal(BigInt(aldb.TAG_TOWER_SYNC_SWITCH), BigInt(c.tower_sync_switch_tag));
  assert.equal(BigInt(aldb.MAX_EVIDENCE_VOTES), BigInt(c.max_evidence_votes));
});

test("votes-v1.json: the bank-hash rule", () => {
  assert.ok(v.bank_hash.length >= 5);
  for (const c of v.bank_hash) {
    const h = b58(c.h);
    const root = b58(c.root);
    const forks = c.hard_forks === null ? null : BigInt(c.hard_forks);
    assert.equal(aldb.base58Encode(aldb.mixRoot(h, root)), c.mixed, c.name);
    assert.equal(aldb.base58Encode(aldb.bankHash(h, root, forks)), c.bank_hash, c.name);
    if (c.accounts_lt_hash !== null) assert.equal(c.accounts_lt_hash.length, 4096, c.name);
  }
});

test("votes-v1.json: transactions decode", () => {
  for (const c of v.transactions) {
    const tx = aldb.parseVoteTransaction(b64(c.bytes));
    assert.equal(aldb.base58Encode(tx.signers[0]), c.fee_payer, c.name);
    assert.deepEqual(tx.signers.map(aldb.base58Encode), c.signers, c.name);
    assert.equal(aldb.base58Encode(tx.voteAccount), c.vote_account, c.name);
    assert.equal(aldb.base58Encode(tx.recentBlockhash), c.recent_blockhash, c.name);
    const t = tx.tower;
    assert.equal(t.switchHash === null ? "tower_sync" : "tower_sync_switch", c.instruction, c.name);
    assert.equal(t.switchHash === null ? null : aldb.base58Encode(t.switchHash), c.switch_hash, c.name);
    assert.equal(t.root, c.root === null ? null : BigInt(c.root), c.name);
    assert.deepEqual(t.lockouts.map((l) => [l.slot, BigInt(l.confirmationCount)]), c.lockouts.map(([s, n]) => [BigInt(s), BigInt(n)]), c.name);
    assert.equal(t.slot, BigInt(c.slot), c.name);
    assert.equal(aldb.base58Encode(t.hash), c.hash, c.name);
    assert.equal(t.timestamp, c.timestamp === null ? null : BigInt(c.timestamp), c.name);
    assert.equal(aldb.base58Encode(t.blockId), c.block_id, c.name);
    assert.equal(aldb.verifyVoteSignatures(tx), c.signatures_valid, c.name);
  }
});

test("votes-v1.json: invalid transactions are rejected with their error", () => {
  assert.ok(v.invalid_transactions.length >= 25);
  for (const c of v.invalid_transactions) {
    assert.throws(() => aldb.parseVoteTransaction(b64(c.bytes)), (e) => e instanceof aldb.AldbError && e.code === c.error, c.name);
  }
});

const sets = Object.fromEntries(Object.entries(v.sets).map(([k, s]) => [k, aldb.validatorSet(s)]));

test("votes-v1.json: evidence", () => {
  assert.ok(v.evidence.length >= 20);
  for (const c of v.evidence) {
    const set = sets[c.set];
    const ev = aldb.voteEvidenceFromJson(c.evidence);
    const expected = aldb.bankHash(ev.h, ev.root, ev.hardForks);
    assert.equal(aldb.base58Encode(expected), c.bank_hash, c.name);
    const t = aldb.tallyVotes(set, ev.slot, expected, ev.votes);
    assert.deepEqual(t.outcomes.map((o) => (o.counted ? "counted" : o.error)), c.outcomes, c.name);
    assert.equal(t.stake, BigInt(c.stake), c.name);
    assert.equal(t.totalStake, BigInt(c.total_stake), c.name);
    if (c.error === null) {
      const got = aldb.verifyAccountByVotes(ev, set);
      assert.equal(got.accepted.stake, BigInt(c.stake), c.name);
      assert.equal(got.account !== null, c.account.present, c.name);
      // The JSON text form gives the same.
      const again = aldb.verifyAccountByVotes(aldb.stringifyJson(c.evidence), set);
      assert.equal(hex(again.accepted.root), hex(ev.root), c.name);
      // Freshness: the time more than 1/3 of the stake vouches for, and the bound against it.
      const vouched = c.vouched_time === null ? null : BigInt(c.vouched_time);
      assert.equal(got.accepted.vouchedTime, vouched, c.name);
      if (vouched === null) {
        assert.throws(() => aldb.checkVoteAge(got.accepted, 0n, (1n << 64n) - 1n), (e) => e.code === "unstamped", c.name);
      } else {
        aldb.checkVoteAge(got.accepted, vouched + 60n, 60);
        aldb.checkVoteAge(got.accepted, vouched - 3600n, 0);
        assert.throws(() => aldb.checkVoteAge(got.accepted, vouched + 61n, 60), (e) => e.code === "too_old" && /cast 61 s ago/.test(e.message), c.name);
      }
    } else {
      const code = c.error === "proof" ? "root_mismatch" : c.error;
      assert.throws(() => aldb.verifyAccountByVotes(ev, set), (e) => e instanceof aldb.AldbError && e.code === code, c.name);
    }
  }
});

test("vote sets and evidence refuse bad input", () => {
  const m = v.sets.main;
  assert.throws(() => aldb.validatorSet([m[0], m[0]]), (e) => e.code === "invalid_argument" && e.message.includes(`vote account ${m[0].voteAccount} is listed twice`));
  assert.throws(() => aldb.validatorSet([{ ...m[0], stake: 0 }]), (e) => e.code === "invalid_argument");
  const doc = structuredClone(v.evidence[0].evidence);
  doc.votes = new Array(aldb.MAX_EVIDENCE_VOTES + 1).fill(doc.votes[0]);
  assert.throws(() => aldb.voteEvidenceFromJson(doc), (e) => e.code === "too_many_votes");
  const zero = { ...v.evidence[0].evidence, hardForks: 0 };
  assert.throws(() => aldb.voteEvidenceFromJson(zero), (e) => e instanceof aldb.AldbError);
});

test("getSlotVotes' voteAccounts: every member with its voter, the largest stakes when too many", () => {
  const main = aldb.voteAccountsParam(sets.main);
  assert.deepEqual(
    [...main].sort(),
    v.sets.main.map((m) => [m.voteAccount, m.authorizedVoter]).sort(),
  );
  const key = (i, tag) => {
    const k = new Uint8Array(32).fill(tag);
    new DataView(k.buffer).setUint32(0, i, true);
    return k;
  };
  const n = aldb.MAX_EVIDENCE_VOTES + 10;
  const big = aldb.validatorSet(Array.from({ length: n }, (_, i) => ({ voteAccount: key(i, 1), authorizedVoter: key(i, 2), stake: BigInt(i) })));
  const param = aldb.voteAccountsParam(big);
  assert.equal(param.length, aldb.MAX_EVIDENCE_VOTES);
  // Stakes 10 .. n-1 are kept; 0 .. 9 left out.
  const kept = new Set(param.map(([a]) => a));
  assert.ok(kept.has(aldb.base58Encode(key(n - 1, 1))) && kept.has(aldb.base58Encode(key(10, 1))));
  assert.ok(!kept.has(aldb.base58Encode(key(9, 1))));
});

test("votes-proof example: --max-age is parsed, and a validator set file with a byte-order mark reads", async () => {
  const ex = await import("../examples/votes-proof.mjs");
  const base = ["--hyades", "http://127.0.0.1:1/", "--validators", "f", "K"];
  assert.equal(ex.parseArgs([...base, "--max-age", "90"]).maxAge, 90n);
  assert.equal(ex.parseArgs(base).maxAge, null);
  assert.throws(() => ex.parseArgs([...base, "--max-age", "-1"]), /seconds/);
  const m = v.sets.main;
  const lines = "\ufeff" + m.map((x) => `${x.voteAccount} ${x.authorizedVoter} ${x.stake}`).join("\r\n") + "\r\n";
  assert.equal(ex.readValidatorSet(lines).totalStake, 300n);
  assert.equal(ex.readValidatorSet("\ufeff" + JSON.stringify(m)).totalStake, 300n);
});

// A fixed-seed generator, so a failure reproduces.
function rng(seed) {
  let s = seed >>> 0;
  return (n) => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s % n;
  };
}

test("mutated votes never throw anything but an AldbError", () => {
  const next = rng(15);
  const originals = v.transactions.map((c) => b64(c.bytes));
  const set = sets.main;
  for (let i = 0; i < 3000; i++) {
    let b = Array.from(originals[next(originals.length)]);
    for (let k = 0, n = 1 + next(4); k < n; k++) {
      const at = next(b.length + 1);
      switch (next(4)) {
        case 0: if (b.length) b[at % b.length] ^= 1 + next(255); break;
        case 1: b.splice(at, 0, next(256)); break;
        case 2: b.splice(at, 1); break;
        default: b = b.slice(0, at);
      }
    }
    const bytes = Uint8Array.from(b);
    try {
      const tx = aldb.parseVoteTransaction(bytes);
      aldb.verifyVoteSignatures(tx);
    } catch (e) {
      assert.ok(e instanceof aldb.AldbError, `mutation ${i}: ${e}`);
    }
    const t = aldb.tallyVotes(set, 312456789n, new Uint8Array(32), [bytes]);
    assert.equal(t.outcomes.length, 1);
  }
});
