//! JSON-RPC over HTTP against the real service on loopback: every method's answers verify
//! against the roots the engine committed and match the accounts written, and every error code
//! is produced by the input that should produce it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use aldb_format::Account;
use aldb_snapshot::WriterConfig;
use aldb_verify::{Claim, Proof, Terminal};
use base64::Engine as _;
use common::{Model, Server, State, b58};
use hyades::codes;
use serde_json::{Value, json};

/// Checks one `getAccountProof` value against the model at `slot`.
fn check_proof(v: &Value, pubkey: &[u8; 32], slot: u64, root: &[u8; 32], state: &State) {
    assert_eq!(v["slot"], slot, "{v}");
    assert_eq!(v["root"], b58(root), "{v}");
    let proof = Proof::from_json_value(&v["proof"]).unwrap();
    let claim = proof.verify(root, pubkey).unwrap();
    match state.get(pubkey) {
        Some(a) => {
            let got = &v["account"];
            assert_eq!(got["lamports"], a.lamports);
            assert_eq!(got["owner"], b58(&a.owner));
            assert_eq!(got["executable"], a.executable);
            assert_eq!(got["space"], a.data.len());
            assert_eq!(got["data"][1], "base64");
            let data = base64::engine::general_purpose::STANDARD.decode(got["data"][0].as_str().unwrap()).unwrap();
            assert_eq!(data, a.data);
            let value = aldb_verify::spec::account_value(a.lamports, &a.owner, a.executable, &a.data);
            assert_eq!(claim, Claim::Present { value });
            assert!(matches!(proof.terminal, Terminal::Leaf { value: t, .. } if t == value));
        }
        None => {
            assert!(v["account"].is_null(), "{v}");
            assert_eq!(claim, Claim::Absent);
        }
    }
}

fn model(config: impl FnOnce(&std::path::Path) -> WriterConfig, slots: u64, seed: u64) -> (tempfile::TempDir, Model) {
    let dir = tempfile::tempdir().unwrap();
    let mut m = Model::new(config(dir.path()), seed);
    m.commit_random(300);
    for _ in 1..slots {
        m.commit_random(40);
    }
    m.flush();
    (dir, m)
}

#[test]
fn every_method_answers_and_proofs_verify() {
    let (dir, mut m) = model(|d| WriterConfig { keep_slots: 1000, refresh_slots: 4, ..WriterConfig::new(d) }, 12, 1);
    let roots = m.finish();
    let s = Server::start(dir.path());

    assert_eq!(s.ok("getHealth", json!([])), "ok");
    let v = s.ok("getVersion", json!([]));
    assert_eq!(
        v,
        json!({"hyades": env!("CARGO_PKG_VERSION"), "snapshotFormat": aldb_format::FORMAT_VERSION, "commitment": 1})
    );

    // getStateRoot: newest by default, any kept slot by number.
    let r = s.ok("getStateRoot", json!([]));
    assert_eq!(r, json!({"context": {"slot": 11}, "value": {"slot": 11, "parent": 10, "root": b58(&roots[&11])}}));
    let r = s.ok("getStateRoot", json!([0]));
    assert_eq!(r["value"], json!({"slot": 0, "parent": null, "root": b58(&roots[&0])}));
    assert_eq!(s.ok("getStateRoot", json!([null]))["value"]["slot"], 11);

    // getStateRoots: every published slot in the range, in order.
    let r = s.ok("getStateRoots", json!([3, 6]));
    assert_eq!(r["context"]["slot"], 11);
    let expect: Vec<Value> = (3..=6u64).map(|i| json!({"slot": i, "parent": i - 1, "root": b58(&roots[&i])})).collect();
    assert_eq!(r["value"], Value::Array(expect));
    assert_eq!(s.ok("getStateRoots", json!([0, 999]))["value"].as_array().unwrap().len(), 12);
    assert_eq!(s.ok("getStateRoots", json!([500, 600]))["value"], json!([]));

    // getAccountProof at every slot, for present, deleted and never-seen keys.
    let mut probes: Vec<[u8; 32]> = m.keys.iter().step_by(7).copied().collect();
    probes.extend([[0u8; 32], [0xff; 32], [9; 32]]);
    for (slot, state) in &m.states {
        let root = s.ok("getStateRoot", json!([slot]))["value"]["root"].as_str().unwrap().to_string();
        assert_eq!(root, b58(&roots[slot]));
        for pk in &probes {
            let r = s.ok("getAccountProof", json!([b58(pk), {"slot": slot}]));
            assert_eq!(r["context"]["slot"], *slot);
            check_proof(&r["value"], pk, *slot, &roots[slot], state);
        }
    }
    // No slot (or a null one) means the newest.
    let pk = m.keys[0];
    for params in [json!([b58(&pk)]), json!([b58(&pk), {}]), json!([b58(&pk), null]), json!([b58(&pk), {"slot": null}])]
    {
        let r = s.ok("getAccountProof", params);
        check_proof(&r["value"], &pk, 11, &roots[&11], &m.states[&11]);
    }

    // getMultipleAccountProofs: one slot for all, in the order asked.
    let keys: Vec<[u8; 32]> = probes.iter().take(20).copied().collect();
    let names: Vec<String> = keys.iter().map(b58).collect();
    let r = s.ok("getMultipleAccountProofs", json!([names, {"slot": 5}]));
    assert_eq!(r["context"]["slot"], 5);
    let values = r["value"].as_array().unwrap();
    assert_eq!(values.len(), keys.len());
    for (v, pk) in values.iter().zip(&keys) {
        check_proof(v, pk, 5, &roots[&5], &m.states[&5]);
    }
    let r = s.ok("getMultipleAccountProofs", json!([names]));
    assert_eq!(r["context"]["slot"], 11);
    for (v, pk) in r["value"].as_array().unwrap().iter().zip(&keys) {
        check_proof(v, pk, 11, &roots[&11], &m.states[&11]);
    }
    assert_eq!(s.ok("getMultipleAccountProofs", json!([[]]))["value"], json!([]));

    // Metrics count what was asked.
    let text = s.metrics();
    assert!(text.contains(r#"hyades_requests_total{method="getAccountProof"}"#), "{text}");
    assert!(text.contains("hyades_request_duration_seconds_bucket"), "{text}");
    assert!(text.contains("hyades_newest_slot 11"), "{text}");
    assert!(text.contains("hyades_oldest_slot 0"), "{text}");
}

#[test]
fn batches_and_notifications() {
    let (dir, mut m) = model(|d| WriterConfig::new(d), 3, 2);
    let roots = m.finish();
    let s = Server::start(dir.path());
    let pk = b58(&m.keys[1]);
    let batch = json!([
        {"jsonrpc": "2.0", "id": "a", "method": "getStateRoot", "params": [1]},
        {"jsonrpc": "2.0", "id": 2, "method": "getAccountProof", "params": [pk, {"slot": 2}]},
        {"jsonrpc": "2.0", "method": "getHealth"},
        {"jsonrpc": "2.0", "id": null, "method": "noSuchMethod"},
        {"jsonrpc": "2.0", "id": 4, "method": "getAccountProof", "params": ["not base58!"]},
        5,
    ]);
    let r = s.post(&batch);
    let r = r.as_array().unwrap();
    // The notification (no id) gets no answer; everything else is answered in order.
    assert_eq!(r.len(), 5, "{r:?}");
    assert_eq!(r[0]["id"], "a");
    assert_eq!(r[0]["result"]["value"]["root"], b58(&roots[&1]));
    assert_eq!(r[1]["id"], 2);
    check_proof(&r[1]["result"]["value"], &m.keys[1], 2, &roots[&2], &m.states[&2]);
    assert_eq!(r[2]["id"], Value::Null);
    assert_eq!(r[2]["error"]["code"], codes::METHOD_NOT_FOUND);
    assert_eq!(r[3]["id"], 4);
    assert_eq!(r[3]["error"]["code"], codes::INVALID_PARAMS);
    assert_eq!(r[4]["error"]["code"], codes::INVALID_REQUEST);

    // Only notifications: nothing to say.
    let (status, body) = s.post_raw(r#"[{"jsonrpc":"2.0","method":"getHealth"}]"#);
    assert_eq!((status, body.as_str()), (204, ""));
    let (status, body) = s.post_raw(r#"{"jsonrpc":"2.0","method":"getHealth"}"#);
    assert_eq!((status, body.as_str()), (204, ""));

    // Over the batch limit.
    let many: Vec<Value> = (0..101).map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "getHealth"})).collect();
    let r = s.post(&Value::Array(many));
    assert_eq!(r["error"]["code"], codes::INVALID_REQUEST);
    assert_eq!(r["error"]["data"], json!({"max": 100, "got": 101}));
    let many: Vec<Value> = (0..100).map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "getHealth"})).collect();
    assert_eq!(s.post(&Value::Array(many)).as_array().unwrap().len(), 100);
}

#[test]
fn malformed_requests_get_distinct_codes() {
    let (dir, mut m) = model(|d| WriterConfig::new(d), 2, 3);
    m.finish();
    let s = Server::start(dir.path());

    // -32700: not JSON.
    for body in ["{", "", "nul", "{\"jsonrpc\":\"2.0\",", "\u{0}"] {
        let (status, text) = s.post_raw(body);
        assert_eq!(status, 200);
        let r: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(r["error"]["code"], codes::PARSE_ERROR, "{body:?}: {r}");
        assert_eq!(r["id"], Value::Null);
    }

    // -32600: JSON, but not a request.
    for body in [
        json!([]),
        json!(1),
        json!("getHealth"),
        json!({"jsonrpc": "1.0", "id": 1, "method": "getHealth"}),
        json!({"id": 1, "method": "getHealth"}),
        json!({"jsonrpc": "2.0", "id": 1}),
        json!({"jsonrpc": "2.0", "id": 1, "method": 5}),
        json!({"jsonrpc": "2.0", "id": {"x": 1}, "method": "getHealth"}),
        json!({"jsonrpc": "2.0", "id": [1], "method": "getHealth"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "getHealth", "params": "x"}),
    ] {
        let r = s.post(&body);
        assert_eq!(r["error"]["code"], codes::INVALID_REQUEST, "{body}: {r}");
    }
    // A body over the limit is refused before parsing.
    let huge = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"getHealth","pad":"{}"}}"#, "x".repeat(600 * 1024));
    let (status, text) = s.post_raw(&huge);
    assert_eq!(status, 413);
    let r: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(r["error"]["code"], codes::INVALID_REQUEST);
    assert_eq!(r["error"]["data"]["max"], 512 * 1024);

    // -32601: unknown methods, and subscriptions over plain HTTP.
    for method in ["getAccountInfo", "", "rootSubscribe", "rootUnsubscribe", "GETHEALTH"] {
        let e = s.err(method, json!([]), codes::METHOD_NOT_FOUND);
        assert!(e["message"].as_str().unwrap().starts_with("Method not found"), "{e}");
    }

    // -32602: every kind of bad parameter.
    let good = b58(&m.keys[0]);
    let cases = [
        ("getAccountProof", json!([])),
        ("getAccountProof", json!([null])),
        ("getAccountProof", json!([42])),
        ("getAccountProof", json!(["0OIl"])),
        ("getAccountProof", json!(["1111"])),
        ("getAccountProof", json!([format!("{good}1")])),
        ("getAccountProof", json!(["z".repeat(60)])),
        ("getAccountProof", json!([good, {"slot": "1"}])),
        ("getAccountProof", json!([good, {"slot": -1}])),
        ("getAccountProof", json!([good, {"slot": 1.5}])),
        ("getAccountProof", json!([good, {"slots": 1}])),
        ("getAccountProof", json!([good, {"commitment": "finalized"}])),
        ("getAccountProof", json!([good, 1])),
        ("getAccountProof", json!([good, {}, 3])),
        ("getAccountProof", json!({"pubkey": good})),
        ("getStateRoot", json!(["1"])),
        ("getStateRoot", json!([-5])),
        ("getStateRoot", json!([1, 2])),
        ("getStateRoots", json!([])),
        ("getStateRoots", json!([1])),
        ("getStateRoots", json!([5, 1])),
        ("getStateRoots", json!([0, 1000])),
        ("getStateRoots", json!([0, u64::MAX])),
        ("getStateRoots", json!(["0", 5])),
        ("getMultipleAccountProofs", json!([])),
        ("getMultipleAccountProofs", json!([good])),
        ("getMultipleAccountProofs", json!([[good, 5]])),
        ("getMultipleAccountProofs", json!([[good, "bad"]])),
        ("getMultipleAccountProofs", json!([[good], {"slot": true}])),
        ("getHealth", json!([1])),
        ("getVersion", json!([1])),
    ];
    for (method, params) in cases {
        s.err(method, params, codes::INVALID_PARAMS);
    }
    let e = s.err("getAccountProof", json!(["1111"]), codes::INVALID_PARAMS);
    assert_eq!(e["message"], "Invalid params: pubkey: base58 decodes to 4 bytes, expected 32");
    let e = s.err("getMultipleAccountProofs", json!([[good, "0"]]), codes::INVALID_PARAMS);
    assert!(e["message"].as_str().unwrap().contains("pubkeys[1]"), "{e}");
    let keys: Vec<String> = (0..101).map(|_| good.clone()).collect();
    let e = s.err("getMultipleAccountProofs", json!([keys]), codes::INVALID_PARAMS);
    assert_eq!(e["data"], json!({"max": 100, "got": 101}));
    let e = s.err("getStateRoots", json!([0, 1000]), codes::INVALID_PARAMS);
    assert_eq!(e["data"], json!({"max": 1000, "got": 1001}));
    assert_eq!(s.ok("getStateRoots", json!([0, 999]))["value"].as_array().unwrap().len(), 2);
    let keys: Vec<String> = (0..100).map(|_| good.clone()).collect();
    assert_eq!(s.ok("getMultipleAccountProofs", json!([keys]))["value"].as_array().unwrap().len(), 100);

    // -32004: past the newest published slot.
    let e = s.err("getStateRoot", json!([50]), codes::SLOT_NOT_COMMITTED);
    assert_eq!(e["message"], "slot not committed yet");
    assert_eq!(e["data"], json!({"slot": 50, "oldestSlot": 0, "newestSlot": 1}));
    s.err("getAccountProof", json!([good, {"slot": 2}]), codes::SLOT_NOT_COMMITTED);
    s.err("getMultipleAccountProofs", json!([[good], {"slot": u64::MAX}]), codes::SLOT_NOT_COMMITTED);

    let text = s.metrics();
    for code in [
        codes::PARSE_ERROR,
        codes::INVALID_REQUEST,
        codes::METHOD_NOT_FOUND,
        codes::INVALID_PARAMS,
        codes::SLOT_NOT_COMMITTED,
    ] {
        assert!(text.contains(&format!(r#"hyades_errors_total{{code="{code}"}}"#)), "{code}: {text}");
    }
    assert!(text.contains(r#"hyades_requests_total{method="unknown"}"#));
}

#[test]
fn pruned_and_skipped_slots() {
    // Retention: only the newest few slots stay provable.
    let (dir, mut m) = model(|d| WriterConfig { keep_slots: 4, refresh_slots: 2, ..WriterConfig::new(d) }, 30, 4);
    let roots = m.finish();
    let s = Server::start(dir.path());
    let oldest = s.service.as_ref().unwrap().hyades().oldest().unwrap().slot;
    // keep_slots bounds what is kept from below; the reader may serve a slot fewer (it checks a
    // slot's recorded file range, which can be wider than what the pruner knows it needs).
    assert!(oldest > 0 && oldest <= 27, "oldest {oldest}");
    let pk = b58(&m.keys[0]);
    let e = s.err("getStateRoot", json!([0]), codes::SLOT_PRUNED);
    assert_eq!(e["message"], "slot pruned");
    assert_eq!(e["data"], json!({"slot": 0, "oldestSlot": oldest, "newestSlot": 29}));
    s.err("getAccountProof", json!([pk, {"slot": oldest - 1}]), codes::SLOT_PRUNED);
    s.err("getMultipleAccountProofs", json!([[pk], {"slot": 0}]), codes::SLOT_PRUNED);
    let r = s.ok("getAccountProof", json!([pk, {"slot": oldest}]));
    check_proof(&r["value"], &m.keys[0], oldest, &roots[&oldest], &m.states[&oldest]);
    let r = s.ok("getStateRoots", json!([0, 29]))["value"].clone();
    let slots: Vec<u64> = r.as_array().unwrap().iter().map(|v| v["slot"].as_u64().unwrap()).collect();
    assert_eq!(slots, (oldest..=29).collect::<Vec<_>>());
    drop(s);

    // Every other slot snapshotted: the ones between have no snapshot.
    let (dir, mut m) = model(|d| WriterConfig { every: 2, ..WriterConfig::new(d) }, 10, 5);
    let roots = m.finish();
    let s = Server::start(dir.path());
    let pk = b58(&m.keys[0]);
    let e = s.err("getStateRoot", json!([4]), codes::SLOT_NO_SNAPSHOT);
    assert_eq!(e["message"], "slot has no snapshot (skipped)");
    assert_eq!(e["data"], json!({"slot": 4, "oldestSlot": 1, "newestSlot": 9}));
    s.err("getAccountProof", json!([pk, {"slot": 6}]), codes::SLOT_NO_SNAPSHOT);
    let r = s.ok("getAccountProof", json!([pk, {"slot": 5}]));
    check_proof(&r["value"], &m.keys[0], 5, &roots[&5], &m.states[&5]);
    let r = s.ok("getStateRoots", json!([0, 9]))["value"].clone();
    let slots: Vec<u64> = r.as_array().unwrap().iter().map(|v| v["slot"].as_u64().unwrap()).collect();
    assert_eq!(slots, vec![1, 3, 5, 7, 9]);
    // A merged slot's parent is the previous submitted slot, not the previous snapshot.
    assert_eq!(r[1]["parent"], 2);
}

#[test]
fn empty_directory_is_unhealthy_until_published() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(dir.path());
    for (method, params) in [
        ("getHealth", json!([])),
        ("getStateRoot", json!([])),
        ("getStateRoots", json!([0, 10])),
        ("getAccountProof", json!([b58(&[1; 32])])),
        ("getMultipleAccountProofs", json!([[b58(&[1; 32])]])),
    ] {
        let e = s.err(method, params, codes::NOTHING_PUBLISHED);
        assert_eq!(e["message"], "no snapshot has been published yet");
    }
    let (status, _) = {
        let url = s.url.clone() + "health";
        let r = ureq::get(&url).config().http_status_as_error(false).build().call().unwrap();
        (r.status().as_u16(), ())
    };
    assert_eq!(status, 503);

    // The poller picks up the first snapshot.
    let mut m = Model::new(WriterConfig::new(dir.path()), 6);
    m.commit(&[Account { pubkey: [1; 32], lamports: 5, owner: [2; 32], executable: false, data: b"hello".to_vec() }]);
    m.flush();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while s.call("getHealth", json!([])).get("result").is_none() {
        assert!(std::time::Instant::now() < deadline, "first snapshot never served");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let r = s.ok("getAccountProof", json!([b58(&[1; 32])]));
    assert_eq!(r["value"]["account"]["data"], json!(["aGVsbG8=", "base64"]));
    check_proof(&r["value"], &[1; 32], 0, &m.root(0), &m.states[&0]);
    m.finish();
}

#[test]
fn missing_directory_is_a_clear_error() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let err = rt.block_on(hyades::Service::start(hyades::Config::new("/nonexistent/hyades-test-dir"))).unwrap_err();
    assert!(err.to_string().contains("does not exist"), "{err}");
}
