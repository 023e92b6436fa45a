//! `GET /metrics` over plain HTTP/1.1 on a thread of its own, one connection at a time (plenty for
//! a scraper, and no async runtime inside the validator).
//!
//! The thread never touches the module's lock: a scrape reads atomics only, so it can neither
//! wait for replay nor make replay wait. Each connection has short read and write timeouts, so a
//! silent client holds the thread for seconds at most, and a panic while answering (there is no
//! known one) is caught, so the thread goes on serving.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::thread::JoinHandle;
use std::time::Duration;

use super::{Sources, render};

/// How long a connection may take to send its request or take the answer.
const IO_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the idle thread looks for a connection or a stop.
const POLL: Duration = Duration::from_millis(50);

/// The HTTP responder; stops (and joins its thread) when dropped.
pub(crate) struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for MetricsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsServer").field("addr", &self.addr).finish_non_exhaustive()
    }
}

impl MetricsServer {
    /// Binds `addr` and serves `GET /metrics` until dropped.
    pub(crate) fn start(addr: SocketAddr, sources: Sources) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr)?;
        // Non-blocking accept polled with a short sleep, so stopping needs no wake-up connection.
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("aldb-bank-metrics".into())
                .spawn(move || serve(&listener, &sources, &stop))?
        };
        Ok(Self { addr, stop, thread: Some(thread) })
    }

    /// The bound address (with the real port when port 0 was asked for).
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(listener: &TcpListener, sources: &Sources, stop: &AtomicBool) {
    while !stop.load(Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => match catch_unwind(AssertUnwindSafe(|| respond(stream, sources))) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => log::debug!("aldb-bank: metrics request failed: {e}"),
                Err(_) => log::error!("aldb-bank: answering a metrics request panicked"),
            },
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(e) => {
                // Out of descriptors, say: wait rather than spin.
                log::warn!("aldb-bank: metrics accept failed: {e}");
                std::thread::sleep(POLL * 4);
            }
        }
    }
}

fn respond(mut stream: TcpStream, sources: &Sources) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut buf = [0u8; 4096];
    let mut len = 0;
    // The request head, up to its blank line; only the request line matters, a body is ignored.
    while len < buf.len() {
        let n = stream.read(buf.get_mut(len..).unwrap_or_default())?;
        if n == 0 {
            break;
        }
        len += n;
        let head = buf.get(..len).unwrap_or_default();
        if head.windows(4).any(|w| w == b"\r\n\r\n") || head.windows(2).any(|w| w == b"\n\n") {
            break;
        }
    }
    let head = String::from_utf8_lossy(buf.get(..len).unwrap_or_default());
    let mut words = head.lines().next().unwrap_or("").split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, ctype, body) = match (method, path) {
        ("GET", "/metrics") => ("200 OK", "text/plain; version=0.0.4; charset=utf-8", render(sources)),
        ("GET", "/") => ("200 OK", "text/plain; charset=utf-8", "aldb-bank: metrics at /metrics\n".to_string()),
        ("GET", _) => ("404 Not Found", "text/plain; charset=utf-8", "not found\n".to_string()),
        _ => ("405 Method Not Allowed", "text/plain; charset=utf-8", "only GET\n".to_string()),
    };
    let header = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(header.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    stream.flush()
}
