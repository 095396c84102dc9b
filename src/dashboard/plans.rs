//! Plan drafts on the dashboard's JSON API (docs/flows.md, §13): list them, read one (its DAG as
//! text and Mermaid), and answer it — approve, modify, reject — with the same code as
//! `?<manager approve|modify|reject ID>!`; a modify may also carry the YAML as edited on the
//! dashboard.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::authorize;
use super::DashboardDoor;
use crate::planner::drafts::{Draft, DraftState};
use crate::planner::PlanError;

fn error(status: StatusCode, msg: impl Into<String>) -> Response {
    (status, Json(json!({"error": msg.into()}))).into_response()
}

fn draft_json(d: &Draft, full: bool) -> Value {
    let mut v = json!({
        "id": d.id,
        "goal": d.goal,
        "state": d.state.as_str(),
        "parent": d.parent,
        "planner": d.planner,
        "master": d.master,
        "repairs": d.repairs,
        "run_id": d.run_id,
        "saved_as": d.saved_as,
        "created_ms": d.created_ms,
        "decided_ms": d.decided_ms,
    });
    if full {
        v["yaml"] = json!(d.yaml);
        v["text"] = json!(crate::planner::present(d).unwrap_or_default());
        if let Ok(flow) = crate::flows::load_str("plan.yaml", &d.yaml) {
            v["nodes"] = json!(flow.nodes.len());
            v["mermaid"] = json!(crate::flows::render::mermaid(&flow));
        }
    }
    v
}

fn status_of(e: &PlanError) -> StatusCode {
    match e {
        PlanError::NoDraft(_) => StatusCode::NOT_FOUND,
        PlanError::Decided { .. } => StatusCode::CONFLICT,
        PlanError::Store(_) => StatusCode::INTERNAL_SERVER_ERROR,
        _ => StatusCode::UNPROCESSABLE_ENTITY,
    }
}

/// `GET /api/plans`: the newest drafts (any state).
pub async fn list(State(door): State<Arc<DashboardDoor>>, headers: HeaderMap) -> Response {
    if let Err(r) = authorize(&door, &Method::GET, &headers) {
        return r.into_response();
    }
    match door.planner.drafts.recent(100) {
        Ok(drafts) => {
            let plans: Vec<Value> = drafts.iter().map(|d| draft_json(d, false)).collect();
            Json(json!({"plans": plans})).into_response()
        }
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// `GET /api/plans/{id}`: one draft with its YAML, DAG text and Mermaid graph.
pub async fn get(
    State(door): State<Arc<DashboardDoor>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if let Err(r) = authorize(&door, &Method::GET, &headers) {
        return r.into_response();
    }
    match door.planner.drafts.get(&id) {
        Ok(Some(d)) => Json(draft_json(&d, true)).into_response(),
        Ok(None) => error(StatusCode::NOT_FOUND, format!("no plan draft `{id}`")),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// Body of `POST /api/plans/{id}/{approve|modify|reject}`.
#[derive(Debug, Default, Deserialize)]
pub struct AnswerBody {
    /// `approve`: the run's inputs.
    #[serde(default)]
    pub inputs: BTreeMap<String, String>,
    /// `modify`: what to change (the planner re-plans with it).
    #[serde(default)]
    pub feedback: Option<String>,
    /// `modify`: the flow as edited on the dashboard; it becomes the new draft as it is,
    /// after the planner's own checks (no planner asked).
    #[serde(default)]
    pub yaml: Option<String>,
}

/// `modify` with edited YAML: checked like a planner's answer, then stored as a new draft
/// (parent: `old`) and `old` marked modified. 422 with located problems when it fails.
fn modify_yaml(door: &DashboardDoor, old: Draft, yaml: &str) -> Response {
    if let Err(problems) = crate::planner::check_plan(&door.planner, yaml) {
        let diagnostics: Vec<Value> = problems
            .iter()
            .map(|p| json!({"line": p.line, "col": p.col, "message": p.message}))
            .collect();
        let text: Vec<String> = problems.iter().map(|p| p.with_context(yaml)).collect();
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({"ok": false, "error": text.join("\n\n"), "diagnostics": diagnostics})),
        )
            .into_response();
    }
    let now = crate::store::now_ms();
    let draft = Draft {
        id: format!("plan-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]),
        yaml: format!("{}\n", yaml.trim_end()),
        state: DraftState::Draft,
        parent: Some(old.id.clone()),
        planner: Some("dashboard".into()),
        repairs: 0,
        run_id: None,
        saved_as: None,
        created_ms: now,
        decided_ms: None,
        ..old
    };
    let drafts = &door.planner.drafts;
    match drafts.decide(
        &draft.parent.clone().unwrap_or_default(),
        DraftState::Modified,
        None,
        now,
    ) {
        Ok(true) => {}
        Ok(false) => {
            return error(
                StatusCode::CONFLICT,
                "草案已处理 / the draft was already decided",
            )
        }
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
    match drafts.insert(&draft) {
        Ok(()) => Json(json!({
            "ok": true,
            "id": draft.id,
            "message": format!("已修改 / modified: new draft {}", draft.id),
        }))
        .into_response(),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// `POST /api/plans/{id}/approve|modify|reject`. An approval from the dashboard runs without
/// a master tab (the result stays in the journal), unless the draft's master is online.
pub async fn answer(
    State(door): State<Arc<DashboardDoor>>,
    headers: HeaderMap,
    Path((id, action)): Path<(String, String)>,
    body: Option<Json<AnswerBody>>,
) -> Response {
    if let Err(r) = authorize(&door, &Method::POST, &headers) {
        return r.into_response();
    }
    let body = body.map(|b| b.0).unwrap_or_default();
    let draft = match door.planner.drafts.get(&id) {
        Ok(Some(d)) => d,
        Ok(None) => return error(StatusCode::NOT_FOUND, format!("no plan draft `{id}`")),
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    if action == "modify" {
        if let Some(yaml) = body.yaml.as_deref().filter(|y| !y.trim().is_empty()) {
            if draft.state != DraftState::Draft {
                return error(
                    StatusCode::CONFLICT,
                    format!("草案已处理 / draft `{id}` is {}", draft.state.as_str()),
                );
            }
            return modify_yaml(&door, draft, yaml);
        }
    }
    let master = draft.master;
    let online_master = master.clone().filter(|m| {
        door.registry
            .get(m)
            .is_some_and(|c| c.state() == crate::hub::registry::ConnState::Connected)
    });
    let result = match action.as_str() {
        "approve" => crate::planner::approve(&door.planner, online_master, &id, body.inputs),
        "reject" => crate::planner::reject(&door.planner, &id),
        "modify" => match body.feedback.as_deref().map(str::trim) {
            Some(f) if !f.is_empty() => {
                let asker = master.unwrap_or_default();
                crate::planner::modify(&door.planner, &asker, &id, f).await
            }
            _ => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "modify needs {\"feedback\": \"…\"} or {\"yaml\": \"…\"}",
                )
            }
        },
        other => return error(StatusCode::NOT_FOUND, format!("unknown action `{other}`")),
    };
    match result {
        Ok(message) => Json(json!({"ok": true, "message": message})).into_response(),
        Err(e) => error(status_of(&e), e.to_string()),
    }
}
