//! A replica's vote evidence older than its copy of the log, against a real object store
//! (SeaweedFS on loopback): the segments covering a slot are fetched from the bucket, verified,
//! and read by the ordinary `VoteLogReader`, so every slot answers as the directory's log does;
//! a group held is not fetched again, and two queries at once fetch it once; the cache stays
//! within its bytes, least recently used evicted first; a damaged segment is refused.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use aldb_fixture::votes::Voter;
use aldb_format::votes::{VoteLog, VoteLogEntry, VoteLogReader, VotesEntry};
use aldb_objstore::{ArchivedVotes, CacheConfig, ObjectStoreSource, Shipper, SourceError, VoteArchive};
use object_store::ObjectStore as _;

use common::ship::{object, read_manifest, rt, ship_config};
use common::votes::{bank, log_options};
use common::weed::Weed;

/// Blocks searched after a slot: small, so a slot's group is one or two segments.
const WINDOW: u64 = 2;

#[test]
fn old_slots_are_answered_from_verified_segments_as_the_directory_does() {
    let Some(weed) = Weed::start() else { return };
    let rt = rt();
    let dir = tempfile::tempdir().unwrap();
    common::write_history(dir.path(), 7, 100, 4, 1000);
    // Banks 100..=140, each voted on in the next block; slots 120..=123 skipped (a gap between
    // segments); segments of four slots.
    let vs: Vec<Voter> = (0..3u8).map(|i| Voter::new([50 + i; 32], None, [90 + i; 32])).collect();
    let mut log = VoteLog::open_with(dir.path(), log_options()).unwrap();
    let slots: Vec<u64> = (100..=140).filter(|s| !(120..=123).contains(s)).collect();
    for (i, &s) in slots.iter().enumerate() {
        let mut entries = vec![VoteLogEntry::Bank(bank(s))];
        if i > 0 {
            let p = slots[i - 1];
            let txs = vs.iter().map(|v| v.vote(p, &bank(p).bank_hash)).collect();
            entries.push(VoteLogEntry::Votes(VotesEntry { slot: s, transactions: txs }));
        }
        log.append(&entries).unwrap();
    }
    let (store, prefix) = weed.bucket("archive");
    let mut shipper = Shipper::new(store.clone(), prefix.clone(), ship_config(dir.path())).unwrap();
    rt.block_on(shipper.ship_once()).unwrap();
    let m = rt.block_on(read_manifest(&store, &prefix)).unwrap();
    assert!(m.vote_segments.len() >= 9, "{:?}", m.vote_segments);
    let largest = m.vote_segments.iter().map(|g| g.size).max().unwrap();

    let mut whole = VoteLogReader::new(dir.path());
    whole.refresh().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let src = rt
        .block_on(ObjectStoreSource::open(store.clone(), prefix.clone(), CacheConfig::new(cache.path(), 1 << 30)))
        .unwrap();
    // Room for two segments: a group of two evicts everything else.
    let archive = VoteArchive::new(src.clone(), 2 * largest).unwrap();
    assert_eq!(archive.oldest(), Some(100));
    for s in 95..=145u64 {
        let got = rt.block_on(archive.slot_votes(s, WINDOW)).unwrap();
        let want = whole.slot_votes(s, WINDOW).unwrap();
        if s < 100 {
            assert_eq!(got, ArchivedVotes::Older { oldest: 100 }, "slot {s}");
        } else {
            assert_eq!(got, ArchivedVotes::Read { found: want, oldest: 100 }, "slot {s}");
        }
    }
    let metrics = src.metrics();
    assert!(metrics.evictions.get() > 0, "the cache holds two segments");
    assert_eq!(metrics.archive_refused.get(), 0);

    // A group held is not fetched again; one evicted is.
    let fetches = metrics.archive_fetches.get();
    rt.block_on(archive.slot_votes(140, WINDOW)).unwrap();
    assert_eq!(metrics.archive_fetches.get(), fetches);
    rt.block_on(archive.slot_votes(101, WINDOW)).unwrap();
    assert_eq!(metrics.archive_fetches.get(), fetches + 1);

    // Two queries at once for a group not held fetch it once.
    let fetches = metrics.archive_fetches.get();
    let (a, b) = rt.block_on(async { tokio::join!(archive.slot_votes(113, WINDOW), archive.slot_votes(112, WINDOW)) });
    assert_eq!(a.unwrap(), ArchivedVotes::Read { found: whole.slot_votes(113, WINDOW).unwrap(), oldest: 100 });
    assert_eq!(b.unwrap(), ArchivedVotes::Read { found: whole.slot_votes(112, WINDOW).unwrap(), oldest: 100 });
    assert_eq!(metrics.archive_fetches.get(), fetches + 1, "segment 112 once");

    // A segment damaged in the bucket (same size) is refused, counted, and never read.
    let seg = m.vote_segments.iter().find(|g| g.first_slot == 104).unwrap();
    let at = object(&prefix, &seg.name);
    let mut bytes = rt.block_on(async { store.get(&at).await.unwrap().bytes().await.unwrap() }).to_vec();
    let n = bytes.len();
    bytes[n - 3] ^= 0x10;
    rt.block_on(store.put(&at, bytes.into())).unwrap();
    let cache2 = tempfile::tempdir().unwrap();
    let src2 = rt
        .block_on(ObjectStoreSource::open(store.clone(), prefix.clone(), CacheConfig::new(cache2.path(), 1 << 30)))
        .unwrap();
    let archive2 = VoteArchive::new(src2.clone(), 1 << 30).unwrap();
    match rt.block_on(archive2.slot_votes(105, WINDOW)) {
        Err(SourceError::Corrupt { object, .. }) => assert_eq!(object, seg.name),
        other => panic!("{other:?}"),
    }
    assert_eq!((src2.metrics().archive_refused.get(), src2.metrics().refused.get()), (1, 1));
    // Asked again, it is fetched and refused again: nothing of it was kept.
    assert!(rt.block_on(archive2.slot_votes(106, WINDOW)).is_err());
    assert_eq!(src2.metrics().archive_refused.get(), 2);
    let held: Vec<_> = std::fs::read_dir(cache2.path().join("vote-archive")).unwrap().collect();
    assert!(held.is_empty(), "a refused group leaves no file");
    // Other slots are served.
    let got = rt.block_on(archive2.slot_votes(130, WINDOW)).unwrap();
    assert_eq!(got, ArchivedVotes::Read { found: whole.slot_votes(130, WINDOW).unwrap(), oldest: 100 });
}
