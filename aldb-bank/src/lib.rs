//! The state root inside the bank hash: the in-process module a patched agave validator's banks
//! feed (`validator-patches/`).
//!
//! A [`BankRoots`] wraps one fork-aware Pleiades ([`aldb_core::ForkEngine`]) and answers, for
//! every frozen bank, the aldb v1 root (`docs/SPEC.md`) of exactly that bank's account state,
//! forks included. The validator calls it at these points:
//!
//! - **freeze**: [`BankRoots::freeze`] with the bank's slot, its parent's slot and the accounts
//!   the bank stored in its own slot (what the lattice hash mixed in). A zero-lamport account is a
//!   deletion. When the module does not hold the parent (the first freeze after a start, or after
//!   the feature activates) the caller first gives the parent's whole state to
//!   [`BankRoots::build_base`];
//! - **bank hash**: [`BankRoots::bank_hash`] right after the bank's hash is computed, with its
//!   [`BankMeta`] (for the root records);
//! - **confirmed**: [`BankRoots::confirmed`] when the node sees the slot optimistically
//!   confirmed;
//! - **root**: [`BankRoots::root`] when the bank forks set a new root, releasing what the module
//!   holds for the slot and its ancestors and dropping the forks that can no longer be chosen;
//! - **dead**: [`BankRoots::dead`] when a bank is abandoned before being rooted (optional: a root
//!   elsewhere drops it too).
//!
//! With a sink configured ([`CONFIG_ENV`] names a [`SinkConfig`] file), the module also writes
//! the node's snapshot files (every frozen bank, forks included, through the fork-mode
//! [`aldb_snapshot::SnapshotWriter`], with the slot-status journal) and its signed root records,
//! from its own tree: a patched node needs no geyser plugin and keeps one tree. Hyades serves the
//! directory as it serves the plugin's. The sink is the node pipeline ([`aldb_node`], the same
//! one under the geyser plugin) on a thread of its own behind a bounded queue
//! ([`aldb_node::Queued`]); replay never waits for it, and nothing it does or fails to do changes
//! a root (`aldb-bank/README.md` and `docs/IN-PROCESS.md`).
//!
//! The API takes plain bytes ([`Account`]) so the crate needs no agave dependency, and
//! [`global`] gives the one instance a validator process keeps, so the agave side of the patch
//! stays a few calls. Every failure is a [`BankError`]; the caller halts on it rather than
//! produce a bank hash without the root.

mod config;
mod error;
mod global;
mod meta;
mod metrics;
mod roots;

pub use aldb_core::AccountRef as Account;
/// The sink's counters: the node pipeline's.
pub use aldb_node::NodeStats as SinkStats;
/// The next epoch's set a bank binds (`docs/SPEC.md` §11): [`epoch_set_commitment`] sorts the
/// members the runtime reads from its `EpochStakes` and returns the set's hash and encoding, so
/// the encoding has one owner (`aldb_verify::epochs`) and the agave side stays a loop.
pub use aldb_verify::epochs::set_commitment as epoch_set_commitment;
pub use aldb_verify::spec::Hash;
/// A member of an epoch's set: vote account, its authorized voter for the epoch, its stake.
pub use aldb_verify::votes::Validator as SetMember;
pub use config::{
    CONFIG_ENV, ConfigError, ConfigProblem, HashError, RecordLevel, RecordsConfig, SinkConfig, genesis_hash_of_file,
};
pub use error::{BankError, SinkStartError};
pub use global::{THREADS_ENV, global};
pub use meta::BankMeta;
pub use roots::BankRoots;
