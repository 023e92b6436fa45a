//! The node pipeline: what every deployment does with a committed or frozen bank, written once
//! under both front ends.
//!
//! ```text
//! geyser plugin (aldb-plugin)            in-process module (aldb-bank)
//! callbacks → geyser-adapter             freeze / bank hash / confirmed / root / dead
//! startup accounts, commits,             fork engine (the bank hash's own tree)
//! status changes (commit worker) ─┐      replay thread ──► Queued (bounded, never waits)
//!                                 │                              │ its own thread
//!                                 ▼                              ▼
//!           ┌───────────────────────────── aldb-node ──────────────────────────────┐
//!           │ Snapshots: SnapshotWriter (files, slot-status journal), WritePolicy  │
//!           │   (hand off, or hold and retry), Spares, a panic stops the thread    │
//!           │ Records: RecordLog (reopen, retry, prune) at each level, Schedule    │
//!           │ BankHashes: the validator's word on each bank, the root cross-check  │
//!           │ Evidence: the vote-evidence log   StartupAccounts: the startup spill │
//!           │ NodeStats + families: one counter set, each front end's names        │
//!           └──────────────────────────────────────────────────────────────────────┘
//!                                 │ snapshot dir: files, slot-status.log, records/, votes/
//!                                 ▼
//!                         Hyades, aldb-ship
//! ```
//!
//! A front end turns its own events into the pipeline's input: banks to write ([`Snapshots`]),
//! statuses to journal, levels reached ([`Records`]), what the validator said of a bank
//! ([`BankHashes`]). The pipeline never changes a root and never stops the validator: a file or
//! record that cannot be written is logged, counted ([`NodeStats`]) and skipped or tried again,
//! and a panic on its thread stops only that thread ([`panic`]). Where the two front ends differ
//! the difference is a field of the one [`NodeConfig`]: [`WritePolicy`] (the plugin hands banks
//! to the writer, which retries by itself; the module holds a failed bank and retries it),
//! [`Schedule`] (records at commit, or at each level a bank reaches), and the record log's
//! [`RecordSettings::reopen_every`] and [`RecordSettings::must_open`].

mod bank_hashes;
mod config;
mod error;
pub mod evidence;
pub mod families;
mod histogram;
pub mod panic;
mod queued;
mod records;
mod snapshots;
mod spares;
mod spill;
mod stats;
#[cfg(test)]
mod test_support;

pub use bank_hashes::{BankHashes, Frozen};
pub use config::{Levels, NodeConfig, RecordSettings, Schedule, WritePolicy};
pub use error::NodeError;
pub use histogram::{Histogram, LATENCY_BOUNDS, cumulative};
pub use queued::{QueueBounds, Queued};
pub use records::finality::{MAX_AWAITING_ROOT, RootedSlots};
pub use records::{BankRecord, Records};
pub use snapshots::Snapshots;
pub use spares::Spares;
pub use spill::StartupAccounts;
pub use stats::NodeStats;
