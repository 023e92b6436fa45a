//! `GET /metrics` in the Prometheus text format, from [`Stats`].
//!
//! A minimal HTTP/1.1 responder: the relayer has no other HTTP surface, and the counters are a
//! handful of atomics, so this avoids a web framework.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::stats::{EndpointStats, Stats};

/// Picks one counter of an endpoint.
type Field = fn(&EndpointStats) -> &AtomicU64;

/// The exposition text.
pub fn render(stats: &Stats, urls: &[String]) -> String {
    let mut s = String::new();
    let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
    for (name, help, kind, value) in [
        ("aldb_relayer_accepted_total", "Records accepted.", "counter", g(&stats.accepted)),
        ("aldb_relayer_last_accepted_slot", "Slot of the last accepted record.", "gauge", g(&stats.last_slot)),
        ("aldb_relayer_conflicts_total", "Conflicting records each signed by a quorum (safety faults).", "counter", g(&stats.conflicts)),
        ("aldb_relayer_equivocations_total", "Identities seen signing two records for one slot.", "counter", g(&stats.equivocations)),
        ("aldb_relayer_candidates", "Different records held, waiting for signatures or their parent.", "gauge", g(&stats.candidates)),
        ("aldb_relayer_pending_slots", "Slots held above the last accepted one.", "gauge", g(&stats.pending_slots)),
        ("aldb_relayer_rewinds_total", "Followers told to resubscribe lower after held records were dropped.", "counter", g(&stats.rewinds)),
        ("aldb_relayer_log_lines_suppressed_total", "Log lines left out by the rate limit.", "counter", g(&stats.log_suppressed)),
    ] {
        let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
    }
    let _ = writeln!(
        s,
        "# HELP aldb_relayer_dropped_total Held records or signatures dropped later, by reason.\n\
         # TYPE aldb_relayer_dropped_total counter"
    );
    for (reason, c) in [("displaced", &stats.displaced), ("identity_quota", &stats.quota_evictions), ("window", &stats.window_pruned)] {
        let _ = writeln!(s, "aldb_relayer_dropped_total{{reason=\"{reason}\"}} {}", g(c));
    }
    let _ = writeln!(
        s,
        "# HELP aldb_relayer_endpoint_dropped_total Well-formed records from an endpoint dropped without being held, by reason.\n\
         # TYPE aldb_relayer_endpoint_dropped_total counter"
    );
    let dropped: [(&str, Field); 5] = [
        ("unsigned", |e| &e.dropped_unsigned),
        ("ahead", |e| &e.dropped_ahead),
        ("stale", |e| &e.dropped_stale),
        ("faulted", |e| &e.dropped_faulted),
        ("slot_full", |e| &e.dropped_slot_full),
    ];
    for (i, e) in stats.endpoints.iter().enumerate() {
        let url = label(urls.get(i).map_or("?", String::as_str));
        for (reason, field) in dropped {
            let _ = writeln!(s, "aldb_relayer_endpoint_dropped_total{{endpoint=\"{url}\",reason=\"{reason}\"}} {}", g(field(e)));
        }
    }
    let per: [(&str, &str, Field); 9] = [
        ("records", "Well-formed records received.", |e| &e.records),
        ("bad_messages", "Messages that are not a valid record notification.", |e| &e.bad_messages),
        ("bad_signatures", "Attestations by configured identities that do not verify.", |e| &e.bad_signatures),
        ("outsiders", "Attestations by identities outside the configured set.", |e| &e.outsiders),
        ("other_cluster", "Records of another genesis hash.", |e| &e.other_cluster),
        ("low_commitment", "Records below the configured commitment.", |e| &e.low_commitment),
        ("unchained", "Quorum-signed records that do not extend the chain.", |e| &e.unchained),
        ("disconnects", "Connections lost or refused.", |e| &e.disconnects),
        ("attestations_trimmed", "Attestations past the per-identity limit of one record, dropped.", |e| &e.attestations_trimmed),
    ];
    for (name, help, field) in per {
        let _ = writeln!(s, "# HELP aldb_relayer_endpoint_{name}_total {help}\n# TYPE aldb_relayer_endpoint_{name}_total counter");
        for (i, e) in stats.endpoints.iter().enumerate() {
            let url = label(urls.get(i).map_or("?", String::as_str));
            let _ = writeln!(s, "aldb_relayer_endpoint_{name}_total{{endpoint=\"{url}\"}} {}", g(field(e)));
        }
    }
    s
}

/// A label value, escaped.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// Serves `/metrics` on `listener` until `shutdown`.
pub(crate) async fn serve(listener: TcpListener, stats: Arc<Stats>, urls: Arc<Vec<String>>, mut shutdown: watch::Receiver<bool>) {
    loop {
        let tcp = tokio::select! {
            r = listener.accept() => match r {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    log::warn!("metrics listener: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = crate::follow::stopped(&mut shutdown) => return,
        };
        let (stats, urls) = (stats.clone(), urls.clone());
        tokio::spawn(async move {
            let _ = tokio::time::timeout(Duration::from_secs(5), answer(tcp, &stats, &urls)).await;
        });
    }
}

async fn answer(mut tcp: TcpStream, stats: &Stats, urls: &[String]) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 8192 {
        let n = tcp.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let (status, ctype, body) = if buf.starts_with(b"GET /metrics ") {
        ("200 OK", "text/plain; version=0.0.4", render(stats, urls))
    } else {
        ("404 Not Found", "text/plain", "not found\n".to_string())
    };
    let head = format!("HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
    tcp.write_all(head.as_bytes()).await?;
    tcp.write_all(body.as_bytes()).await?;
    tcp.shutdown().await
}

/// Binds the metrics listener.
pub(crate) async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_counter_with_endpoint_labels() {
        let stats = Stats::new(2);
        stats.accepted.store(3, Ordering::Relaxed);
        stats.endpoints[1].bad_signatures.store(4, Ordering::Relaxed);
        let text = render(&stats, &["ws://a/ws".into(), "ws://b\"/ws".into()]);
        assert!(text.contains("aldb_relayer_accepted_total 3\n"));
        assert!(text.contains("aldb_relayer_endpoint_bad_signatures_total{endpoint=\"ws://b\\\"/ws\"} 4\n"));
        stats.endpoints[0].dropped_unsigned.store(5, Ordering::Relaxed);
        stats.quota_evictions.store(6, Ordering::Relaxed);
        stats.candidates.store(7, Ordering::Relaxed);
        let text = render(&stats, &["ws://a/ws".into(), "ws://b\"/ws".into()]);
        assert!(text.contains("aldb_relayer_endpoint_dropped_total{endpoint=\"ws://a/ws\",reason=\"unsigned\"} 5\n"));
        assert!(text.contains("aldb_relayer_dropped_total{reason=\"identity_quota\"} 6\n"));
        assert!(text.contains("aldb_relayer_candidates 7\n"));
        assert_eq!(text.matches("# TYPE").count(), 19);
    }
}
