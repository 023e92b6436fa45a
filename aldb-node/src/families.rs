//! The pipeline's metric families: every counter of [`NodeStats`] and of the snapshot writer
//! that a front end exposes, declared once here, in the order and under the names (and help
//! texts) each front end has always served. Dashboards and alerts key on them, so a family is
//! added here, never renamed.
//!
//! The geyser plugin's families interleave with its own (callbacks, the state machine), so they
//! come in the groups its exposition places them in; the in-process module's come in two blocks.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

use aldb_metrics::Families;
use aldb_snapshot::WriterStats;

use crate::histogram::Histogram;
use crate::stats::NodeStats;

/// What a scrape of the pipeline reads.
#[derive(Debug, Clone)]
pub struct NodeSources {
    /// The pipeline's counters.
    pub node: Arc<NodeStats>,
    /// The snapshot writer's.
    pub writer: Arc<WriterStats>,
}

/// How a family is read and which kind it is exposed as.
#[derive(Clone, Copy)]
pub enum Read<S> {
    /// A counter.
    Counter(fn(&S) -> f64),
    /// A gauge.
    Gauge(fn(&S) -> f64),
    /// A histogram.
    Histogram(fn(&S) -> &Histogram),
}

/// One exposed family: its name, its help text, and how a scrape reads it from `S`.
#[derive(Clone, Copy)]
pub struct Family<S> {
    /// The family's name.
    pub name: &'static str,
    /// Its help text.
    pub help: &'static str,
    /// How it is read.
    pub read: Read<S>,
}

impl<S> Family<S> {
    /// Writes the family with its value in `src`.
    pub fn write(&self, f: &mut Families, src: &S) {
        match self.read {
            Read::Counter(value) => f.counter(self.name, self.help, value(src)),
            Read::Gauge(value) => f.gauge(self.name, self.help, value(src)),
            Read::Histogram(histogram) => histogram(src).write(f, self.name, self.help),
        }
    }
}

/// Writes `families` in order.
pub fn write_all<S>(f: &mut Families, families: &[Family<S>], src: &S) {
    families.iter().for_each(|family| family.write(f, src));
}

fn n(c: &AtomicU64) -> f64 {
    c.load(Relaxed) as f64
}

const fn counter(name: &'static str, help: &'static str, read: fn(&NodeSources) -> f64) -> Family<NodeSources> {
    Family { name, help, read: Read::Counter(read) }
}

const fn gauge(name: &'static str, help: &'static str, read: fn(&NodeSources) -> f64) -> Family<NodeSources> {
    Family { name, help, read: Read::Gauge(read) }
}

/// The in-process module's pipeline families (`aldb_bank_sink_*`).
pub const BANK_PIPELINE: [Family<NodeSources>; 16] = [
    counter("aldb_bank_sink_banks_queued_total", "Frozen banks (and bases) handed to the sink's writer thread.", |s| {
        n(&s.node.banks_queued)
    }),
    counter(
        "aldb_bank_sink_banks_merged_total",
        "Banks that found the queue full and were merged into their parent's queued bank (the parent's slot is not served).",
        |s| n(&s.node.banks_merged),
    ),
    counter(
        "aldb_bank_sink_banks_lost_total",
        "Banks not written: the queue was full and could not take them merged, or their parent was not written.",
        |s| n(&s.node.banks_lost),
    ),
    counter(
        "aldb_bank_sink_messages_dropped_total",
        "Status and metadata messages dropped because the writer thread stopped taking them.",
        |s| n(&s.node.messages_dropped),
    ),
    counter(
        "aldb_bank_sink_banks_refused_total",
        "Banks the snapshot writer did not write and that were not tried again (directory gone, input refused, parent not written).",
        |s| n(&s.node.banks_refused),
    ),
    counter("aldb_bank_sink_writer_errors_total", "Submissions or marks the stopped snapshot writer refused.", |s| {
        n(&s.node.writer_errors)
    }),
    counter("aldb_bank_sink_records_produced_total", "Root records logged.", |s| n(&s.node.records_produced)),
    counter("aldb_bank_sink_record_errors_total", "Root records that could not be made or logged.", |s| {
        n(&s.node.record_errors)
    }),
    counter(
        "aldb_bank_sink_write_retries_total",
        "Tries to write a held bank again after a failure that can pass (full disk, I/O error).",
        |s| n(&s.node.write_retries),
    ),
    counter(
        "aldb_bank_sink_write_recoveries_total",
        "Held banks written by a retry, each ending a failure streak.",
        |s| n(&s.node.write_recoveries),
    ),
    counter(
        "aldb_bank_sink_retries_abandoned_total",
        "Held banks given up because their fork died, was passed by a root or replaced.",
        |s| n(&s.node.retries_abandoned),
    ),
    gauge("aldb_bank_sink_running", "1 while the sink's writer thread runs.", |s| n(&s.node.running)),
    gauge("aldb_bank_sink_queued", "Banks and messages waiting for the writer thread.", |s| n(&s.node.queued)),
    gauge("aldb_bank_sink_queued_bytes", "Bytes of change sets and account data waiting.", |s| n(&s.node.queued_bytes)),
    gauge(
        "aldb_bank_sink_write_failing",
        "1 while the writer thread holds a bank whose write failed, trying it again.",
        |s| n(&s.node.write_failing),
    ),
    gauge(
        "aldb_bank_sink_write_failure_streak_seconds",
        "How long the current failure streak has lasted (0 while writes succeed).",
        |s| s.node.failure_streak().map_or(0.0, |d| d.as_secs_f64()),
    ),
];

/// The in-process module's snapshot writer families (`aldb_bank_snapshot_*`).
pub const BANK_WRITER: [Family<NodeSources>; 10] = [
    counter("aldb_bank_snapshot_files_published_total", "Snapshot files published.", |s| n(&s.writer.published)),
    counter("aldb_bank_snapshot_bytes_total", "Bytes of snapshot files published.", |s| n(&s.writer.bytes)),
    counter(
        "aldb_bank_snapshot_write_seconds_total",
        "Time the snapshot writer spent writing and syncing published files.",
        |s| n(&s.writer.write_nanos) / 1e9,
    ),
    counter("aldb_bank_snapshot_write_errors_total", "Failed snapshot writes (each failed try counts).", |s| {
        n(&s.writer.errors)
    }),
    gauge("aldb_bank_snapshot_last_slot", "The newest slot published.", |s| n(&s.writer.last_slot)),
    counter("aldb_bank_snapshot_pruned_files_total", "Snapshot files deleted by retention.", |s| {
        n(&s.writer.pruned_files)
    }),
    gauge("aldb_bank_snapshot_fork_banks", "Written banks the fork-mode writer holds (its base included).", |s| {
        n(&s.writer.fork_banks)
    }),
    gauge(
        "aldb_bank_snapshot_fork_held_bytes",
        "Bytes of undo and redo lists the fork-mode writer's unrooted banks hold.",
        |s| n(&s.writer.fork_held_bytes),
    ),
    counter("aldb_bank_snapshot_fork_switches_total", "Times the writer's tables moved to another fork.", |s| {
        n(&s.writer.fork_switches)
    }),
    counter("aldb_bank_snapshot_journal_errors_total", "Failed appends to the slot-status journal.", |s| {
        n(&s.writer.journal_errors)
    }),
];

/// The geyser plugin's root-record families.
pub const PLUGIN_RECORDS: [Family<NodeSources>; 5] = [
    gauge(
        "aldb_records_enabled",
        "1 when root records are produced (a genesis hash is configured and the record log opened).",
        |s| f64::from(u8::from(s.node.records_enabled.load(Relaxed))),
    ),
    counter("aldb_records_produced_total", "Root records appended to the record log.", |s| n(&s.node.records_produced)),
    counter("aldb_records_signed_total", "Root records appended with an attestation.", |s| n(&s.node.records_signed)),
    counter(
        "aldb_records_skipped_total",
        "Committed slots at or below the newest logged record (replayed after a restart); never recorded twice.",
        |s| n(&s.node.records_skipped),
    ),
    counter("aldb_record_errors_total", "Committed slots whose root record could not be produced or logged.", |s| {
        n(&s.node.record_errors)
    }),
];

/// The geyser plugin's vote-evidence and root cross-check families (zero in a stock build).
pub const PLUGIN_EVIDENCE: [Family<NodeSources>; 10] = [
    counter("aldb_evidence_banks_total", "Bank entries appended to the vote-evidence log.", |s| {
        n(&s.node.evidence.banks)
    }),
    counter("aldb_evidence_votes_total", "Vote transactions appended to the vote-evidence log.", |s| {
        n(&s.node.evidence.votes)
    }),
    counter("aldb_evidence_dropped_total", "Evidence items dropped on a full queue.", |s| n(&s.node.evidence.dropped)),
    counter(
        "aldb_evidence_votes_rejected_total",
        "Vote transactions not logged: versioned, oversized, not a TowerSync, or bytes whose signatures fail.",
        |s| n(&s.node.evidence.rejected),
    ),
    counter("aldb_evidence_errors_total", "Failed appends or prunes of the vote-evidence log.", |s| {
        n(&s.node.evidence.errors)
    }),
    counter(
        "aldb_bank_roots_checked_total",
        "Slots whose root in block metadata V0_0_5 was compared with the plugin's.",
        |s| n(&s.node.evidence.roots_checked),
    ),
    counter(
        "aldb_bank_root_mismatches_total",
        "Slots whose root in block metadata V0_0_5 differs from the plugin's.",
        |s| n(&s.node.evidence.root_mismatches),
    ),
    counter(
        "aldb_bank_hashes_unexplained_total",
        "Banks whose hash does not follow from the h, root and next set in block metadata V0_0_5.",
        |s| n(&s.node.evidence.unexplained_bank_hashes),
    ),
    counter("aldb_evidence_sets_total", "Next epochs' validator sets appended to the vote-evidence log.", |s| {
        n(&s.node.evidence.sets)
    }),
    counter(
        "aldb_evidence_set_mismatches_total",
        "Set encodings not logged: they do not decode, or do not hash to the bank's next_set_hash.",
        |s| n(&s.node.evidence.set_mismatches),
    ),
];

/// The geyser plugin's families of the fork-mode writer (`commitment: "processed"`).
pub const PLUGIN_FORK_WRITER: [Family<NodeSources>; 4] = [
    gauge("aldb_snapshot_fork_banks", "Written banks the fork-mode snapshot writer holds.", |s| {
        n(&s.writer.fork_banks)
    }),
    counter(
        "aldb_snapshot_fork_refused_total",
        "Banks the fork-mode snapshot writer refused to write (their roots stand, their files are not served).",
        |s| n(&s.writer.fork_refused),
    ),
    counter(
        "aldb_snapshot_fork_rolled_back_total",
        "Banks whose undo list the fork-mode snapshot writer applied.",
        |s| n(&s.writer.fork_rolled_back),
    ),
    counter("aldb_snapshot_marks_total", "Status marks handed to the snapshot writer.", |s| n(&s.writer.marks)),
];

/// The geyser plugin's submission latency.
pub const PLUGIN_SUBMIT: [Family<NodeSources>; 1] = [Family {
    name: "aldb_snapshot_submit_seconds",
    help: "Time handing one committed slot to the snapshot writer, waits on a full queue included.",
    read: Read::Histogram(|s| &s.node.submit_latency),
}];

/// The geyser plugin's snapshot families.
pub const PLUGIN_SNAPSHOTS: [Family<NodeSources>; 17] = [
    gauge("aldb_snapshot_queue_depth", "Committed slots waiting for the snapshot writer.", |s| {
        s.writer.queue_depth() as f64
    }),
    counter("aldb_snapshot_submitted_total", "Committed slots handed to the snapshot writer.", |s| {
        n(&s.node.snapshot_submitted)
    }),
    counter("aldb_snapshot_skipped_total", "Committed slots not written (writer stopped, or no change set).", |s| {
        n(&s.node.snapshot_skipped)
    }),
    counter("aldb_snapshot_published_total", "Snapshot files published.", |s| n(&s.writer.published)),
    gauge("aldb_snapshot_last_published_slot", "Newest published slot.", |s| n(&s.writer.last_slot)),
    counter(
        "aldb_snapshot_full_queue_waits_total",
        "Submissions that found the writer's queue full and waited.",
        |s| n(&s.writer.full_waits),
    ),
    counter(
        "aldb_snapshot_full_queue_wait_seconds_total",
        "Time the commit worker spent waiting on a full writer queue.",
        |s| n(&s.writer.wait_nanos) / 1e9,
    ),
    counter("aldb_snapshot_write_seconds_total", "Time the writer spent writing and syncing files.", |s| {
        n(&s.writer.write_nanos) / 1e9
    }),
    counter("aldb_snapshot_bytes_total", "Bytes of published snapshot files.", |s| n(&s.writer.bytes)),
    counter("aldb_snapshot_account_bytes_total", "Of those, bytes of account records.", |s| n(&s.writer.account_bytes)),
    counter("aldb_snapshot_refresh_bytes_total", "Of those, bytes rewritten by the refresh cycle.", |s| {
        n(&s.writer.refresh_bytes)
    }),
    counter("aldb_snapshot_pruned_files_total", "Snapshot files deleted by pruning.", |s| n(&s.writer.pruned_files)),
    counter(
        "aldb_snapshot_errors_total",
        "Failed snapshot writes, retries included (the writer holds slots and retries; see aldb_snapshot_writer_failing).",
        |s| n(&s.writer.errors),
    ),
    gauge(
        "aldb_snapshot_writer_failing",
        "1 while the snapshot writer cannot write and holds slots to retry, else 0.",
        |s| n(&s.writer.failing),
    ),
    counter("aldb_snapshot_recoveries_total", "Times the snapshot writer wrote again after failing.", |s| {
        n(&s.writer.recoveries)
    }),
    counter(
        "aldb_snapshot_gap_slots_total",
        "Committed slots never written because the writer was failing (Hyades answers -32012 for them).",
        |s| n(&s.writer.gap_slots),
    ),
    gauge(
        "aldb_snapshot_writer_stopped",
        "1 once the snapshot writer has stopped until restart (held data passed max_recovery_bytes), else 0.",
        |s| n(&s.writer.stopped),
    ),
];

/// The geyser plugin's commit worker families.
pub const PLUGIN_WORKER: [Family<NodeSources>; 2] = [
    counter("aldb_worker_panics_total", "Panics caught on the commit worker; it stops committing after one.", |s| {
        n(&s.node.panics)
    }),
    gauge("aldb_worker_running", "1 while the commit worker runs.", |s| n(&s.node.running)),
];
