//! What a commit changed, for the snapshot writer.
//!
//! The tree's stored hashes form one logical array of prefixes: level `d` (0 to `bucket_bits - 1`)
//! has a hash for each of its `2^d` prefixes, and level `bucket_bits` holds the buckets, each with
//! its sorted leaves. A [`ChangeSet`] lists the entries of that array a commit rewrote, so a writer
//! can persist exactly those and refer to older files for the rest.
//!
//! The workers record each shard's changes straight into the change set's per-shard parts, in the
//! shard's own coordinates; readers see global levels and indices through [`ChangeSet::nodes`] and
//! [`ChangeSet::buckets`]. Nothing is copied between the commit and the writer, and a change set
//! handed back by the writer is refilled in place, so a slot's megabytes of change lists are not
//! faulted in anew every commit. [`CaptureOptions`] leaves out what a consumer does not read.

use aldb_verify::spec::Hash;

/// What a capture records beyond the buckets and their leaf paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CaptureOptions {
    /// Only prefixes whose level is a multiple of this are recorded (1 or 0: every level). A
    /// writer that stores every other level needs half the nodes.
    pub level_step: u8,
    /// Whether each leaf's value hash is recorded beside its path.
    pub leaf_values: bool,
    /// The levels just above the buckets left out, except the top (level 0), which is always
    /// recorded: a writer whose deepest records skip over them does not read them.
    pub skip_above_buckets: u8,
}

impl CaptureOptions {
    /// Everything: every level, leaf values included.
    pub const ALL: Self = Self { level_step: 1, leaf_values: true, skip_above_buckets: 0 };

    /// Only prefixes at levels that are multiples of `step`.
    pub const fn with_level_step(self, step: u8) -> Self {
        Self { level_step: step, ..self }
    }

    /// Leaf paths without their value hashes.
    pub const fn without_leaf_values(self) -> Self {
        Self { leaf_values: false, ..self }
    }

    /// Without the `n` levels just above the buckets (the top is kept all the same).
    pub const fn without_levels_above_buckets(self, n: u8) -> Self {
        Self { skip_above_buckets: n, ..self }
    }

    /// Whether prefixes at `level` are recorded in a layout whose buckets are at `bucket_bits`.
    pub fn keeps_level(&self, level: u8, bucket_bits: u8) -> bool {
        let on_step = self.level_step <= 1 || level.is_multiple_of(self.level_step);
        on_step && (level == 0 || u32::from(level) + u32::from(self.skip_above_buckets) < u32::from(bucket_bits))
    }

    /// The recorded levels of a layout, bit `d` for level `d` (levels are below 32).
    pub(crate) fn level_mask(&self, bucket_bits: u8) -> u32 {
        (0..bucket_bits.min(32)).filter(|&d| self.keeps_level(d, bucket_bits)).fold(0, |m, d| m | 1 << d)
    }
}

impl Default for CaptureOptions {
    fn default() -> Self {
        Self::ALL
    }
}

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
pub struct BucketChange<'a> {
    /// The bucket's prefix, as an integer of `bucket_bits` bits.
    pub index: u64,
    /// The bucket's subtree hash (zeros when now empty).
    pub hash: Hash,
    /// The paths of its leaves, sorted (empty when the bucket is now empty).
    pub paths: &'a [Hash],
    /// Their value hashes, in the same order; empty unless [`CaptureOptions::leaf_values`].
    pub values: &'a [Hash],
}

/// The prefixes and buckets one commit (or a full capture) rewrote.
#[derive(Clone, Debug, Default)]
pub struct ChangeSet {
    options: CaptureOptions,
    bucket_bits: u8,
    shard_bits: u8,
    /// By shard, in the shard's coordinates. Only the shards listed in `changed` hold this
    /// capture; the others keep a previous one's allocations.
    parts: Vec<ShardCapture>,
    /// The shards this capture recorded, ascending.
    changed: Vec<u32>,
    /// Nodes above the shards, `(level, index, hash)` in global coordinates.
    top: Vec<(u8, u32, Hash)>,
    /// Made by [`ChangeSet::by_hand`] (one part in global coordinates) and not since refilled by
    /// a commit.
    by_hand: bool,
}

impl ChangeSet {
    /// An empty change set that will record what `options` asks for.
    pub fn new(options: CaptureOptions) -> Self {
        Self { options, ..Self::default() }
    }

    /// An empty change set in global coordinates, filled by [`ChangeSet::push_node`] and
    /// [`ChangeSet::push_bucket`] rather than by a commit (to merge several commits, say).
    pub fn by_hand(bucket_bits: u8, options: CaptureOptions) -> Self {
        let mut c = Self::new(options);
        c.reset(bucket_bits, 0, 1);
        c.by_hand = true;
        c
    }

    /// What this change set records.
    pub fn options(&self) -> CaptureOptions {
        self.options
    }

    /// The layout's bucket level; all levels and indices refer to it.
    pub fn bucket_bits(&self) -> u8 {
        self.bucket_bits
    }

    /// Empties the set, keeping its allocations and options.
    pub fn clear(&mut self) {
        for &s in &self.changed {
            if let Some(part) = self.parts.get_mut(s as usize) {
                part.clear();
            }
        }
        self.changed.clear();
        self.top.clear();
    }

    /// Prepares for a capture of a tree with this layout, keeping allocations.
    pub(crate) fn reset(&mut self, bucket_bits: u8, shard_bits: u8, shards: usize) {
        self.clear();
        self.by_hand = false;
        self.bucket_bits = bucket_bits;
        self.shard_bits = shard_bits;
        self.parts.resize_with(shards, ShardCapture::default);
    }

    /// The part a set made by hand is filled into, marked as holding changes.
    fn hand_part(&mut self) -> Option<&mut ShardCapture> {
        if !self.by_hand {
            return None;
        }
        if self.changed.is_empty() {
            self.changed.push(0);
        }
        self.parts.first_mut()
    }

    /// The per-shard parts, for the workers to fill.
    pub(crate) fn parts_mut(&mut self) -> &mut [ShardCapture] {
        &mut self.parts
    }

    /// Records that `shard`'s part holds this capture; shards must be marked in ascending order.
    pub(crate) fn mark_changed(&mut self, shard: u32) {
        self.changed.push(shard);
    }

    /// Where the nodes above the shards go.
    pub(crate) fn top_mut(&mut self) -> &mut Vec<(u8, u32, Hash)> {
        &mut self.top
    }

    fn captured(&self) -> impl Iterator<Item = (u64, &ShardCapture)> + Clone + '_ {
        self.changed.iter().filter_map(|&s| Some((u64::from(s), self.parts.get(s as usize)?)))
    }

    /// Every changed prefix, in global coordinates: shard by shard, then those above the shards.
    pub fn nodes(&self) -> impl Iterator<Item = NodeChange> + '_ {
        let shard_bits = self.shard_bits;
        let below = self.captured().flat_map(move |(shard, c)| {
            c.nodes.iter().map(move |&(r, j, hash)| NodeChange {
                level: shard_bits + r,
                index: (shard << r) | u64::from(j),
                hash,
            })
        });
        below.chain(self.top.iter().map(|&(level, index, hash)| NodeChange { level, index: u64::from(index), hash }))
    }

    /// Number of changed prefixes.
    pub fn node_count(&self) -> usize {
        self.captured().map(|(_, c)| c.nodes.len()).sum::<usize>() + self.top.len()
    }

    /// Every changed bucket in ascending index order (a commit visits shards and each shard's
    /// buckets in order; a set filled by hand is in the order it was filled).
    pub fn buckets(&self) -> impl Iterator<Item = BucketChange<'_>> + Clone + '_ {
        let height = self.bucket_bits - self.shard_bits;
        self.captured().flat_map(move |(shard, c)| {
            c.buckets.iter().map(move |&(j, hash, start, len)| {
                let (start, end) = (start as usize, start as usize + len as usize);
                BucketChange {
                    index: (shard << height) | u64::from(j),
                    hash,
                    paths: c.paths.get(start..end).unwrap_or_default(),
                    values: c.values.get(start..end).unwrap_or_default(),
                }
            })
        })
    }

    /// Heap bytes the set holds, used or not: what keeping it for reuse costs.
    pub fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        let parts: usize = (self.parts.iter())
            .map(|p| {
                p.nodes.capacity() * size_of::<(u8, u32, Hash)>()
                    + p.buckets.capacity() * size_of::<(u32, Hash, u32, u32)>()
                    + (p.paths.capacity() + p.values.capacity()) * size_of::<Hash>()
            })
            .sum();
        parts
            + self.parts.capacity() * size_of::<ShardCapture>()
            + self.changed.capacity() * size_of::<u32>()
            + self.top.capacity() * size_of::<(u8, u32, Hash)>()
    }

    /// Number of changed buckets.
    pub fn bucket_count(&self) -> usize {
        self.captured().map(|(_, c)| c.buckets.len()).sum()
    }

    /// Adds a changed prefix to a set made by [`ChangeSet::by_hand`] (ignored on a set a commit
    /// filled). Levels the options leave out are dropped.
    pub fn push_node(&mut self, level: u8, index: u64, hash: Hash) {
        if !self.options.keeps_level(level, self.bucket_bits) {
            return;
        }
        if let (Some(part), Ok(j)) = (self.hand_part(), u32::try_from(index)) {
            part.nodes.push((level, j, hash));
        }
    }

    /// Adds a changed bucket to a set made by [`ChangeSet::by_hand`] (ignored on a set a commit
    /// filled). Buckets must be added in ascending index order, as a commit lists them (the
    /// snapshot writer refuses others); `values` is ignored unless the options record leaf
    /// values, and must then be as long as `paths`.
    pub fn push_bucket(&mut self, index: u64, hash: Hash, paths: &[Hash], values: &[Hash]) {
        let keep_values = self.options.leaf_values;
        if let (Some(part), Ok(j)) = (self.hand_part(), u32::try_from(index)) {
            part.buckets.push((j, hash, part.paths.len() as u32, paths.len() as u32));
            part.paths.extend_from_slice(paths);
            if keep_values {
                part.values.extend_from_slice(values);
            }
        }
    }
}

/// Two change sets are equal when they list the same changes in the same order, whatever
/// allocations they carry from earlier captures.
impl PartialEq for ChangeSet {
    fn eq(&self, other: &Self) -> bool {
        (self.bucket_bits, self.options) == (other.bucket_bits, other.options)
            && self.nodes().eq(other.nodes())
            && self.buckets().eq(other.buckets())
    }
}

impl Eq for ChangeSet {}

/// One shard's part of a change set, in the shard's own coordinates.
#[derive(Clone, Debug, Default)]
pub(crate) struct ShardCapture {
    /// `(r, j, hash)` of the shard's level tree.
    pub(crate) nodes: Vec<(u8, u32, Hash)>,
    /// `(j, hash, start, len)` of changed buckets, leaves at `paths[start..start + len]`.
    pub(crate) buckets: Vec<(u32, Hash, u32, u32)>,
    pub(crate) paths: Vec<Hash>,
    /// Beside `paths` when leaf values are recorded, else empty.
    pub(crate) values: Vec<Hash>,
}

impl ShardCapture {
    /// Empties the capture, keeping its allocations.
    pub(crate) fn clear(&mut self) {
        self.nodes.clear();
        self.buckets.clear();
        self.paths.clear();
        self.values.clear();
    }
}

/// Where a level tree's rehash records the nodes it recomputed, `(r, j, hash)`, and which
/// levels to record ([`CaptureOptions::level_mask`]).
pub(crate) type NodeSink<'a> = (&'a mut Vec<(u8, u32, Hash)>, u32);

/// Where one shard's commit records its changes.
pub(crate) struct CaptureSink<'a> {
    pub(crate) part: &'a mut ShardCapture,
    pub(crate) options: CaptureOptions,
    /// The levels to record ([`CaptureOptions::level_mask`]), bit `d` for global level `d`.
    pub(crate) levels: u32,
}
