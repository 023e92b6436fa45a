//! `getStateRoot` and `getStateRoots`: the roots of served slots.

use aldb_format::{QueryError, SlotInfo};
use serde_json::{Value, json};

use super::params::{at_most, config_level, opt_slot, slot_param};
use super::{Call, Class, Handler};
use crate::encode;
use crate::levels::{Level, Served};
use crate::rpc::{Limits, RpcError, codes};

/// `getStateRoot([slot?, {"commitment"?}])` or `getStateRoot([{"commitment"?}])`.
pub(crate) struct GetStateRoot;

impl Handler for GetStateRoot {
    const NAME: &'static str = "getStateRoot";
    const CLASS: Class = Class::Light;
    /// The slot (the newest at the level when `None`) and the level asked for.
    type Params = (Option<u64>, Option<Level>);

    fn params(params: &[Value], _: &Limits) -> Result<Self::Params, RpcError> {
        at_most(params, 2)?;
        // `[config]` alone asks for the newest slot at a level, as Solana's methods take one.
        let (slot, config) = match params.first() {
            Some(Value::Object(_)) if params.len() == 1 => (None, params.first()),
            first => (opt_slot(first, "slot")?, params.get(1)),
        };
        Ok((slot, config_level(config)?))
    }

    fn run((slot, want): Self::Params, call: &mut Call<'_, '_>) -> Result<String, RpcError> {
        let (info, level) = call.rpc.resolve(slot, want)?;
        Ok(encode::envelope(info.slot, |o| encode::slot_json(o, &info, level)))
    }
}

/// `getStateRoots([startSlot, endSlot])`.
pub(crate) struct GetStateRoots;

impl Handler for GetStateRoots {
    const NAME: &'static str = "getStateRoots";
    const CLASS: Class = Class::Heavy;
    /// The inclusive range, at most [`Limits::max_slot_range`] slots.
    type Params = (u64, u64);

    fn params(params: &[Value], limits: &Limits) -> Result<Self::Params, RpcError> {
        at_most(params, 2)?;
        let start = slot_param(params.first(), "startSlot")?;
        let end = slot_param(params.get(1), "endSlot")?;
        if start > end {
            return Err(RpcError::invalid_params(format!("startSlot {start} is after endSlot {end}")));
        }
        let span = (end - start).saturating_add(1);
        if span > limits.max_slot_range {
            return Err(RpcError::with_data(
                codes::INVALID_PARAMS,
                format!("Invalid params: range of {span} slots exceeds the limit of {}", limits.max_slot_range),
                json!({"max": limits.max_slot_range, "got": span}),
            ));
        }
        Ok((start, end))
    }

    fn run((start, end): Self::Params, call: &mut Call<'_, '_>) -> Result<String, RpcError> {
        let rpc = call.rpc;
        let newest = rpc.hyades.latest().ok_or_else(|| rpc.query_error(QueryError::NothingPublished))?;
        let view = rpc.levels.view();
        let newest = view.newest(Level::Processed).unwrap_or(newest.slot);
        // Abandoned banks and stale copies are left out: their roots are never served.
        let roots: Vec<(SlotInfo, Option<Level>)> = rpc
            .hyades
            .slots(start, end)
            .into_iter()
            .filter_map(|info| match view.served(&info) {
                Served::At(l) => Some((info, Some(l))),
                Served::Unknown => Some((info, None)),
                Served::Abandoned | Served::Stale { .. } => None,
            })
            .collect();
        Ok(encode::envelope(newest, |o| {
            o.push('[');
            for (i, (info, level)) in roots.iter().enumerate() {
                if i > 0 {
                    o.push(',');
                }
                encode::slot_json(o, info, *level);
            }
            o.push(']');
        }))
    }
}
