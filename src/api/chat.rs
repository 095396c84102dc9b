//! `GET /v1/models` and `POST /v1/chat/completions`.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;

use super::admission::Lease;
use super::answer::{now_secs, produce, sse_response, Finish, PendingAnswer, Reply};
use super::error::ApiError;
use super::journal::ApiRun;
use super::models::{self, ModelId};
use super::prompt::{ChatRequest, MAX_PROMPT_BYTES};
use super::ApiDoor;
use super::{authorize, TapEvent};
use crate::hub::registry::{Client, ConnState};
use crate::hub::tasks::TaskRequest;
use crate::hub::Hub;
use crate::protocol::ServerFrame;

/// `X-AIcard-Queue-Timeout` when absent (seconds).
pub const DEFAULT_QUEUE_TIMEOUT: Duration = Duration::from_secs(120);
/// Largest `X-AIcard-Queue-Timeout` honoured (seconds).
pub const MAX_QUEUE_TIMEOUT: Duration = Duration::from_secs(600);

pub async fn models(State(door): State<Arc<ApiDoor>>, headers: HeaderMap) -> Response {
    if let Err(e) = authorize(&door, &headers) {
        return e.into_response();
    }
    let body = model_list(&door);
    axum::Json(body).into_response()
}

/// The live model list of `GET /v1/models`.
fn model_list(door: &ApiDoor) -> serde_json::Value {
    let adm = door.api.admission().clone();
    let flows = flow_names(door);
    let agents = agent_models(door);
    let mut list = models::list(
        &door.registry,
        &flows,
        &agents,
        |c| adm.busy(c),
        |c| adm.unavailable(c),
        |k| adm.depth(k),
        |c| crate::pick::health_json(&door.asks.pick, c),
        now_secs(),
    );
    // A site's answers by path and its "adapter outdated" flag (docs/reliability.md); tab entries carry
    // their own in `health.answers`.
    if let Some(data) = list["data"].as_array_mut() {
        for entry in data {
            let Some(site) = entry["id"].as_str().and_then(|id| id.strip_prefix("site/")) else {
                continue;
            };
            let answers = serde_json::json!({
                "site": door.paths.site(site),
                "flag": door.paths.flag(site),
            });
            entry["aicard"]["answers"] = answers;
        }
    }
    list
}

/// Stored agents (`agent/<name>`), each with the connected tabs its target names now.
fn agent_models(door: &ApiDoor) -> Vec<models::AgentModel> {
    let stored = crate::agents::store::agents(&door.store).unwrap_or_default();
    stored
        .into_iter()
        .map(|a| {
            // `auto` names every eligible worker (resolving it would make a pick).
            let tabs = match crate::pick::auto_sites(&a.spec.target) {
                Some(sites) => crate::pick::eligible(&door.asks.pick, &sites),
                None => door.asks.resolve(&a.spec.target).unwrap_or_default(),
            };
            let tabs = tabs
                .into_iter()
                .filter(|c| c.state() == ConnState::Connected)
                .collect();
            models::AgentModel {
                name: a.spec.name,
                target: a.spec.target,
                tabs,
            }
        })
        .collect()
}

/// `GET /v1/models/{id}` (ids hold a `/`: `site/deepseek`): the entry of every id chat
/// accepts, under its canonical id (`kimi` is `site/kimi`, a tab's client id its
/// `tab/LABEL`) — the list's entry when the list shows it, else one with no tab load (a known
/// site with no tab online, `auto` with no worker) — or 404 `model_not_found` for an id chat
/// refuses with 404.
pub async fn model(
    State(door): State<Arc<ApiDoor>>,
    headers: HeaderMap,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> Response {
    if let Err(e) = authorize(&door, &headers) {
        return e.into_response();
    }
    let model = ModelId::parse(&id);
    let key = match &model {
        ModelId::Tab(_) => models::candidates(&door.registry, &model)
            .first()
            .map(|c| format!("tab/{}", c.display())),
        ModelId::Flow(name) => flow_names(&door).contains(name).then(|| model.key()),
        ModelId::Agent(name) => crate::agents::store::agent(&door.store, name)
            .ok()
            .flatten()
            .map(|_| model.key()),
        ModelId::Site(_) | ModelId::Auto => model.exists(&door.registry).then(|| model.key()),
    };
    let Some(key) = key else {
        return ApiError::model_not_found(&id).into_response();
    };
    let body = model_list(&door);
    let found = body["data"]
        .as_array()
        .and_then(|d| d.iter().find(|m| m["id"] == key.as_str()).cloned());
    axum::Json(found.unwrap_or_else(|| models::idle_entry(&key, now_secs()))).into_response()
}

/// Flows `flow/<name>` can run: the flows directory and the saved ones.
pub(crate) fn flow_names(hub: &Hub) -> Vec<String> {
    let mut names: Vec<String> = hub.store.saved_flows().unwrap_or_default();
    if let Ok(dir) = std::fs::read_dir(&hub.config.flows_dir) {
        for e in dir.flatten() {
            let p = e.path();
            let yaml = matches!(p.extension().and_then(|x| x.to_str()), Some("yaml" | "yml"));
            if let (true, Some(stem)) = (yaml, p.file_stem().and_then(|s| s.to_str())) {
                names.push(stem.to_string());
            }
        }
    }
    names.sort();
    names.dedup();
    names
}

pub async fn method_not_allowed(State(door): State<Arc<ApiDoor>>, headers: HeaderMap) -> Response {
    if let Err(e) = authorize(&door, &headers) {
        return e.into_response();
    }
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "invalid_request_error",
        "method_not_allowed",
        "方法不被允许 / method not allowed",
    )
    .into_response()
}

pub async fn not_found(State(door): State<Arc<ApiDoor>>, headers: HeaderMap) -> Response {
    if let Err(e) = authorize(&door, &headers) {
        return e.into_response();
    }
    ApiError::new(
        StatusCode::NOT_FOUND,
        "invalid_request_error",
        "unknown_url",
        "没有这个接口 / no such endpoint: the hub serves /v1/models and /v1/chat/completions",
    )
    .into_response()
}

pub async fn completions(
    State(door): State<Arc<ApiDoor>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    match complete(door, headers, body).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

fn queue_timeout(headers: &HeaderMap) -> Result<Duration, ApiError> {
    let Some(v) = headers.get("x-aicard-queue-timeout") else {
        return Ok(DEFAULT_QUEUE_TIMEOUT);
    };
    let secs: f64 = v
        .to_str()
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .filter(|s: &f64| s.is_finite() && *s >= 0.0)
        .ok_or_else(|| {
            ApiError::invalid(
                "invalid_value",
                "X-AIcard-Queue-Timeout must be seconds ≥ 0",
            )
            .param("X-AIcard-Queue-Timeout")
        })?;
    Ok(Duration::from_secs_f64(secs).min(MAX_QUEUE_TIMEOUT))
}

async fn complete(
    door: Arc<ApiDoor>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    // The token first: an unknown caller's body is never read.
    authorize(&door, &headers)?;
    let announced = headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let body = super::attach::read_json(announced, body).await?;
    let mut req = ChatRequest::from_value(body)?;
    let timeout = queue_timeout(&headers)?;
    let model = ModelId::parse(&req.model);
    if !model.exists(&door.registry) {
        return Err(ApiError::model_not_found(&req.model));
    }
    let reply = Reply::new(&req, &model);
    if req.has_files() && matches!(model, ModelId::Flow(_)) {
        return Err(ApiError::unsupported(
            "messages",
            "files go to a tab (site/…, tab/…, auto) or an agent (agent/…); a flow names its \
             files in its nodes / 文件只能发给标签页或智能体模型，流程在节点里指定文件",
        ));
    }
    if let ModelId::Flow(name) = &model {
        return super::flow::complete(door, req, name, reply).await;
    }
    if let ModelId::Agent(name) = &model {
        return super::agent::complete(door, req, name, reply).await;
    }
    let prompt = req.prompt();
    if prompt.len() > MAX_PROMPT_BYTES {
        return Err(ApiError::invalid(
            "context_length_exceeded",
            format!("提示过长 / the prompt is over {MAX_PROMPT_BYTES} bytes"),
        )
        .param("messages"));
    }
    // Kept before admission: a bad or too-big file is a 400 now, not after the wait.
    let files = super::attach::store(&door, req.take_files()).await?;
    let conversation = super::admission::conversation_key(
        &model,
        headers
            .get("x-aicard-conversation")
            .and_then(|v| v.to_str().ok()),
        req.first_user(),
        req.messages.iter().any(|m| m.role == "assistant"),
    );
    let lease = door
        .api
        .admission()
        .admit(&model, conversation, timeout)
        .await?;
    let client = lease.client.clone();
    let task_id = format!("api-{}", uuid::Uuid::new_v4().simple());
    let tap = req.stream.then(|| door.api.open_tap(&task_id));
    let shown = client.info().label.unwrap_or_else(|| client.id.to_string());
    let run = ApiRun::begin(&door, &task_id, &req.model, (&client.id, &shown), &prompt);
    let mut job = ChatJob {
        run,
        door: door.clone(),
        client: client.clone(),
        task_id: task_id.clone(),
        lease: Some(lease),
        finished: false,
        started: tokio::time::Instant::now(),
    };
    let mut task = TaskRequest::new(prompt, door.config.timing.task_timeout);
    task.task_id = Some(task_id);
    task.files = files;
    let ticket = match door.asks.submit(&client, task) {
        Ok(t) => t,
        Err(e) => {
            let e = ApiError::from(e);
            job.finish(Err(&e));
            return Err(e);
        }
    };
    let tasks = door.tasks.clone();
    let answer: PendingAnswer =
        Box::pin(async move { ticket.wait(&tasks).await.map_err(ApiError::from) });
    let reply = reply.tab(&client);
    let Some(mut tap) = tap else {
        // Not streaming: one object once the tab answered. A client that leaves drops this
        // future, and with it the job, which cancels the prompt.
        let text = answer.await;
        job.finish(text.as_deref());
        return Ok(axum::Json(reply.object(&text?)).into_response());
    };
    // Headers wait until the tab took the prompt, so a refusal still has a real status.
    let mut answer = answer;
    let first = tokio::select! {
        ev = tap.recv() => match ev {
            Some(ev @ (TapEvent::Chunk(_) | TapEvent::Reasoning(_))) => Some(ev),
            Some(TapEvent::Accepted) | None => None,
        },
        r = &mut answer => {
            job.finish(r.as_deref());
            let text = r?;
            let (tx, rx) = mpsc::channel(4);
            let mut out = reply.stream_start();
            out.push_str(&reply.delta(&text));
            out.push_str(&reply.finish_with_usage(&text));
            let _ = tx.try_send(Ok(Bytes::from(out)));
            drop(tx);
            return Ok(sse_response(rx));
        }
    };
    let (tx, rx) = mpsc::channel(32);
    let keepalive = door.api.keepalive();
    crate::spawn::tracked(
        &door.tracker,
        produce(
            door.clone(),
            reply,
            Some(tap),
            first,
            answer,
            Box::new(job),
            tx,
            keepalive,
        ),
    );
    Ok(sse_response(rx))
}

/// One prompt (with `files` attached) to one tab of `model`, outside any HTTP request (the MCP
/// tools use it): waits
/// up to `queue_timeout` for a free tab (admission, as for `/v1`), hands the prompt over and
/// waits for the reply. Dropping the future before it resolves cancels the prompt and tells
/// the tab, like a client that leaves. Returns the tab that answered and its reply.
pub(crate) async fn ask_tab(
    door: &Arc<ApiDoor>,
    model: &ModelId,
    prompt: String,
    files: Vec<crate::hub::files::FileRef>,
    queue_timeout: Duration,
) -> Result<(Arc<Client>, String), (Option<Arc<Client>>, ApiError)> {
    let lease = door
        .api
        .admission()
        .admit(model, None, queue_timeout)
        .await
        .map_err(|e| (None, e))?;
    let client = lease.client.clone();
    let task_id = format!("mcp-{}", uuid::Uuid::new_v4().simple());
    let shown = client.info().label.unwrap_or_else(|| client.id.to_string());
    let run = ApiRun::begin(door, &task_id, &model.key(), (&client.id, &shown), &prompt);
    let mut job = ChatJob {
        run,
        door: door.clone(),
        client: client.clone(),
        task_id: task_id.clone(),
        lease: Some(lease),
        finished: false,
        started: tokio::time::Instant::now(),
    };
    let mut task = TaskRequest::new(prompt, door.config.timing.task_timeout);
    task.task_id = Some(task_id);
    task.files = files;
    let ticket = match door.asks.submit(&client, task) {
        Ok(t) => t,
        Err(e) => {
            let e = ApiError::from(e);
            job.finish(Err(&e));
            return Err((Some(client), e));
        }
    };
    let text = ticket.wait(&door.tasks).await.map_err(ApiError::from);
    job.finish(text.as_deref());
    match text {
        Ok(t) => Ok((client, t)),
        Err(e) => Err((Some(client), e)),
    }
}

/// One prompt in a tab, held by the request: dropping it unfinished cancels the prompt,
/// frees the tab's slot and tells the tab; dropping the lease serves the next waiter.
struct ChatJob {
    /// The prompt's journal (a one-node run).
    run: ApiRun,
    door: Arc<ApiDoor>,
    client: Arc<Client>,
    task_id: String,
    lease: Option<Lease>,
    finished: bool,
    started: tokio::time::Instant,
}

impl Finish for ChatJob {
    fn finish(&mut self, outcome: Result<&str, &ApiError>) {
        self.finished = true;
        match outcome {
            Ok(text) => self.run.completed(text),
            Err(e) => self.run.failed(&format!("{}: {}", e.code, e.message)),
        }
        if outcome.is_ok() {
            let took = self.started.elapsed();
            self.door.api.counters().answer(took.as_secs_f64());
        }
    }
}

impl Drop for ChatJob {
    fn drop(&mut self) {
        let cancelled = !self.finished;
        self.door
            .api
            .close_tap(&self.client, &self.task_id, cancelled);
        if cancelled {
            self.run.cancelled();
            tracing::info!(client = %self.client.id, task = %self.task_id, "API client left: prompt cancelled");
            if self.client.state() == ConnState::Connected {
                let _ = self.door.registry.send(
                    &self.client.id,
                    &ServerFrame::Cancel {
                        task_id: self.task_id.clone(),
                    },
                );
            }
            self.door.tasks.cancel(&self.client, &self.task_id);
            self.door.tasks.pump(&self.client);
        }
        drop(self.lease.take());
    }
}
