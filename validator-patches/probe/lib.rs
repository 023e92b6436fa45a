//! aldb-block-metadata-probe: a geyser plugin built against the patched interface that writes
//! what the series adds, one JSON line per event, to `<config file>.jsonl`:
//!
//! - `{"slot":S,"parent_slot":P,"bank_hash":..,"parent_bank_hash":..,"signature_count":N,
//!   "last_blockhash":..,"aldb_root":..|null,"h":..|null,"next_set_hash":..|null,
//!   "next_set":..|null}` for each block metadata V0_0_5 (hashes and the next epoch's set
//!   encoding in hex, the set `null` unless both aldb features are active), `{"slot":S,"version":"older"}` for an older version;
//! - `{"end_of_startup":true}`;
//! - `{"slot":S,"status":"rooted"}` and the other slot statuses.
//!
//! Its config must set `"block_metadata_version": 5`. `scripts/build-patched-validator.sh`
//! builds it beside the validator (same compiler, same crates); it is how the series' interface
//! changes are checked end to end.

use std::fs::File;
use std::io::{LineWriter, Write};
use std::sync::Mutex;

use agave_geyser_plugin_interface::geyser_plugin_interface::{
    GeyserPlugin, GeyserPluginError, ReplicaBlockInfoVersions, Result, SlotStatus,
};

#[derive(Debug, Default)]
struct Probe {
    out: Mutex<Option<LineWriter<File>>>,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl Probe {
    fn line(&self, s: String) {
        let mut out = self.out.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(f) = out.as_mut() {
            // A probe must not stop the validator; a lost line shows up in the check.
            let _ = writeln!(f, "{s}");
        }
    }
}

impl GeyserPlugin for Probe {
    fn name(&self) -> &'static str {
        "aldb-block-metadata-probe"
    }

    fn on_load(&mut self, config_file: &str, _is_reload: bool) -> Result<()> {
        let f = File::create(format!("{config_file}.jsonl"))
            .map_err(|e| GeyserPluginError::Custom(Box::new(e)))?;
        *self.out.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(LineWriter::new(f));
        Ok(())
    }

    fn notify_end_of_startup(&self) -> Result<()> {
        self.line("{\"end_of_startup\":true}".to_string());
        Ok(())
    }

    fn update_slot_status(&self, slot: u64, _parent: Option<u64>, status: &SlotStatus) -> Result<()> {
        self.line(format!("{{\"slot\":{slot},\"status\":\"{}\"}}", status.as_str()));
        Ok(())
    }

    fn notify_block_metadata(&self, info: ReplicaBlockInfoVersions) -> Result<()> {
        let line = match info {
            ReplicaBlockInfoVersions::V0_0_5(b) => {
                let (root, h) = match &b.aldb {
                    Some(a) => (format!("\"{}\"", hex(&a.state_root)), format!("\"{}\"", hex(&a.hash_before_root))),
                    None => ("null".to_string(), "null".to_string()),
                };
                let (set_hash, set) = match &b.aldb_next_set {
                    Some(s) => (format!("\"{}\"", hex(&s.hash)), format!("\"{}\"", hex(s.encoding))),
                    None => ("null".to_string(), "null".to_string()),
                };
                format!(
                    "{{\"slot\":{},\"parent_slot\":{},\"bank_hash\":\"{}\",\"parent_bank_hash\":\"{}\",\
                     \"signature_count\":{},\"last_blockhash\":\"{}\",\"aldb_root\":{root},\"h\":{h},\
                     \"next_set_hash\":{set_hash},\"next_set\":{set}}}",
                    b.slot,
                    b.parent_slot,
                    hex(&b.bank_hash),
                    hex(&b.parent_bank_hash),
                    b.signature_count,
                    hex(&b.last_blockhash),
                )
            }
            ReplicaBlockInfoVersions::V0_0_4(b) => format!("{{\"slot\":{},\"version\":\"older\"}}", b.slot),
            _ => "{\"version\":\"older\"}".to_string(),
        };
        self.line(line);
        Ok(())
    }

    fn account_data_notifications_enabled(&self) -> bool {
        false
    }

    fn account_data_snapshot_notifications_enabled(&self) -> bool {
        false
    }
}

/// The plugin constructor agave's plugin manager calls.
///
/// # Safety
/// Called once by the plugin manager, which takes ownership of the returned box.
#[unsafe(no_mangle)]
#[allow(improper_ctypes_definitions)]
pub unsafe extern "C" fn _create_plugin() -> *mut dyn GeyserPlugin {
    Box::into_raw(Box::new(Probe::default()))
}
