//! The root record feed (`docs/SPEC.md` §9): the records of the directory's record log, in log
//! order, as `getRootRecord`, `getRootRecords` and `recordSubscribe` serve them.
//!
//! The poller appends what [`RecordLogReader::refresh`](aldb_snapshot::records::RecordLogReader)
//! returns; every record gets a position (`seq`) in the feed and its §9.5 JSON document is
//! encoded once. A subscription is a cursor into the feed: the backlog and the live records are
//! the same sequence, so a subscriber can neither miss one nor get one twice, whatever the timing
//! of the poller. The newest position is published on a [`watch`] channel, which wakes the
//! connections with record subscriptions.
//!
//! The feed keeps the newest `keep` records in memory (the log's segments hold far more, and
//! are deleted whole by the producer); older ones are "pruned" as far as clients are concerned.
//!
//! Damage in the log does not stop the feed: the reader skips damaged spans and reports them,
//! the records after them are served, and a slot between the intact records around a span
//! answers "record log damaged" (-32010) instead of "no record". Subscribers get the intact
//! records in log order with no gap marker: a record whose parent record is missing shows the
//! gap (its `parent` link names a slot the subscriber never received).

use std::collections::VecDeque;
use std::sync::{Arc, PoisonError, RwLock};

use aldb_snapshot::records::{Damage, LoggedRecord};
use aldb_verify::record_json::attested_record_to_json_value;
use serde_json::json;
use tokio::sync::watch;

use crate::rpc::{codes, RpcError};

/// Records kept in memory by default: one full log segment, about seven hours of mainnet slots.
pub const DEFAULT_RECORD_KEEP: usize = 65_536;

/// One record of the feed.
#[derive(Debug)]
pub struct FeedEntry {
    /// The record's slot.
    pub slot: u64,
    /// Its §9.5 JSON document, with attestations.
    pub json: Arc<str>,
}

#[derive(Debug, Default)]
struct Store {
    /// `seq` of `entries[0]`.
    base: u64,
    /// Strictly increasing slots.
    entries: VecDeque<Arc<FeedEntry>>,
    /// Damaged spans of the log, as the slots of the intact records around them (exclusive; `None`:
    /// unbounded), oldest first; an open upper bound is closed by the next record pushed.
    damaged: VecDeque<(Option<u64>, Option<u64>)>,
}

impl Store {
    /// Once records were pruned, drops damaged spans whose lower record is gone: those slots
    /// answer "pruned".
    fn forget_old_damage(&mut self) {
        if let (true, Some(oldest)) = (self.base > 0, self.oldest()) {
            self.damaged.retain(|(after, _)| after.is_some_and(|a| a >= oldest));
        }
    }

    fn head(&self) -> u64 {
        self.base + self.entries.len() as u64
    }

    fn oldest(&self) -> Option<u64> {
        self.entries.front().map(|e| e.slot)
    }

    fn newest(&self) -> Option<u64> {
        self.entries.back().map(|e| e.slot)
    }

    /// The damaged span around `slot`, if any.
    fn damaged_around(&self, slot: u64) -> Option<(Option<u64>, Option<u64>)> {
        self.damaged.iter().copied().find(|(after, before)| after.is_none_or(|a| a < slot) && before.is_none_or(|b| slot < b))
    }

    /// Index of the first entry with a slot at or above `slot`.
    fn first_at_or_after(&self, slot: u64) -> usize {
        self.entries.partition_point(|e| e.slot < slot)
    }
}

/// Why a record query has no answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordQueryError {
    /// No record has been published yet (no log, or an empty one).
    NothingPublished,
    /// The slot is older than the oldest kept record.
    Pruned {
        /// The slot asked for.
        slot: u64,
        /// Oldest kept record slot.
        oldest: u64,
        /// Newest record slot.
        newest: u64,
    },
    /// The slot is newer than the newest record.
    NotYetCommitted {
        /// The slot asked for.
        slot: u64,
        /// Oldest kept record slot.
        oldest: u64,
        /// Newest record slot.
        newest: u64,
    },
    /// The slot lies between the intact records around a damaged span of the record log: its
    /// record may have been lost.
    Damaged {
        /// The slot asked for.
        slot: u64,
        /// The last intact record's slot before the damage, if any.
        after: Option<u64>,
        /// The first intact record's slot after it, if one has been read.
        before: Option<u64>,
    },
    /// The slot is in the kept range but has no record (skipped, or on another fork).
    NoRecord {
        /// The slot asked for.
        slot: u64,
        /// Oldest kept record slot.
        oldest: u64,
        /// Newest record slot.
        newest: u64,
    },
}

impl RecordQueryError {
    /// The JSON-RPC error: the same codes as the slot queries, with the record range as data.
    pub fn to_rpc(self) -> RpcError {
        let data = |slot: u64, oldest: u64, newest: u64| json!({"slot": slot, "oldestSlot": oldest, "newestSlot": newest});
        match self {
            Self::NothingPublished => RpcError::new(codes::NOTHING_PUBLISHED, "no root record has been published yet"),
            Self::Pruned { slot, oldest, newest } => {
                RpcError::with_data(codes::SLOT_PRUNED, "slot pruned: older than the oldest kept root record", data(slot, oldest, newest))
            }
            Self::NotYetCommitted { slot, oldest, newest } => RpcError::with_data(
                codes::SLOT_NOT_COMMITTED,
                "slot not committed yet: newer than the newest root record",
                data(slot, oldest, newest),
            ),
            Self::Damaged { slot, after, before } => RpcError::with_data(
                codes::RECORD_CORRUPT,
                format!("record log damaged around slot {slot}"),
                json!({"slot": slot, "previousRecordSlot": after, "nextRecordSlot": before}),
            ),
            Self::NoRecord { slot, oldest, newest } => RpcError::with_data(
                codes::SLOT_NO_SNAPSHOT,
                "slot has no root record (skipped, or not on this validator's fork)",
                data(slot, oldest, newest),
            ),
        }
    }
}

/// Where a new subscription starts reading the feed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cursor {
    /// The first position it receives (records below `from_slot` are skipped).
    pub next: u64,
    /// The feed's head when it subscribed: positions from here on are live, earlier ones
    /// backlog.
    pub live_start: u64,
}

/// What [`RecordFeed::entry_at`] found.
#[derive(Debug)]
pub enum At {
    /// The record at that position.
    Entry(Arc<FeedEntry>),
    /// Nothing there yet.
    NotYet,
    /// Pruned from memory before it was read.
    Gone,
}

/// The records Hyades serves, shared by the poller, the RPC handler and the connections.
#[derive(Debug)]
pub struct RecordFeed {
    store: RwLock<Store>,
    head: watch::Sender<u64>,
    keep: usize,
}

impl Default for RecordFeed {
    fn default() -> Self {
        Self::new(DEFAULT_RECORD_KEEP)
    }
}

impl RecordFeed {
    /// An empty feed keeping the newest `keep` records (at least one).
    pub fn new(keep: usize) -> Self {
        Self { store: RwLock::new(Store::default()), head: watch::Sender::new(0), keep: keep.max(1) }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Store> {
        // The store is consistent after every write (no code panics with the lock held).
        self.store.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Appends newly logged records, in log order, and wakes subscribers. A record at or below
    /// the newest slot already held is ignored (the producer never logs one; a damaged log
    /// might). Returns how many were new (whether or not they were recent enough to keep).
    pub fn push(&self, records: &[LoggedRecord]) -> usize {
        if records.is_empty() {
            return 0;
        }
        // Encode outside the lock, and only what can be kept (a first read of a long log
        // returns far more).
        let skip = records.len().saturating_sub(self.keep);
        let encoded: Vec<Arc<FeedEntry>> = records[skip..]
            .iter()
            .map(|r| {
                let json = attested_record_to_json_value(&r.record, &r.attestations).to_string();
                Arc::new(FeedEntry { slot: r.record.slot, json: json.into() })
            })
            .collect();
        let mut store = self.store.write().unwrap_or_else(PoisonError::into_inner);
        // The first record read after a damaged span still open bounds it.
        let first = records[0].record.slot;
        for d in store.damaged.iter_mut().filter(|d| d.1.is_none()) {
            d.1 = Some(first);
        }
        // Those skipped were new too, only already too old to keep.
        let mut added = skip;
        let mut stale = 0usize;
        for e in encoded {
            if store.newest().is_some_and(|n| e.slot <= n) {
                stale += 1;
                continue;
            }
            store.entries.push_back(e);
            added += 1;
        }
        if stale > 0 {
            // A copied or misplaced segment; one line, however many records it holds.
            log::warn!("record log: {stale} records not newer than the newest record; ignored");
        }
        while store.entries.len() > self.keep {
            store.entries.pop_front();
            store.base += 1;
        }
        store.forget_old_damage();
        let head = store.head();
        drop(store);
        self.head.send_replace(head);
        added
    }

    /// Notes damaged spans the reader found, after [`push`](Self::push)ing the records read with
    /// them (a span whose `before_slot` is `None` lies after all of those). Spans in a segment
    /// header hold no record and are ignored.
    pub fn note_damage(&self, damage: &[Damage]) {
        let spans: Vec<_> = damage.iter().filter(|d| !d.in_header()).map(|d| (d.after_slot, d.before_slot)).collect();
        if spans.is_empty() {
            return;
        }
        let mut store = self.store.write().unwrap_or_else(PoisonError::into_inner);
        store.damaged.extend(spans);
        // At most one span lies between two kept records that follow each other; more can only
        // come from copies reordering the log.
        while store.damaged.len() > self.keep + 1 {
            store.damaged.pop_front();
        }
        store.forget_old_damage();
    }

    /// The oldest and newest record slots held.
    pub fn range(&self) -> Option<(u64, u64)> {
        let s = self.read();
        Some((s.oldest()?, s.newest()?))
    }

    /// The record of `slot` and the newest record slot.
    pub fn get(&self, slot: u64) -> Result<(u64, Arc<FeedEntry>), RecordQueryError> {
        let s = self.read();
        let found = s.entries.get(s.first_at_or_after(slot)).filter(|e| e.slot == slot);
        if let (Some(e), Some(newest)) = (found, s.newest()) {
            return Ok((newest, e.clone()));
        }
        if let Some((after, before)) = s.damaged_around(slot) {
            return Err(RecordQueryError::Damaged { slot, after, before });
        }
        let (Some(oldest), Some(newest)) = (s.oldest(), s.newest()) else {
            return Err(RecordQueryError::NothingPublished);
        };
        if slot > newest {
            return Err(RecordQueryError::NotYetCommitted { slot, oldest, newest });
        }
        if slot < oldest {
            return Err(RecordQueryError::Pruned { slot, oldest, newest });
        }
        Err(RecordQueryError::NoRecord { slot, oldest, newest })
    }

    /// The newest record.
    pub fn latest(&self) -> Option<Arc<FeedEntry>> {
        self.read().entries.back().cloned()
    }

    /// Records with `start <= slot <= end`, in slot order, and the newest record slot.
    pub fn slots(&self, start: u64, end: u64) -> Result<(u64, Vec<Arc<FeedEntry>>), RecordQueryError> {
        let s = self.read();
        let newest = s.newest().ok_or(RecordQueryError::NothingPublished)?;
        let out = s.entries.range(s.first_at_or_after(start)..).take_while(|e| e.slot <= end).cloned().collect();
        Ok((newest, out))
    }

    /// Where a subscription asking for records from `from_slot` (only new ones when `None`)
    /// starts. Fails when `from_slot` is older than the oldest kept record.
    pub fn cursor(&self, from_slot: Option<u64>) -> Result<Cursor, RecordQueryError> {
        let s = self.read();
        let live_start = s.head();
        let Some(from) = from_slot else {
            return Ok(Cursor { next: live_start, live_start });
        };
        if let (Some(oldest), Some(newest)) = (s.oldest(), s.newest())
            && from < oldest
        {
            return Err(RecordQueryError::Pruned { slot: from, oldest, newest });
        }
        Ok(Cursor { next: s.base + s.first_at_or_after(from) as u64, live_start })
    }

    /// The record at feed position `seq`.
    pub fn entry_at(&self, seq: u64) -> At {
        let s = self.read();
        if seq < s.base {
            return At::Gone;
        }
        // The difference is below the entry count, which fits in usize.
        match s.entries.get((seq - s.base) as usize) {
            Some(e) => At::Entry(e.clone()),
            None => At::NotYet,
        }
    }

    /// The position the next record will get.
    pub fn head(&self) -> u64 {
        *self.head.borrow()
    }

    /// A receiver woken whenever records are appended; its value is [`head`](Self::head).
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.head.subscribe()
    }

}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use aldb_verify::record::{Commitment, RootRecord};

    fn rec(slot: u64) -> LoggedRecord {
        let record = RootRecord {
            genesis_hash: [1; 32],
            slot,
            parent: None,
            commitment: Commitment::Finalized,
            state_root: [slot as u8; 32],
            block: None,
        };
        LoggedRecord { record_hash: record.hash(), record, attestations: Vec::new() }
    }

    #[test]
    fn queries_cursors_and_pruning() {
        let feed = RecordFeed::new(4);
        assert_eq!(feed.get(1).err(), Some(RecordQueryError::NothingPublished));
        assert_eq!(feed.cursor(Some(5)), Ok(Cursor { next: 0, live_start: 0 }));
        assert_eq!(feed.push(&[rec(1), rec(2), rec(4)]), 3);
        assert_eq!(feed.push(&[rec(4)]), 0, "not newer: ignored");
        assert_eq!(feed.get(2).map(|(n, e)| (n, e.slot)), Ok((4, 2)));
        assert!(matches!(feed.get(3), Err(RecordQueryError::NoRecord { slot: 3, .. })));
        assert!(matches!(feed.get(5), Err(RecordQueryError::NotYetCommitted { slot: 5, .. })));
        assert_eq!(feed.cursor(Some(3)), Ok(Cursor { next: 2, live_start: 3 }));
        feed.push(&[rec(5), rec(6)]);
        assert!(matches!(feed.get(1), Err(RecordQueryError::Pruned { slot: 1, oldest: 2, newest: 6 })));
        assert!(matches!(feed.cursor(Some(1)), Err(RecordQueryError::Pruned { .. })));
        assert!(matches!(feed.entry_at(0), At::Gone));
        assert!(matches!(feed.entry_at(4), At::Entry(e) if e.slot == 6));
        assert!(matches!(feed.entry_at(5), At::NotYet));
        let (newest, got) = feed.slots(3, 5).unwrap();
        assert_eq!((newest, got.iter().map(|e| e.slot).collect::<Vec<_>>()), (6, vec![4, 5]));
        assert_eq!(feed.head(), 5);
        // From a slot not logged yet: nothing of the backlog, only later records.
        assert_eq!(feed.cursor(Some(100)), Ok(Cursor { next: 5, live_start: 5 }));
        // A batch longer than what is kept: only its newest records.
        assert_eq!(feed.push(&(10..20).map(rec).collect::<Vec<_>>()), 10);
        assert_eq!(feed.range(), Some((16, 19)));
    }

    fn damage(after: Option<u64>, before: Option<u64>, bytes: std::ops::Range<u64>) -> Damage {
        Damage { segment: "records-00000000000000000000.log".into(), bytes, after_slot: after, before_slot: before }
    }

    #[test]
    fn slots_around_damage_answer_damaged_until_pruned() {
        let feed = RecordFeed::new(4);
        // A damaged log with nothing intact yet: every slot may have lost its record.
        feed.note_damage(&[damage(None, None, 16..300)]);
        assert_eq!(feed.get(7).err(), Some(RecordQueryError::Damaged { slot: 7, after: None, before: None }));
        feed.push(&[rec(2), rec(3)]);
        feed.note_damage(&[damage(Some(3), None, 600..900), damage(None, None, 0..16)]);
        assert_eq!(feed.get(1).err(), Some(RecordQueryError::Damaged { slot: 1, after: None, before: Some(2) }));
        assert_eq!(feed.get(3).map(|(_, e)| e.slot), Ok(3));
        // Open above the newest record: closed by the next record pushed.
        assert_eq!(feed.get(9).err(), Some(RecordQueryError::Damaged { slot: 9, after: Some(3), before: None }));
        feed.push(&[rec(6)]);
        assert_eq!(feed.get(5).err(), Some(RecordQueryError::Damaged { slot: 5, after: Some(3), before: Some(6) }));
        assert!(matches!(feed.get(9), Err(RecordQueryError::NotYetCommitted { slot: 9, .. })));
        let e = feed.get(4).unwrap_err().to_rpc();
        assert_eq!(e.code, codes::RECORD_CORRUPT);
        assert_eq!(e.message, "record log damaged around slot 4");
        assert_eq!(e.data, Some(json!({"slot": 4, "previousRecordSlot": 3, "nextRecordSlot": 6})));
        // Once the records around a span are pruned, its slots are pruned too.
        feed.push(&[rec(7), rec(8), rec(9)]);
        assert_eq!(feed.range(), Some((6, 9)));
        assert!(matches!(feed.get(4), Err(RecordQueryError::Pruned { slot: 4, .. })));
        assert_eq!(feed.read().damaged.len(), 0);
    }
}
