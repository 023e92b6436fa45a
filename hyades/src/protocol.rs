//! The JSON-RPC vocabulary shared by the dispatcher ([`crate::rpc`]), the methods, the record
//! and vote feeds: the error codes and the error object. It depends on none of them, so they can
//! all depend on it. The methods themselves are listed in [`crate::methods`].

use serde_json::{Map, Value};

/// The JSON-RPC error codes Hyades returns.
pub mod codes {
    /// The body is not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// The JSON is not a valid request object (or the batch is empty or too long, or the body too
    /// large).
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method (or a subscription method called over plain HTTP).
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// A parameter is missing, of the wrong type, not valid base58, not 32 bytes, or over a limit.
    pub const INVALID_PARAMS: i64 = -32602;
    /// The snapshot files could not be read; details are in the server log.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// The slot is older than the oldest kept slot.
    pub const SLOT_PRUNED: i64 = -32001;
    /// The slot is newer than the newest published slot.
    pub const SLOT_NOT_COMMITTED: i64 = -32004;
    /// The slot is in the kept range but has no snapshot (skipped, or merged into a later one);
    /// for the record methods: no root record (skipped, or on another fork).
    pub const SLOT_NO_SNAPSHOT: i64 = -32007;
    /// No snapshot (for the record methods: no root record) has been published yet.
    pub const NOTHING_PUBLISHED: i64 = -32008;
    /// A WebSocket connection already holds the most subscriptions allowed.
    pub const TOO_MANY_SUBSCRIPTIONS: i64 = -32009;
    /// Record methods: the slot lies between the intact records around a damaged span of the
    /// record log, so its record may have been lost; `data` names those records' slots.
    pub const RECORD_CORRUPT: i64 = -32010;
    /// The slot was committed but a snapshot file it needs is damaged (checksum, a header that
    /// disagrees with its name, truncated while mapped); `data.reason` names the file. An operator
    /// should act: restore the file or let the writer's refresh retire it.
    pub const SLOT_CORRUPT: i64 = -32011;
    /// The slot was committed but never written: the snapshot writer was failing (a full disk)
    /// and recovered at a later slot; `data` says which slots were lost.
    pub const SLOT_NOT_WRITTEN: i64 = -32012;
    /// The slot's bank was abandoned (its fork was dropped; the slot-status journal says so): no
    /// root or proof is served for it, even while its file remains.
    pub const SLOT_ABANDONED: i64 = -32013;
    /// The slot was committed but a file it needs is missing: deleted from the snapshot
    /// directory, or (on a replica) an object the bucket's manifest names that the bucket does
    /// not hold, or holds fewer bytes of; `data.file` names it. An operator should restore it.
    pub const SLOT_FILE_MISSING: i64 = -32014;
    /// `getEpochTransition`: the vote-evidence log holds no transition to the epoch (no set of
    /// it, or no slot of the epoch before whose bank binds it and whose votes qualify, SPEC
    /// §11.4); `data` names the epochs whose sets it holds.
    pub const NO_TRANSITION: i64 = -32015;
    /// The answer would exceed [`Limits::max_response_bytes`](crate::Limits); ask for fewer
    /// items (a smaller range, fewer keys, a shorter batch).
    pub const RESPONSE_TOO_LARGE: i64 = -32020;
    /// The server's response buffer is full: the answers of other connections, built and not
    /// yet taken by their clients, hold the whole [`Config::max_buffered_bytes`](crate::Config)
    /// (HTTP status 503). Nothing was wrong with the request; retry after a moment.
    pub const SERVER_BUSY: i64 = -32021;
}

/// A JSON-RPC error object.
#[derive(Clone, Debug, PartialEq)]
pub struct RpcError {
    /// One of [`codes`].
    pub code: i64,
    /// A human-readable message.
    pub message: String,
    /// Structured details (such as the oldest and newest served slots), if any.
    pub data: Option<Value>,
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "JSON-RPC error {}: {}", self.code, self.message)
    }
}

impl std::error::Error for RpcError {}

impl RpcError {
    /// An error with no data.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), data: None }
    }

    /// An error with structured data.
    pub fn with_data(code: i64, message: impl Into<String>, data: Value) -> Self {
        Self { code, message: message.into(), data: Some(data) }
    }

    pub(crate) fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(codes::INVALID_PARAMS, format!("Invalid params: {}", message.into()))
    }

    pub(crate) fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(codes::INVALID_REQUEST, format!("Invalid request: {}", message.into()))
    }

    /// The error object as JSON.
    pub fn to_value(&self) -> Value {
        let mut o = Map::new();
        o.insert("code".into(), Value::from(self.code));
        o.insert("message".into(), Value::from(self.message.clone()));
        if let Some(d) = &self.data {
            o.insert("data".into(), d.clone());
        }
        Value::Object(o)
    }
}
