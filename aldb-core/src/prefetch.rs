//! Software prefetch: ask for a cache line before the walk needs it.
//!
//! Node placement is a pure function of the key path, so the address of a bucket is known long
//! before it is read; issuing the load early overlaps many DRAM round trips instead of paying
//! them one after another.

/// Hints the CPU to bring the cache line holding `p` into L1. Never faults, even on a bad address.
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint that never dereferences architecturally; SSE is baseline on x86_64.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
