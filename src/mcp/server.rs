//! The one MCP handler: eight tools over the hub's tabs, runs and flows, and the hub's
//! resources (`aicard://tabs`, `aicard://flows/NAME`, `aicard://runs/ID`: [`super::resources`])
//! with `resources/subscribe` and `subscriptions/listen`. Served at `/mcp` (Streamable HTTP)
//! and, through the relay, by `aicard mcp` on stdio.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, JsonObject, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, ResourceUpdatedNotificationParam, ServerCapabilities,
    SubscribeRequestParams, SubscriptionFilter, Tool, ToolAnnotations, UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServerHandler};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::runs::{RunView, StartError, Status};
use super::McpDoor;

/// `wait_s` when a call does not say.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(45);
/// The longest `wait_s` honoured.
pub const MAX_WAIT: Duration = Duration::from_secs(600);
/// `notifications/progress` at least this often while a call waits.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(5);
/// Tools from the skills seam get this prefix.
pub const SKILL_PREFIX: &str = "skill_";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

/// Ask one tab and wait for its answer.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AskArgs {
    /// Which tab: a site (`deepseek`, `site/deepseek`), a tab (`tab/LABEL`, a label or a tab
    /// id from list_tabs), or `auto` (the least busy worker).
    target: String,
    /// The prompt typed into the tab.
    prompt: String,
    /// Files the tab attaches before it sends the prompt (images, PDF, documents): each
    /// `{name, mime_type, data}` with `data` in base64, or a name inside the hub's files
    /// folder (`--files`). At most --max-file-mb (20 MB) each, 50 MB together.
    #[serde(default)]
    files: Vec<FileArg>,
    /// Wait at most this many seconds (default 45), then get `running` and a run_id.
    #[serde(default)]
    wait_s: Option<f64>,
    /// The same key within 10 minutes returns the same run instead of a second prompt.
    #[serde(default)]
    idempotency_key: Option<String>,
}

/// Send the same prompt to several tabs at once.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FanOutArgs {
    /// Targets as for `ask`, each answered by a different tab.
    targets: Vec<String>,
    /// The prompt.
    prompt: String,
    /// Files every tab attaches before it sends the prompt (images, PDF, documents): each
    /// `{name, mime_type, data}` with `data` in base64, or a name inside the hub's files
    /// folder (`--files`). At most --max-file-mb (20 MB) each, 50 MB together.
    #[serde(default)]
    files: Vec<FileArg>,
    /// Wait at most this many seconds (default 45).
    #[serde(default)]
    wait_s: Option<f64>,
    /// As for `ask`.
    #[serde(default)]
    idempotency_key: Option<String>,
}

/// Run a flow.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RunFlowArgs {
    /// The flow's name (list_flows).
    flow: String,
    /// The flow's inputs by name; a string for the first input also works.
    #[serde(default)]
    inputs: Option<Value>,
    /// Wait at most this many seconds (default 45).
    #[serde(default)]
    wait_s: Option<f64>,
    /// As for `ask`.
    #[serde(default)]
    idempotency_key: Option<String>,
}

/// Give an agent a task.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AgentTaskArgs {
    /// The agent's name (`?<agent list>!` in a tab lists them).
    agent: String,
    /// The task; the agent's tab gets it after its primer.
    task: String,
    /// Files for the task, as for `ask`: `{name, mime_type, data}` with `data` in base64, or a
    /// name inside the hub's files folder; attached to the session's first message in the
    /// agent's tab.
    #[serde(default)]
    files: Vec<FileArg>,
    /// Wait at most this many seconds (default 45); then get_run with the run_id.
    #[serde(default)]
    wait_s: Option<f64>,
    /// As for `ask`.
    #[serde(default)]
    idempotency_key: Option<String>,
}

/// A file for a tab: sent whole, or named in the hub's files folder.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
enum FileArg {
    /// The file itself.
    Inline(InlineFile),
    /// A name inside the hub's files folder (`chart.png`, `reports/q3.pdf`); a path out of
    /// it is refused.
    Named(String),
}

/// A file sent whole (docs/mcp.md "Files").
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct InlineFile {
    /// Its name as the site shows it (`chart.png`).
    name: String,
    /// Its media type (`image/png`, `application/pdf`); from the name's extension when absent.
    #[serde(default, alias = "mime")]
    mime_type: Option<String>,
    /// The bytes in base64 (a `data:` URL also works).
    data: String,
}

/// Wait for a run started earlier.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GetRunArgs {
    /// The run_id a call returned.
    run_id: String,
    /// Wait at most this many seconds for it to finish (default 45; 0 = just look).
    #[serde(default)]
    wait_s: Option<f64>,
}

/// Cancel a run: prompts still in tabs are stopped.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CancelArgs {
    /// The run_id.
    run_id: String,
}

fn schema<T: JsonSchema>() -> Arc<JsonObject> {
    let mut v = serde_json::to_value(schemars::schema_for!(T)).unwrap_or_default();
    strip_formats(&mut v);
    if let Some(o) = v.as_object_mut() {
        o.remove("$schema");
        o.remove("title");
        o.entry("properties").or_insert_with(|| json!({}));
    }
    object(v)
}

/// schemars writes `format: double` (and `uint`, `int64`) on numbers: not JSON Schema's own
/// formats, so strict validators warn on them. A number is a number.
fn strip_formats(v: &mut Value) {
    match v {
        Value::Object(o) => {
            if o.get("format").is_some_and(Value::is_string)
                && o.get("type") != Some(&json!("string"))
            {
                o.remove("format");
            }
            o.values_mut().for_each(strip_formats);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_formats),
        _ => {}
    }
}

fn object(v: Value) -> Arc<JsonObject> {
    Arc::new(match v {
        Value::Object(o) => o,
        _ => JsonObject::new(),
    })
}

/// The `structuredContent` of every tool that starts or follows a run.
fn run_output() -> Arc<JsonObject> {
    object(json!({
        "type": "object",
        "properties": {
            "status": {"type": "string", "enum": ["running", "completed", "failed", "cancelled"]},
            "run_id": {"type": "string"},
            "answers": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "tab": {"type": "string"}, "site": {"type": "string"},
                    "label": {"type": "string"}, "text": {"type": "string"}
                },
                "required": ["tab", "site", "label", "text"]
            }},
            "text": {"type": "string", "description": "The answer; several answers each headed by [label]"},
            "errors": {"type": "array", "items": {"type": "string"}},
            "hint": {"type": "string"}
        },
        "required": ["status", "run_id", "answers", "text"]
    }))
}

/// What a tool does to the world, for clients that ask before a call (MCP tool annotations).
fn hints(title: &str, read_only: bool, destructive: bool, idempotent: bool) -> ToolAnnotations {
    let a = ToolAnnotations::with_title(title)
        .read_only(read_only)
        .idempotent(idempotent)
        // The models in the tabs are outside this hub.
        .open_world(!read_only);
    if read_only {
        a
    } else {
        a.destructive(destructive)
    }
}

/// The seven tools, in their fixed order.
pub fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "list_tabs",
            "List the connected chat tabs: id, site, label, role, group, busy, health (decision engine: standing, success, timings).",
            schema::<NoArgs>(),
        )
        .annotate(hints("List tabs / 列出标签页", true, false, true))
        .with_raw_output_schema(object(json!({
            "type": "object",
            "properties": {"tabs": {"type": "array", "items": {"type": "object", "properties": {
                "tab": {"type": "string"}, "site": {"type": "string"}, "label": {"type": "string"},
                "role": {"type": "string"}, "busy": {"type": "boolean"}
            }, "required": ["tab", "site", "label", "role"]}}},
            "required": ["tabs"]
        }))),
        Tool::new(
            "ask",
            "Send a prompt to one chat tab and return its answer (with tab, site and label). \
             Returns status `running` and a run_id after wait_s; then call get_run.",
            schema::<AskArgs>(),
        )
        .annotate(hints("Ask a tab / 问一个标签页", false, false, false))
        .with_raw_output_schema(run_output()),
        Tool::new(
            "fan_out",
            "Send the same prompt to several tabs at once; every answer names its tab.",
            schema::<FanOutArgs>(),
        )
        .annotate(hints("Ask several tabs / 同时问多个标签页", false, false, false))
        .with_raw_output_schema(run_output()),
        Tool::new(
            "run_flow",
            "Run a flow (list_flows) with inputs; returns its result, or `running` and a run_id.",
            schema::<RunFlowArgs>(),
        )
        // A flow may hold shell or MCP steps (under the hub's exec policy).
        .annotate(hints("Run a flow / 运行流程", false, true, false))
        .with_raw_output_schema(run_output()),
        Tool::new(
            "get_run",
            "Wait up to wait_s for a run (ask, fan_out, run_flow) and return what it has.",
            schema::<GetRunArgs>(),
        )
        .annotate(hints("Follow a run / 查看运行", true, false, true))
        .with_raw_output_schema(run_output()),
        Tool::new(
            "cancel",
            "Cancel a run; prompts still in tabs are stopped.",
            schema::<CancelArgs>(),
        )
        .annotate(hints("Cancel a run / 取消运行", false, true, true))
        .with_raw_output_schema(run_output()),
        Tool::new(
            "list_flows",
            "List the flows run_flow can run, with their inputs.",
            schema::<NoArgs>(),
        )
        .annotate(hints("List flows / 列出流程", true, false, true))
        .with_raw_output_schema(object(json!({
            "type": "object",
            "properties": {"flows": {"type": "array", "items": {"type": "object", "properties": {
                "name": {"type": "string"}, "inputs": {"type": "array", "items": {"type": "string"}},
                "error": {"type": "string"}
            }, "required": ["name"]}}},
            "required": ["flows"]
        }))),
        Tool::new(
            "agent_task",
            "Give an agent (made in a tab with ?<agent create NAME on TAB>!) a task: its tab's \
             model works in rounds, running commands and reading their results, until it is \
             done; returns its final answer, or `running` and a run_id after wait_s.",
            schema::<AgentTaskArgs>(),
        )
        // The agent runs the commands its tools allow.
        .annotate(hints("Give an agent a task / 给智能体任务", false, true, false))
        .with_raw_output_schema(run_output()),
    ]
}

/// What the server says about itself in `initialize` / `server/discover`.
pub fn info() -> InitializeResult {
    let caps = ServerCapabilities::builder()
        .enable_resources()
        .enable_tools()
        .enable_resources_subscribe()
        .build();
    InitializeResult::new(caps)
        .with_server_info(Implementation::new("aicard", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "AIcard: the person's logged-in web AI chat tabs as tools. list_tabs shows them; ask \
             and fan_out type a prompt into tabs; run_flow runs a flow. A long answer comes back \
             as status `running` with a run_id: call get_run with it, or read and subscribe to \
             the resource aicard://runs/RUN_ID.",
        )
}

/// The handler over a hub: one per MCP session, with the session's resource subscriptions.
#[derive(Clone)]
pub struct HubTools {
    pub door: Arc<McpDoor>,
    subs: Arc<Subscriptions>,
}

/// One session's `resources/subscribe`s: URI → its watcher's stop. All stop with the session.
#[derive(Default)]
struct Subscriptions {
    by_uri: Mutex<HashMap<String, CancellationToken>>,
    all: CancellationToken,
}

impl Drop for Subscriptions {
    fn drop(&mut self) {
        self.all.cancel();
    }
}

/// Sends `notifications/resources/updated` for `uri` each time it reads differently, until
/// `stop` or the session's end.
fn watch_resource(
    door: Arc<McpDoor>,
    uri: super::resources::Uri,
    notify: Notify,
    stop: CancellationToken,
) {
    let tracker = door.tracker.clone();
    crate::spawn::tracked(&tracker, async move {
        let mut last = super::resources::render(&door, &uri);
        while super::resources::changed(&door, &uri, &mut last, &stop).await {
            let sent = match &notify {
                Notify::Peer(peer) => peer
                    .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri.to_uri()))
                    .await
                    .is_ok(),
                Notify::Listen(sink) => sink.notify_resource_updated(uri.to_uri()).await.is_ok(),
            };
            if !sent {
                return;
            }
        }
    });
}

/// Where a watcher's updates go: a legacy session's peer, or a `subscriptions/listen` stream.
enum Notify {
    Peer(Peer<RoleServer>),
    Listen(rmcp::service::SubscriptionSink),
}

fn wait_of(w: Option<f64>) -> Duration {
    match w {
        Some(s) if s.is_finite() && s >= 0.0 => Duration::from_secs_f64(s).min(MAX_WAIT),
        _ => DEFAULT_WAIT,
    }
}

/// A built-in tool's arguments; wrong ones are the tool's error result (`isError`, as the
/// MCP spec recommends and as the skills' tools answer), so the model can read and fix them.
/// An unknown tool stays a protocol error (-32602).
fn args<T: for<'de> Deserialize<'de>>(p: &CallToolRequestParams) -> Result<T, CallToolResult> {
    let v = Value::Object(p.arguments.clone().unwrap_or_default());
    serde_json::from_value(v)
        .map_err(|e| refusal(format!("参数不对 / bad arguments for `{}`: {e}", p.name)))
}

/// A tool's answer: the structured value, and the same as text.
fn result(v: Value, failed: bool) -> CallToolResult {
    if failed {
        CallToolResult::structured_error(v)
    } else {
        CallToolResult::structured(v)
    }
}

fn refusal(msg: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(msg)])
}

fn view_result(v: &RunView) -> CallToolResult {
    result(v.structured(), matches!(v.status, Status::Failed))
}

impl HubTools {
    pub fn new(door: Arc<McpDoor>) -> HubTools {
        HubTools {
            door,
            subs: Arc::default(),
        }
    }

    fn list_tabs(&self) -> Value {
        super::resources::tabs_json(&self.door)
    }

    fn list_flows(&self) -> Value {
        let flows: Vec<Value> = crate::api::flow_names(&self.door)
            .into_iter()
            .map(
                |name| match crate::runner::Runner::load_flow(&self.door, &name) {
                    Ok((f, _)) => json!({
                        "name": name,
                        "description": f.description,
                        "inputs": f.inputs.keys().collect::<Vec<_>>(),
                    }),
                    Err(e) => json!({"name": name, "error": e.to_string()}),
                },
            )
            .collect();
        json!({"flows": flows})
    }

    /// Waits for a run, sending progress when the client asked for it.
    async fn follow(
        &self,
        run_id: &str,
        wait: Duration,
        ctx: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let token = ctx.meta.get_progress_token();
        let (ptx, mut prx) = tokio::sync::mpsc::unbounded_channel::<ProgressNotificationParam>();
        let forward = token.as_ref().map(|_| {
            let peer = ctx.peer.clone();
            crate::spawn::task(async move {
                while let Some(p) = prx.recv().await {
                    if peer.notify_progress(p).await.is_err() {
                        break;
                    }
                }
            })
        });
        let runs = self.door.mcp.runs.clone();
        let waited = tokio::select! {
            v = runs.wait(&self.door, run_id, wait, PROGRESS_EVERY, |v, elapsed| {
                if let Some(t) = &token {
                    // Seconds waited: always increasing, as progress must be.
                    let p = ProgressNotificationParam::new(t.clone(), elapsed.as_secs_f64().max(0.001))
                        .with_message(format!("{}/{} answers after {:.0} s", v.answers.len(), v.total, elapsed.as_secs_f64()));
                    let _ = ptx.send(p);
                }
            }) => v,
            _ = ctx.ct.cancelled() => {
                // `notifications/cancelled` (Claude Desktop's, Cursor's, the Inspector's cancel):
                // the client gave up on this call, so the run stops and its tabs get `cancel`,
                // as with our own `cancel` tool.
                runs.cancel(run_id);
                None
            }
        };
        drop(ptx);
        if let Some(f) = forward {
            let _ = f.await;
        }
        match waited {
            Some(v) => view_result(&v),
            None => refusal(format!("没有这个运行 / no run `{run_id}`")),
        }
    }

    async fn call(
        &self,
        p: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let door = &self.door;
        tracing::info!(target: "aicard::audit", tool = %p.name, "mcp server call");
        let started = |r: Result<String, StartError>| r.map_err(|e| e.to_string());
        match p.name.as_ref() {
            "list_tabs" => {
                if let Err(r) = args::<NoArgs>(&p) {
                    return Ok(r);
                }
                Ok(result(self.list_tabs(), false))
            }
            "list_flows" => {
                if let Err(r) = args::<NoArgs>(&p) {
                    return Ok(r);
                }
                Ok(result(self.list_flows(), false))
            }
            "ask" => {
                let a: AskArgs = match args(&p) {
                    Ok(a) => a,
                    Err(r) => return Ok(r),
                };
                let files = match keep_files(door, a.files).await {
                    Ok(f) => f,
                    Err(e) => return Ok(refusal(e)),
                };
                let r = door.mcp.runs.start_ask(
                    door,
                    "ask",
                    std::slice::from_ref(&a.target),
                    &a.prompt,
                    files,
                    a.idempotency_key.as_deref(),
                );
                match started(r) {
                    Ok(id) => Ok(self.follow(&id, wait_of(a.wait_s), &ctx).await),
                    Err(e) => Ok(refusal(e)),
                }
            }
            "fan_out" => {
                let a: FanOutArgs = match args(&p) {
                    Ok(a) => a,
                    Err(r) => return Ok(r),
                };
                let files = match keep_files(door, a.files).await {
                    Ok(f) => f,
                    Err(e) => return Ok(refusal(e)),
                };
                let r = door.mcp.runs.start_ask(
                    door,
                    "fan_out",
                    &a.targets,
                    &a.prompt,
                    files,
                    a.idempotency_key.as_deref(),
                );
                match started(r) {
                    Ok(id) => Ok(self.follow(&id, wait_of(a.wait_s), &ctx).await),
                    Err(e) => Ok(refusal(e)),
                }
            }
            "run_flow" => {
                let a: RunFlowArgs = match args(&p) {
                    Ok(a) => a,
                    Err(r) => return Ok(r),
                };
                let inputs = match flow_inputs(door, &a.flow, a.inputs) {
                    Ok(i) => i,
                    Err(e) => return Ok(refusal(e)),
                };
                let r =
                    door.mcp
                        .runs
                        .start_flow(door, &a.flow, inputs, a.idempotency_key.as_deref());
                match started(r) {
                    Ok(id) => Ok(self.follow(&id, wait_of(a.wait_s), &ctx).await),
                    Err(e) => Ok(refusal(e)),
                }
            }
            "agent_task" => {
                let a: AgentTaskArgs = match args(&p) {
                    Ok(a) => a,
                    Err(r) => return Ok(r),
                };
                let agent = match crate::agents::store::agent(&door.store, &a.agent) {
                    Ok(Some(rec)) => rec,
                    Ok(None) => {
                        return Ok(refusal(
                            crate::agent_loop::LoopError::NoAgent(a.agent).to_string(),
                        ))
                    }
                    Err(e) => return Ok(refusal(e.to_string())),
                };
                // Checked and kept before the session starts: a bad file sends nothing.
                let files = match keep_files(door, a.files).await {
                    Ok(f) => f,
                    Err(e) => return Ok(refusal(e)),
                };
                let r = door.mcp.runs.start_agent(
                    door,
                    agent,
                    &a.task,
                    files,
                    a.idempotency_key.as_deref(),
                );
                match started(r) {
                    Ok(id) => Ok(self.follow(&id, wait_of(a.wait_s), &ctx).await),
                    Err(e) => Ok(refusal(e)),
                }
            }
            "get_run" => {
                let a: GetRunArgs = match args(&p) {
                    Ok(a) => a,
                    Err(r) => return Ok(r),
                };
                Ok(self.follow(&a.run_id, wait_of(a.wait_s), &ctx).await)
            }
            "cancel" => {
                let a: CancelArgs = match args(&p) {
                    Ok(a) => a,
                    Err(r) => return Ok(r),
                };
                if !door.mcp.runs.cancel(&a.run_id) {
                    return Ok(refusal(format!("没有这个运行 / no run `{}`", a.run_id)));
                }
                let v = door
                    .mcp
                    .runs
                    .wait(
                        door,
                        &a.run_id,
                        Duration::from_secs(5),
                        PROGRESS_EVERY,
                        |_, _| {},
                    )
                    .await;
                Ok(match v {
                    Some(v) => view_result(&v),
                    None => refusal(format!("没有这个运行 / no run `{}`", a.run_id)),
                })
            }
            name if name.starts_with(SKILL_PREFIX) => {
                let Some(skills) = door.mcp.skills() else {
                    return Err(McpError::invalid_params(format!("no tool `{name}`"), None));
                };
                let a = Value::Object(p.arguments.clone().unwrap_or_default());
                match skills.call(&name[SKILL_PREFIX.len()..], a).await {
                    Ok(text) => Ok(CallToolResult::success(vec![ContentBlock::text(text)])),
                    Err(e) => Ok(refusal(e)),
                }
            }
            other => Err(McpError::invalid_params(format!("no tool `{other}`"), None)),
        }
    }
}

/// The files of a tool call, kept once each (docs/files.md); the error names the file.
async fn keep_files(
    door: &McpDoor,
    files: Vec<FileArg>,
) -> Result<Vec<crate::hub::files::FileRef>, String> {
    let mut inline = Vec::new();
    let mut named = Vec::new();
    for (i, f) in files.into_iter().enumerate() {
        match f {
            FileArg::Inline(f) => {
                let part = crate::api::attach::inline(
                    format!("files[{i}]"),
                    &f.name,
                    f.mime_type.as_deref(),
                    f.data,
                )
                .map_err(|e| format!("files[{i}]: {}", e.message))?;
                inline.push(part);
            }
            FileArg::Named(name) => named.push(name),
        }
    }
    let mut kept = crate::api::attach::store(&door.api, inline)
        .await
        .map_err(|e| format!("{}: {}", e.param.unwrap_or_default(), e.message))?;
    if !named.is_empty() {
        let store = door.tasks.files.clone();
        let more = tokio::task::spawn_blocking(move || store.named_all(&named))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        for f in more {
            if !kept.iter().any(|k| k.sha256 == f.sha256) {
                kept.push(f);
            }
        }
    }
    crate::hub::files::check_total(&kept).map_err(|e| e.to_string())?;
    Ok(kept)
}

/// -32002: no resource at `uri`.
fn no_resource(uri: &str) -> McpError {
    McpError::resource_not_found(
        format!(
            "没有这个资源 / no resource `{uri}`: aicard://tabs, aicard://flows/NAME, \
             aicard://runs/RUN_ID (resources/list)"
        ),
        Some(json!({"uri": uri})),
    )
}

/// `uri` as one of the hub's resources that exists now.
fn known(door: &McpDoor, uri: &str) -> Result<super::resources::Uri, McpError> {
    super::resources::Uri::parse(uri)
        .filter(|u| super::resources::render(door, u).is_some())
        .ok_or_else(|| no_resource(uri))
}

/// `inputs` as the runner takes them: an object of values (strings kept, others as JSON), or
/// one string for the flow's first input.
fn flow_inputs(
    door: &McpDoor,
    flow: &str,
    inputs: Option<Value>,
) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    match inputs {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for (k, v) in m {
                let s = match v {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                out.insert(k, s);
            }
        }
        Some(Value::String(s)) => {
            let (f, _) = crate::runner::Runner::load_flow(door, flow).map_err(|e| e.to_string())?;
            out.insert(crate::api::input_name(&f), s);
        }
        Some(other) => return Err(format!("`inputs` must be an object, got {other}")),
    }
    Ok(out)
}

/// Every tool this handler lists: the seven, then the skills seam's.
pub fn all_tools(door: &McpDoor) -> Vec<Tool> {
    let mut t = tools();
    if let Some(skills) = door.mcp.skills() {
        for s in skills.tools() {
            let schema = match s.input_schema {
                Value::Object(o) => o,
                _ => JsonObject::new(),
            };
            t.push(Tool::new(
                format!("{SKILL_PREFIX}{}", s.name),
                s.description,
                Arc::new(schema),
            ));
        }
    }
    t
}

impl ServerHandler for HubTools {
    fn get_info(&self) -> InitializeResult {
        info()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(all_tools(&self.door)))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        all_tools(&self.door).into_iter().find(|t| t.name == name)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        Ok(ListResourcesResult::with_all_items(super::resources::list(
            &self.door,
        )))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(
            super::resources::templates(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let contents = super::resources::Uri::parse(&request.uri)
            .and_then(|u| super::resources::read(&self.door, &u))
            .ok_or_else(|| no_resource(&request.uri))?;
        Ok(ReadResourceResult::new(vec![contents]).into())
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let uri = known(&self.door, &request.uri)?;
        let stop = self.subs.all.child_token();
        let old = self
            .subs
            .by_uri
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(request.uri.clone(), stop.clone());
        if let Some(old) = old {
            old.cancel();
        }
        watch_resource(self.door.clone(), uri, Notify::Peer(context.peer), stop);
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let gone = self
            .subs
            .by_uri
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&request.uri);
        if let Some(stop) = gone {
            stop.cancel();
        }
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // Updates of the hub's own resources that exist; nothing else is announced.
        let uris: Vec<String> = requested
            .resource_subscriptions
            .iter()
            .flatten()
            .filter(|u| known(&self.door, u).is_ok())
            .cloned()
            .collect();
        Some(
            SubscriptionFilter::builder()
                .resource_subscriptions(uris)
                .build(),
        )
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let stop = self.subs.all.child_token();
        for u in context.accepted().resource_subscriptions.iter().flatten() {
            if let Some(uri) = super::resources::Uri::parse(u) {
                let sink = Notify::Listen(context.sink().clone());
                watch_resource(self.door.clone(), uri, sink, stop.child_token());
            }
        }
        context.cancelled().await;
        stop.cancel();
        Ok(())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.call(request, context)
            .await
            .map(CallToolResponse::from)
    }
}
