//! The config file: defaults, JSON5 syntax, unknown fields, bad values, and the offline checker.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use aldb_plugin::config::{
    DEFAULT_EXPECTED_ACCOUNTS, DEFAULT_KEEP_SLOTS, DEFAULT_MAX_PENDING_SLOTS, DEFAULT_REFRESH_SLOTS,
    DEFAULT_SNAPSHOT_EVERY, DEFAULT_SNAPSHOT_QUEUE, default_threads,
};
use aldb_plugin::{CommitmentLevel, Config, ConfigError};

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, Path::new("/etc/aldb"))
}

fn err(text: &str) -> String {
    match parse(text) {
        Ok(c) => panic!("accepted: {c:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn defaults_fill_every_optional_field() {
    let c = parse(r#"{"libpath": "libaldb_plugin.so", "snapshot_dir": "/var/aldb"}"#).unwrap();
    assert_eq!(c.libpath, PathBuf::from("/etc/aldb/libaldb_plugin.so"));
    assert_eq!(c.name, None);
    assert_eq!(c.snapshot_dir, PathBuf::from("/var/aldb"));
    assert_eq!(c.threads, default_threads());
    assert!(c.threads >= 1);
    assert_eq!(c.commitment, CommitmentLevel::Confirmed);
    assert_eq!(c.max_pending_slots, DEFAULT_MAX_PENDING_SLOTS);
    assert_eq!(c.max_pending_slots, 2048);
    assert_eq!(c.snapshot_every, DEFAULT_SNAPSHOT_EVERY);
    assert_eq!(c.snapshot_every, 1);
    assert_eq!(c.keep_slots, DEFAULT_KEEP_SLOTS);
    assert_eq!(c.keep_slots, 1000);
    assert_eq!(c.refresh_slots, DEFAULT_REFRESH_SLOTS);
    assert_eq!(c.refresh_slots, 512);
    assert_eq!(c.snapshot_queue, DEFAULT_SNAPSHOT_QUEUE);
    assert_eq!(c.snapshot_queue, 4);
    assert!(c.snapshot_direct_io);
    assert!(c.writer_config().direct_io);
    assert_eq!(c.expected_accounts, DEFAULT_EXPECTED_ACCOUNTS);
    assert_eq!(c.leaves_per_bucket, aldb_core::LEAVES_PER_BUCKET);
    assert!(!c.pin_workers && !c.adapter_config().engine.pin_workers);
    assert_eq!(c.adapter_config().engine, aldb_core::Config::for_leaves(DEFAULT_EXPECTED_ACCOUNTS, c.threads));
    assert_eq!(c.metrics_addr, None);
    assert_eq!(c.log_level, log::LevelFilter::Info);
}

#[test]
fn every_field_can_be_set_in_json5() {
    let c = parse(
        "{
            // agave reads these two
            libpath: '/opt/aldb/libaldb_plugin.so',
            name: 'aldb',
            snapshot_dir: 'snapshots',   // relative to the config file
            threads: 6,
            commitment: 'finalized',
            max_pending_slots: 4096,
            snapshot_every: 2,
            keep_slots: 100,
            refresh_slots: 64,
            snapshot_queue: 16,
            snapshot_direct_io: false,
            expected_accounts: 0x1000000,
            leaves_per_bucket: 16,
            pin_workers: true,
            metrics_addr: '0.0.0.0:9898',
            log_level: 'DEBUG',
        }",
    )
    .unwrap();
    assert_eq!(c.libpath, PathBuf::from("/opt/aldb/libaldb_plugin.so"));
    assert_eq!(c.name.as_deref(), Some("aldb"));
    assert_eq!(c.snapshot_dir, PathBuf::from("/etc/aldb/snapshots"));
    assert_eq!(c.threads, 6);
    assert_eq!(c.commitment, CommitmentLevel::Finalized);
    assert_eq!(c.max_pending_slots, 4096);
    assert_eq!((c.snapshot_every, c.keep_slots, c.refresh_slots, c.snapshot_queue), (2, 100, 64, 16));
    assert!(!c.snapshot_direct_io && !c.writer_config().direct_io);
    assert_eq!(c.expected_accounts, 1 << 24);
    assert_eq!((c.leaves_per_bucket, c.pin_workers), (16, true));
    let engine = c.adapter_config().engine;
    // 2^24 accounts at sixteen per bucket: 2^20 buckets, pinned.
    assert_eq!((engine.bucket_bits, engine.threads, engine.pin_workers), (20, 6, true));
    assert_eq!(c.metrics_addr, Some("0.0.0.0:9898".parse().unwrap()));
    assert_eq!(c.log_level, log::LevelFilter::Debug);
}

#[test]
fn unknown_fields_are_refused_by_name() {
    let e = err(r#"{"libpath": "x.so", "snapshot_dir": "s", "keep_slot": 10}"#);
    assert!(e.contains("keep_slot"), "{e}");
    assert!(e.contains("unknown field"), "{e}");
}

#[test]
fn required_fields_are_required() {
    let e = err(r#"{"snapshot_dir": "s"}"#);
    assert!(e.contains("libpath"), "{e}");
    let e = err(r#"{"libpath": "x.so"}"#);
    assert!(e.contains("snapshot_dir"), "{e}");
    let e = err(r#"{"libpath": " ", "snapshot_dir": "s"}"#);
    assert!(e.contains("`libpath`"), "{e}");
    let e = err(r#"{"libpath": "x.so", "snapshot_dir": ""}"#);
    assert!(e.contains("`snapshot_dir`"), "{e}");
}

#[test]
fn bad_values_name_the_field_and_the_rule() {
    let base = r#""libpath": "x.so", "snapshot_dir": "s""#;
    for (field, value, expect) in [
        ("threads", "0", "from 1 to"),
        ("threads", "100000", "from 1 to"),
        ("max_pending_slots", "0", "from 1 to"),
        ("snapshot_every", "0", "from 1 to"),
        ("snapshot_every", "1001", "from 1 to 1000,"),
        ("keep_slots", "0", "from 1 to"),
        ("keep_slots", "10000001", "from 1 to 10000000,"),
        ("keep_slots", "18446744073709551615", "from 1 to 10000000,"),
        ("refresh_slots", "0", "from 1 to"),
        ("refresh_slots", "10000001", "from 1 to 10000000,"),
        ("record_keep_slots", "0", "from 1 to"),
        ("record_keep_slots", "100000001", "from 1 to 100000000,"),
        ("snapshot_queue", "0", "from 1 to"),
        ("snapshot_queue", "257", "from 1 to 256,"),
        ("max_pending_slots", "1048577", "from 1 to 1048576,"),
        ("expected_accounts", "0", "from 1 to"),
        ("leaves_per_bucket", "0", "from 1 to 64,"),
        ("leaves_per_bucket", "65", "from 1 to 64,"),
        ("metrics_addr", r#""localhost""#, "IP address and port"),
        ("metrics_addr", r#""127.0.0.1""#, "IP address and port"),
        ("log_level", r#""loud""#, "one of off, error"),
    ] {
        let e = err(&format!("{{{base}, \"{field}\": {value}}}"));
        assert!(e.contains(&format!("`{field}`")) && e.contains(expect), "{field}={value}: {e}");
    }
    // The largest accepted values are accepted.
    let c = parse(&format!(
        "{{{base}, snapshot_every: 1000, keep_slots: 10000000, refresh_slots: 10000000, record_keep_slots: 100000000, \
         snapshot_queue: 256, max_pending_slots: 1048576}}"
    ))
    .unwrap();
    assert_eq!((c.snapshot_every, c.keep_slots, c.refresh_slots), (1000, 10_000_000, 10_000_000));
    assert_eq!((c.record_keep_slots, c.snapshot_queue, c.max_pending_slots), (100_000_000, 256, 1 << 20));
    // Wrong types and unknown enum values come from the parser, naming what it expected.
    let e = err(&format!("{{{base}, \"commitment\": \"recent\"}}"));
    assert!(e.contains("processed") && e.contains("confirmed") && e.contains("finalized"), "{e}");
    let e = err(&format!("{{{base}, \"commitment\": \"processed\", \"snapshot_every\": 2}}"));
    assert!(e.contains("snapshot_every") && e.contains("processed"), "{e}");
    let e = err(&format!("{{{base}, \"threads\": -1}}"));
    assert!(e.contains("invalid"), "{e}");
    let e = err(&format!("{{{base},\n \"keep_slots\": \"many\"}}"));
    assert!(e.contains("expected number at line 2") && e.contains("near `\"keep_slots\": \"many\"}`"), "{e}");
}

#[test]
fn syntax_errors_say_where() {
    let e = err("{libpath: 'x.so', snapshot_dir: 's',,}");
    assert!(e.contains("line 1"), "{e}");
    let e = err("");
    assert!(e.starts_with("invalid config"), "{e}");
}

#[test]
fn files_name_themselves_in_errors_and_resolve_relative_paths() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("aldb.json5");
    std::fs::write(&f, "{libpath: 'lib.so', snapshot_dir: 'snap'}").unwrap();
    let c = Config::from_file(&f).unwrap();
    assert_eq!(c.snapshot_dir, dir.path().join("snap"));
    assert_eq!(c.libpath, dir.path().join("lib.so"));

    std::fs::write(&f, "{libpath: 'lib.so', snapshot_dir: 'snap', threads: 0}").unwrap();
    let e = Config::from_file(&f).unwrap_err().to_string();
    assert!(e.contains(&f.display().to_string()) && e.contains("`threads`"), "{e}");

    let missing = dir.path().join("nope.json");
    let e = Config::from_file(&missing).unwrap_err();
    assert!(matches!(e, ConfigError::Read { .. }), "{e}");

    // A snapshot_dir that is a file is refused.
    std::fs::write(dir.path().join("snap"), b"").unwrap();
    std::fs::write(&f, "{libpath: 'lib.so', snapshot_dir: 'snap'}").unwrap();
    let e = Config::from_file(&f).unwrap_err().to_string();
    assert!(e.contains("not a directory"), "{e}");
}

fn check(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aldb-config-check")).args(args).output().expect("run aldb-config-check")
}

#[test]
fn the_checker_prints_the_effective_config() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("aldb.json5");
    std::fs::write(
        &f,
        "{libpath: 'lib.so', snapshot_dir: 'snap', commitment: 'finalized', metrics_addr: '127.0.0.1:9898'}",
    )
    .unwrap();
    let out = check(&[f.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["snapshot_dir"], dir.path().join("snap").to_str().unwrap());
    assert_eq!(v["commitment"], "finalized");
    assert_eq!(v["keep_slots"], 1000);
    assert_eq!(v["metrics_addr"], "127.0.0.1:9898");
    assert_eq!(v["log_level"], "info");
    assert!(v["threads"].as_u64().unwrap() >= 1);
    // Offline: nothing was created.
    assert!(!dir.path().join("snap").exists());
}

#[test]
fn the_checker_exits_2_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("aldb.json5");
    std::fs::write(&f, "{libpath: 'lib.so', snapshot_dir: 'snap', snapshot_every: 0}").unwrap();
    let out = check(&[f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("`snapshot_every`") && stderr.contains("from 1 to"), "{stderr}");
    assert!(out.stdout.is_empty());

    let out = check(&[dir.path().join("missing.json").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read config file"));

    let out = check(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("usage"));
}

/// A config file in `dir` with `extra` fields, and what `from_file` makes of it.
fn load(dir: &Path, extra: &str) -> Result<Config, String> {
    let f = dir.join("aldb.json5");
    std::fs::write(&f, format!("{{libpath: 'lib.so', {extra}}}")).unwrap();
    Config::from_file(&f).map_err(|e| e.to_string())
}

fn fifo(path: &Path) {
    let made = Command::new("mkfifo").arg(path).status().expect("run mkfifo");
    assert!(made.success());
}

#[test]
fn a_snapshot_dir_that_cannot_be_created_or_written_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path();
    std::fs::write(base.join("file"), b"").unwrap();

    // Under a regular file: nothing can be created there, not even by root.
    let e = load(base, "snapshot_dir: 'file/snap'").unwrap_err();
    assert!(e.contains("`snapshot_dir` cannot be created") && e.contains("is not a directory"), "{e}");
    let e = load(base, "snapshot_dir: 'file/a/b'").unwrap_err();
    assert!(e.contains("`snapshot_dir` cannot be created"), "{e}");
    // Under /proc, which takes no new files, not even from root.
    let e = load(base, "snapshot_dir: '/proc/aldb-test/snap'").unwrap_err();
    assert!(e.contains("`snapshot_dir` cannot be created: cannot create a file in /proc"), "{e}");
    // A read-only directory; root writes anyway, so that case is checked only where it applies.
    let ro = base.join("ro");
    std::fs::create_dir(&ro).unwrap();
    std::fs::set_permissions(&ro, std::os::unix::fs::PermissionsExt::from_mode(0o555)).unwrap();
    let root_writes = std::fs::write(ro.join("x"), b"").is_ok();
    if !root_writes {
        let e = load(base, "snapshot_dir: 'ro'").unwrap_err();
        assert!(e.contains("`snapshot_dir` is not writable"), "{e}");
        let e = load(base, "snapshot_dir: 'ro/snap'").unwrap_err();
        assert!(e.contains("`snapshot_dir` cannot be created"), "{e}");
    }
    std::fs::set_permissions(&ro, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();

    // A good one, missing: checked without being created, and no probe is left behind.
    let c = load(base, "snapshot_dir: 'new/snap'").unwrap();
    assert!(!base.join("new").exists());
    let mut before: Vec<_> = std::fs::read_dir(base).unwrap().map(|e| e.unwrap().file_name()).collect();
    before.sort();
    // The plugin's load creates it, probes it and leaves it empty.
    c.prepare_snapshot_dir().unwrap();
    assert!(base.join("new/snap").is_dir());
    assert_eq!(std::fs::read_dir(base.join("new/snap")).unwrap().count(), 0);
    assert!(!before.iter().any(|n| n.to_string_lossy().starts_with(".aldb-probe")));
}

#[test]
fn keypair_and_genesis_must_be_regular_files_of_bounded_size() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path();
    let h = aldb_verify::hash_to_base58(&[7; 32]);
    fifo(&base.join("fifo"));

    // Devices and FIFOs are refused before they are opened: no endless read, no blocking.
    for path in ["/dev/zero", "fifo"] {
        let e = load(base, &format!("snapshot_dir: 's', keypair: '{path}', genesis_hash: '{h}'")).unwrap_err();
        assert!(e.contains("`keypair`") && e.contains("not a regular file"), "{path}: {e}");
        let e = load(base, &format!("snapshot_dir: 's', genesis_path: '{path}'")).unwrap_err();
        assert!(e.contains("`genesis_path`") && e.contains("not a regular file"), "{path}: {e}");
    }
    // A directory is not a file either.
    let e = load(base, "snapshot_dir: 's', genesis_path: '.'").unwrap_err();
    assert!(e.contains("`genesis_path`") && e.contains("not a regular file"), "{e}");

    // Over-long regular files are refused after reading only the bound.
    let big = base.join("big.json");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(aldb_snapshot::records::Signer::MAX_KEYPAIR_FILE_BYTES + 1).unwrap();
    f.sync_all().unwrap();
    let e = load(base, &format!("snapshot_dir: 's', keypair: 'big.json', genesis_hash: '{h}'")).unwrap_err();
    assert!(e.contains("`keypair`") && e.contains("longer than 65536 bytes"), "{e}");
    let genesis = base.join("genesis.bin");
    let f = std::fs::File::create(&genesis).unwrap();
    f.set_len(aldb_plugin::config::MAX_GENESIS_FILE_BYTES).unwrap();
    f.sync_all().unwrap();
    // At the bound it is hashed, whole...
    let c = load(base, "snapshot_dir: 's', genesis_path: 'genesis.bin'").unwrap();
    let want: [u8; 32] = {
        use sha2::Digest;
        let mut hasher = sha2::Sha256::new();
        std::io::copy(&mut std::fs::File::open(&genesis).unwrap(), &mut hasher).unwrap();
        hasher.finalize().into()
    };
    assert_eq!(c.genesis_hash, Some(want));
    // ...one byte past it, refused.
    f.set_len(aldb_plugin::config::MAX_GENESIS_FILE_BYTES + 1).unwrap();
    f.sync_all().unwrap();
    let e = load(base, "snapshot_dir: 's', genesis_path: 'genesis.bin'").unwrap_err();
    assert!(
        e.contains("`genesis_path`") && e.contains("longer than 268435456 bytes") && e.contains("genesis_hash"),
        "{e}"
    );
}

#[test]
fn the_config_file_itself_is_read_with_a_bound() {
    let dir = tempfile::tempdir().unwrap();
    // /dev/zero as the config: a bounded read, then a clear refusal.
    let e = Config::from_file(Path::new("/dev/zero")).unwrap_err();
    assert!(matches!(e, ConfigError::Read { .. }) && e.to_string().contains("longer than 1048576 bytes"), "{e}");
    // A pipe with a writer is fine: process substitution hands the checker one.
    let pipe = dir.path().join("pipe");
    fifo(&pipe);
    let snap = dir.path().join("snap");
    let text = format!("{{libpath: 'lib.so', snapshot_dir: '{}'}}", snap.display());
    let writer = {
        let pipe = pipe.clone();
        std::thread::spawn(move || std::fs::write(pipe, text).unwrap())
    };
    let c = Config::from_file(&pipe).unwrap();
    writer.join().unwrap();
    assert_eq!(c.snapshot_dir, snap);
    // Outside text in messages is cut to an excerpt.
    let e = load(dir.path(), &format!("snapshot_dir: 's', metrics_addr: '{}'", "9".repeat(100_000))).unwrap_err();
    assert!(e.contains("\"9999999999999999…\" (100000 bytes)") && e.len() < 500, "{e}");
    let e = load(dir.path(), &format!("snapshot_dir: 's', {}: 1", "k".repeat(100_000))).unwrap_err();
    assert!(e.contains("unknown field") && e.len() < 1000, "{} bytes", e.len());
}

#[test]
fn the_checker_refuses_what_the_plugin_could_not_use() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("aldb.json5");
    std::fs::write(dir.path().join("file"), b"").unwrap();
    for (extra, want) in [
        ("snapshot_dir: 'file/snap'", "`snapshot_dir` cannot be created"),
        ("snapshot_dir: 's', genesis_path: '/dev/zero'", "not a regular file"),
        ("snapshot_dir: 's', keep_slots: 100000000", "`keep_slots` must be from 1 to 10000000"),
    ] {
        std::fs::write(&f, format!("{{libpath: 'lib.so', {extra}}}")).unwrap();
        let out = check(&[f.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{extra}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(want), "{extra}: {stderr}");
    }
}
