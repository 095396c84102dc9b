//! Background jobs: `CMD &` (docs/commands.md, "Background jobs"). The command runs under the
//! same exec policy as any other (its mode, allowlist, workspace, timeout and output cap); the
//! answer comes at once with the job's id, and the job is never killed by that answer.
//! `?<jobs>!` lists jobs with their state and output, `?<jobs kill ID>!` ends one. At most
//! [`MAX_RUNNING`] run at once; every job ends when the hub shuts down.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use super::{run, ExecPolicy, ExecRequest};

/// Jobs running at once, at most.
pub const MAX_RUNNING: usize = 8;
/// Finished jobs remembered for `?<jobs>!` (the oldest are forgotten first).
const FINISHED_KEPT: usize = 32;

/// Where a job is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    /// Still running.
    Running,
    /// Exited with this code (`None`: killed by a signal).
    Exited(Option<i32>),
    /// The exec timeout ended it.
    TimedOut,
    /// `jobs kill`, a person's Stop, or the hub shutting down ended it.
    Killed(String),
    /// It could not start.
    Failed(String),
}

impl std::fmt::Display for JobState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JobState::Running => f.write_str("运行中 / running"),
            JobState::Exited(Some(0)) => f.write_str("✓ 完成 / done (exit 0)"),
            JobState::Exited(Some(c)) => write!(f, "✗ 退出码 / exit {c}"),
            JobState::Exited(None) => f.write_str("✗ 被信号终止 / killed by a signal"),
            JobState::TimedOut => f.write_str("✗ 超时 / timed out"),
            JobState::Killed(why) => write!(f, "✗ 已终止 / killed: {why}"),
            JobState::Failed(e) => write!(f, "✗ 未能启动 / failed: {e}"),
        }
    }
}

/// One job as `?<jobs>!` shows it.
#[derive(Debug, Clone)]
pub struct JobView {
    /// Its id (`j1`, `j2`, …).
    pub id: String,
    /// The command, without its `&`.
    pub command: String,
    /// Who started it (a tab's client id).
    pub owner: String,
    /// Its state.
    pub state: JobState,
    /// Its output so far (stdout, then stderr), capped by the exec policy.
    pub output: String,
}

#[derive(Debug)]
struct RunningJob {
    view: JobView,
    cancel: CancellationToken,
}

/// The hub's background jobs.
#[derive(Debug)]
pub struct Jobs {
    jobs: Mutex<BTreeMap<u64, RunningJob>>,
    next: std::sync::atomic::AtomicU64,
    shutdown: CancellationToken,
}

impl Default for Jobs {
    fn default() -> Self {
        Self::new()
    }
}

impl Jobs {
    /// No jobs yet.
    pub fn new() -> Jobs {
        Jobs {
            jobs: Mutex::new(BTreeMap::new()),
            next: std::sync::atomic::AtomicU64::new(1),
            shutdown: CancellationToken::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, RunningJob>> {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts `command` in the background under `policy` for `owner`; its id, or why not.
    pub fn start(
        self: &Arc<Self>,
        policy: &ExecPolicy,
        command: &str,
        vars: BTreeMap<String, String>,
        owner: &str,
    ) -> Result<String, String> {
        super::check(policy, command).map_err(|e| e.to_string())?;
        let running = self
            .lock()
            .values()
            .filter(|j| j.view.state == JobState::Running)
            .count();
        if running >= MAX_RUNNING {
            return Err(format!(
                "后台任务已满 / {MAX_RUNNING} background jobs already run: wait for one, or end one with ?‹jobs kill ID›!"
            ));
        }
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = format!("j{n}");
        let cancel = CancellationToken::new();
        self.lock().insert(
            n,
            RunningJob {
                view: JobView {
                    id: id.clone(),
                    command: command.to_string(),
                    owner: owner.to_string(),
                    state: JobState::Running,
                    output: String::new(),
                },
                cancel: cancel.clone(),
            },
        );
        let jobs = self.clone();
        let policy = policy.clone();
        let command = command.to_string();
        let who = owner.to_string();
        crate::spawn::task(async move {
            let req = ExecRequest {
                command: &command,
                vars: &vars,
                caller: &who,
            };
            // Dropping the run (kill, Stop, shutdown) kills its whole process group.
            let (state, output) = tokio::select! {
                out = run(&policy, req, None) => match out {
                    Ok(o) if o.timed_out => (JobState::TimedOut, o.render(policy.timeout)),
                    Ok(o) => (JobState::Exited(o.exit_code), o.render(policy.timeout)),
                    Err(e) => (JobState::Failed(e.to_string()), String::new()),
                },
                () = cancel.cancelled() => (JobState::Killed("jobs kill".into()), String::new()),
                () = jobs.shutdown.cancelled() => {
                    (JobState::Killed("集线器停止 / the hub stopped".into()), String::new())
                }
            };
            jobs.finish(n, state, output);
        });
        tracing::info!(target: "aicard::audit", job = %id, caller = %owner, "background job started");
        Ok(id)
    }

    fn finish(&self, n: u64, state: JobState, output: String) {
        let mut jobs = self.lock();
        if let Some(j) = jobs.get_mut(&n) {
            if let JobState::Killed(_) = &j.view.state {
                // `kill` already said why.
            } else {
                j.view.state = state;
            }
            j.view.output = output;
        }
        let finished: Vec<u64> = jobs
            .iter()
            .filter(|(_, j)| j.view.state != JobState::Running)
            .map(|(k, _)| *k)
            .collect();
        if finished.len() > FINISHED_KEPT {
            for k in &finished[..finished.len() - FINISHED_KEPT] {
                jobs.remove(k);
            }
        }
    }

    /// Every job remembered, oldest first.
    pub fn list(&self) -> Vec<JobView> {
        self.lock().values().map(|j| j.view.clone()).collect()
    }

    /// Ends job `id` (`j3` or `3`) with `why`.
    pub fn kill(&self, id: &str, why: &str) -> Result<String, String> {
        let n: u64 = id
            .trim_start_matches('j')
            .parse()
            .map_err(|_| format!("没有后台任务 {id} / no job `{id}`: ?‹jobs›! lists them"))?;
        let mut jobs = self.lock();
        let job = jobs
            .get_mut(&n)
            .ok_or_else(|| format!("没有后台任务 {id} / no job `{id}`: ?‹jobs›! lists them"))?;
        if job.view.state != JobState::Running {
            return Err(format!(
                "后台任务 j{n} 已结束 / job j{n} already ended: {}",
                job.view.state
            ));
        }
        job.view.state = JobState::Killed(why.to_string());
        job.cancel.cancel();
        Ok(format!("已终止 / killed j{n}"))
    }

    /// The running jobs `owner` started, as `ID `COMMAND`` (a person's Stop lists them; a
    /// background job goes on until it ends, times out or is killed).
    pub fn running_of(&self, owner: &str) -> Vec<String> {
        self.lock()
            .values()
            .filter(|j| j.view.owner == owner && j.view.state == JobState::Running)
            .map(|j| format!("{} `{}`", j.view.id, j.view.command))
            .collect()
    }

    /// The hub stops: every job ends.
    pub fn shutdown(&self) {
        self.shutdown.cancel();
    }

    /// `?<jobs>!`: each job with its state and output.
    pub fn render(&self) -> String {
        let list = self.list();
        if list.is_empty() {
            return "后台任务 / jobs: (none) — 在命令后加 & 在后台运行 / end a command with & to run it in the background".into();
        }
        let mut out = String::from("后台任务 / jobs:\n");
        for j in list {
            out.push_str(&format!("  {} `{}` — {}\n", j.id, j.command, j.state));
            let text = j.output.trim();
            if !text.is_empty() {
                for line in text.lines().take(20) {
                    out.push_str(&format!("    {line}\n"));
                }
            }
        }
        out
    }
}
