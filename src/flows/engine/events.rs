//! The engine's vocabulary with the hub's runner: journal events in (persisted as JSON, folded
//! into the run state) and actions out (side effects the runner performs).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One fact about a run, appended to the run's journal. The run state is a pure fold over
/// these events: replaying the same journal rebuilds the same state.
///
/// Events come from two sides: the engine decides some (returned as [`Effect::Record`],
/// already applied) and the runner reports the outside world (attempt results, pause, stop).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum JournalEvent {
    /// The run began. Always the first event.
    RunStarted {
        /// The run's id (part of every idempotency key).
        run_id: String,
        /// The flow's name.
        flow: String,
        /// [`crate::flows::engine::flow_hash`] of the flow the run started with.
        flow_hash: String,
        /// Every input's value (defaults filled in).
        inputs: BTreeMap<String, String>,
        /// Seed of the retry jitter.
        seed: u64,
        /// `--from-node ID`: nodes upstream of it count as completed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from_node: Option<String>,
        /// Outputs of those upstream nodes from a previous run (missing ones are empty).
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        prior_outputs: BTreeMap<String, String>,
        /// When (ms since the epoch).
        at_ms: u64,
    },
    /// The node's dependencies are done and its `when` held: its items are fixed.
    NodeQueued {
        /// Node id.
        node: String,
        /// The item labels, in item order.
        items: Vec<String>,
        /// When.
        at_ms: u64,
    },
    /// An attempt is about to be sent: recorded *before* the tab is touched.
    AttemptStarted {
        /// Node id.
        node: String,
        /// Item index (the judge of `aggregate: judge` is item `items.len()`).
        item: usize,
        /// Attempt number, from 1.
        attempt: u32,
        /// `run_id/node/item/attempt`.
        idempotency_key: String,
        /// When.
        at_ms: u64,
    },
    /// The tab confirmed the prompt was submitted (runner-reported).
    PromptSent {
        /// Node id.
        node: String,
        /// Item index.
        item: usize,
        /// Attempt number.
        attempt: u32,
        /// The tab (client id or label) that took it.
        client: String,
    },
    /// An item's reply (or command output) arrived (runner-reported).
    ItemOutput {
        /// Node id.
        node: String,
        /// Item index.
        item: usize,
        /// Attempt number.
        attempt: u32,
        /// The tab's label or client id (used in `concat` headers); empty for commands.
        client: String,
        /// The full reply.
        text: String,
        /// When (ms since the epoch) the tab streamed the reply's first chunk; absent when it
        /// streamed none, for commands, and in journals written before it was recorded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        first_chunk_at_ms: Option<u64>,
    },
    /// An attempt failed (runner-reported: timeout, tab gone, rate limit, command error).
    ItemFailed {
        /// Node id.
        node: String,
        /// Item index.
        item: usize,
        /// Attempt number.
        attempt: u32,
        /// What went wrong.
        error: String,
        /// False for errors a retry cannot fix.
        retryable: bool,
        /// When (the retry delay counts from here).
        at_ms: u64,
    },
    /// The node will not run (`when` was false, or its dependencies did not complete).
    NodeSkipped {
        /// Node id.
        node: String,
        /// Why.
        reason: String,
    },
    /// The node finished; its output is published to later nodes.
    NodeCompleted {
        /// Node id.
        node: String,
        /// The aggregated output.
        output: String,
    },
    /// The node failed after its retries.
    NodeFailed {
        /// Node id.
        node: String,
        /// Why.
        error: String,
    },
    /// No new attempts until resumed (runner-reported).
    RunPaused {
        /// When.
        at_ms: u64,
    },
    /// Attempts may start again (runner-reported).
    RunResumed {
        /// When.
        at_ms: u64,
    },
    /// The run is stopped for good (runner-reported); unfinished nodes are cancelled.
    RunStopped {
        /// Why (who stopped it).
        reason: String,
    },
    /// Every node finished; the run's result.
    RunCompleted {
        /// The final output.
        output: String,
    },
    /// The run failed.
    RunFailed {
        /// Why.
        error: String,
    },
}

/// Where a prompt goes; the runner resolves it to a connected tab.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum PromptTarget {
    /// Any tab with this role (`role:worker`, `role:foreman`).
    Role(String),
    /// A site (`deepseek`), a tab label (`sim-a`) or a client id.
    Name(String),
}

impl PromptTarget {
    /// Parses a `to:` entry (`role:worker`, `deepseek`, …). `master` is handled by the caller.
    pub fn parse(text: &str) -> PromptTarget {
        match text.trim().strip_prefix("role:") {
            Some(role) => PromptTarget::Role(role.trim().to_string()),
            None => PromptTarget::Name(text.trim().to_string()),
        }
    }
}

impl std::fmt::Display for PromptTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PromptTarget::Role(r) => write!(f, "role:{r}"),
            PromptTarget::Name(n) => f.write_str(n),
        }
    }
}

/// Resolved timeouts of a node, in milliseconds (`None`: the runner's default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Timeouts {
    /// Waiting for a free tab.
    pub queue_ms: Option<u64>,
    /// One attempt.
    pub attempt_ms: Option<u64>,
    /// No new tokens for this long.
    pub idle_ms: Option<u64>,
    /// The whole node (the engine enforces it too).
    pub deadline_ms: Option<u64>,
}

/// "Send this prompt to a tab": one attempt of one item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dispatch {
    /// Node id.
    pub node: String,
    /// Item index.
    pub item: usize,
    /// How many items the node has: items of one node should go to distinct tabs.
    pub items: usize,
    /// A short label of the item (target, `worker 2`, the for_each value).
    pub label: String,
    /// Attempt number, from 1.
    pub attempt: u32,
    /// `run_id/node/item/attempt`; the same after a replay.
    pub idempotency_key: String,
    /// The rendered prompt.
    pub prompt: String,
    /// Where it goes.
    pub target: PromptTarget,
    /// Tab labels or client ids that already failed this item (prefer another tab).
    pub avoid: Vec<String>,
    /// Timeouts.
    pub timeout: Timeouts,
    /// Names in the files folder the tab attaches first (the node's `files:`, rendered).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
}

/// "Run this hub command": one attempt of a command node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandCall {
    /// Node id.
    pub node: String,
    /// Item index (0).
    pub item: usize,
    /// Attempt number.
    pub attempt: u32,
    /// `run_id/node/item/attempt`.
    pub idempotency_key: String,
    /// The command as written, without a `?<` … `>!` wrapper; `$x` / `${x}` / `${n.output}`
    /// are left for the executor, which substitutes them as quoted arguments.
    pub command: String,
    /// The values of the variables the command references, keyed as written (`x`, `n.output`).
    pub vars: BTreeMap<String, String>,
    /// Timeouts.
    pub timeout: Timeouts,
}

/// A side effect the runner performs, in the order given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Effect {
    /// Append this event to the journal before doing the actions after it. It is already
    /// applied to the state: do not `apply` it again (doing so is harmless, though).
    Record(JournalEvent),
    /// Send a prompt to a tab; report `PromptSent`, then `ItemOutput` or `ItemFailed`.
    Dispatch(Dispatch),
    /// Run a hub command; report `ItemOutput` or `ItemFailed`.
    RunCommand(CommandCall),
    /// Put text into the master tab (a `to: master` node, or the final result).
    Deliver {
        /// The node that delivers, or `None` for the run's final result.
        node: Option<String>,
        /// The text.
        text: String,
    },
    /// Abandon an attempt in flight (stop the tab's generation, drop the queued task).
    Cancel {
        /// Node id.
        node: String,
        /// Item index.
        item: usize,
        /// `run_id/node/item/attempt`.
        idempotency_key: String,
    },
    /// Nothing to do before this time unless an event arrives: call `next_actions` again then.
    Wait {
        /// ms since the epoch.
        until_ms: u64,
    },
    /// The run completed with this output.
    Complete {
        /// The final output.
        output: String,
    },
    /// The run failed.
    Fail {
        /// Why.
        error: String,
    },
}

/// `run_id/node/item/attempt`.
pub fn idempotency_key(run_id: &str, node: &str, item: usize, attempt: u32) -> String {
    format!("{run_id}/{node}/{item}/{attempt}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_as_tagged_json() {
        let ev = JournalEvent::ItemOutput {
            node: "a".into(),
            item: 1,
            attempt: 2,
            client: "sim-a".into(),
            text: "hi {{ x }} ?<echo>!".into(),
            first_chunk_at_ms: Some(1_700_000_000_123),
        };
        let json = serde_json::to_string(&ev).expect("json");
        assert!(json.starts_with("{\"type\":\"item_output\""), "{json}");
        assert!(
            json.contains("\"first_chunk_at_ms\":1700000000123"),
            "{json}"
        );
        let back: JournalEvent = serde_json::from_str(&json).expect("parse");
        assert_eq!(back, ev);
    }

    #[test]
    fn an_output_without_a_first_chunk_time_reads_and_writes_as_before() {
        // As journals written before the first chunk was recorded have it.
        let old =
            r#"{"type":"item_output","node":"a","item":0,"attempt":1,"client":"w1","text":"hi"}"#;
        let ev: JournalEvent = serde_json::from_str(old).expect("an old line parses");
        assert_eq!(
            ev,
            JournalEvent::ItemOutput {
                node: "a".into(),
                item: 0,
                attempt: 1,
                client: "w1".into(),
                text: "hi".into(),
                first_chunk_at_ms: None,
            }
        );
        assert_eq!(serde_json::to_string(&ev).expect("json"), old);
    }

    #[test]
    fn targets_parse_roles_and_names() {
        assert_eq!(
            PromptTarget::parse("role:foreman"),
            PromptTarget::Role("foreman".into())
        );
        assert_eq!(
            PromptTarget::parse("sim-a"),
            PromptTarget::Name("sim-a".into())
        );
        assert_eq!(
            PromptTarget::Role("worker".into()).to_string(),
            "role:worker"
        );
    }
}
