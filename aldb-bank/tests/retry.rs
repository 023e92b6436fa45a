//! A write that fails for a reason that passes is tried again, and the directory ends up exactly
//! as a run that never failed leaves it. The fault is real: the process is let open no more file
//! descriptors (`EMFILE`, as a validator near its descriptor limit sees), so creating the next
//! file fails, and is let open them again later. The descriptor limit is per process, so the tests
//! of this file run one at a time and no other test shares the process.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aldb_bank::{BankMeta, BankRoots, RecordLevel, RecordsConfig, SinkConfig, SinkStats};
use aldb_format::SnapshotReader;
use aldb_testkit::{State, apply, as_writes, naive_root, random::bank_writes, refs};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The descriptor limit is the process's: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// While alive, opening a file fails with `EMFILE`: the soft descriptor limit is lowered to the
/// lowest free descriptor. Dropping it restores the limit.
struct NoDescriptors {
    old: libc::rlimit,
}

impl NoDescriptors {
    fn new() -> Self {
        let lowest = std::fs::File::open("/dev/null").unwrap().as_raw_fd();
        let mut old = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: getrlimit writes one rlimit into the struct it is given, which lives here.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut old) }, 0);
        let low = libc::rlimit { rlim_cur: lowest as libc::rlim_t, rlim_max: old.rlim_max };
        // SAFETY: setrlimit only reads the struct it is given; lowering the soft limit is allowed.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &low) }, 0);
        let e = std::fs::File::open("/dev/null").expect_err("no descriptor is left");
        assert_eq!(e.raw_os_error(), Some(libc::EMFILE), "{e}");
        Self { old }
    }
}

impl Drop for NoDescriptors {
    fn drop(&mut self) {
        // SAFETY: as above; the old soft limit is at most the hard limit, which did not change.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &self.old) }, 0);
    }
}

fn config(dir: &Path) -> SinkConfig {
    SinkConfig {
        records: Some(RecordsConfig {
            keypair: None,
            levels: vec![RecordLevel::Confirmed, RecordLevel::Finalized],
            keep_slots: 1 << 20,
        }),
        genesis_hash: Some([1; 32]),
        threads: Some(2),
        // Room for every bank of the run: no bank is merged, so both runs write the same files.
        queue_bound: 4096,
        direct_io: false,
        ..SinkConfig::new(dir)
    }
}

/// A module with a sink and one without, driven alike: every root is checked against both the
/// plain module and the naive model.
struct Pair {
    with: BankRoots,
    without: BankRoots,
    states: BTreeMap<u64, State>,
    roots: BTreeMap<u64, [u8; 32]>,
    rng: ChaCha8Rng,
}

impl Pair {
    fn new(config: &SinkConfig) -> Self {
        let mut p = Self {
            with: BankRoots::with_sink(config).unwrap(),
            without: BankRoots::new(1),
            states: BTreeMap::new(),
            roots: BTreeMap::new(),
            rng: ChaCha8Rng::seed_from_u64(11),
        };
        let mut genesis = State::new();
        let g = bank_writes(&mut p.rng, &genesis, 200);
        apply(&mut genesis, &g);
        let all = as_writes(&genesis);
        let root = p.with.build_base(0, &refs(&all)).unwrap();
        assert_eq!(root, p.without.build_base(0, &refs(&all)).unwrap());
        assert_eq!(root, naive_root(&genesis));
        p.with.bank_hash(0, meta(0)).unwrap();
        p.states.insert(0, genesis);
        p.roots.insert(0, root);
        p
    }

    fn freeze(&mut self, slot: u64, parent: u64) {
        let mut state = self.states[&parent].clone();
        let n = self.rng.random_range(1..30);
        let w = bank_writes(&mut self.rng, &state, n);
        apply(&mut state, &w);
        let root = self.with.freeze(slot, parent, &refs(&w)).unwrap();
        assert_eq!(root, self.without.freeze(slot, parent, &refs(&w)).unwrap(), "slot {slot}");
        assert_eq!(root, naive_root(&state), "slot {slot}");
        self.with.bank_hash(slot, meta(slot)).unwrap();
        self.states.insert(slot, state);
        self.roots.insert(slot, root);
    }

    fn confirm_and_root(&mut self, slot: u64) {
        self.with.confirmed(slot).unwrap();
        assert_eq!(self.with.root(slot).unwrap(), self.without.root(slot).unwrap());
    }

    fn dead(&mut self, slot: u64) {
        assert_eq!(self.with.dead(slot).unwrap(), self.without.dead(slot).unwrap());
    }

    fn stats(&self) -> Arc<SinkStats> {
        self.with.sink_stats().unwrap()
    }
}

fn meta(slot: u64) -> BankMeta {
    let tag = |t: u8| {
        let mut b = [t; 32];
        b[..8].copy_from_slice(&slot.to_le_bytes());
        b
    };
    BankMeta { bank_hash: tag(1), h: tag(2), blockhash: tag(3), block_height: slot, parent_bank_hash: tag(4) }
}

/// Waits (up to a minute, which only a broken sink needs) until `done` holds.
fn wait_for(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every file under `dir`, by relative path, with its bytes.
fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                out.insert(path.strip_prefix(root).unwrap().to_path_buf(), std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// `GET /metrics` as `name -> value` for the unlabelled samples.
fn scrape(addr: SocketAddr) -> BTreeMap<String, f64> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let body = text.split_once("\r\n\r\n").unwrap().1;
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_string(), v.parse().unwrap()))
        .collect()
}

/// The run both tests compare: a chain, a fork, a dead bank, roots. With `fault`, descriptors run
/// out right after slot 5 is written and come back once the sink has tried slot 6 twice more.
fn run(dir: &Path, fault: bool) -> Pair {
    let mut config = config(dir);
    if fault {
        config.metrics_addr = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    }
    let mut p = Pair::new(&config);
    for slot in 1..=5 {
        p.freeze(slot, slot - 1);
    }
    p.confirm_and_root(3);
    p.with.flush_sink();
    let stats = p.stats();
    let guard = fault.then(NoDescriptors::new);
    // Slot 6 is the first write to fail: it is held, and everything after it waits in the queue.
    p.freeze(6, 5);
    p.freeze(7, 6);
    p.freeze(8, 7);
    p.freeze(9, 8);
    p.freeze(10, 8);
    p.freeze(11, 9);
    p.dead(10);
    p.confirm_and_root(7);
    for slot in 12..=16 {
        p.freeze(slot, slot - 1);
    }
    if let Some(guard) = guard {
        wait_for("two more tries", || SinkStats::get(&stats.write_retries) >= 2);
        assert_eq!(SinkStats::get(&stats.write_failing), 1);
        assert!(stats.failure_streak().is_some());
        assert_eq!(SinkStats::get(&stats.write_recoveries), 0);
        drop(guard);
    }
    for slot in 17..=20 {
        p.freeze(slot, slot - 1);
    }
    p.confirm_and_root(18);
    p.with.flush_sink();
    p
}

#[test]
fn a_write_that_fails_for_a_while_is_written_as_if_it_never_had() {
    let _serial = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let tmp = tempfile::tempdir().unwrap();
    let (control_dir, faulty_dir) = (tmp.path().join("control"), tmp.path().join("faulty"));
    let control_run = run(&control_dir, false);
    let faulty_run = run(&faulty_dir, true);
    let (control, stats, roots) = (control_run.stats(), faulty_run.stats(), &faulty_run.roots);

    // The same roots: the failure changed none.
    assert_eq!(*roots, control_run.roots);
    assert_eq!(SinkStats::get(&control.write_retries), 0);
    assert!(SinkStats::get(&stats.write_retries) >= 2);
    assert_eq!(SinkStats::get(&stats.write_recoveries), 1);
    for s in [&stats, &control] {
        assert_eq!(SinkStats::get(&s.banks_refused), 0);
        assert_eq!(SinkStats::get(&s.banks_lost), 0);
        assert_eq!(SinkStats::get(&s.banks_merged), 0);
        assert_eq!(SinkStats::get(&s.retries_abandoned), 0);
        assert_eq!(SinkStats::get(&s.write_failing), 0);
        assert_eq!(SinkStats::get(&s.record_errors), 0);
        assert!(s.failure_streak().is_none());
    }

    // The same files, byte for byte: snapshot files under the same names, the journal, the
    // records. No temporary file of the failed tries is left.
    let (want, got) = (tree(&control_dir), tree(&faulty_dir));
    assert_eq!(got.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>());
    for (name, bytes) in &want {
        assert!(got[name] == *bytes, "{} differs from the control run's", name.display());
    }
    assert!(!got.keys().any(|p| p.to_string_lossy().contains(".tmp")));

    // Served: every bank the failure held up proves its root.
    let reader = SnapshotReader::open(&faulty_dir).unwrap();
    for slot in [6, 7, 8, 9, 11, 12, 16, 17, 20] {
        assert_eq!(reader.slot(Some(slot)).unwrap().root, roots[&slot], "slot {slot}");
    }

    // The metrics saw it.
    let m = scrape(faulty_run.with.metrics_addr().unwrap());
    assert!(m["aldb_bank_sink_write_retries_total"] >= 2.0);
    assert_eq!(m["aldb_bank_sink_write_recoveries_total"], 1.0);
    assert_eq!(m["aldb_bank_sink_write_failing"], 0.0);
    assert_eq!(m["aldb_bank_sink_write_failure_streak_seconds"], 0.0);
    assert_eq!(m["aldb_bank_freezes_total"], 20.0);
}

#[test]
fn a_held_bank_whose_fork_dies_is_given_up_and_the_next_one_written() {
    let _serial = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("snapshots");
    let mut p = Pair::new(&config(&dir));
    p.freeze(1, 0);
    p.freeze(2, 1);
    p.with.flush_sink();
    let stats = p.stats();
    let guard = NoDescriptors::new();
    p.freeze(3, 2);
    wait_for("slot 3 to be held", || SinkStats::get(&stats.write_failing) == 1);
    // Its fork dies while it is held; the sibling is held in its turn.
    p.freeze(4, 2);
    p.dead(3);
    wait_for("slot 3 to be given up", || SinkStats::get(&stats.retries_abandoned) == 1);
    let tries = SinkStats::get(&stats.write_retries);
    wait_for("slot 4 to be tried again", || SinkStats::get(&stats.write_retries) > tries);
    drop(guard);
    p.freeze(5, 4);
    p.confirm_and_root(5);
    p.with.flush_sink();

    assert_eq!(SinkStats::get(&stats.write_recoveries), 1);
    assert_eq!(SinkStats::get(&stats.retries_abandoned), 1);
    assert_eq!(SinkStats::get(&stats.banks_refused), 0);
    let reader = SnapshotReader::open(&dir).unwrap();
    assert!(reader.slot(Some(3)).is_err(), "the dead bank has no file");
    for slot in [4, 5] {
        assert_eq!(reader.slot(Some(slot)).unwrap().root, p.roots[&slot], "slot {slot}");
    }
}
