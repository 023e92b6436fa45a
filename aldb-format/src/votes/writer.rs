//! The writer of the vote-evidence log: one per snapshot directory, on the plugin's evidence
//! thread.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use std::collections::{BTreeMap, BTreeSet};

use super::entry::{KeptEvidence, VoteLogEntry, encode_entry, scan};
use super::reader::{EpochTransition, VoteLogReader};
use super::{
    DEFAULT_WINDOW, VOTES_DIR, VOTES_HEADER_LEN, VoteLogError, header_ok, io, list_segments, segment_header,
    segment_name,
};

/// When the writer starts a new segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VoteLogOptions {
    /// A segment is closed once it holds this many bytes.
    pub segment_bytes: u64,
    /// A segment is closed once an entry comes this many slots past its first slot.
    pub segment_slots: u64,
}

impl Default for VoteLogOptions {
    /// 64 MiB or 256 slots: pruning deletes whole segments, so at most about 256 slots more than
    /// asked are kept, and a mainnet slot's votes (about 1,500 of ~300 bytes) fill a segment in
    /// some 150 slots.
    fn default() -> Self {
        Self { segment_bytes: 64 << 20, segment_slots: 256 }
    }
}

/// How often the writer appends again what epochs' transitions need (§11.4: the set and the
/// chosen slot's evidence, as kept evidence, together in one segment), and which.
///
/// A replica copies only the newest slots of the log (about 9,000 by default), while a
/// transition's evidence lies in the first slots of the epoch before its set's: days back on
/// mainnet. Carried forward every `every_slots` slots, the transitions of the newest `epochs`
/// epochs always lie in the newest segments, which every copy of the log holds; so a replica
/// serves them, and a client whose checkpoint is that many epochs old catches up from it.
/// Every other transition is carried again once its newest whole copy is `refresh_slots` old,
/// so an archive that keeps at least that many slots of the log holds every transition, and a
/// replica fetches an old one from the one segment its manifest entry names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Carry {
    /// Slots between two carries (0: never). A copy of the log keeping more than twice this
    /// many slots plus a segment's span holds every carried transition.
    pub every_slots: u64,
    /// How many epochs' transitions are carried every time: the newest that have one.
    pub epochs: usize,
    /// A carry also appends older transitions whose newest whole copy lies in a segment
    /// starting this many slots or more before the new one (0: never): at most `epochs` of them
    /// (at least one), those with the oldest copies first, so no carry grows a segment by more
    /// than twice the newest epochs' share.
    pub refresh_slots: u64,
}

impl Default for Carry {
    /// Every 3,000 slots (a copy of 9,000 holds at least one carry, across a restart of the
    /// writer too), the transitions of the newest 16 epochs: about a month on mainnet, some 8 MB
    /// at 1,300 validators, against about 1.3 GB of votes in 3,000 slots. Every other transition
    /// once a day (216,000 slots; 72 carries of up to 16 cover 1,152 epochs, some six years):
    /// some 0.5 MB per epoch of history against some 90 GB of votes.
    fn default() -> Self {
        Self { every_slots: 3_000, epochs: 16, refresh_slots: 216_000 }
    }
}

/// A closed or open segment the writer knows.
#[derive(Debug)]
struct Segment {
    first: u64,
    path: PathBuf,
    /// The newest slot any of its entries names (`first` when it has none).
    max_slot: u64,
}

/// Appends to the vote-evidence log under a snapshot directory.
#[derive(Debug)]
pub struct VoteLog {
    dir: PathBuf,
    options: VoteLogOptions,
    /// Every segment, oldest first; the last is the one appended to.
    segments: Vec<Segment>,
    /// The newest segment, open for appending, and its length.
    file: Option<(File, u64)>,
    /// A follower of this log, made at the first prune that deletes anything: what an epoch
    /// transition needs is found through it and kept (see [`VoteLog::prune`]).
    reader: Option<VoteLogReader>,
    /// The hashes of the sets the log holds.
    sets: BTreeSet<aldb_verify::Hash>,
    /// When transitions are carried forward.
    carry: Carry,
    /// The first slot of the segment the last carry went into (or of the newest segment at
    /// opening): the next carry is due `carry.every_slots` after it.
    carried_at: Option<u64>,
}

fn sync_dir(dir: &Path) -> Result<(), VoteLogError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io("sync", dir))
}

impl VoteLog {
    /// Opens the log under `snapshot_dir` with the default segment bounds.
    pub fn open(snapshot_dir: &Path) -> Result<Self, VoteLogError> {
        Self::open_with(snapshot_dir, VoteLogOptions::default())
    }

    /// Opens the log under `snapshot_dir`, creating its directory if missing. Bytes after the
    /// newest segment's last valid entry (a torn append) are cut; a newest segment whose header
    /// is damaged is left for readers (its entries carry their own checksums) and the next append
    /// starts a new one.
    pub fn open_with(snapshot_dir: &Path, options: VoteLogOptions) -> Result<Self, VoteLogError> {
        let dir = snapshot_dir.join(VOTES_DIR);
        std::fs::create_dir_all(&dir).map_err(io("create", &dir))?;
        let mut segments = Vec::new();
        let listed = list_segments(&dir)?;
        let newest = listed.len().checked_sub(1);
        let mut file = None;
        let mut sets = BTreeSet::new();
        for (i, (first, path)) in listed.into_iter().enumerate() {
            let bytes = std::fs::read(&path).map_err(io("read", &path))?;
            let body = bytes.get(VOTES_HEADER_LEN..).unwrap_or_default();
            let s = scan(body, VOTES_HEADER_LEN, false);
            let max_slot = s.entries.iter().map(|(_, e)| e.slot()).max().unwrap_or(first).max(first);
            sets.extend(s.entries.iter().filter_map(|(_, e)| match e {
                VoteLogEntry::Set(set) => Some(set.hash),
                _ => None,
            }));
            if Some(i) == newest && header_ok(&bytes) {
                let f = OpenOptions::new().read(true).append(true).open(&path).map_err(io("open", &path))?;
                if bytes.len() > s.end {
                    log::warn!("{}: cutting {} bytes after the last valid entry", path.display(), bytes.len() - s.end);
                    f.set_len(s.end as u64).map_err(io("truncate", &path))?;
                    f.sync_data().map_err(io("sync", &path))?;
                }
                file = Some((f, s.end as u64));
            }
            segments.push(Segment { first, path, max_slot });
        }
        let carried_at = segments.last().map(|s| s.first);
        Ok(Self { dir, options, segments, file, reader: None, sets, carry: Carry::default(), carried_at })
    }

    /// Carries transitions forward as `carry` says (the default: [`Carry::default`]).
    pub fn with_carry(mut self, carry: Carry) -> Self {
        self.carry = carry;
        self
    }

    /// Whether the log holds the set of hash `hash` (a writer logs each set once).
    pub fn holds_set(&self, hash: &aldb_verify::Hash) -> bool {
        self.sets.contains(hash)
    }

    /// The directory of the segments.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The newest slot any entry names.
    pub fn newest_slot(&self) -> Option<u64> {
        self.segments.iter().map(|s| s.max_slot).max()
    }

    /// Starts a segment named by `first`: its header is written under a temporary name and
    /// renamed into place, so a reader never sees a segment without its header.
    fn start_segment(&mut self, first: u64) -> Result<(), VoteLogError> {
        let path = self.dir.join(segment_name(first));
        let tmp = self.dir.join(format!(".{}.tmp", segment_name(first)));
        let mut f = File::create(&tmp).map_err(io("create", &tmp))?;
        f.write_all(&segment_header()).map_err(io("write", &tmp))?;
        f.sync_all().map_err(io("sync", &tmp))?;
        std::fs::rename(&tmp, &path).map_err(io("rename", &tmp))?;
        sync_dir(&self.dir)?;
        let f = OpenOptions::new().read(true).append(true).open(&path).map_err(io("open", &path))?;
        self.file = Some((f, VOTES_HEADER_LEN as u64));
        self.segments.push(Segment { first, path, max_slot: first });
        Ok(())
    }

    /// Whether an entry of `slot` goes into a new segment.
    fn must_roll(&self, slot: u64) -> bool {
        let (Some((_, len)), Some(seg)) = (&self.file, self.segments.last()) else { return true };
        // A slot below the segment's first (a late block) stays in it: names only grow.
        *len >= self.options.segment_bytes
            || (slot >= seg.first.saturating_add(self.options.segment_slots) && *len > VOTES_HEADER_LEN as u64)
    }

    /// Appends `entries` in order and makes them durable (one `fdatasync`) before returning. An
    /// entry that cannot be encoded fails the call before anything is written.
    pub fn append(&mut self, entries: &[VoteLogEntry]) -> Result<(), VoteLogError> {
        let encoded: Vec<Vec<u8>> = entries.iter().map(encode_entry).collect::<Result<_, _>>()?;
        for e in entries {
            if let VoteLogEntry::Set(s) = e {
                self.sets.insert(s.hash);
            }
        }
        let mut buf = Vec::new();
        // The set binding the kept evidence just before: its entry stays in the same segment, so
        // a copy of that segment alone holds the whole transition (what an archive indexes).
        let mut kept_binds = None;
        for (e, bytes) in entries.iter().zip(encoded) {
            let joins_kept = matches!(e, VoteLogEntry::Set(s) if kept_binds == Some(s.hash));
            kept_binds = match e {
                VoteLogEntry::Kept(k) => k.bank.next_set_hash,
                _ => None,
            };
            if !joins_kept && self.must_roll(e.slot()) {
                self.flush(&mut buf)?;
                let first = match self.segments.last() {
                    // Names must grow even when slots go back (never reuse a name).
                    Some(s) => e.slot().max(s.first.saturating_add(1)),
                    None => e.slot(),
                };
                self.start_segment(first)?;
                if self.carry_due(first) {
                    self.carried_at = Some(first);
                    self.carry_transitions(first, &mut buf)?;
                }
            }
            if let Some((_, len)) = &mut self.file {
                *len += bytes.len() as u64;
            }
            if let Some(seg) = self.segments.last_mut() {
                seg.max_slot = seg.max_slot.max(e.slot());
            }
            buf.extend_from_slice(&bytes);
        }
        self.flush(&mut buf)
    }

    fn carry_due(&self, first: u64) -> bool {
        self.carry.every_slots > 0
            && (self.carry.epochs > 0 || self.carry.refresh_slots > 0)
            && self.carried_at.is_none_or(|at| first >= at.saturating_add(self.carry.every_slots))
    }

    /// Appends to `buf`, at the start of the new segment `first`, the kept evidence and set
    /// entry of the transitions of the newest [`Carry::epochs`] epochs that have one (the newest
    /// epoch's set has none until the votes on a slot binding it land), and of every older one
    /// due again ([`Carry::refresh_slots`]).
    fn carry_transitions(&mut self, first: u64, buf: &mut Vec<u8>) -> Result<(), VoteLogError> {
        let reader = self.reader.get_or_insert_with(|| VoteLogReader::new(self.dir.parent().unwrap_or(&self.dir)));
        reader.refresh()?;
        let mut carry = Vec::new();
        let mut carried = 0;
        let refresh = self.carry.refresh_slots;
        // Older epochs due again, by the segment of their newest whole copy: only those that
        // have one (a carry of the newest epochs made it), checked on the index before any
        // transition is read.
        let whole = if refresh > 0 { reader.newest_whole_transitions() } else { BTreeMap::new() };
        let mut due = Vec::new();
        for epoch in reader.set_epochs().into_iter().rev() {
            if carried < self.carry.epochs {
                let Some(t) = reader.transition(epoch, DEFAULT_WINDOW)? else { continue };
                if let Some(entries) = whole_entries(reader, t)? {
                    carry.extend(entries);
                    carried += 1;
                }
            } else if let Some(&seg) = whole.get(&epoch)
                && seg.saturating_add(refresh) <= first
            {
                due.push((seg, epoch));
            }
        }
        due.sort_unstable();
        for (_, epoch) in due.into_iter().take(self.carry.epochs.max(1)) {
            if let Some(t) = reader.transition(epoch, DEFAULT_WINDOW)? {
                carry.extend(whole_entries(reader, t)?.into_iter().flatten());
            }
        }
        for e in &carry {
            let bytes = encode_entry(e)?;
            if let Some((_, len)) = &mut self.file {
                *len += bytes.len() as u64;
            }
            buf.extend_from_slice(&bytes);
        }
        if !carry.is_empty() {
            log::info!("carrying {} entries of epochs' transitions into the newest segment", carry.len());
        }
        Ok(())
    }

    /// Writes `buf` to the open segment and syncs it.
    fn flush(&mut self, buf: &mut Vec<u8>) -> Result<(), VoteLogError> {
        if buf.is_empty() {
            return Ok(());
        }
        let (Some((f, _)), Some(seg)) = (&mut self.file, self.segments.last()) else {
            return Err(VoteLogError::Input("no open segment".into()));
        };
        f.write_all(buf).map_err(io("append", &seg.path))?;
        f.sync_data().map_err(io("sync", &seg.path))?;
        buf.clear();
        Ok(())
    }

    /// Deletes every segment but the newest whose entries are all of slots below `keep_from`.
    /// Returns how many were deleted.
    pub fn prune(&mut self, keep_from: u64) -> Result<usize, VoteLogError> {
        self.prune_below(keep_from, u64::MAX)
    }

    /// [`prune`](Self::prune) for a log shipped to an archive: it also keeps every segment named
    /// at or above the archive's vote hold (`shipped-votes.slot` in the snapshot directory,
    /// [`crate::shipped::read_votes_shipped`]), and every segment while that file does not exist
    /// or cannot be read (a warning says why), so a shipper that falls behind finds every segment
    /// it has not archived yet.
    pub fn prune_held(&mut self, keep_from: u64) -> Result<usize, VoteLogError> {
        let snapshot_dir = self.dir.parent().unwrap_or(&self.dir);
        let hold = match crate::shipped::read_votes_shipped(snapshot_dir) {
            Ok(hold) => hold.unwrap_or(0),
            Err(e) => {
                log::warn!("vote-evidence retention held for the shipper: {e}");
                0
            }
        };
        self.prune_below(keep_from, hold)
    }

    /// Deletes every segment but the newest whose entries are all below `keep_from` and whose
    /// name (first slot) is below `hold`. What an epoch transition needs and lies only in those
    /// segments is appended again first ([`Self::keep_transitions`]).
    fn prune_below(&mut self, keep_from: u64, hold: u64) -> Result<usize, VoteLogError> {
        let newest = self.segments.len().saturating_sub(1);
        let doomed: BTreeSet<u64> = self
            .segments
            .iter()
            .enumerate()
            .filter(|(i, seg)| *i < newest && seg.max_slot < keep_from && seg.first < hold)
            .map(|(_, seg)| seg.first)
            .collect();
        if doomed.is_empty() {
            return Ok(0);
        }
        self.keep_transitions(&doomed)?;
        let mut deleted = 0;
        let mut kept = Vec::with_capacity(self.segments.len());
        for seg in std::mem::take(&mut self.segments) {
            if doomed.contains(&seg.first) {
                match std::fs::remove_file(&seg.path) {
                    Ok(()) => deleted += 1,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => deleted += 1,
                    Err(e) => {
                        // Keep it listed, so a later prune tries again.
                        log::warn!("cannot delete {}: {e}", seg.path.display());
                        kept.push(seg);
                    }
                }
            } else {
                kept.push(seg);
            }
        }
        self.segments = kept;
        if deleted > 0 {
            sync_dir(&self.dir)?;
        }
        Ok(deleted)
    }

    /// Before the segments `doomed` are deleted: for every epoch whose set, or a bank binding
    /// it, or kept evidence of it, lies in one of them, appends (durably) what its transition
    /// needs and would lose: the chosen slot's evidence ([`VoteLogReader::transition`]) as a
    /// [`KeptEvidence`] followed by the set's entry, unless it already is kept evidence outside
    /// them in a segment holding the set too. An epoch without a transition yet keeps every set
    /// of it that lies only in them. So a transition stays servable for every epoch whose set
    /// the log ever held, from the newest segments, which every copy of the log keeps, and some
    /// one segment always holds it whole (`docs/FORMAT.md`, "Vote-evidence log").
    fn keep_transitions(&mut self, doomed: &BTreeSet<u64>) -> Result<(), VoteLogError> {
        let reader = self.reader.get_or_insert_with(|| VoteLogReader::new(self.dir.parent().unwrap_or(&self.dir)));
        reader.refresh()?;
        let epochs: BTreeSet<u64> = doomed.iter().flat_map(|seg| reader.epochs_touching(*seg)).collect();
        let only_doomed = |segs: &[u64]| segs.iter().all(|s| doomed.contains(s));
        let mut carry = Vec::new();
        for epoch in epochs {
            match reader.transition(epoch, DEFAULT_WINDOW)? {
                Some(t) => {
                    let whole_elsewhere = t.kept
                        && !only_doomed(&t.segments)
                        && t.segments.first().is_some_and(|seg| reader.set_segments(&t.set_hash).contains(seg));
                    if !whole_elsewhere {
                        carry.extend(whole_entries(reader, t)?.into_iter().flatten());
                    }
                }
                None => {
                    for h in reader.sets_of(epoch) {
                        if only_doomed(&reader.set_segments(&h))
                            && let Some(entry) = reader.set_entry(&h)?
                        {
                            carry.push(VoteLogEntry::Set(entry));
                        }
                    }
                }
            }
        }
        if !carry.is_empty() {
            log::info!("keeping {} entries of epoch transitions past the pruning of their segments", carry.len());
            self.append(&carry)?;
        }
        Ok(())
    }
}

/// A transition written whole: the chosen slot's evidence as kept evidence, then the entry of the
/// set its bank binds (`None` when no entry of that set still reads).
fn whole_entries(reader: &VoteLogReader, t: EpochTransition) -> Result<Option<[VoteLogEntry; 2]>, VoteLogError> {
    let Some(set) = reader.set_entry(&t.set_hash)? else { return Ok(None) };
    let kept = KeptEvidence { bank: t.evidence.bank, votes: t.evidence.votes };
    Ok(Some([VoteLogEntry::Kept(kept), VoteLogEntry::Set(set)]))
}
