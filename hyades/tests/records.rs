//! The root record feed against the real service on loopback: `getRootRecord`,
//! `getRootRecords` and `recordSubscribe` over records a `RecordProducer` writes while the
//! service runs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use aldb_snapshot::records::{LoggedRecord, RecordInput, RecordLogWriter, RecordProducer, Signer};
use aldb_verify::record::{Attestation, Commitment, Quorum, RootRecord};
use aldb_verify::record_json::attested_record_from_json_value;
use common::Server;
use futures_util::{SinkExt, StreamExt};
use hyades::{SLOW_SUBSCRIBER_CLOSE, codes};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;

const WAIT: Duration = Duration::from_secs(10);
const GENESIS: [u8; 32] = [0x47; 32];

fn input(slot: u64, parent: Option<u64>) -> RecordInput {
    RecordInput {
        slot,
        parent,
        commitment: Commitment::Finalized,
        state_root: [(slot % 251) as u8; 32],
        block: None,
        parent_bank_hash: None,
        bank_hash: None,
    }
}

fn producer(dir: &std::path::Path) -> RecordProducer {
    RecordProducer::open(dir, GENESIS, Some(Signer::from_seed(&[7; 32]))).unwrap()
}

/// Waits until the service serves the record of `slot`.
fn wait_for(s: &Server, slot: u64) {
    let deadline = Instant::now() + WAIT;
    loop {
        let r = s.call("getRootRecord", json!([slot]));
        if r.get("result").is_some() {
            return;
        }
        assert!(Instant::now() < deadline, "record {slot} never served: {r}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

async fn send<S: AsyncRead + AsyncWrite + Unpin>(ws: &mut WebSocketStream<S>, v: Value) {
    ws.send(Message::text(v.to_string())).await.unwrap();
}

async fn next_json<S: AsyncRead + AsyncWrite + Unpin>(ws: &mut WebSocketStream<S>, wait: Duration) -> Option<Value> {
    loop {
        match tokio::time::timeout(wait, ws.next()).await {
            Err(_) => return None,
            Ok(Some(Ok(Message::Text(t)))) => return Some(serde_json::from_str(t.as_str()).unwrap()),
            Ok(Some(Ok(Message::Ping(_) | Message::Pong(_)))) => continue,
            Ok(other) => panic!("unexpected {other:?}"),
        }
    }
}

async fn request<S: AsyncRead + AsyncWrite + Unpin>(
    ws: &mut WebSocketStream<S>,
    id: u64,
    method: &str,
    params: Value,
) -> Value {
    send(ws, json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await;
    let r = next_json(ws, WAIT).await.expect("an answer");
    assert_eq!(r["id"], id, "{r}");
    r
}

/// Reads record notifications of `sub` until the one of `last`; returns their slots.
async fn collect<S: AsyncRead + AsyncWrite + Unpin>(ws: &mut WebSocketStream<S>, sub: u64, last: u64) -> Vec<u64> {
    let mut slots = Vec::new();
    while slots.last() != Some(&last) {
        let n = next_json(ws, WAIT).await.unwrap_or_else(|| panic!("stalled after {:?}", slots.last()));
        assert_eq!(n["jsonrpc"], "2.0");
        assert_eq!(n["method"], "recordNotification", "{n}");
        assert_eq!(n["params"]["subscription"], sub, "{n}");
        let doc = attested_record_from_json_value(&n["params"]["result"]).unwrap();
        slots.push(doc.record.slot);
    }
    slots
}

#[test]
fn get_root_record_and_records_round_trip_with_every_error() {
    let dir = tempfile::tempdir().unwrap();
    // No records/ directory at all: the record methods say nothing is published.
    let s = Server::start_with(dir.path(), |c| {
        c.record_keep = 4;
        c.record_poll_interval = Duration::from_millis(5);
    });
    s.err("getRootRecord", json!([5]), codes::NOTHING_PUBLISHED);
    s.err("getRootRecord", json!([]), codes::NOTHING_PUBLISHED);
    s.err("getRootRecords", json!([0, 10]), codes::NOTHING_PUBLISHED);

    let signer = Signer::from_seed(&[7; 32]);
    let quorum = Quorum::new(&[signer.identity()], 1).unwrap();
    let mut p = producer(dir.path());
    let mut logged = BTreeMap::new();
    for (slot, parent) in [(9, None), (10, Some(9)), (11, Some(10)), (13, Some(11)), (14, Some(13))] {
        logged.insert(slot, p.produce(input(slot, parent)).unwrap().unwrap());
    }
    wait_for(&s, 14);

    // Kept: the newest four (10, 11, 13, 14).
    for (&slot, want) in logged.range(10..) {
        let r = s.ok("getRootRecord", json!([slot]));
        assert_eq!(r["context"]["slot"], 14, "{r}");
        let doc = attested_record_from_json_value(&r["value"]).unwrap();
        assert_eq!(doc.record, want.record);
        assert_eq!(doc.record_hash, want.record_hash);
        assert!(quorum.is_attested(&doc.record_hash, &doc.attestations));
    }
    let newest = s.ok("getRootRecord", json!([]));
    assert_eq!(newest["value"]["slot"], 14);
    // Chained: 13's parent record hash is 11's record hash.
    let r13 = attested_record_from_json_value(&s.ok("getRootRecord", json!([13]))["value"]).unwrap();
    assert!(r13.record.extends(&logged[&11].record, &logged[&11].record_hash));

    let e = s.err("getRootRecord", json!([15]), codes::SLOT_NOT_COMMITTED);
    assert_eq!(e["data"], json!({"slot": 15, "oldestSlot": 10, "newestSlot": 14}));
    let e = s.err("getRootRecord", json!([12]), codes::SLOT_NO_SNAPSHOT);
    assert_eq!(e["data"]["slot"], 12);
    let e = s.err("getRootRecord", json!([9]), codes::SLOT_PRUNED);
    assert_eq!(e["data"]["oldestSlot"], 10);
    s.err("getRootRecord", json!(["x"]), codes::INVALID_PARAMS);
    s.err("getRootRecord", json!([1, 2]), codes::INVALID_PARAMS);

    let r = s.ok("getRootRecords", json!([0, 5000]));
    assert_eq!(r["context"]["slot"], 14);
    let slots: Vec<u64> = r["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| attested_record_from_json_value(v).unwrap().record.slot)
        .collect();
    assert_eq!(slots, [10, 11, 13, 14]);
    let r = s.ok("getRootRecords", json!([11, 13]));
    assert_eq!(r["value"].as_array().unwrap().len(), 2);
    assert_eq!(r["value"][1], s.ok("getRootRecord", json!([13]))["value"]);
    assert_eq!(s.ok("getRootRecords", json!([100, 200]))["value"], json!([]));
    let e = s.err("getRootRecords", json!([0, 5001]), codes::INVALID_PARAMS);
    assert_eq!(e["data"], json!({"max": 5000, "got": 5001}));
    s.err("getRootRecords", json!([5, 4]), codes::INVALID_PARAMS);
    s.err("getRootRecords", json!([5]), codes::INVALID_PARAMS);
    s.rt.block_on(async {
        let (mut a, _) = tokio_tungstenite::connect_async(&s.ws_url).await.unwrap();
        let e = request(&mut a, 1, "recordSubscribe", json!([{"fromSlot": 9}])).await;
        assert_eq!(e["error"]["code"], codes::SLOT_PRUNED, "{e}");
        assert_eq!(e["error"]["data"], json!({"slot": 9, "oldestSlot": 10, "newestSlot": 14}));
        // From a kept slot: the backlog from there.
        let sub = request(&mut a, 2, "recordSubscribe", json!([{"fromSlot": 12}])).await["result"].as_u64().unwrap();
        assert_eq!(collect(&mut a, sub, 14).await, [13, 14]);
    });
    // Subscriptions are WebSocket only.
    s.err("recordSubscribe", json!([]), codes::METHOD_NOT_FOUND);
    s.err("recordUnsubscribe", json!([1]), codes::METHOD_NOT_FOUND);

    let m = s.metrics();
    assert!(m.contains("hyades_newest_record_slot 14"), "{m}");
    assert!(m.contains("hyades_oldest_record_slot 10"), "{m}");
    assert!(m.contains("hyades_records_published_total 5"), "{m}");
}

#[test]
fn subscribers_get_the_backlog_then_live_records_without_gap_or_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = producer(dir.path());
    for slot in 1..=60 {
        p.produce(input(slot, slot.checked_sub(1))).unwrap();
    }
    let s = Server::start(dir.path());
    wait_for(&s, 60);
    const LAST: u64 = 400;
    const HALF: u64 = 230;
    s.rt.block_on(async {
        let (mut a, _) = tokio_tungstenite::connect_async(&s.ws_url).await.unwrap();
        assert_eq!(
            request(&mut a, 2, "recordSubscribe", json!([{"fromSlot": 1, "x": 2}])).await["error"]["code"],
            codes::INVALID_PARAMS
        );
        assert_eq!(request(&mut a, 3, "recordSubscribe", json!([5])).await["error"]["code"], codes::INVALID_PARAMS);

        // The producer keeps appending while the subscriptions are made and the backlog is sent;
        // the second half only once b and c have subscribed, so that records logged after their
        // subscriptions exist however the threads are scheduled (a fast writer could otherwise
        // finish before they subscribe).
        let (subscribed_tx, subscribed) = std::sync::mpsc::channel::<()>();
        let writer = std::thread::spawn(move || {
            for slot in 61..=LAST {
                if slot == HALF {
                    subscribed.recv().unwrap();
                }
                p.produce(input(slot, Some(slot - 1))).unwrap();
                if slot % 3 == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            p
        });
        let sub = request(&mut a, 4, "recordSubscribe", json!([{"fromSlot": 20}])).await["result"].as_u64().unwrap();
        let (mut b, _) = tokio_tungstenite::connect_async(&s.ws_url).await.unwrap();
        // Without fromSlot: only records logged after subscribing, from wherever that was.
        let sub_b = request(&mut b, 1, "recordSubscribe", json!([])).await["result"].as_u64().unwrap();
        let (mut c, _) = tokio_tungstenite::connect_async(&s.ws_url).await.unwrap();
        let sub_c =
            request(&mut c, 1, "recordSubscribe", json!([{"fromSlot": null}])).await["result"].as_u64().unwrap();
        subscribed_tx.send(()).unwrap();

        let got = collect(&mut a, sub, LAST).await;
        assert_eq!(got, (20..=LAST).collect::<Vec<_>>());
        for (ws, id) in [(&mut b, sub_b), (&mut c, sub_c)] {
            let got = collect(ws, id, LAST).await;
            assert!(got.len() as u64 > LAST - HALF && got.len() as u64 <= LAST - 60, "{got:?}");
            assert_eq!(got, (got[0]..=LAST).collect::<Vec<_>>());
        }
        let mut p = writer.join().unwrap();

        // Unsubscribed: nothing more arrives.
        assert_eq!(request(&mut a, 5, "recordUnsubscribe", json!([sub])).await["result"], true);
        assert_eq!(request(&mut a, 6, "recordUnsubscribe", json!([sub])).await["error"]["code"], codes::INVALID_PARAMS);
        // Root and record subscriptions are separate.
        let root_sub = request(&mut a, 7, "rootSubscribe", json!([])).await["result"].as_u64().unwrap();
        assert_eq!(
            request(&mut a, 8, "recordUnsubscribe", json!([root_sub])).await["error"]["code"],
            codes::INVALID_PARAMS
        );
        p.produce(input(LAST + 1, Some(LAST))).unwrap();
        assert_eq!(collect(&mut b, sub_b, LAST + 1).await, [LAST + 1]);
        assert!(next_json(&mut a, Duration::from_millis(200)).await.is_none());
        assert!(s.metrics().contains("hyades_record_subscriptions 2"), "{}", s.metrics());
    });
}

/// Each record is pushed once it is published, without waiting for anything more to be logged.
/// How soon is a benchmark's question (BENCHMARKS.md, the relayer's publish-to-accepted
/// latency): a loaded machine can delay any one notification, so this only prints the figure.
#[test]
fn each_published_record_is_notified_without_waiting_for_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(dir.path());
    let mut p = producer(dir.path());
    let mut lat = s.rt.block_on(async {
        let (mut a, _) = tokio_tungstenite::connect_async(&s.ws_url).await.unwrap();
        let sub = request(&mut a, 1, "recordSubscribe", json!([{"fromSlot": 0}])).await["result"].as_u64().unwrap();
        let mut lat = Vec::new();
        for slot in 0..40u64 {
            p.produce(input(slot, slot.checked_sub(1))).unwrap();
            // Published: durable in the log (the append's fsync is the producer's cost).
            let t = Instant::now();
            assert_eq!(collect(&mut a, sub, slot).await, [slot]);
            lat.push(t.elapsed());
            // Like slots: records arrive at unrelated moments of the poll cycle.
            tokio::time::sleep(Duration::from_millis(7 + slot % 13)).await;
        }
        lat
    });
    lat.sort();
    let (p50, max) = (lat[lat.len() / 2], lat[lat.len() - 1]);
    println!("record publish -> notification latency over {} records: p50 {p50:?}, max {max:?}", lat.len());
}

/// A record with the most attestations an entry holds: about 40 KB of JSON.
fn fat_record(slot: u64) -> LoggedRecord {
    let record = RootRecord {
        genesis_hash: GENESIS,
        slot,
        parent: None,
        commitment: Commitment::Confirmed,
        state_root: [3; 32],
        block: None,
        bank_hash: None,
    };
    let attestations = (0..255u8).map(|i| Attestation { identity: [i; 32], signature: [i; 64] }).collect();
    LoggedRecord { record_hash: record.hash(), record, attestations }
}

#[test]
fn a_record_subscriber_that_stops_reading_is_closed_with_4008_and_others_get_everything() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start_with(dir.path(), |c| {
        c.record_buffer = 64;
        c.record_poll_interval = Duration::from_millis(5);
    });
    let service_metrics = s.service.as_ref().unwrap().metrics().clone();
    let addr = s.service.as_ref().unwrap().local_addr();
    s.rt.block_on(async {
        // The slow client's receive buffer is small, so its socket fills after a few records.
        let sock = tokio::net::TcpSocket::new_v4().unwrap();
        sock.set_recv_buffer_size(4096).unwrap();
        let tcp = sock.connect(addr).await.unwrap();
        let (mut slow, _) = tokio_tungstenite::client_async(s.ws_url.as_str(), tcp).await.unwrap();
        let slow_sub = request(&mut slow, 1, "recordSubscribe", json!([])).await["result"].as_u64().unwrap();
        let (mut fine, _) = tokio_tungstenite::connect_async(&s.ws_url).await.unwrap();
        let fine_sub = request(&mut fine, 1, "recordSubscribe", json!([])).await["result"].as_u64().unwrap();

        let m2 = service_metrics.clone();
        let dir2 = dir.path().to_path_buf();
        // What the well-behaved subscriber has read: the writer stays within half the record
        // buffer of it, so only the client that stops reading can fall a buffer behind, however
        // long a loaded machine keeps this thread from reading.
        let fine_read = Arc::new(AtomicU64::new(0));
        let read = fine_read.clone();
        let writer = std::thread::spawn(move || {
            let (mut w, _) = RecordLogWriter::open(&dir2).unwrap();
            let mut slot = 0;
            let deadline = Instant::now() + Duration::from_secs(60);
            // Until the slow one is cut off, then some more: the others must not notice.
            let mut after = 0;
            while after < 50 {
                slot += 1;
                while slot > read.load(Ordering::SeqCst) + 32 {
                    assert!(
                        Instant::now() < deadline,
                        "the reading subscriber stopped at {}",
                        read.load(Ordering::SeqCst)
                    );
                    std::thread::sleep(Duration::from_millis(1));
                }
                w.append(&fat_record(slot)).unwrap();
                if m2.slow_disconnects.get() > 0 {
                    after += 1;
                }
                assert!(Instant::now() < deadline, "never disconnected after {slot} records");
                std::thread::sleep(Duration::from_millis(4));
            }
            slot
        });
        // The well-behaved subscriber reads everything, while the slow one is cut off.
        let mut got = Vec::new();
        while !writer.is_finished() {
            if let Some(n) = next_json(&mut fine, Duration::from_millis(100)).await {
                assert_eq!(n["params"]["subscription"], fine_sub);
                got.push(n["params"]["result"]["slot"].as_u64().unwrap());
                fine_read.store(got.len() as u64, Ordering::SeqCst);
            }
        }
        let last = writer.join().unwrap();
        while got.last() != Some(&last) {
            let n = next_json(&mut fine, WAIT).await.expect("fine receives the rest");
            got.push(n["params"]["result"]["slot"].as_u64().unwrap());
        }
        assert_eq!(got, (1..=last).collect::<Vec<_>>());
        assert_eq!(service_metrics.slow_disconnects.get(), 1);

        // The slow client finally reads: the records that fit in the buffers, then the close.
        let mut slots = Vec::new();
        let close = loop {
            match tokio::time::timeout(WAIT, slow.next()).await.expect("the close frame arrives") {
                Some(Ok(Message::Text(t))) => {
                    let n: Value = serde_json::from_str(t.as_str()).unwrap();
                    assert_eq!(n["params"]["subscription"], slow_sub);
                    slots.push(n["params"]["result"]["slot"].as_u64().unwrap());
                }
                Some(Ok(Message::Close(f))) => break f.expect("a close frame with a code"),
                other => panic!("unexpected {other:?} after {} records", slots.len()),
            }
        };
        assert_eq!(u16::from(close.code), SLOW_SUBSCRIBER_CLOSE);
        assert!(close.reason.starts_with("slow subscriber: "), "{}", close.reason);
        assert!(close.reason.ends_with(" notifications buffered"), "{}", close.reason);
        assert!((slots.len() as u64) < last, "the slow one got all {last}");
        assert_eq!(slots, (1..=slots.len() as u64).collect::<Vec<_>>(), "what it got has no gap");
        println!("slow subscriber got {} of {last} records, then {:?}", slots.len(), close.reason);
    });
    assert!(s.metrics().contains("hyades_slow_subscriber_disconnects_total 1"));
}

#[test]
fn records_after_a_damaged_entry_are_served_and_its_slot_answers_record_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = producer(dir.path());
    for slot in 1..=10 {
        p.produce(input(slot, slot.checked_sub(1))).unwrap();
    }
    drop(p);
    // One signed record per entry: length, 187-byte record, count, one attestation, checksum.
    let entry = 4 + 187 + 1 + 96 + 8;
    let seg = dir.path().join("records").join(format!("records-{:020}.log", 0));
    let mut bytes = std::fs::read(&seg).unwrap();
    assert_eq!(bytes.len(), 16 + 10 * entry);
    bytes[16 + 4 * entry + 100] ^= 0x08; // slot 5's record
    std::fs::write(&seg, &bytes).unwrap();

    let s = Server::start_with(dir.path(), |c| c.record_poll_interval = Duration::from_millis(5));
    wait_for(&s, 10);
    for slot in [4, 6, 10] {
        assert_eq!(s.ok("getRootRecord", json!([slot]))["value"]["slot"], slot);
    }
    let e = s.err("getRootRecord", json!([5]), codes::RECORD_CORRUPT);
    assert_eq!(e["message"], "record log damaged around slot 5");
    assert_eq!(e["data"], json!({"slot": 5, "previousRecordSlot": 4, "nextRecordSlot": 6}));
    let r = s.ok("getRootRecords", json!([3, 7]));
    let slots: Vec<u64> = r["value"].as_array().unwrap().iter().map(|v| v["slot"].as_u64().unwrap()).collect();
    assert_eq!(slots, [3, 4, 6, 7]);
    let m = s.metrics();
    assert!(m.contains("hyades_record_log_damaged_spans_total 1"), "{m}");
    assert!(m.contains(&format!("hyades_record_log_damaged_bytes_total {entry}")), "{m}");

    s.rt.block_on(async {
        let (mut a, _) = tokio_tungstenite::connect_async(&s.ws_url).await.unwrap();
        let sub = request(&mut a, 1, "recordSubscribe", json!([{"fromSlot": 3}])).await["result"].as_u64().unwrap();
        // Past the damage, no gap marker; then live records chained to the newest intact one.
        assert_eq!(collect(&mut a, sub, 10).await, [3, 4, 6, 7, 8, 9, 10]);
        let mut p = producer(dir.path());
        let r11 = p.produce(input(11, Some(10))).unwrap().unwrap();
        assert_eq!(collect(&mut a, sub, 11).await, [11]);
        let r10 = attested_record_from_json_value(&s.ok("getRootRecord", json!([10]))["value"]).unwrap();
        assert!(r11.record.extends(&r10.record, &r10.record_hash));
    });
    // The writer reopened without cutting anything: the damage is still counted once.
    assert!(s.metrics().contains("hyades_record_log_damaged_spans_total 1"));
    s.err("getRootRecord", json!([5]), codes::RECORD_CORRUPT);
}

#[test]
fn two_levels_per_slot_are_served_by_commitment() {
    let dir = tempfile::tempdir().unwrap();
    let at = |slot: u64, parent: Option<u64>, commitment| RecordInput { commitment, ..input(slot, parent) };
    let (c, f) = (Commitment::Confirmed, Commitment::Finalized);
    let mut p = producer(dir.path());
    // How a producer committing at `confirmed` logs: each slot's finalized record once rooted.
    for (slot, parent, level) in [(1, None, c), (2, Some(1), c), (1, None, f), (3, Some(2), c), (2, Some(1), f)] {
        p.produce(at(slot, parent, level)).unwrap().unwrap();
    }
    let s = Server::start_with(dir.path(), |cfg| cfg.record_poll_interval = Duration::from_millis(5));
    wait_for(&s, 3);
    let level_of = |v: &Value| (v["slot"].as_u64().unwrap(), v["commitment"].as_str().unwrap().to_string());
    let get = |params: Value| level_of(&s.ok("getRootRecord", params)["value"]);
    assert_eq!(get(json!([2, {"commitment": "confirmed"}])), (2, "confirmed".into()));
    assert_eq!(get(json!([2, {"commitment": "finalized"}])), (2, "finalized".into()));
    assert_eq!(get(json!([2])), (2, "finalized".into()), "without a level: the strongest held");
    assert_eq!(get(json!([3])), (3, "confirmed".into()));
    assert_eq!(get(json!([{"commitment": "finalized"}])), (2, "finalized".into()), "the newest finalized");
    assert_eq!(get(json!([null, {"commitment": "confirmed"}])), (3, "confirmed".into()));
    assert_eq!(get(json!([])), (3, "confirmed".into()));
    let e = s.err("getRootRecord", json!([3, {"commitment": "finalized"}]), codes::SLOT_NOT_COMMITTED);
    assert_eq!(e["data"], json!({"slot": 3, "oldestSlot": 1, "newestSlot": 2}));
    s.err("getRootRecord", json!([3, {"commitment": "processed"}]), codes::INVALID_PARAMS);
    s.err("getRootRecord", json!([3, {"level": "finalized"}]), codes::INVALID_PARAMS);
    // Both levels are signed, and each finalized record chains to the finalized parent.
    let fin = s.ok("getRootRecords", json!([0, 10, {"commitment": "finalized"}]));
    let docs: Vec<_> =
        fin["value"].as_array().unwrap().iter().map(|v| attested_record_from_json_value(v).unwrap()).collect();
    assert_eq!(docs.iter().map(|d| d.record.slot).collect::<Vec<_>>(), [1, 2]);
    assert!(docs[1].record.extends(&docs[0].record, &docs[0].record_hash));
    assert_eq!(fin["context"]["slot"], 2);
    let all = s.ok("getRootRecords", json!([0, 10]));
    let levels: Vec<_> = all["value"].as_array().unwrap().iter().map(level_of).collect();
    assert_eq!(
        levels,
        [
            (1, "confirmed".into()),
            (1, "finalized".into()),
            (2, "confirmed".into()),
            (2, "finalized".into()),
            (3, "confirmed".into())
        ]
    );

    s.rt.block_on(async {
        let (mut a, _) = tokio_tungstenite::connect_async(&s.ws_url).await.unwrap();
        let e = request(&mut a, 1, "recordSubscribe", json!([{"fromSlot": 1, "commitment": "processed"}])).await;
        assert_eq!(e["error"]["code"], codes::INVALID_PARAMS, "{e}");
        let sub =
            request(&mut a, 2, "recordSubscribe", json!([{"fromSlot": 2, "commitment": "finalized"}])).await["result"]
                .as_u64()
                .unwrap();
        let (mut b, _) = tokio_tungstenite::connect_async(&s.ws_url).await.unwrap();
        let sub_b = request(&mut b, 1, "recordSubscribe", json!([{"fromSlot": 2}])).await["result"].as_u64().unwrap();
        // Live: 3 is rooted, 4 confirmed.
        p.produce(at(3, Some(2), f)).unwrap().unwrap();
        p.produce(at(4, Some(3), c)).unwrap().unwrap();
        p.produce(at(4, Some(3), f)).unwrap().unwrap();
        assert_eq!(collect(&mut a, sub, 4).await, [2, 3, 4], "finalized only, from slot 2");
        // Both levels in log order, below-fromSlot records skipped: C2 C3 F2 F3 C4 F4.
        let mut both = Vec::new();
        while both.len() < 6 {
            let n = next_json(&mut b, WAIT).await.expect("a notification");
            assert_eq!(n["params"]["subscription"], sub_b, "{n}");
            both.push(level_of(&n["params"]["result"]));
        }
        let want: Vec<(u64, String)> = [
            (2, "confirmed"),
            (3, "confirmed"),
            (2, "finalized"),
            (3, "finalized"),
            (4, "confirmed"),
            (4, "finalized"),
        ]
        .iter()
        .map(|(s, l)| (*s, l.to_string()))
        .collect();
        assert_eq!(both, want);
    });
}
