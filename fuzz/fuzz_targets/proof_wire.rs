//! `Proof::from_bytes` on arbitrary bytes: it must never panic, and whatever it accepts must
//! encode back to exactly the same bytes (the wire format is canonical).
#![no_main]

use aldb_verify::Proof;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(proof) = Proof::from_bytes(data) {
        assert_eq!(proof.to_bytes(), data, "accepted bytes do not re-encode to themselves");
        assert_eq!(proof.encoded_len(), data.len());
        // Verification must not panic on anything the decoder lets through.
        let _ = proof.verify_path(&[0; 32], &[0; 32]);
    }
});
