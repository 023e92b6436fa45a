//! aldb-relayer: follows the signed root records of several Hyades servers and accepts a state
//! root once `k` of `n` configured identities attested the same record and that record extends
//! the chain accepted so far (`docs/SPEC.md` §9.4); or, with `trust: "votes"`, follows their root
//! feeds and accepts a root on the votes of more than 2/3 of its epoch's validator set, the set
//! followed from a checkpoint (`docs/SPEC.md` §11, [`votes`]).
//!
//! - [`config`]: the JSON5 configuration file.
//! - [`chain`]: merging attestations across endpoints, the quorum and chain rules, faults.
//! - [`store`]: the output file of accepted roots and the atomically replaced cursor, and how a
//!   restart reconciles them.
//! - [`follow`]: reading one server's record feed ([`follow::parse_message`]).
//! - [`Relayer`]: one WebSocket follower per endpoint feeding one acceptor.
//! - [`roots`]: accepted roots as JSON, for `--json-lines` and `GET /roots?from=S`.
//!
//! ```no_run
//! # async fn run() -> anyhow::Result<()> {
//! let config = aldb_relayer::Config::from_file(std::path::Path::new("relayer.json5"))?;
//! let (_stop, stopped) = tokio::sync::watch::channel(false);
//! aldb_relayer::Relayer::new(config).run(stopped).await?;
//! # Ok(())
//! # }
//! ```

pub mod chain;
pub mod config;
mod error;
pub mod follow;
mod http;
pub mod metrics;
mod quiet;
mod ratelog;
mod relayer;
pub mod roots;
pub mod stats;
pub mod store;
pub mod votes;
mod waiting;

pub use chain::{Accepted, Acceptor, Rules, Start, Tip};
pub use config::{Config, Trust};
pub use error::{ConfigError, RelayError, StoreError};
pub use relayer::{AcceptHook, Relayer};
pub use stats::Stats;
pub use votes::RootHook;
