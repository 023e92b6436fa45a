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
            self.banks.retain(|_, (_, seg)| *seg != first);
            self.votes.retain(|_, locs| {
                locs.retain(|(seg, _)| *seg != first);
                !locs.is_empty()
            });
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
        self.banks.retain(|_, (_, seg)| *seg != first_slot);
        self.votes.retain(|_, locs| {
            locs.retain(|(seg, _)| *seg != first_slot);
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
    /// or pruned).
    pub fn slot_votes_for(
        &self,
        slot: u64,
        window: u64,
        selection: &VoteSelection,
    ) -> Result<Option<SlotVotes>, VoteLogError> {
        let Some((bank, _)) = self.banks.get(&slot) else { return Ok(None) };
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
                        // Pruned since the last refresh: those blocks are gone.
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
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
