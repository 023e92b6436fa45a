//! Hyades' JSON-RPC front: `Rpc::handle` (request parsing, batches, params, dispatch) over HTTP
//! (no subscriptions) and WebSocket (a connection's subscriptions), against a small real snapshot
//! directory with root records.
//!
//! `rpc_params` is a fuzz target body: it must not panic on any input. The fuzz target calls it,
//! and hyades' `fuzz_regressions` test replays the checked-in inputs through it.

use std::sync::{Arc, OnceLock};

use aldb_fixture::History;
use aldb_format::{Account, SnapshotReader};
use aldb_snapshot::WriterConfig;
use aldb_snapshot::records::LoggedRecord;
use aldb_verify::record::{Attestation, Commitment, ParentLink, RootRecord};
use hyades::rpc::Subscriptions;
use hyades::{Limits, Metrics, RecordFeed, Rpc, RpcError};

/// Slots of the fixture (0..SLOTS) and accounts changed in each: accounts have pubkeys `[k; 32]`
/// for `k` in `1..=ACCOUNTS`, so `getAccountProof` finds some.
const SLOTS: u64 = 4;
const ACCOUNTS: u8 = 8;

fn rpc() -> &'static Rpc {
    static RPC: OnceLock<Rpc> = OnceLock::new();
    RPC.get_or_init(|| {
        static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
        let dir = DIR.get_or_init(|| tempfile::tempdir().expect("fixture directory")).path();
        let mut config = WriterConfig::new(dir);
        config.direct_io = false;
        let mut history = History::start(config, 64).expect("start history");
        for slot in 0..SLOTS {
            let accounts: Vec<Account> = (1..=ACCOUNTS)
                .filter(|k| slot == 0 || u64::from(*k) % SLOTS == slot)
                .map(|k| Account {
                    pubkey: [k; 32],
                    lamports: 1000 * u64::from(k) + slot,
                    owner: [0xee; 32],
                    executable: k == 3,
                    data: vec![k; usize::from(k)],
                })
                .collect();
            history.commit(slot, slot.checked_sub(1), &accounts).expect("commit");
        }
        let roots = history.finish().expect("finish history");
        let mut logged = Vec::new();
        let mut parent: Option<(u64, [u8; 32])> = None;
        for (&slot, root) in &roots {
            let record = RootRecord {
                genesis_hash: [7; 32],
                slot,
                parent: parent.map(|(s, h)| ParentLink { slot: s, record_hash: Some(h), bank_hash: None }),
                commitment: Commitment::Finalized,
                state_root: *root,
                block: None,
                bank_hash: None,
            };
            let record_hash = record.hash();
            let attestations = vec![Attestation { identity: [9; 32], signature: [8; 64] }];
            logged.push(LoggedRecord { record, record_hash, attestations });
            parent = Some((slot, record_hash));
        }
        let feed = RecordFeed::new(16);
        feed.push(&logged);
        let hyades = SnapshotReader::open(dir).expect("open fixture");
        Rpc::with_records(
            Arc::new(hyades),
            Arc::new(feed),
            Arc::new(Metrics::new().expect("metrics")),
            Limits::default(),
        )
    })
}

/// A connection's subscriptions, bounded like the server's.
#[derive(Default)]
struct Subs {
    roots: Vec<u64>,
    records: Vec<u64>,
    next: u64,
}

impl Subscriptions for Subs {
    fn subscribe(&mut self) -> Result<u64, RpcError> {
        if self.roots.len() >= 4 {
            return Err(RpcError::new(-32005, "too many subscriptions"));
        }
        self.next += 1;
        self.roots.push(self.next);
        Ok(self.next)
    }

    fn unsubscribe(&mut self, id: u64) -> bool {
        let before = self.roots.len();
        self.roots.retain(|&s| s != id);
        self.roots.len() < before
    }

    fn record_subscribe(&mut self, _from_slot: Option<u64>, _commitment: Option<Commitment>) -> Result<u64, RpcError> {
        if self.records.len() >= 4 {
            return Err(RpcError::new(-32005, "too many subscriptions"));
        }
        self.next += 1;
        self.records.push(self.next);
        Ok(self.next)
    }

    fn record_unsubscribe(&mut self, id: u64) -> bool {
        let before = self.records.len();
        self.records.retain(|&s| s != id);
        self.records.len() < before
    }
}

fn answer_is_json(answer: Option<Vec<u8>>) {
    if let Some(body) = answer
        && let Err(e) = serde_json::from_slice::<serde_json::Value>(&body)
    {
        panic!("answer is not JSON ({e}): {}", String::from_utf8_lossy(&body[..body.len().min(300)]));
    }
}

/// A request body through `Rpc::handle`, without and with subscriptions: every answer is JSON.
pub fn rpc_params(data: &[u8]) {
    let rpc = rpc();
    answer_is_json(rpc.handle(data, None));
    let mut subs = Subs::default();
    answer_is_json(rpc.handle(data, Some(&mut subs)));
}
