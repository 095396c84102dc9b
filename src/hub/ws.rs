//! WebSocket endpoints: `/realtime` (the business channel) and `/heartbeat` (liveness).
//! Checks run before the upgrade; the frames are `wsframe`'s. Each socket runs as one tracked
//! task whose read and write halves are joined. (Measured when the hub used tokio-tungstenite,
//! which woke both halves on any readiness of the socket: as two tasks, or joined so that
//! only the woken half is polled, the hub parked and unparked its worker threads about 15
//! times as often, 12,600 vs 700 futex calls in 5 s of fan-out rounds.)

use std::sync::Arc;
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
    let max = door.config.limits.max_frame_bytes;
    let tracker = door.tracker.clone();
    tokio::spawn(tracker.track_future(async move {
        let Ok(io) = upgraded.await else {
            return; // the connection ended before it was handed over
        };
        let Some((mut tcp, pending)) = take_socket(io) else {
            return;
        };
        // The socket's halves live here, once; everything below borrows them. (An async fn
        // keeps room for each argument for as long as it runs, so halves passed down by
        // value would take their room again in each layer.)
        let (rd, wr) = tcp.split();
        let mut stream = Reader::new(rd, max).with_pending(pending);
        let mut sink = Writer::new(wr);
        connection(door, &mut sink, &mut stream, ch).await
    }));
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

/// One socket's task, from the upgrade to its end.
async fn connection(
    door: Arc<TabDoor>,
    sink: &mut Sink<'_>,
    stream: &mut FrameStream<'_>,
    ch: Channel,
) {
    let Some(_live) = door.admit_connection() else {
        let _ = sink
            .close(close::POLICY, "too many tabs / 标签页过多")
            .await;
        return;
    };
    run(door.clone(), sink, stream, ch).await;
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
    fn of5<A, B, C, D, E, F: std::future::Future>(_: fn(A, B, C, D, E) -> F) -> usize {
        std::mem::size_of::<F>()
    }
    vec![
        ("connection", of4(connection)),
        ("run", of4(run)),
        ("session", of5(session)),
        ("read_hello", of(read_hello)),
        ("read_loop", of5(read_loop)),
        ("write_loop", of5(write_loop)),
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

async fn run(door: Arc<TabDoor>, sink: &mut Sink<'_>, stream: &mut FrameStream<'_>, ch: Channel) {
    // Each step in its own scope: what a step took apart or moved on (the `Hello`, the
    // result of `begin_realtime`, the welcome) keeps no room beside the session's future.
    let (client, conn, started) = {
        let begun = {
            let Some(hello) = read_hello(&door, sink, stream).await else {
                return;
            };
            match ch {
                // Boxed: `/heartbeat` sockets are few, and its future would otherwise size
                // every `/realtime` one too.
                Channel::Heartbeat => {
                    return Box::pin(heartbeat_session(door, hello, sink, stream)).await;
                }
                Channel::Realtime => begin_realtime(&door, hello),
            }
        };
        match begun {
            // The welcome is started here, synchronously: the session's future does not
            // keep the `String` (an async fn holds its arguments for as long as it runs).
            Ok((client, conn, welcome)) => {
                let started = sink.start(op::TEXT, welcome.into_bytes()).is_ok();
                (client, conn, started)
            }
            Err(err) => {
                let _ = sink.text(err).await;
                let _ = sink.close(close::POLICY, "bad token").await;
                return;
            }
        }
    };
    let span = tracing::info_span!("tab", client = %client.id, site = %client.info().site);
    session(door, client, conn, started, (sink, stream))
        .instrument(span)
        .await
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

/// The tab's session after `hello`, inside its tracing span.
async fn session(
    door: Arc<TabDoor>,
    client: Arc<Client>,
    mut conn: Socket,
    welcome_started: bool,
    (sink, stream): (&mut Sink<'_>, &mut FrameStream<'_>),
) {
    // `conn` is used in place, not taken apart: its parts would take their room again.
    let kill = &conn.kill;
    // The welcome (started by the caller), then the replay, have the same deadline and kill
    // as any frame: a tab that stops reading during it cannot hold up shutdown. The replay
    // reads the store a page at a time, and a frame leaves the store only once written, so
    // what the tab did not get stays kept.
    let mut ok = welcome_started && send_with_deadline(sink, kill).await.is_ok();
    if ok {
        // Task frames the replay sent: the task queue must not send them again.
        let mut delivered = Vec::new();
        match Box::pin(drain_kept(&door, &client, sink, kill, &mut delivered)).await {
            Ok(()) => door.after_welcome(&client, &delivered),
            Err(_) => ok = false,
        }
    }
    let mut unsent = None;
    if ok {
        // `close_all` at shutdown kills every attached socket; one that attached after it ran
        // sees the cancelled token here.
        if door.shutdown.is_cancelled() {
            kill.kill(close::GOING_AWAY);
        }
        // The reader ending ends the writer through `kill` (the writer owns the sink, so it
        // sends the close frame with the reader's reason); the writer ending (on any kill)
        // ends the reader, which is dropped then. So only the writer waits on the kill: one
        // `Notified` per socket, not two.
        let reader = async {
            let code = read_loop(&door, &client, stream, &conn.tx, kill).await;
            kill.kill(code.unwrap_or(1000));
            std::future::pending::<()>().await
        };
        let writer = async {
            let left = write_loop(&door, &client, sink, &mut conn.rx, kill).await;
            kill.kill(1000);
            left
        };
        unsent = tokio::select! {
            biased;
            left = writer => left,
            () = reader => None,
        };
    } else {
        Box::pin(close_after_failed_write(sink, kill)).await;
    }
    // Nothing meant for the tab is lost with the socket: the frame being written when it
    // ended, what is still queued and what came after the kill are kept, in that order.
    if door
        .registry
        .release(&client, conn.id, unsent, &mut conn.rx)
    {
        door.tab_detached(&client);
    }
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

/// Reads frames until the socket ends; returns a close code the writer should send.
async fn read_loop(
    door: &Arc<TabDoor>,
    client: &Arc<Client>,
    stream: &mut FrameStream<'_>,
    tx: &outq::Sender<Outbound>,
    kill: &Killer,
) -> Option<u16> {
    // No timer here: each frame only notes when it came (`touch`), and the writer's one
    // timer ends a tab that has been silent for `dead_after`. No kill waiter either: the
    // writer ends on a kill, and the reader is dropped with it; until then a frame read after
    // the kill is not acted on.
    // The reader's answers (pongs, replies) may fill half the queue; the other half stays
    // free for frames from elsewhere, which find a full queue a sign of a slow consumer.
    let own_share = (door.config.limits.outbound_queue / 2).max(1);
    loop {
        let next = stream.next().await;
        if kill.is_killed() {
            return None;
        }
        let msg = match next {
            None => return None,
            Some(Err(e)) => {
                tracing::info!(error = %e, "tab's frames unreadable");
                return e.close_code();
            }
            Some(Ok(m)) => m,
        };
        client.touch();
        let answer = match msg {
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
            Incoming::Close(_) => return None,
            // Refused, not dropped: the tab learns that its frame went nowhere.
            Incoming::Binary(_) => Outbound::Frame(encode(&binary_refused())),
            // The writer answers.
            Incoming::Ping(payload) => Outbound::Pong(payload),
            Incoming::Pong => continue, // proof of life only: `touch` above
        };
        // A burst of frames is not slowness: once its answers fill its share of the queue,
        // the reader waits for the writer to take one (reading nothing more meanwhile, so
        // the socket pushes back on the tab). A tab that really stops reading is ended by
        // the writer's deadline (4008), which kills this wait too.
        tx.room_below(own_share).await;
        if tx.try_send(answer).is_err() {
            return Some(close::SLOW_CONSUMER);
        }
    }
}

/// The answer to a binary WebSocket frame: every frame is one JSON text frame.
fn binary_refused() -> ServerFrame {
    ServerFrame::error(
        ErrorCode::BadFrame,
        "只接受文本帧 / text frames only: a binary frame is not read",
    )
}

/// Writes queued frames, frames kept in the store for the tab (durable ones, or frames sent
/// while it was catching up) and periodic pings; ends on kill, shutdown or a write error.
/// Returns the queued frame that was being written when it ended (it has left the queue, so
/// only the caller can keep it). It is kept even when its end may still get through behind
/// the close frame: a frame twice (tasks and results carry idempotency keys) rather than a
/// frame lost.
async fn write_loop(
    hub: &Hub,
    client: &Client,
    sink: &mut Sink<'_>,
    rx: &mut outq::Receiver<Outbound>,
    kill: &Killer,
) -> Option<String> {
    // The socket's one timer: it wakes for the next ping, or when the tab will have been
    // silent for `dead_after` (whichever comes first), and is set again from there.
    let timing = &hub.config.timing;
    client.touch(); // the connection is news from the tab, however long it was away
    let mut next_ping = Instant::now() + timing.ping_interval;
    let first = silent_until(client, timing.dead_after).unwrap_or(next_ping);
    let wake = tokio::time::sleep_until(next_ping.min(first));
    tokio::pin!(wake);
    // The kill and the news of kept frames are polled (each keeps this task's waker where it
    // is set), not awaited through a `Notified` each: the idle state, which every connected
    // tab holds, is this loop's, and each `Notified` in it cost about 80 bytes per tab.
    // Shutdown arrives as a kill from `Registry::close_all`, so nothing here waits on the
    // token that every socket shares (polling it takes that token's lock).
    loop {
        let event = std::future::poll_fn(|cx| {
            use std::task::Poll;
            if let Poll::Ready(code) = kill.poll_killed(cx) {
                return Poll::Ready(WriterWake::Killed(code));
            }
            // Before frames: a queue that never empties must not starve the pings.
            if std::future::Future::poll(wake.as_mut(), cx).is_ready() {
                return Poll::Ready(WriterWake::Timer);
            }
            if client.poll_kept(cx).is_ready() {
                return Poll::Ready(WriterWake::Kept);
            }
            rx.poll_recv(cx).map(WriterWake::Queued)
        })
        .await;
        let failed = match event {
            WriterWake::Killed(code) => {
                // Boxed, like every rare path here: the socket's future is sized by its
                // largest state, and it is held for as long as the tab is connected.
                let close = sink.close(code, close_reason(code));
                let _ = Box::pin(tokio::time::timeout(Duration::from_secs(1), close)).await;
                return None;
            }
            WriterWake::Timer => {
                let now = Instant::now();
                let Some(silent) = silent_until(client, timing.dead_after) else {
                    tracing::info!("heartbeat timeout: tab marked lost");
                    kill.kill(close::HEARTBEAT_TIMEOUT);
                    continue; // the kill branch sends the close frame
                };
                if now >= next_ping {
                    next_ping = now + timing.ping_interval;
                    let _ = sink.start(op::PING, Vec::new());
                    if send_with_deadline(sink, kill).await.is_err() {
                        Box::pin(close_after_failed_write(sink, kill)).await;
                        return None;
                    }
                }
                wake.as_mut().reset(next_ping.min(silent));
                continue;
            }
            WriterWake::Kept => Box::pin(write_kept(hub, client, sink, rx, kill))
                .await
                .err(),
            WriterWake::Queued(None) => return None,
            WriterWake::Queued(Some(out)) => match start_out(sink, out) {
                Err(text) => Some(Some(text)),
                Ok(is_text) => match send_with_deadline(sink, kill).await {
                    Ok(()) => None,
                    Err(()) => Some(is_text.then(|| sink.unsent_text().unwrap_or_default())),
                },
            },
        };
        if let Some(text) = failed {
            Box::pin(close_after_failed_write(sink, kill)).await;
            return text;
        }
    }
}

/// What the writer's idle wait ended with.
enum WriterWake {
    Killed(u16),
    Timer,
    Kept,
    Queued(Option<Outbound>),
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
    Box::pin(async move {
        tokio::select! {
            biased;
            r = tokio::time::timeout(Duration::from_secs(10), sink.finish()) => match r {
                Ok(Ok(())) => Ok(()),
                _ => Err(()),
            },
            _ = kill.killed() => Err(()),
        }
    })
    .await
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
    /// connection's future is sized by its largest state (docs/benchmarks.md, "Ninth
    /// session"; 1,608 B in this build before the writer polled its kill and kept-frames
    /// news, 1,200 after). The bounds are the debug build's.
    #[test]
    fn a_socket_future_stays_small() {
        let sizes = super::future_sizes();
        println!("{sizes:?}");
        let connection = sizes[0].1;
        assert!(
            connection <= 1160,
            "a socket's future grew to {connection} B"
        );
        let writer = sizes
            .iter()
            .find(|(name, _)| *name == "write_loop")
            .unwrap()
            .1;
        assert!(writer <= 416, "the writer's loop grew to {writer} B");
        // The reader beside it (in the socket's task, outside this future): its rare state
        // (a frame over several reads, a fragmented message, bytes read ahead) is boxed.
        let reader = std::mem::size_of::<super::FrameStream<'static>>();
        assert!(reader <= 40, "the socket's reader grew to {reader} B");
    }
}
