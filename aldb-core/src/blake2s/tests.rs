//! Every backend against `blake2s_simd`, on random and edge-case inputs; and the kernel
//! benchmarks (ignored by default).

use super::schedule::WINDOW;
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
            let len = if i % 2 == 0 { i / 2 % 65 } else { rng.random_range(0..=64) };
            let msg = (0..len).map(|_| rng.random()).collect();
            Case { personal, salt, cv: chaining_value(&personal, &salt), msg }
        })
        .collect()
}

/// The reference digest.
fn reference(c: &Case) -> [u8; 32] {
    *blake2s_simd::Params::new().hash_length(32).personal(&c.personal).salt(&c.salt).hash(&c.msg).as_array()
}

/// Runs one implementation of `hash_single_blocks` over `cases` and checks every digest and
/// that each index is reported exactly once.
fn check<'a>(
    cases: &'a [Case],
    run: impl FnOnce(usize, &mut dyn FnMut(usize) -> (&'a [u32; 8], &'a [u8]), &mut dyn FnMut(usize, [u8; 32])),
) {
    let mut got = vec![None; cases.len()];
    run(cases.len(), &mut |i| (&cases[i].cv, &cases[i].msg[..]), &mut |i, d| {
        assert!(got[i].is_none(), "index {i} reported twice");
        got[i] = Some(d);
    });
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
        0x50, 0x8C, 0x5E, 0x8C, 0x32, 0x7C, 0x14, 0xE2, 0xE1, 0xA7, 0x2B, 0xA3, 0x4E, 0xEB, 0x45, 0x2F, 0x37, 0x45,
        0x8B, 0x20, 0x9E, 0xD6, 0x3A, 0x29, 0x4D, 0x99, 0x9B, 0x4C, 0x86, 0x67, 0x59, 0x82,
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
        check(&cases(n, k as u64), |n, job, out| hash_single_blocks(n, job, out));
    }
}

#[test]
fn portable_matches_reference() {
    for (k, n) in COUNTS.into_iter().enumerate() {
        check(&cases(n, 100 + k as u64), |n, job, out| portable::hash_all(n, job, out));
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn avx512_matches_reference() {
    if !avx512::available() {
        eprintln!("skipped: this CPU lacks AVX-512F");
        return;
    }
    for (k, n) in COUNTS.into_iter().enumerate() {
        // SAFETY: `available` confirmed AVX-512F.
        check(&cases(n, 200 + k as u64), |n, job, out| unsafe { avx512::hash_all(n, job, out) });
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn avx2_matches_reference() {
    if !avx2::available() {
        eprintln!("skipped: this CPU lacks AVX2");
        return;
    }
    for (k, n) in COUNTS.into_iter().enumerate() {
        // SAFETY: `available` confirmed AVX2.
        check(&cases(n, 300 + k as u64), |n, job, out| unsafe { avx2::hash_all(n, job, out) });
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
                *p.hash_length(32).personal(&personal).salt(&salt).hash(m).as_array()
            })
            .collect();
        for same_ref in [true, false] {
            let lane_cv = |i: usize| if same_ref { &cv } else { &copies[i % 3] };
            let job = |i: usize| (lane_cv(i), &msgs[i][..]);
            if avx512::available() {
                let mut got = vec![[0u8; 32]; msgs.len()];
                // SAFETY: `available` confirmed AVX-512F.
                unsafe { avx512::hash_all(msgs.len(), job, |i, d| got[i] = d) };
                assert_eq!(got, want, "avx512, depth {depth}, same_ref {same_ref}");
            }
            if avx2::available() {
                let mut got = vec![[0u8; 32]; msgs.len()];
                // SAFETY: `available` confirmed AVX2.
                unsafe { avx2::hash_all(msgs.len(), job, |i, d| got[i] = d) };
                assert_eq!(got, want, "avx2, depth {depth}, same_ref {same_ref}");
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
            MultiCase { personal, cv: chaining_value(&personal, &[0; 8]), msg, split }
        })
        .collect()
}

/// Runs one implementation of `hash_multi_blocks` over `cases` and checks every digest against
/// `blake2s_simd` and that each index is reported exactly once.
fn check_multi<'a>(
    cases: &'a [MultiCase],
    run: impl FnOnce(usize, &mut dyn FnMut(usize) -> (&'a [u32; 8], Parts<'a>), &mut dyn FnMut(usize, [u8; 32])),
) {
    let mut got = vec![None; cases.len()];
    run(cases.len(), &mut |i| (&cases[i].cv, cases[i].parts()), &mut |i, d| {
        assert!(got[i].is_none(), "index {i} reported twice");
        got[i] = Some(d);
    });
    for (i, (c, g)) in cases.iter().zip(&got).enumerate() {
        let want = *blake2s_simd::Params::new().hash_length(32).personal(&c.personal).hash(&c.msg).as_array();
        assert_eq!(*g, Some(want), "case {i}, length {}, split {}", c.msg.len(), c.split);
    }
}

#[test]
fn multi_dispatch_matches_reference() {
    for (k, n) in COUNTS.into_iter().enumerate() {
        check_multi(&multi_cases(n, 400 + k as u64), |n, job, out| hash_multi_blocks(n, job, out));
    }
}

#[test]
fn multi_portable_matches_reference() {
    for (k, n) in COUNTS.into_iter().enumerate() {
        check_multi(&multi_cases(n, 500 + k as u64), |n, job, out| portable::hash_all_multi(n, job, out));
    }
}

/// Every AVX-512 row loading this CPU runs: the detected one and, below `Permute`,
/// `Masked` as well.
#[cfg(target_arch = "x86_64")]
fn avx512_loads() -> Vec<avx512::RowLoads> {
    match avx512::multi_loads() {
        Some(avx512::RowLoads::Permute) => {
            vec![avx512::RowLoads::Permute, avx512::RowLoads::Masked]
        }
        Some(avx512::RowLoads::Masked) => vec![avx512::RowLoads::Masked],
        None => Vec::new(),
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn multi_avx512_matches_reference() {
    let all = avx512_loads();
    if all.len() < 2 {
        eprintln!("only {all:?}: this CPU lacks some of AVX-512F, AVX-512BW, AVX-512VBMI");
    }
    for loads in all {
        for (k, n) in COUNTS.into_iter().enumerate() {
            // SAFETY: `avx512_loads` offers only what `multi_loads` detected.
            check_multi(&multi_cases(n, 600 + k as u64), |n, job, out| unsafe {
                avx512::hash_all_multi(n, job, out, loads)
            });
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn multi_avx2_matches_reference() {
    if !avx2::available() {
        eprintln!("skipped: this CPU lacks AVX2");
        return;
    }
    for (k, n) in COUNTS.into_iter().enumerate() {
        // SAFETY: `available` confirmed AVX2.
        check_multi(&multi_cases(n, 700 + k as u64), |n, job, out| unsafe { avx2::hash_all_multi(n, job, out) });
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
                let personal = if i % 3 == 0 { *b"aldbacct" } else { rng.random() };
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
        for loads in avx512_loads() {
            // SAFETY: `avx512_loads` offers only what `multi_loads` detected.
            check_multi(&cases, |n, job, out| unsafe { avx512::hash_all_multi(n, job, out, loads) });
        }
        #[cfg(target_arch = "x86_64")]
        if avx2::available() {
            // SAFETY: `available` confirmed AVX2.
            check_multi(&cases, |n, job, out| unsafe { avx2::hash_all_multi(n, job, out) });
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
            cases.push(MultiCase { personal, cv: chaining_value(&personal, &[0; 8]), msg: msg.clone(), split });
        }
    }
    check_multi(&cases, |n, job, out| portable::hash_all_multi(n, job, out));
    #[cfg(target_arch = "x86_64")]
    for loads in avx512_loads() {
        // SAFETY: `avx512_loads` offers only what `multi_loads` detected.
        check_multi(&cases, |n, job, out| unsafe { avx512::hash_all_multi(n, job, out, loads) });
    }
    #[cfg(target_arch = "x86_64")]
    if avx2::available() {
        // SAFETY: `available` confirmed AVX2.
        check_multi(&cases, |n, job, out| unsafe { avx2::hash_all_multi(n, job, out) });
    }
}

/// The final JSON line of a kernel benchmark: per path, the minimum and median nanoseconds per
/// message over all timed chunks.
fn bench_json(bench: &str, unit: &str, results: &[(String, f64, f64)]) -> String {
    let paths: Vec<String> = results
        .iter()
        .map(|(name, min, median)| format!("{{\"path\":\"{name}\",\"min\":{min:.3},\"median\":{median:.3}}}"))
        .collect();
    format!("{{\"bench\":\"{bench}\",\"unit\":\"{unit}\",\"paths\":[{}]}}", paths.join(","))
}

/// Throughput of every path on one million 64-byte messages (the size of a branch
/// preimage). Run with
/// `cargo test --release -p aldb-core --lib blake2s_avx512::tests::bench -- --ignored --nocapture`.
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
    println!("config: {N} messages of 64 bytes, chunks of {CHUNK}, 3 passes, seed 1");
    let mut results = Vec::new();
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
        println!("{name:<40} min {:6.2}  median {:6.2} ns/hash", ns[0], ns[ns.len() / 2]);
        results.push((name.to_string(), ns[0], ns[ns.len() / 2]));
    };

    #[cfg(target_arch = "x86_64")]
    if avx512::available() {
        time("avx512 x16, one chaining value", &mut |m, s, _| {
            // SAFETY: `available` confirmed AVX-512F.
            unsafe { avx512::hash_all(m.len(), |i| (&cv, &m[i][..]), |i, d| s[i] = d) }
        });
        // Distinct chaining values in neighbouring lanes force the transpose path.
        let cvs: Vec<[u32; 8]> = (0..=255u8).map(|d| chaining_value(&personal, &[d, 0, 0, 0, 0, 0, 0, 0])).collect();
        time("avx512 x16, per-lane chaining values", &mut |m, s, base| {
            let job = |i: usize| (&cvs[(base + i) % 256], &m[i][..]);
            // SAFETY: `available` confirmed AVX-512F.
            unsafe { avx512::hash_all(m.len(), job, |i, d| s[i] = d) }
        });
    }
    #[cfg(target_arch = "x86_64")]
    if avx2::available() {
        time("avx2 x8, one chaining value", &mut |m, s, _| {
            // SAFETY: `available` confirmed AVX2.
            unsafe { avx2::hash_all(m.len(), |i| (&cv, &m[i][..]), |i, d| s[i] = d) }
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
    println!("{}", bench_json("blake2s_single_block", "ns/hash", &results));
}

/// Account value hashing on every path: 65536 preimages of a 49-byte header and 165 bytes of
/// data (an SPL token account: 214 bytes, four blocks), hashed in batches of 1024 as the
/// engine's worker threads do. Run with
/// `cargo test --release -p aldb-core --lib blake2s_avx512::tests::bench_accounts -- --ignored --nocapture`.
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
    let headers: Vec<[u8; HEADER]> = (0..N).map(|_| core::array::from_fn(|_| rng.random())).collect();
    let datas: Vec<Vec<u8>> = (0..N).map(|_| (0..165).map(|_| rng.random()).collect()).collect();
    let personal = *b"aldbacct";
    let cv = chaining_value(&personal, &[0; 8]);
    let params = {
        let mut p = blake2s_simd::Params::new();
        p.hash_length(32).personal(&personal);
        p
    };
    let mut sink = vec![[0u8; 32]; N];

    type Path<'a> = &'a mut dyn FnMut(&[[u8; HEADER]], &[Vec<u8>], &mut [[u8; 32]]);
    println!("config: {N} accounts of {HEADER} + 165 bytes, batches of {BATCH}, 10 passes, seed 2");
    let mut results = Vec::new();
    let mut time = |name: &str, f: Path<'_>| {
        let mut ns = Vec::new();
        for _ in 0..10 {
            for ((h, d), s) in headers.chunks(BATCH).zip(datas.chunks(BATCH)).zip(sink.chunks_mut(BATCH)) {
                let t = Instant::now();
                f(black_box(h), black_box(d), black_box(s));
                ns.push(t.elapsed().as_secs_f64() * 1e9 / h.len() as f64);
            }
        }
        ns.sort_by(f64::total_cmp);
        println!("{name:<34} min {:6.2}  median {:6.2} ns/account", ns[0], ns[ns.len() / 2]);
        results.push((name.to_string(), ns[0], ns[ns.len() / 2]));
    };
    fn parts<'a>(h: &'a [[u8; HEADER]], d: &'a [Vec<u8>], i: usize) -> Parts<'a> {
        Parts { head: &h[i], tail: &d[i] }
    }

    #[cfg(target_arch = "x86_64")]
    for loads in avx512_loads() {
        time(&format!("avx512 x16 multi-block, {loads:?}"), &mut |h, d, s| {
            let job = |i| (&cv, parts(h, d, i));
            // SAFETY: `avx512_loads` offers only what `multi_loads` detected.
            unsafe { avx512::hash_all_multi(h.len(), job, |i, x| s[i] = x, loads) }
        });
    }
    #[cfg(target_arch = "x86_64")]
    if avx2::available() {
        time("avx2 x8 multi-block", &mut |h, d, s| {
            // SAFETY: `available` confirmed AVX2.
            unsafe { avx2::hash_all_multi(h.len(), |i| (&cv, parts(h, d, i)), |i, x| s[i] = x) }
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
            jobs.extend((base..base + outs.len()).map(|i| HashManyJob::new(&params, &buf[offsets[i]..offsets[i + 1]])));
            hash_many(jobs.iter_mut());
            for (o, j) in outs.iter_mut().zip(&jobs) {
                *o = *j.to_hash().as_array();
            }
        }
    });
    time("portable scalar multi-block", &mut |h, d, s| {
        portable::hash_all_multi(h.len(), |i| (&cv, parts(h, d, i)), |i, x| s[i] = x)
    });
    println!("{}", bench_json("blake2s_accounts", "ns/account", &results));
}
