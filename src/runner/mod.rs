//! Flow runs on the hub: drives the pure engine (`flows::engine::RunState`), performs its
//! actions against real tabs, journals every event in the store before acting on it, and
//! resumes runs that were in progress when the hub stopped.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dashmap::DashMap;
use futures_util::future::BoxFuture;
use serde_json::json;
use tokio::sync::mpsc;

use crate::ask::Asks;
use crate::flows::engine::{
    CommandCall, Dispatch, Effect, JournalEvent, PromptTarget, RunSnapshot, RunState, RunStatus,
};
use crate::flows::Flow;
use crate::hub::registry::Client;
use crate::hub::tasks::{Outcome, TaskError, TaskRequest};
use crate::hub::Hub;
use crate::protocol::ServerFrame;
use crate::store::{now_ms, JournalEntry, RunRecord};

mod pick;
#[cfg(test)]
use pick::pick_least;
use pick::{pick_tab, Pick};

/// The flow name under which every API prompt is journaled as a one-node run
/// (`crate::api::journal`); such runs are never resumed.
pub const API_FLOW: &str = "api";

/// Why a run could not be started or controlled; shown to the person.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("找不到流程 / no flow named `{0}` (looked in the flows directory and saved flows)")]
    NoSuchFlow(String),
    #[error("流程无效 / the flow is not valid:\n{0}")]
    Invalid(String),
    #[error("{0}")]
    Engine(#[from] crate::flows::engine::EngineError),
    #[error("没有正在运行的 `{0}` / no run of `{0}` is in progress")]
    NotRunning(String),
    #[error("运行数已达上限 {0} / too many runs in progress (limit {0})")]
    TooManyRuns(usize),
    #[error("存储错误 / store error: {0}")]
    Store(#[from] crate::store::StoreError),
    #[error("{0}")]
    Other(String),
}

/// A person's instruction to a run in progress.
#[derive(Debug, Clone)]
pub enum RunControl {
    Pause,
    Resume,
    Stop(String),
}

/// What the hub keeps about a run in progress.
struct RunHandle {
    flow: String,
    master: Option<String>,
    ctl: mpsc::UnboundedSender<RunControl>,
    view: Arc<Mutex<LiveRun>>,
}

/// What `status` shows of a run in progress; the driver refreshes it after every event.
struct LiveRun {
    snapshot: RunSnapshot,
    /// Node id → (started ms, finished ms).
    timings: HashMap<String, (u64, Option<u64>)>,
    /// Node id → tabs that took its items.
    tabs: HashMap<String, Vec<String>>,
}

/// All runs of a hub.
pub struct Runner {
    /// Runs in progress; shared with each run's driver, which removes its run when it ends.
    runs: Arc<DashMap<String, RunHandle>>,
    /// Flow name → its latest run id.
    latest: DashMap<String, String>,
    /// What runs ask of the layers above (commands, the foreman cycle), wired by `app`.
    work: Arc<dyn Work>,
    /// The hub the runs act on: its store, registry, task queues and tracker.
    hub: Arc<Hub>,
    /// The ask service, for its decision engine (which tab takes an item, what a failure
    /// tells about a tab).
    asks: Arc<Asks>,
}

/// What a run's driver and its attempts reach: the hub (through `Deref`), the ask service,
/// the runs in progress (the driver ends its run there) and the work of the layers above.
struct RunCtx {
    hub: Arc<Hub>,
    asks: Arc<Asks>,
    runs: Arc<DashMap<String, RunHandle>>,
    work: Arc<dyn Work>,
}

impl std::ops::Deref for RunCtx {
    type Target = Hub;

    fn deref(&self) -> &Hub {
        &self.hub
    }
}

/// What a run needs from the layers above the runner, wired by the composition root: a
/// flow's `command:` node runs as a command with the master's authority, and a task for a
/// foreman tab runs through the foreman cycle.
pub trait Work: Send + Sync {
    fn command<'a>(
        &'a self,
        master: Option<&'a str>,
        call: &'a CommandCall,
    ) -> BoxFuture<'a, Result<String, String>>;

    fn foreman<'a>(
        &'a self,
        foreman: &'a Arc<Client>,
        req: TaskRequest,
    ) -> BoxFuture<'a, Result<String, TaskError>>;
}

/// Default waits when a flow does not set them.
const QUEUE_WAIT: Duration = Duration::from_secs(60);

impl Runner {
    /// Runs one task through `foreman`'s cycle (its split to its workers, their answers back,
    /// its merged answer), as a flow's foreman stage does; commands asking a foreman from a
    /// chat come here too (docs/commands.md, "Who may run what").
    pub async fn foreman_cycle(
        &self,
        foreman: &Arc<Client>,
        req: TaskRequest,
    ) -> Result<String, TaskError> {
        self.work.foreman(foreman, req).await
    }

    pub fn new(hub: Arc<Hub>, asks: Arc<Asks>, work: Arc<dyn Work>) -> Arc<Runner> {
        Arc::new(Runner {
            runs: Arc::new(DashMap::new()),
            latest: DashMap::new(),
            work,
            hub,
            asks,
        })
    }

    /// Loads flow `name`: a flow saved with `manager create` first, else `flows_dir/NAME.yaml`,
    /// else the file in `flows_dir` whose `name:` is NAME.
    pub fn load_flow(hub: &Hub, name: &str) -> Result<(Flow, String), RunError> {
        if !name
            .chars()
            .all(|c| c.is_alphanumeric() || c == '-' || c == '_' || c == '.')
            || name.contains("..")
        {
            return Err(RunError::NoSuchFlow(name.to_string()));
        }
        if let Some(source) = hub.store.flow_source(name)? {
            let flow = crate::flows::load_str(&format!("{name} (saved)"), &source)
                .map_err(|d| RunError::Invalid(join_diags(&d)))?;
            return Ok((flow, source));
        }
        for ext in ["yaml", "yml"] {
            let path = hub.config.flows_dir.join(format!("{name}.{ext}"));
            if let Ok(source) = std::fs::read_to_string(&path) {
                let flow = crate::flows::load_str(&path.display().to_string(), &source)
                    .map_err(|d| RunError::Invalid(join_diags(&d)))?;
                return Ok((flow, source));
            }
        }
        if let Some(path) = crate::flows::find_by_name(&hub.config.flows_dir, name) {
            let source = std::fs::read_to_string(&path)
                .map_err(|_| RunError::NoSuchFlow(name.to_string()))?;
            let flow = crate::flows::load_str(&path.display().to_string(), &source)
                .map_err(|d| RunError::Invalid(join_diags(&d)))?;
            return Ok((flow, source));
        }
        Err(RunError::NoSuchFlow(name.to_string()))
    }

    /// Starts flow `name` for `master` (the tab that asked); returns the run id.
    pub fn start(
        &self,
        name: &str,
        master: Option<String>,
        inputs: BTreeMap<String, String>,
        from_node: Option<String>,
    ) -> Result<String, RunError> {
        self.start_noting(name, master, inputs, from_node, &|_| {})
    }

    /// [`Runner::start`], calling `first(run_id)` before the run's first journal line is
    /// written (the event bus learns which rule started the run before any of its events).
    pub fn start_noting(
        &self,
        name: &str,
        master: Option<String>,
        inputs: BTreeMap<String, String>,
        from_node: Option<String>,
        first: &dyn Fn(&str),
    ) -> Result<String, RunError> {
        let hub = &self.hub;
        if self.runs.len() >= hub.config.limits.max_runs {
            return Err(RunError::TooManyRuns(hub.config.limits.max_runs));
        }
        let (flow, source) = Self::load_flow(hub, name)?;
        self.start_inner(flow, source, master, inputs, from_node, first)
    }

    /// Starts an already validated flow (e.g. an approved plan draft); returns the run id.
    pub fn start_flow(
        &self,
        flow: Flow,
        source: String,
        master: Option<String>,
        inputs: BTreeMap<String, String>,
        from_node: Option<String>,
    ) -> Result<String, RunError> {
        self.start_inner(flow, source, master, inputs, from_node, &|_| {})
    }

    fn start_inner(
        &self,
        flow: Flow,
        source: String,
        master: Option<String>,
        inputs: BTreeMap<String, String>,
        from_node: Option<String>,
        first: &dyn Fn(&str),
    ) -> Result<String, RunError> {
        let hub = &self.hub;
        if self.runs.len() >= hub.config.limits.max_runs {
            return Err(RunError::TooManyRuns(hub.config.limits.max_runs));
        }
        let run_id = format!(
            "{}-{}",
            flow.name,
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        let flow = Arc::new(flow);
        let mut state = RunState::new(flow.clone(), run_id.clone(), inputs)?;
        if let Some(node) = &from_node {
            let prior = self.prior_outputs(&flow.name);
            state = state.from_node(node, prior)?;
        }
        let now = now_ms();
        let started = state
            .begin(now as u64)
            .ok_or_else(|| RunError::Other("the run had already started".into()))?;
        let started_json =
            serde_json::to_string(&started).map_err(|e| RunError::Other(e.to_string()))?;
        first(&run_id);
        hub.store.insert_run(
            &RunRecord {
                run_id: run_id.clone(),
                flow: flow.name.clone(),
                flow_hash: crate::flows::engine::flow_hash(&flow),
                flow_source: source,
                master: master.clone(),
                state: "running".into(),
                started_ms: now,
                updated_ms: now,
            },
            &started_json,
        )?;
        self.spawn(state, master, Some(started));
        Ok(run_id)
    }

    /// Outputs of the latest finished run of a flow (for `--from-node`).
    fn prior_outputs(&self, flow: &str) -> BTreeMap<String, String> {
        let hub = &self.hub;
        let runs = hub
            .store
            .runs_in(&["completed", "failed", "stopped"])
            .unwrap_or_default();
        let Some(last) = runs.into_iter().rev().find(|r| r.flow == flow) else {
            return BTreeMap::new();
        };
        let mut out = BTreeMap::new();
        for ev in hub.store.events(&last.run_id).unwrap_or_default() {
            if let Ok(JournalEvent::NodeCompleted { node, output }) = serde_json::from_str(&ev) {
                out.insert(node, output);
            }
        }
        out
    }

    /// Starts a run's driver; `started` is its already journaled `run_started` (a new run),
    /// reported to the master first.
    fn spawn(&self, state: RunState, master: Option<String>, started: Option<JournalEvent>) {
        let (ctl_tx, ctl_rx) = mpsc::unbounded_channel();
        let view = Arc::new(Mutex::new(LiveRun {
            snapshot: state.snapshot(),
            timings: HashMap::new(),
            tabs: HashMap::new(),
        }));
        let handle = RunHandle {
            flow: state.flow().name.clone(),
            master: master.clone(),
            ctl: ctl_tx,
            view: view.clone(),
        };
        let ctx = Arc::new(RunCtx {
            hub: self.hub.clone(),
            asks: self.asks.clone(),
            runs: self.runs.clone(),
            work: self.work.clone(),
        });
        let drive = Drive {
            ctx: ctx.clone(),
            run_id: state.run_id().to_string(),
            flow: state.flow().name.clone(),
            master,
            view,
        };
        self.latest
            .insert(handle.flow.clone(), state.run_id().to_string());
        self.runs.insert(state.run_id().to_string(), handle);
        crate::spawn::tracked(&ctx.tracker, async move {
            if let Some(ev) = started {
                drive.progress(&ev);
            }
            drive.run(state, ctl_rx).await
        });
    }

    /// Continues every run the store says was running or paused (after a restart).
    pub fn resume_all(&self) {
        let hub = &*self.hub;
        let runs = match hub.store.runs_in(&["running", "paused"]) {
            Ok(r) => r,
            Err(e) => {
                tracing::error!("cannot list runs to resume: {e}");
                return;
            }
        };
        for rec in runs {
            if rec.flow == API_FLOW {
                // An API prompt: its client went with the old process; nobody waits for it.
                tracing::info!(run = %rec.run_id, "API prompt interrupted by the restart");
                let _ = hub
                    .store
                    .set_run_state(&rec.run_id, "interrupted", now_ms());
                continue;
            }
            match Self::rebuild(hub, &rec) {
                Ok(state) => {
                    tracing::info!(run = %rec.run_id, "resuming run after restart");
                    self.spawn(state, rec.master.clone(), None);
                }
                Err(e) => {
                    tracing::error!(run = %rec.run_id, "cannot resume: {e}");
                    let _ = hub
                        .store
                        .set_run_state(&rec.run_id, "interrupted", now_ms());
                }
            }
        }
    }

    /// Rebuilds a run's state from its journal and the flow source it started with.
    fn rebuild(hub: &Hub, rec: &RunRecord) -> Result<RunState, RunError> {
        let flow = crate::flows::load_str(&rec.flow, &rec.flow_source)
            .map_err(|d| RunError::Invalid(join_diags(&d)))?;
        if let Ok((current, _)) = Self::load_flow(hub, &rec.flow) {
            if crate::flows::engine::flow_hash(&current) != rec.flow_hash {
                tracing::warn!(
                    run = %rec.run_id,
                    "流程文件已更改 / the flow file changed since this run started; the run \
                     continues with the version it started with"
                );
            }
        }
        let mut events = Vec::new();
        for text in hub.store.events(&rec.run_id)? {
            let ev: JournalEvent = serde_json::from_str(&text)
                .map_err(|e| RunError::Other(format!("journal of {}: {e}", rec.run_id)))?;
            events.push(ev);
        }
        Ok(RunState::replay(Arc::new(flow), &events, false)?)
    }

    /// Finds the run a person means: a run id, or a flow name (its latest run).
    fn find(&self, name_or_id: &str) -> Option<String> {
        if self.runs.contains_key(name_or_id) {
            return Some(name_or_id.to_string());
        }
        self.latest
            .get(name_or_id)
            .map(|r| r.value().clone())
            .filter(|id| self.runs.contains_key(id))
    }

    /// Pause, resume or stop a run in progress.
    pub fn control(&self, name_or_id: &str, c: RunControl) -> Result<String, RunError> {
        let id = self
            .find(name_or_id)
            .ok_or_else(|| RunError::NotRunning(name_or_id.to_string()))?;
        let run = self
            .runs
            .get(&id)
            .ok_or_else(|| RunError::NotRunning(name_or_id.to_string()))?;
        let word = match &c {
            RunControl::Pause => "暂停 / pausing",
            RunControl::Resume => "继续 / resuming",
            RunControl::Stop(_) => "停止 / stopping",
        };
        run.ctl
            .send(c)
            .map_err(|_| RunError::NotRunning(name_or_id.to_string()))?;
        Ok(format!("{word} {id}"))
    }

    /// The master tab of a run (to check who may control it).
    pub fn master_of(&self, name_or_id: &str) -> Option<String> {
        let id = self.find(name_or_id)?;
        self.runs.get(&id).and_then(|r| r.master.clone())
    }

    /// Per-node state, tabs and durations of a run (in progress, or the latest finished).
    pub fn status(&self, name_or_id: &str) -> Result<String, RunError> {
        let hub = &*self.hub;
        if let Some(id) = self.find(name_or_id) {
            if let Some(run) = self.runs.get(&id) {
                let v = run.view.lock().unwrap_or_else(|p| p.into_inner());
                let mut text = render_status(&v.snapshot, &v.timings, &v.tabs);
                text.push_str(&subtask_tree(hub, &v.snapshot));
                return Ok(text);
            }
        }
        // A finished run: rebuild it from the journal.
        let recs = hub
            .store
            .runs_in(&["completed", "failed", "stopped", "interrupted"])?;
        let rec = recs
            .into_iter()
            .rev()
            .find(|r| r.run_id == name_or_id || r.flow == name_or_id)
            .ok_or_else(|| RunError::NotRunning(name_or_id.to_string()))?;
        let state = Self::rebuild(hub, &rec)?;
        Ok(render_status(
            &state.snapshot(),
            &HashMap::new(),
            &HashMap::new(),
        ))
    }

    /// Runs in progress: (run id, flow, status).
    pub fn list(&self) -> Vec<(String, String, String)> {
        let mut out: Vec<_> = self
            .runs
            .iter()
            .map(|r| {
                let status = r
                    .view
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .snapshot
                    .status;
                (
                    r.key().clone(),
                    r.flow.clone(),
                    format!("{status:?}").to_lowercase(),
                )
            })
            .collect();
        out.sort();
        out
    }
}

fn join_diags(d: &[crate::flows::Diagnostic]) -> String {
    d.iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The foremen's subtasks under each item: master → foreman → workers.
fn subtask_tree(hub: &Hub, snap: &RunSnapshot) -> String {
    let mut out = String::new();
    for n in &snap.nodes {
        for (i, item) in n.items.iter().enumerate() {
            if item.attempt == 0 {
                continue;
            }
            let key = crate::flows::engine::idempotency_key(&snap.run_id, &n.id, i, item.attempt);
            let subs = hub.tasks.children(&key);
            if subs.is_empty() {
                continue;
            }
            let who = item.client.clone().unwrap_or_else(|| item.label.clone());
            out.push_str(&format!("  {} / {} ({who}):\n", n.id, item.label));
            for s in subs {
                out.push_str(&format!("      └─ {:<8} {}\n", s.state, s.tab));
            }
        }
    }
    out
}

fn render_status(
    snap: &RunSnapshot,
    timings: &HashMap<String, (u64, Option<u64>)>,
    tabs: &HashMap<String, Vec<String>>,
) -> String {
    let mut out = format!(
        "运行 / run {} ({}): {:?}\n",
        snap.run_id, snap.flow, snap.status
    );
    let now = now_ms() as u64;
    for n in &snap.nodes {
        let dur = timings
            .get(&n.id)
            .map(|(s, e)| {
                let ms = e.unwrap_or(now).saturating_sub(*s);
                format!(" {:.1}s", ms as f64 / 1000.0)
            })
            .unwrap_or_default();
        let who = tabs
            .get(&n.id)
            .filter(|t| !t.is_empty())
            .map(|t| format!(" [{}]", t.join(", ")))
            .unwrap_or_default();
        out.push_str(&format!("  {:<10} {}{}{}", n.state.name(), n.id, who, dur));
        if let Some(e) = &n.error {
            out.push_str(&format!(" — {e}"));
        }
        out.push('\n');
    }
    if let Some(e) = &snap.error {
        out.push_str(&format!("错误 / error: {e}\n"));
    }
    out
}

/// One run's driver task: the only place that mutates its `RunState`.
struct Drive {
    ctx: Arc<RunCtx>,
    run_id: String,
    flow: String,
    master: Option<String>,
    view: Arc<Mutex<LiveRun>>,
}

impl Drive {
    fn view(&self) -> std::sync::MutexGuard<'_, LiveRun> {
        self.view.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn run(self, mut state: RunState, mut ctl: mpsc::UnboundedReceiver<RunControl>) {
        let (ev_tx, mut ev_rx) = mpsc::unbounded_channel::<JournalEvent>();
        let mut attempts: HashMap<String, tokio::task::AbortHandle> = HashMap::new();
        loop {
            let mut wake: Option<u64> = None;
            let mut actions = state.next_actions(now_ms() as u64).into_iter().peekable();
            while let Some(action) = actions.next() {
                match action {
                    // The engine journals a result before it delivers it: both are written
                    // in one transaction, so a crash never delivers it twice or loses it.
                    Effect::Record(ev)
                        if matches!(actions.peek(), Some(Effect::Deliver { .. })) =>
                    {
                        if let Some(Effect::Deliver { node, text }) = actions.next() {
                            self.record_and_deliver(&ev, node.as_deref(), &text);
                        }
                    }
                    Effect::Record(ev) => self.record(&ev),
                    Effect::Dispatch(d) => {
                        let key = d.idempotency_key.clone();
                        let pools = state
                            .flow()
                            .limits
                            .as_ref()
                            .map(|l| l.pools.clone())
                            .unwrap_or_default();
                        let failed = attempt_failed(&d.node, d.item, d.attempt);
                        let task = spawn_attempt(
                            dispatch(
                                self.ctx.clone(),
                                self.run_id.clone(),
                                self.master.clone(),
                                pools,
                                d,
                                ev_tx.clone(),
                            ),
                            failed,
                            ev_tx.clone(),
                        );
                        attempts.insert(key, task);
                    }
                    Effect::RunCommand(c) => {
                        let key = c.idempotency_key.clone();
                        let failed = attempt_failed(&c.node, c.item, c.attempt);
                        let task = spawn_attempt(
                            run_command(self.ctx.clone(), self.master.clone(), c, ev_tx.clone()),
                            failed,
                            ev_tx.clone(),
                        );
                        attempts.insert(key, task);
                    }
                    Effect::Deliver { node, text } => self.deliver(node.as_deref(), &text, None),
                    Effect::Cancel {
                        idempotency_key, ..
                    } => {
                        if let Some(t) = attempts.remove(&idempotency_key) {
                            t.abort();
                        }
                        for c in self.ctx.registry.all() {
                            self.ctx.tasks.cancel(&c, &idempotency_key);
                        }
                    }
                    Effect::Wait { until_ms } => {
                        wake = Some(wake.map_or(until_ms, |w| w.min(until_ms)));
                    }
                    Effect::Complete { output } => {
                        self.finish("completed", Some(&output), None);
                    }
                    Effect::Fail { error } => self.finish("failed", None, Some(&error)),
                }
            }
            self.refresh(&state);
            if state.is_finished() {
                if state.status() == RunStatus::Stopped {
                    self.finish("stopped", None, state.error());
                }
                for (_, t) in attempts.drain() {
                    t.abort();
                }
                self.ctx.tasks.forget_tree(&format!("{}/", self.run_id));
                self.ctx.runs.remove(&self.run_id);
                return;
            }
            let sleep = match wake {
                Some(at) => Duration::from_millis(at.saturating_sub(now_ms() as u64)),
                None => Duration::from_secs(3600),
            };
            tokio::select! {
                Some(ev) = ev_rx.recv() => {
                    state.apply(&ev);
                    self.record(&ev);
                }
                Some(c) = ctl.recv() => {
                    let ev = match c {
                        RunControl::Pause => JournalEvent::RunPaused { at_ms: now_ms() as u64 },
                        RunControl::Resume => JournalEvent::RunResumed { at_ms: now_ms() as u64 },
                        RunControl::Stop(reason) => JournalEvent::RunStopped { reason },
                    };
                    state.apply(&ev);
                    self.record(&ev);
                    let st = match state.status() {
                        RunStatus::Paused => "paused",
                        RunStatus::Stopped => "stopped",
                        _ => "running",
                    };
                    let _ = self.ctx.store.set_run_state(&self.run_id, st, now_ms());
                }
                _ = tokio::time::sleep(sleep) => {}
                _ = self.ctx.shutdown.cancelled() => {
                    // The run stays `running` in the store and resumes at the next start.
                    for (_, t) in attempts.drain() { t.abort(); }
                    return;
                }
            }
        }
    }

    /// Journals an event (before anything acts on it) and tells the master.
    fn record(&self, ev: &JournalEvent) {
        let text = match serde_json::to_string(ev) {
            Ok(t) => t,
            Err(e) => {
                tracing::error!("cannot encode journal event: {e}");
                return;
            }
        };
        if let Err(e) = self.ctx.store.append_event(&self.run_id, &text, now_ms()) {
            tracing::error!(run = %self.run_id, "journal write failed: {e}");
        }
        self.progress(ev);
    }

    /// Journals `ev` and delivers `text` to the master in one store transaction.
    fn record_and_deliver(&self, ev: &JournalEvent, node: Option<&str>, text: &str) {
        let json = match serde_json::to_string(ev) {
            Ok(t) => t,
            Err(e) => {
                tracing::error!("cannot encode journal event: {e}");
                return self.deliver(node, text, None);
            }
        };
        let entry = JournalEntry {
            run_id: &self.run_id,
            event: &json,
            at_ms: now_ms(),
        };
        self.deliver(node, text, Some(entry));
        self.progress(ev);
    }

    fn progress(&self, ev: &JournalEvent) {
        let now = now_ms() as u64;
        let (node, state, detail) = match ev {
            JournalEvent::NodeQueued { node, items, .. } => {
                self.view().timings.insert(node.clone(), (now, None));
                (Some(node), "running", json!({"items": items}))
            }
            JournalEvent::PromptSent {
                node, item, client, ..
            } => {
                self.view()
                    .tabs
                    .entry(node.clone())
                    .or_default()
                    .push(client.clone());
                (Some(node), "sent", json!({"item": item, "tab": client}))
            }
            JournalEvent::ItemOutput {
                node,
                item,
                client,
                text,
                ..
            } => (
                Some(node),
                "item_done",
                json!({"item": item, "tab": client, "chars": text.chars().count()}),
            ),
            JournalEvent::ItemFailed {
                node,
                item,
                error,
                attempt,
                ..
            } => (
                Some(node),
                "item_failed",
                json!({"item": item, "error": error, "attempt": attempt}),
            ),
            JournalEvent::NodeCompleted { node, .. } => {
                self.end_timing(node, now);
                (Some(node), "completed", json!({}))
            }
            JournalEvent::NodeFailed { node, error } => {
                self.end_timing(node, now);
                (Some(node), "failed", json!({"error": error}))
            }
            JournalEvent::NodeSkipped { node, reason } => {
                (Some(node), "skipped", json!({"reason": reason}))
            }
            JournalEvent::RunStarted { .. } => (None, "running", json!({})),
            JournalEvent::RunPaused { .. } => (None, "paused", json!({})),
            JournalEvent::RunResumed { .. } => (None, "running", json!({})),
            JournalEvent::RunStopped { reason } => (None, "stopped", json!({"reason": reason})),
            JournalEvent::RunCompleted { .. } => (None, "completed", json!({})),
            JournalEvent::RunFailed { error } => (None, "failed", json!({"error": error})),
            JournalEvent::AttemptStarted { .. } => return,
        };
        let frame = ServerFrame::FlowEvent {
            run_id: self.run_id.clone(),
            flow: self.flow.clone(),
            node_id: node.cloned(),
            state: state.to_string(),
            detail: Some(detail),
        };
        if let Some(m) = &self.master {
            let _ = self.ctx.registry.send(m, &frame);
        }
    }

    fn end_timing(&self, node: &str, now: u64) {
        if let Some(t) = self.view().timings.get_mut(node) {
            t.1 = Some(now);
        }
    }

    fn refresh(&self, state: &RunState) {
        self.view().snapshot = state.snapshot();
    }

    /// Delivers a result to the master, kept until its socket took it; `journal` (the event
    /// that records the result) is written with it.
    fn deliver(&self, node: Option<&str>, text: &str, journal: Option<JournalEntry<'_>>) {
        let journal_alone = |j: Option<JournalEntry<'_>>| {
            if let Some(j) = j {
                if let Err(e) = self.ctx.store.append_event(j.run_id, j.event, j.at_ms) {
                    tracing::error!(run = %self.run_id, "journal write failed: {e}");
                }
            }
        };
        let Some(master) = &self.master else {
            journal_alone(journal);
            tracing::info!(run = %self.run_id, "result (no master tab): {text}");
            return;
        };
        let frame = ServerFrame::Deliver {
            text: text.to_string(),
            auto_send: false,
            run_id: Some(self.run_id.clone()),
            deliver_id: Some(deliver_id(&self.run_id, node)),
            agent: None,
        };
        // Kept in the store until a socket took it: the master may be away, or come back
        // only after a restart.
        if let Err(e) = self.ctx.registry.send_durable(master, &frame, journal) {
            journal_alone(journal);
            tracing::warn!(run = %self.run_id, node = ?node, "cannot deliver: {e}");
        }
    }

    fn finish(&self, st: &str, output: Option<&str>, error: Option<&str>) {
        let _ = self.ctx.store.set_run_state(&self.run_id, st, now_ms());
        let _ = self.ctx.events.send(crate::hub::HubEvent::RunFinished {
            run_id: self.run_id.clone(),
            state: st.to_string(),
        });
        tracing::info!(run = %self.run_id, state = st, error = ?error, output_chars = output.map(|o| o.chars().count()), "run finished");
    }
}

/// The idempotency key of a run's result on the `deliver` frame: `<run_id>/<node_id>`, or
/// `<run_id>/result` for the run-level result of a flow without a master node.
pub fn deliver_id(run_id: &str, node: Option<&str>) -> String {
    format!("{run_id}/{}", node.unwrap_or("result"))
}

/// The event that fails an attempt whose task panicked, given the panic's message.
fn attempt_failed(node: &str, item: usize, attempt: u32) -> impl FnOnce(String) -> JournalEvent {
    let node = node.to_string();
    move |error| JournalEvent::ItemFailed {
        node,
        item,
        attempt,
        error,
        retryable: true,
        at_ms: now_ms() as u64,
    }
}

/// Runs one attempt (a dispatch to a tab, a command node) as its own task. A panic in it
/// fails the attempt through the journal like any other error (so it is retried or fails
/// its step visibly) instead of leaving the step in flight for ever.
fn spawn_attempt(
    attempt: impl std::future::Future<Output = ()> + Send + 'static,
    failed: impl FnOnce(String) -> JournalEvent + Send + 'static,
    events: mpsc::UnboundedSender<JournalEvent>,
) -> tokio::task::AbortHandle {
    use futures_util::FutureExt;
    crate::spawn::task(async move {
        if let Err(panic) = std::panic::AssertUnwindSafe(attempt).catch_unwind().await {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".to_string());
            tracing::error!("a flow attempt panicked: {what}");
            let _ = events.send(failed(format!("内部错误 / internal error: {what}")));
        }
    })
    .abort_handle()
}

async fn dispatch(
    ctx: Arc<RunCtx>,
    run_id: String,
    master: Option<String>,
    pools: BTreeMap<String, u32>,
    d: Dispatch,
    events: mpsc::UnboundedSender<JournalEvent>,
) {
    let failed = |error: String, retryable: bool| JournalEvent::ItemFailed {
        node: d.node.clone(),
        item: d.item,
        attempt: d.attempt,
        error,
        retryable,
        at_ms: now_ms() as u64,
    };
    let pick = Pick {
        run_id: &run_id,
        master: master.as_deref(),
        pools: &pools,
    };
    // `files:` from the files folder (docs/files.md); a refused name fails the item for good.
    let files = match ctx.tasks.files.named_all(&d.files) {
        Ok(files) => files,
        Err(e) => return drop(events.send(failed(e.to_string(), false))),
    };
    let Some(client) = pick_tab(&ctx, &d, &pick).await else {
        let _ = events.send(failed(
            format!(
                "没有可用的标签页 / no connected tab matches `{}`",
                match &d.target {
                    PromptTarget::Role(r) => format!("role:{r}"),
                    PromptTarget::Name(n) => n.clone(),
                }
            ),
            true,
        ));
        return;
    };
    let _ = events.send(JournalEvent::PromptSent {
        node: d.node.clone(),
        item: d.item,
        attempt: d.attempt,
        client: client.display(),
    });
    let attempt = d
        .timeout
        .attempt_ms
        .map(Duration::from_millis)
        .unwrap_or(ctx.config.timing.task_timeout);
    let mut req = TaskRequest::new(d.prompt.clone(), attempt);
    req.files = files;
    req.from_hub = true;
    req.task_id = Some(d.idempotency_key.clone());
    req.run_id = Some(run_id);
    req.node_id = Some(d.node.clone());
    req.retry = d.attempt.saturating_sub(1);
    let idle = d.timeout.idle_ms.map(Duration::from_millis);
    let Outcome {
        result,
        first_chunk_at_ms,
    } = if client.info().role == crate::protocol::Role::Foreman {
        // Two turns of the foreman's: no one first chunk to speak of.
        Outcome {
            result: ctx.work.foreman(&client, req).await,
            first_chunk_at_ms: None,
        }
    } else {
        match idle {
            Some(idle) => ask_with_idle(&ctx, &client, req, idle).await,
            None => ctx.asks.ask_outcome(&client, req).await,
        }
    };
    if let Err(e) = &result {
        crate::pick::on_task_error(&ctx.asks.pick, &client, e);
    }
    let ev = match result {
        Ok(text) => JournalEvent::ItemOutput {
            node: d.node.clone(),
            item: d.item,
            attempt: d.attempt,
            client: client.display(),
            text,
            first_chunk_at_ms: first_chunk_at_ms.map(|t| t as u64),
        },
        Err(e) => failed(e.to_string(), e.retryable()),
    };
    let _ = events.send(ev);
}

/// `ask`, failing when the tab streams nothing for `idle` (a stuck generation).
async fn ask_with_idle(
    ctx: &Arc<RunCtx>,
    client: &Arc<Client>,
    req: TaskRequest,
    idle: Duration,
) -> Outcome {
    let key = req.task_id.clone().unwrap_or_default();
    let ask = ctx.asks.ask_outcome(client, req);
    tokio::pin!(ask);
    let started = now_ms();
    loop {
        tokio::select! {
            r = &mut ask => return r,
            _ = tokio::time::sleep(idle / 4) => {
                let last = client.last_stream_ms().max(started);
                if now_ms() - last > idle.as_millis() as i64 {
                    ctx.tasks.cancel(client, &key);
                    return Outcome {
                        result: Err(TaskError::Timeout(format!("{} (idle)", client.display()))),
                        first_chunk_at_ms: None,
                    };
                }
            }
        }
    }
}

async fn run_command(
    ctx: Arc<RunCtx>,
    master: Option<String>,
    c: CommandCall,
    events: mpsc::UnboundedSender<JournalEvent>,
) {
    let result = ctx.work.command(master.as_deref(), &c).await;
    let ev = match result {
        Ok(text) => JournalEvent::ItemOutput {
            node: c.node.clone(),
            item: c.item,
            attempt: c.attempt,
            client: String::new(),
            text,
            first_chunk_at_ms: None,
        },
        Err(e) => JournalEvent::ItemFailed {
            node: c.node.clone(),
            item: c.item,
            attempt: c.attempt,
            error: e,
            retryable: false,
            at_ms: now_ms() as u64,
        },
    };
    let _ = events.send(ev);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tab_choice_reads_each_load_once_even_when_it_changes() {
        // Live load moves between reads (tabs finish and start tasks): every read returns a
        // new value. Reading twice used to leave no tie and divide by zero.
        let mut reads = 0u64;
        let mut key = |_: &&str| {
            reads += 1;
            (reads as usize, 0, 0)
        };
        for item in 0..5 {
            assert!(pick_least(vec!["a", "b", "c"], &mut key, item).is_some());
        }
        let mut reads = 0;
        let picked = pick_least(
            vec!["a", "b", "c"],
            |_| {
                reads += 1;
                (0, 0, 0)
            },
            4,
        );
        assert_eq!(reads, 3, "one read per candidate");
        assert!(picked.is_some());
        assert_eq!(pick_least(Vec::<&str>::new(), |_| (0, 0, 0), 1), None);
    }

    #[tokio::test]
    async fn a_panicking_attempt_fails_through_the_journal() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        spawn_attempt(
            async { panic!("tab choice blew up") },
            attempt_failed("review", 2, 1),
            tx,
        );
        let ev = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("the attempt ended in time")
            .expect("an event");
        match ev {
            JournalEvent::ItemFailed {
                node,
                item,
                attempt,
                error,
                retryable,
                ..
            } => {
                assert_eq!((node.as_str(), item, attempt), ("review", 2, 1));
                assert!(error.contains("tab choice blew up"), "{error}");
                assert!(retryable);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
