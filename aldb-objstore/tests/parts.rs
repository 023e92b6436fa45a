//! Slots whose state spans part files, through the bucket: the writer is made to cut files at a
//! few KiB (the real bound is 32 GiB), the shipper archives parts with the slot files, and a
//! replica whose cache is smaller than the history answers at every slot what the local reader
//! answered, parts fetched, evicted, fetched again and kept across a restart.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;

use aldb_fixture::History;
use aldb_format::format::FileKind;
use aldb_format::{AccountProof, SnapshotReader};
use aldb_objstore::manifest::root_hex;
use aldb_objstore::{CacheConfig, ObjectStoreSource, Shipper};
use aldb_snapshot::records::RecordProducer;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use common::ship::{read_manifest, rt, ship_config};
use common::weed::Weed;

#[test]
fn a_replica_serves_slots_made_of_parts_as_the_local_reader_did() {
    let Some(weed) = Weed::start() else { return };
    let rt = rt();
    let dir = tempfile::tempdir().unwrap();
    let (store, prefix) = weed.bucket("parts");
    let mut rng = ChaCha8Rng::seed_from_u64(41);
    let keys = common::pubkeys(&mut rng, 500);
    let mut queries: Vec<[u8; 32]> = keys.iter().step_by(29).copied().collect();
    queries.extend(common::pubkeys(&mut rng, 3));
    // Full states of a few dozen parts, deltas of one or two.
    let mut cfg = common::writer_config(dir.path(), 6, 4);
    cfg.part_bytes = 4096;
    let mut history = History::start(cfg, 500).unwrap();
    let mut records = RecordProducer::open(dir.path(), [3; 32], None).unwrap();
    let mut shipper = Shipper::new(store.clone(), prefix.clone(), ship_config(dir.path())).unwrap();
    let local = SnapshotReader::open(dir.path()).unwrap();
    let mut expected: BTreeMap<(u64, [u8; 32]), AccountProof> = BTreeMap::new();
    let slots = 2000..2024;
    for slot in slots.clone() {
        common::commit_slots(&mut history, &mut records, &mut rng, &keys, slot, 1, 40);
        rt.block_on(shipper.ship_once()).unwrap();
        local.refresh().unwrap();
        for q in &queries {
            expected.insert((slot, *q), local.prove(q, Some(slot)).unwrap());
        }
    }
    history.finish().unwrap();

    let m = rt.block_on(read_manifest(&store, &prefix)).unwrap();
    let parts: Vec<_> = m.snapshots.iter().filter(|s| s.kind() == Some(FileKind::Part)).collect();
    assert!(parts.len() > 20, "{} parts shipped", parts.len());
    assert!(parts.iter().all(|p| p.root == root_hex(&[0; 32]) && p.name.ends_with(".part")));
    let servable = m.servable();
    assert_eq!(servable.keys().copied().collect::<Vec<_>>(), slots.clone().collect::<Vec<_>>(), "parts are no slots");
    // Every slot's chain is complete, parts among its files: a full state's slot needs its parts.
    let chains: Vec<_> = servable.values().map(|b| m.chain(b)).collect();
    assert!(chains.iter().any(|c| c.iter().filter(|o| o.kind() == Some(FileKind::Part)).count() > 10));
    for (b, c) in servable.values().zip(&chains) {
        assert_eq!(c.len() as u64, b.seq - b.oldest_seq + 1, "slot {}", b.slot);
    }
    let history_bytes: u64 = m.snapshots.iter().map(|s| s.size).sum();
    let chain_max: u64 = chains.iter().map(|c| c.iter().map(|o| o.size).sum::<u64>()).max().unwrap();
    let capacity = chain_max + chain_max / 2;
    assert!(capacity < history_bytes, "cache {capacity} vs history {history_bytes}");

    let cache = tempfile::tempdir().unwrap();
    let open = || {
        rt.block_on(ObjectStoreSource::open(store.clone(), prefix.clone(), CacheConfig::new(cache.path(), capacity)))
            .unwrap()
    };
    let src = open();
    let mut order: Vec<u64> = slots.clone().rev().collect();
    order.extend(slots.clone());
    for slot in order {
        for q in &queries {
            let got = rt.block_on(src.prove(q, Some(slot))).unwrap();
            assert_eq!(got, expected[&(slot, *q)], "slot {slot}");
        }
    }
    assert!(src.metrics().evictions.get() > 0, "the cache evicted");

    // A restarted replica keeps the cached parts with the slot files: the newest slot (served
    // last above, so still cached) needs no fetch.
    let newest = slots.end - 1;
    drop(src);
    let src = open();
    let got = rt.block_on(src.prove(&queries[0], Some(newest))).unwrap();
    assert_eq!(got, expected[&(newest, queries[0])]);
    assert_eq!(src.metrics().misses.get(), 0, "served from the files kept");
    let cached_parts = std::fs::read_dir(cache.path())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".part"))
        .count();
    assert!(cached_parts > 0);
}
