//! The work behind the MCP tools, independent of rmcp: a prompt to one tab (`ask`), to
//! several (`fan_out`), or a flow (`run_flow`) becomes a *run* with an id that outlives the
//! tool call. A call waits at most `wait_s`, then answers `running` with the id; `get_run`
//! waits on the same run again. Idempotency keys map to runs for ten minutes, so a request a
//! client re-sends (a broken stream must be re-issued, MCP says) types no second prompt.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use serde::Serialize;
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::McpDoor;
use crate::api::models::{candidates, ModelId};
use crate::hub::registry::Client;
use crate::hub::HubEvent;

/// How long an idempotency key names its run.
pub const IDEMPOTENCY_TTL: Duration = Duration::from_secs(600);
/// How long a prompt may wait for a free tab (the run, not the tool call, waits).
const QUEUE_TIMEOUT: Duration = Duration::from_secs(600);
/// Finished runs are forgotten after this long.
const KEEP_FINISHED: Duration = Duration::from_secs(3600);
/// Runs remembered at most (running ones are never dropped).
const MAX_RUNS: usize = 4096;
/// Targets of one fan-out at most.
pub const MAX_TARGETS: usize = 64;

/// The state of a run, as `structuredContent.status` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Running,
    Completed,
    Failed,
    Cancelled,
}

/// One tab's answer, named by tab id, site and label.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TabAnswer {
    pub tab: String,
    pub site: String,
    pub label: String,
    pub text: String,
}

impl TabAnswer {
    fn from_client(c: &Client, text: String) -> TabAnswer {
        let info = c.info();
        TabAnswer {
            tab: c.id.clone(),
            site: info.site.clone(),
            label: info.label.clone().unwrap_or_else(|| c.display_of(&info)),
            text,
        }
    }
}

/// What a run has so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunView {
    pub run_id: String,
    pub status: Status,
    pub answers: Vec<TabAnswer>,
    /// The answers joined (a fan-out's labelled by tab), or a flow's output.
    pub text: String,
    /// Why targets failed, one line each.
    pub errors: Vec<String>,
    /// Targets asked.
    pub total: usize,
}

impl RunView {
    fn new(run_id: &str, total: usize) -> RunView {
        RunView {
            run_id: run_id.to_string(),
            status: Status::Running,
            answers: Vec::new(),
            text: String::new(),
            errors: Vec::new(),
            total,
        }
    }

    /// `structuredContent`.
    pub fn structured(&self) -> Value {
        let mut v = json!({
            "status": self.status,
            "run_id": self.run_id,
            "answers": self.answers,
            "text": self.text,
        });
        if !self.errors.is_empty() {
            v["errors"] = json!(self.errors);
        }
        if self.status == Status::Running {
            v["hint"] = json!("call get_run with this run_id to wait for the rest");
        }
        v
    }

    fn join(&mut self) {
        self.text = if self.total <= 1 {
            self.answers
                .first()
                .map(|a| a.text.clone())
                .unwrap_or_default()
        } else {
            self.answers
                .iter()
                .map(|a| format!("[{}] {}", a.label, a.text))
                .collect::<Vec<_>>()
                .join("\n\n")
        };
    }
}

struct Entry {
    view: watch::Receiver<RunView>,
    cancel: CancellationToken,
    finished_at: Option<Instant>,
}

/// Every MCP run of a hub.
#[derive(Default)]
pub struct Runs {
    runs: Mutex<HashMap<String, Entry>>,
    /// `tool:key` → (run id, when).
    keys: Mutex<HashMap<String, (String, Instant)>>,
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Run(#[from] crate::runner::RunError),
}

/// A target as MCP clients write it: `deepseek`, `site/deepseek`, `tab/LABEL`, a bare label
/// or client id, or `auto`.
pub fn resolve_target(door: &McpDoor, target: &str) -> Result<ModelId, StartError> {
    let model = ModelId::parse(target);
    if let ModelId::Flow(_) = model {
        return Err(StartError::Invalid(
            "`flow/NAME` is not a tab: use run_flow".into(),
        ));
    }
    if !candidates(&door.registry, &model).is_empty() {
        return Ok(model);
    }
    let tab = ModelId::Tab(target.trim().to_string());
    if !candidates(&door.registry, &tab).is_empty() {
        return Ok(tab);
    }
    Err(StartError::Invalid(format!(
        "没有标签页 / no connected tab serves `{target}`; list_tabs shows what is online"
    )))
}

impl Runs {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The run a key already names, if it is younger than ten minutes.
    fn keyed(
        &self,
        key: Option<&str>,
        start: impl FnOnce() -> Result<String, StartError>,
    ) -> Result<String, StartError> {
        let Some(key) = key else { return start() };
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        keys.retain(|_, (_, at)| at.elapsed() < IDEMPOTENCY_TTL);
        if let Some((id, _)) = keys.get(key) {
            return Ok(id.clone());
        }
        let id = start()?;
        keys.insert(key.to_string(), (id.clone(), Instant::now()));
        Ok(id)
    }

    fn insert(&self, id: &str, view: watch::Receiver<RunView>, cancel: CancellationToken) {
        let mut runs = self.lock();
        if runs.len() >= MAX_RUNS {
            runs.retain(|_, e| e.finished_at.is_none_or(|t| t.elapsed() < KEEP_FINISHED));
        }
        if runs.len() >= MAX_RUNS {
            let oldest = runs
                .iter()
                .filter_map(|(k, e)| e.finished_at.map(|t| (t, k.clone())))
                .min();
            if let Some((_, k)) = oldest {
                runs.remove(&k);
            }
        }
        runs.insert(
            id.to_string(),
            Entry {
                view,
                cancel,
                finished_at: None,
            },
        );
    }

    fn mark_finished(&self, id: &str) {
        if let Some(e) = self.lock().get_mut(id) {
            e.finished_at = Some(Instant::now());
        }
    }

    /// Starts prompts to `targets` (one run; a fan-out when more than one). With a key seen
    /// in the last ten minutes, returns that run instead and sends nothing.
    pub fn start_ask(
        self: &Arc<Self>,
        door: &Arc<McpDoor>,
        tool: &str,
        targets: &[String],
        prompt: &str,
        files: Vec<crate::hub::files::FileRef>,
        key: Option<&str>,
    ) -> Result<String, StartError> {
        if targets.is_empty() {
            return Err(StartError::Invalid("`targets` is empty".into()));
        }
        if targets.len() > MAX_TARGETS {
            return Err(StartError::Invalid(format!(
                "at most {MAX_TARGETS} targets"
            )));
        }
        if prompt.trim().is_empty() {
            return Err(StartError::Invalid("`prompt` is empty".into()));
        }
        let key = key.map(|k| format!("{tool}:{k}"));
        self.keyed(key.as_deref(), || {
            let models = targets
                .iter()
                .map(|t| resolve_target(door, t))
                .collect::<Result<Vec<_>, _>>()?;
            let id = format!(
                "{tool}-{}",
                &uuid::Uuid::new_v4().simple().to_string()[..12]
            );
            let (tx, rx) = watch::channel(RunView::new(&id, models.len()));
            let cancel = CancellationToken::new();
            self.insert(&id, rx, cancel.clone());
            let runs = self.clone();
            let hub2 = door.clone();
            let prompt = prompt.to_string();
            let run_id = id.clone();
            crate::spawn::tracked(&door.tracker, async move {
                ask_driver(&hub2, models, prompt, files, tx, cancel).await;
                runs.mark_finished(&run_id);
            });
            Ok(id)
        })
    }

    /// Starts flow `name` with `inputs`; the run id is the runner's.
    pub fn start_flow(
        self: &Arc<Self>,
        door: &Arc<McpDoor>,
        name: &str,
        inputs: BTreeMap<String, String>,
        key: Option<&str>,
    ) -> Result<String, StartError> {
        let key = key.map(|k| format!("run_flow:{k}"));
        self.keyed(key.as_deref(), || {
            let events = door.events.subscribe();
            let id = door.runner.start(name, None, inputs, None)?;
            let (tx, rx) = watch::channel(RunView::new(&id, 1));
            let cancel = CancellationToken::new();
            self.insert(&id, rx, cancel.clone());
            let runs = self.clone();
            let hub2 = door.clone();
            let run_id = id.clone();
            crate::spawn::tracked(&door.tracker, async move {
                flow_driver(&hub2, &run_id, events, tx, cancel).await;
                runs.mark_finished(&run_id);
            });
            Ok(id)
        })
    }

    /// `agent_task`: a session of `agent` on its tab with `task` (docs/agents.md); the run's text
    /// is the agent's final answer. Cancelling the run stops the session.
    pub fn start_agent(
        self: &Arc<Self>,
        door: &Arc<McpDoor>,
        agent: crate::agents::store::AgentRecord,
        task: &str,
        files: Vec<crate::hub::files::FileRef>,
        key: Option<&str>,
    ) -> Result<String, StartError> {
        let key = key.map(|k| format!("agent_task:{k}"));
        self.keyed(key.as_deref(), || {
            let id = format!("agent-{}", uuid::Uuid::new_v4().simple());
            let (tx, rx) = watch::channel(RunView::new(&id, 1));
            let cancel = CancellationToken::new();
            self.insert(&id, rx, cancel.clone());
            let runs = self.clone();
            let loops = door.loops.clone();
            let run_id = id.clone();
            let task = task.to_string();
            crate::spawn::tracked(&door.tracker, async move {
                let name = agent.spec.name.clone();
                let mut view = RunView::new(&run_id, 1);
                tokio::select! {
                    r = loops.task_with_files(agent, &task, files) => match r {
                        Ok(answer) => {
                            view.status = Status::Completed;
                            view.text = answer;
                        }
                        Err(e) => {
                            view.status = Status::Failed;
                            view.errors.push(e.to_string());
                        }
                    },
                    _ = cancel.cancelled() => {
                        let _ = loops.control(
                            &crate::agent_loop::Who::Agent(&name),
                            crate::agent_loop::LoopControl::CallerLeft,
                        );
                        view.status = Status::Cancelled;
                    }
                }
                tx.send_replace(view);
                runs.mark_finished(&run_id);
            });
            Ok(id)
        })
    }

    /// The live view of an MCP run (`aicard://runs/ID`), None when this hub holds none.
    pub fn watch(&self, run_id: &str) -> Option<watch::Receiver<RunView>> {
        self.lock().get(run_id).map(|e| e.view.clone())
    }

    /// The runs held in memory, running ones first, then by id.
    pub fn ids(&self) -> Vec<(String, Status)> {
        let mut v: Vec<(String, Status)> = self
            .lock()
            .iter()
            .map(|(id, e)| (id.clone(), e.view.borrow().status))
            .collect();
        v.sort_by(|a, b| (a.1 != Status::Running, &a.0).cmp(&(b.1 != Status::Running, &b.0)));
        v
    }

    /// Cancels a run; false when no such run is known.
    pub fn cancel(&self, run_id: &str) -> bool {
        match self.lock().get(run_id) {
            Some(e) => {
                e.cancel.cancel();
                true
            }
            None => false,
        }
    }

    /// Waits until the run ends or `wait` passes; `progress` is called when answers arrive
    /// and every `tick` while it runs. `None`: no such run.
    pub async fn wait(
        &self,
        door: &McpDoor,
        run_id: &str,
        wait: Duration,
        tick: Duration,
        mut progress: impl FnMut(&RunView, Duration),
    ) -> Option<RunView> {
        let rx = self.lock().get(run_id).map(|e| e.view.clone());
        let Some(mut rx) = rx else {
            return stored_flow(door, run_id);
        };
        let started = Instant::now();
        let deadline = started + wait;
        let mut ticker = tokio::time::interval_at(started + tick, tick);
        loop {
            let view = rx.borrow_and_update().clone();
            if view.status != Status::Running {
                return Some(view);
            }
            tokio::select! {
                changed = rx.changed() => {
                    if changed.is_err() {
                        return Some(rx.borrow().clone());
                    }
                    let v = rx.borrow().clone();
                    if v.status == Status::Running {
                        progress(&v, started.elapsed());
                    }
                }
                _ = ticker.tick() => progress(&view, started.elapsed()),
                _ = tokio::time::sleep_until(deadline) => return Some(view),
            }
        }
    }
}

/// A finished flow run this hub did not start through MCP (or from before a restart).
pub(crate) fn stored_flow(door: &McpDoor, run_id: &str) -> Option<RunView> {
    let rec = door.store.run(run_id).ok().flatten()?;
    let mut v = RunView::new(run_id, 1);
    match crate::api::run_outcome(door, run_id) {
        None => {}
        Some(Ok(out)) => {
            v.status = Status::Completed;
            v.text = out;
        }
        Some(Err(e)) => {
            v.status = if rec.state == "stopped" {
                Status::Cancelled
            } else {
                Status::Failed
            };
            v.errors.push(e);
        }
    }
    Some(v)
}

async fn ask_driver(
    door: &Arc<McpDoor>,
    models: Vec<ModelId>,
    prompt: String,
    files: Vec<crate::hub::files::FileRef>,
    tx: watch::Sender<RunView>,
    cancel: CancellationToken,
) {
    let mut pending: FuturesUnordered<_> = models
        .iter()
        .map(|m| {
            let door = door.clone();
            let prompt = prompt.clone();
            let files = files.clone();
            let m = m.clone();
            async move {
                let r = crate::api::ask_tab(&door.api, &m, prompt, files, QUEUE_TIMEOUT).await;
                (m, r)
            }
        })
        .collect();
    loop {
        tokio::select! {
            next = pending.next() => {
                let Some((model, r)) = next else { break };
                tx.send_modify(|v| {
                    match r {
                        Ok((client, text)) => v.answers.push(TabAnswer::from_client(&client, text)),
                        Err((client, e)) => {
                            let who = client.map(|c| c.display()).unwrap_or_else(|| model.key());
                            v.errors.push(format!("{who}: {}", e.message));
                        }
                    }
                    v.join();
                });
            }
            _ = cancel.cancelled() => {
                // Dropping the futures cancels each prompt still in a tab.
                drop(pending);
                tx.send_modify(|v| v.status = Status::Cancelled);
                return;
            }
            _ = door.shutdown.cancelled() => {
                drop(pending);
                tx.send_modify(|v| {
                    v.status = Status::Failed;
                    v.errors.push("集线器正在关闭 / the hub is shutting down".into());
                });
                return;
            }
        }
    }
    tx.send_modify(|v| {
        v.status = if v.errors.is_empty() {
            Status::Completed
        } else {
            Status::Failed
        };
    });
}

async fn flow_driver(
    door: &Arc<McpDoor>,
    run_id: &str,
    mut events: tokio::sync::broadcast::Receiver<HubEvent>,
    tx: watch::Sender<RunView>,
    cancel: CancellationToken,
) {
    let mut stopping = false;
    loop {
        if let Some(v) = stored_flow(door, run_id).filter(|v| v.status != Status::Running) {
            tx.send_replace(v);
            return;
        }
        tokio::select! {
            ev = events.recv() => match ev {
                Ok(HubEvent::RunFinished { run_id: id, .. }) if id == run_id => {}
                Ok(_) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(_) => return,
            },
            _ = cancel.cancelled(), if !stopping => {
                stopping = true;
                let why = "MCP 客户端取消 / cancelled by the MCP client".to_string();
                let _ = door.runner.control(run_id, crate::runner::RunControl::Stop(why));
            }
            _ = door.shutdown.cancelled() => return,
        }
    }
}
