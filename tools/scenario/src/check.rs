//! The account scenario and its checks, and the restart root comparison.
//!
//! How an account is compared: the validator's RPC cannot answer for a past slot, but every
//! answer names the bank it was read from (`context.slot`), and at `confirmed` commitment that
//! bank is frozen. So the scenario reads the accounts with `getMultipleAccounts` (confirmed,
//! `minContextSlot` = the transaction's slot), waits until Hyades publishes that context slot, and
//! proves the same accounts at exactly that slot: both sides describe the same frozen bank, so
//! even accounts that change every slot (Clock, SlotHashes, the vote account) must match byte for
//! byte. For the accounts only the scenario writes, the proofs at the transaction's own slot are
//! checked against the same RPC answer too (nothing else can have changed them in between).
//! Against a plugin at `commitment: "processed"` the accounts are read at `processed` instead:
//! the bank answered from is frozen too, and Hyades serves it as soon as it is.

use std::collections::BTreeMap;
use std::path::Path;
use std::thread::sleep;
use std::time::{Duration, Instant};

use aldb_verify::json::hash_to_base58;
use aldb_verify::spec::account_value;
use aldb_verify::{Claim, Proof};
use anyhow::{Context, Result, bail};
use base64::Engine as _;
use ed25519_dalek::SigningKey;
use serde_json::{Value, json};

use crate::rpc::{Client, context_slot, ensure, str_at, u64_at, value};
use crate::tx::{self, Instruction, Pubkey, address, b58, keypair, pubkey, sign};

const LAMPORTS_PER_SOL: u64 = 1_000_000_000;
/// The validator's "minimum context slot not reached" error.
const MIN_CONTEXT_SLOT_NOT_REACHED: i64 = -32016;
/// How long to wait for a transaction, or for Hyades to publish a slot.
const TIMEOUT: Duration = Duration::from_secs(90);

/// An account as both sides describe it (the fields the commitment covers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Account {
    pub(crate) lamports: u64,
    pub(crate) owner: Pubkey,
    pub(crate) executable: bool,
    pub(crate) data: Vec<u8>,
}

impl std::fmt::Display for Account {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "lamports={} owner={} executable={} data={}B",
            self.lamports,
            b58(&self.owner),
            self.executable,
            self.data.len()
        )
    }
}

fn show(a: Option<&Account>) -> String {
    a.map_or_else(|| "absent".to_string(), ToString::to_string)
}

/// Decodes an account object (`{"lamports","owner","executable","data": [b64, "base64"]}`), as
/// both the validator and Hyades write it; `null` is absent.
fn decode_account(v: &Value) -> Result<Option<Account>> {
    if v.is_null() {
        return Ok(None);
    }
    let data = v.get("data").and_then(Value::as_array).context("`data` is not an array")?;
    let (Some(b64), Some("base64")) = (data.first().and_then(Value::as_str), data.get(1).and_then(Value::as_str))
    else {
        bail!("`data` is not [<base64>, \"base64\"]: {v}");
    };
    Ok(Some(Account {
        lamports: u64_at(v, "lamports")?,
        owner: pubkey(str_at(v, "owner")?)?,
        executable: v.get("executable").and_then(Value::as_bool).context("`executable` is not a boolean")?,
        data: base64::engine::general_purpose::STANDARD.decode(b64).context("`data` is not base64")?,
    }))
}

/// The validator side: transactions and account reads.
pub(crate) struct Chain {
    pub(crate) rpc: Client,
    /// The commitment the accounts are read at: `confirmed`, or `processed` against a plugin at
    /// `commitment: "processed"` (which publishes every frozen bank at once).
    pub(crate) read_at: &'static str,
}

impl Chain {
    pub(crate) fn new(url: &str) -> Self {
        Self { rpc: Client::new(url), read_at: "confirmed" }
    }

    /// Waits until the RPC answers and the chain has confirmed a slot.
    pub(crate) fn wait_ready(&self) -> Result<u64> {
        let start = Instant::now();
        loop {
            match self.rpc.call("getSlot", json!([{"commitment": "confirmed"}])) {
                Ok(s) if s.as_u64().is_some_and(|s| s > 0) => return s.as_u64().context("slot"),
                Ok(_) => {}
                Err(e) if start.elapsed() > TIMEOUT => return Err(e.context("validator not ready")),
                Err(_) => {}
            }
            sleep(Duration::from_millis(500));
        }
    }

    pub(crate) fn blockhash(&self) -> Result<[u8; 32]> {
        let r = self.rpc.call("getLatestBlockhash", json!([{"commitment": "confirmed"}]))?;
        pubkey(str_at(value(&r)?, "blockhash")?)
    }

    pub(crate) fn rent_exempt(&self, space: u64) -> Result<u64> {
        self.rpc.call("getMinimumBalanceForRentExemption", json!([space]))?.as_u64().context("rent is not a number")
    }

    /// Sends a signed transaction (base64); returns its signature.
    pub(crate) fn send(&self, signed: &tx::Signed, skip_preflight: bool) -> Result<String> {
        let wire = base64::engine::general_purpose::STANDARD.encode(&signed.wire);
        let cfg = json!({"encoding": "base64", "skipPreflight": skip_preflight, "preflightCommitment": "confirmed"});
        let sig = self.rpc.call("sendTransaction", json!([wire, cfg]))?;
        ensure(sig.as_str() == Some(signed.signature.as_str()), || {
            format!("the validator names the transaction {sig}, we signed {}", signed.signature)
        })?;
        Ok(signed.signature.clone())
    }

    /// Waits until `sig` is confirmed; returns the slot it landed in. Fails if it failed.
    pub(crate) fn wait_confirmed(&self, sig: &str) -> Result<u64> {
        let start = Instant::now();
        loop {
            let r = self.rpc.call("getSignatureStatuses", json!([[sig], {"searchTransactionHistory": true}]))?;
            let st = value(&r)?.get(0).cloned().unwrap_or(Value::Null);
            if !st.is_null() {
                if let Some(err) = st.get("err").filter(|e| !e.is_null()) {
                    bail!("transaction {sig} failed: {err}");
                }
                if matches!(st.get("confirmationStatus").and_then(Value::as_str), Some("confirmed" | "finalized")) {
                    return u64_at(&st, "slot");
                }
            }
            if start.elapsed() > TIMEOUT {
                bail!("transaction {sig} not confirmed after {TIMEOUT:?} (status {st})");
            }
            sleep(Duration::from_millis(200));
        }
    }

    /// Signs with `signers` (the first pays), sends, waits for confirmation; returns the slot.
    pub(crate) fn execute(&self, signers: &[&SigningKey], ixs: &[Instruction]) -> Result<(String, u64)> {
        let signed = sign(signers, ixs, &self.blockhash()?)?;
        let sig = self.send(&signed, false)?;
        let slot = self.wait_confirmed(&sig)?;
        Ok((sig, slot))
    }

    /// Airdrops from the test validator's faucet and waits for it.
    pub(crate) fn airdrop(&self, to: &Pubkey, lamports: u64) -> Result<u64> {
        let sig = self.rpc.call("requestAirdrop", json!([b58(to), lamports]))?;
        self.wait_confirmed(sig.as_str().context("requestAirdrop returned no signature")?)
    }

    /// The accounts at one frozen bank (at `read_at` commitment) no older than `min_slot`:
    /// `(bank slot, accounts)`.
    fn accounts(&self, keys: &[Pubkey], min_slot: u64) -> Result<(u64, Vec<Option<Account>>)> {
        let names: Vec<String> = keys.iter().map(|k| b58(k)).collect();
        let cfg = json!({"encoding": "base64", "commitment": self.read_at, "minContextSlot": min_slot});
        let start = Instant::now();
        let r = loop {
            match self.rpc.call("getMultipleAccounts", json!([names, cfg])) {
                Ok(r) => break r,
                Err(e) if Client::code(&e) == Some(MIN_CONTEXT_SLOT_NOT_REACHED) && start.elapsed() < TIMEOUT => {
                    sleep(Duration::from_millis(100));
                }
                Err(e) => return Err(e),
            }
        };
        let slot = context_slot(&r)?;
        let list = value(&r)?.as_array().context("getMultipleAccounts: value is not an array")?;
        ensure(list.len() == keys.len(), || format!("asked for {} accounts, got {}", keys.len(), list.len()))?;
        Ok((slot, list.iter().map(decode_account).collect::<Result<_>>()?))
    }

    /// One account's lamports at confirmed commitment.
    fn balance(&self, key: &Pubkey) -> Result<u64> {
        let r = self.rpc.call("getBalance", json!([b58(key), {"commitment": "confirmed"}]))?;
        value(&r)?.as_u64().context("balance is not a number")
    }
}

/// The Hyades side: proofs, verified here.
struct Hyades {
    rpc: Client,
}

impl Hyades {
    /// The newest published slot.
    fn newest(&self) -> Result<u64> {
        u64_at(value(&self.rpc.call("getStateRoot", json!([]))?)?, "slot")
    }

    /// Waits until Hyades publishes a slot at or above `slot`.
    fn wait_for(&self, slot: u64) -> Result<u64> {
        let start = Instant::now();
        loop {
            match self.newest() {
                Ok(s) if s >= slot => return Ok(s),
                Ok(s) if start.elapsed() > TIMEOUT => bail!("Hyades is at slot {s}, still short of {slot}"),
                Err(e) if start.elapsed() > TIMEOUT => return Err(e.context("Hyades never answered")),
                _ => sleep(Duration::from_millis(100)),
            }
        }
    }

    /// The accounts at `slot`, each proof verified against the slot's root from `getStateRoot`.
    fn proven(&self, keys: &[Pubkey], slot: u64) -> Result<([u8; 32], Vec<Option<Account>>)> {
        let r = self.rpc.call("getStateRoot", json!([slot]))?;
        let v = value(&r)?;
        ensure(u64_at(v, "slot")? == slot, || format!("getStateRoot({slot}) answered for another slot: {v}"))?;
        let root = pubkey(str_at(v, "root")?)?;
        let names: Vec<String> = keys.iter().map(|k| b58(k)).collect();
        let r = self.rpc.call("getMultipleAccountProofs", json!([names, {"slot": slot}]))?;
        let list = value(&r)?.as_array().context("getMultipleAccountProofs: value is not an array")?;
        ensure(list.len() == keys.len(), || format!("asked for {} proofs, got {}", keys.len(), list.len()))?;
        let mut out = Vec::with_capacity(keys.len());
        for (key, p) in keys.iter().zip(list) {
            let what = || format!("{} at slot {slot}", b58(key));
            ensure(u64_at(p, "slot")? == slot, || format!("{}: proof for another slot", what()))?;
            ensure(pubkey(str_at(p, "root")?)? == root, || format!("{}: proof names another root", what()))?;
            let proof = Proof::from_json_value(p.get("proof").context("no proof")?)
                .with_context(|| format!("{}: bad proof", what()))?;
            let claim = proof.verify(&root, key).with_context(|| format!("{}: proof rejected", what()))?;
            let account = decode_account(p.get("account").unwrap_or(&Value::Null))?;
            match (&account, claim) {
                (Some(a), Claim::Present { value }) => {
                    ensure(account_value(a.lamports, &a.owner, a.executable, &a.data) == value, || {
                        format!("{}: the returned account does not hash to the proven value", what())
                    })?;
                }
                (None, Claim::Absent) => {}
                (Some(_), Claim::Absent) => bail!("{}: an account was returned but the proof shows absence", what()),
                (None, Claim::Present { .. }) => bail!("{}: no account returned but the proof shows one", what()),
            }
            out.push(account);
        }
        Ok((root, out))
    }
}

/// A named key the scenario checks.
#[derive(Clone)]
struct Named {
    name: String,
    key: Pubkey,
}

fn named(name: &str, key: Pubkey) -> Named {
    Named { name: name.to_string(), key }
}

/// One step's result, for the summary.
struct StepReport {
    tx_slot: Option<u64>,
    check_slot: u64,
    present: usize,
    absent: usize,
}

struct Scenario {
    chain: Chain,
    hyades: Hyades,
    reports: Vec<StepReport>,
}

/// What a check expects of each account besides agreement.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Expect {
    Any,
    Present,
    Absent,
}

impl Scenario {
    /// Reads `accounts` from the validator at a confirmed bank no older than `tx_slot`, proves them
    /// at that bank's slot through Hyades, and compares. With `own`, the accounts are ones only the
    /// scenario writes, and their proofs at `tx_slot` itself are compared too.
    fn check(
        &mut self,
        step: &str,
        tx_slot: Option<u64>,
        accounts: &[(Named, Expect)],
        own: bool,
    ) -> Result<Vec<Option<Account>>> {
        let keys: Vec<Pubkey> = accounts.iter().map(|(n, _)| n.key).collect();
        let min = tx_slot.unwrap_or(0);
        self.hyades.wait_for(min)?;
        let (slot, rpc) = self.chain.accounts(&keys, min)?;
        self.hyades.wait_for(slot)?;
        let (root, proven) = self.hyades.proven(&keys, slot)?;
        let mut slots = vec![(slot, root, proven)];
        if own && let Some(s) = tx_slot.filter(|&s| s != slot) {
            let (r, p) = self.hyades.proven(&keys, s)?;
            slots.push((s, r, p));
        }
        for (at, _, proven) in &slots {
            for (((n, expect), ours), theirs) in accounts.iter().zip(proven).zip(&rpc) {
                if ours != theirs {
                    bail!(
                        "{step}: {} ({}) differs at slot {at} (validator read at slot {slot}):\n  validator: {}\n  proven:    {}",
                        n.name,
                        b58(&n.key),
                        show(theirs.as_ref()),
                        show(ours.as_ref())
                    );
                }
                match (expect, ours) {
                    (Expect::Present, None) => bail!("{step}: {} should exist but is absent", n.name),
                    (Expect::Absent, Some(a)) => bail!("{step}: {} should be absent but is {a}", n.name),
                    _ => {}
                }
            }
        }
        let present = rpc.iter().filter(|a| a.is_some()).count();
        println!(
            "{step:<22} tx slot {:>5}  checked at slot {slot:>5}{}  {present} present, {} absent, all proofs verified, root {}",
            tx_slot.map_or_else(|| "-".to_string(), |s| s.to_string()),
            if slots.len() > 1 { " (and at the tx slot)" } else { "" },
            rpc.len() - present,
            hash_to_base58(&root)
        );
        self.reports.push(StepReport { tx_slot, check_slot: slot, present, absent: rpc.len() - present });
        Ok(rpc)
    }
}

fn u64_le(data: &[u8], at: usize) -> Result<u64> {
    let b = data.get(at..at + 8).context("data too short")?;
    Ok(u64::from_le_bytes(b.try_into()?))
}

/// Accounts the run never touches: genesis programs, sysvars, and two that do not exist.
fn untouched() -> Vec<(&'static str, &'static str)> {
    vec![
        ("system program", "11111111111111111111111111111111"),
        ("SPL Token", tx::TOKEN_PROGRAM),
        ("SPL Associated Token", "ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL"),
        ("SPL Memo", "MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr"),
        ("stake program", "Stake11111111111111111111111111111111111111"),
        ("vote program", "Vote111111111111111111111111111111111111111"),
        ("BPF loader upgradeable", "BPFLoaderUpgradeab1e11111111111111111111111"),
        ("BPF loader 2", "BPFLoader2111111111111111111111111111111111"),
        ("compute budget", "ComputeBudget111111111111111111111111111111"),
        ("address lookup table", "AddressLookupTab1e1111111111111111111111111"),
        ("config program", "Config1111111111111111111111111111111111111"),
        ("native loader", "NativeLoader1111111111111111111111111111111"),
        ("sysvar Rent", "SysvarRent111111111111111111111111111111111"),
        ("sysvar Clock", "SysvarC1ock11111111111111111111111111111111"),
        ("sysvar EpochSchedule", "SysvarEpochSchedu1e111111111111111111111111"),
        ("sysvar SlotHashes", "SysvarS1otHashes111111111111111111111111111"),
        ("sysvar StakeHistory", "SysvarStakeHistory1111111111111111111111111"),
        ("sysvar RecentBlockhashes", "SysvarRecentB1ockHashes11111111111111111111"),
        ("sysvar Fees", "SysvarFees111111111111111111111111111111111"),
        ("sysvar EpochRewards", "SysvarEpochRewards1111111111111111111111111"),
        ("sysvar LastRestartSlot", "SysvarLastRestartS1ot1111111111111111111111"),
        ("sysvar SlotHistory", "SysvarS1otHistory11111111111111111111111111"),
        ("sysvar Instructions", "Sysvar1nstructions1111111111111111111111111"),
        ("incinerator", "1nc1nerator11111111111111111111111111111111"),
    ]
}

/// The scenario: every step checked, a summary at the end. Fails at the first mismatch.
pub(crate) fn run(rpc_url: &str, hyades_url: &str, seed: u64, read_at: &'static str) -> Result<()> {
    let started = Instant::now();
    let chain = Chain { read_at, ..Chain::new(rpc_url) };
    let first = chain.wait_ready()?;
    let hyades = Hyades { rpc: Client::new(hyades_url) };
    hyades.wait_for(first.saturating_sub(1).max(1))?;
    let mut sc = Scenario { chain, hyades, reports: Vec::new() };
    let token = pubkey(tx::TOKEN_PROGRAM)?;
    let k = |label: &str| keypair(seed, label);
    let (payer, alice, bob, carol, dave) = (k("payer"), k("alice"), k("bob"), k("carol"), k("dave"));
    let (mint, tok_a, tok_b) = (k("mint"), k("token-a"), k("token-b"));
    let never = address(&k("never-created"));
    let n = |name: &str, key: &SigningKey| named(name, address(key));
    use Expect::{Absent, Any, Present};

    // Untouched accounts, and the two per-slot writers of a test validator (its identity, which
    // collects fees, and its vote account), checked before the scenario starts and again at the end.
    let identity = pubkey(str_at(&sc.chain.rpc.call("getIdentity", json!([]))?, "identity")?)?;
    let votes = sc.chain.rpc.call("getVoteAccounts", json!([{"commitment": "confirmed"}]))?;
    // The vote account is listed as delinquent until it has voted.
    let vote = ["current", "delinquent"]
        .iter()
        .find_map(|group| votes.get(group).and_then(|c| c.get(0)))
        .map(|v| str_at(v, "votePubkey").and_then(pubkey))
        .transpose()?;
    let mut background: Vec<(Named, Expect)> =
        untouched().into_iter().map(|(n, k)| Ok((named(n, pubkey(k)?), Any))).collect::<Result<_>>()?;
    background.push((named("validator identity", identity), Present));
    if let Some(v) = vote {
        background.push((named("vote account", v), Present));
    }
    background.push((named("never-created key", never), Absent));
    let before = sc.check("untouched (start)", None, &background, false)?;

    let slot = sc.chain.airdrop(&address(&payer), 100 * LAMPORTS_PER_SOL)?;
    sc.check("airdrop", Some(slot), &[(n("payer", &payer), Present)], true)?;

    let p = address(&payer);
    let ixs = [
        tx::transfer(p, address(&alice), 5 * LAMPORTS_PER_SOL),
        tx::transfer(p, address(&bob), 5 * LAMPORTS_PER_SOL),
        tx::transfer(p, address(&carol), 5 * LAMPORTS_PER_SOL),
        tx::transfer(p, address(&dave), 2 * LAMPORTS_PER_SOL),
    ];
    let (_, slot) = sc.chain.execute(&[&payer], &ixs)?;
    let people = [n("payer", &payer), n("alice", &alice), n("bob", &bob), n("carol", &carol), n("dave", &dave)];
    let all_present = |v: &[Named]| v.iter().map(|x| (x.clone(), Present)).collect::<Vec<_>>();
    sc.check("create+fund (system)", Some(slot), &all_present(&people), true)?;

    let ixs = [
        tx::transfer(address(&alice), address(&bob), 1_250_000_000),
        tx::transfer(address(&bob), address(&carol), 500_000_000),
    ];
    let (_, slot) = sc.chain.execute(&[&payer, &alice, &bob], &ixs)?;
    let got = sc.check("modify (transfers)", Some(slot), &all_present(&people[..4]), true)?;
    let lamports = |a: &Option<Account>| a.as_ref().map_or(0, |a| a.lamports);
    ensure(lamports(&got[1]) == 3_750_000_000 && lamports(&got[3]) == 5_500_000_000, || {
        format!("unexpected balances after the transfers: alice {}, carol {}", lamports(&got[1]), lamports(&got[3]))
    })?;

    let rent_mint = sc.chain.rent_exempt(tx::MINT_LEN)?;
    let ixs = [
        tx::create_account(p, address(&mint), rent_mint, tx::MINT_LEN, &token),
        tx::initialize_mint2(token, address(&mint), 6, &address(&alice)),
    ];
    let (_, slot) = sc.chain.execute(&[&payer, &mint], &ixs)?;
    sc.check("SPL mint", Some(slot), &all_present(&[n("payer", &payer), n("mint", &mint)]), true)?;

    let rent_acct = sc.chain.rent_exempt(tx::TOKEN_ACCOUNT_LEN)?;
    let ixs = [
        tx::create_account(p, address(&tok_a), rent_acct, tx::TOKEN_ACCOUNT_LEN, &token),
        tx::initialize_account3(token, address(&tok_a), address(&mint), &address(&alice)),
        tx::create_account(p, address(&tok_b), rent_acct, tx::TOKEN_ACCOUNT_LEN, &token),
        tx::initialize_account3(token, address(&tok_b), address(&mint), &address(&bob)),
    ];
    let (_, slot) = sc.chain.execute(&[&payer, &tok_a, &tok_b], &ixs)?;
    let tokens = [n("payer", &payer), n("mint", &mint), n("token A", &tok_a), n("token B", &tok_b)];
    sc.check("SPL token accounts", Some(slot), &all_present(&tokens), true)?;

    let (_, slot) = sc.chain.execute(
        &[&payer, &alice],
        &[tx::mint_to(token, address(&mint), address(&tok_a), address(&alice), 1_000_000)],
    )?;
    sc.check("SPL mint-to", Some(slot), &all_present(&tokens), true)?;

    let (_, slot) = sc.chain.execute(
        &[&payer, &alice],
        &[tx::token_transfer(token, address(&tok_a), address(&tok_b), address(&alice), 400_000)],
    )?;
    sc.check("SPL transfer", Some(slot), &all_present(&tokens), true)?;

    let (_, slot) = sc.chain.execute(
        &[&payer, &alice],
        &[tx::token_transfer(token, address(&tok_a), address(&tok_b), address(&alice), 600_000)],
    )?;
    let got = sc.check("SPL transfer (empty A)", Some(slot), &all_present(&tokens), true)?;
    let amount = |a: &Option<Account>, at| a.as_ref().map_or(Ok(u64::MAX), |a| u64_le(&a.data, at));
    // Mint: supply after the 36-byte COption<Pubkey> authority; token account: amount at 64.
    let (supply, a_amt, b_amt) = (amount(&got[1], 36)?, amount(&got[2], 64)?, amount(&got[3], 64)?);
    ensure(supply == 1_000_000 && a_amt == 0 && b_amt == 1_000_000, || {
        format!("unexpected token amounts: supply {supply}, A {a_amt}, B {b_amt}")
    })?;

    let (_, slot) = sc
        .chain
        .execute(&[&payer, &alice], &[tx::close_account(token, address(&tok_a), address(&alice), address(&alice))])?;
    let closed = [
        (n("payer", &payer), Present),
        (n("token A (closed)", &tok_a), Absent),
        (n("alice", &alice), Present),
        (n("token B", &tok_b), Present),
    ];
    sc.check("SPL close account", Some(slot), &closed, true)?;

    let drain = sc.chain.balance(&address(&dave))?;
    let (_, slot) = sc.chain.execute(&[&payer, &dave], &[tx::transfer(address(&dave), address(&carol), drain)])?;
    let drained = [(n("payer", &payer), Present), (n("dave (drained)", &dave), Absent), (n("carol", &carol), Present)];
    sc.check("drain system account", Some(slot), &drained, true)?;

    // Everything once more at one slot: the scenario's accounts, closed ones absent.
    let mut finals = all_present(&[
        n("payer", &payer),
        n("alice", &alice),
        n("bob", &bob),
        n("carol", &carol),
        n("mint", &mint),
        n("token B", &tok_b),
    ]);
    finals.push((n("token A (closed)", &tok_a), Absent));
    finals.push((n("dave (drained)", &dave), Absent));
    finals.push((named("never-created key", never), Absent));
    sc.check("final (scenario)", None, &finals, true)?;
    let after = sc.check("untouched (end)", None, &background, false)?;

    println!("\nuntouched accounts, as the plugin committed them (equal to the validator's RPC at the same slot):");
    for (((nm, _), b), a) in background.iter().zip(&before).zip(&after) {
        let changed = match (b, a) {
            (Some(b), Some(a)) if b != a => {
                if b.lamports != a.lamports {
                    "changed (lamports)"
                } else {
                    "changed (data)"
                }
            }
            (None, None) | (Some(_), Some(_)) => "unchanged",
            _ => "created or deleted",
        };
        println!("  {:<24} {:<44} {:<18} {}", nm.name, b58(&nm.key), changed, show(a.as_ref()));
    }
    let first_slot = sc.reports.first().map_or(0, |r| r.check_slot);
    let last_slot = sc.reports.last().map_or(0, |r| r.check_slot);
    let checked: usize = sc.reports.iter().map(|r| r.present + r.absent).sum();
    println!(
        "\nscenario passed: {} checks, {checked} account comparisons over slots {first_slot}..={last_slot}, {:.1} s",
        sc.reports.len(),
        started.elapsed().as_secs_f64()
    );
    let tx_slots: Vec<String> = sc.reports.iter().filter_map(|r| r.tx_slot).map(|s| s.to_string()).collect();
    println!("tx slots: {}", tx_slots.join(" "));
    Ok(())
}

/// Every root Hyades serves, from its oldest kept slot to its newest.
fn all_roots(hyades: &Client) -> Result<BTreeMap<u64, String>> {
    let newest = u64_at(value(&hyades.call("getStateRoot", json!([]))?)?, "slot")?;
    let mut out = BTreeMap::new();
    let mut start = 0u64;
    while start <= newest {
        let end = (start + 999).min(newest);
        let r = hyades.call("getStateRoots", json!([start, end]))?;
        for v in value(&r)?.as_array().context("getStateRoots: value is not an array")? {
            out.insert(u64_at(v, "slot")?, str_at(v, "root")?.to_string());
        }
        start = end + 1;
    }
    Ok(out)
}

/// `roots`: one `{"slot","root"}` line per served slot.
pub(crate) fn print_roots(hyades_url: &str) -> Result<()> {
    for (slot, root) in all_roots(&Client::new(hyades_url))? {
        println!("{}", json!({"slot": slot, "root": root}));
    }
    Ok(())
}

/// `compare-roots`: the recorded roots against those served now, on the common slots.
pub(crate) fn compare_roots(before: &Path, hyades_url: &str, min_overlap: usize, must_cover: &[u64]) -> Result<()> {
    let text = std::fs::read_to_string(before).with_context(|| format!("cannot read {}", before.display()))?;
    let mut old = BTreeMap::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).with_context(|| format!("{} line {}", before.display(), i + 1))?;
        old.insert(u64_at(&v, "slot")?, str_at(&v, "root")?.to_string());
    }
    let new = all_roots(&Client::new(hyades_url))?;
    let range = |m: &BTreeMap<u64, String>| match (m.keys().next(), m.keys().next_back()) {
        (Some(a), Some(b)) => format!("{a}..={b} ({} slots)", m.len()),
        _ => "none".to_string(),
    };
    println!("before restart: {}", range(&old));
    println!("after restart:  {}", range(&new));
    let mut common = 0usize;
    let mut bad = Vec::new();
    for (slot, root) in &new {
        if let Some(o) = old.get(slot) {
            common += 1;
            if o != root {
                bad.push(format!("slot {slot}: before {o}, after {root}"));
            }
        }
    }
    let overlap: Vec<u64> = new.keys().filter(|s| old.contains_key(s)).copied().collect();
    if let (Some(a), Some(b)) = (overlap.first(), overlap.last()) {
        println!("common slots:   {common} ({a}..={b}), {} identical", common - bad.len());
    }
    if !bad.is_empty() {
        bail!("{} of {common} common slots have different roots:\n{}", bad.len(), bad.join("\n"));
    }
    ensure(common >= min_overlap, || format!("only {common} slots committed by both runs, wanted {min_overlap}"))?;
    for s in must_cover {
        ensure(old.contains_key(s) && new.contains_key(s), || format!("slot {s} was not committed by both runs"))?;
    }
    println!("restart check passed: every slot committed by both runs has the same root");
    Ok(())
}
