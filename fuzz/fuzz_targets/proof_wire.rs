//! Fuzz target: `aldb_fuzz::verify::proof_wire` on each input (see its documentation).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| aldb_fuzz::verify::proof_wire(data));
