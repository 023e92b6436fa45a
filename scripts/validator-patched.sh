#!/usr/bin/env bash
# The patched solana-test-validator (validator-patches/, built by scripts/build-patched-validator.sh)
# end to end, with aldb_state_root_in_bank_hash active at genesis, on loopback:
#
#  1. run 1, a fresh ledger, the stock aldb plugin, the block-metadata probe and Hyades: the
#     account workload of scripts/validator-scenario.sh (`aldb-scenario run`: transfers, an SPL
#     Token mint and accounts, accounts closed and drained to zero, each proven through Hyades and
#     compared with the validator's RPC), then, once the validator has written a ledger snapshot,
#     the workload again with new keys, then SECONDS more. Checked: slots are rooted; the probe got
#     end-of-startup and block metadata V0_0_5 for every bank with bank_hash == sha256(h || root);
#     the validator's own TowerSync votes carry those hashes; the roots the stock plugin commits
#     (served by Hyades) equal the in-process module's; the module's own writer (ALDB_BANK_CONFIG,
#     aldb-bank's README) wrote a second snapshot directory that a second Hyades serves, with the
#     same roots. The validator is stopped (admin RPC exit).
#  2. replay: a copy of run 1's ledger (genesis and blockstore, no snapshot) is replayed from
#     genesis in a second process by aldb-ledger-replay (validator-patches/replay), which must
#     reach the bank hash run 1 logged for every slot both have (and the one the node recorded in
#     its blockstore).
#  3. restart: the patched test validator starts again on run 1's ledger, from its own latest
#     snapshot; the module rebuilds the tree from the snapshot's accounts and must log that it
#     "matches its bank hash", and every slot it replays from the ledger must get run 1's bank
#     hash, the second workload's transaction slots among them.
#
# With ALDB_EPOCH_SET=1, aldb_epoch_set_in_bank_hash is active at genesis too (`--aldb-epoch-set`)
# and epochs are 32 slots (`--slots-per-epoch 32`), so the run crosses many epoch boundaries:
# then every bank hash must be sha256(h || root || next_set_hash), every bank's set must decode
# (docs/SPEC.md §11.2), be for the epoch after the bank's, hash to its next_set_hash and be the one
# set every bank of that epoch binds, and its members and stakes must be the validator's own
# (getVoteAccounts, the vote account's authorized voter from getAccountInfo); replay and restart
# then check that the set is reproduced with every hash.
#
# Prints the module's freeze time p50/p99 (the `freeze_us` of run 1's `aldb: slot ...` lines) and
# a last JSON line with the counts. Exits non-zero at the first failed check.
# Usage: scripts/validator-patched.sh [SECONDS] (default 20). The ledger, its replay copy, the
# snapshot directories and logs go to a fresh temporary work directory (printed), removed when
# the run passes unless ALDB_KEEP_WORK=1, kept when it fails.
# Ports as scripts/validator-smoke.sh (RPC_PORT, FAUCET_PORT, GOSSIP_PORT, DYNAMIC_PORTS,
# METRICS_PORT, HYADES_PORT, HYADES_METRICS_PORT). ALDB_PATCHED_BIN names an already built bin
# directory instead of running the build script (whose cargo step rebuilds the runtime whenever
# aldb-bank or what it links changed).
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-20}"
# shellcheck source=scripts/lib/validator.sh
source scripts/lib/validator.sh
validator_ports 8899 9900 10100 10000-10100 9898 8999 9899
HYADES_PORT2="${HYADES_PORT2:-8998}"
HYADES_METRICS_PORT2="${HYADES_METRICS_PORT2:-9897}"
bin="$(patched_validator_bin)"
# The same package set as the other validator scripts, so the plugin is not rebuilt with other features.
cargo build --release --locked -p aldb-plugin -p hyades -p aldb-cli -p aldb-scenario >&2
validator_workdir
echo "work dir: $work"
vpid=""
hpid=""
hpid2=""
cleanup() {
  local rc=$?
  [[ -n "$hpid2" ]] && kill "$hpid2" 2>/dev/null || true
  [[ -n "$hpid" ]] && kill "$hpid" 2>/dev/null || true
  [[ -n "$vpid" ]] && kill "$vpid" 2>/dev/null || true
  wait 2>/dev/null || true
  validator_work_cleanup "$rc"
}
trap cleanup EXIT
t0=$(date +%s)
rpc_url="http://127.0.0.1:$RPC_PORT"
hyades_url="http://127.0.0.1:$HYADES_PORT"

epoch_flags=()
if [[ "${ALDB_EPOCH_SET:-0}" == 1 ]]; then
  epoch_flags=(--aldb-epoch-set --slots-per-epoch 32)
fi
start_validator() { # start_validator LOG [--geyser-plugin-config FILE]...
  local log=$1
  shift
  "$bin/solana-test-validator" --aldb-state-root "${epoch_flags[@]}" --ledger "$work/ledger" "$@" "${validator_net[@]}" \
    --log >"$log" 2>&1 &
  vpid=$!
}

# "SLOT HASH" lines sorted as join(1) wants them (as text), one per slot.
frozen_hashes() { # frozen_hashes LOG: every `bank frozen` line's slot and hash
  sed -n 's/.*bank frozen: \([0-9]*\) hash: \([1-9A-HJ-NP-Za-km-z]*\) .*/\1 \2/p' "$1" | sort -u -k1,1
}
last_slot() { cut -d' ' -f1 "$1" | sort -n | tail -n1; } # last_slot HASHES

echo "== run 1: fresh ledger, feature active at genesis, stock plugin, probe, Hyades"
cat >"$work/aldb.json5" <<JSON
{
  libpath: "$PWD/target/release/libaldb_plugin.so",
  snapshot_dir: "$work/snapshots",
  commitment: "confirmed",
  keep_slots: 100000,
  metrics_addr: "127.0.0.1:$METRICS_PORT",
}
JSON
cat >"$work/probe.json" <<JSON
{"libpath": "$bin/libaldb_block_metadata_probe.so", "block_metadata_version": 5}
JSON
# The in-process writer of the module (no plugin involved) writes its own directory.
cat >"$work/bank.json" <<JSON
{"snapshot_dir": "$work/inproc", "keep_slots": 100000}
JSON
export ALDB_BANK_CONFIG="$work/bank.json"
start_validator "$work/validator.log" --geyser-plugin-config "$work/aldb.json5" --geyser-plugin-config "$work/probe.json"
unset ALDB_BANK_CONFIG
wait_for_snapshot "$work/snapshots" 120 || true
target/release/hyades --dir "$work/snapshots" --addr "127.0.0.1:$HYADES_PORT" \
  --metrics-addr "127.0.0.1:$HYADES_METRICS_PORT" >"$work/hyades.log" 2>&1 &
hpid=$!
wait_for_snapshot "$work/inproc" 60 || true
target/release/hyades --dir "$work/inproc" --addr "127.0.0.1:$HYADES_PORT2" \
  --metrics-addr "127.0.0.1:$HYADES_METRICS_PORT2" >"$work/hyades2.log" 2>&1 &
hpid2=$!
target/release/aldb-scenario run --rpc "$rpc_url" --hyades "$hyades_url" --seed 1
echo "== waiting for the validator's first ledger snapshot"
wait_for_ledger_snapshot "$work/ledger" 900 || { echo "FAIL: no ledger snapshot after 900 s"; exit 1; }
target/release/aldb-scenario run --rpc "$rpc_url" --hyades "$hyades_url" --seed 2 | tee "$work/scenario2.log"
tx_slots=$(sed -n 's/^tx slots: //p' "$work/scenario2.log")
sleep "$secs"
grep -m3 'aldb:' "$work/validator.log" || true
curl -s "127.0.0.1:$METRICS_PORT/metrics" | grep -E '^aldb_(slots_committed|callback_(errors|panics))' || true
python3 - "$work" "$RPC_PORT" "$HYADES_PORT" "$HYADES_PORT2" <<'PY'
import hashlib, json, os, sys, urllib.request

work, rpc_port, hyades_port, hyades_port2 = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

def b58encode(b):
    n = int.from_bytes(b, "big")
    out = ""
    while n:
        n, r = divmod(n, 58)
        out = B58[r] + out
    return "1" * (len(b) - len(b.lstrip(b"\0"))) + out

def b58decode(s):
    n = 0
    for c in s:
        n = n * 58 + B58.index(c)
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return b"\0" * (len(s) - len(s.lstrip("1"))) + raw

def call(port, method, params):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}", body, {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)

def varint(b, i):
    v = shift = 0
    while True:
        x = b[i]; i += 1
        v |= (x & 0x7F) << shift; shift += 7
        if x < 0x80:
            return v, i

def tower_sync(data):
    """(voted slot, bank hash) of a TowerSync / TowerSyncSwitch vote instruction, else None."""
    kind = int.from_bytes(data[:4], "little")
    if kind not in (14, 15):
        return None
    root = int.from_bytes(data[4:12], "little")
    n, i = varint(data, 12)
    slot = 0 if root == 2**64 - 1 else root
    for _ in range(n):
        off, i = varint(data, i)
        i += 1  # confirmation count
        slot += off
    return slot, data[i:i + 32].hex()

fail = []
banks, rooted, end_of_startup, older = {}, set(), False, 0
with open(f"{work}/probe.json.jsonl") as f:
    for line in f:
        e = json.loads(line)
        if e.get("end_of_startup"):
            end_of_startup = True
        elif e.get("status") == "rooted":
            rooted.add(e["slot"])
        elif "bank_hash" in e:
            banks[e["slot"]] = e
        elif e.get("version") == "older":
            older += 1
print(f"probe: {len(banks)} banks with V0_0_5, {len(rooted)} rooted statuses, end_of_startup={end_of_startup}, older versions={older}")
if not end_of_startup:
    fail.append("no notify_end_of_startup on a start from genesis")
if len(rooted) < 10:
    fail.append(f"only {len(rooted)} rooted slots")
if older:
    fail.append(f"{older} block metadata of an older version reached the probe")
epoch_set = os.environ.get("ALDB_EPOCH_SET") == "1"
sched = call(rpc_port, "getEpochSchedule", [])["result"]
def epoch_of(slot):
    # SPEC §11.2's epoch(S); the test validator's schedule with --slots-per-epoch has no warmup.
    if slot < sched["firstNormalSlot"]:
        e = 0
        while 32 * (2 ** (e + 1) - 1) <= slot:
            e += 1
        return e
    return sched["firstNormalEpoch"] + (slot - sched["firstNormalSlot"]) // sched["slotsPerEpoch"]

def decode_set(enc):
    epoch, total, n = int.from_bytes(enc[0:8], "little"), int.from_bytes(enc[8:16], "little"), int.from_bytes(enc[16:20], "little")
    assert len(enc) == 20 + 72 * n, f"length {len(enc)} for {n} members"
    members = [(enc[20 + 72 * i:52 + 72 * i], enc[52 + 72 * i:84 + 72 * i], int.from_bytes(enc[84 + 72 * i:92 + 72 * i], "little")) for i in range(n)]
    assert [m[0] for m in members] == sorted(m[0] for m in members), "members not sorted"
    return epoch, total, members

mixed = 0
sets = {}  # epoch of the set -> (hash, encoding)
for s, e in sorted(banks.items()):
    if e["aldb_root"] is None:
        fail.append(f"slot {s}: no aldb root"); continue
    inputs = bytes.fromhex(e["h"]) + bytes.fromhex(e["aldb_root"])
    if epoch_set:
        if e.get("next_set_hash") is None:
            fail.append(f"slot {s}: no next_set_hash with the epoch-set feature active"); continue
        nsh = bytes.fromhex(e["next_set_hash"])
        inputs += nsh
        enc = bytes.fromhex(e["next_set"])
        if nsh == bytes(32):
            fail.append(f"slot {s}: binds no set (the test validator's offset makes every bank hold the next)")
        elif hashlib.sha256(b"aldb-epoch-set-v1" + enc).digest() != nsh:
            fail.append(f"slot {s}: the set's encoding does not hash to its next_set_hash")
        else:
            epoch, total, members = decode_set(enc)
            if epoch != epoch_of(s) + 1:
                fail.append(f"slot {s} (epoch {epoch_of(s)}): binds the set of epoch {epoch}")
            prev = sets.setdefault(epoch, (nsh, enc))
            if prev[0] != nsh:
                fail.append(f"slot {s}: a second set for epoch {epoch} on one fork")
    elif e.get("next_set_hash") is not None:
        fail.append(f"slot {s}: a next_set_hash without the epoch-set feature")
    want = hashlib.sha256(inputs).hexdigest()
    if want != e["bank_hash"]:
        fail.append(f"slot {s}: bank hash {e['bank_hash']} != sha256(h || root{' || next_set_hash' if epoch_set else ''}) {want}")
    else:
        mixed += 1
print(f"bank_hash == sha256(h || aldb_root{' || next_set_hash' if epoch_set else ''}): {mixed} of {len(banks)} banks")
if epoch_set:
    print(f"sets bound: epochs {sorted(sets)}")
    if len(sets) < 4:
        fail.append(f"sets of only {len(sets)} epochs bound: the run must cross at least three boundaries")
    # The set is the validator's own: its vote accounts, their stakes and their voters.
    va = call(rpc_port, "getVoteAccounts", [])["result"]
    staked = {v["votePubkey"]: v["activatedStake"] for v in va["current"] + va["delinquent"] if v["activatedStake"] > 0}
    newest = max(sets)
    epoch, total, members = decode_set(sets[newest][1])
    got = {}
    for vote, voter, stake in members:
        key = b58encode(vote)
        got[key] = stake
        acct = call(rpc_port, "getAccountInfo", [key, {"encoding": "jsonParsed"}])["result"]["value"]
        voters = acct["data"]["parsed"]["info"]["authorizedVoters"]
        if b58encode(voter) not in [a["authorizedVoter"] for a in voters]:
            fail.append(f"set of epoch {epoch}: {key}'s voter {b58encode(voter)} is not among {voters}")
    if got != staked:
        fail.append(f"set of epoch {epoch}: members {got} differ from getVoteAccounts' staked {staked}")
    if sum(got.values()) > total:
        fail.append(f"set of epoch {epoch}: stakes exceed the total {total}")
    print(f"set of epoch {epoch}: {len(members)} members, total stake {total}, equal to getVoteAccounts")

# Votes: the validator's TowerSync votes in the blocks of the run carry the bank hash of the slot
# they vote for.
finalized = call(rpc_port, "getSlot", [{"commitment": "finalized"}])["result"]
print(f"finalized slot: {finalized}")
votes = agree = 0
for s in range(max(1, finalized - 40), finalized + 1):
    r = call(rpc_port, "getBlock", [s, {"encoding": "json", "transactionDetails": "full", "rewards": False,
                                         "maxSupportedTransactionVersion": 0, "commitment": "finalized"}])
    block = r.get("result")
    if not block:
        continue
    for tx in block["transactions"]:
        msg = tx["transaction"]["message"]
        keys = msg["accountKeys"]
        for ix in msg["instructions"]:
            if keys[ix["programIdIndex"]] != "Vote111111111111111111111111111111111111111":
                continue
            v = tower_sync(b58decode(ix["data"]))
            if v is None or v[0] not in banks:
                continue
            votes += 1
            if v[1] == banks[v[0]]["bank_hash"]:
                agree += 1
            else:
                fail.append(f"vote for slot {v[0]} carries {v[1]}, the bank hash is {banks[v[0]]['bank_hash']}")
print(f"votes decoded: {votes}, carrying the mixed bank hash: {agree}")
if votes == 0:
    fail.append("no TowerSync vote found in the finalized blocks")

# The stock plugin's tree and the in-process module agree on the roots Hyades serves; so do the
# files the module's own writer wrote, served by the second Hyades.
for name, port in (("plugin", hyades_port), ("in-process writer", hyades_port2)):
    try:
        newest = call(port, "getStateRoot", [])["result"]["value"]["slot"]
        roots = call(port, "getStateRoots", [max(0, newest - 50), newest])["result"]["value"]
    except Exception as err:
        fail.append(f"the {name}'s Hyades does not answer: {err}")
        continue
    same = 0
    for r in roots:
        e = banks.get(r["slot"])
        if e is None or e["aldb_root"] is None:
            continue
        if b58decode(r["root"]).rjust(32, b"\0").hex() == e["aldb_root"]:
            same += 1
        else:
            fail.append(f"slot {r['slot']}: the {name}'s root {r['root']} differs from the bank's")
    print(f"{name} roots served by Hyades equal to the in-process roots: {same} of {len(roots)} (newest slot {newest})")
    if same == 0:
        fail.append(f"no {name} root could be compared")
for f in fail[:20]:
    print("FAIL", f)
sys.exit(1 if fail else 0)
PY
echo "== stopping run 1"
stop_validator "$work/ledger" "$vpid"
vpid=""
kill "$hpid" "$hpid2" 2>/dev/null || true
wait "$hpid" "$hpid2" 2>/dev/null || true
hpid=""
hpid2=""
frozen_hashes "$work/validator.log" >"$work/hashes1"
last1=$(last_slot "$work/hashes1")
echo "run 1: $(wc -l <"$work/hashes1") frozen banks, last slot $last1; ledger snapshots: $(ls "$work/ledger" | grep -E '^(incremental-)?snapshot-' | tr '\n' ' ')"

# Run 1's freeze times, from the node's own log.
freeze=$(sed -n 's/.*aldb: slot [0-9]* root .* freeze_us \([0-9]*\) aldb_us \([0-9]*\).*/\1 \2/p' "$work/validator.log" |
  python3 -c '
import math, sys
rows = [tuple(map(int, l.split())) for l in sys.stdin if l.strip()]
def q(v, p):
    v = sorted(v)
    return v[max(1, math.ceil(p / 100 * len(v))) - 1] if v else 0
f, a = [r[0] for r in rows], [r[1] for r in rows]
print(len(rows), q(f, 50), q(f, 99), max(f, default=0), q(a, 50), q(a, 99))')
read -r nfreeze f50 f99 fmax a50 a99 <<<"$freeze"
echo "run 1 freeze-time root over $nfreeze banks: freeze_us p50 $f50 p99 $f99 max $fmax; aldb_us p50 $a50 p99 $a99"

echo "== replay: a copy of run 1's ledger from genesis in a second process"
mkdir -p "$work/replay"
cp "$work/ledger/genesis.bin" "$work/replay/"
cp -r "$work/ledger/rocksdb" "$work/replay/"
"$bin/aldb-ledger-replay" "$work/replay" >"$work/replay.out" 2>"$work/replay.log" ||
  { tail -n5 "$work/replay.log"; echo "FAIL: the replay exited non-zero"; exit 1; }
tail -n1 "$work/replay.out"
sed -n 's/^slot \([0-9]*\) parent [0-9]* hash \([1-9A-HJ-NP-Za-km-z]*\) .*/\1 \2/p' "$work/replay.out" | sort -u -k1,1 >"$work/hashes-replay"
replay_same=$(join "$work/hashes1" "$work/hashes-replay" | awk '$2 == $3' | wc -l)
replay_diff=$(join "$work/hashes1" "$work/hashes-replay" | awk '$2 != $3' | wc -l)
echo "replay: $(wc -l <"$work/hashes-replay") slots replayed, $replay_same with run 1's bank hash, $replay_diff different"
(( replay_diff == 0 )) || { join "$work/hashes1" "$work/hashes-replay" | awk '$2 != $3' | head; echo "FAIL: replayed bank hashes differ"; exit 1; }
(( replay_same >= 100 )) || { echo "FAIL: only $replay_same replayed slots compared"; exit 1; }

echo "== run 2: restart on run 1's ledger, from its own snapshot"
start_validator "$work/validator2.log"
for _ in $(seq 300); do
  frozen_hashes "$work/validator2.log" >"$work/hashes2"
  s=$(last_slot "$work/hashes2")
  [[ -n "$s" ]] && ((s > last1)) && break
  kill -0 "$vpid" 2>/dev/null || { tail -n20 "$work/validator2.log"; echo "FAIL: the restarted validator exited"; exit 1; }
  sleep 1
done
stop_validator "$work/ledger" "$vpid"
vpid=""
grep -m1 'aldb: built the tree at slot' "$work/validator2.log" || true
grep -m1 'aldb: the tree at slot .* matches its bank hash' "$work/validator2.log" ||
  { echo "FAIL: run 2 did not check its rebuilt tree against the snapshot bank's hash"; exit 1; }
frozen_hashes "$work/validator2.log" >"$work/hashes2"
restart_same=$(join "$work/hashes1" "$work/hashes2" | awk '$2 == $3' | wc -l)
restart_diff=$(join "$work/hashes1" "$work/hashes2" | awk '$2 != $3' | wc -l)
echo "run 2: $restart_same slots replayed from the ledger with run 1's bank hash, $restart_diff different (first $(cut -d' ' -f1 "$work/hashes2" | sort -n | head -n1))"
(( restart_diff == 0 )) || { join "$work/hashes1" "$work/hashes2" | awk '$2 != $3' | head; echo "FAIL: restarted bank hashes differ"; exit 1; }
(( restart_same >= 1 )) || { echo "FAIL: run 2 re-froze none of run 1's slots"; exit 1; }
for s in $tx_slots; do
  join <(echo "$s") <(join "$work/hashes1" "$work/hashes2") | grep -q . ||
    { echo "FAIL: slot $s (a transaction of the second workload) was not re-frozen with run 1's hash"; exit 1; }
done
echo "the second workload's transaction slots ($tx_slots) re-frozen with run 1's hashes"
echo "{\"banks\":$(wc -l <"$work/hashes1"),\"replay_same\":$replay_same,\"restart_same\":$restart_same,\"freeze_us_p50\":$f50,\"freeze_us_p99\":$f99,\"aldb_us_p50\":$a50,\"aldb_us_p99\":$a99,\"seconds\":$(($(date +%s) - t0))}"
echo "validator-patched passed"
