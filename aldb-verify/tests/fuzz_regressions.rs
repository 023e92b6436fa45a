//! Replays the checked-in fuzz inputs (`fuzz/seeds/<target>`, the seeds the fuzzer starts from,
//! and `fuzz/regressions/<target>`, inputs of fixed findings) through the same target bodies the
//! fuzzer runs (`fuzz/src/verify.rs`), so every decoder still takes them without panicking.
#![cfg(feature = "json")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code, unreachable_pub, missing_docs)]

#[path = "../../fuzz/src/replay.rs"]
mod replay;
#[path = "../../fuzz/src/verify.rs"]
mod verify;

use replay::replay;

#[test]
fn proof_wire() {
    replay(env!("CARGO_MANIFEST_DIR"), "proof_wire", verify::proof_wire);
}

#[test]
fn proof_json() {
    replay(env!("CARGO_MANIFEST_DIR"), "proof_json", verify::proof_json);
}

#[test]
fn record_wire() {
    replay(env!("CARGO_MANIFEST_DIR"), "record_wire", verify::record_wire);
}

#[test]
fn record_json() {
    replay(env!("CARGO_MANIFEST_DIR"), "record_json", verify::record_json);
}
