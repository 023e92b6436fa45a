//! Snapshot cost: the AlDBaran workload through Pleiades with the snapshot writer off, then on,
//! then off again, in one run. Prints readable lines, then one JSON line.
//!
//! The two off phases bracket the on phase, with the same slot size, and the off rate is taken
//! over both, so a host that drifts during the run (this one moves by tens of percent) weighs on
//! both sides of the ratio alike; the two off rates are printed so the drift is visible. Two
//! layouts (`--layout`):
//!
//! - `sequential` (the default): one tree runs the three phases one after the other, on
//!   consecutive slots. The accounts of the prefill and of the first off phase go to a startup
//!   spill on disk as they are generated (untimed), and the full snapshot the writer starts from
//!   is written from the spill at the last slot of the first off phase, as the plugin's streaming
//!   startup writes its own, so the run holds one tree and never the whole state's accounts in
//!   memory: it fits 2^26 leaves on a 24 GiB host.
//! - `twin`: two identical trees are built, one for the off phases and one for the on phase; the
//!   first off phase commits exactly the slots the on phase then commits, the second the slots
//!   that follow, and the full snapshot is written from an in-memory batch of every account. Two
//!   trees and that batch take about three times the memory of `sequential`.
//!
//! The engine runs on half the cores by default, as in the plugin, so the writer has cores of its
//! own, as in the AlDBaran paper's deployment; `--threads` gives the engine more (both phases
//! alike), and then the writer's CPU comes out of the engine's.
//!
//! Timed with snapshots on: hashing, copying the slot's accounts for the writer, the commit with
//! change capture, the hand-off (including any wait on a full queue), and the final flush, so the
//! figure is the rate the writer sustains end to end, fsyncs included.
//!
//! What bounds each side is read from the kernel's counters (`/proc/self`) over each phase's
//! timed slots: for the engine's pool and the writer's two threads, user and system CPU, minor
//! and major page faults, run-queue wait and bytes read from storage; for the process, the same
//! and the bytes read from and written to storage (each slot's line too). Time blocked on storage
//! comes from delay accounting where the kernel keeps it ("n/a" otherwise); the writer's threads'
//! states are also sampled every few milliseconds in the on phase, which splits their time off
//! CPU into asleep (no work) and blocked in the kernel (major faults, fsync) on any kernel.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Instant;

use aldb_core::{BulkBuilder, ChangeSet, Config, Pleiades};
use aldb_snapshot::{
    AccountBatch, DEFAULT_SPILL_BITS, SlotInput, SnapshotWriter, StartupSpill, WriterConfig, WriterStats,
};
use aldb_workload::{KeyWindow, SlotAccounts, SlotOps};
use serde_json::json;

#[path = "../mem.rs"]
#[allow(dead_code)]
mod mem;
#[path = "../proc_usage.rs"]
mod proc_usage;

use proc_usage::{StateCounts, StateSampler, ThreadTimes, Usage};

/// The writer's threads as the kernel names them (cut to 15 bytes): its own and its I/O thread.
const WRITER_THREADS: [&str; 2] = ["aldb-snapshot", "aldb-snapshot-i"];
/// How often the writer's threads' states are sampled in the snapshots-on phase: often enough
/// for thousands of samples over a phase, rarely enough that the sampler's CPU stays near 1%.
const STATE_PERIOD: std::time::Duration = std::time::Duration::from_millis(2);

/// Snapshot cost: the AlDBaran workload with the snapshot writer off, on, then off again.
#[derive(clap::Parser)]
#[command(name = "snapshot-bench")]
struct Opts {
    /// Prefilled accounts = 2^N (at most 28).
    #[arg(long, value_name = "N", default_value_t = 20, value_parser = clap::value_parser!(u32).range(..=28))]
    leaves_log2: u32,
    /// Account updates per slot.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    slot_updates: usize,
    /// Timed slots per phase (at least 2).
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u64).range(2..))]
    slots: u64,
    /// Untimed slots per phase.
    #[arg(long, value_name = "N", default_value_t = 2)]
    warmup: u64,
    /// Engine threads [default: half the cores, as the plugin].
    #[arg(long, value_name = "N", default_value_t = half_the_cores(), hide_default_value = true)]
    threads: usize,
    /// Account data bytes.
    #[arg(long, value_name = "N", default_value_t = 165)]
    data_len: usize,
    /// Seed of every random stream.
    #[arg(long, value_name = "S", default_value_t = 20240611)]
    seed: u64,
    /// Slots per refresh cycle of the writer.
    #[arg(long, value_name = "N", default_value_t = 512)]
    refresh_slots: u64,
    /// Snapshot directory [default: a temp dir].
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// `sequential` (one tree, the phases one after the other) or `twin` (two identical trees,
    /// the on phase committing the first off phase's slots again).
    #[arg(long, value_name = "LAYOUT", default_value = "sequential", value_parser = ["sequential", "twin"])]
    layout: String,
}

/// The plugin's default (half the cores, at least one): the engine's workers, with the writer and
/// the validator on the rest.
fn half_the_cores() -> usize {
    (std::thread::available_parallelism().map_or(1, |n| n.get()) / 2).max(1)
}

/// What a snapshots-off phase measured over its timed slots.
struct OffPhase {
    secs: f64,
    updates: u64,
    /// What the engine's pool used.
    engine: Usage,
    /// What the whole process used.
    process: Usage,
}

impl OffPhase {
    fn rate(&self) -> f64 {
        self.updates as f64 / self.secs
    }
}

/// Commits `batches` (slots from `first_slot` on) with snapshots off; the first `o.warmup` are
/// not timed.
fn off_phase(o: &Opts, tree: &mut Pleiades, batches: &[AccountBatch], first_slot: u64) -> OffPhase {
    let fresh = || OffPhase { secs: 0.0, updates: 0, engine: Usage::default(), process: Usage::default() };
    let mut m = fresh();
    let mut times = ThreadTimes::now();
    let mut io = SlotIo::start();
    for (slot, batch) in (first_slot..).zip(batches) {
        if slot == first_slot + o.warmup {
            m = fresh();
            times = ThreadTimes::now();
        }
        let t = Instant::now();
        tree.commit_accounts(&batch.refs());
        m.secs += t.elapsed().as_secs_f64();
        m.updates += o.slot_updates as u64;
        println!("slot {slot:>3} (snapshots off): {:8.2} ms{}", t.elapsed().as_secs_f64() * 1e3, io.next());
    }
    let now = ThreadTimes::now();
    (m.engine, m.process) = (now.since(&times, "pleiades"), now.process_since(&times));
    m
}

/// The process's storage traffic and page faults slot by slot, each reading taken where the last
/// left off, so the writer's work between two slots' hand-offs is counted in one of them.
struct SlotIo(Usage);

impl SlotIo {
    fn start() -> Self {
        Self(Usage::process_now())
    }

    /// What the process did since the last reading, as a suffix for the slot's line.
    fn next(&mut self) -> String {
        let now = Usage::process_now();
        let d = now.since(self.0);
        self.0 = now;
        format!(
            "  (read {:.1} MiB, wrote {:.1} MiB, faults {} major, {} minor)",
            mib(d.read_bytes),
            mib(d.write_bytes),
            d.majflt,
            d.minflt
        )
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

/// The accounts of `slots`, in order, each gathered into a batch whose key paths the engine
/// fills in when it hashes them.
fn generate(o: &Opts, slots: std::ops::RangeInclusive<u64>, window: &mut KeyWindow) -> Vec<AccountBatch> {
    slots
        .map(|slot| {
            let ops = SlotOps::draw(o.seed, slot, o.slot_updates, window);
            let accounts = SlotAccounts::slot_new(o.seed, slot, &ops, o.data_len);
            let mut batch = AccountBatch::with_capacity(accounts.len(), accounts.len() * o.data_len);
            for a in &accounts.refs() {
                batch.push([0; 32], a);
            }
            batch
        })
        .collect()
}

/// The writer's counters that the on phase reads before and after its timed slots.
fn counters(s: &WriterStats) -> [u64; 6] {
    [&s.bytes, &s.account_bytes, &s.refresh_bytes, &s.full_waits, &s.wait_nanos, &s.write_nanos]
        .map(|c| c.load(Ordering::Relaxed))
}

/// Writes the full snapshot the on phase starts from, at `slot` (untimed): the whole tree, with
/// `accounts` (a batch, or a spill read back as it is written). Returns the writer's counters
/// after it.
fn write_full(writer: &SnapshotWriter, tree: &Pleiades, slot: u64, accounts: AccountBatch) -> anyhow::Result<[u64; 6]> {
    let mut changes = ChangeSet::new(aldb_snapshot::CAPTURE_OPTIONS);
    tree.capture_all(&mut changes);
    let t = Instant::now();
    writer.submit(SlotInput { slot, parent: None, root: tree.root(), changes, accounts, full: true })?;
    writer.flush()?;
    let base = counters(writer.stats());
    println!("full snapshot at slot {slot}: {} bytes in {:.2} s (untimed)", base[0], t.elapsed().as_secs_f64());
    Ok(base)
}

/// What the snapshots-on phase measured over its timed slots.
struct OnPhase {
    secs: f64,
    updates: u64,
    /// Wall ms of the hand-off's parts: hash, key paths into the batch, commit with capture, submit.
    hand_off: [f64; 4],
    /// What the engine's pool used.
    engine: Usage,
    /// What the writer's thread used.
    writer: Usage,
    /// What the writer's I/O thread used.
    writer_io: Usage,
    /// What the whole process used.
    process: Usage,
    /// Seconds from the first timed slot to the end of the final flush, gaps between slots
    /// included: the window the thread figures cover.
    window_secs: f64,
    /// The writer's thread and its I/O thread, sampled every [`STATE_PERIOD`] over the window.
    states: [StateCounts; 2],
    /// Writer counters over the timed slots: bytes, account bytes, refresh bytes, full-queue
    /// waits, wait ns, write ns.
    counters: [u64; 6],
}

/// Commits `batches` (slots from `first_slot` on, each the child of the one before) with the
/// snapshot writer on, then flushes and shuts the writer down. The first `o.warmup` slots are
/// written and flushed before the clock starts (the writer's first deltas fault in its working
/// memory), so the figure is steady state.
fn on_phase(
    o: &Opts,
    tree: &mut Pleiades,
    writer: SnapshotWriter,
    batches: Vec<AccountBatch>,
    first_slot: u64,
    full_counters: [u64; 6],
) -> anyhow::Result<OnPhase> {
    let fresh = || OnPhase {
        secs: 0.0,
        updates: 0,
        hand_off: [0.0; 4],
        engine: Usage::default(),
        writer: Usage::default(),
        writer_io: Usage::default(),
        process: Usage::default(),
        window_secs: 0.0,
        states: [StateCounts::default(); 2],
        counters: [0; 6],
    };
    let mut m = fresh();
    let mut base = full_counters;
    let mut times_on = ThreadTimes::now();
    let (mut window, mut sampler) = (Instant::now(), None);
    let mut io = SlotIo::start();
    // Each phase's accounts are generated before its clock starts, so the timed slots run back
    // to back and the writer gets no untimed pause to catch up in. They are gathered straight
    // into the batches the writer takes, as a producer that owns a slot's accounts would.
    let mut spares = Vec::with_capacity(batches.len());
    for (slot, mut batch) in (first_slot..).zip(batches) {
        if slot == first_slot + o.warmup {
            writer.flush()?;
            base = counters(writer.stats());
            times_on = ThreadTimes::now();
            window = Instant::now();
            sampler = Some(StateSampler::start(&WRITER_THREADS, STATE_PERIOD)?);
            m = fresh();
        }
        let t = Instant::now();
        let (mut changes, spare) = writer.spare_buffers();
        // A producer would refill the spare batch; here the accounts are already generated, so
        // it is kept and freed after the clock stops rather than inside the timed hand-off.
        spares.push(spare);
        let updates = tree.hash_accounts(&batch.refs());
        let t_hashed = Instant::now();
        batch.set_paths(&updates)?;
        let t_copied = Instant::now();
        let root = tree.commit_capture(updates, &mut changes);
        let t_committed = Instant::now();
        writer.submit(SlotInput { slot, parent: Some(slot - 1), root, changes, accounts: batch, full: false })?;
        for (part, (a, b)) in
            [(t, t_hashed), (t_hashed, t_copied), (t_copied, t_committed), (t_committed, Instant::now())]
                .into_iter()
                .enumerate()
        {
            m.hand_off[part] += (b - a).as_secs_f64() * 1e3;
        }
        m.secs += t.elapsed().as_secs_f64();
        m.updates += o.slot_updates as u64;
        println!("slot {slot:>3} (snapshots on):  {:8.2} ms to hand off{}", t.elapsed().as_secs_f64() * 1e3, io.next());
    }
    let t = Instant::now();
    writer.flush()?;
    m.secs += t.elapsed().as_secs_f64();
    drop(spares);
    let times = ThreadTimes::now();
    m.window_secs = window.elapsed().as_secs_f64();
    if let Some([main, io]) = sampler.map(|s| s.finish()).as_deref() {
        m.states = [*main, *io];
    }
    let [main, io] = WRITER_THREADS;
    [m.engine, m.writer, m.writer_io] = ["pleiades", main, io].map(|n| times.since(&times_on, n));
    m.process = times.process_since(&times_on);
    let now = counters(writer.stats());
    m.counters = std::array::from_fn(|i| now[i] - base[i]);
    writer.shutdown()?;
    Ok(m)
}

/// What a run measured, whatever its layout.
struct Run {
    leaves: usize,
    off_before: OffPhase,
    on: OnPhase,
    off_after: OffPhase,
    full_bytes: u64,
}

/// Two identical trees: the off phases on one, the on phase on the other, over the first off
/// phase's slots; the full snapshot at slot 0 from an in-memory batch of every account.
fn run_twin(o: &Opts, config: Config, dir: &std::path::Path) -> anyhow::Result<Run> {
    let n = 1u64 << o.leaves_log2;
    let mut builder = BulkBuilder::new(config)?;
    let mut off_builder = BulkBuilder::new(config)?;
    let mut full_accounts = AccountBatch::with_capacity(n as usize, n as usize * o.data_len);
    let mut first = 0;
    while first < n {
        let count = (n - first).min(65_536) as usize;
        let chunk = SlotAccounts::prefill(o.seed, first, count, o.data_len);
        let refs = chunk.refs();
        builder.push_accounts(&refs, (0, 0));
        off_builder.push_accounts(&refs, (0, 0));
        for r in &refs {
            full_accounts.push(aldb_verify::spec::key_path(r.pubkey), r);
        }
        first += count as u64;
    }
    let mut tree = builder.finish();
    let mut off_tree = off_builder.finish();
    let phase = o.warmup + o.slots;
    let mut window = KeyWindow::prefilled(n);
    let on_batches = generate(o, 1..=phase, &mut window);
    // Phase 1: snapshots off, on the twin tree, over the very slots phase 2 commits.
    let off_before = off_phase(o, &mut off_tree, &on_batches, 1);
    let writer = SnapshotWriter::start(
        WriterConfig { refresh_slots: o.refresh_slots, keep_slots: 4 * o.slots, ..WriterConfig::new(dir) },
        None,
    )?;
    let full = write_full(&writer, &tree, 0, full_accounts)?;
    // Phase 2: snapshots on.
    let on = on_phase(o, &mut tree, writer, on_batches, 1, full)?;
    // Phase 3: snapshots off again, on the twin tree, over the slots that follow.
    let after_batches = generate(o, phase + 1..=2 * phase, &mut window);
    let off_after = off_phase(o, &mut off_tree, &after_batches, phase + 1);
    Ok(Run { leaves: tree.len(), off_before, on, off_after, full_bytes: full[0] })
}

/// One tree, the phases in sequence: off over slots `1..=P`, on over `P+1..=2P` from a full
/// snapshot at slot `P` written from the startup spill, off over `2P+1..=3P`.
fn run_sequential(o: &Opts, config: Config, dir: &std::path::Path) -> anyhow::Result<Run> {
    let n = 1u64 << o.leaves_log2;
    let spill = StartupSpill::create(dir, DEFAULT_SPILL_BITS)?;
    let mut builder = BulkBuilder::new(config)?;
    let mut first = 0;
    while first < n {
        let count = (n - first).min(65_536) as usize;
        let chunk = SlotAccounts::prefill(o.seed, first, count, o.data_len);
        let refs = chunk.refs();
        builder.push_accounts(&refs, (0, 0));
        for (i, r) in (first..).zip(&refs) {
            spill.append(&aldb_verify::spec::key_path(r.pubkey), (0, i), r)?;
        }
        first += count as u64;
    }
    let mut tree = builder.finish();
    let phase = o.warmup + o.slots;
    let mut window = KeyWindow::prefilled(n);
    // Phase 1: snapshots off. Its accounts then go to the spill (untimed), after the prefill's,
    // so the spill's winners are the state at slot `phase`.
    let before_batches = generate(o, 1..=phase, &mut window);
    let off_before = off_phase(o, &mut tree, &before_batches, 1);
    for (slot, batch) in (1..).zip(&before_batches) {
        for (i, r) in (0..).zip(&batch.refs()) {
            spill.append(&aldb_verify::spec::key_path(r.pubkey), (slot, i), r)?;
        }
    }
    drop(before_batches);
    let writer = SnapshotWriter::start(
        WriterConfig { refresh_slots: o.refresh_slots, keep_slots: 4 * o.slots, ..WriterConfig::new(dir) },
        None,
    )?;
    let spilled = spill.finish()?;
    println!("startup spill: {} accounts, {} bytes (untimed)", spilled.accounts(), spilled.bytes());
    let full = write_full(&writer, &tree, phase, AccountBatch::from_spill(spilled))?;
    // Phase 2: snapshots on, over the slots that follow.
    let on_batches = generate(o, phase + 1..=2 * phase, &mut window);
    let on = on_phase(o, &mut tree, writer, on_batches, phase + 1, full)?;
    // Phase 3: snapshots off again, on the same tree, over the slots after those.
    let after_batches = generate(o, 2 * phase + 1..=3 * phase, &mut window);
    let off_after = off_phase(o, &mut tree, &after_batches, 2 * phase + 1);
    Ok(Run { leaves: tree.len(), off_before, on, off_after, full_bytes: full[0] })
}

fn main() -> anyhow::Result<()> {
    let o = <Opts as clap::Parser>::parse();
    let tmp;
    let dir = match &o.dir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    let n = 1u64 << o.leaves_log2;
    let config = Config::for_leaves(n, o.threads);
    println!(
        "snapshot-bench: layout={} leaves=2^{} slot_updates={} slots per phase={} (+{} warm-up) threads={} data_len={} \
         seed={} refresh_slots={}",
        o.layout, o.leaves_log2, o.slot_updates, o.slots, o.warmup, o.threads, o.data_len, o.seed, o.refresh_slots
    );
    let run = match o.layout.as_str() {
        "twin" => run_twin(&o, config, &dir)?,
        _ => run_sequential(&o, config, &dir)?,
    };
    report(&o, &run);
    Ok(())
}

/// Prints the readable lines and the JSON line.
fn report(o: &Opts, run: &Run) {
    let Run { off_before, on, off_after, .. } = run;
    let peak_rss = mem::peak_rss_bytes().unwrap_or(0);
    let [bytes, account_bytes, refresh, waits, wait_nanos, write_nanos] = on.counters;
    let wait_ms = wait_nanos as f64 / 1e6;
    let write_ms = write_nanos as f64 / 1e6;
    // Two off phases of `o.slots` timed slots each: CPU per phase, to compare with the one on phase.
    let off_pool_cpu = (off_before.engine.cpu_ms() + off_after.engine.cpu_ms()) / 2;
    let on_rate = on.updates as f64 / on.secs;
    let off_rate = (off_before.updates + off_after.updates) as f64 / (off_before.secs + off_after.secs);
    let (rate_before, rate_after) = (off_before.rate(), off_after.rate());
    println!("updates/s snapshots off before: {rate_before:.0}, after: {rate_after:.0}");
    let per = |b: u64| b as f64 / on.updates as f64;
    println!();
    println!("updates/s snapshots off: {off_rate:.0}");
    println!("updates/s snapshots on:  {on_rate:.0}  (ratio {:.3})", on_rate / off_rate);
    println!(
        "snapshot bytes/update: {:.1} total = {:.1} tree (nodes + buckets) + {:.1} account records + {:.1} refresh copies",
        per(bytes),
        per(bytes - account_bytes - refresh),
        per(account_bytes),
        per(refresh)
    );
    println!("writer: {write_ms:.0} ms writing+fsync, {waits} full-queue waits totalling {wait_ms:.0} ms");
    let per_slot = |ms: u64| ms as f64 / o.slots as f64;
    let h = on.hand_off.map(|ms| ms / o.slots as f64);
    println!(
        "hand-off ms per slot (snapshots on): hash {:.1}, key paths into the batch {:.1}, commit+capture {:.1}, submit {:.1}",
        h[0], h[1], h[2], h[3]
    );
    println!(
        "run-queue wait ms per slot (snapshots on): engine {:.1}, writer {:.1}",
        per_slot(on.engine.runq_ms()),
        per_slot(on.writer.runq_ms() + on.writer_io.runq_ms())
    );
    let cpu_ratio =
        off_pool_cpu as f64 / (on.engine.cpu_ms() + on.writer.cpu_ms() + on.writer_io.cpu_ms()).max(1) as f64;
    println!(
        "cpu ms per slot: engine {:.1} (snapshots off: {:.1}), writer {:.1}, writer I/O thread {:.1}; \
         engine cpu off / (engine + writer) cpu on = {cpu_ratio:.3}",
        per_slot(on.engine.cpu_ms()),
        per_slot(off_pool_cpu),
        per_slot(on.writer.cpu_ms()),
        per_slot(on.writer_io.cpu_ms())
    );
    let phases = [
        ("_snapshots_off_before", "snapshots off before", &off_before.engine, &off_before.process),
        ("_snapshots_on", "snapshots on", &on.engine, &on.process),
        ("_snapshots_off_after", "snapshots off after", &off_after.engine, &off_after.process),
    ];
    for (suffix, name, engine, process) in phases {
        let mut line = format!("per slot, {name}: engine {}", thread_usage(engine, o.slots));
        if suffix == "_snapshots_on" {
            line += &format!(
                "; writer {}; writer I/O thread {}",
                thread_usage(&on.writer, o.slots),
                thread_usage(&on.writer_io, o.slots)
            );
        }
        line += &format!("; process {}", process_usage(process, o.slots));
        println!("{line}");
    }
    // The writer's thread is busy from the first timed slot to the final flush: what it did not
    // spend on a core or waiting for one, it spent asleep (no work, or waiting on its I/O thread)
    // or blocked (fsync, page faults on mapped files).
    let on_wall_ms = on.secs * 1e3 / o.slots as f64;
    let window_ms = on.window_secs * 1e3 / o.slots as f64;
    let writer_off_cpu = window_ms - (on.writer.cpu_ns + on.writer.runq_ns) as f64 / 1e6 / o.slots as f64;
    println!(
        "writer thread per slot (snapshots on): wall {window_ms:.1} ms = cpu {:.1} + run-queue {:.1} + off cpu {writer_off_cpu:.1}",
        per_slot(on.writer.cpu_ms()),
        per_slot(on.writer.runq_ms()),
    );
    // Sampled states times the window: an estimate, the share of each state's samples.
    let state_ms = |c: &StateCounts, n: u64| round1(c.share(n) * window_ms);
    for (name, c) in [("writer thread", &on.states[0]), ("writer I/O thread", &on.states[1])] {
        println!(
            "{name} states sampled every {} ms (snapshots on, {} samples), ms per slot: running or runnable {:.1}, \
             asleep {:.1}, blocked in the kernel (D: storage, major faults, fsync) {:.1}, other {:.1}",
            STATE_PERIOD.as_millis(),
            c.samples(),
            state_ms(c, c.running),
            state_ms(c, c.sleeping),
            state_ms(c, c.blocked),
            state_ms(c, c.other)
        );
    }
    println!(
        "peak RSS: {:.1} MiB ({:.1} bytes per prefilled leaf)",
        peak_rss as f64 / (1u64 << 20) as f64,
        peak_rss as f64 / (1u64 << o.leaves_log2) as f64
    );
    let mut line = json!({
        "layout": o.layout,
        "leaves": run.leaves,
        "threads": o.threads,
        "slot_updates": o.slot_updates,
        "slots_per_phase": o.slots,
        "warmup_slots_per_phase": o.warmup,
        "data_len": o.data_len,
        "seed": o.seed,
        "refresh_slots": o.refresh_slots,
        "updates_per_sec_snapshots_off": off_rate.round(),
        "updates_per_sec_snapshots_off_before": rate_before.round(),
        "updates_per_sec_snapshots_off_after": rate_after.round(),
        "updates_per_sec_snapshots_on": on_rate.round(),
        "snapshot_ratio": ((on_rate / off_rate) * 1000.0).round() / 1000.0,
        "snapshot_bytes_per_update": (per(bytes) * 10.0).round() / 10.0,
        "snapshot_tree_bytes_per_update": (per(bytes - account_bytes - refresh) * 10.0).round() / 10.0,
        "snapshot_account_bytes_per_update": (per(account_bytes) * 10.0).round() / 10.0,
        "snapshot_refresh_bytes_per_update": (per(refresh) * 10.0).round() / 10.0,
        "writer_full_waits": waits,
        "engine_cpu_ms_per_slot_snapshots_off": per_slot(off_pool_cpu),
        "engine_cpu_ms_per_slot_snapshots_on": per_slot(on.engine.cpu_ms()),
        "writer_cpu_ms_per_slot": per_slot(on.writer.cpu_ms() + on.writer_io.cpu_ms()),
        "cpu_ratio": (cpu_ratio * 1000.0).round() / 1000.0,
        "writer_wait_ms": wait_ms.round(),
        "engine_runq_wait_ms_per_slot": per_slot(on.engine.runq_ms()),
        "writer_runq_wait_ms_per_slot": per_slot(on.writer.runq_ms() + on.writer_io.runq_ms()),
        "writer_write_ms": write_ms.round(),
        "full_snapshot_bytes": run.full_bytes,
        "peak_rss_bytes": peak_rss,
    });
    if let Some(out) = line.as_object_mut() {
        let slots = o.slots;
        out.insert("delay_accounting".into(), json!(proc_usage::delay_accounting()));
        out.insert("on_wall_ms_per_slot".into(), json!(round1(on_wall_ms)));
        out.insert("writer_thread_off_cpu_ms_per_slot".into(), json!(round1(writer_off_cpu)));
        out.insert("writer_window_ms_per_slot".into(), json!(round1(window_ms)));
        for (prefix, c) in [("writer_thread", &on.states[0]), ("writer_io_thread", &on.states[1])] {
            out.insert(format!("{prefix}_state_samples"), json!(c.samples()));
            out.insert(format!("{prefix}_running_ms_per_slot_sampled"), json!(state_ms(c, c.running)));
            out.insert(format!("{prefix}_asleep_ms_per_slot_sampled"), json!(state_ms(c, c.sleeping)));
            out.insert(format!("{prefix}_blocked_ms_per_slot_sampled"), json!(state_ms(c, c.blocked)));
        }
        for (suffix, _, engine, process) in phases {
            out.insert(format!("engine_cpu_ms_per_slot{suffix}"), json!(per_slot(engine.cpu_ms())));
            out.insert(format!("engine_runq_wait_ms_per_slot{suffix}"), json!(per_slot(engine.runq_ms())));
            usage_json(out, "engine_", suffix, engine, slots);
            usage_json(out, "process_", suffix, process, slots);
        }
        // The writer's two threads together, as `writer_cpu_ms_per_slot`, and its I/O thread alone.
        usage_json(out, "writer_", "", &on.writer.plus(on.writer_io), slots);
        usage_json(out, "writer_io_thread_", "", &on.writer_io, slots);
        out.insert("writer_thread_cpu_ms_per_slot".into(), json!(per_slot(on.writer.cpu_ms())));
        out.insert("writer_thread_runq_wait_ms_per_slot".into(), json!(per_slot(on.writer.runq_ms())));
    }
    println!("{line}");
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// A thread group's per-slot usage, for the readable lines.
fn thread_usage(u: &Usage, slots: u64) -> String {
    let n = slots as f64;
    format!(
        "user {:.1} ms, system {:.1} ms, run-queue {:.1} ms, faults {:.1} major / {:.0} minor, read {:.2} MiB",
        u.utime_ms() / n,
        u.stime_ms() / n,
        u.runq_ns as f64 / 1e6 / n,
        u.majflt as f64 / n,
        u.minflt as f64 / n,
        mib(u.read_bytes) / n
    )
}

/// The process's per-slot usage, for the readable lines.
fn process_usage(u: &Usage, slots: u64) -> String {
    let n = slots as f64;
    let blkio = u.blkio_ms().map_or("n/a".to_string(), |ms| format!("{:.1} ms", ms / n));
    format!(
        "user {:.1} ms, system {:.1} ms, faults {:.1} major / {:.0} minor, read {:.2} MiB, wrote {:.2} MiB, \
         blocked on I/O {blkio}",
        u.utime_ms() / n,
        u.stime_ms() / n,
        u.majflt as f64 / n,
        u.minflt as f64 / n,
        mib(u.read_bytes) / n,
        mib(u.write_bytes) / n
    )
}

/// Adds a thread group's (or the process's) per-slot counters to the JSON line as
/// `{prefix}utime_ms_per_slot{suffix}` and so on; block-I/O time is null without delay accounting.
fn usage_json(out: &mut serde_json::Map<String, serde_json::Value>, prefix: &str, suffix: &str, u: &Usage, slots: u64) {
    let n = slots as f64;
    let blkio = u.blkio_ms().map(|ms| round1(ms / n));
    for (name, value) in [
        ("utime_ms_per_slot", json!(round1(u.utime_ms() / n))),
        ("stime_ms_per_slot", json!(round1(u.stime_ms() / n))),
        ("minflt_per_slot", json!(round1(u.minflt as f64 / n))),
        ("majflt_per_slot", json!(round1(u.majflt as f64 / n))),
        ("read_bytes_per_slot", json!(u.read_bytes / slots)),
        ("write_bytes_per_slot", json!(u.write_bytes / slots)),
        ("blkio_ms_per_slot", json!(blkio)),
    ] {
        out.insert(format!("{prefix}{name}{suffix}"), value);
    }
}
