//! `agent …` and `done [TEXT]` (docs/agents.md): the agent loop, through the `Services`
//! port. Permission: [`Intent::Agent`] (listing is open; changing needs `flows`), and an
//! agent's tools are never wider than its creator's ([`agent::tools_within`]). Help: `agent`,
//! `done`.

use crate::commands::agent::{self, AgentCmd};
use crate::commands::interp::{Ctx, Frame, Host, Interpreter, Res};
use crate::commands::permissions::Intent;

/// The help topics this module answers for (checked against the help table in `verbs`).
#[cfg(test)]
pub(crate) const HELP: &[&str] = &["agent", "done"];

impl<H: Host> Interpreter<H> {
    /// `agent …` / `done`: the one permission check, the tools rule, then the host.
    pub(in crate::commands) async fn agent(
        &self,
        ctx: &Ctx<'_>,
        a: &AgentCmd,
        frame: &Frame,
    ) -> Res {
        self.check(
            ctx.caller,
            Intent::Agent {
                mutates: a.mutates(),
            },
        )?;
        if let AgentCmd::Create(spec) = a {
            agent::tools_within(ctx.caller, &spec.tools_or_default())?;
        }
        let mut request = a.try_map(|t| self.expand(ctx, t, frame))?;
        if let AgentCmd::Task { files, .. } = &mut request {
            // `$var` in a file name is expanded first (a flow can name `$report`).
            for f in files.iter_mut().filter(|f| f.contains('$')) {
                *f = self.expand(ctx, &crate::commands::parser::parse_template(f), frame)?;
            }
        }
        Ok(self.host.agent(ctx.caller, request).await?)
    }
}
