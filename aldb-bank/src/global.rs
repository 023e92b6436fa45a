//! The one instance a validator process keeps.

use std::sync::{LazyLock, Mutex};

use crate::roots::BankRoots;

/// The environment variable that sets the module's worker threads (default: up to 4, fewer on
/// smaller machines). The root never depends on it.
pub const THREADS_ENV: &str = "ALDB_BANK_THREADS";

static GLOBAL: LazyLock<Mutex<BankRoots>> = LazyLock::new(|| {
    let available = std::thread::available_parallelism().map_or(1, usize::from);
    let threads =
        std::env::var(THREADS_ENV).ok().and_then(|v| v.parse::<usize>().ok()).unwrap_or(available.min(4)).max(1);
    Mutex::new(BankRoots::new(threads))
});

/// The process-wide module. Banks of every fork freeze through it, serialised by the lock; the
/// engine it wraps is built on first use (no tree is held before a bank with the feature active
/// freezes).
pub fn global() -> &'static Mutex<BankRoots> {
    &GLOBAL
}
