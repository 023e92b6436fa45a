#!/usr/bin/env bash
# The vote-chain light client end to end (docs/SPEC.md §10): the patched solana-test-validator
# (scripts/build-patched-validator.sh) with aldb_state_root_in_bank_hash active at genesis, the
# plugin built against the patched interface (scripts/build-patched-plugin.sh) with
# `block_metadata_version: 5` and `vote_evidence: true`, Hyades on its directory, and the account
# workload of tools/scenario. Then:
#   - the validator set is read from the validator's RPC: getVoteAccounts for each vote account,
#     its node identity and activated stake, and the vote account's own state for its authorized
#     voter, written to a file. (On solana-test-validator 4.2.0 the authorized voter is the vote
#     account's own key, not the node identity: its votes carry two signatures, the node's as fee
#     payer and the vote account's as voter. A set naming the node identity as the voter is
#     refused below, so the voter is read from the vote account, never assumed.);
#   - for several accounts (the node identity, its vote account, the clock sysvar, the SPL Token
#     program, genesis programs and sysvars the workload lists, and a key that never existed),
#     each at the slot the RPC answers at `confirmed`, over several rounds:
#     `aldb proof --trust votes --url HYADES --validators FILE --slot S` and
#     `node ts/aldb-verify/examples/votes-proof.mjs --solana RPC` both accept the account on the
#     votes alone, and both equal the RPC's account at that slot, field by field;
#   - validator files with a stranger as authorized voter, with the node identity as authorized
#     voter, and one whose stake the validator does not hold two thirds of, are refused by both.
# The ledger, snapshot files, validator files and logs go to a fresh temporary work directory
# (printed), removed when the run passes unless ALDB_KEEP_WORK=1, kept when it fails.
# Everything listens on loopback, on ports of its own so it can run beside the other validator
# scripts: RPC_PORT (8799), FAUCET_PORT (9800), GOSSIP_PORT (10300), DYNAMIC_PORTS
# (10200-10300), METRICS_PORT (9798), HYADES_PORT (8798), HYADES_METRICS_PORT (9799).
# Usage: scripts/validator-light-client.sh [SECONDS]   (SECONDS, default 20: how long the
# validator runs after the workload before the checks start)
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-20}"
# shellcheck source=scripts/lib/validator.sh
source scripts/lib/validator.sh
# shellcheck source=scripts/lib/packages.sh
source scripts/lib/packages.sh
validator_ports 8799 9800 10300 10200-10300 9798 8798 9799
ensure_packages nodejs:node npm:npm
# ALDB_PATCHED_BIN names an already built bin directory instead of running the build script.
bin="$(patched_validator_bin)"
# ALDB_PLUGIN_SO names an already built patched-interface plugin instead of building one.
plugin="${ALDB_PLUGIN_SO:-$(scripts/build-patched-plugin.sh | tail -n1)}"
cargo build --release --locked -p hyades -p aldb-cli -p aldb-scenario >&2
(cd ts/aldb-verify && { [[ -d node_modules ]] || npm ci; } && npm run --silent build) >&2
validator_workdir
echo "work directory: $work"
rpc_url="http://127.0.0.1:$RPC_PORT"
hyades_url="http://127.0.0.1:$HYADES_PORT"
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
cat >"$work/aldb.json5" <<JSON
{
  libpath: "$plugin",
  snapshot_dir: "$work/snapshots",
  commitment: "confirmed",
  keep_slots: 100000,
  metrics_addr: "127.0.0.1:$METRICS_PORT",
  block_metadata_version: 5,
  vote_evidence: true,
}
JSON
t0=$(date +%s)
"$bin/solana-test-validator" --aldb-state-root --ledger "$work/ledger" \
  --geyser-plugin-config "$work/aldb.json5" "${validator_net[@]}" --quiet >"$work/validator.log" 2>&1 &
vpid=$!
wait_for_snapshot "$work/snapshots" 180 || { echo "FAIL: the plugin wrote no snapshot in 180 s"; tail -20 "$work/validator.log"; exit 1; }
target/release/hyades --dir "$work/snapshots" --addr "127.0.0.1:$HYADES_PORT" \
  --metrics-addr "127.0.0.1:$HYADES_METRICS_PORT" >"$work/hyades.log" 2>&1 &
hpid=$!
wait_for_health "$hyades_url" 30 || true
target/release/aldb-scenario run --rpc "$rpc_url" --hyades "$hyades_url" --seed 3 | tee "$work/scenario.log" | tail -3
sleep "$secs"
curl -s "127.0.0.1:$METRICS_PORT/metrics" |
  grep -E '^aldb_(slots_committed_total|evidence_[a-z_]*|bank_root_mismatches_total|callback_errors_total) ' || true

python3 - "$work" "$rpc_url" "$hyades_url" <<'PY'
import base64, json, os, subprocess, sys, time, urllib.request

os.environ["RUST_BACKTRACE"] = "0"
os.environ["RUST_LIB_BACKTRACE"] = "0"

work, rpc_url, hyades_url = sys.argv[1:4]
B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

def b58encode(b):
    n = int.from_bytes(b, "big")
    s = ""
    while n:
        n, r = divmod(n, 58)
        s = B58[r] + s
    return "1" * (len(b) - len(b.lstrip(b"\0"))) + s

def call(url, method, params):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    req = urllib.request.Request(url, body, {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)

fail = []

# The validator set, from the validator's own RPC.
va = call(rpc_url, "getVoteAccounts", [{"commitment": "confirmed"}])["result"]
members = []
for v in va["current"] + va["delinquent"]:
    state = call(rpc_url, "getAccountInfo", [v["votePubkey"], {"encoding": "jsonParsed", "commitment": "confirmed"}])
    info = state["result"]["value"]["data"]["parsed"]["info"]
    voters = [a["authorizedVoter"] for a in info["authorizedVoters"]]
    print(f"vote account {v['votePubkey']}: node {v['nodePubkey']}, authorized voters {voters}, stake {v['activatedStake']}")
    if len(voters) != 1:
        fail.append(f"vote account {v['votePubkey']}: {len(voters)} authorized voters for the epoch")
    members.append({"voteAccount": v["votePubkey"], "authorizedVoter": voters[-1], "stake": v["activatedStake"]})
if not members:
    sys.exit("FAIL: getVoteAccounts lists no vote account")
good = os.path.join(work, "validators.json")
with open(good, "w") as f:
    json.dump(members, f)
# Wrong sets: another authorized voter; a stranger holding as much stake again (1/2 < 2/3).
wrong_voter = os.path.join(work, "validators-wrong-voter.json")
with open(wrong_voter, "w") as f:
    json.dump([dict(m, authorizedVoter=b58encode(bytes([9] * 32))) for m in members], f)
node_voter = os.path.join(work, "validators-node-voter.json")
with open(node_voter, "w") as f:
    json.dump([dict(m, authorizedVoter=v["nodePubkey"]) for m, v in zip(members, va["current"] + va["delinquent"])], f)
wrong_stake = os.path.join(work, "validators-wrong-stake.json")
with open(wrong_stake, "w") as f:
    extra = {"voteAccount": b58encode(bytes([8] * 32)), "authorizedVoter": b58encode(bytes([7] * 32)),
             "stake": sum(m["stake"] for m in members)}
    json.dump(members + [extra], f)

node, vote = va["current"][0]["nodePubkey"], va["current"][0]["votePubkey"]
keys = [node, vote, "SysvarC1ock11111111111111111111111111111111", "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA",
        b58encode(bytes([5] * 32))]
# Genesis programs and sysvars from the table aldb-scenario prints (name, key, ...): the key is a
# row's first base58 word of a key's length, as names may be several words ("system program").
with open(os.path.join(work, "scenario.log")) as f:
    table = False
    for line in f:
        table = table or line.startswith("untouched accounts")
        if not table:
            continue
        key = next((w for w in line.split() if 32 <= len(w) <= 44 and all(c in B58 for c in w)), None)
        if key and key not in keys and len(keys) < 9:
            keys.append(key)
print(f"accounts checked: {len(keys)}")
if len(keys) < 9:
    fail.append(f"only {len(keys) - 5} accounts taken from aldb-scenario's table of untouched accounts")

def aldb_proof(key, slot, validators):
    args = ["target/release/aldb", "proof", key, "--url", hyades_url, "--trust", "votes", "--validators", validators,
            "--slot", str(slot)]
    deadline = time.time() + 30
    while True:
        p = subprocess.run(args, capture_output=True, text=True)
        # Not committed / not voted on yet: the votes on S land in the blocks after S.
        if p.returncode == 0 or "-32004" not in p.stderr or time.time() > deadline:
            return p
        time.sleep(0.5)

def fields(out):
    f = {}
    for line in out.splitlines():
        line = line.strip()
        for k in ("lamports", "owner", "executable"):
            if line.startswith(k + ": "):
                f[k] = line[len(k) + 2:]
        if line.startswith("data: "):
            f["data"] = line.split(": ", 2)[2] if line.count(": ") >= 2 else ""
        if line.endswith(": absent"):
            f["absent"] = True
    return f

checked = slots = 0
seen_slots = set()
for round in range(3):
    for key in keys:
        info = call(rpc_url, "getAccountInfo", [key, {"encoding": "base64", "commitment": "confirmed"}])["result"]
        slot, acct = info["context"]["slot"], info["value"]
        p = aldb_proof(key, slot, good)
        if p.returncode != 0:
            fail.append(f"aldb proof {key} at slot {slot}: {p.stderr.strip()[-300:]}")
            continue
        got = fields(p.stdout)
        if acct is None:
            if not got.get("absent"):
                fail.append(f"{key} at slot {slot}: the RPC says absent, aldb proved {got}")
        else:
            want = {"lamports": str(acct["lamports"]), "owner": acct["owner"],
                    "executable": "true" if acct["executable"] else "false", "data": acct["data"][0]}
            if got != want:
                fail.append(f"{key} at slot {slot}: aldb proved {got}, the RPC has {want}")
        # The TypeScript example reads the RPC itself, at the slot it answers at.
        t = subprocess.run(["node", "ts/aldb-verify/examples/votes-proof.mjs", "--hyades", hyades_url,
                            "--validators", good, "--solana", rpc_url, key], capture_output=True, text=True)
        if t.returncode != 0 or "equal to the account" not in t.stdout:
            fail.append(f"votes-proof.mjs {key}: {t.stderr.strip()[-300:]}")
        checked += 1
        seen_slots.add(slot)
    time.sleep(2)
print(f"accepted on the votes and equal to the RPC: {checked} checks, {len(seen_slots)} slots "
      f"({min(seen_slots) if seen_slots else '-'}..{max(seen_slots) if seen_slots else '-'}), by aldb and by the TypeScript example")
print("example:", subprocess.run(["target/release/aldb", "proof", node, "--url", hyades_url, "--trust", "votes",
                                  "--validators", good], capture_output=True, text=True).stdout.strip().splitlines()[-2:])

# Refusals, at a slot whose votes were just accepted: the wrong voter, the wrong stake.
neg_slot = max(seen_slots) if seen_slots else 0
for name, path, why in [("a stranger as voter", wrong_voter, "wrong_signer"), ("the node identity as voter", node_voter, "wrong_signer"),
                        ("too little stake", wrong_stake, "not more than 2/3")]:
    p = aldb_proof(node, neg_slot, path)
    if p.returncode == 0 or why not in p.stderr:
        fail.append(f"{name}: aldb proof was not refused for {why}: {p.stdout.strip()[-200:]} {p.stderr.strip()[-300:]}")
    else:
        print(f"{name}: refused: {[l for l in p.stderr.splitlines() if l.startswith('Error')][:1]}")
    t = subprocess.run(["node", "ts/aldb-verify/examples/votes-proof.mjs", "--hyades", hyades_url, "--validators", path,
                        "--slot", str(neg_slot), node], capture_output=True, text=True)
    if t.returncode == 0 or "not more than 2/3" not in t.stderr:
        fail.append(f"{name}: votes-proof.mjs was not refused: {t.stdout.strip()[-200:]} {t.stderr.strip()[-300:]}")
for f in fail[:20]:
    print("FAIL", f)
sys.exit(1 if fail or checked < 10 else 0)
PY
echo "validator-light-client passed in $(( $(date +%s) - t0 )) s"
