//! A model of what agave sends a geyser plugin, and of the account state it implies.
//!
//! `generate` builds a random validator run (a genesis or snapshot start, optional ledger replay
//! with no statuses, then a fork tree of live banks) as the list of notifications agave may
//! deliver, and computes with `aldb_naive` the root every slot of the canonical chain must get.
//! `run` feeds the notifications to an adapter, from one thread or several, and returns what
//! it committed.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use aldb_naive::NaiveState;
use geyser_adapter::{
    AccountUpdate, Adapter, AdapterConfig, BlockInfo, CommitKind, Commitment, Committed, Retain, SLOT_HASHES_SYSVAR,
    SlotEvent, SlotStatus, StatusChange, StatusKind, slot_hashes_data, slot_hashes_data_with_hash,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub(crate) type Hash = [u8; 32];

/// An owned account update.
#[derive(Clone, Debug)]
pub(crate) struct Acct {
    pub(crate) slot: u64,
    pub(crate) pubkey: [u8; 32],
    pub(crate) lamports: u64,
    pub(crate) owner: [u8; 32],
    pub(crate) executable: bool,
    pub(crate) data: Vec<u8>,
    pub(crate) write_version: u64,
    pub(crate) is_startup: bool,
}

impl Acct {
    pub(crate) fn update(&self) -> AccountUpdate<'_> {
        AccountUpdate {
            slot: self.slot,
            pubkey: self.pubkey,
            lamports: self.lamports,
            owner: self.owner,
            executable: self.executable,
            data: &self.data,
            write_version: self.write_version,
            is_startup: self.is_startup,
        }
    }

    pub(crate) fn apply(&self, state: &mut NaiveState) {
        state.apply_account(&self.pubkey, self.lamports, &self.owner, self.executable, &self.data);
    }
}

/// One notification.
#[derive(Clone, Debug)]
pub(crate) enum Ev {
    Account(Acct),
    Status(SlotEvent),
    EndOfStartup,
    /// Block metadata (agave sends it from replay once the bank is frozen).
    Block(u64, BlockInfo),
}

/// The bank hash the model gives `slot`'s bank (what its children's SlotHashes writes carry).
pub(crate) fn bank_hash(slot: u64) -> Hash {
    let mut h = [0xb4; 32];
    h[..8].copy_from_slice(&slot.to_le_bytes());
    h
}

/// The block metadata of version `version` of `slot`'s bank.
pub(crate) fn block_info(slot: u64, version: u8) -> BlockInfo {
    let mut blockhash = [0xb1; 32];
    blockhash[..8].copy_from_slice(&slot.to_le_bytes());
    blockhash[8] = version;
    BlockInfo { blockhash, block_height: slot / 2 + u64::from(version) }
}

pub(crate) fn status(slot: u64, parent: Option<u64>, status: SlotStatus) -> Ev {
    Ev::Status(SlotEvent::new(slot, parent, status))
}

/// The dials of a generated run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Knobs {
    pub(crate) genesis: bool,
    pub(crate) end_of_startup: bool,
    pub(crate) replay: usize,
    pub(crate) hints: bool,
    pub(crate) live: usize,
    pub(crate) keys: u8,
    pub(crate) fork_pct: u32,
    pub(crate) dead_pct: u32,
    pub(crate) restart_pct: u32,
    pub(crate) confirm_pct: u32,
    pub(crate) interleave_pct: u32,
}

/// A generated run and what it must produce.
#[derive(Debug)]
pub(crate) struct Scenario {
    pub(crate) events: Vec<Ev>,
    /// The canonical chain, the base first.
    pub(crate) chain: Vec<u64>,
    /// The root each chain slot's full state has.
    pub(crate) roots: BTreeMap<u64, Hash>,
    pub(crate) base_kind: CommitKind,
    /// Whether banks write SlotHashes (so commits carry the parent's bank hash).
    pub(crate) hints: bool,
    /// Index in `chain` of the last slot that must be committed, per commitment.
    pub(crate) last_confirmed: usize,
    pub(crate) last_finalized: usize,
    /// Every bank version that may be frozen (chain and fork banks, first versions of restarted
    /// banks): its parent and the root of the full state along its chain.
    pub(crate) versions: BTreeMap<u64, Vec<(u64, Hash)>>,
}

impl Scenario {
    pub(crate) fn expected_last(&self, c: Commitment) -> usize {
        match c {
            // Under Processed: the last slot reported confirmed.
            Commitment::Confirmed | Commitment::Processed => self.last_confirmed,
            Commitment::Finalized => self.last_finalized,
        }
    }
}

struct Gen {
    rng: ChaCha8Rng,
    /// Places block metadata; separate so the rest of a run does not depend on it.
    brng: ChaCha8Rng,
    keys: Vec<[u8; 32]>,
    wv: u64,
    hints: bool,
}

impl Gen {
    fn write(&mut self, slot: u64, is_startup: bool) -> Acct {
        let key = self.keys[self.rng.random_range(0..self.keys.len())];
        let lamports = if self.rng.random_ratio(1, 6) { 0 } else { self.rng.random_range(1..1_000_000) };
        let len = self.rng.random_range(0..48usize);
        self.wv += 1;
        Acct {
            slot,
            pubkey: key,
            lamports,
            owner: [self.rng.random_range(1..4u8); 32],
            executable: self.rng.random_ratio(1, 10),
            data: (0..len).map(|_| self.rng.random()).collect(),
            write_version: self.wv,
            is_startup,
        }
    }

    /// A bank's writes: some accounts written several times, in a shuffled delivery order.
    fn bank(&mut self, slot: u64, parent: Option<u64>, max: usize) -> Vec<Acct> {
        let n = self.rng.random_range(1..=max);
        let mut out: Vec<Acct> = (0..n).map(|_| self.write(slot, false)).collect();
        // Rewrite a few of the same accounts with later write versions.
        for i in 0..self.rng.random_range(0..=n.min(3)) {
            let mut again = self.write(slot, false);
            again.pubkey = out[i].pubkey;
            out.push(again);
        }
        if self.hints {
            self.wv += 1;
            let data = match parent {
                Some(p) => slot_hashes_data_with_hash(p, bank_hash(p)),
                None => 0u64.to_le_bytes().to_vec(),
            };
            out.push(Acct {
                slot,
                pubkey: SLOT_HASHES_SYSVAR,
                lamports: 1_000,
                owner: [9; 32],
                executable: false,
                data,
                write_version: self.wv,
                is_startup: false,
            });
        }
        self.shuffle(&mut out);
        out
    }

    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            v.swap(i, self.rng.random_range(0..=i));
        }
    }

    fn pct(&mut self, p: u32) -> bool {
        self.rng.random_range(0..100) < p
    }
}

/// The state after a bank: its highest write version per account wins.
fn apply_bank(state: &NaiveState, writes: &[Acct]) -> NaiveState {
    let mut best: BTreeMap<[u8; 32], &Acct> = BTreeMap::new();
    for w in writes {
        let e = best.entry(w.pubkey).or_insert(w);
        if w.write_version >= e.write_version {
            *e = w;
        }
    }
    let mut s = state.clone();
    for w in best.values() {
        w.apply(&mut s);
    }
    s
}

/// A bank being delivered: its events in order.
struct Lane {
    events: VecDeque<Ev>,
}

/// Interleaves two lanes, keeping each one's order.
fn merge(g: &mut Gen, a: Lane, b: Lane, out: &mut Vec<Ev>) {
    let (mut a, mut b) = (a.events, b.events);
    while !a.is_empty() || !b.is_empty() {
        let take_a = !a.is_empty() && (b.is_empty() || g.rng.random_bool(0.5));
        let e = if take_a { a.pop_front() } else { b.pop_front() };
        out.extend(e);
    }
}

pub(crate) fn generate(seed: u64, k: &Knobs) -> Scenario {
    let mut g = Gen {
        rng: ChaCha8Rng::seed_from_u64(seed),
        brng: ChaCha8Rng::seed_from_u64(seed ^ 0xb10c),
        keys: (0..k.keys.max(2))
            .map(|i| {
                let mut p = [0u8; 32];
                p[0] = i;
                p[1..9].copy_from_slice(&seed.to_le_bytes());
                p
            })
            .collect(),
        wv: 0,
        hints: k.hints,
    };
    let mut events = Vec::new();
    let mut states: BTreeMap<u64, NaiveState> = BTreeMap::new();
    // The state of every bank that can be a parent, fork banks included.
    let mut all: BTreeMap<u64, NaiveState> = BTreeMap::new();
    let mut versions: BTreeMap<u64, Vec<(u64, Hash)>> = BTreeMap::new();
    let mut chain = Vec::new();

    // The base.
    let base_kind;
    if k.genesis {
        base_kind = CommitKind::Genesis;
        let mut writes = g.bank(0, None, 2 * usize::from(k.keys));
        let mut s = NaiveState::default();
        // Genesis writes are ordinary updates with no status.
        writes.sort_by_key(|w| w.write_version);
        for w in &writes {
            w.apply(&mut s);
        }
        g.shuffle(&mut writes);
        events.extend(writes.into_iter().map(Ev::Account));
        states.insert(0, s);
        chain.push(0);
    } else {
        base_kind = CommitKind::Startup;
        let s0 = g.rng.random_range(20..60u64);
        let mut storages: BTreeSet<u64> = (0..g.rng.random_range(0..4)).map(|_| g.rng.random_range(0..s0)).collect();
        storages.insert(s0);
        let mut startup = Vec::new();
        for &slot in &storages {
            for _ in 0..g.rng.random_range(1..=usize::from(k.keys)) {
                // Duplicates across and within storages, tombstones included.
                startup.push(g.write(slot, true));
            }
        }
        // Every bank writes the Clock sysvar, so the snapshot slot has a storage.
        let mut clock = g.write(s0, true);
        clock.pubkey = [0xc1; 32];
        clock.lamports = 1;
        startup.push(clock);
        let mut best: BTreeMap<[u8; 32], &Acct> = BTreeMap::new();
        for w in &startup {
            let e = best.entry(w.pubkey).or_insert(w);
            if (w.slot, w.write_version) >= (e.slot, e.write_version) {
                *e = w;
            }
        }
        let mut s = NaiveState::default();
        for w in best.values() {
            w.apply(&mut s);
        }
        states.insert(s0, s);
        chain.push(s0);
        g.shuffle(&mut startup);
        events.extend(startup.into_iter().map(Ev::Account));
        if k.end_of_startup {
            events.push(Ev::EndOfStartup);
        }
    }

    // Ledger replay: updates with no statuses, slot by slot.
    let mut replayed = Vec::new();
    for _ in 0..k.replay {
        let parent = *chain.last().unwrap_or(&0);
        let slot = parent + 1 + g.rng.random_range(0..2u64);
        let writes = g.bank(slot, Some(parent), 6);
        states.insert(slot, apply_bank(&states[&parent], &writes));
        events.extend(writes.into_iter().map(Ev::Account));
        chain.push(slot);
        replayed.push(slot);
        if g.pct(20) {
            // A replayed fork slot off the chain (a sibling of `slot`); the chain goes on above it.
            let fork = slot + 1;
            let writes = g.bank(fork, Some(parent), 4);
            versions.entry(fork).or_default().push((parent, apply_bank(&states[&parent], &writes).root()));
            events.extend(writes.into_iter().map(Ev::Account));
            let next = fork + 1;
            let w = g.bank(next, Some(slot), 6);
            states.insert(next, apply_bank(&states[&slot], &w));
            events.extend(w.into_iter().map(Ev::Account));
            chain.push(next);
            replayed.push(next);
        }
    }
    // Replayed slots rooted during startup never get `Rooted`; only hints can link them.
    let rooted_skip = if k.hints && !replayed.is_empty() { g.rng.random_range(0..=replayed.len()) } else { 0 };
    let mut root_idx = 1 + rooted_skip; // next chain index to root
    let mut rooted: BTreeSet<u64> = BTreeSet::new();
    let mut confirmed: BTreeSet<u64> = BTreeSet::new();

    // Live banks.
    let mut next_slot = chain.last().copied().unwrap_or(0) + 1;
    let mut forks: Vec<u64> = Vec::new(); // frozen fork banks that can be parents
    let mut delayed: Vec<(usize, Ev)> = Vec::new(); // (banks to wait, event)
    let mut processed_sent: BTreeSet<u64> = BTreeSet::new();
    let mut prev: Option<(u64, Lane)> = None; // the previous bank, still open for interleaving
    let root_lag = g.rng.random_range(2..6usize);

    for _ in 0..k.live {
        let slot = next_slot + g.rng.random_range(0..2u64);
        next_slot = slot + 1;
        let on_chain = !g.pct(k.fork_pct);
        let parent = if on_chain || (forks.is_empty() && chain.len() < 2) {
            *chain.last().unwrap_or(&0)
        } else if !forks.is_empty() && g.pct(50) {
            forks[g.rng.random_range(0..forks.len())]
        } else {
            let lo = chain.len().saturating_sub(3);
            chain[g.rng.random_range(lo..chain.len())]
        };
        let on_chain = on_chain && parent == *chain.last().unwrap_or(&0);
        let mut lane = Lane { events: VecDeque::new() };
        let restart = g.pct(k.restart_pct);
        let early_confirm = on_chain && !restart && g.pct(k.confirm_pct) && g.pct(15);
        if early_confirm {
            lane.events.push_back(status(slot, None, SlotStatus::Confirmed));
            confirmed.insert(slot);
        }
        if restart {
            // A first version that dies or freezes, then the bank is rebuilt.
            lane.events.push_back(status(slot, Some(parent), SlotStatus::CreatedBank));
            let v1 = g.bank(slot, Some(parent), 5);
            let partial = g.rng.random_range(0..=v1.len());
            if g.pct(50) {
                lane.events.extend(v1.into_iter().take(partial).map(Ev::Account));
                lane.events.push_back(status(slot, Some(parent), SlotStatus::Dead));
            } else {
                let base = all.get(&parent).or_else(|| states.get(&parent)).expect("parent state");
                versions.entry(slot).or_default().push((parent, apply_bank(base, &v1).root()));
                lane.events.extend(v1.into_iter().map(Ev::Account));
                if g.brng.random_bool(0.5) {
                    // The first version froze: its metadata must not outlive the restart.
                    lane.events.push_back(Ev::Block(slot, block_info(slot, 0)));
                }
                lane.events.push_back(status(slot, Some(parent), SlotStatus::Processed));
            }
        }
        lane.events.push_back(status(slot, Some(parent), SlotStatus::CreatedBank));
        let dies = !on_chain && g.pct(k.dead_pct);
        let writes = g.bank(slot, Some(parent), 6);
        if on_chain && g.pct(k.confirm_pct) && !confirmed.contains(&slot) {
            // Confirmed before or after Processed: after CreatedBank, at a random delay.
            let d = g.rng.random_range(0..3usize);
            if d == 0 {
                let at = g.rng.random_range(0..=writes.len());
                let (a, b) = writes.split_at(at);
                lane.events.extend(a.iter().cloned().map(Ev::Account));
                lane.events.push_back(status(slot, None, SlotStatus::Confirmed));
                lane.events.extend(b.iter().cloned().map(Ev::Account));
            } else {
                lane.events.extend(writes.iter().cloned().map(Ev::Account));
                delayed.push((d, status(slot, None, SlotStatus::Confirmed)));
            }
            confirmed.insert(slot);
        } else if dies {
            let at = g.rng.random_range(0..=writes.len());
            lane.events.extend(writes.iter().take(at).cloned().map(Ev::Account));
            lane.events.push_back(status(slot, Some(parent), SlotStatus::Dead));
        } else {
            lane.events.extend(writes.iter().cloned().map(Ev::Account));
        }
        if !dies {
            // Block metadata comes from the replay thread after the freeze: before or after
            // Processed and Confirmed, much later, or not at all.
            match g.brng.random_range(0..10u32) {
                0..4 => lane.events.push_back(Ev::Block(slot, block_info(slot, 1))),
                4..8 => delayed.push((g.brng.random_range(0..4usize), Ev::Block(slot, block_info(slot, 1)))),
                _ => {}
            }
            // Processed goes through agave's notification thread: it may land after the child
            // bank's CreatedBank.
            delayed.push((g.rng.random_range(0..3usize), status(slot, Some(parent), SlotStatus::Processed)));
            processed_sent.insert(slot);
        }

        // Deliver: interleave with the previous bank when neither is the other's parent.
        let independent = prev.as_ref().is_some_and(|(p, _)| *p != parent) && g.pct(k.interleave_pct);
        match prev.take() {
            Some((_, lane_prev)) if independent => merge(&mut g, lane_prev, lane, &mut events),
            Some((_, lane_prev)) => {
                events.extend(lane_prev.events);
                prev = Some((slot, lane));
            }
            None => prev = Some((slot, lane)),
        }
        let parent_state = all.get(&parent).or_else(|| states.get(&parent)).expect("parent state");
        let state = apply_bank(parent_state, &writes);
        if !dies {
            versions.entry(slot).or_default().push((parent, state.root()));
            all.insert(slot, state.clone());
        }
        if on_chain {
            states.insert(slot, state);
            chain.push(slot);
        } else if !dies {
            forks.push(slot);
        }

        // Time passes: delayed notifications come due.
        let mut due = Vec::new();
        delayed.retain_mut(|(d, e)| {
            if *d == 0 {
                due.push(e.clone());
                false
            } else {
                *d -= 1;
                true
            }
        });
        if !due.is_empty() {
            if let Some((_, lane_prev)) = prev.take() {
                events.extend(lane_prev.events);
            }
            events.extend(due);
        }

        // The root moves, `root_lag` chain slots behind the tip.
        while root_idx + root_lag < chain.len() {
            if let Some((_, lane_prev)) = prev.take() {
                events.extend(lane_prev.events);
            }
            let s = chain[root_idx];
            // A rooted slot is frozen: its Processed (if live) went out first.
            flush_processed(&mut delayed, s, &mut events);
            events.push(status(s, Some(chain[root_idx - 1]), SlotStatus::Rooted));
            rooted.insert(s);
            root_idx += 1;
        }
    }
    if let Some((_, lane_prev)) = prev.take() {
        events.extend(lane_prev.events);
    }
    delayed.sort_by_key(|(d, _)| *d);
    events.extend(delayed.into_iter().map(|(_, e)| e));
    if g.pct(50) {
        while root_idx < chain.len() {
            events.push(status(chain[root_idx], Some(chain[root_idx - 1]), SlotStatus::Rooted));
            rooted.insert(chain[root_idx]);
            root_idx += 1;
        }
    }

    // What must be committed. A chain slot commits once it or a descendant is confirmed or
    // rooted (Finalized: rooted) and every chain link up to it is known. Replayed slots are
    // linked by hints or by their own Rooted.
    let idx_of = |set: &BTreeSet<u64>| chain.iter().rposition(|s| set.contains(s)).unwrap_or(0);
    let last_rooted = idx_of(&rooted);
    let either: BTreeSet<u64> = confirmed.union(&rooted).copied().collect();
    let linked_all = k.hints || replayed.last().is_none_or(|r| rooted.contains(r));
    let last_confirmed = if linked_all { idx_of(&either) } else { last_rooted };
    let roots: BTreeMap<u64, Hash> = chain.iter().map(|s| (*s, states[s].root())).collect();
    // Replayed chain slots freeze too.
    for w in chain.windows(2) {
        let e = versions.entry(w[1]).or_default();
        if !e.contains(&(w[0], roots[&w[1]])) {
            e.push((w[0], roots[&w[1]]));
        }
    }
    Scenario { events, chain, roots, base_kind, hints: k.hints, last_confirmed, last_finalized: last_rooted, versions }
}

/// Moves slot `s`'s pending Processed out now.
fn flush_processed(delayed: &mut Vec<(usize, Ev)>, s: u64, out: &mut Vec<Ev>) {
    delayed.retain(|(_, e)| {
        if let Ev::Status(SlotEvent { slot, status: SlotStatus::Processed, .. }) = e
            && *slot == s
        {
            out.push(e.clone());
            return false;
        }
        true
    });
}

/// Feeds the events to an adapter. Runs of account updates go out from `threads` threads at
/// once (statuses are barriers, as in the validator); commits are applied at random points.
///
/// Checks that each commit carries exactly the block metadata delivered for the slot's current
/// version before the commit was applied (a repeated `CreatedBank` voids what came before).
pub(crate) fn run<R: Retain>(
    adapter: &Adapter<R>,
    events: &[Ev],
    threads: usize,
    seed: u64,
) -> Vec<Committed<R::Record>> {
    run_log(adapter, events, threads, seed).committed
}

/// What a run gave: the commits (or freezes), the status changes, and the order both came in.
pub(crate) struct Run<Rec> {
    pub(crate) committed: Vec<Committed<Rec>>,
    pub(crate) changes: Vec<StatusChange>,
    /// `Ok(i)`: `committed[i]`; `Err(i)`: `changes[i]`.
    pub(crate) log: Vec<Result<usize, usize>>,
}

/// Like [`run`], and takes the status changes after every `commit_ready`, checking that a
/// confirmed or finalized change carries the block metadata delivered before it was applied.
pub(crate) fn run_log<R: Retain>(adapter: &Adapter<R>, events: &[Ev], threads: usize, seed: u64) -> Run<R::Record> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed);
    let mut out = Run { committed: Vec::new(), changes: Vec::new(), log: Vec::new() };
    let mut blocks: BTreeMap<u64, BlockInfo> = BTreeMap::new();
    let take = |adapter: &Adapter<R>, blocks: &BTreeMap<u64, BlockInfo>, out: &mut Run<R::Record>| loop {
        // A call stops before a freeze that follows a status change: call until both are empty.
        let batch = adapter.commit_ready();
        let changes = adapter.take_status_changes();
        if batch.is_empty() && changes.is_empty() {
            break;
        }
        for c in batch {
            let want = if c.kind == CommitKind::Slot { blocks.get(&c.slot).copied() } else { None };
            assert_eq!(c.block, want, "block metadata of slot {}", c.slot);
            out.log.push(Ok(out.committed.len()));
            out.committed.push(c);
        }
        for ch in changes {
            if ch.kind != StatusKind::Abandoned && ch.parent.is_some() {
                assert_eq!(ch.block, blocks.get(&ch.slot).copied(), "block metadata of {ch:?}");
            }
            out.log.push(Err(out.changes.len()));
            out.changes.push(ch);
        }
    };
    let mut i = 0;
    while i < events.len() {
        match &events[i] {
            Ev::Account(_) => {
                let start = i;
                while i < events.len() && matches!(events[i], Ev::Account(_)) {
                    i += 1;
                }
                let accts: Vec<&Acct> = events[start..i]
                    .iter()
                    .filter_map(|e| match e {
                        Ev::Account(a) => Some(a),
                        _ => None,
                    })
                    .collect();
                deliver(adapter, &accts, threads);
                continue;
            }
            Ev::Status(s) => {
                if s.status == SlotStatus::CreatedBank {
                    blocks.remove(&s.slot);
                }
                let _ = adapter.update_slot_status(*s);
            }
            Ev::EndOfStartup => {
                let _ = adapter.end_of_startup();
            }
            Ev::Block(slot, b) => {
                if adapter.block_metadata(*slot, b.blockhash, Some(b.block_height)).is_ok() {
                    blocks.insert(*slot, *b);
                }
            }
        }
        i += 1;
        if rng.random_ratio(1, 3) {
            take(adapter, &blocks, &mut out);
        }
    }
    take(adapter, &blocks, &mut out);
    out
}

fn deliver<R: Retain>(adapter: &Adapter<R>, accts: &[&Acct], threads: usize) {
    if threads <= 1 || accts.len() < 2 {
        for a in accts {
            let _ = adapter.update_account(&a.update());
        }
        return;
    }
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                for a in accts.iter().skip(t).step_by(threads) {
                    let _ = adapter.update_account(&a.update());
                }
            });
        }
    });
}

/// The three commitments the suites run under.
pub(crate) const COMMITMENTS: [Commitment; 3] = [Commitment::Confirmed, Commitment::Finalized, Commitment::Processed];

pub(crate) fn adapter(commitment: Commitment) -> Adapter {
    let mut config = AdapterConfig::new(commitment, aldb_core::Config::new(1, 2, 4).expect("valid layout"));
    config.stripes = 8;
    Adapter::new(config).expect("adapter")
}

/// Checks a run under `Commitment::Processed`:
///
/// - the base is frozen first, and every later freeze has the naive root of the full state along
///   its chain (one of the bank's versions, on its parent);
/// - a slot is frozen again only after its old version was reported abandoned, and every change
///   names the root the slot's live version was frozen with;
/// - the confirmed changes walk the chain exactly as `Commitment::Confirmed` commits it, and the
///   finalized ones as `Commitment::Finalized` does.
pub(crate) fn check_processed<Rec>(sc: &Scenario, run: &Run<Rec>) -> Result<(), String> {
    let Some(base) = run.committed.first() else {
        return Err("nothing frozen".into());
    };
    if (base.slot, base.parent, base.kind, base.root) != (sc.chain[0], None, sc.base_kind, sc.roots[&sc.chain[0]]) {
        return Err(format!("base is slot {} ({:?})", base.slot, base.kind));
    }
    let mut live: BTreeMap<u64, Hash> = BTreeMap::new();
    let mut finalized: BTreeSet<u64> = BTreeSet::new();
    for item in &run.log {
        match *item {
            Ok(i) => {
                let c = &run.committed[i];
                if i > 0 {
                    let Some(p) = c.parent else { return Err(format!("slot {} frozen without a parent", c.slot)) };
                    let ok = sc.versions.get(&c.slot).is_some_and(|v| v.contains(&(p, c.root)));
                    if c.kind != CommitKind::Slot || !ok {
                        return Err(format!("slot {} frozen on {p} ({:?}) with a root no version has", c.slot, c.kind));
                    }
                    if !live.contains_key(&p) && !finalized.contains(&p) {
                        return Err(format!("slot {} frozen on {p}, which is not held", c.slot));
                    }
                }
                if live.insert(c.slot, c.root).is_some() {
                    return Err(format!("slot {} frozen again before its old version was abandoned", c.slot));
                }
            }
            Err(i) => {
                let ch = &run.changes[i];
                let held = live.get(&ch.slot).copied();
                if held != Some(ch.root) {
                    return Err(format!("{ch:?} does not name the held root {held:?}"));
                }
                match ch.kind {
                    StatusKind::Confirmed => {}
                    StatusKind::Finalized => {
                        live.remove(&ch.slot);
                        finalized.insert(ch.slot);
                    }
                    StatusKind::Abandoned => {
                        live.remove(&ch.slot);
                    }
                }
            }
        }
    }
    for (kind, commitment) in
        [(StatusKind::Confirmed, Commitment::Confirmed), (StatusKind::Finalized, Commitment::Finalized)]
    {
        let want = sc.expected_last(commitment) + 1;
        let got: Vec<&StatusChange> = run.changes.iter().filter(|c| c.kind == kind).collect();
        if got.len() != want {
            return Err(format!(
                "{kind:?}: reported {:?}, expected the chain prefix {:?}",
                got.iter().map(|c| c.slot).collect::<Vec<_>>(),
                &sc.chain[..want.min(sc.chain.len())]
            ));
        }
        for (i, c) in got.iter().enumerate() {
            let slot = sc.chain[i];
            let parent = i.checked_sub(1).map(|j| sc.chain[j]);
            if (c.slot, c.parent) != (slot, parent) || c.root != sc.roots[&slot] {
                return Err(format!("{kind:?} change {i} is {c:?}, expected slot {slot} on {parent:?}"));
            }
            let bank = if sc.hints { parent.map(bank_hash) } else { None };
            if c.parent_bank_hash != bank {
                return Err(format!("{kind:?}: slot {slot} carries parent bank hash {:?}", c.parent_bank_hash));
            }
        }
    }
    Ok(())
}

/// Checks that the commits walk the chain from its base with the model's roots.
pub(crate) fn check(sc: &Scenario, commitment: Commitment, committed: &[Committed<impl Sized>]) -> Result<(), String> {
    let want = sc.expected_last(commitment) + 1;
    if committed.len() != want {
        return Err(format!(
            "{commitment:?}: committed {:?}, expected the chain prefix {:?}",
            committed.iter().map(|c| c.slot).collect::<Vec<_>>(),
            &sc.chain[..want.min(sc.chain.len())]
        ));
    }
    for (i, c) in committed.iter().enumerate() {
        let slot = sc.chain[i];
        let parent = i.checked_sub(1).map(|j| sc.chain[j]);
        let kind = if i == 0 { sc.base_kind } else { CommitKind::Slot };
        if (c.slot, c.parent, c.kind) != (slot, parent, kind) {
            return Err(format!(
                "{commitment:?}: commit {i} is ({}, {:?}, {:?}), expected slot {slot} parent {parent:?}",
                c.slot, c.parent, c.kind
            ));
        }
        if c.root != sc.roots[&slot] {
            return Err(format!("{commitment:?}: wrong root at slot {slot}"));
        }
        let bank = if sc.hints { parent.map(bank_hash) } else { None };
        if c.parent_bank_hash != bank {
            return Err(format!("{commitment:?}: slot {slot} carries parent bank hash {:?}", c.parent_bank_hash));
        }
    }
    Ok(())
}

/// A live account write with data derived from its arguments.
pub(crate) fn acct(slot: u64, key: u8, lamports: u64, write_version: u64) -> Acct {
    Acct {
        slot,
        pubkey: [key; 32],
        lamports,
        owner: [7; 32],
        executable: false,
        data: vec![key; usize::from(key % 5) + 1],
        write_version,
        is_startup: false,
    }
}

/// The same write as a startup account.
pub(crate) fn startup(slot: u64, key: u8, lamports: u64, write_version: u64) -> Acct {
    Acct { is_startup: true, ..acct(slot, key, lamports, write_version) }
}

/// The SlotHashes write a bank makes when created from `parent`.
pub(crate) fn slot_hashes(slot: u64, parent: u64, write_version: u64) -> Acct {
    Acct {
        slot,
        pubkey: SLOT_HASHES_SYSVAR,
        lamports: 1_000,
        owner: [9; 32],
        executable: false,
        data: slot_hashes_data(parent),
        write_version,
        is_startup: false,
    }
}
