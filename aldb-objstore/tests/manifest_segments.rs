//! The manifest as a small head naming sealed, immutable segments of older entries, against a
//! real object store (SeaweedFS on loopback): the head stays small however long the archive, a
//! replica serves slots only sealed segments name exactly as the directory did, fetching each
//! segment once; a shipper killed between a segment and its head loses nothing; the archive's
//! retention drops whole segments and never rewrites one; and a damaged or missing segment is
//! refused, never served.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use aldb_fixture::History;
use aldb_format::{AccountProof, SnapshotReader};
use aldb_objstore::manifest::{MANIFEST_NAME, Manifest, SEGMENTS_PREFIX};
use aldb_objstore::{CacheConfig, ObjectStoreSource, ShipConfig, Shipper, SourceError};
use aldb_snapshot::records::RecordProducer;
use futures_util::TryStreamExt;
use object_store::ObjectStore;
use object_store::path::Path;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use common::faulty::DiesAt;
use common::ship::{object, read_head, read_manifest, rt, ship_config};
use common::weed::Weed;

/// The seal bound of these tests: small, so a short history makes many segments.
const SEAL: usize = 8;
/// The fold bound of these tests: small, so segments fold segments, and folds fold folds.
const FOLD: usize = 3;
/// Bytes of a head besides its entries and its segments' names (format, version, generation,
/// the journal's entry, brackets).
const HEAD_FIXED: usize = 1024;
/// Bytes of one entry in the pretty head, at most: a snapshot entry (name, seq, slot,
/// oldest_seq, size, a 32-digit checksum, a 64-digit root, parent, gap) is the largest, about 330.
const ENTRY_BYTES: usize = 400;
/// Bytes of one sealed segment's name, size, checksum and counts in the pretty head, at most.
const SEGMENT_BYTES: usize = 256;

fn sealed_config(dir: &std::path::Path) -> ShipConfig {
    let mut c = ship_config(dir);
    c.seal_entries = SEAL;
    c.fold_segments = FOLD;
    c.manifest_every = 3;
    c
}

/// The objects under `prefix/manifest/`, by name relative to the prefix.
async fn segment_objects(store: &Arc<dyn ObjectStore>, prefix: &Path) -> BTreeSet<String> {
    let under = prefix.child(SEGMENTS_PREFIX);
    let listed: Vec<_> = store.list(Some(&under)).try_collect().await.unwrap();
    listed.into_iter().map(|o| format!("{SEGMENTS_PREFIX}/{}", o.location.filename().unwrap())).collect()
}

/// Every object under `prefix` but the manifest's (head and segments), with its bytes.
async fn archived_files(store: &Arc<dyn ObjectStore>, prefix: &Path) -> BTreeMap<String, Vec<u8>> {
    let listed: Vec<_> = store.list(Some(prefix)).try_collect().await.unwrap();
    let mut out = BTreeMap::new();
    for o in listed {
        let rel: Vec<String> = o.location.prefix_match(prefix).unwrap().map(|p| p.as_ref().to_string()).collect();
        let rel = rel.join("/");
        if rel != MANIFEST_NAME && !rel.starts_with(&format!("{SEGMENTS_PREFIX}/")) {
            out.insert(rel, store.get(&o.location).await.unwrap().bytes().await.unwrap().to_vec());
        }
    }
    out
}

/// The head's bytes as stored.
async fn head_bytes(store: &Arc<dyn ObjectStore>, prefix: &Path) -> usize {
    store.get(&prefix.child(MANIFEST_NAME)).await.unwrap().bytes().await.unwrap().len()
}

/// The size a manifest written whole (one object naming everything, as before segments) would
/// have: the head of the same entries with nothing sealed.
fn unsegmented_bytes(m: &Manifest) -> usize {
    Manifest { sealed_segments: Vec::new(), ..m.clone() }.encode_head().len()
}

/// With a seal bound of 8 entries and a fold bound of 3 segments, a long history leaves a head of
/// at most 8 entries and 4 segment names (its size bounded by the two bounds alone), while the
/// archive and the whole manifest grow; a replica refreshing after every pass fetches each sealed
/// segment once, folds included, and serves slots only sealed segments name, long pruned from the
/// directory, with the proofs the directory gave.
#[test]
fn the_head_stays_small_and_a_replica_serves_sealed_slots() {
    let Some(weed) = Weed::start() else { return };
    let rt = rt();
    let dir = tempfile::tempdir().unwrap();
    let (store, prefix) = weed.bucket("sealed");
    let mut rng = ChaCha8Rng::seed_from_u64(71);
    let keys = common::pubkeys(&mut rng, 300);
    let mut queries: Vec<[u8; 32]> = keys.iter().step_by(53).copied().collect();
    queries.extend(common::pubkeys(&mut rng, 2));
    let mut history = History::start(common::writer_config(dir.path(), 6, 4), 300).unwrap();
    let mut records = RecordProducer::open(dir.path(), [3; 32], None).unwrap();
    let mut shipper = Shipper::new(store.clone(), prefix.clone(), sealed_config(dir.path())).unwrap();
    let local = SnapshotReader::open(dir.path()).unwrap();
    let mut expected: BTreeMap<(u64, [u8; 32]), AccountProof> = BTreeMap::new();
    let cache = tempfile::tempdir().unwrap();
    let mut src: Option<ObjectStoreSource> = None;
    let mut segments_seen: BTreeSet<String> = BTreeSet::new();
    let mut largest_head = 0;
    let slots = 1000..1060;
    for slot in slots.clone() {
        common::commit_slots(&mut history, &mut records, &mut rng, &keys, slot, 1, 30);
        rt.block_on(shipper.ship_once()).unwrap();
        local.refresh().unwrap();
        for q in &queries {
            expected.insert((slot, *q), local.prove(q, Some(slot)).unwrap());
        }
        let head = rt.block_on(read_head(&store, &prefix)).unwrap();
        let entries = head.snapshots.len() + head.record_segments.len() + head.vote_segments.len();
        assert!(entries <= SEAL, "slot {slot}: the head holds {entries} entries, the seal bound is {SEAL}");
        assert!(head.sealed_segments.len() <= FOLD + 1, "slot {slot}: {:?}", head.sealed_segments);
        let bytes = rt.block_on(head_bytes(&store, &prefix));
        let bound = HEAD_FIXED + SEAL * ENTRY_BYTES + (FOLD + 1) * SEGMENT_BYTES;
        assert!(bytes <= bound, "slot {slot}: a head of {bytes} bytes, bound {bound}");
        largest_head = largest_head.max(bytes);
        // A replica refreshing after every pass fetches each new segment, and only new ones.
        let s = src.get_or_insert_with(|| {
            rt.block_on(ObjectStoreSource::open(store.clone(), prefix.clone(), CacheConfig::new(cache.path(), 1 << 30)))
                .unwrap()
        });
        let m = rt.block_on(s.refresh_manifest()).unwrap();
        segments_seen.extend(m.named_segments());
        assert_eq!(s.metrics().manifest_segment_reads.get(), segments_seen.len() as u64, "slot {slot}");
    }
    history.finish().unwrap();
    local.refresh().unwrap();
    let src = src.unwrap();

    let m = rt.block_on(read_manifest(&store, &prefix)).unwrap();
    assert_eq!(m.servable().len(), slots.clone().count(), "the bucket serves every slot");
    assert!(m.named_segments().len() >= 9 && m.folds.len() >= 2, "{:?}", m.named_segments());
    assert!(m.folds.keys().any(|f| m.folds.values().flatten().any(|r| &r.name == f)), "a fold folds a fold");
    assert_eq!(rt.block_on(segment_objects(&store, &prefix)), segments_seen, "no segment was ever replaced");
    let whole = unsegmented_bytes(&m);
    let head = rt.block_on(head_bytes(&store, &prefix));
    assert!(whole > 5 * head, "the manifest written whole would be {whole} bytes, the head is {head}");
    assert!(largest_head <= HEAD_FIXED + SEAL * ENTRY_BYTES + (FOLD + 1) * SEGMENT_BYTES, "{largest_head}");
    let written = shipper.metrics().manifest_bytes.get();
    let writes = shipper.metrics().manifests.get();
    eprintln!(
        "{} slots: head {head} bytes (largest {largest_head}; {} segments named, {} in all), whole manifest \
         {whole} bytes; {writes} heads and {} segments written, {written} bytes in all",
        slots.clone().count(),
        m.sealed_segments.len(),
        m.named_segments().len(),
        shipper.metrics().manifest_segments.get()
    );

    // Slots whose entries only sealed segments hold, and that the directory no longer serves.
    let sealed_seqs = m.sealed_counts().0;
    let sealed_slots: Vec<u64> = m
        .servable()
        .values()
        .filter(|b| (m.snapshots.partition_point(|s| s.seq <= b.seq)) <= sealed_seqs)
        .map(|b| b.slot)
        .collect();
    let pruned_locally = local.oldest().unwrap().slot;
    assert!(sealed_slots.iter().filter(|&&s| s < pruned_locally).count() >= 20, "{sealed_slots:?} {pruned_locally}");
    for slot in slots.clone() {
        for q in &queries {
            assert_eq!(rt.block_on(src.prove(q, Some(slot))).unwrap(), expected[&(slot, *q)], "slot {slot}");
        }
    }
    // A restarted replica fetches every named segment again (its memory is gone), once each.
    drop(src);
    let again = rt
        .block_on(ObjectStoreSource::open(store.clone(), prefix.clone(), CacheConfig::new(cache.path(), 1 << 30)))
        .unwrap();
    assert_eq!(again.metrics().manifest_segment_reads.get(), m.named_segments().len() as u64);
    let first = *slots.clone().next().as_ref().unwrap();
    assert_eq!(rt.block_on(again.prove(&queries[0], Some(first))).unwrap(), expected[&(first, queries[0])]);
}

/// A shipper killed after uploading a sealed segment and before the head naming it leaves the
/// head before, true of every object it names; the segment is named by nothing, so no reader
/// uses it. Restarted, the shipper removes or rewrites it, names everything, and a replica serves
/// every slot; a further pass has nothing to do.
#[test]
fn a_shipper_killed_between_a_segment_and_its_head_loses_nothing() {
    let Some(weed) = Weed::start() else { return };
    let rt = rt();
    let dir = tempfile::tempdir().unwrap();
    let w = common::write_history(dir.path(), 72, 300, 30, 1000);
    let local = common::local_files(dir.path());
    let (store, prefix) = weed.bucket("sealcrash");
    let mut cfg = sealed_config(dir.path());
    cfg.max_attempts = 1;
    let faulty: Arc<dyn ObjectStore> = Arc::new(DiesAt::after_seal(store.clone()));
    let err = rt.block_on(Shipper::new(faulty, prefix.clone(), cfg.clone()).unwrap().ship_once()).unwrap_err();
    assert!(err.to_string().contains("killed"), "{err}");
    let before = rt.block_on(read_manifest(&store, &prefix)).expect("a head written before the seal");
    let named: BTreeSet<String> = before.named_segments().into_iter().collect();
    let present = rt.block_on(segment_objects(&store, &prefix));
    let unnamed: Vec<&String> = present.difference(&named).collect();
    assert_eq!(unnamed.len(), 1, "the segment whose head never came: {present:?} vs {named:?}");
    // Every object the surviving head names is whole (read_manifest verified the segments).
    for s in &before.snapshots {
        let b = rt.block_on(async { store.get(&object(&prefix, &s.name)).await.unwrap().bytes().await.unwrap() });
        assert_eq!(b.as_ref(), local[&s.name].as_slice(), "{}", s.name);
    }
    // A replica reading the bucket now serves what the head names, nothing of the unnamed segment.
    let cache = tempfile::tempdir().unwrap();
    let src = rt
        .block_on(ObjectStoreSource::open(store.clone(), prefix.clone(), CacheConfig::new(cache.path(), 1 << 30)))
        .unwrap();
    assert_eq!(src.slots().len(), before.servable().len());

    let mut shipper = Shipper::new(store.clone(), prefix.clone(), sealed_config(dir.path())).unwrap();
    let first = rt.block_on(shipper.ship_once()).unwrap();
    assert!(first.already_present >= 1, "objects uploaded before the kill are not sent again: {first:?}");
    let m = rt.block_on(read_manifest(&store, &prefix)).unwrap();
    assert_eq!(m.snapshots.len(), local.keys().filter(|n| n.ends_with(".snap")).count());
    assert!(!m.sealed_segments.is_empty());
    let named: BTreeSet<String> = m.named_segments().into_iter().collect();
    assert_eq!(rt.block_on(segment_objects(&store, &prefix)), named, "no segment but the named ones is left");
    assert_eq!(rt.block_on(archived_files(&store, &prefix)), local, "the bucket equals the directory");
    let again = rt.block_on(shipper.ship_once()).unwrap();
    assert_eq!((again.uploaded, again.manifests), (0, 0), "nothing left to do: {again:?}");

    rt.block_on(src.refresh_manifest()).unwrap();
    assert_eq!(src.slots().len(), w.roots.len());
    for (&slot, root) in &w.roots {
        let p = rt.block_on(src.prove(&w.pubkeys[3], Some(slot))).unwrap();
        assert_eq!(&p.root, root, "slot {slot}");
        p.proof.verify(root, &w.pubkeys[3]).unwrap();
    }
}

/// With an archive retention, the segments whose entries are all pruned are deleted after the
/// head that no longer names them; the one the boundary cuts stays as it is, the head's floor
/// saying which of its entries are dropped, and a fold it cuts into is replaced in the head by
/// what it folds; a replica serves every kept slot and only those.
#[test]
fn the_archive_retention_drops_whole_sealed_segments() {
    let Some(weed) = Weed::start() else { return };
    let rt = rt();
    let dir = tempfile::tempdir().unwrap();
    let w = common::write_history(dir.path(), 73, 300, 40, 1000);
    let (store, prefix) = weed.bucket("sealprune");
    let mut shipper = Shipper::new(store.clone(), prefix.clone(), sealed_config(dir.path())).unwrap();
    rt.block_on(shipper.ship_once()).unwrap();
    let all = rt.block_on(read_manifest(&store, &prefix)).unwrap();
    let before: BTreeSet<String> = all.named_segments().into_iter().collect();
    assert!(before.len() >= 4 && !all.folds.is_empty(), "{before:?}");

    let mut cfg = sealed_config(dir.path());
    cfg.archive_slots = Some(10);
    let mut pruner = Shipper::new(store.clone(), prefix.clone(), cfg).unwrap();
    let report = rt.block_on(pruner.ship_once()).unwrap();
    let m = rt.block_on(read_manifest(&store, &prefix)).unwrap();
    let after: BTreeSet<String> = m.named_segments().into_iter().collect();
    assert_eq!(rt.block_on(segment_objects(&store, &prefix)), after, "dropped segments are deleted");
    let dropped: Vec<&String> = before.difference(&after).collect();
    assert!(!dropped.is_empty(), "{dropped:?}");
    assert!(after.is_subset(&before), "no segment is rewritten: {after:?}");
    assert!(m.pruned.snapshots > 0, "the boundary segment's older entries are below the floor: {:?}", m.pruned);
    assert!(report.deleted > dropped.len(), "{report:?}");
    // The archive holds exactly the named snapshot files.
    let files = rt.block_on(archived_files(&store, &prefix));
    let snaps: BTreeSet<&String> = files.keys().filter(|n| n.ends_with(".snap")).collect();
    assert_eq!(snaps, m.snapshots.iter().map(|s| &s.name).collect());
    let servable = m.servable();
    assert!(servable.len() >= 10 && servable.len() < 40, "{}", servable.len());
    let oldest_kept = m.snapshots[0].seq;

    let cache = tempfile::tempdir().unwrap();
    let src = rt
        .block_on(ObjectStoreSource::open(store.clone(), prefix.clone(), CacheConfig::new(cache.path(), 1 << 30)))
        .unwrap();
    assert_eq!(*src.slots(), servable, "the replica serves what the head names, nothing below its floor");
    for &slot in servable.keys() {
        let p = rt.block_on(src.prove(&w.pubkeys[5], Some(slot))).unwrap();
        p.proof.verify(&w.roots[&slot], &w.pubkeys[5]).unwrap();
    }
    let below = all.snapshots.iter().rfind(|s| s.seq < oldest_kept && s.name.ends_with(".snap")).unwrap();
    assert!(
        matches!(rt.block_on(src.make_available(Some(below.slot))), Err(SourceError::NotInBucket { .. })),
        "slot {} is pruned",
        below.slot
    );
}

/// A sealed segment whose bytes changed, or that is gone, is refused with an error naming it: no
/// replica uses a head naming it, and the shipper does not write over what it cannot read.
#[test]
fn a_damaged_or_missing_segment_is_refused() {
    let Some(weed) = Weed::start() else { return };
    let rt = rt();
    let dir = tempfile::tempdir().unwrap();
    let w = common::write_history(dir.path(), 74, 300, 40, 1000);
    let (store, prefix) = weed.bucket("sealbad");
    let mut shipper = Shipper::new(store.clone(), prefix.clone(), sealed_config(dir.path())).unwrap();
    rt.block_on(shipper.ship_once()).unwrap();
    let m = rt.block_on(read_manifest(&store, &prefix)).unwrap();
    // A segment named only through a fold: the head does not name it, the fold does.
    let seg = m.folds.values().flatten().find(|r| !m.folds.contains_key(&r.name)).unwrap().clone();
    let at = object(&prefix, &seg.name);
    let good = rt.block_on(async { store.get(&at).await.unwrap().bytes().await.unwrap() });
    let open = |dir: &std::path::Path| {
        rt.block_on(ObjectStoreSource::open(store.clone(), prefix.clone(), CacheConfig::new(dir, 1 << 30)))
    };

    let mut bad = good.to_vec();
    let mid = bad.len() / 2;
    bad[mid] = if bad[mid] == b'7' { b'8' } else { b'7' };
    rt.block_on(store.put(&at, bytes::Bytes::from(bad).into())).unwrap();
    let cache = tempfile::tempdir().unwrap();
    // A replica starts on it, serves nothing, and says why.
    let src = open(cache.path()).unwrap();
    assert!(src.manifest_error().is_some_and(|e| e.contains(&seg.name)), "{:?}", src.manifest_error());
    let err = rt.block_on(src.refresh_manifest()).unwrap_err();
    assert!(
        matches!(&err, SourceError::Corrupt { object, reason } if *object == seg.name && reason.contains("checksum")),
        "{err}"
    );
    assert!(rt.block_on(src.make_available(None)).is_err());
    drop(src);
    let restarted = Shipper::new(store.clone(), prefix.clone(), sealed_config(dir.path())).unwrap();
    let mut restarted = restarted;
    let err = rt.block_on(restarted.ship_once()).unwrap_err();
    assert!(err.to_string().contains(&seg.name) && err.to_string().contains("checksum"), "{err}");

    rt.block_on(store.delete(&at)).unwrap();
    let src = open(cache.path()).unwrap();
    let err = rt.block_on(src.refresh_manifest()).unwrap_err();
    assert!(
        matches!(&err, SourceError::Missing { object, reason } if *object == seg.name && reason.contains("does not hold")),
        "{err}"
    );
    drop(src);

    // Restored, it is read and served again.
    rt.block_on(store.put(&at, good.into())).unwrap();
    let src = open(cache.path()).unwrap();
    let slot = *w.roots.keys().next().unwrap();
    let p = rt.block_on(src.prove(&w.pubkeys[0], Some(slot))).unwrap();
    p.proof.verify(&w.roots[&slot], &w.pubkeys[0]).unwrap();
}
