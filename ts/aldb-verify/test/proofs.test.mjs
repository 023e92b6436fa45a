// tests/vectors/v1.json: every primitive, every case's root from its ops, every proof's claim in
// both forms, every invalid proof; then the decoders' strictness rules of §7.
import { test } from "node:test";
import assert from "node:assert/strict";
import { aldb, b58, hex, loadVectors, naiveRoot, sortedItems } from "./helpers.mjs";

const v = loadVectors("v1.json");
const u8 = (b64) => aldb.base64Decode(b64);

test("v1.json primitives", () => {
  assert.equal(v.version, 1);
  const seen = new Map();
  for (const p of v.primitives) {
    const i = p.input;
    let got;
    switch (p.function) {
      case "key_path": got = aldb.keyPath(b58(i.pubkey)); break;
      case "account_value":
        got = aldb.accountValue({ lamports: i.lamports, owner: b58(i.owner), executable: i.executable, data: u8(i.data) });
        break;
      case "leaf": got = aldb.leafHash(b58(i.path), b58(i.value)); break;
      case "branch": got = aldb.branchHash(i.depth, b58(i.left), b58(i.right)); break;
      default: assert.fail(`unknown primitive ${p.function}`);
    }
    assert.equal(aldb.base58Encode(got), p.output, `${p.function} ${JSON.stringify(aldb.stringifyJson(i))}`);
    seen.set(p.function, (seen.get(p.function) ?? 0) + 1);
  }
  assert.deepEqual([...seen.keys()].sort(), ["account_value", "branch", "key_path", "leaf"]);
  // lamports = 2^64 - 1 arrived as an exact bigint.
  assert.ok(v.primitives.some((p) => p.input.lamports === 2n ** 64n - 1n));
});

test("v1.json cases: roots from replayed ops, proofs in both forms", () => {
  let proofs = 0;
  for (const c of v.cases) {
    const state = new Map();
    for (const op of c.ops) {
      const pk = b58(op.pubkey);
      if (op.lamports === 0) state.delete(op.pubkey);
      else {
        const value = aldb.accountValue({ lamports: op.lamports, owner: b58(op.owner), executable: op.executable, data: u8(op.data) });
        state.set(op.pubkey, { path: aldb.keyPath(pk), value });
      }
    }
    assert.equal(state.size, c.leaves, `${c.name}: leaves`);
    const root = b58(c.root);
    assert.equal(aldb.base58Encode(naiveRoot(sortedItems(state))), c.root, `${c.name}: root`);

    for (const cp of c.proofs) {
      const what = `${c.name} / ${cp.pubkey}`;
      const pk = b58(cp.pubkey);
      assert.equal(aldb.base58Encode(aldb.keyPath(pk)), cp.path, `${what}: path`);
      const fromJson = aldb.proofFromJson(cp.proof);
      const fromWire = aldb.decodeProofWire(aldb.hexDecode(cp.wire));
      assert.deepEqual(fromWire, fromJson, `${what}: wire and JSON decode to the same proof`);
      assert.equal(hex(aldb.encodeProofWire(fromJson)), cp.wire, `${what}: wire encoding`);
      assert.deepEqual(aldb.proofToJson(fromWire), cp.proof, `${what}: JSON encoding`);
      assert.deepEqual(aldb.proofFromJson(JSON.stringify(cp.proof)), fromJson, `${what}: JSON text`);

      const claim = aldb.verifyProof(fromWire, root, pk);
      const expected = cp.present ? { present: true, value: b58(cp.value) } : { present: false };
      assert.deepEqual(claim, expected, `${what}: claim`);
      const replayed = state.get(cp.pubkey);
      assert.deepEqual(claim, replayed ? { present: true, value: replayed.value } : { present: false }, `${what}: claim vs ops`);
      assert.deepEqual(aldb.verifyProofPath(fromJson, root, b58(cp.path)), claim);

      const wrong = root.slice();
      wrong[31] ^= 1;
      assert.throws(() => aldb.verifyProof(fromWire, wrong, pk), { code: "root_mismatch" }, `${what}: wrong root`);
      proofs++;
    }
  }
  assert.ok(proofs > 50, `${proofs} proofs`);
});

test("v1.json invalid proofs are rejected with the rule they break", () => {
  assert.ok(v.invalid_proofs.length > 0);
  for (const inv of v.invalid_proofs) {
    const p = aldb.proofFromJson(inv.proof);
    assert.deepEqual(aldb.decodeProofWire(aldb.hexDecode(inv.wire)), p, `${inv.name}: wire`);
    assert.throws(() => aldb.verifyProof(p, b58(inv.root), b58(inv.pubkey)), { code: inv.error }, inv.name);
  }
});

test("wire decoder: exactly one encoding per proof (§7.2)", () => {
  const good = aldb.hexDecode(v.cases.find((c) => c.name === "worked_example").proofs[1].wire);
  assert.equal(good.length, 134);
  aldb.decodeProofWire(good);
  for (let n = 0; n < good.length; n++) {
    assert.throws(() => aldb.decodeProofWire(good.subarray(0, n)), { code: "truncated" }, `prefix ${n}`);
  }
  assert.throws(() => aldb.decodeProofWire(new Uint8Array([...good, 0])), { code: "trailing_bytes" });
  assert.throws(() => aldb.decodeProofWire(new Uint8Array([2, ...good.subarray(1)])), { code: "version" });
  assert.throws(() => aldb.decodeProofWire(new Uint8Array([1, 2, 0, 0])), { code: "terminal_kind" });
  aldb.decodeProofWire(new Uint8Array([1, 0, 0, 0]));
  assert.throws(() => aldb.decodeProofWire(new Uint8Array([1, 0, 0, 0, 0])), { code: "trailing_bytes" });
  assert.throws(() => aldb.decodeProofWire(new Uint8Array([1, 0, 1, 1])), { code: "too_many_siblings" });
  assert.throws(() => aldb.decodeProofWire(new Uint8Array([1, 0, 1, 0])), { code: "truncated" });
});

test("JSON decoder rejects what §7.1 says it must", () => {
  const good = v.cases.find((c) => c.name === "worked_example").proofs[1].proof;
  const with_ = (f) => {
    const p = JSON.parse(JSON.stringify(good));
    f(p);
    return p;
  };
  const cases = [
    [with_((p) => (p.version = 2)), "version"],
    [with_((p) => delete p.version), "missing_field"],
    [with_((p) => delete p.siblings), "missing_field"],
    [with_((p) => (p.extra = 1)), "unknown_field"],
    [with_((p) => (p.siblings[0].depth = 256)), "depth_range"],
    [with_((p) => (p.siblings[0].depth = -1)), "depth_range"],
    [with_((p) => (p.siblings[0].depth = 1.5)), "depth_range"],
    [with_((p) => (p.siblings[0].depth = "1")), "bad_type"],
    [with_((p) => (p.siblings[0].hash += "2")), "hash_length"],
    [with_((p) => (p.terminal.path = "1".repeat(31))), "hash_length"],
    [with_((p) => (p.siblings[0].hash = "0" + p.siblings[0].hash.slice(1))), "base58"],
    [with_((p) => delete p.siblings[0].hash), "missing_field"],
    [with_((p) => (p.terminal.kind = "node")), "terminal_kind"],
    [with_((p) => delete p.terminal.value), "missing_field"],
    [with_((p) => (p.terminal = { kind: "empty", path: p.terminal.path })), "unknown_field"],
    [[], "bad_type"],
  ];
  for (const [doc, code] of cases) assert.throws(() => aldb.proofFromJson(doc), { code }, JSON.stringify(doc));
  // Version is checked first: a later version is reported as such even if its shape differs.
  assert.throws(() => aldb.proofFromJson({ version: 2, other: true }), { code: "version" });
});
