//! The subscription methods of a WebSocket connection: `rootSubscribe`, `rootUnsubscribe`,
//! `recordSubscribe` and `recordUnsubscribe`. Over HTTP they are not found.

use aldb_verify::Commitment;
use serde_json::Value;

use super::params::{at_most, commitment_field, config_level, opt_slot, truncate};
use super::{Call, Class, Handler};
use crate::levels::Level;
use crate::rpc::{Limits, RpcError};

/// `rootSubscribe([{"commitment"?}])`: the subscription's id; then `rootNotification`s.
pub(crate) struct RootSubscribe;

impl Handler for RootSubscribe {
    const NAME: &'static str = "rootSubscribe";
    const CLASS: Class = Class::Light;
    const WEBSOCKET_ONLY: bool = true;
    /// The level whose roots it receives (every root and change when `None`).
    type Params = Option<Level>;

    fn params(params: &[Value], _: &Limits) -> Result<Self::Params, RpcError> {
        at_most(params, 1)?;
        config_level(params.first())
    }

    fn run(level: Self::Params, call: &mut Call<'_, '_>) -> Result<String, RpcError> {
        call.subscriptions(Self::NAME)?.subscribe_at(level).map(|id| id.to_string())
    }
}

/// `rootUnsubscribe([id])`: `true`.
pub(crate) struct RootUnsubscribe;

impl Handler for RootUnsubscribe {
    const NAME: &'static str = "rootUnsubscribe";
    const CLASS: Class = Class::Light;
    const WEBSOCKET_ONLY: bool = true;
    /// The subscription id.
    type Params = u64;

    fn params(params: &[Value], _: &Limits) -> Result<u64, RpcError> {
        subscription_id(params)
    }

    fn run(id: u64, call: &mut Call<'_, '_>) -> Result<String, RpcError> {
        if call.subscriptions(Self::NAME)?.unsubscribe(id) {
            Ok("true".to_string())
        } else {
            Err(RpcError::invalid_params(format!("unknown subscription id {id}")))
        }
    }
}

/// `recordSubscribe([{"fromSlot"?, "commitment"?}])`: the subscription's id; then
/// `recordNotification`s, the kept backlog from `fromSlot` first.
pub(crate) struct RecordSubscribe;

impl Handler for RecordSubscribe {
    const NAME: &'static str = "recordSubscribe";
    const CLASS: Class = Class::Light;
    const WEBSOCKET_ONLY: bool = true;
    /// The first slot sent (only records logged from now on when `None`) and the level.
    type Params = (Option<u64>, Option<Commitment>);

    fn params(params: &[Value], _: &Limits) -> Result<Self::Params, RpcError> {
        at_most(params, 1)?;
        match params.first() {
            None | Some(Value::Null) => Ok((None, None)),
            Some(Value::Object(o)) => {
                if let Some(k) = o.keys().find(|k| !matches!(k.as_str(), "fromSlot" | "commitment")) {
                    return Err(RpcError::invalid_params(format!(
                        "unknown config field `{}` (only `fromSlot` and `commitment` are accepted)",
                        truncate(k, 64)
                    )));
                }
                Ok((opt_slot(o.get("fromSlot"), "fromSlot")?, commitment_field(o.get("commitment"))?))
            }
            Some(_) => Err(RpcError::invalid_params("config must be an object such as {\"fromSlot\": 123}")),
        }
    }

    fn run((from_slot, level): Self::Params, call: &mut Call<'_, '_>) -> Result<String, RpcError> {
        call.subscriptions(Self::NAME)?.record_subscribe(from_slot, level).map(|id| id.to_string())
    }
}

/// `recordUnsubscribe([id])`: `true`.
pub(crate) struct RecordUnsubscribe;

impl Handler for RecordUnsubscribe {
    const NAME: &'static str = "recordUnsubscribe";
    const CLASS: Class = Class::Light;
    const WEBSOCKET_ONLY: bool = true;
    /// The subscription id.
    type Params = u64;

    fn params(params: &[Value], _: &Limits) -> Result<u64, RpcError> {
        subscription_id(params)
    }

    fn run(id: u64, call: &mut Call<'_, '_>) -> Result<String, RpcError> {
        if call.subscriptions(Self::NAME)?.record_unsubscribe(id) {
            Ok("true".to_string())
        } else {
            Err(RpcError::invalid_params(format!("unknown record subscription id {id}")))
        }
    }
}

/// The one parameter of the unsubscribe methods.
fn subscription_id(params: &[Value]) -> Result<u64, RpcError> {
    at_most(params, 1)?;
    match params.first() {
        Some(v) => v.as_u64().ok_or_else(|| RpcError::invalid_params("subscription id must be a non-negative integer")),
        None => Err(RpcError::invalid_params("missing subscription id")),
    }
}
