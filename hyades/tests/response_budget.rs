//! The server-wide response budget (`Config::max_buffered_bytes`) against the real service on
//! loopback: clients that never read their large answers spend it, and then other clients' large
//! batches are refused with 503 / -32021 (over HTTP and WebSocket) while every answer given is
//! whole and right; a record subscriber whose notifications find it spent is closed with 1013;
//! clients that disconnect mid-answer give their bytes back; and once the holders are gone the
//! budget in use returns to zero and the server answers as before.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream as StdTcp};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use aldb_format::Account;
use aldb_snapshot::WriterConfig;
use common::{Model, Server, wait_until};
use futures_util::{SinkExt, StreamExt};
use hyades::{BUSY_CLOSE, BUSY_MESSAGE, Config, codes};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

/// Generous bound for anything the server should do within a second or two.
const WAIT: Duration = Duration::from_secs(60);
/// The response cap the tests run with.
const MAX_RESPONSE: usize = 4 << 20;
/// The server-wide budget: two of the large batches below, and some.
const BUDGET: usize = 8 << 20;
/// Requests in the large batch: each asks for 400 root records (about 200 KB).
const BATCH: usize = 10;
/// A client's receive buffer: small, so an answer it does not read stays on the server.
const CLIENT_RCVBUF: u32 = 4096;

/// A directory with 4 slots of accounts and 400 root records.
fn fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut m = Model::new(WriterConfig::new(dir.path()), 31);
    for _ in 0..3 {
        m.commit_random(40);
    }
    let big: Vec<Account> = (0..4u8)
        .map(|i| Account { pubkey: [i + 100; 32], lamports: 5, owner: [1; 32], executable: false, data: vec![i; 8192] })
        .collect();
    m.commit(&big);
    m.flush();
    m.finish();
    common::finalized_records(dir.path(), 400);
    dir
}

fn start(dir: &tempfile::TempDir, tweak: impl FnOnce(&mut Config)) -> Server {
    let s = Server::start_with(dir.path(), |c| {
        c.limits.max_response_bytes = MAX_RESPONSE;
        c.max_buffered_bytes = BUDGET;
        // The clients that hold answers unread are never cut off during a test.
        c.write_timeout = Duration::from_secs(600);
        c.idle_timeout = Duration::from_secs(600);
        tweak(c);
    });
    wait_until("records served", WAIT, || s.call("getRootRecord", json!([400])).get("result").is_some());
    s
}

/// The value of one metric line, `name` including its labels; 0 when absent.
fn metric(s: &Server, name: &str) -> f64 {
    s.metrics()
        .lines()
        .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')).map(|v| v.trim().parse().unwrap()))
        .unwrap_or(0.0)
}

fn buffered(s: &Server) -> f64 {
    metric(s, "hyades_response_buffer_bytes")
}

fn busy_hits(s: &Server) -> f64 {
    metric(s, "hyades_limit_hits_total{limit=\"response_buffer\"}")
}

fn addr(s: &Server) -> SocketAddr {
    s.url.trim_start_matches("http://").trim_end_matches('/').parse().unwrap()
}

/// The batch of `BATCH` requests for records 1..=399.
fn batch() -> String {
    let b: Vec<Value> = (0..BATCH)
        .map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "getRootRecords", "params": [1, 399]}))
        .collect();
    Value::Array(b).to_string()
}

/// A loopback connection whose receive buffer is `CLIENT_RCVBUF`.
fn small_window(s: &Server) -> StdTcp {
    let addr = addr(s);
    let tcp = s.rt.block_on(async {
        let sock = tokio::net::TcpSocket::new_v4().unwrap();
        sock.set_recv_buffer_size(CLIENT_RCVBUF).unwrap();
        sock.connect(addr).await.unwrap()
    });
    let tcp = tcp.into_std().unwrap();
    tcp.set_nonblocking(false).unwrap();
    tcp.set_read_timeout(Some(WAIT)).unwrap();
    tcp
}

/// POSTs `body` on a small-window connection and reads only the status line; the connection is
/// returned unread when the answer is 200, `None` when it is 503 (the rest is checked).
fn post_unread(s: &Server, body: &str) -> Option<StdTcp> {
    let mut tcp = small_window(s);
    write!(
        tcp,
        "POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut status = [0u8; 12];
    tcp.read_exact(&mut status).unwrap();
    match &status {
        b"HTTP/1.1 200" => Some(tcp),
        b"HTTP/1.1 503" => {
            // The head, then as many body bytes as it announces (the connection is kept alive).
            let mut head = Vec::new();
            while !head.ends_with(b"\r\n\r\n") {
                let mut b = [0u8; 1];
                tcp.read_exact(&mut b).unwrap();
                head.push(b[0]);
            }
            let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
            assert!(head.contains("retry-after: 1"), "{head}");
            let len = head.lines().find_map(|l| l.strip_prefix("content-length: ")).unwrap().trim().parse().unwrap();
            let mut body = vec![0u8; len];
            tcp.read_exact(&mut body).unwrap();
            assert_busy(&serde_json::from_slice(&body).unwrap());
            None
        }
        other => panic!("unexpected status {}", String::from_utf8_lossy(other)),
    }
}

/// Opens connections that ask for `body` and never read the answer until one is refused; returns
/// the ones holding answers. The budget is then spent to less than one more such answer.
fn fill(s: &Server, body: &str) -> Vec<StdTcp> {
    let mut held = Vec::new();
    loop {
        match post_unread(s, body) {
            Some(tcp) => held.push(tcp),
            None => {
                return held;
            }
        }
        assert!(held.len() < 64, "64 unread answers never spent the budget: {}", s.metrics());
    }
}

/// Checks a refusal's JSON-RPC error object.
fn assert_busy(v: &Value) {
    assert_eq!(v["error"]["code"], codes::SERVER_BUSY, "{v}");
    assert_eq!(v["error"]["message"], BUSY_MESSAGE, "{v}");
    assert_eq!(v["error"]["data"]["max"], BUDGET, "{v}");
    assert_eq!(v["id"], Value::Null, "{v}");
}

#[test]
fn large_batches_past_the_budget_are_refused_whole_and_the_budget_returns_to_zero() {
    let dir = fixture();
    let s = start(&dir, |_| {});
    let body = batch();
    // The answer everyone must get when answered at all, byte for byte.
    let (status, reference) = s.post_raw(&body);
    assert_eq!(status, 200);
    let parsed: Vec<Value> = serde_json::from_str(&reference).unwrap();
    assert_eq!(parsed.len(), BATCH);
    assert!(parsed.iter().all(|a| a["result"]["value"].as_array().map(Vec::len) == Some(399)), "{}", &reference[..300]);
    assert!(reference.len() > MAX_RESPONSE / 4 && reference.len() < MAX_RESPONSE, "{} bytes", reference.len());
    wait_until("the reference answer released", WAIT, || buffered(&s) == 0.0);

    // Clients that never read spend the budget.
    let holders = fill(&s, &body);
    assert!(!holders.is_empty());
    let held = buffered(&s);
    assert!(held > (BUDGET - 2 * reference.len()) as f64 && held <= BUDGET as f64, "{held} bytes held");

    // Many clients ask for the batch at once: refused whole, or answered whole and right.
    let busy_seen = Arc::new(AtomicUsize::new(0));
    let released = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let (url, body, reference) = (s.url.clone(), body.clone(), reference.clone());
            let (busy_seen, released) = (busy_seen.clone(), released.clone());
            std::thread::spawn(move || {
                let agent: ureq::Agent = ureq::Agent::config_builder()
                    .http_status_as_error(false)
                    .timeout_global(Some(Duration::from_secs(60)))
                    .build()
                    .into();
                let (mut busy, mut answered) = (0, 0);
                let deadline = Instant::now() + WAIT;
                while !(released.load(Ordering::SeqCst) && answered > 0) {
                    assert!(Instant::now() < deadline, "a client was never answered ({busy} refusals)");
                    let mut r = agent.post(&url).header("content-type", "application/json").send(&body).unwrap();
                    let status = r.status().as_u16();
                    let text = r.body_mut().with_config().limit(64 << 20).read_to_string().unwrap();
                    match status {
                        200 => {
                            assert!(text == reference, "a wrong or truncated answer of {} bytes", text.len());
                            answered += 1;
                        }
                        503 => {
                            assert_busy(&serde_json::from_str(&text).unwrap());
                            busy += 1;
                            busy_seen.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(Duration::from_millis(5));
                        }
                        other => panic!("status {other}: {text}"),
                    }
                }
                (busy, answered)
            })
        })
        .collect();

    // Over WebSocket too: the request is answered -32021 (the connection stays open), or whole.
    s.rt.block_on(async {
        let (mut ws, _) = tokio_tungstenite::connect_async(&s.ws_url).await.unwrap();
        let mut refused = false;
        for _ in 0..50 {
            ws.send(Message::text(body.clone())).await.unwrap();
            let m = tokio::time::timeout(WAIT, ws.next()).await.unwrap().unwrap().unwrap();
            let text = m.to_text().unwrap();
            if text == reference {
                continue;
            }
            assert_busy(&serde_json::from_str(text).unwrap());
            refused = true;
            break;
        }
        assert!(refused, "the WebSocket batch was never refused");
        let req = json!({"jsonrpc": "2.0", "id": 3, "method": "getHealth"});
        ws.send(Message::text(req.to_string())).await.unwrap();
        let m = tokio::time::timeout(WAIT, ws.next()).await.unwrap().unwrap().unwrap();
        let v: Value = serde_json::from_str(m.to_text().unwrap()).unwrap();
        assert_eq!(v["result"], "ok", "{v}");
    });

    // Once the clients were refused, the holders go and the budget frees.
    wait_until("every client refused at least once", WAIT, || busy_seen.load(Ordering::SeqCst) >= 8);
    assert!(buffered(&s) <= BUDGET as f64);
    drop(holders);
    released.store(true, Ordering::SeqCst);
    let mut refusals = 0;
    for c in clients {
        let (busy, answered) = c.join().unwrap();
        assert!(answered >= 1);
        refusals += busy;
    }
    eprintln!("{refusals} refusals; peak held {held} bytes");
    assert!(busy_hits(&s) >= refusals as f64, "{}", s.metrics());
    wait_until("the budget back to zero", WAIT, || buffered(&s) == 0.0);

    // The server answers as before.
    let (status, again) = s.post_raw(&body);
    assert_eq!(status, 200);
    assert!(again == reference);
    assert_eq!(s.ok("getHealth", json!([])), "ok");
    wait_until("the budget back to zero", WAIT, || buffered(&s) == 0.0);
}

#[test]
fn clients_that_disconnect_mid_answer_give_their_bytes_back() {
    let dir = fixture();
    let s = start(&dir, |_| {});
    let body = batch();

    // HTTP: clients that read the status line, or part of the body, and no more.
    let mut held = Vec::new();
    for i in 0..6 {
        if let Some(mut tcp) = post_unread(&s, &body) {
            if i % 2 == 1 {
                let mut part = vec![0u8; 64 * 1024];
                tcp.read_exact(&mut part).unwrap();
            }
            held.push(tcp);
        }
    }
    assert!(!held.is_empty());
    let http_held = buffered(&s);
    assert!(http_held > 0.0 && http_held <= BUDGET as f64, "{http_held} bytes held by the unread answers");
    // They hang up with answers unread (a reset: their receive buffers hold data).
    drop(held);
    wait_until("the HTTP answers released", WAIT, || buffered(&s) == 0.0);

    // WebSocket: heavy requests, nothing read, on small-window connections; then a hang-up.
    let single = json!({"jsonrpc": "2.0", "id": 1, "method": "getRootRecords", "params": [1, 399]}).to_string();
    let sockets = s.rt.block_on(async {
        let mut sockets = Vec::new();
        for _ in 0..4 {
            let sock = tokio::net::TcpSocket::new_v4().unwrap();
            sock.set_recv_buffer_size(CLIENT_RCVBUF).unwrap();
            let tcp = sock.connect(addr(&s)).await.unwrap();
            let (mut ws, _) = tokio_tungstenite::client_async(&s.ws_url, tcp).await.unwrap();
            for _ in 0..20 {
                ws.send(Message::text(single.clone())).await.unwrap();
            }
            sockets.push(ws);
        }
        sockets
    });
    wait_until("the WebSocket replies queued", WAIT, || metric(&s, "hyades_websocket_queued_bytes") > 0.0);
    let ws_held = buffered(&s);
    assert!(ws_held > 0.0 && ws_held <= BUDGET as f64, "{ws_held}");
    drop(sockets);
    wait_until("every byte released", WAIT, || {
        buffered(&s) == 0.0
            && metric(&s, "hyades_websocket_queued_bytes") == 0.0
            && metric(&s, "hyades_websocket_connections") == 0.0
    });
    eprintln!("held before the disconnects: {http_held} bytes (HTTP), {ws_held} bytes (WebSocket)");

    let (status, text) = s.post_raw(&body);
    assert_eq!(status, 200);
    assert_eq!(serde_json::from_str::<Vec<Value>>(&text).unwrap().len(), BATCH);
    wait_until("the budget back to zero", WAIT, || buffered(&s) == 0.0);
}

#[test]
fn a_record_subscriber_whose_notifications_find_the_budget_spent_is_closed_with_1013() {
    let dir = fixture();
    // A budget smaller than the record queue of one connection (32 notifications of about
    // 600 bytes): a subscriber that does not read spends it on its own backlog.
    let s = start(&dir, |c| {
        c.limits.max_response_bytes = 12 * 1024;
        c.max_buffered_bytes = 12 * 1024;
    });
    let frame = s.rt.block_on(async {
        let sock = tokio::net::TcpSocket::new_v4().unwrap();
        sock.set_recv_buffer_size(CLIENT_RCVBUF).unwrap();
        let tcp = sock.connect(addr(&s)).await.unwrap();
        let (mut ws, _) = tokio_tungstenite::client_async(&s.ws_url, tcp).await.unwrap();
        let req = json!({"jsonrpc": "2.0", "id": 1, "method": "recordSubscribe", "params": [{"fromSlot": 1}]});
        ws.send(Message::text(req.to_string())).await.unwrap();
        // Nothing read until the server has given up on the subscriber.
        tokio::task::block_in_place(|| {
            wait_until("the budget refusing a notification", WAIT, || busy_hits(&s) >= 1.0);
        });
        let mut next_slot = 1u64;
        loop {
            match tokio::time::timeout(WAIT, ws.next()).await.expect("never closed") {
                Some(Ok(Message::Close(frame))) => break frame.expect("a close frame"),
                Some(Ok(Message::Text(t))) => {
                    let v: Value = serde_json::from_str(&t).unwrap();
                    if v["id"] == 1 {
                        assert!(v["result"].is_u64(), "{v}");
                        continue;
                    }
                    // Every notification that was sent is whole, in order.
                    assert_eq!(v["params"]["result"]["slot"], next_slot, "{v}");
                    next_slot += 1;
                }
                other => panic!("unexpected {other:?}"),
            }
        }
    });
    assert_eq!(u16::from(frame.code), BUSY_CLOSE);
    assert_eq!(frame.reason.as_str(), BUSY_MESSAGE);
    wait_until("the budget back to zero", WAIT, || {
        buffered(&s) == 0.0 && metric(&s, "hyades_websocket_connections") == 0.0
    });
    assert_eq!(s.ok("getHealth", json!([])), "ok");
}

#[test]
fn a_refused_batch_leaves_no_subscription_of_its_items_behind() {
    let dir = fixture();
    let s = start(&dir, |_| {});
    let body = batch();
    let holders = fill(&s, &body);
    assert!(!holders.is_empty());
    // Subscriptions first, then the large items the spent budget refuses: the client is told
    // "busy" and no id, so neither subscription may stay open.
    let mut items: Vec<Value> = vec![
        json!({"jsonrpc": "2.0", "id": "r", "method": "rootSubscribe"}),
        json!({"jsonrpc": "2.0", "id": "c", "method": "recordSubscribe", "params": [{"fromSlot": 1}]}),
    ];
    items.extend(serde_json::from_str::<Vec<Value>>(&body).unwrap());
    let request = Value::Array(items).to_string();
    s.rt.block_on(async {
        let (mut ws, _) = tokio_tungstenite::connect_async(&s.ws_url).await.unwrap();
        ws.send(Message::text(request)).await.unwrap();
        let m = tokio::time::timeout(WAIT, ws.next()).await.unwrap().unwrap().unwrap();
        assert_busy(&serde_json::from_str(m.to_text().unwrap()).unwrap());
        assert_eq!(metric(&s, "hyades_subscribers"), 0.0, "{}", s.metrics());
        assert_eq!(metric(&s, "hyades_record_subscriptions"), 0.0, "{}", s.metrics());
        // The connection stays usable, and a subscription asked for alone is kept.
        let req = json!({"jsonrpc": "2.0", "id": 1, "method": "rootSubscribe"});
        ws.send(Message::text(req.to_string())).await.unwrap();
        let m = tokio::time::timeout(WAIT, ws.next()).await.unwrap().unwrap().unwrap();
        let v: Value = serde_json::from_str(m.to_text().unwrap()).unwrap();
        assert!(v["result"].is_u64(), "{v}");
        assert_eq!(metric(&s, "hyades_subscribers"), 1.0, "{}", s.metrics());
    });
    drop(holders);
}
