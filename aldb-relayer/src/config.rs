//! The relayer's configuration file (JSON5).
//!
//! ```json5
//! {
//!   // Hyades servers to follow, each over WebSocket (`http://` is taken as `ws://`).
//!   endpoints: ["ws://10.0.0.1:8899/ws", "ws://10.0.0.2:8899/ws", "ws://10.0.0.3:8899/ws"],
//!   // The attesting identities (validator keys, base58) and how many must sign a record.
//!   identities: ["<pubkey>", "<pubkey>", "<pubkey>"],
//!   threshold: 2,
//!   // The cluster (as getGenesisHash returns it); records of any other cluster are rejected.
//!   genesis_hash: "<base58>",
//!   // The commitment level whose record chain is followed: "finalized" (default) or "confirmed".
//!   commitment: "finalized",
//!   // Chain state (`<slot> <record hash>`), replaced atomically after every accepted root.
//!   cursor_file: "relayer.cursor",
//!   // Accepted roots, one `<slot> <base58 root>` line each, appended and synced.
//!   output_file: "roots.txt",
//!   // Without a cursor: the first record at or after this slot that reaches the threshold is
//!   // the trust anchor. Default 0.
//!   start_slot: 0,
//!   // Reconnect delay after a failed or lost connection: doubles from initial_ms up to max_ms.
//!   reconnect: { initial_ms: 100, max_ms: 10000 },
//!   // Serve Prometheus metrics at http://ADDR/metrics. Default: off.
//!   metrics_addr: "127.0.0.1:9900",
//!   // Serve accepted roots as JSON at http://ADDR/roots?from=SLOT&limit=N. Default: off.
//!   roots_addr: "127.0.0.1:9901",
//!   // Warn when an endpoint has sent no record for this long (0: never). Default 30000.
//!   quiet_warning_ms: 30000,
//! }
//! ```
//!
//! On a chain with the aldb patches (the epoch set bound in every bank hash, `docs/SPEC.md` §11),
//! `trust: "votes"` accepts a root on the votes of its epoch's validator set instead, trusting
//! only a checkpoint:
//!
//! ```json5
//! {
//!   endpoints: ["ws://10.0.0.1:8899/ws", "ws://10.0.0.2:8899/ws"],
//!   trust: "votes",
//!   // The §11.5 checkpoint: the schedule, a set the operator trusts, its time, the trusting period.
//!   checkpoint: "checkpoint.json",
//!   // The light client's state and the cursor, replaced atomically after every change.
//!   state_file: "relayer.state.json",
//!   output_file: "roots.txt",
//!   // "confirmed" (default in this mode) or "finalized": the level of the root feed followed.
//!   commitment: "confirmed",
//!   // Give up on a slot whose votes have not reached 2/3 after this long. Default 60000.
//!   slot_timeout_ms: 60000,
//! }
//! ```
//!
//! `identities`, `threshold`, `genesis_hash` and `cursor_file` belong to the k-of-n mode and are
//! refused with `trust: "votes"`; `checkpoint`, `state_file` and `slot_timeout_ms` are refused
//! without it.
//!
//! Unknown fields are errors. Relative paths are resolved against the file's directory.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use aldb_verify::{Commitment, Hash, Quorum};
use serde::Deserialize;

use crate::error::ConfigError;

/// Reconnect backoff, as written in the file.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RawBackoff {
    /// First delay after a failure, in milliseconds. Default 100.
    #[serde(default = "default_initial_ms")]
    pub initial_ms: u64,
    /// Largest delay, in milliseconds. Default 10000.
    #[serde(default = "default_max_ms")]
    pub max_ms: u64,
}

fn default_initial_ms() -> u64 {
    100
}

fn default_max_ms() -> u64 {
    10_000
}

impl Default for RawBackoff {
    fn default() -> Self {
        Self { initial_ms: default_initial_ms(), max_ms: default_max_ms() }
    }
}

/// A source silent for half a minute: some 75 slots, where a healthy feed sends a record a slot.
fn default_quiet_warning_ms() -> u64 {
    30_000
}

/// A slot's votes land within the 32 slots after it (some 13 s); a minute is more than four
/// times that, room for a feed or a service that lags.
fn default_slot_timeout_ms() -> u64 {
    60_000
}

/// The file's fields, before checking.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    /// Hyades WebSocket (or HTTP) URLs.
    pub endpoints: Vec<String>,
    /// `"k-of-n"` (default) or `"votes"`.
    #[serde(default)]
    pub trust: Option<String>,
    /// Attesting identities, base58 public keys (k-of-n).
    #[serde(default)]
    pub identities: Option<Vec<String>>,
    /// How many distinct identities must sign one record (k-of-n).
    #[serde(default)]
    pub threshold: Option<usize>,
    /// The cluster's genesis hash, base58 (k-of-n).
    #[serde(default)]
    pub genesis_hash: Option<String>,
    /// `finalized` (default for k-of-n) or `confirmed` (default for votes).
    #[serde(default)]
    pub commitment: Option<String>,
    /// The cursor file (k-of-n).
    #[serde(default)]
    pub cursor_file: Option<PathBuf>,
    /// The §11.5 checkpoint file (votes).
    #[serde(default)]
    pub checkpoint: Option<PathBuf>,
    /// The light client's state and cursor (votes).
    #[serde(default)]
    pub state_file: Option<PathBuf>,
    /// Give up on a slot after this many milliseconds without 2/3 of its votes (votes).
    #[serde(default)]
    pub slot_timeout_ms: Option<u64>,
    /// The output file.
    pub output_file: PathBuf,
    /// First slot considered when there is no cursor.
    #[serde(default)]
    pub start_slot: u64,
    /// Reconnect backoff.
    #[serde(default)]
    pub reconnect: RawBackoff,
    /// Prometheus `/metrics` listener, e.g. `"127.0.0.1:9900"`; none by default.
    #[serde(default)]
    pub metrics_addr: Option<String>,
    /// `GET /roots` listener, e.g. `"127.0.0.1:9901"`; none by default.
    #[serde(default)]
    pub roots_addr: Option<String>,
    /// Warn once an endpoint has sent no record for this many milliseconds; 0 never warns.
    #[serde(default = "default_quiet_warning_ms")]
    pub quiet_warning_ms: u64,
}

/// What a root is accepted on.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Trust {
    /// Signed root records attested by `k` of `n` identities (`docs/SPEC.md` §9.4).
    Signers(Signers),
    /// The votes of the slot's epoch set, followed from a checkpoint (`docs/SPEC.md` §11).
    Votes(VotesTrust),
}

/// The k-of-n mode's settings.
#[derive(Clone, Debug)]
pub struct Signers {
    /// The configured identities, in the file's order.
    pub identities: Vec<[u8; 32]>,
    /// The k-of-n rule over them.
    pub quorum: Quorum,
    /// The cluster's genesis hash.
    pub genesis_hash: Hash,
    /// The cursor file.
    pub cursor_file: PathBuf,
}

/// The votes mode's settings.
#[derive(Clone, Debug)]
pub struct VotesTrust {
    /// The §11.5 checkpoint file, read when there is no state file yet.
    pub checkpoint: PathBuf,
    /// The light client's state and the cursor, one JSON file replaced atomically.
    pub state_file: PathBuf,
    /// A slot whose votes do not reach 2/3 within this long is given up.
    pub slot_timeout: Duration,
}

/// A checked configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// WebSocket URLs (`ws://`), one per Hyades server.
    pub endpoints: Vec<String>,
    /// What a root is accepted on, and that mode's settings.
    pub trust: Trust,
    /// The commitment level followed: the record chain's (k-of-n; records of the other level are
    /// ignored), or the root feed's (votes).
    pub commitment: Commitment,
    /// The output file.
    pub output_file: PathBuf,
    /// First slot considered when there is no cursor.
    pub start_slot: u64,
    /// First reconnect delay.
    pub backoff_initial: Duration,
    /// Largest reconnect delay.
    pub backoff_max: Duration,
    /// Where to serve Prometheus metrics, if anywhere.
    pub metrics_addr: Option<SocketAddr>,
    /// Where to serve accepted roots as JSON (`GET /roots`), if anywhere.
    pub roots_addr: Option<SocketAddr>,
    /// An endpoint that sends no record for this long is logged as quiet (`None`: never).
    pub quiet_warning: Option<Duration>,
}

/// At most 100 characters of a value quoted in an error: the file may hold anything.
fn clip(s: &str) -> &str {
    match s.char_indices().nth(100) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

fn invalid(field: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { field, reason: reason.into() }
}

/// The WebSocket URL for an endpoint as configured: `ws://` as is, `http://` as `ws://` (Hyades
/// serves both on one port). TLS is not built in: put a TLS-terminating proxy in front, or use a
/// loopback or private address. An endpoint it refuses is an invalid `endpoints` entry.
pub fn websocket_url(endpoint: &str) -> Result<String, ConfigError> {
    let e = endpoint.trim();
    let bad = |reason: String| invalid("endpoints", reason);
    let (scheme, rest) =
        e.split_once("://").ok_or_else(|| bad(format!("{:?} is not a URL (expected ws://host:port/ws)", clip(e))))?;
    if rest.is_empty() || rest.starts_with('/') {
        return Err(bad(format!("{:?} has no host", clip(e))));
    }
    match scheme.to_ascii_lowercase().as_str() {
        "ws" | "http" => Ok(format!("ws://{rest}")),
        "wss" | "https" => {
            Err(bad(format!("{:?}: TLS is not supported; use ws:// (behind a TLS proxy if needed)", clip(e))))
        }
        other => Err(bad(format!("{:?}: unknown scheme {:?} (expected ws:// or http://)", clip(e), clip(other)))),
    }
}

impl Config {
    /// Reads and checks a config file; relative paths are resolved against its directory.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        // Read with a bound, so a path such as /dev/zero cannot fill memory: no config is 1 MiB.
        const MAX_CONFIG_FILE_BYTES: u64 = 1 << 20;
        let read = || -> std::io::Result<String> {
            use std::io::Read;
            let mut text = String::new();
            std::fs::File::open(path)?.take(MAX_CONFIG_FILE_BYTES + 1).read_to_string(&mut text)?;
            if text.len() as u64 > MAX_CONFIG_FILE_BYTES {
                return Err(std::io::Error::other(format!(
                    "longer than {MAX_CONFIG_FILE_BYTES} bytes, so not a relayer config"
                )));
            }
            Ok(text)
        };
        let text = read().map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
        let base = path.parent().unwrap_or_else(|| Path::new(""));
        Self::parse(&text, base)
    }

    /// Parses and checks config text, relative paths as they are (resolved against the current
    /// directory when used). Any text gives a config or an error, never a panic.
    pub fn from_json5_str(text: &str) -> Result<Self, ConfigError> {
        Self::parse(text, Path::new(""))
    }

    /// Parses and checks config text; relative paths are resolved against `base`.
    pub fn parse(text: &str, base: &Path) -> Result<Self, ConfigError> {
        let raw: RawConfig = json5::from_str(text).map_err(|e| ConfigError::Parse { message: e.to_string() })?;
        Self::resolve(raw, base)
    }

    /// Checks parsed fields.
    pub fn resolve(raw: RawConfig, base: &Path) -> Result<Self, ConfigError> {
        if raw.endpoints.is_empty() {
            return Err(invalid("endpoints", "list at least one Hyades server"));
        }
        let mut endpoints = Vec::with_capacity(raw.endpoints.len());
        for e in &raw.endpoints {
            let url = websocket_url(e)?;
            if endpoints.contains(&url) {
                return Err(invalid("endpoints", format!("{} is listed twice", clip(&url))));
            }
            endpoints.push(url);
        }
        let votes = match raw.trust.as_deref().map(str::trim) {
            None | Some("k-of-n") => false,
            Some("votes") => true,
            Some(other) => {
                return Err(invalid("trust", format!("{:?} is neither \"k-of-n\" nor \"votes\"", clip(other))));
            }
        };
        if raw.output_file.as_os_str().is_empty() {
            return Err(invalid("output_file", "must not be empty"));
        }
        let output_file = base.join(&raw.output_file);
        let trust = if votes { Trust::Votes(votes_trust(&raw, base, &output_file)?) } else { signers(&raw, base)? };
        if let Trust::Signers(s) = &trust
            && s.cursor_file == output_file
        {
            return Err(invalid("cursor_file", "must differ from output_file"));
        }
        let default_level = if votes { "confirmed" } else { "finalized" };
        let level = raw.commitment.as_deref().unwrap_or(default_level);
        let commitment = Commitment::from_name(level.trim()).ok_or_else(|| {
            invalid("commitment", format!("{:?} is neither \"confirmed\" nor \"finalized\"", clip(level)))
        })?;
        if raw.reconnect.initial_ms == 0 || raw.reconnect.max_ms < raw.reconnect.initial_ms {
            return Err(invalid("reconnect", "need 1 <= initial_ms <= max_ms"));
        }
        let metrics_addr = match &raw.metrics_addr {
            None => None,
            Some(a) => Some(
                a.trim()
                    .parse()
                    .map_err(|e| invalid("metrics_addr", format!("{:?} is not host:port: {e}", clip(a))))?,
            ),
        };
        let roots_addr = match &raw.roots_addr {
            None => None,
            Some(a) => Some(
                a.trim().parse().map_err(|e| invalid("roots_addr", format!("{:?} is not host:port: {e}", clip(a))))?,
            ),
        };
        if roots_addr.is_some() && roots_addr == metrics_addr {
            return Err(invalid("roots_addr", "must differ from metrics_addr"));
        }
        Ok(Self {
            metrics_addr,
            roots_addr,
            endpoints,
            trust,
            commitment,
            output_file,
            start_slot: raw.start_slot,
            backoff_initial: Duration::from_millis(raw.reconnect.initial_ms),
            backoff_max: Duration::from_millis(raw.reconnect.max_ms),
            quiet_warning: (raw.quiet_warning_ms > 0).then(|| Duration::from_millis(raw.quiet_warning_ms)),
        })
    }
}

/// The k-of-n settings; the votes mode's fields are refused here.
fn signers(raw: &RawConfig, base: &Path) -> Result<Trust, ConfigError> {
    for (field, given) in [
        ("checkpoint", raw.checkpoint.is_some()),
        ("state_file", raw.state_file.is_some()),
        ("slot_timeout_ms", raw.slot_timeout_ms.is_some()),
    ] {
        if given {
            return Err(invalid(field, "belongs to trust: \"votes\" (this config follows k-of-n signed records)"));
        }
    }
    let missing = |field: &'static str| invalid(field, "missing (required with k-of-n signed records)");
    let raw_ids = raw.identities.as_ref().ok_or_else(|| missing("identities"))?;
    let mut identities = Vec::with_capacity(raw_ids.len());
    for id in raw_ids {
        let key = aldb_verify::hash_from_base58(id.trim())
            .map_err(|e| invalid("identities", format!("{:?} is not a base58 public key: {e}", clip(id))))?;
        // The quorum rule refuses a repeat too, but cannot say which: name it here.
        if identities.contains(&key) {
            return Err(invalid("identities", format!("{} is listed twice", aldb_verify::hash_to_base58(&key))));
        }
        identities.push(key);
    }
    let threshold = raw.threshold.ok_or_else(|| missing("threshold"))?;
    let quorum = Quorum::new(&identities, threshold).map_err(|e| invalid("threshold", e.to_string()))?;
    let genesis = raw.genesis_hash.as_ref().ok_or_else(|| missing("genesis_hash"))?;
    let genesis_hash = aldb_verify::hash_from_base58(genesis.trim())
        .map_err(|e| invalid("genesis_hash", format!("not a base58 hash: {e}")))?;
    let cursor = raw.cursor_file.as_ref().ok_or_else(|| missing("cursor_file"))?;
    if cursor.as_os_str().is_empty() {
        return Err(invalid("cursor_file", "must not be empty"));
    }
    Ok(Trust::Signers(Signers { identities, quorum, genesis_hash, cursor_file: base.join(cursor) }))
}

/// The votes settings; the k-of-n fields are refused here.
fn votes_trust(raw: &RawConfig, base: &Path, output_file: &Path) -> Result<VotesTrust, ConfigError> {
    for (field, given) in [
        ("identities", raw.identities.is_some()),
        ("threshold", raw.threshold.is_some()),
        ("genesis_hash", raw.genesis_hash.is_some()),
        ("cursor_file", raw.cursor_file.is_some()),
    ] {
        if given {
            return Err(invalid(
                field,
                "belongs to k-of-n signed records; with trust: \"votes\" the checkpoint is all that is trusted \
                 and the cursor lives in state_file",
            ));
        }
    }
    let path = |field: &'static str, p: &Option<PathBuf>| match p {
        Some(p) if !p.as_os_str().is_empty() => Ok(base.join(p)),
        Some(_) => Err(invalid(field, "must not be empty")),
        None => Err(invalid(field, "missing (required with trust: \"votes\")")),
    };
    let checkpoint = path("checkpoint", &raw.checkpoint)?;
    let state_file = path("state_file", &raw.state_file)?;
    if state_file == output_file || state_file == checkpoint {
        return Err(invalid("state_file", "must differ from output_file and checkpoint"));
    }
    let timeout = raw.slot_timeout_ms.unwrap_or_else(default_slot_timeout_ms);
    if timeout == 0 {
        return Err(invalid("slot_timeout_ms", "must be at least 1"));
    }
    Ok(VotesTrust { checkpoint, state_file, slot_timeout: Duration::from_millis(timeout) })
}

/// Whether a record committed at `level` satisfies the configured `required` level.
pub fn meets(level: Commitment, required: Commitment) -> bool {
    rank(level) >= rank(required)
}

fn rank(c: Commitment) -> u8 {
    match c {
        Commitment::Finalized => 2,
        // `Commitment` is non-exhaustive; anything else ranks as the weakest.
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(extra: &str) -> String {
        let id = aldb_verify::hash_to_base58(&[1; 32]);
        let id = id.as_str();
        format!(
            r#"{{ endpoints: ["http://127.0.0.1:1/", "ws://127.0.0.1:2/ws"], identities: ["{id}"], threshold: 1,
                 genesis_hash: "{id}", cursor_file: "c", output_file: "o", {extra} }}"#
        )
    }

    #[test]
    fn parses_defaults_and_rejects_unknown_fields() {
        let c = Config::parse(&text(""), Path::new("/base")).expect("valid");
        assert_eq!(c.endpoints, ["ws://127.0.0.1:1/", "ws://127.0.0.1:2/ws"]);
        assert_eq!(c.commitment, Commitment::Finalized);
        let Trust::Signers(signers) = &c.trust else { panic!("k-of-n is the default") };
        assert_eq!(signers.cursor_file, Path::new("/base/c"));
        assert_eq!(c.start_slot, 0);
        assert_eq!(c.backoff_initial, Duration::from_millis(100));
        assert_eq!(c.quiet_warning, Some(Duration::from_secs(30)));
        let c = Config::parse(&text("quiet_warning_ms: 250,"), Path::new("")).expect("valid");
        assert_eq!(c.quiet_warning, Some(Duration::from_millis(250)));
        let c = Config::parse(&text("quiet_warning_ms: 0,"), Path::new("")).expect("valid");
        assert_eq!(c.quiet_warning, None);
        assert!(matches!(Config::parse(&text("quiet_warning_ms: -1,"), Path::new("")), Err(ConfigError::Parse { .. })));
        assert!(matches!(Config::parse(&text("quiet_warning: 5,"), Path::new("")), Err(ConfigError::Parse { .. })));
        assert!(matches!(Config::parse(&text("colour: 1,"), Path::new("")), Err(ConfigError::Parse { .. })));
        assert!(matches!(
            Config::parse(&text("reconnect: {initial_ms: 5, x: 1},"), Path::new("")),
            Err(ConfigError::Parse { .. })
        ));
        assert!(matches!(
            Config::parse(&text("commitment: \"processed\","), Path::new("")),
            Err(ConfigError::Invalid { field: "commitment", .. })
        ));
        let c = Config::parse(
            &text("commitment: \"confirmed\", start_slot: 9, metrics_addr: \"127.0.0.1:9\","),
            Path::new(""),
        )
        .expect("valid");
        assert_eq!((c.commitment, c.start_slot), (Commitment::Confirmed, 9));
        assert_eq!(c.metrics_addr, Some(SocketAddr::from(([127, 0, 0, 1], 9))));
        assert!(matches!(
            Config::parse(&text("metrics_addr: \"x\","), Path::new("")),
            Err(ConfigError::Invalid { .. })
        ));
        let c = Config::parse(&text("roots_addr: \"127.0.0.1:10\","), Path::new("")).expect("valid");
        assert_eq!(c.roots_addr, Some(SocketAddr::from(([127, 0, 0, 1], 10))));
        assert!(matches!(
            Config::parse(&text("roots_addr: \"127.0.0.1:9\", metrics_addr: \"127.0.0.1:9\","), Path::new("")),
            Err(ConfigError::Invalid { field: "roots_addr", .. })
        ));
        let two = text("").replace("threshold: 1", "threshold: 2");
        assert!(matches!(Config::parse(&two, Path::new("")), Err(ConfigError::Invalid { field: "threshold", .. })));
        // A repeated identity is named, and blamed on `identities`, not on the threshold.
        let (a, b) = (aldb_verify::hash_to_base58(&[1; 32]), aldb_verify::hash_to_base58(&[2; 32]));
        let twice =
            text("").replace(&format!("identities: [\"{a}\"]"), &format!("identities: [\"{a}\", \"{b}\", \" {a}\"]"));
        let e = Config::parse(&twice, Path::new("")).expect_err("a repeated identity");
        assert!(matches!(&e, ConfigError::Invalid { field: "identities", .. }), "{e}");
        assert!(e.to_string().contains(&format!("{a} is listed twice")), "{e}");
        let tls = text("").replace("http://127.0.0.1:1/", "wss://x/");
        assert!(matches!(Config::parse(&tls, Path::new("")), Err(ConfigError::Invalid { field: "endpoints", .. })));
    }

    #[test]
    fn any_text_gives_a_config_or_an_error() {
        assert!(Config::from_json5_str(&text("")).is_ok());
        for bad in
            ["", "{", "[]", "{endpoints: 1}", "\u{0}", "{ endpoints: [\"ws://h/ws\"], identities: [], threshold: 0 }"]
        {
            assert!(Config::from_json5_str(bad).is_err(), "{bad:?}");
        }
        let long = text("").replace("threshold: 1", &format!("threshold: 1{}", "9".repeat(10_000)));
        assert!(Config::from_json5_str(&long).is_err());
        for (from, to) in [
            ("http://127.0.0.1:1/", "z".repeat(10_000)),
            ("genesis_hash: \"", format!("genesis_hash: \"{}", "1".repeat(10_000))),
        ] {
            let e = Config::from_json5_str(&text("").replacen(from, &to, 1)).expect_err("invalid");
            assert!(e.to_string().len() < 400, "{} characters", e.to_string().len());
        }
        let ids = text("").replace("identities: [\"", &format!("identities: [\"{}", "2".repeat(10_000)));
        assert!(Config::from_json5_str(&ids).expect_err("invalid").to_string().len() < 400);
    }

    fn votes_text(extra: &str) -> String {
        format!(
            r#"{{ endpoints: ["ws://127.0.0.1:1/ws"], trust: "votes", checkpoint: "cp.json", state_file: "s.json",
                 output_file: "o", {extra} }}"#
        )
    }

    #[test]
    fn parses_the_votes_mode_and_keeps_each_mode_to_its_fields() {
        let c = Config::parse(&votes_text(""), Path::new("/base")).expect("valid");
        let Trust::Votes(v) = &c.trust else { panic!("votes") };
        assert_eq!(
            (v.checkpoint.as_path(), v.state_file.as_path()),
            (Path::new("/base/cp.json"), Path::new("/base/s.json"))
        );
        assert_eq!(v.slot_timeout, Duration::from_secs(60));
        assert_eq!(c.commitment, Commitment::Confirmed, "votes follow the confirmed feed by default");
        let c =
            Config::parse(&votes_text("slot_timeout_ms: 5, commitment: \"finalized\","), Path::new("")).expect("valid");
        assert_eq!(c.commitment, Commitment::Finalized);
        let id = aldb_verify::hash_to_base58(&[1; 32]);
        for (extra, field) in [
            (format!("identities: [\"{id}\"],"), "identities"),
            ("threshold: 1,".to_string(), "threshold"),
            (format!("genesis_hash: \"{id}\","), "genesis_hash"),
            ("cursor_file: \"c\",".to_string(), "cursor_file"),
            ("slot_timeout_ms: 0,".to_string(), "slot_timeout_ms"),
        ] {
            let e = Config::parse(&votes_text(&extra), Path::new("")).expect_err(&extra);
            assert!(matches!(&e, ConfigError::Invalid { field: f, .. } if *f == field), "{extra}: {e}");
        }
        let e =
            Config::parse(&votes_text("").replace("state_file: \"s.json\",", ""), Path::new("")).expect_err("no state");
        assert!(matches!(&e, ConfigError::Invalid { field: "state_file", .. }), "{e}");
        let e = Config::parse(&votes_text("").replace("\"s.json\"", "\"o\""), Path::new("")).expect_err("same file");
        assert!(matches!(&e, ConfigError::Invalid { field: "state_file", .. }), "{e}");
        let e = Config::parse(&votes_text("").replace("\"votes\"", "\"stake\""), Path::new("")).expect_err("mode");
        assert!(matches!(&e, ConfigError::Invalid { field: "trust", .. }), "{e}");
        for extra in ["checkpoint: \"x\",", "state_file: \"x\",", "slot_timeout_ms: 9,"] {
            let e = Config::parse(&text(extra), Path::new("")).expect_err(extra);
            assert!(e.to_string().contains("belongs to trust: \"votes\""), "{e}");
        }
        let e = Config::parse(&text("").replace("threshold: 1,", ""), Path::new("")).expect_err("k-of-n needs k");
        assert!(matches!(&e, ConfigError::Invalid { field: "threshold", .. }), "{e}");
        assert!(Config::parse(&text("trust: \"k-of-n\","), Path::new("")).is_ok());
    }

    #[test]
    fn commitment_levels_order() {
        assert!(meets(Commitment::Finalized, Commitment::Confirmed));
        assert!(meets(Commitment::Finalized, Commitment::Finalized));
        assert!(!meets(Commitment::Confirmed, Commitment::Finalized));
    }

    #[test]
    fn an_endless_config_file_is_read_only_to_a_bound() {
        let e = Config::from_file(Path::new("/dev/zero")).expect_err("not a config");
        assert!(matches!(&e, ConfigError::Read { .. }) && e.to_string().contains("longer than 1048576 bytes"), "{e}");
    }
}
