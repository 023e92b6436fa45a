//! Replays the checked-in inputs of the `vote_transaction` fuzz target (`fuzz/seeds/` and
//! `fuzz/regressions/`) through the body the fuzzer runs (`fuzz/src/votes.rs`).
#![cfg(feature = "json")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code, unreachable_pub, missing_docs)]

#[path = "../../fuzz/src/replay.rs"]
mod replay;
#[path = "../../fuzz/src/votes.rs"]
mod votes;

#[test]
fn vote_transaction() {
    replay::replay(env!("CARGO_MANIFEST_DIR"), "vote_transaction", votes::vote_transaction);
}
