//! `aldb-ship`: ships a snapshot directory to an S3-compatible bucket beside the validator
//! (`docs/OBJECT-STORE.md`). Credentials come from the standard `AWS_*` environment variables.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::time::Duration;

use aldb_objstore::{BucketOptions, ShipConfig, Shipper, metrics, open_bucket};
use anyhow::Context;
use clap::Parser;

/// Ships published snapshot files, the record log and the vote-evidence log to a bucket, then
/// writes the manifest.
#[derive(Parser, Debug)]
#[command(name = "aldb-ship", version)]
struct Args {
    /// The snapshot directory (the writer's `dir`).
    #[arg(long)]
    dir: PathBuf,
    /// Where to: `s3://BUCKET[/PREFIX]`.
    #[arg(long)]
    bucket: String,
    /// The service's URL, for anything but AWS itself (e.g. `http://127.0.0.1:8333`).
    #[arg(long)]
    endpoint: Option<String>,
    /// The region.
    #[arg(long)]
    region: Option<String>,
    /// Allow plain HTTP to the endpoint.
    #[arg(long)]
    allow_http: bool,
    /// Keep the newest this many slots in the bucket (default: keep everything).
    #[arg(long)]
    archive_slots: Option<u64>,
    /// Milliseconds between passes.
    #[arg(long, default_value_t = 1000)]
    interval_ms: u64,
    /// Seconds between uploads of the growing record-log segment.
    #[arg(long, default_value_t = 10)]
    records_interval_s: u64,
    /// Seconds between uploads of the growing vote-evidence segment.
    #[arg(long, default_value_t = 10)]
    votes_interval_s: u64,
    /// Seal the manifest head's entries into an immutable manifest segment past this many.
    #[arg(long, default_value_t = aldb_objstore::manifest::DEFAULT_SEAL_ENTRIES)]
    seal_entries: usize,
    /// Fold the sealed manifest segments the head names into one naming them past this many.
    #[arg(long, default_value_t = aldb_objstore::manifest::DEFAULT_FOLD_SEGMENTS)]
    fold_segments: usize,
    /// Serve Prometheus metrics on this address (`GET /metrics`).
    #[arg(long)]
    metrics_addr: Option<SocketAddr>,
    /// Make one pass and exit (non-zero if it failed).
    #[arg(long)]
    once: bool,
}

/// Answers every request on `listener` with the metrics, one connection at a time: a scrape a
/// few times a minute needs nothing more.
fn serve_metrics(listener: TcpListener, registry: prometheus::Registry) {
    for conn in listener.incoming() {
        let Ok(mut conn) = conn else { continue };
        let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
        let mut req = [0u8; 1024];
        let n = conn.read(&mut req).unwrap_or(0);
        let found = req[..n].starts_with(b"GET /metrics");
        let (status, body) =
            if found { ("200 OK", metrics::encode(&registry)) } else { ("404 Not Found", String::new()) };
        let _ = write!(
            conn,
            "HTTP/1.1 {status}\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let args = Args::parse();
    let opts = BucketOptions {
        endpoint: args.endpoint.clone(),
        region: args.region.clone(),
        allow_http: args.allow_http,
        ..BucketOptions::default()
    };
    let (store, prefix) = open_bucket(&args.bucket, &opts).context("opening the bucket")?;
    let mut cfg = ShipConfig::new(&args.dir);
    cfg.archive_slots = args.archive_slots;
    cfg.interval = Duration::from_millis(args.interval_ms);
    cfg.records_interval = Duration::from_secs(args.records_interval_s);
    cfg.votes_interval = Duration::from_secs(args.votes_interval_s);
    cfg.seal_entries = args.seal_entries;
    cfg.fold_segments = args.fold_segments;
    let mut shipper = Shipper::new(store, prefix, cfg).context("metrics")?;
    if let Some(addr) = args.metrics_addr {
        let listener = TcpListener::bind(addr).with_context(|| format!("binding the metrics address {addr}"))?;
        let registry = shipper.metrics().registry.clone();
        std::thread::spawn(move || serve_metrics(listener, registry));
    }
    if args.once {
        let r = shipper.ship_once().await.context("shipping")?;
        println!(
            "uploaded {} objects ({} bytes), {} already present, {} refused, newest servable slot {}",
            r.uploaded,
            r.bytes,
            r.already_present,
            r.refused,
            r.shipped_slot.map_or("none".to_string(), |s| s.to_string())
        );
        return Ok(());
    }
    shipper
        .run(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await;
    Ok(())
}
