//! The follower of a vote-evidence log written by another process (Hyades holds one).
//!
//! It keeps an index in memory, never the votes themselves (at mainnet rates a slot's votes are
//! some 450 KB): each slot's newest bank entry, and where each block's vote entries lie. A query
//! reads the few entries it needs back from the segments.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use aldb_verify::Hash;
use aldb_verify::epochs::{EpochSet, SlotEvidence};
use aldb_verify::votes::{MAX_EVIDENCE_VOTES, VoteTransaction};

use super::entry::{BankEntry, Parsed, VoteLogEntry, parse_entry, scan};
use super::{MAX_WINDOW, VOTES_DIR, VOTES_HEADER_LEN, VoteLogError, header_ok, io, list_segments};

/// The evidence a light client needs for slot `S` (`docs/SPEC.md` §10.5), before the account.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotVotes {
    /// The bank of `S`: its hash, and `h`, root and hard-fork count when it committed to a root.
    pub bank: BankEntry,
    /// Vote transactions whose last voted slot is `S`, from the blocks of the slots
    /// `S+1..=S+window` in log order, as a [`VoteSelection`] chose them (at most one per key,
    /// at most 4096), as on the wire. Whether they count is the client's check.
    pub votes: Vec<Vec<u8>>,
    /// The newest slot whose votes the log held when the query was answered: blocks up to
    /// `S+window` above it may still bring votes on `S`.
    pub searched_to: u64,
}

/// Candidate slots a transition's choice tries at most (`VoteLogReader::transition`): each costs
/// a read of its votes and their signatures, and the earliest slots of an epoch are voted on by
/// then.
pub const TRANSITION_TRIES: usize = 64;

/// The transition to an epoch (`docs/SPEC.md` §11.4) as the log holds it: the set, and the
/// evidence of the slot of the epoch before chosen to prove it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EpochTransition {
    /// The set's `set_hash`.
    pub set_hash: Hash,
    /// The set's canonical encoding (§11.2).
    pub set_encoding: Vec<u8>,
    /// The chosen slot's bank and votes (`searched_to` the chosen slot's window end).
    pub evidence: SlotVotes,
    /// The segments the evidence was read from: the bank's (or the kept entry's) first.
    pub segments: Vec<u64>,
    /// The evidence is a kept entry (carried past pruning), not the slot's bank and blocks.
    pub kept: bool,
}

/// Where an entry lies: its segment and byte range.
type Loc = (u64, Range<usize>);

/// Where a set's entries lie, and its epoch.
#[derive(Debug)]
struct SetLoc {
    epoch: u64,
    locs: Vec<(u64, Range<usize>)>,
}

/// A follower's position in one segment.
#[derive(Debug)]
struct Position {
    path: PathBuf,
    /// The header was read and is a version-1 header.
    header_ok: bool,
    /// Where the next read starts: just past the last valid entry read.
    end: usize,
}

/// Follows the vote-evidence log under a snapshot directory.
#[derive(Debug)]
pub struct VoteLogReader {
    dir: PathBuf,
    /// Position per segment, by first slot.
    positions: BTreeMap<u64, Position>,
    /// The newest bank entry of each slot, and the segment it lies in.
    banks: BTreeMap<u64, (BankEntry, u64)>,
    /// Where each block's vote entries lie: `(segment, byte range)`.
    votes: BTreeMap<u64, Vec<(u64, Range<usize>)>>,
    /// Sets by hash: their epoch and where their entries lie.
    sets: BTreeMap<Hash, SetLoc>,
    /// Kept evidence by slot: its bank, and where it lies.
    kept: BTreeMap<u64, Vec<(BankEntry, u64, Range<usize>)>>,
    damaged: u64,
}

impl VoteLogReader {
    /// A reader of the log under `snapshot_dir`; call [`refresh`](Self::refresh) to load it.
    pub fn new(snapshot_dir: &Path) -> Self {
        Self {
            dir: snapshot_dir.join(VOTES_DIR),
            positions: BTreeMap::new(),
            banks: BTreeMap::new(),
            votes: BTreeMap::new(),
            sets: BTreeMap::new(),
            kept: BTreeMap::new(),
            damaged: 0,
        }
    }

    /// Reads what was appended since the last call and forgets segments the writer deleted.
    /// Returns the number of new entries read. A missing log reads as empty.
    pub fn refresh(&mut self) -> Result<usize, VoteLogError> {
        let listed = list_segments(&self.dir)?;
        let present: BTreeSet<u64> = listed.iter().map(|(f, _)| *f).collect();
        let gone: Vec<u64> = self.positions.keys().filter(|f| !present.contains(f)).copied().collect();
        for first in gone {
            self.positions.remove(&first);
            self.forget_segment(first);
        }
        let newest = listed.last().map(|(f, _)| *f);
        let mut read = 0;
        for (first, path) in listed {
            read += self.read_segment(first, path, Some(first) == newest)?;
        }
        Ok(read)
    }

    /// Forgets what was read of the segment starting at `first_slot` (its banks and where its
    /// votes lie): the next [`refresh`](Self::refresh) reads it again from its start. For a
    /// segment whose file was replaced by other bytes (a replica's copy of a damaged object,
    /// replaced by an intact one): a follower reads only what is appended.
    pub fn reread(&mut self, first_slot: u64) {
        if self.positions.remove(&first_slot).is_none() {
            return;
        }
        self.forget_segment(first_slot);
    }

    /// Drops everything indexed from the segment starting at `first`.
    fn forget_segment(&mut self, first: u64) {
        self.banks.retain(|_, (_, seg)| *seg != first);
        self.votes.retain(|_, locs| {
            locs.retain(|(seg, _)| *seg != first);
            !locs.is_empty()
        });
        self.sets.retain(|_, s| {
            s.locs.retain(|(seg, _)| *seg != first);
            !s.locs.is_empty()
        });
        self.kept.retain(|_, locs| {
            locs.retain(|(_, seg, _)| *seg != first);
            !locs.is_empty()
        });
    }

    fn read_segment(&mut self, first: u64, path: PathBuf, growing: bool) -> Result<usize, VoteLogError> {
        let pos = self.positions.entry(first).or_insert(Position { path, header_ok: false, end: 0 });
        let mut f = match File::open(&pos.path) {
            Ok(f) => f,
            // Deleted since it was listed: the next refresh forgets it.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(io("open", &pos.path)(e)),
        };
        if pos.end == 0 {
            let mut h = [0u8; VOTES_HEADER_LEN];
            let got = f.read(&mut h).map_err(io("read", &pos.path))?;
            // Entries carry their own checksums, so a damaged header loses none of them.
            pos.header_ok = got == VOTES_HEADER_LEN && header_ok(&h);
            if !pos.header_ok {
                log::warn!("{}: damaged segment header; reading its entries anyway", pos.path.display());
            }
            pos.end = VOTES_HEADER_LEN;
        }
        let mut buf = Vec::new();
        f.seek(SeekFrom::Start(pos.end as u64)).map_err(io("seek", &pos.path))?;
        f.read_to_end(&mut buf).map_err(io("read", &pos.path))?;
        let s = scan(&buf, pos.end, growing);
        // A closed segment is read to its end once: what follows its last entry is damage.
        pos.end = if growing { s.end } else { pos.end + buf.len() };
        self.damaged += s.damaged + u64::from(!growing && s.end < pos.end);
        let n = s.entries.len();
        for (range, e) in s.entries {
            match e {
                // A segment read again after newer ones: what they hold stays the newer.
                VoteLogEntry::Bank(b) => match self.banks.get(&b.slot) {
                    Some((_, seg)) if *seg > first => {}
                    _ => {
                        self.banks.insert(b.slot, (b, first));
                    }
                },
                VoteLogEntry::Votes(v) => {
                    let locs = self.votes.entry(v.slot).or_default();
                    locs.push((first, range));
                    // In log order, also when a segment is read again after newer ones.
                    let key = |(seg, r): &(u64, Range<usize>)| (*seg, r.start);
                    if locs.len() > 1 && key(&locs[locs.len() - 2]) > key(&locs[locs.len() - 1]) {
                        locs.sort_by_key(key);
                    }
                }
                VoteLogEntry::Set(set) => {
                    let epoch = set.epoch();
                    self.sets.entry(set.hash).or_insert(SetLoc { epoch, locs: Vec::new() }).locs.push((first, range));
                }
                VoteLogEntry::Kept(k) => self.kept.entry(k.bank.slot).or_default().push((k.bank, first, range)),
            }
        }
        Ok(n)
    }

    /// The newest bank entry of `slot`.
    pub fn bank(&self, slot: u64) -> Option<&BankEntry> {
        self.banks.get(&slot).map(|(b, _)| b)
    }

    /// The newest slot with a bank entry.
    pub fn newest_slot(&self) -> Option<u64> {
        self.banks.keys().next_back().copied()
    }

    /// The oldest slot with a bank entry.
    pub fn oldest_slot(&self) -> Option<u64> {
        self.banks.keys().next().copied()
    }

    /// Whether the writer deleted segments since the last [`refresh`](Self::refresh): pruning
    /// deletes the oldest first, so one look at the oldest known segment tells. Until a refresh,
    /// what pruning carried forward is not read yet while the index still names what it deleted.
    pub fn pruned_since_refresh(&self) -> bool {
        self.positions.first_key_value().is_some_and(|(_, p)| !p.path.exists())
    }

    /// The oldest slot with a bank entry whose segment is still on disk. Between a prune and
    /// the next [`refresh`](Self::refresh), [`oldest_slot`](Self::oldest_slot) still names slots
    /// of deleted segments; a slot below this one is pruned, whatever the index says.
    pub fn oldest_slot_present(&self) -> Option<u64> {
        let mut checked: Option<(u64, bool)> = None;
        for (slot, (_, seg)) in &self.banks {
            let present = match checked {
                Some((s, present)) if s == *seg => present,
                _ => self.positions.get(seg).is_some_and(|p| p.path.exists()),
            };
            if present {
                return Some(*slot);
            }
            checked = Some((*seg, present));
        }
        None
    }

    /// Damaged entries or spans skipped so far.
    pub fn damaged_entries(&self) -> u64 {
        self.damaged
    }

    /// The evidence for `slot` as [`slot_votes_for`](Self::slot_votes_for) selects it from
    /// every vote account ([`VoteSelection::All`]).
    pub fn slot_votes(&self, slot: u64, window: u64) -> Result<Option<SlotVotes>, VoteLogError> {
        self.slot_votes_for(slot, window, &VoteSelection::All)
    }

    /// The evidence for `slot`: its bank, and the vote transactions whose last voted slot is
    /// `slot` from the blocks of the slots `slot+1..=slot+window` (`window` at most
    /// [`MAX_WINDOW`]), chosen by `selection` (at most one per vote account and signers, at most
    /// [`MAX_EVIDENCE_VOTES`]). `None` when the log holds no bank entry for `slot` (never logged,
    /// or pruned, also when pruned since the last refresh).
    pub fn slot_votes_for(
        &self,
        slot: u64,
        window: u64,
        selection: &VoteSelection,
    ) -> Result<Option<SlotVotes>, VoteLogError> {
        let Some((bank, bank_seg)) = self.banks.get(&slot) else { return Ok(None) };
        // Pruned since the last refresh: answer as the refresh that forgets it will, not with
        // the votes that are left (a slot whose blocks are half gone would read as never voted).
        if !self.positions.get(bank_seg).is_some_and(|p| p.path.exists()) {
            return Ok(None);
        }
        let last = slot.saturating_add(window.min(MAX_WINDOW));
        let mut picks = Picks::default();
        let mut files: BTreeMap<u64, File> = BTreeMap::new();
        'blocks: for (_, locs) in self.votes.range(slot.saturating_add(1)..=last) {
            for (seg, range) in locs {
                let Some(pos) = self.positions.get(seg) else { continue };
                let f = match files.entry(*seg) {
                    std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
                    std::collections::btree_map::Entry::Vacant(v) => match File::open(&pos.path) {
                        Ok(f) => v.insert(f),
                        // Pruned since the last refresh, oldest first: the bank's segment,
                        // older than its blocks', is being deleted too.
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                        Err(e) => return Err(io("open", &pos.path)(e)),
                    },
                };
                let mut buf = vec![0u8; range.len()];
                f.read_exact_at(&mut buf, range.start as u64).map_err(io("read", &pos.path))?;
                let Parsed::Entry(VoteLogEntry::Votes(v), _) = parse_entry(&buf) else { continue };
                for tx in v.transactions {
                    picks.offer(tx, slot, &bank.bank_hash, selection);
                    if picks.complete(selection) {
                        break 'blocks;
                    }
                }
            }
        }
        let searched_to = self.votes.keys().next_back().copied().unwrap_or(slot).min(last).max(slot);
        Ok(Some(SlotVotes { bank: *bank, votes: picks.into_votes(), searched_to }))
    }

    /// Reads back the entry at `range` of segment `seg`; `None` when the segment is gone or the
    /// entry no longer checks.
    fn read_entry(&self, seg: u64, range: &Range<usize>) -> Result<Option<VoteLogEntry>, VoteLogError> {
        let Some(pos) = self.positions.get(&seg) else { return Ok(None) };
        let f = match File::open(&pos.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io("open", &pos.path)(e)),
        };
        let mut buf = vec![0u8; range.len()];
        f.read_exact_at(&mut buf, range.start as u64).map_err(io("read", &pos.path))?;
        Ok(match parse_entry(&buf) {
            Parsed::Entry(e, _) => Some(e),
            _ => None,
        })
    }

    /// The epochs whose sets the log holds, oldest first.
    pub fn set_epochs(&self) -> Vec<u64> {
        let epochs: BTreeSet<u64> = self.sets.values().map(|s| s.epoch).collect();
        epochs.into_iter().collect()
    }

    /// The segments holding the entries of the set `hash`.
    pub fn set_segments(&self, hash: &Hash) -> Vec<u64> {
        self.sets.get(hash).map(|s| s.locs.iter().map(|(seg, _)| *seg).collect()).unwrap_or_default()
    }

    /// Per epoch, the newest segment holding its transition whole: an entry of a set of the
    /// epoch and kept evidence of a slot whose bank binds that set, so a copy of that one segment
    /// proves it. An epoch no segment holds whole (its evidence lies only in the slot's own bank
    /// and blocks, or it has none) is absent. One pass over the kept evidence.
    pub fn newest_whole_transitions(&self) -> BTreeMap<u64, u64> {
        let mut newest = BTreeMap::new();
        for (b, seg, _) in self.kept.values().flatten() {
            let Some(set) = b.next_set_hash.filter(|_| b.aldb.is_some()).and_then(|h| self.sets.get(&h)) else {
                continue;
            };
            if set.locs.iter().any(|(g, _)| g == seg) {
                let at: &mut u64 = newest.entry(set.epoch).or_default();
                *at = (*at).max(*seg);
            }
        }
        newest
    }

    /// The hashes of the sets of `epoch` the log holds.
    pub fn sets_of(&self, epoch: u64) -> Vec<Hash> {
        self.sets.iter().filter(|(_, s)| s.epoch == epoch).map(|(h, _)| *h).collect()
    }

    /// The epochs of the sets whose entries, or whose binding banks or kept evidence, lie in
    /// segment `seg`.
    pub fn epochs_touching(&self, seg: u64) -> BTreeSet<u64> {
        let epoch_of = |h: &Hash| self.sets.get(h).map(|s| s.epoch);
        let mut out: BTreeSet<u64> =
            self.sets.values().filter(|s| s.locs.iter().any(|(g, _)| *g == seg)).map(|s| s.epoch).collect();
        for (b, g) in self.banks.values() {
            if *g == seg
                && let Some(e) = b.next_set_hash.as_ref().and_then(epoch_of)
            {
                out.insert(e);
            }
        }
        for locs in self.kept.values() {
            for (b, g, _) in locs {
                if *g == seg
                    && let Some(e) = b.next_set_hash.as_ref().and_then(epoch_of)
                {
                    out.insert(e);
                }
            }
        }
        out
    }

    /// The entry of the set `hash`, its first that still reads.
    pub fn set_entry(&self, hash: &Hash) -> Result<Option<super::SetEntry>, VoteLogError> {
        let Some(s) = self.sets.get(hash) else { return Ok(None) };
        for (seg, range) in &s.locs {
            if let Some(VoteLogEntry::Set(e)) = self.read_entry(*seg, range)?
                && e.hash == *hash
            {
                return Ok(Some(e));
            }
        }
        Ok(None)
    }

    /// The encoding of the set `hash`.
    pub fn set_encoding(&self, hash: &Hash) -> Result<Option<Vec<u8>>, VoteLogError> {
        Ok(self.set_entry(hash)?.map(|e| e.encoding))
    }

    /// The transition to `epoch` (`docs/SPEC.md` §11.4) the log can prove: a set of `epoch` it
    /// holds and the evidence of a slot whose bank binds that set (so a slot of `epoch − 1`,
    /// §11.3), with its votes from the blocks of the `window` slots after it. The slot chosen is
    /// the earliest whose votes a set of `epoch − 1` the log holds vouches for (more than 2/3 of
    /// its stake, §10.4's rules, signatures included); when the log holds no set of `epoch − 1`
    /// (the epoch the feature activated in, or a copy of the newest segments only), kept evidence
    /// if any (the writer's own choice, carried or kept past pruning), else the slot with the
    /// most distinct vote accounts voting for its bank hash; the earliest among equals. Kept
    /// evidence otherwise counts as its slot. At most [`TRANSITION_TRIES`] slots are tried per set. `None` when nothing
    /// qualifies, and for epoch 0.
    pub fn transition(&self, epoch: u64, window: u64) -> Result<Option<EpochTransition>, VoteLogError> {
        let Some(before) = epoch.checked_sub(1) else { return Ok(None) };
        let mut signers = Vec::new();
        for h in self.sets_of(before) {
            if let Some(set) = self.set_encoding(&h)?.and_then(|enc| EpochSet::decode(&enc).ok()) {
                signers.push(set);
            }
        }
        // Without a set to vouch: kept evidence first (the writer chose it, most often with the
        // set of the epoch before in hand, which a copy of the newest segments may lack), then
        // the most voters.
        let mut best: Option<((bool, usize), EpochTransition)> = None;
        for target in self.sets_of(epoch) {
            let Some(encoding) = self.set_encoding(&target)? else { continue };
            // Candidates in slot order, a slot's own bank and blocks before its kept copy.
            let mut candidates: Vec<(u64, Option<Loc>)> = self
                .banks
                .values()
                .filter(|(b, _)| b.aldb.is_some() && b.next_set_hash == Some(target))
                .map(|(b, _)| (b.slot, None))
                .collect();
            for locs in self.kept.values() {
                for (b, seg, range) in locs {
                    if b.aldb.is_some() && b.next_set_hash == Some(target) {
                        candidates.push((b.slot, Some((*seg, range.clone()))));
                    }
                }
            }
            candidates.sort_by_key(|(slot, kept)| (*slot, kept.is_some()));
            for (slot, kept) in candidates.into_iter().take(TRANSITION_TRIES) {
                let found = match &kept {
                    Some((seg, range)) => match self.read_entry(*seg, range)? {
                        Some(VoteLogEntry::Kept(k)) => Some((k.bank, k.votes, vec![*seg])),
                        _ => None,
                    },
                    None => self.slot_votes_for(slot, window, &VoteSelection::All)?.map(|sv| {
                        let segs = self.banks.get(&slot).map(|(_, g)| vec![*g]).unwrap_or_default();
                        (sv.bank, sv.votes, segs)
                    }),
                };
                let Some((bank, votes, mut segments)) = found else { continue };
                let Some(aldb) = bank.aldb else { continue };
                let ev = SlotEvidence {
                    slot,
                    h: aldb.h,
                    root: aldb.root,
                    hard_forks: bank.hard_forks,
                    next_set_hash: target,
                    votes: Vec::new(),
                };
                let make = |votes: Vec<Vec<u8>>, segments: Vec<u64>| EpochTransition {
                    set_hash: target,
                    set_encoding: encoding.clone(),
                    evidence: SlotVotes { bank, votes, searched_to: slot.saturating_add(window) },
                    segments,
                    kept: kept.is_some(),
                };
                if signers.is_empty() {
                    let voters = distinct_voters(slot, &ev.bank_hash(), &votes);
                    let rank = (kept.is_some(), voters);
                    if voters > 0
                        && best.as_ref().is_none_or(|(n, t)| rank > *n || (rank == *n && slot < t.evidence.bank.slot))
                    {
                        best = Some((rank, make(votes, segments)));
                    }
                    continue;
                }
                for set in &signers {
                    // Each signing set is asked for its own members' votes, so no outsider
                    // crowds them out of the evidence.
                    let votes = match &kept {
                        Some(_) => votes.clone(),
                        None => {
                            let voters = set.members().iter().map(|m| (m.vote_account, m.authorized_voter)).collect();
                            match self.slot_votes_for(slot, window, &VoteSelection::Voters(voters))? {
                                Some(sv) => sv.votes,
                                None => continue,
                            }
                        }
                    };
                    if (SlotEvidence { votes: votes.clone(), ..ev.clone() }).vouch(set).is_ok() {
                        segments.dedup();
                        return Ok(Some(make(votes, segments)));
                    }
                }
            }
        }
        Ok(best.map(|(_, t)| t))
    }
}

/// Which of the votes on a slot a query serves (`docs/SPEC.md` §10.5). Either way each key
/// below is served at most one vote: the first in log order that carries the slot's bank hash,
/// or, while none of the key's does, its first vote; and at most [`MAX_EVIDENCE_VOTES`] keys.
/// Nothing here checks a signature: the log holds only transactions whose signatures verified
/// when they were logged, and the client checks them again.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum VoteSelection {
    /// Every vote account: one vote per vote account and set of instruction signers (so a vote
    /// that names an account but is signed by another key never displaces the account's own),
    /// in the order their keys first appear, the first [`MAX_EVIDENCE_VOTES`] keys. Enough
    /// outsiders' votes landing first can fill it: ask for [`VoteSelection::Voters`] instead.
    #[default]
    All,
    /// Only these vote accounts, each with the key that must sign its votes (its authorized
    /// voter): one vote per account among those the voter signed, whatever else the blocks hold.
    Voters(BTreeMap<[u8; 32], [u8; 32]>),
}

/// How many distinct vote accounts voted for `slot` with `bank_hash` among `votes` (decoded by
/// §10.3; signatures are not checked: the log holds only votes that verified when logged).
fn distinct_voters(slot: u64, bank_hash: &Hash, votes: &[Vec<u8>]) -> usize {
    let accounts: BTreeSet<[u8; 32]> = votes
        .iter()
        .filter_map(|tx| VoteTransaction::parse(tx).ok())
        .filter(|t| t.tower.slot() == slot && t.tower.hash == *bank_hash)
        .map(|t| t.vote_account)
        .collect();
    accounts.len()
}

/// One selected vote: where it lies in the window, and whether it carries the bank hash.
#[derive(Debug)]
struct Pick {
    seq: usize,
    tx: Vec<u8>,
    right_hash: bool,
}

/// The votes selected so far, by key (the vote account, with the instruction signers for
/// [`VoteSelection::All`]).
#[derive(Debug, Default)]
struct Picks {
    by_key: BTreeMap<Vec<[u8; 32]>, Pick>,
    /// Transactions offered so far: the order of the answer.
    offered: usize,
    /// Keys whose pick carries the bank hash: nothing later replaces those.
    settled: usize,
}

impl Picks {
    fn offer(&mut self, tx: Vec<u8>, slot: u64, bank_hash: &[u8; 32], selection: &VoteSelection) {
        let seq = self.offered;
        self.offered += 1;
        let Ok(t) = VoteTransaction::parse(&tx) else { return };
        if t.tower.slot() != slot {
            return;
        }
        let key = match selection {
            VoteSelection::All => {
                let mut key = Vec::with_capacity(1 + t.instruction_signers.len());
                key.push(t.vote_account);
                key.extend_from_slice(&t.instruction_signers);
                key
            }
            VoteSelection::Voters(voters) => match voters.get(&t.vote_account) {
                Some(voter) if t.instruction_signers.binary_search(voter).is_ok() => vec![t.vote_account],
                _ => return,
            },
        };
        let right_hash = t.tower.hash == *bank_hash;
        let room = self.by_key.len() < MAX_EVIDENCE_VOTES;
        match self.by_key.get_mut(&key) {
            Some(p) if !p.right_hash && right_hash => {
                *p = Pick { seq, tx, right_hash };
                self.settled += 1;
            }
            Some(_) => {}
            None if room => {
                self.by_key.insert(key, Pick { seq, tx, right_hash });
                self.settled += usize::from(right_hash);
            }
            None => {}
        }
    }

    /// Whether no later vote can change the answer.
    fn complete(&self, selection: &VoteSelection) -> bool {
        let most = match selection {
            VoteSelection::All => MAX_EVIDENCE_VOTES,
            VoteSelection::Voters(v) => v.len().min(MAX_EVIDENCE_VOTES),
        };
        self.settled >= most
    }

    /// The picks in the order they lie in the window.
    fn into_votes(self) -> Vec<Vec<u8>> {
        let mut picks: Vec<Pick> = self.by_key.into_values().collect();
        picks.sort_unstable_by_key(|p| p.seq);
        picks.into_iter().map(|p| p.tx).collect()
    }
}
