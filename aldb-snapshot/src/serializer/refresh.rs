//! The refresh cycle: each slot rewrites the records under one chunk of the key space that
//! predate the cycle, so that once a cycle completes every older file can be retired.

use aldb_format::format::{Ref, node_stored};

use super::Serializer;
use super::body::{Pass, Scratch};

/// Where the refresh cycle stands on one chain (each fork has its own).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RefreshState {
    cursor: u64,
    cycle_start: u32,
    oldest: u32,
}

impl Serializer {
    pub(super) fn refresh_state(&self) -> RefreshState {
        RefreshState { cursor: self.cursor, cycle_start: self.cycle_start, oldest: self.oldest }
    }

    pub(super) fn set_refresh_state(&mut self, r: RefreshState) {
        (self.cursor, self.cycle_start, self.oldest) = (r.cursor, r.cycle_start, r.oldest);
    }

    pub(super) fn advance_refresh(&mut self, seq: u32) {
        let chunks = 1u64 << self.refresh_bits.min(self.bucket_bits);
        self.cursor += 1;
        if self.cursor >= chunks {
            // Every record reachable from now on was written at or after the cycle's first file.
            self.cursor = 0;
            self.oldest = self.cycle_start;
            self.cycle_start = seq + 1;
        }
    }

    /// Asks the device for the records the refresh reads, a slot ahead.
    pub(super) fn hint_refresh(&mut self, pass: Pass, s: &mut Scratch) {
        let (chunk, rbits) = (pass.chunk, pass.rbits);
        let stale = move |r: Ref| pass.stale(r);
        // The write reads the chunk's records back: the stale account records it copies forward,
        // and the hash of every bucket and stored node it rewrites without a change of its own,
        // wherever that record is. Files are written past the page cache, so each
        // of those reads is a fault to the device unless asked for in advance; hinting only
        // the stale records, right before the copy, left 6,274 major faults and ~280 ms
        // blocked per 400k-update slot at 2^26 (BENCHMARKS.md §2). The next chunk is asked
        // for a slot ahead, so its reads have a whole slot to complete; this chunk only when
        // the last write did not (the first refreshing write, after a full one or a restart).
        s.hint.clear();
        let chunks = 1usize << rbits;
        if s.hinted != Some(chunk) {
            self.refresh_reads(chunk, rbits, &stale, &mut s.hint);
        }
        let next = (chunk + 1) % chunks;
        self.refresh_reads(next, rbits, &stale, &mut s.hint);
        s.hinted = Some(next);
        self.files.will_need(&mut s.hint);
    }

    /// Pushes to `out` the records a refresh of `chunk` reads: its buckets' stale account
    /// records (copied forward), and every bucket and stored node record of the chunk (their
    /// hashes are read back for whatever this slot does not change). A superset of the reads
    /// is harmless: it only asks the device for a few pages more.
    fn refresh_reads(&self, chunk: usize, rbits: usize, stale: &impl Fn(Ref) -> bool, out: &mut Vec<Ref>) {
        let l = usize::from(self.bucket_bits);
        let (lo, hi) = chunk_span(chunk, rbits, l);
        for b in lo..hi {
            out.extend(self.bucket_leaves.leaves(b).iter().map(|lv| lv.account()).filter(|&r| stale(r)));
            out.push(self.buckets[b]);
        }
        for d in (0..l).filter(|&d| node_stored(d, l)) {
            let (lo, hi) = chunk_span(chunk, rbits, d);
            out.extend(self.nodes[d][lo..hi].iter().copied());
        }
        out.retain(|r| !r.is_null());
    }
}

/// The prefixes of `d` bits that refresh chunk `chunk` (a prefix of `rbits` bits) rewrites: those
/// under it when `d >= rbits`, else the one it lies under.
pub(super) fn chunk_span(chunk: usize, rbits: usize, d: usize) -> (usize, usize) {
    if d >= rbits {
        (chunk << (d - rbits), (chunk + 1) << (d - rbits))
    } else {
        (chunk >> (rbits - d), (chunk >> (rbits - d)) + 1)
    }
}
