//! The dashboard the hub serves at `/`: embedded assets (`assets`), one-time login codes and
//! session cookies (`login`), the JSON API under `/api/` (`api`, `runs`, `plans`, `agents`, the
//! designer's flow files in `flows`) and the live event
//! stream over SSE (`events`).
//!
//! Who may call `/api/*`: the `Host` must be a loopback name; an `Origin`, when sent, must be
//! the hub's own (`http://` + the `Host`); the request carries the hub's token
//! (`Authorization: Bearer …`) or a session cookie. A state-changing request with a cookie
//! also needs the same-origin `Origin` or the session's CSRF token in `X-CSRF-Token`.

pub mod agents;
pub mod api;
pub mod assets;
pub mod events;
pub mod flows;
pub mod login;
pub mod plans;
pub mod runs;
pub mod skills;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use rand::RngCore;

use crate::ask::Asks;
use crate::hub::{auth, Hub};
use crate::planner::Planner;
use crate::runner::Runner;

/// What the dashboard's handlers reach, the state of its routes: built by `app` from the
/// components it names, the hub's own parts through `Deref`.
pub struct DashboardDoor {
    pub hub: Arc<Hub>,
    /// Login codes and sessions.
    pub dashboard: Arc<Sessions>,
    /// The decision engine's view of each tab and of each pick.
    pub asks: Arc<Asks>,
    /// Flow runs: start, pause, resume, stop.
    pub runner: Arc<Runner>,
    /// Plan drafts: approve, reject, modify.
    pub planner: Arc<Planner>,
    /// Agents' sessions: the Agents page and its Stop.
    pub loops: Arc<crate::agent_loop::Loops>,
    /// The command host: a tab's role and group are set as `?<role …>!` sets them.
    pub control: Arc<crate::control::Control>,
}

impl std::ops::Deref for DashboardDoor {
    type Target = Hub;

    fn deref(&self) -> &Hub {
        &self.hub
    }
}

/// Name of the session cookie.
pub const COOKIE: &str = "aicard_session";
/// Header carrying the session's CSRF token on state-changing requests.
pub const CSRF_HEADER: &str = "x-csrf-token";
/// How long a login code is good for.
pub const CODE_TTL: Duration = Duration::from_secs(10 * 60);
/// How long a session lasts.
pub const SESSION_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// At most this many unused codes and live sessions are kept (oldest go first).
const MAX_CODES: usize = 64;
const MAX_SESSIONS: usize = 256;

/// One-time login codes and the sessions they opened (in memory: a restarted hub asks the
/// person to log in again with `aicard open`).
#[derive(Default)]
pub struct Sessions {
    inner: Mutex<SessionsInner>,
    /// The events of the live stream that are not journal rows, kept for resuming streams.
    pub recent: Arc<events::Recent>,
}

#[derive(Default)]
struct SessionsInner {
    codes: HashMap<String, Instant>,
    /// Session id → (CSRF token, expiry).
    sessions: HashMap<String, (String, Instant)>,
}

fn random_hex(bytes: usize) -> String {
    let mut b = vec![0u8; bytes];
    rand::rng().fill_bytes(&mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl Sessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, SessionsInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A fresh one-time login code, valid for [`CODE_TTL`].
    pub fn login_code(&self) -> String {
        let code = random_hex(16);
        let mut s = self.lock();
        let now = Instant::now();
        s.codes.retain(|_, exp| *exp > now);
        if s.codes.len() >= MAX_CODES {
            if let Some(oldest) = s
                .codes
                .iter()
                .min_by_key(|(_, e)| **e)
                .map(|(k, _)| k.clone())
            {
                s.codes.remove(&oldest);
            }
        }
        s.codes.insert(code.clone(), now + CODE_TTL);
        code
    }

    /// Spends a login code: a new session id, or `None` for an unknown, used or old code.
    pub fn redeem(&self, code: &str) -> Option<String> {
        let mut s = self.lock();
        let now = Instant::now();
        let found = s
            .codes
            .keys()
            .find(|k| auth::token_matches(k, code))
            .cloned()?;
        let exp = s.codes.remove(&found)?;
        if exp <= now {
            return None;
        }
        s.sessions.retain(|_, (_, e)| *e > now);
        if s.sessions.len() >= MAX_SESSIONS {
            if let Some(oldest) = s
                .sessions
                .iter()
                .min_by_key(|(_, (_, e))| *e)
                .map(|(k, _)| k.clone())
            {
                s.sessions.remove(&oldest);
            }
        }
        let id = random_hex(32);
        s.sessions
            .insert(id.clone(), (random_hex(16), now + SESSION_TTL));
        Some(id)
    }

    /// The CSRF token of a live session.
    pub fn csrf(&self, session: &str) -> Option<String> {
        let s = self.lock();
        let (csrf, exp) = s.sessions.get(session)?;
        (*exp > Instant::now()).then(|| csrf.clone())
    }

    /// Ends a session.
    pub fn logout(&self, session: &str) {
        self.lock().sessions.remove(session);
    }
}

/// How a request was allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// The hub's token (a program, `aicard open`).
    Token,
    /// A browser session: its id.
    Session(String),
}

/// The session cookie's value in a request, if any.
pub fn session_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.to_string())
}

/// Why a request was refused: its status and message.
#[derive(Debug)]
pub struct Refusal(pub StatusCode, pub &'static str);

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        (
            self.0,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            self.1,
        )
            .into_response()
    }
}

fn refuse(status: StatusCode, msg: &'static str) -> Refusal {
    Refusal(status, msg)
}

/// True when `origin` is the hub's own origin as reached through `host`.
fn same_origin(origin: &str, host: &str) -> bool {
    origin.eq_ignore_ascii_case(&format!("http://{host}"))
}

/// Every `/api` request passes [`authorize`] before its handler's extractors run, so a body
/// is never read or parsed for a caller who may not send it (a foreign Origin with a bad
/// body is 403, not 400). Applied with `route_layer` where the router is built.
pub async fn guard(
    axum::extract::State(hub): axum::extract::State<Arc<DashboardDoor>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if req.uri().path().starts_with("/api/") {
        if let Err(r) = authorize(&hub, req.method(), req.headers()) {
            return r.into_response();
        }
    }
    next.run(req).await
}

/// The checks of every `/api/*` request (see the module docs).
pub fn authorize(
    door: &DashboardDoor,
    method: &Method,
    headers: &HeaderMap,
) -> Result<Credential, Refusal> {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if !auth::host_is_loopback(host) {
        return Err(refuse(
            StatusCode::FORBIDDEN,
            "Host 不是本机 / Host is not loopback",
        ));
    }
    let origin = match headers.get(header::ORIGIN).map(|o| o.to_str()) {
        None => None,
        Some(Ok(o)) if same_origin(o, host) => Some(o),
        Some(_) => {
            return Err(refuse(
                StatusCode::FORBIDDEN,
                "Origin 不被允许 / Origin not allowed",
            ))
        }
    };
    if let Some(bearer) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    {
        return if auth::token_matches(door.token(), bearer.trim()) {
            Ok(Credential::Token)
        } else {
            Err(refuse(StatusCode::UNAUTHORIZED, "令牌错误 / bad token"))
        };
    }
    let Some(session) = session_cookie(headers) else {
        return Err(refuse(
            StatusCode::UNAUTHORIZED,
            "需要登录 / log in first: run `aicard open`",
        ));
    };
    let Some(csrf) = door.dashboard.csrf(&session) else {
        return Err(refuse(
            StatusCode::UNAUTHORIZED,
            "会话已过期 / session expired: run `aicard open`",
        ));
    };
    let safe = matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
    if !safe && origin.is_none() {
        let presented = headers
            .get(CSRF_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if !auth::token_matches(&csrf, presented) {
            return Err(refuse(
                StatusCode::FORBIDDEN,
                "缺少同源 Origin 或 CSRF 令牌 / same-origin Origin or CSRF token required",
            ));
        }
    }
    Ok(Credential::Session(session))
}

/// The dashboard's routes, merged into the hub's router.
pub fn routes() -> Router<Arc<DashboardDoor>> {
    Router::new()
        .route("/", get(assets::index))
        .route("/assets/{file}", get(assets::asset))
        .route("/login", get(login::login))
        .route("/logout", post(login::logout))
        .route("/api/session", get(api::session))
        .route("/api/login-codes", post(login::new_code))
        .route("/api/tabs", get(api::tabs))
        .route("/api/cluster", get(api::cluster))
        .route("/api/tabs/{id}/role", post(api::set_role))
        .route("/api/flows", get(api::flows))
        .route("/api/flows/validate", post(api::validate))
        .route("/api/flows/{name}", get(flows::get).put(flows::save))
        .route("/api/runs", get(api::runs).post(api::start_run))
        .route("/api/runs/{id}", get(api::run))
        .route("/api/runs/{id}/nodes/{node}", get(api::node))
        .route("/api/runs/{id}/{action}", post(api::control))
        .route("/api/events", get(events::events))
        .route("/api/plans", get(plans::list))
        .route("/api/plans/{id}", get(plans::get))
        .route("/api/plans/{id}/{action}", post(plans::answer))
        .route("/api/agents", get(agents::list))
        .route("/api/agents/sessions/{id}", get(agents::session))
        .route("/api/agents/sessions/{id}/{action}", post(agents::control))
        .route("/api/skills", get(skills::list))
        .route("/api/skills/{name}", get(skills::get).put(skills::save))
        .route("/api/skills/{name}/enable", post(skills::enable))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_one_time() {
        let s = Sessions::default();
        let code = s.login_code();
        let session = s.redeem(&code).expect("first use");
        assert!(s.redeem(&code).is_none());
        assert!(s.redeem("nope").is_none());
        assert!(s.csrf(&session).is_some());
        s.logout(&session);
        assert!(s.csrf(&session).is_none());
    }

    #[test]
    fn cookie_parsing() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            "a=1; aicard_session=xyz; b=2".parse().unwrap(),
        );
        assert_eq!(session_cookie(&h).as_deref(), Some("xyz"));
    }
}
