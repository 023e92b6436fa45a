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

/// Largest message this module hashes: one BLAKE2s block.
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

/// A plain, one-message-at-a-time BLAKE2s compression: the fallback, and a readable statement of
/// exactly what the vector kernel computes.
mod portable {
    use super::{BLOCK_LEN, IV, SIGMA, check_len};

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

    /// The digest of `msg` (at most 64 bytes) as the final and only block after `cv`.
    pub(super) fn hash_one(cv: &[u32; 8], msg: &[u8]) -> [u8; 32] {
        check_len(msg);
        let mut block = [0u8; BLOCK_LEN];
        block[..msg.len()].copy_from_slice(msg);
        let mut m = [0u32; 16];
        for (w, chunk) in m.iter_mut().zip(block.chunks_exact(4)) {
            *w = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        }

        let mut v = [0u32; 16];
        v[..8].copy_from_slice(cv);
        v[8..].copy_from_slice(&IV);
        // Byte counter t0 = len (t1 stays 0), final-block flag f0 = all ones (f1, the last-node
        // flag, stays 0).
        v[12] ^= msg.len() as u32;
        v[14] ^= u32::MAX;

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

        let mut digest = [0u8; 32];
        for (i, d) in digest.chunks_exact_mut(4).enumerate() {
            d.copy_from_slice(&(cv[i] ^ v[i] ^ v[i + 8]).to_le_bytes());
        }
        digest
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

    use super::{BLOCK_LEN, IV, SIGMA, check_len, portable};

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

        // Lanes usually share one domain (one chaining value); then a broadcast beats a transpose.
        let cv: [__m512i; 8] = if cvs
            .iter()
            .all(|c| core::ptr::eq(*c, cvs[0]) || **c == *cvs[0])
        {
            core::array::from_fn(|w| _mm512_set1_epi32(cvs[0][w] as i32))
        } else {
            let pairs: [__m512i; 8] = core::array::from_fn(|e| load_cv_pair(cvs[e], cvs[e + 8]));
            transpose8x16(pairs)
        };

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
}

/// The 8-lane AVX2 kernel: the same algorithm as [`x16`] at half the width, for x86_64 CPUs
/// without AVX-512. It keeps those at least as fast as `blake2s_simd::many`, which the portable
/// fallback is not.
#[cfg(target_arch = "x86_64")]
mod x8 {
    use core::arch::x86_64::*;
    use std::sync::LazyLock;

    use super::{BLOCK_LEN, IV, SIGMA, check_len, portable};

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

        let cv: [__m256i; 8] = if cvs
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
        };

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
        for (o, row) in out.iter_mut().zip(transpose8(h)) {
            // SAFETY: `o` is a live, writable `[u8; 32]`, exactly the 32 bytes an unaligned
            // 256-bit store writes.
            unsafe { _mm256_storeu_si256(o.as_mut_ptr().cast(), row) };
        }
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
}
