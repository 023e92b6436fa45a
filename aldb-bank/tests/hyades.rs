//! The real Hyades on the directory the module wrote: over HTTP on loopback it answers proofs that
//! verify against the module's roots, says each bank's level, and refuses abandoned banks, as it
//! does for the plugin's directory.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use aldb_bank::{BankMeta, BankRoots, SinkConfig};
use aldb_testkit::{State, apply, naive_root, random::bank_writes, refs};
use aldb_verify::{Claim, Proof};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};

/// One JSON-RPC call over a plain HTTP/1.1 request.
fn call(addr: SocketAddr, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: \
         close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (_, body) = out.split_once("\r\n\r\n").expect("an HTTP answer");
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

#[test]
fn hyades_serves_the_modules_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("snapshots");
    let config = SinkConfig { threads: Some(2), queue_bound: 4096, direct_io: false, ..SinkConfig::new(&dir) };
    let mut roots = BankRoots::with_sink(&config).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut states = std::collections::BTreeMap::new();
    let g = bank_writes(&mut rng, &State::new(), 200);
    let mut s0 = State::new();
    apply(&mut s0, &g);
    roots.build_base(0, &refs(&g)).unwrap();
    states.insert(0u64, s0);
    // 0 <- 1 <- 2 <- 4, and 3 on 1 (a fork that dies).
    for (slot, parent) in [(1u64, 0u64), (2, 1), (3, 1), (4, 2)] {
        let mut s = states[&parent].clone();
        let w = bank_writes(&mut rng, &s, 20);
        apply(&mut s, &w);
        assert_eq!(roots.freeze(slot, parent, &refs(&w)).unwrap(), naive_root(&s));
        roots.bank_hash(slot, BankMeta::default()).unwrap();
        states.insert(slot, s);
    }
    roots.dead(3).unwrap();
    roots.confirmed(2).unwrap();
    roots.root(1).unwrap();
    roots.flush_sink();

    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let service = rt
        .block_on(hyades::Service::start(hyades::Config {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            metrics_addr: None,
            ..hyades::Config::new(&dir)
        }))
        .unwrap();
    let addr = service.local_addr();

    let levels = [(0u64, "finalized"), (1, "finalized"), (2, "confirmed"), (4, "processed")];
    for (slot, level) in levels {
        let state = &states[&slot];
        let root = naive_root(state);
        let keys: Vec<[u8; 32]> = state.keys().step_by(9).copied().chain([[1u8; 32]]).collect();
        for key in keys {
            let r = call(addr, "getAccountProof", json!([bs58::encode(key).into_string(), {"slot": slot}]));
            let v = &r["result"]["value"];
            assert_eq!((v["slot"].as_u64(), v["commitment"].as_str()), (Some(slot), Some(level)), "{r}");
            let claim = Proof::from_json_value(&v["proof"]).unwrap().verify(&root, &key).unwrap();
            assert_eq!(matches!(claim, Claim::Present { .. }), state.contains_key(&key), "slot {slot}");
        }
    }
    let r = call(addr, "getAccountProof", json!([bs58::encode([1u8; 32]).into_string(), {"slot": 3}]));
    assert_eq!(r["error"]["code"], hyades::codes::SLOT_ABANDONED, "{r}");
    rt.block_on(service.shutdown());
}
