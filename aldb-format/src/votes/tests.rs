//! The vote-evidence log across crashes, damage, pruning and reopening, with real files.

use std::collections::BTreeMap;
use std::io::Write;

use aldb_verify::votes::mix_root;

use super::*;

/// A legacy one-signer TowerSync transaction voting on `slot` with `hash`, as agave builds one
/// when the node identity is the authorized voter (`docs/SPEC.md` §10.3). The signature is not
/// valid: the log never checks signatures.
fn vote_tx(slot: u64, hash: [u8; 32], voter: u8) -> Vec<u8> {
    vote_tx_by(slot, hash, [voter; 32], [voter.wrapping_add(100); 32])
}

/// A one-signer vote on `slot` with `hash` for `vote_account`, signed (in form) by `voter`.
fn vote_tx_by(slot: u64, hash: [u8; 32], voter: [u8; 32], vote_account: [u8; 32]) -> Vec<u8> {
    let mut data = Vec::new();
    data.extend_from_slice(&14u32.to_le_bytes());
    data.extend_from_slice(&u64::MAX.to_le_bytes()); // no root
    data.push(1); // one lockout
    let mut v = slot;
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            data.push(b);
            break;
        }
        data.push(b | 0x80);
    }
    data.push(1);
    data.extend_from_slice(&hash);
    data.push(0); // no timestamp
    data.extend_from_slice(&[0; 32]); // block id
    let mut tx = vec![1];
    tx.extend_from_slice(&[voter[0]; 64]);
    tx.extend_from_slice(&[1, 0, 1, 3]);
    tx.extend_from_slice(&voter);
    tx.extend_from_slice(&vote_account);
    tx.extend_from_slice(&aldb_verify::votes::VOTE_PROGRAM_ID);
    tx.extend_from_slice(&[9; 32]);
    tx.extend_from_slice(&[1, 2, 2, 1, 0, data.len() as u8]);
    tx.extend_from_slice(&data);
    tx
}

fn bank(slot: u64) -> BankEntry {
    let h = [slot as u8; 32];
    let root = [slot as u8 ^ 0x55; 32];
    BankEntry {
        slot,
        parent: slot.saturating_sub(1),
        bank_hash: mix_root(&h, &root),
        aldb: Some(AldbCommitment { h, root }),
        hard_forks: None,
    }
}

/// Slot `s`'s bank, and its block's votes on `s - 1` by three voters plus a vote on `s - 2`.
fn slot_entries(s: u64) -> Vec<VoteLogEntry> {
    let prev = bank(s - 1).bank_hash;
    let mut txs: Vec<Vec<u8>> = (0..3).map(|v| vote_tx(s - 1, prev, v)).collect();
    txs.push(vote_tx(s.saturating_sub(2), [7; 32], 3));
    vec![VoteLogEntry::Bank(bank(s)), VoteLogEntry::Votes(VotesEntry { slot: s, transactions: txs })]
}

fn newest_segment(dir: &std::path::Path) -> std::path::PathBuf {
    list_segments(&dir.join(VOTES_DIR)).unwrap().pop().unwrap().1
}

#[test]
fn entries_round_trip_and_a_reader_selects_the_votes_on_the_slot() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = VoteLog::open(dir.path()).unwrap();
    let mut hf = bank(1);
    hf.aldb = None;
    hf.hard_forks = Some(2);
    log.append(&[VoteLogEntry::Bank(hf)]).unwrap();
    for s in 2..=10 {
        log.append(&slot_entries(s)).unwrap();
    }
    let mut r = VoteLogReader::new(dir.path());
    assert_eq!(r.refresh().unwrap(), 1 + 9 * 2);
    assert_eq!(r.bank(1), Some(&hf));
    assert_eq!(r.bank(5), Some(&bank(5)));
    let ev = r.slot_votes(5, DEFAULT_WINDOW).unwrap().unwrap();
    assert_eq!(ev.bank, bank(5));
    // Slot 6 votes on 5 three times; slot 7's odd vote is on 5 as well, by a fourth voter.
    assert_eq!(ev.votes.len(), 4);
    for tx in &ev.votes {
        assert_eq!(aldb_verify::votes::VoteTransaction::parse(tx).unwrap().tower.slot(), 5);
    }
    assert_eq!(ev.searched_to, 10);
    // A window of one block sees only slot 6.
    assert_eq!(r.slot_votes(5, 1).unwrap().unwrap().votes.len(), 3);
    assert!(r.slot_votes(11, DEFAULT_WINDOW).unwrap().is_none());
    assert_eq!(r.refresh().unwrap(), 0);
    assert_eq!(r.damaged_entries(), 0);
}

#[test]
fn a_torn_tail_is_waited_for_by_readers_and_cut_by_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = VoteLog::open(dir.path()).unwrap();
    for s in 2..=4 {
        log.append(&slot_entries(s)).unwrap();
    }
    drop(log);
    let seg = newest_segment(dir.path());
    let whole = encode_entry(&slot_entries(5)[1]).unwrap();
    let mut f = std::fs::OpenOptions::new().append(true).open(&seg).unwrap();
    f.write_all(&whole[..whole.len() / 2]).unwrap();
    drop(f);
    let mut r = VoteLogReader::new(dir.path());
    assert_eq!(r.refresh().unwrap(), 6);
    assert_eq!(r.damaged_entries(), 0);
    let torn_len = std::fs::metadata(&seg).unwrap().len();

    let mut log = VoteLog::open(dir.path()).unwrap();
    assert!(std::fs::metadata(&seg).unwrap().len() < torn_len, "the torn tail is cut");
    log.append(&slot_entries(5)).unwrap();
    // The follower resumes where the torn entry began and finds the new ones intact.
    assert_eq!(r.refresh().unwrap(), 2);
    assert_eq!(r.damaged_entries(), 0);
    assert_eq!(r.slot_votes(4, 8).unwrap().unwrap().votes.len(), 3);
    assert_eq!(VoteLogReader::new(dir.path()).refresh().unwrap(), 8);
}

#[test]
fn a_corrupted_entry_is_skipped_and_counted_and_the_rest_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = VoteLog::open(dir.path()).unwrap();
    for s in 2..=6 {
        log.append(&slot_entries(s)).unwrap();
    }
    drop(log);
    let seg = newest_segment(dir.path());
    let mut bytes = std::fs::read(&seg).unwrap();
    // Flip a byte inside slot 3's votes entry (the fourth entry).
    let mut at = VOTES_HEADER_LEN;
    for _ in 0..3 {
        at += 4 + u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize + 8;
    }
    bytes[at + 40] ^= 0xff;
    std::fs::write(&seg, &bytes).unwrap();

    let mut r = VoteLogReader::new(dir.path());
    assert_eq!(r.refresh().unwrap(), 9);
    assert_eq!(r.damaged_entries(), 1);
    assert_eq!(r.slot_votes(2, 8).unwrap().unwrap().votes.len(), 1, "only slot 4's odd vote on 2 is left");
    assert_eq!(r.slot_votes(4, 8).unwrap().unwrap().votes.len(), 4);
    // The writer keeps the damaged entry (it is not a tail) and appends after it.
    let mut log = VoteLog::open(dir.path()).unwrap();
    assert_eq!(std::fs::metadata(&seg).unwrap().len(), bytes.len() as u64);
    log.append(&slot_entries(7)).unwrap();
    assert_eq!(r.refresh().unwrap(), 2);
    assert_eq!(r.slot_votes(6, 8).unwrap().unwrap().votes.len(), 3);
}

#[test]
fn a_segment_replaced_by_intact_bytes_is_read_again_whole() {
    let dir = tempfile::tempdir().unwrap();
    let opts = VoteLogOptions { segment_bytes: 1 << 20, segment_slots: 4 };
    let mut log = VoteLog::open_with(dir.path(), opts).unwrap();
    for s in 2..=9 {
        log.append(&slot_entries(s)).unwrap();
    }
    drop(log);
    let segs = list_segments(&dir.path().join(VOTES_DIR)).unwrap();
    let (first, path) = segs[0].clone();
    let intact = std::fs::read(&path).unwrap();
    // A copy damaged inside slot 3's votes entry, as a replica may have copied it.
    let mut damaged = intact.clone();
    let mut at = VOTES_HEADER_LEN;
    for _ in 0..3 {
        at += 4 + u32::from_le_bytes(damaged[at..at + 4].try_into().unwrap()) as usize + 8;
    }
    damaged[at + 40] ^= 0xff;
    std::fs::write(&path, &damaged).unwrap();
    let mut r = VoteLogReader::new(dir.path());
    r.refresh().unwrap();
    assert_eq!(r.slot_votes(2, 8).unwrap().unwrap().votes.len(), 1);
    // Replaced by the intact bytes (same length): unseen by a follower until it reads it again.
    let tmp = dir.path().join(VOTES_DIR).join(".tmp");
    std::fs::write(&tmp, &intact).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    assert_eq!(r.refresh().unwrap(), 0);
    assert_eq!(r.slot_votes(2, 8).unwrap().unwrap().votes.len(), 1);
    r.reread(first);
    assert!(r.refresh().unwrap() > 0);
    let whole = |r: &VoteLogReader, s| r.slot_votes(s, 8).unwrap().unwrap();
    let mut fresh = VoteLogReader::new(dir.path());
    fresh.refresh().unwrap();
    for s in 2..=8 {
        assert_eq!(whole(&r, s), whole(&fresh, s), "slot {s}");
    }
    assert_eq!((r.oldest_slot(), r.newest_slot()), (Some(2), Some(9)));
}

#[test]
fn pruning_deletes_old_segments_and_readers_forget_them() {
    let dir = tempfile::tempdir().unwrap();
    let opts = VoteLogOptions { segment_bytes: 1 << 20, segment_slots: 10 };
    let mut log = VoteLog::open_with(dir.path(), opts).unwrap();
    for s in 2..=45 {
        log.append(&slot_entries(s)).unwrap();
    }
    let segs = list_segments(log.dir()).unwrap();
    assert_eq!(segs.iter().map(|(f, _)| *f).collect::<Vec<_>>(), [2, 12, 22, 32, 42]);
    let mut r = VoteLogReader::new(dir.path());
    r.refresh().unwrap();
    assert_eq!(r.oldest_slot(), Some(2));
    // Keep slots from 25: segments 2 and 12 hold only older slots; 22 holds 25.
    assert_eq!(log.prune(25).unwrap(), 2);
    assert_eq!(list_segments(log.dir()).unwrap().len(), 3);
    r.refresh().unwrap();
    assert_eq!(r.oldest_slot(), Some(22));
    assert!(r.slot_votes(15, 8).unwrap().is_none());
    assert_eq!(r.slot_votes(30, 8).unwrap().unwrap().votes.len(), 4);
    // The newest segment is never deleted, whatever is asked.
    assert_eq!(log.prune(1000).unwrap(), 2);
    r.refresh().unwrap();
    assert_eq!(r.oldest_slot(), Some(42));
    // Reopened, the writer knows its segments and appends to the newest.
    drop(log);
    let mut log = VoteLog::open_with(dir.path(), opts).unwrap();
    assert_eq!(log.newest_slot(), Some(45));
    log.append(&slot_entries(46)).unwrap();
    assert_eq!(list_segments(log.dir()).unwrap().len(), 1);
    r.refresh().unwrap();
    assert_eq!(r.slot_votes(45, 8).unwrap().unwrap().votes.len(), 3);
}

#[test]
fn pruning_held_for_the_shipper_keeps_what_the_archive_may_lack() {
    let dir = tempfile::tempdir().unwrap();
    let opts = VoteLogOptions { segment_bytes: 1 << 20, segment_slots: 10 };
    let mut log = VoteLog::open_with(dir.path(), opts).unwrap();
    for s in 2..=45 {
        log.append(&slot_entries(s)).unwrap();
    }
    let names = |log: &VoteLog| list_segments(log.dir()).unwrap().iter().map(|(f, _)| *f).collect::<Vec<_>>();
    assert_eq!(names(&log), [2, 12, 22, 32, 42]);
    // No hold file: nothing is deleted, however old.
    assert_eq!(log.prune_held(1000).unwrap(), 0);
    assert_eq!(names(&log), [2, 12, 22, 32, 42]);
    // A hold that cannot be read holds everything too.
    std::fs::write(dir.path().join(crate::shipped::VOTES_SHIPPED_FILE), "aldb-shipped-votes 9 40\n").unwrap();
    assert_eq!(log.prune_held(1000).unwrap(), 0);
    // The shipper lacks segment 12 and later: only 2 goes, though keep_from allows more.
    crate::shipped::write_votes_shipped(dir.path(), 12).unwrap();
    assert_eq!(log.prune_held(1000).unwrap(), 1);
    assert_eq!(names(&log), [12, 22, 32, 42]);
    crate::shipped::write_votes_shipped(dir.path(), 32).unwrap();
    // keep_from still rules: 22 holds slot 25.
    assert_eq!(log.prune_held(25).unwrap(), 1);
    assert_eq!(names(&log), [22, 32, 42]);
    assert_eq!(log.prune_held(1000).unwrap(), 1);
    assert_eq!(names(&log), [32, 42]);
    // A hold past everything still never deletes the newest segment.
    crate::shipped::write_votes_shipped(dir.path(), u64::MAX).unwrap();
    assert_eq!(log.prune_held(1000).unwrap(), 1);
    assert_eq!(names(&log), [42]);
    // The hold file is not a segment: the log reopens and reads as before.
    drop(log);
    let log = VoteLog::open_with(dir.path(), opts).unwrap();
    assert_eq!(log.newest_slot(), Some(45));
}

#[test]
fn a_segment_with_a_damaged_header_is_read_and_a_new_one_started() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = VoteLog::open(dir.path()).unwrap();
    log.append(&slot_entries(2)).unwrap();
    drop(log);
    let seg = newest_segment(dir.path());
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[0] ^= 1;
    std::fs::write(&seg, &bytes).unwrap();
    let mut log = VoteLog::open(dir.path()).unwrap();
    log.append(&slot_entries(3)).unwrap();
    assert_eq!(list_segments(log.dir()).unwrap().len(), 2);
    let mut r = VoteLogReader::new(dir.path());
    assert_eq!(r.refresh().unwrap(), 4);
    assert_eq!(r.slot_votes(2, 8).unwrap().unwrap().votes.len(), 3);
}

#[test]
fn bad_input_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = VoteLog::open(dir.path()).unwrap();
    let long = VoteLogEntry::Votes(VotesEntry { slot: 3, transactions: vec![vec![0; 1233]] });
    assert!(matches!(log.append(&[VoteLogEntry::Bank(bank(3)), long]), Err(VoteLogError::Input(_))));
    let mut r = VoteLogReader::new(dir.path());
    assert_eq!(r.refresh().unwrap(), 0);
}

#[test]
fn no_bytes_make_the_scan_panic() {
    // xorshift64 with a fixed seed: damage at reproducible places.
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move |n: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % n as u64) as usize
    };
    let good: Vec<u8> = slot_entries(9).iter().flat_map(|e| encode_entry(e).unwrap()).collect();
    for _ in 0..2000 {
        let mut b = good.clone();
        for _ in 0..1 + next(8) {
            let i = next(b.len());
            b[i] = next(256) as u8;
        }
        b.truncate(next(b.len() + 1));
        let s = entry::scan(&b, 0, next(2) == 0);
        assert!(s.entries.len() <= 2);
        for (r, e) in &s.entries {
            assert_eq!(encode_entry(e).unwrap(), b[r.clone()]);
        }
    }
}

/// A key of its own for each `n`, unlike any [`vote_tx`] uses.
fn key(tag: u8, n: u32) -> [u8; 32] {
    let mut k = [tag; 32];
    k[..4].copy_from_slice(&n.to_le_bytes());
    k
}

/// The same vote in another transaction: another recent blockhash.
fn resent(tx: &[u8]) -> Vec<u8> {
    let mut tx = tx.to_vec();
    // Signatures (1 + 64), header (3), key count (1) and three keys: the blockhash follows.
    tx[1 + 64 + 4 + 3 * 32 + 5] ^= 1;
    tx
}

/// More outsiders' votes on a slot than an answer holds, in the block right after it, then the
/// honest ones: every vote account's selection is filled by outsiders, the set's selection
/// finds every honest vote; and neither lets a vote signed by another key, or an earlier vote
/// for another bank hash, stand in for a validator's vote.
#[test]
fn outsiders_cannot_crowd_out_the_votes_of_the_accounts_asked_for() {
    use aldb_verify::votes::MAX_EVIDENCE_VOTES;
    let dir = tempfile::tempdir().unwrap();
    let mut log = VoteLog::open(dir.path()).unwrap();
    let s = 100;
    let right = bank(s).bank_hash;
    log.append(&[VoteLogEntry::Bank(bank(s))]).unwrap();
    let outsiders: Vec<Vec<u8>> =
        (0..MAX_EVIDENCE_VOTES as u32 + 50).map(|n| vote_tx_by(s, right, key(0xA0, n), key(0xB0, n))).collect();
    // Validator i votes for vote account key(0xC0, i) with voter key(0xD0, i).
    let honest = |i: u32| vote_tx_by(s, right, key(0xD0, i), key(0xC0, i));
    // Before the honest votes: one signed by an outsider naming validator 0's vote account, and
    // validator 1's own vote for another bank of the slot.
    let forged = vote_tx_by(s, right, key(0xEE, 0), key(0xC0, 0));
    let other_bank = vote_tx_by(s, [7; 32], key(0xD0, 1), key(0xC0, 1));
    let mut first = vec![VoteLogEntry::Bank(bank(s + 1))];
    for chunk in outsiders.chunks(1000) {
        first.push(VoteLogEntry::Votes(VotesEntry { slot: s + 1, transactions: chunk.to_vec() }));
    }
    first.push(VoteLogEntry::Votes(VotesEntry { slot: s + 1, transactions: vec![forged, other_bank.clone()] }));
    log.append(&first).unwrap();
    // The honest votes, validator 2's twice (sent again with another blockhash, say).
    let again = resent(&honest(2));
    let second = vec![honest(0), honest(1), honest(2), again, honest(3)];
    log.append(&[VoteLogEntry::Votes(VotesEntry { slot: s + 2, transactions: second })]).unwrap();
    let mut r = VoteLogReader::new(dir.path());
    r.refresh().unwrap();

    let all = r.slot_votes(s, DEFAULT_WINDOW).unwrap().unwrap();
    assert_eq!(all.votes.len(), MAX_EVIDENCE_VOTES);
    assert_eq!(all.votes[..], outsiders[..MAX_EVIDENCE_VOTES], "the first keys to appear, in log order");

    let set: BTreeMap<[u8; 32], [u8; 32]> = (0..5).map(|i| (key(0xC0, i), key(0xD0, i))).collect();
    let got = r.slot_votes_for(s, DEFAULT_WINDOW, &VoteSelection::Voters(set.clone())).unwrap().unwrap();
    assert_eq!(got.votes, [honest(0), honest(1), honest(2), honest(3)], "validator 4 did not vote");
    // Validator 1's vote for the other bank is served only while it has no other.
    let early = r.slot_votes_for(s, 1, &VoteSelection::Voters(set)).unwrap().unwrap();
    assert_eq!(early.votes, [other_bank]);
}

/// Without outsiders, every vote account's selection serves each validator's vote once, keeps a
/// vote signed by another key beside it rather than instead of it, and prefers a vote for the
/// bank hash to an earlier one for another.
#[test]
fn every_accounts_selection_serves_one_vote_per_account_and_signer() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = VoteLog::open(dir.path()).unwrap();
    let s = 100;
    let right = bank(s).bank_hash;
    let honest = |i: u32| vote_tx_by(s, right, key(0xD0, i), key(0xC0, i));
    let forged = vote_tx_by(s, right, key(0xEE, 0), key(0xC0, 0));
    let other_bank = vote_tx_by(s, [7; 32], key(0xD0, 1), key(0xC0, 1));
    let again = resent(&honest(0));
    let txs = vec![forged.clone(), other_bank, honest(0), again, honest(1)];
    log.append(&[VoteLogEntry::Bank(bank(s)), VoteLogEntry::Votes(VotesEntry { slot: s + 1, transactions: txs })])
        .unwrap();
    let mut r = VoteLogReader::new(dir.path());
    r.refresh().unwrap();
    let got = r.slot_votes(s, DEFAULT_WINDOW).unwrap().unwrap();
    assert_eq!(got.votes, [forged, honest(0), honest(1)]);
}
