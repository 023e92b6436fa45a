//! Prometheus metrics of the module: its own counters (roots computed, freeze time), the sink's
//! ([`SinkStats`]) and the snapshot writer's, served on `GET /metrics` by [`MetricsServer`] when
//! the config sets `metrics_addr`.
//!
//! Everything read here is an atomic, so a scrape never takes the module's lock: it neither
//! waits for replay nor makes replay wait.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use aldb_metrics::Families;
pub(crate) use aldb_metrics::MetricsServer;
use aldb_snapshot::WriterStats;

use crate::sink::SinkStats;

/// Upper bounds (seconds) of the freeze time histogram's buckets.
const FREEZE_BOUNDS: [f64; 14] =
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0];

/// A histogram of durations with fixed buckets and atomic counts: recording one is a search over
/// 14 bounds and three relaxed adds.
#[derive(Debug, Default)]
pub(crate) struct Histogram {
    /// Observations at or below each bound (not cumulative; summed when rendered).
    buckets: [AtomicU64; FREEZE_BOUNDS.len()],
    count: AtomicU64,
    sum_nanos: AtomicU64,
}

impl Histogram {
    pub(crate) fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        if let Some(b) = FREEZE_BOUNDS.iter().position(|&b| secs <= b).and_then(|i| self.buckets.get(i)) {
            b.fetch_add(1, Relaxed);
        }
        self.count.fetch_add(1, Relaxed);
        self.sum_nanos.fetch_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX), Relaxed);
    }

    fn write(&self, f: &mut Families, name: &str, help: &str) {
        let cumulative = self.buckets.iter().scan(0u64, |total, b| {
            *total += b.load(Relaxed);
            Some(*total)
        });
        let buckets = FREEZE_BOUNDS.iter().copied().zip(cumulative);
        let sum = self.sum_nanos.load(Relaxed) as f64 / 1e9;
        f.histogram(name, help, buckets, self.count.load(Relaxed), sum);
    }
}

/// The module's own counters, kept on the replay thread (under the module's lock) and read by
/// scrapes.
#[derive(Debug, Default)]
pub(crate) struct ModuleStats {
    /// Roots computed for frozen banks.
    pub(crate) freezes: AtomicU64,
    /// Whole states built (genesis, or a restart's first freeze).
    pub(crate) bases: AtomicU64,
    /// Calls that returned an error.
    pub(crate) call_errors: AtomicU64,
    /// Unrooted banks held (gauge).
    pub(crate) banks_held: AtomicU64,
    /// The rooted slot plus one; 0 before the first base (gauge).
    pub(crate) rooted_slot: AtomicU64,
    /// Time inside each freeze (hashing, copying the accounts, the fork engine's freeze).
    pub(crate) freeze_time: Histogram,
}

/// What a scrape reads.
#[derive(Debug)]
pub(crate) struct Sources {
    pub(crate) module: Arc<ModuleStats>,
    pub(crate) sink: Arc<SinkStats>,
    pub(crate) writer: Arc<WriterStats>,
}

/// Every metric in the Prometheus text format (version 0.0.4).
pub(crate) fn render(src: &Sources) -> String {
    let mut f = Families::default();
    module(&mut f, &src.module);
    sink(&mut f, &src.sink);
    writer(&mut f, &src.writer);
    f.encode()
}

fn n(c: &AtomicU64) -> u64 {
    c.load(Relaxed)
}

fn module(f: &mut Families, m: &ModuleStats) {
    f.counter("aldb_bank_freezes_total", "Frozen banks whose aldb root the module computed.", n(&m.freezes) as f64);
    f.counter(
        "aldb_bank_bases_total",
        "Whole states the module built (genesis, or a restart's first freeze).",
        n(&m.bases) as f64,
    );
    f.counter(
        "aldb_bank_call_errors_total",
        "Module calls that returned an error to the validator (which halts on it).",
        n(&m.call_errors) as f64,
    );
    f.gauge(
        "aldb_bank_banks_held",
        "Frozen banks above the rooted slot that the module holds.",
        n(&m.banks_held) as f64,
    );
    let rooted = n(&m.rooted_slot);
    f.gauge(
        "aldb_bank_rooted_slot",
        "The module's rooted slot (-1 before the first base).",
        if rooted == 0 { -1.0 } else { (rooted - 1) as f64 },
    );
    m.freeze_time.write(
        f,
        "aldb_bank_freeze_seconds",
        "Time the replay thread spends in the module's freeze: hashing, copying the accounts for the sink, the fork engine's freeze.",
    );
}

fn sink(f: &mut Families, s: &SinkStats) {
    let counters: [(&str, &str, &AtomicU64); 11] = [
        (
            "aldb_bank_sink_banks_queued_total",
            "Frozen banks (and bases) handed to the sink's writer thread.",
            &s.banks_queued,
        ),
        (
            "aldb_bank_sink_banks_merged_total",
            "Banks that found the queue full and were merged into their parent's queued bank (the parent's slot is not served).",
            &s.banks_merged,
        ),
        (
            "aldb_bank_sink_banks_lost_total",
            "Banks not written: the queue was full and could not take them merged, or their parent was not written.",
            &s.banks_lost,
        ),
        (
            "aldb_bank_sink_messages_dropped_total",
            "Status and metadata messages dropped because the writer thread stopped taking them.",
            &s.messages_dropped,
        ),
        (
            "aldb_bank_sink_banks_refused_total",
            "Banks the snapshot writer did not write and that were not tried again (directory gone, input refused, parent not written).",
            &s.banks_refused,
        ),
        (
            "aldb_bank_sink_writer_errors_total",
            "Submissions or marks the stopped snapshot writer refused.",
            &s.writer_errors,
        ),
        ("aldb_bank_sink_records_produced_total", "Root records logged.", &s.records_produced),
        ("aldb_bank_sink_record_errors_total", "Root records that could not be made or logged.", &s.record_errors),
        (
            "aldb_bank_sink_write_retries_total",
            "Tries to write a held bank again after a failure that can pass (full disk, I/O error).",
            &s.write_retries,
        ),
        (
            "aldb_bank_sink_write_recoveries_total",
            "Held banks written by a retry, each ending a failure streak.",
            &s.write_recoveries,
        ),
        (
            "aldb_bank_sink_retries_abandoned_total",
            "Held banks given up because their fork died, was passed by a root or replaced.",
            &s.retries_abandoned,
        ),
    ];
    for (name, help, c) in counters {
        f.counter(name, help, n(c) as f64);
    }
    f.gauge("aldb_bank_sink_running", "1 while the sink's writer thread runs.", n(&s.running) as f64);
    f.gauge("aldb_bank_sink_queued", "Banks and messages waiting for the writer thread.", n(&s.queued) as f64);
    f.gauge("aldb_bank_sink_queued_bytes", "Bytes of change sets and account data waiting.", n(&s.queued_bytes) as f64);
    f.gauge(
        "aldb_bank_sink_write_failing",
        "1 while the writer thread holds a bank whose write failed, trying it again.",
        n(&s.write_failing) as f64,
    );
    f.gauge(
        "aldb_bank_sink_write_failure_streak_seconds",
        "How long the current failure streak has lasted (0 while writes succeed).",
        s.failure_streak().map_or(0.0, |d| d.as_secs_f64()),
    );
}

fn writer(f: &mut Families, w: &WriterStats) {
    f.counter("aldb_bank_snapshot_files_published_total", "Snapshot files published.", n(&w.published) as f64);
    f.counter("aldb_bank_snapshot_bytes_total", "Bytes of snapshot files published.", n(&w.bytes) as f64);
    f.counter(
        "aldb_bank_snapshot_write_seconds_total",
        "Time the snapshot writer spent writing and syncing published files.",
        n(&w.write_nanos) as f64 / 1e9,
    );
    f.counter(
        "aldb_bank_snapshot_write_errors_total",
        "Failed snapshot writes (each failed try counts).",
        n(&w.errors) as f64,
    );
    f.gauge("aldb_bank_snapshot_last_slot", "The newest slot published.", n(&w.last_slot) as f64);
    f.counter(
        "aldb_bank_snapshot_pruned_files_total",
        "Snapshot files deleted by retention.",
        n(&w.pruned_files) as f64,
    );
    f.gauge(
        "aldb_bank_snapshot_fork_banks",
        "Written banks the fork-mode writer holds (its base included).",
        n(&w.fork_banks) as f64,
    );
    f.gauge(
        "aldb_bank_snapshot_fork_held_bytes",
        "Bytes of undo and redo lists the fork-mode writer's unrooted banks hold.",
        n(&w.fork_held_bytes) as f64,
    );
    f.counter(
        "aldb_bank_snapshot_fork_switches_total",
        "Times the writer's tables moved to another fork.",
        n(&w.fork_switches) as f64,
    );
    f.counter(
        "aldb_bank_snapshot_journal_errors_total",
        "Failed appends to the slot-status journal.",
        n(&w.journal_errors) as f64,
    );
}
