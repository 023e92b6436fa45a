//! The light client that follows epochs, and misbehaviour (`docs/SPEC.md` §11.5, §11.6).

use alloc::vec::Vec;

use super::{EpochError, EpochSchedule, EpochSet, SlotEvidence, Transition, Vouched};
use crate::Hash;

/// Where a client starts: a set it trusts and the time it was the cluster's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// The cluster's epoch schedule.
    pub schedule: EpochSchedule,
    /// The trusted set (the genesis set of epoch 0, or one the user pins).
    pub set: EpochSet,
    /// Unix seconds at which `set` was the cluster's (never later).
    pub time: i64,
    /// How long, in seconds, a set is used after its time.
    pub trusting_period: u64,
}

/// An epoch whose set the client holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldEpoch {
    /// The epoch's set.
    pub set: EpochSet,
    /// Its time: the vouched time of the evidence that proved it (or its predecessor's), or the
    /// checkpoint's.
    pub time: i64,
    /// The evidence that proved it; `None` for the checkpoint.
    pub proof: Option<SlotEvidence>,
}

/// The two ways evidence signed by more than 2/3 can contradict itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MisbehaviourKind {
    /// Two bank hashes for one slot.
    ConflictingBankHashes,
    /// Two sets bound for one next epoch.
    ConflictingNextSets,
}

impl MisbehaviourKind {
    /// The kind's name in the misbehaviour file.
    pub fn name(&self) -> &'static str {
        match self {
            Self::ConflictingBankHashes => "conflicting_bank_hashes",
            Self::ConflictingNextSets => "conflicting_next_sets",
        }
    }

    /// The kind a name stands for.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "conflicting_bank_hashes" => Some(Self::ConflictingBankHashes),
            "conflicting_next_sets" => Some(Self::ConflictingNextSets),
            _ => None,
        }
    }
}

/// Evidence that more than 1/3 of an epoch's stake signed two contradicting things: what a
/// frozen client keeps and a person hands to others (§11.6).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Misbehaviour {
    /// How the two contradict.
    pub kind: MisbehaviourKind,
    /// The cluster's epoch schedule.
    pub schedule: EpochSchedule,
    /// The set of the epoch both evidences are of, which vouches for both.
    pub set: EpochSet,
    /// The evidence the client had verified before.
    pub first: SlotEvidence,
    /// The evidence that contradicts it.
    pub second: SlotEvidence,
}

/// What an advance did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Advanced {
    /// The client now trusts the next epoch.
    Advanced {
        /// The new newest epoch.
        epoch: u64,
        /// Its set's hash.
        set_hash: Hash,
        /// Its time.
        time: i64,
        /// How the previous set vouched.
        vouched: Vouched,
    },
    /// The transition agrees with the one the client verified for that epoch; nothing changed.
    AlreadyVerified {
        /// The epoch.
        epoch: u64,
        /// How the previous set vouched.
        vouched: Vouched,
    },
}

/// A root accepted on the votes of its epoch's set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochRoot {
    /// The slot.
    pub slot: u64,
    /// Its epoch.
    pub epoch: u64,
    /// The bank hash the votes carry.
    pub bank_hash: Hash,
    /// The state root inside it.
    pub root: Hash,
    /// The next set's hash inside it (zero when it binds none).
    pub next_set_hash: Hash,
    /// How the epoch's set vouched.
    pub vouched: Vouched,
}

/// Everything a client holds; what a caller stores between runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientState {
    /// The cluster's epoch schedule.
    pub schedule: EpochSchedule,
    /// The trusting period, seconds.
    pub trusting_period: u64,
    /// The held epochs, oldest first: the newest trusted one and, once advanced, the one before.
    pub held: Vec<HeldEpoch>,
    /// The evidence of the highest slot verified.
    pub last: Option<SlotEvidence>,
    /// The misbehaviour that froze the client.
    pub frozen: Option<Misbehaviour>,
}

/// A light client that follows the validator set from a checkpoint, one epoch at a time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LightClient {
    state: ClientState,
}

fn conflict(a: &SlotEvidence, b: &SlotEvidence) -> Option<MisbehaviourKind> {
    if a.slot == b.slot && a.bank_hash() != b.bank_hash() {
        return Some(MisbehaviourKind::ConflictingBankHashes);
    }
    if a.binds_set() && b.binds_set() && a.next_set_hash != b.next_set_hash {
        return Some(MisbehaviourKind::ConflictingNextSets);
    }
    None
}

impl LightClient {
    /// A client trusting only `checkpoint`.
    pub fn new(checkpoint: Checkpoint) -> Result<Self, EpochError> {
        checkpoint.schedule.validate()?;
        Ok(LightClient {
            state: ClientState {
                schedule: checkpoint.schedule,
                trusting_period: checkpoint.trusting_period,
                held: alloc::vec![HeldEpoch { set: checkpoint.set, time: checkpoint.time, proof: None }],
                last: None,
                frozen: None,
            },
        })
    }

    /// A client from a stored state, checked: a valid schedule, one or two held epochs, consecutive,
    /// each proof of the schedule's epoch before its set and binding it.
    pub fn from_state(state: ClientState) -> Result<Self, EpochError> {
        state.schedule.validate()?;
        let ok_len = matches!(state.held.len(), 1 | 2);
        let consecutive = state.held.windows(2).all(|w| w[0].set.epoch().checked_add(1) == Some(w[1].set.epoch()));
        let proofs = state.held.iter().enumerate().all(|(i, e)| match &e.proof {
            None => i == 0,
            Some(p) => {
                e.set.epoch().checked_sub(1) == Some(state.schedule.epoch(p.slot)) && p.next_set_hash == e.set.hash()
            }
        });
        if !(ok_len && consecutive && proofs) {
            return Err(EpochError::State);
        }
        Ok(LightClient { state })
    }

    /// Everything the client holds.
    pub fn state(&self) -> &ClientState {
        &self.state
    }

    /// The newest trusted epoch.
    pub fn epoch(&self) -> u64 {
        self.newest().set.epoch()
    }

    /// The newest trusted epoch's set, time and proof.
    pub fn newest(&self) -> &HeldEpoch {
        // Never empty: new and from_state hold at least one epoch, advance only replaces.
        &self.state.held[self.state.held.len() - 1]
    }

    /// The highest slot whose bank hash the client verified.
    pub fn last_verified_slot(&self) -> Option<u64> {
        self.state.last.as_ref().map(|e| e.slot)
    }

    /// The misbehaviour that froze the client, to write to a file.
    pub fn misbehaviour(&self) -> Option<&Misbehaviour> {
        self.state.frozen.as_ref()
    }

    fn held_epoch(&self, epoch: u64) -> Option<&HeldEpoch> {
        self.state.held.iter().find(|e| e.set.epoch() == epoch)
    }

    fn fresh(&self, held: &HeldEpoch, now: i64) -> Result<(), EpochError> {
        if i128::from(now) - i128::from(held.time) > i128::from(self.state.trusting_period) {
            return Err(EpochError::Expired {
                epoch: held.set.epoch(),
                time: held.time,
                now,
                period: self.state.trusting_period,
            });
        }
        Ok(())
    }

    fn check_frozen(&self) -> Result<(), EpochError> {
        if self.state.frozen.is_some() { Err(EpochError::Frozen) } else { Ok(()) }
    }

    /// The evidences conflicts are checked against: the held epochs' proofs, oldest first, then
    /// the last verified one.
    fn stored(&self) -> Vec<&SlotEvidence> {
        let mut out: Vec<&SlotEvidence> = self.state.held.iter().filter_map(|e| e.proof.as_ref()).collect();
        if let Some(last) = &self.state.last
            && !out.contains(&last)
        {
            out.push(last);
        }
        out
    }

    /// §11.6: freezes the client when `ev`, just vouched for by `set`, contradicts a stored
    /// evidence.
    fn check_conflicts(&mut self, ev: &SlotEvidence, set: &EpochSet) -> Result<(), EpochError> {
        let found = {
            let stored = self.stored();
            let bank = stored
                .iter()
                .find(|y| y.slot == ev.slot && y.bank_hash() != ev.bank_hash())
                .map(|y| (MisbehaviourKind::ConflictingBankHashes, (*y).clone()));
            bank.or_else(|| {
                stored
                    .iter()
                    .find(|y| {
                        self.state.schedule.epoch(y.slot) == set.epoch()
                            && conflict(y, ev) == Some(MisbehaviourKind::ConflictingNextSets)
                    })
                    .map(|y| (MisbehaviourKind::ConflictingNextSets, (*y).clone()))
            })
        };
        match found {
            None => Ok(()),
            Some((kind, first)) => Err(self.freeze(kind, set.clone(), first, ev.clone())),
        }
    }

    fn freeze(
        &mut self,
        kind: MisbehaviourKind,
        set: EpochSet,
        first: SlotEvidence,
        second: SlotEvidence,
    ) -> EpochError {
        self.state.frozen = Some(Misbehaviour { kind, schedule: self.state.schedule, set, first, second });
        EpochError::Misbehaviour(kind)
    }

    fn remember(&mut self, ev: &SlotEvidence) {
        if self.state.last.as_ref().is_none_or(|l| ev.slot >= l.slot) {
            self.state.last = Some(ev.clone());
        }
    }

    /// Follows a transition to the next epoch (§11.5, "Advance"), or confirms one to the newest.
    pub fn advance(&mut self, t: &Transition, now: i64) -> Result<Advanced, EpochError> {
        self.check_frozen()?;
        let offered = t.set.epoch();
        let trusted = self.epoch();
        if offered > trusted.saturating_add(1) {
            return Err(EpochError::SkippedEpoch { trusted, offered });
        }
        let signer = match offered.checked_sub(1).and_then(|e| self.held_epoch(e)) {
            Some(h) if offered >= trusted => h.clone(),
            _ => return Err(EpochError::StaleTransition { trusted, offered }),
        };
        let ev = &t.evidence;
        let slot_epoch = self.state.schedule.epoch(ev.slot);
        if slot_epoch != signer.set.epoch() {
            return Err(EpochError::SlotNotInEpoch { slot: ev.slot, slot_epoch, expected: signer.set.epoch() });
        }
        self.fresh(&signer, now)?;
        if !ev.binds_set() {
            return Err(EpochError::SetNotBound { slot: ev.slot });
        }
        if ev.next_set_hash != t.set.hash() {
            return Err(EpochError::WrongSet);
        }
        let vouched = ev.vouch(&signer.set)?;
        self.check_conflicts(ev, &signer.set)?;
        if offered == trusted {
            return Ok(Advanced::AlreadyVerified { epoch: offered, vouched });
        }
        let time = vouched.time.unwrap_or(signer.time);
        let newest = HeldEpoch { set: t.set.clone(), time, proof: Some(ev.clone()) };
        let previous = self.newest().clone();
        self.state.held = alloc::vec![previous, newest];
        self.remember(ev);
        Ok(Advanced::Advanced { epoch: offered, set_hash: t.set.hash(), time, vouched })
    }

    /// Accepts the root of `ev.slot` on the votes of its epoch's set (§11.5, "Accept a root").
    pub fn accept_root(&mut self, ev: &SlotEvidence, now: i64) -> Result<EpochRoot, EpochError> {
        self.check_frozen()?;
        let held = self.set_for(ev.slot, now)?;
        let vouched = ev.vouch(&held.set)?;
        self.check_conflicts(ev, &held.set)?;
        self.remember(ev);
        Ok(EpochRoot {
            slot: ev.slot,
            epoch: held.set.epoch(),
            bank_hash: ev.bank_hash(),
            root: ev.root,
            next_set_hash: ev.next_set_hash,
            vouched,
        })
    }

    fn set_for(&self, slot: u64, now: i64) -> Result<HeldEpoch, EpochError> {
        let epoch = self.state.schedule.epoch(slot);
        let trusted = self.epoch();
        if epoch > trusted {
            return Err(EpochError::EpochAhead { epoch, trusted });
        }
        let held = self
            .held_epoch(epoch)
            .ok_or(EpochError::EpochBehind { epoch, oldest: self.state.held[0].set.epoch() })?
            .clone();
        self.fresh(&held, now)?;
        Ok(held)
    }

    /// Checks two evidences handed to the client (§11.6, "Submitting misbehaviour"); when they
    /// conflict, each vouched for by their epoch's set, the client freezes and returns the kind.
    pub fn submit_misbehaviour(
        &mut self,
        first: &SlotEvidence,
        second: &SlotEvidence,
        now: i64,
    ) -> Result<MisbehaviourKind, EpochError> {
        self.check_frozen()?;
        let schedule = &self.state.schedule;
        if schedule.epoch(first.slot) != schedule.epoch(second.slot) {
            return Err(EpochError::NotConflicting);
        }
        let held = self.set_for(first.slot, now)?;
        first.vouch(&held.set)?;
        second.vouch(&held.set)?;
        let kind = conflict(first, second).ok_or(EpochError::NotConflicting)?;
        self.freeze(kind, held.set, first.clone(), second.clone());
        Ok(kind)
    }
}

/// Checks a misbehaviour file without a client (§11.6): `trusted_set_hash`, when given, must be
/// its set's hash; both slots in the set's epoch; the set vouching for both; and the conflict the
/// file names. No clock is involved.
pub fn verify_misbehaviour(m: &Misbehaviour, trusted_set_hash: Option<&Hash>) -> Result<MisbehaviourKind, EpochError> {
    m.schedule.validate()?;
    if trusted_set_hash.is_some_and(|h| *h != m.set.hash()) {
        return Err(EpochError::UntrustedSet);
    }
    for ev in [&m.first, &m.second] {
        let slot_epoch = m.schedule.epoch(ev.slot);
        if slot_epoch != m.set.epoch() {
            return Err(EpochError::SlotNotInEpoch { slot: ev.slot, slot_epoch, expected: m.set.epoch() });
        }
    }
    m.first.vouch(&m.set)?;
    m.second.vouch(&m.set)?;
    match conflict(&m.first, &m.second) {
        None => Err(EpochError::NotConflicting),
        Some(kind) if kind != m.kind => Err(EpochError::WrongKind),
        Some(kind) => Ok(kind),
    }
}
