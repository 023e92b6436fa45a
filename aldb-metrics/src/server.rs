//! `GET /metrics` over plain HTTP/1.1 on a thread of its own, one connection at a time: plenty for
//! a scraper, and no async runtime inside the host.
//!
//! The render function should read atomics only, so a scrape neither waits for the host nor makes
//! it wait. Each connection has short read and write timeouts, so a silent client holds the thread
//! for seconds at most, and a panic while answering is caught, so the thread goes on serving.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a connection may take to send its request or take the answer.
const IO_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the idle thread looks for a connection or a stop.
const POLL: Duration = Duration::from_millis(50);

/// Why [`MetricsServer::start`] could not serve.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The address could not be bound (in use, not local, no permission).
    #[error("cannot bind: {0}")]
    Bind(#[source] std::io::Error),
    /// The bound listener could not be made non-blocking or asked for its address.
    #[error("cannot set up the listener: {0}")]
    Listener(#[source] std::io::Error),
    /// The responder thread could not be started.
    #[error("cannot start the responder thread: {0}")]
    Spawn(#[source] std::io::Error),
}

/// The HTTP responder; stops (and joins its thread) when dropped.
pub struct MetricsServer {
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
    /// Binds `addr` and serves `GET /metrics` with what `render` returns until dropped.
    ///
    /// `name` introduces the host in `GET /` and in log lines; `thread` names the responder's
    /// thread (Linux shows its first 15 bytes).
    pub fn start<F>(addr: SocketAddr, name: &str, thread: &str, render: F) -> Result<Self, ServeError>
    where
        F: Fn() -> String + Send + 'static,
    {
        let listener = TcpListener::bind(addr).map_err(ServeError::Bind)?;
        // Non-blocking accept polled with a short sleep, so stopping needs no wake-up connection.
        listener.set_nonblocking(true).map_err(ServeError::Listener)?;
        let addr = listener.local_addr().map_err(ServeError::Listener)?;
        let stop = Arc::new(AtomicBool::new(false));
        let handle = {
            let stop = stop.clone();
            let name = name.to_string();
            std::thread::Builder::new()
                .name(thread.to_string())
                .spawn(move || serve(&listener, &name, &render, &stop))
                .map_err(ServeError::Spawn)?
        };
        Ok(Self { addr, stop, thread: Some(handle) })
    }

    /// The bound address (with the real port when port 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops the thread and closes the socket (as dropping does).
    pub fn stop(self) {
        drop(self);
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

fn serve(listener: &TcpListener, name: &str, render: &dyn Fn() -> String, stop: &AtomicBool) {
    while !stop.load(Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => match catch_unwind(AssertUnwindSafe(|| respond(stream, name, render))) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => log::debug!("{name}: metrics request failed: {e}"),
                Err(_) => log::error!("{name}: answering a metrics request panicked"),
            },
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(e) => {
                // Out of descriptors, say: wait rather than spin.
                log::warn!("{name}: metrics accept failed: {e}");
                std::thread::sleep(POLL * 4);
            }
        }
    }
}

fn respond(mut stream: TcpStream, name: &str, render: &dyn Fn() -> String) -> std::io::Result<()> {
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
        ("GET", "/metrics") => ("200 OK", "text/plain; version=0.0.4; charset=utf-8", render()),
        ("GET", "/") => ("200 OK", "text/plain; charset=utf-8", format!("{name}: metrics at /metrics\n")),
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    /// One request on a fresh connection; the whole answer, read until the server closes.
    fn ask(addr: SocketAddr, request: &str) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        // Generous: only a hung responder comes near it, and then the test fails instead of hanging.
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    fn server() -> (MetricsServer, Arc<AtomicU64>) {
        let scrapes = Arc::new(AtomicU64::new(0));
        let counted = scrapes.clone();
        let render = move || {
            let n = counted.fetch_add(1, Relaxed) + 1;
            let mut f = crate::Families::default();
            f.counter("test_scrapes_total", "Scrapes answered.", n);
            f.encode()
        };
        let s = MetricsServer::start("127.0.0.1:0".parse().unwrap(), "test", "test-metrics", render).unwrap();
        (s, scrapes)
    }

    #[test]
    fn answers_get_metrics_404_and_405() {
        let (s, scrapes) = server();
        let ok = ask(s.addr(), "GET /metrics?x=1 HTTP/1.1\r\nHost: h\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"), "{ok}");
        let (_, body) = ok.split_once("\r\n\r\n").unwrap();
        assert_eq!(
            body,
            "# HELP test_scrapes_total Scrapes answered.\n# TYPE test_scrapes_total counter\ntest_scrapes_total 1\n"
        );
        assert!(ok.contains(&format!("Content-Length: {}\r\n", body.len())), "{ok}");

        let root = ask(s.addr(), "GET / HTTP/1.1\r\n\r\n");
        assert!(root.starts_with("HTTP/1.1 200 OK\r\n") && root.ends_with("test: metrics at /metrics\n"), "{root}");
        let missing = ask(s.addr(), "GET /other HTTP/1.1\r\n\r\n");
        assert!(missing.starts_with("HTTP/1.1 404 Not Found\r\n"), "{missing}");
        let post = ask(s.addr(), "POST /metrics HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi");
        assert!(post.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"), "{post}");
        let garbage = ask(s.addr(), "\u{0}\u{ff}\n\n");
        assert!(garbage.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"), "{garbage}");
        // Only the GET /metrics rendered.
        assert_eq!(scrapes.load(Relaxed), 1);
        s.stop();
    }

    #[test]
    fn a_silent_client_does_not_block_the_next_one() {
        let (s, _) = server();
        // Connects, sends half a request line and then nothing, holding its socket open.
        let mut silent = TcpStream::connect(s.addr()).unwrap();
        silent.write_all(b"GET /metr").unwrap();
        let ok = ask(s.addr(), "GET /metrics HTTP/1.1\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.ends_with("test_scrapes_total 1\n"), "{ok}");
        // The silent one was dropped without an answer, not served late.
        silent.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut rest = Vec::new();
        assert!(silent.read_to_end(&mut rest).map_or(true, |_| rest.is_empty()), "{rest:?}");
    }

    #[test]
    fn a_panicking_render_leaves_the_server_serving() {
        let calls = Arc::new(AtomicU64::new(0));
        let counted = calls.clone();
        let render = move || {
            if counted.fetch_add(1, Relaxed) == 0 {
                std::panic::panic_any("first scrape fails");
            }
            "ok\n".to_string()
        };
        let s = MetricsServer::start("127.0.0.1:0".parse().unwrap(), "test", "test-metrics", render).unwrap();
        let first = ask(s.addr(), "GET /metrics HTTP/1.1\r\n\r\n");
        assert!(first.is_empty(), "{first}");
        let second = ask(s.addr(), "GET /metrics HTTP/1.1\r\n\r\n");
        assert!(second.starts_with("HTTP/1.1 200 OK\r\n") && second.ends_with("\r\n\r\nok\n"), "{second}");
    }

    #[test]
    fn a_taken_port_is_a_bind_error() {
        let (s, _) = server();
        let err = MetricsServer::start(s.addr(), "test", "test-metrics", String::new).unwrap_err();
        assert!(matches!(err, ServeError::Bind(_)), "{err}");
    }
}
