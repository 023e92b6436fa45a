//! Shared by the object-store tests: the SeaweedFS harness, a fault-injecting store, and
//! histories written by the real engine and writer.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code, unreachable_pub, missing_docs)]

pub mod faulty;
pub mod ship;
pub mod votes;
pub mod weed;

use std::collections::BTreeMap;
use std::path::Path as FsPath;

use aldb_fixture::History;
use aldb_format::Account;
use aldb_snapshot::WriterConfig;
use aldb_snapshot::records::{RecordInput, RecordProducer};
use aldb_verify::record::Commitment;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A history of `slots` slots over `accounts` accounts (slot 100 is the full first file; each
/// later slot updates `per_slot` accounts, deletes a few), with a root record per slot.
pub struct Written {
    pub roots: BTreeMap<u64, [u8; 32]>,
    pub pubkeys: Vec<[u8; 32]>,
}

pub fn account(rng: &mut ChaCha8Rng, pubkey: [u8; 32]) -> Account {
    let len = rng.random_range(0..96);
    Account {
        pubkey,
        lamports: rng.random_range(1..1_000_000),
        owner: [7; 32],
        executable: false,
        data: (0..len).map(|_| rng.random()).collect(),
    }
}

/// Commits slots `first..first + slots` into `history`, then a root record for each.
pub fn commit_slots(
    history: &mut History,
    records: &mut RecordProducer,
    rng: &mut ChaCha8Rng,
    pubkeys: &[[u8; 32]],
    first: u64,
    slots: u64,
    per_slot: usize,
) {
    for slot in first..first + slots {
        let accounts: Vec<Account> = if history.roots().is_empty() {
            pubkeys.iter().map(|&p| account(rng, p)).collect()
        } else {
            (0..per_slot)
                .map(|_| {
                    let p = pubkeys[rng.random_range(0..pubkeys.len())];
                    let mut a = account(rng, p);
                    if rng.random_ratio(1, 20) {
                        a.lamports = 0;
                    }
                    a
                })
                .collect()
        };
        let parent = history.roots().keys().next_back().copied();
        let root = history.commit(slot, parent, &accounts).unwrap();
        records
            .produce(RecordInput {
                slot,
                parent,
                commitment: Commitment::Confirmed,
                state_root: root,
                block: None,
                parent_bank_hash: None,
                bank_hash: None,
            })
            .unwrap();
    }
    history.flush().unwrap();
}

pub fn pubkeys(rng: &mut ChaCha8Rng, n: usize) -> Vec<[u8; 32]> {
    (0..n).map(|_| rng.random()).collect()
}

pub fn writer_config(dir: &FsPath, keep_slots: u64, refresh_slots: u64) -> WriterConfig {
    let mut c = WriterConfig::new(dir);
    c.keep_slots = keep_slots;
    c.refresh_slots = refresh_slots;
    c.direct_io = false;
    c
}

/// Writes a whole history in one go.
pub fn write_history(dir: &FsPath, seed: u64, accounts: usize, slots: u64, keep_slots: u64) -> Written {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let keys = pubkeys(&mut rng, accounts);
    let mut h = History::start(writer_config(dir, keep_slots, 8), accounts as u64).unwrap();
    let mut records = RecordProducer::open(dir, [3; 32], None).unwrap();
    commit_slots(&mut h, &mut records, &mut rng, &keys, 100, slots, accounts / 10);
    let roots = h.finish().unwrap();
    Written { roots, pubkeys: keys }
}

/// Every file of a snapshot directory the bucket should mirror: published snapshot names (slot
/// files and parts) and `records/` segments, with their bytes.
pub fn local_files(dir: &FsPath) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        if aldb_format::format::parse_published_name(&name).is_some() {
            out.insert(name, std::fs::read(e.path()).unwrap());
        }
    }
    for (_, p) in aldb_format::records::list_segments(&dir.join("records")).unwrap() {
        let name = format!("records/{}", p.file_name().unwrap().to_string_lossy());
        out.insert(name, std::fs::read(p).unwrap());
    }
    out
}
