//! Startup cost: N synthetic startup accounts through the geyser adapter's startup path to the end
//! of startup, the bulk-built base state and its full snapshot, as the plugin runs them. Prints
//! the configuration, the phases, peak RSS (`VmHWM`) per startup account and accounts/s, then one
//! JSON line.
//!
//! Accounts are generated on the fly from a fixed seed (never held by the bench), so the peak is
//! what the startup path holds. A fraction of them (`--dup-fraction`) rewrite an earlier account
//! at another storage slot and write version, in random order, as a snapshot's storages do.
//!
//! Two modes: `records` keeps each startup account, data included, until the end of startup and
//! hands the winners to the writer in one batch (what the plugin did before streaming startup);
//! `spill` appends each account to a spill file in the snapshot directory as it arrives and
//! streams its hash into the bulk builder, and the full snapshot reads the winners back from the
//! spill.

use std::path::PathBuf;
use std::time::Instant;

use aldb_snapshot::{AccountBatch, CAPTURE_OPTIONS, SlotInput, SnapshotWriter, WriterConfig};
use geyser_adapter::{AccountRecord, AccountUpdate, Adapter, AdapterConfig, CommitKind, Commitment, KeepAccounts};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::json;

#[path = "../mem.rs"]
#[allow(dead_code)]
mod mem;

/// Startup cost: synthetic startup accounts through the adapter to the full snapshot.
#[derive(clap::Parser)]
#[command(name = "startup-bench")]
struct Opts {
    /// Startup accounts = 2^N, duplicates included (at most 30).
    #[arg(long, value_name = "N", default_value_t = 20, value_parser = clap::value_parser!(u32).range(..=30))]
    accounts_log2: u32,
    /// Account data bytes.
    #[arg(long, value_name = "N", default_value_t = 0)]
    data_len: usize,
    /// Fraction of startup accounts that rewrite an earlier one (another slot or write version).
    #[arg(long, value_name = "F", default_value_t = 0.1)]
    dup_fraction: f64,
    /// `records` (every account held until the end of startup) or `spill` (streamed).
    #[arg(long, value_name = "MODE", default_value = "spill")]
    mode: String,
    /// Engine threads [default: half the cores, as the plugin].
    #[arg(long, value_name = "N", default_value_t = half_the_cores(), hide_default_value = true)]
    threads: usize,
    /// Seed of the account stream.
    #[arg(long, value_name = "S", default_value_t = 20240611)]
    seed: u64,
    /// Snapshot directory [default: a temp dir].
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

fn half_the_cores() -> usize {
    (std::thread::available_parallelism().map_or(1, |n| n.get()) / 2).max(1)
}

/// The account stream: account `i` is new, or (with the duplicate fraction) a rewrite of an
/// earlier one. Pubkeys and data come from the seed, never from a table.
struct Stream {
    rng: ChaCha8Rng,
    seed: u64,
    distinct: u64,
    dup: f64,
    data: Vec<u8>,
}

impl Stream {
    fn new(seed: u64, dup: f64, data_len: usize) -> Self {
        Self { rng: ChaCha8Rng::seed_from_u64(seed), seed, distinct: 0, dup, data: vec![0; data_len] }
    }

    fn pubkey(&self, k: u64) -> [u8; 32] {
        let mut r = ChaCha8Rng::seed_from_u64(self.seed ^ k.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        r.random()
    }

    /// The next account: `(pubkey, slot, write_version, lamports)`; data is in `self.data`.
    fn next(&mut self) -> ([u8; 32], u64, u64, u64) {
        let k = if self.distinct > 0 && self.rng.random_bool(self.dup) {
            self.rng.random_range(0..self.distinct)
        } else {
            self.distinct += 1;
            self.distinct - 1
        };
        let slot = self.rng.random_range(0..1000u64);
        let wv = self.rng.random::<u32>() as u64;
        // One in 64 states is a deletion: the winner decides whether the account exists.
        let lamports = if self.rng.random_range(0..64u32) == 0 { 0 } else { self.rng.random_range(1..1u64 << 40) };
        self.rng.fill(&mut self.data[..]);
        (self.pubkey(k), slot, wv, lamports)
    }
}

fn batch(records: Vec<AccountRecord>) -> AccountBatch {
    let data: usize = records.iter().map(|r| r.data.len()).sum();
    let mut b = AccountBatch::with_capacity(records.len(), data);
    for r in records {
        if r.lamports == 0 {
            continue;
        }
        let a = aldb_core::AccountRef {
            pubkey: &r.pubkey,
            lamports: r.lamports,
            owner: &r.owner,
            executable: r.executable,
            data: &r.data,
        };
        b.push(r.hashed.path, &a);
    }
    b
}

fn main() -> anyhow::Result<()> {
    let o: Opts = clap::Parser::parse();
    let n = 1u64 << o.accounts_log2;
    anyhow::ensure!((0.0..1.0).contains(&o.dup_fraction), "--dup-fraction must be in [0, 1)");
    let spill = match o.mode.as_str() {
        "records" => false,
        "spill" => true,
        m => anyhow::bail!("--mode must be records or spill, not {m}"),
    };
    let tmp;
    let dir = match &o.dir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    let expected = (n as f64 * (1.0 - o.dup_fraction)) as u64;
    let mut cfg = AdapterConfig::new(Commitment::Confirmed, aldb_core::Config::for_leaves(expected.max(1), o.threads));
    cfg.capture_changes = Some(CAPTURE_OPTIONS);
    let adapter = Adapter::with_retain(cfg, KeepAccounts)?;
    let writer = SnapshotWriter::start(WriterConfig::new(&dir), None)?;
    let spilled = if spill { Some(spill::enable(&adapter, &dir)?) } else { None };
    println!(
        "startup-bench: {n} startup accounts (2^{}), {} data bytes, duplicate fraction {}, mode {}, {} engine threads, \
         seed {}, dir {}",
        o.accounts_log2,
        o.data_len,
        o.dup_fraction,
        o.mode,
        o.threads,
        o.seed,
        dir.display()
    );
    let rss_start = mem::peak_rss_bytes().unwrap_or(0);

    let t0 = Instant::now();
    let mut stream = Stream::new(o.seed, o.dup_fraction, o.data_len);
    let owner = [7u8; 32];
    for _ in 0..n {
        let (pubkey, slot, write_version, lamports) = stream.next();
        let u = AccountUpdate {
            slot,
            pubkey,
            lamports,
            owner,
            executable: false,
            data: &stream.data,
            write_version,
            is_startup: true,
        };
        let _ = adapter.update_account(&u);
    }
    let feed = t0.elapsed();
    let rss_fed = mem::rss_bytes().unwrap_or(0);
    adapter.end_of_startup().map_err(|e| anyhow::anyhow!("end of startup: {e:?}"))?;
    let t1 = Instant::now();
    let mut committed = adapter.commit_ready();
    let build = t1.elapsed();
    anyhow::ensure!(committed.len() == 1, "expected the startup commit, got {}", committed.len());
    let c = committed.remove(0);
    anyhow::ensure!(c.kind == CommitKind::Startup, "expected the startup commit");
    let t2 = Instant::now();
    let accounts = match spilled {
        Some(accounts) => spill::take(&adapter, &accounts)?,
        None => batch(c.records),
    };
    let changes = c.changes.ok_or_else(|| anyhow::anyhow!("no change set"))?;
    writer.submit(SlotInput { slot: c.slot, parent: None, root: c.root, changes, accounts, full: true })?;
    writer.flush()?;
    let snap = t2.elapsed();
    let total = t0.elapsed();
    let peak = mem::peak_rss_bytes().unwrap_or(0);
    let file_bytes = writer.stats().bytes.load(std::sync::atomic::Ordering::Relaxed);
    writer.shutdown()?;
    let live = c.updates as u64;
    let rate = n as f64 / total.as_secs_f64();
    println!(
        "feed {:.2} s ({:.0} accounts/s), RSS after feed {:.1} MiB",
        feed.as_secs_f64(),
        n as f64 / feed.as_secs_f64(),
        mib(rss_fed)
    );
    println!("bulk build {:.2} s, {live} live accounts, root {}", build.as_secs_f64(), hex(&c.root));
    println!("full snapshot {:.2} s, {:.1} MiB", snap.as_secs_f64(), mib(file_bytes));
    println!(
        "total {:.2} s, {rate:.0} accounts/s; peak RSS {:.1} MiB ({:.1} MiB before the first account), {:.1} B per \
         startup account",
        total.as_secs_f64(),
        mib(peak),
        mib(rss_start),
        peak as f64 / n as f64
    );
    let j = json!({
        "bench": "startup",
        "mode": o.mode,
        "accounts": n,
        "accounts_log2": o.accounts_log2,
        "live_accounts": live,
        "data_len": o.data_len,
        "dup_fraction": o.dup_fraction,
        "threads": o.threads,
        "seed": o.seed,
        "root": hex(&c.root),
        "feed_secs": feed.as_secs_f64(),
        "build_secs": build.as_secs_f64(),
        "snapshot_secs": snap.as_secs_f64(),
        "total_secs": total.as_secs_f64(),
        "accounts_per_sec": rate,
        "peak_rss_bytes": peak,
        "rss_before_bytes": rss_start,
        "peak_rss_per_account": peak as f64 / n as f64,
        "snapshot_bytes": file_bytes,
    });
    println!("{j}");
    Ok(())
}

fn mib(b: u64) -> f64 {
    b as f64 / (1u64 << 20) as f64
}

fn hex(h: &[u8; 32]) -> String {
    h.iter().map(|b| format!("{b:02x}")).collect()
}

mod spill {
    use std::path::Path;
    use std::sync::Arc;

    use aldb_core::AccountRef;
    use aldb_node::StartupAccounts;
    use aldb_snapshot::{AccountBatch, DEFAULT_SPILL_BITS, StartupSpill};
    use geyser_adapter::{Adapter, KeepAccounts, StartupSink};

    /// The adapter's handle on the pipeline's spill, as the plugin makes it.
    struct Feed(Arc<StartupAccounts>);

    impl StartupSink for Feed {
        fn append(&self, path: &[u8; 32], rank: (u64, u64), account: &AccountRef<'_>) {
            self.0.append(path, rank, account);
        }
    }

    /// Streams the adapter's startup accounts to the pipeline's spill in the snapshot directory.
    pub(crate) fn enable(adapter: &Adapter<KeepAccounts>, dir: &Path) -> anyhow::Result<Arc<StartupAccounts>> {
        let accounts = Arc::new(StartupAccounts::new(StartupSpill::create(dir, DEFAULT_SPILL_BITS)?));
        adapter.spill_startup(Arc::new(Feed(accounts.clone())))?;
        Ok(accounts)
    }

    /// The finished spill as the full snapshot's accounts.
    pub(crate) fn take(adapter: &Adapter<KeepAccounts>, accounts: &StartupAccounts) -> anyhow::Result<AccountBatch> {
        adapter.take_startup_sink().ok_or_else(|| anyhow::anyhow!("startup is not over"))?;
        let spill = accounts.finish().ok_or_else(|| anyhow::anyhow!("no spill"))??;
        println!("spill: {} accounts, {:.1} MiB", spill.accounts(), super::mib(spill.bytes()));
        Ok(AccountBatch::from_spill(spill))
    }
}
