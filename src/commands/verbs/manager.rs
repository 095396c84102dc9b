//! `manager …` (create, run, plan, approve, status, tabs, …) and the seed's `flow …` aliases
//! (docs/flows.md): handed to the flow engine through the `Flows` port, `$var`s of run and
//! approve parameters expanded first. Permission: [`Intent::Flow`] (reading is open;
//! changing needs `flows`). Help: `manager`, `tabs`, `flow`.

use crate::commands::ast::{FlowAction, FlowRequest, ManagerCmd};
use crate::commands::interp::{CmdError, Ctx, Frame, Host, Interpreter, Res};
use crate::commands::parser::parse_template;
use crate::commands::permissions::Intent;

/// The help topics this module answers for (checked against the help table in `verbs`).
#[cfg(test)]
pub(crate) const HELP: &[&str] = &["manager", "tabs", "flow"];

impl<H: Host> Interpreter<H> {
    pub(in crate::commands) async fn manager(
        &self,
        ctx: &Ctx<'_>,
        m: &ManagerCmd,
        frame: &Frame,
    ) -> Res {
        self.check(
            ctx.caller,
            Intent::Flow {
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

    /// `flow start|pause|resume|stop|status`: the seed's aliases on the caller's flow.
    pub(in crate::commands) async fn flow(&self, ctx: &Ctx<'_>, action: FlowAction) -> Res {
        self.check(
            ctx.caller,
            Intent::Flow {
                mutates: action.mutates(),
            },
        )?;
        Ok(self
            .host
            .flows(ctx.caller, FlowRequest::Flow(action))
            .await?)
    }
}
