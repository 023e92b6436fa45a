//! Prometheus metrics of the module: its own counters (roots computed, freeze time), and the node
//! pipeline's and the snapshot writer's (their families are `aldb_node::families`), served on
//! `GET /metrics` by [`MetricsServer`] when the config sets `metrics_addr`.
//!
//! Everything read here is an atomic, so a scrape never takes the module's lock: it neither
//! waits for replay nor makes replay wait.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

use aldb_metrics::Families;
pub(crate) use aldb_metrics::MetricsServer;
use aldb_node::Histogram;
use aldb_node::families::{Family, Group, NodeSources, Read, write_all, write_group};

/// Upper bounds (seconds) of the freeze time histogram's buckets.
const FREEZE_BOUNDS: [f64; 14] =
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0];

/// The module's own counters, kept on the replay thread (under the module's lock) and read by
/// scrapes.
#[derive(Debug)]
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

impl Default for ModuleStats {
    fn default() -> Self {
        Self {
            freezes: AtomicU64::new(0),
            bases: AtomicU64::new(0),
            call_errors: AtomicU64::new(0),
            banks_held: AtomicU64::new(0),
            rooted_slot: AtomicU64::new(0),
            freeze_time: Histogram::new(&FREEZE_BOUNDS),
        }
    }
}

/// What a scrape reads.
#[derive(Debug)]
pub(crate) struct Sources {
    pub(crate) module: Arc<ModuleStats>,
    /// The sink's: the pipeline's counters and the snapshot writer's.
    pub(crate) node: NodeSources,
}

/// Every metric in the Prometheus text format (version 0.0.4), in the tables' order.
pub(crate) fn render(src: &Sources) -> String {
    let mut f = Families::default();
    write_all(&mut f, &MODULE, &src.module);
    write_group(&mut f, Group::BankPipeline, &src.node);
    write_group(&mut f, Group::BankWriter, &src.node);
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
