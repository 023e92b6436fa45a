//! The commitment level of every served slot, from the writer's slot-status journal
//! (`slot-status.log`, `aldb_format::status`).
//!
//! A writer at `commitment: "processed"` publishes a file for every frozen bank, forks included,
//! and journals what consensus later says of each slot: confirmed, finalized, or abandoned (its
//! fork dropped). [`Levels`] folds the journal into one status per served slot, which every
//! answer consults:
//!
//! - a slot the journal has not named yet but whose file is published is `processed`: its bank
//!   was frozen (the writer journals a slot only after publishing its file);
//! - confirmation and finalization carry down to the slot's ancestors (the validator confirms a
//!   chain and may skip slots in its notices), never through an abandoned slot;
//! - an abandoned slot is never served, whatever level it reached;
//! - a slot whose newest journaled file is newer than the file the reader serves (that newer
//!   file is damaged, so the reader fell back to an older copy, which is another bank of the
//!   slot) is not served either.
//!
//! A journal without `processed` entries comes from a writer along one chain, at `confirmed`
//! or `finalized`, that journals only what consensus said: its files are at least `confirmed`,
//! and every file up to the newest finalized slot is final (the directory is one chain).
//!
//! A directory without a journal was written by a `confirmed` or `finalized` writer along one
//! chain; its files do not say which. Answers then carry no level, exactly as before journals
//! existed (see [`crate::rpc`] for what a `commitment` parameter selects there).

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use aldb_format::SlotInfo;
use aldb_format::status::{SlotStatusKind, SlotStatuses};

/// A commitment level, Solana's names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// The bank was frozen; its fork may still be dropped.
    Processed,
    /// Optimistically confirmed by a supermajority.
    Confirmed,
    /// Rooted: final.
    Finalized,
}

impl Level {
    /// Every level, weakest first (metrics index by it).
    pub const ALL: [Level; 3] = [Level::Processed, Level::Confirmed, Level::Finalized];

    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            Level::Processed => "processed",
            Level::Confirmed => "confirmed",
            Level::Finalized => "finalized",
        }
    }

    /// The level of a wire name.
    pub fn from_name(name: &str) -> Option<Level> {
        Level::ALL.into_iter().find(|l| l.name() == name)
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// What may be said of a served slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Served {
    /// Served, at this level.
    At(Level),
    /// Served, level unknown: the directory has no journal.
    Unknown,
    /// The journal says its bank was dropped: never served.
    Abandoned,
    /// The journal names a newer file of the slot than the one the reader serves (that file is
    /// damaged or not yet read): the older file is another bank, never served for it.
    Stale {
        /// The newest file of the slot, per the journal.
        journaled: u32,
    },
}

impl Served {
    /// The level, if the slot may be served and its level is known.
    pub fn level(self) -> Option<Level> {
        match self {
            Served::At(l) => Some(l),
            _ => None,
        }
    }
}

/// One slot's status as folded from the journal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Folded {
    At(Level),
    Abandoned,
}

/// What kind of writer the journal shows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Mode {
    /// No journal: levels unknown.
    #[default]
    Unknown,
    /// Marks only, no `processed` entries: a writer along one chain, at `confirmed` or
    /// `finalized`; every slot up to `finalized` is final.
    Chain { finalized: Option<u64> },
    /// `processed` entries: a writer publishing every frozen bank, forks included.
    Forks,
}

/// A slot as the walk down the chains sees it: its own status (`None`: abandoned), its parent
/// and its newest journaled file.
type Named = (Option<Level>, Option<u64>, Option<u32>);

/// A consistent picture of the levels, swapped whole on each update.
#[derive(Debug, Default)]
pub struct View {
    mode: Mode,
    /// Every slot the journal names, with its level carried down from its descendants, and the
    /// sequence number of its newest journaled file.
    folded: BTreeMap<u64, (Folded, Option<u32>)>,
    /// The newest served slot at each level or above, by [`Level::index`].
    newest: [Option<u64>; 3],
    /// Served slots by level (by [`Level::index`]), then abandoned ones (still on disk).
    counts: [u64; 4],
}

impl View {
    /// Whether the directory has a journal (otherwise levels are unknown).
    pub fn journal(&self) -> bool {
        self.mode != Mode::Unknown
    }

    /// What may be said of the served slot `info`.
    pub fn served(&self, info: &SlotInfo) -> Served {
        let named = self.folded.get(&info.slot);
        match (self.mode, named) {
            (Mode::Unknown, _) => Served::Unknown,
            (_, Some((_, Some(journaled)))) if *journaled > info.seq => Served::Stale { journaled: *journaled },
            (_, Some((Folded::Abandoned, _))) => Served::Abandoned,
            (Mode::Chain { finalized }, _) if finalized.is_some_and(|f| info.slot <= f) => Served::At(Level::Finalized),
            (Mode::Chain { .. }, Some((Folded::At(l), _))) => Served::At((*l).max(Level::Confirmed)),
            (Mode::Chain { .. }, None) => Served::At(Level::Confirmed),
            (Mode::Forks, Some((Folded::At(l), _))) => Served::At(*l),
            (Mode::Forks, None) => Served::At(Level::Processed),
        }
    }

    /// Whether the journal says `slot` was abandoned (served or not).
    pub fn abandoned(&self, slot: u64) -> bool {
        matches!(self.folded.get(&slot), Some((Folded::Abandoned, _)))
    }

    /// The newest served slot at `level` or above, when the directory has a journal.
    pub fn newest(&self, level: Level) -> Option<u64> {
        self.newest[level.index()]
    }

    /// Served slots at each level, weakest first, then abandoned slots whose files remain.
    pub fn counts(&self) -> [u64; 4] {
        self.counts
    }

    /// Builds the view from the journal's statuses (`None`: no journal) and the served slots,
    /// oldest first.
    pub fn build(statuses: Option<&SlotStatuses>, served: &[SlotInfo]) -> View {
        let Some(statuses) = statuses else { return View::default() };
        // Only a fork-mode writer journals published files; their sequence numbers stay with
        // the slots whatever is marked after.
        let mode = if statuses.iter().any(|(_, st)| st.seq.is_some()) {
            Mode::Forks
        } else {
            Mode::Chain { finalized: statuses.newest_finalized() }
        };
        // Every slot named or served: its own status (`None`: abandoned), its parent (from the
        // journal, else from its file's header) and its newest journaled file.
        let mut slots: BTreeMap<u64, Named> = served
            .iter()
            .filter(|_| mode == Mode::Forks)
            .map(|i| (i.slot, (Some(Level::Processed), i.parent, None)))
            .collect();
        for (slot, st) in statuses.iter() {
            let own = match st.kind {
                SlotStatusKind::Processed => Some(Level::Processed),
                SlotStatusKind::Confirmed => Some(Level::Confirmed),
                SlotStatusKind::Finalized => Some(Level::Finalized),
                // Abandoned, or a kind this version does not know: nothing to serve on.
                _ => None,
            };
            let file_parent = slots.get(&slot).and_then(|s| s.1);
            slots.insert(slot, (own, st.parent.or(file_parent), st.seq));
        }
        let mut folded = BTreeMap::new();
        // Parents are older than their children, so walking down from the newest slot meets
        // every slot after all its descendants: the level carried to it is complete.
        let mut carried: BTreeMap<u64, Level> = BTreeMap::new();
        for (&slot, &(own, parent, seq)) in slots.iter().rev() {
            let from_below = carried.remove(&slot);
            let f = match own {
                Some(l) => Folded::At(from_below.map_or(l, |c| c.max(l))),
                None => Folded::Abandoned,
            };
            if let (Folded::At(l), Some(p)) = (f, parent)
                && l >= Level::Confirmed
                && p < slot
            {
                let c = carried.entry(p).or_insert(l);
                *c = (*c).max(l);
            }
            folded.insert(slot, (f, seq));
        }
        // Below the newest finalized slot, a bank not on its chain can never be final: its fork
        // lost. The writer journals such banks abandoned when it drops them, but not the banks it
        // no longer held after a restart, so they are judged here.
        if mode == Mode::Forks {
            let rooted = folded.iter().rev().find(|(_, (f, _))| *f == Folded::At(Level::Finalized)).map(|(s, _)| *s);
            if let Some(rooted) = rooted {
                // Only slots the journal names: below its compaction floor a chain may run through
                // pruned files, and a broken chain must not make a final slot look abandoned.
                for (slot, (f, _)) in folded.range_mut(..rooted) {
                    if statuses.get(*slot).is_some() && matches!(f, Folded::At(l) if *l < Level::Finalized) {
                        *f = Folded::Abandoned;
                    }
                }
            }
        }
        let mut view = View { mode, folded, newest: [None; 3], counts: [0; 4] };
        for info in served.iter().rev() {
            match view.served(info) {
                Served::At(l) => {
                    view.counts[l.index()] += 1;
                    for weaker in Level::ALL.into_iter().filter(|w| *w <= l) {
                        view.newest[weaker.index()].get_or_insert(info.slot);
                    }
                }
                Served::Abandoned | Served::Stale { .. } => view.counts[3] += 1,
                Served::Unknown => {}
            }
        }
        view
    }
}

/// The current [`View`], shared by the request handlers and replaced by the poller.
#[derive(Debug, Default)]
pub struct Levels {
    view: RwLock<Arc<View>>,
}

impl Levels {
    /// The current view.
    pub fn view(&self) -> Arc<View> {
        match self.view.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Replaces the view.
    pub fn set(&self, view: View) {
        let view = Arc::new(view);
        match self.view.write() {
            Ok(mut g) => *g = view,
            Err(p) => *p.into_inner() = view,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use aldb_format::status::StatusEntry;

    fn entry(slot: u64, kind: SlotStatusKind, parent: Option<u64>, seq: Option<u32>) -> StatusEntry {
        StatusEntry { slot, kind, parent, seq }
    }

    fn info(slot: u64, seq: u32) -> SlotInfo {
        SlotInfo { slot, parent: slot.checked_sub(1), root: [slot as u8; 32], seq }
    }

    #[test]
    fn no_journal_knows_no_level() {
        let v = View::build(None, &[info(1, 1)]);
        assert!(!v.journal());
        assert_eq!(v.served(&info(1, 1)), Served::Unknown);
        assert_eq!(v.newest(Level::Processed), None);
    }

    #[test]
    fn levels_carry_down_the_chain_and_never_through_an_abandoned_bank() {
        use SlotStatusKind::*;
        let mut s = SlotStatuses::default();
        // 1 <- 2 <- 3 <- 5 (the confirmed chain), 2 <- 4 (a fork, dropped), 5 <- 6 (processed).
        for (slot, parent, seq) in [(1, 0, 1), (2, 1, 2), (3, 2, 3), (4, 2, 4), (5, 3, 5), (6, 5, 6)] {
            s.apply(&entry(slot, Processed, Some(parent), Some(seq)));
        }
        s.apply(&entry(5, Confirmed, None, None));
        s.apply(&entry(2, Finalized, None, None));
        s.apply(&entry(4, Abandoned, None, None));
        let served: Vec<SlotInfo> = (1..=6).map(|i| info(i, i as u32)).collect();
        let v = View::build(Some(&s), &served);
        let at = |slot: u64| v.served(&info(slot, slot as u32));
        assert_eq!(at(1), Served::At(Level::Finalized));
        assert_eq!(at(2), Served::At(Level::Finalized));
        assert_eq!(at(3), Served::At(Level::Confirmed));
        assert_eq!(at(4), Served::Abandoned);
        assert_eq!(at(5), Served::At(Level::Confirmed));
        assert_eq!(at(6), Served::At(Level::Processed));
        assert_eq!(v.newest(Level::Processed), Some(6));
        assert_eq!(v.newest(Level::Confirmed), Some(5));
        assert_eq!(v.newest(Level::Finalized), Some(2));
        assert_eq!(v.counts(), [1, 2, 2, 1]);
        // A bank left over from before a restart, on a fork the root passed by.
        let mut s2 = s.clone();
        s2.apply(&entry(7, Processed, Some(6), Some(7)));
        s2.apply(&entry(8, Processed, Some(3), Some(8)));
        s2.apply(&entry(9, Processed, Some(8), Some(9)));
        s2.apply(&entry(9, Finalized, None, None));
        let served: Vec<SlotInfo> = (1..=9).map(|i| info(i, i as u32)).collect();
        let v2 = View::build(Some(&s2), &served);
        assert_eq!(v2.served(&info(6, 6)), Served::Abandoned, "off the finalized chain");
        assert_eq!(v2.served(&info(7, 7)), Served::Abandoned, "off the finalized chain");
        assert_eq!(v2.served(&info(5, 5)), Served::Abandoned, "confirmed, yet off the finalized chain");
        for slot in [1, 2, 3, 8, 9] {
            assert_eq!(v2.served(&info(slot, slot as u32)), Served::At(Level::Finalized), "slot {slot}");
        }
        // A published file the journal has not named yet is a frozen bank.
        assert_eq!(v.served(&info(7, 7)), Served::At(Level::Processed));
    }

    #[test]
    fn a_journal_of_marks_only_is_a_chain_at_confirmed_or_above() {
        use SlotStatusKind::*;
        let mut s = SlotStatuses::default();
        s.apply(&entry(3, Finalized, None, None));
        s.apply(&entry(5, Confirmed, None, None));
        s.apply(&entry(6, Abandoned, None, None));
        let served: Vec<SlotInfo> = (1..=7).map(|i| info(i, i as u32)).collect();
        let v = View::build(Some(&s), &served);
        assert!(v.journal());
        let at = |slot: u64| v.served(&info(slot, slot as u32));
        assert_eq!(at(1), Served::At(Level::Finalized), "below a finalized slot of the one chain");
        assert_eq!(at(3), Served::At(Level::Finalized));
        assert_eq!(at(4), Served::At(Level::Confirmed), "the writer wrote it at confirmed at least");
        assert_eq!(at(6), Served::Abandoned);
        assert_eq!(at(7), Served::At(Level::Confirmed));
        assert_eq!((v.newest(Level::Processed), v.newest(Level::Finalized)), (Some(7), Some(3)));
    }

    #[test]
    fn an_older_copy_of_a_refrozen_slot_is_not_served_for_it() {
        use SlotStatusKind::*;
        let mut s = SlotStatuses::default();
        s.apply(&entry(3, Processed, Some(2), Some(4)));
        s.apply(&entry(3, Abandoned, None, None));
        s.apply(&entry(3, Processed, Some(1), Some(9)));
        let v = View::build(Some(&s), &[info(3, 9)]);
        assert_eq!(v.served(&info(3, 9)), Served::At(Level::Processed));
        // The reader fell back to the first bank's file: the slot is not served from it.
        assert_eq!(v.served(&info(3, 4)), Served::Stale { journaled: 9 });
    }
}
