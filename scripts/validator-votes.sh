#!/usr/bin/env bash
# The vote-evidence log against the patched solana-test-validator (validator-patches/, the
# feature aldb_state_root_in_bank_hash active at genesis): runs it with aldb-plugin built against
# the patched interface (scripts/build-patched-plugin.sh) and configured with
# `block_metadata_version: 5` and `vote_evidence: true`, with root records, for SECONDS, then
# checks the snapshot directory with aldb-votes-check --records:
#   - every logged bank's hash is sha256(h || root) (hard-fork count included);
#   - the votes selected for each slot decode by SPEC §10.3, verify, vote for the slot and carry
#     its bank hash; at least MIN_VOTES of them over at least MIN_SLOTS slots;
#   - root records carry their slot's own bank hash, the log's, and the root it commits to;
# and from the plugin's metrics that roots were cross-checked against the validator's and none
# differed. Prints aldb-votes-check's JSON line last; exits non-zero on a failed check.
#
# Usage: scripts/validator-votes.sh [SECONDS] [WORK_DIR]   (60 s and a fresh directory by default)
# A WORK_DIR given is kept; a fresh one is removed when the run passes unless ALDB_KEEP_WORK=1,
# and kept (its path printed) when it fails.
# A light-client script can reuse the check on any snapshot directory:
#   ~/.cache/aldb-agave/4.2.0-aldb/bin/aldb-votes-check DIR --min-slots 20 --min-votes 10 --records
# (built beside the plugin by scripts/build-patched-plugin.sh; `cargo run -p aldb-plugin --bin
# aldb-votes-check` in this workspace is the same check).
# Ports from the environment, so this can run beside another validator:
#   RPC_PORT (28899) FAUCET_PORT (29900) GOSSIP_PORT (28001) DYNAMIC_PORTS (28100-28200)
#   METRICS_PORT (29898) MIN_SLOTS (20) MIN_VOTES (10)
# ALDB_PATCHED_BIN names the patched validator's bin directory (default: the build script's);
# ALDB_PLUGIN_SO an already built patched-interface plugin instead of building one.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
# shellcheck source=scripts/lib/validator.sh
source scripts/lib/validator.sh
validator_ports 28899 29900 28001 28100-28200 29898
MIN_SLOTS="${MIN_SLOTS:-20}"
MIN_VOTES="${MIN_VOTES:-10}"
bin="$(patched_validator_bin)"
plugin="${ALDB_PLUGIN_SO:-$(scripts/build-patched-plugin.sh | tail -n1)}"
check="$(dirname "$plugin")/aldb-votes-check"
validator_workdir "${2:-}"
echo "work dir: $work" >&2
vpid=""
# shellcheck disable=SC2154 # rc: the exit status, taken first thing in the trap
trap 'rc=$?; [[ -n "$vpid" ]] && kill "$vpid" 2>/dev/null; wait 2>/dev/null || true; validator_work_cleanup "$rc"' EXIT

cat >"$work/aldb.json5" <<JSON
{
  libpath: "$plugin",
  snapshot_dir: "$work/snapshots",
  commitment: "confirmed",
  metrics_addr: "127.0.0.1:$METRICS_PORT",
  // solana-test-validator writes the ledger's genesis before it loads plugins.
  genesis_path: "$work/ledger/genesis.bin",
  block_metadata_version: 5,
  vote_evidence: true,
}
JSON
"$bin/solana-test-validator" --aldb-state-root --ledger "$work/ledger" --geyser-plugin-config "$work/aldb.json5" \
  "${validator_net[@]}" --log >"$work/validator.log" 2>&1 &
vpid=$!
for _ in $(seq 120); do
  kill -0 "$vpid" 2>/dev/null || { tail -n20 "$work/validator.log" >&2; echo "FAIL: the validator exited" >&2; exit 1; }
  ls "$work/snapshots/votes" 2>/dev/null | grep -q '^votes-' && break
  sleep 1
done
echo "running for $secs s" >&2
sleep "$secs"
metrics="$(curl -s "127.0.0.1:$METRICS_PORT/metrics")"
grep -E '^aldb_(evidence_|bank_root|bank_hashes|slots_committed_total|records_produced|callback_errors)' <<<"$metrics" >&2 || true
kill "$vpid"
wait "$vpid" 2>/dev/null || true
vpid=""
metric() { awk -v m="$1" '$1 == m { print int($2) }' <<<"$metrics"; }
checked="$(metric aldb_bank_roots_checked_total)"
mismatched="$(metric aldb_bank_root_mismatches_total)"
unexplained="$(metric aldb_bank_hashes_unexplained_total)"
echo "roots cross-checked against the validator's: ${checked:-0}, mismatched: ${mismatched:-?}, unexplained bank hashes: ${unexplained:-?}" >&2
if [[ -z "$checked" || "$checked" == 0 || "$mismatched" != 0 || "$unexplained" != 0 ]]; then
  echo "FAIL: the plugin's roots were not all cross-checked equal to the validator's" >&2
  exit 1
fi
"$check" "$work/snapshots" --min-slots "$MIN_SLOTS" --min-votes "$MIN_VOTES" --records
echo "validator-votes passed" >&2
