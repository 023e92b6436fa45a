//! Single-threaded tree anchors on the same workload at a smaller size: penumbra's `jmt` with its
//! in-memory mock store, and the nervos `sparse-merkle-tree` with its default store.
//!
//! Both get exactly the per-update work the engine gets: the account is hashed into aldb's key
//! path and account value hash (`aldb_core::hash_accounts`, on the one thread), then the tree is
//! updated with key = the 32-byte key path and value = the 32-byte account value hash. `jmt`
//! hashes that value once more with SHA-256 into its leaf, as it does with any value; the nervos
//! tree takes the value hash as its leaf value directly. Deletes remove the key.

use std::time::Instant;

use aldb_core::{Update, hash_accounts};
use anyhow::{anyhow, ensure};
use jmt::mock::MockTreeStore;
use jmt::{KeyHash, Sha256Jmt};
use sparse_merkle_tree::blake2b::Blake2bHasher;
use sparse_merkle_tree::default_store::DefaultStore;
use sparse_merkle_tree::{H256, SparseMerkleTree};

use aldb_workload::{KeyWindow, SlotAccounts as AccountBatch, SlotOps};

const PREFILL_CHUNK: usize = 65_536;

/// Sizes of one anchor run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AnchorOpts {
    pub(crate) seed: u64,
    pub(crate) leaves: u64,
    pub(crate) slot_updates: usize,
    pub(crate) slots: u64,
    pub(crate) warmup: u64,
    pub(crate) data_len: usize,
}

/// What an anchor run measured.
pub(crate) struct AnchorReport {
    pub(crate) leaves: u64,
    pub(crate) prefill_secs: f64,
    pub(crate) slot_secs: Vec<f64>,
    pub(crate) updates_measured: u64,
    pub(crate) root: [u8; 32],
}

impl AnchorReport {
    pub(crate) fn updates_per_sec(&self) -> f64 {
        self.updates_measured as f64 / self.slot_secs.iter().sum::<f64>()
    }
}

/// A tree the anchor loop can drive.
trait AnchorTree {
    /// Applies one batch of hashed updates as one version and returns the root.
    fn apply(&mut self, updates: &[Update]) -> anyhow::Result<[u8; 32]>;
    /// Untimed housekeeping after a version (e.g. dropping stale nodes).
    fn after(&mut self) -> anyhow::Result<()> {
        Ok(())
    }
}

struct Jmt {
    store: MockTreeStore,
    version: u64,
}

impl AnchorTree for Jmt {
    fn apply(&mut self, updates: &[Update]) -> anyhow::Result<[u8; 32]> {
        let set = updates.iter().map(|u| (KeyHash(u.path), u.value.map(|v| v.to_vec())));
        let (root, batch) = Sha256Jmt::new(&self.store).put_value_set(set, self.version)?;
        self.store.write_tree_update_batch(batch)?;
        Ok(root.0)
    }

    fn after(&mut self) -> anyhow::Result<()> {
        // Keep only the latest version, so memory stays at one tree's worth.
        self.store.purge_stale_nodes(self.version)?;
        self.version += 1;
        Ok(())
    }
}

struct Smt(SparseMerkleTree<Blake2bHasher, H256, DefaultStore<H256>>);

impl AnchorTree for Smt {
    fn apply(&mut self, updates: &[Update]) -> anyhow::Result<[u8; 32]> {
        // The zero value is the nervos tree's deletion.
        let leaves = updates.iter().map(|u| (H256::from(u.path), H256::from(u.value.unwrap_or([0; 32])))).collect();
        let root = self.0.update_all(leaves).map_err(|e| anyhow!("sparse-merkle-tree: {e}"))?;
        Ok((*root).into())
    }
}

/// `jmt` over the workload.
pub(crate) fn run_jmt(o: AnchorOpts) -> anyhow::Result<AnchorReport> {
    run(o, &mut Jmt { store: MockTreeStore::default(), version: 0 })
}

/// The nervos sparse Merkle tree over the workload.
pub(crate) fn run_smt(o: AnchorOpts) -> anyhow::Result<AnchorReport> {
    run(o, &mut Smt(SparseMerkleTree::default()))
}

fn run(o: AnchorOpts, tree: &mut impl AnchorTree) -> anyhow::Result<AnchorReport> {
    // Prefill as one version (a bulk insert). Its time includes hashing; generation is untimed.
    let mut updates = Vec::with_capacity(o.leaves as usize);
    let mut hash_secs = 0.0;
    let mut first = 0u64;
    while first < o.leaves {
        let count = (o.leaves - first).min(PREFILL_CHUNK as u64) as usize;
        let batch = AccountBatch::prefill(o.seed, first, count, o.data_len);
        let refs = batch.refs();
        let t = Instant::now();
        hash_accounts(&refs, &mut updates);
        hash_secs += t.elapsed().as_secs_f64();
        first += count as u64;
    }
    let t = Instant::now();
    tree.apply(&updates)?;
    let prefill_secs = hash_secs + t.elapsed().as_secs_f64();
    tree.after()?;
    drop(updates);

    let mut window = KeyWindow::prefilled(o.leaves);
    let mut slot_secs = Vec::new();
    let mut updates_measured = 0;
    let mut root = [0u8; 32];
    let mut updates = Vec::with_capacity(o.slot_updates);
    for slot in 0..o.slots {
        let ops = SlotOps::draw(o.seed, slot, o.slot_updates, &mut window);
        let new = AccountBatch::slot_new(o.seed, slot, &ops, o.data_len);
        let refs = new.refs();
        updates.clear();
        let t = Instant::now();
        hash_accounts(&refs, &mut updates);
        root = tree.apply(&updates)?;
        let secs = t.elapsed().as_secs_f64();
        tree.after()?;
        if slot >= o.warmup {
            slot_secs.push(secs);
            updates_measured += o.slot_updates as u64;
        }
    }
    ensure!(!slot_secs.is_empty(), "no measured slots: slots must exceed the warm-up");
    Ok(AnchorReport { leaves: window.len(), prefill_secs, slot_secs, updates_measured, root })
}
