//! The fork-aware engine's figures: freeze latency per bank size, fork-switch cost, and the steady
//! chain's throughput with undo recording against a plain commit in the same run.
//!
//! Workload: `aldb-workload`'s AlDBaran stream (90% updates / 5% inserts / 5% deletes, SPL-token
//! sized accounts) over a bulk-built tree of `2^leaves_log2` accounts. Accounts are generated and
//! hashed into updates outside the timed spans, as the geyser adapter hashes them in its callbacks:
//! a freeze is timed from its updates to its root. Prints its configuration, one line per phase,
//! then one JSON line.
//!
//! Each measured freeze of the latency phase also gets a **hash-work anchor**: the compressions
//! the commitment needs to rehash after that bank, counted from the key paths alone (see
//! [`HashWork`]), then the same number of one-block BLAKE2s compressions timed through the
//! engine's own 16-lane kernel on as many threads, right after the freeze. A freeze's time over
//! its anchor's is the figure to compare across runs and machine load: 1.0 would be a commit that
//! does nothing but full SIMD batches of the hashes it cannot avoid.

use std::time::Instant;

use aldb_core::{AccountRef, BulkBuilder, Config, ForkEngine, ForkLimits, Pleiades, Update, hash_accounts};
use aldb_workload::{KeyWindow, SlotAccounts, SlotOps};
use anyhow::{Context, ensure};
use clap::Parser;
use rayon::prelude::*;
use serde_json::{Value, json};

/// Accounts generated and pushed to the bulk builder at a time.
const PREFILL_CHUNK: usize = 65_536;

/// Fork-engine benchmark: freeze latency, fork switches, undo-recording cost.
#[derive(Parser, Debug)]
#[command(name = "fork-bench")]
struct Opts {
    /// The tree holds 2^this accounts before the first bank.
    #[arg(long, default_value_t = 26, value_parser = clap::value_parser!(u32).range(10..=28))]
    leaves_log2: u32,
    /// Worker threads of the engine.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Bucket bits instead of `Config::for_leaves`'s (about two leaves per bucket); one fewer
    /// doubles the leaves per bucket and halves the prefix hashes' memory.
    #[arg(long)]
    bucket_bits: Option<u8>,
    /// Pin each engine worker to its own CPU (`Config::pin_workers`).
    #[arg(long)]
    pin_workers: bool,
    /// Shard bits instead of `Config::for_leaves`'s.
    #[arg(long)]
    shard_bits: Option<u8>,
    /// Seed of the workload.
    #[arg(long, default_value_t = 20_261_122)]
    seed: u64,
    /// Bytes of data per account.
    #[arg(long, default_value_t = 165)]
    data_len: usize,
    /// Bank sizes (updates per bank) whose freeze latency is measured.
    #[arg(long, value_delimiter = ',', default_values_t = [20_000usize, 100_000, 400_000])]
    bank_sizes: Vec<usize>,
    /// Measured freezes per bank size, after the warm-up (p99 is the `ceil(0.99 n)`-th fastest,
    /// so 40 would make it the slowest of all).
    #[arg(long, default_value_t = 200)]
    slots: usize,
    /// Unmeasured freezes before each size's measured ones.
    #[arg(long, default_value_t = 4)]
    warmup: usize,
    /// Appends one CSV line per measured freeze to this file: size, wall ms, process CPU ms, of
    /// which in the kernel, the most a worker waited for a CPU in ms, involuntary switches, minor
    /// faults, the workers' CPU ms, the CPU ms of every other thread on the machine, the busiest
    /// of them and its ms, then the hash-work anchor run right after the freeze: its compressions,
    /// wall ms and CPU ms (empty once forks have run). A freeze slow with its anchor is a slow
    /// machine; a freeze slow alone is the engine. Last, the machine's steal ticks (10 ms each).
    #[arg(long)]
    samples_out: Option<std::path::PathBuf>,
    /// Banks kept unrooted behind the head on the steady chain (a root lags the tip by ~32).
    #[arg(long, default_value_t = 32)]
    root_lag: usize,
    /// Slots each side of a measured fork switch rolls back and re-applies.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 4, 32])]
    switch_depths: Vec<usize>,
    /// Updates per bank in the fork-switch phase.
    #[arg(long, default_value_t = 20_000)]
    switch_updates: usize,
    /// Switches each way per depth.
    #[arg(long, default_value_t = 5)]
    switch_rounds: usize,
    /// Updates per slot in the throughput phase.
    #[arg(long, default_value_t = 400_000)]
    throughput_updates: usize,
    /// Rounds of the throughput phase; each runs one block of plain commits and one of freezes.
    #[arg(long, default_value_t = 12)]
    throughput_rounds: usize,
    /// Timed slots per block of the throughput phase (each block starts with one untimed slot).
    #[arg(long, default_value_t = 2)]
    throughput_block: usize,
    /// Banks a freeze block of the throughput phase keeps unrooted behind the head: each timed
    /// freeze roots one bank whatever the lag, as long as the block is longer than the lag.
    #[arg(long, default_value_t = 1)]
    throughput_lag: usize,
}

/// Makes the stream of banks: each call draws the next slot's ops from the workload.
struct Stream {
    seed: u64,
    data_len: usize,
    window: KeyWindow,
    drawn: u64,
}

impl Stream {
    /// The next bank's updates, hashed on the tree's workers (untimed).
    fn next(&mut self, tree: &Pleiades, n: usize) -> Vec<Update> {
        let ops = SlotOps::draw(self.seed, self.drawn, n, &mut self.window);
        let accounts = SlotAccounts::slot_new(self.seed, self.drawn, &ops, self.data_len);
        self.drawn += 1;
        tree.hash_accounts(&accounts.refs())
    }
}

/// The compressions a commit of a batch needs, counted from key paths and bucket sizes alone, so
/// the count does not depend on how the engine computes the root.
///
/// The tree's prefixes down to `bucket_bits` bits are stored hashes, and a bucket holds its few
/// leaves. After a batch, every bucket holding a changed path is rehashed (`m` leaf hashes and
/// `m - 1` branches for `m` leaves), and every prefix above a rehashed one is recomputed: a
/// branch hash when both its halves are non-empty, a copy otherwise. Kept in step with the tree
/// by [`HashWork::count`] before every commit of the steady chain; a fork switch would break the
/// step, so it is used only in the freeze-latency phase.
struct HashWork {
    bucket_bits: u8,
    /// Leaves in each bucket.
    sizes: Vec<u8>,
}

impl HashWork {
    fn new(tree: &Pleiades) -> anyhow::Result<Self> {
        let bucket_bits = tree.config().bucket_bits;
        let mut sizes = vec![0u8; 1usize << bucket_bits];
        for (path, _) in tree.iter() {
            let s = &mut sizes[Self::bucket(bucket_bits, path)];
            *s = s.checked_add(1).context("a bucket of over 255 leaves")?;
        }
        Ok(Self { bucket_bits, sizes })
    }

    fn bucket(bits: u8, path: &[u8; 32]) -> usize {
        let prefix = u64::from_be_bytes([path[0], path[1], path[2], path[3], path[4], path[5], path[6], path[7]]);
        if bits == 0 { 0 } else { (prefix >> (64 - u32::from(bits))) as usize }
    }

    /// Whether the prefix `p` of `depth` bits holds a leaf (in the sizes after the batch).
    fn occupied(&self, depth: u8, p: usize) -> bool {
        let shift = self.bucket_bits - depth;
        // Uniform keys fill almost every wide prefix from its first buckets on.
        self.sizes[p << shift..(p + 1) << shift].iter().any(|&m| m != 0)
    }

    /// Applies `updates` (later ones win) to the bucket sizes and returns the compressions their
    /// commit needs. Call it before the commit: it reads the tree's state before the batch.
    fn count(&mut self, tree: &Pleiades, updates: &[Update]) -> anyhow::Result<u64> {
        let mut last: Vec<&Update> = updates.iter().collect();
        // Stable: among equal paths the later update stays last.
        last.sort_by_key(|u| u.path);
        let mut dirty = Vec::new();
        for (k, u) in last.iter().enumerate() {
            if last.get(k + 1).is_some_and(|next| next.path == u.path) {
                continue;
            }
            let old = tree.get(&u.path);
            if old == u.value {
                continue;
            }
            let b = Self::bucket(self.bucket_bits, &u.path);
            let s = &mut self.sizes[b];
            match (old, u.value) {
                (None, Some(_)) => *s = s.checked_add(1).context("a bucket of over 255 leaves")?,
                (Some(_), None) => *s = s.checked_sub(1).context("bucket sizes out of step with the tree")?,
                _ => {}
            }
            dirty.push(b);
        }
        dirty.dedup();
        let mut hashes: u64 = dirty.iter().map(|&b| (2 * u64::from(self.sizes[b])).saturating_sub(1)).sum();
        for depth in (0..self.bucket_bits).rev() {
            for p in dirty.iter_mut() {
                *p >>= 1;
            }
            dirty.dedup();
            let both = |p: usize| self.occupied(depth + 1, 2 * p) && self.occupied(depth + 1, 2 * p + 1);
            hashes += dirty.iter().filter(|&&p| both(p)).count() as u64;
        }
        Ok(hashes)
    }
}

/// Times `n` one-block compressions through the engine's kernel: the key paths of `n` closed
/// accounts (a closed account's value is not hashed), on `pool`'s threads in chunks that keep
/// every 16-lane batch full. Returns the hashing's wall and process CPU milliseconds (building
/// its inputs, which faults in fresh pages, is in neither).
fn hash_anchor(pool: &rayon::ThreadPool, keys: &[[u8; 32]], n: usize, clock: &cpu::Clock) -> (f64, f64) {
    const OWNER: [u8; 32] = [0; 32];
    const CHUNK: usize = 1024;
    let accounts: Vec<AccountRef<'_>> = (0..n)
        .map(|i| AccountRef { pubkey: &keys[i % keys.len()], lamports: 0, owner: &OWNER, executable: false, data: &[] })
        .collect();
    let c0 = clock.sample();
    let t = Instant::now();
    pool.install(|| {
        accounts.par_chunks(CHUNK).for_each_init(
            || Vec::with_capacity(CHUNK),
            |out, c| {
                out.clear();
                hash_accounts(c, out);
            },
        );
    });
    let wall = ms(t);
    (wall, cpu::between(&c0, &clock.sample()).cpu_ms)
}

/// CPU time of the process and of each engine worker, and the process's minor faults: what a
/// freeze costs the machine, which machine load changes much less than its wall time.
mod cpu {
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    /// One reading of the counters.
    pub(crate) struct Sample {
        /// CPU time of the whole process (all threads, user and system), ns.
        pub(crate) process_ns: u64,
        /// The system (kernel) part of `process_ns`, ns: page faults, allocation, scheduling.
        pub(crate) system_ns: u64,
        /// Minor page faults of the whole process.
        pub(crate) minflt: u64,
        /// CPU time of each engine worker thread, ns.
        pub(crate) workers: Vec<u64>,
        /// Time each engine worker spent runnable but waiting for a CPU, ns (`schedstat`'s
        /// second field): what another process or thread took from the freeze.
        pub(crate) waits: Vec<u64>,
        /// Involuntary context switches of the whole process.
        pub(crate) nivcsw: u64,
        /// CPU time of every other thread on the machine, by thread id, ns: the kernel's own
        /// threads (memory reclaim, writeback) and other processes, which share the two cores.
        pub(crate) others: BTreeMap<u32, u64>,
        /// Time the hypervisor ran something else on this machine's CPUs, in clock ticks
        /// (`/proc/stat`'s steal, 10 ms each): coarse, but the only view of a host's other guests.
        pub(crate) steal_ticks: u64,
    }

    fn steal_ticks() -> u64 {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        stat.lines().next().and_then(|l| l.split_whitespace().nth(8)).and_then(|x| x.parse().ok()).unwrap_or(0)
    }

    /// The engine's worker threads (named `pleiades-*`), found once.
    pub(crate) struct Clock {
        workers: Vec<PathBuf>,
        own_pid: u32,
    }

    /// Every thread of every other process, with its `schedstat` run time in ns.
    fn others(own_pid: u32) -> BTreeMap<u32, u64> {
        let mut out = BTreeMap::new();
        let Ok(procs) = std::fs::read_dir("/proc") else { return out };
        for p in procs.flatten() {
            let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
            if pid == own_pid {
                continue;
            }
            let Ok(tasks) = std::fs::read_dir(p.path().join("task")) else { continue };
            for t in tasks.flatten() {
                let Some(tid) = t.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
                let s = std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
                if let Some(ns) = s.split_whitespace().next().and_then(|x| x.parse::<u64>().ok()) {
                    out.insert(tid, ns);
                }
            }
        }
        out
    }

    /// The command name of thread `tid`, or its number if it has gone.
    pub(crate) fn comm(tid: u32) -> String {
        std::fs::read_to_string(format!("/proc/{tid}/comm"))
            .map(|c| c.trim().to_string())
            .unwrap_or_else(|_| tid.to_string())
    }

    impl Clock {
        pub(crate) fn new() -> Self {
            let mut workers = Vec::new();
            if let Ok(dir) = std::fs::read_dir("/proc/self/task") {
                for task in dir.flatten() {
                    let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
                    if comm.starts_with("pleiades-") {
                        workers.push(task.path().join("schedstat"));
                    }
                }
            }
            Self { workers, own_pid: std::process::id() }
        }

        pub(crate) fn sample(&self) -> Sample {
            let (process_ns, system_ns, minflt, nivcsw) = usage();
            let (mut workers, mut waits) = (Vec::new(), Vec::new());
            for p in &self.workers {
                let s = std::fs::read_to_string(p).unwrap_or_default();
                let mut fields = s.split_whitespace().map(|x| x.parse::<u64>().unwrap_or(0));
                workers.push(fields.next().unwrap_or(0));
                waits.push(fields.next().unwrap_or(0));
            }
            Sample {
                process_ns,
                system_ns,
                minflt,
                workers,
                waits,
                nivcsw,
                others: others(self.own_pid),
                steal_ticks: steal_ticks(),
            }
        }
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn usage() -> (u64, u64, u64, u64) {
        // SAFETY: getrusage only writes the struct it is given, which is plain data.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: as above; RUSAGE_SELF is always valid.
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
            return (0, 0, 0, 0);
        }
        let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
        (tv(ru.ru_utime) + tv(ru.ru_stime), tv(ru.ru_stime), ru.ru_minflt as u64, ru.ru_nivcsw as u64)
    }

    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    fn usage() -> (u64, u64, u64, u64) {
        (0, 0, 0, 0)
    }

    /// What happened to the process between two readings.
    pub(crate) struct Delta {
        /// Process CPU, ms.
        pub(crate) cpu_ms: f64,
        /// The kernel's part of `cpu_ms`.
        pub(crate) system_ms: f64,
        /// Minor page faults.
        pub(crate) faults: u64,
        /// CPU of each worker, ms.
        pub(crate) workers_ms: Vec<f64>,
        /// The most any one worker waited for a CPU, ms.
        pub(crate) wait_ms: f64,
        /// Involuntary context switches of the process.
        pub(crate) switches: u64,
        /// CPU every other thread on the machine used, ms.
        pub(crate) others_ms: f64,
        /// The other thread that used the most, and its ms.
        pub(crate) top_other: Option<(u32, f64)>,
        /// Clock ticks of steal on the machine.
        pub(crate) steal_ticks: u64,
    }

    pub(crate) fn between(a: &Sample, b: &Sample) -> Delta {
        let ms = |x: u64, y: u64| y.saturating_sub(x) as f64 / 1e6;
        let mut others_ms = 0.0;
        let mut top_other: Option<(u32, f64)> = None;
        for (tid, ns) in &b.others {
            let d = ms(a.others.get(tid).copied().unwrap_or(*ns), *ns);
            others_ms += d;
            if d > top_other.map_or(0.0, |t| t.1) {
                top_other = Some((*tid, d));
            }
        }
        Delta {
            steal_ticks: b.steal_ticks.saturating_sub(a.steal_ticks),
            others_ms,
            top_other,
            cpu_ms: ms(a.process_ns, b.process_ns),
            system_ms: ms(a.system_ns, b.system_ns),
            faults: b.minflt.saturating_sub(a.minflt),
            workers_ms: a.workers.iter().zip(&b.workers).map(|(x, y)| ms(*x, *y)).collect(),
            wait_ms: a.waits.iter().zip(&b.waits).map(|(x, y)| ms(*x, *y)).fold(0.0, f64::max),
            switches: b.nivcsw.saturating_sub(a.nivcsw),
        }
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.trim_start_matches("VmRSS:").trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// One measured freeze.
struct Freeze {
    wall_ms: f64,
    cpu: cpu::Delta,
    /// The hash-work anchor run right after it: compressions, wall ms, CPU ms.
    anchor: Option<(u64, f64, f64)>,
}

/// The engine, the next free slot and the workload stream.
struct Bench {
    engine: ForkEngine,
    slot: u64,
    stream: Stream,
    max_held: usize,
    /// The hash-work count, in step with the tree while only the steady chain has run.
    work: Option<HashWork>,
    /// Threads of the hash-work anchor, as many as the engine's.
    anchor_pool: rayon::ThreadPool,
    /// Distinct keys for the anchor's compressions.
    anchor_keys: Vec<[u8; 32]>,
}

impl Bench {
    fn updates(&mut self, n: usize) -> Vec<Update> {
        self.stream.next(self.engine.tree(), n)
    }

    /// Freezes a new bank of `n` updates on `parent`; returns its slot and the freeze's ms.
    fn freeze(&mut self, parent: u64, n: usize) -> anyhow::Result<(u64, f64)> {
        let updates = self.updates(n);
        self.slot += 1;
        let t = Instant::now();
        self.engine.freeze(self.slot, parent, updates)?;
        let took = ms(t);
        self.max_held = self.max_held.max(self.engine.held_bytes());
        Ok((self.slot, took))
    }

    /// Roots the bank `lag` below the head, if the chain is that long; returns the ms it took.
    fn root_lagging(&mut self, lag: usize) -> anyhow::Result<f64> {
        let t = Instant::now();
        let lagging = self.engine.head_chain().nth(lag).filter(|&s| s != self.engine.base());
        if let Some(s) = lagging {
            self.engine.root(s)?;
        }
        Ok(ms(t))
    }

    /// Steady chain of banks of `n` updates: freeze on the head, root `lag` behind; each measured
    /// freeze is followed by its hash-work anchor.
    fn freeze_latency(&mut self, o: &Opts, n: usize) -> anyhow::Result<Value> {
        let mut freeze = Vec::new();
        let mut root = Vec::new();
        let (mut anchor, mut ratio, mut hashes) = (Vec::new(), Vec::new(), 0u64);
        let (mut cpu, mut cpu_ratio, mut faults, mut imbalance) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        // Per freeze, what tells a slow freeze's own work (more CPU, in user or kernel) from a
        // stolen core (run-queue wait with the CPU unchanged).
        let mut each: Vec<Freeze> = Vec::new();
        let clock = cpu::Clock::new();
        for i in 0..o.warmup + o.slots {
            let updates = self.updates(n);
            let count = match self.work.as_mut() {
                Some(w) => Some(w.count(self.engine.tree(), &updates)?),
                None => None,
            };
            self.slot += 1;
            let c0 = clock.sample();
            let t = Instant::now();
            self.engine.freeze(self.slot, self.engine.head(), updates)?;
            let f = ms(t);
            let c1 = clock.sample();
            self.max_held = self.max_held.max(self.engine.held_bytes());
            let r = self.root_lagging(o.root_lag)?;
            if i >= o.warmup {
                freeze.push(f);
                root.push(r);
                let d = cpu::between(&c0, &c1);
                cpu.push(d.cpu_ms);
                faults.push(d.faults as f64);
                let busiest = d.workers_ms.iter().copied().fold(0.0, f64::max);
                let mean = d.workers_ms.iter().sum::<f64>() / d.workers_ms.len().max(1) as f64;
                if mean > 0.0 {
                    imbalance.push(busiest / mean);
                }
                let mut anchored = None;
                if let Some(h) = count {
                    let (a, ac) = hash_anchor(&self.anchor_pool, &self.anchor_keys, h as usize, &clock);
                    anchor.push(a);
                    ratio.push(f / a);
                    if ac > 0.0 {
                        cpu_ratio.push(d.cpu_ms / ac);
                    }
                    hashes += h;
                    anchored = Some((h, a, ac));
                }
                each.push(Freeze { wall_ms: f, cpu: d, anchor: anchored });
            }
        }
        let held = self.engine.held_bytes();
        if let Some(path) = &o.samples_out {
            use std::io::Write as _;
            let mut out = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
            for Freeze { wall_ms: f, cpu: d, anchor } in &each {
                let workers: f64 = d.workers_ms.iter().sum();
                let (top, top_ms) = d.top_other.map(|(t, m)| (cpu::comm(t), m)).unwrap_or_default();
                let anchor = anchor.map(|(h, a, ac)| format!("{h},{a:.3},{ac:.3}")).unwrap_or_else(|| ",,".into());
                writeln!(
                    out,
                    "{n},{f:.3},{:.3},{:.3},{:.3},{},{},{workers:.3},{:.3},{top},{top_ms:.3},{anchor},{}",
                    d.cpu_ms, d.system_ms, d.wait_ms, d.switches, d.faults, d.others_ms, d.steal_ticks
                )?;
            }
        }
        // The slowest 1% of freezes against the rest.
        each.sort_by(|a, b| b.wall_ms.total_cmp(&a.wall_ms));
        let slow = each.len().div_ceil(100).max(1).min(each.len());
        let mean_of =
            |v: &[Freeze], k: fn(&cpu::Delta) -> f64| v.iter().map(|e| k(&e.cpu)).sum::<f64>() / v.len().max(1) as f64;
        let (tail, rest) = each.split_at(slow);
        let tail_wait = mean_of(tail, |d| d.wait_ms);
        let tail_cpu = mean_of(tail, |d| d.cpu_ms);
        let tail_sys = mean_of(tail, |d| d.system_ms);
        let rest_wait = mean_of(rest, |d| d.wait_ms);
        let rest_cpu = mean_of(rest, |d| d.cpu_ms);
        let rest_sys = mean_of(rest, |d| d.system_ms);
        // The anchor right after a freeze runs on the same threads: slow with it, the machine was slow.
        let anchor_cpu = |v: &[Freeze]| {
            let a: Vec<f64> = v.iter().filter_map(|e| e.anchor.map(|a| a.2)).collect();
            a.iter().sum::<f64>() / a.len().max(1) as f64
        };
        let (tail_anchor, rest_anchor) = (anchor_cpu(tail), anchor_cpu(rest));
        let tail_others = mean_of(tail, |d| d.others_ms);
        let rest_others = mean_of(rest, |d| d.others_ms);
        let f = sorted(freeze);
        let r = sorted(root);
        let a = sorted(anchor);
        let q = sorted(ratio);
        let (cpu, cpu_ratio, faults, imbalance) = (sorted(cpu), sorted(cpu_ratio), sorted(faults), sorted(imbalance));
        let mean = f.iter().sum::<f64>() / f.len().max(1) as f64;
        let per_update = hashes as f64 / (a.len().max(1) * n) as f64;
        println!(
            "freeze B={n:>7}: p50 {:8.2} ms  p99 {:8.2} ms  mean {mean:8.2} ms  max {:8.2} ms  ({:.0} updates/s)  \
             root p50 {:.3} ms  held {} banks, {:.1} MB",
            percentile(&f, 50.0),
            percentile(&f, 99.0),
            f.last().copied().unwrap_or(f64::NAN),
            n as f64 / (mean / 1e3),
            percentile(&r, 50.0),
            self.engine.bank_count(),
            held as f64 / 1e6,
        );
        println!(
            "  hash work: {per_update:.2} compressions per update; anchor p50 {:.2} ms; freeze / anchor p50 {:.2} \
             (p10 {:.2}, p90 {:.2})",
            percentile(&a, 50.0),
            percentile(&q, 50.0),
            percentile(&q, 10.0),
            percentile(&q, 90.0),
        );
        println!(
            "  process CPU per freeze p50 {:.2} ms (p90 {:.2}); CPU / anchor CPU p50 {:.2} (p10 {:.2}, p90 {:.2}); \
             busiest worker / mean p50 {:.2} (p90 {:.2}); minor faults p50 {} max {}",
            percentile(&cpu, 50.0),
            percentile(&cpu, 90.0),
            percentile(&cpu_ratio, 50.0),
            percentile(&cpu_ratio, 10.0),
            percentile(&cpu_ratio, 90.0),
            percentile(&imbalance, 50.0),
            percentile(&imbalance, 90.0),
            percentile(&faults, 50.0),
            faults.last().copied().unwrap_or(f64::NAN),
        );
        println!(
            "  slowest 1% ({slow} freezes): CPU {tail_cpu:.2} ms ({tail_sys:.2} in the kernel), a worker waiting \
             for a CPU {tail_wait:.2} ms, other threads on the machine {tail_others:.2} ms; the rest: CPU \
             {rest_cpu:.2} ms ({rest_sys:.2} in the kernel), waiting {rest_wait:.2} ms, others {rest_others:.2} ms; \
             the hash anchor's CPU right after them {tail_anchor:.2} ms, after the rest {rest_anchor:.2} ms",
        );
        Ok(json!({
            "tail_cpu_ms": round(tail_cpu),
            "tail_wait_ms": round(tail_wait),
            "tail_system_ms": round(tail_sys),
            "tail_others_ms": round(tail_others),
            "tail_anchor_cpu_ms": round(tail_anchor),
            "rest_anchor_cpu_ms": round(rest_anchor),
            "rest_others_ms": round(rest_others),
            "rest_system_ms": round(rest_sys),
            "rest_cpu_ms": round(rest_cpu),
            "rest_wait_ms": round(rest_wait),
            "cpu_p50_ms": round(percentile(&cpu, 50.0)),
            "cpu_ratio_to_anchor_p50": round(percentile(&cpu_ratio, 50.0)),
            "cpu_ratio_to_anchor_p10": round(percentile(&cpu_ratio, 10.0)),
            "cpu_ratio_to_anchor_p90": round(percentile(&cpu_ratio, 90.0)),
            "worker_imbalance_p50": round(percentile(&imbalance, 50.0)),
            "minor_faults_p50": percentile(&faults, 50.0),
            "minor_faults_max": faults.last().copied(),
            "updates": n,
            "freezes": f.len(),
            "p50_ms": round(percentile(&f, 50.0)),
            "p99_ms": round(percentile(&f, 99.0)),
            "mean_ms": round(mean),
            "max_ms": round(f.last().copied().unwrap_or(f64::NAN)),
            "root_p50_ms": round(percentile(&r, 50.0)),
            "banks_held": self.engine.bank_count(),
            "held_bytes": held,
            "hashes_per_update": round(per_update),
            "anchor_p50_ms": round(percentile(&a, 50.0)),
            "ratio_to_anchor_p50": round(percentile(&q, 50.0)),
            "ratio_to_anchor_p10": round(percentile(&q, 10.0)),
            "ratio_to_anchor_p90": round(percentile(&q, 90.0)),
        }))
    }

    /// Two forks of `k` banks from the head; switches between their tips, each rolling back `k`
    /// banks and re-applying `k`, against the cost of freezing the `k` banks of one of them.
    fn switch(&mut self, o: &Opts, k: usize) -> anyhow::Result<Value> {
        let n = o.switch_updates;
        let fork_at = self.engine.head();
        let (mut x, mut freeze_k) = (fork_at, 0.0);
        for _ in 0..k {
            let (s, f) = self.freeze(x, n)?;
            x = s;
            freeze_k += f;
        }
        let mut y = fork_at;
        for _ in 0..k {
            y = self.freeze(y, n)?.0;
        }
        let mut times = Vec::new();
        for _ in 0..o.switch_rounds {
            for target in [x, y] {
                let t = Instant::now();
                self.engine.switch_to(target)?;
                times.push(ms(t));
            }
        }
        self.engine.root(x)?;
        let t = sorted(times);
        let median = percentile(&t, 50.0);
        println!(
            "switch k={k:>2} (B={n}): median {median:8.2} ms  p99 {:8.2} ms  freezing the {k} slots {freeze_k:8.2} ms  \
             ratio {:.2}",
            percentile(&t, 99.0),
            median / freeze_k,
        );
        Ok(json!({
            "slots": k,
            "updates_per_slot": n,
            "switches": t.len(),
            "median_ms": round(median),
            "p99_ms": round(percentile(&t, 99.0)),
            "freeze_slots_ms": round(freeze_k),
            "ratio_to_freezing": round(median / freeze_k),
        }))
    }
}

fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Rounds of one block of plain commits and one block of freezes on the same tree, alternating
/// which goes first. A block's first slot is a warm-up (the tree just changed hands); in a freeze
/// block the bank `throughput_lag` behind the head is rooted right after each freeze, inside the
/// timed span, so each timed freeze also pays for dropping one bank's lists. Returns updates/s of
/// each over all timed slots, and the undo cost of every round (its two blocks run back to back),
/// whose median is the figure to read: the host's speed drifts over a run, but less within a round.
fn throughput(b: Bench, o: &Opts) -> anyhow::Result<(Value, Bench)> {
    let n = o.throughput_updates;
    let Bench { mut engine, mut slot, mut stream, mut max_held, work, anchor_pool, anchor_keys } = b;
    let (mut commit_secs, mut freeze_secs) = (0.0, 0.0);
    let (mut commit_slots, mut freeze_slots) = (0usize, 0usize);
    let mut rounds = Vec::new();
    let limits = engine.limits();
    for round in 0..o.throughput_rounds {
        let (mut commit_round, mut freeze_round) = (0.0, 0.0);
        for plain in [round % 2 == 0, round % 2 != 0] {
            if plain {
                let head = engine.head();
                engine.root(head)?;
                let mut tree = engine.into_tree();
                for i in 0..=o.throughput_block {
                    let updates = stream.next(&tree, n);
                    slot += 1;
                    let t = Instant::now();
                    tree.commit(updates);
                    if i > 0 {
                        commit_round += t.elapsed().as_secs_f64();
                        commit_slots += 1;
                    }
                }
                engine = ForkEngine::new(tree, slot, limits);
            } else {
                for i in 0..=o.throughput_block {
                    let updates = stream.next(engine.tree(), n);
                    slot += 1;
                    let t = Instant::now();
                    engine.freeze(slot, engine.head(), updates)?;
                    let lagging = engine.head_chain().nth(o.throughput_lag).filter(|&s| s != engine.base());
                    if let Some(s) = lagging {
                        engine.root(s)?;
                    }
                    if i > 0 {
                        freeze_round += t.elapsed().as_secs_f64();
                        freeze_slots += 1;
                    }
                    max_held = max_held.max(engine.held_bytes());
                }
            }
        }
        commit_secs += commit_round;
        freeze_secs += freeze_round;
        // Both blocks time the same number of slots, so the time ratio is the rate ratio.
        rounds.push(100.0 * (1.0 - commit_round / freeze_round));
    }
    let commit_rate = (commit_slots * n) as f64 / commit_secs;
    let freeze_rate = (freeze_slots * n) as f64 / freeze_secs;
    let cost = 100.0 * (1.0 - freeze_rate / commit_rate);
    let r = sorted(rounds.clone());
    let median = percentile(&r, 50.0);
    println!(
        "throughput B={n}: commit {commit_rate:.0} updates/s ({commit_slots} slots)  freeze+root {freeze_rate:.0} \
         updates/s ({freeze_slots} slots)  undo recording costs {cost:.1}% overall, median of {} rounds {median:.1}% \
         (rounds {:.1} to {:.1})",
        r.len(),
        r.first().copied().unwrap_or(f64::NAN),
        r.last().copied().unwrap_or(f64::NAN),
    );
    let v = json!({
        "updates_per_slot": n,
        "commit_updates_per_sec": commit_rate.round(),
        "freeze_updates_per_sec": freeze_rate.round(),
        "undo_cost_pct": round(cost),
        "undo_cost_pct_median": round(median),
        "undo_cost_pct_rounds": rounds.iter().map(|&x| round(x)).collect::<Vec<_>>(),
        "root_lag": o.throughput_lag,
        "commit_slots": commit_slots,
        "freeze_slots": freeze_slots,
    });
    Ok((v, Bench { engine, slot, stream, max_held, work, anchor_pool, anchor_keys }))
}

fn build(o: &Opts, config: Config) -> anyhow::Result<(Pleiades, f64)> {
    let n = 1u64 << o.leaves_log2;
    let mut builder = BulkBuilder::new(config)?;
    let started = Instant::now();
    let mut first = 0u64;
    while first < n {
        let count = (n - first).min(PREFILL_CHUNK as u64) as usize;
        let batch = SlotAccounts::prefill(o.seed, first, count, o.data_len);
        builder.push_accounts(&batch.refs(), (0, 0));
        first += count as u64;
    }
    let tree = builder.finish();
    ensure!(tree.len() as u64 == n, "bulk build holds {} leaves, expected {n}", tree.len());
    Ok((tree, started.elapsed().as_secs_f64()))
}

fn main() -> anyhow::Result<()> {
    let o = Opts::parse();
    ensure!(
        o.threads > 0 && o.slots > 0 && o.switch_rounds > 0,
        "--threads, --slots and --switch-rounds must be positive"
    );
    let auto = Config::for_leaves(1u64 << o.leaves_log2, o.threads);
    let config =
        Config::new(auto.threads, o.shard_bits.unwrap_or(auto.shard_bits), o.bucket_bits.unwrap_or(auto.bucket_bits))?
            .with_pinned_workers(o.pin_workers);
    println!(
        "fork-bench: leaves=2^{} threads={} pin_workers={} shard_bits={} bucket_bits={} seed={} data_len={} bank_sizes={:?} slots={} \
         warmup={} root_lag={} switch_depths={:?} switch_updates={} switch_rounds={} throughput_updates={} \
         throughput_rounds={} throughput_block={} throughput_lag={}",
        o.leaves_log2,
        config.threads,
        config.pin_workers,
        config.shard_bits,
        config.bucket_bits,
        o.seed,
        o.data_len,
        o.bank_sizes,
        o.slots,
        o.warmup,
        o.root_lag,
        o.switch_depths,
        o.switch_updates,
        o.switch_rounds,
        o.throughput_updates,
        o.throughput_rounds,
        o.throughput_block,
        o.throughput_lag,
    );
    let (tree, build_secs) = build(&o, config).context("building the base tree")?;
    println!("prefill: {} accounts in {build_secs:.1} s (generation included)", tree.len());
    let stream =
        Stream { seed: o.seed, data_len: o.data_len, window: KeyWindow::prefilled(1u64 << o.leaves_log2), drawn: 0 };
    let limits = ForkLimits::new(usize::MAX, usize::MAX);
    let t = Instant::now();
    let work = HashWork::new(&tree)?;
    println!("hash-work count: bucket sizes of {} buckets in {:.1} s", work.sizes.len(), t.elapsed().as_secs_f64());
    let anchor_pool = rayon::ThreadPoolBuilder::new().num_threads(config.threads).build()?;
    // Distinct keys, so the anchor hashes as many different messages as a commit does.
    let anchor_keys = (0..1u64 << 16).map(|i| aldb_workload::pubkey(o.seed ^ 0xa5a5, i)).collect();
    let mut b = Bench {
        engine: ForkEngine::new(tree, 0, limits),
        slot: 0,
        stream,
        max_held: 0,
        work: Some(work),
        anchor_pool,
        anchor_keys,
    };

    let mut freeze = Vec::new();
    for &n in &o.bank_sizes {
        freeze.push(b.freeze_latency(&o, n)?);
    }

    // Fork switches move the tree off the steady chain the count follows.
    b.work = None;
    let mut switch = Vec::new();
    for &k in &o.switch_depths {
        switch.push(b.switch(&o, k)?);
    }
    // The throughput phase rebuilds the engine around the tree, so its counters start over.
    let stats = b.engine.stats().snapshot();
    let (throughput, b) = throughput(b, &o)?;
    let rss = rss_bytes();
    println!(
        "engine (before the throughput phase): {} freezes, {} switches ({} slots rolled back, {} re-applied), max held {:.1} MB, rss {:.2} GB",
        stats.freezes,
        stats.switches,
        stats.slots_rolled_back,
        stats.slots_reapplied,
        b.max_held as f64 / 1e6,
        rss.map_or(f64::NAN, |r| r as f64 / 1e9),
    );
    let out = json!({
        "leaves_log2": o.leaves_log2,
        "threads": config.threads,
        "pin_workers": config.pin_workers,
        "shard_bits": config.shard_bits,
        "bucket_bits": config.bucket_bits,
        "seed": o.seed,
        "root_lag": o.root_lag,
        "freeze": freeze,
        "switch": switch,
        "throughput": throughput,
        "max_held_bytes": b.max_held,
        "freezes": stats.freezes,
        "switches": stats.switches,
        "slots_rolled_back": stats.slots_rolled_back,
        "slots_reapplied": stats.slots_reapplied,
        "rss_bytes": rss,
        "final_root": b.engine.tree().root().iter().map(|x| format!("{x:02x}")).collect::<String>(),
    });
    println!("{out}");
    Ok(())
}
