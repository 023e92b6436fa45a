//! `getAccountProof` and `getMultipleAccountProofs`: accounts with their proofs at one slot.

use serde_json::{Value, json};

use super::params::{at_most, config_slot, pubkey};
use crate::encode;
use crate::rpc::{Hold, Rpc, RpcError, busy_error, codes};

/// Room held for one account proof beyond its base64 data: the path of sibling hashes, the
/// account's fields and the JSON around them (a deep path in base58 is under 3 KiB).
const PROOF_ROOM: usize = 4096;

impl Rpc {
    /// `getAccountProof([pubkey, {"slot"?, "commitment"?}])`.
    pub(crate) fn get_account_proof(&self, params: &[Value]) -> Result<String, RpcError> {
        at_most(params, 2)?;
        let key = pubkey(params.first(), "pubkey")?;
        let (slot, want) = config_slot(params.get(1))?;
        let (info, level) = self.resolve(slot, want)?;
        let p = self.hyades.prove(&key, info.slot).map_err(|e| self.query_error(e))?;
        self.still_served(&info)?;
        Ok(encode::envelope(p.slot, |o| encode::account_proof_json(o, &p, level)))
    }

    /// `getMultipleAccountProofs([[pubkey, ...], {"slot"?, "commitment"?}])`.
    pub(crate) fn get_multiple_account_proofs(
        &self,
        params: &[Value],
        budget: usize,
        hold: &mut Hold<'_>,
    ) -> Result<String, RpcError> {
        at_most(params, 2)?;
        let keys = match params.first() {
            Some(Value::Array(a)) => a,
            Some(_) => return Err(RpcError::invalid_params("pubkeys must be an array of base58 strings")),
            None => return Err(RpcError::invalid_params("missing pubkeys (an array of base58 strings)")),
        };
        if keys.len() > self.limits.max_keys {
            return Err(RpcError::with_data(
                codes::INVALID_PARAMS,
                format!("Invalid params: {} pubkeys exceed the limit of {}", keys.len(), self.limits.max_keys),
                json!({"max": self.limits.max_keys, "got": keys.len()}),
            ));
        }
        let keys = keys
            .iter()
            .enumerate()
            .map(|(i, k)| pubkey(Some(k), &format!("pubkeys[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        // All answers at one slot: resolve it once, then prove each key there. Each proof
        // is encoded as soon as it is made, so only one account's data is held at a time,
        // and an account whose base64 data alone would pass the budget is never encoded.
        let (slot, want) = config_slot(params.get(1))?;
        let (info, level) = self.resolve(slot, want)?;
        let mut out = Ok(());
        let answer = encode::envelope(info.slot, |o| {
            o.push('[');
            for (i, key) in keys.iter().enumerate() {
                let p = match self.hyades.prove(key, info.slot) {
                    Ok(p) => p,
                    Err(e) => {
                        out = Err(self.query_error(e));
                        return;
                    }
                };
                let data = p.account.as_ref().map_or(0, |a| a.data.len().div_ceil(3) * 4);
                if o.len() + data > budget {
                    out = Err(self.too_large_error("the proofs"));
                    return;
                }
                if !hold.take(o.len() + data + PROOF_ROOM) {
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
        self.still_served(&info)?;
        Ok(answer)
    }
}
