//! Fuzz target: `aldb_fuzz::relayer::relayer_config` on each input (see its documentation).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| aldb_fuzz::relayer::relayer_config(data));
