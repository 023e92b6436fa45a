//! The relayer on votes (`trust: "votes"`): a root is accepted only when more than 2/3 of the
//! stake of its epoch's validator set voted for the bank hash that commits to it, the set having
//! been followed from a checkpoint one epoch at a time (`docs/SPEC.md` §11), by
//! [`aldb_verify::epochs::LightClient`].
//!
//! - [`feed`] says which slots have roots (each endpoint's root feed, caught up with
//!   `getStateRoots`); nothing it says is trusted.
//! - The acceptor takes the undecided slots in order. For slot `S` of epoch `E` it first follows
//!   the set to `E` (`getEpochTransition [E']` for each epoch after the newest trusted, checked by
//!   `LightClient::advance`), then asks an endpoint for `getSlotVotes [S, {"voteAccounts": E's
//!   set}]` and hands the answer, §11.4's slot evidence, to `LightClient::accept_root`. Too few
//!   votes yet: asked again (the next endpoint each time) with backoff, since votes land in the 32
//!   slots after `S`. A slot is given up when the service says it never will have votes (no bank,
//!   no vote in the window, pruned, abandoned), when it still lacks 2/3 after roots past its
//!   vote window were announced and it was asked twice more, or after `slot_timeout_ms`.
//! - Each accepted root is appended to the output file (as in k-of-n), then the state file is
//!   replaced (the client and the cursor together, [`state`]), then handed to `/roots` and
//!   `--json-lines` with its evidence.
//! - A transition the client refuses (`wrong_set`, `set_not_bound`, ...) is logged with its name
//!   and the server that sent it, counted by name in [`Stats::transitions_refused`], and asked
//!   again a second later (of the next endpoint): the slot waits, nothing of its epoch is accepted.
//! - Misbehaviour (§11.6) freezes the client: the state keeps it, the misbehaviour file is written
//!   beside the state, an error is logged, `aldb_relayer_frozen` turns 1, and nothing more is
//!   accepted, now or after a restart, until an operator replaces the state file.
//! - A trusting period that lapses (the relayer was stopped longer than it, or the checkpoint is
//!   too old), for a root or a transition, stops the relayer with an error: nothing it could
//!   accept would be safe.

pub(crate) mod feed;
pub(crate) mod state;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use aldb_verify::epochs::{EpochError, EpochSet, LightClient, SlotEvidence, Transition};
use aldb_verify::votes::MAX_EVIDENCE_VOTES;
use aldb_verify::{Commitment, hash_to_base58};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use crate::chain::Tip;
use crate::config::{Config, VotesTrust};
use crate::error::RelayError;
use crate::ratelog::{LOG_INTERVAL, RateLog};
use crate::roots::{AcceptedRoot, VotesProof};
use crate::stats::{Stats, inc};
use crate::store::Store;
use feed::{Announced, FeedShared};

/// Called with every accepted root once its output line and state are durable.
pub type RootHook = Arc<dyn Fn(&AcceptedRoot) + Send + Sync>;

/// Slots after `S` whose blocks carry votes on `S` (Hyades serves votes from `S+1..=S+32`).
pub const VOTE_WINDOW: u64 = 32;
/// Answers still short of 2/3 after the vote window closed before a slot is given up: votes of
/// the window's last blocks may reach the server's log a poll after the root is announced.
const TRIES_AFTER_WINDOW: u32 = 2;
const RETRY_INITIAL: Duration = Duration::from_millis(50);
const RETRY_MAX: Duration = Duration::from_millis(1000);
/// The whole exchange of one call, body included.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest answer read: 4,096 votes of up to 1,232 bytes in base64, or a transition with a
/// set of 65,536 members.
const MAX_RESPONSE_BYTES: u64 = 32 << 20;
/// Announced slots queued from the feeds.
const QUEUE: usize = 4096;
/// Hyades' error codes that say a slot will never have vote evidence there: pruned (-32001), no
/// bank or no vote in the window (-32007), abandoned (-32013).
const NEVER: [i64; 3] = [-32001, -32007, -32013];

/// At most 200 characters of what a server said.
pub(crate) fn quote(s: &str) -> &str {
    match s.char_indices().nth(200) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// The HTTP URL of a configured WebSocket endpoint (Hyades answers JSON-RPC on `POST /`).
fn http_url(ws: &str) -> String {
    let rest = ws.strip_prefix("ws://").unwrap_or(ws);
    let host = rest.split('/').next().unwrap_or(rest);
    format!("http://{host}/")
}

/// `voteAccounts` for a set: every member, or the 4,096 largest stakes of a larger set.
fn vote_accounts(set: &EpochSet) -> Value {
    let mut members: Vec<_> = set.members().iter().collect();
    if members.len() > MAX_EVIDENCE_VOTES {
        members.sort_by(|a, b| b.stake.cmp(&a.stake).then(a.vote_account.cmp(&b.vote_account)));
        members.truncate(MAX_EVIDENCE_VOTES);
    }
    Value::Array(
        members.iter().map(|m| json!([hash_to_base58(&m.vote_account), hash_to_base58(&m.authorized_voter)])).collect(),
    )
}

/// A JSON-RPC call that failed: the server's error code when it answered one.
struct CallError {
    code: Option<i64>,
    message: String,
}

/// What became of one attempt at a slot.
enum Outcome {
    Accepted,
    /// Decided without a root; the reason is logged.
    GiveUp(String),
    /// Not yet: try again after this long.
    Retry(Duration),
    /// Misbehaviour froze the client.
    Frozen,
    /// The state or output cannot be written: the relayer stops.
    Fatal(RelayError),
}

/// The work on the slot at the head of the queue.
struct Attempt {
    slot: u64,
    started: Instant,
    delay: Duration,
    tries_after_window: u32,
    last_refusal: Option<String>,
}

struct Acceptor {
    client: LightClient,
    state_path: PathBuf,
    store: Store,
    accepted: Option<Tip>,
    next_slot: u64,
    agent: ureq::Agent,
    urls: Vec<String>,
    /// The endpoint asked next.
    turn: usize,
    commitment: Commitment,
    slot_timeout: Duration,
    stats: Arc<Stats>,
    on_root: Option<RootHook>,
    shared: Arc<FeedShared>,
    pending: BTreeSet<u64>,
    newest_announced: u64,
    log: RateLog,
}

/// Runs the relayer on votes until `shutdown`.
pub(crate) async fn run(
    config: Config,
    votes: VotesTrust,
    stats: Arc<Stats>,
    mut on_root: Option<RootHook>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), RelayError> {
    let saved = state::load(&votes.state_file, &votes.checkpoint, config.start_slot)?;
    let (store, resume) = Store::open_with_cursor(&config.output_file, &votes.state_file, saved.accepted)?;
    if resume.truncated > 0 {
        log::warn!("{}: cut off a torn last line ({} bytes)", config.output_file.display(), resume.truncated);
    }
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = Vec::new();
    if let Some(addr) = config.roots_addr {
        let log = crate::roots::RootLog::from_output(&config.output_file)
            .map_err(|e| crate::error::StoreError::io("read", &config.output_file, e))?;
        let log = Arc::new(log);
        let listener = crate::roots::bind(addr).await.map_err(|source| RelayError::Roots { addr, source })?;
        if let Ok(a) = listener.local_addr() {
            log::info!("accepted roots on http://{a}/roots?from=SLOT");
        }
        tasks.push(tokio::spawn(crate::roots::serve(listener, log.clone(), stop_rx.clone())));
        let next = on_root.take();
        on_root = Some(Arc::new(move |r: &AcceptedRoot| {
            log.push(r.clone());
            if let Some(h) = &next {
                h(r);
            }
        }));
    }
    if let Some(addr) = config.metrics_addr {
        let listener = crate::metrics::bind(addr).await.map_err(|source| RelayError::Metrics { addr, source })?;
        if let Ok(a) = listener.local_addr() {
            log::info!("metrics on http://{a}/metrics");
        }
        let urls = Arc::new(config.endpoints.clone());
        tasks.push(tokio::spawn(crate::metrics::serve(listener, stats.clone(), urls, stop_rx.clone())));
    }
    if let Some(period) = config.quiet_warning {
        let urls = Arc::new(config.endpoints.clone());
        tasks.push(tokio::spawn(crate::quiet::watch(stats.clone(), urls, period, stop_rx.clone())));
    }
    let shared = Arc::new(FeedShared {
        next_needed: saved.next_slot.into(),
        commitment: config.commitment,
        stats: stats.clone(),
        backoff_initial: config.backoff_initial,
        backoff_max: config.backoff_max,
    });
    let (tx, rx) = mpsc::channel::<Announced>(QUEUE);
    for (i, url) in config.endpoints.iter().enumerate() {
        tasks.push(tokio::spawn(feed::follow(i, url.clone(), shared.clone(), tx.clone(), stop_rx.clone())));
    }
    drop(tx);
    let agent: ureq::Agent =
        ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(CALL_TIMEOUT)).build().into();
    let acceptor = Acceptor {
        client: saved.client,
        state_path: votes.state_file.clone(),
        store,
        accepted: saved.accepted,
        next_slot: saved.next_slot,
        agent,
        urls: config.endpoints.iter().map(|u| http_url(u)).collect(),
        turn: 0,
        commitment: config.commitment,
        slot_timeout: votes.slot_timeout,
        stats: stats.clone(),
        on_root,
        shared,
        pending: BTreeSet::new(),
        newest_announced: 0,
        log: RateLog::new(LOG_INTERVAL),
    };
    acceptor.announce_start();
    let rt = tokio::runtime::Handle::current();
    let worker_stop = stop_rx.clone();
    let mut worker = tokio::task::spawn_blocking(move || acceptor.run(rt, rx, worker_stop));
    let result = tokio::select! {
        r = &mut worker => r,
        _ = crate::follow::stopped(&mut shutdown) => {
            let _ = stop_tx.send(true);
            (&mut worker).await
        }
    };
    let _ = stop_tx.send(true);
    for t in tasks {
        let _ = t.await;
    }
    log::info!("relayer stopped; {}", stats.summary(&config.endpoints));
    match result {
        Ok(r) => r,
        Err(e) => Err(RelayError::Task(e.to_string())),
    }
}

impl Acceptor {
    fn announce_start(&self) {
        let c = &self.client;
        self.stats.epoch.store(c.epoch(), Ordering::Relaxed);
        match c.misbehaviour() {
            Some(m) => {
                self.stats.frozen.store(1, Ordering::Relaxed);
                let path = state::misbehaviour_path(&self.state_path);
                if !path.exists()
                    && let Err(e) = state::write_misbehaviour(&self.state_path, m)
                {
                    log::error!("{e}");
                }
                log::error!(
                    "FROZEN: the light client in {} found misbehaviour ({}) and accepts nothing; the evidence is in {}. \
                     Replace the state file (from a checkpoint you trust) to go on",
                    self.state_path.display(),
                    m.kind.name(),
                    path.display()
                );
            }
            None => log::info!(
                "on votes: trusting epoch {} (set {}), undecided from slot {}{}",
                c.epoch(),
                hash_to_base58(&c.newest().set.hash()),
                self.next_slot,
                self.accepted.map(|t| format!(", last accepted slot {}", t.slot)).unwrap_or_default()
            ),
        }
    }

    fn run(
        mut self,
        rt: tokio::runtime::Handle,
        mut rx: mpsc::Receiver<Announced>,
        mut stop: watch::Receiver<bool>,
    ) -> Result<(), RelayError> {
        let mut attempt: Option<Attempt> = None;
        let mut wait = Duration::ZERO;
        loop {
            // Wait for the retry delay, or for news from the feeds, whichever comes first.
            let got = rt.block_on(async {
                tokio::select! {
                    m = rx.recv() => Some(m),
                    _ = tokio::time::sleep(wait), if !wait.is_zero() => None,
                    _ = crate::follow::stopped(&mut stop) => Some(None),
                }
            });
            if *stop.borrow() {
                return Ok(());
            }
            match got {
                Some(Some(a)) => self.take(a),
                // Every feed is gone: shutting down.
                Some(None) => return Ok(()),
                None => {}
            }
            while let Ok(a) = rx.try_recv() {
                self.take(a);
            }
            wait = Duration::from_secs(3600);
            if self.client.misbehaviour().is_some() {
                self.pending.clear();
                continue;
            }
            let Some(&slot) = self.pending.first() else { continue };
            let a = match attempt.take() {
                Some(a) if a.slot == slot => a,
                _ => Attempt {
                    slot,
                    started: Instant::now(),
                    delay: RETRY_INITIAL,
                    tries_after_window: 0,
                    last_refusal: None,
                },
            };
            let mut a = a;
            match self.work(&mut a)? {
                Outcome::Accepted => {
                    self.decided(slot, true)?;
                    wait = Duration::ZERO;
                }
                Outcome::GiveUp(why) => {
                    inc(&self.stats.given_up, 1);
                    log::warn!("slot {slot}: given up: {why}");
                    self.decided(slot, false)?;
                    wait = Duration::ZERO;
                }
                Outcome::Retry(d) => {
                    wait = d;
                    attempt = Some(a);
                }
                Outcome::Frozen => {}
                Outcome::Fatal(e) => return Err(e),
            }
            if wait.is_zero() && !self.pending.is_empty() {
                // Go on at once with the next slot (the select above sees the zero wait as none,
                // so give it a moment that never blocks).
                wait = Duration::from_micros(1);
            }
        }
    }

    fn take(&mut self, a: Announced) {
        self.newest_announced = self.newest_announced.max(a.slot);
        if a.slot >= self.next_slot {
            self.pending.insert(a.slot);
        }
    }

    /// Moves the cursor past `slot`; the state was saved already when it was accepted.
    fn decided(&mut self, slot: u64, saved: bool) -> Result<(), RelayError> {
        self.pending.remove(&slot);
        self.next_slot = slot.saturating_add(1);
        self.pending = self.pending.split_off(&self.next_slot);
        self.shared.next_needed.store(self.next_slot, Ordering::SeqCst);
        if !saved {
            state::save(&self.state_path, &self.client, self.accepted.as_ref(), self.next_slot)?;
        }
        Ok(())
    }

    fn call(&mut self, method: &str, params: Value) -> Result<Value, CallError> {
        let url = self.urls[self.turn % self.urls.len()].clone();
        self.turn = self.turn.wrapping_add(1);
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let fail = |message: String| CallError { code: None, message: format!("{url}: {message}") };
        let mut resp = self
            .agent
            .post(&url)
            .header("content-type", "application/json")
            .send(body.to_string().as_bytes())
            .map_err(|e| fail(format!("cannot reach: {e}")))?;
        let text = resp
            .body_mut()
            .with_config()
            .limit(MAX_RESPONSE_BYTES)
            .lossy_utf8(true)
            .read_to_string()
            .map_err(|e| fail(format!("cannot read the answer: {e}")))?;
        let v: Value = serde_json::from_str(&text).map_err(|_| fail(format!("not JSON: {}", quote(&text))))?;
        if let Some(e) = v.get("error") {
            return Err(CallError {
                code: e.get("code").and_then(Value::as_i64),
                message: format!("{url}: {method}: {}", quote(&e.to_string())),
            });
        }
        v.get("result").cloned().ok_or_else(|| fail(format!("{method}: no result")))
    }

    /// Follows the set to `epoch`; `Err` with what to do when it cannot yet.
    fn follow_to(&mut self, epoch: u64) -> Result<(), Outcome> {
        while self.client.epoch() < epoch {
            let next = self.client.epoch().saturating_add(1);
            let retry = Outcome::Retry(RETRY_MAX);
            let endpoint = self.turn % self.urls.len();
            let value = match self.call("getEpochTransition", json!([next])) {
                Ok(v) => v,
                Err(e) => {
                    if let Some(n) = self.log.allow("transition", 0, &self.stats.log_suppressed) {
                        log::warn!("cannot follow the validator set to epoch {next} yet: {}{n}", e.message);
                    }
                    return Err(retry);
                }
            };
            let t = value.get("value").unwrap_or(&value);
            let t = match Transition::from_json_value(t) {
                Ok(t) if t.set.epoch() == next => t,
                Ok(t) => {
                    log::warn!("asked for the transition to epoch {next}, a server answered one to {}", t.set.epoch());
                    return Err(retry);
                }
                Err(e) => {
                    log::warn!("getEpochTransition {next}: not a transition (SPEC §11.4): {e}");
                    return Err(retry);
                }
            };
            match self.client.advance(&t, now_unix()) {
                Ok(aldb_verify::epochs::Advanced::Advanced { epoch, set_hash, vouched, .. }) => {
                    inc(&self.stats.epochs_followed, 1);
                    self.stats.epoch.store(epoch, Ordering::Relaxed);
                    log::info!(
                        "followed the validator set to epoch {epoch}: set {} ({} members), proven by slot {} with \
                         votes of stake {} of {}",
                        hash_to_base58(&set_hash),
                        t.set.members().len(),
                        t.evidence.slot,
                        vouched.stake,
                        vouched.total_stake
                    );
                    state::save(&self.state_path, &self.client, self.accepted.as_ref(), self.next_slot)
                        .map_err(Outcome::Fatal)?;
                }
                Ok(aldb_verify::epochs::Advanced::AlreadyVerified { .. }) => {}
                Err(EpochError::Misbehaviour(_)) => return Err(self.freeze(&format!("transition to epoch {next}"))),
                // As for a root (`work`): the set that would vouch is too old, so nothing the
                // relayer could accept would be safe, now or on a later try.
                Err(e @ EpochError::Expired { .. }) => {
                    return Err(Outcome::Fatal(RelayError::Expired(format!(
                        "transition to epoch {next}: {e}; the relayer stops (replace {} from a newer checkpoint)",
                        self.state_path.display()
                    ))));
                }
                Err(e) => {
                    // Named, with the server that sent it: a refused transition is a server
                    // lying (or a chain the patches do not match), which an operator must see.
                    inc(&self.stats.votes_refused, 1);
                    self.stats.transition_refused(e.name());
                    if let Some(n) = self.log.allow(e.name(), endpoint, &self.stats.log_suppressed) {
                        log::error!(
                            "transition to epoch {next} (slot {}) from {} refused ({}): {e}{n}",
                            t.evidence.slot,
                            self.urls[endpoint],
                            e.name()
                        );
                    }
                    return Err(retry);
                }
            }
        }
        Ok(())
    }

    fn freeze(&mut self, during: &str) -> Outcome {
        let saved = state::save(&self.state_path, &self.client, self.accepted.as_ref(), self.next_slot);
        let written = self.client.misbehaviour().map(|m| state::write_misbehaviour(&self.state_path, m));
        let kind = self.client.misbehaviour().map_or("?", |m| m.kind.name());
        let wrote = match (&saved, &written) {
            (Ok(()), Some(Ok(p))) => format!("the evidence is in {}", p.display()),
            (Err(e), _) | (_, Some(Err(e))) => format!("and saving it failed: {e}"),
            (Ok(()), None) => String::new(),
        };
        log::error!(
            "MISBEHAVIOUR ({kind}) at {during}: more than 1/3 of the stake signed two conflicting things; the relayer \
             is FROZEN and accepts nothing more; {wrote}; replace {} (from a checkpoint you trust) to go on",
            self.state_path.display()
        );
        // After the files: whoever sees the metric finds the evidence written.
        self.stats.frozen.store(1, Ordering::Relaxed);
        Outcome::Frozen
    }

    fn work(&mut self, a: &mut Attempt) -> Result<Outcome, RelayError> {
        let slot = a.slot;
        let schedule = self.client.state().schedule;
        let epoch = schedule.epoch(slot);
        let oldest = self.client.state().held.first().map_or(0, |h| h.set.epoch());
        if epoch < oldest {
            return Ok(Outcome::GiveUp(format!("epoch {epoch} is before the oldest held epoch {oldest}")));
        }
        if let Err(o) = self.follow_to(epoch) {
            return Ok(o);
        }
        let Some(set) = self.client.state().held.iter().find(|h| h.set.epoch() == epoch).map(|h| h.set.clone()) else {
            return Ok(Outcome::GiveUp(format!("the client holds no set of epoch {epoch}")));
        };
        let params = json!([slot, {"commitment": self.commitment.name(), "voteAccounts": vote_accounts(&set)}]);
        let window_closed = self.newest_announced > slot.saturating_add(VOTE_WINDOW);
        let refusal = match self.call("getSlotVotes", params) {
            Err(e) if e.code.is_some_and(|c| NEVER.contains(&c)) => return Ok(Outcome::GiveUp(e.message)),
            Err(e) => e.message,
            Ok(v) => {
                let value = v.get("value").unwrap_or(&v);
                match self.check(slot, value) {
                    Ok(ev) => match self.client.accept_root(&ev, now_unix()) {
                        Ok(root) => {
                            self.emit(&ev, &root)?;
                            return Ok(Outcome::Accepted);
                        }
                        Err(EpochError::Misbehaviour(_)) => return Ok(self.freeze(&format!("slot {slot}"))),
                        Err(e @ EpochError::Expired { .. }) => {
                            return Err(RelayError::Expired(format!(
                                "slot {slot}: {e}; the relayer stops (replace {} from a newer checkpoint)",
                                self.state_path.display()
                            )));
                        }
                        Err(e) => {
                            inc(&self.stats.votes_refused, 1);
                            format!("refused ({}): {e}", e.name())
                        }
                    },
                    Err(why) => why,
                }
            }
        };
        if window_closed {
            a.tries_after_window += 1;
        }
        if a.tries_after_window > TRIES_AFTER_WINDOW {
            return Ok(Outcome::GiveUp(format!(
                "{refusal} (roots past its {VOTE_WINDOW}-slot vote window were announced, and it was asked {} more times)",
                TRIES_AFTER_WINDOW
            )));
        }
        if a.started.elapsed() > self.slot_timeout {
            return Ok(Outcome::GiveUp(format!("{refusal} (still after slot_timeout_ms {:?})", self.slot_timeout)));
        }
        if a.last_refusal.as_deref() != Some(refusal.as_str()) {
            log::debug!("slot {slot}: not yet: {refusal}");
            a.last_refusal = Some(refusal);
        }
        let d = a.delay;
        a.delay = (a.delay * 2).min(RETRY_MAX);
        Ok(Outcome::Retry(d))
    }

    /// The answer as slot evidence of `slot`, or why not.
    fn check(&self, slot: u64, value: &Value) -> Result<SlotEvidence, String> {
        if value.get("slot").and_then(Value::as_u64) != Some(slot) {
            return Err(format!("asked for slot {slot}, a server answered for another"));
        }
        if value.get("nextSetHash").is_none() {
            return Err("getSlotVotes answered no nextSetHash: the chain does not bind epoch sets in its bank hashes \
                        (SPEC §11.1; votes mode needs the aldb epoch-set patches), or the server is older"
                .into());
        }
        SlotEvidence::from_json_value(value).map_err(|e| format!("not slot evidence (SPEC §11.4): {e}"))
    }

    fn emit(&mut self, ev: &SlotEvidence, root: &aldb_verify::epochs::EpochRoot) -> Result<(), RelayError> {
        let slot = ev.slot;
        let first_of_epoch = self.accepted.is_none_or(|t| self.client.state().schedule.epoch(t.slot) != root.epoch);
        let wrote = self.store.append(slot, &root.root)?;
        self.accepted = Some(Tip { slot, record_hash: root.bank_hash });
        self.next_slot = slot.saturating_add(1);
        state::save(&self.state_path, &self.client, self.accepted.as_ref(), self.next_slot)?;
        inc(&self.stats.accepted, 1);
        self.stats.last_slot.store(slot, Ordering::Relaxed);
        let transition = first_of_epoch
            .then(|| self.client.state().held.iter().find(|h| h.set.epoch() == root.epoch))
            .flatten()
            .and_then(|h| h.proof.as_ref().map(|p| Transition { set: h.set.clone(), evidence: p.clone() }))
            .map(|t| Arc::new(t.to_json_value()));
        let v = root.vouched;
        log::info!(
            "accepted slot {slot} root {} bank hash {} on votes of {} vote accounts, stake {} of {} of epoch {}'s set{}",
            hash_to_base58(&root.root),
            hash_to_base58(&root.bank_hash),
            v.voters,
            v.stake,
            v.total_stake,
            root.epoch,
            if wrote { "" } else { " (already in the output)" }
        );
        if let Some(h) = &self.on_root {
            let entry = AcceptedRoot {
                slot,
                root: root.root,
                record_hash: None,
                commitment: Some(self.commitment),
                signers: None,
                bank_hash: Some(root.bank_hash),
                votes: Some(VotesProof {
                    epoch: root.epoch,
                    next_set_hash: root.next_set_hash,
                    stake: v.stake,
                    total_stake: v.total_stake,
                    voters: v.voters,
                    time: v.time,
                    evidence: Some(Arc::new(ev.to_json_value())),
                    transition,
                }),
            };
            h(&entry);
        }
        Ok(())
    }
}
