//! Admission: one API prompt per tab at a time, FIFO per model, bounded waiting, and the
//! estimate behind 429 + `Retry-After`.
//!
//! Every request joins one arrival-ordered list and the list is pumped: each waiter, oldest
//! first, takes the least used free tab among its model's tabs. Two waiters for the same model
//! see the same tabs, so a later one never overtakes an earlier one (FIFO per model); waiters
//! for other models may go past a waiter whose tabs are all busy. A tab is free when no API
//! request holds it and its own task queue is empty (flows and commands share the tabs).

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dashmap::DashMap;
use tokio::sync::oneshot;

use super::error::ApiError;
use super::models::{candidates, ModelId};
use crate::hub::registry::{Client, Registry};
use crate::hub::tasks::Tasks;

/// API requests waiting for one model at most.
pub const MAX_WAITING_PER_MODEL: usize = 64;
/// API requests waiting in all.
pub const MAX_WAITING: usize = 512;
/// Assumed answer time of a tab the API has not timed yet (seconds).
pub const DEFAULT_ANSWER_SECS: f64 = 30.0;
/// Weight of the newest answer time in a tab's moving average.
const EWMA_ALPHA: f64 = 0.3;

struct Waiter {
    key: String,
    model: ModelId,
    tx: oneshot::Sender<Arc<Client>>,
}

#[derive(Default)]
struct Inner {
    queue: VecDeque<Waiter>,
    /// Client ids held by an API request.
    leased: HashSet<String>,
}

/// The admission state of one hub.
pub struct Admission {
    inner: Mutex<Inner>,
    /// `inner.queue.len()`, read without the lock on the tab's hot path.
    waiting: AtomicUsize,
    registry: Arc<Registry>,
    tasks: Arc<Tasks>,
    /// Client id → moving average of its API answer times (seconds).
    answer_secs: DashMap<String, f64>,
    /// Whether a tab may take a prompt now (set by the hub: the decision engine's cooldowns
    /// and parked tabs); unset, every free tab may.
    usable: std::sync::OnceLock<UsableCheck>,
}

/// Whether a free tab may take a prompt now (see [`Admission::set_usable`]).
pub type UsableCheck = Box<dyn Fn(&Client) -> bool + Send + Sync>;

/// A tab held for one request; dropping it frees the tab and serves the next waiter.
pub struct Lease {
    adm: Arc<Admission>,
    pub client: Arc<Client>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.adm.release(&self.client.id);
    }
}

/// A waiter's receiving end; dropped early (the client left), it gives back a tab that was
/// handed to it in the meantime.
struct Ticket {
    adm: Arc<Admission>,
    rx: Option<oneshot::Receiver<Arc<Client>>>,
}

impl Ticket {
    /// A tab already handed over, if any; closes the channel so none arrives later.
    fn take_now(&mut self) -> Option<Arc<Client>> {
        let rx = self.rx.as_mut()?;
        rx.close();
        let got = rx.try_recv().ok();
        self.rx = None;
        got
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let Some(c) = self.take_now() {
            self.adm.release(&c.id);
        }
    }
}

impl Admission {
    pub fn new(registry: Arc<Registry>, tasks: Arc<Tasks>) -> Admission {
        Admission {
            inner: Mutex::new(Inner::default()),
            waiting: AtomicUsize::new(0),
            registry,
            tasks,
            answer_secs: DashMap::new(),
            usable: std::sync::OnceLock::new(),
        }
    }

    /// Sets the check a free tab must pass to take a prompt (once, at hub start).
    pub fn set_usable(&self, check: UsableCheck) {
        let _ = self.usable.set(check);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits (up to `timeout`) for a tab serving `model`. 503 when no tab serves it, 429 when
    /// the estimated or the actual wait exceeds `timeout` or the queue is full.
    pub async fn admit(
        self: &Arc<Self>,
        model: &ModelId,
        timeout: Duration,
    ) -> Result<Lease, ApiError> {
        let key = model.key();
        let deadline = tokio::time::Instant::now() + timeout;
        if candidates(&self.registry, model).is_empty() {
            return Err(ApiError::no_tab(&key).retry_after(5));
        }
        let (tx, rx) = oneshot::channel();
        let mut ticket = Ticket {
            adm: self.clone(),
            rx: Some(rx),
        };
        {
            let mut inner = self.lock();
            let same = inner.queue.iter().filter(|w| w.key == key).count();
            if same >= MAX_WAITING_PER_MODEL || inner.queue.len() >= MAX_WAITING {
                drop(inner);
                return Err(busy("queue_full", &key, self.eta(model, same)));
            }
            inner.queue.push_back(Waiter {
                key: key.clone(),
                model: model.clone(),
                tx,
            });
            self.pump_locked(&mut inner);
        }
        let mut first = true;
        loop {
            let rx = ticket.rx.as_mut().expect("open until taken");
            if let Ok(client) = rx.try_recv() {
                ticket.rx = None;
                return Ok(Lease {
                    adm: self.clone(),
                    client,
                });
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            // The estimate decides once, at arrival; after that only the deadline does.
            let eta = self.eta(model, self.ahead(&key));
            let too_long = first && eta > timeout.as_secs_f64();
            first = false;
            if left.is_zero() || too_long {
                return match ticket.take_now() {
                    Some(client) => Ok(Lease {
                        adm: self.clone(),
                        client,
                    }),
                    None => {
                        self.forget_closed();
                        let code = if too_long {
                            "tabs_busy"
                        } else {
                            "queue_timeout"
                        };
                        Err(busy(code, &key, eta))
                    }
                };
            }
            // Woken by a handed-over tab; the periodic re-pump covers tabs freed by work the
            // hub does not announce (a task timing out).
            let tick = deadline.min(tokio::time::Instant::now() + Duration::from_secs(1));
            let rx = ticket.rx.as_mut().expect("open until taken");
            let got = tokio::select! {
                got = rx => Some(got),
                _ = tokio::time::sleep_until(tick) => None,
            };
            match got {
                Some(Ok(client)) => {
                    ticket.rx = None;
                    return Ok(Lease {
                        adm: self.clone(),
                        client,
                    });
                }
                Some(Err(_)) => {
                    ticket.rx = None;
                    return Err(ApiError::no_tab(&key).retry_after(5));
                }
                None => {
                    if candidates(&self.registry, model).is_empty() {
                        drop(ticket);
                        self.forget_closed();
                        return Err(ApiError::no_tab(&key).retry_after(5));
                    }
                    self.pump();
                }
            }
        }
    }

    /// Waiters for `key` queued now (the caller among them, so minus one).
    fn ahead(&self, key: &str) -> usize {
        self.lock()
            .queue
            .iter()
            .filter(|w| w.key == key)
            .count()
            .saturating_sub(1)
    }

    /// Estimated seconds until a request with `ahead` requests before it gets a tab.
    pub fn eta(&self, model: &ModelId, ahead: usize) -> f64 {
        let tabs = candidates(&self.registry, model);
        let n = tabs.len().max(1);
        let known: Vec<f64> = tabs
            .iter()
            .filter_map(|c| self.answer_secs.get(&c.id).map(|s| *s))
            .collect();
        let avg = if known.is_empty() {
            DEFAULT_ANSWER_SECS
        } else {
            known.iter().sum::<f64>() / known.len() as f64
        };
        avg * ((ahead / n) + 1) as f64
    }

    /// Records how long a tab took to answer an API prompt.
    pub fn record(&self, client: &Client, took: Duration) {
        let s = took.as_secs_f64();
        self.answer_secs
            .entry(client.id.clone())
            .and_modify(|a| *a = *a * (1.0 - EWMA_ALPHA) + s * EWMA_ALPHA)
            .or_insert(s);
    }

    fn release(&self, client_id: &str) {
        let mut inner = self.lock();
        inner.leased.remove(client_id);
        self.pump_locked(&mut inner);
    }

    fn forget_closed(&self) {
        let mut inner = self.lock();
        inner.queue.retain(|w| !w.tx.is_closed());
        self.waiting.store(inner.queue.len(), Ordering::Relaxed);
    }

    /// Something may have freed a tab: serve waiters (cheap when none wait).
    pub fn wake(&self) {
        if self.waiting.load(Ordering::Relaxed) > 0 {
            self.pump();
        }
    }

    pub fn pump(&self) {
        let mut inner = self.lock();
        self.pump_locked(&mut inner);
    }

    fn pump_locked(&self, inner: &mut Inner) {
        let mut i = 0;
        while i < inner.queue.len() {
            if inner.queue[i].tx.is_closed() {
                inner.queue.remove(i);
                continue;
            }
            let free = candidates(&self.registry, &inner.queue[i].model)
                .into_iter()
                .filter(|c| !inner.leased.contains(&c.id) && self.tasks.load(c) == 0)
                .filter(|c| self.usable.get().is_none_or(|usable| usable(c)))
                .min_by_key(|c| c.tasks_started.load(Ordering::Relaxed));
            let Some(client) = free else {
                i += 1;
                continue;
            };
            let w = inner.queue.remove(i).expect("index in range");
            inner.leased.insert(client.id.clone());
            if let Err(client) = w.tx.send(client) {
                inner.leased.remove(&client.id);
            }
        }
        self.waiting.store(inner.queue.len(), Ordering::Relaxed);
    }

    /// Held by an API request, or busy with other work.
    pub fn busy(&self, client: &Client) -> bool {
        self.lock().leased.contains(&client.id) || self.tasks.load(client) > 0
    }

    /// Tabs serving `model` held by API requests now.
    pub fn busy_count(&self, key: &str) -> usize {
        let tabs = candidates(&self.registry, &ModelId::parse(key));
        let inner = self.lock();
        tabs.iter().filter(|c| inner.leased.contains(&c.id)).count()
    }

    /// API requests waiting for `key`.
    pub fn depth(&self, key: &str) -> usize {
        self.lock().queue.iter().filter(|w| w.key == key).count()
    }
}

fn busy(code: &'static str, key: &str, eta: f64) -> ApiError {
    ApiError::new(
        axum::http::StatusCode::TOO_MANY_REQUESTS,
        "rate_limit_error",
        code,
        format!(
            "`{key}` 的标签页都在忙 / every tab serving `{key}` is busy; estimated wait {eta:.0} s \
             exceeds X-AIcard-Queue-Timeout"
        ),
    )
    .retry_after(eta.ceil() as u64)
}
