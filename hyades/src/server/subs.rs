//! A WebSocket connection's subscriptions: root subscriptions on the broadcast feed, record
//! subscriptions as cursors into the record feed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use aldb_verify::Commitment;
use axum::extract::ws::Message;
use serde_json::json;
use tokio::sync::{broadcast, mpsc, watch};

use super::Shared;
use super::roots::RootEvent;
use super::ws::{Queued, RECORD_QUEUE};
use crate::levels::Level;
use crate::records::At;
use crate::rpc::{RpcError, Subscriptions, codes};

/// A record subscription: a cursor into the record feed.
#[derive(Debug)]
pub(super) struct RecordSub {
    /// The next feed position to send.
    next: u64,
    /// The feed head when it subscribed; positions from here on are live.
    live_start: u64,
    /// Records below this slot are skipped.
    from_slot: Option<u64>,
    /// Records of the other level are skipped.
    commitment: Option<Commitment>,
}

/// Why [`ConnSubs::pump`] stopped short of its subscriptions' records.
pub(super) enum PumpStop {
    /// A subscription's next record was pruned before it could be sent.
    Pruned,
    /// The server's response budget cannot take the next notification.
    Busy,
}

/// One WebSocket connection's subscriptions.
pub(super) struct ConnSubs {
    pub(super) shared: Arc<Shared>,
    /// Root subscription id → first feed position it receives, and the level it asked for.
    pub(super) ids: BTreeMap<u64, (u64, Option<Level>)>,
    /// The feed, only while there is a subscription, so an idle connection never lags.
    pub(super) feed: Option<broadcast::Receiver<Arc<RootEvent>>>,
    /// Record subscriptions by id.
    pub(super) records: BTreeMap<u64, RecordSub>,
    /// Wakes the connection when records are appended, while it has record subscriptions.
    pub(super) record_head_rx: Option<watch::Receiver<u64>>,
    /// The record feed's head as last seen.
    pub(super) record_head: u64,
}

impl ConnSubs {
    pub(super) fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            ids: BTreeMap::new(),
            feed: None,
            records: BTreeMap::new(),
            record_head_rx: None,
            record_head: 0,
        }
    }

    fn check_room(&self) -> Result<(), RpcError> {
        if self.ids.len() + self.records.len() >= self.shared.max_subscriptions {
            return Err(RpcError::with_data(
                codes::TOO_MANY_SUBSCRIPTIONS,
                format!("too many subscriptions: this connection already holds {}", self.shared.max_subscriptions),
                json!({"max": self.shared.max_subscriptions}),
            ));
        }
        Ok(())
    }

    /// Whether some record subscription has a record to send.
    pub(super) fn records_pending(&self) -> bool {
        self.records.values().any(|s| s.next < self.record_head)
    }

    /// Live record notifications due to this connection and not yet taken by its socket: those
    /// behind the cursors plus those queued for the writer.
    pub(super) fn records_buffered(&self, queued: usize) -> u64 {
        let behind: u64 =
            self.records.values().map(|s| self.record_head.saturating_sub(s.next.max(s.live_start))).sum();
        behind + queued as u64
    }

    /// Queues record notifications while the writer has room. An error when a subscription's
    /// next record was pruned from memory before it could be sent (a subscriber too slow), or
    /// the server's response budget cannot take the next notification.
    pub(super) fn pump(
        &mut self,
        first: mpsc::Permit<'_, Queued>,
        queue: &mpsc::Sender<Queued>,
    ) -> Result<(), PumpStop> {
        let records = self.shared.rpc.records();
        let mut permit = Some(first);
        // A bounded batch per wake-up, so requests on this connection are still read promptly.
        for _ in 0..RECORD_QUEUE {
            let Some((&id, sub)) = self.records.iter_mut().find(|(_, s)| s.next < self.record_head) else { break };
            let entry = match records.entry_at(sub.next) {
                At::Entry(e) => e,
                At::NotYet => break,
                At::Gone => return Err(PumpStop::Pruned),
            };
            sub.next += 1;
            if sub.from_slot.is_some_and(|f| entry.slot < f) || sub.commitment.is_some_and(|c| c != entry.commitment) {
                continue;
            }
            let p = match permit.take() {
                Some(p) => p,
                None => match queue.try_reserve() {
                    Ok(p) => p,
                    Err(_) => {
                        sub.next -= 1;
                        break;
                    }
                },
            };
            let note = format!(
                r#"{{"jsonrpc":"2.0","method":"recordNotification","params":{{"subscription":{id},"result":{}}}}}"#,
                entry.json
            );
            let Some(held) = self.shared.budget.try_reserve(note.len()) else { return Err(PumpStop::Busy) };
            p.send(Queued::new(Message::text(note), &self.shared.metrics, None, Some(held)));
            self.shared.metrics.records_served.inc();
        }
        Ok(())
    }
}

impl Subscriptions for ConnSubs {
    fn subscribe(&mut self) -> Result<u64, RpcError> {
        self.subscribe_at(None)
    }

    fn subscribe_at(&mut self, level: Option<Level>) -> Result<u64, RpcError> {
        self.check_room()?;
        // Receiver first, position second: every event numbered at or after the position is
        // sent after the receiver exists, so it is received; earlier ones are filtered out.
        if self.feed.is_none() {
            self.feed = Some(self.shared.feed.subscribe());
        }
        let start = self.shared.announced.load(Ordering::SeqCst);
        let id = self.shared.next_subscription.fetch_add(1, Ordering::Relaxed);
        self.ids.insert(id, (start, level));
        self.shared.metrics.subscribers.inc();
        Ok(id)
    }

    fn unsubscribe(&mut self, id: u64) -> bool {
        if self.ids.remove(&id).is_none() {
            return false;
        }
        self.shared.metrics.subscribers.dec();
        if self.ids.is_empty() {
            self.feed = None;
        }
        true
    }

    fn record_subscribe(&mut self, from_slot: Option<u64>, commitment: Option<Commitment>) -> Result<u64, RpcError> {
        self.check_room()?;
        let records = self.shared.rpc.records();
        // Receiver first: the head it shows is at least the cursor's live start, and every
        // later append wakes it.
        let rx = self.record_head_rx.get_or_insert_with(|| records.watch());
        let cursor = records.cursor(from_slot, commitment).map_err(|e| e.to_rpc())?;
        self.record_head = self.record_head.max(*rx.borrow_and_update());
        let id = self.shared.next_subscription.fetch_add(1, Ordering::Relaxed);
        self.records.insert(id, RecordSub { next: cursor.next, live_start: cursor.live_start, from_slot, commitment });
        self.shared.metrics.record_subscribers.inc();
        Ok(id)
    }

    fn record_unsubscribe(&mut self, id: u64) -> bool {
        if self.records.remove(&id).is_none() {
            return false;
        }
        self.shared.metrics.record_subscribers.dec();
        if self.records.is_empty() {
            self.record_head_rx = None;
        }
        true
    }
}

impl Drop for ConnSubs {
    fn drop(&mut self) {
        self.shared.metrics.subscribers.sub(self.ids.len() as i64);
        self.shared.metrics.record_subscribers.sub(self.records.len() as i64);
    }
}

pub(super) async fn next_root(
    feed: &mut Option<broadcast::Receiver<Arc<RootEvent>>>,
) -> Result<Arc<RootEvent>, broadcast::error::RecvError> {
    match feed {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// The record feed's new head, once records are appended.
pub(super) async fn next_record_head(rx: &mut Option<watch::Receiver<u64>>) -> u64 {
    match rx {
        Some(rx) => match rx.changed().await {
            Ok(()) => *rx.borrow_and_update(),
            // The feed lives as long as the service.
            Err(_) => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}
