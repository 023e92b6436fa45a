//! `hyades-bench`: load benchmark of the Hyades service.
//!
//! Writes a snapshot directory with the real engine and writer (N accounts, then K-1 slots of
//! random updates, all K kept), starts the service in-process on loopback, checks a sample of
//! its answers end to end, then drives it with C concurrent keep-alive HTTP clients, each issuing
//! `getAccountProof` for a random key (present or absent) at a random kept slot, for a fixed
//! time. Prints proofs/s and latency percentiles per execution mode, then one JSON line per mode.
//!
//! With `--s3-endpoint` it also ships the directory to a bucket (`aldb-ship`'s shipper) and
//! measures replicas (`hyades --store`) in the same run: 1, 2 and 4 replicas on the bucket, the
//! clients spread over them, each first with an empty cache (cold: the measurement starts with
//! the first request) and then again with the cache filled (warm), beside the directory's
//! Hyades; and the bytes stored per updated account per slot, in the directory and the bucket.
//! Credentials come from the `AWS_*` variables.
//!
//! The clients speak minimal HTTP/1.1 over raw sockets, so the load generator's own cost (it
//! shares the machine's cores with the server) stays small next to the server's.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use aldb_fixture::History;
use aldb_format::Account;
use aldb_snapshot::WriterConfig;
use aldb_verify::{Claim, Proof, hash_from_base58, hash_to_base58};
use anyhow::{Context, Result, bail, ensure};
use clap::Parser;
use hyades::{Config, Execution, Service};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[derive(Parser, Clone)]
#[command(
    name = "hyades-bench",
    about = "Load benchmark: getAccountProof throughput and latency of the Hyades service"
)]
struct Opts {
    /// Accounts written at the first slot.
    #[arg(long, default_value_t = 1 << 18)]
    accounts: u64,
    /// Slots written and kept (the first holds every account, the rest random updates).
    #[arg(long, default_value_t = 16)]
    slots: u64,
    /// Accounts updated per later slot.
    #[arg(long, default_value_t = 4096)]
    updates: usize,
    /// Concurrent clients, each with one keep-alive connection and one request in flight. 16
    /// already saturate the server on two cores; more add no proofs/s, only time requests wait
    /// in the client's own queue (BENCHMARKS.md §3 has the sweep).
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Measured seconds per execution mode and round.
    #[arg(long, default_value_t = 5.0)]
    duration: f64,
    /// Unmeasured seconds before each measurement.
    #[arg(long, default_value_t = 2.0)]
    warmup: f64,
    /// Execution modes to measure, comma-separated: inline, blocking, auto.
    #[arg(long, default_value = "inline,blocking,auto")]
    execution: String,
    /// Server worker threads (default: one per core).
    #[arg(long)]
    server_threads: Option<usize>,
    /// Client threads.
    #[arg(long, default_value_t = 1)]
    client_threads: usize,
    /// Percent of requests for keys that were never written (exclusion proofs).
    #[arg(long, default_value_t = 10)]
    absent_pct: u32,
    /// Rounds: each runs every mode once, in turn.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Seed of the accounts and of the request stream.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Build the snapshot directory here (kept) instead of in a temporary directory.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// An S3-compatible endpoint: ship the directory there and measure replicas beside it.
    #[arg(long)]
    s3_endpoint: Option<String>,
    /// The bucket (it must exist); each run ships under a prefix of its own.
    #[arg(long, default_value = "aldb-bench")]
    s3_bucket: String,
    /// Replica counts measured, comma-separated.
    #[arg(long, default_value = "1,2,4")]
    replicas: String,
    /// Bytes each replica's cache may hold (the default holds every file: warm means cached).
    #[arg(long, default_value_t = 8 << 30)]
    cache_bytes: u64,
}

/// The accounts written, and the slots served.
struct Fixture {
    keys: Vec<[u8; 32]>,
    build_secs: f64,
}

fn build(dir: &Path, o: &Opts) -> Result<Fixture> {
    let t = Instant::now();
    let mut rng = ChaCha8Rng::seed_from_u64(o.seed);
    let config = WriterConfig { keep_slots: o.slots.max(1), ..WriterConfig::new(dir) };
    let mut history = History::start(config, o.accounts)?;
    let account = |rng: &mut ChaCha8Rng, pubkey: [u8; 32]| {
        let len = rng.random_range(0..=200);
        Account {
            pubkey,
            lamports: rng.random_range(1..1_000_000_000_000),
            owner: rng.random(),
            executable: rng.random_bool(0.02),
            data: (0..len).map(|_| rng.random()).collect(),
        }
    };
    let keys: Vec<[u8; 32]> = (0..o.accounts).map(|_| rng.random()).collect();
    // The first slot in chunks, so the accounts' data is generated once and dropped after use.
    let first: Vec<Account> = keys.iter().map(|k| account(&mut rng, *k)).collect();
    history.commit(0, None, &first)?;
    drop(first);
    for slot in 1..o.slots {
        let batch: Vec<Account> = (0..o.updates)
            .map(|_| {
                let k = keys[rng.random_range(0..keys.len())];
                account(&mut rng, k)
            })
            .collect();
        history.commit(slot, Some(slot - 1), &batch)?;
    }
    history.finish()?;
    Ok(Fixture { keys, build_secs: t.elapsed().as_secs_f64() })
}

/// One keep-alive HTTP/1.1 connection.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    len: usize,
}

impl Conn {
    async fn connect(addr: std::net::SocketAddr) -> Result<Self> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Self { stream, buf: vec![0; 64 * 1024], len: 0 })
    }

    /// Sends one POST and reads the answer; returns the status and the body's range in `buf`.
    async fn post(&mut self, request: &[u8]) -> Result<(u16, std::ops::Range<usize>)> {
        self.stream.write_all(request).await?;
        let head_end = loop {
            if let Some(i) = find(&self.buf[..self.len], b"\r\n\r\n") {
                break i + 4;
            }
            self.fill().await?;
        };
        let head = std::str::from_utf8(&self.buf[..head_end]).context("response head is not text")?;
        let status: u16 = head.get(9..12).and_then(|s| s.parse().ok()).context("bad status line")?;
        let body_len: usize = head
            .lines()
            .find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("content-length").then(|| value.trim().parse().ok())?
            })
            .context("response without content-length")?;
        let end = head_end + body_len;
        if end > self.buf.len() {
            self.buf.resize(end.next_power_of_two(), 0);
        }
        while self.len < end {
            self.fill().await?;
        }
        Ok((status, head_end..end))
    }

    /// Drops the answer just read, keeping anything after it.
    fn consume(&mut self, end: usize) {
        self.buf.copy_within(end..self.len, 0);
        self.len -= end;
    }

    async fn fill(&mut self) -> Result<()> {
        if self.len == self.buf.len() {
            self.buf.resize(self.buf.len() * 2, 0);
        }
        let n = self.stream.read(&mut self.buf[self.len..]).await?;
        ensure!(n > 0, "server closed the connection");
        self.len += n;
        Ok(())
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn request_bytes(pubkey: &str, slot: u64, id: u64) -> Vec<u8> {
    let body =
        format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"getAccountProof","params":["{pubkey}",{{"slot":{slot}}}]}}"#);
    format!(
        "POST / HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The keys asked about, with their base58 text computed once rather than per request.
struct Keys {
    present: Vec<([u8; 32], String)>,
    /// Keys never written, for exclusion proofs.
    absent: Vec<([u8; 32], String)>,
}

impl Keys {
    fn new(written: &[[u8; 32]], seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xab5e);
        let named = |k: [u8; 32]| (k, hash_to_base58(&k));
        Self {
            present: written.iter().map(|k| named(*k)).collect(),
            absent: (0..4096).map(|_| named(rng.random())).collect(),
        }
    }
}

/// A random request: a written key or (`absent_pct` of the time) a fresh one, at a kept slot.
fn random_request(
    rng: &mut ChaCha8Rng,
    keys: &Keys,
    slots: &[u64],
    absent_pct: u32,
    id: u64,
) -> ([u8; 32], u64, Vec<u8>) {
    let pool = if rng.random_range(0..100) < absent_pct { &keys.absent } else { &keys.present };
    let (key, name) = &pool[rng.random_range(0..pool.len())];
    let slot = slots[rng.random_range(0..slots.len())];
    (*key, slot, request_bytes(name, slot, id))
}

/// Checks answers end to end before timing anything: each proof verifies against the root the
/// service reports for its slot, and commits to the account returned.
async fn check_sample(
    addr: std::net::SocketAddr,
    keys: &Keys,
    slots: &[u64],
    service: &Service,
    o: &Opts,
) -> Result<()> {
    let mut conn = Conn::connect(addr).await?;
    let mut rng = ChaCha8Rng::seed_from_u64(o.seed ^ 0x5eed);
    let (mut present, mut absent) = (0, 0);
    for id in 0..500 {
        let (key, slot, req) = random_request(&mut rng, keys, slots, 30, id);
        let (status, body) = conn.post(&req).await?;
        ensure!(status == 200, "HTTP {status}");
        let v: Value = serde_json::from_slice(&conn.buf[body.clone()])?;
        conn.consume(body.end);
        let value = &v["result"]["value"];
        ensure!(value["slot"] == slot, "wrong slot in {v}");
        let root = service.hyades().slot(Some(slot)).map_err(|e| anyhow::anyhow!("{e}"))?.root;
        ensure!(hash_from_base58(value["root"].as_str().unwrap_or_default())? == root, "wrong root in {v}");
        let proof = Proof::from_json_value(&value["proof"])?;
        match (proof.verify(&root, &key)?, &value["account"]) {
            (Claim::Absent, Value::Null) => absent += 1,
            (Claim::Present { value: h }, a) if !a.is_null() => {
                ensure!(a["lamports"].as_u64().is_some() && h != [0; 32], "bad account {a}");
                present += 1;
            }
            (claim, a) => bail!("proof claims {claim:?} but account is {a}"),
        }
    }
    println!("checked 500 answers end to end: {present} inclusion and {absent} exclusion proofs verify");
    Ok(())
}

struct RunResult {
    proofs: u64,
    errors: u64,
    secs: f64,
    latencies_ns: Vec<u64>,
}

/// Runs the clients against `addr` for warmup + duration; returns what the measured part saw.
fn drive(addr: std::net::SocketAddr, keys: Arc<Keys>, slots: Arc<Vec<u64>>, o: &Opts) -> Result<RunResult> {
    drive_many(&[addr], keys, slots, o, o.warmup)
}

/// Runs the clients, client `c` against `addrs[c % n]`, for `warmup` + duration.
fn drive_many(
    addrs: &[std::net::SocketAddr],
    keys: Arc<Keys>,
    slots: Arc<Vec<u64>>,
    o: &Opts,
    warmup: f64,
) -> Result<RunResult> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(o.client_threads.max(1))
        .thread_name("bench-client")
        .enable_all()
        .build()?;
    let start = Instant::now() + Duration::from_millis(100);
    let measure_from = start + Duration::from_secs_f64(warmup);
    let measure_to = measure_from + Duration::from_secs_f64(o.duration);
    let errors = Arc::new(AtomicU64::new(0));
    let results = rt.block_on(async {
        let mut tasks = Vec::new();
        for c in 0..o.clients {
            let (keys, slots, errors) = (keys.clone(), slots.clone(), errors.clone());
            let seed = o.seed.wrapping_add(1000 + c as u64);
            let absent_pct = o.absent_pct;
            let addr = addrs[c % addrs.len()];
            tasks.push(tokio::spawn(async move {
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                let mut lat = Vec::with_capacity(1 << 16);
                let mut conn = Conn::connect(addr).await?;
                tokio::time::sleep_until(start.into()).await;
                let mut id = 0u64;
                loop {
                    id += 1;
                    let (_, _, req) = random_request(&mut rng, &keys, &slots, absent_pct, id);
                    let t = Instant::now();
                    let (status, body) = conn.post(&req).await?;
                    let done = Instant::now();
                    let ok = status == 200 && conn.buf[body.clone()].starts_with(br#"{"jsonrpc":"2.0","result":"#);
                    conn.consume(body.end);
                    if done >= measure_to {
                        break;
                    }
                    // A cold run measures from the first request, fetches included.
                    if t >= measure_from || warmup == 0.0 {
                        if ok {
                            lat.push(u64::try_from((done - t).as_nanos()).unwrap_or(u64::MAX));
                        } else {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                Ok::<_, anyhow::Error>(lat)
            }));
        }
        let mut all = Vec::new();
        for t in tasks {
            all.push(t.await);
        }
        all
    });
    let mut latencies_ns = Vec::new();
    for r in results {
        latencies_ns.extend(r.context("client task failed")??);
    }
    latencies_ns.sort_unstable();
    Ok(RunResult {
        proofs: latencies_ns.len() as u64,
        errors: errors.load(Ordering::Relaxed),
        secs: o.duration,
        latencies_ns,
    })
}

/// The directory's proofs/s in `auto` mode (else the first mode measured), for the replicas'
/// ratio.
fn per_mode_local(runs: &[Value]) -> f64 {
    runs.iter()
        .find(|r| r["execution"] == "auto")
        .or_else(|| runs.first())
        .and_then(|r| r["proofs_per_s"].as_f64())
        .unwrap_or(0.0)
}

/// Replicas on a bucket beside the directory.
mod replicas {
    use super::*;
    use aldb_objstore::{BucketOptions, ShipConfig, Shipper};
    use hyades::StoreConfig;

    /// Bytes of snapshot files of slots after the first (the full one) in `names_sizes`, per
    /// updated account per slot.
    fn per_update(files: &[(String, u64)], o: &Opts) -> f64 {
        let later: u64 = files
            .iter()
            .filter(|(n, _)| aldb_format::format::parse_file_name(n).is_some_and(|(_, slot)| slot > 0))
            .map(|(_, s)| s)
            .sum();
        later as f64 / (o.slots.saturating_sub(1).max(1) as f64 * o.updates as f64)
    }

    pub(super) fn measure(
        endpoint: &str,
        dir: &Path,
        o: &Opts,
        keys: &Arc<Keys>,
        local_rate: f64,
    ) -> Result<(Vec<Value>, Value)> {
        let counts: Vec<usize> = o.replicas.split(',').map(|n| n.trim().parse::<usize>()).collect::<Result<_, _>>()?;
        let url = format!("s3://{}/run-{}-{}", o.s3_bucket, o.seed, std::process::id());
        let bucket = BucketOptions { endpoint: Some(endpoint.to_string()), allow_http: true, ..Default::default() };
        let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
        let (store, prefix) = aldb_objstore::open_bucket(&url, &bucket)?;
        let mut shipper = Shipper::new(store, prefix, ShipConfig::new(dir))?;
        let t = Instant::now();
        let shipped = rt.block_on(shipper.ship_once())?;
        println!(
            "shipped {} objects, {:.1} MiB, to {url} in {:.1} s",
            shipped.uploaded,
            shipped.bytes as f64 / (1 << 20) as f64,
            t.elapsed().as_secs_f64()
        );
        let manifest = shipper.manifest().context("no manifest after shipping")?;
        let in_bucket: Vec<(String, u64)> = manifest.snapshots.iter().map(|s| (s.name.clone(), s.size)).collect();
        let local: Vec<(String, u64)> = std::fs::read_dir(dir)?
            .filter_map(|e| {
                let e = e.ok()?;
                Some((e.file_name().to_str()?.to_string(), e.metadata().ok()?.len()))
            })
            .collect();
        let stored = json!({
            "local": (per_update(&local, o) * 10.0).round() / 10.0,
            "bucket": (per_update(&in_bucket, o) * 10.0).round() / 10.0,
        });
        println!("bytes stored per updated account per slot: {stored}");
        drop(rt);

        let mut out = Vec::new();
        for &n in &counts {
            let mut rates: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
            let mut lats: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
            let mut errors = [0u64; 2];
            for round in 0..o.rounds.max(1) {
                let mut srt = tokio::runtime::Builder::new_multi_thread();
                srt.enable_all();
                if let Some(t) = o.server_threads {
                    srt.worker_threads(t.max(1));
                }
                let srt = srt.build()?;
                let caches: Vec<tempfile::TempDir> = (0..n).map(|_| tempfile::tempdir()).collect::<Result<_, _>>()?;
                let mut services = Vec::new();
                for c in &caches {
                    let store = StoreConfig {
                        url: url.clone(),
                        bucket: bucket.clone(),
                        cache_bytes: o.cache_bytes,
                        vote_archive_bytes: aldb_objstore::DEFAULT_VOTE_ARCHIVE_BYTES,
                        fetch_wait: hyades::FETCH_WAIT,
                    };
                    let config = Config {
                        addr: "127.0.0.1:0".parse()?,
                        metrics_addr: None,
                        store: Some(store),
                        poll_interval: Duration::from_millis(500),
                        ..Config::new(c.path())
                    };
                    services.push(srt.block_on(Service::start(config))?);
                }
                let addrs: Vec<_> = services.iter().map(|s| s.local_addr()).collect();
                let slots: Arc<Vec<u64>> =
                    Arc::new(services[0].hyades().slots(0, u64::MAX).iter().map(|s| s.slot).collect());
                ensure!(!slots.is_empty(), "the replicas serve nothing");
                for (i, warmup) in [(0, 0.0), (1, o.warmup)] {
                    let r = drive_many(&addrs, keys.clone(), slots.clone(), o, warmup)?;
                    let rate = r.proofs as f64 / r.secs;
                    println!(
                        "round {round} {n} replica(s) {}: {rate:.0} proofs/s, p50 {:.0} µs, p99 {:.0} µs, {} errors",
                        ["cold", "warm"][i],
                        percentile_us(&r.latencies_ns, 0.50),
                        percentile_us(&r.latencies_ns, 0.99),
                        r.errors
                    );
                    rates[i].push(rate);
                    lats[i].extend(r.latencies_ns);
                    errors[i] += r.errors;
                }
                if round == 0 && n == counts[0] {
                    srt.block_on(check_sample(addrs[0], keys, &slots, &services[0], o))?;
                }
                for s in services {
                    srt.block_on(s.shutdown());
                }
            }
            for i in 0..2 {
                rates[i].sort_by(f64::total_cmp);
                lats[i].sort_unstable();
                let median = rates[i][rates[i].len() / 2];
                let cache = ["cold", "warm"][i];
                out.push(json!({
                    "replicas": n,
                    "cache": cache,
                    "proofs_per_s": median.round(),
                    "rounds_proofs_per_s": rates[i].iter().map(|r| r.round()).collect::<Vec<_>>(),
                    "p50_us": percentile_us(&lats[i], 0.50).round(),
                    "p99_us": percentile_us(&lats[i], 0.99).round(),
                    "errors": errors[i],
                    "vs_local": if local_rate > 0.0 { (median / local_rate * 100.0).round() / 100.0 } else { 0.0 },
                }));
            }
        }
        for r in &out {
            println!(
                "  {} replica(s) {:<4} {:>7} proofs/s ({}x the directory), p50 {} µs, p99 {} µs, {} errors",
                r["replicas"],
                r["cache"].as_str().unwrap_or(""),
                r["proofs_per_s"],
                r["vs_local"],
                r["p50_us"],
                r["p99_us"],
                r["errors"]
            );
        }
        Ok((out, stored))
    }
}

/// The 1-minute load average, to show how busy a shared machine was (Linux only).
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

fn percentile_us(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i] as f64 / 1000.0
}

fn main() -> Result<()> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let o = Opts::parse();
    ensure!(
        o.accounts > 0 && o.slots > 0 && o.clients > 0 && o.duration > 0.0,
        "accounts, slots, clients and duration must be positive"
    );
    let modes: Vec<Execution> = o
        .execution
        .split(',')
        .map(|m| m.trim().parse::<Execution>().map_err(anyhow::Error::msg))
        .collect::<Result<_>>()?;
    let tmp;
    let dir = match &o.dir {
        Some(d) => {
            std::fs::create_dir_all(d)?;
            ensure!(std::fs::read_dir(d)?.next().is_none(), "{} is not empty", d.display());
            d.clone()
        }
        None => {
            tmp = tempfile::tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "building {} accounts + {} slots of {} updates (seed {}) on {cores} cores",
        o.accounts,
        o.slots.saturating_sub(1),
        o.updates,
        o.seed
    );
    let fixture = build(&dir, &o)?;
    let bytes: u64 = std::fs::read_dir(&dir)?.filter_map(|e| e.ok()?.metadata().ok()).map(|m| m.len()).sum();
    println!("built in {:.1} s, {:.1} MiB of snapshot files", fixture.build_secs, bytes as f64 / (1 << 20) as f64);
    let keys = Arc::new(Keys::new(&fixture.keys, o.seed));

    // Rounds interleave the modes, so a burst of load from elsewhere on a shared machine hits
    // them alike; each mode reports its median round and percentiles over all its rounds.
    let mut per_mode: Vec<(Execution, Vec<f64>, Vec<u64>, u64)> =
        modes.iter().map(|m| (*m, Vec::new(), Vec::new(), 0)).collect();
    let mut kept = 0;
    for round in 0..o.rounds.max(1) {
        for (mode, rates, latencies, errors) in &mut per_mode {
            let mode = *mode;
            let mut srt = tokio::runtime::Builder::new_multi_thread();
            srt.enable_all();
            if let Some(t) = o.server_threads {
                srt.worker_threads(t.max(1));
            }
            let srt = srt.build()?;
            let config =
                Config { addr: "127.0.0.1:0".parse()?, metrics_addr: None, execution: mode, ..Config::new(&dir) };
            let service = srt.block_on(Service::start(config))?;
            let addr = service.local_addr();
            let infos = service.hyades().slots(0, u64::MAX);
            let slots: Arc<Vec<u64>> = Arc::new(infos.iter().map(|s| s.slot).collect());
            ensure!(!slots.is_empty(), "nothing published");
            if round == 0 {
                srt.block_on(check_sample(addr, &keys, &slots, &service, &o))?;
            }
            kept = slots.len();
            let r = drive(addr, keys.clone(), slots.clone(), &o)?;
            srt.block_on(service.shutdown());
            drop(srt);
            let rate = r.proofs as f64 / r.secs;
            println!(
                "round {round} {mode:?}: {rate:.0} proofs/s, p50 {:.0} µs, p99 {:.0} µs, p999 {:.0} µs, {} errors",
                percentile_us(&r.latencies_ns, 0.50),
                percentile_us(&r.latencies_ns, 0.99),
                percentile_us(&r.latencies_ns, 0.999),
                r.errors
            );
            rates.push(rate);
            latencies.extend(r.latencies_ns);
            *errors += r.errors;
        }
    }
    println!(
        "{} clients, {} s per round (+{} s warm-up), {} rounds, over {kept} kept slots:",
        o.clients,
        o.duration,
        o.warmup,
        o.rounds.max(1)
    );
    let mut runs = Vec::new();
    for (mode, mut rates, mut latencies, errors) in per_mode {
        rates.sort_by(f64::total_cmp);
        latencies.sort_unstable();
        let median = rates[rates.len() / 2];
        let (p50, p99, p999) =
            (percentile_us(&latencies, 0.50), percentile_us(&latencies, 0.99), percentile_us(&latencies, 0.999));
        let max = latencies.last().map_or(0.0, |v| *v as f64 / 1000.0);
        println!(
            "  {:<8} {median:>7.0} proofs/s (median; rounds {}), p50 {p50:.0} µs, p99 {p99:.0} µs, p999 {p999:.0} µs, max {max:.0} µs, {errors} errors",
            format!("{mode:?}").to_lowercase(),
            rates.iter().map(|r| format!("{r:.0}")).collect::<Vec<_>>().join("/"),
        );
        runs.push(json!({
            "execution": format!("{mode:?}").to_lowercase(),
            "proofs_per_s": median.round(),
            "rounds_proofs_per_s": rates.iter().map(|r| r.round()).collect::<Vec<_>>(),
            "proofs": latencies.len(),
            "errors": errors,
            "p50_us": p50.round(),
            "p99_us": p99.round(),
            "p999_us": p999.round(),
            "max_us": max.round(),
        }));
    }
    let (replica_runs, stored) = match &o.s3_endpoint {
        Some(endpoint) => replicas::measure(endpoint, &dir, &o, &keys, per_mode_local(&runs))?,
        None => (Vec::new(), Value::Null),
    };
    let summary = json!({
        "bench": "hyades",
        "accounts": o.accounts,
        "slots_kept": kept,
        "updates_per_slot": o.updates,
        "clients": o.clients,
        "server_threads": o.server_threads.unwrap_or(cores),
        "client_threads": o.client_threads,
        "cores": cores,
        "absent_pct": o.absent_pct,
        "seed": o.seed,
        "duration_s": o.duration,
        "rounds": o.rounds.max(1),
        "load_avg_1m": load_average(),
        "runs": runs,
        "replicas": replica_runs,
        "bytes_per_updated_account_per_slot": stored,
    });
    println!("{summary}");
    Ok(())
}
