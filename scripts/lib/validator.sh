# shellcheck shell=bash
# The start-up the validator scripts share, sourced by each (after `cd` to the repository root):
# their loopback ports, the patched validator's bin directory, waiting for a snapshot file, a
# JSON-RPC service or a ledger snapshot, stopping a validator, and the work directory's life
# (made at the start, removed after a passing run unless ALDB_KEEP_WORK=1, kept after a failing
# one). Functions only; sourcing it starts nothing.

# validator_ports RPC FAUCET GOSSIP DYNAMIC METRICS [HYADES HYADES_METRICS]
# Sets RPC_PORT, FAUCET_PORT, GOSSIP_PORT, DYNAMIC_PORTS, METRICS_PORT (and HYADES_PORT,
# HYADES_METRICS_PORT when given) to the environment's value, or else to the script's default
# given here, so each script keeps ports of its own and can run beside the others. Sets the
# array validator_net to the validator's arguments for them, everything bound to loopback.
validator_ports() {
  RPC_PORT="${RPC_PORT:-$1}"
  FAUCET_PORT="${FAUCET_PORT:-$2}"
  GOSSIP_PORT="${GOSSIP_PORT:-$3}"
  DYNAMIC_PORTS="${DYNAMIC_PORTS:-$4}"
  METRICS_PORT="${METRICS_PORT:-$5}"
  if (($# > 5)); then
    HYADES_PORT="${HYADES_PORT:-$6}"
    HYADES_METRICS_PORT="${HYADES_METRICS_PORT:-$7}"
  fi
  # shellcheck disable=SC2034 # read by the scripts that source this
  validator_net=(--rpc-port "$RPC_PORT" --faucet-port "$FAUCET_PORT" --gossip-port "$GOSSIP_PORT"
    --dynamic-port-range "$DYNAMIC_PORTS" --bind-address 127.0.0.1)
}

# patched_validator_bin: prints the patched validator's bin directory, ALDB_PATCHED_BIN when set
# (an already built one), else what scripts/build-patched-validator.sh builds or finds cached.
patched_validator_bin() {
  if [[ -n "${ALDB_PATCHED_BIN:-}" ]]; then
    echo "$ALDB_PATCHED_BIN"
  else
    scripts/build-patched-validator.sh | tail -n1
  fi
}

# wait_for_snapshot DIR SECONDS: waits up to SECONDS for DIR to hold a snapshot file (the plugin
# publishes its first one a few slots after the validator starts). Returns 1 if none came.
wait_for_snapshot() {
  local _
  for _ in $(seq "$2"); do
    compgen -G "$1/*snap*" >/dev/null && return 0
    sleep 1
  done
  compgen -G "$1/*snap*" >/dev/null
}

# wait_for_health URL SECONDS [PID LOG]: waits up to SECONDS for the JSON-RPC service at URL to
# answer getHealth with "ok". Returns 1 if it did not in time; with PID, returns 2 as soon as
# that process has exited, after printing the last lines of LOG to stderr.
wait_for_health() {
  local _
  for _ in $(seq "$2"); do
    if [[ -n "${3:-}" ]] && ! kill -0 "$3" 2>/dev/null; then
      echo "process $3 exited; the end of $4:" >&2
      tail -5 "$4" >&2
      return 2
    fi
    curl -s -X POST "$1" -H 'content-type: application/json' \
      -d '{"jsonrpc":"2.0","id":1,"method":"getHealth","params":[]}' | grep -q '"ok"' && return 0
    sleep 1
  done
  return 1
}

# wait_for_ledger_snapshot LEDGER SECONDS: waits up to SECONDS for the validator to have written a
# full ledger snapshot into LEDGER (solana-test-validator makes one at the first root past slot
# 100: about a minute on a quiet machine, several on a loaded one, where slots take 2 s). Returns
# 1 if none came.
wait_for_ledger_snapshot() {
  local _
  for _ in $(seq "$2"); do
    compgen -G "$1/snapshot-*" >/dev/null && return 0
    sleep 1
  done
  compgen -G "$1/snapshot-*" >/dev/null
}

# stop_validator LEDGER PID: a graceful exit through the validator's admin RPC (what
# `agave-validator exit` sends), so its plugins are unloaded and flush; SIGTERM if PID is still
# running 60 s later. (SIGINT would not do: a background job of a non-interactive shell ignores
# it.) Returns once PID has ended; PID must be a child of the calling shell.
stop_validator() {
  python3 - "$1/admin.rpc" <<'PY' || true
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
s.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "exit", "params": []}).encode())
print("admin exit:", s.recv(4096).decode().strip())
PY
  local _
  for _ in $(seq 60); do
    kill -0 "$2" 2>/dev/null || break
    sleep 1
  done
  if kill -0 "$2" 2>/dev/null; then
    echo "validator still running 60 s after exit, sending SIGTERM"
    kill -TERM "$2"
  fi
  wait "$2" 2>/dev/null || true
}

# validator_workdir [DIR]: sets `work` to the run's work directory (ledgers, snapshot files,
# logs): DIR when the caller names one, created if missing and never deleted by
# validator_work_cleanup; else a fresh `mktemp -d` directory that this run owns. Must run in the
# script's own shell (not in `$(...)`), so that `work` and the ownership stay set for its EXIT trap.
# shellcheck disable=SC2120 # DIR is optional: most scripts always take a fresh directory
validator_workdir() {
  if [[ -n "${1:-}" ]]; then
    work="$1"
    mkdir -p "$work"
    validator_work_owned=0
  else
    work="$(mktemp -d)"
    validator_work_owned=1
  fi
}

# validator_work_cleanup STATUS: the last step of a script's EXIT trap, once every process the
# script started has been stopped and waited for (a validator still running would keep writing
# into the directory). A directory validator_workdir made is removed when STATUS (the script's
# exit status, taken with `rc=$?` first thing in the trap) is 0, unless ALDB_KEEP_WORK=1; on a
# failure it is kept, and its path printed, for inspection (a cluster run leaves ~500 MB, so
# passing runs must not pile up). A directory the caller named is never removed. Always returns
# 0 and runs no command that can fail, so that under `set -e` it cannot change the exit status.
validator_work_cleanup() {
  if [[ "${validator_work_owned:-0}" != 1 || -z "${work:-}" || ! -d "$work" ]]; then
    return 0
  fi
  if [[ "$1" != 0 ]]; then
    echo "work directory kept for inspection: $work" >&2
  elif [[ "${ALDB_KEEP_WORK:-}" == 1 ]]; then
    echo "work directory kept (ALDB_KEEP_WORK=1): $work" >&2
  elif ! rm -rf -- "$work"; then
    echo "could not remove the work directory $work" >&2
  fi
  return 0
}
