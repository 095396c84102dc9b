//! The cluster engine: routing and presence between hubs. One trait, two implementations:
//! [`Local`] (one process, the embedded default: there is no other node) and
//! [`nats::Nats`] (`serve --cluster nats://…`). The engine moves *facts* (which tab is
//! where) and *envelopes* (a task, a frame, a cancel or a result for a tab on another node);
//! it knows nothing of the registry or the task queues. What arrives is handed to the hub as
//! [`EngineEvent`]s on one bounded channel (`hub::cluster` applies them).
//!
//! A tab is connected to exactly one node, and that node owns its task queue (one in
//! flight, re-delivery on reconnect). See docs/cluster.md for the delivery semantics.

pub mod nats;
pub mod presence;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

/// The cluster settings live with the hub's other settings; named here too, where the engine
/// is chosen.
pub use crate::config::ClusterConfig;

/// What every node knows about a tab, local or not (the cluster-wide view).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Presence {
    pub id: String,
    /// The node the tab is connected to.
    pub node: String,
    pub site: String,
    pub label: Option<String>,
    pub role: String,
    pub group: Option<String>,
    /// `connected`, or `lost` (inside its grace period; it may come back).
    pub state: String,
    /// `ok`, `silent` (no frame for 2 heartbeats) or `lost`.
    pub health: String,
    /// Tasks in flight plus waiting on its node.
    pub load: usize,
    /// When its current connection was made (ms since the epoch): the newer one wins when
    /// two nodes claim the same client id, the older one keeps a contested label.
    pub since_ms: i64,
}

/// A task for a tab on another node. The prompt is shaped (memory block) by the tab's node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireTask {
    pub to: String,
    pub task_id: String,
    pub prompt: crate::protocol::Prompt,
    pub parent_id: Option<String>,
    pub run_id: Option<String>,
    pub node_id: Option<String>,
    pub priority: i32,
    pub timeout_ms: u64,
    pub retry: u32,
    pub fail_on_loss: bool,
}

/// Why a remote task produced no reply, as it crosses between nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "detail", rename_all = "snake_case")]
pub enum WireError {
    Timeout(String),
    TabFailed { tab: String, reason: String },
    TabLost(String),
    QueueFull(String),
    Cancelled,
}

/// One item between nodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum Envelope {
    /// Type this into tab `to` and send the outcome back to `reply_to`.
    Task { task: WireTask, reply_to: String },
    /// Drop task `task_id` of tab `to` (the caller gave up).
    Cancel { to: String, task_id: String },
    /// An encoded server frame for tab `to`; `durable` frames are kept in the store first.
    Frame {
        to: String,
        text: String,
        durable: bool,
    },
    /// The outcome of a task this node sent.
    Result {
        task_id: String,
        result: Result<String, WireError>,
    },
}

/// The receiving node's answer to one envelope of a batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "a", content = "why", rename_all = "snake_case")]
pub enum EngineAck {
    /// Taken: queued for the tab, routed, or applied. A repeat of a task already taken
    /// (same task id) is acked again and not queued twice.
    Ok,
    /// The tab is not on that node (it moved or left).
    NoSuchTab,
    /// The tab's queue refused the task.
    Refused(WireError),
    /// Never acknowledged: the node is gone or did not answer after the retries.
    NodeGone,
}

/// What the engine hands to the hub.
#[derive(Debug)]
pub enum EngineEvent {
    /// A tab on another node appeared or changed; refreshes its time to live.
    Presence(Presence),
    /// A tab on another node left (closed for good, its node left or went silent). Applies
    /// only while the entry is still `node`'s (a tab that moved is not dropped).
    Gone { id: String, node: String },
    /// Every tab of `node` lives another time to live (its beat came).
    Alive { node: String },
    /// Envelopes from `from`; answer each (in order) through `ack`.
    Batch {
        from: String,
        items: Vec<Envelope>,
        ack: oneshot::Sender<Vec<EngineAck>>,
    },
    /// An event another node put on its bus (JSON), for this node's rules.
    BusEvent(Vec<u8>),
    /// Another node asks this one to run a command.
    Call(RemoteCall),
    /// Envelopes this node sent that were not taken: each with its ack (never `Ok`).
    Refused {
        node: String,
        items: Vec<(Envelope, EngineAck)>,
    },
}

/// Counters a test or benchmark reads (exact message counts).
#[derive(Debug, Default)]
pub struct EngineStats {
    /// Batches this node sent to other nodes (one NATS request each).
    pub batches_sent: AtomicU64,
    /// Envelopes inside them.
    pub envelopes_sent: AtomicU64,
    /// Batches received.
    pub batches_received: AtomicU64,
    /// Presence messages this node published (deltas, beats, snapshot parts).
    pub presence_writes: AtomicU64,
}

/// Routing and presence between hubs.
pub trait Engine: Send + Sync {
    /// This node's name (`local` for the in-process engine).
    fn node(&self) -> &str;
    /// True when other nodes may exist.
    fn clustered(&self) -> bool;
    /// How long a presence lives without a refresh (2.5 heartbeats).
    fn presence_ttl(&self) -> Duration;
    /// Publishes a local tab's presence if it changed (changes are coalesced per node).
    fn announce(&self, presence: Presence);
    /// Removes a local tab's presence (it closed for good).
    fn withdraw(&self, id: &str);
    /// Sends an envelope to `node`; envelopes to one node are batched into one message.
    fn send(&self, node: &str, envelope: Envelope);
    /// While the guard lives, envelopes wait: a fan-out sends one batch per node.
    fn hold(&self) -> Hold;
    /// Message counters.
    fn stats(&self) -> &EngineStats;
    /// Asks `node` to run a command (docs/cluster.md remote execution): `body` is the request
    /// (JSON), each piece of live output the node sends arrives on `output`, the answer (JSON)
    /// is returned; `Err` says why there is none (no such node, no answer within `wait`).
    fn call_node<'a>(
        &'a self,
        node: &'a str,
        _body: Vec<u8>,
        _output: mpsc::Sender<String>,
        _wait: Duration,
    ) -> futures_util::future::BoxFuture<'a, Result<Vec<u8>, String>> {
        Box::pin(async move {
            Err(format!(
                "没有节点 `{node}`：此集线器不在集群中 / no node `{node}`: this hub is not in a cluster"
            ))
        })
    }
    /// Hands an event of this node's bus (JSON) to every other node (docs/cluster.md: events reach
    /// rules on every node); they get it as [`EngineEvent::BusEvent`]. Never waits.
    fn publish_event(&self, _body: Vec<u8>) {}
    /// Leaves the cluster: every node drops this node's tabs now (graceful leave).
    fn leave(&self) -> futures_util::future::BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// A command another node asks this one to run ([`Engine::call_node`]).
#[derive(Debug)]
pub struct RemoteCall {
    /// The node that asks.
    pub from: String,
    /// The request (JSON).
    pub body: Vec<u8>,
    /// Live output for the asker, piece by piece.
    pub output: mpsc::Sender<String>,
    /// The answer (JSON); dropped unanswered, the asker is told the node did not answer.
    pub answer: oneshot::Sender<Vec<u8>>,
}

/// Holds an engine's outbound batches until dropped (see [`Engine::hold`]).
pub struct Hold {
    gate: Option<Arc<Gate>>,
}

impl Hold {
    /// A hold that holds nothing (the in-process engine).
    pub fn none() -> Hold {
        Hold { gate: None }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if let Some(g) = &self.gate {
            if g.holds.fetch_sub(1, Ordering::AcqRel) == 1 {
                g.wake.notify_one();
            }
        }
    }
}

/// Shared by an engine's senders and its flusher: how many holds are out, and the wake-up.
#[derive(Default)]
pub struct Gate {
    holds: AtomicUsize,
    pub wake: tokio::sync::Notify,
}

impl Gate {
    pub fn hold(self: &Arc<Self>) -> Hold {
        self.holds.fetch_add(1, Ordering::AcqRel);
        Hold {
            gate: Some(self.clone()),
        }
    }

    pub fn held(&self) -> bool {
        self.holds.load(Ordering::Acquire) > 0
    }
}

/// The in-process engine: one node, nothing to route elsewhere. Without `--cluster` the hub
/// behaves exactly as it did before there was an engine.
pub struct Local {
    stats: EngineStats,
    events: mpsc::Sender<EngineEvent>,
}

impl Local {
    /// The engine and the (always quiet, unless something is sent to a node that cannot
    /// exist) event stream for the hub.
    pub fn new() -> (Arc<Local>, mpsc::Receiver<EngineEvent>) {
        let (tx, rx) = mpsc::channel(64);
        (
            Arc::new(Local {
                stats: EngineStats::default(),
                events: tx,
            }),
            rx,
        )
    }
}

/// The in-process engine's node name.
pub const LOCAL_NODE: &str = "local";

impl Engine for Local {
    fn node(&self) -> &str {
        LOCAL_NODE
    }

    fn clustered(&self) -> bool {
        false
    }

    fn presence_ttl(&self) -> Duration {
        Duration::MAX
    }

    fn announce(&self, _presence: Presence) {}

    fn withdraw(&self, _id: &str) {}

    fn send(&self, node: &str, envelope: Envelope) {
        // No other node exists: whatever was addressed to one is refused at once.
        let ev = EngineEvent::Refused {
            node: node.to_string(),
            items: vec![(envelope, EngineAck::NodeGone)],
        };
        if self.events.try_send(ev).is_err() {
            tracing::warn!("in-process engine: refusal dropped (channel full)");
        }
    }

    fn hold(&self) -> Hold {
        Hold::none()
    }

    fn stats(&self) -> &EngineStats {
        &self.stats
    }
}

/// Why `--node` was refused.
pub fn check_node_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || name.len() > 64
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(format!(
            "节点名只能用字母、数字、- 和 _ / node name `{name}` must be 1–64 of [A-Za-z0-9_-]"
        ));
    }
    Ok(())
}

/// The engine for a hub's settings: NATS with `cluster`, else in-process.
pub async fn connect(
    cluster: Option<&ClusterConfig>,
    heartbeat: Duration,
) -> anyhow::Result<(Arc<dyn Engine>, mpsc::Receiver<EngineEvent>)> {
    match cluster {
        None => {
            let (e, rx) = Local::new();
            Ok((e, rx))
        }
        Some(c) => {
            let (e, rx) = nats::Nats::connect(c, heartbeat).await?;
            Ok((e, rx))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes_and_acks_round_trip_as_json() {
        let items = vec![
            Envelope::Task {
                task: WireTask {
                    to: "c1".into(),
                    task_id: "t1".into(),
                    prompt: "hi".into(),
                    parent_id: None,
                    run_id: Some("r".into()),
                    node_id: Some("n".into()),
                    priority: 1,
                    timeout_ms: 5,
                    retry: 0,
                    fail_on_loss: true,
                },
                reply_to: "a".into(),
            },
            Envelope::Result {
                task_id: "t1".into(),
                result: Err(WireError::TabFailed {
                    tab: "w1".into(),
                    reason: "x".into(),
                }),
            },
        ];
        let text = serde_json::to_string(&items).unwrap();
        let back: Vec<Envelope> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, items);
        let acks = vec![
            EngineAck::Ok,
            EngineAck::Refused(WireError::QueueFull("w1".into())),
        ];
        let back: Vec<EngineAck> =
            serde_json::from_str(&serde_json::to_string(&acks).unwrap()).unwrap();
        assert_eq!(back, acks);
    }

    #[test]
    fn node_names_are_checked() {
        assert!(check_node_name("a-1_B").is_ok());
        for bad in ["", "a.b", "a b", "节点", &"x".repeat(65)] {
            assert!(check_node_name(bad).is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn the_local_engine_refuses_what_is_sent_to_another_node() {
        let (e, mut rx) = Local::new();
        assert!(!e.clustered());
        e.send(
            "b",
            Envelope::Cancel {
                to: "c".into(),
                task_id: "t".into(),
            },
        );
        match rx.recv().await {
            Some(EngineEvent::Refused { node, items }) => {
                assert_eq!(node, "b");
                assert_eq!(items[0].1, EngineAck::NodeGone);
            }
            other => panic!("{other:?}"),
        }
    }
}
