//! `getHealth` and `getVersion`.

use aldb_format::QueryError;
use serde_json::{Value, json};

use super::params::at_most;
use crate::rpc::{Rpc, RpcError};

impl Rpc {
    /// `getHealth`.
    pub(crate) fn get_health(&self, params: &[Value]) -> Result<String, RpcError> {
        at_most(params, 0)?;
        match self.hyades.latest() {
            Some(_) => Ok(r#""ok""#.to_string()),
            None => Err(self.query_error(QueryError::NothingPublished)),
        }
    }

    /// `getVersion`.
    pub(crate) fn get_version(&self, params: &[Value]) -> Result<String, RpcError> {
        at_most(params, 0)?;
        Ok(json!({
            "hyades": env!("CARGO_PKG_VERSION"),
            "snapshotFormat": aldb_format::FORMAT_VERSION,
            "commitment": aldb_verify::spec::COMMITMENT_VERSION,
        })
        .to_string())
    }
}
