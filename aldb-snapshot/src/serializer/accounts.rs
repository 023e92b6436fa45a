//! Account records: the batch's newest states written in the order that reads best, and records
//! copied forward from older files.

use aldb_format::SnapshotError;
use aldb_format::format::{ACCOUNT_HEAD_LEN, Ref, prefix_of};

use super::Serializer;
use super::body::Scratch;
use super::input::SlotInput;
use crate::file_builder::{FileBuilder, Kind};
use crate::path_index::PathEntry;

/// Marks an account to write in [`Scratch::refs`] (never a real reference: its sequence number
/// would be `u32::MAX`, which no file gets).
const WRITE_ME: Ref = Ref(u64::MAX);

impl Serializer {
    /// Writes the accounts of the batch (or, for a spilled full state, of every leaf), leaving
    /// in `s.path_refs` the record of each, by path (by leaf for a spill); returns the bytes
    /// written.
    pub(super) fn write_accounts(
        &mut self,
        fb: &mut FileBuilder,
        input: &SlotInput,
        s: &mut Scratch,
    ) -> Result<u64, SnapshotError> {
        // Accounts: the newest state of each account in the batch (a coalesced batch may hold
        // several) is written; `by_path` and `path_refs` then let changed buckets, visited in
        // path order, find each leaf's new record by a merge.
        let entries = input.accounts.entries();
        s.index.build(entries);
        let by_path: &[PathEntry] = s.index.sorted();
        s.refs.clear();
        s.refs.resize(entries.len(), Ref::NULL);
        let start = fb.written();
        let write = |fb: &mut FileBuilder, e: &crate::batch::AccountEntry| -> Result<Ref, SnapshotError> {
            if e.lamports == 0 {
                return Ok(Ref::NULL);
            }
            let data = input.accounts.data(e);
            let head = account_record_parts(&e.pubkey, e.lamports, &e.owner, e.executable, data.len());
            fb.record(Kind::Account, &head.as_slice_with(data))
        };
        // A spilled full state: each leaf's account, in the change set's (path) order, from the
        // batch if one was merged on top, else the spill's winner; `path_refs` is then by leaf.
        let spilled = input.accounts.spilled().filter(|_| input.full);
        if let Some(spill) = spilled {
            s.path_refs.clear();
            let mut winners = spill.winners();
            let mut cursor = 0usize;
            for c in input.changes.buckets() {
                for path in c.paths {
                    let key = (prefix_of(path), path);
                    while cursor < by_path.len() && (by_path[cursor].0, &by_path[cursor].1) < key {
                        cursor += 1;
                    }
                    let r = match by_path.get(cursor) {
                        Some(&(_, p, std::cmp::Reverse(i))) if p == *path => write(fb, &entries[i as usize])?,
                        _ => match winners.seek(path)? {
                            Some(w) => {
                                let a = w.account;
                                let head =
                                    account_record_parts(a.pubkey, a.lamports, a.owner, a.executable, a.data.len());
                                fb.record(Kind::Account, &head.as_slice_with(a.data))?
                            }
                            None => Ref::NULL,
                        },
                    };
                    if r.is_null() {
                        return Err(SnapshotError::Input(format!(
                            "leaf of bucket {} has no account in the startup spill",
                            c.index
                        )));
                    }
                    s.path_refs.push(r);
                }
            }
        } else if input.full {
            // A full state is written in path order: the refresh later copies a key range at a
            // time, and reads it back sequentially only if it lies together on disk.
            for &(_, _, std::cmp::Reverse(i)) in by_path {
                s.refs[i as usize] = write(fb, &entries[i as usize])?;
            }
        } else {
            // A slot is written in batch order, reading the batch sequentially (in path order
            // most of the time went to cache misses on it).
            for &(_, _, std::cmp::Reverse(i)) in by_path {
                s.refs[i as usize] = WRITE_ME;
            }
            for (e, r) in entries.iter().zip(s.refs.iter_mut()) {
                if *r == WRITE_ME {
                    *r = write(fb, e)?;
                }
            }
        }
        // One gather (independent loads the CPU overlaps), so the bucket loop reads in order.
        if spilled.is_none() {
            s.path_refs.clear();
            s.path_refs.extend(by_path.iter().map(|&(_, _, std::cmp::Reverse(i))| s.refs[i as usize]));
        }
        Ok(fb.written() - start)
    }

    /// Copies an account record from an older file into this one.
    pub(super) fn copy_account(&self, fb: &mut FileBuilder, r: Ref) -> Result<Ref, SnapshotError> {
        let a = self.files.account(r)?;
        // Copied straight out of the mapping: checked after the copy (`AccountView::intact`).
        let copied = fb.record(Kind::Account, &[a.raw])?;
        a.intact(copied)
    }
}

/// The fixed part of an account record.
pub(crate) struct AccountHead([u8; ACCOUNT_HEAD_LEN]);

impl AccountHead {
    fn as_slice_with<'a>(&'a self, data: &'a [u8]) -> [&'a [u8]; 2] {
        [&self.0, data]
    }
}

pub(crate) fn account_record_parts(
    pubkey: &[u8; 32],
    lamports: u64,
    owner: &[u8; 32],
    executable: bool,
    data_len: usize,
) -> AccountHead {
    let mut h = [0u8; ACCOUNT_HEAD_LEN];
    h[0..32].copy_from_slice(pubkey);
    h[32..40].copy_from_slice(&lamports.to_le_bytes());
    h[40..72].copy_from_slice(owner);
    h[72] = u8::from(executable);
    // Account data is at most 10 MiB on Solana, far below u32::MAX.
    h[76..80].copy_from_slice(&(data_len as u32).to_le_bytes());
    AccountHead(h)
}
