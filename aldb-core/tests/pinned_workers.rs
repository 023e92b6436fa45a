//! With `pin_workers`, each worker thread is restricted to one CPU of the process's set, a
//! different one per worker while there are CPUs to go round. Its own test binary, so no other
//! tree's `pleiades-*` threads are in the process.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use aldb_core::{AccountRef, Config, Pleiades};

/// `Cpus_allowed_list` of each thread named `pleiades-*`, by name.
fn worker_cpus() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for task in std::fs::read_dir("/proc/self/task").expect("/proc is mounted").flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        let comm = comm.trim();
        if !comm.starts_with("pleiades-") {
            continue;
        }
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        if let Some(list) = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")) {
            out.insert(comm.to_string(), list.trim().to_string());
        }
    }
    out
}

/// The process's allowed CPUs as `Cpus_allowed_list` would print each alone.
fn process_cpus() -> Vec<String> {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc is mounted");
    let list = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).expect("listed").trim().to_string();
    let mut cpus = Vec::new();
    for part in list.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().expect("cpu"), b.parse().expect("cpu"));
                cpus.extend((a..=b).map(|c| c.to_string()));
            }
            None => cpus.push(part.to_string()),
        }
    }
    cpus
}

#[test]
fn pinned_workers_each_hold_one_cpu_and_roots_are_unchanged() {
    let cpus = process_cpus();
    let threads = cpus.len().clamp(2, 4);
    let base = Config::for_leaves(4096, threads);
    let mut pinned = Pleiades::new(base.with_pinned_workers(true)).expect("pinned tree");

    // The workers run their start handler as they start; wait for all of them to have done so.
    let deadline = Instant::now() + Duration::from_secs(30);
    let seen = loop {
        let seen = worker_cpus();
        if (seen.len() == threads && seen.values().all(|l| !l.contains([',', '-']))) || Instant::now() > deadline {
            break seen;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(seen.len(), threads, "every worker thread is there: {seen:?}");
    for (i, cpu) in (0..threads).map(|i| (i, &seen[&format!("pleiades-{i}")])) {
        assert_eq!(cpu, &cpus[i % cpus.len()], "worker {i} is on the {i}-th allowed CPU: {seen:?}");
    }

    // Placement never changes a root.
    let mut free = Pleiades::new(base).expect("unpinned tree");
    let owner = [7u8; 32];
    let keys: Vec<[u8; 32]> = (0u32..3000)
        .map(|i| {
            let mut k = [0x5a; 32];
            k[..4].copy_from_slice(&i.to_le_bytes());
            k
        })
        .collect();
    let accounts: Vec<AccountRef<'_>> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| AccountRef { pubkey: k, lamports: i as u64 + 1, owner: &owner, executable: false, data: b"x" })
        .collect();
    assert_eq!(pinned.commit_accounts(&accounts), free.commit_accounts(&accounts));
}
