// The building blocks against independent references: node:crypto for plain BLAKE2s-256 and
// SHA-512, RFC 7693 and RFC 8032 known answers, and round trips of the text encodings.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { aldb, hex } from "./helpers.mjs";

function pseudoRandomBytes(n, seed) {
  const out = new Uint8Array(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    out[i] = x & 0xff;
  }
  return out;
}

test("BLAKE2s-256 matches node:crypto around every block boundary", () => {
  for (let n = 0; n <= 260; n++) {
    const d = pseudoRandomBytes(n, n + 1);
    assert.equal(hex(aldb.blake2s(d)), createHash("blake2s256").update(d).digest("hex"), `length ${n}`);
  }
});

test("BLAKE2s RFC 7693 Appendix B and the spec's initial states", () => {
  assert.equal(
    hex(aldb.blake2s(new Uint8Array([0x61, 0x62, 0x63]))),
    "508c5e8c327c14e2e1a72ba34eeb452f37458b209ed63a294d999b4c86675982",
  );
  // §8's primitives: salt and personal are applied.
  assert.equal(hex(aldb.keyPath(new Uint8Array(32))), "553cb190f688ed86b029806d7216f34f3affab04b605747e398205d3fcb52086");
  assert.equal(hex(aldb.leafHash(new Uint8Array(32), new Uint8Array(32))), "7b262ebd2ff0ba9580fb9421654917698b07ad779a1a4d77332491a0b3c167e7");
  assert.equal(hex(aldb.branchHash(0, new Uint8Array(32), new Uint8Array(32))), "53945f2071672d7e5113909052844b08c6cdda313ad9f84c822a07c2faf6860d");
  assert.equal(
    hex(aldb.accountValue({ lamports: 1, owner: new Uint8Array(32), executable: false, data: new Uint8Array(0) })),
    "87dc049e9b96c7600a572243eb7c38b2517f390aefb6f47f6470f1c0f9850cc5",
  );
  // Keyed mode and short digests (RFC 7693 parameters beyond what aldb uses).
  assert.equal(aldb.blake2s(new Uint8Array(3), { outLen: 16 }).length, 16);
  assert.notEqual(hex(aldb.blake2s(new Uint8Array(3), { key: new Uint8Array([1]) })), hex(aldb.blake2s(new Uint8Array(3))));
});

test("SHA-512 matches node:crypto around every block boundary", () => {
  for (let n = 0; n <= 300; n++) {
    const d = pseudoRandomBytes(n, 7 * n + 3);
    assert.equal(hex(aldb.sha512(d)), createHash("sha512").update(d).digest("hex"), `length ${n}`);
  }
});

test("Ed25519 RFC 8032 §7.1 tests 1-3 verify; changed ones do not", () => {
  const cases = [
    ["d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
      "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"],
    ["3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
      "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"],
    ["fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
      "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"],
  ];
  for (const [pk, msg, sig] of cases) {
    const [p, m, s] = [pk, msg, sig].map(aldb.hexDecode);
    assert.equal(aldb.checkEd25519Strict(p, m, s), null, pk);
    const m2 = new Uint8Array([...m, 0]);
    assert.equal(aldb.checkEd25519Strict(p, m2, s), "equation");
  }
});

test("base58, base64 and hex round trips and known answers", () => {
  const enc = (s) => new Uint8Array([...s].map((c) => c.charCodeAt(0)));
  assert.equal(aldb.base58Encode(enc("hello world")), "StV1DL6CwTryKyV");
  assert.equal(aldb.base58Encode(new Uint8Array([0, 0, 1])), "112");
  assert.equal(aldb.base58Encode(new Uint8Array(32)), "1".repeat(32));
  assert.throws(() => aldb.base58Decode("0OIl"), { code: "base58" });
  assert.throws(() => aldb.base58DecodeExact("1".repeat(31)), { code: "hash_length" });
  for (let n = 0; n < 70; n++) {
    for (const b of [new Uint8Array(n), new Uint8Array(n).fill(255), pseudoRandomBytes(n, n + 99)]) {
      assert.deepEqual(aldb.base58Decode(aldb.base58Encode(b)), b);
      assert.equal(aldb.base64Encode(b), Buffer.from(b).toString("base64"));
      assert.deepEqual(aldb.base64Decode(aldb.base64Encode(b)), b);
      assert.deepEqual(aldb.hexDecode(hex(b)), b);
    }
  }
  for (const bad of ["A", "AB=", "A===", "AB=C", "AB*=", "AB==AB==", "AR=="]) {
    assert.throws(() => aldb.base64Decode(bad), { name: "AldbError" }, bad);
  }
});

test("parseJson keeps u64 values exact and is strict", () => {
  const v = aldb.parseJson('{"a": 18446744073709551615, "b": [1, -2.5e3, true, null, "x\\u0041"], "c": 9007199254740991}');
  assert.equal(v.a, 18446744073709551615n);
  assert.deepEqual(v.b, [1, -2500, true, null, "xA"]);
  assert.equal(v.c, 9007199254740991);
  for (const bad of ["", "{", "[1,]", '{"a":1,"a":2}', "01", "1 2", '"\\x"', "{'a':1}"]) {
    assert.throws(() => aldb.parseJson(bad), { code: "json_syntax" }, bad);
  }
  assert.equal(aldb.stringifyJson({ a: 2n ** 64n - 1n, b: [1] }), '{"a":18446744073709551615,"b":[1]}');
});
