//! The synthetic workload `aldb simulate` writes, named by its parameters, and a model of its
//! account states computed from `aldb_workload` alone.

use std::collections::HashMap;

use aldb_workload::{KeyWindow, SlotAccounts, SlotOps};

/// Account states: `pubkey -> (lamports, data)`.
pub type State = HashMap<[u8; 32], (u64, Vec<u8>)>;

/// The parameters that make one workload: the same ones draw the same accounts every run.
#[derive(Clone, Copy, Debug)]
pub struct Workload {
    pub seed: u64,
    pub leaves_log2: u32,
    pub slot_updates: usize,
    pub data_len: usize,
}

impl Workload {
    /// The `aldb simulate` arguments that select this workload.
    pub fn args(&self) -> Vec<String> {
        [
            ("--seed", self.seed.to_string()),
            ("--leaves-log2", self.leaves_log2.to_string()),
            ("--slot-updates", self.slot_updates.to_string()),
            ("--data-len", self.data_len.to_string()),
        ]
        .into_iter()
        .flat_map(|(k, v)| [k.to_string(), v])
        .collect()
    }

    /// The state after each slot `0..=last`, and one past the newest key index used by then.
    pub fn model(&self, last: u64) -> Vec<(State, u64)> {
        let n = 1u64 << self.leaves_log2;
        let apply = |state: &mut State, s: &SlotAccounts| {
            for i in 0..s.len() {
                if s.lamports[i] == 0 {
                    state.remove(&s.pubkeys[i]);
                } else {
                    state.insert(s.pubkeys[i], (s.lamports[i], s.data(i).to_vec()));
                }
            }
        };
        let mut state = State::new();
        apply(&mut state, &SlotAccounts::prefill(self.seed, 0, n as usize, self.data_len));
        let mut window = KeyWindow::prefilled(n);
        let mut out = vec![(state.clone(), window.hi)];
        for slot in 1..=last {
            let ops = SlotOps::draw(self.seed, slot, self.slot_updates, &mut window);
            apply(&mut state, &SlotAccounts::slot_new(self.seed, slot, &ops, self.data_len));
            out.push((state.clone(), window.hi));
        }
        out
    }
}

/// The value of field `key` (`slot=`, `root=`, `seq=`) of a `published` line `aldb simulate`
/// prints, if the line has it.
pub fn published_field(line: &str, key: &str) -> Option<String> {
    line.split_whitespace().find_map(|f| f.strip_prefix(key)).map(str::to_string)
}
