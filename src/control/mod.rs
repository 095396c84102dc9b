//! Commands on the hub: finds `?<…>!` in each tab's text streams, decides who is asking
//! (role, role card, typed or replied), runs the command through the interpreter and answers
//! the tab with `cmd_result`. Implements the interpreter's `Host` over the registry, the task
//! queues and the flow runner.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::agent_loop::Loops;
use crate::ask::{AskError, AskOpts, Asks};
use crate::commands::ast::{
    Command, FlowAction, FlowRequest, FlowSource, ManagerCmd, McpRequest, Role as CmdRole, Target,
};
use crate::commands::interp::{Host, HostError, Interpreter};
use crate::commands::permissions::{Caller, Source};
use crate::commands::scanner::{scan_text, FoundCommand, ScanItem, TurnScanner};
use crate::commands::vars::Variables;
use crate::exec::{ExecChunk, ExecMode, ExecPolicy};
use crate::flows::engine::CommandCall;
use crate::hub::registry::{Client, ConnState};
use crate::hub::Hub;
use crate::planner::Planner;
use crate::protocol::{CmdOutcome, Prompt, Role, ServerFrame};
use crate::roles::{to_cmd_role, RoleCards, TabFacts};
use crate::runner::{RunControl, Runner};
use dashmap::DashMap;

mod agent;
mod events;
mod host;
mod intake;
mod manager;
mod primer;
mod remote;
mod roles;
mod seed_wire;
pub mod summarize;
use agent::*;
use events::*;
use host::*;
pub use intake::{count_turn, on_chunk, on_turn_end, on_user_input};
use manager::*;
pub use primer::primer;
pub use remote::serve_remote;
use remote::*;
pub use roles::set_tab_role;
use roles::*;
pub use seed_wire::{flow_data, flow_report};

/// A tab's reply in progress: its turn id, scanner state and the commands found so far.
pub(super) struct Turn {
    pub(super) id: String,
    pub(super) scanner: TurnScanner,
    /// Commands (and commands given up on) found so far, in order: a command's index in
    /// its turn is its place here.
    pub(super) found: Vec<FoundCommand>,
    /// Chunks received.
    pub(super) chunks: u64,
    /// After the reply was sent again from its start (a reconnect, a reload): how many of
    /// the commands the new scan finds already ran.
    pub(super) replay: usize,
}

impl Turn {
    fn new(id: &str) -> Turn {
        Turn {
            id: id.to_string(),
            scanner: TurnScanner::new(),
            found: Vec::new(),
            chunks: 0,
            replay: 0,
        }
    }

    /// The reply comes again from its start: scan it afresh, but what already ran is not
    /// run again (a command is keyed by its index in the turn).
    fn restart(&mut self) {
        self.scanner = TurnScanner::new();
        self.replay = self.found.len();
    }

    /// Drops from `items` the commands a restarted scan finds again.
    fn skip_replayed(&mut self, mut items: Vec<ScanItem>) -> Vec<ScanItem> {
        let n = self.replay.min(items.len());
        self.replay -= n;
        items.drain(..n);
        items
    }

    /// Notes the items of one scan; returns the index of the first.
    fn note(&mut self, items: &[ScanItem]) -> u32 {
        let first = self.found.len() as u32;
        self.found.extend(items.iter().map(|i| match i {
            Ok(f) => f.clone(),
            Err(e) => FoundCommand {
                body: e.to_string(),
                start: 0,
                end: 0,
            },
        }));
        first
    }
}

/// Turns that ended, per tab, remembered so that a re-sent `turn_end` runs nothing twice.
pub(super) const ENDED_TURNS_KEPT: usize = 16;

/// The command host: the hub and the handles of what commands reach. The app builds one;
/// the hub's hooks, the foreman cycle, the runner's command steps, the skills as MCP tools and
/// the dashboard's role changes all come in through it. It dereferences to its [`Hub`], so
/// code here reads `hub.registry`, `hub.store` and `hub.config` directly.
pub struct Control {
    pub hub: Arc<Hub>,
    /// Scanners, variables, exec policy, role cards, memory and skills.
    pub commands: Arc<Commands>,
    /// Asking tabs: resolve, pick, submit, wait.
    pub asks: Arc<Asks>,
    /// Flow runs (`manager run`, `flow start`, …).
    pub runner: Arc<Runner>,
    /// `manager plan` and its drafts.
    pub planner: Arc<Planner>,
    /// The agent loop's sessions.
    pub loops: Arc<Loops>,
    /// The MCP servers of `mcp.json` (`?<mcp …>!`).
    pub mcp: Arc<crate::mcp_client::Clients>,
    /// The event bus (`?<publish …>!`, lifecycle events) and its standing rules.
    pub bus: Arc<crate::events::Bus>,
    pub rules: Arc<crate::events::Rules>,
}

impl std::ops::Deref for Control {
    type Target = Hub;

    fn deref(&self) -> &Hub {
        &self.hub
    }
}

/// A program skill's file is kept as every file of the hub is (docs/files.md).
impl crate::skills::FileKeeper for crate::hub::files::Files {
    fn max_file(&self) -> u64 {
        crate::hub::files::Files::max_file(self)
    }

    fn keep(&self, name: &str, bytes: &[u8]) -> Result<crate::skills::KeptFile, String> {
        let f = self
            .put(name, crate::hub::files::mime_of(name), bytes)
            .map_err(|e| e.to_string())?;
        Ok(crate::skills::KeptFile {
            name: f.name,
            mime: f.mime,
            size: f.size,
            sha256: f.sha256,
        })
    }
}

/// Command state of a hub: scanners per tab, variables, exec policy, role cards.
pub struct Commands {
    turns: DashMap<String, Turn>,
    /// The last turns that ended, per tab (newest last).
    ended_turns: DashMap<String, std::collections::VecDeque<String>>,
    vars: Arc<Variables>,
    exec: ExecPolicy,
    /// `CMD &`: the background jobs (they end when the hub stops).
    pub jobs: Arc<crate::exec::jobs::Jobs>,
    /// The page address each tab had when its role card prompt last went with a task.
    primed: DashMap<String, Option<String>>,
    /// Commands of each tab's replies running now (the manual's `flow_report` waits for them).
    running: DashMap<String, usize>,
    /// When each tab last reported a person's hold (`task_update {state: "held"}`): the
    /// manual's `flow_report` is answered `wait` within `--agent-hold-ms` of it.
    holds: DashMap<String, std::time::Instant>,
    pub roles: RoleCards,
    /// The team's memory (src/memory).
    pub memory: Arc<crate::memory::Memory>,
    /// Hot-loaded skills (src/skills).
    pub skills: crate::skills::Skills,
}

impl Commands {
    pub fn new(config: &crate::config::HubConfig, store: &crate::store::Store) -> Commands {
        let mode = match config.exec_mode {
            crate::config::ExecFlag::Off => ExecMode::Off,
            crate::config::ExecFlag::Allowlist => ExecMode::Allowlist(config.exec_allow.clone()),
            crate::config::ExecFlag::On => ExecMode::On,
        };
        Commands {
            turns: DashMap::new(),
            ended_turns: DashMap::new(),
            vars: Arc::new(Variables::stored(store.clone())),
            exec: {
                // Programs are never found in the files folder (docs/files.md).
                let mut policy = ExecPolicy::new(mode, config.data_dir.join("workspace"));
                policy.no_search.push(config.files_dir.clone());
                policy
            },
            jobs: Arc::new(crate::exec::jobs::Jobs::new()),
            primed: DashMap::new(),
            running: DashMap::new(),
            holds: DashMap::new(),
            roles: RoleCards::load(&config.role_cards_dir),
            memory: crate::memory::Memory::new(store.clone()),
            // Program skills keep their pins in the store and their files where the hub's
            // Files service keeps every file (the same blobs folder, by content).
            skills: crate::skills::Skills::load_with(
                &config.skills_dir,
                Some(crate::skills::Runtime::new(
                    store.clone(),
                    Some(Arc::new(crate::hub::files::Files::new(
                        config.files_dir.clone(),
                        config.data_dir.join("blobs"),
                        config.max_file_mb * 1024 * 1024,
                    ))),
                )),
            ),
        }
    }

    /// A task for `client`: its role card's `memory: every N` puts the `<memory>` block
    /// (short-term note + the tags of the hottest memories) in front of every Nth prompt.
    pub fn with_memory(&self, client: &Client, prompt: Prompt) -> Prompt {
        let Some(inject) = self.card_for(client).and_then(|c| c.memory) else {
            return prompt;
        };
        if !self.memory.task_due(&client.id, inject.every) {
            return prompt;
        }
        let group = client.info().group;
        let scopes: Vec<&str> = match (&inject.scope, &group) {
            (Some(s), _) => vec![s.as_str()],
            (None, Some(g)) => vec![crate::memory::GLOBAL, g.as_str()],
            (None, None) => vec![crate::memory::GLOBAL],
        };
        match self.memory.block(&scopes) {
            Ok(Some(block)) => Prompt::from(format!("{block}\n\n{prompt}")),
            Ok(None) => prompt,
            Err(e) => {
                tracing::warn!("memory block not added: {e}");
                prompt
            }
        }
    }

    /// The first task the hub's commands or flows give a tab in a conversation carries its
    /// role card's `system_prompt` (docs/commands.md, "Role cards"); a conversation is new
    /// when the tab has had no such task yet or its page address changed since.
    pub fn with_card_prompt(&self, client: &Client, prompt: Prompt) -> Prompt {
        let Some(text) = self
            .card_for(client)
            .and_then(|c| c.instructions)
            .filter(|t| !t.trim().is_empty())
        else {
            return prompt;
        };
        let url = client.info().url;
        let new = match self.primed.get(&client.id) {
            Some(seen) => *seen != url,
            None => true,
        };
        if !new {
            return prompt;
        }
        self.primed.insert(client.id.clone(), url);
        Prompt::from(format!("【角色 / Role】\n{}\n\n{prompt}", text.trim()))
    }

    /// How many commands of `tab`'s replies run now.
    pub fn running_in(&self, tab: &str) -> usize {
        self.running.get(tab).map_or(0, |n| *n)
    }

    /// The person pressed a key in `tab`'s input box: the tab holds what it was given.
    pub fn note_hold(&self, tab: &str) {
        self.holds
            .insert(tab.to_string(), std::time::Instant::now());
    }

    /// Whether `tab` reported a hold within the last `window`.
    pub fn held_within(&self, tab: &str, window: std::time::Duration) -> bool {
        self.holds.get(tab).is_some_and(|t| t.elapsed() < window)
    }

    /// A reply's command starts (`+1`) or ends (`-1`) in `tab`.
    pub(crate) fn count_running(&self, tab: &str, starts: bool) {
        let mut n = self.running.entry(tab.to_string()).or_insert(0);
        *n = if starts { *n + 1 } else { n.saturating_sub(1) };
    }

    /// The role card that applies to a tab now, if any.
    pub fn card_for(&self, client: &Client) -> Option<crate::roles::RoleCard> {
        let cards = self.roles.get();
        client.with_info(|info| {
            let facts = TabFacts {
                site: &info.site,
                label: info.label.as_deref(),
                client_id: &client.id,
                url: info.url.as_deref(),
            };
            cards.card_for(&facts).cloned()
        })
    }

    /// The caller a tab's text speaks for: its role's permissions, or its card's.
    pub fn caller(&self, client: &Client, source: Source) -> Caller {
        let info = client.info();
        let mut caller = Caller::new(
            client.id.clone(),
            to_cmd_role(info.role),
            info.group.clone(),
            source,
        );
        if let Some(card) = self.card_for(client).filter(|c| c.role == info.role) {
            caller.permissions = card.permissions();
        }
        caller
    }

    /// The role and group a card gives this tab, if any.
    pub fn card_role(&self, client: &Client) -> Option<(Role, Option<String>)> {
        self.card_for(client).map(|c| (c.role, c.group))
    }
}

/// A command found in a tab's text: the tab gets its live output and its answer, tied
/// together by `cmd_id` so that two commands running at once are told apart.
pub(super) struct LiveCmd {
    pub(super) cmd_id: String,
    pub(super) command: String,
    pub(super) client_id: String,
}

impl LiveCmd {
    fn new(client: &Client, command: &str) -> LiveCmd {
        LiveCmd {
            cmd_id: uuid::Uuid::new_v4().to_string(),
            command: command.to_string(),
            client_id: client.id.clone(),
        }
    }
}

/// Sends the one `cmd_result` of a command.
pub(super) fn answer(control: &Control, client: &Client, cmd: &LiveCmd, result: CmdOutcome) {
    control.tasks.tally.command(result.success);
    let frame = ServerFrame::CmdResult {
        cmd_id: cmd.cmd_id.clone(),
        command: cmd.command.clone(),
        result,
    };
    if let Err(e) = control.registry.send(&client.id, &frame) {
        tracing::warn!("cannot answer a command: {e}");
    }
}

/// Runs one command body for a caller.
pub async fn run_command(control: &Arc<Control>, caller: &Caller, body: &str) -> CmdOutcome {
    run_command_with(control, caller, &[body], None, None).await
}

/// Runs one parsed command for a caller (a door that built the command itself, e.g. MCP's
/// `skill_NAME` tools, so no value it carries is re-parsed as command text).
pub async fn run_parsed(control: &Arc<Control>, caller: &Caller, cmd: &Command) -> CmdOutcome {
    let interp = Interpreter::new(
        HubHost {
            control: control.clone(),
            parent: None,
            live: None,
            cause: crate::events::Cause::default(),
            remote: None,
        },
        control.commands.exec.clone(),
        control.commands.vars.clone(),
    );
    let out = interp.run(caller, cmd).await;
    CmdOutcome {
        success: out.success,
        output: out.output,
    }
}

/// Runs one command body; tasks it sends carry `parent` as their `parent_id` (the foreman's
/// task), so the tree of work can be followed.
pub async fn run_command_for(
    control: &Arc<Control>,
    caller: &Caller,
    body: &str,
    parent: Option<&str>,
) -> CmdOutcome {
    run_command_with(control, caller, &[body], parent, None).await
}

/// Runs one command body; with `live`, shell output streams to the tab as `cmd_output`
/// frames, all of them sent before this returns (so before the command's `cmd_result`).
pub(super) async fn run_command_with(
    control: &Arc<Control>,
    caller: &Caller,
    bodies: &[&str],
    parent: Option<&str>,
    live: Option<&LiveCmd>,
) -> CmdOutcome {
    let forwarders = tokio_util::task::TaskTracker::new();
    let interp = Interpreter::new(
        HubHost {
            control: control.clone(),
            parent: parent.map(str::to_string),
            live: live.map(|cmd| LiveOutput {
                cmd_id: cmd.cmd_id.clone(),
                command: cmd.command.clone(),
                client_id: cmd.client_id.clone(),
                forwarders: forwarders.clone(),
            }),
            cause: crate::events::Cause::default(),
            remote: None,
        },
        control.commands.exec.clone(),
        control.commands.vars.clone(),
    )
    .with_jobs(control.commands.jobs.clone());
    let out = interp.run_texts(caller, bodies).await;
    drop(interp);
    forwarders.close();
    forwarders.wait().await;
    CmdOutcome {
        success: out.success,
        output: out.output,
    }
}

/// A flow's `command:` node: runs with the master's authority (the person wrote the flow),
/// its variables in a scope of their own, still under the exec policy.
pub async fn run_flow_command(
    control: &Arc<Control>,
    master: Option<&str>,
    call: &CommandCall,
) -> Result<String, String> {
    let scope = format!("flow:{}", call.idempotency_key);
    for (k, v) in &call.vars {
        control
            .commands
            .vars
            .set(&scope, k, v.clone())
            .map_err(|e| e.to_string())?;
    }
    let mut caller = Caller::new(scope.clone(), CmdRole::Master, None, Source::UserInput);
    if let Some(m) = master.and_then(|m| control.registry.get(m)) {
        caller.group = m.info().group;
    }
    let body = call
        .command
        .trim()
        .strip_prefix("?<")
        .and_then(|b| b.strip_suffix(">!"))
        .unwrap_or(call.command.trim());
    let out = run_command(control, &caller, body).await;
    control.commands.vars.drop_scope(&scope);
    if out.success {
        Ok(out.output)
    } else {
        Err(out.output)
    }
}

/// Runs a standing rule's command for its author with `vars` (`$EVENT` …) bound; events it
/// publishes carry `cause`.
pub async fn run_for_event(
    control: &Arc<Control>,
    caller: &Caller,
    cond: Option<&crate::commands::ast::Cond>,
    cmd: &Command,
    vars: BTreeMap<String, String>,
    cause: crate::events::Cause,
) -> Option<CmdOutcome> {
    let interp = Interpreter::new(
        HubHost {
            control: control.clone(),
            parent: None,
            live: None,
            cause,
            remote: None,
        },
        control.commands.exec.clone(),
        control.commands.vars.clone(),
    );
    if let Some(cond) = cond {
        match interp.holds(caller, cond, vars.clone()).await {
            Ok(true) => {}
            Ok(false) => return None,
            Err(output) => {
                return Some(CmdOutcome {
                    success: false,
                    output,
                })
            }
        }
    }
    let out = interp.run_with(caller, cmd, vars).await;
    Some(CmdOutcome {
        success: out.success,
        output: out.output,
    })
}
