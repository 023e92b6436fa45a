//! Metric families assembled at scrape time and written out by `prometheus`' text encoder.
//!
//! The module's numbers live in atomics updated on the replay and writer threads at the cost of
//! one relaxed add. A scrape reads them once into `prometheus`' data model ([`MetricFamily`]) and
//! lets the crate's [`TextEncoder`] write the exposition format, so nothing on the replay path
//! goes through a registry or a lock. (The geyser plugin and the relayer assemble theirs the same
//! way.)

use prometheus::TextEncoder;
use prometheus::proto::{Bucket, Counter, Gauge, Histogram, Metric, MetricFamily, MetricType};

/// Families in the order they are added, which is the order they are written in.
#[derive(Debug, Default)]
pub(crate) struct Families(Vec<MetricFamily>);

impl Families {
    /// Starts a family and returns its (empty) list of samples.
    fn family(&mut self, name: &str, kind: MetricType, help: &str) -> &mut Vec<Metric> {
        let mut f = MetricFamily::default();
        f.set_name(name.to_string());
        f.set_help(help.to_string());
        f.set_field_type(kind);
        self.0.push(f);
        let last = self.0.len() - 1;
        self.0[last].mut_metric()
    }

    /// A counter with one unlabelled sample. Exposition values are `f64`; counts stay exact up
    /// to 2^53.
    pub(crate) fn counter(&mut self, name: &str, help: &str, value: f64) {
        let mut c = Counter::default();
        c.set_value(value);
        let mut m = Metric::default();
        m.set_counter(c);
        self.family(name, MetricType::COUNTER, help).push(m);
    }

    /// A gauge with one unlabelled sample.
    pub(crate) fn gauge(&mut self, name: &str, help: &str, value: f64) {
        let mut g = Gauge::default();
        g.set_value(value);
        self.family(name, MetricType::GAUGE, help).push(Metric::from_gauge(g));
    }

    /// A histogram from `(upper bound, observations at or below it)` pairs in increasing bound
    /// order (cumulative counts); the `+Inf` bucket is `count`.
    pub(crate) fn histogram(
        &mut self,
        name: &str,
        help: &str,
        buckets: impl IntoIterator<Item = (f64, u64)>,
        count: u64,
        sum: f64,
    ) {
        let mut h = Histogram::default();
        h.set_bucket(
            buckets
                .into_iter()
                .map(|(bound, cumulative)| {
                    let mut b = Bucket::default();
                    b.set_upper_bound(bound);
                    b.set_cumulative_count(cumulative);
                    b
                })
                .collect(),
        );
        h.set_sample_count(count);
        h.set_sample_sum(sum);
        let mut m = Metric::default();
        m.set_histogram(h);
        self.family(name, MetricType::HISTOGRAM, help).push(m);
    }

    /// Everything in the Prometheus text format (version 0.0.4).
    pub(crate) fn encode(self) -> String {
        let mut out = String::with_capacity(8 * 1024);
        if let Err(e) = TextEncoder::new().encode_utf8(&self.0, &mut out) {
            // Only a nameless or empty family fails, and neither is written here.
            log::warn!("aldb-bank: cannot encode metrics: {e}");
        }
        out
    }
}
