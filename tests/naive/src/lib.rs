//! The v1 commitment computed the slow, obvious way, sharing no code with the engine.
//!
//! A `BTreeMap` from key path to value hash is the whole state; the root is a recursion over the
//! sorted leaves. It exists so that property tests compare the engine against something too
//! simple to be wrong in the same way.

use std::collections::BTreeMap;

use blake2s_simd::Params;

/// A 32-byte digest.
pub type Hash = [u8; 32];

fn h(personal: &[u8; 8], salt: Option<u8>, parts: &[&[u8]]) -> Hash {
    let mut p = Params::new();
    p.hash_length(32).personal(personal);
    if let Some(d) = salt {
        p.salt(&[d, 0, 0, 0, 0, 0, 0, 0]);
    }
    let mut st = p.to_state();
    for x in parts {
        st.update(x);
    }
    *st.finalize().as_array()
}

/// `H_path(pubkey)`.
pub fn path(pubkey: &[u8; 32]) -> Hash {
    h(b"aldbpath", None, &[pubkey])
}

/// `H_acct(lamports || owner || executable || data_len || data)`.
pub fn value(lamports: u64, owner: &[u8; 32], executable: bool, data: &[u8]) -> Hash {
    h(
        b"aldbacct",
        None,
        &[&lamports.to_le_bytes(), owner, &[executable as u8], &(data.len() as u64).to_le_bytes(), data],
    )
}

fn leaf(path: &Hash, value: &Hash) -> Hash {
    h(b"aldbleaf", None, &[path, value])
}

fn branch(depth: usize, l: &Hash, r: &Hash) -> Hash {
    h(b"aldbnode", Some(depth as u8), &[l, r])
}

fn bit(p: &Hash, d: usize) -> bool {
    p[d / 8] & (0x80 >> (d % 8)) != 0
}

/// The naive state: key path to account value hash.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NaiveState {
    /// Present leaves.
    pub leaves: BTreeMap<Hash, Hash>,
}

impl NaiveState {
    /// Sets or (with `None`) deletes a path.
    pub fn apply(&mut self, path: Hash, value: Option<Hash>) {
        match value {
            Some(v) => {
                self.leaves.insert(path, v);
            }
            None => {
                self.leaves.remove(&path);
            }
        }
    }

    /// Applies one account the way the validator reports it: lamports 0 deletes.
    pub fn apply_account(&mut self, pubkey: &[u8; 32], lamports: u64, owner: &[u8; 32], executable: bool, data: &[u8]) {
        let v = (lamports != 0).then(|| value(lamports, owner, executable, data));
        self.apply(path(pubkey), v);
    }

    /// The root: zeros when empty.
    pub fn root(&self) -> Hash {
        let v: Vec<(Hash, Hash)> = self.leaves.iter().map(|(k, v)| (*k, *v)).collect();
        subtree(&v, 0)
    }
}

fn subtree(leaves: &[(Hash, Hash)], depth: usize) -> Hash {
    match leaves.len() {
        0 => [0; 32],
        1 => leaf(&leaves[0].0, &leaves[0].1),
        _ => {
            // Walk down one bit at a time until the leaves actually split.
            let mut d = depth;
            loop {
                let split = leaves.iter().position(|(p, _)| bit(p, d)).unwrap_or(leaves.len());
                if split > 0 && split < leaves.len() {
                    return branch(d, &subtree(&leaves[..split], d + 1), &subtree(&leaves[split..], d + 1));
                }
                d += 1;
            }
        }
    }
}
