//! The plugin's JSON5 config parser.
//!
//! `plugin_config` is a fuzz target body: it must not panic on any input. The fuzz target calls
//! it, and aldb-plugin's `fuzz_regressions` test replays the checked-in inputs through it.

use std::path::Path;

use aldb_plugin::config::Config;
use serde_json::Value;

/// `Config::parse`, parse only: documents naming `keypair` or `genesis_path` are skipped, since
/// those make the parser read the named file (any path the input spells). What it accepts is
/// within the documented bounds and prints as JSON.
pub fn plugin_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(Value::Object(fields)) = json5::from_str::<Value>(text) else { return };
    if fields.contains_key("keypair") || fields.contains_key("genesis_path") {
        return;
    }
    let Ok(config) = Config::parse(text, Path::new("/nonexistent/aldb-fuzz")) else { return };
    assert!(config.threads >= 1);
    assert!(config.max_pending_slots >= 1 && config.snapshot_every >= 1 && config.keep_slots >= 1);
    let json = config.to_json();
    assert!(serde_json::from_str::<Value>(&json).is_ok(), "to_json is not JSON: {json}");
}
