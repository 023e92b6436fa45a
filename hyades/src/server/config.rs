//! The service's settings and their defaults.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::execution::Execution;
#[cfg(doc)]
use super::ws::{BUSY_CLOSE, NOT_READING_CLOSE, SLOW_SUBSCRIBER_CLOSE};
use crate::records::DEFAULT_RECORD_KEEP;
use crate::replica::StoreConfig;
use crate::rpc::Limits;
#[cfg(doc)]
use crate::rpc::codes;

/// Default [`Config::max_connections`]: well under the usual 1024 open-file limit.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
/// Default [`Config::header_timeout`].
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Default [`Config::idle_timeout`].
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default [`Config::write_timeout`].
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Default [`Config::ws_queue_bytes`]: 4 MiB, hundreds of proofs.
pub const DEFAULT_WS_QUEUE_BYTES: usize = 4 << 20;
/// Default [`Config::ws_idle_timeout`].
pub const DEFAULT_WS_IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// Connections whose worst case the default response budget holds at once.
const BUDGET_CONNECTIONS: usize = 8;

/// The default [`Config::max_buffered_bytes`]: the worst case of eight connections at once, each
/// a WebSocket connection with a full reply queue, the answer its socket is stuck on and the next
/// one built (`8 × (ws_queue_bytes + 2 × max_response_bytes)`, 288 MiB with the defaults).
pub fn default_max_buffered_bytes(ws_queue_bytes: usize, max_response_bytes: usize) -> usize {
    max_response_bytes.saturating_mul(2).saturating_add(ws_queue_bytes).saturating_mul(BUDGET_CONNECTIONS)
}

/// Service settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// The snapshot directory to serve; with [`Config::store`], the replica's cache directory
    /// (created if missing, owned by this service alone).
    pub dir: PathBuf,
    /// Serve a bucket prefix that `aldb-ship` fills instead of the directory (`None`: the
    /// directory, the default).
    pub store: Option<StoreConfig>,
    /// JSON-RPC and WebSocket listener (port 0 picks a free port).
    pub addr: SocketAddr,
    /// Metrics listener, if any.
    pub metrics_addr: Option<SocketAddr>,
    /// How often the directory is polled for new snapshots.
    pub poll_interval: Duration,
    /// Request limits.
    pub limits: Limits,
    /// Where HTTP requests are handled.
    pub execution: Execution,
    /// Messages a WebSocket connection may have queued before a notification disconnects it.
    pub notification_buffer: usize,
    /// Most subscriptions per WebSocket connection.
    pub max_subscriptions: usize,
    /// How often the record log is polled for new root records (keep it well under a second:
    /// relayers wait for them).
    pub record_poll_interval: Duration,
    /// Live record notifications a WebSocket connection may have pending (across its record
    /// subscriptions) before it is closed with code [`SLOW_SUBSCRIBER_CLOSE`].
    pub record_buffer: usize,
    /// Root records kept in memory and served; older ones answer "pruned".
    pub record_keep: usize,
    /// A replica's copy of the vote-evidence log keeps the segments reaching the newest this
    /// many slots of it; older slots' votes answer "pruned". Unused for a directory, whose
    /// writer prunes its own log.
    pub vote_keep_slots: u64,
    /// Most open connections on the RPC listener, HTTP and WebSocket together; one more is
    /// answered 503 and closed at once.
    pub max_connections: usize,
    /// Time for a request head to arrive, from the connection's accept or the request's first
    /// byte; then again for its body. A connection that overruns it is closed (slowloris).
    pub header_timeout: Duration,
    /// An HTTP keep-alive connection with no request for this long is closed.
    pub idle_timeout: Duration,
    /// A write to a client that makes no progress for this long closes the connection (HTTP),
    /// or closes the WebSocket with code [`NOT_READING_CLOSE`].
    pub write_timeout: Duration,
    /// Reply bytes a WebSocket connection may have queued ahead of its socket; past it the
    /// connection reads no further request until the client takes its replies. An answer larger
    /// than this (up to [`Limits::max_response_bytes`]) waits until the queue is empty and is
    /// then queued alone.
    pub ws_queue_bytes: usize,
    /// A WebSocket connection without subscriptions that receives no message (pings count) for
    /// this long is closed with code 1000.
    pub ws_idle_timeout: Duration,
    /// Most requests running on the blocking pool at once, all connections together (0: four
    /// per core). Each connection has at most one request in flight.
    pub max_blocking: usize,
    /// Response bytes all connections together may hold: answers being built, answers and
    /// notifications queued, and answers their sockets have not taken yet (0:
    /// [`default_max_buffered_bytes`] of this configuration's limits). A request past it is
    /// answered [`codes::SERVER_BUSY`] (HTTP 503); a notification past it closes its connection
    /// with [`BUSY_CLOSE`]. Never less than [`Limits::max_response_bytes`], so that every answer
    /// the cap allows can be served.
    pub max_buffered_bytes: usize,
}

impl Config {
    /// Defaults: `127.0.0.1:8899`, metrics on `127.0.0.1:9899`, polling every 50 ms.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            store: None,
            addr: SocketAddr::from(([127, 0, 0, 1], 8899)),
            metrics_addr: Some(SocketAddr::from(([127, 0, 0, 1], 9899))),
            poll_interval: Duration::from_millis(50),
            limits: Limits::default(),
            execution: Execution::Auto,
            notification_buffer: 256,
            max_subscriptions: 16,
            record_poll_interval: Duration::from_millis(20),
            record_buffer: 4096,
            record_keep: DEFAULT_RECORD_KEEP,
            vote_keep_slots: aldb_objstore::DEFAULT_VOTE_KEEP_SLOTS,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            write_timeout: DEFAULT_WRITE_TIMEOUT,
            ws_queue_bytes: DEFAULT_WS_QUEUE_BYTES,
            ws_idle_timeout: DEFAULT_WS_IDLE_TIMEOUT,
            max_blocking: 0,
            max_buffered_bytes: 0,
        }
    }
}

/// The response budget in force: the configured one, or the default for the configured limits;
/// never below one answer of the largest size allowed.
pub(super) fn max_buffered_bytes(config: &Config) -> usize {
    let max_response = config.limits.max_response_bytes;
    match config.max_buffered_bytes {
        0 => default_max_buffered_bytes(config.ws_queue_bytes, max_response),
        n if n < max_response => {
            log::warn!(
                "the response buffer of {n} bytes is smaller than one answer may be ({max_response} bytes); using \
                 {max_response}"
            );
            max_response
        }
        n => n,
    }
}
