//! `GET /api/events`: the hub's events over SSE. Every event carries an `id:`: journal
//! events their global journal sequence (the journal row's id), every other event (`hello`,
//! `mark`, `tab`, `run`) the sequence of the last journal row sent before it, so a client
//! that resumes after any event with `Last-Event-ID` (header, or the `last_event_id` query
//! parameter for a page that reopens its stream after a reload) gets every journal row after
//! it and none twice. The stream waits on the store's journal signal: no polling.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tokio::sync::{broadcast, watch};

use super::Door;
use super::{authorize, runs};
use crate::hub::HubEvent;

/// Journal rows read per query.
const PAGE: usize = 500;

struct Feed {
    hub: Arc<Door>,
    last: i64,
    run: Option<String>,
    journal: watch::Receiver<u64>,
    tabs: broadcast::Receiver<HubEvent>,
    queue: VecDeque<Event>,
}

impl Feed {
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(e) = self.queue.pop_front() {
                return Some(e);
            }
            // Seen before reading: a write after this read wakes `changed` below.
            self.journal.borrow_and_update();
            let rows = runs::rows_after(&self.hub, self.last, PAGE);
            if let Some(last) = rows.last() {
                self.last = last.id;
                for row in rows
                    .iter()
                    .filter(|r| self.run.as_ref().is_none_or(|id| *id == r.run_id))
                {
                    let data = runs::event_json(row).to_string();
                    self.queue.push_back(
                        Event::default()
                            .id(row.id.to_string())
                            .event("journal")
                            .data(data),
                    );
                }
                if self.queue.is_empty() {
                    // Only other runs' rows: keep the last id moving for the client.
                    self.queue.push_back(
                        Event::default()
                            .id(self.last.to_string())
                            .event("mark")
                            .data("{}"),
                    );
                }
                continue;
            }
            tokio::select! {
                r = self.journal.changed() => {
                    if r.is_err() { return None; }
                }
                ev = self.tabs.recv() => match ev {
                    Ok(ev) => {
                        let (kind, id) = match &ev {
                            HubEvent::Connected(id) => ("connected", id.clone()),
                            HubEvent::Disconnected(id) => ("disconnected", id.clone()),
                            HubEvent::Lost(id) => ("lost", id.clone()),
                            HubEvent::RunFinished { run_id, .. } => ("run_finished", run_id.clone()),
                        };
                        let name = if kind == "run_finished" { "run" } else { "tab" };
                        // The journal position it was sent at: a resume after it misses nothing.
                        self.queue.push_back(
                            Event::default()
                                .id(self.last.to_string())
                                .event(name)
                                .data(json!({"kind": kind, "id": id}).to_string()),
                        );
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        self.queue.push_back(
                            Event::default()
                                .id(self.last.to_string())
                                .event("tab")
                                .data(r#"{"kind":"lagged"}"#),
                        );
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
                _ = self.hub.shutdown.cancelled() => return None,
            }
        }
    }
}

/// `GET /api/events[?run=ID][&last_event_id=N]`.
pub async fn events(
    State(hub): State<Arc<Door>>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if let Err(r) = authorize(&hub, &Method::GET, &headers) {
        return r.into_response();
    }
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<i64>().ok())
        .or_else(|| q.get("last_event_id").and_then(|v| v.parse().ok()));
    let last = match resume {
        Some(n) => n.max(0),
        None => runs::last_id(&hub),
    };
    let feed = Feed {
        journal: hub.store.journal_watch(),
        tabs: hub.events.subscribe(),
        hub: hub.clone(),
        last,
        run: q.get("run").cloned().filter(|r| !r.is_empty()),
        queue: VecDeque::from([Event::default()
            .id(last.to_string())
            .event("hello")
            .data(json!({"last_event_id": last}).to_string())]),
    };
    let stream = futures_util::stream::unfold(feed, |mut f| async move {
        let e = f.next().await?;
        Some((Ok::<_, Infallible>(e), f))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}
