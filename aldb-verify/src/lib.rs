//! The aldb v1 state commitment, small enough for a light client.
//!
//! This crate holds everything a verifier needs and nothing else: the hash functions of the
//! commitment ([`spec`]), proofs and their verification ([`proof`]), and the proof's binary wire
//! format ([`wire`]). It is `no_std` (with `alloc`) so it runs in constrained clients; the engine
//! builds on it, never the other way round.
#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

pub mod proof;
pub mod spec;

pub use proof::{Claim, Proof, Sibling, Terminal, VerifyError};
pub use spec::{Hash, EMPTY_ROOT};
