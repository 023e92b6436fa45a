//! Replays the checked-in fuzz inputs (`fuzz/seeds/<target>`, the seeds the fuzzer starts from,
//! and `fuzz/regressions/<target>`, inputs of fixed findings) through the same target bodies the
//! fuzzer runs (`fuzz/src/relayer.rs`), so every decoder still takes them without panicking.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code, unreachable_pub, missing_docs)]

#[path = "../../fuzz/src/relayer.rs"]
mod relayer;
#[path = "../../fuzz/src/replay.rs"]
mod replay;

use replay::replay;

#[test]
fn relayer_config() {
    replay(env!("CARGO_MANIFEST_DIR"), "relayer_config", relayer::relayer_config);
}

#[test]
fn relayer_message() {
    replay(env!("CARGO_MANIFEST_DIR"), "relayer_message", relayer::relayer_message);
}
