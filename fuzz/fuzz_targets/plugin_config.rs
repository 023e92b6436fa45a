//! Fuzz target: `aldb_fuzz::plugin::plugin_config` on each input (see its documentation).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| aldb_fuzz::plugin::plugin_config(data));
