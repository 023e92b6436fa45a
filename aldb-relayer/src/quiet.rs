//! Sources gone quiet. A Hyades whose validator halted, whose record log stopped growing or whose
//! connection died without a close sends nothing, and a relayer that still counts it among its
//! sources would say nothing either. Each source's silence is the gauge
//! `aldb_relayer_endpoint_seconds_since_record`; this watch logs a warning once a source has sent
//! no record for the configured period (`quiet_warning_ms`), once per silence, counted in
//! `aldb_relayer_endpoint_quiet_warnings_total`, and a line when its records come back.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::stats::{Stats, clock_ms, inc};

/// Which endpoints are in a silence already warned about.
#[derive(Debug)]
pub(crate) struct Quiet {
    period: Duration,
    warned: Vec<bool>,
}

impl Quiet {
    /// Nothing warned yet about `endpoints` endpoints, quiet after `period`.
    pub(crate) fn new(endpoints: usize, period: Duration) -> Self {
        Self { period, warned: vec![false; endpoints] }
    }

    /// The lines due at `now_ms` ([`clock_ms`]): a warning for each endpoint silent for the period
    /// and not yet warned about, and a note for each warned one whose records came back.
    pub(crate) fn check(&mut self, stats: &Stats, urls: &[String], now_ms: u64) -> Vec<(log::Level, String)> {
        let mut lines = Vec::new();
        let period = self.period.as_secs_f64();
        for (i, (es, warned)) in stats.endpoints.iter().zip(self.warned.iter_mut()).enumerate() {
            let url = urls.get(i).map_or("?", String::as_str);
            let silent = es.seconds_since_record(now_ms);
            if silent >= period && !*warned {
                *warned = true;
                inc(&es.quiet_warnings, 1);
                let seen = es.records.load(std::sync::atomic::Ordering::Relaxed);
                lines.push((
                    log::Level::Warn,
                    format!(
                        "{url}: no record for {silent:.1} s ({}; quiet_warning_ms {}): the server may be down, its feed \
                         stuck or its validator halted; the other endpoints carry the quorum meanwhile",
                        if seen == 0 { "none since the start".to_string() } else { format!("{seen} before") },
                        self.period.as_millis()
                    ),
                ));
            } else if silent < period && *warned {
                *warned = false;
                lines.push((log::Level::Info, format!("{url}: records again")));
            }
        }
        lines
    }
}

/// Checks the endpoints' silence until `shutdown`, logging what [`Quiet::check`] finds, a few
/// times per period.
pub(crate) async fn watch(
    stats: Arc<Stats>,
    urls: Arc<Vec<String>>,
    period: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    let tick = (period / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
    let mut quiet = Quiet::new(stats.endpoints.len(), period);
    loop {
        tokio::select! {
            _ = tokio::time::sleep(tick) => {}
            _ = crate::follow::stopped(&mut shutdown) => return,
        }
        for (level, line) in quiet.check(&stats, &urls, clock_ms()) {
            log::log!(level, "{line}");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;

    #[test]
    fn a_silence_is_warned_about_once_and_its_end_noted() {
        let stats = Stats::new(2);
        let urls = vec!["ws://a/ws".to_string(), "ws://b/ws".to_string()];
        let mut q = Quiet::new(2, Duration::from_millis(5_000));
        let t0 = 1_000_000;
        for e in &stats.endpoints {
            e.last_record_ms.store(t0, Ordering::Relaxed);
        }
        assert!(q.check(&stats, &urls, t0 + 4_999).is_empty());
        // b keeps sending; a goes quiet.
        stats.endpoints[1].last_record_ms.store(t0 + 4_000, Ordering::Relaxed);
        let lines = q.check(&stats, &urls, t0 + 5_000);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert_eq!(lines[0].0, log::Level::Warn);
        assert!(lines[0].1.starts_with("ws://a/ws: no record for 5.0 s (none since the start"), "{}", lines[0].1);
        assert!(q.check(&stats, &urls, t0 + 60_000).iter().all(|(_, l)| !l.starts_with("ws://a")), "once per silence");
        assert_eq!(stats.endpoints[0].quiet_warnings.load(Ordering::Relaxed), 1);
        // b went quiet meanwhile (its last record at t0 + 4 s); a comes back.
        stats.endpoints[0].records.store(7, Ordering::Relaxed);
        stats.endpoints[0].last_record_ms.store(t0 + 60_500, Ordering::Relaxed);
        let lines = q.check(&stats, &urls, t0 + 61_000);
        assert_eq!(lines, vec![(log::Level::Info, "ws://a/ws: records again".to_string())]);
        // A second silence of a is warned about again, with what it had sent.
        let lines = q.check(&stats, &urls, t0 + 70_000);
        assert_eq!(lines.len(), 1);
        assert!(lines[0].1.contains("(7 before;"), "{}", lines[0].1);
        assert_eq!(stats.endpoints[0].quiet_warnings.load(Ordering::Relaxed), 2);
        assert_eq!(stats.endpoints[1].quiet_warnings.load(Ordering::Relaxed), 1);
    }
}
