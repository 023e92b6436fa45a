//! `aldb proof --trust votes --checkpoint FILE`: accept an account on the votes of its epoch's
//! validator set, having followed the set from one trusted checkpoint through every epoch since
//! (`docs/SPEC.md` §11). Nothing but the checkpoint is trusted: each next set comes from a
//! transition whose bank hash more than 2/3 of the previous set voted for.
//!
//! The client's state lives in a state file (`FILE.state` unless `--state` names one), written
//! after every change to a new file, synced, and renamed over the old one, so a crash leaves the
//! old state or the new, never a mix; the next run catches up from wherever it stopped. A client
//! that meets misbehaviour (two conflicting bank hashes, or two next sets, each voted for by more
//! than 2/3) freezes: its state keeps the evidence, a misbehaviour file is written beside it for a
//! person to hand on, and every later run refuses until the state file is replaced.

use std::io::Read;
use std::path::{Path, PathBuf};

use aldb_verify::epochs::{Checkpoint, EpochError, EpochRoot, LightClient, SlotEvidence, Transition};
use aldb_verify::json::hash_to_base58;
use aldb_verify::votes::{VoteEvidence, verify_account_at};
use anyhow::{Context, Result, bail};
use serde_json::json;

use crate::accounts::cut;
use crate::remote;
use crate::votes::{self, SLOT_VOTES_METHOD};

/// The Hyades method that serves a transition to an epoch (`docs/SPEC.md` §11.4).
pub(crate) const TRANSITION_METHOD: &str = "getEpochTransition";

/// The longest checkpoint or state file read: two sets of 65,536 members in JSON (about 200 bytes
/// each) and three slot evidences of 4,096 votes.
const MAX_STATE_BYTES: u64 = 64 << 20;

/// The error `getEpochTransition` answers when the service holds no transition to the epoch
/// asked for (§11.4): following as far as the service goes stops there, and nowhere else.
const NO_TRANSITION: i64 = -32015;

/// Epochs followed in one run at most: a bound on the work a service can make a run do (about 55
/// years of mainnet epochs).
const MAX_EPOCHS_PER_RUN: u64 = 10_000;

/// Where a client keeps its state.
pub(crate) struct StateFile {
    checkpoint: PathBuf,
    state: PathBuf,
}

impl StateFile {
    /// The state of the client started from `checkpoint`: `state`, or `<checkpoint>.state`.
    pub(crate) fn new(checkpoint: PathBuf, state: Option<PathBuf>) -> Self {
        let state = state.unwrap_or_else(|| {
            let mut name = checkpoint.clone().into_os_string();
            name.push(".state");
            PathBuf::from(name)
        });
        StateFile { checkpoint, state }
    }

    fn misbehaviour_path(&self) -> PathBuf {
        let mut name = self.state.clone().into_os_string();
        name.push(".misbehaviour.json");
        PathBuf::from(name)
    }

    /// The client: from the state file when there is one, else new from the checkpoint (and the
    /// state file written at once, so a first run's start is kept too).
    fn load(&self) -> Result<LightClient> {
        if self.state.exists() {
            let text = read_bounded(&self.state, "client state file")?;
            return LightClient::from_state_json_str(&text)
                .map_err(|e| anyhow::anyhow!("{}: not a client state: {e}", self.state.display()));
        }
        let text = read_bounded(&self.checkpoint, "checkpoint file")?;
        let checkpoint = Checkpoint::from_json_str(&text)
            .map_err(|e| anyhow::anyhow!("{}: not a checkpoint: {e}", self.checkpoint.display()))?;
        let client = LightClient::new(checkpoint)
            .map_err(|e| anyhow::anyhow!("{}: refused ({}): {e}", self.checkpoint.display(), e.name()))?;
        self.save(&client)?;
        Ok(client)
    }

    /// Writes the client's state crash-safely: a new file, synced, renamed over the old one, and
    /// the directory synced so the rename itself survives a crash.
    fn save(&self, client: &LightClient) -> Result<()> {
        let text =
            serde_json::to_string_pretty(&client.state().to_json_value()).context("encoding the client state")?;
        write_atomically(&self.state, text.as_bytes())
    }

    /// The client froze: its state is saved (with the evidence), and the misbehaviour file
    /// written beside it; the error names both.
    fn frozen(&self, client: &LightClient, during: &str, err: &EpochError) -> anyhow::Error {
        let saved = self.save(client);
        let written = client.misbehaviour().map(|m| {
            let text = serde_json::to_string_pretty(&m.to_json_value()).unwrap_or_default();
            write_atomically(&self.misbehaviour_path(), text.as_bytes())
        });
        match (saved, written) {
            (Ok(()), Some(Ok(()))) => anyhow::anyhow!(
                "{during}: {err}; the evidence is in {} (both evidences and the set that signed them: hand it to \
                 others, who check it against the set they trust); the client refuses everything until {} is replaced",
                self.misbehaviour_path().display(),
                self.state.display()
            ),
            (Err(e), _) | (_, Some(Err(e))) => anyhow::anyhow!("{during}: {err}; and saving it failed: {e:#}"),
            (Ok(()), None) => anyhow::anyhow!("{during}: {err}"),
        }
    }
}

fn read_bounded(path: &Path, what: &str) -> Result<String> {
    let mut text = String::new();
    let read = std::fs::File::open(path)
        .and_then(|f| f.take(MAX_STATE_BYTES + 1).read_to_string(&mut text))
        .with_context(|| format!("cannot read the {what} {}", path.display()))?;
    if read as u64 > MAX_STATE_BYTES {
        bail!("{} is longer than {MAX_STATE_BYTES} bytes, so not a {what}", path.display());
    }
    Ok(text)
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    aldb_format::durable::replace_file(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}

fn now() -> Result<i64> {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .context("this machine's clock is before 1970")?
        .as_secs();
    i64::try_from(secs).context("this machine's clock is past the year 292 billion")
}

/// What a run did and what it accepted.
pub(crate) struct Followed {
    /// `(epoch, set hash, stake that voted, total stake)` of each transition followed this run.
    pub(crate) advanced: Vec<(u64, [u8; 32], u128, u128)>,
    /// The newest trusted epoch after the run.
    pub(crate) epoch: u64,
    /// The root accepted, on its epoch's set.
    pub(crate) root: EpochRoot,
    /// The account's evidence (its account and proof checked against the root).
    pub(crate) evidence: VoteEvidence,
    /// Where the state is kept.
    pub(crate) state: PathBuf,
}

/// Catches the client up and accepts `pubkey`'s account at `slot` (the newest slot with votes
/// when `None`) from the Hyades service at `url`.
pub(crate) fn follow_and_prove(url: &str, file: &StateFile, pubkey: &[u8; 32], slot: Option<u64>) -> Result<Followed> {
    let agent = remote::agent();
    let mut client = file.load()?;
    if client.misbehaviour().is_some() {
        bail!(
            "the client in {} is frozen by misbehaviour (its evidence is in the state file{}); replace the state to go on",
            file.state.display(),
            if file.misbehaviour_path().exists() {
                format!(" and {}", file.misbehaviour_path().display())
            } else {
                String::new()
            }
        );
    }
    let schedule = client.state().schedule;
    // The epoch to reach: the slot's, or as far as the service has transitions.
    let target = slot.map(|s| schedule.epoch(s));
    let mut advanced = Vec::new();
    for _ in 0..MAX_EPOCHS_PER_RUN {
        let next = client.epoch().saturating_add(1);
        if target.is_some_and(|t| client.epoch() >= t) {
            break;
        }
        let answer = remote::call(&agent, url, TRANSITION_METHOD, json!([next]));
        let value = match (answer, target) {
            (Ok(v), _) => v,
            // Following as far as the service goes: it has no transition to `next` yet. Any
            // other failure is reported, not taken for the end of the chain.
            (Err(e), None) if e.to_string().contains(&format!("failed: error {NO_TRANSITION}:")) => break,
            (Err(e), None) => return Err(e.context(format!("cannot follow the validator set to epoch {next}"))),
            (Err(e), Some(t)) => {
                return Err(
                    e.context(format!("cannot follow the validator set to epoch {t}: no transition to epoch {next}"))
                );
            }
        };
        let t = value.get("value").unwrap_or(&value);
        let transition = Transition::from_json_value(t).map_err(|e| {
            anyhow::anyhow!("{TRANSITION_METHOD} for epoch {next}: not a transition: {}", cut(&e.to_string(), 300))
        })?;
        if transition.set.epoch() != next {
            bail!(
                "asked for the transition to epoch {next}, the service answered one to epoch {}",
                transition.set.epoch()
            );
        }
        match client.advance(&transition, now()?) {
            Ok(aldb_verify::epochs::Advanced::Advanced { epoch, set_hash, vouched, .. }) => {
                advanced.push((epoch, set_hash, vouched.stake, vouched.total_stake));
                file.save(&client)?;
            }
            Ok(aldb_verify::epochs::Advanced::AlreadyVerified { .. }) => break,
            Err(e @ EpochError::Misbehaviour(_)) => {
                return Err(file.frozen(&client, &format!("transition to epoch {next}"), &e));
            }
            Err(e) => {
                bail!("transition to epoch {next} (slot {}): refused ({}): {e}", transition.evidence.slot, e.name())
            }
        }
    }

    // The service counts the votes of the vote accounts it is given, so it is given those of the
    // slot's epoch's set: for the newest slot, which may still be in the epoch before the newest
    // trusted one, the newest set is a guess, asked again with the right set when it was wrong.
    let set_of = |epoch: u64| client.state().held.iter().find(|h| h.set.epoch() == epoch).map(|h| h.set.clone());
    let guess = slot.and_then(|s| set_of(schedule.epoch(s))).unwrap_or_else(|| client.newest().set.clone());
    let mut doc =
        votes::fetch_evidence_doc(&agent, url, pubkey, slot, votes::vote_accounts_param(guess.validator_set()))?;
    if slot.is_none()
        && let Some(voted) = doc.get("slot").and_then(serde_json::Value::as_u64)
        && let Some(set) = set_of(schedule.epoch(voted)).filter(|s| s.epoch() != guess.epoch())
    {
        doc = votes::fetch_evidence_doc(
            &agent,
            url,
            pubkey,
            Some(voted),
            votes::vote_accounts_param(set.validator_set()),
        )?;
    }
    let account = VoteEvidence::from_json_value(&doc).map_err(|e| {
        anyhow::anyhow!("{SLOT_VOTES_METHOD} and getAccountProof do not make evidence: {}", cut(&e.to_string(), 300))
    })?;
    let evidence = SlotEvidence::from_json_value(&doc)
        .map_err(|e| anyhow::anyhow!("{SLOT_VOTES_METHOD}: not slot evidence: {}", cut(&e.to_string(), 300)))?;
    let root = match client.accept_root(&evidence, now()?) {
        Ok(root) => root,
        Err(e @ EpochError::Misbehaviour(_)) => {
            return Err(file.frozen(&client, &format!("slot {}", evidence.slot), &e));
        }
        Err(e) => bail!("slot {}: refused ({}): {e}", evidence.slot, e.name()),
    };
    file.save(&client)?;
    verify_account_at(&account, &root.root).map_err(|e| anyhow::anyhow!("slot {}: {e}", root.slot))?;
    Ok(Followed { advanced, epoch: client.epoch(), root, evidence: account, state: file.state.clone() })
}

/// The lines `aldb proof --trust votes --checkpoint` prints: the account, then the chain it rests
/// on.
pub(crate) fn report(f: &Followed) -> String {
    let mut out = votes::account_lines(&f.evidence.pubkey, f.evidence.account.as_ref());
    for (epoch, set_hash, stake, total) in &f.advanced {
        out.push_str(&format!(
            "followed to epoch {epoch}: set {} (the previous set's votes: stake {stake} of {total})\n",
            hash_to_base58(set_hash)
        ));
    }
    let r = &f.root;
    out.push_str(&format!(
        "root trusted: votes of {} vote accounts with stake {} of {} (more than 2/3) of epoch {}'s set for bank hash {} \
         = sha256(h || root || next_set_hash)\n",
        r.vouched.voters,
        r.vouched.stake,
        r.vouched.total_stake,
        r.epoch,
        hash_to_base58(&r.bank_hash)
    ));
    if let Some(t) = r.vouched.time {
        out.push_str(&format!(
            "voted at unix time {t} or later (the timestamps of vote accounts holding more than 1/3 of the stake)\n"
        ));
    }
    out.push_str(&format!(
        "client: trusts epoch {}, state in {}\nverified against root {} at slot {}",
        f.epoch,
        f.state.display(),
        hash_to_base58(&r.root),
        r.slot
    ));
    out
}

/// Refuses a root whose votes were cast more than `max_age` seconds before this machine's clock,
/// by the vouched time (§11.4): without one, nothing shows the votes are recent.
pub(crate) fn check_age(f: &Followed, max_age: u64) -> Result<()> {
    let slot = f.root.slot;
    let Some(t) = f.root.vouched.time else {
        bail!(
            "slot {slot}: the votes carry no timestamps of more than 1/3 of the stake, so their age is unknown (--max-age)"
        );
    };
    let age = now()?.saturating_sub(t);
    if u64::try_from(age).is_ok_and(|a| a > max_age) {
        bail!("slot {slot}: the votes were cast {age} s ago, more than --max-age {max_age}");
    }
    Ok(())
}
