//! Forks and commitment levels against the real service on loopback: a directory written by the
//! fork-mode snapshot writer (every frozen bank, forks included, driven by
//! `aldb_core::ForkEngine::freeze_capture`) with its slot-status journal. Each served slot says
//! its level, `commitment` selects the newest slot at a level, an abandoned slot answers -32013
//! and never a proof, and the root feed tells each subscriber the level of every root and never
//! announces an abandoned one as confirmed or final.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use aldb_core::{AccountRef, ChangeSet, Config, ForkEngine, ForkLimits, Pleiades};
use aldb_format::Account;
use aldb_snapshot::{AccountBatch, CAPTURE_OPTIONS, SlotInput, SlotMark, SnapshotWriter, WriterConfig};
use aldb_verify::{Claim, Proof};
use common::{Server, b58, wait_until};
use futures_util::{SinkExt, StreamExt};
use hyades::codes;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// How long a notification or level change may take to show.
const WAIT: Duration = Duration::from_secs(20);

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;
type State = BTreeMap<[u8; 32], Account>;

/// The fork-mode writer fed by the fork-aware engine, with every bank's state as a model.
struct Banks {
    rng: ChaCha8Rng,
    keys: Vec<[u8; 32]>,
    engine: ForkEngine,
    writer: SnapshotWriter,
    /// Every bank frozen (its latest version), with its parent, root and state.
    banks: BTreeMap<u64, (Option<u64>, [u8; 32], State)>,
}

impl Banks {
    fn start(dir: &std::path::Path, seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut keys = Vec::new();
        let accounts = draw(&mut rng, &mut keys, 200);
        let mut tree = Pleiades::new(Config::for_leaves(1 << 12, 2)).unwrap();
        let r = refs(&accounts);
        let updates = tree.hash_accounts(&r);
        let batch = AccountBatch::from_updates(&updates, &r);
        let mut changes = ChangeSet::new(CAPTURE_OPTIONS);
        let root = tree.commit_capture(updates, &mut changes);
        tree.capture_all(&mut changes);
        let config = WriterConfig { forks: true, keep_slots: 1000, direct_io: false, ..WriterConfig::new(dir) };
        let writer = SnapshotWriter::start(config, None).unwrap();
        writer.submit(SlotInput { slot: 0, parent: None, root, changes, accounts: batch, full: true }).unwrap();
        let state = apply(&State::new(), &accounts);
        let engine = ForkEngine::new(tree, 0, ForkLimits::default());
        Self { rng, keys, engine, writer, banks: BTreeMap::from([(0, (None, root, state))]) }
    }

    /// Freezes `slot` on `parent` with a few random writes and submits it.
    fn freeze(&mut self, slot: u64, parent: u64) {
        let accounts = draw(&mut self.rng, &mut self.keys, 20);
        let r = refs(&accounts);
        let updates = self.engine.tree().hash_accounts(&r);
        let batch = AccountBatch::from_updates(&updates, &r);
        let mut changes = ChangeSet::new(CAPTURE_OPTIONS);
        let root = self.engine.freeze_capture(slot, parent, updates, &mut changes).unwrap();
        let state = apply(&self.banks[&parent].2, &accounts);
        self.banks.insert(slot, (Some(parent), root, state));
        let input = SlotInput { slot, parent: Some(parent), root, changes, accounts: batch, full: false };
        self.writer.submit(input).unwrap();
    }

    fn mark(&self, slot: u64, mark: SlotMark) {
        self.writer.mark(slot, mark).unwrap();
        self.writer.flush().unwrap();
    }

    fn root(&self, slot: u64) -> [u8; 32] {
        self.banks[&slot].1
    }
}

fn draw(rng: &mut ChaCha8Rng, keys: &mut Vec<[u8; 32]>, n: usize) -> Vec<Account> {
    (0..n)
        .map(|_| {
            let new = keys.is_empty() || rng.random_range(0..100) < 40;
            let pubkey = if new {
                let k: [u8; 32] = rng.random();
                keys.push(k);
                k
            } else {
                keys[rng.random_range(0..keys.len())]
            };
            let lamports = if !new && rng.random_range(0..100) < 10 { 0 } else { rng.random_range(1..1_000_000) };
            let len = rng.random_range(0..40);
            Account {
                pubkey,
                lamports,
                owner: rng.random(),
                executable: false,
                data: (0..len).map(|_| rng.random()).collect(),
            }
        })
        .collect()
}

/// One entry per key (the last one), as a bank takes them.
fn refs(accounts: &[Account]) -> Vec<AccountRef<'_>> {
    let mut last: BTreeMap<[u8; 32], &Account> = BTreeMap::new();
    for a in accounts {
        last.insert(a.pubkey, a);
    }
    last.values()
        .map(|a| AccountRef {
            pubkey: &a.pubkey,
            lamports: a.lamports,
            owner: &a.owner,
            executable: a.executable,
            data: &a.data,
        })
        .collect()
}

fn apply(state: &State, accounts: &[Account]) -> State {
    let mut s = state.clone();
    for a in accounts {
        if a.lamports == 0 {
            s.remove(&a.pubkey);
        } else {
            s.insert(a.pubkey, a.clone());
        }
    }
    s
}

fn level_of(s: &Server, slot: u64) -> Value {
    let r = s.call("getStateRoot", json!([slot]));
    r.get("result").map_or(Value::Null, |r| r["value"]["commitment"].clone())
}

async fn subscribe(url: &str, params: Value) -> Ws {
    let mut ws = tokio_tungstenite::connect_async(url).await.unwrap().0;
    ws.send(Message::text(json!({"jsonrpc": "2.0", "id": 1, "method": "rootSubscribe", "params": params}).to_string()))
        .await
        .unwrap();
    let r = next_json(&mut ws, Duration::from_secs(10)).await.unwrap();
    assert!(r["result"].is_u64(), "{r}");
    ws
}

async fn next_json(ws: &mut Ws, wait: Duration) -> Option<Value> {
    loop {
        match tokio::time::timeout(wait, ws.next()).await {
            Err(_) => return None,
            Ok(Some(Ok(Message::Text(t)))) => return Some(serde_json::from_str(t.as_str()).unwrap()),
            Ok(Some(Ok(Message::Ping(_) | Message::Pong(_)))) => continue,
            Ok(other) => panic!("unexpected {other:?}"),
        }
    }
}

/// Every root notification received until none arrives for a while.
async fn drain(ws: &mut Ws) -> Vec<Value> {
    let mut out = Vec::new();
    while let Some(n) = next_json(ws, Duration::from_millis(500)).await {
        assert_eq!(n["method"], "rootNotification", "{n}");
        out.push(n["params"]["result"].clone());
    }
    out
}

/// What the notifications said of each slot, in order: `(root, commitment, abandoned)`.
fn by_slot(notes: &[Value]) -> BTreeMap<u64, Vec<(String, String, bool)>> {
    let mut out: BTreeMap<u64, Vec<_>> = BTreeMap::new();
    for n in notes {
        let entry = (
            n["root"].as_str().unwrap().to_string(),
            n["commitment"].as_str().unwrap().to_string(),
            n["abandoned"].as_bool().unwrap_or(false),
        );
        out.entry(n["slot"].as_u64().unwrap()).or_default().push(entry);
    }
    out
}

#[test]
fn forks_are_served_with_their_levels_and_abandoned_banks_never_are() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Banks::start(dir.path(), 14);
    b.writer.flush().unwrap();
    let s = Server::start(dir.path());
    let url = s.ws_url.clone();
    let (mut all, mut confirmed, mut finalized) = s.rt.block_on(async {
        (
            subscribe(&url, json!([])).await,
            subscribe(&url, json!([{"commitment": "confirmed"}])).await,
            subscribe(&url, json!([{"commitment": "finalized"}])).await,
        )
    });

    // Two forks from 1: 1 <- 2 <- 4 <- 6 and 1 <- 3 <- 5, frozen interleaved (switches both ways).
    for (slot, parent) in [(1, 0), (2, 1), (3, 1), (4, 2), (5, 3)] {
        b.freeze(slot, parent);
    }
    b.writer.flush().unwrap();
    wait_until("slot 5", WAIT, || level_of(&s, 5) == "processed");
    for slot in 0..=5 {
        let v = s.ok("getStateRoot", json!([slot]))["value"].clone();
        assert_eq!(v["root"], b58(&b.root(slot)), "slot {slot}");
        assert_eq!(v["commitment"], "processed", "slot {slot}");
        assert_eq!(v["parent"], json!(b.banks[&slot].0), "slot {slot}");
    }
    // The newest slot is the default, whichever fork it is on.
    assert_eq!(s.ok("getStateRoot", json!([]))["value"]["slot"], 5);
    s.err("getStateRoot", json!([{"commitment": "confirmed"}]), codes::NOTHING_PUBLISHED);

    // Confirming 4 confirms its chain.
    b.mark(4, SlotMark::Confirmed);
    wait_until("4 confirmed", WAIT, || level_of(&s, 4) == "confirmed");
    for (slot, level) in [(0, "confirmed"), (1, "confirmed"), (2, "confirmed"), (3, "processed"), (5, "processed")] {
        assert_eq!(level_of(&s, slot), level, "slot {slot}");
    }
    let r = s.ok("getStateRoot", json!([{"commitment": "confirmed"}]));
    assert_eq!(r["value"], json!({"slot": 4, "parent": 2, "root": b58(&b.root(4)), "commitment": "confirmed"}));
    // A slot below the level asked for is not committed at it yet.
    let e = s.err("getStateRoot", json!([5, {"commitment": "confirmed"}]), codes::SLOT_NOT_COMMITTED);
    assert_eq!(
        (e["data"]["commitment"].clone(), e["data"]["requested"].clone()),
        (json!("processed"), json!("confirmed"))
    );

    // 5 frozen again on another parent: its old bank is dropped and the new file replaces it.
    let old5 = b.root(5);
    b.freeze(5, 1);
    b.freeze(6, 4);
    b.writer.flush().unwrap();
    wait_until("slot 6", WAIT, || level_of(&s, 6) == "processed");
    let v = s.ok("getStateRoot", json!([5]))["value"].clone();
    assert_eq!((v["root"].clone(), v["parent"].clone()), (json!(b58(&b.root(5))), json!(1)));
    assert_ne!(old5, b.root(5));

    // Rooting 2 finalizes 0..=2 and abandons the fork of 3 and 5; their files may remain.
    b.engine.root(2).unwrap();
    b.mark(2, SlotMark::Finalized);
    wait_until("2 finalized", WAIT, || level_of(&s, 2) == "finalized");
    for (slot, level) in [(0, "finalized"), (1, "finalized"), (2, "finalized"), (4, "confirmed"), (6, "processed")] {
        assert_eq!(level_of(&s, slot), level, "slot {slot}");
    }
    let key = *b.banks[&3].2.keys().next().unwrap();
    for slot in [3u64, 5] {
        let e = s.err("getStateRoot", json!([slot]), codes::SLOT_ABANDONED);
        assert_eq!(e["message"], "slot abandoned: its fork was dropped");
        assert_eq!(e["data"]["slot"], slot);
        s.err("getAccountProof", json!([b58(&key), {"slot": slot}]), codes::SLOT_ABANDONED);
        s.err("getMultipleAccountProofs", json!([[b58(&key)], {"slot": slot}]), codes::SLOT_ABANDONED);
    }
    // Ranges leave the abandoned banks out and say every level.
    let r = s.ok("getStateRoots", json!([0, 10]));
    let got: Vec<(u64, String)> = r["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["slot"].as_u64().unwrap(), v["commitment"].as_str().unwrap().to_string()))
        .collect();
    let want: Vec<(u64, String)> =
        [(0, "finalized"), (1, "finalized"), (2, "finalized"), (4, "confirmed"), (6, "processed")]
            .into_iter()
            .map(|(s, l)| (s, l.to_string()))
            .collect();
    assert_eq!(got, want);
    assert_eq!(r["context"]["slot"], 6);

    // Each level selects its newest slot, and proofs there verify against its root.
    for (level, slot) in [("processed", 6u64), ("confirmed", 4), ("finalized", 2)] {
        let v = s.ok("getAccountProof", json!([b58(&key), {"commitment": level}]))["value"].clone();
        assert_eq!((v["slot"].as_u64(), v["commitment"].as_str()), (Some(slot), Some(level)), "{v}");
        let proof = Proof::from_json_value(&v["proof"]).unwrap();
        let claim = proof.verify(&b.root(slot), &key).unwrap();
        assert_eq!(matches!(claim, Claim::Present { .. }), b.banks[&slot].2.contains_key(&key), "slot {slot}");
        let many = s.ok("getMultipleAccountProofs", json!([[b58(&key)], {"commitment": level}]));
        assert_eq!(many["context"]["slot"], slot);
        assert_eq!(many["value"][0]["commitment"], level);
    }
    assert_eq!(s.ok("getStateRoot", json!([]))["value"]["slot"], 6);
    s.err("getStateRoot", json!([{"commitment": "rooted"}]), codes::INVALID_PARAMS);
    s.err("getAccountProof", json!([b58(&key), {"slot": 6, "commitment": "finalized"}]), codes::SLOT_NOT_COMMITTED);

    let metrics = s.metrics();
    for line in [
        "hyades_slots{commitment=\"finalized\"} 3",
        "hyades_slots{commitment=\"confirmed\"} 1",
        "hyades_slots{commitment=\"processed\"} 1",
        "hyades_abandoned_answers_total 6",
        "hyades_errors_total{code=\"-32013\"} 6",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} missing from:\n{metrics}");
    }

    // The feed: every root with its level as it changes, abandonments of announced roots; a
    // subscription at a level gets each root once, when it reaches the level.
    let (all, confirmed, finalized) =
        s.rt.block_on(async { (drain(&mut all).await, drain(&mut confirmed).await, drain(&mut finalized).await) });
    let r = |slot: u64| b58(&b.root(slot));
    let seen = by_slot(&all);
    let p = |root: &str, l: &str| (root.to_string(), l.to_string(), false);
    let gone = |root: &str| (root.to_string(), "processed".to_string(), true);
    assert_eq!(seen[&0], vec![p(&r(0), "confirmed"), p(&r(0), "finalized")], "slot 0 was served before subscribing");
    for slot in [1, 2] {
        let want = vec![p(&r(slot), "processed"), p(&r(slot), "confirmed"), p(&r(slot), "finalized")];
        assert_eq!(seen[&slot], want, "slot {slot}");
    }
    assert_eq!(seen[&3], vec![p(&r(3), "processed"), gone(&r(3))]);
    assert_eq!(seen[&4], vec![p(&r(4), "processed"), p(&r(4), "confirmed")]);
    assert_eq!(seen[&5], vec![p(&b58(&old5), "processed"), gone(&b58(&old5)), p(&r(5), "processed"), gone(&r(5))]);
    assert_eq!(seen[&6], vec![p(&r(6), "processed")]);
    let once = |notes: &[Value]| -> Vec<(u64, String, String)> {
        notes
            .iter()
            .map(|n| {
                (n["slot"].as_u64().unwrap(), n["root"].as_str().unwrap().to_string(), n["commitment"].to_string())
            })
            .collect()
    };
    let mut got = once(&confirmed);
    got.sort();
    let want: Vec<(u64, String, String)> =
        [0u64, 1, 2, 4].into_iter().map(|slot| (slot, r(slot), "\"confirmed\"".to_string())).collect();
    assert_eq!(got, want, "confirmed subscription: {confirmed:?}");
    let mut got = once(&finalized);
    got.sort();
    let want: Vec<(u64, String, String)> =
        [0u64, 1, 2].into_iter().map(|slot| (slot, r(slot), "\"finalized\"".to_string())).collect();
    assert_eq!(got, want, "finalized subscription: {finalized:?}");
}
