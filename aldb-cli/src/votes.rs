//! `aldb proof --trust votes`: accept an account because validators holding more than 2/3 of a
//! configured set's stake voted for a bank hash that commits to the root it is proven against
//! (`docs/SPEC.md` §10). Neither an aldb signer nor the server is trusted; only the validator set.
//!
//! The evidence comes from a file, or from a Hyades service: `getSlotVotes` for the slot's `h`,
//! root and votes, joined with `getAccountProof` at the same slot (§10.5). The service's answers
//! are checked exactly as a file would be, so a lying service can only make `aldb` refuse.

use std::io::Read;
use std::path::Path;

use aldb_verify::json::hash_to_base58;
use aldb_verify::votes::{
    EvidenceAccount, MAX_EVIDENCE_VOTES, Validator, ValidatorSet, VerifiedAccount, VoteChainError, VoteEvidence,
    VoteVerifier, validator_set_from_json_value, verify_account_by_votes,
};
use anyhow::{Context, Result, bail};
use base64::Engine as _;
use serde_json::{Map, Value, json};

use crate::accounts::{cut, decode_key};
use crate::remote;

/// The longest validator set file read: 100 000 validators of two keys and a stake per line.
const MAX_SET_FILE_BYTES: u64 = 16 << 20;

/// The longest evidence file read: 4096 votes of at most 1232 bytes in base64 and an account of
/// the largest size (10 MiB, 13.4 MiB in base64) with its proof.
const MAX_EVIDENCE_BYTES: u64 = 24 << 20;

/// The Hyades method that serves a slot's votes (`docs/SPEC.md` §10.5).
pub(crate) const SLOT_VOTES_METHOD: &str = "getSlotVotes";

/// The fields of §10.5 (and §11.4's `nextSetHash`) that `getSlotVotes` answers; the rest come
/// from `getAccountProof`.
const SLOT_VOTES_FIELDS: [&str; 7] = ["version", "slot", "h", "root", "hardForks", "nextSetHash", "votes"];

fn read_bounded(path: &Path, max: u64, what: &str) -> Result<String> {
    let mut text = String::new();
    let read = std::fs::File::open(path)
        .and_then(|f| f.take(max + 1).read_to_string(&mut text))
        .with_context(|| format!("cannot read the {what} {}", path.display()))?;
    if read as u64 > max {
        bail!("{} is longer than {max} bytes, so not a {what}", path.display());
    }
    Ok(text)
}

/// Reads a validator set file: a JSON array of `{"voteAccount", "authorizedVoter", "stake"}`, or
/// one validator per line as `VOTE_ACCOUNT AUTHORIZED_VOTER STAKE` (blank lines and `#` comments
/// ignored).
pub(crate) fn read_validator_set(path: &Path) -> Result<ValidatorSet> {
    let text = read_bounded(path, MAX_SET_FILE_BYTES, "validator set file")?;
    parse_validator_set(&text).with_context(|| format!("validator set file {}", path.display()))
}

fn parse_validator_set(text: &str) -> Result<ValidatorSet> {
    // Editors on some systems begin a UTF-8 file with a byte-order mark; it is no field.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim_start().starts_with('[') {
        let v: Value = serde_json::from_str(text)
            .map_err(|e| anyhow::anyhow!("not a JSON array of validators: {}", cut(&e.to_string(), 200)))?;
        return validator_set_from_json_value(&v).map_err(|e| anyhow::anyhow!("{e}"));
    }
    let mut members = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let n = i + 1;
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [vote, voter, stake] = fields.as_slice() else {
            bail!("line {n}: expected VOTE_ACCOUNT AUTHORIZED_VOTER STAKE, got {} fields", fields.len());
        };
        members.push(Validator {
            vote_account: decode_key(&format!("line {n} vote account"), vote)?,
            authorized_voter: decode_key(&format!("line {n} authorized voter"), voter)?,
            stake: stake.parse().with_context(|| format!("line {n}: stake {:?} is not a u64", cut(stake, 24)))?,
        });
    }
    if members.is_empty() {
        bail!("lists no validators");
    }
    ValidatorSet::new(&members).map_err(|e| anyhow::anyhow!("{e}"))
}

/// Reads vote evidence (§10.5) from a file and verifies it for `pubkey` (and `slot`, if given)
/// against `set`.
pub(crate) fn verify_file(
    evidence: &Path,
    pubkey: &[u8; 32],
    slot: Option<u64>,
    set: &ValidatorSet,
) -> Result<(VerifiedAccount, bool)> {
    let text = read_bounded(evidence, MAX_EVIDENCE_BYTES, "vote evidence file")?;
    let ev = VoteEvidence::from_json_str(&text)
        .map_err(|e| anyhow::anyhow!("{}: not vote evidence: {}", evidence.display(), cut(&e.to_string(), 300)))?;
    if ev.pubkey != *pubkey {
        bail!("the evidence is about {}, not {}", hash_to_base58(&ev.pubkey), hash_to_base58(pubkey));
    }
    if let Some(s) = slot
        && s != ev.slot
    {
        bail!("asked for slot {s}, the evidence is for slot {}", ev.slot);
    }
    verify(&ev, set)
}

/// The `voteAccounts` of a `getSlotVotes` request for `set`: each vote account with its
/// authorized voter, so the service answers with their votes whatever else landed in the blocks
/// (`docs/SPEC.md` §10.5). A set larger than a request may name sends its largest stakes.
pub(crate) fn vote_accounts_param(set: &ValidatorSet) -> Value {
    let mut members: Vec<&Validator> = set.members().iter().collect();
    if members.len() > MAX_EVIDENCE_VOTES {
        members.sort_by(|a, b| b.stake.cmp(&a.stake).then(a.vote_account.cmp(&b.vote_account)));
        members.truncate(MAX_EVIDENCE_VOTES);
    }
    Value::Array(
        members.iter().map(|m| json!([hash_to_base58(&m.vote_account), hash_to_base58(&m.authorized_voter)])).collect(),
    )
}

/// Fetches the evidence for `pubkey` from the Hyades service at `url` — the votes of `set`'s vote
/// accounts on `slot` (the newest slot with votes when `None`) and the account's proof at that
/// slot — and verifies it against `set`.
pub(crate) fn fetch_and_verify(
    url: &str,
    pubkey: &[u8; 32],
    slot: Option<u64>,
    set: &ValidatorSet,
) -> Result<(VerifiedAccount, bool)> {
    let doc = fetch_evidence_doc(&remote::agent(), url, pubkey, slot, vote_accounts_param(set))?;
    let ev = VoteEvidence::from_json_value(&doc).map_err(|e| {
        anyhow::anyhow!(
            "{SLOT_VOTES_METHOD} and getAccountProof do not make vote evidence: {}",
            cut(&e.to_string(), 300)
        )
    })?;
    verify(&ev, set)
}

/// The evidence document for `pubkey` (§10.5, with §11.4's `nextSetHash` when the service gives
/// one): `getSlotVotes` for `slot` (the newest slot with votes when `None`), asking only for the
/// votes of `vote_accounts` ([`vote_accounts_param`]), joined with `getAccountProof` at the slot
/// the votes are for. Nothing in it is trusted yet.
pub(crate) fn fetch_evidence_doc(
    agent: &ureq::Agent,
    url: &str,
    pubkey: &[u8; 32],
    slot: Option<u64>,
    vote_accounts: Value,
) -> Result<Value> {
    let config = json!({"voteAccounts": vote_accounts});
    let params = match slot {
        Some(s) => json!([s, config]),
        None => json!([config]),
    };
    let result = remote::call(agent, url, SLOT_VOTES_METHOD, params)?;
    let votes = result.get("value").with_context(|| format!("{SLOT_VOTES_METHOD}: no `value`"))?;
    let voted_slot = votes
        .get("slot")
        .and_then(Value::as_u64)
        .with_context(|| format!("{SLOT_VOTES_METHOD}: `slot` is missing or not an unsigned integer"))?;
    if let Some(s) = slot
        && s != voted_slot
    {
        bail!("asked for the votes of slot {s}, the service answered for slot {voted_slot}");
    }
    let key = hash_to_base58(pubkey);
    let result = remote::call(agent, url, "getAccountProof", json!([key, {"slot": voted_slot}]))?;
    let proof = result.get("value").context("getAccountProof: no `value`")?;
    let proof_slot = proof.get("slot").and_then(Value::as_u64);
    if proof_slot != Some(voted_slot) {
        bail!(
            "asked for the proof at slot {voted_slot}, the service answered for slot {}",
            cut(&proof.get("slot").map(Value::to_string).unwrap_or_default(), 24)
        );
    }
    // The proof's own `root` is left out: the proof is checked against the root the votes carry.
    let mut doc = Map::new();
    for name in SLOT_VOTES_FIELDS {
        if let Some(v) = votes.get(name) {
            doc.insert(name.to_string(), v.clone());
        }
    }
    doc.insert("pubkey".to_string(), Value::from(key));
    for name in ["account", "proof"] {
        if let Some(v) = proof.get(name) {
            doc.insert(name.to_string(), v.clone());
        }
    }
    Ok(Value::Object(doc))
}

/// Refuses an accepted root whose votes were cast more than `max_age` seconds ago by this
/// machine's clock (`docs/SPEC.md` §10.4, "Freshness").
pub(crate) fn check_age(v: &VerifiedAccount, max_age: u64) -> Result<()> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .context("this machine's clock is before 1970")?
        .as_secs();
    let now = i64::try_from(now).context("this machine's clock is past the year 292 billion")?;
    v.accepted.check_age(now, max_age).map_err(|e| anyhow::anyhow!("slot {}: {e} (--max-age)", v.accepted.slot))
}

/// Verifies evidence against `set`; a refusal for too little stake says what became of each vote.
fn verify(ev: &VoteEvidence, set: &ValidatorSet) -> Result<(VerifiedAccount, bool)> {
    let next_set = ev.next_set_hash.is_some();
    verify_account_by_votes(ev, set).map(|v| (v, next_set)).map_err(|e| match e {
        VoteChainError::InsufficientStake { .. } => {
            anyhow::anyhow!("slot {}: {e} ({})", ev.slot, outcomes(ev, set))
        }
        e => anyhow::anyhow!("slot {}: {e}", ev.slot),
    })
}

/// What became of the offered votes, by outcome: `3 votes offered: 1 counted, 2 wrong_hash`.
fn outcomes(ev: &VoteEvidence, set: &ValidatorSet) -> String {
    let expected = ev.bank_hash();
    let tally = VoteVerifier::new(set).tally(ev.slot, &expected, &ev.votes);
    let mut counts: Vec<(&'static str, usize)> = Vec::new();
    for o in &tally.outcomes {
        let name = match o {
            Ok(_) => "counted",
            Err(e) => e.name(),
        };
        match counts.iter_mut().find(|(n, _)| *n == name) {
            Some((_, c)) => *c += 1,
            None => counts.push((name, 1)),
        }
    }
    let list: Vec<String> = counts.iter().map(|(n, c)| format!("{c} {n}")).collect();
    match list.is_empty() {
        true => "no votes offered".to_string(),
        false => format!("{} votes offered: {}", tally.outcomes.len(), list.join(", ")),
    }
}

/// The lines `aldb proof --trust votes` prints for a verified account (`next_set`: its bank hash
/// binds the next epoch's set, §11.1).
pub(crate) fn report(v: &VerifiedAccount, next_set: bool) -> String {
    let mut out = account_lines(&v.pubkey, v.account.as_ref());
    let r = &v.accepted;
    out.push_str(&format!(
        "root trusted: votes of {} vote accounts with stake {} of {} (more than 2/3) for bank hash {} = sha256(h || root{})\n",
        r.voters,
        r.stake,
        r.total_stake,
        hash_to_base58(&r.bank_hash),
        if next_set { " || next_set_hash" } else { "" }
    ));
    if let Some(t) = r.vouched_time {
        out.push_str(&format!(
            "voted at unix time {t} or later (the timestamps of vote accounts holding more than 1/3 of the stake)\n"
        ));
    }
    out.push_str(&format!("verified against root {} at slot {}", hash_to_base58(&r.root), r.slot));
    out
}

/// The lines that show an account (or its absence), as every `--trust votes` report begins.
pub(crate) fn account_lines(pubkey: &[u8; 32], account: Option<&EvidenceAccount>) -> String {
    let key = hash_to_base58(pubkey);
    let mut out = String::new();
    match account {
        Some(a) => {
            out.push_str(&format!("account {key}\n"));
            out.push_str(&format!("  lamports: {}\n", a.lamports));
            out.push_str(&format!("  owner: {}\n", hash_to_base58(&a.owner)));
            out.push_str(&format!("  executable: {}\n", a.executable));
            out.push_str(&format!(
                "  data: {} bytes: {}\n",
                a.data.len(),
                base64::engine::general_purpose::STANDARD.encode(&a.data)
            ));
        }
        None => out.push_str(&format!("account {key}: absent\n")),
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn validator_sets_as_json_or_lines() {
        let (a, b, c) = (hash_to_base58(&[1; 32]), hash_to_base58(&[2; 32]), hash_to_base58(&[3; 32]));
        let json = format!(r#"[{{"voteAccount":"{a}","authorizedVoter":"{b}","stake":5}}]"#);
        let set = parse_validator_set(&json).unwrap();
        assert_eq!(set.total_stake(), 5);
        let lines = format!("# set\n{a} {b} 5\n\n  {c}\t{b} 7  # second\n");
        let set = parse_validator_set(&lines).unwrap();
        assert_eq!(set.total_stake(), 12);
        assert_eq!(set.members().len(), 2);
        assert!(parse_validator_set("").unwrap_err().to_string().contains("no validators"));
        assert!(parse_validator_set(&format!("{a} {b}")).unwrap_err().to_string().contains("got 2 fields"));
        assert!(parse_validator_set(&format!("{a} {b} -1")).unwrap_err().to_string().contains("not a u64"));
        let e = parse_validator_set(&format!("{a} {b} 1\n{a} {c} 2")).unwrap_err().to_string();
        assert!(e.contains(&format!("vote account {a} is listed twice")), "{e}");
        // A byte-order mark before either form is not part of the first field.
        let set = parse_validator_set(&format!("\u{feff}{a} {b} 5\r\n{c} {b} 7\r\n")).unwrap();
        assert_eq!(set.total_stake(), 12);
        assert_eq!(parse_validator_set(&format!("\u{feff}{json}")).unwrap().total_stake(), 5);
        assert!(parse_validator_set(&format!("{a} {b} 0")).unwrap_err().to_string().contains("no stake"));
    }
}
