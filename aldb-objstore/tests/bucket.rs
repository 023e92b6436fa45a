//! The shipper and the replica cache against a real object store (SeaweedFS on loopback).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use aldb_fixture::History;
use aldb_format::{AccountProof, SnapshotReader};
use aldb_objstore::manifest::{MANIFEST_NAME, Manifest, SEGMENTS_PREFIX, parse_checksum};
use aldb_objstore::{CacheConfig, ObjectStoreSource, Shipper, SourceError};
use aldb_snapshot::records::RecordProducer;
use futures_util::TryStreamExt;
use object_store::ObjectStore;
use object_store::path::Path;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use common::faulty::DiesAt;
use common::ship::{object, read_manifest, rt, ship_config};
use common::weed::Weed;

/// Every object under `prefix` but the manifest's (its head and sealed segments), by its name
/// relative to the prefix.
async fn bucket_files(store: &Arc<dyn ObjectStore>, prefix: &Path) -> BTreeMap<String, Vec<u8>> {
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

/// Every object the manifest names exists, whole: a snapshot object's bytes check as a file
/// (its footer checksum over its header and body) and are the manifest's size and checksum; a
/// segment object begins with the manifest's bytes.
async fn assert_manifest_trustworthy(store: &Arc<dyn ObjectStore>, prefix: &Path, m: &Manifest) {
    for s in &m.snapshots {
        let b = store.get(&prefix.child(s.name.as_str())).await.unwrap().bytes().await.unwrap();
        assert_eq!(b.len() as u64, s.size, "{}", s.name);
        let end = b.len() - 32;
        let sum = aldb_format::format::file_checksum(&b[..128], &b[128..end]);
        assert_eq!(u128::from_le_bytes(b[end..end + 16].try_into().unwrap()), sum, "{} is whole", s.name);
        assert_eq!(parse_checksum(&s.checksum), Some(sum));
    }
    for g in &m.record_segments {
        let at = object(prefix, &g.name);
        let b = store.get(&at).await.unwrap().bytes().await.unwrap();
        let head = &b[..g.size as usize];
        assert_eq!(parse_checksum(&g.checksum), Some(xxhash_rust::xxh3::xxh3_128(head)), "{}", g.name);
    }
}

/// A shipper killed at its k-th PUT, for several k, leaves a manifest that names only whole
/// objects; restarted, it sends nothing twice that the bucket already holds whole, and the
/// bucket ends up equal to the directory. A third pass uploads nothing. The head seals its
/// entries into a manifest segment past 5, so some of the PUTs killed are segments'.
#[test]
fn a_killed_shipper_loses_nothing_and_exposes_nothing_partial() {
    let Some(weed) = Weed::start() else { return };
    let rt = rt();
    let dir = tempfile::tempdir().unwrap();
    common::write_history(dir.path(), 11, 400, 14, 1000);
    let local = common::local_files(dir.path());
    let snapshots = local.keys().filter(|n| n.ends_with(".snap")).count();
    assert!(snapshots >= 14 && local.keys().any(|n| n.starts_with("records/")), "{:?}", local.keys());
    let (store, _) = weed.bucket("crash");
    for dies_at in [1, 2, 4, 7, 8, 9, 11, 16] {
        let prefix = Path::from(format!("k{dies_at}"));
        let faulty: Arc<dyn ObjectStore> = Arc::new(DiesAt::put(store.clone(), dies_at));
        let mut cfg = ship_config(dir.path());
        cfg.manifest_every = 3;
        cfg.max_attempts = 2;
        cfg.seal_entries = 5;
        let mut shipper = Shipper::new(faulty, prefix.clone(), cfg.clone()).unwrap();
        let err = rt.block_on(shipper.ship_once()).unwrap_err();
        assert!(err.to_string().contains("killed"), "{err}");
        assert!(shipper.metrics().retries.get() >= 1 && shipper.metrics().failures.get() >= 1);
        drop(shipper);
        let m = rt.block_on(read_manifest(&store, &prefix));
        if let Some(m) = &m {
            assert!(m.snapshots.len() < snapshots, "k={dies_at}: the manifest cannot name everything");
            rt.block_on(assert_manifest_trustworthy(&store, &prefix, m));
        } else {
            assert!(dies_at <= 4, "k={dies_at}: a manifest is written every 3 uploads");
        }
        // Restarted on a healthy store.
        let mut shipper = Shipper::new(store.clone(), prefix.clone(), cfg).unwrap();
        let first = rt.block_on(shipper.ship_once()).unwrap();
        let shipped_before = m.as_ref().map_or(0, |m| m.snapshots.len());
        if dies_at > 1 && dies_at % 3 != 1 {
            assert!(first.already_present >= 1, "k={dies_at}: uploaded but unnamed objects are reused: {first:?}");
        }
        assert_eq!(first.uploaded + first.already_present + shipped_before, snapshots + local.len() - snapshots);
        let m = rt.block_on(read_manifest(&store, &prefix)).unwrap();
        rt.block_on(assert_manifest_trustworthy(&store, &prefix, &m));
        assert_eq!(m.snapshots.len(), snapshots);
        assert!(!m.sealed_segments.is_empty(), "k={dies_at}");
        assert_eq!(rt.block_on(bucket_files(&store, &prefix)), local, "k={dies_at}: the bucket equals the directory");
        let segments: Vec<_> =
            rt.block_on(store.list(Some(&prefix.child(SEGMENTS_PREFIX))).try_collect::<Vec<_>>()).unwrap();
        assert_eq!(segments.len(), m.sealed_segments.len(), "k={dies_at}: only named segments are left");
        // The archive hold a writer's retention waits for: one past the newest archived file.
        let newest = m.snapshots.iter().map(|o| o.seq).max().unwrap();
        assert_eq!(aldb_format::shipped::read_shipped(dir.path()).unwrap(), Some(newest + 1), "k={dies_at}");
        let again = rt.block_on(shipper.ship_once()).unwrap();
        assert_eq!((again.uploaded, again.manifests), (0, 0), "k={dies_at}: nothing left to do");
        let metrics = aldb_objstore::metrics::encode(&shipper.metrics().registry);
        assert!(metrics.contains("aldb_ship_lag_slots 0") && metrics.contains("aldb_ship_uploads_total"), "{metrics}");
    }
}

/// The directory keeps 6 slots, the bucket everything: a replica whose cache is smaller than
/// the history (so it evicts) answers at every slot exactly what the local reader answered at
/// that slot while the directory still held it, including slots long pruned locally.
#[test]
fn a_replica_serves_every_slot_the_bucket_holds_as_the_local_reader_did() {
    let Some(weed) = Weed::start() else { return };
    let rt = rt();
    let dir = tempfile::tempdir().unwrap();
    let (store, prefix) = weed.bucket("replica");
    let mut rng = ChaCha8Rng::seed_from_u64(22);
    let keys = common::pubkeys(&mut rng, 600);
    // Queries: stored accounts and a few that never exist (exclusion proofs).
    let mut queries: Vec<[u8; 32]> = keys.iter().step_by(37).copied().collect();
    queries.extend(common::pubkeys(&mut rng, 3));
    let mut history = History::start(common::writer_config(dir.path(), 6, 4), 600).unwrap();
    let mut records = RecordProducer::open(dir.path(), [3; 32], None).unwrap();
    let mut shipper = Shipper::new(store.clone(), prefix.clone(), ship_config(dir.path())).unwrap();
    let local = SnapshotReader::open(dir.path()).unwrap();
    let mut expected: BTreeMap<(u64, [u8; 32]), AccountProof> = BTreeMap::new();
    for slot in 1000..1040 {
        common::commit_slots(&mut history, &mut records, &mut rng, &keys, slot, 1, 40);
        rt.block_on(shipper.ship_once()).unwrap();
        local.refresh().unwrap();
        for q in &queries {
            expected.insert((slot, *q), local.prove(q, Some(slot)).unwrap());
        }
    }
    history.finish().unwrap();
    local.refresh().unwrap();
    assert!(local.oldest().unwrap().slot > 1020, "the directory pruned the early slots");
    assert!(matches!(local.prove(&queries[0], Some(1000)), Err(aldb_format::QueryError::Pruned { .. })));

    let m = rt.block_on(read_manifest(&store, &prefix)).unwrap();
    let history_bytes: u64 = m.snapshots.iter().map(|s| s.size).sum();
    let chain_max: u64 = m.servable().values().map(|b| m.chain(b).iter().map(|o| o.size).sum::<u64>()).max().unwrap();
    assert_eq!(m.servable().len(), 40, "the bucket serves every slot");
    let capacity = chain_max + chain_max / 2;
    assert!(capacity < history_bytes / 2, "cache {capacity} vs history {history_bytes}");

    let cache = tempfile::tempdir().unwrap();
    let src = rt
        .block_on(ObjectStoreSource::open(store.clone(), prefix.clone(), CacheConfig::new(cache.path(), capacity)))
        .unwrap();
    // Newest first, then oldest, then the rest: an order that evicts and refetches.
    let mut order: Vec<u64> = (1000..1040).rev().collect();
    order.extend(1000..1040);
    for slot in order {
        for q in &queries {
            let got = rt.block_on(src.prove(q, Some(slot))).unwrap();
            assert_eq!(got, expected[&(slot, *q)], "slot {slot}");
        }
        let cached: u64 = std::fs::read_dir(cache.path()).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum();
        assert!(cached <= capacity, "the cache holds {cached} bytes, more than {capacity}");
    }
    let mx = src.metrics();
    assert!(
        mx.evictions.get() > 0 && mx.misses.get() > 0 && mx.hits.get() > 0,
        "{}",
        aldb_objstore::metrics::encode(&mx.registry)
    );
    assert!(mx.fetched_bytes.get() > history_bytes, "evicted files were fetched again");

    // The newest slot by default, and clear errors for slots the bucket does not hold.
    let newest = rt.block_on(src.prove(&queries[0], None)).unwrap();
    assert_eq!(newest.slot, 1039);
    match rt.block_on(src.make_available(Some(5000))) {
        Err(SourceError::NotYetShipped { slot: 5000, newest: 1039 }) => {}
        other => panic!("{other:?}"),
    }
    match rt.block_on(src.make_available(Some(10))) {
        Err(e @ SourceError::NotInBucket { .. }) => assert!(e.to_string().contains("1000 to 1039"), "{e}"),
        other => panic!("{other:?}"),
    }
    let tiny = tempfile::tempdir().unwrap();
    let small = rt
        .block_on(ObjectStoreSource::open(store.clone(), prefix.clone(), CacheConfig::new(tiny.path(), 1000)))
        .unwrap();
    assert!(matches!(rt.block_on(small.make_available(None)), Err(SourceError::CacheTooSmall { .. })));

    // A restarted replica keeps the verified files its cache holds.
    drop(src);
    let src = rt
        .block_on(ObjectStoreSource::open(store.clone(), prefix.clone(), CacheConfig::new(cache.path(), capacity)))
        .unwrap();
    assert!(src.metrics().cached_files.get() > 0);
    let got = rt.block_on(src.prove(&queries[1], Some(1039))).unwrap();
    assert_eq!(got, expected[&(1039, queries[1])]);
    assert_eq!(src.metrics().misses.get(), 0, "served from the files kept");
}

/// Bytes changed in the bucket are refused with an error naming the object, never cached, never
/// served: a flipped body byte (the checksum), and an object swapped for another file (its
/// header and footer, caught by the ranged reads before the download).
#[test]
fn corrupted_objects_are_refused() {
    let Some(weed) = Weed::start() else { return };
    let rt = rt();
    let dir = tempfile::tempdir().unwrap();
    let w = common::write_history(dir.path(), 33, 300, 6, 1000);
    let (store, prefix) = weed.bucket("corrupt");
    let mut shipper = Shipper::new(store.clone(), prefix.clone(), ship_config(dir.path())).unwrap();
    rt.block_on(shipper.ship_once()).unwrap();
    let m = rt.block_on(read_manifest(&store, &prefix)).unwrap();
    let newest = m.snapshots.last().unwrap().clone();
    let at = prefix.child(newest.name.as_str());
    let good = rt.block_on(async { store.get(&at).await.unwrap().bytes().await.unwrap() });
    let mut bad = good.to_vec();
    let mid = bad.len() / 2;
    bad[mid] ^= 0x40;
    rt.block_on(store.put(&at, bytes::Bytes::from(bad).into())).unwrap();

    let cache = tempfile::tempdir().unwrap();
    let src = rt
        .block_on(ObjectStoreSource::open(store.clone(), prefix.clone(), CacheConfig::new(cache.path(), 1 << 30)))
        .unwrap();
    let err = rt.block_on(src.prove(&w.pubkeys[0], Some(newest.slot))).unwrap_err();
    assert!(
        matches!(&err, SourceError::Corrupt { object, .. } if *object == newest.name)
            && err.to_string().contains("checksum"),
        "{err}"
    );
    assert!(!cache.path().join(&newest.name).exists(), "a refused file never enters the cache");
    assert!(
        std::fs::read_dir(cache.path()).unwrap().all(|e| !e.unwrap().file_name().to_string_lossy().ends_with(".tmp"))
    );
    assert_eq!(src.metrics().refused.get(), 1);
    // Older slots, whose files are intact, are still served and verify against their roots.
    let older = m.snapshots[m.snapshots.len() - 2].slot;
    let p = rt.block_on(src.prove(&w.pubkeys[0], Some(older))).unwrap();
    assert_eq!(p.root, w.roots[&older]);
    p.proof.verify(&w.roots[&older], &w.pubkeys[0]).unwrap();

    // Another file's bytes under this name: the ranged header read refuses it before the body.
    let other = m.snapshots[0].clone();
    let other_bytes =
        rt.block_on(async { store.get(&prefix.child(other.name.as_str())).await.unwrap().bytes().await.unwrap() });
    rt.block_on(store.put(&at, other_bytes.into())).unwrap();
    let mut cfg = CacheConfig::new(tempfile::tempdir().unwrap().keep(), 1 << 30);
    cfg.range_check_min = 0;
    let src = rt.block_on(ObjectStoreSource::open(store.clone(), prefix.clone(), cfg)).unwrap();
    let err = rt.block_on(src.make_available(Some(newest.slot))).unwrap_err();
    assert!(err.to_string().contains("header names sequence"), "{err}");
    let servable = m.servable();
    let others: u64 = m.chain(&servable[&newest.slot]).iter().filter(|o| o.seq != newest.seq).map(|o| o.size).sum();
    assert_eq!(src.metrics().fetched_bytes.get(), others, "refused on its header, before its download");

    // The restored object is served again.
    rt.block_on(store.put(&at, good.into())).unwrap();
    let p = rt.block_on(src.prove(&w.pubkeys[1], Some(newest.slot))).unwrap();
    p.proof.verify(&w.roots[&newest.slot], &w.pubkeys[1]).unwrap();
}
