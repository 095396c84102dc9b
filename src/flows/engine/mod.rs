//! The sans-IO run engine: [`RunState`] is a pure fold over [`JournalEvent`]s, and
//! [`RunState::next_actions`] says what the hub's runner should do next ([`Action`]s).
//!
//! The runner's loop: call `next_actions(now)`; for each action in order, persist
//! [`Action::Record`] events to the journal, perform the side effects (dispatch a prompt, run a
//! command, deliver to the master, cancel), and feed every outside result back as an event
//! with [`RunState::apply`] (after persisting it). Call `next_actions` again after each event
//! and at [`Action::Wait`] times. After a crash, [`RunState::replay`] rebuilds the state from the
//! journal: completed nodes are never dispatched again, and attempts that were in flight are
//! re-issued with the same idempotency key.

pub mod aggregate;
pub mod events;
pub mod plan;
pub mod retry;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use minijinja::Value;
use serde::{Deserialize, Serialize};

pub use events::{idempotency_key, Action, CommandCall, Dispatch, JournalEvent, Target, Timeouts};
pub use plan::Plan;

use crate::flows::model::{Aggregate, Flow, ForEachItems, OnFailure, Trigger};
use crate::flows::template::{Field, Ref};
use aggregate::Reply;
use plan::{Fanout, Work};

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
    target: Target,
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
    /// Transient: `Action::Fail` was returned in this process.
    fail_reported: bool,
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
        let ready = (0..n).filter(|&i| pending_deps[i] == 0).collect();
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

    // ----- the fold ---------------------------------------------------------------------

    /// Folds one journal event into the state. Pure and idempotent for terminal facts: events
    /// for unknown nodes, stale attempts or already finished nodes are ignored.
    pub fn apply(&mut self, event: &JournalEvent) {
        match event {
            JournalEvent::RunStarted {
                inputs,
                seed,
                from_node,
                prior_outputs,
                ..
            } => self.on_started(inputs, *seed, from_node.as_deref(), prior_outputs),
            JournalEvent::NodeQueued { node, at_ms, .. } => {
                if let Some(i) = self.pending_node(node) {
                    self.on_queued(i, *at_ms);
                }
            }
            JournalEvent::AttemptStarted {
                node,
                item,
                attempt,
                ..
            } => self.on_attempt(node, *item, *attempt),
            JournalEvent::PromptSent {
                node,
                item,
                attempt,
                client,
            } => {
                if let Some(it) = self.item_mut(node, *item, *attempt) {
                    it.client = Some(client.clone());
                }
            }
            JournalEvent::ItemOutput {
                node,
                item,
                attempt,
                client,
                text,
            } => self.on_output(node, *item, *attempt, client, text),
            JournalEvent::ItemFailed {
                node,
                item,
                attempt,
                error,
                retryable,
                at_ms,
            } => self.on_item_failed(node, *item, *attempt, error, *retryable, *at_ms),
            JournalEvent::NodeSkipped { node, reason } => {
                if let Some(i) = self.open_node(node) {
                    self.nodes[i].error = Some(reason.clone());
                    self.finish_node(i, NodeState::Skipped);
                }
            }
            JournalEvent::NodeCompleted { node, output } => {
                if let Some(i) = self.open_node(node) {
                    self.nodes[i].output = Some(output.clone());
                    if self.plan.nodes[i].work == Work::Master {
                        self.master_delivered = true;
                    }
                    self.finish_node(i, NodeState::Completed);
                }
            }
            JournalEvent::NodeFailed { node, error } => {
                if let Some(i) = self.open_node(node) {
                    self.nodes[i].error = Some(error.clone());
                    self.finish_node(i, NodeState::Failed);
                }
            }
            JournalEvent::RunPaused { .. } => {
                if self.status == RunStatus::Running {
                    self.status = RunStatus::Paused;
                }
            }
            JournalEvent::RunResumed { .. } => {
                if self.status == RunStatus::Paused {
                    self.status = RunStatus::Running;
                }
            }
            JournalEvent::RunStopped { reason } => {
                if !self.is_finished() {
                    self.status = RunStatus::Stopped;
                    self.error = Some(reason.clone());
                    self.cancel_open_nodes();
                }
            }
            JournalEvent::RunCompleted { output } => {
                self.status = RunStatus::Completed;
                self.output = Some(output.clone());
            }
            JournalEvent::RunFailed { error } => {
                self.status = RunStatus::Failed;
                self.error = Some(error.clone());
                self.cancel_open_nodes();
            }
        }
    }

    fn on_started(
        &mut self,
        inputs: &BTreeMap<String, String>,
        seed: u64,
        from_node: Option<&str>,
        prior: &BTreeMap<String, String>,
    ) {
        if self.status != RunStatus::New {
            return;
        }
        self.status = RunStatus::Running;
        self.inputs = inputs.clone();
        self.seed = seed;
        self.from_node = from_node.map(str::to_string);
        self.prior_outputs = prior.clone();
        let Some(&start) = from_node.and_then(|id| self.plan.index.get(id)) else {
            return;
        };
        let upstream = self.plan.dag.ancestors(start);
        let order = self.plan.dag.topo.clone();
        for i in order.into_iter().filter(|&i| upstream[i]) {
            let id = &self.flow.nodes[i].id;
            self.nodes[i].output = Some(prior.get(id).cloned().unwrap_or_default());
            self.finish_node(i, NodeState::Completed);
        }
    }

    fn index(&self, node: &str) -> Option<usize> {
        self.plan.index.get(node).copied()
    }

    fn pending_node(&self, node: &str) -> Option<usize> {
        self.index(node)
            .filter(|&i| self.nodes[i].state == NodeState::Pending)
    }

    fn open_node(&self, node: &str) -> Option<usize> {
        self.index(node)
            .filter(|&i| !self.nodes[i].state.is_terminal())
    }

    fn item_mut(&mut self, node: &str, item: usize, attempt: u32) -> Option<&mut ItemRun> {
        let i = self.open_node(node)?;
        self.nodes[i]
            .items
            .get_mut(item)
            .filter(|it| it.attempt == attempt && it.status == ItemStatus::InFlight)
    }

    fn on_queued(&mut self, i: usize, at_ms: u64) {
        self.ready.remove(&i);
        self.active.insert(i);
        let run = &mut self.nodes[i];
        run.state = NodeState::Running;
        run.queued_at = Some(at_ms);
        let built = match self.nodes[i].prepared.take() {
            Some(items) => Ok(items),
            None => self.build_items(i),
        };
        match built {
            Ok(items) => {
                let run = &mut self.nodes[i];
                run.candidates = items.len();
                run.items = items;
            }
            Err(e) => self.nodes[i].queue_error = Some(e),
        }
    }

    fn on_attempt(&mut self, node: &str, item: usize, attempt: u32) {
        let Some(i) = self.open_node(node) else {
            return;
        };
        if item == self.nodes[i].items.len() && item == self.nodes[i].candidates {
            self.add_judge_item(i);
        }
        let Some(it) = self.nodes[i].items.get_mut(item) else {
            return;
        };
        if it.status != ItemStatus::InFlight {
            self.in_flight += 1;
        }
        it.status = ItemStatus::InFlight;
        it.attempt = attempt;
        it.dispatched = false;
        it.client = None;
    }

    fn on_output(&mut self, node: &str, item: usize, attempt: u32, client: &str, text: &str) {
        let Some(it) = self.item_mut(node, item, attempt) else {
            return;
        };
        it.status = ItemStatus::Done;
        it.text = Some(text.to_string());
        if !client.is_empty() {
            it.reply_label = client.to_string();
        }
        self.in_flight -= 1;
    }

    fn on_item_failed(
        &mut self,
        node: &str,
        item: usize,
        attempt: u32,
        error: &str,
        retryable: bool,
        at_ms: u64,
    ) {
        let Some(i) = self.open_node(node) else {
            return;
        };
        let policy = self.plan.nodes[i].retry;
        let salt = idempotency_key("", node, item, attempt);
        let delay = policy.delay_ms(attempt, self.seed, &salt);
        let fallback = self.plan.fallback.clone();
        let Some(it) = self.item_mut(node, item, attempt) else {
            return;
        };
        if let Some(c) = it.client.take() {
            it.failed_clients.push(c);
        }
        it.status = if retryable && attempt <= policy.max_retries {
            ItemStatus::Backoff {
                at_ms: at_ms.saturating_add(delay),
            }
        } else if let Some(text) = fallback {
            it.text = Some(text);
            ItemStatus::Done
        } else {
            ItemStatus::Failed {
                error: error.to_string(),
            }
        };
        self.in_flight -= 1;
    }

    fn finish_node(&mut self, i: usize, state: NodeState) {
        if self.nodes[i].state.is_terminal() {
            return;
        }
        let node = &self.flow.nodes[i].id;
        for (k, it) in self.nodes[i].items.iter_mut().enumerate() {
            if it.status == ItemStatus::InFlight {
                it.status = ItemStatus::Cancelled;
                self.in_flight -= 1;
                if state == NodeState::Cancelled {
                    // The run stopped or failed: the runner must abandon this attempt.
                    self.pending_cancels.push((
                        node.clone(),
                        k,
                        idempotency_key(&self.run_id, node, k, it.attempt),
                    ));
                }
            }
        }
        self.nodes[i].state = state;
        self.terminal += 1;
        self.ready.remove(&i);
        self.active.remove(&i);
        for &d in &self.plan.dag.dependents[i] {
            self.pending_deps[d] -= 1;
            if self.pending_deps[d] == 0 && self.nodes[d].state == NodeState::Pending {
                self.ready.insert(d);
            }
        }
    }

    fn cancel_open_nodes(&mut self) {
        for i in 0..self.nodes.len() {
            if !self.nodes[i].state.is_terminal() {
                self.finish_node(i, NodeState::Cancelled);
            }
        }
    }

    // ----- items and templates ----------------------------------------------------------

    fn build_items(&self, i: usize) -> Result<Vec<ItemRun>, String> {
        let item = |label: String, target: Target, template: &str, value: Option<String>| ItemRun {
            label: label.clone(),
            target,
            template: template.to_string(),
            value,
            prompt_override: None,
            status: ItemStatus::Idle,
            attempt: 0,
            dispatched: false,
            client: None,
            failed_clients: Vec::new(),
            text: None,
            reply_label: label,
        };
        let plan = &self.plan.nodes[i];
        if let Work::Command { .. } = plan.work {
            return Ok(vec![item(
                "hub".into(),
                Target::Name("hub".into()),
                "",
                None,
            )]);
        }
        Ok(match &plan.fanout {
            Fanout::Fixed(list) => list
                .iter()
                .map(|(t, label, tpl)| item(label.clone(), t.clone(), tpl, None))
                .collect(),
            Fanout::Workers(t, n, tpl) => (1..=*n)
                .map(|k| item(format!("{t} #{k}"), t.clone(), tpl, None))
                .collect(),
            Fanout::ForEach {
                items,
                refs,
                var,
                targets,
                template,
                ..
            } => {
                let values = match items {
                    ForEachItems::List(list) => list.clone(),
                    ForEachItems::Expr(_) => self.eval_items(i, refs)?,
                };
                values
                    .into_iter()
                    .enumerate()
                    .map(|(k, v)| {
                        let label = format!("{var} {}", k + 1);
                        let target = targets[k % targets.len().max(1)].clone();
                        item(label, target, template, Some(v))
                    })
                    .collect()
            }
        })
    }

    fn eval_items(&self, i: usize, refs: &[Ref]) -> Result<Vec<String>, String> {
        let flow_node = &self.flow.nodes[i];
        let Some(fe) = &flow_node.for_each else {
            return Ok(Vec::new());
        };
        let ForEachItems::Expr(text) = &fe.items else {
            return Ok(Vec::new());
        };
        let source =
            crate::flows::template::convert(text, crate::flows::template::Mode::Expression).source;
        let expr = self
            .plan
            .env
            .compile_expression(&source)
            .map_err(|e| format!("for_each: {}", crate::flows::template::describe(&e)))?;
        let value = expr
            .eval(self.context(i, refs, None))
            .map_err(|e| format!("for_each: {}", crate::flows::template::describe(&e)))?;
        Ok(list_items(&value))
    }

    fn add_judge_item(&mut self, i: usize) {
        let Some(target) = self.plan.nodes[i].judge.clone() else {
            return;
        };
        let task = self.nodes[i]
            .items
            .first()
            .and_then(|it| self.render(i, it).ok())
            .unwrap_or_default();
        let replies: Vec<Reply<'_>> = self.nodes[i]
            .items
            .iter()
            .map(|it| Reply {
                label: &it.reply_label,
                text: it.text.as_deref().unwrap_or_default(),
            })
            .collect();
        let prompt = aggregate::judge_prompt(&task, &replies);
        let label = format!("judge {target}");
        self.nodes[i].items.push(ItemRun {
            label: label.clone(),
            target,
            template: String::new(),
            value: None,
            prompt_override: Some(prompt),
            status: ItemStatus::Idle,
            attempt: 0,
            dispatched: false,
            client: None,
            failed_clients: Vec::new(),
            text: None,
            reply_label: label,
        });
    }

    /// The value of variable `name` as seen by node `i`.
    fn lookup(&self, i: usize, name: &str, item: Option<(&str, &str)>) -> Option<String> {
        if let Some((var, value)) = item {
            if var == name {
                return Some(value.to_string());
            }
        }
        match name {
            "RESULT" => {
                let outs: Vec<&str> = self.plan.dag.deps[i]
                    .iter()
                    .filter_map(|&d| self.nodes[d].output.as_deref())
                    .collect();
                return Some(outs.join("\n\n"));
            }
            "run_id" => return Some(self.run_id.clone()),
            "flow_name" => return Some(self.flow.name.clone()),
            _ => {}
        }
        if let Some(v) = self.inputs.get(name) {
            return Some(v.clone());
        }
        let provider = self
            .plan
            .index
            .get(name)
            .or_else(|| self.plan.output_vars.get(name))
            .copied()?;
        Some(self.nodes[provider].output.clone().unwrap_or_default())
    }

    fn node_outputs(&self, p: usize) -> Vec<String> {
        let run = &self.nodes[p];
        run.items
            .iter()
            .take(run.candidates)
            .filter_map(|it| it.text.clone())
            .collect()
    }

    /// The minijinja context for `refs`: each variable at top level and under `vars`, and
    /// `nodes.<id>.output / outputs`.
    fn context(&self, i: usize, refs: &[Ref], item: Option<(&str, &str)>) -> Value {
        let mut top: BTreeMap<String, Value> = BTreeMap::new();
        let mut vars: BTreeMap<String, Value> = BTreeMap::new();
        let mut nodes: BTreeMap<String, Value> = BTreeMap::new();
        for r in refs {
            match r {
                Ref::Var(name) => {
                    if let Some(v) = self.lookup(i, name, item) {
                        top.insert(name.clone(), Value::from(v.clone()));
                        vars.insert(name.clone(), Value::from(v));
                    }
                }
                Ref::Node(id, _) => {
                    if let Some(&p) = self.plan.index.get(id) {
                        let mut obj: BTreeMap<&str, Value> = BTreeMap::new();
                        obj.insert(
                            "output",
                            Value::from(self.nodes[p].output.clone().unwrap_or_default()),
                        );
                        obj.insert("outputs", Value::from(self.node_outputs(p)));
                        nodes.insert(id.clone(), Value::from(obj));
                    }
                }
            }
        }
        top.insert("vars".into(), Value::from(vars));
        top.insert("nodes".into(), Value::from(nodes));
        Value::from(top)
    }

    fn item_var(&self, i: usize) -> Option<&str> {
        match &self.plan.nodes[i].fanout {
            Fanout::ForEach { var, .. } => Some(var.as_str()),
            _ => None,
        }
    }

    fn render(&self, i: usize, it: &ItemRun) -> Result<String, String> {
        if let Some(p) = &it.prompt_override {
            return Ok(p.clone());
        }
        let compiled = self
            .plan
            .templates
            .get(&it.template)
            .ok_or_else(|| format!("no template for node `{}`", self.flow.nodes[i].id))?;
        let item = self.item_var(i).zip(it.value.as_deref());
        let ctx = self.context(i, &compiled.refs, item);
        self.plan
            .env
            .get_template(&compiled.name)
            .and_then(|t| t.render(ctx))
            .map_err(|e| {
                format!(
                    "模板渲染失败 / prompt could not be rendered: {}",
                    crate::flows::template::describe(&e)
                )
            })
    }

    // ----- deciding what to do ------------------------------------------------------------

    fn emit(&mut self, event: JournalEvent, out: &mut Vec<Action>) {
        self.apply(&event);
        out.push(Action::Record(event));
    }

    /// What the runner should do now. Call after every applied event and at `Wait` times.
    pub fn next_actions(&mut self, now_ms: u64) -> Vec<Action> {
        let mut out = Vec::new();
        if self.status == RunStatus::New {
            let event = JournalEvent::RunStarted {
                run_id: self.run_id.clone(),
                flow: self.flow.name.clone(),
                flow_hash: flow_hash(&self.flow),
                inputs: self.inputs.clone(),
                seed: self.seed,
                from_node: self.from_node.clone(),
                prior_outputs: self.prior_outputs.clone(),
                at_ms: now_ms,
            };
            self.emit(event, &mut out);
        }
        match self.status {
            RunStatus::Stopped | RunStatus::Failed => {
                self.finish_actions(&mut out);
                return out;
            }
            RunStatus::Completed | RunStatus::New => return out,
            RunStatus::Running | RunStatus::Paused => {}
        }
        loop {
            let mut changed = false;
            let active: Vec<usize> = self.active.iter().copied().collect();
            for i in active {
                changed |= self.step_node(i, now_ms, &mut out);
                if self.is_finished() {
                    self.finish_actions(&mut out);
                    return out;
                }
            }
            if self.status == RunStatus::Running {
                while let Some(i) = self.ready.pop_first() {
                    changed = true;
                    self.decide(i, now_ms, &mut out);
                    if self.is_finished() {
                        self.finish_actions(&mut out);
                        return out;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        if self.terminal == self.nodes.len() {
            self.complete_run(&mut out);
        } else if let Some(until_ms) = self.next_timer(now_ms) {
            out.push(Action::Wait { until_ms });
        }
        out
    }

    /// Cancels what is in flight; the first time a failed run gets here, also says `Fail`.
    fn finish_actions(&mut self, out: &mut Vec<Action>) {
        self.cancel_in_flight(out);
        if self.status == RunStatus::Failed && !self.fail_reported {
            self.fail_reported = true;
            out.push(Action::Fail {
                error: self.error.clone().unwrap_or_default(),
            });
        }
    }

    fn cancel_in_flight(&mut self, out: &mut Vec<Action>) {
        for (node, item, idempotency_key) in self.pending_cancels.drain(..) {
            out.push(Action::Cancel {
                node,
                item,
                idempotency_key,
            });
        }
    }

    /// A ready node: skip it (trigger rule, `when`) or queue it.
    fn decide(&mut self, i: usize, now_ms: u64, out: &mut Vec<Action>) {
        let id = self.flow.nodes[i].id.clone();
        if let Some(reason) = self.trigger_blocks(i) {
            self.emit(JournalEvent::NodeSkipped { node: id, reason }, out);
            return;
        }
        if let Some((source, refs)) = &self.plan.nodes[i].when {
            let verdict = self
                .plan
                .env
                .compile_expression(source)
                .and_then(|e| e.eval(self.context(i, refs, None)))
                .map(|v| v.is_true());
            match verdict {
                Ok(true) => {}
                Ok(false) => {
                    let reason = "when 条件为假 / `when` was false".to_string();
                    self.emit(JournalEvent::NodeSkipped { node: id, reason }, out);
                    return;
                }
                Err(e) => {
                    let error = format!("when: {}", crate::flows::template::describe(&e));
                    self.fail_node(i, error, out);
                    return;
                }
            }
        }
        let labels = match self.build_items(i) {
            Ok(items) => {
                let labels = items.iter().map(|it| it.label.clone()).collect();
                self.nodes[i].prepared = Some(items);
                labels
            }
            Err(_) => Vec::new(),
        };
        self.emit(
            JournalEvent::NodeQueued {
                node: id,
                items: labels,
                at_ms: now_ms,
            },
            out,
        );
    }

    /// Why the trigger rule keeps node `i` from running, if it does.
    fn trigger_blocks(&self, i: usize) -> Option<String> {
        let deps = &self.plan.dag.deps[i];
        let state = |d: usize| self.nodes[d].state;
        let id = |d: usize| self.flow.nodes[d].id.as_str();
        match self.plan.nodes[i].trigger {
            Trigger::AllSuccess => deps
                .iter()
                .find(|&&d| state(d) != NodeState::Completed)
                .map(|&d| format!("依赖未完成 / dependency `{}` is {}", id(d), state(d).name())),
            Trigger::AllDone => None,
            Trigger::NoneFailed => deps
                .iter()
                .find(|&&d| matches!(state(d), NodeState::Failed | NodeState::Cancelled))
                .map(|&d| format!("依赖失败 / dependency `{}` failed", id(d))),
            Trigger::OneSuccess => (!deps.is_empty()
                && !deps.iter().any(|&d| state(d) == NodeState::Completed))
            .then(|| "没有依赖成功 / no dependency completed".to_string()),
        }
    }

    /// Advances a queued node; true when it reached a terminal state.
    fn step_node(&mut self, i: usize, now_ms: u64, out: &mut Vec<Action>) -> bool {
        if self.nodes[i].state.is_terminal() {
            self.active.remove(&i);
            return true;
        }
        if let Some(error) = self.nodes[i].queue_error.clone() {
            self.fail_node(i, error, out);
            return true;
        }
        if let Some(error) = self.first_item_error(i) {
            self.cancel_node_items(i, out);
            self.fail_node(i, error, out);
            return true;
        }
        if self.plan.nodes[i].work == Work::Master {
            return self.deliver_master(i, out);
        }
        let run = &self.nodes[i];
        let candidates_done = run.items[..run.candidates]
            .iter()
            .all(|it| it.status == ItemStatus::Done);
        if candidates_done {
            if self.plan.nodes[i].aggregate != Aggregate::Judge {
                return self.complete_node(i, out);
            }
            match self.nodes[i].items.get(self.nodes[i].candidates) {
                None => self.add_judge_item(i),
                Some(judge) if judge.status == ItemStatus::Done => {
                    let output = judge.text.clone().unwrap_or_default();
                    let node = self.flow.nodes[i].id.clone();
                    self.emit(JournalEvent::NodeCompleted { node, output }, out);
                    return true;
                }
                Some(_) => {}
            }
        }
        if let Some(error) = self.deadline_passed(i, now_ms) {
            self.cancel_node_items(i, out);
            self.fail_node(i, error, out);
            return true;
        }
        self.start_items(i, now_ms, out);
        false
    }

    fn deadline_passed(&self, i: usize, now_ms: u64) -> Option<String> {
        let deadline = self.plan.nodes[i].timeout.deadline_ms?;
        let queued = self.nodes[i].queued_at?;
        (now_ms >= queued.saturating_add(deadline)).then(|| {
            format!(
                "超时 / node deadline of {} exceeded",
                crate::flows::model::Duration(deadline)
            )
        })
    }

    fn first_item_error(&self, i: usize) -> Option<String> {
        self.nodes[i].items.iter().find_map(|it| match &it.status {
            ItemStatus::Failed { error } => Some(format!("[{}] {error}", it.label)),
            _ => None,
        })
    }

    fn cancel_node_items(&mut self, i: usize, out: &mut Vec<Action>) {
        let node = self.flow.nodes[i].id.clone();
        for (k, it) in self.nodes[i].items.iter_mut().enumerate() {
            if it.status == ItemStatus::InFlight {
                it.status = ItemStatus::Cancelled;
                self.in_flight -= 1;
                out.push(Action::Cancel {
                    node: node.clone(),
                    item: k,
                    idempotency_key: idempotency_key(&self.run_id, &node, k, it.attempt),
                });
            }
        }
    }

    fn fail_node(&mut self, i: usize, error: String, out: &mut Vec<Action>) {
        let node = self.flow.nodes[i].id.clone();
        self.emit(
            JournalEvent::NodeFailed {
                node: node.clone(),
                error: error.clone(),
            },
            out,
        );
        if self.plan.nodes[i].on_failure == OnFailure::Fail {
            let error = format!("节点失败 / node `{node}` failed: {error}");
            self.emit(JournalEvent::RunFailed { error }, out);
        }
    }

    fn complete_node(&mut self, i: usize, out: &mut Vec<Action>) -> bool {
        let run = &self.nodes[i];
        let replies: Vec<Reply<'_>> = run.items[..run.candidates]
            .iter()
            .map(|it| Reply {
                label: &it.reply_label,
                text: it.text.as_deref().unwrap_or_default(),
            })
            .collect();
        let node = self.flow.nodes[i].id.clone();
        match aggregate::aggregate(self.plan.nodes[i].aggregate, &replies) {
            Ok(output) => self.emit(JournalEvent::NodeCompleted { node, output }, out),
            Err(error) => self.fail_node(i, error, out),
        }
        true
    }

    fn deliver_master(&mut self, i: usize, out: &mut Vec<Action>) -> bool {
        if self.status == RunStatus::Paused {
            return false;
        }
        let node = self.flow.nodes[i].id.clone();
        let rendered = match self.nodes[i].items.first() {
            Some(it) => self.render(i, it),
            None => Err("no prompt".into()),
        };
        match rendered {
            Ok(text) => {
                out.push(Action::Deliver {
                    node: Some(node.clone()),
                    text: text.clone(),
                });
                self.emit(JournalEvent::NodeCompleted { node, output: text }, out);
            }
            Err(error) => self.fail_node(i, error, out),
        }
        true
    }

    /// Starts new attempts (within limits) and re-issues in-flight attempts not yet handed to
    /// this process's runner (after a replay).
    fn start_items(&mut self, i: usize, now_ms: u64, out: &mut Vec<Action>) {
        let node_cap = match &self.plan.nodes[i].fanout {
            Fanout::ForEach { max_parallel, .. } => max_parallel.map(|m| m as usize),
            _ => None,
        };
        let run_cap = self.plan.max_parallel.map(|m| m as usize);
        for k in 0..self.nodes[i].items.len() {
            let it = &self.nodes[i].items[k];
            let next_attempt = match it.status {
                ItemStatus::InFlight if !it.dispatched => {
                    self.dispatch(i, k, out);
                    continue;
                }
                ItemStatus::Idle => 1,
                ItemStatus::Backoff { at_ms } if at_ms <= now_ms => it.attempt + 1,
                _ => continue,
            };
            if self.status != RunStatus::Running {
                continue;
            }
            let node_in_flight = self.nodes[i]
                .items
                .iter()
                .filter(|it| it.status == ItemStatus::InFlight)
                .count();
            if node_cap.is_some_and(|c| node_in_flight >= c)
                || run_cap.is_some_and(|c| self.in_flight >= c)
            {
                continue;
            }
            let node = self.flow.nodes[i].id.clone();
            let key = idempotency_key(&self.run_id, &node, k, next_attempt);
            self.emit(
                JournalEvent::AttemptStarted {
                    node,
                    item: k,
                    attempt: next_attempt,
                    idempotency_key: key,
                    at_ms: now_ms,
                },
                out,
            );
            self.dispatch(i, k, out);
        }
    }

    /// Hands the current attempt of item `k` of node `i` to the runner.
    fn dispatch(&mut self, i: usize, k: usize, out: &mut Vec<Action>) {
        let plan = &self.plan.nodes[i];
        let node = self.flow.nodes[i].id.clone();
        let it = &self.nodes[i].items[k];
        let key = idempotency_key(&self.run_id, &node, k, it.attempt);
        let action = match &plan.work {
            Work::Command { command, refs } => Ok(Action::RunCommand(CommandCall {
                node: node.clone(),
                item: k,
                attempt: it.attempt,
                idempotency_key: key,
                command: command.clone(),
                vars: refs
                    .iter()
                    .map(|(key, r)| (key.clone(), self.ref_value(i, r)))
                    .collect(),
                timeout: plan.timeout,
            })),
            _ => self.render(i, it).map(|prompt| {
                Action::Dispatch(Dispatch {
                    node: node.clone(),
                    item: k,
                    items: self.nodes[i].items.len(),
                    label: it.label.clone(),
                    attempt: it.attempt,
                    idempotency_key: key,
                    prompt,
                    target: it.target.clone(),
                    avoid: it.failed_clients.clone(),
                    timeout: plan.timeout,
                })
            }),
        };
        let attempt = it.attempt;
        self.nodes[i].items[k].dispatched = true;
        match action {
            Ok(action) => out.push(action),
            Err(error) => self.emit(
                JournalEvent::ItemFailed {
                    node,
                    item: k,
                    attempt,
                    error,
                    retryable: false,
                    at_ms: self.nodes[i].queued_at.unwrap_or_default(),
                },
                out,
            ),
        }
    }

    fn ref_value(&self, i: usize, r: &Ref) -> String {
        match r {
            Ref::Var(name) => self.lookup(i, name, None).unwrap_or_default(),
            Ref::Node(id, field) => match self.plan.index.get(id) {
                Some(&p) => match field {
                    Field::Output => self.nodes[p].output.clone().unwrap_or_default(),
                    Field::Outputs => self.node_outputs(p).join("\n\n"),
                },
                None => String::new(),
            },
        }
    }

    fn next_timer(&self, now_ms: u64) -> Option<u64> {
        let mut next: Option<u64> = None;
        let mut consider = |t: u64| {
            if t > now_ms {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        for &i in &self.active {
            if let (Some(d), Some(q)) = (
                self.plan.nodes[i].timeout.deadline_ms,
                self.nodes[i].queued_at,
            ) {
                consider(q.saturating_add(d));
            }
            if self.status == RunStatus::Running {
                for it in &self.nodes[i].items {
                    if let ItemStatus::Backoff { at_ms } = it.status {
                        consider(at_ms);
                    }
                }
            }
        }
        next
    }

    fn complete_run(&mut self, out: &mut Vec<Action>) {
        let master = (0..self.nodes.len()).rev().find(|&i| {
            self.plan.nodes[i].work == Work::Master && self.nodes[i].state == NodeState::Completed
        });
        let output = match master {
            Some(i) => self.nodes[i].output.clone().unwrap_or_default(),
            None => (0..self.nodes.len())
                .filter(|&i| self.plan.dag.dependents[i].is_empty())
                .filter_map(|i| self.nodes[i].output.clone())
                .collect::<Vec<_>>()
                .join("\n\n"),
        };
        if !self.master_delivered {
            out.push(Action::Deliver {
                node: None,
                text: output.clone(),
            });
        }
        self.emit(
            JournalEvent::RunCompleted {
                output: output.clone(),
            },
            out,
        );
        out.push(Action::Complete { output });
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
