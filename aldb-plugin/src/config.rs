//! The plugin's configuration file.
//!
//! agave passes the plugin the path of the file given to `--geyser-plugin-config`; the validator
//! itself reads `libpath` (and an optional `name`) from it, the plugin reads the rest. The file is
//! JSON5, as agave parses it: comments, unquoted keys and trailing commas are fine.
//!
//! Unknown fields are rejected rather than ignored: a misspelt `keep_slot` silently falling back
//! to its default would only be noticed when the disk filled up. Every setting is checked when the
//! plugin loads, and a bad one stops the validator from starting with a message naming the field,
//! which is far cheaper than finding out hours later. `aldb-config-check` runs the same checks
//! offline.
//!
//! Checked at load, beyond the values themselves: that `snapshot_dir` can be created and written
//! (probed with a file that is removed at once), and that `keypair` and `genesis_path` are
//! regular files of a plausible size, read with a byte bound, so a path such as `/dev/zero` or a
//! FIFO is refused instead of reading until memory runs out or blocking forever.

use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use aldb_verify::Excerpt;

use serde::{Deserialize, Serialize};

/// Default bound on slots tracked above the committed base (about 13 minutes of slots).
pub const DEFAULT_MAX_PENDING_SLOTS: usize = geyser_adapter::DEFAULT_MAX_PENDING_SLOTS;
/// Default: publish a snapshot every slot.
pub const DEFAULT_SNAPSHOT_EVERY: u64 = 1;
/// Default number of newest slots kept provable.
pub const DEFAULT_KEEP_SLOTS: u64 = 1000;
/// Default for [`Config::record_keep_slots`]: about 4.6 days of 400 ms slots, ~300 MB of records.
pub const DEFAULT_RECORD_KEEP_SLOTS: u64 = 1_000_000;
/// Default length of the snapshot refresh cycle, in slots.
pub const DEFAULT_REFRESH_SLOTS: u64 = 512;
/// Default number of committed slots that may wait for the snapshot writer.
pub const DEFAULT_SNAPSHOT_QUEUE: usize = 4;
/// Default expected account count, which sizes the engine's tree (2^20).
pub const DEFAULT_EXPECTED_ACCOUNTS: u64 = 1 << 20;
/// Default log level of the plugin's own messages.
pub const DEFAULT_LOG_LEVEL: log::LevelFilter = log::LevelFilter::Info;

/// Upper bounds that catch typos (an extra zero or three) before they cost memory, threads or
/// disk. `docs/PLUGIN.md` §2 gives each with its reason.
const MAX_THREADS: usize = 1024;
const MAX_PENDING_SLOTS: usize = 1 << 20;
/// Each waiting slot holds its changed accounts (tens of MiB for a busy slot).
pub const MAX_SNAPSHOT_QUEUE: usize = 256;
const MAX_EXPECTED_ACCOUNTS: u64 = 1 << 40;
/// Past this a bucket's rehash dwarfs the rest of an update and saves under a byte per leaf.
const MAX_LEAVES_PER_BUCKET: u64 = 64;
/// Slots merged between two published snapshots are held in memory until the next is written:
/// 1000 slots is about 7 minutes.
pub const MAX_SNAPSHOT_EVERY: u64 = 1000;
/// About 46 days of 400 ms slots, for `keep_slots` and `refresh_slots`: disk use is roughly
/// `keep_slots + refresh_slots` slots of changes.
pub const MAX_SNAPSHOT_SLOTS: u64 = 10_000_000;
/// About 463 days of records, some 30 GB with one signature each.
pub const MAX_RECORD_KEEP_SLOTS: u64 = 100_000_000;

/// Commits between attempts to reopen a record log that could not be opened.
const RECORD_RETRY_COMMITS: u64 = 64;
/// Slots whose block metadata V0_0_5, or whose commit, waits for the other side of the root
/// cross-check (rooting lags freezing by some 32 slots, confirmation by a few).
const BANK_ROOTS_SLOTS: usize = 4096;

/// The longest config file read. agave reads the file itself first; this bound is for
/// `aldb-config-check` and for a plugin loaded some other way.
pub const MAX_CONFIG_FILE_BYTES: u64 = 1 << 20;
/// The longest `genesis_path` file hashed: 256 MiB, 25 times agave's default cap on an unpacked
/// genesis archive (`MAX_GENESIS_ARCHIVE_UNPACKED_SIZE`, 10 MiB), which operators can raise with
/// `--max-genesis-archive-unpacked-size`. The file is hashed as it streams, so the bound is on
/// time, not memory. A larger genesis can be named by `genesis_hash` instead.
pub const MAX_GENESIS_FILE_BYTES: u64 = 256 << 20;

/// The default engine thread count: half the available cores (the validator needs the rest),
/// at least one.
pub fn default_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cores / 2).max(1)
}

/// When a slot gets its root.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CommitmentLevel {
    /// Once the slot is frozen and optimistically confirmed (about a second behind the tip).
    #[default]
    Confirmed,
    /// Once the slot is rooted (about 13 seconds behind the tip), and final.
    Finalized,
    /// Every frozen bank, forks included, as soon as it is processed: its root is published at
    /// once, marked confirmed or finalized when the cluster says so (only then is a record
    /// made and signed), or abandoned when its fork dies. Needs `snapshot_every: 1`.
    Processed,
}

impl CommitmentLevel {
    /// The adapter's setting.
    pub fn to_adapter(self) -> geyser_adapter::Commitment {
        match self {
            Self::Confirmed => geyser_adapter::Commitment::Confirmed,
            Self::Finalized => geyser_adapter::Commitment::Finalized,
            Self::Processed => geyser_adapter::Commitment::Processed,
        }
    }
}

/// The file as written: every optional field is `None` when absent, so defaults are applied in
/// one place ([`Config::resolve`]) and the effective config can say what it filled in.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    libpath: String,
    #[serde(default)]
    name: Option<String>,
    snapshot_dir: PathBuf,
    #[serde(default)]
    threads: Option<usize>,
    #[serde(default)]
    commitment: Option<CommitmentLevel>,
    #[serde(default)]
    max_pending_slots: Option<usize>,
    #[serde(default)]
    snapshot_every: Option<u64>,
    #[serde(default)]
    keep_slots: Option<u64>,
    #[serde(default)]
    refresh_slots: Option<u64>,
    #[serde(default)]
    hold_for_shipper: Option<bool>,
    #[serde(default)]
    record_keep_slots: Option<u64>,
    #[serde(default)]
    snapshot_queue: Option<usize>,
    #[serde(default)]
    snapshot_direct_io: Option<bool>,
    #[serde(default)]
    expected_accounts: Option<u64>,
    #[serde(default)]
    leaves_per_bucket: Option<u64>,
    #[serde(default)]
    pin_workers: Option<bool>,
    #[serde(default)]
    metrics_addr: Option<String>,
    #[serde(default)]
    log_level: Option<String>,
    #[serde(default)]
    keypair: Option<PathBuf>,
    #[serde(default)]
    genesis_hash: Option<String>,
    #[serde(default)]
    genesis_path: Option<PathBuf>,
    // Only a build against the patched interface knows these keys; the stock build refuses them
    // as unknown, as it must: it cannot decode the metadata version they ask for.
    #[cfg(feature = "patched-interface")]
    #[serde(default)]
    block_metadata_version: Option<u64>,
    #[cfg(feature = "patched-interface")]
    #[serde(default)]
    vote_evidence: Option<bool>,
}

/// The effective plugin configuration: the file's settings with defaults filled in, checked.
///
/// See `docs/PLUGIN.md` for the operator's view of each field.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Config {
    /// Path of the plugin library. Required, because agave reads it to find the library; the
    /// plugin itself ignores it. A relative path is relative to the config file (agave's rule).
    pub libpath: PathBuf,
    /// Optional plugin name, also read by agave (for its admin RPC); ignored by the plugin.
    pub name: Option<String>,
    /// Directory of snapshot files, which Hyades reads. Required; created if missing. A relative
    /// path is relative to the config file's directory, like `libpath`.
    pub snapshot_dir: PathBuf,
    /// Worker threads of the engine. Default: half the available cores, at least 1.
    pub threads: usize,
    /// When a slot gets its root. Default `confirmed`.
    pub commitment: CommitmentLevel,
    /// Slots tracked above the last committed slot before the oldest are dropped. Default 2048.
    pub max_pending_slots: usize,
    /// Publish a snapshot every this many committed slots; the slots in between are not served.
    /// Default 1.
    pub snapshot_every: u64,
    /// Keep the newest this many slots provable. Default 1000.
    pub keep_slots: u64,
    /// Slots over which every snapshot record is rewritten once, so old files can be deleted.
    /// Default 512.
    pub refresh_slots: u64,
    /// Local retention waits for `aldb-ship`: no snapshot file is deleted before the shipper
    /// recorded it as archived (`shipped.seq`), and no vote-evidence segment before it recorded
    /// the segment as archived sealed (`shipped-votes.slot`), and no root-record log segment
    /// before it recorded that one as archived sealed (`shipped-records.slot`). For a directory
    /// shipped to a bucket. Default off.
    pub hold_for_shipper: bool,
    /// Keep root records of the newest this many slots; older record log segments are deleted
    /// whole. Default 1,000,000.
    pub record_keep_slots: u64,
    /// Committed slots that may wait for the snapshot writer before the commit thread waits.
    /// Default 4.
    pub snapshot_queue: usize,
    /// Write snapshot files with `O_DIRECT` where the filesystem supports it (probed at start;
    /// buffered otherwise). Default true.
    pub snapshot_direct_io: bool,
    /// About how many accounts the state holds; sizes the engine's tree (speed and memory, never
    /// the root). Default 1048576.
    pub expected_accounts: u64,
    /// About how many accounts share one bucket of the engine's tree: memory against the hash
    /// work of an update (speed and memory, never the root). Default 2; 1 to 64.
    pub leaves_per_bucket: u64,
    /// Pin each engine worker to its own CPU of the validator's set. Default off.
    pub pin_workers: bool,
    /// Where to serve Prometheus metrics (`GET /metrics`), as `IP:port`. Default: not served.
    pub metrics_addr: Option<SocketAddr>,
    /// The most verbose level the plugin logs at. Default `info`.
    #[serde(serialize_with = "level_name")]
    pub log_level: log::LevelFilter,
    /// Solana keypair file (a JSON array of 64 numbers) whose key signs each root record: the
    /// validator identity or a dedicated key. Default: records are not signed. A relative path
    /// is relative to the config file's directory.
    pub keypair: Option<PathBuf>,
    /// The cluster's genesis hash, written into every root record: as given by `genesis_hash`,
    /// or computed from `genesis_path`. Without either, no records are produced.
    #[serde(serialize_with = "base58_opt")]
    pub genesis_hash: Option<[u8; 32]>,
    /// The ledger's `genesis.bin` the genesis hash was computed from (SHA-256 of its bytes),
    /// if the file named one.
    pub genesis_path: Option<PathBuf>,
    /// The block metadata version the validator sends the plugin: 4 (agave's), or 5 with the bank
    /// hash and the aldb commitment (`validator-patches/` 0002/0003; the validator reads the
    /// key itself). Only in a build against the patched interface. Default 4.
    #[cfg(feature = "patched-interface")]
    pub block_metadata_version: u64,
    /// Keep the vote-evidence log (`votes/` in `snapshot_dir`): every bank's hash, `h` and root,
    /// and every block's vote transactions. Needs `block_metadata_version: 5`. Default false.
    #[cfg(feature = "patched-interface")]
    pub vote_evidence: bool,
}

fn base58_opt<S: serde::Serializer>(h: &Option<[u8; 32]>, s: S) -> Result<S::Ok, S::Error> {
    match h {
        Some(h) => s.serialize_str(&aldb_verify::hash_to_base58(h)),
        None => s.serialize_none(),
    }
}

/// The genesis hash of a ledger's `genesis.bin`: SHA-256 of the file's bytes (the bincode of
/// agave's `GenesisConfig`, which is what `GenesisConfig::hash` and so `getGenesisHash` hash).
/// The file must be a regular file of at most [`MAX_GENESIS_FILE_BYTES`]; it is hashed as it is
/// read, never held whole.
pub fn genesis_hash_of_file(path: &Path) -> std::io::Result<[u8; 32]> {
    use sha2::Digest;
    let file = open_regular(path)?;
    let mut hasher = sha2::Sha256::new();
    let read = std::io::copy(&mut file.take(MAX_GENESIS_FILE_BYTES + 1), &mut hasher)?;
    if read > MAX_GENESIS_FILE_BYTES {
        return Err(std::io::Error::other(format!(
            "longer than {MAX_GENESIS_FILE_BYTES} bytes, more than any genesis.bin agave loads by default; \
             set `genesis_hash` instead"
        )));
    }
    Ok(hasher.finalize().into())
}

/// Opens a file that must be a regular file. Its type is checked before opening, since opening a
/// FIFO blocks until a writer appears, and again on the open file, in case the path was replaced
/// between the two.
fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    let not_regular = || std::io::Error::other("not a regular file");
    if !std::fs::metadata(path)?.is_file() {
        return Err(not_regular());
    }
    let file = std::fs::File::open(path)?;
    if !file.metadata()?.is_file() {
        return Err(not_regular());
    }
    Ok(file)
}

/// Reads a config file of at most [`MAX_CONFIG_FILE_BYTES`]. Any kind of file is accepted (a
/// pipe such as `<(...)` is a fine way to hand `aldb-config-check` a file), but only the bound is
/// read.
fn read_config_text(path: &Path) -> std::io::Result<String> {
    let mut text = String::new();
    let read = std::fs::File::open(path)?.take(MAX_CONFIG_FILE_BYTES + 1).read_to_string(&mut text)?;
    if read as u64 > MAX_CONFIG_FILE_BYTES {
        return Err(std::io::Error::other(format!(
            "longer than {MAX_CONFIG_FILE_BYTES} bytes, so not a plugin config"
        )));
    }
    Ok(text)
}

/// Checks that `dir` can hold snapshot files: if it exists it must be a directory, else its
/// nearest existing ancestor must be one; either must accept a new file, which is created and
/// removed at once. With `create`, the directory itself is created first (as the plugin does at
/// load); without, nothing is left behind (as `aldb-config-check` promises).
fn probe_snapshot_dir(dir: &Path, create: bool) -> Result<(), SnapshotDirError> {
    use std::io::ErrorKind;
    if create {
        std::fs::create_dir_all(dir).map_err(|source| SnapshotDirError::Create { dir: dir.to_path_buf(), source })?;
    }
    let mut at = dir;
    loop {
        match std::fs::metadata(at) {
            Ok(m) if m.is_dir() => break,
            Ok(_) if at == dir => return Err(SnapshotDirError::NotADirectory { dir: dir.to_path_buf() }),
            Ok(_) => return Err(SnapshotDirError::AncestorNotADirectory { at: at.to_path_buf() }),
            // Missing, or under something that is not a directory: look further up.
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => match at.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => at = parent,
                // A relative path with no existing component: the working directory holds it.
                _ => {
                    at = Path::new(".");
                    break;
                }
            },
            Err(source) => return Err(SnapshotDirError::Check { at: at.to_path_buf(), source }),
        }
    }
    // Process id and time: a probe left by a crashed process cannot collide with this one.
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let probe = at.join(format!(".aldb-probe-{}-{nanos}", std::process::id()));
    let made = std::fs::OpenOptions::new().write(true).create_new(true).open(&probe);
    let what = if at == dir { "is not writable" } else { "cannot be created" };
    match made {
        Ok(_) => std::fs::remove_file(&probe).map_err(|source| SnapshotDirError::RemoveProbe { probe, source }),
        Err(source) => Err(SnapshotDirError::NoFile { what, at: at.to_path_buf(), source }),
    }
}

/// Why `snapshot_dir` cannot hold snapshot files (what follows "`snapshot_dir`" in the message).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotDirError {
    /// The directory could not be created.
    #[error("cannot create {}: {source}", dir.display())]
    Create {
        /// The directory.
        dir: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The path exists and is something else.
    #[error("{} exists and is not a directory", dir.display())]
    NotADirectory {
        /// The directory.
        dir: PathBuf,
    },
    /// A path above it exists and is not a directory.
    #[error("cannot be created: {} is not a directory", at.display())]
    AncestorNotADirectory {
        /// The path above it.
        at: PathBuf,
    },
    /// The path or one above it could not be looked at.
    #[error("cannot check {}: {source}", at.display())]
    Check {
        /// The path looked at.
        at: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The probe file could not be removed.
    #[error("cannot remove the probe {}: {source}", probe.display())]
    RemoveProbe {
        /// The probe file.
        probe: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// No file can be created in the directory (or, when it is missing, in the nearest existing
    /// directory above it).
    #[error("{what}: cannot create a file in {}: {source}", at.display())]
    NoFile {
        /// `is not writable` (the directory itself) or `cannot be created` (one above it).
        what: &'static str,
        /// The directory tried.
        at: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

fn level_name<S: serde::Serializer>(level: &log::LevelFilter, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&level.as_str().to_ascii_lowercase())
}

/// Why a config file was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The file is not valid JSON5, lacks a required field, has an unknown one, or a value of the
    /// wrong type.
    #[error("invalid config{}: {message}", in_file(.path.as_deref()))]
    Parse {
        /// The file, when parsing one.
        path: Option<PathBuf>,
        /// The parser's message, with its line and column.
        message: String,
    },
    /// A value is out of range.
    #[error("invalid config{}: `{field}` {reason}", in_file(.path.as_deref()))]
    Invalid {
        /// The file, when parsing one.
        path: Option<PathBuf>,
        /// The field.
        field: &'static str,
        /// What is wrong with its value.
        reason: String,
    },
    /// `snapshot_dir` cannot hold snapshot files.
    #[error("invalid config{}: `snapshot_dir` {source}", in_file(.path.as_deref()))]
    SnapshotDir {
        /// The file, when parsing one.
        path: Option<PathBuf>,
        /// What is wrong with the directory.
        source: SnapshotDirError,
    },
    /// The signing key `keypair` names cannot be read.
    #[error("invalid config{}: `keypair` {source}", in_file(.path.as_deref()))]
    Keypair {
        /// The config file, when parsing one.
        path: Option<PathBuf>,
        /// Why the key cannot be read.
        source: aldb_snapshot::records::RecordsError,
    },
    /// `genesis_hash` is not a base58 hash.
    #[error(
        "invalid config{}: `genesis_hash` must be a base58 hash as `getGenesisHash` returns it: {source}",
        in_file(.path.as_deref())
    )]
    GenesisHash {
        /// The config file, when parsing one.
        path: Option<PathBuf>,
        /// What the decoder refused.
        source: aldb_verify::JsonError,
    },
    /// The file `genesis_path` names cannot be read.
    #[error("invalid config{}: `genesis_path` cannot read {}: {source}", in_file(.path.as_deref()), file.display())]
    GenesisPath {
        /// The config file, when parsing one.
        path: Option<PathBuf>,
        /// The genesis file.
        file: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

fn in_file(path: Option<&Path>) -> String {
    path.map(|p| format!(" in {}", p.display())).unwrap_or_default()
}

impl ConfigError {
    fn with_path(mut self, file: &Path) -> Self {
        match &mut self {
            Self::Parse { path, .. }
            | Self::Invalid { path, .. }
            | Self::SnapshotDir { path, .. }
            | Self::Keypair { path, .. }
            | Self::GenesisHash { path, .. }
            | Self::GenesisPath { path, .. } => *path = Some(file.to_path_buf()),
            Self::Read { .. } => {}
        }
        self
    }
}

/// The parser's message, with the offending line quoted: for a value of the wrong type the
/// parser names only the position, and the line shows which field it is.
fn parse_message(e: &json5::Error, text: &str) -> String {
    let near = e.position().and_then(|p| text.lines().nth(p.line)).map(str::trim).filter(|l| !l.is_empty());
    // The parser's own message can quote a value or a field name of any length.
    let message: String = e.to_string().chars().take(300).collect();
    match near {
        Some(line) => {
            let line: String = line.chars().take(80).collect();
            format!("{message} (near `{line}`)")
        }
        None => message,
    }
}

fn invalid(field: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { path: None, field, reason: reason.into() }
}

/// `value` if it lies in `lo..=hi`, else an error naming the field and the range.
fn in_range<T: PartialOrd + std::fmt::Display + Copy>(
    field: &'static str,
    value: T,
    lo: T,
    hi: T,
) -> Result<T, ConfigError> {
    if value < lo || value > hi {
        return Err(invalid(field, format!("must be from {lo} to {hi}, got {value}")));
    }
    Ok(value)
}

impl Config {
    /// Reads and checks a config file: the values, the files it names, and that `snapshot_dir`
    /// could be created and written (without creating it: see [`Config::prepare_snapshot_dir`]).
    /// Relative `libpath` and `snapshot_dir` are resolved against the file's directory.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = read_config_text(path).map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
        let base = path.parent().unwrap_or_else(|| Path::new(""));
        let config = Self::parse(&text, base).map_err(|e| e.with_path(path))?;
        probe_snapshot_dir(&config.snapshot_dir, false)
            .map_err(|source| ConfigError::SnapshotDir { path: None, source }.with_path(path))?;
        Ok(config)
    }

    /// Creates `snapshot_dir` if missing and checks that a file can be written in it (a probe
    /// file, removed at once). The plugin runs this at load, so a directory it cannot use stops
    /// the validator at start with the reason rather than failing on the first snapshot.
    pub fn prepare_snapshot_dir(&self) -> Result<(), ConfigError> {
        probe_snapshot_dir(&self.snapshot_dir, true).map_err(|source| ConfigError::SnapshotDir { path: None, source })
    }

    /// Parses and checks config text. Relative paths are resolved against `base` (pass `""` to
    /// leave them relative to the working directory).
    pub fn parse(text: &str, base: &Path) -> Result<Self, ConfigError> {
        let raw: RawConfig =
            json5::from_str(text).map_err(|e| ConfigError::Parse { path: None, message: parse_message(&e, text) })?;
        Self::resolve(raw, base)
    }

    fn resolve(raw: RawConfig, base: &Path) -> Result<Self, ConfigError> {
        if raw.libpath.trim().is_empty() {
            return Err(invalid("libpath", "must name the plugin library (agave loads it from there)"));
        }
        if raw.snapshot_dir.as_os_str().is_empty() {
            return Err(invalid("snapshot_dir", "must not be empty"));
        }
        let snapshot_dir = base.join(&raw.snapshot_dir);
        if snapshot_dir.exists() && !snapshot_dir.is_dir() {
            return Err(invalid("snapshot_dir", format!("{} exists and is not a directory", snapshot_dir.display())));
        }
        let threads = in_range("threads", raw.threads.unwrap_or_else(default_threads), 1, MAX_THREADS)?;
        let max_pending_slots = in_range(
            "max_pending_slots",
            raw.max_pending_slots.unwrap_or(DEFAULT_MAX_PENDING_SLOTS),
            1,
            MAX_PENDING_SLOTS,
        )?;
        let snapshot_every =
            in_range("snapshot_every", raw.snapshot_every.unwrap_or(DEFAULT_SNAPSHOT_EVERY), 1, MAX_SNAPSHOT_EVERY)?;
        if raw.commitment == Some(CommitmentLevel::Processed) && snapshot_every != 1 {
            // Banks on forks are written against their parents' files: none may be skipped.
            return Err(invalid(
                "snapshot_every",
                "must be 1 with `commitment: \"processed\"` (every frozen bank is written)",
            ));
        }
        let keep_slots = in_range("keep_slots", raw.keep_slots.unwrap_or(DEFAULT_KEEP_SLOTS), 1, MAX_SNAPSHOT_SLOTS)?;
        let refresh_slots =
            in_range("refresh_slots", raw.refresh_slots.unwrap_or(DEFAULT_REFRESH_SLOTS), 1, MAX_SNAPSHOT_SLOTS)?;
        let record_keep_slots = in_range(
            "record_keep_slots",
            raw.record_keep_slots.unwrap_or(DEFAULT_RECORD_KEEP_SLOTS),
            1,
            MAX_RECORD_KEEP_SLOTS,
        )?;
        let snapshot_queue =
            in_range("snapshot_queue", raw.snapshot_queue.unwrap_or(DEFAULT_SNAPSHOT_QUEUE), 1, MAX_SNAPSHOT_QUEUE)?;
        let expected_accounts = in_range(
            "expected_accounts",
            raw.expected_accounts.unwrap_or(DEFAULT_EXPECTED_ACCOUNTS),
            1,
            MAX_EXPECTED_ACCOUNTS,
        )?;
        let leaves_per_bucket = in_range(
            "leaves_per_bucket",
            raw.leaves_per_bucket.unwrap_or(aldb_core::LEAVES_PER_BUCKET),
            1,
            MAX_LEAVES_PER_BUCKET,
        )?;
        let metrics_addr = match raw.metrics_addr.as_deref() {
            None => None,
            Some(s) => Some(s.trim().parse::<SocketAddr>().map_err(|_| {
                invalid(
                    "metrics_addr",
                    format!("must be an IP address and port such as \"127.0.0.1:9898\", got {}", Excerpt(s)),
                )
            })?),
        };
        let log_level = match raw.log_level.as_deref() {
            None => DEFAULT_LOG_LEVEL,
            Some(s) => s.trim().parse::<log::LevelFilter>().map_err(|_| {
                invalid("log_level", format!("must be one of off, error, warn, info, debug, trace; got {}", Excerpt(s)))
            })?,
        };
        let keypair = match &raw.keypair {
            None => None,
            Some(p) if p.as_os_str().is_empty() => return Err(invalid("keypair", "must not be empty")),
            Some(p) => {
                let path = base.join(p);
                // Read now, so a missing or damaged key stops the validator at start rather than
                // leaving every record unsigned. The key is read again when the plugin starts.
                aldb_snapshot::records::Signer::from_keypair_file(&path)
                    .map_err(|source| ConfigError::Keypair { path: None, source })?;
                Some(path)
            }
        };
        let genesis_path = raw.genesis_path.as_ref().map(|p| base.join(p));
        let genesis_hash = match (raw.genesis_hash.as_deref(), &genesis_path) {
            (Some(_), Some(_)) => {
                return Err(invalid("genesis_hash", "and `genesis_path` are both set; set one of them"));
            }
            (Some(s), None) => Some(
                aldb_verify::hash_from_base58(s.trim())
                    .map_err(|source| ConfigError::GenesisHash { path: None, source })?,
            ),
            (None, Some(p)) => Some(genesis_hash_of_file(p).map_err(|source| ConfigError::GenesisPath {
                path: None,
                file: p.clone(),
                source,
            })?),
            (None, None) => None,
        };
        #[cfg(feature = "patched-interface")]
        let (block_metadata_version, vote_evidence) = {
            let v = raw.block_metadata_version.unwrap_or(4);
            if !(4..=5).contains(&v) {
                return Err(invalid("block_metadata_version", format!("must be 4 or 5, got {v}")));
            }
            let evidence = raw.vote_evidence.unwrap_or(false);
            if evidence && v != 5 {
                return Err(invalid("vote_evidence", "needs `block_metadata_version: 5` (the bank hash and `h`)"));
            }
            (v, evidence)
        };
        if keypair.is_some() && genesis_hash.is_none() {
            return Err(invalid(
                "keypair",
                "is set but neither `genesis_hash` nor `genesis_path` is: records need the genesis hash",
            ));
        }
        Ok(Self {
            libpath: base.join(raw.libpath),
            name: raw.name,
            snapshot_dir,
            threads,
            commitment: raw.commitment.unwrap_or_default(),
            max_pending_slots,
            snapshot_every,
            keep_slots,
            refresh_slots,
            hold_for_shipper: raw.hold_for_shipper.unwrap_or(false),
            record_keep_slots,
            snapshot_queue,
            snapshot_direct_io: raw.snapshot_direct_io.unwrap_or(true),
            expected_accounts,
            leaves_per_bucket,
            pin_workers: raw.pin_workers.unwrap_or(false),
            metrics_addr,
            log_level,
            keypair,
            genesis_hash,
            genesis_path,
            #[cfg(feature = "patched-interface")]
            block_metadata_version,
            #[cfg(feature = "patched-interface")]
            vote_evidence,
        })
    }

    /// Why no root records will be produced, if none will: neither `genesis_hash` nor
    /// `genesis_path` is set. Roots and snapshots are unaffected.
    pub fn records_disabled_reason(&self) -> Option<&'static str> {
        self.genesis_hash
            .is_none()
            .then_some("no root records: set `genesis_hash` or `genesis_path` in the plugin config to produce them")
    }

    /// The adapter settings: this config's commitment, pending bound and engine layout, with
    /// change capture on (the snapshot writer needs it).
    pub fn adapter_config(&self) -> geyser_adapter::AdapterConfig {
        let engine =
            aldb_core::Config::for_leaves_per_bucket(self.expected_accounts, self.threads, self.leaves_per_bucket)
                .with_pinned_workers(self.pin_workers);
        let mut c = geyser_adapter::AdapterConfig::new(self.commitment.to_adapter(), engine);
        c.max_pending_slots = self.max_pending_slots;
        c.capture_changes = Some(aldb_snapshot::CAPTURE_OPTIONS);
        c
    }

    /// The snapshot writer settings.
    pub fn writer_config(&self) -> aldb_snapshot::WriterConfig {
        let mut w = aldb_snapshot::WriterConfig::new(&self.snapshot_dir);
        w.every = self.snapshot_every;
        w.keep_slots = self.keep_slots;
        w.refresh_slots = self.refresh_slots;
        w.hold_for_shipper = self.hold_for_shipper;
        w.queue_bound = self.snapshot_queue;
        w.direct_io = self.snapshot_direct_io;
        w.forks = self.commitment == CommitmentLevel::Processed;
        w
    }

    /// The node pipeline's settings: the writer's, and root records when a genesis hash is set
    /// (at `confirmed` each committed slot gets a `confirmed` record and, once rooted, a
    /// `finalized` one; at `finalized` the `finalized` one; at `processed` each frozen bank gets
    /// one at each level it reaches). Failed writes are the writer's to retry; a record log that
    /// cannot be opened pauses records, tried again every 64 commits.
    pub fn node_config(&self) -> aldb_node::NodeConfig {
        use aldb_node::{Levels, RecordSettings, Schedule};
        use aldb_verify::Commitment;
        let schedule = match self.commitment {
            CommitmentLevel::Confirmed => Schedule::AtCommit(Commitment::Confirmed),
            CommitmentLevel::Finalized => Schedule::AtCommit(Commitment::Finalized),
            CommitmentLevel::Processed => Schedule::AtStatus(Levels::BOTH),
        };
        let records = self.genesis_hash.map(|genesis_hash| RecordSettings {
            genesis_hash,
            keypair: self.keypair.clone(),
            keep_slots: self.record_keep_slots,
            schedule,
            reopen_every: RECORD_RETRY_COMMITS,
            must_open: false,
        });
        aldb_node::NodeConfig {
            name: "aldb-plugin",
            writer: self.writer_config(),
            writes: aldb_node::WritePolicy::HandOff,
            records,
            bank_hash_slots: BANK_ROOTS_SLOTS,
        }
    }

    /// The effective config as pretty JSON (what `aldb-config-check` prints).
    pub fn to_json(&self) -> String {
        // Serializing plain strings, numbers and paths cannot fail except on a non-UTF-8 path.
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adapter_and_writer_settings_follow_the_config() {
        let c = Config::parse(
            "{libpath: 'x.so', snapshot_dir: 's', threads: 3, commitment: 'finalized', max_pending_slots: 9,
              snapshot_every: 2, keep_slots: 5, refresh_slots: 7, snapshot_queue: 8}",
            Path::new("/base"),
        )
        .unwrap();
        let a = c.adapter_config();
        assert_eq!(a.commitment, geyser_adapter::Commitment::Finalized);
        assert_eq!(a.engine.threads, 3);
        assert_eq!(a.max_pending_slots, 9);
        assert_eq!(a.capture_changes, Some(aldb_snapshot::CAPTURE_OPTIONS));
        a.validate().unwrap();
        let w = c.writer_config();
        assert_eq!((w.every, w.keep_slots, w.refresh_slots, w.queue_bound), (2, 5, 7, 8));
        assert!(!w.hold_for_shipper);
        let held =
            Config::parse("{libpath: 'x.so', snapshot_dir: 's', hold_for_shipper: true}", Path::new("/b")).unwrap();
        assert!(held.writer_config().hold_for_shipper);
        assert_eq!(w.dir, Path::new("/base/s"));
        assert_eq!((c.keypair.as_ref(), c.genesis_hash), (None, None));
        assert!(c.records_disabled_reason().is_some());
        assert_eq!(c.record_keep_slots, DEFAULT_RECORD_KEEP_SLOTS);
        let kept =
            Config::parse("{libpath: 'x.so', snapshot_dir: 's', record_keep_slots: 77}", Path::new("/b")).unwrap();
        assert_eq!(kept.record_keep_slots, 77);
        let zero = Config::parse("{libpath: 'x.so', snapshot_dir: 's', record_keep_slots: 0}", Path::new("/b"));
        assert!(zero.unwrap_err().to_string().contains("record_keep_slots"));
    }

    #[test]
    fn processed_commitment_writes_every_bank_in_fork_mode() {
        let c =
            Config::parse("{libpath: 'x.so', snapshot_dir: 's', commitment: 'processed'}", Path::new("/b")).unwrap();
        assert_eq!(c.commitment, CommitmentLevel::Processed);
        assert_eq!(c.adapter_config().commitment, geyser_adapter::Commitment::Processed);
        let w = c.writer_config();
        assert!(w.forks && w.every == 1);
        assert!(c.to_json().contains("\"processed\""));
        let every = Config::parse(
            "{libpath: 'x.so', snapshot_dir: 's', commitment: 'processed', snapshot_every: 4}",
            Path::new("/b"),
        );
        assert!(every.unwrap_err().to_string().contains("snapshot_every"));
        assert!(!Config::parse("{libpath: 'x.so', snapshot_dir: 's'}", Path::new("/b")).unwrap().writer_config().forks);
        let bad = Config::parse("{libpath: 'x.so', snapshot_dir: 's', commitment: 'recent'}", Path::new("/b"));
        assert!(bad.is_err());
    }

    fn keypair_file(dir: &Path) -> PathBuf {
        let seed = [3u8; 32];
        let public = aldb_snapshot::records::Signer::from_seed(&seed).identity();
        let bytes: Vec<u8> = seed.iter().chain(public.iter()).copied().collect();
        let path = dir.join("id.json");
        std::fs::write(&path, serde_json::to_string(&bytes).unwrap()).unwrap();
        path
    }

    #[test]
    fn record_settings_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path();
        keypair_file(base);
        std::fs::write(base.join("genesis.bin"), b"genesis bytes").unwrap();
        let parse = |extra: &str| Config::parse(&format!("{{libpath: 'x.so', snapshot_dir: 's', {extra}}}"), base);

        let c = parse("keypair: 'id.json', genesis_path: 'genesis.bin'").unwrap();
        assert_eq!(c.keypair, Some(base.join("id.json")));
        let want: [u8; 32] = {
            use sha2::Digest;
            sha2::Sha256::digest(b"genesis bytes").into()
        };
        assert_eq!(c.genesis_hash, Some(want));
        assert!(c.records_disabled_reason().is_none());
        assert!(c.to_json().contains(&aldb_verify::hash_to_base58(&want)));

        let h = aldb_verify::hash_to_base58(&[7; 32]);
        let c = parse(&format!("genesis_hash: '{h}'")).unwrap();
        assert_eq!((c.genesis_hash, c.keypair), (Some([7; 32]), None));

        let err = |extra: &str| parse(extra).unwrap_err().to_string();
        assert!(err("keypair: 'id.json'").contains("genesis"), "{}", err("keypair: 'id.json'"));
        assert!(err("keypair: 'missing.json', genesis_hash: 'x'").contains("keypair"));
        assert!(err(&format!("genesis_hash: '{h}', genesis_path: 'genesis.bin'")).contains("set one"));
        assert!(err("genesis_hash: 'not base58 0OIl'").contains("genesis_hash"));
        assert!(err("genesis_path: 'nope.bin'").contains("genesis_path"));
        std::fs::write(base.join("bad.json"), "[1, 2, 3]").unwrap();
        assert!(err(&format!("keypair: 'bad.json', genesis_hash: '{h}'")).contains("64"));
        assert!(err("keypairs: 'id.json'").contains("keypairs"));
    }

    #[cfg(not(feature = "patched-interface"))]
    #[test]
    fn the_stock_build_refuses_the_patched_interfaces_keys() {
        for key in ["block_metadata_version: 5", "vote_evidence: true"] {
            let e = Config::parse(&format!("{{libpath: 'x.so', snapshot_dir: 's', {key}}}"), Path::new(""));
            let name = key.split(':').next().unwrap_or_default();
            assert!(matches!(&e, Err(ConfigError::Parse { message, .. }) if message.contains(name)), "{e:?}");
        }
    }

    #[cfg(feature = "patched-interface")]
    #[test]
    fn block_metadata_version_and_vote_evidence_are_checked() {
        let parse =
            |extra: &str| Config::parse(&format!("{{libpath: 'x.so', snapshot_dir: 's', {extra}}}"), Path::new(""));
        let c = parse("").unwrap();
        assert_eq!((c.block_metadata_version, c.vote_evidence), (4, false));
        let c = parse("block_metadata_version: 5, vote_evidence: true").unwrap();
        assert_eq!((c.block_metadata_version, c.vote_evidence), (5, true));
        assert!(c.to_json().contains("\"vote_evidence\": true"));
        let field = |extra: &str| match parse(extra) {
            Err(ConfigError::Invalid { field, .. }) => field,
            other => panic!("{extra}: {other:?}"),
        };
        assert_eq!(field("block_metadata_version: 6"), "block_metadata_version");
        assert_eq!(field("block_metadata_version: 3"), "block_metadata_version");
        assert_eq!(field("vote_evidence: true"), "vote_evidence");
        assert_eq!(field("block_metadata_version: 4, vote_evidence: true"), "vote_evidence");
    }
}
