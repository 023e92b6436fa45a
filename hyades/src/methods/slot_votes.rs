//! `getSlotVotes`: a slot's vote evidence (`docs/SPEC.md` §10.5), served where its proof is.

use aldb_format::{QueryError, SlotInfo};
use serde_json::{Value, json};

use super::params::{at_most, config_level, level_field, opt_slot, pubkey, truncate};
use super::{Call, Class, Handler};
use crate::encode;
use crate::levels::Level;
use crate::rpc::{Limits, MAX_VOTE_ACCOUNTS, Rpc, RpcError, busy_error, codes};
use crate::votes::{ServedVotes, VoteSelection};

/// Slots with a logged bank that `getSlotVotes` without a slot tries, newest first, for one it
/// can serve: the newest banks have no votes yet, and at `confirmed` no snapshot yet.
const NEWEST_VOTED_TRIES: usize = 64;

/// `getSlotVotes([slot?, {"commitment"?, "voteAccounts"?}])` or
/// `getSlotVotes([{"commitment"?, "voteAccounts"?}])`. Heavy: it reads the vote-evidence log,
/// thousands of votes at mainnet sizes.
pub(crate) struct GetSlotVotes;

impl Handler for GetSlotVotes {
    const NAME: &'static str = "getSlotVotes";
    const CLASS: Class = Class::Heavy;
    /// The slot (the newest with votes that is served when `None`), the level asked for and the
    /// vote accounts whose votes are served.
    type Params = (Option<u64>, Option<Level>, VoteSelection);

    fn params(params: &[Value], _: &Limits) -> Result<Self::Params, RpcError> {
        at_most(params, 2)?;
        // `[config]` alone asks for the newest slot with votes, as getStateRoot takes one.
        let (slot, config) = match params.first() {
            Some(Value::Object(_)) if params.len() == 1 => (None, params.first()),
            first => (opt_slot(first, "slot")?, params.get(1)),
        };
        let (want, selection) = slot_votes_config(config)?;
        Ok((slot, want, selection))
    }

    fn run((slot, want, selection): Self::Params, call: &mut Call<'_, '_>) -> Result<String, RpcError> {
        let rpc = call.rpc;
        let (info, level, votes) = match slot {
            Some(s) => slot_votes(rpc, s, want, &selection)?,
            None => newest_slot_votes(rpc, want, &selection)?,
        };
        if votes.encoded_len() > call.budget {
            return Err(rpc.too_large_error(&format!("{} votes", votes.votes.len())));
        }
        if !call.hold(votes.encoded_len() + 64) {
            return Err(busy_error());
        }
        rpc.still_served(&info)?;
        Ok(encode::envelope(info.slot, |o| votes.write_json(o, level)))
    }
}

/// The vote evidence of `slot`, which must also be served at `want` like a proof: the two are
/// joined by the client. The snapshot's root must be the root the bank hash commits to.
fn slot_votes(
    rpc: &Rpc,
    slot: u64,
    want: Option<Level>,
    selection: &VoteSelection,
) -> Result<(SlotInfo, Option<Level>, ServedVotes), RpcError> {
    let (info, level) = rpc.resolve(Some(slot), want)?;
    let votes = rpc.votes.slot_votes(slot, selection).map_err(|e| e.to_rpc())?;
    if votes.root != info.root {
        return Err(rpc.query_error(QueryError::Corrupt {
            slot,
            reason: format!(
                "the snapshot's root {} is not the root {} the slot's bank hash commits to",
                aldb_verify::json::hash_to_base58(&info.root),
                aldb_verify::json::hash_to_base58(&votes.root)
            ),
        }));
    }
    Ok((info, level, votes))
}

/// The newest slot whose evidence can be served at `want`, with votes on it.
fn newest_slot_votes(
    rpc: &Rpc,
    want: Option<Level>,
    selection: &VoteSelection,
) -> Result<(SlotInfo, Option<Level>, ServedVotes), RpcError> {
    let Some((_, newest)) = rpc.votes.range() else { return Err(rpc.votes.nothing_recorded().to_rpc()) };
    let mut first_error = None;
    for slot in rpc.votes.banks_down_from(newest, NEWEST_VOTED_TRIES) {
        match slot_votes(rpc, slot, want, selection) {
            Ok(found) => return Ok(found),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    Err(RpcError::with_data(
        codes::SLOT_NOT_COMMITTED,
        format!(
            "no slot voted on yet: none of the newest {NEWEST_VOTED_TRIES} recorded banks has votes and is served{}",
            first_error.map(|e| format!(" (slot {newest}: {})", e.message)).unwrap_or_default()
        ),
        json!({"newestVotedSlot": newest}),
    ))
}

/// The level and the vote accounts of `getSlotVotes`'s optional configuration object
/// `{"commitment"?, "voteAccounts"?: [[voteAccount, authorizedVoter], ...]}`: with
/// `voteAccounts`, only those accounts' votes signed by their voters are served, one each, so no
/// number of other votes can crowd them out.
fn slot_votes_config(v: Option<&Value>) -> Result<(Option<Level>, VoteSelection), RpcError> {
    let Some(Value::Object(o)) = v else { return Ok((config_level(v)?, VoteSelection::All)) };
    if let Some(k) = o.keys().find(|k| !matches!(k.as_str(), "commitment" | "voteAccounts")) {
        return Err(RpcError::invalid_params(format!(
            "unknown config field `{}` (only `commitment` and `voteAccounts` are accepted)",
            truncate(k, 64)
        )));
    }
    let level = level_field(o.get("commitment"))?;
    let list = match o.get("voteAccounts") {
        None | Some(Value::Null) => return Ok((level, VoteSelection::All)),
        Some(Value::Array(list)) => list,
        Some(_) => {
            return Err(RpcError::invalid_params(
                "voteAccounts must be an array of [voteAccount, authorizedVoter] pairs of base58 keys",
            ));
        }
    };
    if list.is_empty() || list.len() > MAX_VOTE_ACCOUNTS {
        return Err(RpcError::with_data(
            codes::INVALID_PARAMS,
            format!("Invalid params: voteAccounts holds {} accounts; between 1 and {MAX_VOTE_ACCOUNTS}", list.len()),
            json!({"max": MAX_VOTE_ACCOUNTS, "got": list.len()}),
        ));
    }
    let mut voters = std::collections::BTreeMap::new();
    for (i, pair) in list.iter().enumerate() {
        let Some([account, voter]) = pair.as_array().map(Vec::as_slice) else {
            return Err(RpcError::invalid_params(format!(
                "voteAccounts[{i}] must be a pair [voteAccount, authorizedVoter]"
            )));
        };
        let account = pubkey(Some(account), &format!("voteAccounts[{i}][0]"))?;
        let voter = pubkey(Some(voter), &format!("voteAccounts[{i}][1]"))?;
        if voters.insert(account, voter).is_some() {
            return Err(RpcError::invalid_params(format!(
                "voteAccounts: vote account {} is listed twice",
                aldb_verify::json::hash_to_base58(&account)
            )));
        }
    }
    Ok((level, VoteSelection::Voters(voters)))
}
