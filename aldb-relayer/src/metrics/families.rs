//! Metric families assembled at scrape time and written out by `prometheus`' text encoder.
//!
//! The relayer's numbers live in the atomics of [`crate::stats::Stats`], updated by the followers
//! and the chain at the cost of one relaxed add. A scrape reads them once into `prometheus`' data
//! model ([`MetricFamily`]) and lets the crate's [`TextEncoder`] do the exposition format
//! (escaping of label values such as endpoint URLs, number formatting).

use prometheus::TextEncoder;
use prometheus::proto::{Counter, Gauge, LabelPair, Metric, MetricFamily, MetricType};

/// Families in the order they are added, which is the order they are written in.
#[derive(Debug, Default)]
pub(crate) struct Families(Vec<MetricFamily>);

/// One sample's labels, as `(name, value)` pairs.
pub(crate) type Labels<'a> = &'a [(&'a str, &'a str)];

/// A number a sample can hold. Exposition values are `f64`; integer counts stay exact up to 2^53.
pub(crate) trait Value {
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
    /// Starts a family; its samples follow with [`Families::sample`].
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
    pub(crate) fn counter(&mut self, name: &str, help: &str, value: impl Value) {
        self.counters(name, help, [(&[][..], value.value())]);
    }

    /// A counter with one sample per label set.
    pub(crate) fn counters<'a>(
        &mut self,
        name: &str,
        help: &str,
        samples: impl IntoIterator<Item = (Labels<'a>, f64)>,
    ) {
        let metrics = self.family(name, MetricType::COUNTER, help);
        for (labels, value) in samples {
            let mut c = Counter::default();
            c.set_value(value);
            let mut m = labelled(labels);
            m.set_counter(c);
            metrics.push(m);
        }
    }

    /// A gauge with one sample per label set.
    pub(crate) fn gauges<'a>(&mut self, name: &str, help: &str, samples: impl IntoIterator<Item = (Labels<'a>, f64)>) {
        let metrics = self.family(name, MetricType::GAUGE, help);
        for (labels, value) in samples {
            let mut g = Gauge::default();
            g.set_value(value);
            let mut m = labelled(labels);
            m.set_gauge(g);
            metrics.push(m);
        }
    }

    /// A gauge with one unlabelled sample.
    pub(crate) fn gauge(&mut self, name: &str, help: &str, value: impl Value) {
        let mut g = Gauge::default();
        g.set_value(value.value());
        self.family(name, MetricType::GAUGE, help).push(Metric::from_gauge(g));
    }

    /// Everything in the Prometheus text format (version 0.0.4). A family without samples is left
    /// out, as a registry would leave it out.
    pub(crate) fn encode(mut self) -> String {
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
