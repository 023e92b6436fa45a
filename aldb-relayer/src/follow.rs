//! Following one Hyades server's record feed over WebSocket.
//!
//! Each endpoint has its own task: connect, `recordSubscribe` from the next slot it needs, hand
//! every well-formed record to the acceptor, and on any failure (refused connection, close —
//! including 4008 for a slow subscriber —, silence, an error answer) wait with exponential
//! backoff and subscribe again from the slot after the last one *this endpoint* delivered (or
//! after the last accepted slot, if that is further), so a reconnecting endpoint resumes with no
//! gap. Nothing an endpoint sends can stop the relayer: bad messages are logged and counted.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aldb_verify::record_json::{attested_record_from_json_value, AttestedRecord};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::Message;

use crate::stats::{inc, Stats};

/// JSON-RPC code Hyades answers when `fromSlot` was pruned.
pub(crate) const SLOT_PRUNED: i64 = -32001;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const PING_EVERY: Duration = Duration::from_secs(15);
/// A connection silent this long (no record, no pong) is dropped and reopened.
const SILENCE: Duration = Duration::from_secs(45);
/// Longest WebSocket message accepted (a record document is under 1 KiB with a few attestations).
const MAX_MESSAGE: usize = 1 << 20;

/// A record as one endpoint served it.
#[derive(Debug)]
pub(crate) struct Incoming {
    pub(crate) endpoint: usize,
    pub(crate) record: AttestedRecord,
}

/// What the follower tasks share with the acceptor.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The slot after the last accepted one (or the start slot).
    pub(crate) next_needed: AtomicU64,
    /// Whether a record has been accepted (an anchor exists).
    pub(crate) anchored: AtomicBool,
    pub(crate) stats: Arc<Stats>,
    pub(crate) backoff_initial: Duration,
    pub(crate) backoff_max: Duration,
}

enum End {
    /// Shutting down, or the acceptor is gone.
    Stop,
    /// The connection ended; reconnect.
    Lost(String),
}

/// Follows `url` until shutdown.
pub(crate) async fn follow(
    endpoint: usize,
    url: String,
    shared: Arc<Shared>,
    tx: mpsc::Sender<Incoming>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut own_next = shared.next_needed.load(Ordering::SeqCst);
    let mut delay = shared.backoff_initial;
    loop {
        if *shutdown.borrow() {
            return;
        }
        let from = own_next.max(shared.next_needed.load(Ordering::SeqCst));
        let before = own_next;
        let mut retry_now = false;
        let why = match session(endpoint, &url, from, &mut own_next, &shared, &tx, &mut shutdown, &mut retry_now).await {
            End::Stop => return,
            End::Lost(why) => why,
        };
        if let Some(stats) = shared.stats.endpoints.get(endpoint) {
            inc(&stats.disconnects, 1);
        }
        if own_next != before || retry_now {
            // It delivered something (or told us where to start): not a failing server.
            delay = shared.backoff_initial;
        }
        log::warn!("{url}: {why}; resubscribing from slot {} in {delay:?}", own_next.max(shared.next_needed.load(Ordering::SeqCst)));
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = stopped(&mut shutdown) => return,
        }
        delay = (delay * 2).min(shared.backoff_max);
    }
}

#[allow(clippy::too_many_arguments)]
async fn session(
    endpoint: usize,
    url: &str,
    from: u64,
    own_next: &mut u64,
    shared: &Shared,
    tx: &mpsc::Sender<Incoming>,
    shutdown: &mut watch::Receiver<bool>,
    retry_now: &mut bool,
) -> End {
    let Some(stats) = shared.stats.endpoints.get(endpoint) else { return End::Stop };
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE))
        .max_frame_size(Some(MAX_MESSAGE));
    let connect = tokio_tungstenite::connect_async_with_config(url, Some(config), true);
    let ws = tokio::select! {
        r = tokio::time::timeout(CONNECT_TIMEOUT, connect) => match r {
            Ok(Ok((ws, _))) => ws,
            Ok(Err(e)) => return End::Lost(format!("cannot connect: {e}")),
            Err(_) => return End::Lost("connect timed out".into()),
        },
        _ = stopped(shutdown) => return End::Stop,
    };
    let (mut sink, mut stream) = ws.split();
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "recordSubscribe", "params": [{"fromSlot": from}]});
    if let Err(e) = sink.send(Message::text(request.to_string())).await {
        return End::Lost(format!("cannot subscribe: {e}"));
    }
    log::info!("{url}: subscribing from slot {from}");
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut heard = Instant::now();
    loop {
        let msg = tokio::select! {
            m = stream.next() => m,
            _ = ping.tick() => {
                if heard.elapsed() > SILENCE {
                    return End::Lost(format!("silent for {SILENCE:?}"));
                }
                if let Err(e) = sink.send(Message::Ping(Vec::new().into())).await {
                    return End::Lost(format!("ping failed: {e}"));
                }
                continue;
            }
            _ = stopped(shutdown) => {
                let _ = tokio::time::timeout(Duration::from_millis(200), sink.close()).await;
                return End::Stop;
            }
        };
        heard = Instant::now();
        let text = match msg {
            None => return End::Lost("connection closed".into()),
            Some(Err(e)) => return End::Lost(format!("connection failed: {e}")),
            Some(Ok(Message::Close(frame))) => {
                return End::Lost(match frame {
                    Some(f) => format!("closed by the server: {} {}", u16::from(f.code), f.reason),
                    None => "closed by the server".into(),
                });
            }
            Some(Ok(Message::Text(t))) => t,
            Some(Ok(Message::Binary(_))) => {
                inc(&stats.bad_messages, 1);
                log::warn!("{url}: unexpected binary message");
                continue;
            }
            Some(Ok(_)) => continue,
        };
        let value: Value = match serde_json::from_str(text.as_str()) {
            Ok(v) => v,
            Err(e) => {
                inc(&stats.bad_messages, 1);
                log::warn!("{url}: message is not JSON: {e}");
                continue;
            }
        };
        if value.get("id").is_some_and(|id| id == 1) {
            if let Some(sub) = value.get("result") {
                log::debug!("{url}: subscription {sub}");
                continue;
            }
            let err = value.get("error").cloned().unwrap_or(Value::Null);
            let code = err.get("code").and_then(Value::as_i64);
            if code == Some(SLOT_PRUNED) && !shared.anchored.load(Ordering::SeqCst) {
                // No anchor yet: start from the oldest slot the server still holds.
                if let Some(oldest) = err.get("data").and_then(|d| d.get("oldestSlot")).and_then(Value::as_u64)
                    && oldest > *own_next
                {
                    *own_next = oldest;
                    *retry_now = true;
                }
            }
            return End::Lost(format!("recordSubscribe from slot {from} failed: {err}"));
        }
        if value.get("method").and_then(Value::as_str) != Some("recordNotification") {
            inc(&stats.bad_messages, 1);
            log::warn!("{url}: unexpected message {}", truncate(text.as_str()));
            continue;
        }
        let Some(doc) = value.get("params").and_then(|p| p.get("result")) else {
            inc(&stats.bad_messages, 1);
            log::warn!("{url}: notification without params.result");
            continue;
        };
        let record = match attested_record_from_json_value(doc) {
            Ok(r) => r,
            Err(e) => {
                inc(&stats.bad_messages, 1);
                log::warn!("{url}: bad record document: {e}");
                continue;
            }
        };
        inc(&stats.records, 1);
        *own_next = (*own_next).max(record.record.slot.saturating_add(1));
        if tx.send(Incoming { endpoint, record }).await.is_err() {
            return End::Stop;
        }
    }
}

fn truncate(s: &str) -> &str {
    match s.char_indices().nth(200) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// Resolves once `shutdown` is true (or its sender is gone).
pub(crate) async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|s| *s).await;
}
