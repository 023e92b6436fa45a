//! Shared by the integration tests: a history written by the real engine and snapshot writer, a
//! model of every slot's accounts, the real service on an ephemeral loopback port, and replicas
//! of a bucket on a real object store.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code, unreachable_pub)]

pub mod replica;
pub mod votes;

// The SeaweedFS harness is aldb-objstore's, used as is, so both crates start the store alike.
#[path = "../../../aldb-objstore/tests/common/weed.rs"]
pub mod weed;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use aldb_fixture::History;
use aldb_format::Account;
use aldb_snapshot::WriterConfig;
use hyades::{Config, Service};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};

pub type State = BTreeMap<[u8; 32], Account>;

/// A history being written, with the model state of every committed slot.
pub struct Model {
    pub history: Option<History>,
    pub rng: ChaCha8Rng,
    pub keys: Vec<[u8; 32]>,
    pub state: State,
    pub states: BTreeMap<u64, State>,
    pub next_slot: u64,
}

impl Model {
    pub fn new(config: WriterConfig, seed: u64) -> Self {
        Self {
            history: Some(History::start(config, 1 << 12).unwrap()),
            rng: ChaCha8Rng::seed_from_u64(seed),
            keys: Vec::new(),
            state: State::new(),
            states: BTreeMap::new(),
            next_slot: 0,
        }
    }

    fn random_account(&mut self, pubkey: [u8; 32], allow_delete: bool) -> Account {
        let rng = &mut self.rng;
        let lamports =
            if allow_delete && rng.random_range(0..100) < 10 { 0 } else { rng.random_range(1..1_000_000_000) };
        let len = rng.random_range(0..100);
        Account {
            pubkey,
            lamports,
            owner: rng.random(),
            executable: rng.random_bool(0.1),
            data: (0..len).map(|_| rng.random()).collect(),
        }
    }

    /// Commits one slot of `n` random creates, updates and deletes; returns the slot.
    pub fn commit_random(&mut self, n: usize) -> u64 {
        let mut accounts = Vec::with_capacity(n);
        for _ in 0..n {
            let new = self.keys.is_empty() || self.rng.random_range(0..100) < 30;
            let pk = if new {
                let k: [u8; 32] = self.rng.random();
                self.keys.push(k);
                k
            } else {
                self.keys[self.rng.random_range(0..self.keys.len())]
            };
            let a = self.random_account(pk, !new);
            accounts.push(a);
        }
        self.commit(&accounts)
    }

    pub fn commit(&mut self, accounts: &[Account]) -> u64 {
        let slot = self.next_slot;
        self.next_slot += 1;
        self.history.as_mut().unwrap().commit(slot, slot.checked_sub(1), accounts).unwrap();
        for a in accounts {
            if a.lamports == 0 {
                self.state.remove(&a.pubkey);
            } else {
                self.state.insert(a.pubkey, a.clone());
            }
        }
        self.states.insert(slot, self.state.clone());
        slot
    }

    pub fn flush(&self) {
        self.history.as_ref().unwrap().flush().unwrap();
    }

    pub fn root(&self, slot: u64) -> [u8; 32] {
        self.history.as_ref().unwrap().roots()[&slot]
    }

    pub fn finish(&mut self) -> BTreeMap<u64, [u8; 32]> {
        self.history.take().unwrap().finish().unwrap()
    }
}

/// The real service on its own runtime, listening on loopback ephemeral ports.
pub struct Server {
    pub rt: tokio::runtime::Runtime,
    pub service: Option<Service>,
    pub url: String,
    pub ws_url: String,
    pub metrics_url: String,
    agent: ureq::Agent,
}

impl Server {
    pub fn start(dir: &Path) -> Self {
        Self::start_with(dir, |_| {})
    }

    pub fn start_with(dir: &Path, tweak: impl FnOnce(&mut Config)) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let mut config = Config {
            addr: "127.0.0.1:0".parse().unwrap(),
            metrics_addr: Some("127.0.0.1:0".parse().unwrap()),
            poll_interval: Duration::from_millis(10),
            ..Config::new(dir)
        };
        tweak(&mut config);
        let service = rt.block_on(Service::start(config)).unwrap();
        let addr = service.local_addr();
        let metrics = service.metrics_addr().unwrap();
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .into();
        Self {
            rt,
            service: Some(service),
            url: format!("http://{addr}/"),
            ws_url: format!("ws://{addr}/ws"),
            metrics_url: format!("http://{metrics}/metrics"),
            agent,
        }
    }

    /// POSTs raw text; returns the HTTP status and body.
    pub fn post_raw(&self, body: &str) -> (u16, String) {
        let mut r = self.agent.post(&self.url).header("content-type", "application/json").send(body).unwrap();
        let status = r.status().as_u16();
        (status, r.body_mut().read_to_string().unwrap())
    }

    /// POSTs a JSON value; returns the parsed response.
    pub fn post(&self, body: &Value) -> Value {
        let (status, text) = self.post_raw(&body.to_string());
        assert_eq!(status, 200, "{text}");
        serde_json::from_str(&text).unwrap()
    }

    /// One call; returns the whole response object.
    pub fn call(&self, method: &str, params: Value) -> Value {
        let resp = self.post(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}));
        assert_eq!(resp["id"], 7, "{resp}");
        assert_eq!(resp["jsonrpc"], "2.0");
        resp
    }

    /// One call that must succeed; returns its result.
    pub fn ok(&self, method: &str, params: Value) -> Value {
        let resp = self.call(method, params);
        assert!(resp.get("error").is_none(), "{method}: {resp}");
        resp["result"].clone()
    }

    /// One call that must fail; returns its error object after checking the code.
    pub fn err(&self, method: &str, params: Value, code: i64) -> Value {
        let resp = self.call(method, params.clone());
        assert!(resp.get("result").is_none(), "{method} {params}: {resp}");
        assert_eq!(resp["error"]["code"], code, "{method} {params}: {resp}");
        resp["error"].clone()
    }

    pub fn metrics(&self) -> String {
        self.agent.get(&self.metrics_url).call().unwrap().body_mut().read_to_string().unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(s) = self.service.take() {
            self.rt.block_on(s.shutdown());
        }
    }
}

/// The value of the metric line `name` (labels included) in a metrics page; panics when absent.
pub fn metric(page: &str, name: &str) -> f64 {
    page.lines()
        .find(|l| l.strip_prefix(name).is_some_and(|rest| rest.starts_with(' ')))
        .and_then(|l| l.split(' ').nth(1))
        .unwrap_or_else(|| panic!("no {name} in {page}"))
        .parse()
        .unwrap()
}

pub fn b58(h: &[u8; 32]) -> String {
    aldb_verify::hash_to_base58(h)
}

/// Polls `check` until it holds; the test fails if it does not within `within`.
pub fn wait_until(what: &str, within: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Signed finalized root records for slots `1..=slots` in `dir`, each the child of the one
/// before, with a root derived from its slot.
pub fn finalized_records(dir: &Path, slots: u64) {
    use aldb_snapshot::records::{RecordInput, RecordProducer, Signer};
    let mut p = RecordProducer::open(dir, [0x47; 32], Some(Signer::from_seed(&[7; 32]))).unwrap();
    for slot in 1..=slots {
        let input = RecordInput {
            slot,
            parent: Some(slot - 1),
            commitment: aldb_verify::record::Commitment::Finalized,
            state_root: [(slot % 251) as u8; 32],
            block: None,
            parent_bank_hash: None,
            bank_hash: None,
        };
        p.produce(input).unwrap();
    }
}
