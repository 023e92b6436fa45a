// The page's logic: fetch a root (or a signed record), an account and its proof from Hyades, and
// verify them here with @aldb/verify. Bundled by esbuild into build/app.js.
import * as aldb from "../src/index.js";

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

async function rpc(url: string, method: string, params: unknown[]): Promise<any> {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }) });
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

async function run(): Promise<void> {
  for (const id of ["root-table", "account-table", "path-table"]) $<HTMLTableElement>(id).innerHTML = "";
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
    const t = await trustedRoot(url, slotText === "" ? null : Number(slotText), mode);
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
$("form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  void run();
});
document.body.dataset.ready = "1";
