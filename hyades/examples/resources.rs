//! The resource suite's client (run by `scripts/hyades-resources.sh` against a real `hyades`):
//! for each abuse — slow clients, unread WebSocket replies, huge batches — it runs the abuse for
//! `--seconds` while a legitimate HTTP client and a legitimate WebSocket client ask for proofs and
//! time each answer, and samples the server's RSS from `/proc/PID/status`. It prints a table and
//! a final JSON line, and exits non-zero when a legitimate request fails, its p99 latency passes
//! `--p99-ms`, or the RSS grows more than `--rss-growth-mib` during a phase.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use clap::Parser;
use futures_util::{SinkExt, StreamExt};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;

#[derive(Parser)]
struct Opts {
    /// The service's JSON-RPC address, host:port.
    #[arg(long)]
    addr: String,
    /// The metrics address, host:port.
    #[arg(long)]
    metrics_addr: String,
    /// The server's process id, for its RSS.
    #[arg(long)]
    pid: u32,
    /// Seconds per phase.
    #[arg(long, default_value_t = 20)]
    seconds: u64,
    /// Bound on the RSS growth during any phase, MiB.
    #[arg(long, default_value_t = 256)]
    rss_growth_mib: u64,
    /// Bound on the p99 latency of legitimate requests during any phase, ms.
    #[arg(long, default_value_t = 100.0)]
    p99_ms: f64,
    /// Slow connections held open during the slow-client phase.
    #[arg(long, default_value_t = 300)]
    slow_clients: usize,
    /// WebSocket clients that never read, during the unread-replies phase.
    #[arg(long, default_value_t = 8)]
    unread_clients: usize,
    /// Clients sending huge batches, during the huge-batches phase.
    #[arg(long, default_value_t = 6)]
    batch_clients: usize,
}

/// Counts what the abusers saw happen to them.
#[derive(Default)]
struct Seen {
    closed: AtomicU64,
    too_large: AtomicU64,
    answers: AtomicU64,
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn metrics(addr: &str) -> String {
    ureq::get(&format!("http://{addr}/metrics"))
        .call()
        .ok()
        .and_then(|mut r| r.body_mut().read_to_string().ok())
        .unwrap_or_default()
}

/// `hyades_limit_hits_total` by limit.
fn limit_hits(text: &str) -> std::collections::BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| l.strip_prefix("hyades_limit_hits_total{limit=\""))
        .filter_map(|l| {
            l.split_once("\"} ").map(|(k, v)| (k.to_string(), v.trim().parse::<f64>().unwrap_or(0.0) as u64))
        })
        .collect()
}

fn random_key(rng: &mut ChaCha8Rng) -> String {
    bs58::encode(rng.random::<[u8; 32]>()).into_string()
}

fn proof_request(id: u64, key: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "getAccountProof", "params": [key]})
}

/// The legitimate HTTP client: one keep-alive connection, a proof every 2 ms.
fn legit_http(addr: String, stop: Arc<AtomicBool>, lat: Arc<Mutex<Vec<f64>>>, errors: Arc<AtomicU64>) {
    let agent: ureq::Agent = ureq::Agent::config_builder().timeout_global(Some(Duration::from_secs(10))).build().into();
    let url = format!("http://{addr}/");
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut id = 0;
    while !stop.load(Ordering::Relaxed) {
        id += 1;
        let req = proof_request(id, &random_key(&mut rng));
        let t = Instant::now();
        let ok = agent
            .post(&url)
            .send_json(&req)
            .ok()
            .and_then(|mut r| r.body_mut().read_json::<Value>().ok())
            .is_some_and(|v| v["result"]["value"]["proof"].is_object());
        lat.lock().unwrap().push(t.elapsed().as_secs_f64() * 1e3);
        if !ok {
            errors.fetch_add(1, Ordering::Relaxed);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The legitimate WebSocket client: a proof every 2 ms on one connection.
async fn legit_ws(addr: String, stop: Arc<AtomicBool>, lat: Arc<Mutex<Vec<f64>>>, errors: Arc<AtomicU64>) {
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let Ok((mut ws, _)) = tokio_tungstenite::connect_async(format!("ws://{addr}/ws")).await else {
        errors.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let mut id = 0;
    while !stop.load(Ordering::Relaxed) {
        id += 1;
        let t = Instant::now();
        let sent = ws.send(Message::text(proof_request(id, &random_key(&mut rng)).to_string())).await.is_ok();
        let answer = match sent {
            true => tokio::time::timeout(Duration::from_secs(10), ws.next()).await.ok().flatten(),
            false => None,
        };
        let ok = matches!(&answer, Some(Ok(Message::Text(t))) if t.as_str().contains("\"proof\""));
        lat.lock().unwrap().push(t.elapsed().as_secs_f64() * 1e3);
        if !ok {
            errors.fetch_add(1, Ordering::Relaxed);
            return;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Slowloris: a request head a byte a second, reconnecting whenever the server hangs up.
async fn slowloris(addr: String, stop: Arc<AtomicBool>, seen: Arc<Seen>, body: bool) {
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut tcp) = TcpStream::connect(&addr).await else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let head: &[u8] = if body {
            b"POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n["
        } else {
            b"POST / HTTP/1.1\r\nhost: x\r\n"
        };
        let _ = tcp.write_all(head).await;
        let mut buf = [0u8; 512];
        while !stop.load(Ordering::Relaxed) {
            if tcp.write_all(b"x").await.is_err() {
                break;
            }
            if let Ok(Ok(0) | Err(_)) = tokio::time::timeout(Duration::from_secs(1), tcp.read(&mut buf)).await {
                break;
            }
        }
        if !stop.load(Ordering::Relaxed) {
            seen.closed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A connection that never says anything, reconnecting whenever the server hangs up.
async fn silent(addr: String, stop: Arc<AtomicBool>, seen: Arc<Seen>) {
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut tcp) = TcpStream::connect(&addr).await else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let mut buf = [0u8; 512];
        loop {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            if let Ok(Ok(0) | Err(_)) = tokio::time::timeout(Duration::from_millis(500), tcp.read(&mut buf)).await {
                break;
            }
        }
        seen.closed.fetch_add(1, Ordering::Relaxed);
    }
}

/// The batch: 100 × `getRootRecords [0, 5000]`, about 7.9 KB.
fn huge_batch() -> String {
    let b: Vec<Value> =
        (0..100).map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "getRootRecords", "params": [0, 5000]})).collect();
    Value::Array(b).to_string()
}

/// Sends heavy requests and huge batches over WebSocket and never reads; reconnects when closed.
async fn unread(addr: String, stop: Arc<AtomicBool>, seen: Arc<Seen>) {
    let batch = huge_batch();
    let single = json!({"jsonrpc": "2.0", "id": 1, "method": "getRootRecords", "params": [0, 5000]}).to_string();
    while !stop.load(Ordering::Relaxed) {
        let Ok((ws, _)) = tokio_tungstenite::connect_async(format!("ws://{addr}/ws")).await else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let (mut tx, _rx) = ws.split();
        let mut i = 0u64;
        while !stop.load(Ordering::Relaxed) {
            i += 1;
            let m = if i.is_multiple_of(4) { batch.clone() } else { single.clone() };
            match tokio::time::timeout(Duration::from_secs(1), tx.send(Message::text(m))).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => break,
                // The server stopped reading (its queue is full): keep trying.
                Err(_) => {}
            }
        }
        if !stop.load(Ordering::Relaxed) {
            seen.closed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Posts huge batches and reads the answers (HTTP); counts -32020 answers.
async fn batches_http(addr: String, stop: Arc<AtomicBool>, seen: Arc<Seen>) {
    let body = huge_batch();
    tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent =
            ureq::Agent::config_builder().timeout_global(Some(Duration::from_secs(30))).build().into();
        let url = format!("http://{addr}/");
        while !stop.load(Ordering::Relaxed) {
            let text = agent
                .post(&url)
                .header("content-type", "application/json")
                .send(&body)
                .ok()
                .and_then(|mut r| r.body_mut().with_config().limit(u64::MAX).read_to_string().ok());
            count_answer(&seen, text.as_deref());
        }
    })
    .await
    .unwrap();
}

/// The same over WebSocket, reading every answer.
async fn batches_ws(addr: String, stop: Arc<AtomicBool>, seen: Arc<Seen>) {
    let body = huge_batch();
    while !stop.load(Ordering::Relaxed) {
        let Ok((mut ws, _)) = tokio_tungstenite::connect_async(format!("ws://{addr}/ws")).await else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        while !stop.load(Ordering::Relaxed) {
            if ws.send(Message::text(body.clone())).await.is_err() {
                break;
            }
            match tokio::time::timeout(Duration::from_secs(30), ws.next()).await {
                Ok(Some(Ok(Message::Text(t)))) => count_answer(&seen, Some(t.as_str())),
                _ => break,
            }
        }
    }
}

fn count_answer(seen: &Seen, text: Option<&str>) {
    match text {
        Some(t) if t.contains("-32020") => seen.too_large.fetch_add(1, Ordering::Relaxed),
        Some(_) => seen.answers.fetch_add(1, Ordering::Relaxed),
        None => seen.closed.fetch_add(1, Ordering::Relaxed),
    };
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() -> Result<()> {
    let o = Opts::parse();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    if rss_kib(o.pid) == 0 {
        bail!("cannot read the RSS of process {}", o.pid);
    }
    let phases = ["baseline", "slow-clients", "unread-replies", "huge-batches"];
    let mut rows = Vec::new();
    let mut failed = Vec::new();
    println!(
        "{:<15} {:>7} {:>5} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>8}  limit hits",
        "phase", "legit", "errs", "http p50", "http p99", "ws p99", "max ms", "rss MiB", "peak MiB", "growth", "closed"
    );
    for phase in phases {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Seen::default());
        let (http_lat, ws_lat) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(Vec::new())));
        let errors = Arc::new(AtomicU64::new(0));
        let hits_before = limit_hits(&metrics(&o.metrics_addr));
        let rss_start = rss_kib(o.pid);
        let peak = Arc::new(AtomicU64::new(rss_start));
        let sampler = {
            let (stop, peak, pid) = (stop.clone(), peak.clone(), o.pid);
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    peak.fetch_max(rss_kib(pid), Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(50));
                }
            })
        };
        let mut tasks = Vec::new();
        let _guard = rt.enter();
        let a = o.addr.clone();
        match phase {
            "slow-clients" => {
                for i in 0..o.slow_clients {
                    tasks.push(rt.spawn(slowloris(a.clone(), stop.clone(), seen.clone(), i % 10 == 0)));
                }
                for _ in 0..o.slow_clients / 3 {
                    tasks.push(rt.spawn(silent(a.clone(), stop.clone(), seen.clone())));
                }
            }
            "unread-replies" => {
                for _ in 0..o.unread_clients {
                    tasks.push(rt.spawn(unread(a.clone(), stop.clone(), seen.clone())));
                }
            }
            "huge-batches" => {
                for i in 0..o.batch_clients {
                    if i % 3 == 2 {
                        tasks.push(rt.spawn(batches_ws(a.clone(), stop.clone(), seen.clone())));
                    } else {
                        tasks.push(rt.spawn(batches_http(a.clone(), stop.clone(), seen.clone())));
                    }
                }
            }
            _ => {}
        }
        // Let the abuse build up before the legitimate clients start.
        std::thread::sleep(Duration::from_secs(1));
        let legit = {
            let (a, stop, lat, errors) = (a.clone(), stop.clone(), http_lat.clone(), errors.clone());
            std::thread::spawn(move || legit_http(a, stop, lat, errors))
        };
        let legit_ws_task = rt.spawn(legit_ws(a.clone(), stop.clone(), ws_lat.clone(), errors.clone()));
        std::thread::sleep(Duration::from_secs(o.seconds));
        stop.store(true, Ordering::Relaxed);
        legit.join().map_err(|_| anyhow::anyhow!("legit client panicked"))?;
        rt.block_on(async {
            let _ = tokio::time::timeout(Duration::from_secs(15), legit_ws_task).await;
        });
        for t in &tasks {
            t.abort();
        }
        sampler.join().map_err(|_| anyhow::anyhow!("sampler panicked"))?;
        let hits_after = limit_hits(&metrics(&o.metrics_addr));
        let hits: Vec<String> = hits_after
            .iter()
            .filter_map(|(k, v)| {
                let d = v.saturating_sub(*hits_before.get(k).unwrap_or(&0));
                (d > 0).then(|| format!("{k}={d}"))
            })
            .collect();
        let mut h = http_lat.lock().unwrap().clone();
        let mut w = ws_lat.lock().unwrap().clone();
        h.sort_by(f64::total_cmp);
        w.sort_by(f64::total_cmp);
        let max = h.last().copied().unwrap_or(0.0).max(w.last().copied().unwrap_or(0.0));
        let (p99h, p99w) = (percentile(&h, 0.99), percentile(&w, 0.99));
        let peak = peak.load(Ordering::Relaxed);
        let growth_mib = peak.saturating_sub(rss_start) as f64 / 1024.0;
        let errs = errors.load(Ordering::Relaxed);
        println!(
            "{:<15} {:>7} {:>5} {:>8.2} {:>8.2} {:>8.2} {:>8.1} {:>8.1} {:>9.1} {:>9.1} {:>8}  {}",
            phase,
            h.len() + w.len(),
            errs,
            percentile(&h, 0.5),
            p99h,
            p99w,
            max,
            rss_start as f64 / 1024.0,
            peak as f64 / 1024.0,
            growth_mib,
            seen.closed.load(Ordering::Relaxed),
            hits.join(" ")
        );
        if errs > 0 {
            failed.push(format!("{phase}: {errs} legitimate requests failed"));
        }
        if h.is_empty() || w.is_empty() {
            failed.push(format!("{phase}: a legitimate client got no answer"));
        }
        if p99h.max(p99w) > o.p99_ms {
            failed.push(format!("{phase}: legitimate p99 {:.1} ms > {} ms", p99h.max(p99w), o.p99_ms));
        }
        if growth_mib > o.rss_growth_mib as f64 {
            failed.push(format!("{phase}: RSS grew {growth_mib:.0} MiB > {} MiB", o.rss_growth_mib));
        }
        rows.push(json!({
            "phase": phase,
            "legit_requests": h.len() + w.len(),
            "legit_errors": errs,
            "http_p50_ms": percentile(&h, 0.5),
            "http_p99_ms": p99h,
            "ws_p99_ms": p99w,
            "max_ms": max,
            "rss_start_mib": rss_start as f64 / 1024.0,
            "rss_peak_mib": peak as f64 / 1024.0,
            "rss_growth_mib": growth_mib,
            "abuser_connections_closed": seen.closed.load(Ordering::Relaxed),
            "abuser_answers": seen.answers.load(Ordering::Relaxed),
            "abuser_too_large": seen.too_large.load(Ordering::Relaxed),
            "limit_hits": hits,
        }));
        // Let the server drop what the abusers left behind before the next phase.
        std::thread::sleep(Duration::from_secs(2));
    }
    let rss_end = rss_kib(o.pid) as f64 / 1024.0;
    let summary = json!({
        "suite": "hyades-resources",
        "seconds_per_phase": o.seconds,
        "bounds": {"p99_ms": o.p99_ms, "rss_growth_mib": o.rss_growth_mib, "legit_errors": 0},
        "rss_end_mib": rss_end,
        "phases": rows,
        "pass": failed.is_empty(),
        "failures": failed,
    });
    println!("{summary}");
    if !failed.is_empty() {
        bail!("resource bounds exceeded: {}", failed.join("; "));
    }
    Ok(())
}
