// The page's logic: fetch a root (or a signed record), an account and its proof from Hyades, and
// verify them here with @aldb/verify. Bundled by esbuild into build/app.js.
import * as aldb from "../src/index.js";

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

async function rpc(url: string, method: string, params: unknown[]): Promise<any> {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: aldb.stringifyJson({ jsonrpc: "2.0", id: 1, method, params }) });
  if (!res.ok) throw new Error(`${method}: HTTP ${res.status}`);
  // parseJson keeps u64 values (lamports) exact where JSON.parse would round them.
  const body = aldb.parseJson(await res.text()) as any;
  if (body.error) throw new Error(`${method}: JSON-RPC error ${body.error.code}: ${body.error.message}`);
  return body.result;
}

function row(table: HTMLTableElement, cells: string[], header = false): void {
  const tr = table.insertRow();
  for (const c of cells) {
    const td = document.createElement(header ? "th" : "td");
    td.textContent = c;
    if (!header) td.className = "mono";
    tr.appendChild(td);
  }
}

function verdict(kind: "verified" | "refused" | "error", text: string): void {
  const v = $<HTMLDivElement>("verdict");
  v.dataset.verdict = kind;
  v.textContent = text;
  v.hidden = false;
}

interface Trusted {
  slot: number;
  root: string;
  source: string;
}

async function trustedRoot(url: string, slot: number | null, mode: string): Promise<Trusted> {
  if (mode === "identities") {
    const identities = $<HTMLTextAreaElement>("identities").value.split(/\s+/).filter((s) => s !== "");
    const threshold = Number($<HTMLInputElement>("threshold").value);
    const rec = await rpc(url, "getRootRecord", slot === null ? [] : [slot]);
    const a = aldb.attestedRoot(rec.value, { identities, threshold });
    return { slot: Number(a.slot), root: a.root, source: `record ${a.recordHash} (${a.record.commitment}), signed by ${a.signers.join(", ")}` };
  }
  if (mode === "root") {
    const root = $<HTMLInputElement>("root").value.trim();
    aldb.base58DecodeExact(root, 32, "trusted root");
    const at = slot ?? (await rpc(url, "getStateRoot", [])).value.slot;
    return { slot: at, root, source: "entered by you" };
  }
  const info = (await rpc(url, "getStateRoot", slot === null ? [] : [slot])).value;
  return { slot: info.slot, root: info.root, source: "the server's own getStateRoot (not independent)" };
}

/**
 * The vote chain of §11: follows the validator set from the pasted checkpoint through each
 * epoch's transition (getEpochTransition) to the slot's epoch, accepts the slot's root on the
 * votes of its epoch's set (getSlotVotes), and shows each link. The client lives for one check:
 * nothing is stored, so every check follows the chain from the checkpoint again.
 */
async function votesRoot(url: string, slot: number | null): Promise<Trusted> {
  const text = $<HTMLTextAreaElement>("checkpoint").value.trim();
  if (text === "") throw new aldb.AldbError("missing_field", "paste a checkpoint or choose its file");
  const client = new aldb.LightClient(aldb.checkpointFromJson(text));
  const now = BigInt(Math.floor(Date.now() / 1000));
  const ct = $<HTMLTableElement>("chain-table");
  const enc = aldb.base58Encode;
  row(ct, ["link", "epoch", "what", "stake that voted"], true);
  const cp = client.newest.set;
  row(ct, ["checkpoint", String(cp.epoch), `set ${enc(cp.hash)} (${cp.members.length} validators)`, `total ${cp.totalStake}`]);
  $("result").hidden = false;
  const target = slot === null ? null : aldb.epochOf(client.schedule, BigInt(slot));
  while (target === null || client.epoch < target) {
    const next = client.epoch + 1n;
    let answer;
    try {
      answer = await rpc(url, "getEpochTransition", [next]);
    } catch (e) {
      if (target === null && /error -32015:/.test((e as Error).message)) break;
      throw e;
    }
    const t = aldb.transitionFromJson(answer.value);
    if (t.set.epoch !== next) throw new Error(`asked for the transition to epoch ${next}, got one to epoch ${t.set.epoch}`);
    const r = client.advance(t, now);
    if (r.ok !== "advanced") break;
    row(ct, ["followed", String(r.epoch), `set ${enc(r.setHash)}, bound at slot ${t.evidence.slot}`, `${r.vouched.stake} of ${r.vouched.totalStake} of epoch ${r.epoch - 1n}'s set`]);
  }
  // The service counts the votes of the vote accounts it is given: the slot's epoch's set (for
  // the newest slot, the newest set first, asked again when the slot is of the epoch before).
  const setOf = (e: bigint) => client.held.find((h) => h.set.epoch === e)?.set;
  const ask = async (s: bigint | number | null, set: aldb.EpochSet) => {
    const config = { voteAccounts: aldb.voteAccountsParam(set.voters) };
    return (await rpc(url, "getSlotVotes", s === null ? [config] : [s, config])).value;
  };
  const guess = (slot === null ? undefined : setOf(aldb.epochOf(client.schedule, BigInt(slot)))) ?? client.newest.set;
  let votes = await ask(slot, guess);
  const right = setOf(aldb.epochOf(client.schedule, BigInt(votes.slot)));
  if (slot === null && right !== undefined && right.epoch !== guess.epoch) votes = await ask(votes.slot, right);
  if (slot !== null && BigInt(votes.slot) !== BigInt(slot)) throw new Error(`asked for the votes of slot ${slot}, got slot ${votes.slot}`);
  const root = client.acceptRoot(aldb.slotEvidenceFromJson(votes), now);
  const v = root.vouched;
  row(ct, ["bank hash", String(root.epoch), `slot ${root.slot}: ${enc(root.bankHash)} = sha256(h || root || next_set_hash)`, `${v.stake} of ${v.totalStake} (${v.voters} vote accounts)`]);
  row(ct, ["root", String(root.epoch), enc(root.root), ""]);
  return { slot: Number(root.slot), root: enc(root.root), source: `the votes of more than 2/3 of epoch ${root.epoch}'s set, followed from the checkpoint (above)` };
}

async function run(): Promise<void> {
  for (const id of ["root-table", "account-table", "path-table", "chain-table"]) $<HTMLTableElement>(id).innerHTML = "";
  $("result").hidden = true;
  verdict("error", "working…");
  $("verdict").dataset.verdict = "pending";
  const url = $<HTMLInputElement>("url").value.trim();
  const pubkey = $<HTMLInputElement>("pubkey").value.trim();
  const slotText = $<HTMLInputElement>("slot").value.trim();
  const mode = (document.querySelector("input[name=trust]:checked") as HTMLInputElement).value;
  try {
    aldb.base58DecodeExact(pubkey, 32, "pubkey");
    if (slotText !== "" && !/^[0-9]{1,15}$/.test(slotText)) throw new Error("the slot is a number");
    const slot = slotText === "" ? null : Number(slotText);
    $("chain").hidden = mode !== "votes";
    const t = mode === "votes" ? await votesRoot(url, slot) : await trustedRoot(url, slot, mode);
    const rt = $<HTMLTableElement>("root-table");
    row(rt, ["slot", String(t.slot)]);
    row(rt, ["root", t.root]);
    row(rt, ["trusted from", t.source]);
    const answer = (await rpc(url, "getAccountProof", [pubkey, { slot: t.slot }])).value;
    const proof = aldb.proofFromJson(answer.proof);
    const path = aldb.keyPath(aldb.base58DecodeExact(pubkey));
    const pt = $<HTMLTableElement>("path-table");
    row(pt, ["depth", "key bit", "sibling"], true);
    for (const s of proof.siblings) row(pt, [String(s.depth), String(aldb.bit(path, s.depth)), aldb.base58Encode(s.hash)]);
    const term = proof.terminal;
    row(pt, ["terminal", term.kind, term.kind === "leaf" ? `path ${aldb.base58Encode(term.path)} value ${aldb.base58Encode(term.value)}` : "empty tree"]);
    const at = $<HTMLTableElement>("account-table");
    const a = answer.account;
    if (a === null) row(at, ["account", "none sent"]);
    else {
      row(at, ["lamports", String(a.lamports)]);
      row(at, ["owner", String(a.owner)]);
      row(at, ["executable", String(a.executable)]);
      row(at, ["data", `${a.space} bytes`]);
    }
    $("result").hidden = false;
    try {
      const { claim } = aldb.verifyAccountProof(pubkey, t.root, answer.proof, a);
      verdict("verified", claim.present ? `Verified: the account exists at slot ${t.slot} with these fields.` : `Verified: the account does not exist at slot ${t.slot}.`);
    } catch (e) {
      verdict("refused", `Refused: ${(e as Error).message}`);
    }
  } catch (e) {
    verdict(e instanceof aldb.AldbError ? "refused" : "error", `${e instanceof aldb.AldbError ? "Refused" : "Error"}: ${(e as Error).message}`);
  }
}

function syncMode(): void {
  const mode = (document.querySelector("input[name=trust]:checked") as HTMLInputElement).value;
  $("trust-identities").hidden = mode !== "identities";
  $("trust-root").hidden = mode !== "root";
  $("trust-votes").hidden = mode !== "votes";
  $("warning").hidden = mode !== "server";
}

// Fields can be prefilled from the query string (?url=..&pubkey=..&slot=..&trust=..).
const q = new URLSearchParams(location.search);
$<HTMLInputElement>("url").value = q.get("url") ?? new URL("rpc", location.href).href;
for (const k of ["pubkey", "slot", "root", "threshold"]) if (q.has(k)) $<HTMLInputElement>(k).value = q.get(k) ?? "";
if (q.has("identities")) $<HTMLTextAreaElement>("identities").value = (q.get("identities") ?? "").split(",").join("\n");
if (q.has("trust")) (document.querySelector(`input[name=trust][value=${CSS.escape(q.get("trust") ?? "")}]`) as HTMLInputElement | null)?.click();
for (const r of document.querySelectorAll("input[name=trust]")) r.addEventListener("change", syncMode);
syncMode();
$("checkpoint-file").addEventListener("change", async () => {
  const f = $<HTMLInputElement>("checkpoint-file").files?.[0];
  if (f) $<HTMLTextAreaElement>("checkpoint").value = await f.text();
});
$("form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  void run();
});
document.body.dataset.ready = "1";
