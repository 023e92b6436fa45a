//! aldb-ledger-replay: replays a ledger from genesis in its own process, on the patched
//! `solana-ledger`/`solana-runtime`, and prints every replayed slot's bank hash and replay time.
//!
//! `agave-ledger-tool` 4.2.0 is not published, so this is the part of its `verify`
//! that the series needs: the genesis bank from `genesis.bin`, then
//! `blockstore_processor::process_blockstore_from_root` over the blockstore, exactly as the
//! validator replays its ledger at startup when it has no snapshot. With
//! `aldb_state_root_in_bank_hash` active in the genesis, the runtime's aldb module runs as it runs
//! on the node: every bank hash mixes the aldb root, and any module failure halts the process with
//! status 1.
//!
//! Usage: `aldb-ledger-replay LEDGER_DIR`. Point it at a copy of a ledger: it opens the blockstore
//! with primary access (replay marks roots and records bank hashes, as the validator does) and
//! keeps its account files under `LEDGER_DIR/replay-accounts`. No snapshot is read.
//!
//! Output, one line per replayed slot on stdout:
//! `slot S parent P hash X replay_us N node Y|-` where `replay_us` is the wall time from the
//! previous slot's freeze to this one's (entries, transactions, freeze, rooting: all of the slot's
//! replay on this single chain) and `node` the bank hash the node recorded for the slot in its
//! blockstore, read before replay overwrites it. Last, one JSON line with the counts and the
//! replay time percentiles. Exits 1 when a hash differs from the node's or replay fails.
//! Logs (the runtime's `aldb: slot S root R h H mixed X freeze_us N aldb_us M` lines among them)
//! go to stderr; `RUST_LOG` overrides the default filter.

use {
    solana_accounts_db::accounts_db::AccountsDbConfig,
    solana_genesis_utils::{MAX_GENESIS_ARCHIVE_UNPACKED_SIZE, open_genesis_config},
    solana_ledger::{
        bank_forks_utils,
        blockstore::Blockstore,
        blockstore_options::BlockstoreOptions,
        blockstore_processor::{self, ProcessOptions, ProcessSlotCallback},
        leader_schedule_cache::LeaderScheduleCache,
    },
    solana_runtime::bank::Bank,
    solana_shred_version::compute_shred_version,
    std::{
        path::PathBuf,
        process::ExitCode,
        sync::{Arc, Mutex, PoisonError, atomic::AtomicBool},
        time::Instant,
    },
};

/// What the slot callback records, in replay order.
#[derive(Default)]
struct Replayed {
    /// `(slot, replay time in µs)` of every replayed slot.
    times: Vec<(u64, u64)>,
    /// Slots whose hash differs from the one the node recorded.
    differ: Vec<u64>,
    /// Slots the node recorded a hash for.
    compared: u64,
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn run(ledger: PathBuf) -> Result<Replayed, String> {
    let genesis = open_genesis_config(&ledger, MAX_GENESIS_ARCHIVE_UNPACKED_SIZE)
        .map_err(|err| format!("opening the genesis in {}: {err}", ledger.display()))?;
    let blockstore = Arc::new(
        Blockstore::open_with_options(&ledger, BlockstoreOptions::default())
            .map_err(|err| format!("opening the blockstore in {}: {err:?}", ledger.display()))?,
    );
    let accounts = ledger.join("replay-accounts");
    std::fs::create_dir_all(&accounts).map_err(|err| format!("creating {}: {err}", accounts.display()))?;

    let replayed = Arc::new(Mutex::new(Replayed::default()));
    let last = Arc::new(Mutex::new(Instant::now()));
    let callback: ProcessSlotCallback = {
        let (replayed, last, blockstore) = (replayed.clone(), last.clone(), blockstore.clone());
        Arc::new(move |bank: &Bank| {
            // Called right after the slot froze and before replay records its hash, so the
            // blockstore still holds the node's.
            let now = Instant::now();
            let micros = {
                let mut last = last.lock().unwrap_or_else(PoisonError::into_inner);
                let micros = now.duration_since(*last).as_micros() as u64;
                *last = now;
                micros
            };
            let (slot, hash) = (bank.slot(), bank.hash());
            let node = blockstore.get_bank_hash(slot);
            let mut replayed = replayed.lock().unwrap_or_else(PoisonError::into_inner);
            replayed.times.push((slot, micros));
            if let Some(node) = node {
                replayed.compared += 1;
                if node != hash {
                    replayed.differ.push(slot);
                }
            }
            let node = node.map_or_else(|| "-".to_string(), |h| h.to_string());
            println!("slot {slot} parent {} hash {hash} replay_us {micros} node {node}", bank.parent_slot());
        })
    };
    let opts = ProcessOptions {
        run_verification: true,
        slot_callback: Some(callback),
        accounts_db_config: AccountsDbConfig::default(),
        ..ProcessOptions::default()
    };
    let exit = Arc::new(AtomicBool::new(false));
    let (bank_forks, _) = bank_forks_utils::load_bank_forks_from_genesis(
        &genesis,
        &blockstore,
        vec![accounts],
        &opts,
        None,
        None,
        None,
        exit,
    )
    .map_err(|err| format!("loading the genesis bank: {err}"))?;
    let root_bank = bank_forks.read().unwrap_or_else(PoisonError::into_inner).root_bank();
    let shred_version = compute_shred_version(&genesis.hash(), Some(&root_bank.hard_forks()));
    let leader_schedule_cache = LeaderScheduleCache::new_from_bank(&root_bank);
    drop(root_bank);
    *last.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
    blockstore_processor::process_blockstore_from_root(
        &blockstore,
        &bank_forks,
        shred_version,
        &leader_schedule_cache,
        &opts,
        None,
        None,
        None,
    )
    .map_err(|err| format!("replaying the blockstore: {err}"))?;
    let mut replayed = replayed.lock().unwrap_or_else(PoisonError::into_inner);
    Ok(std::mem::take(&mut *replayed))
}

fn main() -> ExitCode {
    agave_logger::setup_with_default("warn,solana_runtime::bank::aldb_state_root=info");
    let mut args = std::env::args_os().skip(1);
    let (Some(ledger), None) = (args.next(), args.next()) else {
        eprintln!("usage: aldb-ledger-replay LEDGER_DIR (a copy: replay writes to its blockstore)");
        return ExitCode::from(2);
    };
    let started = Instant::now();
    let replayed = match run(PathBuf::from(ledger)) {
        Ok(replayed) => replayed,
        Err(err) => {
            eprintln!("aldb-ledger-replay: {err}");
            return ExitCode::FAILURE;
        }
    };
    let mut times: Vec<u64> = replayed.times.iter().map(|&(_, t)| t).collect();
    times.sort_unstable();
    let last = replayed.times.iter().map(|&(s, _)| s).max().unwrap_or(0);
    println!(
        "{{\"slots\":{},\"last_slot\":{last},\"compared\":{},\"differ\":{},\"replay_us_p50\":{},\"replay_us_p99\":{},\"replay_us_total\":{},\"wall_ms\":{}}}",
        times.len(),
        replayed.compared,
        replayed.differ.len(),
        percentile(&times, 50.0),
        percentile(&times, 99.0),
        times.iter().sum::<u64>(),
        started.elapsed().as_millis(),
    );
    if replayed.differ.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!("aldb-ledger-replay: bank hashes differ from the node's at slots {:?}", replayed.differ);
        ExitCode::FAILURE
    }
}
