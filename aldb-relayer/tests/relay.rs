//! The relayer against feed servers on loopback: three identities, two of them needed; lying,
//! broken and foreign endpoints beside the honest ones; a server stopped and restarted
//! mid-stream; the relayer killed mid-stream and restarted from its cursor. The output must be
//! exactly the honest root of every slot, once.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use aldb_relayer::{Config, Relayer};
use common::feed::FeedServer;
use common::{Cluster, Kind, Producer, assert_complete, b58, config_text, output, wait_for_output};

const WAIT: Duration = Duration::from_secs(30);
const SLOT_GAP: Duration = Duration::from_millis(5);

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

#[test]
fn accepts_the_honest_roots_despite_lying_endpoints_and_a_restarted_server() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime();
    let kinds = [
        Kind::Honest(1),
        Kind::Honest(2),
        Kind::Liar(3),
        Kind::BadSignature(2),
        Kind::BrokenChain(3),
        Kind::OtherGenesis(3),
    ];
    let producers: Vec<Producer> =
        kinds.iter().enumerate().map(|(i, k)| Producer::new(*k, &tmp.path().join(format!("p{i}")))).collect();
    let mut cluster = Cluster::new(&tmp.path().join("reference"), producers);
    // A backlog before anything is served.
    for _ in 0..20 {
        cluster.step();
    }
    let mut servers: Vec<FeedServer> = rt.block_on(async {
        let mut v = Vec::new();
        for p in &cluster.producers {
            v.push(FeedServer::start(&p.dir, loopback()).await);
        }
        v.push(FeedServer::garbage(&cluster.producers[0].dir, loopback()).await);
        v
    });
    let urls: Vec<String> = servers.iter().map(FeedServer::url).collect();
    let out_dir = tmp.path().join("relay");
    std::fs::create_dir_all(&out_dir).unwrap();
    let config = Config::parse(&config_text(&urls, &[1, 2, 3], 2, &out_dir, 0), Path::new("")).unwrap();
    let relayer = Relayer::new(config);
    let stats = relayer.stats();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let handle = rt.spawn(relayer.run(stop_rx));

    let mut slot_at_stop = 0;
    for i in 0..100 {
        let slot = cluster.step();
        std::thread::sleep(SLOT_GAP);
        if i == 30 {
            // The second honest server goes away: no quorum is possible without it.
            slot_at_stop = slot;
            rt.block_on(servers[1].stop());
        }
        if i == 60 {
            let stalled = output(&out_dir).last().map_or(0, |l| l.0);
            assert!(stalled <= slot_at_stop, "accepted slot {stalled} without the second identity");
            // The liars' records are judged only while their slot is open: an endpoint slower
            // than the honest ones may find every slot accepted before its record arrives. No slot
            // after the stop can be accepted yet, so theirs are judged: wait for it rather than
            // assume the schedule delivered them in time.
            let e = &stats.endpoints;
            let t = Instant::now();
            while e[3].bad_signatures.load(Ordering::Relaxed) == 0
                || stats.equivocations.load(Ordering::Relaxed) == 0
                || e[5].other_cluster.load(Ordering::Relaxed) == 0
                || e[6].bad_messages.load(Ordering::Relaxed) == 0
            {
                assert!(t.elapsed() < WAIT, "the liars' records were never judged: {}", stats.summary(&urls));
                std::thread::sleep(Duration::from_millis(10));
            }
            let (dir, addr) = (servers[1].dir.clone(), servers[1].addr);
            servers[1] = rt.block_on(FeedServer::start(&dir, addr));
        }
    }
    let last = cluster.last.unwrap();
    let out = wait_for_output(&out_dir, last, WAIT);
    assert_complete(&out, &cluster.roots, 0, last);

    let _ = stop_tx.send(true);
    rt.block_on(handle).unwrap().unwrap();
    let e = &stats.endpoints;
    let n = |i: usize, f: fn(&aldb_relayer::stats::EndpointStats) -> &std::sync::atomic::AtomicU64| {
        f(&e[i]).load(Ordering::Relaxed)
    };
    assert!(n(3, |s| &s.bad_signatures) > 0, "bad signatures are counted");
    assert!(n(5, |s| &s.other_cluster) > 0, "records of another cluster are counted");
    assert!(n(6, |s| &s.bad_messages) > 0, "garbage is counted");
    assert!(n(1, |s| &s.disconnects) > 0, "the restarted server's disconnect is counted");
    assert!(stats.equivocations.load(Ordering::Relaxed) > 0, "identity 3 signed two chains");
    assert_eq!(stats.conflicts.load(Ordering::Relaxed), 0);
    for s in servers.iter_mut() {
        rt.block_on(s.stop());
    }
}

fn spawn_relayer(config: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_aldb-relayer"))
        .arg("--config")
        .arg(config)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn resumes_from_its_cursor_after_being_killed() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime();
    let producers: Vec<Producer> =
        (1..=3u8).map(|k| Producer::new(Kind::Honest(k), &tmp.path().join(format!("p{k}")))).collect();
    let mut cluster = Cluster::new(&tmp.path().join("reference"), producers);
    for _ in 0..10 {
        cluster.step();
    }
    let mut servers: Vec<FeedServer> = rt.block_on(async {
        let mut v = Vec::new();
        for p in &cluster.producers {
            v.push(FeedServer::start(&p.dir, loopback()).await);
        }
        v
    });
    let urls: Vec<String> = servers.iter().map(FeedServer::url).collect();
    let out_dir = tmp.path().join("relay");
    std::fs::create_dir_all(&out_dir).unwrap();
    let config_path = tmp.path().join("relayer.json5");
    // No cursor: the trust anchor is the first attested record at slot 5 or later.
    std::fs::write(&config_path, config_text(&urls, &[1, 2, 3], 2, &out_dir, 5)).unwrap();

    let mut child = spawn_relayer(&config_path);
    let mut killed = 0;
    let mut killed_at = 0;
    // At least 150 slots, and on until the relayer was killed and restarted, however slowly a
    // loaded machine runs it.
    let mut steps = 0;
    while steps < 150 || killed < 2 {
        steps += 1;
        assert!(steps < 5000, "the relayer never wrote 25 lines");
        let slot = cluster.step();
        std::thread::sleep(SLOT_GAP);
        if killed == 0 && output(&out_dir).len() >= 25 {
            // SIGKILL mid-stream.
            child.kill().unwrap();
            child.wait().unwrap();
            killed = 1;
            killed_at = slot;
        } else if killed == 1 && slot > killed_at + 20 {
            // Pretend the kill landed between the output line and the cursor: roll the cursor
            // back one record, and leave a torn line behind.
            let out = output(&out_dir);
            let (prev, _) = out[out.len() - 2];
            let cursor = format!("{prev} {}\n", b58(&cluster.record_hashes[&prev]));
            std::fs::write(out_dir.join("cursor"), cursor).unwrap();
            let mut f = std::fs::OpenOptions::new().append(true).open(out_dir.join("roots.txt")).unwrap();
            std::io::Write::write_all(&mut f, b"999 3xT").unwrap();
            drop(f);
            child = spawn_relayer(&config_path);
            killed = 2;
        }
    }
    let last = cluster.last.unwrap();
    let out = wait_for_output(&out_dir, last, WAIT);
    assert_complete(&out, &cluster.roots, 5, last);
    child.kill().unwrap();
    child.wait().unwrap();
    for s in servers.iter_mut() {
        rt.block_on(s.stop());
    }
}
