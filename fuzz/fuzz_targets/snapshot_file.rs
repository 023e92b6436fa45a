//! Fuzz target: `aldb_fuzz::snapshot::snapshot_file` on each input (see its documentation).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| aldb_fuzz::snapshot::snapshot_file(data));
