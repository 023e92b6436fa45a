//! Key path orderings and the shard of a path, shared by the engine, its shards and the bulk
//! loader (kept below all three, so none of them imports another for these).

use aldb_verify::spec::Hash;

/// Orders paths; the first eight bytes decide almost every comparison of random paths, so they
/// are compared as one integer before falling back to the whole array.
#[inline]
pub(crate) fn path_cmp(a: &Hash, b: &Hash) -> std::cmp::Ordering {
    let (x, y) = (prefix64(a), prefix64(b));
    if x != y { x.cmp(&y) } else { a.cmp(b) }
}

#[inline]
pub(crate) fn prefix64(p: &Hash) -> u64 {
    u64::from_be_bytes([p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]])
}

/// The shard of a path: its top `bits` bits.
pub(crate) fn shard_index(path: &Hash, bits: u8) -> usize {
    if bits == 0 {
        return 0;
    }
    let top = u32::from_be_bytes([path[0], path[1], path[2], path[3]]);
    (top >> (32 - u32::from(bits))) as usize
}
