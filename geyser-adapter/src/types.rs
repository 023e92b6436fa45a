//! The adapter's inputs and settings. They are the crate's own small types so that it needs no
//! agave crate: the plugin converts agave's callback arguments into these.

use aldb_core::AccountRef;

use crate::error::AdapterError;

/// One account write, as the validator reports it in `update_account`.
///
/// `data` is borrowed: the adapter hashes the account during the call and keeps only the hashes,
/// plus whatever its [`Retain`](crate::Retain) policy copies out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AccountUpdate<'a> {
    /// The slot (bank) that wrote the account; for startup accounts, the storage slot.
    pub slot: u64,
    /// The account address.
    pub pubkey: [u8; 32],
    /// Balance; zero means the account is deleted.
    pub lamports: u64,
    /// Owning program.
    pub owner: [u8; 32],
    /// Whether the account holds a loaded program.
    pub executable: bool,
    /// Account data.
    pub data: &'a [u8],
    /// Orders writes of one account within one bank: the highest wins.
    pub write_version: u64,
    /// Whether this account comes from the snapshot loaded at startup.
    pub is_startup: bool,
}

impl AccountUpdate<'_> {
    /// The account as the commitment sees it.
    pub fn account(&self) -> AccountRef<'_> {
        AccountRef {
            pubkey: &self.pubkey,
            lamports: self.lamports,
            owner: &self.owner,
            executable: self.executable,
            data: self.data,
        }
    }
}

/// What happened to a slot, as agave's `update_slot_status` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SlotStatus {
    /// A bank was created for the slot; its account updates follow. Repeated, the slot restarts.
    CreatedBank,
    /// The bank is frozen: every account update of the slot came before this.
    Processed,
    /// The cluster optimistically confirmed the slot, and so all its ancestors.
    Confirmed,
    /// The slot is rooted (finalized).
    Rooted,
    /// Replaying the slot failed; its updates so far are void.
    Dead,
    /// All shreds of the slot arrived. Carries nothing the state depends on: ignored.
    Completed,
    /// The first shred of the slot arrived. Ignored.
    FirstShredReceived,
}

/// A slot status notification.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SlotEvent {
    /// The slot the status is about.
    pub slot: u64,
    /// Its parent slot, when the validator names it (agave does for every status but
    /// `Confirmed`, `Completed` and `FirstShredReceived`).
    pub parent: Option<u64>,
    /// What happened.
    pub status: SlotStatus,
}

impl SlotEvent {
    /// A status for `slot` with a known parent.
    pub fn new(slot: u64, parent: Option<u64>, status: SlotStatus) -> Self {
        Self { slot, parent, status }
    }
}

/// When a slot is committed to the engine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Commitment {
    /// When the slot is both frozen (`Processed`) and optimistically confirmed (directly, by a
    /// confirmed descendant, or by being rooted). Roots about a second behind the tip; a confirmed
    /// slot being replaced later would need a consensus failure.
    #[default]
    Confirmed,
    /// When the slot is rooted. Roots about 32 slots (13 s) behind the tip, and final.
    Finalized,
    /// Every frozen bank, forks included, as soon as it is `Processed` (and its parent was
    /// frozen): the banks are frozen into an [`aldb_core::ForkEngine`], which takes a root back
    /// when its fork dies. Later confirmations, roots and abandoned forks come out of
    /// [`Adapter::take_status_changes`](crate::Adapter::take_status_changes).
    Processed,
}

/// Default number of buffer stripes: enough that many callback threads rarely meet on one lock.
pub const DEFAULT_STRIPES: usize = 64;

/// Default bound on slots tracked above the committed base (about 13 minutes of slots).
pub const DEFAULT_MAX_PENDING_SLOTS: usize = 2048;

/// The most stripes the adapter accepts (the stripe index uses 16 path bits).
pub const MAX_STRIPES: usize = 1 << 16;

/// How the adapter runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AdapterConfig {
    /// When slots are committed.
    pub commitment: Commitment,
    /// Layout of the engine's tree and its worker threads.
    pub engine: aldb_core::Config,
    /// Account buffers are split into this many independently locked stripes by key path, so
    /// concurrent callbacks rarely wait for each other. A power of two, at most [`MAX_STRIPES`].
    pub stripes: usize,
    /// At most this many slots are tracked above the committed base. Past it, the lowest are
    /// dropped and counted: see `docs/ADAPTER.md`, "Bounded memory".
    pub max_pending_slots: usize,
    /// When set, each [`Committed`](crate::Committed) carries the tree entries its commit
    /// rewrote, recorded with these options, for the snapshot writer. Off by default:
    /// capturing costs memory per commit.
    pub capture_changes: Option<aldb_core::CaptureOptions>,
}

impl AdapterConfig {
    /// Default settings with the given commitment and engine layout.
    pub fn new(commitment: Commitment, engine: aldb_core::Config) -> Self {
        Self {
            commitment,
            engine,
            stripes: DEFAULT_STRIPES,
            max_pending_slots: DEFAULT_MAX_PENDING_SLOTS,
            capture_changes: None,
        }
    }

    /// Checks the settings, including the engine layout.
    pub fn validate(&self) -> Result<(), AdapterError> {
        if !self.stripes.is_power_of_two() || self.stripes > MAX_STRIPES {
            return Err(AdapterError::Config(format!(
                "stripes must be a power of two from 1 to {MAX_STRIPES}, got {}",
                self.stripes
            )));
        }
        if self.max_pending_slots == 0 {
            return Err(AdapterError::Config("max_pending_slots must be at least 1".into()));
        }
        self.engine.validate()?;
        Ok(())
    }
}

impl Default for AdapterConfig {
    fn default() -> Self {
        Self::new(Commitment::default(), aldb_core::Config::default())
    }
}
