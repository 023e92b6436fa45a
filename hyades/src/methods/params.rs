//! Parsing the positional parameters and configuration objects the methods share: each check
//! names the parameter it refuses.

use aldb_verify::Commitment;
use aldb_verify::json::{JsonError, hash_from_base58};
use serde_json::Value;

use crate::encode;
use crate::levels::Level;
use crate::rpc::RpcError;

/// At most `max` characters of untrusted text, for echoing it in an error.
pub(crate) fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

pub(crate) fn at_most(params: &[Value], max: usize) -> Result<(), RpcError> {
    if params.len() > max {
        return Err(RpcError::invalid_params(format!("expected at most {max} params, got {}", params.len())));
    }
    Ok(())
}

pub(crate) fn slot_param(v: Option<&Value>, name: &str) -> Result<u64, RpcError> {
    match v {
        None | Some(Value::Null) => Err(RpcError::invalid_params(format!("missing {name}"))),
        Some(v) => v.as_u64().ok_or_else(|| RpcError::invalid_params(format!("{name} must be a non-negative integer"))),
    }
}

pub(crate) fn opt_slot(v: Option<&Value>, name: &str) -> Result<Option<u64>, RpcError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(v) => slot_param(Some(v), name).map(Some),
    }
}

/// The level of an optional `{"commitment": "confirmed" | "finalized"}` configuration object of
/// the record methods; `None` when absent.
pub(crate) fn config_commitment(v: Option<&Value>) -> Result<Option<Commitment>, RpcError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(o)) => {
            if let Some(k) = o.keys().find(|k| k.as_str() != "commitment") {
                return Err(RpcError::invalid_params(format!(
                    "unknown config field `{}` (only `commitment` is accepted)",
                    truncate(k, 64)
                )));
            }
            commitment_field(o.get("commitment"))
        }
        Some(_) => Err(RpcError::invalid_params("config must be an object such as {\"commitment\": \"finalized\"}")),
    }
}

/// A record level by name. `processed` has no records: only what a validator committed is
/// recorded.
pub(crate) fn commitment_field(v: Option<&Value>) -> Result<Option<Commitment>, RpcError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s == "confirmed" => Ok(Some(Commitment::Confirmed)),
        Some(Value::String(s)) if s == "finalized" => Ok(Some(Commitment::Finalized)),
        Some(_) => Err(RpcError::invalid_params("commitment must be \"confirmed\" or \"finalized\"")),
    }
}

/// The slot and level of an optional `{"slot": S, "commitment": L}` configuration object.
/// Unknown fields are rejected, so a misspelt `slot` is an error rather than a silent answer at
/// the newest slot.
pub(crate) fn config_slot(v: Option<&Value>) -> Result<(Option<u64>, Option<Level>), RpcError> {
    match v {
        None | Some(Value::Null) => Ok((None, None)),
        Some(Value::Object(o)) => {
            if let Some(k) = o.keys().find(|k| !matches!(k.as_str(), "slot" | "commitment")) {
                return Err(RpcError::invalid_params(format!(
                    "unknown config field `{}` (only `slot` and `commitment` are accepted)",
                    truncate(k, 64)
                )));
            }
            Ok((opt_slot(o.get("slot"), "slot")?, level_field(o.get("commitment"))?))
        }
        Some(_) => Err(RpcError::invalid_params("config must be an object such as {\"slot\": 123}")),
    }
}

/// The level of an optional `{"commitment": L}` configuration object (`getStateRoot`,
/// `rootSubscribe`).
pub(crate) fn config_level(v: Option<&Value>) -> Result<Option<Level>, RpcError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(o)) => {
            if let Some(k) = o.keys().find(|k| k.as_str() != "commitment") {
                return Err(RpcError::invalid_params(format!(
                    "unknown config field `{}` (only `commitment` is accepted)",
                    truncate(k, 64)
                )));
            }
            level_field(o.get("commitment"))
        }
        Some(_) => Err(RpcError::invalid_params("config must be an object such as {\"commitment\": \"confirmed\"}")),
    }
}

/// A snapshot level by name, Solana's three.
pub(crate) fn level_field(v: Option<&Value>) -> Result<Option<Level>, RpcError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Level::from_name(s).map(Some).ok_or_else(|| {
            RpcError::invalid_params("commitment must be \"processed\", \"confirmed\" or \"finalized\"")
        }),
        Some(_) => Err(RpcError::invalid_params("commitment must be \"processed\", \"confirmed\" or \"finalized\"")),
    }
}

pub(crate) fn pubkey(v: Option<&Value>, name: &str) -> Result<[u8; 32], RpcError> {
    match v {
        Some(Value::String(s)) => match encode::base58_32_decode(s) {
            Some(key) => Ok(key),
            // The fast decoder only says no; the verifier's strict decoder says why.
            None => Err(match hash_from_base58(s) {
                Err(JsonError::Base58 { error, .. }) => RpcError::invalid_params(format!("{name}: {error}")),
                Err(other) => RpcError::invalid_params(format!("{name}: {other}")),
                Ok(_) => RpcError::invalid_params(format!("{name}: not the base58 form of 32 bytes")),
            }),
        },
        Some(_) => Err(RpcError::invalid_params(format!("{name} must be a base58 string"))),
        None => Err(RpcError::invalid_params(format!("missing {name}"))),
    }
}
