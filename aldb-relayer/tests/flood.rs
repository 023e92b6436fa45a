//! A flood of well-formed records nobody configured signed, from lying endpoints on loopback,
//! beside two honest Hyades servers: the relayer still accepts exactly the honest roots, holds
//! only signed records (the candidates gauge stays small), counts every dropped record by reason,
//! and writes a bounded number of log lines. Fixed seeds throughout.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aldb_relayer::chain::WINDOW;
use aldb_relayer::{Config, Relayer};
use aldb_verify::record::Attestation;
use aldb_verify::record_json::attested_record_to_json_value;
use aldb_verify::{Commitment, RootRecord};
use common::feed::FeedServer;
use common::{Cluster, GENESIS, Kind, Producer, assert_complete, config_text, output, signer, wait_for_output};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_tungstenite::tungstenite::Message;

const WAIT: Duration = Duration::from_secs(60);
/// The relayer's rate limit: one line per reason and endpoint in this time.
const LOG_INTERVAL: Duration = Duration::from_secs(10);
const SLOT_GAP: Duration = Duration::from_millis(5);
/// Slots the junk covers (the honest chain is produced over most of them).
const JUNK_SLOTS: u64 = 200;
/// Junk records per slot and lying endpoint: a third unsigned, a third with a forged signature
/// in a configured identity's name, a third signed by an outsider.
const PER_SLOT: u64 = 150;
/// Records far beyond any window, validly signed by configured identity 3, from the first liar.
const FAR: u64 = 50;
const FAR_SLOT: u64 = 10_000;
// Beyond the window of an anchor at slot 0.
const _: () = assert!(FAR_SLOT > WINDOW + 1);

// Every log line of the process, to count what the relayer wrote.
struct Capture;
static LINES: Mutex<Vec<(log::Level, String, Instant)>> = Mutex::new(Vec::new());
static CAPTURE: Capture = Capture;

impl log::Log for Capture {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Info
    }
    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) && r.target().starts_with("aldb_relayer") {
            LINES.lock().unwrap().push((r.level(), r.args().to_string(), Instant::now()));
        }
    }
    fn flush(&self) {}
}

/// xorshift64, fixed seed per liar.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn hash(&mut self) -> [u8; 32] {
        let mut h = [0u8; 32];
        for c in h.chunks_mut(8) {
            c.copy_from_slice(&self.next().to_le_bytes());
        }
        h
    }
}

fn notification(record: &RootRecord, attestations: &[Attestation]) -> String {
    let doc = attested_record_to_json_value(record, attestations);
    json!({"jsonrpc": "2.0", "method": "recordNotification", "params": {"subscription": 1, "result": doc}}).to_string()
}

/// A record of the configured cluster with a random root (no parent: a valid encoding).
fn junk(slot: u64, rng: &mut Rng) -> RootRecord {
    RootRecord {
        genesis_hash: GENESIS,
        slot,
        parent: None,
        commitment: Commitment::Finalized,
        state_root: rng.hash(),
        block: None,
        bank_hash: None,
    }
}

struct Junk {
    messages: Vec<(u64, String)>,
    unsigned: u64,
    forged: u64,
    outsiders: u64,
}

/// `PER_SLOT` unusable records for every slot below `JUNK_SLOTS`, plus, with `signed_by_3`, one
/// record per slot and `FAR` far-off records validly signed by identity 3.
fn make_junk(seed: u64, signed_by_3: bool) -> Junk {
    let mut rng = Rng(seed);
    let (liar, outsider) = (signer(3), signer(9));
    let mut j = Junk { messages: Vec::new(), unsigned: 0, forged: 0, outsiders: 0 };
    for slot in 0..JUNK_SLOTS {
        for i in 0..PER_SLOT {
            let r = junk(slot, &mut rng);
            let h = r.hash();
            let attestations = match i % 3 {
                0 => Vec::new(),
                1 => {
                    let mut a = signer(1 + (i % 2) as u8).attest(&h);
                    a.signature[40] ^= 0x10;
                    j.forged += 1;
                    vec![a]
                }
                _ => {
                    j.outsiders += 1;
                    vec![outsider.attest(&h)]
                }
            };
            j.unsigned += 1;
            j.messages.push((slot, notification(&r, &attestations)));
        }
        if signed_by_3 {
            let r = junk(slot, &mut rng);
            j.messages.push((slot, notification(&r, &[liar.attest(&r.hash())])));
        }
    }
    if signed_by_3 {
        for slot in FAR_SLOT..FAR_SLOT + FAR {
            let r = junk(slot, &mut rng);
            j.messages.push((slot, notification(&r, &[liar.attest(&r.hash())])));
        }
    }
    j
}

/// A lying feed server: once `go` is true, sends every message at or after the subscription's
/// `fromSlot` (pausing `pause` after every `PER_SLOT`), then keeps the connection open.
async fn flood_server(messages: Arc<Vec<(u64, String)>>, go: watch::Receiver<bool>, pause: Duration) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut conns = JoinSet::new();
        while let Ok((tcp, _)) = listener.accept().await {
            let (messages, mut go) = (messages.clone(), go.clone());
            conns.spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_async(tcp).await else { return };
                let from = loop {
                    match ws.next().await {
                        Some(Ok(Message::Text(t))) => {
                            let v: Value = serde_json::from_str(t.as_str()).unwrap_or(Value::Null);
                            let reply = json!({"jsonrpc": "2.0", "id": v["id"], "result": 1}).to_string();
                            let _ = ws.send(Message::text(reply)).await;
                            break v["params"][0]["fromSlot"].as_u64().unwrap_or(0);
                        }
                        Some(Ok(_)) => continue,
                        _ => return,
                    }
                };
                let _ = go.wait_for(|g| *g).await;
                for (i, (_, m)) in messages.iter().filter(|(s, _)| *s >= from).enumerate() {
                    if ws.send(Message::text(m.clone())).await.is_err() {
                        return;
                    }
                    if (i as u64 + 1).is_multiple_of(PER_SLOT) && !pause.is_zero() {
                        tokio::time::sleep(pause).await;
                    }
                }
                // Stay connected (answering pings) until the relayer goes.
                while let Some(Ok(_)) = ws.next().await {}
            });
        }
    });
    addr
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < WAIT, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_flood_of_unsigned_records_is_dropped_counted_and_logged_sparingly() {
    log::set_logger(&CAPTURE).unwrap();
    log::set_max_level(log::LevelFilter::Info);
    let tmp = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    // Identities 1 and 2 serve the honest chain; 3 is configured but lies (first liar);
    // the second liar has no key at all.
    let producers: Vec<Producer> =
        (1..=2u8).map(|k| Producer::new(Kind::Honest(k), &tmp.path().join(format!("p{k}")))).collect();
    let mut cluster = Cluster::new(&tmp.path().join("reference"), producers);
    let before = make_junk(0x9e37_79b9_7f4a_7c15, true);
    let during = make_junk(0xd1b5_4a32_d192_ed03, false);
    let (go_before, go_rx) = watch::channel(false);
    let (go_during, during_rx) = watch::channel(false);
    let before_msgs = Arc::new(before.messages);
    let during_msgs = Arc::new(during.messages);
    let (honest, liar_before, liar_during) = rt.block_on(async {
        let mut v = Vec::new();
        for p in &cluster.producers {
            v.push(FeedServer::start(&p.dir, "127.0.0.1:0".parse().unwrap()).await);
        }
        let a = flood_server(before_msgs.clone(), go_rx, Duration::ZERO).await;
        let b = flood_server(during_msgs.clone(), during_rx, Duration::from_millis(15)).await;
        (v, a, b)
    });
    let mut urls: Vec<String> = honest.iter().map(FeedServer::url).collect();
    urls.push(format!("ws://{liar_before}/ws"));
    urls.push(format!("ws://{liar_during}/ws"));
    let out_dir = tmp.path().join("relay");
    std::fs::create_dir_all(&out_dir).unwrap();
    let config = Config::parse(&config_text(&urls, &[1, 2, 3], 2, &out_dir, 0), Path::new("")).unwrap();
    let relayer = Relayer::new(config);
    let stats = relayer.stats();
    let (stop_tx, stop_rx) = watch::channel(false);
    let handle = rt.spawn(relayer.run(stop_rx));

    // Sample the candidates gauge throughout.
    let most = Arc::new(AtomicU64::new(0));
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (stats, most, sampling) = (stats.clone(), most.clone(), sampling.clone());
        std::thread::spawn(move || {
            while sampling.load(Ordering::Relaxed) {
                most.fetch_max(stats.candidates.load(Ordering::Relaxed), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };

    // Phase 1: before any honest record, the first liar floods every slot and far beyond.
    let e = &stats.endpoints;
    go_before.send(true).unwrap();
    let held_by_3 = JUNK_SLOTS + FAR;
    wait_until("the first flood is processed", || {
        e[2].dropped_unsigned.load(Ordering::Relaxed) == before.unsigned
            && stats.candidates.load(Ordering::Relaxed) == held_by_3
    });
    // Only identity 3's validly signed records are held, one per slot; no anchor yet, so the
    // far ones too (within its quota).
    assert_eq!(e[2].bad_signatures.load(Ordering::Relaxed), before.forged);
    assert_eq!(e[2].outsiders.load(Ordering::Relaxed), before.outsiders);
    assert_eq!(stats.pending_slots.load(Ordering::Relaxed), held_by_3);

    // Phase 2: the honest chain is produced while the second liar floods.
    go_during.send(true).unwrap();
    for _ in 0..150 {
        cluster.step();
        std::thread::sleep(SLOT_GAP);
    }
    let last = cluster.last.unwrap();
    let out = wait_for_output(&out_dir, last, WAIT);
    assert_complete(&out, &cluster.roots, 0, last);
    let received = |i: usize| e[i].records.load(Ordering::Relaxed);
    let dropped = |i: usize| e[i].dropped_unsigned.load(Ordering::Relaxed) + e[i].dropped_stale.load(Ordering::Relaxed);
    wait_until("the second flood is processed", || {
        received(3) == during_msgs.len() as u64 && dropped(3) == received(3)
    });
    // Anchoring at slot 0 put the far records outside the window: dropped, and the first liar
    // was sent back to deliver them again, which it now holds back instead.
    wait_until("the first liar rewinds", || stats.rewinds.load(Ordering::Relaxed) >= 1);
    assert_eq!(stats.window_pruned.load(Ordering::Relaxed), FAR);
    assert_eq!(e[2].dropped_ahead.load(Ordering::Relaxed), 0, "the follower held them back");
    // Memory is released as slots are accepted: what is left is identity 3's record for each
    // junk slot above the last accepted one.
    let above = JUNK_SLOTS.saturating_sub(last + 1);
    wait_until("the gauges settle", || stats.candidates.load(Ordering::Relaxed) == above);
    assert_eq!(stats.pending_slots.load(Ordering::Relaxed), above);
    sampling.store(false, Ordering::Relaxed);
    sampler.join().unwrap();
    // At most one record per identity per slot was ever held: identity 3's junk, and the honest
    // record of the slots not yet accepted.
    let most = most.load(Ordering::Relaxed);
    assert!(most <= 2 * JUNK_SLOTS + FAR, "{most} records held at once");

    let text = aldb_relayer::metrics::render(&stats, &urls);
    let line = format!(
        "aldb_relayer_endpoint_dropped_total{{endpoint=\"{}\",reason=\"unsigned\"}} {}\n",
        urls[2], before.unsigned
    );
    assert!(text.contains(&line), "{line} not in\n{text}");
    assert!(text.contains(&format!("aldb_relayer_dropped_total{{reason=\"window\"}} {FAR}\n")));
    assert_eq!(stats.accepted.load(Ordering::Relaxed), output(&out_dir).len() as u64);
    assert_eq!((stats.conflicts.load(Ordering::Relaxed), stats.equivocations.load(Ordering::Relaxed)), (0, 0));

    let _ = stop_tx.send(true);
    rt.block_on(handle).unwrap().unwrap();
    // Tens of thousands of bad records, a handful of warnings: each reason at most once per
    // endpoint per 10 s, the rest counted as suppressed. However long a loaded machine takes over
    // the floods, no 10 s hold more lines than there are reasons and endpoints.
    let lines = LINES.lock().unwrap();
    let loud: Vec<(&String, Instant)> =
        lines.iter().filter(|(l, _, _)| *l <= log::Level::Warn).map(|(_, m, t)| (m, *t)).collect();
    let bad = before.unsigned + during.unsigned;
    for (i, (_, from)) in loud.iter().enumerate() {
        let within: Vec<&String> =
            loud[i..].iter().take_while(|(_, t)| t.duration_since(*from) < LOG_INTERVAL).map(|(m, _)| *m).collect();
        assert!(within.len() <= 40, "{} warning lines within 10 s for {bad} bad records:\n{within:#?}", within.len());
    }
    // Every unsigned record dropped asked for a line (stale ones are only counted).
    let asked = e[2].dropped_unsigned.load(Ordering::Relaxed) + e[3].dropped_unsigned.load(Ordering::Relaxed);
    assert!(asked >= before.unsigned, "{asked} unsigned drops");
    let suppressed = stats.log_suppressed.load(Ordering::Relaxed);
    assert!(suppressed + loud.len() as u64 >= asked, "{suppressed} suppressed, {} written, {asked} asked", loud.len());
    drop(lines);
    for mut s in honest {
        rt.block_on(s.stop());
    }
}
