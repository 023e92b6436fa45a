#!/usr/bin/env bash
# Measures the plugin inside a real solana-test-validator 4.2.0 under a steady load: TPS system
# transfers per second for SECONDS (defaults 100 and 60), then prints the plugin's update_account
# callback cost (ns, p50/p99), the delay from a slot's Processed callback to its commit, and how
# many slots commits trail the highest processed one, all over the load window only (from the
# plugin's Prometheus histograms). Usage: scripts/validator-load.sh [TPS] [SECONDS]
# Ports: RPC 8899 (+8900), faucet 9900, metrics 9898, validator's dynamic ports 10000-10099, gossip 10100.
set -euo pipefail
cd "$(dirname "$0")/.."
tps="${1:-100}"
secs="${2:-60}"
validator="$(scripts/build-validator.sh)"
# The same package set as the other validator scripts, so the plugin is not rebuilt with other features.
cargo build --release --locked -p aldb-plugin -p hyades -p aldb-cli -p aldb-scenario >&2
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
echo "validator $("$validator" --version), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
target/release/aldb-scenario load --rpc http://127.0.0.1:8899 --metrics http://127.0.0.1:9898/metrics \
  --tps "$tps" --secs "$secs"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
