//! `processed`: the checks of a plugin at `commitment: "processed"` against the running validator.
//!
//! For `secs` seconds the validator's processed tip is sampled (`getSlot` at `processed`), and
//! each new tip must be served by Hyades at once, with the root it has then (normally at the
//! `processed` level: the cluster has not confirmed it yet). Then, once every sampled slot is
//! confirmed:
//!
//! - every block the validator confirmed in the window (`getBlocks` at `confirmed`) has a
//!   snapshot file and a root served at `confirmed` or `finalized`: every processed slot got a
//!   root, none was lost on the way to confirmation;
//! - every sampled slot has the same root it had when it was only processed, and its `confirmed`
//!   root record (when records are on) names that root.
//!
//! That the roots are the validator's own state is `run --commitment processed`'s part: it reads
//! accounts at `processed` and proves them at the bank they were read from.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::rpc::{Client, str_at, u64_at, value};

/// Hyades' "slot not committed yet" error.
const NOT_YET: i64 = -32004;
/// How long a slot may take to be served, or to confirm.
const TIMEOUT: Duration = Duration::from_secs(60);

/// What Hyades said about a slot when it was sampled.
struct Seen {
    root: String,
    level: String,
    /// From the validator reporting the slot processed to Hyades serving it.
    served_after: Duration,
}

/// `(root, level)` of a slot Hyades serves; `None` while it is not published yet.
fn served(hyades: &Client, slot: u64) -> Result<Option<(String, String)>> {
    match hyades.call("getStateRoot", json!([slot])) {
        Ok(r) => {
            let v = value(&r)?;
            let level = v.get("commitment").and_then(Value::as_str).unwrap_or("none").to_string();
            Ok(Some((str_at(v, "root")?.to_string(), level)))
        }
        Err(e) if Client::code(&e) == Some(NOT_YET) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Waits until Hyades serves `slot`.
fn wait_served(hyades: &Client, slot: u64) -> Result<(String, String)> {
    let start = Instant::now();
    loop {
        if let Some(x) = served(hyades, slot)? {
            return Ok(x);
        }
        if start.elapsed() > TIMEOUT {
            bail!("Hyades does not serve processed slot {slot} after {TIMEOUT:?}");
        }
        sleep(Duration::from_millis(20));
    }
}

/// The slots of the plugin's snapshot files (`SEQ-SLOT.snap`).
fn file_slots(dir: &Path) -> Result<BTreeSet<u64>> {
    let mut out = BTreeSet::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let name = e?.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(slot) = name.strip_suffix(".snap").and_then(|n| n.split_once('-')).and_then(|(_, s)| s.parse().ok())
        {
            out.insert(slot);
        }
    }
    Ok(out)
}

fn slot_at(rpc: &Client, commitment: &str) -> Result<u64> {
    rpc.call("getSlot", json!([{"commitment": commitment}]))?.as_u64().context("getSlot is not a number")
}

pub(crate) fn run(rpc_url: &str, hyades_url: &str, dir: &Path, secs: u64) -> Result<()> {
    let rpc = Client::new(rpc_url);
    let hyades = Client::new(hyades_url);
    let mut seen: BTreeMap<u64, Seen> = BTreeMap::new();
    let end = Instant::now() + Duration::from_secs(secs);
    let first = slot_at(&rpc, "processed")?;
    while Instant::now() < end {
        let s = slot_at(&rpc, "processed")?;
        if s > first && !seen.contains_key(&s) {
            let t = Instant::now();
            let (root, level) = wait_served(&hyades, s)?;
            seen.insert(s, Seen { root, level, served_after: t.elapsed() });
        }
        sleep(Duration::from_millis(25));
    }
    let (Some(&lo), Some(&hi)) = (seen.keys().next(), seen.keys().next_back()) else {
        bail!("the validator processed no slot in {secs} s");
    };
    // Everything sampled must confirm; then the window's confirmed blocks are known.
    let start = Instant::now();
    while slot_at(&rpc, "confirmed")? < hi {
        if start.elapsed() > TIMEOUT {
            bail!("slot {hi} not confirmed after {TIMEOUT:?}");
        }
        sleep(Duration::from_millis(100));
    }
    let blocks = rpc.call("getBlocks", json!([lo, hi, {"commitment": "confirmed"}]))?;
    let blocks: Vec<u64> =
        blocks.as_array().context("getBlocks is not an array")?.iter().filter_map(Value::as_u64).collect();
    let files = file_slots(dir)?;
    let mut missing = Vec::new();
    for &b in &blocks {
        if !files.contains(&b) {
            missing.push(b);
        }
    }
    if !missing.is_empty() {
        bail!(
            "{} of {} confirmed slots in {lo}..={hi} have no snapshot file: {missing:?}",
            missing.len(),
            blocks.len()
        );
    }
    let mut at_processed = 0usize;
    let mut records = 0usize;
    for (&s, x) in &seen {
        let (root, level) = wait_served(&hyades, s)?;
        if !matches!(level.as_str(), "confirmed" | "finalized") {
            bail!("slot {s} is confirmed by the validator but served at level {level}");
        }
        if root != x.root {
            bail!("slot {s}: root {} when processed (served at {}), {root} once {level}", x.root, x.level);
        }
        at_processed += usize::from(x.level == "processed");
        // Records off (no genesis hash configured), or not yet logged: nothing to compare.
        if let Ok(r) = hyades.call("getRootRecord", json!([s, {"commitment": "confirmed"}])) {
            let rec = value(&r)?;
            if str_at(rec, "stateRoot")? != root || u64_at(rec, "slot")? != s {
                bail!("slot {s}: the confirmed record names another root: {rec}");
            }
            records += 1;
        }
    }
    let mut waits: Vec<Duration> = seen.values().map(|x| x.served_after).collect();
    waits.sort();
    let pct = |p: usize| waits.get((waits.len() - 1) * p / 100).copied().unwrap_or_default();
    println!(
        "processed: {} tips sampled in {lo}..={hi} ({at_processed} still at processed when served), {} confirmed blocks all with files ({} files in the directory)",
        seen.len(),
        blocks.len(),
        files.len()
    );
    println!(
        "processed: every sampled slot kept its processed root once confirmed; {records} confirmed records name it; served within p50 {:?}, p99 {:?} of the tip",
        pct(50),
        pct(99)
    );
    if at_processed == 0 {
        bail!("no sampled slot was served at the processed level: the plugin does not publish before confirmation");
    }
    Ok(())
}
