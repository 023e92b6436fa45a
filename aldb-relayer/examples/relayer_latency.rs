//! Publish → accept latency of the relayer on loopback.
//!
//! Three producers (fixed seeds) append one finalized record per slot to their own record logs;
//! three Hyades servers serve them in-process; the relayer (2 of 3) follows all three. For every
//! slot it measures the time from the moment a quorum exists on disk — the second producer's
//! append returned — until the relayer's output line for the slot is written and synced (and the
//! cursor replaced). Prints the configuration, p50/p90/p99/max, and one JSON line.
//!
//! ```text
//! cargo run --release -p aldb-relayer --example relayer_latency -- [--slots 200] [--slot-ms 100] [--poll-ms 20]
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aldb_relayer::{Config, Relayer};
use aldb_snapshot::records::{RecordInput, RecordProducer, Signer};
use aldb_verify::{Commitment, hash_to_base58};
use clap::Parser;

#[derive(Parser)]
struct Args {
    /// Slots to produce (the first 10 are a backlog, not measured).
    #[arg(long, default_value_t = 200)]
    slots: u64,
    /// Time between slots.
    #[arg(long, default_value_t = 100)]
    slot_ms: u64,
    /// Hyades' record-log poll interval (its default, `--record-poll-ms`, is 20).
    #[arg(long, default_value_t = 20)]
    poll_ms: u64,
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let args = Args::parse();
    let tmp = tempfile::tempdir().unwrap();
    let genesis = [0x47; 32];
    let keys: Vec<Signer> = (1..=3u8).map(|i| Signer::from_seed(&[i; 32])).collect();
    let ids: Vec<String> = keys.iter().map(|k| format!("\"{}\"", hash_to_base58(&k.identity()))).collect();
    let mut producers: Vec<RecordProducer> = (1..=3u8)
        .map(|i| {
            RecordProducer::open(&tmp.path().join(format!("p{i}")), genesis, Some(Signer::from_seed(&[i; 32]))).unwrap()
        })
        .collect();
    let mut produce = |slot: u64, stamps: &mut Vec<Instant>| {
        for p in producers.iter_mut() {
            let mut root = [0u8; 32];
            root[..8].copy_from_slice(&slot.to_le_bytes());
            let input = RecordInput {
                slot,
                parent: slot.checked_sub(1),
                commitment: Commitment::Finalized,
                state_root: root,
                block: None,
                parent_bank_hash: None,
                bank_hash: None,
            };
            p.produce(input).unwrap();
            stamps.push(Instant::now());
        }
    };
    let backlog = 10;
    for s in 0..backlog {
        produce(s, &mut Vec::new());
    }

    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let services: Vec<hyades::Service> = rt.block_on(async {
        let mut v = Vec::new();
        for i in 1..=3 {
            let config = hyades::Config {
                addr: "127.0.0.1:0".parse().unwrap(),
                metrics_addr: None,
                record_poll_interval: Duration::from_millis(args.poll_ms),
                ..hyades::Config::new(tmp.path().join(format!("p{i}")))
            };
            v.push(hyades::Service::start(config).await.unwrap());
        }
        v
    });
    let urls: Vec<String> = services.iter().map(|s| format!("\"ws://{}/ws\"", s.local_addr())).collect();
    let text = format!(
        "{{ endpoints: [{}], identities: [{}], threshold: 2, genesis_hash: \"{}\", commitment: \"finalized\", \
         cursor_file: \"{}\", output_file: \"{}\", start_slot: 0 }}",
        urls.join(", "),
        ids.join(", "),
        hash_to_base58(&genesis),
        tmp.path().join("cursor").display(),
        tmp.path().join("roots.txt").display()
    );
    let config = Config::parse(&text, Path::new("")).unwrap();
    let accepted: Arc<Mutex<BTreeMap<u64, Instant>>> = Arc::default();
    let seen = accepted.clone();
    let relayer = Relayer::new(config).on_accept(Arc::new(move |a| {
        seen.lock().unwrap().insert(a.record.slot, Instant::now());
    }));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let run = rt.spawn(relayer.run(stop_rx));

    let mut published: BTreeMap<u64, (Instant, Instant)> = BTreeMap::new();
    let tick = Duration::from_millis(args.slot_ms);
    let mut next = Instant::now();
    for slot in backlog..args.slots {
        next += tick;
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let mut stamps = Vec::new();
        produce(slot, &mut stamps);
        published.insert(slot, (stamps[1], stamps[2]));
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while accepted.lock().unwrap().range(args.slots - 1..).next().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = stop_tx.send(true);
    rt.block_on(run).unwrap().unwrap();
    for s in services {
        rt.block_on(s.shutdown());
    }

    let acc = accepted.lock().unwrap();
    let mut from_quorum = Vec::new();
    let mut from_all = Vec::new();
    for (slot, (quorum, all)) in &published {
        let Some(at) = acc.get(slot) else { panic!("slot {slot} was never accepted") };
        from_quorum.push(at.saturating_duration_since(*quorum));
        from_all.push(at.saturating_duration_since(*all));
    }
    from_quorum.sort();
    from_all.sort();
    let n = from_quorum.len();
    println!(
        "relayer latency: {n} slots, one per {} ms, 3 producers / 3 Hyades in-process (poll {} ms), 2 of 3, loopback, {} cores",
        args.slot_ms,
        args.poll_ms,
        std::thread::available_parallelism().map_or(1, |c| c.get())
    );
    for (name, v) in [("quorum on disk -> accepted", &from_quorum), ("all 3 on disk -> accepted", &from_all)] {
        println!(
            "  {name:28} p50 {:7.2} ms  p90 {:7.2} ms  p99 {:7.2} ms  max {:7.2} ms",
            ms(pct(v, 0.5)),
            ms(pct(v, 0.9)),
            ms(pct(v, 0.99)),
            ms(pct(v, 1.0))
        );
    }
    println!(
        "{{\"slots\":{n},\"slot_ms\":{},\"poll_ms\":{},\"p50_ms\":{:.3},\"p90_ms\":{:.3},\"p99_ms\":{:.3},\"max_ms\":{:.3}}}",
        args.slot_ms,
        args.poll_ms,
        ms(pct(&from_quorum, 0.5)),
        ms(pct(&from_quorum, 0.9)),
        ms(pct(&from_quorum, 0.99)),
        ms(pct(&from_quorum, 1.0))
    );
}
