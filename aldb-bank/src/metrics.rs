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

/// How a family is read and which kind it is exposed as.
enum Read<S> {
    Counter(fn(&S) -> f64),
    Gauge(fn(&S) -> f64),
    Histogram(fn(&S) -> &Histogram),
}

/// One exposed family: its name, its help text, and how a scrape reads it from `S`.
struct Family<S> {
    name: &'static str,
    help: &'static str,
    read: Read<S>,
}

impl<S> Family<S> {
    fn write(&self, f: &mut Families, src: &S) {
        match self.read {
            Read::Counter(value) => f.counter(self.name, self.help, value(src)),
            Read::Gauge(value) => f.gauge(self.name, self.help, value(src)),
            Read::Histogram(histogram) => histogram(src).write(f, self.name, self.help),
        }
    }
}

/// Every metric in the Prometheus text format (version 0.0.4), in the tables' order.
pub(crate) fn render(src: &Sources) -> String {
    let mut f = Families::default();
    MODULE.iter().for_each(|family| family.write(&mut f, &src.module));
    SINK.iter().for_each(|family| family.write(&mut f, &src.sink));
    WRITER.iter().for_each(|family| family.write(&mut f, &src.writer));
    f.encode()
}

fn n(c: &AtomicU64) -> f64 {
    c.load(Relaxed) as f64
}

/// The module's own families, read from [`ModuleStats`].
const MODULE: [Family<ModuleStats>; 6] = [
    Family {
        name: "aldb_bank_freezes_total",
        help: "Frozen banks whose aldb root the module computed.",
        read: Read::Counter(|m| n(&m.freezes)),
    },
    Family {
        name: "aldb_bank_bases_total",
        help: "Whole states the module built (genesis, or a restart's first freeze).",
        read: Read::Counter(|m| n(&m.bases)),
    },
    Family {
        name: "aldb_bank_call_errors_total",
        help: "Module calls that returned an error to the validator (which halts on it).",
        read: Read::Counter(|m| n(&m.call_errors)),
    },
    Family {
        name: "aldb_bank_banks_held",
        help: "Frozen banks above the rooted slot that the module holds.",
        read: Read::Gauge(|m| n(&m.banks_held)),
    },
    Family {
        name: "aldb_bank_rooted_slot",
        help: "The module's rooted slot (-1 before the first base).",
        // Stored plus one so that zero can mean "no base yet".
        read: Read::Gauge(|m| m.rooted_slot.load(Relaxed).checked_sub(1).map_or(-1.0, |slot| slot as f64)),
    },
    Family {
        name: "aldb_bank_freeze_seconds",
        help: "Time the replay thread spends in the module's freeze: hashing, copying the accounts for the sink, the fork engine's freeze.",
        read: Read::Histogram(|m| &m.freeze_time),
    },
];

/// Every [`SinkStats`] counter and gauge.
const SINK: [Family<SinkStats>; 16] = [
    Family {
        name: "aldb_bank_sink_banks_queued_total",
        help: "Frozen banks (and bases) handed to the sink's writer thread.",
        read: Read::Counter(|s| n(&s.banks_queued)),
    },
    Family {
        name: "aldb_bank_sink_banks_merged_total",
        help: "Banks that found the queue full and were merged into their parent's queued bank (the parent's slot is not served).",
        read: Read::Counter(|s| n(&s.banks_merged)),
    },
    Family {
        name: "aldb_bank_sink_banks_lost_total",
        help: "Banks not written: the queue was full and could not take them merged, or their parent was not written.",
        read: Read::Counter(|s| n(&s.banks_lost)),
    },
    Family {
        name: "aldb_bank_sink_messages_dropped_total",
        help: "Status and metadata messages dropped because the writer thread stopped taking them.",
        read: Read::Counter(|s| n(&s.messages_dropped)),
    },
    Family {
        name: "aldb_bank_sink_banks_refused_total",
        help: "Banks the snapshot writer did not write and that were not tried again (directory gone, input refused, parent not written).",
        read: Read::Counter(|s| n(&s.banks_refused)),
    },
    Family {
        name: "aldb_bank_sink_writer_errors_total",
        help: "Submissions or marks the stopped snapshot writer refused.",
        read: Read::Counter(|s| n(&s.writer_errors)),
    },
    Family {
        name: "aldb_bank_sink_records_produced_total",
        help: "Root records logged.",
        read: Read::Counter(|s| n(&s.records_produced)),
    },
    Family {
        name: "aldb_bank_sink_record_errors_total",
        help: "Root records that could not be made or logged.",
        read: Read::Counter(|s| n(&s.record_errors)),
    },
    Family {
        name: "aldb_bank_sink_write_retries_total",
        help: "Tries to write a held bank again after a failure that can pass (full disk, I/O error).",
        read: Read::Counter(|s| n(&s.write_retries)),
    },
    Family {
        name: "aldb_bank_sink_write_recoveries_total",
        help: "Held banks written by a retry, each ending a failure streak.",
        read: Read::Counter(|s| n(&s.write_recoveries)),
    },
    Family {
        name: "aldb_bank_sink_retries_abandoned_total",
        help: "Held banks given up because their fork died, was passed by a root or replaced.",
        read: Read::Counter(|s| n(&s.retries_abandoned)),
    },
    Family {
        name: "aldb_bank_sink_running",
        help: "1 while the sink's writer thread runs.",
        read: Read::Gauge(|s| n(&s.running)),
    },
    Family {
        name: "aldb_bank_sink_queued",
        help: "Banks and messages waiting for the writer thread.",
        read: Read::Gauge(|s| n(&s.queued)),
    },
    Family {
        name: "aldb_bank_sink_queued_bytes",
        help: "Bytes of change sets and account data waiting.",
        read: Read::Gauge(|s| n(&s.queued_bytes)),
    },
    Family {
        name: "aldb_bank_sink_write_failing",
        help: "1 while the writer thread holds a bank whose write failed, trying it again.",
        read: Read::Gauge(|s| n(&s.write_failing)),
    },
    Family {
        name: "aldb_bank_sink_write_failure_streak_seconds",
        help: "How long the current failure streak has lasted (0 while writes succeed).",
        read: Read::Gauge(|s| s.failure_streak().map_or(0.0, |d| d.as_secs_f64())),
    },
];

/// The snapshot writer's main figures, from its [`WriterStats`].
const WRITER: [Family<WriterStats>; 10] = [
    Family {
        name: "aldb_bank_snapshot_files_published_total",
        help: "Snapshot files published.",
        read: Read::Counter(|w| n(&w.published)),
    },
    Family {
        name: "aldb_bank_snapshot_bytes_total",
        help: "Bytes of snapshot files published.",
        read: Read::Counter(|w| n(&w.bytes)),
    },
    Family {
        name: "aldb_bank_snapshot_write_seconds_total",
        help: "Time the snapshot writer spent writing and syncing published files.",
        read: Read::Counter(|w| n(&w.write_nanos) / 1e9),
    },
    Family {
        name: "aldb_bank_snapshot_write_errors_total",
        help: "Failed snapshot writes (each failed try counts).",
        read: Read::Counter(|w| n(&w.errors)),
    },
    Family {
        name: "aldb_bank_snapshot_last_slot",
        help: "The newest slot published.",
        read: Read::Gauge(|w| n(&w.last_slot)),
    },
    Family {
        name: "aldb_bank_snapshot_pruned_files_total",
        help: "Snapshot files deleted by retention.",
        read: Read::Counter(|w| n(&w.pruned_files)),
    },
    Family {
        name: "aldb_bank_snapshot_fork_banks",
        help: "Written banks the fork-mode writer holds (its base included).",
        read: Read::Gauge(|w| n(&w.fork_banks)),
    },
    Family {
        name: "aldb_bank_snapshot_fork_held_bytes",
        help: "Bytes of undo and redo lists the fork-mode writer's unrooted banks hold.",
        read: Read::Gauge(|w| n(&w.fork_held_bytes)),
    },
    Family {
        name: "aldb_bank_snapshot_fork_switches_total",
        help: "Times the writer's tables moved to another fork.",
        read: Read::Counter(|w| n(&w.fork_switches)),
    },
    Family {
        name: "aldb_bank_snapshot_journal_errors_total",
        help: "Failed appends to the slot-status journal.",
        read: Read::Counter(|w| n(&w.journal_errors)),
    },
];
