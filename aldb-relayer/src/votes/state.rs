//! The relayer's state on votes: the light client's state (`docs/SPEC.md` §11.5) and the cursor,
//! in one JSON file replaced atomically (a new file, synced, renamed over the old one, the
//! directory synced), so a crash leaves the old state or the new, never the client of one and the
//! cursor of the other.
//!
//! ```text
//! {"version": 1, "accepted": {"slot": u64, "bankHash": base58} | null, "nextSlot": u64,
//!  "client": {§11.5 state file}}
//! ```
//!
//! `accepted` is the last root written to the output (what the output is reconciled with on a
//! restart), `nextSlot` the first slot not yet decided (accepted or given up).

use std::io::Read;
use std::path::{Path, PathBuf};

use aldb_verify::epochs::{Checkpoint, ClientState, LightClient, Misbehaviour};
use aldb_verify::{hash_from_base58, hash_to_base58};
use serde_json::{Value, json};

use crate::chain::Tip;
use crate::error::RelayError;

/// The longest checkpoint or state file read: two sets of 65,536 members in JSON (about 200 bytes
/// each) and three slot evidences of 4,096 votes.
const MAX_STATE_BYTES: u64 = 64 << 20;

/// What a restart resumes from.
#[derive(Debug)]
pub(crate) struct Saved {
    /// The client.
    pub(crate) client: LightClient,
    /// The last root written to the output (its bank hash standing for the record hash).
    pub(crate) accepted: Option<Tip>,
    /// The first slot not yet decided.
    pub(crate) next_slot: u64,
}

fn bad(path: &Path, reason: impl Into<String>) -> RelayError {
    RelayError::State { path: path.to_path_buf(), reason: reason.into() }
}

fn read_bounded(path: &Path) -> Result<String, RelayError> {
    let mut text = String::new();
    let read = std::fs::File::open(path)
        .and_then(|f| f.take(MAX_STATE_BYTES + 1).read_to_string(&mut text))
        .map_err(|e| bad(path, format!("cannot read: {e}")))?;
    if read as u64 > MAX_STATE_BYTES {
        return Err(bad(path, format!("longer than {MAX_STATE_BYTES} bytes")));
    }
    Ok(text)
}

/// Loads the state file, or, when there is none, starts a client from the checkpoint (writing
/// the state file at once, so a first run's start is kept too). Without a state, the first slot
/// considered is `start_slot` or the checkpoint epoch's first slot, whichever is later.
pub(crate) fn load(state_path: &Path, checkpoint_path: &Path, start_slot: u64) -> Result<Saved, RelayError> {
    if state_path.exists() {
        let text = read_bounded(state_path)?;
        return parse(&text).map_err(|reason| bad(state_path, reason));
    }
    let text = read_bounded(checkpoint_path)?;
    let checkpoint = Checkpoint::from_json_str(&text)
        .map_err(|e| bad(checkpoint_path, format!("not a checkpoint (SPEC §11.5): {e}")))?;
    let first = checkpoint.schedule.first_slot(checkpoint.set.epoch()).unwrap_or(u64::MAX);
    let client = LightClient::new(checkpoint).map_err(|e| bad(checkpoint_path, format!("refused: {e}")))?;
    let saved = Saved { client, accepted: None, next_slot: start_slot.max(first) };
    save(state_path, &saved.client, saved.accepted.as_ref(), saved.next_slot)?;
    Ok(saved)
}

fn parse(text: &str) -> Result<Saved, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    if v.get("version").and_then(Value::as_u64) != Some(1) {
        return Err("not a relayer state file of version 1".into());
    }
    let next_slot = v.get("nextSlot").and_then(Value::as_u64).ok_or("`nextSlot` must be an unsigned 64-bit integer")?;
    let accepted = match v.get("accepted") {
        None | Some(Value::Null) => None,
        Some(a) => {
            let slot = a.get("slot").and_then(Value::as_u64).ok_or("`accepted.slot` must be an unsigned integer")?;
            let hash = a
                .get("bankHash")
                .and_then(Value::as_str)
                .and_then(|h| hash_from_base58(h).ok())
                .ok_or("`accepted.bankHash` must be base58 of 32 bytes")?;
            Some(Tip { slot, record_hash: hash })
        }
    };
    if accepted.is_some_and(|a| a.slot >= next_slot) {
        return Err("`accepted.slot` must be below `nextSlot`".into());
    }
    let client = v.get("client").ok_or("no `client` state")?;
    let state = ClientState::from_json_value(client).map_err(|e| format!("`client`: {e}"))?;
    let client = LightClient::from_state(state).map_err(|e| format!("`client`: {e}"))?;
    Ok(Saved { client, accepted, next_slot })
}

/// Replaces the state file.
pub(crate) fn save(
    path: &Path,
    client: &LightClient,
    accepted: Option<&Tip>,
    next_slot: u64,
) -> Result<(), RelayError> {
    let doc = json!({
        "version": 1,
        "accepted": accepted.map(|t| json!({"slot": t.slot, "bankHash": hash_to_base58(&t.record_hash)})),
        "nextSlot": next_slot,
        "client": client.state().to_json_value(),
    });
    aldb_format::durable::replace_file(path, doc.to_string().as_bytes())
        .map_err(|e| bad(path, format!("cannot write: {e}")))
}

/// The misbehaviour file beside the state: `<state_file>.misbehaviour.json`.
pub(crate) fn misbehaviour_path(state_path: &Path) -> PathBuf {
    let mut name = state_path.as_os_str().to_owned();
    name.push(".misbehaviour.json");
    PathBuf::from(name)
}

/// Writes the misbehaviour file (§11.6) a person hands to others.
pub(crate) fn write_misbehaviour(state_path: &Path, m: &Misbehaviour) -> Result<PathBuf, RelayError> {
    let path = misbehaviour_path(state_path);
    let text = serde_json::to_string_pretty(&m.to_json_value()).map_err(|e| bad(&path, e.to_string()))?;
    aldb_format::durable::replace_file(&path, text.as_bytes()).map_err(|e| bad(&path, format!("cannot write: {e}")))?;
    Ok(path)
}
