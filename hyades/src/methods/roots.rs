//! `getStateRoot` and `getStateRoots`: the roots of served slots.

use aldb_format::{QueryError, SlotInfo};
use serde_json::{Value, json};

use super::params::{at_most, config_level, opt_slot, slot_param};
use crate::encode;
use crate::levels::{Level, Served};
use crate::rpc::{Rpc, RpcError, codes};

impl Rpc {
    /// `getStateRoot([slot?, {"commitment"?}])`.
    pub(crate) fn get_state_root(&self, params: &[Value]) -> Result<String, RpcError> {
        at_most(params, 2)?;
        // `[config]` alone asks for the newest slot at a level, as Solana's methods take one.
        let (slot, config) = match params.first() {
            Some(Value::Object(_)) if params.len() == 1 => (None, params.first()),
            first => (opt_slot(first, "slot")?, params.get(1)),
        };
        let (info, level) = self.resolve(slot, config_level(config)?)?;
        Ok(encode::envelope(info.slot, |o| encode::slot_json(o, &info, level)))
    }

    /// `getStateRoots([start, end])`.
    pub(crate) fn get_state_roots(&self, params: &[Value]) -> Result<String, RpcError> {
        at_most(params, 2)?;
        let start = slot_param(params.first(), "startSlot")?;
        let end = slot_param(params.get(1), "endSlot")?;
        if start > end {
            return Err(RpcError::invalid_params(format!("startSlot {start} is after endSlot {end}")));
        }
        let span = (end - start).saturating_add(1);
        if span > self.limits.max_slot_range {
            return Err(RpcError::with_data(
                codes::INVALID_PARAMS,
                format!("Invalid params: range of {span} slots exceeds the limit of {}", self.limits.max_slot_range),
                json!({"max": self.limits.max_slot_range, "got": span}),
            ));
        }
        let newest = self.hyades.latest().ok_or_else(|| self.query_error(QueryError::NothingPublished))?;
        let view = self.levels.view();
        let newest = view.newest(Level::Processed).unwrap_or(newest.slot);
        // Abandoned banks and stale copies are left out: their roots are never served.
        let roots: Vec<(SlotInfo, Option<Level>)> = self
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
