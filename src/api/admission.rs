//! Admission: one API prompt per tab at a time, FIFO per model, bounded waiting, and the
//! estimate behind 429 + `Retry-After`.
//!
//! Every request joins one arrival-ordered list and the list is pumped: each waiter, oldest
//! first, takes the least used free tab among its model's tabs. Two waiters for the same model
//! see the same tabs, so a later one never overtakes an earlier one (FIFO per model); waiters
//! for other models may go past a waiter whose tabs are all busy. A tab is free when no API
//! request holds it and its own task queue is empty (flows and commands share the tabs).
//!
//! A conversation sticks to the tab that answered its first turn (`x-aicard-conversation`, or
//! the hash of its first user message): its follow-ups wait for that tab while it is online
//! and may take work. A model whose every tab waits for a person (captcha, login) is refused at
//! once (503 `tabs_unavailable`) rather than after the queue timeout.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;

use super::error::ApiError;
use super::models::{candidates, ModelId};
use crate::decide::{Timing, DEFAULT_S_PER_1K, DEFAULT_TTFT_S};
use crate::hub::registry::{Client, Registry};
use crate::hub::tasks::Tasks;

/// API requests waiting for one model at most.
pub const MAX_WAITING_PER_MODEL: usize = 64;
/// API requests waiting in all.
pub const MAX_WAITING: usize = 512;

/// Conversations remembered at once (least recently used forgotten first).
pub const MAX_CONVERSATIONS: usize = 4096;

struct Waiter {
    key: String,
    model: ModelId,
    /// The conversation this request continues, if any.
    conversation: Option<String>,
    tx: oneshot::Sender<Arc<Client>>,
}

/// Conversation key → the client id that answered it last, least recently used first out.
#[derive(Default)]
struct Conversations {
    tab: HashMap<String, (String, u64)>,
    by_use: BTreeMap<u64, String>,
    next: u64,
}

impl Conversations {
    fn get(&self, conversation: &str) -> Option<&str> {
        self.tab.get(conversation).map(|(c, _)| c.as_str())
    }

    fn set(&mut self, conversation: &str, client: &str) {
        self.next += 1;
        let seq = self.next;
        if let Some((_, old)) = self
            .tab
            .insert(conversation.to_string(), (client.to_string(), seq))
        {
            self.by_use.remove(&old);
        }
        self.by_use.insert(seq, conversation.to_string());
        while self.tab.len() > MAX_CONVERSATIONS {
            let Some((_, gone)) = self.by_use.pop_first() else {
                break;
            };
            self.tab.remove(&gone);
        }
    }
}

#[derive(Default)]
struct Inner {
    queue: VecDeque<Waiter>,
    /// Client ids held by an API request, with when they were taken.
    leased: HashMap<String, std::time::Instant>,
    conversations: Conversations,
}

/// Whether a tab may take a prompt now, as the decision engine sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standby {
    /// It may (when no other work holds it).
    Ready,
    /// Not yet: cooling down after a rate limit (this long), or a probe in flight.
    Later(Duration),
    /// Not until a person acts in it: `captcha`, `login`.
    Person(&'static str),
}

/// The admission state of one hub.
pub struct Admission {
    inner: Mutex<Inner>,
    /// `inner.queue.len()`, read without the lock on the tab's hot path.
    waiting: AtomicUsize,
    registry: Arc<Registry>,
    tasks: Arc<Tasks>,
    /// How long a tab's tasks take and how far its current one is, as the decision engine
    /// measured them (given by the hub); none, every tab is the engine's unmeasured default.
    timing: Option<TimingCheck>,
    /// Whether a tab may take a prompt now (given by the hub: the decision engine's cooldowns
    /// and parked tabs); none, every free tab may.
    usable: Option<UsableCheck>,
}

/// Whether a free tab may take a prompt now (see [`Checks::usable`]).
pub type UsableCheck = Box<dyn Fn(&Client) -> Standby + Send + Sync>;

/// A tab's task timing (see [`Checks::timing`]).
pub type TimingCheck = Box<dyn Fn(&Client) -> Timing + Send + Sync>;

/// What admission asks of the services below the doors, given at construction (the
/// composition root builds both over the decision engine); each is optional.
#[derive(Default)]
pub struct Checks {
    /// Whether a free tab may take a prompt now.
    pub usable: Option<UsableCheck>,
    /// How long a tab's tasks take (the API's wait estimate).
    pub timing: Option<TimingCheck>,
}

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
struct AdmissionTicket {
    adm: Arc<Admission>,
    rx: Option<oneshot::Receiver<Arc<Client>>>,
}

impl AdmissionTicket {
    /// A tab already handed over, if any; closes the channel so none arrives later.
    fn take_now(&mut self) -> Option<Arc<Client>> {
        let rx = self.rx.as_mut()?;
        rx.close();
        let got = rx.try_recv().ok();
        self.rx = None;
        got
    }
}

impl Drop for AdmissionTicket {
    fn drop(&mut self) {
        if let Some(c) = self.take_now() {
            self.adm.release(&c.id);
        }
    }
}

impl Admission {
    pub fn new(registry: Arc<Registry>, tasks: Arc<Tasks>, checks: Checks) -> Admission {
        Admission {
            inner: Mutex::new(Inner::default()),
            waiting: AtomicUsize::new(0),
            registry,
            tasks,
            timing: checks.timing,
            usable: checks.usable,
        }
    }

    fn timing(&self, c: &Client) -> Timing {
        match &self.timing {
            Some(check) => check(c),
            None => Timing {
                task_s: DEFAULT_TTFT_S
                    + DEFAULT_S_PER_1K * crate::decide::DEFAULT_REPLY_CHARS as f64 / 1000.0,
                measured: false,
                running_s: None,
            },
        }
    }

    fn standby(&self, c: &Client) -> Standby {
        self.usable
            .as_ref()
            .map_or(Standby::Ready, |check| check(c))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits (up to `timeout`) for a tab serving `model`. 503 when no tab serves it or every
    /// one waits for a person, 429 when the estimated or the actual wait exceeds `timeout` or
    /// the queue is full. `conversation` (see [`conversation_key`]) keeps a conversation on
    /// the tab that answered it before.
    pub async fn admit(
        self: &Arc<Self>,
        model: &ModelId,
        conversation: Option<String>,
        timeout: Duration,
    ) -> Result<Lease, ApiError> {
        let key = model.key();
        let deadline = tokio::time::Instant::now() + timeout;
        if candidates(&self.registry, model).is_empty() {
            return Err(ApiError::no_tab(&key).retry_after(5));
        }
        self.check_person(model, &key)?;
        let (tx, rx) = oneshot::channel();
        let mut ticket = AdmissionTicket {
            adm: self.clone(),
            rx: Some(rx),
        };
        {
            let mut inner = self.lock();
            let same = inner.queue.iter().filter(|w| w.key == key).count();
            if same >= MAX_WAITING_PER_MODEL || inner.queue.len() >= MAX_WAITING {
                let eta = self.eta_locked(&inner, model, conversation.as_deref(), same);
                drop(inner);
                return Err(busy("queue_full", &key, eta));
            }
            inner.queue.push_back(Waiter {
                key: key.clone(),
                model: model.clone(),
                conversation: conversation.clone(),
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
            let eta = self.eta(model, conversation.as_deref(), self.ahead(&key));
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
                    if let Err(e) = self.check_person(model, &key) {
                        if let Some(client) = ticket.take_now() {
                            return Ok(Lease {
                                adm: self.clone(),
                                client,
                            });
                        }
                        self.forget_closed();
                        return Err(e);
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

    /// 503 `tabs_unavailable` when every tab serving `model` waits for a person.
    fn check_person(&self, model: &ModelId, key: &str) -> Result<(), ApiError> {
        let tabs = candidates(&self.registry, model);
        let mut why = Vec::new();
        for c in &tabs {
            match self.standby(c) {
                Standby::Person(reason) => why.push(format!("{} {reason}", c.display())),
                _ => return Ok(()),
            }
        }
        if why.is_empty() {
            return Ok(());
        }
        Err(ApiError::tabs_unavailable(key, &why.join(", ")))
    }

    /// Estimated seconds until a request with `ahead` requests before it gets a tab.
    pub fn eta(&self, model: &ModelId, conversation: Option<&str>, ahead: usize) -> f64 {
        let inner = self.lock();
        self.eta_locked(&inner, model, conversation, ahead)
    }

    /// The estimate: when each tab the request may take is free — now; after its cooldown;
    /// after what is left of the task it works on (its typical task duration, as the decision
    /// engine measured it, minus the time since it accepted the task, or since the API took
    /// it) and its typical duration again for each task queued behind that one — then `ahead`
    /// requests served one by one, each on the tab free first. Tabs that wait for a person
    /// never are. A tab with no measured task counts the measured tabs' mean, else the
    /// engine's estimate from its defaults.
    fn eta_locked(
        &self,
        inner: &Inner,
        model: &ModelId,
        conversation: Option<&str>,
        ahead: usize,
    ) -> f64 {
        let tabs = self.choices(inner, model, conversation);
        let timings: Vec<Timing> = tabs.iter().map(|c| self.timing(c)).collect();
        let known: Vec<f64> = timings
            .iter()
            .filter(|t| t.measured)
            .map(|t| t.task_s)
            .collect();
        let mean = if known.is_empty() {
            timings.first().map_or(0.0, |t| t.task_s)
        } else {
            known.iter().sum::<f64>() / known.len() as f64
        };
        let now = std::time::Instant::now();
        // (free in seconds, typical task seconds) per tab.
        let mut free: Vec<(f64, f64)> = tabs
            .iter()
            .zip(&timings)
            .filter_map(|(c, t)| {
                let typical = if t.measured { t.task_s } else { mean };
                let at = match self.standby(c) {
                    Standby::Person(_) => return None,
                    Standby::Later(d) => d.as_secs_f64(),
                    Standby::Ready => 0.0,
                };
                let leased = inner.leased.get(&c.id);
                let tasks = self.tasks.load(c).max(usize::from(leased.is_some()));
                let working = if tasks == 0 {
                    0.0
                } else {
                    // Since the tab accepted it, or since the API took the tab when that is
                    // later (the engine's clock may still run from a task cancelled before).
                    let lease = leased.map(|since| now.duration_since(*since).as_secs_f64());
                    let elapsed = match (t.running_s, lease) {
                        (Some(r), Some(l)) => r.min(l),
                        (r, l) => r.or(l).unwrap_or(0.0),
                    };
                    left_of(typical, elapsed) + typical * (tasks - 1) as f64
                };
                Some((at.max(working), typical))
            })
            .collect();
        if free.is_empty() {
            return mean;
        }
        soonest(&mut free, ahead)
    }

    /// The tabs a waiter may take: its conversation's tab while that one serves the model and
    /// may take work (a tab waiting for a person or cooling lets the conversation move on),
    /// else every tab serving the model.
    fn choices(
        &self,
        inner: &Inner,
        model: &ModelId,
        conversation: Option<&str>,
    ) -> Vec<Arc<Client>> {
        let tabs = candidates(&self.registry, model);
        // A conversation's first turn only records its tab (see [`conversation_key`]).
        let sticky = conversation
            .filter(|k| !k.starts_with(FIRST_TURN))
            .and_then(|k| inner.conversations.get(k));
        if let Some(id) = sticky {
            if let Some(c) = tabs.iter().find(|c| *c.id == *id) {
                if self.standby(c) == Standby::Ready {
                    return vec![c.clone()];
                }
            }
        }
        tabs
    }

    /// The tab conversation `key` last went to (tests, `/v1/models`).
    pub fn conversation_tab(&self, key: &str) -> Option<String> {
        self.lock().conversations.get(key).map(str::to_string)
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
            let w = &inner.queue[i];
            let free = self
                .choices(inner, &w.model, w.conversation.as_deref())
                .into_iter()
                .filter(|c| !inner.leased.contains_key(&*c.id) && self.tasks.load(c) == 0)
                .filter(|c| self.standby(c) == Standby::Ready)
                .min_by_key(|c| c.tasks_started.load(Ordering::Relaxed));
            let Some(client) = free else {
                i += 1;
                continue;
            };
            let w = inner.queue.remove(i).expect("index in range");
            let id = client.id.to_string();
            inner.leased.insert(id.clone(), std::time::Instant::now());
            match w.tx.send(client) {
                Ok(()) => {
                    if let Some(conv) = &w.conversation {
                        let conv = conv.strip_prefix(FIRST_TURN).unwrap_or(conv);
                        inner.conversations.set(conv, &id);
                    }
                }
                Err(_) => {
                    inner.leased.remove(&id);
                }
            }
        }
        self.waiting.store(inner.queue.len(), Ordering::Relaxed);
    }

    /// Held by an API request, or busy with other work.
    pub fn busy(&self, client: &Client) -> bool {
        self.lock().leased.contains_key(&*client.id) || self.tasks.load(client) > 0
    }

    /// Cannot take a prompt now whatever its load: cooling down, probing, or waiting for a
    /// person.
    pub fn unavailable(&self, client: &Client) -> bool {
        self.standby(client) != Standby::Ready
    }

    /// Tabs serving `model` held by API requests now.
    pub fn busy_count(&self, key: &str) -> usize {
        let tabs = candidates(&self.registry, &ModelId::parse(key));
        let inner = self.lock();
        tabs.iter()
            .filter(|c| inner.leased.contains_key(&*c.id))
            .count()
    }

    /// API requests waiting for `key`.
    pub fn depth(&self, key: &str) -> usize {
        self.lock().queue.iter().filter(|w| w.key == key).count()
    }
}

/// When a request with `ahead` requests before it gets a tab: `free` holds each tab's (free in
/// seconds, average answer seconds); each request ahead takes the tab free first.
fn soonest(free: &mut [(f64, f64)], ahead: usize) -> f64 {
    for _ in 0..ahead {
        if let Some(first) = free.iter_mut().min_by(|a, b| a.0.total_cmp(&b.0)) {
            first.0 += first.1;
        }
    }
    free.iter().map(|f| f.0).fold(f64::INFINITY, f64::min)
}

/// Seconds left of a task `elapsed` seconds in, by the tab's typical task duration: what is
/// left of it, and at least a second (a tab at work is not free now, even past its typical
/// time).
fn left_of(typical: f64, elapsed: f64) -> f64 {
    (typical - elapsed).max(1.0)
}

/// Marks the key of a conversation's first turn: it records the tab that answers, but waits for
/// no tab in particular (two conversations that open with the same words are not queued on
/// one tab).
const FIRST_TURN: &str = "first:";

/// The key that keeps a conversation on one tab: the client's `x-aicard-conversation` when
/// given (every request with it sticks), else a hash of the model and the first user message
/// (a follow-up repeats the whole conversation, so its first user message is the same). A
/// request without an earlier assistant message (`continues` false) opens a conversation: its
/// key records where it went and waits for nothing. None for a `tab/…` model: it names its
/// tab already.
pub fn conversation_key(
    model: &ModelId,
    header: Option<&str>,
    first_user: Option<&str>,
    continues: bool,
) -> Option<String> {
    if matches!(
        model,
        ModelId::Tab(_) | ModelId::Flow(_) | ModelId::Agent(_)
    ) {
        return None;
    }
    if let Some(h) = header.map(str::trim).filter(|h| !h.is_empty()) {
        let h: String = h.chars().take(200).collect();
        return Some(format!("{}#h:{h}", model.key()));
    }
    let first = first_user?;
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(first.as_bytes());
    let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
    let key = format!("{}#m:{hex}", model.key());
    Some(if continues {
        key
    } else {
        format!("{FIRST_TURN}{key}")
    })
}

/// 429: the wait stated and `Retry-After` are one figure, whole seconds up, at least 1.
fn busy(code: &'static str, key: &str, eta: f64) -> ApiError {
    let secs = if eta.is_finite() {
        (eta.ceil() as u64).max(1)
    } else {
        1
    };
    ApiError::new(
        axum::http::StatusCode::TOO_MANY_REQUESTS,
        "rate_limit_error",
        code,
        format!(
            "`{key}` 的标签页都在忙，预计等待 {secs} 秒 / every tab serving `{key}` is busy; \
             estimated wait {secs} s exceeds X-AIcard-Queue-Timeout"
        ),
    )
    .retry_after(secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_counts_what_is_left_of_each_answer_and_the_requests_ahead() {
        // Two tabs 5 s into tasks that typically take 12 s: 7 s left.
        let left = left_of(12.0, 5.0);
        assert!((left - 7.0).abs() < 1e-9, "{left}");
        assert!((soonest(&mut [(left, 12.0), (left, 12.0)], 0) - 7.0).abs() < 1e-9);
        // Two requests ahead take both tabs; this one waits for the first to answer again.
        assert!((soonest(&mut [(2.0, 12.0), (5.0, 12.0)], 2) - 14.0).abs() < 1e-9);
        // A tab cooling down 40 s and a free one: no wait.
        assert_eq!(soonest(&mut [(40.0, 10.0), (0.0, 10.0)], 0), 0.0);
        // A task past its typical duration: a second, not nothing...
        assert_eq!(left_of(12.0, 30.0), 1.0);
        // ...and the wait stated is at least a second, the same in the text and the header.
        for (eta, secs) in [(0.0, 1), (0.2, 1), (6.3, 7), (f64::INFINITY, 1)] {
            let e = busy("tabs_busy", "site/sim", eta);
            assert_eq!(e.retry_after, Some(secs), "{eta}");
            assert!(
                e.message.contains(&format!("estimated wait {secs} s")),
                "{eta}"
            );
        }
    }

    #[test]
    fn conversations_are_kept_by_tab_and_the_least_recently_used_is_forgotten() {
        let mut c = Conversations::default();
        for i in 0..MAX_CONVERSATIONS {
            c.set(&format!("k{i}"), "tab-a");
        }
        c.set("k0", "tab-b"); // used again: now the most recent.
        c.set("new", "tab-c");
        assert_eq!(c.tab.len(), MAX_CONVERSATIONS);
        assert_eq!(c.get("k0"), Some("tab-b"));
        assert_eq!(c.get("k1"), None, "the least recently used went");
        assert_eq!(c.get("new"), Some("tab-c"));
        assert_eq!(c.by_use.len(), c.tab.len());
    }

    #[test]
    fn a_conversation_is_named_by_its_header_or_its_first_user_message() {
        let site = ModelId::Site("sim".into());
        let by_msg = conversation_key(&site, None, Some("讲个故事"), true).unwrap();
        assert_eq!(
            conversation_key(&site, None, Some("讲个故事"), true),
            Some(by_msg.clone())
        );
        // Its first turn records under the same key, and waits for no tab.
        assert_eq!(
            conversation_key(&site, None, Some("讲个故事"), false),
            Some(format!("{FIRST_TURN}{by_msg}"))
        );
        assert_ne!(
            conversation_key(&site, None, Some("另一个"), true),
            Some(by_msg)
        );
        assert_eq!(
            conversation_key(&site, Some(" c1 "), Some("x"), false).as_deref(),
            Some("site/sim#h:c1")
        );
        assert_eq!(
            conversation_key(&ModelId::Tab("w".into()), Some("c1"), Some("x"), true),
            None
        );
    }
}
