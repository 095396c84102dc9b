//! The NATS engine (`serve --cluster nats://HOST:PORT --node NAME`), the only module that
//! names `async-nats`. Core NATS only (JetStream is not needed; Debian's nats-server 2.9 works):
//!
//! - **Presence, one stream of deltas per node** (Phoenix-style), on `aicard.presence.<NODE>`:
//!   a node keeps a table of its own tabs and publishes what changed since the last message,
//!   coalesced over a few milliseconds (a connect storm of 1,000 tabs is one message, not
//!   1,000), each message with the node's `epoch` (its start) and a `seq` that grows by one.
//!   Once a heartbeat a node publishes a `beat` carrying its last `seq`: the other nodes keep
//!   its tabs alive for 2.5 heartbeats from its last message, checked every tenth of a
//!   heartbeat, so a killed node's tabs leave within 3 heartbeats. A receiver that misses a
//!   message (a gap in `seq`, a beat ahead of what it applied, a new epoch) asks the node for
//!   a snapshot on
//!   `aicard.sync.<NODE>` and gets it in parts on its own inbox; deltas that come meanwhile
//!   wait and are applied after it. A node that joins says `hello` and every node answers
//!   with a beat, so the newcomer syncs at once. A graceful stop publishes `leave`.
//! - **Routing**: core request/reply on `aicard.node.<NODE>`. Envelopes for one node are
//!   batched (one request per node, at most one in flight per node, split at 512 KiB); the
//!   reply carries one [`EngineAck`] per envelope. No responders = the node is gone; a timeout is
//!   retried with the same batch (a task keeps its id, so the receiver takes it once).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use futures_util::StreamExt;
use tokio::sync::{mpsc, oneshot, Notify};

use super::presence::{self, Change, Msg, Own, PresenceStep, SnapPart, Views};
use super::{
    ClusterConfig, Engine, EngineAck, EngineEvent, EngineStats, Envelope, Gate, Hold, Presence,
    WireError,
};

/// A batch or a presence message is split before it reaches this many bytes (nats-server's
/// max_payload is 1 MiB).
const MAX_BATCH_BYTES: usize = 512 * 1024;
/// Envelopes waiting for one node past this are refused (the node cannot keep up).
const MAX_WAITING_PER_NODE: usize = 100_000;
/// One request's wait for its acks, and how many times a batch is tried.
const ACK_TIMEOUT: Duration = Duration::from_secs(2);
const TRIES: u32 = 3;
/// Changes to this node's tabs are gathered this long into one delta.
const COALESCE: Duration = Duration::from_millis(15);
/// How long a snapshot may take to arrive whole.
const SYNC_TIMEOUT: Duration = Duration::from_secs(5);
/// Events waiting for the hub.
const EVENTS: usize = 4096;

/// A node's snapshot as it arrived (`epoch`, `seq`, tabs), or `None` when it did not.
type Synced = (String, Option<(u64, u64, Vec<Presence>)>);

fn inbox(node: &str) -> String {
    format!("aicard.node.{node}")
}

fn presence_subject(node: &str) -> String {
    format!("aicard.presence.{node}")
}

fn sync_subject(node: &str) -> String {
    format!("aicard.sync.{node}")
}

const PRESENCE_ALL: &str = "aicard.presence.*";
/// Every node's bus events (docs/cluster.md); a node skips its own.
const EVENTS_SUBJECT: &str = "aicard.events";

fn exec_subject(node: &str) -> String {
    format!("aicard.exec.{node}")
}

/// Live output pieces waited for after a remote command's answer arrived first.
const TRAILING_OUTPUT: Duration = Duration::from_secs(2);
const HELLO: &str = "aicard.hello";

/// A hub's link to the cluster.
pub struct Nats {
    node: String,
    ttl: Duration,
    heartbeat: Duration,
    client: async_nats::Client,
    stats: EngineStats,
    /// This node's tabs as published, and what changed since.
    own: Mutex<Own>,
    /// Wakes the presence publisher: `changed` for a delta, `beat_now` for a beat (a hello).
    changed: Notify,
    beat_now: Notify,
    /// Envelopes waiting, per node, and the nodes with a batch in flight.
    outbox: Mutex<Outbox>,
    gate: Arc<Gate>,
    events: mpsc::Sender<EngineEvent>,
}

#[derive(Default)]
struct Outbox {
    waiting: HashMap<String, Vec<Envelope>>,
    in_flight: HashSet<String>,
}

impl Nats {
    /// Connects, subscribes to this node's inbox, the presence streams, snapshot requests and
    /// hellos, says hello, and starts the presence publisher and the batch flusher.
    pub async fn connect(
        cfg: &ClusterConfig,
        heartbeat: Duration,
    ) -> anyhow::Result<(Arc<Nats>, mpsc::Receiver<EngineEvent>)> {
        super::check_node_name(&cfg.node).map_err(anyhow::Error::msg)?;
        let client = async_nats::ConnectOptions::new()
            .name(format!("aicard-{}", cfg.node))
            .connect(cfg.url.as_str())
            .await
            .with_context(|| format!("connecting to NATS at {}", cfg.url))?;
        let ttl = presence::ttl_for(heartbeat);
        let subscribe = |subject: String| {
            let client = client.clone();
            async move {
                client
                    .subscribe(subject.clone())
                    .await
                    .with_context(|| format!("subscribing to {subject}"))
            }
        };
        let sub = subscribe(inbox(&cfg.node)).await?;
        let presence_sub = subscribe(PRESENCE_ALL.to_string()).await?;
        let sync_sub = subscribe(sync_subject(&cfg.node)).await?;
        let hello_sub = subscribe(HELLO.to_string()).await?;
        let events_sub = subscribe(EVENTS_SUBJECT.to_string()).await?;
        let exec_sub = subscribe(exec_subject(&cfg.node)).await?;
        client.flush().await.context("flushing the subscriptions")?;
        let (tx, rx) = mpsc::channel(EVENTS);
        let epoch = crate::store::now_ms() as u64;
        let engine = Arc::new(Nats {
            node: cfg.node.clone(),
            ttl,
            heartbeat,
            client,
            stats: EngineStats::default(),
            own: Mutex::new(Own::new(&cfg.node, epoch)),
            changed: Notify::new(),
            beat_now: Notify::new(),
            outbox: Mutex::new(Outbox::default()),
            gate: Arc::new(Gate::default()),
            events: tx,
        });
        crate::spawn::task(engine.clone().apply_presence(presence_sub));
        crate::spawn::task(engine.clone().publish_presence());
        crate::spawn::task(engine.clone().serve_sync(sync_sub));
        crate::spawn::task(engine.clone().serve_hello(hello_sub));
        crate::spawn::task(engine.clone().serve_inbox(sub));
        crate::spawn::task(engine.clone().flush_loop());
        crate::spawn::task(engine.clone().serve_events(events_sub));
        crate::spawn::task(engine.clone().serve_calls(exec_sub));
        let hello = presence::encode(&Msg::Hello {
            node: cfg.node.clone(),
        });
        engine
            .client
            .publish(HELLO, hello.into())
            .await
            .context("saying hello to the cluster")?;
        tracing::info!(node = %cfg.node, url = %cfg.url, ttl_ms = ttl.as_millis() as u64, "joined the cluster");
        Ok((engine, rx))
    }

    /// Other nodes' bus events, handed to the hub (its own come back too: skipped by
    /// the NATS header naming the node that sent it).
    async fn serve_events(self: Arc<Self>, mut sub: async_nats::Subscriber) {
        while let Some(msg) = sub.next().await {
            let from = msg
                .headers
                .as_ref()
                .and_then(|h| h.get("aicard-node"))
                .map(|v| v.as_str().to_string());
            if from.as_deref() == Some(self.node.as_str()) {
                continue;
            }
            if self
                .events
                .try_send(EngineEvent::BusEvent(msg.payload.to_vec()))
                .is_err()
            {
                tracing::warn!("an event from another node dropped: the hub's queue is full");
            }
        }
    }

    /// Commands other nodes ask this one to run: each is handed to the hub with a channel
    /// for its live output (published to the asker's output inbox) and one for its answer
    /// (the reply).
    async fn serve_calls(self: Arc<Self>, mut sub: async_nats::Subscriber) {
        while let Some(msg) = sub.next().await {
            let Some(reply) = msg.reply.clone() else {
                continue;
            };
            let header = |k: &str| {
                msg.headers
                    .as_ref()
                    .and_then(|h| h.get(k))
                    .map(|v| v.as_str().to_string())
            };
            let (from, inbox) = (
                header("aicard-node").unwrap_or_default(),
                header("aicard-output"),
            );
            let (out_tx, mut out_rx) = mpsc::channel::<String>(64);
            let (answer_tx, answer_rx) = oneshot::channel::<Vec<u8>>();
            let client = self.client.clone();
            crate::spawn::task(async move {
                // Output first, in order, then the answer: the asker counts the pieces.
                while let Some(piece) = out_rx.recv().await {
                    if let Some(inbox) = &inbox {
                        let _ = client
                            .publish(inbox.clone(), piece.into_bytes().into())
                            .await;
                    }
                }
                let answer = answer_rx.await.unwrap_or_else(|_| {
                    br#"{"success":false,"output":"the node dropped the command","pieces":0}"#
                        .to_vec()
                });
                if let Err(e) = client.publish(reply, answer.into()).await {
                    tracing::warn!("a remote command's answer not sent: {e}");
                }
            });
            let call = super::RemoteCall {
                from,
                body: msg.payload.to_vec(),
                output: out_tx,
                answer: answer_tx,
            };
            if self.events.try_send(EngineEvent::Call(call)).is_err() {
                tracing::warn!("a remote command dropped: the hub's queue is full");
            }
        }
    }

    fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn publish(&self, subject: String, body: Vec<u8>) {
        self.stats.presence_writes.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = self.client.publish(subject, body.into()).await {
            // A lost delta shows as a gap to every receiver, which then asks for a snapshot.
            tracing::warn!("presence message not sent: {e}");
        }
    }

    /// Publishes this node's changes (gathered for `COALESCE`) and a beat once a heartbeat.
    async fn publish_presence(self: Arc<Self>) {
        let subject = presence_subject(&self.node);
        let mut tick = tokio::time::interval(self.heartbeat);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let beat = tokio::select! {
                _ = self.changed.notified() => false,
                _ = tick.tick() => true,
                _ = self.beat_now.notified() => true,
            };
            if self.events.is_closed() {
                return;
            }
            if !beat {
                // Let a burst of connects and role changes land in the same delta.
                tokio::time::sleep(COALESCE).await;
            }
            let (deltas, beat_msg) = {
                let mut own = Self::lock(&self.own);
                if own.left {
                    return;
                }
                let deltas = own.take_deltas(MAX_BATCH_BYTES);
                (deltas, beat.then(|| own.beat()))
            };
            for d in deltas {
                self.publish(subject.clone(), d).await;
            }
            if let Some(b) = beat_msg {
                self.publish(subject.clone(), b).await;
            }
        }
    }

    /// Applies the other nodes' presence streams, in order, and the snapshots it asked for;
    /// expires nodes that went silent.
    async fn apply_presence(self: Arc<Self>, mut sub: async_nats::Subscriber) {
        let mut views = Views::new(&self.node, self.ttl);
        let (snap_tx, mut snap_rx) = mpsc::channel::<Synced>(64);
        let mut sweep = tokio::time::interval(presence::sweep_period(self.heartbeat));
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        enum Next {
            Msg(Msg),
            Snap(String, Option<(u64, u64, Vec<Presence>)>),
            Sweep,
        }
        loop {
            let next = tokio::select! {
                msg = sub.next() => {
                    let Some(msg) = msg else { return };
                    match serde_json::from_slice::<Msg>(&msg.payload) {
                        Ok(m) => Next::Msg(m),
                        Err(e) => {
                            tracing::warn!(subject = %msg.subject, "bad presence message: {e}");
                            continue;
                        }
                    }
                }
                snap = snap_rx.recv() => match snap {
                    Some((node, s)) => Next::Snap(node, s),
                    None => return,
                },
                _ = sweep.tick() => Next::Sweep,
            };
            // The clock is read when something happened, not before the wait: a sweep that
            // waited a whole period must not judge silence by the time it started waiting.
            let now = crate::store::now_ms() as u64;
            let step = match next {
                Next::Msg(m) => views.on_msg(m, now),
                Next::Snap(node, Some((epoch, seq, up))) => {
                    views.on_snapshot(&node, epoch, seq, up, now)
                }
                Next::Snap(node, None) => {
                    views.sync_failed(&node);
                    continue;
                }
                Next::Sweep => views.expire(now),
            };
            if !self.hand_over(step, &snap_tx).await {
                return;
            }
        }
    }

    /// Gives a step's changes to the hub and starts the snapshot it asks for. False when the
    /// hub is gone.
    async fn hand_over(self: &Arc<Self>, step: PresenceStep, snaps: &mpsc::Sender<Synced>) -> bool {
        if let Some(node) = step.sync {
            crate::spawn::task(self.clone().fetch_snapshot(node, snaps.clone()));
        }
        for c in step.changes {
            let ev = match c {
                Change::Up(p) => EngineEvent::Presence(p),
                Change::Gone { id, node } => EngineEvent::Gone { id, node },
                Change::Alive(node) => EngineEvent::Alive { node },
            };
            if self.events.send(ev).await.is_err() {
                return false;
            }
        }
        true
    }

    /// Asks `node` for its whole table and collects the parts on a fresh inbox.
    async fn fetch_snapshot(self: Arc<Self>, node: String, out: mpsc::Sender<Synced>) {
        let got = tokio::time::timeout(SYNC_TIMEOUT, self.snapshot_of(&node)).await;
        let result = match got {
            Ok(Ok(s)) => Some(s),
            Ok(Err(e)) => {
                tracing::warn!(node = %node, "presence snapshot failed: {e}");
                None
            }
            Err(_) => {
                tracing::warn!(node = %node, "presence snapshot not whole within {SYNC_TIMEOUT:?}");
                None
            }
        };
        let _ = out.send((node, result)).await;
    }

    async fn snapshot_of(&self, node: &str) -> anyhow::Result<(u64, u64, Vec<Presence>)> {
        let reply = self.client.new_inbox();
        let mut sub = self.client.subscribe(reply.clone()).await?;
        self.client
            .publish_with_reply(sync_subject(node), reply, Vec::new().into())
            .await?;
        let mut parts: Vec<Option<Vec<Presence>>> = Vec::new();
        let mut head: Option<(u64, u64)> = None;
        while let Some(msg) = sub.next().await {
            let part: SnapPart = serde_json::from_slice(&msg.payload)?;
            if head.is_some_and(|h| h != (part.epoch, part.seq)) {
                continue; // a part of an older answer
            }
            head = Some((part.epoch, part.seq));
            if parts.is_empty() {
                parts = vec![None; part.parts.max(1) as usize];
            }
            if let Some(slot) = parts.get_mut(part.part as usize) {
                *slot = Some(part.up);
            }
            if parts.iter().all(Option::is_some) {
                let _ = sub.unsubscribe().await;
                let (epoch, seq) = head.unwrap_or_default();
                let up = parts.into_iter().flatten().flatten().collect();
                return Ok((epoch, seq, up));
            }
        }
        anyhow::bail!("the snapshot stream ended")
    }

    /// Answers snapshot requests with this node's table, in parts.
    async fn serve_sync(self: Arc<Self>, mut sub: async_nats::Subscriber) {
        while let Some(msg) = sub.next().await {
            let Some(reply) = msg.reply else { continue };
            let parts = {
                let own = Self::lock(&self.own);
                if own.left {
                    continue;
                }
                own.snapshot(MAX_BATCH_BYTES)
            };
            for p in parts {
                self.publish(reply.to_string(), p).await;
            }
        }
    }

    /// Another node joined: beat now, so it learns this node's place in the stream at once.
    async fn serve_hello(self: Arc<Self>, mut sub: async_nats::Subscriber) {
        while let Some(msg) = sub.next().await {
            match serde_json::from_slice::<Msg>(&msg.payload) {
                Ok(Msg::Hello { node }) if node != self.node => self.beat_now.notify_one(),
                _ => {}
            }
        }
    }

    /// Answers batches sent to this node, in the order they came.
    async fn serve_inbox(self: Arc<Self>, mut sub: async_nats::Subscriber) {
        while let Some(msg) = sub.next().await {
            self.stats.batches_received.fetch_add(1, Ordering::Relaxed);
            let Some(reply) = msg.reply.clone() else {
                continue;
            };
            let (from, items) = match decode_batch(&msg.payload) {
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!("bad batch on {}: {e}", msg.subject);
                    continue;
                }
            };
            let n = items.len();
            let (tx, rx) = oneshot::channel();
            let ev = EngineEvent::Batch {
                from,
                items,
                ack: tx,
            };
            if self.events.send(ev).await.is_err() {
                return;
            }
            // The hub applies a batch without waiting on anything slow; if it cannot answer
            // within the sender's timeout the sender retries, and repeats are taken once.
            let acks = match tokio::time::timeout(ACK_TIMEOUT, rx).await {
                Ok(Ok(acks)) if acks.len() == n => acks,
                _ => continue,
            };
            match serde_json::to_vec(&acks) {
                Ok(body) => {
                    if let Err(e) = self.client.publish(reply, body.into()).await {
                        tracing::warn!("ack not sent: {e}");
                    }
                }
                Err(e) => tracing::warn!("ack not encoded: {e}"),
            }
        }
    }

    /// Sends what waits, one batch per node at a time, whenever no hold is out.
    async fn flush_loop(self: Arc<Self>) {
        loop {
            self.gate.wake.notified().await;
            if self.gate.held() {
                continue; // the last hold to go wakes us again
            }
            let ready: Vec<(String, Vec<Envelope>)> = {
                let mut ob = Self::lock(&self.outbox);
                let nodes: Vec<String> = ob
                    .waiting
                    .keys()
                    .filter(|n| !ob.in_flight.contains(*n))
                    .cloned()
                    .collect();
                nodes
                    .into_iter()
                    .filter_map(|n| {
                        let items = ob.waiting.remove(&n)?;
                        ob.in_flight.insert(n.clone());
                        Some((n, items))
                    })
                    .collect()
            };
            for (node, items) in ready {
                crate::spawn::task(self.clone().deliver(node, items));
            }
        }
    }

    /// Sends `items` to `node` in as few requests as fit, then lets the next batch go.
    async fn deliver(self: Arc<Self>, node: String, items: Vec<Envelope>) {
        for chunk in split(items) {
            self.deliver_chunk(&node, chunk).await;
        }
        let more = {
            let mut ob = Self::lock(&self.outbox);
            ob.in_flight.remove(&node);
            ob.waiting.contains_key(&node)
        };
        if more {
            self.gate.wake.notify_one();
        }
    }

    async fn deliver_chunk(&self, node: &str, items: Vec<(Envelope, String)>) {
        let body = encode_batch(&self.node, &items);
        let mut outcome = Err(EngineAck::NodeGone);
        for attempt in 1..=TRIES {
            self.stats.batches_sent.fetch_add(1, Ordering::Relaxed);
            self.stats
                .envelopes_sent
                .fetch_add(items.len() as u64, Ordering::Relaxed);
            let req = async_nats::Request::new()
                .payload(body.clone().into())
                .timeout(Some(ACK_TIMEOUT));
            match self.client.send_request(inbox(node), req).await {
                Ok(msg) => {
                    outcome = serde_json::from_slice::<Vec<EngineAck>>(&msg.payload)
                        .map_err(|_| EngineAck::NodeGone);
                    break;
                }
                Err(e) if e.kind() == async_nats::RequestErrorKind::NoResponders => {
                    tracing::info!(node, "no responders: the node is gone");
                    break;
                }
                Err(e) => {
                    tracing::warn!(node, attempt, "batch not acknowledged: {e}");
                }
            }
        }
        let refused: Vec<(Envelope, EngineAck)> = match outcome {
            Ok(acks) if acks.len() == items.len() => items
                .into_iter()
                .zip(acks)
                .filter(|(_, a)| *a != EngineAck::Ok)
                .map(|((e, _), a)| (e, a))
                .collect(),
            _ => items
                .into_iter()
                .map(|(e, _)| (e, EngineAck::NodeGone))
                .collect(),
        };
        if !refused.is_empty() {
            let ev = EngineEvent::Refused {
                node: node.to_string(),
                items: refused,
            };
            let _ = self.events.send(ev).await;
        }
    }
}

/// `{"from": NODE, "items": [...]}` from envelopes already encoded one by one.
fn encode_batch(from: &str, items: &[(Envelope, String)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + items.iter().map(|(_, t)| t.len() + 1).sum::<usize>());
    out.extend_from_slice(b"{\"from\":");
    out.extend_from_slice(serde_json::Value::from(from).to_string().as_bytes());
    out.extend_from_slice(b",\"items\":[");
    for (i, (_, t)) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(t.as_bytes());
    }
    out.extend_from_slice(b"]}");
    out
}

#[derive(serde::Deserialize)]
struct Batch {
    from: String,
    items: Vec<Envelope>,
}

fn decode_batch(body: &[u8]) -> Result<(String, Vec<Envelope>), serde_json::Error> {
    let b: Batch = serde_json::from_slice(body)?;
    Ok((b.from, b.items))
}

/// Encodes each envelope once and cuts the list where a batch would pass `MAX_BATCH_BYTES`.
fn split(items: Vec<Envelope>) -> Vec<Vec<(Envelope, String)>> {
    let mut out: Vec<Vec<(Envelope, String)>> = vec![Vec::new()];
    let mut bytes = 0;
    for e in items {
        let text = match serde_json::to_string(&e) {
            Ok(t) => t,
            Err(err) => {
                tracing::error!("envelope not encoded: {err}");
                continue;
            }
        };
        if bytes + text.len() > MAX_BATCH_BYTES && !out.last().is_some_and(|v| v.is_empty()) {
            out.push(Vec::new());
            bytes = 0;
        }
        bytes += text.len() + 1;
        if let Some(last) = out.last_mut() {
            last.push((e, text));
        }
    }
    out.retain(|v| !v.is_empty());
    out
}

impl Engine for Nats {
    fn node(&self) -> &str {
        &self.node
    }

    fn clustered(&self) -> bool {
        true
    }

    fn presence_ttl(&self) -> Duration {
        self.ttl
    }

    fn announce(&self, presence: Presence) {
        if Self::lock(&self.own).announce(presence) {
            self.changed.notify_one();
        }
    }

    fn withdraw(&self, id: &str) {
        if Self::lock(&self.own).withdraw(id) {
            self.changed.notify_one();
        }
    }

    fn send(&self, node: &str, envelope: Envelope) {
        let mut ob = Self::lock(&self.outbox);
        let q = ob.waiting.entry(node.to_string()).or_default();
        if q.len() >= MAX_WAITING_PER_NODE {
            drop(ob);
            let ev = EngineEvent::Refused {
                node: node.to_string(),
                items: vec![(
                    envelope,
                    EngineAck::Refused(WireError::QueueFull(format!("node {node}"))),
                )],
            };
            if self.events.try_send(ev).is_err() {
                tracing::warn!(node, "refusal dropped: the hub's event queue is full");
            }
            return;
        }
        q.push(envelope);
        drop(ob);
        self.gate.wake.notify_one();
    }

    fn hold(&self) -> Hold {
        self.gate.hold()
    }

    fn stats(&self) -> &EngineStats {
        &self.stats
    }

    fn call_node<'a>(
        &'a self,
        node: &'a str,
        body: Vec<u8>,
        output: mpsc::Sender<String>,
        wait: Duration,
    ) -> futures_util::future::BoxFuture<'a, Result<Vec<u8>, String>> {
        Box::pin(async move {
            let inbox = self.client.new_inbox();
            let mut pieces = self
                .client
                .subscribe(inbox.clone())
                .await
                .map_err(|e| format!("NATS: {e}"))?;
            let forwarded = Arc::new(std::sync::atomic::AtomicU64::new(0));
            let done = Arc::new(Notify::new());
            let (count, woken) = (forwarded.clone(), done.clone());
            let forward = crate::spawn::task(async move {
                while let Some(msg) = pieces.next().await {
                    let _ = output
                        .send(String::from_utf8_lossy(&msg.payload).into_owned())
                        .await;
                    count.fetch_add(1, Ordering::Relaxed);
                    woken.notify_waiters();
                }
            });
            let mut headers = async_nats::HeaderMap::new();
            headers.insert("aicard-node", self.node.as_str());
            headers.insert("aicard-output", inbox.as_str());
            let request = async_nats::client::Request::new()
                .payload(body.into())
                .headers(headers)
                .timeout(Some(wait));
            let answer = self
                .client
                .send_request(exec_subject(node), request)
                .await
                .map_err(|e| match e.kind() {
                    async_nats::client::RequestErrorKind::NoResponders => format!(
                        "没有节点 `{node}` / no node `{node}` in the cluster"
                    ),
                    async_nats::client::RequestErrorKind::TimedOut => format!(
                        "节点 `{node}` 没有在 {} 秒内回答 / node `{node}` did not answer within {} s",
                        wait.as_secs(),
                        wait.as_secs()
                    ),
                    _ => format!("NATS: {e}"),
                });
            // The pieces the node sent before its answer may still be on their way.
            if let Ok(msg) = &answer {
                let want = serde_json::from_slice::<serde_json::Value>(&msg.payload)
                    .ok()
                    .and_then(|v| v["pieces"].as_u64())
                    .unwrap_or(0);
                let _ = tokio::time::timeout(TRAILING_OUTPUT, async {
                    loop {
                        let notified = done.notified();
                        if forwarded.load(Ordering::Relaxed) >= want {
                            return;
                        }
                        notified.await;
                    }
                })
                .await;
            }
            forward.abort();
            answer.map(|m| m.payload.to_vec())
        })
    }

    fn publish_event(&self, body: Vec<u8>) {
        let client = self.client.clone();
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("aicard-node", self.node.as_str());
        crate::spawn::task(async move {
            if let Err(e) = client
                .publish_with_headers(EVENTS_SUBJECT, headers, body.into())
                .await
            {
                tracing::warn!("an event not sent to the cluster: {e}");
            }
        });
    }

    fn leave(&self) -> futures_util::future::BoxFuture<'_, ()> {
        Box::pin(async move {
            let (msg, n) = {
                let mut own = Self::lock(&self.own);
                own.left = true;
                (own.leave(), own.len())
            };
            self.publish(presence_subject(&self.node), msg).await;
            if tokio::time::timeout(Duration::from_secs(3), self.client.flush())
                .await
                .is_err()
            {
                tracing::warn!("leaving the cluster: NATS did not take the leave in 3 s");
            }
            tracing::info!(node = %self.node, tabs = n, "left the cluster");
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_split_before_it_passes_the_payload_limit() {
        let big = "x".repeat(200 * 1024);
        let items: Vec<Envelope> = (0..5)
            .map(|i| Envelope::Frame {
                to: format!("c{i}"),
                text: big.clone(),
                durable: false,
            })
            .collect();
        let chunks = split(items);
        assert_eq!(chunks.iter().map(Vec::len).collect::<Vec<_>>(), [2, 2, 1]);
        let body = encode_batch("a", &chunks[0]);
        let (from, back) = decode_batch(&body).unwrap();
        assert_eq!(from, "a");
        assert_eq!(back.len(), 2);
        assert!(body.len() < 1024 * 1024);
    }
}
