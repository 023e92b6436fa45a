#!/usr/bin/env bash
# The replay cost of aldb_state_root_in_bank_hash (BENCHMARKS.md §11). Twice, once with the
# feature active at genesis and once without, the patched solana-test-validator runs the load of
# scripts/validator-load.sh (`aldb-scenario load`: TPS system transfers per second for SECONDS,
# defaults 100 and 60, with the stock plugin loaded as there), and the validator is stopped. Then,
# ROUNDS times (default 5), a fresh copy of each ledger is replayed from genesis by
# aldb-ledger-replay (validator-patches/replay), feature-on and feature-off alternated so that a
# changing machine load hits both alike; every replay must reach the node's bank hash for every
# slot. Printed per round and as the median over rounds: the replay time per slot over the load
# window's slots (p50/p99/mean) with and without the feature and their ratio; then the node's own
# freeze-time root (`freeze_us`, `aldb_us` of its `aldb: slot ...` lines) over the same slots, and
# the replays'; a last JSON line. `uptime` is printed before and after (the machine is shared).
# With ALDB_EPOCH_SET=1 a third ledger is made and replayed in each round, "set": both aldb
# features active at genesis (`--aldb-state-root --aldb-epoch-set`, the bank hash binding the
# next epoch's set beside the root, BENCHMARKS.md §12), and its ratios to "on" (the root alone)
# and to "off" are printed and put in the JSON line too.
# Usage: scripts/validator-replay-bench.sh [TPS] [SECONDS] [ROUNDS]. Ports as scripts/validator-patched.sh
# (RPC_PORT, FAUCET_PORT, GOSSIP_PORT, DYNAMIC_PORTS, METRICS_PORT).
# ALDB_PATCHED_BIN names an already built bin directory instead of running the build script.
# Both ledgers, their replay copies and the logs go to a fresh temporary work directory (printed),
# removed when the run passes unless ALDB_KEEP_WORK=1, kept when it fails.
set -euo pipefail
cd "$(dirname "$0")/.."
tps="${1:-100}"
secs="${2:-60}"
rounds="${3:-5}"
# shellcheck source=scripts/lib/validator.sh
source scripts/lib/validator.sh
validator_ports 8899 9900 10100 10000-10100 9898
bin="$(patched_validator_bin)"
cargo build --release --locked -p aldb-plugin -p hyades -p aldb-cli -p aldb-scenario >&2
validator_workdir
echo "work dir: $work"
vpid=""
# shellcheck disable=SC2154 # rc: the exit status, taken first thing in the trap
trap 'rc=$?; [[ -n "$vpid" ]] && kill "$vpid" 2>/dev/null; wait 2>/dev/null || true; validator_work_cleanup "$rc"' EXIT
echo "$(nproc) cores, $(uptime)"

modes=(on off)
[[ "${ALDB_EPOCH_SET:-0}" == 1 ]] && modes=(set on off)

load() { # load set|on|off: a ledger under load
  local mode=$1 dir="$work/$1" flag=()
  [[ "$mode" == on ]] && flag=(--aldb-state-root)
  [[ "$mode" == set ]] && flag=(--aldb-state-root --aldb-epoch-set)
  mkdir -p "$dir"
  cat >"$dir/aldb.json5" <<JSON
{
  libpath: "$PWD/target/release/libaldb_plugin.so",
  snapshot_dir: "$dir/snapshots",
  commitment: "confirmed",
  metrics_addr: "127.0.0.1:$METRICS_PORT",
}
JSON
  "$bin/solana-test-validator" "${flag[@]}" --ledger "$dir/ledger" --geyser-plugin-config "$dir/aldb.json5" \
    "${validator_net[@]}" --log >"$dir/validator.log" 2>&1 &
  vpid=$!
  echo "== feature $mode: load, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  target/release/aldb-scenario load --rpc "http://127.0.0.1:$RPC_PORT" --metrics "http://127.0.0.1:$METRICS_PORT/metrics" \
    --tps "$tps" --secs "$secs" | tee "$dir/load.out"
  stop_validator "$dir/ledger" "$vpid"
  vpid=""
}

replay() { # replay set|on|off ROUND: a fresh copy of the ledger, from genesis
  local dir="$work/$1" copy="$work/$1/replay"
  rm -rf "$copy"
  mkdir -p "$copy"
  cp "$dir/ledger/genesis.bin" "$copy/"
  cp -r "$dir/ledger/rocksdb" "$copy/"
  "$bin/aldb-ledger-replay" "$copy" >"$dir/replay-$2.out" 2>"$dir/replay-$2.log" ||
    { tail -n5 "$dir/replay-$2.log"; echo "FAIL: the replay of the feature-$1 ledger exited non-zero"; exit 1; }
  echo "round $2, feature $1: $(tail -n1 "$dir/replay-$2.out"), load average $(cut -d' ' -f1 /proc/loadavg)"
}

for m in "${modes[@]}"; do
  load "$m"
done
for r in $(seq "$rounds"); do
  for m in "${modes[@]}"; do
    replay "$m" "$r"
  done
done
echo "after: $(uptime)"

python3 - "$work" "$tps" "$secs" "$rounds" "${modes[@]}" <<'PY'
import json, math, re, sys

work, tps, secs, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
modes = sys.argv[5:]

def q(v, p):
    v = sorted(v)
    return v[max(1, math.ceil(p / 100 * len(v))) - 1] if v else 0

def window(mode):
    m = re.search(r"^slots (\d+)\.\.(\d+):", open(f"{work}/{mode}/load.out").read(), re.M)
    return int(m.group(1)), int(m.group(2))

def replay(mode, r, lo, hi):
    t = []
    for line in open(f"{work}/{mode}/replay-{r}.out"):
        m = re.match(r"slot (\d+) parent \d+ hash \S+ replay_us (\d+)", line)
        if m and lo <= int(m.group(1)) <= hi:
            t.append(int(m.group(2)))
    return t

def freeze(path, lo, hi):
    f, a = [], []
    for line in open(path):
        m = re.search(r"aldb: slot (\d+) root \S+ h \S+ mixed \S+ freeze_us (\d+) aldb_us (\d+)", line)
        if m and lo <= int(m.group(1)) <= hi:
            f.append(int(m.group(2)))
            a.append(int(m.group(3)))
    return f, a

def median(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2

out = {"tps": tps, "secs": secs, "rounds": rounds}
stats = {m: [] for m in modes}
for mode in modes:
    lo, hi = window(mode)
    out[mode] = {"window": [lo, hi]}
    for r in range(1, rounds + 1):
        t = replay(mode, r, lo, hi)
        stats[mode].append({"slots": len(t), "p50": q(t, 50), "p99": q(t, 99), "mean": sum(t) / max(1, len(t))})
for r in range(rounds):
    on, off = stats["on"][r], stats["off"][r]
    print(f"round {r + 1}: replay per slot on/off p50 {on['p50']}/{off['p50']} us ({on['p50'] / off['p50']:.3f}x), "
          f"p99 {on['p99']}/{off['p99']} us ({on['p99'] / off['p99']:.3f}x), "
          f"mean {on['mean']:.0f}/{off['mean']:.0f} us ({on['mean'] / off['mean']:.3f}x)")
for mode in modes:
    for k in ("p50", "p99", "mean"):
        out[mode][f"replay_us_{k}"] = round(median([s[k] for s in stats[mode]]))
    out[mode]["slots"] = stats[mode][0]["slots"]
    lo, hi = out[mode]["window"]
    print(f"feature {mode}: slots {lo}..{hi} ({out[mode]['slots']} replayed), median over {rounds} rounds: "
          f"replay per slot p50 {out[mode]['replay_us_p50']} us, p99 {out[mode]['replay_us_p99']} us, "
          f"mean {out[mode]['replay_us_mean']} us")
for k in ("p50", "p99", "mean"):
    out[f"ratio_{k}"] = round(median([stats["on"][r][k] / stats["off"][r][k] for r in range(rounds)]), 3)
print(f"replay with / without the feature, median of the rounds' ratios: p50 {out['ratio_p50']}x, "
      f"p99 {out['ratio_p99']}x, mean {out['ratio_mean']}x")
if "set" in modes:
    for base in ("on", "off"):
        for k in ("p50", "p99", "mean"):
            out[f"ratio_set_vs_{base}_{k}"] = round(median([stats["set"][r][k] / stats[base][r][k] for r in range(rounds)]), 3)
        print(f"replay with the set bound / {'the root alone' if base == 'on' else 'neither feature'}, median of the "
              f"rounds' ratios: p50 {out[f'ratio_set_vs_{base}_p50']}x, p99 {out[f'ratio_set_vs_{base}_p99']}x, "
              f"mean {out[f'ratio_set_vs_{base}_mean']}x")
logs = []
for mode in [m for m in modes if m != "off"]:
    suffix = "" if mode == "on" else f"_{mode}"
    logs += [(f"node{suffix}", mode, [f"{work}/{mode}/validator.log"]),
             (f"replays{suffix}", mode, [f"{work}/{mode}/replay-{r}.log" for r in range(1, rounds + 1)])]
for name, mode, paths in logs:
    lo, hi = window(mode)
    f, a = [], []
    for path in paths:
        ff, aa = freeze(path, lo, hi)
        f += ff
        a += aa
    out[f"freeze_{name}"] = {"banks": len(f), "freeze_us_p50": q(f, 50), "freeze_us_p99": q(f, 99),
                             "aldb_us_p50": q(a, 50), "aldb_us_p99": q(a, 99),
                             "aldb_us_mean": round(sum(a) / max(1, len(a)))}
    print(f"freeze-time root ({name}, {len(f)} banks): freeze_us p50 {q(f, 50)} p99 {q(f, 99)}; "
          f"aldb_us p50 {q(a, 50)} p99 {q(a, 99)} mean {out[f'freeze_{name}']['aldb_us_mean']}")
print(json.dumps(out, separators=(",", ":")))
PY
