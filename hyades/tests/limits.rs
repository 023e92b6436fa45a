//! Resource limits against the real service on loopback: slow and silent connections are
//! closed, the connection cap refuses the excess, oversize answers are refused with -32020
//! before they are built, a WebSocket client that never reads is closed and its queued bytes
//! released, idle WebSocket connections without subscriptions are closed — and a legitimate
//! client is answered throughout.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::{Read, Write};
use std::net::TcpStream as StdTcp;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use aldb_format::Account;
use aldb_snapshot::WriterConfig;
use common::{Model, Server, b58, wait_until};
use futures_util::{SinkExt, StreamExt};
use hyades::{Config, NOT_READING_CLOSE, codes};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

/// Generous bound for anything the server should do within a second or two.
const WAIT: Duration = Duration::from_secs(20);
/// The response cap the tests run with.
const CAP: usize = 64 * 1024;

/// A directory with 4 slots of accounts (16 of them with 8 KiB of data) and 400 root records.
struct Fixture {
    dir: tempfile::TempDir,
    keys: Vec<[u8; 32]>,
    big: Vec<[u8; 32]>,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let mut m = Model::new(WriterConfig::new(dir.path()), 29);
    for _ in 0..3 {
        m.commit_random(40);
    }
    let big: Vec<[u8; 32]> = (0..16u8).map(|i| [i.wrapping_add(200); 32]).collect();
    let accounts: Vec<Account> = big
        .iter()
        .map(|k| Account { pubkey: *k, lamports: 5, owner: [1; 32], executable: false, data: vec![k[0]; 8192] })
        .collect();
    m.commit(&accounts);
    m.flush();
    let keys = m.keys.clone();
    m.finish();
    common::finalized_records(dir.path(), 400);
    Fixture { dir, keys, big }
}

fn start(f: &Fixture, tweak: impl FnOnce(&mut Config)) -> Server {
    let s = Server::start_with(f.dir.path(), |c| {
        c.limits.max_response_bytes = CAP;
        c.ws_queue_bytes = 4 * CAP;
        tweak(c);
    });
    let deadline = Instant::now() + WAIT;
    while s.call("getRootRecord", json!([400])).get("result").is_none() {
        assert!(Instant::now() < deadline, "records never served");
        std::thread::sleep(Duration::from_millis(10));
    }
    s
}

/// The value of one metric line, `name` including its labels; 0 when absent.
fn metric(s: &Server, name: &str) -> f64 {
    s.metrics()
        .lines()
        .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')).map(|v| v.trim().parse().unwrap()))
        .unwrap_or(0.0)
}

fn limit_hits(s: &Server, limit: &str) -> f64 {
    metric(s, &format!("hyades_limit_hits_total{{limit=\"{limit}\"}}"))
}

/// Whether the server closed `tcp`: reads until end of stream or reset, for at most `WAIT`.
/// Returns what was read.
fn read_until_closed(tcp: &mut StdTcp) -> Option<Vec<u8>> {
    tcp.set_read_timeout(Some(WAIT)).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tcp.read(&mut buf) {
            Ok(0) => return Some(got),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => return None,
            Err(_) => return Some(got),
        }
    }
}

#[test]
fn slow_and_silent_http_connections_are_closed() {
    let f = fixture();
    let s = start(&f, |c| {
        c.header_timeout = Duration::from_secs(1);
        c.idle_timeout = Duration::from_secs(1);
    });
    let addr = s.url.trim_start_matches("http://").trim_end_matches('/').to_string();

    // Slowloris: a request head one byte every 100 ms, for up to 20 s; the server hangs up.
    let mut slow = StdTcp::connect(&addr).unwrap();
    slow.write_all(b"POST / HTTP/1.1\r\nhost: x\r\n").unwrap();
    let started = Instant::now();
    let mut closed = false;
    while started.elapsed() < WAIT {
        if slow.write_all(b"x").is_err() {
            closed = true;
            break;
        }
        slow.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        match slow.read(&mut [0u8; 256]) {
            Ok(0) => {
                closed = true;
                break;
            }
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => {
                closed = true;
                break;
            }
        }
    }
    assert!(closed, "a slowloris connection was still open after {WAIT:?}");

    // Silent: connected, never a byte.
    let mut silent = StdTcp::connect(&addr).unwrap();
    assert!(read_until_closed(&mut silent).is_some(), "a silent connection was never closed");

    // A slow body: the head is complete, the body never is; answered 408 and closed.
    let mut body = StdTcp::connect(&addr).unwrap();
    body.write_all(b"POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{")
        .unwrap();
    let answer = read_until_closed(&mut body).expect("a slow body was never answered");
    assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 408"), "{}", String::from_utf8_lossy(&answer));

    // Keep-alive: one request answered, then nothing; the idle connection is closed.
    let mut idle = StdTcp::connect(&addr).unwrap();
    let req = r#"{"jsonrpc":"2.0","id":1,"method":"getHealth"}"#;
    write!(
        idle,
        "POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{req}",
        req.len()
    )
    .unwrap();
    let answer = read_until_closed(&mut idle).expect("an idle keep-alive connection was never closed");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200") && answer.contains(r#""result":"ok""#), "{answer}");

    assert!(limit_hits(&s, "header_timeout") >= 3.0, "{}", s.metrics());
    assert!(limit_hits(&s, "idle_timeout") >= 1.0, "{}", s.metrics());
    // The service is unharmed.
    assert_eq!(s.ok("getHealth", json!([])), "ok");
}

#[test]
fn connections_past_the_cap_are_refused_until_some_close() {
    let f = fixture();
    let s = start(&f, |c| {
        c.max_connections = 3;
        c.header_timeout = Duration::from_secs(60);
    });
    let addr = s.url.trim_start_matches("http://").trim_end_matches('/').to_string();
    // The test client's own pooled connection may hold one; wait until the held ones are ours.
    let mut held = Vec::new();
    while held.len() < 3 {
        held.push(StdTcp::connect(&addr).unwrap());
    }
    wait_until("the listener is full", WAIT, || metric(&s, "hyades_connections") >= 3.0);
    let mut extra = StdTcp::connect(&addr).unwrap();
    let answer = read_until_closed(&mut extra).expect("a connection past the cap was kept open");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.is_empty() || answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(limit_hits(&s, "connections") >= 1.0, "{}", s.metrics());
    drop(held);
    wait_until("the held connections are released", WAIT, || metric(&s, "hyades_connections") < 3.0);
    assert_eq!(s.ok("getHealth", json!([])), "ok");
}

#[test]
fn oversize_answers_are_refused_with_32020_and_the_server_stays_healthy() {
    let f = fixture();
    let s = start(&f, |_| {});
    let one = s.ok("getRootRecord", json!([1]))["value"].to_string().len();
    assert!(one * 400 > 2 * CAP, "records too small for the test: {one} bytes");

    // One range whose answer would pass the cap.
    let e = s.err("getRootRecords", json!([1, 399]), codes::RESPONSE_TOO_LARGE);
    assert_eq!(e["data"]["max"], CAP, "{e}");
    assert!(e["message"].as_str().unwrap().contains(&CAP.to_string()), "{e}");
    // One that fits is answered.
    let fits = CAP / (2 * one);
    let r = s.ok("getRootRecords", json!([1, fits]));
    assert_eq!(r["value"].as_array().unwrap().len(), fits);

    // Proofs of accounts whose data alone passes the cap (16 × 8 KiB in base64).
    let keys: Vec<String> = f.big.iter().map(b58).collect();
    s.err("getMultipleAccountProofs", json!([keys]), codes::RESPONSE_TOO_LARGE);
    let r = s.ok("getMultipleAccountProofs", json!([keys[..2]]));
    assert_eq!(r["value"].as_array().unwrap().len(), 2);

    // A batch of ranges that fit one by one but not together: the answer stops at the cap; the
    // requests past it get -32020, the earlier ones their answers.
    let batch: Vec<Value> =
        (0..40).map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "getRootRecords", "params": [1, fits]})).collect();
    let (status, text) = s.post_raw(&Value::Array(batch).to_string());
    assert_eq!(status, 200);
    assert!(text.len() <= CAP, "batch answer of {} bytes", text.len());
    let answers: Vec<Value> = serde_json::from_str(&text).unwrap();
    assert_eq!(answers.len(), 40);
    assert!(answers[0].get("result").is_some(), "{}", answers[0]);
    assert_eq!(answers[39]["error"]["code"], codes::RESPONSE_TOO_LARGE);
    assert!(limit_hits(&s, "response_bytes") >= 3.0, "{}", s.metrics());

    // Over WebSocket, the same.
    s.rt.block_on(async {
        let (mut ws, _) = tokio_tungstenite::connect_async(&s.ws_url).await.unwrap();
        let req = json!({"jsonrpc": "2.0", "id": 5, "method": "getRootRecords", "params": [1, 399]});
        ws.send(Message::text(req.to_string())).await.unwrap();
        let m = tokio::time::timeout(WAIT, ws.next()).await.unwrap().unwrap().unwrap();
        let v: Value = serde_json::from_str(m.to_text().unwrap()).unwrap();
        assert_eq!(v["error"]["code"], codes::RESPONSE_TOO_LARGE, "{v}");
        assert_eq!(v["id"], 5);
    });

    assert_eq!(s.ok("getHealth", json!([])), "ok");
    let key = b58(&f.keys[0]);
    s.ok("getAccountProof", json!([key]));
}

#[test]
fn a_websocket_client_that_never_reads_is_closed_and_its_bytes_released() {
    let f = fixture();
    let s = start(&f, |c| c.write_timeout = Duration::from_secs(1));
    let one = s.ok("getRootRecord", json!([1]))["value"].to_string().len();
    // Answers of about half the cap: heavy, and each one allowed.
    let span = (CAP / 2 / one) as u64;

    // A legitimate client asks for proofs all along; every one must be answered.
    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicU64::new(0));
    let legit = {
        let (url, key, stop, answered) = (s.url.clone(), b58(&f.keys[1]), stop.clone(), answered.clone());
        std::thread::spawn(move || {
            let agent: ureq::Agent =
                ureq::Agent::config_builder().timeout_global(Some(Duration::from_secs(30))).build().into();
            while !stop.load(Ordering::Relaxed) {
                let req = json!({"jsonrpc": "2.0", "id": 1, "method": "getAccountProof", "params": [key]});
                let v: Value = agent.post(&url).send_json(&req).unwrap().body_mut().read_json().unwrap();
                assert!(v["result"]["value"]["proof"].is_object(), "{v}");
                answered.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };

    // The abuser: heavy requests, batches among them, and never a read.
    let peak = s.rt.block_on(async {
        let (ws, _) = tokio_tungstenite::connect_async(&s.ws_url).await.unwrap();
        let (mut tx, rx) = ws.split();
        let sender = tokio::spawn(async move {
            for i in 0..3000u64 {
                let start = 1 + i % (400 - span);
                let req = if i % 10 == 0 {
                    let b: Vec<Value> = (0..2)
                        .map(|j| json!({"jsonrpc": "2.0", "id": j, "method": "getRootRecords", "params": [start, start + span / 4]}))
                        .collect();
                    Value::Array(b)
                } else {
                    json!({"jsonrpc": "2.0", "id": i, "method": "getRootRecords", "params": [start, start + span]})
                };
                if tx.send(Message::text(req.to_string())).await.is_err() {
                    break;
                }
            }
            tx
        });
        let mut peak = 0.0f64;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let queued = tokio::task::block_in_place(|| metric(&s, "hyades_websocket_queued_bytes"));
            peak = peak.max(queued);
            let closed = tokio::task::block_in_place(|| limit_hits(&s, "ws_write_timeout")) >= 1.0;
            if closed {
                break;
            }
            assert!(Instant::now() < deadline, "the non-reading client was never closed: {}", s.metrics());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        sender.abort();
        drop(rx);
        peak
    });
    eprintln!("peak queued bytes: {peak}");
    // The queue held replies, never more than its room (4 × CAP) plus a few small records.
    assert!(peak > 0.0, "nothing was ever queued");
    assert!(peak <= (4 * CAP + 64 * 1024) as f64, "queued {peak} bytes");
    wait_until("the connection's bytes are released", WAIT, || {
        metric(&s, "hyades_websocket_queued_bytes") == 0.0 && metric(&s, "hyades_websocket_connections") == 0.0
    });
    // Its first answer may come after the abuser is gone on a loaded machine: wait for it.
    wait_until("the legitimate client is answered", WAIT, || answered.load(Ordering::Relaxed) > 0);
    stop.store(true, Ordering::Relaxed);
    legit.join().unwrap();
    assert_eq!(s.ok("getHealth", json!([])), "ok");
}

#[test]
fn idle_websockets_are_closed_unless_they_hold_a_subscription() {
    let f = fixture();
    let s = start(&f, |c| c.ws_idle_timeout = Duration::from_secs(1));
    s.rt.block_on(async {
        let (mut idle, _) = tokio_tungstenite::connect_async(&s.ws_url).await.unwrap();
        let (mut sub, _) = tokio_tungstenite::connect_async(&s.ws_url).await.unwrap();
        let req = json!({"jsonrpc": "2.0", "id": 1, "method": "rootSubscribe", "params": []});
        sub.send(Message::text(req.to_string())).await.unwrap();
        let m = tokio::time::timeout(WAIT, sub.next()).await.unwrap().unwrap().unwrap();
        let v: Value = serde_json::from_str(m.to_text().unwrap()).unwrap();
        assert!(v["result"].is_u64(), "{v}");

        // The idle one gets a normal close naming the reason.
        let frame = loop {
            match tokio::time::timeout(WAIT, idle.next()).await.expect("an idle connection was never closed") {
                Some(Ok(Message::Close(frame))) => break frame.expect("a close frame"),
                Some(Ok(_)) => continue,
                other => panic!("unexpected {other:?}"),
            }
        };
        assert_eq!(frame.code, CloseCode::Normal);
        assert!(frame.reason.as_str().starts_with("idle"), "{}", frame.reason);

        // The subscriber, silent as long, is still served.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let req = json!({"jsonrpc": "2.0", "id": 2, "method": "getHealth", "params": []});
        sub.send(Message::text(req.to_string())).await.unwrap();
        let v = loop {
            let m = tokio::time::timeout(WAIT, sub.next()).await.unwrap().unwrap().unwrap();
            let v: Value = serde_json::from_str(m.to_text().unwrap()).unwrap();
            if v["id"] == 2 {
                break v;
            }
        };
        assert_eq!(v["result"], "ok");
    });
    assert!(limit_hits(&s, "ws_idle_timeout") >= 1.0);
    // The close code a non-reading client gets is distinct from the slow-subscriber one.
    assert_ne!(NOT_READING_CLOSE, hyades::SLOW_SUBSCRIBER_CLOSE);
}
