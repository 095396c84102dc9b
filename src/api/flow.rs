//! `flow/<name>`: the last user message becomes the flow's first input and the run's result
//! is the answer. The run goes through the hub's runner like `manager run`; a client that
//! leaves stops it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::Response;

use super::answer::{respond, Finish, PendingAnswer, Reply};
use super::error::ApiError;
use super::prompt::ChatRequest;
use super::ApiDoor;
use crate::flows::engine::events::JournalEvent;
use crate::hub::Hub;
use crate::runner::{RunControl, RunError, Runner};

/// How often a run's state is read from the store while the request waits.
const POLL: Duration = Duration::from_millis(100);

/// The input the last user message fills: `question` if the flow declares it, else the
/// first declared input in name order, else `question`.
pub fn input_name(flow: &crate::flows::Flow) -> String {
    if flow.inputs.contains_key("question") {
        return "question".into();
    }
    flow.inputs
        .keys()
        .next()
        .cloned()
        .unwrap_or_else(|| "question".into())
}

struct RunGuard {
    door: Arc<ApiDoor>,
    run_id: String,
    finished: bool,
}

impl Finish for RunGuard {
    fn finish(&mut self, _outcome: Result<&str, &ApiError>) {
        self.finished = true;
    }
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        if !self.finished {
            let why = "API 客户端已断开 / the API client left".to_string();
            let _ = self
                .door
                .runner
                .control(&self.run_id, RunControl::Stop(why));
        }
    }
}

pub(super) async fn complete(
    door: Arc<ApiDoor>,
    req: ChatRequest,
    name: &str,
    reply: Reply,
) -> Result<Response, ApiError> {
    let (flow, _) = Runner::load_flow(&door, name).map_err(|e| match e {
        RunError::NoSuchFlow(_) => ApiError::model_not_found(&format!("flow/{name}")),
        other => ApiError::invalid("invalid_flow", other.to_string()).param("model"),
    })?;
    let mut inputs = BTreeMap::new();
    inputs.insert(input_name(&flow), req.last_user().to_string());
    let run_id = door
        .runner
        .start(name, None, inputs, None)
        .map_err(|e| match e {
            RunError::TooManyRuns(_) => ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                "too_many_runs",
                e.to_string(),
            )
            .retry_after(10),
            other => ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                "run_failed",
                other.to_string(),
            ),
        })?;
    let guard = RunGuard {
        door: door.clone(),
        run_id: run_id.clone(),
        finished: false,
    };
    let answer: PendingAnswer = Box::pin(wait_run(door.clone(), run_id));
    respond(door, req.stream, reply, answer, Box::new(guard)).await
}

/// Waits for the run to end; its result, or why it has none.
async fn wait_run(door: Arc<ApiDoor>, run_id: String) -> Result<String, ApiError> {
    loop {
        if let Some(outcome) = run_outcome(&door, &run_id) {
            return outcome.map_err(|why| {
                ApiError::new(StatusCode::BAD_GATEWAY, "server_error", "flow_failed", why)
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

/// How a run ended, from the store: `None` while it runs; its output, or why it has none.
pub(crate) fn run_outcome(hub: &Hub, run_id: &str) -> Option<Result<String, String>> {
    let state = hub
        .store
        .run(run_id)
        .ok()
        .flatten()
        .map(|r| r.state)
        .unwrap_or_default();
    if !matches!(
        state.as_str(),
        "completed" | "failed" | "stopped" | "interrupted"
    ) {
        return None;
    }
    let events = hub.store.events(run_id).unwrap_or_default();
    for ev in events.iter().rev() {
        match serde_json::from_str::<JournalEvent>(ev) {
            Ok(JournalEvent::RunCompleted { output }) => return Some(Ok(output)),
            Ok(JournalEvent::RunFailed { error }) => {
                return Some(Err(format!("流程失败 / the flow failed: {error}")))
            }
            _ => {}
        }
    }
    Some(Err(format!(
        "流程结束但没有结果 / the run ended `{state}` without a result"
    )))
}
