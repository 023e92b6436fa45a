// Follow the validator set from one trusted checkpoint through every epoch since, on votes alone
// (docs/SPEC.md §11), and prove an account at the newest slot on the votes of its epoch's set:
// checkpoint set → votes → bank hash → next set → … → bank hash → state root → account.
//
//   node examples/follow-epochs.mjs --hyades URL --checkpoint FILE [--state FILE] [--slot S] [--now UNIX] [PUBKEY]
//
// FILE is a checkpoint (§11.5): {"version": 1, "schedule", "set", "time", "trustingPeriod"}.
// The client's state is kept in --state (default FILE.state), written after every step to a new
// file, synced and renamed over the old one, so a crash leaves the old state or the new and the
// next run catches up from it. Each run asks Hyades for getEpochTransition(N + 1) while it has one
// (or up to --slot's epoch), then getSlotVotes and getAccountProof for the slot (the newest with
// votes without --slot), accepts the root on the votes of that slot's epoch's set and checks the
// account's proof against it. Without PUBKEY only the root is accepted. --now replaces this
// machine's clock (unix seconds) in the freshness checks, to replay recorded answers.
//
// A client that meets misbehaviour (two conflicting bank hashes for one slot, or two next sets,
// each voted for by more than 2/3) freezes: its state keeps the evidence, STATE.misbehaviour.json
// is written for a person to hand on, and every later run refuses until the state is replaced.
//
// Exits 0 when the root (and account) are accepted, 1 when anything is refused, 2 on bad arguments.
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, renameSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import * as aldb from "../dist/index.js";

/** Hyades' answer when it holds no transition to the epoch asked for (§11.4). */
export const NO_TRANSITION = -32015;

export class RpcError extends Error {
  constructor(method, code, message) {
    super(`${method}: JSON-RPC error ${code}: ${message}`);
    this.code = code;
  }
}

export async function rpc(url, method, params) {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: aldb.stringifyJson({ jsonrpc: "2.0", id: 1, method, params }),
    signal: AbortSignal.timeout(30_000),
  });
  const body = aldb.parseJson(await res.text());
  if (body.error) throw new RpcError(method, body.error.code, body.error.message);
  if (!res.ok) throw new Error(`${method}: HTTP ${res.status}`);
  return body.result;
}

/** Writes `text` so that a crash leaves the old file or the new one: a new file, synced, renamed, the directory synced. */
export function writeAtomically(path, text) {
  const tmp = `${path}.tmp`;
  const fd = openSync(tmp, "w");
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
  const dir = openSync(dirname(path), "r");
  try {
    fsyncSync(dir);
  } finally {
    closeSync(dir);
  }
}

/** Where a client keeps its state, and its misbehaviour file. */
export class StateFile {
  constructor(checkpoint, state = null) {
    this.checkpoint = checkpoint;
    this.path = state ?? `${checkpoint}.state`;
    this.misbehaviour = `${this.path}.misbehaviour.json`;
  }

  /** The client from its state file, or new from the checkpoint (its state written at once). */
  load() {
    if (existsSync(this.path)) return aldb.LightClient.fromStateJson(readFileSync(this.path, "utf8"));
    const client = new aldb.LightClient(aldb.checkpointFromJson(readFileSync(this.checkpoint, "utf8")));
    this.save(client);
    return client;
  }

  save(client) {
    writeAtomically(this.path, aldb.stringifyJson(client.toStateJson()));
    if (client.frozen !== null) writeAtomically(this.misbehaviour, aldb.stringifyJson(aldb.misbehaviourToJson(client.frozen)));
  }
}

/** Runs one client operation; on misbehaviour the frozen state and its evidence are saved before the error goes on. */
function guarded(file, client, op) {
  try {
    return op();
  } catch (e) {
    if (e instanceof aldb.AldbError && e.code === "misbehaviour") {
      file.save(client);
      e.message += `; the evidence is in ${file.misbehaviour}, and the client refuses everything until ${file.path} is replaced`;
    }
    throw e;
  }
}

const enc = (b) => aldb.base58Encode(b);

/**
 * Catches the client in `file` up and accepts the root of `slot` (null: the newest slot with
 * votes), and `pubkey`'s account at it when given. Returns the chain it trusts: { checkpoint,
 * followed: [{ epoch, setHash, slot, stake, totalStake }], root: { slot, epoch, bankHash, root,
 * stake, totalStake, voters }, account, epoch, state }.
 */
export async function followAndProve({ hyades, file, pubkey = null, slot = null, now }) {
  const client = file.load();
  if (client.frozen !== null) throw new aldb.AldbError("frozen", `the client in ${file.path} is frozen by misbehaviour (${file.misbehaviour}); replace the state to go on`);
  const checkpoint = client.held[0].proof === null ? client.held[0].set : null;
  const target = slot === null ? null : aldb.epochOf(client.schedule, BigInt(slot));
  const followed = [];
  while (target === null || client.epoch < target) {
    const next = client.epoch + 1n;
    let answer;
    try {
      answer = await rpc(hyades, "getEpochTransition", [next]);
    } catch (e) {
      if (target === null && e instanceof RpcError && e.code === NO_TRANSITION) break;
      throw e;
    }
    const t = aldb.transitionFromJson(answer.value);
    if (t.set.epoch !== next) throw new Error(`asked for the transition to epoch ${next}, got one to epoch ${t.set.epoch}`);
    const r = guarded(file, client, () => client.advance(t, now));
    if (r.ok !== "advanced") break;
    followed.push({ epoch: r.epoch, setHash: enc(r.setHash), slot: t.evidence.slot, stake: r.vouched.stake, totalStake: r.vouched.totalStake });
    file.save(client);
  }

  // Hyades counts the votes of the vote accounts it is given: those of the slot's epoch's set.
  // For the newest slot, which may still be in the epoch before the newest trusted, the newest set
  // is a guess, asked again with the right one when it was wrong.
  const setOf = (e) => client.held.find((h) => h.set.epoch === e)?.set;
  const ask = async (s, set) => {
    const config = { voteAccounts: aldb.voteAccountsParam(set.voters) };
    return (await rpc(hyades, "getSlotVotes", s === null ? [config] : [BigInt(s), config])).value;
  };
  const guess = (slot === null ? undefined : setOf(aldb.epochOf(client.schedule, BigInt(slot)))) ?? client.newest.set;
  let votes = await ask(slot, guess);
  const right = setOf(aldb.epochOf(client.schedule, BigInt(votes.slot)));
  if (slot === null && right !== undefined && right.epoch !== guess.epoch) votes = await ask(votes.slot, right);
  if (slot !== null && BigInt(votes.slot) !== BigInt(slot)) throw new Error(`asked for the votes of slot ${slot}, got slot ${votes.slot}`);
  const evidence = aldb.slotEvidenceFromJson(votes);
  const root = guarded(file, client, () => client.acceptRoot(evidence, now));
  file.save(client);

  let account;
  if (pubkey !== null) {
    const answer = (await rpc(hyades, "getAccountProof", [pubkey, { slot: votes.slot }])).value;
    if (BigInt(answer.slot) !== BigInt(votes.slot)) throw new Error(`asked for the proof at slot ${votes.slot}, got slot ${answer.slot}`);
    // The answer's own `root` is not used: the proof is checked against the root the votes carry.
    account = aldb.verifyAccountProof(pubkey, root.root, answer.proof, answer.account).account;
  }
  return {
    checkpoint: checkpoint === null ? null : { epoch: checkpoint.epoch, setHash: enc(checkpoint.hash), totalStake: checkpoint.totalStake },
    followed,
    root: { slot: root.slot, epoch: root.epoch, bankHash: enc(root.bankHash), root: enc(root.root), stake: root.vouched.stake, totalStake: root.vouched.totalStake, voters: root.vouched.voters },
    account,
    epoch: client.epoch,
    state: file.path,
  };
}

/** The lines the example prints: the chain from the checkpoint to the account. */
export function report(r, pubkey) {
  const out = [];
  if (r.checkpoint !== null) out.push(`checkpoint: the set of epoch ${r.checkpoint.epoch}, hash ${r.checkpoint.setHash} (total stake ${r.checkpoint.totalStake})`);
  for (const f of r.followed) {
    out.push(`followed to epoch ${f.epoch}: set ${f.setHash}, bound at slot ${f.slot} and voted for by stake ${f.stake} of ${f.totalStake} of epoch ${f.epoch - 1n}'s set`);
  }
  const x = r.root;
  out.push(`root trusted: votes of ${x.voters} vote accounts with stake ${x.stake} of ${x.totalStake} (more than 2/3) of epoch ${x.epoch}'s set for bank hash ${x.bankHash} = sha256(h || root || next_set_hash)`);
  out.push(`root ${x.root} at slot ${x.slot}`);
  if (pubkey !== null) {
    if (r.account === null) out.push(`account ${pubkey}: absent`);
    else out.push(`account ${pubkey}: lamports ${r.account.lamports}, owner ${r.account.owner}, executable ${r.account.executable}, data ${r.account.data.length} bytes`);
  }
  out.push(`client: trusts epoch ${r.epoch}, state in ${r.state}`);
  return out;
}

const USAGE = "usage: node examples/follow-epochs.mjs --hyades URL --checkpoint FILE [--state FILE] [--slot S] [--now UNIX] [PUBKEY]";

export function parseArgs(argv) {
  const o = { hyades: null, checkpoint: null, state: null, slot: null, now: null, pubkey: null };
  const value = (i) => {
    if (i + 1 >= argv.length) throw new Error(`${argv[i]} needs a value`);
    return argv[i + 1];
  };
  const num = (name, s) => {
    if (!/^[0-9]+$/.test(s)) throw new Error(`${name} is a number`);
    return BigInt(s);
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--hyades") o.hyades = value(i++);
    else if (a === "--checkpoint") o.checkpoint = value(i++);
    else if (a === "--state") o.state = value(i++);
    else if (a === "--slot") o.slot = num("--slot", value(i++));
    else if (a === "--now") o.now = num("--now", value(i++));
    else if (a.startsWith("--")) throw new Error(`unknown option ${a}`);
    else if (o.pubkey === null) o.pubkey = aldb.base58Encode(aldb.base58DecodeExact(a, 32, "pubkey"));
    else throw new Error("one PUBKEY at most");
  }
  if (o.hyades === null) throw new Error("--hyades URL is required");
  if (o.checkpoint === null) throw new Error("--checkpoint FILE is required");
  return o;
}

export async function main(argv) {
  let o;
  try {
    o = parseArgs(argv);
  } catch (e) {
    console.error(`error: ${e.message}\n${USAGE}`);
    return 2;
  }
  const now = o.now ?? BigInt(Math.floor(Date.now() / 1000));
  const r = await followAndProve({ hyades: o.hyades, file: new StateFile(o.checkpoint, o.state), pubkey: o.pubkey, slot: o.slot, now });
  for (const line of report(r, o.pubkey)) console.log(line);
  return 0;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (e) => {
      console.error(`error: ${e instanceof aldb.AldbError ? `${e.code}: ` : ""}${e.message}`);
      process.exit(1);
    },
  );
}
