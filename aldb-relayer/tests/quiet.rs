//! A source that goes quiet, on loopback: one endpoint (the real Hyades) keeps sending records,
//! the other accepts the subscription and sends nothing. The silent one's
//! `aldb_relayer_endpoint_seconds_since_record` grows past `quiet_warning_ms` and one warning
//! names it (none names the busy one); once records come from it, a line says so and its gauge
//! falls back.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aldb_relayer::stats::{EndpointStats, clock_ms};
use aldb_relayer::{Config, Relayer};
use common::feed::FeedServer;
use common::{Cluster, Kind, Producer, config_text};
use tokio::sync::watch;

struct Capture;
static LINES: Mutex<Vec<(log::Level, String)>> = Mutex::new(Vec::new());
static CAPTURE: Capture = Capture;

impl log::Log for Capture {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Info
    }
    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) && r.target().starts_with("aldb_relayer") {
            LINES.lock().unwrap().push((r.level(), r.args().to_string()));
        }
    }
    fn flush(&self) {}
}

fn lines_about(url: &str, level: log::Level) -> Vec<String> {
    LINES.lock().unwrap().iter().filter(|(l, t)| *l == level && t.starts_with(url)).map(|(_, t)| t.clone()).collect()
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(30), "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The silence gauge of `url` in the metrics text.
fn silence(text: &str, url: &str) -> f64 {
    let prefix = format!("aldb_relayer_endpoint_seconds_since_record{{endpoint=\"{url}\"}} ");
    text.lines().find_map(|l| l.strip_prefix(prefix.as_str())).expect("a silence gauge").parse().unwrap()
}

/// The longest silence of one endpoint, as the relayer measures it (on [`clock_ms`], from its
/// last record, or from the start before the first), watched from outside: a thread reads the
/// last record's time continually, and the gap between two readings that differ bounds every
/// silence between them. An upper bound: a reading it misses only makes a gap look longer.
struct LongestSilence {
    running: Arc<AtomicBool>,
    longest_ms: Arc<AtomicU64>,
    rounds: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<()>,
}

impl LongestSilence {
    fn watch(stats: Arc<aldb_relayer::Stats>, endpoint: usize) -> Self {
        let (running, longest_ms, rounds) =
            (Arc::new(AtomicBool::new(true)), Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let thread = {
            let (running, longest_ms, rounds) = (running.clone(), longest_ms.clone(), rounds.clone());
            std::thread::spawn(move || {
                let e: &EndpointStats = &stats.endpoints[endpoint];
                let mut last = e.last_record_ms.load(Ordering::Relaxed);
                while running.load(Ordering::Relaxed) {
                    let now = clock_ms();
                    let seen = e.last_record_ms.load(Ordering::Relaxed);
                    // Up to `seen` (a later record) or up to now (none since `last`).
                    let upto = if seen != last { seen } else { now };
                    longest_ms.fetch_max(upto.saturating_sub(last), Ordering::SeqCst);
                    last = seen;
                    rounds.fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(1));
                }
            })
        };
        Self { running, longest_ms, rounds, thread }
    }

    /// The longest silence until now, in seconds: once a reading begun after this call is done.
    fn longest(&self) -> f64 {
        let r = self.rounds.load(Ordering::SeqCst);
        wait_until("the silence is read again", || self.rounds.load(Ordering::SeqCst) >= r + 2);
        self.longest_ms.load(Ordering::SeqCst) as f64 / 1000.0
    }

    fn stop(self) {
        self.running.store(false, Ordering::Relaxed);
        self.thread.join().unwrap();
    }
}

#[test]
fn a_quiet_source_is_measured_and_warned_about_once() {
    log::set_logger(&CAPTURE).unwrap();
    log::set_max_level(log::LevelFilter::Info);
    let tmp = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let busy_dir = tmp.path().join("p1");
    let quiet_dir = tmp.path().join("p2");
    std::fs::create_dir_all(&quiet_dir).unwrap();
    let cluster = Arc::new(Mutex::new(Cluster::new(
        &tmp.path().join("reference"),
        vec![Producer::new(Kind::Honest(1), &busy_dir)],
    )));
    let (busy, quiet) = rt.block_on(async {
        let a = FeedServer::hyades(&busy_dir, "127.0.0.1:0".parse().unwrap()).await;
        // Subscribes and then sends only what its directory's log holds: nothing, for now.
        let b = FeedServer::standin(&quiet_dir, "127.0.0.1:0".parse().unwrap(), false).await;
        (a, b)
    });
    let urls = vec![busy.url(), quiet.url()];
    let out_dir = tmp.path().join("relay");
    std::fs::create_dir_all(&out_dir).unwrap();
    let text =
        config_text(&urls, &[1, 2], 1, &out_dir, 0).replace("start_slot: 0,", "start_slot: 0, quiet_warning_ms: 400,");
    let config = Config::parse(&text, Path::new("")).unwrap();
    assert_eq!(config.quiet_warning, Some(Duration::from_millis(400)));
    let relayer = Relayer::new(config);
    let stats = relayer.stats();
    // The busy source is busy only as far as the machine lets it: a loaded one can hold its
    // records back for longer than the period, and then a warning about it is right. What it
    // must not get is a warning without such a silence.
    let busy_silence = LongestSilence::watch(stats.clone(), 0);
    let (stop_tx, stop_rx) = watch::channel(false);
    let handle = rt.spawn(relayer.run(stop_rx));

    // The busy source gets a slot every 40 ms throughout.
    let running = Arc::new(AtomicBool::new(true));
    let producing = {
        let (cluster, running) = (cluster.clone(), running.clone());
        std::thread::spawn(move || {
            while running.load(Ordering::Relaxed) {
                cluster.lock().unwrap().step();
                std::thread::sleep(Duration::from_millis(40));
            }
        })
    };
    wait_until("the quiet source is warned about", || !lines_about(&urls[1], log::Level::Warn).is_empty());
    let warned = lines_about(&urls[1], log::Level::Warn);
    assert!(warned[0].contains("no record for") && warned[0].contains("none since the start"), "{warned:?}");
    // The period can pass before the busy source's first record on a loaded machine.
    wait_until("the busy source sends", || stats.endpoints[0].records.load(Ordering::Relaxed) > 0);
    let metrics = aldb_relayer::metrics::render(&stats, &urls);
    assert!(silence(&metrics, &urls[1]) >= 0.4, "{metrics}");
    if busy_silence.longest() < 0.4 {
        assert!(silence(&metrics, &urls[0]) < 0.4, "the busy source is not silent: {metrics}");
    }
    // Several quiet periods more: still one warning, none about the busy source unless it was
    // silent for a period.
    std::thread::sleep(Duration::from_millis(1_200));
    assert_eq!(lines_about(&urls[1], log::Level::Warn).len(), 1, "one warning per silence");
    assert_eq!(stats.endpoints[1].quiet_warnings.load(Ordering::Relaxed), 1);
    let longest = busy_silence.longest();
    if longest < 0.4 {
        assert!(lines_about(&urls[0], log::Level::Warn).iter().all(|l| !l.contains("no record for")));
        assert_eq!(stats.endpoints[0].quiet_warnings.load(Ordering::Relaxed), 0);
    } else {
        println!("the busy source was silent for {longest} s on this machine: a warning about it is allowed");
    }
    let metrics = aldb_relayer::metrics::render(&stats, &urls);
    assert!(metrics.contains(&format!("aldb_relayer_endpoint_quiet_warnings_total{{endpoint=\"{}\"}} 1\n", urls[1])));

    // The quiet source's validator starts logging records: it is heard from again.
    cluster.lock().unwrap().producers.push(Producer::new(Kind::Honest(2), &quiet_dir));
    wait_until("the quiet source is heard again", || {
        lines_about(&urls[1], log::Level::Info).iter().any(|l| l.ends_with("records again"))
    });
    assert!(stats.endpoints[1].records.load(Ordering::Relaxed) > 0);
    wait_until("its silence gauge falls", || silence(&aldb_relayer::metrics::render(&stats, &urls), &urls[1]) < 0.4);
    running.store(false, Ordering::Relaxed);
    producing.join().unwrap();
    busy_silence.stop();
    let _ = stop_tx.send(true);
    rt.block_on(handle).unwrap().unwrap();
}
