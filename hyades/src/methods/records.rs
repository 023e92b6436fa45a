//! `getRootRecord` and `getRootRecords`: root records from the record log.

use aldb_verify::Commitment;
use serde_json::{Value, json};

use super::params::{at_most, config_commitment, opt_slot, slot_param};
use super::{Call, Class, Handler};
use crate::encode;
use crate::records::RecordQueryError;
use crate::rpc::{Limits, RpcError, busy_error, codes};

/// `getRootRecord([slot?, {"commitment"?}])` or `getRootRecord([{"commitment"?}])`.
pub(crate) struct GetRootRecord;

impl Handler for GetRootRecord {
    const NAME: &'static str = "getRootRecord";
    const CLASS: Class = Class::Light;
    /// The slot (the newest record when `None`) and the record level asked for.
    type Params = (Option<u64>, Option<Commitment>);

    fn params(params: &[Value], _: &Limits) -> Result<Self::Params, RpcError> {
        at_most(params, 2)?;
        // `[config]` alone asks for the newest record, as Solana's methods take a config.
        let (slot, config) = match params.first() {
            Some(Value::Object(_)) if params.len() == 1 => (None, params.first()),
            first => (opt_slot(first, "slot")?, params.get(1)),
        };
        Ok((slot, config_commitment(config)?))
    }

    fn run((slot, level): Self::Params, call: &mut Call<'_, '_>) -> Result<String, RpcError> {
        let rpc = call.rpc;
        let (newest, entry) = match slot {
            Some(slot) => rpc.records.get(slot, level).map_err(RecordQueryError::to_rpc)?,
            None => {
                let e = rpc.records.latest(level).ok_or_else(|| RecordQueryError::NothingPublished.to_rpc())?;
                (e.slot, e)
            }
        };
        rpc.metrics.records_served.inc();
        Ok(encode::envelope(newest, |o| o.push_str(&entry.json)))
    }
}

/// `getRootRecords([startSlot, endSlot, {"commitment"?}])`.
pub(crate) struct GetRootRecords;

impl Handler for GetRootRecords {
    const NAME: &'static str = "getRootRecords";
    const CLASS: Class = Class::Heavy;
    /// The inclusive range (`end - start` at most [`Limits::max_record_range`]) and the level.
    type Params = (u64, u64, Option<Commitment>);

    fn params(params: &[Value], limits: &Limits) -> Result<Self::Params, RpcError> {
        at_most(params, 3)?;
        let level = config_commitment(params.get(2))?;
        let start = slot_param(params.first(), "startSlot")?;
        let end = slot_param(params.get(1), "endSlot")?;
        if start > end {
            return Err(RpcError::invalid_params(format!("startSlot {start} is after endSlot {end}")));
        }
        if end - start > limits.max_record_range {
            return Err(RpcError::with_data(
                codes::INVALID_PARAMS,
                format!(
                    "Invalid params: endSlot - startSlot = {} exceeds the limit of {}",
                    end - start,
                    limits.max_record_range
                ),
                json!({"max": limits.max_record_range, "got": end - start}),
            ));
        }
        Ok((start, end, level))
    }

    fn run((start, end, level): Self::Params, call: &mut Call<'_, '_>) -> Result<String, RpcError> {
        let rpc = call.rpc;
        let (newest, entries) = rpc.records.slots(start, end, level).map_err(RecordQueryError::to_rpc)?;
        // The documents are already serialised: their lengths are the answer's size.
        let size = entries.iter().fold(64usize, |n, e| n.saturating_add(e.json.len() + 1));
        if size > call.budget {
            return Err(rpc.too_large_error(&format!("{} root records", entries.len())));
        }
        if !call.hold(size) {
            return Err(busy_error());
        }
        rpc.metrics.records_served.inc_by(entries.len() as u64);
        Ok(encode::envelope(newest, |o| {
            o.push('[');
            for (i, e) in entries.iter().enumerate() {
                if i > 0 {
                    o.push(',');
                }
                o.push_str(&e.json);
            }
            o.push(']');
        }))
    }
}
