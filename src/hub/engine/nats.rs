//! The NATS engine (`serve --cluster nats://HOST:PORT --node NAME`), the only module that
//! names `async-nats`. Works with what Debian ships (nats-server 2.9.10 with `-js`):
//!
//! - **Presence**: a JetStream key-value bucket `aicard_tabs` (key = client id, value = a
//!   [`Presence`]), in memory, `max_age` = 3 heartbeats. async-nats' `create_key_value` cannot
//!   talk to 2.9 (shared/reference/integrations.md §d.3), so the bucket's stream `KV_aicard_tabs`
//!   is created here by hand and opened with `get_key_value`. Every node refreshes its tabs
//!   once a heartbeat and watches the bucket; 2.9 says nothing when an entry ages out, so each
//!   node also expires what it was not told again within the time to live (`hub::cluster`).
//! - **Routing**: core request/reply on `aicard.node.<NODE>`. Envelopes for one node are
//!   batched (one request per node, at most one in flight per node, split at 512 KiB); the
//!   reply carries one [`Ack`] per envelope. No responders = the node is gone; a timeout is
//!   retried with the same batch (a task keeps its id, so the receiver takes it once).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use async_nats::jetstream::{self, kv};
use futures_util::StreamExt;
use tokio::sync::{mpsc, oneshot, Notify};

use super::{
    Ack, ClusterConfig, Engine, EngineEvent, EngineStats, Envelope, Gate, Hold, Presence, WireError,
};

/// The presence bucket.
const BUCKET: &str = "aicard_tabs";
/// A batch is split before it reaches this many bytes (nats-server's max_payload is 1 MiB).
const MAX_BATCH_BYTES: usize = 512 * 1024;
/// Envelopes waiting for one node past this are refused (the node cannot keep up).
const MAX_WAITING_PER_NODE: usize = 100_000;
/// One request's wait for its acks, and how many times a batch is tried.
const ACK_TIMEOUT: Duration = Duration::from_secs(2);
const TRIES: u32 = 3;
/// Presence writes in flight at once.
const PUT_CONCURRENCY: usize = 64;
/// Events waiting for the hub.
const EVENTS: usize = 4096;

fn inbox(node: &str) -> String {
    format!("aicard.node.{node}")
}

/// A hub's link to the cluster.
pub struct Nats {
    node: String,
    ttl: Duration,
    client: async_nats::Client,
    kv: kv::Store,
    stats: EngineStats,
    /// Presence writes not made yet, by client id (`None` = delete); a tab that changes twice
    /// before the writer runs is written once.
    dirty: Mutex<HashMap<String, Option<Presence>>>,
    dirty_wake: Notify,
    /// Client ids whose presence this node wrote and did not withdraw (for a graceful leave).
    mine: Mutex<HashSet<String>>,
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
    /// Connects, makes sure the presence bucket exists, subscribes to this node's inbox and
    /// starts the presence watcher, the presence writer and the batch flusher.
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
        let ttl = heartbeat * 3;
        let js = jetstream::new(client.clone());
        let kv = presence_bucket(&js, ttl).await?;
        let sub = client
            .subscribe(inbox(&cfg.node))
            .await
            .with_context(|| format!("subscribing to {}", inbox(&cfg.node)))?;
        client.flush().await.context("flushing the subscription")?;
        let (tx, rx) = mpsc::channel(EVENTS);
        let engine = Arc::new(Nats {
            node: cfg.node.clone(),
            ttl,
            client,
            kv: kv.clone(),
            stats: EngineStats::default(),
            dirty: Mutex::new(HashMap::new()),
            dirty_wake: Notify::new(),
            mine: Mutex::new(HashSet::new()),
            outbox: Mutex::new(Outbox::default()),
            gate: Arc::new(Gate::default()),
            events: tx,
        });
        let watch = kv
            .watch_with_history(">")
            .await
            .context("watching the presence bucket")?;
        tokio::spawn(engine.clone().watch_presence(kv.clone(), watch));
        tokio::spawn(engine.clone().write_presence(kv));
        tokio::spawn(engine.clone().serve_inbox(sub));
        tokio::spawn(engine.clone().flush_loop());
        tracing::info!(node = %cfg.node, url = %cfg.url, ttl_ms = ttl.as_millis() as u64, "joined the cluster");
        Ok((engine, rx))
    }

    fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies the bucket's changes, re-opening the watch if it ends (NATS reconnect).
    async fn watch_presence(self: Arc<Self>, kv: kv::Store, mut watch: kv::Watch) {
        loop {
            while let Some(entry) = watch.next().await {
                let entry = match entry {
                    Ok(e) => e,
                    Err(e) => {
                        tracing::warn!("presence watch: {e}");
                        break;
                    }
                };
                let ev = match entry.operation {
                    kv::Operation::Put => match serde_json::from_slice::<Presence>(&entry.value) {
                        Ok(p) => EngineEvent::Presence(p),
                        Err(e) => {
                            tracing::warn!(key = %entry.key, "bad presence entry: {e}");
                            continue;
                        }
                    },
                    kv::Operation::Delete | kv::Operation::Purge => EngineEvent::Gone {
                        id: entry.key.clone(),
                        node: String::new(),
                    },
                };
                if self.events.send(ev).await.is_err() {
                    return; // the hub is gone
                }
            }
            if self.events.is_closed() {
                return;
            }
            // Re-open; entries written meanwhile come with the history.
            loop {
                match kv.watch_with_history(">").await {
                    Ok(w) => {
                        watch = w;
                        break;
                    }
                    Err(e) => {
                        tracing::warn!("presence watch not re-opened: {e}");
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                }
            }
        }
    }

    /// Makes the presence writes that `announce` and `withdraw` asked for.
    async fn write_presence(self: Arc<Self>, kv: kv::Store) {
        loop {
            let batch: Vec<(String, Option<Presence>)> = {
                let mut d = Self::lock(&self.dirty);
                d.drain().collect()
            };
            if batch.is_empty() {
                if self.events.is_closed() {
                    return;
                }
                self.dirty_wake.notified().await;
                continue;
            }
            let kv = &kv;
            let this = &self;
            let failed = std::sync::atomic::AtomicUsize::new(0);
            let failed_ref = &failed;
            futures_util::stream::iter(batch)
                .for_each_concurrent(PUT_CONCURRENCY, |(id, p)| async move {
                    this.stats.presence_writes.fetch_add(1, Ordering::Relaxed);
                    let res = match &p {
                        Some(pr) => match serde_json::to_vec(pr) {
                            Ok(v) => kv
                                .put(&id, v.into())
                                .await
                                .map(|_| ())
                                .map_err(|e| e.to_string()),
                            Err(e) => Err(e.to_string()),
                        },
                        None => kv.delete(&id).await.map_err(|e| e.to_string()),
                    };
                    if let Err(e) = res {
                        tracing::debug!(client = %id, "presence write failed, will retry: {e}");
                        failed_ref.fetch_add(1, Ordering::Relaxed);
                        // Tried again, unless a newer write for the tab is already waiting.
                        Self::lock(&this.dirty).entry(id).or_insert(p);
                    }
                })
                .await;
            let failed = failed.into_inner();
            if failed > 0 {
                tracing::warn!(
                    failed,
                    "presence writes failed (NATS slow or away); retrying"
                );
                // Back off before the retry rather than hammer a server that is behind.
                tokio::time::sleep(Duration::from_millis(250)).await;
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
                tokio::spawn(self.clone().deliver(node, items));
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
        let mut outcome = Err(Ack::NodeGone);
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
                    outcome =
                        serde_json::from_slice::<Vec<Ack>>(&msg.payload).map_err(|_| Ack::NodeGone);
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
        let refused: Vec<(Envelope, Ack)> = match outcome {
            Ok(acks) if acks.len() == items.len() => items
                .into_iter()
                .zip(acks)
                .filter(|(_, a)| *a != Ack::Ok)
                .map(|((e, _), a)| (e, a))
                .collect(),
            _ => items.into_iter().map(|(e, _)| (e, Ack::NodeGone)).collect(),
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

/// The presence bucket's stream, made by hand (see the module doc), then opened as a bucket.
async fn presence_bucket(js: &jetstream::Context, ttl: Duration) -> anyhow::Result<kv::Store> {
    let cfg = jetstream::stream::Config {
        name: format!("KV_{BUCKET}"),
        subjects: vec![format!("$KV.{BUCKET}.>")],
        max_messages_per_subject: 1,
        discard: jetstream::stream::DiscardPolicy::New,
        allow_rollup: true,
        deny_delete: true,
        allow_direct: true,
        max_age: ttl,
        storage: jetstream::stream::StorageType::Memory,
        num_replicas: 1,
        ..Default::default()
    };
    js.get_or_create_stream(cfg)
        .await
        .context("creating the presence stream (is JetStream on? start nats-server with -js)")?;
    js.get_key_value(BUCKET)
        .await
        .context("opening the presence bucket")
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
        Self::lock(&self.mine).insert(presence.id.clone());
        Self::lock(&self.dirty).insert(presence.id.clone(), Some(presence));
        self.dirty_wake.notify_one();
    }

    fn withdraw(&self, id: &str) {
        Self::lock(&self.mine).remove(id);
        Self::lock(&self.dirty).insert(id.to_string(), None);
        self.dirty_wake.notify_one();
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
                    Ack::Refused(WireError::QueueFull(format!("node {node}"))),
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

    fn leave(&self) -> futures_util::future::BoxFuture<'_, ()> {
        Box::pin(async move {
            let ids: Vec<String> = Self::lock(&self.mine).drain().collect();
            let n = ids.len();
            let kv = &self.kv;
            let deletes = futures_util::stream::iter(ids).for_each_concurrent(
                PUT_CONCURRENCY,
                |id| async move {
                    if let Err(e) = kv.delete(&id).await {
                        tracing::debug!(client = %id, "presence not withdrawn: {e}");
                    }
                },
            );
            if tokio::time::timeout(Duration::from_secs(3), deletes)
                .await
                .is_err()
            {
                tracing::warn!("leaving the cluster: not every presence was withdrawn in 3 s");
            }
            let _ = self.client.flush().await;
            tracing::info!(node = %self.node, withdrawn = n, "left the cluster");
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
