//! The subscription methods of a WebSocket connection: `rootSubscribe`, `rootUnsubscribe`,
//! `recordSubscribe` and `recordUnsubscribe`.

use serde_json::Value;

use super::params::{at_most, commitment_field, config_level, opt_slot, truncate};
use crate::rpc::{Method, Rpc, RpcError, Subscriptions, codes};

impl Rpc {
    /// `recordSubscribe([{"fromSlot"?, "commitment"?}])` and `recordUnsubscribe([id])` (WebSocket only).
    pub(crate) fn record_subscription(
        &self,
        method: Method,
        params: &[Value],
        subs: Option<&mut dyn Subscriptions>,
    ) -> Result<String, RpcError> {
        let Some(subs) = subs else {
            return Err(RpcError::new(
                codes::METHOD_NOT_FOUND,
                format!("Method not found: {} is only available over WebSocket", method.name()),
            ));
        };
        at_most(params, 1)?;
        if method == Method::RecordSubscribe {
            let (from_slot, level) = match params.first() {
                None | Some(Value::Null) => (None, None),
                Some(Value::Object(o)) => {
                    if let Some(k) = o.keys().find(|k| !matches!(k.as_str(), "fromSlot" | "commitment")) {
                        return Err(RpcError::invalid_params(format!(
                            "unknown config field `{}` (only `fromSlot` and `commitment` are accepted)",
                            truncate(k, 64)
                        )));
                    }
                    (opt_slot(o.get("fromSlot"), "fromSlot")?, commitment_field(o.get("commitment"))?)
                }
                Some(_) => {
                    return Err(RpcError::invalid_params("config must be an object such as {\"fromSlot\": 123}"));
                }
            };
            return subs.record_subscribe(from_slot, level).map(|id| id.to_string());
        }
        let id = match params.first() {
            Some(v) => {
                v.as_u64().ok_or_else(|| RpcError::invalid_params("subscription id must be a non-negative integer"))?
            }
            None => return Err(RpcError::invalid_params("missing subscription id")),
        };
        if subs.record_unsubscribe(id) {
            Ok("true".to_string())
        } else {
            Err(RpcError::invalid_params(format!("unknown record subscription id {id}")))
        }
    }

    /// `rootSubscribe([{"commitment"?}])` and `rootUnsubscribe([id])` (WebSocket only).
    pub(crate) fn root_subscription(
        &self,
        method: Method,
        params: &[Value],
        subs: Option<&mut dyn Subscriptions>,
    ) -> Result<String, RpcError> {
        let Some(subs) = subs else {
            return Err(RpcError::new(
                codes::METHOD_NOT_FOUND,
                format!("Method not found: {} is only available over WebSocket", method.name()),
            ));
        };
        if method == Method::RootSubscribe {
            at_most(params, 1)?;
            let level = config_level(params.first())?;
            return subs.subscribe_at(level).map(|id| id.to_string());
        }
        at_most(params, 1)?;
        let id = match params.first() {
            Some(v) => {
                v.as_u64().ok_or_else(|| RpcError::invalid_params("subscription id must be a non-negative integer"))?
            }
            None => return Err(RpcError::invalid_params("missing subscription id")),
        };
        if subs.unsubscribe(id) {
            Ok("true".to_string())
        } else {
            Err(RpcError::invalid_params(format!("unknown subscription id {id}")))
        }
    }
}
