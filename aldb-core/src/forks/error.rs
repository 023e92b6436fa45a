//! Errors of the fork engine.

/// Why the fork engine refused a call. The tree is untouched by a refused call, except that a
/// refused freeze of a slot already frozen has dropped the slot's old version (it is dead either
/// way, see [`crate::ForkEngine::freeze`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ForkError {
    /// The slot is the rooted slot or older: its state is part of the base and cannot change.
    #[error("slot {slot} is at or below the rooted slot {base}")]
    AtOrBelowBase {
        /// The slot asked for.
        slot: u64,
        /// The engine's rooted slot.
        base: u64,
    },
    /// A bank's parent must be an older slot.
    #[error("bank {slot} names parent {parent}, which is not below it")]
    ParentNotBelow {
        /// The bank's slot.
        slot: u64,
        /// The parent it named.
        parent: u64,
    },
    /// The parent is neither the rooted slot nor a frozen unrooted bank (never frozen, refused,
    /// dead, or abandoned by a root elsewhere).
    #[error("bank {slot}'s parent {parent} is neither the rooted slot nor a frozen bank")]
    UnknownParent {
        /// The bank's slot.
        slot: u64,
        /// The parent it named.
        parent: u64,
    },
    /// No frozen unrooted bank has this slot.
    #[error("slot {slot} has no frozen unrooted bank")]
    UnknownSlot {
        /// The slot asked for.
        slot: u64,
    },
    /// Holding one more bank would pass [`crate::ForkLimits::max_banks`].
    #[error("freezing bank {slot} would hold more than {max} unrooted banks")]
    TooManyBanks {
        /// The bank refused.
        slot: u64,
        /// The bound.
        max: usize,
    },
    /// The bank's updates and undo record could pass [`crate::ForkLimits::max_bytes`].
    #[error("freezing bank {slot} needs up to {needed} bytes beside the {held} held, over the bound of {max}")]
    TooManyBytes {
        /// The bank refused.
        slot: u64,
        /// Upper bound of what the bank would hold.
        needed: usize,
        /// Bytes the unrooted banks hold now.
        held: usize,
        /// The bound.
        max: usize,
    },
    /// After a fork switch the tree's root is not the root the bank had when it was frozen. This
    /// is an engine bug, reported rather than hidden: every root served after it is suspect.
    #[error("after switching to bank {slot} the tree's root differs from the root it was frozen with")]
    Diverged {
        /// The bank switched to.
        slot: u64,
    },
}
