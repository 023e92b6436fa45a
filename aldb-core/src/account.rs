//! From accounts to tree updates: key paths and account value hashes, hashed in SIMD batches.

use aldb_verify::spec::{self, Hash};

use crate::multihash::{DOMAINS, Parts, hash_blocks, hash_messages};

/// An account as the validator reports it, borrowed: what the commitment hashes.
#[derive(Clone, Copy, Debug)]
pub struct AccountRef<'a> {
    /// The account address.
    pub pubkey: &'a [u8; 32],
    /// Balance; zero means the account is deleted.
    pub lamports: u64,
    /// Owning program.
    pub owner: &'a [u8; 32],
    /// Whether the account holds a loaded program.
    pub executable: bool,
    /// Account data.
    pub data: &'a [u8],
}

/// One change to the tree: set `path` to `value`, or delete it when `value` is `None`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Update {
    /// Key path (`H_path(pubkey)`).
    pub path: Hash,
    /// Account value hash, or `None` to delete.
    pub value: Option<Hash>,
}

impl Update {
    /// The update that commits one account (a deletion when its lamports are zero).
    pub fn from_account(a: &AccountRef<'_>) -> Self {
        let path = spec::key_path(a.pubkey);
        let value = (a.lamports != 0).then(|| spec::account_value(a.lamports, a.owner, a.executable, a.data));
        Self { path, value }
    }
}

/// Hashes a run of accounts into updates, many messages per SIMD pass; appends to `out`.
pub fn hash_accounts(accounts: &[AccountRef<'_>], out: &mut Vec<Update>) {
    let base = out.len();
    out.resize(base + accounts.len(), Update { path: [0; 32], value: None });
    hash_accounts_into(accounts, &mut out[base..]);
}

/// Hashes `accounts[i]` into `out[i]`; the slices have equal length.
pub(crate) fn hash_accounts_into(accounts: &[AccountRef<'_>], out: &mut [Update]) {
    let d = &*DOMAINS;
    hash_blocks(accounts.len(), |i| (&d.path_cv, &accounts[i].pubkey[..]), |i, h| out[i].path = h);

    // The value preimage is header || data. The kernel reads the two as separate parts, so only
    // the 49-byte headers of live (non-zero lamports) accounts are built, never a copy of the data.
    let live: Vec<(usize, [u8; spec::ACCOUNT_HEADER_LEN])> = accounts
        .iter()
        .enumerate()
        .filter(|(_, a)| a.lamports != 0)
        .map(|(i, a)| (i, spec::account_header(a.lamports, a.owner, a.executable, a.data.len())))
        .collect();
    for (i, a) in accounts.iter().enumerate() {
        if a.lamports == 0 {
            out[i].value = None;
        }
    }
    hash_messages(
        live.len(),
        |k| {
            let (i, ref header) = live[k];
            (&d.account_cv, Parts { head: header, tail: accounts[i].data })
        },
        |k, h| out[live[k].0].value = Some(h),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_matches_scalar_and_zero_lamports_delete() {
        let keys: Vec<[u8; 32]> = (0..40u8).map(|i| [i; 32]).collect();
        let owner = [7u8; 32];
        let datas: Vec<Vec<u8>> = (0..40usize).map(|i| vec![i as u8; i * 13]).collect();
        let accts: Vec<AccountRef<'_>> = (0..40)
            .map(|i| AccountRef {
                pubkey: &keys[i],
                lamports: if i % 7 == 3 { 0 } else { i as u64 * 1000 + 1 },
                owner: &owner,
                executable: i % 2 == 0,
                data: &datas[i],
            })
            .collect();
        let mut out = Vec::new();
        hash_accounts(&accts, &mut out);
        for (a, u) in accts.iter().zip(&out) {
            assert_eq!(*u, Update::from_account(a));
        }
        assert!(out[3].value.is_none());
    }
}
