// Fetch an account with its proof from a Hyades service and verify it locally.
//
//   node examples/fetch-proof.mjs [--url http://127.0.0.1:8899] [--slot S] PUBKEY
//
// 1. getStateRoot([slot]) gives the slot's root (in a real light client the root comes from a
//    source you trust, such as a quorum-attested root record, not from the server being checked);
// 2. getAccountProof([pubkey, {slot}]) gives the account (or null) and the proof;
// 3. the proof is verified against the root, and a present account's fields are hashed and
//    compared with the proven value hash (§6.1: the proof binds only what is hashed).
// Exits non-zero if anything does not verify.
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

/** Fetches and verifies; returns { slot, root, pubkey, claim, account }. Throws if anything is off. */
export async function fetchVerifiedAccount(url, pubkeyText, slot = null) {
  const pubkey = aldb.base58DecodeExact(pubkeyText, 32, "pubkey");
  const rootInfo = await rpc(url, "getStateRoot", slot === null ? [] : [slot]);
  const root = aldb.base58DecodeExact(rootInfo.value.root, 32, "root");
  const at = rootInfo.value.slot;
  const answer = (await rpc(url, "getAccountProof", [pubkeyText, { slot: at }])).value;
  if (answer.slot !== at || answer.root !== rootInfo.value.root) {
    throw new Error(`proof is for slot ${answer.slot} root ${answer.root}, asked for slot ${at}`);
  }
  // The proof is checked against the root fetched first, never against the root inside the answer.
  const claim = aldb.verifyProof(aldb.proofFromJson(answer.proof), root, pubkey);
  const account = answer.account;
  if (claim.present) {
    if (account === null) throw new Error("the proof shows the account but the server sent none");
    const [data64, encoding] = account.data;
    if (encoding !== "base64") throw new Error(`unexpected data encoding ${encoding}`);
    const value = aldb.accountValue({
      lamports: BigInt(account.lamports),
      owner: aldb.base58DecodeExact(account.owner, 32, "owner"),
      executable: account.executable,
      data: aldb.base64Decode(data64),
    });
    if (!aldb.bytesEqual(value, claim.value)) throw new Error("the account's fields do not hash to the proven value");
  } else if (account !== null) {
    throw new Error("the proof shows the account absent but the server sent one");
  }
  return { slot: at, root: rootInfo.value.root, pubkey: pubkeyText, claim, account };
}

async function main(argv) {
  let url = "http://127.0.0.1:8899";
  let slot = null;
  const rest = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--url") url = argv[++i];
    else if (argv[i] === "--slot") slot = Number(argv[++i]);
    else rest.push(argv[i]);
  }
  if (rest.length !== 1) {
    console.error("usage: node examples/fetch-proof.mjs [--url URL] [--slot S] PUBKEY");
    return 2;
  }
  const r = await fetchVerifiedAccount(url, rest[0], slot);
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
