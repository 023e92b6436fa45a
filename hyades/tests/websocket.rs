//! WebSocket against the real service on loopback: subscribers receive every root published
//! after they subscribe, in slot order, until they unsubscribe; a subscriber that stops reading
//! is disconnected instead of holding anyone up.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use aldb_format::Account;
use aldb_snapshot::WriterConfig;
use common::{Model, Server, b58};
use futures_util::{SinkExt, StreamExt};
use hyades::codes;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

async fn connect(url: &str) -> Ws {
    tokio_tungstenite::connect_async(url).await.unwrap().0
}

async fn send(ws: &mut Ws, v: Value) {
    ws.send(Message::text(v.to_string())).await.unwrap();
}

/// The next JSON text message, or `None` if none arrives within `wait`.
async fn next_json(ws: &mut Ws, wait: Duration) -> Option<Value> {
    loop {
        match tokio::time::timeout(wait, ws.next()).await {
            Err(_) => return None,
            Ok(Some(Ok(Message::Text(t)))) => return Some(serde_json::from_str(t.as_str()).unwrap()),
            Ok(Some(Ok(Message::Ping(_) | Message::Pong(_)))) => continue,
            Ok(other) => panic!("unexpected {other:?}"),
        }
    }
}

async fn request(ws: &mut Ws, id: u64, method: &str, params: Value) -> Value {
    send(ws, json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await;
    let r = next_json(ws, Duration::from_secs(10)).await.expect("an answer");
    assert_eq!(r["id"], id, "{r}");
    r
}

const WAIT: Duration = Duration::from_secs(10);

#[test]
fn subscribers_get_new_roots_in_order_until_they_unsubscribe() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = Model::new(WriterConfig::new(dir.path()), 11);
    for _ in 0..3 {
        m.commit_random(50);
    }
    m.flush();
    let s = Server::start(dir.path());
    let root_url = s.ws_url.trim_end_matches("ws").to_string();
    s.rt.block_on(async {
        let mut a = connect(&s.ws_url).await;
        // Every HTTP method works over WebSocket too.
        let r = request(&mut a, 1, "getStateRoot", json!([])).await;
        assert_eq!(r["result"]["value"]["slot"], 2);
        let r = request(&mut a, 2, "getAccountProof", json!([b58(&m.keys[0]), {"slot": 1}])).await;
        assert_eq!(r["result"]["context"]["slot"], 1);
        let r = request(&mut a, 3, "rootSubscribe", json!([])).await;
        let sub = r["result"].as_u64().unwrap();
        assert!(request(&mut a, 4, "rootSubscribe", json!([1])).await["error"]["code"] == codes::INVALID_PARAMS);

        for _ in 0..5 {
            m.commit_random(20);
        }
        m.flush();
        for slot in 3..8u64 {
            let n = next_json(&mut a, WAIT).await.expect("a notification");
            assert_eq!(n["jsonrpc"], "2.0");
            assert_eq!(n["method"], "rootNotification", "{n}");
            assert_eq!(n["params"]["subscription"], sub);
            assert_eq!(n["params"]["result"], json!({"slot": slot, "parent": slot - 1, "root": b58(&m.root(slot))}));
        }

        // A second connection, on the root path, subscribing later, sees only later roots.
        let mut b = connect(&root_url).await;
        let sub_b = request(&mut b, 1, "rootSubscribe", json!([])).await["result"].as_u64().unwrap();
        assert_ne!(sub, sub_b);
        assert!(s.metrics().contains("hyades_subscribers 2"));

        let r = request(&mut a, 5, "rootUnsubscribe", json!([sub])).await;
        assert_eq!(r["result"], true);
        let r = request(&mut a, 6, "rootUnsubscribe", json!([sub])).await;
        assert_eq!(r["error"]["code"], codes::INVALID_PARAMS);
        let r = request(&mut a, 7, "rootUnsubscribe", json!(["x"])).await;
        assert_eq!(r["error"]["code"], codes::INVALID_PARAMS);

        let slot = m.commit_random(20);
        m.flush();
        let n = next_json(&mut b, WAIT).await.expect("b is notified");
        assert_eq!(n["params"]["subscription"], sub_b);
        assert_eq!(n["params"]["result"]["slot"], slot);
        // `a` unsubscribed before the slot was published: nothing more arrives there.
        assert!(next_json(&mut a, Duration::from_millis(300)).await.is_none());
        assert!(s.metrics().contains("hyades_subscribers 1"));

        // Bad input over WebSocket gets the same errors as over HTTP.
        a.send(Message::text("{")).await.unwrap();
        assert_eq!(next_json(&mut a, WAIT).await.unwrap()["error"]["code"], codes::PARSE_ERROR);
        let r = request(&mut a, 8, "noSuchMethod", json!([])).await;
        assert_eq!(r["error"]["code"], codes::METHOD_NOT_FOUND);
        send(
            &mut a,
            json!([
                {"jsonrpc": "2.0", "id": 9, "method": "getHealth"},
                {"jsonrpc": "2.0", "id": 10, "method": "rootSubscribe"},
            ]),
        )
        .await;
        let r = next_json(&mut a, WAIT).await.unwrap();
        assert_eq!(r[0]["result"], "ok");
        let sub_c = r[1]["result"].as_u64().unwrap();
        let slot = m.commit_random(5);
        m.flush();
        let n = next_json(&mut a, WAIT).await.expect("a is notified again");
        assert_eq!(
            (n["params"]["subscription"].as_u64(), n["params"]["result"]["slot"].as_u64()),
            (Some(sub_c), Some(slot))
        );

        a.close(None).await.unwrap();
        b.close(None).await.unwrap();
    });
    // Closing the connections ends their subscriptions.
    let deadline = std::time::Instant::now() + WAIT;
    while !s.metrics().contains("hyades_subscribers 0") {
        assert!(std::time::Instant::now() < deadline, "{}", s.metrics());
        std::thread::sleep(Duration::from_millis(10));
    }
    m.finish();
}

#[test]
fn a_subscriber_that_stops_reading_is_disconnected() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = Model::new(WriterConfig::new(dir.path()), 12);
    // Big accounts, so a few answers fill every buffer between the server and the client.
    let accounts: Vec<Account> = (0..100u8)
        .map(|i| Account { pubkey: [i; 32], lamports: 1, owner: [7; 32], executable: false, data: vec![i; 16 * 1024] })
        .collect();
    m.commit(&accounts);
    m.flush();
    let s = Server::start_with(dir.path(), |c| c.notification_buffer = 2);
    s.rt.block_on(async {
        let mut slow = connect(&s.ws_url).await;
        let mut fine = connect(&s.ws_url).await;
        request(&mut slow, 1, "rootSubscribe", json!([])).await;
        request(&mut fine, 1, "rootSubscribe", json!([])).await;
        // About 2 MB per answer, and the slow client reads none of them.
        let keys: Vec<String> = accounts.iter().map(|a| b58(&a.pubkey)).collect();
        const ASKED: u64 = 24;
        for id in 0..ASKED {
            send(
                &mut slow,
                json!({"jsonrpc": "2.0", "id": 100 + id, "method": "getMultipleAccountProofs", "params": [keys]}),
            )
            .await;
        }
        // New roots until the slow one's queue, filling with answers as fast as the server makes
        // them, has no room for a notification (one root may come before it is full).
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let slot = m.commit_random(3);
            m.flush();
            // The well-behaved subscriber is notified as usual...
            let n = next_json(&mut fine, WAIT).await.expect("fine is notified");
            assert_eq!(n["params"]["result"]["slot"], slot);
            // ...and the slow one is cut off: it gets some answers, then the connection ends.
            if s.metrics().contains("hyades_slow_subscriber_disconnects_total 1") {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "{}", s.metrics());
        }
        let mut answers = 0;
        let mut closed_as_slow = false;
        while let Ok(Some(msg)) = tokio::time::timeout(WAIT, slow.next()).await {
            match msg {
                Ok(Message::Text(_)) => answers += 1,
                Ok(Message::Close(Some(f))) => closed_as_slow = u16::from(f.code) == 1008,
                Ok(_) => {}
                Err(_) => break,
            }
        }
        assert!(answers < ASKED, "got all {answers} answers");
        // The close frame is best effort (the socket was full), but if it came it says why.
        let _ = closed_as_slow;
        assert!(request(&mut fine, 2, "getHealth", json!([])).await["result"] == "ok");
    });
    m.finish();
}
