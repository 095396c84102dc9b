//! Every API prompt is journaled like a one-node run (flow [`API_FLOW`], node `ask`), so the
//! store, `manager status RUN` and the dashboard show who asked which tab what, and what came
//! back. Such a run is never resumed after a restart: nobody waits for its answer any more,
//! so the runner marks it interrupted instead.

use std::collections::BTreeMap;

use super::ApiDoor;
use crate::flows::engine::{flow_hash, JournalEvent};
use crate::store::{now_ms, RunRecord, Store};

/// The flow name of API runs.
pub use crate::runner::API_FLOW;
const NODE: &str = "ask";

/// The one-node flow an API run records, so it can be rebuilt and shown like any run.
fn flow_source(target: &str) -> String {
    let target = serde_json::to_string(target).unwrap_or_else(|_| "\"\"".into());
    format!(
        "name: {API_FLOW}\ndescription: one prompt through the OpenAI-compatible API\n\
         inputs: {{prompt: {{default: \"\"}}, model: {{default: \"\"}}}}\n\
         nodes:\n  - id: {NODE}\n    to: {target}\n    prompt: \"$prompt\"\n"
    )
}

/// The journal of one API prompt; every write is best effort (a full disk must not fail the
/// answer the client is waiting for), and logged when it fails.
pub struct ApiRun {
    store: Store,
    run_id: String,
    target: String,
}

impl ApiRun {
    /// Records the run as started and the prompt as sent to the tab `client_id`, shown as
    /// `shown` (its label, else its id). The recorded flow names the tab by its id, which is
    /// always a valid target.
    pub fn begin(
        door: &ApiDoor,
        run_id: &str,
        model: &str,
        (client_id, shown): (&str, &str),
        prompt: &str,
    ) -> ApiRun {
        let target = shown;
        let run = ApiRun {
            store: door.store.clone(),
            run_id: run_id.to_string(),
            target: target.to_string(),
        };
        let source = flow_source(client_id);
        let hash = crate::flows::load_str(API_FLOW, &source)
            .map(|f| flow_hash(&f))
            .unwrap_or_default();
        let now = now_ms();
        let inputs = BTreeMap::from([
            ("prompt".to_string(), prompt.to_string()),
            ("model".to_string(), model.to_string()),
        ]);
        let started = JournalEvent::RunStarted {
            run_id: run_id.to_string(),
            flow: API_FLOW.to_string(),
            flow_hash: hash.clone(),
            inputs,
            seed: 0,
            from_node: None,
            prior_outputs: BTreeMap::new(),
            at_ms: now as u64,
        };
        let record = RunRecord {
            run_id: run_id.to_string(),
            flow: API_FLOW.to_string(),
            flow_hash: hash,
            flow_source: source,
            master: None,
            state: "running".into(),
            started_ms: now,
            updated_ms: now,
        };
        if let Err(e) = run.store.insert_run(&record, &json(&started)) {
            tracing::warn!(run = run_id, "cannot journal the API prompt: {e}");
        }
        run.append(&JournalEvent::NodeQueued {
            node: NODE.into(),
            items: vec![target.to_string()],
            at_ms: now as u64,
        });
        run.append(&JournalEvent::AttemptStarted {
            node: NODE.into(),
            item: 0,
            attempt: 1,
            idempotency_key: format!("{run_id}/{NODE}/0/1"),
            at_ms: now as u64,
        });
        run.append(&JournalEvent::PromptSent {
            node: NODE.into(),
            item: 0,
            attempt: 1,
            client: target.to_string(),
        });
        run
    }

    /// The tab answered.
    pub fn completed(&self, text: &str) {
        self.append(&JournalEvent::ItemOutput {
            node: NODE.into(),
            item: 0,
            attempt: 1,
            client: self.target.clone(),
            text: text.to_string(),
            // Not carried from the `/v1` and MCP prompts yet.
            first_chunk_at_ms: None,
        });
        self.append(&JournalEvent::NodeCompleted {
            node: NODE.into(),
            output: text.to_string(),
        });
        self.append(&JournalEvent::RunCompleted {
            output: text.to_string(),
        });
        self.state("completed");
    }

    /// The prompt failed (the tab failed it, timed out, or went away).
    pub fn failed(&self, error: &str) {
        self.append(&JournalEvent::ItemFailed {
            node: NODE.into(),
            item: 0,
            attempt: 1,
            error: error.to_string(),
            retryable: false,
            at_ms: now_ms() as u64,
        });
        self.append(&JournalEvent::NodeFailed {
            node: NODE.into(),
            error: error.to_string(),
        });
        self.append(&JournalEvent::RunFailed {
            error: error.to_string(),
        });
        self.state("failed");
    }

    /// The client left before the answer: the prompt was cancelled.
    pub fn cancelled(&self) {
        self.append(&JournalEvent::RunStopped {
            reason: "the API client disconnected / API 客户端已断开".into(),
        });
        self.state("stopped");
    }

    fn append(&self, ev: &JournalEvent) {
        if let Err(e) = self.store.append_event(&self.run_id, &json(ev), now_ms()) {
            tracing::warn!(run = %self.run_id, "cannot journal the API prompt: {e}");
        }
    }

    fn state(&self, state: &str) {
        if let Err(e) = self.store.set_run_state(&self.run_id, state, now_ms()) {
            tracing::warn!(run = %self.run_id, "cannot journal the API prompt: {e}");
        }
    }
}

fn json(ev: &JournalEvent) -> String {
    serde_json::to_string(ev).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recorded_flow_is_valid_whatever_the_target() {
        for target in ["deepseek-1", "c-1234abcd", "标签"] {
            let flow = crate::flows::load_str(API_FLOW, &flow_source(target));
            assert!(flow.is_ok(), "{target}: {:?}", flow.err());
        }
    }
}
