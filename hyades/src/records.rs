//! The root record feed (`docs/SPEC.md` §9): the records of the directory's record log, in log
//! order, as `getRootRecord`, `getRootRecords` and `recordSubscribe` serve them.
//!
//! A slot can have two records, one per commitment level (a producer committing at `confirmed`
//! logs the `finalized` one once the slot is rooted), so the two levels interleave in the log.
//! Each level is indexed by slot on its own; queries name a level or take the strongest held.
//!
//! The poller appends what [`RecordLogReader::refresh`](aldb_format::records::RecordLogReader)
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
//! the records after them are served, and a slot between the intact records of its level around
//! a span answers "record log damaged" (-32010) instead of "no record". Subscribers get the intact
//! records in log order with no gap marker: a record whose parent record is missing shows the
//! gap (its `parent` link names a slot the subscriber never received).
//!
//! A span is served again once its segment is: a replica fetches a damaged copy of a segment again
//! and replaces it when the bucket's bytes verify, its reader reads the segment again, and
//! [`RecordFeed::push`] takes the records that lie inside a damaged span of their level into that
//! level in slot order, at new positions (subscribers get them then, after newer records), and
//! [`RecordFeed::forget_damage_in`] drops the spans found in the replaced bytes.

use std::collections::VecDeque;
use std::sync::{Arc, PoisonError, RwLock};

use aldb_format::records::{Damage, LoggedRecord};
use aldb_verify::Commitment;
use aldb_verify::record_json::attested_record_to_json_value;
use serde_json::json;
use tokio::sync::watch;

use crate::protocol::{RpcError, codes};

/// Records kept in memory by default: one full log segment, about seven hours of mainnet slots
/// with one record per slot, half that with two.
pub const DEFAULT_RECORD_KEEP: usize = 65_536;

/// One record of the feed.
#[derive(Debug)]
pub struct FeedEntry {
    /// The record's slot.
    pub slot: u64,
    /// Its commitment level.
    pub commitment: Commitment,
    /// Its position in the feed.
    pub seq: u64,
    /// Its §9.5 JSON document, with attestations.
    pub json: Arc<str>,
}

/// The levels, in the order a slot's records are listed.
const LEVELS: [Commitment; 2] = [Commitment::Confirmed, Commitment::Finalized];

fn level_index(c: Commitment) -> usize {
    match c {
        Commitment::Finalized => 1,
        // `Commitment` is non-exhaustive; anything else is the weaker level.
        _ => 0,
    }
}

/// A damaged span of the log, as the slots of one level's intact records around it (exclusive;
/// `None`: unbounded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    after: Option<u64>,
    before: Option<u64>,
    /// The first slot of the segment it was found in (by its file name).
    segment: Option<u64>,
}

impl Span {
    fn contains(&self, slot: u64) -> bool {
        self.after.is_none_or(|a| a < slot) && self.before.is_none_or(|b| slot < b)
    }
}

/// One commitment level's records, by slot.
#[derive(Debug, Default)]
struct Level {
    /// Strictly increasing slots (and feed positions, unless `unordered`).
    entries: VecDeque<Arc<FeedEntry>>,
    /// A record of a repaired span was taken in among the others: positions no longer follow
    /// slots.
    unordered: bool,
    /// Damaged spans of the log, oldest first; an open upper bound is closed by the next record
    /// of the level pushed.
    damaged: VecDeque<Span>,
}

impl Level {
    fn oldest(&self) -> Option<u64> {
        self.entries.front().map(|e| e.slot)
    }

    fn newest(&self) -> Option<u64> {
        self.entries.back().map(|e| e.slot)
    }

    /// Index of the first entry with a slot at or above `slot`.
    fn first_at_or_after(&self, slot: u64) -> usize {
        self.entries.partition_point(|e| e.slot < slot)
    }

    fn at(&self, slot: u64) -> Option<&Arc<FeedEntry>> {
        self.entries.get(self.first_at_or_after(slot)).filter(|e| e.slot == slot)
    }

    /// The damaged span around `slot`, if any.
    fn damaged_around(&self, slot: u64) -> Option<(Option<u64>, Option<u64>)> {
        self.damaged.iter().find(|d| d.contains(slot)).map(|d| (d.after, d.before))
    }

    /// The lowest position among the records at or above `slot`.
    fn first_seq_from(&self, slot: u64) -> Option<u64> {
        let i = self.first_at_or_after(slot);
        if self.unordered { self.entries.range(i..).map(|e| e.seq).min() } else { self.entries.get(i).map(|e| e.seq) }
    }

    /// The slots of the level's records logged last before position `at` and first from it.
    fn around_seq(&self, at: u64) -> (Option<u64>, Option<u64>) {
        if self.unordered {
            let after = self.entries.iter().filter(|e| e.seq < at).map(|e| e.slot).max();
            let before = self.entries.iter().filter(|e| e.seq >= at).map(|e| e.slot).min();
            return (after, before);
        }
        let split = self.entries.partition_point(|e| e.seq < at);
        let after = split.checked_sub(1).and_then(|i| self.entries.get(i)).map(|e| e.slot);
        (after, self.entries.get(split).map(|e| e.slot))
    }

    /// The level's answer for `slot`.
    fn get(&self, slot: u64) -> Result<Arc<FeedEntry>, RecordQueryError> {
        if let Some(e) = self.at(slot) {
            return Ok(e.clone());
        }
        if let Some((after, before)) = self.damaged_around(slot) {
            return Err(RecordQueryError::Damaged { slot, after, before });
        }
        let (Some(oldest), Some(newest)) = (self.oldest(), self.newest()) else {
            return Err(RecordQueryError::NothingPublished);
        };
        Err(range_error(slot, oldest, newest))
    }
}

/// The answer for a slot with no record in a range that holds records.
fn range_error(slot: u64, oldest: u64, newest: u64) -> RecordQueryError {
    if slot > newest {
        RecordQueryError::NotYetCommitted { slot, oldest, newest }
    } else if slot < oldest {
        RecordQueryError::Pruned { slot, oldest, newest }
    } else {
        RecordQueryError::NoRecord { slot, oldest, newest }
    }
}

#[derive(Debug, Default)]
struct Store {
    /// `seq` of `entries[0]`.
    base: u64,
    /// Every record held, in log order.
    entries: VecDeque<Arc<FeedEntry>>,
    /// The same records by level.
    levels: [Level; 2],
    /// Positions of the records the last push added: where damage noted after it is placed.
    last_push: std::ops::Range<u64>,
}

impl Store {
    fn head(&self) -> u64 {
        self.base + self.entries.len() as u64
    }

    fn level(&self, c: Commitment) -> &Level {
        &self.levels[level_index(c)]
    }

    fn oldest(&self) -> Option<u64> {
        self.levels.iter().filter_map(Level::oldest).min()
    }

    fn newest(&self) -> Option<u64> {
        self.levels.iter().filter_map(Level::newest).max()
    }

    /// Once records were pruned, drops damaged spans whose lower record is gone: those slots
    /// answer "pruned".
    fn forget_old_damage(&mut self) {
        if self.base == 0 {
            return;
        }
        for l in &mut self.levels {
            match l.oldest() {
                Some(oldest) => l.damaged.retain(|d| d.after.is_some_and(|a| a >= oldest)),
                // A level with no record kept while others have some: ignored (see `get`).
                None => l.damaged.clear(),
            }
        }
    }

    /// The entry at feed position `seq`.
    fn at_seq(&self, seq: u64) -> Option<&Arc<FeedEntry>> {
        // The difference is below the entry count, which fits in usize.
        seq.checked_sub(self.base).and_then(|i| self.entries.get(i as usize))
    }

    /// Where in the log a damaged span lies: the position of the first record after it. The
    /// span's `before_slot` is read in the last push (right after `after_slot`'s record, when
    /// that is known); a span after everything read lies at the head.
    fn damage_position(&self, d: &Damage) -> u64 {
        let Some(before) = d.before_slot else { return self.head() };
        let batch = self.last_push.clone();
        let found = batch.clone().find(|&seq| {
            self.at_seq(seq).is_some_and(|e| e.slot == before)
                && d.after_slot
                    .is_none_or(|a| seq.checked_sub(1).and_then(|p| self.at_seq(p)).is_none_or(|p| p.slot == a))
        });
        found
            .or_else(|| batch.clone().find(|&seq| self.at_seq(seq).is_some_and(|e| e.slot == before)))
            .unwrap_or(batch.start)
    }
}

/// Why a record query has no answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
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
        let data =
            |slot: u64, oldest: u64, newest: u64| json!({"slot": slot, "oldestSlot": oldest, "newestSlot": newest});
        match self {
            Self::NothingPublished => RpcError::new(codes::NOTHING_PUBLISHED, "no root record has been published yet"),
            Self::Pruned { slot, oldest, newest } => RpcError::with_data(
                codes::SLOT_PRUNED,
                "slot pruned: older than the oldest kept root record",
                data(slot, oldest, newest),
            ),
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
    /// the newest slot already held at its level is ignored (the producer never logs one; a
    /// damaged log might), unless it lies inside a damaged span of its level and is newer than
    /// the oldest held: read again from a repaired segment, it is taken into its level in slot
    /// order, at a new position. A record held already is ignored silently (a segment read
    /// again). Returns how many were new (whether or not they were recent enough to keep).
    pub fn push(&self, records: &[LoggedRecord]) -> usize {
        if records.is_empty() {
            return 0;
        }
        // Encode outside the lock, and only what can be kept (a first read of a long log
        // returns far more).
        let skip = records.len().saturating_sub(self.keep);
        let encoded: Vec<(u64, Commitment, Arc<str>)> = records[skip..]
            .iter()
            .map(|r| {
                let json = attested_record_to_json_value(&r.record, &r.attestations).to_string();
                (r.record.slot, r.record.commitment, json.into())
            })
            .collect();
        let mut store = self.store.write().unwrap_or_else(PoisonError::into_inner);
        // The first record of a level read after a damaged span still open bounds it (a
        // segment read again brings older ones first).
        for c in LEVELS {
            let level = &mut store.levels[level_index(c)];
            for d in level.damaged.iter_mut().filter(|d| d.before.is_none()) {
                let first =
                    records.iter().find(|r| r.record.commitment == c && d.after.is_none_or(|a| a < r.record.slot));
                d.before = first.map(|r| r.record.slot);
            }
        }
        // Those skipped were new too, only already too old to keep.
        let mut added = skip;
        let mut stale = 0usize;
        let first_seq = store.head();
        for (slot, commitment, json) in encoded {
            let li = level_index(commitment);
            let level = &store.levels[li];
            if level.newest().is_some_and(|n| slot <= n) {
                if level.at(slot).is_some_and(|e| e.json == json) {
                    continue;
                }
                let repaired = level.oldest().is_some_and(|o| o < slot) && level.damaged_around(slot).is_some();
                if !repaired || level.at(slot).is_some() {
                    stale += 1;
                    continue;
                }
                let e = Arc::new(FeedEntry { slot, commitment, seq: store.head(), json });
                let level = &mut store.levels[li];
                let i = level.first_at_or_after(slot);
                level.entries.insert(i, e.clone());
                level.unordered = true;
                store.entries.push_back(e);
                added += 1;
                continue;
            }
            let e = Arc::new(FeedEntry { slot, commitment, seq: store.head(), json });
            store.levels[li].entries.push_back(e.clone());
            store.entries.push_back(e);
            added += 1;
        }
        store.last_push = first_seq..store.head();
        if stale > 0 {
            // A copied or misplaced segment; one line, however many records it holds.
            log::warn!("record log: {stale} records not newer than the newest record of their level; ignored");
        }
        while store.entries.len() > self.keep {
            if let Some(e) = store.entries.pop_front() {
                let level = &mut store.levels[level_index(e.commitment)];
                // Log order within a level is slot order, so the oldest of the feed is its
                // level's oldest, unless records of a repaired span were taken in since.
                let i = if level.unordered { level.first_at_or_after(e.slot) } else { 0 };
                if level.entries.get(i).is_some_and(|l| l.seq == e.seq) {
                    level.entries.remove(i);
                }
                // Those taken in below it go with it: the level stays a contiguous window of
                // slots (they stay in the feed until their positions are pruned).
                while level.entries.front().is_some_and(|l| l.slot < e.slot) {
                    level.entries.pop_front();
                }
            }
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
    /// header hold no record and are ignored. Each level's span runs between that level's
    /// intact records around the damage.
    pub fn note_damage(&self, damage: &[Damage]) {
        let damage: Vec<&Damage> = damage.iter().filter(|d| !d.in_header()).collect();
        if damage.is_empty() {
            return;
        }
        let mut store = self.store.write().unwrap_or_else(PoisonError::into_inner);
        for d in damage {
            let at = store.damage_position(d);
            let any = !store.entries.is_empty();
            for li in 0..LEVELS.len() {
                let level = &store.levels[li];
                if any && level.entries.is_empty() {
                    // A level the producer does not log (it commits at `finalized` only): its
                    // slots are "no record", not "damaged".
                    continue;
                }
                let (after, before) = level.around_seq(at);
                let segment =
                    d.segment.file_name().and_then(|n| n.to_str()).and_then(aldb_format::records::segment_first_slot);
                let level = &mut store.levels[li];
                level.damaged.push_back(Span { after, before, segment });
                // At most one span lies between two kept records that follow each other; more
                // can only come from copies reordering the log.
                while level.damaged.len() > self.keep + 1 {
                    level.damaged.pop_front();
                }
            }
        }
        store.forget_old_damage();
    }

    /// Drops the damaged spans found in the segments starting at `segments`, after their records
    /// were read again and [`push`](Self::push)ed: their files were replaced by bytes verified
    /// against the manifest, so what the old bytes lost is served now, and a slot with no record
    /// there has none.
    pub fn forget_damage_in(&self, segments: &[u64]) {
        if segments.is_empty() {
            return;
        }
        let mut store = self.store.write().unwrap_or_else(PoisonError::into_inner);
        for l in &mut store.levels {
            l.damaged.retain(|d| d.segment.is_none_or(|s| !segments.contains(&s)));
        }
    }

    /// The oldest and newest record slots held, over both levels.
    pub fn range(&self) -> Option<(u64, u64)> {
        let s = self.read();
        Some((s.oldest()?, s.newest()?))
    }

    /// The record of `slot` at `level` (`None`: the strongest level held for the slot) and the
    /// newest record slot (of that level, or of any).
    pub fn get(&self, slot: u64, level: Option<Commitment>) -> Result<(u64, Arc<FeedEntry>), RecordQueryError> {
        let s = self.read();
        if let Some(c) = level {
            let l = s.level(c);
            let e = l.get(slot)?;
            return Ok((l.newest().unwrap_or(slot), e));
        }
        let newest = s.newest();
        let mut damaged = None;
        for c in LEVELS.iter().rev() {
            let level = s.level(*c);
            match level.get(slot) {
                Ok(e) => return Ok((newest.unwrap_or(slot), e)),
                // A level with no record at all (one the producer does not log) only counts
                // while no level has one.
                Err(e @ RecordQueryError::Damaged { .. })
                    if damaged.is_none() && (newest.is_none() || !level.entries.is_empty()) =>
                {
                    damaged = Some(e);
                }
                Err(_) => {}
            }
        }
        if let Some(d) = damaged {
            return Err(d);
        }
        let (Some(oldest), Some(newest)) = (s.oldest(), newest) else {
            return Err(RecordQueryError::NothingPublished);
        };
        Err(range_error(slot, oldest, newest))
    }

    /// The newest record at `level`, or of any level (the strongest at the newest slot).
    pub fn latest(&self, level: Option<Commitment>) -> Option<Arc<FeedEntry>> {
        let s = self.read();
        match level {
            Some(c) => s.level(c).entries.back().cloned(),
            None => LEVELS.iter().rev().filter_map(|c| s.level(*c).entries.back()).max_by_key(|e| e.slot).cloned(),
        }
    }

    /// Records with `start <= slot <= end` at `level` (`None`: both, a slot's `confirmed` record
    /// before its `finalized` one), in slot order, and the newest record slot (of that level, or
    /// of any).
    pub fn slots(
        &self,
        start: u64,
        end: u64,
        level: Option<Commitment>,
    ) -> Result<(u64, Vec<Arc<FeedEntry>>), RecordQueryError> {
        let s = self.read();
        let take = |l: &Level| -> Vec<Arc<FeedEntry>> {
            l.entries.range(l.first_at_or_after(start)..).take_while(|e| e.slot <= end).cloned().collect()
        };
        if let Some(c) = level {
            let l = s.level(c);
            let newest = l.newest().ok_or(RecordQueryError::NothingPublished)?;
            return Ok((newest, take(l)));
        }
        let newest = s.newest().ok_or(RecordQueryError::NothingPublished)?;
        let mut out: Vec<Arc<FeedEntry>> = LEVELS.iter().flat_map(|c| take(s.level(*c))).collect();
        // Stable: within a slot, the confirmed record (listed first) stays first.
        out.sort_by_key(|e| e.slot);
        Ok((newest, out))
    }

    /// Where a subscription asking for records from `from_slot` (only new ones when `None`) at
    /// `level` (`None`: both) starts. Fails when `from_slot` is older than the oldest kept record
    /// of a level asked for: some of its records would be missing. The subscription skips the
    /// records below `from_slot` that follow the cursor (the levels interleave in the log).
    pub fn cursor(&self, from_slot: Option<u64>, level: Option<Commitment>) -> Result<Cursor, RecordQueryError> {
        let s = self.read();
        let live_start = s.head();
        let Some(from) = from_slot else {
            return Ok(Cursor { next: live_start, live_start });
        };
        let wanted: Vec<&Level> =
            LEVELS.iter().filter(|c| level.is_none_or(|l| l == **c)).map(|c| s.level(*c)).collect();
        if let (Some(oldest), Some(newest)) = (wanted.iter().filter_map(|l| l.oldest()).max(), s.newest())
            && from < oldest
        {
            return Err(RecordQueryError::Pruned { slot: from, oldest, newest });
        }
        let next = wanted.iter().filter_map(|l| l.first_seq_from(from)).min().unwrap_or(live_start);
        Ok(Cursor { next, live_start })
    }

    /// The record at feed position `seq`.
    pub fn entry_at(&self, seq: u64) -> At {
        let s = self.read();
        if seq < s.base {
            return At::Gone;
        }
        match s.at_seq(seq) {
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
    use aldb_verify::record::RootRecord;

    fn rec(slot: u64) -> LoggedRecord {
        at(slot, Commitment::Finalized)
    }

    fn at(slot: u64, commitment: Commitment) -> LoggedRecord {
        let record = RootRecord {
            genesis_hash: [1; 32],
            slot,
            parent: None,
            commitment,
            state_root: [slot as u8; 32],
            block: None,
            bank_hash: None,
        };
        LoggedRecord { record_hash: record.hash(), record, attestations: Vec::new() }
    }

    #[test]
    fn queries_cursors_and_pruning() {
        let feed = RecordFeed::new(4);
        assert_eq!(feed.get(1, None).err(), Some(RecordQueryError::NothingPublished));
        assert_eq!(feed.cursor(Some(5), None), Ok(Cursor { next: 0, live_start: 0 }));
        assert_eq!(feed.push(&[rec(1), rec(2), rec(4)]), 3);
        assert_eq!(feed.push(&[rec(4)]), 0, "not newer: ignored");
        assert_eq!(feed.get(2, None).map(|(n, e)| (n, e.slot)), Ok((4, 2)));
        assert!(matches!(feed.get(3, None), Err(RecordQueryError::NoRecord { slot: 3, .. })));
        assert!(matches!(feed.get(5, None), Err(RecordQueryError::NotYetCommitted { slot: 5, .. })));
        assert_eq!(feed.cursor(Some(3), None), Ok(Cursor { next: 2, live_start: 3 }));
        feed.push(&[rec(5), rec(6)]);
        assert!(matches!(feed.get(1, None), Err(RecordQueryError::Pruned { slot: 1, oldest: 2, newest: 6 })));
        assert!(matches!(feed.cursor(Some(1), None), Err(RecordQueryError::Pruned { .. })));
        assert!(matches!(feed.entry_at(0), At::Gone));
        assert!(matches!(feed.entry_at(4), At::Entry(e) if e.slot == 6));
        assert!(matches!(feed.entry_at(5), At::NotYet));
        let (newest, got) = feed.slots(3, 5, None).unwrap();
        assert_eq!((newest, got.iter().map(|e| e.slot).collect::<Vec<_>>()), (6, vec![4, 5]));
        assert_eq!(feed.head(), 5);
        // From a slot not logged yet: nothing of the backlog, only later records.
        assert_eq!(feed.cursor(Some(100), None), Ok(Cursor { next: 5, live_start: 5 }));
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
        assert_eq!(feed.get(7, None).err(), Some(RecordQueryError::Damaged { slot: 7, after: None, before: None }));
        feed.push(&[rec(2), rec(3)]);
        feed.note_damage(&[damage(Some(3), None, 600..900), damage(None, None, 0..16)]);
        assert_eq!(feed.get(1, None).err(), Some(RecordQueryError::Damaged { slot: 1, after: None, before: Some(2) }));
        assert_eq!(feed.get(3, None).map(|(_, e)| e.slot), Ok(3));
        // Open above the newest record: closed by the next record pushed.
        assert_eq!(feed.get(9, None).err(), Some(RecordQueryError::Damaged { slot: 9, after: Some(3), before: None }));
        feed.push(&[rec(6)]);
        assert_eq!(
            feed.get(5, None).err(),
            Some(RecordQueryError::Damaged { slot: 5, after: Some(3), before: Some(6) })
        );
        assert!(matches!(feed.get(9, None), Err(RecordQueryError::NotYetCommitted { slot: 9, .. })));
        let e = feed.get(4, None).unwrap_err().to_rpc();
        assert_eq!(e.code, codes::RECORD_CORRUPT);
        assert_eq!(e.message, "record log damaged around slot 4");
        assert_eq!(e.data, Some(json!({"slot": 4, "previousRecordSlot": 3, "nextRecordSlot": 6})));
        // Once the records around a span are pruned, its slots are pruned too.
        feed.push(&[rec(7), rec(8), rec(9)]);
        assert_eq!(feed.range(), Some((6, 9)));
        assert!(matches!(feed.get(4, None), Err(RecordQueryError::Pruned { slot: 4, .. })));
        assert!(feed.read().levels.iter().all(|l| l.damaged.is_empty()));
    }

    #[test]
    fn a_repaired_span_is_taken_in_and_its_damage_forgotten() {
        let feed = RecordFeed::new(100);
        feed.push(&[rec(1), rec(2), rec(6), rec(7)]);
        feed.note_damage(&[damage(Some(2), Some(6), 200..400)]);
        assert!(matches!(feed.get(4, None), Err(RecordQueryError::Damaged { slot: 4, .. })));
        let live = feed.cursor(None, None).unwrap();
        // Not in a damaged span: below the newest, refused as before.
        assert_eq!(feed.push(&[rec(0)]), 0);
        // The segment read again whole once its copy was replaced: what was held is ignored, the
        // records of the span are taken in (4 was skipped by the chain), the new one appended.
        assert_eq!(feed.push(&[rec(1), rec(2), rec(3), rec(5), rec(6), rec(7), rec(8)]), 3);
        feed.forget_damage_in(&[0]);
        let got = |slot| feed.get(slot, None).map(|(_, e)| e.slot);
        assert_eq!((got(3), got(5), got(8)), (Ok(3), Ok(5), Ok(8)));
        assert!(matches!(feed.get(4, None), Err(RecordQueryError::NoRecord { slot: 4, .. })));
        let (_, listed) = feed.slots(0, 10, None).unwrap();
        assert_eq!(listed.iter().map(|e| e.slot).collect::<Vec<_>>(), [1, 2, 3, 5, 6, 7, 8]);
        // A live subscriber gets them as they came; one from slot 3 gets everything from slot 3.
        let from_live: Vec<u64> = (live.next..feed.head())
            .map(|q| match feed.entry_at(q) {
                At::Entry(e) => e.slot,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(from_live, [3, 5, 8]);
        let c = feed.cursor(Some(3), None).unwrap();
        let mut from3: Vec<u64> = (c.next..feed.head())
            .filter_map(|q| match feed.entry_at(q) {
                At::Entry(e) if e.slot >= 3 => Some(e.slot),
                _ => None,
            })
            .collect();
        from3.sort_unstable();
        assert_eq!(from3, [3, 5, 6, 7, 8]);
        // Damage found after them is placed after the newest record.
        feed.note_damage(&[damage(Some(8), None, 900..1000)]);
        assert!(matches!(feed.get(9, None), Err(RecordQueryError::Damaged { slot: 9, after: Some(8), before: None })));
    }

    #[test]
    fn records_taken_into_a_span_are_pruned_with_the_older_ones() {
        let feed = RecordFeed::new(4);
        feed.push(&[rec(1), rec(2), rec(5), rec(6)]);
        feed.note_damage(&[damage(Some(2), Some(5), 200..400)]);
        assert_eq!(feed.push(&[rec(3), rec(4)]), 2);
        feed.forget_damage_in(&[0]);
        // Positions 0 and 1 (slots 1, 2) pruned: the level keeps 3 to 6.
        assert_eq!(feed.range(), Some((3, 6)));
        feed.push(&[rec(7)]);
        // Position 2 (slot 5) pruned: 3 and 4 go with it, though their positions are newer.
        assert_eq!(feed.range(), Some((6, 7)));
        assert!(matches!(feed.get(4, None), Err(RecordQueryError::Pruned { slot: 4, .. })));
        assert!(matches!(feed.entry_at(4), At::Entry(e) if e.slot == 3), "still in the feed");
        feed.push(&[rec(8), rec(9), rec(10)]);
        assert_eq!(feed.range(), Some((7, 10)));
    }

    fn slots_of(entries: &[Arc<FeedEntry>]) -> Vec<(u64, Commitment)> {
        entries.iter().map(|e| (e.slot, e.commitment)).collect()
    }

    #[test]
    fn two_levels_interleave_and_are_queried_by_level() {
        use Commitment::{Confirmed as C, Finalized as F};
        let feed = RecordFeed::new(100);
        // A confirmed producer: each slot's finalized record comes a few slots later.
        let log = [at(1, C), at(2, C), at(3, C), at(1, F), at(5, C), at(2, F), at(3, F), at(6, C), at(5, F)];
        assert_eq!(feed.push(&log), 9, "a second level at a slot is not stale");
        assert_eq!(feed.push(&[at(2, F), at(6, C)]), 0, "the same slot and level again is");
        let got = |slot, level| feed.get(slot, level).map(|(n, e)| (n, e.slot, e.commitment));
        assert_eq!(got(2, Some(C)), Ok((6, 2, C)));
        assert_eq!(got(2, Some(F)), Ok((5, 2, F)));
        assert_eq!(got(2, None), Ok((6, 2, F)), "without a level: the strongest held");
        assert_eq!(got(6, None), Ok((6, 6, C)));
        assert!(matches!(feed.get(6, Some(F)), Err(RecordQueryError::NotYetCommitted { slot: 6, newest: 5, .. })));
        assert!(matches!(feed.get(4, None), Err(RecordQueryError::NoRecord { slot: 4, oldest: 1, newest: 6 })));
        assert!(matches!(feed.get(7, None), Err(RecordQueryError::NotYetCommitted { slot: 7, .. })));
        assert_eq!(feed.latest(None).map(|e| (e.slot, e.commitment)), Some((6, C)));
        assert_eq!(feed.latest(Some(F)).map(|e| (e.slot, e.commitment)), Some((5, F)));
        let (newest, all) = feed.slots(2, 5, None).unwrap();
        assert_eq!((newest, slots_of(&all)), (6, vec![(2, C), (2, F), (3, C), (3, F), (5, C), (5, F)]));
        let (newest, fin) = feed.slots(0, 9, Some(F)).unwrap();
        assert_eq!((newest, slots_of(&fin)), (5, vec![(1, F), (2, F), (3, F), (5, F)]));
        // A cursor from slot 3 starts at the first record at or above 3 of either level (log
        // position 2, confirmed 3); the subscription skips the lower ones that follow (1 F).
        assert_eq!(feed.cursor(Some(3), None), Ok(Cursor { next: 2, live_start: 9 }));
        assert_eq!(feed.cursor(Some(3), Some(F)), Ok(Cursor { next: 6, live_start: 9 }));
        assert_eq!(feed.cursor(Some(6), Some(F)), Ok(Cursor { next: 9, live_start: 9 }));
        assert!(matches!(feed.entry_at(3), At::Entry(e) if (e.slot, e.commitment) == (1, F)));

        // Pruning by count drops the oldest of the log, whatever its level.
        let feed = RecordFeed::new(4);
        feed.push(&log[..5]);
        feed.push(&log[5..]);
        assert_eq!(feed.range(), Some((2, 6)));
        assert_eq!(got_range(&feed, C), (6, 6));
        assert_eq!(got_range(&feed, F), (2, 5));
        assert!(matches!(feed.get(1, Some(F)), Err(RecordQueryError::Pruned { slot: 1, oldest: 2, newest: 5 })));
        assert!(matches!(feed.get(1, None), Err(RecordQueryError::Pruned { slot: 1, oldest: 2, newest: 6 })));
        assert!(matches!(feed.cursor(Some(4), None), Err(RecordQueryError::Pruned { slot: 4, oldest: 6, .. })));
        assert_eq!(feed.cursor(Some(4), Some(F)), Ok(Cursor { next: 7, live_start: 8 }));
    }

    fn got_range(feed: &RecordFeed, c: Commitment) -> (u64, u64) {
        let s = feed.read();
        (s.level(c).oldest().unwrap(), s.level(c).newest().unwrap())
    }

    #[test]
    fn damage_is_placed_per_level_between_that_levels_records() {
        use Commitment::{Confirmed as C, Finalized as F};
        let feed = RecordFeed::new(100);
        // The log read: C10 F7 C11 [damage] C13 F9 ... the lost span held C12 and F8 perhaps.
        feed.push(&[at(10, C), at(7, F), at(11, C), at(13, C), at(9, F)]);
        feed.note_damage(&[damage(Some(11), Some(13), 400..700)]);
        assert_eq!(
            feed.get(12, Some(C)).err(),
            Some(RecordQueryError::Damaged { slot: 12, after: Some(11), before: Some(13) })
        );
        assert_eq!(
            feed.get(8, Some(F)).err(),
            Some(RecordQueryError::Damaged { slot: 8, after: Some(7), before: Some(9) })
        );
        assert_eq!(
            feed.get(8, None).err(),
            Some(RecordQueryError::Damaged { slot: 8, after: Some(7), before: Some(9) })
        );
        assert!(matches!(feed.get(12, Some(F)), Err(RecordQueryError::NotYetCommitted { .. })));
        // Damage at the end: open for both levels, each closed by its own next record.
        feed.note_damage(&[damage(Some(9), None, 900..1000)]);
        feed.push(&[at(15, C)]);
        assert_eq!(
            feed.get(14, Some(C)).err(),
            Some(RecordQueryError::Damaged { slot: 14, after: Some(13), before: Some(15) })
        );
        assert_eq!(
            feed.get(11, Some(F)).err(),
            Some(RecordQueryError::Damaged { slot: 11, after: Some(9), before: None })
        );
        feed.push(&[at(12, F)]);
        assert_eq!(
            feed.get(11, Some(F)).err(),
            Some(RecordQueryError::Damaged { slot: 11, after: Some(9), before: Some(12) })
        );
        assert_eq!(feed.get(12, Some(F)).map(|(_, e)| e.slot), Ok(12));
    }
}
