//! Where a request runs: inline on the async worker that read it, or on the blocking pool.

use tokio::sync::Semaphore;

use super::Shared;
#[cfg(doc)]
use super::config::Config;
use crate::methods::{Class, Method};

/// Where request handling runs.
///
/// A proof takes tens of microseconds of CPU, comparable to the HTTP work around it, so moving
/// each one to the blocking pool costs more in hand-offs than it saves; a large batch, though,
/// should not hold a reactor thread for long. `hyades-bench --execution` measures the choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Execution {
    /// On the async worker that read the request.
    Inline,
    /// On tokio's blocking pool.
    Blocking,
    /// Inline for a single request of up to [`AUTO_INLINE_MAX_BYTES`] of a [`Class::Light`]
    /// method; on the blocking pool for the rest: batches, larger bodies, and the
    /// [`Class::Heavy`] methods, whose work grows with their parameters
    /// (`getMultipleAccountProofs`, `getStateRoots` and `getRootRecords`: many keys, ranges;
    /// `getSlotVotes`: thousands of votes at mainnet sizes).
    Auto,
}

/// The largest body [`Execution::Auto`] handles inline: room for a few single-proof requests.
pub const AUTO_INLINE_MAX_BYTES: usize = 1024;

impl Execution {
    /// Whether `body` is handled on the blocking pool.
    pub(super) fn blocking(self, body: &[u8]) -> bool {
        match self {
            Execution::Inline => false,
            Execution::Blocking => true,
            Execution::Auto => {
                if body.len() > AUTO_INLINE_MAX_BYTES {
                    return true;
                }
                let first = body.iter().find(|b| !b.is_ascii_whitespace());
                // A backslash could spell a method name in escapes; such bodies are not worth
                // the risk of a misjudged heavy one. The body is not parsed here: a heavy
                // method's name anywhere in it is enough.
                first != Some(&b'{')
                    || body.contains(&b'\\')
                    || Method::all().filter(|m| m.class() == Class::Heavy).any(|m| {
                        let name = m.name().as_bytes();
                        body.windows(name.len()).any(|w| w == name)
                    })
            }
        }
    }
}

impl std::str::FromStr for Execution {
    type Err = UnknownExecution;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "inline" => Ok(Self::Inline),
            "blocking" => Ok(Self::Blocking),
            "auto" => Ok(Self::Auto),
            other => Err(UnknownExecution(other.to_string())),
        }
    }
}

/// An execution mode [`Execution`] does not name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown execution mode {0:?} (expected inline, blocking or auto)")]
pub struct UnknownExecution(pub String);

/// Four per core: proofs fault in pages of the mapped files, so a few more than the cores keep
/// the CPUs busy while some wait on the disk.
pub(super) fn max_blocking(configured: usize) -> usize {
    match configured {
        0 => 4 * std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n.min(Semaphore::MAX_PERMITS),
    }
}

/// Runs `f` on the blocking pool once one of the [`Config::max_blocking`] permits is free.
pub(super) async fn run_blocking<T: Send + 'static>(s: &Shared, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    s.metrics.blocking_requests.inc();
    let out = match s.blocking.clone().acquire_owned().await {
        Ok(permit) => tokio::task::spawn_blocking(move || {
            let out = f();
            drop(permit);
            out
        })
        .await
        .map_err(|e| log::error!("request handler failed: {e}"))
        .ok(),
        // The semaphore is never closed.
        Err(_) => None,
    };
    s.metrics.blocking_requests.dec();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_runs_only_light_single_requests_inline() {
        let light =
            br#"{"jsonrpc":"2.0","id":1,"method":"getAccountProof","params":["11111111111111111111111111111111"]}"#;
        assert!(!Execution::Auto.blocking(light));
        assert!(!Execution::Auto.blocking(br#"  {"jsonrpc":"2.0","id":1,"method":"getStateRoot"}"#));
        for heavy in [
            &br#"[{"jsonrpc":"2.0","id":1,"method":"getHealth"}]"#[..],
            br#"{"jsonrpc":"2.0","id":1,"method":"getRootRecords","params":[0,5000]}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"getStateRoots","params":[0,999]}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"getMultipleAccountProofs","params":[[]]}"#,
            // A method name spelt with an escape is not trusted to be light.
            br#"{"jsonrpc":"2.0","id":1,"method":"getRootRecord\u0073","params":[0,5000]}"#,
        ] {
            assert!(Execution::Auto.blocking(heavy), "{}", String::from_utf8_lossy(heavy));
        }
        assert!(Execution::Auto.blocking(&[b' '; AUTO_INLINE_MAX_BYTES + 1]));
        assert!(Execution::Blocking.blocking(light));
        assert!(!Execution::Inline.blocking(br#"[{"method":"getRootRecords"}]"#));
    }

    #[test]
    fn each_method_runs_where_its_class_says() {
        let mut heavy = Vec::new();
        for m in Method::all() {
            let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{}","params":[]}}"#, m.name());
            // A light method whose name held a heavy one's would run on the pool too.
            assert_eq!(Execution::Auto.blocking(body.as_bytes()), m.class() == Class::Heavy, "{}", m.name());
            if m.class() == Class::Heavy {
                heavy.push(m.name());
            }
        }
        assert_eq!(
            heavy,
            ["getMultipleAccountProofs", "getStateRoots", "getRootRecords", "getSlotVotes", "getEpochTransition"]
        );
    }
}
