//! What a commit changed, for the snapshot writer.
//!
//! The tree's stored hashes form one logical array of prefixes: level `d` (0 to `bucket_bits - 1`)
//! has a hash for each of its `2^d` prefixes, and level `bucket_bits` holds the buckets, each with
//! its sorted leaves. A [`ChangeSet`] lists the entries of that array a commit rewrote, so a writer
//! can persist exactly those and refer to older files for the rest.

use aldb_verify::spec::Hash;

/// A prefix whose hash changed; `hash` is all zeros when the prefix became empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeChange {
    /// Prefix length in bits, below `bucket_bits`.
    pub level: u8,
    /// The prefix itself, as an integer of `level` bits.
    pub index: u64,
    /// The subtree hash under the prefix.
    pub hash: Hash,
}

/// A bucket whose leaves changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BucketChange {
    /// The bucket's prefix, as an integer of `bucket_bits` bits.
    pub index: u64,
    /// The bucket's subtree hash (zeros when now empty).
    pub hash: Hash,
    /// Its leaves are `ChangeSet::leaves[start..start + len]`, sorted by path.
    pub start: u32,
    /// Number of leaves now in the bucket.
    pub len: u32,
}

/// The prefixes and buckets one commit (or a full capture) rewrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChangeSet {
    /// The layout's bucket level; all levels and indices refer to it.
    pub bucket_bits: u8,
    /// Changed prefixes, in no particular order.
    pub nodes: Vec<NodeChange>,
    /// Changed buckets, in no particular order.
    pub buckets: Vec<BucketChange>,
    /// `(path, value)` of every leaf of the changed buckets.
    pub leaves: Vec<(Hash, Hash)>,
}

impl ChangeSet {
    /// Empties the set, keeping its allocations.
    pub fn clear(&mut self) {
        self.nodes.clear();
        self.buckets.clear();
        self.leaves.clear();
    }

    /// The leaves of one bucket change.
    pub fn leaves_of(&self, b: &BucketChange) -> &[(Hash, Hash)] {
        &self.leaves[b.start as usize..(b.start + b.len) as usize]
    }
}

/// One shard's part of a change set, in the shard's own coordinates.
#[derive(Default)]
pub(crate) struct ShardCapture {
    /// `(r, j, hash)` of the shard's level tree.
    pub(crate) nodes: Vec<(u8, u32, Hash)>,
    /// `(j, hash, start, len)` of changed buckets, leaves in `leaves`.
    pub(crate) buckets: Vec<(u32, Hash, u32, u32)>,
    pub(crate) leaves: Vec<(Hash, Hash)>,
}

impl ShardCapture {
    /// Empties the capture, keeping its allocations.
    pub(crate) fn clear(&mut self) {
        self.nodes.clear();
        self.buckets.clear();
        self.leaves.clear();
    }

    /// Appends this shard's changes to `out`, converted to global levels and indices.
    pub(crate) fn append_to(&self, shard: u64, shard_bits: u8, out: &mut ChangeSet) {
        let height = out.bucket_bits - shard_bits;
        for &(r, j, hash) in &self.nodes {
            out.nodes.push(NodeChange { level: shard_bits + r, index: (shard << r) | u64::from(j), hash });
        }
        let base = out.leaves.len() as u32;
        out.leaves.extend_from_slice(&self.leaves);
        for &(j, hash, start, len) in &self.buckets {
            out.buckets.push(BucketChange { index: (shard << height) | u64::from(j), hash, start: base + start, len });
        }
    }
}
