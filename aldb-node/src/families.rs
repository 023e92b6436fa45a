//! The pipeline's metric families: every statistic of [`NodeStats`] and of the snapshot writer
//! that a front end exposes, declared once, in [`STATISTICS`], with the name and help text each
//! front end serves it under. Dashboards and alerts key on those names, so a name is added here,
//! never changed.
//!
//! The two front ends name a shared statistic differently (the geyser plugin's
//! `aldb_snapshot_published_total` is the in-process module's
//! `aldb_bank_snapshot_files_published_total`), and the plugin interleaves its groups with its own
//! families (callbacks, the state machine). So a statistic says, for each front end that serves it,
//! the [`Group`] it belongs to there; a front end writes a group at the place of its exposition
//! where the group goes, and a group's families come in the table's order.

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
pub enum Read<S> {
    /// A counter.
    Counter(fn(&S) -> f64),
    /// A gauge.
    Gauge(fn(&S) -> f64),
    /// A histogram.
    Histogram(fn(&S) -> &Histogram),
}

// By hand: a derive would ask `S: Copy`, and only the function pointers are copied.
impl<S> Clone for Read<S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S> Copy for Read<S> {}

/// One exposed family: its name, its help text, and how a scrape reads it from `S`.
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

/// A block of pipeline families that one front end writes together, at one place of its
/// exposition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// The in-process module's pipeline (`aldb_bank_sink_*`).
    BankPipeline,
    /// The in-process module's snapshot writer (`aldb_bank_snapshot_*`).
    BankWriter,
    /// The geyser plugin's root records.
    PluginRecords,
    /// The geyser plugin's vote evidence and root cross-checks (zero in a stock build).
    PluginEvidence,
    /// The geyser plugin's fork-mode writer (`commitment: "processed"`), after its fork families.
    PluginForkWriter,
    /// The geyser plugin's submission latency.
    PluginSubmit,
    /// The geyser plugin's snapshot writer.
    PluginSnapshots,
    /// The geyser plugin's commit worker.
    PluginWorker,
}

/// Where a front end serves a statistic: its group there, and the name and help it has there.
#[derive(Debug, Clone, Copy)]
pub struct Exposed {
    /// The group it is written with.
    pub group: Group,
    /// The family's name.
    pub name: &'static str,
    /// Its help text.
    pub help: &'static str,
}

/// One statistic of the pipeline: how it is read, and how each front end that serves it names it
/// (`None`: that front end does not serve it).
#[derive(Clone, Copy)]
pub struct Statistic {
    /// How a scrape reads it.
    pub read: Read<NodeSources>,
    /// Its family in the geyser plugin's exposition.
    pub plugin: Option<Exposed>,
    /// Its family in the in-process module's exposition.
    pub bank: Option<Exposed>,
}

impl Statistic {
    /// The families of front end `group`'s statistic, if it belongs to `group`.
    fn family(&self, group: Group) -> Option<Family<NodeSources>> {
        [self.plugin, self.bank].into_iter().flatten().find(|e| e.group == group).map(|e| Family {
            name: e.name,
            help: e.help,
            read: self.read,
        })
    }
}

/// Writes the families of `group`, in the table's order.
pub fn write_group(f: &mut Families, group: Group, src: &NodeSources) {
    STATISTICS.iter().filter_map(|s| s.family(group)).for_each(|family| family.write(f, src));
}

/// The names `group` serves, in order (for tests and documentation).
pub fn names(group: Group) -> impl Iterator<Item = &'static str> {
    STATISTICS.iter().filter_map(move |s| s.family(group)).map(|family| family.name)
}

fn n(c: &AtomicU64) -> f64 {
    c.load(Relaxed) as f64
}

const fn at(group: Group, name: &'static str, help: &'static str) -> Option<Exposed> {
    Some(Exposed { group, name, help })
}

const fn counter(read: fn(&NodeSources) -> f64, plugin: Option<Exposed>, bank: Option<Exposed>) -> Statistic {
    Statistic { read: Read::Counter(read), plugin, bank }
}

const fn gauge(read: fn(&NodeSources) -> f64, plugin: Option<Exposed>, bank: Option<Exposed>) -> Statistic {
    Statistic { read: Read::Gauge(read), plugin, bank }
}

use Group::{
    BankPipeline, BankWriter, PluginEvidence, PluginForkWriter, PluginRecords, PluginSnapshots, PluginSubmit,
    PluginWorker,
};

/// Every statistic either front end serves. A group's families come in this order; the table
/// keeps each front end's order as it has always been.
pub const STATISTICS: &[Statistic] = &[
    // The pipeline: banks in, records and retries, the worker.
    counter(
        |s| n(&s.node.banks_queued),
        None,
        at(
            BankPipeline,
            "aldb_bank_sink_banks_queued_total",
            "Frozen banks (and bases) handed to the sink's writer thread.",
        ),
    ),
    counter(
        |s| n(&s.node.banks_merged),
        None,
        at(
            BankPipeline,
            "aldb_bank_sink_banks_merged_total",
            "Banks that found the queue full and were merged into their parent's queued bank (the parent's slot is not served).",
        ),
    ),
    counter(
        |s| n(&s.node.banks_lost),
        None,
        at(
            BankPipeline,
            "aldb_bank_sink_banks_lost_total",
            "Banks not written: the queue was full and could not take them merged, or their parent was not written.",
        ),
    ),
    counter(
        |s| n(&s.node.messages_dropped),
        None,
        at(
            BankPipeline,
            "aldb_bank_sink_messages_dropped_total",
            "Status and metadata messages dropped because the writer thread stopped taking them.",
        ),
    ),
    counter(
        |s| n(&s.node.banks_refused),
        None,
        at(
            BankPipeline,
            "aldb_bank_sink_banks_refused_total",
            "Banks the snapshot writer did not write and that were not tried again (directory gone, input refused, parent not written).",
        ),
    ),
    counter(
        |s| n(&s.node.writer_errors),
        None,
        at(
            BankPipeline,
            "aldb_bank_sink_writer_errors_total",
            "Submissions or marks the stopped snapshot writer refused.",
        ),
    ),
    gauge(
        |s| f64::from(u8::from(s.node.records_enabled.load(Relaxed))),
        at(
            PluginRecords,
            "aldb_records_enabled",
            "1 when root records are produced (a genesis hash is configured and the record log opened).",
        ),
        None,
    ),
    counter(
        |s| n(&s.node.records_produced),
        at(PluginRecords, "aldb_records_produced_total", "Root records appended to the record log."),
        at(BankPipeline, "aldb_bank_sink_records_produced_total", "Root records logged."),
    ),
    counter(
        |s| n(&s.node.records_signed),
        at(PluginRecords, "aldb_records_signed_total", "Root records appended with an attestation."),
        None,
    ),
    counter(
        |s| n(&s.node.records_skipped),
        at(
            PluginRecords,
            "aldb_records_skipped_total",
            "Committed slots at or below the newest logged record (replayed after a restart); never recorded twice.",
        ),
        None,
    ),
    counter(
        |s| n(&s.node.record_errors),
        at(
            PluginRecords,
            "aldb_record_errors_total",
            "Committed slots whose root record could not be produced or logged.",
        ),
        at(BankPipeline, "aldb_bank_sink_record_errors_total", "Root records that could not be made or logged."),
    ),
    counter(
        |s| n(&s.node.write_retries),
        None,
        at(
            BankPipeline,
            "aldb_bank_sink_write_retries_total",
            "Tries to write a held bank again after a failure that can pass (full disk, I/O error).",
        ),
    ),
    counter(
        |s| n(&s.node.write_recoveries),
        None,
        at(
            BankPipeline,
            "aldb_bank_sink_write_recoveries_total",
            "Held banks written by a retry, each ending a failure streak.",
        ),
    ),
    counter(
        |s| n(&s.node.retries_abandoned),
        None,
        at(
            BankPipeline,
            "aldb_bank_sink_retries_abandoned_total",
            "Held banks given up because their fork died, was passed by a root or replaced.",
        ),
    ),
    counter(
        |s| n(&s.node.panics),
        at(
            PluginWorker,
            "aldb_worker_panics_total",
            "Panics caught on the commit worker; it stops committing after one.",
        ),
        None,
    ),
    gauge(
        |s| n(&s.node.running),
        at(PluginWorker, "aldb_worker_running", "1 while the commit worker runs."),
        at(BankPipeline, "aldb_bank_sink_running", "1 while the sink's writer thread runs."),
    ),
    gauge(
        |s| n(&s.node.queued),
        None,
        at(BankPipeline, "aldb_bank_sink_queued", "Banks and messages waiting for the writer thread."),
    ),
    gauge(
        |s| n(&s.node.queued_bytes),
        None,
        at(BankPipeline, "aldb_bank_sink_queued_bytes", "Bytes of change sets and account data waiting."),
    ),
    gauge(
        |s| n(&s.node.write_failing),
        None,
        at(
            BankPipeline,
            "aldb_bank_sink_write_failing",
            "1 while the writer thread holds a bank whose write failed, trying it again.",
        ),
    ),
    gauge(
        |s| s.node.failure_streak().map_or(0.0, |d| d.as_secs_f64()),
        None,
        at(
            BankPipeline,
            "aldb_bank_sink_write_failure_streak_seconds",
            "How long the current failure streak has lasted (0 while writes succeed).",
        ),
    ),
    // Vote evidence and the root cross-check.
    counter(
        |s| n(&s.node.evidence.banks),
        at(PluginEvidence, "aldb_evidence_banks_total", "Bank entries appended to the vote-evidence log."),
        None,
    ),
    counter(
        |s| n(&s.node.evidence.votes),
        at(PluginEvidence, "aldb_evidence_votes_total", "Vote transactions appended to the vote-evidence log."),
        None,
    ),
    counter(
        |s| n(&s.node.evidence.dropped),
        at(PluginEvidence, "aldb_evidence_dropped_total", "Evidence items dropped on a full queue."),
        None,
    ),
    counter(
        |s| n(&s.node.evidence.rejected),
        at(
            PluginEvidence,
            "aldb_evidence_votes_rejected_total",
            "Vote transactions not logged: versioned, oversized, not a TowerSync, or bytes whose signatures fail.",
        ),
        None,
    ),
    counter(
        |s| n(&s.node.evidence.errors),
        at(PluginEvidence, "aldb_evidence_errors_total", "Failed appends or prunes of the vote-evidence log."),
        None,
    ),
    counter(
        |s| n(&s.node.evidence.roots_checked),
        at(
            PluginEvidence,
            "aldb_bank_roots_checked_total",
            "Slots whose root in block metadata V0_0_5 was compared with the plugin's.",
        ),
        None,
    ),
    counter(
        |s| n(&s.node.evidence.root_mismatches),
        at(
            PluginEvidence,
            "aldb_bank_root_mismatches_total",
            "Slots whose root in block metadata V0_0_5 differs from the plugin's.",
        ),
        None,
    ),
    counter(
        |s| n(&s.node.evidence.unexplained_bank_hashes),
        at(
            PluginEvidence,
            "aldb_bank_hashes_unexplained_total",
            "Banks whose hash does not follow from the h, root and next set in block metadata V0_0_5.",
        ),
        None,
    ),
    counter(
        |s| n(&s.node.evidence.sets),
        at(
            PluginEvidence,
            "aldb_evidence_sets_total",
            "Next epochs' validator sets appended to the vote-evidence log.",
        ),
        None,
    ),
    counter(
        |s| n(&s.node.evidence.set_mismatches),
        at(
            PluginEvidence,
            "aldb_evidence_set_mismatches_total",
            "Set encodings not logged: they do not decode, or do not hash to the bank's next_set_hash.",
        ),
        None,
    ),
    // Submissions to the snapshot writer.
    Statistic {
        read: Read::Histogram(|s| &s.node.submit_latency),
        plugin: at(
            PluginSubmit,
            "aldb_snapshot_submit_seconds",
            "Time handing one committed slot to the snapshot writer, waits on a full queue included.",
        ),
        bank: None,
    },
    // The snapshot writer.
    gauge(
        |s| s.writer.queue_depth() as f64,
        at(PluginSnapshots, "aldb_snapshot_queue_depth", "Committed slots waiting for the snapshot writer."),
        None,
    ),
    counter(
        |s| n(&s.node.snapshot_submitted),
        at(PluginSnapshots, "aldb_snapshot_submitted_total", "Committed slots handed to the snapshot writer."),
        None,
    ),
    counter(
        |s| n(&s.node.snapshot_skipped),
        at(
            PluginSnapshots,
            "aldb_snapshot_skipped_total",
            "Committed slots not written (writer stopped, or no change set).",
        ),
        None,
    ),
    counter(
        |s| n(&s.writer.published),
        at(PluginSnapshots, "aldb_snapshot_published_total", "Snapshot files published."),
        at(BankWriter, "aldb_bank_snapshot_files_published_total", "Snapshot files published."),
    ),
    gauge(
        |s| n(&s.writer.last_slot),
        at(PluginSnapshots, "aldb_snapshot_last_published_slot", "Newest published slot."),
        at(BankWriter, "aldb_bank_snapshot_last_slot", "The newest slot published."),
    ),
    counter(
        |s| n(&s.writer.full_waits),
        at(
            PluginSnapshots,
            "aldb_snapshot_full_queue_waits_total",
            "Submissions that found the writer's queue full and waited.",
        ),
        None,
    ),
    counter(
        |s| n(&s.writer.wait_nanos) / 1e9,
        at(
            PluginSnapshots,
            "aldb_snapshot_full_queue_wait_seconds_total",
            "Time the commit worker spent waiting on a full writer queue.",
        ),
        None,
    ),
    counter(
        |s| n(&s.writer.write_nanos) / 1e9,
        at(PluginSnapshots, "aldb_snapshot_write_seconds_total", "Time the writer spent writing and syncing files."),
        at(
            BankWriter,
            "aldb_bank_snapshot_write_seconds_total",
            "Time the snapshot writer spent writing and syncing published files.",
        ),
    ),
    counter(
        |s| n(&s.writer.bytes),
        at(PluginSnapshots, "aldb_snapshot_bytes_total", "Bytes of published snapshot files."),
        at(BankWriter, "aldb_bank_snapshot_bytes_total", "Bytes of snapshot files published."),
    ),
    counter(
        |s| n(&s.writer.account_bytes),
        at(PluginSnapshots, "aldb_snapshot_account_bytes_total", "Of those, bytes of account records."),
        None,
    ),
    counter(
        |s| n(&s.writer.refresh_bytes),
        at(PluginSnapshots, "aldb_snapshot_refresh_bytes_total", "Of those, bytes rewritten by the refresh cycle."),
        None,
    ),
    counter(
        |s| n(&s.writer.pruned_files),
        at(PluginSnapshots, "aldb_snapshot_pruned_files_total", "Snapshot files deleted by pruning."),
        at(BankWriter, "aldb_bank_snapshot_pruned_files_total", "Snapshot files deleted by retention."),
    ),
    counter(
        |s| n(&s.writer.errors),
        at(
            PluginSnapshots,
            "aldb_snapshot_errors_total",
            "Failed snapshot writes, retries included (the writer holds slots and retries; see aldb_snapshot_writer_failing).",
        ),
        at(BankWriter, "aldb_bank_snapshot_write_errors_total", "Failed snapshot writes (each failed try counts)."),
    ),
    gauge(
        |s| n(&s.writer.failing),
        at(
            PluginSnapshots,
            "aldb_snapshot_writer_failing",
            "1 while the snapshot writer cannot write and holds slots to retry, else 0.",
        ),
        None,
    ),
    counter(
        |s| n(&s.writer.recoveries),
        at(PluginSnapshots, "aldb_snapshot_recoveries_total", "Times the snapshot writer wrote again after failing."),
        None,
    ),
    counter(
        |s| n(&s.writer.gap_slots),
        at(
            PluginSnapshots,
            "aldb_snapshot_gap_slots_total",
            "Committed slots never written because the writer was failing (Hyades answers -32012 for them).",
        ),
        None,
    ),
    gauge(
        |s| n(&s.writer.stopped),
        at(
            PluginSnapshots,
            "aldb_snapshot_writer_stopped",
            "1 once the snapshot writer has stopped until restart (held data passed max_recovery_bytes), else 0.",
        ),
        None,
    ),
    // The fork-mode writer and the slot-status journal.
    gauge(
        |s| n(&s.writer.fork_banks),
        at(PluginForkWriter, "aldb_snapshot_fork_banks", "Written banks the fork-mode snapshot writer holds."),
        at(
            BankWriter,
            "aldb_bank_snapshot_fork_banks",
            "Written banks the fork-mode writer holds (its base included).",
        ),
    ),
    gauge(
        |s| n(&s.writer.fork_held_bytes),
        None,
        at(
            BankWriter,
            "aldb_bank_snapshot_fork_held_bytes",
            "Bytes of undo and redo lists the fork-mode writer's unrooted banks hold.",
        ),
    ),
    counter(
        |s| n(&s.writer.fork_switches),
        None,
        at(BankWriter, "aldb_bank_snapshot_fork_switches_total", "Times the writer's tables moved to another fork."),
    ),
    counter(
        |s| n(&s.writer.journal_errors),
        None,
        at(BankWriter, "aldb_bank_snapshot_journal_errors_total", "Failed appends to the slot-status journal."),
    ),
    counter(
        |s| n(&s.writer.fork_refused),
        at(
            PluginForkWriter,
            "aldb_snapshot_fork_refused_total",
            "Banks the fork-mode snapshot writer refused to write (their roots stand, their files are not served).",
        ),
        None,
    ),
    counter(
        |s| n(&s.writer.fork_rolled_back),
        at(
            PluginForkWriter,
            "aldb_snapshot_fork_rolled_back_total",
            "Banks whose undo list the fork-mode snapshot writer applied.",
        ),
        None,
    ),
    counter(
        |s| n(&s.writer.marks),
        at(PluginForkWriter, "aldb_snapshot_marks_total", "Status marks handed to the snapshot writer."),
        None,
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    const PLUGIN: [Group; 6] =
        [PluginRecords, PluginEvidence, PluginForkWriter, PluginSubmit, PluginSnapshots, PluginWorker];
    const BANK: [Group; 2] = [BankPipeline, BankWriter];

    #[test]
    fn each_front_end_names_its_own_groups_once() {
        let mut seen = std::collections::BTreeSet::new();
        for s in STATISTICS {
            assert!(s.plugin.is_some() || s.bank.is_some(), "a statistic no front end serves");
            if let Some(e) = s.plugin {
                assert!(PLUGIN.contains(&e.group), "{} is the plugin's but in {:?}", e.name, e.group);
                assert!(e.name.starts_with("aldb_") && !e.name.starts_with("aldb_bank_sink"), "{}", e.name);
            }
            if let Some(e) = s.bank {
                assert!(BANK.contains(&e.group), "{} is the module's but in {:?}", e.name, e.group);
                assert!(e.name.starts_with("aldb_bank_"), "{}", e.name);
            }
            for e in [s.plugin, s.bank].into_iter().flatten() {
                assert!(seen.insert(e.name), "{} is served twice", e.name);
                assert!(!e.help.is_empty() && e.help.ends_with('.'), "{}'s help", e.name);
            }
        }
    }
}
