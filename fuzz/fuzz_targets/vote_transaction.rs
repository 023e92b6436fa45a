//! Fuzz target: `aldb_fuzz::votes::vote_transaction` on each input (see its documentation).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| aldb_fuzz::votes::vote_transaction(data));
