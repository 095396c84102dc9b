//! The second transport, for tabs whose WebSocket to localhost is blocked (Chrome's Local
//! Network Access prompt denied): hub → tab over `GET /events` (SSE), tab → hub over
//! `POST /send`. Same frames, same token, same registry as the WebSocket path.

#![allow(clippy::result_large_err)] // handlers return ready-made HTTP responses

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use tokio::sync::mpsc;

use super::registry::{Client, ConnHandle, Killer, Outbound};
use super::{auth, Hub};
use crate::protocol::{decode, encode, ClientFrame, ErrorCode, ServerFrame};

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
/// or an `ack`.
pub async fn send(State(hub): State<Arc<Hub>>, headers: HeaderMap, body: String) -> Response {
    if let Err(r) = authorize(&hub, &headers) {
        return r;
    }
    if body.len() > hub.config.limits.max_frame_bytes {
        let frame = ServerFrame::error(ErrorCode::Limit, "帧过大 / frame too big");
        return json(StatusCode::PAYLOAD_TOO_LARGE, &frame);
    }
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
        return match hub.identify(hello) {
            Ok(client) => json(StatusCode::OK, &hub.welcome(&client)),
            Err(e) => json(
                StatusCode::UNAUTHORIZED,
                &ServerFrame::error(e.code(), e.to_string()),
            ),
        };
    }
    let client = match client_from(&hub, &headers) {
        Ok(c) => c,
        Err(r) => return r,
    };
    let received = frame.type_name().to_string();
    let reply = hub
        .handle_frame(&client, frame)
        .unwrap_or(ServerFrame::Ack { received });
    json(StatusCode::OK, &reply)
}

/// `GET /events`: the hub → tab stream for a tab that said `hello` over `POST /send`.
pub async fn events(State(hub): State<Arc<Hub>>, headers: HeaderMap) -> Response {
    if let Err(r) = authorize(&hub, &headers) {
        return r;
    }
    let client = match client_from(&hub, &headers) {
        Ok(c) => c,
        Err(r) => return r,
    };
    let (tx, rx) = mpsc::channel(hub.config.limits.outbound_queue);
    let kill = Killer::default();
    let conn_id = hub.registry.next_conn_id();
    let handle = ConnHandle {
        conn_id,
        tx,
        kill: kill.clone(),
    };
    let pending = hub.registry.attach(&client, handle);
    hub.after_welcome(&client, &pending);
    let guard = Attached {
        hub: hub.clone(),
        client: client.clone(),
        conn_id,
        pending: pending.into_iter(),
        rx,
    };
    let stream = event_stream(guard, kill);
    Sse::new(stream)
        .keep_alive(
            KeepAlive::new()
                .interval(hub.config.timing.ping_interval.min(Duration::from_secs(15)))
                .text("ping"),
        )
        .into_response()
}

/// The stream's state. When the stream is dropped, it marks the tab disconnected, and what
/// the replay or the queue had not yet sent waits for the tab's return (or goes to the
/// connection that replaced this one), as on the WebSocket path.
struct Attached {
    hub: Arc<Hub>,
    client: Arc<Client>,
    conn_id: u64,
    pending: std::vec::IntoIter<String>,
    rx: mpsc::Receiver<Outbound>,
}

impl Drop for Attached {
    fn drop(&mut self) {
        self.hub.connection_closed(&self.client, self.conn_id);
        self.hub
            .registry
            .hand_back(&self.client, self.pending.by_ref(), &mut self.rx);
    }
}

fn event_stream(guard: Attached, kill: Killer) -> impl Stream<Item = Result<Event, Infallible>> {
    futures_util::stream::unfold((guard, kill), |(mut guard, kill)| async move {
        if let Some(frame) = guard.pending.next() {
            return Some((Ok(Event::default().data(frame)), (guard, kill)));
        }
        let shutdown = guard.hub.shutdown.clone();
        tokio::select! {
            msg = guard.rx.recv() => match msg {
                Some(Outbound::Frame(text)) => {
                    guard.client.touch();
                    Some((Ok(Event::default().data(text)), (guard, kill)))
                }
                None => None,
            },
            _ = kill.killed() => None,
            _ = shutdown.cancelled() => None,
        }
    })
}
