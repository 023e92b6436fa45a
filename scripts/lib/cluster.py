"""What the cluster scripts' Python steps share (scripts/validator-epochs.sh): base58, JSON-RPC
calls, keypair files as agave reads them, legacy transactions compiled by hand (system, vote and
stake program instructions), and the validator set's encoding and hash (docs/SPEC.md §11.2).

Only the standard library and `cryptography` (ed25519): the scripts run on a bare machine."""

import base64
import hashlib
import json
import time
import urllib.error
import urllib.request

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

SYSTEM = bytes(32)
VOTE_PROGRAM = "Vote111111111111111111111111111111111111111"
STAKE_PROGRAM = "Stake11111111111111111111111111111111111111"
STAKE_CONFIG = "StakeConfig11111111111111111111111111111111"
RENT = "SysvarRent111111111111111111111111111111111"
CLOCK = "SysvarC1ock11111111111111111111111111111111"
STAKE_HISTORY = "SysvarStakeHistory1111111111111111111111111"
VOTE_SPACE = 3762
STAKE_SPACE = 200


def b58encode(b):
    n = int.from_bytes(b, "big")
    s = ""
    while n:
        n, r = divmod(n, 58)
        s = B58[r] + s
    return "1" * (len(b) - len(b.lstrip(b"\0"))) + s


def b58decode(s, size=32):
    n = 0
    for c in s:
        n = n * 58 + B58.index(c)
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
    out = b"\0" * (len(s) - len(s.lstrip("1"))) + raw
    return out.rjust(size, b"\0") if size else out


class RpcError(Exception):
    """A JSON-RPC error answer: its code and the whole error object."""

    def __init__(self, method, error):
        super().__init__(f"{method}: {error}")
        self.code = error.get("code") if isinstance(error, dict) else None
        self.error = error


def rpc(url, method, params, timeout=30):
    """The result of `method`, or RpcError with the answer's error."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    req = urllib.request.Request(url, body, {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        out = json.load(r)
    if "error" in out:
        raise RpcError(method, out["error"])
    return out["result"]


def keypair(prefix, seed_byte):
    """A fixed-seed ed25519 key, written as PREFIX.json (agave's 64-byte array: secret, then
    public) and PREFIX.pubkey (base58); returns (private key, public key bytes)."""
    k = Ed25519PrivateKey.from_private_bytes(bytes([seed_byte]) * 32)
    sk = k.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
    pk = k.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    with open(f"{prefix}.json", "w") as f:
        json.dump(list(sk + pk), f)
    with open(f"{prefix}.pubkey", "w") as f:
        f.write(b58encode(pk))
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


def compile_tx(payer, instructions, signers, blockhash):
    """A signed legacy transaction. `instructions`: (program id bytes, [(pubkey bytes, signer,
    writable)], data); `signers`: {pubkey bytes: private key}, the payer among them. Keys are
    ordered as the runtime wants them: writable signers (payer first), read-only signers,
    writable others, read-only others."""
    metas, order = {}, []

    def add(k, signer, writable):
        if k not in metas:
            metas[k] = [signer, writable]
            order.append(k)
        else:
            metas[k][0] |= signer
            metas[k][1] |= writable

    add(payer, True, True)
    for prog, accounts, _ in instructions:
        for k, s, w in accounts:
            add(k, s, w)
        add(prog, False, False)
    keys = sorted(order, key=lambda k: (not metas[k][0], not metas[k][1]))  # stable: payer first
    n_sig = sum(1 for k in keys if metas[k][0])
    ro_signed = sum(1 for k in keys if metas[k][0] and not metas[k][1])
    ro_unsigned = sum(1 for k in keys if not metas[k][0] and not metas[k][1])
    idx = {k: i for i, k in enumerate(keys)}
    msg = bytes([n_sig, ro_signed, ro_unsigned]) + cu16(len(keys)) + b"".join(keys) + blockhash
    msg += cu16(len(instructions))
    for prog, accounts, data in instructions:
        msg += bytes([idx[prog]]) + cu16(len(accounts)) + bytes(idx[k] for k, _, _ in accounts)
        msg += cu16(len(data)) + data
    return cu16(n_sig) + b"".join(signers[k].sign(msg) for k in keys[:n_sig]) + msg


class TxFailed(Exception):
    """A transaction that landed with an error."""


def wait_confirmed(url, sig, secs=90):
    for _ in range(secs):
        st = rpc(url, "getSignatureStatuses", [[sig]])["value"][0]
        if st and st.get("confirmationStatus") in ("confirmed", "finalized"):
            if st.get("err"):
                raise TxFailed(f"transaction {sig} failed: {st['err']}")
            return st["slot"]
        time.sleep(1)
    raise SystemExit(f"transaction {sig} not confirmed in {secs} s")


# The stake program's StakeError::EpochRewardsActive: while an epoch's rewards are paid out, in
# its first slots, no stake account may change; the transaction is sent again a moment later.
EPOCH_REWARDS_ACTIVE = "'Custom': 16"


def send(url, payer, instructions, signers, tries=30):
    """Compiles, sends and waits for the transaction; returns the slot it landed in. A failure
    for EpochRewardsActive (in simulation or on chain) is retried after a second, `tries` times."""
    for attempt in range(tries):
        blockhash = b58decode(rpc(url, "getLatestBlockhash", [{"commitment": "confirmed"}])["value"]["blockhash"])
        tx = compile_tx(payer, instructions, signers, blockhash)
        try:
            sig = rpc(url, "sendTransaction", [base64.b64encode(tx).decode(),
                                               {"encoding": "base64", "preflightCommitment": "confirmed"}])
            return wait_confirmed(url, sig)
        except (RpcError, TxFailed) as e:
            text = str(e).replace('"', "'")
            if EPOCH_REWARDS_ACTIVE not in text or attempt + 1 == tries:
                raise SystemExit(f"FAIL: {e}")
            time.sleep(1)


def airdrop(url, pubkey, lamports):
    return wait_confirmed(url, rpc(url, "requestAirdrop", [b58encode(pubkey), lamports]))


def create_account(payer, new, lamports, space, owner):
    data = (0).to_bytes(4, "little") + lamports.to_bytes(8, "little") + space.to_bytes(8, "little") + owner
    return SYSTEM, [(payer, True, True), (new, True, True)], data


def vote_initialize(vote, node, voter, withdrawer, commission):
    data = (0).to_bytes(4, "little") + node + voter + withdrawer + bytes([commission])
    return b58decode(VOTE_PROGRAM), [(vote, False, True), (b58decode(RENT), False, False),
                                     (b58decode(CLOCK), False, False), (node, True, False)], data


def vote_initialize_v2(vote, node, voter, withdrawer, bls_pubkey, proof_of_possession, commission_bps):
    """VoteInstruction::InitializeAccountV2 (SIMD-0464; enum index 16): a vote state V4 that
    carries the voter's BLS public key, whose proof of possession the vote program verifies.
    Inflation rewards go to the vote account, block revenue to the node, as `InitializeAccount`
    sets them; the node pays, so it is writable as a collector must be."""
    if len(bls_pubkey) != 48 or len(proof_of_possession) != 96:
        raise ValueError("a BLS public key is 48 bytes and its proof of possession 96")
    data = (16).to_bytes(4, "little") + node + voter + bls_pubkey + proof_of_possession + withdrawer
    data += commission_bps.to_bytes(2, "little") + commission_bps.to_bytes(2, "little")
    return b58decode(VOTE_PROGRAM), [(vote, False, True), (node, True, True), (vote, False, True),
                                     (node, True, True)], data


def vote_bls_pubkey(data):
    """The compressed BLS public key a vote account's data holds: None for a vote state before
    V4 (VoteStateVersions index 3) or a V4 without one. V4's fixed head: version u32, node,
    withdrawer, the two collectors, two u16 commissions, pending rewards u64, then the Option."""
    if len(data) < 193 or int.from_bytes(data[:4], "little") != 3 or data[144] == 0:
        return None
    return bytes(data[145:193])


def stake_initialize(stake, staker, withdrawer):
    # StakeInstruction::Initialize(Authorized {staker, withdrawer}, Lockup::default())
    data = (0).to_bytes(4, "little") + staker + withdrawer + bytes(8 + 8 + 32)
    return b58decode(STAKE_PROGRAM), [(stake, False, True), (b58decode(RENT), False, False)], data


def stake_delegate(stake, vote, authority):
    # StakeInstruction::DelegateStake: the stake config account is unused but still listed.
    accounts = [(stake, False, True), (vote, False, False), (b58decode(CLOCK), False, False),
                (b58decode(STAKE_HISTORY), False, False), (b58decode(STAKE_CONFIG), False, False),
                (authority, True, False)]
    return b58decode(STAKE_PROGRAM), accounts, (2).to_bytes(4, "little")


def stake_deactivate(stake, authority):
    accounts = [(stake, False, True), (b58decode(CLOCK), False, False), (authority, True, False)]
    return b58decode(STAKE_PROGRAM), accounts, (5).to_bytes(4, "little")


def set_encoding(s):
    """docs/SPEC.md §11.2's encoding of a set in its JSON form."""
    members = sorted((b58decode(v["voteAccount"]), b58decode(v["authorizedVoter"]), v["stake"])
                     for v in s["validators"])
    out = s["epoch"].to_bytes(8, "little") + s["totalStake"].to_bytes(8, "little") + len(members).to_bytes(4, "little")
    for vote, voter, stake in members:
        out += vote + voter + stake.to_bytes(8, "little")
    return out


def set_hash(s):
    return hashlib.sha256(b"aldb-epoch-set-v1" + set_encoding(s)).digest()


def first_slot(schedule, epoch):
    """The first slot of `epoch` (the inverse of epoch_of)."""
    if epoch < schedule["firstNormalEpoch"]:
        return 32 * (2 ** epoch - 1)
    return schedule["firstNormalSlot"] + (epoch - schedule["firstNormalEpoch"]) * schedule["slotsPerEpoch"]


def epoch_of(schedule, slot):
    """SPEC §11.2's epoch(S) for a getEpochSchedule answer."""
    if slot < schedule["firstNormalSlot"]:
        e = 0
        while 32 * (2 ** (e + 1) - 1) <= slot:
            e += 1
        return e
    return schedule["firstNormalEpoch"] + (slot - schedule["firstNormalSlot"]) // schedule["slotsPerEpoch"]


def sample_vote_accounts(url, path):
    """Appends to `path` one JSON line of what getVoteAccounts shows at `confirmed` (unstaked
    delinquent accounts kept): the epoch, and each vote account's activatedStake (the stakes
    cache, unfiltered) and epochVoteAccount (whether the epoch's EpochStakes holds it, the
    filtered set when the admission ticket is active). Skipped, returning None, when the epoch
    changed between the calls, so a line never mixes two epochs."""
    before = rpc(url, "getEpochInfo", [{"commitment": "confirmed"}])
    va = rpc(url, "getVoteAccounts", [{"commitment": "confirmed", "keepUnstakedDelinquents": True}])
    after = rpc(url, "getEpochInfo", [{"commitment": "confirmed"}])
    if before["epoch"] != after["epoch"]:
        return None
    line = {"epoch": after["epoch"], "slot": after["absoluteSlot"],
            "accounts": {v["votePubkey"]: [v["activatedStake"], v["epochVoteAccount"]]
                         for v in va["current"] + va["delinquent"]}}
    with open(path, "a") as f:
        f.write(json.dumps(line) + "\n")
    return line
