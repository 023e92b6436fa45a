//! Engine layout: worker threads, shards and buckets.

use crate::error::CoreError;

/// Target mean leaves per bucket when sizing from an expected leaf count. Two keeps the per-update
/// bucket rehash at about three hashes while the prefix hashes cost 32 bytes per leaf.
pub const LEAVES_PER_BUCKET: u64 = 2;

/// The deepest bucket prefix supported: 2^32 buckets is far past any memory this runs in.
pub const MAX_BUCKET_BITS: u8 = 32;
/// The most shard bits supported.
pub const MAX_SHARD_BITS: u8 = 16;

/// How the engine lays out the key space. The root never depends on it: only speed and memory do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// Worker threads that apply and hash shards in parallel.
    pub threads: usize,
    /// The key space is split into `2^shard_bits` shards by the top path bits.
    pub shard_bits: u8,
    /// Buckets are the `2^bucket_bits` prefixes of that many bits; `shard_bits <= bucket_bits`.
    pub bucket_bits: u8,
    /// Pin worker `i` to the `i`-th CPU the creating thread may run on (modulo their count), so
    /// the scheduler never queues two workers on one CPU while another idles (`affinity.rs`).
    /// Off by default: a process that places its own threads on cores decides this itself.
    pub pin_workers: bool,
}

impl Config {
    /// A layout for about `expected_leaves` leaves on `threads` workers.
    pub fn for_leaves(expected_leaves: u64, threads: usize) -> Self {
        Self::for_leaves_per_bucket(expected_leaves, threads, LEAVES_PER_BUCKET)
    }

    /// [`Config::for_leaves`] with about `leaves_per_bucket` leaves per bucket instead of
    /// [`LEAVES_PER_BUCKET`]: each doubling takes about `64 / b` bytes per leaf of prefix hashes
    /// off the tree's memory and adds about as many hashes to an update's bucket as it has
    /// leaves (BENCHMARKS.md §1, "Memory per leaf"). Zero is taken as one.
    pub fn for_leaves_per_bucket(expected_leaves: u64, threads: usize, leaves_per_bucket: u64) -> Self {
        let buckets = (expected_leaves / leaves_per_bucket.max(1)).max(1);
        let bucket_bits = (64 - (buckets - 1).leading_zeros()).clamp(4, 30) as u8;
        // 32k buckets per shard makes a shard's prefix array exactly one 2 MiB huge page (random
        // node accesses then stop missing the TLB; measured 1.48 -> 1.65x the lattice hash at
        // 2^26, BENCHMARKS.md §1), and 16+ shards give the workers enough pieces to balance.
        let shard_bits = bucket_bits.saturating_sub(15).clamp(4, 12).min(bucket_bits);
        Self { threads: threads.max(1), shard_bits, bucket_bits, pin_workers: false }
    }

    /// The same layout with [`Config::pin_workers`] set to `pin`.
    pub fn with_pinned_workers(self, pin: bool) -> Self {
        Self { pin_workers: pin, ..self }
    }

    /// A layout with explicit values, checked.
    pub fn new(threads: usize, shard_bits: u8, bucket_bits: u8) -> Result<Self, CoreError> {
        let c = Self { threads, shard_bits, bucket_bits, pin_workers: false };
        c.validate()?;
        Ok(c)
    }

    /// Checks the layout's bounds.
    pub fn validate(&self) -> Result<(), CoreError> {
        if self.threads == 0 {
            return Err(CoreError::Config("threads must be at least 1".into()));
        }
        if self.shard_bits > MAX_SHARD_BITS {
            return Err(CoreError::Config(format!("shard_bits {} exceeds {MAX_SHARD_BITS}", self.shard_bits)));
        }
        if self.bucket_bits > MAX_BUCKET_BITS {
            return Err(CoreError::Config(format!("bucket_bits {} exceeds {MAX_BUCKET_BITS}", self.bucket_bits)));
        }
        if self.bucket_bits < self.shard_bits {
            return Err(CoreError::Config(format!(
                "bucket_bits {} is below shard_bits {}",
                self.bucket_bits, self.shard_bits
            )));
        }
        Ok(())
    }
}

impl Default for Config {
    fn default() -> Self {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self::for_leaves(1 << 20, threads)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaves_per_bucket_sets_the_bucket_count() {
        assert_eq!(Config::for_leaves(1 << 26, 2), Config::for_leaves_per_bucket(1 << 26, 2, LEAVES_PER_BUCKET));
        assert_eq!(Config::for_leaves(1 << 26, 2).bucket_bits, 25);
        let wide = Config::for_leaves_per_bucket(1 << 26, 2, 16);
        assert_eq!((wide.bucket_bits, wide.shard_bits), (22, 7));
        assert_eq!(Config::for_leaves_per_bucket(1 << 20, 2, 0), Config::for_leaves_per_bucket(1 << 20, 2, 1));
        assert!(!wide.pin_workers && wide.with_pinned_workers(true).pin_workers);
        assert!(wide.validate().is_ok());
    }
}
