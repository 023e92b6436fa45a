//! Merging attestations and accepting records along one chain (`docs/SPEC.md` §9.4).
//!
//! [`Acceptor`] is pure logic, fed records as they arrive from any endpoint:
//!
//! - Only records at the configured commitment level count: each level is a chain of its own
//!   (§9.4: a `finalized` record links to the parent slot's `finalized` record), and a producer
//!   committing at `confirmed` logs both a `confirmed` and a `finalized` record for each rooted
//!   slot. Records of the other level are ignored ([`Ignored::Commitment`]).
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
//! - Memory is bounded whatever the endpoints send (see [`Acceptor`]): a record is held only
//!   once a configured identity's signature over it verifies, per slot at most
//!   [`MAX_CANDIDATES_PER_SLOT`] records, per identity at most [`IDENTITY_QUOTA`] signatures,
//!   and, once anchored, only slots inside the [`WINDOW`] above the tip.

use std::collections::{BTreeMap, BTreeSet};

use aldb_verify::record_json::AttestedRecord;
use aldb_verify::{Commitment, Hash, Quorum, RootRecord};

/// Accepted record hashes remembered below the tip, to recognise conflicting late records.
const HISTORY: usize = 4096;
/// Once a record is accepted, records are held only for slots below `next_slot + WINDOW`
/// (about 27 minutes of 400 ms slots): an honest endpoint further ahead waits for the chain to
/// catch up (the followers hold back), anything else that far ahead is dropped.
pub const WINDOW: u64 = 4096;
/// Different records held for one slot. Only records with a valid signature by a configured
/// identity are held, and each identity counts for one record per slot, so reaching this takes
/// sixteen configured identities signing sixteen different records for one slot.
pub const MAX_CANDIDATES_PER_SLOT: usize = 16;
/// Signatures one identity may have held at once. It binds only before the anchor is found
/// (afterwards the window allows fewer); past it, that identity's lowest-slot signature is
/// dropped, so a key that signs records for far-off slots only crowds out its own.
pub const IDENTITY_QUOTA: usize = WINDOW as usize;

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
    /// The commitment level whose chain is followed: records of the other level are ignored.
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

/// Why an offered record was dropped without being held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ignored {
    /// Its genesis hash is not the configured cluster's.
    OtherCluster,
    /// Of another commitment level than the configured one (another chain).
    Commitment,
    /// At or below the last accepted slot.
    Stale,
    /// Below the start slot while looking for the anchor.
    BeforeStart,
    /// Its slot is faulted (two attested records).
    Faulted,
    /// At or above [`Acceptor::window_end`].
    Ahead,
    /// Not held already, and no attestation by a configured identity newly verified over it.
    Unsigned,
    /// Its slot holds [`MAX_CANDIDATES_PER_SLOT`] records, none with fewer new signatures.
    SlotFull,
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
    /// Set when the record was dropped without being held.
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
    /// Held records dropped from a full slot for this one, which had more new signatures.
    pub displaced: usize,
    /// Held signatures dropped because their identity was over [`IDENTITY_QUOTA`].
    pub quota_evictions: usize,
    /// Held records dropped because an accepted record moved the window below their slot's
    /// (only when the anchor is found: the window exists from then on).
    pub window_pruned: usize,
    /// The lowest slot of a held record dropped by the window: whoever delivered it must
    /// deliver it again once the window reaches it.
    pub rewind_to: Option<u64>,
}

#[derive(Debug)]
struct Candidate {
    record: RootRecord,
    signers: BTreeSet<[u8; 32]>,
    reported_unchained: bool,
}

#[derive(Debug, Default)]
struct SlotVotes {
    /// Every record here has at least one signer.
    candidates: BTreeMap<Hash, Candidate>,
    /// The one hash each identity validly signed at this slot (kept when its signature is
    /// dropped, so a second record it signs is still an equivocation).
    signed: BTreeMap<[u8; 32], Hash>,
    equivocators: BTreeSet<[u8; 32]>,
}

/// Merges attestations and accepts records along one chain.
///
/// Memory is bounded whatever endpoints send: only records with a valid signature by a
/// configured identity are held; each identity counts for one record per slot; at most
/// [`MAX_CANDIDATES_PER_SLOT`] records per slot; slots only inside the window once anchored;
/// at most [`IDENTITY_QUOTA`] held signatures per identity before. Everything at or below an
/// accepted slot is released when it is accepted.
#[derive(Debug)]
pub struct Acceptor {
    rules: Rules,
    tip: Option<Tip>,
    floor: u64,
    pending: BTreeMap<u64, SlotVotes>,
    /// The slots where each identity has a held signature.
    by_identity: BTreeMap<[u8; 32], BTreeSet<u64>>,
    /// Records held, over all slots.
    candidates: usize,
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
        Self {
            rules,
            tip,
            floor,
            pending: BTreeMap::new(),
            by_identity: BTreeMap::new(),
            candidates: 0,
            history,
            faulted: BTreeSet::new(),
        }
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

    /// Records at or above this slot are dropped ([`Ignored::Ahead`]): `next_slot + WINDOW`
    /// once a record is accepted, `u64::MAX` while looking for the anchor (which may lie
    /// anywhere at or after the start slot).
    pub fn window_end(&self) -> u64 {
        match self.tip {
            Some(t) => t.slot.saturating_add(1).saturating_add(WINDOW),
            None => u64::MAX,
        }
    }

    /// Slots with conflicting attested records (at or above the next slot).
    pub fn faulted(&self) -> &BTreeSet<u64> {
        &self.faulted
    }

    /// Slots held above the tip, waiting.
    pub fn pending_slots(&self) -> usize {
        self.pending.len()
    }

    /// Different records held, over all slots.
    pub fn candidates(&self) -> usize {
        self.candidates
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
        if rec.record.commitment != self.rules.commitment {
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
        if slot >= self.window_end() {
            report.ignored = Some(Ignored::Ahead);
            return report;
        }
        if self.faulted.contains(&slot) {
            report.ignored = Some(Ignored::Faulted);
            return report;
        }
        // Verify before holding anything: a record nobody configured signed is never stored.
        let held = self.pending.get(&slot);
        let mut fresh: Vec<[u8; 32]> = Vec::new();
        let mut equivocating: Vec<[u8; 32]> = Vec::new();
        for a in &rec.attestations {
            if !self.rules.quorum.contains(&a.identity) {
                report.outsiders += 1;
                continue;
            }
            // One verification per identity per offer at most: a repeat cannot add anything.
            if fresh.contains(&a.identity) || equivocating.contains(&a.identity) {
                continue;
            }
            if held.is_some_and(|v| v.equivocators.contains(&a.identity) || v.signed.get(&a.identity) == Some(&hash)) {
                continue;
            }
            if a.verify(&hash).is_err() {
                report.bad_signatures += 1;
                continue;
            }
            if held.is_some_and(|v| v.signed.contains_key(&a.identity)) {
                equivocating.push(a.identity);
            } else {
                fresh.push(a.identity);
            }
        }
        for identity in equivocating {
            self.equivocate(slot, identity);
            report.faults.push(Fault::Equivocation { slot, identity });
        }
        let exists = self.pending.get(&slot).is_some_and(|v| v.candidates.contains_key(&hash));
        if fresh.is_empty() {
            // Nothing counts for more than before: equivocations only take signatures away.
            if !exists && report.faults.is_empty() {
                report.ignored = Some(Ignored::Unsigned);
            }
            return report;
        }
        if !exists && !self.make_room(slot, fresh.len(), &mut report) {
            report.ignored = Some(Ignored::SlotFull);
            return report;
        }
        let votes = self.pending.entry(slot).or_default();
        let cand = votes.candidates.entry(hash).or_insert_with(|| {
            self.candidates += 1;
            Candidate { record: rec.record, signers: BTreeSet::new(), reported_unchained: false }
        });
        for id in &fresh {
            cand.signers.insert(*id);
            votes.signed.insert(*id, hash);
            self.by_identity.entry(*id).or_default().insert(slot);
            report.new_signatures += 1;
        }
        for id in &fresh {
            while let Some(lowest) =
                self.by_identity.get(id).filter(|s| s.len() > IDENTITY_QUOTA).and_then(|s| s.first().copied())
            {
                self.drop_vote(lowest, id);
                report.quota_evictions += 1;
            }
        }
        self.advance(&mut report);
        report
    }

    /// Whether a new record with `signatures` new signatures may be held at `slot`; when the
    /// slot is full, the held record with the fewest signers goes if it has fewer than that.
    /// An incumbent is never displaced by an equal: otherwise identities signing records of
    /// their own could take turns pushing out the record the others are converging on.
    fn make_room(&mut self, slot: u64, signatures: usize, report: &mut Report) -> bool {
        let Some(votes) = self.pending.get_mut(&slot) else { return true };
        if votes.candidates.len() < MAX_CANDIDATES_PER_SLOT {
            return true;
        }
        let weakest = votes.candidates.iter().min_by_key(|(_, c)| c.signers.len()).map(|(h, c)| (*h, c.signers.len()));
        let Some((h, _)) = weakest.filter(|&(_, n)| n < signatures) else { return false };
        if let Some(c) = votes.candidates.remove(&h) {
            self.candidates -= 1;
            for id in &c.signers {
                if let Some(s) = self.by_identity.get_mut(id) {
                    s.remove(&slot);
                }
            }
        }
        report.displaced += 1;
        true
    }

    /// `identity` validly signed a second record at `slot`: it stops counting there.
    fn equivocate(&mut self, slot: u64, identity: [u8; 32]) {
        let Some(votes) = self.pending.get_mut(&slot) else { return };
        votes.equivocators.insert(identity);
        for c in votes.candidates.values_mut() {
            c.signers.remove(&identity);
        }
        if let Some(s) = self.by_identity.get_mut(&identity) {
            s.remove(&slot);
        }
        self.release_empty(slot);
    }

    /// Drops `identity`'s held signature at `slot` (its `signed` entry stays).
    fn drop_vote(&mut self, slot: u64, identity: &[u8; 32]) {
        if let Some(s) = self.by_identity.get_mut(identity) {
            s.remove(&slot);
        }
        let Some(votes) = self.pending.get_mut(&slot) else { return };
        for c in votes.candidates.values_mut() {
            c.signers.remove(identity);
        }
        self.release_empty(slot);
    }

    /// Removes the records at `slot` nobody signs any more, and the slot once none is left
    /// (forgetting its equivocators: keeping them would let one key pin any number of slots).
    fn release_empty(&mut self, slot: u64) {
        let Some(votes) = self.pending.get_mut(&slot) else { return };
        let before = votes.candidates.len();
        votes.candidates.retain(|_, c| !c.signers.is_empty());
        self.candidates -= before - votes.candidates.len();
        if votes.candidates.is_empty() {
            self.pending.remove(&slot);
        }
    }

    /// Releases the slots in `gone`; returns how many records they held.
    fn forget(&mut self, gone: BTreeMap<u64, SlotVotes>) -> usize {
        let mut records = 0;
        for (slot, votes) in gone {
            records += votes.candidates.len();
            for c in votes.candidates.values() {
                for id in &c.signers {
                    if let Some(s) = self.by_identity.get_mut(id) {
                        s.remove(&slot);
                    }
                }
            }
        }
        self.candidates -= records;
        records
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
                    report.unchained.push(Unchained {
                        slot,
                        record_hash: hash,
                        parent_slot,
                        chained,
                        tip_slot: tip.slot,
                    });
                }
            }
            for (slot, hashes) in new_faults {
                self.faulted.insert(slot);
                report.faults.push(Fault::Conflict { slot, hashes });
            }
            let Some((slot, hash)) = chosen else { return };
            let mut below = self.pending.split_off(&(slot + 1));
            std::mem::swap(&mut below, &mut self.pending);
            let Some((record, signers)) = below
                .get(&slot)
                .and_then(|v| v.candidates.get(&hash))
                .map(|c| (c.record, c.signers.iter().copied().collect()))
            else {
                return;
            };
            // Records of the accepted slot and of slots the chain skipped can never be accepted.
            self.forget(below);
            let anchor = self.tip.is_none();
            self.tip = Some(Tip { slot, record_hash: hash });
            self.history.insert(slot, hash);
            while self.history.len() > HISTORY {
                self.history.pop_first();
            }
            self.faulted = self.faulted.split_off(&(slot + 1));
            let end = self.window_end();
            if self.pending.last_key_value().is_some_and(|(s, _)| *s >= end) {
                // Only right after the anchor: before it there was no window.
                let beyond = self.pending.split_off(&end);
                if let Some((&lowest, _)) = beyond.first_key_value() {
                    report.rewind_to = Some(report.rewind_to.map_or(lowest, |r| r.min(lowest)));
                }
                report.window_pruned += self.forget(beyond);
            }
            report.accepted.push(Accepted { record, record_hash: hash, signers, anchor });
        }
    }

    /// Checks the bookkeeping against the held records (tests only).
    #[cfg(test)]
    fn check(&self) {
        let held: usize = self.pending.values().map(|v| v.candidates.len()).sum();
        assert_eq!(held, self.candidates, "candidate count");
        for (slot, v) in &self.pending {
            assert!(!v.candidates.is_empty(), "slot {slot} held with no record");
            assert!(v.candidates.len() <= MAX_CANDIDATES_PER_SLOT);
            assert!(*slot < self.window_end() || self.tip.is_none());
            for c in v.candidates.values() {
                assert!(!c.signers.is_empty());
                for id in &c.signers {
                    assert!(self.by_identity.get(id).is_some_and(|s| s.contains(slot)), "index lacks a signature");
                }
            }
        }
        for (id, slots) in &self.by_identity {
            assert!(slots.len() <= IDENTITY_QUOTA);
            for s in slots {
                assert!(
                    self.pending.get(s).is_some_and(|v| v.candidates.values().any(|c| c.signers.contains(id))),
                    "stale index"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]
    use super::*;
    use aldb_verify::record::{Attestation, ParentLink, attestation_message};
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
            bank_hash: None,
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

    /// A rule over `n` identities (keys 1..=n) needing `k`.
    fn rules_of(n: u8, k: usize) -> Rules {
        let ids: Vec<[u8; 32]> = (1..=n).map(|i| key(i).verifying_key().to_bytes()).collect();
        Rules { quorum: Quorum::new(&ids, k).expect("rule"), ..rules() }
    }

    #[test]
    fn records_nobody_configured_signed_are_never_held() {
        let c = chain(40);
        let mut a = Acceptor::new(rules(), Start::Anchor { from_slot: 0 });
        // Fixed-seed junk: unsigned, signed by outsiders, forged in a configured name, for
        // slots anywhere (the anchor search has no window yet).
        let mut rng = 0x2545_f491_4f6c_dd1d_u64;
        for i in 0..5000u64 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let junk = record(rng % 1_000_000, None, (i % 251) as u8);
            let h = junk.hash();
            let mut forged = sign(&key(1), &h);
            forged.signature[7] ^= 0x40;
            let attestations = match i % 3 {
                0 => vec![],
                1 => vec![sign(&key(9), &h), sign(&key(10), &h)],
                _ => vec![forged],
            };
            let r = a.offer(&AttestedRecord { record: junk, record_hash: h, attestations });
            assert_eq!(r.ignored, Some(Ignored::Unsigned));
        }
        a.check();
        assert_eq!((a.candidates(), a.pending_slots()), (0, 0));
        let mut accepted = Vec::new();
        for r in &c {
            accepted.extend(a.offer(&attested(*r, &[1, 3])).accepted);
        }
        assert_eq!(accepted.len(), 40);
        a.check();
        assert_eq!((a.candidates(), a.pending_slots()), (0, 0), "accepted slots are released");
    }

    #[test]
    fn a_full_slot_keeps_its_best_signed_records() {
        // 20 identities, 11 needed: identities 1..=16 each sign a record of their own for
        // slot 1, filling it.
        let mut a = Acceptor::new(rules_of(20, 11), Start::Cursor(Tip { slot: 0, record_hash: [0; 32] }));
        let own = |i: u8| record(1, Some((0, Some([0; 32]))), 100 + i);
        for i in 1..=16u8 {
            assert_eq!(a.offer(&attested(own(i), &[i])).ignored, None);
        }
        assert_eq!(a.candidates(), MAX_CANDIDATES_PER_SLOT);
        // A seventeenth record with one signature does not push out an equal.
        let r = a.offer(&attested(own(17), &[17]));
        assert_eq!((r.ignored, r.displaced), (Some(Ignored::SlotFull), 0));
        // One with two new signatures displaces a record signed once.
        let honest = record(1, Some((0, Some([0; 32]))), 1);
        let r = a.offer(&attested(honest, &[18, 19]));
        assert_eq!((r.ignored, r.displaced), (None, 1));
        a.check();
        assert_eq!(a.candidates(), MAX_CANDIDATES_PER_SLOT);
        // Signers of the displaced record cannot sign it back in, nor sign another without
        // equivocating; the honest record keeps gathering signatures from others.
        let r = a.offer(&attested(honest, &[20]));
        assert_eq!(r.new_signatures, 1);
        a.check();
    }

    #[test]
    fn records_beyond_the_window_are_dropped_and_slots_released_on_acceptance() {
        let c = chain(3);
        let mut a = Acceptor::new(rules(), Start::Cursor(Tip { slot: 0, record_hash: c[0].hash() }));
        assert_eq!(a.window_end(), 1 + WINDOW);
        let far = record(WINDOW + 1, Some((WINDOW, Some([1; 32]))), 1);
        assert_eq!(a.offer(&attested(far, &[1])).ignored, Some(Ignored::Ahead));
        let edge = record(WINDOW, Some((WINDOW - 1, Some([1; 32]))), 1);
        assert_eq!(a.offer(&attested(edge, &[1])).ignored, None);
        assert_eq!((a.candidates(), a.pending_slots()), (1, 1));
        assert_eq!(a.offer(&attested(c[1], &[1, 2])).accepted.len(), 1);
        assert_eq!(a.window_end(), 2 + WINDOW);
        assert_eq!(a.offer(&attested(far, &[2])).ignored, None, "the window moved");
        a.check();
    }

    #[test]
    fn before_the_anchor_one_identity_holds_at_most_its_quota_and_the_anchor_prunes_the_rest() {
        let extra = 100usize;
        let c = chain(IDENTITY_QUOTA as u64 + extra as u64 + 10);
        let mut a = Acceptor::new(rules(), Start::Anchor { from_slot: 0 });
        // Identity 1 runs far ahead alone: only its highest IDENTITY_QUOTA signatures stay.
        let mut evicted = 0;
        for r in &c[..IDENTITY_QUOTA + extra] {
            evicted += a.offer(&attested(*r, &[1])).quota_evictions;
        }
        assert_eq!(evicted, extra);
        assert_eq!(a.candidates(), IDENTITY_QUOTA);
        a.check();
        // Identity 2 starts at the beginning: the anchor is the lowest slot both still hold.
        let mut accepted = Vec::new();
        let mut rewind = None;
        let mut pruned = 0;
        for r in &c {
            let rep = a.offer(&attested(*r, &[2]));
            rewind = rewind.or(rep.rewind_to);
            pruned += rep.window_pruned;
            accepted.extend(rep.accepted.into_iter().map(|x| (x.record.slot, x.anchor)));
            a.check();
        }
        assert_eq!(accepted.first(), Some(&(extra as u64, true)));
        // Identity 1 held exactly a window's worth above the anchor: nothing to prune.
        assert_eq!((pruned, rewind), (0, None));
        assert_eq!(accepted.len(), IDENTITY_QUOTA);
        // An anchor further below: identity 1's signatures past the anchor's window are dropped,
        // and whoever delivered them is asked to deliver them again.
        let mut b = Acceptor::new(rules(), Start::Anchor { from_slot: 0 });
        for r in &c[10..10 + IDENTITY_QUOTA] {
            b.offer(&attested(*r, &[1]));
        }
        let rep = b.offer(&attested(c[0], &[2, 3]));
        assert_eq!(rep.accepted.len(), 1);
        assert_eq!(rep.rewind_to, Some(1 + WINDOW));
        assert_eq!(rep.window_pruned, 10 + IDENTITY_QUOTA - 1 - WINDOW as usize);
        b.check();
    }

    #[test]
    fn an_equivocating_key_cannot_pin_records() {
        let c = chain(2);
        let mut a = Acceptor::new(rules(), Start::Cursor(Tip { slot: 0, record_hash: c[0].hash() }));
        for i in 0..200u8 {
            let other = record(1, Some((0, Some(c[0].hash()))), i);
            a.offer(&attested(other, &[3]));
            a.check();
            assert!(a.candidates() <= 1, "an equivocator holds nothing for long");
        }
        assert_eq!(a.offer(&attested(c[1], &[1, 2])).accepted.len(), 1);
        a.check();
        assert_eq!(a.candidates(), 0);
    }

    #[test]
    fn only_the_configured_levels_chain_counts() {
        let mut r = record(3, None, 3);
        r.commitment = Commitment::Confirmed;
        let mut a = Acceptor::new(rules(), Start::Anchor { from_slot: 0 });
        assert_eq!(a.offer(&attested(r, &[1, 2])).ignored, Some(Ignored::Commitment));
        // A relayer following `confirmed` ignores the finalized records of the same slots, which
        // would otherwise be a second attested record per slot (a conflict).
        let mut confirmed = rules();
        confirmed.commitment = Commitment::Confirmed;
        let mut a = Acceptor::new(confirmed, Start::Anchor { from_slot: 0 });
        assert_eq!(a.offer(&attested(record(3, None, 3), &[1, 2])).ignored, Some(Ignored::Commitment));
        assert_eq!(a.offer(&attested(r, &[1, 2])).accepted.len(), 1);
        assert_eq!(a.faulted().len(), 0);
    }
}
