//! The vote evidence of `docs/SPEC.md` §10.5, as `getSlotVotes` serves it: a slot's `h`, state
//! root and hard-fork count, and the vote transactions of the blocks of the slots after it that
//! vote on it (one per vote account, of every account or of the accounts a client names),
//! from the vote-evidence log a plugin built against the patched geyser interface keeps beside
//! the snapshots ([`aldb_format::votes`]).
//!
//! The feed follows the log as the record feed follows the record log: a poller reads what was
//! appended, and queries read the few entries they need back from the log's segments. A bucket
//! replica follows the copy of the shipped log in its cache directory
//! ([`aldb_objstore::LogMirror`]), which has the directory's layout, so it answers alike. Nothing
//! here judges a vote (its hash, signer or stake): the client does, against its own validator
//! set, and computes the bank hash itself from `h` and the root.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

/// Which votes of a slot are served (`getSlotVotes`'s `voteAccounts`).
pub use aldb_format::votes::VoteSelection;
use aldb_format::votes::{DEFAULT_WINDOW, SlotVotes, VoteLogError, VoteLogReader};
use aldb_objstore::{ArchivedVotes, SourceError};
use base64::Engine as _;
use serde_json::json;
use tokio::sync::watch;

use crate::encode;
use crate::levels::Level;
use crate::protocol::{RpcError, codes};
use crate::replica::{LogKind, Replica};

/// The vote-evidence log of the served directory, as far as the poller has read it.
#[derive(Debug)]
pub struct VoteFeed {
    /// `None` when there is no log to follow.
    reader: Option<RwLock<VoteLogReader>>,
    /// Slots after a slot whose blocks are searched for votes on it.
    window: u64,
    /// The log followed is a replica's copy of the bucket's: an empty one says the bucket holds
    /// none.
    replica: bool,
    /// A replica's bucket, asked for slots older than its copy of the log, and for the segments
    /// of the copy replaced by verified ones, which the reader reads again.
    archive: Option<Arc<Replica>>,
}

impl Default for VoteFeed {
    /// A feed with no log: every query answers that no vote evidence is recorded.
    fn default() -> Self {
        Self { reader: None, window: DEFAULT_WINDOW, replica: false, archive: None }
    }
}

/// Why a slot's votes cannot be served.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum VoteQueryError {
    /// The log holds no bank at all (no log: the plugin does not record vote evidence).
    NothingRecorded,
    /// A bucket replica whose bucket holds no vote log (the directory keeps none, or it was not
    /// shipped yet).
    NotShipped,
    /// Older than the oldest bank the log keeps.
    Pruned {
        /// The slot asked for.
        slot: u64,
        /// The oldest logged bank.
        oldest: u64,
        /// The newest logged bank.
        newest: u64,
    },
    /// Newer than the newest bank logged.
    NotYetRecorded {
        /// The slot asked for.
        slot: u64,
        /// The oldest logged bank.
        oldest: u64,
        /// The newest logged bank.
        newest: u64,
    },
    /// Inside the logged range but no bank of the slot was logged (skipped).
    NoBank {
        /// The slot asked for.
        slot: u64,
        /// The oldest logged bank.
        oldest: u64,
        /// The newest logged bank.
        newest: u64,
    },
    /// The slot's bank hash does not commit to a state root (the feature was not active).
    NoRoot {
        /// The slot asked for.
        slot: u64,
    },
    /// No vote on the slot (of the vote accounts asked for, when `selected`) has landed in the
    /// blocks logged after it yet.
    NotVotedYet {
        /// The slot asked for.
        slot: u64,
        /// The newest block searched.
        searched_to: u64,
        /// Only the votes of some vote accounts were asked for.
        selected: bool,
    },
    /// No vote on the slot (of the vote accounts asked for, when `selected`) landed in the blocks
    /// of the whole window of slots after it: none will be served.
    NeverVoted {
        /// The slot asked for.
        slot: u64,
        /// The slots after it whose blocks were searched.
        window: u64,
        /// Only the votes of some vote accounts were asked for.
        selected: bool,
    },
    /// A segment of the bucket's log the slot needs did not verify: refused, never served.
    Damaged {
        /// The slot asked for.
        slot: u64,
        /// What did not check (names the object, not a local file).
        reason: String,
    },
    /// A segment of the bucket's log the slot needs is missing from the bucket.
    Missing {
        /// The slot asked for.
        slot: u64,
        /// The missing object, and what the bucket answered.
        file: String,
    },
    /// No transition to the epoch: the log holds no set of it, or no slot of the epoch before
    /// that binds it and whose votes qualify (`docs/SPEC.md` §11.4).
    NoTransition {
        /// The epoch asked for.
        epoch: u64,
        /// The epochs whose sets the log holds, oldest first.
        held: Vec<u64>,
    },
    /// The segment in the bucket holding the transition to `epoch` did not verify, or is
    /// missing: refused, never served.
    ArchivedTransition {
        /// The epoch asked for.
        epoch: u64,
        /// The object is missing (else damaged).
        missing: bool,
        /// What did not check, or what the bucket answered (names the object).
        reason: String,
    },
    /// The log could not be read; the reason names files, so it goes to the server log only.
    Storage(String),
}

impl VoteQueryError {
    /// The JSON-RPC error for it.
    pub fn to_rpc(&self) -> RpcError {
        let range = |slot: u64, oldest: u64, newest: u64| json!({"slot": slot, "oldestVotedSlot": oldest, "newestVotedSlot": newest});
        match self {
            VoteQueryError::NothingRecorded => RpcError::new(
                codes::NOTHING_PUBLISHED,
                "no vote evidence recorded: the directory has no vote-evidence log (the plugin writes one with \
                 vote_evidence on a validator carrying the aldb patches)",
            ),
            VoteQueryError::NotShipped => RpcError::new(
                codes::NOTHING_PUBLISHED,
                "no vote evidence recorded: the bucket holds no vote-evidence log (the shipped directory has \
                 none, or aldb-ship has not shipped it yet)",
            ),
            VoteQueryError::Pruned { slot, oldest, newest } => RpcError::with_data(
                codes::SLOT_PRUNED,
                "slot's vote evidence pruned: it is older than the oldest kept",
                range(*slot, *oldest, *newest),
            ),
            VoteQueryError::NotYetRecorded { slot, oldest, newest } => RpcError::with_data(
                codes::SLOT_NOT_COMMITTED,
                "slot's bank not recorded yet: it is newer than the newest in the vote-evidence log",
                range(*slot, *oldest, *newest),
            ),
            VoteQueryError::NoBank { slot, oldest, newest } => RpcError::with_data(
                codes::SLOT_NO_SNAPSHOT,
                "slot has no vote evidence: no bank of it was recorded (skipped)",
                range(*slot, *oldest, *newest),
            ),
            VoteQueryError::NoRoot { slot } => RpcError::with_data(
                codes::SLOT_NO_SNAPSHOT,
                "slot has no vote evidence: its bank hash does not commit to a state root (the aldb feature was \
                 not active)",
                json!({"slot": slot}),
            ),
            VoteQueryError::NotVotedYet { slot, searched_to, selected } => RpcError::with_data(
                codes::SLOT_NOT_COMMITTED,
                format!(
                    "slot not voted on yet: no vote for it{} has landed in the blocks after it so far",
                    of_accounts(*selected)
                ),
                json!({"slot": slot, "searchedTo": searched_to}),
            ),
            VoteQueryError::NeverVoted { slot, window, selected } => RpcError::with_data(
                codes::SLOT_NO_SNAPSHOT,
                format!(
                    "slot has no vote evidence: no vote for it{} landed in the blocks of the {window} slots after it",
                    of_accounts(*selected)
                ),
                json!({"slot": slot, "window": window}),
            ),
            VoteQueryError::Damaged { slot, reason } => {
                log::error!("vote evidence of slot {slot} not served: {reason}");
                RpcError::with_data(
                    codes::SLOT_CORRUPT,
                    "slot's vote evidence cannot be served: a vote-evidence segment it needs is damaged",
                    json!({"slot": slot, "reason": reason}),
                )
            }
            VoteQueryError::Missing { slot, file } => {
                log::error!("vote evidence of slot {slot} not served: {file} is missing");
                RpcError::with_data(
                    codes::SLOT_FILE_MISSING,
                    "slot's vote evidence cannot be served: a vote-evidence segment it needs is missing",
                    json!({"slot": slot, "file": file}),
                )
            }
            VoteQueryError::NoTransition { epoch, held } => RpcError::with_data(
                codes::NO_TRANSITION,
                format!(
                    "no transition to epoch {epoch}: the vote-evidence log holds no set of it, or no slot of epoch {} \
                     binding it whose votes qualify",
                    epoch.saturating_sub(1)
                ),
                json!({"epoch": epoch, "oldestEpoch": held.first(), "newestEpoch": held.last()}),
            ),
            VoteQueryError::ArchivedTransition { epoch, missing, reason } => {
                log::error!("the transition to epoch {epoch} not served: {reason}");
                let (code, what) = match missing {
                    true => (codes::SLOT_FILE_MISSING, "missing"),
                    false => (codes::SLOT_CORRUPT, "damaged"),
                };
                RpcError::with_data(
                    code,
                    format!("the transition to epoch {epoch} cannot be served: the segment holding it is {what}"),
                    json!({"epoch": epoch, "reason": reason}),
                )
            }
            VoteQueryError::Storage(reason) => {
                log::error!("vote evidence not served: {reason}");
                RpcError::new(
                    codes::INTERNAL_ERROR,
                    "Internal error: vote-evidence log storage error (see the server log)",
                )
            }
        }
    }
}

/// How the errors name a selection of vote accounts.
fn of_accounts(selected: bool) -> &'static str {
    if selected { " by the vote accounts asked for" } else { "" }
}

/// A slot's evidence with a root, ready to serve.
#[derive(Clone, Debug)]
pub struct ServedVotes {
    /// The slot.
    pub slot: u64,
    /// `h` of §10.1.
    pub h: [u8; 32],
    /// The state root the bank hash commits to.
    pub root: [u8; 32],
    /// The hard-fork count, when the bank hash mixes hard-fork data.
    pub hard_forks: Option<u64>,
    /// The next epoch's set hash the bank hash binds (`docs/SPEC.md` §11.1), when it binds one.
    pub next_set_hash: Option<[u8; 32]>,
    /// The vote transactions on the slot, as on the wire.
    pub votes: Vec<Vec<u8>>,
}

impl VoteFeed {
    /// A feed following the log under `snapshot_dir` (missing until the plugin writes one).
    pub fn open(snapshot_dir: &Path) -> Self {
        Self {
            reader: Some(RwLock::new(VoteLogReader::new(snapshot_dir))),
            window: DEFAULT_WINDOW,
            replica: false,
            archive: None,
        }
    }

    /// A feed following a replica's copy of the bucket's log in its cache directory `cache_dir`.
    pub fn replica(cache_dir: &Path) -> Self {
        Self { replica: true, ..Self::open(cache_dir) }
    }

    /// A replica's feed that answers slots older than its copy of the log from the bucket's
    /// sealed segments.
    pub fn with_archive(mut self, replica: Arc<Replica>) -> Self {
        self.archive = Some(replica);
        self
    }

    /// A feed searching the blocks of the `window` slots after a slot for its votes.
    pub fn with_window(mut self, window: u64) -> Self {
        self.window = window;
        self
    }

    /// Whether a log is followed at all.
    pub fn follows(&self) -> bool {
        self.reader.is_some()
    }

    /// Reads what was appended since the last call, and a replica's segments replaced by verified
    /// ones again from their start (the span they held damaged is served then); returns how many
    /// entries.
    pub fn refresh(&self) -> Result<usize, VoteLogError> {
        let Some(r) = &self.reader else { return Ok(0) };
        let mut r = r.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(replica) = &self.archive {
            // A segment forgotten stays so until a refresh reads it again.
            for first in replica.take_repaired(LogKind::Votes) {
                r.reread(first);
            }
        }
        r.refresh()
    }

    /// The oldest and newest logged banks.
    pub fn range(&self) -> Option<(u64, u64)> {
        let r = self.reader.as_ref()?.read().unwrap_or_else(PoisonError::into_inner);
        Some((r.oldest_slot()?, r.newest_slot()?))
    }

    /// Slots with a logged bank from `newest` down, at most `max` of them.
    pub fn banks_down_from(&self, newest: u64, max: usize) -> Vec<u64> {
        let Some(r) = &self.reader else { return Vec::new() };
        let r = r.read().unwrap_or_else(PoisonError::into_inner);
        let Some(oldest) = r.oldest_slot() else { return Vec::new() };
        let mut out = Vec::new();
        let mut s = newest;
        // Slots are dense near the head; the scan is bounded whatever the gaps.
        for _ in 0..max.saturating_mul(4) {
            if s < oldest || out.len() >= max {
                break;
            }
            if r.bank(s).is_some() {
                out.push(s);
            }
            let Some(prev) = s.checked_sub(1) else { break };
            s = prev;
        }
        out
    }

    /// Why nothing at all can be served: no log, or an empty one.
    pub fn nothing_recorded(&self) -> VoteQueryError {
        if self.replica { VoteQueryError::NotShipped } else { VoteQueryError::NothingRecorded }
    }

    /// The evidence of `slot` with the votes `selection` chooses, or why there is none to serve.
    pub fn slot_votes(&self, slot: u64, selection: &VoteSelection) -> Result<ServedVotes, VoteQueryError> {
        let Some(r) = &self.reader else { return Err(self.nothing_recorded()) };
        let r = r.read().unwrap_or_else(PoisonError::into_inner);
        let (Some(oldest), Some(newest)) = (r.oldest_slot(), r.newest_slot()) else {
            return Err(self.nothing_recorded());
        };
        let mut found =
            r.slot_votes_for(slot, self.window, selection).map_err(|e| VoteQueryError::Storage(e.to_string()))?;
        // A prune since the last refresh: the deleted segments' slots are pruned already.
        let oldest = if found.is_none() { r.oldest_slot_present().unwrap_or(newest.saturating_add(1)) } else { oldest };
        let mirror_oldest = oldest;
        drop(r);
        // A replica's copy keeps the newest slots; the bucket's sealed segments hold older ones,
        // and its oldest segment is where the log starts.
        let mut oldest = oldest;
        if let Some(replica) = &self.archive {
            oldest = replica.oldest_archived_votes().map_or(oldest, |o| o.min(oldest));
            if found.is_none() && slot < mirror_oldest {
                found = match replica.archived_votes(slot, self.window, selection) {
                    Ok(ArchivedVotes::Read { found, .. }) => found,
                    Ok(ArchivedVotes::NoLog | ArchivedVotes::Older { .. }) => None,
                    Err(SourceError::Corrupt { object, reason }) => {
                        let reason = format!("object {object} in the bucket is damaged: {reason}");
                        return Err(VoteQueryError::Damaged { slot, reason });
                    }
                    Err(SourceError::Missing { object, reason }) => {
                        return Err(VoteQueryError::Missing { slot, file: format!("object {object} ({reason})") });
                    }
                    Err(e) => return Err(VoteQueryError::Storage(e.to_string())),
                };
            }
        }
        let Some(SlotVotes { bank, votes, searched_to }) = found else {
            return Err(if slot < oldest {
                VoteQueryError::Pruned { slot, oldest, newest }
            } else if slot > newest {
                VoteQueryError::NotYetRecorded { slot, oldest, newest }
            } else {
                VoteQueryError::NoBank { slot, oldest, newest }
            });
        };
        let Some(aldb) = bank.aldb else { return Err(VoteQueryError::NoRoot { slot }) };
        if votes.is_empty() {
            let selected = matches!(selection, VoteSelection::Voters(_));
            return Err(if searched_to >= slot.saturating_add(self.window) {
                VoteQueryError::NeverVoted { slot, window: self.window, selected }
            } else {
                VoteQueryError::NotVotedYet { slot, searched_to, selected }
            });
        }
        Ok(ServedVotes {
            slot,
            h: aldb.h,
            root: aldb.root,
            hard_forks: bank.hard_forks,
            next_set_hash: bank.next_set_hash,
            votes,
        })
    }

    /// The transition to `epoch` (`docs/SPEC.md` §11.4) as JSON text, with the slot of its
    /// evidence: the set of `epoch` and the evidence of the slot the log's choice names
    /// ([`VoteLogReader::transition`]: the earliest slot binding the set whose votes the set of
    /// `epoch − 1` vouches for, or, without that set, the one with the most vote accounts).
    ///
    /// A replica whose copy of the log holds no transition to `epoch` reads it from the one
    /// segment in the bucket the manifest lists as holding it whole (`docs/FORMAT.md`: the
    /// writer carries every transition forward, the shipper indexes where).
    pub fn transition(&self, epoch: u64) -> Result<(u64, String), VoteQueryError> {
        let found = match self.transition_as_read(epoch) {
            // Pruned since the last refresh: the carried entries are not read yet and the index
            // names deleted segments. Read the log again rather than answer that there is none.
            Err(VoteQueryError::NoTransition { .. }) if self.pruned_since_refresh() => {
                self.refresh().map_err(|e| VoteQueryError::Storage(e.to_string()))?;
                self.transition_as_read(epoch)
            }
            other => other,
        };
        match (found, &self.archive) {
            (Err(VoteQueryError::NoTransition { held, .. }), Some(replica)) => {
                self.archived_transition(replica, epoch, held)
            }
            (other, _) => other,
        }
    }

    /// The transition to `epoch` from the bucket, for a replica whose copy holds the sets of
    /// the epochs `held` but no transition to it.
    fn archived_transition(
        &self,
        replica: &Replica,
        epoch: u64,
        held: Vec<u64>,
    ) -> Result<(u64, String), VoteQueryError> {
        let held = || {
            let mut all: Vec<u64> = held.iter().copied().chain(replica.archived_transition_epochs()).collect();
            all.sort_unstable();
            all.dedup();
            VoteQueryError::NoTransition { epoch, held: all }
        };
        match replica.archived_transition(epoch, self.window) {
            Ok(Some(t)) => serve_transition(epoch, t).ok_or_else(held),
            Ok(None) => Err(held()),
            Err(SourceError::Corrupt { object, reason }) => Err(VoteQueryError::ArchivedTransition {
                epoch,
                missing: false,
                reason: format!("object {object} in the bucket is damaged: {reason}"),
            }),
            Err(SourceError::Missing { object, reason }) => Err(VoteQueryError::ArchivedTransition {
                epoch,
                missing: true,
                reason: format!("object {object} ({reason})"),
            }),
            Err(e) => Err(VoteQueryError::Storage(e.to_string())),
        }
    }

    fn pruned_since_refresh(&self) -> bool {
        self.reader.as_ref().is_some_and(|r| r.read().unwrap_or_else(PoisonError::into_inner).pruned_since_refresh())
    }

    /// [`transition`](Self::transition) from the log as last refreshed.
    fn transition_as_read(&self, epoch: u64) -> Result<(u64, String), VoteQueryError> {
        let Some(r) = &self.reader else { return Err(self.nothing_recorded()) };
        let r = r.read().unwrap_or_else(PoisonError::into_inner);
        if r.newest_slot().is_none() && r.set_epochs().is_empty() {
            return Err(self.nothing_recorded());
        }
        let found = r.transition(epoch, self.window).map_err(|e| VoteQueryError::Storage(e.to_string()))?;
        let held = r.set_epochs();
        drop(r);
        let no = || VoteQueryError::NoTransition { epoch, held: held.clone() };
        let Some(t) = found else { return Err(no()) };
        serve_transition(epoch, t).ok_or_else(no)
    }
}

/// The slot of a transition's evidence and the transition as JSON text (`docs/SPEC.md` §11.4);
/// `None` when what the log holds is not servable (a set breaking §11.2, a bank without a root).
fn serve_transition(epoch: u64, t: aldb_format::votes::EpochTransition) -> Option<(u64, String)> {
    use aldb_verify::epochs::{EpochSet, SlotEvidence, Transition};
    let set = match EpochSet::decode(&t.set_encoding) {
        Ok(set) => set,
        Err(e) => {
            log::error!("the set of epoch {epoch} in the vote-evidence log breaks §11.2 ({e}); not served");
            return None;
        }
    };
    let bank = t.evidence.bank;
    let aldb = bank.aldb?;
    let evidence = SlotEvidence {
        slot: bank.slot,
        h: aldb.h,
        root: aldb.root,
        hard_forks: bank.hard_forks,
        next_set_hash: t.set_hash,
        votes: t.evidence.votes,
    };
    Some((bank.slot, Transition { set, evidence }.to_json_value().to_string()))
}

impl ServedVotes {
    /// Bytes the JSON value takes, near enough to check a budget before encoding it.
    pub fn encoded_len(&self) -> usize {
        self.votes.iter().fold(256usize, |n, v| n.saturating_add(v.len().div_ceil(3) * 4 + 3))
    }

    /// The `value` of `getSlotVotes`: §10.5's fields before the account, and the slot's level
    /// when known.
    pub(crate) fn write_json(&self, out: &mut String, level: Option<Level>) {
        let _ = write!(out, r#"{{"version":1,"slot":{},"h":"#, self.slot);
        encode::quoted_base58(out, &self.h);
        out.push_str(r#","root":"#);
        encode::quoted_base58(out, &self.root);
        match self.hard_forks {
            Some(n) => {
                let _ = write!(out, r#","hardForks":{n}"#);
            }
            None => out.push_str(r#","hardForks":null"#),
        }
        if let Some(next) = &self.next_set_hash {
            out.push_str(r#","nextSetHash":"#);
            encode::quoted_base58(out, next);
        }
        out.push_str(r#","votes":["#);
        for (i, v) in self.votes.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push('"');
            base64::engine::general_purpose::STANDARD.encode_string(v, out);
            out.push('"');
        }
        out.push(']');
        if let Some(l) = level {
            let _ = write!(out, r#","commitment":"{}""#, l.name());
        }
        out.push('}');
    }
}

/// Polls the vote-evidence log until shutdown.
pub(crate) async fn poll(feed: Arc<VoteFeed>, interval: Duration, mut shutdown: watch::Receiver<bool>) {
    if !feed.follows() {
        return;
    }
    let mut tick = tokio::time::interval(interval.max(Duration::from_millis(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_error: Option<String> = None;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
        let f = feed.clone();
        match tokio::task::spawn_blocking(move || f.refresh()).await {
            Ok(Ok(_)) => {
                if last_error.take().is_some() {
                    log::info!("vote-evidence log readable again");
                }
            }
            Ok(Err(e)) => {
                let msg = e.to_string();
                if last_error.as_deref() != Some(msg.as_str()) {
                    log::warn!("cannot refresh the vote-evidence log: {msg}");
                    last_error = Some(msg);
                }
            }
            Err(e) => log::error!("vote-evidence refresh task failed: {e}"),
        }
    }
}
