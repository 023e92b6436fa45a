//! `finalized` records of slots committed at `confirmed` (the geyser plugin's default): the
//! committed slots wait in a bounded queue until the front end reports them, or a descendant of
//! them on the committed chain, rooted. `Rooted` statuses reach the pipeline through
//! [`RootedSlots`], since the state machine has forgotten a slot by the time it is rooted. The
//! committed chain is one chain (each commit's parent is the previous commit), so a rooted
//! committed slot finalizes every committed slot before it.

use std::collections::{BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use aldb_snapshot::records::RecordInput;

/// Committed slots waiting to be rooted: about 27 minutes of slots. A slot pushed out of the
/// queue never gets its `finalized` record (rooting lags confirmation by some 32 slots, so
/// only a validator that stopped rooting gets there).
pub const MAX_AWAITING_ROOT: usize = 4096;
/// Rooted slots held until their commit comes (the pipeline can lag the callbacks, and replayed
/// slots are rooted before they commit).
const MAX_ROOTED: usize = 16_384;

/// `Rooted` statuses on their way from the validator's callbacks to the pipeline.
#[derive(Debug, Default)]
pub struct RootedSlots {
    slots: Mutex<Vec<u64>>,
}

impl RootedSlots {
    /// Notes a rooted slot (called from a callback: one short lock).
    pub fn push(&self, slot: u64) {
        let mut s = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        // Drained every round; the bound matters only if the pipeline's thread stopped.
        if s.len() < MAX_ROOTED {
            s.push(slot);
        }
    }

    fn take(&self) -> Vec<u64> {
        std::mem::take(&mut *self.slots.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// The committed slots waiting for a root, and the roots waiting for their commit.
#[derive(Debug, Default)]
pub(crate) struct Finality {
    /// `Rooted` statuses from the callbacks.
    pub(crate) rooted_in: Arc<RootedSlots>,
    /// Committed slots (their `finalized` record inputs) not yet known to be rooted, in commit
    /// order.
    awaiting: VecDeque<RecordInput>,
    /// Rooted slots not committed yet (or never to be: off the committed chain or below it).
    rooted: BTreeSet<u64>,
}

impl Finality {
    /// A committed slot's `finalized` record waits for its root; the oldest waiting is given up
    /// past [`MAX_AWAITING_ROOT`].
    pub(crate) fn wait(&mut self, input: RecordInput, name: &str) {
        if self.awaiting.len() >= MAX_AWAITING_ROOT
            && let Some(old) = self.awaiting.pop_front()
        {
            log::warn!(
                "{name}: slot {} was not rooted within {MAX_AWAITING_ROOT} commits; no finalized record for it",
                old.slot
            );
        }
        self.awaiting.push_back(input);
    }

    /// Takes the roots reported since the last call; returns the newest waiting slot that is
    /// rooted: it and every slot committed before it (its ancestors) are final.
    pub(crate) fn final_upto(&mut self) -> Option<u64> {
        self.rooted.extend(self.rooted_in.take());
        self.awaiting.iter().rev().map(|i| i.slot).find(|s| self.rooted.contains(s))
    }

    /// The next waiting record at or below `upto`.
    pub(crate) fn pop_upto(&mut self, upto: u64) -> Option<RecordInput> {
        if self.awaiting.front().is_some_and(|i| i.slot <= upto) { self.awaiting.pop_front() } else { None }
    }

    /// Drops rooted slots that can no longer be matched: at or below the newest commit and not
    /// waiting (commits come in slot order), and the oldest past [`MAX_ROOTED`].
    pub(crate) fn trim_rooted(&mut self) {
        if let Some(newest) = self.awaiting.back().map(|i| i.slot) {
            let waiting = &self.awaiting;
            self.rooted.retain(|s| *s > newest || waiting.binary_search_by_key(s, |i| i.slot).is_ok());
        }
        while self.rooted.len() > MAX_ROOTED {
            self.rooted.pop_first();
        }
    }
}
