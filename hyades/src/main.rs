//! `hyades`: serve an aldb snapshot directory over JSON-RPC, WebSocket and Prometheus metrics.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Parser;
use hyades::{Config, Execution, Service};

#[derive(Parser)]
#[command(name = "hyades", version, about = "Serve accounts and proofs from an aldb snapshot directory")]
struct Cli {
    /// The snapshot directory written by the aldb snapshot writer.
    #[arg(long)]
    dir: PathBuf,
    /// JSON-RPC (POST /) and WebSocket (GET / or /ws) address.
    #[arg(long, default_value = "127.0.0.1:8899")]
    addr: SocketAddr,
    /// Prometheus metrics address (GET /metrics).
    #[arg(long, default_value = "127.0.0.1:9899")]
    metrics_addr: SocketAddr,
    /// How often to look for new snapshots, in milliseconds.
    #[arg(long, default_value_t = 50)]
    poll_ms: u64,
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
}

fn main() -> Result<()> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let cli = Cli::parse();
    if !cli.dir.is_dir() {
        bail!("snapshot directory {} does not exist or is not a directory", cli.dir.display());
    }
    if cli.poll_ms == 0 || cli.record_poll_ms == 0 {
        bail!("--poll-ms and --record-poll-ms must be at least 1");
    }
    if cli.record_buffer == 0 || cli.record_keep == 0 {
        bail!("--record-buffer and --record-keep must be at least 1");
    }
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
            poll_interval: Duration::from_millis(cli.poll_ms),
            execution: cli.execution,
            record_poll_interval: Duration::from_millis(cli.record_poll_ms),
            record_buffer: cli.record_buffer,
            record_keep: cli.record_keep,
            ..Config::new(&cli.dir)
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
