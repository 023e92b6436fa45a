//! Shared by the `aldb` binary's tests: running it, a real Hyades on loopback and a dishonest
//! proxy in front of one, and the workload `aldb simulate` writes with its model.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code, unreachable_pub)]

pub mod epochs;
pub mod service;
pub mod workload;

use std::process::{Command, Output};

/// Runs the `aldb` binary with `args`.
pub fn aldb(args: &[&str]) -> Output {
    // Without a backtrace, stderr is exactly the error's message, whose length the tests bound.
    Command::new(env!("CARGO_BIN_EXE_aldb"))
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .env("RUST_LIB_BACKTRACE", "0")
        .output()
        .expect("run aldb")
}

/// Output bytes as text, for messages and `contains` checks.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
