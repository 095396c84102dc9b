//! The second transport, for tabs whose WebSocket to localhost is blocked (Chrome's Local
//! Network Access prompt denied): hub → tab over `GET /events` (SSE), tab → hub over
//! `POST /send`. Same frames, same token, same registry as the WebSocket path.
//!
//! An event stream is attached to its tab only once the tab confirms, over `POST /send`, that
//! it received the stream's first event (`welcome`): a userscript manager that buffers the
//! response until it ends would otherwise make a tab that never receives look live.

#![allow(clippy::result_large_err)] // handlers return ready-made HTTP responses

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use dashmap::DashMap;
use futures_util::Stream;
use tokio::sync::oneshot;

use super::registry::{close, Client, ConnHandle, ConnState, Killer, Outbound};
use super::{auth, Hub, TabDoor};
use crate::protocol::{decode, encode, Ack, ClientFrame, ErrorCode, ServerFrame};

/// Header naming the tab on every request after `hello`.
pub const CLIENT_HEADER: &str = "x-aicard-client";

fn json(status: StatusCode, frame: &ServerFrame) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        encode(frame),
    )
        .into_response()
}

/// Host, Origin and bearer-token checks for both endpoints.
fn authorize(hub: &Hub, headers: &HeaderMap) -> Result<(), Response> {
    hub.check_headers(headers).map_err(|e| e.into_response())?;
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    if !auth::token_matches(hub.token(), presented) {
        let frame = ServerFrame::error(ErrorCode::BadToken, "令牌错误 / bad token");
        return Err(json(StatusCode::UNAUTHORIZED, &frame));
    }
    Ok(())
}

fn client_from(hub: &Hub, headers: &HeaderMap) -> Result<Arc<Client>, Response> {
    let id = headers
        .get(CLIENT_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    hub.registry.resume(id).ok_or_else(|| {
        let frame = ServerFrame::error(
            ErrorCode::UnknownClient,
            format!("未知的客户端 / unknown client `{id}`: say hello first"),
        );
        json(StatusCode::NOT_FOUND, &frame)
    })
}

/// `POST /send`: one client frame. `hello` answers with `welcome`; others with their reply
/// or an `ack`. The body is read only after the token is checked, and only up to the frame
/// limit.
pub async fn send(
    State(door): State<Arc<TabDoor>>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Response {
    if let Err(r) = authorize(&door, &headers) {
        return r;
    }
    let body = match read_body(&headers, body, door.config.limits.max_frame_bytes).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let frame = match decode(&body) {
        Ok(f) => f,
        Err(e) => {
            return json(
                StatusCode::BAD_REQUEST,
                &ServerFrame::error(e.code(), e.to_string()),
            )
        }
    };
    if let ClientFrame::Hello(hello) = frame {
        return match door.identify(hello) {
            Ok(client) => json(StatusCode::OK, &door.welcome(&client)),
            Err(e) => json(
                StatusCode::UNAUTHORIZED,
                &ServerFrame::error(e.code(), e.to_string()),
            ),
        };
    }
    let client = match client_from(&door, &headers) {
        Ok(c) => c,
        Err(r) => return r,
    };
    let received = frame.type_name().to_string();
    let reply = match frame {
        ClientFrame::Ack(Ack { received: what }) if what == "welcome" => confirm(&door, &client),
        frame => door.handle_frame(&client, frame),
    };
    json(
        StatusCode::OK,
        &reply.unwrap_or(ServerFrame::Ack { received }),
    )
}

/// The body as text, at most `max` bytes of UTF-8 (a longer `Content-Length` is refused
/// before reading).
async fn read_body(
    headers: &HeaderMap,
    body: axum::body::Body,
    max: usize,
) -> Result<String, Response> {
    let too_big = || {
        let frame = ServerFrame::error(ErrorCode::Limit, "帧过大 / frame too big");
        json(StatusCode::PAYLOAD_TOO_LARGE, &frame)
    };
    let announced = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if announced.is_some_and(|n| n > max as u64) {
        return Err(too_big());
    }
    let bytes = axum::body::to_bytes(body, max)
        .await
        .map_err(|_| too_big())?;
    String::from_utf8(bytes.into()).map_err(|_| {
        let frame = ServerFrame::error(ErrorCode::BadJson, "帧不是 UTF-8 / frame is not UTF-8");
        json(StatusCode::BAD_REQUEST, &frame)
    })
}

/// Event streams that sent `welcome` and wait for the tab to confirm it, by client id. Until
/// then the stream is not attached: frames for the tab are kept as for an absent tab, no task
/// is handed to it, and the tab does not count as connected.
#[derive(Default)]
pub(super) struct Unconfirmed(DashMap<String, Waiting>);

/// A stream waiting for its `ack`: the connection to attach, and the way to hand the stream
/// the frames that waited for the tab.
struct Waiting {
    handle: ConnHandle,
    confirmed: oneshot::Sender<Vec<String>>,
}

/// `ack {received: "welcome"}`: the tab's event stream reaches it, so it is attached now.
/// `None` answers with a plain `ack`.
fn confirm(door: &TabDoor, client: &Arc<Client>) -> Option<ServerFrame> {
    let Some((_, waiting)) = door.sse_waiting.0.remove(&client.id) else {
        // A repeated ack of a stream already attached is harmless.
        return (client.state() != ConnState::Connected).then(|| {
            ServerFrame::error(
                ErrorCode::NoStream,
                "没有等待确认的事件流 / no event stream of this tab waits for an ack: open GET /events first",
            )
        });
    };
    let conn_id = waiting.handle.conn_id;
    let replay = door.registry.attach(client, waiting.handle);
    door.after_welcome(client, &replay);
    if let Err(replay) = waiting.confirmed.send(replay) {
        // The stream ended between its welcome and this ack: nothing meant for the tab is
        // lost with it.
        door.connection_closed(client, conn_id);
        for text in replay {
            door.registry.send_text(client, text);
        }
        return Some(ServerFrame::error(
            ErrorCode::NoStream,
            "事件流已关闭 / the event stream closed before this ack: open GET /events again",
        ));
    }
    tracing::info!(client = %client.id, "event stream confirmed");
    None
}

/// `GET /events`: the hub → tab stream for a tab that said `hello` over `POST /send`. Its
/// first event is `welcome`; it is attached once the tab acks that event.
pub async fn events(State(door): State<Arc<TabDoor>>, headers: HeaderMap) -> Response {
    if let Err(r) = authorize(&door, &headers) {
        return r;
    }
    let client = match client_from(&door, &headers) {
        Ok(c) => c,
        Err(r) => return r,
    };
    let (tx, rx) = super::outq::channel(door.config.limits.outbound_queue);
    let kill = Killer::default();
    let conn_id = door.registry.next_conn_id();
    let handle = ConnHandle {
        conn_id,
        tx,
        kill: kill.clone(),
    };
    let (confirmed, confirm) = oneshot::channel();
    let waiting = Waiting { handle, confirmed };
    // A newer stream of the same tab replaces one still waiting for its ack.
    if let Some(old) = door.sse_waiting.0.insert(client.id.clone(), waiting) {
        old.handle.kill.kill(close::REPLACED);
    }
    let stream = EventStream {
        welcome: Some(encode(&door.welcome(&client))),
        confirm: Some(confirm),
        deadline: tokio::time::Instant::now() + door.config.timing.stream_confirm,
        attached: false,
        hub: door.hub.clone(),
        client,
        conn_id,
        pending: Vec::new().into_iter(),
        rx,
        kill,
    };
    Sse::new(event_stream(stream))
        .keep_alive(
            KeepAlive::new()
                .interval(
                    door.config
                        .timing
                        .ping_interval
                        .min(Duration::from_secs(15)),
                )
                .text("ping"),
        )
        .into_response()
}

/// The stream's state. Until it is confirmed, dropping it only withdraws it from
/// `Unconfirmed`. Once attached, dropping it marks the tab disconnected, and what the replay
/// or the queue had not yet sent waits for the tab's return (or goes to the connection that
/// replaced this one), as on the WebSocket path.
struct EventStream {
    /// The first event, not yet sent.
    welcome: Option<String>,
    /// Receives the frames that waited for the tab once its `ack` attached this stream.
    confirm: Option<oneshot::Receiver<Vec<String>>>,
    /// An unconfirmed stream is closed at this instant.
    deadline: tokio::time::Instant,
    attached: bool,
    hub: Arc<Hub>,
    client: Arc<Client>,
    conn_id: u64,
    pending: std::vec::IntoIter<String>,
    rx: super::outq::Receiver<Outbound>,
    kill: Killer,
}

impl Drop for EventStream {
    fn drop(&mut self) {
        if !self.attached {
            let conn_id = self.conn_id;
            self.hub
                .sse_waiting
                .0
                .remove_if(&self.client.id, |_, w| w.handle.conn_id == conn_id);
            // An ack may have attached the stream after its last poll.
            match self.confirm.as_mut().map(|c| c.try_recv()) {
                Some(Ok(replay)) => self.pending = replay.into_iter(),
                _ => return,
            }
        }
        self.hub.connection_closed(&self.client, self.conn_id);
        self.hub
            .registry
            .hand_back(&self.client, self.pending.by_ref(), &mut self.rx);
    }
}

impl EventStream {
    /// The next frame for the tab; None ends the stream.
    async fn next_frame(&mut self) -> Option<String> {
        if let Some(welcome) = self.welcome.take() {
            return Some(welcome);
        }
        let shutdown = self.hub.shutdown.clone();
        if !self.attached {
            let confirm = self.confirm.as_mut()?;
            tokio::select! {
                replay = confirm => match replay {
                    Ok(replay) => {
                        self.pending = replay.into_iter();
                        self.attached = true;
                        self.confirm = None;
                    }
                    // Replaced by a newer stream of the same tab.
                    Err(_) => return None,
                },
                _ = tokio::time::sleep_until(self.deadline) => {
                    tracing::info!(client = %self.client.id, "event stream never confirmed; closed");
                    return None;
                }
                _ = self.kill.killed() => return None,
                _ = shutdown.cancelled() => return None,
            }
        }
        if let Some(frame) = self.pending.next() {
            return Some(frame);
        }
        loop {
            tokio::select! {
                msg = self.rx.recv() => match msg {
                    Some(Outbound::Frame(text)) => {
                        self.client.touch();
                        return Some(text);
                    }
                    // Only a WebSocket's reader queues pongs; an event stream has none.
                    Some(Outbound::Pong(_)) => continue,
                    None => return None,
                },
                _ = self.kill.killed() => return None,
                _ = shutdown.cancelled() => return None,
            }
        }
    }
}

fn event_stream(stream: EventStream) -> impl Stream<Item = Result<Event, Infallible>> {
    futures_util::stream::unfold(stream, |mut stream| async move {
        let frame = stream.next_frame().await?;
        Some((Ok(Event::default().data(frame)), stream))
    })
}
