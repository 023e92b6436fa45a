//! The process-wide module reads `ALDB_BANK_CONFIG` once; a config it cannot use is returned to
//! every caller, so the validator halts at its first bank with the reason. One test in this
//! binary: the module is process-global.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use aldb_bank::{BankError, CONFIG_ENV, global};

#[test]
fn a_bad_config_refuses_every_call_with_its_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("bank.json");
    std::fs::write(&path, r#"{"snapshot_dir": "s", "keep_slotz": 3}"#).unwrap();
    // SAFETY: the only test of this binary sets the variable before anything reads the environment.
    unsafe { std::env::set_var(CONFIG_ENV, &path) };
    let mut roots = global().lock().unwrap();
    let e = roots.build_base(0, &[]).unwrap_err();
    assert!(matches!(&e, BankError::Config(_)), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("bank.json") && msg.contains("keep_slotz"), "{msg}");
    assert!(matches!(roots.freeze(1, 0, &[]), Err(BankError::Config(_))));
    assert!(matches!(roots.root(0), Err(BankError::Config(_))));
    assert!(matches!(roots.confirmed(0), Err(BankError::Config(_))));
    assert!(!roots.holds(0) && roots.root_of(0).is_none() && roots.sink_stats().is_none());
}
