//! The MCP door (docs/mcp.md), with `mcp_client` the only modules that name `rmcp` (pinned `~3.11`): its next
//! major version touches this directory only.
//!
//! - **Server**: [`server::HubTools`], one handler with eight tools over the tabs and the
//!   hub's resources ([`resources`]: tabs, flows, runs; read and subscribed to), served at
//!   `/mcp` on the hub's port (Streamable HTTP; Host, Origin and the bearer token checked
//!   before rmcp sees the request) and by `aicard mcp` on stdio ([`relay`]), which relays to
//!   the running hub. [`runs`] holds the runs behind `ask`, `fan_out` and `run_flow`.
//! - **Client**: the servers of `mcp.json` for `?<mcp list>!`, `?<mcp use …>!`,
//!   `?<mcp resources …>!`, `?<mcp read …>!` and flow nodes `mcp:` are [`crate::mcp_client`],
//!   below the command host.
//! - **Skills**: the [`ToolSource`] an [`McpState`] is made with shows up as
//!   `skill_NAME` tools after the eight; the app gives [`skills::SkillTools`], the skills
//!   of `skills/`.

pub mod doctor;
pub mod relay;
pub mod resources;
pub mod runs;
pub mod server;
pub mod skills;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::Value;

use crate::ask::Asks;
use crate::hub::Hub;
use crate::runner::Runner;

/// What the MCP tools reach, the state of `/mcp`: built by `app` from the components it
/// names, the hub's own parts through `Deref`.
pub struct McpDoor {
    pub hub: Arc<Hub>,
    /// MCP runs and the `skill_NAME` tools.
    pub mcp: Arc<McpState>,
    /// The API door: a prompt to a model's tab goes through its admission, as for `/v1`.
    pub api: Arc<crate::api::ApiDoor>,
    /// The decision engine's view of each tab.
    pub asks: Arc<Asks>,
    /// Flow runs (`run_flow`).
    pub runner: Arc<Runner>,
    /// Agents' sessions (`agent_task`).
    pub loops: Arc<crate::agent_loop::Loops>,
}

impl std::ops::Deref for McpDoor {
    type Target = Hub;

    fn deref(&self) -> &Hub {
        &self.hub
    }
}

/// A tool the skills seam offers (listed as `skill_NAME`).
#[derive(Debug, Clone)]
pub struct ExtraTool {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments (an object schema).
    pub input_schema: Value,
}

/// Where `skill_NAME` tools come from (the memory-and-skills work plugs in here).
pub trait ToolSource: Send + Sync {
    fn tools(&self) -> Vec<ExtraTool>;
    fn call(
        &self,
        name: &str,
        args: Value,
    ) -> Pin<Box<dyn Future<Output = Result<String, String>> + Send + '_>>;
}

/// The MCP door's share of a hub: the runs behind its tools and the `skill_NAME` tools.
#[derive(Default)]
pub struct McpState {
    pub runs: Arc<runs::Runs>,
    skills: Option<Arc<dyn ToolSource>>,
}

impl McpState {
    /// The door's state with the `skill_NAME` tools of `skills` (none: only the eight).
    pub fn new(skills: Option<Arc<dyn ToolSource>>) -> McpState {
        McpState {
            runs: Arc::default(),
            skills,
        }
    }

    pub fn skills(&self) -> Option<Arc<dyn ToolSource>> {
        self.skills.clone()
    }
}

/// The path of `mcp.json` in a data dir.
pub use crate::mcp_client::default_config_path;

/// `/mcp`: Streamable HTTP, behind the hub's checks.
pub fn routes<S: Clone + Send + Sync + 'static>(door: Arc<McpDoor>) -> Router<S> {
    let cfg = StreamableHttpServerConfig::default()
        .with_cancellation_token(door.shutdown.child_token())
        // Host and Origin are checked by `guard` with the hub's own rules (every loopback
        // name and port; chat sites, the hub, extensions, or no Origin), before rmcp.
        .disable_allowed_hosts()
        // Tools take files in base64 (docs/mcp.md "Files"): a call may be as large as a chat
        // request with files (rmcp's own cap is 4 MB). Read only after `guard`'s token check.
        .with_max_request_body_bytes(crate::api::attach::MAX_BODY as usize);
    let h = door.clone();
    let service = StreamableHttpService::new(
        move || Ok(server::HubTools::new(h.clone())),
        LocalSessionManager::default().into(),
        cfg,
    );
    Router::new()
        .route_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(door, guard))
}

/// Host and Origin first (403), then the bearer token (401), as for every door.
async fn guard(State(door): State<Arc<McpDoor>>, req: Request, next: Next) -> Response {
    match refusal(&door, req.headers()) {
        Some(refused) => refused,
        None => next.run(req).await,
    }
}

/// Why a request may not reach the tools, as its response; `None` when it may.
fn refusal(door: &McpDoor, headers: &HeaderMap) -> Option<Response> {
    if let Err((code, why)) = door.check_headers(headers) {
        return Some((code, why).into_response());
    }
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .unwrap_or("");
    if presented.is_empty() || !crate::hub::auth::token_matches(door.token(), presented) {
        return Some(
            (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer")],
                "令牌错误或缺失 / missing or wrong bearer token (the hub token: `aicard token`)",
            )
                .into_response(),
        );
    }
    None
}
