//! `set [global] NAME = VALUE | $(CMD)` (docs/commands.md): a variable of the caller's scope
//! or the global one. Values are data, never parsed again. Permission: the entry gate only.
//! Help: `set`, `vars`.

use crate::commands::ast::SetValue;
use crate::commands::interp::{trim_capture, Ctx, Frame, Host, Interpreter, Res};

/// The help topics this module answers for (checked against the help table in `verbs`).
#[cfg(test)]
pub(crate) const HELP: &[&str] = &["set", "vars"];

impl<H: Host> Interpreter<H> {
    pub(in crate::commands) async fn set(
        &self,
        ctx: &Ctx<'_>,
        name: &str,
        global: bool,
        value: &SetValue,
        frame: &Frame,
    ) -> Res {
        let value = match value {
            SetValue::Capture(cmd) => trim_capture(self.eval(ctx, cmd, frame).await?),
            SetValue::Literal(t) => self.expand(ctx, t, frame)?,
        };
        let shown = preview(&value);
        if global {
            self.vars.set_global(name, value)?;
        } else {
            self.vars.set(&ctx.caller.client_id, name, value)?;
        }
        Ok(format!("{name} = {shown}"))
    }
}

/// A short view of a value for the `set` confirmation.
fn preview(value: &str) -> String {
    const MAX: usize = 200;
    if value.len() <= MAX {
        return value.to_string();
    }
    let mut cut = MAX;
    while !value.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…({} bytes)", &value[..cut], value.len())
}
