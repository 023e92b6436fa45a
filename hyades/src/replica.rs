//! A replica: Hyades serving a bucket prefix that `aldb-ship` fills (`docs/OBJECT-STORE.md`)
//! instead of a snapshot directory.
//!
//! The slot index (which slots are served, their roots and parents, the writer's gaps) comes from
//! the manifest, so listing roots never fetches a file: the head and the sealed segments it names,
//! each segment fetched once and held (they are immutable), so a refresh of a changed head costs
//! the head and any new segment; a missing or damaged segment is refused and the index last built
//! stays in force. A proof makes its slot available in the
//! bounded cache first ([`ObjectStoreSource`] fetches each file, verifies it completely and only
//! then gives it its published name) and is answered by the `SnapshotReader` over the cache,
//! which checks every proof against the root before answering; a fetched file whose header does
//! not carry the root the manifest listed is refused. The record log, the vote-evidence log and
//! the slot-status journal are copied into the cache directory ([`LogMirror`]), where the
//! ordinary followers read them. Vote evidence older than the copy keeps is read on demand from
//! the bucket's sealed vote segments ([`VoteArchive`]), verified before use.
//!
//! Queries are synchronous (the dispatcher is), the bucket is not: a query whose slot is cached
//! takes its lease without waiting; one that must fetch blocks its thread on the runtime, through
//! `block_in_place` on an async worker, so other connections keep being served.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use aldb_format::{AccountProof, QueryError, ReadError, SlotInfo};
use aldb_objstore::manifest::parse_root;
use aldb_objstore::{
    ArchivedVotes, BucketOptions, CacheConfig, Lease, LogMirror, ObjectStoreSource, SourceError, VoteArchive,
};
use tokio::runtime::{Handle, RuntimeFlavor};

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
}

/// What the manifest says is served.
#[derive(Debug, Default)]
struct Index {
    generation: u64,
    slots: BTreeMap<u64, SlotInfo>,
    /// `(after, until)` exclusive bounds of slots a failing writer never wrote.
    gaps: Vec<(Option<u64>, u64)>,
    /// The newest slot any shipped file names, served or not.
    newest_named: Option<u64>,
}

/// A replica's source: the manifest's index, the verified cache, and the copy of the logs.
pub struct Replica {
    src: ObjectStoreSource,
    index: RwLock<Arc<Index>>,
    /// Slots whose objects were refused, and why: answered as damaged until the manifest
    /// changes.
    corrupt: Mutex<BTreeMap<u64, String>>,
    mirror: tokio::sync::Mutex<LogMirror>,
    /// Vote evidence older than the copy of the log, fetched on demand.
    votes: VoteArchive,
    handle: Handle,
    dir: PathBuf,
}

impl std::fmt::Debug for Replica {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replica").field("dir", &self.dir).finish_non_exhaustive()
    }
}

/// A bucket failure in the reader's terms, for the poller's error reporting.
fn read_error(dir: &std::path::Path, e: SourceError) -> ReadError {
    ReadError::io("read the bucket into", dir, std::io::Error::other(e.to_string()))
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
            handle,
            dir,
        };
        r.sync_async().await?;
        r.rebuild();
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
            Err(e) => return Err(e),
        }
        let mut mirror = self.mirror.lock().await;
        self.src.sync_logs(&mut mirror).await?;
        Ok(())
    }

    /// Rereads the manifest and brings the copy of the logs up to it. Blocking: call it from a
    /// blocking thread (the poller's).
    pub fn sync(&self) -> Result<(), ReadError> {
        self.handle.block_on(self.sync_async()).map_err(|e| read_error(&self.dir, e))
    }

    /// Rebuilds the index from the manifest last read; returns the slots newly served, in slot
    /// order.
    pub fn rebuild(&self) -> Vec<SlotInfo> {
        let old = self.current();
        let Some(m) = self.src.manifest() else { return Vec::new() };
        if m.generation == old.generation && !old.slots.is_empty() {
            return Vec::new();
        }
        let mut slots = BTreeMap::new();
        for b in self.src.slots().values() {
            let Some(o) = m.snapshot(b.seq) else { continue };
            let (Some(root), Ok(seq)) = (parse_root(&o.root), u32::try_from(b.seq)) else { continue };
            slots.insert(b.slot, SlotInfo { slot: b.slot, parent: o.parent, root, seq });
        }
        let gaps = m.snapshots.iter().filter_map(|o| o.gap.map(|g| (g.after, o.slot))).collect();
        let newest_named = m.snapshots.iter().map(|o| o.slot).max();
        let fresh: Vec<SlotInfo> =
            slots.values().filter(|i| old.slots.get(&i.slot).is_none_or(|o| o != *i)).copied().collect();
        let next = Arc::new(Index { generation: m.generation, slots, gaps, newest_named });
        match self.index.write() {
            Ok(mut g) => *g = next,
            Err(p) => *p.into_inner() = next,
        }
        // A new manifest may name other objects: refused ones are tried again.
        self.corrupt.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
        fresh
    }

    /// The newest served slot.
    pub fn latest(&self) -> Option<SlotInfo> {
        self.current().slots.values().next_back().copied()
    }

    /// The oldest served slot.
    pub fn oldest(&self) -> Option<SlotInfo> {
        self.current().slots.values().next().copied()
    }

    /// Served slots in `[start, end]`, oldest first.
    pub fn slots(&self, start: u64, end: u64) -> Vec<SlotInfo> {
        if start > end {
            return Vec::new();
        }
        self.current().slots.range(start..=end).map(|(_, s)| *s).collect()
    }

    /// The slot's info, or why it cannot be served: the same answers, in the same order, as
    /// `SnapshotReader::slot` gives for a directory.
    pub fn slot(&self, slot: Option<u64>) -> Result<SlotInfo, QueryError> {
        let ix = self.current();
        if let Some(slot) = slot {
            if let Some(reason) = self.corrupt.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&slot) {
                return Err(QueryError::Corrupt { slot, reason: reason.clone() });
            }
            if let Some(info) = ix.slots.get(&slot) {
                return Ok(*info);
            }
            if let Some(&(after, until)) = ix.gaps.iter().find(|(a, u)| a.is_none_or(|a| a < slot) && slot < *u) {
                return Err(QueryError::NotWritten { slot, after, until });
            }
        }
        let (Some(oldest), Some(newest)) = (ix.slots.values().next(), ix.slots.values().next_back()) else {
            return Err(QueryError::NothingPublished);
        };
        let Some(slot) = slot else { return Ok(*newest) };
        if slot > newest.slot && slot > ix.newest_named.unwrap_or(0) {
            return Err(QueryError::NotYetCommitted { slot, newest: newest.slot });
        }
        if slot < oldest.slot {
            return Err(QueryError::Pruned { slot, oldest: oldest.slot });
        }
        ix.slots.get(&slot).copied().ok_or(QueryError::NoSnapshot { slot })
    }

    /// Files of the cache its reader refused (never served).
    pub fn damaged_files(&self) -> Vec<(String, String)> {
        self.src.reader().damaged_files()
    }

    /// Holds `slot`'s files in the cache: at once when they are cached, else after fetching and
    /// verifying them (blocking this thread on the runtime).
    fn lease(&self, slot: u64) -> Result<Lease, QueryError> {
        if let Some(lease) = self.src.lease_cached(Some(slot)) {
            return Ok(lease);
        }
        let fetch = self.src.make_available(Some(slot));
        let got = match Handle::try_current() {
            Ok(h) if h.runtime_flavor() == RuntimeFlavor::CurrentThread => {
                return Err(QueryError::Storage("a replica cannot fetch on a current-thread runtime".into()));
            }
            // An async worker hands its other tasks to another thread while this one waits; on a
            // blocking thread this just runs.
            Ok(_) => tokio::task::block_in_place(|| self.handle.block_on(fetch)),
            Err(_) => self.handle.block_on(fetch),
        };
        got.map_err(|e| self.query_error(slot, e))
    }

    /// The account `pubkey` at `slot` with its proof, from verified cached files.
    pub fn prove(&self, pubkey: &[u8; 32], slot: u64) -> Result<AccountProof, QueryError> {
        let lease = self.lease(slot)?;
        let answer = self.src.reader().prove(pubkey, Some(slot));
        drop(lease);
        answer
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
        let fetch = self.votes.slot_votes_for(slot, window, selection);
        match Handle::try_current() {
            Ok(h) if h.runtime_flavor() == RuntimeFlavor::CurrentThread => {
                Err(SourceError::Manifest("a replica cannot fetch on a current-thread runtime".into()))
            }
            Ok(_) => tokio::task::block_in_place(|| self.handle.block_on(fetch)),
            Err(_) => self.handle.block_on(fetch),
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
            SourceError::Corrupt { object, reason } => {
                let reason = format!("object {object} in the bucket is damaged: {reason}");
                self.corrupt.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(slot, reason.clone());
                QueryError::Corrupt { slot, reason }
            }
            SourceError::Query(q) => q,
            other => QueryError::Storage(other.to_string()),
        }
    }
}
