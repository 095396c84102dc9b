//! The interpreter's ports over the hub ([`crate::commands::ports`]): asking tabs, flows,
//! memory, skills, MCP, events, roles, agents and the cluster, each handed to its own module.

use super::*;
use crate::commands::ports::{self, ExecSink as _};

/// The interpreter's view of the hub: every port of [`crate::commands::ports`].
pub(super) struct HubHost {
    /// The command host whose services every port reaches.
    pub(super) control: Arc<Control>,
    /// The task on whose behalf commands run (a foreman's), for subtasks' `parent_id`.
    pub(super) parent: Option<String>,
    /// Where live shell output goes: the tab whose command this is (None: nowhere, e.g. a
    /// foreman's or a flow's command, which get no `cmd_result` either).
    pub(super) live: Option<LiveOutput>,
    /// The rules whose commands this run is part of (empty outside a rule): what the events
    /// it publishes carry, so a rule never fires on its own.
    pub(super) cause: crate::events::Cause,
    /// For a command another node asked for: where its live output goes (that node), and how
    /// many pieces went.
    pub(super) remote: Option<RemoteOutput>,
}

/// `HubHost` provides every port the interpreter asks for.
const _: fn() = || {
    fn is_host<H: Host>() {}
    is_host::<HubHost>();
};

/// Live output of a command run for another node.
pub(super) struct RemoteOutput {
    pub(super) to: tokio::sync::mpsc::Sender<String>,
    pub(super) pieces: Arc<std::sync::atomic::AtomicU64>,
    pub(super) forwarders: tokio_util::task::TaskTracker,
}

/// The command whose shell output streams as `cmd_output`, and the forwarding tasks the
/// command's answer waits for.
pub(super) struct LiveOutput {
    pub(super) cmd_id: String,
    pub(super) command: String,
    pub(super) client_id: String,
    pub(super) forwarders: tokio_util::task::TaskTracker,
}

impl HubHost {
    /// Connected tabs a name resolves to; an error names the target when there are none.
    fn resolve(&self, target: &str) -> Result<Vec<Arc<Client>>, HostError> {
        self.control.asks.resolve(target).map_err(host_error)
    }

    /// How the ask service follows this caller's tasks: its subtasks carry `parent` (a
    /// foreman's task); a foreman's lost worker is replaced within its group.
    /// The foreman tab `target` names, when it names exactly one connected foreman that is
    /// not the caller itself (a foreman's own dispatch to its workers never recurses).
    fn foreman_named(&self, caller: &Caller, target: &str) -> Option<Arc<Client>> {
        let tabs = self.control.asks.resolve(target).ok()?;
        let [tab] = tabs.as_slice() else {
            return None;
        };
        (tab.info().role == Role::Foreman
            && tab.id != caller.client_id
            && caller.role != CmdRole::Worker
            && tab.state() == ConnState::Connected)
            .then(|| tab.clone())
    }

    /// The files a command names, read from the files folder and kept (docs/files.md).
    fn files(&self, names: &[String]) -> Result<Vec<crate::hub::files::FileRef>, HostError> {
        self.control
            .tasks
            .files
            .named_all(names)
            .map_err(|e| HostError::Other(e.to_string()))
    }

    fn ask_opts(&self, caller: &Caller) -> AskOpts {
        AskOpts {
            from: caller.client_id.clone(),
            parent: self.parent.clone(),
            regroup: caller
                .group
                .clone()
                .filter(|_| caller.role == CmdRole::Foreman),
            files: Vec::new(),
        }
    }
}

/// The command language's wording of an ask that got no answer.
pub(super) fn host_error(e: AskError) -> HostError {
    match e {
        AskError::UnknownTarget(t) => HostError::UnknownTarget(t),
        AskError::NotConnected(t) => HostError::NotConnected(t),
        AskError::Timeout { target } => HostError::Timeout { target, secs: 0 },
        AskError::Failed { target, message } => HostError::Failed { target, message },
    }
}

/// Asking tabs goes through the ask service; roles and cards through the command state.
impl ports::Tabs for HubHost {
    async fn ask(
        &self,
        caller: &Caller,
        target: &str,
        prompt: Prompt,
    ) -> Result<String, HostError> {
        if let Some(foreman) = self.foreman_named(caller, target) {
            // A foreman asked from a chat runs its cycle, as a flow's foreman stage does: its
            // split goes to its workers and the caller gets the merged answer, never the
            // foreman's raw split command.
            let timeout = self.control.config.timing.task_timeout;
            let mut req = crate::hub::tasks::TaskRequest::new(prompt, timeout);
            req.task_id = Some(format!("fc-{}", uuid::Uuid::new_v4().simple()));
            req.parent_id = Some(caller.client_id.clone());
            return self
                .control
                .runner
                .foreman_cycle(&foreman, req)
                .await
                .map_err(|e| HostError::Failed {
                    target: target.to_string(),
                    message: e.to_string(),
                });
        }
        let opts = self.ask_opts(caller);
        match self.control.asks.ask(target, prompt, &opts).await {
            Ok(answer) => Ok(answer.text),
            Err(e) => Err(host_error(e)),
        }
    }

    async fn ask_files(
        &self,
        caller: &Caller,
        target: &str,
        prompt: Prompt,
        files: Vec<String>,
    ) -> Result<String, HostError> {
        if files.is_empty() {
            return self.ask(caller, target, prompt).await;
        }
        let mut opts = self.ask_opts(caller);
        opts.files = self.files(&files)?;
        match self.control.asks.ask(target, prompt, &opts).await {
            Ok(answer) => Ok(answer.text),
            Err(e) => Err(host_error(e)),
        }
    }

    async fn ask_all_files(
        &self,
        caller: &Caller,
        work: Vec<(String, Prompt, Vec<String>)>,
    ) -> Vec<Result<String, HostError>> {
        // The common case, one list for every target: every prompt reaches its tab before
        // the first answer is awaited, as without files.
        let same = work.windows(2).all(|w| w[0].2 == w[1].2);
        let shared = work.first().map(|w| w.2.clone()).unwrap_or_default();
        if same {
            let mut opts = self.ask_opts(caller);
            match self.files(&shared) {
                Ok(f) => opts.files = f,
                Err(e) => return work.iter().map(|_| Err(e.clone())).collect(),
            }
            let plain = work.into_iter().map(|(t, p, _)| (t, p)).collect();
            return self
                .control
                .asks
                .ask_all(plain, &opts)
                .await
                .into_iter()
                .map(|r| r.map(|a| a.text).map_err(host_error))
                .collect();
        }
        let asks = work.into_iter().map(|(target, prompt, files)| async move {
            self.ask_files(caller, &target, prompt, files).await
        });
        futures_util::future::join_all(asks).await
    }

    /// Every prompt reaches its tab before the first answer is awaited (`Asks::ask_all`).
    async fn ask_all(
        &self,
        caller: &Caller,
        work: Vec<(String, Prompt)>,
    ) -> Vec<Result<String, HostError>> {
        let opts = self.ask_opts(caller);
        self.control
            .asks
            .ask_all(work, &opts)
            .await
            .into_iter()
            .map(|r| r.map(|a| a.text).map_err(host_error))
            .collect()
    }

    async fn last_reply(&self, target: &str) -> Result<String, HostError> {
        let tabs = self.resolve(target)?;
        tabs.iter()
            .find_map(|c| self.control.asks.latest_reply(&c.id))
            .ok_or_else(|| HostError::Failed {
                target: target.to_string(),
                message: "还没有回复 / no reply yet".into(),
            })
    }

    fn select(&self, selector: &Target) -> Vec<String> {
        let key = selector.to_string();
        self.control
            .registry
            .resolve(&key)
            .into_iter()
            .map(|c| c.display())
            .collect()
    }

    fn all_workers(&self) -> Vec<String> {
        self.control
            .registry
            .resolve("role:worker")
            .into_iter()
            .map(|c| c.display())
            .collect()
    }

    fn in_group(&self, target: &str, group: &str) -> bool {
        let tabs = self.control.registry.resolve(target);
        !tabs.is_empty()
            && tabs
                .iter()
                .all(|c| c.info().group.as_deref() == Some(group))
    }

    fn card_test(
        &self,
        caller: &Caller,
        card: Option<&str>,
    ) -> Result<(String, String), HostError> {
        let cards = self.control.commands.roles.get();
        let found = match card {
            Some(name) => cards.by_name(name).cloned().ok_or_else(|| {
                HostError::Other(format!("没有角色卡 {name} / no role card `{name}`"))
            })?,
            None => {
                let tab = self
                    .control
                    .registry
                    .get(&caller.client_id)
                    .ok_or_else(|| {
                        HostError::Other("这个标签页不在线 / this tab is not connected".into())
                    })?;
                self.control.commands.card_for(&tab).ok_or_else(|| {
                    HostError::Other(
                        "这个标签页没有角色卡 / no role card applies to this tab: name one, ?‹role test CARD›!"
                            .into(),
                    )
                })?
            }
        };
        let test = found.test_command.clone().ok_or_else(|| {
            HostError::Other(format!(
                "角色卡 {} 没有 test_command / card `{}` has no test_command",
                found.name, found.name
            ))
        })?;
        Ok((found.name, test))
    }

    async fn set_role(
        &self,
        caller: &Caller,
        role: CmdRole,
        group: Option<String>,
    ) -> Result<String, HostError> {
        set_tab_role(&self.control, &caller.client_id, role_from_cmd(role), group)
    }
}

/// `on NODE:` over the cluster engine: the command travels as a [`RemoteRequest`].
impl ports::Cluster for HubHost {
    fn node(&self) -> String {
        self.control.engine.node().to_string()
    }

    async fn on_node(
        &self,
        caller: &Caller,
        node: &str,
        command: &str,
        vars: BTreeMap<String, String>,
    ) -> Result<(bool, String), HostError> {
        let shown = match self.control.registry.get(&caller.client_id) {
            Some(c) => c.display(),
            None => caller.client_id.clone(),
        };
        let request = RemoteRequest {
            command: command.to_string(),
            client_id: caller.client_id.clone(),
            shown,
            role: caller.role.as_str().to_string(),
            group: caller.group.clone(),
            person: caller.is_person(),
            shell: caller.permissions.shell,
            vars,
        };
        let body = serde_json::to_vec(&request).map_err(|e| HostError::Other(e.to_string()))?;
        // The node's own exec timeout bounds the command; this bounds the wait for its answer.
        let wait = self.control.commands.exec.timeout + REMOTE_MARGIN;
        let (tx, mut rx) = tokio::sync::mpsc::channel::<String>(64);
        let live = self.exec_output(caller);
        let forward = tokio::spawn(async move {
            while let Some(text) = rx.recv().await {
                if let Some(live) = &live {
                    let stream = match text.strip_prefix("[stderr] ") {
                        Some(_) => crate::exec::OutputStream::Stderr,
                        None => crate::exec::OutputStream::Stdout,
                    };
                    let text = text.strip_prefix("[stderr] ").unwrap_or(&text).to_string();
                    let _ = live.send(ExecChunk { stream, text }).await;
                }
            }
        });
        let answer = self.control.engine.call_node(node, body, tx, wait).await;
        let _ = forward.await;
        let answer = answer.map_err(HostError::Other)?;
        let answer: RemoteAnswer = serde_json::from_slice(&answer).map_err(|e| {
            HostError::Other(format!(
                "节点 `{node}` 的回答无效 / a bad answer from node `{node}`: {e}"
            ))
        })?;
        Ok((answer.success, answer.output))
    }
}

impl ports::ExecSink for HubHost {
    /// Live output of a shell command goes to the tab that ran it as `cmd_output` frames.
    fn exec_output(&self, _caller: &Caller) -> Option<tokio::sync::mpsc::Sender<ExecChunk>> {
        if let Some(remote) = &self.remote {
            let (tx, mut rx) = tokio::sync::mpsc::channel::<ExecChunk>(64);
            let (to, pieces) = (remote.to.clone(), remote.pieces.clone());
            self.control
                .tracker
                .spawn(remote.forwarders.track_future(async move {
                    while let Some(chunk) = rx.recv().await {
                        let text = match chunk.stream {
                            crate::exec::OutputStream::Stderr => format!("[stderr] {}", chunk.text),
                            _ => chunk.text,
                        };
                        if to.send(text).await.is_ok() {
                            pieces.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                }));
            return Some(tx);
        }
        let live = self.live.as_ref()?;
        let client = self.control.registry.get(&live.client_id)?;
        let (tx, mut rx) = tokio::sync::mpsc::channel::<ExecChunk>(64);
        let control = self.control.clone();
        let (cmd_id, command) = (live.cmd_id.clone(), live.command.clone());
        // Tracked twice: by the hub (shutdown waits for it) and by the command, whose
        // `cmd_result` goes out only after its last `cmd_output`.
        self.control
            .tracker
            .spawn(live.forwarders.track_future(async move {
                while let Some(chunk) = rx.recv().await {
                    let chunk = match chunk.stream {
                        crate::exec::OutputStream::Stderr => format!("[stderr] {}", chunk.text),
                        _ => chunk.text,
                    };
                    let frame = ServerFrame::CmdOutput {
                        cmd_id: cmd_id.clone(),
                        command: command.clone(),
                        chunk,
                    };
                    let _ = control.registry.send(&client.id, &frame);
                }
            }));
        Some(tx)
    }
}

/// Memory, skills, MCP, events and agents: each handed to its own module of the hub.
impl ports::Services for HubHost {
    fn memory(&self) -> Option<Arc<crate::memory::Memory>> {
        Some(self.control.commands.memory.clone())
    }

    fn skills(&self) -> Option<Arc<crate::skills::SkillSet>> {
        Some(self.control.commands.skills.get())
    }

    fn result_file(&self, caller: &Caller, file: &crate::skills::KeptFile) -> bool {
        // A skill's file goes with the caller's next agent results message (docs/files.md).
        self.control.loops.result_file(
            &caller.client_id,
            crate::hub::files::FileRef {
                sha256: file.sha256.clone(),
                name: file.name.clone(),
                mime: file.mime.clone(),
                size: file.size,
            },
        )
    }

    async fn mcp(&self, caller: &Caller, request: McpRequest) -> Result<String, HostError> {
        let clients = &self.control.mcp;
        match request {
            McpRequest::List => clients.list(&caller.client_id).await,
            McpRequest::Use { server, tool, args } => {
                clients.call(&caller.client_id, &server, &tool, args).await
            }
            McpRequest::ConfigAdd {
                name,
                command,
                args,
            } => clients.add_server(&name, &command, &args).await,
            McpRequest::ConfigRemove(name) => clients.remove_server(&name).await,
            McpRequest::Resources(server) => clients.resources(&caller.client_id, &server).await,
            McpRequest::Read { server, uri } => {
                clients.read(&caller.client_id, &server, &uri).await
            }
        }
        .map_err(HostError::Other)
    }

    async fn events(
        &self,
        caller: &Caller,
        cmd: crate::commands::ast::EventCmd<String>,
    ) -> Result<String, HostError> {
        event_verb(&self.control, caller, &self.cause, cmd).map_err(HostError::Other)
    }

    async fn agent(
        &self,
        caller: &Caller,
        cmd: crate::commands::agent::AgentCmd<String>,
    ) -> Result<String, HostError> {
        agent_verb(&self.control, caller, cmd)
            .await
            .map_err(HostError::Other)
    }
}

/// `manager` and `flow` for the flow engine; planning asks the planner tab first.
impl ports::Flows for HubHost {
    async fn flows(&self, caller: &Caller, request: FlowRequest) -> Result<String, HostError> {
        // Planning waits for the planner tab's answers: the only verbs that are async.
        let planned = match &request {
            FlowRequest::Manager(ManagerCmd::Plan(goal)) => {
                Some(crate::planner::plan(&self.control.planner, &caller.client_id, goal).await)
            }
            FlowRequest::Manager(ManagerCmd::Modify { id, feedback }) => Some(
                crate::planner::modify(&self.control.planner, &caller.client_id, id, feedback)
                    .await,
            ),
            _ => None,
        };
        if let Some(r) = planned {
            return r.map_err(|e| HostError::Other(e.to_string()));
        }
        manager(&self.control, caller, request, &self.cause)
            .map_err(|e| HostError::Other(e.to_string()))
    }
}
