//! Asking tabs: `to TARGET: TEXT`, `parallel to=[…] TEXT`, `send_to_all TEXT`, each with
//! `with files=[…]` (docs/commands.md, docs/files.md). Permission: [`Intent::Dispatch`] for
//! every tab reached (a foreman's reply reaches only its group). Through the `Tabs` port.
//! Help: `to`, `parallel`, `send_to_all`.

use crate::commands::ast::{Job, Target, Template};
use crate::commands::interp::{CmdError, Ctx, Frame, Host, Interpreter, Res};
use crate::commands::parser;
use crate::commands::permissions::Intent;
use crate::protocol::Prompt;

/// The help topics this module answers for (checked against the help table in `verbs`).
#[cfg(test)]
pub(crate) const HELP: &[&str] = &["to", "parallel", "send_to_all"];

impl<H: Host> Interpreter<H> {
    pub(in crate::commands) async fn to(&self, ctx: &Ctx<'_>, job: &Job, frame: &Frame) -> Res {
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

    pub(in crate::commands) async fn parallel(
        &self,
        ctx: &Ctx<'_>,
        jobs: &[Job],
        frame: &Frame,
    ) -> Res {
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

    /// `send_to_all [with files=[…]] TEXT`: every worker the caller may reach gets the same
    /// prompt and the same files (read once from the files folder; docs/files.md).
    pub(in crate::commands) async fn send_to_all(
        &self,
        ctx: &Ctx<'_>,
        prompt: &Template,
        files: &[String],
        frame: &Frame,
    ) -> Res {
        let prompt = Prompt::from(self.expand(ctx, prompt, frame)?);
        let files = self.expand_files(ctx, files, frame)?;
        let work: Vec<_> = self
            .host
            .all_workers()
            .into_iter()
            .filter(|w| self.check(ctx.caller, Intent::Dispatch(w)).is_ok())
            .map(|w| (w, prompt.clone(), files.clone()))
            .collect();
        if work.is_empty() {
            return Err(CmdError::NoWorkers);
        }
        self.fan_out_files(ctx, work).await
    }

    /// Ask every (tab, prompt, files) concurrently; answers labelled `[tab] …`, in the given
    /// order.
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
}
