#!/usr/bin/env bash
# The patched solana-test-validator (validator-patches/, built by scripts/build-patched-validator.sh)
# with aldb_state_root_in_bank_hash active at genesis, the stock aldb plugin and the block-metadata
# probe loaded, and Hyades beside it. After SECONDS it checks that:
#   - slots are produced and rooted;
#   - the stock plugin (built against the stock interface) runs: it commits slots and Hyades serves
#     its roots, and each served root equals the in-process module's root for that slot;
#   - the probe got end-of-startup and block metadata V0_0_5 for every bank, each with an aldb root,
#     and bank_hash == sha256(h || aldb_root) for every one;
#   - the validator's own votes (TowerSync in the blocks) carry those bank hashes.
# Everything listens on loopback. Ports as scripts/validator-smoke.sh (RPC_PORT, FAUCET_PORT,
# GOSSIP_PORT, DYNAMIC_PORTS, METRICS_PORT, HYADES_PORT, HYADES_METRICS_PORT).
# Usage: scripts/validator-patched.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
RPC_PORT="${RPC_PORT:-8899}"
FAUCET_PORT="${FAUCET_PORT:-9900}"
GOSSIP_PORT="${GOSSIP_PORT:-10100}"
DYNAMIC_PORTS="${DYNAMIC_PORTS:-10000-10100}"
METRICS_PORT="${METRICS_PORT:-9898}"
HYADES_PORT="${HYADES_PORT:-8999}"
HYADES_METRICS_PORT="${HYADES_METRICS_PORT:-9899}"
bin="$(scripts/build-patched-validator.sh | tail -n1)"
cargo build --release --locked -p aldb-plugin -p hyades >&2
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true' EXIT
cat >"$work/aldb.json5" <<JSON
{
  libpath: "$PWD/target/release/libaldb_plugin.so",
  snapshot_dir: "$work/snapshots",
  commitment: "confirmed",
  metrics_addr: "127.0.0.1:$METRICS_PORT",
}
JSON
cat >"$work/probe.json" <<JSON
{"libpath": "$bin/libaldb_block_metadata_probe.so", "block_metadata_version": 5}
JSON
"$bin/solana-test-validator" --aldb-state-root --ledger "$work/ledger" \
  --geyser-plugin-config "$work/aldb.json5" --geyser-plugin-config "$work/probe.json" \
  --rpc-port "$RPC_PORT" --faucet-port "$FAUCET_PORT" --bind-address 127.0.0.1 \
  --dynamic-port-range "$DYNAMIC_PORTS" --gossip-port "$GOSSIP_PORT" \
  --log >"$work/validator.log" 2>&1 &
for _ in $(seq 90); do [[ -d "$work/snapshots" ]] && ls "$work/snapshots" | grep -q snap && break; sleep 1; done
target/release/hyades --dir "$work/snapshots" --addr "127.0.0.1:$HYADES_PORT" \
  --metrics-addr "127.0.0.1:$HYADES_METRICS_PORT" >"$work/hyades.log" 2>&1 &
sleep "$secs"
echo "work dir: $work"
grep -m3 'aldb:' "$work/validator.log" || true
curl -s "127.0.0.1:$METRICS_PORT/metrics" | grep -E '^aldb_(slots_committed|callback_(errors|panics))' || true
python3 - "$work" "$RPC_PORT" "$HYADES_PORT" <<'PY'
import hashlib, json, sys, urllib.request

work, rpc_port, hyades_port = sys.argv[1], sys.argv[2], sys.argv[3]
B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

def b58decode(s):
    n = 0
    for c in s:
        n = n * 58 + B58.index(c)
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return b"\0" * (len(s) - len(s.lstrip("1"))) + raw

def call(port, method, params):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}", body, {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)

def varint(b, i):
    v = shift = 0
    while True:
        x = b[i]; i += 1
        v |= (x & 0x7F) << shift; shift += 7
        if x < 0x80:
            return v, i

def tower_sync(data):
    """(voted slot, bank hash) of a TowerSync / TowerSyncSwitch vote instruction, else None."""
    kind = int.from_bytes(data[:4], "little")
    if kind not in (14, 15):
        return None
    root = int.from_bytes(data[4:12], "little")
    n, i = varint(data, 12)
    slot = 0 if root == 2**64 - 1 else root
    for _ in range(n):
        off, i = varint(data, i)
        i += 1  # confirmation count
        slot += off
    return slot, data[i:i + 32].hex()

fail = []
banks, rooted, end_of_startup, older = {}, set(), False, 0
with open(f"{work}/probe.json.jsonl") as f:
    for line in f:
        e = json.loads(line)
        if e.get("end_of_startup"):
            end_of_startup = True
        elif e.get("status") == "rooted":
            rooted.add(e["slot"])
        elif "bank_hash" in e:
            banks[e["slot"]] = e
        elif e.get("version") == "older":
            older += 1
print(f"probe: {len(banks)} banks with V0_0_5, {len(rooted)} rooted statuses, end_of_startup={end_of_startup}, older versions={older}")
if not end_of_startup:
    fail.append("no notify_end_of_startup on a start from genesis")
if len(rooted) < 10:
    fail.append(f"only {len(rooted)} rooted slots")
if older:
    fail.append(f"{older} block metadata of an older version reached the probe")
mixed = 0
for s, e in sorted(banks.items()):
    if e["aldb_root"] is None:
        fail.append(f"slot {s}: no aldb root"); continue
    want = hashlib.sha256(bytes.fromhex(e["h"]) + bytes.fromhex(e["aldb_root"])).hexdigest()
    if want != e["bank_hash"]:
        fail.append(f"slot {s}: bank hash {e['bank_hash']} != sha256(h || root) {want}")
    else:
        mixed += 1
print(f"bank_hash == sha256(h || aldb_root): {mixed} of {len(banks)} banks")

# Votes: the validator's TowerSync votes in the blocks of the run carry the bank hash of the slot
# they vote for.
finalized = call(rpc_port, "getSlot", [{"commitment": "finalized"}])["result"]
print(f"finalized slot: {finalized}")
votes = agree = 0
for s in range(max(1, finalized - 40), finalized + 1):
    r = call(rpc_port, "getBlock", [s, {"encoding": "json", "transactionDetails": "full", "rewards": False,
                                         "maxSupportedTransactionVersion": 0, "commitment": "finalized"}])
    block = r.get("result")
    if not block:
        continue
    for tx in block["transactions"]:
        msg = tx["transaction"]["message"]
        keys = msg["accountKeys"]
        for ix in msg["instructions"]:
            if keys[ix["programIdIndex"]] != "Vote111111111111111111111111111111111111111":
                continue
            v = tower_sync(b58decode(ix["data"]))
            if v is None or v[0] not in banks:
                continue
            votes += 1
            if v[1] == banks[v[0]]["bank_hash"]:
                agree += 1
            else:
                fail.append(f"vote for slot {v[0]} carries {v[1]}, the bank hash is {banks[v[0]]['bank_hash']}")
print(f"votes decoded: {votes}, carrying the mixed bank hash: {agree}")
if votes == 0:
    fail.append("no TowerSync vote found in the finalized blocks")

# The stock plugin's tree and the in-process module agree on the roots Hyades serves.
newest = call(hyades_port, "getStateRoot", [])["result"]["value"]["slot"]
roots = call(hyades_port, "getStateRoots", [max(0, newest - 50), newest])["result"]["value"]
same = 0
for r in roots:
    e = banks.get(r["slot"])
    if e is None or e["aldb_root"] is None:
        continue
    if b58decode(r["root"]).rjust(32, b"\0").hex() == e["aldb_root"]:
        same += 1
    else:
        fail.append(f"slot {r['slot']}: the plugin's root {r['root']} differs from the bank's")
print(f"plugin roots served by Hyades equal to the in-process roots: {same} of {len(roots)}")
if same == 0:
    fail.append("no plugin root could be compared")
for f in fail[:20]:
    print("FAIL", f)
sys.exit(1 if fail else 0)
PY
