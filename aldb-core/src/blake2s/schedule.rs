//! Batching for the vector kernels' multi-block path: messages grouped by block count, so every
//! lane of one kernel call runs the same number of compressions.

use super::{Parts, portable};

/// Messages collected and grouped at a time by [`schedule`]: enough that a mixed batch still
/// fills most kernel calls, few enough that the jobs stay in cache.
pub(super) const WINDOW: usize = 4096;

/// The grouping key of a message: its block count, or `usize::MAX` for a message whose length
/// does not fit the kernels' 32-bit per-lane byte counter (the portable code hashes those).
fn group_key(msg: &Parts<'_>) -> usize {
    if u32::try_from(msg.len()).is_ok() { msg.blocks() } else { usize::MAX }
}

/// The batching shared by the vector implementations of [`hash_multi_blocks`].
///
/// Collects a window of jobs, orders it by block count (a stable order: by block count, then by
/// index; skipped when the whole window has one block count, the usual case), and hands `kernel`
/// up to `L` messages of equal block count at a time together with that count. A final group of
/// 2 to `L - 1` messages fills its spare lanes with copies of its first message and discards
/// their digests, since one kernel call costs less than two portable hashes; a lone message is
/// hashed with the portable code.
pub(super) fn schedule<'a, const L: usize>(
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
            let n = order[s..].iter().take(L).take_while(|o| o.0 == blocks).count();
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
