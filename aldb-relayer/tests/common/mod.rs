//! Shared by the relayer's integration tests: record logs written by honest and lying producers
//! (fixed seeds), feed servers on loopback ephemeral ports, and the relayer's config.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code, unreachable_pub, missing_docs)]

pub mod feed;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use aldb_snapshot::records::{LoggedRecord, RecordInput, RecordLogWriter, RecordProducer, Signer};
use aldb_verify::record::{Attestation, ParentLink};
use aldb_verify::{Commitment, Hash, hash_to_base58};

pub const GENESIS: Hash = [0x47; 32];
pub const OTHER_GENESIS: Hash = [0x48; 32];

pub fn signer(i: u8) -> Signer {
    Signer::from_seed(&[i; 32])
}

/// The honest root of a slot.
pub fn honest_root(slot: u64) -> Hash {
    let mut h = [0u8; 32];
    h[..8].copy_from_slice(&slot.to_le_bytes());
    h[8..16].copy_from_slice(&0x5eed_u64.to_le_bytes());
    h
}

/// Whether the cluster produced a block in `slot` (some slots are skipped).
pub fn produced(slot: u64) -> bool {
    slot % 7 != 3
}

/// How one snapshot directory's records are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The honest chain, signed by the given key.
    Honest(u8),
    /// Its own chain with different roots, validly signed by the given key.
    Liar(u8),
    /// The honest records with a corrupted signature claiming the given key's identity.
    BadSignature(u8),
    /// Honest roots, validly signed, but chained to a wrong parent record hash.
    BrokenChain(u8),
    /// The honest workload for another cluster, validly signed.
    OtherGenesis(u8),
}

/// One producer's directory and how to extend it.
pub struct Producer {
    pub kind: Kind,
    pub dir: PathBuf,
    inner: Inner,
}

enum Inner {
    Producer(RecordProducer),
    Raw(RecordLogWriter, Signer),
}

impl Producer {
    pub fn new(kind: Kind, dir: &Path) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        let inner = match kind {
            Kind::Honest(k) | Kind::Liar(k) => {
                Inner::Producer(RecordProducer::open(dir, GENESIS, Some(signer(k))).unwrap())
            }
            Kind::OtherGenesis(k) => {
                Inner::Producer(RecordProducer::open(dir, OTHER_GENESIS, Some(signer(k))).unwrap())
            }
            Kind::BadSignature(k) | Kind::BrokenChain(k) => {
                Inner::Raw(RecordLogWriter::open(dir).unwrap().0, signer(k))
            }
        };
        Self { kind, dir: dir.to_path_buf(), inner }
    }

    /// Appends the record of `slot` (child of `parent`). `honest` is the honest record of the
    /// slot, from which the raw kinds derive theirs.
    pub fn produce(&mut self, slot: u64, parent: Option<u64>, honest: &LoggedRecord) {
        let root = match self.kind {
            Kind::Liar(_) => {
                let mut r = honest_root(slot);
                r[31] = 0xff;
                r
            }
            _ => honest_root(slot),
        };
        match &mut self.inner {
            Inner::Producer(p) => {
                p.produce(input(slot, parent, root)).unwrap();
            }
            Inner::Raw(w, s) => {
                let mut record = honest.record;
                let attestations = match self.kind {
                    Kind::BadSignature(_) => {
                        let mut a: Attestation = s.attest(&honest.record_hash);
                        a.signature[40] ^= 0x01;
                        vec![a]
                    }
                    _ => {
                        if let Some(p) = &mut record.parent {
                            *p = ParentLink { record_hash: Some([0xbb; 32]), ..*p };
                        }
                        vec![s.attest(&record.hash())]
                    }
                };
                w.append(&LoggedRecord { record_hash: record.hash(), record, attestations }).unwrap();
            }
        }
    }
}

pub fn input(slot: u64, parent: Option<u64>, root: Hash) -> RecordInput {
    RecordInput {
        slot,
        parent,
        commitment: Commitment::Finalized,
        state_root: root,
        block: None,
        parent_bank_hash: None,
        bank_hash: slot_bank_hash(slot, root),
    }
}

/// The slot's own bank hash as every honest producer reports it: for every third slot only, so
/// the chain mixes records with it (219 bytes) and without it (187).
pub fn slot_bank_hash(slot: u64, root: Hash) -> Option<Hash> {
    slot.is_multiple_of(3).then(|| {
        let mut h = root;
        h[0] ^= 0xba;
        h
    })
}

/// Writes the honest chain into `dirs` (each with its own producer) slot by slot; the first
/// producer's record is the honest record the raw kinds derive from.
pub struct Cluster {
    pub honest: RecordProducer,
    pub producers: Vec<Producer>,
    pub last: Option<u64>,
    pub next: u64,
    pub roots: BTreeMap<u64, Hash>,
    pub record_hashes: BTreeMap<u64, Hash>,
}

impl Cluster {
    /// `honest_dir` gets the reference chain (signed by key 200, not configured).
    pub fn new(reference_dir: &Path, producers: Vec<Producer>) -> Self {
        let honest = RecordProducer::open(reference_dir, GENESIS, Some(signer(200))).unwrap();
        Self { honest, producers, last: None, next: 0, roots: BTreeMap::new(), record_hashes: BTreeMap::new() }
    }

    /// Produces the next slot that has a block; returns it.
    pub fn step(&mut self) -> u64 {
        while !produced(self.next) {
            self.next += 1;
        }
        let slot = self.next;
        self.next += 1;
        let parent = self.last;
        let rec = self.honest.produce(input(slot, parent, honest_root(slot))).unwrap().unwrap();
        for p in &mut self.producers {
            p.produce(slot, parent, &rec);
        }
        self.last = Some(slot);
        self.roots.insert(slot, honest_root(slot));
        self.record_hashes.insert(slot, rec.record_hash);
        slot
    }
}

pub fn b58(h: &Hash) -> String {
    hash_to_base58(h)
}

/// The relayer's config text.
pub fn config_text(endpoints: &[String], ids: &[u8], threshold: usize, dir: &Path, start_slot: u64) -> String {
    let ids: Vec<String> = ids.iter().map(|&i| format!("\"{}\"", b58(&signer(i).identity()))).collect();
    let eps: Vec<String> = endpoints.iter().map(|e| format!("\"{e}\"")).collect();
    format!(
        r#"{{
  endpoints: [{}],
  identities: [{}],
  threshold: {threshold},
  genesis_hash: "{}",
  commitment: "finalized",
  cursor_file: "{}",
  output_file: "{}",
  start_slot: {start_slot},
  reconnect: {{ initial_ms: 20, max_ms: 200 }},
}}"#,
        eps.join(", "),
        ids.join(", "),
        b58(&GENESIS),
        dir.join("cursor").display(),
        dir.join("roots.txt").display(),
    )
}

/// Lines of the output file, parsed.
pub fn output(dir: &Path) -> Vec<(u64, Hash)> {
    match std::fs::read_to_string(dir.join("roots.txt")) {
        // Only complete lines: a torn last line is not (yet) output.
        Ok(t) => t
            .split_inclusive('\n')
            .filter(|l| l.ends_with('\n'))
            .map(|l| l.trim_end())
            .map(|l| {
                let (s, r) = l.split_once(' ').unwrap();
                (s.parse().unwrap(), aldb_verify::hash_from_base58(r).unwrap())
            })
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Waits until the output's last slot is `slot`; panics after `timeout`.
pub fn wait_for_output(dir: &Path, slot: u64, timeout: Duration) -> Vec<(u64, Hash)> {
    let t = Instant::now();
    loop {
        let out = output(dir);
        if out.last().is_some_and(|(s, _)| *s >= slot) {
            return out;
        }
        assert!(t.elapsed() < timeout, "output reached {:?}, waiting for slot {slot}", out.last().map(|l| l.0));
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Asserts the output is exactly the honest roots of every produced slot in `from..=to`.
pub fn assert_complete(out: &[(u64, Hash)], roots: &BTreeMap<u64, Hash>, from: u64, to: u64) {
    let want: Vec<(u64, Hash)> = roots.range(from..=to).map(|(s, r)| (*s, *r)).collect();
    let got: Vec<(u64, Hash)> = out.iter().filter(|(s, _)| *s <= to).copied().collect();
    if got != want {
        let gs: Vec<u64> = got.iter().map(|x| x.0).collect();
        let ws: Vec<u64> = want.iter().map(|x| x.0).collect();
        panic!("output slots {gs:?}\nwanted       {ws:?}\n(or a root differs)");
    }
}
