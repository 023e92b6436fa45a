//! Why nothing is accepted: a relayer that receives records but accepts none says so in its log
//! at the default level, at most once per [`WAITING_INTERVAL`], with what it saw. The usual case
//! is a relayer following `finalized` started next to fresh slots: the producers log a slot's
//! `finalized` record only once it is rooted (some 32 slots, 13 seconds, after `confirmed`).

use std::time::{Duration, Instant};

use aldb_verify::{Commitment, RootRecord};

/// How long the relayer goes without accepting a record before it says why, and the shortest
/// time between two such lines.
pub(crate) const WAITING_INTERVAL: Duration = Duration::from_secs(15);

/// Counts what arrived since the last acceptance (or the last line), per level.
#[derive(Debug)]
pub(crate) struct Waiting {
    level: Commitment,
    interval: Duration,
    /// The last acceptance, the start, or the last line: the next line is due an interval later.
    since: Instant,
    /// Records offered since `since`.
    seen: u64,
    /// Of those, at the followed level.
    at_level: u64,
    /// The newest slot offered at the followed level.
    newest_at_level: Option<u64>,
    /// The newest record of the other level: its slot and level.
    newest_other: Option<(u64, Commitment)>,
}

impl Waiting {
    pub(crate) fn new(level: Commitment, interval: Duration, now: Instant) -> Self {
        Self { level, interval, since: now, seen: 0, at_level: 0, newest_at_level: None, newest_other: None }
    }

    /// Notes an offered record.
    pub(crate) fn seen(&mut self, record: &RootRecord) {
        self.seen += 1;
        if record.commitment == self.level {
            self.at_level += 1;
            self.newest_at_level = self.newest_at_level.max(Some(record.slot));
        } else if self.newest_other.is_none_or(|(s, _)| record.slot >= s) {
            self.newest_other = Some((record.slot, record.commitment));
        }
    }

    /// A record was accepted: nothing to explain.
    pub(crate) fn accepted(&mut self, now: Instant) {
        *self = Self::new(self.level, self.interval, now);
    }

    /// The line to log now, if one is due: records came for a whole interval and none was
    /// accepted. `tip` is the last accepted slot, `pending` the slots held waiting for
    /// signatures or for their parent.
    pub(crate) fn line(&mut self, now: Instant, tip: Option<u64>, pending: usize) -> Option<String> {
        if self.seen == 0 || now.duration_since(self.since) < self.interval {
            return None;
        }
        let secs = now.duration_since(self.since).as_secs();
        let after =
            tip.map_or_else(|| "no record accepted yet".to_string(), |t| format!("the last accepted slot is {t}"));
        let level = self.level.name();
        let text = match (self.newest_at_level, self.newest_other) {
            (None, Some((slot, other))) => {
                let hint = match self.level {
                    Commitment::Finalized => format!(
                        "; a slot's {level} record comes once the slot is rooted, about 32 slots after it is confirmed; \
                         if none ever comes, the producers do not log {level} records"
                    ),
                    _ => format!(
                        "; producers configured with commitment \"{}\" log only such records: set commitment \"{}\" to follow them",
                        other.name(),
                        other.name()
                    ),
                };
                format!(
                    "waiting: {} records seen in the last {secs} s, none at commitment {level}; the newest is {} at slot {slot} \
                     ({after}){hint}",
                    self.seen,
                    other.name()
                )
            }
            (Some(newest), _) => format!(
                "waiting: {} of {} records seen in the last {secs} s are at commitment {level} (the newest at slot {newest}), \
                 none accepted ({after}; {pending} slot(s) held for more signatures or their parent)",
                self.at_level, self.seen
            ),
            (None, None) => return None,
        };
        *self = Self::new(self.level, self.interval, now);
        Some(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(slot: u64, commitment: Commitment) -> RootRecord {
        RootRecord {
            genesis_hash: [1; 32],
            slot,
            parent: None,
            commitment,
            state_root: [2; 32],
            block: None,
            bank_hash: None,
        }
    }

    #[test]
    fn says_which_level_arrives_once_per_interval_and_nothing_after_an_acceptance() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut w = Waiting::new(Commitment::Finalized, 15 * s, t0);
        assert_eq!(w.line(t0 + 20 * s, None, 0), None, "nothing seen: the followers log their connections");
        for slot in 100..220 {
            w.seen(&rec(slot, Commitment::Confirmed));
        }
        assert_eq!(w.line(t0 + 5 * s, None, 0), None, "not a whole interval yet");
        let line = w.line(t0 + 20 * s, None, 0).expect("due");
        assert!(
            line.starts_with("waiting: 120 records seen in the last 20 s, none at commitment finalized; the newest is confirmed at slot 219"),
            "{line}"
        );
        assert!(line.contains("once the slot is rooted"), "{line}");
        w.seen(&rec(220, Commitment::Confirmed));
        assert_eq!(w.line(t0 + 30 * s, None, 0), None, "at most one line per interval");
        w.seen(&rec(190, Commitment::Finalized));
        let line = w.line(t0 + 36 * s, Some(180), 3).expect("due");
        assert!(
            line.starts_with(
                "waiting: 1 of 2 records seen in the last 16 s are at commitment finalized (the newest at slot 190)"
            ),
            "{line}"
        );
        assert!(line.contains("the last accepted slot is 180; 3 slot(s) held"), "{line}");
        w.seen(&rec(191, Commitment::Finalized));
        w.accepted(t0 + 40 * s);
        assert_eq!(w.line(t0 + 50 * s, Some(191), 0), None);

        let mut w = Waiting::new(Commitment::Confirmed, 15 * s, t0);
        w.seen(&rec(7, Commitment::Finalized));
        let line = w.line(t0 + 15 * s, None, 0).expect("due");
        assert!(line.contains("set commitment \"finalized\""), "{line}");
    }
}
