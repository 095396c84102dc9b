//! `GET /api/events`: the hub's events over SSE (docs/dashboard.md, "Live events").
//!
//! Every event carries an `id:`, unique and growing on its stream: a journal row's id is its
//! global journal sequence (`21`); every other event (`tab`, `run`, the `lagged` notice) is the
//! K-th such event the hub saw after journal row J, `J.K` with K written in six digits
//! (`21.000003`), so ids also grow read as decimal numbers. Those other events are kept in a
//! bounded ring ([`Recent`]), stamped when they happen, so a client that resumes after any
//! event with `Last-Event-ID` (header, or the `last_event_id` query parameter for a page that
//! reopens its stream after a reload) gets exactly what followed it: every journal row and
//! every kept event after its position, none twice. `hello` (the stream's first event) and
//! `mark` (journal rows a `?run=` filter left out) carry the position the stream stands at.
//! The stream waits on the store's journal signal and the ring's: no polling.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tokio::sync::{broadcast, watch};

use super::DashboardDoor;
use super::{authorize, runs};
use crate::hub::HubEvent;

/// Journal rows read per query.
const PAGE: usize = 500;
/// Events that are not journal rows kept for resuming streams.
pub const KEPT: usize = 4096;

/// A place in the stream: after journal row `journal`, the `k`-th other event (0: the row).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct FeedPos {
    pub journal: i64,
    pub k: u64,
}

impl FeedPos {
    fn row(journal: i64) -> FeedPos {
        FeedPos { journal, k: 0 }
    }

    /// `J` or `J.KKKKKK`.
    pub fn id(self) -> String {
        if self.k == 0 {
            self.journal.to_string()
        } else {
            format!("{}.{:06}", self.journal, self.k)
        }
    }

    /// Reads an id this stream sent (`J` or `J.K`); None for anything else.
    pub fn parse(id: &str) -> Option<FeedPos> {
        let id = id.trim();
        let (j, k) = id.split_once('.').unwrap_or((id, "0"));
        let journal = j.parse::<i64>().ok()?.max(0);
        let k = if k.is_empty() { 0 } else { k.parse().ok()? };
        Some(FeedPos { journal, k })
    }
}

/// One kept event.
#[derive(Debug, Clone)]
struct Kept {
    pos: FeedPos,
    name: &'static str,
    data: String,
}

#[derive(Default)]
struct Ring {
    events: VecDeque<Kept>,
    /// The last event stamped.
    head: FeedPos,
    /// The newest event dropped from the ring: a stream resuming before it missed some.
    dropped: Option<FeedPos>,
}

/// The hub's events that are not journal rows, stamped with their place among the journal's
/// rows and kept for streams that resume. Fed by one task from the first stream on.
#[derive(Default)]
pub struct Recent {
    ring: Mutex<Ring>,
    tick: OnceLock<watch::Sender<u64>>,
    following: OnceLock<()>,
}

impl Recent {
    fn lock(&self) -> std::sync::MutexGuard<'_, Ring> {
        self.ring.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn tick(&self) -> &watch::Sender<u64> {
        self.tick.get_or_init(|| watch::channel(0).0)
    }

    /// Starts following the hub's events (once; later calls do nothing).
    fn follow(self: &Arc<Self>, door: &Arc<DashboardDoor>) {
        if self.following.set(()).is_err() {
            return;
        }
        // Subscribed now, so nothing after this first stream's start is missed.
        let mut rx = door.events.subscribe();
        let (recent, store, shutdown) = (self.clone(), door.store.clone(), door.shutdown.clone());
        crate::spawn::tracked(&door.tracker, async move {
            loop {
                let ev = tokio::select! {
                    ev = rx.recv() => ev,
                    _ = shutdown.cancelled() => return,
                };
                let (name, data) = match ev {
                    Ok(ev) => {
                        let (kind, id) = match &ev {
                            HubEvent::Connected(id) => ("connected", id.clone()),
                            HubEvent::Disconnected(id) => ("disconnected", id.clone()),
                            HubEvent::Lost(id) => ("lost", id.clone()),
                            HubEvent::RunFinished { run_id, .. } => {
                                ("run_finished", run_id.clone())
                            }
                        };
                        let name = if kind == "run_finished" { "run" } else { "tab" };
                        (name, json!({"kind": kind, "id": id}).to_string())
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        ("tab", r#"{"kind":"lagged"}"#.to_string())
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                };
                // Stamped after every journal row written so far.
                recent.push(store.journal_last_id(), name, data);
            }
        });
    }

    fn push(&self, journal: i64, name: &'static str, data: String) {
        {
            let mut ring = self.lock();
            let pos = if journal > ring.head.journal {
                FeedPos { journal, k: 1 }
            } else {
                FeedPos {
                    journal: ring.head.journal,
                    k: ring.head.k + 1,
                }
            };
            ring.head = pos;
            ring.events.push_back(Kept { pos, name, data });
            while ring.events.len() > KEPT {
                let gone = ring.events.pop_front().map(|k| k.pos);
                ring.dropped = gone;
            }
        }
        self.tick().send_modify(|n| *n += 1);
    }

    /// The kept events after `after` up to journal row `upto` (and the events after it), and
    /// the notice that some were dropped when `after` is older than the ring.
    fn between(&self, after: FeedPos, upto: i64) -> Vec<Kept> {
        let ring = self.lock();
        let mut out = Vec::new();
        if let Some(d) = ring.dropped.filter(|d| *d > after && d.journal <= upto) {
            out.push(Kept {
                pos: d,
                name: "tab",
                data: r#"{"kind":"lagged"}"#.into(),
            });
        }
        out.extend(
            ring.events
                .iter()
                .filter(|e| e.pos > after && e.pos.journal <= upto)
                .cloned(),
        );
        out
    }

    /// The last event stamped.
    fn head(&self) -> FeedPos {
        self.lock().head
    }
}

struct Feed {
    door: Arc<DashboardDoor>,
    recent: Arc<Recent>,
    /// The last journal row read.
    read: i64,
    /// The last place sent.
    pos: FeedPos,
    run: Option<String>,
    journal: watch::Receiver<u64>,
    kept: watch::Receiver<u64>,
    queue: VecDeque<Event>,
}

impl Feed {
    fn send(&mut self, pos: FeedPos, name: &str, data: String) {
        debug_assert!(pos > self.pos, "{pos:?} after {:?}", self.pos);
        self.pos = pos;
        self.queue
            .push_back(Event::default().id(pos.id()).event(name).data(data));
    }

    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(e) = self.queue.pop_front() {
                return Some(e);
            }
            // Seen before reading: a write after these reads wakes `changed` below.
            self.journal.borrow_and_update();
            self.kept.borrow_and_update();
            let rows = runs::rows_after(&self.door, self.read, PAGE);
            let upto = rows.last().map_or(self.read, |r| r.id);
            // Other events only up to the rows read: one stamped after a row not read yet
            // waits for that row.
            let mut kept = self.recent.between(self.pos, upto).into_iter().peekable();
            // A row a `?run=` filter leaves out still moves the client's place (a `mark`).
            let mut skipped: Option<i64> = None;
            for row in &rows {
                while let Some(k) = kept.next_if(|k| k.pos < FeedPos::row(row.id)) {
                    self.flush_mark(&mut skipped);
                    self.send(k.pos, k.name, k.data);
                }
                if FeedPos::row(row.id) <= self.pos {
                    continue;
                }
                if self.run.as_ref().is_some_and(|id| *id != row.run_id) {
                    skipped = Some(row.id);
                    continue;
                }
                skipped = None;
                self.send(
                    FeedPos::row(row.id),
                    "journal",
                    runs::event_json(row).to_string(),
                );
            }
            self.flush_mark(&mut skipped);
            for k in kept {
                self.send(k.pos, k.name, k.data);
            }
            self.read = upto;
            if !self.queue.is_empty() || rows.len() == PAGE {
                continue;
            }
            tokio::select! {
                r = self.journal.changed() => {
                    if r.is_err() { return None; }
                }
                r = self.kept.changed() => {
                    if r.is_err() { return None; }
                }
                _ = self.door.shutdown.cancelled() => return None,
            }
        }
    }

    /// Sends a `mark` for the last row the filter left out, if it is past the place sent.
    fn flush_mark(&mut self, skipped: &mut Option<i64>) {
        if let Some(id) = skipped.take() {
            if FeedPos::row(id) > self.pos {
                self.send(FeedPos::row(id), "mark", "{}".into());
            }
        }
    }
}

/// `GET /api/events[?run=ID][&last_event_id=N]`.
pub async fn events(
    State(door): State<Arc<DashboardDoor>>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if let Err(r) = authorize(&door, &Method::GET, &headers) {
        return r.into_response();
    }
    let recent = door.dashboard.recent.clone();
    recent.follow(&door);
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(FeedPos::parse)
        .or_else(|| q.get("last_event_id").and_then(|v| FeedPos::parse(v)));
    let head = recent.head();
    let pos = match resume {
        // An event of this hub's past life (a restart stamps its events anew): its journal
        // place only.
        Some(p) if p.k > 0 && p > head => FeedPos::row(p.journal),
        Some(p) => p,
        None => FeedPos::row(runs::last_id(&door)).max(head),
    };
    let mut feed = Feed {
        journal: door.store.journal_watch(),
        kept: recent.tick().subscribe(),
        recent,
        door: door.clone(),
        read: pos.journal,
        pos,
        run: q.get("run").cloned().filter(|r| !r.is_empty()),
        queue: VecDeque::new(),
    };
    feed.queue.push_back(
        Event::default()
            .id(pos.id())
            .event("hello")
            .data(json!({"last_event_id": pos.journal, "id": pos.id()}).to_string()),
    );
    let stream = futures_util::stream::unfold(feed, |mut f| async move {
        let e = f.next().await?;
        Some((Ok::<_, Infallible>(e), f))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_read_back_and_grow_as_numbers_too() {
        let a = FeedPos::row(21);
        let b = FeedPos { journal: 21, k: 3 };
        let c = FeedPos { journal: 21, k: 10 };
        assert_eq!(
            (a.id(), b.id(), c.id()),
            ("21".into(), "21.000003".into(), "21.000010".into())
        );
        for p in [a, b, c] {
            assert_eq!(FeedPos::parse(&p.id()), Some(p));
        }
        let n = |p: FeedPos| p.id().parse::<f64>().unwrap();
        assert!(n(a) < n(b) && n(b) < n(c) && n(c) < n(FeedPos::row(22)));
        assert!(a < b && b < c && c < FeedPos::row(22));
        assert_eq!(FeedPos::parse("x"), None);
        assert_eq!(FeedPos::parse("-4"), Some(FeedPos::row(0)));
    }

    #[test]
    fn kept_events_are_stamped_after_the_rows_written_and_dropped_ones_are_noticed() {
        let r = Recent::default();
        r.push(5, "tab", "a".into());
        r.push(5, "tab", "b".into());
        r.push(7, "run", "c".into());
        let pos: Vec<String> = r
            .between(FeedPos::default(), 7)
            .iter()
            .map(|k| k.pos.id())
            .collect();
        assert_eq!(pos, ["5.000001", "5.000002", "7.000001"]);
        // Up to row 6 only: the event after row 7 waits for it.
        assert_eq!(r.between(FeedPos::row(5), 6).len(), 2);
        assert_eq!(r.between(FeedPos { journal: 5, k: 1 }, 6).len(), 1);
        // A journal that did not move since: the next event follows the last one.
        r.push(3, "tab", "d".into());
        assert_eq!(r.head().id(), "7.000002");
        for i in 0..KEPT {
            r.push(8, "tab", i.to_string());
        }
        let after_start = r.between(FeedPos::default(), 9);
        assert_eq!(after_start[0].data, r#"{"kind":"lagged"}"#);
        assert_eq!(after_start.len(), KEPT + 1);
        assert!(after_start.windows(2).all(|w| w[0].pos < w[1].pos));
    }
}
