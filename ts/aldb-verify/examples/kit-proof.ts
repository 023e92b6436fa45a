// Read an account from a Solana RPC with @solana/kit, and prove what that RPC said through Hyades
// with @aldb/verify: the account's fields must hash to the value a proof binds under a state root
// that a quorum of validator identities attested for the same slot.
//
//   npm run build && npm run build:examples
//   node build/examples/kit-proof.js --solana http://127.0.0.1:8899 --hyades http://127.0.0.1:8900 \
//     --identities identities.json --threshold 1 [--genesis-hash G] [--commitment finalized] ADDRESS
//
// Needs a validator running the aldb plugin (its Solana RPC, and Hyades over the plugin's
// snapshot directory): the record for the slot the Solana RPC answered at must exist.
// scripts/validator-records.sh runs it against a real solana-test-validator.
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
  getRootRecord(
    slot: number | bigint,
    config?: { commitment: Commitment },
  ): { context: { slot: bigint | number }; value: JsonValue };
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
  /** The level of the record whose root the proof was checked against. */
  commitment: "confirmed" | "finalized";
  /** The rule's identities whose attestations on that record verified. */
  signers: string[];
  present: boolean;
  lamports: bigint | null;
}

/**
 * Hyades' errors for a slot newer than its newest record, and for no record yet (of the level
 * asked for), from hyades/README.md: the record may still come.
 */
const NOT_YET_RECORDED = [-32004, -32008];

/**
 * Reads `addr` from the Solana RPC at `commitment`, then proves that answer through Hyades at the
 * slot the Solana RPC answered at, against the root of that slot's record at `commitment` (or
 * stronger) that `threshold` of `identities` signed, naming `genesisHash`'s cluster when given.
 */
export async function proveSolanaAccount(
  solanaUrl: string,
  hyadesUrl: string,
  addr: Address,
  rule: { identities: string[]; threshold: number; genesisHash?: string },
  commitment: "confirmed" | "finalized" = "confirmed",
): Promise<ProvenAccount> {
  const solana = createSolanaRpc(solanaUrl);
  const hyades = createHyadesRpc(hyadesUrl);
  const { context, value } = await solana.getAccountInfo(addr, { encoding: "base64", commitment }).send();
  const slot = context.slot;
  // The plugin signs the record once it sees the slot reach the level, which can be a moment
  // after the Solana RPC answers at it: wait for that record, and for nothing else.
  let record: JsonValue | undefined;
  for (let attempt = 0; record === undefined; attempt++) {
    try {
      // Without a level Hyades answers the slot's strongest record: confirmed, or finalized.
      const level = commitment === "finalized" ? hyades.getRootRecord(slot, { commitment }) : hyades.getRootRecord(slot);
      record = (await level.send()).value;
    } catch (e) {
      if (!NOT_YET_RECORDED.includes((e as { rpcCode?: number }).rpcCode ?? 0) || attempt >= 40) throw e;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  const trusted = attestedRoot(record, rule);
  // The quorum vouches for the record's own slot and level: they must be the ones asked for.
  if (trusted.slot !== slot) throw new Error(`Hyades answered with the record of slot ${trusted.slot}, not ${slot}`);
  if (commitment === "finalized" && trusted.record.commitment !== "finalized") {
    throw new Error(`the record of slot ${slot} is ${trusted.record.commitment}, not finalized`);
  }
  const answer = (await hyades.getAccountProof(addr, { slot }).send()).value;
  // The account checked is the Solana RPC's, not Hyades': the proof vouches for what kit read.
  const { claim } = verifyAccountProof(addr, trusted.root, answer.proof, value);
  return {
    address: addr,
    slot,
    root: trusted.root,
    commitment: trusted.record.commitment,
    signers: trusted.signers,
    present: claim.present,
    lamports: value === null ? null : BigInt(value.lamports),
  };
}

/** The value of the flag `name`; given twice, the last one counts. */
function arg(argv: string[], name: string): string | undefined {
  const i = argv.lastIndexOf(name);
  if (i < 0) return undefined;
  if (i + 1 >= argv.length) throw new Error(`${name} needs a value`);
  return argv[i + 1];
}

function required(argv: string[], name: string): string {
  const v = arg(argv, name);
  if (v === undefined) throw new Error(`${name} is required`);
  return v;
}

async function main(argv: string[]): Promise<number> {
  const text = readFileSync(required(argv, "--identities"), "utf8").trim();
  // A JSON array of base58 keys, or one key a line with `#` comments (as `aldb proof` reads them).
  const identities: string[] = text.startsWith("[")
    ? JSON.parse(text)
    : text
        .split("\n")
        .map((l) => l.replace(/#.*/, "").trim())
        .filter((l) => l !== "");
  const threshold = Number(required(argv, "--threshold"));
  if (!Number.isInteger(threshold) || threshold < 1) throw new Error("--threshold must be a positive integer");
  const commitment = arg(argv, "--commitment") ?? "confirmed";
  if (commitment !== "confirmed" && commitment !== "finalized") throw new Error("--commitment is confirmed or finalized");
  const genesisHash = arg(argv, "--genesis-hash");
  const addr = address(argv[argv.length - 1]);
  const r = await proveSolanaAccount(
    required(argv, "--solana"),
    required(argv, "--hyades"),
    addr,
    { identities, threshold, genesisHash },
    commitment,
  );
  const what = r.present ? `${r.lamports} lamports` : "absent";
  console.log(
    `${r.address}: ${what} at slot ${r.slot}, proven under root ${r.root} of the ${r.commitment} record ` +
      `signed by ${r.signers.length} of ${identities.length} identities (${threshold} needed): ${r.signers.join(", ")}`,
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
