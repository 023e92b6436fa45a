//! Resident memory, as the kernel counts it.

/// The process's resident set size in bytes (`VmRSS` in `/proc/self/status`), if readable.
pub(crate) fn rss_bytes() -> Option<u64> {
    status_bytes("VmRSS:")
}

/// The process's peak resident set size so far (`VmHWM`), if readable.
pub(crate) fn peak_rss_bytes() -> Option<u64> {
    status_bytes("VmHWM:")
}

fn status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kib: u64 = line.trim_start_matches(field).trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

/// Returns freed heap pages to the kernel where the allocator keeps them (glibc keeps freed
/// memory in its arenas), so a second RSS reading separates the engine's footprint from
/// allocator slack left by the bulk build and the slot buffers. Returns whether it ran.
pub(crate) fn trim_heap() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim only walks the allocator's own free lists; it has no preconditions
        // and does not touch live allocations.
        unsafe { libc::malloc_trim(0) };
        true
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}
