//! The fork-aware engine's figures: freeze latency per bank size, fork-switch cost, and the steady
//! chain's throughput with undo recording against a plain commit in the same run.
//!
//! Workload: `aldb-workload`'s AlDBaran stream (90% updates / 5% inserts / 5% deletes, SPL-token
//! sized accounts) over a bulk-built tree of `2^leaves_log2` accounts. Accounts are generated and
//! hashed into updates outside the timed spans, as the geyser adapter hashes them in its callbacks:
//! a freeze is timed from its updates to its root. Prints its configuration, one line per phase,
//! then one JSON line.

use std::time::Instant;

use aldb_core::{BulkBuilder, Config, ForkEngine, ForkLimits, Pleiades, Update};
use aldb_workload::{KeyWindow, SlotAccounts, SlotOps};
use anyhow::{Context, ensure};
use clap::Parser;
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
    /// Seed of the workload.
    #[arg(long, default_value_t = 20_261_122)]
    seed: u64,
    /// Bytes of data per account.
    #[arg(long, default_value_t = 165)]
    data_len: usize,
    /// Bank sizes (updates per bank) whose freeze latency is measured.
    #[arg(long, value_delimiter = ',', default_values_t = [20_000usize, 100_000, 400_000])]
    bank_sizes: Vec<usize>,
    /// Measured freezes per bank size, after the warm-up.
    #[arg(long, default_value_t = 40)]
    slots: usize,
    /// Unmeasured freezes before each size's measured ones.
    #[arg(long, default_value_t = 4)]
    warmup: usize,
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
    #[arg(long, default_value_t = 3)]
    throughput_rounds: usize,
    /// Slots per block of the throughput phase.
    #[arg(long, default_value_t = 8)]
    throughput_block: usize,
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

/// The engine, the next free slot and the workload stream.
struct Bench {
    engine: ForkEngine,
    slot: u64,
    stream: Stream,
    max_held: usize,
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

    /// Steady chain of banks of `n` updates: freeze on the head, root `lag` behind.
    fn freeze_latency(&mut self, o: &Opts, n: usize) -> anyhow::Result<Value> {
        let mut freeze = Vec::new();
        let mut root = Vec::new();
        for i in 0..o.warmup + o.slots {
            let (_, f) = self.freeze(self.engine.head(), n)?;
            let r = self.root_lagging(o.root_lag)?;
            if i >= o.warmup {
                freeze.push(f);
                root.push(r);
            }
        }
        let held = self.engine.held_bytes();
        let f = sorted(freeze);
        let r = sorted(root);
        let mean = f.iter().sum::<f64>() / f.len().max(1) as f64;
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
        Ok(json!({
            "updates": n,
            "freezes": f.len(),
            "p50_ms": round(percentile(&f, 50.0)),
            "p99_ms": round(percentile(&f, 99.0)),
            "mean_ms": round(mean),
            "max_ms": round(f.last().copied().unwrap_or(f64::NAN)),
            "root_p50_ms": round(percentile(&r, 50.0)),
            "banks_held": self.engine.bank_count(),
            "held_bytes": held,
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

/// Blocks of plain commits and of freezes (rooting `root_lag` behind) on the same tree,
/// alternating which goes first; returns updates/s of each.
fn throughput(b: Bench, o: &Opts) -> anyhow::Result<(Value, Bench)> {
    let n = o.throughput_updates;
    let Bench { mut engine, mut slot, mut stream, mut max_held } = b;
    let (mut commit_secs, mut freeze_secs) = (0.0, 0.0);
    let (mut commit_slots, mut freeze_slots) = (0usize, 0usize);
    let limits = engine.limits();
    for round in 0..o.throughput_rounds {
        for plain in [round % 2 == 0, round % 2 != 0] {
            if plain {
                let head = engine.head();
                engine.root(head)?;
                let mut tree = engine.into_tree();
                for _ in 0..o.throughput_block {
                    let updates = stream.next(&tree, n);
                    slot += 1;
                    let t = Instant::now();
                    tree.commit(updates);
                    commit_secs += t.elapsed().as_secs_f64();
                    commit_slots += 1;
                }
                engine = ForkEngine::new(tree, slot, limits);
            } else {
                for _ in 0..o.throughput_block {
                    let updates = stream.next(engine.tree(), n);
                    slot += 1;
                    let t = Instant::now();
                    engine.freeze(slot, engine.head(), updates)?;
                    let lagging = engine.head_chain().nth(o.root_lag).filter(|&s| s != engine.base());
                    if let Some(s) = lagging {
                        engine.root(s)?;
                    }
                    freeze_secs += t.elapsed().as_secs_f64();
                    freeze_slots += 1;
                    max_held = max_held.max(engine.held_bytes());
                }
            }
        }
    }
    let commit_rate = (commit_slots * n) as f64 / commit_secs;
    let freeze_rate = (freeze_slots * n) as f64 / freeze_secs;
    let cost = 100.0 * (1.0 - freeze_rate / commit_rate);
    println!(
        "throughput B={n}: commit {commit_rate:.0} updates/s ({commit_slots} slots)  freeze+root {freeze_rate:.0} \
         updates/s ({freeze_slots} slots)  undo recording costs {cost:.1}%"
    );
    let v = json!({
        "updates_per_slot": n,
        "commit_updates_per_sec": commit_rate.round(),
        "freeze_updates_per_sec": freeze_rate.round(),
        "undo_cost_pct": round(cost),
        "commit_slots": commit_slots,
        "freeze_slots": freeze_slots,
    });
    Ok((v, Bench { engine, slot, stream, max_held }))
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
    let config = Config::for_leaves(1u64 << o.leaves_log2, o.threads);
    println!(
        "fork-bench: leaves=2^{} threads={} shard_bits={} bucket_bits={} seed={} data_len={} bank_sizes={:?} slots={} \
         warmup={} root_lag={} switch_depths={:?} switch_updates={} switch_rounds={} throughput_updates={} \
         throughput_rounds={} throughput_block={}",
        o.leaves_log2,
        config.threads,
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
    );
    let (tree, build_secs) = build(&o, config).context("building the base tree")?;
    println!("prefill: {} accounts in {build_secs:.1} s (generation included)", tree.len());
    let stream =
        Stream { seed: o.seed, data_len: o.data_len, window: KeyWindow::prefilled(1u64 << o.leaves_log2), drawn: 0 };
    let limits = ForkLimits::new(usize::MAX, usize::MAX);
    let mut b = Bench { engine: ForkEngine::new(tree, 0, limits), slot: 0, stream, max_held: 0 };

    let mut freeze = Vec::new();
    for &n in &o.bank_sizes {
        freeze.push(b.freeze_latency(&o, n)?);
    }
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
