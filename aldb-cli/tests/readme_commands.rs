//! Every shell block of the READMEs and BENCHMARKS.md is in `scripts/readme-commands.sh`'s list
//! (run, or skipped with a reason), so a command added to the docs is either run by that script
//! or says why not.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

#[test]
fn every_readme_command_block_is_covered_by_the_runner() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let out = Command::new("bash")
        .arg("scripts/readme-commands.sh")
        .arg("--check")
        .current_dir(root)
        .output()
        .expect("run bash");
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}
