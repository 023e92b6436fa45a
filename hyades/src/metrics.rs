//! Prometheus metrics, served in the text format on their own listener.
//!
//! Per-method series are resolved once at start-up and indexed by [`Method::index`], so the hot
//! path records a request with two atomic updates and no label lookup.

use std::time::Duration;

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder, exponential_buckets,
};

use crate::methods::Method;

/// The service's metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// By [`Method::index`], then one for unknown method names.
    requests: Vec<IntCounter>,
    latency: Vec<Histogram>,
    errors: IntCounterVec,
    /// Newest slot served.
    pub newest_slot: IntGauge,
    /// Oldest slot served.
    pub oldest_slot: IntGauge,
    /// Open root subscriptions.
    pub subscribers: IntGauge,
    /// Open WebSocket connections.
    pub ws_connections: IntGauge,
    /// Failed polls of the snapshot directory.
    pub refresh_errors: IntCounter,
    /// Snapshot files in the directory found damaged and not served (the slots that need them
    /// answer -32011).
    pub damaged_files: IntGauge,
    /// Roots announced to subscribers (once per root, not per subscriber).
    pub roots_published: IntCounter,
    /// Connections closed because they did not keep up with notifications.
    pub slow_disconnects: IntCounter,
    /// Root record documents sent (RPC answers and notifications, once per subscriber).
    pub records_served: IntCounter,
    /// New root records read from the record log.
    pub records_published: IntCounter,
    /// Damaged spans of the record log skipped (each one or more entries, or a segment header).
    pub record_log_damage: IntCounter,
    /// Bytes in those spans.
    pub record_log_damaged_bytes: IntCounter,
    /// Open recordSubscribe subscriptions.
    pub record_subscribers: IntGauge,
    /// Newest root record slot (0 when none).
    pub newest_record_slot: IntGauge,
    /// Oldest kept root record slot (0 when none).
    pub oldest_record_slot: IntGauge,
    /// Open connections on the RPC listener (HTTP and WebSocket).
    pub connections: IntGauge,
    /// Reply bytes queued for WebSocket sockets and not yet taken by them, all connections.
    pub ws_queued_bytes: IntGauge,
    /// Requests running (or waiting to run) on the blocking pool.
    pub blocking_requests: IntGauge,
    /// Response bytes being built, queued or written, all connections (the server-wide budget
    /// in use, [`crate::Config::max_buffered_bytes`]).
    pub response_buffer_bytes: IntGauge,
    /// `hyades_slots{commitment}`: served slots at `processed`, `confirmed` and `finalized`, then
    /// `abandoned` slots whose files remain (never served); all zero without a slot-status journal.
    pub slots_by_level: [IntGauge; 4],
    /// Queries refused because their slot was abandoned (-32013).
    pub abandoned_answers: IntCounter,
    /// Root notifications telling subscribers a root was abandoned (once per root).
    pub roots_abandoned: IntCounter,
    /// `hyades_limit_hits_total{limit="connections"}`: connections refused, the listener full.
    pub limit_connections: IntCounter,
    /// `{limit="header_timeout"}`: connections closed, a request head (or body) not received in time.
    pub limit_header_timeout: IntCounter,
    /// `{limit="idle_timeout"}`: keep-alive HTTP connections closed for idleness.
    pub limit_idle_timeout: IntCounter,
    /// `{limit="write_timeout"}`: HTTP connections closed, an answer not taken in time.
    pub limit_write_timeout: IntCounter,
    /// `{limit="response_bytes"}`: answers refused as larger than the response cap.
    pub limit_response_bytes: IntCounter,
    /// `{limit="ws_write_timeout"}`: WebSocket connections closed for not reading their replies.
    pub limit_ws_write_timeout: IntCounter,
    /// `{limit="ws_idle_timeout"}`: idle WebSocket connections (no subscription) closed.
    pub limit_ws_idle_timeout: IntCounter,
    /// `{limit="response_buffer"}`: requests answered "server busy" and subscriber connections
    /// closed because the server-wide response budget was spent.
    pub limit_response_buffer: IntCounter,
}

/// Why metrics could not be set up (a duplicate or malformed metric; a programming error).
pub type MetricsError = prometheus::Error;

impl Metrics {
    /// Adds collectors of another part (a replica's cache) to the metrics served.
    pub fn register_all(&self, collectors: Vec<Box<dyn prometheus::core::Collector>>) -> Result<(), MetricsError> {
        for c in collectors {
            self.registry.register(c)?;
        }
        Ok(())
    }

    /// Registers every metric in a fresh registry.
    pub fn new() -> Result<Self, MetricsError> {
        let registry = Registry::new();
        let requests_vec = IntCounterVec::new(
            Opts::new(
                "hyades_requests_total",
                "JSON-RPC calls answered, by method (unknown names count as \"unknown\")",
            ),
            &["method"],
        )?;
        // From 10 µs (a cached proof) to about 5 s (a worst-case batch), doubling.
        let latency_vec = HistogramVec::new(
            HistogramOpts::new("hyades_request_duration_seconds", "Time to answer one JSON-RPC call, by method")
                .buckets(exponential_buckets(1e-5, 2.0, 20)?),
            &["method"],
        )?;
        let errors =
            IntCounterVec::new(Opts::new("hyades_errors_total", "JSON-RPC error responses, by error code"), &["code"])?;
        let newest_slot = IntGauge::new("hyades_newest_slot", "Newest published slot served (0 when none)")?;
        let oldest_slot = IntGauge::new("hyades_oldest_slot", "Oldest kept slot served (0 when none)")?;
        let subscribers = IntGauge::new("hyades_subscribers", "Open rootSubscribe subscriptions")?;
        let ws_connections = IntGauge::new("hyades_websocket_connections", "Open WebSocket connections")?;
        let refresh_errors = IntCounter::new("hyades_refresh_errors_total", "Failed polls of the snapshot directory")?;
        let damaged_files =
            IntGauge::new("hyades_damaged_snapshot_files", "Snapshot files found damaged and not served")?;
        let roots_published = IntCounter::new("hyades_roots_published_total", "New roots announced to subscribers")?;
        let slow_disconnects = IntCounter::new(
            "hyades_slow_subscriber_disconnects_total",
            "WebSocket connections closed because their notification buffer was full",
        )?;
        let records_served =
            IntCounter::new("hyades_records_served_total", "Root record documents sent (answers and notifications)")?;
        let records_published =
            IntCounter::new("hyades_records_published_total", "New root records read from the record log")?;
        let record_log_damage = IntCounter::new(
            "hyades_record_log_damaged_spans_total",
            "Damaged spans of the record log skipped (one or more entries each, or a segment header)",
        )?;
        let record_log_damaged_bytes =
            IntCounter::new("hyades_record_log_damaged_bytes_total", "Bytes in damaged spans of the record log")?;
        let record_subscribers = IntGauge::new("hyades_record_subscriptions", "Open recordSubscribe subscriptions")?;
        let newest_record_slot = IntGauge::new("hyades_newest_record_slot", "Newest root record slot (0 when none)")?;
        let oldest_record_slot =
            IntGauge::new("hyades_oldest_record_slot", "Oldest kept root record slot (0 when none)")?;
        let connections =
            IntGauge::new("hyades_connections", "Open connections on the RPC listener (HTTP and WebSocket)")?;
        let ws_queued_bytes = IntGauge::new(
            "hyades_websocket_queued_bytes",
            "Reply bytes queued for WebSocket sockets, all connections",
        )?;
        let blocking_requests =
            IntGauge::new("hyades_blocking_requests", "Requests running or waiting to run on the blocking pool")?;
        let response_buffer_bytes = IntGauge::new(
            "hyades_response_buffer_bytes",
            "Response bytes being built, queued or written, all connections (the server-wide response budget in use)",
        )?;
        let limits = IntCounterVec::new(
            Opts::new(
                "hyades_limit_hits_total",
                "Connections refused or closed and answers refused by a resource limit",
            ),
            &["limit"],
        )?;
        let by_level = IntGaugeVec::new(
            Opts::new(
                "hyades_slots",
                "Served slots by commitment level from the slot-status journal; abandoned: files kept but never served",
            ),
            &["commitment"],
        )?;
        let level = |name: &str| by_level.get_metric_with_label_values(&[name]);
        let slots_by_level = [level("processed")?, level("confirmed")?, level("finalized")?, level("abandoned")?];
        registry.register(Box::new(by_level))?;
        let abandoned_answers = IntCounter::new(
            "hyades_abandoned_answers_total",
            "Queries refused because the slot's fork was dropped (-32013)",
        )?;
        let roots_abandoned =
            IntCounter::new("hyades_roots_abandoned_total", "Announced roots later announced as abandoned")?;
        let limit = |name: &str| limits.get_metric_with_label_values(&[name]);
        let limit_connections = limit("connections")?;
        let limit_header_timeout = limit("header_timeout")?;
        let limit_idle_timeout = limit("idle_timeout")?;
        let limit_write_timeout = limit("write_timeout")?;
        let limit_response_bytes = limit("response_bytes")?;
        let limit_ws_write_timeout = limit("ws_write_timeout")?;
        let limit_ws_idle_timeout = limit("ws_idle_timeout")?;
        let limit_response_buffer = limit("response_buffer")?;
        registry.register(Box::new(limits))?;
        registry.register(Box::new(requests_vec.clone()))?;
        registry.register(Box::new(latency_vec.clone()))?;
        registry.register(Box::new(errors.clone()))?;
        for g in [
            &newest_slot,
            &oldest_slot,
            &subscribers,
            &ws_connections,
            &record_subscribers,
            &newest_record_slot,
            &oldest_record_slot,
            &connections,
            &ws_queued_bytes,
            &blocking_requests,
            &response_buffer_bytes,
            &damaged_files,
        ] {
            registry.register(Box::new(g.clone()))?;
        }
        for c in [&refresh_errors, &roots_published, &slow_disconnects, &records_served, &records_published] {
            registry.register(Box::new(c.clone()))?;
        }
        for c in [&record_log_damage, &record_log_damaged_bytes, &abandoned_answers, &roots_abandoned] {
            registry.register(Box::new(c.clone()))?;
        }
        let names: Vec<&str> = Method::all().map(Method::name).chain(["unknown"]).collect();
        let requests =
            names.iter().map(|n| requests_vec.get_metric_with_label_values(&[n])).collect::<Result<_, _>>()?;
        let latency = names.iter().map(|n| latency_vec.get_metric_with_label_values(&[n])).collect::<Result<_, _>>()?;
        Ok(Self {
            registry,
            requests,
            latency,
            errors,
            newest_slot,
            oldest_slot,
            subscribers,
            ws_connections,
            refresh_errors,
            damaged_files,
            roots_published,
            slow_disconnects,
            records_served,
            records_published,
            record_log_damage,
            record_log_damaged_bytes,
            record_subscribers,
            newest_record_slot,
            oldest_record_slot,
            connections,
            ws_queued_bytes,
            blocking_requests,
            response_buffer_bytes,
            slots_by_level,
            abandoned_answers,
            roots_abandoned,
            limit_connections,
            limit_header_timeout,
            limit_idle_timeout,
            limit_write_timeout,
            limit_response_bytes,
            limit_ws_write_timeout,
            limit_ws_idle_timeout,
            limit_response_buffer,
        })
    }

    /// Records one answered call of `method` (`None`: an unknown name).
    pub fn request(&self, method: Option<Method>, took: Duration) {
        let i = method.map_or(Method::COUNT, Method::index);
        if let (Some(c), Some(h)) = (self.requests.get(i), self.latency.get(i)) {
            c.inc();
            h.observe(took.as_secs_f64());
        }
    }

    /// Records one error response with `code`.
    pub fn error(&self, code: i64) {
        // Codes come from a fixed set, so the label's cardinality stays bounded.
        if let Ok(c) = self.errors.get_metric_with_label_values(&[&code.to_string()]) {
            c.inc();
        }
    }

    /// Sets the served slot range gauges.
    pub fn set_range(&self, oldest: Option<u64>, newest: Option<u64>) {
        let g = |v: Option<u64>| v.map_or(0, |s| i64::try_from(s).unwrap_or(i64::MAX));
        self.oldest_slot.set(g(oldest));
        self.newest_slot.set(g(newest));
    }

    /// Sets the slots-by-level gauges from [`crate::levels::View::counts`].
    pub fn set_levels(&self, counts: [u64; 4]) {
        for (g, n) in self.slots_by_level.iter().zip(counts) {
            g.set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }

    /// Sets the root record range gauges.
    pub fn set_record_range(&self, range: Option<(u64, u64)>) {
        let g = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        self.oldest_record_slot.set(range.map_or(0, |r| g(r.0)));
        self.newest_record_slot.set(range.map_or(0, |r| g(r.1)));
    }

    /// Everything in the Prometheus text format.
    pub fn encode(&self) -> String {
        let mut buf = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut buf) {
            log::warn!("cannot encode metrics: {e}");
        }
        String::from_utf8_lossy(&buf).into_owned()
    }
}
