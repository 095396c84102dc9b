//! The OpenAI-compatible API over the tabs: `GET /v1/models` and `POST /v1/chat/completions`
//! (streaming or not) on the hub's port. The bearer token is the hub token; `Host` and
//! `Origin` are checked like every other door; no CORS. See docs/api.md.
//!
//! `models` names what serves a request, `prompt` turns the messages into the text a tab
//! receives, `admission` hands out tabs (one prompt per tab, FIFO per model), `chat` answers
//! the two endpoints and streams a tab's chunks as they arrive; the hub feeds a prompt's
//! chunks and progress to it through [`ApiState::on_chunk`] and [`ApiState::on_update`].

pub mod admission;
mod agent;
mod answer;
pub mod attach;
mod chat;
pub mod error;
pub mod fetch;
mod flow;
pub mod journal;
pub mod metrics;

pub(crate) use chat::{ask_tab, flow_names};
pub(crate) use flow::{input_name, run_outcome};
pub mod models;
pub mod prompt;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{header, HeaderMap};
use axum::routing::{any, get, post};
use axum::Router;
use dashmap::DashMap;
use tokio::sync::mpsc;

use crate::ask::Asks;
use crate::hub::registry::{Client, Registry};
use crate::hub::tasks::Tasks;
use crate::hub::Hub;
use crate::protocol::TaskState;
use crate::runner::Runner;
use crate::webhooks::Webhooks;
use admission::Admission;
use error::ApiError;

/// What the API's handlers reach, the state of its routes: built by `app` from the
/// components it names, the hub's own parts through `Deref`.
pub struct ApiDoor {
    pub hub: Arc<Hub>,
    /// Admission and the streams of requests in progress.
    pub api: Arc<ApiState>,
    /// The decision engine's view of each tab (health, what `auto` would pick).
    pub asks: Arc<Asks>,
    /// Flow runs (a flow as a model, `/metrics`).
    pub runner: Arc<Runner>,
    /// The signed callbacks' counters (`/metrics`).
    pub webhooks: Arc<Webhooks>,
    /// The event bus's counters (`/metrics`).
    pub bus: Arc<crate::events::Bus>,
    /// Agents' sessions (`agent/NAME` model ids).
    pub loops: Arc<crate::agent_loop::Loops>,
}

impl ApiDoor {
    /// The API's admission (who waits for which tab).
    pub fn admission(&self) -> &Arc<Admission> {
        self.api.admission()
    }
}

impl std::ops::Deref for ApiDoor {
    type Target = Hub;

    fn deref(&self) -> &Hub {
        &self.hub
    }
}

/// Events of one API prompt, from the tab's socket to the request streaming them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TapEvent {
    /// The tab took the prompt (`task_update` accepted, sent or streaming).
    Accepted,
    /// A delta of the reply.
    Chunk(String),
    /// A delta of the model's thinking (`reasoning_content`).
    Reasoning(String),
}

/// Events buffered per streaming request; past this the stream stops taking chunks and the
/// rest of the reply goes out in one delta from the tab's `turn_end`.
const TAP_CAPACITY: usize = 1024;
/// Turn ids of cancelled prompts remembered per tab: their late chunks are not a new
/// prompt's reply.
const DEAD_TURNS: usize = 8;
/// Default period of `: keepalive` comments on a silent stream.
pub const KEEPALIVE: Duration = Duration::from_secs(15);

struct Tap {
    tx: mpsc::Sender<TapEvent>,
    /// The tab's turn id this prompt's chunks carry (the first one seen).
    turn: Mutex<Option<String>>,
    lagged: AtomicBool,
}

/// The API's share of the hub: admission and the taps of streaming requests.
pub struct ApiState {
    admission: Arc<Admission>,
    /// Task id → the request streaming it.
    taps: DashMap<String, Tap>,
    /// Client id → turn ids of its cancelled prompts, newest last.
    dead_turns: DashMap<String, VecDeque<String>>,
    keepalive_ms: AtomicU64,
    /// The doors' request counters and answer times (`/metrics`).
    counters: metrics::DoorCounters,
}

impl ApiState {
    /// The API's state over the hub's tabs; `checks` are admission's (see
    /// [`admission::Checks`]).
    pub fn new(registry: Arc<Registry>, tasks: Arc<Tasks>, checks: admission::Checks) -> ApiState {
        ApiState {
            admission: Arc::new(Admission::new(registry, tasks, checks)),
            taps: DashMap::new(),
            dead_turns: DashMap::new(),
            keepalive_ms: AtomicU64::new(KEEPALIVE.as_millis() as u64),
            counters: metrics::DoorCounters::default(),
        }
    }

    pub fn admission(&self) -> &Arc<Admission> {
        &self.admission
    }

    /// The doors' request counters and answer times.
    pub fn counters(&self) -> &metrics::DoorCounters {
        &self.counters
    }

    /// Period of `: keepalive` comments on a silent stream (tests shorten it).
    pub fn set_keepalive(&self, every: Duration) {
        self.keepalive_ms
            .store(every.as_millis().max(1) as u64, Ordering::Relaxed);
    }

    fn keepalive(&self) -> Duration {
        Duration::from_millis(self.keepalive_ms.load(Ordering::Relaxed))
    }

    /// A chunk from `client` while its task `task_id` is in flight.
    pub fn on_chunk(
        &self,
        client: &Client,
        task_id: &str,
        turn_id: &str,
        text: &str,
        reasoning: Option<&str>,
    ) {
        if self.taps.is_empty() {
            return;
        }
        let Some(tap) = self.taps.get(task_id) else {
            return;
        };
        {
            let mut turn = tap.turn.lock().unwrap_or_else(|p| p.into_inner());
            match turn.as_deref() {
                Some(t) if t != turn_id => return,
                Some(_) => {}
                None => {
                    let dead = self
                        .dead_turns
                        .get(&client.id)
                        .is_some_and(|d| d.iter().any(|t| t == turn_id));
                    if dead {
                        return;
                    }
                    *turn = Some(turn_id.to_string());
                }
            }
        }
        if tap.lagged.load(Ordering::Relaxed) {
            return;
        }
        let events = [
            reasoning
                .filter(|r| !r.is_empty())
                .map(|r| TapEvent::Reasoning(r.to_string())),
            (!text.is_empty() || reasoning.is_none()).then(|| TapEvent::Chunk(text.to_string())),
        ];
        for ev in events.into_iter().flatten() {
            if tap.tx.try_send(ev).is_err() {
                tap.lagged.store(true, Ordering::Relaxed);
                return;
            }
        }
    }

    /// A `task_update` from a tab.
    pub fn on_update(&self, task_id: &str, state: TaskState) {
        if matches!(
            state,
            TaskState::Accepted | TaskState::Sent | TaskState::Streaming
        ) {
            if let Some(tap) = self.taps.get(task_id) {
                let _ = tap.tx.try_send(TapEvent::Accepted);
            }
        }
    }

    /// A tab may have become free (a reply, a failure, a reconnect).
    pub fn wake(&self) {
        self.admission.wake();
    }

    fn open_tap(&self, task_id: &str) -> mpsc::Receiver<TapEvent> {
        let (tx, rx) = mpsc::channel(TAP_CAPACITY);
        self.taps.insert(
            task_id.to_string(),
            Tap {
                tx,
                turn: Mutex::new(None),
                lagged: AtomicBool::new(false),
            },
        );
        rx
    }

    /// Closes a tap; when the prompt was cancelled, its turn is remembered as dead.
    fn close_tap(&self, client: &Client, task_id: &str, cancelled: bool) {
        let Some((_, tap)) = self.taps.remove(task_id) else {
            return;
        };
        let turn = tap.turn.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let (true, Some(turn)) = (cancelled, turn) {
            let mut d = self.dead_turns.entry(client.id.clone()).or_default();
            d.push_back(turn);
            while d.len() > DEAD_TURNS {
                d.pop_front();
            }
        }
    }
}

/// The API's routes, merged into the hub's router.
pub fn routes() -> Router<Arc<ApiDoor>> {
    Router::new()
        .route(
            "/v1/models",
            get(chat::models).fallback(chat::method_not_allowed),
        )
        .route(
            "/v1/models/{*id}",
            get(chat::model).fallback(chat::method_not_allowed),
        )
        .route(
            "/v1/chat/completions",
            post(chat::completions).fallback(chat::method_not_allowed),
        )
        .route("/v1", any(chat::not_found))
        .route("/v1/", any(chat::not_found))
        .route("/v1/{*rest}", any(chat::not_found))
        .route(
            "/metrics",
            get(metrics::metrics).fallback(chat::method_not_allowed),
        )
}

/// Host and Origin like every door (403), then the bearer token (401).
fn authorize(door: &ApiDoor, headers: &HeaderMap) -> Result<(), ApiError> {
    door.check_headers(headers)
        .map_err(|(_, why)| ApiError::forbidden(why))?;
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .unwrap_or("");
    if presented.is_empty() || !crate::hub::auth::token_matches(door.token(), presented) {
        return Err(ApiError::unauthorized());
    }
    Ok(())
}
