//! Many one-block (and multi-block) BLAKE2s-256 hashes at once, sixteen lanes wide with AVX-512.
//!
//! Almost every hash a commit computes is a message of at most 64 bytes (a branch's `left||right`,
//! a leaf preimage, a 32-byte pubkey), so it is exactly one compression: counter `t = len`, the
//! final-block flag set, the message zero-padded to 64 bytes. The parameter block (personal, salt)
//! only changes the starting chaining value, which callers precompute once per domain with
//! [`chaining_value`]. That leaves a kernel with no buffering and no multi-block bookkeeping:
//! sixteen messages are transposed into sixteen 512-bit vectors (one message word per vector, one
//! message per 32-bit lane), compressed together, and the sixteen digests transposed back.
//!
//! General-purpose multi-hash code (`blake2s_simd::many`) is 8-way at most and pays for supporting
//! messages of any length; this kernel is twice as wide and skips all of that.
//!
//! Account value preimages are longer (a 49-byte header then the account data: 214 bytes, four
//! blocks, for an SPL token account), so [`hash_multi_blocks`] runs the same kernels over several
//! blocks, carrying each lane's chaining value from block to block. A message comes in two
//! [`Parts`] (header and data) that are never concatenated: each lane's block is loaded straight
//! from whichever part holds it, and only the block straddling the two parts, or the zero-padded
//! last block, is assembled. Every lane of one kernel call must run the same number of
//! compressions, so each batch of messages is grouped by block count first
//! ([`schedule`](mod@schedule)).
//!
//! One backend per file, each chosen once per process from run-time CPU feature detection:
//!
//! - [`avx512`]: sixteen lanes (AVX-512F; AVX-512BW, and VBMI when present, for multi-block);
//! - [`avx2`]: the same algorithm eight lanes wide, for x86_64 CPUs without AVX-512;
//! - [`portable`]: a plain scalar compression, one message at a time, everywhere else; it is
//!   also the readable statement of what the vector kernels compute.
//!
//! The two vector kernels share one description of the compression rounds
//! ([`round`](mod@round)); they differ in their lane operations, loads and transposes.

#[macro_use]
mod round;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod parts;
mod portable;
mod schedule;
#[cfg(test)]
mod tests;

pub(crate) use parts::Parts;

/// The BLAKE2s initialisation vector (RFC 7693 section 2.6), shared with SHA-256.
const IV: [u32; 8] =
    [0x6A09_E667, 0xBB67_AE85, 0x3C6E_F372, 0xA54F_F53A, 0x510E_527F, 0x9B05_688C, 0x1F83_D9AB, 0x5BE0_CD19];

/// The message word permutation of each of the ten rounds (RFC 7693 section 2.7).
const SIGMA: [[usize; 16]; 10] = [
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
    [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3],
    [11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4],
    [7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8],
    [9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13],
    [2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9],
    [12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11],
    [13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10],
    [6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5],
    [10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0],
];

/// One BLAKE2s block: the largest message [`hash_single_blocks`] takes.
const BLOCK_LEN: usize = 64;

/// Digest length in bytes; also the first byte of the parameter block.
const OUT_LEN: usize = 32;

/// The chaining value BLAKE2s-256 starts from for the given salt and personalisation.
///
/// It is the IV XORed with the little-endian words of the RFC 7693 parameter block: digest length
/// 32, no key, fanout 1, depth 1 (sequential mode), leaf length, node offset, node depth and inner
/// length all 0, then `salt` (words 4 and 5) and `personal` (words 6 and 7). This equals what
/// `blake2s_simd::Params::new().hash_length(32).salt(salt).personal(personal)` starts from.
pub(crate) fn chaining_value(personal: &[u8; 8], salt: &[u8; 8]) -> [u32; 8] {
    let word = |b: &[u8; 8], i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    // Word 0: digest length, key length 0, fanout 1, depth 1.
    let params = [
        OUT_LEN as u32 | (1 << 16) | (1 << 24),
        0,
        0,
        0,
        word(salt, 0),
        word(salt, 4),
        word(personal, 0),
        word(personal, 4),
    ];
    let mut cv = IV;
    for (c, p) in cv.iter_mut().zip(params) {
        *c ^= p;
    }
    cv
}

/// Hashes `count` independent messages of at most 64 bytes each.
///
/// For each `i` in `0..count`, `job(i)` gives the starting chaining value (from
/// [`chaining_value`]; it may differ between messages) and the message, and `out(i, digest)`
/// receives its BLAKE2s-256 digest. Both closures are called in increasing `i`, but `out` for a
/// batch only after `job` for the whole batch. Messages may have different lengths.
///
/// # Panics
///
/// If a message is longer than 64 bytes: it would need more than one compression.
pub(crate) fn hash_single_blocks<'a>(
    count: usize,
    job: impl FnMut(usize) -> (&'a [u32; 8], &'a [u8]),
    out: impl FnMut(usize, [u8; 32]),
) {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512::available() {
            // SAFETY: `available` has checked at run time that the CPU has AVX-512F.
            unsafe { avx512::hash_all(count, job, out) };
            return;
        }
        if avx2::available() {
            // SAFETY: `available` has checked at run time that the CPU has AVX2.
            unsafe { avx2::hash_all(count, job, out) };
            return;
        }
    }
    portable::hash_all(count, job, out);
}

/// Checks the one-block precondition shared by both implementations.
fn check_len(msg: &[u8]) {
    assert!(msg.len() <= BLOCK_LEN, "hash_single_blocks: a {}-byte message does not fit one BLAKE2s block", msg.len());
}

/// Hashes `count` independent messages of any length, each given as two [`Parts`].
///
/// For each `i` in `0..count`, `job(i)` gives the starting chaining value (from
/// [`chaining_value`]; it may differ between messages) and the message, and `out(i, digest)`
/// receives its BLAKE2s-256 digest. `job` is called once per index in increasing `i`; `out` once
/// per index, after `job` for it, but not necessarily in increasing `i`: the vector paths collect
/// windows of a few thousand jobs and hash each window grouped by block count.
pub(crate) fn hash_multi_blocks<'a>(
    count: usize,
    job: impl FnMut(usize) -> (&'a [u32; 8], Parts<'a>),
    out: impl FnMut(usize, [u8; 32]),
) {
    #[cfg(target_arch = "x86_64")]
    {
        if let Some(loads) = avx512::multi_loads() {
            // SAFETY: `multi_loads` has checked at run time that the CPU has AVX-512F and
            // AVX-512BW, and AVX-512VBMI if it chose `Permute`.
            unsafe { avx512::hash_all_multi(count, job, out, loads) };
            return;
        }
        if avx2::available() {
            // SAFETY: `available` has checked at run time that the CPU has AVX2.
            unsafe { avx2::hash_all_multi(count, job, out) };
            return;
        }
    }
    portable::hash_all_multi(count, job, out);
}
