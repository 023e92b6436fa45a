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

/// What this process's threads have used so far, summed by thread name (a pool's numbered
/// threads together): `(CPU, time runnable but waiting for a core)` in nanoseconds, from
/// `/proc/self/task/*/schedstat`. Read over a whole phase it tells what each part costs in CPU,
/// and what sharing the cores costs it, whatever else runs on the machine, which wall-clock rates
/// on a shared 2-core host cannot. The kernel cuts names to 15 bytes: the writer's I/O thread
/// `aldb-snapshot-io` reads `aldb-snapshot-i`.
#[derive(Default)]
struct ThreadTimes(std::collections::BTreeMap<String, (u64, u64)>);

impl ThreadTimes {
    fn now() -> Self {
        let mut out = Self::default();
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return out };
        for t in tasks.flatten() {
            let (Ok(comm), Ok(sched)) =
                (std::fs::read_to_string(t.path().join("comm")), std::fs::read_to_string(t.path().join("schedstat")))
            else {
                continue;
            };
            let name = comm.trim().trim_end_matches(|c: char| c.is_ascii_digit() || c == '-').to_string();
            let mut fields = sched.split_whitespace().map(|f| f.parse::<u64>().unwrap_or(0));
            let (cpu, wait) = (fields.next().unwrap_or(0), fields.next().unwrap_or(0));
            let e = out.0.entry(name).or_insert((0, 0));
            e.0 += cpu;
            e.1 += wait;
        }
        out
    }

    /// `(CPU, run-queue wait)` in milliseconds of the threads named `name` since `earlier`.
    fn since(&self, earlier: &Self, name: &str) -> (u64, u64) {
        let get = |t: &Self| t.0.get(name).copied().unwrap_or((0, 0));
        let ((cpu, wait), (cpu0, wait0)) = (get(self), get(earlier));
        (cpu.saturating_sub(cpu0) / 1_000_000, wait.saturating_sub(wait0) / 1_000_000)
    }
}

/// What a snapshots-off phase measured over its timed slots.
struct OffPhase {
    secs: f64,
    updates: u64,
    /// CPU of the engine's pool.
    cpu_ms: u64,
}

impl OffPhase {
    fn rate(&self) -> f64 {
        self.updates as f64 / self.secs
    }
}

/// Commits `batches` (slots from `first_slot` on) with snapshots off; the first `o.warmup` are
/// not timed.
fn off_phase(o: &Opts, tree: &mut Pleiades, batches: &[AccountBatch], first_slot: u64) -> OffPhase {
    let mut m = OffPhase { secs: 0.0, updates: 0, cpu_ms: 0 };
    let mut times = ThreadTimes::now();
    for (slot, batch) in (first_slot..).zip(batches) {
        if slot == first_slot + o.warmup {
            m = OffPhase { secs: 0.0, updates: 0, cpu_ms: 0 };
            times = ThreadTimes::now();
        }
        let t = Instant::now();
        tree.commit_accounts(&batch.refs());
        m.secs += t.elapsed().as_secs_f64();
        m.updates += o.slot_updates as u64;
        println!("slot {slot:>3} (snapshots off): {:8.2} ms", t.elapsed().as_secs_f64() * 1e3);
    }
    m.cpu_ms = ThreadTimes::now().since(&times, "pleiades").0;
    m
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
    /// CPU ms: engine, writer, writer I/O thread.
    cpu: [u64; 3],
    /// Run-queue wait ms: engine, writer (both its threads).
    queued: [u64; 2],
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
    let mut m = OnPhase { secs: 0.0, updates: 0, hand_off: [0.0; 4], cpu: [0; 3], queued: [0; 2], counters: [0; 6] };
    let mut base = full_counters;
    let mut times_on = ThreadTimes::now();
    // Each phase's accounts are generated before its clock starts, so the timed slots run back
    // to back and the writer gets no untimed pause to catch up in. They are gathered straight
    // into the batches the writer takes, as a producer that owns a slot's accounts would.
    let mut spares = Vec::with_capacity(batches.len());
    for (slot, mut batch) in (first_slot..).zip(batches) {
        if slot == first_slot + o.warmup {
            writer.flush()?;
            base = counters(writer.stats());
            times_on = ThreadTimes::now();
            m = OnPhase { secs: 0.0, updates: 0, hand_off: [0.0; 4], cpu: [0; 3], queued: [0; 2], counters: [0; 6] };
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
        println!("slot {slot:>3} (snapshots on):  {:8.2} ms to hand off", t.elapsed().as_secs_f64() * 1e3);
    }
    let t = Instant::now();
    writer.flush()?;
    m.secs += t.elapsed().as_secs_f64();
    drop(spares);
    let times = ThreadTimes::now();
    let [engine, writer_main, writer_io] =
        ["pleiades", "aldb-snapshot", "aldb-snapshot-i"].map(|n| times.since(&times_on, n));
    m.cpu = [engine.0, writer_main.0, writer_io.0];
    m.queued = [engine.1, writer_main.1 + writer_io.1];
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
    let off_pool_cpu = (off_before.cpu_ms + off_after.cpu_ms) / 2;
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
        per_slot(on.queued[0]),
        per_slot(on.queued[1])
    );
    let cpu_ratio = off_pool_cpu as f64 / on.cpu.iter().sum::<u64>().max(1) as f64;
    println!(
        "cpu ms per slot: engine {:.1} (snapshots off: {:.1}), writer {:.1}, writer I/O thread {:.1}; \
         engine cpu off / (engine + writer) cpu on = {cpu_ratio:.3}",
        per_slot(on.cpu[0]),
        per_slot(off_pool_cpu),
        per_slot(on.cpu[1]),
        per_slot(on.cpu[2])
    );
    println!(
        "peak RSS: {:.1} MiB ({:.1} bytes per prefilled leaf)",
        peak_rss as f64 / (1u64 << 20) as f64,
        peak_rss as f64 / (1u64 << o.leaves_log2) as f64
    );
    let line = json!({
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
        "engine_cpu_ms_per_slot_snapshots_on": per_slot(on.cpu[0]),
        "writer_cpu_ms_per_slot": per_slot(on.cpu[1] + on.cpu[2]),
        "cpu_ratio": (cpu_ratio * 1000.0).round() / 1000.0,
        "writer_wait_ms": wait_ms.round(),
        "engine_runq_wait_ms_per_slot": per_slot(on.queued[0]),
        "writer_runq_wait_ms_per_slot": per_slot(on.queued[1]),
        "writer_write_ms": write_ms.round(),
        "full_snapshot_bytes": run.full_bytes,
        "peak_rss_bytes": peak_rss,
    });
    println!("{line}");
}
