// Read an account from a Solana RPC with @solana/kit, and prove what that RPC said through Hyades
// with @aldb/verify: the account's fields must hash to the value a proof binds under a state root
// that a quorum of validator identities attested for the same slot.
//
//   npm run build:examples
//   node build/examples/kit-proof.js --solana http://127.0.0.1:8899 --hyades http://127.0.0.1:8900 \
//     --identities identities.json --threshold 1 ADDRESS
//
// Needs a validator running the aldb plugin (its Solana RPC, and Hyades over the plugin's
// snapshot directory): the record for the slot the Solana RPC answered at must exist.
import { readFileSync } from "node:fs";
import {
  address,
  createJsonRpcApi,
  createRpc,
  createSolanaRpc,
  type Address,
  type Commitment,
  type RpcResponse,
  type RpcTransport,
} from "@solana/kit";
import { attestedRoot, parseJson, stringifyJson, verifyAccountProof, type AccountJson, type JsonValue } from "@aldb/verify";

/** The Hyades methods this example calls (hyades/README.md), answers as JSON values. */
type HyadesApi = {
  getRootRecord(slot?: number | bigint): { context: { slot: bigint | number }; value: JsonValue };
  getAccountProof(
    pubkey: Address,
    config: { slot: number | bigint },
  ): { context: { slot: bigint | number }; value: { slot: number | bigint; root: string; account: AccountJson | null; proof: JsonValue } };
};

/**
 * A kit RPC client for Hyades. Its transport posts the JSON-RPC message and reads the answer with
 * parseJson, which keeps u64 values (lamports, slots) exact, and writes kit's bigint slots with
 * stringifyJson; kit's default transport would apply JSON.parse to methods it does not know as
 * Solana's.
 */
export function createHyadesRpc(url: string) {
  const transport: RpcTransport = async <T>({ payload, signal }: { payload: unknown; signal?: AbortSignal }) => {
    const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: stringifyJson(payload), signal });
    if (!res.ok) throw new Error(`Hyades: HTTP ${res.status}`);
    return parseJson(await res.text()) as RpcResponse<T>;
  };
  // JSON-RPC's envelope: the answer is `result`; an `error` becomes an exception carrying its code.
  const responseTransformer = <T>(response: unknown): T => {
    const r = response as { result?: T; error?: { code: number; message: string } };
    if (r.error) throw Object.assign(new Error(`Hyades error ${r.error.code}: ${r.error.message}`), { rpcCode: r.error.code });
    return r.result as T;
  };
  return createRpc({ api: createJsonRpcApi<HyadesApi>({ responseTransformer }), transport });
}

export interface ProvenAccount {
  address: Address;
  slot: bigint;
  root: string;
  present: boolean;
  lamports: bigint | null;
}

/**
 * Reads `addr` from the Solana RPC at `commitment`, then proves that answer through Hyades at the
 * slot the Solana RPC answered at, against the root of a record `threshold` of `identities` signed.
 */
export async function proveSolanaAccount(
  solanaUrl: string,
  hyadesUrl: string,
  addr: Address,
  rule: { identities: string[]; threshold: number },
  commitment: Commitment = "confirmed",
): Promise<ProvenAccount> {
  const solana = createSolanaRpc(solanaUrl);
  const hyades = createHyadesRpc(hyadesUrl);
  const { context, value } = await solana.getAccountInfo(addr, { encoding: "base64", commitment }).send();
  const slot = context.slot;
  // The plugin writes the record when the slot reaches the commitment level; wait a little for it.
  let record: JsonValue | undefined;
  for (let attempt = 0; record === undefined; attempt++) {
    try {
      record = (await hyades.getRootRecord(slot).send()).value;
    } catch (e) {
      if (attempt >= 20) throw e;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  const trusted = attestedRoot(record, rule);
  const answer = (await hyades.getAccountProof(addr, { slot }).send()).value;
  // The account checked is the Solana RPC's, not Hyades': the proof vouches for what kit read.
  const { claim } = verifyAccountProof(addr, trusted.root, answer.proof, value);
  return { address: addr, slot, root: trusted.root, present: claim.present, lamports: value === null ? null : BigInt(value.lamports) };
}

function arg(argv: string[], name: string): string {
  const i = argv.indexOf(name);
  if (i < 0 || i + 1 >= argv.length) throw new Error(`${name} is required`);
  return argv[i + 1];
}

async function main(argv: string[]): Promise<number> {
  const text = readFileSync(arg(argv, "--identities"), "utf8").trim();
  const identities: string[] = text.startsWith("[") ? JSON.parse(text) : text.split(/\s+/).filter((l) => l !== "" && !l.startsWith("#"));
  const threshold = Number(arg(argv, "--threshold"));
  const addr = address(argv[argv.length - 1]);
  const r = await proveSolanaAccount(arg(argv, "--solana"), arg(argv, "--hyades"), addr, { identities, threshold });
  console.log(
    r.present
      ? `${r.address}: ${r.lamports} lamports at slot ${r.slot}, proven under attested root ${r.root}`
      : `${r.address}: absent at slot ${r.slot}, proven under attested root ${r.root}`,
  );
  return 0;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (e: unknown) => {
      console.error(`error: ${e instanceof Error ? e.message : String(e)}`);
      process.exit(1);
    },
  );
}
