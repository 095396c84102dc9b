//! The hub's side of the cluster engine: applies what the engine reports (other nodes' tabs,
//! envelopes for this node's tabs, envelopes that were refused) to the registry and the task
//! queues, refreshes this node's presence once a heartbeat, and expires other nodes' tabs
//! whose presence ran out. The event loop starts when the hub serves, with the frame handler
//! that hears other nodes' bus events and remote calls (what came before waits in the
//! engine's channel). With the in-process engine only the (quiet) event loop runs.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::engine::{EngineAck, EngineEvent, Envelope, Presence, WireError, WireTask};
use super::hooks::Hooks;
use super::registry::{Client, ConnState, Remote};
use super::tasks::{TaskError, TaskRequest};
use super::{Hub, HubEvent};
use crate::store::now_ms;

impl Hub {
    /// Starts forgetting tabs that did not come back and, in a cluster, the presence refresh
    /// and sweep.
    pub(super) fn start_cluster(self: &Arc<Self>) {
        let hub = self.clone();
        crate::spawn::tracked(&self.tracker, async move { hub.forget_tabs().await });
        if !self.engine.clustered() {
            return;
        }
        let hub = self.clone();
        crate::spawn::tracked(&self.tracker, async move { hub.refresh_presence().await });
        let hub = self.clone();
        crate::spawn::tracked(&self.tracker, async move { hub.sweep_presence().await });
    }

    /// Tabs that did not come back are forgotten: from memory `forget_in_memory` after they
    /// were last seen, from the store `forget_after` (see `forget_gone_tabs`).
    async fn forget_tabs(self: Arc<Self>) {
        let t = &self.config.timing;
        let period = (t.forget_in_memory.min(t.forget_after) / 4)
            .clamp(Duration::from_millis(50), Duration::from_secs(60));
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = self.shutdown.cancelled() => return,
            }
            self.forget_gone_tabs(now_ms());
        }
    }

    /// Forgets this node's tabs that are away and were last seen long enough before `now`:
    /// from memory after `forget_in_memory`, and their identity and kept frames after
    /// `forget_after`. A tab a task still waits on (its queue) stays, and so does the master
    /// of a run in progress (in the store: the run's results are still sent to it). The
    /// runs' journals are never touched. Returns (dropped from memory, forgotten in store).
    pub fn forget_gone_tabs(&self, now: i64) -> (usize, usize) {
        let t = &self.config.timing;
        let mem_cut = now.saturating_sub(t.forget_in_memory.as_millis() as i64);
        let store_cut = now.saturating_sub(t.forget_after.as_millis() as i64);
        let mut needed = Vec::new();
        let mut from_memory = 0;
        for c in self.registry.all() {
            if c.is_remote() {
                continue;
            }
            if c.state() == ConnState::Connected || self.tasks.load(&c) > 0 {
                needed.push(c.id.clone());
            } else if c.last_seen_ms() < mem_cut && self.registry.forget_local(&c) {
                from_memory += 1;
            }
        }
        if from_memory > 0 {
            tracing::info!(
                tabs = from_memory,
                "tabs that did not come back dropped from memory"
            );
        }
        let gone = match self.store.forget_clients_before(store_cut, &needed) {
            Ok(gone) => gone,
            Err(e) => {
                tracing::warn!("could not forget old tabs: {e}");
                return (from_memory, 0);
            }
        };
        for (id, frames) in &gone {
            if let Some(c) = self.registry.get(id) {
                self.registry.forget_local(&c);
            }
            if *frames > 0 {
                tracing::warn!(client = %id, dropped = frames,
                    "tab forgotten after it did not come back: its {frames} kept frames go with it");
            } else {
                tracing::info!(client = %id, "tab forgotten after it did not come back");
            }
        }
        (from_memory, gone.len())
    }

    /// Starts the engine's event loop: other nodes' bus events and remote calls go to `hooks`.
    pub(super) fn start_engine_events(
        self: &Arc<Self>,
        events: mpsc::Receiver<EngineEvent>,
        hooks: Arc<dyn Hooks>,
    ) {
        let hub = self.clone();
        crate::spawn::tracked(&self.tracker, async move {
            hub.engine_events(events, hooks).await
        });
    }

    async fn engine_events(
        self: Arc<Self>,
        mut events: mpsc::Receiver<EngineEvent>,
        hooks: Arc<dyn Hooks>,
    ) {
        loop {
            let ev = tokio::select! {
                ev = events.recv() => ev,
                _ = self.shutdown.cancelled() => return,
            };
            let Some(ev) = ev else { return };
            match ev {
                EngineEvent::Presence(p) => self.on_presence(p),
                EngineEvent::Gone { id, node } => self.remote_gone(&id, &node),
                EngineEvent::Alive { node } => {
                    self.registry.refresh_node(&node, self.remote_deadline());
                }
                EngineEvent::Batch { from, items, ack } => {
                    let acks = items.into_iter().map(|e| self.take(&from, e)).collect();
                    let _ = ack.send(acks);
                }
                EngineEvent::BusEvent(body) => hooks.bus_event(&body),
                EngineEvent::Call(call) => hooks.remote_call(call),
                EngineEvent::Refused { node, items } => {
                    for (e, ack) in items {
                        self.refused(&node, e, ack);
                    }
                }
            }
        }
    }

    /// What this node tells the cluster about one of its tabs.
    pub fn presence_of(&self, c: &Client) -> Presence {
        let info = c.info();
        let connected = c.state() == ConnState::Connected;
        let silent =
            now_ms() - c.last_seen_ms() > 2 * self.config.timing.ping_interval.as_millis() as i64;
        Presence {
            id: c.id.clone(),
            node: self.engine.node().to_string(),
            site: info.site,
            label: info.label,
            role: info.role.as_str().to_string(),
            group: info.group,
            state: if connected { "connected" } else { "lost" }.into(),
            health: match (connected, silent) {
                (false, _) => "lost",
                (true, true) => "silent",
                (true, false) => "ok",
            }
            .into(),
            load: self.tasks.load(c),
            since_ms: c.since_ms(),
        }
    }

    /// Tells the cluster about a tab of this node now (connect, loss, new role or label).
    pub(super) fn announce(&self, c: &Client) {
        if self.engine.clustered() && !c.is_remote() {
            self.engine.announce(self.presence_of(c));
        }
    }

    /// Once a heartbeat: every tab of this node that is connected or inside its grace, so
    /// health (silent) and load changes reach the cluster. The engine sends only what changed.
    /// A tab past its grace was withdrawn and is not announced again.
    async fn refresh_presence(self: Arc<Self>) {
        let mut tick = tokio::time::interval(self.config.timing.ping_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = self.shutdown.cancelled() => return,
            }
            let grace = self.config.timing.lost_grace.as_millis() as i64;
            let now = now_ms();
            for c in self.registry.all() {
                if c.is_remote() {
                    continue;
                }
                let live = c.state() == ConnState::Connected || now - c.last_seen_ms() < grace;
                if live {
                    self.engine.announce(self.presence_of(&c));
                }
            }
        }
    }

    /// Every 25th of the time to live (a tenth of a heartbeat): other nodes' tabs that were
    /// not refreshed leave.
    async fn sweep_presence(self: Arc<Self>) {
        let period = (self.engine.presence_ttl() / 25).max(Duration::from_millis(20));
        let mut tick = tokio::time::interval(period);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = self.shutdown.cancelled() => return,
            }
            for id in self.registry.expired_remotes(now_ms()) {
                tracing::info!(client = %id, "presence expired: the tab leaves this node's view");
                self.remote_gone(&id, "");
            }
        }
    }

    /// When a remote entry told of now leaves unless told again. A fifth of a time to live
    /// (half a heartbeat) past the engine's own expiry of a silent node, which comes first
    /// and says `Gone`: 3 heartbeats after the node was last heard.
    fn remote_deadline(&self) -> i64 {
        let ttl = self.engine.presence_ttl();
        now_ms() + (ttl + ttl / 5).as_millis() as i64
    }

    /// Another node's tab appeared, changed or was refreshed.
    fn on_presence(&self, p: Presence) {
        if p.node == self.engine.node() {
            return; // our own write, seen back
        }
        let deadline = self.remote_deadline();
        if let Some(r) = self.registry.get(&p.id).and_then(|c| {
            c.remote()
                .filter(|r| r.node != p.node && r.connected)
                .map(|r| (r, c.since_ms()))
        }) {
            if p.state != "connected" || r.1 > p.since_ms {
                // Two nodes claim the tab: the newer connection wins; this is the stale one.
                return;
            }
        }
        if let Some(local) = self.registry.get(&p.id).filter(|c| !c.is_remote()) {
            if !self.moved_away(&local, &p) {
                // A stale entry about a tab that is still ours: say again where it is.
                self.announce(&local);
                return;
            }
        }
        let was_connected = self
            .registry
            .get(&p.id)
            .is_some_and(|c| c.state() == ConnState::Connected);
        let Some(c) = self.registry.upsert_remote(&p, deadline) else {
            return;
        };
        if p.label.is_some() && p.state == "connected" {
            self.settle_label(&p);
        }
        match (was_connected, c.state() == ConnState::Connected) {
            (false, true) => {
                let _ = self.events.send(HubEvent::Connected(c.id.clone()));
                self.tasks_moved();
            }
            (true, false) => {
                let _ = self.events.send(HubEvent::Disconnected(c.id.clone()));
            }
            _ => {}
        }
    }

    /// Presence says tab `local` of this node is now on another node. True if so (the tab
    /// reconnected there): its connection here closes as replaced, its tasks here fail over.
    fn moved_away(&self, local: &Arc<Client>, p: &Presence) -> bool {
        let there = p.state == "connected";
        let here = local.state() == ConnState::Connected;
        let moved = there && (!here || p.since_ms > local.since_ms());
        if moved {
            tracing::info!(client = %local.id, node = %p.node, "tab moved to another node");
            self.registry.make_remote(
                local,
                Remote {
                    node: p.node.clone(),
                    connected: true,
                    health: p.health.clone(),
                    load: p.load,
                    deadline_ms: self.remote_deadline(),
                },
            );
            // No longer ours to announce: the other nodes follow the newer connection.
            self.engine.withdraw(&local.id);
            self.tasks.on_lost(local);
            self.tasks_moved();
        }
        moved
    }

    /// Two connected tabs claim one label: the older connection keeps it (ties: the smaller
    /// client id); a tab of this node that loses it is welcomed again without a label.
    fn settle_label(&self, p: &Presence) {
        let Some(label) = p.label.as_deref() else {
            return;
        };
        for c in self.registry.resolve(label) {
            if c.is_remote() || c.id == p.id || c.info().label.as_deref() != Some(label) {
                continue;
            }
            if (c.since_ms(), c.id.as_str()) > (p.since_ms, p.id.as_str()) {
                tracing::warn!(client = %c.id, label, node = %p.node,
                    "label held by an older tab on another node: this tab loses it");
                c.update_info(|i| i.label = None);
                self.registry.persist(&c);
                let _ = self.registry.send(&c.id, &self.welcome(&c));
                self.announce(&c);
            }
        }
    }

    /// Another node's tab left every view: its tasks here fail over as a lost tab's do.
    /// `node` (when not empty) must still be the entry's node.
    fn remote_gone(&self, id: &str, node: &str) {
        if !node.is_empty()
            && self
                .registry
                .get(id)
                .and_then(|c| c.remote())
                .is_some_and(|r| r.node != node)
        {
            return;
        }
        if let Some(c) = self.registry.forget_remote(id) {
            self.tasks.on_lost(&c);
            let _ = self.events.send(HubEvent::Lost(c.id.clone()));
            self.tasks_moved();
        }
    }

    /// Takes one envelope from node `from`.
    fn take(self: &Arc<Self>, from: &str, e: Envelope) -> EngineAck {
        match e {
            Envelope::Task { task, reply_to } => self.take_task(task, reply_to),
            Envelope::Cancel { to, task_id } => {
                if let Some(c) = self.registry.get(&to).filter(|c| !c.is_remote()) {
                    self.tasks.cancel(&c, &task_id);
                    self.tasks.pump(&c);
                }
                EngineAck::Ok
            }
            Envelope::Frame { to, text, durable } => {
                match self.registry.get(&to).filter(|c| !c.is_remote()) {
                    Some(c) if durable => {
                        self.registry.send_text_durable(&c, text);
                        EngineAck::Ok
                    }
                    Some(c) => {
                        self.registry.send_text(&c, text);
                        EngineAck::Ok
                    }
                    None => EngineAck::NoSuchTab,
                }
            }
            Envelope::Result { task_id, result } => {
                if !self
                    .tasks
                    .complete_remote(&task_id, result.map_err(TaskError::from))
                {
                    tracing::debug!(task = %task_id, from, "outcome of a task no one waits for");
                }
                EngineAck::Ok
            }
        }
    }

    /// A task for a tab of this node, from another node: queued here like any task; its
    /// outcome goes back to `reply_to`. A repeat (same task id) is acked, not queued again.
    fn take_task(self: &Arc<Self>, task: WireTask, reply_to: String) -> EngineAck {
        let Some(client) = self.registry.get(&task.to).filter(|c| !c.is_remote()) else {
            return EngineAck::NoSuchTab;
        };
        if !self.tasks.take_inbound(&task.task_id) {
            return EngineAck::Ok;
        }
        let mut req = TaskRequest::new(task.prompt, Duration::from_millis(task.timeout_ms));
        req.task_id = Some(task.task_id.clone());
        req.parent_id = task.parent_id;
        req.run_id = task.run_id;
        req.node_id = task.node_id;
        req.priority = task.priority;
        req.retry = task.retry;
        req.fail_on_loss = task.fail_on_loss;
        let ticket = match self.tasks.submit(&client, req) {
            Ok(t) => t,
            Err(e) => {
                self.tasks.inbound_done(&task.task_id);
                return EngineAck::Refused(WireError::from(e));
            }
        };
        let hub = self.clone();
        let task_id = task.task_id;
        crate::spawn::tracked(&self.tracker, async move {
            let result = tokio::select! {
                r = ticket.wait(&hub.tasks) => r,
                _ = hub.shutdown.cancelled() => Err(TaskError::TabLost(client.display())),
            };
            hub.tasks.inbound_done(&task_id);
            hub.engine.send(
                &reply_to,
                Envelope::Result {
                    task_id,
                    result: result.map_err(WireError::from),
                },
            );
        });
        EngineAck::Ok
    }

    /// Something this node sent was not taken.
    fn refused(&self, node: &str, e: Envelope, ack: EngineAck) {
        if ack == EngineAck::NodeGone {
            // Stop picking its tabs now; presence brings them back if the node answers again.
            for c in self.registry.all() {
                if let Some(mut r) = c.remote().filter(|r| r.node == node && r.connected) {
                    r.connected = false;
                    c.set_remote(Some(r));
                }
            }
        }
        match e {
            Envelope::Task { task, .. } => {
                let tab = self
                    .registry
                    .get(&task.to)
                    .map(|c| c.display())
                    .unwrap_or(task.to);
                let err = match ack {
                    EngineAck::Refused(w) => TaskError::from(w),
                    _ => TaskError::TabLost(tab),
                };
                self.tasks.complete_remote(&task.task_id, Err(err));
            }
            Envelope::Frame { to, text, .. } => {
                // Kept here for the tab's return (to this node or through presence again).
                if let Some(c) = self.registry.get(&to) {
                    self.registry.keep_offline(&c, text);
                }
            }
            Envelope::Cancel { .. } | Envelope::Result { .. } => {
                tracing::debug!(node, ?ack, "a cancel or an outcome was not taken");
            }
        }
    }
}
