//! Fuzz target bodies, one `fn(&[u8])` per target, grouped by the crate whose decoders they
//! drive. The targets in `fuzz_targets/` only call them; each crate's `fuzz_regressions` test
//! includes its module and replays the checked-in seeds and regression inputs through it, so a
//! fixed finding stays fixed in the normal test run.

pub mod plugin;
pub mod relayer;
pub mod replay;
pub mod rpc;
pub mod seeds;
pub mod snapshot;
pub mod verify;
pub mod votes;
