//! The shipper: copies a snapshot directory's published files, record log and vote-evidence log
//! to a bucket, in publish order, idempotently, and names what is complete in the manifest it
//! writes last (`docs/OBJECT-STORE.md`).

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStore, PutPayload, WriteMultipart};
use tokio::io::AsyncReadExt;

use crate::error::ShipError;
use crate::local::{self, LocalSegment, LocalSnapshot};
use crate::logs::SegmentLog;
use crate::manifest::{
    DEFAULT_FOLD_SEGMENTS, DEFAULT_SEAL_ENTRIES, Head, JournalObject, MANIFEST_NAME, MAX_SEAL_ENTRIES, Manifest,
    SEGMENTS_PREFIX, SealedSegment, SegmentObject, SnapshotObject, WriterGap, checksum_hex, journal_object_name,
    read_segments, root_hex, verify_segment,
};
use crate::metrics::ShipMetrics;
use aldb_format::format::{FLAG_AFTER_GAP, FileKind};

/// What the shipper does, and how hard it tries.
#[derive(Clone, Debug)]
pub struct ShipConfig {
    /// The snapshot directory (the writer's `dir`).
    pub dir: PathBuf,
    /// Pause between passes of [`Shipper::run`].
    pub interval: Duration,
    /// The newest record-log segment grows by one entry a slot and is shipped whole each time
    /// (as an immutable snapshot of its complete entries): at most once per this long.
    pub records_interval: Duration,
    /// The newest vote-evidence segment grows by a block's votes a slot and is shipped whole
    /// each time, like the record log's: at most once per this long.
    pub votes_interval: Duration,
    /// Write the manifest after this many uploads as well as at the end of a pass, so a crash
    /// in a long pass (a shipper catching up) repeats little.
    pub manifest_every: usize,
    /// Archive retention: keep the newest this many slots servable from the bucket (`None`:
    /// keep everything, the default). Independent of the directory's `keep_slots`.
    pub archive_slots: Option<u64>,
    /// Attempts per request before a pass gives up (at least 1).
    pub max_attempts: u32,
    /// Wait before the first retry; doubles per retry.
    pub retry_backoff: Duration,
    /// Files larger than this are uploaded in parts of this size (a multipart upload, which
    /// becomes visible only when complete); smaller ones in one request.
    pub part_size: usize,
    /// The slot-status journal is shipped whole when it changed, at most once per this long
    /// (replicas learn commitment levels from it, so it goes more often than segments).
    pub status_interval: Duration,
    /// Seal the head's entries into an immutable manifest segment when it holds more than this
    /// many (at least 1, at most [`MAX_SEAL_ENTRIES`], so replicas read the head): a manifest
    /// write then costs the head, whatever the archive's length.
    pub seal_entries: usize,
    /// Fold the sealed segments the head names into one segment naming them when there are
    /// more than this many (at least 1) and no archive retention: the head then stays within
    /// `seal_entries` entries and `fold_segments` + 1 segment names, whatever the archive's
    /// length.
    pub fold_segments: usize,
}

impl ShipConfig {
    /// Defaults for a directory: a pass a second, each log's live segment at most every 10 s, a manifest
    /// every 32 uploads, keep everything, 5 attempts from 200 ms, 64 MiB parts, a manifest segment
    /// sealed past 4,096 head entries, and the segments folded past 64.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            interval: Duration::from_secs(1),
            records_interval: Duration::from_secs(10),
            votes_interval: Duration::from_secs(10),
            manifest_every: 32,
            archive_slots: None,
            max_attempts: 5,
            retry_backoff: Duration::from_millis(200),
            part_size: 64 << 20,
            status_interval: Duration::from_secs(1),
            seal_entries: DEFAULT_SEAL_ENTRIES,
            fold_segments: DEFAULT_FOLD_SEGMENTS,
        }
    }
}

/// What one pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShipReport {
    /// Objects uploaded.
    pub uploaded: usize,
    /// Bytes uploaded.
    pub bytes: u64,
    /// Objects found complete in the bucket and not sent again.
    pub already_present: usize,
    /// Local snapshot files refused as damaged (not shipped).
    pub refused: usize,
    /// Manifests written.
    pub manifests: usize,
    /// Objects deleted by the archive retention.
    pub deleted: usize,
    /// The newest slot the manifest names as servable.
    pub shipped_slot: Option<u64>,
}

/// Ships one snapshot directory to one bucket prefix. One shipper per prefix: two would
/// overwrite each other's manifests.
#[derive(Debug)]
pub struct Shipper {
    store: Arc<dyn ObjectStore>,
    prefix: Path,
    cfg: ShipConfig,
    manifest: Option<Manifest>,
    metrics: ShipMetrics,
    /// When each growing segment of each log was last uploaded.
    segment_uploaded: HashMap<(SegmentLog, u64), Instant>,
    /// Sequence numbers already counted as missed.
    missed: BTreeSet<u64>,
    /// The archive's stray objects (left by a crash between a manifest and its deletions) are
    /// looked for once per process.
    swept: bool,
    /// When the journal was last uploaded.
    journal_uploaded: Option<Instant>,
    /// Journal epochs replaced: deleted once a manifest no longer naming them is written.
    stale_journals: Vec<String>,
    /// The vote hold this pass found: the first slot of the lowest local vote segment not yet
    /// archived sealed; recorded once the pass's manifest is durable.
    vote_hold: Option<u64>,
    /// The same for the root-record log: the first slot of the lowest local record segment not
    /// yet archived sealed.
    record_log_hold: Option<u64>,
}

impl Shipper {
    /// A shipper of `cfg.dir` to the objects under `prefix` in `store`. Nothing is read until
    /// the first pass.
    pub fn new(store: Arc<dyn ObjectStore>, prefix: Path, cfg: ShipConfig) -> Result<Self, prometheus::Error> {
        Ok(Self {
            store,
            prefix,
            cfg,
            manifest: None,
            metrics: ShipMetrics::new()?,
            segment_uploaded: HashMap::new(),
            missed: BTreeSet::new(),
            swept: false,
            journal_uploaded: None,
            stale_journals: Vec::new(),
            vote_hold: None,
            record_log_hold: None,
        })
    }

    /// The shipper's metrics.
    pub fn metrics(&self) -> &ShipMetrics {
        &self.metrics
    }

    /// The manifest as last written or read.
    pub fn manifest(&self) -> Option<&Manifest> {
        self.manifest.as_ref()
    }

    fn object(&self, name: &str) -> Path {
        // Names are the writer's (`[0-9-]+.snap`, `[0-9-]+.part`, `records/records-[0-9]+.log`,
        // `votes/votes-[0-9]+.log`): valid parts.
        name.split('/').fold(self.prefix.clone(), |p, part| p.child(part))
    }

    /// Runs `op` until it succeeds, fails with "not found" (an answer, not a failure), or has
    /// failed `max_attempts` times, waiting `retry_backoff`, doubling, between attempts.
    async fn retry<T, F, Fut>(&self, what: &'static str, object: &Path, mut op: F) -> Result<T, ShipError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = object_store::Result<T>>,
    {
        let mut wait = self.cfg.retry_backoff;
        let mut attempt = 1;
        loop {
            match op().await {
                Ok(v) => return Ok(v),
                Err(e @ object_store::Error::NotFound { .. }) => {
                    return Err(ShipError::Store { op: what, object: object.to_string(), source: e });
                }
                Err(e) if attempt >= self.cfg.max_attempts.max(1) => {
                    self.metrics.failures.inc();
                    return Err(ShipError::Store { op: what, object: object.to_string(), source: e });
                }
                Err(e) => {
                    log::warn!("{what} {object} failed (attempt {attempt}), retrying in {wait:?}: {e}");
                    self.metrics.retries.inc();
                    tokio::time::sleep(wait).await;
                    wait = wait.saturating_mul(2);
                    attempt += 1;
                }
            }
        }
    }

    async fn load_manifest(&mut self) -> Result<(), ShipError> {
        if self.manifest.is_some() {
            return Ok(());
        }
        let at = self.object(MANIFEST_NAME);
        let store = self.store.clone();
        let got = self.retry("get", &at, || async { store.get(&at).await?.bytes().await }).await;
        let head = match got {
            Ok(bytes) => Head::decode(&bytes).map_err(ShipError::ManifestRefused)?,
            Err(ShipError::Store { source: object_store::Error::NotFound { .. }, .. }) => {
                self.manifest = Some(Manifest::default());
                // A bucket nothing was shipped to may not exist until the first upload creates it.
                if let Err(e) = self.sweep_unnamed_segments().await {
                    log::debug!("no manifest segments swept from a bucket without a manifest: {e}");
                }
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let this = &*self;
        let bodies = read_segments(
            &head,
            |_| None,
            |r: SealedSegment| async move {
                let at = this.object(&r.name);
                let store = this.store.clone();
                let got = this.retry("get", &at, || async { store.get(&at).await?.bytes().await }).await;
                let bytes = match got {
                    Ok(b) => b,
                    Err(ShipError::Store { source: object_store::Error::NotFound { .. }, .. }) => {
                        return Err(ShipError::Manifest(format!(
                            "sealed segment {} is missing from the bucket",
                            r.name
                        )));
                    }
                    Err(e) => return Err(e),
                };
                verify_segment(&r, &bytes)
                    .map(Arc::new)
                    .map_err(|source| ShipError::SegmentRefused { name: r.name.clone(), source })
            },
        )
        .await?;
        let m = Manifest::assemble(head, &|n| bodies.get(n).map(|b| b.as_ref())).map_err(ShipError::ManifestRefused)?;
        self.manifest = Some(m);
        // Housekeeping: an unnamed segment is never read, so failing to delete it only leaves
        // it for the next process.
        if let Err(e) = self.sweep_unnamed_segments().await {
            log::warn!("cannot sweep unnamed manifest segments: {e}");
        }
        Ok(())
    }

    /// Deletes the sealed segments under the prefix that the head does not name: uploaded by a
    /// shipper that died before the head naming them, or left by one that died between a head
    /// and the deletions it allowed. No reader trusts them (a reader reads only what a head
    /// names), and a new seal writes a new object, so none is ever half-trusted or reused.
    async fn sweep_unnamed_segments(&mut self) -> Result<(), ShipError> {
        use futures_util::TryStreamExt;
        let Some(m) = self.manifest.as_ref() else { return Ok(()) };
        let under = self.prefix.child(SEGMENTS_PREFIX);
        let listed: Vec<_> = self.store.list(Some(&under)).try_collect().await.map_err(|e| ShipError::Store {
            op: "list",
            object: under.to_string(),
            source: e,
        })?;
        let named: BTreeSet<Path> = m.named_segments().iter().map(|n| self.object(n)).collect();
        for o in listed.into_iter().filter(|o| !named.contains(&o.location)) {
            let at = o.location;
            let store = self.store.clone();
            match self.retry("delete", &at, || store.delete(&at)).await {
                Ok(()) | Err(ShipError::Store { source: object_store::Error::NotFound { .. }, .. }) => {}
                Err(e) => return Err(e),
            }
            log::info!("deleted {at}: a manifest segment no head names");
            self.metrics.archive_deletes.inc();
        }
        Ok(())
    }

    /// Writes the head, after sealing its entries into a new manifest segment when they exceed
    /// `seal_entries`: the segment is uploaded whole before the head that names it.
    async fn write_manifest(&mut self, report: &mut ShipReport) -> Result<(), ShipError> {
        let Some(m) = self.manifest.as_ref() else { return Ok(()) };
        let next = m.generation + 1;
        if m.unsealed_entries() > self.cfg.seal_entries.clamp(1, MAX_SEAL_ENTRIES)
            && let Some((r, bytes)) = m.seal(next)
        {
            self.put_manifest_object(&r.name, bytes).await?;
            self.metrics.manifest_segments.inc();
            if let Some(m) = self.manifest.as_mut() {
                m.sealed_segments.push(r);
            }
        }
        // Without retention the head's list of segments grows with the archive: past
        // `fold_segments` they are folded into one segment naming them, which the head names
        // instead. (With retention the list is bounded by the archive, and a fold the retention
        // would cut into is unfolded again.)
        let fold = self
            .manifest
            .as_ref()
            .filter(|m| self.cfg.archive_slots.is_none() && m.sealed_segments.len() > self.cfg.fold_segments.max(1));
        if let Some((r, bytes)) = fold.and_then(|m| m.fold(next)) {
            self.put_manifest_object(&r.name, bytes).await?;
            self.metrics.manifest_segments.inc();
            if let Some(m) = self.manifest.as_mut() {
                let folded = std::mem::replace(&mut m.sealed_segments, vec![r.clone()]);
                m.folds.insert(r.name, folded);
            }
        }
        let Some(m) = self.manifest.as_mut() else { return Ok(()) };
        m.generation = next;
        let head = m.encode_head();
        self.put_manifest_object(MANIFEST_NAME, head).await?;
        self.metrics.manifests.inc();
        report.manifests += 1;
        Ok(())
    }

    /// Uploads one object of the manifest (the head or a segment) whole, counting its bytes.
    async fn put_manifest_object(&self, name: &str, bytes: Vec<u8>) -> Result<(), ShipError> {
        let at = self.object(name);
        let payload = Bytes::from(bytes);
        let store = self.store.clone();
        self.retry("put", &at, || store.put(&at, PutPayload::from(payload.clone()))).await?;
        self.metrics.manifest_bytes.inc_by(payload.len() as u64);
        Ok(())
    }

    /// Whether the bucket already holds `s` complete: an object of the same size whose last 32
    /// bytes are the file's footer (its checksum covers the whole file, and an upload is atomic,
    /// so an object that ends in the footer is the file).
    async fn present(&self, s: &LocalSnapshot, v: &local::VerifiedSnapshot) -> Result<bool, ShipError> {
        let at = self.object(&s.name);
        let store = self.store.clone();
        let meta = match self.retry("head", &at, || store.head(&at)).await {
            Ok(m) => m,
            Err(ShipError::Store { source: object_store::Error::NotFound { .. }, .. }) => return Ok(false),
            Err(e) => return Err(e),
        };
        if meta.size != v.size {
            return Ok(false);
        }
        let range = v.size - v.footer.len() as u64..v.size;
        let tail = self.retry("get", &at, || store.get_range(&at, range.clone())).await?;
        Ok(tail.as_ref() == v.footer)
    }

    /// Uploads a local file whole: one request, or a multipart upload for a large one. Either
    /// way the object appears only once complete.
    async fn upload_file(&self, name: &str, path: &std::path::Path, size: u64) -> Result<(), ShipError> {
        let at = self.object(name);
        let io = |op, e| ShipError::Io { op, path: path.to_path_buf(), source: e };
        if size <= self.cfg.part_size as u64 {
            let bytes = Bytes::from(tokio::fs::read(path).await.map_err(|e| io("read", e))?);
            let store = self.store.clone();
            self.retry("put", &at, || store.put(&at, PutPayload::from(bytes.clone()))).await?;
        } else {
            let mut attempt = 1;
            loop {
                match self.upload_parts(&at, path).await {
                    Ok(()) => break,
                    Err(e) if attempt >= self.cfg.max_attempts.max(1) => {
                        self.metrics.failures.inc();
                        return Err(e);
                    }
                    Err(e) => {
                        log::warn!("multipart upload of {at} failed (attempt {attempt}): {e}");
                        self.metrics.retries.inc();
                        tokio::time::sleep(self.cfg.retry_backoff * attempt).await;
                        attempt += 1;
                    }
                }
            }
        }
        self.metrics.uploads.inc();
        self.metrics.upload_bytes.inc_by(size);
        Ok(())
    }

    async fn upload_parts(&self, at: &Path, path: &std::path::Path) -> Result<(), ShipError> {
        let store_err = |op, e| ShipError::Store { op, object: at.to_string(), source: e };
        let io = |op, e| ShipError::Io { op, path: path.to_path_buf(), source: e };
        let upload = self.store.put_multipart(at).await.map_err(|e| store_err("start multipart upload", e))?;
        let mut w = WriteMultipart::new_with_chunk_size(upload, self.cfg.part_size);
        let mut f = tokio::fs::File::open(path).await.map_err(|e| io("open", e))?;
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = match f.read(&mut buf).await {
                Ok(n) => n,
                Err(e) => {
                    let _ = w.abort().await;
                    return Err(io("read", e));
                }
            };
            if n == 0 {
                break;
            }
            if let Err(e) = w.wait_for_capacity(4).await {
                let _ = w.abort().await;
                return Err(store_err("upload part", e));
            }
            w.write(&buf[..n]);
        }
        w.finish().await.map_err(|e| store_err("complete multipart upload", e))?;
        Ok(())
    }

    /// One pass: every published snapshot file the manifest does not name yet, by ascending
    /// sequence number, then the record-log and vote-evidence segments, then the manifest; then the archive's
    /// retention. A failed request (after its retries) ends the pass with an error, after
    /// writing a manifest that names what did complete.
    pub async fn ship_once(&mut self) -> Result<ShipReport, ShipError> {
        let mut report = ShipReport::default();
        self.load_manifest().await?;
        let result = self.ship_files(&mut report).await;
        if report.uploaded + report.already_present > 0 || result.is_err() {
            // Name what completed even when the pass failed: nothing done is done twice.
            let written = self.write_manifest(&mut report).await;
            result?;
            written?;
        }
        self.record_hold();
        self.delete_stale_journals(&mut report).await?;
        self.prune_archive(&mut report).await?;
        let servable = self.manifest.as_ref().map(|m| m.servable()).unwrap_or_default();
        report.shipped_slot = servable.keys().next_back().copied();
        self.metrics.shipped_slot.set(report.shipped_slot.map_or(0, |s| s as i64));
        Ok(report)
    }

    /// After a pass whose manifest is durable: tells a writer that holds retention for the
    /// archive (`WriterConfig::hold_for_shipper`) which files it may now delete. Every file the
    /// pass listed is archived, refused as damaged or already gone, so the hold is one past the
    /// newest file the manifest names. Then the same for the vote-evidence log (the plugin's
    /// evidence writer with `hold_for_shipper`): the first slot of the lowest vote segment the
    /// pass left not archived sealed, and likewise for the root-record log (the plugin's record
    /// producer and `aldb simulate` with `hold_for_shipper`). A failure to write any of them only
    /// delays local pruning.
    fn record_hold(&self) {
        let newest = self.manifest.as_ref().and_then(|m| m.snapshots.iter().map(|o| o.seq).max());
        if let Some(newest) = newest
            && let Err(e) = aldb_format::shipped::write_shipped(&self.cfg.dir, newest.saturating_add(1))
        {
            log::warn!("cannot record the archive hold: {e}");
            self.metrics.failures.inc();
        }
        if let Some(first_slot) = self.vote_hold
            && let Err(e) = aldb_format::shipped::write_votes_shipped(&self.cfg.dir, first_slot)
        {
            log::warn!("cannot record the vote-evidence archive hold: {e}");
            self.metrics.failures.inc();
        }
        if let Some(first_slot) = self.record_log_hold
            && let Err(e) = aldb_format::shipped::write_records_shipped(&self.cfg.dir, first_slot)
        {
            log::warn!("cannot record the root-record archive hold: {e}");
            self.metrics.failures.inc();
        }
    }

    async fn ship_files(&mut self, report: &mut ShipReport) -> Result<(), ShipError> {
        // The journal is read before the listing: the writer journals a slot only after its file
        // is published, so every file the shipped journal names is in the listing below.
        let journal = local::read_journal(&self.cfg.dir)?;
        let local = local::list_snapshots(&self.cfg.dir)?;
        let m = self.manifest.clone().unwrap_or_default();
        // A part names the slot it belongs to before that slot's file exists: lag counts slot files.
        let newest_local = local.iter().filter(|s| s.kind == FileKind::Slot).map(|s| s.slot).max();
        // A file numbered at or below the newest sealed entry can no longer be named (sealed
        // segments are immutable); only a file refused as damaged can be there.
        let sealed_to = m.snapshots.get(..m.sealed_counts().0).and_then(|s| s.last()).map(|s| s.seq);
        let pending: Vec<LocalSnapshot> =
            local.into_iter().filter(|s| m.snapshot(s.seq).is_none() && sealed_to.is_none_or(|t| s.seq > t)).collect();
        self.count_missed(&m, &pending);
        let mut lag_bytes: u64 =
            pending.iter().filter_map(|s| std::fs::metadata(&s.path).ok()).map(|md| md.len()).sum();
        self.update_lag(newest_local, lag_bytes);
        let mut since_manifest = 0;
        for s in &pending {
            let v = match local::verify_snapshot(s) {
                Ok(v) => v,
                Err(aldb_format::SnapshotError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                    // Pruned between the listing and now.
                    self.metrics.missed_files.inc();
                    continue;
                }
                Err(e) => {
                    log::error!("snapshot file {} is not shipped: {e}", s.name);
                    self.metrics.failures.inc();
                    report.refused += 1;
                    continue;
                }
            };
            if self.present(s, &v).await? {
                self.metrics.already_present.inc();
                report.already_present += 1;
            } else {
                self.upload_file(&s.name, &s.path, v.size).await?;
                report.uploaded += 1;
                report.bytes += v.size;
            }
            let entry = SnapshotObject {
                name: s.name.clone(),
                seq: s.seq,
                slot: s.slot,
                oldest_seq: v.oldest_seq,
                size: v.size,
                checksum: checksum_hex(v.checksum),
                root: root_hex(&v.header.root),
                parent: v.header.parent,
                gap: (v.header.flags & FLAG_AFTER_GAP != 0).then_some(WriterGap { after: v.header.gap_after }),
            };
            if let Some(m) = self.manifest.as_mut() {
                let at = m.snapshots.partition_point(|o| o.seq < s.seq);
                m.snapshots.insert(at, entry);
            }
            lag_bytes = lag_bytes.saturating_sub(v.size);
            self.update_lag(newest_local, lag_bytes);
            since_manifest += 1;
            if since_manifest >= self.cfg.manifest_every.max(1) {
                self.write_manifest(report).await?;
                since_manifest = 0;
            }
        }
        for kind in SegmentLog::ALL {
            lag_bytes = self.ship_segments(report, kind, lag_bytes).await?;
        }
        self.update_lag(newest_local, lag_bytes);
        match journal {
            Some(bytes) => self.ship_journal(report, bytes).await,
            None => Ok(()),
        }
    }

    /// Counts, once each, the sequence numbers between the newest shipped file and the oldest
    /// pending one: the local pruner deleted them before they could be shipped.
    fn count_missed(&mut self, m: &Manifest, pending: &[LocalSnapshot]) {
        let (Some(last), Some(first)) = (m.snapshots.last(), pending.first()) else { return };
        for seq in last.seq + 1..first.seq {
            if self.missed.insert(seq) {
                log::error!(
                    "snapshot file #{seq} was deleted locally before it was shipped: its slots are not archived"
                );
                self.metrics.missed_files.inc();
            }
        }
    }

    fn update_lag(&self, newest_local: Option<u64>, lag_bytes: u64) {
        let shipped = self
            .manifest
            .as_ref()
            .and_then(|m| m.snapshots.iter().filter(|s| s.kind() == Some(FileKind::Slot)).map(|s| s.slot).max());
        let lag = newest_local.map_or(0, |n| n.saturating_sub(shipped.unwrap_or(0)));
        self.metrics.lag_slots.set(i64::try_from(lag).unwrap_or(i64::MAX));
        self.metrics.lag_bytes.set(i64::try_from(lag_bytes).unwrap_or(i64::MAX));
    }

    /// Ships the segments of log `kind` that grew since the manifest named them (the growing one at
    /// most once per its interval, a sealed one at once). Returns `lag_bytes` plus the growth
    /// left for a later pass.
    async fn ship_segments(
        &mut self,
        report: &mut ShipReport,
        kind: SegmentLog,
        mut lag_bytes: u64,
    ) -> Result<u64, ShipError> {
        let interval = match kind {
            SegmentLog::Records => self.cfg.records_interval,
            SegmentLog::Votes => self.cfg.votes_interval,
        };
        let segments = kind.list(&self.cfg.dir)?;
        let count = segments.len();
        // Every listed segment but the newest is sealed, and this loop leaves each sealed one
        // archived whole (named sealed in the manifest), empty of valid entries, refused as no
        // longer extending what was shipped, or gone; an error ends the pass before any hold is
        // recorded. So once it completes, the archive may lack only the newest segment.
        *self.hold_of(kind) = None;
        let lacking_from = segments.last().map(|(first, _)| *first);
        for (i, (first, path)) in segments.into_iter().enumerate() {
            let Some(seg) = kind.read(first, &path, i + 1 < count)? else { continue };
            if seg.last_slot.is_none() {
                continue;
            }
            let shipped =
                self.manifest.as_ref().and_then(|m| kind.entries(m).iter().find(|g| g.first_slot == first)).cloned();
            let sum = xxhash_rust::xxh3::xxh3_128(&seg.bytes);
            if let Some(g) = &shipped {
                if g.size == seg.bytes.len() as u64 && g.checksum == checksum_hex(sum) {
                    if g.sealed != seg.sealed {
                        self.set_segment(kind, &seg, sum);
                        report.already_present += 1;
                    }
                    continue;
                }
                if !is_prefix_of(g, &seg) {
                    log::error!(
                        "{} segment {} no longer starts with the {} bytes shipped: the bucket's copy is kept",
                        kind.dir_name(),
                        seg.file_name,
                        g.size
                    );
                    self.metrics.failures.inc();
                    continue;
                }
                let recent = self.segment_uploaded.get(&(kind, first)).is_some_and(|t| t.elapsed() < interval);
                if !seg.sealed && recent {
                    lag_bytes += seg.bytes.len() as u64 - g.size;
                    continue;
                }
            }
            let at = self.object(&kind.object_name(&seg.file_name));
            let bytes = Bytes::from(seg.bytes.clone());
            let store = self.store.clone();
            self.retry("put", &at, || store.put(&at, PutPayload::from(bytes.clone()))).await?;
            self.metrics.uploads.inc();
            self.metrics.upload_bytes.inc_by(bytes.len() as u64);
            report.uploaded += 1;
            report.bytes += bytes.len() as u64;
            self.segment_uploaded.insert((kind, first), Instant::now());
            self.set_segment(kind, &seg, sum);
        }
        *self.hold_of(kind) = lacking_from;
        Ok(lag_bytes)
    }

    /// Where the pass keeps the hold it found for log `kind`.
    fn hold_of(&mut self, kind: SegmentLog) -> &mut Option<u64> {
        match kind {
            SegmentLog::Records => &mut self.record_log_hold,
            SegmentLog::Votes => &mut self.vote_hold,
        }
    }

    /// Ships the journal's intact bytes when they changed: over the same object while they
    /// extend what was shipped, under a new epoch when the journal was replaced (compacted).
    async fn ship_journal(&mut self, report: &mut ShipReport, bytes: Vec<u8>) -> Result<(), ShipError> {
        let Some(m) = self.manifest.as_ref() else { return Ok(()) };
        let sum = xxhash_rust::xxh3::xxh3_128(&bytes);
        let shipped = m.status_journal.clone();
        let epoch = match &shipped {
            Some(j) if j.size == bytes.len() as u64 && j.checksum == checksum_hex(sum) => return Ok(()),
            Some(j) => {
                let extends = usize::try_from(j.size).ok().and_then(|n| bytes.get(..n)).is_some_and(|p| {
                    crate::manifest::parse_checksum(&j.checksum) == Some(xxhash_rust::xxh3::xxh3_128(p))
                });
                let recent = self.journal_uploaded.is_some_and(|t| t.elapsed() < self.cfg.status_interval);
                if extends && recent {
                    return Ok(());
                }
                if extends { j.epoch } else { j.epoch + 1 }
            }
            None => 1,
        };
        let name = journal_object_name(epoch);
        let at = self.object(&name);
        let payload = Bytes::from(bytes);
        let store = self.store.clone();
        self.retry("put", &at, || store.put(&at, PutPayload::from(payload.clone()))).await?;
        self.metrics.uploads.inc();
        self.metrics.upload_bytes.inc_by(payload.len() as u64);
        report.uploaded += 1;
        report.bytes += payload.len() as u64;
        self.journal_uploaded = Some(Instant::now());
        if let Some(old) = shipped.filter(|j| j.epoch != epoch) {
            self.stale_journals.push(old.name);
        }
        if let Some(m) = self.manifest.as_mut() {
            m.status_journal =
                Some(JournalObject { name, epoch, size: payload.len() as u64, checksum: checksum_hex(sum) });
        }
        Ok(())
    }

    /// Deletes journal epochs the manifest written last no longer names.
    async fn delete_stale_journals(&mut self, report: &mut ShipReport) -> Result<(), ShipError> {
        for name in std::mem::take(&mut self.stale_journals) {
            let at = self.object(&name);
            let store = self.store.clone();
            match self.retry("delete", &at, || store.delete(&at)).await {
                Ok(()) | Err(ShipError::Store { source: object_store::Error::NotFound { .. }, .. }) => {}
                Err(e) => return Err(e),
            }
            report.deleted += 1;
        }
        Ok(())
    }

    fn set_segment(&mut self, kind: SegmentLog, seg: &LocalSegment, sum: u128) {
        let Some(m) = self.manifest.as_mut() else { return };
        let entry = SegmentObject {
            name: kind.object_name(&seg.file_name),
            first_slot: seg.first_slot,
            last_slot: seg.last_slot,
            size: seg.bytes.len() as u64,
            checksum: checksum_hex(sum),
            sealed: seg.sealed,
            transitions: seg.transitions.clone(),
        };
        let (_, sealed_records, sealed_votes) = m.sealed_counts();
        let sealed = match kind {
            SegmentLog::Records => sealed_records,
            SegmentLog::Votes => sealed_votes,
        };
        let entries = kind.entries_mut(m);
        let (i, found) = match entries.binary_search_by_key(&seg.first_slot, |g| g.first_slot) {
            Ok(i) => (i, true),
            Err(i) => (i, false),
        };
        if i < sealed {
            // Its entry (or its place) is in a sealed manifest segment, which never changes.
            log::warn!("{} segment {} lies in a sealed manifest segment: not renamed", kind.dir_name(), seg.file_name);
            self.metrics.failures.inc();
            return;
        }
        if found {
            entries[i] = entry;
        } else {
            entries.insert(i, entry);
        }
    }

    /// With an archive retention, drops from the manifest the files no kept slot reaches and
    /// the sealed segments of both logs older than every kept slot, writes the manifest, and only then
    /// deletes those objects: a reader never finds a manifest naming a deleted object. Entries
    /// in sealed manifest segments are dropped by the head's floor, so no segment is rewritten;
    /// a segment wholly below it is deleted like the objects.
    async fn prune_archive(&mut self, report: &mut ShipReport) -> Result<(), ShipError> {
        let (Some(keep), Some(m)) = (self.cfg.archive_slots, self.manifest.as_ref()) else { return Ok(()) };
        let servable = m.servable();
        let Some(newest) = servable.keys().next_back().copied() else { return Ok(()) };
        let kept: Vec<_> = servable.values().filter(|b| b.slot.saturating_add(keep) > newest).collect();
        let (Some(min_seq), Some(oldest_slot)) =
            (kept.iter().map(|b| b.oldest_seq).min(), kept.iter().map(|b| b.slot).min())
        else {
            return Ok(());
        };
        let snapshots: Vec<bool> = m.snapshots.iter().map(|s| s.seq >= min_seq).collect();
        let [records, mut votes] = SegmentLog::ALL.map(|kind| {
            let entries = kind.entries(m);
            let last_first = entries.last().map(|g| g.first_slot);
            entries
                .iter()
                .map(|g| !g.sealed || Some(g.first_slot) == last_first || g.last_slot.is_none_or(|l| l >= oldest_slot))
                .collect::<Vec<bool>>()
        });
        // Never the last copy of an epoch's transition: a client following epochs from an old
        // checkpoint needs it, and only the writer's next carry or keep puts it in a newer one.
        let mut later = std::collections::BTreeSet::new();
        for (keep, g) in votes.iter_mut().zip(&m.vote_segments).rev() {
            if g.transitions.iter().any(|e| !later.contains(e)) {
                *keep = true;
            }
            later.extend(g.transitions.iter().copied());
        }
        let mut gone = match self.manifest.as_mut() {
            Some(m) => m.prune_leading(&snapshots, &records, &votes),
            None => Vec::new(),
        };
        if !gone.is_empty() {
            self.write_manifest(report).await?;
        }
        if !self.swept {
            gone.extend(self.strays(min_seq).await?);
            self.swept = true;
        }
        for name in gone {
            let at = self.object(&name);
            let store = self.store.clone();
            match self.retry("delete", &at, || store.delete(&at)).await {
                Ok(()) | Err(ShipError::Store { source: object_store::Error::NotFound { .. }, .. }) => {}
                Err(e) => return Err(e),
            }
            self.metrics.archive_deletes.inc();
            report.deleted += 1;
        }
        Ok(())
    }

    /// Objects under the prefix that a crash between a manifest write and the deletions it
    /// allowed left behind: snapshot objects numbered below `min_seq` and log segments older
    /// than the oldest of their log, that the manifest does not name.
    async fn strays(&self, min_seq: u64) -> Result<Vec<String>, ShipError> {
        use futures_util::TryStreamExt;
        let listed: Vec<_> = self.store.list(Some(&self.prefix)).try_collect().await.map_err(|e| ShipError::Store {
            op: "list",
            object: self.prefix.to_string(),
            source: e,
        })?;
        let Some(m) = self.manifest.as_ref() else { return Ok(Vec::new()) };
        let mut out = Vec::new();
        for o in listed {
            let Some(n) = o.location.filename() else { continue };
            let snapshot = aldb_format::format::parse_published_name(n)
                .is_some_and(|(seq, _, _)| u64::from(seq) < min_seq && m.snapshot(u64::from(seq)).is_none());
            if snapshot && o.location == self.object(n) {
                out.push(n.to_string());
                continue;
            }
            for kind in SegmentLog::ALL {
                let name = kind.object_name(n);
                let oldest = kind.entries(m).first().map(|g| g.first_slot);
                let stray = kind.first_slot_of(n).is_some_and(|f| oldest.is_some_and(|o| f < o));
                if stray && o.location == self.object(&name) {
                    out.push(name);
                }
            }
        }
        Ok(out)
    }

    /// Passes until `stop` completes, pausing `interval` between them; a failed pass is logged
    /// and counted, and the next one starts over from the manifest it holds.
    pub async fn run(&mut self, stop: impl Future<Output = ()>) {
        tokio::pin!(stop);
        loop {
            match self.ship_once().await {
                Ok(r) if r.uploaded > 0 => log::info!(
                    "shipped {} objects ({} bytes), newest servable slot {:?}",
                    r.uploaded,
                    r.bytes,
                    r.shipped_slot
                ),
                Ok(_) => {}
                Err(e) => log::error!("shipping pass failed: {e}"),
            }
            tokio::select! {
                _ = &mut stop => return,
                _ = tokio::time::sleep(self.cfg.interval) => {}
            }
        }
    }
}

/// Whether the shipped bytes `g` are a prefix of the local segment `seg` (a segment only grows).
fn is_prefix_of(g: &SegmentObject, seg: &LocalSegment) -> bool {
    usize::try_from(g.size)
        .ok()
        .and_then(|n| seg.bytes.get(..n))
        .is_some_and(|p| crate::manifest::parse_checksum(&g.checksum) == Some(xxhash_rust::xxh3::xxh3_128(p)))
}
