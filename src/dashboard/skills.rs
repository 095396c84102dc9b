//! The skills page's API (docs/memory-and-skills.md, docs/security.md): list the skills (kind,
//! enabled, hash, last error), read a program skill's source, save it, enable it.
//!
//! Reading takes any caller the dashboard admits. Saving and enabling are a person's acts:
//! only a dashboard session (the HttpOnly cookie of a one-time login) with its CSRF token in
//! `X-CSRF-Token` on every write — never the hub token that tabs and API clients hold, and
//! never a same-origin `Origin` alone. No command of the language saves or enables a skill,
//! so a model's reply cannot either.

use std::io::Write;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use super::{authorize, Credential, DashboardDoor, CSRF_HEADER};
use crate::hub::auth;
use crate::skills::{is_skill_name, program::Lang};

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({ "error": message.into() }))).into_response()
}

/// The session of a person at the dashboard, with its CSRF token checked; anything else is
/// refused.
fn person(door: &DashboardDoor, headers: &HeaderMap) -> Result<String, Box<Response>> {
    let caller =
        authorize(door, &Method::POST, headers).map_err(|r| Box::new(r.into_response()))?;
    let Credential::Session(session) = caller else {
        return Err(Box::new(error(
            StatusCode::FORBIDDEN,
            "只有仪表盘会话可以保存或启用技能 / only a dashboard session (a person logged in with `aicard open`) saves or enables skills; the hub token does not",
        )));
    };
    let expected = door.dashboard.csrf(&session).unwrap_or_default();
    let presented = headers
        .get(CSRF_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if expected.is_empty() || !auth::token_matches(&expected, presented) {
        return Err(Box::new(error(
            StatusCode::FORBIDDEN,
            "缺少 CSRF 令牌 / the session's CSRF token is required (X-CSRF-Token)",
        )));
    }
    Ok(session)
}

/// `GET /api/skills`: every skill and every file that did not load.
pub async fn list(State(door): State<Arc<DashboardDoor>>, headers: HeaderMap) -> Response {
    if let Err(r) = authorize(&door, &Method::GET, &headers) {
        return r.into_response();
    }
    let skills = &door.control.commands.skills;
    Json(json!({
        "dir": skills.dir().display().to_string(),
        "skills": skills.get().infos(),
    }))
    .into_response()
}

/// The program file of `name` in the skills directory: (extension, its path), if any.
fn program_file(dir: &std::path::Path, name: &str) -> Option<(&'static str, std::path::PathBuf)> {
    ["py", "js", "sh"].into_iter().find_map(|ext| {
        let p = dir.join(format!("{name}.{ext}"));
        std::fs::symlink_metadata(&p).ok().map(|_| (ext, p))
    })
}

/// `GET /api/skills/NAME`: a program skill's source and state.
pub async fn get(
    State(door): State<Arc<DashboardDoor>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = authorize(&door, &Method::GET, &headers) {
        return r.into_response();
    }
    if !is_skill_name(&name) {
        return error(StatusCode::BAD_REQUEST, "技能名无效 / not a skill name");
    }
    let skills = &door.control.commands.skills;
    let Some((ext, path)) = program_file(skills.dir(), &name) else {
        return error(
            StatusCode::NOT_FOUND,
            format!("没有程序技能 / no program skill `{name}` (.py, .js, .sh)"),
        );
    };
    let meta = std::fs::symlink_metadata(&path);
    if !meta.is_ok_and(|m| m.file_type().is_file()) {
        return error(
            StatusCode::FORBIDDEN,
            "不是普通文件 / not a regular file (links are not read)",
        );
    }
    let source = match std::fs::read_to_string(&path) {
        Ok(s) => s,
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    let info = skills.get().infos().into_iter().find(|i| i.name == name);
    Json(json!({ "name": name, "ext": ext, "source": source, "info": info })).into_response()
}

#[derive(Debug, Deserialize)]
pub struct SkillSaveBody {
    source: String,
    /// For a new skill: `py`, `js` or `sh`.
    #[serde(default)]
    ext: Option<String>,
}

/// `PUT /api/skills/NAME`: writes a program skill's source (a new one with `ext`). A saved
/// file is new bytes: it waits to be enabled.
pub async fn save(
    State(door): State<Arc<DashboardDoor>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    Json(body): Json<SkillSaveBody>,
) -> Response {
    let session = match person(&door, &headers) {
        Ok(s) => s,
        Err(r) => return *r,
    };
    if !is_skill_name(&name) {
        return error(
            StatusCode::BAD_REQUEST,
            "技能名无效 / not a skill name: a-z, 0-9, _ and -",
        );
    }
    let skills = &door.control.commands.skills;
    let dir = skills.dir().to_path_buf();
    let (ext, path) = match (program_file(&dir, &name), body.ext.as_deref()) {
        (Some((ext, path)), None) => (ext, path),
        (Some((ext, path)), Some(e)) if e == ext => (ext, path),
        (Some((ext, _)), Some(e)) => {
            return error(
                StatusCode::CONFLICT,
                format!("`{name}` 已是 .{ext} / `{name}` is a .{ext} skill already, not .{e}"),
            )
        }
        (None, Some(e)) => match Lang::of(e) {
            Some(lang) => (lang.ext(), dir.join(format!("{name}.{}", lang.ext()))),
            None => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "ext 须为 py、js 或 sh / ext must be py, js or sh",
                )
            }
        },
        (None, None) => {
            return error(
                StatusCode::BAD_REQUEST,
                "新技能需要 ext / a new skill needs `ext`: py, js or sh",
            )
        }
    };
    if std::fs::symlink_metadata(&path).is_ok_and(|m| !m.file_type().is_file()) {
        return error(
            StatusCode::FORBIDDEN,
            "不是普通文件 / not a regular file (links are not written through)",
        );
    }
    let written = std::fs::create_dir_all(&dir)
        .and_then(|()| tempfile::NamedTempFile::new_in(&dir))
        .and_then(|mut tmp| {
            tmp.write_all(body.source.as_bytes())?;
            tmp.persist(&path).map_err(|e| e.error)?;
            Ok(())
        });
    if let Err(e) = written {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("无法保存 / cannot save {}: {e}", path.display()),
        );
    }
    tracing::info!(target: "aicard::audit", skill = %name, file = %path.display(), session = %&session[..8.min(session.len())], "skill saved from the dashboard");
    skills.reload();
    let info = skills
        .get()
        .infos()
        .into_iter()
        .find(|i| i.file == format!("{name}.{ext}"));
    Json(json!({ "saved": true, "info": info })).into_response()
}

#[derive(Debug, Deserialize)]
pub struct EnableBody {
    /// The hash the person saw: enabled only if the loaded file still has it.
    sha256: String,
}

/// `POST /api/skills/NAME/enable`: pins the loaded bytes, if they are the ones shown.
pub async fn enable(
    State(door): State<Arc<DashboardDoor>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    Json(body): Json<EnableBody>,
) -> Response {
    if let Err(r) = person(&door, &headers) {
        return *r;
    }
    let set = door.control.commands.skills.get();
    let current = set
        .infos()
        .into_iter()
        .find(|i| i.name == name && i.kind != "broken");
    match current.and_then(|i| i.sha256) {
        None => error(
            StatusCode::NOT_FOUND,
            format!("没有可启用的程序技能 / no loaded program skill `{name}` to enable"),
        ),
        Some(sha) if sha != body.sha256 => error(
            StatusCode::CONFLICT,
            "文件已变 / the file changed since you looked: reload it and check it again",
        ),
        Some(_) => match set.enable(&name) {
            Ok(sha256) => Json(json!({ "enabled": true, "sha256": sha256 })).into_response(),
            Err(e) => error(StatusCode::BAD_REQUEST, e),
        },
    }
}
