//! The headline benchmark: the AlDBaran workload through Pleiades, with Solana's lattice hash,
//! `jmt` and the nervos `sparse-merkle-tree` as anchors in the same run (machines are noisy, so
//! only figures from one run compare). Prints readable lines, then one JSON line.
//!
//! Only the work a validator would do per slot is timed: account generation never is.

mod jmt_run;
mod lattice;
mod mem;
mod opts;
mod pleiades_run;

use anyhow::Context;
use serde_json::{Map, Value, json};

use crate::jmt_run::{AnchorOpts, AnchorReport};
use crate::opts::Opts;

fn main() -> anyhow::Result<()> {
    // `--help` prints and exits 0; a bad flag prints the error and usage and exits 2.
    let o = Opts::from_args(std::env::args().skip(1)).unwrap_or_else(|e| e.exit());
    // Generation of the untimed buffers runs on the global pool; size it like the engine's.
    rayon::ThreadPoolBuilder::new().num_threads(o.threads).build_global().context("global thread pool")?;
    let rss_before = mem::rss_bytes();
    println!(
        "aldb-bench: leaves=2^{} ({}) slots={} (warm-up {}) slot_updates={} threads={} data_len={} seed={}",
        o.leaves_log2,
        o.leaves(),
        o.slots,
        o.warmup,
        o.slot_updates,
        o.threads,
        o.data_len,
        o.seed
    );
    println!(
        "mix: 90% updates of live keys, 5% inserts of new keys, 5% deletes (lamports 0); owner = SPL token program"
    );
    println!("rss before prefill: {}", mib(rss_before));

    let e = pleiades_run::run(&o, rss_before)?;
    let measured = e.slot_secs.len() as u64;
    let commit_total: f64 = e.slot_secs.iter().sum();
    let updates_per_sec = e.updates_measured as f64 / commit_total;
    let (smin, smed, smax) = min_med_max(&e.slot_secs);
    let bulk_rate = e.bulk_accounts as f64 / e.bulk_secs;
    let per_leaf = |b: Option<u64>| b.map(|b| b as f64 / e.leaves as f64);
    let bytes_per_leaf = per_leaf(e.rss_after_slots);
    let heap_per_leaf = e.heap_bytes as f64 / e.leaves as f64;

    println!();
    println!(
        "== Pleiades (threads={}, shard_bits={}, bucket_bits={})",
        o.threads, e.config.shard_bits, e.config.bucket_bits
    );
    println!(
        "bulk build:          {bulk_rate:>14.0} accounts/s ({} accounts in {:.2} s)",
        e.bulk_accounts, e.bulk_secs
    );
    println!(
        "updates/s:           {updates_per_sec:>14.0} ({} updates over {measured} slots in {commit_total:.3} s)",
        e.updates_measured
    );
    println!("slot commit ms:      min {:.2} / median {:.2} / max {:.2}", smin * 1e3, smed * 1e3, smax * 1e3);
    println!("leaves after slots:  {}", e.leaves);
    println!(
        "rss:                 before prefill {}, after prefill {} (peak during prefill {}), after slots {}, after malloc_trim {}",
        mib(e.rss_before),
        mib(e.rss_after_prefill),
        mib(e.peak_rss_prefill),
        mib(e.rss_after_slots),
        mib(e.rss_after_trim)
    );
    println!(
        "bytes/leaf:          {} RSS after slots, {} after malloc_trim, {heap_per_leaf:.1} engine heap ({})",
        opt1(bytes_per_leaf),
        opt1(per_leaf(e.rss_after_trim)),
        mib(Some(e.heap_bytes as u64))
    );
    println!("root:                {}", hex(&e.root));

    let mut j = Map::new();
    let mut put = |k: &str, v: Value| {
        j.insert(k.to_owned(), v);
    };
    put("leaves", json!(e.leaves));
    put("prefill_leaves", json!(o.leaves()));
    put("threads", json!(o.threads));
    put("slot_updates", json!(o.slot_updates));
    put("data_len", json!(o.data_len));
    put("slots_measured", json!(measured));
    put("warmup_slots", json!(o.warmup));
    put("updates_per_sec", json!(round(updates_per_sec)));
    put("slot_ms_min", json!(round3(smin * 1e3)));
    put("slot_ms_median", json!(round3(smed * 1e3)));
    put("slot_ms_max", json!(round3(smax * 1e3)));
    put("bulk_build_accounts_per_sec", json!(round(bulk_rate)));
    put("bulk_build_secs", json!(round3(e.bulk_secs)));
    put("bytes_per_leaf", json!(bytes_per_leaf.map(round1)));
    put("bytes_per_leaf_after_trim", json!(per_leaf(e.rss_after_trim).map(round1)));
    put("engine_heap_bytes_per_leaf", json!(round1(heap_per_leaf)));
    put("rss_before_prefill_bytes", json!(e.rss_before));
    put("rss_after_prefill_bytes", json!(e.rss_after_prefill));
    put("rss_peak_prefill_bytes", json!(e.peak_rss_prefill));
    put("rss_after_slots_bytes", json!(e.rss_after_slots));
    put("root", json!(hex(&e.root)));

    if o.lattice {
        let lt_total: f64 = e.lattice_slot_secs.iter().sum();
        let lt_rate = e.updates_measured as f64 / lt_total;
        let (lmin, lmed, lmax) = min_med_max(&e.lattice_slot_secs);
        println!();
        println!("== solana-lattice-hash 4.2.2 (threads={}, same stream; old state = same-sized stand-in)", o.threads);
        println!("updates/s:           {lt_rate:>14.0} (mix out old + mix in new per update)");
        println!("slot ms:             min {:.2} / median {:.2} / max {:.2}", lmin * 1e3, lmed * 1e3, lmax * 1e3);
        println!("Pleiades / lattice:  {:.3}", updates_per_sec / lt_rate);
        put("lattice_hash_updates_per_sec", json!(round(lt_rate)));
        put("lattice_threads", json!(o.threads));
        put("ratio_vs_lattice", json!(round3(updates_per_sec / lt_rate)));
        put("lattice_checksum", json!(e.lattice_checksum.map(|c| hex(&c))));
    } else {
        put("lattice_hash_updates_per_sec", Value::Null);
        put("lattice_threads", Value::Null);
        put("ratio_vs_lattice", Value::Null);
    }

    let anchor = |log2: u32, slot_updates: usize, slots: u64| AnchorOpts {
        seed: o.seed,
        leaves: 1u64 << log2,
        slot_updates,
        slots,
        warmup: 1,
        data_len: o.data_len,
    };
    put("jmt_slot_updates", json!(o.jmt_slot_updates));
    if o.jmt {
        let a = anchor(o.jmt_leaves_log2, o.jmt_slot_updates, o.jmt_slots);
        report_anchor("jmt 0.12 (MockTreeStore, SHA-256)", "jmt", jmt_run::run_jmt(a), &mut put);
    } else {
        put("jmt_updates_per_sec", Value::Null);
        put("jmt_skipped", json!("disabled by --no-jmt"));
    }
    put("smt_slot_updates", json!(o.smt_slot_updates));
    if o.smt {
        let a = anchor(o.smt_leaves_log2, o.smt_slot_updates, o.smt_slots);
        report_anchor("sparse-merkle-tree 0.6 (nervos, DefaultStore, blake2b)", "smt", jmt_run::run_smt(a), &mut put);
    } else {
        put("smt_updates_per_sec", Value::Null);
        put("smt_skipped", json!("disabled by --no-smt"));
    }

    put("seed", json!(o.seed));
    put("shard_bits", json!(e.config.shard_bits));
    put("bucket_bits", json!(e.config.bucket_bits));
    println!();
    println!("{}", Value::Object(j));
    Ok(())
}

/// Prints an anchor's figures and adds them under `prefix`; a failed anchor is reported and
/// skipped, not fatal, so the engine's figures still come out.
fn report_anchor(title: &str, prefix: &str, r: anyhow::Result<AnchorReport>, put: &mut impl FnMut(&str, Value)) {
    println!();
    println!("== {title} (threads=1, key = aldb key path, value = aldb account value hash)");
    match r {
        Ok(r) => {
            let rate = r.updates_per_sec();
            let (lo, med, hi) = min_med_max(&r.slot_secs);
            println!(
                "updates/s:           {rate:>14.0} ({} updates over {} slots)",
                r.updates_measured,
                r.slot_secs.len()
            );
            println!("slot ms:             min {:.2} / median {:.2} / max {:.2}", lo * 1e3, med * 1e3, hi * 1e3);
            println!("leaves:              {} (prefill with hashing {:.2} s)", r.leaves, r.prefill_secs);
            println!("root:                {}", hex(&r.root));
            put(&format!("{prefix}_updates_per_sec"), json!(round(rate)));
            put(&format!("{prefix}_leaves"), json!(r.leaves));
            put(&format!("{prefix}_threads"), json!(1));
            put(&format!("{prefix}_slots_measured"), json!(r.slot_secs.len()));
            put(&format!("{prefix}_slot_ms_median"), json!(round3(med * 1e3)));
        }
        Err(err) => {
            println!("skipped: {err:#}");
            put(&format!("{prefix}_updates_per_sec"), Value::Null);
            put(&format!("{prefix}_skipped"), json!(format!("{err:#}")));
        }
    }
}

fn min_med_max(v: &[f64]) -> (f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.as_slice() {
        [] => (f64::NAN, f64::NAN, f64::NAN),
        [.., last] => (s[0], s[s.len() / 2], *last),
    }
}

fn mib(b: Option<u64>) -> String {
    b.map_or_else(|| "n/a".into(), |b| format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64))
}

fn opt1(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".into(), |v| format!("{v:.1}"))
}

fn round(v: f64) -> f64 {
    v.round()
}

fn round1(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
