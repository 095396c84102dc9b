//! `mcp list | use | resources | read | config add | config remove` (docs/mcp.md): the MCP
//! servers of `mcp.json`, through the `Services` port. Permission: [`Intent::Mcp`] to list
//! and call; [`Intent::McpConfig`] (the person only: it starts programs) to change the config.
//! Help: `mcp`.

use crate::commands::ast::{McpArgs, McpCmd, McpRequest};
use crate::commands::interp::{CmdError, Ctx, Frame, Host, Interpreter, Res};
use crate::commands::parser::parse_template;
use crate::commands::permissions::Intent;

/// The help topics this module answers for (checked against the help table in `verbs`).
#[cfg(test)]
pub(crate) const HELP: &[&str] = &["mcp"];

impl<H: Host> Interpreter<H> {
    pub(in crate::commands) async fn mcp(&self, ctx: &Ctx<'_>, m: &McpCmd, frame: &Frame) -> Res {
        let config = matches!(m, McpCmd::ConfigAdd { .. } | McpCmd::ConfigRemove(_));
        self.check(
            ctx.caller,
            if config {
                Intent::McpConfig
            } else {
                Intent::Mcp
            },
        )?;
        let request = match m {
            McpCmd::List => McpRequest::List,
            McpCmd::ConfigAdd {
                name,
                command,
                args,
            } => McpRequest::ConfigAdd {
                name: name.clone(),
                command: command.clone(),
                args: args.clone(),
            },
            McpCmd::ConfigRemove(name) => McpRequest::ConfigRemove(name.clone()),
            McpCmd::Resources(server) => McpRequest::Resources(server.clone()),
            McpCmd::Read { server, uri } => McpRequest::Read {
                server: server.clone(),
                uri: self.expand(ctx, &parse_template(uri), frame)?,
            },
            McpCmd::Use { server, tool, args } => {
                let args = match args {
                    McpArgs::Pairs(pairs) => {
                        let mut out = serde_json::Map::new();
                        for (k, v) in pairs {
                            let v = self.expand(ctx, &parse_template(v), frame)?;
                            out.insert(k.clone(), serde_json::Value::String(v));
                        }
                        out
                    }
                    McpArgs::Json(text) => {
                        let v: serde_json::Value = serde_json::from_str(text)
                            .map_err(|e| CmdError::Failed(format!("arguments: {e}")))?;
                        match self.expand_json(ctx, v, frame)? {
                            serde_json::Value::Object(o) => o,
                            _ => {
                                return Err(CmdError::Failed(
                                    "arguments must be a JSON object".into(),
                                ))
                            }
                        }
                    }
                };
                McpRequest::Use {
                    server: server.clone(),
                    tool: tool.clone(),
                    args,
                }
            }
        };
        Ok(self.host.mcp(ctx.caller, request).await?)
    }

    /// Expands `$var`s inside every string of a JSON value (values inserted as text).
    fn expand_json(
        &self,
        ctx: &Ctx<'_>,
        v: serde_json::Value,
        frame: &Frame,
    ) -> Result<serde_json::Value, CmdError> {
        use serde_json::Value;
        Ok(match v {
            Value::String(s) => Value::String(self.expand(ctx, &parse_template(&s), frame)?),
            Value::Array(a) => Value::Array(
                a.into_iter()
                    .map(|x| self.expand_json(ctx, x, frame))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(o) => Value::Object(
                o.into_iter()
                    .map(|(k, x)| Ok((k, self.expand_json(ctx, x, frame)?)))
                    .collect::<Result<_, CmdError>>()?,
            ),
            other => other,
        })
    }
}
