//! Hyades: the read side of aldb. It serves an aldb snapshot directory — accounts with proofs
//! at any kept slot, and the stream of new roots — to light clients and bridge relayers.
//!
//! One listener speaks JSON-RPC 2.0 over HTTP `POST /` and over WebSocket (`GET /` or
//! `GET /ws`, upgraded); a second one serves Prometheus metrics at `/metrics`. The methods, their
//! parameters and the error codes are documented in the crate's `README.md` and in [`rpc`].
//! Root records (`docs/SPEC.md` §9) from the directory's `records/` log are served by
//! `getRootRecord`, `getRootRecords` and `recordSubscribe` ([`records`]); the vote evidence of a
//! slot (`docs/SPEC.md` §10.5) from the directory's vote-evidence log by `getSlotVotes` ([`votes`]).
//!
//! ```no_run
//! # async fn run() -> Result<(), hyades::ServeError> {
//! let service = hyades::Service::start(hyades::Config::new("/var/lib/aldb/snapshots")).await?;
//! println!("serving on {}", service.local_addr());
//! service.shutdown().await;
//! # Ok(())
//! # }
//! ```

pub mod budget;
mod conn;
mod encode;
mod error;
pub mod levels;
mod methods;
pub mod metrics;
mod protocol;
pub mod records;
pub mod replica;
pub mod rpc;
mod server;
pub mod source;
pub mod votes;

pub use budget::{BUSY_MESSAGE, Busy, Reservation, ResponseBudget};
pub use error::ServeError;
pub use levels::Level;
pub use methods::{Class, Method};
pub use metrics::Metrics;
pub use records::RecordFeed;
pub use replica::{FETCH_WAIT, Replica, StoreConfig};
pub use rpc::{Limits, Rpc, RpcError, codes};
pub use server::{
    AUTO_INLINE_MAX_BYTES, BUSY_CLOSE, Config, DEFAULT_HEADER_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_CONNECTIONS,
    DEFAULT_WRITE_TIMEOUT, DEFAULT_WS_IDLE_TIMEOUT, DEFAULT_WS_QUEUE_BYTES, Execution, NOT_READING_CLOSE,
    SLOW_SUBSCRIBER_CLOSE, Service, UnknownExecution, default_max_buffered_bytes,
};
pub use source::Source;
pub use votes::VoteFeed;
