//! The relayer on votes (`trust: "votes"`, `docs/SPEC.md` §11) against the real Hyades on
//! loopback, serving a snapshot directory and a vote-evidence log written by their real writers,
//! with TowerSync votes signed by real keys (fixed seeds). Epochs are 32 slots (`E` is slots
//! `32E..32E+31`); the checkpoint is the set of epoch 1.
//!
//! - One epoch: every slot voted for by more than 2/3 of the set is accepted, in order, once; a
//!   slot with exactly 2/3 is given up, never accepted; a restart resumes from the state file and
//!   writes nothing twice; each accepted root carries evidence that the set vouches for again.
//! - Misbehaviour: the banks of epoch 1 bind one set of epoch 2 up to a slot and another after
//!   it, each voted by everyone: the relayer freezes at the first slot of the second, writes the
//!   misbehaviour file (which verifies without a client), accepts nothing more, and stays frozen
//!   after a restart.
//! - Epochs: four epochs whose sets change, followed with `getEpochTransition` from the checkpoint;
//!   the first root of each new epoch carries the transition that proved its set.
//! - Forged transitions: through a proxy in front of Hyades (the root feed's WebSocket passed
//!   through byte for byte, the JSON-RPC answers over HTTP forwarded) that forges the transition to
//!   epoch 3 the four ways `scripts/validator-epochs.sh` does on validators, the relayer accepts
//!   every root of epochs 1 and 2, none of 3, names the refusal in its counters and metrics, and
//!   does not freeze.
//! - A trusting period that lapsed before a transition stops the relayer, as before a root.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aldb_fixture::History;
use aldb_fixture::votes::Voter;
use aldb_format::Account;
use aldb_format::votes::{AldbCommitment, BankEntry, SetEntry, VoteLog, VoteLogEntry, VotesEntry};
use aldb_relayer::roots::AcceptedRoot;
use aldb_relayer::{Config, Relayer, Stats};
use aldb_snapshot::WriterConfig;
use aldb_verify::epochs::{
    Checkpoint, EpochSchedule, EpochSet, Misbehaviour, MisbehaviourKind, SlotEvidence, Transition, bank_hash_with_set,
    verify_misbehaviour,
};
use aldb_verify::hash_to_base58;
use aldb_verify::votes::Validator;
use common::feed::FeedServer;
use common::output;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const WAIT: Duration = Duration::from_secs(60);
const EPOCH: u64 = 32;

fn schedule() -> EpochSchedule {
    EpochSchedule::new(EPOCH, EPOCH, false).unwrap()
}

fn voters() -> Vec<Voter> {
    (0..4u8).map(|i| Voter::new([40 + i; 32], (i % 2 == 1).then_some([60 + i; 32]), [80 + i; 32])).collect()
}

fn set(epoch: u64, vs: &[Voter], stakes: [u64; 4]) -> EpochSet {
    let members: Vec<Validator> = vs
        .iter()
        .zip(stakes)
        .map(|(v, stake)| Validator { vote_account: v.vote_account(), authorized_voter: v.authorized_voter(), stake })
        .collect();
    EpochSet::new(epoch, stakes.iter().sum(), &members).unwrap()
}

fn h_of(slot: u64) -> [u8; 32] {
    let mut h = [0xAB; 32];
    h[..8].copy_from_slice(&slot.to_le_bytes());
    h
}

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

/// A chain to write: slots `first..=last` with snapshots; the set of epoch `e` is `sets[e]`; the
/// banks of slot `s` bind `binds(s)`; `who(s)` vote on `s` in the block after it.
struct Chain {
    first: u64,
    last: u64,
    sets: BTreeMap<u64, EpochSet>,
    binds: fn(u64, &BTreeMap<u64, EpochSet>) -> [u8; 32],
    who: fn(u64) -> &'static [usize],
}

/// Writes the snapshots and the vote log; returns the roots.
fn write(dir: &Path, chain: &Chain, vs: &[Voter]) -> BTreeMap<u64, [u8; 32]> {
    let account = |i: u8, lamports: u64| Account {
        pubkey: [i; 32],
        lamports,
        owner: [200; 32],
        executable: false,
        data: vec![i; 3],
    };
    let config = WriterConfig { keep_slots: 10_000, direct_io: false, ..WriterConfig::new(dir) };
    let mut history = History::start(config, 64).unwrap();
    history.commit(0, None, &(1..20).map(|i| account(i, 1000 + u64::from(i))).collect::<Vec<_>>()).unwrap();
    for slot in 1..=chain.last {
        history.commit(slot, Some(slot - 1), &[account(3, 7 + slot)]).unwrap();
    }
    let roots = history.finish().unwrap();
    let mut log = VoteLog::open(dir).unwrap();
    let mut logged_sets = Vec::new();
    let mut prev: Option<BankEntry> = None;
    // One bank past the last snapshot carries the last slot's votes.
    for slot in chain.first..=chain.last + 1 {
        let root = roots.get(&slot).copied().unwrap_or([slot as u8; 32]);
        let next = (chain.binds)(slot, &chain.sets);
        let mut entries = Vec::new();
        if let Some(s) = chain.sets.values().find(|s| s.hash() == next)
            && !logged_sets.contains(&next)
        {
            entries.push(VoteLogEntry::Set(SetEntry::new(slot, s.encode())));
            logged_sets.push(next);
        }
        let h = h_of(slot);
        let bank = BankEntry {
            slot,
            parent: slot - 1,
            bank_hash: bank_hash_with_set(&h, &root, &next, None),
            aldb: Some(AldbCommitment { h, root }),
            hard_forks: None,
            next_set_hash: Some(next),
        };
        entries.push(VoteLogEntry::Bank(bank));
        if let Some(p) = prev {
            let txs = (chain.who)(p.slot).iter().map(|&i| vs[i].vote(p.slot, &p.bank_hash)).collect();
            entries.push(VoteLogEntry::Votes(VotesEntry { slot, transactions: txs }));
        }
        log.append(&entries).unwrap();
        prev = Some(bank);
    }
    roots
}

fn everyone(_: u64) -> &'static [usize] {
    &[0, 1, 2, 3]
}

/// Slot 40 gets the two large stakes only: 200 of 300, exactly 2/3.
fn all_but_slot_40(slot: u64) -> &'static [usize] {
    if slot == 40 { &[0, 1] } else { &[0, 1, 2, 3] }
}

/// The set of the epoch after the slot's.
fn next_set(slot: u64, sets: &BTreeMap<u64, EpochSet>) -> [u8; 32] {
    sets.get(&(slot / EPOCH + 1)).map_or([0; 32], EpochSet::hash)
}

struct Run {
    rt: tokio::runtime::Runtime,
    server: FeedServer,
    out: PathBuf,
}

struct Running {
    stop: tokio::sync::watch::Sender<bool>,
    handle: tokio::task::JoinHandle<Result<(), aldb_relayer::RelayError>>,
    stats: Arc<Stats>,
    roots: Arc<Mutex<Vec<AcceptedRoot>>>,
}

impl Run {
    fn new(dir: &Path, out: &Path, first_set: &EpochSet) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let server = rt.block_on(FeedServer::hyades(dir, "127.0.0.1:0".parse().unwrap()));
        std::fs::create_dir_all(out).unwrap();
        let checkpoint =
            Checkpoint { schedule: schedule(), set: first_set.clone(), time: now() - 100, trusting_period: 1_000_000 };
        std::fs::write(out.join("checkpoint.json"), checkpoint.to_json_value().to_string()).unwrap();
        Run { rt, server, out: out.to_path_buf() }
    }

    fn start(&self) -> Running {
        self.start_at(&self.server.url(), &self.out, "")
    }

    /// A relayer following `url`, its files (the checkpoint among them) in `out`; `extra` is
    /// more of the configuration.
    fn start_at(&self, url: &str, out: &Path, extra: &str) -> Running {
        let text = format!(
            r#"{{ endpoints: ["{url}"], trust: "votes", checkpoint: "checkpoint.json", state_file: "state.json",
                 output_file: "roots.txt", commitment: "confirmed", slot_timeout_ms: 3000,
                 reconnect: {{ initial_ms: 20, max_ms: 200 }}, {extra} }}"#
        );
        let config = Config::parse(&text, out).unwrap();
        let roots: Arc<Mutex<Vec<AcceptedRoot>>> = Arc::default();
        let seen = roots.clone();
        let relayer =
            Relayer::new(config).on_root(Arc::new(move |r: &AcceptedRoot| seen.lock().unwrap().push(r.clone())));
        let stats = relayer.stats();
        let (stop, rx) = tokio::sync::watch::channel(false);
        let handle = self.rt.spawn(relayer.run(rx));
        Running { stop, handle, stats, roots }
    }

    fn stop(&self, r: Running) {
        let _ = r.stop.send(true);
        self.rt.block_on(r.handle).unwrap().unwrap();
    }

    /// Waits until the relayer decided every slot up to `slot` (its state's `nextSlot` passed it).
    fn wait_decided(&self, slot: u64) -> Value {
        let t = Instant::now();
        loop {
            if let Ok(text) = std::fs::read_to_string(self.out.join("state.json"))
                && let Ok(v) = serde_json::from_str::<Value>(&text)
                && v["nextSlot"].as_u64().is_some_and(|n| n > slot)
            {
                return v;
            }
            assert!(t.elapsed() < WAIT, "slot {slot} not decided; output {:?}", output(&self.out).last());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The evidence an entry carries makes its bank hash and root, and `set` vouches for it.
fn check_entry(e: &AcceptedRoot, set: &EpochSet) {
    let j = e.to_json();
    assert_eq!(j["trust"], "votes");
    let ev = SlotEvidence::from_json_value(&j["evidence"]).unwrap();
    assert_eq!((ev.slot, ev.root, Some(ev.bank_hash())), (e.slot, e.root, e.bank_hash));
    let v = ev.vouch(set).unwrap();
    assert_eq!((j["stake"].as_u64(), j["totalStake"].as_u64()), (Some(v.stake as u64), Some(v.total_stake as u64)));
}

#[test]
fn accepts_only_more_than_two_thirds_and_resumes_after_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let vs = voters();
    let sets: BTreeMap<u64, EpochSet> =
        [(1, set(1, &vs, [100, 100, 50, 50])), (2, set(2, &vs, [100, 100, 100, 100]))].into();
    let chain = Chain { first: 30, last: 63, sets: sets.clone(), binds: next_set, who: all_but_slot_40 };
    let roots = write(&tmp.path().join("dir"), &chain, &vs);
    let run = Run::new(&tmp.path().join("dir"), &tmp.path().join("relay"), &sets[&1]);

    let first = run.start();
    run.wait_decided(50);
    let (first_stats, first_roots) = (first.stats.clone(), first.roots.clone());
    run.stop(first);
    // The state kept on stopping names the output's last root as the last accepted.
    let state: Value = serde_json::from_str(&std::fs::read_to_string(run.out.join("state.json")).unwrap()).unwrap();
    let before = output(&run.out);
    assert_eq!(before.last().map(|l| l.0), state["accepted"]["slot"].as_u64());
    assert!(before.iter().all(|(s, _)| *s < state["nextSlot"].as_u64().unwrap()));

    let second = run.start();
    run.wait_decided(63);
    let want: Vec<(u64, [u8; 32])> = (32..=63).filter(|&s| s != 40).map(|s| (s, roots[&s])).collect();
    assert_eq!(output(&run.out), want, "every slot with more than 2/3 once, in order; slot 40 never");
    assert!(second.stats.given_up.load(Ordering::Relaxed) + first_stats.given_up.load(Ordering::Relaxed) >= 1);
    assert_eq!(second.stats.frozen.load(Ordering::Relaxed), 0);
    let entries = second.roots.lock().unwrap().clone();
    assert!(!entries.is_empty());
    for e in entries.iter().chain(first_roots.lock().unwrap().iter()) {
        check_entry(e, &sets[&1]);
        assert_ne!(e.slot, 40);
        // The checkpoint's epoch has no transition to show: the verifier holds its set.
        assert_eq!(e.to_json()["transition"], Value::Null);
    }
    run.stop(second);
}

/// Banks of slots up to 40 bind one set of epoch 2, later ones another.
fn two_next_sets(slot: u64, sets: &BTreeMap<u64, EpochSet>) -> [u8; 32] {
    if slot <= 40 { sets[&2].hash() } else { sets[&20].hash() }
}

#[test]
fn misbehaviour_freezes_the_relayer_and_survives_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let vs = voters();
    let mut other = set(2, &vs, [1, 1, 1, 1]);
    other = EpochSet::new(2, 5, other.members()).unwrap();
    let sets: BTreeMap<u64, EpochSet> =
        [(1, set(1, &vs, [100, 100, 50, 50])), (2, set(2, &vs, [100, 100, 100, 100])), (20, other)].into();
    let chain = Chain { first: 31, last: 50, sets: sets.clone(), binds: two_next_sets, who: everyone };
    let roots = write(&tmp.path().join("dir"), &chain, &vs);
    let run = Run::new(&tmp.path().join("dir"), &tmp.path().join("relay"), &sets[&1]);

    let r = run.start();
    let t = Instant::now();
    while r.stats.frozen.load(Ordering::Relaxed) == 0 {
        assert!(t.elapsed() < WAIT, "never froze; output {:?}", output(&run.out).last());
        std::thread::sleep(Duration::from_millis(20));
    }
    let want: Vec<(u64, [u8; 32])> = (32..=40).map(|s| (s, roots[&s])).collect();
    assert_eq!(output(&run.out), want);
    let file = run.out.join("state.json.misbehaviour.json");
    let m = Misbehaviour::from_json_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(verify_misbehaviour(&m, Some(&sets[&1].hash())), Ok(MisbehaviourKind::ConflictingNextSets));
    assert_eq!((m.first.slot, m.second.slot), (40, 41));
    run.stop(r);
    let state: Value = serde_json::from_str(&std::fs::read_to_string(run.out.join("state.json")).unwrap()).unwrap();
    assert!(state["client"]["frozen"].is_object());

    // A restart stays frozen: it says so at once and accepts nothing.
    let r = run.start();
    let t = Instant::now();
    while r.stats.frozen.load(Ordering::Relaxed) == 0 {
        assert!(t.elapsed() < WAIT, "the restarted relayer does not say it is frozen");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(r.stats.accepted.load(Ordering::Relaxed), 0);
    run.stop(r);
    assert_eq!(output(&run.out), want);
}

/// The sets of epochs 1 to 5; stakes move each epoch.
fn changing_sets(vs: &[Voter]) -> BTreeMap<u64, EpochSet> {
    [
        (1, set(1, vs, [100, 100, 50, 50])),
        (2, set(2, vs, [10, 100, 100, 100])),
        (3, set(3, vs, [100, 100, 100, 5])),
        (4, set(4, vs, [50, 50, 100, 100])),
        (5, set(5, vs, [1, 2, 3, 4])),
    ]
    .into()
}

#[test]
fn follows_the_set_across_epochs_with_each_transition_beside_the_first_root() {
    let tmp = tempfile::tempdir().unwrap();
    let vs = voters();
    let sets = changing_sets(&vs);
    let last = 4 * EPOCH + 10;
    let chain = Chain { first: 31, last, sets: sets.clone(), binds: next_set, who: everyone };
    let roots = write(&tmp.path().join("dir"), &chain, &vs);
    let run = Run::new(&tmp.path().join("dir"), &tmp.path().join("relay"), &sets[&1]);
    let r = run.start();
    run.wait_decided(last);
    let want: Vec<(u64, [u8; 32])> = (32..=last).map(|s| (s, roots[&s])).collect();
    assert_eq!(output(&run.out), want);
    assert_eq!(r.stats.epoch.load(Ordering::Relaxed), 4);
    assert_eq!(r.stats.epochs_followed.load(Ordering::Relaxed), 3);
    let entries = r.roots.lock().unwrap().clone();
    for e in &entries {
        let epoch = e.slot / EPOCH;
        check_entry(e, &sets[&epoch]);
        let j = e.to_json();
        if epoch > 1 && e.slot == epoch * EPOCH {
            let t = Transition::from_json_value(&j["transition"]).unwrap();
            assert_eq!(t.set, sets[&epoch]);
            t.evidence.vouch(&sets[&(epoch - 1)]).unwrap();
        } else {
            assert_eq!(j["transition"], Value::Null, "slot {}", e.slot);
        }
    }
    run.stop(r);
}

/// How the proxy forges the transition to one epoch: as `scripts/lib/forge_proxy.py` does.
#[derive(Clone, Copy, Debug)]
enum Forge {
    /// A member's stake (and the total) changed: the set is not the one the slot binds.
    WrongSet,
    /// Changed, and the evidence's `nextSetHash` made the changed set's: the bank hash the votes
    /// are for is no longer the evidence's.
    Rebound,
    /// The evidence's `nextSetHash` zeroed.
    SetNotBound,
    /// The evidence of the transition after it: a slot of the wrong epoch.
    SlotNotInEpoch,
}

/// A proxy on loopback in front of Hyades, as a lying server would be: WebSocket upgrades (the
/// root feed) pass through byte for byte; JSON-RPC over HTTP is forwarded, and the answer to
/// `getEpochTransition [epoch]` forged as `forge` says.
struct Proxy {
    addr: SocketAddr,
    forge: Arc<Mutex<Option<(Forge, u64)>>>,
    /// Transitions forged so far.
    forged: Arc<AtomicU64>,
}

type Forging = (Arc<Mutex<Option<(Forge, u64)>>>, Arc<AtomicU64>);

impl Proxy {
    async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let forging: Forging = (Arc::default(), Arc::default());
        let (forge, forged) = forging.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                tokio::spawn(proxy_connection(tcp, upstream, forging.clone()));
            }
        });
        Proxy { addr, forge, forged }
    }

    fn url(&self) -> String {
        format!("ws://{}/ws", self.addr)
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

async fn proxy_connection(mut tcp: TcpStream, upstream: SocketAddr, forging: Forging) {
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    let end = loop {
        match tcp.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => data.extend_from_slice(&buf[..n]),
        }
        if let Some(i) = find(&data, b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&data[..end]).to_ascii_lowercase();
    if head.starts_with("get ") {
        let mut up = TcpStream::connect(upstream).await.unwrap();
        up.write_all(&data).await.unwrap();
        let _ = tokio::io::copy_bidirectional(&mut tcp, &mut up).await;
        return;
    }
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map(|v| v.trim().parse().unwrap())
        .expect("a request with a length");
    while data.len() < end + len {
        match tcp.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => data.extend_from_slice(&buf[..n]),
        }
    }
    let body = data[end..end + len].to_vec();
    let url = format!("http://{upstream}/");
    let answer = tokio::task::spawn_blocking(move || forward(&url, &body, &forging)).await.unwrap();
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        answer.len()
    );
    let _ = tcp.write_all(head.as_bytes()).await;
    let _ = tcp.write_all(answer.as_bytes()).await;
    let _ = tcp.shutdown().await;
}

fn post(url: &str, body: &[u8]) -> Value {
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut resp = agent.post(url).header("content-type", "application/json").send(body).unwrap();
    serde_json::from_str(&resp.body_mut().read_to_string().unwrap()).unwrap()
}

/// Hyades' answer to `body`, forged when it is the transition to the epoch forged.
fn forward(url: &str, body: &[u8], (forge, forged): &Forging) -> String {
    let mut out = post(url, body);
    let req: Value = serde_json::from_slice(body).unwrap();
    let how = *forge.lock().unwrap();
    if let Some((how, epoch)) = how
        && req["method"] == "getEpochTransition"
        && req["params"] == json!([epoch])
        && out["result"].is_object()
    {
        let t = &mut out["result"]["value"];
        match how {
            Forge::WrongSet | Forge::Rebound => {
                let stake = t["set"]["validators"][0]["stake"].as_u64().unwrap();
                t["set"]["validators"][0]["stake"] = json!(stake + 1);
                let total = t["set"]["totalStake"].as_u64().unwrap();
                t["set"]["totalStake"] = json!(total + 1);
                if matches!(how, Forge::Rebound) {
                    let set = Transition::from_json_value(t).unwrap().set;
                    t["evidence"]["nextSetHash"] = json!(hash_to_base58(&set.hash()));
                }
            }
            Forge::SetNotBound => t["evidence"]["nextSetHash"] = json!(hash_to_base58(&[0; 32])),
            Forge::SlotNotInEpoch => {
                let ask = json!({"jsonrpc": "2.0", "id": 1, "method": "getEpochTransition", "params": [epoch + 1]});
                t["evidence"] = post(url, ask.to_string().as_bytes())["result"]["value"]["evidence"].take();
            }
        }
        forged.fetch_add(1, Ordering::Relaxed);
    }
    out.to_string()
}

fn write_checkpoint(out: &Path, set: &EpochSet, time: i64, trusting_period: u64) {
    std::fs::create_dir_all(out).unwrap();
    let checkpoint = Checkpoint { schedule: schedule(), set: set.clone(), time, trusting_period };
    std::fs::write(out.join("checkpoint.json"), checkpoint.to_json_value().to_string()).unwrap();
}

#[test]
fn refuses_forged_transitions_by_name_and_accepts_nothing_of_their_epoch() {
    let tmp = tempfile::tempdir().unwrap();
    let vs = voters();
    let sets = changing_sets(&vs);
    let last = 4 * EPOCH + 10;
    let chain = Chain { first: 31, last, sets: sets.clone(), binds: next_set, who: everyone };
    let roots = write(&tmp.path().join("dir"), &chain, &vs);
    let run = Run::new(&tmp.path().join("dir"), &tmp.path().join("relay"), &sets[&1]);
    let proxy = run.rt.block_on(Proxy::start(run.server.addr));
    // Epoch 2's transition passes through honestly; epoch 3's is forged.
    let want: Vec<(u64, [u8; 32])> = (32..3 * EPOCH).map(|s| (s, roots[&s])).collect();
    for (how, why) in [
        (Forge::WrongSet, "wrong_set"),
        (Forge::Rebound, "insufficient_stake"),
        (Forge::SetNotBound, "set_not_bound"),
        (Forge::SlotNotInEpoch, "slot_not_in_epoch"),
    ] {
        *proxy.forge.lock().unwrap() = Some((how, 3));
        let out = tmp.path().join(format!("relay-{why}"));
        write_checkpoint(&out, &sets[&1], now() - 100, 1_000_000);
        let forged_before = proxy.forged.load(Ordering::Relaxed);
        let r = run.start_at(&proxy.url(), &out, "");
        // Refused, asked again a second later, and refused again.
        let t = Instant::now();
        while r.stats.transitions_refused().get(why).copied().unwrap_or(0) < 2 {
            assert!(t.elapsed() < WAIT, "{how:?}: not refused twice as {why}: {:?}", r.stats.transitions_refused());
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(proxy.forged.load(Ordering::Relaxed) >= forged_before + 2);
        assert_eq!(r.stats.transitions_refused().into_keys().collect::<Vec<_>>(), [why], "{how:?}");
        let metrics = aldb_relayer::metrics::render(&r.stats, &[proxy.url()]);
        assert!(metrics.contains(&format!("aldb_relayer_transitions_refused_total{{reason=\"{why}\"}} ")), "{how:?}");
        assert!(metrics.contains("aldb_relayer_frozen 0\n"));
        assert_eq!(r.stats.epoch.load(Ordering::Relaxed), 2, "{how:?}");
        let roots_seen = r.roots.lock().unwrap().iter().map(|e| (e.slot, e.root)).collect::<Vec<_>>();
        run.stop(r);
        // Every root of epochs 1 and 2, each verified (the slot waits at epoch 3's first), none of
        // epoch 3; no misbehaviour: a forgery is not a conflict the set signed.
        assert_eq!(output(&out), want, "{how:?}");
        assert_eq!(roots_seen, want, "{how:?}");
        let state: Value = serde_json::from_str(&std::fs::read_to_string(out.join("state.json")).unwrap()).unwrap();
        assert_eq!(state["nextSlot"], 3 * EPOCH, "{how:?}");
        assert_eq!(state["client"]["held"][1]["set"]["epoch"], 2, "{how:?}");
        assert!(state["client"]["frozen"].is_null(), "{how:?}");
        assert!(!out.join("state.json.misbehaviour.json").exists(), "{how:?}");
    }
}

#[test]
fn a_lapsed_trusting_period_stops_the_relayer_at_a_transition() {
    let tmp = tempfile::tempdir().unwrap();
    let vs = voters();
    let sets = changing_sets(&vs);
    let chain = Chain { first: 31, last: 3 * EPOCH, sets: sets.clone(), binds: next_set, who: everyone };
    write(&tmp.path().join("dir"), &chain, &vs);
    let run = Run::new(&tmp.path().join("dir"), &tmp.path().join("relay"), &sets[&1]);
    // The first slot is epoch 2's: the set of epoch 1, past its period, would vouch for the
    // transition before any root.
    write_checkpoint(&run.out, &sets[&1], now() - 2000, 1000);
    let r = run.start_at(&run.server.url(), &run.out, "start_slot: 64");
    let ended = run
        .rt
        .block_on(async { tokio::time::timeout(WAIT, r.handle).await })
        .expect("the relayer stops on its own")
        .unwrap();
    match ended {
        Err(aldb_relayer::RelayError::Expired(m)) => assert!(m.contains("transition to epoch 2"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(r.stats.accepted.load(Ordering::Relaxed), 0);
    assert!(output(&run.out).is_empty());
}
