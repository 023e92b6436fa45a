//! A replica's copy of the logs the bucket holds: the record-log segments, the vote-evidence
//! segments and the slot-status journal, kept in the cache directory in exactly a snapshot
//! directory's layout (`records/records-<first slot>.log`, `votes/votes-<first slot>.log`,
//! `slot-status.log`), so `RecordLogReader`, `VoteLogReader` and `StatusFollower` follow them
//! unchanged, as they follow a writer's directory.
//!
//! Shipped log objects only grow (a newer upload of a segment starts with the bytes of every
//! earlier one, and a replaced journal is shipped under a new epoch), so the copy grows by
//! appending: the new bytes are fetched with a ranged read, and appended only once the running
//! XXH3-128 of the whole copy, new bytes included, is the manifest's checksum. A segment is
//! brought to its manifest size before the next one is created, so a follower only ever sees an
//! older segment complete, and at most the newest one growing. A new journal epoch is written
//! under a temporary name and renamed into place, which a follower reads as a replaced journal.
//!
//! A copy is repaired in place, without a restart. A segment copied while the bucket's object was
//! damaged (its bytes not the manifest's) is fetched again whole once the object changes (its
//! ETag, modification time or size), and a copy whose bytes on the cache's disk no longer hash to
//! what was verified (found by a slow scrub, [`LogMirror::with_scrub_rate`]) is fetched again at
//! once. Either way the new bytes replace the copy (a temporary file, fsync, rename, fsync of the
//! directory) only when they have the manifest's size and checksum; the sync names the segment in
//! [`LogSync::repaired_record_segments`] or [`LogSync::repaired_vote_segments`], for the readers
//! that read the old bytes to read it again.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path as FsPath, PathBuf};
use std::time::{Duration, Instant};

use aldb_format::status::STATUS_FILE;
use xxhash_rust::xxh3::Xxh3;

use crate::cache::{ObjectStoreSource, absence, read_bounded};
use crate::error::SourceError;
use crate::logs::SegmentLog;
use crate::manifest::{MAX_LOG_OBJECT_BYTES, Manifest, SegmentObject, parse_checksum};

/// Slots of vote evidence a replica copies by default: about an hour of 400 ms slots. A
/// mainnet slot's votes are some 450 KB, so this is about 4 GB of disk beside the file cache.
pub const DEFAULT_VOTE_KEEP_SLOTS: u64 = 9_000;

/// Bytes of the copy a replica hashes again per second by default, to find copies damaged on the
/// cache's disk: a full pass over the default vote window (about 4 GB) takes some eight minutes.
pub const DEFAULT_SCRUB_BYTES_PER_SEC: u64 = 8 << 20;

/// How often a segment copied damaged asks the bucket whether its object changed.
const DAMAGED_CHECK: Duration = Duration::from_secs(1);

/// How often a segment copied damaged is fetched again whole when the bucket says nothing of
/// the object's version (no ETag, no modification time): a changed object cannot be seen then.
const DAMAGED_REFETCH: Duration = Duration::from_secs(60);

/// The temporary name a new journal epoch is written under before it is renamed into place.
const JOURNAL_TMP: &str = ".slot-status.log.mirror.tmp";

/// Whether `name` (in the cache directory) belongs to the log copy rather than the file cache.
pub(crate) fn is_mirror_name(name: &str) -> bool {
    name == STATUS_FILE || name == JOURNAL_TMP
}

/// What the copy holds of one log object: its length and the running hash of those bytes, and
/// whether they are not the manifest's (copied as the bucket holds them, for the log readers to
/// skip the damaged entries as they do in a snapshot directory).
#[derive(Clone)]
struct Copied {
    len: u64,
    hash: Xxh3,
    damaged: bool,
    /// Of a damaged copy: the bucket object's version (ETag, modification time, size) when it
    /// was last fetched again, as a HEAD request said it; it is fetched again when that
    /// changes.
    version: Option<String>,
    /// When a damaged copy last asked the bucket for its object's version, and when it was last
    /// fetched whole.
    checked: Option<Instant>,
    fetched: Option<Instant>,
}

impl Copied {
    fn empty() -> Self {
        Self { len: 0, hash: Xxh3::new(), damaged: false, version: None, checked: None, fetched: None }
    }
}

impl std::fmt::Debug for Copied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Copied").field("len", &self.len).field("damaged", &self.damaged).finish_non_exhaustive()
    }
}

/// An object's version as the bucket states it, to tell a replaced object from the same one.
fn version_of(meta: &object_store::ObjectMeta) -> Option<String> {
    (meta.e_tag.is_some() || meta.version.is_some())
        .then(|| format!("{:?} {:?} {} {}", meta.e_tag, meta.version, meta.last_modified, meta.size))
}

/// Whether `path`'s first `len` bytes (and no more) hash to `hash`: the copy is what was
/// verified.
fn copy_intact(path: &FsPath, len: u64, hash: &Xxh3) -> std::io::Result<bool> {
    let mut f = std::fs::File::open(path)?;
    if f.metadata()?.len() != len {
        return Ok(false);
    }
    let mut h = Xxh3::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut left = len;
    while left > 0 {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(false);
        }
        h.update(&buf[..n]);
        left = left.saturating_sub(n as u64);
    }
    Ok(h.digest128() == hash.digest128())
}

/// What one [`ObjectStoreSource::sync_logs`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogSync {
    /// Bytes fetched and appended (or written for a new segment or journal epoch).
    pub bytes: u64,
    /// Segments created.
    pub new_segments: usize,
    /// Segments removed from the copy (older than the window kept, or no longer in the bucket).
    pub dropped_segments: usize,
    /// Of [`LogSync::new_segments`], those of the vote-evidence log.
    pub new_vote_segments: usize,
    /// The journal was replaced by a new epoch.
    pub new_journal: bool,
    /// Log objects missing, refused or damaged (each named): the rest was copied all the same.
    pub failed: Vec<String>,
    /// Record-log segments, by first slot, whose copy was replaced whole by bytes verified
    /// against the manifest (it was copied damaged from the bucket, or was damaged on the
    /// cache's disk): a reader that read the old bytes reads the segment again.
    pub repaired_record_segments: Vec<u64>,
    /// Vote-evidence segments, by first slot, repaired the same way.
    pub repaired_vote_segments: Vec<u64>,
}

/// The copy of the bucket's logs in a cache directory. One per directory; its owner calls
/// [`ObjectStoreSource::sync_logs`] after each manifest refresh.
#[derive(Debug)]
pub struct LogMirror {
    dir: PathBuf,
    /// Record slots kept: segments whose newest record is more than this many slots older than
    /// the newest shipped record are not copied (a reader serves a bounded window anyway).
    keep_slots: u64,
    /// Vote-evidence slots kept, the same way (a slot's votes are far larger than its record).
    vote_keep_slots: u64,
    segments: BTreeMap<u64, Copied>,
    votes: BTreeMap<u64, Copied>,
    journal: Option<(u64, Copied)>,
    /// Bytes of the copy hashed again per second ([`DEFAULT_SCRUB_BYTES_PER_SEC`]).
    scrub_rate: u64,
    /// Bytes the scrub may hash now, and when that was last topped up.
    scrub_credit: u64,
    scrub_at: Option<Instant>,
    /// The last segment the scrub checked: it goes on after it.
    scrubbed: Option<(SegmentLog, u64)>,
}

impl LogMirror {
    /// A copy in `dir` (the cache directory) keeping about `keep_slots` slots of records and
    /// [`DEFAULT_VOTE_KEEP_SLOTS`] of vote evidence. What an earlier process left there is
    /// removed: the copy is rebuilt from the bucket, so no byte of it was not checked against
    /// the manifest by this process.
    pub fn new(dir: &FsPath, keep_slots: u64) -> Result<Self, SourceError> {
        let io = |op, path: &FsPath, e| SourceError::Io { op, path: path.to_path_buf(), source: e };
        for log in SegmentLog::ALL {
            let sub = dir.join(log.dir_name());
            match std::fs::remove_dir_all(&sub) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io("remove", &sub, e)),
            }
            std::fs::create_dir_all(&sub).map_err(|e| io("create", &sub, e))?;
        }
        for name in [STATUS_FILE, JOURNAL_TMP] {
            let p = dir.join(name);
            match std::fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io("remove", &p, e)),
            }
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            keep_slots,
            vote_keep_slots: DEFAULT_VOTE_KEEP_SLOTS,
            segments: BTreeMap::new(),
            votes: BTreeMap::new(),
            journal: None,
            scrub_rate: DEFAULT_SCRUB_BYTES_PER_SEC,
            scrub_credit: 0,
            scrub_at: None,
            scrubbed: None,
        })
    }

    /// Hashes about `bytes_per_sec` bytes of the copy again per second, to find segments
    /// damaged on the cache's disk and fetch them again (0: never).
    pub fn with_scrub_rate(mut self, bytes_per_sec: u64) -> Self {
        self.scrub_rate = bytes_per_sec;
        self
    }

    /// Keeps about `slots` slots of vote evidence instead: the segments reaching the newest
    /// `slots` slots the bucket's vote log names, and every later one.
    pub fn with_vote_keep(mut self, slots: u64) -> Self {
        self.vote_keep_slots = slots;
        self
    }

    /// The directory the copy is in.
    pub fn dir(&self) -> &FsPath {
        &self.dir
    }

    fn segment_path(&self, log: SegmentLog, first_slot: u64) -> PathBuf {
        self.dir.join(log.dir_name()).join(log.segment_name(first_slot))
    }

    /// What is copied of `log`'s segments, and the slots of it kept.
    fn copied(&mut self, log: SegmentLog) -> (&mut BTreeMap<u64, Copied>, u64) {
        match log {
            SegmentLog::Records => (&mut self.segments, self.keep_slots),
            SegmentLog::Votes => (&mut self.votes, self.vote_keep_slots),
        }
    }
}

/// Appends `bytes` to `path` and makes them durable.
fn append(path: &FsPath, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new().append(true).open(path)?;
    f.write_all(bytes)?;
    f.sync_data()
}

/// Writes `bytes` as `dest` through `tmp` and a rename, so `dest` appears whole, and makes the
/// rename durable.
fn replace(tmp: &FsPath, dest: &FsPath, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = std::fs::File::create(tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(tmp, dest)?;
    match dest.parent() {
        Some(dir) => std::fs::File::open(dir)?.sync_all(),
        None => Ok(()),
    }
}

impl ObjectStoreSource {
    /// Brings `mirror` up to the manifest last read: new bytes of the kept record-log and
    /// vote-evidence segments and of the journal, each checked against the manifest's checksum
    /// before it is written.
    pub async fn sync_logs(&self, mirror: &mut LogMirror) -> Result<LogSync, SourceError> {
        let Some(m) = self.manifest() else { return Ok(LogSync::default()) };
        let mut out = LogSync::default();
        for log in SegmentLog::ALL {
            self.sync_segments(mirror, log, &m, &mut out).await?;
        }
        self.sync_journal(mirror, &m, &mut out).await?;
        self.scrub(mirror, &m, &mut out).await?;
        Ok(out)
    }

    /// The object's bytes `from..to`, checked: `copied` extended by them must hash to `want`.
    /// Bytes that do not are returned all the same, marked damaged (logged and counted): the
    /// log readers check every entry's own checksum and skip damaged spans, as a snapshot
    /// directory's readers do, so one damaged object costs the entries it damages, not the
    /// replica. An object missing, or naming more than [`MAX_LOG_OBJECT_BYTES`], is an error.
    async fn fetch_extension(
        &self,
        name: &str,
        copied: &Copied,
        to: u64,
        want: &str,
    ) -> Result<(bytes::Bytes, Copied), SourceError> {
        if to > MAX_LOG_OBJECT_BYTES {
            self.metrics().log_damaged.inc();
            self.report(format!(
                "log object {name} is refused: the manifest names {to} bytes, more than {MAX_LOG_OBJECT_BYTES}"
            ));
            return Err(SourceError::Corrupt {
                object: name.to_string(),
                reason: format!("the manifest names {to} bytes, more than a log object may have"),
            });
        }
        let at = self.object_path(name);
        let opts = object_store::GetOptions { range: Some((copied.len..to).into()), ..Default::default() };
        let got = match self.store().get_opts(&at, opts).await {
            Ok(g) => read_bounded(g, to - copied.len).await,
            Err(e) => Err(e),
        };
        let got = match got {
            Ok(Some(b)) => b,
            Ok(None) => bytes::Bytes::new(),
            Err(e) => {
                return Err(match absence(&e) {
                    Some(reason) => {
                        self.metrics().log_damaged.inc();
                        self.report(format!("log object {name} is missing from the bucket: {reason}"));
                        SourceError::Missing { object: name.to_string(), reason }
                    }
                    None => SourceError::Store { op: "get", object: at.to_string(), source: e },
                });
            }
        };
        let mut next = copied.clone();
        next.hash.update(&got);
        next.len = copied.len + got.len() as u64;
        next.fetched = Some(Instant::now());
        self.metrics().fetched_bytes.inc_by(got.len() as u64);
        if !copied.damaged && (next.len != to || parse_checksum(want) != Some(next.hash.digest128())) {
            self.metrics().refused.inc();
            self.metrics().log_damaged.inc();
            self.report(format!(
                "log object {name} is damaged: its first {to} bytes do not have the manifest's checksum ({} bytes \
                 read); its intact entries are served, its damaged ones skipped; repair the object from the \
                 writer's directory",
                next.len
            ));
            next.damaged = true;
        }
        Ok((got, next))
    }

    async fn sync_segments(
        &self,
        mirror: &mut LogMirror,
        log: SegmentLog,
        m: &Manifest,
        out: &mut LogSync,
    ) -> Result<(), SourceError> {
        let entries = log.entries(m);
        let newest = entries.iter().filter_map(|g| g.last_slot).max();
        let (copied_map, keep_slots) = mirror.copied(log);
        let floor = newest.map(|n| n.saturating_sub(keep_slots));
        // From the first segment reaching the window on, every segment: the copy has no holes.
        let start = floor.and_then(|f| entries.iter().position(|g| g.last_slot.is_some_and(|l| l >= f)));
        let wanted = start.map_or(&[][..], |i| &entries[i..]);
        let keep: Vec<u64> = wanted.iter().map(|g| g.first_slot).collect();
        let gone: Vec<u64> = copied_map.keys().copied().filter(|f| !keep.contains(f)).collect();
        for first in gone {
            let p = mirror.segment_path(log, first);
            match std::fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(SourceError::Io { op: "remove", path: p, source: e }),
            }
            mirror.copied(log).0.remove(&first);
            out.dropped_segments += 1;
        }
        for g in wanted {
            if mirror.copied(log).0.get(&g.first_slot).is_some_and(|c| c.damaged) {
                self.retry_damaged(mirror, log, g, out).await?;
            }
            let held = mirror.copied(log).0.get(&g.first_slot).cloned();
            let copied = held.clone().unwrap_or_else(Copied::empty);
            if copied.len >= g.size {
                continue;
            }
            let (bytes, next) = match self.fetch_extension(&g.name, &copied, g.size, &g.checksum).await {
                Ok(got) => got,
                // One object missing or refused must not stop the copy of the others (nor a
                // replica starting): logged and counted; tried again at the next sync.
                Err(e @ (SourceError::Missing { .. } | SourceError::Corrupt { .. })) => {
                    out.failed.push(e.to_string());
                    continue;
                }
                Err(e) => return Err(e),
            };
            let path = mirror.segment_path(log, g.first_slot);
            let io = |op, e| SourceError::Io { op, path: path.clone(), source: e };
            if held.is_some() {
                append(&path, &bytes).map_err(|e| io("append", e))?;
            } else {
                let tmp = mirror.dir.join(log.dir_name()).join(format!(".{}.tmp", log.segment_name(g.first_slot)));
                replace(&tmp, &path, &bytes).map_err(|e| io("write", e))?;
                out.new_segments += 1;
                if log == SegmentLog::Votes {
                    out.new_vote_segments += 1;
                }
            }
            out.bytes += bytes.len() as u64;
            if next.damaged {
                out.failed.push(format!("log object {} is damaged", g.name));
            }
            mirror.copied(log).0.insert(g.first_slot, next);
        }
        Ok(())
    }

    async fn sync_journal(&self, mirror: &mut LogMirror, m: &Manifest, out: &mut LogSync) -> Result<(), SourceError> {
        let Some(j) = &m.status_journal else { return Ok(()) };
        let path = mirror.dir.join(STATUS_FILE);
        let io = |op, e| SourceError::Io { op, path: path.clone(), source: e };
        match &mirror.journal {
            Some((epoch, copied)) if *epoch == j.epoch => {
                if copied.len >= j.size {
                    return Ok(());
                }
                let (bytes, next) = match self.fetch_extension(&j.name, copied, j.size, &j.checksum).await {
                    Ok(got) => got,
                    Err(e @ (SourceError::Missing { .. } | SourceError::Corrupt { .. })) => {
                        out.failed.push(e.to_string());
                        return Ok(());
                    }
                    Err(e) => return Err(e),
                };
                append(&path, &bytes).map_err(|e| io("append", e))?;
                out.bytes += bytes.len() as u64;
                mirror.journal = Some((j.epoch, next));
            }
            _ => {
                let (bytes, next) = match self.fetch_extension(&j.name, &Copied::empty(), j.size, &j.checksum).await {
                    Ok(got) => got,
                    Err(e @ (SourceError::Missing { .. } | SourceError::Corrupt { .. })) => {
                        out.failed.push(e.to_string());
                        return Ok(());
                    }
                    Err(e) => return Err(e),
                };
                replace(&mirror.dir.join(JOURNAL_TMP), &path, &bytes).map_err(|e| io("write", e))?;
                out.bytes += bytes.len() as u64;
                out.new_journal = true;
                mirror.journal = Some((j.epoch, next));
            }
        }
        Ok(())
    }

    /// A segment copied damaged: asks the bucket (at most every [`DAMAGED_CHECK`]) whether its
    /// object changed, and when it did, fetches it again whole ([`Self::refetch`]).
    async fn retry_damaged(
        &self,
        mirror: &mut LogMirror,
        log: SegmentLog,
        g: &SegmentObject,
        out: &mut LogSync,
    ) -> Result<(), SourceError> {
        let Some(c) = mirror.copied(log).0.get_mut(&g.first_slot) else { return Ok(()) };
        if c.checked.is_some_and(|t| t.elapsed() < DAMAGED_CHECK) {
            return Ok(());
        }
        c.checked = Some(Instant::now());
        let seen = c.version.clone();
        let stale = c.fetched.is_none_or(|t| t.elapsed() >= DAMAGED_REFETCH);
        let now = match self.store().head(&self.object_path(&g.name)).await {
            Ok(meta) => version_of(&meta),
            // Missing or unreachable: nothing to fetch again yet; the extension reports it.
            Err(_) => return Ok(()),
        };
        let changed = match (&now, &seen) {
            (Some(n), Some(s)) => n != s,
            // Not asked yet since the damaged bytes were fetched: the object may have changed
            // since; fetched again once, and its version noted.
            (Some(_), None) => true,
            (None, _) => stale,
        };
        if changed
            && !self.refetch(mirror, log, g, out).await?
            && let Some(c) = mirror.copied(log).0.get_mut(&g.first_slot)
        {
            // The HEAD came before the fetch: bytes of a later version are fetched again.
            c.version = now;
        }
        Ok(())
    }

    /// Fetches segment `g` again whole. Its bytes replace the copy (a temporary file, fsync,
    /// rename, fsync of the directory) only when they have the manifest's size and checksum; the
    /// segment is then named in the sync's repaired segments, for the readers to read again, and
    /// counted. Otherwise the copy stays as it is, marked damaged, with the version of the object
    /// just read, and is fetched again when that changes. Returns whether it was replaced.
    async fn refetch(
        &self,
        mirror: &mut LogMirror,
        log: SegmentLog,
        g: &SegmentObject,
        out: &mut LogSync,
    ) -> Result<bool, SourceError> {
        let mut fresh = Copied::empty();
        // Already counted and reported when the copy was found damaged: a fetch that finds the
        // object still damaged is not counted again.
        fresh.damaged = true;
        let got = match self.fetch_extension(&g.name, &fresh, g.size, &g.checksum).await {
            Ok(got) => Some(got),
            Err(SourceError::Missing { .. } | SourceError::Corrupt { .. }) => None,
            Err(e) => return Err(e),
        };
        let intact = got
            .as_ref()
            .filter(|(_, next)| next.len == g.size && parse_checksum(&g.checksum) == Some(next.hash.digest128()));
        let Some((bytes, next)) = intact else {
            if let Some(c) = mirror.copied(log).0.get_mut(&g.first_slot) {
                c.damaged = true;
                c.fetched = Some(Instant::now());
            }
            return Ok(false);
        };
        let path = mirror.segment_path(log, g.first_slot);
        let tmp = mirror.dir.join(log.dir_name()).join(format!(".{}.tmp", log.segment_name(g.first_slot)));
        replace(&tmp, &path, bytes).map_err(|e| SourceError::Io { op: "write", path: path.clone(), source: e })?;
        let next = Copied { damaged: false, checked: None, ..next.clone() };
        mirror.copied(log).0.insert(g.first_slot, next);
        out.bytes += bytes.len() as u64;
        match log {
            SegmentLog::Records => out.repaired_record_segments.push(g.first_slot),
            SegmentLog::Votes => out.repaired_vote_segments.push(g.first_slot),
        }
        self.metrics().log_repaired.inc();
        log::info!(
            "log object {}: its copy was replaced by the bucket's, which has the manifest's checksum; the span it \
             held damaged is served again",
            g.name
        );
        Ok(true)
    }

    /// Hashes copied segments again, about [`LogMirror::with_scrub_rate`] bytes a second, each in
    /// turn: one whose bytes on the cache's disk are no longer those verified is counted
    /// (`aldb_cache_damaged_total`) and fetched again at once ([`Self::refetch`]). The segment
    /// being copied past is checked as a whole, never in part.
    async fn scrub(&self, mirror: &mut LogMirror, m: &Manifest, out: &mut LogSync) -> Result<(), SourceError> {
        if mirror.scrub_rate == 0 {
            return Ok(());
        }
        let now = Instant::now();
        let since = mirror.scrub_at.map_or(Duration::from_secs(1), |t| now.duration_since(t));
        mirror.scrub_at = Some(now);
        let earned = (mirror.scrub_rate as f64 * since.as_secs_f64()) as u64;
        // Enough for the largest segment, never a burst beyond it.
        mirror.scrub_credit =
            mirror.scrub_credit.saturating_add(earned).min(MAX_LOG_OBJECT_BYTES.max(mirror.scrub_rate));
        let order: Vec<(SegmentLog, u64, u64)> = SegmentLog::ALL
            .iter()
            .flat_map(|log| {
                let (map, _) = mirror.copied(*log);
                map.iter().filter(|(_, c)| !c.damaged).map(|(f, c)| (*log, *f, c.len)).collect::<Vec<_>>()
            })
            .collect();
        if order.is_empty() {
            return Ok(());
        }
        let start = mirror.scrubbed.and_then(|last| order.iter().position(|(l, f, _)| (*l, *f) > last)).unwrap_or(0);
        for i in 0..order.len() {
            let (log, first, len) = order[(start + i) % order.len()];
            if mirror.scrub_credit < len {
                break;
            }
            mirror.scrub_credit -= len;
            mirror.scrubbed = Some((log, first));
            let Some(c) = mirror.copied(log).0.get(&first).cloned() else { continue };
            let path = mirror.segment_path(log, first);
            let intact = match copy_intact(&path, c.len, &c.hash) {
                Ok(ok) => ok,
                // Gone from under the copy: as damaged, it is written again.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
                Err(e) => return Err(SourceError::Io { op: "read", path, source: e }),
            };
            if intact {
                continue;
            }
            let Some(g) = log.entries(m).iter().find(|g| g.first_slot == first) else { continue };
            self.metrics().cache_damaged.inc();
            log::warn!(
                "the cached copy of log object {} is damaged on disk (its bytes are not those verified); fetching it \
                 again",
                g.name
            );
            if !self.refetch(mirror, log, g, out).await? {
                out.failed.push(format!("log object {}: the cached copy is damaged and the bucket's too", g.name));
            }
        }
        Ok(())
    }
}
