//! `hyades`: serve an aldb snapshot directory over JSON-RPC, WebSocket and Prometheus metrics.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Parser;
use hyades::{Config, Execution, Service};

#[derive(Parser)]
#[command(name = "hyades", version, about = "Serve accounts and proofs from an aldb snapshot directory or its bucket")]
struct Cli {
    /// The snapshot directory written by the aldb snapshot writer.
    #[arg(long, required_unless_present = "store", conflicts_with = "store")]
    dir: Option<PathBuf>,
    /// Serve the bucket prefix `aldb-ship` fills (`s3://BUCKET/PREFIX`) instead of a directory:
    /// a replica. Credentials come from the AWS_* environment variables.
    #[arg(long, requires = "cache_dir")]
    store: Option<String>,
    /// The S3-compatible endpoint of `--store` (SeaweedFS, MinIO, Garage, Ceph); AWS when unset.
    #[arg(long)]
    s3_endpoint: Option<String>,
    /// The region of `--store` (default: AWS_REGION, else us-east-1).
    #[arg(long)]
    s3_region: Option<String>,
    /// Allow plain HTTP to `--s3-endpoint` (loopback or a private network).
    #[arg(long)]
    allow_http: bool,
    /// The replica's cache directory: verified snapshot files and the copy of the logs. It must
    /// belong to this process alone.
    #[arg(long)]
    cache_dir: Option<PathBuf>,
    /// Bytes of snapshot files the replica's cache keeps.
    #[arg(long, default_value_t = 8 << 30)]
    cache_bytes: u64,
    /// JSON-RPC (POST /) and WebSocket (GET / or /ws) address.
    #[arg(long, default_value = "127.0.0.1:8899")]
    addr: SocketAddr,
    /// Prometheus metrics address (GET /metrics).
    #[arg(long, default_value = "127.0.0.1:9899")]
    metrics_addr: SocketAddr,
    /// How often to look for new snapshots, in milliseconds (default: 50 for a directory, 500
    /// for a bucket, where each look is a request).
    #[arg(long)]
    poll_ms: Option<u64>,
    /// Where requests run: inline, blocking (tokio's blocking pool) or auto (inline unless large).
    #[arg(long, default_value = "auto")]
    execution: Execution,
    /// Async worker threads (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// How often to look for new root records in the record log, in milliseconds.
    #[arg(long, default_value_t = 20)]
    record_poll_ms: u64,
    /// Live record notifications a WebSocket connection may have pending before it is closed
    /// with code 4008.
    #[arg(long, default_value_t = 4096)]
    record_buffer: usize,
    /// Root records kept in memory and served.
    #[arg(long, default_value_t = hyades::records::DEFAULT_RECORD_KEEP)]
    record_keep: usize,
    /// A replica's copy of the bucket's vote-evidence log keeps about this many slots (a
    /// mainnet slot's votes are some 450 KB on disk); older slots' votes are fetched from the
    /// bucket's sealed segments on demand.
    #[arg(long, default_value_t = aldb_objstore::DEFAULT_VOTE_KEEP_SLOTS)]
    vote_keep_slots: u64,
    /// Bytes of vote-evidence segments a replica keeps for slots older than its copy of the log.
    #[arg(long, default_value_t = aldb_objstore::DEFAULT_VOTE_ARCHIVE_BYTES)]
    vote_archive_bytes: u64,
    /// Most open connections (HTTP and WebSocket); more are answered 503 and closed.
    #[arg(long, default_value_t = hyades::DEFAULT_MAX_CONNECTIONS)]
    max_connections: usize,
    /// Seconds for a request head (then its body) to arrive; slower connections are closed.
    #[arg(long, default_value_t = hyades::DEFAULT_HEADER_TIMEOUT.as_secs_f64())]
    header_timeout: f64,
    /// Seconds an HTTP keep-alive connection may wait for its next request.
    #[arg(long, default_value_t = hyades::DEFAULT_IDLE_TIMEOUT.as_secs_f64())]
    idle_timeout: f64,
    /// Seconds a write may make no progress before the connection is closed (WebSocket: code 4009).
    #[arg(long, default_value_t = hyades::DEFAULT_WRITE_TIMEOUT.as_secs_f64())]
    write_timeout: f64,
    /// Largest answer in bytes (a batch is one answer); larger ones get error -32020.
    #[arg(long, default_value_t = hyades::rpc::DEFAULT_MAX_RESPONSE_BYTES)]
    max_response_bytes: usize,
    /// Reply bytes a WebSocket connection may have queued before its requests wait.
    #[arg(long, default_value_t = hyades::DEFAULT_WS_QUEUE_BYTES)]
    ws_queue_bytes: usize,
    /// Seconds a WebSocket connection without subscriptions may stay silent (pings count).
    #[arg(long, default_value_t = hyades::DEFAULT_WS_IDLE_TIMEOUT.as_secs_f64())]
    ws_idle_timeout: f64,
    /// Most requests running on the blocking pool at once (0: four per core).
    #[arg(long, default_value_t = 0)]
    max_blocking: usize,
    /// Response bytes all connections together may hold (built, queued or not yet taken by
    /// their clients); past it requests are answered 503 / -32021 "server busy" (0: eight
    /// connections' worst case, 8 × (ws-queue-bytes + 2 × max-response-bytes)).
    #[arg(long, default_value_t = 0)]
    max_buffered_bytes: usize,
}

/// A positive, finite number of seconds.
fn seconds(name: &str, v: f64) -> Result<Duration> {
    if !v.is_finite() || v <= 0.0 || v > 1e9 {
        bail!("--{name} must be a positive number of seconds, got {v}");
    }
    Ok(Duration::from_secs_f64(v))
}

fn main() -> Result<()> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let cli = Cli::parse();
    let (dir, store) = match (&cli.dir, &cli.store, &cli.cache_dir) {
        (Some(dir), None, _) => {
            if !dir.is_dir() {
                bail!("snapshot directory {} does not exist or is not a directory", dir.display());
            }
            (dir.clone(), None)
        }
        (None, Some(url), Some(cache)) => {
            aldb_objstore::parse_url(url).with_context(|| format!("--store {url}"))?;
            if cli.cache_bytes == 0 {
                bail!("--cache-bytes must be at least 1");
            }
            let bucket = aldb_objstore::BucketOptions {
                endpoint: cli.s3_endpoint.clone(),
                region: cli.s3_region.clone(),
                allow_http: cli.allow_http,
                ..Default::default()
            };
            (
                cache.clone(),
                Some(hyades::StoreConfig {
                    url: url.clone(),
                    bucket,
                    cache_bytes: cli.cache_bytes,
                    vote_archive_bytes: cli.vote_archive_bytes,
                    fetch_wait: hyades::FETCH_WAIT,
                }),
            )
        }
        _ => bail!("give --dir DIR, or --store s3://BUCKET/PREFIX with --cache-dir DIR"),
    };
    let poll_ms = cli.poll_ms.unwrap_or(if store.is_some() { 500 } else { 50 });
    if poll_ms == 0 || cli.record_poll_ms == 0 {
        bail!("--poll-ms and --record-poll-ms must be at least 1");
    }
    if cli.record_buffer == 0 || cli.record_keep == 0 {
        bail!("--record-buffer and --record-keep must be at least 1");
    }
    if cli.max_connections == 0 || cli.max_response_bytes == 0 || cli.ws_queue_bytes == 0 {
        bail!("--max-connections, --max-response-bytes and --ws-queue-bytes must be at least 1");
    }
    let header_timeout = seconds("header-timeout", cli.header_timeout)?;
    let idle_timeout = seconds("idle-timeout", cli.idle_timeout)?;
    let write_timeout = seconds("write-timeout", cli.write_timeout)?;
    let ws_idle_timeout = seconds("ws-idle-timeout", cli.ws_idle_timeout)?;
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    rt.enable_all();
    if let Some(t) = cli.threads {
        rt.worker_threads(t.max(1));
    }
    let rt = rt.build().context("cannot start the async runtime")?;
    rt.block_on(async move {
        let config = Config {
            addr: cli.addr,
            metrics_addr: Some(cli.metrics_addr),
            poll_interval: Duration::from_millis(poll_ms),
            store,
            execution: cli.execution,
            record_poll_interval: Duration::from_millis(cli.record_poll_ms),
            record_buffer: cli.record_buffer,
            record_keep: cli.record_keep,
            vote_keep_slots: cli.vote_keep_slots,
            limits: hyades::Limits { max_response_bytes: cli.max_response_bytes, ..hyades::Limits::default() },
            max_connections: cli.max_connections,
            header_timeout,
            idle_timeout,
            write_timeout,
            ws_queue_bytes: cli.ws_queue_bytes,
            ws_idle_timeout,
            max_blocking: cli.max_blocking,
            max_buffered_bytes: cli.max_buffered_bytes,
            ..Config::new(&dir)
        };
        let service = Service::start(config).await?;
        wait_for_signal().await?;
        log::info!("shutting down");
        service.shutdown().await;
        Ok(())
    })
}

/// Ctrl-C or SIGTERM (how service managers stop a process).
async fn wait_for_signal() -> Result<()> {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .context("cannot listen for SIGTERM")?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r.context("cannot listen for Ctrl-C")?,
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    tokio::signal::ctrl_c().await.context("cannot listen for Ctrl-C")?;
    Ok(())
}
