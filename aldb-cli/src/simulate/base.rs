//! The state a simulation starts from, built without holding its accounts.
//!
//! The first snapshot of a run is full, so the writer needs every live account once. Holding
//! them (a map of every account and a batch of all of them at slot 0) cost about 1,200 bytes per
//! account, six times the engine and the writer together. Instead, as the plugin's streaming
//! startup does, every account state that goes into the engine before the first snapshot is also
//! appended to a startup spill on disk, ranked `(slot, position in the slot)`: the prefill, and on
//! `--resume` every replayed slot. The spill's winners are then the live accounts (the latest
//! state of each key, deletions dropped) and the writer reads them back one partition at a time
//! as it writes the full snapshot. Account data exists in memory one generated chunk or slot at
//! a time; the spill costs its bytes on disk until the full snapshot is written, then is removed.

use aldb_core::{AccountRef, BulkBuilder, BulkEntry, Config, Pleiades, Update};
use aldb_snapshot::StartupSpill;
use aldb_workload::{KeyWindow, SlotAccounts, SlotOps};
use anyhow::{Context, Result};

/// Prefill accounts generated, hashed and spilled at a time.
const CHUNK: u64 = 65_536;

/// Hashes accounts on `threads` scoped threads (the bulk builder's own hashing does not hand
/// back the key paths the spill needs).
fn hash_parallel(accounts: &[AccountRef<'_>], threads: usize) -> Vec<Update> {
    let per = accounts.len().div_ceil(threads.max(1)).max(1);
    std::thread::scope(|s| {
        let parts: Vec<_> = accounts
            .chunks(per)
            .map(|c| {
                s.spawn(move || {
                    let mut out = Vec::with_capacity(c.len());
                    aldb_core::hash_accounts(c, &mut out);
                    out
                })
            })
            .collect();
        let mut all = Vec::with_capacity(accounts.len());
        for p in parts {
            // A hashing thread only panics on a bug; surface it rather than lose accounts.
            all.extend(p.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
        }
        all
    })
}

/// Appends a slot's account states to the spill, ranked by slot and position, so a later state
/// of the same key (in the slot or a later one) wins and a closed account drops out.
pub(crate) fn spill_slot(
    spill: &StartupSpill,
    slot: u64,
    first: u64,
    updates: &[Update],
    accounts: &[AccountRef<'_>],
) -> Result<()> {
    for (i, (u, a)) in updates.iter().zip(accounts).enumerate() {
        spill.append(&u.path, (slot, first + i as u64), a).context("cannot append to the startup spill")?;
    }
    Ok(())
}

/// Bulk-builds the prefill of `n` accounts (slot 0), spilling every account as it goes.
pub(crate) fn prefill(
    config: Config,
    seed: u64,
    n: u64,
    data_len: usize,
    threads: usize,
    spill: &StartupSpill,
) -> Result<Pleiades> {
    let mut builder = BulkBuilder::new(config)?;
    let mut entries = Vec::with_capacity(CHUNK as usize);
    let mut first = 0;
    while first < n {
        let count = CHUNK.min(n - first) as usize;
        let chunk = SlotAccounts::prefill(seed, first, count, data_len);
        let refs = chunk.refs();
        let updates = hash_parallel(&refs, threads);
        // One rank for the whole prefill (its keys are distinct): the builder then keeps no
        // per-entry rank.
        entries.clear();
        entries.extend(updates.iter().map(|u| BulkEntry { path: u.path, value: u.value, rank: (0, 0) }));
        builder.push(&entries);
        spill_slot(spill, 0, first, &updates, &refs)?;
        first += count as u64;
    }
    Ok(builder.finish())
}

/// Replays slots `1..=last` of the workload into `tree` (and the spill), as a resumed run does
/// before it continues: the engine needs the state the directory's newest slot committed.
pub(crate) fn replay(
    tree: &mut Pleiades,
    window: &mut KeyWindow,
    spill: &StartupSpill,
    w: &Workload,
    last: u64,
) -> Result<()> {
    for slot in 1..=last {
        let ops = SlotOps::draw(w.seed, slot, w.slot_updates, window);
        let accounts = SlotAccounts::slot_new(w.seed, slot, &ops, w.data_len);
        let refs = accounts.refs();
        let updates = tree.hash_accounts(&refs);
        spill_slot(spill, slot, 0, &updates, &refs)?;
        tree.commit(updates);
    }
    Ok(())
}

/// What generates a run's accounts.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Workload {
    pub(crate) seed: u64,
    pub(crate) slot_updates: usize,
    pub(crate) data_len: usize,
}
