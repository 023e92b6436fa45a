//! aldb's geyser plugin for agave-validator 4.2.0: a provable state root for every committed
//! slot, and snapshots from which Hyades serves `(account, proof)` at any kept slot.
//!
//! The validator loads the `cdylib` named by `libpath` in the file given to
//! `--geyser-plugin-config`, calls [`_create_plugin`], and drives the returned [`AldbPlugin`]:
//!
//! - account updates and slot statuses go into [`geyser_adapter::Adapter`], the fork-aware state
//!   machine, which keeps each account's winning write per bank (with its data: the
//!   [`geyser_adapter::KeepAccounts`] policy) and decides which slots commit;
//! - one commit worker thread applies the decided slots to the Pleiades engine and hands every
//!   commit (its change set and the accounts it wrote) to the node pipeline ([`aldb_node`]): the
//!   snapshot writer, which publishes one file per slot beside the validator, and the root
//!   records;
//! - Prometheus metrics are served on `metrics_addr` if set.
//!
//! Built with the cargo feature `patched-interface` against the patched geyser interface
//! (`scripts/build-patched-plugin.sh`), it also reads block metadata `V0_0_5` (the bank hash and
//! the aldb root the validator mixed into it), checks the validator's root against its own, and
//! keeps the vote-evidence log (`vote_evidence`). The stock build is unchanged.
//!
//! `docs/PLUGIN.md` is the operator's guide: building, the config file, what to watch.
//!
//! The ABI between the validator and the plugin is a Rust trait object, so the plugin must be
//! built by the same rustc (1.95) from the same versions of every crate whose types cross it;
//! the workspace's `Cargo.lock` pins those to agave-validator 4.2.0's, and
//! `scripts/check-agave-lock.py` proves it.

use agave_geyser_plugin_interface::geyser_plugin_interface::GeyserPlugin;

pub mod config;
mod error;
mod metrics;
#[cfg(feature = "patched-interface")]
mod patched;
mod plugin;
mod worker;

pub use config::{CommitmentLevel, Config, ConfigError, SnapshotDirError};
pub use plugin::AldbPlugin;

/// The entry point agave looks up in the library: creates the plugin, not yet loaded.
///
/// # Safety
///
/// The caller takes ownership of the returned pointer and must free it exactly once, with
/// `Box::from_raw` of the same type, in a process whose Rust ABI matches this library's (same
/// rustc, same `agave-geyser-plugin-interface` build). agave-validator 4.2.0 does exactly that.
// The return type is a Rust fat pointer, not a C type, hence the `allow`. agave's loader asks for
// "a C function `_create_plugin`" yet calls it through a Rust-ABI `unsafe fn() -> *mut dyn
// GeyserPlugin`; every geyser plugin exports it as `extern "C"`, and on x86_64 and aarch64 both
// conventions return the two-word pointer in the same two registers. What the pointer points to
// is only meaningful because both sides are built by the same rustc from the same crates.
#[allow(improper_ctypes_definitions)]
// SAFETY: `no_mangle` exports the symbol under its plain name, which agave looks up. No other
// item in this library or in agave's process defines `_create_plugin`, so it clashes with
// nothing. The body does nothing unsafe: the pointer comes from `Box::into_raw`, so handing it
// back to `Box::from_raw` (agave does) is sound.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn _create_plugin() -> *mut dyn GeyserPlugin {
    let plugin: Box<dyn GeyserPlugin> = Box::new(AldbPlugin::new());
    Box::into_raw(plugin)
}
