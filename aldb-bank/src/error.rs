//! Why the module refused a call.

use std::net::SocketAddr;
use std::sync::Arc;

/// A refused call. The caller (a validator with the feature active) halts on any of them: a bank
/// hash is never produced without the root.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BankError {
    /// A freeze named a parent the module does not hold; give the parent's state to
    /// [`crate::BankRoots::build_base`] first.
    #[error("bank {slot}'s parent {parent} is not held; its state must be built first")]
    UnknownParent {
        /// The bank frozen.
        slot: u64,
        /// The parent it named.
        parent: u64,
    },
    /// The fork engine refused (a bound passed, a slot at or below the rooted one, or a
    /// divergence after a fork switch, which is an engine bug).
    #[error(transparent)]
    Fork(#[from] aldb_core::ForkError),
    /// The tree could not be set up (its worker threads).
    #[error(transparent)]
    Core(#[from] aldb_core::CoreError),
    /// The sink's config file ([`crate::CONFIG_ENV`]) was refused. Every call returns it: the
    /// node stops at its first bank rather than run without the files and records asked for.
    #[error(transparent)]
    Config(#[from] crate::ConfigError),
    /// The sink could not start with a valid config (its directory, its record log, its thread).
    /// Every call returns it, as for [`BankError::Config`].
    #[error("aldb-bank sink cannot start: {0}")]
    SinkStart(#[source] Arc<SinkStartError>),
}

/// Why the sink could not start with a valid config ([`BankError::SinkStart`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SinkStartError {
    /// The node pipeline could not start (its directory, its record log, its thread).
    #[error(transparent)]
    Node(#[from] aldb_node::NodeError),
    /// The metrics address could not be served.
    #[error("cannot serve metrics on {addr}: {source}")]
    Metrics {
        /// The configured address.
        addr: SocketAddr,
        /// Why it could not be served.
        source: aldb_metrics::ServeError,
    },
}
