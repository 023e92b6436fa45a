//! `aldb-scenario`: drives a real `solana-test-validator` running the aldb plugin, with Hyades
//! serving the plugin's snapshots, and checks that what Hyades proves is what the validator holds.
//!
//! - `run`: creates, funds, modifies and closes accounts (system transfers, an SPL Token mint and
//!   accounts, a token account closed to zero lamports, a system account drained to zero), and
//!   after every step proves each touched account through Hyades, verifies the proof locally and
//!   compares the account with the validator's RPC at the same slot. Also proves a never-created
//!   pubkey absent and checks accounts the run never touched (genesis programs, sysvars).
//! - `load`: a steady stream of transfers, reporting the plugin's callback cost and commit lag
//!   from its metrics over the load window.
//! - `processed`: against a plugin at `commitment: "processed"`, every processed slot has a root
//!   and a file at once, and every slot that confirms keeps the root it had when processed.
//! - `roots` / `compare-roots`: the restart check (record the roots Hyades served, compare them
//!   with the roots of a restarted validator on the common slots).

mod check;
mod load;
mod processed;
mod rpc;
mod tx;

use std::path::PathBuf;

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "aldb-scenario", about = "End-to-end checks of the aldb plugin against a real validator")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the account scenario and check every step through Hyades proofs.
    Run {
        /// The validator's JSON-RPC URL.
        #[arg(long, default_value = "http://127.0.0.1:8899")]
        rpc: String,
        /// The Hyades JSON-RPC URL.
        #[arg(long, default_value = "http://127.0.0.1:8999")]
        hyades: String,
        /// Seed of the scenario's keys (the same seed gives the same accounts).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// The commitment the validator's accounts are read at: `processed` against a plugin at
        /// `commitment: "processed"`.
        #[arg(long, default_value = "confirmed", value_parser = ["confirmed", "processed"])]
        commitment: String,
    },
    /// Against a plugin at `commitment: "processed"`: every slot the validator processes gets a
    /// root and a file at once, and keeps that root when it confirms.
    Processed {
        /// The validator's JSON-RPC URL.
        #[arg(long, default_value = "http://127.0.0.1:8899")]
        rpc: String,
        /// The Hyades JSON-RPC URL.
        #[arg(long, default_value = "http://127.0.0.1:8999")]
        hyades: String,
        /// The plugin's snapshot directory.
        #[arg(long)]
        dir: PathBuf,
        /// Seconds to watch processed slots.
        #[arg(long, default_value_t = 20)]
        secs: u64,
    },
    /// Send a steady stream of transfers and report the plugin's callback cost and commit lag.
    Load {
        /// The validator's JSON-RPC URL.
        #[arg(long, default_value = "http://127.0.0.1:8899")]
        rpc: String,
        /// The plugin's metrics URL.
        #[arg(long, default_value = "http://127.0.0.1:9898/metrics")]
        metrics: String,
        /// Transactions per second.
        #[arg(long, default_value_t = 100)]
        tps: u32,
        /// Seconds of load.
        #[arg(long, default_value_t = 60)]
        secs: u64,
        /// Recipient accounts the transfers rotate over.
        #[arg(long, default_value_t = 64)]
        accounts: usize,
        /// Seed of the keys.
        #[arg(long, default_value_t = 2)]
        seed: u64,
    },
    /// Print every root Hyades serves, one JSON object per line.
    Roots {
        /// The Hyades JSON-RPC URL.
        #[arg(long, default_value = "http://127.0.0.1:8999")]
        hyades: String,
    },
    /// Compare recorded roots with those Hyades serves now, on the slots both have.
    CompareRoots {
        /// A file written by `roots`.
        #[arg(long)]
        before: PathBuf,
        /// The Hyades JSON-RPC URL.
        #[arg(long, default_value = "http://127.0.0.1:8999")]
        hyades: String,
        /// Fail unless at least this many slots are common to both.
        #[arg(long, default_value_t = 1)]
        min_overlap: usize,
        /// Fail unless this slot is among the common ones (repeatable).
        #[arg(long)]
        must_cover: Vec<u64>,
    },
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Run { rpc, hyades, seed, commitment } => {
            let read_at = if commitment == "processed" { "processed" } else { "confirmed" };
            check::run(&rpc, &hyades, seed, read_at)
        }
        Command::Processed { rpc, hyades, dir, secs } => processed::run(&rpc, &hyades, &dir, secs),
        Command::Load { rpc, metrics, tps, secs, accounts, seed } => {
            load::run(&load::LoadConfig { rpc, metrics, tps, secs, accounts, seed })
        }
        Command::Roots { hyades } => check::print_roots(&hyades),
        Command::CompareRoots { before, hyades, min_overlap, must_cover } => {
            check::compare_roots(&before, &hyades, min_overlap, &must_cover)
        }
    }
}
