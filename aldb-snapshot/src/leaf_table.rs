//! The leaves of every bucket's current record, as the serializer keeps them in memory.
//!
//! A changed bucket is rewritten without reading its old record back (files are written past
//! the page cache, so that read would be a device round trip per bucket): each leaf the slot did
//! not change keeps the account record it had, found among the bucket's old leaves by its key
//! path. So per leaf the table holds that record's reference and a 16-bit tag of the path, the
//! bits right below the bucket's own (which every leaf of the bucket shares). Two leaves of a
//! bucket share a tag once in 65,536 pairs; then their account records are read to tell them
//! apart (at 2^26 leaves and 400,000 updates per slot, about 30 record reads per slot).
//!
//! Buckets hold a handful of leaves each, so a heap allocation per bucket would cost more in
//! pointers, counts and allocator headers than the leaves themselves (40 bytes per leaf at two
//! leaves per bucket, measured). Instead [`BLOCK`] consecutive buckets share one array of
//! packed 10-byte leaves with a 16-bit length per bucket: about 11 bytes per leaf in all. A
//! bucket that grows or shrinks moves the rest of its block's leaves, at most a few hundred
//! bytes; most changes are updates, which keep the length and only overwrite.

use aldb_format::format::{Ref, prefix_of};
use aldb_verify::spec::Hash;

/// Buckets per block.
const BLOCK: usize = 64;

/// One leaf: its path's tag and its account record, packed into 10 bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LeafView([u16; 5]);

impl LeafView {
    /// The leaf of `path` in a tree of `2^bucket_bits` buckets, whose account record is at `account`.
    pub(crate) fn new(path: &Hash, bucket_bits: u8, account: Ref) -> Self {
        Self::with_tag(tag(path, bucket_bits), account)
    }

    /// The same path's leaf with another account record.
    pub(crate) fn with_account(self, account: Ref) -> Self {
        Self::with_tag(self.tag(), account)
    }

    fn with_tag(tag: u16, account: Ref) -> Self {
        let r = account.0;
        Self([tag, r as u16, (r >> 16) as u16, (r >> 32) as u16, (r >> 48) as u16])
    }

    /// The 16 bits of the path below its bucket bits.
    pub(crate) fn tag(self) -> u16 {
        self.0[0]
    }

    /// Where the leaf's account record is.
    pub(crate) fn account(self) -> Ref {
        let [_, a, b, c, d] = self.0.map(u64::from);
        Ref(a | b << 16 | c << 32 | d << 48)
    }
}

/// The 16 bits of `path` right below its `bucket_bits` (at most 32) bucket bits.
pub(crate) fn tag(path: &Hash, bucket_bits: u8) -> u16 {
    ((prefix_of(path) << bucket_bits.min(32)) >> 48) as u16
}

/// A bucket held more leaves than a block records (65,535): not a tree any key set of real
/// accounts makes, since paths are hashes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct BucketTooLarge(pub(crate) usize);

#[derive(Debug)]
#[repr(C)]
struct Block {
    /// The leaves of the block's buckets, bucket after bucket.
    leaves: Vec<LeafView>,
    /// Leaves per bucket.
    lens: [u16; BLOCK],
}

impl Default for Block {
    fn default() -> Self {
        Self { leaves: Vec::new(), lens: [0; BLOCK] }
    }
}

impl Block {
    fn start(&self, i: usize) -> usize {
        self.lens[..i].iter().map(|&n| usize::from(n)).sum()
    }
}

/// The leaves of `2^bucket_bits` buckets.
#[derive(Debug, Default)]
pub(crate) struct LeafTable {
    blocks: Vec<Block>,
    /// Set while a whole state is laid down bucket after bucket (a full write, a recovery):
    /// blocks then grow by doubling, and [`LeafTable::seal`] trims them once at the end.
    filling: bool,
    /// Leaves the blocks have room for, kept as they change so the size is read without a walk.
    capacity: usize,
}

impl LeafTable {
    /// Empty buckets, ready to be filled in order.
    pub(crate) fn new(bucket_bits: u8) -> Self {
        let blocks = (1usize << bucket_bits).div_ceil(BLOCK);
        Self { blocks: (0..blocks).map(|_| Block::default()).collect(), filling: true, capacity: 0 }
    }

    /// Ends filling: every block's spare capacity is returned, and from now on a growing bucket
    /// reserves only a little room beyond what it needs.
    pub(crate) fn seal(&mut self) {
        if self.filling {
            for b in &mut self.blocks {
                b.leaves.shrink_to_fit();
            }
            self.capacity = self.blocks.iter().map(|b| b.leaves.capacity()).sum();
            self.filling = false;
        }
    }

    /// The leaves of bucket `b`, in path order (none for a bucket out of range).
    pub(crate) fn leaves(&self, b: usize) -> &[LeafView] {
        let Some(block) = self.blocks.get(b / BLOCK) else { return &[] };
        let (i, start) = (b % BLOCK, block.start(b % BLOCK));
        block.leaves.get(start..start + usize::from(block.lens[i])).unwrap_or(&[])
    }

    /// Asks for bucket `b`'s block header, which says where its leaves are (all the cache lines
    /// the header spans).
    pub(crate) fn prefetch_block(&self, b: usize) {
        if let Some(block) = self.blocks.get(b / BLOCK) {
            let p = (block as *const Block).cast::<u8>();
            for at in (0..std::mem::size_of::<Block>()).step_by(64).chain([std::mem::size_of::<Block>() - 1]) {
                aldb_core::prefetch(p.wrapping_add(at));
            }
        }
    }

    /// Asks for bucket `b`'s leaves (after [`LeafTable::prefetch_block`], or it waits for the
    /// header).
    pub(crate) fn prefetch_leaves(&self, b: usize) {
        aldb_core::prefetch(self.leaves(b).as_ptr());
    }

    /// Replaces bucket `b`'s leaves.
    pub(crate) fn set(&mut self, b: usize, leaves: &[LeafView]) -> Result<(), BucketTooLarge> {
        let len = u16::try_from(leaves.len()).map_err(|_| BucketTooLarge(leaves.len()))?;
        let filling = self.filling;
        let Some(block) = self.blocks.get_mut(b / BLOCK) else { return Ok(()) };
        let i = b % BLOCK;
        let start = block.start(i);
        let old = usize::from(block.lens[i]);
        if leaves.len() == old {
            if let Some(dst) = block.leaves.get_mut(start..start + old) {
                dst.copy_from_slice(leaves);
            }
            return Ok(());
        }
        let had = block.leaves.capacity();
        if leaves.len() > old && !filling {
            // A little room beyond the need, so a block that gains a leaf now and then is not
            // reallocated each time; at most 1/16 of its size (or 4 leaves) spare.
            let grow = leaves.len() - old;
            let spare = block.leaves.capacity() - block.leaves.len();
            if spare < grow {
                block.leaves.reserve_exact(grow + (block.leaves.len() / 16).max(4));
            }
        }
        block.leaves.splice(start..start + old, leaves.iter().copied());
        block.lens[i] = len;
        self.capacity = self.capacity - had + block.leaves.capacity();
        Ok(())
    }

    /// Bytes the table holds on the heap.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.blocks.capacity() * std::mem::size_of::<Block>() + self.capacity * std::mem::size_of::<LeafView>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn view(rng: &mut ChaCha8Rng) -> LeafView {
        LeafView::with_tag(rng.random(), Ref(rng.random()))
    }

    #[test]
    fn a_view_packs_its_tag_and_reference() {
        let path: Hash = core::array::from_fn(|i| (i as u8).wrapping_mul(17).wrapping_add(3));
        let r = Ref(0x0123_4567_89ab_cdef);
        for bits in [0u8, 1, 10, 21, 25, 31, 32] {
            let v = LeafView::new(&path, bits, r);
            assert_eq!(v.account(), r);
            assert_eq!(u64::from(v.tag()), (prefix_of(&path) << bits) >> 48, "bucket bits {bits}");
            assert_eq!(v.with_account(Ref(7)).tag(), v.tag());
            assert_eq!(v.with_account(Ref(7)).account(), Ref(7));
        }
        assert_eq!(std::mem::size_of::<LeafView>(), 10);
    }

    /// Random replacements against a vector per bucket: filled in order, sealed, then buckets
    /// grow, shrink, empty and are overwritten at random.
    #[test]
    fn buckets_read_back_what_was_set_across_growth_and_shrinkage() {
        for bucket_bits in [0u8, 3, 6, 9] {
            let mut rng = ChaCha8Rng::seed_from_u64(u64::from(bucket_bits) + 40);
            let n = 1usize << bucket_bits;
            let mut model: Vec<Vec<LeafView>> = vec![Vec::new(); n];
            let mut t = LeafTable::new(bucket_bits);
            for (b, m) in model.iter_mut().enumerate() {
                let len = rng.random_range(0..5);
                *m = (0..len).map(|_| view(&mut rng)).collect();
                t.set(b, m).unwrap();
            }
            t.seal();
            for step in 0..4000 {
                let b = rng.random_range(0..n);
                let len = match rng.random_range(0..10) {
                    0 => 0,
                    1 => rng.random_range(0..40),
                    _ => model[b].len(),
                };
                let new: Vec<LeafView> = (0..len).map(|_| view(&mut rng)).collect();
                t.set(b, &new).unwrap();
                model[b] = new;
                if step % 97 == 0 {
                    for (k, m) in model.iter().enumerate() {
                        assert_eq!(t.leaves(k), m.as_slice(), "bucket {k} after step {step}");
                    }
                }
            }
            for (k, m) in model.iter().enumerate() {
                assert_eq!(t.leaves(k), m.as_slice(), "bucket {k}");
            }
            let held: usize = model.iter().map(Vec::len).sum();
            assert!(t.heap_bytes() >= held * 10);
            let walked: usize = t.blocks.iter().map(|b| b.leaves.capacity()).sum();
            assert_eq!(t.capacity, walked, "the kept count is the blocks' capacity");
            assert!(t.leaves(n).is_empty(), "out of range");
        }
    }

    #[test]
    fn a_bucket_past_the_length_field_is_refused_not_truncated() {
        let mut t = LeafTable::new(2);
        let many = vec![LeafView::default(); usize::from(u16::MAX) + 1];
        assert_eq!(t.set(1, &many), Err(BucketTooLarge(many.len())));
        assert!(t.leaves(1).is_empty());
        t.set(1, &many[1..]).unwrap();
        assert_eq!(t.leaves(1).len(), usize::from(u16::MAX));
    }
}
