//! `aldb-relayer`: accept state roots signed by a quorum of validators, from Hyades servers.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use aldb_relayer::roots::AcceptedRoot;
use aldb_relayer::{Config, Relayer, RootHook, Trust};
use anyhow::{Context, Result};
use clap::Parser;

#[derive(Parser)]
#[command(
    name = "aldb-relayer",
    version,
    about = "Follow Hyades feeds and accept roots signed by k of n identities, or on the validators' votes"
)]
struct Cli {
    /// The JSON5 configuration file.
    #[arg(long)]
    config: PathBuf,
    /// Log the counters this often, in seconds (0: only at exit).
    #[arg(long, default_value_t = 60)]
    stats_secs: u64,
    /// Also print each accepted root on stdout as one JSON object per line (slot, root,
    /// recordHash, commitment, signers, bankHash; with trust "votes" also the votes and their
    /// evidence), once its output line is durable.
    #[arg(long)]
    json_lines: bool,
}

fn main() -> Result<()> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let cli = Cli::parse();
    let config = Config::from_file(&cli.config).with_context(|| format!("config {}", cli.config.display()))?;
    let rt =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the async runtime")?;
    rt.block_on(async move {
        match &config.trust {
            Trust::Signers(s) => log::info!(
                "following {} endpoint(s), {} of {} identities, commitment {}, output {}, cursor {}",
                config.endpoints.len(),
                s.quorum.threshold(),
                s.identities.len(),
                config.commitment.name(),
                config.output_file.display(),
                s.cursor_file.display()
            ),
            Trust::Votes(v) => log::info!(
                "following {} endpoint(s) on votes, checkpoint {}, commitment {}, output {}, state {}",
                config.endpoints.len(),
                v.checkpoint.display(),
                config.commitment.name(),
                config.output_file.display(),
                v.state_file.display()
            ),
            _ => {}
        }
        let urls = config.endpoints.clone();
        let mut relayer = Relayer::new(config);
        if cli.json_lines {
            relayer = relayer.on_root(json_lines());
        }
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

/// Prints each accepted root as a JSON line on stdout, flushed at once so a reading process sees
/// it. A closed stdout (the reader went away) is reported once; accepting goes on.
fn json_lines() -> RootHook {
    let failed = AtomicBool::new(false);
    Arc::new(move |a: &AcceptedRoot| {
        let mut out = std::io::stdout().lock();
        let line = a.to_json();
        if let Err(e) = writeln!(out, "{line}").and_then(|()| out.flush())
            && !failed.swap(true, Ordering::Relaxed)
        {
            log::error!("cannot write accepted roots to stdout ({e}); the output file still gets them");
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
