#!/usr/bin/env bash
# Root records against a real solana-test-validator 4.2.0: runs the validator with the aldb plugin
# (its default commitment, "confirmed") signing records with a freshly generated key, Hyades
# serving them, and the README's relayer flow: one aldb-relayer at its default level (finalized)
# and one at confirmed, both following Hyades. Then it checks the records Hyades serves
# (getRootRecords, which must equal the record log read directly) against the validator's RPC:
#   - the genesis hash in every record equals getGenesisHash, and equals SHA-256 of the ledger's
#     genesis.bin (the claim behind the plugin's `genesis_path`);
#   - slots get a confirmed record and, once rooted, a finalized one; none has two of a level;
#   - for several committed slots, blockhash, blockHeight and parentSlot equal getBlock's;
#   - consecutive records of each level chain (parentSlot and parentRecordHash name the previous
#     record of that level);
#   - every record hash and attestation verifies, signed by the generated key;
#   - each relayer accepted roots, each equal to the state root of its level's record of the slot,
#     and the finalized ones are at most getSlot(finalized).
# Its workload airdrops to two fresh accounts through the validator's faucet. Then
# ts/aldb-verify/examples/kit-proof.ts reads each with @solana/kit from the validator's RPC, at
# confirmed and at finalized, and proves that answer through Hyades against the root of the slot's
# record signed by 1 of the 3 configured identities (the plugin's key and two that sign nothing),
# naming the cluster's genesis hash: the lamports must be the airdrops', a never-funded account must
# be proven absent, and the same proof must be refused with 2 of 3 required, with only strangers'
# keys, and with another cluster's genesis hash. This step needs Node and the package's npm
# dependencies (`npm ci` when ts/aldb-verify/node_modules is missing).
# Everything listens on loopback. Ports and the run length come from the environment, so this can
# run beside another validator:
#   RPC_PORT (18899) FAUCET_PORT (19900) GOSSIP_PORT (18001) DYNAMIC_PORTS (18100-18200)
#   METRICS_PORT (19898) HYADES_PORT (18999) HYADES_METRICS_PORT (19899)
#   SECONDS_TO_RUN (30) CHECK_SLOTS (8)
# Usage: scripts/validator-records.sh [WORK_DIR]   (a fresh temporary directory by default)
# A WORK_DIR given is kept (run again on it to restart on the same ledger); a fresh one is removed
# when the run passes unless ALDB_KEEP_WORK=1, and kept (its path printed) when it fails.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/validator.sh
source scripts/lib/validator.sh
# shellcheck source=scripts/lib/packages.sh
source scripts/lib/packages.sh
validator_ports 18899 19900 18001 18100-18200 19898 18999 19899
SECONDS_TO_RUN="${SECONDS_TO_RUN:-30}"
CHECK_SLOTS="${CHECK_SLOTS:-8}"

validator="$(scripts/build-validator.sh)"
cargo build --release --locked -p aldb-plugin --bins --lib --example records-tool -p hyades -p aldb-cli -p aldb-relayer >&2
tool=target/release/examples/records-tool
ensure_packages nodejs:node npm:npm
(
  cd ts/aldb-verify
  [[ -d node_modules ]] || npm ci --no-audit --no-fund
  npm run -s build && npm run -s build:examples
) >&2
validator_workdir "${1:-}"
echo "work dir: $work" >&2
pid=""
hpid=""
rpids=""
# shellcheck disable=SC2154 # rc: the exit status, taken first thing in the trap
trap 'rc=$?; for p in $rpids $hpid $pid; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; validator_work_cleanup "$rc"' EXIT

# Run again on the same WORK_DIR to restart on the same ledger: the key is kept, and the records
# made after the restart must continue the chain without signing any slot twice.
if [[ -f "$work/attester.json" ]]; then
  identity="$(python3 -c 'import json,sys; k=json.load(open(sys.argv[1]))[32:]; n=int.from_bytes(bytes(k),"big"); A="123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"; s=""
while n: n,r=divmod(n,58); s=A[r]+s
print("1"*(len(k)-len(bytes(k).lstrip(b"\0")))+s)' "$work/attester.json")"
else
  identity="$(target/release/aldb keygen "$work/attester.json")"
fi
# The identities the proofs trust: the plugin's key and two keys that sign nothing, 1 of 3 needed.
if [[ ! -f "$work/identities.txt" ]]; then
  {
    echo "# the plugin's signing key"
    echo "$identity"
    echo "# keys of no running validator"
    target/release/aldb keygen --force "$work/other-1.json"
    target/release/aldb keygen --force "$work/other-2.json"
  } >"$work/identities.txt"
fi
cat > "$work/aldb.json5" <<JSON
{
  libpath: "$PWD/target/release/libaldb_plugin.so",
  snapshot_dir: "$work/snapshots",
  commitment: "confirmed",
  metrics_addr: "127.0.0.1:$METRICS_PORT",
  keypair: "$work/attester.json",
  // solana-test-validator writes the ledger's genesis before it loads plugins.
  genesis_path: "$work/ledger/genesis.bin",
}
JSON
"$validator" --ledger "$work/ledger" --geyser-plugin-config "$work/aldb.json5" "${validator_net[@]}" \
  --quiet >"$work/validator.log" 2>&1 &
pid=$!
rpc() { curl -s -X POST "127.0.0.1:$RPC_PORT" -H 'content-type: application/json' -d "$1"; }
# Not healthy in 60 s: go on (the wait for its first snapshot gives it longer); exited: stop.
health=0
wait_for_health "http://127.0.0.1:$RPC_PORT" 60 "$pid" "$work/validator.log" || health=$?
[[ "$health" != 2 ]] || exit 1
wait_for_snapshot "$work/snapshots" 60 || true
target/release/hyades --dir "$work/snapshots" --addr "127.0.0.1:$HYADES_PORT" \
  --metrics-addr "127.0.0.1:$HYADES_METRICS_PORT" >"$work/hyades.log" 2>&1 &
hpid=$!
# The README's relayer flow: the relayer's defaults (commitment "finalized"), and one following
# the confirmed records, each with its own cursor and output.
genesis="$(rpc '{"jsonrpc":"2.0","id":1,"method":"getGenesisHash"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["result"])')"
for level in finalized confirmed; do
  mkdir -p "$work/relayer-$level"
  extra=""
  [[ "$level" == confirmed ]] && extra='commitment: "confirmed",'
  cat > "$work/relayer-$level/relayer.json5" <<JSON
{
  endpoints: ["ws://127.0.0.1:$HYADES_PORT/ws"],
  identities: ["$identity"],
  threshold: 1,
  genesis_hash: "$genesis",
  $extra
  cursor_file: "cursor",
  output_file: "roots.txt",
}
JSON
  target/release/aldb-relayer --config "$work/relayer-$level/relayer.json5" >"$work/relayer-$level/stdout" 2>"$work/relayer-$level/log" &
  rpids="$rpids $!"
done
# The workload: airdrops through the validator's faucet to two fresh accounts (the first twice,
# so two slots write it), each waited for until confirmed.
airdrop() {
  local sig=""
  for _ in $(seq 30); do
    sig="$(rpc "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"requestAirdrop\",\"params\":[\"$1\",$2]}" |
      python3 -c 'import json,sys; print(json.load(sys.stdin).get("result") or "")')"
    [[ -n "$sig" ]] && break
    sleep 1
  done
  [[ -n "$sig" ]] || { echo "requestAirdrop $1 $2 failed" >&2; return 1; }
  for _ in $(seq 120); do
    rpc "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"getSignatureStatuses\",\"params\":[[\"$sig\"]]}" | python3 -c '
import json, sys
v = json.load(sys.stdin)["result"]["value"][0]
sys.exit(0 if v and v["err"] is None and v["confirmationStatus"] in ("confirmed", "finalized") else 1)' && return 0
    sleep 0.5
  done
  echo "airdrop $sig to $1 not confirmed" >&2
  return 1
}
funded_a="$(target/release/aldb keygen --force "$work/funded-a.json")"
funded_b="$(target/release/aldb keygen --force "$work/funded-b.json")"
never_funded="$(target/release/aldb keygen --force "$work/never-funded.json")"
airdrop "$funded_a" 1500000000
airdrop "$funded_b" 3000000000
airdrop "$funded_a" 250000000
slot_of() { rpc "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"getSlot\",\"params\":[{\"commitment\":\"$1\"}]}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["result"])'; }
workload_slot="$(slot_of confirmed)"
echo "workload: airdropped 1.75 SOL to $funded_a, 3 SOL to $funded_b, confirmed by slot $workload_slot" >&2
sleep "$SECONDS_TO_RUN"
# A loaded machine makes slots slower: wait (up to 5 minutes more) until the workload's slots and
# enough others are rooted, so both levels have records to check.
for _ in $(seq 300); do
  finalized="$(slot_of finalized)" || finalized=0
  (( finalized >= workload_slot && finalized >= CHECK_SLOTS + 2 )) && break
  sleep 1
done
echo "finalized slot $finalized (the workload's: $workload_slot)" >&2
# The plugin signs a rooted slot's record, and the relayers follow it, a moment later.
sleep 2
kill -0 "$pid" 2>/dev/null || { echo "validator exited:" >&2; tail -5 "$work/validator.log" >&2; exit 1; }
# The plugin's config check, now that the ledger (genesis.bin) exists.
target/release/aldb-config-check "$work/aldb.json5" >/dev/null
"$tool" dump "$work/snapshots" > "$work/records-log.json"
curl -s -X POST "127.0.0.1:$HYADES_PORT" -H 'content-type: application/json' \
  -d '{"jsonrpc":"2.0","id":1,"method":"getRootRecords","params":[0,5000]}' > "$work/records-hyades.json"
for level in finalized confirmed; do
  echo "relayer ($level): $(wc -l < "$work/relayer-$level/roots.txt" 2>/dev/null || echo 0) roots accepted; its log:" >&2
  grep -E 'waiting|accepted slot|no cursor|following' "$work/relayer-$level/log" | sed -n '1,4p;$p' >&2 || true
done
curl -s "127.0.0.1:$METRICS_PORT/metrics" | grep -E '^aldb_(records_|record_errors|block_metadata|slots_without|slots_committed)' || true

records_ok=0
python3 - "$work" "$RPC_PORT" "$identity" "$CHECK_SLOTS" <<'PY' || records_ok=1
import hashlib, json, sys, urllib.request
work, port, identity, check_slots = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

def rpc(method, params):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}", body, {"content-type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=10))

B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
def b58(b):
    n, out = int.from_bytes(b, "big"), ""
    while n:
        n, r = divmod(n, 58)
        out = B58[r] + out
    return "1" * (len(b) - len(b.lstrip(b"\0"))) + out

fail = []
logged = json.load(open(f"{work}/records-log.json"))
served = json.load(open(f"{work}/records-hyades.json"))
key = lambda r: (r["slot"], r["commitment"] == "finalized")
if "result" not in served:
    fail.append(f"getRootRecords: {served.get('error')}")
    records = sorted(logged, key=key)
else:
    # Hyades lists a slot's records in slot order, the log in the order they were logged.
    records = served["result"]["value"]
    # Hyades may have read the log a moment before the dump: compare the records both have.
    mine = sorted(logged, key=key)
    have = set(map(key, records)) & set(map(key, mine))
    a, b = [r for r in records if key(r) in have], [r for r in mine if key(r) in have]
    if not have or a != b:
        fail.append("Hyades' getRootRecords differs from the record log")
    print(f"Hyades serves {len(records)} records; the {len(have)} the record log also holds are equal")
levels = {c: [r for r in records if r["commitment"] == c] for c in ("confirmed", "finalized")}
for c, rs in levels.items():
    print(f"{c}: {len(rs)} records" + (f", slots {rs[0]['slot']}..{rs[-1]['slot']}" if rs else ""))
    if len(rs) < check_slots + 2:
        fail.append(f"only {len(rs)} {c} records")
    if len({r["slot"] for r in rs}) != len(rs):
        fail.append(f"two {c} records for one slot")
if not set(r["slot"] for r in levels["finalized"]) <= set(r["slot"] for r in levels["confirmed"]):
    fail.append("a finalized record for a slot with no confirmed record")

genesis = rpc("getGenesisHash", [])["result"]
file_hash = b58(hashlib.sha256(open(f"{work}/ledger/genesis.bin", "rb").read()).digest())
print(f"getGenesisHash {genesis}, SHA-256(genesis.bin) {file_hash}")
if genesis != file_hash:
    fail.append("genesis.bin does not hash to getGenesisHash")
bad = [r["slot"] for r in records if r["genesisHash"] != genesis]
if bad:
    fail.append(f"records with another genesis hash: {bad[:5]}")

# Signed by the generated key (the record hash and signature were verified by `records-tool
# dump`).
for r in records:
    ids = [a["identity"] for a in r["attestations"]]
    if ids != [identity]:
        fail.append(f"slot {r['slot']} {r['commitment']}: attestations {ids}")
        break
# A slot's two records differ in the level and the link only.
conf = {r["slot"]: r for r in levels["confirmed"]}
for f in levels["finalized"]:
    c = conf.get(f["slot"])
    if c and (c["stateRoot"], c["parentSlot"]) != (f["stateRoot"], f["parentSlot"]):
        fail.append(f"slot {f['slot']}: the finalized record's root or parent differs from the confirmed one's")

# Each level's chain: each record after the first names the previous one of its level.
for c, rs in levels.items():
    unchained = 0
    for prev, r in zip(rs, rs[1:]):
        if r["parentSlot"] != prev["slot"] or r["parentRecordHash"] != prev["recordHash"]:
            unchained += 1
            fail.append(f"{c} slot {r['slot']}: parent {r['parentSlot']} / {r['parentRecordHash']} does not link to slot {prev['slot']}")
    print(f"{c} chain: {len(rs) - 1 - unchained} of {max(len(rs) - 1, 0)} links hold")
records = levels["confirmed"]
with_block = [r for r in records if r["blockhash"] is not None]
with_bank = [r for r in records if r["parentBankHash"] is not None]
print(f"confirmed records with block metadata: {len(with_block)}; with the parent bank hash: {len(with_bank)}")

# The relayers' accepted roots: each the state root of its level's record of the slot.
finalized_slot = rpc("getSlot", [{"commitment": "finalized"}])["result"]
for c, rs in levels.items():
    by_slot = {r["slot"]: r["stateRoot"] for r in rs}
    try:
        lines = [l.split() for l in open(f"{work}/relayer-{c}/roots.txt").read().splitlines()]
    except FileNotFoundError:
        lines = []
    wrong = [s for s, root in lines if by_slot.get(int(s)) not in (None, root)]
    print(f"relayer at {c}: {len(lines)} roots accepted" + (f", slots {lines[0][0]}..{lines[-1][0]}" if lines else ""))
    if len(lines) < check_slots:
        fail.append(f"relayer at {c}: only {len(lines)} roots accepted")
    if wrong:
        fail.append(f"relayer at {c}: roots differ from the records at slots {wrong[:5]}")
    if c == "finalized" and lines and int(lines[-1][0]) > finalized_slot:
        fail.append(f"relayer at finalized accepted slot {lines[-1][0]} above getSlot(finalized) {finalized_slot}")

# Several committed slots against getBlock.
checked = 0
for r in with_block[-check_slots:]:
    res = rpc("getBlock", [r["slot"], {"transactionDetails": "none", "rewards": False,
                                       "maxSupportedTransactionVersion": 0, "commitment": "confirmed"}])
    blk = res.get("result")
    if blk is None:
        fail.append(f"slot {r['slot']}: getBlock: {res.get('error')}")
        continue
    got = (r["blockhash"], r["blockHeight"], r["parentSlot"])
    want = (blk["blockhash"], blk["blockHeight"], blk["parentSlot"])
    status = "ok" if got == want else "MISMATCH"
    print(f"slot {r['slot']}: blockhash {r['blockhash']} height {r['blockHeight']} parent {r['parentSlot']}: {status}")
    if got != want:
        fail.append(f"slot {r['slot']}: record {got}, getBlock {want}")
    checked += 1
if checked < check_slots:
    fail.append(f"only {checked} slots checked against getBlock")

for f in fail:
    print("FAIL", f)
print("records check:", "FAILED" if fail else f"passed ({checked} slots against getBlock)")
sys.exit(1 if fail else 0)
PY

# @solana/kit reads the workload's accounts from the validator's RPC; @aldb/verify proves what it
# read against a quorum-attested root.
kit=(node ts/aldb-verify/build/examples/kit-proof.js --solana "http://127.0.0.1:$RPC_PORT"
  --hyades "http://127.0.0.1:$HYADES_PORT" --genesis-hash "$genesis")
kit_ok=0
prove() {  # prove WANT ADDRESS [ARGS]: proves at confirmed and at finalized, expects WANT lamports or "absent"
  local want="$1" addr="$2" level out
  shift 2
  for level in confirmed finalized; do
    if ! out="$("${kit[@]}" --identities "$work/identities.txt" --threshold 1 --commitment "$level" "$@" "$addr" 2>&1)"; then
      echo "FAIL kit-proof $addr at $level: $out"
      kit_ok=1
      continue
    fi
    echo "$out"
    # The validator's own answer at that level, besides the one the example proved.
    balance="$(rpc "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"getBalance\",\"params\":[\"$addr\",{\"commitment\":\"$level\"}]}" |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["result"]["value"])')" || balance="(getBalance failed)"
    case "$want" in
      absent) [[ "$out" == "$addr: absent at slot "* && "$balance" == 0 ]] ;;
      *) [[ "$out" == "$addr: $want lamports at slot "* && "$balance" == "$want" ]] ;;
    esac || { echo "FAIL kit-proof $addr at $level: expected $want (getBalance: $balance)"; kit_ok=1; }
    # A finalized read must be proven under a finalized record, not the slot's confirmed one.
    [[ "$level" == confirmed || "$out" == *" of the finalized record "* ]] || { echo "FAIL kit-proof $addr: not a finalized record"; kit_ok=1; }
  done
}
refused() {  # refused CODE ADDRESS ARGS...: the example must fail with error CODE
  local code="$1" addr="$2" out
  shift 2
  if out="$("${kit[@]}" "$@" "$addr" 2>&1)"; then
    echo "FAIL kit-proof $* accepted: $out"
    kit_ok=1
  elif [[ "$out" != *"error: $code: "* ]]; then
    echo "FAIL kit-proof $*: refused, but not with $code: $out"
    kit_ok=1
  else
    echo "refused as expected ($*): $out"
  fi
}
prove 1750000000 "$funded_a"
prove 3000000000 "$funded_b"
prove absent "$never_funded"
refused quorum "$funded_a" --identities "$work/identities.txt" --threshold 2
grep -v "^$identity\$" "$work/identities.txt" >"$work/strangers.txt"
refused quorum "$funded_a" --identities "$work/strangers.txt" --threshold 1
# Another cluster's genesis hash (the last --genesis-hash given wins).
refused genesis_hash "$funded_a" --identities "$work/identities.txt" --threshold 1 --genesis-hash "$identity"
echo "kit-proof check: $([[ $kit_ok == 0 ]] && echo passed || echo FAILED)"
exit $((records_ok | kit_ok))
