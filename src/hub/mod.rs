//! The hub: the transport layer and its shared state (registry, task queues, store, the
//! cluster engine) and the HTTP/WebSocket server that tabs connect to. It knows nothing of
//! commands, flows or the API: those sit above it (`crate::app`), which builds them over the
//! hub's parts and last the frame handler ([`Hooks`]) that [`Hub::serve`] hands to the
//! transports ([`TabDoor`]) and to the cluster engine's events. The hub holds no handler: what
//! it says from its own methods goes out without calling up (tasks moved: [`Hub::moved`];
//! stopping: the shutdown token; a tab's role card: the lookup given to [`Hub::open_with`]).
//! `Hub::open` makes the state, `Hub::bind` + `Hub::serve` run the server.

pub mod auth;
mod cluster;
pub mod engine;
pub mod files;
pub mod hooks;
pub mod install;
pub mod outq;
pub mod paths;
mod queue;
pub mod registry;
mod serve;
mod sse;
pub mod tally;
pub mod tasks;
mod ws;
pub mod wsframe;
pub use ws::future_sizes;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::HubConfig;
use crate::protocol::{
    Chunk, ClientFrame, ErrorCode, Hello, Role, ServerFrame, TaskState, TaskUpdate, TurnEnd,
    UserInput, PROTOCOL_VERSION,
};
use crate::store::Store;
use auth::OriginPolicy;
pub use hooks::{Hooks, NoHooks};
use registry::{Client, ClientInfo, ConnState, Registry};
use tasks::Tasks;

/// The userscript bundle, embedded so the binary serves it from anywhere.
const USERSCRIPT: &str = include_str!("../../userscript/dist/aicard.user.js");

/// Everything a connection handler needs; one per running hub, shared behind an `Arc`.
pub struct Hub {
    pub config: HubConfig,
    token: String,
    origins: OriginPolicy,
    pub store: Store,
    pub registry: Arc<Registry>,
    pub tasks: Arc<Tasks>,
    /// Routing and presence between hubs: in-process (one node) or NATS (`--cluster`).
    pub engine: Arc<dyn engine::Engine>,
    /// Cancelled once on SIGINT/SIGTERM or `RunningHub::shutdown`.
    pub shutdown: CancellationToken,
    /// Owns every socket task (axum's `on_upgrade` tasks escape its graceful shutdown).
    pub tracker: TaskTracker,
    /// Live connections on all channels, checked against `limits.max_clients`.
    live: AtomicUsize,
    /// Filled in once the listener is bound.
    public_url: std::sync::OnceLock<String>,
    /// Connection life events, for the demo's display and for tests to wait on.
    pub events: tokio::sync::broadcast::Sender<HubEvent>,
    /// SSE event streams that sent `welcome` and wait for the tab's `ack`.
    sse_waiting: sse::Unconfirmed,
    /// One-time codes for the install link that carries the token (`install.rs`).
    pub install_codes: install::InstallCodes,
    /// Which path each answer took, per tab and per site (docs/reliability.md).
    pub paths: paths::Paths,
    /// The role and group a role card gives a tab (given at `open_with`; none for a bare hub).
    cards: Option<CardLookup>,
    /// Notified when a tab may have become free or connected (a reply, a failure, a
    /// connection, a tab another node gained or lost): whoever waits for a free tab tries again.
    pub moved: tokio::sync::Notify,
    /// What the cluster engine reports, until `serve` starts its loop with the frame handler
    /// (kept in the channel meanwhile).
    engine_events: Mutex<Option<tokio::sync::mpsc::Receiver<engine::EngineEvent>>>,
}

/// The role and group a role card gives a tab, if any: made by the layers above over the
/// store, before the hub (see [`Hub::open_with`]).
pub type CardLookup = Box<dyn Fn(&Client) -> Option<(Role, Option<String>)> + Send + Sync>;

/// What the layers above make over the store before the hub exists, for [`Hub::open_with`]:
/// how every prompt is shaped and which role card a tab gets.
#[derive(Default)]
pub struct Below {
    /// The task queues' prompt hook.
    pub prompt: Option<tasks::PromptHook>,
    /// The role cards' role and group for a tab.
    pub cards: Option<CardLookup>,
}

/// The state of the hub's own routes (the userscript, the two transports, files): the hub
/// and the frame handler the app built last, given by [`Hub::serve`]. Reads as the hub.
pub struct TabDoor {
    pub hub: Arc<Hub>,
    hooks: Arc<dyn Hooks>,
}

impl std::ops::Deref for TabDoor {
    type Target = Hub;

    fn deref(&self) -> &Hub {
        &self.hub
    }
}

/// Something that happened to a tab's connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HubEvent {
    Connected(String),
    Disconnected(String),
    /// Still gone after the grace period; its fail-over tasks were handed back.
    Lost(String),
    /// A flow run ended (`completed`, `failed` or `stopped`); its journal says so already.
    RunFinished {
        run_id: String,
        state: String,
    },
}

/// Why a `hello` was refused.
#[derive(Debug, thiserror::Error)]
pub enum HelloError {
    #[error("令牌错误 / bad token")]
    BadToken,
    #[error("未知的客户端 / unknown client id `{0}`")]
    UnknownClient(String),
    #[error(transparent)]
    TooLong(#[from] crate::protocol::FieldTooLong),
}

impl HelloError {
    pub fn code(&self) -> ErrorCode {
        match self {
            HelloError::BadToken => ErrorCode::BadToken,
            HelloError::UnknownClient(_) => ErrorCode::UnknownClient,
            HelloError::TooLong(_) => ErrorCode::Limit,
        }
    }
}

impl Hub {
    /// Opens the store and loads or makes the token: a hub that routes and queues but does
    /// not listen yet.
    pub async fn open(config: HubConfig) -> anyhow::Result<Arc<Hub>> {
        Ok(Hub::open_with(config, |_, _| ((), Below::default()))
            .await?
            .0)
    }

    /// Opens the hub as [`Hub::open`] does, with what the layers above build over its store
    /// before anything is submitted: `below` makes them from the settings and the store and
    /// says how every prompt is shaped and which role card a tab gets ([`Below`]); its first
    /// value comes back beside the hub.
    pub async fn open_with<T>(
        config: HubConfig,
        below: impl FnOnce(&HubConfig, &Store) -> (T, Below),
    ) -> anyhow::Result<(Arc<Hub>, T)> {
        let store = Store::open(&config.data_dir)
            .with_context(|| format!("opening the store in {}", config.data_dir.display()))?;
        let token = match &config.token {
            Some(t) if !t.is_empty() => t.clone(),
            _ => auth::load_or_create_token(&config.data_dir)
                .with_context(|| format!("reading the token in {}", config.data_dir.display()))?,
        };
        let (engine, engine_events) =
            engine::connect(config.cluster.as_ref(), config.timing.ping_interval).await?;
        let registry = Arc::new(
            Registry::new(store.clone(), config.limits.offline_frames)
                .with_offline_bytes(config.limits.offline_bytes)
                .with_engine(engine.clone()),
        );
        let files = Arc::new(files::Files::new(
            config.files_dir.clone(),
            config.data_dir.join("blobs"),
            config.max_file_mb * 1024 * 1024,
        ));
        let (built, below) = below(&config, &store);
        let tasks = Arc::new(Tasks::new(
            registry.clone(),
            config.limits.task_queue,
            files,
            below.prompt,
        ));
        let hub = Arc::new(Hub {
            engine,
            origins: OriginPolicy::new(&config.extra_origins),
            token,
            store,
            registry,
            tasks,
            shutdown: CancellationToken::new(),
            tracker: TaskTracker::new(),
            live: AtomicUsize::new(0),
            public_url: std::sync::OnceLock::new(),
            events: tokio::sync::broadcast::channel(1024).0,
            sse_waiting: sse::Unconfirmed::default(),
            install_codes: install::InstallCodes::default(),
            paths: paths::Paths::default(),
            cards: below.cards,
            moved: tokio::sync::Notify::new(),
            engine_events: Mutex::new(Some(engine_events)),
            config,
        });
        hub.start_cluster();
        Ok((hub, built))
    }

    /// A tab may have become free or connected: wakes whoever waits on [`Hub::moved`] (one
    /// waiter; a wake-up that finds no one waiting is kept for the next).
    pub fn tasks_moved(&self) {
        self.moved.notify_one();
    }

    /// Binds the listener and records the public URL.
    pub async fn bind(&self) -> anyhow::Result<tokio::net::TcpListener> {
        let listener = tokio::net::TcpListener::bind(self.config.bind)
            .await
            .with_context(|| format!("binding {}", self.config.bind))?;
        let addr = listener.local_addr()?;
        tracing::debug!(bytes = ?future_sizes(), "a connection's futures");
        let _ = self.public_url.set(format!("http://{addr}"));
        self.origins.set_port(addr.port());
        Ok(listener)
    }

    /// Serves `app` (the hub's own `routes()` merged with the layers above) until the
    /// shutdown token is cancelled, then closes every socket and waits for their tasks.
    /// `hooks`, the frame handler, is the state of the hub's routes ([`TabDoor`]: every
    /// socket's frames go to it) and hears the cluster engine's events; it is told
    /// `shutdown` once the token is cancelled, before the sockets close.
    pub fn serve(
        self: &Arc<Self>,
        listener: tokio::net::TcpListener,
        app: Router<Arc<TabDoor>>,
        hooks: Arc<dyn Hooks>,
    ) -> tokio::task::JoinHandle<()> {
        let token = self.shutdown.clone();
        let hub = self.clone();
        let bounds = serve::Bounds {
            header_read: self.config.timing.http_header_read,
            pending: self.config.limits.pending_connections,
        };
        let events = self
            .engine_events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(events) = events {
            self.start_engine_events(events, hooks.clone());
        }
        let app = app.with_state(Arc::new(TabDoor {
            hub: self.clone(),
            hooks: hooks.clone(),
        }));
        tokio::spawn(async move {
            serve::run(listener, app, bounds, token).await;
            hub.finish(&*hooks).await;
        })
    }

    async fn finish(&self, hooks: &dyn Hooks) {
        self.shutdown.cancel();
        hooks.shutdown();
        self.registry.close_all(registry::close::GOING_AWAY);
        self.tracker.close();
        if tokio::time::timeout(std::time::Duration::from_secs(5), self.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!("some connections did not close within 5 s");
        }
        for c in self.registry.all() {
            self.registry.persist(&c);
        }
        self.engine.leave().await;
    }

    /// Gives a tab the role and group its role card says; true if that changed anything.
    pub fn apply_card(&self, client: &Client) -> bool {
        let Some((role, group)) = self.cards.as_ref().and_then(|card| card(client)) else {
            return false;
        };
        let before = client.info();
        client.update_info(|i| {
            i.role = role;
            if group.is_some() {
                i.group = group.clone();
            }
        });
        let changed = client.info() != before;
        if changed {
            self.registry.persist(client);
            self.announce(client);
        }
        changed
    }

    pub fn token(&self) -> &str {
        &self.token
    }

    pub fn public_url(&self) -> String {
        self.public_url.get().cloned().unwrap_or_default()
    }

    /// A fresh one-time link that installs the userscript with the token in it.
    pub fn install_url(&self) -> String {
        format!(
            "{}/install/{}/aicard.user.js",
            self.public_url(),
            self.install_codes.mint()
        )
    }

    /// The checks every userscript request passes: Host and Origin, then Fetch Metadata.
    fn check_script_request(&self, headers: &HeaderMap) -> Result<(), (StatusCode, &'static str)> {
        self.check_headers(headers)?;
        install::check_fetch_metadata(headers).map_err(|why| (StatusCode::FORBIDDEN, why))
    }

    /// The userscript bundle with the hub URL filled in, and the token only when asked to.
    fn script_response(&self, with_token: bool) -> Response {
        let body = USERSCRIPT
            .replace("__AICARD_HUB_URL__", &self.public_url())
            .replace(
                "__AICARD_TOKEN__",
                if with_token { self.token() } else { "" },
            );
        (
            [
                (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
                (header::CACHE_CONTROL, "no-store"),
                (header::REFERRER_POLICY, "no-referrer"),
            ],
            body,
        )
            .into_response()
    }

    /// Host and Origin checks shared by every endpoint that a tab uses.
    pub(crate) fn check_headers(
        &self,
        headers: &HeaderMap,
    ) -> Result<(), (StatusCode, &'static str)> {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        if !auth::host_is_loopback(host) {
            return Err((
                StatusCode::FORBIDDEN,
                "Host 不是本机 / Host is not loopback",
            ));
        }
        let origin = match headers.get(header::ORIGIN) {
            None => None,
            Some(o) => Some(
                o.to_str()
                    .map_err(|_| (StatusCode::FORBIDDEN, "bad Origin"))?,
            ),
        };
        if !self.origins.allows(origin) {
            return Err((
                StatusCode::FORBIDDEN,
                "Origin 不被允许 / Origin not allowed",
            ));
        }
        Ok(())
    }

    /// Counts a new live connection unless the hub is full.
    fn admit_connection(&self) -> Option<LiveGuard<'_>> {
        let n = self.live.fetch_add(1, Ordering::AcqRel);
        if n >= self.config.limits.max_clients {
            self.live.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(LiveGuard(&self.live))
    }

    /// Checks a `hello`'s token and finds its tab: resumes a known id (same role, label,
    /// group), else registers a new tab.
    pub fn identify(&self, hello: Hello) -> Result<Arc<Client>, HelloError> {
        if !auth::token_matches(&self.token, &hello.token) {
            return Err(HelloError::BadToken);
        }
        // What a tab says about itself is kept (registry, store, `/metrics`): bounded.
        let hello = hello.bounded()?;
        let resumed = hello
            .client_id
            .as_deref()
            .filter(|id| !id.is_empty())
            .and_then(|id| self.registry.resume(id));
        let client = match resumed {
            Some(c) => {
                // A tab that was on another node is this node's from its hello here on.
                if c.is_remote() {
                    c.set_remote(None);
                }
                c.update_info(|i| {
                    i.url = hello.url.clone().or(i.url.take());
                    i.title = hello.title.clone().or(i.title.take());
                    if i.label.is_none() {
                        i.label = hello.label.clone();
                    }
                });
                self.registry.index(&c);
                c
            }
            None => self.registry.create(ClientInfo {
                site: if hello.site.is_empty() {
                    "unknown".into()
                } else {
                    hello.site.clone()
                },
                label: hello.label.clone(),
                role: hello.role.unwrap_or(Role::Worker),
                group: None,
                url: hello.url.clone(),
                title: hello.title.clone(),
            }),
        };
        // Labels are unique cluster-wide: one held by another connected tab, here or on
        // another node, is not given (the welcome says which label the tab got).
        if self.engine.clustered() {
            if let Some(l) = client
                .info()
                .label
                .filter(|l| self.registry.label_taken(l, &client.id))
            {
                tracing::warn!(client = %client.id, label = %l, "label already held in the cluster; not given");
                client.update_info(|i| i.label = None);
            }
        }
        // A matching role card wins over the role asked for in hello.
        self.apply_card(&client);
        self.registry.persist(&client);
        tracing::info!(client = %client.id, site = %client.info().site, "tab identified");
        Ok(client)
    }

    /// The `welcome` frame for a tab.
    pub fn welcome(&self, client: &Client) -> ServerFrame {
        let info = client.info();
        ServerFrame::Welcome {
            client_id: client.id.clone(),
            role: info.role,
            label: info.label,
            group: info.group,
            heartbeat_ms: self.config.timing.ping_interval.as_millis() as u64,
            protocol: PROTOCOL_VERSION,
            hold_ms: Some(self.config.agent.hold_ms),
        }
    }

    /// After the welcome and waiting frames went out: re-deliver or start tasks.
    /// `delivered`: the frames kept for the tab while it was away, sent after its `welcome`.
    pub fn after_welcome(&self, client: &Client, delivered: &[String]) {
        let _ = self.events.send(HubEvent::Connected(client.id.clone()));
        self.announce(client);
        self.tasks.on_connected(client, delivered);
        self.tasks_moved();
    }

    /// The connection ended; after the grace period a still-absent tab's tasks fail over.
    /// Returns false when a newer connection of the same tab had already taken over.
    pub fn connection_closed(self: &Arc<Self>, client: &Arc<Client>, conn_id: u64) -> bool {
        if !self.registry.detach(client, conn_id) {
            return false;
        }
        self.tab_detached(client);
        true
    }

    /// A tab's current connection ended (it was detached): tell whoever waits, and after the
    /// grace period fail over the tasks of a tab that is still away.
    pub fn tab_detached(self: &Arc<Self>, client: &Arc<Client>) {
        tracing::info!(client = %client.id, "tab disconnected");
        let _ = self.events.send(HubEvent::Disconnected(client.id.clone()));
        self.announce(client);
        let hub = self.clone();
        let client = client.clone();
        let grace = self.config.timing.lost_grace;
        self.tracker.spawn(async move {
            tokio::select! {
                _ = tokio::time::sleep(grace) => {}
                _ = hub.shutdown.cancelled() => return,
            }
            if client.state() == ConnState::Lost && !client.is_remote() {
                tracing::info!(client = %client.id, "tab lost; failing over its tasks");
                hub.tasks.on_lost(&client);
                if hub.engine.clustered() {
                    hub.engine.withdraw(&client.id);
                }
                let _ = hub.events.send(HubEvent::Lost(client.id.clone()));
            }
        });
    }
}

impl TabDoor {
    /// The frame handler, for a transport's frames that skip `handle_frame`.
    pub(crate) fn hooks(&self) -> &dyn Hooks {
        &*self.hooks
    }

    /// See [`Hub::tab_detached`].
    pub fn tab_detached(&self, client: &Arc<Client>) {
        self.hub.tab_detached(client);
    }

    /// See [`Hub::connection_closed`].
    pub fn connection_closed(&self, client: &Arc<Client>, conn_id: u64) -> bool {
        self.hub.connection_closed(client, conn_id)
    }

    /// Handles one frame after `hello`; returns a direct answer for the sender, if any.
    pub fn handle_frame(&self, client: &Arc<Client>, frame: ClientFrame) -> Option<ServerFrame> {
        client.touch();
        match frame {
            ClientFrame::Hello(_) => Some(ServerFrame::error(
                ErrorCode::HelloRequired,
                "hello 只能发送一次 / hello was already said on this connection",
            )),
            ClientFrame::Chunk(Chunk {
                turn_id,
                seq,
                text,
                reasoning,
            }) => {
                client.streamed();
                // A task's reply belongs to whoever asked; only free turns are scanned, and
                // only their answer text, never the model's thinking. The task queue notes
                // when a task's first chunk came.
                match self.tasks.on_chunk(client) {
                    None => self.hooks().free_chunk(client, &turn_id, seq, &text),
                    Some(task_id) => self.hooks().task_chunk(
                        client,
                        &task_id,
                        &turn_id,
                        &text,
                        reasoning.as_deref(),
                    ),
                }
                None
            }
            ClientFrame::FlowReport(report) => self.hooks().flow_report(client, &report),
            ClientFrame::FlowData(data) => self.hooks().flow_data(client, data),
            ClientFrame::TurnEnd(TurnEnd {
                turn_id,
                task_id,
                text,
                source,
            }) => {
                let site = client.with_info(|i| i.site.clone());
                if text.trim().is_empty() {
                    // An empty answer is never a success (docs/reliability.md): the adapter missed it. A
                    // task's fails as a parser miss (counted there); a free one is only counted.
                    tracing::warn!(client = %client.id, %site, "empty turn_end: parser miss");
                    let Some(id) = task_id.as_deref() else {
                        self.paths
                            .record(&client.id, &site, paths::AnswerPath::Empty);
                        return None;
                    };
                    let error = format!(
                        "parser_miss: {site} adapter found no answer (empty turn_end) / {site} 适配器没有解析到回复"
                    );
                    return self.handle_frame(
                        client,
                        ClientFrame::TaskUpdate(TaskUpdate {
                            task_id: id.to_string(),
                            deliver_id: None,
                            done: None,
                            of: None,
                            state: TaskState::Failed,
                            error: Some(error),
                            trouble: Some(crate::protocol::Trouble::ParserMiss),
                        }),
                    );
                }
                self.paths.record(&client.id, &site, source.into());
                let outcome = self.tasks.on_turn_end(client, task_id.as_deref(), &text);
                if matches!(
                    outcome,
                    Ok(tasks::TurnOutcome::Free | tasks::TurnOutcome::Answered)
                ) {
                    self.hooks().turn_counted(client);
                }
                match outcome {
                    // Commands in a free reply run if the tab's role lets its replies run
                    // them; a task's reply is data for whoever asked (the foreman cycle reads
                    // its own).
                    Ok(tasks::TurnOutcome::Free) => {
                        self.hooks().free_turn_end(client, &turn_id, &text);
                        None
                    }
                    Ok(tasks::TurnOutcome::Answered) => {
                        self.hooks().task_answered(client, text.chars().count());
                        self.tasks_moved();
                        None
                    }
                    Ok(tasks::TurnOutcome::Stale) => None,
                    Err(e) => Some(ServerFrame::error(ErrorCode::UnknownTask, e.to_string())),
                }
            }
            ClientFrame::UserInput(UserInput { text }) => {
                // A prompt the hub typed, echoed back by the page, is not the person speaking:
                // it may carry another model's words and must not get the person's authority.
                if client.was_typed_by_hub(&text) {
                    tracing::debug!(client = %client.id, "user_input echoes a hub task; not run");
                } else {
                    self.hooks().user_input(client, &text);
                }
                None
            }
            ClientFrame::TaskUpdate(TaskUpdate {
                task_id,
                deliver_id,
                state,
                error,
                trouble,
                ..
            }) => {
                client.streamed();
                if state == TaskState::Held
                    || (state == TaskState::Attaching && task_id.is_empty() && deliver_id.is_some())
                {
                    // The person types in the box (or the tab attaches a delivery's files): the
                    // tab holds what it was given, a delivery (`deliver_id`) or a task (`task_id`
                    // alone). A task keeps waiting under its own timeout; a delivery's arrival
                    // wait starts again.
                    let deliver_id = deliver_id.as_deref().filter(|id| !id.is_empty());
                    self.hooks().held(client, deliver_id);
                    return None;
                }
                if task_id.is_empty() {
                    if let (Some(id), TaskState::Failed) = (deliver_id.as_deref(), state) {
                        // An agent loop's delivery the tab could not send (a file the site
                        // refused): the loop is told; nothing was sent.
                        self.hooks().delivery_failed(
                            client,
                            id,
                            error.as_deref().unwrap_or(""),
                            trouble,
                        );
                        return None;
                    }
                    return Some(ServerFrame::error(
                        ErrorCode::BadFrame,
                        "task_update 需要 task_id / task_update needs a task_id (deliver_id only with state `held`, `attaching` or `failed`)",
                    ));
                }
                // Before the task ends: whoever waits on it re-picks with the cooldown known.
                let current = self
                    .tasks
                    .current(client)
                    .is_some_and(|(id, _)| id == task_id);
                self.hooks()
                    .task_update(client, &task_id, state, trouble, current);
                let answer = self
                    .tasks
                    .on_update(client, &task_id, state, error.as_deref())
                    .err()
                    .map(|e| ServerFrame::error(ErrorCode::UnknownTask, e.to_string()));
                if state == TaskState::Failed {
                    if trouble == Some(crate::protocol::Trouble::ParserMiss) {
                        let site = client.info().site;
                        self.paths
                            .record(&client.id, &site, paths::AnswerPath::Empty);
                    }
                    self.tasks_moved();
                }
                answer
            }
            ClientFrame::Heartbeat(hb) => Some({
                // No trouble any more: a person solved the check (un-parks a parked tab).
                if hb.trouble.is_none() {
                    self.hooks().trouble_cleared(client);
                }
                ServerFrame::Heartbeat {
                    time: crate::store::now_ms() as u64,
                }
            }),
            // Only the SSE transport acts on an ack (`sse::send` takes it before this).
            ClientFrame::Ack(_) => None,
        }
    }
}

/// Decrements the live-connection count when a connection ends.
struct LiveGuard<'a>(&'a AtomicUsize);

impl Drop for LiveGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The hub's own endpoints: the userscript and the two transports. Their state, the hub and
/// the frame handler ([`TabDoor`]), is given by [`Hub::serve`].
pub fn routes() -> Router<Arc<TabDoor>> {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/aicard.user.js", get(userscript))
        .route("/install/{code}/aicard.user.js", get(userscript_install))
        .route("/install-codes", post(new_install_code))
        .route("/realtime", get(ws::realtime))
        .route("/heartbeat", get(ws::heartbeat))
        .route("/events", get(sse::events))
        .route("/send", post(sse::send))
        .route("/files/{id}", get(serve_file))
}

/// `GET /files/ID`: a file of a task, for the connection that holds the task (the tab's
/// manager fetches it with the token and its client id; docs/files.md). Served as a download
/// that can never run on the hub's origin: `attachment`, `nosniff`, a sandbox CSP.
async fn serve_file(
    State(door): State<Arc<TabDoor>>,
    axum::extract::Path(id): axum::extract::Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Err(e) = door.check_headers(&headers) {
        return e.into_response();
    }
    if !install::bearer(&headers).is_some_and(|t| auth::token_matches(door.token(), t)) {
        return (StatusCode::UNAUTHORIZED, "令牌错误 / bad token").into_response();
    }
    let not_found = || {
        (
            StatusCode::NOT_FOUND,
            "没有这个文件，或它不属于这个标签页正在做的任务 / no such file for a task this tab holds",
        )
            .into_response()
    };
    let Some(client_id) = headers.get("x-aicard-client").and_then(|v| v.to_str().ok()) else {
        return not_found();
    };
    let Some(grant) = door.tasks.files.grant_of(&id, client_id) else {
        return not_found();
    };
    // A delivery's grant lasts until the agent loop revokes it; a task's while the tab holds it.
    let holds = grant.delivery
        || door
            .registry
            .get(client_id)
            .is_some_and(|c| door.tasks.holds(&c, &grant.task_id));
    if !holds {
        return not_found();
    }
    let bytes = match tokio::fs::read(door.tasks.files.blob_path(&grant.file)).await {
        Ok(b) => b,
        Err(_) => return not_found(),
    };
    let disposition = format!(
        "attachment; filename*=UTF-8''{}",
        grant
            .file
            .name
            .bytes()
            .map(|b| if b.is_ascii_alphanumeric() || b"._-".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            })
            .collect::<String>()
    );
    (
        [
            (header::CONTENT_TYPE, grant.file.mime.clone()),
            (header::CONTENT_DISPOSITION, disposition),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_string()),
            (header::CONTENT_SECURITY_POLICY, "sandbox".to_string()),
            (header::CACHE_CONTROL, "no-store".to_string()),
        ],
        bytes,
    )
        .into_response()
}

/// `GET /aicard.user.js`: the script any page may name, so without the token, unless the
/// request already holds it (`Authorization: Bearer`). See `install.rs`.
async fn userscript(State(door): State<Arc<TabDoor>>, headers: HeaderMap) -> Response {
    if let Err(e) = door.check_script_request(&headers) {
        return e.into_response();
    }
    let with_token =
        install::bearer(&headers).is_some_and(|t| auth::token_matches(door.token(), t));
    door.script_response(with_token)
}

/// `GET /install/{code}/aicard.user.js`: the script with the token, for a one-time code only
/// the person was shown.
async fn userscript_install(
    State(door): State<Arc<TabDoor>>,
    axum::extract::Path(code): axum::extract::Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Err(e) = door.check_script_request(&headers) {
        return e.into_response();
    }
    if !door.install_codes.redeem(&code) {
        return (
            StatusCode::FORBIDDEN,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "安装链接无效、已用过或已过期：运行 `aicard install` 取一个新的 / this install link is \
             unknown, used or expired: run `aicard install` for a fresh one\n",
        )
            .into_response();
    }
    door.script_response(true)
}

/// `POST /install-codes` (token only): a fresh install link, for `aicard install`.
async fn new_install_code(State(door): State<Arc<TabDoor>>, headers: HeaderMap) -> Response {
    if let Err(e) = door.check_headers(&headers) {
        return e.into_response();
    }
    if !install::bearer(&headers).is_some_and(|t| auth::token_matches(door.token(), t)) {
        return (StatusCode::UNAUTHORIZED, "令牌错误 / bad token").into_response();
    }
    let url = door.install_url();
    axum::Json(serde_json::json!({ "url": url })).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// What a frame handler heard.
    #[derive(Default)]
    struct Heard(Mutex<Vec<String>>);

    impl Hooks for Heard {
        fn held(&self, _client: &Arc<Client>, deliver_id: Option<&str>) {
            self.0.lock().unwrap().push(format!("held {deliver_id:?}"));
        }
        fn shutdown(&self) {
            self.0.lock().unwrap().push("shutdown".into());
        }
    }

    /// A hub with no app above it, served on port 0 with `hooks`; the URL of `POST /send`.
    async fn bare(
        dir: &std::path::Path,
        hooks: Arc<dyn Hooks>,
    ) -> (Arc<Hub>, String, tokio::task::JoinHandle<()>) {
        let hub = Hub::open(HubConfig::for_tests(dir.to_path_buf()))
            .await
            .unwrap();
        let listener = hub.bind().await.unwrap();
        let url = format!("{}/send", hub.public_url());
        let server = hub.serve(listener, routes(), hooks);
        (hub, url, server)
    }

    /// One frame over `POST /send` as tab `client`; the hub's answer.
    async fn send(url: &str, client: &str, frame: serde_json::Value) -> serde_json::Value {
        crate::http_client::plain()
            .post(url)
            .bearer_auth("test-token")
            .header(sse::CLIENT_HEADER, client)
            .body(frame.to_string())
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .map(|b| serde_json::from_slice(&b).unwrap())
            .unwrap()
    }

    /// The bare hub: served with `NoHooks`, it welcomes a tab and takes its frames, and stops.
    #[tokio::test]
    async fn a_bare_hub_serves_with_no_hooks() {
        let dir = tempfile::tempdir().unwrap();
        let (hub, url, server) = bare(dir.path(), Arc::new(NoHooks)).await;
        let hello = serde_json::json!({"type":"hello","token":"test-token","site":"sim"});
        let welcome = send(&url, "", hello).await;
        assert_eq!(welcome["type"], "welcome", "{welcome}");
        let id = welcome["client_id"].as_str().unwrap();
        let chunk = serde_json::json!({"type":"chunk","turn_id":"t1","seq":0,"text":"hi"});
        assert_eq!(send(&url, id, chunk).await["type"], "ack");
        hub.shutdown.cancel();
        tokio::time::timeout(std::time::Duration::from_secs(10), server)
            .await
            .expect("the bare hub stops")
            .unwrap();
    }

    /// The handler given to `serve` hears a tab's frames — a hold reported with its task only
    /// as well as a delivery's — and is told `shutdown` when the hub stops.
    #[tokio::test]
    async fn the_handler_given_to_serve_hears_frames_and_the_stop() {
        let dir = tempfile::tempdir().unwrap();
        let heard = Arc::new(Heard::default());
        let (hub, url, server) = bare(dir.path(), heard.clone()).await;
        let hello = serde_json::json!({"type":"hello","token":"test-token","site":"sim"});
        let welcome = send(&url, "", hello).await;
        let id = welcome["client_id"].as_str().unwrap();
        for held in [
            serde_json::json!({"type":"task_update","task_id":"t-1","state":"held"}),
            serde_json::json!({"type":"task_update","deliver_id":"d-1","state":"held"}),
        ] {
            assert_eq!(send(&url, id, held).await["type"], "ack");
        }
        hub.shutdown.cancel();
        tokio::time::timeout(std::time::Duration::from_secs(10), server)
            .await
            .expect("the hub stops")
            .unwrap();
        assert_eq!(
            *heard.0.lock().unwrap(),
            ["held None", "held Some(\"d-1\")", "shutdown"]
        );
    }
}
