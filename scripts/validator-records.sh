#!/usr/bin/env bash
# Root records against a real solana-test-validator 4.2.0: runs the validator with the aldb plugin
# (its default commitment, "confirmed") signing records with a freshly generated key, Hyades
# serving them, and the README's relayer flow: one aldb-relayer at its default level (finalized)
# and one at confirmed, both following Hyades. Then it checks the records Hyades serves
# (getRootRecords, which must equal the record log read directly) against the validator's RPC:
#   - the genesis hash in every record equals getGenesisHash, and equals SHA-256 of the ledger's
#     genesis.bin (the claim behind the plugin's `genesis_path`);
#   - slots get a confirmed record and, once rooted, a finalized one; none has two of a level;
#   - for several committed slots, blockhash, blockHeight and parentSlot equal getBlock's;
#   - consecutive records of each level chain (parentSlot and parentRecordHash name the previous
#     record of that level);
#   - every record hash and attestation verifies, signed by the generated key;
#   - each relayer accepted roots, each equal to the state root of its level's record of the slot,
#     and the finalized ones are at most getSlot(finalized).
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
cargo build --release --locked -p aldb-plugin --bins --lib --example records-tool -p hyades -p aldb-cli -p aldb-relayer >&2
tool=target/release/examples/records-tool
work="${1:-$(mktemp -d)}"
mkdir -p "$work"
echo "work dir: $work" >&2
pid=""
hpid=""
rpids=""
trap 'for p in $rpids $hpid $pid; do kill "$p" 2>/dev/null; done; wait 2>/dev/null || true' EXIT

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
# The README's relayer flow: the relayer's defaults (commitment "finalized"), and one following
# the confirmed records, each with its own cursor and output.
genesis="$(rpc '{"jsonrpc":"2.0","id":1,"method":"getGenesisHash"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["result"])')"
for level in finalized confirmed; do
  mkdir -p "$work/relayer-$level"
  extra=""
  [[ "$level" == confirmed ]] && extra='commitment: "confirmed",'
  cat > "$work/relayer-$level/relayer.json5" <<JSON
{
  endpoints: ["ws://127.0.0.1:$HYADES_PORT/ws"],
  identities: ["$identity"],
  threshold: 1,
  genesis_hash: "$genesis",
  $extra
  cursor_file: "cursor",
  output_file: "roots.txt",
}
JSON
  target/release/aldb-relayer --config "$work/relayer-$level/relayer.json5" >"$work/relayer-$level/stdout" 2>"$work/relayer-$level/log" &
  rpids="$rpids $!"
done
sleep "$SECONDS_TO_RUN"
kill -0 "$pid" 2>/dev/null || { echo "validator exited:" >&2; tail -5 "$work/validator.log" >&2; exit 1; }
# The plugin's config check, now that the ledger (genesis.bin) exists.
target/release/aldb-config-check "$work/aldb.json5" >/dev/null
"$tool" dump "$work/snapshots" > "$work/records-log.json"
curl -s -X POST "127.0.0.1:$HYADES_PORT" -H 'content-type: application/json' \
  -d '{"jsonrpc":"2.0","id":1,"method":"getRootRecords","params":[0,5000]}' > "$work/records-hyades.json"
for level in finalized confirmed; do
  echo "relayer ($level): $(wc -l < "$work/relayer-$level/roots.txt" 2>/dev/null || echo 0) roots accepted; its log:" >&2
  grep -E 'waiting|accepted slot|no cursor|following' "$work/relayer-$level/log" | sed -n '1,4p;$p' >&2 || true
done
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
key = lambda r: (r["slot"], r["commitment"] == "finalized")
if "result" not in served:
    fail.append(f"getRootRecords: {served.get('error')}")
    records = sorted(logged, key=key)
else:
    # Hyades lists a slot's records in slot order, the log in the order they were logged.
    records = served["result"]["value"]
    # Hyades may have read the log a moment before the dump: compare the records both have.
    mine = sorted(logged, key=key)
    have = set(map(key, records)) & set(map(key, mine))
    a, b = [r for r in records if key(r) in have], [r for r in mine if key(r) in have]
    if not have or a != b:
        fail.append("Hyades' getRootRecords differs from the record log")
    print(f"Hyades serves {len(records)} records; the {len(have)} the record log also holds are equal")
levels = {c: [r for r in records if r["commitment"] == c] for c in ("confirmed", "finalized")}
for c, rs in levels.items():
    print(f"{c}: {len(rs)} records" + (f", slots {rs[0]['slot']}..{rs[-1]['slot']}" if rs else ""))
    if len(rs) < check_slots + 2:
        fail.append(f"only {len(rs)} {c} records")
    if len({r["slot"] for r in rs}) != len(rs):
        fail.append(f"two {c} records for one slot")
if not set(r["slot"] for r in levels["finalized"]) <= set(r["slot"] for r in levels["confirmed"]):
    fail.append("a finalized record for a slot with no confirmed record")

genesis = rpc("getGenesisHash", [])["result"]
file_hash = b58(hashlib.sha256(open(f"{work}/ledger/genesis.bin", "rb").read()).digest())
print(f"getGenesisHash {genesis}, SHA-256(genesis.bin) {file_hash}")
if genesis != file_hash:
    fail.append("genesis.bin does not hash to getGenesisHash")
bad = [r["slot"] for r in records if r["genesisHash"] != genesis]
if bad:
    fail.append(f"records with another genesis hash: {bad[:5]}")

# Signed by the generated key (the record hash and signature were verified by `records-tool
# dump`).
for r in records:
    ids = [a["identity"] for a in r["attestations"]]
    if ids != [identity]:
        fail.append(f"slot {r['slot']} {r['commitment']}: attestations {ids}")
        break
# A slot's two records differ in the level and the link only.
conf = {r["slot"]: r for r in levels["confirmed"]}
for f in levels["finalized"]:
    c = conf.get(f["slot"])
    if c and (c["stateRoot"], c["parentSlot"]) != (f["stateRoot"], f["parentSlot"]):
        fail.append(f"slot {f['slot']}: the finalized record's root or parent differs from the confirmed one's")

# Each level's chain: each record after the first names the previous one of its level.
for c, rs in levels.items():
    unchained = 0
    for prev, r in zip(rs, rs[1:]):
        if r["parentSlot"] != prev["slot"] or r["parentRecordHash"] != prev["recordHash"]:
            unchained += 1
            fail.append(f"{c} slot {r['slot']}: parent {r['parentSlot']} / {r['parentRecordHash']} does not link to slot {prev['slot']}")
    print(f"{c} chain: {len(rs) - 1 - unchained} of {max(len(rs) - 1, 0)} links hold")
records = levels["confirmed"]
with_block = [r for r in records if r["blockhash"] is not None]
with_bank = [r for r in records if r["parentBankHash"] is not None]
print(f"confirmed records with block metadata: {len(with_block)}; with the parent bank hash: {len(with_bank)}")

# The relayers' accepted roots: each the state root of its level's record of the slot.
finalized_slot = rpc("getSlot", [{"commitment": "finalized"}])["result"]
for c, rs in levels.items():
    by_slot = {r["slot"]: r["stateRoot"] for r in rs}
    try:
        lines = [l.split() for l in open(f"{work}/relayer-{c}/roots.txt").read().splitlines()]
    except FileNotFoundError:
        lines = []
    wrong = [s for s, root in lines if by_slot.get(int(s)) not in (None, root)]
    print(f"relayer at {c}: {len(lines)} roots accepted" + (f", slots {lines[0][0]}..{lines[-1][0]}" if lines else ""))
    if len(lines) < check_slots:
        fail.append(f"relayer at {c}: only {len(lines)} roots accepted")
    if wrong:
        fail.append(f"relayer at {c}: roots differ from the records at slots {wrong[:5]}")
    if c == "finalized" and lines and int(lines[-1][0]) > finalized_slot:
        fail.append(f"relayer at finalized accepted slot {lines[-1][0]} above getSlot(finalized) {finalized_slot}")

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
