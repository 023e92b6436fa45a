//! The entries of the vote-evidence log and the scan readers and the writer share.
//!
//! An entry is `len: u32 LE | payload (len bytes) | xxh3_64(payload): u64 LE`. The payload starts
//! with a kind byte and the slot (u64 LE); a [`BankEntry`] then has a fixed body (32 bytes longer
//! when it binds a next set), a [`VotesEntry`] a count (u16 LE) and that many transactions, each
//! a u16 LE length and its bytes, a [`SetEntry`] the set's hash and encoding, and a
//! [`KeptEvidence`] a bank's body followed by a votes body.

use std::ops::Range;

use aldb_verify::Hash;
use aldb_verify::epochs::{MAX_SET_MEMBERS, SET_DOMAIN, SET_HEADER_LEN, SET_MEMBER_LEN};
use aldb_verify::votes::PACKET_DATA_SIZE;
use sha2::{Digest, Sha256};
use xxhash_rust::xxh3::xxh3_64;

use super::VoteLogError;

/// The longest payload an entry may have (the writer splits a block's votes to stay under it).
pub const MAX_PAYLOAD: usize = 1 << 20;

/// The longest payload a set entry may have: the largest set a client follows (65,536 members,
/// some 4.5 MiB) with its hash.
pub const MAX_SET_PAYLOAD: usize = PREFIX_LEN + 32 + SET_HEADER_LEN + SET_MEMBER_LEN * MAX_SET_MEMBERS;

const KIND_BANK: u8 = 1;
const KIND_VOTES: u8 = 2;
const KIND_SET: u8 = 3;
const KIND_KEPT: u8 = 4;
/// Kind and slot.
const PREFIX_LEN: usize = 1 + 8;
/// Parent, flags, bank hash, `h`, root, hard-fork count.
const BANK_BODY_LEN: usize = 8 + 1 + 32 + 32 + 32 + 8;
/// The same with the next set's hash after it.
const BANK_SET_BODY_LEN: usize = BANK_BODY_LEN + 32;
const FLAG_ALDB: u8 = 1;
const FLAG_HARD_FORKS: u8 = 2;
/// The bank hash binds a next set (`docs/SPEC.md` §11.1): its hash follows the body.
const FLAG_NEXT_SET: u8 = 4;

/// What a bank hash committing to an aldb root was computed from (`docs/SPEC.md` §10.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AldbCommitment {
    /// `h`: agave 4.2.0's bank hash before hard-fork data, before the root was mixed in.
    pub h: Hash,
    /// The bank's aldb state root.
    pub root: Hash,
}

/// One frozen bank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BankEntry {
    /// The bank's slot.
    pub slot: u64,
    /// Its parent's slot.
    pub parent: u64,
    /// The bank hash the validators vote on.
    pub bank_hash: Hash,
    /// `h` and the root, when the bank committed to a root (the feature is active).
    pub aldb: Option<AldbCommitment>,
    /// The slot's hard-fork count when its bank hash mixes hard-fork data (never 0).
    pub hard_forks: Option<u64>,
    /// `next_set_hash` when the bank hash binds one (`docs/SPEC.md` §11.1: both aldb features
    /// active; 32 zero bytes when the bank holds no set of the next epoch); `None` when the bank
    /// hash is §10.1's. Only with `aldb`.
    pub next_set_hash: Option<Hash>,
}

impl BankEntry {
    /// The bank hash a client computes from what the entry holds (§10.1, or §11.1 with a next
    /// set), when it committed to a root.
    pub fn computed_bank_hash(&self) -> Option<Hash> {
        let c = self.aldb?;
        Some(aldb_verify::votes::bank_hash_binding(&c.h, &c.root, self.next_set_hash.as_ref(), self.hard_forks))
    }
}

/// A validator set a bank hash binds (`docs/SPEC.md` §11.2), logged once per distinct hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetEntry {
    /// The slot of the first bank the writer saw binding it.
    pub slot: u64,
    /// `set_hash`: `sha256("aldb-epoch-set-v1" || encoding)`.
    pub hash: Hash,
    /// The set's canonical encoding; its first eight bytes are its epoch.
    pub encoding: Vec<u8>,
}

impl SetEntry {
    /// An entry for `encoding`, its hash computed.
    pub fn new(slot: u64, encoding: Vec<u8>) -> Self {
        Self { slot, hash: set_hash(&encoding), encoding }
    }

    /// The epoch the set is for (its encoding's first field).
    pub fn epoch(&self) -> u64 {
        u64_at(&self.encoding, 0).unwrap_or(0)
    }
}

/// §11.2's `set_hash` of an encoding, whatever it holds.
pub fn set_hash(encoding: &[u8]) -> Hash {
    let mut h = Sha256::new();
    h.update(SET_DOMAIN);
    h.update(encoding);
    h.finalize().into()
}

/// A slot's evidence kept whole: its bank and the votes chosen for it, which the writer appends
/// again when pruning would delete the segments they lie in (an epoch transition's slot,
/// `docs/FORMAT.md` "Vote-evidence log", retention).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeptEvidence {
    /// The slot's bank.
    pub bank: BankEntry,
    /// The vote transactions on the slot, as on the wire.
    pub votes: Vec<Vec<u8>>,
}

/// Vote transactions of one block, as on the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VotesEntry {
    /// The block's slot.
    pub slot: u64,
    /// The transactions (each at most 1232 bytes).
    pub transactions: Vec<Vec<u8>>,
}

/// An entry of the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VoteLogEntry {
    /// A frozen bank.
    Bank(BankEntry),
    /// Vote transactions of a block.
    Votes(VotesEntry),
    /// A next epoch's validator set a bank hash binds.
    Set(SetEntry),
    /// A slot's evidence kept past the pruning of its segments.
    Kept(KeptEvidence),
}

impl VoteLogEntry {
    /// The slot the entry is about.
    pub fn slot(&self) -> u64 {
        match self {
            Self::Bank(b) => b.slot,
            Self::Votes(v) => v.slot,
            Self::Set(s) => s.slot,
            Self::Kept(k) => k.bank.slot,
        }
    }
}

/// The entry's bytes. Fails on a transaction longer than 1232 bytes, a payload above
/// [`MAX_PAYLOAD`] (more than a few hundred votes: split them over several entries) or, for a
/// set, above [`MAX_SET_PAYLOAD`], and on a next set without a root.
pub fn encode_entry(entry: &VoteLogEntry) -> Result<Vec<u8>, VoteLogError> {
    let mut p = Vec::with_capacity(PREFIX_LEN + BANK_SET_BODY_LEN);
    let max = match entry {
        VoteLogEntry::Bank(b) => {
            p.push(KIND_BANK);
            p.extend_from_slice(&b.slot.to_le_bytes());
            bank_body(&mut p, b)?;
            MAX_PAYLOAD
        }
        VoteLogEntry::Votes(v) => {
            p.push(KIND_VOTES);
            p.extend_from_slice(&v.slot.to_le_bytes());
            votes_body(&mut p, &v.transactions)?;
            MAX_PAYLOAD
        }
        VoteLogEntry::Set(s) => {
            p.push(KIND_SET);
            p.extend_from_slice(&s.slot.to_le_bytes());
            p.extend_from_slice(&s.hash);
            p.extend_from_slice(&s.encoding);
            MAX_SET_PAYLOAD
        }
        VoteLogEntry::Kept(k) => {
            p.push(KIND_KEPT);
            p.extend_from_slice(&k.bank.slot.to_le_bytes());
            bank_body(&mut p, &k.bank)?;
            votes_body(&mut p, &k.votes)?;
            MAX_PAYLOAD
        }
    };
    if p.len() > max {
        return Err(VoteLogError::Input(format!("an entry of {} bytes", p.len())));
    }
    let mut out = Vec::with_capacity(4 + p.len() + 8);
    out.extend_from_slice(&(p.len() as u32).to_le_bytes());
    out.extend_from_slice(&p);
    out.extend_from_slice(&xxh3_64(&p).to_le_bytes());
    Ok(out)
}

fn bank_body(p: &mut Vec<u8>, b: &BankEntry) -> Result<(), VoteLogError> {
    if b.next_set_hash.is_some() && b.aldb.is_none() {
        return Err(VoteLogError::Input(format!("slot {}: a next set bound without a root", b.slot)));
    }
    p.extend_from_slice(&b.parent.to_le_bytes());
    let flags = if b.aldb.is_some() { FLAG_ALDB } else { 0 }
        | if b.hard_forks.is_some() { FLAG_HARD_FORKS } else { 0 }
        | if b.next_set_hash.is_some() { FLAG_NEXT_SET } else { 0 };
    p.push(flags);
    p.extend_from_slice(&b.bank_hash);
    let c = b.aldb.unwrap_or(AldbCommitment { h: [0; 32], root: [0; 32] });
    p.extend_from_slice(&c.h);
    p.extend_from_slice(&c.root);
    p.extend_from_slice(&b.hard_forks.unwrap_or(0).to_le_bytes());
    if let Some(next) = &b.next_set_hash {
        p.extend_from_slice(next);
    }
    Ok(())
}

fn votes_body(p: &mut Vec<u8>, transactions: &[Vec<u8>]) -> Result<(), VoteLogError> {
    let n = u16::try_from(transactions.len())
        .map_err(|_| VoteLogError::Input(format!("{} transactions in one entry", transactions.len())))?;
    p.extend_from_slice(&n.to_le_bytes());
    for tx in transactions {
        if tx.len() > PACKET_DATA_SIZE {
            return Err(VoteLogError::Input(format!("a transaction of {} bytes", tx.len())));
        }
        // At most 1232, so it fits.
        p.extend_from_slice(&(tx.len() as u16).to_le_bytes());
        p.extend_from_slice(tx);
    }
    Ok(())
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    b.get(at..at + 8).and_then(|s| s.try_into().ok()).map(u64::from_le_bytes)
}

fn hash_at(b: &[u8], at: usize) -> Option<Hash> {
    b.get(at..at + 32).and_then(|s| s.try_into().ok())
}

/// Decodes a bank body at the start of `body` for `slot`; returns it and the bytes it took.
fn decode_bank(slot: u64, body: &[u8]) -> Option<(BankEntry, usize)> {
    let flags = *body.get(8)?;
    if flags & !(FLAG_ALDB | FLAG_HARD_FORKS | FLAG_NEXT_SET) != 0 {
        return None;
    }
    let aldb = flags & FLAG_ALDB != 0;
    let next = flags & FLAG_NEXT_SET != 0;
    if next && !aldb {
        return None;
    }
    let hard_forks = u64_at(body, 105)?;
    let bank = BankEntry {
        slot,
        parent: u64_at(body, 0)?,
        bank_hash: hash_at(body, 9)?,
        aldb: if aldb { Some(AldbCommitment { h: hash_at(body, 41)?, root: hash_at(body, 73)? }) } else { None },
        hard_forks: (flags & FLAG_HARD_FORKS != 0 && hard_forks != 0).then_some(hard_forks),
        next_set_hash: if next { Some(hash_at(body, BANK_BODY_LEN)?) } else { None },
    };
    Some((bank, if next { BANK_SET_BODY_LEN } else { BANK_BODY_LEN }))
}

/// Decodes a votes body that must fill `body` exactly.
fn decode_votes(body: &[u8]) -> Option<Vec<Vec<u8>>> {
    let n = u16::from_le_bytes(body.get(..2)?.try_into().ok()?);
    let mut at = 2;
    let mut transactions = Vec::with_capacity(usize::from(n).min(1024));
    for _ in 0..n {
        let len = usize::from(u16::from_le_bytes(body.get(at..at + 2)?.try_into().ok()?));
        if len > PACKET_DATA_SIZE {
            return None;
        }
        transactions.push(body.get(at + 2..at + 2 + len)?.to_vec());
        at += 2 + len;
    }
    (at == body.len()).then_some(transactions)
}

/// Decodes a payload whose checksum held; `None` when its body does not decode exactly.
fn decode_payload(p: &[u8]) -> Option<VoteLogEntry> {
    let kind = *p.first()?;
    let slot = u64_at(p, 1)?;
    let body = &p[PREFIX_LEN..];
    match kind {
        KIND_BANK => {
            let (bank, used) = decode_bank(slot, body)?;
            (used == body.len()).then_some(VoteLogEntry::Bank(bank))
        }
        KIND_VOTES => Some(VoteLogEntry::Votes(VotesEntry { slot, transactions: decode_votes(body)? })),
        KIND_SET => {
            let hash = hash_at(body, 0)?;
            let encoding = body.get(32..)?;
            // A set's hash is checked as its checksum is: an entry whose encoding is not what its
            // hash names is damage. The set's rules are the client's to check (§11.2).
            (encoding.len() >= SET_HEADER_LEN && set_hash(encoding) == hash)
                .then(|| VoteLogEntry::Set(SetEntry { slot, hash, encoding: encoding.to_vec() }))
        }
        KIND_KEPT => {
            let (bank, used) = decode_bank(slot, body)?;
            Some(VoteLogEntry::Kept(KeptEvidence { bank, votes: decode_votes(&body[used..])? }))
        }
        _ => None,
    }
}

/// Result of parsing an entry at the start of a buffer.
pub(crate) enum Parsed {
    /// A complete, valid entry and the bytes it took.
    Entry(VoteLogEntry, usize),
    /// What is there agrees with an entry, but the buffer ends inside it.
    Incomplete,
    /// Not a valid entry, whatever follows.
    Bad,
}

/// Parses the entry at the start of `buf`: the cheap checks first (a plausible length and a known
/// kind byte), since a reader resynchronising after damage calls this at every offset.
pub(crate) fn parse_entry(buf: &[u8]) -> Parsed {
    let Some(len_bytes) = buf.get(..4) else { return Parsed::Incomplete };
    let len = u32::from_le_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]]) as usize;
    if !(PREFIX_LEN..=MAX_SET_PAYLOAD).contains(&len) {
        return Parsed::Bad;
    }
    match buf.get(4) {
        Some(&KIND_BANK) if len != PREFIX_LEN + BANK_BODY_LEN && len != PREFIX_LEN + BANK_SET_BODY_LEN => {
            return Parsed::Bad;
        }
        Some(&KIND_SET) if len < PREFIX_LEN + 32 + SET_HEADER_LEN => return Parsed::Bad,
        Some(&KIND_BANK | &KIND_VOTES | &KIND_KEPT) if len > MAX_PAYLOAD => return Parsed::Bad,
        Some(&KIND_BANK | &KIND_VOTES | &KIND_SET | &KIND_KEPT) => {}
        Some(_) => return Parsed::Bad,
        None => return Parsed::Incomplete,
    }
    let (Some(payload), Some(sum)) = (buf.get(4..4 + len), u64_at(buf, 4 + len)) else {
        return Parsed::Incomplete;
    };
    if sum != xxh3_64(payload) {
        return Parsed::Bad;
    }
    match decode_payload(payload) {
        Some(e) => Parsed::Entry(e, 4 + len + 8),
        None => Parsed::Bad,
    }
}

/// What scanning part of a segment found; offsets are from the segment's start.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    /// Valid entries with their byte ranges, in file order.
    pub(crate) entries: Vec<(Range<usize>, VoteLogEntry)>,
    /// Damaged spans: bytes holding no valid entry with a valid entry after them.
    pub(crate) damaged: u64,
    /// Just past the last valid entry (or the scan's start): what follows holds no valid entry
    /// yet. A follower of a growing segment resumes here; the writer cuts here.
    pub(crate) end: usize,
}

/// Scans `buf`, a segment's bytes from offset `base` on. With `growing` (the newest segment,
/// still appended to) the scan stops at an entry that has begun but not ended, which a later
/// scan finds complete.
pub(crate) fn scan(buf: &[u8], base: usize, growing: bool) -> Scan {
    let mut out = Scan { end: base, ..Scan::default() };
    let mut in_gap = false;
    let mut at = 0;
    while at < buf.len() {
        match parse_entry(&buf[at..]) {
            Parsed::Entry(e, used) => {
                if std::mem::take(&mut in_gap) {
                    out.damaged += 1;
                }
                out.entries.push((base + at..base + at + used, e));
                at += used;
                out.end = base + at;
            }
            Parsed::Incomplete if growing => break,
            Parsed::Incomplete | Parsed::Bad => {
                in_gap = true;
                at += 1;
            }
        }
    }
    out
}
