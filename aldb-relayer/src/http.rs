//! The relayer's minimal HTTP/1.1 responder, shared by `/metrics` and `/roots`: one `GET` per
//! connection, the request head read up to [`MAX_HEAD`] bytes, the whole exchange within
//! [`TIMEOUT`], at most [`MAX_CONNECTIONS`] at once, then the connection is closed. Its answers
//! are a handful of counters or one bounded page, so a web framework would add nothing.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};

/// The longest request head read; the rest of a longer one is not read.
pub(crate) const MAX_HEAD: usize = 8192;

/// The budget of one connection, from accepting it to the last byte of the answer.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(5);

/// Connections served at once per listener; further ones wait in the kernel's backlog.
pub(crate) const MAX_CONNECTIONS: usize = 64;

/// An answer: status line text, content type and body.
pub(crate) struct Response {
    pub(crate) status: &'static str,
    pub(crate) content_type: &'static str,
    pub(crate) body: String,
}

impl Response {
    pub(crate) fn new(status: &'static str, content_type: &'static str, body: String) -> Self {
        Self { status, content_type, body }
    }

    pub(crate) fn not_found() -> Self {
        Self::new("404 Not Found", "text/plain", "not found\n".to_string())
    }
}

/// Binds a listener.
pub(crate) async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Serves `listener` until `shutdown`, answering each request's target (`/metrics`,
/// `/roots?from=5`) with `handle`; a request other than `GET` gets 405.
pub(crate) async fn serve<H>(listener: TcpListener, handle: H, mut shutdown: watch::Receiver<bool>)
where
    H: Fn(&str) -> Response + Clone + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(permit) = (tokio::select! {
            p = slots.clone().acquire_owned() => p,
            _ = crate::follow::stopped(&mut shutdown) => return,
        }) else {
            return;
        };
        let tcp = tokio::select! {
            r = listener.accept() => match r {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    log::warn!("HTTP listener: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = crate::follow::stopped(&mut shutdown) => return,
        };
        let handle = handle.clone();
        tokio::spawn(async move {
            let _ = tokio::time::timeout(TIMEOUT, answer(tcp, handle)).await;
            drop(permit);
        });
    }
}

async fn answer<H: Fn(&str) -> Response>(mut tcp: TcpStream, handle: H) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < MAX_HEAD {
        let n = tcp.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let line = buf.split(|&b| b == b'\r' || b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split(' ');
    let response = match (parts.next(), parts.next()) {
        (Some("GET"), Some(target)) => handle(target),
        _ => Response::new("405 Method Not Allowed", "text/plain", "only GET is served\n".to_string()),
    };
    let head = format!(
        "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        response.status,
        response.content_type,
        response.body.len()
    );
    tcp.write_all(head.as_bytes()).await?;
    tcp.write_all(response.body.as_bytes()).await?;
    tcp.shutdown().await
}
