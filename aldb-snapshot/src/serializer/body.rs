//! One slot's records, written as a body: accounts, then buckets, then nodes, each step pointing
//! at what the one before wrote; the refresh chunk's old records carried forward along the way.

use aldb_format::SnapshotError;
use aldb_format::format::Ref;
use aldb_verify::spec::Hash;

use super::Serializer;
use super::input::SlotInput;
use crate::file_builder::FileBuilder;
use crate::leaf_table::LeafView;
use crate::path_index::PathIndex;

/// Per-slot working memory of [`Serializer::write_body`], kept so its capacity is reused.
#[derive(Default)]
pub(super) struct Scratch {
    /// The batch's accounts by path.
    pub(super) index: PathIndex,
    /// Records the refresh will read, for [`Files::will_need`].
    pub(super) hint: Vec<Ref>,
    /// The refresh chunk the last write already asked the device for, a slot ahead.
    pub(super) hinted: Option<usize>,
    /// By batch index: the account record written for it (null: superseded or deleted).
    pub(super) refs: Vec<Ref>,
    /// By position in `by_path`: the account record written (null when deleted).
    pub(super) path_refs: Vec<Ref>,
    /// The refresh chunk's buckets this slot changed, then those it only carries forward.
    pub(super) chunk_changed: Vec<u64>,
    pub(super) refresh: Vec<u64>,
    pub(super) leaf_buf: Vec<u8>,
    pub(super) new_leaves: Vec<LeafView>,
    /// Per level: `(prefix, hash)` of its changed nodes.
    pub(super) by_level: Vec<Vec<(u32, Hash)>>,
}

/// What one write is, as its steps see it: the layout, which records it made, and where the
/// refresh cycle stands.
#[derive(Clone, Copy)]
pub(super) struct Pass {
    /// The bucket level `L`.
    pub(super) l: usize,
    /// The first file of this write: its parts, then its own file.
    first: u32,
    /// The refresh chunk: a prefix of `rbits` bits whose whole subtree is rewritten.
    pub(super) rbits: usize,
    pub(super) chunk: usize,
    /// Whether this write refreshes (a delta, on tables that hold a state).
    pub(super) refreshing: bool,
    /// The first file of the current refresh cycle.
    cycle_start: u32,
}

impl Pass {
    /// Whether this write made the record: it is in a file numbered from `first`.
    pub(super) fn this_write(self, r: Ref) -> bool {
        r.seq() >= self.first
    }

    /// Whether the record must be carried forward. Only records from before the current cycle
    /// need it: one written since it began is already in a file the cycle's end keeps, and so is
    /// a record all of whose references are (a record never points at a newer one).
    pub(super) fn stale(self, r: Ref) -> bool {
        !r.is_null() && r.seq() < self.cycle_start
    }

    /// Whether bucket `b` lies in the chunk this write refreshes.
    pub(super) fn in_chunk(self, b: usize) -> bool {
        self.refreshing && (b >> (self.l - self.rbits)) == self.chunk
    }
}

/// What the bucket and node steps add up.
#[derive(Default)]
pub(super) struct Tally {
    /// Bytes of refresh copies.
    pub(super) refresh_bytes: u64,
    /// The hash of the top record, if this slot rewrote it (or emptied it).
    pub(super) top_hash: Option<Hash>,
}

/// What `write_body` wrote: account bytes, refresh bytes, and the top record's hash when this
/// slot rewrote it.
type BodyStats = (u64, u64, Option<Hash>);

impl Serializer {
    /// Writes accounts, buckets and nodes; returns record counts and byte counts.
    pub(super) fn write_body(
        &mut self,
        fb: &mut FileBuilder,
        input: &SlotInput,
        first: u32,
    ) -> Result<BodyStats, SnapshotError> {
        // Working memory is kept across slots: fresh allocations of a slot's megabytes cost
        // more in page faults than the work done in them.
        let mut s = std::mem::take(&mut self.scratch);
        let result = self.write_body_with(fb, input, first, &mut s);
        // Except after a full write: its working memory is sized to the whole state (about 97
        // bytes per leaf), which no later delta slot needs, and keeping it would hold that much
        // beside the tree for the writer's lifetime.
        if !input.full {
            self.scratch = s;
        }
        result
    }

    fn write_body_with(
        &mut self,
        fb: &mut FileBuilder,
        input: &SlotInput,
        first: u32,
        s: &mut Scratch,
    ) -> Result<BodyStats, SnapshotError> {
        let pass = Pass {
            l: usize::from(self.bucket_bits),
            first,
            rbits: usize::from(self.refresh_bits.min(self.bucket_bits)),
            chunk: self.cursor as usize,
            refreshing: !input.full && self.started,
            cycle_start: self.cycle_start,
        };
        if pass.refreshing {
            self.hint_refresh(pass, s);
        }
        let account_bytes = self.write_accounts(fb, input, s)?;
        let mut tally = Tally::default();
        self.write_buckets(fb, input, pass, s, &mut tally)?;
        self.write_nodes(fb, &input.changes, pass, s, &mut tally)?;
        Ok((account_bytes, tally.refresh_bytes, tally.top_hash))
    }
}
