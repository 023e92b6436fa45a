//! `load`: a steady stream of system transfers, and the plugin's own measurements over the load
//! window (callback cost per account update, delay from `Processed` to commit, slots behind),
//! read from its Prometheus histograms before and after.

use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::json;

use crate::check::Chain;
use crate::rpc::value;
use crate::tx::{self, address, keypair, sign};

/// What `load` is asked to do.
pub(crate) struct LoadConfig {
    pub(crate) rpc: String,
    pub(crate) metrics: String,
    pub(crate) tps: u32,
    pub(crate) secs: u64,
    pub(crate) accounts: usize,
    pub(crate) seed: u64,
}

/// A histogram's cumulative buckets `(le, count)`, `+Inf` last.
type Buckets = Vec<(f64, u64)>;

/// The samples of one metric family from a scrape: buckets of histograms, plain values otherwise.
fn histogram(text: &str, name: &str) -> Buckets {
    let prefix = format!("{name}_bucket{{le=\"");
    text.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .filter_map(|rest| {
            let (le, count) = rest.split_once("\"} ")?;
            let le = if le == "+Inf" { f64::INFINITY } else { le.parse().ok()? };
            Some((le, count.trim().parse().ok()?))
        })
        .collect()
}

fn gauge(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// `after - before`, bucket by bucket.
fn delta(before: &Buckets, after: &Buckets) -> Buckets {
    after.iter().map(|&(le, n)| (le, n - before.iter().find(|b| b.0 == le).map_or(0, |b| b.1).min(n))).collect()
}

/// The upper bound of the bucket holding quantile `q`, or `None` when empty.
fn quantile(b: &Buckets, q: f64) -> Option<f64> {
    let total = b.last()?.1;
    if total == 0 {
        return None;
    }
    let want = (q * total as f64).ceil().max(1.0) as u64;
    b.iter().find(|&&(_, n)| n >= want).map(|&(le, _)| le)
}

fn scrape(agent: &ureq::Agent, url: &str) -> Result<String> {
    let mut resp = agent.get(url).call().with_context(|| format!("cannot scrape {url}"))?;
    Ok(resp.body_mut().read_to_string()?)
}

fn fmt(q: Option<f64>, unit: &str) -> String {
    match q {
        None => "n/a".to_string(),
        Some(v) if v.is_infinite() => "above the last bucket".to_string(),
        Some(v) => format!("<= {v}{unit}"),
    }
}

/// Sends `tps` transfers per second for `secs` seconds from one payer to `accounts` recipients
/// in turn, then reports what landed and what the plugin measured meanwhile.
pub(crate) fn run(cfg: &LoadConfig) -> Result<()> {
    if cfg.tps == 0 || cfg.accounts == 0 {
        bail!("--tps and --accounts must be at least 1");
    }
    let chain = Chain::new(&cfg.rpc);
    chain.wait_ready()?;
    let agent: ureq::Agent = ureq::Agent::config_builder().timeout_global(Some(Duration::from_secs(10))).build().into();
    let payer = keypair(cfg.seed, "load-payer");
    let p = address(&payer);
    chain.airdrop(&p, 1_000 * 1_000_000_000)?;
    let recipients: Vec<_> = (0..cfg.accounts).map(|i| address(&keypair(cfg.seed, &format!("load-{i}")))).collect();
    for chunk in recipients.chunks(16) {
        let ixs: Vec<_> = chunk.iter().map(|r| tx::transfer(p, *r, 10_000_000)).collect();
        chain.execute(&[&payer], &ixs)?;
    }

    let m0 = scrape(&agent, &cfg.metrics)?;
    let start_slot = chain.rpc.call("getSlot", json!([{"commitment": "processed"}]))?.as_u64().unwrap_or(0);
    println!("load: {} transfers/s for {} s over {} accounts, from slot {start_slot}", cfg.tps, cfg.secs, cfg.accounts);
    let start = Instant::now();
    let mut blockhash = chain.blockhash()?;
    let mut refreshed = Instant::now();
    let mut sigs = Vec::new();
    let mut send_errors = 0u64;
    let mut lag_samples = Vec::new();
    let mut next_sample = Instant::now();
    let total = u64::from(cfg.tps) * cfg.secs;
    for i in 0..total {
        let due = start + Duration::from_secs_f64(i as f64 / f64::from(cfg.tps));
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            sleep(wait);
        }
        if refreshed.elapsed() > Duration::from_secs(2) {
            blockhash = chain.blockhash()?;
            refreshed = Instant::now();
        }
        if next_sample <= Instant::now() {
            next_sample += Duration::from_secs(1);
            if let Some(l) = scrape(&agent, &cfg.metrics).ok().and_then(|t| gauge(&t, "aldb_commit_lag_slots")) {
                lag_samples.push(l);
            }
        }
        let to = recipients[(i as usize) % recipients.len()];
        // A distinct amount per transaction keeps every signature unique under one blockhash.
        let signed = sign(&[&payer], &[tx::transfer(p, to, 1 + i)], &blockhash)?;
        match chain.send(&signed, true) {
            Ok(sig) => sigs.push(sig),
            Err(e) => {
                send_errors += 1;
                if send_errors <= 3 {
                    eprintln!("send failed: {e:#}");
                }
            }
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    // Let the last transactions land and commit before the second scrape.
    sleep(Duration::from_secs(5));
    let m1 = scrape(&agent, &cfg.metrics)?;
    let end_slot = chain.rpc.call("getSlot", json!([{"commitment": "processed"}]))?.as_u64().unwrap_or(0);

    let mut landed = 0usize;
    let mut failed = 0usize;
    for chunk in sigs.chunks(256) {
        let r = chain.rpc.call("getSignatureStatuses", json!([chunk, {"searchTransactionHistory": true}]))?;
        for st in value(&r)?.as_array().context("statuses")? {
            if st.is_null() {
                continue;
            }
            if st.get("err").is_some_and(|e| !e.is_null()) {
                failed += 1;
            } else {
                landed += 1;
            }
        }
    }

    let counter = |t: &str, n: &str| gauge(t, n).unwrap_or(0.0);
    let updates = counter(&m1, "aldb_account_updates_total") - counter(&m0, "aldb_account_updates_total");
    let slots = counter(&m1, "aldb_slots_committed_total") - counter(&m0, "aldb_slots_committed_total");
    let cb =
        delta(&histogram(&m0, "aldb_callback_update_account_ns"), &histogram(&m1, "aldb_callback_update_account_ns"));
    let delay =
        delta(&histogram(&m0, "aldb_processed_to_commit_seconds"), &histogram(&m1, "aldb_processed_to_commit_seconds"));
    let behind = delta(&histogram(&m0, "aldb_commit_slots_behind"), &histogram(&m1, "aldb_commit_slots_behind"));
    let sum = |n: &str| counter(&m1, n) - counter(&m0, n);
    let cb_n = cb.last().map_or(0, |b| b.1);
    let lag_max = lag_samples.iter().copied().fold(f64::NAN, f64::max);
    let lag_mean = lag_samples.iter().sum::<f64>() / lag_samples.len().max(1) as f64;

    println!("sent {} in {elapsed:.1} s ({:.0}/s), {send_errors} send errors", sigs.len(), sigs.len() as f64 / elapsed);
    println!("landed {landed}, failed {failed}, unknown {}", sigs.len() - landed - failed);
    println!(
        "slots {start_slot}..{end_slot}: {slots} committed, {updates} account updates ({:.0}/s)",
        updates / elapsed
    );
    println!(
        "update_account callback: {cb_n} calls, p50 {}, p99 {}, p99.9 {}, mean {:.0} ns",
        fmt(quantile(&cb, 0.5), " ns"),
        fmt(quantile(&cb, 0.99), " ns"),
        fmt(quantile(&cb, 0.999), " ns"),
        sum("aldb_callback_update_account_ns_sum") / cb_n.max(1) as f64
    );
    let d_n = delay.last().map_or(0, |b| b.1);
    println!(
        "Processed -> commit: {d_n} slots, p50 {}, p99 {}, mean {:.3} s",
        fmt(quantile(&delay, 0.5), " s"),
        fmt(quantile(&delay, 0.99), " s"),
        sum("aldb_processed_to_commit_seconds_sum") / d_n.max(1) as f64
    );
    println!(
        "slots behind the highest Processed at commit: p50 {}, p99 {}, max {}; aldb_commit_lag_slots sampled each second: mean {lag_mean:.1}, max {lag_max}",
        fmt(quantile(&behind, 0.5), ""),
        fmt(quantile(&behind, 0.99), ""),
        fmt(quantile(&behind, 1.0), "")
    );
    let commit = delta(&histogram(&m0, "aldb_commit_seconds"), &histogram(&m1, "aldb_commit_seconds"));
    let c_n = commit.last().map_or(0, |b| b.1);
    println!(
        "engine commit per batch: {c_n} batches, p50 {}, p99 {}, mean {:.3} ms",
        fmt(quantile(&commit, 0.5), " s"),
        fmt(quantile(&commit, 0.99), " s"),
        sum("aldb_commit_seconds_sum") * 1e3 / c_n.max(1) as f64
    );
    let errors = sum("aldb_callback_errors_total{callback=\"update_account\"}");
    if errors > 0.0 {
        bail!("the plugin returned {errors} callback errors during the load");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_come_from_bucket_deltas() {
        let before = "x_bucket{le=\"10\"} 5\nx_bucket{le=\"20\"} 5\nx_bucket{le=\"+Inf\"} 5\n";
        let after = "x_bucket{le=\"10\"} 55\nx_bucket{le=\"20\"} 104\nx_bucket{le=\"+Inf\"} 105\n";
        let d = delta(&histogram(before, "x"), &histogram(after, "x"));
        assert_eq!(d, vec![(10.0, 50), (20.0, 99), (f64::INFINITY, 100)]);
        assert_eq!(quantile(&d, 0.5), Some(10.0));
        assert_eq!(quantile(&d, 0.99), Some(20.0));
        assert_eq!(quantile(&d, 1.0), Some(f64::INFINITY));
        assert_eq!(gauge("aldb_x 3\naldb_x_total 4\n", "aldb_x"), Some(3.0));
    }
}
