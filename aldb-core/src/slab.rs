//! Compact storage for the sorted leaves of every bucket.
//!
//! A bucket holds a handful of leaves. Giving each bucket its own heap allocation would cost an
//! allocator header and a pointer per handful of leaves and scatter them across the heap; instead
//! buckets of the same length share fixed-size pages of their size class, and a bucket is a
//! (class, chunk) reference. A bucket that grows or shrinks moves to the next class: a copy of a
//! few cache lines.

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
const EXACT_CLASSES: u32 = 32;

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
}

impl LeafSlab {
    fn class(&mut self, len: u32) -> &mut SizeClass {
        let (idx, width) = class_of(len);
        while self.classes.len() <= idx {
            let i = self.classes.len() as u32;
            let w = if i < EXACT_CLASSES { i as usize + 1 } else { 64usize << (i - EXACT_CLASSES) };
            self.classes.push(SizeClass::new(w));
        }
        debug_assert_eq!(self.classes[idx].width, width);
        &mut self.classes[idx]
    }

    /// The leaves of a bucket, sorted by path.
    pub(crate) fn get(&self, b: BucketRef) -> &[Leaf] {
        if b.len == 0 {
            return &[];
        }
        let c = &self.classes[class_of(b.len).0];
        let (page, off) = c.locate(b.chunk);
        &c.pages[page][off..off + b.len as usize]
    }

    /// Address of a bucket's first leaf, for prefetching.
    pub(crate) fn first_ptr(&self, b: BucketRef) -> *const Leaf {
        self.get(b).as_ptr()
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
        let c = self.class(len);
        let (page, off) = c.locate(chunk);
        c.pages[page][off..off + leaves.len()].copy_from_slice(leaves);
        BucketRef { chunk, len }
    }

    fn release(&mut self, b: BucketRef) {
        if b.len != 0 {
            self.class(b.len).free.push(b.chunk);
        }
    }

    /// Heap bytes held, including unused parts of pages.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.classes
            .iter()
            .map(|c| c.pages.len() * c.chunks_per_page * c.width * size_of::<Leaf>() + c.free.capacity() * 4)
            .sum::<usize>()
            + self.classes.capacity() * size_of::<SizeClass>()
    }
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
}
