#!/usr/bin/env bash
# The epoch chain end to end (docs/SPEC.md §11) on two patched validators on loopback, whose
# validator set really changes: the patched solana-test-validator as the bootstrap, with both aldb
# features active at genesis (`--aldb-state-root --aldb-epoch-set`: every bank hash is
# sha256(h || root || next_set_hash)), 64-slot epochs and the admission-ticket feature off (why:
# below; ALDB_VAT=1 keeps it on, as the test validator has it), the plugin built against the
# patched interface (scripts/build-patched-plugin.sh; `block_metadata_version: 5`,
# `vote_evidence: true`) and Hyades on its directory
# (getEpochTransition, getSlotVotes); and a patched agave-validator joining it from its snapshot
# at slot 100 (copied into its ledger: why, below), as in scripts/validator-cluster.sh. The script:
#   - pins the genesis set (epoch 0, read from the bootstrap's RPC while in epoch 0: vote
#     accounts, their stakes, each account's authorized voter) in a checkpoint file (§11.5),
#     with an hour's trusting period, and starts `aldb-relayer` with `trust: "votes"` on it;
#   - creates the second node's identity, vote account and a stake account of STAKE_SOL
#     (default 150000) delegated to it (hand-built system, vote and stake program transactions,
#     scripts/lib/cluster.py), so it activates over the next boundaries (the cluster's warmup
#     limit spreads it over several epochs); waits until the second node's votes land in blocks
#     in an epoch where it is staked, then deactivates the stake, and waits until a set without
#     it is bound and in force.
#   With ALDB_VAT=1 the admission ticket is active: the second vote account is made with the vote
#   program's InitializeAccountV2 and carries its voter's BLS key and proof of possession
#   (validator-patches/bls-key, agave's own derivation and proof), and a third vote account
#   without one (made with InitializeAccount, no node behind it) gets VAT3_SOL (default 10000)
#   of stake that stays delegated.
# Then it checks, failing on any:
#   - the set really changed: the sets Hyades serves for every epoch decode and hash as bound;
#     at least three distinct sets (members and stakes) after genesis, the second vote account
#     staked in one, and a later one with less or none of its stake; at least four boundaries;
#   - `aldb proof --trust votes --checkpoint` from the genesis checkpoint alone follows every
#     epoch (1, 2, ... each named once) and proves accounts (both identities and vote accounts,
#     the stake account, its payer, sysvars, a key that never existed) at the slot the RPC answers
#     at `confirmed`, in the last epoch, equal to the RPC field by field; and the TypeScript
#     client (ts/aldb-verify/examples/follow-epochs.mjs, Node and the package's npm dependencies)
#     follows the same epochs from the same checkpoint with a state of its own and proves five of
#     those accounts equal to the RPC (lamports, owner, executable, data length);
#   - refused by name: a checkpoint naming a stranger as the voter and one where a stranger holds
#     two thirds (insufficient_stake), one older than its trusting period (expired), and forged
#     transitions to the epoch where the second node joined the set, altered by a proxy between
#     the client and Hyades (scripts/lib/forge_proxy.py): a member's stake changed (wrong_set),
#     changed and re-bound in the evidence (insufficient_stake), nextSetHash zeroed
#     (set_not_bound), evidence of the wrong epoch (slot_not_in_epoch);
#   - the relayer followed every epoch and accepted, with Hyades' root, every slot Hyades serves
#     at `confirmed` up to its last accepted one whose votes reach 2/3 of its epoch's set: a slot
#     it gave up must be refused by `aldb proof --trust votes --validators` on that set too (no
#     vote of the set landed with the slot as its last voted slot, as when a validator votes on a
#     later slot first, or too little stake did; the genesis slot has no logged bank); every
#     epoch has accepted roots, and among them roots where both vote accounts' votes counted
#     (both nodes' votes landing in blocks);
#   - the relayer refuses the same four forged transitions by name: once per way, a fresh state
#     from the genesis checkpoint following Hyades through the proxy (its root feed over the
#     WebSocket, passed through frame by frame; getEpochTransition and getSlotVotes over HTTP, the
#     transition forged) until the transition is refused twice (RELAYER_FORGED_SECS, default 120,
#     at most): `aldb_relayer_transitions_refused_total{reason}` counts that reason and no other,
#     the error line names it, the proxy forged it, the relayer is not frozen and wrote no
#     misbehaviour file (a forgery is not the set signing two things), it followed every epoch
#     before and trusts the one before, and its output and --json-lines hold roots of earlier
#     epochs only, each Hyades' (and the honest run's where it accepted the slot too) on more than
#     2/3 of the stake, its cursor not past the forged epoch's first slot;
#   - the second node froze banks with the bootstrap's hash, and `aldb-ledger-replay` (beside the
#     patched validator) replaying a copy of the bootstrap's ledger from genesis reproduces the
#     bank hash of every slot it replays, every rooted slot among them.
#   With ALDB_VAT=1, also: the bootstrap's vote account holds the BLS key the tool derives from
#   the test validator's vote keypair (agave's derivation, checked bit for bit), the second
#   holds the tool's key, the third none; every set's members are exactly the vote accounts
#   getVoteAccounts marks epochVoteAccount in that epoch (agave's filtered EpochStakes), the
#   set's total stake is its members' sum, and the third account, staked (activatedStake > 0
#   in an epoch before one whose set is served), is in no set and never an epoch vote account.
# 2½ to 5 minutes once built on two cores shared at load average 15 to 55 (141 s to 283 s measured;
# 176 s with ALDB_VAT=1).
# The ledgers, snapshot files, client files and logs go to a fresh temporary work directory
# (printed; some 1 GB by the end), removed when the run passes unless ALDB_KEEP_WORK=1, kept when
# it fails.
# Ports, all on loopback and outside the other validator scripts': RPC_PORT (38899), FAUCET_PORT
# (38950), GOSSIP_PORT (38001), DYNAMIC_PORTS (38100-38200), METRICS_PORT (38898), HYADES_PORT
# (38799), HYADES_METRICS_PORT (38798); the second node RPC_PORT2 (39899), GOSSIP_PORT2 (39001),
# DYNAMIC_PORTS2 (39100-39200); RELAYER_METRICS_PORT (38797), PROXY_PORT (38796).
# ALDB_PATCHED_BIN names the patched validator's bin directory, ALDB_PLUGIN_SO the patched-interface
# plugin, ALDB_RELEASE_DIR a directory already holding release builds of hyades, aldb and
# aldb-relayer (otherwise `cargo build --release` builds them here); with ALDB_VAT=1,
# ALDB_BLS_KEY the aldb-bls-key binary (otherwise built here from validator-patches/bls-key).
# Usage: scripts/validator-epochs.sh [SECONDS]   (SECONDS, default 900: the most the cluster
# phase may take, from the bootstrap's start to the set without the second node's stake)
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-900}"
# shellcheck source=scripts/lib/validator.sh
source scripts/lib/validator.sh
# shellcheck source=scripts/lib/packages.sh
source scripts/lib/packages.sh
validator_ports 38899 38950 38001 38100-38200 38898 38799 38798
RPC_PORT2="${RPC_PORT2:-39899}"
GOSSIP_PORT2="${GOSSIP_PORT2:-39001}"
DYNAMIC_PORTS2="${DYNAMIC_PORTS2:-39100-39200}"
RELAYER_METRICS_PORT="${RELAYER_METRICS_PORT:-38797}"
PROXY_PORT="${PROXY_PORT:-38796}"
STAKE_SOL="${STAKE_SOL:-150000}"
# Epochs of 64 slots, not 32: a leader computes the schedule of epoch E + 1 only once its root is
# in epoch E (agave's leader-schedule cache is bounded by the root bank's leader-schedule epoch),
# and the root trails the tip by 31 votes plus every skipped slot. With 32-slot epochs one
# skipped slot in an epoch (a leader slot of the second node while it is not caught up) leaves
# the root in the epoch before at the epoch's last slot: measured, the bootstrap halted at slot
# 159 with its root at 116, "I am not in the leader schedule yet". 64 slots leave 32 skips per
# epoch, and the second node, starting from slot 100, knows the leaders up to slot 191.
SLOTS_PER_EPOCH="${SLOTS_PER_EPOCH:-64}"
# validator_admission_ticket, which the test validator activates: with it a vote account enters
# the epoch's stakes (so the bound set, the leader schedule and the vote weights) only with a BLS
# key (and nonzero stake, and the vote account's rent-exempt minimum balance), and the vote
# account made by default has none, as on mainnet today: by default the feature is deactivated
# at genesis. ALDB_VAT=1 keeps it active and gives the second vote account a BLS key.
VAT_FEATURE=VAT9huvhPjRN9cyrPytq9rwvEJ3J4ADtjdncgZRyANJ
VAT="${ALDB_VAT:-0}"
VAT3_SOL="${VAT3_SOL:-10000}"
vat_args=(--deactivate-feature "$VAT_FEATURE")
bls_key=""
if [[ "$VAT" == 1 ]]; then
  vat_args=()
  if [[ -n "${ALDB_BLS_KEY:-}" ]]; then
    bls_key="$ALDB_BLS_KEY"
  else
    # A workspace of its own (agave's BLS crate at agave 4.2.0's versions), in a target dir of its own.
    cargo build --release --locked --manifest-path validator-patches/bls-key/Cargo.toml \
      --target-dir "$PWD/target/bls-key" >&2
    bls_key="$PWD/target/bls-key/release/aldb-bls-key"
  fi
  [[ -x "$bls_key" ]] || { echo "FAIL: no aldb-bls-key at $bls_key" >&2; exit 1; }
fi
bin="$(patched_validator_bin)"
plugin="${ALDB_PLUGIN_SO:-$(scripts/build-patched-plugin.sh | tail -n1)}"
if [[ -n "${ALDB_RELEASE_DIR:-}" ]]; then
  rel="$(cd "$ALDB_RELEASE_DIR" && pwd)"
else
  cargo build --release --locked -p hyades -p aldb-cli -p aldb-relayer >&2
  rel="$PWD/target/release"
fi
for b in hyades aldb aldb-relayer; do
  [[ -x "$rel/$b" ]] || { echo "FAIL: no $rel/$b" >&2; exit 1; }
done
validator_workdir
echo "work directory: $work"
rpc_url="http://127.0.0.1:$RPC_PORT"
hyades_url="http://127.0.0.1:$HYADES_PORT"
v1="" v2="" hpid="" rpid="" ppid=""
cleanup() {
  local rc=$? p
  for p in "$rpid" "$ppid" "$v2" "$v1" "$hpid"; do
    [[ -n "$p" ]] && kill "$p" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  validator_work_cleanup "$rc"
}
trap cleanup EXIT
export PYTHONPATH="$PWD/scripts/lib${PYTHONPATH:+:$PYTHONPATH}"
export RUST_BACKTRACE=0
t0=$(date +%s)
deadline=$((t0 + secs))

cat >"$work/aldb.json5" <<JSON
{
  libpath: "$plugin",
  snapshot_dir: "$work/snapshots",
  commitment: "confirmed",
  keep_slots: 100000,
  metrics_addr: "127.0.0.1:$METRICS_PORT",
  // solana-test-validator writes the ledger's genesis before it loads plugins.
  genesis_path: "$work/ledger1/genesis.bin",
  block_metadata_version: 5,
  vote_evidence: true,
}
JSON
echo "== bootstrap: both aldb features at genesis, $SLOTS_PER_EPOCH-slot epochs, the admission ticket $([[ "$VAT" == 1 ]] && echo on || echo off), the plugin keeping the vote-evidence log"
"$bin/solana-test-validator" --aldb-state-root --aldb-epoch-set --slots-per-epoch "$SLOTS_PER_EPOCH" \
  "${vat_args[@]}" --ledger "$work/ledger1" --geyser-plugin-config "$work/aldb.json5" \
  "${validator_net[@]}" --log >"$work/validator1.log" 2>&1 &
v1=$!
wait_for_health "$rpc_url" 120 "$v1" "$work/validator1.log" || { echo "FAIL: the bootstrap's RPC is not healthy"; exit 1; }

# The genesis set, pinned while the cluster is still in epoch 0 (rewards change the stakes from
# epoch 1 on), and the checkpoints the client must refuse. The set's time is the script's start,
# before the genesis was made: never later than the set was the cluster's (SPEC §11.5).
python3 - "$work" "$rpc_url" "$t0" <<'PY'
import json, sys
from cluster import b58encode, rpc

work, url, t0 = sys.argv[1], sys.argv[2], int(sys.argv[3])
epoch = rpc(url, "getEpochInfo", [{"commitment": "processed"}])["epoch"]
va = rpc(url, "getVoteAccounts", [{"commitment": "processed"}])
if epoch != 0:
    sys.exit(f"FAIL: the cluster reached epoch {epoch} before its genesis set was read")
members = []
for v in va["current"] + va["delinquent"]:
    info = rpc(url, "getAccountInfo", [v["votePubkey"], {"encoding": "jsonParsed", "commitment": "processed"}])
    # The voter for epoch 0: the entry of the highest epoch not after it.
    voters = [a["authorizedVoter"] for a in sorted(info["value"]["data"]["parsed"]["info"]["authorizedVoters"],
                                                    key=lambda a: a["epoch"]) if a["epoch"] <= 0]
    # epochVoteAccount: in epoch 0's EpochStakes, which the admission ticket filters.
    if v["activatedStake"] > 0 and v["epochVoteAccount"]:
        members.append({"voteAccount": v["votePubkey"], "authorizedVoter": voters[-1], "stake": v["activatedStake"]})
if not members:
    sys.exit("FAIL: no staked vote account at genesis")
schedule = rpc(url, "getEpochSchedule", [])
schedule = {k: schedule[k] for k in ("slotsPerEpoch", "leaderScheduleSlotOffset", "warmup", "firstNormalEpoch", "firstNormalSlot")}
total = sum(m["stake"] for m in members)

def checkpoint(name, validators, total, time, period):
    with open(f"{work}/{name}.json", "w") as f:
        json.dump({"version": 1, "schedule": schedule, "set": {"epoch": 0, "totalStake": total, "validators": validators},
                   "time": time, "trustingPeriod": period}, f, indent=1)

checkpoint("checkpoint-genesis", members, total, t0, 3600)
stranger = b58encode(bytes([9] * 32))
checkpoint("checkpoint-stranger-voter", [dict(m, authorizedVoter=stranger) for m in members], total, t0, 3600)
checkpoint("checkpoint-stranger-stake", members + [{"voteAccount": b58encode(bytes([8] * 32)), "authorizedVoter": stranger,
                                                    "stake": 2 * total}], 3 * total, t0, 3600)
checkpoint("checkpoint-too-old", members, total, t0 - 7200, 3600)
with open(f"{work}/schedule.json", "w") as f:
    json.dump(schedule, f)
print(f"genesis set pinned: {len(members)} member(s), stake {total}: {members}; schedule {schedule}")
PY

wait_for_snapshot "$work/snapshots" 180 || { echo "FAIL: the plugin wrote no snapshot in 180 s"; tail -20 "$work/validator1.log"; exit 1; }
"$rel/hyades" --dir "$work/snapshots" --addr "127.0.0.1:$HYADES_PORT" \
  --metrics-addr "127.0.0.1:$HYADES_METRICS_PORT" >"$work/hyades.log" 2>&1 &
hpid=$!
wait_for_health "$hyades_url" 30 "$hpid" "$work/hyades.log" || { echo "FAIL: Hyades is not healthy"; exit 1; }

mkdir -p "$work/relayer"
cat >"$work/relayer/relayer.json5" <<JSON
{
  endpoints: ["ws://127.0.0.1:$HYADES_PORT/ws"],
  trust: "votes",
  checkpoint: "$work/checkpoint-genesis.json",
  state_file: "state.json",
  output_file: "roots.txt",
  commitment: "confirmed",
  metrics_addr: "127.0.0.1:$RELAYER_METRICS_PORT",
}
JSON
"$rel/aldb-relayer" --config "$work/relayer/relayer.json5" --json-lines --stats-secs 30 \
  >"$work/relayer/roots.jsonl" 2>"$work/relayer/relayer.log" &
rpid=$!

# A first rooted slot, before the faucet is asked for the second node's funds.
for _ in $(seq 120); do
  curl -s -X POST "$rpc_url" -H 'content-type: application/json' \
    -d '{"jsonrpc":"2.0","id":1,"method":"getSlot","params":[{"commitment":"finalized"}]}' | grep -q '"result":[1-9]' && break
  sleep 1
done

echo "== the second node's identity, vote account and delegated stake"
python3 - "$work" "$rpc_url" "$STAKE_SOL" "$bls_key" "$VAT3_SOL" <<'PY'
import base64, json, subprocess, sys
from cluster import (STAKE_PROGRAM, STAKE_SPACE, VOTE_PROGRAM, VOTE_SPACE, airdrop, b58decode, b58encode,
                     create_account, epoch_of, keypair, rpc, send, stake_delegate, stake_initialize, vote_bls_pubkey,
                     vote_initialize, vote_initialize_v2)

work, url, stake_sol, bls_key, vat3_sol = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
schedule = json.load(open(f"{work}/schedule.json"))
ident, ipk = keypair(f"{work}/identity2", 0x51)
vote, vpk = keypair(f"{work}/vote2", 0x52)
funder, fpk = keypair(f"{work}/funder", 0x53)
stake, spk = keypair(f"{work}/stake", 0x54)

def vote_data(pubkey):
    return base64.b64decode(rpc(url, "getAccountInfo", [pubkey, {"encoding": "base64", "commitment": "confirmed"}])
                            ["value"]["data"][0])

def bls(voter_file, vote_account):
    # aldb-bls-key: the key agave derives from the voter's keypair file, and its proof for the account.
    out = json.loads(subprocess.run([bls_key, voter_file, vote_account], check=True, capture_output=True,
                                    text=True).stdout)
    return bytes.fromhex(out["blsPubkey"]), bytes.fromhex(out["proofOfPossession"])

if bls_key:
    # The test validator made its vote account's BLS key from the vote keypair it writes to the
    # ledger, with agave's derivation: the tool must give the same 48 bytes.
    boot = [v["votePubkey"] for v in rpc(url, "getVoteAccounts", [])["current"]][0]
    want = vote_bls_pubkey(vote_data(boot))
    got, _ = bls(f"{work}/ledger1/vote-account-keypair.json", boot)
    if want is None or got != want:
        sys.exit(f"FAIL: the bootstrap's vote account {boot} holds BLS key {want and want.hex()}, "
                 f"aldb-bls-key derives {got.hex()} from its vote keypair")
    print(f"the bootstrap's vote account {boot} holds the BLS key aldb-bls-key derives from its keypair: {got.hex()[:24]}..")
airdrop(url, ipk, 100 * 10**9)
airdrop(url, fpk, (stake_sol + (vat3_sol if bls_key else 0) + 10) * 10**9)
rent = rpc(url, "getMinimumBalanceForRentExemption", [VOTE_SPACE])
if bls_key:
    # Voter: the node's identity, as agave-validator runs it here (no --authorized-voter).
    pop = bls(f"{work}/identity2.json", b58encode(vpk))
    init = vote_initialize_v2(vpk, ipk, ipk, ipk, *pop, 10000)
else:
    init = vote_initialize(vpk, ipk, ipk, ipk, 100)
send(url, ipk, [create_account(ipk, vpk, rent, VOTE_SPACE, b58decode(VOTE_PROGRAM)), init], {ipk: ident, vpk: vote})
lamports = stake_sol * 10**9 + rpc(url, "getMinimumBalanceForRentExemption", [STAKE_SPACE])
slot = send(url, fpk, [create_account(fpk, spk, lamports, STAKE_SPACE, b58decode(STAKE_PROGRAM)),
                       stake_initialize(spk, fpk, fpk), stake_delegate(spk, vpk, fpk)], {fpk: funder, spk: stake})
print(f"second node: identity {b58encode(ipk)}, vote account {b58encode(vpk)}; stake account {b58encode(spk)} "
      f"of {stake_sol} SOL delegated to it at slot {slot} (epoch {epoch_of(schedule, slot)})")
if bls_key:
    if vote_bls_pubkey(vote_data(b58encode(vpk))) != pop[0]:
        sys.exit(f"FAIL: the second vote account does not hold the BLS key it was made with")
    # The third: a vote account without a BLS key (InitializeAccount, vote state V4 with none) and
    # no node behind it, staked; the admission ticket must keep it out of every epoch's stakes.
    ident3, i3 = keypair(f"{work}/identity3", 0x55)
    vote3, v3 = keypair(f"{work}/vote3", 0x56)
    stake3, s3 = keypair(f"{work}/stake3", 0x57)
    send(url, fpk, [create_account(fpk, v3, rent, VOTE_SPACE, b58decode(VOTE_PROGRAM)),
                    vote_initialize(v3, i3, i3, i3, 100)], {fpk: funder, v3: vote3, i3: ident3})
    lamports = vat3_sol * 10**9 + rpc(url, "getMinimumBalanceForRentExemption", [STAKE_SPACE])
    slot = send(url, fpk, [create_account(fpk, s3, lamports, STAKE_SPACE, b58decode(STAKE_PROGRAM)),
                           stake_initialize(s3, fpk, fpk), stake_delegate(s3, v3, fpk)], {fpk: funder, s3: stake3})
    if vote_bls_pubkey(vote_data(b58encode(v3))) is not None:
        sys.exit("FAIL: the third vote account holds a BLS key")
    print(f"second vote account with BLS key {pop[0].hex()[:24]}..; third vote account {b58encode(v3)} without one, "
          f"{vat3_sol} SOL delegated to it at slot {slot} (epoch {epoch_of(schedule, slot)})")
PY

# agave-validator cannot start from genesis without slot 0's shreds: it starts from a snapshot.
# The snapshot and genesis are copied into its ledger rather than fetched: fetching waits for the
# snapshot's hash to reach it through gossip (13 s measured, 50 slots), and it must be running
# before the cluster leaves the leaders its snapshot bank knows (slot 191; see SLOTS_PER_EPOCH).
echo "== waiting for the bootstrap's first ledger snapshot"
wait_for_ledger_snapshot "$work/ledger1" 900 || { echo "FAIL: the bootstrap wrote no ledger snapshot in 900 s"; exit 1; }
mkdir -p "$work/ledger2"
snap=""
for _ in $(seq 30); do
  snap="$(compgen -G "$work/ledger1/snapshot-[0-9]*-*.tar.zst" | head -n1 || true)"
  [[ -n "$snap" ]] && break
  sleep 1
done
[[ -n "$snap" ]] || { echo "FAIL: no finished snapshot archive in $work/ledger1"; exit 1; }
cp "$snap" "$work/ledger1/genesis.bin" "$work/ledger1/genesis.tar.bz2" "$work/ledger2/"
echo "second node starts from $(basename "$snap") at the bootstrap's slot $(curl -s -X POST "$rpc_url" -H 'content-type: application/json' \
  -d '{"jsonrpc":"2.0","id":1,"method":"getSlot","params":[{"commitment":"processed"}]}' | sed -n 's/.*"result":\([0-9]*\).*/\1/p')"
# Containers often cap open files far below agave-validator's 1,000,000 (patch 0008).
ALDB_NO_ENFORCE_ULIMIT_NOFILE=1 "$bin/agave-validator" --identity "$work/identity2.json" \
  --vote-account "$(cat "$work/vote2.pubkey")" --ledger "$work/ledger2" --entrypoint "127.0.0.1:$GOSSIP_PORT" \
  --no-snapshot-fetch --no-genesis-fetch \
  --allow-private-addr --no-xdp --no-os-network-limits-test --rpc-port "$RPC_PORT2" --gossip-port "$GOSSIP_PORT2" \
  --dynamic-port-range "$DYNAMIC_PORTS2" --bind-address 127.0.0.1 --full-rpc-api \
  --log "$work/validator2.log" >"$work/validator2.out" 2>&1 &
v2=$!
echo "== second node started ($(($(date +%s) - t0)) s in); waiting for its votes to land while it is staked"

# Until the second vote account earns credits (its votes landed in blocks) in an epoch in which
# it holds stake; then the stake is deactivated. A second node that froze nothing past its
# snapshot once the cluster is an epoch beyond the last slot whose leader the snapshot bank knows
# will never catch up (it cannot check a shred's signature): that fails at once, named.
python3 - "$work" "$rpc_url" "$v2" "$deadline" "${snap##*/snapshot-}" <<'PY'
import json, os, sys, time
from cluster import epoch_of, rpc, sample_vote_accounts

work, url, pid, deadline = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
snapshot_slot = int(sys.argv[5].split("-")[0])
schedule = json.load(open(f"{work}/schedule.json"))
# The leader-schedule epoch of a slot is the next epoch (offset = slots per epoch, no warmup).
horizon = (epoch_of(schedule, snapshot_slot) + 2) * schedule["slotsPerEpoch"] - 1
vote2 = open(f"{work}/vote2.pubkey").read().strip()
log2 = open(f"{work}/validator2.log", errors="replace")
frozen = 0
last = None
while True:
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit("FAIL: the second validator exited")
    frozen += sum(1 for line in log2.readlines() if "bank frozen:" in line)
    sample_vote_accounts(url, f"{work}/vote-accounts.jsonl")
    epoch = rpc(url, "getEpochInfo", [{"commitment": "confirmed"}])
    if frozen <= 1 and epoch["absoluteSlot"] > horizon + schedule["slotsPerEpoch"]:
        sys.exit(f"FAIL: the second node froze no bank past its snapshot (slot {snapshot_slot}) while the cluster went "
                 f"past slot {horizon}, the last whose leader its snapshot bank knows: it started too late to catch up")
    va = rpc(url, "getVoteAccounts", [{"commitment": "confirmed"}])
    mine = [v for v in va["current"] + va["delinquent"] if v["votePubkey"] == vote2]
    if mine:
        v = mine[0]
        credits = [c for c in v["epochCredits"] if c[0] == epoch["epoch"]]
        state = (epoch["epoch"], v["activatedStake"], credits[0][1] - credits[0][2] if credits else 0, v["lastVote"])
        if state[:3] != (last or (None,))[:3]:
            print(f"  epoch {state[0]} slot {epoch['absoluteSlot']}: second vote account stake {state[1]}, "
                  f"credits this epoch {state[2]}, last vote {state[3]}; the second node froze {frozen} banks", flush=True)
        last = state
        if v["activatedStake"] > 0 and state[2] > 0:
            print(f"second node's votes land while it is staked: epoch {state[0]}, stake {state[1]}, credits {state[2]}")
            break
    if time.time() > deadline:
        sys.exit(f"FAIL: the second node's votes did not land while staked before the deadline (last: {last})")
    time.sleep(2)
PY

python3 - "$work" "$rpc_url" <<'PY'
import json, sys
from cluster import epoch_of, keypair, send, stake_deactivate

work, url = sys.argv[1], sys.argv[2]
schedule = json.load(open(f"{work}/schedule.json"))
funder, fpk = keypair(f"{work}/funder", 0x53)
_, spk = keypair(f"{work}/stake", 0x54)
slot = send(url, fpk, [stake_deactivate(spk, fpk)], {fpk: funder})
print(f"stake deactivated at slot {slot} (epoch {epoch_of(schedule, slot)})")
with open(f"{work}/deactivated", "w") as f:
    f.write(str(epoch_of(schedule, slot)))
PY

echo "== waiting until a set without the second node's stake is bound and in force"
python3 - "$work" "$rpc_url" "$hyades_url" "$v2" "$deadline" <<'PY'
import json, os, sys, time
from cluster import RpcError, epoch_of, rpc, sample_vote_accounts

work, url, hyades, pid, deadline = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
schedule = json.load(open(f"{work}/schedule.json"))
vote2 = open(f"{work}/vote2.pubkey").read().strip()
deactivated = int(open(f"{work}/deactivated").read())
sets, m = {}, 1
while True:
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit("FAIL: the second validator exited")
    sample_vote_accounts(url, f"{work}/vote-accounts.jsonl")
    try:
        while True:
            sets[m] = rpc(hyades, "getEpochTransition", [m])["value"]["set"]
            m += 1
    except RpcError as e:
        if e.code != -32015:
            raise
    stake2 = {e: next((v["stake"] for v in s["validators"] if v["voteAccount"] == vote2), 0) for e, s in sets.items()}
    gone = [e for e in sorted(stake2) if e > deactivated + 1 and stake2[e] == 0]
    now = epoch_of(schedule, rpc(url, "getSlot", [{"commitment": "confirmed"}]))
    if gone and now >= gone[0]:
        print(f"the set of epoch {gone[0]} holds no stake of the second node, and the cluster is in epoch {now}")
        break
    if time.time() > deadline:
        sys.exit(f"FAIL: no set without the second node's stake in force before the deadline: its stake by epoch {stake2}")
    time.sleep(3)
PY

echo "== the proxy that forges transitions for the client (scripts/lib/forge_proxy.py)"
python3 scripts/lib/forge_proxy.py "$hyades_url" "$PROXY_PORT" >"$work/proxy.log" 2>&1 &
ppid=$!
for _ in $(seq 50); do
  grep -q '^listening' "$work/proxy.log" && break
  kill -0 "$ppid" 2>/dev/null || { cat "$work/proxy.log"; echo "FAIL: the proxy exited"; exit 1; }
  sleep 0.2
done

# The TypeScript client (@aldb/verify) is checked beside the Rust one.
ensure_packages nodejs:node npm:npm
(
  cd ts/aldb-verify
  [[ -d node_modules ]] || npm ci --no-audit --no-fund
  npm run -s build
) >&2

echo "== checks: the sets, the client from the genesis checkpoint, refusals"
python3 - "$work" "$rpc_url" "$hyades_url" "$rel/aldb" "$PROXY_PORT" "$VAT" <<'PY'
import json, subprocess, sys, time
from cluster import RpcError, b58encode, epoch_of, rpc, set_hash

work, url, hyades, aldb, proxy_port, vat = sys.argv[1:7]
schedule = json.load(open(f"{work}/schedule.json"))
genesis = json.load(open(f"{work}/checkpoint-genesis.json"))["set"]
vote2 = open(f"{work}/vote2.pubkey").read().strip()
fail = []

# Every set Hyades holds, each checked against the hash its transition's evidence binds.
sets, m = {}, 1
while True:
    try:
        sets[m] = rpc(hyades, "getEpochTransition", [m])["value"]
    except RpcError as e:
        if e.code != -32015:
            raise
        break
    m += 1
def content(s):
    return tuple(sorted((v["voteAccount"], v["authorizedVoter"], v["stake"]) for v in s["validators"])) + (s["totalStake"],)
print("sets by epoch (vote account: stake):")
for e, t in sets.items():
    s = t["set"]
    if s["epoch"] != e or b58encode(set_hash(s)) != t["evidence"]["nextSetHash"]:
        fail.append(f"the transition to epoch {e} does not bind its set")
    if epoch_of(schedule, t["evidence"]["slot"]) != e - 1:
        fail.append(f"the transition to epoch {e} proves it at slot {t['evidence']['slot']}, not in epoch {e - 1}")
    members = ", ".join(f"{v['voteAccount'][:8]}..: {v['stake']}" for v in s["validators"])
    print(f"  epoch {e}: set {b58encode(set_hash(s))} total {s['totalStake']} [{members}] (proven by slot {t['evidence']['slot']})")
distinct = []
for e, t in sets.items():
    c = content(t["set"])
    if c not in distinct:
        distinct.append(c)
stake2 = {e: next((v["stake"] for v in t["set"]["validators"] if v["voteAccount"] == vote2), 0) for e, t in sets.items()}
staked = [e for e in stake2 if stake2[e] > 0]
peak = max(stake2.values(), default=0)
after = [e for e in stake2 if staked and e > max(staked)]
print(f"distinct sets after genesis (members and stakes): {len(distinct)}; distinct set hashes: "
      f"{len({b58encode(set_hash(t['set'])) for t in sets.values()})}; the second vote account staked in epochs "
      f"{staked[0] if staked else '-'}..{staked[-1] if staked else '-'} (at most {peak}), none from epoch {after[0] if after else '-'}")
if len(sets) < 5:
    fail.append(f"transitions to only {len(sets)} epochs: fewer than four boundaries after the first")
if len(distinct) < 3:
    fail.append(f"only {len(distinct)} distinct sets after genesis")
if not staked:
    fail.append("the second vote account holds stake in no set")
if not after:
    fail.append("no set after the second vote account's stake left")
first_with = staked[0] if staked else 1
# The relayer's transition is forged to the same epoch, after its honest run.
with open(f"{work}/forged-epoch", "w") as f:
    f.write(str(first_with))

if vat == "1":
    # Under the admission ticket the bound set is agave's filtered EpochStakes (SPEC §11.2):
    # its members must be exactly the accounts getVoteAccounts marks epochVoteAccount in that
    # epoch, and the third vote account, staked without a BLS key, in none of them.
    import base64
    from cluster import sample_vote_accounts, vote_bls_pubkey
    sample_vote_accounts(url, f"{work}/vote-accounts.jsonl")
    vote3 = open(f"{work}/vote3.pubkey").read().strip()
    samples = [json.loads(l) for l in open(f"{work}/vote-accounts.jsonl") if l.strip()]
    marked = {}
    for smp in samples:
        marked.setdefault(smp["epoch"], set()).add(frozenset(k for k, (_, ev) in smp["accounts"].items() if ev))
    compared = []
    for e, seen in sorted(marked.items()):
        if len(seen) != 1:
            fail.append(f"epoch {e}: getVoteAccounts marked different epoch vote accounts within the epoch: {seen}")
            continue
        if e not in sets:
            continue
        members = {v["voteAccount"] for v in sets[e]["set"]["validators"]}
        if members != next(iter(seen)):
            fail.append(f"epoch {e}: the bound set holds {sorted(members)}, getVoteAccounts marks "
                        f"{sorted(next(iter(seen)))} as the epoch's vote accounts")
        else:
            compared.append(e)
    for e, t in sets.items():
        s = t["set"]
        if s["totalStake"] != sum(v["stake"] for v in s["validators"]):
            fail.append(f"epoch {e}: total stake {s['totalStake']} is not its members' sum")
        if any(v["voteAccount"] == vote3 for v in s["validators"]):
            fail.append(f"epoch {e}: the third vote account, without a BLS key, is in the bound set")
    stake3 = {}
    for smp in samples:
        st = smp["accounts"].get(vote3, [0, False])[0]
        if st > 0:
            stake3[smp["epoch"]] = max(stake3.get(smp["epoch"], 0), st)
    marked3 = sorted({smp["epoch"] for smp in samples if smp["accounts"].get(vote3, [0, False])[1]})
    after3 = [e for e in sets if stake3 and e > min(stake3)]
    keys = {}
    for name, key in (("second", vote2), ("third", vote3)):
        info = rpc(url, "getAccountInfo", [key, {"encoding": "base64", "commitment": "confirmed"}])["value"]
        keys[name] = vote_bls_pubkey(base64.b64decode(info["data"][0]))
    print(f"admission ticket: in epochs {compared} every set's members are the vote accounts getVoteAccounts marks "
          f"epochVoteAccount; the third vote account {vote3} (BLS key {keys['third']}) staked in epochs "
          f"{sorted(stake3)} (activatedStake up to {max(stake3.values(), default=0)}), in none of the {len(sets)} sets, "
          f"an epoch vote account in epochs {marked3}; the second holds BLS key "
          f"{keys['second'].hex()[:24] + '..' if keys['second'] else None}")
    if len(compared) < 3:
        fail.append(f"getVoteAccounts compared with the bound set in only {len(compared)} epochs: {compared}")
    if not after3:
        fail.append(f"the third vote account was staked in no epoch before one whose set is served: {stake3}")
    if marked3:
        fail.append(f"the third vote account is an epoch vote account in epochs {marked3}")
    if keys["second"] is None or keys["third"] is not None:
        fail.append(f"BLS keys: second vote account {keys['second']}, third {keys['third']}")

def aldb_proof(args, retry=True):
    deadline = time.time() + 60
    while True:
        p = subprocess.run([aldb, "proof", *args], capture_output=True, text=True)
        # Not committed or not voted on yet: the votes on S land in the blocks after S.
        if not retry or p.returncode == 0 or "-32004" not in p.stderr or time.time() > deadline:
            return p
        time.sleep(1)

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

# The client: the genesis checkpoint and nothing else; its state in a file of its own.
cp = f"{work}/checkpoint-genesis.json"
state = f"{work}/client.state.json"
ident1 = genesis["validators"][0]
keys = [ident1["voteAccount"], ident1["authorizedVoter"], vote2, open(f"{work}/identity2.pubkey").read().strip(),
        open(f"{work}/stake.pubkey").read().strip(), open(f"{work}/funder.pubkey").read().strip(),
        "SysvarC1ock11111111111111111111111111111111", "SysvarStakeHistory1111111111111111111111111",
        b58encode(bytes([5] * 32))]
def trusted_epoch():
    try:
        return json.load(open(state))["held"][-1]["set"]["epoch"]
    except FileNotFoundError:
        return 0

followed = []
checked, slots = 0, set()
for round in range(2):
    for key in keys:
        info = rpc(url, "getAccountInfo", [key, {"encoding": "base64", "commitment": "confirmed"}])
        slot, acct = info["context"]["slot"], info["value"]
        before = trusted_epoch()
        p = aldb_proof([key, "--url", hyades, "--trust", "votes", "--checkpoint", cp, "--state", state, "--slot", str(slot)])
        # The epochs followed, from the state file: a run that followed epochs and then found the
        # slot's votes not landed yet (-32004, retried) printed nothing, but kept its state.
        followed.extend(range(before + 1, trusted_epoch() + 1))
        if p.returncode != 0:
            fail.append(f"aldb proof {key} at slot {slot}: {p.stderr.strip()[-400:]}")
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
        checked += 1
        slots.add(slot)
        last_out = p.stdout
    time.sleep(2)
client = json.load(open(state))
trusted = client["held"][-1]["set"]["epoch"]
epochs_of_slots = sorted({epoch_of(schedule, s) for s in slots})
print(f"client from the genesis checkpoint: followed epochs {followed[0] if followed else '-'}..{followed[-1] if followed else '-'} "
      f"({len(followed)} transitions), trusts epoch {trusted}; {checked} account proofs equal to the RPC at "
      f"{len(slots)} slots ({min(slots) if slots else '-'}..{max(slots) if slots else '-'}, epochs {epochs_of_slots})")
print("  " + "\n  ".join(last_out.strip().splitlines()[-4:]) if checked else "")
if followed != list(range(1, len(followed) + 1)) or not followed:
    fail.append(f"the client did not follow every epoch from 1 in order: {followed}")
if epochs_of_slots and epochs_of_slots[-1] != trusted:
    fail.append(f"the newest proven slot is in epoch {epochs_of_slots[-1]}, the client trusts epoch {trusted}")

# The TypeScript client (examples/follow-epochs.mjs on @aldb/verify), an implementation of its
# own: the same genesis checkpoint, a state file of its own, accounts at the newest slots.
import base64, re
ts_state = f"{work}/client-ts.state.json"
ts_followed, ts_checked, ts_epoch, ts_slots = [], 0, None, []
for key in keys[:4] + keys[-1:]:
    info = rpc(url, "getAccountInfo", [key, {"encoding": "base64", "commitment": "confirmed"}])
    slot, acct = info["context"]["slot"], info["value"]
    give_up = time.time() + 60
    while True:
        p = subprocess.run(["node", "ts/aldb-verify/examples/follow-epochs.mjs", "--hyades", hyades, "--checkpoint", cp,
                            "--state", ts_state, "--slot", str(slot), key], capture_output=True, text=True)
        # Not voted on yet (-32004): the votes on the slot land in the blocks after it.
        if p.returncode == 0 or "-32004" not in p.stdout + p.stderr or time.time() > give_up:
            break
        time.sleep(1)
    ts_followed += [int(e) for e in re.findall(r"^followed to epoch (\d+):", p.stdout, re.M)]
    if p.returncode != 0:
        fail.append(f"follow-epochs.mjs {key} at slot {slot}: {(p.stdout + p.stderr).strip()[-400:]}")
        continue
    m = re.search(r"^client: trusts epoch (\d+)", p.stdout, re.M)
    ts_epoch = int(m.group(1)) if m else None
    line = next((l for l in p.stdout.splitlines() if l.startswith(f"account {key}: ")), "")
    if acct is None:
        want = f"account {key}: absent"
    else:
        want = (f"account {key}: lamports {acct['lamports']}, owner {acct['owner']}, executable "
                f"{'true' if acct['executable'] else 'false'}, data {len(base64.b64decode(acct['data'][0]))} bytes")
    if line != want:
        fail.append(f"follow-epochs.mjs at slot {slot}: {line!r}, the RPC has {want!r}")
    ts_checked += 1
    ts_slots.append(slot)
# It runs after the Rust client, so the chain may have entered another epoch meanwhile: it must
# have followed every epoch from 1 in order, up to that of the newest slot it proved.
ts_newest = epoch_of(schedule, max(ts_slots)) if ts_slots else None
print(f"TypeScript client from the genesis checkpoint: followed epochs {ts_followed}, trusts epoch {ts_epoch}; "
      f"{ts_checked} accounts equal to the RPC at slots {min(ts_slots) if ts_slots else '-'}..{max(ts_slots) if ts_slots else '-'}")
if not ts_followed or ts_followed != list(range(1, len(ts_followed) + 1)) or ts_epoch != ts_newest or ts_epoch < trusted:
    fail.append(f"the TypeScript client followed {ts_followed} and trusts epoch {ts_epoch}; its newest slot is in epoch "
                f"{ts_newest}, the Rust client trusts epoch {trusted}")
if trusted < (max(sets) if sets else 0) - 1:
    fail.append(f"the client trusts epoch {trusted}, Hyades serves sets to epoch {max(sets)}")
if checked < 2 * len(keys):
    fail.append(f"only {checked} of {2 * len(keys)} account proofs")

# Refusals, each a fresh client with a state file of its own, for the newest slot proven.
neg_slot = max(slots) if slots else 0
key = ident1["voteAccount"]
cases = [
    ("a checkpoint naming a stranger as the voter", f"{work}/checkpoint-stranger-voter.json", hyades, "insufficient_stake"),
    ("a checkpoint where a stranger holds 2/3", f"{work}/checkpoint-stranger-stake.json", hyades, "insufficient_stake"),
    ("a checkpoint past its trusting period", f"{work}/checkpoint-too-old.json", hyades, "expired"),
]
for mode, why in [("wrong_set", "wrong_set"), ("rebound", "insufficient_stake"), ("set_not_bound", "set_not_bound"),
                  ("slot_not_in_epoch", "slot_not_in_epoch")]:
    cases.append((f"the transition to epoch {first_with} forged ({mode})", cp,
                  f"http://127.0.0.1:{proxy_port}/{mode}/{first_with}", why))
for i, (name, checkpoint, service, why) in enumerate(cases):
    p = aldb_proof([key, "--url", service, "--trust", "votes", "--checkpoint", checkpoint, "--state",
                    f"{work}/refused-{i}.state.json", "--slot", str(neg_slot)])
    err = p.stderr.strip()
    if p.returncode == 0 or f"({why})" not in err:
        fail.append(f"{name}: not refused with {why}: {p.stdout.strip()[-200:]} {err[-400:]}")
    else:
        line = next((l for l in err.splitlines() if why in l), err.splitlines()[-1])
        print(f"refused, {name}: {line.strip()[:220]}")
with open(f"{work}/sets.json", "w") as f:
    json.dump({str(e): t["set"] for e, t in sets.items()}, f)
for f in fail[:20]:
    print("FAIL", f)
sys.exit(1 if fail else 0)
PY

# The relayer catches up to the newest confirmed slot Hyades serves now, then stops.
target=$(curl -s -X POST "$hyades_url" -H 'content-type: application/json' \
  -d '{"jsonrpc":"2.0","id":1,"method":"getSlotVotes","params":[{"commitment":"confirmed"}]}' |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["result"]["value"]["slot"])')
for _ in $(seq 180); do
  last=$(tail -n1 "$work/relayer/roots.txt" 2>/dev/null | cut -d' ' -f1)
  [[ -n "$last" && "$last" -ge "$target" ]] && break
  kill -0 "$rpid" 2>/dev/null || { tail -n5 "$work/relayer/relayer.log"; echo "FAIL: the relayer exited"; exit 1; }
  sleep 1
done
kill -TERM "$rpid"
wait "$rpid" 2>/dev/null || true
rpid=""
kill "$ppid" 2>/dev/null || true
wait "$ppid" 2>/dev/null || true
ppid=""
echo "client proxy: $(tail -n1 "$work/proxy.log")"

echo "== checks: the relayer on votes"
python3 - "$work" "$hyades_url" "$rel/aldb" <<'PY'
import json, re, subprocess, sys
from cluster import epoch_of, rpc, set_hash

work, hyades, aldb = sys.argv[1], sys.argv[2], sys.argv[3]
schedule = json.load(open(f"{work}/schedule.json"))
sets = {int(e): s for e, s in json.load(open(f"{work}/sets.json")).items()}
sets[0] = json.load(open(f"{work}/checkpoint-genesis.json"))["set"]
fail = []
out = [l.split() for l in open(f"{work}/relayer/roots.txt") if l.strip()]
accepted = {int(s): r for s, r in out}
lines = [json.loads(l) for l in open(f"{work}/relayer/roots.jsonl") if l.strip()]
log = open(f"{work}/relayer/relayer.log", errors="replace").read()
given_up = {int(s): why for s, why in re.findall(r"slot (\d+): given up: (.*)", log)}
followed = [int(e) for e in re.findall(r"followed the validator set to epoch (\d+)", log)]
refused = re.findall(r"transition to epoch \d+ .* refused \(\w+\): .*", log)
if not accepted:
    sys.exit("FAIL: the relayer accepted nothing")
lo, hi = min(accepted), max(accepted)
# Every slot Hyades serves at confirmed (or finalized) up to the relayer's last.
served = {}
start = 0
while start <= hi:
    for r in rpc(hyades, "getStateRoots", [start, min(start + 999, hi)])["value"]:
        if r.get("commitment") in ("confirmed", "finalized", None):
            served[r["slot"]] = r["root"]
    start += 1000
missing = sorted(set(served) - set(accepted))
differ = sorted(s for s in accepted if s in served and served[s] != accepted[s])
extra = sorted(set(accepted) - set(served))
by_epoch, served_by_epoch = {}, {}
for s in served:
    served_by_epoch[epoch_of(schedule, s)] = served_by_epoch.get(epoch_of(schedule, s), 0) + 1
for s in accepted:
    by_epoch[epoch_of(schedule, s)] = by_epoch.get(epoch_of(schedule, s), 0) + 1
both = [l for l in lines if l.get("voters", 0) >= 2]
both_epochs = sorted({l["epoch"] for l in both})
print(f"relayer on votes: accepted {len(accepted)} of the {len(served)} slots Hyades serves at confirmed, slots {lo}..{hi}, "
      f"by epoch {', '.join(f'{e}: {by_epoch.get(e, 0)}/{n}' for e, n in sorted(served_by_epoch.items()))}; "
      f"{len(differ)} with another root; followed {len(followed)} epochs ({followed[0] if followed else '-'}.."
      f"{followed[-1] if followed else '-'}); {len(both)} roots with both vote accounts' votes counted (epochs {both_epochs})")
summary = [l for l in log.splitlines() if "relayer stopped" in l]
if summary:
    print("  " + summary[-1].split("relayer stopped; ", 1)[-1][:300])
# A confirmed slot the relayer did not accept must be one it gave up, and one whose votes do not
# make 2/3 of its epoch's set: `aldb proof --trust votes --validators` with that set refuses it
# too (no vote of the set landed with the slot as its last, or too little stake did).
reasons = {}
for s in missing:
    e = epoch_of(schedule, s)
    path = f"{work}/validators-{e}.json"
    with open(path, "w") as f:
        json.dump(sets[e]["validators"], f)
    p = subprocess.run([aldb, "proof", sets[0]["validators"][0]["voteAccount"], "--url", hyades, "--trust", "votes",
                        "--validators", path, "--slot", str(s)], capture_output=True, text=True)
    why = given_up.get(s, "")
    kind = ("genesis, no bank logged" if "-32001" in why and s == 0 else "no vote of the set landed" if "-32007" in why
            else "too little stake" if "not more than 2/3" in why else why[:80])
    reasons[kind] = reasons.get(kind, 0) + 1
    if s not in given_up:
        fail.append(f"slot {s}: neither accepted nor given up")
    elif p.returncode == 0:
        fail.append(f"slot {s}: given up ({why[:120]}), yet aldb proof accepts it on epoch {e}'s set")
print(f"  not accepted: {len(missing)} slots {missing[:40]}, each given up and refused by aldb proof on its epoch's set too: "
      + ", ".join(f"{n} {k}" for k, n in reasons.items()))
if differ:
    fail.append(f"roots differ from Hyades' at {differ[:20]}")
if extra:
    fail.append(f"roots accepted for slots Hyades does not serve at confirmed: {extra[:20]}")
if refused:
    fail.append(f"transitions refused: {refused[:3]}")
if followed != list(range(1, len(followed) + 1)) or not followed:
    fail.append(f"the relayer did not follow every epoch from 1 in order: {followed}")
if sorted(by_epoch) != sorted(served_by_epoch):
    fail.append(f"epochs without an accepted root: {sorted(set(served_by_epoch) - set(by_epoch))}")
if not both:
    fail.append("no root accepted with both nodes' votes counted")
if len(lines) != len(accepted):
    fail.append(f"--json-lines printed {len(lines)} lines for {len(accepted)} roots")
# The first root of each epoch past the checkpoint's carries the transition that proved its set,
# for a destination chain's verifier: the set Hyades serves for that epoch.
first_of = {}
for l in lines:
    first_of.setdefault(l["epoch"], l)
carried = 0
for e, l in sorted(first_of.items()):
    t = l.get("transition")
    if e == 0:
        continue
    if not t or set_hash(t["set"]) != set_hash(sets[e]) or epoch_of(schedule, t["evidence"]["slot"]) != e - 1:
        fail.append(f"the first root of epoch {e} (slot {l['slot']}) does not carry the transition to its set")
    else:
        carried += 1
print(f"  the first root of each of {carried} epochs carries the transition that proved its set")
for f in fail[:20]:
    print("FAIL", f)
sys.exit(1 if fail else 0)
PY

# Each run: a fresh state from the genesis checkpoint, following Hyades through the proxy (root
# feed over WebSocket, getEpochTransition and getSlotVotes over HTTP), the transition to the
# epoch where the second node joined forged one way, until it is refused twice (asked again a
# second later) or RELAYER_FORGED_SECS (default 120) pass. The four runs took 11 s in all (a
# whole run of the script 171 s).
echo "== the relayer through the proxy, the transition to the second node's first epoch forged four ways"
python3 - "$work" "$hyades_url" "$rel/aldb-relayer" "$PROXY_PORT" "$RELAYER_METRICS_PORT" "${RELAYER_FORGED_SECS:-120}" <<'PY'
import json, os, re, subprocess, sys, time, urllib.request
from cluster import epoch_of, first_slot, rpc

work, hyades, relayer, proxy_port, metrics_port, secs = sys.argv[1:7]
schedule = json.load(open(f"{work}/schedule.json"))
forged = int(open(f"{work}/forged-epoch").read())
first = first_slot(schedule, forged)
honest = dict(l.split() for l in open(f"{work}/relayer/roots.txt") if l.strip())
served = {}
for start in range(0, first, 1000):
    for r in rpc(hyades, "getStateRoots", [start, min(start + 999, first - 1)])["value"]:
        served[str(r["slot"])] = r["root"]
fail = []

def metrics():
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return {}
    return {k: float(v) for k, v in (l.rsplit(" ", 1) for l in text.splitlines() if l and not l.startswith("#"))}

def wait_line(path, pattern, proc, secs):
    give_up = time.time() + secs
    while time.time() < give_up and proc.poll() is None:
        if re.search(pattern, open(path, errors="replace").read(), re.M):
            return True
        time.sleep(0.2)
    return False

for mode, why in [("wrong_set", "wrong_set"), ("rebound", "insufficient_stake"), ("set_not_bound", "set_not_bound"),
                  ("slot_not_in_epoch", "slot_not_in_epoch")]:
    d = f"{work}/relayer-{mode}"
    os.makedirs(d)
    with open(f"{d}/relayer.json5", "w") as f:
        f.write(f"""{{ endpoints: ["ws://127.0.0.1:{proxy_port}/ws"], trust: "votes",
  checkpoint: "{work}/checkpoint-genesis.json", state_file: "state.json", output_file: "roots.txt",
  commitment: "confirmed", metrics_addr: "127.0.0.1:{metrics_port}" }}\n""")
    t0 = time.time()
    proxy = subprocess.Popen([sys.executable, "scripts/lib/forge_proxy.py", hyades, proxy_port, mode, str(forged)],
                             stdout=open(f"{d}/proxy.log", "w"), stderr=subprocess.STDOUT)
    rel, m, name = None, {}, f'aldb_relayer_transitions_refused_total{{reason="{why}"}}'
    try:
        if not wait_line(f"{d}/proxy.log", "^listening", proxy, 10):
            fail.append(f"{mode}: the proxy did not start: {open(f'{d}/proxy.log').read()[-300:]}")
            continue
        rel = subprocess.Popen([relayer, "--config", f"{d}/relayer.json5", "--json-lines"],
                               stdout=open(f"{d}/roots.jsonl", "w"), stderr=open(f"{d}/relayer.log", "w"))
        give_up = time.time() + int(secs)
        while rel.poll() is None and time.time() < give_up:
            m = metrics()
            if m.get(name, 0) >= 2:
                break
            time.sleep(0.5)
    finally:
        for p in (rel, proxy):
            if p is not None:
                p.terminate()
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
    took = time.time() - t0
    log = open(f"{d}/relayer.log", errors="replace").read()
    plog = open(f"{d}/proxy.log", errors="replace").read()
    lines = re.findall(rf"transition to epoch {forged} \(slot \d+\) from \S+ refused \((\w+)\): .*", log)
    named = re.search(rf"transition to epoch {forged} \(slot \d+\) from \S+ refused \(\w+\): .*", log)
    refused = {k: v for k, v in m.items() if k.startswith("aldb_relayer_transitions_refused_total")}
    out = [l.split() for l in open(f"{d}/roots.txt") if l.strip()] if os.path.exists(f"{d}/roots.txt") else []
    jl = [json.loads(l) for l in open(f"{d}/roots.jsonl") if l.strip()]
    state = json.load(open(f"{d}/state.json")) if os.path.exists(f"{d}/state.json") else {}
    trusted = state.get("client", {}).get("held", [{}])[-1].get("set", {}).get("epoch")
    followed = [int(e) for e in re.findall(r"followed the validator set to epoch (\d+)", log)]
    epochs = sorted({epoch_of(schedule, int(s)) for s, _ in out})
    bad = []
    if rel is None or rel.returncode not in (0, -15):
        bad.append(f"the relayer ended with {rel and rel.returncode}: {log.strip()[-300:]}")
    if m.get(name, 0) < 2 or set(refused) != {name}:
        bad.append(f"not refused twice as {why} and nothing else (metrics {refused or 'none'})")
    if not named or set(lines) != {why}:
        bad.append(f"the log names {sorted(set(lines))} for the transition to epoch {forged}, not {why}")
    if m.get("aldb_relayer_frozen") != 0 or "MISBEHAVIOUR" in log or os.path.exists(f"{d}/state.json.misbehaviour.json"):
        bad.append("it froze: a forgery is no misbehaviour of the set")
    if not re.search(rf"^forged the transition to epoch {forged} \(http\): {mode}$", plog, re.M):
        bad.append("the proxy forged nothing")
    # Only roots it verified: every one before the forged epoch, Hyades' (and the honest run's where
    # that accepted the slot too), on more than 2/3 of its epoch's stake; the epochs before followed.
    if not out or [(str(l["slot"]), l["root"]) for l in jl] != [tuple(o) for o in out]:
        bad.append(f"{len(out)} output lines, {len(jl)} --json-lines lines that are not the same roots")
    late = [s for s, _ in out if int(s) >= first]
    wrong = [s for s, r in out if served.get(s) != r or honest.get(s, r) != r]
    thin = [l["slot"] for l in jl if not 3 * l["stake"] > 2 * l["totalStake"]]
    if late or wrong or thin:
        bad.append(f"roots of epoch {forged} or later {late[:5]}, not Hyades' or the honest run's {wrong[:5]}, "
                   f"on 2/3 or less {thin[:5]}")
    if followed != list(range(1, forged)) or trusted != forged - 1 or (epochs and epochs[-1] != forged - 1):
        bad.append(f"followed {followed}, trusts {trusted}, roots in epochs {epochs}: not every epoch before {forged}")
    if state.get("nextSlot", first + 1) > first:
        bad.append(f"its cursor is past slot {first}, epoch {forged}'s first: {state.get('nextSlot')}")
    in_honest = sum(1 for s, _ in out if s in honest)
    honest_before = sum(1 for s in honest if int(s) < first)
    print(f"relayer, the transition to epoch {forged} forged ({mode}): refused {m.get(name, 0):.0f} times as {why} "
          f"in {took:.0f} s; {len(out)} roots accepted, slots {out[0][0] if out else '-'}..{out[-1][0] if out else '-'} "
          f"(epochs {epochs[0] if epochs else '-'}..{epochs[-1] if epochs else '-'}; {in_honest} of the honest run's "
          f"{honest_before} before epoch {forged}), none of epoch {forged}; trusts epoch {trusted}, frozen "
          f"{m.get('aldb_relayer_frozen', -1):.0f}, misbehaviour file "
          f"{'written' if os.path.exists(f'{d}/state.json.misbehaviour.json') else 'none'}")
    if named:
        print(f"  {named.group(0)[:240]}")
    summary = [l for l in plog.splitlines() if l.startswith("methods passed")]
    if summary:
        print(f"  proxy: {summary[-1]}")
    fail += [f"{mode}: {b}" for b in bad]
for f in fail[:20]:
    print("FAIL", f)
sys.exit(1 if fail else 0)
PY

echo "== stopping the validators; the second node's bank hashes; the bootstrap's ledger replayed"
# The bootstrap's rooted chain, which the replay must reproduce slot by slot.
curl -s -X POST "$rpc_url" -H 'content-type: application/json' \
  -d '{"jsonrpc":"2.0","id":1,"method":"getBlocks","params":[1,null,{"commitment":"finalized"}]}' |
  python3 -c 'import json,sys; print("\n".join(str(s) for s in json.load(sys.stdin)["result"]))' | sort -k1,1 >"$work/rooted"
stop_validator "$work/ledger2" "$v2"
v2=""
stop_validator "$work/ledger1" "$v1"
v1=""
frozen_hashes() { # frozen_hashes LOG: every `bank frozen` line's slot and hash, one per slot, as join(1) wants
  sed -n 's/.*bank frozen: \([0-9]*\) hash: \([1-9A-HJ-NP-Za-km-z]*\) .*/\1 \2/p' "$1" | sort -u -k1,1
}
frozen_hashes "$work/validator1.log" >"$work/hashes1"
frozen_hashes "$work/validator2.log" >"$work/hashes2"
same2=$(join "$work/hashes1" "$work/hashes2" | awk '$2 == $3' | wc -l)
diff2=$(join "$work/hashes1" "$work/hashes2" | awk '$2 != $3' | wc -l)
echo "second node: $(wc -l <"$work/hashes2") banks frozen, $same2 with the bootstrap's bank hash, $diff2 different"
((diff2 == 0 && same2 >= 32)) || { echo "FAIL: the second node's bank hashes are not the bootstrap's"; exit 1; }
mkdir -p "$work/replay"
cp "$work/ledger1/genesis.bin" "$work/replay/"
cp -r "$work/ledger1/rocksdb" "$work/replay/"
"$bin/aldb-ledger-replay" "$work/replay" >"$work/replay.out" 2>"$work/replay.log" ||
  { tail -n5 "$work/replay.log"; echo "FAIL: the replay exited non-zero"; exit 1; }
sed -n 's/^slot \([0-9]*\) parent [0-9]* hash \([1-9A-HJ-NP-Za-km-z]*\) .*/\1 \2/p' "$work/replay.out" | sort -u -k1,1 >"$work/hashes-replay"
replay_same=$(join "$work/hashes1" "$work/hashes-replay" | awk '$2 == $3' | wc -l)
replay_diff=$(join "$work/hashes1" "$work/hashes-replay" | awk '$2 != $3' | wc -l)
replay_last=$(cut -d' ' -f1 "$work/hashes-replay" | sort -n | tail -n1)
# Every rooted slot of the bootstrap must be replayed with its hash; banks it froze on forks the
# cluster dropped may be absent from the replay (counted, not required).
rooted_same=$(join "$work/rooted" "$work/hashes1" | join - "$work/hashes-replay" | awk '$2 == $3' | wc -l)
replay_unseen=$(join -v1 "$work/hashes1" "$work/hashes-replay" | awk -v l="$replay_last" '$1 <= l' | wc -l)
echo "replay: $(wc -l <"$work/hashes-replay") slots replayed from genesis to $replay_last, $replay_same with the bootstrap's bank hash, $replay_diff different; $rooted_same of the $(wc -l <"$work/rooted") rooted slots reproduced; $replay_unseen banks of dropped forks up to there not replayed"
((replay_diff == 0)) || { join "$work/hashes1" "$work/hashes-replay" | awk '$2 != $3' | head; echo "FAIL: replayed bank hashes differ"; exit 1; }
((replay_same >= 160)) || { echo "FAIL: only $replay_same replayed slots compared"; exit 1; }
((rooted_same == $(wc -l <"$work/rooted"))) || { echo "FAIL: rooted slots not reproduced by the replay"; exit 1; }
echo "validator-epochs passed in $(($(date +%s) - t0)) s"
