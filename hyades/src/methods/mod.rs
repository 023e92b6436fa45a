//! The JSON-RPC methods Hyades serves, each in one place.
//!
//! A method is a type implementing [`Handler`]: its wire name, its execution [`Class`], whether
//! it needs a WebSocket connection, its parameters (parsed and checked before any work is done,
//! so a refusal names the parameter and costs nothing) and its execution, which writes the result
//! as JSON text. [`METHODS`] lists every method once; the dispatcher ([`Rpc`]), the choice of
//! where a request runs ([`Execution::Auto`](crate::Execution::Auto)) and the per-method metrics
//! all read that table, so nothing else names a method.
//!
//! Adding a method: a type implementing [`Handler`] in the file of its family (or a new file
//! here), and its line in [`METHODS`]. The README's method table documents it for clients.

use std::fmt;

use serde_json::Value;

use crate::rpc::{Hold, Limits, Rpc, RpcError, Subscriptions, codes};

mod epoch_transition;
mod info;
pub(crate) mod params;
mod proofs;
mod records;
mod roots;
mod slot_votes;
mod subscriptions;

/// Every method, once. Metrics index their per-method series by position, so the order is the
/// order of their series.
const METHODS: &[Spec] = &[
    Spec::of::<roots::GetStateRoot>(),
    Spec::of::<proofs::GetAccountProof>(),
    Spec::of::<proofs::GetMultipleAccountProofs>(),
    Spec::of::<roots::GetStateRoots>(),
    Spec::of::<info::GetHealth>(),
    Spec::of::<info::GetVersion>(),
    Spec::of::<subscriptions::RootSubscribe>(),
    Spec::of::<subscriptions::RootUnsubscribe>(),
    Spec::of::<records::GetRootRecord>(),
    Spec::of::<records::GetRootRecords>(),
    Spec::of::<subscriptions::RecordSubscribe>(),
    Spec::of::<subscriptions::RecordUnsubscribe>(),
    Spec::of::<slot_votes::GetSlotVotes>(),
    Spec::of::<epoch_transition::GetEpochTransition>(),
];

/// How a method's work grows, which decides where [`Execution::Auto`](crate::Execution::Auto)
/// runs a single request of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// A bounded amount of work whatever the parameters (one proof, one root): run inline on
    /// the async worker, which is faster than a hand-off for work this small.
    Light,
    /// Work and answer grow with the parameters (many keys, a range of slots, thousands of
    /// votes): run on the blocking pool, so no request holds a reactor thread for long.
    Heavy,
}

/// One JSON-RPC method.
pub(crate) trait Handler {
    /// The wire name.
    const NAME: &'static str;
    /// Where a single request of it runs.
    const CLASS: Class;
    /// Only over WebSocket: over HTTP the method is not found (the subscription methods).
    const WEBSOCKET_ONLY: bool = false;
    /// The checked parameters.
    type Params;
    /// Parses and checks the positional parameters before any work is done.
    fn params(params: &[Value], limits: &Limits) -> Result<Self::Params, RpcError>;
    /// Runs the method; returns its result as JSON text.
    fn run(params: Self::Params, call: &mut Call<'_, '_>) -> Result<String, RpcError>;
}

/// What a method runs with: the service it answers for, the room its result may take and the
/// connection's subscriptions.
pub(crate) struct Call<'a, 'h> {
    /// The snapshots, records, votes, levels, metrics and limits served.
    pub(crate) rpc: &'a Rpc,
    /// Bytes the result may take: a method whose result grows with its parameters stops with
    /// [`codes::RESPONSE_TOO_LARGE`] before it builds a larger one.
    pub(crate) budget: usize,
    subs: Option<&'a mut dyn Subscriptions>,
    hold: &'a mut Hold<'h>,
}

impl<'a, 'h> Call<'a, 'h> {
    pub(crate) fn new(
        rpc: &'a Rpc,
        subs: Option<&'a mut dyn Subscriptions>,
        budget: usize,
        hold: &'a mut Hold<'h>,
    ) -> Self {
        Self { rpc, budget, subs, hold }
    }

    /// Holds `len` bytes of the answer in the server's response budget, before they are built;
    /// false when the budget refused (the method then answers [`crate::rpc::busy_error`]).
    pub(crate) fn hold(&mut self, len: usize) -> bool {
        self.hold.take(len)
    }

    /// The connection's subscriptions; over HTTP, which has none, `method` is not found.
    pub(crate) fn subscriptions(&mut self, method: &str) -> Result<&mut dyn Subscriptions, RpcError> {
        match self.subs.as_deref_mut() {
            Some(subs) => Ok(subs),
            None => Err(RpcError::new(
                codes::METHOD_NOT_FOUND,
                format!("Method not found: {method} is only available over WebSocket"),
            )),
        }
    }
}

/// A method's entry in [`METHODS`]: what the dispatcher, the classifier and the metrics read.
struct Spec {
    name: &'static str,
    class: Class,
    call: fn(&[Value], &mut Call<'_, '_>) -> Result<String, RpcError>,
}

impl Spec {
    const fn of<H: Handler>() -> Self {
        Self { name: H::NAME, class: H::CLASS, call: call::<H> }
    }
}

/// Runs `H`: the transport first, then the parameters, then the work, so a request that cannot
/// be answered is refused before anything is read for it.
fn call<H: Handler>(params: &[Value], call: &mut Call<'_, '_>) -> Result<String, RpcError> {
    if H::WEBSOCKET_ONLY {
        call.subscriptions(H::NAME)?;
    }
    let params = H::params(params, &call.rpc.limits)?;
    H::run(params, call)
}

/// A method Hyades serves: an entry of the method table.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Method(usize);

impl Method {
    /// How many methods there are.
    pub const COUNT: usize = METHODS.len();

    /// Every method, in a fixed order (metrics index by it).
    pub fn all() -> impl ExactSizeIterator<Item = Method> {
        (0..METHODS.len()).map(Method)
    }

    /// The method of a wire name.
    pub fn from_name(name: &str) -> Option<Method> {
        METHODS.iter().position(|s| s.name == name).map(Method)
    }

    /// The method's wire name.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// Where a single request of it runs under [`Execution::Auto`](crate::Execution::Auto).
    pub fn class(self) -> Class {
        self.spec().class
    }

    /// Position in [`Method::all`].
    pub fn index(self) -> usize {
        self.0
    }

    /// Runs the method with its positional `params`.
    pub(crate) fn call(self, params: &[Value], call: &mut Call<'_, '_>) -> Result<String, RpcError> {
        (self.spec().call)(params, call)
    }

    fn spec(self) -> &'static Spec {
        // A `Method` is only made from a position in the table.
        &METHODS[self.0]
    }
}

impl fmt::Debug for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_method_is_found_by_its_name_once() {
        let names: Vec<&str> = Method::all().map(Method::name).collect();
        assert_eq!(
            names,
            [
                "getStateRoot",
                "getAccountProof",
                "getMultipleAccountProofs",
                "getStateRoots",
                "getHealth",
                "getVersion",
                "rootSubscribe",
                "rootUnsubscribe",
                "getRootRecord",
                "getRootRecords",
                "recordSubscribe",
                "recordUnsubscribe",
                "getSlotVotes",
                "getEpochTransition",
            ]
        );
        for (i, m) in Method::all().enumerate() {
            assert_eq!(m.index(), i);
            assert_eq!(Method::from_name(m.name()), Some(m));
        }
        assert_eq!(Method::all().len(), Method::COUNT);
        assert_eq!(Method::from_name("getstateroot"), None);
    }
}
