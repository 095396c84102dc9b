//! The only module that spawns processes: the shell/exec policy (off, allowlist, on), and the
//! long-lived stdio servers of the MCP client ([`spawn_service`]).
//!
//! docs/security.md: shell execution is off by default. `Allowlist` splits the command line with a
//! real shell-words splitter (`shlex`) and runs argv directly — no shell ever sees the text —
//! allowing only plain commands and pipelines whose every program is on the list. `On` runs
//! the system shell (`sh -c`; `cmd /V:ON /D /S /C` on Windows, docs/windows.md), but AIcard
//! variables reach the shell only through the environment (`"${AICARD_VAR_name}"`,
//! `!AICARD_VAR_name!`), never spliced into the script. In every mode: programs are found on
//! the PATH the way the OS finds them, never in the workspace; the working directory is the
//! workspace, the environment is reduced to a few harmless variables (the hub token never
//! leaks), stdin is empty, the command and everything it starts are one group (a process group
//! on Unix, a Job Object on Windows) killed whole at the timeout, stdout and stderr are
//! captured apart and capped, and one audit line is logged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use group::Group;
pub use os::open_url;
use plan::{plan, ExecPlan};

/// A variable reference starting with the `$` at `at` in `b` (`$name`, or `${name}` whose
/// name may hold `.` and `-`): the name's byte range and the index after the reference. The
/// command parser reads references with it too, so both read them alike.
pub(crate) fn var_ref_at(b: &[u8], at: usize) -> Option<((usize, usize), usize)> {
    let start = at + 1;
    if b.get(start) == Some(&b'{') {
        let close = start + 1 + memchr::memchr(b'}', &b[start + 1..])?;
        let name = (start + 1, close);
        let ok = name.1 > name.0
            && (b[name.0].is_ascii_alphabetic() || b[name.0] == b'_')
            && b[name.0..name.1]
                .iter()
                .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'));
        return ok.then_some((name, close + 1));
    }
    let first = *b.get(start)?;
    if !(first.is_ascii_alphabetic() || first == b'_') {
        return None;
    }
    let end = b[start..]
        .iter()
        .position(|c| !(c.is_ascii_alphanumeric() || *c == b'_'))
        .map_or(b.len(), |n| start + n);
    Some(((start, end), end))
}

/// Default time a command may run before its process group is killed.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default cap on each of stdout and stderr.
pub const DEFAULT_OUTPUT_CAP: usize = 64 * 1024;

/// The first word of a shell line when it names no program the shell could run: a plain
/// word (no `/`, `=`, `$`, quotes or shell syntax), not a shell builtin (`cmd`'s internal
/// commands on Windows), and no program of that name on the PATH commands run with (with
/// PATHEXT on Windows). `None` when the shell should decide.
pub fn unknown_program(line: &str) -> Option<&str> {
    let word = line.split_whitespace().next()?;
    let plain = word
        .chars()
        .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '+'));
    if !plain || os::is_shell_word(word) {
        return None;
    }
    let found = os::find_program(word, &os::command_path(), &[]).is_some();
    (!found).then_some(word)
}
/// Whether `command` could run under `policy`, checked without running it or knowing its
/// variables' values: exec off refuses every line; under an allowlist each pipeline stage's
/// program must be allowed and no construct the allowlist refuses may appear. A flow is
/// checked so when it is created (docs/flows.md, "Inline flows").
pub fn check(policy: &ExecPolicy, command: &str) -> Result<(), ExecError> {
    if command.trim().is_empty() {
        return Err(ExecError::Empty);
    }
    let allowed = match &policy.mode {
        ExecMode::Off => return Err(ExecError::Disabled),
        ExecMode::On => return Ok(()),
        ExecMode::Allowlist(allowed) => allowed,
    };
    let (segs, forbidden) = plan::lex(command);
    if let Some((what, pos)) = forbidden {
        return Err(ExecError::Forbidden { what, pos });
    }
    let mut stage = String::new();
    for seg in segs.iter().chain(std::iter::once(&plan::Seg::Pipe)) {
        match seg {
            plan::Seg::Raw(r) => stage.push_str(r),
            // A variable's value is an argument, quoted when it runs; here a stand-in word.
            plan::Seg::Var { .. } => stage.push_str(" x "),
            plan::Seg::Pipe => {
                let program = shlex::split(&stage)
                    .and_then(|argv| argv.into_iter().next())
                    .unwrap_or_default();
                if !allowed.contains(&program) {
                    return Err(ExecError::NotAllowed {
                        program,
                        allowed: allowed.join(", "),
                    });
                }
                stage.clear();
            }
        }
    }
    Ok(())
}

/// Prefix of the environment variables that carry AIcard variables in `On` mode.
pub const VAR_ENV_PREFIX: &str = "AICARD_VAR_";
/// How long readers may drain pipes after the process group was killed.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// Which shell commands may run (`--exec off|allowlist|on`, `--allow PROGRAM`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ExecMode {
    /// Refuse every shell command (the default).
    #[default]
    Off,
    /// Run argv directly, only these programs (matched against `argv[0]` exactly).
    Allowlist(Vec<String>),
    /// Run through `sh -c` (`cmd /V:ON /D /S /C` on Windows); variables passed through the
    /// environment.
    On,
}

/// The exec policy the hub was started with.
///
/// Exists so the decision "may this run, and how" lives in one value that tests can build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecPolicy {
    /// Off, allowlist or on.
    pub mode: ExecMode,
    /// Working directory of every command (created when missing), under the data dir.
    pub workspace: PathBuf,
    /// Kill the process group after this long.
    pub timeout: Duration,
    /// Keep at most this many bytes of stdout, and of stderr.
    pub output_cap: usize,
    /// Folders never searched for a program even when on the PATH, besides the workspace
    /// (which always is): the files folder, whose contents tabs choose.
    pub no_search: Vec<PathBuf>,
}

impl ExecPolicy {
    /// A policy with the default timeout (30 s) and output cap (64 KiB).
    pub fn new(mode: ExecMode, workspace: impl Into<PathBuf>) -> Self {
        Self {
            mode,
            workspace: workspace.into(),
            timeout: DEFAULT_TIMEOUT,
            output_cap: DEFAULT_OUTPUT_CAP,
            no_search: Vec::new(),
        }
    }

    /// The folders a program is never looked up in: the workspace and [`Self::no_search`].
    fn never_search(&self) -> Vec<PathBuf> {
        let mut never = self.no_search.clone();
        never.push(self.workspace.clone());
        never
    }
}

/// One command to run.
#[derive(Debug, Clone, Copy)]
pub struct ExecRequest<'a> {
    /// The command line as written, `$var` references unexpanded.
    pub command: &'a str,
    /// AIcard variables visible to the caller (values are data, never parsed as shell).
    pub vars: &'a BTreeMap<String, String>,
    /// Who asked (client id / label), for the audit line.
    pub caller: &'a str,
}

/// Which stream a chunk of live output came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputStream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// A piece of output streamed while the command runs (best effort; the final
/// [`ExecOutput`] is authoritative).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecChunk {
    /// Which stream.
    pub stream: OutputStream,
    /// The text (whole UTF-8 characters).
    pub text: String,
}

/// What a finished (or killed) command produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutput {
    /// Captured stdout (of the last pipeline stage), capped, with a note when truncated.
    pub stdout: String,
    /// Captured stderr (all stages), capped, with a note when truncated.
    pub stderr: String,
    /// Exit code of the last stage; `None` when killed by a signal or the timeout.
    pub exit_code: Option<i32>,
    /// The timeout fired and the process group was killed.
    pub timed_out: bool,
}

impl ExecOutput {
    /// Exit code 0 and no timeout.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out
    }

    /// The text for a `cmd_result`: stdout, then stderr and the exit status when notable.
    /// Line ends are `\n` (Windows programs' `\r\n` too), the trailing ones dropped.
    pub fn render(&self, timeout: Duration) -> String {
        let lf = |s: &str| {
            s.replace("\r\n", "\n")
                .trim_end_matches(['\n', '\r'])
                .to_string()
        };
        let mut out = lf(&self.stdout);
        let mut section = |s: &str| {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(s);
        };
        if !self.stderr.is_empty() {
            section(&format!("[stderr]\n{}", lf(&self.stderr)));
        }
        if self.timed_out {
            section(&format!(
                "[超时 / timed out after {:.1} s; process group killed]",
                timeout.as_secs_f64()
            ));
        } else if self.exit_code != Some(0) {
            match self.exit_code {
                Some(code) => section(&format!("[退出码 / exit code {code}]")),
                None => section("[被信号终止 / killed by a signal]"),
            }
        }
        out
    }
}

/// Why a command did not run.
#[derive(Debug, Error)]
pub enum ExecError {
    /// `--exec off`.
    #[error("shell 执行已关闭 / shell execution is off; start the hub with `--exec allowlist --allow PROGRAM` or `--exec on` to enable it")]
    Disabled,
    /// A program skill under `--exec off`.
    #[error("程序技能被拒绝 / program skill `{skill}` refused: exec is off; start the hub with `--exec allowlist --allow skill:{skill}` (or `--exec on`) to let it run")]
    SkillOff {
        /// The skill's name.
        skill: String,
    },
    /// A program skill not named by `--allow skill:NAME` under the allowlist.
    #[error("程序技能不在允许列表 / program skill `{skill}` is not allowed: add `--allow skill:{skill}` (allowed: {allowed})")]
    SkillNotAllowed {
        /// The skill's name.
        skill: String,
        /// The list, for the person to see.
        allowed: String,
    },
    /// The program is not on the allowlist.
    #[error("程序不在允许列表 / program not on the allowlist: `{program}` (allowed: {allowed})")]
    NotAllowed {
        /// `argv[0]` as given.
        program: String,
        /// The list, for the person to see.
        allowed: String,
    },
    /// Shell syntax that allowlist mode does not interpret.
    #[error("不允许的 shell 语法 / not allowed in allowlist mode: {what} at byte {pos}; only plain commands and pipelines `a | b` run")]
    Forbidden {
        /// What was found.
        what: &'static str,
        /// Byte offset in the command.
        pos: usize,
    },
    /// `cmd` (`--exec on` on Windows) would read a variable's value as commands, or drop
    /// part of the line.
    #[error("cmd 不能安全运行 / not run by cmd: {what} at byte {pos} (docs/windows.md)")]
    CmdRefused {
        /// What was found.
        what: &'static str,
        /// Byte offset in the command.
        pos: usize,
    },
    /// A batch file (`.bat`/`.cmd`, run by `cmd` on Windows) given an argument that cannot be
    /// quoted for `cmd` safely.
    #[error("批处理参数不安全 / `{program}` is a batch file, and cmd would read argument {index} (a line break) as commands; not run")]
    BatchArgs {
        /// The batch file.
        program: String,
        /// Which argument (1 is the first after the program).
        index: usize,
    },
    /// The command line could not be split into words (unbalanced quotes, trailing `\`).
    #[error("命令行无法拆分 / could not split the command line: {0}")]
    Syntax(String),
    /// A `$var` that is not defined.
    #[error("变量未定义 / undefined variable: ${0}")]
    UndefinedVar(String),
    /// Nothing to run.
    #[error("空命令 / empty command")]
    Empty,
    /// A value holds a NUL byte, which no argv or environment can carry.
    #[error("值含有 NUL 字节 / a value contains a NUL byte")]
    Nul,
    /// The workspace directory could not be created.
    #[error("无法创建工作目录 / cannot create the workspace {path}: {source}")]
    Workspace {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The program could not be started.
    #[error("无法启动 / cannot start `{program}`: {source}")]
    Spawn {
        /// `argv[0]`.
        program: String,
        /// Why.
        source: std::io::Error,
    },
}

/// Run one command under `policy`, streaming output to `live` if given.
pub async fn run(
    policy: &ExecPolicy,
    req: ExecRequest<'_>,
    live: Option<mpsc::Sender<ExecChunk>>,
) -> Result<ExecOutput, ExecError> {
    run_planned(policy, req, plan(policy, req), live, None).await
}

/// Run one program with exactly this argv (a skill's `run`): never through a shell, in any
/// mode. `Off` refuses it; `Allowlist` needs `argv[0]` on the list; `On` runs it as is.
/// Every other guard (workspace, environment, timeout, caps, audit) is the same as [`run`].
pub async fn run_argv(
    policy: &ExecPolicy,
    argv: &[String],
    caller: &str,
    live: Option<mpsc::Sender<ExecChunk>>,
) -> Result<ExecOutput, ExecError> {
    let shown = argv.join(" ");
    let no_vars = BTreeMap::new();
    let req = ExecRequest {
        command: &shown,
        vars: &no_vars,
        caller,
    };
    let decided = match (&policy.mode, argv.first()) {
        (_, None) => Err(ExecError::Empty),
        (_, Some(_)) if argv.iter().any(|a| a.contains('\0')) => Err(ExecError::Nul),
        (ExecMode::Off, _) => Err(ExecError::Disabled),
        (ExecMode::Allowlist(allowed), Some(p)) if !allowed.iter().any(|a| a == p) => {
            Err(ExecError::NotAllowed {
                program: p.clone(),
                allowed: allowed.join(", "),
            })
        }
        _ => Ok(ExecPlan {
            stages: vec![argv.to_vec()],
            env: Vec::new(),
            verbatim: false,
        }),
    };
    run_planned(policy, req, decided, live, None).await
}

/// Runs a decided plan: a refusal is audited and returned; otherwise the workspace is made,
/// the plan executed and its outcome audited. The one tail of [`run`], [`run_argv`] and
/// `run_skill`.
async fn run_planned(
    policy: &ExecPolicy,
    req: ExecRequest<'_>,
    decided: Result<ExecPlan, ExecError>,
    live: Option<mpsc::Sender<ExecChunk>>,
    input: Option<Vec<u8>>,
) -> Result<ExecOutput, ExecError> {
    let plan = match decided {
        Ok(plan) => plan,
        Err(e) => {
            audit(req, &policy.mode, &[], &format!("refused: {e}"), None);
            return Err(e);
        }
    };
    if let Err(source) = tokio::fs::create_dir_all(&policy.workspace).await {
        let e = ExecError::Workspace {
            path: policy.workspace.clone(),
            source,
        };
        audit(
            req,
            &policy.mode,
            &plan.argvs(),
            &format!("refused: {e}"),
            None,
        );
        return Err(e);
    }
    let result = execute(policy, &plan, live, input).await;
    match &result {
        Ok(out) => audit(req, &policy.mode, &plan.argvs(), "allowed", Some(out)),
        Err(e) => audit(
            req,
            &policy.mode,
            &plan.argvs(),
            &format!("failed: {e}"),
            None,
        ),
    }
    result
}

/// One audit line per execution attempt.
fn audit(
    req: ExecRequest<'_>,
    mode: &ExecMode,
    argv: &[Vec<String>],
    decision: &str,
    out: Option<&ExecOutput>,
) {
    let mode = match mode {
        ExecMode::Off => "off",
        ExecMode::Allowlist(_) => "allowlist",
        ExecMode::On => "on",
    };
    tracing::info!(
        target: "aicard::audit",
        caller = req.caller,
        mode,
        command = req.command,
        argv = ?argv,
        decision,
        exit_code = ?out.and_then(|o| o.exit_code),
        timed_out = out.is_some_and(|o| o.timed_out),
        "exec"
    );
}

/// A command with the sandboxing every mode and [`spawn_service`] share: the program found
/// on the PATH the way the OS finds it (never in the workspace or `never`), the workspace as
/// working directory, the reduced environment plus `env`, no window of its own.
fn prepare(
    argv: &[String],
    verbatim: bool,
    workspace: &Path,
    env: &[(&str, &str)],
    never: &[PathBuf],
) -> Result<Command, ExecError> {
    // A server's own `PATH` (mcp.json) is where its program is looked for, as std does.
    let path = env
        .iter()
        .find(|(k, _)| *k == "PATH")
        .map_or_else(os::command_path, |(_, v)| v.into());
    let not_found = || ExecError::Spawn {
        program: argv[0].clone(),
        source: std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "程序不在 PATH 上 / program not found on the PATH",
        ),
    };
    let program = os::find_program(&argv[0], &path, never).ok_or_else(not_found)?;
    if cfg!(windows) && win::is_batch(&program.to_string_lossy()) {
        if let Some(k) = win::unsafe_batch_arg(&argv[1..]) {
            return Err(ExecError::BatchArgs {
                program: argv[0].clone(),
                index: k + 1,
            });
        }
    }
    let mut cmd = Command::new(&program);
    #[cfg(unix)]
    {
        // The program sees the name it was called by, as from a shell.
        cmd.arg0(&argv[0]);
        let _ = verbatim;
        cmd.args(&argv[1..]);
    }
    #[cfg(windows)]
    {
        if verbatim {
            for raw in &argv[1..] {
                cmd.raw_arg(raw);
            }
        } else {
            cmd.args(&argv[1..]);
        }
    }
    cmd.current_dir(workspace)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for key in os::KEPT_ENV {
        if let Some(v) = std::env::var_os(key) {
            cmd.env(key, v);
        }
    }
    cmd.env("PATH", path);
    cmd.envs(os::EXTRA_ENV.iter().copied());
    cmd.envs(env.iter().copied());
    Ok(cmd)
}

/// Spawned pipeline: its group of processes, and the reader tasks.
struct Running {
    group: Group,
    stdout: Option<JoinHandle<Captured>>,
    stderr: Vec<JoinHandle<Captured>>,
}

/// Spawn every stage into one group and start the readers. An error kills what started.
fn spawn(
    policy: &ExecPolicy,
    plan: &ExecPlan,
    live: Option<mpsc::Sender<ExecChunk>>,
    mut input: Option<Vec<u8>>,
) -> Result<Running, ExecError> {
    let mut running = Running {
        group: Group::default(),
        stdout: None,
        stderr: Vec::new(),
    };
    let never = policy.never_search();
    let env: Vec<(&str, &str)> = plan
        .env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let mut prev_stdout: Option<Stdio> = None;
    let last = plan.stages.len() - 1;
    for (k, argv) in plan.stages.iter().enumerate() {
        let mut cmd = prepare(argv, plan.verbatim, &policy.workspace, &env, &never)?;
        if let Some(stdin) = prev_stdout.take() {
            cmd.stdin(stdin);
        } else if input.is_some() {
            cmd.stdin(Stdio::piped());
        }
        let child = running
            .group
            .spawn(cmd)
            .map_err(|source| ExecError::Spawn {
                program: argv[0].clone(),
                source,
            })?;
        if let (Some(bytes), Some(mut stdin)) = (input.take(), child.stdin().take()) {
            // A program that never reads its input must not block the hub: written apart,
            // and the writer ends when the group is killed (broken pipe).
            crate::spawn::task(async move {
                use tokio::io::AsyncWriteExt;
                let _ = stdin.write_all(&bytes).await;
                let _ = stdin.shutdown().await;
            });
        }
        if let Some(err) = child.stderr().take() {
            running.stderr.push(crate::spawn::task(capture(
                err,
                policy.output_cap,
                OutputStream::Stderr,
                live.clone(),
            )));
        }
        if let Some(out) = child.stdout().take() {
            if k == last {
                running.stdout = Some(crate::spawn::task(capture(
                    out,
                    policy.output_cap,
                    OutputStream::Stdout,
                    live.clone(),
                )));
            } else {
                prev_stdout = Some(out.try_into().map_err(|source| ExecError::Spawn {
                    program: argv[0].clone(),
                    source,
                })?);
            }
        }
    }
    Ok(running)
}

/// Spawn, wait with the timeout, kill the group, collect the output.
/// `input`, when given, is written to the first stage's stdin (then closed).
async fn execute(
    policy: &ExecPolicy,
    plan: &ExecPlan,
    live: Option<mpsc::Sender<ExecChunk>>,
    input: Option<Vec<u8>>,
) -> Result<ExecOutput, ExecError> {
    let started = Instant::now();
    let mut running = spawn(policy, plan, live, input)?;
    let waited = tokio::time::timeout(policy.timeout, running.group.wait_members()).await;
    // Always kill the group: after a timeout it stops the command; after a normal exit it
    // removes background processes that would otherwise keep our pipes open.
    running.group.kill();
    let (timed_out, status) = match waited {
        Ok(status) => (false, status),
        Err(_) => {
            let _ = running.group.wait_members().await;
            (true, None)
        }
    };
    let stdout = finish_reader(running.stdout.take()).await;
    let mut stderr = Captured::default();
    for handle in running.stderr.drain(..) {
        stderr.append(finish_reader(Some(handle)).await, policy.output_cap);
    }
    tracing::debug!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        "exec finished"
    );
    Ok(ExecOutput {
        stdout: stdout.into_text(),
        stderr: stderr.into_text(),
        exit_code: if timed_out {
            None
        } else {
            status.and_then(|s| s.code())
        },
        timed_out,
    })
}

/// Join a reader, giving it a short grace period to drain after the kill.
async fn finish_reader(handle: Option<JoinHandle<Captured>>) -> Captured {
    let Some(mut handle) = handle else {
        return Captured::default();
    };
    match tokio::time::timeout(DRAIN_GRACE, &mut handle).await {
        Ok(Ok(c)) => c,
        Ok(Err(_)) => Captured::default(),
        Err(_) => {
            handle.abort();
            Captured::default()
        }
    }
}

/// A capped capture of one stream: the kept bytes and how many arrived in total.
#[derive(Debug, Default)]
struct Captured {
    kept: Vec<u8>,
    total: usize,
}

impl Captured {
    fn append(&mut self, other: Captured, cap: usize) {
        let room = cap.saturating_sub(self.kept.len());
        self.kept
            .extend_from_slice(&other.kept[..other.kept.len().min(room)]);
        self.total += other.total;
    }

    /// The text, cut at a character boundary, with a note when bytes were dropped.
    fn into_text(self) -> String {
        let valid = utf8_prefix(&self.kept);
        let mut text = String::from_utf8_lossy(&self.kept[..valid]).into_owned();
        let omitted = self.total - valid;
        if omitted > 0 {
            text.push_str(&format!(
                "\n…[输出已截断 / output truncated: {omitted} more bytes]"
            ));
        }
        text
    }
}

/// Length of the longest prefix that does not end inside a multi-byte character.
fn utf8_prefix(data: &[u8]) -> usize {
    match std::str::from_utf8(data) {
        Ok(_) => data.len(),
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        Err(_) => data.len(),
    }
}

/// Read a stream to EOF, keeping at most `cap` bytes and streaming what is kept.
async fn capture(
    mut reader: impl AsyncRead + Unpin,
    cap: usize,
    stream: OutputStream,
    live: Option<mpsc::Sender<ExecChunk>>,
) -> Captured {
    let mut out = Captured::default();
    let mut buf = vec![0u8; 8192];
    let mut sent = 0;
    loop {
        let n = match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        out.total += n;
        let room = cap.saturating_sub(out.kept.len());
        out.kept.extend_from_slice(&buf[..n.min(room)]);
        if let Some(tx) = &live {
            let upto = sent + utf8_prefix(&out.kept[sent..]);
            if upto > sent {
                let text = String::from_utf8_lossy(&out.kept[sent..upto]).into_owned();
                // Best effort: a slow consumer loses live chunks, never the final output.
                let _ = tx.try_send(ExecChunk { stream, text });
                sent = upto;
            }
        }
    }
    out
}

/// A long-lived child that speaks on its stdin and stdout (a stdio MCP server, configured by
/// the person in `mcp.json`): started in its own group (a process group on Unix, a Job Object
/// on Windows), in the workspace, with the reduced environment plus the server's own `env`;
/// stderr goes to the debug log. Dropping it (or [`Service::kill`]) kills the whole group.
#[derive(Debug)]
pub struct Service {
    group: Group,
    pgid: Option<i32>,
    /// The child's stdin (take it for the transport).
    pub stdin: Option<tokio::process::ChildStdin>,
    /// The child's stdout (take it for the transport).
    pub stdout: Option<tokio::process::ChildStdout>,
}

impl Service {
    /// The process group id (the child's pid; on Windows the pid of its job's first
    /// process), until it is killed.
    pub fn pgid(&self) -> Option<i32> {
        self.pgid
    }

    /// Kill the whole group (SIGKILL to the process group; the Job Object terminated).
    pub fn kill(&mut self) {
        self.pgid = None;
        self.group.kill();
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Starts a [`Service`]; one audit line either way. `caller` is who asked, `name` what the
/// configuration calls it.
pub fn spawn_service(
    name: &str,
    argv: &[String],
    env: &BTreeMap<String, String>,
    workspace: &std::path::Path,
    caller: &str,
) -> Result<Service, ExecError> {
    let audit_line = |decision: &str, pgid: Option<i32>| {
        tracing::info!(target: "aicard::audit", caller, service = name, argv = ?argv, pgid, decision, "spawn");
    };
    if argv.is_empty() || argv[0].is_empty() {
        audit_line("refused: empty command", None);
        return Err(ExecError::Empty);
    }
    if argv.iter().chain(env.values()).any(|a| a.contains('\0')) {
        audit_line("refused: NUL byte", None);
        return Err(ExecError::Nul);
    }
    if let Err(source) = std::fs::create_dir_all(workspace) {
        audit_line("refused: no workspace", None);
        return Err(ExecError::Workspace {
            path: workspace.to_path_buf(),
            source,
        });
    }
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let never = [workspace.to_path_buf()];
    let started = prepare(argv, false, workspace, &env, &never).and_then(|mut cmd| {
        cmd.stdin(Stdio::piped());
        let mut group = Group::default();
        group.spawn(cmd).map_err(|source| ExecError::Spawn {
            program: argv[0].clone(),
            source,
        })?;
        Ok(group)
    });
    let mut group = match started {
        Ok(group) => group,
        Err(e) => {
            audit_line(&format!("failed: {e}"), None);
            return Err(e);
        }
    };
    let pgid = group.leader().and_then(|id| i32::try_from(id).ok());
    audit_line("started", pgid);
    let child = group.first_mut().expect("one member was spawned");
    let (stdin, stdout) = (child.stdin().take(), child.stdout().take());
    if let Some(err) = child.stderr().take() {
        let name = name.to_string();
        crate::spawn::task(async move {
            use tokio::io::AsyncBufReadExt;
            let mut lines = tokio::io::BufReader::new(err).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::debug!(service = %name, "stderr: {line}");
            }
        });
    }
    Ok(Service {
        stdin,
        stdout,
        group,
        pgid,
    })
}

mod group;
pub mod jobs;
mod os;
mod plan;
mod skill;
mod win;

pub use skill::{check_skill, run_skill};

// These run real programs through `sh`; the Windows rules are tested in `win` on every OS.
#[cfg(all(test, unix))]
mod tests;
