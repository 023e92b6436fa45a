//! The server-wide budget of response bytes: answers built, queued or being written, summed over
//! every connection ([`crate::Config::max_buffered_bytes`]).
//!
//! Each connection bounds what it holds on its own (one answer of at most
//! [`Limits::max_response_bytes`](crate::Limits) over HTTP, its reply queue over WebSocket), but
//! many connections within their own limits could together hold more memory than the host has.
//! So every answer holds a [`Reservation`] from the moment it starts being built until its socket
//! has taken its last byte: the reservation grows as the answer grows, is refused once the budget
//! is spent (the request is then answered "server busy" instead), and is released when it is
//! dropped, which happens however the answer ends (written, refused, or its connection gone).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use prometheus::{IntCounter, IntGauge};

use crate::metrics::Metrics;

/// The JSON-RPC error message of a request refused because the budget is spent.
pub const BUSY_MESSAGE: &str = "server busy: response buffer full";

/// A request or notification refused because the response budget is spent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{BUSY_MESSAGE}")]
pub struct Busy;

/// The response bytes all connections may hold at once.
#[derive(Debug)]
pub struct ResponseBudget {
    cap: usize,
    used: AtomicUsize,
    /// `hyades_response_buffer_bytes`.
    gauge: IntGauge,
    /// `hyades_limit_hits_total{limit="response_buffer"}`.
    refused: IntCounter,
}

impl ResponseBudget {
    /// A budget of `cap` bytes, reported in `metrics`.
    pub fn new(cap: usize, metrics: &Metrics) -> Arc<Self> {
        Arc::new(Self {
            cap,
            used: AtomicUsize::new(0),
            gauge: metrics.response_buffer_bytes.clone(),
            refused: metrics.limit_response_buffer.clone(),
        })
    }

    /// The budget in bytes.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Bytes held now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    /// Holds `bytes` if they fit; `None` (counted as a refusal) if they do not.
    pub fn try_reserve(self: &Arc<Self>, bytes: usize) -> Option<Reservation> {
        let mut r = Reservation { budget: self.clone(), bytes: 0 };
        r.try_grow_to(bytes).then_some(r)
    }

    /// Adds `bytes` unless that passes the cap. Never waits: a compare-and-swap loop.
    fn try_add(&self, bytes: usize) -> bool {
        let added = self.used.fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
            used.checked_add(bytes).filter(|total| *total <= self.cap)
        });
        match added {
            Ok(_) => {
                self.gauge.add(i64::try_from(bytes).unwrap_or(i64::MAX));
                true
            }
            Err(_) => {
                self.refused.inc();
                false
            }
        }
    }

    fn release(&self, bytes: usize) {
        if bytes == 0 {
            return;
        }
        self.used.fetch_sub(bytes, Ordering::AcqRel);
        self.gauge.sub(i64::try_from(bytes).unwrap_or(i64::MAX));
    }
}

/// Bytes held from a [`ResponseBudget`] for one answer; released when dropped.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<ResponseBudget>,
    bytes: usize,
}

impl Reservation {
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Holds `total` bytes in all (never fewer than now); false, holding what it held, if the
    /// budget cannot take the difference.
    pub fn try_grow_to(&mut self, total: usize) -> bool {
        let more = total.saturating_sub(self.bytes);
        if more == 0 {
            return true;
        }
        if !self.budget.try_add(more) {
            return false;
        }
        self.bytes = total;
        true
    }

    /// Holds at most `total` bytes, releasing the rest (what an answer did not use of what was
    /// held for it while it was built).
    pub fn shrink_to(&mut self, total: usize) {
        let less = self.bytes.saturating_sub(total);
        self.budget.release(less);
        self.bytes -= less;
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.release(self.bytes);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn reservations_grow_within_the_cap_and_release_on_drop() {
        let metrics = Metrics::new().unwrap();
        let budget = ResponseBudget::new(100, &metrics);
        let mut a = budget.try_reserve(40).unwrap();
        assert!(a.try_grow_to(70));
        assert!(a.try_grow_to(10), "growing to less than held is a no-op");
        assert_eq!(a.bytes(), 70);
        let b = budget.try_reserve(30).unwrap();
        assert!(budget.try_reserve(1).is_none());
        assert!(!a.try_grow_to(71));
        assert_eq!((a.bytes(), budget.used()), (70, 100));
        a.shrink_to(20);
        assert_eq!(budget.used(), 50);
        assert_eq!(metrics.response_buffer_bytes.get(), 50);
        drop(b);
        drop(a);
        assert_eq!(budget.used(), 0);
        assert_eq!(metrics.response_buffer_bytes.get(), 0);
        assert_eq!(metrics.limit_response_buffer.get(), 2);
        // A reservation of the whole budget fits; of one byte more, never.
        assert!(budget.try_reserve(100).is_some());
        assert!(budget.try_reserve(101).is_none());
        assert!(budget.try_reserve(usize::MAX).is_none());
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn concurrent_reservations_never_pass_the_cap_and_all_return() {
        let metrics = Metrics::new().unwrap();
        let budget = ResponseBudget::new(10_000, &metrics);
        let peak = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..8u64)
            .map(|t| {
                let (budget, peak) = (budget.clone(), peak.clone());
                std::thread::spawn(move || {
                    let mut rng = ChaCha8Rng::seed_from_u64(t);
                    let mut held = Vec::new();
                    for _ in 0..20_000 {
                        match rng.random_range(0..4) {
                            0 | 1 => {
                                if let Some(r) = budget.try_reserve(rng.random_range(1..2_000)) {
                                    held.push(r);
                                }
                            }
                            2 => {
                                if let Some(r) = held.last_mut() {
                                    let to = r.bytes() + rng.random_range(0..500);
                                    r.try_grow_to(to);
                                }
                            }
                            _ => {
                                if !held.is_empty() {
                                    held.swap_remove(rng.random_range(0..held.len()));
                                }
                            }
                        }
                        peak.fetch_max(budget.used(), Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert!(peak.load(Ordering::Relaxed) <= 10_000);
        assert!(peak.load(Ordering::Relaxed) > 5_000, "the test never came near the cap");
        assert_eq!(budget.used(), 0);
        assert_eq!(metrics.response_buffer_bytes.get(), 0);
    }
}
