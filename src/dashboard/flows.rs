//! The flow designer's file routes (docs/dashboard.md, "Flow designer"): read a flow file of
//! the flows directory with the hash of its bytes, and save one — validated first, refused
//! when the file changed on disk since it was opened, written to a temporary file in the same
//! directory and renamed over the old one, so a reader sees the old file or the new, never a
//! part.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::{authorize, DashboardDoor};

/// Saves run one at a time: the check against the disk and the rename are one step.
static SAVING: Mutex<()> = Mutex::new(());

fn error(status: StatusCode, msg: impl Into<String>) -> Response {
    (status, Json(json!({"error": msg.into()}))).into_response()
}

/// The SHA-256 of a file's bytes, in hex: the version the designer opened.
pub fn hash(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A flow file's name as the designer may use it: one plain file name in the flows folder,
/// without its `.yaml`. No path separators, no `..`, not hidden (a leading dot: the layout
/// sidecars), no control characters, at most 100 characters.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().count() <= 100
        && !name.starts_with('.')
        && !name.contains("..")
        && !name
            .chars()
            .any(|c| c == '/' || c == '\\' || c == ':' || c.is_control())
}

/// Where flow `name` lives: `flows/NAME.yaml`, or `NAME.yml` when only that exists.
fn path_of(door: &DashboardDoor, name: &str) -> PathBuf {
    let dir = &door.config.flows_dir;
    let yml = dir.join(format!("{name}.yml"));
    let yaml = dir.join(format!("{name}.yaml"));
    if !yaml.exists() && yml.exists() {
        yml
    } else {
        yaml
    }
}

fn file_label(path: &std::path::Path) -> String {
    path.file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `GET /api/flows/{name}`; with `?file=1` the file `flows/NAME.yaml` itself — `{name, file,
/// source, hash}` — else the flow's source as `manager run` finds it (a saved flow first).
pub async fn get(
    state: State<Arc<DashboardDoor>>,
    headers: HeaderMap,
    name: Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if !q.contains_key("file") {
        return super::api::flow_source(state, headers, name).await;
    }
    let (State(door), Path(name)) = (state, name);
    if let Err(r) = authorize(&door, &Method::GET, &headers) {
        return r.into_response();
    }
    if !valid_name(&name) {
        return error(StatusCode::BAD_REQUEST, bad_name(&name));
    }
    let path = path_of(&door, &name);
    match std::fs::read(&path) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(source) => Json(json!({
                "name": name, "file": file_label(&path), "hash": hash(source.as_bytes()), "source": source,
            }))
            .into_response(),
            Err(_) => error(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("{} 不是 UTF-8 / is not UTF-8", file_label(&path)),
            ),
        },
        Err(_) => error(
            StatusCode::NOT_FOUND,
            format!("没有流程文件 / no flow file `{name}.yaml`"),
        ),
    }
}

fn bad_name(name: &str) -> String {
    format!(
        "流程文件名无效 / bad flow file name `{name}`: one name in the flows folder, without `/`, `\\`, `..` or a leading dot"
    )
}

/// Body of `PUT /api/flows/{name}`.
#[derive(Debug, Deserialize)]
pub struct FlowSaveBody {
    /// The whole file.
    pub source: String,
    /// The hash of the version the designer opened (`GET …?file=1`); absent or null for a new
    /// file, which is then refused when one exists.
    #[serde(default)]
    pub base: Option<String>,
}

/// `PUT /api/flows/{name}`: writes `flows/NAME.yaml` when the text validates (else 422 with
/// the diagnostics, as `POST /api/runs`) and the file on disk is still the version opened
/// (else 409 `{error, disk, disk_hash}`, `disk` null when the file is gone). 200 `{ok, file,
/// hash}`.
pub async fn save(
    State(door): State<Arc<DashboardDoor>>,
    headers: HeaderMap,
    Path(name): Path<String>,
    body: Result<Json<FlowSaveBody>, axum::extract::rejection::JsonRejection>,
) -> Response {
    if let Err(r) = authorize(&door, &Method::PUT, &headers) {
        return r.into_response();
    }
    if !valid_name(&name) {
        return error(StatusCode::BAD_REQUEST, bad_name(&name));
    }
    let body = match body {
        Ok(Json(b)) => b,
        Err(e) => return error(e.status(), e.body_text()),
    };
    let path = path_of(&door, &name);
    let shown = path.display().to_string();
    if let Err(d) = crate::flows::load_str(&shown, &body.source) {
        let diagnostics: Vec<Value> = d
            .iter()
            .map(|x| json!({"file": x.file, "line": x.line, "col": x.col, "message": x.message}))
            .collect();
        let text = crate::flows::validate_output(&shown, &Err(d));
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({"error": text, "diagnostics": diagnostics})),
        )
            .into_response();
    }
    let _one = SAVING.lock().unwrap_or_else(|p| p.into_inner());
    let disk = std::fs::read(&path).ok();
    let disk_hash = disk.as_deref().map(hash);
    if disk_hash != body.base {
        let what = match (&disk_hash, &body.base) {
            (Some(_), None) => "文件已存在 / the file exists already",
            (None, Some(_)) => "文件已被删除 / the file was deleted since it was opened",
            _ => "文件在打开后被修改 / the file changed on disk since it was opened",
        };
        return (
            StatusCode::CONFLICT,
            Json(json!({
                "error": format!("{what}: {shown}"),
                "disk": disk.map(|b| String::from_utf8_lossy(&b).into_owned()),
                "disk_hash": disk_hash,
            })),
        )
            .into_response();
    }
    let written = std::fs::create_dir_all(&door.config.flows_dir).and_then(|_| {
        use std::io::Write;
        let mut tmp = tempfile::Builder::new()
            .prefix(".save-")
            .suffix(".tmp")
            .tempfile_in(&door.config.flows_dir)?;
        tmp.write_all(body.source.as_bytes())?;
        tmp.as_file().sync_all()?;
        tmp.persist(&path).map_err(|e| e.error)?;
        Ok(())
    });
    if let Err(e) = written {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("写入失败 / cannot write {shown}: {e}"),
        );
    }
    Json(json!({"ok": true, "file": file_label(&path), "hash": hash(body.source.as_bytes())}))
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_one_plain_file_name() {
        for ok in ["cross-review", "数据分析流程", "my flow", "a.b"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in [
            "", "..", "../x", "a/b", "a\\b", ".hidden", "x..y", "c:x", "a\nb",
        ] {
            assert!(!valid_name(bad), "{bad:?}");
        }
        assert!(!valid_name(&"x".repeat(101)));
    }

    #[test]
    fn the_hash_is_sha256_hex() {
        assert_eq!(
            hash(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
