//! `agent/<name>`: the last user message is the agent's task (docs/agents.md); the answer is the
//! agent's final answer, after as many rounds as its tab's model needs. A client that leaves
//! stops the session.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::Response;

use super::answer::{respond, Finish, PendingAnswer, Reply};
use super::error::ApiError;
use super::prompt::ChatRequest;
use super::ApiDoor;
use crate::agent_loop::{LoopControl, LoopError, Who};

/// Stops the session when the client leaves before the answer.
struct SessionGuard {
    door: Arc<ApiDoor>,
    agent: String,
    finished: bool,
}

impl Finish for SessionGuard {
    fn finish(&mut self, _outcome: Result<&str, &ApiError>) {
        self.finished = true;
    }
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        if !self.finished {
            let _ = self
                .door
                .loops
                .control(&Who::Agent(&self.agent), LoopControl::CallerLeft);
        }
    }
}

/// The OpenAI wording of why an agent gave no answer.
fn api_error(e: LoopError) -> ApiError {
    let msg = e.to_string();
    match e {
        LoopError::NoAgent(name) => ApiError::model_not_found(&format!("agent/{name}")),
        LoopError::Off | LoopError::NoTab { .. } => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            "no_tab_available",
            msg,
        )
        .retry_after(10),
        LoopError::Busy(_) => ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_error",
            "agent_busy",
            msg,
        )
        .retry_after(10),
        LoopError::Ended(_) => ApiError::new(
            StatusCode::BAD_GATEWAY,
            "server_error",
            "agent_stopped",
            msg,
        ),
        LoopError::Store(_) => ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "store_error",
            msg,
        ),
    }
}

pub(super) async fn complete(
    door: Arc<ApiDoor>,
    mut req: ChatRequest,
    name: &str,
    reply: Reply,
) -> Result<Response, ApiError> {
    let agent = crate::agents::store::agent(&door.store, name)
        .map_err(|e| api_error(LoopError::Store(e.to_string())))?
        .ok_or_else(|| api_error(LoopError::NoAgent(name.to_string())))?;
    let task = req.last_user().to_string();
    // The files go with the session's first message (docs/files.md "In the agent loop"),
    // kept before the agent's tab is asked anything.
    let files = super::attach::store(&door, req.take_files()).await?;
    let guard = SessionGuard {
        door: door.clone(),
        agent: name.to_string(),
        finished: false,
    };
    let loops = door.loops.clone();
    let answer: PendingAnswer = Box::pin(async move {
        loops
            .task_with_files(agent, &task, files)
            .await
            .map_err(api_error)
    });
    respond(door, req.stream, reply, answer, Box::new(guard)).await
}
