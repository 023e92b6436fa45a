//! A root for every frozen bank: the fork engine behind the plain-bytes API.

use aldb_core::{BulkBuilder, Config, ForkEngine, ForkLimits, Update, hash_accounts};
use aldb_verify::spec::Hash;

use crate::Account;
use crate::error::BankError;

/// The tree is sized for at least this many leaves, so a small genesis does not leave a layout
/// too shallow for the accounts that follow (the root never depends on the layout).
const MIN_EXPECTED_LEAVES: u64 = 1 << 20;

/// The module: a fork-aware Pleiades holding the state of a rooted slot (the base) and of every
/// frozen bank above it. See the [crate documentation](crate).
#[derive(Debug)]
pub struct BankRoots {
    threads: usize,
    limits: ForkLimits,
    engine: Option<ForkEngine>,
}

impl BankRoots {
    /// An empty module whose trees use `threads` workers; it holds nothing until
    /// [`BankRoots::build_base`].
    pub fn new(threads: usize) -> Self {
        Self { threads: threads.max(1), limits: ForkLimits::default(), engine: None }
    }

    /// Replaces everything held by the state `accounts` as of `slot`, which becomes the rooted
    /// slot, and returns its root. Zero-lamport accounts are absent; of two entries for one
    /// pubkey the later wins.
    pub fn build_base(&mut self, slot: u64, accounts: &[Account<'_>]) -> Result<Hash, BankError> {
        // Drop the old tree (and its worker threads) before building the new one.
        self.engine = None;
        let expected = (accounts.len() as u64).saturating_mul(2).max(MIN_EXPECTED_LEAVES);
        let mut builder = BulkBuilder::new(Config::for_leaves(expected, self.threads))?;
        // Ranks make the last entry of a pubkey win whatever shard order the builder uses.
        for (i, chunk) in accounts.chunks(1 << 16).enumerate() {
            builder.push_accounts(chunk, (0, i as u64));
        }
        let engine = ForkEngine::new(builder.finish(), slot, self.limits);
        let root = engine.base_root();
        self.engine = Some(engine);
        Ok(root)
    }

    /// Freezes bank `slot` on `parent` with the accounts it stored in its own slot (zero lamports:
    /// deleted) and returns the root of its state. Freezing a slot again replaces its old version
    /// and that version's descendants.
    pub fn freeze(&mut self, slot: u64, parent: u64, accounts: &[Account<'_>]) -> Result<Hash, BankError> {
        let engine = match self.engine.as_mut() {
            Some(e) if e.base() == parent || e.bank_root(parent).is_some() => e,
            _ => return Err(BankError::UnknownParent { slot, parent }),
        };
        let mut updates: Vec<Update> = Vec::with_capacity(accounts.len());
        hash_accounts(accounts, &mut updates);
        Ok(engine.freeze(slot, parent, updates)?)
    }

    /// Whether the module holds `slot`: the rooted slot or a frozen bank above it.
    pub fn holds(&self, slot: u64) -> bool {
        self.engine.as_ref().is_some_and(|e| e.base() == slot || e.bank_root(slot).is_some())
    }

    /// The root of `slot`'s state, when the module holds it.
    pub fn root_of(&self, slot: u64) -> Option<Hash> {
        let e = self.engine.as_ref()?;
        if e.base() == slot { Some(e.base_root()) } else { e.bank_root(slot) }
    }

    /// The rooted slot, once a base is built.
    pub fn base(&self) -> Option<u64> {
        self.engine.as_ref().map(ForkEngine::base)
    }

    /// Makes `slot` the rooted slot: it and its ancestors release what they hold and every bank
    /// not descending from it is dropped. Returns `false`, doing nothing, when the module does not
    /// hold `slot` (a bank frozen before the feature was active, or none built yet).
    pub fn root(&mut self, slot: u64) -> Result<bool, BankError> {
        match self.engine.as_mut() {
            Some(e) if e.base() == slot => Ok(true),
            Some(e) if e.bank_root(slot).is_some() => {
                e.root(slot)?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Drops bank `slot` and its descendants; returns their slots (none when it is not held).
    pub fn dead(&mut self, slot: u64) -> Result<Vec<u64>, BankError> {
        match self.engine.as_mut() {
            Some(e) if e.bank_root(slot).is_some() => Ok(e.dead(slot)?),
            _ => Ok(Vec::new()),
        }
    }

    /// Unrooted banks held.
    pub fn bank_count(&self) -> usize {
        self.engine.as_ref().map_or(0, ForkEngine::bank_count)
    }
}
