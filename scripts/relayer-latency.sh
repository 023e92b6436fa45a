#!/usr/bin/env bash
# Benchmark (not a test): the relayer's slot-to-accepted latency on votes beside k-of-n, on a real
# validator (issue 27, BENCHMARKS.md §12). The patched solana-test-validator
# (scripts/build-patched-validator.sh) runs with aldb_state_root_in_bank_hash and
# aldb_epoch_set_in_bank_hash active at genesis (`--aldb-state-root --aldb-epoch-set`) and epochs
# of EPOCH_SLOTS slots, so the run crosses several epoch boundaries; the plugin built against the
# patched interface (scripts/build-patched-plugin.sh) runs at `commitment: "confirmed"` with
# `block_metadata_version: 5` and `vote_evidence: true`, signing root records with a key from a
# fixed seed; Hyades serves its directory. Two aldb-relayers follow that one Hyades at once, both
# at commitment confirmed, each with its own state and output file:
#   - votes: `trust: "votes"` and a checkpoint (SPEC §11.5): getEpochSchedule, and the current
#     epoch's set read from the validator's RPC as scripts/validator-light-client.sh reads it
#     (getVoteAccounts for the vote accounts and stakes, each vote account's state for its
#     authorized voter), the time of the slot it was read at, a trusting period of a day;
#   - k-of-n: the signed root records (as scripts/validator-records.sh runs it), the plugin's key,
#     1 of 1, the validator's genesis hash.
# Both start at the same slot, START_AHEAD slots past the slot the validator is processing, so
# neither's start-up is inside the figures. For SECONDS a Python watcher polls both output files
# every 20 ms and stamps each new `<slot> <root>` line with time.time(); it goes on GRACE seconds
# more so that the run's last slots can still be accepted. A slot's latency is that stamp minus
# the time the validator froze the slot's bank (the agave log line `bank frozen: SLOT`, whose UTC
# timestamp carries microseconds; the same machine's clock). The run's slots are those at or after
# the start slot whose bank froze within the SECONDS. Printed: the configuration and the load
# (uptime) before and after; per mode how many of the run's slots it accepted at all and, over
# the slots both accepted, the count, p50, p90, p99 and max in ms, and again over those of them
# not within 32 slots (a vote window) after a slot the votes relayer did not accept, which holds
# every later slot back until it is given up; the ratio votes / k-of-n of the medians (the anchor:
# both measured in the same run on the same slots); and a final JSON line.
# It fails (exit 1) when the two modes accept fewer than 10 slots in common or a root differs
# between them.
# The ledger, snapshot files, relayer files and logs go to a fresh temporary work directory
# (printed), removed when the run passes unless ALDB_KEEP_WORK=1, kept when it fails.
# ALDB_PATCHED_BIN names an already built patched validator bin directory, ALDB_PLUGIN_SO an
# already built patched-interface plugin, ALDB_RELEASE_DIR an already built release directory
# holding hyades, aldb and aldb-relayer (otherwise they are built here).
# Everything listens on loopback, on ports of its own so it can run beside the other validator
# scripts: RPC_PORT (41899), FAUCET_PORT (41900), GOSSIP_PORT (41001), DYNAMIC_PORTS
# (41100-41200), METRICS_PORT (41898), HYADES_PORT (41999), HYADES_METRICS_PORT (41997).
# Other knobs: EPOCH_SLOTS (32), START_AHEAD (10), GRACE (30: longer than a 32-slot vote window, after
# which the votes relayer gives up a slot none of whose votes landed and takes the slots after it).
# Usage: scripts/relayer-latency.sh [SECONDS]   (SECONDS, default 90: the measured run's length)
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-90}"
# shellcheck source=scripts/lib/validator.sh
source scripts/lib/validator.sh
validator_ports 41899 41900 41001 41100-41200 41898 41999 41997
EPOCH_SLOTS="${EPOCH_SLOTS:-32}"
START_AHEAD="${START_AHEAD:-10}"
GRACE="${GRACE:-30}"
# ALDB_PATCHED_BIN names an already built bin directory instead of running the build script.
bin="$(patched_validator_bin)"
# ALDB_PLUGIN_SO names an already built patched-interface plugin instead of building one.
plugin="${ALDB_PLUGIN_SO:-$(scripts/build-patched-plugin.sh | tail -n1)}"
if [[ -n "${ALDB_RELEASE_DIR:-}" ]]; then
  rel="$(cd "$ALDB_RELEASE_DIR" && pwd)"
else
  cargo build --release --locked -p hyades -p aldb-cli -p aldb-relayer >&2
  rel="$PWD/target/release"
fi
validator_workdir
echo "work directory: $work"
rpc_url="http://127.0.0.1:$RPC_PORT"
hyades_url="http://127.0.0.1:$HYADES_PORT"
vpid=""
hpid=""
rpids=""
cleanup() {
  local rc=$? p
  for p in $rpids $hpid $vpid; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  validator_work_cleanup "$rc"
}
trap cleanup EXIT
load_before="$(uptime)"

# The plugin's signing key, from a fixed seed.
identity="$("$rel/aldb" keygen --seed-hex 4141414141414141414141414141414141414141414141414141414141414141 \
  "$work/attester.json")"
cat >"$work/aldb.json5" <<JSON
{
  libpath: "$plugin",
  snapshot_dir: "$work/snapshots",
  commitment: "confirmed",
  keep_slots: 100000,
  metrics_addr: "127.0.0.1:$METRICS_PORT",
  block_metadata_version: 5,
  vote_evidence: true,
  keypair: "$work/attester.json",
  // solana-test-validator writes the ledger's genesis before it loads plugins.
  genesis_path: "$work/ledger/genesis.bin",
}
JSON
# --log: the validator's log (with its `bank frozen` lines) goes to validator.log.
"$bin/solana-test-validator" --aldb-state-root --aldb-epoch-set --slots-per-epoch "$EPOCH_SLOTS" \
  --ledger "$work/ledger" --geyser-plugin-config "$work/aldb.json5" "${validator_net[@]}" \
  --log >"$work/validator.log" 2>&1 &
vpid=$!
health=0
wait_for_health "$rpc_url" 180 "$vpid" "$work/validator.log" || health=$?
[[ "$health" != 2 ]] || exit 1
wait_for_snapshot "$work/snapshots" 180 || { echo "FAIL: the plugin wrote no snapshot in 180 s"; tail -20 "$work/validator.log"; exit 1; }
"$rel/hyades" --dir "$work/snapshots" --addr "127.0.0.1:$HYADES_PORT" \
  --metrics-addr "127.0.0.1:$HYADES_METRICS_PORT" >"$work/hyades.log" 2>&1 &
hpid=$!
wait_for_health "$hyades_url" 30 || true

# The checkpoint (the current epoch's set, from the validator's RPC), the genesis hash and the
# slot both relayers start at.
read -r genesis start_slot < <(python3 - "$work" "$rpc_url" "$START_AHEAD" <<'PY'
import json, os, sys, time, urllib.request

work, rpc_url, ahead = sys.argv[1], sys.argv[2], int(sys.argv[3])

def call(method, params, must=True):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    req = urllib.request.Request(rpc_url, body, {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        out = json.load(r)
    if "result" not in out and must:
        sys.exit(f"{method}: {out.get('error')}")
    return out.get("result")

conf = {"commitment": "confirmed"}
# The validator must have voted (its stake counted) before its set is read.
for _ in range(300):
    va = call("getVoteAccounts", [conf])
    if any(v["activatedStake"] > 0 for v in va["current"]):
        break
    time.sleep(0.5)
# Read the set within one epoch: the epoch before and after the reads must agree.
for _ in range(10):
    epoch = call("getEpochInfo", [conf])["epoch"]
    slot = call("getSlot", [conf])
    va = call("getVoteAccounts", [conf])
    members = []
    for v in va["current"] + va["delinquent"]:
        if v["activatedStake"] == 0:
            continue
        state = call("getAccountInfo", [v["votePubkey"], {"encoding": "jsonParsed", "commitment": "confirmed"}])
        info = state["value"]["data"]["parsed"]["info"]
        voters = [a["authorizedVoter"] for a in info["authorizedVoters"]]
        members.append({"voteAccount": v["votePubkey"], "authorizedVoter": voters[-1], "stake": v["activatedStake"]})
    if call("getEpochInfo", [conf])["epoch"] == epoch:
        break
else:
    sys.exit("could not read the validator set within one epoch")
if not members:
    sys.exit("getVoteAccounts lists no staked vote account")
# The time of the slot the set was read at, never a later one (SPEC §11.5).
block_time = None
for _ in range(20):
    block_time = call("getBlockTime", [slot], must=False)
    if block_time is not None:
        break
    time.sleep(0.5)
checkpoint = {
    "version": 1,
    "schedule": call("getEpochSchedule", []),
    "set": {"epoch": epoch, "totalStake": sum(m["stake"] for m in members), "validators": members},
    "time": block_time if block_time is not None else int(time.time()) - 60,
    "trustingPeriod": 86400,
}
for mode in ("votes", "kofn"):
    os.makedirs(os.path.join(work, mode), exist_ok=True)
with open(os.path.join(work, "votes", "checkpoint.json"), "w") as f:
    json.dump(checkpoint, f)
print(f"checkpoint: epoch {epoch} (read at slot {slot}), {len(members)} validator(s), total stake "
      f"{checkpoint['set']['totalStake']}, schedule {checkpoint['schedule']}", file=sys.stderr)
processed = call("getSlot", [{"commitment": "processed"}])
print(call("getGenesisHash", []), processed + ahead)
PY
)
echo "genesis hash $genesis; both relayers start at slot $start_slot"
cat >"$work/votes/relayer.json5" <<JSON
{
  endpoints: ["ws://127.0.0.1:$HYADES_PORT/ws"],
  trust: "votes",
  checkpoint: "checkpoint.json",
  state_file: "state.json",
  output_file: "roots.txt",
  commitment: "confirmed",
  start_slot: $start_slot,
}
JSON
cat >"$work/kofn/relayer.json5" <<JSON
{
  endpoints: ["ws://127.0.0.1:$HYADES_PORT/ws"],
  identities: ["$identity"],
  threshold: 1,
  genesis_hash: "$genesis",
  commitment: "confirmed",
  cursor_file: "cursor",
  output_file: "roots.txt",
  start_slot: $start_slot,
}
JSON
for mode in votes kofn; do
  "$rel/aldb-relayer" --config "$work/$mode/relayer.json5" >"$work/$mode/stdout" 2>"$work/$mode/log" &
  rpids="$rpids $!"
done

cat <<EOF
config: validator $bin/solana-test-validator --aldb-state-root --aldb-epoch-set --slots-per-epoch $EPOCH_SLOTS
        plugin $plugin (commitment confirmed, block_metadata_version 5, vote_evidence, records signed by $identity)
        one Hyades; relayers at commitment confirmed from slot $start_slot: votes (checkpoint of the current epoch's set) and k-of-n (1 of 1)
        run $secs s, grace $GRACE s, output files polled every 20 ms
load before: $load_before
EOF

# The watcher: stamps each new output line of either relayer with time.time().
python3 - "$work" "$secs" "$GRACE" <<'PY'
import json, os, sys, time

work, secs, grace = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
files = {m: os.path.join(work, m, "roots.txt") for m in ("votes", "kofn")}
offset = {m: 0 for m in files}
partial = {m: b"" for m in files}
stamps = {m: {} for m in files}
t_start = time.time()
end, stop = t_start + secs, t_start + secs + grace
while True:
    now = time.time()
    for m, path in files.items():
        try:
            with open(path, "rb") as f:
                f.seek(offset[m])
                data = f.read()
        except FileNotFoundError:
            continue
        if not data:
            continue
        offset[m] += len(data)
        data = partial[m] + data
        *lines, partial[m] = data.split(b"\n")
        for line in lines:
            parts = line.split()
            if len(parts) == 2:
                # The first stamp counts: a root accepted again after a restart is not new.
                stamps[m].setdefault(int(parts[0]), (now, parts[1].decode()))
    if now >= stop:
        break
    time.sleep(0.02)
with open(os.path.join(work, "stamps.json"), "w") as f:
    json.dump({"start": t_start, "end": end, "stop": stop,
               "stamps": {m: {str(s): v for s, v in d.items()} for m, d in stamps.items()}}, f)
PY
load_after="$(uptime)"
echo "load after: $load_after"
for mode in votes kofn; do
  echo "relayer $mode: $(wc -l <"$work/$mode/roots.txt" 2>/dev/null || echo 0) roots in its output; the end of its log:"
  tail -n 3 "$work/$mode/log" | cut -c1-240 | sed 's/^/  /'
done
kill -0 "$vpid" 2>/dev/null || { echo "FAIL: the validator exited"; tail -5 "$work/validator.log"; exit 1; }

python3 - "$work" "$start_slot" "$secs" "$EPOCH_SLOTS" "$load_before" "$load_after" <<'PY'
import calendar, json, re, sys, time

work, start_slot, secs, epoch_slots = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
load_before, load_after = sys.argv[5], sys.argv[6]
run = json.load(open(f"{work}/stamps.json"))
stamps = {m: {int(s): v for s, v in d.items()} for m, d in run["stamps"].items()}

# `[2026-11-28T19:05:15.512281642Z INFO  solana_runtime::bank] bank frozen: 0 hash: ...` (UTC).
frozen = {}
pat = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d+)Z .*\] bank frozen: (\d+) ")
with open(f"{work}/validator.log", errors="replace") as f:
    for line in f:
        m = pat.match(line)
        if m:
            t = calendar.timegm(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S")) + float("0." + m.group(2)[:6])
            frozen.setdefault(int(m.group(3)), t)

run_slots = sorted(s for s, t in frozen.items() if s >= start_slot and run["start"] <= t <= run["end"])
names = {"votes": "votes", "kofn": "k-of-n"}
accepted = {m: sum(1 for s in run_slots if s in stamps[m]) for m in stamps}
both = [s for s in run_slots if s in stamps["votes"] and s in stamps["kofn"]]
differ = [s for s in both if stamps["votes"][s][1] != stamps["kofn"][s][1]]

def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, -(-p * len(xs) // 100) - 1))]  # nearest rank

lat = {m: [(stamps[m][s][0] - frozen[s]) * 1000 for s in both] for m in stamps}
fig = {}
print(f"run slots: {len(run_slots)} banks frozen from slot {start_slot} within the {secs} s"
      + (f" ({run_slots[0]}..{run_slots[-1]}, epochs {run_slots[0] // epoch_slots}..{run_slots[-1] // epoch_slots})" if run_slots else ""))
def ranges(xs):
    out = []
    for x in xs:
        if out and out[-1][1] == x - 1:
            out[-1][1] = x
        else:
            out.append([x, x])
    return ", ".join(f"{a}" if a == b else f"{a}..{b}" for a, b in out)

given_up = sum(1 for line in open(f"{work}/votes/log", errors="replace") if ": given up: " in line)
for m in ("votes", "kofn"):
    missing = [s for s in run_slots if s not in stamps[m]]
    print(f"{names[m]:7} accepted {accepted[m]} of the run's {len(run_slots)} slots"
          + (f"; not: {ranges(missing)}" if missing else "")
          + (f" ({given_up} given up in its log)" if m == "votes" else ""))
print(f"slots both accepted: {len(both)}; roots that differ between the modes: {len(differ)}")
print(f"{'mode':7} {'count':>6} {'p50 ms':>9} {'p90 ms':>9} {'p99 ms':>9} {'max ms':>9}")
for m in ("votes", "kofn"):
    xs = lat[m]
    if xs:
        fig[m] = {"count": len(xs), "p50_ms": pct(xs, 50), "p90_ms": pct(xs, 90), "p99_ms": pct(xs, 99), "max_ms": max(xs)}
        print(f"{names[m]:7} {len(xs):6} {fig[m]['p50_ms']:9.1f} {fig[m]['p90_ms']:9.1f} {fig[m]['p99_ms']:9.1f} {fig[m]['max_ms']:9.1f}")
# The votes relayer takes slots in order, so a slot it gives up holds every later one back until
# its vote window (32 slots) has passed: the figures again over the slots none of the 32 before
# which went unaccepted on votes, which is the vote round trip alone.
unaccepted = [s for s in run_slots if s not in stamps["votes"]]
free = [s for s in both if not any(g < s <= g + 32 for g in unaccepted)]
for m in ("votes", "kofn"):
    xs = [(stamps[m][s][0] - frozen[s]) * 1000 for s in free]
    if xs:
        fig[m + "_free"] = {"count": len(xs), "p50_ms": pct(xs, 50), "p90_ms": pct(xs, 90), "p99_ms": pct(xs, 99), "max_ms": max(xs)}
        f = fig[m + "_free"]
        print(f"{names[m]:7} {len(xs):6} {f['p50_ms']:9.1f} {f['p90_ms']:9.1f} {f['p99_ms']:9.1f} {f['max_ms']:9.1f}"
              "   (slots not behind one unaccepted on votes)")
# The first slot of each epoch: the votes relayer follows the epoch's transition before it.
firsts = [s for s in both if s % epoch_slots == 0]
if firsts:
    print("first slots of epochs (votes follows a transition): "
          + ", ".join(f"{s}: votes {(stamps['votes'][s][0] - frozen[s]) * 1000:.0f} ms, k-of-n "
                      f"{(stamps['kofn'][s][0] - frozen[s]) * 1000:.0f} ms" for s in firsts))
def ratio_of(a, b):
    return fig[a]["p50_ms"] / fig[b]["p50_ms"] if a in fig and b in fig and fig[b]["p50_ms"] > 0 else None

ratio, ratio_free = ratio_of("votes", "kofn"), ratio_of("votes_free", "kofn_free")
if ratio is not None:
    print(f"votes / k-of-n, p50: {ratio:.3f}" + (f" ({ratio_free:.3f} over the slots not behind one unaccepted)" if ratio_free else ""))
print(json.dumps({
    "seconds": secs, "epoch_slots": epoch_slots, "start_slot": start_slot, "run_slots": len(run_slots),
    "accepted": {"votes": accepted["votes"], "kofn": accepted["kofn"]}, "votes_given_up": given_up, "both": len(both),
    "votes": {k: round(v, 3) if isinstance(v, float) else v for k, v in fig.get("votes", {}).items()},
    "kofn": {k: round(v, 3) if isinstance(v, float) else v for k, v in fig.get("kofn", {}).items()},
    "votes_free": {k: round(v, 3) if isinstance(v, float) else v for k, v in fig.get("votes_free", {}).items()},
    "kofn_free": {k: round(v, 3) if isinstance(v, float) else v for k, v in fig.get("kofn_free", {}).items()},
    "ratio_p50": round(ratio, 3) if ratio is not None else None,
    "ratio_p50_free": round(ratio_free, 3) if ratio_free is not None else None,
    "load_before": load_before.split("load average:")[-1].strip(),
    "load_after": load_after.split("load average:")[-1].strip()}))
if len(both) < 10 or differ:
    print(f"FAIL: {len(both)} slots accepted by both (at least 10 needed), {len(differ)} with different roots")
    sys.exit(1)
PY
