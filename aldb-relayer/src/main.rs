//! `aldb-relayer`: accept state roots signed by a quorum of validators, from Hyades servers.

use std::path::PathBuf;
use std::time::Duration;

use aldb_relayer::{Config, Relayer};
use anyhow::{Context, Result};
use clap::Parser;

#[derive(Parser)]
#[command(name = "aldb-relayer", version, about = "Follow Hyades record feeds and accept roots signed by k of n identities")]
struct Cli {
    /// The JSON5 configuration file.
    #[arg(long)]
    config: PathBuf,
    /// Log the counters this often, in seconds (0: only at exit).
    #[arg(long, default_value_t = 60)]
    stats_secs: u64,
}

fn main() -> Result<()> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let cli = Cli::parse();
    let config = Config::from_file(&cli.config).with_context(|| format!("config {}", cli.config.display()))?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the async runtime")?;
    rt.block_on(async move {
        log::info!(
            "following {} endpoint(s), {} of {} identities, commitment {}, output {}, cursor {}",
            config.endpoints.len(),
            config.quorum.threshold(),
            config.identities.len(),
            config.commitment.name(),
            config.output_file.display(),
            config.cursor_file.display()
        );
        let urls = config.endpoints.clone();
        let relayer = Relayer::new(config);
        let stats = relayer.stats();
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let mut run = tokio::spawn(relayer.run(stop_rx));
        let mut tick = tokio::time::interval(Duration::from_secs(cli.stats_secs.max(1)));
        tick.tick().await;
        loop {
            tokio::select! {
                r = &mut run => return r.context("relayer task")?.context("relayer"),
                r = wait_for_signal() => {
                    r?;
                    log::info!("shutting down");
                    let _ = stop_tx.send(true);
                    return run.await.context("relayer task")?.context("relayer");
                }
                _ = tick.tick(), if cli.stats_secs > 0 => log::info!("{}", stats.summary(&urls)),
            }
        }
    })
}

/// Ctrl-C or SIGTERM.
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
