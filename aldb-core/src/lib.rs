//! Pleiades, aldb's commitment engine: an in-memory sparse Merkle tree over account key paths
//! that commits one root per slot.
//!
//! The commitment it computes is the v1 commitment of `docs/SPEC.md`, implemented in
//! [`aldb_verify`]; this crate only decides how to compute it fast:
//!
//! - the key space is split into shards by the top path bits, each applied by one worker with no
//!   lock (see [`Config`]);
//! - inside a shard, every prefix down to the bucket level has a stored hash in an implicit array,
//!   so a node's address is a function of the key and can be prefetched;
//! - a bucket's few leaves live in size-classed slabs, and its compressed subtree is rehashed on
//!   demand;
//! - all the hashes of a level are computed together in SIMD batches.
//!
//! ```
//! use aldb_core::{AccountRef, Config, Pleiades};
//! let mut tree = Pleiades::new(Config::for_leaves(1000, 2))?;
//! let (key, owner) = ([1u8; 32], [2u8; 32]);
//! let acct = AccountRef { pubkey: &key, lamports: 5, owner: &owner, executable: false, data: b"hi" };
//! let root = tree.commit_accounts(&[acct]);
//! let proof = tree.prove_pubkey(&key);
//! assert!(matches!(proof.verify(&root, &key)?, aldb_verify::Claim::Present { .. }));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod account;
mod affinity;
mod blake2s;
mod bucket;
mod bulk;
mod changes;
mod config;
mod error;
pub mod forks;
mod group;
mod huge;
mod levels;
mod multihash;
mod path;
mod pleiades;
mod prefetch;
mod shard;
mod slab;

pub use account::{AccountRef, Update, hash_accounts};
pub use aldb_verify::{Claim, EMPTY_ROOT, Proof, spec::Hash};
pub use bulk::{BulkBuilder, BulkEntry};
pub use changes::{BucketChange, CaptureOptions, ChangeSet, NodeChange};
pub use config::{Config, LEAVES_PER_BUCKET, MAX_BUCKET_BITS, MAX_SHARD_BITS};
pub use error::CoreError;
pub use forks::{ForkCounters, ForkEngine, ForkError, ForkLimits, ForkStats, Rooted};
pub use pleiades::Pleiades;
pub use prefetch::prefetch;
