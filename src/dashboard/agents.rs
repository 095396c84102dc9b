//! The dashboard's Agents page on the JSON API (docs/agents.md, issue 30): the agents (name,
//! target, tools, creator), their sessions live and stored (newest first: state, round k/N,
//! the running command, why it paused or ended), one session's rounds (each command, ✓/✗,
//! its output cut to a few KB), and Stop, Pause, Resume, which act through the agent loop
//! ([`crate::agent_loop::Loops::control`]) like `?<agent stop>!` and the panel's Stop.

use std::collections::HashSet;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::{authorize, DashboardDoor};
use crate::agent_loop::{LoopControl, SessionView, Who};
use crate::agents::store as agent_store;

/// Longest command output sent for one command of a round (characters).
pub const MAX_OUTPUT: usize = 4_000;
/// At most this many stored sessions are listed.
pub const MAX_SESSIONS: usize = 200;

fn error(status: StatusCode, msg: impl Into<String>) -> Response {
    (status, Json(json!({"error": msg.into()}))).into_response()
}

/// Cuts an output to [`MAX_OUTPUT`] characters, saying how much was left out.
pub fn cut(text: &str) -> (String, bool) {
    match text.char_indices().nth(MAX_OUTPUT) {
        None => (text.to_string(), false),
        Some((i, _)) => (
            format!(
                "{}\n… [还有 {n} 个字符 / {n} more characters]",
                &text[..i],
                n = text[i..].chars().count()
            ),
            true,
        ),
    }
}

fn view_json(v: &SessionView, started_ms: Option<i64>, ended_ms: Option<i64>) -> Value {
    json!({
        "id": v.session,
        "agent": v.agent,
        "tab": v.tab,
        "state": v.state,
        "round": v.round,
        "of": v.of,
        "running": v.running,
        "why": v.why,
        "started_ms": started_ms,
        "ended_ms": ended_ms,
        "live": v.state != "ended",
    })
}

fn record_json(r: &agent_store::SessionRecord, of: Option<u32>) -> Value {
    json!({
        "id": r.id,
        "agent": r.agent,
        "tab": r.tab,
        "state": r.state,
        "round": r.round,
        "of": of,
        "running": Value::Null,
        "why": r.why,
        "started_ms": r.started_ms,
        "ended_ms": r.ended_ms,
        "live": false,
    })
}

/// The sessions, live first as the loop sees them, then the stored ones it no longer holds;
/// newest first within each.
fn sessions(door: &DashboardDoor) -> Vec<Value> {
    let store = &door.store;
    let stored = agent_store::recent_sessions(store, MAX_SESSIONS).unwrap_or_default();
    let views = door.loops.sessions();
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for v in &views {
        if !seen.insert(v.session.clone()) {
            continue;
        }
        let rec = stored.iter().find(|r| r.id == v.session);
        out.push(view_json(
            v,
            rec.map(|r| r.started_ms),
            rec.and_then(|r| r.ended_ms),
        ));
    }
    for r in &stored {
        if seen.insert(r.id.clone()) {
            let of = r
                .agent
                .as_deref()
                .and_then(|a| agent_store::agent(store, a).ok().flatten())
                .and_then(|a| a.spec.max_rounds);
            out.push(record_json(r, of));
        }
    }
    // Newest first: by start time where known, the loop's own order otherwise.
    out.sort_by_key(|s| {
        std::cmp::Reverse((s["live"].as_bool() == Some(true), s["started_ms"].as_i64()))
    });
    out
}

/// `GET /api/agents`: the agents and the sessions.
pub async fn list(State(door): State<Arc<DashboardDoor>>, headers: HeaderMap) -> Response {
    if let Err(r) = authorize(&door, &Method::GET, &headers) {
        return r.into_response();
    }
    let agents = match agent_store::agents(&door.store) {
        Ok(a) => a,
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    let agents: Vec<Value> = agents
        .iter()
        .map(|a| {
            let tools: Vec<String> = a
                .spec
                .tools_or_default()
                .iter()
                .map(ToString::to_string)
                .collect();
            json!({
                "name": a.spec.name,
                "target": a.spec.target,
                "tools": tools,
                "max_rounds": a.spec.max_rounds,
                "memory": a.spec.memory,
                "creator": a.creator,
            })
        })
        .collect();
    Json(json!({"agents": agents, "sessions": sessions(&door)})).into_response()
}

/// `GET /api/agents/sessions/{id}`: the session and its rounds.
pub async fn session(
    State(door): State<Arc<DashboardDoor>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if let Err(r) = authorize(&door, &Method::GET, &headers) {
        return r.into_response();
    }
    let head = match sessions(&door).into_iter().find(|s| s["id"] == id.as_str()) {
        Some(s) => s,
        None => match agent_store::session(&door.store, &id) {
            Ok(Some(r)) => record_json(&r, None),
            Ok(None) => {
                return error(
                    StatusCode::NOT_FOUND,
                    format!("没有会话 {id} / no agent session `{id}`"),
                )
            }
            Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        },
    };
    let rounds = match agent_store::rounds(&door.store, &id) {
        Ok(r) => r,
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    let rounds: Vec<Value> = rounds
        .iter()
        .map(|(round, commands)| {
            let commands: Vec<Value> = commands
                .iter()
                .map(|c| {
                    let (output, cut_off) = cut(&c.output);
                    json!({"command": c.command, "ok": c.ok, "output": output,
                           "chars": c.output.chars().count(), "cut": cut_off})
                })
                .collect();
            json!({"round": round, "commands": commands})
        })
        .collect();
    Json(json!({"session": head, "rounds": rounds})).into_response()
}

/// `POST /api/agents/sessions/{id}/stop|pause|resume`: acts on a live session (Stop within
/// 1 s). 404 for a session the hub never had, 409 for one that no longer runs.
pub async fn control(
    State(door): State<Arc<DashboardDoor>>,
    headers: HeaderMap,
    Path((id, action)): Path<(String, String)>,
) -> Response {
    if let Err(r) = authorize(&door, &Method::POST, &headers) {
        return r.into_response();
    }
    let what = match action.as_str() {
        "stop" => LoopControl::Stop,
        "pause" => LoopControl::Pause,
        "resume" => LoopControl::Resume,
        other => return error(StatusCode::NOT_FOUND, format!("unknown action `{other}`")),
    };
    let known = door.loops.sessions().iter().any(|s| s.session == id)
        || matches!(agent_store::session(&door.store, &id), Ok(Some(_)));
    if !known {
        return error(
            StatusCode::NOT_FOUND,
            format!("没有会话 {id} / no agent session `{id}`"),
        );
    }
    match door.loops.control(&Who::Session(&id), what) {
        Ok(message) => Json(json!({"ok": true, "message": message})).into_response(),
        Err(e) => error(StatusCode::CONFLICT, e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_outputs_are_cut_and_say_so() {
        let (short, cut_off) = cut("ok");
        assert_eq!((short.as_str(), cut_off), ("ok", false));
        let long = "字".repeat(MAX_OUTPUT + 10);
        let (text, cut_off) = cut(&long);
        assert!(cut_off);
        assert!(text.starts_with(&"字".repeat(MAX_OUTPUT)));
        assert!(text.ends_with("10 more characters]"));
    }
}
