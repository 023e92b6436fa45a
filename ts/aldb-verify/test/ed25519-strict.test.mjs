// SPEC §9.3 against @noble/curves' own ed25519.verify: the places where noble's defaults differ
// from the spec (a small-order R, and a key with a torsion component, which the cofactored
// equation forgives) are refused by checkEd25519Strict, and ordinary signatures agree.
import { test } from "node:test";
import assert from "node:assert/strict";
import { ed25519, ED25519_TORSION_SUBGROUP } from "@noble/curves/ed25519.js";
import { sha512 } from "@noble/hashes/sha2.js";
import { aldb } from "./helpers.mjs";

const Point = ed25519.Point;
const L = aldb.ED25519_L;
const le = (b) => b.reduceRight((x, v) => (x << 8n) | BigInt(v), 0n);
const leBytes = (x) => Uint8Array.from({ length: 32 }, (_, i) => Number((x >> BigInt(8 * i)) & 0xffn));
const challenge = (r, a, m) => le(sha512(new Uint8Array([...r, ...a, ...m]))) % L;
const msg = (i) => new TextEncoder().encode(`aldb strict ed25519 ${i}`);
// Fixed secret scalars: the test is deterministic.
const secret = (i) => (le(sha512(new Uint8Array([0x5e, i]))) % (L - 1n)) + 1n;
// A point of order 8 (ED25519_TORSION_SUBGROUP[1] generates the torsion subgroup).
const T8 = Point.fromHex(ED25519_TORSION_SUBGROUP[1]);

test("ordinary signatures: the strict check and noble agree", () => {
  for (let i = 0; i < 8; i++) {
    const sk = ed25519.utils.randomSecretKey(sha512(new Uint8Array([i])).slice(0, 32));
    const pk = ed25519.getPublicKey(sk);
    const sig = ed25519.sign(msg(i), sk);
    assert.equal(aldb.checkEd25519Strict(pk, msg(i), sig), null);
    assert.equal(ed25519.verify(sig, msg(i), pk, { zip215: false }), true);
    const bad = sig.slice();
    bad[40] ^= 1;
    assert.equal(aldb.checkEd25519Strict(pk, msg(i), bad), "equation");
    assert.equal(ed25519.verify(bad, msg(i), pk, { zip215: false }), false);
  }
});

test("a small-order R: noble's strict verify accepts it, §9.3 rule 3 refuses it", () => {
  const a = secret(1);
  const pk = Point.BASE.multiply(a).toBytes();
  const r = T8.toBytes();
  // With R of small order the cofactored equation reduces to S = k·a.
  const s = (challenge(r, pk, msg(1)) * a) % L;
  const sig = new Uint8Array([...r, ...leBytes(s)]);
  assert.equal(ed25519.verify(sig, msg(1), pk, { zip215: false }), true);
  assert.equal(aldb.checkEd25519Strict(pk, msg(1), sig), "r_small_order");
});

test("a key with a torsion component: the cofactored equation accepts, the cofactorless one refuses", () => {
  let refused = 0;
  for (let i = 0; i < 16; i++) {
    const a = secret(2 + i);
    const r = secret(100 + i);
    const pk = Point.BASE.multiply(a).add(T8).toBytes(); // A' = aB + T: not small order, not in the prime subgroup
    const R = Point.BASE.multiply(r).toBytes();
    const k = challenge(R, pk, msg(i));
    const sig = new Uint8Array([...R, ...leBytes((r + k * a) % L)]);
    assert.equal(ed25519.verify(sig, msg(i), pk, { zip215: false }), true, `case ${i}: noble`);
    // [S]B - [k]A' = R - [k]T, which is R exactly when 8 divides k.
    const expected = k % 8n === 0n ? null : "equation";
    assert.equal(aldb.checkEd25519Strict(pk, msg(i), sig), expected, `case ${i}`);
    if (expected) refused++;
  }
  assert.ok(refused > 8, `${refused} of 16 refused`);
});

test("non-canonical encodings and S >= L are refused in the spec's order", () => {
  const a = secret(40);
  const pk = Point.BASE.multiply(a).toBytes();
  const sig = ed25519.sign(msg(40), leBytes(a)); // any valid shape; S is what matters below
  const sHigh = new Uint8Array([...sig.subarray(0, 32), ...leBytes(le(sig.subarray(32)) + L)]);
  assert.equal(aldb.checkEd25519Strict(pk, msg(40), sHigh), "s_not_reduced");
  // y = p (non-canonical encoding of y = 0) as the identity, then as R.
  const yP = leBytes((1n << 255n) - 19n);
  assert.equal(aldb.checkEd25519Strict(yP, msg(40), sig), "identity_not_a_point");
  assert.equal(aldb.checkEd25519Strict(pk, msg(40), new Uint8Array([...yP, ...sig.subarray(32)])), "r_not_a_point");
  // x = 0 with the sign bit set: y = 1 (the identity) encoded with bit 255 on.
  const negZero = leBytes(1n | (1n << 255n));
  assert.equal(aldb.checkEd25519Strict(negZero, msg(40), sig), "identity_not_a_point");
  // The identity point itself, properly encoded, is small order.
  assert.equal(aldb.checkEd25519Strict(leBytes(1n), msg(40), sig), "identity_small_order");
});
