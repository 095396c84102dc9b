//! The application above the hub: commands, flow runs, the OpenAI-compatible API, the
//! dashboard and MCP, built on one [`Hub`] (transport, registry, task queues, engine).
//! `App::start` opens the hub, wires the hooks it calls back through, and serves.
//!
//! The layering is one way: `app` (and `control`, `runner`, `foreman`, `api`, `dashboard`,
//! `mcp`) use `hub`; `hub` never names them. An `App` dereferences to its `Hub`, so code
//! above reads `app.registry`, `app.tasks`, `app.store` as it did when they were one type.

use std::net::SocketAddr;
use std::sync::{Arc, Weak};

use crate::config::HubConfig;
use crate::hub::registry::{Client, ConnState};
use crate::hub::{Hooks, Hub};
use crate::protocol::{Role, TaskState, Trouble};

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
    /// The command host: what the hub's hooks, the foreman cycle and the runner's command
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
    pub hub: Arc<App>,
    server: tokio::task::JoinHandle<()>,
}

impl RunningHub {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting, closes every socket with 1001 and waits for their tasks.
    pub async fn shutdown(self) {
        self.hub.shutdown.cancel();
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
        let hub = Hub::open(config).await?;
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
        let commands = Arc::new(crate::control::Commands::new(&hub.config, &hub.store));
        let loops = crate::agent_loop::Loops::new(
            asks.clone(),
            commands.jobs.clone(),
            commands.vars(),
            commands.memory.clone(),
            hub.config.agent.clone(),
        );
        let events = Arc::new(crate::events::Bus::new(hub.engine.node()));
        if hub.engine.clustered() {
            events.set_outbound(Arc::new(ToCluster(hub.engine.clone())));
        }
        let rules = Arc::new(crate::events::Rules::new(hub.store.clone()));
        let control = Arc::new_cyclic(|me: &Weak<crate::control::Control>| {
            let runner = crate::runner::Runner::new(
                hub.clone(),
                asks.clone(),
                Arc::new(RunWork(me.clone())),
            );
            let cards = commands.clone();
            let planner = crate::planner::Planner::new(
                hub.clone(),
                asks.clone(),
                runner.clone(),
                Box::new(move |client| cards.card_for(client)),
            );
            crate::control::Control {
                hub: hub.clone(),
                commands: commands.clone(),
                asks: asks.clone(),
                runner,
                planner: Arc::new(planner),
                loops: loops.clone(),
                mcp: Arc::new(crate::mcp_client::open(&hub.config)),
                bus: events.clone(),
                rules,
            }
        });
        let app = Arc::new(App {
            commands,
            runner: control.runner.clone(),
            api: Arc::new(crate::api::ApiState::new(
                hub.registry.clone(),
                hub.tasks.clone(),
            )),
            dashboard: Arc::default(),
            mcp: Arc::default(),
            asks,
            planner: control.planner.clone(),
            webhooks: webhooks.clone(),
            loops: loops.clone(),
            control,
            hub: hub.clone(),
        });
        loops.set_host(Arc::new(Primers(Arc::downgrade(&app.control))));
        hub.tracker.spawn(loops.clone().run(hub.shutdown.clone()));
        if let Some(target) = hub.config.memory_summarizer.clone() {
            // Off by default: memories go to a site only when the person says so.
            let every = hub.config.memory_summary_every;
            app.control.commands.memory.set_summary_every(every);
            hub.tracker.spawn(crate::control::summarize::run(
                app.control.clone(),
                target,
                every as usize,
                hub.shutdown.clone(),
            ));
        }
        hub.set_hooks(Arc::new(AppHooks(Arc::downgrade(&app))));
        let weak = Arc::downgrade(&app);
        hub.tasks
            .set_prompt_hook(Box::new(move |client, prompt, from_hub| {
                match weak.upgrade() {
                    Some(app) => {
                        let prompt = app.commands.with_memory(client, prompt);
                        if from_hub {
                            app.commands.with_card_prompt(client, prompt)
                        } else {
                            prompt
                        }
                    }
                    None => prompt,
                }
            }));
        app.mcp
            .set_skills(Arc::new(crate::mcp::skills::SkillTools::new(
                app.control.clone(),
            )));
        let weak = Arc::downgrade(&app);
        app.api.admission().set_usable(Box::new(move |client| {
            use crate::api::admission::Standby;
            use crate::decide::Standing;
            // An API prompt skips tabs the decision engine cools down or parked.
            let Some(app) = weak.upgrade() else {
                return Standby::Ready;
            };
            match crate::pick::health(&app.asks.pick, client).standing {
                Standing::Cooling(ms) => Standby::Later(std::time::Duration::from_millis(ms)),
                Standing::Waiting => Standby::Later(std::time::Duration::ZERO),
                Standing::Parked(t) => Standby::Person(t.as_str()),
                _ => Standby::Ready,
            }
        }));
        let weak = Arc::downgrade(&app);
        app.api.admission().set_timing(Box::new(move |client| {
            // The API's wait estimate: the decision engine's timing of every task the tab did.
            let now = crate::store::now_ms() as u64;
            match weak.upgrade() {
                Some(app) => app.asks.pick.decide.timing(&client.id, now),
                None => crate::decide::Decider::new().timing(&client.id, now),
            }
        }));
        let listener = hub.bind().await?;
        let addr = listener.local_addr()?;
        hub.tracker.spawn(crate::webhooks::follow_journal(
            hub.store.clone(),
            webhooks,
            hub.shutdown.clone(),
        ));
        hub.tracker.spawn(crate::events::follow_journal(
            hub.store.clone(),
            events,
            hub.shutdown.clone(),
        ));
        hub.tracker
            .spawn(crate::rules::run(app.control.clone(), hub.shutdown.clone()));
        hub.tracker.spawn(forward_published(
            app.control.bus.clone(),
            app.webhooks.clone(),
            hub.shutdown.clone(),
        ));
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
        let server = hub.serve(listener, router);
        Ok(RunningHub {
            addr,
            hub: app,
            server,
        })
    }

    /// The hub's routes and each door's, every door with the components it uses as its
    /// state.
    fn router(self: &Arc<Self>) -> axum::Router {
        let api = Arc::new(crate::api::Door {
            hub: self.hub.clone(),
            api: self.api.clone(),
            asks: self.asks.clone(),
            runner: self.runner.clone(),
            webhooks: self.webhooks.clone(),
            bus: self.control.bus.clone(),
            loops: self.loops.clone(),
        });
        let dashboard = Arc::new(crate::dashboard::Door {
            hub: self.hub.clone(),
            dashboard: self.dashboard.clone(),
            asks: self.asks.clone(),
            runner: self.runner.clone(),
            planner: self.planner.clone(),
            loops: self.loops.clone(),
            control: self.control.clone(),
        });
        let mcp = Arc::new(crate::mcp::Door {
            hub: self.hub.clone(),
            mcp: self.mcp.clone(),
            api: api.clone(),
            asks: self.asks.clone(),
            runner: self.runner.clone(),
            loops: self.loops.clone(),
        });
        crate::hub::routes()
            .with_state(self.hub.clone())
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
        self.tracker.spawn(async move {
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
        self.tracker.spawn(async move {
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

/// What runs ask of the layers above the runner: commands (`control`) and the foreman
/// cycle (`foreman`). Holds the command host weakly (it owns the runner).
struct RunWork(Weak<crate::control::Control>);

impl crate::runner::Work for RunWork {
    fn command<'a>(
        &'a self,
        master: Option<&'a str>,
        call: &'a crate::flows::engine::CommandCall,
    ) -> futures_util::future::BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            match self.0.upgrade() {
                Some(control) => crate::control::run_flow_command(&control, master, call).await,
                None => Err(STOPPING.into()),
            }
        })
    }

    fn foreman<'a>(
        &'a self,
        foreman: &'a Arc<Client>,
        req: crate::hub::tasks::TaskRequest,
    ) -> futures_util::future::BoxFuture<'a, Result<String, crate::hub::tasks::TaskError>> {
        Box::pin(async move {
            match self.0.upgrade() {
                Some(control) => crate::foreman::cycle(&control, foreman, req).await,
                None => Err(crate::hub::tasks::TaskError::TabLost(foreman.display())),
            }
        })
    }
}

/// The agent loop's primers, built where role cards, skills and memory are (`control`).
struct Primers(Weak<crate::control::Control>);

impl crate::agent_loop::LoopHost for Primers {
    fn primer(
        &self,
        tab: &Arc<Client>,
        agent: Option<&crate::agents::store::AgentRecord>,
        limits: &crate::agents::session::Limits,
        recalled: Option<&str>,
    ) -> String {
        match self.0.upgrade() {
            Some(control) => crate::control::primer(&control, tab, agent, limits, recalled),
            None => String::new(),
        }
    }
}

/// The hub's way back up: each frame the hub does not handle itself goes to commands or the
/// API. Holds the app weakly (the app owns the hub).
struct AppHooks(Weak<App>);

impl AppHooks {
    fn app(&self) -> Option<Arc<App>> {
        self.0.upgrade()
    }
}

impl Hooks for AppHooks {
    fn remote_call(&self, call: crate::hub::engine::RemoteCall) {
        if let Some(app) = self.app() {
            let control = app.control.clone();
            app.hub
                .tracker
                .spawn(crate::control::serve_remote(control, call));
        }
    }

    fn bus_event(&self, body: &[u8]) {
        let Some(app) = self.app() else { return };
        match serde_json::from_slice::<crate::events::Event>(body) {
            Ok(ev) if ev.origin != app.control.bus.origin() => app.control.bus.deliver(ev),
            Ok(_) => {}
            Err(e) => tracing::warn!("a bad event from another node: {e}"),
        }
    }

    fn card_role(&self, client: &Client) -> Option<(Role, Option<String>)> {
        self.app()?.commands.card_role(client)
    }

    fn free_chunk(&self, client: &Arc<Client>, turn_id: &str, seq: u64, text: &str) {
        if let Some(app) = self.app() {
            crate::control::on_chunk(&app.control, client, turn_id, seq, text);
        }
    }

    fn task_chunk(
        &self,
        client: &Arc<Client>,
        task_id: &str,
        turn_id: &str,
        text: &str,
        reasoning: Option<&str>,
    ) {
        if let Some(app) = self.app() {
            let now = crate::store::now_ms() as u64;
            if let Some(s) = app.asks.pick.decide.chunk(&client.id, now) {
                app.api.counters().first_chunk(&client.info().site, s);
            }
            app.api.on_chunk(client, task_id, turn_id, text, reasoning);
        }
    }

    fn turn_counted(&self, client: &Arc<Client>) {
        if let Some(app) = self.app() {
            crate::control::count_turn(&app.control, client);
        }
    }

    fn free_turn_end(&self, client: &Arc<Client>, turn_id: &str, text: &str) {
        if let Some(app) = self.app() {
            crate::control::on_turn_end(&app.control, client, turn_id, text);
        }
    }

    fn user_input(&self, client: &Arc<Client>, text: &str) {
        if let Some(app) = self.app() {
            // The person acted in the tab: a parked tab (captcha, login) works again.
            app.asks.pick.decide.unpark(&client.id);
            crate::control::on_user_input(&app.control, client, text);
        }
    }

    fn flow_report(
        &self,
        client: &Arc<Client>,
        report: &crate::protocol::FlowReport,
    ) -> Option<crate::protocol::ServerFrame> {
        let app = self.app()?;
        Some(crate::control::flow_report(&app.control, client, report))
    }

    fn flow_data(
        &self,
        client: &Arc<Client>,
        data: crate::protocol::FlowData,
    ) -> Option<crate::protocol::ServerFrame> {
        let app = self.app()?;
        crate::control::flow_data(&app.control, client, data)
    }

    fn delivery_held(&self, client: &Arc<Client>, deliver_id: &str) {
        if let Some(app) = self.app() {
            // The manual's `flow_report` is answered `wait` during the hold (control::seed_wire).
            app.commands.note_hold(&client.id);
            app.loops.held(&client.id, deliver_id);
        }
    }

    fn task_update(
        &self,
        client: &Arc<Client>,
        task_id: &str,
        state: TaskState,
        trouble: Option<Trouble>,
        current: bool,
    ) {
        if let Some(app) = self.app() {
            if current {
                crate::pick::on_task_update(&app.asks.pick, client, state, trouble);
            }
            app.api.on_update(task_id, state);
        }
    }

    fn task_answered(&self, client: &Arc<Client>, chars: usize) {
        if let Some(app) = self.app() {
            let now = crate::store::now_ms() as u64;
            if let Some(s) = app.asks.pick.decide.succeeded(&client.id, chars, now) {
                app.api.counters().task_time(&client.info().site, s);
            }
            app.api.wake();
        }
    }

    fn trouble_cleared(&self, client: &Arc<Client>) {
        if let Some(app) = self.app() {
            app.asks.pick.decide.unpark(&client.id);
        }
    }

    fn tasks_moved(&self) {
        if let Some(app) = self.app() {
            app.api.wake();
        }
    }

    fn shutdown(&self) {
        if let Some(app) = self.app() {
            app.control.mcp.shutdown();
            app.control.commands.jobs.shutdown();
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

impl crate::events::Outbound for ToCluster {
    fn send(&self, event: &crate::events::Event) {
        match serde_json::to_vec(event) {
            Ok(body) => self.0.publish_event(body),
            Err(e) => tracing::warn!("an event not sent to the cluster: {e}"),
        }
    }
}
