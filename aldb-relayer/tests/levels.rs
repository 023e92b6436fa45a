//! The plugin's default and the relayer's default together: producers committing at `confirmed`
//! log each slot's `confirmed` record when it commits and its `finalized` record once it is
//! rooted, some slots later; Hyades serves both; a relayer left at its default (`finalized`)
//! accepts the finalized chain as slots are rooted, and one configured for `confirmed` accepts
//! the confirmed chain, neither seeing the other level's record of a slot as a conflict.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Duration;

use aldb_relayer::{Config, Relayer};
use aldb_snapshot::records::{RecordInput, RecordProducer};
use aldb_verify::{Commitment, Hash};
use common::feed::FeedServer;
use common::{GENESIS, assert_complete, b58, honest_root, produced, signer, wait_for_output};

const WAIT: Duration = Duration::from_secs(30);
/// Slots between a slot's commit and its root (a validator's is about 32).
const ROOT_LAG: usize = 6;

/// A relayer config with no `commitment` field unless `commitment` is given.
fn config(urls: &[String], dir: &Path, commitment: Option<&str>) -> Config {
    let ids: Vec<String> = (1..=3u8).map(|i| format!("\"{}\"", b58(&signer(i).identity()))).collect();
    let eps: Vec<String> = urls.iter().map(|e| format!("\"{e}\"")).collect();
    let level = commitment.map_or(String::new(), |c| format!("commitment: \"{c}\","));
    let text = format!(
        r#"{{ endpoints: [{}], identities: [{}], threshold: 2, genesis_hash: "{}", {level}
  cursor_file: "{}", output_file: "{}", reconnect: {{ initial_ms: 20, max_ms: 200 }} }}"#,
        eps.join(", "),
        ids.join(", "),
        b58(&GENESIS),
        dir.join("cursor").display(),
        dir.join("roots.txt").display(),
    );
    Config::parse(&text, Path::new("")).unwrap()
}

fn input(slot: u64, parent: Option<u64>, commitment: Commitment) -> RecordInput {
    RecordInput {
        slot,
        parent,
        commitment,
        state_root: honest_root(slot),
        block: None,
        parent_bank_hash: None,
        bank_hash: None,
    }
}

#[test]
fn the_plugin_and_relayer_defaults_accept_roots_at_both_levels() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mut producers: Vec<RecordProducer> = (1..=3u8)
        .map(|k| RecordProducer::open(&tmp.path().join(format!("p{k}")), GENESIS, Some(signer(k))).unwrap())
        .collect();
    let servers: Vec<FeedServer> = rt.block_on(async {
        let mut v = Vec::new();
        for k in 1..=3u8 {
            v.push(
                FeedServer::start(&tmp.path().join(format!("p{k}")), "127.0.0.1:0".parse::<SocketAddr>().unwrap())
                    .await,
            );
        }
        v
    });
    let urls: Vec<String> = servers.iter().map(FeedServer::url).collect();
    let (fin_dir, conf_dir) = (tmp.path().join("finalized"), tmp.path().join("confirmed"));
    std::fs::create_dir_all(&fin_dir).unwrap();
    std::fs::create_dir_all(&conf_dir).unwrap();
    let default = config(&urls, &fin_dir, None);
    assert_eq!(default.commitment, Commitment::Finalized, "the relayer's default");
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let fin = Relayer::new(default);
    let conf = Relayer::new(config(&urls, &conf_dir, Some("confirmed")));
    let (fin_stats, conf_stats) = (fin.stats(), conf.stats());
    let fin_task = rt.spawn(fin.run(stop_rx.clone()));
    let conf_task = rt.spawn(conf.run(stop_rx));

    // Commit slots as a validator does (some skipped), each rooted ROOT_LAG commits later.
    let mut committed: Vec<(u64, Option<u64>)> = Vec::new();
    let mut roots: BTreeMap<u64, Hash> = BTreeMap::new();
    let mut slot = 0;
    while committed.len() < 80 {
        if produced(slot) {
            let parent = committed.last().map(|c| c.0);
            committed.push((slot, parent));
            roots.insert(slot, honest_root(slot));
            for p in &mut producers {
                p.produce(input(slot, parent, Commitment::Confirmed)).unwrap().unwrap();
            }
            if let Some(&(rooted, parent)) = committed.len().checked_sub(ROOT_LAG + 1).map(|i| &committed[i]) {
                for p in &mut producers {
                    p.produce(input(rooted, parent, Commitment::Finalized)).unwrap().unwrap();
                }
            }
            std::thread::sleep(Duration::from_millis(3));
        }
        slot += 1;
    }
    let last = committed.last().unwrap().0;
    let last_rooted = committed[committed.len() - 1 - ROOT_LAG].0;
    let out = wait_for_output(&conf_dir, last, WAIT);
    assert_complete(&out, &roots, 0, last);
    let out = wait_for_output(&fin_dir, last_rooted, WAIT);
    assert_complete(&out, &roots, 0, last_rooted);
    assert_eq!(out.last().unwrap().0, last_rooted, "nothing accepted at finalized before it is rooted");
    // Two endpoints carry the quorum, so the outputs can be complete before the third has sent
    // anything; every endpoint does send both levels, so wait for that instead of assuming it.
    let t = std::time::Instant::now();
    while ![&fin_stats, &conf_stats]
        .iter()
        .all(|s| s.endpoints.iter().all(|e| e.low_commitment.load(Ordering::Relaxed) > 0))
    {
        assert!(t.elapsed() < WAIT, "an endpoint's other level was never seen: {}", fin_stats.summary(&urls));
        std::thread::sleep(Duration::from_millis(10));
    }

    let _ = stop_tx.send(true);
    rt.block_on(fin_task).unwrap().unwrap();
    rt.block_on(conf_task).unwrap().unwrap();
    for s in [&fin_stats, &conf_stats] {
        assert_eq!(s.conflicts.load(Ordering::Relaxed), 0);
        assert_eq!(s.equivocations.load(Ordering::Relaxed), 0);
        assert!(
            s.endpoints.iter().all(|e| e.low_commitment.load(Ordering::Relaxed) > 0),
            "the other level is seen and ignored"
        );
    }
    for mut s in servers {
        rt.block_on(s.stop());
    }
}
