//! The state root inside the bank hash: the in-process module a patched agave validator's banks
//! feed (`validator-patches/`).
//!
//! A [`BankRoots`] wraps one fork-aware Pleiades ([`aldb_core::ForkEngine`]) and answers, for
//! every frozen bank, the aldb v1 root (`docs/SPEC.md`) of exactly that bank's account state,
//! forks included. The validator calls it at three points:
//!
//! - **freeze**: [`BankRoots::freeze`] with the bank's slot, its parent's slot and the accounts
//!   the bank stored in its own slot (what the lattice hash mixed in). A zero-lamport account is a
//!   deletion. When the module does not hold the parent (the first freeze after a start, or after
//!   the feature activates) the caller first gives the parent's whole state to
//!   [`BankRoots::build_base`];
//! - **root**: [`BankRoots::root`] when the bank forks set a new root, releasing what the module
//!   holds for the slot and its ancestors and dropping the forks that can no longer be chosen;
//! - **dead**: [`BankRoots::dead`] when a bank is abandoned before being rooted (optional: a root
//!   elsewhere drops it too).
//!
//! The API takes plain bytes ([`Account`]) so the crate needs no agave dependency, and
//! [`global`] gives the one instance a validator process keeps, so the agave side of the patch
//! stays a few calls. Every failure is a [`BankError`]; the caller halts on it rather than
//! produce a bank hash without the root.

mod error;
mod global;
mod roots;

pub use aldb_core::AccountRef as Account;
pub use aldb_verify::spec::Hash;
pub use error::BankError;
pub use global::{THREADS_ENV, global};
pub use roots::BankRoots;
