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

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use aldb_format::records::RecordLogReader;
use aldb_format::status::{STATUS_FILE, StatusFollower};
use aldb_format::{ReadError, SlotInfo, SnapshotReader};

use crate::replica::{Replica, StoreConfig};
use crate::source::Source;
use aldb_verify::Commitment;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, close_code};
use axum::extract::{ConnectInfo, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::{SinkExt, StreamExt};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use prometheus::IntGauge;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, broadcast, mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use crate::budget::{BUSY_MESSAGE, Busy, Reservation, ResponseBudget};
use crate::conn::{ConnHandle, ConnLimits, GuardedListener};
use crate::encode;
use crate::error::ServeError;
use crate::levels::{Level, Levels, Served, View};
use crate::metrics::Metrics;
use crate::records::{At, DEFAULT_RECORD_KEEP, RecordFeed};
use crate::rpc::{Limits, Rpc, RpcError, Subscriptions, codes};
use crate::votes::VoteFeed;

/// WebSocket close code sent to a connection whose record subscriptions fell more than
/// [`Config::record_buffer`] live notifications behind.
pub const SLOW_SUBSCRIBER_CLOSE: u16 = 4008;
/// How long a slow connection's socket gets to take the close frame before it is dropped.
const SLOW_CLOSE_GRACE: Duration = Duration::from_secs(5);
/// Record notifications handed to a connection's writer ahead of the socket.
const RECORD_QUEUE: usize = 32;
/// WebSocket close code sent to a connection that stopped taking its replies: a write made no
/// progress for [`Config::write_timeout`].
pub const NOT_READING_CLOSE: u16 = 4009;

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
/// WebSocket close code (1013, "try again later") sent to a subscriber whose notification found
/// the server's response budget spent.
pub const BUSY_CLOSE: u16 = close_code::AGAIN;
/// Bytes held for a request before it is handled: room for a typical single answer, so a light
/// request reserves once and a full budget refuses requests before any work is done for them.
const RESERVE_AHEAD: usize = 4096;
/// Connections whose worst case the default response budget holds at once.
const BUDGET_CONNECTIONS: usize = 8;

/// The default [`Config::max_buffered_bytes`]: the worst case of eight connections at once, each
/// a WebSocket connection with a full reply queue, the answer its socket is stuck on and the next
/// one built (`8 × (ws_queue_bytes + 2 × max_response_bytes)`, 288 MiB with the defaults).
pub fn default_max_buffered_bytes(ws_queue_bytes: usize, max_response_bytes: usize) -> usize {
    max_response_bytes.saturating_mul(2).saturating_add(ws_queue_bytes).saturating_mul(BUDGET_CONNECTIONS)
}

/// Where request handling runs.
///
/// A proof takes tens of microseconds of CPU, comparable to the HTTP work around it, so moving
/// each one to the blocking pool costs more in hand-offs than it saves; a large batch, though,
/// should not hold a reactor thread for long. `hyades-bench --execution` measures the choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Execution {
    /// On the async worker that read the request.
    Inline,
    /// On tokio's blocking pool.
    Blocking,
    /// Inline for a single request of up to [`AUTO_INLINE_MAX_BYTES`] whose work does not grow
    /// with its parameters; on the blocking pool for the rest: batches, larger bodies, and
    /// `getMultipleAccountProofs`, `getStateRoots` and `getRootRecords` (many keys, ranges), and
    /// `getSlotVotes` (reads the vote-evidence log; thousands of votes at mainnet sizes).
    Auto,
}

/// The largest body [`Execution::Auto`] handles inline: room for a few single-proof requests.
pub const AUTO_INLINE_MAX_BYTES: usize = 1024;

/// The methods whose work and answer grow with their parameters.
const HEAVY_METHODS: [&[u8]; 4] = [b"getMultipleAccountProofs", b"getStateRoots", b"getRootRecords", b"getSlotVotes"];

impl Execution {
    /// Whether `body` is handled on the blocking pool.
    fn blocking(self, body: &[u8]) -> bool {
        match self {
            Execution::Inline => false,
            Execution::Blocking => true,
            Execution::Auto => {
                if body.len() > AUTO_INLINE_MAX_BYTES {
                    return true;
                }
                let first = body.iter().find(|b| !b.is_ascii_whitespace());
                // A backslash could spell a method name in escapes; such bodies are not worth
                // the risk of a misjudged heavy one.
                first != Some(&b'{')
                    || body.contains(&b'\\')
                    || HEAVY_METHODS.iter().any(|m| body.windows(m.len()).any(|w| w == *m))
            }
        }
    }
}

impl std::str::FromStr for Execution {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "inline" => Ok(Self::Inline),
            "blocking" => Ok(Self::Blocking),
            "auto" => Ok(Self::Auto),
            other => Err(format!("unknown execution mode {other:?} (expected inline, blocking or auto)")),
        }
    }
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

/// A newly published root, a root reaching a higher level, or an announced root abandoned, as
/// broadcast to connections.
#[derive(Debug)]
struct RootEvent {
    /// Position in the feed; a subscription receives events from the position current when it
    /// was made.
    seq: u64,
    /// The `{"slot","parent","root","commitment"?,"abandoned"?}` JSON, serialised once for every
    /// subscriber.
    result: String,
    /// What the event says of the root.
    says: Said,
    /// What was said of the same root before (`Said::Unknown` for a new root).
    before: Said,
}

/// What the feed has said of a root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Said {
    /// Announced without a level (a directory without a journal), or not announced yet.
    Unknown,
    /// Announced at this level.
    At(Level),
    /// Announced as abandoned.
    Abandoned,
}

impl RootEvent {
    /// Whether a subscription asking for roots at `level` (every event when `None`) receives
    /// this one: a root once, when it reaches the level, and its abandonment if it was sent.
    fn due(&self, level: Option<Level>) -> bool {
        let Some(want) = level else { return true };
        let reached = |s: Said| matches!(s, Said::At(l) if l >= want);
        match self.says {
            // Without a journal the files are at their writer's level, confirmed or finalized;
            // only `finalized` cannot be promised.
            Said::Unknown => want <= Level::Confirmed,
            Said::At(_) => reached(self.says) && !reached(self.before),
            Said::Abandoned => reached(self.before),
        }
    }
}

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

/// A running service. Dropping it stops it too, without waiting.
#[derive(Debug)]
pub struct Service {
    addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    hyades: Source,
    records: Arc<RecordFeed>,
    metrics: Arc<Metrics>,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Service {
    /// Opens the directory, binds the listeners and starts serving on the current tokio runtime.
    pub async fn start(config: Config) -> Result<Self, ServeError> {
        let metrics = Arc::new(Metrics::new().map_err(|e| ServeError::Metrics(e.to_string()))?);
        let hyades = match &config.store {
            None => {
                if !config.dir.is_dir() {
                    return Err(ServeError::NoDirectory(config.dir));
                }
                let dir = config.dir.clone();
                let reader = tokio::task::spawn_blocking(move || SnapshotReader::open(&dir))
                    .await
                    .map_err(|e| ServeError::Task(e.to_string()))?
                    .map_err(ServeError::Open)?;
                Source::Directory(Arc::new(reader))
            }
            Some(store) => {
                let replica =
                    Replica::open(store, config.dir.clone(), config.record_keep as u64, config.vote_keep_slots)
                        .await
                        .map_err(|e| ServeError::Store(e.to_string()))?;
                let m = replica.source().metrics();
                metrics
                    .register_all(vec![
                        Box::new(m.hits.clone()),
                        Box::new(m.misses.clone()),
                        Box::new(m.fetched_bytes.clone()),
                        Box::new(m.evictions.clone()),
                        Box::new(m.refused.clone()),
                        Box::new(m.cache_damaged.clone()),
                        Box::new(m.manifest_refused.clone()),
                        Box::new(m.log_damaged.clone()),
                        Box::new(m.archive_fetches.clone()),
                        Box::new(m.archive_refused.clone()),
                        Box::new(m.manifest_reads.clone()),
                        Box::new(m.cached_bytes.clone()),
                        Box::new(m.cached_files.clone()),
                    ])
                    .map_err(|e| ServeError::Metrics(e.to_string()))?;
                Source::Bucket(Arc::new(replica))
            }
        };
        // The levels are known before the first answer: the journal is read, then the directory
        // again, as the poller does.
        let levels = Arc::new(Levels::default());
        let tracker = {
            let (h, l) = (hyades.clone(), levels.clone());
            let mut t = Tracker { dir: config.dir.clone(), follower: StatusFollower::new(&config.dir), built: None };
            let (t, first) = tokio::task::spawn_blocking(move || {
                let r = refresh_all(&h, &l, &mut t);
                (t, r)
            })
            .await
            .map_err(|e| ServeError::Task(e.to_string()))?;
            match first {
                Ok(r) => {
                    if let Some(e) = r.journal_error {
                        log::warn!("cannot read the slot-status journal: {e}");
                    }
                }
                Err(e) => return Err(ServeError::Open(e)),
            }
            metrics.set_levels(levels.view().counts());
            t
        };
        metrics.set_range(hyades.oldest().map(|s| s.slot), hyades.latest().map(|s| s.slot));
        // The record log is read once before serving, so what is logged is served at once.
        let records = Arc::new(RecordFeed::new(config.record_keep));
        let reader = Arc::new(std::sync::Mutex::new(RecordLogReader::new(&config.dir)));
        {
            let (reader, records, metrics) = (reader.clone(), records.clone(), metrics.clone());
            let first = tokio::task::spawn_blocking(move || refresh_records(&reader, &records, &metrics))
                .await
                .map_err(|e| ServeError::Task(e.to_string()))?;
            // A damaged log must not keep the proof service down; the poller keeps trying.
            if let Err(e) = first {
                log::warn!("cannot read the record log: {e}");
            }
        }

        // The vote-evidence log likewise; a replica's is the copy in its cache directory.
        let votes = Arc::new(match &config.store {
            None => VoteFeed::open(&config.dir),
            Some(_) => match hyades.replica() {
                Some(r) => VoteFeed::replica(&config.dir).with_archive(r.clone()),
                None => VoteFeed::replica(&config.dir),
            },
        });
        {
            let votes = votes.clone();
            let first = tokio::task::spawn_blocking(move || votes.refresh())
                .await
                .map_err(|e| ServeError::Task(e.to_string()))?;
            if let Err(e) = first {
                log::warn!("cannot read the vote-evidence log: {e}");
            }
        }

        let listener = bind(config.addr).await?;
        let addr = listener.local_addr().map_err(|source| ServeError::Bind { addr: config.addr, source })?;
        let metrics_listener = match config.metrics_addr {
            Some(a) => Some(bind(a).await?),
            None => None,
        };
        let metrics_addr = match (&metrics_listener, config.metrics_addr) {
            (Some(l), Some(a)) => Some(l.local_addr().map_err(|source| ServeError::Bind { addr: a, source })?),
            _ => None,
        };

        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        // Deep enough for a burst of roots found in one poll; a connection that falls this far
        // behind is disconnected as slow.
        let (feed, _) = broadcast::channel(config.notification_buffer.max(1024));
        let shared = Arc::new(Shared {
            rpc: Rpc::with_levels(hyades.clone(), records.clone(), levels, metrics.clone(), config.limits)
                .with_votes(votes.clone()),
            metrics: metrics.clone(),
            execution: config.execution,
            feed,
            announced: AtomicU64::new(0),
            next_subscription: AtomicU64::new(1),
            notification_buffer: config.notification_buffer.max(1),
            max_subscriptions: config.max_subscriptions,
            record_buffer: config.record_buffer.max(1),
            blocking: Arc::new(Semaphore::new(max_blocking(config.max_blocking))),
            budget: ResponseBudget::new(max_buffered_bytes(&config), &metrics),
            // A semaphore counts at most u32::MAX at once.
            ws_queue_bytes: config.ws_queue_bytes.clamp(1, u32::MAX as usize),
            write_timeout: config.write_timeout,
            header_timeout: config.header_timeout,
            ws_idle_timeout: config.ws_idle_timeout,
            shutdown: shutdown_rx.clone(),
        });

        let mut tasks = Vec::new();
        let app = Router::new()
            .route("/", get(ws_upgrade).post(rpc_http))
            .route("/ws", get(ws_upgrade))
            .route("/health", get(health))
            .layer(axum::middleware::from_fn(track_request))
            .layer(axum::middleware::from_fn(cors))
            .with_state(shared.clone())
            .into_make_service_with_connect_info::<ConnHandle>();
        let limits = ConnLimits {
            max_connections: config.max_connections.max(1),
            header_timeout: config.header_timeout,
            idle_timeout: config.idle_timeout,
            write_timeout: config.write_timeout,
        };
        let listener = GuardedListener::new(listener, limits, metrics.clone());
        let mut rx = shutdown_rx.clone();
        tasks.push(tokio::spawn(async move {
            let stop = async move {
                let _ = rx.wait_for(|s| *s).await;
            };
            if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(stop).await {
                log::error!("RPC listener failed: {e}");
            }
        }));
        if let Some(l) = metrics_listener {
            let m = metrics.clone();
            let app = Router::new().route(
                "/metrics",
                get(move || {
                    let m = m.clone();
                    async move { ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], m.encode()) }
                }),
            );
            let mut rx = shutdown_rx.clone();
            tasks.push(tokio::spawn(async move {
                let stop = async move {
                    let _ = rx.wait_for(|s| *s).await;
                };
                if let Err(e) = axum::serve(l, app).with_graceful_shutdown(stop).await {
                    log::error!("metrics listener failed: {e}");
                }
            }));
        }
        tasks.push(tokio::spawn(poll_records(
            reader,
            records.clone(),
            metrics.clone(),
            config.record_poll_interval,
            shutdown_rx.clone(),
        )));
        tasks.push(tokio::spawn(crate::votes::poll(votes, config.poll_interval, shutdown_rx.clone())));
        tasks.push(tokio::spawn(poll(shared, config.poll_interval, shutdown_rx, tracker)));
        log::info!(
            "serving {} on {addr} (metrics: {}), {} slots published, root records {}",
            config.store.as_ref().map_or_else(|| config.dir.display().to_string(), |s| s.url.clone()),
            metrics_addr.map_or("off".to_string(), |a| a.to_string()),
            hyades.slots(0, u64::MAX).len(),
            records.range().map_or("none".to_string(), |(o, n)| format!("{o}..={n}")),
        );
        Ok(Self { addr, metrics_addr, hyades, records, metrics, shutdown: shutdown_tx, tasks })
    }

    /// The JSON-RPC / WebSocket address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The metrics address actually bound, if metrics are on.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// The snapshots being served.
    pub fn hyades(&self) -> &Source {
        &self.hyades
    }

    /// The root records being served.
    pub fn records(&self) -> &Arc<RecordFeed> {
        &self.records
    }

    /// The service's metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Stops accepting, closes WebSocket connections and waits (up to a few seconds) for the
    /// listeners and the poller to finish.
    pub async fn shutdown(mut self) {
        let _ = self.shutdown.send(true);
        for t in self.tasks.drain(..) {
            let abort = t.abort_handle();
            if tokio::time::timeout(Duration::from_secs(5), t).await.is_err() {
                abort.abort();
            }
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
    }
}

/// The response budget in force: the configured one, or the default for the configured limits;
/// never below one answer of the largest size allowed.
fn max_buffered_bytes(config: &Config) -> usize {
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

/// Four per core: proofs fault in pages of the mapped files, so a few more than the cores keep
/// the CPUs busy while some wait on the disk.
fn max_blocking(configured: usize) -> usize {
    match configured {
        0 => 4 * std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n.min(Semaphore::MAX_PERMITS),
    }
}

/// Tells the connection guard a request is being handled (its head is complete), and that the
/// connection waits for the next one once the answer is handed back.
/// Lets a web page on any origin call the API, as Solana's RPC nodes do: everything served is
/// public and read-only, no request carries credentials, and a page checks every answer itself
/// (`@aldb/verify`), so there is nothing a foreign origin could gain. Preflights are answered
/// here, before any work.
async fn cors(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    if req.method() == axum::http::Method::OPTIONS {
        return (
            StatusCode::NO_CONTENT,
            [
                (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
                (header::ACCESS_CONTROL_ALLOW_METHODS, "GET, POST, OPTIONS"),
                (header::ACCESS_CONTROL_ALLOW_HEADERS, "content-type"),
                (header::ACCESS_CONTROL_MAX_AGE, "86400"),
            ],
        )
            .into_response();
    }
    let mut response = next.run(req).await;
    response.headers_mut().insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, header::HeaderValue::from_static("*"));
    response
}

async fn track_request(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let conn = req.extensions().get::<ConnectInfo<ConnHandle>>().map(|c| c.0.clone());
    if let Some(c) = &conn {
        c.busy();
    }
    let response = next.run(req).await;
    if let Some(c) = &conn {
        c.idle();
    }
    response
}

/// Runs `f` on the blocking pool once one of the [`Config::max_blocking`] permits is free.
async fn run_blocking<T: Send + 'static>(s: &Shared, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    s.metrics.blocking_requests.inc();
    let out = match s.blocking.clone().acquire_owned().await {
        Ok(permit) => tokio::task::spawn_blocking(move || {
            let out = f();
            drop(permit);
            out
        })
        .await
        .map_err(|e| log::error!("request handler failed: {e}"))
        .ok(),
        // The semaphore is never closed.
        Err(_) => None,
    };
    s.metrics.blocking_requests.dec();
    out
}

async fn bind(addr: SocketAddr) -> Result<TcpListener, ServeError> {
    TcpListener::bind(addr).await.map_err(|source| ServeError::Bind { addr, source })
}

fn json_body(status: StatusCode, body: Vec<u8>) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// `GET /health`: 200 "ok" once something is published, 503 before (as Solana's `/health`).
async fn health(State(s): State<Arc<Shared>>) -> Response {
    match s.rpc.hyades().latest() {
        Some(_) => (StatusCode::OK, "ok").into_response(),
        None => (StatusCode::SERVICE_UNAVAILABLE, "nothing published").into_response(),
    }
}

/// `POST /`: one JSON-RPC request or batch.
async fn rpc_http(State(s): State<Arc<Shared>>, body: Body) -> Response {
    let limit = s.rpc.limits().max_body_bytes;
    // A body trickled in slowly holds the connection like a slow head does.
    let collected = match tokio::time::timeout(s.header_timeout, Limited::new(body, limit).collect()).await {
        Ok(c) => c,
        Err(_) => {
            s.metrics.limit_header_timeout.inc();
            let msg = format!("Invalid request: body not received within {} s", s.header_timeout.as_secs_f64());
            let mut r =
                json_body(StatusCode::REQUEST_TIMEOUT, s.rpc.error_body(&RpcError::new(codes::INVALID_REQUEST, msg)));
            r.headers_mut().insert(header::CONNECTION, header::HeaderValue::from_static("close"));
            return r;
        }
    };
    let bytes = match collected {
        Ok(c) => c.to_bytes(),
        Err(e) => {
            let (status, err) = if e.downcast_ref::<LengthLimitError>().is_some() {
                let msg = format!("Invalid request: body exceeds the limit of {limit} bytes");
                (StatusCode::PAYLOAD_TOO_LARGE, RpcError::with_data(codes::INVALID_REQUEST, msg, json!({"max": limit})))
            } else {
                (
                    StatusCode::BAD_REQUEST,
                    RpcError::new(codes::INVALID_REQUEST, format!("Invalid request: cannot read body: {e}")),
                )
            };
            return json_body(status, s.rpc.error_body(&err));
        }
    };
    // Held before any work, so a spent budget refuses the request at once.
    let Some(mut held) = s.budget.try_reserve(RESERVE_AHEAD) else { return busy_response(&s) };
    let out = if s.execution.blocking(&bytes) {
        let s2 = s.clone();
        let done = run_blocking(&s, move || {
            let out = s2.rpc.handle_held(&bytes, None, &mut held);
            (out, held)
        })
        .await;
        match done {
            Some((out, back)) => {
                held = back;
                out
            }
            None => {
                let err = RpcError::new(codes::INTERNAL_ERROR, "Internal error");
                return json_body(StatusCode::OK, s.rpc.error_body(&err));
            }
        }
    } else {
        s.rpc.handle_held(&bytes, None, &mut held)
    };
    match out {
        Ok(Some(body)) => {
            held.shrink_to(body.len());
            // The bytes stay held until hyper drops the last of them: written to the socket, or
            // the connection gone.
            let body = Bytes::from_owner(HeldBody { body, _held: held });
            (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], Body::from(body)).into_response()
        }
        // Only notifications: JSON-RPC says nothing is returned.
        Ok(None) => StatusCode::NO_CONTENT.into_response(),
        Err(Busy) => {
            drop(held);
            busy_response(&s)
        }
    }
}

/// An HTTP answer's bytes and what they hold of the response budget.
struct HeldBody {
    body: Vec<u8>,
    _held: Reservation,
}

impl AsRef<[u8]> for HeldBody {
    fn as_ref(&self) -> &[u8] {
        &self.body
    }
}

/// `503` with [`codes::SERVER_BUSY`]: the response budget is spent. The answer is small and not
/// counted in the budget.
fn busy_response(s: &Shared) -> Response {
    let mut r = json_body(StatusCode::SERVICE_UNAVAILABLE, s.rpc.busy_body(s.budget.cap()));
    r.headers_mut().insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
    r
}

async fn ws_upgrade(
    State(s): State<Arc<Shared>>,
    ConnectInfo(conn): ConnectInfo<ConnHandle>,
    ws: WebSocketUpgrade,
) -> Response {
    let limit = s.rpc.limits().max_body_bytes;
    conn.websocket();
    ws.max_message_size(limit).max_frame_size(limit).on_upgrade(move |socket| connection(s, socket))
}

/// A record subscription: a cursor into the record feed.
#[derive(Debug)]
struct RecordSub {
    /// The next feed position to send.
    next: u64,
    /// The feed head when it subscribed; positions from here on are live.
    live_start: u64,
    /// Records below this slot are skipped.
    from_slot: Option<u64>,
    /// Records of the other level are skipped.
    commitment: Option<Commitment>,
}

/// Why [`ConnSubs::pump`] stopped short of its subscriptions' records.
enum PumpStop {
    /// A subscription's next record was pruned before it could be sent.
    Pruned,
    /// The server's response budget cannot take the next notification.
    Busy,
}

/// One WebSocket connection's subscriptions.
struct ConnSubs {
    shared: Arc<Shared>,
    /// Root subscription id → first feed position it receives, and the level it asked for.
    ids: BTreeMap<u64, (u64, Option<Level>)>,
    /// The feed, only while there is a subscription, so an idle connection never lags.
    feed: Option<broadcast::Receiver<Arc<RootEvent>>>,
    /// Record subscriptions by id.
    records: BTreeMap<u64, RecordSub>,
    /// Wakes the connection when records are appended, while it has record subscriptions.
    record_head_rx: Option<watch::Receiver<u64>>,
    /// The record feed's head as last seen.
    record_head: u64,
}

impl ConnSubs {
    fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            ids: BTreeMap::new(),
            feed: None,
            records: BTreeMap::new(),
            record_head_rx: None,
            record_head: 0,
        }
    }

    fn check_room(&self) -> Result<(), RpcError> {
        if self.ids.len() + self.records.len() >= self.shared.max_subscriptions {
            return Err(RpcError::with_data(
                codes::TOO_MANY_SUBSCRIPTIONS,
                format!("too many subscriptions: this connection already holds {}", self.shared.max_subscriptions),
                json!({"max": self.shared.max_subscriptions}),
            ));
        }
        Ok(())
    }

    /// Whether some record subscription has a record to send.
    fn records_pending(&self) -> bool {
        self.records.values().any(|s| s.next < self.record_head)
    }

    /// Live record notifications due to this connection and not yet taken by its socket: those
    /// behind the cursors plus those queued for the writer.
    fn records_buffered(&self, queued: usize) -> u64 {
        let behind: u64 =
            self.records.values().map(|s| self.record_head.saturating_sub(s.next.max(s.live_start))).sum();
        behind + queued as u64
    }

    /// Queues record notifications while the writer has room. An error when a subscription's
    /// next record was pruned from memory before it could be sent (a subscriber too slow), or
    /// the server's response budget cannot take the next notification.
    fn pump(&mut self, first: mpsc::Permit<'_, Queued>, queue: &mpsc::Sender<Queued>) -> Result<(), PumpStop> {
        let records = self.shared.rpc.records();
        let mut permit = Some(first);
        // A bounded batch per wake-up, so requests on this connection are still read promptly.
        for _ in 0..RECORD_QUEUE {
            let Some((&id, sub)) = self.records.iter_mut().find(|(_, s)| s.next < self.record_head) else { break };
            let entry = match records.entry_at(sub.next) {
                At::Entry(e) => e,
                At::NotYet => break,
                At::Gone => return Err(PumpStop::Pruned),
            };
            sub.next += 1;
            if sub.from_slot.is_some_and(|f| entry.slot < f) || sub.commitment.is_some_and(|c| c != entry.commitment) {
                continue;
            }
            let p = match permit.take() {
                Some(p) => p,
                None => match queue.try_reserve() {
                    Ok(p) => p,
                    Err(_) => {
                        sub.next -= 1;
                        break;
                    }
                },
            };
            let note = format!(
                r#"{{"jsonrpc":"2.0","method":"recordNotification","params":{{"subscription":{id},"result":{}}}}}"#,
                entry.json
            );
            let Some(held) = self.shared.budget.try_reserve(note.len()) else { return Err(PumpStop::Busy) };
            p.send(Queued::new(Message::text(note), &self.shared.metrics, None, Some(held)));
            self.shared.metrics.records_served.inc();
        }
        Ok(())
    }
}

impl Subscriptions for ConnSubs {
    fn subscribe(&mut self) -> Result<u64, RpcError> {
        self.subscribe_at(None)
    }

    fn subscribe_at(&mut self, level: Option<Level>) -> Result<u64, RpcError> {
        self.check_room()?;
        // Receiver first, position second: every event numbered at or after the position is
        // sent after the receiver exists, so it is received; earlier ones are filtered out.
        if self.feed.is_none() {
            self.feed = Some(self.shared.feed.subscribe());
        }
        let start = self.shared.announced.load(Ordering::SeqCst);
        let id = self.shared.next_subscription.fetch_add(1, Ordering::Relaxed);
        self.ids.insert(id, (start, level));
        self.shared.metrics.subscribers.inc();
        Ok(id)
    }

    fn unsubscribe(&mut self, id: u64) -> bool {
        if self.ids.remove(&id).is_none() {
            return false;
        }
        self.shared.metrics.subscribers.dec();
        if self.ids.is_empty() {
            self.feed = None;
        }
        true
    }

    fn record_subscribe(&mut self, from_slot: Option<u64>, commitment: Option<Commitment>) -> Result<u64, RpcError> {
        self.check_room()?;
        let records = self.shared.rpc.records();
        // Receiver first: the head it shows is at least the cursor's live start, and every
        // later append wakes it.
        let rx = self.record_head_rx.get_or_insert_with(|| records.watch());
        let cursor = records.cursor(from_slot, commitment).map_err(|e| e.to_rpc())?;
        self.record_head = self.record_head.max(*rx.borrow_and_update());
        let id = self.shared.next_subscription.fetch_add(1, Ordering::Relaxed);
        self.records.insert(id, RecordSub { next: cursor.next, live_start: cursor.live_start, from_slot, commitment });
        self.shared.metrics.record_subscribers.inc();
        Ok(id)
    }

    fn record_unsubscribe(&mut self, id: u64) -> bool {
        if self.records.remove(&id).is_none() {
            return false;
        }
        self.shared.metrics.record_subscribers.dec();
        if self.records.is_empty() {
            self.record_head_rx = None;
        }
        true
    }
}

impl Drop for ConnSubs {
    fn drop(&mut self) {
        self.shared.metrics.subscribers.sub(self.ids.len() as i64);
        self.shared.metrics.record_subscribers.sub(self.records.len() as i64);
    }
}

async fn next_root(
    feed: &mut Option<broadcast::Receiver<Arc<RootEvent>>>,
) -> Result<Arc<RootEvent>, broadcast::error::RecvError> {
    match feed {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// The record feed's new head, once records are appended.
async fn next_record_head(rx: &mut Option<watch::Receiver<u64>>) -> u64 {
    match rx {
        Some(rx) => match rx.changed().await {
            Ok(()) => *rx.borrow_and_update(),
            // The feed lives as long as the service.
            Err(_) => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}

enum Event<'a> {
    Incoming(Option<Result<Message, axum::Error>>),
    Root(Result<Arc<RootEvent>, broadcast::error::RecvError>),
    RecordHead(u64),
    RecordRoom(Result<mpsc::Permit<'a, Queued>, mpsc::error::SendError<()>>),
    /// No message for [`Config::ws_idle_timeout`] and no subscription.
    Idle,
    /// The writer ended: the socket failed or stalled.
    WriterGone,
    Shutdown,
}

/// A message queued for a connection's socket. Its bytes count in `hyades_websocket_queued_bytes`
/// (and, for answers and root notifications, hold the connection's byte room) until the socket
/// has taken it or it is dropped, so whatever way a connection ends, its bytes are released.
struct Queued {
    msg: Message,
    bytes: i64,
    gauge: IntGauge,
    _room: Option<OwnedSemaphorePermit>,
    /// The message's bytes in the server-wide response budget (none for a busy refusal).
    _held: Option<Reservation>,
}

impl Queued {
    fn new(msg: Message, metrics: &Metrics, room: Option<OwnedSemaphorePermit>, held: Option<Reservation>) -> Self {
        let bytes = match &msg {
            Message::Text(t) => t.len(),
            Message::Binary(b) => b.len(),
            _ => 0,
        };
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        metrics.ws_queued_bytes.add(bytes);
        Self { msg, bytes, gauge: metrics.ws_queued_bytes.clone(), _room: room, _held: held }
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.gauge.sub(self.bytes);
    }
}

/// Closes the connection's byte room when the writer ends, however it ends, so a reader waiting
/// for room stops waiting.
struct CloseRoom(Arc<Semaphore>);

impl Drop for CloseRoom {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// The byte room an answer of `len` bytes takes (an answer larger than the whole room takes all
/// of it, so it waits until everything before it is sent).
fn room_for(len: usize, room: usize) -> u32 {
    u32::try_from(len.clamp(1, room)).unwrap_or(u32::MAX)
}

/// Sends `m` unless a close frame is ordered first; false when the socket failed or the
/// connection was killed (the close frame then sent).
async fn send_or_kill(
    sink: &mut futures_util::stream::SplitSink<WebSocket, Message>,
    m: Message,
    kill_rx: &mut oneshot::Receiver<CloseFrame>,
    killable: &mut bool,
) -> bool {
    let frame = {
        let send = sink.send(m);
        tokio::pin!(send);
        loop {
            tokio::select! {
                biased;
                frame = &mut *kill_rx, if *killable => match frame {
                    Ok(frame) => break frame,
                    // Not killed: finish the send.
                    Err(_) => *killable = false,
                },
                r = &mut send => return r.is_ok(),
            }
        }
    };
    close_slow(sink, frame).await;
    false
}

/// Sends a close frame behind whatever the socket already holds (an abandoned send's frame is
/// finished first, so the stream stays well formed), giving the client a while to read it.
async fn close_slow(sink: &mut futures_util::stream::SplitSink<WebSocket, Message>, frame: CloseFrame) {
    // A slow client is given time to read up to its close frame, so it learns why; a shutdown
    // does not wait for anyone.
    let grace = if frame.code == close_code::AWAY { Duration::from_millis(200) } else { SLOW_CLOSE_GRACE };
    let _ = tokio::time::timeout(grace, sink.send(Message::Close(Some(frame)))).await;
}

/// Serves one WebSocket connection: requests are answered in order, notifications interleave.
///
/// Memory: answers and root notifications take byte room ([`Config::ws_queue_bytes`]) until
/// the socket takes them. An answer waits for room, so a client that sends requests and reads
/// nothing stops being read once its room is full; a root notification never waits, and finds
/// no room only for a slow subscriber, which is closed. A write that makes no progress for
/// [`Config::write_timeout`] ends the connection with close code [`NOT_READING_CLOSE`].
async fn connection(shared: Arc<Shared>, socket: WebSocket) {
    shared.metrics.ws_connections.inc();
    let (mut sink, mut stream) = socket.split();
    let (out_tx, mut out_rx) = mpsc::channel::<Queued>(shared.notification_buffer);
    // Record notifications have their own small queue: they are pulled from the feed at the
    // socket's pace and must never crowd out answers and root notifications.
    let (rec_tx, mut rec_rx) = mpsc::channel::<Queued>(RECORD_QUEUE);
    let (kill_tx, mut kill_rx) = oneshot::channel::<CloseFrame>();
    let room = Arc::new(Semaphore::new(shared.ws_queue_bytes));
    // The writer owns the socket's sending half, so a slow reader only ever fills its own queue.
    let writer = {
        let (shared, room) = (shared.clone(), room.clone());
        tokio::spawn(async move {
            let _close_room = CloseRoom(room.clone());
            let mut killable = true;
            let mut records_open = true;
            loop {
                let q = tokio::select! {
                    biased;
                    frame = &mut kill_rx, if killable => match frame {
                        Ok(frame) => {
                            close_slow(&mut sink, frame).await;
                            return;
                        }
                        Err(_) => {
                            killable = false;
                            continue;
                        }
                    },
                    // Answers and root notifications first: a subscription's id is answered
                    // before any of its records is queued, so it also reaches the client first.
                    q = out_rx.recv() => match q {
                        Some(q) => q,
                        None => {
                            let _ = sink.close().await;
                            return;
                        }
                    },
                    q = rec_rx.recv(), if records_open => match q {
                        Some(q) => q,
                        None => {
                            records_open = false;
                            continue;
                        }
                    },
                };
                let send = send_or_kill(&mut sink, q.msg.clone(), &mut kill_rx, &mut killable);
                match tokio::time::timeout(shared.write_timeout, send).await {
                    Ok(true) => drop(q),
                    Ok(false) => return,
                    Err(_) => {
                        shared.metrics.limit_ws_write_timeout.inc();
                        let queued = shared.ws_queue_bytes.saturating_sub(room.available_permits());
                        let reason = format!(
                            "not reading: a write stalled {} s, {queued} bytes queued",
                            shared.write_timeout.as_secs()
                        );
                        drop(q);
                        close_slow(&mut sink, CloseFrame { code: NOT_READING_CLOSE, reason: reason.into() }).await;
                        return;
                    }
                }
            }
        })
    };

    let mut subs = ConnSubs::new(shared.clone());
    let mut shutdown = shared.shutdown.clone();
    let mut close: Option<CloseFrame> = None;
    let idle = tokio::time::sleep(shared.ws_idle_timeout);
    tokio::pin!(idle);
    loop {
        let pending = subs.records_pending();
        let subscribed = !subs.ids.is_empty() || !subs.records.is_empty();
        let event = tokio::select! {
            m = stream.next() => Event::Incoming(m),
            r = next_root(&mut subs.feed) => Event::Root(r),
            h = next_record_head(&mut subs.record_head_rx) => Event::RecordHead(h),
            p = rec_tx.reserve(), if pending => Event::RecordRoom(p),
            _ = &mut idle, if !subscribed => Event::Idle,
            _ = out_tx.closed() => Event::WriterGone,
            _ = shutdown.wait_for(|s| *s) => Event::Shutdown,
        };
        if let Event::Incoming(Some(Ok(_))) = &event {
            idle.as_mut().reset(tokio::time::Instant::now() + shared.ws_idle_timeout);
        }
        match event {
            Event::Incoming(None | Some(Err(_)) | Some(Ok(Message::Close(_)))) => break,
            Event::Incoming(Some(Ok(Message::Ping(_) | Message::Pong(_)))) => {}
            Event::Incoming(Some(Ok(m @ (Message::Text(_) | Message::Binary(_))))) => {
                // Held before any work; a spent budget answers "server busy", a small answer
                // held by the connection's own queue alone.
                let held = shared.budget.try_reserve(RESERVE_AHEAD);
                let (reply, held) = if held.is_none() {
                    (Some(shared.rpc.busy_body(shared.budget.cap())), None)
                } else if shared.execution.blocking(message_bytes(&m)) {
                    // The subscriptions travel with the request and come back with the answer.
                    let s2 = shared.clone();
                    let mut moved = subs;
                    let done = run_blocking(&shared, move || {
                        let reply = handle_ws(&s2, message_bytes(&m), &mut moved, held);
                        (reply, moved)
                    })
                    .await;
                    match done {
                        Some((reply, back)) => {
                            subs = back;
                            reply
                        }
                        None => {
                            // The handler panicked; its subscriptions were dropped with it.
                            subs = ConnSubs::new(shared.clone());
                            close = Some(CloseFrame { code: close_code::ERROR, reason: "internal error".into() });
                            break;
                        }
                    }
                } else {
                    handle_ws(&shared, message_bytes(&m), &mut subs, held)
                };
                let Some(reply) = reply else { continue };
                let n = room_for(reply.len(), shared.ws_queue_bytes);
                let reply = match String::from_utf8(reply) {
                    Ok(s) => Message::text(s),
                    Err(e) => Message::text(String::from_utf8_lossy(e.as_bytes()).into_owned()),
                };
                // Answers wait for room: back-pressure on this client's own requests. But a root
                // due to one of its subscriptions while the queue is full cannot be queued, and
                // notifications never wait, so that makes the connection a slow subscriber. If
                // the writer gives up on the socket, the room is closed and the wait ends.
                let want = async {
                    let bytes = room.clone().acquire_many_owned(n).await.ok()?;
                    let slot = out_tx.reserve().await.ok()?;
                    Some((bytes, slot))
                };
                tokio::pin!(want);
                let got = loop {
                    tokio::select! {
                        biased;
                        got = &mut want => break got,
                        r = next_root(&mut subs.feed) => match r {
                            Ok(ev) if subs.ids.values().all(|(start, level)| ev.seq < *start || !ev.due(*level)) => {
                                continue;
                            }
                            _ => {
                                close = Some(slow_frame());
                                shared.metrics.slow_disconnects.inc();
                                break None;
                            }
                        },
                    }
                };
                match got {
                    Some((bytes, slot)) => slot.send(Queued::new(reply, &shared.metrics, Some(bytes), held)),
                    None => break,
                }
            }
            Event::Root(Ok(ev)) => {
                if let Err(frame) = notify(&subs, &ev, &out_tx, &room) {
                    // A spent budget is counted as a limit hit; only a slow reader as slow.
                    if frame.code != BUSY_CLOSE {
                        shared.metrics.slow_disconnects.inc();
                    }
                    close = Some(frame);
                    break;
                }
            }
            Event::Root(Err(broadcast::error::RecvError::Lagged(_))) => {
                close = Some(slow_frame());
                shared.metrics.slow_disconnects.inc();
                break;
            }
            Event::RecordHead(head) => {
                subs.record_head = subs.record_head.max(head);
                let buffered = subs.records_buffered(RECORD_QUEUE - rec_tx.capacity());
                if buffered > shared.record_buffer as u64 {
                    close = Some(slow_record_frame(buffered));
                    shared.metrics.slow_disconnects.inc();
                    break;
                }
            }
            Event::RecordRoom(Ok(permit)) => match subs.pump(permit, &rec_tx) {
                Ok(()) => {}
                Err(PumpStop::Pruned) => {
                    let buffered = subs.records_buffered(RECORD_QUEUE - rec_tx.capacity());
                    close = Some(slow_record_frame(buffered));
                    shared.metrics.slow_disconnects.inc();
                    break;
                }
                Err(PumpStop::Busy) => {
                    close = Some(busy_frame());
                    break;
                }
            },
            // The writer is gone: the socket failed.
            Event::RecordRoom(Err(_)) | Event::WriterGone => break,
            Event::Idle => {
                shared.metrics.limit_ws_idle_timeout.inc();
                let reason = format!("idle: no message for {} s and no subscription", shared.ws_idle_timeout.as_secs());
                close = Some(CloseFrame { code: close_code::NORMAL, reason: reason.into() });
                break;
            }
            Event::Root(Err(broadcast::error::RecvError::Closed)) | Event::Shutdown => {
                close = Some(CloseFrame { code: close_code::AWAY, reason: "server shutting down".into() });
                break;
            }
        }
    }
    drop(subs);
    let abort = writer.abort_handle();
    let grace = match close {
        Some(frame) => {
            let _ = kill_tx.send(frame);
            SLOW_CLOSE_GRACE + Duration::from_secs(1)
        }
        None => {
            drop(kill_tx);
            Duration::from_secs(5)
        }
    };
    drop(out_tx);
    drop(rec_tx);
    if tokio::time::timeout(grace, writer).await.is_err() {
        abort.abort();
    }
    shared.metrics.ws_connections.dec();
}

/// Answers one WebSocket message within the response budget, `held` holding what was reserved
/// for it: the answer and what it holds, or the "server busy" answer (not held) when the budget
/// could not take it all.
fn handle_ws(
    shared: &Shared,
    body: &[u8],
    subs: &mut ConnSubs,
    held: Option<Reservation>,
) -> (Option<Vec<u8>>, Option<Reservation>) {
    let Some(mut held) = held else { return (Some(shared.rpc.busy_body(shared.budget.cap())), None) };
    match shared.rpc.handle_held(body, Some(subs), &mut held) {
        Ok(Some(reply)) => {
            held.shrink_to(reply.len());
            (Some(reply), Some(held))
        }
        Ok(None) => (None, None),
        Err(Busy) => (Some(shared.rpc.busy_body(shared.budget.cap())), None),
    }
}

/// The request bytes of a text or binary message.
fn message_bytes(m: &Message) -> &[u8] {
    match m {
        Message::Text(t) => t.as_bytes(),
        Message::Binary(b) => b.as_ref(),
        _ => &[],
    }
}

/// Queues `ev` for every subscription due to receive it; the close frame to send if the
/// connection's queue or byte room is full, or the server's response budget is spent.
fn notify(
    subs: &ConnSubs,
    ev: &RootEvent,
    out: &mpsc::Sender<Queued>,
    room: &Arc<Semaphore>,
) -> Result<(), CloseFrame> {
    for (id, (start, level)) in &subs.ids {
        if ev.seq < *start || !ev.due(*level) {
            continue;
        }
        let note = format!(
            r#"{{"jsonrpc":"2.0","method":"rootNotification","params":{{"subscription":{id},"result":{}}}}}"#,
            ev.result
        );
        let Some(held) = subs.shared.budget.try_reserve(note.len()) else { return Err(busy_frame()) };
        let Ok(bytes) = room.clone().try_acquire_many_owned(room_for(note.len(), usize::MAX)) else {
            return Err(slow_frame());
        };
        let Ok(slot) = out.try_reserve() else { return Err(slow_frame()) };
        slot.send(Queued::new(Message::text(note), &subs.shared.metrics, Some(bytes), Some(held)));
    }
    Ok(())
}

fn slow_frame() -> CloseFrame {
    CloseFrame { code: close_code::POLICY, reason: "subscriber too slow".into() }
}

fn busy_frame() -> CloseFrame {
    CloseFrame { code: BUSY_CLOSE, reason: BUSY_MESSAGE.into() }
}

fn slow_record_frame(buffered: u64) -> CloseFrame {
    CloseFrame {
        code: SLOW_SUBSCRIBER_CLOSE,
        reason: format!("slow subscriber: {buffered} notifications buffered").into(),
    }
}

/// The poller's view of the slot-status journal.
struct Tracker {
    dir: PathBuf,
    follower: StatusFollower,
    /// Whether the journal was present, and the served range, when the view was last built.
    built: Option<(bool, Option<u64>, Option<u64>)>,
}

/// What one refresh of the directory found.
struct Refreshed {
    /// Slots newly published (in slot order).
    fresh: Vec<SlotInfo>,
    /// The served slots, oldest first, when the levels' view was rebuilt.
    served: Option<Vec<SlotInfo>>,
    /// Why the journal could not be read, if it could not.
    journal_error: Option<String>,
}

/// Reads the journal, then the directory, and rebuilds the levels' view if anything changed.
fn refresh_all(hyades: &Source, levels: &Levels, t: &mut Tracker) -> Result<Refreshed, ReadError> {
    // A bucket's manifest and logs first: the journal copied from a manifest names only files
    // that manifest names.
    hyades.sync()?;
    // The journal first: the writer journals a slot only after publishing its file, so every
    // file the journal names is in the listing that follows.
    let present = std::fs::symlink_metadata(t.dir.join(STATUS_FILE)).is_ok();
    let (mut changed, mut journal_error) = (false, None);
    if present {
        match t.follower.poll() {
            Ok(p) => changed = !p.entries.is_empty() || p.restarted,
            // The statuses read so far stay in force; the poller reports the error.
            Err(e) => journal_error = Some(e.to_string()),
        }
    }
    let fresh = hyades.refresh()?;
    let key = (present, hyades.oldest().map(|s| s.slot), hyades.latest().map(|s| s.slot));
    if !changed && fresh.is_empty() && t.built == Some(key) {
        return Ok(Refreshed { fresh, served: None, journal_error });
    }
    t.built = Some(key);
    let served = hyades.slots(0, u64::MAX);
    levels.set(View::build(present.then(|| t.follower.statuses()), &served));
    Ok(Refreshed { fresh, served: Some(served), journal_error })
}

/// What the root feed has said of each served slot, so that each new root, each level it
/// reaches and its abandonment are announced once.
#[derive(Debug, Default)]
struct Announcer {
    /// The newest slot announced from a directory without a journal: there the feed only moves
    /// forward, as it always did.
    last: Option<u64>,
    said: BTreeMap<u64, (SlotInfo, Said)>,
}

impl Announcer {
    /// Takes what is served now as already said: subscribers only hear of changes.
    fn seed(view: &View, served: &[SlotInfo]) -> Self {
        let said = served.iter().map(|i| (i.slot, (*i, said_of(view.served(i))))).collect();
        Self { last: served.last().map(|i| i.slot), said }
    }

    /// The events of one refresh: `(root, what is said now, what was said before)`, in slot order.
    fn events(&mut self, view: &View, r: &Refreshed) -> Vec<(SlotInfo, Said, Said)> {
        let mut out = Vec::new();
        if !view.journal() {
            for info in &r.fresh {
                // Only forward: a slot republished below the newest announced one is not news.
                if self.last.is_some_and(|l| info.slot <= l) {
                    continue;
                }
                self.last = Some(info.slot);
                self.said.insert(info.slot, (*info, Said::Unknown));
                out.push((*info, Said::Unknown, Said::Unknown));
            }
            if let Some(served) = &r.served {
                let oldest = served.first().map_or(u64::MAX, |i| i.slot);
                self.said.retain(|slot, _| *slot >= oldest);
            }
            return out;
        }
        let Some(served) = &r.served else { return out };
        let mut said = BTreeMap::new();
        for info in served {
            let now = said_of(view.served(info));
            let before = self.said.remove(&info.slot);
            match before {
                // Another file of the slot: its bank was frozen again, so the old one was dropped.
                Some((old, b)) if old.seq != info.seq => {
                    if matches!(b, Said::At(_)) {
                        out.push((old, Said::Abandoned, b));
                    }
                    if matches!(now, Said::At(_)) {
                        out.push((*info, now, Said::Unknown));
                    }
                }
                None | Some((_, Said::Abandoned)) if matches!(now, Said::At(_)) => {
                    out.push((*info, now, Said::Unknown))
                }
                Some((_, Said::At(b))) => match now {
                    Said::At(n) if n > b => out.push((*info, now, Said::At(b))),
                    Said::Abandoned => out.push((*info, now, Said::At(b))),
                    _ => {}
                },
                _ => {}
            }
            said.insert(info.slot, (*info, now));
        }
        // Announced roots no longer served: pruned, or the writer already deleted the abandoned
        // bank's file. Only the latter is news.
        for (slot, (info, b)) in std::mem::take(&mut self.said) {
            if matches!(b, Said::At(_)) && view.abandoned(slot) {
                out.push((info, Said::Abandoned, b));
            }
        }
        self.said = said;
        self.last = served.last().map(|i| i.slot).max(self.last);
        out.sort_by_key(|(info, _, _)| info.slot);
        out
    }
}

fn said_of(s: Served) -> Said {
    match s {
        Served::At(l) => Said::At(l),
        Served::Unknown => Said::Unknown,
        Served::Abandoned | Served::Stale { .. } => Said::Abandoned,
    }
}

/// Polls the journal and the directory, updates the gauges and announces new roots, the levels
/// they reach and their abandonment.
async fn poll(shared: Arc<Shared>, interval: Duration, mut shutdown: watch::Receiver<bool>, tracker: Tracker) {
    let hyades = shared.rpc.hyades().clone();
    let levels = shared.rpc.levels().clone();
    let tracker = Arc::new(std::sync::Mutex::new(tracker));
    let mut announcer = Announcer::seed(&levels.view(), &hyades.slots(0, u64::MAX));
    let mut tick = tokio::time::interval(interval.max(Duration::from_millis(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The last refresh error logged, so a persistent failure is logged once, not every poll.
    let mut last_error: Option<String> = None;
    let mut last_journal_error: Option<String> = None;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
        let (h, l, t) = (hyades.clone(), levels.clone(), tracker.clone());
        // Listing and mapping files (and checksumming new ones) is blocking I/O.
        let refreshed = tokio::task::spawn_blocking(move || {
            let mut t = t.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            refresh_all(&h, &l, &mut t)
        })
        .await;
        let refreshed = match refreshed {
            Ok(Ok(r)) => {
                if last_error.take().is_some() {
                    log::info!("snapshot directory readable again");
                }
                r
            }
            Ok(Err(e)) => {
                shared.metrics.refresh_errors.inc();
                let msg = e.to_string();
                if last_error.as_deref() != Some(msg.as_str()) {
                    log::warn!("cannot refresh the snapshot directory: {msg}");
                    last_error = Some(msg);
                }
                continue;
            }
            Err(e) => {
                shared.metrics.refresh_errors.inc();
                log::error!("refresh task failed: {e}");
                continue;
            }
        };
        match &refreshed.journal_error {
            Some(msg) => {
                shared.metrics.refresh_errors.inc();
                if last_journal_error.as_deref() != Some(msg.as_str()) {
                    log::warn!("cannot read the slot-status journal (its last statuses stay in force): {msg}");
                    last_journal_error = Some(msg.clone());
                }
            }
            None => {
                if last_journal_error.take().is_some() {
                    log::info!("slot-status journal readable again");
                }
            }
        }
        shared.metrics.set_range(hyades.oldest().map(|s| s.slot), hyades.latest().map(|s| s.slot));
        shared.metrics.damaged_files.set(i64::try_from(hyades.damaged_files().len()).unwrap_or(i64::MAX));
        let view = levels.view();
        if refreshed.served.is_some() {
            shared.metrics.set_levels(view.counts());
        }
        for (info, says, before) in announcer.events(&view, &refreshed) {
            let seq = shared.announced.fetch_add(1, Ordering::SeqCst);
            let mut result = String::new();
            match says {
                Said::Abandoned => {
                    let level = match before {
                        Said::At(l) => Some(l),
                        _ => None,
                    };
                    encode::abandoned_json(&mut result, &info, level);
                    shared.metrics.roots_abandoned.inc();
                }
                Said::At(l) => {
                    encode::slot_json(&mut result, &info, Some(l));
                    if before == Said::Unknown {
                        shared.metrics.roots_published.inc();
                    }
                }
                Said::Unknown => {
                    encode::slot_json(&mut result, &info, None);
                    shared.metrics.roots_published.inc();
                }
            }
            let ev = RootEvent { seq, result, says, before };
            // An error only means nobody is subscribed right now.
            let _ = shared.feed.send(Arc::new(ev));
        }
    }
}

/// Reads what was appended to the record log and adds it to the feed.
fn refresh_records(
    reader: &std::sync::Mutex<RecordLogReader>,
    records: &RecordFeed,
    metrics: &Metrics,
) -> Result<usize, ReadError> {
    let mut reader = reader.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let fresh = reader.refresh()?;
    let damage = reader.take_damage();
    // The reader's totals count every span, also those its bounded report queue dropped.
    metrics.record_log_damage.inc_by(reader.bad_entries().saturating_sub(metrics.record_log_damage.get()));
    metrics
        .record_log_damaged_bytes
        .inc_by(reader.damaged_bytes().saturating_sub(metrics.record_log_damaged_bytes.get()));
    // The feed holds what is served; the reader need not keep its own copy.
    reader.forget_before(u64::MAX);
    drop(reader);
    let added = records.push(&fresh);
    records.note_damage(&damage);
    metrics.records_published.inc_by(added as u64);
    metrics.set_record_range(records.range());
    Ok(added)
}

/// Polls the record log and feeds new records to the RPC methods and record subscriptions.
async fn poll_records(
    reader: Arc<std::sync::Mutex<RecordLogReader>>,
    records: Arc<RecordFeed>,
    metrics: Arc<Metrics>,
    interval: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(interval.max(Duration::from_millis(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_error: Option<String> = None;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
        let (r, f, m) = (reader.clone(), records.clone(), metrics.clone());
        match tokio::task::spawn_blocking(move || refresh_records(&r, &f, &m)).await {
            Ok(Ok(_)) => {
                if last_error.take().is_some() {
                    log::info!("record log readable again");
                }
            }
            Ok(Err(e)) => {
                metrics.refresh_errors.inc();
                let msg = e.to_string();
                if last_error.as_deref() != Some(msg.as_str()) {
                    log::warn!("cannot refresh the record log: {msg}");
                    last_error = Some(msg);
                }
            }
            Err(e) => {
                metrics.refresh_errors.inc();
                log::error!("record refresh task failed: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_runs_only_light_single_requests_inline() {
        let light =
            br#"{"jsonrpc":"2.0","id":1,"method":"getAccountProof","params":["11111111111111111111111111111111"]}"#;
        assert!(!Execution::Auto.blocking(light));
        assert!(!Execution::Auto.blocking(br#"  {"jsonrpc":"2.0","id":1,"method":"getStateRoot"}"#));
        for heavy in [
            &br#"[{"jsonrpc":"2.0","id":1,"method":"getHealth"}]"#[..],
            br#"{"jsonrpc":"2.0","id":1,"method":"getRootRecords","params":[0,5000]}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"getStateRoots","params":[0,999]}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"getMultipleAccountProofs","params":[[]]}"#,
            // A method name spelt with an escape is not trusted to be light.
            br#"{"jsonrpc":"2.0","id":1,"method":"getRootRecord\u0073","params":[0,5000]}"#,
        ] {
            assert!(Execution::Auto.blocking(heavy), "{}", String::from_utf8_lossy(heavy));
        }
        assert!(Execution::Auto.blocking(&[b' '; AUTO_INLINE_MAX_BYTES + 1]));
        assert!(Execution::Blocking.blocking(light));
        assert!(!Execution::Inline.blocking(br#"[{"method":"getRootRecords"}]"#));
    }
}
