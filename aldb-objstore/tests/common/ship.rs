//! Shipping in the object-store tests: the runtime and shipper configuration they share, reading
//! the bucket's manifest back.

use std::path::Path as FsPath;
use std::sync::Arc;
use std::time::Duration;

use aldb_objstore::ShipConfig;
use aldb_objstore::manifest::{MANIFEST_NAME, Manifest};
use object_store::ObjectStore;
use object_store::path::Path;

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

/// The manifest under `prefix`, or `None` when there is none yet.
pub async fn read_manifest(store: &Arc<dyn ObjectStore>, prefix: &Path) -> Option<Manifest> {
    match store.get(&prefix.child(MANIFEST_NAME)).await {
        Ok(g) => Some(Manifest::decode(&g.bytes().await.unwrap()).unwrap()),
        Err(object_store::Error::NotFound { .. }) => None,
        Err(e) => panic!("{e}"),
    }
}
