//! The skills of `skills/` as MCP tools `skill_NAME` (docs/memory-and-skills.md): listed from the set loaded
//! now (hot reloads show up at the next `tools/list`), called through the command language's
//! own `skill` command, so arguments are checked against the skill's schema and a `run` skill
//! still needs the exec policy's leave.
//!
//! An MCP client holds the hub's token, so it calls as the person at the master's desk: the
//! same authority `?<skill …>!` typed by the person has. Argument values are data: `$` is
//! escaped so no variable is expanded from them.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{json, Value};

use super::{ExtraTool, ToolSource};
use crate::commands::ast::{Command, Role as CmdRole, SkillCmd};
use crate::commands::permissions::{Caller, Source};
use crate::control::Control;

/// The caller id (and variable scope) of MCP skill calls.
pub const CALLER: &str = "mcp";

/// The hub's skills, as a [`ToolSource`]: the set the command host loaded now, each call run
/// by it as the `skill` command.
pub struct SkillTools {
    control: Arc<Control>,
}

impl SkillTools {
    pub fn new(control: Arc<Control>) -> SkillTools {
        SkillTools { control }
    }
}

/// An argument as the command language takes it: strings as they are, anything else as JSON
/// (the skill's schema types it back), `$` escaped.
fn arg_text(v: &Value) -> String {
    let s = match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    s.replace('$', "\\$")
}

impl ToolSource for SkillTools {
    fn tools(&self) -> Vec<ExtraTool> {
        let set = self.control.commands.skills.get();
        set.skills
            .iter()
            .map(|s| {
                let schema = match &s.schema {
                    Value::Object(_) => s.schema.clone(),
                    _ => json!({"type": "object"}),
                };
                let mut description = s.description.trim().to_string();
                if let Some(e) = &s.example {
                    description.push_str(&format!("\nIn a chat tab / 在标签页里: {e}"));
                }
                ExtraTool {
                    name: s.name.clone(),
                    description,
                    input_schema: schema,
                }
            })
            .collect()
    }

    fn call(
        &self,
        name: &str,
        args: Value,
    ) -> Pin<Box<dyn Future<Output = Result<String, String>> + Send + '_>> {
        let name = name.to_string();
        Box::pin(async move {
            let args = match args {
                Value::Object(m) => m.iter().map(|(k, v)| (k.clone(), arg_text(v))).collect(),
                Value::Null => Vec::new(),
                other => return Err(format!("arguments must be an object, got {other}")),
            };
            let caller = Caller::new(CALLER, CmdRole::Master, None, Source::UserInput);
            let cmd = Command::Skill(SkillCmd::Run { name, args });
            let out = crate::control::run_parsed(&self.control, &caller, &cmd).await;
            match out.success {
                true => Ok(out.output),
                false => Err(out.output),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_data() {
        assert_eq!(arg_text(&json!("cost $5 ${x}")), "cost \\$5 \\${x}");
        assert_eq!(arg_text(&json!(50)), "50");
        assert_eq!(arg_text(&json!(true)), "true");
        assert_eq!(arg_text(&json!(["a"])), "[\"a\"]");
    }
}
