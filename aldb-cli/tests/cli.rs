//! The `aldb` binary against the checked-in vectors, which an independent implementation made.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Output;

use common::aldb;
use serde_json::Value;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn vectors() -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors/v1.json");
    serde_json::from_str(&std::fs::read_to_string(p).expect("vectors")).expect("json")
}

fn write_ops(dir: &Path, name: &str, ops: &[Value]) -> PathBuf {
    let path = dir.join(format!("{name}.jsonl"));
    let mut f = std::fs::File::create(&path).expect("create");
    for op in ops {
        writeln!(f, "{op}").expect("write");
    }
    path
}

#[test]
fn roots_and_proofs_match_the_vectors_exactly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let v = vectors();
    for case in v["cases"].as_array().expect("cases") {
        let name = case["name"].as_str().expect("name");
        let file = write_ops(dir.path(), name, case["ops"].as_array().expect("ops"));
        let file = file.to_str().expect("utf8");
        let out = aldb(&["root", file]);
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let root = stdout(&out).lines().last().expect("a line").to_string();
        assert_eq!(root, case["root"].as_str().expect("root"), "case {name}");
        for p in case["proofs"].as_array().expect("proofs") {
            let pk = p["pubkey"].as_str().expect("pubkey");
            let out = aldb(&["prove", file, pk]);
            assert!(out.status.success(), "{name}");
            let got: Value = serde_json::from_str(&stdout(&out)).expect("proof json");
            assert_eq!(got, p["proof"], "case {name}, proof for {pk}");

            let proof_file = dir.path().join("proof.json");
            std::fs::write(&proof_file, stdout(&out)).expect("write proof");
            let out = aldb(&["verify", "--root", &root, "--pubkey", pk, proof_file.to_str().expect("utf8")]);
            assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
            let expect = if p["present"].as_bool().expect("present") {
                format!("present {}", p["value"].as_str().expect("value"))
            } else {
                "absent".to_string()
            };
            assert_eq!(stdout(&out).trim(), expect);
        }
    }
}

#[test]
fn verify_rejects_a_proof_for_another_root() {
    let dir = tempfile::tempdir().expect("tempdir");
    let v = vectors();
    let case = &v["cases"].as_array().expect("cases")[3];
    let p = &case["proofs"][0];
    let proof_file = dir.path().join("proof.json");
    std::fs::write(&proof_file, p["proof"].to_string()).expect("write");
    let other_root = v["cases"][1]["root"].as_str().expect("root");
    let out = aldb(&[
        "verify",
        "--root",
        other_root,
        "--pubkey",
        p["pubkey"].as_str().expect("pk"),
        proof_file.to_str().expect("utf8"),
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("proof rejected"));
}

#[test]
fn bad_lines_are_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = r#"{"pubkey":"11111111111111111111111111111111","lamports":1,"owner":"11111111111111111111111111111111","executable":false,"data":""}"#;
    let cases = [
        (r#"{"pubkey":"11111111111111111111111111111111","lamports":1}"#, "line 3"),
        (
            r#"{"pubkey":"0OIl","lamports":1,"owner":"11111111111111111111111111111111","executable":false,"data":""}"#,
            "pubkey \"0OIl\" is not base58",
        ),
        (
            r#"{"pubkey":"1111","lamports":1,"owner":"11111111111111111111111111111111","executable":false,"data":""}"#,
            "32 bytes",
        ),
        (
            r#"{"pubkey":"11111111111111111111111111111111","lamports":-1,"owner":"11111111111111111111111111111111","executable":false,"data":""}"#,
            "line 3",
        ),
        (
            r#"{"pubkey":"11111111111111111111111111111111","lamports":1,"owner":"11111111111111111111111111111111","executable":false,"data":"***"}"#,
            "base64",
        ),
        (
            r#"{"pubkey":"11111111111111111111111111111111","lamports":1,"owner":"11111111111111111111111111111111","executable":false,"data":"","extra":1}"#,
            "line 3",
        ),
        ("not json", "line 3"),
    ];
    for (bad, needle) in cases {
        let f = dir.path().join("bad.jsonl");
        std::fs::write(&f, format!("{good}\n\n{bad}\n{good}\n")).expect("write");
        let out = aldb(&["root", f.to_str().expect("utf8")]);
        assert!(!out.status.success(), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle) && err.contains("line 3"), "{bad}: {err}");
    }
    let out = aldb(&["root", dir.path().join("missing.jsonl").to_str().expect("utf8")]);
    assert!(!out.status.success());
}

#[test]
fn a_million_digit_pubkey_is_refused_with_a_short_message() {
    // Generic base58 decoding of this line takes minutes; the bounded decoder refuses it by its
    // length alone, and the message quotes only an excerpt.
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("huge.jsonl");
    let owner = "11111111111111111111111111111111";
    let huge = "2".repeat(1_000_000);
    let line = format!(r#"{{"pubkey":"{huge}","lamports":1,"owner":"{owner}","executable":false,"data":""}}"#);
    std::fs::write(&f, line).expect("write");
    for args in [vec!["root", f.to_str().expect("utf8")], vec!["prove", f.to_str().expect("utf8"), owner]] {
        let out = aldb(&args);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("line 1") && err.contains("too long (at most 44"), "{err}");
        assert!(err.contains("\"2222222222222222…\" (1000000 bytes)"), "{err}");
        assert!(err.len() < 500, "{} bytes of stderr", err.len());
    }
    // The same text as an argument (cut to what one argument may hold) is refused the same way.
    let out = aldb(&["verify", "--root", &huge[..100_000], "--pubkey", owner]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("root \"2222222222222222…\" (100000 bytes)") && err.len() < 500, "{err}");
}

#[test]
fn an_over_long_proof_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("proof.json");
    std::fs::write(&f, " ".repeat((1 << 20) + 1)).expect("write");
    let key = "11111111111111111111111111111111";
    let out = aldb(&["verify", "--root", key, "--pubkey", key, f.to_str().expect("utf8")]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("longer than 1048576 bytes"), "{err}");
}

#[test]
fn empty_file_has_the_zero_root() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("empty.jsonl");
    std::fs::write(&f, "").expect("write");
    let out = aldb(&["root", f.to_str().expect("utf8")]);
    assert!(out.status.success());
    assert_eq!(stdout(&out).trim(), bs58::encode([0u8; 32]).into_string());
}
