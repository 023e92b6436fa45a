// Fetch an account with its proof from a Hyades service and verify it locally, against a root
// you trust.
//
//   node examples/fetch-proof.mjs [--url http://127.0.0.1:8899] [--slot S] TRUST PUBKEY
//
// TRUST is one of
//   --root R                            the state root of slot S (or of the newest slot), known
//                                       from a source you trust;
//   --identities FILE --threshold K     fetch getRootRecord for the slot and take its root once K
//     [--genesis-hash G]                of the validator identities in FILE attested it (§9.4);
//                                       FILE is a JSON array of base58 keys, or one key a line
//                                       (`#` comments); G refuses a record of another cluster;
//   --trust-server                      take the server's own root: checks only that the server
//                                       is consistent, not that it is honest (said on stderr).
// Then getAccountProof([pubkey, {slot}]) gives the account (or null) and the proof; the proof is
// verified against the trusted root and a present account's fields are hashed and compared with
// the proven value (§6.1: the proof binds only what is hashed). Exits non-zero if anything does
// not verify.
import { readFileSync } from "node:fs";
import * as aldb from "../dist/index.js";

async function rpc(url, method, params) {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  });
  if (!res.ok) throw new Error(`${method}: HTTP ${res.status}`);
  // parseJson keeps u64 values (lamports, slots) exact where JSON.parse would round them.
  const body = aldb.parseJson(await res.text());
  if (body.error) throw new Error(`${method}: JSON-RPC error ${body.error.code}: ${body.error.message}`);
  return body.result;
}

/** The base58 keys of an identities file (as `aldb proof` reads it): a JSON array, or one a line. */
export function readIdentities(text) {
  const t = text.trim();
  let list;
  if (t.startsWith("[")) {
    list = JSON.parse(t);
    if (!Array.isArray(list) || list.some((k) => typeof k !== "string")) throw new Error("identities file: not a JSON array of base58 keys");
  } else {
    list = t.split("\n").map((l) => l.replace(/#.*/, "").trim()).filter((l) => l !== "");
  }
  for (const id of list) aldb.base58DecodeExact(String(id), 32, "identity");
  if (list.length === 0) throw new Error("identities file holds no key");
  return list.map(String);
}

/**
 * The trusted root for `slot` (null: newest): `trust` is {root}, {identities, threshold} or
 * {trustServer: true}. Returns { slot, root, source }.
 */
export async function trustedRoot(url, slot, trust) {
  if (trust.identities) {
    const rec = await rpc(url, "getRootRecord", slot === null ? [] : [slot]);
    const a = aldb.attestedRoot(rec.value, { identities: trust.identities, threshold: trust.threshold, genesisHash: trust.genesisHash });
    if (slot !== null && a.slot !== BigInt(slot)) throw new Error(`asked for the record of slot ${slot}, got slot ${a.slot}`);
    return { slot: Number(a.slot), root: a.root, source: `record ${a.recordHash} (${a.record.commitment}) attested by ${a.signers.length} of ${trust.identities.length} identities, ${trust.threshold} required` };
  }
  if (trust.root) {
    aldb.base58DecodeExact(trust.root, 32, "--root");
    if (slot !== null) return { slot, root: trust.root, source: "--root" };
    // Which slot the root belongs to is the server's word; a wrong one just fails verification.
    const info = (await rpc(url, "getStateRoot", [])).value;
    return { slot: info.slot, root: trust.root, source: "--root" };
  }
  if (trust.trustServer) {
    const info = (await rpc(url, "getStateRoot", slot === null ? [] : [slot])).value;
    return { slot: info.slot, root: info.root, source: "the server's own getStateRoot (--trust-server)" };
  }
  throw new Error("no trust source: pass --root R, --identities FILE --threshold K, or --trust-server");
}

/**
 * Fetches and verifies; returns { slot, root, source, pubkey, claim, account } where `account`
 * is the server's JSON account (null when proven absent). Throws if anything is off.
 */
export async function fetchVerifiedAccount(url, pubkeyText, slot, trust) {
  aldb.base58DecodeExact(pubkeyText, 32, "pubkey");
  const t = await trustedRoot(url, slot, trust);
  const answer = (await rpc(url, "getAccountProof", [pubkeyText, { slot: t.slot }])).value;
  if (answer.slot !== t.slot) throw new Error(`proof is for slot ${answer.slot}, asked for slot ${t.slot}`);
  // Checked against the trusted root, never against the root inside the answer.
  const { claim } = aldb.verifyAccountProof(pubkeyText, t.root, answer.proof, answer.account);
  return { ...t, pubkey: pubkeyText, claim, account: answer.account };
}

const USAGE =
  "usage: node examples/fetch-proof.mjs [--url URL] [--slot S] (--root R | --identities FILE --threshold K [--genesis-hash G] | --trust-server) PUBKEY";

export function parseArgs(argv) {
  const o = { url: "http://127.0.0.1:8899", slot: null, trust: {}, rest: [] };
  const value = (i) => {
    if (i + 1 >= argv.length) throw new Error(`${argv[i]} needs a value`);
    return argv[i + 1];
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--url") o.url = value(i++);
    else if (a === "--slot") {
      o.slot = Number(value(i++));
      if (!Number.isSafeInteger(o.slot) || o.slot < 0) throw new Error("--slot is a slot number");
    } else if (a === "--root") o.trust.root = value(i++);
    else if (a === "--identities") o.trust.identities = readIdentities(readFileSync(value(i++), "utf8"));
    else if (a === "--threshold") o.trust.threshold = Number(value(i++));
    else if (a === "--genesis-hash") o.trust.genesisHash = value(i++);
    else if (a === "--trust-server") o.trust.trustServer = true;
    else if (a.startsWith("--")) throw new Error(`unknown option ${a}`);
    else o.rest.push(a);
  }
  const t = o.trust;
  const modes = [t.root !== undefined, t.identities !== undefined, t.trustServer === true].filter(Boolean).length;
  if (modes !== 1) throw new Error("give exactly one of --root, --identities with --threshold, --trust-server");
  if ((t.identities === undefined) !== (t.threshold === undefined)) throw new Error("--identities and --threshold go together");
  if (t.genesisHash !== undefined && t.identities === undefined) throw new Error("--genesis-hash goes with --identities");
  if (t.identities && !(Number.isInteger(t.threshold) && t.threshold >= 1 && t.threshold <= t.identities.length)) {
    throw new Error(`--threshold must be 1..${t.identities.length}`);
  }
  if (o.rest.length !== 1) throw new Error("one PUBKEY expected");
  return o;
}

async function main(argv) {
  let o;
  try {
    o = parseArgs(argv);
  } catch (e) {
    console.error(`error: ${e.message}\n${USAGE}`);
    return 2;
  }
  if (o.trust.trustServer) {
    console.error("warning: --trust-server: verifying against the root the server itself reports; this proves the server is consistent, not that it is honest");
  }
  const r = await fetchVerifiedAccount(o.url, o.rest[0], o.slot, o.trust);
  if (r.claim.present) {
    const a = r.account;
    console.log(`account ${r.pubkey}`);
    console.log(`  lamports   ${a.lamports}`);
    console.log(`  owner      ${a.owner}`);
    console.log(`  executable ${a.executable}`);
    console.log(`  data       ${a.space} bytes`);
    console.log(`  value      ${aldb.base58Encode(r.claim.value)}`);
  } else {
    console.log(`account ${r.pubkey} does not exist (proven absent)`);
  }
  console.log(`verified against root ${r.root} at slot ${r.slot}`);
  console.log(`root trusted from ${r.source}`);
  return 0;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (e) => {
      console.error(`error: ${e.message}`);
      process.exit(1);
    },
  );
}
