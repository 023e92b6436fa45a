//! Memory per leaf: the engine after a bulk build and a run of slots, with the snapshot writer on
//! (or off), as resident memory the process gained. Prints readable lines, then one JSON line.
//!
//! The process's anonymous RSS is read before anything is built and again after the slots, once the
//! allocator has returned its free pages (`malloc_trim`); the difference over the leaves is the
//! figure, and the engine's own count of its heap ([`aldb_core::Pleiades::heap_bytes`]) splits it
//! into the engine's part and the rest (with snapshots on: the writer's tables of every bucket's
//! and node's record, its per-slot buffers, and the last slot's change set and accounts).
//!
//! The first full snapshot is written the way the plugin writes it after a streaming startup:
//! the prefill's accounts are appended to a [`StartupSpill`] as the bulk build takes their
//! hashes, and the writer reads them back from there, so no account data is ever all in memory.
//! `--in-memory-full` instead hands the writer every account in one [`AccountBatch`] (the path
//! before streaming startup, kept to compare); the tree that fits beside that batch here is 2^24
//! accounts at most. The per-leaf parts do not depend on the tree's size beyond its bucket
//! layout, which is the same from 2^22 on.

use std::sync::atomic::Ordering;
use std::time::Instant;

use aldb_core::{BulkBuilder, ChangeSet, Config};
use aldb_snapshot::{AccountBatch, DEFAULT_SPILL_BITS, SlotInput, SnapshotWriter, StartupSpill, WriterConfig};
use aldb_workload::{KeyWindow, SlotAccounts, SlotOps};
use serde_json::json;

/// Memory per leaf with the snapshot writer on or off.
#[derive(clap::Parser)]
#[command(name = "mem-bench")]
struct Opts {
    /// Prefilled accounts = 2^N.
    #[arg(long, value_name = "N", default_value_t = 22, value_parser = clap::value_parser!(u32).range(10..=28))]
    leaves_log2: u32,
    /// Slots committed after the build (each through the writer when snapshots are on).
    #[arg(long, value_name = "N", default_value_t = 8)]
    slots: u64,
    /// Account updates per slot.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    slot_updates: usize,
    /// Engine threads.
    #[arg(long, value_name = "N", default_value_t = 2)]
    threads: usize,
    /// Bucket bits instead of `Config::for_leaves`'s (about two leaves per bucket); one fewer
    /// doubles the leaves per bucket and halves the prefix hashes' memory.
    #[arg(long)]
    bucket_bits: Option<u8>,
    /// Shard bits instead of `Config::for_leaves`'s.
    #[arg(long)]
    shard_bits: Option<u8>,
    /// Account data bytes.
    #[arg(long, value_name = "N", default_value_t = 165)]
    data_len: usize,
    /// Seed of every random stream.
    #[arg(long, value_name = "S", default_value_t = 20240611)]
    seed: u64,
    /// Run without the snapshot writer.
    #[arg(long)]
    no_snapshots: bool,
    /// Hand the writer the first full snapshot's accounts in one in-memory batch instead of
    /// through the startup spill the plugin uses.
    #[arg(long, conflicts_with = "no_snapshots")]
    in_memory_full: bool,
}

/// Where the first full snapshot's accounts are gathered while the tree is built.
enum FullAccounts {
    /// On disk, as the plugin's streaming startup keeps them.
    Spill(StartupSpill),
    /// In one batch.
    Batch(AccountBatch),
}

/// Anonymous resident memory (`RssAnon`): the heap and the engine's arrays, not the pages of
/// snapshot files the writer has mapped, which the kernel can drop at any time.
fn rss_bytes() -> Option<u64> {
    status_bytes("RssAnon:")
}

/// The process's peak resident memory (`VmHWM`), mapped files included.
fn peak_rss_bytes() -> Option<u64> {
    status_bytes("VmHWM:")
}

/// Resident pages of mapped files (`RssFile`).
fn rss_file_bytes() -> Option<u64> {
    status_bytes("RssFile:")
}

fn status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kib: u64 = line.trim_start_matches(field).trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

/// Returns the allocator's free pages to the kernel, so RSS counts live memory only.
fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// How the first full snapshot gets its accounts, as the output names it.
fn full_from(snapshots: bool, in_memory: bool) -> &'static str {
    match (snapshots, in_memory) {
        (false, _) => "none",
        (true, true) => "batch",
        (true, false) => "spill",
    }
}

fn per_leaf(bytes: Option<u64>, leaves: u64) -> Option<f64> {
    bytes.map(|b| (b as f64 / leaves as f64 * 10.0).round() / 10.0)
}

fn main() -> anyhow::Result<()> {
    let o = <Opts as clap::Parser>::parse();
    let n = 1u64 << o.leaves_log2;
    let auto = Config::for_leaves(n, o.threads);
    let config =
        Config::new(auto.threads, o.shard_bits.unwrap_or(auto.shard_bits), o.bucket_bits.unwrap_or(auto.bucket_bits))?;
    let snapshots = !o.no_snapshots;
    println!(
        "mem-bench: leaves=2^{} slots={} slot_updates={} threads={} shard_bits={} bucket_bits={} snapshots={} \
         full_from={}",
        o.leaves_log2,
        o.slots,
        o.slot_updates,
        config.threads,
        config.shard_bits,
        config.bucket_bits,
        snapshots,
        full_from(snapshots, o.in_memory_full)
    );
    let tmp = tempfile::tempdir()?;
    let rss_before = rss_bytes();
    let started = Instant::now();
    let mut builder = BulkBuilder::new(config)?;
    // The writer starts before the build, as the plugin's does: the spill lives in its directory.
    let writer = snapshots
        .then(|| SnapshotWriter::start(WriterConfig { keep_slots: 4 * o.slots, ..WriterConfig::new(tmp.path()) }, None))
        .transpose()?;
    let mut full = match &writer {
        None => None,
        Some(_) if o.in_memory_full => {
            Some(FullAccounts::Batch(AccountBatch::with_capacity(n as usize, n as usize * o.data_len)))
        }
        Some(w) => Some(FullAccounts::Spill(w.startup_spill(DEFAULT_SPILL_BITS)?)),
    };
    let mut first = 0;
    while first < n {
        let count = (n - first).min(65_536) as usize;
        let chunk = SlotAccounts::prefill(o.seed, first, count, o.data_len);
        let refs = chunk.refs();
        builder.push_accounts(&refs, (0, 0));
        match full.as_mut() {
            Some(FullAccounts::Batch(batch)) => {
                for r in &refs {
                    batch.push(aldb_verify::spec::key_path(r.pubkey), r);
                }
            }
            Some(FullAccounts::Spill(spill)) => {
                for r in &refs {
                    spill.append(&aldb_verify::spec::key_path(r.pubkey), (0, 0), r)?;
                }
            }
            None => {}
        }
        first += count as u64;
    }
    let mut tree = builder.finish();
    println!("build: {} leaves in {:.1} s", tree.len(), started.elapsed().as_secs_f64());
    let writer = match (writer, full) {
        (Some(w), Some(full)) => {
            let accounts = match full {
                FullAccounts::Batch(batch) => batch,
                FullAccounts::Spill(spill) => AccountBatch::from_spill(spill.finish()?),
            };
            let written = Instant::now();
            let mut changes = ChangeSet::new(aldb_snapshot::CAPTURE_OPTIONS);
            tree.capture_all(&mut changes);
            w.submit(SlotInput { slot: 0, parent: None, root: tree.root(), changes, accounts, full: true })?;
            w.flush()?;
            println!("full snapshot: written in {:.1} s", written.elapsed().as_secs_f64());
            // The writer hands its inputs' buffers back for reuse; the full snapshot's would
            // hold every account's data for as long as the run.
            while w.take_spare().is_some() {}
            Some(w)
        }
        _ => None,
    };
    // The writer's own time on the slots after the full snapshot, from its counter.
    let written_before = writer.as_ref().map_or(0, |w| w.stats().write_nanos.load(Ordering::Relaxed));
    let mut window = KeyWindow::prefilled(n);
    for slot in 1..=o.slots {
        let ops = SlotOps::draw(o.seed, slot, o.slot_updates, &mut window);
        let accounts = SlotAccounts::slot_new(o.seed, slot, &ops, o.data_len);
        let refs = accounts.refs();
        let updates = tree.hash_accounts(&refs);
        match &writer {
            Some(w) => {
                let (mut changes, mut batch) = w.spare_buffers();
                batch.fill_from_updates(&updates, &refs);
                let root = tree.commit_capture(updates, &mut changes);
                w.submit(SlotInput { slot, parent: Some(slot - 1), root, changes, accounts: batch, full: false })?;
            }
            None => {
                tree.commit(updates);
            }
        }
    }
    if let Some(w) = &writer {
        w.flush()?;
        let nanos = w.stats().write_nanos.load(Ordering::Relaxed).saturating_sub(written_before);
        println!("slot writes: {:.1} ms per slot", nanos as f64 / 1e6 / o.slots.max(1) as f64);
    }
    trim_heap();
    let rss_after = rss_bytes();
    let leaves = tree.len() as u64;
    let grown = rss_after.zip(rss_before).map(|(a, b)| a.saturating_sub(b));
    let engine = tree.heap_bytes() as u64;
    let rest = grown.map(|g| g.saturating_sub(engine));
    // The writer's own count of its tables (what grows with the tree); the rest of `rest` is
    // per-slot buffers and allocator slack.
    let tables = writer.as_ref().map(|w| w.stats().table_bytes.load(Ordering::Relaxed));
    // The slots' buffers the writer hands back for reuse (as the plugin reuses them): as many
    // as were in flight at once, each a slot's size whatever the tree's.
    let spares = writer.as_ref().map(|w| {
        let (mut count, mut bytes) = (0u64, 0u64);
        while let Some((changes, batch)) = w.take_spare() {
            count += 1;
            bytes += (changes.heap_bytes() + batch.heap_bytes()) as u64;
        }
        (count, bytes)
    });
    println!(
        "per leaf: process grew {:?} B, engine heap {:?} B, the rest (writer tables and buffers) {:?} B  ({} leaves, \
         anonymous rss {:.2} GB, mapped file pages {:.2} GB)",
        per_leaf(grown, leaves),
        per_leaf(Some(engine), leaves),
        per_leaf(rest, leaves),
        leaves,
        rss_after.unwrap_or(0) as f64 / 1e9,
        rss_file_bytes().unwrap_or(0) as f64 / 1e9,
    );
    let peak = peak_rss_bytes();
    println!("peak rss: {:.2} GB", peak.unwrap_or(0) as f64 / 1e9);
    if let (Some(t), Some((count, bytes))) = (tables, spares) {
        println!(
            "writer tables: {:?} B per leaf; spare slot buffers: {count} holding {:?} B per leaf",
            per_leaf(Some(t), leaves),
            per_leaf(Some(bytes), leaves)
        );
    }
    if let Some(w) = writer {
        w.shutdown()?;
    }
    let out = json!({
        "leaves_log2": o.leaves_log2,
        "leaves": leaves,
        "slots": o.slots,
        "slot_updates": o.slot_updates,
        "threads": config.threads,
        "shard_bits": config.shard_bits,
        "bucket_bits": config.bucket_bits,
        "snapshots": snapshots,
        "full_from": full_from(snapshots, o.in_memory_full),
        "rss_before_bytes": rss_before,
        "rss_after_bytes": rss_after,
        "rss_file_bytes": rss_file_bytes(),
        "peak_rss_bytes": peak,
        "bytes_per_leaf": per_leaf(grown, leaves),
        "engine_heap_bytes_per_leaf": per_leaf(Some(engine), leaves),
        "other_bytes_per_leaf": per_leaf(rest, leaves),
        "writer_table_bytes_per_leaf": tables.and_then(|t| per_leaf(Some(t), leaves)),
        "spare_buffers": spares.map(|s| s.0),
        "spare_buffer_bytes_per_leaf": spares.and_then(|s| per_leaf(Some(s.1), leaves)),
        "root": tree.root().iter().map(|x| format!("{x:02x}")).collect::<String>(),
    });
    println!("{out}");
    Ok(())
}
