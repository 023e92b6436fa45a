//! `GET /metrics` on loopback: every counter of the sink and the module is served, and the values
//! move as banks freeze and files are written.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};

use aldb_bank::{BankError, BankRoots, SinkConfig};
use common::{State, apply, refs, writes};
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

/// Every counter and gauge the sink keeps, as served.
const SINK: [&str; 16] = [
    "aldb_bank_sink_banks_queued_total",
    "aldb_bank_sink_banks_merged_total",
    "aldb_bank_sink_banks_lost_total",
    "aldb_bank_sink_messages_dropped_total",
    "aldb_bank_sink_banks_refused_total",
    "aldb_bank_sink_writer_errors_total",
    "aldb_bank_sink_records_produced_total",
    "aldb_bank_sink_record_errors_total",
    "aldb_bank_sink_write_retries_total",
    "aldb_bank_sink_write_recoveries_total",
    "aldb_bank_sink_retries_abandoned_total",
    "aldb_bank_sink_running",
    "aldb_bank_sink_queued",
    "aldb_bank_sink_queued_bytes",
    "aldb_bank_sink_write_failing",
    "aldb_bank_sink_write_failure_streak_seconds",
];

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
    let g = writes(&mut rng, &state, 100);
    apply(&mut state, &g);
    let all: Vec<_> = state.iter().map(|(k, a)| (*k, a.clone())).collect();
    roots.build_base(10, &refs(&all)).unwrap();
    roots.flush_sink();

    let before = scrape(addr);
    for name in SINK {
        assert!(before.contains_key(name), "{name} is served");
    }
    assert_eq!(before["aldb_bank_bases_total"], 1.0);
    assert_eq!(before["aldb_bank_freezes_total"], 0.0);
    assert_eq!(before["aldb_bank_rooted_slot"], 10.0);
    assert_eq!(before["aldb_bank_sink_running"], 1.0);
    assert_eq!(before["aldb_bank_sink_banks_queued_total"], 1.0);
    assert_eq!(before["aldb_bank_snapshot_files_published_total"], 1.0);
    assert_eq!(before["aldb_bank_freeze_seconds_count"], 0.0);

    for slot in 11..=15 {
        let w = writes(&mut rng, &state, 20);
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
