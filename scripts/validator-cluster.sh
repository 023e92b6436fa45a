#!/usr/bin/env bash
# Two patched validators on loopback, both with aldb_state_root_in_bank_hash active, both voting:
# the patched solana-test-validator as the bootstrap (the cluster's only staked node and leader,
# feature active at genesis), and a patched agave-validator joining it through gossip with its own
# identity and a vote account this script creates (unstaked: agave votes with any vote account).
# The second node starts from the bootstrap's first full snapshot (slot 100, downloaded over RPC)
# and repairs the blocks after it. After SECONDS (default 120) it checks that:
#   - the second node rebuilt its tree at the snapshot slot and found it matching that bank's hash;
#   - it froze banks with the feature (its `aldb: slot` lines) and, for every slot both froze, the
#     same bank hash as the bootstrap;
#   - it decided to vote (fork choice's `voting: S` lines) on slots whose hash is the bootstrap's.
# It also reports the TowerSync votes that landed in the bootstrap's blocks, per vote account, and
# where both nodes' votes landed for a slot, requires the same hash. The second node's votes do not
# land today: it is unstaked, and agave takes votes into blocks only from staked nodes (the vote
# QUIC port and gossip votes are stake-filtered); staking it needs a delegated stake account and
# an epoch boundary (validator-patches/README.md).
# Ports: the bootstrap as scripts/validator-patched.sh (RPC_PORT, FAUCET_PORT, GOSSIP_PORT,
# DYNAMIC_PORTS); the second node RPC_PORT2 (28899), GOSSIP_PORT2 (30100), DYNAMIC_PORTS2
# (30000-30100). ALDB_PATCHED_BIN names an already built bin directory.
# Both ledgers and logs go to a fresh temporary work directory (printed; ~500 MB by the end),
# removed when the run passes unless ALDB_KEEP_WORK=1, kept when it fails.
# Usage: scripts/validator-cluster.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-120}"
# shellcheck source=scripts/lib/validator.sh
source scripts/lib/validator.sh
# The bootstrap's metrics port is unused (it loads no plugin).
validator_ports 8899 9900 10100 10000-10100 9898
RPC_PORT2="${RPC_PORT2:-28899}"
GOSSIP_PORT2="${GOSSIP_PORT2:-30100}"
DYNAMIC_PORTS2="${DYNAMIC_PORTS2:-30000-30100}"
bin="$(patched_validator_bin)"
validator_workdir
echo "work dir: $work"
# shellcheck disable=SC2154 # rc: the exit status, taken first thing in the trap
trap 'rc=$?; kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; validator_work_cleanup "$rc"' EXIT
t0=$(date +%s)

"$bin/solana-test-validator" --aldb-state-root --ledger "$work/ledger1" "${validator_net[@]}" \
  --log >"$work/validator1.log" 2>&1 &
v1=$!
wait_for_health "http://127.0.0.1:$RPC_PORT" 120 "$v1" "$work/validator1.log" ||
  { echo "FAIL: the bootstrap's RPC is not healthy"; exit 1; }
# A first rooted slot, before its faucet is asked for the second node's funds.
for _ in $(seq 120); do
  curl -s -X POST "127.0.0.1:$RPC_PORT" -H 'content-type: application/json' \
    -d '{"jsonrpc":"2.0","id":1,"method":"getSlot","params":[{"commitment":"finalized"}]}' | grep -q '"result":[1-9]' && break
  sleep 1
done

# The second node's identity and vote account: keypair files as agave reads them (64-byte JSON
# arrays, secret then public), and the vote account created and initialised by one transaction
# paid by the identity (airdropped by the bootstrap's faucet).
python3 - "$work" "$RPC_PORT" <<'PY'
import json, sys, time, urllib.request
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives import serialization

work, port = sys.argv[1], sys.argv[2]
B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

def b58e(b):
    n = int.from_bytes(b, "big")
    s = ""
    while n:
        n, r = divmod(n, 58)
        s = B58[r] + s
    return "1" * (len(b) - len(b.lstrip(b"\0"))) + s

def b58d(s):
    n = 0
    for c in s:
        n = n * 58 + B58.index(c)
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return (b"\0" * (len(s) - len(s.lstrip("1"))) + raw).rjust(32, b"\0")

def call(method, params):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}", body, {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        out = json.load(r)
    if "error" in out:
        raise SystemExit(f"{method}: {out['error']}")
    return out["result"]

def keypair(seed_byte, name):
    k = Ed25519PrivateKey.from_private_bytes(bytes([seed_byte]) * 32)
    sk = k.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
    pk = k.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    with open(f"{work}/{name}.json", "w") as f:
        json.dump(list(sk + pk), f)
    with open(f"{work}/{name}.pubkey", "w") as f:
        f.write(b58e(pk))
    return k, pk

def cu16(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])

def wait(sig):
    for _ in range(60):
        st = call("getSignatureStatuses", [[sig]])["value"][0]
        if st and st.get("confirmationStatus") in ("confirmed", "finalized"):
            if st.get("err"):
                raise SystemExit(f"transaction {sig} failed: {st['err']}")
            return
        time.sleep(1)
    raise SystemExit(f"transaction {sig} not confirmed")

ident, ipk = keypair(0x51, "identity2")
vote, vpk = keypair(0x52, "vote2")
wait(call("requestAirdrop", [b58e(ipk), 100 * 10**9]))
space = 3762
lamports = call("getMinimumBalanceForRentExemption", [space])
system = bytes(32)
vote_program = b58d("Vote111111111111111111111111111111111111111")
rent = b58d("SysvarRent111111111111111111111111111111111")
clock = b58d("SysvarC1ock11111111111111111111111111111111")
# Signers first (identity pays), then the read-only unsigned program and sysvar accounts.
keys = [ipk, vpk, system, vote_program, rent, clock]
header = bytes([2, 0, 4])
create = (2).to_bytes(1, "little") + cu16(2) + bytes([0, 1]) + cu16(52) + (0).to_bytes(4, "little") \
    + lamports.to_bytes(8, "little") + space.to_bytes(8, "little") + vote_program
init_data = (0).to_bytes(4, "little") + ipk + ipk + ipk + bytes([100])  # VoteInit, commission 100
init = (3).to_bytes(1, "little") + cu16(4) + bytes([1, 4, 5, 0]) + cu16(len(init_data)) + init_data
blockhash = b58d(call("getLatestBlockhash", [{"commitment": "confirmed"}])["value"]["blockhash"])
msg = header + cu16(len(keys)) + b"".join(keys) + blockhash + cu16(2) + create + init
tx = cu16(2) + ident.sign(msg) + vote.sign(msg) + msg
import base64
sig = call("sendTransaction", [base64.b64encode(tx).decode(), {"encoding": "base64", "preflightCommitment": "confirmed"}])
wait(sig)
print(f"second node: identity {b58e(ipk)}, vote account {b58e(vpk)} created")
PY
# agave-validator cannot start from genesis without slot 0's shreds: it starts from a snapshot.
echo "== waiting for the bootstrap's first snapshot"
wait_for_ledger_snapshot "$work/ledger1" 900 || { echo "FAIL: the bootstrap wrote no ledger snapshot in 900 s"; exit 1; }

# Containers often cap open files far below agave-validator's 1,000,000 (patch 0008).
ALDB_NO_ENFORCE_ULIMIT_NOFILE=1 "$bin/agave-validator" --identity "$work/identity2.json" --vote-account "$(cat "$work/vote2.pubkey")" \
  --ledger "$work/ledger2" --entrypoint "127.0.0.1:$GOSSIP_PORT" --allow-private-addr \
  --no-xdp --no-os-network-limits-test --rpc-port "$RPC_PORT2" --gossip-port "$GOSSIP_PORT2" \
  --dynamic-port-range "$DYNAMIC_PORTS2" --bind-address 127.0.0.1 --full-rpc-api \
  --log "$work/validator2.log" >"$work/validator2.out" 2>&1 &
v2=$!
echo "== both running; waiting $secs s"
for _ in $(seq "$secs"); do
  kill -0 "$v2" 2>/dev/null || { tail -n20 "$work/validator2.log" "$work/validator2.out"; echo "FAIL: the second validator exited"; exit 1; }
  sleep 1
done
echo "second node: $(grep -c 'aldb: slot' "$work/validator2.log" || true) aldb lines, last: $(grep 'aldb: slot' "$work/validator2.log" | tail -n1 | cut -c1-160)"
python3 - "$work" "$RPC_PORT" <<'PY'
import json, re, sys, urllib.request

work, port = sys.argv[1], sys.argv[2]
B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

def b58d(s):
    n = 0
    for c in s:
        n = n * 58 + B58.index(c)
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return b"\0" * (len(s) - len(s.lstrip("1"))) + raw

def b58e(b):
    n = int.from_bytes(b, "big")
    s = ""
    while n:
        n, r = divmod(n, 58)
        s = B58[r] + s
    return "1" * (len(b) - len(b.lstrip(b"\0"))) + s

def call(method, params):
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
    kind = int.from_bytes(data[:4], "little")
    if kind not in (14, 15):
        return None
    root = int.from_bytes(data[4:12], "little")
    n, i = varint(data, 12)
    slot = 0 if root == 2**64 - 1 else root
    for _ in range(n):
        off, i = varint(data, i)
        i += 1
        slot += off
    return slot, b58e(data[i:i + 32])

def frozen(path):
    out = {}
    for line in open(path, errors="replace"):
        m = re.search(r"bank frozen: (\d+) hash: (\w+) ", line)
        if m:
            out[int(m.group(1))] = m.group(2)
    return out

fail = []
log2 = open(f"{work}/validator2.log", errors="replace").read()
if not re.search(r"aldb: the tree at slot \d+ matches its bank hash", log2):
    fail.append("the second node did not check its rebuilt tree against the snapshot bank's hash")
h1, h2 = frozen(f"{work}/validator1.log"), frozen(f"{work}/validator2.log")
common = sorted(set(h1) & set(h2))
differ = [s for s in common if h1[s] != h2[s]]
print(f"bank hashes: bootstrap {len(h1)} banks, second node {len(h2)}, {len(common)} in common, {len(differ)} different")
if differ:
    fail.append(f"bank hashes differ at slots {differ[:10]}")
if len(common) < 10:
    fail.append(f"only {len(common)} slots frozen by both")
decided = sorted({int(m) for m in re.findall(r"fork_choice\] voting: (\d+) ", log2)})
good = [s for s in decided if s in h1 and h2.get(s) == h1[s]]
print(f"second node decided to vote on {len(decided)} slots, {len(good)} of them with the bootstrap's bank hash")
if not decided or len(good) != len([s for s in decided if s in h1]):
    fail.append("the second node's vote decisions are missing or on other hashes")

vote2 = open(f"{work}/vote2.pubkey").read().strip()
votes = {}  # vote account -> {slot: hash}
finalized = call("getSlot", [{"commitment": "confirmed"}])["result"]
for s in range(max(1, finalized - 60), finalized + 1):
    block = call("getBlock", [s, {"encoding": "json", "transactionDetails": "full", "rewards": False,
                                  "maxSupportedTransactionVersion": 0, "commitment": "confirmed"}]).get("result")
    if not block:
        continue
    for tx in block["transactions"]:
        msg = tx["transaction"]["message"]
        keys = msg["accountKeys"]
        for ix in msg["instructions"]:
            if keys[ix["programIdIndex"]] != "Vote111111111111111111111111111111111111111":
                continue
            v = tower_sync(b58d(ix["data"]))
            if v:
                votes.setdefault(keys[ix["accounts"][0]], {})[v[0]] = v[1]
print("votes by account: " + ", ".join(f"{k[:8]}..: {len(v)}" for k, v in votes.items()))
other = [k for k in votes if k != vote2]
if vote2 not in votes:
    print("NOT SHOWN: no vote of the second (unstaked) node landed in a block")
if not other:
    fail.append("no vote of the bootstrap landed")
if vote2 in votes and other:
    a, b = votes[other[0]], votes[vote2]
    both = sorted(set(a) & set(b))
    agree = [s for s in both if a[s] == b[s] == h1.get(s)]
    print(f"slots voted by both: {len(both)}, with the same hash, the bootstrap's bank hash: {len(agree)}")
    if len(agree) != len(both):
        fail.append(f"votes disagree at {[s for s in both if s not in agree][:10]}")
    if not both:
        fail.append("no slot voted by both")
for f in fail:
    print("FAIL", f)
sys.exit(1 if fail else 0)
PY
echo "validator-cluster passed in $(($(date +%s) - t0)) s"
