#!/usr/bin/env bash
# Measures the plugin inside a real solana-test-validator 4.2.0 under a steady load: TPS system
# transfers per second for SECONDS (defaults 100 and 60), then prints the plugin's update_account
# callback cost (ns, p50/p99), the delay from a slot's Processed callback to its commit, and how
# many slots commits trail the highest processed one, all over the load window only (from the
# plugin's Prometheus histograms). Usage: scripts/validator-load.sh [TPS] [SECONDS]
# The ledger, snapshot files and logs go to a fresh temporary work directory (printed), removed
# when the run passes unless ALDB_KEEP_WORK=1, kept when it fails.
# All on loopback. Ports from the environment, so this can run beside another validator:
#   RPC_PORT (8899, +1 for its websocket) FAUCET_PORT (9900) GOSSIP_PORT (10100)
#   DYNAMIC_PORTS (10000-10100) METRICS_PORT (9898)
set -euo pipefail
cd "$(dirname "$0")/.."
tps="${1:-100}"
secs="${2:-60}"
# shellcheck source=scripts/lib/validator.sh
source scripts/lib/validator.sh
validator_ports 8899 9900 10100 10000-10100 9898
validator="$(scripts/build-validator.sh)"
# The same package set as the other validator scripts, so the plugin is not rebuilt with other features.
cargo build --release --locked -p aldb-plugin -p hyades -p aldb-cli -p aldb-scenario >&2
validator_workdir
echo "work dir: $work" >&2
# shellcheck disable=SC2154 # rc: the exit status, taken first thing in the trap
trap 'rc=$?; kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; validator_work_cleanup "$rc"' EXIT
cat > "$work/aldb.json5" <<JSON
{
  libpath: "$PWD/target/release/libaldb_plugin.so",
  snapshot_dir: "$work/snapshots",
  commitment: "confirmed",
  metrics_addr: "127.0.0.1:$METRICS_PORT",
}
JSON
target/release/aldb-config-check "$work/aldb.json5" >/dev/null
"$validator" --ledger "$work/ledger" --geyser-plugin-config "$work/aldb.json5" "${validator_net[@]}" \
  --quiet >"$work/validator.log" 2>&1 &
echo "validator $("$validator" --version), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
target/release/aldb-scenario load --rpc "http://127.0.0.1:$RPC_PORT" --metrics "http://127.0.0.1:$METRICS_PORT/metrics" \
  --tps "$tps" --secs "$secs"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
