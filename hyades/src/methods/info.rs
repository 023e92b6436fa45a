//! `getHealth` and `getVersion`: about the service itself.

use aldb_format::QueryError;
use serde_json::{Value, json};

use super::params::at_most;
use super::{Call, Class, Handler};
use crate::rpc::{Limits, RpcError};

/// `getHealth([])`: `"ok"` once something is published.
pub(crate) struct GetHealth;

impl Handler for GetHealth {
    const NAME: &'static str = "getHealth";
    const CLASS: Class = Class::Light;
    type Params = ();

    fn params(params: &[Value], _: &Limits) -> Result<(), RpcError> {
        at_most(params, 0)
    }

    fn run((): (), call: &mut Call<'_, '_>) -> Result<String, RpcError> {
        match call.rpc.hyades.latest() {
            Some(_) => Ok(r#""ok""#.to_string()),
            None => Err(call.rpc.query_error(QueryError::NothingPublished)),
        }
    }
}

/// `getVersion([])`: the service's version and the formats it speaks.
pub(crate) struct GetVersion;

impl Handler for GetVersion {
    const NAME: &'static str = "getVersion";
    const CLASS: Class = Class::Light;
    type Params = ();

    fn params(params: &[Value], _: &Limits) -> Result<(), RpcError> {
        at_most(params, 0)
    }

    fn run((): (), _: &mut Call<'_, '_>) -> Result<String, RpcError> {
        Ok(json!({
            "hyades": env!("CARGO_PKG_VERSION"),
            "snapshotFormat": aldb_format::FORMAT_VERSION,
            "commitment": aldb_verify::spec::COMMITMENT_VERSION,
        })
        .to_string())
    }
}
