//! Building, chaining, signing and logging one record per committed slot.

use std::collections::BTreeMap;
use std::path::Path;

use aldb_verify::record::{Attestation, BlockInfo, Commitment, ParentLink, RootRecord};
use aldb_verify::Hash;

use super::log::{LoggedRecord, RecordLogWriter};
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
    /// The level it was committed at.
    pub commitment: Commitment,
    /// Its state root.
    pub state_root: Hash,
    /// Its block, if the metadata arrived before the commit.
    pub block: Option<BlockInfo>,
    /// The parent's bank hash from this slot's SlotHashes write, if seen.
    pub parent_bank_hash: Option<Hash>,
}

/// Produces the record chain of one producer (one validator, one snapshot directory).
#[derive(Debug)]
pub struct RecordProducer {
    log: RecordLogWriter,
    genesis_hash: Hash,
    signer: Option<Signer>,
    /// Record hash by slot, for the newest [`RECENT`] records.
    recent: BTreeMap<u64, Hash>,
    last_slot: Option<u64>,
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
        let mut p = Self { log, genesis_hash, signer, recent: BTreeMap::new(), last_slot: None };
        for r in &logged {
            p.remember(r.record.slot, r.record_hash);
        }
        Ok(p)
    }

    fn remember(&mut self, slot: u64, hash: Hash) {
        self.recent.insert(slot, hash);
        while self.recent.len() > RECENT {
            self.recent.pop_first();
        }
        self.last_slot = Some(self.last_slot.map_or(slot, |l| l.max(slot)));
    }

    /// The signer's identity, if records are signed.
    pub fn identity(&self) -> Option<[u8; 32]> {
        self.signer.as_ref().map(Signer::identity)
    }

    /// The newest logged slot.
    pub fn last_slot(&self) -> Option<u64> {
        self.last_slot
    }

    /// Builds the slot's record, chains it to the parent's record when that is logged, signs
    /// it, and appends it durably. Returns `None` without writing anything for a slot at or
    /// below the newest logged one: after a restart the validator commits replayed slots again,
    /// and a producer never signs a second record for a slot.
    pub fn produce(&mut self, input: RecordInput) -> Result<Option<LoggedRecord>, RecordsError> {
        if self.last_slot.is_some_and(|last| input.slot <= last) {
            return Ok(None);
        }
        // A parent at or above the slot cannot be expressed; treat it as unknown.
        let parent = input.parent.filter(|&p| p < input.slot).map(|p| ParentLink {
            slot: p,
            record_hash: self.recent.get(&p).copied(),
            bank_hash: input.parent_bank_hash,
        });
        let record = RootRecord {
            genesis_hash: self.genesis_hash,
            slot: input.slot,
            parent,
            commitment: input.commitment,
            state_root: input.state_root,
            block: input.block,
        };
        let record_hash = record.hash();
        let attestations: Vec<Attestation> = self.signer.iter().map(|s| s.attest(&record_hash)).collect();
        let logged = LoggedRecord { record, record_hash, attestations };
        self.log.append(&logged)?;
        self.remember(input.slot, record_hash);
        Ok(Some(logged))
    }

    /// Deletes log segments holding only records below `slot`.
    pub fn prune_before(&mut self, slot: u64) -> Result<usize, RecordsError> {
        self.log.prune_before(slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::RecordLogReader;

    fn input(slot: u64, parent: Option<u64>) -> RecordInput {
        RecordInput {
            slot,
            parent,
            commitment: Commitment::Confirmed,
            state_root: [slot as u8; 32],
            block: Some(BlockInfo { blockhash: [9; 32], block_height: slot }),
            parent_bank_hash: Some([8; 32]),
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
}
