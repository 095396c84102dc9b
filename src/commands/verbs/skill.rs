//! `skill list | help [NAME] | NAME key=value…` (docs/memory-and-skills.md): a skill's work
//! goes through the same paths as the command it stands for (a program under the exec policy
//! and [`Intent::Shell`], `manager run`, `to`), so it can do nothing its caller could not.
//! Through the `Services` port. Help: `skill`.

use super::failed;
use crate::commands::ast::{Command, Job, ManagerCmd, Role, SkillCmd, Target, Template};
use crate::commands::interp::{CmdError, Ctx, Frame, Host, Interpreter, Res};
use crate::commands::parser::parse_template;
use crate::commands::permissions::Intent;
use crate::skills::{self, SkillPlan};

/// The help topics this module answers for (checked against the help table in `verbs`).
#[cfg(test)]
pub(crate) const HELP: &[&str] = &["skill"];

/// `role:worker`, `group:g1` or a name.
fn target_of(s: &str) -> Target {
    if let Some(r) = s.strip_prefix("role:").and_then(Role::parse) {
        return Target::Role(r);
    }
    match s.strip_prefix("group:") {
        Some(g) => Target::Group(g.to_string()),
        None => Target::Name(s.to_string()),
    }
}

impl<H: Host> Interpreter<H> {
    pub(in crate::commands) async fn skill(
        &self,
        ctx: &Ctx<'_>,
        s: &SkillCmd,
        frame: &Frame,
    ) -> Res {
        let set = self
            .host
            .skills()
            .ok_or_else(|| failed("技能不可用 / skills are not available on this hub"))?;
        match s {
            SkillCmd::List => Ok(set.list()),
            SkillCmd::Help(name) => set.help(name.as_deref()).map_err(CmdError::Failed),
            SkillCmd::Run { name, args } => {
                let skill = set.find(name).map_err(CmdError::Failed)?;
                let args = args
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), self.expand(ctx, &parse_template(v), frame)?)))
                    .collect::<Result<Vec<_>, CmdError>>()?;
                let action = skills::prepare(&skill, &args).map_err(|errors| {
                    failed(format!(
                        "技能参数错误 / invalid arguments for skill {name}:\n  - {}\n用法 / usage: ?<skill help {name}>!",
                        errors.join("\n  - ")
                    ))
                })?;
                if let SkillPlan::Program { name, spec, input } = &action {
                    // A program skill (docs/memory-and-skills.md): the exec policy, then the
                    // person's pin, then its run.
                    self.check(ctx.caller, Intent::Shell)?;
                    let mut out = set
                        .run_program(&self.exec, name, spec, input, &ctx.caller.client_id)
                        .await
                        .map_err(failed)?;
                    // Its file goes with the caller's next agent results message, if one runs.
                    if let Some(f) = out.file.as_ref().filter(|_| out.success) {
                        if self.host.result_file(ctx.caller, f) {
                            out.text.push_str(&format!(
                                "\n已附在本条结果消息中 / {} is attached to this results message",
                                f.name
                            ));
                        }
                    }
                    return if out.success {
                        Ok(out.text)
                    } else {
                        Err(CmdError::Failed(out.text))
                    };
                }
                self.perform(ctx, action, frame).await
            }
        }
    }

    async fn perform(&self, ctx: &Ctx<'_>, action: SkillPlan, frame: &Frame) -> Res {
        match action {
            SkillPlan::Program { .. } => Err(failed("程序技能 / a program skill runs above")),
            SkillPlan::Run(argv) => {
                self.check(ctx.caller, Intent::Shell)?;
                let out = crate::exec::run_argv(
                    &self.exec,
                    &argv,
                    &ctx.caller.client_id,
                    self.host.exec_output(ctx.caller),
                )
                .await?;
                let rendered = out.render(self.exec.timeout);
                if out.success() {
                    Ok(rendered)
                } else {
                    Err(CmdError::Failed(rendered))
                }
            }
            SkillPlan::Flow { name, inputs } => {
                // Values are data: `$` is escaped so `manager run` does not expand it again.
                let params = inputs
                    .into_iter()
                    .map(|(k, v)| (k, v.replace('$', "\\$")))
                    .collect();
                let cmd = Command::Manager(ManagerCmd::Run {
                    name,
                    from_node: None,
                    params,
                });
                self.eval(ctx, &cmd, frame).await
            }
            SkillPlan::Prompt { to, text } => {
                let cmd = Command::To(Job {
                    target: target_of(&to),
                    prompt: Template::literal(text),
                    files: Vec::new(),
                });
                self.eval(ctx, &cmd, frame).await
            }
        }
    }
}
