//! The sink's config file: what it accepts, and that every mistake is a clean error naming the
//! file and the field, before anything is written.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use aldb_bank::{BankError, BankRoots, RecordLevel, SinkConfig, genesis_hash_of_file};
use aldb_snapshot::records::Signer;

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn keypair(dir: &Path) {
    let mut full = vec![5u8; 32];
    full.extend_from_slice(&Signer::from_seed(&[5; 32]).identity());
    std::fs::write(dir.join("id.json"), serde_json::to_string(&full).unwrap()).unwrap();
}

#[test]
fn a_full_config_resolves_paths_the_key_and_the_genesis_hash() {
    let tmp = tempfile::tempdir().unwrap();
    keypair(tmp.path());
    std::fs::create_dir(tmp.path().join("ledger")).unwrap();
    std::fs::write(tmp.path().join("ledger/genesis.bin"), b"not really a genesis, but bytes to hash").unwrap();
    let path = write(
        tmp.path(),
        "bank.json",
        r#"{"snapshot_dir": "snaps", "keep_slots": 50, "ledger_path": "ledger", "threads": 2,
            "queue_bound": 8, "records": {"keypair": "id.json", "levels": ["finalized"]},
            "metrics_addr": "127.0.0.1:9101", "hold_for_shipper": true, "pin_workers": true}"#,
    );
    let c = SinkConfig::from_file(&path).unwrap();
    assert_eq!(c.snapshot_dir, tmp.path().join("snaps"));
    assert_eq!(c.metrics_addr, Some(std::net::SocketAddr::from(([127, 0, 0, 1], 9101))));
    assert_eq!((c.keep_slots, c.threads, c.queue_bound), (50, Some(2), 8));
    assert!(c.hold_for_shipper && c.pin_workers);
    assert_eq!(c.genesis_hash, Some(genesis_hash_of_file(&tmp.path().join("ledger/genesis.bin")).unwrap()));
    let r = c.records.as_ref().unwrap();
    assert_eq!(
        (r.keypair.as_deref(), r.levels.as_slice()),
        (Some(tmp.path().join("id.json").as_path()), &[RecordLevel::Finalized][..])
    );

    // The smallest config: a directory, no records.
    let min = SinkConfig::from_file(&write(tmp.path(), "min.json", r#"{"snapshot_dir": "/abs/snaps"}"#)).unwrap();
    assert_eq!(min, SinkConfig::new("/abs/snaps"));
    assert!(!min.hold_for_shipper, "retention does not wait for a shipper unless asked");
    assert!(!min.pin_workers, "the workers are left to the scheduler unless asked");
    let off = write(tmp.path(), "off.json", r#"{"snapshot_dir": "/abs/snaps", "hold_for_shipper": false}"#);
    assert_eq!(SinkConfig::from_file(&off).unwrap(), min);
}

#[test]
fn every_mistake_is_an_error_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    keypair(tmp.path());
    let genesis = bs58::encode([3u8; 32]).into_string();
    let cases = [
        ("{\"snapshot_dir\": \"s\", \"keep_slot\": 5}", "keep_slot"),
        ("{\"snapshot_dir\": \"s\", \"records\": {\"keypair\": \"id.json\", \"level\": []}}", "level"),
        ("{\"snapshot_dir\": \"s\"", "invalid"),
        ("{\"keep_slots\": 5}", "snapshot_dir"),
        ("{\"snapshot_dir\": \"s\", \"genesis_hash\": \"0OIl\"}", "genesis_hash"),
        ("{\"snapshot_dir\": \"s\", \"genesis_hash\": \"3yZe7d\"}", "genesis_hash"),
        ("{\"snapshot_dir\": \"s\", \"records\": {}}", "records"),
        (&format!("{{\"snapshot_dir\": \"s\", \"genesis_hash\": \"{genesis}\", \"ledger_path\": \"l\"}}"), "both"),
        (
            &format!(
                "{{\"snapshot_dir\": \"s\", \"genesis_hash\": \"{genesis}\", \"records\": {{\"keypair\": \"nope.json\"}}}}"
            ),
            "keypair",
        ),
        (
            &format!("{{\"snapshot_dir\": \"s\", \"genesis_hash\": \"{genesis}\", \"records\": {{\"levels\": []}}}}"),
            "levels",
        ),
        (
            &format!(
                "{{\"snapshot_dir\": \"s\", \"genesis_hash\": \"{genesis}\", \"records\": {{\"levels\": [\"processed\"]}}}}"
            ),
            "processed",
        ),
        ("{\"snapshot_dir\": \"s\", \"ledger_path\": \"no-ledger\"}", "genesis.bin"),
        ("{\"snapshot_dir\": \"s\", \"keep_slots\": 0}", "keep_slots"),
        ("{\"snapshot_dir\": \"s\", \"queue_bound\": 0}", "queue_bound"),
        ("{\"snapshot_dir\": \"s\", \"threads\": 0}", "threads"),
        ("{\"snapshot_dir\": \"\"}", "snapshot_dir"),
        ("{\"snapshot_dir\": \"s\", \"metrics_addr\": \"localhost\"}", "metrics_addr"),
        ("{\"snapshot_dir\": \"s\", \"metrics_addr\": \"127.0.0.1:99999\"}", "metrics_addr"),
        ("{\"snapshot_dir\": \"s\", \"metrics_addr\": 9101}", "expected a string"),
        ("{\"snapshot_dir\": \"s\", \"metrics_port\": 9101}", "metrics_port"),
        ("{\"snapshot_dir\": \"s\", \"hold_for_shipper\": \"yes\"}", "expected a boolean"),
        ("{\"snapshot_dir\": \"s\", \"hold_for_shipper\": 1}", "expected a boolean"),
        ("{\"snapshot_dir\": \"s\", \"pin_workers\": \"on\"}", "expected a boolean"),
        ("{\"snapshot_dir\": \"s\", \"hold_for_shiper\": true}", "hold_for_shiper"),
        // Where the plugin's config has it; here it is the sink's, not the records'.
        (
            &format!(
                "{{\"snapshot_dir\": \"s\", \"genesis_hash\": \"{genesis}\", \"records\": {{\"hold_for_shipper\": true}}}}"
            ),
            "hold_for_shipper",
        ),
    ];
    for (i, (text, needle)) in cases.iter().enumerate() {
        let path = write(tmp.path(), &format!("c{i}.json"), text);
        let e = SinkConfig::from_file(&path).expect_err(text).to_string();
        assert!(e.contains(needle), "{text}: {e}");
        assert!(e.contains(&format!("c{i}.json")), "the error names the file: {e}");
    }
    let missing = SinkConfig::from_file(&tmp.path().join("absent.json")).unwrap_err();
    assert!(missing.to_string().contains("cannot read"), "{missing}");
}

#[test]
fn a_sink_that_cannot_start_is_a_clean_error() {
    let tmp = tempfile::tempdir().unwrap();
    // The snapshot directory's place is taken by a file.
    let file = write(tmp.path(), "taken", "x");
    let e = BankRoots::with_sink(&SinkConfig::new(&file)).unwrap_err();
    assert!(matches!(e, BankError::SinkStart(_)), "{e}");
    assert!(e.to_string().contains("taken"), "{e}");
}
