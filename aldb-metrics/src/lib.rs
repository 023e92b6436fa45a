//! Prometheus metrics for aldb's processes that live inside someone else's: the geyser plugin and
//! the in-process bank module run in the validator, the relayer in its own runtime.
//!
//! Their numbers live in atomics updated at the cost of one relaxed add; a scrape reads them once
//! into [`Families`] and lets the `prometheus` crate's text encoder write the exposition format,
//! so nothing on a hot path goes through a registry or a lock. [`MetricsServer`] answers
//! `GET /metrics` on a thread of its own, with no async runtime, and can neither block nor panic
//! its host.

mod families;
mod server;

pub use families::{Families, Labels, Value};
pub use server::{MetricsServer, ServeError};
