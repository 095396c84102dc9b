//! The seed manual's flow formats (docs/commands.md), rewritten into the native shape on the located
//! tree, so every position in a diagnostic still points into the file as written.
//!
//! - `数据分析流程` form: list-form `parallel_outputs` (`- deepseek: "…"`) becomes a mapping; a
//!   node holding a `command` (or `mcp`, `memory`, `agent`) and `parallel_outputs` becomes two
//!   nodes: the command, then the fan-out `ID_parallel` depending on it.
//! - Staged form (`flow:` list of `stage:` entries): stages in series, one node each (see
//!   [`stages`]).
//!
//! What a seed file means that the engine cannot do is reported here, located.

use super::validate::Problem;
use super::yaml::{Kind, Located, Pos};

/// The `trigger:` values that mean "started by a command" (the only kind a flow file names).
pub const MANUAL_TRIGGERS: &[&str] = &["手动触发", "手动", "manual"];

/// What [`normalize`] did.
#[derive(Debug, Default)]
pub struct Normalized {
    /// The tree was rewritten (so the typed load must read the tree, not the text).
    pub changed: bool,
    /// What the seed form asks for that the engine cannot do, located.
    pub problems: Vec<Problem>,
}

/// Rewrites the seed forms in `tree` into the native shape, in place.
pub fn normalize(tree: &mut Located) -> Normalized {
    let mut out = Normalized::default();
    if tree.get("flow").is_some() && tree.get("nodes").is_none() {
        stages(tree, &mut out);
        out.changed = true;
    }
    if let Some(trigger) = tree.get("trigger") {
        let text = trigger.as_str().unwrap_or_default().trim().to_string();
        let pos = trigger.pos;
        if MANUAL_TRIGGERS.contains(&text.as_str()) {
            // Started by a command: nothing more to say.
        } else if tree.get("on").is_none()
            && crate::events::valid_topic(&text)
            && text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-:/*".contains(c))
        {
            // An event's topic (docs/commands.md/§19: `node_result`, `data.updated`): the flow runs
            // for each such event, as `on:`. Words such as `每天早上` read as a schedule, which
            // a flow cannot have: those stay an error that says what to write.
            if let Kind::Map(entries) = &mut tree.kind {
                let on = Located {
                    pos,
                    kind: Kind::Map(vec![(scalar("event", pos), scalar(&text, pos))]),
                };
                entries.push((scalar("on", pos), on));
                out.changed = true;
            }
        } else {
            out.problems.push(Problem {
                pos,
                message: format!(
                    "不支持的触发 / `trigger: {text}`: write `手动触发` / `manual` (started by `?<manager run NAME>!`) or an event's topic such as `data.updated` (the flow then runs for each such event; any topic, 中文 too, as `on: {{event: TOPIC}}`); a flow has no schedule"
                ),
            });
        }
    }
    let Some(nodes) = map_value_mut(tree, "nodes") else {
        return out;
    };
    let Kind::Seq(items) = &mut nodes.kind else {
        return out;
    };
    let taken: Vec<String> = items
        .iter()
        .filter_map(|n| n.get("id").and_then(Located::as_str).map(str::to_string))
        .collect();
    let mut i = 0;
    while i < items.len() {
        if let Some(po) = map_value_mut(&mut items[i], "parallel_outputs") {
            if list_to_map(po, &mut out.problems) {
                out.changed = true;
            }
        }
        if let Some(extra) = split_fan_out(&mut items[i], &taken) {
            items.insert(i + 1, extra);
            out.changed = true;
            i += 1;
        }
        i += 1;
    }
    out
}

/// `parallel_outputs: [{site: prompt}, …]` → `{site: prompt, …}`; true when rewritten.
fn list_to_map(po: &mut Located, problems: &mut Vec<Problem>) -> bool {
    let Kind::Seq(items) = &po.kind else {
        return false;
    };
    let mut entries = Vec::new();
    for item in items {
        match &item.kind {
            Kind::Map(pairs) if pairs.len() == 1 => entries.push(pairs[0].clone()),
            _ => problems.push(Problem {
                pos: item.pos,
                message: "并行输出格式 / each item of `parallel_outputs` is one `target: prompt` (e.g. `- deepseek: \"请分析 $x\"`)".into(),
            }),
        }
    }
    po.kind = Kind::Map(entries);
    true
}

/// A node with a command-like body and `parallel_outputs` loses the fan-out, which comes back
/// as a new node `ID_parallel` depending on it.
fn split_fan_out(node: &mut Located, taken: &[String]) -> Option<Located> {
    let has_command = ["command", "mcp", "memory", "agent"]
        .iter()
        .any(|k| node.get(k).is_some());
    if !has_command {
        return None;
    }
    let Kind::Map(entries) = &mut node.kind else {
        return None;
    };
    let at = entries
        .iter()
        .position(|(k, _)| k.as_str() == Some("parallel_outputs"))?;
    let (key, value) = entries.remove(at);
    let id_node = node.get("id")?.clone();
    let id = id_node.as_str().unwrap_or_default().to_string();
    let mut new_id = format!("{id}_parallel");
    let mut n = 2;
    while taken.contains(&new_id) {
        new_id = format!("{id}_parallel{n}");
        n += 1;
    }
    let mut fan = vec![
        (scalar("id", key.pos), scalar(&new_id, key.pos)),
        (scalar("depends_on", key.pos), scalar(&id, id_node.pos)),
        (key.clone(), value),
    ];
    if let Some(name) = node.get("name").and_then(Located::as_str) {
        fan.insert(
            1,
            (
                scalar("name", key.pos),
                scalar(&format!("{name} (并行 / fan-out)"), key.pos),
            ),
        );
    }
    Some(Located {
        pos: key.pos,
        kind: Kind::Map(fan),
    })
}

fn scalar(text: &str, pos: Pos) -> Located {
    Located {
        pos,
        kind: Kind::Scalar(text.to_string(), false),
    }
}

fn map_value_mut<'a>(node: &'a mut Located, key: &str) -> Option<&'a mut Located> {
    match &mut node.kind {
        Kind::Map(entries) => entries
            .iter_mut()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v),
        _ => None,
    }
}

/// The staged form: `flow:` is a list of stages run in series, each one node named by its
/// `stage:`.
///
/// | stage | node |
/// |---|---|
/// | `command` | a command node (`{x}` in it reads the input or variable `x`) |
/// | `role: foreman` + `rules` | a prompt to `role:foreman`: the previous stage's output and the rules |
/// | `concurrent: true` + `workers: [sites]` | a fan-out of the previous output to those sites |
/// | `strategy` + `weights` | a prompt to `auto` merging the previous stage's answers with those weights, published as `aggregated_result` |
///
/// `role` of a command stage is who runs it: only `master` can (a command of a flow runs with
/// the master's authority).
fn stages(tree: &mut Located, out: &mut Normalized) {
    let Kind::Map(top) = &mut tree.kind else {
        return;
    };
    let Some(at) = top.iter().position(|(k, _)| k.as_str() == Some("flow")) else {
        return;
    };
    let (flow_key, flow_value) = top.remove(at);
    let mut nodes = Vec::new();
    let mut inputs: Vec<(String, Pos)> = Vec::new();
    let mut previous: Option<(String, Pos, bool)> = None; // id, pos, fanned out
    for stage in flow_value.items() {
        let Kind::Map(fields) = &stage.kind else {
            out.problems.push(Problem {
                pos: stage.pos,
                message: "阶段格式 / each entry of `flow:` is a mapping with `stage:`".into(),
            });
            continue;
        };
        let pos = stage.pos;
        let Some(id_node) = stage.get("stage") else {
            out.problems.push(Problem {
                pos,
                message: "缺少阶段名 / this stage has no `stage:` name".into(),
            });
            continue;
        };
        let id = id_node.as_str().unwrap_or_default().to_string();
        let text = |k: &str| stage.get(k).and_then(Located::as_str).map(str::trim);
        let mut node: Vec<(Located, Located)> = vec![(scalar("id", pos), id_node.clone())];
        if let Some((prev, prev_pos, _)) = &previous {
            node.push((scalar("depends_on", pos), scalar(prev, *prev_pos)));
        }
        let role = text("role");
        let prev_output = match &previous {
            Some((prev, _, true)) => format!("${{{prev}.outputs}}"),
            Some(_) => "$RESULT".to_string(),
            None => String::new(),
        };
        let fanned;
        if let Some(command) = stage.get("command") {
            if let Some(r) = role.filter(|r| *r != "master") {
                out.problems.push(Problem {
                    pos: stage.get("role").map_or(pos, |r| r.pos),
                    message: format!(
                        "不支持的角色 / stage `{id}`: a flow's commands run as the master; `role: {r}` cannot run `command` (use role: master, or give the stage `rules`)"
                    ),
                });
            }
            let body = braces_to_vars(
                command.as_str().unwrap_or_default(),
                &mut inputs,
                command.pos,
            );
            node.push((
                scalar("command", command.pos),
                scalar(body.trim(), command.pos),
            ));
            fanned = false;
        } else if role == Some("foreman") {
            let rules = text("rules").unwrap_or_default();
            let prompt = format!(
                "{prev_output}\n\n按以下规则拆分并分派给你的工人 / split this and hand it to your workers by these rules:\n{rules}"
            );
            node.push((scalar("to", pos), scalar("role:foreman", pos)));
            node.push((scalar("prompt", pos), scalar(prompt.trim(), pos)));
            fanned = false;
        } else if let Some(workers) = stage.get("workers") {
            let concurrent = text("concurrent").is_some_and(|c| c == "true");
            if !concurrent {
                out.problems.push(Problem {
                    pos: stage.get("concurrent").map_or(pos, |c| c.pos),
                    message: format!(
                        "不支持的阶段 / stage `{id}`: `workers` without `concurrent: true` (one worker after another) is not something a node does; write `concurrent: true`, or one stage per worker"
                    ),
                });
            }
            node.push((scalar("to", workers.pos), workers.clone()));
            let prompt = if prev_output.is_empty() {
                "$document".to_string()
            } else {
                prev_output.clone()
            };
            node.push((scalar("prompt", pos), scalar(&prompt, pos)));
            fanned = true;
        } else if let Some(weights) = stage.get("weights") {
            let strategy = text("strategy").unwrap_or("weighted_average");
            let mut lines = Vec::new();
            for (k, v) in match &weights.kind {
                Kind::Map(w) => w.as_slice(),
                _ => &[],
            } {
                lines.push(format!(
                    "- {}: {}",
                    k.as_str().unwrap_or_default(),
                    v.as_str().unwrap_or_default()
                ));
            }
            let prompt = format!(
                "按权重综合以下各平台的回答（{strategy}）/ merge these answers into one, giving each source this weight ({strategy}):\n{}\n\n{prev_output}",
                lines.join("\n")
            );
            node.push((scalar("to", pos), scalar("auto", pos)));
            node.push((scalar("prompt", pos), scalar(&prompt, pos)));
            node.push((scalar("output_var", pos), scalar("aggregated_result", pos)));
            fanned = false;
        } else {
            out.problems.push(Problem {
                pos,
                message: format!(
                    "阶段无内容 / stage `{id}` has none of `command`, `role: foreman` + `rules`, `workers` or `weights`; the engine does not know what to do with it"
                ),
            });
            continue;
        }
        for (k, v) in fields {
            let key = k.as_str().unwrap_or_default();
            if ![
                "stage",
                "role",
                "command",
                "rules",
                "concurrent",
                "workers",
                "strategy",
                "weights",
            ]
            .contains(&key)
            {
                out.problems.push(Problem {
                    pos: k.pos,
                    message: format!(
                        "未知字段 / unknown field `{key}` in stage `{id}`; a stage has stage, role, command, rules, concurrent, workers, strategy, weights"
                    ),
                });
            }
            let _ = v;
        }
        nodes.push(Located {
            pos,
            kind: Kind::Map(node),
        });
        previous = Some((id, id_node.pos, fanned));
    }
    let mut declared: Vec<String> = Vec::new();
    let mut input_entries = Vec::new();
    for (name, pos) in inputs {
        if declared.contains(&name) || name == "aggregated_result" {
            continue;
        }
        declared.push(name.clone());
        input_entries.push((
            scalar(&name, pos),
            Located {
                pos,
                kind: Kind::Map(vec![(scalar("required", pos), plain("true", pos))]),
            },
        ));
    }
    if !input_entries.is_empty() && tree.get("inputs").is_none() {
        if let Kind::Map(top) = &mut tree.kind {
            top.push((
                scalar("inputs", flow_key.pos),
                Located {
                    pos: flow_key.pos,
                    kind: Kind::Map(input_entries),
                },
            ));
        }
    }
    if let Kind::Map(top) = &mut tree.kind {
        top.push((
            scalar("nodes", flow_key.pos),
            Located {
                pos: flow_value.pos,
                kind: Kind::Seq(nodes),
            },
        ));
    }
}

fn plain(text: &str, pos: Pos) -> Located {
    Located {
        pos,
        kind: Kind::Scalar(text.to_string(), true),
    }
}

/// `{name}` (the staged form's placeholder) → `${name}`; names read are noted as inputs.
fn braces_to_vars(text: &str, names: &mut Vec<(String, Pos)>, pos: Pos) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('{') {
        let (before, after) = rest.split_at(start);
        out.push_str(before);
        let inner_end = after[1..].find('}');
        match inner_end {
            Some(end)
                if end > 0
                    && !before.ends_with('$')
                    && after[1..=end]
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_') =>
            {
                let name = &after[1..=end];
                names.push((name.to_string(), pos));
                out.push_str(&format!("${{{name}}}"));
                rest = &after[end + 2..];
            }
            _ => {
                out.push('{');
                rest = &after[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn braces_become_variables_and_are_noted() {
        let mut names = Vec::new();
        let p = Pos { line: 1, col: 1 };
        assert_eq!(
            braces_to_vars("分析：\n{document}\n${x} {not a var}", &mut names, p),
            "分析：\n${document}\n${x} {not a var}"
        );
        assert_eq!(names, vec![("document".to_string(), p)]);
    }
}
