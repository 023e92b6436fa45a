// Prove an account through the vote chain (docs/SPEC.md §10): the validators of a set you trust
// voted, with more than 2/3 of its stake, for a bank hash sha256(h || root) that commits to the
// state root the account is proven against. No aldb signer and no server is trusted.
//
//   node examples/votes-proof.mjs --hyades URL --validators FILE [--slot S] [--max-age SECONDS] PUBKEY
//   node examples/votes-proof.mjs --hyades URL --validators FILE --solana URL PUBKEY
//
// FILE is the validator set, as `aldb proof --trust votes` reads it: a JSON array of
// {"voteAccount", "authorizedVoter", "stake"}, or one `VOTE_ACCOUNT AUTHORIZED_VOTER STAKE` a line
// (`#` comments). Hyades' getSlotVotes([S, {voteAccounts}]) gives the slot's `h`, root and the
// votes the set's vote accounts cast for it (one each, however many other votes landed);
// getAccountProof([PUBKEY, {slot: S}]) the account and its proof. Together they are the evidence
// of §10.5, which verifyAccountByVotes checks: the votes against the set, the bank hash computed
// here from `h` and the root (never taken from the server), the proof against the root. Without
// --slot, the newest slot the set voted on; --max-age refuses votes cast more than SECONDS ago by
// this machine's clock (the time vote accounts with more than 1/3 of the stake stamped on them), as
// a server may answer "the newest" with an old slot.
//
// With --solana, the account is first read from that validator's RPC (getAccountInfo at
// `confirmed`), proven at the very slot the RPC answered at, and the RPC's account must equal the
// one the votes vouch for, field by field. The votes for a slot land in the blocks after it, so
// the example waits a little for them.
//
// Exits 0 when the account is accepted (and, with --solana, equal to the RPC's), 1 when anything
// is refused, 2 on bad arguments.
import { readFileSync } from "node:fs";
import * as aldb from "../dist/index.js";

/** Hyades' codes for "not yet": a slot newer than the newest served, or not voted on yet. */
const NOT_YET = [-32004, -32008];

class RpcError extends Error {
  constructor(method, code, message) {
    super(`${method}: JSON-RPC error ${code}: ${message}`);
    this.code = code;
  }
}

async function rpc(url, method, params) {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: aldb.stringifyJson({ jsonrpc: "2.0", id: 1, method, params }),
    signal: AbortSignal.timeout(30_000),
  });
  // parseJson keeps u64 values (lamports, slots, stakes) exact where JSON.parse would round them.
  const body = aldb.parseJson(await res.text());
  if (body.error) throw new RpcError(method, body.error.code, body.error.message);
  if (!res.ok) throw new Error(`${method}: HTTP ${res.status}`);
  return body.result;
}

/** Calls `fn` until it stops failing with a "not yet" code, for up to `ms` milliseconds. */
async function untilReady(fn, ms) {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      return await fn();
    } catch (e) {
      if (!(e instanceof RpcError) || !NOT_YET.includes(e.code) || Date.now() > deadline) throw e;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

/** A validator set file (JSON, or one `VOTE_ACCOUNT AUTHORIZED_VOTER STAKE` a line). */
export function readValidatorSet(text) {
  const t = text.trim();
  if (t.startsWith("[")) return aldb.validatorSet(aldb.parseJson(t));
  const members = [];
  t.split("\n").forEach((raw, i) => {
    const line = raw.replace(/#.*/, "").trim();
    if (line === "") return;
    const f = line.split(/\s+/);
    if (f.length !== 3 || !/^[0-9]+$/.test(f[2])) throw new Error(`line ${i + 1}: expected VOTE_ACCOUNT AUTHORIZED_VOTER STAKE`);
    members.push({ voteAccount: f[0], authorizedVoter: f[1], stake: BigInt(f[2]) });
  });
  if (members.length === 0) throw new Error("the validator set file lists no validators");
  return aldb.validatorSet(members);
}

/**
 * The evidence of §10.5 for `pubkey` at `slot` (null: the newest slot with votes), from Hyades:
 * the votes of `set`'s vote accounts on the slot joined with the account's proof at the same slot.
 */
export async function fetchEvidence(hyades, pubkey, slot, set) {
  const config = { voteAccounts: aldb.voteAccountsParam(set) };
  const votes = (await rpc(hyades, "getSlotVotes", slot === null ? [config] : [slot, config])).value;
  if (slot !== null && BigInt(votes.slot) !== BigInt(slot)) throw new Error(`asked for the votes of slot ${slot}, got slot ${votes.slot}`);
  const answer = (await rpc(hyades, "getAccountProof", [pubkey, { slot: votes.slot }])).value;
  if (BigInt(answer.slot) !== BigInt(votes.slot)) throw new Error(`asked for the proof at slot ${votes.slot}, got slot ${answer.slot}`);
  // The answer's own `root` is not used: the proof is checked against the root the votes carry.
  return {
    version: votes.version,
    slot: votes.slot,
    h: votes.h,
    root: votes.root,
    hardForks: votes.hardForks,
    votes: votes.votes,
    pubkey,
    account: answer.account,
    proof: answer.proof,
  };
}

/**
 * Fetches and verifies; returns { slot, root, stake, totalStake, voters, bankHash, vouchedTime,
 * account }. With `maxAge` (seconds), votes cast longer ago by this machine's clock are refused.
 */
export async function proveByVotes(hyades, set, pubkey, slot, maxAge = null) {
  aldb.base58DecodeExact(pubkey, 32, "pubkey");
  const evidence = await fetchEvidence(hyades, pubkey, slot, set);
  const r = aldb.verifyAccountByVotes(evidence, set);
  if (maxAge !== null) aldb.checkVoteAge(r.accepted, Math.floor(Date.now() / 1000), maxAge);
  return {
    slot: r.accepted.slot,
    root: aldb.base58Encode(r.accepted.root),
    bankHash: aldb.base58Encode(r.accepted.bankHash),
    stake: r.accepted.stake,
    totalStake: r.accepted.totalStake,
    voters: r.accepted.voters,
    vouchedTime: r.accepted.vouchedTime,
    account: r.account,
  };
}

const sameBytes = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

/**
 * Reads `pubkey` from a validator's RPC at `confirmed` and proves it through the vote chain at the
 * slot the RPC answered at; throws unless the two agree. Returns proveByVotes' answer.
 */
export async function proveRpcAccount(solana, hyades, set, pubkey, maxAge = null) {
  const info = await rpc(solana, "getAccountInfo", [pubkey, { encoding: "base64", commitment: "confirmed" }]);
  const slot = info.context.slot;
  const r = await untilReady(() => proveByVotes(hyades, set, pubkey, slot, maxAge), 20_000);
  const rpcAccount = info.value;
  if (rpcAccount === null || r.account === null) {
    if (rpcAccount !== r.account) {
      throw new Error(`slot ${slot}: the RPC says ${rpcAccount === null ? "absent" : "present"}, the votes vouch for ${r.account === null ? "absent" : "present"}`);
    }
    return r;
  }
  const a = r.account;
  const data = aldb.decodeAccount(rpcAccount).data;
  const diffs = [];
  if (BigInt(rpcAccount.lamports) !== a.lamports) diffs.push(`lamports ${rpcAccount.lamports} != ${a.lamports}`);
  if (rpcAccount.owner !== a.owner) diffs.push(`owner ${rpcAccount.owner} != ${a.owner}`);
  if (rpcAccount.executable !== a.executable) diffs.push(`executable ${rpcAccount.executable} != ${a.executable}`);
  if (!sameBytes(data, a.data)) diffs.push(`data (${data.length} bytes) != (${a.data.length} bytes)`);
  if (diffs.length > 0) throw new Error(`slot ${slot}: the RPC's account differs from the one the votes vouch for: ${diffs.join("; ")}`);
  return r;
}

const USAGE = "usage: node examples/votes-proof.mjs --hyades URL --validators FILE [--slot S | --solana URL] [--max-age SECONDS] PUBKEY";

export function parseArgs(argv) {
  const o = { hyades: null, solana: null, validators: null, slot: null, maxAge: null, rest: [] };
  const value = (i) => {
    if (i + 1 >= argv.length) throw new Error(`${argv[i]} needs a value`);
    return argv[i + 1];
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--hyades") o.hyades = value(i++);
    else if (a === "--solana") o.solana = value(i++);
    else if (a === "--validators") o.validators = value(i++);
    else if (a === "--slot") {
      const s = value(i++);
      if (!/^[0-9]+$/.test(s)) throw new Error("--slot is a slot number");
      o.slot = BigInt(s);
    } else if (a === "--max-age") {
      const s = value(i++);
      if (!/^[0-9]+$/.test(s)) throw new Error("--max-age is a number of seconds");
      o.maxAge = BigInt(s);
    } else if (a.startsWith("--")) throw new Error(`unknown option ${a}`);
    else o.rest.push(a);
  }
  if (o.hyades === null) throw new Error("--hyades URL is required");
  if (o.validators === null) throw new Error("--validators FILE is required");
  if (o.slot !== null && o.solana !== null) throw new Error("--slot and --solana exclude each other: with --solana the RPC's slot is proven");
  if (o.rest.length !== 1) throw new Error("one PUBKEY expected");
  return o;
}

async function main(argv) {
  let o;
  let set;
  try {
    o = parseArgs(argv);
    set = readValidatorSet(readFileSync(o.validators, "utf8"));
  } catch (e) {
    console.error(`error: ${e.message}\n${USAGE}`);
    return 2;
  }
  const pubkey = o.rest[0];
  const r =
    o.solana === null ? await proveByVotes(o.hyades, set, pubkey, o.slot, o.maxAge) : await proveRpcAccount(o.solana, o.hyades, set, pubkey, o.maxAge);
  if (r.account === null) {
    console.log(`account ${pubkey}: absent`);
  } else {
    console.log(`account ${pubkey}`);
    console.log(`  lamports: ${r.account.lamports}`);
    console.log(`  owner: ${r.account.owner}`);
    console.log(`  executable: ${r.account.executable}`);
    console.log(`  data: ${r.account.data.length} bytes`);
  }
  console.log(`root trusted: votes of ${r.voters} vote accounts with stake ${r.stake} of ${r.totalStake} (more than 2/3) for bank hash ${r.bankHash} = sha256(h || root)`);
  if (r.vouchedTime !== null) console.log(`voted at unix time ${r.vouchedTime} or later (the timestamps of vote accounts holding more than 1/3 of the stake)`);
  if (o.solana !== null) console.log(`equal to the account ${o.solana} returned at slot ${r.slot}`);
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
