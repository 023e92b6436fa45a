//! Replays the checked-in fuzz inputs (`fuzz/seeds/<target>`, the seeds the fuzzer starts from,
//! and `fuzz/regressions/<target>`, inputs of fixed findings) through the same target bodies the
//! fuzzer runs (`fuzz/src/snapshot.rs`), so every decoder still takes them without panicking.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code, unreachable_pub, missing_docs)]

#[path = "../../fuzz/src/replay.rs"]
mod replay;
#[path = "../../fuzz/src/snapshot.rs"]
mod snapshot;

use replay::replay;

#[test]
fn record_log() {
    replay(env!("CARGO_MANIFEST_DIR"), "record_log", snapshot::record_log);
}

#[test]
fn snapshot_file() {
    replay(env!("CARGO_MANIFEST_DIR"), "snapshot_file", snapshot::snapshot_file);
}
