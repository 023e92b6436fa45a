//! The BLAKE2s compression function (RFC 7693 section 3.2) written once for every vector width.
//!
//! A vector kernel holds one lane per message: state word `i` of all lanes is one vector, message
//! word `j` of all lanes another. The algorithm is then the scalar one with each `u32` operation
//! replaced by its vector form, so the AVX-512 and AVX2 kernels differ only in those few
//! operations. Each backend defines them in a macro named `ops` (by convention) and hands it to
//! [`compress!`]:
//!
//! - `ops!(splat x)`: a vector with the `u32` `x` in every lane;
//! - `ops!(add a, b)`, `ops!(xor a, b)`: lane-wise wrapping addition and XOR;
//! - `ops!(xor3 a, b, c)`: `a ^ b ^ c`;
//! - `ops!(ror x, n)`: every lane rotated right by `n`, one of 16, 12, 8 and 7, given as a
//!   literal so that a backend can pick an instruction per distance (AVX2 has no rotate).
//!
//! These are macros rather than functions or a trait because a `#[target_feature]` function
//! cannot be forced inline and the compiler's inliner gives up on code this size: a call per G,
//! with the state spilled around it, was measured almost three times slower. Macros expand to
//! straight-line intrinsics inside each kernel, exactly as if written out by hand, and every state
//! and message index is a compile-time constant, so the state stays in registers (a run-time loop
//! over `SIGMA` compiled to state kept in memory and indexed through the table).

/// Four G mixing functions (RFC 7693 section 3.1) on disjoint state words, interleaved step by
/// step, each operating on every lane.
///
/// Each G is one long dependency chain; the four of a half-round are independent, and writing
/// their steps side by side hands the core that parallelism directly.
macro_rules! g4 {
    ($ops:ident; $v:ident; $(($a:literal, $b:literal, $c:literal, $d:literal, $x:expr, $y:expr)),*) => {
        // `(a + x) + b`: `b` is the word the previous step produced last, so adding it last keeps
        // the message addition off the dependency chain.
        $( $v[$a] = $ops!(add $ops!(add $v[$a], $x), $v[$b]); )*
        $( $v[$d] = $ops!(ror $ops!(xor $v[$d], $v[$a]), 16); )*
        $( $v[$c] = $ops!(add $v[$c], $v[$d]); )*
        $( $v[$b] = $ops!(ror $ops!(xor $v[$b], $v[$c]), 12); )*
        $( $v[$a] = $ops!(add $ops!(add $v[$a], $y), $v[$b]); )*
        $( $v[$d] = $ops!(ror $ops!(xor $v[$d], $v[$a]), 8); )*
        $( $v[$c] = $ops!(add $v[$c], $v[$d]); )*
        $( $v[$b] = $ops!(ror $ops!(xor $v[$b], $v[$c]), 7); )*
    };
}

/// One full round `$r`: the four column Gs, then the four diagonal Gs, with the message words
/// `SIGMA[$r]` picks.
macro_rules! round {
    ($ops:ident; $v:ident, $m:ident, $r:literal) => {{
        const S: [usize; 16] = SIGMA[$r];
        g4!($ops; $v;
            (0, 4, 8, 12, $m[S[0]], $m[S[1]]),
            (1, 5, 9, 13, $m[S[2]], $m[S[3]]),
            (2, 6, 10, 14, $m[S[4]], $m[S[5]]),
            (3, 7, 11, 15, $m[S[6]], $m[S[7]]));
        g4!($ops; $v;
            (0, 5, 10, 15, $m[S[8]], $m[S[9]]),
            (1, 6, 11, 12, $m[S[10]], $m[S[11]]),
            (2, 7, 8, 13, $m[S[12]], $m[S[13]]),
            (3, 4, 9, 14, $m[S[14]], $m[S[15]]));
    }};
}

/// Compresses one block in every lane: `$h` (a mutable `[V; 8]`, one vector per chaining-value
/// word) is updated in place from the sixteen message-word vectors `$m`, the per-lane byte
/// counter `$t0` (its high half `t1` is 0: lanes hash less than 4 GiB) and the final-block flag
/// `$f0` (all ones on the last block, else zero; `f1`, the last-node flag, stays 0).
///
/// Expects `IV` and `SIGMA` in scope at the call site.
macro_rules! compress {
    ($ops:ident; $h:ident, $m:ident, $t0:expr, $f0:expr) => {{
        let iv = |i: usize| $ops!(splat IV[i]);
        let mut v = [
            $h[0],
            $h[1],
            $h[2],
            $h[3],
            $h[4],
            $h[5],
            $h[6],
            $h[7],
            iv(0),
            iv(1),
            iv(2),
            iv(3),
            $ops!(xor iv(4), $t0),
            iv(5),
            $ops!(xor iv(6), $f0),
            iv(7),
        ];
        round!($ops; v, $m, 0);
        round!($ops; v, $m, 1);
        round!($ops; v, $m, 2);
        round!($ops; v, $m, 3);
        round!($ops; v, $m, 4);
        round!($ops; v, $m, 5);
        round!($ops; v, $m, 6);
        round!($ops; v, $m, 7);
        round!($ops; v, $m, 8);
        round!($ops; v, $m, 9);
        for w in 0..8 {
            $h[w] = $ops!(xor3 $h[w], v[w], v[w + 8]);
        }
    }};
}
