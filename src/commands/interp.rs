//! The interpreter: runs a parsed [`Command`] for a [`Caller`] against a [`Host`].
//!
//! It knows nothing about sockets: the hub implements [`Host`] (send a prompt to a tab and
//! wait for its reply, list workers, groups, roles, the flow engine) and turns the
//! [`CommandOutcome`] into a `cmd_result` frame. Every action passes the single permission
//! check in [`super::permissions`]; shell commands go through [`crate::exec`] only.

use super::agent::{self, AgentCmd};
use super::ast::{
    CmpOp, Command, Cond, EventCmd, FlowRequest, ForItems, Job, ManagerCmd, McpArgs, McpCmd,
    McpRequest, Operand, Part, Role, SetValue, Target, Template,
};
use super::help;
use super::parser::{self, parse_template};
use super::permissions::{self, Action, Caller, Denied};
use super::scanner::ScanItem;
use super::vars::{VarError, Variables};
use crate::exec::{self, ExecChunk, ExecError, ExecPolicy, ExecRequest};
use crate::protocol::Prompt;
use serde::Serialize;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use thiserror::Error;
use tokio::sync::mpsc;

/// Most steps (commands evaluated, prompts sent) one top-level command may take.
pub const MAX_STEPS: usize = 10_000;

/// The result of one command, ready for `cmd_result {command, result: {success, output}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommandOutcome {
    /// Whether the command did what it was asked.
    pub success: bool,
    /// The answer (or the error, in Chinese and English).
    pub output: String,
}

impl CommandOutcome {
    fn ok(output: String) -> Self {
        Self {
            success: true,
            output,
        }
    }

    fn failed(output: String) -> Self {
        Self {
            success: false,
            output,
        }
    }
}

/// Errors the host reports (a missing tab, a tab that failed, no flow engine, …).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HostError {
    /// No tab matches the name.
    #[error("没有这个标签页 / no such tab: {0}")]
    UnknownTarget(String),
    /// The tab exists but is not connected.
    #[error("标签页未连接 / tab not connected: {0}")]
    NotConnected(String),
    /// The tab did not answer in time.
    #[error("等待超时 / no answer from {target} within {secs} s")]
    Timeout {
        /// The tab.
        target: String,
        /// The timeout.
        secs: u64,
    },
    /// The tab reported a failure (429, captcha, login page, …).
    #[error("{target} 失败 / {target} failed: {message}")]
    Failed {
        /// The tab.
        target: String,
        /// What it said.
        message: String,
    },
    /// `manager` / `flow` before the flow engine exists.
    #[error("流程引擎尚未启用 / no flow engine is available yet; `manager` and `flow` commands cannot run")]
    NoFlowEngine,
    /// Anything else, already worded for a person.
    #[error("{0}")]
    Other(String),
}

/// What the interpreter needs from the hub. Implemented by the hub; a fake in tests.
///
/// Async methods return `Send` futures so the interpreter can run inside `tokio::spawn`.
pub trait Host: Send + Sync {
    /// Send `prompt` to one tab (site name, label or client id) through its queue and wait
    /// for its reply. A missing or disconnected tab is an error naming it.
    fn ask(
        &self,
        caller: &Caller,
        target: &str,
        prompt: Prompt,
    ) -> impl Future<Output = Result<String, HostError>> + Send;

    /// Ask every `(target, prompt)` concurrently; the answers come back in the same order.
    /// A host can hand every prompt to its tab before waiting on any (the default just runs
    /// `ask`s side by side).
    fn ask_all(
        &self,
        caller: &Caller,
        work: Vec<(String, Prompt)>,
    ) -> impl Future<Output = Vec<Result<String, HostError>>> + Send {
        async move {
            let asks = work
                .into_iter()
                .map(|(target, prompt)| async move { self.ask(caller, &target, prompt).await });
            futures_util::future::join_all(asks).await
        }
    }

    /// [`Host::ask`] with files attached (names in the files folder, docs/files.md). A host
    /// that carries no files refuses them rather than sending the text alone.
    fn ask_files(
        &self,
        caller: &Caller,
        target: &str,
        prompt: Prompt,
        files: Vec<String>,
    ) -> impl Future<Output = Result<String, HostError>> + Send {
        async move {
            if files.is_empty() {
                self.ask(caller, target, prompt).await
            } else {
                Err(HostError::Other(
                    "这里不能附带文件 / files cannot be attached here".into(),
                ))
            }
        }
    }

    /// [`Host::ask_all`] where each prompt may carry files.
    fn ask_all_files(
        &self,
        caller: &Caller,
        work: Vec<(String, Prompt, Vec<String>)>,
    ) -> impl Future<Output = Vec<Result<String, HostError>>> + Send {
        async move {
            if work.iter().all(|(_, _, f)| f.is_empty()) {
                let plain = work.into_iter().map(|(t, p, _)| (t, p)).collect();
                return self.ask_all(caller, plain).await;
            }
            let asks = work.into_iter().map(|(target, prompt, files)| async move {
                self.ask_files(caller, &target, prompt, files).await
            });
            futures_util::future::join_all(asks).await
        }
    }

    /// The latest complete reply of a tab (for `from X:`).
    fn last_reply(&self, target: &str) -> impl Future<Output = Result<String, HostError>> + Send;

    /// Tabs matching a selector (`role:worker`, `group:g`), as names `ask` accepts.
    fn select(&self, selector: &Target) -> Vec<String>;

    /// Every connected worker tab, as names `ask` accepts.
    fn all_workers(&self) -> Vec<String>;

    /// Whether tab `target` belongs to group `group`.
    fn in_group(&self, target: &str, group: &str) -> bool;

    /// A role card's name and `test_command`: the named card, or the card of the caller's
    /// tab. Default: no cards.
    fn card_test(
        &self,
        _caller: &Caller,
        _card: Option<&str>,
    ) -> Result<(String, String), HostError> {
        Err(HostError::Other(
            "这里没有角色卡 / no role cards here".into(),
        ))
    }

    /// Set the calling tab's role; returns the confirmation to show.
    fn set_role(
        &self,
        caller: &Caller,
        role: Role,
        group: Option<String>,
    ) -> impl Future<Output = Result<String, HostError>> + Send;

    /// A `manager` or `flow` command, for the flow engine. Default: no engine yet.
    fn flows(
        &self,
        caller: &Caller,
        request: FlowRequest,
    ) -> impl Future<Output = Result<String, HostError>> + Send {
        let _ = (caller, request);
        async { Err(HostError::NoFlowEngine) }
    }

    /// The team's memory (None: `remember` and `memory` are refused).
    fn memory(&self) -> Option<Arc<crate::memory::Memory>> {
        None
    }

    /// The skills loaded now (None: `skill` is refused).
    fn skills(&self) -> Option<Arc<crate::skills::SkillSet>> {
        None
    }

    /// An `mcp` command, for the hub's MCP client. Default: none configured.
    fn mcp(
        &self,
        caller: &Caller,
        request: McpRequest,
    ) -> impl Future<Output = Result<String, HostError>> + Send {
        let _ = (caller, request);
        async {
            Err(HostError::Other(
                "MCP 客户端不可用 / no MCP client is available here".into(),
            ))
        }
    }

    /// An `agent …` or `done` command, its text expanded, for the agent loop (docs/agents.md).
    /// Default: no agent loop here.
    fn agent(
        &self,
        caller: &Caller,
        cmd: AgentCmd<String>,
    ) -> impl Future<Output = Result<String, HostError>> + Send {
        let _ = (caller, cmd);
        async {
            Err(HostError::Other(
                "代理不可用 / agents are not available here".into(),
            ))
        }
    }

    /// `publish`, `subscribe`, `unsubscribe`, texts expanded: the hub's event bus (docs/cluster.md).
    /// Default: no bus here.
    fn events(
        &self,
        caller: &Caller,
        cmd: EventCmd<String>,
    ) -> impl Future<Output = Result<String, HostError>> + Send {
        let _ = (caller, cmd);
        async {
            Err(HostError::Other(
                "事件不可用 / events are not available here".into(),
            ))
        }
    }

    /// This hub's node name (`local` outside a cluster): `on NODE:` naming it runs here.
    fn node(&self) -> String {
        "local".into()
    }

    /// `on NODE: CMD` for another node (docs/cluster.md): runs `command` there, as `caller`, with
    /// `vars` bound, under that node's exec policy; its live output goes where
    /// [`Host::exec_output`] says. Returns (success, output). Default: no cluster.
    fn on_node(
        &self,
        caller: &Caller,
        node: &str,
        command: &str,
        vars: BTreeMap<String, String>,
    ) -> impl Future<Output = Result<(bool, String), HostError>> + Send {
        let _ = (caller, command, vars);
        let node = node.to_string();
        async move {
            Err(HostError::Other(format!(
                "没有节点 `{node}`：此集线器不在集群中 / no node `{node}`: this hub is not in a cluster"
            )))
        }
    }

    /// Where live shell output for this caller goes while a command runs (None: nowhere).
    fn exec_output(&self, caller: &Caller) -> Option<mpsc::Sender<ExecChunk>> {
        let _ = caller;
        None
    }
}

/// Why a command failed; rendered into [`CommandOutcome::output`].
/// The variable a chain sets to the exit code of its step before (0 when it succeeded).
pub const EXIT_CODE: &str = "exit_code";

#[derive(Debug, Error)]
enum CmdError {
    #[error(transparent)]
    Parse(#[from] parser::ParseError),
    #[error(transparent)]
    Denied(#[from] Denied),
    #[error(transparent)]
    Host(#[from] HostError),
    #[error(transparent)]
    Exec(#[from] ExecError),
    #[error(transparent)]
    Var(#[from] VarError),
    #[error("变量未定义 / undefined variable: ${0}")]
    UndefinedVar(String),
    #[error("未知命令 / unknown command `{word}`{}; `?<help>!` lists them all ({})", if near.is_empty() { String::new() } else { format!(" — did you mean: {near}?") }, if *exec_off { "a program runs only when the hub was started with `--exec allowlist` or `--exec on`" } else { "no program of that name is on the PATH either" })]
    UnknownCommand {
        word: String,
        near: String,
        exec_off: bool,
    },
    /// The seed manual's stand-in for a command (`$(shell)`, `cmd1`), typed as written.
    #[error("`{0}` 是手册里的占位符，不是命令 / `{0}` is the manual's placeholder for a command: write a real command in its place, e.g. ?<$var = $(to deepseek: 你好)>! or ?<to deepseek: 列出要点>! → ?<to qianwen: 翻译 $RESULT>! (`?<help>!` lists the commands)")]
    Placeholder(String),
    /// A script named like a program (`check_system.py`): no shell runs a file from the
    /// workspace by its bare name.
    #[error("`{word}` 是脚本，不是 PATH 上的程序 / `{word}` is a script, not a program on the PATH: write `{runner} {word}` to run it from the workspace {workspace} ({}){}", if *present { "it is there" } else { "put it there first" }, hint)]
    Script {
        word: String,
        runner: &'static str,
        workspace: String,
        present: bool,
        /// What the exec policy still needs, if anything.
        hint: String,
    },
    /// A shell command ran and exited non-zero (its output as for [`CmdError::Failed`]); a
    /// lone `$(…)` condition reads it as false, as a shell's `if` does.
    #[error("{1}")]
    Exit(i32, String),
    #[error("没有可用的工人 / no worker tabs are available")]
    NoWorkers,
    #[error("没有匹配的标签页 / no tab matches {0}")]
    NoMatch(String),
    #[error("步骤过多 / too many steps: one command may take at most {MAX_STEPS}")]
    TooManySteps,
    /// The command ran and failed; the text is its output (a non-zero exit, a partial fan-out).
    #[error("{0}")]
    Failed(String),
}

type Res = Result<String, CmdError>;
type BoxFut<'a> = Pin<Box<dyn Future<Output = Res> + Send + 'a>>;

/// Variables bound by the evaluation itself (`$RESULT`, loop variables); they shadow scopes.
type Frame = BTreeMap<String, String>;

/// Runs commands for callers.
///
/// Exists to keep the command semantics in one place, independent of the hub: the hub gives
/// it a [`Host`], the exec policy and the shared [`Variables`].
#[derive(Debug)]
pub struct Interpreter<H> {
    host: H,
    exec: ExecPolicy,
    vars: Arc<Variables>,
    /// Where `CMD &` runs; none: background jobs are refused.
    jobs: Option<Arc<crate::exec::jobs::Jobs>>,
}

/// Per top-level command state: the caller and the step budget.
struct Ctx<'a> {
    caller: &'a Caller,
    steps: AtomicUsize,
}

impl<H: Host> Interpreter<H> {
    /// An interpreter over `host` with `exec` policy and shared `vars`.
    pub fn new(host: H, exec: ExecPolicy, vars: Arc<Variables>) -> Self {
        Self {
            host,
            exec,
            vars,
            jobs: None,
        }
    }

    /// Lets `CMD &` run as a background job in `jobs`.
    pub fn with_jobs(mut self, jobs: Arc<crate::exec::jobs::Jobs>) -> Self {
        self.jobs = Some(jobs);
        self
    }

    /// The host.
    pub fn host(&self) -> &H {
        &self.host
    }

    /// The shared variables.
    pub fn variables(&self) -> &Arc<Variables> {
        &self.vars
    }

    /// Parse and run one command body (the text between `?<` and `>!`).
    pub async fn run_text(&self, caller: &Caller, body: &str) -> CommandOutcome {
        if let Err(denied) = self.check(caller, Action::Run) {
            return CommandOutcome::failed(denied.to_string());
        }
        match parser::parse(body) {
            Ok(cmd) => self.run(caller, &cmd).await,
            Err(e) => CommandOutcome::failed(e.to_string()),
        }
    }

    /// Parse and run commands written `?<a>! → ?<b>!` in one message: a chain across
    /// commands, each step run after the one before with its output as `$RESULT` (docs/commands.md).
    /// A body that does not parse fails the whole chain before anything runs.
    pub async fn run_texts(&self, caller: &Caller, bodies: &[&str]) -> CommandOutcome {
        if let [one] = bodies {
            return self.run_text(caller, one).await;
        }
        if let Err(denied) = self.check(caller, Action::Run) {
            return CommandOutcome::failed(denied.to_string());
        }
        let mut steps = Vec::with_capacity(bodies.len());
        for body in bodies {
            match parser::parse(body) {
                Ok(cmd) => steps.push(cmd),
                Err(e) => return CommandOutcome::failed(e.to_string()),
            }
        }
        self.run(caller, &Command::Chain(steps)).await
    }

    /// Answer one scanner item: returns the `command` field (the trimmed body, empty for a
    /// scan error) and the outcome, i.e. exactly what a `cmd_result` frame carries.
    pub async fn run_found(&self, caller: &Caller, item: &ScanItem) -> (String, CommandOutcome) {
        match item {
            Ok(found) => {
                let command = found.body.trim().to_string();
                let outcome = self.run_text(caller, &found.body).await;
                (command, outcome)
            }
            Err(e) => (String::new(), CommandOutcome::failed(e.to_string())),
        }
    }

    /// Run a parsed command.
    pub async fn run(&self, caller: &Caller, cmd: &Command) -> CommandOutcome {
        let ctx = Ctx {
            caller,
            steps: AtomicUsize::new(0),
        };
        let result = match self.check(caller, Action::Run) {
            Ok(()) => self.eval(&ctx, cmd, &Frame::new()).await,
            Err(e) => Err(e.into()),
        };
        match result {
            Ok(out) => CommandOutcome::ok(out),
            Err(e) => CommandOutcome::failed(e.to_string()),
        }
    }

    /// Run a parsed command with `vars` bound for it alone (they shadow every scope, as
    /// `$RESULT` does): a rule's command with `$EVENT`.
    pub async fn run_with(
        &self,
        caller: &Caller,
        cmd: &Command,
        vars: BTreeMap<String, String>,
    ) -> CommandOutcome {
        let ctx = Ctx {
            caller,
            steps: AtomicUsize::new(0),
        };
        let result = match self.check(caller, Action::Run) {
            Ok(()) => self.eval(&ctx, cmd, &vars).await,
            Err(e) => Err(e.into()),
        };
        match result {
            Ok(out) => CommandOutcome::ok(out),
            Err(e) => CommandOutcome::failed(e.to_string()),
        }
    }

    /// Whether `cond` holds with `vars` bound (a rule's `where`); the error is worded for a
    /// person.
    pub async fn holds(
        &self,
        caller: &Caller,
        cond: &Cond,
        vars: BTreeMap<String, String>,
    ) -> Result<bool, String> {
        let ctx = Ctx {
            caller,
            steps: AtomicUsize::new(0),
        };
        self.cond(&ctx, cond, &vars)
            .await
            .map_err(|e| e.to_string())
    }

    fn check(&self, caller: &Caller, action: Action<'_>) -> Result<(), Denied> {
        permissions::check(caller, action, |tab, group| self.host.in_group(tab, group))
    }

    fn step(&self, ctx: &Ctx<'_>) -> Result<(), CmdError> {
        if ctx.steps.fetch_add(1, Ordering::Relaxed) >= MAX_STEPS {
            return Err(CmdError::TooManySteps);
        }
        Ok(())
    }

    fn eval<'a>(&'a self, ctx: &'a Ctx<'a>, cmd: &'a Command, frame: &'a Frame) -> BoxFut<'a> {
        Box::pin(async move {
            self.step(ctx)?;
            match cmd {
                Command::Shell { text } => self.shell(ctx, text, frame).await,
                Command::Background { text } => self.background(ctx, text, frame),
                Command::Jobs(cmd) => self.jobs(ctx, cmd),
                Command::Set {
                    name,
                    global,
                    value,
                } => self.set(ctx, name, *global, value, frame).await,
                Command::Parallel { jobs } => self.parallel(ctx, jobs, frame).await,
                Command::To(job) => self.to(ctx, job, frame).await,
                Command::From { target, then } => {
                    self.from(ctx, target, then.as_deref(), frame).await
                }
                Command::SendToAll { prompt } => self.send_to_all(ctx, prompt, frame).await,
                Command::Chain(steps) => self.chain(ctx, steps, frame).await,
                Command::Finally { body, cleanup } => {
                    let result = self.eval(ctx, body, frame).await;
                    let mut inner = frame.clone();
                    if let Ok(out) = &result {
                        inner.insert("RESULT".into(), trim_capture(out.clone()));
                    }
                    match (result, self.eval(ctx, cleanup, &inner).await) {
                        (Ok(out), Ok(_)) => Ok(out),
                        (Err(e), Ok(_)) => Err(e),
                        (Ok(out), Err(e)) => Err(CmdError::Failed(format!(
                            "{out}\nfinally 失败 / finally failed: {e}"
                        ))),
                        (Err(e), Err(c)) => Err(CmdError::Failed(format!(
                            "{e}\nfinally 失败 / finally failed: {c}"
                        ))),
                    }
                }
                Command::If {
                    cond,
                    then,
                    otherwise,
                } => self.if_(ctx, cond, then, otherwise.as_deref(), frame).await,
                Command::For { var, items, body } => self.for_(ctx, var, items, body, frame).await,
                Command::Manager(m) => self.manager(ctx, m, frame).await,
                Command::Flow(action) => {
                    self.check(
                        ctx.caller,
                        Action::Flow {
                            mutates: action.mutates(),
                        },
                    )?;
                    Ok(self
                        .host
                        .flows(ctx.caller, FlowRequest::Flow(*action))
                        .await?)
                }
                Command::Role { role, group } => {
                    self.check(ctx.caller, Action::SetRole)?;
                    Ok(self.host.set_role(ctx.caller, *role, group.clone()).await?)
                }
                Command::RoleTest(card) => {
                    // The card's own check, run as the one who asked (docs/commands.md).
                    let (name, test) = self.host.card_test(ctx.caller, card.as_deref())?;
                    let body = test
                        .trim()
                        .strip_prefix("?<")
                        .and_then(|b| b.strip_suffix(">!"))
                        .unwrap_or(test.trim())
                        .to_string();
                    let parsed = parser::parse(&body).map_err(|e| {
                        CmdError::Failed(format!(
                            "角色卡 {name} 的 test_command 无法解析 / card `{name}`'s test_command does not parse: {e}"
                        ))
                    })?;
                    match self.eval(ctx, &parsed, frame).await {
                        Ok(out) => Ok(format!(
                            "✓ 角色卡 {name} 测试通过 / card `{name}` test passed: `{body}`\n{out}"
                        )),
                        Err(e) => Err(CmdError::Failed(format!(
                            "✗ 角色卡 {name} 测试失败 / card `{name}` test failed: `{body}`\n{e}"
                        ))),
                    }
                }
                Command::Remember { scope, text } => {
                    self.remember(ctx, scope.as_deref(), text, frame).await
                }
                Command::Memory(m) => self.memory(ctx, m, frame).await,
                Command::Skill(s) => self.skill(ctx, s, frame).await,
                Command::Mcp(m) => self.mcp(ctx, m, frame).await,
                Command::Agent(a) => self.agent(ctx, a, frame).await,
                Command::Event(e) => self.event(ctx, e, frame).await,
                Command::On { node, text, body } => self.on(ctx, node, text, body, frame).await,
                Command::Help { topic } => match topic {
                    None => Ok(help::overview()),
                    Some(t) => help::topic(t).map_err(CmdError::Failed),
                },
            }
        })
    }

    /// Expand `$var`s: frame, then the caller's scope, then global. Values are inserted as
    /// text and never parsed again.
    fn expand(&self, ctx: &Ctx<'_>, t: &Template, frame: &Frame) -> Res {
        let mut out = String::new();
        for part in &t.parts {
            match part {
                Part::Lit(s) => out.push_str(s),
                Part::Var(name) => match frame.get(name) {
                    Some(v) => out.push_str(v),
                    None => {
                        let v = self
                            .vars
                            .get(&ctx.caller.client_id, name)
                            .ok_or_else(|| CmdError::UndefinedVar(name.clone()))?;
                        out.push_str(&v);
                    }
                },
            }
        }
        Ok(out)
    }

    /// `CMD &`: started under the exec policy, answered at once with the job's id.
    fn background(&self, ctx: &Ctx<'_>, text: &str, frame: &Frame) -> Res {
        self.check(ctx.caller, Action::Shell)?;
        let jobs = self.jobs.as_ref().ok_or_else(|| {
            CmdError::Failed("这里不能运行后台任务 / background jobs do not run here".into())
        })?;
        let first = text.split_whitespace().next().unwrap_or(text);
        if let Some(e) = self.bare_script(text) {
            return Err(e);
        }
        if self.exec.mode == exec::ExecMode::Off {
            return Err(CmdError::UnknownCommand {
                word: first.to_string(),
                near: parser::nearest_words(first).join(", "),
                exec_off: true,
            });
        }
        let mut vars = self.vars.snapshot(&ctx.caller.client_id);
        vars.extend(frame.iter().map(|(k, v)| (k.clone(), v.clone())));
        let id = jobs
            .start(&self.exec, text, vars, &ctx.caller.client_id)
            .map_err(CmdError::Failed)?;
        Ok(format!(
            "后台任务 {id} 已启动 / job {id} started in the background (?‹jobs›! shows its output, ?‹jobs kill {id}›! ends it)"
        ))
    }

    /// `jobs` / `jobs kill ID`.
    fn jobs(&self, ctx: &Ctx<'_>, cmd: &crate::commands::ast::JobsCmd) -> Res {
        let jobs = self
            .jobs
            .as_ref()
            .ok_or_else(|| CmdError::Failed("这里没有后台任务 / no background jobs here".into()))?;
        match cmd {
            crate::commands::ast::JobsCmd::List => Ok(jobs.render()),
            crate::commands::ast::JobsCmd::Kill(id) => {
                self.check(ctx.caller, Action::Shell)?;
                jobs.kill(id, "jobs kill").map_err(CmdError::Failed)
            }
        }
    }

    async fn shell(&self, ctx: &Ctx<'_>, text: &str, frame: &Frame) -> Res {
        self.check(ctx.caller, Action::Shell)?;
        let exec_off = self.exec.mode == exec::ExecMode::Off;
        let first = text.split_whitespace().next().unwrap_or(text);
        if parser::is_placeholder(first) {
            return Err(CmdError::Placeholder(first.to_string()));
        }
        if let Some(e) = self.bare_script(text) {
            return Err(e);
        }
        // With no shell, a word we do not know is a mistyped or unknown command, not a
        // program; with one, only what names a program is shell (docs/commands.md): say so, and
        // what it may have meant, never `sh: WORD: not found`.
        let unknown = if exec_off {
            Some(first)
        } else {
            exec::unknown_program(text)
        };
        if let Some(word) = unknown {
            return Err(CmdError::UnknownCommand {
                word: word.to_string(),
                near: parser::nearest_words(word).join(", "),
                exec_off,
            });
        }
        let mut vars = self.vars.snapshot(&ctx.caller.client_id);
        vars.extend(frame.iter().map(|(k, v)| (k.clone(), v.clone())));
        let req = ExecRequest {
            command: text,
            vars: &vars,
            caller: &ctx.caller.client_id,
        };
        let out = exec::run(&self.exec, req, self.host.exec_output(ctx.caller)).await?;
        let rendered = out.render(self.exec.timeout);
        if out.success() {
            Ok(rendered)
        } else if let (Some(code), false) = (out.exit_code, out.timed_out) {
            Err(CmdError::Exit(code, rendered))
        } else {
            Err(CmdError::Failed(rendered))
        }
    }

    /// `NAME.py ARGS` (the seed manual's `check_system.py`) when no program of that name is
    /// on the PATH: what to write instead, and what the exec policy still needs.
    fn bare_script(&self, text: &str) -> Option<CmdError> {
        let word = exec::unknown_program(text)?;
        let runner = match word.rsplit_once('.')?.1 {
            "py" => "python",
            "sh" => "sh",
            "js" => "node",
            "rb" => "ruby",
            "pl" => "perl",
            _ => return None,
        };
        let hint = match &self.exec.mode {
            exec::ExecMode::Off => format!(
                "; scripts run only when the hub was started with `--exec allowlist --allow {runner}` or `--exec on`"
            ),
            exec::ExecMode::Allowlist(allowed) if !allowed.iter().any(|a| a == runner) => {
                format!("; `{runner}` is not on the allowlist: start the hub with `--allow {runner}`")
            }
            _ => String::new(),
        };
        Some(CmdError::Script {
            word: word.to_string(),
            runner,
            workspace: self.exec.workspace.display().to_string(),
            present: self.exec.workspace.join(word).is_file(),
            hint,
        })
    }

    /// `on NODE: CMD`: here when NODE is this hub, else on that node (its exec policy, its
    /// skills), the caller's variables sent along.
    async fn on(
        &self,
        ctx: &Ctx<'_>,
        node: &str,
        text: &str,
        body: &Command,
        frame: &Frame,
    ) -> Res {
        if matches!(body, Command::Shell { .. }) {
            self.check(ctx.caller, Action::Shell)?;
        }
        if node == self.host.node() {
            return self.eval(ctx, body, frame).await;
        }
        let mut vars = self.vars.snapshot(&ctx.caller.client_id);
        vars.extend(frame.iter().map(|(k, v)| (k.clone(), v.clone())));
        let (ok, out) = self
            .host
            .on_node(ctx.caller, node, text, vars)
            .await
            .map_err(|e| match e {
                HostError::Other(why) => HostError::Other(on_node_says(node, why)),
                other => other,
            })?;
        if ok {
            Ok(out)
        } else {
            // What that node refused or what failed there reads as coming from it.
            Err(CmdError::Failed(on_node_says(node, out)))
        }
    }

    async fn event(&self, ctx: &Ctx<'_>, cmd: &EventCmd<Option<Template>>, frame: &Frame) -> Res {
        self.check(
            ctx.caller,
            Action::Events {
                mutates: !matches!(cmd, EventCmd::List),
            },
        )?;
        let cmd = match cmd {
            EventCmd::Publish { topic, text } => EventCmd::Publish {
                topic: topic.clone(),
                text: match text {
                    Some(t) => self.expand(ctx, t, frame)?,
                    None => frame.get("RESULT").cloned().unwrap_or_default(),
                },
            },
            EventCmd::Subscribe {
                topic,
                cond,
                command,
            } => EventCmd::Subscribe {
                topic: topic.clone(),
                cond: cond.clone(),
                command: command.clone(),
            },
            EventCmd::List => EventCmd::List,
            EventCmd::Unsubscribe(id) => EventCmd::Unsubscribe(*id),
        };
        Ok(self.host.events(ctx.caller, cmd).await?)
    }

    async fn set(
        &self,
        ctx: &Ctx<'_>,
        name: &str,
        global: bool,
        value: &SetValue,
        frame: &Frame,
    ) -> Res {
        let value = match value {
            SetValue::Capture(cmd) => trim_capture(self.eval(ctx, cmd, frame).await?),
            SetValue::Literal(t) => self.expand(ctx, t, frame)?,
        };
        let shown = preview(&value);
        if global {
            self.vars.set_global(name, value)?;
        } else {
            self.vars.set(&ctx.caller.client_id, name, value)?;
        }
        Ok(format!("{name} = {shown}"))
    }

    /// Resolve a target to tab names, checking dispatch permission for each.
    fn resolve(
        &self,
        ctx: &Ctx<'_>,
        target: &Target,
        frame: &Frame,
    ) -> Result<Vec<String>, CmdError> {
        let names = match target {
            Target::Name(n) => vec![self.expand(ctx, &parse_template(n), frame)?],
            selector => self.host.select(selector),
        };
        if names.is_empty() {
            return Err(CmdError::NoMatch(target.to_string()));
        }
        for n in &names {
            self.check(ctx.caller, Action::Dispatch(n))?;
        }
        Ok(names)
    }

    async fn to(&self, ctx: &Ctx<'_>, job: &Job, frame: &Frame) -> Res {
        let names = self.resolve(ctx, &job.target, frame)?;
        let prompt = Prompt::from(self.expand(ctx, &job.prompt, frame)?);
        self.step(ctx)?;
        // `to` reaches exactly one tab (docs/commands.md): a name or a selector matching several
        // tabs is handed to the ask service as written, which picks one of them.
        let target = match names.as_slice() {
            [one] => one.clone(),
            _ => match &job.target {
                Target::Name(_) => names[0].clone(),
                selector => selector.to_string(),
            },
        };
        if job.files.is_empty() {
            return Ok(self.host.ask(ctx.caller, &target, prompt).await?);
        }
        let files = self.expand_files(ctx, &job.files, frame)?;
        Ok(self
            .host
            .ask_files(ctx.caller, &target, prompt, files)
            .await?)
    }

    /// File names with their `$var`s expanded (a flow may name `$report`).
    fn expand_files(
        &self,
        ctx: &Ctx<'_>,
        files: &[String],
        frame: &Frame,
    ) -> Result<Vec<String>, CmdError> {
        files
            .iter()
            .map(|f| {
                if f.contains('$') {
                    self.expand(ctx, &parser::parse_template(f), frame)
                } else {
                    Ok(f.clone())
                }
            })
            .collect()
    }

    async fn parallel(&self, ctx: &Ctx<'_>, jobs: &[Job], frame: &Frame) -> Res {
        let mut work = Vec::new();
        // `to=[a,b,…] TEXT` is one job per target with the same text: expanded once, and
        // the tasks share it.
        let mut last: Option<(&Template, Prompt)> = None;
        for job in jobs {
            let prompt = match &last {
                Some((t, p)) if **t == job.prompt => p.clone(),
                _ => {
                    let p = Prompt::from(self.expand(ctx, &job.prompt, frame)?);
                    last = Some((&job.prompt, p.clone()));
                    p
                }
            };
            let files = self.expand_files(ctx, &job.files, frame)?;
            for name in self.resolve(ctx, &job.target, frame)? {
                work.push((name, prompt.clone(), files.clone()));
            }
        }
        self.fan_out_files(ctx, work).await
    }

    async fn send_to_all(&self, ctx: &Ctx<'_>, prompt: &Template, frame: &Frame) -> Res {
        let prompt = Prompt::from(self.expand(ctx, prompt, frame)?);
        let work: Vec<_> = self
            .host
            .all_workers()
            .into_iter()
            .filter(|w| self.check(ctx.caller, Action::Dispatch(w)).is_ok())
            .map(|w| (w, prompt.clone()))
            .collect();
        if work.is_empty() {
            return Err(CmdError::NoWorkers);
        }
        self.fan_out(ctx, work).await
    }

    /// Ask every (tab, prompt) concurrently; answers labelled `[tab] …`, in the given order.
    async fn fan_out(&self, ctx: &Ctx<'_>, work: Vec<(String, Prompt)>) -> Res {
        let work = work.into_iter().map(|(t, p)| (t, p, Vec::new())).collect();
        self.fan_out_files(ctx, work).await
    }

    /// [`Self::fan_out`] where each prompt may carry files.
    async fn fan_out_files(&self, ctx: &Ctx<'_>, work: Vec<(String, Prompt, Vec<String>)>) -> Res {
        for _ in &work {
            self.step(ctx)?;
        }
        let tabs: Vec<String> = work.iter().map(|(tab, _, _)| tab.clone()).collect();
        let answers = self.host.ask_all_files(ctx.caller, work).await;
        let mut all_ok = true;
        let sections: Vec<String> = tabs
            .iter()
            .zip(answers)
            .map(|(tab, answer)| match answer {
                Ok(text) => format!("[{tab}] {}", text.trim()),
                Err(e) => {
                    all_ok = false;
                    format!("[{tab}] 错误 / error: {e}")
                }
            })
            .collect();
        let text = sections.join("\n\n");
        if all_ok {
            Ok(text)
        } else {
            Err(CmdError::Failed(text))
        }
    }

    async fn from(
        &self,
        ctx: &Ctx<'_>,
        target: &Target,
        then: Option<&Command>,
        frame: &Frame,
    ) -> Res {
        let names = self.resolve(ctx, target, frame)?;
        let [name] = names.as_slice() else {
            return Err(CmdError::Failed(format!(
                "from 只能指定一个标签页 / `from` takes one tab, but {target} matches {}",
                names.join(", ")
            )));
        };
        let answer = self.host.last_reply(name).await?;
        let Some(then) = then else {
            return Ok(answer);
        };
        let mut inner = frame.clone();
        inner.insert("RESULT".into(), answer);
        self.eval(ctx, then, &inner).await
    }

    /// `a -> b -> c`: each step gets the one before's output as `$RESULT` and its exit code
    /// as `$exit_code` (the seed manual's `check.py -> if $exit_code != 0 then alert.py`): a
    /// shell step that exits non-zero stops the chain, unless the next step is an `if` on
    /// `$exit_code`, which then decides.
    async fn chain(&self, ctx: &Ctx<'_>, steps: &[Command], frame: &Frame) -> Res {
        let mut inner = frame.clone();
        let mut last = String::new();
        for (k, step) in steps.iter().enumerate() {
            let code = match self.eval(ctx, step, &inner).await {
                Ok(out) => {
                    last = out;
                    0
                }
                Err(CmdError::Exit(code, out))
                    if steps.get(k + 1).is_some_and(|n| n.tests_var(EXIT_CODE)) =>
                {
                    last = out;
                    code
                }
                Err(e) => return Err(e),
            };
            inner.insert("RESULT".into(), last.clone());
            inner.insert(EXIT_CODE.into(), code.to_string());
        }
        Ok(last)
    }

    async fn if_(
        &self,
        ctx: &Ctx<'_>,
        cond: &Cond,
        then: &Command,
        otherwise: Option<&Command>,
        frame: &Frame,
    ) -> Res {
        if self.cond(ctx, cond, frame).await? {
            self.eval(ctx, then, frame).await
        } else if let Some(o) = otherwise {
            self.eval(ctx, o, frame).await
        } else {
            Ok("（条件不成立，未执行 / condition false, nothing ran）".into())
        }
    }

    fn cond<'a>(
        &'a self,
        ctx: &'a Ctx<'a>,
        cond: &'a Cond,
        frame: &'a Frame,
    ) -> Pin<Box<dyn Future<Output = Result<bool, CmdError>> + Send + 'a>> {
        Box::pin(async move {
            match cond {
                Cond::Not(c) => Ok(!self.cond(ctx, c, frame).await?),
                // `if $(grep …) then …`: a command that ran and exited non-zero is false, as
                // in a shell; any other failure (refused, timed out, a tab failed) is an error.
                Cond::Truthy(Operand::Capture(cmd)) => match self.eval(ctx, cmd, frame).await {
                    Ok(out) => Ok(truthy(&trim_capture(out))),
                    Err(CmdError::Exit(..)) => Ok(false),
                    Err(e) => Err(e),
                },
                Cond::Truthy(o) => Ok(truthy(&self.operand(ctx, o, frame).await?)),
                Cond::Compare { left, op, right } => {
                    let l = self.operand(ctx, left, frame).await?;
                    let r = self.operand(ctx, right, frame).await?;
                    Ok(compare(&l, *op, &r))
                }
            }
        })
    }

    async fn operand(&self, ctx: &Ctx<'_>, o: &Operand, frame: &Frame) -> Res {
        match o {
            Operand::Text(t) => self.expand(ctx, t, frame),
            Operand::Capture(cmd) => Ok(trim_capture(self.eval(ctx, cmd, frame).await?)),
        }
    }

    async fn for_(
        &self,
        ctx: &Ctx<'_>,
        var: &str,
        items: &ForItems,
        body: &Command,
        frame: &Frame,
    ) -> Res {
        let values: Vec<String> = match items {
            ForItems::Range { from, to, step } => range(*from, *to, *step),
            ForItems::List(list) => list
                .iter()
                .map(|t| self.expand(ctx, t, frame))
                .collect::<Result<_, _>>()?,
        };
        let mut outputs = Vec::with_capacity(values.len());
        let mut inner = frame.clone();
        for value in values {
            inner.insert(var.to_string(), value);
            outputs.push(self.eval(ctx, body, &inner).await?);
        }
        Ok(outputs.join("\n"))
    }

    async fn manager(&self, ctx: &Ctx<'_>, m: &ManagerCmd, frame: &Frame) -> Res {
        self.check(
            ctx.caller,
            Action::Flow {
                mutates: m.mutates(),
            },
        )?;
        let m = match m {
            ManagerCmd::Run {
                name,
                from_node,
                params,
            } => ManagerCmd::Run {
                name: name.clone(),
                from_node: from_node.clone(),
                params: params
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), self.expand(ctx, &parse_template(v), frame)?)))
                    .collect::<Result<_, CmdError>>()?,
            },
            ManagerCmd::Approve { id, params } => ManagerCmd::Approve {
                id: id.clone(),
                params: params
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), self.expand(ctx, &parse_template(v), frame)?)))
                    .collect::<Result<_, CmdError>>()?,
            },
            other => other.clone(),
        };
        Ok(self.host.flows(ctx.caller, FlowRequest::Manager(m)).await?)
    }
}

impl<H: Host> Interpreter<H> {
    /// `agent …` / `done`: the one permission check, the tools rule, then the host.
    async fn agent(&self, ctx: &Ctx<'_>, a: &AgentCmd, frame: &Frame) -> Res {
        self.check(
            ctx.caller,
            Action::Agent {
                mutates: a.mutates(),
            },
        )?;
        if let AgentCmd::Create(spec) = a {
            agent::tools_within(ctx.caller, &spec.tools_or_default())?;
        }
        let request = a.try_map(|t| self.expand(ctx, t, frame))?;
        Ok(self.host.agent(ctx.caller, request).await?)
    }

    async fn mcp(&self, ctx: &Ctx<'_>, m: &McpCmd, frame: &Frame) -> Res {
        let config = matches!(m, McpCmd::ConfigAdd { .. } | McpCmd::ConfigRemove(_));
        self.check(
            ctx.caller,
            if config {
                Action::McpConfig
            } else {
                Action::Mcp
            },
        )?;
        let request = match m {
            McpCmd::List => McpRequest::List,
            McpCmd::ConfigAdd {
                name,
                command,
                args,
            } => McpRequest::ConfigAdd {
                name: name.clone(),
                command: command.clone(),
                args: args.clone(),
            },
            McpCmd::ConfigRemove(name) => McpRequest::ConfigRemove(name.clone()),
            McpCmd::Resources(server) => McpRequest::Resources(server.clone()),
            McpCmd::Read { server, uri } => McpRequest::Read {
                server: server.clone(),
                uri: self.expand(ctx, &parse_template(uri), frame)?,
            },
            McpCmd::Use { server, tool, args } => {
                let args = match args {
                    McpArgs::Pairs(pairs) => {
                        let mut out = serde_json::Map::new();
                        for (k, v) in pairs {
                            let v = self.expand(ctx, &parse_template(v), frame)?;
                            out.insert(k.clone(), serde_json::Value::String(v));
                        }
                        out
                    }
                    McpArgs::Json(text) => {
                        let v: serde_json::Value = serde_json::from_str(text)
                            .map_err(|e| CmdError::Failed(format!("arguments: {e}")))?;
                        match self.expand_json(ctx, v, frame)? {
                            serde_json::Value::Object(o) => o,
                            _ => {
                                return Err(CmdError::Failed(
                                    "arguments must be a JSON object".into(),
                                ))
                            }
                        }
                    }
                };
                McpRequest::Use {
                    server: server.clone(),
                    tool: tool.clone(),
                    args,
                }
            }
        };
        Ok(self.host.mcp(ctx.caller, request).await?)
    }

    /// Expands `$var`s inside every string of a JSON value (values inserted as text).
    fn expand_json(
        &self,
        ctx: &Ctx<'_>,
        v: serde_json::Value,
        frame: &Frame,
    ) -> Result<serde_json::Value, CmdError> {
        use serde_json::Value;
        Ok(match v {
            Value::String(s) => Value::String(self.expand(ctx, &parse_template(&s), frame)?),
            Value::Array(a) => Value::Array(
                a.into_iter()
                    .map(|x| self.expand_json(ctx, x, frame))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(o) => Value::Object(
                o.into_iter()
                    .map(|(k, x)| Ok((k, self.expand_json(ctx, x, frame)?)))
                    .collect::<Result<_, CmdError>>()?,
            ),
            other => other,
        })
    }
}

/// `$(…)` drops trailing newlines, as in a shell.
/// A failure from node `node` (`on NODE:`), with the node named in front unless it already is:
/// `unknown command `x`` alone would read as if this hub had refused it.
fn on_node_says(node: &str, text: String) -> String {
    if text.contains(&format!("node `{node}`")) || text.contains(&format!("节点 `{node}`")) {
        return text;
    }
    format!("节点 `{node}` / node `{node}`: {text}")
}

fn trim_capture(s: String) -> String {
    s.trim_end_matches(['\n', '\r']).to_string()
}

/// A short view of a value for the `set` confirmation.
fn preview(value: &str) -> String {
    const MAX: usize = 200;
    if value.len() <= MAX {
        return value.to_string();
    }
    let mut cut = MAX;
    while !value.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…({} bytes)", &value[..cut], value.len())
}

/// True unless empty, `0` or `false` (after trimming).
fn truthy(s: &str) -> bool {
    let s = s.trim();
    !(s.is_empty() || s == "0" || s.eq_ignore_ascii_case("false"))
}

/// Numbers compare numerically when both sides parse; otherwise as trimmed strings.
fn compare(l: &str, op: CmpOp, r: &str) -> bool {
    use std::cmp::Ordering::{Equal, Greater, Less};
    let (l, r) = (l.trim(), r.trim());
    let ord = || match (l.parse::<f64>(), r.parse::<f64>()) {
        (Ok(a), Ok(b)) => a.partial_cmp(&b),
        _ => Some(l.cmp(r)),
    };
    match op {
        CmpOp::Contains => l.contains(r),
        CmpOp::Eq => ord() == Some(Equal),
        CmpOp::Ne => ord() != Some(Equal),
        CmpOp::Lt => ord() == Some(Less),
        CmpOp::Le => matches!(ord(), Some(Less | Equal)),
        CmpOp::Gt => ord() == Some(Greater),
        CmpOp::Ge => matches!(ord(), Some(Greater | Equal)),
    }
}

/// The values of `{from..to..step}`, counting down when from > to (length bounded by the
/// parser; bounded again here).
fn range(from: i64, to: i64, step: i64) -> Vec<String> {
    let (from, to, step) = (i128::from(from), i128::from(to), i128::from(step.max(1)));
    let step = if from <= to { step } else { -step };
    let mut out = Vec::new();
    let mut i = from;
    while out.len() < parser::MAX_LOOP_ITERATIONS as usize
        && (if step > 0 { i <= to } else { i >= to })
    {
        out.push(i.to_string());
        i += step;
    }
    out
}

mod team;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod agent_tests;
