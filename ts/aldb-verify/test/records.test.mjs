// tests/vectors/records-v1.json: records (fields, encoding, hash, JSON form), the chain rule,
// invalid encodings, signers' attestations, invalid attestations and quorum cases (§9).
import { test } from "node:test";
import assert from "node:assert/strict";
import { aldb, b58, hex, loadVectors } from "./helpers.mjs";

const v = loadVectors("records-v1.json");
const byName = new Map(v.records.map((r) => [r.name, r]));
const recordBytes = (name) => aldb.hexDecode(byName.get(name).bytes);
const nullable = (flag, flags, x) => (flags & flag ? x : null);
const big = (x) => BigInt(x);

test("records-v1.json: records decode to their fields, re-encode, and hash", () => {
  assert.equal(v.version, 1);
  assert.equal(v.attestation_prefix, hex(aldb.ATTEST_PREFIX));
  assert.ok(v.records.length >= 8);
  for (const r of v.records) {
    const bytes = aldb.hexDecode(r.bytes);
    const f = r.fields;
    const rec = aldb.decodeRecord(bytes);
    const expected = {
      genesisHash: b58(f.genesis_hash),
      slot: big(f.slot),
      parentSlot: nullable(aldb.FLAG_PARENT, f.flags, big(f.parent_slot)),
      commitment: f.commitment,
      stateRoot: b58(f.state_root),
      parentRecordHash: nullable(aldb.FLAG_CHAINED, f.flags, b58(f.parent_record_hash)),
      blockhash: nullable(aldb.FLAG_BLOCK, f.flags, b58(f.blockhash)),
      blockHeight: nullable(aldb.FLAG_BLOCK, f.flags, big(f.block_height)),
      parentBankHash: nullable(aldb.FLAG_BANK_HASH, f.flags, b58(f.parent_bank_hash)),
    };
    // The slot's own bank hash: in the vector's fields, and the decoded record, only when set.
    assert.equal("bank_hash" in f, (f.flags & aldb.FLAG_SLOT_BANK_HASH) !== 0, `${r.name}: bank_hash present`);
    if ("bank_hash" in f) expected.bankHash = b58(f.bank_hash);
    assert.equal(bytes.length, "bank_hash" in f ? aldb.RECORD_LEN_WITH_BANK_HASH : aldb.RECORD_LEN, `${r.name}: length`);
    assert.deepEqual(rec, expected, `${r.name}: fields`);
    assert.equal(aldb.recordFlags(rec), f.flags, `${r.name}: flags`);
    assert.equal(f.version, 1);
    // Unset fields are zero in the vectors' raw fields.
    if (!(f.flags & aldb.FLAG_PARENT)) assert.equal(big(f.parent_slot), 0n);
    if (!(f.flags & aldb.FLAG_BLOCK)) assert.equal(big(f.block_height), 0n);
    assert.equal(hex(aldb.encodeRecord(rec)), r.bytes, `${r.name}: encoding`);
    assert.equal(aldb.base58Encode(aldb.recordHash(bytes)), r.record_hash, `${r.name}: record hash`);

    // The §9.5 JSON form, both ways.
    const atts = r.json.attestations.map((a) => ({ identity: b58(a.identity), signature: b58(a.signature, 64) }));
    assert.deepEqual(aldb.recordToJson(bytes, atts), r.json, `${r.name}: JSON form`);
    const back = aldb.recordFromJson(aldb.stringifyJson(r.json));
    assert.deepEqual(back.record, rec);
    assert.equal(aldb.base58Encode(back.recordHash), r.record_hash);
    for (const a of back.attestations) assert.ok(aldb.verifyAttestation(back.recordHash, a), `${r.name}: JSON attestation`);
  }
  assert.ok(v.records.some((r) => r.fields.slot === 2n ** 64n - 1n), "a slot at u64 max, exact");
  assert.ok(v.records.some((r) => r.fields.flags & aldb.FLAG_SLOT_BANK_HASH), "records with the slot's bank hash");
  assert.ok(v.records.some((r) => "bankHash" in r.json) && v.records.some((r) => !("bankHash" in r.json)));
});

test("records-v1.json: the slot's bank hash is part of the record and its hash", () => {
  const rec = aldb.decodeRecord(recordBytes("slot_bank_hash"));
  const other = aldb.decodeRecord(recordBytes("slot_bank_hash_other"));
  assert.deepEqual({ ...rec, bankHash: null }, { ...other, bankHash: null }, "the two differ in the bank hash only");
  assert.notEqual(hex(aldb.recordHash(aldb.encodeRecord(rec))), hex(aldb.recordHash(aldb.encodeRecord(other))));
  // Dropping it gives the 187-byte record of the same fields, whichever way it is dropped.
  const without = aldb.encodeRecord({ ...rec, bankHash: null });
  assert.equal(without.length, aldb.RECORD_LEN);
  const { bankHash: _dropped, ...rest } = rec;
  assert.deepEqual(aldb.encodeRecord(rest), without);
  assert.deepEqual(aldb.decodeRecord(without), rest);
  assert.throws(() => aldb.encodeRecord({ ...rec, bankHash: new Uint8Array(31) }), { code: "invalid_argument" });
  // Its JSON form shows it; the reader takes it from the bytes.
  const json = aldb.recordToJson(recordBytes("slot_bank_hash"));
  assert.equal(json.bankHash, aldb.base58Encode(rec.bankHash));
  assert.deepEqual(aldb.recordFromJson(json).record.bankHash, rec.bankHash);
  assert.throws(() => aldb.recordHash(recordBytes("slot_bank_hash").subarray(0, 218)), { code: "length" });
});

test("records-v1.json: the JSON form's recordHash must match its bytes", () => {
  const r = v.records[1];
  const doc = { ...r.json, recordHash: v.records[2].record_hash };
  assert.throws(() => aldb.recordFromJson(doc), { code: "record_hash_mismatch" });
  assert.throws(() => aldb.recordFromJson({ ...r.json, version: 2 }), { code: "version" });
  const short = aldb.base64Encode(aldb.hexDecode(r.bytes).subarray(0, 186));
  assert.throws(() => aldb.recordFromJson({ ...r.json, bytes: short }), { code: "length" });
});

test("records-v1.json: chain rule (§9.4)", () => {
  assert.ok(v.chain.some((c) => c.extends) && v.chain.some((c) => !c.extends));
  for (const c of v.chain) {
    const child = aldb.decodeRecord(recordBytes(c.child));
    const parent = aldb.decodeRecord(recordBytes(c.parent));
    assert.equal(aldb.extendsRecord(child, parent), c.extends, `${c.child} extends ${c.parent}: ${c.description}`);
  }
});

test("records-v1.json: invalid encodings are rejected with the rule they break", () => {
  const rules = new Set();
  for (const inv of v.invalid_records) {
    assert.throws(() => aldb.decodeRecord(aldb.hexDecode(inv.bytes)), { code: inv.error }, inv.name);
    rules.add(inv.error);
  }
  assert.deepEqual(
    [...rules].sort(),
    ["commitment", "flag_without_parent", "length", "parent_slot_not_below_slot", "unknown_flag", "unset_field_not_zero", "version"],
  );
});

test("records-v1.json: every signer's attestation verifies, and only over its own record", () => {
  const ids = new Set(v.signers.map((s) => s.identity));
  assert.ok(v.signers.length >= 3);
  for (const a of v.attestations) {
    assert.ok(ids.has(a.identity));
    assert.equal(a.identity, v.signers[a.signer].identity);
    const h = aldb.recordHash(recordBytes(a.record));
    assert.equal(hex(aldb.attestationMessage(h)), a.message, `${a.record}/${a.signer}: message`);
    const att = { identity: b58(a.identity), signature: b58(a.signature, 64) };
    assert.equal(aldb.checkAttestation(h, att), null, `${a.record}/${a.signer}`);
    const other = aldb.recordHash(recordBytes(a.record === "genesis" ? "startup" : "genesis"));
    assert.equal(aldb.checkAttestation(other, att), "equation");
  }
});

test("records-v1.json: invalid attestations are rejected with the rule they break", () => {
  const seen = new Set();
  for (const inv of v.invalid_attestations) {
    const h = aldb.recordHash(recordBytes(inv.record));
    assert.equal(hex(aldb.attestationMessage(h)), inv.message, `${inv.name}: message`);
    const att = { identity: b58(inv.identity), signature: b58(inv.signature, 64) };
    assert.equal(aldb.checkAttestation(h, att), inv.error, inv.name);
    assert.equal(aldb.verifyAttestation(h, att), false, inv.name);
    seen.add(inv.rule);
  }
  assert.deepEqual([...seen].sort(), [1, 2, 3, 4]);
});

test("records-v1.json: quorum cases (§9.4)", () => {
  for (const q of v.quorum) {
    const h = aldb.recordHash(recordBytes(q.record));
    const rule = { identities: q.identities.map((i) => b58(i)), threshold: q.threshold };
    const atts = q.attestations.map((a) => ({ identity: b58(a.identity), signature: b58(a.signature, 64) }));
    const got = aldb.checkQuorum(rule, h, atts);
    assert.equal(got.attested, q.accepted, `${q.name}: accepted`);
    assert.equal(got.validIdentities.length, q.valid_identities, `${q.name}: valid identities`);
  }
  const one = [b58(v.signers[0].identity)];
  const h = new Uint8Array(32);
  assert.throws(() => aldb.checkQuorum({ identities: one, threshold: 0 }, h, []), { code: "invalid_argument" });
  assert.throws(() => aldb.checkQuorum({ identities: one, threshold: 2 }, h, []), { code: "invalid_argument" });
  assert.throws(() => aldb.checkQuorum({ identities: [...one, ...one], threshold: 1 }, h, []), { code: "invalid_argument" });
});

test("encodeRecord refuses records no decoder would accept", () => {
  const rec = aldb.decodeRecord(recordBytes("chain_2"));
  assert.throws(() => aldb.encodeRecord({ ...rec, parentSlot: rec.slot }), { code: "invalid_argument" });
  assert.throws(() => aldb.encodeRecord({ ...rec, parentSlot: null }), { code: "invalid_argument" }); // CHAINED without PARENT
  assert.throws(() => aldb.encodeRecord({ ...rec, blockHeight: null }), { code: "invalid_argument" });
  assert.throws(() => aldb.encodeRecord({ ...rec, slot: 2n ** 64n }), { code: "invalid_argument" });
});
