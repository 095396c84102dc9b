//! `publish`, `subscribe`, `unsubscribe`: the event bus and its standing rules (docs/commands.md).

use super::*;

/// `publish`, `subscribe`, `subscribe list`, `unsubscribe` (docs/cluster.md).
pub(super) fn event_verb(
    control: &Control,
    caller: &Caller,
    cause: &crate::events::Cause,
    cmd: crate::commands::ast::EventCmd<String>,
) -> Result<String, String> {
    use crate::commands::ast::EventCmd;
    use crate::events::{Event, Rule};
    match cmd {
        EventCmd::Publish { topic, text } => {
            let data = serde_json::json!({"text": text, "from": caller.client_id});
            control
                .bus
                .publish(Event::new(&topic, data.clone(), cause.clone()));
            // The lifecycle event of any publish (webhooks may ask for it), with the topic.
            if topic != "data_published" {
                let mut data = data;
                data["topic"] = topic.clone().into();
                control
                    .bus
                    .publish(Event::new("data_published", data, cause.clone()));
            }
            Ok(format!("已发布 / published {topic}"))
        }
        EventCmd::Subscribe {
            topic,
            cond,
            command,
        } => {
            let rule = control.rules.add(Rule {
                id: 0,
                topic,
                cond,
                command,
                author: caller.client_id.clone(),
                role: caller.role.as_str().to_string(),
                group: caller.group.clone(),
                person: caller.is_person(),
                created_ms: crate::store::now_ms(),
            })?;
            Ok(format!(
                "规则 #{id} / rule #{id}: {} → {}",
                rule.topic,
                rule.command,
                id = rule.id
            ))
        }
        EventCmd::List => {
            let rules = control.rules.all();
            if rules.is_empty() {
                return Ok("没有订阅规则 / no rules".into());
            }
            Ok(rules
                .iter()
                .map(|r| {
                    let cond = r
                        .cond
                        .as_deref()
                        .map(|c| format!(" where {c}"))
                        .unwrap_or_default();
                    format!(
                        "#{} {}{cond} do {}  ({})",
                        r.id, r.topic, r.command, r.author
                    )
                })
                .collect::<Vec<_>>()
                .join("\n"))
        }
        EventCmd::Unsubscribe(id) => {
            let Some(rule) = control.rules.get(id) else {
                return Err(format!("没有这条规则 / no rule #{id}"));
            };
            let may = caller.is_person()
                || caller.permissions.any_target
                || rule.author == caller.client_id;
            if !may {
                return Err(format!(
                    "无权删除 / not allowed: rule #{id} belongs to another tab"
                ));
            }
            control.rules.remove(id)?;
            Ok(format!("已删除 / removed rule #{id}"))
        }
    }
}
