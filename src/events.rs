//! The event bus (docs/cluster.md): events that start work.
//!
//! - An [`Event`] is a topic, a JSON payload and its cause: the ids of the standing rules
//!   whose commands led to it (`cause`), so a rule never fires on an event its own command
//!   caused, and the depth (how many rules deep it is); rules stop at [`MAX_DEPTH`].
//! - [`Bus`] is a bounded broadcast: publishing never waits; a listener that falls more than
//!   [`BUS_CAPACITY`] events behind loses the oldest and counts them.
//! - [`follow_journal`] publishes every run's lifecycle events (`flow_start` … `node_error`,
//!   the names of [`crate::webhooks::LIFECYCLE_EVENTS`]) and each node's result as
//!   `node_result {run, flow, node, output}`, as the journal records them.
//! - [`Rules`] keeps the standing rules of `?<subscribe TOPIC [where COND] do CMD>!` in
//!   SQLite (table `event_rules`), so they survive a restart. Running them is the command
//!   host's work (`crate::rules`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rusqlite::params;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::store::Store;

/// How many rules deep an event may be and still fire rules: an event published by the
/// command of a rule fired by an event published by … stops here.
pub const MAX_DEPTH: u32 = 3;

/// Events a listener may fall behind before it loses the oldest.
pub const BUS_CAPACITY: usize = 1024;

/// Longest topic name.
pub const MAX_TOPIC: usize = 100;

/// One event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// A unique id (uuid).
    pub id: String,
    /// `node_result`, `flow_complete`, or a name a `publish` chose.
    pub topic: String,
    /// The payload (an object).
    pub data: serde_json::Value,
    /// Why it happened.
    #[serde(default)]
    pub cause: Cause,
    /// The hub that published it (its node id in a cluster; empty for one hub).
    #[serde(default)]
    pub origin: String,
}

/// The rules whose commands caused an event, outermost first; empty for an event no rule
/// caused. Its length is the event's depth.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cause {
    pub rules: Vec<i64>,
}

impl Cause {
    pub fn depth(&self) -> u32 {
        self.rules.len() as u32
    }

    /// The cause of what rule `rule` does on behalf of an event with this cause.
    pub fn then(&self, rule: i64) -> Cause {
        let mut rules = self.rules.clone();
        rules.push(rule);
        Cause { rules }
    }

    /// Whether rule `rule` may fire on an event with this cause: not one its own command
    /// caused (the loop guard), and not deeper than [`MAX_DEPTH`].
    pub fn may_fire(&self, rule: i64) -> bool {
        self.depth() < MAX_DEPTH && !self.rules.contains(&rule)
    }
}

impl Event {
    pub fn new(topic: &str, data: serde_json::Value, cause: Cause) -> Event {
        Event {
            id: uuid::Uuid::new_v4().to_string(),
            topic: topic.to_string(),
            data,
            cause,
            origin: String::new(),
        }
    }

    /// The event as `$EVENT` shows it: `{"topic": …, …the payload's fields}`.
    pub fn as_json(&self) -> String {
        let mut v = match &self.data {
            serde_json::Value::Object(m) => m.clone(),
            other => {
                let mut m = serde_json::Map::new();
                m.insert("data".into(), other.clone());
                m
            }
        };
        v.insert("topic".into(), self.topic.clone().into());
        serde_json::Value::Object(v).to_string()
    }

    /// The variables a rule's command sees: `$EVENT` (the JSON of [`Event::as_json`]),
    /// `$EVENT_TOPIC`, `$EVENT_TEXT`, and `$EVENT_KEY` for each text, number or boolean field
    /// of the payload (`$EVENT_RUN`, `$EVENT_NODE`, `$EVENT_OUTPUT`, …).
    pub fn vars(&self) -> std::collections::BTreeMap<String, String> {
        let mut vars = std::collections::BTreeMap::new();
        if let serde_json::Value::Object(m) = &self.data {
            for (k, v) in m {
                if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    continue;
                }
                let text = match v {
                    serde_json::Value::String(s) => s.clone(),
                    serde_json::Value::Number(n) => n.to_string(),
                    serde_json::Value::Bool(b) => b.to_string(),
                    _ => continue,
                };
                vars.insert(format!("EVENT_{}", k.to_ascii_uppercase()), text);
            }
        }
        vars.insert("EVENT".into(), self.as_json());
        vars.insert("EVENT_TOPIC".into(), self.topic.clone());
        vars.insert("EVENT_TEXT".into(), self.text());
        vars
    }

    /// The payload's main text, `$EVENT_TEXT`: its `text`, `output` or `error`, else "".
    pub fn text(&self) -> String {
        ["text", "output", "error"]
            .iter()
            .find_map(|k| self.data.get(*k).and_then(|v| v.as_str()))
            .unwrap_or("")
            .to_string()
    }
}

/// Whether a topic name is well formed: letters (any script), digits, `_`, `.`, `-`, `:`, `/`;
/// `*` alone subscribes to every topic.
pub fn valid_topic(topic: &str) -> bool {
    !topic.is_empty()
        && topic.chars().count() <= MAX_TOPIC
        && (topic == "*"
            || topic
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | '-' | ':' | '/')))
}

/// Whether a rule on `pattern` hears an event on `topic`.
pub fn matches(pattern: &str, topic: &str) -> bool {
    pattern == "*" || pattern == topic
}

/// Somewhere else events go too (the cluster's engine, `aicard.events`).
pub trait BusOutbound: Send + Sync {
    fn send(&self, event: &Event);
}

/// The hub's event bus.
pub struct Bus {
    tx: broadcast::Sender<Arc<Event>>,
    /// This hub's node id, stamped on what it publishes.
    origin: String,
    /// Where else this hub's events go (the cluster's engine), given at construction.
    outbound: Option<Arc<dyn BusOutbound>>,
    pub stats: BusStats,
    /// Run id → the rules whose commands started it: the run's own events carry that cause,
    /// so `subscribe flow_complete do manager run X` does not restart X for ever.
    runs: std::sync::Mutex<HashMap<String, Cause>>,
}

/// Runs started by rules whose cause is remembered at once (a run that never ends keeps
/// its entry; past this, new ones are not remembered and the depth limit still holds).
const MAX_RUN_CAUSES: usize = 10_000;

/// Counters for `/metrics` and tests.
#[derive(Debug, Default)]
pub struct BusStats {
    pub published: AtomicU64,
    /// Rule commands run, and how many of them failed.
    pub fired: AtomicU64,
    pub failed: AtomicU64,
    /// Events listeners lost because they fell too far behind.
    pub lagged: AtomicU64,
    /// Woken after each rule's outcome is counted.
    changed: tokio::sync::Notify,
}

impl BusStats {
    /// Counts one rule that ran.
    pub fn count_fired(&self, failed: bool) {
        self.fired.fetch_add(1, Ordering::Relaxed);
        if failed {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
        self.changed.notify_waiters();
    }

    /// Counts a rule that could not run.
    pub fn count_failed(&self) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        self.changed.notify_waiters();
    }

    /// Waits until `done` holds (checked after every rule's outcome).
    pub async fn wait_until(&self, done: impl Fn(&BusStats) -> bool) {
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
}

impl Bus {
    /// A bus stamping `origin` on its events; `outbound` also gets every event this hub
    /// publishes (in a cluster: the engine), none for one hub.
    pub fn new(origin: &str, outbound: Option<Arc<dyn BusOutbound>>) -> Bus {
        Bus {
            tx: broadcast::channel(BUS_CAPACITY).0,
            origin: origin.to_string(),
            outbound,
            stats: BusStats::default(),
            runs: std::sync::Mutex::new(HashMap::new()),
        }
    }

    /// Remembers that rules (`cause`) started run `run`: its lifecycle events and node results
    /// carry that cause. No-op for a run no rule started.
    pub fn note_run(&self, run: &str, cause: &Cause) {
        if cause.rules.is_empty() {
            return;
        }
        let mut runs = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        if runs.len() < MAX_RUN_CAUSES {
            runs.insert(run.to_string(), cause.clone());
        }
    }

    /// The cause of run `run`'s events (empty unless a rule started it).
    pub fn cause_of_run(&self, run: &str) -> Cause {
        let runs = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        runs.get(run).cloned().unwrap_or_default()
    }

    fn forget_run(&self, run: &str) {
        self.runs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(run);
    }

    /// This hub's name on events it publishes (its node id; empty for one hub).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Publishes an event of this hub to its listeners (and the cluster). Never waits.
    pub fn publish(&self, mut event: Event) {
        if event.origin.is_empty() {
            event.origin = self.origin.clone();
        }
        if let Some(out) = &self.outbound {
            out.send(&event);
        }
        self.deliver(event);
    }

    /// Hands an event to this hub's listeners only (one that came from another node).
    pub fn deliver(&self, event: Event) {
        self.stats.published.fetch_add(1, Ordering::Relaxed);
        let _ = self.tx.send(Arc::new(event));
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.tx.subscribe()
    }

    /// The next event of `rx`, counting any it lost; None once the bus is gone.
    pub async fn next(&self, rx: &mut broadcast::Receiver<Arc<Event>>) -> Option<Arc<Event>> {
        loop {
            match rx.recv().await {
                Ok(ev) => return Some(ev),
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    self.stats.lagged.fetch_add(n, Ordering::Relaxed);
                    tracing::warn!(lost = n, "event listener fell behind: events lost");
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }
}

/// Longest output carried in a `node_result` (the journal keeps it whole).
const MAX_RESULT_TEXT: usize = 64_000;

/// Publishes every run's lifecycle events and node results as the journal records them,
/// from the journal's end at start-up, until `shutdown`.
pub async fn follow_journal(store: Store, bus: Arc<Bus>, shutdown: CancellationToken) {
    let mut tick = store.journal_watch();
    let mut last = store.journal_last_id();
    let mut flows: HashMap<String, String> = HashMap::new();
    loop {
        tick.borrow_and_update();
        let rows = store.journal_after(last, 500);
        for row in &rows {
            let cause = bus.cause_of_run(&row.run_id);
            for (topic, data) in journal_events(&store, &mut flows, &row.run_id, &row.event) {
                let ended = matches!(topic, "flow_complete" | "flow_stop");
                bus.publish(Event::new(topic, data, cause.clone()));
                if ended {
                    bus.forget_run(&row.run_id);
                }
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

/// The events one journal line publishes: its lifecycle event (with the flow's name), and a
/// `node_result` for a completed node.
fn journal_events(
    store: &Store,
    flows: &mut HashMap<String, String>,
    run: &str,
    line: &str,
) -> Vec<(&'static str, serde_json::Value)> {
    let Some((name, mut data)) = crate::webhooks::lifecycle(run, line) else {
        return Vec::new();
    };
    let flow = match flows.get(run) {
        Some(f) => f.clone(),
        None => {
            let f = store
                .run(run)
                .ok()
                .flatten()
                .map(|r| r.flow)
                .or_else(|| data["flow"].as_str().map(str::to_string))
                .unwrap_or_default();
            flows.insert(run.to_string(), f.clone());
            f
        }
    };
    data["flow"] = flow.clone().into();
    let mut out = vec![(name, data.clone())];
    if name == "node_complete" {
        let full: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
        let output = full["output"].as_str().unwrap_or("");
        let output = match output.char_indices().nth(MAX_RESULT_TEXT) {
            Some((i, _)) => format!("{}…", &output[..i]),
            None => output.to_string(),
        };
        out.push((
            "node_result",
            serde_json::json!({"run": run, "flow": flow, "node": data["node"], "output": output}),
        ));
    }
    if matches!(name, "flow_complete" | "flow_stop") {
        flows.remove(run);
    }
    out
}

/// One standing rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rule {
    pub id: i64,
    /// A topic, or `*`.
    pub topic: String,
    /// The `where` condition as written (`if` syntax), if any.
    pub cond: Option<String>,
    /// The command as written.
    pub command: String,
    /// The tab that made it (client id).
    pub author: String,
    /// Its role when it made the rule (`master`, `foreman`, `worker`).
    pub role: String,
    pub group: Option<String>,
    /// Typed by the person (true) or written in a reply.
    pub person: bool,
    pub created_ms: i64,
}

/// The standing rules, kept in the store; read through a cache the writes refresh.
pub struct Rules {
    store: Store,
    cache: Mutex<Option<Arc<Vec<Rule>>>>,
}

/// Most standing rules one hub keeps.
pub const MAX_RULES: usize = 1000;

impl Rules {
    pub fn new(store: Store) -> Rules {
        Rules {
            store,
            cache: Mutex::new(None),
        }
    }

    /// Stores a rule; returns its id.
    pub fn add(&self, mut rule: Rule) -> Result<Rule, String> {
        if self.all().len() >= MAX_RULES {
            return Err(format!(
                "规则过多 / too many rules: at most {MAX_RULES}; remove some with ?<unsubscribe ID>!"
            ));
        }
        let id = self
            .store
            .with_conn(|c| {
                c.execute(
                    "INSERT INTO event_rules (topic, cond, command, author, role, grp, person,
                       created_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                    params![
                        rule.topic,
                        rule.cond,
                        rule.command,
                        rule.author,
                        rule.role,
                        rule.group,
                        rule.person,
                        rule.created_ms
                    ],
                )?;
                Ok::<_, rusqlite::Error>(c.last_insert_rowid())
            })
            .map_err(|e| format!("规则未保存 / the rule was not stored: {e}"))?;
        self.forget();
        rule.id = id;
        Ok(rule)
    }

    /// Removes a rule; false when there is none with that id.
    pub fn remove(&self, id: i64) -> Result<bool, String> {
        let n = self
            .store
            .with_conn(|c| c.execute("DELETE FROM event_rules WHERE id = ?1", params![id]))
            .map_err(|e| format!("规则未删除 / the rule was not removed: {e}"))?;
        self.forget();
        Ok(n > 0)
    }

    pub fn get(&self, id: i64) -> Option<Rule> {
        self.all().iter().find(|r| r.id == id).cloned()
    }

    /// Every rule, oldest first.
    pub fn all(&self) -> Arc<Vec<Rule>> {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = cache.as_ref() {
            return c.clone();
        }
        let rules = Arc::new(self.load().unwrap_or_else(|e| {
            tracing::warn!("event rules not read: {e}");
            Vec::new()
        }));
        *cache = Some(rules.clone());
        rules
    }

    /// The rules that hear `topic`.
    pub fn for_topic(&self, topic: &str) -> Vec<Rule> {
        self.all()
            .iter()
            .filter(|r| matches(&r.topic, topic))
            .cloned()
            .collect()
    }

    fn forget(&self) {
        *self.cache.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    fn load(&self) -> Result<Vec<Rule>, String> {
        self.store
            .read(|c| {
                let mut st = c.prepare(
                    "SELECT id, topic, cond, command, author, role, grp, person, created_ms
                 FROM event_rules ORDER BY id",
                )?;
                let rows = st.query_map([], |r| {
                    Ok(Rule {
                        id: r.get(0)?,
                        topic: r.get(1)?,
                        cond: r.get(2)?,
                        command: r.get(3)?,
                        author: r.get(4)?,
                        role: r.get(5)?,
                        group: r.get(6)?,
                        person: r.get(7)?,
                        created_ms: r.get(8)?,
                    })
                })?;
                rows.collect()
            })
            .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loop_guard_and_the_depth_limit() {
        let root = Cause::default();
        assert!(root.may_fire(1));
        let once = root.then(1);
        assert!(!once.may_fire(1), "a rule never fires on what it caused");
        assert!(once.may_fire(2));
        let deep = once.then(2).then(3);
        assert_eq!(deep.depth(), MAX_DEPTH);
        assert!(!deep.may_fire(4), "three rules deep is the limit");
    }

    #[test]
    fn topics_and_patterns() {
        assert!(valid_topic("node_result"));
        assert!(valid_topic("审阅.done"));
        assert!(valid_topic("*"));
        assert!(!valid_topic("a b"));
        assert!(!valid_topic(""));
        assert!(!valid_topic("a*"));
        assert!(matches("*", "flow_start"));
        assert!(matches("x", "x"));
        assert!(!matches("x", "y"));
    }

    #[test]
    fn event_json_carries_the_topic_and_the_payload() {
        let ev = Event::new(
            "node_result",
            serde_json::json!({"run": "r1", "node": "a", "output": "hi"}),
            Cause::default(),
        );
        let v: serde_json::Value = serde_json::from_str(&ev.as_json()).unwrap();
        assert_eq!(v["topic"], "node_result");
        assert_eq!(v["node"], "a");
        assert_eq!(ev.text(), "hi");
        let vars = ev.vars();
        assert_eq!(vars["EVENT_NODE"], "a");
        assert_eq!(vars["EVENT_TOPIC"], "node_result");
        assert_eq!(vars["EVENT_TEXT"], "hi");
        assert_eq!(vars["EVENT"], ev.as_json());
    }

    #[test]
    fn rules_are_stored_listed_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let rules = Rules::new(store.clone());
        let r = rules
            .add(Rule {
                id: 0,
                topic: "t".into(),
                cond: Some("$EVENT contains x".into()),
                command: "to sim-b: $EVENT".into(),
                author: "c1".into(),
                role: "master".into(),
                group: None,
                person: true,
                created_ms: 1,
            })
            .unwrap();
        assert!(r.id > 0);
        assert_eq!(rules.for_topic("t").len(), 1);
        assert!(rules.for_topic("u").is_empty());
        // Another handle on the same file (a restart) reads it back.
        let again = Rules::new(Store::open(dir.path()).unwrap());
        assert_eq!(again.get(r.id), Some(r.clone()));
        assert!(rules.remove(r.id).unwrap());
        assert!(!rules.remove(r.id).unwrap());
        assert!(rules.all().is_empty());
    }

    #[tokio::test]
    async fn a_listener_gets_what_is_published() {
        let bus = Bus::new("n1", None);
        let mut rx = bus.subscribe();
        bus.publish(Event::new("t", serde_json::json!({}), Cause::default()));
        let ev = bus.next(&mut rx).await.unwrap();
        assert_eq!(ev.topic, "t");
        assert_eq!(ev.origin, "n1");
    }
}
