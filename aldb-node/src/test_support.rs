//! What the sink's unit tests build on: accounts of one owner in `aldb-testkit`'s model, the
//! fork engine over a genesis state with the base input that writes it whole, and a bank's input
//! as the module makes it at freeze.

#![allow(clippy::unwrap_used)]

use aldb_core::{BulkBuilder, ChangeSet, Config, ForkEngine, ForkLimits};
use aldb_snapshot::{AccountBatch, CAPTURE_OPTIONS, SlotInput};
use aldb_testkit::{Acct, Write, refs};

/// The owner of every account the tests write.
const OWNER: [u8; 32] = [4; 32];

/// An account of [`OWNER`], not executable, with `lamports` (zero deletes it) and `data`.
pub(crate) fn acct(lamports: u64, data: Vec<u8>) -> Acct {
    Acct { lamports, owner: OWNER, executable: false, data }
}

/// A fork engine whose base (slot 0) holds `genesis`, and the full input that writes that base.
pub(crate) fn engine_and_base(genesis: &[Write]) -> (ForkEngine, SlotInput) {
    let r = refs(genesis);
    let mut builder = BulkBuilder::new(Config::for_leaves(1 << 12, 1)).unwrap();
    builder.push_accounts(&r, (0, 0));
    let engine = ForkEngine::new(builder.finish(), 0, ForkLimits::default());
    let mut changes = ChangeSet::new(CAPTURE_OPTIONS);
    engine.tree().capture_all(&mut changes);
    let accounts = AccountBatch::from_updates(&engine.tree().hash_accounts(&r), &r);
    let base = SlotInput { slot: 0, parent: None, root: engine.base_root(), changes, accounts, full: true };
    (engine, base)
}

/// Freezes bank `slot` on `parent` with writes `w`, and returns its input for the writer.
pub(crate) fn bank(engine: &mut ForkEngine, slot: u64, parent: u64, w: &[Write]) -> SlotInput {
    let r = refs(w);
    let updates = engine.tree().hash_accounts(&r);
    let accounts = AccountBatch::from_updates(&updates, &r);
    let mut changes = ChangeSet::new(CAPTURE_OPTIONS);
    let root = engine.freeze_capture(slot, parent, updates, &mut changes).unwrap();
    SlotInput { slot, parent: Some(parent), root, changes, accounts, full: false }
}
