//! A replica's vote evidence older than its copy of the log: the sealed vote-evidence segments the
//! manifest names, fetched on demand from the bucket, verified, and held in a small cache.
//!
//! The copy ([`crate::LogMirror`]) keeps only the segments reaching the newest slots; a slot older
//! than that is answered from the segments covering it and the window of slots after it (where
//! the votes on it land). Those segments are fetched whole (their first `size` bytes), each
//! refused unless it has exactly the manifest's size and XXH3-128 checksum, written under a
//! temporary name and renamed, and read by the ordinary [`VoteLogReader`], which checks every
//! entry's own checksum as it does in a snapshot directory. The readers of the groups fetched are
//! kept least recently used first within a byte bound; a group evicted while a query reads it is
//! deleted when that query is done. Fetches run one at a time, so two queries for one group fetch
//! it once.

use std::collections::HashMap;
use std::path::{Path as FsPath, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use aldb_format::votes::{EpochTransition, SlotVotes, VoteLogReader, VoteSelection, segment_name};
use xxhash_rust::xxh3::xxh3_128;

use crate::cache::{ObjectStoreSource, absence};
use crate::error::SourceError;
use crate::manifest::{MAX_LOG_OBJECT_BYTES, SegmentObject, parse_checksum};

/// Bytes of vote-evidence segments a replica holds for slots older than its copy of the log, by
/// default: four of the writer's default 64 MiB segments.
pub const DEFAULT_VOTE_ARCHIVE_BYTES: u64 = 256 << 20;

/// The directory, under the cache directory, the fetched groups are kept in.
pub(crate) const ARCHIVE_DIR: &str = "vote-archive";

/// What the bucket says of a slot older than the copy of the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArchivedVotes {
    /// The bucket holds no vote-evidence segment at all.
    NoLog,
    /// The slot is older than the oldest segment the bucket holds, whose first slot is `oldest`.
    Older {
        /// The first slot of the oldest segment in the bucket.
        oldest: u64,
    },
    /// The segments covering the slot were read: its evidence, or `None` when they hold no bank
    /// of it. `oldest` is the first slot of the oldest segment in the bucket.
    Read {
        /// The evidence, as a reader of the whole log finds it.
        found: Option<SlotVotes>,
        /// The first slot of the oldest segment in the bucket.
        oldest: u64,
    },
}

/// One fetched group of consecutive segments, read.
#[derive(Debug)]
struct Group {
    reader: VoteLogReader,
    dir: PathBuf,
}

impl Drop for Group {
    fn drop(&mut self) {
        // The last query holding an evicted group removes its files.
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A group's identity: each segment's first slot, size and checksum (a segment shipped again
/// longer is another group).
type Key = Vec<(u64, u64, String)>;

#[derive(Debug)]
struct Held {
    group: Arc<Group>,
    size: u64,
    used: u64,
}

#[derive(Debug, Default)]
struct State {
    groups: HashMap<Key, Held>,
    bytes: u64,
    tick: u64,
}

/// The cache of vote-evidence segments fetched for old slots.
#[derive(Debug)]
pub struct VoteArchive {
    src: ObjectStoreSource,
    dir: PathBuf,
    capacity_bytes: u64,
    state: Mutex<State>,
    fetching: tokio::sync::Mutex<()>,
    next_dir: AtomicU64,
}

impl VoteArchive {
    /// A cache of at most `capacity_bytes` of segments under `src`'s cache directory. What an
    /// earlier process left there is removed: nothing is used that this process did not verify.
    pub fn new(src: ObjectStoreSource, capacity_bytes: u64) -> Result<Self, SourceError> {
        let dir = src.dir().join(ARCHIVE_DIR);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(SourceError::Io { op: "remove", path: dir, source: e }),
        }
        std::fs::create_dir_all(&dir).map_err(|e| SourceError::Io { op: "create", path: dir.clone(), source: e })?;
        Ok(Self {
            src,
            dir,
            capacity_bytes,
            state: Mutex::new(State::default()),
            fetching: tokio::sync::Mutex::new(()),
            next_dir: AtomicU64::new(0),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The first slot of the oldest vote-evidence segment in the bucket.
    pub fn oldest(&self) -> Option<u64> {
        self.src.manifest()?.vote_segments.first().map(|g| g.first_slot)
    }

    /// The evidence of `slot` with the votes of the blocks of the `window` slots after it, from
    /// the segments of the manifest last read that cover them: fetched and verified unless held.
    pub async fn slot_votes(&self, slot: u64, window: u64) -> Result<ArchivedVotes, SourceError> {
        self.slot_votes_for(slot, window, &VoteSelection::All).await
    }

    /// As [`slot_votes`](Self::slot_votes), with the votes `selection` chooses.
    pub async fn slot_votes_for(
        &self,
        slot: u64,
        window: u64,
        selection: &VoteSelection,
    ) -> Result<ArchivedVotes, SourceError> {
        let Some(m) = self.src.manifest() else { return Ok(ArchivedVotes::NoLog) };
        let Some(oldest) = m.vote_segments.first().map(|g| g.first_slot) else { return Ok(ArchivedVotes::NoLog) };
        if slot < oldest {
            return Ok(ArchivedVotes::Older { oldest });
        }
        // The segment the slot's bank lies in (the last starting at or before it), and every
        // later one starting within the window: the votes on it lie there.
        let last = slot.saturating_add(window.min(aldb_format::votes::MAX_WINDOW));
        let start = m.vote_segments.partition_point(|g| g.first_slot <= slot).saturating_sub(1);
        let segments: Vec<SegmentObject> =
            m.vote_segments[start..].iter().take_while(|g| g.first_slot <= last).cloned().collect();
        let group = self.group(slot, &segments).await?;
        let mut found = group.reader.slot_votes_for(slot, window, selection).map_err(|e| SourceError::Io {
            op: "read",
            path: group.dir.clone(),
            source: std::io::Error::other(e.to_string()),
        })?;
        // A segment after the group means the log reaches past the window, as a reader of the
        // whole log would see: the search is over, whatever slots the group's last one ends at.
        if let Some(v) = found.as_mut()
            && m.vote_segments[start + segments.len()..].iter().any(|g| g.last_slot.is_some())
        {
            v.searched_to = v.searched_to.max(last);
        }
        Ok(ArchivedVotes::Read { found, oldest })
    }

    /// The epochs whose whole transition a segment in the bucket holds, as the manifest last read
    /// lists them, ascending.
    pub fn transition_epochs(&self) -> Vec<u64> {
        let Some(m) = self.src.manifest() else { return Vec::new() };
        let epochs: std::collections::BTreeSet<u64> =
            m.vote_segments.iter().flat_map(|g| g.transitions.iter().copied()).collect();
        epochs.into_iter().collect()
    }

    /// The transition to `epoch` (`docs/SPEC.md` §11.4) from the newest segment in the bucket
    /// the manifest last read lists as holding it whole, fetched and verified unless held, and
    /// read as a reader of the whole log reads it. `None` when no segment lists it.
    pub async fn transition(&self, epoch: u64, window: u64) -> Result<Option<EpochTransition>, SourceError> {
        let Some(m) = self.src.manifest() else { return Ok(None) };
        let Some(g) = m.vote_segments.iter().rev().find(|g| g.transitions.binary_search(&epoch).is_ok()) else {
            return Ok(None);
        };
        let group = self.group(g.first_slot, std::slice::from_ref(g)).await?;
        group.reader.transition(epoch, window).map_err(|e| SourceError::Io {
            op: "read",
            path: group.dir.clone(),
            source: std::io::Error::other(e.to_string()),
        })
    }

    /// The held group of `segments`, or fetches it.
    async fn group(&self, slot: u64, segments: &[SegmentObject]) -> Result<Arc<Group>, SourceError> {
        let key: Key = segments.iter().map(|g| (g.first_slot, g.size, g.checksum.clone())).collect();
        if let Some(g) = self.touch(&key) {
            return Ok(g);
        }
        let _one = self.fetching.lock().await;
        // Another query may have fetched it while this one waited.
        if let Some(g) = self.touch(&key) {
            return Ok(g);
        }
        let size: u64 = segments.iter().map(|g| g.size).sum();
        if size > self.capacity_bytes {
            return Err(SourceError::CacheTooSmall { slot, need: size, capacity: self.capacity_bytes });
        }
        let n = self.next_dir.fetch_add(1, Ordering::Relaxed);
        let dir = self.dir.join(format!("g{n}"));
        let votes = dir.join(aldb_format::votes::VOTES_DIR);
        std::fs::create_dir_all(&votes).map_err(|e| SourceError::Io {
            op: "create",
            path: votes.clone(),
            source: e,
        })?;
        // Until it is held, a failure removes what was written.
        let group = Group { reader: VoteLogReader::new(&dir), dir };
        for g in segments {
            let bytes = self.fetch(g).await?;
            let path = votes.join(segment_name(g.first_slot));
            let tmp = votes.join(format!(".{}.tmp", segment_name(g.first_slot)));
            tokio::task::spawn_blocking(move || write_whole(&tmp, &path, &bytes))
                .await
                .map_err(|e| SourceError::Manifest(format!("segment write task: {e}")))??;
        }
        let group = tokio::task::spawn_blocking(move || {
            let mut group = group;
            let read = group.reader.refresh();
            read.map(|_| group).map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| SourceError::Manifest(format!("segment read task: {e}")))?
        .map_err(|e| SourceError::Io { op: "read", path: votes.clone(), source: std::io::Error::other(e) })?;
        let group = Arc::new(group);
        let mut st = self.state();
        st.tick += 1;
        let used = st.tick;
        while st.bytes + size > self.capacity_bytes {
            let Some(k) = st.groups.iter().min_by_key(|(_, h)| h.used).map(|(k, _)| k.clone()) else { break };
            if let Some(h) = st.groups.remove(&k) {
                st.bytes = st.bytes.saturating_sub(h.size);
                self.src.metrics().evictions.inc();
            }
        }
        st.bytes += size;
        st.groups.insert(key, Held { group: group.clone(), size, used });
        Ok(group)
    }

    fn touch(&self, key: &Key) -> Option<Arc<Group>> {
        let mut st = self.state();
        st.tick += 1;
        let tick = st.tick;
        let h = st.groups.get_mut(key)?;
        h.used = tick;
        Some(h.group.clone())
    }

    /// The segment's first `size` bytes, refused unless they have the manifest's checksum.
    async fn fetch(&self, g: &SegmentObject) -> Result<bytes::Bytes, SourceError> {
        let at = self.src.object_path(&g.name);
        let metrics = self.src.metrics();
        if g.size > MAX_LOG_OBJECT_BYTES {
            metrics.refused.inc();
            metrics.archive_refused.inc();
            self.src
                .report(format!("vote-evidence segment {} is refused: the manifest names {} bytes", g.name, g.size));
            return Err(SourceError::Corrupt {
                object: g.name.clone(),
                reason: format!("the manifest names {} bytes, more than a log object may have", g.size),
            });
        }
        metrics.archive_fetches.inc();
        let got = self.src.store().get_range(&at, 0..g.size).await.map_err(|e| match absence(&e) {
            Some(reason) => {
                metrics.refused.inc();
                metrics.archive_refused.inc();
                self.src.report(format!("vote-evidence segment {} is missing from the bucket: {reason}", g.name));
                SourceError::Missing { object: g.name.clone(), reason }
            }
            None => SourceError::Store { op: "get", object: at.to_string(), source: e },
        })?;
        metrics.fetched_bytes.inc_by(got.len() as u64);
        let want = parse_checksum(&g.checksum);
        if got.len() as u64 != g.size || want != Some(xxh3_128(&got)) {
            metrics.refused.inc();
            metrics.archive_refused.inc();
            log::error!("vote-evidence segment {} is refused: its bytes are not the manifest's", g.name);
            return Err(SourceError::Corrupt {
                object: g.name.clone(),
                reason: format!("its first {} bytes do not have the manifest's checksum", g.size),
            });
        }
        Ok(got)
    }
}

/// Writes `bytes` as `dest` through `tmp` and a rename, so a reader only ever sees it whole.
fn write_whole(tmp: &FsPath, dest: &FsPath, bytes: &[u8]) -> Result<(), SourceError> {
    use std::io::Write as _;
    let io = |op, e| SourceError::Io { op, path: dest.to_path_buf(), source: e };
    let mut f = std::fs::File::create(tmp).map_err(|e| io("create", e))?;
    f.write_all(bytes).map_err(|e| io("write", e))?;
    f.sync_all().map_err(|e| io("sync", e))?;
    drop(f);
    std::fs::rename(tmp, dest).map_err(|e| io("rename", e))
}
