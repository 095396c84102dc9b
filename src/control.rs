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
use crate::runner::{Control as RunControl, Runner};
use dashmap::DashMap;

/// A tab's reply in progress: its turn id, scanner state and the commands found so far.
struct Turn {
    id: String,
    scanner: TurnScanner,
    /// Commands (and commands given up on) found so far, in order: a command's index in
    /// its turn is its place here.
    found: Vec<FoundCommand>,
    /// Chunks received.
    chunks: u64,
    /// After the reply was sent again from its start (a reconnect, a reload): how many of
    /// the commands the new scan finds already ran.
    replay: usize,
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
const ENDED_TURNS_KEPT: usize = 16;

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

/// Command state of a hub: scanners per tab, variables, exec policy, role cards.
pub struct Commands {
    turns: DashMap<String, Turn>,
    /// The last turns that ended, per tab (newest last).
    ended_turns: DashMap<String, std::collections::VecDeque<String>>,
    vars: Arc<Variables>,
    exec: ExecPolicy,
    /// `CMD &`: the background jobs (they end when the hub stops).
    pub jobs: Arc<crate::exec::jobs::Jobs>,
    pub roles: RoleCards,
    /// The team's memory (src/memory).
    pub memory: Arc<crate::memory::Memory>,
    /// Hot-loaded skills (src/skills).
    pub skills: crate::skills::Skills,
}

impl Commands {
    pub fn new(config: &crate::config::HubConfig, store: &crate::store::Store) -> Commands {
        let mode = match config.exec_mode {
            crate::config::ExecMode::Off => ExecMode::Off,
            crate::config::ExecMode::Allowlist => ExecMode::Allowlist(config.exec_allow.clone()),
            crate::config::ExecMode::On => ExecMode::On,
        };
        Commands {
            turns: DashMap::new(),
            ended_turns: DashMap::new(),
            vars: Arc::new(Variables::stored(store.clone())),
            exec: ExecPolicy::new(mode, config.data_dir.join("workspace")),
            jobs: Arc::new(crate::exec::jobs::Jobs::new()),
            roles: RoleCards::load(&config.role_cards_dir),
            memory: crate::memory::Memory::new(store.clone()),
            skills: crate::skills::Skills::load(&config.skills_dir),
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

    /// The role card that applies to a tab now, if any.
    pub fn card_for(&self, client: &Client) -> Option<crate::roles::RoleCard> {
        let info = client.info();
        let facts = TabFacts {
            site: &info.site,
            label: info.label.as_deref(),
            client_id: &client.id,
            url: info.url.as_deref(),
        };
        self.roles.get().card_for(&facts).cloned()
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

/// A streamed delta of a tab's reply: commands complete in it run now.
pub fn on_chunk(hub: &Arc<Control>, client: &Arc<Client>, turn_id: &str, seq: u64, text: &str) {
    if hub.commands.turn_ended(&client.id, turn_id) {
        return;
    }
    let (items, first) = {
        let mut turn = hub
            .commands
            .turns
            .entry(client.id.clone())
            .or_insert_with(|| Turn::new(turn_id));
        if turn.id != turn_id {
            *turn = Turn::new(turn_id);
        } else if seq == 0 && turn.chunks > 0 {
            turn.restart();
        }
        turn.chunks += 1;
        let items = turn.scanner.push_chunk(text);
        let items = turn.skip_replayed(items);
        let first = turn.note(&items);
        (items, first)
    };
    hub.loops.chunk(&client.id);
    run_items(hub, client, Source::Reply, items, Some((turn_id, first)));
}

/// The reply is complete: commands not already seen in its chunks run now. A turn that
/// already ended (a re-sent `turn_end`, a re-rendered page) runs nothing again.
pub fn on_turn_end(hub: &Arc<Control>, client: &Arc<Client>, turn_id: &str, text: &str) {
    if hub.commands.turn_ended(&client.id, turn_id) {
        tracing::debug!(client = %client.id, turn_id, "turn already ended: its commands ran once");
        return;
    }
    let mut turn = match hub.commands.turns.remove(&client.id) {
        Some((_, turn)) if turn.id == turn_id => turn,
        _ => Turn::new(turn_id),
    };
    let items = turn.scanner.turn_end(text);
    let items = turn.skip_replayed(items);
    let first = turn.note(&items);
    hub.commands.end_turn(&client.id, turn_id);
    hub.asks.note_reply(&client.id, text);
    run_items(hub, client, Source::Reply, items, Some((turn_id, first)));
    hub.loops
        .turn_ended(&client.id, turn_id, text, std::mem::take(&mut turn.found));
}

/// A reply finished (a free turn or a task's answer): one turn of the memory scopes the tab
/// is in (`global` and its group), whose memories cool down.
pub fn count_turn(hub: &Control, client: &Client) {
    let group = client.info().group;
    let mut scopes = vec![crate::memory::GLOBAL];
    if let Some(g) = group.as_deref().filter(|g| *g != crate::memory::GLOBAL) {
        scopes.push(g);
    }
    hub.commands.memory.turn(&scopes);
}

/// What the person typed: every command in it runs with the person's authority. A message
/// to a tab that loops pauses its session, unless it only says `agent stop|pause|resume`
/// (the panel's buttons send exactly that).
pub fn on_user_input(hub: &Arc<Control>, client: &Arc<Client>, text: &str) {
    let items = scan_text(text);
    if !only_agent_control(text, &items) {
        // The person's own message: a Stop there is over, a running session pauses.
        hub.loops.person_spoke(&client.id);
    }
    for group in chained(text, items) {
        match group {
            Chained::One(item) => run_items(hub, client, Source::UserInput, vec![item], None),
            Chained::Chain(found) => run_chain(hub, client, found),
        }
    }
}

/// The commands of one message, with `?<a>! → ?<b>!` (or `->`) runs joined into chains.
enum Chained {
    One(ScanItem),
    Chain(Vec<FoundCommand>),
}

/// Groups found commands joined only by an arrow (`→` or `->`, whitespace around it).
fn chained(text: &str, items: Vec<ScanItem>) -> Vec<Chained> {
    let mut out: Vec<Chained> = Vec::new();
    for item in items {
        let joined = match (&item, out.last()) {
            (Ok(found), Some(Chained::One(Ok(prev)))) => arrow_between(text, prev, found),
            (Ok(found), Some(Chained::Chain(steps))) => steps
                .last()
                .is_some_and(|prev| arrow_between(text, prev, found)),
            _ => false,
        };
        let Ok(found) = item else {
            out.push(Chained::One(item));
            continue;
        };
        if !joined {
            out.push(Chained::One(Ok(found)));
            continue;
        }
        match out.pop() {
            Some(Chained::One(Ok(prev))) => out.push(Chained::Chain(vec![prev, found])),
            Some(Chained::Chain(mut steps)) => {
                steps.push(found);
                out.push(Chained::Chain(steps));
            }
            _ => unreachable!("joined only after a found command"),
        }
    }
    out
}

fn arrow_between(text: &str, prev: &FoundCommand, next: &FoundCommand) -> bool {
    text.get(prev.end..next.start)
        .is_some_and(|between| matches!(between.trim(), "→" | "->"))
}

/// A chain across commands the person typed: one task, steps in order, one `cmd_result`.
fn run_chain(hub: &Arc<Control>, client: &Arc<Client>, found: Vec<FoundCommand>) {
    let caller = hub.commands.caller(client, Source::UserInput);
    let bodies: Vec<String> = found
        .into_iter()
        .map(|f| f.body.trim().to_string())
        .collect();
    let hub = hub.clone();
    let client = client.clone();
    hub.tracker.clone().spawn(async move {
        let cmd = LiveCmd::new(&client, &bodies.join(" → "));
        let refs: Vec<&str> = bodies.iter().map(String::as_str).collect();
        let outcome = run_command_with(&hub, &caller, &refs, None, Some(&cmd)).await;
        answer(&hub, &client, &cmd, outcome);
    });
}

/// Whether a message is nothing but `agent stop|pause|resume|status` commands.
fn only_agent_control(text: &str, items: &[ScanItem]) -> bool {
    use crate::commands::agent::AgentCmd;
    let mut rest = text.to_string();
    for item in items {
        let Ok(found) = item else { return false };
        match crate::commands::parser::parse(&found.body) {
            Ok(Command::Agent(
                AgentCmd::Stop(_) | AgentCmd::Pause(_) | AgentCmd::Resume(_) | AgentCmd::Status(_),
            )) => rest = rest.replacen(&format!("?<{}>!", found.body), "", 1),
            _ => return false,
        }
    }
    !items.is_empty() && rest.trim().is_empty()
}

impl Commands {
    /// Whether `turn_id` of this tab already ended.
    fn turn_ended(&self, tab: &str, turn_id: &str) -> bool {
        self.ended_turns
            .get(tab)
            .is_some_and(|t| t.iter().any(|id| id == turn_id))
    }

    fn end_turn(&self, tab: &str, turn_id: &str) {
        let mut ended = self.ended_turns.entry(tab.to_string()).or_default();
        ended.push_back(turn_id.to_string());
        while ended.len() > ENDED_TURNS_KEPT {
            ended.pop_front();
        }
    }

    /// The variables of every caller (the agent loop keeps `$R1`, `$R2`, … there).
    pub fn vars(&self) -> Arc<Variables> {
        self.vars.clone()
    }
}

/// Whether this tab's replies loop when no session runs there yet: `Some(max_rounds)` for a
/// master or foreman whose card says `loop: true` or that said `agent loop on`.
fn loop_wish(hub: &Control, client: &Client) -> Option<Option<u32>> {
    let card = hub.commands.card_for(client);
    let role = client.info().role;
    if role == Role::Worker {
        return None;
    }
    let card_loop = card.as_ref().is_some_and(|c| c.looping && c.role == role);
    (card_loop || hub.loops.loop_is_on(&client.id)).then(|| card.and_then(|c| c.max_rounds))
}

fn run_items(
    hub: &Arc<Control>,
    client: &Arc<Client>,
    source: Source,
    items: Vec<ScanItem>,
    turn: Option<(&str, u32)>,
) {
    for (k, item) in items.into_iter().enumerate() {
        // (turn id, index in the turn) of a reply's command, for the agent loop.
        let at = turn.map(|(id, first)| (id.to_string(), first + k as u32));
        match item {
            Ok(found) => {
                let mut caller = hub.commands.caller(client, source);
                if source == Source::Reply {
                    // An agent session's tab acts with its agent's tools.
                    if let Some((p, scope)) = hub.loops.agent_permissions(&client.id) {
                        caller.permissions = p;
                        caller.memory_scope = Some(scope);
                    }
                }
                if source == Source::Reply && hub.loops.is_stopped(&client.id) {
                    // A person stopped this tab: the reply that was streaming (or any before
                    // they speak again) runs nothing; the panel lists what was not run.
                    tracing::info!(client = %client.id, command = %found.body.trim(), "not run: the person stopped this tab");
                    hub.loops.not_run(&client.id, &found.body);
                    answer(
                        hub,
                        client,
                        &LiveCmd::new(client, found.body.trim()),
                        CmdOutcome {
                            success: false,
                            output: "未运行：你已停止这个标签页的循环 / not run: you stopped this tab's loop (write in this tab to start again)".into(),
                        },
                    );
                    continue;
                }
                if source == Source::Reply && !caller.permissions.reply_commands {
                    // A worker's reply: commands are data. Say so once, quietly, in the log; an
                    // MCP call refused gets its audit line like every other MCP call.
                    tracing::debug!(client = %client.id, "command in a reply not run (role)");
                    if found.body.trim_start().starts_with("mcp") {
                        tracing::info!(target: "aicard::audit", caller = %client.id, command = %found.body.trim(), decision = "refused: a worker's reply", "mcp");
                    }
                    continue;
                }
                let cancel = at.as_ref().and_then(|(turn_id, index)| {
                    let wish = loop_wish(hub, client);
                    hub.loops
                        .command_started(client, turn_id, *index, &found.body, wish)
                });
                let looped = cancel.is_some();
                // A session's command that already ran (before a hub restart, the turn sent
                // again) is not run twice: its journaled result goes to the loop.
                if let Some((turn_id, index)) = at.as_ref().filter(|_| looped) {
                    if hub
                        .loops
                        .replay_journaled(&client.id, turn_id, *index, &found.body)
                    {
                        continue;
                    }
                }
                let hub = hub.clone();
                let client = client.clone();
                hub.tracker.clone().spawn(async move {
                    let cmd = LiveCmd::new(&client, found.body.trim());
                    let bodies = [found.body.as_str()];
                    let run = run_command_with(&hub, &caller, &bodies, None, Some(&cmd));
                    let outcome = match cancel {
                        // A person's Stop cancels a session's running command: its tasks are
                        // withdrawn from their tabs and its processes killed as it is dropped.
                        Some(token) => tokio::select! {
                            outcome = run => outcome,
                            () = token.cancelled() => CmdOutcome {
                                success: false,
                                output: "已取消：你停止了会话 / cancelled: you stopped the session".into(),
                            },
                        },
                        None => run.await,
                    };
                    // The tab gets the command's result before the results message that
                    // holds it (the panel never shows a command running after that).
                    answer(&hub, &client, &cmd, outcome.clone());
                    if let Some((turn_id, index)) = at.filter(|_| looped) {
                        hub.loops.journal_command(
                            &client.id,
                            &turn_id,
                            index,
                            outcome.success,
                            &outcome.output,
                        );
                        let malformed = crate::commands::parser::parse(&found.body).is_err();
                        hub.loops.result(
                            &client.id,
                            &turn_id,
                            index,
                            outcome.success,
                            &outcome.output,
                            malformed,
                        );
                    }
                });
            }
            Err(e) => {
                let output = e.to_string();
                if let Some((turn_id, index)) = &at {
                    let wish = loop_wish(hub, client);
                    if hub
                        .loops
                        .command_started(client, turn_id, *index, &output, wish)
                        .is_some()
                    {
                        hub.loops
                            .result(&client.id, turn_id, *index, false, &output, true);
                    }
                }
                answer(
                    hub,
                    client,
                    &LiveCmd::new(client, ""),
                    CmdOutcome {
                        success: false,
                        output,
                    },
                )
            }
        }
    }
}

/// A command found in a tab's text: the tab gets its live output and its answer, tied
/// together by `cmd_id` so that two commands running at once are told apart.
struct LiveCmd {
    cmd_id: String,
    command: String,
    client_id: String,
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
fn answer(hub: &Control, client: &Client, cmd: &LiveCmd, result: CmdOutcome) {
    let frame = ServerFrame::CmdResult {
        cmd_id: cmd.cmd_id.clone(),
        command: cmd.command.clone(),
        result,
    };
    if let Err(e) = hub.registry.send(&client.id, &frame) {
        tracing::warn!("cannot answer a command: {e}");
    }
}

/// Runs one command body for a caller.
pub async fn run_command(hub: &Arc<Control>, caller: &Caller, body: &str) -> CmdOutcome {
    run_command_with(hub, caller, &[body], None, None).await
}

/// Runs one parsed command for a caller (a door that built the command itself, e.g. MCP's
/// `skill_NAME` tools, so no value it carries is re-parsed as command text).
pub async fn run_parsed(hub: &Arc<Control>, caller: &Caller, cmd: &Command) -> CmdOutcome {
    let interp = Interpreter::new(
        HubHost {
            hub: hub.clone(),
            parent: None,
            live: None,
            cause: crate::events::Cause::default(),
            remote: None,
        },
        hub.commands.exec.clone(),
        hub.commands.vars.clone(),
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
    hub: &Arc<Control>,
    caller: &Caller,
    body: &str,
    parent: Option<&str>,
) -> CmdOutcome {
    run_command_with(hub, caller, &[body], parent, None).await
}

/// Runs one command body; with `live`, shell output streams to the tab as `cmd_output`
/// frames, all of them sent before this returns (so before the command's `cmd_result`).
async fn run_command_with(
    hub: &Arc<Control>,
    caller: &Caller,
    bodies: &[&str],
    parent: Option<&str>,
    live: Option<&LiveCmd>,
) -> CmdOutcome {
    let forwarders = tokio_util::task::TaskTracker::new();
    let interp = Interpreter::new(
        HubHost {
            hub: hub.clone(),
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
        hub.commands.exec.clone(),
        hub.commands.vars.clone(),
    )
    .with_jobs(hub.commands.jobs.clone());
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
    hub: &Arc<Control>,
    master: Option<&str>,
    call: &CommandCall,
) -> Result<String, String> {
    let scope = format!("flow:{}", call.idempotency_key);
    for (k, v) in &call.vars {
        hub.commands
            .vars
            .set(&scope, k, v.clone())
            .map_err(|e| e.to_string())?;
    }
    let mut caller = Caller::new(scope.clone(), CmdRole::Master, None, Source::UserInput);
    if let Some(m) = master.and_then(|m| hub.registry.get(m)) {
        caller.group = m.info().group;
    }
    let body = call
        .command
        .trim()
        .strip_prefix("?<")
        .and_then(|b| b.strip_suffix(">!"))
        .unwrap_or(call.command.trim());
    let out = run_command(hub, &caller, body).await;
    hub.commands.vars.drop_scope(&scope);
    if out.success {
        Ok(out.output)
    } else {
        Err(out.output)
    }
}

/// Runs a standing rule's command for its author with `vars` (`$EVENT` …) bound; events it
/// publishes carry `cause`.
pub async fn run_for_event(
    hub: &Arc<Control>,
    caller: &Caller,
    cond: Option<&crate::commands::ast::Cond>,
    cmd: &Command,
    vars: BTreeMap<String, String>,
    cause: crate::events::Cause,
) -> Option<CmdOutcome> {
    let interp = Interpreter::new(
        HubHost {
            hub: hub.clone(),
            parent: None,
            live: None,
            cause,
            remote: None,
        },
        hub.commands.exec.clone(),
        hub.commands.vars.clone(),
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

/// How much longer than the exec timeout a node asking another waits for its answer.
const REMOTE_MARGIN: std::time::Duration = std::time::Duration::from_secs(10);

/// `on NODE: CMD` as sent to NODE (SPEC §19 remote execution).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct RemoteRequest {
    command: String,
    /// Who asked: its client id on its own node, and its name there.
    client_id: String,
    shown: String,
    role: String,
    group: Option<String>,
    /// Typed by the person (else written by a model).
    person: bool,
    /// Its shell permission on its own node (its role card's).
    shell: bool,
    /// Its variables, for the command's `$var`s.
    vars: BTreeMap<String, String>,
}

/// What NODE answers: the command's outcome, and how many pieces of live output it sent first.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct RemoteAnswer {
    success: bool,
    output: String,
    pieces: u64,
}

/// Runs a command another node asked for (SPEC §19): a shell command or a skill, under this
/// node's exec policy, as the asker (its role, its shell permission, never more than this
/// node would give that role). The audit line names who asked from which node.
pub async fn serve_remote(control: Arc<Control>, call: crate::hub::engine::RemoteCall) {
    let crate::hub::engine::RemoteCall {
        from,
        body,
        output,
        answer,
    } = call;
    let pieces = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let outcome = match serde_json::from_slice::<RemoteRequest>(&body) {
        Err(e) => (false, format!("无效请求 / a bad request: {e}")),
        Ok(req) => run_remote(&control, &from, req, output, pieces.clone()).await,
    };
    let reply = RemoteAnswer {
        success: outcome.0,
        output: outcome.1,
        pieces: pieces.load(std::sync::atomic::Ordering::Relaxed),
    };
    let _ = answer.send(serde_json::to_vec(&reply).unwrap_or_default());
}

async fn run_remote(
    control: &Arc<Control>,
    from: &str,
    req: RemoteRequest,
    output: tokio::sync::mpsc::Sender<String>,
    pieces: Arc<std::sync::atomic::AtomicU64>,
) -> (bool, String) {
    use crate::commands::permissions::{Role as CmdRole, Source};
    let cmd = match crate::commands::parser::parse(&req.command) {
        Ok(c @ (Command::Shell { .. } | Command::Skill(_))) => c,
        Ok(_) => {
            return (
                false,
                "on NODE: 只能运行 shell 命令或技能 / runs a shell command or a skill only".into(),
            )
        }
        Err(e) => return (false, e.to_string()),
    };
    let role = CmdRole::parse(&req.role).unwrap_or(CmdRole::Worker);
    let source = if req.person {
        Source::UserInput
    } else {
        Source::Reply
    };
    // The audit line's caller: who, from which node.
    let who = format!("{} ({}) @ {from}", req.shown, req.client_id);
    let mut caller = Caller::new(who, role, req.group.clone(), source);
    caller.permissions.shell &= req.shell;
    let node = control.engine.node().to_string();
    let forwarders = tokio_util::task::TaskTracker::new();
    let host = HubHost {
        hub: control.clone(),
        parent: None,
        live: None,
        cause: crate::events::Cause::default(),
        remote: Some(RemoteOutput {
            to: output,
            pieces,
            forwarders: forwarders.clone(),
        }),
    };
    let interp = Interpreter::new(
        host,
        control.commands.exec.clone(),
        control.commands.vars.clone(),
    );
    let out = interp.run_with(&caller, &cmd, req.vars).await;
    // Every piece of output is on its way before the answer (the asker counts them).
    drop(interp);
    forwarders.close();
    forwarders.wait().await;
    let text = if out.success {
        out.output
    } else if control.commands.exec.mode == crate::exec::ExecMode::Off
        && matches!(cmd, Command::Shell { .. })
    {
        format!("节点 `{node}` 未开启 shell（--exec off）/ node `{node}` runs no shell commands (--exec off): {}", out.output)
    } else {
        out.output
    };
    (out.success, text)
}

/// `publish`, `subscribe`, `subscribe list`, `unsubscribe` (SPEC §19).
fn event_verb(
    hub: &Control,
    caller: &Caller,
    cause: &crate::events::Cause,
    cmd: crate::commands::ast::EventCmd<String>,
) -> Result<String, String> {
    use crate::commands::ast::EventCmd;
    use crate::events::{Event, Rule};
    match cmd {
        EventCmd::Publish { topic, text } => {
            let data = serde_json::json!({"text": text, "from": caller.client_id});
            hub.bus
                .publish(Event::new(&topic, data.clone(), cause.clone()));
            // The lifecycle event of any publish (webhooks may ask for it), with the topic.
            if topic != "data_published" {
                let mut data = data;
                data["topic"] = topic.clone().into();
                hub.bus
                    .publish(Event::new("data_published", data, cause.clone()));
            }
            Ok(format!("已发布 / published {topic}"))
        }
        EventCmd::Subscribe {
            topic,
            cond,
            command,
        } => {
            let rule = hub.rules.add(Rule {
                id: 0,
                topic,
                cond,
                command,
                author: caller.client_id.clone(),
                role: caller.role.as_str().to_string(),
                group: caller.group.clone(),
                person: caller.is_person(),
                created_ms: crate::store::now_ms(),
            })?;
            Ok(format!(
                "规则 #{id} / rule #{id}: {} → {}",
                rule.topic,
                rule.command,
                id = rule.id
            ))
        }
        EventCmd::List => {
            let rules = hub.rules.all();
            if rules.is_empty() {
                return Ok("没有订阅规则 / no rules".into());
            }
            Ok(rules
                .iter()
                .map(|r| {
                    let cond = r
                        .cond
                        .as_deref()
                        .map(|c| format!(" where {c}"))
                        .unwrap_or_default();
                    format!(
                        "#{} {}{cond} do {}  ({})",
                        r.id, r.topic, r.command, r.author
                    )
                })
                .collect::<Vec<_>>()
                .join("\n"))
        }
        EventCmd::Unsubscribe(id) => {
            let Some(rule) = hub.rules.get(id) else {
                return Err(format!("没有这条规则 / no rule #{id}"));
            };
            let may = caller.is_person()
                || caller.permissions.any_target
                || rule.author == caller.client_id;
            if !may {
                return Err(format!(
                    "无权删除 / not allowed: rule #{id} belongs to another tab"
                ));
            }
            hub.rules.remove(id)?;
            Ok(format!("已删除 / removed rule #{id}"))
        }
    }
}

/// The interpreter's view of the hub.
struct HubHost {
    hub: Arc<Control>,
    /// The task on whose behalf commands run (a foreman's), for subtasks' `parent_id`.
    parent: Option<String>,
    /// Where live shell output goes: the tab whose command this is (None: nowhere, e.g. a
    /// foreman's or a flow's command, which get no `cmd_result` either).
    live: Option<LiveOutput>,
    /// The rules whose commands this run is part of (empty outside a rule): what the events
    /// it publishes carry, so a rule never fires on its own.
    cause: crate::events::Cause,
    /// For a command another node asked for: where its live output goes (that node), and how
    /// many pieces went.
    remote: Option<RemoteOutput>,
}

/// Live output of a command run for another node.
struct RemoteOutput {
    to: tokio::sync::mpsc::Sender<String>,
    pieces: Arc<std::sync::atomic::AtomicU64>,
    forwarders: tokio_util::task::TaskTracker,
}

/// The command whose shell output streams as `cmd_output`, and the forwarding tasks the
/// command's answer waits for.
struct LiveOutput {
    cmd_id: String,
    command: String,
    client_id: String,
    forwarders: tokio_util::task::TaskTracker,
}

impl HubHost {
    /// Connected tabs a name resolves to; an error names the target when there are none.
    fn resolve(&self, target: &str) -> Result<Vec<Arc<Client>>, HostError> {
        self.hub.asks.resolve(target).map_err(host_error)
    }

    /// How the ask service follows this caller's tasks: its subtasks carry `parent` (a
    /// foreman's task); a foreman's lost worker is replaced within its group.
    fn ask_opts(&self, caller: &Caller) -> AskOpts {
        AskOpts {
            from: caller.client_id.clone(),
            parent: self.parent.clone(),
            regroup: caller
                .group
                .clone()
                .filter(|_| caller.role == CmdRole::Foreman),
        }
    }
}

/// The command language's wording of an ask that got no answer.
fn host_error(e: AskError) -> HostError {
    match e {
        AskError::UnknownTarget(t) => HostError::UnknownTarget(t),
        AskError::NotConnected(t) => HostError::NotConnected(t),
        AskError::Timeout { target } => HostError::Timeout { target, secs: 0 },
        AskError::Failed { target, message } => HostError::Failed { target, message },
    }
}

impl Host for HubHost {
    async fn ask(
        &self,
        caller: &Caller,
        target: &str,
        prompt: Prompt,
    ) -> Result<String, HostError> {
        let opts = self.ask_opts(caller);
        match self.hub.asks.ask(target, prompt, &opts).await {
            Ok(answer) => Ok(answer.text),
            Err(e) => Err(host_error(e)),
        }
    }

    /// Every prompt reaches its tab before the first answer is awaited (`Asks::ask_all`).
    async fn ask_all(
        &self,
        caller: &Caller,
        work: Vec<(String, Prompt)>,
    ) -> Vec<Result<String, HostError>> {
        let opts = self.ask_opts(caller);
        self.hub
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
            .find_map(|c| self.hub.asks.latest_reply(&c.id))
            .ok_or_else(|| HostError::Failed {
                target: target.to_string(),
                message: "还没有回复 / no reply yet".into(),
            })
    }

    fn select(&self, selector: &Target) -> Vec<String> {
        let key = selector.to_string();
        self.hub
            .registry
            .resolve(&key)
            .into_iter()
            .map(|c| c.display())
            .collect()
    }

    fn all_workers(&self) -> Vec<String> {
        self.hub
            .registry
            .resolve("role:worker")
            .into_iter()
            .map(|c| c.display())
            .collect()
    }

    fn in_group(&self, target: &str, group: &str) -> bool {
        let tabs = self.hub.registry.resolve(target);
        !tabs.is_empty()
            && tabs
                .iter()
                .all(|c| c.info().group.as_deref() == Some(group))
    }

    async fn set_role(
        &self,
        caller: &Caller,
        role: CmdRole,
        group: Option<String>,
    ) -> Result<String, HostError> {
        set_tab_role(&self.hub, &caller.client_id, role_from_cmd(role), group)
    }

    fn node(&self) -> String {
        self.hub.engine.node().to_string()
    }

    async fn on_node(
        &self,
        caller: &Caller,
        node: &str,
        command: &str,
        vars: BTreeMap<String, String>,
    ) -> Result<(bool, String), HostError> {
        let shown = match self.hub.registry.get(&caller.client_id) {
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
        let wait = self.hub.commands.exec.timeout + REMOTE_MARGIN;
        let (tx, mut rx) = tokio::sync::mpsc::channel::<String>(64);
        let live = self.exec_output(caller);
        let forward = tokio::spawn(async move {
            while let Some(text) = rx.recv().await {
                if let Some(live) = &live {
                    let stream = match text.strip_prefix("[stderr] ") {
                        Some(_) => crate::exec::Stream::Stderr,
                        None => crate::exec::Stream::Stdout,
                    };
                    let text = text.strip_prefix("[stderr] ").unwrap_or(&text).to_string();
                    let _ = live.send(ExecChunk { stream, text }).await;
                }
            }
        });
        let answer = self.hub.engine.call_node(node, body, tx, wait).await;
        let _ = forward.await;
        let answer = answer.map_err(HostError::Other)?;
        let answer: RemoteAnswer = serde_json::from_slice(&answer).map_err(|e| {
            HostError::Other(format!(
                "节点 `{node}` 的回答无效 / a bad answer from node `{node}`: {e}"
            ))
        })?;
        Ok((answer.success, answer.output))
    }

    /// Live output of a shell command goes to the tab that ran it as `cmd_output` frames.
    fn exec_output(&self, _caller: &Caller) -> Option<tokio::sync::mpsc::Sender<ExecChunk>> {
        if let Some(remote) = &self.remote {
            let (tx, mut rx) = tokio::sync::mpsc::channel::<ExecChunk>(64);
            let (to, pieces) = (remote.to.clone(), remote.pieces.clone());
            self.hub
                .tracker
                .spawn(remote.forwarders.track_future(async move {
                    while let Some(chunk) = rx.recv().await {
                        let text = match chunk.stream {
                            crate::exec::Stream::Stderr => format!("[stderr] {}", chunk.text),
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
        let client = self.hub.registry.get(&live.client_id)?;
        let (tx, mut rx) = tokio::sync::mpsc::channel::<ExecChunk>(64);
        let hub = self.hub.clone();
        let (cmd_id, command) = (live.cmd_id.clone(), live.command.clone());
        // Tracked twice: by the hub (shutdown waits for it) and by the command, whose
        // `cmd_result` goes out only after its last `cmd_output`.
        self.hub
            .tracker
            .spawn(live.forwarders.track_future(async move {
                while let Some(chunk) = rx.recv().await {
                    let chunk = match chunk.stream {
                        crate::exec::Stream::Stderr => format!("[stderr] {}", chunk.text),
                        _ => chunk.text,
                    };
                    let frame = ServerFrame::CmdOutput {
                        cmd_id: cmd_id.clone(),
                        command: command.clone(),
                        chunk,
                    };
                    let _ = hub.registry.send(&client.id, &frame);
                }
            }));
        Some(tx)
    }

    fn memory(&self) -> Option<Arc<crate::memory::Memory>> {
        Some(self.hub.commands.memory.clone())
    }

    fn skills(&self) -> Option<Arc<crate::skills::SkillSet>> {
        Some(self.hub.commands.skills.get())
    }

    async fn mcp(&self, caller: &Caller, request: McpRequest) -> Result<String, HostError> {
        let clients = &self.hub.mcp;
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
        }
        .map_err(HostError::Other)
    }

    async fn events(
        &self,
        caller: &Caller,
        cmd: crate::commands::ast::EventCmd<String>,
    ) -> Result<String, HostError> {
        event_verb(&self.hub, caller, &self.cause, cmd).map_err(HostError::Other)
    }

    async fn agent(
        &self,
        caller: &Caller,
        cmd: crate::commands::agent::AgentCmd<String>,
    ) -> Result<String, HostError> {
        agent_verb(&self.hub, caller, cmd)
            .await
            .map_err(HostError::Other)
    }

    async fn flows(&self, caller: &Caller, request: FlowRequest) -> Result<String, HostError> {
        // Planning waits for the planner tab's answers: the only verbs that are async.
        let planned = match &request {
            FlowRequest::Manager(ManagerCmd::Plan(goal)) => {
                Some(crate::planner::plan(&self.hub.planner, &caller.client_id, goal).await)
            }
            FlowRequest::Manager(ManagerCmd::Modify { id, feedback }) => Some(
                crate::planner::modify(&self.hub.planner, &caller.client_id, id, feedback).await,
            ),
            _ => None,
        };
        if let Some(r) = planned {
            return r.map_err(|e| HostError::Other(e.to_string()));
        }
        manager(&self.hub, caller, request, &self.cause)
            .map_err(|e| HostError::Other(e.to_string()))
    }
}

/// `agent …` and `done` (SPEC §17): agents are made and kept in the store, their sessions run
/// in the loop service (`crate::agent_loop`).
async fn agent_verb(
    hub: &Arc<Control>,
    caller: &Caller,
    cmd: crate::commands::agent::AgentCmd<String>,
) -> Result<String, String> {
    use crate::agent_loop::Control;
    use crate::agents::store as agents;
    use crate::commands::agent::AgentCmd;
    let store = &hub.store;
    match cmd {
        AgentCmd::Create(spec) => {
            let rec = agents::AgentRecord {
                creator: caller.client_id.clone(),
                spec,
            };
            agents::save_agent(store, &rec, crate::store::now_ms()).map_err(|e| e.to_string())?;
            let tools: Vec<String> = rec
                .spec
                .tools_or_default()
                .iter()
                .map(ToString::to_string)
                .collect();
            Ok(format!(
                "已创建代理 / agent `{}` created on {} with tools [{}]; give it work with ?‹agent task {} …›!",
                rec.spec.name,
                rec.spec.target,
                tools.join(", "),
                rec.spec.name
            ))
        }
        AgentCmd::Task { name, text } => {
            let rec = agents::agent(store, &name)
                .map_err(|e| e.to_string())?
                .ok_or_else(|| crate::agent_loop::LoopError::NoAgent(name.clone()).to_string())?;
            hub.loops.task(rec, &text).await.map_err(|e| e.to_string())
        }
        AgentCmd::Status(name) => Ok(agent_status(hub, name.as_deref())),
        AgentCmd::Memory(None) => {
            // No name: the agent of this tab's session, else every agent's scope in a line.
            if let Some(rec) = hub.loops.agent_of(&caller.client_id) {
                return agent_memory(hub, &rec);
            }
            let list = agents::agents(store).map_err(|e| e.to_string())?;
            let mut out = String::from("代理的记忆 / agents' memory:\n");
            if list.is_empty() {
                out.push_str("  (none) — ?‹agent create NAME on TAB›!\n");
            }
            for a in list {
                let scope = crate::agent_loop::scope_of(&a);
                let n = hub
                    .commands
                    .memory
                    .count(&scope)
                    .map_err(|e| e.to_string())?;
                out.push_str(&format!(
                    "  {} — {scope}: {n} 条 / entries (?‹agent memory {}›!)\n",
                    a.spec.name, a.spec.name
                ));
            }
            Ok(out)
        }
        AgentCmd::Memory(Some(name)) => {
            let rec = agents::agent(store, &name)
                .map_err(|e| e.to_string())?
                .ok_or_else(|| crate::agent_loop::LoopError::NoAgent(name.clone()).to_string())?;
            agent_memory(hub, &rec)
        }
        AgentCmd::List => {
            let list = agents::agents(store).map_err(|e| e.to_string())?;
            let mut out = String::from("代理 / agents:\n");
            if list.is_empty() {
                out.push_str("  (none) — ?‹agent create NAME on TAB›!\n");
            }
            for a in list {
                let tools: Vec<String> = a
                    .spec
                    .tools_or_default()
                    .iter()
                    .map(ToString::to_string)
                    .collect();
                out.push_str(&format!(
                    "  {} on {} tools [{}]\n",
                    a.spec.name,
                    a.spec.target,
                    tools.join(", ")
                ));
            }
            Ok(out)
        }
        AgentCmd::Stop(name) => hub.loops.control(&whose(&name, caller), Control::Stop),
        AgentCmd::Pause(name) => hub.loops.control(&whose(&name, caller), Control::Pause),
        AgentCmd::Resume(name) => hub.loops.control(&whose(&name, caller), Control::Resume),
        AgentCmd::Loop(on) => {
            if caller.role == CmdRole::Worker && !caller.is_person() {
                return Err("工人的回复不循环 / a worker's replies never loop".into());
            }
            if !hub.loops.enabled() {
                return Err(crate::agent_loop::LoopError::Off.to_string());
            }
            hub.loops.set_loop(&caller.client_id, on);
            Ok(if on {
                "循环已开启：命令结果会发回这个对话 / loop on: the results of this tab's commands come back into its chat".into()
            } else {
                "循环已关闭 / loop off".into()
            })
        }
        AgentCmd::Done(_) => Ok(if hub.loops.has_session(&caller.client_id) {
            "已完成 / done".into()
        } else {
            "没有运行中的会话 / no session runs in this tab".into()
        }),
    }
}

/// `agent memory NAME`: the agent's hottest memories.
fn agent_memory(hub: &Control, rec: &crate::agents::store::AgentRecord) -> Result<String, String> {
    let name = &rec.spec.name;
    let scope = crate::agent_loop::scope_of(rec);
    let entries = hub
        .commands
        .memory
        .hottest(&scope, 20)
        .map_err(|e| e.to_string())?;
    let mut out = format!("代理 {name} 的记忆 / memory of agent `{name}` ({scope}):\n");
    if entries.is_empty() {
        out.push_str("  (none)\n");
    }
    for e in entries {
        out.push_str(&format!("  #{} [{}] {}\n", e.id, e.importance, e.text));
    }
    Ok(out)
}

/// The session an `agent stop|pause|resume [NAME]` acts on: the agent's, or the tab's own.
fn whose<'a>(name: &'a Option<String>, caller: &'a Caller) -> crate::agent_loop::Who<'a> {
    match name {
        Some(n) => crate::agent_loop::Who::Agent(n),
        None => crate::agent_loop::Who::Tab(&caller.client_id),
    }
}

/// `agent status [NAME]`: sessions now and lately, newest first.
fn agent_status(hub: &Control, name: Option<&str>) -> String {
    let views: Vec<_> = hub
        .loops
        .sessions()
        .into_iter()
        .filter(|v| name.is_none() || v.agent.as_deref() == name)
        .collect();
    let mut out = String::from("代理会话 / agent sessions:\n");
    if views.is_empty() {
        out.push_str("  (none)\n");
    }
    for v in views {
        let tab = hub
            .registry
            .get(&v.tab)
            .map(|c| c.display())
            .unwrap_or(v.tab.clone());
        out.push_str(&format!(
            "  {} {} on {tab}: {} round {}/{}",
            v.session,
            v.agent.as_deref().unwrap_or("(loop)"),
            v.state,
            v.round,
            v.of
        ));
        if let Some(c) = &v.running {
            out.push_str(&format!(", running {}", crate::agents::results::defuse(c)));
        } else if let Some(last) = &v.last {
            let last = crate::agent_loop::LastCommand {
                command: crate::agents::results::defuse(&last.command),
                ok: last.ok,
            };
            out.push_str(&format!(", 最后命令 / last command {last}"));
        }
        if let Some(w) = &v.why {
            out.push_str(&format!(" — {w}"));
        }
        out.push('\n');
    }
    out
}

/// The primer of a tab (SPEC §17): its role card's `system_prompt`, then what it may do now.
pub fn primer(
    hub: &Control,
    tab: &Arc<Client>,
    agent: Option<&crate::agents::store::AgentRecord>,
    limits: &crate::agents::session::Limits,
    recalled: Option<&str>,
) -> String {
    use crate::agents::primer::{build, Facts, SkillFact, TabFact};
    let card = hub.commands.card_for(tab);
    let tools = agent.map(|a| a.spec.tools_or_default());
    let permissions = match &tools {
        Some(t) => crate::commands::agent::Tool::permissions(t),
        None => hub.commands.caller(tab, Source::Reply).permissions,
    };
    let tabs = hub
        .registry
        .all()
        .into_iter()
        .filter(|c| c.id != tab.id && c.state() == ConnState::Connected)
        .map(|c| TabFact {
            label: c.display(),
            site: c.info().site,
            health: if crate::pick::usable(&hub.asks.pick, &c) {
                "ready".into()
            } else {
                "busy".into()
            },
        })
        .collect();
    let skills = hub
        .commands
        .skills
        .get()
        .skills
        .iter()
        .map(|s| SkillFact {
            name: s.name.clone(),
            params: skill_params(&s.schema),
        })
        .collect();
    let memory_scope = agent.map(|a| {
        a.spec
            .memory
            .clone()
            .unwrap_or_else(|| format!("agent.{}", a.spec.name))
    });
    // The memories recalled for this message (relevance × recency × importance), else the
    // scope's note and hot tags.
    let memory_block = recalled.map(str::to_string).or_else(|| {
        memory_scope
            .as_deref()
            .and_then(|s| hub.commands.memory.block(&[s]).ok().flatten())
    });
    let mcp_tools: Vec<String> = hub
        .mcp
        .catalogue()
        .into_iter()
        // An agent sees only the servers its tools name (`mcp:SERVER`).
        .filter(|t| {
            let server = t.split('/').next().unwrap_or_default();
            tools.as_ref().is_none_or(|ts| {
                ts.contains(&crate::commands::agent::Tool::Mcp(server.to_string()))
            })
        })
        .collect();
    build(&Facts {
        system_prompt: card.and_then(|c| c.instructions),
        permissions: Some(permissions),
        tools,
        tabs,
        skills,
        mcp_tools,
        memory_scope,
        memory_block,
        max_rounds: limits.max_rounds,
        result_chars: limits.result_chars,
    })
}

/// A skill's parameters as `name: type`, required first.
fn skill_params(schema: &serde_json::Value) -> Vec<String> {
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    let mut params: Vec<(bool, String)> = schema["properties"]
        .as_object()
        .map(|props| {
            props
                .iter()
                .map(|(k, v)| {
                    let ty = v["type"].as_str().unwrap_or("any");
                    (!required.contains(&k.as_str()), format!("{k}: {ty}"))
                })
                .collect()
        })
        .unwrap_or_default();
    params.sort();
    params.into_iter().map(|(_, p)| p).collect()
}

/// `?<role …>!` for one tab (also the dashboard's role/group change): a role card wins, the
/// new role and group are kept and the tab gets a fresh `welcome`.
pub fn set_tab_role(
    hub: &Control,
    client_id: &str,
    role: Role,
    group: Option<String>,
) -> Result<String, HostError> {
    let client = hub
        .registry
        .get(client_id)
        .ok_or_else(|| HostError::UnknownTarget(client_id.to_string()))?;
    if let Some((card_role, _)) = hub.commands.card_role(&client) {
        if card_role != role {
            return Err(HostError::Other(format!(
                "角色卡规定此标签页为 {} / a role card makes this tab {}; edit the card to change it",
                card_role.as_str(),
                card_role.as_str()
            )));
        }
    }
    client.update_info(|i| {
        i.role = role;
        if group.is_some() {
            i.group = group.clone();
        }
    });
    hub.registry.persist(&client);
    let _ = hub.registry.send(&client.id, &hub.welcome(&client));
    let g = client
        .info()
        .group
        .map(|g| format!(", group {g}"))
        .unwrap_or_default();
    Ok(format!("角色已设为 / role set to {}{g}", role.as_str()))
}

fn role_from_cmd(r: CmdRole) -> Role {
    match r {
        CmdRole::Master => Role::Master,
        CmdRole::Foreman => Role::Foreman,
        CmdRole::Worker => Role::Worker,
    }
}

/// `manager …` and `flow …` verbs.
fn manager(
    hub: &Arc<Control>,
    caller: &Caller,
    request: FlowRequest,
    cause: &crate::events::Cause,
) -> Result<String, crate::runner::RunError> {
    use crate::runner::RunError;
    let runner: &Runner = &hub.runner;
    let master = hub
        .registry
        .get(&caller.client_id)
        .filter(|c| c.state() == ConnState::Connected)
        .map(|c| c.id.clone());
    let m = match request {
        FlowRequest::Manager(m) => m,
        FlowRequest::Flow(action) => {
            // Seed aliases act on this tab's latest run.
            let latest = runner
                .list()
                .into_iter()
                .rev()
                .find(|(id, _, _)| {
                    runner.master_of(id).as_deref() == Some(caller.client_id.as_str())
                })
                .map(|(id, _, _)| id);
            return match (action, latest) {
                (FlowAction::Start, _) => Err(RunError::Other(
                    "用 ?<manager run NAME>! 启动流程 / start a flow with ?<manager run NAME>!"
                        .into(),
                )),
                (FlowAction::Status, Some(id)) => runner.status(&id),
                (_, None) => Err(RunError::NotRunning("(this tab)".into())),
                (FlowAction::Pause, Some(id)) => runner.control(&id, RunControl::Pause),
                (FlowAction::Resume, Some(id)) => runner.control(&id, RunControl::Resume),
                (FlowAction::Stop, Some(id)) => {
                    runner.control(&id, RunControl::Stop("stopped by the master".into()))
                }
            };
        }
    };
    match m {
        ManagerCmd::Run {
            name,
            from_node,
            params,
        } => {
            let inputs: BTreeMap<String, String> = params.into_iter().collect();
            // A run a rule started carries the rule in its events' cause (the loop guard),
            // known to the bus before the run's first event.
            let note = |run: &str| hub.bus.note_run(run, cause);
            let id = runner.start_noting(&name, master, inputs, from_node, &note)?;
            Ok(format!("已启动 / started {id}"))
        }
        ManagerCmd::Pause(n) => runner.control(&n, RunControl::Pause),
        ManagerCmd::Resume(n) => runner.control(&n, RunControl::Resume),
        ManagerCmd::Stop(n) => runner.control(&n, RunControl::Stop("stopped by the master".into())),
        ManagerCmd::Status(n) => runner.status(&n),
        ManagerCmd::Show(n) if n.starts_with("plan-") => {
            plan_verb(crate::planner::show(&hub.planner, &n))
        }
        ManagerCmd::Show(n) => {
            let (flow, _) = Runner::load_flow(hub, &n)?;
            Ok(crate::flows::render::text(&flow))
        }
        ManagerCmd::Approve { id, params } => plan_verb(crate::planner::approve(
            &hub.planner,
            master,
            &id,
            params.into_iter().collect(),
        )),
        ManagerCmd::Reject(id) => plan_verb(crate::planner::reject(&hub.planner, &id)),
        ManagerCmd::Save { id, name } => plan_verb(crate::planner::save(&hub.planner, &id, &name)),
        ManagerCmd::Why { run, node } => {
            crate::pick::why(&hub.asks.pick, &run, &node).map_err(RunError::Other)
        }
        ManagerCmd::Tabs => Ok(crate::pick::tabs_report(&hub.asks.pick)),
        ManagerCmd::Budget { site, quota } => {
            crate::pick::budget(&hub.asks.pick, site.as_deref(), quota.as_deref())
                .map_err(RunError::Other)
        }
        ManagerCmd::Plan(_) | ManagerCmd::Modify { .. } => Err(RunError::Other(
            "内部错误 / internal: planning is answered by the command host".into(),
        )),
        ManagerCmd::List => {
            let mut out = String::from("流程 / flows:\n");
            let mut names = hub.store.saved_flows()?;
            if let Ok(entries) = std::fs::read_dir(&hub.config.flows_dir) {
                for e in entries.flatten() {
                    let p = e.path();
                    if matches!(p.extension().and_then(|x| x.to_str()), Some("yaml" | "yml")) {
                        if let Some(stem) = p.file_stem().and_then(|s| s.to_str()) {
                            names.push(stem.to_string());
                        }
                    }
                }
            }
            names.sort();
            names.dedup();
            for n in names {
                out.push_str(&format!("  {n}\n"));
            }
            out.push_str(&crate::planner::list(&hub.planner));
            let runs = runner.list();
            if !runs.is_empty() {
                out.push_str("运行中 / runs in progress:\n");
                for (id, flow, st) in runs {
                    out.push_str(&format!("  {id} ({flow}): {st}\n"));
                }
            }
            Ok(out)
        }
        ManagerCmd::Delete(n) => {
            if hub.store.delete_flow(&n)? {
                Ok(format!("已删除 / deleted saved flow {n}"))
            } else {
                Err(RunError::Other(format!(
                    "只能删除用 manager create 保存的流程 / only flows saved with `manager create` can be deleted; `{n}` is not one"
                )))
            }
        }
        ManagerCmd::Create {
            name,
            source,
            auto_retry,
        } => {
            let text = match source {
                FlowSource::Inline(chain) => {
                    let known = hub.commands.vars.snapshot(&caller.client_id);
                    let policy = &hub.commands.exec;
                    let may_run =
                        |line: &str| crate::exec::check(policy, line).map_err(|e| e.to_string());
                    crate::commands::inline::flow_yaml(&name, &chain, &known, auto_retry, &may_run)
                        .map_err(RunError::Invalid)?
                }
                FlowSource::File(path) => {
                    if auto_retry.is_some() {
                        return Err(RunError::Other(
                            "auto_retry 只用于内联定义 / auto_retry is for an inline definition; \
                             in a file write `defaults: {retry: {max: N}}`"
                                .into(),
                        ));
                    }
                    read_flow_file(hub, &path)?
                }
            };
            crate::flows::load_str(&name, &text).map_err(|d| {
                RunError::Invalid(
                    d.iter()
                        .map(|d| d.to_string())
                        .collect::<Vec<_>>()
                        .join("\n"),
                )
            })?;
            hub.store.save_flow(&name, &text, crate::store::now_ms())?;
            Ok(format!("已保存流程 / saved flow {name}"))
        }
        ManagerCmd::Export { name, path } => {
            let (flow, _) = Runner::load_flow(hub, &name)?;
            let file = export_path(hub, &path)?;
            let json =
                serde_json::to_string_pretty(&flow).map_err(|e| RunError::Other(e.to_string()))?;
            std::fs::create_dir_all(file.parent().unwrap_or(&hub.config.data_dir))
                .and_then(|_| std::fs::write(&file, json))
                .map_err(|e| RunError::Other(format!("cannot write {}: {e}", file.display())))?;
            Ok(format!("已导出 / exported {name} to {}", file.display()))
        }
    }
}

fn plan_verb(
    r: Result<String, crate::planner::PlanError>,
) -> Result<String, crate::runner::RunError> {
    r.map_err(|e| crate::runner::RunError::Other(e.to_string()))
}

/// Reads a flow file named in a command: relative, inside the working directory.
fn read_flow_file(
    hub: &Control,
    path: &std::path::Path,
) -> Result<String, crate::runner::RunError> {
    use crate::runner::RunError;
    if path.is_absolute()
        || path
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(RunError::Other(
            "只接受当前目录下的相对路径 / only a relative path inside the working directory is accepted".into(),
        ));
    }
    let candidates = [path.to_path_buf(), hub.config.flows_dir.join(path)];
    for p in candidates {
        if let Ok(text) = std::fs::read_to_string(&p) {
            return Ok(text);
        }
    }
    Err(RunError::Other(format!(
        "找不到文件 / no file {}",
        path.display()
    )))
}

/// Exports go under `data_dir/exports`, whatever path was asked for (file name kept).
fn export_path(
    hub: &Control,
    path: &std::path::Path,
) -> Result<std::path::PathBuf, crate::runner::RunError> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| !n.starts_with('.'))
        .ok_or_else(|| crate::runner::RunError::Other("无效文件名 / bad file name".into()))?;
    Ok(hub.config.data_dir.join("exports").join(name))
}
