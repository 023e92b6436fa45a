//! `GET /metrics` in the Prometheus text format, from [`Stats`], written by the `prometheus`
//! crate's encoder ([`Families`]).
//!
//! Served by the relayer's minimal HTTP/1.1 responder ([`crate::http`]); the counters are a
//! handful of atomics, so this avoids a web framework.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::http::Response;
use crate::stats::{EndpointStats, Stats, clock_ms};
use aldb_metrics::Families;

/// Picks one counter of an endpoint.
type Field = fn(&EndpointStats) -> &AtomicU64;

/// The exposition text; `urls[i]` labels `stats.endpoints[i]`.
pub fn render(stats: &Stats, urls: &[String]) -> String {
    let mut f = Families::default();
    let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
    for (name, help, counter, value) in [
        ("aldb_relayer_accepted_total", "Records accepted.", true, g(&stats.accepted)),
        ("aldb_relayer_last_accepted_slot", "Slot of the last accepted record.", false, g(&stats.last_slot)),
        (
            "aldb_relayer_conflicts_total",
            "Conflicting records each signed by a quorum (safety faults).",
            true,
            g(&stats.conflicts),
        ),
        (
            "aldb_relayer_equivocations_total",
            "Identities seen signing two records for one slot.",
            true,
            g(&stats.equivocations),
        ),
        (
            "aldb_relayer_candidates",
            "Different records held, waiting for signatures or their parent.",
            false,
            g(&stats.candidates),
        ),
        ("aldb_relayer_pending_slots", "Slots held above the last accepted one.", false, g(&stats.pending_slots)),
        (
            "aldb_relayer_rewinds_total",
            "Followers told to resubscribe lower after held records were dropped.",
            true,
            g(&stats.rewinds),
        ),
        (
            "aldb_relayer_frozen",
            "1 once misbehaviour froze the light client (trust: votes): nothing more is accepted.",
            false,
            g(&stats.frozen),
        ),
        (
            "aldb_relayer_epoch",
            "The newest epoch whose validator set is trusted (trust: votes).",
            false,
            g(&stats.epoch),
        ),
        (
            "aldb_relayer_epochs_followed_total",
            "Epoch transitions followed (trust: votes).",
            true,
            g(&stats.epochs_followed),
        ),
        (
            "aldb_relayer_slots_given_up_total",
            "Slots given up without 2/3 of their epoch's stake (trust: votes).",
            true,
            g(&stats.given_up),
        ),
        (
            "aldb_relayer_votes_refused_total",
            "Answers the light client refused: too little stake, bad transitions (trust: votes).",
            true,
            g(&stats.votes_refused),
        ),
        (
            "aldb_relayer_log_lines_suppressed_total",
            "Log lines left out by the rate limit.",
            true,
            g(&stats.log_suppressed),
        ),
    ] {
        if counter {
            f.counter(name, help, value);
        } else {
            f.gauge(name, help, value);
        }
    }
    let dropped =
        [("displaced", &stats.displaced), ("identity_quota", &stats.quota_evictions), ("window", &stats.window_pruned)]
            .map(|(reason, c)| ([("reason", reason)], g(c) as f64));
    f.counters(
        "aldb_relayer_dropped_total",
        "Held records or signatures dropped later, by reason.",
        dropped.iter().map(|(l, v)| (&l[..], *v)),
    );
    // Only the reasons seen: which a light client can name is its own business (§11.5).
    let refused: Vec<([(&str, &str); 1], f64)> =
        stats.transitions_refused().into_iter().map(|(reason, n)| ([("reason", reason)], n as f64)).collect();
    f.counters(
        "aldb_relayer_transitions_refused_total",
        "Epoch transitions the light client refused, by reason (trust: votes).",
        refused.iter().map(|(l, v)| (&l[..], *v)),
    );
    let url = |i: usize| urls.get(i).map_or("?", String::as_str);
    let reasons: [(&str, Field); 5] = [
        ("unsigned", |e| &e.dropped_unsigned),
        ("ahead", |e| &e.dropped_ahead),
        ("stale", |e| &e.dropped_stale),
        ("faulted", |e| &e.dropped_faulted),
        ("slot_full", |e| &e.dropped_slot_full),
    ];
    let endpoint_dropped: Vec<([(&str, &str); 2], f64)> = (stats.endpoints.iter().enumerate())
        .flat_map(|(i, e)| {
            reasons.map(|(reason, field)| ([("endpoint", url(i)), ("reason", reason)], g(field(e)) as f64))
        })
        .collect();
    f.counters(
        "aldb_relayer_endpoint_dropped_total",
        "Well-formed records from an endpoint dropped without being held, by reason.",
        endpoint_dropped.iter().map(|(l, v)| (&l[..], *v)),
    );
    let now = clock_ms();
    let silence: Vec<([(&str, &str); 1], f64)> = (stats.endpoints.iter().enumerate())
        .map(|(i, e)| ([("endpoint", url(i))], e.seconds_since_record(now)))
        .collect();
    f.gauges(
        "aldb_relayer_endpoint_seconds_since_record",
        "Seconds since the endpoint's last well-formed record (since the start, before the first).",
        silence.iter().map(|(l, v)| (&l[..], *v)),
    );
    let per: [(&str, &str, Field); 10] = [
        ("records", "Well-formed records received.", |e| &e.records),
        ("bad_messages", "Messages that are not a valid record notification.", |e| &e.bad_messages),
        ("bad_signatures", "Attestations by configured identities that do not verify.", |e| &e.bad_signatures),
        ("outsiders", "Attestations by identities outside the configured set.", |e| &e.outsiders),
        ("other_cluster", "Records of another genesis hash.", |e| &e.other_cluster),
        ("low_commitment", "Records below the configured commitment.", |e| &e.low_commitment),
        ("unchained", "Quorum-signed records that do not extend the chain.", |e| &e.unchained),
        ("disconnects", "Connections lost or refused.", |e| &e.disconnects),
        ("attestations_trimmed", "Attestations past the per-identity limit of one record, dropped.", |e| {
            &e.attestations_trimmed
        }),
        ("quiet_warnings", "Times the endpoint sent no record for quiet_warning_ms.", |e| &e.quiet_warnings),
    ];
    for (name, help, field) in per {
        let samples: Vec<([(&str, &str); 1], f64)> =
            (stats.endpoints.iter().enumerate()).map(|(i, e)| ([("endpoint", url(i))], g(field(e)) as f64)).collect();
        f.counters(&format!("aldb_relayer_endpoint_{name}_total"), help, samples.iter().map(|(l, v)| (&l[..], *v)));
    }
    f.encode()
}

/// Serves `/metrics` on `listener` until `shutdown`.
pub(crate) async fn serve(
    listener: TcpListener,
    stats: Arc<Stats>,
    urls: Arc<Vec<String>>,
    shutdown: watch::Receiver<bool>,
) {
    let handle = move |target: &str| match target {
        "/metrics" => Response::new("200 OK", "text/plain; version=0.0.4", render(&stats, &urls)),
        _ => Response::not_found(),
    };
    crate::http::serve(listener, handle, shutdown).await;
}

/// Binds the metrics listener.
pub(crate) async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    crate::http::bind(addr).await
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
        // 21 families, and the votes mode's five (frozen, epoch, followed, given up, refused).
        assert_eq!(text.matches("# TYPE").count(), 26);
        assert!(text.contains("aldb_relayer_frozen 0\n"));
        assert!(!text.contains("aldb_relayer_transitions_refused_total"), "no family before a refusal");
        stats.transition_refused("wrong_set");
        stats.transition_refused("wrong_set");
        stats.transition_refused("set_not_bound");
        let text = render(&stats, &["ws://a/ws".into(), "ws://b\"/ws".into()]);
        assert!(text.contains("aldb_relayer_transitions_refused_total{reason=\"wrong_set\"} 2\n"));
        assert!(text.contains("aldb_relayer_transitions_refused_total{reason=\"set_not_bound\"} 1\n"));
        assert!(stats.summary(&[]).contains(" transitions_refused={set_not_bound:1,wrong_set:2}"));
        assert!(text.contains("aldb_relayer_endpoint_quiet_warnings_total{endpoint=\"ws://a/ws\"} 0\n"));
        let silent = text
            .lines()
            .find_map(|l| l.strip_prefix("aldb_relayer_endpoint_seconds_since_record{endpoint=\"ws://a/ws\"} "))
            .expect("a silence gauge per endpoint");
        assert!(silent.parse::<f64>().is_ok_and(|s| s >= 0.0), "{silent}");
    }

    /// Every family the relayer exported before its exposition moved onto the `prometheus` crate,
    /// with its type and help text as they were: dashboards and alerts key on them.
    const FAMILIES: [(&str, &str, &str); 19] = [
        ("aldb_relayer_accepted_total", "counter", "Records accepted."),
        ("aldb_relayer_last_accepted_slot", "gauge", "Slot of the last accepted record."),
        ("aldb_relayer_conflicts_total", "counter", "Conflicting records each signed by a quorum (safety faults)."),
        ("aldb_relayer_equivocations_total", "counter", "Identities seen signing two records for one slot."),
        ("aldb_relayer_candidates", "gauge", "Different records held, waiting for signatures or their parent."),
        ("aldb_relayer_pending_slots", "gauge", "Slots held above the last accepted one."),
        (
            "aldb_relayer_rewinds_total",
            "counter",
            "Followers told to resubscribe lower after held records were dropped.",
        ),
        ("aldb_relayer_log_lines_suppressed_total", "counter", "Log lines left out by the rate limit."),
        ("aldb_relayer_dropped_total", "counter", "Held records or signatures dropped later, by reason."),
        (
            "aldb_relayer_endpoint_dropped_total",
            "counter",
            "Well-formed records from an endpoint dropped without being held, by reason.",
        ),
        ("aldb_relayer_endpoint_records_total", "counter", "Well-formed records received."),
        ("aldb_relayer_endpoint_bad_messages_total", "counter", "Messages that are not a valid record notification."),
        (
            "aldb_relayer_endpoint_bad_signatures_total",
            "counter",
            "Attestations by configured identities that do not verify.",
        ),
        ("aldb_relayer_endpoint_outsiders_total", "counter", "Attestations by identities outside the configured set."),
        ("aldb_relayer_endpoint_other_cluster_total", "counter", "Records of another genesis hash."),
        ("aldb_relayer_endpoint_low_commitment_total", "counter", "Records below the configured commitment."),
        ("aldb_relayer_endpoint_unchained_total", "counter", "Quorum-signed records that do not extend the chain."),
        ("aldb_relayer_endpoint_disconnects_total", "counter", "Connections lost or refused."),
        (
            "aldb_relayer_endpoint_attestations_trimmed_total",
            "counter",
            "Attestations past the per-identity limit of one record, dropped.",
        ),
    ];

    #[test]
    fn every_family_of_before_is_still_exported_unchanged() {
        let stats = Stats::new(1);
        let text = render(&stats, &["ws://a/ws".into()]);
        for (name, kind, help) in FAMILIES {
            assert!(text.contains(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n")), "{name} lost or changed");
            assert!(text.lines().any(|l| l.starts_with(name) && l.ends_with(" 0")), "{name} has no sample");
        }
        for reason in ["displaced", "identity_quota", "window"] {
            assert!(text.contains(&format!("aldb_relayer_dropped_total{{reason=\"{reason}\"}} 0\n")), "{reason}");
        }
        for reason in ["unsigned", "ahead", "stale", "faulted", "slot_full"] {
            let line = format!("aldb_relayer_endpoint_dropped_total{{endpoint=\"ws://a/ws\",reason=\"{reason}\"}} 0\n");
            assert!(text.contains(&line), "{line}");
        }
    }
}
