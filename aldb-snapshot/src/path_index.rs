//! A batch's accounts sorted by key path, newest first and one per path: how the writer finds
//! each changed leaf's new record by a merge instead of a lookup per leaf.

use std::cmp::Reverse;

use aldb_format::format::prefix_of;
use aldb_verify::spec::Hash;

use crate::batch::AccountEntry;

/// `(first 8 path bytes, path, newest first)`: sorting these orders by path, newest first, and
/// nearly every comparison is decided by the integer. The batch index is 64 bits (the tuple is
/// 48 bytes either way), so one batch may hold a full state of more than 2^32 accounts.
pub(crate) type PathEntry = (u64, Hash, Reverse<u64>);
const _: () = assert!(std::mem::size_of::<PathEntry>() == 48);

/// The sorted entries and the sort's working memory, kept so rebuilding allocates nothing.
#[derive(Clone, Debug, Default)]
pub(crate) struct PathIndex {
    sorted: Vec<PathEntry>,
    tmp: Vec<PathEntry>,
    counts: Vec<usize>,
}

impl PathIndex {
    /// Indexes `entries`: sorted by path, and of several entries for one path only the last
    /// pushed kept.
    pub(crate) fn build(&mut self, entries: &[AccountEntry]) {
        self.sorted.clear();
        self.sorted.extend(entries.iter().zip(0u64..).map(|(e, i)| (prefix_of(&e.path), e.path, Reverse(i))));
        radix_sort(&mut self.sorted, &mut self.tmp, &mut self.counts);
        self.sorted.dedup_by(|later, kept| later.1 == kept.1);
    }

    /// The index built last.
    pub(crate) fn sorted(&self) -> &[PathEntry] {
        &self.sorted
    }
}

/// Sorts by path in linear time: paths are uniformly random, so one counting pass on their top
/// 16 bits leaves a handful of entries per bin, each sorted in place. At 400k entries a
/// comparison sort spent most of its time missing the cache.
pub(crate) fn radix_sort(v: &mut Vec<PathEntry>, tmp: &mut Vec<PathEntry>, counts: &mut Vec<usize>) {
    const BITS: u32 = 16;
    if v.len() < 1 << 12 {
        v.sort_unstable();
        return;
    }
    let bin = |e: &PathEntry| (e.0 >> (64 - BITS)) as usize;
    counts.clear();
    counts.resize((1 << BITS) + 1, 0);
    for e in v.iter() {
        counts[bin(e) + 1] += 1;
    }
    for k in 1..counts.len() {
        counts[k] += counts[k - 1];
    }
    tmp.clear();
    tmp.resize(v.len(), (0, [0; 32], Reverse(0)));
    for e in v.iter() {
        let at = &mut counts[bin(e)];
        tmp[*at] = *e;
        *at += 1;
    }
    // Bin k now ends at counts[k] and starts where bin k-1 ends.
    let mut start = 0;
    for &end in &counts[..1 << BITS] {
        tmp[start..end].sort_unstable();
        start = end;
    }
    std::mem::swap(v, tmp);
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// The radix sort orders exactly as a comparison sort, across the small-input cutoff, with
    /// repeated paths (newest first) and paths sharing their first 8 bytes.
    #[test]
    fn radix_sort_matches_comparison_sort() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let (mut tmp, mut counts) = (Vec::new(), Vec::new());
        for n in [0usize, 1, 100, 4095, 4096, 50_000] {
            let mut v: Vec<PathEntry> = Vec::with_capacity(n);
            for i in 0..n as u32 {
                let mut path: Hash = rng.random();
                if i % 7 == 3 && i > 0 {
                    path = v[(i as usize) / 2].1; // an account updated twice in one batch
                } else if i % 11 == 5 && i > 0 {
                    path[..8].copy_from_slice(&v[(i as usize) / 3].1[..8]); // same 8-byte prefix
                }
                v.push((prefix_of(&path), path, Reverse(u64::from(i))));
            }
            let mut want = v.clone();
            want.sort_unstable();
            radix_sort(&mut v, &mut tmp, &mut counts);
            assert_eq!(v, want, "n = {n}");
        }
    }
}
