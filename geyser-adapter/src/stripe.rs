//! Account buffers, split by key path into independently locked stripes.
//!
//! An account callback hashes outside any lock, then holds one stripe's lock for a hash-map
//! insert. Every write of one account lands in the same stripe (the stripe is a function of the
//! path), so "highest write_version wins" is decided there with no global order. The state
//! machine visits all stripes only on slot events: to hand a decided slot's buffers to the
//! engine, or to throw away a dropped slot's.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, Hasher};
use std::sync::{Mutex, MutexGuard, PoisonError};

use aldb_core::{BulkEntry, Hash};

use crate::error::IgnoreReason;

/// Locks a mutex, recovering from poisoning: every critical section here leaves its data
/// consistent at each step, and a callback must never panic because another thread did.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Hashes key paths by reading eight of their bytes: they are BLAKE2s digests, already uniform,
/// so running SipHash over them again would only cost time on the callback path.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct BuildPathHasher;

impl BuildHasher for BuildPathHasher {
    type Hasher = PathHasher;

    fn build_hasher(&self) -> PathHasher {
        PathHasher(0)
    }
}

#[derive(Debug)]
pub(crate) struct PathHasher(u64);

impl Hasher for PathHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // The stripe index uses the first path bytes; bytes 8..16 are independent of it.
        match bytes.get(8..16).and_then(|b| <[u8; 8]>::try_from(b).ok()) {
            Some(chunk) => self.0 ^= u64::from_le_bytes(chunk),
            // Anything else (the slice length prefix) is folded in byte by byte.
            None => {
                for &b in bytes {
                    self.0 = self.0.rotate_left(8) ^ u64::from(b);
                }
            }
        }
    }
}

/// A map keyed by key path.
pub(crate) type PathMap<V> = HashMap<Hash, V, BuildPathHasher>;

/// The buffered winner of one account in one bank.
#[derive(Debug)]
pub(crate) struct Buffered<Rec> {
    pub(crate) write_version: u64,
    pub(crate) value: Option<Hash>,
    pub(crate) record: Rec,
}

/// One stripe's share of one bank's updates.
pub(crate) type SlotUpdates<Rec> = PathMap<Buffered<Rec>>;

#[derive(Debug)]
enum SlotBuf<Rec> {
    Open(SlotUpdates<Rec>),
    /// The slot was dropped: later updates for it are refused until it is re-created.
    Closed,
    /// The slot's bank was frozen into the fork engine (`Commitment::Processed`): its updates
    /// are all in, so later ones are refused until it is re-created.
    Frozen,
}

#[derive(Debug)]
pub(crate) struct Stripe<Rec> {
    slots: HashMap<u64, SlotBuf<Rec>>,
    startup: Vec<BulkEntry>,
    startup_records: Vec<Rec>,
    startup_max: Option<u64>,
    /// Parent links (and the parent's bank hash) read from SlotHashes writes; only the stripe of
    /// that sysvar's path has any.
    hints: BTreeMap<u64, Hint>,
}

impl<Rec> Default for Stripe<Rec> {
    fn default() -> Self {
        Self {
            slots: HashMap::new(),
            startup: Vec::new(),
            startup_records: Vec::new(),
            startup_max: None,
            hints: BTreeMap::new(),
        }
    }
}

/// What a slot's SlotHashes write says: its parent and, normally, the parent's bank hash.
pub(crate) type Hint = (u64, Option<Hash>);

/// A hashed live update on its way into a stripe.
#[derive(Debug)]
pub(crate) struct Incoming<Rec> {
    pub(crate) slot: u64,
    pub(crate) path: Hash,
    pub(crate) value: Option<Hash>,
    pub(crate) write_version: u64,
    pub(crate) record: Rec,
    /// The parent (and its bank hash) a SlotHashes write names.
    pub(crate) hint: Option<Hint>,
}

/// What the caller must do after buffering an update.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Buffer {
    /// Nothing more.
    Done,
    /// This is the stripe's first update for the slot: tell the state machine the slot exists.
    NewSlot,
}

impl<Rec> Stripe<Rec> {
    /// Buffers a live update, keeping the highest write version per account (the later arrival
    /// on a tie). `base` is read under this stripe's lock, so a slot decided for commit before
    /// this lock was taken is seen as decided.
    pub(crate) fn buffer(&mut self, u: Incoming<Rec>, base: Option<u64>) -> Result<Buffer, IgnoreReason> {
        let Incoming { slot, path, value, write_version, record, hint } = u;
        if base.is_some_and(|b| slot <= b) {
            return Err(IgnoreReason::UpdateBelowBase);
        }
        let new = Buffered { write_version, value, record };
        let outcome = match self.slots.entry(slot) {
            std::collections::hash_map::Entry::Occupied(mut e) => match e.get_mut() {
                SlotBuf::Closed => return Err(IgnoreReason::UpdateForDroppedSlot),
                SlotBuf::Frozen => return Err(IgnoreReason::UpdateForFrozenSlot),
                SlotBuf::Open(map) => {
                    match map.entry(path) {
                        std::collections::hash_map::Entry::Occupied(mut old) => {
                            if write_version >= old.get().write_version {
                                old.insert(new);
                            }
                        }
                        std::collections::hash_map::Entry::Vacant(v) => {
                            v.insert(new);
                        }
                    }
                    Buffer::Done
                }
            },
            std::collections::hash_map::Entry::Vacant(v) => {
                let mut map = PathMap::default();
                map.insert(path, new);
                v.insert(SlotBuf::Open(map));
                Buffer::NewSlot
            }
        };
        if let Some(h) = hint {
            self.hints.insert(slot, h);
        }
        Ok(outcome)
    }

    /// Keeps a startup account for the bulk build, with its record unless it is streamed.
    pub(crate) fn push_startup(&mut self, entry: BulkEntry, record: Option<Rec>) {
        self.startup_max = self.startup_max.max(Some(entry.rank.0));
        self.startup.push(entry);
        if let Some(r) = record {
            self.startup_records.push(r);
        }
    }

    /// Hands the stripe's startup entries to the builder once there are `batch` of them.
    /// Called under the stripe's lock, so entries of one path reach the builder in arrival order.
    pub(crate) fn flush_startup(&mut self, batch: usize, stream: &crate::startup::StartupStream) {
        if self.startup.len() >= batch && stream.push(&self.startup) {
            self.startup.clear();
        }
    }

    /// Moves everything at or below `base` into `dead`.
    fn prune_below(&mut self, base: u64, dead: &mut Graveyard<Rec>) {
        let below: Vec<u64> = self.slots.keys().filter(|&&s| s <= base).copied().collect();
        for s in below {
            if let Some(SlotBuf::Open(m)) = self.slots.remove(&s) {
                dead.push(m);
            }
        }
        self.hints.retain(|&s, _| s > base);
    }
}

/// Buffers removed under a stripe lock, freed after it is released: freeing many records must
/// not hold up the callbacks that want the stripe.
#[derive(Debug)]
pub(crate) struct Graveyard<Rec>(Vec<SlotUpdates<Rec>>);

impl<Rec> Graveyard<Rec> {
    fn new() -> Self {
        Self(Vec::new())
    }

    fn push(&mut self, m: SlotUpdates<Rec>) {
        if !m.is_empty() {
            self.0.push(m);
        }
    }

    /// How many buffered updates it holds; dropping it frees them.
    fn count(&self) -> u64 {
        self.0.iter().map(|m| m.len() as u64).sum()
    }
}

/// Pads a stripe to its own cache lines so neighbouring locks do not share one.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Padded<T>(T);

/// All stripes.
#[derive(Debug)]
pub(crate) struct Stripes<Rec> {
    stripes: Box<[Padded<Mutex<Stripe<Rec>>>]>,
    mask: usize,
    hint_stripe: usize,
}

/// Startup accounts taken out of the stripes, one part per stripe.
pub(crate) struct StartupParts<Rec> {
    pub(crate) entries: Vec<Vec<BulkEntry>>,
    pub(crate) records: Vec<Vec<Rec>>,
    pub(crate) max_slot: Option<u64>,
}

impl<Rec> Stripes<Rec> {
    /// `n` stripes; `n` is a power of two (checked by the config).
    pub(crate) fn new(n: usize) -> Self {
        let n = n.max(1);
        let stripes = (0..n).map(|_| Padded(Mutex::new(Stripe::default()))).collect();
        let mut s = Self { stripes, mask: n - 1, hint_stripe: 0 };
        s.hint_stripe = s.index(&aldb_verify::spec::key_path(&crate::sysvar::SLOT_HASHES_SYSVAR));
        s
    }

    /// The stripe of a path: its top 16 bits, masked.
    pub(crate) fn index(&self, path: &Hash) -> usize {
        (usize::from(path[0]) << 8 | usize::from(path[1])) & self.mask
    }

    /// Locks the stripe of a path.
    pub(crate) fn lock_path(&self, path: &Hash) -> MutexGuard<'_, Stripe<Rec>> {
        // In range: the index is masked to `len - 1`, and `len` is a power of two.
        lock(&self.stripes[self.index(path)].0)
    }

    fn each(&self, mut f: impl FnMut(&mut Stripe<Rec>)) {
        for p in self.stripes.iter() {
            f(&mut lock(&p.0));
        }
    }

    /// Takes a decided slot's buffers and SlotHashes hint and, since the base is now `slot`,
    /// drops everything at or below it. Returns the buffers, the hint and how many other
    /// buffered updates went.
    pub(crate) fn take_slot(&self, slot: u64) -> (Vec<SlotUpdates<Rec>>, Option<Hint>, u64) {
        let mut out = Vec::new();
        let mut hint = None;
        let mut dead = Graveyard::new();
        self.each(|s| {
            if let Some(SlotBuf::Open(m)) = s.slots.remove(&slot)
                && !m.is_empty()
            {
                out.push(m);
            }
            if let Some(h) = s.hints.remove(&slot) {
                hint = Some(h);
            }
            s.prune_below(slot, &mut dead);
        });
        (out, hint, dead.count())
    }

    /// Takes a bank's buffers and SlotHashes hint for a freeze, leaving a marker that refuses its
    /// later updates. Unlike [`Stripes::take_slot`] nothing else goes: under
    /// `Commitment::Processed` lower slots on other forks may still freeze.
    pub(crate) fn take_frozen(&self, slot: u64) -> (Vec<SlotUpdates<Rec>>, Option<Hint>) {
        let mut out = Vec::new();
        let mut hint = None;
        self.each(|s| {
            if let Some(SlotBuf::Open(m)) = s.slots.insert(slot, SlotBuf::Frozen)
                && !m.is_empty()
            {
                out.push(m);
            }
            if let Some(h) = s.hints.remove(&slot) {
                hint = Some(h);
            }
        });
        (out, hint)
    }

    /// Drops everything at or below a new base; returns how many buffered updates went.
    pub(crate) fn prune_below(&self, base: u64) -> u64 {
        let mut dead = Graveyard::new();
        self.each(|s| s.prune_below(base, &mut dead));
        dead.count()
    }

    /// Throws away the slots' buffers and refuses their later updates.
    pub(crate) fn close(&self, slots: &[u64]) -> u64 {
        if slots.is_empty() {
            return 0;
        }
        let mut dead = Graveyard::new();
        self.each(|s| {
            for &slot in slots {
                if let Some(SlotBuf::Open(m)) = s.slots.insert(slot, SlotBuf::Closed) {
                    dead.push(m);
                }
                s.hints.remove(&slot);
            }
        });
        dead.count()
    }

    /// Forgets everything about a slot so it starts over empty.
    pub(crate) fn reopen(&self, slot: u64) -> u64 {
        let mut dead = Graveyard::new();
        self.each(|s| {
            if let Some(SlotBuf::Open(m)) = s.slots.remove(&slot) {
                dead.push(m);
            }
            s.hints.remove(&slot);
        });
        dead.count()
    }

    /// Forgets the closed markers of slots no longer tracked.
    pub(crate) fn forget(&self, slots: &[u64]) {
        if slots.is_empty() {
            return;
        }
        self.each(|s| {
            for slot in slots {
                if matches!(s.slots.get(slot), Some(SlotBuf::Closed | SlotBuf::Frozen)) {
                    s.slots.remove(slot);
                }
            }
        });
    }

    /// Takes all startup accounts.
    pub(crate) fn take_startup(&self) -> StartupParts<Rec> {
        let mut parts = StartupParts { entries: Vec::new(), records: Vec::new(), max_slot: None };
        self.each(|s| {
            parts.max_slot = parts.max_slot.max(s.startup_max.take());
            if !s.startup.is_empty() {
                parts.entries.push(std::mem::take(&mut s.startup));
                parts.records.push(std::mem::take(&mut s.startup_records));
            }
            // A batch's buffer after the last flush.
            s.startup = Vec::new();
        });
        parts
    }

    /// The SlotHashes parent links known for these slots.
    pub(crate) fn hints_for(&self, slots: &[u64]) -> Vec<(u64, u64)> {
        let Some(s) = self.stripes.get(self.hint_stripe).map(|p| lock(&p.0)) else {
            return Vec::new();
        };
        slots.iter().filter_map(|slot| s.hints.get(slot).map(|&(p, _)| (*slot, p))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buffer(s: &mut Stripe<u8>, slot: u64, key: u8, wv: u64, rec: u8) -> Result<Buffer, IgnoreReason> {
        let u = Incoming { slot, path: [key; 32], value: Some([rec; 32]), write_version: wv, record: rec, hint: None };
        s.buffer(u, Some(9))
    }

    #[test]
    fn highest_write_version_wins_and_ties_go_to_the_later() {
        let mut s = Stripe::default();
        assert_eq!(buffer(&mut s, 10, 1, 5, 50), Ok(Buffer::NewSlot));
        assert_eq!(buffer(&mut s, 10, 1, 3, 30), Ok(Buffer::Done));
        assert_eq!(buffer(&mut s, 10, 1, 7, 70), Ok(Buffer::Done));
        assert_eq!(buffer(&mut s, 10, 1, 7, 71), Ok(Buffer::Done));
        assert_eq!(buffer(&mut s, 9, 1, 1, 1), Err(IgnoreReason::UpdateBelowBase));
        let kept = match s.slots.get(&10) {
            Some(SlotBuf::Open(m)) => m.get(&[1; 32]).map(|b| b.record),
            _ => None,
        };
        assert_eq!(kept, Some(71));
    }

    #[test]
    fn closed_slots_refuse_updates_until_reopened() {
        let stripes: Stripes<u8> = Stripes::new(4);
        let put = |wv| buffer(&mut stripes.lock_path(&[3; 32]), 12, 3, wv, 1);
        assert_eq!(put(1), Ok(Buffer::NewSlot));
        assert_eq!(stripes.close(&[12]), 1);
        assert_eq!(put(2), Err(IgnoreReason::UpdateForDroppedSlot));
        assert_eq!(stripes.reopen(12), 0);
        assert_eq!(put(3), Ok(Buffer::NewSlot));
        let (bufs, hint, gone) = stripes.take_slot(12);
        assert_eq!((bufs.len(), hint, gone), (1, None, 0));
    }

    #[test]
    fn frozen_slots_refuse_updates_and_keep_lower_slots() {
        let stripes: Stripes<u8> = Stripes::new(4);
        let put = |slot, wv| buffer(&mut stripes.lock_path(&[3; 32]), slot, 3, wv, 1);
        assert_eq!(put(11, 1), Ok(Buffer::NewSlot));
        assert_eq!(put(12, 2), Ok(Buffer::NewSlot));
        let (bufs, _) = stripes.take_frozen(12);
        assert_eq!(bufs.len(), 1);
        assert_eq!(put(12, 3), Err(IgnoreReason::UpdateForFrozenSlot));
        assert_eq!(put(11, 4), Ok(Buffer::Done), "a lower slot on another fork still buffers");
        assert_eq!(stripes.reopen(12), 0);
        assert_eq!(put(12, 5), Ok(Buffer::NewSlot), "a restarted slot buffers again");
    }

    #[test]
    fn path_hasher_spreads_paths() {
        let b = BuildPathHasher;
        let a = b.hash_one(aldb_verify::spec::key_path(&[1; 32]));
        let c = b.hash_one(aldb_verify::spec::key_path(&[2; 32]));
        assert_ne!(a, c);
    }
}
