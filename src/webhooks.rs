//! Signed callbacks (docs/cluster.md): `aicard serve --webhook URL[#EVENT,EVENT…]` POSTs the hub's
//! lifecycle events as JSON to a receiver the person runs.
//!
//! - Each body is signed: `X-AIcard-Signature: sha256=HEX`, the HMAC-SHA256 of the raw body,
//!   keyed with `--webhook-secret` or a secret the hub makes once and keeps in its data dir
//!   (`webhook-secret`, mode 0600). Never the hub token: a receiver must not hold the key to
//!   the hub.
//! - Publishing never waits: each receiver has its own bounded backlog and its own delivery
//!   task, so a slow or dead receiver never blocks or slows a run. A full backlog drops the
//!   new event and counts it.
//! - A failed delivery (connection error, timeout, 408, 429 or 5xx) is retried with
//!   exponential backoff and jitter; another 4xx is the receiver's final word. Every body has a
//!   `delivery` id (also in `X-AIcard-Delivery`), the same on every try, so a receiver can
//!   drop a repeat.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use rand::Rng;
use sha2::Sha256;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The lifecycle events a webhook may ask for (docs/cluster.md).
pub const LIFECYCLE_EVENTS: &[&str] = &[
    "flow_start",
    "flow_pause",
    "flow_resume",
    "flow_stop",
    "flow_complete",
    "node_start",
    "node_complete",
    "node_error",
    "data_published",
];

const SECRET_FILE: &str = "webhook-secret";

/// One `--webhook URL[#EVENT,EVENT…]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookSpec {
    pub url: String,
    /// None: every lifecycle event.
    pub events: Option<BTreeSet<String>>,
}

/// Why a `--webhook` value was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SpecError {
    #[error("webhook 地址须以 http:// 或 https:// 开头 / the webhook URL must start with http:// or https://: `{0}`")]
    Scheme(String),
    #[error("未知的事件 `{event}`；可用 / unknown event `{event}`; known: {known}")]
    UnknownEvent { event: String, known: String },
}

impl FromStr for WebhookSpec {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<Self, SpecError> {
        let (url, filter) = match s.split_once('#') {
            Some((u, f)) => (u.trim(), Some(f)),
            None => (s.trim(), None),
        };
        let rest = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"));
        if rest.is_none_or(|r| r.is_empty()) {
            return Err(SpecError::Scheme(url.to_string()));
        }
        let events = match filter {
            None => None,
            Some(f) => {
                let mut set = BTreeSet::new();
                for e in f.split(',').map(str::trim).filter(|e| !e.is_empty()) {
                    if !LIFECYCLE_EVENTS.contains(&e) {
                        return Err(SpecError::UnknownEvent {
                            event: e.to_string(),
                            known: LIFECYCLE_EVENTS.join(", "),
                        });
                    }
                    set.insert(e.to_string());
                }
                (!set.is_empty()).then_some(set)
            }
        };
        Ok(WebhookSpec {
            url: url.to_string(),
            events,
        })
    }
}

impl WebhookSpec {
    fn wants(&self, event: &str) -> bool {
        self.events.as_ref().is_none_or(|set| set.contains(event))
    }
}

/// How deliveries are paced; the defaults suit a receiver on this machine or the LAN.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// Events waiting per receiver; more are dropped and counted.
    pub backlog: usize,
    /// Tries per event, the first included.
    pub max_attempts: u32,
    /// Backoff after the first failure; doubled each time up to `max_backoff`.
    pub first_backoff: Duration,
    pub max_backoff: Duration,
    /// One try's time limit (connect + answer).
    pub timeout: Duration,
}

impl Default for Delivery {
    fn default() -> Self {
        Delivery {
            backlog: 1024,
            max_attempts: 8,
            first_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(60),
            timeout: Duration::from_secs(10),
        }
    }
}

/// What the delivery tasks did, for `/metrics`.
#[derive(Debug, Default)]
pub struct Stats {
    /// Events waiting in the backlogs now.
    pub backlog: AtomicU64,
    pub delivered: AtomicU64,
    /// Tries that failed and were tried again.
    pub retried: AtomicU64,
    /// Events given up on after their last try, or refused by the receiver.
    pub failed: AtomicU64,
    /// Events dropped because a receiver's backlog was full.
    pub dropped: AtomicU64,
    /// Woken after each try's outcome is counted.
    changed: tokio::sync::Notify,
}

impl Stats {
    /// Waits until `done` holds for the counters (checked after every outcome).
    pub async fn wait_until(&self, done: impl Fn(&Stats) -> bool) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if done(self) {
                return;
            }
            changed.await;
        }
    }

    fn count(&self, counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
        self.changed.notify_waiters();
    }
}

/// One receiver: where to send and the queue of its delivery task.
struct Endpoint {
    spec: WebhookSpec,
    tx: mpsc::Sender<Arc<SignedEvent>>,
}

/// An event as it is sent: its bytes are signed once and sent as they are on every try.
struct SignedEvent {
    name: String,
    delivery: String,
    body: String,
    signature: String,
}

/// The running webhooks of one hub.
pub struct Webhooks {
    targets: Vec<Endpoint>,
    secret: Vec<u8>,
    stats: Arc<Stats>,
}

impl Webhooks {
    /// Starts one delivery task per receiver on `tracker`; they end with `shutdown`.
    pub fn start(
        specs: Vec<WebhookSpec>,
        secret: &str,
        delivery: Delivery,
        shutdown: CancellationToken,
        tracker: &TaskTracker,
    ) -> Webhooks {
        let stats = Arc::new(Stats::default());
        let client = crate::http_client::builder()
            .timeout(delivery.timeout)
            .user_agent(concat!("aicard/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        let targets = specs
            .into_iter()
            .map(|spec| {
                let (tx, rx) = mpsc::channel(delivery.backlog.max(1));
                crate::spawn::tracked(
                    tracker,
                    deliver_loop(
                        spec.url.clone(),
                        rx,
                        client.clone(),
                        delivery.clone(),
                        stats.clone(),
                        shutdown.clone(),
                    ),
                );
                Endpoint { spec, tx }
            })
            .collect();
        Webhooks {
            targets,
            secret: secret.as_bytes().to_vec(),
            stats,
        }
    }

    /// True when no receiver is configured (publishing is then free).
    pub fn is_empty(&self) -> bool {
        self.targets.is_empty()
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Queues `event` with `data` for every receiver that wants it. Never waits.
    pub fn publish(&self, event: &str, data: serde_json::Value) {
        let wanted: Vec<&Endpoint> = self
            .targets
            .iter()
            .filter(|t| t.spec.wants(event))
            .collect();
        if wanted.is_empty() {
            return;
        }
        let delivery = uuid::Uuid::new_v4().to_string();
        let body = serde_json::json!({
            "delivery": delivery,
            "event": event,
            "time_ms": crate::store::now_ms(),
            "data": data,
        })
        .to_string();
        let signature = sign(&self.secret, body.as_bytes());
        let ev = Arc::new(SignedEvent {
            name: event.to_string(),
            delivery,
            body,
            signature,
        });
        for t in wanted {
            match t.tx.try_send(ev.clone()) {
                Ok(()) => {
                    self.stats.backlog.fetch_add(1, Ordering::Relaxed);
                }
                Err(_) => {
                    self.stats.dropped.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(url = %t.spec.url, event, "webhook backlog full: event dropped");
                }
            }
        }
    }
}

/// Longest text (a node's output, an error) carried in one event; the journal keeps it whole.
const MAX_EVENT_TEXT: usize = 4_000;

/// Publishes every run's lifecycle events as the journal records them, from the journal's end
/// at start-up, until `shutdown`. The journal is written before anything happens, so an
/// event is never announced for a step that is not recorded.
pub async fn follow_journal(
    store: crate::store::Store,
    hooks: Arc<Webhooks>,
    shutdown: CancellationToken,
) {
    if hooks.is_empty() {
        return;
    }
    let mut tick = store.journal_watch();
    let mut last = store.journal_last_id();
    loop {
        // Seen before reading: a write after this read wakes `changed` below.
        tick.borrow_and_update();
        let rows = store.journal_after(last, 500);
        for row in &rows {
            if let Some((name, data)) = lifecycle(&row.run_id, &row.event) {
                hooks.publish(name, data);
            }
        }
        if let Some(r) = rows.last() {
            last = r.id;
            continue;
        }
        tokio::select! {
            changed = tick.changed() => if changed.is_err() { return },
            _ = shutdown.cancelled() => return,
        }
    }
}

/// A journal event (its JSON) as a lifecycle event: its name and data, or None for the steps
/// that are not one (attempts, prompts, items).
pub fn lifecycle(run: &str, event: &str) -> Option<(&'static str, serde_json::Value)> {
    use serde_json::json;
    let ev: serde_json::Value = serde_json::from_str(event).ok()?;
    let text = |k: &str| {
        let s = ev[k].as_str().unwrap_or("");
        match s.char_indices().nth(MAX_EVENT_TEXT) {
            Some((i, _)) => format!("{}…", &s[..i]),
            None => s.to_string(),
        }
    };
    Some(match ev["type"].as_str()? {
        "run_started" => (
            "flow_start",
            json!({"run": run, "flow": ev["flow"], "inputs": ev["inputs"]}),
        ),
        "node_queued" => (
            "node_start",
            json!({"run": run, "node": ev["node"], "items": ev["items"].as_array().map_or(0, Vec::len)}),
        ),
        "node_completed" => (
            "node_complete",
            json!({"run": run, "node": ev["node"], "output": text("output")}),
        ),
        "node_failed" => (
            "node_error",
            json!({"run": run, "node": ev["node"], "error": text("error")}),
        ),
        "run_paused" => ("flow_pause", json!({"run": run})),
        "run_resumed" => ("flow_resume", json!({"run": run})),
        "run_stopped" => ("flow_stop", json!({"run": run, "reason": ev["reason"]})),
        "run_completed" => (
            "flow_complete",
            json!({"run": run, "state": "completed", "output": text("output")}),
        ),
        "run_failed" => (
            "flow_complete",
            json!({"run": run, "state": "failed", "error": text("error")}),
        ),
        _ => return None,
    })
}

/// `sha256=HEX`: the HMAC-SHA256 of `body` keyed with `secret`.
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    let mut mac =
        <Hmac<Sha256> as KeyInit>::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(body);
    let tag = mac.finalize().into_bytes();
    let hex: String = tag.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// The webhook secret: `given` if set, else the one kept in `data_dir` (made on first use).
pub fn secret(given: Option<&str>, data_dir: &Path) -> std::io::Result<String> {
    match given.filter(|s| !s.is_empty()) {
        Some(s) => Ok(s.to_string()),
        None => crate::store::load_or_create_secret(&secret_path(data_dir)),
    }
}

pub fn secret_path(data_dir: &Path) -> PathBuf {
    data_dir.join(SECRET_FILE)
}

/// Sends one receiver's events in order, each until it lands or its tries run out.
async fn deliver_loop(
    url: String,
    mut rx: mpsc::Receiver<Arc<SignedEvent>>,
    client: reqwest::Client,
    delivery: Delivery,
    stats: Arc<Stats>,
    shutdown: CancellationToken,
) {
    loop {
        let ev = tokio::select! {
            _ = shutdown.cancelled() => return,
            ev = rx.recv() => match ev { Some(ev) => ev, None => return },
        };
        stats.backlog.fetch_sub(1, Ordering::Relaxed);
        let mut attempt = 1;
        loop {
            match try_once(&client, &url, &ev).await {
                PostOutcome::Delivered => {
                    stats.count(&stats.delivered);
                    break;
                }
                PostOutcome::Refused(status) => {
                    stats.count(&stats.failed);
                    tracing::warn!(%url, event = %ev.name, status, "webhook refused the event");
                    break;
                }
                PostOutcome::Retry(why) if attempt < delivery.max_attempts => {
                    stats.count(&stats.retried);
                    let wait = backoff(&delivery, attempt, rand::rng().random_range(0.5..1.0));
                    tracing::debug!(%url, event = %ev.name, attempt, ?wait, %why, "webhook retry");
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = tokio::time::sleep(wait) => {}
                    }
                    attempt += 1;
                }
                PostOutcome::Retry(why) => {
                    stats.count(&stats.failed);
                    tracing::warn!(%url, event = %ev.name, attempt, %why, "webhook gave up");
                    break;
                }
            }
        }
    }
}

enum PostOutcome {
    Delivered,
    Refused(u16),
    Retry(String),
}

async fn try_once(client: &reqwest::Client, url: &str, ev: &SignedEvent) -> PostOutcome {
    let sent = client
        .post(url)
        .header("content-type", "application/json")
        .header("x-aicard-event", &ev.name)
        .header("x-aicard-delivery", &ev.delivery)
        .header("x-aicard-signature", &ev.signature)
        .body(ev.body.clone())
        .send()
        .await;
    match sent {
        Ok(r) if r.status().is_success() => PostOutcome::Delivered,
        Ok(r) => {
            let s = r.status().as_u16();
            if s == 408 || s == 429 || s >= 500 {
                PostOutcome::Retry(format!("HTTP {s}"))
            } else {
                PostOutcome::Refused(s)
            }
        }
        Err(e) => PostOutcome::Retry(e.to_string()),
    }
}

/// The wait after the `attempt`-th failure: doubling from `first_backoff`, capped, scaled by
/// `jitter` (0.5–1.0) so receivers that come back are not hit by every hub at once.
fn backoff(d: &Delivery, attempt: u32, jitter: f64) -> Duration {
    let doubled = d
        .first_backoff
        .saturating_mul(1u32 << attempt.saturating_sub(1).min(20));
    doubled.min(d.max_backoff).mul_f64(jitter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_sha256_matches_rfc_4231() {
        // RFC 4231, test case 2.
        assert_eq!(
            sign(b"Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn specs_parse_with_and_without_a_filter() {
        let all: WebhookSpec = "http://127.0.0.1:9000/hook".parse().unwrap();
        assert_eq!(all.events, None);
        assert!(all.wants("node_error"));
        let some: WebhookSpec = "https://example.test/h#flow_complete, node_error"
            .parse()
            .unwrap();
        assert!(some.wants("flow_complete") && some.wants("node_error"));
        assert!(!some.wants("node_start"));
        assert_eq!(
            "ftp://x".parse::<WebhookSpec>(),
            Err(SpecError::Scheme("ftp://x".into()))
        );
        assert!(matches!(
            "http://x/#flow_done".parse::<WebhookSpec>(),
            Err(SpecError::UnknownEvent { event, .. }) if event == "flow_done"
        ));
        assert!("http://".parse::<WebhookSpec>().is_err());
    }

    #[test]
    fn journal_events_map_to_lifecycle_events() {
        let cases = [
            (
                r#"{"type":"run_started","run_id":"r","flow":"f","flow_hash":"h","inputs":{"a":"1"},"seed":1,"at_ms":1}"#,
                Some("flow_start"),
            ),
            (
                r#"{"type":"node_queued","node":"a","items":["x","y"],"at_ms":1}"#,
                Some("node_start"),
            ),
            (
                r#"{"type":"attempt_started","node":"a","item":0,"attempt":1,"idempotency_key":"k","at_ms":1}"#,
                None,
            ),
            (
                r#"{"type":"node_completed","node":"a","output":"done"}"#,
                Some("node_complete"),
            ),
            (
                r#"{"type":"node_failed","node":"a","error":"boom"}"#,
                Some("node_error"),
            ),
            (r#"{"type":"run_paused","at_ms":1}"#, Some("flow_pause")),
            (r#"{"type":"run_resumed","at_ms":1}"#, Some("flow_resume")),
            (
                r#"{"type":"run_stopped","reason":"person"}"#,
                Some("flow_stop"),
            ),
            (
                r#"{"type":"run_completed","output":"all"}"#,
                Some("flow_complete"),
            ),
            (
                r#"{"type":"run_failed","error":"x"}"#,
                Some("flow_complete"),
            ),
            ("not json", None),
        ];
        for (event, want) in cases {
            let got = lifecycle("r1", event);
            assert_eq!(got.as_ref().map(|(n, _)| *n), want, "{event}");
            if let Some((name, data)) = got {
                assert!(LIFECYCLE_EVENTS.contains(&name));
                assert_eq!(data["run"], "r1");
            }
        }
        let (_, items) = lifecycle(
            "r",
            r#"{"type":"node_queued","node":"a","items":["x","y"],"at_ms":1}"#,
        )
        .unwrap();
        assert_eq!(items["items"], 2);
        let long = format!(
            r#"{{"type":"node_completed","node":"a","output":"{}"}}"#,
            "x".repeat(10_000)
        );
        let (_, cut) = lifecycle("r", &long).unwrap();
        assert_eq!(
            cut["output"].as_str().unwrap().chars().count(),
            MAX_EVENT_TEXT + 1
        );
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let d = Delivery::default();
        assert_eq!(backoff(&d, 1, 1.0), Duration::from_millis(500));
        assert_eq!(backoff(&d, 2, 1.0), Duration::from_secs(1));
        assert_eq!(backoff(&d, 4, 1.0), Duration::from_secs(4));
        assert_eq!(backoff(&d, 30, 1.0), Duration::from_secs(60));
        assert_eq!(backoff(&d, 2, 0.5), Duration::from_millis(500));
    }

    #[tokio::test]
    async fn publishing_to_a_dead_receiver_never_waits_and_the_backlog_is_bounded() {
        // A port nothing listens on: every try fails at once, and retries wait long.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let shutdown = CancellationToken::new();
        let tracker = TaskTracker::new();
        let hooks = Webhooks::start(
            vec![format!("http://127.0.0.1:{port}/").parse().unwrap()],
            "s",
            Delivery {
                backlog: 8,
                first_backoff: Duration::from_secs(3600),
                ..Delivery::default()
            },
            shutdown.clone(),
            &tracker,
        );
        let started = std::time::Instant::now();
        for i in 0..10_000 {
            hooks.publish("node_start", serde_json::json!({ "i": i }));
        }
        let took = started.elapsed();
        assert!(took < Duration::from_secs(2), "publish waited: {took:?}");
        let s = hooks.stats();
        let kept = s.backlog.load(Ordering::Relaxed);
        assert!(kept <= 8, "backlog {kept}");
        assert!(s.dropped.load(Ordering::Relaxed) >= 10_000 - 9);
        shutdown.cancel();
        tracker.close();
        tracker.wait().await;
    }
}
