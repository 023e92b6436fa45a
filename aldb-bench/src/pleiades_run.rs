//! The engine's figures: bulk build rate, steady-state updates/s, memory per leaf. The lattice
//! hash runs on each slot right after the engine, on the same account buffers, so both see the
//! same stream under the same machine noise.

use std::time::{Duration, Instant};

use aldb_core::{BulkBuilder, Config, Pleiades};
use anyhow::ensure;

use crate::lattice::Lattice;
use crate::mem;
use crate::opts::Opts;
use aldb_workload::{KeyWindow, SlotAccounts as AccountBatch, SlotOps};

/// Accounts generated and pushed to the bulk builder at a time.
const PREFILL_CHUNK: usize = 65_536;

/// What the engine run measured.
pub(crate) struct EngineReport {
    pub(crate) config: Config,
    pub(crate) leaves: u64,
    pub(crate) bulk_secs: f64,
    pub(crate) bulk_accounts: u64,
    pub(crate) slot_secs: Vec<f64>,
    pub(crate) lattice_slot_secs: Vec<f64>,
    pub(crate) updates_measured: u64,
    pub(crate) rss_before: Option<u64>,
    pub(crate) rss_after_prefill: Option<u64>,
    pub(crate) peak_rss_prefill: Option<u64>,
    pub(crate) rss_after_slots: Option<u64>,
    pub(crate) rss_after_trim: Option<u64>,
    pub(crate) heap_bytes: usize,
    pub(crate) root: [u8; 32],
    pub(crate) lattice_checksum: Option<[u8; 32]>,
}

pub(crate) fn layout(o: &Opts) -> anyhow::Result<Config> {
    let auto = Config::for_leaves(o.leaves(), o.threads);
    if o.shard_bits.is_none() && o.bucket_bits.is_none() {
        return Ok(auto);
    }
    let c = Config::new(o.threads, o.shard_bits.unwrap_or(auto.shard_bits), o.bucket_bits.unwrap_or(auto.bucket_bits))?;
    Ok(c)
}

pub(crate) fn run(o: &Opts, rss_before: Option<u64>) -> anyhow::Result<EngineReport> {
    let config = layout(o)?;
    let n = o.leaves();
    println!(
        "engine layout: threads={} shard_bits={} bucket_bits={} (~{:.1} leaves/bucket)",
        config.threads,
        config.shard_bits,
        config.bucket_bits,
        n as f64 / (1u64 << config.bucket_bits) as f64
    );

    // Prefill: generation is untimed, push (hashing + scatter) and finish are timed.
    let mut builder = BulkBuilder::new(config)?;
    let mut bulk = Duration::ZERO;
    let started = Instant::now();
    let mut first = 0u64;
    while first < n {
        let count = (n - first).min(PREFILL_CHUNK as u64) as usize;
        let batch = AccountBatch::prefill(o.seed, first, count, o.data_len);
        let refs = batch.refs();
        let t = Instant::now();
        builder.push_accounts(&refs, (0, 0));
        bulk += t.elapsed();
        first += count as u64;
    }
    let t = Instant::now();
    let mut tree: Pleiades = builder.finish();
    bulk += t.elapsed();
    ensure!(tree.len() as u64 == n, "bulk build holds {} leaves, expected {n}", tree.len());
    let rss_after_prefill = mem::rss_bytes();
    let peak_rss_prefill = mem::peak_rss_bytes();
    println!(
        "prefill: {n} accounts, build {:.2} s timed ({:.2} s wall with generation), {:.0} accounts/s",
        bulk.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        n as f64 / bulk.as_secs_f64()
    );

    let mut lattice = if o.lattice { Some(Lattice::new(o.threads)?) } else { None };
    let mut window = KeyWindow::prefilled(n);
    let mut slot_secs = Vec::new();
    let mut lattice_slot_secs = Vec::new();
    let mut updates_measured = 0u64;
    for slot in 0..o.slots {
        let ops = SlotOps::draw(o.seed, slot, o.slot_updates, &mut window);
        let new = AccountBatch::slot_new(o.seed, slot, &ops, o.data_len);
        let refs = new.refs();
        let t = Instant::now();
        let root = tree.commit_accounts(&refs);
        let secs = t.elapsed().as_secs_f64();
        ensure!(tree.len() as u64 == window.len(), "tree holds {} leaves, window {}", tree.len(), window.len());

        let lsecs = match lattice.as_mut() {
            Some(l) => {
                let old = AccountBatch::slot_old(o.seed, slot, &ops, &new, o.data_len);
                let old_refs = old.refs();
                let t = Instant::now();
                l.apply(&old_refs, &refs);
                Some(t.elapsed().as_secs_f64())
            }
            None => None,
        };
        let warm = slot < o.warmup;
        println!(
            "slot {slot:>3}{}: commit {:8.2} ms ({:>10.0} updates/s){}  root {}",
            if warm { " (warm-up)" } else { "          " },
            secs * 1e3,
            o.slot_updates as f64 / secs,
            lsecs.map(|l| format!("  lattice {:8.2} ms", l * 1e3)).unwrap_or_default(),
            &crate::hex(&root)[..16],
        );
        if !warm {
            slot_secs.push(secs);
            lattice_slot_secs.extend(lsecs);
            updates_measured += o.slot_updates as u64;
        }
    }
    let rss_after_slots = mem::rss_bytes();
    let rss_after_trim = if mem::trim_heap() { mem::rss_bytes() } else { None };
    let heap_bytes = tree.heap_bytes();
    let leaves = tree.len() as u64;
    let root = tree.root();
    // Free the tree before the anchors run so their memory does not stack on top of it.
    drop(tree);
    mem::trim_heap();
    Ok(EngineReport {
        config,
        leaves,
        bulk_secs: bulk.as_secs_f64(),
        bulk_accounts: n,
        slot_secs,
        lattice_slot_secs,
        updates_measured,
        rss_before,
        rss_after_prefill,
        peak_rss_prefill,
        rss_after_slots,
        rss_after_trim,
        heap_bytes,
        root,
        lattice_checksum: lattice.map(|l| l.checksum()),
    })
}
