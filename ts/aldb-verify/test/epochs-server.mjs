// A loopback JSON-RPC server answering getEpochTransition, getSlotVotes and getAccountProof with
// tests/vectors/epochs-v1.json's transitions and slot evidence (docs/SPEC.md §11), for the
// example's tests and the page's. The vectors' roots are random: getAccountProof answers with a
// real account and proof from votes-v1.json, of another root, which a verifier must refuse.
import { createServer } from "node:http";
import { aldb, loadVectors } from "./helpers.mjs";

const votesV = loadVectors("votes-v1.json");

/** What one service answers: transitions by epoch, slot evidence by slot. */
export function answers(s, stepNames) {
  const transitions = new Map();
  const evidence = new Map();
  for (const st of s.steps) {
    if (stepNames !== undefined && !stepNames.includes(st.name)) continue;
    if (st.op === "advance" && st.expect.ok === "advanced") transitions.set(BigInt(st.transition.set.epoch), st.transition);
    if (st.op === "accept_root" && st.expect.ok === "accepted") evidence.set(BigInt(st.evidence.slot), st.evidence);
  }
  return { transitions, evidence };
}

/** A loopback JSON-RPC server answering as `svc` says (replaceable while it runs). */
export async function serve(svc) {
  const state = { svc };
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      const { id, method, params } = aldb.parseJson(body);
      const { transitions, evidence } = state.svc;
      let result;
      let error;
      if (method === "getEpochTransition") {
        const t = transitions.get(BigInt(params[0]));
        if (t === undefined) error = { code: -32015, message: "no transition", data: { epoch: params[0] } };
        else result = { context: { slot: t.evidence.slot }, value: t };
      } else if (method === "getSlotVotes") {
        const slot = params.length === 2 ? BigInt(params[0]) : [...evidence.keys()].reduce((a, b) => (b > a ? b : a));
        const e = evidence.get(slot);
        if (e === undefined) error = { code: -32004, message: "no such slot" };
        else result = { context: { slot }, value: e };
      } else if (method === "getAccountProof") {
        // A real account and proof, of another root than any here.
        const c = votesV.evidence.find((x) => x.name === "all_vote").evidence;
        result = { context: { slot: params[1].slot }, value: { slot: params[1].slot, root: c.root, account: c.account, proof: c.proof } };
      } else error = { code: -32601, message: "method not found" };
      res.setHeader("content-type", "application/json");
      res.end(aldb.stringifyJson(error ? { jsonrpc: "2.0", id, error } : { jsonrpc: "2.0", id, result }));
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return { state, url: `http://127.0.0.1:${server.address().port}/`, close: () => new Promise((r) => server.close(r)) };
}

