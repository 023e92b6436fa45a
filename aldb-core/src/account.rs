//! From accounts to tree updates: key paths and account value hashes, hashed in SIMD batches.

use aldb_verify::spec::{self, Hash};

use crate::multihash::{hash_blocks, hash_each, DOMAINS};

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
    let d = &*DOMAINS;
    let base = out.len();
    out.resize(base + accounts.len(), Update { path: [0; 32], value: None });
    hash_blocks(accounts.len(), |i| (&d.path_cv, &accounts[i].pubkey[..]), |i, h| out[base + i].path = h);

    // The value preimage is header || data; the SIMD jobs each need one contiguous slice.
    let mut offsets = Vec::with_capacity(accounts.len() + 1);
    let mut total = 0usize;
    for a in accounts {
        offsets.push(total);
        total += spec::ACCOUNT_HEADER_LEN + a.data.len();
    }
    offsets.push(total);
    let mut buf = Vec::with_capacity(total);
    for a in accounts {
        buf.extend_from_slice(&spec::account_header(a.lamports, a.owner, a.executable, a.data.len()));
        buf.extend_from_slice(a.data);
    }
    let live: Vec<usize> = (0..accounts.len()).filter(|&i| accounts[i].lamports != 0).collect();
    hash_each(
        live.len(),
        |k| (&d.account, &buf[offsets[live[k]]..offsets[live[k] + 1]]),
        |k, h| out[base + live[k]].value = Some(h),
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
