//! The replica's source: the manifest's files fetched on demand into a bounded cache directory,
//! each verified completely before it enters it, in exactly a snapshot directory's layout, so
//! [`SnapshotReader`] serves the cache unchanged.
//!
//! A file is downloaded under a name `SnapshotReader` never opens (`.NAME.tmp`), checked as the
//! reader checks a file (size, magics, version, reserved bytes, checksum, a header naming its own
//! sequence number and slot) and against the manifest (size, checksum, `oldest_seq`), synced, and
//! only then renamed to its published name. So every name the reader can see is a verified file.
//! Files are evicted least recently used first, by bytes; the files of a slot being answered are
//! pinned by a [`Lease`] until it is dropped, and a reader that still maps an evicted file keeps
//! reading it safely (eviction only unlinks).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path as FsPath, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use aldb_format::format::{END_MAGIC, FLAG_AFTER_GAP, FOOTER_LEN, FileKind, HEADER_LEN, Header, parse_published_name};
use aldb_format::store::MappedFile;
use aldb_format::{AccountProof, SnapshotReader};
use futures_util::StreamExt;
use object_store::ObjectStore;
use object_store::path::Path;
use tokio::io::AsyncWriteExt;

use crate::error::{ManifestError, SourceError};
use crate::manifest::{
    BucketSlot, Head, MANIFEST_NAME, MAX_HEAD_BYTES, MAX_SEGMENT_BYTES, MAX_SNAPSHOT_OBJECT_BYTES, Manifest,
    SealedSegment, SegmentBody, SnapshotObject, WriterGap, parse_checksum, parse_root, read_segments, verify_segment,
};
use crate::metrics::CacheMetrics;

/// The cache's place and size.
#[derive(Clone, Debug)]
pub struct CacheConfig {
    /// The cache directory (created if missing). It must belong to this source alone.
    pub dir: PathBuf,
    /// Bytes of verified files the cache holds at most, beyond what the slots being answered
    /// pin: a slot whose files alone exceed it is refused with [`SourceError::CacheTooSmall`].
    pub capacity_bytes: u64,
    /// Objects at least this large are checked by two ranged reads (header and footer against
    /// the manifest) before the whole object is fetched: a mismatch costs 160 bytes, not the file.
    pub range_check_min: u64,
}

impl CacheConfig {
    /// A cache in `dir` of `capacity_bytes`, range checks from 1 MiB.
    pub fn new(dir: impl Into<PathBuf>, capacity_bytes: u64) -> Self {
        Self { dir: dir.into(), capacity_bytes, range_check_min: 1 << 20 }
    }
}

#[derive(Debug)]
struct Entry {
    size: u64,
    /// The [`State::tick`] of the last use: the smallest is evicted first.
    used: u64,
    pins: u32,
}

#[derive(Debug, Default)]
struct State {
    manifest: Option<Arc<Manifest>>,
    /// The manifest's servable slots, computed once per manifest: every query resolves its slot
    /// here.
    servable: Arc<BTreeMap<u64, BucketSlot>>,
    /// The manifest object's entity tag as last read, so an unchanged manifest is not fetched
    /// again.
    etag: Option<String>,
    /// The sealed manifest segments the manifest names, verified, by object name (which spells
    /// their checksum): immutable, so each is fetched once.
    segments: HashMap<String, Arc<SegmentBody>>,
    files: HashMap<String, Entry>,
    bytes: u64,
    tick: u64,
    /// Slot files whose header was read from the bucket (or whose whole file was fetched) and
    /// found to be the manifest entry's, with that entry: a root is listed only once confirmed.
    confirmed: HashMap<String, (SnapshotObject, Header)>,
    /// Why the manifest was last refused, while it is.
    manifest_error: Option<String>,
}

#[derive(Debug)]
struct Inner {
    store: Arc<dyn ObjectStore>,
    prefix: Path,
    cfg: CacheConfig,
    state: Mutex<State>,
    /// Fetches run one at a time: two queries that need one file download it once.
    fetching: tokio::sync::Mutex<()>,
    reader: SnapshotReader,
    metrics: CacheMetrics,
    /// What was reported of damaged and missing objects, so each is logged once (they are
    /// tried again at every poll), until a new manifest is read.
    reported: Mutex<std::collections::HashSet<String>>,
}

impl Inner {
    /// Logs `msg` as an error the first time only.
    fn report(&self, msg: String) {
        let mut seen = self.reported.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if seen.len() >= 10_000 {
            seen.clear();
        }
        if seen.insert(msg.clone()) {
            log::error!("{msg}");
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    fn object(&self, name: &str) -> Path {
        name.split('/').fold(self.prefix.clone(), |p, part| p.child(part))
    }
}

/// The files of one slot, held in the cache while this lives.
#[derive(Debug)]
pub struct Lease {
    inner: Arc<Inner>,
    names: Vec<String>,
    slot: BucketSlot,
}

impl Lease {
    /// The slot made available.
    pub fn slot(&self) -> u64 {
        self.slot.slot
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut st = self.inner.state();
        for n in &self.names {
            if let Some(e) = st.files.get_mut(n) {
                e.pins = e.pins.saturating_sub(1);
            }
        }
    }
}

/// A reader's view of a bucket: any slot the manifest holds, served from verified files in a
/// bounded local cache.
#[derive(Clone, Debug)]
pub struct ObjectStoreSource {
    inner: Arc<Inner>,
}

impl ObjectStoreSource {
    /// Opens the cache directory, reads the bucket's manifest, and keeps the cached files the
    /// manifest still names with the same size and checksum (every other file there is removed,
    /// as are interrupted downloads).
    pub async fn open(store: Arc<dyn ObjectStore>, prefix: Path, cfg: CacheConfig) -> Result<Self, SourceError> {
        let io = |op, path: &FsPath, e| SourceError::Io { op, path: path.to_path_buf(), source: e };
        std::fs::create_dir_all(&cfg.dir).map_err(|e| io("create", &cfg.dir, e))?;
        let metrics = CacheMetrics::new().map_err(|e| SourceError::Manifest(format!("metrics: {e}")))?;
        let reader = SnapshotReader::open(&cfg.dir)?;
        let inner = Arc::new(Inner {
            store,
            prefix,
            cfg,
            state: Mutex::new(State::default()),
            fetching: tokio::sync::Mutex::new(()),
            reader,
            metrics,
            reported: Mutex::new(std::collections::HashSet::new()),
        });
        let src = Self { inner };
        // A replica may start before anything is shipped: it serves nothing until a manifest
        // appears, and keeps no cached file it cannot check against one.
        let m = match src.refresh_manifest().await {
            Ok(m) => m,
            Err(SourceError::NoManifest { object }) => {
                log::warn!("the bucket holds no manifest ({object}) yet: nothing to serve until one is shipped");
                Arc::new(Manifest::default())
            }
            // A damaged manifest must not keep a replica down: it serves nothing it has not
            // verified, says why, and takes the first good manifest the poller reads.
            Err(e @ (SourceError::Head { .. } | SourceError::Corrupt { .. } | SourceError::Missing { .. })) => {
                log::error!("{e}: nothing is served until the bucket's manifest is repaired");
                Arc::new(Manifest::default())
            }
            Err(e) => return Err(e),
        };
        src.adopt_cached(&m)?;
        src.inner.reader.refresh()?;
        Ok(src)
    }

    /// Takes into the cache the files already in its directory that the manifest names
    /// identically; removes the rest.
    fn adopt_cached(&self, m: &Manifest) -> Result<(), SourceError> {
        let dir = &self.inner.cfg.dir;
        let io = |op, path: &FsPath, e| SourceError::Io { op, path: path.to_path_buf(), source: e };
        let mut found: Vec<(std::time::SystemTime, String, u64)> = Vec::new();
        // Interrupted downloads and anything not a published name are removed below.
        for entry in std::fs::read_dir(dir).map_err(|e| io("list", dir, e))? {
            let entry = entry.map_err(|e| io("list", dir, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            if crate::mirror::is_mirror_name(&name) {
                continue;
            }
            // Parts are kept like slot files: a cached slot needs them as much as its own file.
            let named = parse_published_name(&name)
                .and_then(|(seq, _, _)| m.snapshot(u64::from(seq)))
                .filter(|o| o.name == name);
            // A cache is disposable: a file it holds is adopted only after the reader's own
            // checks of all of it (a flipped byte keeps size and footer), and anything else is
            // removed, to be fetched again when a slot needs it.
            let keep = match named {
                Some(o) => {
                    let checked = if cached_matches(&path, o) {
                        self.verify_cached(o, &path)
                    } else {
                        Err(FileRefusal::SizeOrFooter)
                    };
                    match checked {
                        Ok(h) => Some((o.size, o.clone(), h)),
                        Err(e) => {
                            self.inner.metrics.cache_damaged.inc();
                            log::warn!("cached file {name} is damaged and removed, to be fetched again: {e}");
                            None
                        }
                    }
                }
                None => None,
            };
            match keep {
                Some((size, o, h)) => {
                    let t = entry.metadata().and_then(|md| md.modified()).unwrap_or(std::time::UNIX_EPOCH);
                    found.push((t, name, size));
                    // Its header confirms the entry when it says what the entry says.
                    let gap = (h.flags & FLAG_AFTER_GAP != 0).then_some(WriterGap { after: h.gap_after });
                    let agrees = parse_root(&o.root) == Some(h.root) && h.parent == o.parent && gap == o.gap;
                    if o.kind() == Some(FileKind::Slot) && agrees {
                        self.inner.state().confirmed.insert(o.name.clone(), (o, h));
                    }
                }
                None if entry.file_type().is_ok_and(|t| t.is_file()) => {
                    std::fs::remove_file(&path).map_err(|e| io("remove", &path, e))?;
                }
                None => {}
            }
        }
        found.sort();
        let mut st = self.inner.state();
        for (_, name, size) in found {
            st.tick += 1;
            let used = st.tick;
            st.bytes += size;
            st.files.insert(name, Entry { size, used, pins: 0 });
        }
        self.publish_gauges(&st);
        Ok(())
    }

    fn publish_gauges(&self, st: &State) {
        self.inner.metrics.cached_bytes.set(i64::try_from(st.bytes).unwrap_or(i64::MAX));
        self.inner.metrics.cached_files.set(i64::try_from(st.files.len()).unwrap_or(i64::MAX));
    }

    /// Logs an error about the bucket's objects once (until a new manifest is read).
    pub(crate) fn report(&self, msg: String) {
        self.inner.report(msg);
    }

    pub(crate) fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.inner.store
    }

    pub(crate) fn object_path(&self, name: &str) -> Path {
        self.inner.object(name)
    }

    /// The cache's metrics.
    pub fn metrics(&self) -> &CacheMetrics {
        &self.inner.metrics
    }

    /// The reader over the cache directory. It serves only what has been made available (and
    /// not evicted since); use [`ObjectStoreSource::prove`], or hold a [`Lease`] around a query.
    pub fn reader(&self) -> &SnapshotReader {
        &self.inner.reader
    }

    /// The cache directory.
    pub fn dir(&self) -> &FsPath {
        &self.inner.cfg.dir
    }

    /// The manifest last read.
    pub fn manifest(&self) -> Option<Arc<Manifest>> {
        self.inner.state().manifest.clone()
    }

    /// Reads the bucket's manifest again (to see newly shipped slots) and returns it. The read
    /// is conditional on the entity tag of the last one, so polling an unchanged manifest costs
    /// a request and no transfer. A head larger than [`MAX_HEAD_BYTES`] is refused before it is
    /// read; a head or segment that is refused leaves the manifest last read in force.
    pub async fn refresh_manifest(&self) -> Result<Arc<Manifest>, SourceError> {
        let got = self.read_manifest().await;
        let mut st = self.inner.state();
        st.manifest_error = match &got {
            Err(e @ (SourceError::Head { .. } | SourceError::Corrupt { .. } | SourceError::Missing { .. })) => {
                Some(e.to_string())
            }
            _ => None,
        };
        got
    }

    /// Why the bucket's manifest was last refused (a head or sealed segment damaged, missing or
    /// oversized), while it still is; `None` once a manifest is read again.
    pub fn manifest_error(&self) -> Option<String> {
        self.inner.state().manifest_error.clone()
    }

    async fn read_manifest(&self) -> Result<Arc<Manifest>, SourceError> {
        let at = self.inner.object(MANIFEST_NAME);
        let store_err = |op, e| SourceError::Store { op, object: at.to_string(), source: e };
        let refuse = |reason: ManifestError| {
            self.inner.metrics.manifest_refused.inc();
            let e = SourceError::Head { object: at.to_string(), reason };
            self.inner.report(format!("{e}; the manifest last verified stays in force"));
            e
        };
        let (etag, held) = {
            let st = self.inner.state();
            (st.etag.clone(), st.manifest.clone())
        };
        let opts = object_store::GetOptions { if_none_match: etag.filter(|_| held.is_some()), ..Default::default() };
        let got = match self.inner.store.get_opts(&at, opts).await {
            Ok(g) => g,
            Err(object_store::Error::NotModified { .. }) => {
                if let Some(m) = held {
                    return Ok(m);
                }
                return Err(SourceError::Manifest("the bucket answered \"not modified\" to a first read".into()));
            }
            Err(object_store::Error::NotFound { .. }) => {
                return Err(SourceError::NoManifest { object: at.to_string() });
            }
            Err(e) => return Err(store_err("get", e)),
        };
        let tag = got.meta.e_tag.clone();
        if got.meta.size > MAX_HEAD_BYTES {
            return Err(refuse(ManifestError::TooLarge { what: "head", size: got.meta.size, max: MAX_HEAD_BYTES }));
        }
        let bytes = read_bounded(got, MAX_HEAD_BYTES).await.map_err(|e| store_err("get", e))?;
        self.inner.metrics.manifest_bytes.inc_by(bytes.as_ref().map_or(MAX_HEAD_BYTES, |b| b.len() as u64));
        let Some(bytes) = bytes else {
            return Err(refuse(ManifestError::TooLarge {
                what: "head",
                size: MAX_HEAD_BYTES + 1,
                max: MAX_HEAD_BYTES,
            }));
        };
        let head = Head::decode(&bytes).map_err(refuse)?;
        let held_segment = |name: &str| self.inner.state().segments.get(name).cloned();
        let bodies = read_segments(&head, held_segment, |r| self.sealed_segment(r)).await?;
        let m = Arc::new(Manifest::assemble(head, &|n| bodies.get(n).map(|b| b.as_ref())).map_err(refuse)?);
        self.inner.metrics.manifest_reads.inc();
        let mut st = self.inner.state();
        // A manifest is never replaced by one that names less (a stale read from a lagging
        // replica of the service must not hide slots already seen); a lower generation that
        // names at least the newest file held is taken, so a head whose generation was damaged
        // upwards does not hold a replica once the bucket is repaired.
        let newest = |m: &Manifest| m.snapshots.last().map(|o| o.seq);
        if st.manifest.as_ref().is_none_or(|old| old.generation <= m.generation || newest(&m) >= newest(old)) {
            if st.manifest.as_ref().is_none_or(|old| old.as_ref() != m.as_ref()) {
                self.inner.reported.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
            }
            st.servable = Arc::new(m.servable());
            st.manifest = Some(m.clone());
            st.etag = tag;
            st.segments = bodies;
        }
        Ok(st.manifest.clone().unwrap_or(m))
    }

    /// A sealed manifest segment no earlier read fetched (a held copy is reused: its name spells
    /// its checksum), fetched and checked against the size and checksum it is named with. A
    /// missing or damaged segment is refused, so no manifest naming it is used.
    async fn sealed_segment(&self, r: SealedSegment) -> Result<Arc<SegmentBody>, SourceError> {
        let at = self.inner.object(&r.name);
        let refuse = |reason: String| {
            self.inner.report(format!("manifest segment {} is refused: {reason}", r.name));
            self.inner.metrics.refused.inc();
            SourceError::Corrupt { object: r.name.clone(), reason }
        };
        let got = match self.inner.store.get(&at).await {
            Ok(g) => g,
            Err(object_store::Error::NotFound { .. }) => {
                self.inner.report(format!(
                    "manifest segment {} is missing: the head names it, the bucket does not hold it",
                    r.name
                ));
                self.inner.metrics.refused.inc();
                return Err(SourceError::Missing {
                    object: r.name.clone(),
                    reason: "the head names it, the bucket does not hold it".into(),
                });
            }
            Err(e) => return Err(SourceError::Store { op: "get", object: at.to_string(), source: e }),
        };
        // Never more than the head names (itself bounded): a damaged object costs no memory.
        let max = r.size.min(MAX_SEGMENT_BYTES);
        if got.meta.size != r.size {
            return Err(refuse(format!("{} bytes, the head names {}", got.meta.size, r.size)));
        }
        let bytes = read_bounded(got, max)
            .await
            .map_err(|e| SourceError::Store { op: "get", object: at.to_string(), source: e })?
            .ok_or_else(|| refuse(format!("longer than the {} bytes the head names", r.size)))?;
        self.inner.metrics.manifest_segment_reads.inc();
        self.inner.metrics.manifest_bytes.inc_by(bytes.len() as u64);
        verify_segment(&r, &bytes).map(Arc::new).map_err(|e| refuse(e.to_string()))
    }

    /// The manifest last read with its servable slots, taken together.
    fn held(&self) -> (Option<Arc<Manifest>>, Arc<BTreeMap<u64, BucketSlot>>) {
        let st = self.inner.state();
        (st.manifest.clone(), st.servable.clone())
    }

    /// Slots the bucket can serve, by the manifest last read.
    pub fn slots(&self) -> Arc<BTreeMap<u64, BucketSlot>> {
        self.inner.state().servable.clone()
    }

    fn resolve(servable: &BTreeMap<u64, BucketSlot>, slot: Option<u64>) -> Result<BucketSlot, SourceError> {
        let (Some(oldest), Some(newest)) = (servable.values().next(), servable.values().next_back()) else {
            return Err(SourceError::NothingShipped);
        };
        let Some(slot) = slot else { return Ok(*newest) };
        if let Some(b) = servable.get(&slot) {
            return Ok(*b);
        }
        if slot > newest.slot {
            return Err(SourceError::NotYetShipped { slot, newest: newest.slot });
        }
        Err(SourceError::NotInBucket { slot, oldest: oldest.slot, newest: newest.slot })
    }

    /// Makes `slot` (the newest when `None`) servable from the cache: fetches and verifies the
    /// files of its chain that are not cached, evicting the least recently used unpinned files
    /// to stay within the capacity, and returns a lease that keeps them until dropped. A slot
    /// newer than the manifest last read rereads it once.
    pub async fn make_available(&self, slot: Option<u64>) -> Result<Lease, SourceError> {
        if let Some(lease) = self.lease_cached(slot) {
            return Ok(lease);
        }
        if self.manifest().is_none() {
            self.refresh_manifest().await?;
        }
        let (mut m, mut servable) = self.held();
        let b = match Self::resolve(&servable, slot) {
            Ok(b) => b,
            Err(SourceError::NotYetShipped { .. } | SourceError::NothingShipped) => {
                self.refresh_manifest().await?;
                (m, servable) = self.held();
                Self::resolve(&servable, slot)?
            }
            Err(e) => return Err(e),
        };
        let Some(m) = m else { return Err(SourceError::NothingShipped) };
        let chain: Vec<SnapshotObject> = m.chain(&b).into_iter().cloned().collect();
        let need: u64 = chain.iter().map(|o| o.size).sum();
        if need > self.inner.cfg.capacity_bytes {
            return Err(SourceError::CacheTooSmall { slot: b.slot, need, capacity: self.inner.cfg.capacity_bytes });
        }
        let lease = Lease { inner: self.inner.clone(), names: Vec::new(), slot: b };
        let mut lease = lease;
        let mut fetched = false;
        for o in &chain {
            if self.pin(&o.name) {
                self.inner.metrics.hits.inc();
                lease.names.push(o.name.clone());
                continue;
            }
            let _one = self.inner.fetching.lock().await;
            // Another query may have fetched it while this one waited.
            if self.pin(&o.name) {
                self.inner.metrics.hits.inc();
                lease.names.push(o.name.clone());
                continue;
            }
            self.inner.metrics.misses.inc();
            self.make_room(o.size)?;
            self.fetch(o, o.seq == b.seq).await?;
            let mut st = self.inner.state();
            st.tick += 1;
            let used = st.tick;
            st.bytes += o.size;
            st.files.insert(o.name.clone(), Entry { size: o.size, used, pins: 1 });
            self.publish_gauges(&st);
            drop(st);
            lease.names.push(o.name.clone());
            fetched = true;
        }
        if fetched || self.inner.reader.slot(Some(b.slot)).is_err() {
            self.inner.reader.refresh()?;
        }
        Ok(lease)
    }

    /// The lease of `slot` (the newest when `None`) when every file it needs is cached and the
    /// reader serves it already: no request, no await, so a query can take it on any thread.
    /// `None` when anything would have to be fetched or read first ([`Self::make_available`]).
    pub fn lease_cached(&self, slot: Option<u64>) -> Option<Lease> {
        let mut st = self.inner.state();
        let b = Self::resolve(&st.servable, slot).ok()?;
        let m = st.manifest.clone()?;
        let chain = m.chain(&b);
        if chain.iter().any(|o| !st.files.contains_key(&o.name)) {
            return None;
        }
        // The reader indexes a slot once it has read its files; one it has not read yet is
        // left to `make_available`, which refreshes it.
        self.inner.reader.slot(Some(b.slot)).ok().filter(|i| u64::from(i.seq) == b.seq)?;
        st.tick += 1;
        let tick = st.tick;
        let mut names = Vec::with_capacity(chain.len());
        for o in chain {
            if let Some(e) = st.files.get_mut(&o.name) {
                e.pins += 1;
                e.used = tick;
                names.push(o.name.clone());
            }
        }
        self.inner.metrics.hits.inc_by(names.len() as u64);
        drop(st);
        Some(Lease { inner: self.inner.clone(), names, slot: b })
    }

    /// Pins a cached file and marks it used; `false` when it is not cached.
    fn pin(&self, name: &str) -> bool {
        let mut st = self.inner.state();
        st.tick += 1;
        let tick = st.tick;
        match st.files.get_mut(name) {
            Some(e) => {
                e.pins += 1;
                e.used = tick;
                true
            }
            None => false,
        }
    }

    /// Evicts unpinned files, least recently used first, until `size` more bytes fit. When the
    /// pinned files leave no room the cache runs over its capacity until their leases end.
    fn make_room(&self, size: u64) -> Result<(), SourceError> {
        let mut st = self.inner.state();
        while st.bytes + size > self.inner.cfg.capacity_bytes {
            let victim =
                st.files.iter().filter(|(_, e)| e.pins == 0).min_by_key(|(_, e)| e.used).map(|(n, _)| n.clone());
            let Some(name) = victim else {
                log::warn!("cache over its capacity: every cached file is in use");
                break;
            };
            let path = self.inner.cfg.dir.join(&name);
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(SourceError::Io { op: "evict", path, source: e }),
            }
            if let Some(e) = st.files.remove(&name) {
                st.bytes -= e.size;
            }
            self.inner.metrics.evictions.inc();
        }
        self.publish_gauges(&st);
        Ok(())
    }

    fn refuse(&self, o: &SnapshotObject, reason: impl ToString) -> SourceError {
        let reason = reason.to_string();
        self.inner.report(format!("object {} is refused: {reason}", o.name));
        self.inner.metrics.refused.inc();
        SourceError::Corrupt { object: o.name.clone(), reason }
    }

    /// A request about `o` that failed: the object missing (named, counted, logged as what to
    /// repair) or the bucket failing.
    fn failed(&self, o: &SnapshotObject, op: &'static str, e: object_store::Error) -> SourceError {
        match absence(&e) {
            Some(reason) => {
                self.inner.report(format!("object {} is missing from the bucket: {reason}", o.name));
                self.inner.metrics.refused.inc();
                SourceError::Missing { object: o.name.clone(), reason }
            }
            None => SourceError::Store { op, object: self.inner.object(&o.name).to_string(), source: e },
        }
    }

    /// Confirms a slot file's entry against the object itself, without fetching it: its header
    /// (a ranged read of 128 bytes) must name the entry's sequence number, slot, kind,
    /// `oldest_seq`, root, parent, writer gap and size, and its footer (32 bytes) the entry's
    /// checksum. A replica lists, serves and announces a slot's root only once its entry is
    /// confirmed, so a damaged or invented entry is never answered: the root comes from the
    /// object's header, which two independent copies (the manifest and the object) must agree
    /// on. Confirmed once per entry (and for every file fetched whole); returns the header.
    pub async fn confirm(&self, o: &SnapshotObject) -> Result<Header, SourceError> {
        if let Some((held, h)) = self.inner.state().confirmed.get(&o.name)
            && held == o
        {
            return Ok(*h);
        }
        if o.size < (HEADER_LEN + FOOTER_LEN) as u64 || o.size > MAX_SNAPSHOT_OBJECT_BYTES {
            return Err(self.refuse(o, format!("the manifest names {} bytes, not a snapshot file's size", o.size)));
        }
        let want = parse_checksum(&o.checksum).ok_or_else(|| self.refuse(o, "bad checksum in the manifest"))?;
        let at = self.inner.object(&o.name);
        let store = &self.inner.store;
        let head = store.get_range(&at, 0..HEADER_LEN as u64).await.map_err(|e| self.failed(o, "get header", e))?;
        if head.is_empty() {
            let reason = format!("the bucket holds an empty object, the manifest names {} bytes", o.size);
            self.inner.report(format!("object {} is missing from the bucket: {reason}", o.name));
            self.inner.metrics.refused.inc();
            return Err(SourceError::Missing { object: o.name.clone(), reason });
        }
        if head.len() != HEADER_LEN {
            return Err(self.refuse(o, format!("a read of its header got {} bytes", head.len())));
        }
        let h = Header::decode(&head).map_err(|r| self.refuse(o, format!("header: {r}")))?;
        self.check_header(o, &h, true)?;
        let tail = store
            .get_range(&at, o.size - FOOTER_LEN as u64..o.size)
            .await
            .map_err(|e| self.failed(o, "get footer", e))?;
        check_footer(&tail, want).map_err(|r| self.refuse(o, r))?;
        self.inner.state().confirmed.insert(o.name.clone(), (o.clone(), h));
        Ok(h)
    }

    /// Downloads `o`, verifies it completely, and publishes it in the cache directory. `serving`
    /// says `o` is the file of the slot asked for, whose root, parent and gap must be the
    /// manifest's; an older file of its chain is checked for its identity, size and checksum
    /// only (its entry's root is not the one served, and a damaged one must not refuse the
    /// slots after it).
    async fn fetch(&self, o: &SnapshotObject, serving: bool) -> Result<(), SourceError> {
        let at = self.inner.object(&o.name);
        let store = &self.inner.store;
        let want = parse_checksum(&o.checksum).ok_or_else(|| self.refuse(o, "bad checksum in the manifest"))?;
        if o.size < (HEADER_LEN + FOOTER_LEN) as u64 || o.size > MAX_SNAPSHOT_OBJECT_BYTES {
            return Err(self.refuse(o, format!("the manifest names {} bytes, not a snapshot file's size", o.size)));
        }
        if o.size >= self.inner.cfg.range_check_min {
            // Cheap checks first: a wrong object costs two small reads, not the whole file.
            let head = store.get_range(&at, 0..HEADER_LEN as u64).await.map_err(|e| self.failed(o, "get header", e))?;
            let h = Header::decode(&head).map_err(|r| self.refuse(o, format!("header: {r}")))?;
            self.check_header(o, &h, serving)?;
            let tail = store
                .get_range(&at, o.size - FOOTER_LEN as u64..o.size)
                .await
                .map_err(|e| self.failed(o, "get footer", e))?;
            check_footer(&tail, want).map_err(|r| self.refuse(o, r))?;
        }
        let dir = &self.inner.cfg.dir;
        let tmp = dir.join(format!(".{}.tmp", o.name));
        let io = |op, e| SourceError::Io { op, path: tmp.clone(), source: e };
        let mut file = tokio::fs::File::create(&tmp).await.map_err(|e| io("create", e))?;
        let got = store.get(&at).await.map_err(|e| self.failed(o, "get", e))?;
        let mut stream = got.into_stream();
        let mut n = 0u64;
        let mut outcome: Result<(), SourceError> = Ok(());
        while let Some(chunk) = stream.next().await {
            let chunk = match chunk {
                Ok(c) => c,
                Err(e) => {
                    outcome = Err(self.failed(o, "get", e));
                    break;
                }
            };
            n += chunk.len() as u64;
            if n > o.size {
                outcome = Err(self.refuse(o, format!("object is longer than the manifest's {} bytes", o.size)));
                break;
            }
            if let Err(e) = file.write_all(&chunk).await {
                outcome = Err(io("write", e));
                break;
            }
        }
        if outcome.is_ok() {
            outcome = file.sync_all().await.map_err(|e| io("sync", e));
        }
        drop(file);
        if outcome.is_ok() {
            self.inner.metrics.fetched_bytes.inc_by(n);
            outcome = self.verify(o, &tmp, n, serving).map(|h| {
                if serving {
                    self.inner.state().confirmed.insert(o.name.clone(), (o.clone(), h));
                }
            });
        }
        if let Err(e) = outcome {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        let dest = dir.join(&o.name);
        std::fs::rename(&tmp, &dest).map_err(|e| io("rename", e))?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }

    /// The header's identity against the entry; with `serving`, its root, parent and gap too.
    fn check_header(&self, o: &SnapshotObject, h: &Header, serving: bool) -> Result<(), SourceError> {
        if u64::from(h.seq) != o.seq || h.slot != o.slot {
            return Err(self.refuse(
                o,
                format!("its header names sequence {} slot {}, the manifest {} and {}", h.seq, h.slot, o.seq, o.slot),
            ));
        }
        // The reader takes a file's kind from its name, so the header must agree with it.
        if Some(FileKind::of(h)) != o.kind() {
            return Err(self.refuse(o, format!("its header is a {:?} file's, not what its name says", FileKind::of(h))));
        }
        if u64::from(h.oldest_seq) != o.oldest_seq {
            return Err(self.refuse(o, format!("oldest_seq {} is not the manifest's {}", h.oldest_seq, o.oldest_seq)));
        }
        let size = (HEADER_LEN as u64).checked_add(h.body_len).and_then(|s| s.checked_add(FOOTER_LEN as u64));
        if size != Some(o.size) {
            return Err(
                self.refuse(o, format!("its header's body length does not make the manifest's {} bytes", o.size))
            );
        }
        if !serving {
            return Ok(());
        }
        // The manifest lists the slot's root before the file is fetched: the file must agree (a
        // part's root is zero in both).
        if parse_root(&o.root) != Some(h.root) || h.parent != o.parent {
            return Err(self.refuse(o, "its header's root or parent is not the manifest's"));
        }
        let gap = (h.flags & FLAG_AFTER_GAP != 0).then_some(WriterGap { after: h.gap_after });
        if gap != o.gap {
            return Err(self.refuse(o, "its header's writer gap is not the manifest's"));
        }
        Ok(())
    }

    /// The whole-file checks: those `SnapshotReader` makes (through the same code) and the
    /// manifest's size, checksum and identity (with `serving`, its root, parent and gap too).
    fn verify(&self, o: &SnapshotObject, path: &FsPath, n: u64, serving: bool) -> Result<Header, SourceError> {
        if n == 0 {
            let reason = format!("the bucket holds an empty object, the manifest names {} bytes", o.size);
            self.inner.report(format!("object {} is missing from the bucket: {reason}", o.name));
            self.inner.metrics.refused.inc();
            return Err(SourceError::Missing { object: o.name.clone(), reason });
        }
        if n != o.size {
            return Err(self.refuse(o, format!("{n} bytes fetched, the manifest names {}", o.size)));
        }
        let want = parse_checksum(&o.checksum).ok_or_else(|| self.refuse(o, "bad checksum in the manifest"))?;
        let f = MappedFile::open(path, true).map_err(|e| self.refuse(o, FileRefusal::unreadable(e, path)))?;
        let h = f.header;
        drop(f);
        self.check_header(o, &h, serving)?;
        let footer =
            read_tail(path, o.size).map_err(|e| SourceError::Io { op: "read", path: path.to_path_buf(), source: e })?;
        if footer != want {
            return Err(self.refuse(o, "its checksum is not the manifest's"));
        }
        Ok(h)
    }

    /// A cached file's whole-file checks, without counting it as refused by the bucket.
    fn verify_cached(&self, o: &SnapshotObject, path: &FsPath) -> Result<Header, FileRefusal> {
        let f = MappedFile::open(path, true).map_err(|e| FileRefusal::unreadable(e, path))?;
        let h = f.header;
        drop(f);
        let size = (HEADER_LEN as u64).checked_add(h.body_len).and_then(|s| s.checked_add(FOOTER_LEN as u64));
        let identity = u64::from(h.seq) == o.seq
            && h.slot == o.slot
            && Some(FileKind::of(&h)) == o.kind()
            && u64::from(h.oldest_seq) == o.oldest_seq
            && size == Some(o.size);
        if !identity {
            return Err(FileRefusal::Header);
        }
        Ok(h)
    }

    /// Drops the cached files of `slot`'s chain from the cache (a query found one of them
    /// damaged after it was verified: changed on the cache's disk), so the next query fetches
    /// them again. Counted in `aldb_cache_damaged_total`.
    pub fn discard(&self, slot: u64) {
        let (m, servable) = self.held();
        let (Some(m), Some(b)) = (m, servable.get(&slot).copied()) else { return };
        let mut st = self.inner.state();
        for o in m.chain(&b) {
            if st.files.get(&o.name).is_some_and(|e| e.pins == 0) {
                let path = self.inner.cfg.dir.join(&o.name);
                if let Err(e) = std::fs::remove_file(&path)
                    && e.kind() != std::io::ErrorKind::NotFound
                {
                    log::warn!("cannot remove damaged cached file {}: {e}", path.display());
                    continue;
                }
                if let Some(e) = st.files.remove(&o.name) {
                    st.bytes -= e.size;
                }
                self.inner.metrics.cache_damaged.inc();
            }
        }
        self.publish_gauges(&st);
    }

    /// The account `pubkey` at `slot` (the newest the bucket holds when `None`) with its proof,
    /// from verified cached files: the slot is made available, then answered by the
    /// [`SnapshotReader`] over the cache (which checks the proof against the root before
    /// answering) while the lease holds its files.
    pub async fn prove(&self, pubkey: &[u8; 32], slot: Option<u64>) -> Result<AccountProof, SourceError> {
        let lease = self.make_available(slot).await?;
        let answer = self.inner.reader.prove(pubkey, Some(lease.slot()))?;
        drop(lease);
        Ok(answer)
    }
}

/// The body of a GET, read whole unless it exceeds `max` bytes (`None` then): a damaged or
/// hostile object costs a reader at most `max` bytes of memory.
pub(crate) async fn read_bounded(
    got: object_store::GetResult,
    max: u64,
) -> Result<Option<bytes::Bytes>, object_store::Error> {
    let mut stream = got.into_stream();
    let mut out = bytes::BytesMut::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        if (out.len() + chunk.len()) as u64 > max {
            return Ok(None);
        }
        out.extend_from_slice(&chunk);
    }
    Ok(Some(out.freeze()))
}

/// `Some(why)` when a failed request means the object is missing: the bucket does not hold it,
/// or holds fewer bytes than a ranged read asked for (HTTP 416: an empty or truncated object).
pub(crate) fn absence(e: &object_store::Error) -> Option<String> {
    if let object_store::Error::NotFound { .. } = e {
        return Some("the manifest names it, the bucket does not hold it".into());
    }
    let s = e.to_string();
    (s.contains("416") || s.contains("Range Not Satisfiable") || s.contains("InvalidRange"))
        .then(|| "the bucket holds fewer bytes than the manifest names (an empty or truncated object)".into())
}

/// A footer's checksum against the manifest's, and its end magic.
fn check_footer(tail: &[u8], want: u128) -> Result<(), FileRefusal> {
    if tail.len() != FOOTER_LEN || tail[24..32] != END_MAGIC {
        return Err(FileRefusal::NotAFooter);
    }
    let mut sum = [0u8; 16];
    sum.copy_from_slice(&tail[..16]);
    if u128::from_le_bytes(sum) != want {
        return Err(FileRefusal::FooterChecksum);
    }
    Ok(())
}

/// Whether a cached file still is the manifest's object: same size and footer checksum (its
/// bytes were verified before it was renamed into place; the reader checks them again on open).
fn cached_matches(path: &FsPath, o: &SnapshotObject) -> bool {
    let size_ok = std::fs::metadata(path).is_ok_and(|m| m.len() == o.size);
    size_ok && read_tail(path, o.size).ok().is_some_and(|sum| Some(sum) == parse_checksum(&o.checksum))
}

/// The footer checksum of a file of `size` bytes.
fn read_tail(path: &FsPath, size: u64) -> std::io::Result<u128> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path)?;
    f.seek(SeekFrom::Start(size.saturating_sub(FOOTER_LEN as u64)))?;
    let mut sum = [0u8; 16];
    f.read_exact(&mut sum)?;
    Ok(u128::from_le_bytes(sum))
}

/// Why a downloaded or cached file is not the manifest's object.
#[derive(Debug, thiserror::Error)]
enum FileRefusal {
    /// The reader refused the file (told without its cache path: the object is named).
    #[error("{}", strip_path(.source, .path))]
    Unreadable { source: aldb_format::SnapshotError, path: PathBuf },
    #[error("its header is not the manifest entry's")]
    Header,
    #[error("its size or footer is not the manifest's")]
    SizeOrFooter,
    #[error("its footer is not a snapshot file's")]
    NotAFooter,
    #[error("its footer's checksum is not the manifest's")]
    FooterChecksum,
}

impl FileRefusal {
    fn unreadable(source: aldb_format::SnapshotError, path: &FsPath) -> Self {
        Self::Unreadable { source, path: path.to_path_buf() }
    }
}

/// A reader error about the temporary download, without its cache path (the object is named).
fn strip_path(e: &aldb_format::SnapshotError, tmp: &FsPath) -> String {
    let s = e.to_string();
    let p = tmp.display().to_string();
    s.replace(&format!("corrupt snapshot {p}: "), "").replace(&p, "the download")
}
