//! The one instance a validator process keeps.

use std::sync::{LazyLock, Mutex};

use crate::roots::BankRoots;

/// The environment variable that sets the module's worker threads (default: up to 4, fewer on
/// smaller machines; a sink config's `threads` wins over it). The root never depends on it.
pub const THREADS_ENV: &str = "ALDB_BANK_THREADS";

static GLOBAL: LazyLock<Mutex<BankRoots>> = LazyLock::new(|| Mutex::new(BankRoots::from_env()));

/// The process-wide module. Banks of every fork freeze through it, serialised by the lock; the
/// engine it wraps is built on first use (no tree is held before a bank with the feature active
/// freezes). The sink ([`crate::CONFIG_ENV`]) is configured and started at the first call; a
/// config it cannot use makes every call return the reason ([`crate::BankError::Config`]).
pub fn global() -> &'static Mutex<BankRoots> {
    &GLOBAL
}
