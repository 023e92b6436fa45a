//! Wiring: one follower task per endpoint, one acceptor thread that owns the chain state and
//! the output files.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use aldb_verify::hash_to_base58;
use tokio::sync::{mpsc, watch};

use crate::chain::{Accepted, Acceptor, Fault, IDENTITY_QUOTA, Ignored, MAX_CANDIDATES_PER_SLOT, Rules, Start};
use crate::config::{Config, Trust};
use crate::error::RelayError;
use crate::follow::{Incoming, Shared, follow};
use crate::ratelog::{LOG_INTERVAL, RateLog};
use crate::roots::{AcceptedRoot, RootLog};
use crate::stats::{Stats, inc};
use crate::store::Store;
use crate::votes::RootHook;
use crate::waiting::{WAITING_INTERVAL, Waiting};

/// Records queued from the followers to the acceptor.
const QUEUE: usize = 4096;

/// Called after an accepted root's output line (and cursor) are durable.
pub type AcceptHook = Arc<dyn Fn(&Accepted) + Send + Sync>;

/// A configured relayer.
pub struct Relayer {
    config: Config,
    stats: Arc<Stats>,
    on_accept: Option<AcceptHook>,
    on_root: Option<RootHook>,
}

impl std::fmt::Debug for Relayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relayer").field("config", &self.config).finish_non_exhaustive()
    }
}

fn short(h: &[u8; 32]) -> String {
    let s = hash_to_base58(h);
    s.chars().take(8).collect()
}

impl Relayer {
    /// A relayer for `config`.
    pub fn new(config: Config) -> Self {
        let stats = Arc::new(Stats::new(config.endpoints.len()));
        Self { config, stats, on_accept: None, on_root: None }
    }

    /// Calls `hook` for every accepted record once it is written (k-of-n only: a relayer on votes
    /// accepts no records; see [`on_root`](Self::on_root)).
    pub fn on_accept(mut self, hook: AcceptHook) -> Self {
        self.on_accept = Some(hook);
        self
    }

    /// Calls `hook` for every accepted root once it is written, in either mode, as `/roots`
    /// and `--json-lines` show it.
    pub fn on_root(mut self, hook: RootHook) -> Self {
        self.on_root = Some(hook);
        self
    }

    /// The counters (shared; they keep counting while [`run`](Self::run) runs).
    pub fn stats(&self) -> Arc<Stats> {
        self.stats.clone()
    }

    /// Runs until `shutdown` turns true, or the output cannot be written (or a stored root
    /// conflicts with an accepted one), which is an error.
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) -> Result<(), RelayError> {
        let Relayer { config, stats, mut on_accept, on_root } = self;
        let signers = match &config.trust {
            Trust::Signers(s) => s.clone(),
            Trust::Votes(v) => {
                let v = v.clone();
                return crate::votes::run(config, v, stats, on_root, shutdown).await;
            }
        };
        if let Some(root_hook) = on_root {
            let next = on_accept.take();
            on_accept = Some(Arc::new(move |a: &Accepted| {
                if let Some(h) = &next {
                    h(a);
                }
                root_hook(&AcceptedRoot::from_accepted(a));
            }));
        }
        let (store, resume) = Store::open(&config.output_file, &signers.cursor_file)?;
        // Read after the store cut any torn line, and before anything is accepted.
        let roots = match config.roots_addr {
            Some(addr) => {
                let log = RootLog::from_output(&config.output_file)
                    .map_err(|e| crate::error::StoreError::io("read", &config.output_file, e))?;
                let listener = crate::roots::bind(addr).await.map_err(|source| RelayError::Roots { addr, source })?;
                Some((Arc::new(log), listener))
            }
            None => None,
        };
        if resume.truncated > 0 {
            log::warn!("{}: cut off a torn last line ({} bytes)", config.output_file.display(), resume.truncated);
        }
        let start = resume.start(config.start_slot);
        match start {
            Start::Cursor(t) => {
                log::info!("resuming after slot {} (record {})", t.slot, hash_to_base58(&t.record_hash))
            }
            Start::Anchor { from_slot } => {
                log::info!(
                    "no cursor: the first record at or after slot {from_slot} signed by {} identities is the trust anchor",
                    signers.quorum.threshold()
                )
            }
        }
        if let (Some(c), Some((last, _))) = (resume.cursor, resume.last_output)
            && last > c.slot
        {
            log::warn!(
                "the output is ahead of the cursor (slot {last} > {}): those slots are checked, not written again",
                c.slot
            );
        }
        let acceptor = Acceptor::new(
            Rules { quorum: signers.quorum.clone(), genesis_hash: signers.genesis_hash, commitment: config.commitment },
            start,
        );
        let shared = Arc::new(Shared {
            next_needed: AtomicU64::new(acceptor.next_slot()),
            anchored: AtomicBool::new(acceptor.tip().is_some()),
            window_end: watch::Sender::new(acceptor.window_end()),
            rewind: watch::Sender::new(u64::MAX),
            quorum: signers.quorum.clone(),
            stats: stats.clone(),
            backoff_initial: config.backoff_initial,
            backoff_max: config.backoff_max,
        });
        let (tx, rx) = mpsc::channel::<Incoming>(QUEUE);
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut followers = Vec::new();
        if let Some(addr) = config.metrics_addr {
            let listener = crate::metrics::bind(addr).await.map_err(|source| RelayError::Metrics { addr, source })?;
            if let Ok(a) = listener.local_addr() {
                log::info!("metrics on http://{a}/metrics");
            }
            let urls = Arc::new(config.endpoints.clone());
            followers.push(tokio::spawn(crate::metrics::serve(listener, stats.clone(), urls, stop_rx.clone())));
        }
        if let Some((log, listener)) = roots {
            if let Ok(a) = listener.local_addr() {
                log::info!("accepted roots on http://{a}/roots?from=SLOT");
            }
            followers.push(tokio::spawn(crate::roots::serve(listener, log.clone(), stop_rx.clone())));
            let next = on_accept.take();
            on_accept = Some(Arc::new(move |a: &Accepted| {
                log.push(AcceptedRoot::from_accepted(a));
                if let Some(h) = &next {
                    h(a);
                }
            }));
        }
        if let Some(period) = config.quiet_warning {
            let urls = Arc::new(config.endpoints.clone());
            followers.push(tokio::spawn(crate::quiet::watch(stats.clone(), urls, period, stop_rx.clone())));
        }
        for (i, url) in config.endpoints.iter().enumerate() {
            followers.push(tokio::spawn(follow(i, url.clone(), shared.clone(), tx.clone(), stop_rx.clone())));
        }
        drop(tx);
        let urls = config.endpoints.clone();
        let accept_shared = shared.clone();
        let mut worker =
            tokio::task::spawn_blocking(move || accept_loop(acceptor, store, rx, &accept_shared, &urls, on_accept));
        let result = tokio::select! {
            r = &mut worker => r,
            _ = crate::follow::stopped(&mut shutdown) => {
                let _ = stop_tx.send(true);
                // Followers stop and drop their senders; the acceptor drains and returns.
                (&mut worker).await
            }
        };
        let _ = stop_tx.send(true);
        for f in followers {
            let _ = f.await;
        }
        log::info!("relayer stopped; {}", stats.summary(&config.endpoints));
        match result {
            Ok(r) => r,
            Err(e) => Err(RelayError::Task(e.to_string())),
        }
    }
}

fn accept_loop(
    mut acceptor: Acceptor,
    mut store: Store,
    mut rx: mpsc::Receiver<Incoming>,
    shared: &Shared,
    urls: &[String],
    on_accept: Option<AcceptHook>,
) -> Result<(), RelayError> {
    let stats = &shared.stats;
    let mut log = RateLog::new(LOG_INTERVAL);
    let quiet = &stats.log_suppressed;
    let mut waiting = Waiting::new(acceptor.rules().commitment, WAITING_INTERVAL, std::time::Instant::now());
    while let Some(Incoming { endpoint, record }) = rx.blocking_recv() {
        let url = urls.get(endpoint).map_or("?", String::as_str);
        let Some(es) = stats.endpoints.get(endpoint) else { continue };
        let slot = record.record.slot;
        let report = acceptor.offer(&record);
        waiting.seen(&record.record);
        match report.ignored {
            Some(Ignored::OtherCluster) => {
                inc(&es.other_cluster, 1);
                if let Some(n) = log.allow("other_cluster", endpoint, quiet) {
                    log::warn!(
                        "{url}: slot {slot}: record of genesis {}, not the configured cluster{n}",
                        hash_to_base58(&record.record.genesis_hash)
                    );
                }
            }
            Some(Ignored::Commitment) => {
                inc(&es.low_commitment, 1);
                // Every slot has a record at each level: one line per record would be noise. Why
                // nothing is accepted is said below, at most once per interval.
                log::debug!(
                    "{url}: slot {slot}: record at commitment {}, not the level followed",
                    record.record.commitment.name()
                );
            }
            Some(Ignored::Faulted) => {
                inc(&es.dropped_faulted, 1);
                log::debug!("{url}: slot {slot} is faulted; record ignored");
            }
            Some(Ignored::Stale | Ignored::BeforeStart) => inc(&es.dropped_stale, 1),
            Some(Ignored::Unsigned) => {
                inc(&es.dropped_unsigned, 1);
                if let Some(n) = log.allow("unsigned", endpoint, quiet) {
                    log::warn!(
                        "{url}: slot {slot}: record {} carries no valid signature by a configured identity; dropped{n}",
                        short(&record.record_hash)
                    );
                }
            }
            Some(Ignored::Ahead) => {
                // Followers hold such records back; one gets here only if it was queued before
                // the anchor created the window, and its follower has moved past it.
                inc(&es.dropped_ahead, 1);
                request_rewind(shared, slot);
            }
            Some(Ignored::SlotFull) => {
                inc(&es.dropped_slot_full, 1);
                if let Some(n) = log.allow("slot_full", endpoint, quiet) {
                    log::warn!(
                        "{url}: slot {slot}: already holds {MAX_CANDIDATES_PER_SLOT} different signed records; record dropped{n}"
                    );
                }
            }
            None => {}
        }
        inc(&es.bad_signatures, report.bad_signatures as u64);
        inc(&es.outsiders, report.outsiders as u64);
        if report.bad_signatures > 0
            && let Some(n) = log.allow("bad_signature", endpoint, quiet)
        {
            log::warn!(
                "{url}: slot {slot}: {} attestation(s) by configured identities do not verify{n}",
                report.bad_signatures
            );
        }
        inc(&stats.displaced, report.displaced as u64);
        inc(&stats.quota_evictions, report.quota_evictions as u64);
        inc(&stats.window_pruned, report.window_pruned as u64);
        if report.quota_evictions > 0
            && let Some(n) = log.allow("identity_quota", endpoint, quiet)
        {
            log::warn!(
                "an identity holds signatures for {IDENTITY_QUOTA} slots without an anchor; dropping its lowest{n}"
            );
        }
        if let Some(from) = report.rewind_to {
            log::info!(
                "the anchor's window ends below held records; {} dropped, delivered again from slot {from}",
                report.window_pruned
            );
            // The window first: the follower sent back resubscribes at once, and must already hold
            // back what lies beyond it, or it hands those records over again to be dropped as ahead.
            publish_window(shared, &acceptor);
            request_rewind(shared, from);
        }
        for u in &report.unchained {
            inc(&es.unchained, 1);
            if let Some(n) = log.allow("unchained", endpoint, quiet) {
                log::error!(
                    "{url}: slot {}: record {} is signed by enough identities but does not extend the accepted chain at slot {} \
                     (parent slot {:?}, {}); it will not be accepted. If every producer restarted a chain segment here, \
                     re-anchor the relayer (see README){n}",
                    u.slot,
                    hash_to_base58(&u.record_hash),
                    u.tip_slot,
                    u.parent_slot,
                    if u.chained { "chained to another record" } else { "not CHAINED: a new chain segment" },
                );
            }
        }
        for f in &report.faults {
            match f {
                // Conflicts need a quorum on two records per slot and fault the slot: never many.
                Fault::Conflict { slot, hashes } => {
                    inc(&stats.conflicts, 1);
                    log::error!(
                        "SAFETY FAULT: slot {slot}: two different records are each signed by enough identities ({} and {}); \
                         both refused, the chain stops here",
                        hash_to_base58(&hashes[0]),
                        hash_to_base58(&hashes[1])
                    );
                }
                Fault::ConflictWithAccepted { slot, accepted, other } => {
                    inc(&stats.conflicts, 1);
                    if let Some(n) = log.allow("conflict_with_accepted", endpoint, quiet) {
                        log::error!(
                            "SAFETY FAULT: {url}: slot {slot}: record {} is signed by enough identities but record {} was accepted{n}",
                            hash_to_base58(other),
                            hash_to_base58(accepted)
                        );
                    }
                }
                Fault::Equivocation { slot, identity } => {
                    inc(&stats.equivocations, 1);
                    if let Some(n) = log.allow("equivocation", endpoint, quiet) {
                        log::error!(
                            "{url}: slot {slot}: identity {} signed two different records; it no longer counts for this slot{n}",
                            hash_to_base58(identity)
                        );
                    }
                }
            }
        }
        for a in &report.accepted {
            let wrote = store.commit(a.record.slot, &a.record.state_root, &a.record_hash)?;
            inc(&stats.accepted, 1);
            stats.last_slot.store(a.record.slot, Ordering::Relaxed);
            shared.next_needed.store(a.record.slot.saturating_add(1), Ordering::SeqCst);
            shared.anchored.store(true, Ordering::SeqCst);
            let signers: Vec<String> = a.signers.iter().map(short).collect();
            log::info!(
                "accepted slot {} root {}{} record {} signed by {} (need {}) [{}]{}{}",
                a.record.slot,
                hash_to_base58(&a.record.state_root),
                a.record.bank_hash.map(|h| format!(" bank hash {}", hash_to_base58(&h))).unwrap_or_default(),
                short(&a.record_hash),
                a.signers.len(),
                acceptor.rules().quorum.threshold(),
                signers.join(","),
                if a.anchor { " (trust anchor)" } else { "" },
                if wrote { "" } else { " (already in the output)" },
            );
            if let Some(h) = &on_accept {
                h(a);
            }
        }
        if report.accepted.is_empty() {
            if let Some(line) =
                waiting.line(std::time::Instant::now(), acceptor.tip().map(|t| t.slot), acceptor.pending_slots())
            {
                log::info!("{line}");
            }
        } else {
            waiting.accepted(std::time::Instant::now());
            publish_window(shared, &acceptor);
        }
        stats.candidates.store(acceptor.candidates() as u64, Ordering::Relaxed);
        stats.pending_slots.store(acceptor.pending_slots() as u64, Ordering::Relaxed);
    }
    Ok(())
}

/// Tells the followers where the acceptor's window now ends (they hold back records beyond it).
fn publish_window(shared: &Shared, acceptor: &Acceptor) {
    shared.window_end.send_if_modified(|end| {
        let new = acceptor.window_end();
        std::mem::replace(end, new) != new
    });
}

/// Tells the followers that records from `slot` up were dropped after being delivered.
fn request_rewind(shared: &Shared, slot: u64) {
    // The lowest request wins; every request notifies, so each follower compares anew.
    shared.rewind.send_modify(|to| *to = (*to).min(slot));
}
