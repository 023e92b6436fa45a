//! A replica: Hyades serving a bucket prefix that `aldb-ship` fills (`docs/OBJECT-STORE.md`)
//! instead of a snapshot directory.
//!
//! The slot index (which slots are served, their roots and parents, the writer's gaps) comes from
//! the manifest, read from the head and the sealed segments it names (each segment fetched once
//! and held: they are immutable); a missing or damaged segment or head is refused and the index
//! last built stays in force. The manifest is not trusted for a root: a slot is listed, served
//! and announced only once its entry is confirmed against the slot object itself (its header and
//! footer, two ranged reads, once per entry: [`ObjectStoreSource::confirm`]), and its root is the
//! object header's. An entry that does not confirm is refused with the damaged-slot or
//! missing-file answer naming the object, and tried again every [`RETRY_REFUSED`] so a repaired
//! bucket is served again without a restart. A proof makes its slot available in the
//! bounded cache first ([`ObjectStoreSource`] fetches each file, verifies it completely and only
//! then gives it its published name) and is answered by the `SnapshotReader` over the cache,
//! which checks every proof against the root before answering; a fetched file whose header does
//! not carry the root the manifest listed is refused. The record log, the vote-evidence log and
//! the slot-status journal are copied into the cache directory ([`LogMirror`]), where the
//! ordinary followers read them. Vote evidence older than the copy keeps is read on demand from
//! the bucket's sealed vote segments ([`VoteArchive`]), verified before use. A segment of the copy
//! replaced by a verified one (it was copied damaged and the bucket's object was repaired, or it
//! was damaged on the cache's disk) is read again by its reader ([`Replica::take_repaired`]), so
//! the span it held damaged is served again without a restart.
//!
//! Queries are synchronous (the dispatcher is), the bucket is not: a query whose slot is cached
//! takes its lease without waiting; one that must fetch blocks its thread on the runtime, through
//! `block_in_place` on an async worker, so other connections keep being served (`Replica::fetch`,
//! the one bridge both the cold slot's files and an old slot's vote segments cross).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use aldb_format::{AccountProof, QueryError, SlotIndex, SlotInfo, SnapshotError};
use aldb_objstore::{
    ArchivedVotes, BucketOptions, CacheConfig, Lease, LogMirror, Manifest, ObjectStoreSource, SourceError, VoteArchive,
};
use futures_util::StreamExt;
use tokio::runtime::{Handle, RuntimeFlavor};

/// The longest a query waits for the bucket by default ([`StoreConfig::fetch_wait`]: a cold
/// slot's files, an old slot's vote segments): below the 30 s a client (`aldb proof`) waits for an answer, so a stalled bucket answers the
/// query with an error rather than leave it hanging past its client (the object store client
/// alone retries for up to 180 s).
pub const FETCH_WAIT: Duration = Duration::from_secs(20);
/// Why a query that must fetch fails on a current-thread runtime (logged, not sent to clients).
const CURRENT_THREAD: &str = "a replica cannot fetch on a current-thread runtime";

/// How often entries that did not confirm, and slots whose objects a query refused, are tried
/// again while the manifest is unchanged: a bucket repaired in place is served again by itself.
pub const RETRY_REFUSED: Duration = Duration::from_secs(1);

/// Slot objects confirmed at once while the index is built.
const CONFIRM_CONCURRENCY: usize = 16;

/// Where a replica's bucket is and how much it may cache.
#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// `s3://BUCKET[/PREFIX]`, as `aldb-ship --bucket` was given.
    pub url: String,
    /// Endpoint, region, credentials (unset ones come from the `AWS_*` variables).
    pub bucket: BucketOptions,
    /// Bytes of verified snapshot files the cache keeps (beyond those of queries in flight).
    pub cache_bytes: u64,
    /// Bytes of vote-evidence segments kept for slots older than the copy of the log
    /// ([`aldb_objstore::DEFAULT_VOTE_ARCHIVE_BYTES`] by default).
    pub vote_archive_bytes: u64,
    /// The longest a query waits for the bucket before it answers -32603 ([`FETCH_WAIT`] by
    /// default, below the 30 s a client waits).
    pub fetch_wait: Duration,
}

/// Why a slot the manifest lists is not served.
#[derive(Clone, Debug)]
enum Refusal {
    /// An object it needs is damaged, or its entry disagrees with its object.
    Damaged(String),
    /// An object it needs is missing from the bucket.
    Missing(String),
}

impl Refusal {
    fn of(e: &SourceError) -> Option<Self> {
        match e {
            SourceError::Corrupt { object, reason } => {
                Some(Refusal::Damaged(format!("object {object} in the bucket is damaged: {reason}")))
            }
            SourceError::Missing { object, reason } => Some(Refusal::Missing(format!("object {object} ({reason})"))),
            _ => None,
        }
    }

    fn answer(&self, slot: u64) -> QueryError {
        match self {
            Refusal::Damaged(reason) => QueryError::Corrupt { slot, reason: reason.clone() },
            Refusal::Missing(file) => QueryError::MissingFile { slot, file: file.clone() },
        }
    }
}

/// What the manifest says is served, confirmed against the objects.
#[derive(Debug, Default)]
struct Index {
    /// The manifest it was built from.
    manifest: Option<Arc<Manifest>>,
    /// Slots whose entries were confirmed against their objects (the only ones listed), the
    /// gaps a failing writer left, and the newest slot any shipped file names, served or not.
    slots: SlotIndex,
    /// Slots the manifest lists whose entries did not confirm.
    refused: BTreeMap<u64, Refusal>,
    /// Entries that could not be confirmed for want of an answer from the bucket: tried again
    /// at the next refresh.
    pending: bool,
    /// When refused entries were last tried.
    tried: Option<Instant>,
    /// Slots the manifest names a slot file of whose chain it does not name whole, with the
    /// first sequence number missing: answered as a missing file, as a directory does.
    unservable: BTreeMap<u64, u64>,
}

/// A replica's source: the manifest's index, the verified cache, and the copy of the logs.
pub struct Replica {
    src: ObjectStoreSource,
    index: RwLock<Arc<Index>>,
    /// Slots whose objects a query refused, and why: answered so until the manifest changes or
    /// [`RETRY_REFUSED`] has passed.
    corrupt: Mutex<BTreeMap<u64, Refusal>>,
    mirror: tokio::sync::Mutex<LogMirror>,
    /// Segments of the copy replaced by verified ones that their readers have not read again yet.
    repaired: Mutex<Repaired>,
    /// Vote evidence older than the copy of the log, fetched on demand.
    votes: VoteArchive,
    handle: Handle,
    dir: PathBuf,
    /// The longest a query waits for the bucket.
    fetch_wait: Duration,
}

impl std::fmt::Debug for Replica {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replica").field("dir", &self.dir).finish_non_exhaustive()
    }
}

/// Segments of the copy of the logs replaced by verified ones, by first slot, for their readers.
#[derive(Debug, Default)]
struct Repaired {
    records: Vec<u64>,
    votes: Vec<u64>,
}

/// Which log a repaired segment belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogKind {
    /// The record log.
    Records,
    /// The vote-evidence log.
    Votes,
}

/// A bucket failure in the reader's terms, for the poller's error reporting.
fn read_error(dir: &std::path::Path, e: SourceError) -> SnapshotError {
    SnapshotError::io("read the bucket into", dir, std::io::Error::other(e.to_string()))
}

impl Replica {
    /// Opens the bucket and the cache in `dir`, reads the manifest and copies the logs: about
    /// `keep_record_slots` slots of records and `keep_vote_slots` of vote evidence. Must run on a
    /// multi-threaded runtime (a query that fetches blocks its worker in place).
    pub async fn open(
        store: &StoreConfig,
        dir: PathBuf,
        keep_record_slots: u64,
        keep_vote_slots: u64,
    ) -> Result<Self, SourceError> {
        let handle = Handle::current();
        if handle.runtime_flavor() == RuntimeFlavor::CurrentThread {
            return Err(SourceError::Manifest("a replica needs the multi-threaded tokio runtime".into()));
        }
        let (client, prefix) = aldb_objstore::open_bucket(&store.url, &store.bucket)
            .map_err(|e| SourceError::Manifest(format!("cannot open {}: {e}", store.url)))?;
        let src = ObjectStoreSource::open(client, prefix, CacheConfig::new(&dir, store.cache_bytes)).await?;
        let mirror = LogMirror::new(&dir, keep_record_slots)?.with_vote_keep(keep_vote_slots);
        let votes = VoteArchive::new(src.clone(), store.vote_archive_bytes)?;
        let r = Self {
            src,
            votes,
            index: RwLock::new(Arc::new(Index::default())),
            corrupt: Mutex::new(BTreeMap::new()),
            mirror: tokio::sync::Mutex::new(mirror),
            repaired: Mutex::new(Repaired::default()),
            handle,
            dir,
            fetch_wait: store.fetch_wait,
        };
        r.sync_async().await?;
        r.rebuild_async().await;
        Ok(r)
    }

    /// The cache (its metrics, its reader).
    pub fn source(&self) -> &ObjectStoreSource {
        &self.src
    }

    fn current(&self) -> Arc<Index> {
        match self.index.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    async fn sync_async(&self) -> Result<(), SourceError> {
        match self.src.refresh_manifest().await {
            Ok(_) | Err(SourceError::NoManifest { .. }) => {}
            // Logged (once) and counted where found; the manifest last verified stays in force,
            // and its logs are still copied.
            Err(SourceError::Head { .. } | SourceError::Corrupt { .. } | SourceError::Missing { .. }) => {}
            Err(e) => return Err(e),
        }
        let mut mirror = self.mirror.lock().await;
        // Log objects missing or damaged are logged and counted as they are found; the others
        // are copied all the same.
        let synced = self.src.sync_logs(&mut mirror).await?;
        drop(mirror);
        if !synced.repaired_record_segments.is_empty() || !synced.repaired_vote_segments.is_empty() {
            let mut r = self.repaired_map();
            r.records.extend(synced.repaired_record_segments);
            r.votes.extend(synced.repaired_vote_segments);
        }
        Ok(())
    }

    fn repaired_map(&self) -> std::sync::MutexGuard<'_, Repaired> {
        self.repaired.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The segments of `log`'s copy (by first slot) replaced by verified ones since the last
    /// call: their reader must read them again (`reread`), as the old bytes were damaged.
    pub fn take_repaired(&self, log: LogKind) -> Vec<u64> {
        let mut r = self.repaired_map();
        let v = match log {
            LogKind::Records => &mut r.records,
            LogKind::Votes => &mut r.votes,
        };
        let mut out = std::mem::take(v);
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Gives back segments [`Replica::take_repaired`] returned that their reader could not read
    /// again yet.
    pub fn requeue_repaired(&self, log: LogKind, segments: Vec<u64>) {
        let mut r = self.repaired_map();
        match log {
            LogKind::Records => r.records.extend(segments),
            LogKind::Votes => r.votes.extend(segments),
        }
    }

    /// Rereads the manifest and brings the copy of the logs up to it. Blocking: call it from a
    /// blocking thread (the poller's).
    pub fn sync(&self) -> Result<(), SnapshotError> {
        self.handle.block_on(self.sync_async()).map_err(|e| read_error(&self.dir, e))
    }

    /// Rebuilds the index from the manifest last read; returns the slots newly served, in slot
    /// order. Blocking: call it from a blocking thread (the poller's).
    pub fn rebuild(&self) -> Vec<SlotInfo> {
        self.handle.block_on(self.rebuild_async())
    }

    /// Rebuilds the index when the manifest changed, when entries are pending, or when refused
    /// ones are due to be tried again: every listed slot's entry is confirmed against its object
    /// (once per entry), and only confirmed slots are listed, with their objects' roots.
    async fn rebuild_async(&self) -> Vec<SlotInfo> {
        let old = self.current();
        let Some(m) = self.src.manifest() else { return Vec::new() };
        let same = old.manifest.as_ref().is_some_and(|o| Arc::ptr_eq(o, &m));
        let retry = old.tried.is_none_or(|t| t.elapsed() >= RETRY_REFUSED)
            && (!old.refused.is_empty() || !self.corrupt_map().is_empty());
        if same && !old.pending && !retry {
            return Vec::new();
        }
        let servable = self.src.slots();
        let jobs: Vec<_> = servable.values().filter_map(|b| m.snapshot(b.seq).cloned().map(|o| (b.slot, o))).collect();
        let src = &self.src;
        let results: Vec<(u64, Result<aldb_format::format::Header, SourceError>)> = futures_util::stream::iter(jobs)
            .map(|(slot, o)| async move { (slot, src.confirm(&o).await) })
            .buffer_unordered(CONFIRM_CONCURRENCY)
            .collect()
            .await;
        let mut slots = BTreeMap::new();
        let mut refused = BTreeMap::new();
        let mut pending = false;
        for (slot, got) in results {
            match got {
                Ok(h) => {
                    slots.insert(slot, SlotInfo { slot, parent: h.parent, root: h.root, seq: h.seq });
                }
                Err(e) => match Refusal::of(&e) {
                    Some(r) => {
                        refused.insert(slot, r);
                    }
                    None => {
                        log::warn!("slot {slot} not listed yet: {e}");
                        pending = true;
                    }
                },
            }
        }
        let mut unservable = BTreeMap::new();
        for o in m.snapshots.iter().filter(|o| o.kind() == Some(aldb_format::format::FileKind::Slot)) {
            if servable.contains_key(&o.slot) {
                continue;
            }
            if let Some(gone) = (o.oldest_seq..o.seq).find(|q| m.snapshot(*q).is_none()) {
                unservable.insert(o.slot, gone);
            }
        }
        let gaps = m.snapshots.iter().filter_map(|o| o.gap.map(|g| (g.after, o.slot))).collect();
        let newest_named = m.snapshots.iter().map(|o| o.slot).max();
        let fresh: Vec<SlotInfo> =
            slots.values().filter(|i| old.slots.get(i.slot).is_none_or(|o| o != *i)).copied().collect();
        let next = Arc::new(Index {
            manifest: Some(m),
            slots: SlotIndex::new(slots, gaps, newest_named),
            refused,
            pending,
            tried: Some(Instant::now()),
            unservable,
        });
        match self.index.write() {
            Ok(mut g) => *g = next,
            Err(p) => *p.into_inner() = next,
        }
        // A new manifest may name other objects, and a refused object may have been repaired:
        // refused ones are tried again.
        self.corrupt_map().clear();
        fresh
    }

    fn corrupt_map(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Refusal>> {
        self.corrupt.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The newest served slot.
    pub fn latest(&self) -> Option<SlotInfo> {
        self.current().slots.latest()
    }

    /// The oldest served slot.
    pub fn oldest(&self) -> Option<SlotInfo> {
        self.current().slots.oldest()
    }

    /// Served slots in `[start, end]`, oldest first.
    pub fn slots(&self, start: u64, end: u64) -> Vec<SlotInfo> {
        self.current().slots.range(start, end)
    }

    /// The slot's info, or why it cannot be served: the same answers, in the same order, as
    /// `SnapshotReader::slot` gives for a directory.
    pub fn slot(&self, slot: Option<u64>) -> Result<SlotInfo, QueryError> {
        let ix = self.current();
        if let Some(slot) = slot {
            if let Some(r) = self.corrupt_map().get(&slot) {
                return Err(r.answer(slot));
            }
            // What only a replica knows of a slot it does not serve comes before the index's
            // answers: an entry its object refused, or a manifest that cannot be read at all.
            if ix.slots.get(slot).is_none() {
                if let Some(r) = ix.refused.get(&slot) {
                    return Err(r.answer(slot));
                }
                if ix.slots.latest().is_none()
                    && let Some(reason) = self.src.manifest_error()
                {
                    return Err(QueryError::Corrupt { slot, reason });
                }
            }
        }
        match ix.slots.lookup(slot, |_| None) {
            Err(QueryError::NoSnapshot { slot }) => match ix.unservable.get(&slot) {
                Some(&gone) => Err(QueryError::MissingFile {
                    slot,
                    file: format!(
                        "sequence number {gone} ({gone:010}-*.snap or .part), which the manifest does not name"
                    ),
                }),
                None => Err(QueryError::NoSnapshot { slot }),
            },
            answer => answer,
        }
    }

    /// Files of the cache its reader refused (never served).
    pub fn damaged_files(&self) -> Vec<(String, String)> {
        self.src.reader().damaged_files()
    }

    /// Holds `slot`'s files in the cache: at once when they are cached, else after fetching and
    /// verifying them (blocking this thread on the runtime).
    fn lease(&self, slot: u64) -> Result<Lease, QueryError> {
        // A slot whose entry did not confirm is answered as listed, without another request.
        if let Some(r) = self.current().refused.get(&slot) {
            return Err(r.answer(slot));
        }
        if let Some(lease) = self.src.lease_cached(Some(slot)) {
            return Ok(lease);
        }
        let fetched = self.fetch(|| format!("slot {slot}'s files"), self.src.make_available(Some(slot)));
        let Some(got) = fetched else { return Err(QueryError::Storage(CURRENT_THREAD.into())) };
        got.map_err(|e| self.query_error(slot, e))
    }

    /// The account `pubkey` at `slot` with its proof, from verified cached files.
    pub fn prove(&self, pubkey: &[u8; 32], slot: u64) -> Result<AccountProof, QueryError> {
        let lease = self.lease(slot)?;
        let answer = self.src.reader().prove(pubkey, Some(slot));
        drop(lease);
        match answer {
            // The files were verified when they entered the cache: damage found now happened on
            // the cache's disk. A cache is disposable: drop the slot's files and fetch again.
            Err(e @ (QueryError::Corrupt { .. } | QueryError::Damaged { .. })) => {
                log::warn!("slot {slot}: a cached file is damaged ({e}); fetching its files again");
                self.src.discard(slot);
                let lease = self.lease(slot)?;
                let answer = self.src.reader().prove(pubkey, Some(slot));
                drop(lease);
                answer
            }
            other => other,
        }
    }

    /// The vote evidence of `slot`, older than the copy of the log, with the votes `selection`
    /// chooses from the blocks of the `window` slots after it: from the bucket's sealed segments,
    /// fetched and verified unless held (blocking this thread on the runtime).
    pub fn archived_votes(
        &self,
        slot: u64,
        window: u64,
        selection: &aldb_format::votes::VoteSelection,
    ) -> Result<ArchivedVotes, SourceError> {
        let what = || format!("the vote-evidence segments of slot {slot}");
        self.fetch(what, self.votes.slot_votes_for(slot, window, selection))
            .unwrap_or_else(|| Err(SourceError::Manifest(CURRENT_THREAD.into())))
    }

    /// The transition to `epoch`, older than the copy of the log: from the one segment in the
    /// bucket the manifest lists as holding it whole, fetched and verified unless held (blocking
    /// this thread on the runtime). `None` when no segment lists it.
    pub fn archived_transition(
        &self,
        epoch: u64,
        window: u64,
    ) -> Result<Option<aldb_format::votes::EpochTransition>, SourceError> {
        let what = || format!("the vote-evidence segment holding the transition to epoch {epoch}");
        self.fetch(what, self.votes.transition(epoch, window))
            .unwrap_or_else(|| Err(SourceError::Manifest(CURRENT_THREAD.into())))
    }

    /// The epochs whose transition a segment in the bucket holds whole.
    pub fn archived_transition_epochs(&self) -> Vec<u64> {
        self.votes.transition_epochs()
    }

    /// Waits, from the synchronous dispatcher, for a fetch from the bucket of `what`, for at most
    /// [`StoreConfig::fetch_wait`]: on an async worker through `block_in_place`, which hands the
    /// worker's other tasks to another thread while this one waits; on a blocking thread
    /// directly. `None` on a current-thread runtime, which has no thread to hand them to.
    fn fetch<T>(
        &self,
        what: impl FnOnce() -> String,
        fetch: impl Future<Output = Result<T, SourceError>>,
    ) -> Option<Result<T, SourceError>> {
        let within = async {
            match tokio::time::timeout(self.fetch_wait, fetch).await {
                Ok(got) => got,
                Err(_) => Err(SourceError::Timeout { what: what(), secs: self.fetch_wait.as_secs() }),
            }
        };
        match Handle::try_current() {
            Ok(h) if h.runtime_flavor() == RuntimeFlavor::CurrentThread => None,
            Ok(_) => Some(tokio::task::block_in_place(|| self.handle.block_on(within))),
            Err(_) => Some(self.handle.block_on(within)),
        }
    }

    /// The first slot of the oldest vote-evidence segment the bucket holds.
    pub fn oldest_archived_votes(&self) -> Option<u64> {
        self.votes.oldest()
    }

    /// A source error in the reader's terms, so the dispatcher maps it as for a directory.
    fn query_error(&self, slot: u64, e: SourceError) -> QueryError {
        match e {
            SourceError::NotYetShipped { slot, newest } => QueryError::NotYetCommitted { slot, newest },
            SourceError::NotInBucket { slot, oldest, .. } if slot < oldest => QueryError::Pruned { slot, oldest },
            SourceError::NotInBucket { slot, .. } => QueryError::NoSnapshot { slot },
            SourceError::NothingShipped | SourceError::NoManifest { .. } => QueryError::NothingPublished,
            e @ (SourceError::Corrupt { .. } | SourceError::Missing { .. }) => {
                let Some(r) = Refusal::of(&e) else { return QueryError::Storage(e.to_string()) };
                self.corrupt_map().insert(slot, r.clone());
                r.answer(slot)
            }
            SourceError::Query(q) => q,
            other => QueryError::Storage(other.to_string()),
        }
    }
}
