//! Following one Hyades server's record feed over WebSocket.
//!
//! Each endpoint has its own task: connect, `recordSubscribe` from the next slot it needs, hand
//! every well-formed record to the acceptor, and on any failure (refused connection, close —
//! including 4008 for a slow subscriber —, silence, an error answer) wait with exponential
//! backoff and subscribe again from the slot after the last one *this endpoint* delivered (or
//! after the last accepted slot, if that is further), so a reconnecting endpoint resumes with no
//! gap. Nothing an endpoint sends can stop the relayer: bad messages are counted, and logged at
//! most once per reason every 10 s.
//!
//! What one endpoint can make the relayer hold is bounded here: a message is at most
//! [`MAX_MESSAGE`] bytes; of a record's attestations only those by configured identities are
//! kept, at most [`MAX_ATTESTATIONS_PER_IDENTITY`] each; and a record at or above the acceptor's
//! window is not handed over but waited on (the task stops reading that connection until the
//! accepted chain comes within reach), so an honest endpoint far ahead loses nothing and a lying
//! one only stalls itself.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use aldb_verify::Quorum;
use aldb_verify::record_json::{AttestedRecord, RecordJsonError, attested_record_from_json_value};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::Message;

use crate::ratelog::{LOG_INTERVAL, RateLog};
use crate::stats::{Stats, inc};

/// JSON-RPC code Hyades answers when `fromSlot` was pruned.
pub(crate) const SLOT_PRUNED: i64 = -32001;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const PING_EVERY: Duration = Duration::from_secs(15);
/// A connection silent this long (no record, no pong) is dropped and reopened.
const SILENCE: Duration = Duration::from_secs(45);
/// Longest WebSocket message accepted (a record document is under 1 KiB with a few attestations).
pub const MAX_MESSAGE: usize = 1 << 20;
/// Attestations kept per configured identity in one record: Hyades serves one, and a second lets
/// a valid signature after an invalid one still count; more only cost verifications.
pub const MAX_ATTESTATIONS_PER_IDENTITY: usize = 2;
/// Longest piece of a server's text quoted in a log line or error.
const QUOTE: usize = 200;

/// One text message from a Hyades record feed, as the relayer reads it.
#[derive(Debug)]
// Each message is taken apart as soon as it is read; boxing the record would cost an allocation
// per record for nothing.
#[allow(clippy::large_enum_variant)]
pub enum FeedMessage {
    /// The answer to the `recordSubscribe` request (id 1): the subscription is live.
    Subscribed,
    /// The `recordSubscribe` request failed.
    SubscribeFailed {
        /// The JSON-RPC error code, if it has one.
        code: Option<i64>,
        /// With code -32001 (the slot was pruned): the oldest slot the server still holds.
        oldest_slot: Option<u64>,
        /// The error object as text, cut to 200 characters.
        error: String,
    },
    /// A `recordNotification` with a well-formed §9.5 document (attestations not verified).
    Record(AttestedRecord),
}

/// Why a feed message is not one the relayer can use. The text never quotes more than 200
/// characters of the message.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BadMessage {
    /// Not JSON.
    #[error("message is not JSON: {0}")]
    NotJson(String),
    /// JSON, but neither the subscription's answer nor a record notification.
    #[error("unexpected message {0}")]
    Unexpected(String),
    /// A record notification without `params.result`.
    #[error("notification without params.result")]
    NoResult,
    /// The document is not a valid §9.5 record.
    #[error("bad record document: {0}")]
    BadRecord(#[from] RecordJsonError),
}

/// Reads one text message of a record feed: the answer to `recordSubscribe` (request id 1) or a
/// `recordNotification`. Any text gives an answer or an error, never a panic.
pub fn parse_message(text: &str) -> Result<FeedMessage, BadMessage> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| BadMessage::NotJson(quote(&e.to_string()).to_string()))?;
    if value.get("id").is_some_and(|id| id == 1) {
        if value.get("result").is_some() {
            return Ok(FeedMessage::Subscribed);
        }
        let err = value.get("error").cloned().unwrap_or(Value::Null);
        let code = err.get("code").and_then(Value::as_i64);
        let oldest_slot = err.get("data").and_then(|d| d.get("oldestSlot")).and_then(Value::as_u64);
        return Ok(FeedMessage::SubscribeFailed { code, oldest_slot, error: quote(&err.to_string()).to_string() });
    }
    if value.get("method").and_then(Value::as_str) != Some("recordNotification") {
        return Err(BadMessage::Unexpected(quote(text).to_string()));
    }
    let doc = value.get("params").and_then(|p| p.get("result")).ok_or(BadMessage::NoResult)?;
    Ok(FeedMessage::Record(attested_record_from_json_value(doc)?))
}

/// Keeps only the attestations the acceptor could use: by configured identities, at most
/// [`MAX_ATTESTATIONS_PER_IDENTITY`] each, no exact repeats. Returns `(outsiders, trimmed)`.
pub(crate) fn trim_attestations(rec: &mut AttestedRecord, quorum: &Quorum) -> (usize, usize) {
    let (mut outsiders, mut trimmed) = (0, 0);
    let mut kept: Vec<aldb_verify::record::Attestation> = Vec::new();
    for a in rec.attestations.drain(..) {
        if !quorum.contains(&a.identity) {
            outsiders += 1;
        } else if kept.contains(&a)
            || kept.iter().filter(|k| k.identity == a.identity).count() >= MAX_ATTESTATIONS_PER_IDENTITY
        {
            trimmed += 1;
        } else {
            kept.push(a);
        }
    }
    rec.attestations = kept;
    (outsiders, trimmed)
}

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
    /// The acceptor's window end: records at or above it are held back, not delivered.
    pub(crate) window_end: watch::Sender<u64>,
    /// The acceptor dropped records delivered from this slot up (after the anchor moved the
    /// window below them): a follower past it subscribes again from there.
    pub(crate) rewind: watch::Sender<u64>,
    /// The configured identities, to trim attestations before they are queued.
    pub(crate) quorum: Quorum,
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
    let mut log = RateLog::new(LOG_INTERVAL);
    let mut rewind = shared.rewind.subscribe();
    loop {
        if *shutdown.borrow() {
            return;
        }
        if rewind.has_changed().unwrap_or(false) {
            // A rewind while no connection was open: resubscribe from there.
            let _ = lower(&mut own_next, &shared, &mut rewind);
        }
        let from = own_next.max(shared.next_needed.load(Ordering::SeqCst));
        let before = own_next;
        let mut retry_now = false;
        let mut link = Link { endpoint, url: &url, own_next: &mut own_next, retry_now: &mut retry_now, log: &mut log };
        let why = match session(&mut link, from, &shared, &tx, &mut shutdown, &mut rewind).await {
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
        if let Some(n) = log.allow("disconnect", endpoint, &shared.stats.log_suppressed) {
            let again = own_next.max(shared.next_needed.load(Ordering::SeqCst));
            log::warn!("{url}: {why}; resubscribing from slot {again} in {delay:?}{n}");
        }
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = stopped(&mut shutdown) => return,
        }
        delay = (delay * 2).min(shared.backoff_max);
    }
}

/// One follower's state that outlives a connection.
struct Link<'a> {
    endpoint: usize,
    url: &'a str,
    own_next: &'a mut u64,
    retry_now: &'a mut bool,
    log: &'a mut RateLog,
}

impl Link<'_> {
    /// Counts a bad message, and logs it within the rate limit.
    fn bad(&mut self, stats: &Stats, reason: &'static str, what: &dyn std::fmt::Display) {
        if let Some(es) = stats.endpoints.get(self.endpoint) {
            inc(&es.bad_messages, 1);
        }
        if let Some(n) = self.log.allow(reason, self.endpoint, &stats.log_suppressed) {
            log::warn!("{}: {what}{n}", self.url);
        }
    }
}

async fn session(
    link: &mut Link<'_>,
    from: u64,
    shared: &Shared,
    tx: &mpsc::Sender<Incoming>,
    shutdown: &mut watch::Receiver<bool>,
    rewind: &mut watch::Receiver<u64>,
) -> End {
    let url = link.url;
    let Some(stats) = shared.stats.endpoints.get(link.endpoint) else { return End::Stop };
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
    if let Some(n) = link.log.allow("subscribe", link.endpoint, &shared.stats.log_suppressed) {
        log::info!("{url}: subscribing from slot {from}{n}");
    }
    let mut window = shared.window_end.subscribe();
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
            r = rewind.changed() => {
                if r.is_err() {
                    return End::Stop;
                }
                if let Some(why) = rewound(link, shared, rewind) {
                    return End::Lost(why);
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
                    Some(f) => format!("closed by the server: {} {}", u16::from(f.code), quote(&f.reason)),
                    None => "closed by the server".into(),
                });
            }
            Some(Ok(Message::Text(t))) => t,
            Some(Ok(Message::Binary(_))) => {
                link.bad(&shared.stats, "binary", &"unexpected binary message");
                continue;
            }
            Some(Ok(_)) => continue,
        };
        let mut record = match parse_message(text.as_str()) {
            Ok(FeedMessage::Record(r)) => r,
            Ok(FeedMessage::Subscribed) => {
                log::debug!("{url}: subscribed");
                continue;
            }
            Ok(FeedMessage::SubscribeFailed { code, oldest_slot, error }) => {
                if code == Some(SLOT_PRUNED)
                    && !shared.anchored.load(Ordering::SeqCst)
                    && let Some(oldest) = oldest_slot
                    && oldest > *link.own_next
                {
                    // No anchor yet: start from the oldest slot the server still holds.
                    *link.own_next = oldest;
                    *link.retry_now = true;
                }
                return End::Lost(format!("recordSubscribe from slot {from} failed: {error}"));
            }
            Err(e) => {
                let reason = match e {
                    BadMessage::NotJson(_) => "not_json",
                    BadMessage::Unexpected(_) => "unexpected",
                    BadMessage::NoResult => "no_result",
                    BadMessage::BadRecord(_) => "bad_record",
                };
                link.bad(&shared.stats, reason, &e);
                continue;
            }
        };
        stats.record_seen();
        let (outsiders, trimmed) = trim_attestations(&mut record, &shared.quorum);
        inc(&stats.outsiders, outsiders as u64);
        inc(&stats.attestations_trimmed, trimmed as u64);
        let slot = record.record.slot;
        if slot >= *window.borrow_and_update() {
            // Too far ahead of the accepted chain to be held: stop reading until it is within
            // reach, so it is handed over later rather than lost. The server may drop this
            // connection as a slow subscriber meanwhile; then it resumes from here.
            while slot >= *window.borrow_and_update() {
                tokio::select! {
                    r = window.changed() => if r.is_err() { return End::Stop },
                    r = rewind.changed() => {
                        if r.is_err() {
                            return End::Stop;
                        }
                        if let Some(why) = rewound(link, shared, rewind) {
                            return End::Lost(why);
                        }
                    }
                    _ = stopped(shutdown) => return End::Stop,
                }
            }
            heard = Instant::now();
        }
        if tx.send(Incoming { endpoint: link.endpoint, record }).await.is_err() {
            return End::Stop;
        }
        *link.own_next = (*link.own_next).max(slot.saturating_add(1));
    }
}

/// After a rewind notice: the reason to resubscribe, if this follower is past the rewind slot.
fn rewound(link: &mut Link<'_>, shared: &Shared, rewind: &mut watch::Receiver<u64>) -> Option<String> {
    let to = lower(link.own_next, shared, rewind)?;
    *link.retry_now = true;
    Some(format!("records it delivered from slot {to} up were dropped when the window moved; delivering them again"))
}

/// Moves `own_next` down to the rewind slot (never below the next needed one) if it is past it;
/// returns that slot.
fn lower(own_next: &mut u64, shared: &Shared, rewind: &mut watch::Receiver<u64>) -> Option<u64> {
    let to = (*rewind.borrow_and_update()).max(shared.next_needed.load(Ordering::SeqCst));
    if *own_next <= to {
        return None;
    }
    *own_next = to;
    inc(&shared.stats.rewinds, 1);
    Some(to)
}

/// At most [`QUOTE`] characters of `s`.
fn quote(s: &str) -> &str {
    match s.char_indices().nth(QUOTE) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// Resolves once `shutdown` is true (or its sender is gone).
pub(crate) async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|s| *s).await;
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::panic)]
    use super::*;
    use aldb_verify::record::Attestation;
    use aldb_verify::record_json::attested_record_to_json_value;
    use aldb_verify::{Commitment, RootRecord};
    use ed25519_dalek::{Signer as _, SigningKey};

    fn record() -> RootRecord {
        RootRecord {
            genesis_hash: [7; 32],
            slot: 9,
            parent: None,
            commitment: Commitment::Finalized,
            state_root: [1; 32],
            block: None,
            bank_hash: None,
        }
    }

    fn attest(i: u8, h: &[u8; 32]) -> Attestation {
        let k = SigningKey::from_bytes(&[i; 32]);
        Attestation {
            identity: k.verifying_key().to_bytes(),
            signature: k.sign(&aldb_verify::record::attestation_message(h)).to_bytes(),
        }
    }

    #[test]
    fn parses_feed_messages_and_refuses_the_rest_without_quoting_them_at_length() {
        let r = record();
        let doc = attested_record_to_json_value(&r, &[attest(1, &r.hash())]);
        let note =
            json!({"jsonrpc": "2.0", "method": "recordNotification", "params": {"subscription": 1, "result": doc}});
        match parse_message(&note.to_string()) {
            Ok(FeedMessage::Record(got)) => assert_eq!((got.record, got.attestations.len()), (r, 1)),
            other => panic!("{other:?}"),
        }
        assert!(matches!(parse_message(r#"{"jsonrpc":"2.0","id":1,"result":4}"#), Ok(FeedMessage::Subscribed)));
        let pruned = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"pruned","data":{"oldestSlot":77}}}"#;
        assert!(matches!(
            parse_message(pruned),
            Ok(FeedMessage::SubscribeFailed { code: Some(-32001), oldest_slot: Some(77), .. })
        ));
        let huge = format!(r#"{{"jsonrpc":"2.0","id":1,"error":{{"message":"{}"}}}}"#, "x".repeat(100_000));
        match parse_message(&huge) {
            Ok(FeedMessage::SubscribeFailed { error, .. }) => assert!(error.len() <= QUOTE),
            other => panic!("{other:?}"),
        }
        let long = format!(r#"{{"method":"{}"}}"#, "y".repeat(100_000));
        for (text, want) in [
            ("{not json", "not JSON"),
            (r#"{"method":"recordNotification"}"#, "without params.result"),
            (r#"{"method":"recordNotification","params":{"result":{"bytes":"AAAA"}}}"#, "bad record"),
            (long.as_str(), "unexpected"),
            ("", "not JSON"),
            ("[]", "unexpected"),
        ] {
            let e = parse_message(text).expect_err(text.get(..40).unwrap_or(text));
            assert!(e.to_string().contains(want), "{e}");
            assert!(e.to_string().len() < 300, "the error quotes at most {QUOTE} characters");
        }
    }

    #[test]
    fn trims_attestations_to_configured_identities_two_each() {
        let r = record();
        let h = r.hash();
        let ids: Vec<[u8; 32]> = (1..=2).map(|i| attest(i, &h).identity).collect();
        let quorum = Quorum::new(&ids, 1).expect("rule");
        let mut forged = attest(1, &h);
        forged.signature[3] ^= 1;
        let mut rec = AttestedRecord {
            record: r,
            record_hash: h,
            attestations: vec![
                forged,
                forged,
                attest(1, &h),
                attest(1, &h),
                attest(3, &h),
                attest(2, &h),
                attest(1, &h),
            ],
        };
        assert_eq!(trim_attestations(&mut rec, &quorum), (1, 3));
        assert_eq!(rec.attestations, vec![forged, attest(1, &h), attest(2, &h)]);
    }
}
