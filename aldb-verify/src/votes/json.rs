//! The JSON forms of §10.5: vote evidence as Hyades serves it and `aldb proof --trust votes`
//! reads it, and a validator set.

use alloc::string::String;
use alloc::vec::Vec;

use base64::Engine as _;
use serde_json::Value;

use super::{EvidenceAccount, MAX_EVIDENCE_VOTES, SetError, Validator, ValidatorSet, VoteEvidence};
use crate::base58::{Base58Error, decode_fixed};
use crate::json::JsonError;
use crate::{Hash, Proof};

/// Why a JSON document is not vote evidence or a validator set.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EvidenceJsonError {
    /// The text is not JSON.
    Syntax(String),
    /// A field is missing or holds the wrong kind of value.
    Field {
        /// The field's name.
        field: &'static str,
        /// What it must hold.
        expected: &'static str,
    },
    /// A base58 field is not exactly 32 bytes.
    Base58 {
        /// The field's name.
        field: &'static str,
        /// What is wrong with it.
        error: Base58Error,
    },
    /// `version` is not 1.
    UnsupportedVersion,
    /// More than [`MAX_EVIDENCE_VOTES`] votes.
    TooManyVotes(usize),
    /// The proof is not the JSON form of §7.1.
    Proof(JsonError),
    /// The validator set is not a set.
    Set(SetError),
}

impl core::fmt::Display for EvidenceJsonError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Syntax(msg) => write!(f, "not valid JSON: {msg}"),
            Self::Field { field, expected } => write!(f, "`{field}` must be {expected}"),
            Self::Base58 { field, error } => write!(f, "`{field}`: {error}"),
            Self::UnsupportedVersion => f.write_str("unsupported vote evidence version (expected 1)"),
            Self::TooManyVotes(n) => write!(f, "{n} votes; evidence holds at most {MAX_EVIDENCE_VOTES}"),
            Self::Proof(e) => write!(f, "`proof`: {e}"),
            Self::Set(e) => write!(f, "validator set: {e}"),
        }
    }
}

impl std::error::Error for EvidenceJsonError {}

/// A field that is missing, holds the wrong kind of value, or is not base58 of 32 bytes: what the
/// JSON readers of §10.5 (here) and §11 (`epochs::json`) both refuse, each as its own error.
#[derive(Debug)]
pub(crate) enum FieldError {
    /// Missing or of the wrong kind.
    Field { field: &'static str, expected: &'static str },
    /// Not base58 of 32 bytes.
    Base58 { field: &'static str, error: Base58Error },
}

impl From<FieldError> for EvidenceJsonError {
    fn from(e: FieldError) -> Self {
        match e {
            FieldError::Field { field, expected } => Self::Field { field, expected },
            FieldError::Base58 { field, error } => Self::Base58 { field, error },
        }
    }
}

/// The field `name` of the object `v`, which must hold `expected`.
pub(crate) fn field<'a>(v: &'a Value, name: &'static str, expected: &'static str) -> Result<&'a Value, FieldError> {
    v.get(name).ok_or(FieldError::Field { field: name, expected })
}

/// The field `name` as an unsigned 64-bit integer.
pub(crate) fn u64_of(v: &Value, name: &'static str) -> Result<u64, FieldError> {
    const WANT: &str = "an unsigned 64-bit integer";
    field(v, name, WANT)?.as_u64().ok_or(FieldError::Field { field: name, expected: WANT })
}

/// The field `name` as base58 of 32 bytes.
pub(crate) fn key_of(v: &Value, name: &'static str) -> Result<Hash, FieldError> {
    const WANT: &str = "base58 of 32 bytes";
    let text = field(v, name, WANT)?.as_str().ok_or(FieldError::Field { field: name, expected: WANT })?;
    decode_fixed::<32>(text).map_err(|error| FieldError::Base58 { field: name, error })
}

fn account_of(a: &Value) -> Result<EvidenceAccount, EvidenceJsonError> {
    const DATA: &str = "[\"<base64>\", \"base64\"]";
    let bad_data = EvidenceJsonError::Field { field: "account.data", expected: DATA };
    let data = match field(a, "data", DATA)?.as_array().map(Vec::as_slice) {
        Some([Value::String(text), Value::String(enc)]) if enc == "base64" => {
            base64::engine::general_purpose::STANDARD.decode(text).map_err(|_| bad_data)?
        }
        _ => return Err(bad_data),
    };
    if let Some(space) = a.get("space")
        && space.as_u64() != Some(data.len() as u64)
    {
        return Err(EvidenceJsonError::Field { field: "account.space", expected: "the data's length" });
    }
    let executable = field(a, "executable", "a boolean")?
        .as_bool()
        .ok_or(EvidenceJsonError::Field { field: "account.executable", expected: "a boolean" })?;
    Ok(EvidenceAccount { lamports: u64_of(a, "lamports")?, owner: key_of(a, "owner")?, executable, data })
}

impl VoteEvidence {
    /// Parses the JSON text of §10.5.
    pub fn from_json_str(text: &str) -> Result<Self, EvidenceJsonError> {
        let v: Value = serde_json::from_str(text).map_err(|e| EvidenceJsonError::Syntax(e.to_string()))?;
        Self::from_json_value(&v)
    }

    /// Parses an already-parsed JSON document of §10.5.
    pub fn from_json_value(v: &Value) -> Result<Self, EvidenceJsonError> {
        if u64_of(v, "version")? != 1 {
            return Err(EvidenceJsonError::UnsupportedVersion);
        }
        const VOTES: &str = "an array of base64 strings";
        let list =
            field(v, "votes", VOTES)?.as_array().ok_or(EvidenceJsonError::Field { field: "votes", expected: VOTES })?;
        if list.len() > MAX_EVIDENCE_VOTES {
            return Err(EvidenceJsonError::TooManyVotes(list.len()));
        }
        let mut votes = Vec::with_capacity(list.len());
        for item in list {
            let bytes = item
                .as_str()
                .and_then(|t| base64::engine::general_purpose::STANDARD.decode(t).ok())
                .ok_or(EvidenceJsonError::Field { field: "votes", expected: VOTES })?;
            votes.push(bytes);
        }
        const FORKS: &str = "null or a positive integer";
        let hard_forks = match field(v, "hardForks", FORKS)? {
            Value::Null => None,
            n => Some(
                n.as_u64()
                    .filter(|&n| n > 0)
                    .ok_or(EvidenceJsonError::Field { field: "hardForks", expected: FORKS })?,
            ),
        };
        let account = match field(v, "account", "an account object or null")? {
            Value::Null => None,
            a => Some(account_of(a)?),
        };
        // §11.4: present (and then always mixed, zero or not) on a chain binding the next set.
        let next_set_hash = match v.get("nextSetHash") {
            None | Some(Value::Null) => None,
            Some(_) => Some(key_of(v, "nextSetHash")?),
        };
        Ok(VoteEvidence {
            slot: u64_of(v, "slot")?,
            h: key_of(v, "h")?,
            root: key_of(v, "root")?,
            hard_forks,
            next_set_hash,
            votes,
            pubkey: key_of(v, "pubkey")?,
            account,
            proof: Proof::from_json_value(field(v, "proof", "a proof")?).map_err(EvidenceJsonError::Proof)?,
        })
    }
}

/// A validator set from its JSON form: an array of
/// `{"voteAccount": base58, "authorizedVoter": base58, "stake": u64}`.
pub fn validator_set_from_json_value(v: &Value) -> Result<ValidatorSet, EvidenceJsonError> {
    const SET: &str = "an array of {voteAccount, authorizedVoter, stake}";
    let list = v.as_array().ok_or(EvidenceJsonError::Field { field: "validators", expected: SET })?;
    let mut members = Vec::with_capacity(list.len());
    for m in list {
        members.push(Validator {
            vote_account: key_of(m, "voteAccount")?,
            authorized_voter: key_of(m, "authorizedVoter")?,
            stake: u64_of(m, "stake")?,
        });
    }
    ValidatorSet::new(&members).map_err(EvidenceJsonError::Set)
}
