//! The pollers: the snapshot directory (or bucket) with its slot-status journal, and the record
//! log.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use aldb_format::records::RecordLogReader;
use aldb_format::status::{STATUS_FILE, StatusFollower};
use aldb_format::{SlotInfo, SnapshotError};
use tokio::sync::watch;

use super::Shared;
use super::roots::{Announcer, RootEvent, Said};
use crate::encode;
use crate::levels::{Levels, View};
use crate::metrics::Metrics;
use crate::records::RecordFeed;
use crate::replica::{LogKind, Replica};
use crate::source::Source;

/// The poller's view of the slot-status journal.
pub(super) struct Tracker {
    pub(super) dir: PathBuf,
    pub(super) follower: StatusFollower,
    /// Whether the journal was present, and the served range, when the view was last built.
    pub(super) built: Option<(bool, Option<u64>, Option<u64>)>,
}

/// What one refresh of the directory found.
pub(super) struct Refreshed {
    /// Slots newly published (in slot order).
    pub(super) fresh: Vec<SlotInfo>,
    /// The served slots, oldest first, when the levels' view was rebuilt.
    pub(super) served: Option<Vec<SlotInfo>>,
    /// Why the journal could not be read, if it could not.
    pub(super) journal_error: Option<String>,
}

/// Reads the journal, then the directory, and rebuilds the levels' view if anything changed.
pub(super) fn refresh_all(hyades: &Source, levels: &Levels, t: &mut Tracker) -> Result<Refreshed, SnapshotError> {
    // A bucket's manifest and logs first: the journal copied from a manifest names only files
    // that manifest names.
    hyades.sync()?;
    // The journal first: the writer journals a slot only after publishing its file, so every
    // file the journal names is in the listing that follows.
    let present = std::fs::symlink_metadata(t.dir.join(STATUS_FILE)).is_ok();
    let (mut changed, mut journal_error) = (false, None);
    if present {
        match t.follower.poll() {
            Ok(p) => changed = !p.entries.is_empty() || p.restarted,
            // The statuses read so far stay in force; the poller reports the error.
            Err(e) => journal_error = Some(e.to_string()),
        }
    }
    let fresh = hyades.refresh()?;
    let key = (present, hyades.oldest().map(|s| s.slot), hyades.latest().map(|s| s.slot));
    if !changed && fresh.is_empty() && t.built == Some(key) {
        return Ok(Refreshed { fresh, served: None, journal_error });
    }
    t.built = Some(key);
    let served = hyades.slots(0, u64::MAX);
    levels.set(View::build(present.then(|| t.follower.statuses()), &served));
    Ok(Refreshed { fresh, served: Some(served), journal_error })
}

/// Polls the journal and the directory, updates the gauges and announces new roots, the levels
/// they reach and their abandonment.
pub(super) async fn poll(
    shared: Arc<Shared>,
    interval: Duration,
    mut shutdown: watch::Receiver<bool>,
    tracker: Tracker,
) {
    let hyades = shared.rpc.hyades().clone();
    let levels = shared.rpc.levels().clone();
    let tracker = Arc::new(std::sync::Mutex::new(tracker));
    let mut announcer = Announcer::seed(&levels.view(), &hyades.slots(0, u64::MAX));
    let mut tick = tokio::time::interval(interval.max(Duration::from_millis(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The last refresh error logged, so a persistent failure is logged once, not every poll.
    let mut last_error: Option<String> = None;
    let mut last_journal_error: Option<String> = None;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
        let (h, l, t) = (hyades.clone(), levels.clone(), tracker.clone());
        // Listing and mapping files (and checksumming new ones) is blocking I/O.
        let refreshed = tokio::task::spawn_blocking(move || {
            let mut t = t.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            refresh_all(&h, &l, &mut t)
        })
        .await;
        let refreshed = match refreshed {
            Ok(Ok(r)) => {
                if last_error.take().is_some() {
                    log::info!("snapshot directory readable again");
                }
                r
            }
            Ok(Err(e)) => {
                shared.metrics.refresh_errors.inc();
                let msg = e.to_string();
                if last_error.as_deref() != Some(msg.as_str()) {
                    log::warn!("cannot refresh the snapshot directory: {msg}");
                    last_error = Some(msg);
                }
                continue;
            }
            Err(e) => {
                shared.metrics.refresh_errors.inc();
                log::error!("refresh task failed: {e}");
                continue;
            }
        };
        match &refreshed.journal_error {
            Some(msg) => {
                shared.metrics.refresh_errors.inc();
                if last_journal_error.as_deref() != Some(msg.as_str()) {
                    log::warn!("cannot read the slot-status journal (its last statuses stay in force): {msg}");
                    last_journal_error = Some(msg.clone());
                }
            }
            None => {
                if last_journal_error.take().is_some() {
                    log::info!("slot-status journal readable again");
                }
            }
        }
        shared.metrics.set_range(hyades.oldest().map(|s| s.slot), hyades.latest().map(|s| s.slot));
        shared.metrics.damaged_files.set(i64::try_from(hyades.damaged_files().len()).unwrap_or(i64::MAX));
        let view = levels.view();
        if refreshed.served.is_some() {
            shared.metrics.set_levels(view.counts());
        }
        for (info, says, before) in announcer.events(&view, &refreshed) {
            let seq = shared.announced.fetch_add(1, Ordering::SeqCst);
            let mut result = String::new();
            match says {
                Said::Abandoned => {
                    let level = match before {
                        Said::At(l) => Some(l),
                        _ => None,
                    };
                    encode::abandoned_json(&mut result, &info, level);
                    shared.metrics.roots_abandoned.inc();
                }
                Said::At(l) => {
                    encode::slot_json(&mut result, &info, Some(l));
                    if before == Said::Unknown {
                        shared.metrics.roots_published.inc();
                    }
                }
                Said::Unknown => {
                    encode::slot_json(&mut result, &info, None);
                    shared.metrics.roots_published.inc();
                }
            }
            let ev = RootEvent { seq, result, says, before };
            // An error only means nobody is subscribed right now.
            let _ = shared.feed.send(Arc::new(ev));
        }
    }
}

/// Reads what was appended to the record log and adds it to the feed; with a replica, first
/// the segments of its copy that were replaced by verified ones are read again, their records
/// taken into the spans they held damaged, and those spans dropped.
pub(super) fn refresh_records(
    reader: &std::sync::Mutex<RecordLogReader>,
    records: &RecordFeed,
    metrics: &Metrics,
    replica: Option<&Replica>,
) -> Result<usize, SnapshotError> {
    let mut reader = reader.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let repaired = replica.map(|r| r.take_repaired(LogKind::Records)).unwrap_or_default();
    for first in &repaired {
        reader.reread(*first);
    }
    let fresh = match reader.refresh() {
        Ok(fresh) => fresh,
        Err(e) => {
            // Read again (and their spans dropped) at the next refresh that succeeds.
            if let Some(r) = replica {
                r.requeue_repaired(LogKind::Records, repaired);
            }
            return Err(e);
        }
    };
    let damage = reader.take_damage();
    // The reader's totals count every span, also those its bounded report queue dropped.
    metrics.record_log_damage.inc_by(reader.bad_entries().saturating_sub(metrics.record_log_damage.get()));
    metrics
        .record_log_damaged_bytes
        .inc_by(reader.damaged_bytes().saturating_sub(metrics.record_log_damaged_bytes.get()));
    // The feed holds what is served; the reader need not keep its own copy.
    reader.forget_before(u64::MAX);
    drop(reader);
    let added = records.push(&fresh);
    records.forget_damage_in(&repaired);
    records.note_damage(&damage);
    metrics.records_published.inc_by(added as u64);
    metrics.set_record_range(records.range());
    Ok(added)
}

/// Polls the record log and feeds new records to the RPC methods and record subscriptions.
pub(super) async fn poll_records(
    reader: Arc<std::sync::Mutex<RecordLogReader>>,
    records: Arc<RecordFeed>,
    metrics: Arc<Metrics>,
    replica: Option<Arc<Replica>>,
    interval: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(interval.max(Duration::from_millis(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_error: Option<String> = None;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
        let (r, f, m, b) = (reader.clone(), records.clone(), metrics.clone(), replica.clone());
        match tokio::task::spawn_blocking(move || refresh_records(&r, &f, &m, b.as_deref())).await {
            Ok(Ok(_)) => {
                if last_error.take().is_some() {
                    log::info!("record log readable again");
                }
            }
            Ok(Err(e)) => {
                metrics.refresh_errors.inc();
                let msg = e.to_string();
                if last_error.as_deref() != Some(msg.as_str()) {
                    log::warn!("cannot refresh the record log: {msg}");
                    last_error = Some(msg);
                }
            }
            Err(e) => {
                metrics.refresh_errors.inc();
                log::error!("record refresh task failed: {e}");
            }
        }
    }
}
