//! `aldb-votes-check SNAPSHOT_DIR [--min-slots N] [--min-votes N] [--window N] [--records]`: checks a
//! vote-evidence log (`docs/PLUGIN.md` §9) the way a light client will use it, from the files
//! alone.
//!
//! For every slot with a bank entry: the bank hash follows from `h` and the root (`docs/SPEC.md`
//! §10.1, hard-fork count included), and every vote transaction the log selects for the slot
//! decodes by §10.3, has valid signatures, and votes for the slot with exactly its bank hash.
//! Prints one JSON line of counts (and the slot with the most votes, handy for a light client's
//! next step). With `--records`, the root records of the directory's record log must carry the
//! slot's own bank hash (`SLOT_BANK_HASH`) equal to the log's, for at least one slot, and their
//! state root must be the one the bank hash commits to. Exits non-zero when a check fails or fewer than `--min-slots` slots have a
//! commitment or fewer than `--min-votes` votes were checked.

use std::path::PathBuf;
use std::process::ExitCode;

use aldb_format::votes::{DEFAULT_WINDOW, VoteLogReader};
use aldb_verify::votes::{VoteTransaction, bank_hash};

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("aldb-votes-check: {e}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<bool, String> {
    let mut args = std::env::args().skip(1);
    let mut dir = None;
    let (mut min_slots, mut min_votes, mut window, mut records) = (1u64, 1u64, DEFAULT_WINDOW, false);
    while let Some(a) = args.next() {
        let mut num = |name: &str| -> Result<u64, String> {
            args.next().and_then(|v| v.parse().ok()).ok_or(format!("{name} needs a number"))
        };
        match a.as_str() {
            "--min-slots" => min_slots = num("--min-slots")?,
            "--min-votes" => min_votes = num("--min-votes")?,
            "--window" => window = num("--window")?,
            "--records" => records = true,
            "-h" | "--help" => {
                println!("usage: aldb-votes-check SNAPSHOT_DIR [--min-slots N] [--min-votes N] [--window N]");
                return Ok(true);
            }
            _ if dir.is_none() => dir = Some(PathBuf::from(a)),
            _ => return Err(format!("unexpected argument {a}")),
        }
    }
    let dir = dir.ok_or("usage: aldb-votes-check SNAPSHOT_DIR [--min-slots N] [--min-votes N]")?;
    let mut reader = VoteLogReader::new(&dir);
    reader.refresh().map_err(|e| e.to_string())?;
    let (Some(oldest), Some(newest)) = (reader.oldest_slot(), reader.newest_slot()) else {
        println!("{{\"slots\":0}}");
        eprintln!("FAIL: no bank entry in {}", dir.display());
        return Ok(false);
    };
    let mut failures = Vec::new();
    let (mut slots, mut committed, mut hard_fork_slots, mut votes, mut slots_with_votes) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut best: Option<(u64, usize)> = None;
    for slot in oldest..=newest {
        let Some(ev) = reader.slot_votes(slot, window).map_err(|e| e.to_string())? else { continue };
        slots += 1;
        let Some(c) = ev.bank.aldb else { continue };
        committed += 1;
        hard_fork_slots += u64::from(ev.bank.hard_forks.is_some());
        let want = bank_hash(&c.h, &c.root, ev.bank.hard_forks);
        if want != ev.bank.bank_hash {
            failures.push(format!("slot {slot}: the bank hash does not follow from h and the root"));
        }
        for tx in &ev.votes {
            votes += 1;
            match VoteTransaction::parse(tx) {
                Err(e) => failures.push(format!("slot {slot}: a selected vote does not decode: {e}")),
                Ok(v) => {
                    if v.tower.slot() != slot {
                        failures.push(format!("slot {slot}: a selected vote is for slot {}", v.tower.slot()));
                    }
                    if v.tower.hash != ev.bank.bank_hash {
                        failures.push(format!("slot {slot}: a vote carries another hash than the bank's"));
                    }
                    if v.verify_signatures().is_err() {
                        failures.push(format!("slot {slot}: a vote's signatures do not verify"));
                    }
                }
            }
        }
        if !ev.votes.is_empty() {
            slots_with_votes += 1;
            if best.is_none_or(|(_, n)| ev.votes.len() > n) {
                best = Some((slot, ev.votes.len()));
            }
        }
    }
    let mut with_bank_hash = 0u64;
    if records {
        let logged = aldb_format::records::RecordLogReader::new(&dir).refresh().map_err(|e| e.to_string())?;
        for r in &logged {
            let Some(h) = r.record.bank_hash else { continue };
            with_bank_hash += 1;
            let slot = r.record.slot;
            match reader.bank(slot) {
                Some(b) if b.bank_hash != h => {
                    failures.push(format!("slot {slot}: the record's bank hash is not the bank's"))
                }
                Some(b) if b.aldb.is_some_and(|c| c.root != r.record.state_root) => {
                    failures.push(format!("slot {slot}: the record's root is not the one the bank hash commits to"))
                }
                _ => {}
            }
        }
        if with_bank_hash == 0 {
            failures.push(format!("none of {} root records carries its slot's bank hash", logged.len()));
        }
    }
    if committed < min_slots {
        failures.push(format!("{committed} slots with an aldb commitment, fewer than {min_slots}"));
    }
    if votes < min_votes {
        failures.push(format!("{votes} votes checked, fewer than {min_votes}"));
    }
    println!(
        "{{\"oldest\":{oldest},\"newest\":{newest},\"slots\":{slots},\"committed\":{committed},\"hard_fork_slots\":{hard_fork_slots},\"slots_with_votes\":{slots_with_votes},\"votes\":{votes},\"records_with_bank_hash\":{with_bank_hash},\"damaged\":{},\"best_slot\":{},\"failures\":{}}}",
        reader.damaged_entries(),
        best.map_or("null".to_string(), |(s, _)| s.to_string()),
        failures.len()
    );
    for f in failures.iter().take(20) {
        eprintln!("FAIL: {f}");
    }
    Ok(failures.is_empty())
}
