//! The pipeline's one configuration type. Each front end reads its own file format (the geyser
//! plugin's JSON5 config, the in-process module's `ALDB_BANK_CONFIG`) and fills this in; where
//! their policies differ, the difference is a field here.

use std::path::PathBuf;

use aldb_snapshot::WriterConfig;

/// What the pipeline does with a bank whose write failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WritePolicy {
    /// Hand each bank to the writer's queue and go on: the writer holds failed slots and retries
    /// by itself, and stops for good past its bound; a bank it refuses is logged (the geyser
    /// plugin, whose commit worker may wait on a full queue).
    HandOff,
    /// Wait for each bank's write: one that fails for a reason that can pass is held and tried
    /// again, 100 ms doubling to 5 s, while nothing else is taken (the in-process module, whose
    /// replay thread never waits: its bounded queue absorbs what follows).
    HoldAndRetry,
}

/// The commitment levels records are produced at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Levels {
    /// `confirmed` records.
    pub confirmed: bool,
    /// `finalized` records.
    pub finalized: bool,
}

impl Levels {
    /// Both levels.
    pub const BOTH: Self = Self { confirmed: true, finalized: true };

    /// Whether records are made at `level`.
    pub fn has(self, level: aldb_verify::Commitment) -> bool {
        match level {
            aldb_verify::Commitment::Confirmed => self.confirmed,
            aldb_verify::Commitment::Finalized => self.finalized,
            _ => false,
        }
    }
}

/// When a bank's records are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// Each committed slot gets its record at the given level as it commits; at `confirmed`, its
    /// `finalized` one once the front end reports it (or a descendant) rooted (the geyser plugin
    /// at `confirmed` or `finalized` commitment).
    AtCommit(aldb_verify::Commitment),
    /// A bank gets its record at each of these levels as it reaches it (the geyser plugin at
    /// `processed`, the in-process module).
    AtStatus(Levels),
}

impl Schedule {
    /// The levels records are made at.
    pub fn levels(self) -> Levels {
        match self {
            Self::AtCommit(aldb_verify::Commitment::Confirmed) => Levels::BOTH,
            // Committed once rooted: final at commit, one level.
            Self::AtCommit(_) => Levels { confirmed: false, finalized: true },
            Self::AtStatus(levels) => levels,
        }
    }
}

/// Root records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordSettings {
    /// The cluster's genesis hash, in every record.
    pub genesis_hash: [u8; 32],
    /// Solana keypair file whose key signs every record; `None`: unsigned.
    pub keypair: Option<PathBuf>,
    /// Record log segments holding only records older than this many slots are deleted.
    pub keep_slots: u64,
    /// When records are made.
    pub schedule: Schedule,
    /// After the record log could not be opened, records asked for before the next try (each
    /// counted as an error): 1 tries at every record.
    pub reopen_every: u64,
    /// Whether the pipeline refuses to start when the record log cannot be opened (else records
    /// pause, and the log is tried again every `reopen_every` records).
    pub must_open: bool,
}

/// The pipeline's settings; see the [module documentation](self).
#[derive(Clone, Debug)]
pub struct NodeConfig {
    /// The front end's name, which starts every log line (`aldb-plugin`, `aldb-bank`).
    pub name: &'static str,
    /// The snapshot writer: its directory (which the record log and the vote-evidence log live
    /// under), cadence, retention and queue. `return_refused` follows [`NodeConfig::writes`].
    pub writer: WriterConfig,
    /// What a failed write does.
    pub writes: WritePolicy,
    /// Root records, when produced.
    pub records: Option<RecordSettings>,
    /// Slots [`crate::BankHashes`] remembers on either side until the other comes.
    pub bank_hash_slots: usize,
}

impl NodeConfig {
    /// The writer's settings as the pipeline starts it: a writer whose failed writes are held and
    /// retried hands refused inputs back.
    pub fn writer_config(&self) -> WriterConfig {
        WriterConfig { return_refused: self.writes == WritePolicy::HoldAndRetry, ..self.writer.clone() }
    }
}
