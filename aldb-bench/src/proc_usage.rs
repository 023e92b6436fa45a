//! What this process and its threads have used, as the kernel counts it under `/proc/self`: CPU
//! split into user and system time, page faults, time runnable but waiting for a core, time
//! blocked on storage, and bytes moved to and from storage. Read before and after a phase, the
//! difference tells where the phase's time went, whatever else runs on the machine, which
//! wall-clock rates on a shared host cannot.

use std::collections::BTreeMap;
use std::path::Path;

/// Counters of one thread, of the threads of one name, or of the whole process.
#[derive(Clone, Copy, Default)]
pub(crate) struct Usage {
    /// CPU time in ns (`schedstat`'s first field).
    pub cpu_ns: u64,
    /// Time runnable but waiting for a core, in ns (`schedstat`'s second field).
    pub runq_ns: u64,
    /// User CPU in clock ticks (`stat` field 14).
    pub utime: u64,
    /// System CPU in clock ticks (`stat` field 15): page faults, syscalls, copies to and from
    /// the page cache.
    pub stime: u64,
    /// Page faults served without storage (`stat` field 10): first touches, pages still cached.
    pub minflt: u64,
    /// Page faults that waited for storage (`stat` field 12): mapped pages the cache had dropped.
    pub majflt: u64,
    /// Clock ticks blocked waiting for block I/O (`stat` field 42); zero unless the kernel keeps
    /// delay accounting.
    pub blkio: u64,
    /// Bytes the threads caused to be read from storage (`io`'s `read_bytes`), page-cache hits
    /// not included.
    pub read_bytes: u64,
    /// Bytes the threads caused to be sent to storage (`io`'s `write_bytes`).
    pub write_bytes: u64,
}

impl Usage {
    /// Reads one task's counters from its `/proc` directory, or none if it has gone.
    fn of_task(dir: &Path) -> Option<Self> {
        let sched = std::fs::read_to_string(dir.join("schedstat")).ok()?;
        let mut sched = sched.split_whitespace().map(|f| f.parse::<u64>().unwrap_or(0));
        let (cpu_ns, runq_ns) = (sched.next().unwrap_or(0), sched.next().unwrap_or(0));
        let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
        let io = std::fs::read_to_string(dir.join("io")).unwrap_or_default();
        Some(Self { cpu_ns, runq_ns, ..Self::from_stat_io(&stat, &io) })
    }

    /// The whole process so far, cheap enough to read at every slot: `stat` and `io` of
    /// `/proc/self` count the threads that have exited too. `schedstat` there is the main thread's alone, so CPU, run-queue and block-I/O time are
    /// left at zero for the caller to sum over the threads.
    pub(crate) fn process_now() -> Self {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        let io = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
        Self { blkio: 0, ..Self::from_stat_io(&stat, &io) }
    }

    fn from_stat_io(stat: &str, io: &str) -> Self {
        // The name in parentheses may hold spaces: the numbered fields start after its `)`, the
        // first of them (the state, field 3) at index 0.
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let fields: Vec<u64> = rest.split_whitespace().map(|f| f.parse().unwrap_or(0)).collect();
        let field = |n: usize| fields.get(n - 3).copied().unwrap_or(0);
        let io_field = |name: &str| {
            io.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':')?.trim().parse().ok()).unwrap_or(0)
        };
        Self {
            cpu_ns: 0,
            runq_ns: 0,
            utime: field(14),
            stime: field(15),
            minflt: field(10),
            majflt: field(12),
            blkio: field(42),
            read_bytes: io_field("read_bytes"),
            write_bytes: io_field("write_bytes"),
        }
    }

    fn zip(self, other: Self, f: impl Fn(u64, u64) -> u64) -> Self {
        Self {
            cpu_ns: f(self.cpu_ns, other.cpu_ns),
            runq_ns: f(self.runq_ns, other.runq_ns),
            utime: f(self.utime, other.utime),
            stime: f(self.stime, other.stime),
            minflt: f(self.minflt, other.minflt),
            majflt: f(self.majflt, other.majflt),
            blkio: f(self.blkio, other.blkio),
            read_bytes: f(self.read_bytes, other.read_bytes),
            write_bytes: f(self.write_bytes, other.write_bytes),
        }
    }

    /// What was used between `earlier` and `self` (zero where a counter went down, as when a
    /// thread counted in `earlier` has exited).
    pub(crate) fn since(self, earlier: Self) -> Self {
        self.zip(earlier, u64::saturating_sub)
    }

    /// Both together.
    pub(crate) fn plus(self, other: Self) -> Self {
        self.zip(other, u64::saturating_add)
    }

    /// CPU in milliseconds.
    pub(crate) fn cpu_ms(&self) -> u64 {
        self.cpu_ns / 1_000_000
    }

    /// Run-queue wait in milliseconds.
    pub(crate) fn runq_ms(&self) -> u64 {
        self.runq_ns / 1_000_000
    }

    /// User CPU in milliseconds (clock-tick resolution).
    pub(crate) fn utime_ms(&self) -> f64 {
        ticks_ms(self.utime)
    }

    /// System CPU in milliseconds (clock-tick resolution).
    pub(crate) fn stime_ms(&self) -> f64 {
        ticks_ms(self.stime)
    }

    /// Time blocked on block I/O in milliseconds, or `None` when it reads zero because the
    /// kernel keeps no delay accounting (`kernel.task_delayacct` off), where zero would be a
    /// claim the kernel cannot back.
    pub(crate) fn blkio_ms(&self) -> Option<f64> {
        (self.blkio != 0 || delay_accounting()).then(|| ticks_ms(self.blkio))
    }
}

/// Whether the kernel is counting the time tasks spend blocked (`/proc/sys/kernel/task_delayacct`).
pub(crate) fn delay_accounting() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/task_delayacct").is_ok_and(|s| s.trim() == "1")
}

/// `/proc`'s clock ticks (USER_HZ) in milliseconds.
fn ticks_ms(ticks: u64) -> f64 {
    ticks as f64 * 1e3 / ticks_per_sec() as f64
}

fn ticks_per_sec() -> u64 {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: sysconf only reads a configuration value; it has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        if hz > 0 {
            return hz as u64;
        }
    }
    // USER_HZ on every architecture the kernel reports `/proc` times for in practice.
    100
}

/// What this process's threads have used so far, summed by thread name (a pool's numbered
/// threads together), and the process's own totals. The kernel cuts names to 15 bytes: the
/// writer's I/O thread `aldb-snapshot-io` reads `aldb-snapshot-i`.
#[derive(Default)]
pub(crate) struct ThreadTimes {
    threads: BTreeMap<String, Usage>,
    /// The whole process: faults, ticks and storage bytes from `/proc/self` (exited threads
    /// included); CPU, run-queue and block-I/O time summed over the threads alive now.
    process: Usage,
}

impl ThreadTimes {
    /// Reads every thread's counters and the process's.
    pub(crate) fn now() -> Self {
        let mut out = Self { threads: BTreeMap::new(), process: Usage::process_now() };
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return out };
        for t in tasks.flatten() {
            let (Ok(comm), Some(usage)) = (std::fs::read_to_string(t.path().join("comm")), Usage::of_task(&t.path()))
            else {
                continue;
            };
            let name = comm.trim().trim_end_matches(|c: char| c.is_ascii_digit() || c == '-').to_string();
            let e = out.threads.entry(name).or_default();
            *e = e.plus(usage);
            out.process.cpu_ns += usage.cpu_ns;
            out.process.runq_ns += usage.runq_ns;
            out.process.blkio += usage.blkio;
        }
        out
    }

    /// What the threads named `name` used since `earlier`.
    pub(crate) fn since(&self, earlier: &Self, name: &str) -> Usage {
        let get = |t: &Self| t.threads.get(name).copied().unwrap_or_default();
        get(self).since(get(earlier))
    }

    /// What the whole process used since `earlier`.
    pub(crate) fn process_since(&self, earlier: &Self) -> Usage {
        self.process.since(earlier.process)
    }
}

/// How often a thread was found in each state by [`StateSampler`].
#[derive(Clone, Copy, Default)]
pub(crate) struct StateCounts {
    /// On a core or runnable and waiting for one (`R`).
    pub running: u64,
    /// Asleep by choice (`S`): waiting for work, a lock or another thread.
    pub sleeping: u64,
    /// Asleep in the kernel (`D`): waiting for storage, as on a major fault or an fsync.
    pub blocked: u64,
    /// Any other state, or the thread not found.
    pub other: u64,
}

impl StateCounts {
    fn count(&mut self, state: Option<char>) {
        match state {
            Some('R') => self.running += 1,
            Some('S') => self.sleeping += 1,
            Some('D') => self.blocked += 1,
            _ => self.other += 1,
        }
    }

    /// Samples taken.
    pub(crate) fn samples(&self) -> u64 {
        self.running + self.sleeping + self.blocked + self.other
    }

    /// The share of the samples `n` of them make (0 without samples).
    pub(crate) fn share(&self, n: u64) -> f64 {
        n as f64 / self.samples().max(1) as f64
    }
}

/// Samples the state (`stat` field 3) of the threads of the given names at a fixed period from
/// a thread of its own (`aldb-sampler`), so the time a thread spends off a core can be split
/// into waiting for work and waiting for storage where the kernel keeps no delay accounting. The
/// share of samples in a state, times the window's length, estimates the time in it.
pub(crate) struct StateSampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Vec<StateCounts>>,
}

impl StateSampler {
    /// Starts sampling the first thread named each of `names`, every `period`.
    pub(crate) fn start(names: &[&str], period: std::time::Duration) -> std::io::Result<Self> {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let stopped = stop.clone();
        let thread = std::thread::Builder::new().name("aldb-sampler".into()).spawn(move || {
            let mut counts = vec![StateCounts::default(); names.len()];
            let mut tasks: Vec<Option<std::path::PathBuf>> = vec![None; names.len()];
            while !stopped.load(Ordering::Relaxed) {
                for ((name, task), c) in names.iter().zip(&mut tasks).zip(&mut counts) {
                    if task.is_none() {
                        *task = find_task(name);
                    }
                    let stat = task.as_ref().and_then(|t| std::fs::read_to_string(t.join("stat")).ok());
                    if stat.is_none() {
                        *task = None;
                    }
                    c.count(stat.and_then(|s| s.rsplit_once(')')?.1.trim_start().chars().next()));
                }
                std::thread::sleep(period);
            }
            counts
        })?;
        Ok(Self { stop, thread })
    }

    /// Stops sampling; the counts, one per name, in the order given.
    pub(crate) fn finish(self) -> Vec<StateCounts> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

/// The `/proc` directory of this process's first thread named `name`.
fn find_task(name: &str) -> Option<std::path::PathBuf> {
    std::fs::read_dir("/proc/self/task")
        .ok()?
        .flatten()
        .find(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == name))
        .map(|t| t.path())
}
