//! The JSON-RPC methods, one family to a file. Each method is a function of [`Rpc`] taking its
//! positional parameters and returning its result as JSON text; the parameter checks they share
//! are in `params`.

#[cfg(doc)]
use crate::rpc::Rpc;

mod info;
pub(crate) mod params;
mod proofs;
mod records;
mod roots;
mod slot_votes;
mod subscriptions;
