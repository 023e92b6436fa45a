//! The aldb v1 state commitment, small enough for a light client.
//!
//! This crate holds everything a verifier needs and nothing else: the hash functions of the
//! commitment ([`spec`]), proofs and their verification ([`proof`]), the proof's binary wire
//! format ([`wire`]) and, with the `json` feature, its JSON form (`json`); root records and
//! their ed25519 attestations ([`record`]); the vote chain, which accepts a root because the
//! validators voted for a bank hash that commits to it ([`votes`]); the epoch chain, which
//! follows the validator set from one trusted set through every epoch ([`epochs`]). It is `no_std`
//! (with `alloc`) so it runs in constrained clients; the engine builds on it, never the other
//! way round.
//!
//! A light client receives a proof, decodes it, and verifies it against a root it trusts:
//!
//! ```
//! use aldb_verify::{Claim, Proof, EMPTY_ROOT};
//!
//! // The proof that any account is absent from the empty tree: an empty terminal, no siblings.
//! let bytes = [aldb_verify::WIRE_VERSION, 0x00, 0x00, 0x00];
//! let proof = Proof::from_bytes(&bytes)?;
//! assert_eq!(proof.verify(&EMPTY_ROOT, &[42u8; 32]), Ok(Claim::Absent));
//! # Ok::<(), aldb_verify::DecodeError>(())
//! ```
//!
//! Decoding ([`Proof::from_bytes`], or `Proof::from_json_str` with `json`) checks the format
//! and the shape that does not depend on the key; verification ([`Proof::verify`]) checks the
//! rest and the hashes. Neither panics on any input.
//!
//! Features: `std` (default) adds `std::error::Error` impls and runtime SIMD detection in the
//! hash; `json` adds the JSON form and base58 encoding. Bounded base58 decoding of fixed-length
//! values ([`base58`]) needs no feature.
#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

pub mod base58;
pub mod epochs;
#[cfg(feature = "json")]
pub mod json;
pub mod proof;
pub mod record;
#[cfg(feature = "json")]
pub mod record_json;
pub mod spec;
pub mod votes;
pub mod wire;

pub use base58::{Base58Error, Excerpt};
#[cfg(feature = "json")]
pub use json::{JSON_VERSION, JsonError, hash_from_base58, hash_to_base58};
pub use proof::{Claim, Proof, Sibling, Terminal, VerifyError};
pub use record::{Attestation, BlockInfo, Commitment, ParentLink, Quorum, RecordError, RootRecord, SignatureError};
pub use spec::{EMPTY_ROOT, Hash};
pub use wire::{DecodeError, WIRE_VERSION};
