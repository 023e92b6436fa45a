//! The JSON form of a [`Proof`], as served by Hyades and printed by the CLI.
//!
//! ```json
//! {
//!   "version": 1,
//!   "siblings": [{"depth": 3, "hash": "<base58>"}, ...],
//!   "terminal": {"kind": "leaf", "path": "<base58>", "value": "<base58>"}
//! }
//! ```
//!
//! `siblings` are ordered from the root down; the terminal is `{"kind": "empty"}` for the empty
//! tree. Every hash is the base58 (Bitcoin alphabet) form of exactly 32 bytes, the same text
//! Solana uses for public keys.
//!
//! Parsing is as strict as the [wire format](crate::wire): unknown fields, a missing field, a
//! version other than [`JSON_VERSION`], a depth outside `0..=255`, base58 that is not exactly 32
//! bytes, depths that do not strictly increase and an empty terminal with siblings are all
//! rejected with a [`JsonError`] naming the field (as a path such as `siblings[2].hash`). The
//! version is checked before anything else, so a document of a later version is reported as
//! such rather than as having unknown fields.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use serde_json::{Map, Number, Value};

use crate::base58::Excerpt;
use crate::proof::{Proof, Sibling, Terminal};
use crate::spec::Hash;
use crate::wire::MAX_SIBLINGS;

/// The value of the `version` field this crate reads and writes.
pub const JSON_VERSION: u64 = 1;

/// The longest base58 text of 32 bytes (`2^256 - 1` takes 44 digits). Longer text is rejected
/// before decoding, which bounds the work per hash whatever the input.
pub const MAX_BASE58_HASH_LEN: usize = crate::base58::MAX_HASH_LEN;

pub use crate::base58::Base58Error;

/// Why a JSON document is not a well-formed proof.
///
/// `field` names where the problem is, as a path from the top-level object: `version`,
/// `siblings[2].depth`, `terminal.path`; the top-level object itself is `proof`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum JsonError {
    /// The text is not JSON at all; the parser's message, with line and column.
    Syntax(String),
    /// A field holds the wrong kind of JSON value.
    WrongType {
        /// Path of the field.
        field: String,
        /// What it should have held, such as "an object".
        expected: &'static str,
    },
    /// A required field is missing.
    MissingField {
        /// Path of the missing field.
        field: String,
    },
    /// A field this version does not define.
    UnknownField {
        /// Path of the unexpected field.
        field: String,
    },
    /// `version` is a number other than [`JSON_VERSION`].
    UnsupportedVersion(Number),
    /// A depth is not an integer in `0..=255`.
    DepthOutOfRange {
        /// Path of the depth.
        field: String,
        /// The number found.
        found: Number,
    },
    /// `terminal.kind` is neither `"leaf"` nor `"empty"`.
    UnknownTerminalKind(String),
    /// More siblings than [`MAX_SIBLINGS`], which no well-formed proof can have.
    TooManySiblings(usize),
    /// A sibling is not deeper than the one before it.
    DepthsNotIncreasing {
        /// Path of the offending depth.
        field: String,
    },
    /// The terminal is empty but there are siblings; only the empty tree has an empty terminal.
    EmptyWithSiblings,
    /// A hash is not the base58 form of exactly 32 bytes.
    Base58 {
        /// Path of the field, or `None` when decoding a lone string with [`hash_from_base58`].
        field: Option<String>,
        /// What is wrong with it.
        error: Base58Error,
    },
}

impl core::fmt::Display for JsonError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Syntax(msg) => write!(f, "proof is not valid JSON: {msg}"),
            Self::WrongType { field, expected } => write!(f, "`{field}` must be {expected}"),
            Self::MissingField { field } => write!(f, "missing field `{field}`"),
            Self::UnknownField { field } => write!(f, "unknown field `{field}`"),
            Self::UnsupportedVersion(v) => {
                write!(f, "unsupported proof version {v} (expected {JSON_VERSION})")
            }
            Self::DepthOutOfRange { field, found } => {
                write!(f, "`{field}` must be an integer in 0..=255, found {found}")
            }
            Self::UnknownTerminalKind(kind) => {
                write!(f, "unknown `terminal.kind` {kind:?} (expected \"leaf\" or \"empty\")")
            }
            Self::TooManySiblings(n) => {
                write!(f, "`siblings` has {n} entries, more than the possible {MAX_SIBLINGS}")
            }
            Self::DepthsNotIncreasing { field } => {
                write!(f, "`{field}` is not deeper than the sibling before it")
            }
            Self::EmptyWithSiblings => f.write_str("an empty terminal must have no siblings"),
            Self::Base58 { field: Some(field), error } => write!(f, "`{field}`: {error}"),
            Self::Base58 { field: None, error } => write!(f, "{error}"),
        }
    }
}

impl std::error::Error for JsonError {}

/// The base58 text of a hash (or public key), as used in the JSON form.
pub fn hash_to_base58(hash: &Hash) -> String {
    bs58::encode(hash).into_string()
}

/// Decodes base58 text that must be exactly 32 bytes: a hash, a key path or a public key.
pub fn hash_from_base58(text: &str) -> Result<Hash, JsonError> {
    decode_hash(text).map_err(|error| JsonError::Base58 { field: None, error })
}

fn decode_hash(text: &str) -> Result<Hash, Base58Error> {
    crate::base58::decode_fixed::<32>(text)
}

/// Outside text as kept in an error: itself if short, else its first [`Excerpt::CHARS`]
/// characters, `…` and its length, so an error never holds unbounded input.
fn bounded(text: &str) -> String {
    match text.char_indices().nth(Excerpt::CHARS) {
        None => text.to_string(),
        Some((cut, _)) => format!("{}… ({} bytes)", &text[..cut], text.len()),
    }
}

/// Joins a parent path and a child name into a field path.
fn child(parent: &str, name: &str) -> String {
    if parent.is_empty() { name.to_string() } else { format!("{parent}.{name}") }
}

fn as_object<'a>(value: &'a Value, field: &str) -> Result<&'a Map<String, Value>, JsonError> {
    value.as_object().ok_or_else(|| JsonError::WrongType {
        field: if field.is_empty() { "proof".to_string() } else { field.to_string() },
        expected: "an object",
    })
}

fn require<'a>(obj: &'a Map<String, Value>, parent: &str, name: &str) -> Result<&'a Value, JsonError> {
    obj.get(name).ok_or_else(|| JsonError::MissingField { field: child(parent, name) })
}

fn only_fields(obj: &Map<String, Value>, parent: &str, allowed: &[&str]) -> Result<(), JsonError> {
    match obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        // The name is outside text of any length: only an excerpt goes into the error.
        Some(unknown) => Err(JsonError::UnknownField { field: child(parent, &bounded(unknown)) }),
        None => Ok(()),
    }
}

fn hash_field(obj: &Map<String, Value>, parent: &str, name: &str) -> Result<Hash, JsonError> {
    let field = child(parent, name);
    let text = require(obj, parent, name)?
        .as_str()
        .ok_or_else(|| JsonError::WrongType { field: field.clone(), expected: "a base58 string" })?;
    decode_hash(text).map_err(|error| JsonError::Base58 { field: Some(field), error })
}

fn depth_field(obj: &Map<String, Value>, parent: &str) -> Result<u8, JsonError> {
    let field = child(parent, "depth");
    match require(obj, parent, "depth")? {
        Value::Number(n) => n
            .as_u64()
            .and_then(|d| u8::try_from(d).ok())
            .ok_or_else(|| JsonError::DepthOutOfRange { field, found: n.clone() }),
        _ => Err(JsonError::WrongType { field, expected: "an integer in 0..=255" }),
    }
}

fn parse_terminal(value: &Value) -> Result<Terminal, JsonError> {
    let parent = "terminal";
    let obj = as_object(value, parent)?;
    let kind = require(obj, parent, "kind")?
        .as_str()
        .ok_or_else(|| JsonError::WrongType { field: child(parent, "kind"), expected: "a string" })?;
    match kind {
        "empty" => {
            only_fields(obj, parent, &["kind"])?;
            Ok(Terminal::Empty)
        }
        "leaf" => {
            only_fields(obj, parent, &["kind", "path", "value"])?;
            Ok(Terminal::Leaf { path: hash_field(obj, parent, "path")?, value: hash_field(obj, parent, "value")? })
        }
        other => Err(JsonError::UnknownTerminalKind(bounded(other))),
    }
}

fn parse_siblings(value: &Value) -> Result<Vec<Sibling>, JsonError> {
    let items =
        value.as_array().ok_or_else(|| JsonError::WrongType { field: "siblings".to_string(), expected: "an array" })?;
    if items.len() > MAX_SIBLINGS {
        return Err(JsonError::TooManySiblings(items.len()));
    }
    let mut siblings = Vec::with_capacity(items.len());
    let mut prev: Option<u8> = None;
    for (i, item) in items.iter().enumerate() {
        let parent = format!("siblings[{i}]");
        let obj = as_object(item, &parent)?;
        only_fields(obj, &parent, &["depth", "hash"])?;
        let depth = depth_field(obj, &parent)?;
        if prev.is_some_and(|p| depth <= p) {
            return Err(JsonError::DepthsNotIncreasing { field: child(&parent, "depth") });
        }
        prev = Some(depth);
        siblings.push(Sibling { depth, hash: hash_field(obj, &parent, "hash")? });
    }
    Ok(siblings)
}

impl Proof {
    /// The proof's JSON form (see the [module docs](crate::json)).
    ///
    /// Like [`Proof::to_bytes`], this writes whatever proof it is given, well-formed or not.
    pub fn to_json_value(&self) -> Value {
        let siblings = self
            .siblings
            .iter()
            .map(|s| {
                let mut o = Map::new();
                o.insert("depth".to_string(), Value::from(s.depth));
                o.insert("hash".to_string(), Value::String(hash_to_base58(&s.hash)));
                Value::Object(o)
            })
            .collect();
        let mut terminal = Map::new();
        match &self.terminal {
            Terminal::Empty => {
                terminal.insert("kind".to_string(), Value::from("empty"));
            }
            Terminal::Leaf { path, value } => {
                terminal.insert("kind".to_string(), Value::from("leaf"));
                terminal.insert("path".to_string(), Value::String(hash_to_base58(path)));
                terminal.insert("value".to_string(), Value::String(hash_to_base58(value)));
            }
        }
        let mut o = Map::new();
        o.insert("version".to_string(), Value::from(JSON_VERSION));
        o.insert("siblings".to_string(), Value::Array(siblings));
        o.insert("terminal".to_string(), Value::Object(terminal));
        Value::Object(o)
    }

    /// The proof's JSON form as compact text.
    pub fn to_json_string(&self) -> String {
        self.to_json_value().to_string()
    }

    /// Parses a proof from JSON text, strictly (see the [module docs](crate::json)).
    pub fn from_json_str(text: &str) -> Result<Proof, JsonError> {
        let value: Value = serde_json::from_str(text).map_err(|e| JsonError::Syntax(e.to_string()))?;
        Proof::from_json_value(&value)
    }

    /// Parses a proof from an already parsed JSON value, strictly.
    pub fn from_json_value(value: &Value) -> Result<Proof, JsonError> {
        let obj = as_object(value, "")?;
        match require(obj, "", "version")? {
            Value::Number(n) if n.as_u64() == Some(JSON_VERSION) => {}
            Value::Number(n) => return Err(JsonError::UnsupportedVersion(n.clone())),
            _ => return Err(JsonError::WrongType { field: "version".to_string(), expected: "a number" }),
        }
        only_fields(obj, "", &["version", "siblings", "terminal"])?;
        let siblings = parse_siblings(require(obj, "", "siblings")?)?;
        let terminal = parse_terminal(require(obj, "", "terminal")?)?;
        if terminal == Terminal::Empty && !siblings.is_empty() {
            return Err(JsonError::EmptyWithSiblings);
        }
        Ok(Proof { siblings, terminal })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Proof {
        Proof {
            siblings: vec![Sibling { depth: 0, hash: [7; 32] }, Sibling { depth: 255, hash: [0; 32] }],
            terminal: Terminal::Leaf { path: [0xff; 32], value: [1; 32] },
        }
    }

    #[allow(clippy::panic)] // a test fails by panicking
    fn err(text: &str) -> JsonError {
        match Proof::from_json_str(text) {
            Ok(p) => panic!("accepted {text}: {p:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn base58_helpers() {
        assert_eq!(hash_to_base58(&[0; 32]), "1".repeat(32));
        assert_eq!(hash_from_base58(&"1".repeat(32)), Ok([0; 32]));
        let max = hash_to_base58(&[0xff; 32]);
        assert_eq!(max.len(), MAX_BASE58_HASH_LEN);
        assert_eq!(hash_from_base58(&max), Ok([0xff; 32]));
        assert_eq!(
            hash_from_base58("1111"),
            Err(JsonError::Base58 { field: None, error: Base58Error::WrongLength { bytes: 4, expected: 32 } })
        );
        assert_eq!(
            hash_from_base58("abc0"),
            Err(JsonError::Base58 { field: None, error: Base58Error::InvalidCharacter { character: '0', index: 3 } })
        );
        assert_eq!(
            hash_from_base58(&"z".repeat(45)),
            Err(JsonError::Base58 { field: None, error: Base58Error::TooLong { len: 45, max: 44 } })
        );
        // 44 digits can exceed 2^256; that must be a length error, not a silent truncation.
        assert_eq!(
            hash_from_base58(&"z".repeat(44)),
            Err(JsonError::Base58 { field: None, error: Base58Error::WrongLength { bytes: 33, expected: 32 } })
        );
    }

    #[test]
    fn exact_shape() {
        let v = sample().to_json_value();
        let expected = serde_json::json!({
            "version": 1,
            "siblings": [
                {"depth": 0, "hash": hash_to_base58(&[7; 32])},
                {"depth": 255, "hash": "1".repeat(32)},
            ],
            "terminal": {"kind": "leaf", "path": hash_to_base58(&[0xff; 32]), "value": hash_to_base58(&[1; 32])},
        });
        assert_eq!(v, expected);
        assert_eq!(Proof::from_json_value(&v), Ok(sample()));
        let empty = Proof { siblings: vec![], terminal: Terminal::Empty };
        assert_eq!(empty.to_json_string(), r#"{"siblings":[],"terminal":{"kind":"empty"},"version":1}"#);
        assert_eq!(Proof::from_json_str(&empty.to_json_string()), Ok(empty));
    }

    #[test]
    fn errors_name_the_field() {
        let h = hash_to_base58(&[3; 32]);
        let leaf = format!(r#"{{"kind":"leaf","path":"{h}","value":"{h}"}}"#);
        let ok = format!(r#"{{"version":1,"siblings":[{{"depth":4,"hash":"{h}"}}],"terminal":{leaf}}}"#);
        assert!(Proof::from_json_str(&ok).is_ok());

        assert!(matches!(err("{"), JsonError::Syntax(_)));
        assert_eq!(err("[]"), JsonError::WrongType { field: "proof".into(), expected: "an object" });
        assert_eq!(err(r#"{"siblings":[]}"#), JsonError::MissingField { field: "version".into() });
        assert_eq!(err(r#"{"version":"1"}"#), JsonError::WrongType { field: "version".into(), expected: "a number" });
        assert_eq!(err(r#"{"version":2,"extra":0}"#), JsonError::UnsupportedVersion(2.into()));
        assert!(matches!(err(r#"{"version":1.0}"#), JsonError::UnsupportedVersion(_)));
        assert_eq!(
            err(r#"{"version":1,"siblings":[],"terminal":{"kind":"empty"},"x":1}"#),
            JsonError::UnknownField { field: "x".into() }
        );
        assert_eq!(
            err(r#"{"version":1,"terminal":{"kind":"empty"}}"#),
            JsonError::MissingField { field: "siblings".into() }
        );
        assert_eq!(
            err(r#"{"version":1,"siblings":[],"terminal":{"kind":"empty","path":""}}"#),
            JsonError::UnknownField { field: "terminal.path".into() }
        );
        assert_eq!(
            err(r#"{"version":1,"siblings":[],"terminal":{"kind":"branch"}}"#),
            JsonError::UnknownTerminalKind("branch".into())
        );
        assert_eq!(
            err(&format!(r#"{{"version":1,"siblings":[],"terminal":{{"kind":"leaf","path":"{h}"}}}}"#)),
            JsonError::MissingField { field: "terminal.value".into() }
        );
        assert_eq!(
            err(&format!(r#"{{"version":1,"siblings":[],"terminal":{{"kind":"leaf","path":"{h}","value":"1111"}}}}"#)),
            JsonError::Base58 {
                field: Some("terminal.value".into()),
                error: Base58Error::WrongLength { bytes: 4, expected: 32 }
            }
        );
        assert_eq!(
            err(&format!(r#"{{"version":1,"siblings":[{{"depth":256,"hash":"{h}"}}],"terminal":{leaf}}}"#)),
            JsonError::DepthOutOfRange { field: "siblings[0].depth".into(), found: 256.into() }
        );
        assert_eq!(
            err(&format!(r#"{{"version":1,"siblings":[{{"depth":-1,"hash":"{h}"}}],"terminal":{leaf}}}"#)),
            JsonError::DepthOutOfRange { field: "siblings[0].depth".into(), found: (-1).into() }
        );
        assert_eq!(
            err(&format!(r#"{{"version":1,"siblings":[{{"depth":1,"hash":"{h}","x":0}}],"terminal":{leaf}}}"#)),
            JsonError::UnknownField { field: "siblings[0].x".into() }
        );
        assert_eq!(
            err(&format!(
                r#"{{"version":1,"siblings":[{{"depth":1,"hash":"{h}"}},{{"depth":1,"hash":"{h}"}}],"terminal":{leaf}}}"#
            )),
            JsonError::DepthsNotIncreasing { field: "siblings[1].depth".into() }
        );
        assert_eq!(
            err(&format!(r#"{{"version":1,"siblings":[{{"depth":1,"hash":"0"}}],"terminal":{leaf}}}"#)),
            JsonError::Base58 {
                field: Some("siblings[0].hash".into()),
                error: Base58Error::InvalidCharacter { character: '0', index: 0 }
            }
        );
        assert_eq!(
            err(&format!(r#"{{"version":1,"siblings":[{{"depth":1,"hash":"{h}"}}],"terminal":{{"kind":"empty"}}}}"#)),
            JsonError::EmptyWithSiblings
        );
        let many: Vec<String> = (0..257).map(|_| format!(r#"{{"depth":1,"hash":"{h}"}}"#)).collect();
        assert_eq!(
            err(&format!(r#"{{"version":1,"siblings":[{}],"terminal":{leaf}}}"#, many.join(","))),
            JsonError::TooManySiblings(257)
        );
    }

    #[test]
    fn messages_are_readable() {
        let e = JsonError::Base58 {
            field: Some("terminal.path".into()),
            error: Base58Error::WrongLength { bytes: 4, expected: 32 },
        };
        assert_eq!(e.to_string(), "`terminal.path`: base58 decodes to 4 bytes, expected 32");
        let e = JsonError::DepthOutOfRange { field: "siblings[0].depth".into(), found: 300.into() };
        assert_eq!(e.to_string(), "`siblings[0].depth` must be an integer in 0..=255, found 300");
    }

    #[test]
    fn huge_outside_text_is_refused_unread_and_never_echoed() {
        let huge = "2".repeat(1_000_000);
        let h = hash_to_base58(&[3; 32]);
        let leaf = |path: &str| format!(r#"{{"kind":"leaf","path":"{path}","value":"{h}"}}"#);
        let doc = |siblings: &str, terminal: &str| {
            format!(r#"{{"version":1,"siblings":[{siblings}],"terminal":{terminal}}}"#)
        };
        let cases = [
            (doc("", &leaf(&huge)), "`terminal.path`: base58 text of 1000000 bytes is too long"),
            (
                doc(&format!(r#"{{"depth":1,"hash":"{huge}"}}"#), &leaf(&h)),
                "`siblings[0].hash`: base58 text of 1000000",
            ),
            (
                doc("", &format!(r#"{{"kind":"{huge}"}}"#)),
                "unknown `terminal.kind` \"2222222222222222… (1000000 bytes)\"",
            ),
            (format!(r#"{{"version":1,"{huge}":0}}"#), "unknown field `2222222222222222… (1000000 bytes)`"),
        ];
        for (text, want) in cases {
            let e = err(&text).to_string();
            assert!(e.starts_with(want), "{}", &e[..e.len().min(200)]);
            assert!(e.len() < 200, "{} bytes", e.len());
        }
    }
}
