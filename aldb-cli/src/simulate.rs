//! `aldb simulate`: the benchmark's workload through Pleiades and the snapshot writer, so the
//! service can be tried without a validator.
//!
//! Every simulated slot also gets a root record (`docs/SPEC.md` §9) from a
//! [`RecordProducer`], logged under `DIR/records/` and signed with `--keypair` when given. The
//! simulation has no blocks or banks, so records carry no block metadata and no parent bank hash
//! (`BLOCK` and `BANK_HASH` unset); each slot's parent is the previous slot, and its record is
//! chained to the previous record.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;

use aldb_core::{AccountRef, BulkBuilder, ChangeSet, Config, Pleiades};
use aldb_format::SnapshotReader;
use aldb_snapshot::records::{RecordInput, RecordProducer, Signer};
use aldb_snapshot::{AccountBatch, SlotInput, SnapshotWriter, WriterConfig};
use aldb_verify::json::hash_to_base58;
use aldb_verify::record::Commitment;
use aldb_workload::{KeyWindow, OWNER, SlotAccounts, SlotOps};
use anyhow::{Context, Result, bail};
use clap::Args;

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
    /// archived in the directory (`shipped.seq`); use when the directory is shipped to a bucket.
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

/// The accounts as the simulation last set them, to write full snapshots.
#[derive(Default)]
struct Mirror {
    accounts: HashMap<[u8; 32], (u64, Vec<u8>)>,
}

impl Mirror {
    fn apply(&mut self, s: &SlotAccounts) {
        for i in 0..s.len() {
            if s.lamports[i] == 0 {
                self.accounts.remove(&s.pubkeys[i]);
            } else {
                self.accounts.insert(s.pubkeys[i], (s.lamports[i], s.data(i).to_vec()));
            }
        }
    }

    fn batch(&self) -> AccountBatch {
        let mut b = AccountBatch::default();
        for (pk, (lamports, data)) in &self.accounts {
            let r = AccountRef { pubkey: pk, lamports: *lamports, owner: &OWNER, executable: false, data };
            b.push(aldb_verify::spec::key_path(pk), &r);
        }
        b
    }
}

fn slot_batch(tree: &Pleiades, accounts: &SlotAccounts) -> (Vec<aldb_core::Update>, AccountBatch) {
    let refs = accounts.refs();
    let updates = tree.hash_accounts(&refs);
    let batch = AccountBatch::from_updates(&updates, &refs);
    (updates, batch)
}

/// Runs the simulation.
pub(crate) fn run(a: SimulateArgs) -> Result<()> {
    if a.leaves_log2 > 30 {
        bail!("--leaves-log2 {} is too large (at most 30)", a.leaves_log2);
    }
    let threads = a.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
    let n = 1u64 << a.leaves_log2;
    let config = Config::for_leaves(n, threads);

    // Slot 0: the prefill, bulk-built.
    let mut builder = BulkBuilder::new(config)?;
    let mut mirror = Mirror::default();
    const CHUNK: u64 = 65_536;
    let mut first = 0;
    while first < n {
        let count = CHUNK.min(n - first) as usize;
        let chunk = SlotAccounts::prefill(a.seed, first, count, a.data_len);
        builder.push_accounts(&chunk.refs(), (0, first));
        mirror.apply(&chunk);
        first += count as u64;
    }
    let mut tree = builder.finish();
    let mut window = KeyWindow::prefilled(n);

    // With --resume, replay to the newest published slot and check it is the same workload.
    let mut start = 1;
    let published = if a.resume && a.dir.exists() { SnapshotReader::open(&a.dir)?.latest() } else { None };
    if let Some(p) = published {
        for slot in 1..=p.slot {
            let ops = SlotOps::draw(a.seed, slot, a.slot_updates, &mut window);
            let accounts = SlotAccounts::slot_new(a.seed, slot, &ops, a.data_len);
            tree.commit_accounts(&accounts.refs());
            mirror.apply(&accounts);
        }
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
    } else if a.dir.exists() && !a.resume && SnapshotReader::open(&a.dir).map(|h| h.latest().is_some()).unwrap_or(false)
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
            producer.prune_before(slot.saturating_sub(a.keep)).context("cannot prune the record log")?;
        }
        Ok(())
    };

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
    let mut changes = ChangeSet::new(aldb_snapshot::CAPTURE_OPTIONS);

    // The first snapshot of a run is full.
    let mut full = true;
    if start == 1 {
        tree.capture_all(&mut changes);
        record(0, tree.root())?;
        let input = SlotInput {
            slot: 0,
            parent: None,
            root: tree.root(),
            changes: std::mem::replace(&mut changes, ChangeSet::new(aldb_snapshot::CAPTURE_OPTIONS)),
            accounts: mirror.batch(),
            full,
        };
        writer.submit(input)?;
        full = false;
    }
    for slot in start..=a.slots {
        let t = std::time::Instant::now();
        let ops = SlotOps::draw(a.seed, slot, a.slot_updates, &mut window);
        let accounts = SlotAccounts::slot_new(a.seed, slot, &ops, a.data_len);
        let (updates, batch) = slot_batch(&tree, &accounts);
        let root = tree.commit_capture(updates, &mut changes);
        mirror.apply(&accounts);
        // The record is durable before the slot is submitted, so every published slot has one.
        record(slot, root)?;
        let (changes_now, accounts_now) = if full {
            tree.capture_all(&mut changes);
            (std::mem::replace(&mut changes, ChangeSet::new(aldb_snapshot::CAPTURE_OPTIONS)), mirror.batch())
        } else {
            (std::mem::replace(&mut changes, ChangeSet::new(aldb_snapshot::CAPTURE_OPTIONS)), batch)
        };
        writer.submit(SlotInput {
            slot,
            parent: Some(slot - 1),
            root,
            changes: changes_now,
            accounts: accounts_now,
            full,
        })?;
        full = false;
        if let Some(rest) = std::time::Duration::from_millis(a.slot_ms).checked_sub(t.elapsed()) {
            std::thread::sleep(rest);
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_genesis_hash_is_the_documented_one() {
        // hashlib.blake2s(b"aldb-simulate").digest(), base58.
        assert_eq!(hash_to_base58(&default_genesis_hash()), "51ikJEpcxZMWLST5nSVjLqawCdqDNWBH93RVWHdLnZPB");
    }
}
