//! Hyades: accounts and their proofs at any kept slot, read from snapshot files alone.
//!
//! A query walks the file records of its slot from that slot's root, exactly as the engine walks
//! its prefix array: a branch wherever both children are non-empty, straight through where one
//! is empty, then the bucket's sorted leaves. No history is replayed and no live tree is needed;
//! each step is one bounds-checked read from a memory-mapped file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use aldb_core::sorted::walk_sorted;
use aldb_verify::spec::{bit, branch_hash, key_path, Hash, EMPTY_ROOT};
use aldb_verify::{Proof, Sibling, Terminal};

use crate::error::{QueryError, SnapshotError};
use crate::format::{node_arity, parse_file_name, Ref, MAX_ARITY};
use crate::store::{Files, MappedFile};

/// A published slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotInfo {
    /// The slot.
    pub slot: u64,
    /// Its parent, if known.
    pub parent: Option<u64>,
    /// Its state root.
    pub root: Hash,
    /// Sequence number of its file.
    pub seq: u32,
}

/// An account's state as served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Account {
    /// Address.
    pub pubkey: [u8; 32],
    /// Balance.
    pub lamports: u64,
    /// Owning program.
    pub owner: [u8; 32],
    /// Whether it is a loaded program.
    pub executable: bool,
    /// Data.
    pub data: Vec<u8>,
}

/// The answer to "what was this account at slot S": the account (or `None` if absent), the
/// slot's root and a proof of either against it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccountProof {
    /// The slot.
    pub slot: u64,
    /// The slot's root.
    pub root: Hash,
    /// The account, or `None` if it did not exist (or had zero lamports).
    pub account: Option<Account>,
    /// Inclusion or exclusion proof against `root`.
    pub proof: Proof,
}

#[derive(Default)]
struct Index {
    files: Files,
    slots: BTreeMap<u64, SlotInfo>,
    /// Files already found corrupt, by name, so they are reported once and skipped.
    bad: BTreeMap<String, String>,
    /// The newest slot any published file names, served or not: a slot at or below it was
    /// committed, even if its file is damaged or incomplete.
    newest_named: Option<u64>,
}

/// A read-only view of a snapshot directory, shared by any number of query threads.
pub struct Hyades {
    dir: PathBuf,
    index: RwLock<Arc<Index>>,
}

impl std::fmt::Debug for Hyades {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hyades").field("dir", &self.dir).finish_non_exhaustive()
    }
}

impl Hyades {
    /// Opens a snapshot directory and indexes what is published there.
    pub fn open(dir: &Path) -> Result<Self, SnapshotError> {
        let h = Self { dir: dir.to_path_buf(), index: RwLock::new(Arc::new(Index::default())) };
        h.refresh()?;
        Ok(h)
    }

    fn current(&self) -> Arc<Index> {
        match self.index.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Picks up newly published files and forgets deleted ones. Returns the newly published
    /// slots in slot order. A corrupt file is logged and skipped, never served.
    pub fn refresh(&self) -> Result<Vec<SlotInfo>, SnapshotError> {
        let old = self.current();
        let mut files = Files::default();
        let mut slots = BTreeMap::new();
        let mut bad = old.bad.clone();
        let mut fresh = Vec::new();
        let mut newest_named: Option<u64> = None;
        let rd = std::fs::read_dir(&self.dir).map_err(|e| SnapshotError::io("list", &self.dir, e))?;
        for entry in rd {
            let entry = entry.map_err(|e| SnapshotError::io("list", &self.dir, e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let Some((seq, named_slot)) = parse_file_name(name) else { continue };
            newest_named = newest_named.max(Some(named_slot));
            if bad.contains_key(name) {
                continue;
            }
            let f = match old.files.get(seq) {
                Some(f) => f.clone(),
                None => match MappedFile::open(&entry.path(), true) {
                    Ok(f) => Arc::new(f),
                    // Deleted between listing and opening: pruned, not an error.
                    Err(SnapshotError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => {
                        log::error!("skipping snapshot file: {e}");
                        bad.insert(name.to_string(), e.to_string());
                        continue;
                    }
                },
            };
            let h = f.header;
            let info = SlotInfo { slot: h.slot, parent: h.parent, root: h.root, seq: h.seq };
            if !old.slots.contains_key(&h.slot) {
                fresh.push(info);
            }
            // A restarted writer may publish the same slot again; the newer file wins.
            if slots.get(&h.slot).is_none_or(|s: &SlotInfo| s.seq < h.seq) {
                slots.insert(h.slot, info);
            }
            files.insert(f);
        }
        // Only slots whose every reachable file is still present are served: with the present
        // sequence numbers sorted, [oldest, seq] is complete when it holds seq - oldest + 1 of them.
        let present: Vec<u32> = files.seqs().collect();
        slots.retain(|_, s| {
            let Some(f) = files.get(s.seq) else { return false };
            let oldest = f.header.oldest_seq;
            let lo = present.partition_point(|&q| q < oldest);
            let hi = present.partition_point(|&q| q <= s.seq);
            oldest <= s.seq && (hi - lo) as u64 == u64::from(s.seq - oldest) + 1
        });
        fresh.retain(|s| slots.get(&s.slot) == Some(s));
        fresh.sort_by_key(|s| s.slot);
        let next = Arc::new(Index { files, slots, bad, newest_named });
        match self.index.write() {
            Ok(mut g) => *g = next,
            Err(p) => *p.into_inner() = next,
        }
        Ok(fresh)
    }

    /// The newest published slot.
    pub fn latest(&self) -> Option<SlotInfo> {
        self.current().slots.values().next_back().copied()
    }

    /// The oldest slot still served.
    pub fn oldest(&self) -> Option<SlotInfo> {
        self.current().slots.values().next().copied()
    }

    /// Published slots in `[start, end]`, oldest first.
    pub fn slots(&self, start: u64, end: u64) -> Vec<SlotInfo> {
        if start > end {
            return Vec::new();
        }
        self.current().slots.range(start..=end).map(|(_, s)| *s).collect()
    }

    /// The slot's info, or why it cannot be served.
    pub fn slot(&self, slot: Option<u64>) -> Result<SlotInfo, QueryError> {
        Self::lookup(&self.current(), slot)
    }

    fn lookup(ix: &Index, slot: Option<u64>) -> Result<SlotInfo, QueryError> {
        let (Some(oldest), Some(newest)) = (ix.slots.values().next(), ix.slots.values().next_back()) else {
            return Err(QueryError::NothingPublished);
        };
        let Some(slot) = slot else { return Ok(*newest) };
        if slot > newest.slot && slot > ix.newest_named.unwrap_or(0) {
            return Err(QueryError::NotYetCommitted { slot, newest: newest.slot });
        }
        if slot < oldest.slot {
            return Err(QueryError::Pruned { slot, oldest: oldest.slot });
        }
        ix.slots.get(&slot).copied().ok_or(QueryError::NoSnapshot { slot })
    }

    /// The account `pubkey` at `slot` (the newest when `None`), with its proof.
    pub fn prove(&self, pubkey: &[u8; 32], slot: Option<u64>) -> Result<AccountProof, QueryError> {
        let ix = self.current();
        let info = Self::lookup(&ix, slot)?;
        prove_in(&ix.files, &info, pubkey).map_err(|e| QueryError::Storage(e.to_string()))
    }
}

/// The hash of a prefix at depth `d` from its two children's: a branch when both are
/// non-empty, else the non-empty one passed through (`docs/FORMAT.md`, Records).
fn combine(d: usize, left: &Hash, right: &Hash) -> Hash {
    match (*left == EMPTY_ROOT, *right == EMPTY_ROOT) {
        (false, false) => branch_hash(d as u8, left, right),
        (true, _) => *right,
        (false, true) => *left,
    }
}

fn prove_in(files: &Files, info: &SlotInfo, pubkey: &[u8; 32]) -> Result<AccountProof, SnapshotError> {
    let path = key_path(pubkey);
    let top = files.get(info.seq).ok_or(SnapshotError::MissingFile { seq: info.seq })?;
    let bucket_bits = usize::from(top.header.bucket_bits);
    let mut siblings = Vec::new();
    let mut r = top.header.root_ref;
    let empty = || AccountProof {
        slot: info.slot,
        root: info.root,
        account: None,
        proof: Proof { siblings: Vec::new(), terminal: Terminal::Empty },
    };
    if r.is_null() {
        return Ok(empty());
    }
    // One step down at depth `d` between children hashed `lh` and `rh`: records the sibling
    // when both are non-empty and says which side the path takes.
    let mut step = |d: usize, lh: Hash, rh: Hash| -> Result<usize, SnapshotError> {
        let want = usize::from(bit(&path, d));
        match (lh == EMPTY_ROOT, rh == EMPTY_ROOT) {
            (false, false) => {
                siblings.push(Sibling { depth: d as u8, hash: if want == 0 { rh } else { lh } });
                Ok(want)
            }
            (true, false) => Ok(1),
            (false, true) => Ok(0),
            (true, true) => {
                Err(SnapshotError::corrupt(&top.path, format!("non-empty node with two empty children at depth {d}")))
            }
        }
    };
    let mut d = 0;
    // The prefix the walk has taken: at the bottom, the bucket's index.
    let mut bucket = 0u64;
    // `tiers[j][..2^j]` holds the hashes of the prefixes `j` levels below the current node.
    let mut tiers = [[EMPTY_ROOT; MAX_ARITY]; 4];
    while d < bucket_bits {
        let arity = node_arity(d, bucket_bits);
        let k = arity.trailing_zeros() as usize;
        let n = files.node(r, arity)?;
        // The levels between are not stored: their nodes are recomputed from the children.
        for (h, c) in tiers[k].iter_mut().zip(&n.refs[..arity]) {
            *h = files.hash(*c)?;
        }
        for j in (1..k).rev() {
            for i in 0..1usize << j {
                tiers[j][i] = combine(d + j, &tiers[j + 1][2 * i], &tiers[j + 1][2 * i + 1]);
            }
        }
        let mut at = 0usize;
        for j in 0..k {
            let below = &tiers[j + 1];
            let side = step(d + j, below[2 * at], below[2 * at + 1])?;
            at = 2 * at + side;
        }
        r = n.refs[at];
        bucket = (bucket << k) | at as u64;
        d += k;
    }
    let mut leaves: Vec<Ref> = Vec::new();
    files.bucket(r, &mut leaves)?;
    // Leaves are stored as account references; their paths and values come from the records.
    let mut full = Vec::with_capacity(leaves.len());
    for l in &leaves {
        full.push(files.leaf(*l, bucket, top.header.bucket_bits)?);
    }
    let pairs: Vec<(Hash, Hash)> = full.iter().map(|(p, v, _)| (*p, *v)).collect();
    if pairs.windows(2).any(|w| w[0].0 >= w[1].0) {
        return Err(SnapshotError::corrupt(&top.path, "bucket leaves are not sorted by path"));
    }
    let Some((lp, lv)) = walk_sorted(&pairs, &path, &mut siblings) else {
        return Err(SnapshotError::corrupt(&top.path, "empty bucket record"));
    };
    let account = if lp == path {
        full.iter().find(|(p, _, _)| *p == lp).map(|(_, _, a)| Account {
            pubkey: a.pubkey,
            lamports: a.lamports,
            owner: a.owner,
            executable: a.executable,
            data: a.data.to_vec(),
        })
    } else {
        None
    };
    Ok(AccountProof {
        slot: info.slot,
        root: info.root,
        account,
        proof: Proof { siblings, terminal: Terminal::Leaf { path: lp, value: lv } },
    })
}
