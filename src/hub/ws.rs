//! WebSocket endpoints: `/realtime` (the business channel) and `/heartbeat` (liveness).
//! Checks run before the upgrade; the frames are `wsframe`'s. Each socket runs as one tracked
//! task whose read and write halves are joined. (Measured when the hub used tokio-tungstenite,
//! which woke both halves on any readiness of the socket: as two tasks, or joined so that
//! only the woken half is polled, the hub parked and unparked its worker threads about 15
//! times as often, 12,600 vs 700 futex calls in 5 s of fan-out rounds.)

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use tokio::time::Instant;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hyper_util::rt::TokioIo;
use tokio::net::tcp::{ReadHalf, WriteHalf};
use tokio::net::TcpStream;
use tracing::Instrument;

use super::outq;
use super::wsframe::{self, op, Incoming, Reader, Writer};

use super::registry::{close, Client, ConnHandle, Killer, Outbound};
use super::{Hub, TabDoor};
use crate::protocol::{decode, encode, ClientFrame, ErrorCode, Hello, ServerFrame};
use crate::store::KeptFrame;

/// Which endpoint a socket came in on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Channel {
    Realtime,
    Heartbeat,
}

pub async fn realtime(State(door): State<Arc<TabDoor>>, req: Request) -> Response {
    upgrade(door, req, Channel::Realtime)
}

pub async fn heartbeat(State(door): State<Arc<TabDoor>>, req: Request) -> Response {
    upgrade(door, req, Channel::Heartbeat)
}

/// The opening handshake: the hub's checks (token, Origin, Host), then RFC 6455's; the
/// socket's task starts once the `101` is out.
fn upgrade(door: Arc<TabDoor>, mut req: Request, ch: Channel) -> Response {
    if let Err(refusal) = door.check_headers(req.headers()) {
        tracing::warn!(reason = refusal.1, "refused a WebSocket upgrade");
        return refusal.into_response();
    }
    if door.shutdown.is_cancelled() {
        return (StatusCode::SERVICE_UNAVAILABLE, "shutting down").into_response();
    }
    let answer = match wsframe::handshake(req.method(), req.version(), req.headers()) {
        Ok(answer) => answer,
        Err((status, headers, why)) => return (status, headers, why).into_response(),
    };
    let upgraded = hyper::upgrade::on(&mut req);
    let tracker = door.tracker.clone();
    tokio::spawn(tracker.track_future(socket(door, upgraded, ch)));
    (StatusCode::SWITCHING_PROTOCOLS, answer).into_response()
}

/// The TCP socket itself, taken back from hyper (it is what `serve` gave hyper), and what the
/// tab sent behind its handshake (read before the socket). Its halves are then borrowed, with
/// no lock between them and no boxed I/O in the way. hyper's read buffer is let go here:
/// what it read past the request is a view into that buffer, which would otherwise live as
/// long as the socket (measured: 3.9 KiB per idle tab).
fn take_socket(io: hyper::upgrade::Upgraded) -> Option<(TcpStream, Vec<u8>)> {
    let Ok(parts) = io.downcast::<TokioIo<TcpStream>>() else {
        tracing::error!("an upgraded connection that is not a TCP socket: closed");
        return None;
    };
    let pending = parts.read_buf.to_vec();
    Some((parts.io.into_inner(), pending))
}

/// One socket's task, from the upgrade to its end. The socket, its halves and the tab's
/// state live here, once; everything below borrows them. (An async fn keeps room for each
/// argument for as long as it runs, so state passed down by value would take its room again
/// in each layer.) What every connected tab holds for as long as it is connected is this
/// future, as large as its largest state; the steps before the session are boxed.
async fn socket(door: Arc<TabDoor>, upgraded: hyper::upgrade::OnUpgrade, ch: Channel) {
    let Ok(io) = upgraded.await else {
        return; // the connection ended before it was handed over
    };
    let Some((mut tcp, pending)) = take_socket(io) else {
        return;
    };
    let (rd, wr) = tcp.split();
    let max = door.config.limits.max_frame_bytes;
    let mut stream = Reader::new(rd, max).with_pending(pending);
    let mut sink = Writer::new(wr);
    let Some(_live) = door.admit_connection() else {
        let refuse = sink.close(close::POLICY, "too many tabs / 标签页过多");
        let _ = Box::pin(refuse).await;
        return;
    };
    let opened = Box::pin(open(&door, &mut sink, &mut stream, ch)).await;
    let Some((client, mut conn, started)) = opened else {
        return;
    };
    // The tab's session, in its span: the welcome and the replay (boxed, like every step
    // that is not the idle one), then the live socket, which enters the span as it is polled
    // (an `Instrumented` around it would hold the span again).
    let span = tracing::info_span!("tab", client = %client.id, site = %client.info().site);
    let ok = started
        && Box::pin(welcome(&door, &client, &conn.kill, &mut sink).instrument(span.clone())).await;
    let mut unsent = None;
    if ok {
        // `close_all` at shutdown kills every attached socket; one that attached after it ran
        // sees the cancelled token here.
        if door.shutdown.is_cancelled() {
            conn.kill.kill(close::GOING_AWAY);
        }
        unsent = live(&door, &client, &mut conn, (&mut sink, &mut stream), &span).await;
    } else {
        let closed = close_after_failed_write(&mut sink, &conn.kill);
        Box::pin(closed.instrument(span.clone())).await;
    }
    // Nothing meant for the tab is lost with the socket: the frame being written when it
    // ended, what is still queued and what came after the kill are kept, in that order.
    let _in_span = span.enter();
    if door
        .registry
        .release(&client, conn.id, unsent, &mut conn.rx)
    {
        door.tab_detached(&client);
    }
}

/// Sizes in bytes of a connection's future and of the futures inside it (each socket's
/// task holds the outermost one, plus tokio's task header), for `docs/benchmarks.md`.
pub fn future_sizes() -> Vec<(&'static str, usize)> {
    fn of<A, B, C, F: std::future::Future>(_: fn(A, B, C) -> F) -> usize {
        std::mem::size_of::<F>()
    }
    fn of2<A, B, F: std::future::Future>(_: fn(A, B) -> F) -> usize {
        std::mem::size_of::<F>()
    }
    fn of4<A, B, C, D, F: std::future::Future>(_: fn(A, B, C, D) -> F) -> usize {
        std::mem::size_of::<F>()
    }
    vec![
        ("socket", of(socket)),
        ("open", of4(open)),
        ("read_hello", of(read_hello)),
        ("send_with_deadline", of2(send_with_deadline)),
    ]
}

type Sink<'a> = Writer<WriteHalf<'a>>;
type FrameStream<'a> = Reader<ReadHalf<'a>>;

/// Waits for `hello`; refuses the socket on anything else.
async fn read_hello(hub: &Hub, sink: &mut Sink<'_>, stream: &mut FrameStream<'_>) -> Option<Hello> {
    let first = tokio::time::timeout(hub.config.timing.hello_timeout, stream.next()).await;
    let text = match first {
        Ok(Some(Ok(Incoming::Text(t)))) => t,
        Ok(Some(Err(e))) => {
            let code = e.close_code().unwrap_or(close::POLICY);
            let _ = sink.close(code, "hello required").await;
            return None;
        }
        Ok(Some(Ok(_))) | Ok(None) => {
            let _ = sink.close(close::POLICY, "hello required").await;
            return None;
        }
        Err(_) => {
            let _ = sink.close(close::POLICY, "no hello in time").await;
            return None;
        }
    };
    match decode(&text) {
        Ok(ClientFrame::Hello(h)) => Some(h),
        _ => {
            let err = ServerFrame::error(
                ErrorCode::HelloRequired,
                "第一帧必须是 hello / the first frame must be hello",
            );
            let _ = sink.text(encode(&err)).await;
            let _ = sink.close(close::POLICY, "hello required").await;
            None
        }
    }
}

/// The socket's first steps: `hello`, then on `/heartbeat` the whole heartbeat session (such
/// sockets are few) and on `/realtime` the tab attached and its welcome started (whether the
/// welcome could be started: the session writes it). `None` once the socket is done with.
async fn open(
    door: &Arc<TabDoor>,
    sink: &mut Sink<'_>,
    stream: &mut FrameStream<'_>,
    ch: Channel,
) -> Option<(Arc<Client>, Socket, bool)> {
    let hello = read_hello(door, sink, stream).await?;
    let begun = match ch {
        Channel::Heartbeat => {
            // Boxed: `/heartbeat` sockets are few.
            Box::pin(heartbeat_session(door.clone(), hello, sink, stream)).await;
            return None;
        }
        Channel::Realtime => begin_realtime(door, hello),
    };
    match begun {
        // The welcome is started here, synchronously: the session's future does not keep
        // the `String` (an async fn holds its arguments for as long as it runs).
        Ok((client, conn, welcome)) => {
            let started = sink.start(op::TEXT, welcome.into_bytes()).is_ok();
            Some((client, conn, started))
        }
        Err(err) => {
            let _ = sink.text(err).await;
            let _ = sink.close(close::POLICY, "bad token").await;
            None
        }
    }
}

/// A realtime socket's connection state: its id, the sending side the registry holds and
/// the receiving side its writer drains, and its kill switch.
struct Socket {
    id: u64,
    tx: outq::Sender<Outbound>,
    rx: outq::Receiver<Outbound>,
    kill: Killer,
}

/// `hello` on `/realtime`: identifies the tab and attaches the connection (synchronous, so
/// the `Hello` is not kept in the socket's future). Gives the encoded welcome, or the
/// encoded error to send before closing.
fn begin_realtime(hub: &Hub, hello: Hello) -> Result<(Arc<Client>, Socket, String), String> {
    let client = hub.identify(hello).map_err(|e| {
        let err = ServerFrame::error(e.code(), e.to_string());
        encode(&err)
    })?;
    let (tx, rx) = outq::channel(hub.config.limits.outbound_queue);
    let kill = Killer::default();
    let id = hub.registry.next_conn_id();
    let handle = ConnHandle {
        conn_id: id,
        tx: tx.clone(),
        kill: kill.clone(),
    };
    hub.registry.attach_draining(&client, handle);
    let welcome = encode(&hub.welcome(&client));
    Ok((client, Socket { id, tx, rx, kill }, welcome))
}

/// The welcome (started by the caller), then the replay, with the same deadline and kill as
/// any frame: a tab that stops reading during it cannot hold up shutdown. The replay reads
/// the store a page at a time, and a frame leaves the store only once written, so what the
/// tab did not get stays kept. False if the socket failed.
async fn welcome(door: &TabDoor, client: &Client, kill: &Killer, sink: &mut Sink<'_>) -> bool {
    if send_with_deadline(sink, kill).await.is_err() {
        return false;
    }
    // Task frames the replay sent: the task queue must not send them again.
    let mut delivered = Vec::new();
    if drain_kept(door, client, sink, kill, &mut delivered)
        .await
        .is_err()
    {
        return false;
    }
    door.after_welcome(client, &delivered);
    true
}

/// Writes the frames kept in the store for the tab, oldest first, a page at a time, until
/// none is left (then frames go to the connection's queue again). A frame leaves the store
/// once the socket took it. `delivered` collects the task frames written.
async fn drain_kept(
    hub: &Hub,
    client: &Client,
    sink: &mut Sink<'_>,
    kill: &Killer,
    delivered: &mut Vec<String>,
) -> Result<(), KeptFrame> {
    loop {
        let page = hub.registry.kept_page(client);
        if page.is_empty() {
            return Ok(());
        }
        for frame in page {
            if write_frame(sink, frame.text.clone(), kill).await.is_err() {
                return Err(frame);
            }
            hub.registry.replayed(&frame);
            if frame.kind == "task" {
                delivered.push(frame.text);
            }
        }
    }
}

/// After a write that did not complete (killed while stuck, or past its deadline): the
/// close frame goes behind the rest of that frame, so a tab that reads on within
/// `CLOSE_GRACE` gets the whole frame and the close code (4008 for a slow consumer). A tab
/// that does not read on sees the connection end without a close frame: nothing can pass
/// the bytes it is not reading.
async fn close_after_failed_write(sink: &mut Sink<'_>, kill: &Killer) {
    kill.kill(close::SLOW_CONSUMER);
    let code = kill.killed().await;
    let _ = tokio::time::timeout(CLOSE_GRACE, sink.close(code, close_reason(code))).await;
}

/// How long a stuck socket is given to take the close frame behind its unfinished frame.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

fn close_reason(code: u16) -> &'static str {
    match code {
        close::SLOW_CONSUMER => "slow consumer / 接收过慢",
        close::HEARTBEAT_TIMEOUT => "heartbeat timeout / 心跳超时",
        close::TOO_BIG => "frame too big / 帧过大",
        close::REPLACED => "resumed elsewhere / 已在别处恢复",
        close::GOING_AWAY => "hub shutting down / 集线器关闭",
        _ => "closed",
    }
}

/// The live socket, after its welcome and replay, to its end: its reader and its writer are
/// polled in one hand-made future, the writer first. Neither has a future of its own: this
/// is what every connected tab holds for as long as it is connected, inside its socket's
/// task (one allocation, sized by its largest state; docs/benchmarks.md, "Eleventh
/// session"). The writer's rare steps (a write that does not go out at once, frames kept in
/// the store, the close) are boxed while they run, and the reader reads on meanwhile.
///
/// The reader ending ends the writer through `kill` (the writer owns the sink, so it sends the
/// close frame with the reader's reason); the writer ending (on any kill) ends the reader.
/// Gives the queued frame that was being written when the writer ended (see `SlowOutcome`).
struct LiveSocket<'a, 's> {
    door: &'a Arc<TabDoor>,
    client: &'a Arc<Client>,
    tx: &'a outq::Sender<Outbound>,
    kill: &'a Killer,
    stream: &'a mut FrameStream<'s>,
    /// The tab's span, entered on each poll.
    span: &'a tracing::Span,
    writer: WriterState<'a, 's>,
    /// The socket's one timer: it wakes for the next ping, or when the tab will have been
    /// silent for `dead_after` (whichever comes first), and is set again from there.
    wake: Pin<Box<tokio::time::Sleep>>,
    next_ping: Instant,
    /// The reader's answer (a pong, a reply) waiting for room in the queue.
    answer: Option<Outbound>,
    /// False once the reader ended.
    reading: bool,
}

fn live<'a, 's>(
    door: &'a Arc<TabDoor>,
    client: &'a Arc<Client>,
    conn: &'a mut Socket,
    (sink, stream): (&'a mut Sink<'s>, &'a mut FrameStream<'s>),
    span: &'a tracing::Span,
) -> LiveSocket<'a, 's> {
    let timing = &door.config.timing;
    client.touch(); // the connection is news from the tab, however long it was away
    let next_ping = Instant::now() + timing.ping_interval;
    let first = silent_until(client, timing.dead_after).unwrap_or(next_ping);
    LiveSocket {
        door,
        client,
        tx: &conn.tx,
        kill: &conn.kill,
        stream,
        span,
        writer: WriterState::Idle(sink, &mut conn.rx),
        wake: Box::pin(tokio::time::sleep_until(next_ping.min(first))),
        next_ping,
        answer: None,
        reading: true,
    }
}

impl Future for LiveSocket<'_, '_> {
    type Output = Option<String>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<String>> {
        let this = self.get_mut();
        let _in_span = this.span.enter();
        let (door, client, kill) = (this.door, this.client, this.kill);
        loop {
            match std::mem::replace(&mut this.writer, WriterState::Gone) {
                WriterState::Busy(mut step) => match step.as_mut().poll(cx) {
                    Poll::Pending => {
                        this.writer = WriterState::Busy(step);
                        break;
                    }
                    Poll::Ready((sink, rx, SlowOutcome::Go)) => {
                        this.writer = WriterState::Idle(sink, rx)
                    }
                    Poll::Ready((_, _, SlowOutcome::End(left))) => {
                        kill.kill(1000);
                        return Poll::Ready(left);
                    }
                },
                WriterState::Idle(sink, rx) => {
                    let clock = (&mut this.next_ping, this.wake.as_mut());
                    match poll_writer(door, client, sink, rx, kill, clock, cx) {
                        Poll::Pending => {
                            this.writer = WriterState::Idle(sink, rx);
                            break;
                        }
                        // The queue's senders are gone.
                        Poll::Ready(None) => {
                            kill.kill(1000);
                            return Poll::Ready(None);
                        }
                        // Boxed, like every rare path here.
                        Poll::Ready(Some(job)) => {
                            let step = slow(door, client, sink, rx, kill, job);
                            this.writer = WriterState::Busy(Box::pin(step));
                        }
                    }
                }
                WriterState::Gone => unreachable!("the writer's state is put back"),
            }
        }
        if this.reading {
            // The reader's answers (pongs, replies) may fill half the queue; the other half
            // stays free for frames from elsewhere, which find a full queue a sign of a slow
            // consumer.
            let own_share = (door.config.limits.outbound_queue / 2).max(1);
            let reader = (&mut this.answer, own_share);
            let read = poll_reader(door, client, this.stream, this.tx, kill, reader, cx);
            if let Poll::Ready(code) = read {
                this.reading = false;
                kill.kill(code.unwrap_or(1000));
                cx.waker().wake_by_ref(); // the writer sends the close frame
            }
        }
        Poll::Pending
    }
}

/// The writer in `live`: idle with the sink and its queue, or running a rare step that took
/// them and gives them back.
enum WriterState<'a, 's> {
    Idle(&'a mut Sink<'s>, &'a mut outq::Receiver<Outbound>),
    Busy(SlowStep<'a, 's>),
    Gone,
}

type SlowStep<'a, 's> = Pin<
    Box<
        dyn Future<
                Output = (
                    &'a mut Sink<'s>,
                    &'a mut outq::Receiver<Outbound>,
                    SlowOutcome,
                ),
            > + Send
            + 'a,
    >,
>;

/// Reads frames until the socket ends (then a close code the writer should send). No timer
/// here: each frame only notes when it came (`touch`), and the writer's one timer ends a tab
/// that has been silent for `dead_after`. No kill waiter either: the writer ends on a kill,
/// and the reader with it; until then a frame read after the kill is not acted on.
///
/// A burst of frames is not slowness: once its answers (`pending.0`) fill its share of the
/// queue (`pending.1`), the reader waits for the writer to take one, reading nothing more
/// meanwhile, so the socket pushes back on the tab. A tab that really stops reading is ended
/// by the writer's deadline (4008).
fn poll_reader(
    door: &Arc<TabDoor>,
    client: &Arc<Client>,
    stream: &mut FrameStream<'_>,
    tx: &outq::Sender<Outbound>,
    kill: &Killer,
    pending: (&mut Option<Outbound>, usize),
    cx: &mut Context<'_>,
) -> Poll<Option<u16>> {
    let (answer, own_share) = pending;
    loop {
        if let Some(out) = answer.take() {
            if tx.poll_room_below(own_share, cx).is_pending() {
                *answer = Some(out);
                return Poll::Pending;
            }
            if tx.try_send(out).is_err() {
                return Poll::Ready(Some(close::SLOW_CONSUMER));
            }
        }
        let next = ready!(stream.poll_next(cx));
        if kill.is_killed() {
            return Poll::Ready(None);
        }
        let msg = match next {
            None => return Poll::Ready(None),
            Some(Err(e)) => {
                tracing::info!(error = %e, "tab's frames unreadable");
                return Poll::Ready(e.close_code());
            }
            Some(Ok(m)) => m,
        };
        client.touch();
        *answer = Some(match msg {
            Incoming::Text(text) => {
                let reply = match decode(&text) {
                    Ok(frame) => door.handle_frame(client, frame),
                    Err(e) => Some(ServerFrame::error(e.code(), e.to_string())),
                };
                match reply {
                    Some(reply) => Outbound::Frame(encode(&reply)),
                    None => continue,
                }
            }
            Incoming::Close(_) => return Poll::Ready(None),
            // Refused, not dropped: the tab learns that its frame went nowhere.
            Incoming::Binary(_) => Outbound::Frame(encode(&binary_refused())),
            // The writer answers.
            Incoming::Ping(payload) => Outbound::Pong(payload),
            Incoming::Pong => continue, // proof of life only: `touch` above
        });
    }
}

/// The answer to a binary WebSocket frame: every frame is one JSON text frame.
fn binary_refused() -> ServerFrame {
    ServerFrame::error(
        ErrorCode::BadFrame,
        "只接受文本帧 / text frames only: a binary frame is not read",
    )
}

/// The writer in `live`, idle: waits for its four events, in this order: the kill, the timer
/// (before frames: a queue that never empties must not starve the pings), frames kept in the
/// store for the tab, the queue. A frame the socket takes at once is written here; anything
/// else is a rare step (`Slow`) for the caller to run. `Ready(None)` once the queue's senders
/// are gone.
///
/// The kill and the news of kept frames are polled (each keeps this task's waker where it is
/// set), not awaited through a `Notified` each. Shutdown arrives as a kill from
/// `Registry::close_all`, so nothing here waits on the token that every socket shares
/// (polling it takes that token's lock).
fn poll_writer(
    hub: &Hub,
    client: &Client,
    sink: &mut Sink<'_>,
    rx: &mut outq::Receiver<Outbound>,
    kill: &Killer,
    (next_ping, mut wake): (&mut Instant, Pin<&mut tokio::time::Sleep>),
    cx: &mut Context<'_>,
) -> Poll<Option<Slow>> {
    let timing = &hub.config.timing;
    loop {
        if let Poll::Ready(code) = kill.poll_killed(cx) {
            return Poll::Ready(Some(Slow::Close(code)));
        }
        if wake.as_mut().poll(cx).is_ready() {
            let Some(silent) = silent_until(client, timing.dead_after) else {
                tracing::info!("heartbeat timeout: tab marked lost");
                kill.kill(close::HEARTBEAT_TIMEOUT);
                continue; // the kill sends the close frame
            };
            let now = Instant::now();
            let ping = now >= *next_ping;
            if ping {
                *next_ping = now + timing.ping_interval;
            }
            wake.as_mut().reset((*next_ping).min(silent));
            if ping {
                let _ = sink.start(op::PING, Vec::new());
                if let Some(job) = finish_now(sink, false, cx) {
                    return Poll::Ready(Some(job));
                }
            }
            continue;
        }
        if client.poll_kept(cx).is_ready() {
            return Poll::Ready(Some(Slow::Kept));
        }
        match ready!(rx.poll_recv(cx)) {
            None => return Poll::Ready(None),
            Some(out) => match start_out(sink, out) {
                Err(text) => return Poll::Ready(Some(Slow::Failed(Some(text)))),
                Ok(is_text) => {
                    if let Some(job) = finish_now(sink, is_text, cx) {
                        return Poll::Ready(Some(job));
                    }
                }
            },
        }
    }
}

/// Writes the frame `Writer::start` set as far as the socket takes it now: `None` once it
/// went out whole (the usual case: no timer, no kill waiter), else the rare step that
/// finishes it or closes behind it.
fn finish_now(sink: &mut Sink<'_>, is_text: bool, cx: &mut Context<'_>) -> Option<Slow> {
    match sink.poll_finish(cx) {
        Poll::Ready(Ok(())) => None,
        Poll::Ready(Err(_)) => Some(Slow::Failed(
            is_text.then(|| sink.unsent_text().unwrap_or_default()),
        )),
        Poll::Pending => Some(Slow::Finish(is_text)),
    }
}

/// The writer's rare steps.
enum Slow {
    /// A frame the socket did not take at once (a full socket buffer): finished within the
    /// deadline unless killed; `true` for a text frame.
    Finish(bool),
    /// Frames were kept in the store for the tab (`write_kept`).
    Kept,
    /// A write failed: the text frame the tab did not get, if it was one.
    Failed(Option<String>),
    /// The connection was killed with this code: the close frame.
    Close(u16),
}

/// What a rare step ended with: the writer goes on, or ends with the queued text frame it
/// was writing. That frame has left the queue, so only the caller can keep it; it is kept
/// even when its end may still get through behind the close frame: a frame twice (tasks and
/// results carry idempotency keys) rather than a frame lost.
enum SlowOutcome {
    Go,
    End(Option<String>),
}

/// Runs a rare step of the writer's; takes the sink and the queue and gives them back.
async fn slow<'a, 's>(
    hub: &Hub,
    client: &Client,
    sink: &'a mut Sink<'s>,
    rx: &'a mut outq::Receiver<Outbound>,
    kill: &Killer,
    job: Slow,
) -> (
    &'a mut Sink<'s>,
    &'a mut outq::Receiver<Outbound>,
    SlowOutcome,
) {
    let failed = match job {
        Slow::Close(code) => {
            let close = sink.close(code, close_reason(code));
            let _ = tokio::time::timeout(Duration::from_secs(1), close).await;
            return (sink, rx, SlowOutcome::End(None));
        }
        Slow::Finish(is_text) => match finish_with_deadline(sink, kill).await {
            Ok(()) => return (sink, rx, SlowOutcome::Go),
            Err(()) => is_text.then(|| sink.unsent_text().unwrap_or_default()),
        },
        Slow::Kept => match write_kept(hub, client, sink, rx, kill).await {
            Ok(()) => return (sink, rx, SlowOutcome::Go),
            Err(text) => text,
        },
        Slow::Failed(text) => text,
    };
    close_after_failed_write(sink, kill).await;
    (sink, rx, SlowOutcome::End(failed))
}

/// Frames kept in the store for the tab were noted: what is still queued goes first (it was
/// sent before them), then the store's, a page at a time. On failure, the queued text frame
/// the tab did not get, if it was one (a kept frame stays in the store).
async fn write_kept(
    hub: &Hub,
    client: &Client,
    sink: &mut Sink<'_>,
    rx: &mut outq::Receiver<Outbound>,
    kill: &Killer,
) -> Result<(), Option<String>> {
    while let Ok(out) = rx.try_recv() {
        write_out(sink, out, kill).await?;
    }
    let mut no_delivered = Vec::new();
    drain_kept(hub, client, sink, kill, &mut no_delivered)
        .await
        .map_err(|_| None)
}

/// Sets what the queue gave as the frame to write (`send_with_deadline` writes it): whether
/// it is a text frame, or the text back if a frame is still unfinished (the socket failed
/// already). A synchronous step, so the writer's state holds no frame of its own.
fn start_out(sink: &mut Sink<'_>, out: Outbound) -> Result<bool, String> {
    match out {
        Outbound::Frame(text) => match sink.start(op::TEXT, text.into_bytes()) {
            Ok(()) => Ok(true),
            Err(body) => Err(String::from_utf8(body).unwrap_or_default()),
        },
        Outbound::Pong(payload) => {
            let _ = sink.start(op::PONG, payload);
            Ok(false)
        }
    }
}

/// When a tab that sends nothing more will have been silent for `dead_after`; `None` once
/// it has been (the hub's clock in ms, the same one `touch` notes a frame's arrival by).
fn silent_until(client: &Client, dead_after: Duration) -> Option<Instant> {
    let since = crate::store::now_ms().saturating_sub(client.last_seen_ms());
    let silent_for = Duration::from_millis(u64::try_from(since).unwrap_or(0));
    let left = dead_after
        .checked_sub(silent_for)
        .filter(|d| !d.is_zero())?;
    Some(Instant::now() + left)
}

/// Writes what the queue gave; on failure, the text frame the tab did not get, if it was one.
async fn write_out(
    sink: &mut Sink<'_>,
    out: Outbound,
    kill: &Killer,
) -> Result<(), Option<String>> {
    match out {
        Outbound::Frame(text) => write_frame(sink, text, kill).await.map_err(Some),
        Outbound::Pong(payload) => {
            let _ = sink.start(op::PONG, payload);
            send_with_deadline(sink, kill).await.map_err(|()| None)
        }
    }
}

/// Writes one text frame; gives it back if the socket did not take it whole. The bytes are
/// the frame's own (no copy), dropped once written.
async fn write_frame(sink: &mut Sink<'_>, text: String, kill: &Killer) -> Result<(), String> {
    if let Err(body) = sink.start(op::TEXT, text.into_bytes()) {
        // A frame still unfinished: the socket has failed already.
        return Err(String::from_utf8(body).unwrap_or_default());
    }
    send_with_deadline(sink, kill)
        .await
        .map_err(|()| sink.unsent_text().unwrap_or_default())
}

/// Writes the frame `Writer::start` set. A tab that does not take it within 10 s is treated
/// as gone; a kill interrupts a write that is stuck behind a full socket buffer. What was not
/// written stays in the writer, for the close frame to follow.
///
/// A frame the socket takes at once (the usual case) costs no timer and no kill waiter.
async fn send_with_deadline(sink: &mut Sink<'_>, kill: &Killer) -> Result<(), ()> {
    // A poll, not a future held across the await: the fast path adds nothing to the state.
    let first = std::future::poll_fn(|cx| std::task::Poll::Ready(sink.poll_finish(cx))).await;
    if let std::task::Poll::Ready(r) = first {
        return r.map_err(|_| ());
    }
    // The slow path (a full socket buffer) is boxed, so it does not size every socket's
    // future.
    Box::pin(finish_with_deadline(sink, kill)).await
}

/// The rest of the frame started, within the deadline, unless killed first.
async fn finish_with_deadline(sink: &mut Sink<'_>, kill: &Killer) -> Result<(), ()> {
    tokio::select! {
        biased;
        r = tokio::time::timeout(Duration::from_secs(10), sink.finish()) => match r {
            Ok(Ok(())) => Ok(()),
            _ => Err(()),
        },
        _ = kill.killed() => Err(()),
    }
}

/// `/heartbeat`: app heartbeats from a known tab; answers each with the hub's time.
async fn heartbeat_session(
    door: Arc<TabDoor>,
    hello: Hello,
    sink: &mut Sink<'_>,
    stream: &mut FrameStream<'_>,
) {
    if !super::auth::token_matches(door.token(), &hello.token) {
        let err = ServerFrame::error(ErrorCode::BadToken, super::HelloError::BadToken.to_string());
        let _ = sink.text(encode(&err)).await;
        let _ = sink.close(close::POLICY, "bad token").await;
        return;
    }
    let client = hello
        .client_id
        .as_deref()
        .and_then(|id| door.registry.resume(id));
    let Some(client) = client else {
        let e = super::HelloError::UnknownClient(hello.client_id.unwrap_or_default());
        let err = ServerFrame::error(e.code(), e.to_string());
        let _ = sink.text(encode(&err)).await;
        let _ = sink.close(close::POLICY, "unknown client").await;
        return;
    };
    let dead_after = door.config.timing.dead_after;
    loop {
        let next = tokio::select! {
            n = tokio::time::timeout(dead_after, stream.next()) => n,
            _ = door.shutdown.cancelled() => {
                let _ = sink.close(close::GOING_AWAY, "hub shutting down").await;
                return;
            }
        };
        let text = match next {
            Ok(Some(Ok(Incoming::Text(t)))) => t,
            // The closing handshake (RFC 6455 §5.5.1): a close frame is answered with one.
            Ok(Some(Ok(Incoming::Close(_)))) => {
                let _ = sink.close(1000, "closed").await;
                return;
            }
            Ok(None) => return,
            Ok(Some(Err(e))) => {
                if let Some(code) = e.close_code() {
                    let _ = sink.close(code, "bad frame").await;
                }
                return;
            }
            Ok(Some(Ok(Incoming::Binary(_)))) => {
                if sink.text(encode(&binary_refused())).await.is_err() {
                    return;
                }
                continue;
            }
            Ok(Some(Ok(Incoming::Ping(payload)))) => {
                if sink.send(op::PONG, payload).await.is_err() {
                    return;
                }
                continue;
            }
            Ok(Some(Ok(Incoming::Pong))) => continue,
            Err(_) => {
                let _ = sink
                    .close(close::HEARTBEAT_TIMEOUT, "heartbeat timeout")
                    .await;
                return;
            }
        };
        let reply = match decode(&text) {
            Ok(ClientFrame::Heartbeat(hb)) => {
                client.touch();
                if hb.trouble.is_none() {
                    // The tab no longer reports trouble: a person solved the check.
                    door.hooks().trouble_cleared(&client);
                }
                client.set_heartbeat(hb);
                ServerFrame::Heartbeat {
                    time: crate::store::now_ms() as u64,
                }
            }
            Ok(other) => ServerFrame::error(
                ErrorCode::UnknownType,
                format!(
                    "/heartbeat 只接受 heartbeat / /heartbeat takes heartbeat frames, not `{}`",
                    other.type_name()
                ),
            ),
            Err(e) => ServerFrame::error(e.code(), e.to_string()),
        };
        if sink.text(encode(&reply)).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    /// What each socket's task holds for as long as its tab is connected, idle or not: the
    /// socket's future is sized by its largest state (docs/benchmarks.md, "Eleventh
    /// session": 1,160 B for the connection's part alone before the live socket was one
    /// hand-made future and the steps before it were boxed; 464 B for all of it after, 456 B
    /// in the release build). With tokio's task header and trailer (96 B) and its 128-byte
    /// alignment the task is 640 B, one of mimalloc's size classes; past 536 B it would be
    /// 768.
    #[test]
    fn a_socket_future_stays_small() {
        let sizes = super::future_sizes();
        println!("{sizes:?}");
        let (name, socket) = sizes[0];
        assert_eq!(name, "socket");
        assert!(socket <= 464, "a socket's future grew to {socket} B");
        // The live socket's state, inside it.
        let live = std::mem::size_of::<super::LiveSocket<'static, 'static>>();
        assert!(live <= 136, "the live socket grew to {live} B");
        // The reader beside it: its rare state (a frame over several reads, a fragmented
        // message, bytes read ahead) is boxed.
        let reader = std::mem::size_of::<super::FrameStream<'static>>();
        assert!(reader <= 40, "the socket's reader grew to {reader} B");
    }
}
