//! Fuzz target: `aldb_fuzz::snapshot::record_log` on each input (see its documentation).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| aldb_fuzz::snapshot::record_log(data));
