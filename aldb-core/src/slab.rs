//! Compact storage for the sorted leaves of every bucket.
//!
//! A bucket holds a handful of leaves. Giving each bucket its own heap allocation would cost an
//! allocator header and a pointer per handful of leaves and scatter them across the heap; instead
//! buckets of the same length share fixed-size pages of their size class, and a bucket is a
//! (class, chunk) reference. A bucket that grows or shrinks moves to the next class: a copy of a
//! few cache lines.
//!
//! A bulk build instead lays a shard's leaves down bucket after bucket in one array (its sort
//! buffer, see `bulk.rs`), which the slab adopts as its *base*: a bucket there is a chunk with
//! [`BASE`] set, whose capacity is its length. When such a bucket moves to another class its
//! chunk goes on the free list of its own exact-fit class, so later buckets of that length reuse
//! it and the base is not left to rot as the tree changes.

use aldb_verify::spec::Hash;

/// One leaf: its key path and account value hash, one cache line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(64))]
pub(crate) struct Leaf {
    pub(crate) path: Hash,
    pub(crate) value: Hash,
}

impl Leaf {
    /// The 64-byte leaf preimage `path || value`, as stored.
    pub(crate) fn as_bytes(&self) -> &[u8; 64] {
        // SAFETY: Leaf is repr(C) with two [u8; 32] fields and size 64: no padding, any bytes valid.
        unsafe { &*(self as *const Leaf).cast::<[u8; 64]>() }
    }
}

/// Where a bucket's leaves live. `len == 0` means the bucket is empty and owns no chunk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct BucketRef {
    pub(crate) chunk: u32,
    pub(crate) len: u32,
}

/// Leaves per page, so a partly used page wastes little.
const PAGE_LEAVES: usize = 128;
/// Bucket lengths up to this get an exact-fit class; longer ones round up to a power of two.
pub(crate) const EXACT_CLASSES: u32 = 32;
/// Chunk flag: the rest of the chunk number is an offset into the slab's base array.
const BASE: u32 = 1 << 31;

/// Chunk capacity of the class that holds buckets of `len` leaves (`len >= 1`).
fn class_of(len: u32) -> (usize, usize) {
    if len <= EXACT_CLASSES {
        ((len - 1) as usize, len as usize)
    } else {
        let width = len.next_power_of_two();
        // EXACT_CLASSES is 2^5: widths 64, 128, ... map to classes 32, 33, ...
        (EXACT_CLASSES as usize + (width.trailing_zeros() as usize - 6), width as usize)
    }
}

#[derive(Default)]
struct SizeClass {
    width: usize,
    chunks_per_page: usize,
    pages: Vec<Box<[Leaf]>>,
    next: u32,
    free: Vec<u32>,
}

impl SizeClass {
    fn new(width: usize) -> Self {
        let chunks_per_page = (PAGE_LEAVES / width).max(1);
        Self { width, chunks_per_page, ..Default::default() }
    }

    fn locate(&self, chunk: u32) -> (usize, usize) {
        let c = chunk as usize;
        (c / self.chunks_per_page, (c % self.chunks_per_page) * self.width)
    }

    fn alloc(&mut self) -> u32 {
        if let Some(c) = self.free.pop() {
            return c;
        }
        let c = self.next;
        debug_assert!(c < BASE, "class chunk numbers stay below the base flag");
        self.next += 1;
        let (page, _) = self.locate(c);
        if page == self.pages.len() {
            self.pages.push(vec![Leaf::default(); self.chunks_per_page * self.width].into_boxed_slice());
        }
        c
    }
}

/// All leaves of one shard, grouped into buckets.
#[derive(Default)]
pub(crate) struct LeafSlab {
    classes: Vec<SizeClass>,
    /// Leaves adopted from a bulk build; chunks with [`BASE`] set point here.
    base: Vec<Leaf>,
}

impl LeafSlab {
    fn class(&mut self, len: u32) -> &mut SizeClass {
        class_mut(&mut self.classes, len)
    }

    /// Takes `base` as the home of buckets made with [`LeafSlab::base_ref`]. The slab must be
    /// empty: chunks of an earlier base would dangle.
    ///
    /// The array keeps the builder's spare capacity: shrinking it would copy every leaf into
    /// fresh memory (the allocator moves over-aligned blocks), and the spare tail was never
    /// written, so it holds address space but no memory.
    pub(crate) fn adopt(&mut self, base: Vec<Leaf>) {
        debug_assert!(self.base.is_empty() && self.classes.iter().all(|c| c.next == 0));
        self.base = base;
    }

    /// The bucket holding `base[start..start + len]` (`len >= 1`). Buckets longer than the
    /// exact-fit classes are copied into their class, so a base chunk's capacity is always its
    /// length and a freed one fits its class exactly; so are buckets past the offsets a chunk
    /// number can hold (a shard of over 2^31 leaves).
    pub(crate) fn base_ref(&mut self, start: usize, len: u32) -> BucketRef {
        debug_assert!(len >= 1 && start + len as usize <= self.base.len());
        if len <= EXACT_CLASSES && start < BASE as usize {
            return BucketRef { chunk: BASE | start as u32, len };
        }
        let c = class_mut(&mut self.classes, len);
        let chunk = c.alloc();
        let (page, off) = c.locate(chunk);
        c.pages[page][off..off + len as usize].copy_from_slice(&self.base[start..start + len as usize]);
        BucketRef { chunk, len }
    }

    /// The leaves of a bucket, sorted by path.
    pub(crate) fn get(&self, b: BucketRef) -> &[Leaf] {
        if b.len == 0 {
            return &[];
        }
        if b.chunk & BASE != 0 {
            let start = (b.chunk & !BASE) as usize;
            return &self.base[start..start + b.len as usize];
        }
        let c = &self.classes[class_of(b.len).0];
        let (page, off) = c.locate(b.chunk);
        &c.pages[page][off..off + b.len as usize]
    }

    /// Replaces a bucket's leaves with `leaves`, reusing its chunk when the class stays the same.
    pub(crate) fn store(&mut self, old: BucketRef, leaves: &[Leaf]) -> BucketRef {
        let len = leaves.len() as u32;
        if len == 0 {
            self.release(old);
            return BucketRef::default();
        }
        let chunk = if old.len != 0 && class_of(old.len).0 == class_of(len).0 {
            old.chunk
        } else {
            self.release(old);
            self.class(len).alloc()
        };
        if chunk & BASE != 0 {
            let start = (chunk & !BASE) as usize;
            self.base[start..start + leaves.len()].copy_from_slice(leaves);
        } else {
            let c = self.class(len);
            let (page, off) = c.locate(chunk);
            c.pages[page][off..off + leaves.len()].copy_from_slice(leaves);
        }
        BucketRef { chunk, len }
    }

    fn release(&mut self, b: BucketRef) {
        if b.len != 0 {
            self.class(b.len).free.push(b.chunk);
        }
    }

    /// Heap bytes held, including unused parts of pages (of the base, only the written part).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.classes
            .iter()
            .map(|c| c.pages.len() * c.chunks_per_page * c.width * size_of::<Leaf>() + c.free.capacity() * 4)
            .sum::<usize>()
            + self.classes.capacity() * size_of::<SizeClass>()
            + (self.base.len() * size_of::<Leaf>()).next_multiple_of(4096)
    }
}

fn class_mut(classes: &mut Vec<SizeClass>, len: u32) -> &mut SizeClass {
    let (idx, width) = class_of(len);
    while classes.len() <= idx {
        let i = classes.len() as u32;
        let w = if i < EXACT_CLASSES { i as usize + 1 } else { 64usize << (i - EXACT_CLASSES) };
        classes.push(SizeClass::new(w));
    }
    debug_assert_eq!(classes[idx].width, width);
    &mut classes[idx]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaves(n: usize, tag: u8) -> Vec<Leaf> {
        (0..n).map(|i| Leaf { path: [i as u8; 32], value: [tag; 32] }).collect()
    }

    #[test]
    fn grow_shrink_and_reuse() {
        let mut s = LeafSlab::default();
        let mut refs = Vec::new();
        for n in [1usize, 2, 3, 33, 70, 200, 5] {
            let r = s.store(BucketRef::default(), &leaves(n, n as u8));
            refs.push((r, n));
        }
        for (r, n) in &refs {
            assert_eq!(s.get(*r), &leaves(*n, *n as u8)[..]);
        }
        let (r, _) = refs[1];
        let r2 = s.store(r, &leaves(2, 9));
        assert_eq!(r2.chunk, r.chunk, "same class reuses the chunk");
        let r3 = s.store(r2, &leaves(4, 1));
        assert_eq!(s.get(r3), &leaves(4, 1)[..]);
        let r4 = s.store(BucketRef::default(), &leaves(2, 4));
        assert_eq!(r4.chunk, r.chunk, "freed chunk is reused");
        assert_eq!(s.store(r3, &[]), BucketRef::default());
        for (r, n) in &refs[2..] {
            assert_eq!(s.get(*r), &leaves(*n, *n as u8)[..]);
        }
    }

    #[test]
    fn base_buckets_are_read_rewritten_and_recycled() {
        let base: Vec<Leaf> = leaves(3, 1).into_iter().chain(leaves(40, 2)).chain(leaves(2, 3)).collect();
        let mut s = LeafSlab::default();
        s.adopt(base);
        let a = s.base_ref(0, 3);
        let big = s.base_ref(3, 40);
        let c = s.base_ref(43, 2);
        assert_eq!(big.chunk & BASE, 0, "long buckets move to their class");
        assert_eq!(s.get(a), &leaves(3, 1)[..]);
        assert_eq!(s.get(big), &leaves(40, 2)[..]);
        assert_eq!(s.get(c), &leaves(2, 3)[..]);
        let a2 = s.store(a, &leaves(3, 7));
        assert_eq!(a2, a, "same length rewrites in place");
        assert_eq!(s.get(a2), &leaves(3, 7)[..]);
        let c2 = s.store(c, &leaves(3, 8));
        assert_eq!(c2.chunk & BASE, 0, "a grown bucket leaves the base");
        let d = s.store(BucketRef::default(), &leaves(2, 9));
        assert_eq!(d.chunk, c.chunk, "the freed base chunk serves the next bucket of its length");
        assert_eq!(s.get(d), &leaves(2, 9)[..]);
        assert_eq!(s.get(a2), &leaves(3, 7)[..]);
        assert_eq!(s.get(c2), &leaves(3, 8)[..]);
    }
}
