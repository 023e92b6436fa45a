//! The snapshot reader: accounts and their proofs at any kept slot, read from snapshot files
//! alone.
//!
//! A query walks the file records of its slot from that slot's root, exactly as the engine walks
//! its prefix array: a branch wherever both children are non-empty, straight through where one
//! is empty, then the bucket's sorted leaves. No history is replayed and no live tree is needed;
//! each step is one bounds-checked read from a memory-mapped file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use aldb_verify::spec::{EMPTY_ROOT, Hash, account_value, bit, branch_hash, key_path};
use aldb_verify::{Claim, Proof, Sibling, Terminal};

use crate::error::{QueryError, SnapshotError};
use crate::format::{FLAG_AFTER_GAP, FileKind, MAX_ARITY, Ref, SET_ASIDE_SUFFIX, node_arity, parse_published_name};
use crate::slots::SlotIndex;
use crate::sorted::walk_sorted;
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
    slots: SlotIndex,
    /// Files already found damaged, by name, so they are reported once and skipped (until the
    /// name points at another file).
    bad: BTreeMap<String, BadFile>,
    /// Mapped files by name, with the inode they were opened from: a name reused for another
    /// file (a restarted writer replacing a damaged one) is opened afresh, never confused with
    /// what was mapped before.
    by_name: BTreeMap<String, (u64, Arc<MappedFile>)>,
    /// Committed slots that cannot be served because a file they need is damaged, and why.
    corrupt: BTreeMap<u64, String>,
    /// Slots whose own file is present but a file of their chain is not, with the missing
    /// file's sequence number.
    missing: BTreeMap<u64, u32>,
}

/// A file found damaged.
#[derive(Clone, Debug)]
struct BadFile {
    inode: u64,
    seq: u32,
    slot: u64,
    /// A damaged part makes only the slots that reach it corrupt, not the slot it names (which
    /// may never have been published, or been published again whole).
    kind: FileKind,
    reason: String,
}

/// A file's inode number: how a reused name is told apart from the file mapped before.
fn inode(meta: &std::fs::Metadata) -> u64 {
    #[cfg(unix)]
    {
        std::os::unix::fs::MetadataExt::ino(meta)
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        0
    }
}

/// A read-only view of a snapshot directory, shared by any number of query threads.
pub struct SnapshotReader {
    dir: PathBuf,
    index: RwLock<Arc<Index>>,
}

impl std::fmt::Debug for SnapshotReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotReader").field("dir", &self.dir).finish_non_exhaustive()
    }
}

impl SnapshotReader {
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
    /// slots in slot order. A damaged file is logged once and never served; the slots that need
    /// it answer [`QueryError::Corrupt`].
    ///
    /// Every identity a query relies on is checked here: the header's sequence number and slot
    /// must be the ones in the file's name (a copied or renamed file would otherwise serve
    /// another slot's root), the checksum must match, and a mapping found changed since it was
    /// opened (truncated under us) is dropped.
    pub fn refresh(&self) -> Result<Vec<SlotInfo>, SnapshotError> {
        let old = self.current();
        let mut files = Files::default();
        let mut slots = BTreeMap::new();
        let mut bad: BTreeMap<String, BadFile> = BTreeMap::new();
        let mut by_name = BTreeMap::new();
        let mut fresh = Vec::new();
        let mut newest_named: Option<u64> = None;
        let rd = std::fs::read_dir(&self.dir).map_err(|e| SnapshotError::io("list", &self.dir, e))?;
        for entry in rd {
            let entry = entry.map_err(|e| SnapshotError::io("list", &self.dir, e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some((_, named_slot, kind)) = name.strip_suffix(SET_ASIDE_SUFFIX).and_then(parse_published_name) {
                // Set aside by a starting writer: reported, never served.
                let reason = "set aside by the snapshot writer as damaged or not its own".to_string();
                bad.insert(name.to_string(), BadFile { inode: 0, seq: 0, slot: named_slot, kind, reason });
                continue;
            }
            // Part files are indexed with the slot files (records reach into them) but never
            // serve a slot themselves.
            let Some((seq, named_slot, kind)) = parse_published_name(name) else { continue };
            let meta = match entry.metadata() {
                Ok(m) => m,
                // Deleted between listing and reading: pruned, not an error.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(SnapshotError::io("stat", entry.path(), e)),
            };
            let ino = inode(&meta);
            if kind == FileKind::Slot {
                newest_named = newest_named.max(Some(named_slot));
            }
            if let Some(b) = old.bad.get(name).filter(|b| b.inode == ino) {
                bad.insert(name.to_string(), b.clone());
                continue;
            }
            let mut reject = |reason: String| {
                log::error!("snapshot file {name} is not served: {reason}");
                bad.insert(name.to_string(), BadFile { inode: ino, seq, slot: named_slot, kind, reason });
            };
            let f = match old.by_name.get(name).filter(|(i, _)| *i == ino) {
                Some((_, f)) => f.clone(),
                None => match MappedFile::open(&entry.path(), true) {
                    Ok(f) => Arc::new(f),
                    Err(SnapshotError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => {
                        reject(e.to_string());
                        continue;
                    }
                },
            };
            let h = f.header;
            if h.seq != seq || h.slot != named_slot {
                reject(format!(
                    "its header names sequence {} slot {}, its file name sequence {seq} slot {named_slot}",
                    h.seq, h.slot
                ));
                continue;
            }
            if FileKind::of(&h) != kind {
                reject(format!("its header says {:?}, its file name {kind:?}", FileKind::of(&h)));
                continue;
            }
            if f.damaged() {
                reject("the file was truncated or changed while mapped".to_string());
                continue;
            }
            if files.get(seq).is_some() {
                // Two valid files claiming one sequence number: references into it are ambiguous.
                reject(format!("a second file with sequence number {seq}"));
                continue;
            }
            by_name.insert(name.to_string(), (ino, f.clone()));
            files.insert(f);
            if kind == FileKind::Part {
                continue;
            }
            let info = SlotInfo { slot: h.slot, parent: h.parent, root: h.root, seq: h.seq };
            if old.slots.get(h.slot).is_none() {
                fresh.push(info);
            }
            // A restarted writer may publish the same slot again; the newer file wins.
            if slots.get(&h.slot).is_none_or(|s: &SlotInfo| s.seq < h.seq) {
                slots.insert(h.slot, info);
            }
        }
        // Set-aside files (sequence 0 here) hold no number any served file reaches.
        let bad_seqs: BTreeMap<u32, (&String, &BadFile)> =
            bad.iter().filter(|(_, b)| b.seq != 0).map(|(n, b)| (b.seq, (n, b))).collect();
        let mut corrupt: BTreeMap<u64, String> = BTreeMap::new();
        let mut missing: BTreeMap<u64, u32> = BTreeMap::new();
        for (name, b) in bad.iter().filter(|(_, b)| b.kind == FileKind::Slot) {
            corrupt.insert(b.slot, format!("its file {name} is damaged: {}", b.reason));
        }
        // Only slots whose every reachable file is still present are served: with the present
        // sequence numbers sorted, [oldest, seq] is complete when it holds seq - oldest + 1 of them.
        // A slot missing a file because that file is damaged is corrupt, not pruned.
        let present: Vec<u32> = files.seqs().collect();
        slots.retain(|slot, s| {
            let Some(f) = files.get(s.seq) else { return false };
            let oldest = f.header.oldest_seq;
            let lo = present.partition_point(|&q| q < oldest);
            let hi = present.partition_point(|&q| q <= s.seq);
            if (hi - lo) as u64 == u64::from(s.seq - oldest) + 1 {
                // The slot's parts, between its first file and its own, must be parts of this
                // very write: the same slot, the same first file. (They always are, unless files
                // were copied in from elsewhere; the proofs would catch it, this says why.)
                let first = f.header.first_seq;
                let stray = (first..s.seq).find(|&q| {
                    files
                        .get(q)
                        .is_none_or(|p| !p.header.is_part() || p.header.slot != *slot || p.header.first_seq != first)
                });
                let Some(q) = stray else { return true };
                corrupt.insert(*slot, format!("file #{q} is not a part of slot {slot}'s file #{}", s.seq));
                return false;
            }
            if let Some((_, (name, b))) = bad_seqs.range(oldest..=s.seq).next() {
                corrupt.insert(*slot, format!("file {name} that its records may reach is damaged: {}", b.reason));
            } else if let Some(gone) = (oldest..s.seq).find(|q| files.get(*q).is_none()) {
                // Deleted (not by the pruner, which deletes no file a kept slot reaches): the
                // slot was published, so "skipped" would be wrong; the file is named instead.
                missing.insert(*slot, gone);
            }
            false
        });
        // The header's root must be the hash of the record it points at: a header edited with
        // its checksum recomputed would otherwise serve another root for the slot (checked once
        // per file; proofs are verified against the root on every query besides).
        slots.retain(|slot, s| {
            if old.slots.get(*slot) == Some(s) {
                return true;
            }
            let Some(f) = files.get(s.seq) else { return false };
            match files.hash(f.header.root_ref) {
                Ok(h) if h == s.root => true,
                Ok(_) => {
                    log::error!("snapshot file {}: its header's root is not its top record's hash", f.path.display());
                    corrupt
                        .insert(*slot, format!("file #{}: the header's root is not the hash of its top record", s.seq));
                    false
                }
                Err(e) => {
                    log::error!("{e}");
                    corrupt.insert(*slot, e.to_string());
                    false
                }
            }
        });
        // A slot served by a good file is not corrupt, even if another copy of it is damaged.
        corrupt.retain(|slot, _| !slots.contains_key(slot));
        let gaps = files
            .iter()
            .filter(|f| f.header.flags & FLAG_AFTER_GAP != 0)
            .map(|f| (f.header.gap_after, f.header.slot))
            .collect();
        fresh.retain(|s| slots.get(&s.slot) == Some(s));
        fresh.sort_by_key(|s| s.slot);
        let slots = SlotIndex::new(slots, gaps, newest_named);
        let next = Arc::new(Index { files, slots, bad, by_name, corrupt, missing });
        match self.index.write() {
            Ok(mut g) => *g = next,
            Err(p) => *p.into_inner() = next,
        }
        Ok(fresh)
    }

    /// Damaged files in the directory, by name, with what is wrong with each.
    pub fn damaged_files(&self) -> Vec<(String, String)> {
        self.current().bad.iter().map(|(n, b)| (n.clone(), b.reason.clone())).collect()
    }

    /// The newest published slot.
    pub fn latest(&self) -> Option<SlotInfo> {
        self.current().slots.latest()
    }

    /// The oldest slot still served.
    pub fn oldest(&self) -> Option<SlotInfo> {
        self.current().slots.oldest()
    }

    /// Published slots in `[start, end]`, oldest first.
    pub fn slots(&self, start: u64, end: u64) -> Vec<SlotInfo> {
        self.current().slots.range(start, end)
    }

    /// The slot's info, or why it cannot be served.
    pub fn slot(&self, slot: Option<u64>) -> Result<SlotInfo, QueryError> {
        Self::lookup(&self.current(), slot)
    }

    fn lookup(ix: &Index, slot: Option<u64>) -> Result<SlotInfo, QueryError> {
        // A slot is corrupt only while no good file serves it (see `refresh`). A slot in range
        // with no file of its own is "skipped" only when no file of its chain is missing.
        match ix.slots.lookup(slot, |s| ix.corrupt.get(&s).cloned()) {
            Err(QueryError::NoSnapshot { slot }) => match ix.missing.get(&slot) {
                Some(&gone) => Err(QueryError::MissingFile {
                    slot,
                    file: format!(
                        "file {gone:010}-*.snap or .part (sequence number {gone}) that its records may reach"
                    ),
                }),
                None => Err(QueryError::NoSnapshot { slot }),
            },
            other => other,
        }
    }

    /// The account `pubkey` at `slot` (the newest when `None`), with its proof.
    ///
    /// The answer is checked before it is returned: the proof must verify against the slot's
    /// root and say what the account says. Files can be damaged in ways no checksum sees (edited
    /// with the checksum recomputed, changed while mapped), and a proof that does not verify, or
    /// an account its proof does not vouch for, is never served: the slot answers
    /// [`QueryError::Corrupt`] instead (or [`QueryError::Damaged`], with what the read found, when
    /// reading the files finds one damaged or missing). The check costs about one hash per level
    /// of the proof.
    pub fn prove(&self, pubkey: &[u8; 32], slot: Option<u64>) -> Result<AccountProof, QueryError> {
        let ix = self.current();
        let info = Self::lookup(&ix, slot)?;
        let corrupt = |reason: String| QueryError::Corrupt { slot: info.slot, reason };
        let answer = prove_in(&ix.files, &info, pubkey).map_err(|e| QueryError::read(info.slot, e))?;
        let claim = answer
            .proof
            .verify(&info.root, pubkey)
            .map_err(|e| corrupt(format!("the proof read from the files does not verify against the root: {e}")))?;
        let vouched = match (&claim, &answer.account) {
            (Claim::Absent, None) => true,
            (Claim::Present { value }, Some(a)) => *value == account_value(a.lamports, &a.owner, a.executable, &a.data),
            _ => false,
        };
        if !vouched {
            return Err(corrupt("the account read from the files is not the one its proof commits to".into()));
        }
        Ok(answer)
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
    let account = match full.iter().find(|(p, _, _)| lp == path && *p == lp) {
        // The data is copied out of the mapping here, so its file is checked after the copy.
        Some((_, _, a)) => Some(a.intact(Account {
            pubkey: a.pubkey,
            lamports: a.lamports,
            owner: a.owner,
            executable: a.executable,
            data: a.data.to_vec(),
        })?),
        None => None,
    };
    Ok(AccountProof {
        slot: info.slot,
        root: info.root,
        account,
        proof: Proof { siblings, terminal: Terminal::Leaf { path: lp, value: lv } },
    })
}
