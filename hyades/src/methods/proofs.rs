//! `getAccountProof` and `getMultipleAccountProofs`: accounts with their proofs at one slot.

use serde_json::{Value, json};

use super::params::{at_most, config_slot, pubkey};
use super::{Call, Class, Handler};
use crate::encode;
use crate::levels::Level;
use crate::rpc::{Limits, RpcError, busy_error, codes};

/// Room held for one account proof beyond its base64 data: the path of sibling hashes, the
/// account's fields and the JSON around them (a deep path in base58 is under 3 KiB).
const PROOF_ROOM: usize = 4096;

/// `getAccountProof([pubkey, {"slot"?, "commitment"?}])`.
pub(crate) struct GetAccountProof;

impl Handler for GetAccountProof {
    const NAME: &'static str = "getAccountProof";
    const CLASS: Class = Class::Light;
    /// The key, the slot (the newest at the level when `None`) and the level asked for.
    type Params = ([u8; 32], Option<u64>, Option<Level>);

    fn params(params: &[Value], _: &Limits) -> Result<Self::Params, RpcError> {
        at_most(params, 2)?;
        let key = pubkey(params.first(), "pubkey")?;
        let (slot, want) = config_slot(params.get(1))?;
        Ok((key, slot, want))
    }

    fn run((key, slot, want): Self::Params, call: &mut Call<'_, '_>) -> Result<String, RpcError> {
        let rpc = call.rpc;
        let (info, level) = rpc.resolve(slot, want)?;
        let p = rpc.hyades.prove(&key, info.slot).map_err(|e| rpc.query_error(e))?;
        rpc.still_served(&info)?;
        Ok(encode::envelope(p.slot, |o| encode::account_proof_json(o, &p, level)))
    }
}

/// `getMultipleAccountProofs([[pubkey, ...], {"slot"?, "commitment"?}])`: all at one slot.
pub(crate) struct GetMultipleAccountProofs;

impl Handler for GetMultipleAccountProofs {
    const NAME: &'static str = "getMultipleAccountProofs";
    const CLASS: Class = Class::Heavy;
    /// The keys (at most [`Limits::max_keys`]), the slot and the level asked for.
    type Params = (Vec<[u8; 32]>, Option<u64>, Option<Level>);

    fn params(params: &[Value], limits: &Limits) -> Result<Self::Params, RpcError> {
        at_most(params, 2)?;
        let keys = match params.first() {
            Some(Value::Array(a)) => a,
            Some(_) => return Err(RpcError::invalid_params("pubkeys must be an array of base58 strings")),
            None => return Err(RpcError::invalid_params("missing pubkeys (an array of base58 strings)")),
        };
        if keys.len() > limits.max_keys {
            return Err(RpcError::with_data(
                codes::INVALID_PARAMS,
                format!("Invalid params: {} pubkeys exceed the limit of {}", keys.len(), limits.max_keys),
                json!({"max": limits.max_keys, "got": keys.len()}),
            ));
        }
        let keys = keys
            .iter()
            .enumerate()
            .map(|(i, k)| pubkey(Some(k), &format!("pubkeys[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        let (slot, want) = config_slot(params.get(1))?;
        Ok((keys, slot, want))
    }

    fn run((keys, slot, want): Self::Params, call: &mut Call<'_, '_>) -> Result<String, RpcError> {
        let (rpc, budget) = (call.rpc, call.budget);
        // All answers at one slot: resolve it once, then prove each key there. Each proof is
        // encoded as soon as it is made, so only one account's data is held at a time, and an
        // account whose base64 data alone would pass the budget is never encoded.
        let (info, level) = rpc.resolve(slot, want)?;
        let mut out = Ok(());
        let answer = encode::envelope(info.slot, |o| {
            o.push('[');
            for (i, key) in keys.iter().enumerate() {
                let p = match rpc.hyades.prove(key, info.slot) {
                    Ok(p) => p,
                    Err(e) => {
                        out = Err(rpc.query_error(e));
                        return;
                    }
                };
                let data = p.account.as_ref().map_or(0, |a| a.data.len().div_ceil(3) * 4);
                if o.len() + data > budget {
                    out = Err(rpc.too_large_error("the proofs"));
                    return;
                }
                if !call.hold(o.len() + data + PROOF_ROOM) {
                    out = Err(busy_error());
                    return;
                }
                if i > 0 {
                    o.push(',');
                }
                encode::account_proof_json(o, &p, level);
            }
            o.push(']');
        });
        out?;
        rpc.still_served(&info)?;
        Ok(answer)
    }
}
