//! The two segmented logs beside the snapshots that the shipper ships and a replica copies: the
//! record log (`records/`) and the vote-evidence log (`votes/`). Both are directories of
//! append-only segment files named by their first slot, whose entries carry their own checksums,
//! so both are shipped the same way: each segment as an immutable prefix that only grows, named
//! in the manifest's `record_segments` or `vote_segments`.

use std::path::{Path, PathBuf};

use crate::error::ShipError;
use crate::local::{self, LocalSegment};
use crate::manifest::{Manifest, RECORDS_PREFIX, SegmentObject, VOTES_PREFIX};

/// Which log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum SegmentLog {
    /// The root records (`docs/SPEC.md` §9).
    Records,
    /// The vote evidence (`docs/SPEC.md` §10.5).
    Votes,
}

impl SegmentLog {
    /// Both, in the order they are shipped and copied.
    pub(crate) const ALL: [SegmentLog; 2] = [SegmentLog::Records, SegmentLog::Votes];

    /// Its directory under a snapshot directory, and its prefix under the bucket prefix.
    pub(crate) fn dir_name(self) -> &'static str {
        match self {
            SegmentLog::Records => RECORDS_PREFIX,
            SegmentLog::Votes => VOTES_PREFIX,
        }
    }

    /// The file name of the segment starting at `first_slot`.
    pub(crate) fn segment_name(self, first_slot: u64) -> String {
        match self {
            SegmentLog::Records => aldb_format::records::segment_name(first_slot),
            SegmentLog::Votes => aldb_format::votes::segment_name(first_slot),
        }
    }

    /// The first slot a segment file name spells; only the writer's exact spelling counts.
    pub(crate) fn first_slot_of(self, file_name: &str) -> Option<u64> {
        match self {
            SegmentLog::Records => aldb_format::records::segment_first_slot(file_name),
            SegmentLog::Votes => aldb_format::votes::segment_first_slot(file_name),
        }
    }

    /// The object name of a segment file under the bucket prefix.
    pub(crate) fn object_name(self, file_name: &str) -> String {
        format!("{}/{file_name}", self.dir_name())
    }

    /// The manifest's entries of this log.
    pub(crate) fn entries(self, m: &Manifest) -> &[SegmentObject] {
        match self {
            SegmentLog::Records => &m.record_segments,
            SegmentLog::Votes => &m.vote_segments,
        }
    }

    /// The manifest's entries of this log, to change.
    pub(crate) fn entries_mut(self, m: &mut Manifest) -> &mut Vec<SegmentObject> {
        match self {
            SegmentLog::Records => &mut m.record_segments,
            SegmentLog::Votes => &mut m.vote_segments,
        }
    }

    /// The local segments under snapshot directory `dir`, oldest first.
    pub(crate) fn list(self, dir: &Path) -> Result<Vec<(u64, PathBuf)>, ShipError> {
        match self {
            SegmentLog::Records => local::list_record_segments(dir),
            SegmentLog::Votes => local::list_vote_segments(dir),
        }
    }

    /// A local segment's shippable bytes; `None` when it vanished (pruned).
    pub(crate) fn read(self, first_slot: u64, path: &Path, sealed: bool) -> Result<Option<LocalSegment>, ShipError> {
        match self {
            SegmentLog::Records => local::read_segment(first_slot, path, sealed),
            SegmentLog::Votes => local::read_vote_segment(first_slot, path, sealed),
        }
    }
}
