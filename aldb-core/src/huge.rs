//! Large zeroed arrays, placed on transparent huge pages where the kernel allows it.
//!
//! Node addresses in the prefix arrays are a function of the key, so a commit touches them at
//! random: with 4 KiB pages nearly every such access also misses the TLB and pays a page walk.
//! Arrays of at least 2 MiB are allocated 2 MiB-aligned and advised with `MADV_HUGEPAGE`, which
//! takes effect when `/sys/kernel/mm/transparent_hugepage/enabled` is `madvise` or `always`.

use std::alloc::{Layout, alloc, alloc_zeroed, dealloc, handle_alloc_error};
use std::ptr::NonNull;
use std::sync::Arc;

/// The huge page size on x86-64 and aarch64 (with 4 KiB base pages).
const HUGE_PAGE: usize = 2 << 20;

/// A fixed-length, zero-initialised array that owns its allocation.
pub(crate) struct HugeArray<T> {
    ptr: NonNull<T>,
    len: usize,
    layout: Layout,
}

// SAFETY: HugeArray owns its elements exactly like a Box<[T]>, so it may cross threads whenever T may.
unsafe impl<T: Send> Send for HugeArray<T> {}
// SAFETY: shared access only hands out &T, as a Box<[T]> would.
unsafe impl<T: Sync> Sync for HugeArray<T> {}

impl<T> HugeArray<T> {
    /// `len` elements, all bytes zero.
    ///
    /// # Safety
    /// The all-zero bit pattern must be a valid `T`.
    pub(crate) unsafe fn zeroed(len: usize) -> Self {
        let len = len.max(1);
        let size = size_of::<T>().saturating_mul(len);
        let align = if size >= HUGE_PAGE { HUGE_PAGE } else { align_of::<T>() };
        let Ok(layout) = Layout::from_size_align(size.max(1), align.max(align_of::<T>())) else {
            // Only a size beyond isize::MAX gets here; no allocator could serve it either.
            handle_alloc_error(Layout::new::<T>())
        };
        if align != HUGE_PAGE {
            // SAFETY: the layout has a non-zero size.
            let raw = unsafe { alloc_zeroed(layout) };
            let Some(ptr) = NonNull::new(raw.cast::<T>()) else { handle_alloc_error(layout) };
            return Self { ptr, len, layout };
        }
        // Advise before the first touch: pages already faulted in as 4 KiB stay so until the
        // kernel's background collapse gets to them, so the zeroing must come after.
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc(layout) };
        let Some(ptr) = NonNull::new(raw.cast::<T>()) else { handle_alloc_error(layout) };
        #[cfg(target_os = "linux")]
        // SAFETY: the range is exactly the allocation just made; the advice changes only how
        // the kernel backs it, never its contents, and a refusal is harmless.
        unsafe {
            libc::madvise(raw.cast(), layout.size(), libc::MADV_HUGEPAGE);
        }
        // SAFETY: raw is valid for layout.size() bytes of writes.
        unsafe { std::ptr::write_bytes(raw, 0, layout.size()) };
        Self { ptr, len, layout }
    }

    /// Bytes allocated.
    pub(crate) fn bytes(&self) -> usize {
        self.layout.size()
    }

    /// Cuts the array into consecutive pieces of `piece` elements (the last may be shorter), each
    /// owned on its own, so holders too small for a huge page of their own can share one.
    pub(crate) fn split(self, piece: usize) -> Vec<HugePiece<T>> {
        let piece = piece.max(1);
        let (base, len) = (self.ptr, self.len);
        let region = Arc::new(self);
        (0..len.div_ceil(piece))
            .map(|k| {
                let start = k * piece;
                // SAFETY: start < len, so the offset stays inside the allocation.
                let ptr = unsafe { base.add(start) };
                HugePiece { _region: Arc::clone(&region), ptr, len: piece.min(len - start) }
            })
            .collect()
    }
}

impl<T> std::ops::Deref for HugeArray<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: ptr points to len initialised elements owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> std::ops::DerefMut for HugeArray<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in deref, and &mut self makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> Drop for HugeArray<T> {
    fn drop(&mut self) {
        // SAFETY: allocated in zeroed with this very layout; T needs no drop (callers use Copy
        // types), and nothing borrows self any more.
        unsafe { dealloc(self.ptr.as_ptr().cast(), self.layout) };
    }
}

/// One piece of a [`HugeArray`] made by [`HugeArray::split`]: a fixed-length slice that keeps
/// the whole allocation alive.
pub(crate) struct HugePiece<T> {
    /// Held only to free the allocation after its last piece; never read through, so the
    /// pieces' exclusive access to their own ranges is the only access there is.
    _region: Arc<HugeArray<T>>,
    ptr: NonNull<T>,
    len: usize,
}

// SAFETY: a piece owns its range exactly like a Box<[T]> would (no two pieces overlap and the
// region is never accessed as a whole once split), so it may cross threads whenever T may.
unsafe impl<T: Send + Sync> Send for HugePiece<T> {}
// SAFETY: shared access only hands out &T.
unsafe impl<T: Sync> Sync for HugePiece<T> {}

impl<T> std::ops::Deref for HugePiece<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: ptr points to len initialised elements of the region, which self keeps alive
        // and no other piece covers.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> std::ops::DerefMut for HugePiece<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in deref, and &mut self makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_and_large_arrays_are_zeroed_writable_and_aligned() {
        // SAFETY: zero is a valid u64.
        let mut small = unsafe { HugeArray::<u64>::zeroed(10) };
        assert!(small.iter().all(|&x| x == 0));
        small[9] = 7;
        assert_eq!(small[9], 7);
        // SAFETY: zero is a valid [u8; 64].
        let mut big = unsafe { HugeArray::<[u8; 64]>::zeroed(HUGE_PAGE / 64 * 2) };
        assert_eq!(big.as_ptr() as usize % HUGE_PAGE, 0);
        assert!(big.iter().all(|x| x.iter().all(|&b| b == 0)));
        let n = big.len();
        big[n - 1][63] = 1;
        assert_eq!(big.bytes(), HUGE_PAGE * 2);
    }

    #[test]
    fn pieces_are_disjoint_and_outlive_the_split() {
        // SAFETY: zero is a valid u32.
        let whole = unsafe { HugeArray::<u32>::zeroed(HUGE_PAGE / 4 + 10) };
        let mut pieces = whole.split(HUGE_PAGE / 16);
        assert_eq!(pieces.len(), 5);
        assert_eq!(pieces.iter().map(|p| p.len()).sum::<usize>(), HUGE_PAGE / 4 + 10);
        assert_eq!(pieces[4].len(), 10);
        for (k, p) in pieces.iter_mut().enumerate() {
            p.fill(k as u32 + 1);
        }
        let last = pieces.pop();
        drop(pieces);
        assert!(last.is_some_and(|p| p.iter().all(|&x| x == 5)));
    }
}
