//! Scheduling: [`RunState::next_actions`] decides what the runner should do now.

use super::aggregate::{self, ItemReply};
use super::events::{idempotency_key, CommandCall, Dispatch, Effect, JournalEvent};
use super::plan::{Fanout, NodeWork};
use super::{flow_hash, ItemStatus, NodeState, RunState, RunStatus};
use crate::flows::model::{Aggregate, OnFailure, Trigger};
use crate::flows::template::{Field, Ref};

impl RunState {
    pub(super) fn emit(&mut self, event: JournalEvent, out: &mut Vec<Effect>) {
        self.apply(&event);
        out.push(Effect::Record(event));
    }

    /// Starts a new run: applies and returns its `run_started` event (None once started).
    /// The runner journals it in the same transaction as the run's row, so a run that exists
    /// always has a journal to resume from.
    pub fn begin(&mut self, now_ms: u64) -> Option<JournalEvent> {
        if self.status != RunStatus::New {
            return None;
        }
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
        self.apply(&event);
        Some(event)
    }

    /// What the runner should do now. Call after every applied event and at `Wait` times.
    pub fn next_actions(&mut self, now_ms: u64) -> Vec<Effect> {
        let mut out = Vec::new();
        if let Some(event) = self.begin(now_ms) {
            out.push(Effect::Record(event));
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
        self.settle_fallback(&mut out);
        if self.is_finished() {
            self.finish_actions(&mut out);
            return out;
        }
        if self.terminal == self.nodes.len() {
            self.complete_run(&mut out);
        } else if let Some(until_ms) = self.next_timer(now_ms) {
            out.push(Effect::Wait { until_ms });
        }
        out
    }

    /// Cancels what is in flight; the first time a failed run gets here, also says `Fail`.
    pub(super) fn finish_actions(&mut self, out: &mut Vec<Effect>) {
        self.cancel_in_flight(out);
        if self.status == RunStatus::Failed && !self.fail_reported {
            self.fail_reported = true;
            out.push(Effect::Fail {
                error: self.error.clone().unwrap_or_default(),
            });
        }
    }

    pub(super) fn cancel_in_flight(&mut self, out: &mut Vec<Effect>) {
        for (node, item, idempotency_key) in self.pending_cancels.drain(..) {
            out.push(Effect::Cancel {
                node,
                item,
                idempotency_key,
            });
        }
    }

    /// A ready node: skip it (trigger rule, `when`) or queue it.
    pub(super) fn decide(&mut self, i: usize, now_ms: u64, out: &mut Vec<Effect>) {
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
    pub(super) fn trigger_blocks(&self, i: usize) -> Option<String> {
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
    pub(super) fn step_node(&mut self, i: usize, now_ms: u64, out: &mut Vec<Effect>) -> bool {
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
        if self.plan.nodes[i].work == NodeWork::Master {
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

    pub(super) fn deadline_passed(&self, i: usize, now_ms: u64) -> Option<String> {
        let deadline = self.plan.nodes[i].timeout.deadline_ms?;
        let queued = self.nodes[i].queued_at?;
        (now_ms >= queued.saturating_add(deadline)).then(|| {
            format!(
                "超时 / node deadline of {} exceeded",
                crate::flows::model::Duration(deadline)
            )
        })
    }

    pub(super) fn first_item_error(&self, i: usize) -> Option<String> {
        self.nodes[i].items.iter().find_map(|it| match &it.status {
            ItemStatus::Failed { error } => Some(format!("[{}] {error}", it.label)),
            _ => None,
        })
    }

    pub(super) fn cancel_node_items(&mut self, i: usize, out: &mut Vec<Effect>) {
        let node = self.flow.nodes[i].id.clone();
        for (k, it) in self.nodes[i].items.iter_mut().enumerate() {
            if it.status == ItemStatus::InFlight {
                it.status = ItemStatus::Cancelled;
                self.in_flight -= 1;
                out.push(Effect::Cancel {
                    node: node.clone(),
                    item: k,
                    idempotency_key: idempotency_key(&self.run_id, &node, k, it.attempt),
                });
            }
        }
    }

    pub(super) fn fail_node(&mut self, i: usize, error: String, out: &mut Vec<Effect>) {
        let node = self.flow.nodes[i].id.clone();
        self.emit(
            JournalEvent::NodeFailed {
                node: node.clone(),
                error: error.clone(),
            },
            out,
        );
        // The fallback's own failure is told with the run's; a failure the fallback answers
        // fails the run once the fallback is done (see `settle_fallback`).
        if self.plan.handler == Some(i) || self.failing.is_some() {
            return;
        }
        if self.plan.nodes[i].on_failure == OnFailure::Fail {
            let error = format!("节点失败 / node `{node}` failed: {error}");
            self.emit(JournalEvent::RunFailed { error }, out);
        }
    }

    /// The fallback node at the end of a run: skipped when no node failed; once it is done,
    /// the failure it answered fails the run, saying what the fallback did.
    pub(super) fn settle_fallback(&mut self, out: &mut Vec<Effect>) {
        let Some(h) = self.plan.handler else {
            return;
        };
        let id = self.flow.nodes[h].id.clone();
        let state = self.nodes[h].state;
        if let Some(error) = self.failing.clone() {
            if !state.is_terminal() {
                return;
            }
            let did = match state {
                NodeState::Completed => format!("已执行失败处理 / fallback `{id}` ran"),
                NodeState::Failed => format!(
                    "失败处理也失败 / fallback `{id}` failed too: {}",
                    self.nodes[h].error.clone().unwrap_or_default()
                ),
                _ => format!(
                    "失败处理未运行 / fallback `{id}` did not run: {}",
                    self.nodes[h].error.clone().unwrap_or_default()
                ),
            };
            let error = format!("{error}; {did}");
            self.emit(JournalEvent::RunFailed { error }, out);
        } else if self.failure.is_none()
            && state == NodeState::Pending
            && self.terminal + 1 == self.nodes.len()
        {
            let reason = "没有节点失败 / no node failed".to_string();
            self.emit(JournalEvent::NodeSkipped { node: id, reason }, out);
        }
    }

    pub(super) fn complete_node(&mut self, i: usize, out: &mut Vec<Effect>) -> bool {
        let run = &self.nodes[i];
        let replies: Vec<ItemReply<'_>> = run.items[..run.candidates]
            .iter()
            .map(|it| ItemReply {
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

    pub(super) fn deliver_master(&mut self, i: usize, out: &mut Vec<Effect>) -> bool {
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
                // Journaled first: a crash right after must not deliver it a second time
                // (the runner writes both in one transaction).
                self.emit(
                    JournalEvent::NodeCompleted {
                        node: node.clone(),
                        output: text.clone(),
                    },
                    out,
                );
                out.push(Effect::Deliver {
                    node: Some(node),
                    text,
                });
            }
            Err(error) => self.fail_node(i, error, out),
        }
        true
    }

    /// Starts new attempts (within limits) and re-issues in-flight attempts not yet handed to
    /// this process's runner (after a replay).
    pub(super) fn start_items(&mut self, i: usize, now_ms: u64, out: &mut Vec<Effect>) {
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
    pub(super) fn dispatch(&mut self, i: usize, k: usize, out: &mut Vec<Effect>) {
        let plan = &self.plan.nodes[i];
        let node = self.flow.nodes[i].id.clone();
        let it = &self.nodes[i].items[k];
        let key = idempotency_key(&self.run_id, &node, k, it.attempt);
        let action = match &plan.work {
            NodeWork::Command { command, refs } => Ok(Effect::RunCommand(CommandCall {
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
            _ => self.render(i, it).and_then(|prompt| {
                let files = self.render_files(i, it)?;
                Ok(Effect::Dispatch(Dispatch {
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
                    files,
                }))
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

    pub(super) fn ref_value(&self, i: usize, r: &Ref) -> String {
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

    pub(super) fn next_timer(&self, now_ms: u64) -> Option<u64> {
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

    pub(super) fn complete_run(&mut self, out: &mut Vec<Effect>) {
        let handler = self.plan.handler;
        let master = (0..self.nodes.len()).rev().find(|&i| {
            self.plan.nodes[i].work == NodeWork::Master
                && self.nodes[i].state == NodeState::Completed
                && handler != Some(i)
        });
        let output = match master {
            Some(i) => self.nodes[i].output.clone().unwrap_or_default(),
            None => (0..self.nodes.len())
                .filter(|&i| self.plan.dag.dependents[i].is_empty() && handler != Some(i))
                .filter_map(|i| self.nodes[i].output.clone())
                .collect::<Vec<_>>()
                .join("\n\n"),
        };
        let deliver = !self.master_delivered;
        self.emit(
            JournalEvent::RunCompleted {
                output: output.clone(),
            },
            out,
        );
        if deliver {
            out.push(Effect::Deliver {
                node: None,
                text: output.clone(),
            });
        }
        out.push(Effect::Complete { output });
    }
}
