//! Why a callback, the start in `on_load` or the commit worker's stop failed. agave takes a
//! callback's error as a message, so these become text only at that boundary.

use std::net::SocketAddr;

/// Why a callback failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CallbackError {
    /// A callback came before `on_load` (or after `on_unload`).
    #[error("aldb-plugin is not loaded")]
    NotLoaded,
    /// A block's blockhash is not base58 of 32 bytes.
    #[error("block metadata of slot {slot}: blockhash {excerpt}: {source}")]
    Blockhash {
        slot: u64,
        /// The start of the blockhash as sent.
        excerpt: String,
        source: aldb_verify::JsonError,
    },
    /// An account's address or owner is not 32 bytes.
    #[error("account {what} at slot {slot} is {len} bytes, not 32")]
    KeyLength { what: &'static str, slot: u64, len: usize },
}

/// Why the plugin could not start in `on_load`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StartError {
    #[error("cannot create the adapter: {0}")]
    Adapter(#[source] geyser_adapter::AdapterError),
    /// The node pipeline (snapshot writer, record log, vote-evidence log) could not start.
    #[error(transparent)]
    Node(#[from] aldb_node::NodeError),
    #[error("cannot serve metrics on {addr}: {source}")]
    Metrics { addr: SocketAddr, source: aldb_metrics::ServeError },
    #[error("cannot start the commit worker: {0}")]
    Worker(#[source] std::io::Error),
}

/// Why the commit worker did not stop cleanly.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StopError {
    /// The worker thread panicked; the panic's message is all there is of it.
    #[error("commit worker panicked: {0}")]
    Panicked(String),
    /// The snapshot writer stopped with an error.
    #[error(transparent)]
    Node(#[from] aldb_node::NodeError),
}
