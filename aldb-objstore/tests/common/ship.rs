//! Shipping in the object-store tests: the runtime and shipper configuration they share, reading
//! the bucket's manifest back, and a shipper killed at its manifest's PUT.

use std::path::Path as FsPath;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use aldb_objstore::manifest::{Head, MANIFEST_NAME, Manifest, SealedSegment, read_segments, verify_segment};
use aldb_objstore::{ShipConfig, Shipper};
use object_store::ObjectStore;
use object_store::path::Path;

use super::faulty::DiesAt;

pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// A shipper configuration for `dir` that ships each log's growing segment on every pass (the
/// tests' passes are explicit, never timed) and retries quickly.
pub fn ship_config(dir: &FsPath) -> ShipConfig {
    let mut c = ShipConfig::new(dir);
    c.records_interval = Duration::ZERO;
    c.votes_interval = Duration::ZERO;
    c.retry_backoff = Duration::from_millis(10);
    c
}

/// The object of `name` (a `/`-separated name relative to the prefix) under `prefix`.
pub fn object(prefix: &Path, name: &str) -> Path {
    name.split('/').fold(prefix.clone(), |p, part| p.child(part))
}

/// The manifest under `prefix` (its head and every sealed segment it names, each checked), or
/// `None` when there is none yet.
pub async fn read_manifest(store: &Arc<dyn ObjectStore>, prefix: &Path) -> Option<Manifest> {
    let head = read_head(store, prefix).await?;
    let fetch = |r: SealedSegment| async move {
        let bytes = store.get(&object(prefix, &r.name)).await.unwrap().bytes().await.unwrap();
        Ok::<_, String>(Arc::new(verify_segment(&r, &bytes).unwrap()))
    };
    let bodies = read_segments(&head, |_| None, fetch).await.unwrap();
    Some(Manifest::assemble(head, &|n| bodies.get(n).map(|b| b.as_ref())).unwrap())
}

/// The head object under `prefix` alone, or `None` when there is none yet.
pub async fn read_head(store: &Arc<dyn ObjectStore>, prefix: &Path) -> Option<Head> {
    match store.get(&prefix.child(MANIFEST_NAME)).await {
        Ok(g) => Some(Head::decode(&g.bytes().await.unwrap()).unwrap()),
        Err(object_store::Error::NotFound { .. }) => None,
        Err(e) => panic!("{e}"),
    }
}

/// Ships `dir` under `prefix` through a store that dies at the PUT of the pass's manifest, and
/// checks what that leaves: the pass fails, there is no manifest, and segment `first` of log
/// `log` (`records` or `votes`) is already uploaded. The manifest's PUT is a whole first pass's
/// last, counted on a twin directory that `history` writes as it wrote `dir`. Returns the
/// configuration (one attempt a request) for the passes after.
pub fn kill_at_manifest<H>(
    rt: &tokio::runtime::Runtime,
    store: &Arc<dyn ObjectStore>,
    history: impl Fn(&FsPath) -> H,
    dir: &FsPath,
    prefix: &Path,
    log: &str,
    first: u64,
) -> ShipConfig {
    let count_dir = tempfile::tempdir().unwrap();
    history(count_dir.path());
    let counting = Arc::new(DiesAt::put(store.clone(), usize::MAX));
    let counted: Arc<dyn ObjectStore> = counting.clone();
    rt.block_on(Shipper::new(counted, Path::from("count"), ship_config(count_dir.path())).unwrap().ship_once())
        .unwrap();
    let puts = counting.puts.load(Ordering::SeqCst);

    let mut cfg = ship_config(dir);
    cfg.max_attempts = 1;
    let faulty: Arc<dyn ObjectStore> = Arc::new(DiesAt::put(store.clone(), puts));
    let err = rt.block_on(Shipper::new(faulty, prefix.clone(), cfg.clone()).unwrap().ship_once()).unwrap_err();
    assert!(err.to_string().contains("killed"), "{err}");
    assert!(rt.block_on(read_manifest(store, prefix)).is_none(), "the manifest was the PUT that died");
    let segment = format!("{log}/{log}-{first:020}.log");
    assert!(rt.block_on(store.head(&object(prefix, &segment))).is_ok(), "{segment} was uploaded");
    cfg
}
