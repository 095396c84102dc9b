//! `PROGRAM ARGS…` (a shell command), `PROGRAM ARGS… &` (a background job) and `jobs` /
//! `jobs kill ID` (docs/commands.md). Permission: [`Intent::Shell`] for running and killing;
//! listing jobs is open. Then the exec policy (off / allowlist / on) in [`crate::exec`], the
//! only place that starts a program. Help: `shell`, `jobs`.

use crate::commands::ast::JobsCmd;
use crate::commands::interp::{CmdError, Ctx, Frame, Host, Interpreter, Res};
use crate::commands::parser;
use crate::commands::permissions::Intent;
use crate::exec::{self, ExecRequest};

/// The help topics this module answers for (checked against the help table in `verbs`).
#[cfg(test)]
pub(crate) const HELP: &[&str] = &["shell", "jobs"];

impl<H: Host> Interpreter<H> {
    /// `CMD &`: started under the exec policy, answered at once with the job's id.
    pub(in crate::commands) fn background(&self, ctx: &Ctx<'_>, text: &str, frame: &Frame) -> Res {
        self.check(ctx.caller, Intent::Shell)?;
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
    pub(in crate::commands) fn jobs(&self, ctx: &Ctx<'_>, cmd: &JobsCmd) -> Res {
        let jobs = self
            .jobs
            .as_ref()
            .ok_or_else(|| CmdError::Failed("这里没有后台任务 / no background jobs here".into()))?;
        match cmd {
            JobsCmd::List => Ok(jobs.render()),
            JobsCmd::Kill(id) => {
                self.check(ctx.caller, Intent::Shell)?;
                jobs.kill(id, "jobs kill").map_err(CmdError::Failed)
            }
        }
    }

    pub(in crate::commands) async fn shell(&self, ctx: &Ctx<'_>, text: &str, frame: &Frame) -> Res {
        self.check(ctx.caller, Intent::Shell)?;
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
}
