//! `getEpochTransition`: the proof of an epoch's validator set to whoever trusts the set of the
//! epoch before (`docs/SPEC.md` §11.4), from the vote-evidence log.

use serde_json::Value;

use super::params::{at_most, slot_param};
use super::{Call, Class, Handler};
use crate::encode;
use crate::rpc::{Limits, RpcError, busy_error};

/// `getEpochTransition([epoch])`, `epoch` at least 1: `{"version": 1, "set", "evidence"}` with the
/// set of `epoch` and the slot evidence of a slot of `epoch − 1` binding it, in the context of
/// that slot. Heavy: it reads a set (some 94 KB on mainnet) and a slot's votes, and checks their
/// signatures to choose the slot.
pub(crate) struct GetEpochTransition;

impl Handler for GetEpochTransition {
    const NAME: &'static str = "getEpochTransition";
    const CLASS: Class = Class::Heavy;
    /// The epoch.
    type Params = u64;

    fn params(params: &[Value], _: &Limits) -> Result<u64, RpcError> {
        at_most(params, 1)?;
        let epoch = slot_param(params.first(), "epoch").map_err(|_| {
            RpcError::invalid_params("epoch must be a positive integer (the epoch whose set is proven)")
        })?;
        if epoch == 0 {
            return Err(RpcError::invalid_params(
                "epoch must be at least 1: the set of epoch 0 is a checkpoint, no transition proves it",
            ));
        }
        Ok(epoch)
    }

    fn run(epoch: u64, call: &mut Call<'_, '_>) -> Result<String, RpcError> {
        let rpc = call.rpc;
        let (slot, json) = rpc.votes.transition(epoch).map_err(|e| e.to_rpc())?;
        if json.len() > call.budget {
            return Err(rpc.too_large_error(&format!("the transition to epoch {epoch}")));
        }
        if !call.hold(json.len() + 64) {
            return Err(busy_error());
        }
        Ok(encode::envelope(slot, |o| o.push_str(&json)))
    }
}
