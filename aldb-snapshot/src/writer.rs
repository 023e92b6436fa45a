//! The snapshot writer: its own thread beside the engine, fed through a bounded queue.
//!
//! Policy when the queue is full: the committing thread waits (backpressure). Skipping a slot
//! would leave a gap in the proofs served, and dropping a change set would corrupt every later
//! snapshot; waiting instead slows commits to the disk's pace, and the time spent waiting is
//! counted so operators see it (`full_waits`, `wait_nanos`). Pruning runs on a third thread and
//! only ever deletes files no kept slot can reach, so it never blocks or breaks the writer.
//!
//! Policy on a write error (a full disk, an I/O error): the writer does not stop. The slot that
//! failed and every slot after it are merged, as `every > 1` merges slots, and the writer retries
//! after 1 s, doubling the wait up to 60 s. A retry rebuilds the writer's tables from the newest
//! file on disk (reading its whole tree once) and writes the merged slots as one file, marked in
//! its header as following a gap: the slots between are never served, and Hyades says why. The
//! validator is never restarted for it. The writer gives up, until restarted, only when the held
//! account data passes `max_recovery_bytes` or nothing was ever published to continue from
//! (without a full state in hand); `WriterStats::stopped` says so.
//!
//! On forks (`WriterConfig::forks`): every frozen bank is submitted with its parent, and its file
//! is written against the parent's written state (the `forks` module moves the writer's tables
//! between banks with per-bank undo and redo lists). A bank whose parent was not written is
//! refused with a typed error ([`SnapshotWriter::take_refused`]) and the writer goes on; marks
//! ([`SnapshotWriter::mark`]) release and drop banks and are journaled in `slot-status.log`
//! after the files they follow. A write error in fork mode refuses only that bank (the tables are
//! rolled back to its parent, and with [`WriterConfig::return_refused`] the refusal hands its
//! input back, so a caller may submit it again without having kept a copy); there is no merging
//! of held slots across forks. `docs/FORMAT.md`
//! ("Forks", "Slot-status journal") has the rules.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use aldb_core::{CaptureOptions, ChangeSet};
use aldb_format::SnapshotError;
use aldb_format::format::{
    FOOTER_LEN, FileKind, HEADER_LEN, Header, MAX_FILE_BYTES, SET_ASIDE_SUFFIX, parse_published_name, published_name,
};
use aldb_verify::spec::Hash;

use crate::batch::AccountBatch;
use crate::file_builder::{supports_direct, sync_dir};
use crate::forks::Banks;
use crate::serializer::{CAPTURE_OPTIONS, Published, Serializer, SlotInput};
use aldb_format::status::{SlotStatusKind, StatusEntry, StatusJournal};

/// Writer settings.
#[derive(Clone, Debug)]
pub struct WriterConfig {
    /// Directory of snapshot files (created if missing).
    pub dir: PathBuf,
    /// Publish a snapshot every this many submitted slots (1 = every slot); the slots between
    /// are merged into the next one and are not served.
    pub every: u64,
    /// Keep the newest `keep_slots` slots provable; older files are deleted once unreachable.
    pub keep_slots: u64,
    /// Slots over which the whole key space is rewritten once, so old files can be retired.
    pub refresh_slots: u64,
    /// Slots that may wait in the queue before the committer blocks.
    pub queue_bound: usize,
    /// Write files past the page cache (`O_DIRECT`) when the filesystem supports it; files are
    /// written once and read later, so caching them on the way out only costs copies.
    pub direct_io: bool,
    /// After a write error, the writer holds the slots that follow (merged, one version per
    /// account) until it can write again; past this many bytes of held account data it gives up
    /// until restarted. See [`SnapshotWriter`] on failures.
    pub max_recovery_bytes: usize,
    /// Fork mode: every frozen bank is submitted, forks included, and each file is written
    /// against its [`SlotInput::parent`]'s written state (see [`SnapshotWriter`] on forks).
    /// Needs `every = 1`. Off: each file is based on the previous one, a single chain.
    pub forks: bool,
    /// Fork mode: most unrooted banks held (with their table lists) before a bank is refused
    /// with [`SnapshotError::TooManyBanks`].
    pub max_fork_banks: usize,
    /// Fork mode: most bytes of table lists held before a bank is refused.
    pub max_fork_bytes: usize,
    /// Retention waits for the archive: no file at or above the sequence number the shipper
    /// recorded in the directory's `shipped.seq` is deleted, and none at all before it exists
    /// (`aldb_format::shipped`). For a directory whose history an archiver copies to a bucket:
    /// without it, a shipper that falls behind finds files pruned under it and the archive keeps
    /// holes. The directory then grows while the shipper is down. Off by default.
    pub hold_for_shipper: bool,
    /// Fork mode: a refused bank's input is handed back in its [`Refusal`] instead of being
    /// emptied for reuse, so a caller that tries a failed write again keeps the input it
    /// submitted rather than a copy of it. The caller must then take the refusals
    /// ([`SnapshotWriter::take_refused`]) as they come: up to 1,024 are kept, inputs included.
    /// Off by default.
    pub return_refused: bool,
    /// The most bytes one snapshot file holds: a slot that writes more (a full state of more
    /// than about a hundred million accounts) is cut into part files (`docs/FORMAT.md`,
    /// "Parts"). Always [`MAX_FILE_BYTES`], the most a reference addresses; lowered only by
    /// tests, to cut small states into many parts. Values below 256 bytes count as 256.
    #[doc(hidden)]
    pub part_bytes: u64,
}

/// First wait before a failed writer retries; doubles per failed retry up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_secs(1);
/// Longest wait between retries of a failed writer.
const RETRY_MAX: Duration = Duration::from_secs(60);

impl WriterConfig {
    /// Defaults for a directory: every slot, keep 1000 slots, refresh over 512 slots, queue of 4,
    /// direct I/O where supported, up to 1 GiB of account data held while failing.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            every: 1,
            keep_slots: 1000,
            refresh_slots: 512,
            queue_bound: 4,
            direct_io: true,
            max_recovery_bytes: 1 << 30,
            forks: false,
            max_fork_banks: 1024,
            max_fork_bytes: 1 << 30,
            hold_for_shipper: false,
            return_refused: false,
            part_bytes: MAX_FILE_BYTES,
        }
    }
}

/// Counters of the writer, for metrics.
#[derive(Debug, Default)]
pub struct WriterStats {
    /// Slots submitted.
    pub submitted: AtomicU64,
    /// Slots taken from the queue (published or merged into a later snapshot).
    pub processed: AtomicU64,
    /// Snapshot files published.
    pub published: AtomicU64,
    /// Newest published slot.
    pub last_slot: AtomicU64,
    /// Bytes of published files.
    pub bytes: AtomicU64,
    /// Of those, bytes of account records.
    pub account_bytes: AtomicU64,
    /// Of those, bytes rewritten by the refresh cycle.
    pub refresh_bytes: AtomicU64,
    /// Submissions that found the queue full and waited.
    pub full_waits: AtomicU64,
    /// Nanoseconds committers spent waiting on a full queue.
    pub wait_nanos: AtomicU64,
    /// Nanoseconds the writer spent writing and syncing.
    pub write_nanos: AtomicU64,
    /// Files deleted by pruning.
    pub pruned_files: AtomicU64,
    /// Failed writes (each retry that fails counts again).
    pub errors: AtomicU64,
    /// 1 while the writer is failing (holding slots until it can write again), else 0.
    pub failing: AtomicU64,
    /// Times the writer wrote again after failing.
    pub recoveries: AtomicU64,
    /// Committed slots never written because the writer was failing: merged into the first file
    /// after the failure, which is marked with the gap (`docs/FORMAT.md`), and not served.
    pub gap_slots: AtomicU64,
    /// 1 once the writer has stopped for good (see [`SnapshotWriter`]), else 0.
    pub stopped: AtomicU64,
    /// Status marks submitted ([`SnapshotWriter::mark`]); they go through the queue with the
    /// slots and count in `submitted` and `processed` too.
    pub marks: AtomicU64,
    /// Fork mode: written banks held, the finalized base included (gauge).
    pub fork_banks: AtomicU64,
    /// Fork mode: bytes of undo and redo lists the unrooted banks hold (gauge).
    pub fork_held_bytes: AtomicU64,
    /// Fork mode: banks refused (parent not written, over the bound, or their write failed);
    /// [`SnapshotWriter::take_refused`] says which and why.
    pub fork_refused: AtomicU64,
    /// Fork mode: times the tables moved to another fork before a write or a mark.
    pub fork_switches: AtomicU64,
    /// Fork mode: banks whose undo list a move applied.
    pub fork_rolled_back: AtomicU64,
    /// Fork mode: banks whose redo list a move applied.
    pub fork_reapplied: AtomicU64,
    /// Fork mode: banks dropped (abandoned, dead, replaced, or off the finalized chain).
    pub fork_dropped: AtomicU64,
    /// Failed appends to the slot-status journal (or compactions of it).
    pub journal_errors: AtomicU64,
    /// Bytes of the writer's in-memory tables: where every node's and bucket's current record
    /// is, and every leaf's account record (gauge, set after each published write). They grow
    /// with the tree, about 17 bytes per leaf at two leaves per bucket; the writer's other
    /// memory is per-slot buffers.
    pub table_bytes: AtomicU64,
}

impl WriterStats {
    /// Slots submitted but not yet processed.
    pub fn queue_depth(&self) -> u64 {
        self.submitted.load(Ordering::Relaxed).saturating_sub(self.processed.load(Ordering::Relaxed))
    }
}

type Callback = Box<dyn FnMut(&Published) + Send>;

/// What consensus said about a slot, given to [`SnapshotWriter::mark`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SlotMark {
    /// The slot was confirmed.
    Confirmed,
    /// The slot was rooted: its ancestors are final too, and banks not descending from it are
    /// dropped.
    Finalized,
    /// The slot's bank died (or its fork was abandoned): it and its descendants are dropped.
    Abandoned,
}

/// A bank the fork-mode writer did not write, and why.
#[derive(Debug)]
pub struct Refusal {
    /// The slot.
    pub slot: u64,
    /// Why it was not written.
    pub error: SnapshotError,
    /// The bank as it was submitted, unchanged (a failed write rolls the tables back and leaves
    /// its input as it was), when [`WriterConfig::return_refused`] is set; `None` otherwise.
    pub input: Option<SlotInput>,
}

/// Refusals kept for [`SnapshotWriter::take_refused`]; older ones are only counted.
const MAX_REFUSALS: usize = 1024;

/// What goes through the writer's queue, in order.
enum Item {
    Slot(SlotInput),
    Mark(u64, SlotMark),
}

/// The emptied buffers of a slot the writer has finished with.
type Spare = (ChangeSet, AccountBatch);

/// A running writer. Dropping it without [`SnapshotWriter::shutdown`] still drains the queue.
pub struct SnapshotWriter {
    tx: Option<SyncSender<Item>>,
    spare: Mutex<Receiver<Spare>>,
    thread: Option<JoinHandle<()>>,
    pruner: Option<JoinHandle<()>>,
    stats: Arc<WriterStats>,
    done: Arc<(Mutex<u64>, Condvar)>,
    /// The last error while the writer is failing or stopped; `None` once it writes again.
    failure: Arc<Mutex<Option<String>>>,
    /// Fork mode: banks refused since the last [`SnapshotWriter::take_refused`].
    refused: Arc<Mutex<VecDeque<Refusal>>>,
    /// The snapshot directory.
    dir: PathBuf,
}

impl std::fmt::Debug for SnapshotWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotWriter").field("stats", &self.stats).finish_non_exhaustive()
    }
}

/// A published file as the writer and its pruner know it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Known {
    slot: u64,
    /// `u32::MAX` for a file whose header does not match its name: it never holds other files
    /// back and is pruned like any other once below every kept slot's oldest file.
    oldest_seq: u32,
    /// A part is pruned like any file but is never a kept slot itself.
    kind: FileKind,
}

/// What a starting writer finds in its directory.
struct Existing {
    /// Every published name (slot files and parts), for the pruner, by sequence number.
    files: BTreeMap<u32, Known>,
    /// The highest sequence number of a file (slot file or part) this writer's format published
    /// under that very name: numbering goes on after it. A stray or damaged name is not trusted
    /// here, so a name with the largest sequence number cannot make the writer wrap onto live
    /// files.
    last_seq: u32,
}

/// Lists the directory, removing unfinished files.
fn scan(dir: &Path) -> Result<Existing, SnapshotError> {
    let mut files = BTreeMap::new();
    let mut last_seq = 0;
    let mut invalid = Vec::new();
    let rd = std::fs::read_dir(dir).map_err(|e| SnapshotError::io("list", dir, e))?;
    for entry in rd {
        let entry = entry.map_err(|e| SnapshotError::io("list", dir, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.starts_with('.') && name.ends_with(".tmp") {
            // An unfinished file from a crash: never published, never read.
            let _ = std::fs::remove_file(entry.path());
            continue;
        }
        let Some((seq, slot, kind)) = parse_published_name(name) else { continue };
        match read_header(&entry.path()) {
            Ok(h) if h.seq == seq && h.slot == slot && FileKind::of(&h) == kind => {
                files.insert(seq, Known { slot, oldest_seq: h.oldest_seq, kind });
                last_seq = last_seq.max(seq);
            }
            Ok(h) => invalid.push((
                seq,
                slot,
                kind,
                name.to_string(),
                format!("its header says sequence {} slot {} ({:?})", h.seq, h.slot, FileKind::of(&h)),
            )),
            Err(e) => invalid.push((seq, slot, kind, name.to_string(), e.to_string())),
        }
    }
    // A damaged or foreign name numbered above every valid file would share its number with the
    // next file published. It is set aside under a name no reader serves (its bytes kept for the
    // operator), so the number is free and no reader confuses the two. Lower ones can never
    // collide: they stay, reported by readers, and are pruned like any other file.
    let mut moved = false;
    for (seq, slot, kind, name, reason) in invalid {
        if seq > last_seq {
            let to = dir.join(format!("{name}{SET_ASIDE_SUFFIX}"));
            log::warn!("snapshot {name}: {reason}; set aside as {}", to.display());
            std::fs::rename(dir.join(&name), &to).map_err(|e| SnapshotError::io("set aside", dir.join(&name), e))?;
            moved = true;
        } else {
            log::warn!("snapshot {name}: {reason}; not served");
            files.entry(seq).or_insert(Known { slot, oldest_seq: u32::MAX, kind });
        }
    }
    if moved {
        sync_dir(dir)?;
    }
    Ok(Existing { files, last_seq })
}

/// A file's header, if the file is as long as its header says. Cheap (one small read): the
/// checksum is Hyades' to check.
fn read_header(path: &Path) -> Result<Header, SnapshotError> {
    use std::io::Read;
    let mut buf = [0u8; HEADER_LEN];
    let mut f = std::fs::File::open(path).map_err(|e| SnapshotError::io("open", path, e))?;
    let len = f.metadata().map_err(|e| SnapshotError::io("stat", path, e))?.len();
    f.read_exact(&mut buf).map_err(|e| SnapshotError::io("read", path, e))?;
    let h = Header::decode(&buf).map_err(|source| SnapshotError::Header { path: path.to_path_buf(), source })?;
    let expect = (HEADER_LEN as u64 + FOOTER_LEN as u64).checked_add(h.body_len);
    if expect != Some(len) {
        return Err(SnapshotError::corrupt(path, format!("size {len} does not match its header")));
    }
    Ok(h)
}

/// The newest slot file in `dir` whose header matches its name, if any: what a recovering
/// writer continues from; and the highest number of any valid file there (parts of a write that
/// failed included), which it numbers after. Both are found on disk rather than remembered,
/// because a failure after the rename (the directory sync) may have published a file the writer
/// counted as failed.
fn newest_published(dir: &Path) -> Result<(Option<PathBuf>, u32), SnapshotError> {
    let existing = scan(dir)?;
    let newest = existing
        .files
        .iter()
        .rev()
        .find(|(_, k)| k.oldest_seq != u32::MAX && k.kind == FileKind::Slot)
        .map(|(seq, k)| dir.join(aldb_format::format::file_name(*seq, k.slot)));
    Ok((newest, existing.last_seq))
}

impl SnapshotWriter {
    /// Starts the writer (and its pruner) on `config.dir`. `on_publish` is called on the writer
    /// thread after each file is durably published.
    pub fn start(config: WriterConfig, on_publish: Option<Callback>) -> Result<Self, SnapshotError> {
        if config.every == 0 || config.keep_slots == 0 || config.queue_bound == 0 {
            return Err(SnapshotError::Input("every, keep_slots and queue_bound must be at least 1".into()));
        }
        if config.forks && config.every != 1 {
            return Err(SnapshotError::Input("fork mode writes every bank: every must be 1".into()));
        }
        std::fs::create_dir_all(&config.dir).map_err(|e| SnapshotError::io("create", &config.dir, e))?;
        let Existing { files: existing, last_seq } = scan(&config.dir)?;
        let (tx, rx) = mpsc::sync_channel::<Item>(config.queue_bound);
        let (ptx, prx) = mpsc::channel::<PruneMsg>();
        let (spare_tx, spare_rx) = mpsc::sync_channel::<Spare>(config.queue_bound + 1);
        let stats = Arc::new(WriterStats::default());
        let done = Arc::new((Mutex::new(0u64), Condvar::new()));
        let failure = Arc::new(Mutex::new(None));
        let refused = Arc::new(Mutex::new(VecDeque::new()));
        let direct = config.direct_io && supports_direct(&config.dir);
        log::info!(
            "snapshot writer on {}: {}",
            config.dir.display(),
            if direct { "direct I/O" } else { "buffered I/O" }
        );
        let part_bytes = config.part_bytes.clamp(256, MAX_FILE_BYTES);
        let serializer = Serializer::new(&config.dir, last_seq, config.refresh_slots, direct, part_bytes);
        let thread = {
            let (stats, done, failure, refused) = (stats.clone(), done.clone(), failure.clone(), refused.clone());
            let cfg = config.clone();
            std::thread::Builder::new()
                .name("aldb-snapshot".into())
                .spawn(move || {
                    let out = Outlets { on_publish, pruner: ptx, spare: spare_tx, refused };
                    run(serializer, rx, &cfg, stats, done, failure, out)
                })
                .map_err(|e| SnapshotError::io("spawn writer", &config.dir, e))?
        };
        let pruner = {
            let (dir, keep, stats) = (config.dir.clone(), config.keep_slots, stats.clone());
            let hold = config.hold_for_shipper;
            std::thread::Builder::new()
                .name("aldb-prune".into())
                .spawn(move || prune(dir, keep, hold, existing, prx, stats))
                .map_err(|e| SnapshotError::io("spawn pruner", &config.dir, e))?
        };
        Ok(Self {
            tx: Some(tx),
            spare: Mutex::new(spare_rx),
            thread: Some(thread),
            pruner: Some(pruner),
            stats,
            done,
            failure,
            refused,
            dir: config.dir.clone(),
        })
    }

    /// A startup spill in this writer's directory, with `2^bits` partitions: the startup
    /// accounts on disk until the full snapshot is written from them
    /// ([`crate::AccountBatch::from_spill`]).
    pub fn startup_spill(&self, bits: u8) -> Result<crate::StartupSpill, SnapshotError> {
        crate::StartupSpill::create(&self.dir, bits)
    }

    /// Queues a status mark for `slot`, ordered with the slots submitted before and after it.
    /// The writer appends it to the slot-status journal (`docs/FORMAT.md`); in fork mode it also
    /// releases or drops banks (see [`SnapshotWriter`] on forks).
    pub fn mark(&self, slot: u64, mark: SlotMark) -> Result<(), SnapshotError> {
        self.stats.marks.fetch_add(1, Ordering::Relaxed);
        self.send(Item::Mark(slot, mark))
    }

    /// Fork mode: the banks refused since the last call (up to 1,024 kept; `fork_refused`
    /// counts them all).
    pub fn take_refused(&self) -> Vec<Refusal> {
        self.refused.lock().map(|mut r| r.drain(..).collect()).unwrap_or_default()
    }

    /// The writer's counters.
    pub fn stats(&self) -> &Arc<WriterStats> {
        &self.stats
    }

    /// Empty buffers to fill for the next slot: those of a slot already written when one is
    /// back (with its capacity), fresh ones otherwise. Reusing them keeps a slot's megabytes of
    /// change set and account data from being faulted in anew every slot.
    pub fn spare_buffers(&self) -> (ChangeSet, AccountBatch) {
        self.take_spare().unwrap_or_else(|| (ChangeSet::new(CAPTURE_OPTIONS), AccountBatch::default()))
    }

    /// The emptied buffers of a slot already written, if one is back; never allocates.
    pub fn take_spare(&self) -> Option<(ChangeSet, AccountBatch)> {
        self.spare.lock().ok().and_then(|rx| rx.try_recv().ok())
    }

    /// Queues one slot. Waits if the queue is full (see the module docs for why).
    /// While the writer is failing, submissions are accepted (and held); only a writer stopped
    /// for good refuses them.
    pub fn submit(&self, input: SlotInput) -> Result<(), SnapshotError> {
        self.send(Item::Slot(input))
    }

    fn send(&self, input: Item) -> Result<(), SnapshotError> {
        if self.stats.stopped.load(Ordering::Relaxed) != 0 {
            let reason = self.failure.lock().ok().and_then(|f| f.clone()).unwrap_or_default();
            return Err(SnapshotError::Stopped(reason));
        }
        let Some(tx) = &self.tx else { return Err(SnapshotError::Stopped("shut down".into())) };
        self.stats.submitted.fetch_add(1, Ordering::Relaxed);
        match tx.try_send(input) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(input)) => {
                self.stats.full_waits.fetch_add(1, Ordering::Relaxed);
                let t = Instant::now();
                let r = tx.send(input).map_err(|_| SnapshotError::Stopped("writer thread exited".into()));
                self.stats.wait_nanos.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
                r
            }
            Err(TrySendError::Disconnected(_)) => Err(SnapshotError::Stopped("writer thread exited".into())),
        }
    }

    /// Waits until every submitted slot has been processed (written, or held while failing);
    /// returns the writer's error if it is failing or stopped.
    pub fn flush(&self) -> Result<(), SnapshotError> {
        let target = self.stats.submitted.load(Ordering::Relaxed);
        let (lock, cv) = &*self.done;
        let mut processed = lock.lock().map_err(|_| SnapshotError::Stopped("writer panicked".into()))?;
        while *processed < target {
            if self.stats.stopped.load(Ordering::Relaxed) != 0 {
                let reason = self.failure.lock().ok().and_then(|f| f.clone()).unwrap_or_default();
                return Err(SnapshotError::Stopped(reason));
            }
            processed = cv
                .wait_timeout(processed, std::time::Duration::from_millis(50))
                .map_err(|_| SnapshotError::Stopped("writer panicked".into()))?
                .0;
        }
        match self.failure.lock().ok().and_then(|f| f.clone()) {
            Some(reason) => Err(SnapshotError::Stopped(reason)),
            None => Ok(()),
        }
    }

    /// Drains the queue, stops the threads and reports the writer's error if any.
    pub fn shutdown(mut self) -> Result<(), SnapshotError> {
        self.stop();
        match self.failure.lock().ok().and_then(|f| f.clone()) {
            Some(reason) => Err(SnapshotError::Stopped(reason)),
            None => Ok(()),
        }
    }

    fn stop(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(t) = self.pruner.take() {
            let _ = t.join();
        }
    }
}

impl Drop for SnapshotWriter {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Slots merged while waiting for the next published one (`every > 1`).
#[derive(Default)]
struct Pending {
    count: u64,
    full: bool,
    slot: u64,
    parent: Option<u64>,
    root: Hash,
    bucket_bits: u8,
    options: CaptureOptions,
    nodes: HashMap<(u8, u64), Hash>,
    /// By bucket index (ordered, as a change set lists its buckets): hash and leaf paths.
    buckets: BTreeMap<u64, (Hash, Vec<Hash>)>,
    accounts: Vec<AccountBatch>,
}

impl Pending {
    fn add(&mut self, input: SlotInput) {
        if input.full {
            self.nodes.clear();
            self.buckets.clear();
            self.accounts.clear();
            self.full = true;
        }
        self.count += 1;
        self.slot = input.slot;
        self.parent = input.parent;
        self.root = input.root;
        self.bucket_bits = input.changes.bucket_bits();
        self.options = input.changes.options();
        for n in input.changes.nodes() {
            self.nodes.insert((n.level, n.index), n.hash);
        }
        for b in input.changes.buckets() {
            self.buckets.insert(b.index, (b.hash, b.paths.to_vec()));
        }
        self.accounts.push(input.accounts);
    }

    /// Bytes of account data held.
    fn account_bytes(&self) -> usize {
        self.accounts.iter().map(AccountBatch::heap_bytes).sum()
    }

    /// Keeps only the newest version of each account, in one batch: what a failing writer does
    /// before giving up on memory, since most slots rewrite the same hot accounts.
    fn compact(&mut self) {
        let mut newest: HashMap<Hash, (usize, usize)> = HashMap::new();
        for (bi, b) in self.accounts.iter().enumerate() {
            for (i, e) in b.entries().iter().enumerate() {
                newest.insert(e.path, (bi, i));
            }
        }
        let mut out = AccountBatch::default();
        // A spilled full state stays on disk; only the accounts merged on top are compacted.
        if let Some(spill) = self.accounts.iter_mut().find_map(AccountBatch::take_spill) {
            out = AccountBatch::from_spill(spill);
        }
        for (bi, b) in self.accounts.iter().enumerate() {
            for (i, e) in b.entries().iter().enumerate() {
                if newest.get(&e.path) == Some(&(bi, i))
                    && let Some(a) = b.get(i)
                {
                    out.push(e.path, &a);
                }
            }
        }
        self.accounts = vec![out];
    }

    fn take(&mut self) -> SlotInput {
        // The serializer only reads leaf paths, so merged leaf values are not kept.
        let mut changes = ChangeSet::by_hand(self.bucket_bits, self.options.without_leaf_values());
        for ((level, index), hash) in self.nodes.drain() {
            changes.push_node(level, index, hash);
        }
        for (index, (hash, paths)) in std::mem::take(&mut self.buckets) {
            changes.push_bucket(index, hash, &paths, &[]);
        }
        let mut accounts = AccountBatch::default();
        if let Some(spill) = self.accounts.iter_mut().find_map(AccountBatch::take_spill) {
            accounts = AccountBatch::from_spill(spill);
        }
        for batch in self.accounts.drain(..) {
            for i in 0..batch.len() {
                if let (Some(a), Some(e)) = (batch.get(i), batch.entries().get(i)) {
                    accounts.push(e.path, &a);
                }
            }
        }
        let full = std::mem::take(&mut self.full);
        self.count = 0;
        SlotInput { slot: self.slot, parent: self.parent, root: self.root, changes, accounts, full }
    }
}

/// Where the writer thread sends what it is done with.
struct Outlets {
    on_publish: Option<Callback>,
    pruner: mpsc::Sender<PruneMsg>,
    spare: SyncSender<Spare>,
    refused: Arc<Mutex<VecDeque<Refusal>>>,
}

/// What the pruner hears from the writer.
enum PruneMsg {
    /// A file was published. `newest`: the newest slot published (the keep window ends there);
    /// `pin`: in fork mode, the oldest file a held bank may reach.
    Published { p: Published, newest: u64, pin: Option<u32> },
    /// Fork mode: the held banks changed (a mark), so the pin may have moved.
    Pin(Option<u32>),
}

/// A writer that failed: what it holds until it can write again.
struct Failing {
    /// The slot that failed and every slot since, merged.
    merged: Pending,
    /// The newest slot published before the failure.
    gap_after: Option<u64>,
    /// Account bytes held when the failure began (a failed full state is held whole).
    base_bytes: usize,
    next_try: Instant,
    backoff: Duration,
}

/// The writer thread's state.
struct Run {
    ser: Serializer,
    dir: PathBuf,
    stats: Arc<WriterStats>,
    failure: Arc<Mutex<Option<String>>>,
    out: Outlets,
    max_recovery_bytes: usize,
    last_published: Option<u64>,
    failing: Option<Failing>,
    stopped: bool,
    /// Fork mode: the written banks; `None` on a single chain.
    forks: Option<Banks>,
    max_fork_banks: usize,
    max_fork_bytes: usize,
    /// Fork mode: whether resuming from the files on disk was tried since the tables were last
    /// lost (it reads the whole tree, so once).
    resume_tried: bool,
    /// The slot-status journal, opened on first use.
    journal: Option<StatusJournal>,
    keep_slots: u64,
    /// The newest slot published.
    newest: Option<u64>,
    /// Journal entries left by the last compaction: the next one waits until the file doubles.
    journal_kept: u64,
    /// Fork mode: the held banks' pin and base as of the last change (the banks themselves are
    /// taken out of `forks` while a write uses them).
    fork_pin: Option<u32>,
    fork_base: Option<u64>,
    /// [`WriterConfig::forks`].
    fork_mode: bool,
    /// [`WriterConfig::return_refused`].
    return_refused: bool,
}

impl Run {
    fn published(&mut self, p: Published, started: Instant) {
        let stats = &self.stats;
        stats.write_nanos.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        stats.published.fetch_add(1, Ordering::Relaxed);
        stats.last_slot.store(p.slot, Ordering::Relaxed);
        stats.bytes.fetch_add(p.bytes, Ordering::Relaxed);
        stats.account_bytes.fetch_add(p.account_bytes, Ordering::Relaxed);
        stats.refresh_bytes.fetch_add(p.refresh_bytes, Ordering::Relaxed);
        stats.table_bytes.store(self.ser.table_bytes() as u64, Ordering::Relaxed);
        self.last_published = Some(p.slot);
        if let Some(cb) = self.out.on_publish.as_mut() {
            cb(&p);
        }
        // On forks publication order is not slot order; a single chain keeps its old rule.
        let newest = if self.fork_mode { self.newest.map_or(p.slot, |n| n.max(p.slot)) } else { p.slot };
        self.newest = Some(newest);
        let pin = self.fork_pin;
        let _ = self.out.pruner.send(PruneMsg::Published { p, newest, pin });
    }

    fn set_failure(&self, reason: Option<String>) {
        if let Ok(mut f) = self.failure.lock() {
            *f = reason;
        }
    }

    /// Writes one input while healthy; on an error, starts failing with it held.
    fn write(&mut self, input: SlotInput) {
        let t = Instant::now();
        match self.ser.write(&input) {
            Ok(p) => {
                self.published(p, t);
                self.recycle(input);
            }
            Err(e) => {
                log::error!("snapshot writer: slot {} not written, holding slots and retrying: {e}", input.slot);
                self.stats.errors.fetch_add(1, Ordering::Relaxed);
                self.stats.failing.store(1, Ordering::Relaxed);
                self.set_failure(Some(e.to_string()));
                self.ser.invalidate();
                let mut merged = Pending::default();
                merged.add(input);
                let base_bytes = merged.account_bytes();
                self.failing = Some(Failing {
                    merged,
                    gap_after: self.last_published,
                    base_bytes,
                    next_try: Instant::now() + RETRY_FIRST,
                    backoff: RETRY_FIRST,
                });
            }
        }
    }

    /// Holds one more slot while failing, within the memory bound.
    fn hold(&mut self, input: SlotInput) {
        let Some(f) = self.failing.as_mut() else { return };
        f.merged.add(input);
        let limit = f.base_bytes.saturating_add(self.max_recovery_bytes);
        if f.merged.account_bytes() > limit {
            f.merged.compact();
        }
        let held = f.merged.account_bytes();
        if held > limit {
            let reason = format!(
                "snapshot writer stopped until restart: {held} bytes of account data held since slot {} could not be \
                 written (max_recovery_bytes {})",
                f.gap_after.map_or("start".to_string(), |s| s.to_string()),
                self.max_recovery_bytes
            );
            log::error!("{reason}");
            self.set_failure(Some(reason));
            self.stop_for_good();
        }
    }

    fn stop_for_good(&mut self) {
        self.failing = None;
        self.stopped = true;
        self.stats.stopped.store(1, Ordering::Relaxed);
    }

    /// Tries to write what a failing writer holds: rebuilds the tables from the newest file on
    /// disk unless what is held is a full state, then writes it as one file marked with the gap.
    fn retry(&mut self) {
        let Some(mut f) = self.failing.take() else { return };
        let merged_slots = f.merged.count;
        let input = f.merged.take();
        let t = Instant::now();
        let attempt = (|| {
            let (newest, last_seq) = newest_published(&self.dir)?;
            self.ser.continue_after(last_seq);
            if !input.full {
                match newest {
                    Some(path) => self.ser.recover(&path)?,
                    None => {
                        return Err(SnapshotError::Input(
                            "no published file to continue from and no full state held".into(),
                        ));
                    }
                }
            }
            self.ser.mark_gap(f.gap_after);
            self.ser.write(&input)
        })();
        match attempt {
            Ok(p) => {
                log::warn!(
                    "snapshot writer recovered: slot {} published after a gap of {} unwritten slots since {}",
                    p.slot,
                    merged_slots - 1,
                    f.gap_after.map_or("start".to_string(), |s| s.to_string())
                );
                self.stats.gap_slots.fetch_add(merged_slots - 1, Ordering::Relaxed);
                self.stats.recoveries.fetch_add(1, Ordering::Relaxed);
                self.stats.failing.store(0, Ordering::Relaxed);
                self.set_failure(None);
                self.published(p, t);
            }
            Err(e) => {
                self.stats.errors.fetch_add(1, Ordering::Relaxed);
                self.ser.invalidate();
                f.backoff = (f.backoff * 2).min(RETRY_MAX);
                log::error!("snapshot writer: retry failed, next in {:?}: {e}", f.backoff);
                self.set_failure(Some(e.to_string()));
                f.next_try = Instant::now() + f.backoff;
                f.merged.add(input);
                // Still every slot since the failure, not the one merged input.
                f.merged.count = merged_slots;
                self.failing = Some(f);
            }
        }
    }

    /// Reports a refused bank, with its input when the caller asked for it back, else empties
    /// the input for reuse.
    fn refuse(&mut self, slot: u64, error: SnapshotError, input: SlotInput) {
        log::warn!("snapshot writer: {error}");
        self.stats.fork_refused.fetch_add(1, Ordering::Relaxed);
        let (input, spare) = if self.return_refused { (Some(input), None) } else { (None, Some(input)) };
        if let Ok(mut r) = self.out.refused.lock() {
            if r.len() >= MAX_REFUSALS {
                r.pop_front();
            }
            r.push_back(Refusal { slot, error, input });
        }
        if let Some(input) = spare {
            self.recycle(input);
        }
    }

    /// Appends to the slot-status journal, opening it on first use. A failure is logged and
    /// counted, never fatal: the snapshot files stay correct without it.
    fn journal(&mut self, entries: &[StatusEntry]) {
        if entries.is_empty() {
            return;
        }
        let result = match self.journal.as_mut() {
            Some(j) => j.append(entries),
            None => StatusJournal::open(&self.dir).and_then(|mut j| {
                let r = j.append(entries);
                self.journal = Some(j);
                r
            }),
        };
        if let Err(e) = result {
            log::error!("slot-status journal: {e}");
            self.stats.journal_errors.fetch_add(1, Ordering::Relaxed);
            // Reopened (and its torn tail cut) on the next append.
            self.journal = None;
        }
        self.compact_journal();
    }

    /// Drops the journal entries of slots below every kept one, once the file has doubled since
    /// the last compaction.
    fn compact_journal(&mut self) {
        let Some(j) = self.journal.as_mut() else { return };
        if j.entries() < 2 * self.journal_kept + 1024 {
            return;
        }
        let window = self.newest.map_or(0, |n| n.saturating_sub(self.keep_slots - 1));
        let keep_from = match self.fork_base {
            Some(base) => window.min(base),
            None => window,
        };
        match j.compact(keep_from) {
            Ok(_) => self.journal_kept = j.entries(),
            Err(e) => {
                log::error!("slot-status journal: compaction failed: {e}");
                self.stats.journal_errors.fetch_add(1, Ordering::Relaxed);
                self.journal = None;
            }
        }
    }

    /// Notes what the held banks changed: the pin the serializer and the pruner keep files
    /// from, the base the journal is compacted to, the gauges.
    fn sync_banks(&mut self, b: &Banks) {
        self.fork_pin = b.pin();
        self.fork_base = b.base();
        if let Some(pin) = self.fork_pin {
            self.ser.keep_files_from(pin);
        }
        self.stats.fork_banks.store(b.len() as u64, Ordering::Relaxed);
        self.stats.fork_held_bytes.store(b.held_bytes() as u64, Ordering::Relaxed);
    }

    fn moved(&self, m: crate::forks::Moved) {
        if m.rolled_back + m.reapplied > 0 {
            self.stats.fork_switches.fetch_add(1, Ordering::Relaxed);
            self.stats.fork_rolled_back.fetch_add(m.rolled_back, Ordering::Relaxed);
            self.stats.fork_reapplied.fetch_add(m.reapplied, Ordering::Relaxed);
        }
    }

    /// Fork mode after a start (or after losing the tables): rebuilds them from the files on
    /// disk, at the newest finalized slot the journal names whose file is present, else at the
    /// newest file (a directory written as a single chain). That bank becomes the base.
    fn resume(&mut self, banks: &mut Banks) -> Result<(), SnapshotError> {
        self.resume_tried = true;
        let existing = scan(&self.dir)?;
        self.ser.continue_after(existing.last_seq);
        let valid = |slot: Option<u64>| {
            existing
                .files
                .iter()
                .rev()
                .find(|(_, k)| k.oldest_seq != u32::MAX && k.kind == FileKind::Slot && slot.is_none_or(|s| k.slot == s))
                .map(|(seq, k)| (*seq, k.slot, k.oldest_seq))
        };
        let finalized = StatusJournal::read(&self.dir).ok().and_then(|st| st.newest_finalized());
        let Some((seq, slot, oldest)) = finalized.and_then(|f| valid(Some(f))).or_else(|| valid(None)) else {
            return Err(SnapshotError::Input("no published file to resume from".into()));
        };
        self.ser.recover(&self.dir.join(aldb_format::format::file_name(seq, slot)))?;
        banks.reset_to(slot, oldest);
        self.sync_banks(banks);
        log::info!("snapshot writer: fork mode resumes from slot {slot} (file {seq})");
        Ok(())
    }

    /// Fork mode: writes one bank against its parent's state, or refuses it.
    fn write_fork(&mut self, input: SlotInput) {
        let slot = input.slot;
        let Some(mut banks) = self.forks.take() else { return };
        let t = Instant::now();
        let result = self.write_bank(&mut banks, &input, t);
        self.sync_banks(&banks);
        self.forks = Some(banks);
        match result {
            Ok(()) => self.recycle(input),
            Err(e) => self.refuse(slot, e, input),
        }
    }

    fn write_bank(&mut self, banks: &mut Banks, input: &SlotInput, t: Instant) -> Result<(), SnapshotError> {
        let slot = input.slot;
        if input.full {
            banks.clear();
            let p = match self.ser.write(input) {
                Ok(p) => p,
                Err(e) => {
                    self.ser.invalidate();
                    self.resume_tried = false;
                    self.stats.errors.fetch_add(1, Ordering::Relaxed);
                    return Err(e);
                }
            };
            banks.reset_to(slot, p.oldest_seq);
            self.sync_banks(banks);
            self.journal(&[StatusEntry {
                slot,
                kind: SlotStatusKind::Processed,
                parent: input.parent,
                seq: Some(p.seq),
            }]);
            self.published(p, t);
            return Ok(());
        }
        if !self.ser.started() {
            if self.resume_tried {
                return Err(SnapshotError::ParentNotWritten { slot, parent: input.parent });
            }
            if let Err(e) = self.resume(banks) {
                log::warn!("snapshot writer: cannot resume fork mode from the files on disk: {e}");
                self.ser.invalidate();
                return Err(SnapshotError::ParentNotWritten { slot, parent: input.parent });
            }
        }
        let parent = input.parent.ok_or(SnapshotError::ParentNotWritten { slot, parent: None })?;
        if banks.contains(slot) {
            // Frozen again (a repeated CreatedBank): the old version and its descendants go.
            let parent_of = banks.parent_of(slot);
            let dropped = banks.drop_subtree(&mut self.ser, slot)?;
            let entries: Vec<StatusEntry> = dropped
                .iter()
                .map(|&s| StatusEntry {
                    slot: s,
                    kind: SlotStatusKind::Abandoned,
                    parent: if s == slot { parent_of } else { None },
                    seq: None,
                })
                .collect();
            self.stats.fork_dropped.fetch_add(dropped.len() as u64, Ordering::Relaxed);
            self.sync_banks(banks);
            self.journal(&entries);
        }
        if !banks.contains(parent) {
            return Err(SnapshotError::ParentNotWritten { slot, parent: Some(parent) });
        }
        if banks.len() >= self.max_fork_banks || banks.held_bytes() >= self.max_fork_bytes {
            return Err(SnapshotError::TooManyBanks { slot, banks: banks.len(), bytes: banks.held_bytes() });
        }
        let moved = banks.switch(&mut self.ser, parent)?;
        self.moved(moved);
        self.ser.record();
        match self.ser.write(input) {
            Ok(p) => {
                let log = self.ser.finish_record();
                banks.insert(slot, parent, p.oldest_seq, log);
                self.sync_banks(banks);
                self.journal(&[StatusEntry {
                    slot,
                    kind: SlotStatusKind::Processed,
                    parent: Some(parent),
                    seq: Some(p.seq),
                }]);
                self.published(p, t);
                Ok(())
            }
            Err(e) => {
                // The tables go back to the parent's state; this bank and its descendants are
                // refused, other forks go on.
                self.ser.abort_record();
                self.stats.errors.fetch_add(1, Ordering::Relaxed);
                Err(e)
            }
        }
    }

    /// A status mark: in fork mode releases or drops banks; always journaled, with what it
    /// implied (ancestors finalized with the slot, banks dropped).
    fn mark(&mut self, slot: u64, mark: SlotMark) {
        let entry = |slot, kind, parent| StatusEntry { slot, kind, parent, seq: None };
        let mut entries = Vec::new();
        let parent = self.forks.as_ref().and_then(|b| b.parent_of(slot));
        match (mark, self.forks.as_mut()) {
            (SlotMark::Confirmed, _) => entries.push(entry(slot, SlotStatusKind::Confirmed, parent)),
            (SlotMark::Finalized, None) => entries.push(entry(slot, SlotStatusKind::Finalized, None)),
            (SlotMark::Abandoned, None) => entries.push(entry(slot, SlotStatusKind::Abandoned, None)),
            (SlotMark::Finalized, Some(banks)) => match banks.finalize(&mut self.ser, slot) {
                Ok(f) => {
                    let f = f.unwrap_or_default();
                    entries.extend(f.ancestors.iter().map(|&s| entry(s, SlotStatusKind::Finalized, None)));
                    entries.push(entry(slot, SlotStatusKind::Finalized, parent));
                    entries.extend(f.abandoned.iter().map(|&s| entry(s, SlotStatusKind::Abandoned, None)));
                    self.stats.fork_dropped.fetch_add(f.abandoned.len() as u64, Ordering::Relaxed);
                }
                Err(e) => {
                    log::error!("snapshot writer: finalizing slot {slot}: {e}");
                    entries.push(entry(slot, SlotStatusKind::Finalized, parent));
                }
            },
            (SlotMark::Abandoned, Some(banks)) => match banks.drop_subtree(&mut self.ser, slot) {
                Ok(dropped) => {
                    self.stats.fork_dropped.fetch_add(dropped.len() as u64, Ordering::Relaxed);
                    if dropped.first() != Some(&slot) {
                        entries.push(entry(slot, SlotStatusKind::Abandoned, parent));
                    }
                    entries.extend(dropped.iter().map(|&s| entry(s, SlotStatusKind::Abandoned, None)));
                    if let Some(e) = entries.first_mut() {
                        e.parent = parent;
                    }
                }
                Err(e) => log::warn!("snapshot writer: slot {slot} marked abandoned: {e}"),
            },
        }
        if let Some(b) = self.forks.take() {
            self.sync_banks(&b);
            self.forks = Some(b);
            let _ = self.out.pruner.send(PruneMsg::Pin(self.fork_pin));
        }
        self.journal(&entries);
    }

    fn recycle(&mut self, input: SlotInput) {
        let SlotInput { mut changes, mut accounts, .. } = input;
        changes.clear();
        accounts.clear();
        // Nobody asking for spares (or enough already waiting) just drops them.
        let _ = self.out.spare.try_send((changes, accounts));
    }
}

fn run(
    ser: Serializer,
    rx: Receiver<Item>,
    config: &WriterConfig,
    stats: Arc<WriterStats>,
    done: Arc<(Mutex<u64>, Condvar)>,
    failure: Arc<Mutex<Option<String>>>,
    out: Outlets,
) {
    let every = config.every;
    let mut w = Run {
        ser,
        dir: config.dir.clone(),
        stats,
        failure,
        out,
        max_recovery_bytes: config.max_recovery_bytes,
        last_published: None,
        failing: None,
        stopped: false,
        forks: config.forks.then(Banks::default),
        max_fork_banks: config.max_fork_banks,
        max_fork_bytes: config.max_fork_bytes,
        resume_tried: false,
        journal: None,
        keep_slots: config.keep_slots,
        newest: None,
        journal_kept: 0,
        fork_pin: None,
        fork_base: None,
        fork_mode: config.forks,
        return_refused: config.return_refused,
    };
    let mut pending = Pending::default();
    loop {
        let next = match w.failing.as_ref().map(|f| f.next_try.saturating_duration_since(Instant::now())) {
            None => rx.recv().ok(),
            Some(wait) => match rx.recv_timeout(wait) {
                Ok(input) => Some(input),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    // Shutting down while failing: one last try, so a transient fault that has
                    // passed loses nothing.
                    w.retry();
                    break;
                }
            },
        };
        let Some(item) = next else {
            if w.failing.is_none() {
                break;
            }
            w.retry();
            continue;
        };
        let input = match item {
            Item::Mark(slot, mark) => {
                w.mark(slot, mark);
                None
            }
            Item::Slot(input) => Some(input),
        };
        if let Some(input) = input {
            w.slot(input, every, &mut pending);
        }
        // Processed even when held or dropped, so flush() never waits forever.
        w.stats.processed.fetch_add(1, Ordering::Relaxed);
        let (lock, cv) = &*done;
        if let Ok(mut n) = lock.lock() {
            *n += 1;
        }
        cv.notify_all();
    }
}

impl Run {
    fn slot(&mut self, input: SlotInput, every: u64, pending: &mut Pending) {
        let w = self;
        if w.stopped {
            // Stopped for good: submissions are refused, but one racing the stop is dropped.
        } else if w.failing.is_some() {
            w.hold(input);
            if w.failing.as_ref().is_some_and(|f| Instant::now() >= f.next_try) {
                w.retry();
            }
        } else if w.forks.is_some() {
            w.write_fork(input);
        } else if every == 1 {
            w.write(input);
        } else {
            pending.add(input);
            if pending.count >= every {
                w.write(pending.take());
            }
        }
    }
}

/// The lowest sequence number the archive may still lack: nothing at or above it may be deleted.
/// No hold file yet, or one that cannot be read, holds everything (a warning says why).
fn shipped_below(dir: &Path) -> u32 {
    match aldb_format::shipped::read_shipped(dir) {
        Ok(Some(seq)) => u32::try_from(seq).unwrap_or(u32::MAX),
        Ok(None) => 0,
        Err(e) => {
            log::warn!("retention held for the shipper: {e}");
            0
        }
    }
}

/// Deletes files no kept slot can reach: everything older than the oldest file a kept slot's
/// records may point into.
fn prune(
    dir: PathBuf,
    keep: u64,
    hold_for_shipper: bool,
    mut files: BTreeMap<u32, Known>,
    rx: Receiver<PruneMsg>,
    stats: Arc<WriterStats>,
) {
    let mut newest = None;
    for msg in rx {
        let pin = match msg {
            PruneMsg::Published { p, newest: n, pin } => {
                let (slot, oldest_seq) = (p.slot, p.oldest_seq);
                for seq in p.first_seq..p.seq {
                    files.insert(seq, Known { slot, oldest_seq, kind: FileKind::Part });
                }
                files.insert(p.seq, Known { slot, oldest_seq, kind: FileKind::Slot });
                newest = Some((n, p.oldest_seq));
                pin
            }
            PruneMsg::Pin(pin) => pin,
        };
        let Some((newest, last_oldest)) = newest else { continue };
        // Kept: the slots of the keep window, and in fork mode every bank the writer holds
        // (files above the oldest one a held bank reaches are never deleted). Parts are not
        // slots: they are kept by the slot files that reach them, and a part left by a write
        // that failed is deleted once it falls below every kept slot's oldest file.
        let min_oldest = files
            .values()
            .filter(|k| k.kind == FileKind::Slot && newest.saturating_sub(k.slot) < keep)
            .map(|k| k.oldest_seq)
            .chain(pin)
            .min()
            .unwrap_or(last_oldest);
        let min_oldest = if hold_for_shipper { min_oldest.min(shipped_below(&dir)) } else { min_oldest };
        let doomed: Vec<(u32, Known)> = files.range(..min_oldest).map(|(seq, k)| (*seq, *k)).collect();
        if doomed.is_empty() {
            continue;
        }
        for (seq, k) in doomed {
            let path = dir.join(published_name(seq, k.slot, k.kind));
            match std::fs::remove_file(&path) {
                Ok(()) => {
                    stats.pruned_files.fetch_add(1, Ordering::Relaxed);
                    files.remove(&seq);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    files.remove(&seq);
                }
                Err(e) => log::warn!("cannot prune {}: {e}", path.display()),
            }
        }
        if let Err(e) = sync_dir(&dir) {
            log::warn!("{e}");
        }
    }
}
