//! Metric families assembled at scrape time and written out by `prometheus`' text encoder.
//!
//! The data model ([`MetricFamily`]) and the [`TextEncoder`] do the exposition format (escaping of
//! label values, `le` labels, `+Inf`, number formatting); callers only say what each family holds.

use prometheus::TextEncoder;
use prometheus::proto::{Bucket, Counter, Gauge, Histogram, LabelPair, Metric, MetricFamily, MetricType};

/// Families in the order they are added, which is the order they are written in.
#[derive(Debug, Default)]
pub struct Families(Vec<MetricFamily>);

/// One sample's labels, as `(name, value)` pairs.
pub type Labels<'a> = &'a [(&'a str, &'a str)];

/// A number a sample can hold. Exposition values are `f64`; integer counts stay exact up to 2^53.
pub trait Value {
    /// The sample value.
    fn value(self) -> f64;
}

macro_rules! value_as_f64 {
    ($($t:ty),*) => {
        $(impl Value for $t {
            fn value(self) -> f64 {
                self as f64
            }
        })*
    };
}
value_as_f64!(u8, u32, u64, usize, i64, f64);

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

    /// A counter with one unlabelled sample.
    pub fn counter(&mut self, name: &str, help: &str, value: impl Value) {
        self.counters(name, help, [(&[][..], value.value())]);
    }

    /// A counter with one sample per label set.
    pub fn counters<'a>(&mut self, name: &str, help: &str, samples: impl IntoIterator<Item = (Labels<'a>, f64)>) {
        let metrics = self.family(name, MetricType::COUNTER, help);
        for (labels, value) in samples {
            let mut c = Counter::default();
            c.set_value(value);
            let mut m = labelled(labels);
            m.set_counter(c);
            metrics.push(m);
        }
    }

    /// A gauge with one unlabelled sample.
    pub fn gauge(&mut self, name: &str, help: &str, value: impl Value) {
        self.gauges(name, help, [(&[][..], value.value())]);
    }

    /// A gauge with one sample per label set.
    pub fn gauges<'a>(&mut self, name: &str, help: &str, samples: impl IntoIterator<Item = (Labels<'a>, f64)>) {
        let metrics = self.family(name, MetricType::GAUGE, help);
        for (labels, value) in samples {
            let mut g = Gauge::default();
            g.set_value(value);
            let mut m = labelled(labels);
            m.set_gauge(g);
            metrics.push(m);
        }
    }

    /// A histogram from `(upper bound, observations at or below it)` pairs in increasing bound
    /// order (cumulative counts); the `+Inf` bucket is `count`.
    pub fn histogram(
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

    /// Everything in the Prometheus text format (version 0.0.4). A family without samples is left
    /// out, as a registry would leave it out.
    pub fn encode(mut self) -> String {
        self.0.retain(|f| !f.get_metric().is_empty());
        let mut out = String::with_capacity(16 * 1024);
        if let Err(e) = TextEncoder::new().encode_utf8(&self.0, &mut out) {
            // Only a nameless or empty family fails, and neither is written here.
            log::warn!("cannot encode metrics: {e}");
        }
        out
    }
}

/// A sample with `labels` and no value yet.
fn labelled(labels: Labels<'_>) -> Metric {
    Metric::from_label(
        labels
            .iter()
            .map(|(name, value)| {
                let mut p = LabelPair::default();
                p.set_name((*name).to_string());
                p.set_value((*value).to_string());
                p
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_are_written_in_order_and_empty_ones_left_out() {
        let mut f = Families::default();
        f.counter("a_total", "A.", 3u64);
        f.counters("empty_total", "Nothing.", []);
        f.gauges("b", "B.", [(&[("url", "ws://h/\"x\"")][..], 1.5)]);
        f.histogram("c_seconds", "C.", [(0.5, 1), (1.0, 2)], 3, 4.25);
        let text = f.encode();
        assert!(!text.contains("empty_total"), "{text}");
        let a = text.find("# TYPE a_total counter\na_total 3\n");
        let b = text.find("b{url=\"ws://h/\\\"x\\\"\"} 1.5\n");
        let c = text.find("c_seconds_bucket{le=\"+Inf\"} 3\nc_seconds_sum 4.25\nc_seconds_count 3\n");
        assert!(matches!((a, b, c), (Some(a), Some(b), Some(c)) if a < b && b < c), "{text}");
    }
}
