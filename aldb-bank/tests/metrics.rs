//! `GET /metrics` on loopback: every counter of the sink and the module is served, and the values
//! move as banks freeze and files are written.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};

use aldb_bank::{BankError, BankRoots, SinkConfig};
use aldb_testkit::{State, apply, as_writes, random::bank_writes, refs};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// One request; the status line and the body.
fn get(addr: SocketAddr, request: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

/// The samples of `GET /metrics`, by name (with labels, as written).
fn scrape(addr: SocketAddr) -> BTreeMap<String, f64> {
    let (status, body) = get(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 200 OK");
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect()
}

/// Every family `GET /metrics` serves, in order, with its type: written out here rather than
/// taken from the module, so a renamed, dropped or retyped family fails the test.
const FAMILIES: [(&str, &str); 32] = [
    ("aldb_bank_freezes_total", "counter"),
    ("aldb_bank_bases_total", "counter"),
    ("aldb_bank_call_errors_total", "counter"),
    ("aldb_bank_banks_held", "gauge"),
    ("aldb_bank_rooted_slot", "gauge"),
    ("aldb_bank_freeze_seconds", "histogram"),
    ("aldb_bank_sink_banks_queued_total", "counter"),
    ("aldb_bank_sink_banks_merged_total", "counter"),
    ("aldb_bank_sink_banks_lost_total", "counter"),
    ("aldb_bank_sink_messages_dropped_total", "counter"),
    ("aldb_bank_sink_banks_refused_total", "counter"),
    ("aldb_bank_sink_writer_errors_total", "counter"),
    ("aldb_bank_sink_records_produced_total", "counter"),
    ("aldb_bank_sink_record_errors_total", "counter"),
    ("aldb_bank_sink_write_retries_total", "counter"),
    ("aldb_bank_sink_write_recoveries_total", "counter"),
    ("aldb_bank_sink_retries_abandoned_total", "counter"),
    ("aldb_bank_sink_running", "gauge"),
    ("aldb_bank_sink_queued", "gauge"),
    ("aldb_bank_sink_queued_bytes", "gauge"),
    ("aldb_bank_sink_write_failing", "gauge"),
    ("aldb_bank_sink_write_failure_streak_seconds", "gauge"),
    ("aldb_bank_snapshot_files_published_total", "counter"),
    ("aldb_bank_snapshot_last_slot", "gauge"),
    ("aldb_bank_snapshot_write_seconds_total", "counter"),
    ("aldb_bank_snapshot_bytes_total", "counter"),
    ("aldb_bank_snapshot_pruned_files_total", "counter"),
    ("aldb_bank_snapshot_write_errors_total", "counter"),
    ("aldb_bank_snapshot_fork_banks", "gauge"),
    ("aldb_bank_snapshot_fork_held_bytes", "gauge"),
    ("aldb_bank_snapshot_fork_switches_total", "counter"),
    ("aldb_bank_snapshot_journal_errors_total", "counter"),
];

/// The `(name, type)` of every family in a scrape, from its `# TYPE` lines.
fn families(addr: SocketAddr) -> Vec<(String, String)> {
    let (_, body) = get(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    body.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| {
            let (name, kind) = l.split_once(' ').unwrap();
            (name.to_string(), kind.to_string())
        })
        .collect()
}

/// The names the crate README's metrics table gives, as patterns: `*` stands for any run of
/// characters, and a name written `_suffix` is the row's first name with its last part replaced.
fn readme_names() -> Vec<String> {
    let readme = include_str!("../README.md");
    let table = readme.split("## Metrics").nth(1).unwrap().split("\n## ").next().unwrap();
    let mut names = Vec::new();
    for row in table.lines().filter(|l| l.starts_with("| `")) {
        let cell = row.split('|').nth(1).unwrap();
        let mut stem = String::new();
        for name in cell.split('`').skip(1).step_by(2) {
            if name.starts_with('_') {
                names.push(format!("{stem}{name}"));
            } else {
                stem = name.rsplit_once('_').unwrap().0.to_string();
                names.push(name.to_string());
            }
        }
    }
    names
}

/// Whether `name` is `pattern`, with at most one `*` in the pattern.
fn matches(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        Some((head, tail)) => name.len() > head.len() + tail.len() && name.starts_with(head) && name.ends_with(tail),
        None => pattern == name,
    }
}

#[test]
fn the_families_served_are_the_documented_ones() {
    let patterns = readme_names();
    assert!(patterns.len() >= 10, "the README's metrics table was read: {patterns:?}");
    for (name, _) in FAMILIES {
        assert!(patterns.iter().any(|p| matches(p, name)), "{name} is not in the README's metrics table");
    }
    for p in patterns.iter().filter(|p| !p.contains('*')) {
        assert!(FAMILIES.iter().any(|(name, _)| name == p), "the README names {p}, which is not served");
    }
    // The design document names the module's own families one by one.
    let design = include_str!("../../docs/IN-PROCESS.md");
    let section = design.split("## 2a. Metrics").nth(1).unwrap().split("\n## ").next().unwrap();
    let named: Vec<&str> = section.split('`').skip(1).step_by(2).filter(|t| t.starts_with("aldb_bank_")).collect();
    assert!(named.len() >= 6, "{named:?}");
    for p in named {
        assert!(FAMILIES.iter().any(|(name, _)| matches(p, name)), "docs/IN-PROCESS.md names {p}, which is not served");
    }

    let tmp = tempfile::tempdir().unwrap();
    let config = SinkConfig {
        direct_io: false,
        metrics_addr: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        ..SinkConfig::new(tmp.path().join("snapshots"))
    };
    let roots = BankRoots::with_sink(&config).unwrap();
    let served = families(roots.metrics_addr().unwrap());
    let expected: Vec<(String, String)> = FAMILIES.iter().map(|(n, k)| (n.to_string(), k.to_string())).collect();
    assert_eq!(served, expected);
}

#[test]
fn metrics_serve_every_counter_and_follow_the_banks() {
    let tmp = tempfile::tempdir().unwrap();
    let config = SinkConfig {
        threads: Some(2),
        direct_io: false,
        metrics_addr: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        ..SinkConfig::new(tmp.path().join("snapshots"))
    };
    let mut roots = BankRoots::with_sink(&config).unwrap();
    let addr = roots.metrics_addr().unwrap();
    assert_ne!(addr.port(), 0, "the bound port is reported");
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut state = State::new();
    let g = bank_writes(&mut rng, &state, 100);
    apply(&mut state, &g);
    let all = as_writes(&state);
    roots.build_base(10, &refs(&all)).unwrap();
    roots.flush_sink();

    let before = scrape(addr);
    assert_eq!(before["aldb_bank_bases_total"], 1.0);
    assert_eq!(before["aldb_bank_freezes_total"], 0.0);
    assert_eq!(before["aldb_bank_rooted_slot"], 10.0);
    assert_eq!(before["aldb_bank_sink_running"], 1.0);
    assert_eq!(before["aldb_bank_sink_banks_queued_total"], 1.0);
    assert_eq!(before["aldb_bank_snapshot_files_published_total"], 1.0);
    assert_eq!(before["aldb_bank_freeze_seconds_count"], 0.0);

    for slot in 11..=15 {
        let w = bank_writes(&mut rng, &state, 20);
        apply(&mut state, &w);
        roots.freeze(slot, slot - 1, &refs(&w)).unwrap();
    }
    roots.root(13).unwrap();
    assert!(roots.freeze(20, 99, &[]).is_err(), "an unknown parent is refused");
    roots.flush_sink();

    let after = scrape(addr);
    assert_eq!(after["aldb_bank_freezes_total"], 5.0);
    assert_eq!(after["aldb_bank_freeze_seconds_count"], 5.0);
    assert_eq!(after["aldb_bank_freeze_seconds_bucket{le=\"+Inf\"}"], 5.0);
    assert!(after["aldb_bank_freeze_seconds_sum"] > 0.0);
    assert_eq!(after["aldb_bank_call_errors_total"], 1.0);
    assert_eq!(after["aldb_bank_banks_held"], 2.0);
    assert_eq!(after["aldb_bank_rooted_slot"], 13.0);
    assert_eq!(after["aldb_bank_sink_banks_queued_total"], 6.0);
    assert_eq!(after["aldb_bank_snapshot_files_published_total"], 6.0);
    assert_eq!(after["aldb_bank_snapshot_last_slot"], 15.0);
    assert!(after["aldb_bank_snapshot_bytes_total"] > before["aldb_bank_snapshot_bytes_total"]);
    assert_eq!(after["aldb_bank_sink_queued"], 0.0);

    // Only GET /metrics (and a pointer at /).
    assert_eq!(get(addr, "GET /other HTTP/1.1\r\n\r\n").0, "HTTP/1.1 404 Not Found");
    assert_eq!(get(addr, "POST /metrics HTTP/1.1\r\n\r\n").0, "HTTP/1.1 405 Method Not Allowed");

    // The listener goes with the module.
    drop(roots);
    assert!(TcpStream::connect(addr).is_err());
}

#[test]
fn a_metrics_address_in_use_stops_the_sink_at_start() {
    let tmp = tempfile::tempdir().unwrap();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let config = SinkConfig {
        direct_io: false,
        metrics_addr: Some(taken.local_addr().unwrap()),
        ..SinkConfig::new(tmp.path().join("snapshots"))
    };
    let e = BankRoots::with_sink(&config).unwrap_err();
    assert!(matches!(e, BankError::SinkStart(_)), "{e}");
    assert!(e.to_string().contains("metrics"), "{e}");
}
