#!/usr/bin/env bash
# The end-to-end scenario against a real solana-test-validator 4.2.0 with the aldb plugin and
# Hyades, all on loopback:
#  1. a fresh ledger; `aldb-scenario run` creates, funds, modifies and closes accounts (system
#     transfers, an SPL Token mint and accounts, a token account closed to zero lamports, a system
#     account drained to zero) and after every step proves the touched accounts through Hyades,
#     verifies each proof locally and compares it with the validator's RPC at the same slot; it
#     also proves a never-created key absent and checks genesis programs and sysvars;
#  2. once the validator has written a ledger snapshot, the scenario runs again with new keys, the
#     validator is stopped (admin RPC `exit`) and the roots Hyades served are recorded;
#  3. the validator restarts from the same ledger, the plugin writing into a new snapshot
#     directory, and every slot committed by both runs must have the same root; the slots of the
#     second scenario's transactions (replayed from the ledger) must be among them.
# Exits non-zero on any mismatch. Usage: scripts/validator-scenario.sh [EXTRA_SECONDS] [same-dir]
# (EXTRA_SECONDS, default 20: how long the restarted validator runs before the roots are compared;
# `same-dir`: the restarted plugin writes into the first run's snapshot directory instead, where
# it re-publishes the slots it commits again and Hyades serves the newer files).
#
# scripts/validator-scenario.sh [SECONDS] processed: the plugin at `commitment: "processed"` (root
# records on, from the ledger's genesis.bin) on a fresh ledger instead; the account scenario reads
# the validator's accounts at `processed` and proves them at the bank they came from, then
# `aldb-scenario processed` watches the processed tip for SECONDS (default 20): every processed
# slot is served at once, every confirmed slot has a file, and every slot keeps its processed root
# (and its confirmed record names it) once confirmed.
# The ledger, snapshot directories and logs go to a fresh temporary work directory (printed),
# removed when the run passes unless ALDB_KEEP_WORK=1, kept when it fails.
# All on loopback. Ports from the environment (gossip not on its default 8000, which may be taken):
#   RPC_PORT (8899, +1 for its websocket) FAUCET_PORT (9900) GOSSIP_PORT (10100)
#   DYNAMIC_PORTS (10000-10100) METRICS_PORT (9898) HYADES_PORT (8999) HYADES_METRICS_PORT (9899)
set -euo pipefail
cd "$(dirname "$0")/.."
extra="${1:-20}"
same_dir="${2:-}"
# shellcheck source=scripts/lib/validator.sh
source scripts/lib/validator.sh
validator_ports 8899 9900 10100 10000-10100 9898 8999 9899
validator="$(scripts/build-validator.sh)"
cargo build --release --locked -p aldb-plugin -p hyades -p aldb-cli -p aldb-scenario >&2
validator_workdir
echo "work directory: $work"
vpid=""
hpid=""
cleanup() {
  local rc=$?
  [[ -n "$hpid" ]] && kill "$hpid" 2>/dev/null || true
  [[ -n "$vpid" ]] && kill "$vpid" 2>/dev/null || true
  wait 2>/dev/null || true
  validator_work_cleanup "$rc"
}
trap cleanup EXIT
rpc_url="http://127.0.0.1:$RPC_PORT"
hyades_url="http://127.0.0.1:$HYADES_PORT"
scenario=target/release/aldb-scenario

config() { # config NAME SNAPSHOT_DIR [COMMITMENT]
  local extra=""
  # Records need the genesis hash; the ledger's genesis.bin exists once the validator has made it.
  [[ "${3:-confirmed}" == processed ]] && extra="genesis_path: \"$work/ledger/genesis.bin\","
  cat > "$work/$1.json5" <<JSON
{
  libpath: "$PWD/target/release/libaldb_plugin.so",
  snapshot_dir: "$2",
  commitment: "${3:-confirmed}",
  keep_slots: 100000,
  metrics_addr: "127.0.0.1:$METRICS_PORT",
  $extra
}
JSON
  [[ -n "$extra" ]] || target/release/aldb-config-check "$work/$1.json5" >/dev/null
}

start_validator() { # start_validator CONFIG LOG
  RUST_LOG=solana=info,agave=info,aldb_plugin=info "$validator" --ledger "$work/ledger" \
    --geyser-plugin-config "$1" "${validator_net[@]}" --quiet >"$2" 2>&1 &
  vpid=$!
}

start_hyades() { # start_hyades SNAPSHOT_DIR LOG
  wait_for_snapshot "$1" 120 || true
  target/release/hyades --dir "$1" --addr "127.0.0.1:$HYADES_PORT" --metrics-addr "127.0.0.1:$HYADES_METRICS_PORT" \
    >"$2" 2>&1 &
  hpid=$!
  # Up and serving a root, not only healthy.
  for _ in $(seq 30); do
    curl -s -X POST "$hyades_url" -H 'content-type: application/json' \
      -d '{"jsonrpc":"2.0","id":1,"method":"getStateRoot","params":[]}' | grep -q '"root"' && return 0
    sleep 1
  done
  echo "Hyades did not start: $(cat "$2")"
  return 1
}

stop_hyades() {
  kill "$hpid"
  wait "$hpid" 2>/dev/null || true
  hpid=""
}

newest() { # the newest slot Hyades serves
  curl -s -X POST "$hyades_url" -H 'content-type: application/json' \
    -d '{"jsonrpc":"2.0","id":1,"method":"getStateRoot","params":[]}' | sed -n 's/.*"slot":\([0-9]*\).*/\1/p'
}

t0=$(date +%s)
if [[ "$same_dir" == processed ]]; then
  echo "== processed: fresh ledger, commitment processed, snapshots in $work/snapp"
  config runp "$work/snapp" processed
  start_validator "$work/runp.json5" "$work/validatorp.log"
  start_hyades "$work/snapp" "$work/hyadesp.log"
  target/release/aldb-config-check "$work/runp.json5" >/dev/null
  "$scenario" run --rpc "$rpc_url" --hyades "$hyades_url" --seed 1 --commitment processed
  "$scenario" processed --rpc "$rpc_url" --hyades "$hyades_url" --dir "$work/snapp" --secs "$extra"
  curl -s "127.0.0.1:$METRICS_PORT/metrics" | grep -E '^aldb_(slots_committed_total|last_committed_slot|last_confirmed_slot|last_finalized_slot|status_lag_slots|fork_banks_held|fork_switches_total|fork_slots_rolled_back_total|bank_status_changes_total|freezes_refused_total|records_produced_total|records_signed_total|snapshot_fork_refused_total|irregular_events_total|callback_errors_total)' | grep -v '{kind=.*} 0$' || true
  stop_validator "$work/ledger" "$vpid"
  vpid=""
  grep -ho 'aldb-plugin unloaded: .*' "$work/validatorp.log" "$work/ledger/validator.log" 2>/dev/null | tail -1 || true
  echo "validator-scenario (processed) passed in $(( $(date +%s) - t0 )) s"
  exit 0
fi
echo "== run 1: fresh ledger, snapshots in $work/snap1"
config run1 "$work/snap1"
start_validator "$work/run1.json5" "$work/validator1.log"
start_hyades "$work/snap1" "$work/hyades1.log"
"$scenario" run --rpc "$rpc_url" --hyades "$hyades_url" --seed 1
# Keep going until the validator has written a snapshot (solana-test-validator makes one every
# 100 slots), then run the scenario again with new keys: a restart starts from that snapshot and
# replays the ledger after it, so these transactions' slots are committed by both runs.
echo "== waiting for the validator's first ledger snapshot"
# A long wait, so that only a stalled validator fails it.
wait_for_ledger_snapshot "$work/ledger" 900 || { echo "FAIL: no ledger snapshot after 900 s"; exit 1; }
"$scenario" run --rpc "$rpc_url" --hyades "$hyades_url" --seed 2 | tee "$work/scenario2.log"
tx_slots=$(sed -n 's/^tx slots: //p' "$work/scenario2.log")
sleep 3
last1=$(newest)
echo "== stopping the validator at Hyades slot $last1"
stop_validator "$work/ledger" "$vpid"
vpid=""
grep -ho 'aldb-plugin unloaded: .*' "$work/ledger/validator.log" | tail -1 || echo "(no unload line: the validator did not unload the plugin)"
sleep 2 # Hyades picks up the files published while the plugin unloaded
"$scenario" roots --hyades "$hyades_url" >"$work/roots1.jsonl"
stop_hyades
echo "run 1: $(wc -l <"$work/roots1.jsonl") roots recorded; ledger snapshots: $(ls "$work/ledger" | grep -E '^(incremental-)?snapshot-' | tr '\n' ' ')"

snap2="$work/snap2"
[[ "$same_dir" == same-dir ]] && snap2="$work/snap1"
maxseq=$(ls "$work/snap1" | sed -n 's/^\([0-9]*\)-.*\.snap$/\1/p' | sort -n | tail -1)
echo "== run 2: restart from the same ledger, snapshots in $snap2"
config run2 "$snap2"
start_validator "$work/run2.json5" "$work/validator2.log"
start_hyades "$snap2" "$work/hyades2.log"
end=$(( $(date +%s) + extra ))
while (( $(date +%s) < end )); do sleep 1; done
grep -ho 'aldb-plugin: base state committed at slot [0-9]* ([A-Za-z]*, [0-9]* accounts)' \
  "$work/ledger/validator.log" "$work/validator2.log" 2>/dev/null | tail -1 || true
if [[ "$same_dir" == same-dir ]]; then
  # Files are named SEQ-SLOT.snap; run 2's have sequence numbers above run 1's last.
  again=$(ls "$snap2" | sed -n 's/^\([0-9]*\)-\([0-9]*\)\.snap$/\1 \2/p' |
    awk -v m="$maxseq" -v l="$last1" '$1+0 > m+0 && $2+0 <= l+0 {n++} END {print n+0}')
  echo "run 2 re-published $again slots that run 1 had published (up to slot $last1) in the same directory"
  (( again > 0 )) || { echo "FAIL: nothing re-published"; exit 1; }
fi
cover=()
for s in $tx_slots; do cover+=(--must-cover "$s"); done
"$scenario" compare-roots --before "$work/roots1.jsonl" --hyades "$hyades_url" --min-overlap 1 "${cover[@]}"
curl -s "127.0.0.1:$METRICS_PORT/metrics" | grep -E '^aldb_(slots_committed_total|last_committed_slot|irregular_events_total|callback_errors_total)' | grep -v ' 0$' || true
echo "validator-scenario passed in $(( $(date +%s) - t0 )) s"
