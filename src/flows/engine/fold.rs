//! The fold: how each journal event changes a [`RunState`] (pure, replayable).

use std::collections::BTreeMap;

use super::events::{idempotency_key, JournalEvent};
use super::plan::NodeWork;
use super::{ItemRun, ItemStatus, NodeState, RunState, RunStatus};
use crate::flows::model::OnFailure;

impl RunState {
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
                ..
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
                    if self.plan.nodes[i].work == NodeWork::Master && self.plan.handler != Some(i) {
                        self.master_delivered = true;
                    }
                    self.finish_node(i, NodeState::Completed);
                }
            }
            JournalEvent::NodeFailed { node, error } => {
                if let Some(i) = self.open_node(node) {
                    self.nodes[i].error = Some(error.clone());
                    self.finish_node(i, NodeState::Failed);
                    self.on_node_failed(i, error);
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

    pub(super) fn on_started(
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

    pub(super) fn index(&self, node: &str) -> Option<usize> {
        self.plan.index.get(node).copied()
    }

    pub(super) fn pending_node(&self, node: &str) -> Option<usize> {
        self.index(node)
            .filter(|&i| self.nodes[i].state == NodeState::Pending)
    }

    pub(super) fn open_node(&self, node: &str) -> Option<usize> {
        self.index(node)
            .filter(|&i| !self.nodes[i].state.is_terminal())
    }

    pub(super) fn item_mut(
        &mut self,
        node: &str,
        item: usize,
        attempt: u32,
    ) -> Option<&mut ItemRun> {
        let i = self.open_node(node)?;
        self.nodes[i]
            .items
            .get_mut(item)
            .filter(|it| it.attempt == attempt && it.status == ItemStatus::InFlight)
    }

    pub(super) fn on_queued(&mut self, i: usize, at_ms: u64) {
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

    pub(super) fn on_attempt(&mut self, node: &str, item: usize, attempt: u32) {
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

    pub(super) fn on_output(
        &mut self,
        node: &str,
        item: usize,
        attempt: u32,
        client: &str,
        text: &str,
    ) {
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

    pub(super) fn on_item_failed(
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
        // A failed command is retried only where the flow asked for retries.
        let retryable = retryable || self.plan.nodes[i].retry_command;
        let salt = idempotency_key("", node, item, attempt);
        let delay = policy.delay_ms(attempt, self.seed, &salt);
        let fallback = self.plan.fallback_output.clone();
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

    /// Node `i` failed for good: the first such failure starts the fallback node, and a
    /// failure that fails the run waits for it (every other open node is cancelled).
    fn on_node_failed(&mut self, i: usize, error: &str) {
        let Some(h) = self.plan.handler.filter(|&h| h != i) else {
            return;
        };
        let node = self.flow.nodes[i].id.clone();
        if self.failure.is_none() && self.nodes[h].state == NodeState::Pending {
            self.failure = Some((node.clone(), error.to_string()));
            self.ready.insert(h);
        }
        let handler_open = !self.nodes[h].state.is_terminal();
        if self.plan.nodes[i].on_failure == OnFailure::Fail
            && self.failing.is_none()
            && handler_open
            && self.failure.is_some()
        {
            self.failing = Some(format!("节点失败 / node `{node}` failed: {error}"));
            for j in 0..self.nodes.len() {
                if j != h && !self.nodes[j].state.is_terminal() {
                    self.finish_node(j, NodeState::Cancelled);
                }
            }
            self.ready.retain(|&j| j == h);
        }
    }

    pub(super) fn finish_node(&mut self, i: usize, state: NodeState) {
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

    pub(super) fn cancel_open_nodes(&mut self) {
        for i in 0..self.nodes.len() {
            if !self.nodes[i].state.is_terminal() {
                self.finish_node(i, NodeState::Cancelled);
            }
        }
    }
}
