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
        next_set_hash: None,
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
fn a_prune_between_refreshes_reads_as_pruned_not_as_unvoted() {
    let dir = tempfile::tempdir().unwrap();
    let opts = VoteLogOptions { segment_bytes: 1 << 20, segment_slots: 10 };
    let mut log = VoteLog::open_with(dir.path(), opts).unwrap();
    for s in 2..=45 {
        log.append(&slot_entries(s)).unwrap();
    }
    let mut r = VoteLogReader::new(dir.path());
    r.refresh().unwrap();
    assert_eq!(r.oldest_slot_present(), Some(2));
    // Slot 11 is the last of segment 2; its votes lie in segment 12's first block.
    assert_eq!(r.slot_votes(11, 8).unwrap().unwrap().votes.len(), 4);
    // Segment 2 goes (keep from 12), then 12 too, with no refresh in between: the index still
    // holds both.
    assert_eq!(log.prune(12).unwrap(), 1);
    assert_eq!(r.oldest_slot(), Some(2));
    assert_eq!(r.oldest_slot_present(), Some(12));
    assert!(r.slot_votes(5, 8).unwrap().is_none(), "a bank in a deleted segment");
    assert_eq!(log.prune(22).unwrap(), 1);
    assert_eq!(r.oldest_slot_present(), Some(22));
    // Slot 21's bank is in deleted segment 12; slot 11's votes were there as well.
    assert!(r.slot_votes(21, 8).unwrap().is_none());
    assert!(r.slot_votes(11, 8).unwrap().is_none());
    assert_eq!(r.slot_votes(30, 8).unwrap().unwrap().votes.len(), 4);
    r.refresh().unwrap();
    assert_eq!((r.oldest_slot(), r.oldest_slot_present()), (Some(22), Some(22)));
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

/// The encoding of a set of `epoch` whose members are `members` vote accounts of [`vote_tx`]'s
/// voters `0..members` (vote account `[v + 100; 32]`, voter `[v; 32]`), each of stake 10.
fn set_of(epoch: u64, members: u8) -> Vec<u8> {
    use aldb_verify::votes::Validator;
    let m: Vec<Validator> = (0..members)
        .map(|v| Validator { vote_account: [v.wrapping_add(100); 32], authorized_voter: [v; 32], stake: 10 })
        .collect();
    aldb_verify::epochs::EpochSet::new(epoch, 10 * u64::from(members), &m).unwrap().encode()
}

/// Slot `slot`'s bank binding `next` (§11.1).
fn bank_binding(slot: u64, next: [u8; 32]) -> BankEntry {
    let mut b = bank(slot);
    let c = b.aldb.unwrap();
    b.next_set_hash = Some(next);
    b.bank_hash = aldb_verify::votes::bank_hash_binding(&c.h, &c.root, Some(&next), None);
    b
}

#[test]
fn banks_binding_a_set_sets_and_kept_evidence_round_trip_beside_old_entries() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = VoteLog::open(dir.path()).unwrap();
    let set = SetEntry::new(3, set_of(2, 3));
    assert_eq!(set.epoch(), 2);
    let binding = bank_binding(3, set.hash);
    let mut unbound = bank_binding(4, [0; 32]);
    unbound.hard_forks = Some(1);
    let kept = KeptEvidence { bank: binding, votes: vec![vote_tx(3, binding.bank_hash, 1)] };
    let entries = vec![
        VoteLogEntry::Bank(bank(2)),
        VoteLogEntry::Set(set.clone()),
        VoteLogEntry::Bank(binding),
        VoteLogEntry::Bank(unbound),
        VoteLogEntry::Kept(kept.clone()),
    ];
    log.append(&entries).unwrap();
    // A bank entry without a next set is byte for byte the first format's: old logs read alike.
    assert_eq!(encode_entry(&entries[0]).unwrap().len(), 4 + 122 + 8);
    assert_eq!(encode_entry(&entries[2]).unwrap().len(), 4 + 154 + 8);
    let seg = newest_segment(dir.path());
    let bytes = std::fs::read(&seg).unwrap();
    let s = entry::scan(&bytes[VOTES_HEADER_LEN..], VOTES_HEADER_LEN, false);
    assert_eq!(s.entries.into_iter().map(|(_, e)| e).collect::<Vec<_>>(), entries);
    assert_eq!(binding.computed_bank_hash(), Some(binding.bank_hash));
    assert_eq!(bank(2).computed_bank_hash(), Some(bank(2).bank_hash));

    let mut r = VoteLogReader::new(dir.path());
    assert_eq!(r.refresh().unwrap(), 5);
    assert_eq!(r.bank(3), Some(&binding));
    assert_eq!(r.bank(4).unwrap().next_set_hash, Some([0; 32]));
    assert_eq!(r.set_epochs(), [2]);
    assert_eq!(r.set_encoding(&set.hash).unwrap(), Some(set.encoding.clone()));
    // Kept evidence is not a bank: the slots logged are those of the bank entries.
    assert_eq!((r.oldest_slot(), r.newest_slot()), (Some(2), Some(4)));

    // A next set without a root is refused before anything is written.
    let mut bad = bank(5);
    bad.aldb = None;
    bad.next_set_hash = Some([1; 32]);
    assert!(matches!(log.append(&[VoteLogEntry::Bank(bad)]), Err(VoteLogError::Input(_))));
    assert_eq!(r.refresh().unwrap(), 0);
}

#[test]
fn a_set_entry_whose_encoding_is_not_its_hash_is_skipped_as_damage() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = VoteLog::open(dir.path()).unwrap();
    let set = SetEntry::new(3, set_of(2, 3));
    let other = SetEntry::new(3, set_of(3, 2));
    log.append(&[VoteLogEntry::Set(set.clone()), VoteLogEntry::Set(other.clone())]).unwrap();
    drop(log);
    let seg = newest_segment(dir.path());
    let mut bytes = std::fs::read(&seg).unwrap();
    // Change a stake in the first set's encoding and make its checksum right again: only the
    // hash can tell.
    let at = VOTES_HEADER_LEN;
    let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    bytes[at + 4 + 9 + 32 + 20 + 64] ^= 1;
    let sum = xxhash_rust::xxh3::xxh3_64(&bytes[at + 4..at + 4 + len]);
    bytes[at + 4 + len..at + 4 + len + 8].copy_from_slice(&sum.to_le_bytes());
    std::fs::write(&seg, &bytes).unwrap();
    let mut r = VoteLogReader::new(dir.path());
    assert_eq!(r.refresh().unwrap(), 1);
    assert_eq!(r.damaged_entries(), 1);
    assert_eq!(r.set_epochs(), [3]);
    assert_eq!(r.set_encoding(&set.hash).unwrap(), None);
    assert_eq!(r.set_encoding(&other.hash).unwrap(), Some(other.encoding));
}

/// Epochs of ten slots: slots `10e..10e+9` are epoch `e` and bind the set of `e + 1`. Voters 0
/// to 2 vote on every slot in the next block. No set of epoch 1 is logged (the feature activated
/// in epoch 1), so the transition to 2 is the slot with the most voters: slot 13, where a fourth
/// voter joins. After pruning everything but the newest segments, every transition is still
/// found, from kept evidence, and a reader started afresh finds the same.
/// The sets of epochs 2 to 5, each logged at the first slot of the epoch before (10-slot
/// epochs).
fn epoch_sets() -> Vec<SetEntry> {
    (2..=5).map(|e| SetEntry::new(10 * (e - 1), set_of(e, 4))).collect()
}

/// Appends slots `slots` of 10-slot epochs: each bank binds the set of its epoch + 1 (epoch 5's
/// from slot 40 on), each set is logged at its epoch's first slot, and each block holds three
/// votes on the slot before (four on slot 13). Returns the banks.
fn append_epochs(log: &mut VoteLog, sets: &[SetEntry], slots: std::ops::Range<u64>) -> BTreeMap<u64, BankEntry> {
    let mut banks = BTreeMap::new();
    for s in slots {
        let mut entries = Vec::new();
        let set = &sets[((s / 10).min(4) - 1) as usize];
        if s % 10 == 0 && s <= 40 {
            entries.push(VoteLogEntry::Set(set.clone()));
        }
        let b = bank_binding(s, set.hash);
        banks.insert(s, b);
        entries.push(VoteLogEntry::Bank(b));
        if let Some(prev) = banks.get(&(s - 1)) {
            let voters: u8 = if s - 1 == 13 { 4 } else { 3 };
            let txs = (0..voters).map(|v| vote_tx(s - 1, prev.bank_hash, v)).collect();
            entries.push(VoteLogEntry::Votes(VotesEntry { slot: s, transactions: txs }));
        }
        log.append(&entries).unwrap();
    }
    banks
}

#[test]
fn transitions_are_kept_past_the_pruning_of_their_segments() {
    let dir = tempfile::tempdir().unwrap();
    let opts = VoteLogOptions { segment_bytes: 1 << 20, segment_slots: 10 };
    let mut log = VoteLog::open_with(dir.path(), opts).unwrap();
    let sets = epoch_sets();
    append_epochs(&mut log, &sets, 10..50);
    let mut r = VoteLogReader::new(dir.path());
    r.refresh().unwrap();
    assert_eq!(r.set_epochs(), [2, 3, 4, 5]);
    assert!(r.transition(1, DEFAULT_WINDOW).unwrap().is_none(), "no set of epoch 1");
    assert!(r.transition(0, DEFAULT_WINDOW).unwrap().is_none());
    let before = r.transition(2, DEFAULT_WINDOW).unwrap().unwrap();
    assert_eq!(before.evidence.bank.slot, 13, "the most voters, no set of epoch 1 to vouch");
    assert_eq!(before.evidence.votes.len(), 4);
    assert_eq!((before.set_hash, &before.set_encoding), (sets[0].hash, &sets[0].encoding));
    assert!(!before.kept);
    // These votes' signatures are not real: with the set of the epoch before held, only a slot it
    // vouches for qualifies, and none does.
    for e in 3..=5 {
        assert!(r.transition(e, DEFAULT_WINDOW).unwrap().is_none(), "epoch {e}");
    }

    assert_eq!(log.prune(45).unwrap(), 3);
    r.refresh().unwrap();
    assert_eq!(r.set_epochs(), [2, 3, 4, 5], "every set is kept");
    let after = r.transition(2, DEFAULT_WINDOW).unwrap().unwrap();
    assert!(after.kept);
    // The kept evidence and its set went into one segment, which says so to a shipper.
    let holding: Vec<u64> = list_segments(log.dir())
        .unwrap()
        .into_iter()
        .filter(|(_, path)| segment_extent(&std::fs::read(path).unwrap()).transitions == [2])
        .map(|(first, _)| first)
        .collect();
    assert_eq!(holding, after.segments);
    assert_eq!((after.evidence.bank, &after.evidence.votes), (before.evidence.bank, &before.evidence.votes));
    // Pruned again, the kept entries are kept again, and a fresh reader finds them.
    for s in 50..90u64 {
        log.append(&[VoteLogEntry::Bank(bank(s))]).unwrap();
    }
    assert!(log.prune(85).unwrap() >= 2);
    let mut fresh = VoteLogReader::new(dir.path());
    fresh.refresh().unwrap();
    assert_eq!(fresh.oldest_slot(), Some(80));
    assert_eq!(fresh.set_epochs(), [2, 3, 4, 5]);
    let again = fresh.transition(2, DEFAULT_WINDOW).unwrap().unwrap();
    assert_eq!((again.evidence.bank, &again.evidence.votes), (before.evidence.bank, &before.evidence.votes));
}

#[test]
fn the_newest_transitions_are_carried_so_a_copy_of_the_newest_segments_serves_them() {
    let dir = tempfile::tempdir().unwrap();
    let opts = VoteLogOptions { segment_bytes: 1 << 20, segment_slots: 10 };
    let carry = Carry { every_slots: 30, epochs: 2, refresh_slots: 0 };
    let mut log = VoteLog::open_with(dir.path(), opts).unwrap().with_carry(carry);
    let sets = epoch_sets();
    let banks = append_epochs(&mut log, &sets, 10..120);
    let mut whole = VoteLogReader::new(dir.path());
    whole.refresh().unwrap();
    let expected = whole.transition(2, DEFAULT_WINDOW).unwrap().unwrap();
    assert_eq!(expected.evidence.bank.slot, 13);

    // A copy holding only the newest 40 slots' segments, as a replica keeps them.
    let segs = list_segments(log.dir()).unwrap();
    let newest = banks.keys().next_back().copied().unwrap();
    let copy = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(copy.path().join(VOTES_DIR)).unwrap();
    let mut copied = 0;
    for (first, path) in &segs {
        if *first + 40 >= newest {
            std::fs::copy(path, copy.path().join(VOTES_DIR).join(path.file_name().unwrap())).unwrap();
            copied += 1;
        }
    }
    assert!(copied >= 2 && copied < segs.len(), "{copied} of {}", segs.len());
    let mut r = VoteLogReader::new(copy.path());
    r.refresh().unwrap();
    assert!(r.oldest_slot().unwrap() > 40, "the copy holds none of the epochs' own slots");
    // Only epoch 2 has a transition (these votes' signatures are not real, so the set of epoch 2
    // vouches for no slot of epoch 3 or later): its set alone is carried.
    assert_eq!(r.set_epochs(), [2]);
    let carried = r.transition(2, DEFAULT_WINDOW).unwrap().expect("epoch 2's transition, carried");
    assert!(carried.kept);
    assert_eq!((carried.set_hash, &carried.set_encoding), (expected.set_hash, &expected.set_encoding));
    // Every segment a carry went into lists epoch 2 in its extent; those it did not, nothing
    // (the set's own entry at slot 10 is not a whole transition without kept evidence).
    for (first, path) in &segs {
        let listed = segment_extent(&std::fs::read(path).unwrap()).transitions;
        let carried_here = *first >= 30 && (*first - 10) % 30 == 0;
        assert_eq!(listed, if carried_here { vec![2] } else { vec![] }, "segment {first}");
    }
    assert_eq!((carried.evidence.bank, &carried.evidence.votes), (expected.evidence.bank, &expected.evidence.votes));

    // Without carrying, the same copy has nothing of epoch 2.
    let plain = tempfile::tempdir().unwrap();
    let mut log = VoteLog::open_with(plain.path(), opts).unwrap().with_carry(Carry {
        every_slots: 0,
        epochs: 2,
        refresh_slots: 0,
    });
    append_epochs(&mut log, &sets, 10..120);
    let newest_only = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(newest_only.path().join(VOTES_DIR)).unwrap();
    for (first, path) in list_segments(log.dir()).unwrap() {
        if first + 40 >= newest {
            std::fs::copy(&path, newest_only.path().join(VOTES_DIR).join(path.file_name().unwrap())).unwrap();
        }
    }
    let mut r = VoteLogReader::new(newest_only.path());
    r.refresh().unwrap();
    assert!(r.set_epochs().is_empty());
}

#[test]
fn kept_evidence_and_its_set_share_a_segment_however_small_segments_are() {
    // A segment of one entry: every entry but a set after the kept evidence binding it rolls.
    let dir = tempfile::tempdir().unwrap();
    let opts = VoteLogOptions { segment_bytes: 1, segment_slots: 10 };
    let mut log =
        VoteLog::open_with(dir.path(), opts).unwrap().with_carry(Carry { every_slots: 0, epochs: 0, refresh_slots: 0 });
    let sets = epoch_sets();
    append_epochs(&mut log, &sets, 10..50);
    assert!(log.prune(45).unwrap() > 0);
    let mut listed = Vec::new();
    for (first, path) in list_segments(log.dir()).unwrap() {
        let bytes = std::fs::read(&path).unwrap();
        let extent = segment_extent(&bytes);
        if !extent.transitions.is_empty() {
            listed.push((first, extent.transitions));
        }
    }
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].1, [2]);
    // That segment alone serves the transition, as the whole log does.
    let copy = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(copy.path().join(VOTES_DIR)).unwrap();
    let name = segment_name(listed[0].0);
    std::fs::copy(log.dir().join(&name), copy.path().join(VOTES_DIR).join(&name)).unwrap();
    let (mut alone, mut whole) = (VoteLogReader::new(copy.path()), VoteLogReader::new(dir.path()));
    alone.refresh().unwrap();
    whole.refresh().unwrap();
    let (a, w) =
        (alone.transition(2, DEFAULT_WINDOW).unwrap().unwrap(), whole.transition(2, DEFAULT_WINDOW).unwrap().unwrap());
    assert_eq!((a.set_hash, a.evidence.bank, a.evidence.votes), (w.set_hash, w.evidence.bank, w.evidence.votes));
}
