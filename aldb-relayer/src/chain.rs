//! Merging attestations and accepting records along one chain (`docs/SPEC.md` §9.4).
//!
//! [`Acceptor`] is pure logic, fed records as they arrive from any endpoint:
//!
//! - Records are grouped by slot and by record hash (recomputed from the bytes, never taken from
//!   the server). Attestations for the same hash merge across endpoints; each configured identity
//!   counts once per hash, after its signature verifies (strict ed25519, §9.3). Identities outside
//!   the set and invalid signatures count for nothing and are reported.
//! - A record is *attested* once `k` distinct identities signed it. It is accepted when it is
//!   attested **and** extends the last accepted record: same genesis, `parent_slot` = the last
//!   accepted slot, `CHAINED` with `parent_record_hash` = the last accepted record hash.
//! - Without a cursor, the first attested record at or after the start slot (the lowest such
//!   slot) is taken as the trust anchor; everything after it must chain to it.
//! - A record that is attested but does not chain — a chain-segment start after a producer
//!   restart (`CHAINED` unset), or a record whose parent is another fork — is **never** accepted.
//!   The relayer only extends its chain: accepting a segment start would trust the quorum alone
//!   for the link to the accepted history, and that link (which slots lie between, which fork the
//!   parent is on) is exactly what the chain rule exists to prove. Such a record is reported once,
//!   and the relayer stalls there until an operator re-anchors (see the README).
//! - Two different records for one slot that both reach the threshold are both refused and the
//!   slot is marked faulted: a safety fault (at least `2k - n` identities signed two records for
//!   one slot). An identity that signs two different records for one slot (equivocation) stops
//!   counting for either.

use std::collections::{BTreeMap, BTreeSet};

use aldb_verify::record_json::AttestedRecord;
use aldb_verify::{Commitment, Hash, Quorum, RootRecord};

use crate::config::meets;

/// Accepted record hashes remembered below the tip, to recognise conflicting late records.
const HISTORY: usize = 4096;
/// Slots above the tip held while waiting for their parents; beyond this the highest are dropped.
pub const MAX_PENDING_SLOTS: usize = 20_000;

/// The last accepted record: what the next one must chain to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tip {
    /// Its slot.
    pub slot: u64,
    /// Its record hash.
    pub record_hash: Hash,
}

/// Where the chain starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// Resume after an accepted record (from the cursor file).
    Cursor(Tip),
    /// No accepted record yet: the first attested record at or after this slot is the anchor.
    Anchor {
        /// The lowest slot considered.
        from_slot: u64,
    },
}

/// The rules a record is judged by.
#[derive(Clone, Debug)]
pub struct Rules {
    /// The k-of-n identity rule.
    pub quorum: Quorum,
    /// The cluster.
    pub genesis_hash: Hash,
    /// The lowest commitment accepted.
    pub commitment: Commitment,
}

/// A record the relayer accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Accepted {
    /// The record.
    pub record: RootRecord,
    /// Its hash.
    pub record_hash: Hash,
    /// The identities whose valid attestations counted, sorted.
    pub signers: Vec<[u8; 32]>,
    /// Whether it was taken as the trust anchor (no chain check).
    pub anchor: bool,
}

/// Why a record was set aside without looking at its attestations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ignored {
    /// Its genesis hash is not the configured cluster's.
    OtherCluster,
    /// Committed below the configured commitment.
    Commitment,
    /// At or below the last accepted slot.
    Stale,
    /// Below the start slot while looking for the anchor.
    BeforeStart,
    /// Its slot is faulted (two attested records).
    Faulted,
}

/// A safety-relevant event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Two different records for one slot both reached the threshold: both are refused.
    Conflict {
        /// The slot.
        slot: u64,
        /// The two record hashes.
        hashes: [Hash; 2],
    },
    /// A record for an already accepted slot, different from the accepted one, reached the
    /// threshold.
    ConflictWithAccepted {
        /// The slot.
        slot: u64,
        /// The accepted record hash.
        accepted: Hash,
        /// The other record's hash.
        other: Hash,
    },
    /// An identity signed two different records for one slot; it no longer counts there.
    Equivocation {
        /// The slot.
        slot: u64,
        /// The identity.
        identity: [u8; 32],
    },
}

/// An attested record that cannot extend the accepted chain (reported once per record).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unchained {
    /// Its slot.
    pub slot: u64,
    /// Its hash.
    pub record_hash: Hash,
    /// Its parent slot, if set.
    pub parent_slot: Option<u64>,
    /// Whether it is `CHAINED`.
    pub chained: bool,
    /// The slot it would have to chain to.
    pub tip_slot: u64,
}

/// What one offered record did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Set when the record was not considered at all.
    pub ignored: Option<Ignored>,
    /// Attestations by configured identities whose signature did not verify.
    pub bad_signatures: usize,
    /// Attestations by identities outside the configured set.
    pub outsiders: usize,
    /// Valid attestations that counted for the first time.
    pub new_signatures: usize,
    /// Attested records that cannot extend the chain.
    pub unchained: Vec<Unchained>,
    /// Safety faults found.
    pub faults: Vec<Fault>,
    /// Records accepted as a result, in chain order.
    pub accepted: Vec<Accepted>,
    /// Pending slots dropped because too many were held.
    pub dropped_pending: usize,
}

#[derive(Debug)]
struct Candidate {
    record: RootRecord,
    signers: BTreeSet<[u8; 32]>,
    reported_unchained: bool,
}

#[derive(Debug, Default)]
struct SlotVotes {
    candidates: BTreeMap<Hash, Candidate>,
    /// The one hash each identity validly signed at this slot.
    signed: BTreeMap<[u8; 32], Hash>,
    equivocators: BTreeSet<[u8; 32]>,
}

/// Merges attestations and accepts records along one chain.
#[derive(Debug)]
pub struct Acceptor {
    rules: Rules,
    tip: Option<Tip>,
    floor: u64,
    pending: BTreeMap<u64, SlotVotes>,
    history: BTreeMap<u64, Hash>,
    faulted: BTreeSet<u64>,
}

impl Acceptor {
    /// An acceptor resuming from `start`.
    pub fn new(rules: Rules, start: Start) -> Self {
        let (tip, floor) = match start {
            Start::Cursor(t) => (Some(t), t.slot.saturating_add(1)),
            Start::Anchor { from_slot } => (None, from_slot),
        };
        let mut history = BTreeMap::new();
        if let Some(t) = tip {
            history.insert(t.slot, t.record_hash);
        }
        Self { rules, tip, floor, pending: BTreeMap::new(), history, faulted: BTreeSet::new() }
    }

    /// The rules records are judged by.
    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    /// The last accepted record, if any.
    pub fn tip(&self) -> Option<Tip> {
        self.tip
    }

    /// The lowest slot still of interest: the tip's successor, or the start slot.
    pub fn next_slot(&self) -> u64 {
        self.tip.map_or(self.floor, |t| t.slot.saturating_add(1))
    }

    /// Slots with conflicting attested records.
    pub fn faulted(&self) -> &BTreeSet<u64> {
        &self.faulted
    }

    /// Slots held above the tip, waiting.
    pub fn pending_slots(&self) -> usize {
        self.pending.len()
    }

    /// Takes one record with the attestations an endpoint served beside it.
    pub fn offer(&mut self, rec: &AttestedRecord) -> Report {
        let mut report = Report::default();
        let slot = rec.record.slot;
        let hash = rec.record_hash;
        if rec.record.genesis_hash != self.rules.genesis_hash {
            report.ignored = Some(Ignored::OtherCluster);
            return report;
        }
        if !meets(rec.record.commitment, self.rules.commitment) {
            report.ignored = Some(Ignored::Commitment);
            return report;
        }
        if let Some(tip) = self.tip
            && slot <= tip.slot
        {
            if let Some(accepted) = self.history.get(&slot)
                && *accepted != hash
                && self.rules.quorum.is_attested(&hash, &rec.attestations)
            {
                report.faults.push(Fault::ConflictWithAccepted { slot, accepted: *accepted, other: hash });
            }
            report.ignored = Some(Ignored::Stale);
            return report;
        }
        if slot < self.floor {
            report.ignored = Some(Ignored::BeforeStart);
            return report;
        }
        if self.faulted.contains(&slot) {
            report.ignored = Some(Ignored::Faulted);
            return report;
        }
        let votes = self.pending.entry(slot).or_default();
        votes
            .candidates
            .entry(hash)
            .or_insert_with(|| Candidate { record: rec.record, signers: BTreeSet::new(), reported_unchained: false });
        for a in &rec.attestations {
            if !self.rules.quorum.contains(&a.identity) {
                report.outsiders += 1;
                continue;
            }
            if votes.equivocators.contains(&a.identity) || votes.signed.get(&a.identity) == Some(&hash) {
                continue;
            }
            if a.verify(&hash).is_err() {
                report.bad_signatures += 1;
                continue;
            }
            if votes.signed.contains_key(&a.identity) {
                // A valid signature over a second record for this slot.
                votes.equivocators.insert(a.identity);
                for c in votes.candidates.values_mut() {
                    c.signers.remove(&a.identity);
                }
                report.faults.push(Fault::Equivocation { slot, identity: a.identity });
                continue;
            }
            votes.signed.insert(a.identity, hash);
            if let Some(c) = votes.candidates.get_mut(&hash) {
                c.signers.insert(a.identity);
            }
            report.new_signatures += 1;
        }
        self.advance(&mut report);
        while self.pending.len() > MAX_PENDING_SLOTS {
            self.pending.pop_last();
            report.dropped_pending += 1;
        }
        report
    }

    /// Accepts every record that now can be, lowest slot first.
    fn advance(&mut self, report: &mut Report) {
        let k = self.rules.quorum.threshold();
        loop {
            let mut chosen: Option<(u64, Hash)> = None;
            let mut new_faults = Vec::new();
            for (&slot, votes) in self.pending.iter_mut() {
                if self.faulted.contains(&slot) {
                    continue;
                }
                let mut quorate = votes.candidates.iter().filter(|(_, c)| c.signers.len() >= k).map(|(h, _)| *h);
                let hash = match (quorate.next(), quorate.next()) {
                    (None, _) => continue,
                    (Some(h), None) => h,
                    (Some(a), Some(b)) => {
                        new_faults.push((slot, [a, b]));
                        continue;
                    }
                };
                let Some(cand) = votes.candidates.get_mut(&hash) else { continue };
                let Some(tip) = self.tip else {
                    // Looking for the anchor: the lowest attested slot at or above the floor.
                    chosen = Some((slot, hash));
                    break;
                };
                let r = &cand.record;
                let extends = r.genesis_hash == self.rules.genesis_hash
                    && r.parent.is_some_and(|p| p.slot == tip.slot && p.record_hash == Some(tip.record_hash));
                if extends {
                    chosen = Some((slot, hash));
                    break;
                }
                let parent_slot = r.parent_slot();
                let chained = r.parent_record_hash().is_some();
                // A chained record whose parent lies above the tip may still chain once its
                // parent is accepted; anything else never will.
                let hopeless = !chained || parent_slot.is_none_or(|p| p <= tip.slot);
                if hopeless && !cand.reported_unchained {
                    cand.reported_unchained = true;
                    report.unchained.push(Unchained { slot, record_hash: hash, parent_slot, chained, tip_slot: tip.slot });
                }
            }
            for (slot, hashes) in new_faults {
                self.faulted.insert(slot);
                report.faults.push(Fault::Conflict { slot, hashes });
            }
            let Some((slot, hash)) = chosen else { return };
            let mut above = self.pending.split_off(&(slot + 1));
            std::mem::swap(&mut above, &mut self.pending);
            let Some(cand) = above.remove(&slot).and_then(|mut v| v.candidates.remove(&hash)) else { return };
            let anchor = self.tip.is_none();
            self.tip = Some(Tip { slot, record_hash: hash });
            self.history.insert(slot, hash);
            while self.history.len() > HISTORY {
                self.history.pop_first();
            }
            report.accepted.push(Accepted { record: cand.record, record_hash: hash, signers: cand.signers.into_iter().collect(), anchor });
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]
    use super::*;
    use aldb_verify::record::{attestation_message, Attestation, ParentLink};
    use ed25519_dalek::{Signer as _, SigningKey};

    const GENESIS: Hash = [7; 32];

    fn key(i: u8) -> SigningKey {
        SigningKey::from_bytes(&[i; 32])
    }

    fn sign(k: &SigningKey, h: &Hash) -> Attestation {
        Attestation { identity: k.verifying_key().to_bytes(), signature: k.sign(&attestation_message(h)).to_bytes() }
    }

    fn rules() -> Rules {
        let ids: Vec<[u8; 32]> = (1..=3).map(|i| key(i).verifying_key().to_bytes()).collect();
        Rules { quorum: Quorum::new(&ids, 2).expect("rule"), genesis_hash: GENESIS, commitment: Commitment::Finalized }
    }

    fn record(slot: u64, parent: Option<(u64, Option<Hash>)>, root: u8) -> RootRecord {
        RootRecord {
            genesis_hash: GENESIS,
            slot,
            parent: parent.map(|(slot, record_hash)| ParentLink { slot, record_hash, bank_hash: None }),
            commitment: Commitment::Finalized,
            state_root: [root; 32],
            block: None,
        }
    }

    fn attested(r: RootRecord, signers: &[u8]) -> AttestedRecord {
        let h = r.hash();
        AttestedRecord { record: r, record_hash: h, attestations: signers.iter().map(|&i| sign(&key(i), &h)).collect() }
    }

    /// An honest chain of records for slots `0..n`, root byte = slot.
    fn chain(n: u64) -> Vec<RootRecord> {
        let mut out: Vec<RootRecord> = Vec::new();
        for s in 0..n {
            let parent = out.last().map(|p| (p.slot, Some(p.hash())));
            out.push(record(s, parent, s as u8));
        }
        out
    }

    fn slots(reports: &[Report]) -> Vec<u64> {
        reports.iter().flat_map(|r| r.accepted.iter().map(|a| a.record.slot)).collect()
    }

    #[test]
    fn merges_attestations_across_endpoints_and_accepts_in_chain_order() {
        let c = chain(5);
        let mut a = Acceptor::new(rules(), Start::Anchor { from_slot: 1 });
        let mut reports = Vec::new();
        // Endpoint 1 runs ahead with identity 1; endpoint 2 follows with identity 2.
        for r in &c {
            reports.push(a.offer(&attested(*r, &[1])));
        }
        assert!(slots(&reports).is_empty(), "one signature is not a quorum");
        assert_eq!(reports[0].ignored, Some(Ignored::BeforeStart));
        for r in &c {
            reports.push(a.offer(&attested(*r, &[2])));
        }
        assert_eq!(slots(&reports), vec![1, 2, 3, 4]);
        assert!(reports.iter().flat_map(|r| &r.accepted).next().is_some_and(|x| x.anchor));
        assert_eq!(a.tip(), Some(Tip { slot: 4, record_hash: c[4].hash() }));
        // Repeats are stale; nothing is accepted twice.
        assert_eq!(a.offer(&attested(c[3], &[3])).ignored, Some(Ignored::Stale));
    }

    #[test]
    fn bad_signatures_outsiders_and_repeats_count_for_nothing() {
        let c = chain(2);
        let mut a = Acceptor::new(rules(), Start::Anchor { from_slot: 0 });
        let h = c[0].hash();
        let mut forged = sign(&key(2), &h);
        forged.signature[5] ^= 1;
        let rec = AttestedRecord {
            record: c[0],
            record_hash: h,
            attestations: vec![sign(&key(1), &h), sign(&key(1), &h), forged, sign(&key(9), &h)],
        };
        let r = a.offer(&rec);
        assert_eq!((r.bad_signatures, r.outsiders, r.new_signatures), (1, 1, 1));
        assert!(r.accepted.is_empty());
        // A signature by identity 2 over another hash is not a signature over this one.
        let wrong = AttestedRecord { attestations: vec![sign(&key(2), &[0; 32])], ..rec.clone() };
        assert_eq!(a.offer(&wrong).bad_signatures, 1);
        assert_eq!(a.offer(&attested(c[0], &[3])).accepted.len(), 1);
    }

    #[test]
    fn only_extends_the_chain() {
        let c = chain(3);
        let tip = Tip { slot: 0, record_hash: c[0].hash() };
        // A segment start right after the tip (CHAINED unset) is attested but refused.
        let mut a = Acceptor::new(rules(), Start::Cursor(tip));
        let seg = record(1, Some((0, None)), 1);
        let r = a.offer(&attested(seg, &[1, 2, 3]));
        assert!(r.accepted.is_empty());
        assert_eq!(r.unchained.len(), 1);
        assert!(!r.unchained[0].chained);
        // So is a record chained to some other parent record.
        let mut a = Acceptor::new(rules(), Start::Cursor(tip));
        let fork = record(1, Some((0, Some([9; 32]))), 1);
        let r = a.offer(&attested(fork, &[1, 2]));
        assert!(r.accepted.is_empty() && r.unchained.len() == 1);
        // And a record of another cluster, even with the right link.
        let mut other = c[1];
        other.genesis_hash = [8; 32];
        assert_eq!(a.offer(&attested(other, &[1, 2])).ignored, Some(Ignored::OtherCluster));
        // A child whose parent is not accepted yet waits without being reported.
        let mut a = Acceptor::new(rules(), Start::Cursor(tip));
        let r = a.offer(&attested(c[2], &[1, 2]));
        assert!(r.accepted.is_empty() && r.unchained.is_empty());
        let r = a.offer(&attested(c[1], &[2, 3]));
        assert_eq!(slots(&[r]), vec![1, 2]);
    }

    #[test]
    fn follows_skipped_slots_and_waits_for_late_parents() {
        // Slots 0, 2, 5: each chained to the previous.
        let r0 = record(0, None, 0);
        let r2 = record(2, Some((0, Some(r0.hash()))), 2);
        let r5 = record(5, Some((2, Some(r2.hash()))), 5);
        let mut a = Acceptor::new(rules(), Start::Anchor { from_slot: 0 });
        let mut reports = vec![a.offer(&attested(r0, &[1, 3]))];
        reports.push(a.offer(&attested(r5, &[1, 2])));
        reports.push(a.offer(&attested(r2, &[2])));
        assert_eq!(slots(&reports), vec![0]);
        reports.push(a.offer(&attested(r2, &[3])));
        assert_eq!(slots(&reports), vec![0, 2, 5]);
    }

    #[test]
    fn conflicting_attested_records_are_both_refused() {
        let c = chain(3);
        let tip = Tip { slot: 0, record_hash: c[0].hash() };
        let mut a = Acceptor::new(rules(), Start::Cursor(tip));
        let liar = record(1, Some((0, Some(c[0].hash()))), 99);
        // Identity 1 signs both: an equivocation, it stops counting at slot 1.
        assert!(a.offer(&attested(c[1], &[1])).accepted.is_empty());
        let r = a.offer(&attested(liar, &[1, 3]));
        assert_eq!(r.faults, vec![Fault::Equivocation { slot: 1, identity: key(1).verifying_key().to_bytes() }]);
        assert!(r.accepted.is_empty(), "identity 3 alone is not a quorum");
        let r = a.offer(&attested(c[1], &[2]));
        assert!(r.accepted.is_empty(), "identity 1 no longer counts for the honest record either");

        // Without equivocation: two disjoint quorums (impossible with 2 of 3 unless someone
        // equivocates, so use 1 of 3) both refused.
        let ids: Vec<[u8; 32]> = (1..=3).map(|i| key(i).verifying_key().to_bytes()).collect();
        let loose = Rules { quorum: Quorum::new(&ids, 1).expect("rule"), ..rules() };
        let mut a = Acceptor::new(loose, Start::Cursor(tip));
        let r = a.offer(&attested(c[2], &[1]));
        assert!(r.accepted.is_empty());
        let r = a.offer(&attested(liar, &[2]));
        assert!(r.accepted.iter().any(|x| x.record.slot == 1), "the first attested record is accepted at once");
        let r = a.offer(&attested(c[1], &[3]));
        assert_eq!(r.ignored, Some(Ignored::Stale));
        assert!(matches!(r.faults[..], [Fault::ConflictWithAccepted { slot: 1, .. }]));
    }

    #[test]
    fn conflict_found_in_one_offer_refuses_both() {
        let ids: Vec<[u8; 32]> = (1..=3).map(|i| key(i).verifying_key().to_bytes()).collect();
        let loose = Rules { quorum: Quorum::new(&ids, 1).expect("rule"), ..rules() };
        let mut a = Acceptor::new(loose, Start::Cursor(Tip { slot: 5, record_hash: [0; 32] }));
        // Two attested records for slot 6, neither chaining yet, then a third record: both
        // slot-6 records are quorate at once and the slot is faulted.
        let x = record(6, Some((5, Some([1; 32]))), 1);
        let y = record(6, Some((5, Some([2; 32]))), 2);
        a.offer(&attested(x, &[1]));
        let r = a.offer(&attested(y, &[2]));
        assert!(matches!(r.faults[..], [Fault::Conflict { slot: 6, .. }]));
        assert_eq!(a.offer(&attested(x, &[3])).ignored, Some(Ignored::Faulted));
    }

    #[test]
    fn lower_commitment_is_ignored() {
        let mut r = record(3, None, 3);
        r.commitment = Commitment::Confirmed;
        let mut a = Acceptor::new(rules(), Start::Anchor { from_slot: 0 });
        assert_eq!(a.offer(&attested(r, &[1, 2])).ignored, Some(Ignored::Commitment));
    }
}
