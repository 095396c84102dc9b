//! The dashboard's files, embedded in the binary (`include_bytes!` of the committed build in
//! `dashboard/dist/`), so tests and release serve the same bytes. ETag = content hash.

use std::sync::{Arc, OnceLock};

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use super::DashboardDoor;
use crate::hub::auth;

/// The page's own policy: scripts, styles and connections only from the hub; no inline script.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
    img-src 'self' data:; connect-src 'self'; font-src 'self'; object-src 'none'; \
    base-uri 'none'; frame-ancestors 'none'; form-action 'self'";

/// One embedded file.
pub struct Asset {
    pub name: &'static str,
    pub content_type: &'static str,
    pub bytes: &'static [u8],
}

/// Every file of `dashboard/dist/`.
pub const ASSETS: &[Asset] = &[
    Asset {
        name: "index.html",
        content_type: "text/html; charset=utf-8",
        bytes: include_bytes!("../../dashboard/dist/index.html"),
    },
    Asset {
        name: "app.js",
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../../dashboard/dist/app.js"),
    },
    Asset {
        name: "app.css",
        content_type: "text/css; charset=utf-8",
        bytes: include_bytes!("../../dashboard/dist/app.css"),
    },
];

/// FNV-1a 64 of the bytes, as the ETag (quoted).
fn hash(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("\"{h:016x}\"")
}

/// The ETag of each asset, in `ASSETS` order.
pub fn etags() -> &'static [String] {
    static TAGS: OnceLock<Vec<String>> = OnceLock::new();
    TAGS.get_or_init(|| ASSETS.iter().map(|a| hash(a.bytes)).collect())
}

/// Headers every dashboard page carries.
pub fn security_headers() -> [(header::HeaderName, &'static str); 4] {
    [
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_FRAME_OPTIONS, "DENY"),
    ]
}

fn serve(headers: &HeaderMap, name: &str) -> Response {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if !auth::host_is_loopback(host) {
        return (
            StatusCode::FORBIDDEN,
            "Host 不是本机 / Host is not loopback",
        )
            .into_response();
    }
    let Some(i) = ASSETS.iter().position(|a| a.name == name) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let asset = &ASSETS[i];
    let etag = etags()[i].as_str();
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let common = (
        security_headers(),
        [
            (header::ETAG, etag),
            (header::CACHE_CONTROL, "no-cache"),
            (header::CONTENT_TYPE, asset.content_type),
        ],
    );
    if matches {
        return (StatusCode::NOT_MODIFIED, common).into_response();
    }
    (common, asset.bytes).into_response()
}

/// `GET /`: the page.
pub async fn index(State(_hub): State<Arc<DashboardDoor>>, headers: HeaderMap) -> Response {
    serve(&headers, "index.html")
}

/// `GET /assets/{file}`.
pub async fn asset(Path(file): Path<String>, headers: HeaderMap) -> Response {
    if file == "index.html" {
        return StatusCode::NOT_FOUND.into_response();
    }
    serve(&headers, &file)
}
