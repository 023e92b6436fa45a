//! `aldb proof --url` against a real Hyades service on loopback: verified answers for present
//! and absent accounts, and a non-zero exit whenever something does not verify — a wrong trusted
//! root, a slot the service cannot serve, or a service whose answers were tampered with.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;

use aldb_fixture::History;
use aldb_format::Account;
use aldb_snapshot::WriterConfig;
use aldb_verify::hash_to_base58;
use common::service::{Hyades, tampering_proxy};
use common::{aldb, text};
use serde_json::Value;

fn account(i: u8, lamports: u64) -> Account {
    Account {
        pubkey: [i; 32],
        lamports,
        owner: [200; 32],
        executable: i.is_multiple_of(2),
        data: vec![i; usize::from(i)],
    }
}

#[test]
fn proof_from_a_running_service_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let mut history = History::start(WriterConfig::new(dir.path()), 64).unwrap();
    history.commit(0, None, &(1..40).map(|i| account(i, 1000 + u64::from(i))).collect::<Vec<_>>()).unwrap();
    history.commit(1, Some(0), &[account(3, 7), account(4, 0), account(50, 9)]).unwrap();
    let roots = history.finish().unwrap();

    let hyades = Hyades::start(dir.path());
    let url = hyades.url.clone();
    let key = |i: u8| hash_to_base58(&[i; 32]);

    // Present, at the newest slot by default.
    let out = aldb(&["proof", "--url", &url, &key(3), "--trust-server"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("warning: --trust-server: the root is the service's own word"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains("root trusted: the service's own word (--trust-server)"),
        "{}",
        text(&out.stdout)
    );
    let stdout = text(&out.stdout);
    assert!(stdout.contains(&format!("account {}", key(3))), "{stdout}");
    assert!(stdout.contains("lamports: 7"), "{stdout}");
    assert!(stdout.contains(&format!("owner: {}", hash_to_base58(&[200; 32]))), "{stdout}");
    assert!(stdout.contains("data: 3 bytes: AwMD"), "{stdout}");
    assert!(
        stdout.trim_end().ends_with(&format!("verified against root {} at slot 1", hash_to_base58(&roots[&1]))),
        "{stdout}"
    );

    // At an older slot, against a root the caller trusts.
    let root0 = hash_to_base58(&roots[&0]);
    let out = aldb(&["proof", "--url", &url, &key(4), "--slot", "0", "--root", &root0]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("lamports: 1004"));
    assert!(text(&out.stdout).contains(&format!("verified against root {root0} at slot 0")));
    assert!(text(&out.stdout).contains("root trusted: given with --root"));
    assert!(!text(&out.stderr).contains("warning"), "{}", text(&out.stderr));

    // Absent: deleted at slot 1, and never created.
    for k in [key(4), key(99)] {
        let out = aldb(&["proof", "--url", &url, &k, "--slot", "1", "--trust-server"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(text(&out.stdout).contains(&format!("account {k}: absent")), "{}", text(&out.stdout));
    }

    // Failures exit non-zero with the reason.
    let out = aldb(&["proof", "--url", &url, &key(3), "--slot", "1", "--root", &root0]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("is not the trusted root"), "{}", text(&out.stderr));
    let out = aldb(&["proof", "--url", &url, &key(3), "--slot", "9", "--trust-server"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("-32004"), "{}", text(&out.stderr));
    let out = aldb(&["proof", "--url", &url, "nope", "--trust-server"]);
    assert!(!out.status.success());
    let out = aldb(&["proof", "--url", "http://127.0.0.1:1/", &key(3), "--trust-server"]);
    assert!(!out.status.success());

    // A service that lies about the account, the proof or the root is caught.
    let lies: [fn(&mut Value); 4] = [
        |v| {
            if let Some(a) = v.pointer_mut("/result/value/account/lamports") {
                *a = Value::from(8);
            }
        },
        |v| {
            if let Some(a) = v.pointer_mut("/result/value/account") {
                *a = Value::Null;
            }
        },
        |v| {
            if let Some(h) = v.pointer_mut("/result/value/proof/siblings/0/hash") {
                *h = Value::from(hash_to_base58(&[1; 32]));
            }
        },
        |v| {
            if let Some(r) = v.pointer_mut("/result/value/root") {
                *r = Value::from(hash_to_base58(&[1; 32]));
            }
        },
    ];
    for (i, lie) in lies.into_iter().enumerate() {
        let proxy = tampering_proxy(url.clone(), lie);
        let out = aldb(&["proof", "--url", &proxy, &key(3), "--trust-server"]);
        assert!(!out.status.success(), "lie {i} was believed: {}", text(&out.stdout));
        assert!(!text(&out.stdout).contains("verified"), "lie {i}");
    }
}

/// The raw body a scripted service answers a JSON-RPC method with.
type Answer = fn(&str) -> Vec<u8>;

/// A loopback HTTP server that answers every JSON-RPC call with `answer(method)`, raw: a
/// hostile service that needs no upstream.
fn scripted_service(answer: Answer) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let Ok(read_half) = stream.try_clone() else { continue };
            let mut reader = BufReader::new(read_half);
            let mut len = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; len];
            if reader.read_exact(&mut body).is_err() {
                continue;
            }
            let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let out = answer(request["method"].as_str().unwrap_or(""));
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                out.len()
            );
            // The client may hang up before the end of an over-long answer; that is the point.
            let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(&out));
        }
    });
    format!("http://{addr}/")
}

fn result(value: Value) -> Vec<u8> {
    serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": {"context": {"slot": 5}, "value": value}})
        .to_string()
        .into_bytes()
}

#[test]
fn a_hostile_service_is_refused_fast_with_short_errors() {
    let key = hash_to_base58(&[3; 32]);
    let cases: [(Answer, &str); 5] = [
        // A root of a million digits: minutes of generic base58 decoding, refused by its length.
        (
            |_| {
                result(serde_json::json!({
                    "slot": 5,
                    "root": "2".repeat(1_000_000),
                    "proof": {"version": 1, "siblings": [], "terminal": {"kind": "empty"}},
                    "account": null,
                }))
            },
            "root \"2222222222222222…\" (1000000 bytes) is not base58 of 32 bytes: base58 text of 1000000 bytes is too long",
        ),
        // A hash in the proof, likewise.
        (
            |_| {
                let h = hash_to_base58(&[1; 32]);
                result(serde_json::json!({
                    "slot": 5,
                    "root": h,
                    "proof": {"version": 1, "siblings": [{"depth": 0, "hash": "2".repeat(1_000_000)}], "terminal": {"kind": "empty"}},
                    "account": null,
                }))
            },
            "`siblings[0].hash`: base58 text of 1000000 bytes is too long",
        ),
        // An answer past the body cap is not read to its end.
        (|_| vec![b' '; (16 << 20) + 1], "cannot read the response (at most 16777216 bytes)"),
        // A service's error message is quoted only in part.
        (
            |_| {
                serde_json::json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "x".repeat(1_000_000)}})
                    .to_string()
                    .into_bytes()
            },
            "getAccountProof failed: error -32000: xxxxxxxxxx",
        ),
        (|_| format!("{{\"{}\": 1}}", "y".repeat(1_000_000)).into_bytes(), "response has neither result nor error"),
    ];
    for (i, (answer, want)) in cases.into_iter().enumerate() {
        let url = scripted_service(answer);
        let out = aldb(&["proof", "--url", &url, &key, "--trust-server"]);
        assert!(!out.status.success(), "case {i} was believed: {}", text(&out.stdout));
        let err = text(&out.stderr);
        assert!(err.contains(want), "case {i}: {err}");
        assert!(err.len() < 1000, "case {i}: {} bytes of stderr", err.len());
    }
}
