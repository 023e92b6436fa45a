//! `Proof::from_json_str` on arbitrary text: it must never panic, and whatever it accepts must
//! survive a trip through its canonical JSON and through the wire format unchanged.
#![no_main]

use aldb_verify::{hash_from_base58, hash_to_base58, Proof};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(proof) = Proof::from_json_str(text) {
        let canonical = proof.to_json_string();
        assert_eq!(Proof::from_json_str(&canonical).as_ref(), Ok(&proof));
        assert_eq!(Proof::from_bytes(&proof.to_bytes()).as_ref(), Ok(&proof));
        let _ = proof.verify_path(&[0; 32], &[0; 32]);
    }
    // The base58 helper on its own: anything it accepts encodes back to the same text.
    if let Ok(hash) = hash_from_base58(text) {
        assert_eq!(hash_to_base58(&hash), text);
    }
});
