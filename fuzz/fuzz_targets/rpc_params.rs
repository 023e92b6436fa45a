//! Fuzz target: `aldb_fuzz::rpc::rpc_params` on each input (see its documentation).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| aldb_fuzz::rpc::rpc_params(data));
