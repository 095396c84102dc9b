//! Every MCP client the hub makes (a stdio server's pipes, an HTTP server of `mcp.json`, the
//! relay's and the doctor's connection to the hub) as one handler type over one transport type,
//! so rmcp's client loop (`serve_inner`, the start-up handshake) is compiled once instead of
//! once per handler and transport pair: each copy was some 25,000 lines of LLVM IR in the
//! release build's thin-LTO step (docs/benchmarks.md, "The loop of minutes"). A message costs
//! a boxed future and a virtual call more, which a tool call does not feel.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;

use rmcp::model::{ClientConfig, ClientResult, ProtocolVersion, ServerNotification, ServerRequest};
use rmcp::service::{
    ClientInitializeError, DynService, MaybeSendFuture, NotificationContext, RequestContext,
    RunningService, RxJsonRpcMessage, TxJsonRpcMessage,
};
use rmcp::transport::{IntoTransport, Transport};
use rmcp::{ErrorData, RoleClient, ServiceExt};

/// A client's handler, whichever it is (`()`, the relay's). A struct rather than the bare box:
/// with `Box<dyn DynService>` as the service type, rustc loses the box's `'static` in the
/// futures that hold a client ("implementation of `Service` is not general enough").
pub struct AnyHandler(Box<dyn DynService<RoleClient>>);

impl AnyHandler {
    pub fn new(handler: impl rmcp::Service<RoleClient>) -> AnyHandler {
        AnyHandler(Box::new(handler))
    }
}

impl rmcp::Service<RoleClient> for AnyHandler {
    fn handle_request(
        &self,
        request: ServerRequest,
        context: RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<ClientResult, ErrorData>> + MaybeSendFuture + '_ {
        DynService::handle_request(&*self.0, request, context)
    }

    fn handle_notification(
        &self,
        notification: ServerNotification,
        context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = Result<(), ErrorData>> + MaybeSendFuture + '_ {
        DynService::handle_notification(&*self.0, notification, context)
    }

    fn get_info(&self) -> ClientConfig {
        DynService::get_info(&*self.0)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        DynService::supported_protocol_versions(&*self.0)
    }
}

/// A running MCP client: the peer to call, and the loop that serves it.
pub type McpClient = RunningService<RoleClient, AnyHandler>;

type PipeFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A transport's error, whichever the transport.
#[derive(Debug)]
pub struct PipeError(Box<dyn std::error::Error + Send + Sync>);

impl std::fmt::Display for PipeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for PipeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// rmcp's `Transport` as an object: its methods return boxed futures.
trait ErasedPipe: Send {
    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> PipeFuture<'static, Result<(), PipeError>>;
    fn receive(&mut self) -> PipeFuture<'_, Option<RxJsonRpcMessage<RoleClient>>>;
    fn close(&mut self) -> PipeFuture<'_, Result<(), PipeError>>;
}

impl<T: Transport<RoleClient> + 'static> ErasedPipe for T {
    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> PipeFuture<'static, Result<(), PipeError>> {
        let sent = Transport::send(self, item);
        Box::pin(async move { sent.await.map_err(|e| PipeError(Box::new(e))) })
    }

    fn receive(&mut self) -> PipeFuture<'_, Option<RxJsonRpcMessage<RoleClient>>> {
        Box::pin(Transport::receive(self))
    }

    fn close(&mut self) -> PipeFuture<'_, Result<(), PipeError>> {
        Box::pin(async move {
            Transport::close(self)
                .await
                .map_err(|e| PipeError(Box::new(e)))
        })
    }
}

/// Any client transport rmcp takes (a reader and writer pair, a streamable HTTP client), boxed.
pub struct ClientPipe(Box<dyn ErasedPipe>);

impl ClientPipe {
    pub fn new<E, A>(transport: impl IntoTransport<RoleClient, E, A>) -> ClientPipe
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        ClientPipe(Box::new(transport.into_transport()))
    }
}

impl Transport<RoleClient> for ClientPipe {
    type Error = PipeError;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), PipeError>> + Send + 'static {
        self.0.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.0.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), PipeError>> + Send {
        self.0.close()
    }
}

/// Starts an MCP client (`initialize`) with `handler` (`AnyHandler::new(())`, the relay's) over
/// `pipe`: the crate's one `serve` of a client.
pub async fn connect(
    handler: AnyHandler,
    pipe: ClientPipe,
) -> Result<McpClient, ClientInitializeError> {
    handler.serve(pipe).await
}
