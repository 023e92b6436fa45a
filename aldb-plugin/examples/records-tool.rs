//! A small helper for checking root records against a real validator (see
//! `scripts/validator-records.sh`).
//!
//! ```text
//! records-tool dump SNAPSHOT_DIR  print every logged record in the JSON form of SPEC §9.5, after
//!                                 checking each record hash and attestation
//! ```
//!
//! Keys come from `aldb keygen`.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::Path;
use std::process::ExitCode;

use aldb_format::records::RecordLogReader;
use aldb_verify::record_json::attested_record_to_json_value;

fn dump(dir: &Path) -> Result<(), String> {
    let mut reader = RecordLogReader::new(dir);
    let logged = reader.refresh().map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(logged.len());
    for r in &logged {
        if r.record.hash() != r.record_hash {
            return Err(format!("slot {}: logged record hash does not match the record", r.record.slot));
        }
        for a in &r.attestations {
            a.verify(&r.record_hash).map_err(|e| {
                format!("slot {}: attestation by {}: {e}", r.record.slot, aldb_verify::hash_to_base58(&a.identity))
            })?;
        }
        out.push(attested_record_to_json_value(&r.record, &r.attestations));
    }
    println!("{}", serde_json::Value::Array(out));
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["dump", dir] => dump(Path::new(dir)),
        _ => Err("usage: records-tool dump SNAPSHOT_DIR".to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
