use core::arch::x86_64::*;
use std::sync::LazyLock;

use super::schedule::schedule;
use super::{BLOCK_LEN, IV, Parts, SIGMA, check_len, portable};

/// Messages per kernel call: one per 32-bit lane of a 256-bit vector.
pub(super) const LANES: usize = 8;

/// Whether the CPU runs the kernel, detected once.
static AVAILABLE: LazyLock<bool> = LazyLock::new(|| is_x86_feature_detected!("avx2"));

/// Whether [`hash_all`] and [`hash8`] may be called on this CPU.
pub(super) fn available() -> bool {
    *AVAILABLE
}

/// The lane operations [`compress!`] is written in, on eight 32-bit lanes. AVX2 has no rotate:
/// a rotation by 16 or 8 bits moves whole bytes, one byte shuffle; by 12 or 7, two shifts and an
/// OR.
macro_rules! ops {
    (splat $x:expr) => {
        _mm256_set1_epi32($x as i32)
    };
    (add $a:expr, $b:expr) => {
        _mm256_add_epi32($a, $b)
    };
    (xor $a:expr, $b:expr) => {
        _mm256_xor_si256($a, $b)
    };
    (xor3 $a:expr, $b:expr, $c:expr) => {
        _mm256_xor_si256($a, _mm256_xor_si256($b, $c))
    };
    (ror $x:expr, 16) => {
        _mm256_shuffle_epi8(
            $x,
            _mm256_setr_epi8(
                2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12,
                13,
            ),
        )
    };
    (ror $x:expr, 8) => {
        _mm256_shuffle_epi8(
            $x,
            _mm256_setr_epi8(
                1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8, 13, 14, 15, 12, 1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8, 13, 14, 15,
                12,
            ),
        )
    };
    (ror $x:expr, $n:literal) => {{
        let x = $x;
        _mm256_or_si256(_mm256_srli_epi32::<$n>(x), _mm256_slli_epi32::<{ 32 - $n }>(x))
    }};
}

/// Transposes an 8x8 matrix of 32-bit words: row `i` of the input becomes lane `i` of every
/// output vector. It is its own inverse.
#[target_feature(enable = "avx2")]
#[inline]
fn transpose8(r: [__m256i; 8]) -> [__m256i; 8] {
    let mut t = [_mm256_setzero_si256(); 8];
    for p in 0..4 {
        t[2 * p] = _mm256_unpacklo_epi32(r[2 * p], r[2 * p + 1]);
        t[2 * p + 1] = _mm256_unpackhi_epi32(r[2 * p], r[2 * p + 1]);
    }
    // `u[4h + j]`, 128-bit lane `l`: word `4l + j` of rows `4h..4h + 4`.
    let mut u = [_mm256_setzero_si256(); 8];
    for h in 0..2 {
        let (t0, t1, t2, t3) = (t[4 * h], t[4 * h + 1], t[4 * h + 2], t[4 * h + 3]);
        u[4 * h] = _mm256_unpacklo_epi64(t0, t2);
        u[4 * h + 1] = _mm256_unpackhi_epi64(t0, t2);
        u[4 * h + 2] = _mm256_unpacklo_epi64(t1, t3);
        u[4 * h + 3] = _mm256_unpackhi_epi64(t1, t3);
    }
    // Word `4l + j` joins 128-bit lane `l` of `u[j]` (rows 0..4) and of `u[4 + j]` (4..8).
    let mut w = [_mm256_setzero_si256(); 8];
    for j in 0..4 {
        w[j] = _mm256_permute2x128_si256::<0x20>(u[j], u[4 + j]);
        w[4 + j] = _mm256_permute2x128_si256::<0x31>(u[j], u[4 + j]);
    }
    w
}

/// Loads a message of at most 64 bytes as the two zero-padded halves of one block, with
/// plain loads for full blocks and 32-byte keys and a zeroed stack copy otherwise.
#[target_feature(enable = "avx2")]
#[inline]
fn load_block(msg: &[u8]) -> [__m256i; 2] {
    let p = msg.as_ptr();
    match msg.len() {
        // SAFETY: `msg` has exactly the 64 bytes the two unaligned 256-bit loads read.
        BLOCK_LEN => unsafe { [_mm256_loadu_si256(p.cast()), _mm256_loadu_si256(p.add(32).cast())] },
        // SAFETY: `msg` has exactly the 32 bytes the unaligned 256-bit load reads.
        32 => [unsafe { _mm256_loadu_si256(p.cast()) }, _mm256_setzero_si256()],
        len => {
            let mut block = [0u8; BLOCK_LEN];
            block[..len].copy_from_slice(msg);
            let b = block.as_ptr();
            // SAFETY: `block` is a live `[u8; 64]`, exactly the 64 bytes the loads read.
            unsafe { [_mm256_loadu_si256(b.cast()), _mm256_loadu_si256(b.add(32).cast())] }
        }
    }
}

/// The chaining values of eight lanes, one vector per word.
#[target_feature(enable = "avx2")]
#[inline]
fn load_cvs(cvs: &[&[u32; 8]; LANES]) -> [__m256i; 8] {
    if cvs.iter().all(|c| core::ptr::eq(*c, cvs[0]) || **c == *cvs[0]) {
        core::array::from_fn(|w| _mm256_set1_epi32(cvs[0][w] as i32))
    } else {
        // SAFETY: each pointer is to a live `[u32; 8]`, exactly the 32 bytes an unaligned
        // 256-bit load reads.
        transpose8(core::array::from_fn(|l| unsafe { _mm256_loadu_si256(cvs[l].as_ptr().cast()) }))
    }
}

/// Writes the final chaining values `h` (one vector per word) out as eight digests.
#[target_feature(enable = "avx2")]
#[inline]
fn store_digests(h: [__m256i; 8], out: &mut [[u8; 32]; LANES]) {
    for (o, row) in out.iter_mut().zip(transpose8(h)) {
        // SAFETY: `o` is a live, writable `[u8; 32]`, exactly the 32 bytes an unaligned
        // 256-bit store writes.
        unsafe { _mm256_storeu_si256(o.as_mut_ptr().cast(), row) };
    }
}

/// Compresses eight one-block messages: lane `l` hashes `msgs[l]` (at most 64 bytes) from
/// chaining value `cvs[l]`, and its digest goes to `out[l]`.
///
/// # Panics
///
/// If a message is longer than 64 bytes.
#[target_feature(enable = "avx2")]
pub(super) fn hash8(cvs: &[&[u32; 8]; LANES], msgs: &[&[u8]; LANES], out: &mut [[u8; 32]; LANES]) {
    let mut lo = [_mm256_setzero_si256(); LANES];
    let mut hi = [_mm256_setzero_si256(); LANES];
    let mut lens = [0u32; LANES];
    for l in 0..LANES {
        check_len(msgs[l]);
        [lo[l], hi[l]] = load_block(msgs[l]);
        lens[l] = msgs[l].len() as u32;
    }
    let (m_lo, m_hi) = (transpose8(lo), transpose8(hi));
    let m: [__m256i; 16] = core::array::from_fn(|w| if w < 8 { m_lo[w] } else { m_hi[w - 8] });

    let mut h = load_cvs(cvs);
    // SAFETY: `lens` is a `[u32; 8]`, exactly the 32 bytes an unaligned 256-bit load reads.
    let t0 = unsafe { _mm256_loadu_si256(lens.as_ptr().cast()) };
    // One block, so it is the last: the final-block flag is set in every lane.
    compress!(ops; h, m, t0, _mm256_set1_epi32(-1));
    store_digests(h, out);
}

/// [`super::hash_single_blocks`] eight messages per kernel call; a final group is padded
/// like `avx512::hash_all` pads it.
///
/// # Safety
///
/// The CPU must support AVX2 ([`available`]).
#[target_feature(enable = "avx2")]
pub(super) unsafe fn hash_all<'a>(
    count: usize,
    mut job: impl FnMut(usize) -> (&'a [u32; 8], &'a [u8]),
    mut out: impl FnMut(usize, [u8; 32]),
) {
    let mut digests = [[0u8; 32]; LANES];
    let mut start = 0;
    while start < count {
        let n = LANES.min(count - start);
        if n == 1 {
            let (cv, msg) = job(start);
            out(start, portable::hash_one(cv, msg));
            break;
        }
        let first = job(start);
        let mut cvs = [first.0; LANES];
        let mut msgs = [first.1; LANES];
        for l in 1..n {
            (cvs[l], msgs[l]) = job(start + l);
        }
        hash8(&cvs, &msgs, &mut digests);
        for (l, d) in digests.iter().take(n).enumerate() {
            out(start + l, *d);
        }
        start += n;
    }
}

/// Hashes eight messages of `blocks` blocks each, as `avx512::hash16_multi_permute` does sixteen.
#[target_feature(enable = "avx2")]
pub(super) fn hash8_multi(
    cvs: &[&[u32; 8]; LANES],
    msgs: &[Parts<'_>; LANES],
    blocks: usize,
    out: &mut [[u8; 32]; LANES],
) {
    debug_assert!(msgs.iter().all(|m| m.blocks() == blocks && m.len() <= u32::MAX as usize));
    let lens: [u32; LANES] = core::array::from_fn(|l| msgs[l].len() as u32);
    // A block that neither part holds whole (at most the one straddling the parts, and the
    // last) is assembled in a zeroed stack block; AVX2 has no byte-granular load or permute
    // to do it in registers. They are all assembled before the first compression: a block
    // stored and at once loaded back stalls on store-to-load forwarding, while by the time
    // the compression loop reaches these, the stores have landed.
    let mut staged = [[[0u8; BLOCK_LEN]; 2]; LANES];
    for (msg, st) in msgs.iter().zip(&mut staged) {
        let straddle = msg.head.len() / BLOCK_LEN * BLOCK_LEN;
        if straddle < (blocks - 1) * BLOCK_LEN && msg.whole(straddle).is_none() {
            msg.gather_into(straddle, &mut st[0]);
        }
        let last = (blocks - 1) * BLOCK_LEN;
        if msg.whole(last).is_none() {
            msg.gather_into(last, &mut st[1]);
        }
    }
    let mut h = load_cvs(cvs);
    for k in 0..blocks {
        let start = k * BLOCK_LEN;
        let mut lo = [_mm256_setzero_si256(); LANES];
        let mut hi = [_mm256_setzero_si256(); LANES];
        for l in 0..LANES {
            let row = match msgs[l].whole(start) {
                Some(w) => w,
                None => &staged[l][usize::from(k + 1 == blocks)],
            };
            let p = row.as_ptr();
            // SAFETY: `row` has at least the 64 bytes the two unaligned 256-bit loads read
            // (`whole` returns at least 64, a staged block is exactly 64).
            unsafe {
                lo[l] = _mm256_loadu_si256(p.cast());
                hi[l] = _mm256_loadu_si256(p.add(32).cast());
            }
        }
        let (m_lo, m_hi) = (transpose8(lo), transpose8(hi));
        let m: [__m256i; 16] = core::array::from_fn(|w| if w < 8 { m_lo[w] } else { m_hi[w - 8] });
        // Only the last block's counter differs between lanes; see `avx512::hash16_multi_permute`.
        let (t0, f0) = if k + 1 == blocks {
            // SAFETY: `lens` is a `[u32; 8]`, exactly the 32 bytes an unaligned 256-bit load
            // reads.
            let t0 = unsafe { _mm256_loadu_si256(lens.as_ptr().cast()) };
            (t0, _mm256_set1_epi32(-1))
        } else {
            let t0 = _mm256_set1_epi32((start + BLOCK_LEN) as u32 as i32);
            (t0, _mm256_setzero_si256())
        };
        compress!(ops; h, m, t0, f0);
    }
    store_digests(h, out);
}

/// [`super::hash_multi_blocks`] eight messages of equal block count per kernel call.
///
/// # Safety
///
/// The CPU must support AVX2 ([`available`]).
#[target_feature(enable = "avx2")]
pub(super) unsafe fn hash_all_multi<'a>(
    count: usize,
    job: impl FnMut(usize) -> (&'a [u32; 8], Parts<'a>),
    out: impl FnMut(usize, [u8; 32]),
) {
    schedule::<LANES>(count, job, out, |cvs, msgs, blocks, digests| hash8_multi(cvs, msgs, blocks, digests));
}
