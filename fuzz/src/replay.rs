//! Replays checked-in fuzz inputs through a target body, for the crates' `fuzz_regressions` tests.

use std::path::{Path, PathBuf};

/// Runs `run` on every file of `fuzz/seeds/<target>` and `fuzz/regressions/<target>` (relative
/// to `crate_dir`, a crate of the main workspace) and fails naming each input that panicked.
pub fn replay(crate_dir: &str, target: &str, run: fn(&[u8])) {
    let fuzz = Path::new(crate_dir).join("../fuzz");
    let mut inputs: Vec<PathBuf> = Vec::new();
    for kind in ["seeds", "regressions"] {
        let Ok(entries) = std::fs::read_dir(fuzz.join(kind).join(target)) else { continue };
        for entry in entries {
            inputs.push(entry.expect("list fuzz inputs").path());
        }
    }
    inputs.sort();
    assert!(!inputs.is_empty(), "no checked-in inputs for fuzz target {target}");
    let mut failed = Vec::new();
    for path in &inputs {
        let data = std::fs::read(path).expect("read fuzz input");
        if std::panic::catch_unwind(|| run(&data)).is_err() {
            failed.push(path.display().to_string());
        }
    }
    assert!(failed.is_empty(), "{target}: {} of {} inputs panicked: {failed:?}", failed.len(), inputs.len());
}
