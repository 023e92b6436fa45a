//! What Hyades serves: a snapshot directory (the default) or a bucket prefix through a
//! [`Replica`]. Both answer the same questions with the same types, so the dispatcher, the poller
//! and the feeds do not know which they serve.

use std::sync::Arc;

use aldb_format::{AccountProof, QueryError, SlotInfo, SnapshotError, SnapshotReader};

use crate::replica::Replica;

/// The snapshots served.
#[derive(Clone, Debug)]
pub enum Source {
    /// A snapshot directory, read in place.
    Directory(Arc<SnapshotReader>),
    /// A bucket prefix, through a verified local cache.
    Bucket(Arc<Replica>),
}

impl From<Arc<SnapshotReader>> for Source {
    fn from(r: Arc<SnapshotReader>) -> Self {
        Source::Directory(r)
    }
}

impl Source {
    /// The newest served slot.
    pub fn latest(&self) -> Option<SlotInfo> {
        match self {
            Source::Directory(r) => r.latest(),
            Source::Bucket(b) => b.latest(),
        }
    }

    /// The oldest served slot.
    pub fn oldest(&self) -> Option<SlotInfo> {
        match self {
            Source::Directory(r) => r.oldest(),
            Source::Bucket(b) => b.oldest(),
        }
    }

    /// Served slots in `[start, end]`, oldest first.
    pub fn slots(&self, start: u64, end: u64) -> Vec<SlotInfo> {
        match self {
            Source::Directory(r) => r.slots(start, end),
            Source::Bucket(b) => b.slots(start, end),
        }
    }

    /// The slot's info (the newest when `None`), or why it cannot be served.
    pub fn slot(&self, slot: Option<u64>) -> Result<SlotInfo, QueryError> {
        match self {
            Source::Directory(r) => r.slot(slot),
            Source::Bucket(b) => b.slot(slot),
        }
    }

    /// The account at `slot` with its proof, checked against the slot's root.
    pub fn prove(&self, pubkey: &[u8; 32], slot: u64) -> Result<AccountProof, QueryError> {
        match self {
            Source::Directory(r) => r.prove(pubkey, Some(slot)),
            Source::Bucket(b) => b.prove(pubkey, slot),
        }
    }

    /// Damaged files found, by name, with what is wrong with each.
    pub fn damaged_files(&self) -> Vec<(String, String)> {
        match self {
            Source::Directory(r) => r.damaged_files(),
            Source::Bucket(b) => b.damaged_files(),
        }
    }

    /// Brings in what the logs beside the snapshots say (a bucket: the manifest, the record log,
    /// the vote-evidence log and the journal copied into the cache directory). Blocking. Runs before the journal is
    /// read, so every slot the journal names is in the index [`Source::refresh`] builds next.
    pub fn sync(&self) -> Result<(), SnapshotError> {
        match self {
            Source::Directory(_) => Ok(()),
            Source::Bucket(b) => b.sync(),
        }
    }

    /// Picks up newly published slots; returns them in slot order. Blocking.
    pub fn refresh(&self) -> Result<Vec<SlotInfo>, SnapshotError> {
        match self {
            Source::Directory(r) => r.refresh(),
            Source::Bucket(b) => Ok(b.rebuild()),
        }
    }

    /// The replica, when serving a bucket.
    pub fn replica(&self) -> Option<&Arc<Replica>> {
        match self {
            Source::Bucket(b) => Some(b),
            Source::Directory(_) => None,
        }
    }
}
