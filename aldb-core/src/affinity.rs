//! Pinning the engine's workers to distinct CPUs.
//!
//! A commit splits its work evenly between the workers and waits for the last one, so it takes
//! as long as the slowest. When the workers are woken together, the scheduler often queues two of
//! them on one CPU (the waker's) and leaves another idle until its periodic load balancing moves
//! one across, milliseconds later; the commit then runs at half speed. At 2^26 on two cores this
//! was most of the freeze's tail: in the slowest 1% of 20k-update freezes a worker waited 8–10 ms
//! for a CPU with the CPU time unchanged (BENCHMARKS.md §8). A worker pinned to its own CPU is
//! never queued behind another worker.

/// The CPUs the calling thread may run on, in increasing order; empty if unknown.
#[cfg(target_os = "linux")]
pub(crate) fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the kernel writes at most `size_of::<cpu_set_t>()` bytes into `set`, which we own;
    // pid 0 is the calling thread.
    let ok = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) } == 0;
    if !ok {
        return Vec::new();
    }
    let max = 8 * size_of::<libc::cpu_set_t>();
    // SAFETY: CPU_ISSET only reads `set`, and `cpu` is below the set's capacity.
    (0..max).filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) }).collect()
}

/// Elsewhere the workers are left to the scheduler.
#[cfg(not(target_os = "linux"))]
pub(crate) fn allowed_cpus() -> Vec<usize> {
    Vec::new()
}

/// Restricts the calling thread to `cpu`; false if the kernel refused (the thread keeps running
/// wherever it may, only the placement is lost).
#[cfg(target_os = "linux")]
pub(crate) fn pin_current(cpu: usize) -> bool {
    if cpu >= 8 * size_of::<libc::cpu_set_t>() {
        return false;
    }
    // SAFETY: as above, an all-zero cpu_set_t is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` is below the set's capacity (checked above).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: the kernel reads `size_of::<cpu_set_t>()` bytes from `set`; pid 0 is this thread.
    unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) == 0 }
}

/// Elsewhere pinning is not attempted.
#[cfg(not(target_os = "linux"))]
pub(crate) fn pin_current(_cpu: usize) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn a_pinned_thread_runs_only_on_its_cpu() {
        let cpus = allowed_cpus();
        assert!(!cpus.is_empty(), "the test thread must be allowed some CPU");
        let last = *cpus.last().expect("non-empty");
        let seen = std::thread::spawn(move || {
            assert!(pin_current(last));
            allowed_cpus()
        })
        .join()
        .expect("the pinned thread finished");
        assert_eq!(seen, vec![last]);
        // The caller's own set is untouched.
        assert_eq!(allowed_cpus(), cpus);
    }

    #[test]
    fn an_impossible_cpu_is_refused() {
        assert!(!pin_current(1 << 20));
    }
}
