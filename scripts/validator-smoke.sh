#!/usr/bin/env bash
# A real solana-test-validator 4.2.0 with the aldb plugin, and Hyades beside it: waits for a few
# committed slots, then proves accounts the run never touched (genesis programs, a sysvar, a
# never-created pubkey) through Hyades and compares each proven account with the validator's own
# RPC. Everything listens on loopback only. Usage: scripts/validator-smoke.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-40}"
validator="$(scripts/build-validator.sh)"
cargo build --release --locked -p aldb-plugin -p hyades -p aldb-cli >&2
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true' EXIT
cat > "$work/aldb.json5" <<JSON
{
  libpath: "$PWD/target/release/libaldb_plugin.so",
  snapshot_dir: "$work/snapshots",
  commitment: "confirmed",
  metrics_addr: "127.0.0.1:9898",
}
JSON
target/release/aldb-config-check "$work/aldb.json5" >/dev/null
"$validator" --ledger "$work/ledger" --geyser-plugin-config "$work/aldb.json5" \
  --rpc-port 8899 --faucet-port 9900 --bind-address 127.0.0.1 --dynamic-port-range 10000-10100 --gossip-port 10100 \
  --quiet >"$work/validator.log" 2>&1 &
for _ in $(seq 60); do [[ -d "$work/snapshots" ]] && ls "$work/snapshots" | grep -q snap && break; sleep 1; done
target/release/hyades --dir "$work/snapshots" --addr 127.0.0.1:8999 --metrics-addr 127.0.0.1:9899 >"$work/hyades.log" 2>&1 &
sleep "$secs"
rpc() { curl -s -X POST 127.0.0.1:"$1" -H 'content-type: application/json' -d "$2"; }
echo "validator slot: $(rpc 8899 '{"jsonrpc":"2.0","id":1,"method":"getSlot","params":[{"commitment":"confirmed"}]}')"
echo "hyades root:    $(rpc 8999 '{"jsonrpc":"2.0","id":1,"method":"getStateRoot","params":[]}')"
fail=0
# Genesis programs and accounts no transaction touches, plus one that never existed.
for pk in 11111111111111111111111111111111 TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA \
          SysvarRent111111111111111111111111111111111 Stake11111111111111111111111111111111111111 \
          4vJ9JU1bJJE96FWSJKvHsmmFADCg4gpZQff4P3bkLKi; do
  out="$(target/release/aldb proof --url http://127.0.0.1:8999 "$pk" 2>&1)" || { echo "FAIL proof $pk: $out"; fail=1; continue; }
  echo "$out" | head -4
  # The proven account must equal what the validator's own RPC returns, field by field.
  info="$(rpc 8899 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"getAccountInfo\",\"params\":[\"$pk\",{\"encoding\":\"base64\",\"commitment\":\"confirmed\"}]}")"
  proof="$(rpc 8999 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"getAccountProof\",\"params\":[\"$pk\"]}")"
  if ! python3 - "$info" "$proof" <<'PY'
import json, sys
rpc = json.loads(sys.argv[1])["result"]["value"]
ours = json.loads(sys.argv[2])["result"]["value"]["account"]
if rpc is None or ours is None:
    ok = rpc is None and ours is None
else:
    keys = ("lamports", "owner", "executable", "data")
    ok = all(rpc[k] == ours[k] for k in keys)
    if not ok:
        print({k: (rpc[k], ours[k]) for k in keys if rpc[k] != ours[k]})
sys.exit(0 if ok else 1)
PY
  then echo "FAIL $pk: validator RPC and proven account differ"; fail=1; else echo "  matches the validator's RPC"; fi
done
curl -s 127.0.0.1:9898/metrics | grep -E '^aldb_(slots_committed|updates_received|callback_(errors|panics))' | head -8 || true
exit $fail
