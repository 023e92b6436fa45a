//! One WebSocket connection: its reader loop (requests answered in order, notifications
//! interleaved), its writer task and the close codes it ends with.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, close_code};
use axum::extract::{ConnectInfo, State};
use axum::response::Response;
use futures_util::{SinkExt, StreamExt};
use prometheus::IntGauge;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, broadcast, mpsc, oneshot};

#[cfg(doc)]
use super::config::Config;
use super::execution::run_blocking;
use super::roots::RootEvent;
use super::subs::{ConnSubs, PumpStop, next_record_head, next_root};
use super::{RESERVE_AHEAD, Shared};
use crate::budget::{BUSY_MESSAGE, Busy, Reservation};
use crate::conn::ConnHandle;
use crate::metrics::Metrics;

/// WebSocket close code sent to a connection whose record subscriptions fell more than
/// [`Config::record_buffer`] live notifications behind.
pub const SLOW_SUBSCRIBER_CLOSE: u16 = 4008;
/// How long a slow connection's socket gets to take the close frame before it is dropped.
const SLOW_CLOSE_GRACE: Duration = Duration::from_secs(5);
/// Record notifications handed to a connection's writer ahead of the socket.
pub(super) const RECORD_QUEUE: usize = 32;
/// WebSocket close code sent to a connection that stopped taking its replies: a write made no
/// progress for [`Config::write_timeout`].
pub const NOT_READING_CLOSE: u16 = 4009;
/// WebSocket close code (1013, "try again later") sent to a subscriber whose notification found
/// the server's response budget spent.
pub const BUSY_CLOSE: u16 = close_code::AGAIN;

pub(super) async fn ws_upgrade(
    State(s): State<Arc<Shared>>,
    ConnectInfo(conn): ConnectInfo<ConnHandle>,
    ws: WebSocketUpgrade,
) -> Response {
    let limit = s.rpc.limits().max_body_bytes;
    conn.websocket();
    ws.max_message_size(limit).max_frame_size(limit).on_upgrade(move |socket| connection(s, socket))
}

enum Event<'a> {
    Incoming(Option<Result<Message, axum::Error>>),
    Root(Result<Arc<RootEvent>, broadcast::error::RecvError>),
    RecordHead(u64),
    RecordRoom(Result<mpsc::Permit<'a, Queued>, mpsc::error::SendError<()>>),
    /// No message for [`Config::ws_idle_timeout`] and no subscription.
    Idle,
    /// The writer ended: the socket failed or stalled.
    WriterGone,
    Shutdown,
}

/// A message queued for a connection's socket. Its bytes count in `hyades_websocket_queued_bytes`
/// (and, for answers and root notifications, hold the connection's byte room) until the socket
/// has taken it or it is dropped, so whatever way a connection ends, its bytes are released.
pub(super) struct Queued {
    msg: Message,
    bytes: i64,
    gauge: IntGauge,
    _room: Option<OwnedSemaphorePermit>,
    /// The message's bytes in the server-wide response budget (none for a busy refusal).
    _held: Option<Reservation>,
}

impl Queued {
    pub(super) fn new(
        msg: Message,
        metrics: &Metrics,
        room: Option<OwnedSemaphorePermit>,
        held: Option<Reservation>,
    ) -> Self {
        let bytes = match &msg {
            Message::Text(t) => t.len(),
            Message::Binary(b) => b.len(),
            _ => 0,
        };
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        metrics.ws_queued_bytes.add(bytes);
        Self { msg, bytes, gauge: metrics.ws_queued_bytes.clone(), _room: room, _held: held }
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.gauge.sub(self.bytes);
    }
}

/// Closes the connection's byte room when the writer ends, however it ends, so a reader waiting
/// for room stops waiting.
struct CloseRoom(Arc<Semaphore>);

impl Drop for CloseRoom {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// The byte room an answer of `len` bytes takes (an answer larger than the whole room takes all
/// of it, so it waits until everything before it is sent).
fn room_for(len: usize, room: usize) -> u32 {
    u32::try_from(len.clamp(1, room)).unwrap_or(u32::MAX)
}

/// Sends `m` unless a close frame is ordered first; false when the socket failed or the
/// connection was killed (the close frame then sent).
async fn send_or_kill(
    sink: &mut futures_util::stream::SplitSink<WebSocket, Message>,
    m: Message,
    kill_rx: &mut oneshot::Receiver<CloseFrame>,
    killable: &mut bool,
) -> bool {
    let frame = {
        let send = sink.send(m);
        tokio::pin!(send);
        loop {
            tokio::select! {
                biased;
                frame = &mut *kill_rx, if *killable => match frame {
                    Ok(frame) => break frame,
                    // Not killed: finish the send.
                    Err(_) => *killable = false,
                },
                r = &mut send => return r.is_ok(),
            }
        }
    };
    close_slow(sink, frame).await;
    false
}

/// Sends a close frame behind whatever the socket already holds (an abandoned send's frame is
/// finished first, so the stream stays well formed), giving the client a while to read it.
async fn close_slow(sink: &mut futures_util::stream::SplitSink<WebSocket, Message>, frame: CloseFrame) {
    // A slow client is given time to read up to its close frame, so it learns why; a shutdown
    // does not wait for anyone.
    let grace = if frame.code == close_code::AWAY { Duration::from_millis(200) } else { SLOW_CLOSE_GRACE };
    let _ = tokio::time::timeout(grace, sink.send(Message::Close(Some(frame)))).await;
}

/// Serves one WebSocket connection: requests are answered in order, notifications interleave.
///
/// Memory: answers and root notifications take byte room ([`Config::ws_queue_bytes`]) until
/// the socket takes them. An answer waits for room, so a client that sends requests and reads
/// nothing stops being read once its room is full; a root notification never waits, and finds
/// no room only for a slow subscriber, which is closed. A write that makes no progress for
/// [`Config::write_timeout`] ends the connection with close code [`NOT_READING_CLOSE`].
async fn connection(shared: Arc<Shared>, socket: WebSocket) {
    shared.metrics.ws_connections.inc();
    let (mut sink, mut stream) = socket.split();
    let (out_tx, mut out_rx) = mpsc::channel::<Queued>(shared.notification_buffer);
    // Record notifications have their own small queue: they are pulled from the feed at the
    // socket's pace and must never crowd out answers and root notifications.
    let (rec_tx, mut rec_rx) = mpsc::channel::<Queued>(RECORD_QUEUE);
    let (kill_tx, mut kill_rx) = oneshot::channel::<CloseFrame>();
    let room = Arc::new(Semaphore::new(shared.ws_queue_bytes));
    // The writer owns the socket's sending half, so a slow reader only ever fills its own queue.
    let writer = {
        let (shared, room) = (shared.clone(), room.clone());
        tokio::spawn(async move {
            let _close_room = CloseRoom(room.clone());
            let mut killable = true;
            let mut records_open = true;
            loop {
                let q = tokio::select! {
                    biased;
                    frame = &mut kill_rx, if killable => match frame {
                        Ok(frame) => {
                            close_slow(&mut sink, frame).await;
                            return;
                        }
                        Err(_) => {
                            killable = false;
                            continue;
                        }
                    },
                    // Answers and root notifications first: a subscription's id is answered
                    // before any of its records is queued, so it also reaches the client first.
                    q = out_rx.recv() => match q {
                        Some(q) => q,
                        None => {
                            let _ = sink.close().await;
                            return;
                        }
                    },
                    q = rec_rx.recv(), if records_open => match q {
                        Some(q) => q,
                        None => {
                            records_open = false;
                            continue;
                        }
                    },
                };
                let send = send_or_kill(&mut sink, q.msg.clone(), &mut kill_rx, &mut killable);
                match tokio::time::timeout(shared.write_timeout, send).await {
                    Ok(true) => drop(q),
                    Ok(false) => return,
                    Err(_) => {
                        shared.metrics.limit_ws_write_timeout.inc();
                        let queued = shared.ws_queue_bytes.saturating_sub(room.available_permits());
                        let reason = format!(
                            "not reading: a write stalled {} s, {queued} bytes queued",
                            shared.write_timeout.as_secs()
                        );
                        drop(q);
                        close_slow(&mut sink, CloseFrame { code: NOT_READING_CLOSE, reason: reason.into() }).await;
                        return;
                    }
                }
            }
        })
    };

    let mut subs = ConnSubs::new(shared.clone());
    let mut shutdown = shared.shutdown.clone();
    let mut close: Option<CloseFrame> = None;
    let idle = tokio::time::sleep(shared.ws_idle_timeout);
    tokio::pin!(idle);
    loop {
        let pending = subs.records_pending();
        let subscribed = !subs.ids.is_empty() || !subs.records.is_empty();
        let event = tokio::select! {
            m = stream.next() => Event::Incoming(m),
            r = next_root(&mut subs.feed) => Event::Root(r),
            h = next_record_head(&mut subs.record_head_rx) => Event::RecordHead(h),
            p = rec_tx.reserve(), if pending => Event::RecordRoom(p),
            _ = &mut idle, if !subscribed => Event::Idle,
            _ = out_tx.closed() => Event::WriterGone,
            _ = shutdown.wait_for(|s| *s) => Event::Shutdown,
        };
        if let Event::Incoming(Some(Ok(_))) = &event {
            idle.as_mut().reset(tokio::time::Instant::now() + shared.ws_idle_timeout);
        }
        match event {
            Event::Incoming(None | Some(Err(_)) | Some(Ok(Message::Close(_)))) => break,
            Event::Incoming(Some(Ok(Message::Ping(_) | Message::Pong(_)))) => {}
            Event::Incoming(Some(Ok(m @ (Message::Text(_) | Message::Binary(_))))) => {
                // Held before any work; a spent budget answers "server busy", a small answer
                // held by the connection's own queue alone.
                let held = shared.budget.try_reserve(RESERVE_AHEAD);
                let (reply, held) = if held.is_none() {
                    (Some(shared.rpc.busy_body(shared.budget.cap())), None)
                } else if shared.execution.blocking(message_bytes(&m)) {
                    // The subscriptions travel with the request and come back with the answer.
                    let s2 = shared.clone();
                    let mut moved = subs;
                    let done = run_blocking(&shared, move || {
                        let reply = handle_ws(&s2, message_bytes(&m), &mut moved, held);
                        (reply, moved)
                    })
                    .await;
                    match done {
                        Some((reply, back)) => {
                            subs = back;
                            reply
                        }
                        None => {
                            // The handler panicked; its subscriptions were dropped with it.
                            subs = ConnSubs::new(shared.clone());
                            close = Some(CloseFrame { code: close_code::ERROR, reason: "internal error".into() });
                            break;
                        }
                    }
                } else {
                    handle_ws(&shared, message_bytes(&m), &mut subs, held)
                };
                let Some(reply) = reply else { continue };
                let n = room_for(reply.len(), shared.ws_queue_bytes);
                let reply = match String::from_utf8(reply) {
                    Ok(s) => Message::text(s),
                    Err(e) => Message::text(String::from_utf8_lossy(e.as_bytes()).into_owned()),
                };
                // Answers wait for room: back-pressure on this client's own requests. But a root
                // due to one of its subscriptions while the queue is full cannot be queued, and
                // notifications never wait, so that makes the connection a slow subscriber. If
                // the writer gives up on the socket, the room is closed and the wait ends.
                let want = async {
                    let bytes = room.clone().acquire_many_owned(n).await.ok()?;
                    let slot = out_tx.reserve().await.ok()?;
                    Some((bytes, slot))
                };
                tokio::pin!(want);
                let got = loop {
                    tokio::select! {
                        biased;
                        got = &mut want => break got,
                        r = next_root(&mut subs.feed) => match r {
                            Ok(ev) if subs.ids.values().all(|(start, level)| ev.seq < *start || !ev.due(*level)) => {
                                continue;
                            }
                            _ => {
                                close = Some(slow_frame());
                                shared.metrics.slow_disconnects.inc();
                                break None;
                            }
                        },
                    }
                };
                match got {
                    Some((bytes, slot)) => slot.send(Queued::new(reply, &shared.metrics, Some(bytes), held)),
                    None => break,
                }
            }
            Event::Root(Ok(ev)) => {
                if let Err(frame) = notify(&subs, &ev, &out_tx, &room) {
                    // A spent budget is counted as a limit hit; only a slow reader as slow.
                    if frame.code != BUSY_CLOSE {
                        shared.metrics.slow_disconnects.inc();
                    }
                    close = Some(frame);
                    break;
                }
            }
            Event::Root(Err(broadcast::error::RecvError::Lagged(_))) => {
                close = Some(slow_frame());
                shared.metrics.slow_disconnects.inc();
                break;
            }
            Event::RecordHead(head) => {
                subs.record_head = subs.record_head.max(head);
                let buffered = subs.records_buffered(RECORD_QUEUE - rec_tx.capacity());
                if buffered > shared.record_buffer as u64 {
                    close = Some(slow_record_frame(buffered));
                    shared.metrics.slow_disconnects.inc();
                    break;
                }
            }
            Event::RecordRoom(Ok(permit)) => match subs.pump(permit, &rec_tx) {
                Ok(()) => {}
                Err(PumpStop::Pruned) => {
                    let buffered = subs.records_buffered(RECORD_QUEUE - rec_tx.capacity());
                    close = Some(slow_record_frame(buffered));
                    shared.metrics.slow_disconnects.inc();
                    break;
                }
                Err(PumpStop::Busy) => {
                    close = Some(busy_frame());
                    break;
                }
            },
            // The writer is gone: the socket failed.
            Event::RecordRoom(Err(_)) | Event::WriterGone => break,
            Event::Idle => {
                shared.metrics.limit_ws_idle_timeout.inc();
                let reason = format!("idle: no message for {} s and no subscription", shared.ws_idle_timeout.as_secs());
                close = Some(CloseFrame { code: close_code::NORMAL, reason: reason.into() });
                break;
            }
            Event::Root(Err(broadcast::error::RecvError::Closed)) | Event::Shutdown => {
                close = Some(CloseFrame { code: close_code::AWAY, reason: "server shutting down".into() });
                break;
            }
        }
    }
    drop(subs);
    let abort = writer.abort_handle();
    let grace = match close {
        Some(frame) => {
            let _ = kill_tx.send(frame);
            SLOW_CLOSE_GRACE + Duration::from_secs(1)
        }
        None => {
            drop(kill_tx);
            Duration::from_secs(5)
        }
    };
    drop(out_tx);
    drop(rec_tx);
    if tokio::time::timeout(grace, writer).await.is_err() {
        abort.abort();
    }
    shared.metrics.ws_connections.dec();
}

/// Answers one WebSocket message within the response budget, `held` holding what was reserved
/// for it: the answer and what it holds, or the "server busy" answer (not held) when the budget
/// could not take it all.
fn handle_ws(
    shared: &Shared,
    body: &[u8],
    subs: &mut ConnSubs,
    held: Option<Reservation>,
) -> (Option<Vec<u8>>, Option<Reservation>) {
    let Some(mut held) = held else { return (Some(shared.rpc.busy_body(shared.budget.cap())), None) };
    match shared.rpc.handle_held(body, Some(subs), &mut held) {
        Ok(Some(reply)) => {
            held.shrink_to(reply.len());
            (Some(reply), Some(held))
        }
        Ok(None) => (None, None),
        Err(Busy) => (Some(shared.rpc.busy_body(shared.budget.cap())), None),
    }
}

/// The request bytes of a text or binary message.
fn message_bytes(m: &Message) -> &[u8] {
    match m {
        Message::Text(t) => t.as_bytes(),
        Message::Binary(b) => b.as_ref(),
        _ => &[],
    }
}

/// Queues `ev` for every subscription due to receive it; the close frame to send if the
/// connection's queue or byte room is full, or the server's response budget is spent.
fn notify(
    subs: &ConnSubs,
    ev: &RootEvent,
    out: &mpsc::Sender<Queued>,
    room: &Arc<Semaphore>,
) -> Result<(), CloseFrame> {
    for (id, (start, level)) in &subs.ids {
        if ev.seq < *start || !ev.due(*level) {
            continue;
        }
        let note = format!(
            r#"{{"jsonrpc":"2.0","method":"rootNotification","params":{{"subscription":{id},"result":{}}}}}"#,
            ev.result
        );
        let Some(held) = subs.shared.budget.try_reserve(note.len()) else { return Err(busy_frame()) };
        let Ok(bytes) = room.clone().try_acquire_many_owned(room_for(note.len(), usize::MAX)) else {
            return Err(slow_frame());
        };
        let Ok(slot) = out.try_reserve() else { return Err(slow_frame()) };
        slot.send(Queued::new(Message::text(note), &subs.shared.metrics, Some(bytes), Some(held)));
    }
    Ok(())
}

fn slow_frame() -> CloseFrame {
    CloseFrame { code: close_code::POLICY, reason: "subscriber too slow".into() }
}

fn busy_frame() -> CloseFrame {
    CloseFrame { code: BUSY_CLOSE, reason: BUSY_MESSAGE.into() }
}

fn slow_record_frame(buffered: u64) -> CloseFrame {
    CloseFrame {
        code: SLOW_SUBSCRIBER_CLOSE,
        reason: format!("slow subscriber: {buffered} notifications buffered").into(),
    }
}
