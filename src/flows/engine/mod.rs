//! The sans-IO run engine: [`RunState`] is a pure fold over [`JournalEvent`]s, and
//! [`RunState::next_actions`] says what the hub's runner should do next ([`Effect`]s).
//!
//! The runner's loop: call `next_actions(now)`; for each action in order, persist
//! [`Effect::Record`] events to the journal, perform the side effects (dispatch a prompt, run a
//! command, deliver to the master, cancel), and feed every outside result back as an event
//! with [`RunState::apply`] (after persisting it). Call `next_actions` again after each event
//! and at [`Effect::Wait`] times. After a crash, [`RunState::replay`] rebuilds the state from the
//! journal: completed nodes are never dispatched again, and attempts that were in flight are
//! re-issued with the same idempotency key.

pub mod aggregate;
pub mod events;
mod fold;
mod items;
pub mod plan;
pub mod retry;
mod schedule;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use minijinja::Value;
use serde::{Deserialize, Serialize};

pub use events::{
    idempotency_key, CommandCall, Dispatch, Effect, JournalEvent, PromptTarget, Timeouts,
};
pub use plan::Plan;

use crate::flows::model::Flow;

/// Why a run cannot start or resume.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EngineError {
    /// A required input has no value.
    #[error("缺少输入 / missing required input `{0}`")]
    MissingInput(String),
    /// The run sets an input the flow does not declare.
    #[error("未知输入 / unknown input `{name}` (the flow's inputs: {known})")]
    UnknownInput {
        /// The input given.
        name: String,
        /// The declared inputs.
        known: String,
    },
    /// `--from-node` names no node.
    #[error("未知节点 / --from-node names unknown node `{0}`")]
    UnknownNode(String),
    /// The flow file changed since the run started.
    #[error("流程已更改 / the flow changed since the run started (hash {recorded}, now {current}); not resuming it silently")]
    FlowChanged {
        /// Hash in the journal.
        recorded: String,
        /// Hash of the flow now.
        current: String,
    },
    /// The journal is empty or does not start with `RunStarted`.
    #[error("运行日志无效 / the run journal does not start with run_started")]
    BadJournal,
    /// A template or expression does not compile.
    #[error("模板错误 / `{field}` of node `{node}`: {message}")]
    Template {
        /// Node id.
        node: String,
        /// Field.
        field: String,
        /// minijinja's message.
        message: String,
    },
    /// The flow is not valid (run `aicard flow validate`).
    #[error("流程无效 / invalid flow: {0}")]
    Invalid(String),
}

/// The state of a node, as shown to people.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeState {
    /// Waiting for its dependencies.
    Pending,
    /// Queued or with attempts in flight.
    Running,
    /// The run is paused and this node has not finished.
    Paused,
    /// Finished with an output.
    Completed,
    /// Failed after its retries.
    Failed,
    /// Not run (`when` false or dependencies did not complete).
    Skipped,
    /// The run stopped or failed before this node finished.
    Cancelled,
}

impl NodeState {
    /// The state's name as written in status output.
    pub fn name(self) -> &'static str {
        match self {
            NodeState::Pending => "pending",
            NodeState::Running => "running",
            NodeState::Paused => "paused",
            NodeState::Completed => "completed",
            NodeState::Failed => "failed",
            NodeState::Skipped => "skipped",
            NodeState::Cancelled => "cancelled",
        }
    }

    /// True for completed, failed, skipped and cancelled.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            NodeState::Completed | NodeState::Failed | NodeState::Skipped | NodeState::Cancelled
        )
    }
}

/// The state of the whole run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Created; `RunStarted` not recorded yet.
    New,
    /// Running.
    Running,
    /// Paused: no new attempts.
    Paused,
    /// Stopped by a person.
    Stopped,
    /// Completed.
    Completed,
    /// Failed.
    Failed,
}

/// Where one item stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ItemStatus {
    /// Not started.
    Idle,
    /// An attempt is out.
    InFlight,
    /// Waiting to retry.
    Backoff {
        /// When the next attempt may start.
        at_ms: u64,
    },
    /// Has its reply.
    Done,
    /// Failed for good.
    Failed {
        /// Why.
        error: String,
    },
    /// Abandoned (run stopped or failed, node deadline).
    Cancelled,
}

/// One unit of work of a node: a target (or a for_each value) and its attempts.
#[derive(Debug, Clone, PartialEq)]
struct ItemRun {
    label: String,
    target: PromptTarget,
    template: String,
    value: Option<String>,
    prompt_override: Option<String>,
    status: ItemStatus,
    attempt: u32,
    /// Transient: the current attempt was handed to the runner in this process.
    dispatched: bool,
    client: Option<String>,
    failed_clients: Vec<String>,
    text: Option<String>,
    reply_label: String,
}

/// A node's run-time record.
#[derive(Debug, Clone, PartialEq)]
struct NodeRun {
    state: NodeState,
    items: Vec<ItemRun>,
    candidates: usize,
    output: Option<String>,
    error: Option<String>,
    queued_at: Option<u64>,
    queue_error: Option<String>,
    /// Transient: items built by `decide`, taken by the `NodeQueued` fold (same result as
    /// building them again, which a replay does).
    prepared: Option<Vec<ItemRun>>,
}

impl NodeRun {
    fn new() -> NodeRun {
        NodeRun {
            state: NodeState::Pending,
            items: Vec::new(),
            candidates: 0,
            output: None,
            error: None,
            queued_at: None,
            queue_error: None,
            prepared: None,
        }
    }
}

/// A serializable view of a run, for `manager status` and for comparing states.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSnapshot {
    /// The run id.
    pub run_id: String,
    /// The flow name.
    pub flow: String,
    /// Run status.
    pub status: RunStatus,
    /// Nodes in file order.
    pub nodes: Vec<NodeSnapshot>,
    /// The final output, once completed.
    pub output: Option<String>,
    /// Why the run failed.
    pub error: Option<String>,
}

/// One node in a [`RunSnapshot`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeSnapshot {
    /// Node id.
    pub id: String,
    /// Display name.
    pub name: Option<String>,
    /// State (pending nodes show as `paused` while the run is paused).
    pub state: NodeState,
    /// Output, once completed.
    pub output: Option<String>,
    /// Error or skip reason.
    pub error: Option<String>,
    /// When the node was queued (ms since the epoch), if it was.
    pub queued_at_ms: Option<u64>,
    /// Items in order.
    pub items: Vec<ItemSnapshot>,
}

/// One item in a [`NodeSnapshot`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItemSnapshot {
    /// Label.
    pub label: String,
    /// Status.
    pub status: ItemStatus,
    /// Current attempt number (0: not started).
    pub attempt: u32,
    /// The tab that took the current attempt.
    pub client: Option<String>,
    /// The reply.
    pub text: Option<String>,
}

/// A stable hash of a flow's content (its canonical JSON form): comments and formatting do not
/// count, any change to a field does.
pub fn flow_hash(flow: &Flow) -> String {
    let json = serde_json::to_string(flow).unwrap_or_default();
    format!("{:016x}", retry::fnv1a(json.as_bytes()))
}

/// The state of one run of a flow: a pure fold over its journal.
#[derive(Debug, Clone)]
pub struct RunState {
    flow: Arc<Flow>,
    plan: Arc<Plan>,
    run_id: String,
    inputs: BTreeMap<String, String>,
    seed: u64,
    from_node: Option<String>,
    prior_outputs: BTreeMap<String, String>,
    status: RunStatus,
    nodes: Vec<NodeRun>,
    pending_deps: Vec<usize>,
    ready: BTreeSet<usize>,
    active: BTreeSet<usize>,
    terminal: usize,
    in_flight: usize,
    master_delivered: bool,
    output: Option<String>,
    error: Option<String>,
    /// Transient: `Effect::Fail` was returned in this process.
    fail_reported: bool,
    /// The first node that failed for good, and why: what the fallback node reads as
    /// `$FAILED_NODE` and `$ERROR`.
    failure: Option<(String, String)>,
    /// The run's error, held back while the fallback node runs.
    failing: Option<String>,
    /// Attempts abandoned by a stop or a run failure, still to be announced as `Cancel`s
    /// (filled by the fold, so a replay announces them again).
    pending_cancels: Vec<(String, usize, String)>,
}

impl RunState {
    /// A new run of `flow` with `inputs` (defaults filled in; unknown or missing required
    /// inputs are refused). Nothing is recorded until the first [`RunState::next_actions`].
    pub fn new(
        flow: Arc<Flow>,
        run_id: impl Into<String>,
        inputs: BTreeMap<String, String>,
    ) -> Result<RunState, EngineError> {
        let plan = Arc::new(Plan::compile(&flow)?);
        Self::with_plan(flow, plan, run_id.into(), inputs)
    }

    /// Like [`RunState::new`] with an already compiled plan of the same flow (cheaper when one
    /// flow runs many times).
    pub fn with_plan(
        flow: Arc<Flow>,
        plan: Arc<Plan>,
        run_id: String,
        inputs: BTreeMap<String, String>,
    ) -> Result<RunState, EngineError> {
        let inputs = resolve_inputs(&flow, inputs)?;
        let n = flow.nodes.len();
        let pending_deps: Vec<usize> = plan.dag.deps.iter().map(Vec::len).collect();
        let ready = (0..n)
            .filter(|&i| pending_deps[i] == 0 && plan.handler != Some(i))
            .collect();
        Ok(RunState {
            seed: retry::fnv1a(run_id.as_bytes()),
            flow,
            plan,
            run_id,
            inputs,
            from_node: None,
            prior_outputs: BTreeMap::new(),
            status: RunStatus::New,
            nodes: vec![NodeRun::new(); n],
            pending_deps,
            ready,
            active: BTreeSet::new(),
            terminal: 0,
            in_flight: 0,
            master_delivered: false,
            output: None,
            error: None,
            fail_reported: false,
            failure: None,
            failing: None,
            pending_cancels: Vec::new(),
        })
    }

    /// Sets the retry-jitter seed (default: derived from the run id).
    pub fn with_seed(mut self, seed: u64) -> RunState {
        self.seed = seed;
        self
    }

    /// `--from-node ID`: every node upstream of `id` counts as completed, with its output from
    /// `prior_outputs` (a previous run's outputs by node id) or empty.
    pub fn from_node(
        mut self,
        id: &str,
        prior_outputs: BTreeMap<String, String>,
    ) -> Result<RunState, EngineError> {
        if !self.plan.index.contains_key(id) {
            return Err(EngineError::UnknownNode(id.to_string()));
        }
        self.from_node = Some(id.to_string());
        self.prior_outputs = prior_outputs;
        Ok(self)
    }

    /// Rebuilds a run from its journal. A run whose flow changed since it started is refused
    /// unless `accept_changed_flow`.
    pub fn replay(
        flow: Arc<Flow>,
        journal: &[JournalEvent],
        accept_changed_flow: bool,
    ) -> Result<RunState, EngineError> {
        let Some(JournalEvent::RunStarted {
            run_id,
            flow_hash: recorded,
            inputs,
            seed,
            from_node,
            prior_outputs,
            ..
        }) = journal.first()
        else {
            return Err(EngineError::BadJournal);
        };
        let current = flow_hash(&flow);
        if *recorded != current && !accept_changed_flow {
            return Err(EngineError::FlowChanged {
                recorded: recorded.clone(),
                current,
            });
        }
        let mut state = RunState::new(flow, run_id.clone(), inputs.clone())?.with_seed(*seed);
        if let Some(id) = from_node {
            state = state.from_node(id, prior_outputs.clone())?;
        }
        for event in journal {
            state.apply(event);
        }
        Ok(state)
    }

    /// The run id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The flow.
    pub fn flow(&self) -> &Arc<Flow> {
        &self.flow
    }

    /// The run status.
    pub fn status(&self) -> RunStatus {
        self.status
    }

    /// True once completed, failed or stopped.
    pub fn is_finished(&self) -> bool {
        matches!(
            self.status,
            RunStatus::Completed | RunStatus::Failed | RunStatus::Stopped
        )
    }

    /// The state of node `id`.
    pub fn node_state(&self, id: &str) -> Option<NodeState> {
        self.plan.index.get(id).map(|&i| self.shown_state(i))
    }

    /// The output of node `id`, once completed.
    pub fn node_output(&self, id: &str) -> Option<&str> {
        self.plan
            .index
            .get(id)
            .and_then(|&i| self.nodes[i].output.as_deref())
    }

    /// Outputs of every completed node (for a later `--from-node` run).
    pub fn outputs(&self) -> BTreeMap<String, String> {
        self.flow
            .nodes
            .iter()
            .zip(&self.nodes)
            .filter_map(|(n, r)| r.output.clone().map(|o| (n.id.clone(), o)))
            .collect()
    }

    /// The final output, once completed.
    pub fn output(&self) -> Option<&str> {
        self.output.as_deref()
    }

    /// Why the run failed.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    fn shown_state(&self, i: usize) -> NodeState {
        let state = self.nodes[i].state;
        if self.status == RunStatus::Paused && !state.is_terminal() {
            NodeState::Paused
        } else {
            state
        }
    }

    /// A serializable view of the run.
    pub fn snapshot(&self) -> RunSnapshot {
        RunSnapshot {
            run_id: self.run_id.clone(),
            flow: self.flow.name.clone(),
            status: self.status,
            nodes: (0..self.nodes.len())
                .map(|i| {
                    let run = &self.nodes[i];
                    NodeSnapshot {
                        id: self.flow.nodes[i].id.clone(),
                        name: self.flow.nodes[i].name.clone(),
                        state: self.shown_state(i),
                        output: run.output.clone(),
                        error: run.error.clone(),
                        queued_at_ms: run.queued_at,
                        items: run
                            .items
                            .iter()
                            .map(|it| ItemSnapshot {
                                label: it.label.clone(),
                                status: it.status.clone(),
                                attempt: it.attempt,
                                client: it.client.clone(),
                                text: it.text.clone(),
                            })
                            .collect(),
                    }
                })
                .collect(),
            output: self.output.clone(),
            error: self.error.clone(),
        }
    }
}

/// Fills defaults and checks names.
fn resolve_inputs(
    flow: &Flow,
    mut given: BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, EngineError> {
    if let Some(name) = given.keys().find(|k| !flow.inputs.contains_key(*k)) {
        return Err(EngineError::UnknownInput {
            name: name.clone(),
            known: flow.inputs.keys().cloned().collect::<Vec<_>>().join(", "),
        });
    }
    for (name, spec) in &flow.inputs {
        if given.contains_key(name) {
            continue;
        }
        match (&spec.default, spec.required) {
            (Some(d), _) => {
                given.insert(name.clone(), d.clone());
            }
            (None, true) => return Err(EngineError::MissingInput(name.clone())),
            (None, false) => {
                given.insert(name.clone(), String::new());
            }
        }
    }
    Ok(given)
}

/// A for_each value as items: a list's elements; a string holding a JSON array (fenced or
/// not); else one item per non-empty line.
pub fn list_items(value: &Value) -> Vec<String> {
    let as_text = |v: &Value| match v.as_str() {
        Some(s) => s.to_string(),
        None => serde_json::to_string(v).unwrap_or_else(|_| v.to_string()),
    };
    if let Some(text) = value.as_str() {
        let json = aggregate::extract_json(text);
        if let Ok(serde_json::Value::Array(items)) = serde_json::from_str(json) {
            return items
                .into_iter()
                .map(|v| match v {
                    serde_json::Value::String(s) => s,
                    other => other.to_string(),
                })
                .collect();
        }
        return text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect();
    }
    match value.try_iter() {
        Ok(iter) => iter.map(|v| as_text(&v)).collect(),
        Err(_) if value.is_undefined() || value.is_none() => Vec::new(),
        Err(_) => vec![as_text(value)],
    }
}
