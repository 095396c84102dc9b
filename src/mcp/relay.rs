//! `aicard mcp`: the stdio door (Claude Desktop only spawns stdio servers). It serves the same
//! tools and resources by relaying each call to the running hub's `/mcp` with the hub token,
//! and passes the hub's `notifications/progress` and `notifications/resources/updated` back.
//! When the hub is not running, `tools/list` still answers (the tools are fixed) and a call
//! says how to start the hub.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelledNotificationParam,
    ClientRequest, ContentBlock, InitializeResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ProgressToken, ReadResourceRequestParams, ReadResourceResponse, Request,
    ResourceUpdatedNotificationParam, ServerResult, SubscribeRequestParams, SubscriptionFilter,
    Tool, UnsubscribeRequestParams,
};
use rmcp::service::{
    NotificationContext, PeerRequestOptions, RequestContext, SubscriptionContext, SubscriptionSink,
};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{
    ClientHandler, ErrorData as McpError, Peer, RoleClient, RoleServer, ServerHandler, ServiceExt,
};

use crate::mcp_client::pipe::{self, AnyHandler, ClientPipe, McpClient};

/// The default hub address.
pub const DEFAULT_HUB: &str = "http://127.0.0.1:8027";

#[derive(Clone, Default)]
struct Up {
    down: Arc<OnceLock<Peer<RoleServer>>>,
    /// Progress tokens of relayed calls: rmcp gives each call to the hub a token of its own
    /// (it overwrites ours), so the hub's progress comes back under that token and must go
    /// down under the one the stdio client chose, or the client drops it.
    tokens: Arc<Mutex<HashMap<ProgressToken, ProgressToken>>>,
    /// Resource URIs the stdio client subscribed to: by `resources/subscribe` (true), and the
    /// `subscriptions/listen` streams that want them.
    watched: Arc<Mutex<HashMap<String, Watchers>>>,
}

#[derive(Default)]
struct Watchers {
    legacy: bool,
    /// Each listen stream's sink, by the stream's number.
    listens: Vec<(u64, SubscriptionSink)>,
}

impl ClientHandler for Up {
    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let (legacy, sinks): (bool, Vec<SubscriptionSink>) = {
            let w = self.watched.lock().unwrap_or_else(|e| e.into_inner());
            match w.get(&params.uri) {
                Some(w) => (w.legacy, w.listens.iter().map(|(_, s)| s.clone()).collect()),
                None => return,
            }
        };
        if let (true, Some(peer)) = (legacy, self.down.get()) {
            let _ = peer.notify_resource_updated(params.clone()).await;
        }
        for sink in sinks {
            let _ = sink.notify_resource_updated(params.uri.clone()).await;
        }
    }

    async fn on_progress(
        &self,
        mut params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let down = self.lock().get(&params.progress_token).cloned();
        if let (Some(peer), Some(token)) = (self.down.get(), down) {
            params.progress_token = token;
            let _ = peer.notify_progress(params).await;
        }
    }
}

impl Up {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ProgressToken, ProgressToken>> {
        self.tokens.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Forgets a call's token pair when the call ends, however it ends.
struct TokenPair<'a>(&'a Up, Option<ProgressToken>);

impl Drop for TokenPair<'_> {
    fn drop(&mut self) {
        if let Some(t) = self.1.take() {
            self.0.lock().remove(&t);
        }
    }
}

type Upstream = McpClient;

/// A client of the hub's `/mcp` with the token.
async fn connect(url: &str, token: &str, handler: Up) -> Result<Upstream, String> {
    let endpoint = format!("{}/mcp", url.trim_end_matches('/'));
    let cfg = StreamableHttpClientTransportConfig::with_uri(endpoint.clone()).auth_header(token);
    let transport = StreamableHttpClientTransport::with_client(crate::http_client::plain(), cfg);
    pipe::connect(AnyHandler::new(handler), ClientPipe::new(transport))
        .await
        .map_err(|e| format!("集线器无法连接 / cannot reach the hub at {endpoint}: {e}; is `aicard serve` running, and is the token right?"))
}

/// An MCP client of a hub (for the doctor and tests).
pub async fn hub_client(url: &str, token: &str) -> Result<McpClient, String> {
    let endpoint = format!("{}/mcp", url.trim_end_matches('/'));
    let cfg = StreamableHttpClientTransportConfig::with_uri(endpoint.clone()).auth_header(token);
    let transport = StreamableHttpClientTransport::with_client(crate::http_client::plain(), cfg);
    pipe::connect(AnyHandler::new(()), ClientPipe::new(transport))
        .await
        .map_err(|e| format!("cannot reach the hub at {endpoint}: {e}"))
}

struct Relay {
    url: String,
    token: String,
    up: Up,
    conn: tokio::sync::Mutex<Option<Arc<Upstream>>>,
}

impl Relay {
    async fn upstream(&self) -> Result<Arc<Upstream>, String> {
        let mut g = self.conn.lock().await;
        if let Some(c) = g.as_ref().filter(|c| !c.is_closed()) {
            return Ok(c.clone());
        }
        let c = Arc::new(connect(&self.url, &self.token, self.up.clone()).await?);
        *g = Some(c.clone());
        Ok(c)
    }

    async fn reset(&self) {
        *self.conn.lock().await = None;
    }
}

/// A relayed call failed: the hub is not running, or lost.
fn unreachable(e: impl std::fmt::Display) -> McpError {
    McpError::internal_error(
        format!("集线器不可用 / the hub is not reachable: {e}"),
        None,
    )
}

/// An upstream error as the stdio client's: the hub's own MCP error unchanged.
fn relayed(e: rmcp::ServiceError) -> McpError {
    match e {
        rmcp::ServiceError::McpError(e) => e,
        other => unreachable(other),
    }
}

impl Relay {
    fn watch(&self, uri: &str, f: impl FnOnce(&mut Watchers)) {
        let mut w = self.up.watched.lock().unwrap_or_else(|e| e.into_inner());
        let entry = w.entry(uri.to_string()).or_default();
        f(entry);
        if !entry.legacy && entry.listens.is_empty() {
            w.remove(uri);
        }
    }

    /// Subscribes upstream when the first watcher of `uri` comes; unsubscribes after the last.
    #[allow(deprecated)]
    async fn upstream_subscription(&self, uri: &str, on: bool) -> Result<(), McpError> {
        let up = self.upstream().await.map_err(unreachable)?;
        let r = if on {
            up.subscribe(SubscribeRequestParams::new(uri)).await
        } else {
            up.unsubscribe(UnsubscribeRequestParams::new(uri)).await
        };
        r.map_err(relayed)
    }
}

impl ServerHandler for Relay {
    fn get_info(&self) -> InitializeResult {
        super::server::info()
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let up = self.upstream().await.map_err(unreachable)?;
        up.list_resources(request).await.map_err(relayed)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let up = self.upstream().await.map_err(unreachable)?;
        up.list_resource_templates(request).await.map_err(relayed)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let up = self.upstream().await.map_err(unreachable)?;
        let params = ReadResourceRequestParams::new(request.uri);
        let r = up.read_resource(params).await.map_err(relayed)?;
        Ok(r.into())
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let _ = self.up.down.set(context.peer.clone());
        self.upstream_subscription(&request.uri, true).await?;
        self.watch(&request.uri, |w| w.legacy = true);
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let mut last = false;
        self.watch(&request.uri, |w| {
            w.legacy = false;
            last = w.listens.is_empty();
        });
        if last {
            self.upstream_subscription(&request.uri, false).await?;
        }
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // The hub's own resources; whether each exists, the hub says when subscribed.
        let uris: Vec<String> = requested
            .resource_subscriptions
            .iter()
            .flatten()
            .filter(|u| super::resources::Uri::parse(u).is_some())
            .cloned()
            .collect();
        Some(
            SubscriptionFilter::builder()
                .resource_subscriptions(uris)
                .build(),
        )
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        static STREAMS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let me = STREAMS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let uris: Vec<String> = context
            .accepted()
            .resource_subscriptions
            .clone()
            .unwrap_or_default();
        for uri in &uris {
            self.upstream_subscription(uri, true).await?;
            let sink = context.sink().clone();
            self.watch(uri, |w| w.listens.push((me, sink)));
        }
        context.cancelled().await;
        for uri in &uris {
            let mut last = false;
            self.watch(uri, |w| {
                w.listens.retain(|(n, _)| *n != me);
                last = !w.legacy && w.listens.is_empty();
            });
            if last {
                let _ = self.upstream_subscription(uri, false).await;
            }
        }
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let tools: Vec<Tool> = match self.upstream().await {
            Ok(up) => match up.list_all_tools().await {
                Ok(t) => t,
                Err(_) => {
                    self.reset().await;
                    super::server::tools()
                }
            },
            Err(_) => super::server::tools(),
        };
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let _ = self.up.down.set(context.peer.clone());
        let mut params = CallToolRequestParams::new(request.name.clone());
        if let Some(a) = request.arguments.clone() {
            params = params.with_arguments(a);
        }
        let down_token = context.meta.get_progress_token();
        for attempt in 0..2 {
            let up = match self.upstream().await {
                Ok(u) => u,
                Err(e) => return Ok(CallToolResult::error(vec![ContentBlock::text(e)]).into()),
            };
            let sent = up
                .peer()
                .send_cancellable_request(
                    ClientRequest::CallToolRequest(Request::new(params.clone())),
                    PeerRequestOptions::no_options(),
                )
                .await;
            let answer = match sent {
                Ok(handle) => {
                    let _pair = TokenPair(
                        &self.up,
                        down_token.clone().map(|t| {
                            self.up.lock().insert(handle.progress_token.clone(), t);
                            handle.progress_token.clone()
                        }),
                    );
                    let (peer, id) = (handle.peer.clone(), handle.id.clone());
                    tokio::select! {
                        r = handle.await_response() => r,
                        _ = context.ct.cancelled() => {
                            // The stdio client cancelled (Claude Desktop's stop): pass it up, so
                            // the hub cancels the run and its tabs get `cancel`.
                            let why = "cancelled by the stdio client / 客户端取消".to_string();
                            let _ = peer
                                .notify_cancelled(CancelledNotificationParam::new(Some(id), Some(why.clone())))
                                .await;
                            return Ok(CallToolResult::error(vec![ContentBlock::text(why)]).into());
                        }
                    }
                }
                Err(e) => Err(e),
            };
            match answer {
                Ok(ServerResult::CallToolResult(mut r)) => {
                    // The hub answered under the version the relay negotiated; the stdio
                    // client may speak a newer one, where `resultType` is required (rmcp
                    // drops it again for older ones).
                    if r.result_type.is_none() {
                        r.result_type = Some(rmcp::model::ResultType::COMPLETE);
                    }
                    return Ok(r.into());
                }
                Ok(_) => {
                    return Ok(CallToolResult::error(vec![ContentBlock::text(
                        "集线器的回答不是工具结果 / the hub's answer was not a tool result",
                    )])
                    .into())
                }
                Err(rmcp::ServiceError::McpError(e)) => return Err(e),
                Err(e) if attempt == 0 => {
                    tracing::warn!("hub connection lost ({e}); reconnecting");
                    self.reset().await;
                }
                Err(e) => {
                    return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                        "集线器连接中断 / lost the hub: {e}"
                    ))])
                    .into())
                }
            }
        }
        unreachable!("the loop returns")
    }
}

/// Serves the tools on stdin/stdout until the client closes them.
pub async fn serve_stdio(url: String, token: String) -> anyhow::Result<()> {
    let relay = Relay {
        url,
        token,
        up: Up::default(),
        conn: tokio::sync::Mutex::new(None),
    };
    if let Err(e) = relay.upstream().await {
        tracing::warn!("{e}");
    }
    let running = relay.serve(rmcp::transport::stdio()).await?;
    running.waiting().await?;
    Ok(())
}
