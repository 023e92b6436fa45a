//! What the adapter reports instead of panicking: ignored events, irregular but handled events,
//! dropped slots, and construction errors.

use aldb_core::CoreError;

/// Why an event changed nothing. Every one is counted in [`Stats`](crate::Stats).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IgnoreReason {
    /// An account update for a slot at or below the committed base: a committed slot (a late or
    /// out-of-order update) or a fork the committed chain has passed.
    UpdateBelowBase,
    /// An account update for a slot that was dropped (dead, abandoned or over the bound) and has
    /// not been re-created.
    UpdateForDroppedSlot,
    /// A startup account after the startup state was built.
    LateStartupUpdate,
    /// A status for a slot at or below the committed base. Routine: `Processed` and `Rooted`
    /// arrive after a slot committed, and forks below the base still report.
    StatusBelowBase,
    /// A status other than `CreatedBank` for a dropped slot.
    StatusForDroppedSlot,
    /// `Processed` for a slot already processed.
    RepeatedProcessed,
    /// A parent that is not below its slot (which also rules out parent cycles), or a
    /// `CreatedBank` without a parent.
    InvalidParent,
    /// `end_of_startup` after startup already ended.
    RepeatedEndOfStartup,
    /// Block metadata for a slot already applied, or passed by the committed chain.
    BlockBelowBase,
    /// Block metadata for a dropped slot.
    BlockForDroppedSlot,
    /// Block metadata without a block height (agave 4.2.0 always sends one).
    BlockWithoutHeight,
    /// An account update for a bank already frozen into the fork engine
    /// (`Commitment::Processed`): agave sends none after `Processed`.
    UpdateForFrozenSlot,
}

impl IgnoreReason {
    /// Every reason, in counter order.
    pub const ALL: [Self; 12] = [
        Self::UpdateBelowBase,
        Self::UpdateForDroppedSlot,
        Self::LateStartupUpdate,
        Self::StatusBelowBase,
        Self::StatusForDroppedSlot,
        Self::RepeatedProcessed,
        Self::InvalidParent,
        Self::RepeatedEndOfStartup,
        Self::BlockBelowBase,
        Self::BlockForDroppedSlot,
        Self::BlockWithoutHeight,
        Self::UpdateForFrozenSlot,
    ];

    /// A stable snake_case name for metrics labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::UpdateBelowBase => "update_below_base",
            Self::UpdateForDroppedSlot => "update_for_dropped_slot",
            Self::LateStartupUpdate => "late_startup_update",
            Self::StatusBelowBase => "status_below_base",
            Self::StatusForDroppedSlot => "status_for_dropped_slot",
            Self::RepeatedProcessed => "repeated_processed",
            Self::InvalidParent => "invalid_parent",
            Self::RepeatedEndOfStartup => "repeated_end_of_startup",
            Self::BlockBelowBase => "block_below_base",
            Self::BlockForDroppedSlot => "block_for_dropped_slot",
            Self::BlockWithoutHeight => "block_without_height",
            Self::UpdateForFrozenSlot => "update_for_frozen_slot",
        }
    }

    /// Whether the reason occurs in normal operation, so a log line would only be noise.
    pub fn is_routine(self) -> bool {
        matches!(self, Self::StatusBelowBase | Self::UpdateBelowBase)
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for IgnoreReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An event the adapter ignored, and why. Returning it never means the adapter is broken: the
/// event is counted and the state is as if it had not arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[error("ignored event for slot {slot:?}: {reason}")]
pub struct Ignored {
    /// Why.
    pub reason: IgnoreReason,
    /// The slot the event named, if any.
    pub slot: Option<u64>,
}

/// An event that was handled but should not happen in a healthy run. Counted in
/// [`Stats`](crate::Stats); worth an alert when it grows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Irregularity {
    /// `Processed`, `Rooted` or `Dead` for a slot the adapter had never heard of.
    UnknownSlot,
    /// Two statuses named different parents for one slot; the first is kept.
    ParentConflict,
    /// Two children of the committed base were ready at once (conflicting confirmations); the
    /// rooted one, else the lowest, was committed.
    ConflictingForks,
    /// A slot was rooted whose parent is below the committed base: the committed chain left the
    /// rooted chain, which only a consensus failure explains.
    RootedOffChain,
    /// A slot status arrived after startup accounts without `end_of_startup`; startup was ended
    /// then.
    ImplicitEndOfStartup,
    /// Startup accounts were offered after a base already existed; they were discarded.
    StartupAfterBase,
    /// The bulk builder could not start its workers; the startup state was built by one commit.
    EngineFallback,
    /// The fork engine refused a freeze for another reason than its bound, or found a root it
    /// had given differ after a fork switch (`Commitment::Processed`). An engine bug: the bank
    /// and its descendants are dropped, and every root after it is suspect.
    EngineRefused,
}

impl Irregularity {
    /// Every kind, in counter order.
    pub const ALL: [Self; 8] = [
        Self::UnknownSlot,
        Self::ParentConflict,
        Self::ConflictingForks,
        Self::RootedOffChain,
        Self::ImplicitEndOfStartup,
        Self::StartupAfterBase,
        Self::EngineFallback,
        Self::EngineRefused,
    ];

    /// A stable snake_case name for metrics labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::UnknownSlot => "unknown_slot",
            Self::ParentConflict => "parent_conflict",
            Self::ConflictingForks => "conflicting_forks",
            Self::RootedOffChain => "rooted_off_chain",
            Self::ImplicitEndOfStartup => "implicit_end_of_startup",
            Self::StartupAfterBase => "startup_after_base",
            Self::EngineFallback => "engine_fallback",
            Self::EngineRefused => "engine_refused",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// Why a slot's buffered updates were thrown away.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// The validator reported the slot dead.
    Dead,
    /// The slot does not descend from the committed chain (its fork was passed by, or an
    /// ancestor was dropped or restarted).
    Abandoned,
    /// More than `max_pending_slots` slots were tracked; the lowest were dropped.
    Overflow,
    /// The fork engine refused to freeze the bank (`Commitment::Processed`): over its bound, or
    /// its parent was refused before it. Like an overflow, the fork cannot continue past it.
    Refused,
}

/// Errors building an adapter.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdapterError {
    /// A setting is out of range.
    #[error("invalid adapter config: {0}")]
    Config(String),
    /// The engine could not be built.
    #[error(transparent)]
    Engine(#[from] CoreError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_indices_follow_the_lists() {
        for (i, r) in IgnoreReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
        }
        for (i, k) in Irregularity::ALL.iter().enumerate() {
            assert_eq!(k.index(), i);
        }
    }
}
