//! `publish TOPIC [TEXT]`, `subscribe TOPIC [where COND] do CMD`, `unsubscribe ID` and the
//! rule list (docs/cluster.md): the hub's event bus. Permission: [`Intent::Events`] (listing
//! is open; publishing and rules need `flows`). Through the `Services` port. Help:
//! `publish`, `subscribe`, `unsubscribe`.

use crate::commands::ast::{EventCmd, Template};
use crate::commands::interp::{Ctx, Frame, Host, Interpreter, Res};
use crate::commands::permissions::Intent;

/// The help topics this module answers for (checked against the help table in `verbs`).
#[cfg(test)]
pub(crate) const HELP: &[&str] = &["publish", "subscribe", "unsubscribe"];

impl<H: Host> Interpreter<H> {
    pub(in crate::commands) async fn event(
        &self,
        ctx: &Ctx<'_>,
        cmd: &EventCmd<Option<Template>>,
        frame: &Frame,
    ) -> Res {
        self.check(
            ctx.caller,
            Intent::Events {
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
}
