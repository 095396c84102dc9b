//! The MCP client of the command language: `?<mcp list>!`, `?<mcp use SERVER TOOL k=v…>!`,
//! `?<mcp resources SERVER>!`, `?<mcp read SERVER URI>!` and flow nodes `mcp: {server, tool,
//! args}`. Servers come from `mcp.json`; a stdio server starts
//! on first use, in its own process group, through [`crate::exec::spawn_service`] (the one
//! module that spawns processes); every call is timed out like exec (its process group killed
//! and the server restarted on next use), audited, and every server is killed on shutdown.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ReadResourceRequestParams, ResourceContents, Tool,
};
use serde_json::{Map, Value};

use super::config::{self, McpConfig, Server, Transport};
use super::pipe::{self, AnyHandler, ClientPipe, McpClient};
use crate::exec;

/// How long connecting (spawn + `initialize`) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Bytes of a tool's answer kept for the command result.
const MAX_RESULT_BYTES: usize = 256 * 1024;

struct ServerConn {
    client: McpClient,
    tools: Vec<Tool>,
}

/// The MCP servers of a hub and their live connections.
pub struct Clients {
    path: PathBuf,
    workspace: PathBuf,
    /// The exec timeout: a call's default limit.
    timeout: Duration,
    /// DER roots an https server is trusted by besides Mozilla's: tests only.
    test_roots: Vec<Vec<u8>>,
    conns: tokio::sync::Mutex<HashMap<String, Arc<ServerConn>>>,
    /// Stdio children by server name, killed on shutdown (outside any async lock).
    services: Mutex<HashMap<String, exec::Service>>,
    /// The tool names each server listed when it last connected, for the agent primer
    /// (which must not start a server to say what there is).
    seen: Mutex<HashMap<String, Vec<String>>>,
    closed: std::sync::atomic::AtomicBool,
}

/// The arguments of one tool call as written: literal JSON values, strings that may still
/// need coercion to the tool's schema.
pub type Args = Map<String, Value>;

impl Clients {
    pub fn new(path: PathBuf, workspace: PathBuf, timeout: Duration) -> Clients {
        Clients {
            path,
            workspace,
            timeout,
            test_roots: Vec::new(),
            conns: tokio::sync::Mutex::new(HashMap::new()),
            services: Mutex::new(HashMap::new()),
            seen: Mutex::new(HashMap::new()),
            closed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Also trusts `roots` (DER) for an https `url`: tests only (`HubConfig::test_roots`).
    pub fn trusting(mut self, roots: Vec<Vec<u8>>) -> Clients {
        self.test_roots = roots;
        self
    }

    /// The configuration file in use.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    fn config(&self) -> Result<McpConfig, String> {
        config::load(&self.path)
    }

    fn server(&self, name: &str) -> Result<Server, String> {
        let c = self.config()?;
        let s = c.servers.get(name).cloned().ok_or_else(|| {
            let known: Vec<&str> = c.servers.keys().map(String::as_str).collect();
            format!(
                "没有这个 MCP 服务器 / no MCP server `{name}` in {} (configured: {})",
                self.path.display(),
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            )
        })?;
        if s.disabled {
            return Err(format!(
                "MCP 服务器已停用 / MCP server `{name}` is disabled in its config"
            ));
        }
        Ok(s)
    }

    /// What the servers offer, without starting any: `server/tool` for each tool a server
    /// listed when it last connected, `server/*` for an enabled server not connected yet
    /// (`?<mcp list>!` shows its tools). Empty when there is no config.
    pub fn catalogue(&self) -> Vec<String> {
        let Ok(c) = self.config() else {
            return Vec::new();
        };
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = Vec::new();
        for (name, server) in &c.servers {
            if server.disabled {
                continue;
            }
            match seen.get(name) {
                Some(tools) if !tools.is_empty() => {
                    out.extend(tools.iter().map(|t| format!("{name}/{t}")))
                }
                _ => out.push(format!("{name}/*")),
            }
        }
        out
    }

    /// Process group ids of the stdio children alive now.
    pub fn pgids(&self) -> Vec<i32> {
        self.services
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter_map(|s| s.pgid())
            .collect()
    }

    /// Number of stdio children alive now (for tests and `mcp list`).
    pub fn children(&self) -> usize {
        self.services
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }

    async fn connect(&self, server: &Server, caller: &str) -> Result<Arc<ServerConn>, String> {
        if self.closed.load(std::sync::atomic::Ordering::Relaxed) {
            return Err("集线器正在关闭 / the hub is shutting down".into());
        }
        let mut conns = self.conns.lock().await;
        if let Some(c) = conns.get(&server.name) {
            if !c.client.is_closed() {
                return Ok(c.clone());
            }
            conns.remove(&server.name);
            self.kill(&server.name);
        }
        let name = server.name.clone();
        let client = match &server.transport {
            Transport::Stdio { command, args, env } => {
                let mut argv = vec![command.clone()];
                argv.extend(args.iter().cloned());
                let mut svc = exec::spawn_service(&name, &argv, env, &self.workspace, caller)
                    .map_err(|e| e.to_string())?;
                let (Some(stdout), Some(stdin)) = (svc.stdout.take(), svc.stdin.take()) else {
                    return Err("the server's pipes are missing".into());
                };
                self.services
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(name.clone(), svc);
                let r = tokio::time::timeout(
                    CONNECT_TIMEOUT,
                    pipe::connect(AnyHandler::new(()), ClientPipe::new((stdout, stdin))),
                )
                .await;
                match r {
                    Ok(Ok(c)) => c,
                    Ok(Err(e)) => {
                        self.kill(&name);
                        return Err(format!("`{name}` did not start as an MCP server: {e}"));
                    }
                    Err(_) => {
                        self.kill(&name);
                        return Err(format!(
                            "`{name}` did not answer `initialize` within {} s",
                            CONNECT_TIMEOUT.as_secs()
                        ));
                    }
                }
            }
            Transport::Http { url, headers } => {
                use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
                use rmcp::transport::StreamableHttpClientTransport;
                let mut cfg = StreamableHttpClientTransportConfig::with_uri(url.clone());
                let mut custom = HashMap::new();
                for (k, v) in headers {
                    if k.eq_ignore_ascii_case("authorization") {
                        let token = v.strip_prefix("Bearer ").unwrap_or(v);
                        cfg = cfg.auth_header(token.to_string());
                        continue;
                    }
                    let (Ok(k), Ok(v)) = (
                        axum::http::HeaderName::try_from(k.as_str()),
                        axum::http::HeaderValue::try_from(v.as_str()),
                    ) else {
                        return Err(format!("`{name}`: bad header `{k}`"));
                    };
                    custom.insert(k, v);
                }
                if !custom.is_empty() {
                    cfg = cfg.custom_headers(custom);
                }
                let http = crate::http_client::builder_trusting(&self.test_roots)
                    .and_then(|b| b.build().map_err(|e| e.to_string()))
                    .map_err(|e| format!("`{name}`: {e}"))?;
                let transport = StreamableHttpClientTransport::with_client(http, cfg);
                match tokio::time::timeout(
                    CONNECT_TIMEOUT,
                    pipe::connect(AnyHandler::new(()), ClientPipe::new(transport)),
                )
                .await
                {
                    Ok(Ok(c)) => c,
                    Ok(Err(e)) => return Err(format!("cannot reach `{name}` at {url}: {e}")),
                    Err(_) => {
                        return Err(format!(
                            "`{name}` at {url} did not answer within {} s",
                            CONNECT_TIMEOUT.as_secs()
                        ))
                    }
                }
            }
            Transport::Sse { url } => {
                return Err(format!(
                    "`{name}` ({url}) speaks the legacy HTTP+SSE transport, which AIcard does not; \
                     run it through a bridge such as `npx mcp-remote {url}` as a stdio server"
                ))
            }
        };
        // A server that offers no tools (resources only) is not asked for them.
        let has_tools = client
            .peer_info()
            .is_none_or(|i| i.capabilities.tools.is_some());
        let listed = async {
            if has_tools {
                client.list_all_tools().await
            } else {
                Ok(Vec::new())
            }
        };
        let tools = match tokio::time::timeout(self.call_timeout(server), listed).await {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => {
                self.kill(&name);
                return Err(format!("`{name}`: tools/list failed: {e}"));
            }
            Err(_) => {
                self.kill(&name);
                return Err(format!("`{name}`: tools/list timed out"));
            }
        };
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).insert(
            name.clone(),
            tools.iter().map(|t| t.name.to_string()).collect(),
        );
        let conn = Arc::new(ServerConn { client, tools });
        conns.insert(name, conn.clone());
        Ok(conn)
    }

    fn call_timeout(&self, server: &Server) -> Duration {
        server.timeout.unwrap_or(self.timeout)
    }

    fn kill(&self, name: &str) {
        if let Some(mut s) = self
            .services
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(name)
        {
            s.kill();
        }
    }

    /// Forgets a connection whose server misbehaved; the next use starts it again.
    async fn drop_conn(&self, name: &str) {
        self.conns.lock().await.remove(name);
        self.kill(name);
    }

    /// `?<mcp config add NAME COMMAND ARGS…>!`: writes the server into the config file; a
    /// running server of that name stops, so its next use starts the new command.
    pub async fn add_server(
        &self,
        name: &str,
        command: &str,
        args: &[String],
    ) -> Result<String, String> {
        let said = config::add_server(&self.path, name, command, args)?;
        self.drop_conn(name).await;
        Ok(said)
    }

    /// `?<mcp config remove NAME>!`: removes the server from the config file and stops it.
    pub async fn remove_server(&self, name: &str) -> Result<String, String> {
        let said = config::remove_server(&self.path, name)?;
        self.drop_conn(name).await;
        Ok(said)
    }

    /// `?<mcp list>!`: every server, and the tools of those that start.
    pub async fn list(&self, caller: &str) -> Result<String, String> {
        let c = self.config()?;
        let mut out = format!("MCP 服务器 / MCP servers ({}):\n", self.path.display());
        if c.servers.is_empty() {
            out.push_str(
                "  (none: add servers to mcp.json in Claude Desktop's `mcpServers` format)\n",
            );
        }
        for w in &c.warnings {
            out.push_str(&format!("  warning: {w}\n"));
        }
        for s in c.servers.values() {
            let kind = match &s.transport {
                Transport::Stdio { command, .. } => format!("stdio `{command}`"),
                Transport::Http { url, .. } => format!("http {url}"),
                Transport::Sse { url } => format!("sse {url} (unsupported)"),
            };
            if s.disabled {
                out.push_str(&format!("  {} — {kind} — disabled\n", s.name));
                continue;
            }
            audit(caller, &s.name, "tools/list", "allowed");
            match self.connect(s, caller).await {
                Ok(conn) => {
                    out.push_str(&format!(
                        "  {} — {kind} — {} tools\n",
                        s.name,
                        conn.tools.len()
                    ));
                    for t in &conn.tools {
                        let d = t.description.as_deref().unwrap_or("");
                        let d = d.lines().next().unwrap_or("");
                        out.push_str(&format!("    {} {}: {d}\n", t.name, params_of(t)));
                    }
                }
                Err(e) => out.push_str(&format!("  {} — {kind} — error: {e}\n", s.name)),
            }
        }
        Ok(out)
    }

    /// `?<mcp use SERVER TOOL …>!`: calls the tool; its text, or why it failed.
    pub async fn call(
        &self,
        caller: &str,
        server: &str,
        tool: &str,
        args: Args,
    ) -> Result<String, String> {
        let s = match self.server(server) {
            Ok(s) => s,
            Err(e) => {
                audit(caller, server, tool, &format!("refused: {e}"));
                return Err(e);
            }
        };
        let conn = match self.connect(&s, caller).await {
            Ok(c) => c,
            Err(e) => {
                audit(caller, server, tool, &format!("failed: {e}"));
                return Err(e);
            }
        };
        let Some(def) = conn.tools.iter().find(|t| t.name == tool) else {
            let names: Vec<&str> = conn.tools.iter().map(|t| t.name.as_ref()).collect();
            let e = format!(
                "`{server}` 没有工具 / has no tool `{tool}` (tools: {})",
                names.join(", ")
            );
            audit(caller, server, tool, &format!("refused: {e}"));
            return Err(e);
        };
        let args = coerce(def, args);
        let limit = self.call_timeout(&s);
        let call = conn
            .client
            .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args));
        match tokio::time::timeout(limit, call).await {
            Ok(Ok(r)) => {
                let failed = r.is_error == Some(true);
                audit(
                    caller,
                    server,
                    tool,
                    if failed { "tool error" } else { "allowed" },
                );
                let text = render(&r);
                if failed {
                    Err(text)
                } else {
                    Ok(text)
                }
            }
            Ok(Err(rmcp::ServiceError::McpError(e))) => {
                audit(caller, server, tool, &format!("failed: {}", e.message));
                Err(format!("`{server}` {tool}: {}", e.message))
            }
            Ok(Err(e)) => {
                audit(caller, server, tool, &format!("failed: {e}"));
                self.drop_conn(server).await;
                Err(format!("`{server}` {tool}: {e}"))
            }
            Err(_) => {
                audit(caller, server, tool, "timed out; process group killed");
                self.drop_conn(server).await;
                Err(format!(
                    "[超时 / timed out after {:.1} s; `{server}` stopped, it restarts on next use]",
                    limit.as_secs_f64()
                ))
            }
        }
    }

    /// The server `name`, started if need be, for one request (`what`, audited).
    async fn conn_for(
        &self,
        caller: &str,
        name: &str,
        what: &str,
    ) -> Result<(Server, Arc<ServerConn>), String> {
        let s = match self.server(name) {
            Ok(s) => s,
            Err(e) => {
                audit(caller, name, what, &format!("refused: {e}"));
                return Err(e);
            }
        };
        match self.connect(&s, caller).await {
            Ok(c) => Ok((s, c)),
            Err(e) => {
                audit(caller, name, what, &format!("failed: {e}"));
                Err(e)
            }
        }
    }

    /// A request's failure: the server's own error, or a broken or slow server (stopped; it
    /// starts again on next use).
    async fn failed(
        &self,
        caller: &str,
        server: &str,
        what: &str,
        limit: Duration,
        r: Result<rmcp::ServiceError, tokio::time::error::Elapsed>,
    ) -> String {
        match r {
            Ok(rmcp::ServiceError::McpError(e)) => {
                audit(caller, server, what, &format!("failed: {}", e.message));
                format!("`{server}` {what}: {}", e.message)
            }
            Ok(e) => {
                audit(caller, server, what, &format!("failed: {e}"));
                self.drop_conn(server).await;
                format!("`{server}` {what}: {e}")
            }
            Err(_) => {
                audit(caller, server, what, "timed out; process group killed");
                self.drop_conn(server).await;
                format!(
                    "[超时 / timed out after {:.1} s; `{server}` stopped, it restarts on next use]",
                    limit.as_secs_f64()
                )
            }
        }
    }

    /// `?<mcp resources SERVER>!`: the server's resources (URI, name, MIME type, what it is)
    /// and its resource templates.
    pub async fn resources(&self, caller: &str, server: &str) -> Result<String, String> {
        let what = "resources/list";
        let (s, conn) = self.conn_for(caller, server, what).await?;
        let limit = self.call_timeout(&s);
        let peer = conn.client.peer();
        if peer
            .peer_info()
            .is_some_and(|i| i.capabilities.resources.is_none())
        {
            audit(caller, server, what, "refused: no resources");
            return Err(format!(
                "`{server}` 不提供资源 / offers no resources (it has tools: ?<mcp list>!)"
            ));
        }
        let listed = async {
            let resources = peer.list_all_resources().await?;
            // Templates are optional for a server: none when it does not answer them.
            let templates = peer.list_all_resource_templates().await.unwrap_or_default();
            Ok::<_, rmcp::ServiceError>((resources, templates))
        };
        let (resources, templates) = match tokio::time::timeout(limit, listed).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => return Err(self.failed(caller, server, what, limit, Ok(e)).await),
            Err(e) => return Err(self.failed(caller, server, what, limit, Err(e)).await),
        };
        audit(caller, server, what, "allowed");
        let mut out = format!(
            "`{server}` 的资源 / resources of `{server}` ({}):\n",
            resources.len()
        );
        if resources.is_empty() {
            out.push_str("  (none)\n");
        }
        let line = |uri: &str, name: &str, mime: Option<&str>, about: Option<&str>| {
            let mut l = format!("  {uri} — {name}");
            if let Some(m) = mime {
                l.push_str(&format!(" ({m})"));
            }
            if let Some(d) = about
                .and_then(|d| d.lines().next())
                .filter(|d| !d.is_empty())
            {
                l.push_str(&format!(": {d}"));
            }
            l.push('\n');
            l
        };
        for r in &resources {
            out.push_str(&line(
                &r.uri,
                &r.name,
                r.mime_type.as_deref(),
                r.description.as_deref(),
            ));
        }
        if !templates.is_empty() {
            out.push_str("模板 / templates (?<mcp read SERVER URI>! with the {…} filled in):\n");
            for t in &templates {
                out.push_str(&line(
                    &t.uri_template,
                    &t.name,
                    t.mime_type.as_deref(),
                    t.description.as_deref(),
                ));
            }
        }
        Ok(out)
    }

    /// `?<mcp read SERVER URI>!`: a resource's text; for binary contents their MIME type and
    /// size (the bytes are not shown). Several contents are each headed by their URI.
    pub async fn read(&self, caller: &str, server: &str, uri: &str) -> Result<String, String> {
        let what = "resources/read";
        let (s, conn) = self.conn_for(caller, server, what).await?;
        let limit = self.call_timeout(&s);
        let read = conn
            .client
            .read_resource(ReadResourceRequestParams::new(uri.to_string()));
        let contents = match tokio::time::timeout(limit, read).await {
            Ok(Ok(r)) => r.contents,
            Ok(Err(e)) => return Err(self.failed(caller, server, what, limit, Ok(e)).await),
            Err(e) => return Err(self.failed(caller, server, what, limit, Err(e)).await),
        };
        audit(caller, server, what, "allowed");
        Ok(render_contents(uri, &contents))
    }

    /// Kills every stdio server (the hub is stopping); later calls are refused.
    pub fn shutdown(&self) {
        self.closed
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let all: Vec<_> = self
            .services
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .collect();
        for (name, mut s) in all {
            tracing::info!(server = %name, pgid = ?s.pgid(), "stopping MCP server");
            s.kill();
        }
    }
}

/// A resource's contents as a command shows them: a text as it is, a binary one as
/// `[二进制 / binary: MIME, N bytes]`; several each headed by their URI. Cut at the result cap.
fn render_contents(asked: &str, contents: &[ResourceContents]) -> String {
    let one = |c: &ResourceContents| match c {
        ResourceContents::TextResourceContents { text, .. } => text.clone(),
        ResourceContents::BlobResourceContents {
            blob, mime_type, ..
        } => format!(
            "[二进制 / binary: {}, {} bytes]",
            mime_type.as_deref().unwrap_or("application/octet-stream"),
            base64_len(blob)
        ),
        _ => "[未知内容 / contents of a kind this hub does not know]".to_string(),
    };
    let mut out = match contents {
        [] => format!("`{asked}`: 没有内容 / no contents"),
        [c] => one(c),
        many => many
            .iter()
            .map(|c| {
                let uri = match c {
                    ResourceContents::TextResourceContents { uri, .. }
                    | ResourceContents::BlobResourceContents { uri, .. } => uri.as_str(),
                    _ => asked,
                };
                format!("[{uri}]\n{}", one(c))
            })
            .collect::<Vec<_>>()
            .join("\n\n"),
    };
    if out.len() > MAX_RESULT_BYTES {
        let mut cut = MAX_RESULT_BYTES;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        let more = out.len() - cut;
        out.truncate(cut);
        out.push_str(&format!("\n[… {more} more bytes]"));
    }
    out
}

/// The bytes a base64 text stands for.
fn base64_len(b64: &str) -> usize {
    let t = b64.trim_end();
    let pad = t.bytes().rev().take_while(|&c| c == b'=').count();
    let chars = t.bytes().filter(|c| !c.is_ascii_whitespace()).count();
    (chars / 4 * 3).saturating_sub(pad.min(2))
}

fn audit(caller: &str, server: &str, tool: &str, decision: &str) {
    tracing::info!(target: "aicard::audit", caller, server, tool, decision, "mcp");
}

/// `key*` names of a tool's arguments (`*` = required), for `mcp list`.
fn params_of(t: &Tool) -> String {
    let required: Vec<&str> = t
        .input_schema
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let names: Vec<String> = t
        .input_schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| {
            p.keys()
                .map(|k| {
                    if required.contains(&k.as_str()) {
                        format!("{k}*")
                    } else {
                        k.clone()
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    format!("({})", names.join(", "))
}

/// `key=value` gives strings; a property the tool's schema types as a number, boolean,
/// array or object gets its JSON value instead.
pub fn coerce(tool: &Tool, mut args: Args) -> Args {
    let props = tool
        .input_schema
        .get("properties")
        .and_then(Value::as_object);
    for (k, v) in args.iter_mut() {
        let Value::String(s) = v else { continue };
        let ty = props
            .and_then(|p| p.get(k))
            .and_then(|p| p.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("string");
        if ty == "string" {
            continue;
        }
        if let Ok(parsed) = serde_json::from_str::<Value>(s.trim()) {
            let fits = matches!(
                (ty, &parsed),
                ("integer" | "number", Value::Number(_))
                    | ("boolean", Value::Bool(_))
                    | ("array", Value::Array(_))
                    | ("object", Value::Object(_))
                    | ("null", Value::Null)
            );
            if fits {
                *v = parsed;
            }
        }
    }
    args
}

/// A tool result as command output: its text blocks; else its structured content as JSON.
fn render(r: &CallToolResult) -> String {
    let mut out: Vec<String> = r
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect();
    if out.is_empty() {
        if let Some(v) = &r.structured_content {
            out.push(serde_json::to_string_pretty(v).unwrap_or_default());
        } else if !r.content.is_empty() {
            out.push(format!("({} non-text content blocks)", r.content.len()));
        }
    }
    let mut text = out.join("\n");
    if text.len() > MAX_RESULT_BYTES {
        let mut cut = MAX_RESULT_BYTES;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("\n…[输出已截断 / output truncated]");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalogue_names_tools_seen_and_servers_not_started_without_starting_any() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mcp.json");
        let clients = Clients::new(path.clone(), dir.path().into(), Duration::from_secs(5));
        assert!(clients.catalogue().is_empty(), "no config, nothing offered");
        std::fs::write(
            &path,
            r#"{"mcpServers": {
                "time": {"command": "uvx", "args": ["mcp-server-time"]},
                "files": {"command": "npx", "args": ["server-filesystem"]},
                "off": {"command": "x", "disabled": true}
            }}"#,
        )
        .unwrap();
        assert_eq!(clients.catalogue(), vec!["files/*", "time/*"]);
        clients.seen.lock().unwrap().insert(
            "time".into(),
            vec!["get_current_time".into(), "convert_time".into()],
        );
        assert_eq!(
            clients.catalogue(),
            vec!["files/*", "time/get_current_time", "time/convert_time"]
        );
        assert_eq!(clients.children(), 0, "listing started nothing");
    }
}
