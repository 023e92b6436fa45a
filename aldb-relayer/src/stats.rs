//! Counters: what each endpoint sent that was wrong, and what the chain did.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Instant;

/// Milliseconds on the process's monotonic clock (from its first reading): when things
/// happened, for the atomics below.
pub fn clock_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    u64::try_from(START.get_or_init(Instant::now).elapsed().as_millis()).unwrap_or(u64::MAX)
}

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
    /// Records dropped: no attestation by a configured identity newly verified over them.
    pub dropped_unsigned: AtomicU64,
    /// Records dropped: at or above the window's end.
    pub dropped_ahead: AtomicU64,
    /// Records dropped: at or below the accepted slot, or below the start slot.
    pub dropped_stale: AtomicU64,
    /// Records dropped: their slot is faulted.
    pub dropped_faulted: AtomicU64,
    /// Records dropped: their slot already holds the most records, none signed less.
    pub dropped_slot_full: AtomicU64,
    /// Attestations dropped before the acceptor: past the per-identity limit of a record.
    pub attestations_trimmed: AtomicU64,
    /// [`clock_ms`] at the last well-formed record received; before the first, when the
    /// counters were made (the relayer's start).
    pub last_record_ms: AtomicU64,
    /// Times the endpoint went quiet for the configured period (each silence once).
    pub quiet_warnings: AtomicU64,
}

impl EndpointStats {
    /// Seconds since the last well-formed record (since the start, before the first), as of
    /// `now_ms` on [`clock_ms`].
    pub fn seconds_since_record(&self, now_ms: u64) -> f64 {
        now_ms.saturating_sub(self.last_record_ms.load(Ordering::Relaxed)) as f64 / 1000.0
    }

    /// Notes a well-formed record received now.
    pub(crate) fn record_seen(&self) {
        inc(&self.records, 1);
        self.last_record_ms.store(clock_ms(), Ordering::Relaxed);
    }
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
    /// Different records held, waiting for signatures or their parent (a gauge).
    pub candidates: AtomicU64,
    /// Slots held above the accepted one (a gauge).
    pub pending_slots: AtomicU64,
    /// Held records pushed out of a full slot by one with more signatures.
    pub displaced: AtomicU64,
    /// Held signatures dropped because their identity held too many.
    pub quota_evictions: AtomicU64,
    /// Held records dropped because the window moved below them (when the anchor is found).
    pub window_pruned: AtomicU64,
    /// Followers told to resubscribe lower because records they delivered were dropped.
    pub rewinds: AtomicU64,
    /// Log lines left out by the rate limit (their events are still counted).
    pub log_suppressed: AtomicU64,
    /// Votes mode: the newest trusted epoch (a gauge).
    pub epoch: AtomicU64,
    /// Votes mode: 1 once misbehaviour froze the light client (a gauge).
    pub frozen: AtomicU64,
    /// Votes mode: epoch transitions followed.
    pub epochs_followed: AtomicU64,
    /// Votes mode: slots given up without a root.
    pub given_up: AtomicU64,
    /// Votes mode: answers the light client refused (too little stake, bad transitions).
    pub votes_refused: AtomicU64,
    /// Votes mode: transitions the light client refused, by the refusal's name.
    transitions_refused: Mutex<BTreeMap<&'static str, u64>>,
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
        let now = clock_ms();
        let endpoint = || EndpointStats { last_record_ms: AtomicU64::new(now), ..EndpointStats::default() };
        Self { endpoints: (0..endpoints).map(|_| endpoint()).collect(), ..Self::default() }
    }

    /// Votes mode: transitions the light client refused, by the refusal's name (`wrong_set`,
    /// `insufficient_stake`, ...: `aldb_verify::epochs::EpochError::name`).
    pub fn transitions_refused(&self) -> BTreeMap<&'static str, u64> {
        self.transitions_refused.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Counts a transition refused for `reason`.
    pub(crate) fn transition_refused(&self, reason: &'static str) {
        let mut m = self.transitions_refused.lock().unwrap_or_else(PoisonError::into_inner);
        let n = m.entry(reason).or_default();
        *n = n.saturating_add(1);
    }

    /// One line per endpoint and a total, for the log.
    pub fn summary(&self, urls: &[String]) -> String {
        let mut s = format!(
            "accepted={} conflicts={} equivocations={} candidates={} pending_slots={} displaced={} quota_evictions={} \
             window_pruned={} log_suppressed={} epoch={} frozen={} epochs_followed={} given_up={} votes_refused={} \
             transitions_refused={{{}}}",
            get(&self.accepted),
            get(&self.conflicts),
            get(&self.equivocations),
            get(&self.candidates),
            get(&self.pending_slots),
            get(&self.displaced),
            get(&self.quota_evictions),
            get(&self.window_pruned),
            get(&self.log_suppressed),
            get(&self.epoch),
            get(&self.frozen),
            get(&self.epochs_followed),
            get(&self.given_up),
            get(&self.votes_refused),
            self.transitions_refused().iter().map(|(k, n)| format!("{k}:{n}")).collect::<Vec<_>>().join(","),
        );
        for (i, e) in self.endpoints.iter().enumerate() {
            let _ = write!(
                s,
                "\n  {}: records={} bad_messages={} bad_signatures={} outsiders={} other_cluster={} low_commitment={} unchained={} disconnects={} \
                 dropped unsigned={} ahead={} stale={} faulted={} slot_full={} attestations_trimmed={}",
                urls.get(i).map_or("?", String::as_str),
                get(&e.records),
                get(&e.bad_messages),
                get(&e.bad_signatures),
                get(&e.outsiders),
                get(&e.other_cluster),
                get(&e.low_commitment),
                get(&e.unchained),
                get(&e.disconnects),
                get(&e.dropped_unsigned),
                get(&e.dropped_ahead),
                get(&e.dropped_stale),
                get(&e.dropped_faulted),
                get(&e.dropped_slot_full),
                get(&e.attestations_trimmed),
            );
        }
        s
    }
}
