//! The application above the hub: commands, flow runs, the OpenAI-compatible API, the
//! dashboard and MCP, built on one [`Hub`] (transport, registry, task queues, engine).
//! `App::start` opens the hub, builds each service once from the bottom up, then the frame
//! handler (`AppHooks`, over the components it calls), and serves with it.
//!
//! The layering is one way: `app` (and `control`, `runner`, `foreman`, `api`, `dashboard`,
//! `mcp`) use `hub`; `hub` never names them. An `App` dereferences to its `Hub`, so code
//! above reads `app.registry`, `app.tasks`, `app.store` as it did when they were one type.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::config::HubConfig;
use crate::hub::registry::{Client, ConnState};
use crate::hub::{Hooks, Hub};
use crate::protocol::{TaskState, Trouble};

/// One running AIcard: the hub and everything that acts on what tabs say.
pub struct App {
    /// Transport, registry, task queues, store and the cluster engine.
    pub hub: Arc<Hub>,
    /// Scanners, variables, exec policy and role cards.
    pub commands: Arc<crate::control::Commands>,
    /// Flow runs in progress.
    pub runner: Arc<crate::runner::Runner>,
    /// The OpenAI-compatible API's admission and streams (`crate::api`).
    pub api: Arc<crate::api::ApiState>,
    /// The dashboard's login codes and sessions.
    pub dashboard: Arc<crate::dashboard::Sessions>,
    /// MCP runs and skill tools of the `/mcp` door (`crate::mcp`).
    pub mcp: Arc<crate::mcp::McpState>,
    /// Asking tabs: resolve, pick (the decision engine), submit, wait (`crate::ask`).
    pub asks: Arc<crate::ask::Asks>,
    /// Plan drafts, the plan cache and planning sessions (`manager plan`).
    pub planner: Arc<crate::planner::Planner>,
    /// The signed lifecycle callbacks of `--webhook` (none configured: publishing is free).
    pub webhooks: Arc<crate::webhooks::Webhooks>,
    /// The agent loop's sessions (docs/agents.md), on the ask service.
    pub loops: Arc<crate::agent_loop::Loops>,
    /// The command host: what the frame handler, the foreman cycle and the runner's command
    /// steps run through (holds the components above as it uses them).
    pub control: Arc<crate::control::Control>,
}

impl std::ops::Deref for App {
    type Target = Hub;

    fn deref(&self) -> &Hub {
        &self.hub
    }
}

/// A running app: its address and the way to stop it.
pub struct RunningHub {
    pub addr: SocketAddr,
    pub app: Arc<App>,
    server: tokio::task::JoinHandle<()>,
}

impl RunningHub {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting, closes every socket with 1001 and waits for their tasks.
    pub async fn shutdown(self) {
        self.app.shutdown.cancel();
        let _ = self.server.await;
    }

    /// Resolves when the hub has stopped (after a signal or `shutdown`).
    pub async fn wait(self) {
        let _ = self.server.await;
    }
}

impl App {
    /// Opens the store, loads or makes the token, binds the listener and serves.
    pub async fn start(config: HubConfig) -> anyhow::Result<RunningHub> {
        crate::http_client::install_provider();
        // Bottom up, each service once, each given what it uses when it is made.
        // Commands (role cards, memory) are made over the store before any task is submitted:
        // every prompt passes through them (`Tasks`' prompt hook).
        let (hub, commands) = Hub::open_with(config, |config, store| {
            let commands = Arc::new(crate::control::Commands::new(config, store));
            let shape = commands.clone();
            let prompt: crate::hub::tasks::PromptHook =
                Box::new(move |client, prompt, from_hub| {
                    let prompt = shape.with_memory(client, prompt);
                    match from_hub {
                        true => shape.with_card_prompt(client, prompt),
                        false => prompt,
                    }
                });
            let cards = commands.clone();
            let below = crate::hub::Below {
                prompt: Some(prompt),
                cards: Some(Box::new(move |client| cards.card_role(client))),
            };
            (commands, below)
        })
        .await?;
        // The secret is made (and kept in the data dir) only once a webhook asks for it.
        let secret = match hub.config.webhooks.is_empty() {
            true => String::new(),
            false => {
                crate::webhooks::secret(hub.config.webhook_secret.as_deref(), &hub.config.data_dir)?
            }
        };
        let webhooks = Arc::new(crate::webhooks::Webhooks::start(
            hub.config.webhooks.clone(),
            &secret,
            crate::webhooks::Delivery::default(),
            hub.shutdown.clone(),
            &hub.tracker,
        ));
        let asks = Arc::new(crate::ask::Asks::new(
            hub.clone(),
            crate::decide::Decider::new(),
        ));
        let mcp_clients = Arc::new(crate::mcp_client::open(&hub.config));
        let (loops, loop_actor) = crate::agent_loop::Loops::new(crate::agent_loop::LoopParts {
            asks: asks.clone(),
            store: hub.store.clone(),
            registry: hub.registry.clone(),
            jobs: commands.jobs.clone(),
            vars: commands.vars(),
            memory: commands.memory.clone(),
            settings: hub.config.agent.clone(),
            host: Arc::new(crate::control::primer(
                hub.clone(),
                commands.clone(),
                asks.clone(),
                mcp_clients.clone(),
            )),
        });
        let outbound: Option<Arc<dyn crate::events::BusOutbound>> = match hub.engine.clustered() {
            true => Some(Arc::new(ToCluster(hub.engine.clone()))),
            false => None,
        };
        let events = Arc::new(crate::events::Bus::new(hub.engine.node(), outbound));
        let rules = Arc::new(crate::events::Rules::new(hub.store.clone()));
        // The runner asks for commands and foreman cycles over a channel; the command host,
        // made next, serves it (`serve_work`).
        let (work, work_calls) = tokio::sync::mpsc::channel(WORK_CALLS);
        let runner = crate::runner::Runner::new(hub.clone(), asks.clone(), Arc::new(RunWork(work)));
        let cards = commands.clone();
        let planner = Arc::new(crate::planner::Planner::new(
            hub.clone(),
            asks.clone(),
            runner.clone(),
            Box::new(move |client| cards.card_for(client)),
        ));
        let control = Arc::new(crate::control::Control {
            hub: hub.clone(),
            commands: commands.clone(),
            asks: asks.clone(),
            runner: runner.clone(),
            planner: planner.clone(),
            loops: loops.clone(),
            mcp: mcp_clients,
            bus: events.clone(),
            rules,
        });
        crate::spawn::tracked(
            &hub.tracker,
            serve_work(control.clone(), work_calls, hub.shutdown.clone()),
        );
        let api = Arc::new(crate::api::ApiState::new(
            hub.registry.clone(),
            hub.tasks.clone(),
            admission_checks(&asks),
        ));
        let skills = crate::mcp::skills::SkillTools::new(control.clone());
        // Last, the frame handler over what it calls: the transports and the engine's event
        // loop get it when the hub serves.
        let hooks = Arc::new(AppHooks {
            control: control.clone(),
            commands: commands.clone(),
            asks: asks.clone(),
            api: api.clone(),
            loops: loops.clone(),
        });
        crate::spawn::tracked(&hub.tracker, wake_admission(hub.clone(), api.clone()));
        let app = Arc::new(App {
            commands,
            runner,
            api,
            dashboard: Arc::default(),
            mcp: Arc::new(crate::mcp::McpState::new(Some(Arc::new(skills)))),
            asks,
            planner,
            webhooks: webhooks.clone(),
            loops,
            control,
            hub: hub.clone(),
        });
        crate::spawn::tracked(&hub.tracker, loop_actor.run(hub.shutdown.clone()));
        if let Some(target) = hub.config.memory_summarizer.clone() {
            // Off by default: memories go to a site only when the person says so.
            let every = hub.config.memory_summary_every;
            app.control.commands.memory.set_summary_every(every);
            crate::spawn::tracked(
                &hub.tracker,
                crate::control::summarize::run(
                    app.control.clone(),
                    target,
                    every as usize,
                    hub.shutdown.clone(),
                ),
            );
        }
        let listener = hub.bind().await?;
        let addr = listener.local_addr()?;
        crate::spawn::tracked(
            &hub.tracker,
            crate::webhooks::follow_journal(hub.store.clone(), webhooks, hub.shutdown.clone()),
        );
        crate::spawn::tracked(
            &hub.tracker,
            crate::events::follow_journal(hub.store.clone(), events, hub.shutdown.clone()),
        );
        crate::spawn::tracked(
            &hub.tracker,
            crate::rules::run(app.control.clone(), hub.shutdown.clone()),
        );
        crate::spawn::tracked(
            &hub.tracker,
            forward_published(
                app.control.bus.clone(),
                app.webhooks.clone(),
                hub.shutdown.clone(),
            ),
        );
        // Quotas (docs/commands.md): the role cards', then those `?<tabs budget>!` kept.
        app.asks
            .pick
            .decide
            .set_card_quotas(&app.commands.roles.get().quotas());
        crate::pick::load_budgets(&app.asks.pick);
        app.runner.resume_all();
        app.clone().watch_role_cards();
        app.clone().flush_memory_turns();
        let router = app.router();
        let server = hub.serve(listener, router, hooks);
        Ok(RunningHub { addr, app, server })
    }

    /// The hub's routes and each door's, every door with the components it uses as its
    /// state (the hub's own, the hub and the frame handler, is given by `Hub::serve`).
    fn router(self: &Arc<Self>) -> axum::Router<Arc<crate::hub::TabDoor>> {
        let api = Arc::new(crate::api::ApiDoor {
            hub: self.hub.clone(),
            api: self.api.clone(),
            asks: self.asks.clone(),
            runner: self.runner.clone(),
            webhooks: self.webhooks.clone(),
            bus: self.control.bus.clone(),
            loops: self.loops.clone(),
        });
        let dashboard = Arc::new(crate::dashboard::DashboardDoor {
            hub: self.hub.clone(),
            dashboard: self.dashboard.clone(),
            asks: self.asks.clone(),
            runner: self.runner.clone(),
            planner: self.planner.clone(),
            loops: self.loops.clone(),
            control: self.control.clone(),
        });
        let mcp = Arc::new(crate::mcp::McpDoor {
            hub: self.hub.clone(),
            mcp: self.mcp.clone(),
            api: api.clone(),
            asks: self.asks.clone(),
            runner: self.runner.clone(),
            loops: self.loops.clone(),
        });
        crate::hub::routes()
            .merge(crate::api::routes().with_state(api))
            .merge(
                crate::dashboard::routes()
                    .route_layer(axum::middleware::from_fn_with_state(
                        dashboard.clone(),
                        crate::dashboard::guard,
                    ))
                    .with_state(dashboard),
            )
            .merge(crate::mcp::routes(mcp))
            .layer(axum::middleware::from_fn_with_state(
                self.api.counters().clone(),
                crate::api::metrics::count,
            ))
    }

    /// Writes the memory turns counted from replies once a second (one transaction for all
    /// of them), and a last time when the hub stops.
    fn flush_memory_turns(self: Arc<Self>) {
        let app = self.clone();
        crate::spawn::tracked(&self.tracker, async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                let stopping = tokio::select! {
                    _ = tick.tick() => false,
                    _ = app.shutdown.cancelled() => true,
                };
                if let Err(e) = app.commands.memory.flush() {
                    tracing::warn!("memory turns not written yet: {e}");
                }
                if stopping {
                    return;
                }
            }
        });
    }

    /// Reloads role cards when their files change and re-applies them to connected tabs.
    fn watch_role_cards(self: Arc<Self>) {
        let app = self.clone();
        crate::spawn::tracked(&self.tracker, async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(2));
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = app.shutdown.cancelled() => return,
                }
                if app.commands.roles.reload_if_changed() {
                    app.asks
                        .pick
                        .decide
                        .set_card_quotas(&app.commands.roles.get().quotas());
                    for c in app.registry.all() {
                        // Another node's tab gets its card from its own node.
                        if !c.is_remote() && c.state() == ConnState::Connected && app.apply_card(&c)
                        {
                            let _ = app.registry.send(&c.id, &app.welcome(&c));
                        }
                    }
                }
            }
        });
    }
}

/// What a door tells a caller when the app is gone.
const STOPPING: &str = "集线器正在停止 / the hub is stopping";

/// How many of the runner's calls wait for the command host at most.
const WORK_CALLS: usize = 64;

/// What a run asks of the layers above the runner, as a message: a `command:` node's
/// command (`control`), or a foreman stage's cycle (`foreman`); the answer comes back on
/// `reply`.
enum WorkCall {
    Command {
        master: Option<String>,
        call: crate::flows::engine::CommandCall,
        reply: tokio::sync::oneshot::Sender<Result<String, String>>,
    },
    Foreman {
        foreman: Arc<Client>,
        req: crate::hub::tasks::TaskRequest,
        reply: tokio::sync::oneshot::Sender<Result<String, crate::hub::tasks::TaskError>>,
    },
}

/// The runner's way to the command host: each call goes over a bounded channel to
/// [`serve_work`], which the app spawns once the host exists (the runner holds no host).
struct RunWork(tokio::sync::mpsc::Sender<WorkCall>);

impl crate::runner::Work for RunWork {
    fn command<'a>(
        &'a self,
        master: Option<&'a str>,
        call: &'a crate::flows::engine::CommandCall,
    ) -> futures_util::future::BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            let (reply, answer) = tokio::sync::oneshot::channel();
            let asked = WorkCall::Command {
                master: master.map(str::to_string),
                call: call.clone(),
                reply,
            };
            if self.0.send(asked).await.is_err() {
                return Err(STOPPING.into());
            }
            answer.await.unwrap_or_else(|_| Err(STOPPING.into()))
        })
    }

    fn foreman<'a>(
        &'a self,
        foreman: &'a Arc<Client>,
        req: crate::hub::tasks::TaskRequest,
    ) -> futures_util::future::BoxFuture<'a, Result<String, crate::hub::tasks::TaskError>> {
        Box::pin(async move {
            let lost = || Err(crate::hub::tasks::TaskError::TabLost(foreman.display()));
            let (reply, answer) = tokio::sync::oneshot::channel();
            let asked = WorkCall::Foreman {
                foreman: foreman.clone(),
                req,
                reply,
            };
            if self.0.send(asked).await.is_err() {
                return lost();
            }
            answer.await.unwrap_or_else(|_| lost())
        })
    }
}

/// Serves the runner's calls until the hub stops, each in a task of its own (a command may
/// start a run whose command node calls again).
async fn serve_work(
    control: Arc<crate::control::Control>,
    mut calls: tokio::sync::mpsc::Receiver<WorkCall>,
    shutdown: tokio_util::sync::CancellationToken,
) {
    loop {
        let call = tokio::select! {
            _ = shutdown.cancelled() => return,
            call = calls.recv() => match call { Some(c) => c, None => return },
        };
        let control = control.clone();
        let tracker = control.hub.tracker.clone();
        crate::spawn::tracked(&tracker, async move {
            match call {
                WorkCall::Command {
                    master,
                    call,
                    reply,
                } => {
                    let r =
                        crate::control::run_flow_command(&control, master.as_deref(), &call).await;
                    let _ = reply.send(r);
                }
                WorkCall::Foreman {
                    foreman,
                    req,
                    reply,
                } => {
                    let _ = reply.send(crate::foreman::cycle(&control, &foreman, req).await);
                }
            }
        });
    }
}

/// Admission's checks over the decision engine (below the doors): an API prompt skips tabs
/// the engine cools down or parked, and its wait estimate is the engine's timing of every
/// task the tab did.
fn admission_checks(asks: &Arc<crate::ask::Asks>) -> crate::api::admission::Checks {
    use crate::api::admission::Standby;
    use crate::decide::Standing;
    let health = asks.clone();
    let timing = asks.clone();
    crate::api::admission::Checks {
        usable: Some(Box::new(move |client| {
            match crate::pick::health(&health.pick, client).standing {
                Standing::Cooling(ms) => Standby::Later(std::time::Duration::from_millis(ms)),
                Standing::Waiting => Standby::Later(std::time::Duration::ZERO),
                Standing::Parked(t) => Standby::Person(t.as_str()),
                _ => Standby::Ready,
            }
        })),
        timing: Some(Box::new(move |client| {
            let now = crate::store::now_ms() as u64;
            timing.pick.decide.timing(&client.id, now)
        })),
    }
}

/// The frame handler: each frame the hub does not handle itself goes to commands, the agent
/// loop, the ask service's decision engine or the API. Built last, over the components it
/// calls (never the app), and handed to `Hub::serve`.
struct AppHooks {
    control: Arc<crate::control::Control>,
    commands: Arc<crate::control::Commands>,
    asks: Arc<crate::ask::Asks>,
    api: Arc<crate::api::ApiState>,
    loops: Arc<crate::agent_loop::Loops>,
}

impl Hooks for AppHooks {
    fn remote_call(&self, call: crate::hub::engine::RemoteCall) {
        let control = self.control.clone();
        crate::spawn::tracked(
            &self.control.hub.tracker,
            crate::control::serve_remote(control, call),
        );
    }

    fn bus_event(&self, body: &[u8]) {
        let bus = &self.control.bus;
        match serde_json::from_slice::<crate::events::Event>(body) {
            Ok(ev) if ev.origin != bus.origin() => bus.deliver(ev),
            Ok(_) => {}
            Err(e) => tracing::warn!("a bad event from another node: {e}"),
        }
    }

    fn free_chunk(&self, client: &Arc<Client>, turn_id: &str, seq: u64, text: &str) {
        crate::control::on_chunk(&self.control, client, turn_id, seq, text);
    }

    fn task_chunk(
        &self,
        client: &Arc<Client>,
        task_id: &str,
        turn_id: &str,
        text: &str,
        reasoning: Option<&str>,
    ) {
        let now = crate::store::now_ms() as u64;
        if let Some(s) = self.asks.pick.decide.chunk(&client.id, now) {
            client.with_info(|i| self.api.counters().first_chunk(&i.site, s));
        }
        self.api.on_chunk(client, task_id, turn_id, text, reasoning);
    }

    fn turn_counted(&self, client: &Arc<Client>) {
        crate::control::count_turn(&self.control, client);
    }

    fn free_turn_end(&self, client: &Arc<Client>, turn_id: &str, text: &str) {
        crate::control::on_turn_end(&self.control, client, turn_id, text);
    }

    fn user_input(&self, client: &Arc<Client>, text: &str) {
        // The person acted in the tab: a parked tab (captcha, login) works again.
        self.asks.pick.decide.unpark(&client.id);
        crate::control::on_user_input(&self.control, client, text);
    }

    fn flow_report(
        &self,
        client: &Arc<Client>,
        report: &crate::protocol::FlowReport,
    ) -> Option<crate::protocol::ServerFrame> {
        Some(crate::control::flow_report(&self.control, client, report))
    }

    fn flow_data(
        &self,
        client: &Arc<Client>,
        data: crate::protocol::FlowData,
    ) -> Option<crate::protocol::ServerFrame> {
        crate::control::flow_data(&self.control, client, data)
    }

    fn held(&self, client: &Arc<Client>, deliver_id: Option<&str>) {
        // A delivery's hold or a task's: the manual's `flow_report` is answered `wait`
        // during either (control::seed_wire).
        self.commands.note_hold(&client.id);
        if let Some(deliver_id) = deliver_id {
            self.loops.send(crate::agent_loop::TurnEvent::Held {
                tab: client.id.clone(),
                deliver_id: deliver_id.to_string(),
            });
        }
    }

    fn delivery_failed(
        &self,
        client: &Arc<Client>,
        deliver_id: &str,
        error: &str,
        _trouble: Option<Trouble>,
    ) {
        // A file of the delivery the site refused: the session pauses with the tab's words.
        self.loops
            .send(crate::agent_loop::TurnEvent::DeliveryFailed {
                tab: client.id.clone(),
                deliver_id: deliver_id.to_string(),
                error: error.to_string(),
            });
    }

    fn task_update(
        &self,
        client: &Arc<Client>,
        task_id: &str,
        state: TaskState,
        trouble: Option<Trouble>,
        current: bool,
    ) {
        if current {
            crate::pick::on_task_update(&self.asks.pick, client, state, trouble);
        }
        self.api.on_update(task_id, state);
    }

    fn task_answered(&self, client: &Arc<Client>, chars: usize) {
        let now = crate::store::now_ms() as u64;
        if let Some(s) = self.asks.pick.decide.succeeded(&client.id, chars, now) {
            client.with_info(|i| self.api.counters().task_time(&i.site, s));
        }
    }

    fn trouble_cleared(&self, client: &Arc<Client>) {
        self.asks.pick.decide.unpark(&client.id);
    }

    fn shutdown(&self) {
        self.control.mcp.shutdown();
        self.commands.jobs.shutdown();
    }
}

/// Admission serves its waiters again whenever the hub says a tab may have become free
/// (`Hub::moved`), until the hub stops.
async fn wake_admission(hub: Arc<Hub>, api: Arc<crate::api::ApiState>) {
    loop {
        tokio::select! {
            _ = hub.moved.notified() => api.wake(),
            _ = hub.shutdown.cancelled() => return,
        }
    }
}

/// `data_published` (every `publish`, docs/cluster.md) is a lifecycle event the journal does not
/// hold: hand it from the bus to the webhooks that ask for it.
async fn forward_published(
    bus: Arc<crate::events::Bus>,
    webhooks: Arc<crate::webhooks::Webhooks>,
    shutdown: tokio_util::sync::CancellationToken,
) {
    if webhooks.is_empty() {
        return;
    }
    let mut rx = bus.subscribe();
    loop {
        let ev = tokio::select! {
            ev = bus.next(&mut rx) => match ev { Some(ev) => ev, None => return },
            _ = shutdown.cancelled() => return,
        };
        // Each node calls back for its own publishes only.
        if ev.topic == "data_published" && ev.origin == bus.origin() {
            webhooks.publish("data_published", ev.data.clone());
        }
    }
}

/// Sends what this node's bus publishes to the other nodes (docs/cluster.md).
struct ToCluster(Arc<dyn crate::hub::engine::Engine>);

impl crate::events::BusOutbound for ToCluster {
    fn send(&self, event: &crate::events::Event) {
        match serde_json::to_vec(event) {
            Ok(body) => self.0.publish_event(body),
            Err(e) => tracing::warn!("an event not sent to the cluster: {e}"),
        }
    }
}
