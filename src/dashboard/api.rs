//! The JSON API under `/api/` (docs/dashboard.md). Every handler starts with [`authorize`].

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::DashboardDoor;
use super::{authorize, runs, Credential};
use crate::decide::Standing;
use crate::hub::registry::ConnState;
use crate::protocol::Role;
use crate::runner::RunControl;

fn error(status: StatusCode, msg: impl Into<String>) -> Response {
    (status, Json(json!({"error": msg.into()}))).into_response()
}

/// A diagnostic as JSON, the fields `aicard flow validate` prints (`FILE:LINE:COL: MESSAGE`).
fn diagnostic_json(d: &crate::flows::Diagnostic) -> Value {
    json!({"file": d.file, "line": d.line, "col": d.col, "message": d.message})
}

/// The diagnostics in a text of `FILE:LINE:COL: MESSAGE` lines (the runner's words for a flow
/// file that does not load); a line that is not one continues the message before it.
fn diagnostics_in(text: &str) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for line in text.lines() {
        match parse_diagnostic(line) {
            Some(d) => out.push(diagnostic_json(&d)),
            None => {
                if let Some(Value::String(m)) = out.last_mut().map(|d| &mut d["message"]) {
                    m.push('\n');
                    m.push_str(line);
                }
            }
        }
    }
    out
}

/// `FILE:LINE:COL: MESSAGE`, split at the first `:LINE:COL: ` (a file name may hold a colon).
fn parse_diagnostic(line: &str) -> Option<crate::flows::Diagnostic> {
    for (i, _) in line.match_indices(':') {
        let mut rest = line[i + 1..].splitn(3, ':');
        let (Some(l), Some(c), Some(msg)) = (rest.next(), rest.next(), rest.next()) else {
            return None;
        };
        let (Ok(l), Ok(c)) = (l.parse::<usize>(), c.parse::<usize>()) else {
            continue;
        };
        let Some(message) = msg.strip_prefix(' ') else {
            continue;
        };
        return Some(crate::flows::Diagnostic {
            file: line[..i].to_string(),
            line: l,
            col: c,
            message: message.to_string(),
        });
    }
    None
}

/// 422 for a flow that does not validate: `error`, the text `aicard flow validate` prints,
/// and `diagnostics`, each `{file, line, col, message}` (docs/dashboard.md).
fn invalid(text: String, diagnostics: Vec<Value>) -> Response {
    (
        StatusCode::UNPROCESSABLE_ENTITY,
        Json(json!({"error": text, "diagnostics": diagnostics})),
    )
        .into_response()
}

macro_rules! check {
    ($hub:expr, $method:expr, $headers:expr) => {
        match authorize(&$hub, &$method, &$headers) {
            Ok(c) => c,
            Err(r) => return r.into_response(),
        }
    };
}

/// `GET /api/session`: who is calling, and the session's CSRF token.
pub async fn session(State(door): State<Arc<DashboardDoor>>, headers: HeaderMap) -> Response {
    let caller = check!(door, Method::GET, headers);
    let csrf = match &caller {
        Credential::Session(s) => door.dashboard.csrf(s),
        Credential::Token => None,
    };
    Json(json!({
        "auth": matches!(caller, Credential::Token).then_some("token").unwrap_or("session"),
        "csrf": csrf,
        "hub": door.public_url(),
        "version": env!("CARGO_PKG_VERSION"),
    }))
    .into_response()
}

/// The tabs as the dashboard lists them.
pub fn tabs_json(door: &DashboardDoor) -> Value {
    let now = crate::store::now_ms();
    let mut tabs: Vec<Value> = door
        .registry
        .all()
        .iter()
        .map(|c| {
            let info = c.info();
            let connected = c.state() == ConnState::Connected;
            let load = door.tasks.load(c);
            let current = door.tasks.current(c);
            let state = match (connected, &current) {
                (false, _) => "offline",
                (true, Some(_)) => "busy",
                (true, None) => "idle",
            };
            let standing = crate::pick::health(&door.asks.pick, c).standing;
            // What the tabs page draws: idle / busy, or why the engine holds the tab back.
            let status = match (connected, standing) {
                (false, _) => "offline",
                (true, Standing::Parked(_)) => "parked",
                (true, Standing::Cooling(_)) => "cooling",
                (true, Standing::OverQuota(_)) => "over_quota",
                (true, _) if current.is_some() || load > 0 => "busy",
                (true, _) => "idle",
            };
            let cooling_ms = match standing {
                Standing::Cooling(ms) | Standing::OverQuota(ms) => Some(ms),
                _ => None,
            };
            let silent_ms = now - c.last_seen_ms();
            let remote_health = c.remote().map(|r| r.health);
            let health = if let Some(h) = remote_health.as_deref() {
                h
            } else if !connected {
                "lost"
            } else if silent_ms > 45_000 {
                "silent"
            } else {
                "ok"
            };
            json!({
                "id": c.id,
                "site": info.site,
                "label": info.label,
                "role": info.role.as_str(),
                "group": info.group,
                // In a cluster every tab names its node; a single hub says null, as before.
                "node": match c.node() {
                    Some(n) => Value::from(n),
                    None if door.engine.clustered() => Value::from(door.engine.node()),
                    None => Value::Null,
                },
                "url": info.url,
                "title": info.title,
                "state": state,
                "status": status,
                "cooling_ms": cooling_ms,
                "health": health,
                "last_seen_ms": c.last_seen_ms(),
                "queue": load,
                "current_task": current.map(|(id, _)| id),
                "tasks_started": c.tasks_started.load(std::sync::atomic::Ordering::Relaxed),
                // The decision engine's figures (docs/flows.md): standing, success, timings.
                "engine": crate::pick::health_json(&door.asks.pick, c),
            })
        })
        .collect();
    tabs.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
    let quotas: Vec<Value> = door
        .asks
        .pick
        .decide
        .quota_uses(crate::store::now_ms() as u64)
        .into_iter()
        .map(|u| {
            json!({"site": u.site, "used": u.used, "sends": u.quota.sends, "per_ms": u.quota.per_ms,
                   "quota": u.quota.to_string(), "from": u.from, "wait_ms": u.wait_ms})
        })
        .collect();
    json!({"tabs": tabs, "quotas": quotas})
}

/// `GET /api/tabs`.
pub async fn tabs(State(door): State<Arc<DashboardDoor>>, headers: HeaderMap) -> Response {
    check!(door, Method::GET, headers);
    Json(tabs_json(&door)).into_response()
}

/// `GET /api/cluster`: this node, its engine's message counters, and what it waits for
/// (tasks sent to other nodes, tasks taken from them): the numbers docs/cluster.md names.
pub async fn cluster(State(door): State<Arc<DashboardDoor>>, headers: HeaderMap) -> Response {
    check!(door, Method::GET, headers);
    let s = door.engine.stats();
    let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    Json(json!({
        "node": door.engine.node(),
        "clustered": door.engine.clustered(),
        "presence_ttl_ms": door.engine.presence_ttl().as_millis().min(u64::MAX as u128) as u64,
        "tabs_here": door.registry.local_connected_count(),
        "tabs_connected": door.registry.connected_count(),
        "remote_waiting": door.tasks.remote_waiting(),
        "inbound_waiting": door.tasks.inbound_waiting(),
        "batches_sent": load(&s.batches_sent),
        "envelopes_sent": load(&s.envelopes_sent),
        "batches_received": load(&s.batches_received),
        "presence_writes": load(&s.presence_writes),
    }))
    .into_response()
}

/// Body of `POST /api/tabs/{id}/role`.
#[derive(Debug, Deserialize)]
pub struct RoleBody {
    pub role: String,
    #[serde(default)]
    pub group: Option<String>,
}

/// `POST /api/tabs/{id}/role`: the same code as `?<role …>!`.
pub async fn set_role(
    State(door): State<Arc<DashboardDoor>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Json(body): Json<RoleBody>,
) -> Response {
    check!(door, Method::POST, headers);
    let role = match body.role.as_str() {
        "master" => Role::Master,
        "foreman" => Role::Foreman,
        "worker" => Role::Worker,
        other => return error(StatusCode::BAD_REQUEST, format!("unknown role `{other}`")),
    };
    let group = body.group.filter(|g| !g.trim().is_empty());
    match crate::control::set_tab_role(&door.control, &id, role, group) {
        Ok(msg) => {
            let _ = door.events.send(crate::hub::HubEvent::Connected(id));
            Json(json!({"ok": true, "message": msg})).into_response()
        }
        Err(e) => error(StatusCode::CONFLICT, e.to_string()),
    }
}

/// `GET /api/flows`: flow files in the flows directory and flows saved on the hub.
pub async fn flows(State(door): State<Arc<DashboardDoor>>, headers: HeaderMap) -> Response {
    check!(door, Method::GET, headers);
    let mut names: Vec<String> = door.store.saved_flows().unwrap_or_default();
    if let Ok(dir) = std::fs::read_dir(&door.config.flows_dir) {
        for e in dir.flatten() {
            let p = e.path();
            if matches!(p.extension().and_then(|x| x.to_str()), Some("yaml" | "yml")) {
                if let Some(stem) = p.file_stem().and_then(|s| s.to_str()) {
                    names.push(stem.to_string());
                }
            }
        }
    }
    names.sort();
    names.dedup();
    Json(json!({"flows": names})).into_response()
}

/// `GET /api/flows/{name}`: the flow's source.
pub async fn flow_source(
    State(door): State<Arc<DashboardDoor>>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Response {
    check!(door, Method::GET, headers);
    let source = match door.store.flow_source(&name) {
        Ok(Some(s)) => Some(s),
        _ if crate::runner::Runner::load_flow(&door, &name).is_ok() => {
            ["yaml", "yml"].iter().find_map(|ext| {
                std::fs::read_to_string(door.config.flows_dir.join(format!("{name}.{ext}"))).ok()
            })
        }
        _ => None,
    };
    match source {
        Some(s) => Json(json!({"name": name, "source": s})).into_response(),
        None => error(StatusCode::NOT_FOUND, format!("no flow named `{name}`")),
    }
}

/// `POST /api/flows/validate?file=NAME[&format=json]`, body: the YAML. The answer is what
/// `aicard flow validate NAME` prints for that text (`text/plain`); with `format=json` that
/// text with the diagnostics and, when valid, the flow's graph.
pub async fn validate(
    State(door): State<Arc<DashboardDoor>>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
    body: String,
) -> Response {
    check!(door, Method::POST, headers);
    let file = q
        .get("file")
        .cloned()
        .unwrap_or_else(|| "flow.yaml".to_string());
    let loaded = crate::flows::load_str(&file, &body);
    let output = crate::flows::validate_output(&file, &loaded);
    let ok = loaded.is_ok();
    if q.get("format").map(String::as_str) != Some("json") {
        let status = if ok {
            StatusCode::OK
        } else {
            StatusCode::UNPROCESSABLE_ENTITY
        };
        return (
            status,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            output,
        )
            .into_response();
    }
    let (diagnostics, graph) = match &loaded {
        Ok(flow) => (Vec::new(), runs::graph(flow)),
        Err(d) => (d.iter().map(diagnostic_json).collect(), Value::Null),
    };
    Json(json!({"ok": ok, "output": output, "diagnostics": diagnostics, "graph": graph}))
        .into_response()
}

/// `GET /api/runs[?kind=flows|calls|all]`.
pub async fn runs(
    State(door): State<Arc<DashboardDoor>>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    check!(door, Method::GET, headers);
    let kind = runs::RunKind::parse(q.get("kind").map(String::as_str));
    Json(runs::list(&door, kind)).into_response()
}

/// Body of `POST /api/runs`.
#[derive(Debug, Deserialize)]
pub struct StartBody {
    /// The flow's name (a file in the flows directory or a saved flow).
    pub flow: String,
    #[serde(default)]
    pub inputs: BTreeMap<String, String>,
    /// Flow text to save under its `name` first (as `manager create` does), then run.
    #[serde(default)]
    pub source: Option<String>,
    /// The file name `source`'s diagnostics give (the editor's; `flow.yaml` when absent).
    #[serde(default)]
    pub file: Option<String>,
}

/// `POST /api/runs`: starts a run like `manager run` (no master tab: the result stays in the
/// journal and on the dashboard).
pub async fn start_run(
    State(door): State<Arc<DashboardDoor>>,
    headers: HeaderMap,
    body: Result<Json<StartBody>, axum::extract::rejection::JsonRejection>,
) -> Response {
    check!(door, Method::POST, headers);
    let body = match body {
        Ok(Json(b)) => b,
        Err(e) => {
            let status = e.status();
            return (
                status,
                Json(json!({"error": e.body_text(), "diagnostics": []})),
            )
                .into_response();
        }
    };
    let mut name = body.flow.clone();
    if let Some(src) = &body.source {
        let file = body.file.as_deref().unwrap_or("flow.yaml");
        match crate::flows::load_str(file, src) {
            Ok(flow) => {
                name = flow.name.clone();
                if let Err(e) = door.store.save_flow(&name, src, crate::store::now_ms()) {
                    return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string());
                }
            }
            Err(d) => {
                let diagnostics = d.iter().map(diagnostic_json).collect();
                let text = crate::flows::validate_output(file, &Err(d));
                return invalid(text, diagnostics);
            }
        }
    }
    match door.runner.start(&name, None, body.inputs, None) {
        Ok(run_id) => (StatusCode::CREATED, Json(json!({"run_id": run_id}))).into_response(),
        Err(e @ crate::runner::RunError::NoSuchFlow(_)) => {
            error(StatusCode::NOT_FOUND, e.to_string())
        }
        Err(crate::runner::RunError::Invalid(text)) => {
            let diagnostics = diagnostics_in(&text);
            let e = crate::runner::RunError::Invalid(text);
            invalid(e.to_string(), diagnostics)
        }
        Err(e) => invalid(e.to_string(), Vec::new()),
    }
}

/// `GET /api/runs/{id}`.
pub async fn run(
    State(door): State<Arc<DashboardDoor>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    check!(door, Method::GET, headers);
    let h = door.clone();
    match tokio::task::spawn_blocking(move || runs::detail(&h, &id)).await {
        Ok(Some(v)) => Json(v).into_response(),
        _ => error(StatusCode::NOT_FOUND, "no such run"),
    }
}

/// `GET /api/runs/{id}/nodes/{node}?offset=&limit=`.
pub async fn node(
    State(door): State<Arc<DashboardDoor>>,
    headers: HeaderMap,
    Path((id, node)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    check!(door, Method::GET, headers);
    let offset = q.get("offset").and_then(|v| v.parse().ok()).unwrap_or(0);
    let limit = q
        .get("limit")
        .and_then(|v| v.parse().ok())
        .unwrap_or(100usize)
        .min(500);
    let h = door.clone();
    match tokio::task::spawn_blocking(move || runs::node(&h, &id, &node, offset, limit)).await {
        Ok(Some(v)) => Json(v).into_response(),
        _ => error(StatusCode::NOT_FOUND, "no such run or node"),
    }
}

/// `POST /api/runs/{id}/pause|resume|stop`.
pub async fn control(
    State(door): State<Arc<DashboardDoor>>,
    headers: HeaderMap,
    Path((id, action)): Path<(String, String)>,
) -> Response {
    check!(door, Method::POST, headers);
    let c = match action.as_str() {
        "pause" => RunControl::Pause,
        "resume" => RunControl::Resume,
        "stop" => RunControl::Stop("stopped from the dashboard".into()),
        _ => return error(StatusCode::NOT_FOUND, format!("unknown action `{action}`")),
    };
    match door.runner.control(&id, c) {
        Ok(msg) => Json(json!({"ok": true, "message": msg})).into_response(),
        Err(e) => error(StatusCode::CONFLICT, e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diagnostics_are_read_back_from_the_clis_lines() {
        let text = "流程无效 / the flow is not valid:\nC:/flows/a.yaml:4:13: unclosed quote\n\
                    b.yaml:5:9: duplicate id `a`\n  (first on line 3)";
        assert_eq!(
            diagnostics_in(text),
            vec![
                json!({"file": "C:/flows/a.yaml", "line": 4, "col": 13, "message": "unclosed quote"}),
                json!({"file": "b.yaml", "line": 5, "col": 9,
                       "message": "duplicate id `a`\n  (first on line 3)"}),
            ]
        );
        assert!(parse_diagnostic("no place: here").is_none());
    }
}
