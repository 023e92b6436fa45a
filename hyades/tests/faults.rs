//! A damaged snapshot directory, as the service answers it: -32011 naming the damage for every
//! slot that needs a damaged file (never "pruned" or "skipped"), the other slots served and
//! verified, and the damage counted in the metrics.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use aldb_format::format::{FOOTER_LEN, HEADER_LEN, file_checksum, parse_file_name};
use aldb_snapshot::WriterConfig;
use common::{Model, Server, b58};
use serde_json::json;

#[test]
fn damaged_files_answer_corrupt_and_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = Model::new(WriterConfig { keep_slots: 1000, refresh_slots: 4, ..WriterConfig::new(dir.path()) }, 5);
    m.commit_random(300);
    for _ in 1..10 {
        m.commit_random(40);
    }
    let roots = m.finish();
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().into_string().ok())
        .filter(|n| parse_file_name(n).is_some())
        .collect();
    names.sort();
    // Slot 6's file gets another slot in its header, checksum recomputed (a renamed copy).
    let victim = dir.path().join(&names[6]);
    let mut bytes = std::fs::read(&victim).unwrap();
    bytes[24..32].copy_from_slice(&8u64.to_le_bytes());
    let end = bytes.len() - FOOTER_LEN;
    let sum = file_checksum(&bytes[..HEADER_LEN], &bytes[HEADER_LEN..end]);
    bytes[end..end + 16].copy_from_slice(&sum.to_le_bytes());
    std::fs::write(&victim, &bytes).unwrap();

    let s = Server::start(dir.path());
    let key = m.keys[3];
    for slot in 0..10u64 {
        let root = s.call("getStateRoot", json!([slot]));
        let proof = s.call("getAccountProof", json!([b58(&key), {"slot": slot}]));
        if slot < 6 {
            assert_eq!(root["result"]["value"]["root"], b58(&roots[&slot]), "slot {slot}: {root}");
            assert!(proof.get("result").is_some(), "slot {slot}: {proof}");
        } else {
            // Slot 6 names a file whose header disagrees; later slots' records may reach it.
            for r in [&root, &proof] {
                assert_eq!(r["error"]["code"], -32011, "slot {slot}: {r}");
                assert_eq!(r["error"]["data"]["slot"], slot);
                assert!(r["error"]["data"]["reason"].as_str().unwrap().contains(&names[6][..10]), "{r}");
            }
        }
    }
    let metrics = s.metrics();
    assert!(metrics.lines().any(|l| l == "hyades_damaged_snapshot_files 1"), "{metrics}");
    assert!(metrics.lines().any(|l| l.starts_with("hyades_errors_total{code=\"-32011\"}")), "{metrics}");
}

/// A web page on another origin may call the API: answers carry `access-control-allow-origin: *`
/// and a preflight is answered without touching the files.
#[test]
fn pages_on_other_origins_may_call_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = Model::new(WriterConfig::new(dir.path()), 6);
    m.commit_random(50);
    m.finish();
    let s = Server::start(dir.path());
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let pre = agent.options(&s.url).header("origin", "https://example.org").call().unwrap();
    assert_eq!(pre.status().as_u16(), 204);
    assert_eq!(pre.headers().get("access-control-allow-origin").unwrap(), "*");
    assert!(pre.headers().get("access-control-allow-headers").unwrap().to_str().unwrap().contains("content-type"));
    let r = agent
        .post(&s.url)
        .header("origin", "https://example.org")
        .header("content-type", "application/json")
        .send(r#"{"jsonrpc":"2.0","id":1,"method":"getHealth","params":[]}"#)
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers().get("access-control-allow-origin").unwrap(), "*");
}
