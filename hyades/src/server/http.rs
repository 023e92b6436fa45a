//! The HTTP side of the RPC listener: `POST /` (JSON-RPC), `GET /health`, CORS and the
//! connection guard's notion of a request in progress.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde_json::json;

use super::execution::run_blocking;
use super::{RESERVE_AHEAD, Shared};
use crate::budget::{Busy, Reservation};
use crate::conn::ConnHandle;
use crate::rpc::{RpcError, codes};

/// Lets a web page on any origin call the API, as Solana's RPC nodes do: everything served is
/// public and read-only, no request carries credentials, and a page checks every answer itself
/// (`@aldb/verify`), so there is nothing a foreign origin could gain. Preflights are answered
/// here, before any work.
pub(super) async fn cors(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    if req.method() == axum::http::Method::OPTIONS {
        return (
            StatusCode::NO_CONTENT,
            [
                (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
                (header::ACCESS_CONTROL_ALLOW_METHODS, "GET, POST, OPTIONS"),
                (header::ACCESS_CONTROL_ALLOW_HEADERS, "content-type"),
                (header::ACCESS_CONTROL_MAX_AGE, "86400"),
            ],
        )
            .into_response();
    }
    let mut response = next.run(req).await;
    response.headers_mut().insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, header::HeaderValue::from_static("*"));
    response
}

/// Tells the connection guard a request is being handled (its head is complete), and that the
/// connection waits for the next one once the answer is handed back.
pub(super) async fn track_request(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let conn = req.extensions().get::<ConnectInfo<ConnHandle>>().map(|c| c.0.clone());
    if let Some(c) = &conn {
        c.busy();
    }
    let response = next.run(req).await;
    if let Some(c) = &conn {
        c.idle();
    }
    response
}

fn json_body(status: StatusCode, body: Vec<u8>) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// `GET /health`: 200 "ok" once something is published, 503 before (as Solana's `/health`).
pub(super) async fn health(State(s): State<Arc<Shared>>) -> Response {
    match s.rpc.hyades().latest() {
        Some(_) => (StatusCode::OK, "ok").into_response(),
        None => (StatusCode::SERVICE_UNAVAILABLE, "nothing published").into_response(),
    }
}

/// `POST /`: one JSON-RPC request or batch.
pub(super) async fn rpc_http(State(s): State<Arc<Shared>>, body: Body) -> Response {
    let limit = s.rpc.limits().max_body_bytes;
    // A body trickled in slowly holds the connection like a slow head does.
    let collected = match tokio::time::timeout(s.header_timeout, Limited::new(body, limit).collect()).await {
        Ok(c) => c,
        Err(_) => {
            s.metrics.limit_header_timeout.inc();
            let msg = format!("Invalid request: body not received within {} s", s.header_timeout.as_secs_f64());
            let mut r =
                json_body(StatusCode::REQUEST_TIMEOUT, s.rpc.error_body(&RpcError::new(codes::INVALID_REQUEST, msg)));
            r.headers_mut().insert(header::CONNECTION, header::HeaderValue::from_static("close"));
            return r;
        }
    };
    let bytes = match collected {
        Ok(c) => c.to_bytes(),
        Err(e) => {
            let (status, err) = if e.downcast_ref::<LengthLimitError>().is_some() {
                let msg = format!("Invalid request: body exceeds the limit of {limit} bytes");
                (StatusCode::PAYLOAD_TOO_LARGE, RpcError::with_data(codes::INVALID_REQUEST, msg, json!({"max": limit})))
            } else {
                (
                    StatusCode::BAD_REQUEST,
                    RpcError::new(codes::INVALID_REQUEST, format!("Invalid request: cannot read body: {e}")),
                )
            };
            return json_body(status, s.rpc.error_body(&err));
        }
    };
    // Held before any work, so a spent budget refuses the request at once.
    let Some(mut held) = s.budget.try_reserve(RESERVE_AHEAD) else { return busy_response(&s) };
    let out = if s.execution.blocking(&bytes) {
        let s2 = s.clone();
        let done = run_blocking(&s, move || {
            let out = s2.rpc.handle_held(&bytes, None, &mut held);
            (out, held)
        })
        .await;
        match done {
            Some((out, back)) => {
                held = back;
                out
            }
            None => {
                let err = RpcError::new(codes::INTERNAL_ERROR, "Internal error");
                return json_body(StatusCode::OK, s.rpc.error_body(&err));
            }
        }
    } else {
        s.rpc.handle_held(&bytes, None, &mut held)
    };
    match out {
        Ok(Some(body)) => {
            held.shrink_to(body.len());
            // The bytes stay held until hyper drops the last of them: written to the socket, or
            // the connection gone.
            let body = Bytes::from_owner(HeldBody { body, _held: held });
            (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], Body::from(body)).into_response()
        }
        // Only notifications: JSON-RPC says nothing is returned.
        Ok(None) => StatusCode::NO_CONTENT.into_response(),
        Err(Busy) => {
            drop(held);
            busy_response(&s)
        }
    }
}

/// An HTTP answer's bytes and what they hold of the response budget.
struct HeldBody {
    body: Vec<u8>,
    _held: Reservation,
}

impl AsRef<[u8]> for HeldBody {
    fn as_ref(&self) -> &[u8] {
        &self.body
    }
}

/// `503` with [`codes::SERVER_BUSY`]: the response budget is spent. The answer is small and not
/// counted in the budget.
fn busy_response(s: &Shared) -> Response {
    let mut r = json_body(StatusCode::SERVICE_UNAVAILABLE, s.rpc.busy_body(s.budget.cap()));
    r.headers_mut().insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
    r
}
