//! Prometheus metrics of the shipper and of a replica's cache, each in a registry of its own so
//! a process embedding either (Hyades, `aldb-ship`) can serve or merge it.

use prometheus::{Encoder, IntCounter, IntGauge, Opts, Registry, TextEncoder};

fn counter(r: &Registry, name: &str, help: &str) -> prometheus::Result<IntCounter> {
    let c = IntCounter::with_opts(Opts::new(name, help))?;
    r.register(Box::new(c.clone()))?;
    Ok(c)
}

fn gauge(r: &Registry, name: &str, help: &str) -> prometheus::Result<IntGauge> {
    let g = IntGauge::with_opts(Opts::new(name, help))?;
    r.register(Box::new(g.clone()))?;
    Ok(g)
}

/// The registry in the Prometheus text format.
pub fn encode(registry: &Registry) -> String {
    let mut buf = Vec::new();
    let _ = TextEncoder::new().encode(&registry.gather(), &mut buf);
    String::from_utf8(buf).unwrap_or_default()
}

/// The shipper's metrics.
#[derive(Clone, Debug)]
pub struct ShipMetrics {
    /// The registry holding them all.
    pub registry: Registry,
    /// Objects uploaded (snapshot files, segment uploads, manifests not included).
    pub uploads: IntCounter,
    /// Bytes of those uploads.
    pub upload_bytes: IntCounter,
    /// Objects found already in the bucket, complete, and not sent again.
    pub already_present: IntCounter,
    /// Requests to the bucket that failed and were retried.
    pub retries: IntCounter,
    /// Requests that failed after every retry, and local files refused (damaged).
    pub failures: IntCounter,
    /// Manifests written.
    pub manifests: IntCounter,
    /// Sealed manifest segments uploaded.
    pub manifest_segments: IntCounter,
    /// Bytes of manifest heads and sealed segments uploaded.
    pub manifest_bytes: IntCounter,
    /// Snapshot files deleted locally before they were shipped: their slots are not archived.
    pub missed_files: IntCounter,
    /// Objects deleted from the bucket by the archive's retention.
    pub archive_deletes: IntCounter,
    /// Newest local published slot minus the newest slot the manifest names.
    pub lag_slots: IntGauge,
    /// Bytes of local files (and segment growth) the manifest does not name yet.
    pub lag_bytes: IntGauge,
    /// Newest slot the manifest names.
    pub shipped_slot: IntGauge,
}

impl ShipMetrics {
    /// The shipper's metrics in a registry of their own.
    pub fn new() -> prometheus::Result<Self> {
        let r = Registry::new();
        Ok(Self {
            uploads: counter(
                &r,
                "aldb_ship_uploads_total",
                "Objects uploaded to the bucket (not counting manifests).",
            )?,
            upload_bytes: counter(&r, "aldb_ship_upload_bytes_total", "Bytes uploaded to the bucket.")?,
            already_present: counter(
                &r,
                "aldb_ship_already_present_total",
                "Objects found complete in the bucket and not sent again.",
            )?,
            retries: counter(&r, "aldb_ship_retries_total", "Bucket requests retried after a failure.")?,
            failures: counter(
                &r,
                "aldb_ship_failures_total",
                "Bucket requests failed after every retry, and local files refused as damaged.",
            )?,
            manifests: counter(&r, "aldb_ship_manifests_total", "Manifests written.")?,
            manifest_segments: counter(&r, "aldb_ship_manifest_segments_total", "Sealed manifest segments uploaded.")?,
            manifest_bytes: counter(
                &r,
                "aldb_ship_manifest_bytes_total",
                "Bytes of manifest heads and sealed manifest segments uploaded.",
            )?,
            missed_files: counter(
                &r,
                "aldb_ship_missed_files_total",
                "Snapshot files pruned locally before they could be shipped (their slots are not archived).",
            )?,
            archive_deletes: counter(
                &r,
                "aldb_ship_archive_deletes_total",
                "Objects deleted by the archive retention.",
            )?,
            lag_slots: gauge(&r, "aldb_ship_lag_slots", "Newest local published slot minus newest shipped slot.")?,
            lag_bytes: gauge(&r, "aldb_ship_lag_bytes", "Bytes of local files not yet named by the manifest.")?,
            shipped_slot: gauge(&r, "aldb_ship_shipped_slot", "Newest slot named by the manifest.")?,
            registry: r,
        })
    }
}

/// A replica cache's metrics.
#[derive(Clone, Debug)]
pub struct CacheMetrics {
    /// The registry holding them all.
    pub registry: Registry,
    /// Files a slot needed that were in the cache.
    pub hits: IntCounter,
    /// Files a slot needed that were fetched.
    pub misses: IntCounter,
    /// Bytes fetched from the bucket.
    pub fetched_bytes: IntCounter,
    /// Files evicted to stay within the capacity.
    pub evictions: IntCounter,
    /// Objects refused because their bytes did not verify.
    pub refused: IntCounter,
    /// Cached files found damaged (at start, or by a query) and removed, to be fetched again.
    pub cache_damaged: IntCounter,
    /// Manifest heads refused (damaged, oversized, or not understood).
    pub manifest_refused: IntCounter,
    /// Record-log, vote-evidence or journal objects whose bytes are not the manifest's: copied
    /// as they are for the log readers, which skip their damaged spans, and fetched again.
    pub log_damaged: IntCounter,
    /// Record-log or vote-evidence segments whose copy was replaced by one fetched again and
    /// verified against the manifest (it was copied damaged, or was damaged on the cache's disk).
    pub log_repaired: IntCounter,
    /// Vote-evidence segments fetched on demand for slots older than the copy of the log.
    pub archive_fetches: IntCounter,
    /// Of those, segments refused because their bytes did not verify (also in `refused`).
    pub archive_refused: IntCounter,
    /// Manifests read.
    pub manifest_reads: IntCounter,
    /// Sealed manifest segments fetched (each once: they are immutable).
    pub manifest_segment_reads: IntCounter,
    /// Bytes of manifest heads and sealed segments fetched.
    pub manifest_bytes: IntCounter,
    /// Bytes of verified files in the cache.
    pub cached_bytes: IntGauge,
    /// Verified files in the cache.
    pub cached_files: IntGauge,
}

impl CacheMetrics {
    /// A cache's metrics in a registry of their own.
    pub fn new() -> prometheus::Result<Self> {
        let r = Registry::new();
        Ok(Self {
            hits: counter(&r, "aldb_cache_hits_total", "Snapshot files a query needed that were cached.")?,
            misses: counter(&r, "aldb_cache_misses_total", "Snapshot files a query needed that were fetched.")?,
            fetched_bytes: counter(&r, "aldb_cache_fetched_bytes_total", "Bytes fetched from the bucket.")?,
            evictions: counter(&r, "aldb_cache_evictions_total", "Files evicted to stay within the capacity.")?,
            refused: counter(&r, "aldb_cache_refused_total", "Objects refused because their bytes did not verify.")?,
            cache_damaged: counter(
                &r,
                "aldb_cache_damaged_total",
                "Cached files found damaged and removed, to be fetched again.",
            )?,
            manifest_refused: counter(
                &r,
                "aldb_cache_manifest_refused_total",
                "Manifest heads refused (damaged, oversized or not understood); the last verified one stays in force.",
            )?,
            log_damaged: counter(
                &r,
                "aldb_cache_log_damaged_total",
                "Log objects whose bytes are not the manifest's (their damaged spans are skipped).",
            )?,
            log_repaired: counter(
                &r,
                "aldb_cache_log_repaired_total",
                "Log segments whose copy was replaced by one fetched again with the manifest's checksum.",
            )?,
            archive_fetches: counter(
                &r,
                "aldb_cache_archive_segment_fetches_total",
                "Vote-evidence segments fetched on demand for slots older than the copy of the log.",
            )?,
            archive_refused: counter(
                &r,
                "aldb_cache_archive_segment_refused_total",
                "Vote-evidence segments fetched on demand and refused because their bytes did not verify.",
            )?,
            manifest_reads: counter(&r, "aldb_cache_manifest_reads_total", "Manifests read from the bucket.")?,
            manifest_segment_reads: counter(
                &r,
                "aldb_cache_manifest_segment_reads_total",
                "Sealed manifest segments fetched from the bucket.",
            )?,
            manifest_bytes: counter(
                &r,
                "aldb_cache_manifest_bytes_total",
                "Bytes of manifest heads and sealed segments fetched.",
            )?,
            cached_bytes: gauge(&r, "aldb_cache_bytes", "Bytes of verified files in the cache.")?,
            cached_files: gauge(&r, "aldb_cache_files", "Verified files in the cache.")?,
            registry: r,
        })
    }
}
