//! The vote-evidence log (`votes/`) on the bucket, against a real object store (SeaweedFS on
//! loopback): shipped in order and idempotently beside the snapshots and records, never past the
//! last valid entry of a segment being written, named in the manifest only once uploaded whole,
//! pruned with the archive; and a replica's copy of it, read by the ordinary `VoteLogReader`,
//! answers every slot as the directory's log does.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use aldb_fixture::votes::Voter;
use aldb_format::votes::{VOTES_DIR, VoteLog, VoteLogEntry, VoteLogReader, VotesEntry, encode_entry, list_segments};
use aldb_objstore::manifest::{Manifest, parse_checksum};
use aldb_objstore::{CacheConfig, LogMirror, ObjectStoreSource, Shipper};
use object_store::ObjectStore;
use object_store::path::Path;

use common::faulty::DiesAt;
use common::ship::{kill_at_manifest, object, read_manifest, rt, ship_config};
use common::votes::{bank, log_options};
use common::weed::Weed;

fn voters() -> Vec<Voter> {
    (0..3u8).map(|i| Voter::new([40 + i; 32], (i == 2).then_some([60; 32]), [80 + i; 32])).collect()
}

/// Slot `s`'s bank and its block's signed votes on `s - 1` (the first voter's twice).
fn slot_entries(s: u64, voters: &[Voter]) -> Vec<VoteLogEntry> {
    let prev = bank(s - 1).bank_hash;
    let mut txs: Vec<Vec<u8>> = voters.iter().map(|v| v.vote(s - 1, &prev)).collect();
    txs.push(txs[0].clone());
    vec![VoteLogEntry::Bank(bank(s)), VoteLogEntry::Votes(VotesEntry { slot: s, transactions: txs })]
}

fn append_slots(dir: &std::path::Path, slots: std::ops::RangeInclusive<u64>) {
    let vs = voters();
    let mut log = VoteLog::open_with(dir, log_options()).unwrap();
    for s in slots {
        log.append(&slot_entries(s, &vs)).unwrap();
    }
}

/// The vote segments of a directory by object name, with their bytes.
fn local_vote_files(dir: &std::path::Path) -> BTreeMap<String, Vec<u8>> {
    list_segments(&dir.join(VOTES_DIR))
        .unwrap()
        .into_iter()
        .map(|(_, p)| (format!("votes/{}", p.file_name().unwrap().to_string_lossy()), std::fs::read(p).unwrap()))
        .collect()
}

/// Every vote segment the manifest names exists and begins with the manifest's bytes.
async fn assert_votes_trustworthy(store: &Arc<dyn ObjectStore>, prefix: &Path, m: &Manifest) {
    for g in &m.vote_segments {
        let b = store.get(&object(prefix, &g.name)).await.unwrap().bytes().await.unwrap();
        let head = &b[..g.size as usize];
        assert_eq!(parse_checksum(&g.checksum), Some(xxhash_rust::xxh3::xxh3_128(head)), "{}", g.name);
    }
}

/// What a reader of `dir`'s vote log answers for every slot of `slots`.
fn answers(dir: &std::path::Path, slots: std::ops::RangeInclusive<u64>) -> Vec<String> {
    let mut r = VoteLogReader::new(dir);
    r.refresh().unwrap();
    let mut out = vec![format!("range {:?}..={:?}, damaged {}", r.oldest_slot(), r.newest_slot(), r.damaged_entries())];
    out.extend(slots.map(|s| format!("{s}: {:?}", r.slot_votes(s, 32).unwrap())));
    out
}

/// A directory with snapshots, records and a vote log over several segments, the oldest with a
/// damaged entry and the newest with a torn append: the shipped segments are the local ones up to their last valid entry, the
/// sealed ones flagged so; the replica's copy answers every slot as the directory does; the
/// segment grows after the writer reopens (cutting the torn bytes) and both the bucket and the
/// copy grow with it; a pass with nothing new uploads nothing.
#[test]
fn the_vote_log_is_shipped_and_a_replica_copy_answers_as_the_directory() {
    let Some(weed) = Weed::start() else { return };
    let rt = rt();
    let dir = tempfile::tempdir().unwrap();
    common::write_history(dir.path(), 5, 200, 12, 1000);
    append_slots(dir.path(), 100..=109);
    let newest_seg = list_segments(&dir.path().join(VOTES_DIR)).unwrap().pop().unwrap().1;
    let whole = std::fs::read(&newest_seg).unwrap();
    let torn = encode_entry(&slot_entries(110, &voters())[1]).unwrap();
    std::fs::write(&newest_seg, [&whole[..], &torn[..torn.len() / 2]].concat()).unwrap();
    // A damaged entry inside the oldest segment: shipped as it is, skipped alike by every reader.
    let oldest_seg = list_segments(&dir.path().join(VOTES_DIR)).unwrap()[0].1.clone();
    let mut bytes = std::fs::read(&oldest_seg).unwrap();
    bytes[aldb_format::votes::VOTES_HEADER_LEN + 20] ^= 0x01;
    std::fs::write(&oldest_seg, bytes).unwrap();
    let local = local_vote_files(dir.path());
    assert_eq!(local.len(), 3, "{:?}", local.keys());

    let (store, prefix) = weed.bucket("votes");
    let mut shipper = Shipper::new(store.clone(), prefix.clone(), ship_config(dir.path())).unwrap();
    let report = rt.block_on(shipper.ship_once()).unwrap();
    assert!(report.uploaded >= 12 + 1 + 3, "{report:?}");
    let m = rt.block_on(read_manifest(&store, &prefix)).unwrap();
    rt.block_on(assert_votes_trustworthy(&store, &prefix, &m));
    let names: Vec<&str> = m.vote_segments.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, local.keys().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(m.vote_segments.iter().map(|g| g.sealed).collect::<Vec<_>>(), [true, true, false]);
    assert_eq!(m.vote_segments.last().unwrap().last_slot, Some(109));
    for g in &m.vote_segments {
        let b = rt.block_on(async { store.get(&object(&prefix, &g.name)).await.unwrap().bytes().await.unwrap() });
        let want = if g.sealed { local[&g.name].clone() } else { whole.clone() };
        assert_eq!(b.to_vec(), want, "{}: the torn append is never shipped", g.name);
    }

    // The replica's copy, read by the ordinary reader, answers as the directory.
    let cache = tempfile::tempdir().unwrap();
    let src = rt
        .block_on(ObjectStoreSource::open(store.clone(), prefix.clone(), CacheConfig::new(cache.path(), 1 << 30)))
        .unwrap();
    let mut mirror = LogMirror::new(cache.path(), 1000).unwrap();
    let synced = rt.block_on(src.sync_logs(&mut mirror)).unwrap();
    assert_eq!(synced.new_vote_segments, 3, "{synced:?}");
    let mut copy = VoteLogReader::new(cache.path());
    copy.refresh().unwrap();
    assert_eq!((copy.damaged_entries(), copy.bank(100)), (1, None), "slot 100's bank entry is the damaged one");
    let v = copy.slot_votes(105, 32).unwrap().unwrap();
    assert_eq!((v.bank, v.votes.len(), v.searched_to), (bank(105), 3, 109), "three distinct signed votes");
    assert_eq!(answers(cache.path(), 95..=116), answers(dir.path(), 95..=116));

    // The writer reopens (cutting the torn bytes) and goes on: the shipped bytes are a prefix
    // of the grown segment, so the same object grows; the copy appends.
    append_slots(dir.path(), 110..=111);
    let report = rt.block_on(shipper.ship_once()).unwrap();
    assert_eq!(report.uploaded, 1, "only the grown segment: {report:?}");
    let m2 = rt.block_on(read_manifest(&store, &prefix)).unwrap();
    rt.block_on(assert_votes_trustworthy(&store, &prefix, &m2));
    assert_eq!(m2.vote_segments.last().unwrap().last_slot, Some(111));
    assert_eq!(shipper.metrics().failures.get(), 0);
    rt.block_on(src.refresh_manifest()).unwrap();
    let synced = rt.block_on(src.sync_logs(&mut mirror)).unwrap();
    assert_eq!((synced.new_segments, synced.dropped_segments), (0, 0), "{synced:?}");
    assert!(synced.bytes > 0);
    assert_eq!(answers(cache.path(), 95..=116), answers(dir.path(), 95..=116));

    // A new segment, then nothing new: the sealed one goes up once more, then nothing.
    append_slots(dir.path(), 112..=118);
    rt.block_on(shipper.ship_once()).unwrap();
    let again = rt.block_on(shipper.ship_once()).unwrap();
    assert_eq!((again.uploaded, again.manifests), (0, 0), "{again:?}");
    let m3 = rt.block_on(read_manifest(&store, &prefix)).unwrap();
    assert_eq!(m3.vote_segments.iter().filter(|g| !g.sealed).count(), 1);
    rt.block_on(src.refresh_manifest()).unwrap();
    rt.block_on(src.sync_logs(&mut mirror)).unwrap();
    assert_eq!(answers(cache.path(), 95..=120), answers(dir.path(), 95..=120));

    // A replica keeping fewer slots copies only the segments reaching them.
    let small = tempfile::tempdir().unwrap();
    let src2 = rt
        .block_on(ObjectStoreSource::open(store.clone(), prefix.clone(), CacheConfig::new(small.path(), 1 << 30)))
        .unwrap();
    let mut few = LogMirror::new(small.path(), 1000).unwrap().with_vote_keep(3);
    rt.block_on(src2.sync_logs(&mut few)).unwrap();
    let mut r = VoteLogReader::new(small.path());
    r.refresh().unwrap();
    assert_eq!(r.newest_slot(), Some(118));
    assert_eq!(r.oldest_slot(), Some(112), "the segments of 112..=115 and 116..=118");
}

/// A shipper killed at its k-th PUT of a pass that grows one vote segment and starts another
/// leaves the manifest of the pass before, still true of every object it names (a grown object
/// begins with the bytes named); started again it completes, and the bucket's vote segments are
/// the directory's.
#[test]
fn a_killed_shipper_names_only_whole_vote_segments() {
    let Some(weed) = Weed::start() else { return };
    let rt = rt();
    let (store, _) = weed.bucket("votecrash");
    for dies_at in [1, 2, 3] {
        let dir = tempfile::tempdir().unwrap();
        common::write_history(dir.path(), 6, 100, 3, 1000);
        append_slots(dir.path(), 100..=105);
        let prefix = Path::from(format!("k{dies_at}"));
        let mut cfg = ship_config(dir.path());
        cfg.max_attempts = 1;
        let mut healthy = Shipper::new(store.clone(), prefix.clone(), cfg.clone()).unwrap();
        rt.block_on(healthy.ship_once()).unwrap();
        drop(healthy);
        let before = rt.block_on(read_manifest(&store, &prefix)).unwrap();
        assert_eq!(before.vote_segments.len(), 2);
        // Segment 104 grows and is sealed, segment 108 starts: two PUTs, then the manifest's.
        append_slots(dir.path(), 106..=110);
        let faulty: Arc<dyn ObjectStore> = Arc::new(DiesAt::put(store.clone(), dies_at));
        let mut shipper = Shipper::new(faulty, prefix.clone(), cfg.clone()).unwrap();
        let err = rt.block_on(shipper.ship_once()).unwrap_err();
        assert!(err.to_string().contains("killed"), "{err}");
        let m = rt.block_on(read_manifest(&store, &prefix)).unwrap();
        assert_eq!(m, before, "k={dies_at}: the manifest is the last one written");
        rt.block_on(assert_votes_trustworthy(&store, &prefix, &m));
        let mut shipper = Shipper::new(store.clone(), prefix.clone(), cfg).unwrap();
        rt.block_on(shipper.ship_once()).unwrap();
        let m = rt.block_on(read_manifest(&store, &prefix)).unwrap();
        rt.block_on(assert_votes_trustworthy(&store, &prefix, &m));
        let local = local_vote_files(dir.path());
        assert_eq!(m.vote_segments.len(), 3, "k={dies_at}");
        for (name, bytes) in &local {
            let b = rt.block_on(async { store.get(&object(&prefix, name)).await.unwrap().bytes().await.unwrap() });
            assert_eq!(&b.to_vec(), bytes, "k={dies_at}: {name}");
        }
    }
}

/// With an archive retention the sealed vote segments older than every kept slot leave the
/// manifest first and the bucket after; the newest segment stays.
#[test]
fn the_archive_retention_prunes_old_vote_segments() {
    let Some(weed) = Weed::start() else { return };
    let rt = rt();
    let dir = tempfile::tempdir().unwrap();
    common::write_history(dir.path(), 7, 100, 16, 1000);
    append_slots(dir.path(), 100..=115);
    let (store, prefix) = weed.bucket("voteprune");
    let mut cfg = ship_config(dir.path());
    cfg.archive_slots = Some(5);
    let mut shipper = Shipper::new(store.clone(), prefix.clone(), cfg).unwrap();
    let report = rt.block_on(shipper.ship_once()).unwrap();
    assert!(report.deleted > 0, "{report:?}");
    let m = rt.block_on(read_manifest(&store, &prefix)).unwrap();
    // The newest 5 slots are 111..=115; files older than them stay only as their chain needs.
    assert!(m.servable().contains_key(&111));
    assert!(!m.vote_segments.is_empty());
    for g in &m.vote_segments {
        assert!(!g.sealed || g.last_slot.unwrap() >= 111, "{g:?}");
    }
    let local = local_vote_files(dir.path());
    let named: Vec<&String> = m.vote_segments.iter().map(|g| &g.name).collect();
    for name in local.keys() {
        let there = rt.block_on(store.head(&object(&prefix, name))).is_ok();
        assert_eq!(there, named.contains(&name), "{name}");
    }
    assert!(named.len() < local.len(), "some segment was pruned");
}

/// The entries of a whole transition to `epoch` (kept evidence of a slot binding its set, then
/// the set), as the writer carries them.
fn whole_transition(epoch: u64, slot: u64) -> Vec<VoteLogEntry> {
    use aldb_format::votes::{KeptEvidence, SetEntry};
    let members = [aldb_verify::votes::Validator { vote_account: [9; 32], authorized_voter: [8; 32], stake: 10 }];
    let set = SetEntry::new(slot, aldb_verify::epochs::EpochSet::new(epoch, 10, &members).unwrap().encode());
    let mut b = bank(slot);
    let c = b.aldb.unwrap();
    b.next_set_hash = Some(set.hash);
    b.bank_hash = aldb_verify::votes::bank_hash_binding(&c.h, &c.root, Some(&set.hash), None);
    vec![VoteLogEntry::Kept(KeptEvidence { bank: b, votes: Vec::new() }), VoteLogEntry::Set(set)]
}

/// The manifest lists, per vote segment, the epochs whose transition it holds whole; the
/// archive's retention never drops the last segment listing an epoch (nor, pruning only leading
/// entries, any after it), and drops it once a newer segment lists the epoch too.
#[test]
fn the_archive_retention_keeps_the_last_copy_of_each_transition() {
    let Some(weed) = Weed::start() else { return };
    let rt = rt();
    let dir = tempfile::tempdir().unwrap();
    common::write_history(dir.path(), 7, 100, 16, 1000);
    let vs = voters();
    let mut log = VoteLog::open_with(dir.path(), log_options()).unwrap();
    for s in 100..=115 {
        log.append(&slot_entries(s, &vs)).unwrap();
        if s == 105 {
            log.append(&whole_transition(7, 90)).unwrap();
        }
    }
    let (store, prefix) = weed.bucket("voteprunekeep");
    let mut cfg = ship_config(dir.path());
    cfg.archive_slots = Some(5);
    let mut shipper = Shipper::new(store.clone(), prefix.clone(), cfg).unwrap();
    rt.block_on(shipper.ship_once()).unwrap();
    let m = rt.block_on(read_manifest(&store, &prefix)).unwrap();
    let listed = |m: &Manifest| -> Vec<(u64, Vec<u64>)> {
        m.vote_segments.iter().map(|g| (g.first_slot, g.transitions.clone())).collect()
    };
    // Segment 100 is pruned; 104 holds the only copy of epoch 7's transition, so it and 108
    // after it stay though older than every kept slot.
    assert_eq!(listed(&m), [(104, vec![7]), (108, vec![]), (112, vec![])]);
    let there = |name: &str| rt.block_on(store.head(&object(&prefix, name))).is_ok();
    assert!(there(&m.vote_segments[0].name));

    // A newer copy (a later carry) shipped: the old one goes.
    for s in 116..=121 {
        log.append(&slot_entries(s, &vs)).unwrap();
        if s == 117 {
            log.append(&whole_transition(7, 90)).unwrap();
        }
    }
    rt.block_on(shipper.ship_once()).unwrap();
    let m2 = rt.block_on(read_manifest(&store, &prefix)).unwrap();
    // (108 stays: its last slot, 111, is among the newest 5 snapshots' slots, 111..=115.)
    assert_eq!(listed(&m2), [(108, vec![]), (112, vec![]), (116, vec![7]), (120, vec![])]);
    assert!(!there(&m.vote_segments[0].name), "segment 104 left the bucket");
}

/// The vote-evidence archive hold (`shipped-votes.slot`): no pass writes it before its manifest
/// is durable (a shipper killed at the manifest's PUT, every segment already uploaded, leaves no
/// hold, and the evidence writer holding for it deletes nothing); a completed pass records the
/// newest segment's first slot, every segment below it named sealed in the bucket's manifest
/// with the local bytes; and the held pruning deletes exactly those.
#[test]
fn a_pass_records_the_vote_hold_after_its_manifest_is_durable() {
    let Some(weed) = Weed::start() else { return };
    let rt = rt();
    let (store, _) = weed.bucket("votehold");
    let history = |dir: &std::path::Path| {
        common::write_history(dir, 8, 100, 3, 1000);
        append_slots(dir, 100..=109);
    };
    let dir = tempfile::tempdir().unwrap();
    history(dir.path());
    let names = |dir: &std::path::Path| -> Vec<u64> {
        list_segments(&dir.join(VOTES_DIR)).unwrap().into_iter().map(|(f, _)| f).collect()
    };
    assert_eq!(names(dir.path()), [100, 104, 108]);
    let prefix = Path::from("held");
    let cfg = kill_at_manifest(&rt, &store, history, dir.path(), &prefix, "votes", 104);
    assert_eq!(aldb_format::shipped::read_votes_shipped(dir.path()).unwrap(), None);
    let mut log = VoteLog::open_with(dir.path(), log_options()).unwrap();
    assert_eq!(log.prune_held(1000).unwrap(), 0, "no hold yet: nothing may go");

    let mut shipper = Shipper::new(store.clone(), prefix.clone(), cfg).unwrap();
    rt.block_on(shipper.ship_once()).unwrap();
    let hold = aldb_format::shipped::read_votes_shipped(dir.path()).unwrap();
    assert_eq!(hold, Some(108), "the newest segment is the only one the archive may lack");
    let m = rt.block_on(read_manifest(&store, &prefix)).unwrap();
    let local = local_vote_files(dir.path());
    for (first, (name, bytes)) in names(dir.path()).into_iter().zip(&local) {
        let g = m.vote_segments.iter().find(|g| &g.name == name).unwrap();
        assert_eq!(g.sealed, first < 108, "{name}");
        if first < 108 {
            let b = rt.block_on(async { store.get(&object(&prefix, name)).await.unwrap().bytes().await.unwrap() });
            assert_eq!(&b.to_vec(), bytes, "{name} is archived whole before the hold passes it");
        }
    }
    assert_eq!(log.prune_held(1000).unwrap(), 2);
    assert_eq!(names(dir.path()), [108]);

    // A new segment: the one it seals is held until a pass archives it sealed.
    drop(log);
    append_slots(dir.path(), 110..=113);
    assert_eq!(names(dir.path()), [108, 112]);
    let mut log = VoteLog::open_with(dir.path(), log_options()).unwrap();
    assert_eq!(log.prune_held(1000).unwrap(), 0, "108 is at the hold");
    rt.block_on(shipper.ship_once()).unwrap();
    assert_eq!(aldb_format::shipped::read_votes_shipped(dir.path()).unwrap(), Some(112));
    let m = rt.block_on(read_manifest(&store, &prefix)).unwrap();
    assert!(m.vote_segments.iter().any(|g| g.first_slot == 108 && g.sealed && g.last_slot == Some(111)));
    assert_eq!(log.prune_held(1000).unwrap(), 1);
    assert_eq!(names(dir.path()), [112]);
    assert_eq!(shipper.metrics().failures.get(), 0);
}
