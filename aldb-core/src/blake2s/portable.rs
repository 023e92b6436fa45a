//! A plain, one-message-at-a-time BLAKE2s compression: the fallback, and a readable statement of
//! exactly what the vector kernels compute.

use super::{BLOCK_LEN, IV, Parts, SIGMA, check_len};

/// The G mixing function (RFC 7693 section 3.1).
#[inline(always)]
fn g(v: &mut [u32; 16], a: usize, b: usize, c: usize, d: usize, x: u32, y: u32) {
    v[a] = v[a].wrapping_add(v[b]).wrapping_add(x);
    v[d] = (v[d] ^ v[a]).rotate_right(16);
    v[c] = v[c].wrapping_add(v[d]);
    v[b] = (v[b] ^ v[c]).rotate_right(12);
    v[a] = v[a].wrapping_add(v[b]).wrapping_add(y);
    v[d] = (v[d] ^ v[a]).rotate_right(8);
    v[c] = v[c].wrapping_add(v[d]);
    v[b] = (v[b] ^ v[c]).rotate_right(7);
}

/// Compresses one block into the chaining value `h`: `t` counts the message bytes up to the
/// end of this block (the whole length for the last one), `last` sets the final-block flag.
fn compress(h: &mut [u32; 8], block: &[u8; BLOCK_LEN], t: u64, last: bool) {
    let mut m = [0u32; 16];
    for (w, chunk) in m.iter_mut().zip(block.chunks_exact(4)) {
        *w = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
    }

    let mut v = [0u32; 16];
    v[..8].copy_from_slice(h);
    v[8..].copy_from_slice(&IV);
    // Byte counter t0 (low half), t1 (high half); final-block flag f0 = all ones on the last
    // block (f1, the last-node flag, stays 0).
    v[12] ^= t as u32;
    v[13] ^= (t >> 32) as u32;
    if last {
        v[14] ^= u32::MAX;
    }

    for s in &SIGMA {
        g(&mut v, 0, 4, 8, 12, m[s[0]], m[s[1]]);
        g(&mut v, 1, 5, 9, 13, m[s[2]], m[s[3]]);
        g(&mut v, 2, 6, 10, 14, m[s[4]], m[s[5]]);
        g(&mut v, 3, 7, 11, 15, m[s[6]], m[s[7]]);
        g(&mut v, 0, 5, 10, 15, m[s[8]], m[s[9]]);
        g(&mut v, 1, 6, 11, 12, m[s[10]], m[s[11]]);
        g(&mut v, 2, 7, 8, 13, m[s[12]], m[s[13]]);
        g(&mut v, 3, 4, 9, 14, m[s[14]], m[s[15]]);
    }
    for (i, w) in h.iter_mut().enumerate() {
        *w ^= v[i] ^ v[i + 8];
    }
}

/// The little-endian bytes of a final chaining value.
fn digest(h: &[u32; 8]) -> [u8; 32] {
    let mut digest = [0u8; 32];
    for (d, w) in digest.chunks_exact_mut(4).zip(h) {
        d.copy_from_slice(&w.to_le_bytes());
    }
    digest
}

/// The digest of `msg` (at most 64 bytes) as the final and only block after `cv`.
pub(super) fn hash_one(cv: &[u32; 8], msg: &[u8]) -> [u8; 32] {
    check_len(msg);
    let mut block = [0u8; BLOCK_LEN];
    block[..msg.len()].copy_from_slice(msg);
    let mut h = *cv;
    compress(&mut h, &block, msg.len() as u64, true);
    digest(&h)
}

/// The digest of a message of any length after `cv`.
pub(super) fn hash_parts(cv: &[u32; 8], msg: &Parts<'_>) -> [u8; 32] {
    let blocks = msg.blocks();
    let mut h = *cv;
    for k in 0..blocks {
        let start = k * BLOCK_LEN;
        let last = k + 1 == blocks;
        let t = if last { msg.len() } else { start + BLOCK_LEN };
        compress(&mut h, &msg.gather(start), t as u64, last);
    }
    digest(&h)
}

/// [`super::hash_multi_blocks`] one message at a time, in index order.
pub(super) fn hash_all_multi<'a>(
    count: usize,
    mut job: impl FnMut(usize) -> (&'a [u32; 8], Parts<'a>),
    mut out: impl FnMut(usize, [u8; 32]),
) {
    for i in 0..count {
        let (cv, msg) = job(i);
        out(i, hash_parts(cv, &msg));
    }
}

/// [`super::hash_single_blocks`] one message at a time.
pub(super) fn hash_all<'a>(
    count: usize,
    mut job: impl FnMut(usize) -> (&'a [u32; 8], &'a [u8]),
    mut out: impl FnMut(usize, [u8; 32]),
) {
    for i in 0..count {
        let (cv, msg) = job(i);
        out(i, hash_one(cv, msg));
    }
}
