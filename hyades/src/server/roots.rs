//! The root feed: what has been said of each served root, so that each new root, each level it
//! reaches and its abandonment are announced once.

use std::collections::BTreeMap;

use aldb_format::SlotInfo;

use super::poll::Refreshed;
use crate::levels::{Level, Served, View};

/// A newly published root, a root reaching a higher level, or an announced root abandoned, as
/// broadcast to connections.
#[derive(Debug)]
pub(super) struct RootEvent {
    /// Position in the feed; a subscription receives events from the position current when it
    /// was made.
    pub(super) seq: u64,
    /// The `{"slot","parent","root","commitment"?,"abandoned"?}` JSON, serialised once for every
    /// subscriber.
    pub(super) result: String,
    /// What the event says of the root.
    pub(super) says: Said,
    /// What was said of the same root before (`Said::Unknown` for a new root).
    pub(super) before: Said,
}

/// What the feed has said of a root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Said {
    /// Announced without a level (a directory without a journal), or not announced yet.
    Unknown,
    /// Announced at this level.
    At(Level),
    /// Announced as abandoned.
    Abandoned,
}

impl RootEvent {
    /// Whether a subscription asking for roots at `level` (every event when `None`) receives
    /// this one: a root once, when it reaches the level, and its abandonment if it was sent.
    pub(super) fn due(&self, level: Option<Level>) -> bool {
        let Some(want) = level else { return true };
        let reached = |s: Said| matches!(s, Said::At(l) if l >= want);
        match self.says {
            // Without a journal the files are at their writer's level, confirmed or finalized;
            // only `finalized` cannot be promised.
            Said::Unknown => want <= Level::Confirmed,
            Said::At(_) => reached(self.says) && !reached(self.before),
            Said::Abandoned => reached(self.before),
        }
    }
}

/// What the root feed has said of each served slot, so that each new root, each level it
/// reaches and its abandonment are announced once.
#[derive(Debug, Default)]
pub(super) struct Announcer {
    /// The newest slot announced from a directory without a journal: there the feed only moves
    /// forward, as it always did.
    last: Option<u64>,
    said: BTreeMap<u64, (SlotInfo, Said)>,
}

impl Announcer {
    /// Takes what is served now as already said: subscribers only hear of changes.
    pub(super) fn seed(view: &View, served: &[SlotInfo]) -> Self {
        let said = served.iter().map(|i| (i.slot, (*i, said_of(view.served(i))))).collect();
        Self { last: served.last().map(|i| i.slot), said }
    }

    /// The events of one refresh: `(root, what is said now, what was said before)`, in slot order.
    pub(super) fn events(&mut self, view: &View, r: &Refreshed) -> Vec<(SlotInfo, Said, Said)> {
        let mut out = Vec::new();
        if !view.journal() {
            for info in &r.fresh {
                // Only forward: a slot republished below the newest announced one is not news.
                if self.last.is_some_and(|l| info.slot <= l) {
                    continue;
                }
                self.last = Some(info.slot);
                self.said.insert(info.slot, (*info, Said::Unknown));
                out.push((*info, Said::Unknown, Said::Unknown));
            }
            if let Some(served) = &r.served {
                let oldest = served.first().map_or(u64::MAX, |i| i.slot);
                self.said.retain(|slot, _| *slot >= oldest);
            }
            return out;
        }
        let Some(served) = &r.served else { return out };
        let mut said = BTreeMap::new();
        for info in served {
            let now = said_of(view.served(info));
            let before = self.said.remove(&info.slot);
            match before {
                // Another file of the slot: its bank was frozen again, so the old one was dropped.
                Some((old, b)) if old.seq != info.seq => {
                    if matches!(b, Said::At(_)) {
                        out.push((old, Said::Abandoned, b));
                    }
                    if matches!(now, Said::At(_)) {
                        out.push((*info, now, Said::Unknown));
                    }
                }
                None | Some((_, Said::Abandoned)) if matches!(now, Said::At(_)) => {
                    out.push((*info, now, Said::Unknown))
                }
                Some((_, Said::At(b))) => match now {
                    Said::At(n) if n > b => out.push((*info, now, Said::At(b))),
                    Said::Abandoned => out.push((*info, now, Said::At(b))),
                    _ => {}
                },
                _ => {}
            }
            said.insert(info.slot, (*info, now));
        }
        // Announced roots no longer served: pruned, or the writer already deleted the abandoned
        // bank's file. Only the latter is news.
        for (slot, (info, b)) in std::mem::take(&mut self.said) {
            if matches!(b, Said::At(_)) && view.abandoned(slot) {
                out.push((info, Said::Abandoned, b));
            }
        }
        self.said = said;
        self.last = served.last().map(|i| i.slot).max(self.last);
        out.sort_by_key(|(info, _, _)| info.slot);
        out
    }
}

fn said_of(s: Served) -> Said {
    match s {
        Served::At(l) => Said::At(l),
        Served::Unknown => Said::Unknown,
        Served::Abandoned | Served::Stale { .. } => Said::Abandoned,
    }
}
