//! What a bridge's submitter reads, from the relayer binary against three real Hyades servers on
//! loopback: `--json-lines` on stdout and `GET /roots?from=S` on `roots_addr`, each exactly the
//! accepted roots with their record hashes and signers, and `/roots` still complete after the
//! relayer is killed and restarted.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::feed::FeedServer;
use common::{Cluster, Kind, Producer, assert_complete, b58, config_text, signer, slot_bank_hash, wait_for_output};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);

/// The relayer with `--json-lines`; its JSON lines and the `/roots` address it logs.
fn spawn(config: &Path) -> (Child, mpsc::Receiver<Value>, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_aldb-relayer"))
        .arg("--config")
        .arg(config)
        .arg("--json-lines")
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (lines_tx, lines) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let line = line.unwrap();
            let v: Value =
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout line {line:?} is not JSON: {e}"));
            if lines_tx.send(v).is_err() {
                return;
            }
        }
    });
    let (addr_tx, addr_rx) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(rest) = line.split("accepted roots on http://").nth(1) {
                let addr: SocketAddr = rest.split('/').next().unwrap().parse().unwrap();
                let _ = addr_tx.send(addr);
            }
        }
    });
    let addr = addr_rx.recv_timeout(WAIT).expect("the relayer logs its /roots address");
    (child, lines, addr)
}

/// `GET target`: the status code and the body as JSON.
fn get(addr: SocketAddr, target: &str) -> (u16, Value) {
    let mut tcp = TcpStream::connect(addr).unwrap();
    write!(tcp, "GET {target} HTTP/1.1\r\nHost: relayer\r\n\r\n").unwrap();
    let mut text = String::new();
    tcp.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.contains("Content-Type: application/json"), "{head}");
    (head.split(' ').nth(1).unwrap().parse().unwrap(), serde_json::from_str(body).unwrap())
}

/// Every root from `from` up, page by page as a submitter follows it.
fn follow(addr: SocketAddr, mut from: u64, limit: usize) -> Vec<Value> {
    let mut all = Vec::new();
    loop {
        let (status, page) = get(addr, &format!("/roots?from={from}&limit={limit}"));
        assert_eq!(status, 200, "{page}");
        let page = page.as_array().unwrap().clone();
        assert!(page.len() <= limit);
        let Some(last) = page.last() else { return all };
        from = last["slot"].as_u64().unwrap() + 1;
        all.extend(page);
    }
}

fn slots_and_roots(v: &[Value]) -> Vec<(u64, [u8; 32])> {
    v.iter()
        .map(|e| (e["slot"].as_u64().unwrap(), aldb_verify::hash_from_base58(e["root"].as_str().unwrap()).unwrap()))
        .collect()
}

#[test]
fn json_lines_and_the_roots_endpoint_carry_every_accepted_root() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let producers: Vec<Producer> =
        (1..=3u8).map(|k| Producer::new(Kind::Honest(k), &tmp.path().join(format!("p{k}")))).collect();
    let mut cluster = Cluster::new(&tmp.path().join("reference"), producers);
    for _ in 0..10 {
        cluster.step();
    }
    let mut servers: Vec<FeedServer> = rt.block_on(async {
        let mut v = Vec::new();
        for p in &cluster.producers {
            v.push(FeedServer::start(&p.dir, "127.0.0.1:0".parse().unwrap()).await);
        }
        v
    });
    let urls: Vec<String> = servers.iter().map(FeedServer::url).collect();
    let out_dir = tmp.path().join("relay");
    std::fs::create_dir_all(&out_dir).unwrap();
    let config = tmp.path().join("relayer.json5");
    let text = config_text(&urls, &[1, 2, 3], 2, &out_dir, 0)
        .replace("start_slot:", "roots_addr: \"127.0.0.1:0\", start_slot:");
    std::fs::write(&config, text).unwrap();

    let (mut child, lines, addr) = spawn(&config);
    for _ in 0..30 {
        cluster.step();
        std::thread::sleep(Duration::from_millis(5));
    }
    let last = cluster.last.unwrap();
    let out = wait_for_output(&out_dir, last, WAIT);
    assert_complete(&out, &cluster.roots, 0, last);

    // JSON lines: one per accepted root, in order, with its record and signers.
    let mut json = Vec::new();
    let t = Instant::now();
    while json.len() < out.len() {
        json.push(lines.recv_timeout(WAIT.saturating_sub(t.elapsed())).expect("a JSON line per accepted root"));
    }
    assert_eq!(slots_and_roots(&json), out);
    let ids: Vec<String> = (1..=3).map(|i| b58(&signer(i).identity())).collect();
    for e in &json {
        let slot = e["slot"].as_u64().unwrap();
        assert_eq!(e["recordHash"], b58(&cluster.record_hashes[&slot]), "{e}");
        assert_eq!(e["commitment"], "finalized");
        let bank_hash = slot_bank_hash(slot, cluster.roots[&slot]).map(|h| b58(&h));
        assert_eq!(e["bankHash"], json!(bank_hash), "{e}");
        let signers: Vec<&str> = e["signers"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
        assert!(signers.len() >= 2 && signers.iter().all(|s| ids.iter().any(|i| i == s)), "{e}");
        assert!(signers.is_sorted_by_key(|s| aldb_verify::hash_from_base58(s).unwrap()), "{e}");
    }

    // /roots: the same objects, followed page by page from any slot.
    assert_eq!(follow(addr, 0, 7), json);
    let tenth = out[9].0;
    assert_eq!(slots_and_roots(&follow(addr, tenth, 1000)), out[9..]);
    assert_eq!(get(addr, &format!("/roots?from={}", last + 1)), (200, Value::Array(vec![])));
    assert_eq!(get(addr, "/roots?from=x").0, 400);
    assert_eq!(get(addr, "/elsewhere").0, 404);

    // Killed and restarted: roots accepted before still served (from the output file, with
    // only slot and root), the new ones complete.
    child.kill().unwrap();
    child.wait().unwrap();
    let (mut child, _lines, addr) = spawn(&config);
    for _ in 0..10 {
        cluster.step();
        std::thread::sleep(Duration::from_millis(5));
    }
    let last = cluster.last.unwrap();
    let out = wait_for_output(&out_dir, last, WAIT);
    assert_complete(&out, &cluster.roots, 0, last);
    let t = Instant::now();
    let served = loop {
        let served = follow(addr, 0, 1000);
        if served.len() == out.len() || t.elapsed() > WAIT {
            break served;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(slots_and_roots(&served), out);
    assert_eq!(served[0]["recordHash"], Value::Null, "the first run's roots come from the output file");
    assert_eq!(served.last().unwrap()["recordHash"], b58(&cluster.record_hashes[&last]));

    child.kill().unwrap();
    child.wait().unwrap();
    for s in servers.iter_mut() {
        rt.block_on(s.stop());
    }
}
