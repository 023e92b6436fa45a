#!/usr/bin/env bash
# Root records against a real solana-test-validator 4.2.0: runs the validator with the aldb plugin
# signing records with a freshly generated key and Hyades serving them, waits, then checks the
# records Hyades serves (getRootRecords, which must equal the record log read directly) against
# the validator's own RPC:
#   - the genesis hash in every record equals getGenesisHash, and equals SHA-256 of the ledger's
#     genesis.bin (the claim behind the plugin's `genesis_path`);
#   - for several committed slots, blockhash, blockHeight and parentSlot equal getBlock's;
#   - consecutive records chain (parentSlot and parentRecordHash name the previous record);
#   - every record hash and attestation verifies, signed by the generated key.
# Everything listens on loopback. Ports and the run length come from the environment, so this can
# run beside another validator:
#   RPC_PORT (18899) FAUCET_PORT (19900) GOSSIP_PORT (18001) DYNAMIC_PORTS (18100-18200)
#   METRICS_PORT (19898) HYADES_PORT (18999) HYADES_METRICS_PORT (19899)
#   SECONDS_TO_RUN (30) CHECK_SLOTS (8)
# Usage: scripts/validator-records.sh [WORK_DIR]   (a fresh temporary directory by default)
set -euo pipefail
cd "$(dirname "$0")/.."
RPC_PORT="${RPC_PORT:-18899}"
FAUCET_PORT="${FAUCET_PORT:-19900}"
GOSSIP_PORT="${GOSSIP_PORT:-18001}"
DYNAMIC_PORTS="${DYNAMIC_PORTS:-18100-18200}"
METRICS_PORT="${METRICS_PORT:-19898}"
HYADES_PORT="${HYADES_PORT:-18999}"
HYADES_METRICS_PORT="${HYADES_METRICS_PORT:-19899}"
SECONDS_TO_RUN="${SECONDS_TO_RUN:-30}"
CHECK_SLOTS="${CHECK_SLOTS:-8}"

validator="$(scripts/build-validator.sh)"
cargo build --release --locked -p aldb-plugin --bins --lib --example records-tool -p hyades -p aldb-cli >&2
tool=target/release/examples/records-tool
work="${1:-$(mktemp -d)}"
mkdir -p "$work"
echo "work dir: $work" >&2
pid=""
hpid=""
trap '[[ -n "$hpid" ]] && kill "$hpid" 2>/dev/null; [[ -n "$pid" ]] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true' EXIT

# Run again on the same WORK_DIR to restart on the same ledger: the key is kept, and the records
# made after the restart must continue the chain without signing any slot twice.
if [[ -f "$work/attester.json" ]]; then
  identity="$(python3 -c 'import json,sys; k=json.load(open(sys.argv[1]))[32:]; n=int.from_bytes(bytes(k),"big"); A="123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"; s=""
while n: n,r=divmod(n,58); s=A[r]+s
print("1"*(len(k)-len(bytes(k).lstrip(b"\0")))+s)' "$work/attester.json")"
else
  identity="$(target/release/aldb keygen "$work/attester.json")"
fi
cat > "$work/aldb.json5" <<JSON
{
  libpath: "$PWD/target/release/libaldb_plugin.so",
  snapshot_dir: "$work/snapshots",
  commitment: "confirmed",
  metrics_addr: "127.0.0.1:$METRICS_PORT",
  keypair: "$work/attester.json",
  // solana-test-validator writes the ledger's genesis before it loads plugins.
  genesis_path: "$work/ledger/genesis.bin",
}
JSON
"$validator" --ledger "$work/ledger" --geyser-plugin-config "$work/aldb.json5" \
  --rpc-port "$RPC_PORT" --faucet-port "$FAUCET_PORT" --gossip-port "$GOSSIP_PORT" \
  --dynamic-port-range "$DYNAMIC_PORTS" --bind-address 127.0.0.1 --quiet >"$work/validator.log" 2>&1 &
pid=$!
rpc() { curl -s -X POST "127.0.0.1:$RPC_PORT" -H 'content-type: application/json' -d "$1"; }
for _ in $(seq 60); do
  kill -0 "$pid" 2>/dev/null || { echo "validator exited:" >&2; tail -5 "$work/validator.log" >&2; exit 1; }
  rpc '{"jsonrpc":"2.0","id":1,"method":"getHealth"}' | grep -q '"ok"' && break
  sleep 1
done
for _ in $(seq 60); do ls "$work/snapshots" 2>/dev/null | grep -q snap && break; sleep 1; done
target/release/hyades --dir "$work/snapshots" --addr "127.0.0.1:$HYADES_PORT" \
  --metrics-addr "127.0.0.1:$HYADES_METRICS_PORT" >"$work/hyades.log" 2>&1 &
hpid=$!
sleep "$SECONDS_TO_RUN"
kill -0 "$pid" 2>/dev/null || { echo "validator exited:" >&2; tail -5 "$work/validator.log" >&2; exit 1; }
# The plugin's config check, now that the ledger (genesis.bin) exists.
target/release/aldb-config-check "$work/aldb.json5" >/dev/null
"$tool" dump "$work/snapshots" > "$work/records-log.json"
curl -s -X POST "127.0.0.1:$HYADES_PORT" -H 'content-type: application/json' \
  -d '{"jsonrpc":"2.0","id":1,"method":"getRootRecords","params":[0,5000]}' > "$work/records-hyades.json"
curl -s "127.0.0.1:$METRICS_PORT/metrics" | grep -E '^aldb_(records_|record_errors|block_metadata|slots_without|slots_committed)' || true

python3 - "$work" "$RPC_PORT" "$identity" "$CHECK_SLOTS" <<'PY'
import hashlib, json, sys, urllib.request
work, port, identity, check_slots = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

def rpc(method, params):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}", body, {"content-type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=10))

B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
def b58(b):
    n, out = int.from_bytes(b, "big"), ""
    while n:
        n, r = divmod(n, 58)
        out = B58[r] + out
    return "1" * (len(b) - len(b.lstrip(b"\0"))) + out

fail = []
logged = json.load(open(f"{work}/records-log.json"))
served = json.load(open(f"{work}/records-hyades.json"))
if "result" not in served:
    fail.append(f"getRootRecords: {served.get('error')}")
    records = logged
else:
    records = served["result"]["value"]
    # Hyades may have read the log a moment before the dump: compare the slots both have.
    common = min(len(records), len(logged))
    if common == 0 or records[:common] != logged[:common]:
        fail.append("Hyades' getRootRecords differs from the record log")
    print(f"Hyades serves {len(records)} records; the first {common} equal the record log")
print(f"{len(records)} records, slots {records[0]['slot']}..{records[-1]['slot']}" if records else "no records")
if len(records) < check_slots + 2:
    fail.append(f"only {len(records)} records")

genesis = rpc("getGenesisHash", [])["result"]
file_hash = b58(hashlib.sha256(open(f"{work}/ledger/genesis.bin", "rb").read()).digest())
print(f"getGenesisHash {genesis}, SHA-256(genesis.bin) {file_hash}")
if genesis != file_hash:
    fail.append("genesis.bin does not hash to getGenesisHash")
bad = [r["slot"] for r in records if r["genesisHash"] != genesis]
if bad:
    fail.append(f"records with another genesis hash: {bad[:5]}")

# Signed by the generated key, at confirmed commitment (the record hash and signature were
# verified by `records-tool dump`).
for r in records:
    ids = [a["identity"] for a in r["attestations"]]
    if ids != [identity] or r["commitment"] != "confirmed":
        fail.append(f"slot {r['slot']}: attestations {ids}, commitment {r['commitment']}")
        break

# The chain: each record after the first names the previous one.
unchained = 0
for prev, r in zip(records, records[1:]):
    if r["parentSlot"] != prev["slot"] or r["parentRecordHash"] != prev["recordHash"]:
        unchained += 1
        fail.append(f"slot {r['slot']}: parent {r['parentSlot']} / {r['parentRecordHash']} does not link to slot {prev['slot']}")
print(f"chain: {len(records) - 1 - unchained} of {max(len(records) - 1, 0)} links hold")
with_block = [r for r in records if r["blockhash"] is not None]
with_bank = [r for r in records if r["parentBankHash"] is not None]
print(f"records with block metadata: {len(with_block)}; with the parent bank hash: {len(with_bank)}")

# Several committed slots against getBlock.
checked = 0
for r in with_block[-check_slots:]:
    res = rpc("getBlock", [r["slot"], {"transactionDetails": "none", "rewards": False,
                                       "maxSupportedTransactionVersion": 0, "commitment": "confirmed"}])
    blk = res.get("result")
    if blk is None:
        fail.append(f"slot {r['slot']}: getBlock: {res.get('error')}")
        continue
    got = (r["blockhash"], r["blockHeight"], r["parentSlot"])
    want = (blk["blockhash"], blk["blockHeight"], blk["parentSlot"])
    status = "ok" if got == want else "MISMATCH"
    print(f"slot {r['slot']}: blockhash {r['blockhash']} height {r['blockHeight']} parent {r['parentSlot']}: {status}")
    if got != want:
        fail.append(f"slot {r['slot']}: record {got}, getBlock {want}")
    checked += 1
if checked < check_slots:
    fail.append(f"only {checked} slots checked against getBlock")

for f in fail:
    print("FAIL", f)
print("records check:", "FAILED" if fail else f"passed ({checked} slots against getBlock)")
sys.exit(1 if fail else 0)
PY
