//! The service: JSON-RPC over HTTP `POST /` and over WebSocket (`GET /` or `GET /ws` with an
//! upgrade) on one listener, Prometheus metrics on another, and a poller that picks up newly
//! published snapshots and announces their roots to subscribers.
//!
//! Notification policy: each WebSocket connection has a bounded outgoing queue. A root
//! notification that finds the queue full closes that connection (close code 1008, "subscriber
//! too slow") instead of waiting, so one slow reader never delays the poller or any other
//! subscriber; the client reconnects and catches up with `getStateRoots`.
//!
//! Root records (`recordSubscribe`) are pulled rather than pushed: each record subscription is a
//! cursor into the [`RecordFeed`], and the connection copies records to its socket as fast as
//! the socket takes them, the backlog first. Live records not yet handed to the socket count
//! against the connection's record buffer ([`Config::record_buffer`]); when they exceed it the
//! connection is closed with code [`SLOW_SUBSCRIBER_CLOSE`] ("slow subscriber: N notifications
//! buffered"). The poller and other connections never wait for a connection.
//!
//! Response memory: every answer and notification holds its bytes in the server-wide
//! [`ResponseBudget`] ([`Config::max_buffered_bytes`]) from before it is built until its socket
//! has taken it. A request the budget cannot take is answered [`codes::SERVER_BUSY`] (HTTP 503);
//! a notification it cannot take closes its connection with [`BUSY_CLOSE`], as a slow subscriber's
//! would be, rather than queue more.
//!
//! One idea to a file: `config` (the settings), `execution` (where a request runs), `service`
//! (start-up and shutdown), `http` (`POST /`, `/health`, CORS), `ws` (a WebSocket connection's
//! reader and writer), `subs` (its subscriptions), `roots` (what the root feed has announced) and
//! `poll` (the pollers of the directory and of the record log).

mod config;
mod execution;
mod http;
mod poll;
mod roots;
mod service;
mod subs;
mod ws;

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use tokio::sync::{Semaphore, broadcast, watch};

use crate::budget::ResponseBudget;
use crate::metrics::Metrics;
#[cfg(doc)]
use crate::records::RecordFeed;
use crate::rpc::Rpc;
#[cfg(doc)]
use crate::rpc::codes;
use roots::RootEvent;

pub use config::{
    Config, DEFAULT_HEADER_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_CONNECTIONS, DEFAULT_WRITE_TIMEOUT,
    DEFAULT_WS_IDLE_TIMEOUT, DEFAULT_WS_QUEUE_BYTES, default_max_buffered_bytes,
};
pub use execution::{AUTO_INLINE_MAX_BYTES, Execution, UnknownExecution};
pub use service::Service;
pub use ws::{BUSY_CLOSE, NOT_READING_CLOSE, SLOW_SUBSCRIBER_CLOSE};

/// Bytes held for a request before it is handled: room for a typical single answer, so a light
/// request reserves once and a full budget refuses requests before any work is done for them.
const RESERVE_AHEAD: usize = 4096;

/// What the listeners, every connection and the poller share.
#[derive(Debug)]
struct Shared {
    rpc: Rpc,
    metrics: Arc<Metrics>,
    execution: Execution,
    feed: broadcast::Sender<Arc<RootEvent>>,
    /// Events sent on `feed` so far (the next event's `seq`).
    announced: AtomicU64,
    next_subscription: AtomicU64,
    notification_buffer: usize,
    max_subscriptions: usize,
    record_buffer: usize,
    /// Permits for requests on the blocking pool ([`Config::max_blocking`]).
    blocking: Arc<Semaphore>,
    /// Response bytes held by all connections ([`Config::max_buffered_bytes`]).
    budget: Arc<ResponseBudget>,
    /// Per WebSocket connection, in bytes ([`Config::ws_queue_bytes`]).
    ws_queue_bytes: usize,
    write_timeout: Duration,
    header_timeout: Duration,
    ws_idle_timeout: Duration,
    shutdown: watch::Receiver<bool>,
}
