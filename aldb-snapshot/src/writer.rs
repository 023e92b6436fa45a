//! The snapshot writer: its own thread beside the engine, fed through a bounded queue.
//!
//! Policy when the queue is full: the committing thread waits (backpressure). Skipping a slot
//! would leave a gap in the proofs served, and dropping a change set would corrupt every later
//! snapshot; waiting instead slows commits to the disk's pace, and the time spent waiting is
//! counted so operators see it (`full_waits`, `wait_nanos`). Pruning runs on a third thread and
//! only ever deletes files no kept slot can reach, so it never blocks or breaks the writer.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use aldb_core::{CaptureOptions, ChangeSet};
use aldb_verify::spec::Hash;

use crate::batch::AccountBatch;
use crate::error::SnapshotError;
use crate::file_builder::{supports_direct, sync_dir};
use crate::format::{parse_file_name, Header, HEADER_LEN};
use crate::serializer::{Published, Serializer, SlotInput, CAPTURE_OPTIONS};

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
}

impl WriterConfig {
    /// Defaults for a directory: every slot, keep 1000 slots, refresh over 512 slots, queue of 4,
    /// direct I/O where supported.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into(), every: 1, keep_slots: 1000, refresh_slots: 512, queue_bound: 4, direct_io: true }
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
    /// Errors (the writer stops at the first).
    pub errors: AtomicU64,
}

impl WriterStats {
    /// Slots submitted but not yet processed.
    pub fn queue_depth(&self) -> u64 {
        self.submitted.load(Ordering::Relaxed).saturating_sub(self.processed.load(Ordering::Relaxed))
    }
}

type Callback = Box<dyn FnMut(&Published) + Send>;

/// The emptied buffers of a slot the writer has finished with.
type Spare = (ChangeSet, AccountBatch);

/// A running writer. Dropping it without [`SnapshotWriter::shutdown`] still drains the queue.
pub struct SnapshotWriter {
    tx: Option<SyncSender<SlotInput>>,
    spare: Mutex<Receiver<Spare>>,
    thread: Option<JoinHandle<()>>,
    pruner: Option<JoinHandle<()>>,
    stats: Arc<WriterStats>,
    done: Arc<(Mutex<u64>, Condvar)>,
    failure: Arc<Mutex<Option<String>>>,
}

impl std::fmt::Debug for SnapshotWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotWriter").field("stats", &self.stats).finish_non_exhaustive()
    }
}

/// Existing files in a directory: `(seq, slot, oldest_seq)`, after removing unfinished ones.
fn scan(dir: &Path) -> Result<BTreeMap<u32, (u64, u32)>, SnapshotError> {
    let mut out = BTreeMap::new();
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
        let Some((seq, slot)) = parse_file_name(name) else { continue };
        let oldest = read_header(&entry.path()).map(|h| h.oldest_seq).unwrap_or(seq);
        out.insert(seq, (slot, oldest));
    }
    Ok(out)
}

fn read_header(path: &Path) -> Option<Header> {
    use std::io::Read;
    let mut buf = [0u8; HEADER_LEN];
    std::fs::File::open(path).ok()?.read_exact(&mut buf).ok()?;
    Header::decode(&buf).ok()
}

impl SnapshotWriter {
    /// Starts the writer (and its pruner) on `config.dir`. `on_publish` is called on the writer
    /// thread after each file is durably published.
    pub fn start(config: WriterConfig, on_publish: Option<Callback>) -> Result<Self, SnapshotError> {
        if config.every == 0 || config.keep_slots == 0 || config.queue_bound == 0 {
            return Err(SnapshotError::Input("every, keep_slots and queue_bound must be at least 1".into()));
        }
        std::fs::create_dir_all(&config.dir).map_err(|e| SnapshotError::io("create", &config.dir, e))?;
        let existing = scan(&config.dir)?;
        let last_seq = existing.keys().next_back().copied().unwrap_or(0);
        let (tx, rx) = mpsc::sync_channel::<SlotInput>(config.queue_bound);
        let (ptx, prx) = mpsc::channel::<Published>();
        let (spare_tx, spare_rx) = mpsc::sync_channel::<Spare>(config.queue_bound + 1);
        let stats = Arc::new(WriterStats::default());
        let done = Arc::new((Mutex::new(0u64), Condvar::new()));
        let failure = Arc::new(Mutex::new(None));
        let direct = config.direct_io && supports_direct(&config.dir);
        log::info!(
            "snapshot writer on {}: {}",
            config.dir.display(),
            if direct { "direct I/O" } else { "buffered I/O" }
        );
        let serializer = Serializer::new(&config.dir, last_seq, config.refresh_slots, direct);
        let thread = {
            let (stats, done, failure) = (stats.clone(), done.clone(), failure.clone());
            let every = config.every;
            std::thread::Builder::new()
                .name("aldb-snapshot".into())
                .spawn(move || {
                    let out = Outlets { on_publish, pruner: ptx, spare: spare_tx };
                    run(serializer, rx, every, stats, done, failure, out)
                })
                .map_err(|e| SnapshotError::io("spawn writer", &config.dir, e))?
        };
        let pruner = {
            let (dir, keep, stats) = (config.dir.clone(), config.keep_slots, stats.clone());
            std::thread::Builder::new()
                .name("aldb-prune".into())
                .spawn(move || prune(dir, keep, existing, prx, stats))
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
        })
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
    pub fn submit(&self, input: SlotInput) -> Result<(), SnapshotError> {
        if let Some(reason) = self.failure.lock().ok().and_then(|f| f.clone()) {
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

    /// Waits until every submitted slot has been processed; returns the writer's error if any.
    pub fn flush(&self) -> Result<(), SnapshotError> {
        let target = self.stats.submitted.load(Ordering::Relaxed);
        let (lock, cv) = &*self.done;
        let mut processed = lock.lock().map_err(|_| SnapshotError::Stopped("writer panicked".into()))?;
        while *processed < target {
            if let Some(reason) = self.failure.lock().ok().and_then(|f| f.clone()) {
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
    pruner: mpsc::Sender<Published>,
    spare: SyncSender<Spare>,
}

fn run(
    mut ser: Serializer,
    rx: Receiver<SlotInput>,
    every: u64,
    stats: Arc<WriterStats>,
    done: Arc<(Mutex<u64>, Condvar)>,
    failure: Arc<Mutex<Option<String>>>,
    mut out: Outlets,
) {
    let mut pending = Pending::default();
    let mut failed = false;
    for input in rx {
        if !failed {
            let to_write = if every == 1 {
                Some(input)
            } else {
                pending.add(input);
                (pending.count >= every).then(|| pending.take())
            };
            if let Some(input) = to_write {
                let t = Instant::now();
                match ser.write(&input) {
                    Ok(p) => {
                        stats.write_nanos.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
                        stats.published.fetch_add(1, Ordering::Relaxed);
                        stats.last_slot.store(p.slot, Ordering::Relaxed);
                        stats.bytes.fetch_add(p.bytes, Ordering::Relaxed);
                        stats.account_bytes.fetch_add(p.account_bytes, Ordering::Relaxed);
                        stats.refresh_bytes.fetch_add(p.refresh_bytes, Ordering::Relaxed);
                        if let Some(cb) = out.on_publish.as_mut() {
                            cb(&p);
                        }
                        let _ = out.pruner.send(p);
                    }
                    Err(e) => {
                        log::error!("snapshot writer stopped: {e}");
                        stats.errors.fetch_add(1, Ordering::Relaxed);
                        if let Ok(mut f) = failure.lock() {
                            *f = Some(e.to_string());
                        }
                        failed = true;
                    }
                }
                let SlotInput { mut changes, mut accounts, .. } = input;
                changes.clear();
                accounts.clear();
                // Nobody asking for spares (or enough already waiting) just drops them.
                let _ = out.spare.try_send((changes, accounts));
            }
        }
        // Processed even when failed, so flush() never waits forever.
        stats.processed.fetch_add(1, Ordering::Relaxed);
        let (lock, cv) = &*done;
        if let Ok(mut n) = lock.lock() {
            *n += 1;
        }
        cv.notify_all();
    }
}

/// Deletes files no kept slot can reach: everything older than the oldest file a kept slot's
/// records may point into.
fn prune(dir: PathBuf, keep: u64, mut files: BTreeMap<u32, (u64, u32)>, rx: Receiver<Published>, stats: Arc<WriterStats>) {
    for p in rx {
        files.insert(p.seq, (p.slot, p.oldest_seq));
        let newest = p.slot;
        let min_oldest = files
            .iter()
            .filter(|(_, (slot, _))| newest.saturating_sub(*slot) < keep)
            .map(|(_, (_, oldest))| *oldest)
            .min()
            .unwrap_or(p.oldest_seq);
        let doomed: Vec<(u32, u64)> =
            files.range(..min_oldest).map(|(seq, (slot, _))| (*seq, *slot)).collect();
        if doomed.is_empty() {
            continue;
        }
        for (seq, slot) in doomed {
            let path = dir.join(crate::format::file_name(seq, slot));
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
