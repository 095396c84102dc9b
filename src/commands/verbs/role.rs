//! `role master|foreman|worker [group=G]` and `role test [CARD]` (docs/commands.md): set the
//! calling tab's role, or run a role card's `test_command` as the one who asked. Through the
//! `Tabs` port. Permission: [`Intent::SetRole`] to change a role; a card's test runs under
//! the checks of the command it holds. Help: `role`.

use crate::commands::ast::Role;
use crate::commands::interp::{CmdError, Ctx, Frame, Host, Interpreter, Res};
use crate::commands::parser;
use crate::commands::permissions::Intent;

/// The help topics this module answers for (checked against the help table in `verbs`).
#[cfg(test)]
pub(crate) const HELP: &[&str] = &["role"];

impl<H: Host> Interpreter<H> {
    /// `role ROLE [group=G]`.
    pub(in crate::commands) async fn role(
        &self,
        ctx: &Ctx<'_>,
        role: Role,
        group: Option<String>,
    ) -> Res {
        self.check(ctx.caller, Intent::SetRole)?;
        Ok(self.host.set_role(ctx.caller, role, group).await?)
    }

    /// `role test [CARD]`: the card's own check, run as the one who asked (docs/commands.md).
    pub(in crate::commands) async fn role_test(
        &self,
        ctx: &Ctx<'_>,
        card: Option<&str>,
        frame: &Frame,
    ) -> Res {
        let (name, test) = self.host.card_test(ctx.caller, card)?;
        let body = test
            .trim()
            .strip_prefix("?<")
            .and_then(|b| b.strip_suffix(">!"))
            .unwrap_or(test.trim())
            .to_string();
        let parsed = parser::parse(&body).map_err(|e| {
            CmdError::Failed(format!(
                "角色卡 {name} 的 test_command 无法解析 / card `{name}`'s test_command does not parse: {e}"
            ))
        })?;
        match self.eval(ctx, &parsed, frame).await {
            Ok(out) => Ok(format!(
                "✓ 角色卡 {name} 测试通过 / card `{name}` test passed: `{body}`\n{out}"
            )),
            Err(e) => Err(CmdError::Failed(format!(
                "✗ 角色卡 {name} 测试失败 / card `{name}` test failed: `{body}`\n{e}"
            ))),
        }
    }
}
