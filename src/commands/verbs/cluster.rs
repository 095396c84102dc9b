//! `on NODE: CMD` (docs/cluster.md): a shell command or a skill run on another node of the
//! cluster, under that node's exec policy, with the caller's variables sent along; here when
//! NODE names this hub. Permission: [`Intent::Shell`] for a shell command (the node checks
//! again). Through the `Cluster` port. Help: `on`.

use crate::commands::ast::Command;
use crate::commands::interp::{CmdError, Ctx, Frame, Host, HostError, Interpreter, Res};
use crate::commands::permissions::Intent;

/// The help topics this module answers for (checked against the help table in `verbs`).
#[cfg(test)]
pub(crate) const HELP: &[&str] = &["on"];

impl<H: Host> Interpreter<H> {
    /// `on NODE: CMD`: here when NODE is this hub, else on that node (its exec policy, its
    /// skills), the caller's variables sent along.
    pub(in crate::commands) async fn on(
        &self,
        ctx: &Ctx<'_>,
        node: &str,
        text: &str,
        body: &Command,
        frame: &Frame,
    ) -> Res {
        if matches!(body, Command::Shell { .. }) {
            self.check(ctx.caller, Intent::Shell)?;
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
}

/// A failure from node `node` (`on NODE:`), with the node named in front unless it already is:
/// `unknown command `x`` alone would read as if this hub had refused it.
fn on_node_says(node: &str, text: String) -> String {
    if text.contains(&format!("node `{node}`")) || text.contains(&format!("节点 `{node}`")) {
        return text;
    }
    format!("节点 `{node}` / node `{node}`: {text}")
}
