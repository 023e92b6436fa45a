//! The RPC listener's connection guard: a cap on open connections and the HTTP timeouts.
//!
//! hyper, as axum runs it, has no header-read or keep-alive timeout, so a client sending a
//! request head one byte a minute (slowloris), or opening connections and saying nothing, would
//! hold them for ever. Here every accepted socket is wrapped in a [`GuardedIo`] that fails a read
//! which waits past the deadline of the connection's current phase, and a write that makes no
//! progress for [`ConnLimits::write_timeout`]; hyper then drops the connection. The handlers tell
//! the guard when a request is being handled ([`ConnHandle::busy`], no read deadline: the body
//! has its own timeout) and when a connection became a WebSocket ([`ConnHandle::websocket`]:
//! its own loop enforces the idle and write limits, with close frames).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};

use crate::metrics::Metrics;

/// The connection limits of the RPC listener.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConnLimits {
    pub max_connections: usize,
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
    pub write_timeout: Duration,
}

/// What a connection is doing, which decides its read deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Accepted, no byte yet: the first request head is due within the header timeout.
    Fresh,
    /// Kept alive between requests: the next request's first byte is due within the idle timeout.
    Idle,
    /// A request head is arriving: it is due within the header timeout of its first byte.
    Head,
    /// A request is being handled; the handler bounds the body read itself.
    Busy,
    /// Upgraded: the WebSocket loop enforces its own limits.
    WebSocket,
}

#[derive(Debug)]
struct ConnState {
    /// The phase and when it started (for `Idle`, when the connection was last active).
    phase: Mutex<(Phase, Instant)>,
}

impl ConnState {
    fn get(&self) -> (Phase, Instant) {
        *self.phase.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn set(&self, phase: Phase) {
        let mut p = self.phase.lock().unwrap_or_else(PoisonError::into_inner);
        // Once upgraded a connection never speaks HTTP again.
        if p.0 != Phase::WebSocket {
            *p = (phase, Instant::now());
        }
    }

    /// A read returned bytes: an idle connection starts a request head.
    fn on_read(&self) {
        let mut p = self.phase.lock().unwrap_or_else(PoisonError::into_inner);
        match p.0 {
            Phase::Idle => *p = (Phase::Head, Instant::now()),
            // The first head's deadline still counts from the accept.
            Phase::Fresh => p.0 = Phase::Head,
            _ => {}
        }
    }

    /// A write made progress: an answer being taken counts as activity.
    fn on_write(&self) {
        let mut p = self.phase.lock().unwrap_or_else(PoisonError::into_inner);
        if p.0 == Phase::Idle {
            p.1 = Instant::now();
        }
    }
}

/// A handle on one connection's guard, handed to the request handlers as `ConnectInfo`.
#[derive(Clone, Debug)]
pub(crate) struct ConnHandle(Arc<ConnState>);

impl ConnHandle {
    /// A request head was read and is being handled.
    pub(crate) fn busy(&self) {
        self.0.set(Phase::Busy);
    }

    /// The answer is handed to hyper; the connection waits for the next request.
    pub(crate) fn idle(&self) {
        self.0.set(Phase::Idle);
    }

    /// The connection is upgraded to a WebSocket.
    pub(crate) fn websocket(&self) {
        self.0.set(Phase::WebSocket);
    }
}

impl Connected<IncomingStream<'_, GuardedListener>> for ConnHandle {
    fn connect_info(stream: IncomingStream<'_, GuardedListener>) -> Self {
        ConnHandle(stream.io().state.clone())
    }
}

/// Sent, best effort, to a connection refused because the listener is full.
const REFUSED: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\ncontent-length: 25\r\n\
connection: close\r\n\r\ntoo many open connections";

/// The RPC listener: accepts up to [`ConnLimits::max_connections`] open connections and closes
/// the ones beyond at once (counted in `hyades_limit_hits_total{limit="connections"}`).
#[derive(Debug)]
pub(crate) struct GuardedListener {
    inner: TcpListener,
    limits: ConnLimits,
    metrics: Arc<Metrics>,
    open: Arc<AtomicUsize>,
}

impl GuardedListener {
    pub(crate) fn new(inner: TcpListener, limits: ConnLimits, metrics: Arc<Metrics>) -> Self {
        Self { inner, limits, metrics, open: Arc::new(AtomicUsize::new(0)) }
    }
}

impl Listener for GuardedListener {
    type Io = GuardedIo;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (GuardedIo, SocketAddr) {
        loop {
            let (tcp, addr) = match self.inner.accept().await {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors or memory, or an aborted handshake: try again shortly
                    // rather than spin.
                    log::debug!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            if self.open.load(Ordering::Acquire) >= self.limits.max_connections {
                self.metrics.limit_connections.inc();
                // Never wait on a refused client: what the socket takes now is all it gets.
                let _ = tcp.try_write(REFUSED);
                continue;
            }
            // Answers are small and a client waits for each; never hold one back for Nagle.
            if let Err(e) = tcp.set_nodelay(true) {
                log::debug!("cannot set TCP_NODELAY: {e}");
            }
            self.open.fetch_add(1, Ordering::AcqRel);
            self.metrics.connections.inc();
            return (GuardedIo::new(tcp, self.limits, self.metrics.clone(), self.open.clone()), addr);
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

/// A TCP connection with read deadlines by phase and a write-stall timeout.
#[derive(Debug)]
pub(crate) struct GuardedIo {
    tcp: TcpStream,
    state: Arc<ConnState>,
    limits: ConnLimits,
    metrics: Arc<Metrics>,
    open: Arc<AtomicUsize>,
    read_timer: Pin<Box<Sleep>>,
    /// Armed while a write is pending; any progress disarms it.
    write_timer: Option<Pin<Box<Sleep>>>,
}

impl GuardedIo {
    fn new(tcp: TcpStream, limits: ConnLimits, metrics: Arc<Metrics>, open: Arc<AtomicUsize>) -> Self {
        let now = Instant::now();
        Self {
            tcp,
            state: Arc::new(ConnState { phase: Mutex::new((Phase::Fresh, now)) }),
            limits,
            metrics,
            open,
            read_timer: Box::pin(tokio::time::sleep_until(now + limits.header_timeout)),
            write_timer: None,
        }
    }

    /// The current read deadline and the limit it enforces, if any.
    fn read_deadline(&self) -> Option<(Instant, bool)> {
        let (phase, since) = self.state.get();
        match phase {
            Phase::Fresh | Phase::Head => Some((since + self.limits.header_timeout, true)),
            Phase::Idle => Some((since + self.limits.idle_timeout, false)),
            Phase::Busy | Phase::WebSocket => None,
        }
    }

    fn poll_write_guarded(
        &mut self,
        cx: &mut Context<'_>,
        write: impl FnOnce(Pin<&mut TcpStream>, &mut Context<'_>) -> Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        match write(Pin::new(&mut self.tcp), cx) {
            Poll::Ready(r) => {
                self.write_timer = None;
                if matches!(r, Ok(n) if n > 0) {
                    self.state.on_write();
                }
                Poll::Ready(r)
            }
            Poll::Pending => {
                // The WebSocket writer times its own sends, so it can still send a close frame.
                if self.state.get().0 == Phase::WebSocket {
                    return Poll::Pending;
                }
                let timeout = self.limits.write_timeout;
                let timer = self.write_timer.get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
                if timer.as_mut().poll(cx).is_ready() {
                    self.metrics.limit_write_timeout.inc();
                    return Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "write stalled")));
                }
                Poll::Pending
            }
        }
    }
}

impl Drop for GuardedIo {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::AcqRel);
        self.metrics.connections.dec();
    }
}

impl AsyncRead for GuardedIo {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.tcp).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    this.state.on_read();
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => {
                let Some((deadline, header)) = this.read_deadline() else { return Poll::Pending };
                if this.read_timer.deadline() != deadline {
                    this.read_timer.as_mut().reset(deadline);
                }
                if this.read_timer.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                let what = if header {
                    this.metrics.limit_header_timeout.inc();
                    "request head not received in time"
                } else {
                    this.metrics.limit_idle_timeout.inc();
                    "idle connection timed out"
                };
                Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, what)))
            }
        }
    }
}

impl AsyncWrite for GuardedIo {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.get_mut().poll_write_guarded(cx, |tcp, cx| tcp.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_write_guarded(cx, |tcp, cx| tcp.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}
