//! Start-up and shutdown: opening the source, reading the logs once, binding the listeners and
//! starting the pollers.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use aldb_format::SnapshotReader;
use aldb_format::records::RecordLogReader;
use aldb_format::status::StatusFollower;
use axum::Router;
use axum::http::header;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, broadcast, watch};
use tokio::task::JoinHandle;

use super::Shared;
use super::config::{Config, max_buffered_bytes};
use super::execution::max_blocking;
use super::http::{cors, health, rpc_http, track_request};
use super::poll::{Tracker, poll, poll_records, refresh_all, refresh_records};
use super::ws::ws_upgrade;
use crate::budget::ResponseBudget;
use crate::conn::{ConnHandle, ConnLimits, GuardedListener};
use crate::error::ServeError;
use crate::levels::Levels;
use crate::metrics::Metrics;
use crate::records::RecordFeed;
use crate::replica::Replica;
use crate::rpc::Rpc;
use crate::source::Source;
use crate::votes::VoteFeed;

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
                        Box::new(m.log_repaired.clone()),
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
            let replica = hyades.replica().cloned();
            let first =
                tokio::task::spawn_blocking(move || refresh_records(&reader, &records, &metrics, replica.as_deref()))
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
            hyades.replica().cloned(),
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

async fn bind(addr: SocketAddr) -> Result<TcpListener, ServeError> {
    TcpListener::bind(addr).await.map_err(|source| ServeError::Bind { addr, source })
}
