//! Which slots have roots: each endpoint's root feed (`rootSubscribe` at the level followed),
//! caught up after every (re)connection with `getStateRoots` from the first undecided slot. Only
//! slot numbers leave here: what a server says of a slot's root is not trusted, the votes decide.
//!
//! A connection forwards the slots of its catch-up first, then the notifications that arrived
//! meanwhile, then live ones, so each endpoint's slots reach the acceptor in slot order.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use aldb_verify::Commitment;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::Message;

use crate::config::meets;
use crate::follow::stopped;
use crate::stats::{Stats, inc};

/// Slots asked for in one `getStateRoots` (Hyades' limit).
const PAGE: u64 = 1000;
/// Notifications held while catching up; more means the catch-up is hopelessly behind: reconnect.
const MAX_HELD: usize = 16_384;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest message read: a page of 1,000 roots is about 150 KB.
const MAX_MESSAGE: usize = 4 << 20;
/// A connection with a subscription sees pings answered; one silent this long is dead.
const SILENCE: Duration = Duration::from_secs(60);
const PING_EVERY: Duration = Duration::from_secs(15);

/// A slot an endpoint serves a root for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Announced {
    pub(crate) slot: u64,
}

/// What the feeds share with the acceptor.
#[derive(Debug)]
pub(crate) struct FeedShared {
    /// The first undecided slot: catch-up starts here, older slots are not forwarded.
    pub(crate) next_needed: AtomicU64,
    pub(crate) commitment: Commitment,
    pub(crate) stats: Arc<Stats>,
    pub(crate) backoff_initial: Duration,
    pub(crate) backoff_max: Duration,
}

/// Follows `url`'s roots until shutdown.
pub(crate) async fn follow(
    endpoint: usize,
    url: String,
    shared: Arc<FeedShared>,
    tx: mpsc::Sender<Announced>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut delay = shared.backoff_initial;
    loop {
        if *shutdown.borrow() {
            return;
        }
        let mut delivered = false;
        let why = match session(endpoint, &url, &shared, &tx, &mut shutdown, &mut delivered).await {
            None => return,
            Some(why) => why,
        };
        if let Some(s) = shared.stats.endpoints.get(endpoint) {
            inc(&s.disconnects, 1);
        }
        if delivered {
            delay = shared.backoff_initial;
        }
        log::warn!("{url}: {why}; following its roots again in {delay:?}");
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = stopped(&mut shutdown) => return,
        }
        delay = (delay * 2).min(shared.backoff_max);
    }
}

/// The slot of a root entry (a notification's result or a `getStateRoots` item) when it is at the
/// level followed and not an abandonment notice.
fn slot_of(entry: &Value, level: Commitment) -> Option<u64> {
    if entry.get("abandoned").and_then(Value::as_bool) == Some(true) {
        return None;
    }
    // Without a journal a server names no level: every root it serves is at least confirmed.
    let at = match entry.get("commitment").and_then(Value::as_str) {
        None => Commitment::Confirmed,
        Some(name) => Commitment::from_name(name)?,
    };
    if !meets(at, level) {
        return None;
    }
    entry.get("slot").and_then(Value::as_u64)
}

/// One connection; `None` on shutdown, else why it ended.
async fn session(
    endpoint: usize,
    url: &str,
    shared: &FeedShared,
    tx: &mpsc::Sender<Announced>,
    shutdown: &mut watch::Receiver<bool>,
    delivered: &mut bool,
) -> Option<String> {
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE))
        .max_frame_size(Some(MAX_MESSAGE));
    let connect = tokio_tungstenite::connect_async_with_config(url, Some(config), true);
    let ws = tokio::select! {
        r = tokio::time::timeout(CONNECT_TIMEOUT, connect) => match r {
            Ok(Ok((ws, _))) => ws,
            Ok(Err(e)) => return Some(format!("cannot connect: {e}")),
            Err(_) => return Some("connect timed out".into()),
        },
        _ = stopped(shutdown) => return None,
    };
    let (mut sink, mut stream) = ws.split();
    let level = shared.commitment;
    let subscribe =
        json!({"jsonrpc": "2.0", "id": 1, "method": "rootSubscribe", "params": [{"commitment": level.name()}]});
    if let Err(e) = sink.send(Message::text(subscribe.to_string())).await {
        return Some(format!("cannot subscribe: {e}"));
    }
    let mut from = shared.next_needed.load(Ordering::SeqCst);
    let mut held: Vec<u64> = Vec::new();
    let mut catching_up = true;
    let mut page_id: u64 = 2;
    let ask = |id: u64, from: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "getStateRoots", "params": [from, from.saturating_add(PAGE - 1)]})
            .to_string()
    };
    if let Err(e) = sink.send(Message::text(ask(page_id, from))).await {
        return Some(format!("cannot ask for roots: {e}"));
    }
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut heard = tokio::time::Instant::now();
    let stats = shared.stats.endpoints.get(endpoint)?;
    loop {
        let msg = tokio::select! {
            m = stream.next() => m,
            _ = ping.tick() => {
                if heard.elapsed() > SILENCE {
                    return Some(format!("silent for {SILENCE:?}"));
                }
                if let Err(e) = sink.send(Message::Ping(Vec::new().into())).await {
                    return Some(format!("ping failed: {e}"));
                }
                continue;
            }
            _ = stopped(shutdown) => {
                let _ = tokio::time::timeout(Duration::from_millis(200), sink.close()).await;
                return None;
            }
        };
        heard = tokio::time::Instant::now();
        let text = match msg {
            None => return Some("connection closed".into()),
            Some(Err(e)) => return Some(format!("connection failed: {e}")),
            Some(Ok(Message::Close(_))) => return Some("closed by the server".into()),
            Some(Ok(Message::Text(t))) => t,
            Some(Ok(_)) => continue,
        };
        let Ok(v) = serde_json::from_str::<Value>(text.as_str()) else {
            inc(&stats.bad_messages, 1);
            continue;
        };
        let mut slots: Vec<u64> = Vec::new();
        if v.get("method").and_then(Value::as_str) == Some("rootNotification") {
            match v.pointer("/params/result").and_then(|r| slot_of(r, level)) {
                Some(s) if catching_up => {
                    if held.len() >= MAX_HELD {
                        return Some(format!("more than {MAX_HELD} roots announced while catching up"));
                    }
                    held.push(s);
                }
                Some(s) => slots.push(s),
                None => {}
            }
        } else if v.get("id").and_then(Value::as_u64) == Some(1) {
            if let Some(e) = v.get("error") {
                return Some(format!("rootSubscribe failed: {}", crate::votes::quote(&e.to_string())));
            }
            continue;
        } else if v.get("id").and_then(Value::as_u64) == Some(page_id) {
            let newest = match (v.get("result"), v.get("error")) {
                (Some(r), _) => {
                    let list = r.get("value").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
                    slots.extend(list.iter().filter_map(|e| slot_of(e, level)));
                    r.pointer("/context/slot").and_then(Value::as_u64).unwrap_or(0)
                }
                // Nothing published yet: the notifications will say when there is.
                (None, Some(e)) if e.get("code").and_then(Value::as_i64) == Some(-32008) => 0,
                (None, e) => {
                    let e = e.map(Value::to_string).unwrap_or_default();
                    return Some(format!("getStateRoots from slot {from} failed: {}", crate::votes::quote(&e)));
                }
            };
            from = from.saturating_add(PAGE);
            if from <= newest {
                page_id += 1;
                if let Err(e) = sink.send(Message::text(ask(page_id, from))).await {
                    return Some(format!("cannot ask for roots: {e}"));
                }
            } else {
                catching_up = false;
                slots.append(&mut held);
            }
        } else {
            inc(&stats.bad_messages, 1);
            continue;
        }
        for slot in slots {
            if slot < shared.next_needed.load(Ordering::SeqCst) {
                continue;
            }
            stats.record_seen();
            if tx.send(Announced { slot }).await.is_err() {
                return None;
            }
            *delivered = true;
        }
    }
}
