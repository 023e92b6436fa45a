#!/usr/bin/env bash
# Resource suite for hyades: starts a real hyades on a simulated snapshot directory
# (`aldb simulate --slots 200`), then runs each abuse — slow clients (slowloris heads, trickled
# bodies, silent connections), WebSocket clients that never read their replies, and huge batches
# (100 × getRootRecords [0, 5000], HTTP and WebSocket) — for SECONDS while a legitimate HTTP and
# a legitimate WebSocket client ask for proofs and time every answer. The server's RSS is sampled
# from /proc. Prints a table and a final JSON line; exits non-zero when a legitimate request
# fails, the legitimate p99 passes P99_MS, or the RSS grows more than RSS_GROWTH_MIB in a phase.
#
#   scripts/hyades-resources.sh [SECONDS]        (default 20 per phase, about 2 minutes in all)
#
# Environment: PROFILE=release|dev (default release), P99_MS (100), RSS_GROWTH_MIB (256),
# HYADES_ARGS (extra server flags; default shortens the timeouts so closures show within a phase
# and caps answers at 4 MiB, which the 200 simulated records can pass).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-20}"
profile="${PROFILE:-release}"
p99_ms="${P99_MS:-100}"
rss_growth="${RSS_GROWTH_MIB:-256}"
hyades_args="${HYADES_ARGS:---header-timeout 5 --write-timeout 5 --max-response-bytes 4194304}"
port="${PORT:-18899}"
metrics_port="${METRICS_PORT:-19899}"

cargo build --locked --profile "$profile" -p aldb-cli -p hyades --bin aldb --bin hyades --example resources >&2
dir_name="$profile"
[[ "$profile" == dev ]] && dir_name=debug
bin="target/$dir_name"

work="$(mktemp -d)"
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "simulating 200 slots into $work/snap" >&2
"$bin/aldb" simulate --dir "$work/snap" --slots 200 >/dev/null

# shellcheck disable=SC2086
RUST_LOG=warn "$bin/hyades" --dir "$work/snap" --addr "127.0.0.1:$port" --metrics-addr "127.0.0.1:$metrics_port" \
  $hyades_args 2>"$work/hyades.log" &
server_pid=$!
for _ in $(seq 100); do
  if curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1; then break; fi
  sleep 0.1
done
curl -sf "http://127.0.0.1:$port/health" >/dev/null || { cat "$work/hyades.log" >&2; echo "hyades did not start" >&2; exit 1; }
echo "hyades $server_pid serving; $seconds s per phase; bounds: p99 <= $p99_ms ms, RSS growth <= $rss_growth MiB" >&2

status=0
"$bin/examples/resources" --addr "127.0.0.1:$port" --metrics-addr "127.0.0.1:$metrics_port" --pid "$server_pid" \
  --seconds "$seconds" --p99-ms "$p99_ms" --rss-growth-mib "$rss_growth" || status=$?
if ! kill -0 "$server_pid" 2>/dev/null; then
  echo "hyades died during the suite:" >&2
  tail -20 "$work/hyades.log" >&2
  exit 1
fi
exit "$status"
