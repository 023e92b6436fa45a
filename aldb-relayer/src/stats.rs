//! Counters: what each endpoint sent that was wrong, and what the chain did.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of one endpoint.
#[derive(Debug, Default)]
pub struct EndpointStats {
    /// Well-formed records received.
    pub records: AtomicU64,
    /// Messages that were not JSON, not a notification, or not a valid §9.5 document.
    pub bad_messages: AtomicU64,
    /// Attestations by configured identities whose signature does not verify.
    pub bad_signatures: AtomicU64,
    /// Attestations by identities outside the configured set.
    pub outsiders: AtomicU64,
    /// Records of another cluster.
    pub other_cluster: AtomicU64,
    /// Records below the configured commitment.
    pub low_commitment: AtomicU64,
    /// Records signed enough that cannot extend the chain (served by this endpoint first).
    pub unchained: AtomicU64,
    /// Connections lost or refused.
    pub disconnects: AtomicU64,
}

/// All counters.
#[derive(Debug, Default)]
pub struct Stats {
    /// Per endpoint, in configuration order.
    pub endpoints: Vec<EndpointStats>,
    /// Records accepted (output lines, including re-accepted ones after a crash).
    pub accepted: AtomicU64,
    /// Slot of the last accepted record.
    pub last_slot: AtomicU64,
    /// Slots with two attested records, or late conflicting attested records.
    pub conflicts: AtomicU64,
    /// Identities seen signing two records for one slot.
    pub equivocations: AtomicU64,
}

fn get(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

pub(crate) fn inc(c: &AtomicU64, n: u64) {
    if n > 0 {
        c.fetch_add(n, Ordering::Relaxed);
    }
}

impl Stats {
    /// Counters for `endpoints` endpoints.
    pub fn new(endpoints: usize) -> Self {
        Self { endpoints: (0..endpoints).map(|_| EndpointStats::default()).collect(), ..Self::default() }
    }

    /// One line per endpoint and a total, for the log.
    pub fn summary(&self, urls: &[String]) -> String {
        let mut s = format!(
            "accepted={} conflicts={} equivocations={}",
            get(&self.accepted),
            get(&self.conflicts),
            get(&self.equivocations)
        );
        for (i, e) in self.endpoints.iter().enumerate() {
            let _ = write!(
                s,
                "\n  {}: records={} bad_messages={} bad_signatures={} outsiders={} other_cluster={} low_commitment={} unchained={} disconnects={}",
                urls.get(i).map_or("?", String::as_str),
                get(&e.records),
                get(&e.bad_messages),
                get(&e.bad_signatures),
                get(&e.outsiders),
                get(&e.other_cluster),
                get(&e.low_commitment),
                get(&e.unchained),
                get(&e.disconnects),
            );
        }
        s
    }
}
