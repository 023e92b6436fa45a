//! Sixteen one-block BLAKE2s-256 hashes at once with AVX-512.
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
//! Without AVX-512 the same API runs the same kernel eight lanes wide with AVX2, and without that
//! (or off x86_64) a plain scalar compression, one message at a time. Each is chosen once per
//! process from run-time CPU feature detection.
//!
//! Account value preimages are longer (a 49-byte header then the account data: 214 bytes, four
//! blocks, for an SPL token account), so [`hash_multi_blocks`] runs the same kernels over several
//! blocks, carrying each lane's chaining value from block to block. A message comes in two parts
//! (header and data) that are never concatenated: each lane's block is loaded straight from
//! whichever part holds it, and only the block straddling the two parts, or the zero-padded last
//! block, is assembled. Every lane of one kernel call must run the same number of compressions,
//! so each batch of messages is grouped by block count first.

/// The BLAKE2s initialisation vector (RFC 7693 section 2.6), shared with SHA-256.
const IV: [u32; 8] = [
    0x6A09_E667,
    0xBB67_AE85,
    0x3C6E_F372,
    0xA54F_F53A,
    0x510E_527F,
    0x9B05_688C,
    0x1F83_D9AB,
    0x5BE0_CD19,
];

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
        if x16::available() {
            // SAFETY: `available` has checked at run time that the CPU has AVX-512F.
            unsafe { x16::hash_all(count, job, out) };
            return;
        }
        if x8::available() {
            // SAFETY: `available` has checked at run time that the CPU has AVX2.
            unsafe { x8::hash_all(count, job, out) };
            return;
        }
    }
    portable::hash_all(count, job, out);
}

/// Checks the one-block precondition shared by both implementations.
fn check_len(msg: &[u8]) {
    assert!(
        msg.len() <= BLOCK_LEN,
        "hash_single_blocks: a {}-byte message does not fit one BLAKE2s block",
        msg.len()
    );
}

/// A message given as two borrowed parts and hashed as their concatenation `head || tail`, so a
/// caller with a separately built header never copies the body next to it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Parts<'a> {
    /// The leading bytes.
    pub(crate) head: &'a [u8],
    /// The bytes after `head`.
    pub(crate) tail: &'a [u8],
}

impl Parts<'_> {
    /// Message length in bytes.
    fn len(&self) -> usize {
        // Two live slices cannot together exceed the address space, so this never overflows.
        self.head.len() + self.tail.len()
    }

    /// Compressions the message needs: one per started 64-byte block, and one for the empty
    /// message.
    fn blocks(&self) -> usize {
        self.len().div_ceil(BLOCK_LEN).max(1)
    }

    /// The message bytes from `start` on, at least 64 of them, when one part holds all of
    /// `start..start + 64`.
    fn whole(&self, start: usize) -> Option<&[u8]> {
        let part = match self.head.get(start..) {
            Some(h) if !h.is_empty() => h,
            _ => self.tail.get(start.checked_sub(self.head.len())?..)?,
        };
        (part.len() >= BLOCK_LEN).then_some(part)
    }

    /// Copies the (zero-padded) block of message bytes `start..start + 64` out of the two parts.
    fn gather(&self, start: usize) -> [u8; BLOCK_LEN] {
        let mut block = [0u8; BLOCK_LEN];
        self.gather_into(start, &mut block);
        block
    }

    /// Copies message bytes `start..start + 64` (fewer at the end) to the front of `block`,
    /// leaving the rest of it as it was.
    #[inline]
    fn gather_into(&self, start: usize, block: &mut [u8; BLOCK_LEN]) {
        let head = self.head.get(start..).unwrap_or_default();
        let h = head.len().min(BLOCK_LEN);
        block[..h].copy_from_slice(&head[..h]);
        let tail = self
            .tail
            .get(start.saturating_sub(self.head.len())..)
            .unwrap_or_default();
        let t = tail.len().min(BLOCK_LEN - h);
        block[h..h + t].copy_from_slice(&tail[..t]);
    }
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
        if let Some(loads) = x16::multi_loads() {
            // SAFETY: `multi_loads` has checked at run time that the CPU has AVX-512F and
            // AVX-512BW, and AVX-512VBMI if it chose `Permute`.
            unsafe { x16::hash_all_multi(count, job, out, loads) };
            return;
        }
        if x8::available() {
            // SAFETY: `available` has checked at run time that the CPU has AVX2.
            unsafe { x8::hash_all_multi(count, job, out) };
            return;
        }
    }
    portable::hash_all_multi(count, job, out);
}

/// Messages collected and grouped at a time by [`schedule`]: enough that a mixed batch still
/// fills most kernel calls, few enough that the jobs stay in cache.
const WINDOW: usize = 4096;

/// The grouping key of a message: its block count, or `usize::MAX` for a message whose length
/// does not fit the kernels' 32-bit per-lane byte counter (the portable code hashes those).
fn group_key(msg: &Parts<'_>) -> usize {
    if u32::try_from(msg.len()).is_ok() {
        msg.blocks()
    } else {
        usize::MAX
    }
}

/// The batching shared by the vector implementations of [`hash_multi_blocks`].
///
/// Collects a window of jobs, orders it by block count (a stable order: by block count, then by
/// index; skipped when the whole window has one block count, the usual case), and hands `kernel`
/// up to `L` messages of equal block count at a time together with that count. A final group of
/// 2 to `L - 1` messages fills its spare lanes with copies of its first message and discards
/// their digests, since one kernel call costs less than two portable hashes; a lone message is
/// hashed with the portable code.
fn schedule<'a, const L: usize>(
    count: usize,
    mut job: impl FnMut(usize) -> (&'a [u32; 8], Parts<'a>),
    mut out: impl FnMut(usize, [u8; 32]),
    mut kernel: impl FnMut(&[&'a [u32; 8]; L], &[Parts<'a>; L], usize, &mut [[u8; 32]; L]),
) {
    let mut jobs: Vec<(&'a [u32; 8], Parts<'a>)> = Vec::with_capacity(WINDOW.min(count));
    // (block count, index in the window) of every job, in the order they are hashed.
    let mut order: Vec<(usize, usize)> = Vec::with_capacity(WINDOW.min(count));
    let mut digests = [[0u8; 32]; L];
    let mut base = 0;
    while base < count {
        let end = count.min(base + WINDOW);
        jobs.clear();
        jobs.extend((base..end).map(&mut job));
        order.clear();
        order.extend(jobs.iter().enumerate().map(|(i, j)| (group_key(&j.1), i)));
        if order.windows(2).any(|w| w[0].0 != w[1].0) {
            // Indices are unique, so the unstable sort yields the stable order.
            order.sort_unstable();
        }
        let mut s = 0;
        while s < order.len() {
            let blocks = order[s].0;
            let n = order[s..]
                .iter()
                .take(L)
                .take_while(|o| o.0 == blocks)
                .count();
            let group = &order[s..s + n];
            s += n;
            if n == 1 || blocks == usize::MAX {
                for &(_, i) in group {
                    let (cv, msg) = jobs[i];
                    out(base + i, portable::hash_parts(cv, &msg));
                }
                continue;
            }
            let (cv0, msg0) = jobs[group[0].1];
            let mut cvs = [cv0; L];
            let mut msgs = [msg0; L];
            for (l, &(_, i)) in group.iter().enumerate().skip(1) {
                (cvs[l], msgs[l]) = jobs[i];
            }
            kernel(&cvs, &msgs, blocks, &mut digests);
            for (&(_, i), d) in group.iter().zip(&digests) {
                out(base + i, *d);
            }
        }
        base = end;
    }
}

/// A plain, one-message-at-a-time BLAKE2s compression: the fallback, and a readable statement of
/// exactly what the vector kernel computes.
mod portable {
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
}

/// The 16-lane AVX-512 kernel.
#[cfg(target_arch = "x86_64")]
mod x16 {
    use core::arch::x86_64::*;
    use std::sync::LazyLock;

    use super::{BLOCK_LEN, IV, Parts, SIGMA, check_len, portable, schedule};

    /// Messages per kernel call: one per 32-bit lane of a 512-bit vector.
    pub(super) const LANES: usize = 16;

    /// Whether the CPU runs the kernel (it needs only AVX-512F), detected once.
    static AVAILABLE: LazyLock<bool> = LazyLock::new(|| is_x86_feature_detected!("avx512f"));

    /// Whether [`hash_all`] and [`hash16`] may be called on this CPU.
    pub(super) fn available() -> bool {
        *AVAILABLE
    }

    /// Four G mixing functions (RFC 7693 section 3.1) on disjoint state words, interleaved step by
    /// step, each operating on sixteen lanes.
    ///
    /// Each G is one long dependency chain; the four of a half-round are independent, and
    /// writing their steps side by side hands the core that parallelism directly. It is a macro
    /// rather than a function because a `#[target_feature]` function cannot be forced inline and
    /// this one is too big for the inliner: a call per G, with the state spilled around it, was
    /// measured almost three times slower.
    macro_rules! g4 {
        ($v:ident; $(($a:literal, $b:literal, $c:literal, $d:literal, $x:expr, $y:expr)),*) => {
            // `(a + x) + b`: `b` is the word the previous step produced last, so adding it last
            // keeps the message addition off the dependency chain.
            $( $v[$a] = _mm512_add_epi32(_mm512_add_epi32($v[$a], $x), $v[$b]); )*
            $( $v[$d] = _mm512_ror_epi32::<16>(_mm512_xor_si512($v[$d], $v[$a])); )*
            $( $v[$c] = _mm512_add_epi32($v[$c], $v[$d]); )*
            $( $v[$b] = _mm512_ror_epi32::<12>(_mm512_xor_si512($v[$b], $v[$c])); )*
            $( $v[$a] = _mm512_add_epi32(_mm512_add_epi32($v[$a], $y), $v[$b]); )*
            $( $v[$d] = _mm512_ror_epi32::<8>(_mm512_xor_si512($v[$d], $v[$a])); )*
            $( $v[$c] = _mm512_add_epi32($v[$c], $v[$d]); )*
            $( $v[$b] = _mm512_ror_epi32::<7>(_mm512_xor_si512($v[$b], $v[$c])); )*
        };
    }

    /// One full round `$r`: the four column Gs, then the four diagonal Gs. Every state and message
    /// index is a compile-time constant, so the state stays in registers (a run-time loop over
    /// `SIGMA` compiled to state kept in memory and indexed through the table).
    macro_rules! round {
        ($v:ident, $m:ident, $r:literal) => {{
            const S: [usize; 16] = SIGMA[$r];
            g4!($v;
                (0, 4, 8, 12, $m[S[0]], $m[S[1]]),
                (1, 5, 9, 13, $m[S[2]], $m[S[3]]),
                (2, 6, 10, 14, $m[S[4]], $m[S[5]]),
                (3, 7, 11, 15, $m[S[6]], $m[S[7]]));
            g4!($v;
                (0, 5, 10, 15, $m[S[8]], $m[S[9]]),
                (1, 6, 11, 12, $m[S[10]], $m[S[11]]),
                (2, 7, 8, 13, $m[S[12]], $m[S[13]]),
                (3, 4, 9, 14, $m[S[14]], $m[S[15]]));
        }};
    }

    /// Transposes a 16x16 matrix of 32-bit words: row `i` of the input becomes lane `i` of every
    /// output vector. Four stages of sixteen in-register shuffles, no memory round trip.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn transpose16(r: [__m512i; 16]) -> [__m512i; 16] {
        // Interleave words of row pairs, then 64-bit pairs of row quads: afterwards `b[4q + j]`
        // holds, in its 128-bit lane `l`, word `4l + j` of rows `4q..4q + 4`.
        let mut a = [_mm512_setzero_si512(); 16];
        for p in 0..8 {
            a[2 * p] = _mm512_unpacklo_epi32(r[2 * p], r[2 * p + 1]);
            a[2 * p + 1] = _mm512_unpackhi_epi32(r[2 * p], r[2 * p + 1]);
        }
        let mut b = [_mm512_setzero_si512(); 16];
        for q in 0..4 {
            let (a0, a1, a2, a3) = (a[4 * q], a[4 * q + 1], a[4 * q + 2], a[4 * q + 3]);
            b[4 * q] = _mm512_unpacklo_epi64(a0, a2);
            b[4 * q + 1] = _mm512_unpackhi_epi64(a0, a2);
            b[4 * q + 2] = _mm512_unpacklo_epi64(a1, a3);
            b[4 * q + 3] = _mm512_unpackhi_epi64(a1, a3);
        }
        // Then a 4x4 transpose of 128-bit lanes among `b[j], b[4 + j], b[8 + j], b[12 + j]`.
        // 0x88 picks lanes (0, 2) of each source, 0xDD lanes (1, 3).
        let mut w = [_mm512_setzero_si512(); 16];
        for j in 0..4 {
            let c0 = _mm512_shuffle_i32x4::<0x88>(b[j], b[4 + j]);
            let c1 = _mm512_shuffle_i32x4::<0xDD>(b[j], b[4 + j]);
            let c2 = _mm512_shuffle_i32x4::<0x88>(b[8 + j], b[12 + j]);
            let c3 = _mm512_shuffle_i32x4::<0xDD>(b[8 + j], b[12 + j]);
            w[j] = _mm512_shuffle_i32x4::<0x88>(c0, c2);
            w[8 + j] = _mm512_shuffle_i32x4::<0xDD>(c0, c2);
            w[4 + j] = _mm512_shuffle_i32x4::<0x88>(c1, c3);
            w[12 + j] = _mm512_shuffle_i32x4::<0xDD>(c1, c3);
        }
        w
    }

    /// Transposes between "vector `w` holds word `w` of all sixteen lanes" and "vector `e` holds
    /// the eight words of lane `e` then the eight words of lane `e + 8`"; it is its own inverse.
    /// Two stages of in-lane unpacks and one two-source permute per vector.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn transpose8x16(x: [__m512i; 8]) -> [__m512i; 8] {
        let mut t = [_mm512_setzero_si512(); 8];
        for p in 0..4 {
            t[2 * p] = _mm512_unpacklo_epi32(x[2 * p], x[2 * p + 1]);
            t[2 * p + 1] = _mm512_unpackhi_epi32(x[2 * p], x[2 * p + 1]);
        }
        // `u[4h + j]`, 128-bit lane `l`: element `4l + j` of inputs `4h..4h + 4`.
        let mut u = [_mm512_setzero_si512(); 8];
        for h in 0..2 {
            let (t0, t1, t2, t3) = (t[4 * h], t[4 * h + 1], t[4 * h + 2], t[4 * h + 3]);
            u[4 * h] = _mm512_unpacklo_epi64(t0, t2);
            u[4 * h + 1] = _mm512_unpackhi_epi64(t0, t2);
            u[4 * h + 2] = _mm512_unpacklo_epi64(t1, t3);
            u[4 * h + 3] = _mm512_unpackhi_epi64(t1, t3);
        }
        // Output `4l + j` gathers 128-bit lanes `l` and `l + 2` of `u[j]` and `u[4 + j]`.
        let lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
        let hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
        let mut y = [_mm512_setzero_si512(); 8];
        for j in 0..4 {
            y[j] = _mm512_permutex2var_epi64(u[j], lo, u[4 + j]);
            y[4 + j] = _mm512_permutex2var_epi64(u[j], hi, u[4 + j]);
        }
        y
    }

    /// Loads a message of at most 64 bytes as one zero-padded block.
    ///
    /// Full blocks (branch and leaf preimages) and 32-byte keys take plain loads; other lengths
    /// go through a zeroed stack copy. A byte-masked load (AVX-512BW `vmovdqu8` with a zeroing
    /// mask) would handle every length in one instruction without reading past the message, but
    /// in this kernel it made every call twice as slow on AMD Zen 5, even with an all-ones mask.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn load_block(msg: &[u8]) -> __m512i {
        match msg.len() {
            // SAFETY: `msg` has exactly the 64 bytes the unaligned 512-bit load reads.
            BLOCK_LEN => unsafe { _mm512_loadu_si512(msg.as_ptr().cast()) },
            32 => {
                // SAFETY: `msg` has exactly the 32 bytes the unaligned 256-bit load reads.
                let half = unsafe { _mm256_loadu_si256(msg.as_ptr().cast()) };
                _mm512_zextsi256_si512(half)
            }
            len => {
                let mut block = [0u8; BLOCK_LEN];
                block[..len].copy_from_slice(msg);
                // SAFETY: `block` is a live `[u8; 64]`, exactly the 64 bytes the load reads.
                unsafe { _mm512_loadu_si512(block.as_ptr().cast()) }
            }
        }
    }

    /// Loads the chaining values of lanes `e` and `e + 8` into one vector.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn load_cv_pair(lo: &[u32; 8], hi: &[u32; 8]) -> __m512i {
        // SAFETY: each pointer is to a live `[u32; 8]`, exactly the 32 bytes an unaligned 256-bit
        // load reads.
        let (lo, hi) = unsafe {
            (
                _mm256_loadu_si256(lo.as_ptr().cast()),
                _mm256_loadu_si256(hi.as_ptr().cast()),
            )
        };
        _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi)
    }

    /// The chaining values of sixteen lanes, one vector per word.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn load_cvs(cvs: &[&[u32; 8]; LANES]) -> [__m512i; 8] {
        // Lanes usually share one domain (one chaining value); then a broadcast beats a transpose.
        if cvs
            .iter()
            .all(|c| core::ptr::eq(*c, cvs[0]) || **c == *cvs[0])
        {
            core::array::from_fn(|w| _mm512_set1_epi32(cvs[0][w] as i32))
        } else {
            let pairs: [__m512i; 8] = core::array::from_fn(|e| load_cv_pair(cvs[e], cvs[e + 8]));
            transpose8x16(pairs)
        }
    }

    /// Writes the final chaining values `h` (one vector per word) out as sixteen digests.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn store_digests(h: [__m512i; 8], out: &mut [[u8; 32]; LANES]) {
        let y = transpose8x16(h);
        for (e, ye) in y.iter().enumerate() {
            let (lo, hi) = out.split_at_mut(8);
            // SAFETY: `lo[e]` and `hi[e]` are live, writable `[u8; 32]`s, exactly the 32 bytes an
            // unaligned 256-bit store writes.
            unsafe {
                _mm256_storeu_si256(lo[e].as_mut_ptr().cast(), _mm512_castsi512_si256(*ye));
                _mm256_storeu_si256(
                    hi[e].as_mut_ptr().cast(),
                    _mm512_extracti64x4_epi64::<1>(*ye),
                );
            }
        }
    }

    /// Compresses sixteen one-block messages: lane `l` hashes `msgs[l]` (at most 64 bytes) from
    /// chaining value `cvs[l]`, and its digest goes to `out[l]`.
    ///
    /// # Panics
    ///
    /// If a message is longer than 64 bytes.
    #[target_feature(enable = "avx512f")]
    pub(super) fn hash16(
        cvs: &[&[u32; 8]; LANES],
        msgs: &[&[u8]; LANES],
        out: &mut [[u8; 32]; LANES],
    ) {
        let mut rows = [_mm512_setzero_si512(); LANES];
        let mut lens = [0u32; LANES];
        for l in 0..LANES {
            let msg = msgs[l];
            check_len(msg);
            rows[l] = load_block(msg);
            lens[l] = msg.len() as u32;
        }
        let m = transpose16(rows);

        let cv = load_cvs(cvs);

        let iv = |i: usize| _mm512_set1_epi32(IV[i] as i32);
        // SAFETY: `lens` is a `[u32; 16]`, exactly the 64 bytes an unaligned 512-bit load reads.
        let t0 = unsafe { _mm512_loadu_si512(lens.as_ptr().cast()) };
        let mut v = [
            cv[0],
            cv[1],
            cv[2],
            cv[3],
            cv[4],
            cv[5],
            cv[6],
            cv[7],
            iv(0),
            iv(1),
            iv(2),
            iv(3),
            // Per-lane byte counter t0 = len; t1 = 0.
            _mm512_xor_si512(iv(4), t0),
            iv(5),
            // Final-block flag f0 = all ones; f1 = 0.
            _mm512_set1_epi32(!IV[6] as i32),
            iv(7),
        ];
        round!(v, m, 0);
        round!(v, m, 1);
        round!(v, m, 2);
        round!(v, m, 3);
        round!(v, m, 4);
        round!(v, m, 5);
        round!(v, m, 6);
        round!(v, m, 7);
        round!(v, m, 8);
        round!(v, m, 9);

        // 0x96 is the truth table of a three-way XOR.
        let h: [__m512i; 8] =
            core::array::from_fn(|w| _mm512_ternarylogic_epi32::<0x96>(cv[w], v[w], v[w + 8]));
        store_digests(h, out);
    }

    /// [`super::hash_single_blocks`] sixteen messages per kernel call.
    ///
    /// A final group of 2 to 15 messages fills its spare lanes with copies of its first message
    /// and discards their digests, since one kernel call costs less than two portable hashes. A
    /// single leftover message is cheaper to hash alone with the portable code.
    ///
    /// # Safety
    ///
    /// The CPU must support AVX-512F ([`available`]).
    #[target_feature(enable = "avx512f")]
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
            hash16(&cvs, &msgs, &mut digests);
            for (l, d) in digests.iter().take(n).enumerate() {
                out(start + l, *d);
            }
            start += n;
        }
    }

    /// How the multi-block kernel assembles a block that is not wholly inside one part: the
    /// straddling block and the short last one.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(super) enum RowLoads {
        /// Plain in-bounds loads and byte permutes in registers (needs AVX-512VBMI). On AMD
        /// Zen 5 a 214-byte account hash took about two thirds of the time it took with
        /// `Masked`, and about 85% of the time with the blocks copied through the stack.
        Permute,
        /// Byte-masked loads (AVX-512BW only), for AVX-512 CPUs without VBMI (Intel Skylake to
        /// Cooper Lake); far fewer instructions, but slow on Zen 5.
        Masked,
    }

    /// The multi-block row loads this CPU supports, best first, detected once; `None` without
    /// AVX-512F and AVX-512BW.
    static MULTI: LazyLock<Option<RowLoads>> = LazyLock::new(|| {
        if !*AVAILABLE || !is_x86_feature_detected!("avx512bw") {
            None
        } else if is_x86_feature_detected!("avx512vbmi") {
            Some(RowLoads::Permute)
        } else {
            Some(RowLoads::Masked)
        }
    });

    /// Whether [`hash_all_multi`] may be called on this CPU, and with which [`RowLoads`] at
    /// best.
    pub(super) fn multi_loads() -> Option<RowLoads> {
        *MULTI
    }

    /// The low `n` bits set (all 64 for `n >= 64`): a byte mask covering `n` bytes.
    #[inline]
    fn byte_mask(n: usize) -> u64 {
        if n >= 64 { u64::MAX } else { (1 << n) - 1 }
    }

    /// Loads message bytes `start..start + 64` of `msg` (zero past its end) as one block;
    /// `start` is a multiple of 64 below the message length, or 0.
    ///
    /// A block wholly inside one part is one plain load. The block straddling the two parts and
    /// the short last block use byte-masked loads, which read only the bytes their mask enables,
    /// so nothing is copied and nothing is read outside the parts.
    #[target_feature(enable = "avx512f,avx512bw")]
    #[inline]
    fn load_row_masked(msg: &Parts<'_>, start: usize) -> __m512i {
        let (head, tail) = (msg.head, msg.tail);
        if let Some(h) = head.get(start..).filter(|h| !h.is_empty()) {
            if h.len() >= BLOCK_LEN {
                // SAFETY: `h` has at least the 64 bytes the unaligned 512-bit load reads.
                return unsafe { _mm512_loadu_si512(h.as_ptr().cast()) };
            }
            let r = h.len();
            let t = tail.len().min(BLOCK_LEN - r);
            // SAFETY: the mask enables bytes `0..r`, which are `h`; masked-off bytes are not
            // accessed.
            let lo = unsafe { _mm512_maskz_loadu_epi8(byte_mask(r), h.as_ptr().cast()) };
            if t == 0 {
                return lo;
            }
            // Lane byte `j` reads `tail[j - r]`: the base is `r` bytes before `tail`, and the
            // mask enables bytes `r..r + t`.
            let base = tail.as_ptr().wrapping_sub(r);
            // SAFETY: the enabled bytes `r..r + t` of `base` are `tail[..t]`; masked-off bytes
            // (including those before `tail`) are not accessed.
            let hi = unsafe { _mm512_maskz_loadu_epi8(byte_mask(t) << r, base.cast()) };
            return _mm512_or_si512(lo, hi);
        }
        let t = tail
            .get(start.saturating_sub(head.len())..)
            .unwrap_or_default();
        if t.len() >= BLOCK_LEN {
            // SAFETY: `t` has at least the 64 bytes the unaligned 512-bit load reads.
            unsafe { _mm512_loadu_si512(t.as_ptr().cast()) }
        } else {
            // SAFETY: the mask enables bytes `0..t.len()`, which are `t`; masked-off bytes are not
            // accessed.
            unsafe { _mm512_maskz_loadu_epi8(byte_mask(t.len()), t.as_ptr().cast()) }
        }
    }

    /// Bytes `0, 1, ..., 63`: each output byte's own position, the identity permutation.
    const IOTA: [u8; 64] = {
        let mut a = [0u8; 64];
        let mut i = 0;
        while i < 64 {
            a[i] = i as u8;
            i += 1;
        }
        a
    };

    /// Little-endian `u64` of the first 8 bytes of `b`.
    #[inline]
    fn le64(b: &[u8]) -> u64 {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[..8]);
        u64::from_le_bytes(w)
    }

    /// Little-endian `u32` of the first 4 bytes of `b`.
    #[inline]
    fn le32(b: &[u8]) -> u32 {
        let mut w = [0u8; 4];
        w.copy_from_slice(&b[..4]);
        u32::from_le_bytes(w)
    }

    /// Loads bytes of `part` into a vector `v` and builds byte indices `idx` such that, for every
    /// output position `j` whose part offset `x = j + o` the caller needs, `v[idx[j]]` is
    /// `part[x]`. The needed offsets are at most 64 consecutive ones inside `part`, and
    /// `-64 < o < 64` whenever `part` is shorter than 64 bytes. Other positions of `idx` are
    /// arbitrary; the caller's zeroing mask discards them. Only bytes of `part` are read.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    #[inline]
    fn window(part: &[u8], o: isize) -> (__m512i, __m512i) {
        // SAFETY: `IOTA` is a `[u8; 64]`, exactly the 64 bytes an unaligned 512-bit load reads.
        let iota = unsafe { _mm512_loadu_si512(IOTA.as_ptr().cast()) };
        let n = part.len();
        let p = part.as_ptr();
        if n >= BLOCK_LEN {
            // The 64 bytes from `w0`, as close to `o` as the part allows, hold every needed
            // offset, and offset `x` sits at `x - w0`; `o - w0` is within `-64..64`.
            let w0 = o.clamp(0, (n - BLOCK_LEN) as isize);
            // SAFETY: `0 <= w0 <= n - 64`, so the 64 bytes the unaligned load reads are in `part`.
            let v = unsafe { _mm512_loadu_si512(p.offset(w0).cast()) };
            return (v, _mm512_add_epi8(iota, _mm512_set1_epi8((o - w0) as i8)));
        }
        // A short part is loaded whole as its first and its last `c` bytes, for the largest `c`
        // in 4, 8, 16, 32 that is at most `n`: offset `x` sits at `x` below `c` and at
        // `x + 2c - n` from there on.
        let x = _mm512_add_epi8(iota, _mm512_set1_epi8(o as i8));
        let (v, c) = match n {
            32.. => {
                // SAFETY: `32 <= n`, so both unaligned 256-bit loads (from 0 and from `n - 32`)
                // read bytes of `part`.
                let (lo, hi) = unsafe {
                    (
                        _mm256_loadu_si256(p.cast()),
                        _mm256_loadu_si256(p.add(n - 32).cast()),
                    )
                };
                (_mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi), 32)
            }
            16.. => {
                // SAFETY: `16 <= n`, so both unaligned 128-bit loads (from 0 and from `n - 16`)
                // read bytes of `part`.
                let (lo, hi) = unsafe {
                    (
                        _mm_loadu_si128(p.cast()),
                        _mm_loadu_si128(p.add(n - 16).cast()),
                    )
                };
                (_mm512_zextsi256_si512(_mm256_set_m128i(hi, lo)), 16)
            }
            8.. => {
                let (lo, hi) = (le64(part), le64(&part[n - 8..]));
                let v = _mm_set_epi64x(hi as i64, lo as i64);
                (_mm512_zextsi128_si512(v), 8)
            }
            4.. => {
                let (lo, hi) = (le32(part), le32(&part[n - 4..]));
                let v = _mm_set_epi32(0, 0, hi as i32, lo as i32);
                (_mm512_zextsi128_si512(v), 4)
            }
            _ => {
                // One to three bytes (or none): in place, no second copy.
                let w = part
                    .iter()
                    .rev()
                    .fold(0u32, |w, &b| (w << 8) | u32::from(b));
                let v = _mm512_zextsi128_si512(_mm_cvtsi32_si128(w as i32));
                return (v, x);
            }
        };
        let upper = _mm512_cmpge_epi8_mask(x, _mm512_set1_epi8(c as i8));
        let jump = _mm512_set1_epi8((2 * c - n) as i8);
        (v, _mm512_mask_add_epi8(x, upper, x, jump))
    }

    /// [`load_row_masked`] without byte-masked memory loads: every load is a plain in-bounds
    /// load of one part, and the block is assembled in registers with one or two byte permutes.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    #[inline]
    fn load_row_permute(msg: &Parts<'_>, start: usize) -> __m512i {
        let (head, tail) = (msg.head, msg.tail);
        if start < head.len() {
            let r = head.len() - start;
            if r >= BLOCK_LEN {
                // SAFETY: `head[start..]` has at least the 64 bytes the unaligned load reads.
                return unsafe { _mm512_loadu_si512(head.as_ptr().add(start).cast()) };
            }
            // Positions `0..r` from the head (offset `start + j`), `r..r + t` from the tail
            // (offset `j - r`).
            let t = tail.len().min(BLOCK_LEN - r);
            let (a, ia) = window(head, start as isize);
            if t == 0 {
                return _mm512_maskz_permutexvar_epi8(byte_mask(r), ia, a);
            }
            let (b, ib) = window(tail, -(r as isize));
            // Index bit 6 picks the second table, `b`.
            let ib = _mm512_or_si512(ib, _mm512_set1_epi8(64));
            let idx = _mm512_mask_blend_epi8(!byte_mask(r), ia, ib);
            return _mm512_maskz_permutex2var_epi8(byte_mask(r + t), a, idx, b);
        }
        let off = start - head.len();
        let n = tail.len().saturating_sub(off);
        if n >= BLOCK_LEN {
            // SAFETY: `tail[off..]` has at least the 64 bytes the unaligned load reads.
            return unsafe { _mm512_loadu_si512(tail.as_ptr().add(off).cast()) };
        }
        if n == 0 {
            return _mm512_setzero_si512();
        }
        let (b, ib) = window(tail, off as isize);
        _mm512_maskz_permutexvar_epi8(byte_mask(n), ib, b)
    }

    /// Defines a multi-block kernel with the given target features and row loader: it hashes
    /// sixteen messages of `blocks` blocks each, lane `l` hashing `msgs[l]` from chaining value
    /// `cvs[l]` into `out[l]`. Every message must need exactly `blocks` compressions and be
    /// shorter than 4 GiB (the per-lane byte counter is 32 bits); [`schedule`]
    /// guarantees both.
    ///
    /// A macro because the loader must be inlined, and a `#[target_feature]` function is inlined
    /// only into callers with at least its features: each loader needs its own kernel.
    macro_rules! multi_kernel {
        ($(#[$doc:meta])* $name:ident, $features:literal, $load_row:ident) => {
            $(#[$doc])*
        #[target_feature(enable = $features)]
        pub(super) fn $name(
            cvs: &[&[u32; 8]; LANES],
            msgs: &[Parts<'_>; LANES],
            blocks: usize,
            out: &mut [[u8; 32]; LANES],
        ) {
            debug_assert!(
                msgs.iter()
                    .all(|m| m.blocks() == blocks && m.len() <= u32::MAX as usize)
            );
            let lens: [u32; LANES] = core::array::from_fn(|l| msgs[l].len() as u32);
            let iv = |i: usize| _mm512_set1_epi32(IV[i] as i32);
            let mut h = load_cvs(cvs);
            for k in 0..blocks {
                let start = k * BLOCK_LEN;
                // An explicit loop, not `array::from_fn`: a closure run by `from_fn` is not inlined
                // into this `#[target_feature]` function, and the out-of-line call per row cost more
                // than the row loads themselves.
                let mut rows = [_mm512_setzero_si512(); LANES];
                for (row, msg) in rows.iter_mut().zip(msgs) {
                    *row = $load_row(msg, start);
                }
                let m = transpose16(rows);
                // All lanes share the block count, so only the last block's counter differs between
                // lanes (each message's length); before it, every lane has consumed `start + 64`.
                let (t0, f0) = if k + 1 == blocks {
                    // SAFETY: `lens` is a `[u32; 16]`, exactly the 64 bytes an unaligned 512-bit load
                    // reads.
                    let t0 = unsafe { _mm512_loadu_si512(lens.as_ptr().cast()) };
                    (t0, _mm512_set1_epi32(-1))
                } else {
                    let t0 = _mm512_set1_epi32((start + BLOCK_LEN) as u32 as i32);
                    (t0, _mm512_setzero_si512())
                };
                let mut v = [
                    h[0],
                    h[1],
                    h[2],
                    h[3],
                    h[4],
                    h[5],
                    h[6],
                    h[7],
                    iv(0),
                    iv(1),
                    iv(2),
                    iv(3),
                    _mm512_xor_si512(iv(4), t0),
                    iv(5),
                    _mm512_xor_si512(iv(6), f0),
                    iv(7),
                ];
                round!(v, m, 0);
                round!(v, m, 1);
                round!(v, m, 2);
                round!(v, m, 3);
                round!(v, m, 4);
                round!(v, m, 5);
                round!(v, m, 6);
                round!(v, m, 7);
                round!(v, m, 8);
                round!(v, m, 9);
                // 0x96: three-way XOR.
                for w in 0..8 {
                    h[w] = _mm512_ternarylogic_epi32::<0x96>(h[w], v[w], v[w + 8]);
                }
            }
            store_digests(h, out);
        }
        };
    }

    multi_kernel!(
        /// The multi-block kernel with [`RowLoads::Permute`].
        hash16_multi_permute,
        "avx512f,avx512bw,avx512vbmi",
        load_row_permute
    );
    multi_kernel!(
        /// The multi-block kernel with [`RowLoads::Masked`].
        hash16_multi_masked,
        "avx512f,avx512bw",
        load_row_masked
    );

    /// [`super::hash_multi_blocks`] sixteen messages of equal block count per kernel call,
    /// assembling straddling and short blocks as `loads` says.
    ///
    /// # Safety
    ///
    /// The CPU must support AVX-512F and AVX-512BW, and AVX-512VBMI too for
    /// [`RowLoads::Permute`]: `loads` must be [`multi_loads`] or, if that is `Permute`, `Masked`.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn hash_all_multi<'a>(
        count: usize,
        job: impl FnMut(usize) -> (&'a [u32; 8], Parts<'a>),
        out: impl FnMut(usize, [u8; 32]),
        loads: RowLoads,
    ) {
        match loads {
            RowLoads::Permute => schedule::<LANES>(count, job, out, |cvs, msgs, blocks, d| {
                // SAFETY: the caller guarantees AVX-512VBMI for `Permute`; this function's
                // features cover the rest.
                unsafe { hash16_multi_permute(cvs, msgs, blocks, d) }
            }),
            RowLoads::Masked => schedule::<LANES>(count, job, out, |cvs, msgs, blocks, d| {
                hash16_multi_masked(cvs, msgs, blocks, d)
            }),
        }
    }
}

/// The 8-lane AVX2 kernel: the same algorithm as [`x16`] at half the width, for x86_64 CPUs
/// without AVX-512. It keeps those at least as fast as `blake2s_simd::many`, which the portable
/// fallback is not.
#[cfg(target_arch = "x86_64")]
mod x8 {
    use core::arch::x86_64::*;
    use std::sync::LazyLock;

    use super::{BLOCK_LEN, IV, Parts, SIGMA, check_len, portable, schedule};

    /// Messages per kernel call: one per 32-bit lane of a 256-bit vector.
    pub(super) const LANES: usize = 8;

    /// Whether the CPU runs the kernel, detected once.
    static AVAILABLE: LazyLock<bool> = LazyLock::new(|| is_x86_feature_detected!("avx2"));

    /// Whether [`hash_all`] and [`hash8`] may be called on this CPU.
    pub(super) fn available() -> bool {
        *AVAILABLE
    }

    /// Rotates 32-bit lanes right by 16 or 8 bits with one byte shuffle (AVX2 has no rotate).
    macro_rules! ror_bytes {
        ($x:expr, 16) => {
            _mm256_shuffle_epi8(
                $x,
                _mm256_setr_epi8(
                    2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13, 2, 3, 0, 1, 6, 7, 4, 5,
                    10, 11, 8, 9, 14, 15, 12, 13,
                ),
            )
        };
        ($x:expr, 8) => {
            _mm256_shuffle_epi8(
                $x,
                _mm256_setr_epi8(
                    1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8, 13, 14, 15, 12, 1, 2, 3, 0, 5, 6, 7, 4,
                    9, 10, 11, 8, 13, 14, 15, 12,
                ),
            )
        };
    }

    /// Rotates 32-bit lanes right by 12 or 7 bits with two shifts and an OR.
    macro_rules! ror_shift {
        ($x:expr, $n:literal) => {{
            let x = $x;
            _mm256_or_si256(
                _mm256_srli_epi32::<$n>(x),
                _mm256_slli_epi32::<{ 32 - $n }>(x),
            )
        }};
    }

    /// Four G mixing functions on disjoint state words, interleaved step by step, each on eight
    /// lanes; see `x16::g4`, of which this is a copy at 256 bits.
    macro_rules! g4 {
        ($v:ident; $(($a:literal, $b:literal, $c:literal, $d:literal, $x:expr, $y:expr)),*) => {
            $( $v[$a] = _mm256_add_epi32(_mm256_add_epi32($v[$a], $x), $v[$b]); )*
            $( $v[$d] = ror_bytes!(_mm256_xor_si256($v[$d], $v[$a]), 16); )*
            $( $v[$c] = _mm256_add_epi32($v[$c], $v[$d]); )*
            $( $v[$b] = ror_shift!(_mm256_xor_si256($v[$b], $v[$c]), 12); )*
            $( $v[$a] = _mm256_add_epi32(_mm256_add_epi32($v[$a], $y), $v[$b]); )*
            $( $v[$d] = ror_bytes!(_mm256_xor_si256($v[$d], $v[$a]), 8); )*
            $( $v[$c] = _mm256_add_epi32($v[$c], $v[$d]); )*
            $( $v[$b] = ror_shift!(_mm256_xor_si256($v[$b], $v[$c]), 7); )*
        };
    }

    /// One full round `$r`, as `x16::round`.
    macro_rules! round {
        ($v:ident, $m:ident, $r:literal) => {{
            const S: [usize; 16] = SIGMA[$r];
            g4!($v;
                (0, 4, 8, 12, $m[S[0]], $m[S[1]]),
                (1, 5, 9, 13, $m[S[2]], $m[S[3]]),
                (2, 6, 10, 14, $m[S[4]], $m[S[5]]),
                (3, 7, 11, 15, $m[S[6]], $m[S[7]]));
            g4!($v;
                (0, 5, 10, 15, $m[S[8]], $m[S[9]]),
                (1, 6, 11, 12, $m[S[10]], $m[S[11]]),
                (2, 7, 8, 13, $m[S[12]], $m[S[13]]),
                (3, 4, 9, 14, $m[S[14]], $m[S[15]]));
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
            BLOCK_LEN => unsafe {
                [
                    _mm256_loadu_si256(p.cast()),
                    _mm256_loadu_si256(p.add(32).cast()),
                ]
            },
            // SAFETY: `msg` has exactly the 32 bytes the unaligned 256-bit load reads.
            32 => [
                unsafe { _mm256_loadu_si256(p.cast()) },
                _mm256_setzero_si256(),
            ],
            len => {
                let mut block = [0u8; BLOCK_LEN];
                block[..len].copy_from_slice(msg);
                let b = block.as_ptr();
                // SAFETY: `block` is a live `[u8; 64]`, exactly the 64 bytes the loads read.
                unsafe {
                    [
                        _mm256_loadu_si256(b.cast()),
                        _mm256_loadu_si256(b.add(32).cast()),
                    ]
                }
            }
        }
    }

    /// The chaining values of eight lanes, one vector per word.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn load_cvs(cvs: &[&[u32; 8]; LANES]) -> [__m256i; 8] {
        if cvs
            .iter()
            .all(|c| core::ptr::eq(*c, cvs[0]) || **c == *cvs[0])
        {
            core::array::from_fn(|w| _mm256_set1_epi32(cvs[0][w] as i32))
        } else {
            // SAFETY: each pointer is to a live `[u32; 8]`, exactly the 32 bytes an unaligned
            // 256-bit load reads.
            transpose8(core::array::from_fn(|l| unsafe {
                _mm256_loadu_si256(cvs[l].as_ptr().cast())
            }))
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
    pub(super) fn hash8(
        cvs: &[&[u32; 8]; LANES],
        msgs: &[&[u8]; LANES],
        out: &mut [[u8; 32]; LANES],
    ) {
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

        let cv = load_cvs(cvs);

        let iv = |i: usize| _mm256_set1_epi32(IV[i] as i32);
        // SAFETY: `lens` is a `[u32; 8]`, exactly the 32 bytes an unaligned 256-bit load reads.
        let t0 = unsafe { _mm256_loadu_si256(lens.as_ptr().cast()) };
        let mut v = [
            cv[0],
            cv[1],
            cv[2],
            cv[3],
            cv[4],
            cv[5],
            cv[6],
            cv[7],
            iv(0),
            iv(1),
            iv(2),
            iv(3),
            _mm256_xor_si256(iv(4), t0),
            iv(5),
            _mm256_set1_epi32(!IV[6] as i32),
            iv(7),
        ];
        round!(v, m, 0);
        round!(v, m, 1);
        round!(v, m, 2);
        round!(v, m, 3);
        round!(v, m, 4);
        round!(v, m, 5);
        round!(v, m, 6);
        round!(v, m, 7);
        round!(v, m, 8);
        round!(v, m, 9);

        let h: [__m256i; 8] =
            core::array::from_fn(|w| _mm256_xor_si256(cv[w], _mm256_xor_si256(v[w], v[w + 8])));
        store_digests(h, out);
    }

    /// [`super::hash_single_blocks`] eight messages per kernel call; a final group is padded
    /// like `x16::hash_all` pads it.
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

    /// Hashes eight messages of `blocks` blocks each, as `x16::hash16_multi` does sixteen.
    #[target_feature(enable = "avx2")]
    pub(super) fn hash8_multi(
        cvs: &[&[u32; 8]; LANES],
        msgs: &[Parts<'_>; LANES],
        blocks: usize,
        out: &mut [[u8; 32]; LANES],
    ) {
        debug_assert!(
            msgs.iter()
                .all(|m| m.blocks() == blocks && m.len() <= u32::MAX as usize)
        );
        let lens: [u32; LANES] = core::array::from_fn(|l| msgs[l].len() as u32);
        let iv = |i: usize| _mm256_set1_epi32(IV[i] as i32);
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
            let m: [__m256i; 16] =
                core::array::from_fn(|w| if w < 8 { m_lo[w] } else { m_hi[w - 8] });
            // Only the last block's counter differs between lanes; see `x16::hash16_multi`.
            let (t0, f0) = if k + 1 == blocks {
                // SAFETY: `lens` is a `[u32; 8]`, exactly the 32 bytes an unaligned 256-bit load
                // reads.
                let t0 = unsafe { _mm256_loadu_si256(lens.as_ptr().cast()) };
                (t0, _mm256_set1_epi32(-1))
            } else {
                let t0 = _mm256_set1_epi32((start + BLOCK_LEN) as u32 as i32);
                (t0, _mm256_setzero_si256())
            };
            let mut v = [
                h[0],
                h[1],
                h[2],
                h[3],
                h[4],
                h[5],
                h[6],
                h[7],
                iv(0),
                iv(1),
                iv(2),
                iv(3),
                _mm256_xor_si256(iv(4), t0),
                iv(5),
                _mm256_xor_si256(iv(6), f0),
                iv(7),
            ];
            round!(v, m, 0);
            round!(v, m, 1);
            round!(v, m, 2);
            round!(v, m, 3);
            round!(v, m, 4);
            round!(v, m, 5);
            round!(v, m, 6);
            round!(v, m, 7);
            round!(v, m, 8);
            round!(v, m, 9);
            for w in 0..8 {
                h[w] = _mm256_xor_si256(h[w], _mm256_xor_si256(v[w], v[w + 8]));
            }
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
        schedule::<LANES>(count, job, out, |cvs, msgs, blocks, digests| {
            hash8_multi(cvs, msgs, blocks, digests)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// One test case: a domain and a message.
    struct Case {
        personal: [u8; 8],
        salt: [u8; 8],
        cv: [u32; 8],
        msg: Vec<u8>,
    }

    /// `count` cases with random domains and random lengths 0..=64, all lengths covered in turn.
    fn cases(count: usize, seed: u64) -> Vec<Case> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..count)
            .map(|i| {
                let personal: [u8; 8] = rng.random();
                let salt: [u8; 8] = rng.random();
                let len = if i % 2 == 0 {
                    i / 2 % 65
                } else {
                    rng.random_range(0..=64)
                };
                let msg = (0..len).map(|_| rng.random()).collect();
                Case {
                    personal,
                    salt,
                    cv: chaining_value(&personal, &salt),
                    msg,
                }
            })
            .collect()
    }

    /// The reference digest.
    fn reference(c: &Case) -> [u8; 32] {
        *blake2s_simd::Params::new()
            .hash_length(32)
            .personal(&c.personal)
            .salt(&c.salt)
            .hash(&c.msg)
            .as_array()
    }

    /// Runs one implementation of `hash_single_blocks` over `cases` and checks every digest and
    /// that each index is reported exactly once.
    fn check<'a>(
        cases: &'a [Case],
        run: impl FnOnce(
            usize,
            &mut dyn FnMut(usize) -> (&'a [u32; 8], &'a [u8]),
            &mut dyn FnMut(usize, [u8; 32]),
        ),
    ) {
        let mut got = vec![None; cases.len()];
        run(
            cases.len(),
            &mut |i| (&cases[i].cv, &cases[i].msg[..]),
            &mut |i, d| {
                assert!(got[i].is_none(), "index {i} reported twice");
                got[i] = Some(d);
            },
        );
        for (i, (c, g)) in cases.iter().zip(&got).enumerate() {
            assert_eq!(*g, Some(reference(c)), "case {i}, length {}", c.msg.len());
        }
    }

    const COUNTS: [usize; 7] = [0, 1, 15, 16, 17, 100, 1000];

    #[test]
    fn rfc7693_abc_vector() {
        // RFC 7693 appendix B: unkeyed BLAKE2s-256("abc"), whose parameter block has zero salt
        // and personal.
        let want: [u8; 32] = [
            0x50, 0x8C, 0x5E, 0x8C, 0x32, 0x7C, 0x14, 0xE2, 0xE1, 0xA7, 0x2B, 0xA3, 0x4E, 0xEB,
            0x45, 0x2F, 0x37, 0x45, 0x8B, 0x20, 0x9E, 0xD6, 0x3A, 0x29, 0x4D, 0x99, 0x9B, 0x4C,
            0x86, 0x67, 0x59, 0x82,
        ];
        let cv = chaining_value(&[0; 8], &[0; 8]);
        assert_eq!(cv[0], IV[0] ^ 0x0101_0020);
        assert_eq!(&cv[1..], &IV[1..]);
        assert_eq!(portable::hash_one(&cv, b"abc"), want);
        let mut got = Vec::new();
        hash_single_blocks(20, |_| (&cv, &b"abc"[..]), |i, d| got.push((i, d)));
        assert_eq!(got, (0..20).map(|i| (i, want)).collect::<Vec<_>>());
    }

    #[test]
    fn dispatch_matches_reference() {
        for (k, n) in COUNTS.into_iter().enumerate() {
            check(&cases(n, k as u64), |n, job, out| {
                hash_single_blocks(n, job, out)
            });
        }
    }

    #[test]
    fn portable_matches_reference() {
        for (k, n) in COUNTS.into_iter().enumerate() {
            check(&cases(n, 100 + k as u64), |n, job, out| {
                portable::hash_all(n, job, out)
            });
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx512_matches_reference() {
        if !x16::available() {
            eprintln!("skipped: this CPU lacks AVX-512F");
            return;
        }
        for (k, n) in COUNTS.into_iter().enumerate() {
            // SAFETY: `available` confirmed AVX-512F.
            check(&cases(n, 200 + k as u64), |n, job, out| unsafe {
                x16::hash_all(n, job, out)
            });
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_matches_reference() {
        if !x8::available() {
            eprintln!("skipped: this CPU lacks AVX2");
            return;
        }
        for (k, n) in COUNTS.into_iter().enumerate() {
            // SAFETY: `available` confirmed AVX2.
            check(&cases(n, 300 + k as u64), |n, job, out| unsafe {
                x8::hash_all(n, job, out)
            });
        }
    }

    /// Lanes sharing one chaining value take the broadcast path; make sure it is as correct as
    /// the transpose path the random-domain tests take, for one reference in every lane and for
    /// equal values behind distinct references, in both kernels.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn simd_shared_chaining_value() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for depth in [0u8, 1, 200, 255] {
            let personal = *b"aldbnode";
            let salt = [depth, 0, 0, 0, 0, 0, 0, 0];
            let cv = chaining_value(&personal, &salt);
            let copies = [cv; 3];
            let msgs: Vec<[u8; 64]> = (0..40).map(|_| rng.random()).collect();
            let want: Vec<[u8; 32]> = msgs
                .iter()
                .map(|m| {
                    let mut p = blake2s_simd::Params::new();
                    *p.hash_length(32)
                        .personal(&personal)
                        .salt(&salt)
                        .hash(m)
                        .as_array()
                })
                .collect();
            for same_ref in [true, false] {
                let lane_cv = |i: usize| if same_ref { &cv } else { &copies[i % 3] };
                let job = |i: usize| (lane_cv(i), &msgs[i][..]);
                if x16::available() {
                    let mut got = vec![[0u8; 32]; msgs.len()];
                    // SAFETY: `available` confirmed AVX-512F.
                    unsafe { x16::hash_all(msgs.len(), job, |i, d| got[i] = d) };
                    assert_eq!(got, want, "x16, depth {depth}, same_ref {same_ref}");
                }
                if x8::available() {
                    let mut got = vec![[0u8; 32]; msgs.len()];
                    // SAFETY: `available` confirmed AVX2.
                    unsafe { x8::hash_all(msgs.len(), job, |i, d| got[i] = d) };
                    assert_eq!(got, want, "x8, depth {depth}, same_ref {same_ref}");
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "does not fit one BLAKE2s block")]
    fn rejects_long_message() {
        let cv = chaining_value(b"aldbleaf", &[0; 8]);
        let msg = [0u8; 65];
        hash_single_blocks(1, |_| (&cv, &msg[..]), |_, _| {});
    }

    /// One multi-block test case: a domain and a message split into two parts at `split`.
    struct MultiCase {
        personal: [u8; 8],
        cv: [u32; 8],
        msg: Vec<u8>,
        split: usize,
    }

    impl MultiCase {
        fn parts(&self) -> Parts<'_> {
            let (head, tail) = self.msg.split_at(self.split);
            Parts { head, tail }
        }
    }

    /// `count` cases with a random personal per case, random lengths in `0..=600` (every length
    /// in turn on even indices) plus a few of about 10 KB, each split at a random point (with
    /// empty heads and tails, and headers of 49 bytes like an account value's, over-represented).
    fn multi_cases(count: usize, seed: u64) -> Vec<MultiCase> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..count)
            .map(|i| {
                let personal: [u8; 8] = rng.random();
                let len = match i % 50 {
                    49 => rng.random_range(10_000..=10_300),
                    _ if i % 2 == 0 => i / 2 % 601,
                    _ => rng.random_range(0..=600),
                };
                let msg: Vec<u8> = (0..len).map(|_| rng.random()).collect();
                let split = match rng.random_range(0..5) {
                    0 => 0,
                    1 => len,
                    2 => len.min(49),
                    _ => rng.random_range(0..=len),
                };
                MultiCase {
                    personal,
                    cv: chaining_value(&personal, &[0; 8]),
                    msg,
                    split,
                }
            })
            .collect()
    }

    /// Runs one implementation of `hash_multi_blocks` over `cases` and checks every digest against
    /// `blake2s_simd` and that each index is reported exactly once.
    fn check_multi<'a>(
        cases: &'a [MultiCase],
        run: impl FnOnce(
            usize,
            &mut dyn FnMut(usize) -> (&'a [u32; 8], Parts<'a>),
            &mut dyn FnMut(usize, [u8; 32]),
        ),
    ) {
        let mut got = vec![None; cases.len()];
        run(
            cases.len(),
            &mut |i| (&cases[i].cv, cases[i].parts()),
            &mut |i, d| {
                assert!(got[i].is_none(), "index {i} reported twice");
                got[i] = Some(d);
            },
        );
        for (i, (c, g)) in cases.iter().zip(&got).enumerate() {
            let want = *blake2s_simd::Params::new()
                .hash_length(32)
                .personal(&c.personal)
                .hash(&c.msg)
                .as_array();
            assert_eq!(
                *g,
                Some(want),
                "case {i}, length {}, split {}",
                c.msg.len(),
                c.split
            );
        }
    }

    #[test]
    fn multi_dispatch_matches_reference() {
        for (k, n) in COUNTS.into_iter().enumerate() {
            check_multi(&multi_cases(n, 400 + k as u64), |n, job, out| {
                hash_multi_blocks(n, job, out)
            });
        }
    }

    #[test]
    fn multi_portable_matches_reference() {
        for (k, n) in COUNTS.into_iter().enumerate() {
            check_multi(&multi_cases(n, 500 + k as u64), |n, job, out| {
                portable::hash_all_multi(n, job, out)
            });
        }
    }

    /// Every AVX-512 row loading this CPU runs: the detected one and, below `Permute`,
    /// `Masked` as well.
    #[cfg(target_arch = "x86_64")]
    fn x16_loads() -> Vec<x16::RowLoads> {
        match x16::multi_loads() {
            Some(x16::RowLoads::Permute) => vec![x16::RowLoads::Permute, x16::RowLoads::Masked],
            Some(x16::RowLoads::Masked) => vec![x16::RowLoads::Masked],
            None => Vec::new(),
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn multi_avx512_matches_reference() {
        let all = x16_loads();
        if all.len() < 2 {
            eprintln!("only {all:?}: this CPU lacks some of AVX-512F, AVX-512BW, AVX-512VBMI");
        }
        for loads in all {
            for (k, n) in COUNTS.into_iter().enumerate() {
                // SAFETY: `x16_loads` offers only what `multi_loads` detected.
                check_multi(&multi_cases(n, 600 + k as u64), |n, job, out| unsafe {
                    x16::hash_all_multi(n, job, out, loads)
                });
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn multi_avx2_matches_reference() {
        if !x8::available() {
            eprintln!("skipped: this CPU lacks AVX2");
            return;
        }
        for (k, n) in COUNTS.into_iter().enumerate() {
            // SAFETY: `available` confirmed AVX2.
            check_multi(&multi_cases(n, 700 + k as u64), |n, job, out| unsafe {
                x8::hash_all_multi(n, job, out)
            });
        }
    }

    /// Batches where every message has the same block count (full kernel groups, no sort) and
    /// batches long enough to span several scheduling windows, on every path: every split point
    /// of the block straddling the parts, including block-aligned ones, exercises the loads.
    #[test]
    fn multi_uniform_lengths_and_windows() {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        for len in [0, 1, 63, 64, 65, 128, 214, 256, 1000] {
            let n = if len == 214 { 2 * WINDOW + 37 } else { 100 };
            let cases: Vec<MultiCase> = (0..n)
                .map(|i| {
                    let personal = if i % 3 == 0 {
                        *b"aldbacct"
                    } else {
                        rng.random()
                    };
                    MultiCase {
                        personal,
                        cv: chaining_value(&personal, &[0; 8]),
                        msg: (0..len).map(|_| rng.random()).collect(),
                        split: i % (len + 1),
                    }
                })
                .collect();
            check_multi(&cases, |n, job, out| hash_multi_blocks(n, job, out));
            check_multi(&cases, |n, job, out| portable::hash_all_multi(n, job, out));
            #[cfg(target_arch = "x86_64")]
            for loads in x16_loads() {
                // SAFETY: `x16_loads` offers only what `multi_loads` detected.
                check_multi(&cases, |n, job, out| unsafe {
                    x16::hash_all_multi(n, job, out, loads)
                });
            }
            #[cfg(target_arch = "x86_64")]
            if x8::available() {
                // SAFETY: `available` confirmed AVX2.
                check_multi(&cases, |n, job, out| unsafe {
                    x8::hash_all_multi(n, job, out)
                });
            }
        }
    }

    /// Every split point of every length up to 200 bytes, all in one mixed call per path: each
    /// size class of a short part (1-3, 4-7, 8-15, 16-31, 32-63 bytes) at every offset, on both
    /// sides of the straddling block.
    #[test]
    fn multi_every_split() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let mut cases = Vec::new();
        for len in 0..=200usize {
            let msg: Vec<u8> = (0..len).map(|_| rng.random()).collect();
            for split in 0..=len {
                let personal: [u8; 8] = rng.random();
                cases.push(MultiCase {
                    personal,
                    cv: chaining_value(&personal, &[0; 8]),
                    msg: msg.clone(),
                    split,
                });
            }
        }
        check_multi(&cases, |n, job, out| portable::hash_all_multi(n, job, out));
        #[cfg(target_arch = "x86_64")]
        for loads in x16_loads() {
            // SAFETY: `x16_loads` offers only what `multi_loads` detected.
            check_multi(&cases, |n, job, out| unsafe {
                x16::hash_all_multi(n, job, out, loads)
            });
        }
        #[cfg(target_arch = "x86_64")]
        if x8::available() {
            // SAFETY: `available` confirmed AVX2.
            check_multi(&cases, |n, job, out| unsafe {
                x8::hash_all_multi(n, job, out)
            });
        }
    }

    /// Throughput of every path on one million 64-byte messages (the size of a branch
    /// preimage). Run with
    /// `cargo test --release -p aldb-core --lib blake2s_x16::tests::bench -- --ignored --nocapture`.
    ///
    /// Each path hashes the million messages three times in chunks of 16384, and every chunk is
    /// timed on its own: the minimum and median over those 192 samples are far steadier than one
    /// total on a machine shared with other work.
    #[test]
    #[ignore = "benchmark; prints timings"]
    fn bench() {
        use std::hint::black_box;
        use std::time::Instant;

        const N: usize = 1 << 20;
        const CHUNK: usize = 1 << 14;
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let msgs: Vec<[u8; 64]> = (0..N).map(|_| rng.random()).collect();
        let personal = *b"aldbnode";
        let salt = [3, 0, 0, 0, 0, 0, 0, 0];
        let cv = chaining_value(&personal, &salt);
        let params = {
            let mut p = blake2s_simd::Params::new();
            p.hash_length(32).personal(&personal).salt(&salt);
            p
        };
        let mut sink = vec![[0u8; 32]; N];

        type Path<'a> = &'a mut dyn FnMut(&[[u8; 64]], &mut [[u8; 32]], usize);
        let mut time = |name: &str, f: Path<'_>| {
            let mut ns = Vec::new();
            for _ in 0..3 {
                for (k, (m, s)) in msgs.chunks(CHUNK).zip(sink.chunks_mut(CHUNK)).enumerate() {
                    let t = Instant::now();
                    f(black_box(m), black_box(s), k * CHUNK);
                    ns.push(t.elapsed().as_secs_f64() * 1e9 / m.len() as f64);
                }
            }
            ns.sort_by(f64::total_cmp);
            println!(
                "{name:<40} min {:6.2}  median {:6.2} ns/hash",
                ns[0],
                ns[ns.len() / 2]
            );
        };

        #[cfg(target_arch = "x86_64")]
        if x16::available() {
            time("avx512 x16, one chaining value", &mut |m, s, _| {
                // SAFETY: `available` confirmed AVX-512F.
                unsafe { x16::hash_all(m.len(), |i| (&cv, &m[i][..]), |i, d| s[i] = d) }
            });
            // Distinct chaining values in neighbouring lanes force the transpose path.
            let cvs: Vec<[u32; 8]> = (0..=255u8)
                .map(|d| chaining_value(&personal, &[d, 0, 0, 0, 0, 0, 0, 0]))
                .collect();
            time("avx512 x16, per-lane chaining values", &mut |m, s, base| {
                let job = |i: usize| (&cvs[(base + i) % 256], &m[i][..]);
                // SAFETY: `available` confirmed AVX-512F.
                unsafe { x16::hash_all(m.len(), job, |i, d| s[i] = d) }
            });
        }
        #[cfg(target_arch = "x86_64")]
        if x8::available() {
            time("avx2 x8, one chaining value", &mut |m, s, _| {
                // SAFETY: `available` confirmed AVX2.
                unsafe { x8::hash_all(m.len(), |i| (&cv, &m[i][..]), |i, d| s[i] = d) }
            });
        }
        time("blake2s_simd::many::hash_many", &mut |m, s, _| {
            use blake2s_simd::many::{HashManyJob, hash_many};
            // Groups of 64 jobs, as `multihash::hash_each` does.
            let mut jobs: Vec<HashManyJob<'_>> = Vec::with_capacity(64);
            for (chunk, outs) in m.chunks(64).zip(s.chunks_mut(64)) {
                jobs.clear();
                jobs.extend(chunk.iter().map(|x| HashManyJob::new(&params, x)));
                hash_many(jobs.iter_mut());
                for (o, j) in outs.iter_mut().zip(&jobs) {
                    *o = *j.to_hash().as_array();
                }
            }
        });
        time("portable scalar (this module)", &mut |m, s, _| {
            portable::hash_all(m.len(), |i| (&cv, &m[i][..]), |i, d| s[i] = d)
        });
        time("blake2s_simd::Params::hash", &mut |m, s, _| {
            for (x, o) in m.iter().zip(s.iter_mut()) {
                *o = *params.hash(x).as_array();
            }
        });
    }

    /// Account value hashing on every path: 65536 preimages of a 49-byte header and 165 bytes of
    /// data (an SPL token account: 214 bytes, four blocks), hashed in batches of 1024 as the
    /// engine's worker threads do. Run with
    /// `cargo test --release -p aldb-core --lib blake2s_x16::tests::bench_accounts -- --ignored --nocapture`.
    ///
    /// "concat + hash_many" is the previous account path: copy header and data into one buffer,
    /// then `blake2s_simd::many::hash_many` in groups of 64. Every batch is timed on its own, ten
    /// passes over the data; the minimum and median are steadier than a total on a shared machine.
    #[test]
    #[ignore = "benchmark; prints timings"]
    fn bench_accounts() {
        use std::hint::black_box;
        use std::time::Instant;

        const N: usize = 1 << 16;
        const BATCH: usize = 1024;
        const HEADER: usize = 49;
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let headers: Vec<[u8; HEADER]> = (0..N)
            .map(|_| core::array::from_fn(|_| rng.random()))
            .collect();
        let datas: Vec<Vec<u8>> = (0..N)
            .map(|_| (0..165).map(|_| rng.random()).collect())
            .collect();
        let personal = *b"aldbacct";
        let cv = chaining_value(&personal, &[0; 8]);
        let params = {
            let mut p = blake2s_simd::Params::new();
            p.hash_length(32).personal(&personal);
            p
        };
        let mut sink = vec![[0u8; 32]; N];

        type Path<'a> = &'a mut dyn FnMut(&[[u8; HEADER]], &[Vec<u8>], &mut [[u8; 32]]);
        let mut time = |name: &str, f: Path<'_>| {
            let mut ns = Vec::new();
            for _ in 0..10 {
                for ((h, d), s) in headers
                    .chunks(BATCH)
                    .zip(datas.chunks(BATCH))
                    .zip(sink.chunks_mut(BATCH))
                {
                    let t = Instant::now();
                    f(black_box(h), black_box(d), black_box(s));
                    ns.push(t.elapsed().as_secs_f64() * 1e9 / h.len() as f64);
                }
            }
            ns.sort_by(f64::total_cmp);
            println!(
                "{name:<34} min {:6.2}  median {:6.2} ns/account",
                ns[0],
                ns[ns.len() / 2]
            );
        };
        fn parts<'a>(h: &'a [[u8; HEADER]], d: &'a [Vec<u8>], i: usize) -> Parts<'a> {
            Parts {
                head: &h[i],
                tail: &d[i],
            }
        }

        #[cfg(target_arch = "x86_64")]
        for loads in x16_loads() {
            time(
                &format!("avx512 x16 multi-block, {loads:?}"),
                &mut |h, d, s| {
                    let job = |i| (&cv, parts(h, d, i));
                    // SAFETY: `x16_loads` offers only what `multi_loads` detected.
                    unsafe { x16::hash_all_multi(h.len(), job, |i, x| s[i] = x, loads) }
                },
            );
        }
        #[cfg(target_arch = "x86_64")]
        if x8::available() {
            time("avx2 x8 multi-block", &mut |h, d, s| {
                // SAFETY: `available` confirmed AVX2.
                unsafe { x8::hash_all_multi(h.len(), |i| (&cv, parts(h, d, i)), |i, x| s[i] = x) }
            });
        }
        time("concat + hash_many", &mut |h, d, s| {
            use blake2s_simd::many::{HashManyJob, hash_many};
            let mut buf = Vec::with_capacity(h.len() * (HEADER + 165));
            let mut offsets = Vec::with_capacity(h.len() + 1);
            for (hi, di) in h.iter().zip(d) {
                offsets.push(buf.len());
                buf.extend_from_slice(hi);
                buf.extend_from_slice(di);
            }
            offsets.push(buf.len());
            let mut jobs: Vec<HashManyJob<'_>> = Vec::with_capacity(64);
            for (g, outs) in s.chunks_mut(64).enumerate() {
                jobs.clear();
                let base = g * 64;
                jobs.extend(
                    (base..base + outs.len())
                        .map(|i| HashManyJob::new(&params, &buf[offsets[i]..offsets[i + 1]])),
                );
                hash_many(jobs.iter_mut());
                for (o, j) in outs.iter_mut().zip(&jobs) {
                    *o = *j.to_hash().as_array();
                }
            }
        });
        time("portable scalar multi-block", &mut |h, d, s| {
            portable::hash_all_multi(h.len(), |i| (&cv, parts(h, d, i)), |i, x| s[i] = x)
        });
    }
}
