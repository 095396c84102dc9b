//! One answer of the OpenAI-style door, whoever produces it (a tab's prompt, a flow run, an
//! agent's session): its shape ([`Reply`]), its event stream ([`produce`]) and the response
//! ([`respond`]) for answers that are not one tab's prompt.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::error::ApiError;
use super::models::ModelId;
use super::prompt::ChatRequest;
use super::ApiDoor;
use super::TapEvent;
use crate::hub::registry::Client;

pub(super) type PendingAnswer = Pin<Box<dyn Future<Output = Result<String, ApiError>> + Send>>;
pub(super) type ChunkSender = mpsc::Sender<Result<Bytes, Infallible>>;

pub(super) fn sse_response(rx: mpsc::Receiver<Result<Bytes, Infallible>>) -> Response {
    let body = Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx));
    (
        [
            (header::CONTENT_TYPE, "text/event-stream; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// What a stream's owner does when it ends: `finish(outcome)` when the answer came (or
/// failed), dropped without it when the client left (then the prompt is cancelled).
pub(super) trait Finish: Send {
    fn finish(&mut self, outcome: Result<&str, &ApiError>);
}

/// The answer of a request that is not one tab's prompt (a flow run, an agent's session):
/// one object once it is there, or an event stream (headers now, keepalives until then).
/// `job` is told the outcome; dropped unfinished (the client left), it stops the work.
pub(super) async fn respond(
    door: Arc<ApiDoor>,
    stream: bool,
    reply: Reply,
    answer: PendingAnswer,
    mut job: Box<dyn Finish>,
) -> Result<Response, ApiError> {
    if !stream {
        let r = answer.await;
        job.finish(r.as_deref());
        return Ok(axum::Json(reply.object(&r?)).into_response());
    }
    let (tx, rx) = mpsc::channel(32);
    let keepalive = door.api.keepalive();
    crate::spawn::tracked(
        &door.tracker,
        produce(door.clone(), reply, None, None, answer, job, tx, keepalive),
    );
    Ok(sse_response(rx))
}
/// Streams a prompt's reply: role delta, content deltas as chunks arrive, the rest of the
/// reply from `turn_end`, one finish_reason, `[DONE]`. `: keepalive` while silent.
#[allow(clippy::too_many_arguments)]
pub(super) async fn produce(
    door: Arc<ApiDoor>,
    reply: Reply,
    mut tap: Option<mpsc::Receiver<TapEvent>>,
    first: Option<TapEvent>,
    mut answer: PendingAnswer,
    mut job: Box<dyn Finish>,
    tx: ChunkSender,
    keepalive: Duration,
) {
    let mut emitted = String::new();
    let mut head = reply.stream_start();
    if let Some(ev) = first {
        head.push_str(&reply.event(&ev, &mut emitted));
    }
    if send(&tx, head).await.is_err() {
        return;
    }
    let mut ka = tokio::time::interval_at(tokio::time::Instant::now() + keepalive, keepalive);
    loop {
        tokio::select! {
            biased;
            _ = tx.closed() => return,
            ev = next_event(&mut tap) => match ev {
                Some(ev @ (TapEvent::Chunk(_) | TapEvent::Reasoning(_))) => {
                    if send(&tx, reply.event(&ev, &mut emitted)).await.is_err() {
                        return;
                    }
                    ka.reset();
                }
                Some(TapEvent::Accepted) => {}
                None => tap = None,
            },
            r = &mut answer => {
                // Chunks that came before the turn_end are all in the tap by now.
                let mut out = String::new();
                if let Some(rx) = tap.as_mut() {
                    while let Ok(ev) = rx.try_recv() {
                        out.push_str(&reply.event(&ev, &mut emitted));
                    }
                }
                job.finish(r.as_deref());
                match r {
                    Ok(full) => {
                        match full.strip_prefix(emitted.as_str()) {
                            Some(rest) if !rest.is_empty() => out.push_str(&reply.delta(rest)),
                            Some(_) => {}
                            None => tracing::warn!("the tab's chunks differ from its final text; the stream keeps what it sent"),
                        }
                        out.push_str(&reply.finish_with_usage(&full));
                    }
                    Err(e) => out.push_str(&error_event(&e)),
                }
                let _ = send(&tx, out).await;
                return;
            }
            _ = ka.tick() => {
                if send(&tx, ": keepalive\n\n".to_string()).await.is_err() {
                    return;
                }
            }
            _ = door.shutdown.cancelled() => {
                let e = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "server_error", "shutting_down", "集线器正在关闭 / the hub is shutting down");
                let _ = send(&tx, error_event(&e)).await;
                return;
            }
        }
    }
}

async fn next_event(tap: &mut Option<mpsc::Receiver<TapEvent>>) -> Option<TapEvent> {
    match tap {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

async fn send(tx: &ChunkSender, text: String) -> Result<(), ()> {
    tx.send(Ok(Bytes::from(text))).await.map_err(|_| ())
}

/// A mid-stream failure: an error event, then `[DONE]`.
pub(super) fn error_event(e: &ApiError) -> String {
    format!("data: {}\n\ndata: [DONE]\n\n", e.body())
}

pub(super) fn now_secs() -> i64 {
    crate::store::now_ms() / 1000
}

/// Rough token counts for `usage` (marked estimated): a CJK character is about one token,
/// other text about four bytes per token.
pub fn estimate_tokens(text: &str) -> u64 {
    let (mut ascii, mut other) = (0u64, 0u64);
    for c in text.chars() {
        if c.is_ascii() {
            ascii += 1;
        } else {
            other += 1;
        }
    }
    ascii.div_ceil(4) + other
}

/// The shape of one answer: ids and the request's options.
#[derive(Clone)]
pub(super) struct Reply {
    id: String,
    created: i64,
    model: String,
    tab: Option<String>,
    include_usage: bool,
    prompt_tokens: u64,
}

impl Reply {
    pub(super) fn new(req: &ChatRequest, model: &ModelId) -> Reply {
        Reply {
            id: format!("chatcmpl-{}", uuid::Uuid::new_v4().simple()),
            created: now_secs(),
            model: model.key(),
            tab: None,
            include_usage: req.include_usage,
            prompt_tokens: estimate_tokens(&req.prompt()),
        }
    }

    pub(super) fn tab(mut self, client: &Client) -> Reply {
        self.tab = Some(client.display());
        self
    }

    fn aicard(&self) -> Value {
        json!({"tab": self.tab, "usage_estimated": true})
    }

    fn usage(&self, text: &str) -> Value {
        let c = estimate_tokens(text);
        json!({"prompt_tokens": self.prompt_tokens, "completion_tokens": c, "total_tokens": self.prompt_tokens + c})
    }

    pub(super) fn object(&self, text: &str) -> Value {
        json!({
            "id": self.id, "object": "chat.completion", "created": self.created, "model": self.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": null},
                         "logprobs": null, "finish_reason": "stop"}],
            "usage": self.usage(text),
            "system_fingerprint": null,
            "aicard": self.aicard(),
        })
    }

    fn chunk(&self, delta: Value, finish: Option<&str>) -> String {
        let v = json!({
            "id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
            "system_fingerprint": null,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        });
        format!("data: {v}\n\n")
    }

    pub(super) fn stream_start(&self) -> String {
        let v = json!({
            "id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
            "system_fingerprint": null,
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": null, "finish_reason": null}],
            "aicard": self.aicard(),
        });
        format!("data: {v}\n\n")
    }

    pub(super) fn delta(&self, text: &str) -> String {
        self.chunk(json!({"content": text}), None)
    }

    /// The stream chunk for one tap event: answer text (added to `emitted`, what the stream
    /// has sent of the answer) or the model's thinking as `reasoning_content`.
    pub(super) fn event(&self, ev: &TapEvent, emitted: &mut String) -> String {
        match ev {
            TapEvent::Chunk(t) => {
                emitted.push_str(t);
                self.delta(t)
            }
            TapEvent::Reasoning(r) => self.chunk(json!({"reasoning_content": r}), None),
            TapEvent::Accepted => String::new(),
        }
    }

    /// The finish chunk, the usage chunk if asked for, `[DONE]`.
    pub(super) fn finish_with_usage(&self, full: &str) -> String {
        let mut out = self.chunk(json!({}), Some("stop"));
        if self.include_usage {
            let v = json!({
                "id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                "system_fingerprint": null, "choices": [], "usage": self.usage(full), "aicard": self.aicard(),
            });
            out.push_str(&format!("data: {v}\n\n"));
        }
        out.push_str("data: [DONE]\n\n");
        out
    }
}
