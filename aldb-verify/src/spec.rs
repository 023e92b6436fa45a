//! The v1 commitment's hash functions, exactly as `docs/SPEC.md` states them.
//!
//! Every hash is BLAKE2s-256 with no key; the 8-byte `personal` field of the parameter block
//! separates the four domains, and a branch also puts its depth in the first byte of `salt`.
//! Putting the depth inside the hash is what lets a proof carry depths without trusting them.

use blake2s_simd::Params;

/// A 32-byte BLAKE2s digest: a key path, a value hash, a leaf or a branch.
pub type Hash = [u8; 32];

/// Domain separator of a key path: `path = H_path(pubkey)`.
pub const PERSONAL_PATH: [u8; 8] = *b"aldbpath";
/// Domain separator of an account value hash.
pub const PERSONAL_ACCOUNT: [u8; 8] = *b"aldbacct";
/// Domain separator of a leaf: `leaf = H_leaf(path || value)`.
pub const PERSONAL_LEAF: [u8; 8] = *b"aldbleaf";
/// Domain separator of a branch; its depth goes in `salt[0]`.
pub const PERSONAL_NODE: [u8; 8] = *b"aldbnode";

/// Version of the commitment these functions compute (`docs/SPEC.md`). A change to any hash,
/// bit order or tree rule gets a new version, so roots of different versions never compare equal
/// by accident.
pub const COMMITMENT_VERSION: u32 = 1;

/// The root of the empty tree.
pub const EMPTY_ROOT: Hash = [0u8; 32];

/// Number of bits in a key path, and so one more than the deepest possible branch depth.
pub const PATH_BITS: usize = 256;

/// BLAKE2s-256 parameters with the given personalisation and no salt.
pub fn params(personal: &[u8; 8]) -> Params {
    let mut p = Params::new();
    p.hash_length(32).personal(personal);
    p
}

/// BLAKE2s-256 parameters of a branch at `depth`.
pub fn branch_params(depth: u8) -> Params {
    let mut p = params(&PERSONAL_NODE);
    p.salt(&[depth, 0, 0, 0, 0, 0, 0, 0]);
    p
}

fn to_hash(h: blake2s_simd::Hash) -> Hash {
    *h.as_array()
}

/// The key path of an account: where its leaf sits in the tree.
pub fn key_path(pubkey: &[u8; 32]) -> Hash {
    to_hash(params(&PERSONAL_PATH).hash(pubkey))
}

/// Fixed-size prefix of the account value preimage: lamports, owner, executable, data length.
pub const ACCOUNT_HEADER_LEN: usize = 8 + 32 + 1 + 8;

/// The bytes hashed before `data` in an account value hash.
pub fn account_header(lamports: u64, owner: &[u8; 32], executable: bool, data_len: usize) -> [u8; ACCOUNT_HEADER_LEN] {
    let mut h = [0u8; ACCOUNT_HEADER_LEN];
    h[..8].copy_from_slice(&lamports.to_le_bytes());
    h[8..40].copy_from_slice(owner);
    h[40] = u8::from(executable);
    // usize is at most 64 bits on every target we build for, so this never truncates.
    h[41..49].copy_from_slice(&(data_len as u64).to_le_bytes());
    h
}

/// The value hash of an account: `H_acct(lamports || owner || executable || data_len || data)`.
pub fn account_value(lamports: u64, owner: &[u8; 32], executable: bool, data: &[u8]) -> Hash {
    let mut state = params(&PERSONAL_ACCOUNT).to_state();
    state.update(&account_header(lamports, owner, executable, data.len()));
    state.update(data);
    to_hash(state.finalize())
}

/// The hash of a leaf: `H_leaf(path || value)`, one compression.
pub fn leaf_hash(path: &Hash, value: &Hash) -> Hash {
    let mut buf = [0u8; 64];
    buf[..32].copy_from_slice(path);
    buf[32..].copy_from_slice(value);
    to_hash(params(&PERSONAL_LEAF).hash(&buf))
}

/// The hash of a branch whose two non-empty subtrees first differ at bit `depth`.
pub fn branch_hash(depth: u8, left: &Hash, right: &Hash) -> Hash {
    let mut buf = [0u8; 64];
    buf[..32].copy_from_slice(left);
    buf[32..].copy_from_slice(right);
    to_hash(branch_params(depth).hash(&buf))
}

/// Bit `d` of a path, most significant bit of byte 0 first; 0 goes left.
#[inline]
pub fn bit(path: &Hash, d: usize) -> u8 {
    (path[d / 8] >> (7 - d % 8)) & 1
}

/// The first bit at which two paths differ, or `None` if they are equal.
#[inline]
pub fn first_difference(a: &Hash, b: &Hash) -> Option<u8> {
    for i in 0..32 {
        let x = a[i] ^ b[i];
        if x != 0 {
            // i < 32 and leading_zeros < 8, so the depth fits in a u8 (at most 255).
            return Some((i * 8 + x.leading_zeros() as usize) as u8);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_are_msb_first() {
        let mut p = [0u8; 32];
        p[0] = 0b1000_0000;
        p[31] = 0b0000_0001;
        assert_eq!(bit(&p, 0), 1);
        assert_eq!(bit(&p, 1), 0);
        assert_eq!(bit(&p, 255), 1);
        assert_eq!(bit(&p, 254), 0);
    }

    #[test]
    fn first_difference_finds_the_crit_bit() {
        let a = [0u8; 32];
        let mut b = [0u8; 32];
        assert_eq!(first_difference(&a, &b), None);
        b[3] = 0b0001_0000;
        assert_eq!(first_difference(&a, &b), Some(27));
        b[0] = 0b1000_0000;
        assert_eq!(first_difference(&a, &b), Some(0));
        let mut c = [0u8; 32];
        c[31] = 1;
        assert_eq!(first_difference(&a, &c), Some(255));
    }

    #[test]
    fn domains_are_separated() {
        let z = [0u8; 32];
        assert_ne!(leaf_hash(&z, &z), branch_hash(0, &z, &z));
        assert_ne!(branch_hash(0, &z, &z), branch_hash(1, &z, &z));
        assert_ne!(key_path(&z), account_value(0, &z, false, &[]));
    }
}
