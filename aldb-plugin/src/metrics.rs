//! Prometheus metrics: the plugin's own counters (callbacks, commit timing), the adapter's, and
//! the node pipeline's and the snapshot writer's (their families are `aldb_node::families`), in
//! the text exposition format (written by the `prometheus` crate's encoder, see [`Families`]),
//! served by a small HTTP responder on a thread of its own ([`MetricsServer`]).
//!
//! Everything read here is an atomic or a lock-free snapshot ([`geyser_adapter::Adapter::stats`]),
//! so a scrape never waits for a callback and a callback never waits for a scrape.
//!
//! The histograms recorded on the callback path stay hand-written rather than `prometheus`'
//! `Histogram`: that one finds its bucket by a linear search over the bounds (136 of them for
//! `aldb_callback_update_account_ns`) and adds to the float sum in a compare-and-swap loop, where
//! [`NanosHistogram`] takes its bucket from the leading zeros and does three relaxed adds.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{self, Relaxed};
use std::time::{Duration, Instant};

use aldb_metrics::Families;
pub(crate) use aldb_metrics::MetricsServer;

use aldb_node::families::{Group, NodeSources, write_group};
use aldb_node::{Histogram, LATENCY_BOUNDS, NodeStats, cumulative};
use aldb_snapshot::WriterStats;
use geyser_adapter::{Adapter, IgnoreReason, Irregularity, KeepAccounts, Stats};

/// Sub-buckets per power of two in [`NanosHistogram`] (about 19% resolution).
const NS_SUB_BITS: u32 = 2;
/// Buckets of [`NanosHistogram`]: up to 2^35 ns (34 s); longer calls only reach `+Inf`.
const NS_BUCKETS: usize = 34 << NS_SUB_BITS;

/// A log-linear histogram of nanoseconds (four buckets per power of two), cheap enough for the
/// per-account callback: one bucket index from the leading zeros and three relaxed atomic adds.
#[derive(Debug)]
pub(crate) struct NanosHistogram {
    buckets: [AtomicU64; NS_BUCKETS],
    count: AtomicU64,
    sum_nanos: AtomicU64,
}

impl Default for NanosHistogram {
    fn default() -> Self {
        Self {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            count: AtomicU64::new(0),
            sum_nanos: AtomicU64::new(0),
        }
    }
}

impl NanosHistogram {
    /// The bucket of `ns`: values below 4 have one each; above, the top three bits pick it.
    fn index(ns: u64) -> usize {
        let sub = 1u64 << NS_SUB_BITS;
        if ns < sub {
            return ns as usize;
        }
        let e = 63 - ns.leading_zeros();
        let frac = (ns >> (e - NS_SUB_BITS)) & (sub - 1);
        (((e + 1 - NS_SUB_BITS) as usize) << NS_SUB_BITS) + frac as usize
    }

    /// The largest value bucket `i` holds.
    fn upper(i: usize) -> u64 {
        let sub = 1usize << NS_SUB_BITS;
        if i < sub {
            return i as u64;
        }
        let e = (i >> NS_SUB_BITS) as u32 + NS_SUB_BITS - 1;
        let frac = (i & (sub - 1)) as u64;
        (((1u64 << NS_SUB_BITS) + frac + 1) << (e - NS_SUB_BITS)) - 1
    }

    pub(crate) fn observe(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        if let Some(b) = self.buckets.get(Self::index(ns)) {
            b.fetch_add(1, Relaxed);
        }
        self.count.fetch_add(1, Relaxed);
        self.sum_nanos.fetch_add(ns, Relaxed);
    }

    fn write(&self, f: &mut Families, name: &str, help: &str) {
        let buckets = cumulative(&self.buckets).enumerate().map(|(i, c)| (Self::upper(i) as f64, c));
        f.histogram(name, help, buckets, self.count.load(Relaxed), self.sum_nanos.load(Relaxed) as f64);
    }
}

/// Slots tracked by [`CommitLag`]: a `Processed` older than this many slots is forgotten.
const LAG_RING: usize = 4096;
/// Upper bounds of the slots-behind histogram.
const BEHIND_BOUNDS: [u64; 16] = [0, 1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 64, 128, 1024];

/// How far commits trail the validator: the time from a slot's `Processed` callback to its commit,
/// and how many slots the highest processed one is ahead when a slot commits. Lock-free: a ring
/// indexed by slot holds each recent slot's `Processed` time.
#[derive(Debug)]
pub(crate) struct CommitLag {
    epoch: Instant,
    /// `slot + 1` of the `Processed` recorded in each ring entry (0: none).
    slot: [AtomicU64; LAG_RING],
    /// Nanoseconds since `epoch` of that `Processed`.
    at: [AtomicU64; LAG_RING],
    /// The highest processed slot plus one (0: none yet).
    highest: AtomicU64,
    delay: Histogram,
    behind: [AtomicU64; BEHIND_BOUNDS.len()],
    behind_count: AtomicU64,
    behind_sum: AtomicU64,
}

impl Default for CommitLag {
    fn default() -> Self {
        let zeros = || std::array::from_fn(|_| AtomicU64::new(0));
        Self {
            epoch: Instant::now(),
            slot: zeros(),
            at: zeros(),
            highest: AtomicU64::new(0),
            delay: Histogram::new(&LATENCY_BOUNDS),
            behind: std::array::from_fn(|_| AtomicU64::new(0)),
            behind_count: AtomicU64::new(0),
            behind_sum: AtomicU64::new(0),
        }
    }
}

impl CommitLag {
    /// `Processed(slot)` arrived now.
    pub(crate) fn processed(&self, slot: u64) {
        let i = (slot % LAG_RING as u64) as usize;
        let now = u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
        if let (Some(s), Some(a)) = (self.slot.get(i), self.at.get(i)) {
            s.store(0, Ordering::Release);
            a.store(now, Ordering::Release);
            s.store(slot + 1, Ordering::Release);
        }
        self.highest.fetch_max(slot + 1, Relaxed);
    }

    /// `slot` was just committed to the engine.
    pub(crate) fn committed(&self, slot: u64) {
        let i = (slot % LAG_RING as u64) as usize;
        if let (Some(s), Some(a)) = (self.slot.get(i), self.at.get(i))
            && s.load(Ordering::Acquire) == slot + 1
        {
            let at = a.load(Ordering::Acquire);
            let now = u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.delay.observe(Duration::from_nanos(now.saturating_sub(at)));
        }
        let highest = self.highest.load(Relaxed);
        if highest > 0 {
            let behind = (highest - 1).saturating_sub(slot);
            if let Some(b) = BEHIND_BOUNDS.iter().position(|&b| behind <= b).and_then(|i| self.behind.get(i)) {
                b.fetch_add(1, Relaxed);
            }
            self.behind_count.fetch_add(1, Relaxed);
            self.behind_sum.fetch_add(behind, Relaxed);
        }
    }

    fn write(&self, f: &mut Families) {
        self.delay.write(
            f,
            "aldb_processed_to_commit_seconds",
            "Time from a slot's Processed callback to its commit to the engine (slots whose Processed came after the commit are not counted).",
        );
        f.histogram(
            "aldb_commit_slots_behind",
            "Highest processed slot minus the slot being committed, observed at each commit.",
            BEHIND_BOUNDS.iter().zip(cumulative(&self.behind)).map(|(&b, c)| (b as f64, c)),
            self.behind_count.load(Relaxed),
            self.behind_sum.load(Relaxed) as f64,
        );
    }
}

/// The callbacks, for per-callback error counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Callback {
    UpdateAccount,
    UpdateSlotStatus,
    EndOfStartup,
    BlockMetadata,
    Transaction,
}

impl Callback {
    const ALL: [Self; 5] =
        [Self::UpdateAccount, Self::UpdateSlotStatus, Self::EndOfStartup, Self::BlockMetadata, Self::Transaction];

    fn as_str(self) -> &'static str {
        match self {
            Self::UpdateAccount => "update_account",
            Self::UpdateSlotStatus => "update_slot_status",
            Self::EndOfStartup => "notify_end_of_startup",
            Self::BlockMetadata => "notify_block_metadata",
            Self::Transaction => "notify_transaction",
        }
    }
}

/// The plugin's own counters (the adapter, the pipeline and the writer keep theirs).
#[derive(Debug)]
pub(crate) struct PluginCounters {
    /// Callbacks that returned an error to the validator (bad input, not loaded), by callback.
    pub(crate) callback_errors: [AtomicU64; Callback::ALL.len()],
    /// Panics caught in callbacks, by callback.
    pub(crate) callback_panics: [AtomicU64; Callback::ALL.len()],
    /// Time in `commit_ready` calls that committed at least one slot.
    pub(crate) commit_latency: Histogram,
    /// Time spent in each `update_account` callback.
    pub(crate) update_account_ns: NanosHistogram,
    /// How far commits trail `Processed`.
    pub(crate) commit_lag: CommitLag,
    /// The node pipeline's counters: snapshots, records, the commit worker, the vote-evidence
    /// log and the root cross-check.
    pub(crate) node: Arc<NodeStats>,
}

impl Default for PluginCounters {
    fn default() -> Self {
        Self {
            callback_errors: Default::default(),
            callback_panics: Default::default(),
            commit_latency: Histogram::new(&LATENCY_BOUNDS),
            update_account_ns: NanosHistogram::default(),
            commit_lag: CommitLag::default(),
            node: Arc::default(),
        }
    }
}

impl PluginCounters {
    pub(crate) fn callback_error(&self, cb: Callback) {
        if let Some(c) = self.callback_errors.get(cb as usize) {
            c.fetch_add(1, Relaxed);
        }
    }

    pub(crate) fn callback_panic(&self, cb: Callback) {
        if let Some(c) = self.callback_panics.get(cb as usize) {
            c.fetch_add(1, Relaxed);
        }
    }

    /// Total panics caught in callbacks.
    pub(crate) fn panics(&self) -> u64 {
        self.callback_panics.iter().map(|c| c.load(Relaxed)).sum()
    }

    /// Total errors returned from callbacks.
    pub(crate) fn errors(&self) -> u64 {
        self.callback_errors.iter().map(|c| c.load(Relaxed)).sum()
    }
}

/// What a scrape reads.
pub(crate) struct Sources {
    pub(crate) adapter: Arc<Adapter<KeepAccounts>>,
    pub(crate) writer: Arc<WriterStats>,
    pub(crate) plugin: Arc<PluginCounters>,
}

/// An optional slot as a gauge: `-1` until there is one, so dashboards can tell "none yet" from 0.
fn slot_value(s: Option<u64>) -> f64 {
    s.map_or(-1.0, |s| s as f64)
}

/// The metrics of `commitment: "processed"` (all zero, or -1 for slots, under the others): the
/// fork engine's banks and rollbacks, the status changes of frozen banks, and the fork-mode
/// writer's.
fn write_forks(o: &mut Families, s: &Stats, node: &NodeSources) {
    let f = &s.forks;
    o.gauge("aldb_fork_banks_held", "Frozen banks above the rooted slot that the fork engine holds.", f.banks_held);
    o.gauge(
        "aldb_fork_held_bytes",
        "Bytes of updates and undo records the fork engine's unrooted banks hold.",
        f.held_bytes,
    );
    o.counter("aldb_fork_switches_total", "Times the fork engine's head moved to another fork.", f.switches);
    o.counter(
        "aldb_fork_slots_rolled_back_total",
        "Banks whose undo record a fork switch applied (rollbacks).",
        f.slots_rolled_back,
    );
    o.counter("aldb_fork_slots_reapplied_total", "Banks whose updates a fork switch applied again.", f.slots_reapplied);
    o.counter(
        "aldb_freezes_refused_total",
        "Freezes the fork engine refused (over its bound, or on a refused parent); the fork stalls there.",
        s.freezes_refused,
    );
    let banks = [("confirmed", s.banks_confirmed), ("finalized", s.banks_finalized), ("abandoned", s.banks_abandoned)]
        .map(|(status, v)| ([("status", status)], v as f64));
    o.counters(
        "aldb_bank_status_changes_total",
        "Frozen banks reported confirmed, finalized or abandoned (taken back: dead, replaced, or on a passed fork).",
        banks.iter().map(|(l, v)| (&l[..], *v)),
    );
    o.gauge(
        "aldb_queued_status_changes",
        "Status changes of frozen banks not yet taken by the commit worker.",
        s.queued_status_changes,
    );
    o.counter(
        "aldb_status_changes_dropped_total",
        "Status changes dropped because the queue was full (the worker stopped taking them).",
        s.status_changes_dropped,
    );
    o.gauge(
        "aldb_last_confirmed_slot",
        "The highest frozen bank reported confirmed (-1: none yet).",
        slot_value(s.last_confirmed_slot),
    );
    o.gauge(
        "aldb_last_finalized_slot",
        "The highest frozen bank reported finalized (-1: none yet).",
        slot_value(s.last_finalized_slot),
    );
    o.gauge(
        "aldb_status_lag_slots",
        "Highest processed slot minus the highest slot reported confirmed (-1: unknown).",
        slot_value(s.status_lag()),
    );
    write_group(o, Group::PluginForkWriter, node);
}

/// Renders every metric in the Prometheus text format (version 0.0.4).
pub(crate) fn render(src: &Sources) -> String {
    let s: Stats = src.adapter.stats();
    let p = &src.plugin;
    let node = &NodeSources { node: p.node.clone(), writer: src.writer.clone() };
    let mut families = Families::default();
    let o = &mut families;

    o.counter(
        "aldb_account_updates_total",
        "Account updates received from the validator, startup ones included.",
        s.updates_received,
    );
    o.counter("aldb_startup_account_updates_total", "Startup (snapshot) account updates accepted.", s.startup_updates);
    o.counter("aldb_slot_statuses_total", "Slot status notifications received.", s.statuses_received);
    o.counter(
        "aldb_slots_committed_total",
        "Slots committed to the engine (a root each), the genesis or startup base included.",
        s.slots_committed,
    );

    o.counter("aldb_block_metadata_total", "Block metadata notifications received.", s.blocks_received);
    o.counter(
        "aldb_slots_without_block_metadata_total",
        "Slots (not the genesis or startup base) committed before or without their block metadata.",
        s.slots_without_block,
    );
    write_group(o, Group::PluginRecords, node);
    write_group(o, Group::PluginEvidence, node);

    let dropped = [
        ("dead", s.slots_dropped_dead),
        ("abandoned", s.slots_dropped_abandoned),
        ("overflow", s.slots_dropped_overflow),
        ("refused", s.slots_dropped_refused),
    ]
    .map(|(reason, v)| ([("reason", reason)], v as f64));
    o.counters(
        "aldb_slots_dropped_total",
        "Slots whose buffered updates were discarded without a root, by reason.",
        dropped.iter().map(|(l, v)| (&l[..], *v)),
    );
    o.counter("aldb_slots_restarted_total", "Slots whose bank was created again (restarted).", s.slots_restarted);
    o.counter(
        "aldb_updates_discarded_total",
        "Buffered account updates discarded with dropped or restarted slots.",
        s.updates_discarded,
    );

    let ignored = IgnoreReason::ALL.map(|r| ([("reason", r.as_str())], s.ignored(r) as f64));
    o.counters(
        "aldb_ignored_events_total",
        "Events that changed nothing, by reason (update_below_base and status_below_base are routine).",
        ignored.iter().map(|(l, v)| (&l[..], *v)),
    );
    let irregular = Irregularity::ALL.map(|k| ([("kind", k.as_str())], s.irregular(k) as f64));
    o.counters(
        "aldb_irregular_events_total",
        "Events handled that should not happen in a healthy run, by kind.",
        irregular.iter().map(|(l, v)| (&l[..], *v)),
    );

    o.gauge(
        "aldb_pending_slots",
        "Slots tracked above the committed base, not yet committed or dropped.",
        s.pending_slots,
    );
    o.gauge("aldb_queued_commits", "Slots decided for commit but not yet applied to the engine.", s.queued_commits);
    o.gauge(
        "aldb_last_committed_slot",
        "The last slot committed to the engine (-1: none yet).",
        slot_value(s.last_committed_slot),
    );
    o.gauge(
        "aldb_base_slot",
        "The committed base: the last slot decided for commit (-1: none yet).",
        slot_value(s.base_slot),
    );
    o.gauge(
        "aldb_highest_processed_slot",
        "The highest slot the validator reported processed (-1: none yet).",
        slot_value(s.highest_processed_slot),
    );
    o.gauge(
        "aldb_commit_lag_slots",
        "Highest processed slot minus last committed slot (-1: unknown).",
        slot_value(s.lag()),
    );
    write_forks(o, &s, node);

    p.commit_latency.write(
        o,
        "aldb_commit_seconds",
        "Engine time per commit batch: commit_ready calls that committed at least one slot.",
    );
    write_group(o, Group::PluginSubmit, node);

    p.update_account_ns.write(
        o,
        "aldb_callback_update_account_ns",
        "Nanoseconds spent in each update_account callback (hashing and buffering one account update).",
    );
    p.commit_lag.write(o);

    write_group(o, Group::PluginSnapshots, node);

    let by_callback = |counts: &[AtomicU64; Callback::ALL.len()]| {
        Callback::ALL.map(|cb| {
            let v = counts.get(cb as usize).map_or(0, |c| c.load(Relaxed));
            ([("callback", cb.as_str())], v as f64)
        })
    };
    let errors = by_callback(&p.callback_errors);
    o.counters(
        "aldb_callback_errors_total",
        "Callbacks that returned an error to the validator, by callback.",
        errors.iter().map(|(l, v)| (&l[..], *v)),
    );
    let panics = by_callback(&p.callback_panics);
    o.counters(
        "aldb_callback_panics_total",
        "Panics caught inside callbacks (returned to the validator as errors), by callback.",
        panics.iter().map(|(l, v)| (&l[..], *v)),
    );
    write_group(o, Group::PluginWorker, node);
    families.encode()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sample_follows_the_text_format_and_has_its_family() {
        let config = geyser_adapter::AdapterConfig::new(
            geyser_adapter::Commitment::Confirmed,
            aldb_core::Config::for_leaves(16, 1),
        );
        let adapter = Arc::new(Adapter::with_retain(config, KeepAccounts).unwrap());
        let plugin = Arc::new(PluginCounters::default());
        plugin.callback_panic(Callback::UpdateSlotStatus);
        let text = render(&Sources { adapter, writer: Arc::new(WriterStats::default()), plugin });
        let mut typed = std::collections::BTreeSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
                assert!(typed.insert(name.to_string()), "family {name} declared twice");
                continue;
            }
            if line.starts_with("# HELP ") {
                continue;
            }
            let (series, value) = line.rsplit_once(' ').unwrap();
            value.parse::<f64>().unwrap_or_else(|_| panic!("bad value in {line}"));
            let name = series.split('{').next().unwrap();
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s).filter(|f| typed.contains(*f)))
                .unwrap_or(name);
            assert!(typed.contains(family), "{name} has no TYPE line before it");
            assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "{name}");
        }
        assert!(text.contains("aldb_callback_panics_total{callback=\"update_slot_status\"} 1\n"));
        assert!(text.contains("aldb_last_committed_slot -1\n"));
        assert!(text.contains("aldb_ignored_events_total{reason=\"update_below_base\"} 0\n"));
    }

    #[test]
    fn nanosecond_buckets_tile_the_range() {
        let mut prev = None;
        for i in 0..NS_BUCKETS {
            let hi = NanosHistogram::upper(i);
            assert_eq!(NanosHistogram::index(hi), i, "upper bound of bucket {i}");
            assert_eq!(NanosHistogram::index(hi + 1), i + 1, "past bucket {i}");
            if let Some(p) = prev {
                assert!(hi > p);
            }
            prev = Some(hi);
        }
        assert_eq!(NanosHistogram::upper(NS_BUCKETS - 1), (1 << 35) - 1);
        let h = NanosHistogram::default();
        h.observe(Duration::from_nanos(100));
        h.observe(Duration::from_secs(100));
        let mut f = Families::default();
        h.write(&mut f, "x", "help");
        let s = f.encode();
        assert!(s.contains("x_bucket{le=\"111\"} 1\n"), "{s}");
        assert!(s.contains("x_bucket{le=\"+Inf\"} 2\n"), "{s}");
    }

    #[test]
    fn commit_lag_pairs_processed_with_commits() {
        let lag = CommitLag::default();
        lag.processed(10);
        lag.processed(12);
        lag.committed(10);
        lag.committed(11); // no Processed recorded: only slots behind
        let mut f = Families::default();
        lag.write(&mut f);
        let s = f.encode();
        assert!(s.contains("aldb_processed_to_commit_seconds_count 1\n"), "{s}");
        assert!(s.contains("aldb_commit_slots_behind_bucket{le=\"1\"} 1\n"), "{s}");
        assert!(s.contains("aldb_commit_slots_behind_bucket{le=\"2\"} 2\n"), "{s}");
        assert!(s.contains("aldb_commit_slots_behind_count 2\n"), "{s}");
    }

    /// Every family the plugin exported before its exposition moved onto the `prometheus` crate,
    /// with its type and help text as they were: dashboards and alerts key on them.
    const FAMILIES: [(&str, &str, &str); 48] = [
        (
            "aldb_account_updates_total",
            "counter",
            "Account updates received from the validator, startup ones included.",
        ),
        ("aldb_startup_account_updates_total", "counter", "Startup (snapshot) account updates accepted."),
        ("aldb_slot_statuses_total", "counter", "Slot status notifications received."),
        (
            "aldb_slots_committed_total",
            "counter",
            "Slots committed to the engine (a root each), the genesis or startup base included.",
        ),
        ("aldb_block_metadata_total", "counter", "Block metadata notifications received."),
        (
            "aldb_slots_without_block_metadata_total",
            "counter",
            "Slots (not the genesis or startup base) committed before or without their block metadata.",
        ),
        (
            "aldb_records_enabled",
            "gauge",
            "1 when root records are produced (a genesis hash is configured and the record log opened).",
        ),
        ("aldb_records_produced_total", "counter", "Root records appended to the record log."),
        ("aldb_records_signed_total", "counter", "Root records appended with an attestation."),
        (
            "aldb_records_skipped_total",
            "counter",
            "Committed slots at or below the newest logged record (replayed after a restart); never recorded twice.",
        ),
        ("aldb_record_errors_total", "counter", "Committed slots whose root record could not be produced or logged."),
        (
            "aldb_slots_dropped_total",
            "counter",
            "Slots whose buffered updates were discarded without a root, by reason.",
        ),
        ("aldb_slots_restarted_total", "counter", "Slots whose bank was created again (restarted)."),
        (
            "aldb_updates_discarded_total",
            "counter",
            "Buffered account updates discarded with dropped or restarted slots.",
        ),
        (
            "aldb_ignored_events_total",
            "counter",
            "Events that changed nothing, by reason (update_below_base and status_below_base are routine).",
        ),
        ("aldb_irregular_events_total", "counter", "Events handled that should not happen in a healthy run, by kind."),
        ("aldb_pending_slots", "gauge", "Slots tracked above the committed base, not yet committed or dropped."),
        ("aldb_queued_commits", "gauge", "Slots decided for commit but not yet applied to the engine."),
        ("aldb_last_committed_slot", "gauge", "The last slot committed to the engine (-1: none yet)."),
        ("aldb_base_slot", "gauge", "The committed base: the last slot decided for commit (-1: none yet)."),
        ("aldb_highest_processed_slot", "gauge", "The highest slot the validator reported processed (-1: none yet)."),
        ("aldb_commit_lag_slots", "gauge", "Highest processed slot minus last committed slot (-1: unknown)."),
        ("aldb_snapshot_queue_depth", "gauge", "Committed slots waiting for the snapshot writer."),
        ("aldb_snapshot_submitted_total", "counter", "Committed slots handed to the snapshot writer."),
        ("aldb_snapshot_skipped_total", "counter", "Committed slots not written (writer stopped, or no change set)."),
        ("aldb_snapshot_published_total", "counter", "Snapshot files published."),
        ("aldb_snapshot_last_published_slot", "gauge", "Newest published slot."),
        (
            "aldb_snapshot_full_queue_waits_total",
            "counter",
            "Submissions that found the writer's queue full and waited.",
        ),
        (
            "aldb_snapshot_full_queue_wait_seconds_total",
            "counter",
            "Time the commit worker spent waiting on a full writer queue.",
        ),
        ("aldb_snapshot_write_seconds_total", "counter", "Time the writer spent writing and syncing files."),
        ("aldb_snapshot_bytes_total", "counter", "Bytes of published snapshot files."),
        ("aldb_snapshot_account_bytes_total", "counter", "Of those, bytes of account records."),
        ("aldb_snapshot_refresh_bytes_total", "counter", "Of those, bytes rewritten by the refresh cycle."),
        ("aldb_snapshot_pruned_files_total", "counter", "Snapshot files deleted by pruning."),
        (
            "aldb_snapshot_errors_total",
            "counter",
            "Failed snapshot writes, retries included (the writer holds slots and retries; see aldb_snapshot_writer_failing).",
        ),
        (
            "aldb_snapshot_writer_failing",
            "gauge",
            "1 while the snapshot writer cannot write and holds slots to retry, else 0.",
        ),
        ("aldb_snapshot_recoveries_total", "counter", "Times the snapshot writer wrote again after failing."),
        (
            "aldb_snapshot_gap_slots_total",
            "counter",
            "Committed slots never written because the writer was failing (Hyades answers -32012 for them).",
        ),
        (
            "aldb_snapshot_writer_stopped",
            "gauge",
            "1 once the snapshot writer has stopped until restart (held data passed max_recovery_bytes), else 0.",
        ),
        ("aldb_callback_errors_total", "counter", "Callbacks that returned an error to the validator, by callback."),
        (
            "aldb_callback_panics_total",
            "counter",
            "Panics caught inside callbacks (returned to the validator as errors), by callback.",
        ),
        ("aldb_worker_panics_total", "counter", "Panics caught on the commit worker; it stops committing after one."),
        ("aldb_worker_running", "gauge", "1 while the commit worker runs."),
        (
            "aldb_commit_seconds",
            "histogram",
            "Engine time per commit batch: commit_ready calls that committed at least one slot.",
        ),
        (
            "aldb_snapshot_submit_seconds",
            "histogram",
            "Time handing one committed slot to the snapshot writer, waits on a full queue included.",
        ),
        (
            "aldb_callback_update_account_ns",
            "histogram",
            "Nanoseconds spent in each update_account callback (hashing and buffering one account update).",
        ),
        (
            "aldb_processed_to_commit_seconds",
            "histogram",
            "Time from a slot's Processed callback to its commit to the engine (slots whose Processed came after the commit are not counted).",
        ),
        (
            "aldb_commit_slots_behind",
            "histogram",
            "Highest processed slot minus the slot being committed, observed at each commit.",
        ),
    ];

    #[test]
    fn every_family_of_before_is_still_exported_unchanged() {
        let config = geyser_adapter::AdapterConfig::new(
            geyser_adapter::Commitment::Confirmed,
            aldb_core::Config::for_leaves(16, 1),
        );
        let adapter = Arc::new(Adapter::with_retain(config, KeepAccounts).unwrap());
        let text = render(&Sources { adapter, writer: Arc::new(WriterStats::default()), plugin: Arc::default() });
        for (name, kind, help) in FAMILIES {
            assert!(text.contains(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n")), "{name} lost or changed");
            let sample = if kind == "histogram" { format!("{name}_count ") } else { name.to_string() };
            assert!(text.lines().any(|l| l.starts_with(&sample)), "{name} has no sample");
        }
        // The labelled families keep their label names and every value.
        let mut series: Vec<String> = ["dead", "abandoned", "overflow"]
            .iter()
            .map(|r| format!("aldb_slots_dropped_total{{reason=\"{r}\"}} 0"))
            .collect();
        series.extend(IgnoreReason::ALL.map(|r| format!("aldb_ignored_events_total{{reason=\"{}\"}} 0", r.as_str())));
        series.extend(Irregularity::ALL.map(|k| format!("aldb_irregular_events_total{{kind=\"{}\"}} 0", k.as_str())));
        for cb in ["update_account", "update_slot_status", "notify_end_of_startup", "notify_block_metadata"] {
            series.push(format!("aldb_callback_errors_total{{callback=\"{cb}\"}} 0"));
            series.push(format!("aldb_callback_panics_total{{callback=\"{cb}\"}} 0"));
        }
        for s in series {
            assert!(text.lines().any(|l| l == s), "{s} missing");
        }
        // Bucket bounds print as before: plain decimals, no exponent, no trailing `.0`.
        for line in [
            "aldb_commit_seconds_bucket{le=\"0.001\"} 0",
            "aldb_commit_seconds_bucket{le=\"60\"} 0",
            "aldb_commit_slots_behind_bucket{le=\"1024\"} 0",
            "aldb_callback_update_account_ns_bucket{le=\"34359738367\"} 0",
            "aldb_callback_update_account_ns_bucket{le=\"+Inf\"} 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing");
        }
    }
}
