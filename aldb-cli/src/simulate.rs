//! `aldb simulate`: the benchmark's workload through Pleiades and the snapshot writer, so the
//! service can be tried without a validator.
//!
//! Every simulated slot also gets a root record (`docs/SPEC.md` §9) from a
//! [`RecordProducer`], logged under `DIR/records/` and signed with `--keypair` when given. The
//! simulation has no blocks or banks, so records carry no block metadata and no parent bank hash
//! (`BLOCK` and `BANK_HASH` unset); each slot's parent is the previous slot, and its record is
//! chained to the previous record.

use std::io::Write;
use std::path::PathBuf;

use aldb_core::{ChangeSet, Config};
use aldb_format::SnapshotReader;
use aldb_snapshot::records::{RecordInput, RecordProducer, Signer};
use aldb_snapshot::{AccountBatch, DEFAULT_SPILL_BITS, SlotInput, SnapshotWriter, StartupSpill, WriterConfig};
use aldb_verify::json::hash_to_base58;
use aldb_verify::record::Commitment;
use aldb_workload::{KeyWindow, SlotAccounts, SlotOps};
use anyhow::{Context, Result, bail};
use clap::Args;

mod base;

use base::Workload;

/// Options of `aldb simulate`.
#[derive(Args, Debug)]
pub(crate) struct SimulateArgs {
    /// Snapshot directory to write (created if missing).
    #[arg(long)]
    dir: PathBuf,
    /// Run through this slot (the prefill is slot 0); a resumed run continues up to it.
    #[arg(long, default_value_t = 100)]
    slots: u64,
    /// log2 of the number of prefilled accounts.
    #[arg(long, default_value_t = 14)]
    leaves_log2: u32,
    /// Account updates per slot (90% updates, 5% inserts, 5% deletes).
    #[arg(long, default_value_t = 2000)]
    slot_updates: usize,
    /// Bytes of data per account.
    #[arg(long, default_value_t = 165)]
    data_len: usize,
    /// Workload seed.
    #[arg(long, default_value_t = 20240611)]
    seed: u64,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Publish a snapshot every this many slots.
    #[arg(long, default_value_t = 1)]
    every: u64,
    /// Slots kept provable; older files are pruned.
    #[arg(long, default_value_t = 1000)]
    keep: u64,
    /// Retention waits for an archiver: no file is deleted that `aldb-ship` has not recorded as
    /// archived in the directory (`shipped.seq`), and no record log segment it has not recorded
    /// as archived sealed (`shipped-records.slot`); use when the directory is shipped to a bucket.
    #[arg(long)]
    hold_for_shipper: bool,
    /// Slots over which every record is rewritten once (lets old files be retired).
    #[arg(long, default_value_t = 512)]
    refresh_slots: u64,
    /// Wait this long between slots (400 imitates mainnet); 0 runs flat out.
    #[arg(long, default_value_t = 0)]
    slot_ms: u64,
    /// Continue a directory written by an earlier run with the same workload options.
    #[arg(long)]
    resume: bool,
    /// Solana keypair file (a JSON array of 64 numbers) that signs the root records; without
    /// it the records are logged unsigned. `aldb keygen` makes one.
    #[arg(long)]
    keypair: Option<PathBuf>,
    /// Genesis hash (base58) the root records name [default: BLAKE2s-256 of "aldb-simulate",
    /// 51ikJEpcxZMWLST5nSVjLqawCdqDNWBH93RVWHdLnZPB].
    #[arg(long)]
    genesis_hash: Option<String>,
    /// Commitment level the root records claim: confirmed or finalized.
    #[arg(long, default_value = "finalized", value_parser = parse_commitment)]
    commitment: Commitment,
}

fn parse_commitment(s: &str) -> Result<Commitment, String> {
    Commitment::from_name(s).ok_or_else(|| format!("unknown commitment {s:?} (expected confirmed or finalized)"))
}

/// The genesis hash of simulated records unless `--genesis-hash` says otherwise: plain
/// BLAKE2s-256 (no key, salt or personalisation) of the 13 ASCII bytes `aldb-simulate`.
pub(crate) fn default_genesis_hash() -> [u8; 32] {
    *blake2s_simd::blake2s(b"aldb-simulate").as_array()
}

/// A spare change set or batch larger than this came back from a full snapshot's write (a full
/// capture holds at least 32 bytes per leaf): reusing it would keep a whole-tree allocation for the
/// rest of the run, so it is dropped.
fn spare_bound(n: u64) -> usize {
    usize::try_from(n.saturating_mul(16)).unwrap_or(usize::MAX).max(16 << 20)
}

/// Buffers for the next slot: a written slot's, when the writer has handed one back and it is
/// slot-sized, else fresh ones.
fn buffers(writer: &SnapshotWriter, bound: usize) -> (ChangeSet, AccountBatch) {
    while let Some((changes, batch)) = writer.take_spare() {
        if changes.heap_bytes() <= bound && batch.heap_bytes() <= bound {
            return (changes, batch);
        }
    }
    (ChangeSet::new(aldb_snapshot::CAPTURE_OPTIONS), AccountBatch::default())
}

/// Runs the simulation.
pub(crate) fn run(a: SimulateArgs) -> Result<()> {
    if a.leaves_log2 > 30 {
        bail!("--leaves-log2 {} is too large (at most 30)", a.leaves_log2);
    }
    let threads = a.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
    let n = 1u64 << a.leaves_log2;
    let config = Config::for_leaves(n, threads);
    let work = Workload { seed: a.seed, slot_updates: a.slot_updates, data_len: a.data_len };

    // With --resume, the newest published slot is replayed to (and checked); without, the
    // directory must hold no snapshots yet.
    let published = if a.resume && a.dir.exists() { SnapshotReader::open(&a.dir)?.latest() } else { None };
    if published.is_none()
        && a.dir.exists()
        && !a.resume
        && SnapshotReader::open(&a.dir).map(|h| h.latest().is_some()).unwrap_or(false)
    {
        bail!("{} already holds snapshots; pass --resume to continue them or use an empty directory", a.dir.display());
    }

    // Root records: resumed from the log like the snapshots (a replayed slot is never
    // re-signed; the next one is chained to the newest logged record).
    let genesis = match &a.genesis_hash {
        Some(g) => crate::accounts::decode_key("--genesis-hash", g)?,
        None => default_genesis_hash(),
    };
    let signer = a.keypair.as_deref().map(Signer::from_keypair_file).transpose()?;
    let mut producer = RecordProducer::open(&a.dir, genesis, signer)
        .with_context(|| format!("cannot open the record log of {}", a.dir.display()))?;
    if !a.resume && producer.last_slot().is_some() {
        bail!(
            "{} already holds root records; pass --resume to continue them or use an empty directory",
            a.dir.display()
        );
    }
    match producer.identity() {
        Some(id) => eprintln!("root records: signed by {}, genesis {}", hash_to_base58(&id), hash_to_base58(&genesis)),
        None => eprintln!("root records: unsigned (no --keypair), genesis {}", hash_to_base58(&genesis)),
    }
    let commitment = a.commitment;
    let mut record = move |slot: u64, root: [u8; 32]| -> Result<()> {
        let input = RecordInput {
            slot,
            parent: slot.checked_sub(1),
            commitment,
            state_root: root,
            block: None,
            parent_bank_hash: None,
            bank_hash: None,
        };
        producer.produce(input).with_context(|| format!("cannot log the root record of slot {slot}"))?;
        // Segments hold 65,536 records; drop whole ones that are all older than what is kept.
        if slot.is_multiple_of(4096) {
            let keep_from = slot.saturating_sub(a.keep);
            let pruned = match a.hold_for_shipper {
                true => producer.prune_before_held(keep_from),
                false => producer.prune_before(keep_from),
            };
            pruned.context("cannot prune the record log")?;
        }
        Ok(())
    };

    // Slot 0, the prefill, bulk-built; every account state up to the run's first snapshot also
    // goes to the startup spill, which that full snapshot is written from.
    // Declared before the writer, so dropped after it has stopped: whatever way the run ends, no
    // spill is left behind.
    let _spill_dir = SpillDir(&a.dir);
    let spill = StartupSpill::create(&a.dir, DEFAULT_SPILL_BITS)
        .with_context(|| format!("cannot create the startup spill in {}", a.dir.display()))?;
    let mut tree = base::prefill(config, a.seed, n, a.data_len, threads, &spill)?;
    let mut window = KeyWindow::prefilled(n);
    let mut start = 1;
    if let Some(p) = published {
        base::replay(&mut tree, &mut window, &spill, &work, p.slot)?;
        if tree.root() != p.root {
            bail!(
                "{} holds a different workload: replayed root at slot {} is {}, published {}",
                a.dir.display(),
                p.slot,
                hash_to_base58(&tree.root()),
                hash_to_base58(&p.root)
            );
        }
        start = p.slot + 1;
    }

    let out = std::sync::Mutex::new(std::io::stdout());
    let on_publish = Box::new(move |p: &aldb_snapshot::Published| {
        if let Ok(mut o) = out.lock() {
            let _ = writeln!(
                o,
                "published slot={} root={} seq={} bytes={}",
                p.slot,
                hash_to_base58(&p.root),
                p.seq,
                p.bytes
            );
            let _ = o.flush();
        }
    });
    let wc = WriterConfig {
        every: a.every,
        keep_slots: a.keep,
        refresh_slots: a.refresh_slots,
        hold_for_shipper: a.hold_for_shipper,
        ..WriterConfig::new(&a.dir)
    };
    let writer = SnapshotWriter::start(wc, Some(on_publish))?;
    let bound = spare_bound(n);

    // The first snapshot of a run is full, written from the spill: slot 0 of a new run, or the
    // first slot after the replay of a resumed one (its own accounts spilled too).
    let mut spill = Some(spill);
    if start == 1 {
        let mut changes = ChangeSet::new(aldb_snapshot::CAPTURE_OPTIONS);
        tree.capture_all(&mut changes);
        record(0, tree.root())?;
        let accounts = full_accounts(&mut spill)?;
        writer.submit(SlotInput { slot: 0, parent: None, root: tree.root(), changes, accounts, full: true })?;
    }
    for slot in start..=a.slots {
        let t = std::time::Instant::now();
        let ops = SlotOps::draw(a.seed, slot, a.slot_updates, &mut window);
        let accounts = SlotAccounts::slot_new(a.seed, slot, &ops, a.data_len);
        let refs = accounts.refs();
        let updates = tree.hash_accounts(&refs);
        let (mut changes, mut batch) = buffers(&writer, bound);
        let full = spill.is_some();
        if let Some(s) = &spill {
            base::spill_slot(s, slot, 0, &updates, &refs)?;
        } else {
            batch.fill_from_updates(&updates, &refs);
        }
        let root = tree.commit_capture(updates, &mut changes);
        // The record is durable before the slot is submitted, so every published slot has one.
        record(slot, root)?;
        if full {
            tree.capture_all(&mut changes);
            batch = full_accounts(&mut spill)?;
        }
        writer.submit(SlotInput { slot, parent: Some(slot - 1), root, changes, accounts: batch, full })?;
        if let Some(rest) = std::time::Duration::from_millis(a.slot_ms).checked_sub(t.elapsed()) {
            std::thread::sleep(rest);
        }
    }
    drop(spill);
    writer.flush().context("snapshot writer")?;
    let stats = writer.stats().clone();
    writer.shutdown()?;
    let published = stats.published.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!(
        "done: {} accounts, {} snapshots, {} bytes written",
        tree.len(),
        published,
        stats.bytes.load(std::sync::atomic::Ordering::Relaxed)
    );
    Ok(())
}

/// Removes the startup spill's directory when dropped. Once its full snapshot is written the spill
/// removes itself; this covers a run that stops before that (an error, a resume with nothing to
/// write).
struct SpillDir<'a>(&'a std::path::Path);

impl Drop for SpillDir<'_> {
    fn drop(&mut self) {
        let _ = aldb_snapshot::remove_leftover_spill(self.0);
    }
}

/// The full snapshot's accounts: the finished spill, read back by the writer as it writes.
fn full_accounts(spill: &mut Option<StartupSpill>) -> Result<AccountBatch> {
    let s = spill.take().context("the startup spill was already written")?;
    let done = s.finish().context("cannot finish the startup spill")?;
    Ok(AccountBatch::from_spill(done))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_genesis_hash_is_the_documented_one() {
        // hashlib.blake2s(b"aldb-simulate").digest(), base58.
        assert_eq!(hash_to_base58(&default_genesis_hash()), "51ikJEpcxZMWLST5nSVjLqawCdqDNWBH93RVWHdLnZPB");
    }
}
