//! `GET /metrics` over plain HTTP/1.1: a listener on a thread of its own, one connection at a
//! time, which is plenty for a scraper and keeps the plugin free of an async runtime.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::thread::JoinHandle;
use std::time::Duration;

use super::{Sources, render};

/// The HTTP responder: one thread, one connection at a time, which is plenty for a scraper.
pub(crate) struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Binds `addr` and serves `GET /metrics` until [`MetricsServer::stop`].
    pub(crate) fn start(addr: SocketAddr, sources: Sources) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr)?;
        // Non-blocking accept polled with a short sleep, so stopping needs no wake-up connection.
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new().name("aldb-metrics".into()).spawn(move || serve(&listener, &sources, &stop))?
        };
        Ok(Self { addr, stop, thread: Some(thread) })
    }

    /// The bound address (with the real port when the config asked for port 0).
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops the thread and closes the socket.
    pub(crate) fn stop(self) {
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

fn serve(listener: &TcpListener, sources: &Sources, stop: &AtomicBool) {
    while !stop.load(Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                if let Err(e) = respond(stream, sources) {
                    log::debug!("metrics request failed: {e}");
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => {
                log::warn!("metrics accept failed: {e}");
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
}

fn respond(mut stream: TcpStream, sources: &Sources) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    // A slow or silent client must not hold the only responder thread for long.
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.set_write_timeout(Some(Duration::from_secs(2)))?;
    let mut buf = [0u8; 4096];
    let mut len = 0;
    // Read the request head (the request line is all that matters); ignore any body.
    while len < buf.len() {
        let n = stream.read(&mut buf[len..])?;
        if n == 0 {
            break;
        }
        len += n;
        if buf[..len].windows(4).any(|w| w == b"\r\n\r\n") || buf[..len].windows(2).any(|w| w == b"\n\n") {
            break;
        }
    }
    let head = String::from_utf8_lossy(&buf[..len]);
    let mut words = head.lines().next().unwrap_or("").split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, ctype, body) = match (method, path) {
        ("GET", "/metrics") => ("200 OK", "text/plain; version=0.0.4; charset=utf-8", render(sources)),
        ("GET", "/") => ("200 OK", "text/plain; charset=utf-8", "aldb-plugin: metrics at /metrics\n".to_string()),
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
