//! Replicas in the tests: a shipper filling a bucket on the SeaweedFS harness from a writer's
//! directory, and a Hyades serving that bucket through its cache.

use std::path::Path;
use std::time::Duration;

use aldb_objstore::{ShipConfig, Shipper};
use hyades::{Config, StoreConfig};
use serde_json::{Value, json};

use super::Server;
use super::weed::Weed;

/// A shipper of `dir` to the bucket at `url` that ships every log's growing segment and the
/// slot-status journal on every pass (the tests' passes are explicit, never timed), retries
/// quickly, and seals the manifest's head past 8 entries and folds its segments past 3, so
/// replicas read most entries from sealed manifest segments, some through folds.
pub fn shipper(dir: &Path, weed: &Weed, url: &str) -> Shipper {
    let (store, prefix) = aldb_objstore::open_bucket(url, &weed.options()).unwrap();
    let mut cfg = ShipConfig::new(dir);
    cfg.records_interval = Duration::ZERO;
    cfg.votes_interval = Duration::ZERO;
    cfg.status_interval = Duration::ZERO;
    cfg.retry_backoff = Duration::from_millis(10);
    cfg.seal_entries = 8;
    cfg.fold_segments = 3;
    Shipper::new(store, prefix, cfg).unwrap()
}

/// A Hyades serving the bucket at `url` through a cache of `cache_bytes` in `cache`, polling the
/// manifest often so the tests wait little.
pub fn replica(weed: &Weed, url: &str, cache: &Path, cache_bytes: u64) -> Server {
    replica_with(weed, url, cache, cache_bytes, |_| {})
}

/// [`replica`] with the rest of its configuration changed by `tweak`.
pub fn replica_with(weed: &Weed, url: &str, cache: &Path, cache_bytes: u64, tweak: impl FnOnce(&mut Config)) -> Server {
    let store = StoreConfig {
        url: url.into(),
        bucket: weed.options(),
        cache_bytes,
        vote_archive_bytes: aldb_objstore::DEFAULT_VOTE_ARCHIVE_BYTES,
        fetch_wait: hyades::FETCH_WAIT,
    };
    Server::start_with(cache, |c| {
        c.store = Some(store);
        c.poll_interval = Duration::from_millis(20);
        tweak(c);
    })
}

/// One request's raw answer, for comparing services byte for byte.
pub fn ask(s: &Server, method: &str, params: &Value) -> String {
    let (status, body) =
        s.post_raw(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string());
    assert_eq!(status, 200, "{body}");
    body
}
