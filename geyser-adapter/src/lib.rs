//! The geyser adapter: the slot and fork state machine between agave's geyser callbacks and the
//! Pleiades engine ([`aldb_core`]).
//!
//! It depends on no agave crate. The plugin converts each callback into an [`AccountUpdate`], a
//! [`SlotEvent`] or an [`Adapter::end_of_startup`] call; the adapter buffers each bank's account
//! updates (highest `write_version` wins within a bank), follows the fork tree through the slot
//! statuses, and commits slots to the engine in chain order at the configured [`Commitment`].
//! Each commit yields a [`Committed`] `(slot, parent, root)`, plus the winning records when a
//! [`Retain`] policy keeps them, for the snapshot writer, the root feed and metrics.
//!
//! ```
//! use geyser_adapter::{AccountUpdate, Adapter, AdapterConfig, Commitment, SlotEvent, SlotStatus::*};
//! let adapter = Adapter::new(AdapterConfig::new(Commitment::Confirmed, aldb_core::Config::for_leaves(1000, 1)))?;
//! let acct = |slot, key: u8| AccountUpdate {
//!     slot, pubkey: [key; 32], lamports: 10, owner: [0; 32], executable: false,
//!     data: b"", write_version: 1, is_startup: false,
//! };
//! // A genesis start: slot 0's accounts arrive with no status; slot 1's bank makes slot 0 the base.
//! adapter.update_account(&acct(0, 1))?;
//! adapter.update_slot_status(SlotEvent::new(1, Some(0), CreatedBank))?;
//! adapter.update_account(&acct(1, 2))?;
//! adapter.update_slot_status(SlotEvent::new(1, Some(0), Processed))?;
//! adapter.update_slot_status(SlotEvent::new(1, None, Confirmed))?;
//! let committed = adapter.commit_ready(); // normally on the plugin's worker thread
//! assert_eq!(committed.iter().map(|c| (c.slot, c.parent)).collect::<Vec<_>>(), [(0, None), (1, Some(0))]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Decisions
//!
//! `docs/ADAPTER.md` has the full reasoning; in short:
//!
//! - **Every root is the root of the full account state at its slot**, never of a delta: the
//!   commitment is a function of the account set, so a restarted validator reproduces the roots
//!   of one that never stopped.
//! - **The first committed slot.** On a genesis start, slot 0 (its accounts come as ordinary
//!   updates with no status) is committed on the empty tree, with parent `None`, as soon as any
//!   bank names slot 0 as its parent. On a snapshot start, the startup accounts are bulk-built
//!   at `end_of_startup` (or at the first slot status, if that never comes) and committed as
//!   the highest slot among them (the snapshot slot, since every bank writes the Clock sysvar),
//!   with parent `None`.
//! - **Slots with no root**: slots below the startup base (the storages' older slots fold into
//!   the startup state), dead slots, slots of abandoned forks, slots never confirmed (or never
//!   rooted, under [`Commitment::Finalized`]), and slots dropped over the pending bound. Along
//!   the committed chain there are no gaps: every slot whose parent committed commits once it is
//!   ready, and its [`Committed::parent`] is the previous commit.
//! - **Replayed slots** (ledger replay after startup: updates with no status) are linked by
//!   their parents from `Rooted` (which names the parent) or from the SlotHashes sysvar write
//!   every bank makes ([`SLOT_HASHES_SYSVAR`]); a slot is known complete once a child names it.
//! - **Threading**: account updates take one of many stripe locks, chosen by key path, for a
//!   hash-map insert; slot statuses take the state-machine lock for bookkeeping only; the engine
//!   runs in [`Adapter::commit_ready`], which the plugin calls from its own worker thread.
//! - **Root-record inputs**: each [`Committed`] carries the slot's block metadata
//!   ([`Adapter::block_metadata`], from agave's `notify_block_metadata`) if it arrived before the
//!   commit was applied, and the parent's bank hash from the slot's own SlotHashes write. Neither
//!   ever delays a commit; metadata of slots that never commit is dropped with them.
//! - **`Commitment::Processed`**: every complete bank whose parent is frozen is frozen into an
//!   [`aldb_core::ForkEngine`], forks included, and comes out of `commit_ready` with its parent;
//!   what the cluster says later (confirmed, rooted, or the fork died) comes out of
//!   [`Adapter::take_status_changes`] as [`StatusChange`]s, in order, with the root the bank was
//!   frozen with. Their confirmed and finalized changes are exactly what the other two
//!   commitments commit. `docs/ADAPTER.md` §11.
//! - **Never panic**: odd sequences are ignored ([`Ignored`], [`IgnoreReason`]) or handled and
//!   counted ([`Irregularity`]); both show in [`Stats`].
//! - **Bounded memory**: buffers exist only for slots above the committed base; at most
//!   [`AdapterConfig::max_pending_slots`] are tracked, the lowest dropped past that. Startup
//!   accounts stream into the bulk builder as they arrive (88 bytes each), and with
//!   [`Adapter::spill_startup`] their data to the node pipeline's spill on disk
//!   (`docs/ADAPTER.md` §3, "Streaming startup").

mod adapter;
mod control;
mod engine;
mod error;
mod retain;
mod startup;
mod stats;
mod status;
mod stripe;
mod sysvar;
mod types;

pub use adapter::{Adapter, MAX_STATUS_CHANGES};
pub use aldb_verify::record::BlockInfo;
pub use engine::{CommitKind, Committed};
pub use error::{AdapterError, DropReason, IgnoreReason, Ignored, Irregularity};
pub use retain::{AccountRecord, KeepAccounts, KeepUpdates, NoRecords, Retain};
pub use startup::StartupSink;
pub use stats::Stats;
pub use status::{StatusChange, StatusKind};
pub use sysvar::{
    SLOT_HASHES_SYSVAR, slot_hashes_data, slot_hashes_data_with_hash, slot_hashes_newest, slot_hashes_parent,
};
pub use types::{
    AccountUpdate, AdapterConfig, Commitment, DEFAULT_MAX_PENDING_SLOTS, DEFAULT_STRIPES, MAX_STRIPES, SlotEvent,
    SlotStatus,
};
