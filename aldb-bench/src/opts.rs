//! Command-line flags.

use anyhow::{Context, bail};

pub(crate) const USAGE: &str = "\
aldb-bench: the AlDBaran workload (uniform random 32-byte pubkeys, 90% updates / 5% inserts /
5% deletes, one root per slot) through Pleiades, with the Solana lattice hash, jmt and the nervos
sparse-merkle-tree as anchors in the same run. Ends with one JSON line.

USAGE: aldb-bench [FLAGS]

  --leaves-log2 N        prefilled accounts = 2^N                           [26]
  --slots N              slots, warm-up included                           [12]
  --warmup N             leading slots excluded from the figures            [2]
  --slot-updates N       account updates per slot                      [400000]
  --threads N            worker threads            [available parallelism]
  --data-len N           account data bytes (165: an SPL token account)   [165]
  --seed N               seed of every random stream                [20240611]
  --shard-bits N         override the engine layout's shard bits
  --bucket-bits N        override the engine layout's bucket bits
  --no-lattice           skip the lattice hash anchor
  --jmt-leaves-log2 N    jmt prefilled accounts = 2^N                      [20]
  --jmt-slot-updates N   jmt updates per slot                           [20000]
  --jmt-slots N          jmt slots, the first one a warm-up                  [5]
  --no-jmt               skip jmt
  --smt-leaves-log2 N    nervos sparse-merkle-tree prefill = 2^N: its default store
                         keeps ~256 branch nodes per leaf (2^16 leaves peak at ~8 GB
                         RSS), so it runs far below jmt's size               [14]
  --smt-slot-updates N   nervos tree updates per slot                    [5000]
  --smt-slots N          nervos tree slots, the first one a warm-up          [5]
  --no-smt               skip the nervos sparse-merkle-tree
  -h, --help             this text
";

/// Every knob of a run.
#[derive(Clone, Debug)]
pub(crate) struct Opts {
    pub(crate) leaves_log2: u32,
    pub(crate) slots: u64,
    pub(crate) warmup: u64,
    pub(crate) slot_updates: usize,
    pub(crate) threads: usize,
    pub(crate) data_len: usize,
    pub(crate) seed: u64,
    pub(crate) shard_bits: Option<u8>,
    pub(crate) bucket_bits: Option<u8>,
    pub(crate) lattice: bool,
    pub(crate) jmt: bool,
    pub(crate) jmt_leaves_log2: u32,
    pub(crate) jmt_slot_updates: usize,
    pub(crate) jmt_slots: u64,
    pub(crate) smt: bool,
    pub(crate) smt_leaves_log2: u32,
    pub(crate) smt_slot_updates: usize,
    pub(crate) smt_slots: u64,
}

impl Default for Opts {
    fn default() -> Self {
        Self {
            leaves_log2: 26,
            slots: 12,
            warmup: 2,
            slot_updates: 400_000,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            data_len: 165,
            seed: 20_240_611,
            shard_bits: None,
            bucket_bits: None,
            lattice: true,
            jmt: true,
            jmt_leaves_log2: 20,
            jmt_slot_updates: 20_000,
            jmt_slots: 5,
            smt: true,
            smt_leaves_log2: 14,
            smt_slot_updates: 5_000,
            smt_slots: 5,
        }
    }
}

impl Opts {
    pub(crate) fn leaves(&self) -> u64 {
        1u64 << self.leaves_log2
    }

    /// Parses flags; `Ok(None)` means help was asked for.
    pub(crate) fn parse(args: impl IntoIterator<Item = String>) -> anyhow::Result<Option<Self>> {
        let mut o = Self::default();
        let mut it = args.into_iter();
        while let Some(flag) = it.next() {
            let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "-h" | "--help" => return Ok(None),
                "--leaves-log2" => o.leaves_log2 = num(&flag, &value()?)?,
                "--slots" => o.slots = num(&flag, &value()?)?,
                "--warmup" => o.warmup = num(&flag, &value()?)?,
                "--slot-updates" => o.slot_updates = num(&flag, &value()?)?,
                "--threads" => o.threads = num(&flag, &value()?)?,
                "--data-len" => o.data_len = num(&flag, &value()?)?,
                "--seed" => o.seed = num(&flag, &value()?)?,
                "--shard-bits" => o.shard_bits = Some(num(&flag, &value()?)?),
                "--bucket-bits" => o.bucket_bits = Some(num(&flag, &value()?)?),
                "--no-lattice" => o.lattice = false,
                "--jmt-leaves-log2" => o.jmt_leaves_log2 = num(&flag, &value()?)?,
                "--jmt-slot-updates" => o.jmt_slot_updates = num(&flag, &value()?)?,
                "--jmt-slots" => o.jmt_slots = num(&flag, &value()?)?,
                "--no-jmt" => o.jmt = false,
                "--smt-leaves-log2" => o.smt_leaves_log2 = num(&flag, &value()?)?,
                "--smt-slot-updates" => o.smt_slot_updates = num(&flag, &value()?)?,
                "--smt-slots" => o.smt_slots = num(&flag, &value()?)?,
                "--no-smt" => o.smt = false,
                other => bail!("unknown flag {other:?}\n\n{USAGE}"),
            }
        }
        o.check()?;
        Ok(Some(o))
    }

    fn check(&self) -> anyhow::Result<()> {
        for (name, log2) in [
            ("--leaves-log2", self.leaves_log2),
            ("--jmt-leaves-log2", self.jmt_leaves_log2),
            ("--smt-leaves-log2", self.smt_leaves_log2),
        ] {
            if !(1..=32).contains(&log2) {
                bail!("{name} must be in 1..=32, got {log2}");
            }
        }
        if self.slots <= self.warmup {
            bail!(
                "--slots ({}) must exceed --warmup ({})",
                self.slots,
                self.warmup
            );
        }
        if self.jmt && self.jmt_slots < 2 {
            bail!("--jmt-slots must be at least 2 (the first is a warm-up)");
        }
        if self.smt && self.smt_slots < 2 {
            bail!("--smt-slots must be at least 2 (the first is a warm-up)");
        }
        if self.threads == 0 {
            bail!("--threads must be at least 1");
        }
        if self.slot_updates == 0 || self.jmt_slot_updates == 0 || self.smt_slot_updates == 0 {
            bail!("slot sizes must be at least 1");
        }
        Ok(())
    }
}

fn num<T: std::str::FromStr>(flag: &str, v: &str) -> anyhow::Result<T>
where
    T::Err: std::error::Error + Send + Sync + 'static,
{
    v.parse()
        .with_context(|| format!("{flag}: cannot parse {v:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> anyhow::Result<Option<Opts>> {
        Opts::parse(s.split_whitespace().map(String::from))
    }

    #[test]
    fn flags_parse_and_bad_input_is_an_error() -> anyhow::Result<()> {
        let o = parse("--leaves-log2 20 --slot-updates 100000 --slots 6 --shard-bits 5 --no-jmt")?;
        let o = o.context("not help")?;
        assert_eq!(
            (o.leaves(), o.slot_updates, o.slots, o.shard_bits, o.jmt),
            (1 << 20, 100_000, 6, Some(5), false)
        );
        assert!(parse("--help")?.is_none());
        assert!(parse("--slots").is_err());
        assert!(parse("--slots x").is_err());
        assert!(parse("--slots 2").is_err());
        assert!(parse("--bogus").is_err());
        Ok(())
    }
}
