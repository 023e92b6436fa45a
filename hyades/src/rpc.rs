//! JSON-RPC 2.0: request validation, batches, the response budget and the response forms. Each
//! method (its parameters, where it runs, its work and its answer) is in [`crate::methods`],
//! found by name in its table.
//!
//! Everything here is synchronous and transport-free: [`Rpc::handle`] turns one request body
//! (a single request or a batch) into a response body, so the HTTP handler, the WebSocket loop,
//! the tests and the benchmark all exercise the same code. Conventions follow Solana's RPC:
//! public keys and hashes are base58, account data is `["<base64>", "base64"]`, and slot-bound
//! answers are wrapped in `{"context": {"slot": S}, "value": ...}`.
//!
//! No input makes this code panic: every field is checked for its type and range and reported
//! as a JSON-RPC error naming the parameter.

use std::sync::Arc;
use std::time::Instant;

use aldb_format::{QueryError, SlotInfo};
use aldb_verify::Commitment;
use serde_json::{Value, json};

use crate::budget::{BUSY_MESSAGE, Busy, Reservation};
use crate::levels::{Level, Levels, Served};
use crate::methods::Call;
pub use crate::methods::Method;
use crate::methods::params::truncate;
use crate::metrics::Metrics;
pub use crate::protocol::{RpcError, codes};
use crate::records::RecordFeed;
use crate::source::Source;
use crate::votes::VoteFeed;

/// The most vote accounts one `getSlotVotes` may name: as many votes as evidence may hold
/// (`aldb_verify::votes::MAX_EVIDENCE_VOTES`), and some 400 KB of request, within the default
/// body bound.
pub const MAX_VOTE_ACCOUNTS: usize = aldb_verify::votes::MAX_EVIDENCE_VOTES;

/// Bounds on what one request may ask for, so no request can take unbounded memory or time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest request body (HTTP) or message (WebSocket) in bytes.
    pub max_body_bytes: usize,
    /// Most requests in one batch.
    pub max_batch: usize,
    /// Most keys in one `getMultipleAccountProofs`.
    pub max_keys: usize,
    /// Most slots `getStateRoots` may span (`end - start + 1`).
    pub max_slot_range: u64,
    /// Largest `endSlot - startSlot` of `getRootRecords`.
    pub max_record_range: u64,
    /// Largest answer in bytes (a whole batch counts as one answer). It is checked while the
    /// answer is built, so a refused answer never takes much more memory than this.
    pub max_response_bytes: usize,
}

/// The default [`Limits::max_response_bytes`]: 16 MiB, room for a proof of the largest Solana
/// account (10 MiB of data, 13.4 MiB in base64).
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 16 << 20;

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 512 * 1024,
            max_batch: 100,
            max_keys: 100,
            max_slot_range: 1000,
            max_record_range: 5000,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }
}

/// A WebSocket connection's subscriptions, as seen by the dispatcher.
pub trait Subscriptions {
    /// Starts a root subscription receiving every root as published and every change of its
    /// level; returns its id.
    fn subscribe(&mut self) -> Result<u64, RpcError>;
    /// Starts a root subscription; returns its id. With a `level`, it receives each root once,
    /// when the root reaches that level (and, having received it, the notice if it is
    /// abandoned); without, as [`Subscriptions::subscribe`].
    fn subscribe_at(&mut self, level: Option<Level>) -> Result<u64, RpcError> {
        match level {
            None => self.subscribe(),
            Some(_) => Err(RpcError::invalid_params("rootSubscribe takes no commitment here")),
        }
    }
    /// Ends a subscription; false if this connection holds no subscription with that id.
    fn unsubscribe(&mut self, id: u64) -> bool;
    /// Starts a record subscription from `from_slot` (only records logged from now on when
    /// `None`), of one commitment level or both (`None`); returns its id.
    fn record_subscribe(&mut self, from_slot: Option<u64>, commitment: Option<Commitment>) -> Result<u64, RpcError> {
        let _ = (from_slot, commitment);
        Err(RpcError::new(codes::METHOD_NOT_FOUND, "Method not found: recordSubscribe is not available here"))
    }
    /// Ends a record subscription; false if this connection holds none with that id.
    fn record_unsubscribe(&mut self, id: u64) -> bool {
        let _ = id;
        false
    }
}

/// The JSON-RPC front of a [`Hyades`] reader.
#[derive(Debug)]
pub struct Rpc {
    pub(crate) hyades: Source,
    pub(crate) records: Arc<RecordFeed>,
    pub(crate) levels: Arc<Levels>,
    pub(crate) votes: Arc<VoteFeed>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) limits: Limits,
}

impl Rpc {
    /// Serves `hyades` and no root records, counting into `metrics`.
    pub fn new(hyades: impl Into<Source>, metrics: Arc<Metrics>, limits: Limits) -> Self {
        Self::with_records(hyades, Arc::new(RecordFeed::default()), metrics, limits)
    }

    /// Serves `hyades` and the root records of `records`, counting into `metrics`.
    pub fn with_records(
        hyades: impl Into<Source>,
        records: Arc<RecordFeed>,
        metrics: Arc<Metrics>,
        limits: Limits,
    ) -> Self {
        Self::with_levels(hyades, records, Arc::new(Levels::default()), metrics, limits)
    }

    /// Serves `hyades` and the root records of `records` at the levels `levels` holds.
    pub fn with_levels(
        hyades: impl Into<Source>,
        records: Arc<RecordFeed>,
        levels: Arc<Levels>,
        metrics: Arc<Metrics>,
        limits: Limits,
    ) -> Self {
        Self { hyades: hyades.into(), records, levels, votes: Arc::new(VoteFeed::default()), metrics, limits }
    }

    /// Serves the vote evidence of `votes` too (`getSlotVotes`); without it every slot answers
    /// that no vote evidence is recorded.
    pub fn with_votes(mut self, votes: Arc<VoteFeed>) -> Self {
        self.votes = votes;
        self
    }

    /// The vote evidence served.
    pub fn votes(&self) -> &Arc<VoteFeed> {
        &self.votes
    }

    /// The commitment levels of the served slots, which the service's poller keeps current.
    pub fn levels(&self) -> &Arc<Levels> {
        &self.levels
    }

    /// The record feed served.
    pub fn records(&self) -> &Arc<RecordFeed> {
        &self.records
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The snapshots served.
    pub fn hyades(&self) -> &Source {
        &self.hyades
    }

    /// Handles one request body: a request object or a batch. Returns the response body, or
    /// `None` when there is nothing to answer (only notifications, i.e. requests without `id`).
    /// `subs` is the connection's subscriptions on WebSocket, `None` on HTTP.
    pub fn handle(&self, body: &[u8], subs: Option<&mut dyn Subscriptions>) -> Option<Vec<u8>> {
        let mut hold = Hold { held: None, base: 0, refused: false };
        self.handle_inner(body, subs, &mut hold).ok().flatten().map(String::into_bytes)
    }

    /// [`Rpc::handle`], holding the answer's bytes in `held` as it is built: each part is added
    /// before it is made where its size is known first (root records, votes, each account of
    /// `getMultipleAccountProofs`), else as soon as it is made, and each request of a batch before
    /// the next is handled. Once `held` cannot grow, the building stops and the whole body is
    /// refused with [`Busy`] (answer it with [`Rpc::busy_body`]). On success `held` holds at least
    /// the answer's length; shrink it to that once the answer is complete.
    pub fn handle_held(
        &self,
        body: &[u8],
        subs: Option<&mut dyn Subscriptions>,
        held: &mut Reservation,
    ) -> Result<Option<Vec<u8>>, Busy> {
        let mut hold = Hold { held: Some(held), base: 0, refused: false };
        Ok(self.handle_inner(body, subs, &mut hold)?.map(String::into_bytes))
    }

    /// The answer to a request refused because the response budget is spent:
    /// [`codes::SERVER_BUSY`] with a null id.
    pub fn busy_body(&self, cap: usize) -> Vec<u8> {
        let err = RpcError::with_data(codes::SERVER_BUSY, BUSY_MESSAGE, json!({"max": cap}));
        self.error_body(&err)
    }

    fn handle_inner(
        &self,
        body: &[u8],
        mut subs: Option<&mut dyn Subscriptions>,
        hold: &mut Hold<'_>,
    ) -> Result<Option<String>, Busy> {
        let value: Value = match serde_json::from_slice(body) {
            Ok(v) => v,
            Err(e) => {
                let err = RpcError::new(codes::PARSE_ERROR, format!("Parse error: {e}"));
                return hold.whole(self.error_response(&Value::Null, &err)).map(Some);
            }
        };
        let response = match value {
            Value::Array(items) => {
                if items.is_empty() {
                    Some(self.error_response(&Value::Null, &RpcError::invalid_request("empty batch")))
                } else if items.len() > self.limits.max_batch {
                    let err = RpcError::with_data(
                        codes::INVALID_REQUEST,
                        format!(
                            "Invalid request: batch of {} requests exceeds the limit of {}",
                            items.len(),
                            self.limits.max_batch
                        ),
                        json!({"max": self.limits.max_batch, "got": items.len()}),
                    );
                    Some(self.error_response(&Value::Null, &err))
                } else {
                    let mut out = String::from("[");
                    let mut any = false;
                    let cap = self.limits.max_response_bytes;
                    // A batch answered by one error (busy, or too large) tells the client none of
                    // its items' results, so the subscriptions its items started are ended again:
                    // none may outlive the answer that would have named it.
                    let mut started = subs.as_mut().map(|s| Started { inner: &mut **s, ids: Vec::new() });
                    for item in items {
                        let reborrowed = started.as_mut().map(|s| s as &mut dyn Subscriptions);
                        // Each answer is built within what the batch has left, so the batch
                        // stops growing at the cap instead of being refused once complete.
                        let budget = cap.saturating_sub(out.len() + 2);
                        hold.base = out.len() + 1;
                        let answer = self.handle_one(item, reborrowed, budget, hold);
                        if hold.refused {
                            started.iter_mut().for_each(Started::end_all);
                            return Err(Busy);
                        }
                        if let Some(r) = answer {
                            if any {
                                out.push(',');
                            }
                            if out.len() + r.len() + 1 > cap {
                                started.iter_mut().for_each(Started::end_all);
                                return hold.whole(self.too_large(&Value::Null, "the batch's answer")).map(Some);
                            }
                            out.push_str(&r);
                            any = true;
                        }
                    }
                    out.push(']');
                    // The whole answer is held below; refused, it names no subscription either.
                    let answer = hold.whole(out);
                    if answer.is_err() {
                        started.iter_mut().for_each(Started::end_all);
                    }
                    let out = answer?;
                    // A batch of only notifications gets no response at all (JSON-RPC 2.0, 6).
                    any.then_some(out)
                }
            }
            other => {
                let answer = self.handle_one(other, subs, self.limits.max_response_bytes, hold);
                if hold.refused {
                    return Err(Busy);
                }
                answer
            }
        };
        match response {
            Some(r) => hold.whole(r).map(Some),
            None => Ok(None),
        }
    }

    /// A response body holding only `err` (with a null id), for failures before dispatch.
    pub fn error_body(&self, err: &RpcError) -> Vec<u8> {
        self.error_response(&Value::Null, err).into_bytes()
    }

    fn error_response(&self, id: &Value, err: &RpcError) -> String {
        self.metrics.error(err.code);
        json!({"jsonrpc": "2.0", "error": err.to_value(), "id": id}).to_string()
    }

    /// The error answer to a request whose answer would exceed the response cap.
    fn too_large(&self, id: &Value, what: &str) -> String {
        self.error_response(id, &self.too_large_error(what))
    }

    pub(crate) fn too_large_error(&self, what: &str) -> RpcError {
        self.metrics.limit_response_bytes.inc();
        let max = self.limits.max_response_bytes;
        RpcError::with_data(
            codes::RESPONSE_TOO_LARGE,
            format!(
                "Response too large: {what} would pass the limit of {max} bytes per response (a batch is one \
                 response); ask for fewer items"
            ),
            json!({"max": max}),
        )
    }

    /// One request object of a body; `None` for a valid notification. The answer, error
    /// included, takes at most `budget` bytes (an error if the result would not fit); its bytes
    /// are held in `hold` (when that fails, `hold.refused` is set and the answer is to be dropped).
    fn handle_one(
        &self,
        req: Value,
        subs: Option<&mut dyn Subscriptions>,
        budget: usize,
        hold: &mut Hold<'_>,
    ) -> Option<String> {
        let Value::Object(mut req) = req else {
            return Some(
                self.error_response(&Value::Null, &RpcError::invalid_request("a request must be a JSON object")),
            );
        };
        let id = req.remove("id");
        let reply_id = match &id {
            None => Value::Null,
            Some(v @ (Value::Null | Value::Number(_) | Value::String(_))) => v.clone(),
            Some(_) => {
                return Some(self.error_response(
                    &Value::Null,
                    &RpcError::invalid_request("`id` must be a string, a number or null"),
                ));
            }
        };
        if req.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Some(self.error_response(&reply_id, &RpcError::invalid_request("`jsonrpc` must be \"2.0\"")));
        }
        let method = match req.remove("method") {
            Some(Value::String(m)) => m,
            _ => return Some(self.error_response(&reply_id, &RpcError::invalid_request("`method` must be a string"))),
        };
        let params = match req.remove("params") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a,
            Some(Value::Object(_)) => {
                let err = RpcError::invalid_params("params must be an array (positional), not an object");
                return Some(self.error_response(&reply_id, &err));
            }
            Some(_) => {
                return Some(self.error_response(&reply_id, &RpcError::invalid_request("`params` must be an array")));
            }
        };
        // A notification asks for no answer, and every method here only reads, so there is
        // nothing to do for it.
        id.as_ref()?;
        let started = Instant::now();
        let known = Method::from_name(&method);
        // Room for the result once the envelope and the id are written.
        let room = budget.saturating_sub(reply_id.to_string().len() + 40);
        let result = match known {
            Some(m) => self.call_held(m, &params, subs, room, hold),
            None => Err(RpcError::new(codes::METHOD_NOT_FOUND, format!("Method not found: {}", truncate(&method, 64)))),
        };
        self.metrics.request(known, started.elapsed());
        if hold.refused {
            return None;
        }
        let result = match result {
            Ok(v) if v.len() > room => Err(self.too_large_error("the answer")),
            // The result and its envelope are held before the envelope is copied.
            Ok(v) if !hold.take(v.len() + reply_id.to_string().len() + 40) => return None,
            other => other,
        };
        Some(match result {
            Ok(v) => {
                let id = reply_id.to_string();
                let mut out = String::with_capacity(v.len() + id.len() + 40);
                out.push_str(r#"{"jsonrpc":"2.0","result":"#);
                out.push_str(&v);
                out.push_str(r#","id":"#);
                out.push_str(&id);
                out.push('}');
                out
            }
            Err(e) => self.error_response(&reply_id, &e),
        })
    }

    /// Runs one method with positional `params`; returns the result as JSON text.
    pub fn call(
        &self,
        method: Method,
        params: &[Value],
        subs: Option<&mut dyn Subscriptions>,
    ) -> Result<String, RpcError> {
        let mut hold = Hold { held: None, base: 0, refused: false };
        self.call_held(method, params, subs, self.limits.max_response_bytes, &mut hold)
    }

    /// [`Rpc::call`] for a result of at most `budget` bytes: the methods whose answers grow with
    /// the request stop (with [`codes::RESPONSE_TOO_LARGE`]) before they build a larger one, and
    /// hold their bytes in `hold` before building them (a refusal answers [`codes::SERVER_BUSY`]
    /// and sets `hold.refused`).
    fn call_held(
        &self,
        method: Method,
        params: &[Value],
        subs: Option<&mut dyn Subscriptions>,
        budget: usize,
        hold: &mut Hold<'_>,
    ) -> Result<String, RpcError> {
        // Reborrowed so that the connection's subscriptions live as long as this call's context.
        let subs = subs.map(|s| s as &mut dyn Subscriptions);
        method.call(params, &mut Call::new(self, subs, budget, hold))
    }

    /// The slot an answer is about, and its level (`None` when the directory has no journal):
    /// `slot` if given, else the newest slot at `want` (at `processed` when `want` is `None`).
    /// A slot the journal says was abandoned answers [`codes::SLOT_ABANDONED`] whether or not its
    /// file remains; a slot below `want` answers [`codes::SLOT_NOT_COMMITTED`].
    ///
    /// Without a journal the files are at the level their writer ran at, `confirmed` or
    /// `finalized`, and they do not say which: `processed` and `confirmed` select as if no level
    /// were given, and `finalized`, which cannot be promised, is invalid params.
    pub(crate) fn resolve(
        &self,
        slot: Option<u64>,
        want: Option<Level>,
    ) -> Result<(SlotInfo, Option<Level>), RpcError> {
        let view = self.levels.view();
        if !view.journal() {
            if want == Some(Level::Finalized) {
                return Err(RpcError::invalid_params(
                    "commitment \"finalized\" cannot be promised here: the directory has no slot-status journal and \
                     its files do not say whether their writer ran at confirmed or finalized (ask for \"confirmed\", \
                     or read the finalized root records with getRootRecord)",
                ));
            }
            return Ok((self.hyades.slot(slot).map_err(|e| self.query_error(e))?, None));
        }
        let slot = match slot {
            Some(s) => s,
            None => match view.newest(want.unwrap_or(Level::Processed)) {
                Some(s) => s,
                None if self.hyades.latest().is_none() => return Err(self.query_error(QueryError::NothingPublished)),
                None => return Err(self.none_at_level(want.unwrap_or(Level::Processed))),
            },
        };
        if view.abandoned(slot) {
            return Err(self.abandoned(slot));
        }
        let info = self.hyades.slot(Some(slot)).map_err(|e| self.query_error(e))?;
        match view.served(&info) {
            Served::At(l) if want.is_some_and(|w| l < w) => {
                Err(self.below_level(slot, Some(l), want.unwrap_or(l), want.and_then(|w| view.newest(w))))
            }
            Served::At(l) => Ok((info, Some(l))),
            Served::Unknown => Ok((info, None)),
            Served::Abandoned => Err(self.abandoned(slot)),
            Served::Stale { journaled } => Err(self.query_error(QueryError::Corrupt {
                slot,
                reason: format!(
                    "the slot's newest file (sequence {journaled}) is damaged or missing; file #{} holds another \
                     bank of the slot",
                    info.seq
                ),
            })),
        }
    }

    /// Whether `info`'s slot may still be served once a proof was read: a slot abandoned while
    /// its proof was being made is refused rather than answered.
    pub(crate) fn still_served(&self, info: &SlotInfo) -> Result<(), RpcError> {
        match self.levels.view().served(info) {
            Served::At(_) | Served::Unknown => Ok(()),
            _ => Err(self.abandoned(info.slot)),
        }
    }

    /// The range data of the errors: the slot asked for and the served range.
    fn range_data(&self, slot: Option<u64>) -> Value {
        let (oldest, newest) = (self.hyades.oldest(), self.hyades.latest());
        json!({
            "slot": slot,
            "oldestSlot": oldest.map(|s| s.slot),
            "newestSlot": newest.map(|s| s.slot),
        })
    }

    fn abandoned(&self, slot: u64) -> RpcError {
        self.metrics.abandoned_answers.inc();
        RpcError::with_data(codes::SLOT_ABANDONED, "slot abandoned: its fork was dropped", self.range_data(Some(slot)))
    }

    /// `slot` is served but below the level asked for (`None`: not known to be at it).
    fn below_level(&self, slot: u64, level: Option<Level>, want: Level, newest: Option<u64>) -> RpcError {
        let mut data = self.range_data(Some(slot));
        data["newestSlot"] = newest.map_or(Value::Null, Value::from);
        data["commitment"] = level.map_or(Value::Null, |l| Value::from(l.name()));
        data["requested"] = Value::from(want.name());
        RpcError::with_data(
            codes::SLOT_NOT_COMMITTED,
            format!("slot not committed yet: it has not reached commitment {}", want.name()),
            data,
        )
    }

    fn none_at_level(&self, want: Level) -> RpcError {
        RpcError::with_data(
            codes::NOTHING_PUBLISHED,
            format!("no snapshot has reached commitment {} yet", want.name()),
            json!({"commitment": want.name()}),
        )
    }

    /// The JSON-RPC form of a query error, with the served range as data so a client can retry
    /// at a slot that exists.
    pub(crate) fn query_error(&self, e: QueryError) -> RpcError {
        let range = |slot: Option<u64>| {
            let (oldest, newest) = (self.hyades.oldest(), self.hyades.latest());
            json!({
                "slot": slot,
                "oldestSlot": oldest.map(|s| s.slot),
                "newestSlot": newest.map(|s| s.slot),
            })
        };
        // A failed read is answered as the damage or storage error it is.
        let e = match e {
            QueryError::Damaged { slot, source } => QueryError::Corrupt { slot, reason: source.to_string() },
            QueryError::Unreadable { source, .. } => QueryError::Storage(source.to_string()),
            e => e,
        };
        match e {
            QueryError::NothingPublished => {
                RpcError::new(codes::NOTHING_PUBLISHED, "no snapshot has been published yet")
            }
            QueryError::Pruned { slot, oldest } => {
                let mut data = range(Some(slot));
                data["oldestSlot"] = Value::from(oldest);
                RpcError::with_data(codes::SLOT_PRUNED, "slot pruned", data)
            }
            QueryError::NotYetCommitted { slot, newest } => {
                let mut data = range(Some(slot));
                data["newestSlot"] = Value::from(newest);
                RpcError::with_data(codes::SLOT_NOT_COMMITTED, "slot not committed yet", data)
            }
            QueryError::NoSnapshot { slot } => {
                RpcError::with_data(codes::SLOT_NO_SNAPSHOT, "slot has no snapshot (skipped)", range(Some(slot)))
            }
            QueryError::Corrupt { slot, reason } => {
                log::error!("slot {slot} not served: {reason}");
                let mut data = range(Some(slot));
                data["reason"] = Value::from(truncate(&reason, 300));
                RpcError::with_data(
                    codes::SLOT_CORRUPT,
                    "slot cannot be served: a snapshot file it needs is damaged",
                    data,
                )
            }
            QueryError::NotWritten { slot, after, until } => {
                let mut data = range(Some(slot));
                data["writtenBefore"] = after.map_or(Value::Null, Value::from);
                data["writtenAgain"] = Value::from(until);
                RpcError::with_data(
                    codes::SLOT_NOT_WRITTEN,
                    "slot was not written: the snapshot writer was failing",
                    data,
                )
            }
            QueryError::MissingFile { slot, file } => {
                log::error!("slot {slot} not served: {file} is missing");
                let mut data = range(Some(slot));
                data["file"] = Value::from(truncate(&file, 300));
                RpcError::with_data(
                    codes::SLOT_FILE_MISSING,
                    "slot cannot be served: a snapshot file it needs is missing",
                    data,
                )
            }
            QueryError::Storage(reason) => {
                // The reason names files on the server; it goes to the log, not to clients.
                log::error!("query failed: {reason}");
                RpcError::new(codes::INTERNAL_ERROR, "Internal error: snapshot storage error (see the server log)")
            }
            other => {
                log::error!("query failed: {other}");
                RpcError::new(codes::INTERNAL_ERROR, format!("Internal error: {other}"))
            }
        }
    }
}

/// A connection's subscriptions, recording the ones a batch starts so that a batch answered by
/// one error can end them again.
struct Started<'a> {
    inner: &'a mut dyn Subscriptions,
    /// Started so far: (is a record subscription, id).
    ids: Vec<(bool, u64)>,
}

impl Started<'_> {
    fn end_all(&mut self) {
        for (record, id) in self.ids.drain(..) {
            if record {
                self.inner.record_unsubscribe(id);
            } else {
                self.inner.unsubscribe(id);
            }
        }
    }
}

impl Subscriptions for Started<'_> {
    fn subscribe(&mut self) -> Result<u64, RpcError> {
        let id = self.inner.subscribe()?;
        self.ids.push((false, id));
        Ok(id)
    }

    fn subscribe_at(&mut self, level: Option<Level>) -> Result<u64, RpcError> {
        let id = self.inner.subscribe_at(level)?;
        self.ids.push((false, id));
        Ok(id)
    }

    fn unsubscribe(&mut self, id: u64) -> bool {
        self.ids.retain(|&(record, i)| record || i != id);
        self.inner.unsubscribe(id)
    }

    fn record_subscribe(&mut self, from_slot: Option<u64>, commitment: Option<Commitment>) -> Result<u64, RpcError> {
        let id = self.inner.record_subscribe(from_slot, commitment)?;
        self.ids.push((true, id));
        Ok(id)
    }

    fn record_unsubscribe(&mut self, id: u64) -> bool {
        self.ids.retain(|&(record, i)| !record || i != id);
        self.inner.record_unsubscribe(id)
    }
}

/// Where the bytes of a body being built are held: the server's response budget, or nowhere
/// (the plain [`Rpc::handle`]).
pub(crate) struct Hold<'a> {
    held: Option<&'a mut Reservation>,
    /// Bytes of the body before the part being built (a batch's earlier answers).
    base: usize,
    /// Set once the budget refused: the body is to be dropped and answered "server busy".
    refused: bool,
}

impl Hold<'_> {
    /// Holds `len` bytes past the base; false (and `refused` set) if the budget cannot.
    pub(crate) fn take(&mut self, len: usize) -> bool {
        let Some(held) = self.held.as_deref_mut() else { return true };
        if held.try_grow_to(self.base.saturating_add(len)) {
            return true;
        }
        self.refused = true;
        false
    }

    /// Holds the whole body, once complete.
    fn whole(&mut self, body: String) -> Result<String, Busy> {
        self.base = 0;
        if self.take(body.len()) { Ok(body) } else { Err(Busy) }
    }
}

/// The error of a part refused by the budget; the body it belonged to is dropped unsent.
pub(crate) fn busy_error() -> RpcError {
    RpcError::new(codes::SERVER_BUSY, BUSY_MESSAGE)
}
