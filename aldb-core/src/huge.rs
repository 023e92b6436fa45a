//! Large zeroed arrays, placed on transparent huge pages where the kernel allows it.
//!
//! Node addresses in the prefix arrays are a function of the key, so a commit touches them at
//! random: with 4 KiB pages nearly every such access also misses the TLB and pays a page walk.
//! Arrays of at least 2 MiB are allocated 2 MiB-aligned and advised with `MADV_HUGEPAGE`, which
//! takes effect when `/sys/kernel/mm/transparent_hugepage/enabled` is `madvise` or `always`.

use std::alloc::{alloc, alloc_zeroed, dealloc, handle_alloc_error, Layout};
use std::ptr::NonNull;

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
        advise_huge(raw, layout.size());
        // SAFETY: raw is valid for layout.size() bytes of writes.
        unsafe { std::ptr::write_bytes(raw, 0, layout.size()) };
        Self { ptr, len, layout }
    }

    /// Bytes allocated.
    pub(crate) fn bytes(&self) -> usize {
        self.layout.size()
    }
}

/// Asks the kernel to back `[start, start + len)` with huge pages; only whole 2 MiB pages inside
/// the range can be, and a refusal (or another OS) is harmless.
fn advise_huge(start: *mut u8, len: usize) {
    #[cfg(target_os = "linux")]
    if len >= HUGE_PAGE {
        // SAFETY: callers pass a range inside one live allocation of theirs; the advice changes
        // only how the kernel backs it, never its contents.
        unsafe {
            libc::madvise(start.cast(), len, libc::MADV_HUGEPAGE);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (start, len);
}

/// A growable array of plain values, allocated once at its expected size and advised onto huge
/// pages before it is first written.
///
/// First touch of fresh memory is the dominant cost of filling gigabytes (the kernel zeroes
/// every page it faults in), so a vector that doubles and copies touches about twice its final
/// size and faults one 4 KiB page at a time. Reserving the expected size up front costs only
/// address space until it is written; only the part the caller is sure to fill is advised, so a
/// short fill does not fault in a whole 2 MiB page for a few bytes.
pub(crate) struct HugeVec<T: Copy> {
    ptr: NonNull<T>,
    len: usize,
    cap: usize,
}

// SAFETY: HugeVec owns its elements exactly like a Vec<T>, so it may cross threads whenever T may.
unsafe impl<T: Copy + Send> Send for HugeVec<T> {}
// SAFETY: shared access only hands out &T, as a Vec<T> would.
unsafe impl<T: Copy + Sync> Sync for HugeVec<T> {}

impl<T: Copy> Default for HugeVec<T> {
    fn default() -> Self {
        Self { ptr: NonNull::dangling(), len: 0, cap: 0 }
    }
}

impl<T: Copy> HugeVec<T> {
    /// Room for `cap` elements, the first `sure` of which (clamped to `cap`) are advised onto huge
    /// pages.
    pub(crate) fn with_capacity(cap: usize, sure: usize) -> Self {
        let mut v = Self::default();
        v.reserve_exact(cap, sure);
        v
    }

    fn layout(cap: usize) -> Layout {
        let size = size_of::<T>().saturating_mul(cap);
        let align = if size >= HUGE_PAGE { HUGE_PAGE } else { align_of::<T>() };
        match Layout::from_size_align(size, align.max(align_of::<T>())) {
            Ok(l) => l,
            // Only a size beyond isize::MAX gets here; no allocator could serve it either.
            Err(_) => handle_alloc_error(Layout::new::<T>()),
        }
    }

    /// Moves the elements into a new allocation of `cap >= len` elements.
    fn reserve_exact(&mut self, cap: usize, sure: usize) {
        debug_assert!(cap >= self.len);
        if cap == 0 || size_of::<T>() == 0 {
            return;
        }
        let layout = Self::layout(cap);
        // SAFETY: cap > 0 and T is not zero-sized, so the layout has a non-zero size.
        let raw = unsafe { alloc(layout) };
        let Some(ptr) = NonNull::new(raw.cast::<T>()) else { handle_alloc_error(layout) };
        let sure = sure.min(cap) * size_of::<T>();
        advise_huge(raw, sure - sure % HUGE_PAGE);
        // SAFETY: both ranges are valid for len elements and belong to different allocations.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.as_ptr(), ptr.as_ptr(), self.len) };
        self.free();
        self.ptr = ptr;
        self.cap = cap;
    }

    fn free(&mut self) {
        if self.cap != 0 && size_of::<T>() != 0 {
            // SAFETY: allocated in reserve_exact with this very layout; T is Copy, so nothing
            // needs dropping.
            unsafe { dealloc(self.ptr.as_ptr().cast(), Self::layout(self.cap)) };
        }
    }

    #[cold]
    fn grow(&mut self) {
        let cap = self.cap.saturating_mul(2).max(64);
        // The old contents are already resident, so their copy is the part sure to be filled.
        self.reserve_exact(cap, self.len);
    }

    /// Appends one element.
    #[inline]
    pub(crate) fn push(&mut self, v: T) {
        if self.len == self.cap {
            self.grow();
        }
        // SAFETY: len < cap after the growth above, so the slot lies inside the allocation.
        unsafe { self.ptr.as_ptr().add(self.len).write(v) };
        self.len += 1;
    }

    /// Keeps the first `len` elements.
    pub(crate) fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Bytes of the elements held, rounded up to whole 4 KiB pages: what is resident, since the
    /// reserved tail is never touched.
    pub(crate) fn bytes(&self) -> usize {
        (self.len * size_of::<T>()).next_multiple_of(4096)
    }
}

impl<T: Copy> Drop for HugeVec<T> {
    fn drop(&mut self) {
        self.free();
    }
}

impl<T: Copy> std::ops::Deref for HugeVec<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: ptr points to len initialised elements owned by self (or is dangling with len 0).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Copy> std::ops::DerefMut for HugeVec<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in deref, and &mut self makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
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
    fn vec_grows_keeps_contents_and_truncates() {
        let mut v = HugeVec::<u64>::with_capacity(3, 3);
        for i in 0..1000u64 {
            v.push(i);
        }
        assert_eq!(v.len(), 1000);
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64));
        v.truncate(10);
        assert_eq!(&v[..], &(0..10).collect::<Vec<u64>>()[..]);
        assert_eq!(v.bytes(), 4096);
        let mut big = HugeVec::<[u8; 64]>::with_capacity(HUGE_PAGE / 32, HUGE_PAGE / 64);
        big.push([1; 64]);
        assert_eq!(big.as_ptr() as usize % HUGE_PAGE, 0);
        assert!(HugeVec::<u8>::default().is_empty());
    }
}
