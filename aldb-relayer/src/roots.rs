//! Accepted roots in a form a bridge's submitter can follow without parsing logs: one JSON
//! object per accepted root ([`accepted_json`]), printed as JSON lines on stdout
//! (`--json-lines`) and served page by page at `GET /roots?from=S&limit=N` (`roots_addr`).
//!
//! The HTTP view holds the newest [`RETAIN`] accepted roots in memory. On start it is filled
//! from the output file's last lines, which carry only a slot and a root: entries accepted by an
//! earlier run show `null` for the record hash, commitment, signers and bank hash until the chain
//! accepts that slot again.
//!
//! With `trust: "votes"` an entry also carries what a destination chain's verifier needs to check
//! the root again ([`VotesProof`]): the slot evidence and, on the first root of each epoch, the
//! transition that proved the epoch's set. Evidence is large (some 800 KB at mainnet's 1,300
//! voters), so only the newest [`EVIDENCE_BUDGET`] bytes of it are held; older entries show
//! `"evidence": null` and `"transition": null`, and a page stops before [`PAGE_EVIDENCE_BYTES`].

use std::collections::VecDeque;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Mutex;

use aldb_verify::{Commitment, Hash, hash_to_base58};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::chain::Accepted;
use crate::http::Response;

/// Accepted roots held for `GET /roots`: about 7 hours of 400 ms slots, about 10 MB with three
/// signers each.
pub const RETAIN: usize = 65_536;

/// The most roots one `GET /roots` answers with, and the default `limit`.
pub const MAX_PAGE: usize = 1000;

/// Evidence bytes (JSON, approximately) held for `GET /roots` in votes mode.
pub const EVIDENCE_BUDGET: usize = 256 << 20;

/// Evidence bytes one page carries at most (a page holds at least one root).
pub const PAGE_EVIDENCE_BYTES: usize = 16 << 20;

/// The longest output line: a 20-digit slot, a space, 44 base58 characters and a newline.
const MAX_LINE: u64 = 20 + 1 + 44 + 1;

/// One accepted root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcceptedRoot {
    /// The slot.
    pub slot: u64,
    /// Its state root.
    pub root: Hash,
    /// The accepted record's hash; `None` for a root read back from the output file.
    pub record_hash: Option<Hash>,
    /// The record's commitment level; `None` likewise.
    pub commitment: Option<Commitment>,
    /// The identities whose attestations counted, sorted; `None` likewise.
    pub signers: Option<Vec<[u8; 32]>>,
    /// The slot's own bank hash, when the accepted record carries it (`SLOT_BANK_HASH`); `None`
    /// otherwise and for a root read back from the output file. In votes mode, the bank hash the
    /// votes are for.
    pub bank_hash: Option<Hash>,
    /// Votes mode: how the root was accepted, and the evidence to check it again.
    pub votes: Option<VotesProof>,
}

/// How a root was accepted on votes (`docs/SPEC.md` §11.5), and the evidence to check it again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VotesProof {
    /// The slot's epoch, whose set vouched.
    pub epoch: u64,
    /// The next epoch's set hash the bank hash binds (zero when it binds none).
    pub next_set_hash: Hash,
    /// The stake of the counted vote accounts.
    pub stake: u128,
    /// The epoch set's total stake.
    pub total_stake: u128,
    /// How many vote accounts counted.
    pub voters: usize,
    /// The vouched time (§11.4), when the votes carry one.
    pub time: Option<i64>,
    /// The slot evidence (§11.4 JSON); `None` once no longer held.
    pub evidence: Option<std::sync::Arc<Value>>,
    /// On the first root of an epoch past the checkpoint's: the transition (§11.4 JSON) that
    /// proved its set; `None` otherwise, and once no longer held.
    pub transition: Option<std::sync::Arc<Value>>,
}

impl VotesProof {
    /// Bytes its evidence and transition take in JSON, approximately.
    fn held_bytes(&self) -> usize {
        let len = |v: &Option<std::sync::Arc<Value>>| v.as_ref().map_or(0, |v| approx_len(v));
        len(&self.evidence) + len(&self.transition)
    }
}

/// A JSON value's encoded length, near enough for a budget (strings dominate evidence).
fn approx_len(v: &Value) -> usize {
    match v {
        Value::String(s) => s.len() + 2,
        Value::Array(a) => a.iter().map(|x| approx_len(x) + 1).sum::<usize>() + 2,
        Value::Object(o) => o.iter().map(|(k, x)| k.len() + 4 + approx_len(x)).sum::<usize>() + 2,
        _ => 20,
    }
}

impl AcceptedRoot {
    /// The entry of a root the chain accepted.
    pub fn from_accepted(a: &Accepted) -> Self {
        Self {
            slot: a.record.slot,
            root: a.record.state_root,
            record_hash: Some(a.record_hash),
            commitment: Some(a.record.commitment),
            signers: Some(a.signers.clone()),
            bank_hash: a.record.bank_hash,
            votes: None,
        }
    }

    /// `{"slot", "root", "recordHash", "commitment", "signers", "bankHash"}`, hashes and
    /// identities in base58; in votes mode followed by `"trust": "votes"`, `"epoch"`,
    /// `"nextSetHash"`, `"stake"`, `"totalStake"`, `"voters"`, `"votedAt"` (the vouched time or
    /// `null`), `"evidence"` (§11.4 slot evidence or `null`) and `"transition"` (§11.4 or `null`).
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "slot": self.slot,
            "root": hash_to_base58(&self.root),
            "recordHash": self.record_hash.map(|h| hash_to_base58(&h)),
            "commitment": self.commitment.map(|c| c.name()),
            "signers": self.signers.as_ref().map(|s| s.iter().map(hash_to_base58).collect::<Vec<_>>()),
            "bankHash": self.bank_hash.map(|h| hash_to_base58(&h)),
        });
        if let (Some(p), Value::Object(o)) = (&self.votes, &mut v) {
            let held = |x: &Option<std::sync::Arc<Value>>| x.as_ref().map_or(Value::Null, |x| (**x).clone());
            o.insert("trust".into(), "votes".into());
            o.insert("epoch".into(), p.epoch.into());
            o.insert("nextSetHash".into(), hash_to_base58(&p.next_set_hash).into());
            // Stakes are u64 sums below the set's total, itself a u64.
            o.insert("stake".into(), u64::try_from(p.stake).unwrap_or(u64::MAX).into());
            o.insert("totalStake".into(), u64::try_from(p.total_stake).unwrap_or(u64::MAX).into());
            o.insert("voters".into(), p.voters.into());
            o.insert("votedAt".into(), p.time.map_or(Value::Null, Value::from));
            o.insert("evidence".into(), held(&p.evidence));
            o.insert("transition".into(), held(&p.transition));
        }
        v
    }
}

/// The JSON object of a root the chain accepted, as one line of `--json-lines`.
pub fn accepted_json(a: &Accepted) -> Value {
    AcceptedRoot::from_accepted(a).to_json()
}

/// Why a page cannot be served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PageError {
    /// `from` is below the oldest root held, and roots below it are no longer held.
    Gone {
        /// The oldest slot held.
        oldest: u64,
    },
}

#[derive(Debug, Default)]
struct Inner {
    entries: VecDeque<AcceptedRoot>,
    /// Whether accepted roots older than the first entry exist that are not held.
    truncated: bool,
    /// Evidence bytes held ([`VotesProof::held_bytes`] summed).
    evidence_bytes: usize,
    /// Entries below this slot hold no evidence any more.
    evidence_from: u64,
}

impl Inner {
    /// Drops the oldest entries' evidence until the rest fits [`EVIDENCE_BUDGET`].
    fn trim_evidence(&mut self) {
        let start = self.entries.partition_point(|e| e.slot < self.evidence_from);
        for i in start..self.entries.len() {
            if self.evidence_bytes <= EVIDENCE_BUDGET {
                break;
            }
            let e = &mut self.entries[i];
            if let Some(p) = &mut e.votes {
                self.evidence_bytes = self.evidence_bytes.saturating_sub(p.held_bytes());
                p.evidence = None;
                p.transition = None;
            }
            self.evidence_from = e.slot.saturating_add(1);
        }
    }
}

/// The newest accepted roots, in slot order.
#[derive(Debug, Default)]
pub struct RootLog {
    inner: Mutex<Inner>,
}

impl RootLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// A log holding the last [`RETAIN`] complete lines of the output file at `path` (none if it
    /// does not exist yet). Only the file's tail is read; a torn last line is left out.
    pub fn from_output(path: &Path) -> std::io::Result<Self> {
        let mut file = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::new()),
            Err(e) => return Err(e),
        };
        let len = file.metadata()?.len();
        let start = len.saturating_sub(RETAIN as u64 * MAX_LINE);
        file.seek(SeekFrom::Start(start))?;
        let mut text = String::new();
        file.take(len - start).read_to_string(&mut text)?;
        let mut lines: Vec<&str> = text.split_inclusive('\n').filter(|l| l.ends_with('\n')).collect();
        if start > 0 && !lines.is_empty() {
            // Reading began mid-file: the first line may be a fragment.
            lines.remove(0);
        }
        let log = Self::new();
        let mut skipped = start > 0;
        for line in lines {
            match parse_line(line.trim_end()) {
                Some((slot, root)) => log.push(AcceptedRoot {
                    slot,
                    root,
                    record_hash: None,
                    commitment: None,
                    signers: None,
                    bank_hash: None,
                    votes: None,
                }),
                None => skipped = true,
            }
        }
        if let Ok(mut g) = log.inner.lock() {
            let excess = g.entries.len().saturating_sub(RETAIN);
            g.entries.drain(..excess);
            g.truncated |= skipped || excess > 0;
        }
        Ok(log)
    }

    /// Adds an accepted root. A slot the log already holds (accepted again after a restart)
    /// only fills in what the output file could not say, if the root agrees.
    pub fn push(&self, entry: AcceptedRoot) {
        let Ok(mut g) = self.inner.lock() else { return };
        let bytes = entry.votes.as_ref().map_or(0, VotesProof::held_bytes);
        match g.entries.back() {
            Some(last) if entry.slot <= last.slot => {
                if let Ok(i) = g.entries.binary_search_by_key(&entry.slot, |e| e.slot)
                    && g.entries[i].root == entry.root
                {
                    let old = g.entries[i].votes.as_ref().map_or(0, VotesProof::held_bytes);
                    g.evidence_bytes = g.evidence_bytes.saturating_sub(old).saturating_add(bytes);
                    g.entries[i] = entry;
                }
            }
            _ => {
                g.entries.push_back(entry);
                g.evidence_bytes = g.evidence_bytes.saturating_add(bytes);
                if g.entries.len() > RETAIN
                    && let Some(gone) = g.entries.pop_front()
                {
                    let freed = gone.votes.as_ref().map_or(0, VotesProof::held_bytes);
                    g.evidence_bytes = g.evidence_bytes.saturating_sub(freed);
                    g.truncated = true;
                }
            }
        }
        g.trim_evidence();
    }

    /// Up to `limit` roots (at most [`MAX_PAGE`]) from slot `from` up, oldest first.
    pub fn page(&self, from: u64, limit: usize) -> Result<Vec<AcceptedRoot>, PageError> {
        let Ok(g) = self.inner.lock() else { return Ok(Vec::new()) };
        if g.truncated
            && let Some(first) = g.entries.front()
            && from < first.slot
        {
            return Err(PageError::Gone { oldest: first.slot });
        }
        let start = g.entries.partition_point(|e| e.slot < from);
        let mut bytes = 0usize;
        let mut page = Vec::new();
        for e in g.entries.range(start..).take(limit.min(MAX_PAGE)) {
            bytes = bytes.saturating_add(e.votes.as_ref().map_or(0, VotesProof::held_bytes));
            if !page.is_empty() && bytes > PAGE_EVIDENCE_BYTES {
                break;
            }
            page.push(e.clone());
        }
        Ok(page)
    }

    /// The answer to one request target.
    pub fn answer(&self, target: &str) -> (u16, Value) {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        if path != "/roots" {
            return (404, json!({"error": "not found; the relayer serves GET /roots?from=SLOT&limit=N"}));
        }
        let (mut from, mut limit) = (0u64, MAX_PAGE);
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let bad = |what: &str| (400, json!({"error": format!("{what} must be an unsigned integer")}));
            match name {
                "from" => match value.parse() {
                    Ok(v) => from = v,
                    Err(_) => return bad("from"),
                },
                "limit" => match value.parse::<usize>() {
                    Ok(v) if v > 0 => limit = v,
                    _ => return bad("limit (at least 1)"),
                },
                _ => {
                    let name: String = name.chars().take(32).collect();
                    return (400, json!({"error": format!("unknown parameter {name:?}; use from and limit")}));
                }
            }
        }
        match self.page(from, limit) {
            Ok(roots) => (200, Value::Array(roots.iter().map(AcceptedRoot::to_json).collect())),
            Err(PageError::Gone { oldest }) => (
                410,
                json!({
                    "error": format!("roots below slot {oldest} are no longer held here; read them from the output file"),
                    "oldestSlot": oldest,
                }),
            ),
        }
    }
}

/// Parses an output line, `<slot> <base58 root>`.
fn parse_line(line: &str) -> Option<(u64, Hash)> {
    let (slot, root) = line.split_once(' ')?;
    if slot.is_empty() || !slot.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((slot.parse().ok()?, aldb_verify::hash_from_base58(root).ok()?))
}

/// Serves `GET /roots` from `log` on `listener` until `shutdown`.
pub async fn serve(listener: TcpListener, log: std::sync::Arc<RootLog>, shutdown: watch::Receiver<bool>) {
    let handle = move |target: &str| {
        let (status, body) = log.answer(target);
        let status = match status {
            200 => "200 OK",
            400 => "400 Bad Request",
            410 => "410 Gone",
            _ => "404 Not Found",
        };
        Response::new(status, "application/json", format!("{body}\n"))
    };
    crate::http::serve(listener, handle, shutdown).await;
}

/// Binds the roots listener.
pub async fn bind(addr: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    crate::http::bind(addr).await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn entry(slot: u64) -> AcceptedRoot {
        AcceptedRoot {
            slot,
            root: [slot as u8; 32],
            record_hash: Some([1; 32]),
            commitment: Some(Commitment::Finalized),
            signers: Some(vec![[2; 32]]),
            bank_hash: None,
            votes: None,
        }
    }

    #[test]
    fn pages_from_a_slot_with_a_bounded_limit() {
        let log = RootLog::new();
        for s in [3, 4, 6, 9] {
            log.push(entry(s));
        }
        let slots = |from, limit| log.page(from, limit).unwrap().iter().map(|e| e.slot).collect::<Vec<_>>();
        assert_eq!(slots(0, 10), [3, 4, 6, 9]);
        assert_eq!(slots(5, 10), [6, 9]);
        assert_eq!(slots(5, 1), [6]);
        assert_eq!(slots(10, 10), Vec::<u64>::new());
        assert_eq!(log.answer("/roots?from=6&limit=1").1, json!([entry(6).to_json()]));
        assert_eq!(log.answer("/roots?from=x").0, 400);
        assert_eq!(log.answer("/roots?limit=0").0, 400);
        assert_eq!(log.answer("/roots?colour=1").0, 400);
        assert_eq!(log.answer("/other").0, 404);
        let e = entry(6).to_json();
        assert_eq!(e["root"], hash_to_base58(&[6; 32]));
        assert_eq!(e["commitment"], "finalized");
        assert_eq!(e["signers"], json!([hash_to_base58(&[2; 32])]));
        assert_eq!(e["bankHash"], Value::Null);
    }

    #[test]
    fn shows_the_slot_bank_hash_of_an_accepted_record() {
        use aldb_verify::record::RootRecord;
        let record = RootRecord {
            genesis_hash: [1; 32],
            slot: 7,
            parent: None,
            commitment: Commitment::Finalized,
            state_root: [2; 32],
            block: None,
            bank_hash: Some([3; 32]),
        };
        let a = Accepted { record, record_hash: record.hash(), signers: vec![[4; 32]], anchor: true };
        let e = accepted_json(&a);
        assert_eq!(e["bankHash"], hash_to_base58(&[3; 32]));
        assert_eq!(e["recordHash"], hash_to_base58(&record.hash()));
        let without = Accepted { record: RootRecord { bank_hash: None, ..record }, ..a };
        assert_eq!(accepted_json(&without)["bankHash"], Value::Null);
    }

    #[test]
    fn keeps_the_newest_and_says_when_older_ones_are_gone() {
        let log = RootLog::new();
        for s in 0..(RETAIN as u64 + 10) {
            log.push(entry(s));
        }
        assert_eq!(log.page(0, 5), Err(PageError::Gone { oldest: 10 }));
        assert_eq!(log.page(10, 1).unwrap()[0].slot, 10);
        assert_eq!(log.answer("/roots?from=3").0, 410);
        assert_eq!(log.page(0, usize::MAX).map(|p| p.len()), Err(PageError::Gone { oldest: 10 }));
        assert_eq!(log.page(10, usize::MAX).unwrap().len(), MAX_PAGE);
    }

    #[test]
    fn fills_from_the_output_file_and_completes_entries_accepted_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("roots.txt");
        let text: String = (1..=3u64).map(|s| format!("{s} {}\n", hash_to_base58(&[s as u8; 32]))).collect();
        std::fs::write(&path, format!("{text}4 3xT")).unwrap();
        let log = RootLog::from_output(&path).unwrap();
        let page = log.page(0, 10).unwrap();
        assert_eq!(page.iter().map(|e| e.slot).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(page[2].to_json()["recordHash"], Value::Null);
        log.push(entry(3));
        log.push(AcceptedRoot { root: [0xee; 32], ..entry(2) });
        let page = log.page(0, 10).unwrap();
        assert_eq!(page[2], entry(3));
        assert_eq!(page[1].root, [2; 32]);
        assert!(RootLog::from_output(&dir.path().join("absent")).unwrap().page(0, 1).unwrap().is_empty());
    }
}
