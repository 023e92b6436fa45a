//! `getRootRecord` and `getRootRecords`: root records from the record log.

use serde_json::{Value, json};

use super::params::{at_most, config_commitment, opt_slot, slot_param};
use crate::encode;
use crate::records::RecordQueryError;
use crate::rpc::{Hold, Rpc, RpcError, busy_error, codes};

impl Rpc {
    /// `getRootRecord([slot?, {"commitment"?}])`.
    pub(crate) fn get_root_record(&self, params: &[Value]) -> Result<String, RpcError> {
        at_most(params, 2)?;
        // `[config]` alone asks for the newest record, as Solana's methods take a config.
        let (slot, config) = match params.first() {
            Some(Value::Object(_)) if params.len() == 1 => (None, params.first()),
            first => (opt_slot(first, "slot")?, params.get(1)),
        };
        let level = config_commitment(config)?;
        let (newest, entry) = match slot {
            Some(slot) => self.records.get(slot, level).map_err(RecordQueryError::to_rpc)?,
            None => {
                let e = self.records.latest(level).ok_or_else(|| RecordQueryError::NothingPublished.to_rpc())?;
                (e.slot, e)
            }
        };
        self.metrics.records_served.inc();
        Ok(encode::envelope(newest, |o| o.push_str(&entry.json)))
    }

    /// `getRootRecords([startSlot, endSlot, {"commitment"?}])`.
    pub(crate) fn get_root_records(
        &self,
        params: &[Value],
        budget: usize,
        hold: &mut Hold<'_>,
    ) -> Result<String, RpcError> {
        at_most(params, 3)?;
        let level = config_commitment(params.get(2))?;
        let start = slot_param(params.first(), "startSlot")?;
        let end = slot_param(params.get(1), "endSlot")?;
        if start > end {
            return Err(RpcError::invalid_params(format!("startSlot {start} is after endSlot {end}")));
        }
        if end - start > self.limits.max_record_range {
            return Err(RpcError::with_data(
                codes::INVALID_PARAMS,
                format!(
                    "Invalid params: endSlot - startSlot = {} exceeds the limit of {}",
                    end - start,
                    self.limits.max_record_range
                ),
                json!({"max": self.limits.max_record_range, "got": end - start}),
            ));
        }
        let (newest, entries) = self.records.slots(start, end, level).map_err(RecordQueryError::to_rpc)?;
        // The documents are already serialised: their lengths are the answer's size.
        let size = entries.iter().fold(64usize, |n, e| n.saturating_add(e.json.len() + 1));
        if size > budget {
            return Err(self.too_large_error(&format!("{} root records", entries.len())));
        }
        if !hold.take(size) {
            return Err(busy_error());
        }
        self.metrics.records_served.inc_by(entries.len() as u64);
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
