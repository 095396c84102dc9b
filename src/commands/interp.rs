//! The interpreter's core: runs a parsed [`Command`] for a [`Caller`] against a [`Host`].
//!
//! It knows nothing about sockets: the hub implements the ports ([`super::ports`]: asking
//! tabs, the flow engine, the team's services, the cluster, live output) and turns the
//! [`CommandOutcome`] into a `cmd_result` frame. The core holds what every verb shares (the
//! entry gate, the step budget, `$var` expansion, target resolution) and hands each command
//! to its verb's module under [`super::verbs`]. Every action passes the single permission
//! check in [`super::permissions`]; shell commands go through [`crate::exec`] only.

pub use super::ports::{Cluster, ExecSink, Flows, Host, HostError, Services, Tabs};

use super::ast::{Command, Cond, Part, Target, Template};
use super::help;
use super::parser::{self, parse_template};
use super::permissions::{self, Caller, Denied, Intent};
use super::scanner::ScanItem;
use super::vars::{VarError, Variables};
use crate::exec::{ExecError, ExecPolicy};
use serde::Serialize;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use thiserror::Error;

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

/// The variable a chain sets to the exit code of its step before (0 when it succeeded).
pub const EXIT_CODE: &str = "exit_code";

/// Why a command failed; rendered into [`CommandOutcome::output`].
#[derive(Debug, Error)]
pub(in crate::commands) enum CmdError {
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

pub(in crate::commands) type Res = Result<String, CmdError>;
type BoxFut<'a> = Pin<Box<dyn Future<Output = Res> + Send + 'a>>;

/// Variables bound by the evaluation itself (`$RESULT`, loop variables); they shadow scopes.
pub(in crate::commands) type Frame = BTreeMap<String, String>;

/// Runs commands for callers.
///
/// Exists to keep the command semantics in one place, independent of the hub: the hub gives
/// it a [`Host`], the exec policy and the shared [`Variables`].
#[derive(Debug)]
pub struct Interpreter<H> {
    pub(in crate::commands) host: H,
    pub(in crate::commands) exec: ExecPolicy,
    pub(in crate::commands) vars: Arc<Variables>,
    /// Where `CMD &` runs; none: background jobs are refused.
    pub(in crate::commands) jobs: Option<Arc<crate::exec::jobs::Jobs>>,
}

/// Per top-level command state: the caller and the step budget.
pub(in crate::commands) struct Ctx<'a> {
    pub(in crate::commands) caller: &'a Caller,
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
        if let Err(denied) = self.check(caller, Intent::Run) {
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
        if let Err(denied) = self.check(caller, Intent::Run) {
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
        let result = match self.check(caller, Intent::Run) {
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
        let result = match self.check(caller, Intent::Run) {
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

    pub(in crate::commands) fn check(
        &self,
        caller: &Caller,
        action: Intent<'_>,
    ) -> Result<(), Denied> {
        permissions::check(caller, action, |tab, group| self.host.in_group(tab, group))
    }

    pub(in crate::commands) fn step(&self, ctx: &Ctx<'_>) -> Result<(), CmdError> {
        if ctx.steps.fetch_add(1, Ordering::Relaxed) >= MAX_STEPS {
            return Err(CmdError::TooManySteps);
        }
        Ok(())
    }

    /// One command, handed to its verb's module (`super::verbs`).
    pub(in crate::commands) fn eval<'a>(
        &'a self,
        ctx: &'a Ctx<'a>,
        cmd: &'a Command,
        frame: &'a Frame,
    ) -> BoxFut<'a> {
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
                Command::SendToAll { prompt, files } => {
                    self.send_to_all(ctx, prompt, files, frame).await
                }
                Command::Chain(steps) => self.chain(ctx, steps, frame).await,
                Command::Finally { body, cleanup } => self.finally(ctx, body, cleanup, frame).await,
                Command::If {
                    cond,
                    then,
                    otherwise,
                } => self.if_(ctx, cond, then, otherwise.as_deref(), frame).await,
                Command::For { var, items, body } => self.for_(ctx, var, items, body, frame).await,
                Command::Manager(m) => self.manager(ctx, m, frame).await,
                Command::Flow(action) => self.flow(ctx, *action).await,
                Command::Role { role, group } => self.role(ctx, *role, group.clone()).await,
                Command::RoleTest(card) => self.role_test(ctx, card.as_deref(), frame).await,
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
    pub(in crate::commands) fn expand(&self, ctx: &Ctx<'_>, t: &Template, frame: &Frame) -> Res {
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

    /// Resolve a target to tab names, checking dispatch permission for each.
    pub(in crate::commands) fn resolve(
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
            self.check(ctx.caller, Intent::Dispatch(n))?;
        }
        Ok(names)
    }
}

/// `$(…)` drops trailing newlines, as in a shell.
pub(in crate::commands) fn trim_capture(s: String) -> String {
    s.trim_end_matches(['\n', '\r']).to_string()
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod agent_tests;
