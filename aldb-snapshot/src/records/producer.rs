//! Building, chaining, signing and logging root records: at most one per slot and commitment
//! level.
//!
//! Each level has a chain of its own (`docs/SPEC.md` §9.4): a `finalized` record links to the
//! parent slot's `finalized` record, a `confirmed` one to the parent's `confirmed` record. A
//! relayer follows one level and never needs a record of the other to check a link.

use std::collections::BTreeMap;
use std::path::Path;

use aldb_format::records::LoggedRecord;
use aldb_verify::Hash;
use aldb_verify::record::{Attestation, BlockInfo, Commitment, ParentLink, RootRecord};

use super::writer::RecordLogWriter;
use super::{RecordsError, Signer};

/// Record hashes remembered for chaining: far more than any gap between a slot and its parent.
const RECENT: usize = 4096;

/// What the committer knows about a slot when it commits it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordInput {
    /// The committed slot.
    pub slot: u64,
    /// Its parent, unless genesis or the first slot after a snapshot start.
    pub parent: Option<u64>,
    /// The level of the record: the level the slot was committed at, or `Finalized` for a slot
    /// committed at `Confirmed` and rooted since.
    pub commitment: Commitment,
    /// Its state root.
    pub state_root: Hash,
    /// Its block, if the metadata arrived before the commit.
    pub block: Option<BlockInfo>,
    /// The parent's bank hash from this slot's SlotHashes write, if seen.
    pub parent_bank_hash: Option<Hash>,
    /// The slot's own bank hash, if the committer has it: from the block metadata of a validator
    /// that reports it, or from the bank itself in process. The record then carries it
    /// (`SLOT_BANK_HASH`, `docs/SPEC.md` §9.1), tying the attested root to the hash validators
    /// vote on. `None` makes the same 187-byte record as before the flag existed.
    pub bank_hash: Option<Hash>,
}

/// One level's chain: the newest record hashes and the newest slot logged.
#[derive(Debug, Default)]
struct Chain {
    /// Record hash by slot, for the newest [`RECENT`] records of the level.
    recent: BTreeMap<u64, Hash>,
    last_slot: Option<u64>,
}

impl Chain {
    fn remember(&mut self, slot: u64, hash: Hash) {
        self.recent.insert(slot, hash);
        while self.recent.len() > RECENT {
            self.recent.pop_first();
        }
        self.last_slot = Some(self.last_slot.map_or(slot, |l| l.max(slot)));
    }
}

/// Produces the record chains of one producer (one validator, one snapshot directory): one
/// chain per commitment level, in one log.
#[derive(Debug)]
pub struct RecordProducer {
    log: RecordLogWriter,
    genesis_hash: Hash,
    signer: Option<Signer>,
    confirmed: Chain,
    finalized: Chain,
}

impl RecordProducer {
    /// Opens the log under `snapshot_dir` and resumes its chain. Fails if the log holds records
    /// of another cluster.
    pub fn open(snapshot_dir: &Path, genesis_hash: Hash, signer: Option<Signer>) -> Result<Self, RecordsError> {
        let (log, logged) = RecordLogWriter::open(snapshot_dir)?;
        if let Some(other) = logged.iter().find(|r| r.record.genesis_hash != genesis_hash) {
            return Err(RecordsError::OtherCluster {
                expected: bs58::encode(genesis_hash).into_string(),
                found: bs58::encode(other.record.genesis_hash).into_string(),
            });
        }
        let mut p = Self { log, genesis_hash, signer, confirmed: Chain::default(), finalized: Chain::default() };
        for r in &logged {
            p.chain(r.record.commitment).remember(r.record.slot, r.record_hash);
        }
        Ok(p)
    }

    fn chain(&mut self, level: Commitment) -> &mut Chain {
        match level {
            Commitment::Finalized => &mut self.finalized,
            // `Commitment` is non-exhaustive; anything else is the weaker level.
            _ => &mut self.confirmed,
        }
    }

    /// The signer's identity, if records are signed.
    pub fn identity(&self) -> Option<[u8; 32]> {
        self.signer.as_ref().map(Signer::identity)
    }

    /// The newest logged slot, at either level.
    pub fn last_slot(&self) -> Option<u64> {
        self.confirmed.last_slot.max(self.finalized.last_slot)
    }

    /// The newest slot logged at `level`.
    pub fn last_slot_at(&self, level: Commitment) -> Option<u64> {
        match level {
            Commitment::Finalized => self.finalized.last_slot,
            _ => self.confirmed.last_slot,
        }
    }

    /// Builds the slot's record at `input.commitment`, chains it to the parent slot's record of
    /// the same level when that is logged, signs it, and appends it durably. Returns `None`
    /// without writing anything for a slot at or below the newest one logged at that level:
    /// after a restart the validator commits replayed slots again, and a producer never signs a
    /// second record for one slot and level.
    pub fn produce(&mut self, input: RecordInput) -> Result<Option<LoggedRecord>, RecordsError> {
        let chain = self.chain(input.commitment);
        if chain.last_slot.is_some_and(|last| input.slot <= last) {
            return Ok(None);
        }
        // A parent at or above the slot cannot be expressed; treat it as unknown.
        let parent = input.parent.filter(|&p| p < input.slot).map(|p| ParentLink {
            slot: p,
            record_hash: chain.recent.get(&p).copied(),
            bank_hash: input.parent_bank_hash,
        });
        let record = RootRecord {
            genesis_hash: self.genesis_hash,
            slot: input.slot,
            parent,
            commitment: input.commitment,
            state_root: input.state_root,
            block: input.block,
            bank_hash: input.bank_hash,
        };
        let record_hash = record.hash();
        let attestations: Vec<Attestation> = self.signer.iter().map(|s| s.attest(&record_hash)).collect();
        let logged = LoggedRecord { record, record_hash, attestations };
        self.log.append(&logged)?;
        self.chain(input.commitment).remember(input.slot, record_hash);
        Ok(Some(logged))
    }

    /// Deletes log segments holding only records below `slot`.
    pub fn prune_before(&mut self, slot: u64) -> Result<usize, RecordsError> {
        self.log.prune_before(slot)
    }

    /// [`prune_before`](Self::prune_before), keeping every segment the archive may still lack
    /// (`RecordLogWriter::prune_before_held`: the shipper's `shipped-records.slot`, nothing while
    /// it is absent).
    pub fn prune_before_held(&mut self, slot: u64) -> Result<usize, RecordsError> {
        self.log.prune_before_held(slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aldb_format::records::RecordLogReader;

    fn input(slot: u64, parent: Option<u64>) -> RecordInput {
        RecordInput {
            slot,
            parent,
            commitment: Commitment::Confirmed,
            state_root: [slot as u8; 32],
            block: Some(BlockInfo { blockhash: [9; 32], block_height: slot }),
            parent_bank_hash: Some([8; 32]),
            bank_hash: None,
        }
    }

    #[test]
    fn chains_signs_resumes_and_never_signs_a_slot_twice() {
        let dir = tempfile::tempdir().expect("tempdir");
        let genesis = [5; 32];
        let mut p = RecordProducer::open(dir.path(), genesis, Some(Signer::from_seed(&[1; 32]))).expect("open");
        let r0 = p.produce(input(0, None)).expect("produce").expect("new slot");
        let r1 = p.produce(input(1, Some(0))).expect("produce").expect("new slot");
        let r3 = p.produce(input(3, Some(1))).expect("produce").expect("new slot");
        assert!(r1.record.extends(&r0.record, &r0.record_hash));
        assert!(r3.record.extends(&r1.record, &r1.record_hash));
        assert_eq!(r3.attestations[0].verify(&r3.record_hash), Ok(()));
        drop(p);

        // Restarted: replayed slots are not signed again, the chain continues from the log.
        let mut p = RecordProducer::open(dir.path(), genesis, Some(Signer::from_seed(&[1; 32]))).expect("reopen");
        assert_eq!(p.produce(input(3, Some(1))).expect("produce"), None);
        let r4 = p.produce(input(4, Some(3))).expect("produce").expect("new slot");
        assert!(r4.record.extends(&r3.record, &r3.record_hash));
        // A parent this producer never logged: a new chain segment.
        let r9 = p.produce(input(9, Some(7))).expect("produce").expect("new slot");
        assert_eq!(r9.record.parent_record_hash(), None);
        drop(p);

        let mut reader = RecordLogReader::new(dir.path());
        let all = reader.refresh().expect("refresh");
        assert_eq!(all.iter().map(|r| r.record.slot).collect::<Vec<_>>(), vec![0, 1, 3, 4, 9]);
        assert!(matches!(RecordProducer::open(dir.path(), [6; 32], None), Err(RecordsError::OtherCluster { .. })));
    }

    #[test]
    fn the_slot_bank_hash_is_signed_logged_and_read_back_beside_records_without_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut p = RecordProducer::open(dir.path(), [5; 32], Some(Signer::from_seed(&[1; 32]))).expect("open");
        let r0 = p.produce(input(0, None)).expect("produce").expect("new slot");
        let with = |slot, parent, h| RecordInput { bank_hash: Some(h), ..input(slot, parent) };
        let r1 = p.produce(with(1, Some(0), [0xb1; 32])).expect("produce").expect("new slot");
        let r2 = p.produce(input(2, Some(1))).expect("produce").expect("new slot");
        let r3 = p.produce(with(3, Some(2), [0xb3; 32])).expect("produce").expect("new slot");
        assert_eq!(r0.record.encode().len(), 187, "no bank hash: the record of before the flag");
        assert_eq!(r1.record.encode().len(), 219);
        assert_eq!(r1.record.bank_hash, Some([0xb1; 32]));
        assert!(r2.record.extends(&r1.record, &r1.record_hash), "a record without it chains to one with it");
        assert!(r3.record.extends(&r2.record, &r2.record_hash));
        assert_eq!(r3.attestations[0].verify(&r3.record_hash), Ok(()));
        drop(p);

        // Both lengths read back from the log, and the chain resumes after the longer record.
        let all = RecordLogReader::new(dir.path()).refresh().expect("refresh");
        assert_eq!(all, vec![r0, r1, r2, r3.clone()]);
        let mut p = RecordProducer::open(dir.path(), [5; 32], Some(Signer::from_seed(&[1; 32]))).expect("reopen");
        let r4 = p.produce(input(4, Some(3))).expect("produce").expect("new slot");
        assert!(r4.record.extends(&r3.record, &r3.record_hash));
    }

    fn at(slot: u64, parent: Option<u64>, level: Commitment) -> RecordInput {
        RecordInput { commitment: level, ..input(slot, parent) }
    }

    #[test]
    fn each_level_has_its_own_chain_and_a_restart_signs_no_slot_and_level_twice() {
        use Commitment::{Confirmed, Finalized};
        let dir = tempfile::tempdir().expect("tempdir");
        let genesis = [5; 32];
        let signer = || Some(Signer::from_seed(&[1; 32]));
        let mut p = RecordProducer::open(dir.path(), genesis, signer()).expect("open");
        // Slots commit at `confirmed` and are rooted a little later, in the order a validator
        // reports them: the two levels interleave in the log.
        let c0 = p.produce(at(0, None, Confirmed)).expect("produce").expect("new");
        let c1 = p.produce(at(1, Some(0), Confirmed)).expect("produce").expect("new");
        let f0 = p.produce(at(0, None, Finalized)).expect("produce").expect("new");
        let c2 = p.produce(at(2, Some(1), Confirmed)).expect("produce").expect("new");
        let f1 = p.produce(at(1, Some(0), Finalized)).expect("produce").expect("new");
        assert_ne!(c0.record_hash, f0.record_hash, "one record per level, differing in the level only");
        assert_eq!((c0.record.state_root, c0.record.slot), (f0.record.state_root, f0.record.slot));
        assert!(c1.record.extends(&c0.record, &c0.record_hash));
        assert!(c2.record.extends(&c1.record, &c1.record_hash));
        assert!(f1.record.extends(&f0.record, &f0.record_hash), "a finalized record links to the finalized parent");
        assert!(!f1.record.extends(&c0.record, &c0.record_hash));
        assert_eq!(f1.attestations[0].verify(&f1.record_hash), Ok(()));
        // Again at either level: nothing.
        assert_eq!(p.produce(at(1, Some(0), Finalized)).expect("produce"), None);
        assert_eq!(p.produce(at(2, Some(1), Confirmed)).expect("produce"), None);
        assert_eq!((p.last_slot_at(Confirmed), p.last_slot_at(Finalized), p.last_slot()), (Some(2), Some(1), Some(2)));
        drop(p);

        // Restarted: neither level signs a slot again, and both chains go on from the log.
        let mut p = RecordProducer::open(dir.path(), genesis, signer()).expect("reopen");
        assert_eq!((p.last_slot_at(Confirmed), p.last_slot_at(Finalized)), (Some(2), Some(1)));
        for (slot, parent) in [(0, None), (1, Some(0))] {
            assert_eq!(p.produce(at(slot, parent, Finalized)).expect("produce"), None, "finalized {slot}");
        }
        assert_eq!(p.produce(at(2, Some(1), Confirmed)).expect("produce"), None);
        let f2 = p.produce(at(2, Some(1), Finalized)).expect("produce").expect("new");
        let c3 = p.produce(at(3, Some(2), Confirmed)).expect("produce").expect("new");
        assert!(f2.record.extends(&f1.record, &f1.record_hash));
        assert!(c3.record.extends(&c2.record, &c2.record_hash));
        drop(p);

        let all = RecordLogReader::new(dir.path()).refresh().expect("refresh");
        let got: Vec<(u64, Commitment)> = all.iter().map(|r| (r.record.slot, r.record.commitment)).collect();
        assert_eq!(
            got,
            [
                (0, Confirmed),
                (1, Confirmed),
                (0, Finalized),
                (2, Confirmed),
                (1, Finalized),
                (2, Finalized),
                (3, Confirmed)
            ]
        );
    }
}
