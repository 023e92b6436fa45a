//! Replicas: Hyades serving a bucket that the shipper fills (SeaweedFS on loopback), beside a
//! Hyades serving the writer's directory. Every answer both can give is byte for byte the same;
//! slots the directory already pruned are served by the replicas alone; the record feed of a
//! replica has no gap and no duplicate across manifest refreshes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use aldb_objstore::Shipper;
use aldb_snapshot::WriterConfig;
use aldb_snapshot::records::{RecordInput, RecordProducer, Signer};
use aldb_verify::record::Commitment;
use aldb_verify::record_json::attested_record_from_json_value;
use common::replica::{ask, replica, shipper};
use common::weed::Weed;
use common::{Model, Server, b58};
use futures_util::{SinkExt, StreamExt};
use hyades::codes;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

const GENESIS: [u8; 32] = [0x47; 32];
const URL: &str = "s3://replicas/mainnet";

/// The writer with a short local retention, its record log, and the shipper to the bucket.
struct Writer {
    model: Model,
    records: RecordProducer,
    shipper: Shipper,
    rt: tokio::runtime::Runtime,
}

impl Writer {
    fn start(dir: &std::path::Path, weed: &Weed) -> Self {
        let config = WriterConfig { keep_slots: 6, refresh_slots: 3, direct_io: false, ..WriterConfig::new(dir) };
        let model = Model::new(config, 41);
        let records = RecordProducer::open(dir, GENESIS, Some(Signer::from_seed(&[9; 32]))).unwrap();
        let shipper = shipper(dir, weed, URL);
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        Self { model, records, shipper, rt }
    }

    /// Commits `n` slots with a record each, waits for their files, and ships.
    fn slots(&mut self, n: usize) {
        for _ in 0..n {
            let slot = self.model.commit_random(40);
            let parent = slot.checked_sub(1);
            let input = RecordInput {
                slot,
                parent,
                commitment: Commitment::Finalized,
                state_root: self.model.root(slot),
                block: None,
                parent_bank_hash: None,
                bank_hash: None,
            };
            self.records.produce(input).unwrap();
        }
        self.model.flush();
        self.rt.block_on(self.shipper.ship_once()).unwrap();
    }
}

fn error_code(body: &str) -> Option<i64> {
    serde_json::from_str::<Value>(body).unwrap()["error"]["code"].as_i64()
}

/// Waits until `s` serves `slot` and its record.
fn wait_for(s: &Server, slot: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while s.call("getStateRoot", json!([slot])).get("result").is_none()
        || s.call("getRootRecord", json!([slot])).get("result").is_none()
    {
        assert!(Instant::now() < deadline, "slot {slot} never served");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn replicas_answer_as_the_directory_does_and_beyond_its_retention() {
    let Some(weed) = Weed::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut w = Writer::start(dir.path(), &weed);
    for _ in 0..4 {
        w.slots(8);
    }
    let last = w.model.next_slot - 1;
    let local = Server::start(dir.path());
    let (cache_a, cache_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = replica(&weed, URL, cache_a.path(), 1 << 30);
    // A cache of a few files: most slots evict others, every answer is still the same.
    let b = replica(&weed, URL, cache_b.path(), 200 << 10);
    wait_for(&a, last);
    wait_for(&b, last);
    let pruned = local.service.as_ref().unwrap().hyades().oldest().unwrap().slot;
    assert!(pruned > 8, "the directory keeps only its last slots (oldest {pruned})");

    let absent = [0xee; 32];
    let mut replica_only = 0;
    for slot in 0..=last {
        let root = b58(&w.model.root(slot));
        let keys: Vec<[u8; 32]> = w.model.states[&slot].keys().take(2).copied().chain([absent]).collect();
        let mut asks: Vec<(&str, Value)> = vec![
            ("getStateRoot", json!([slot])),
            ("getRootRecord", json!([slot])),
            ("getMultipleAccountProofs", json!([keys.iter().map(b58).collect::<Vec<_>>(), {"slot": slot}])),
        ];
        for k in &keys {
            asks.push(("getAccountProof", json!([b58(k), {"slot": slot}])));
        }
        for (method, params) in &asks {
            let (ra, rb) = (ask(&a, method, params), ask(&b, method, params));
            let rl = ask(&local, method, params);
            assert_eq!(ra, rb, "{method} {params}: the replicas differ");
            assert_eq!(error_code(&ra), None, "{method} {params}: {ra}");
            match error_code(&rl) {
                None => assert_eq!(ra, rl, "{method} {params}: replica and directory differ"),
                Some(code) => {
                    assert!(slot < pruned, "{method} {params}: {rl}");
                    assert!(code == codes::SLOT_PRUNED, "{method} {params}: {rl}");
                    replica_only += 1;
                }
            }
        }
        // What the replica serves beyond the directory is the committed state.
        let v: Value =
            serde_json::from_str(&ask(&a, "getAccountProof", &json!([b58(&keys[0]), {"slot": slot}]))).unwrap();
        let v = &v["result"]["value"];
        assert_eq!(v["root"], root, "slot {slot}");
        let proof = aldb_verify::Proof::from_json_value(&v["proof"]).unwrap();
        assert!(proof.verify(&w.model.root(slot), &keys[0]).is_ok(), "slot {slot}");
    }
    assert!(replica_only > 0);
    // Ranges: the replicas list every slot, the directory the ones it keeps, the same way.
    let all = ask(&a, "getStateRoots", &json!([0, last]));
    assert_eq!(all, ask(&b, "getStateRoots", &json!([0, last])));
    let kept = ask(&local, "getStateRoots", &json!([pruned, last]));
    assert_eq!(kept, ask(&a, "getStateRoots", &json!([pruned, last])));
    let listed: Value = serde_json::from_str(&all).unwrap();
    assert_eq!(listed["result"]["value"].as_array().unwrap().len() as u64, last + 1);
    for s in [&a, &b, &local] {
        assert_eq!(ask(s, "getRootRecords", &json!([0, last])), ask(&local, "getRootRecords", &json!([0, last])));
    }
    // A slot the bucket does not hold yet.
    for s in [&a, &b] {
        let e = s.err("getAccountProof", json!([b58(&absent), {"slot": last + 5}]), codes::SLOT_NOT_COMMITTED);
        assert_eq!(e["data"]["newestSlot"], last, "{e}");
        s.err("getStateRoot", json!([last + 5]), codes::SLOT_NOT_COMMITTED);
    }
    let m = b.metrics();
    assert!(m.contains("aldb_cache_evictions_total"), "{m}");
    let evicted: f64 = m
        .lines()
        .find(|l| l.starts_with("aldb_cache_evictions_total "))
        .and_then(|l| l.split(' ').nth(1))
        .unwrap()
        .parse()
        .unwrap();
    assert!(evicted > 0.0, "the small cache evicted nothing:\n{m}");
}

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Reads record notifications into `seen` until the record of `until`.
async fn collect(ws: &mut Ws, seen: &mut Vec<u64>, until: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.last().is_none_or(|&s| s < until) {
        assert!(Instant::now() < deadline, "records up to {until} never came: {seen:?}");
        let Ok(Some(Ok(Message::Text(t)))) = tokio::time::timeout(Duration::from_secs(1), ws.next()).await else {
            continue;
        };
        let v: Value = serde_json::from_str(&t).unwrap();
        if v["method"] == "recordNotification" {
            let doc = attested_record_from_json_value(&v["params"]["result"]).unwrap();
            seen.push(doc.record.slot);
        }
    }
}

#[test]
fn a_replicas_record_feed_has_no_gap_and_no_duplicate_across_refreshes() {
    let Some(weed) = Weed::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut w = Writer::start(dir.path(), &weed);
    w.slots(10);
    let cache = tempfile::tempdir().unwrap();
    let a = replica(&weed, URL, cache.path(), 1 << 30);
    wait_for(&a, 9);
    let url = a.ws_url.clone();
    let (mut ws, _) = a.rt.block_on(tokio_tungstenite::connect_async(&url)).unwrap();
    let sub = json!({"jsonrpc": "2.0", "id": 1, "method": "recordSubscribe", "params": [{"fromSlot": 3}]});
    a.rt.block_on(ws.send(Message::text(sub.to_string()))).unwrap();
    let mut seen = Vec::new();
    a.rt.block_on(collect(&mut ws, &mut seen, 9));
    // Several shipments, each a manifest and a longer segment the replica appends.
    for _ in 0..5 {
        w.slots(3);
    }
    a.rt.block_on(collect(&mut ws, &mut seen, 24));
    assert_eq!(seen, (3..=24).collect::<Vec<_>>(), "every record once, in order");
    let distinct: BTreeSet<u64> = seen.iter().copied().collect();
    assert_eq!(distinct.len(), seen.len());
}
