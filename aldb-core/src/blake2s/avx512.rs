use core::arch::x86_64::*;
use std::sync::LazyLock;

use super::schedule::schedule;
use super::{BLOCK_LEN, IV, Parts, SIGMA, check_len, portable};

/// Messages per kernel call: one per 32-bit lane of a 512-bit vector.
pub(super) const LANES: usize = 16;

/// Whether the CPU runs the kernel (it needs only AVX-512F), detected once.
static AVAILABLE: LazyLock<bool> = LazyLock::new(|| is_x86_feature_detected!("avx512f"));

/// Whether [`hash_all`] and [`hash16`] may be called on this CPU.
pub(super) fn available() -> bool {
    *AVAILABLE
}

/// The lane operations [`compress!`] is written in, on sixteen 32-bit lanes.
macro_rules! ops {
    (splat $x:expr) => {
        _mm512_set1_epi32($x as i32)
    };
    (add $a:expr, $b:expr) => {
        _mm512_add_epi32($a, $b)
    };
    (xor $a:expr, $b:expr) => {
        _mm512_xor_si512($a, $b)
    };
    // 0x96 is the truth table of a three-way XOR: one instruction.
    (xor3 $a:expr, $b:expr, $c:expr) => {
        _mm512_ternarylogic_epi32::<0x96>($a, $b, $c)
    };
    (ror $x:expr, $n:literal) => {
        _mm512_ror_epi32::<$n>($x)
    };
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
    let (lo, hi) = unsafe { (_mm256_loadu_si256(lo.as_ptr().cast()), _mm256_loadu_si256(hi.as_ptr().cast())) };
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi)
}

/// The chaining values of sixteen lanes, one vector per word.
#[target_feature(enable = "avx512f")]
#[inline]
fn load_cvs(cvs: &[&[u32; 8]; LANES]) -> [__m512i; 8] {
    // Lanes usually share one domain (one chaining value); then a broadcast beats a transpose.
    if cvs.iter().all(|c| core::ptr::eq(*c, cvs[0]) || **c == *cvs[0]) {
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
            _mm256_storeu_si256(hi[e].as_mut_ptr().cast(), _mm512_extracti64x4_epi64::<1>(*ye));
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
pub(super) fn hash16(cvs: &[&[u32; 8]; LANES], msgs: &[&[u8]; LANES], out: &mut [[u8; 32]; LANES]) {
    let mut rows = [_mm512_setzero_si512(); LANES];
    let mut lens = [0u32; LANES];
    for l in 0..LANES {
        let msg = msgs[l];
        check_len(msg);
        rows[l] = load_block(msg);
        lens[l] = msg.len() as u32;
    }
    let m = transpose16(rows);

    let mut h = load_cvs(cvs);
    // SAFETY: `lens` is a `[u32; 16]`, exactly the 64 bytes an unaligned 512-bit load reads.
    let t0 = unsafe { _mm512_loadu_si512(lens.as_ptr().cast()) };
    // One block, so it is the last: the final-block flag is set in every lane.
    compress!(ops; h, m, t0, _mm512_set1_epi32(-1));
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
    let t = tail.get(start.saturating_sub(head.len())..).unwrap_or_default();
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
            let (lo, hi) = unsafe { (_mm256_loadu_si256(p.cast()), _mm256_loadu_si256(p.add(n - 32).cast())) };
            (_mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi), 32)
        }
        16.. => {
            // SAFETY: `16 <= n`, so both unaligned 128-bit loads (from 0 and from `n - 16`)
            // read bytes of `part`.
            let (lo, hi) = unsafe { (_mm_loadu_si128(p.cast()), _mm_loadu_si128(p.add(n - 16).cast())) };
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
            let w = part.iter().rev().fold(0u32, |w, &b| (w << 8) | u32::from(b));
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
                compress!(ops; h, m, t0, f0);
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
        RowLoads::Masked => {
            schedule::<LANES>(count, job, out, |cvs, msgs, blocks, d| hash16_multi_masked(cvs, msgs, blocks, d))
        }
    }
}
