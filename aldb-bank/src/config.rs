//! The sink's configuration: a JSON file named by [`CONFIG_ENV`], read once.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

/// The environment variable naming the sink's JSON config file. Unset: no snapshot files and no
/// records, the module only answers roots.
pub const CONFIG_ENV: &str = "ALDB_BANK_CONFIG";

/// Banks whose hash and block are kept for their records: far more banks than are ever unrooted
/// at once.
const MAX_BANK_METAS: usize = 1 << 14;
/// The longest config file read: a config is a few hundred bytes.
const MAX_CONFIG_BYTES: u64 = 1 << 20;
/// The longest `genesis.bin` hashed (as the plugin bounds it): the file streams through the
/// hash, so the bound is on time, not memory.
const MAX_GENESIS_FILE_BYTES: u64 = 256 << 20;

/// Why the sink's configuration was refused. The module refuses every call with it, so the
/// validator stops at its first bank with the message rather than run without what the operator
/// asked for.
#[derive(Clone, Debug, thiserror::Error)]
#[error("aldb-bank config {}: {problem}", path.display())]
pub struct ConfigError {
    /// The config file (or the environment variable, when it names nothing usable).
    pub path: PathBuf,
    /// What is wrong.
    #[source]
    pub problem: ConfigProblem,
}

/// What is wrong with a config file ([`ConfigError`]). The error is handed to every call the
/// module refuses, so the causes it keeps are shared rather than copied.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigProblem {
    /// The file could not be read.
    #[error("cannot read: {0}")]
    Read(#[source] Arc<std::io::Error>),
    /// The file is not the JSON this config takes.
    #[error("invalid: {0}")]
    Json(#[source] Arc<serde_json::Error>),
    /// `snapshot_dir` is empty.
    #[error("`snapshot_dir` must not be empty")]
    EmptySnapshotDir,
    /// A count that must be at least 1 is 0.
    #[error("`{0}` must be at least 1")]
    Zero(&'static str),
    /// `metrics_addr` is not an address and port.
    #[error("`metrics_addr`: {text:?} is not an IP address and port such as \"127.0.0.1:9101\": {source}")]
    MetricsAddr {
        /// The value (at most its first 100 characters).
        text: String,
        /// What the parser refused.
        source: std::net::AddrParseError,
    },
    /// Both `genesis_hash` and `ledger_path` are set.
    #[error("`genesis_hash` and `ledger_path` are both set; set one")]
    GenesisTwice,
    /// `genesis_hash` is not base58 of 32 bytes.
    #[error("`genesis_hash`: {0}")]
    GenesisHash(#[source] HashError),
    /// The ledger's `genesis.bin` could not be hashed.
    #[error("cannot hash {}: {source}", file.display())]
    GenesisFile {
        /// The file.
        file: PathBuf,
        /// The underlying error.
        source: Arc<std::io::Error>,
    },
    /// `records` is set with no genesis hash to put in them.
    #[error("`records` is set but neither `genesis_hash` nor `ledger_path`: records need it")]
    RecordsWithoutGenesis,
    /// `records.levels` is empty.
    #[error("`records.levels` is empty; leave `records` out to produce none")]
    NoRecordLevels,
    /// The signing key `records.keypair` names cannot be read.
    #[error("`records.keypair`: {0}")]
    Keypair(#[source] Arc<aldb_snapshot::records::RecordsError>),
}

/// Why a hash in the config is refused.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HashError {
    /// Not base58.
    #[error("not base58: {0}")]
    Base58(#[source] bs58::decode::Error),
    /// Base58 of the wrong length.
    #[error("{0} bytes, a hash has 32")]
    Length(usize),
}

/// A commitment level a root record is produced at.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum RecordLevel {
    /// When the node sees the slot optimistically confirmed ([`crate::BankRoots::confirmed`]).
    Confirmed,
    /// When the bank is rooted ([`crate::BankRoots::root`]).
    Finalized,
}

/// Root records: where the key is and which levels are made.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RecordsConfig {
    /// Solana keypair file (a JSON array of 64 numbers) whose key signs every record. Unset:
    /// records are unsigned.
    #[serde(default)]
    pub keypair: Option<PathBuf>,
    /// Levels records are produced at (default both).
    #[serde(default = "default_levels")]
    pub levels: Vec<RecordLevel>,
    /// Record log segments holding only records older than this many slots are deleted.
    #[serde(default = "default_record_keep_slots")]
    pub keep_slots: u64,
}

fn default_levels() -> Vec<RecordLevel> {
    vec![RecordLevel::Confirmed, RecordLevel::Finalized]
}

/// About 4.6 days of 400 ms slots, as the plugin keeps.
fn default_record_keep_slots() -> u64 {
    1_000_000
}

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    snapshot_dir: PathBuf,
    #[serde(default)]
    keep_slots: Option<u64>,
    #[serde(default)]
    refresh_slots: Option<u64>,
    #[serde(default)]
    records: Option<RecordsConfig>,
    #[serde(default)]
    genesis_hash: Option<String>,
    #[serde(default)]
    ledger_path: Option<PathBuf>,
    #[serde(default)]
    threads: Option<usize>,
    #[serde(default)]
    queue_bound: Option<usize>,
    #[serde(default)]
    queue_bytes: Option<usize>,
    #[serde(default)]
    direct_io: Option<bool>,
    #[serde(default)]
    hold_for_shipper: Option<bool>,
    #[serde(default)]
    pin_workers: Option<bool>,
    #[serde(default)]
    metrics_addr: Option<String>,
}

/// The sink's settings. Relative paths in the file are relative to the file's directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SinkConfig {
    /// The snapshot directory the fork-mode writer fills (created if missing) and the record log
    /// lives under (`records/`): what Hyades serves.
    pub snapshot_dir: PathBuf,
    /// Slots kept provable (default 1000).
    pub keep_slots: u64,
    /// Slots over which every record is rewritten once so old files can go (default 512).
    pub refresh_slots: u64,
    /// Root records, when set. They need the genesis hash.
    pub records: Option<RecordsConfig>,
    /// The cluster's genesis hash: given as base58 (`genesis_hash`), or SHA-256 of
    /// `ledger_path/genesis.bin`.
    pub genesis_hash: Option<[u8; 32]>,
    /// The tree's worker threads (default: [`crate::THREADS_ENV`], else up to 4).
    pub threads: Option<usize>,
    /// Frozen banks that may wait for the writer thread before the sink merges or drops them
    /// (default 64). Replay never waits on it.
    pub queue_bound: usize,
    /// Bytes of change sets and account data that may wait (default 1 GiB).
    pub queue_bytes: usize,
    /// Files written past the page cache where the filesystem allows (default true).
    pub direct_io: bool,
    /// Local retention waits for the archive, as the geyser plugin's option of the name does
    /// (default false): no snapshot file the shipper has not recorded as archived (`shipped.seq`)
    /// is deleted, nor a record log segment at or above its record hold
    /// (`shipped-records.slot`), and none of either before the shipper wrote its hold. For a
    /// directory `aldb-ship` archives; the directory then grows while the shipper is down.
    pub hold_for_shipper: bool,
    /// Pin each of the tree's workers to its own CPU of the validator's allowed set (default
    /// false). Without it the kernel sometimes queues two workers on one CPU for milliseconds
    /// while another idles, most of a freeze's latency tail (BENCHMARKS.md §8); leave it off where
    /// the validator's own threads are placed on cores.
    pub pin_workers: bool,
    /// Where `GET /metrics` serves the module's counters in the Prometheus text format, from a
    /// thread of its own (default: not served). Port 0 takes a free port
    /// ([`crate::BankRoots::metrics_addr`] says which).
    pub metrics_addr: Option<SocketAddr>,
}

impl SinkConfig {
    /// The node pipeline's settings: the fork-mode writer on `snapshot_dir`, a failed write held
    /// and tried again, and records at the configured levels as banks reach them (a record log
    /// that cannot be opened refuses the start; one that fails later is tried again at the next
    /// record).
    pub fn node_config(&self) -> aldb_node::NodeConfig {
        use aldb_node::{Levels, RecordSettings, Schedule};
        let writer = aldb_snapshot::WriterConfig {
            forks: true,
            keep_slots: self.keep_slots,
            refresh_slots: self.refresh_slots,
            direct_io: self.direct_io,
            hold_for_shipper: self.hold_for_shipper,
            ..aldb_snapshot::WriterConfig::new(&self.snapshot_dir)
        };
        let records = match (&self.records, self.genesis_hash) {
            (Some(r), Some(genesis_hash)) => Some(RecordSettings {
                genesis_hash,
                keypair: r.keypair.clone(),
                keep_slots: r.keep_slots,
                schedule: Schedule::AtStatus(Levels {
                    confirmed: r.levels.contains(&RecordLevel::Confirmed),
                    finalized: r.levels.contains(&RecordLevel::Finalized),
                }),
                reopen_every: 1,
                must_open: true,
            }),
            _ => None,
        };
        aldb_node::NodeConfig {
            name: "aldb-bank",
            writer,
            writes: aldb_node::WritePolicy::HoldAndRetry,
            records,
            bank_hash_slots: MAX_BANK_METAS,
        }
    }

    /// What may wait for the sink's thread.
    pub fn queue_bounds(&self) -> aldb_node::QueueBounds {
        aldb_node::QueueBounds { banks: self.queue_bound, bytes: self.queue_bytes }
    }

    /// A config writing to `snapshot_dir` with every default and no records.
    pub fn new(snapshot_dir: impl Into<PathBuf>) -> Self {
        Self {
            snapshot_dir: snapshot_dir.into(),
            keep_slots: 1000,
            refresh_slots: 512,
            records: None,
            genesis_hash: None,
            threads: None,
            queue_bound: 64,
            queue_bytes: 1 << 30,
            direct_io: true,
            hold_for_shipper: false,
            pin_workers: false,
            metrics_addr: None,
        }
    }

    /// The config [`CONFIG_ENV`] names; `Ok(None)` when it is unset or empty.
    pub fn from_env() -> Result<Option<Self>, ConfigError> {
        match std::env::var_os(CONFIG_ENV) {
            None => Ok(None),
            Some(p) if p.is_empty() => Ok(None),
            Some(p) => Self::from_file(Path::new(&p)).map(Some),
        }
    }

    /// Reads and checks a config file: the JSON is parsed strictly (unknown fields refused), the
    /// signing key is read and the genesis hash resolved, so a mistake stops the node at start.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let bad = |problem: ConfigProblem| ConfigError { path: path.to_path_buf(), problem };
        let text = read_small(path, MAX_CONFIG_BYTES).map_err(|e| bad(ConfigProblem::Read(Arc::new(e))))?;
        let raw: Raw = serde_json::from_str(&text).map_err(|e| bad(ConfigProblem::Json(Arc::new(e))))?;
        let base = path.parent().unwrap_or(Path::new("."));
        Self::from_raw(raw, base).map_err(bad)
    }

    fn from_raw(raw: Raw, base: &Path) -> Result<Self, ConfigProblem> {
        let d = Self::new(base.join(&raw.snapshot_dir));
        if raw.snapshot_dir.as_os_str().is_empty() {
            return Err(ConfigProblem::EmptySnapshotDir);
        }
        let at_least_one = |name: &'static str, v: Option<u64>, default: u64| match v {
            Some(0) => Err(ConfigProblem::Zero(name)),
            Some(v) => Ok(v),
            None => Ok(default),
        };
        let keep_slots = at_least_one("keep_slots", raw.keep_slots, d.keep_slots)?;
        let refresh_slots = at_least_one("refresh_slots", raw.refresh_slots, d.refresh_slots)?;
        let queue_bound = at_least_one("queue_bound", raw.queue_bound.map(|v| v as u64), d.queue_bound as u64)?;
        let queue_bytes = at_least_one("queue_bytes", raw.queue_bytes.map(|v| v as u64), d.queue_bytes as u64)?;
        if raw.threads == Some(0) {
            return Err(ConfigProblem::Zero("threads"));
        }
        let metrics_addr = match raw.metrics_addr.as_deref() {
            None => None,
            Some(a) => Some(
                a.trim()
                    .parse::<SocketAddr>()
                    .map_err(|source| ConfigProblem::MetricsAddr { text: clip(a).to_string(), source })?,
            ),
        };
        let genesis_hash = match (raw.genesis_hash.as_deref(), raw.ledger_path.as_ref()) {
            (Some(_), Some(_)) => return Err(ConfigProblem::GenesisTwice),
            (Some(h), None) => Some(parse_hash(h).map_err(ConfigProblem::GenesisHash)?),
            (None, Some(ledger)) => {
                let file = base.join(ledger).join("genesis.bin");
                match genesis_hash_of_file(&file) {
                    Ok(h) => Some(h),
                    Err(e) => return Err(ConfigProblem::GenesisFile { file, source: Arc::new(e) }),
                }
            }
            (None, None) => None,
        };
        let records = match raw.records {
            None => None,
            Some(mut r) => {
                if genesis_hash.is_none() {
                    return Err(ConfigProblem::RecordsWithoutGenesis);
                }
                if r.levels.is_empty() {
                    return Err(ConfigProblem::NoRecordLevels);
                }
                if r.keep_slots == 0 {
                    return Err(ConfigProblem::Zero("records.keep_slots"));
                }
                r.keypair = r.keypair.map(|k| base.join(k));
                if let Some(k) = &r.keypair {
                    // Read now, so a bad key stops the node here rather than leave records unsigned.
                    aldb_snapshot::records::Signer::from_keypair_file(k)
                        .map_err(|e| ConfigProblem::Keypair(Arc::new(e)))?;
                }
                Some(r)
            }
        };
        Ok(Self {
            keep_slots,
            refresh_slots,
            records,
            genesis_hash,
            threads: raw.threads,
            queue_bound: queue_bound as usize,
            queue_bytes: queue_bytes as usize,
            direct_io: raw.direct_io.unwrap_or(d.direct_io),
            hold_for_shipper: raw.hold_for_shipper.unwrap_or(d.hold_for_shipper),
            pin_workers: raw.pin_workers.unwrap_or(d.pin_workers),
            metrics_addr,
            ..d
        })
    }
}

/// At most the first 100 characters of `s`, for an error message.
fn clip(s: &str) -> &str {
    s.char_indices().nth(100).map_or(s, |(i, _)| s.get(..i).unwrap_or(s))
}

fn parse_hash(s: &str) -> Result<[u8; 32], HashError> {
    let v = bs58::decode(s).into_vec().map_err(HashError::Base58)?;
    <[u8; 32]>::try_from(v.as_slice()).map_err(|_| HashError::Length(v.len()))
}

/// A regular file of at most `max` bytes, as text. The type is checked before opening, since
/// opening a FIFO would block.
fn read_small(path: &Path, max: u64) -> std::io::Result<String> {
    use std::io::Read;
    if !std::fs::metadata(path)?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut text = String::new();
    std::fs::File::open(path)?.take(max + 1).read_to_string(&mut text)?;
    if text.len() as u64 > max {
        return Err(std::io::Error::other(format!("longer than {max} bytes")));
    }
    Ok(text)
}

/// The genesis hash of a ledger's `genesis.bin`: SHA-256 of its bytes (what `getGenesisHash`
/// returns), hashed as it streams.
pub fn genesis_hash_of_file(path: &Path) -> std::io::Result<[u8; 32]> {
    use sha2::Digest;
    use std::io::Read;
    if !std::fs::metadata(path)?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut hasher = sha2::Sha256::new();
    let read = std::io::copy(&mut std::fs::File::open(path)?.take(MAX_GENESIS_FILE_BYTES + 1), &mut hasher)?;
    if read > MAX_GENESIS_FILE_BYTES {
        return Err(std::io::Error::other(format!("longer than {MAX_GENESIS_FILE_BYTES} bytes; set `genesis_hash`")));
    }
    Ok(hasher.finalize().into())
}
