//! A minimal JSON-RPC client for the validator's RPC and for Hyades.

use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};

/// A JSON-RPC error object, kept so callers can retry on specific codes.
#[derive(Debug)]
pub(crate) struct RpcError {
    pub(crate) code: i64,
    pub(crate) message: String,
    pub(crate) data: Option<Value>,
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "error {}: {}", self.code, self.message)?;
        if let Some(d) = &self.data {
            write!(f, " {d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for RpcError {}

/// One endpoint.
pub(crate) struct Client {
    agent: ureq::Agent,
    url: String,
}

impl Client {
    pub(crate) fn new(url: &str) -> Self {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .into();
        Self { agent, url: url.to_string() }
    }

    /// Calls `method`; an error response comes back as an [`RpcError`] inside the `anyhow` error.
    pub(crate) fn call(&self, method: &str, params: Value) -> Result<Value> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let mut resp = self
            .agent
            .post(&self.url)
            .header("content-type", "application/json")
            .send(body.to_string().as_bytes())
            .with_context(|| format!("{method}: cannot reach {}", self.url))?;
        let status = resp.status();
        let text = resp.body_mut().read_to_string().with_context(|| format!("{method}: cannot read the response"))?;
        let v: Value = serde_json::from_str(&text).with_context(|| {
            format!("{method}: HTTP {status}, response is not JSON: {}", text.chars().take(200).collect::<String>())
        })?;
        if let Some(e) = v.get("error") {
            let err = RpcError {
                code: e.get("code").and_then(Value::as_i64).unwrap_or(0),
                message: e.get("message").and_then(Value::as_str).unwrap_or("?").to_string(),
                data: e.get("data").cloned(),
            };
            return Err(anyhow!(err).context(format!("{method} at {}", self.url)));
        }
        v.get("result").cloned().ok_or_else(|| anyhow!("{method}: HTTP {status}, no result: {text}"))
    }

    /// The code of the RPC error inside `e`, if it is one.
    pub(crate) fn code(e: &anyhow::Error) -> Option<i64> {
        e.downcast_ref::<RpcError>().map(|r| r.code)
    }
}

/// `v[name]` as u64.
pub(crate) fn u64_at(v: &Value, name: &str) -> Result<u64> {
    v.get(name).and_then(Value::as_u64).with_context(|| format!("`{name}` missing or not an unsigned integer in {v}"))
}

/// `v[name]` as a string.
pub(crate) fn str_at<'a>(v: &'a Value, name: &str) -> Result<&'a str> {
    v.get(name).and_then(Value::as_str).with_context(|| format!("`{name}` missing or not a string in {v}"))
}

/// `result.context.slot`.
pub(crate) fn context_slot(result: &Value) -> Result<u64> {
    result.get("context").and_then(|c| c.get("slot")).and_then(Value::as_u64).context("no context.slot")
}

/// `result.value`.
pub(crate) fn value(result: &Value) -> Result<&Value> {
    result.get("value").context("no value")
}

/// Fails unless `cond`, with a message.
pub(crate) fn ensure(cond: bool, msg: impl FnOnce() -> String) -> Result<()> {
    if cond { Ok(()) } else { bail!(msg()) }
}
