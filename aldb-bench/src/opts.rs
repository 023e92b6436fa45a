//! Command-line flags.

use anyhow::bail;
use clap::{ArgAction, Parser};

/// Every knob of a run.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "aldb-bench",
    about = "The AlDBaran workload through Pleiades, with the lattice hash, jmt and the nervos tree as anchors",
    long_about = "aldb-bench: the AlDBaran workload (uniform random 32-byte pubkeys, 90% updates / 5% inserts / \
                  5% deletes, one root per slot) through Pleiades, with the Solana lattice hash, jmt and the \
                  nervos sparse-merkle-tree as anchors in the same run. Ends with one JSON line."
)]
pub(crate) struct Opts {
    /// Prefilled accounts = 2^N.
    #[arg(long, value_name = "N", default_value_t = 26)]
    pub(crate) leaves_log2: u32,
    /// Slots, warm-up included.
    #[arg(long, value_name = "N", default_value_t = 12)]
    pub(crate) slots: u64,
    /// Leading slots excluded from the figures.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub(crate) warmup: u64,
    /// Account updates per slot.
    #[arg(long, value_name = "N", default_value_t = 400_000)]
    pub(crate) slot_updates: usize,
    /// Worker threads [default: available parallelism].
    #[arg(long, value_name = "N", default_value_t = available_parallelism(), hide_default_value = true)]
    pub(crate) threads: usize,
    /// Account data bytes (165: an SPL token account).
    #[arg(long, value_name = "N", default_value_t = 165)]
    pub(crate) data_len: usize,
    /// Seed of every random stream.
    #[arg(long, value_name = "N", default_value_t = 20_240_611)]
    pub(crate) seed: u64,
    /// Override the engine layout's shard bits.
    #[arg(long, value_name = "N")]
    pub(crate) shard_bits: Option<u8>,
    /// Override the engine layout's bucket bits.
    #[arg(long, value_name = "N")]
    pub(crate) bucket_bits: Option<u8>,
    /// Skip the lattice hash anchor.
    #[arg(long = "no-lattice", action = ArgAction::SetFalse)]
    pub(crate) lattice: bool,
    /// Skip jmt.
    #[arg(long = "no-jmt", action = ArgAction::SetFalse)]
    pub(crate) jmt: bool,
    /// jmt prefilled accounts = 2^N.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub(crate) jmt_leaves_log2: u32,
    /// jmt updates per slot.
    #[arg(long, value_name = "N", default_value_t = 20_000)]
    pub(crate) jmt_slot_updates: usize,
    /// jmt slots, the first one a warm-up.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub(crate) jmt_slots: u64,
    /// Skip the nervos sparse-merkle-tree.
    #[arg(long = "no-smt", action = ArgAction::SetFalse)]
    pub(crate) smt: bool,
    /// Nervos sparse-merkle-tree prefill = 2^N: its default store keeps ~256 branch nodes per leaf
    /// (2^16 leaves peak at ~8 GB RSS), so it runs far below jmt's size.
    #[arg(long, value_name = "N", default_value_t = 14)]
    pub(crate) smt_leaves_log2: u32,
    /// Nervos tree updates per slot.
    #[arg(long, value_name = "N", default_value_t = 5_000)]
    pub(crate) smt_slot_updates: usize,
    /// Nervos tree slots, the first one a warm-up.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub(crate) smt_slots: u64,
}

/// The default of `--threads`.
fn available_parallelism() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl Opts {
    pub(crate) fn leaves(&self) -> u64 {
        1u64 << self.leaves_log2
    }

    /// Parses `args` (without the program name) and checks the combination; `--help` and bad
    /// flags come back as the clap error that prints them.
    pub(crate) fn from_args(args: impl IntoIterator<Item = String>) -> Result<Self, clap::Error> {
        let o = Self::try_parse_from(std::iter::once("aldb-bench".to_string()).chain(args))?;
        o.check().map_err(|e| clap::Error::raw(clap::error::ErrorKind::ValueValidation, format!("{e}\n")))?;
        Ok(o)
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
            bail!("--slots ({}) must exceed --warmup ({})", self.slots, self.warmup);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Opts, clap::Error> {
        Opts::from_args(s.split_whitespace().map(String::from))
    }

    #[test]
    fn flags_parse_and_bad_input_is_an_error() -> Result<(), clap::Error> {
        let o = parse("--leaves-log2 20 --slot-updates 100000 --slots 6 --shard-bits 5 --no-jmt")?;
        assert_eq!((o.leaves(), o.slot_updates, o.slots, o.shard_bits, o.jmt), (1 << 20, 100_000, 6, Some(5), false));
        assert!(parse("--help").is_err_and(|e| e.kind() == clap::error::ErrorKind::DisplayHelp));
        assert!(parse("--slots").is_err());
        assert!(parse("--slots x").is_err());
        assert!(parse("--slots 2").is_err());
        assert!(parse("--bogus").is_err());
        Ok(())
    }

    /// The defaults the READMEs and BENCHMARKS.md quote.
    #[test]
    fn defaults_are_the_documented_ones() -> Result<(), clap::Error> {
        let o = parse("")?;
        assert_eq!(
            (o.leaves_log2, o.slots, o.warmup, o.slot_updates, o.data_len, o.seed),
            (26, 12, 2, 400_000, 165, 20_240_611)
        );
        assert_eq!((o.shard_bits, o.bucket_bits, o.lattice, o.jmt, o.smt), (None, None, true, true, true));
        assert_eq!((o.jmt_leaves_log2, o.jmt_slot_updates, o.jmt_slots), (20, 20_000, 5));
        assert_eq!((o.smt_leaves_log2, o.smt_slot_updates, o.smt_slots), (14, 5_000, 5));
        assert!(o.threads >= 1);
        Ok(())
    }

    #[test]
    fn every_flag_is_declared_consistently() {
        <Opts as clap::CommandFactory>::command().debug_assert();
    }
}
