//! Account records handed from the committing thread to the writer, in one flat buffer.

use aldb_core::AccountRef;
use aldb_verify::spec::Hash;

use crate::startup::SpilledAccounts;
use aldb_format::SnapshotError;

/// One account of a batch; its data lives in the batch's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AccountEntry {
    /// Key path of `pubkey` (already computed by the committer).
    pub path: Hash,
    /// Account address.
    pub pubkey: [u8; 32],
    /// Balance; zero means deleted (no record is written).
    pub lamports: u64,
    /// Owning program.
    pub owner: [u8; 32],
    /// Whether the account is a loaded program.
    pub executable: bool,
    data_start: usize,
    data_len: usize,
}

/// The account states of one slot (or a full state), owning their data in one allocation so a
/// slot's worth moves to the writer without per-account allocations or copies.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AccountBatch {
    entries: Vec<AccountEntry>,
    data: Vec<u8>,
    /// A full state's accounts on disk, written from there (see [`AccountBatch::from_spill`]);
    /// the entries then hold only accounts merged on top of it.
    spill: Option<SpilledAccounts>,
}

impl AccountBatch {
    /// An empty batch with room for `accounts` accounts and `data_bytes` of data.
    pub fn with_capacity(accounts: usize, data_bytes: usize) -> Self {
        Self { entries: Vec::with_capacity(accounts), data: Vec::with_capacity(data_bytes), spill: None }
    }

    /// A full state's accounts as the startup spill holds them: the writer reads each winner
    /// back from disk as it writes the full snapshot, so the accounts are never all in memory.
    /// Valid only in a full [`crate::SlotInput`]; every leaf of its change set must have its
    /// account in the spill.
    pub fn from_spill(spill: SpilledAccounts) -> Self {
        Self { spill: Some(spill), ..Self::default() }
    }

    /// The spill this batch's accounts come from, if they do.
    pub fn spilled(&self) -> Option<&SpilledAccounts> {
        self.spill.as_ref()
    }

    /// Takes the spill out of the batch.
    pub(crate) fn take_spill(&mut self) -> Option<SpilledAccounts> {
        self.spill.take()
    }

    /// The accounts of a slot with the key paths the engine computed for them
    /// (`updates[i]` is the update of `accounts[i]`, as [`aldb_core::Pleiades::hash_accounts`]
    /// returns them), so the writer never hashes a pubkey again.
    pub fn from_updates(updates: &[aldb_core::Update], accounts: &[AccountRef<'_>]) -> Self {
        let mut b = Self::default();
        b.fill_from_updates(updates, accounts);
        b
    }

    /// Like [`AccountBatch::from_updates`], into this batch (emptied first, its allocations
    /// kept): the way to reuse [`crate::SnapshotWriter::spare_buffers`].
    pub fn fill_from_updates(&mut self, updates: &[aldb_core::Update], accounts: &[AccountRef<'_>]) {
        self.clear();
        self.entries.reserve(accounts.len());
        self.data.reserve(accounts.iter().map(|a| a.data.len()).sum());
        for (u, a) in updates.iter().zip(accounts) {
            self.push(u.path, a);
        }
    }

    /// Sets each entry's key path from the engine's updates of this batch's own accounts
    /// (`updates[i]` from `self.get(i)`, as [`aldb_core::Pleiades::hash_accounts`] over
    /// [`AccountBatch::refs`] returns them). A producer that gathers a slot's accounts straight
    /// into a batch hashes from it and then hands it to the writer without copying any data.
    pub fn set_paths(&mut self, updates: &[aldb_core::Update]) -> Result<(), SnapshotError> {
        if updates.len() != self.entries.len() {
            return Err(SnapshotError::Input(format!(
                "{} updates for a batch of {} accounts",
                updates.len(),
                self.entries.len()
            )));
        }
        for (e, u) in self.entries.iter_mut().zip(updates) {
            e.path = u.path;
        }
        Ok(())
    }

    /// Appends an account whose key path is `path`.
    pub fn push(&mut self, path: Hash, a: &AccountRef<'_>) {
        let data_start = self.data.len();
        self.data.extend_from_slice(a.data);
        self.entries.push(AccountEntry {
            path,
            pubkey: *a.pubkey,
            lamports: a.lamports,
            owner: *a.owner,
            executable: a.executable,
            data_start,
            data_len: a.data.len(),
        });
    }

    /// Number of accounts.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries in push order.
    pub fn entries(&self) -> &[AccountEntry] {
        &self.entries
    }

    /// The data of an entry of this batch.
    pub fn data(&self, e: &AccountEntry) -> &[u8] {
        &self.data[e.data_start..e.data_start + e.data_len]
    }

    /// Account `i` as an engine account reference.
    pub fn get(&self, i: usize) -> Option<AccountRef<'_>> {
        let e = self.entries.get(i)?;
        Some(AccountRef {
            pubkey: &e.pubkey,
            lamports: e.lamports,
            owner: &e.owner,
            executable: e.executable,
            data: self.data(e),
        })
    }

    /// Every account as an engine account reference, in push order.
    pub fn refs(&self) -> Vec<AccountRef<'_>> {
        (0..self.len()).filter_map(|i| self.get(i)).collect()
    }

    /// Makes room for `accounts` more accounts and `data_bytes` more data.
    pub fn reserve(&mut self, accounts: usize, data_bytes: usize) {
        self.entries.reserve(accounts);
        self.data.reserve(data_bytes);
    }

    /// Heap bytes the batch holds, used or not: what keeping it for reuse costs.
    pub fn heap_bytes(&self) -> usize {
        self.entries.capacity() * std::mem::size_of::<AccountEntry>() + self.data.capacity()
    }

    /// Empties the batch, keeping its allocations (and letting go of a spill).
    pub fn clear(&mut self) {
        self.entries.clear();
        self.data.clear();
        self.spill = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_set_after_hashing_match_a_batch_built_from_updates() {
        let keys: Vec<[u8; 32]> = (0u8..5).map(|i| [i.wrapping_mul(37); 32]).collect();
        let data: Vec<Vec<u8>> = (0..5).map(|i| vec![i as u8; i * 3]).collect();
        let refs: Vec<AccountRef<'_>> = keys
            .iter()
            .zip(&data)
            .map(|(k, d)| AccountRef { pubkey: k, lamports: 7, owner: k, executable: false, data: d })
            .collect();
        let mut updates = Vec::new();
        aldb_core::hash_accounts(&refs, &mut updates);
        let expected = AccountBatch::from_updates(&updates, &refs);

        let mut gathered = AccountBatch::default();
        for a in &refs {
            gathered.push([0; 32], a);
        }
        let mut hashed = Vec::new();
        aldb_core::hash_accounts(&gathered.refs(), &mut hashed);
        assert!(gathered.set_paths(&hashed[..4]).is_err(), "a short update list is refused");
        gathered.set_paths(&hashed).expect("same length");
        assert_eq!(gathered, expected);
    }
}
