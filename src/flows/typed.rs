//! The typed load from the located tree, field by field, so that every value of the wrong type
//! is reported at its own key (serde stops at the first), and the fields that are fine still
//! make a flow the semantic checks can read.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::model::{Flow, Node, PromptMap};
use super::validate::Problem;
use super::yaml::{self, Located, Pos};

/// The flow in `tree` (mapping keys at `fixes` renamed or left out, as [`yaml::to_json`]
/// does), and every typed problem. `None` when not even a flow's frame could be read.
pub fn from_tree(tree: &Located, fixes: &[(Pos, Option<String>)]) -> (Option<Flow>, Vec<Problem>) {
    let json = yaml::to_json(tree, fixes);
    if let Ok(mut flow) = serde_json::from_value::<Flow>(json.clone()) {
        keep_file_order(&mut flow, tree);
        return (Some(flow), Vec::new());
    }
    let mut problems = Vec::new();
    let Value::Object(top) = json else {
        problems.push(Problem {
            pos: tree.pos,
            message: "流程格式 / a flow file is a mapping with `name` and `nodes`".into(),
        });
        return (None, problems);
    };
    let mut nodes = Vec::new();
    match top.get("nodes") {
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                let at = tree.get("nodes").and_then(|n| n.items().get(i));
                nodes.push(
                    fieldwise::<Node>(item, at, tree.pos, &["id"], &mut problems)
                        .unwrap_or_default(),
                );
            }
        }
        Some(_) => problems.push(Problem {
            pos: tree.get("nodes").map_or(tree.pos, |n| n.pos),
            message: "字段值无效 / invalid value: `nodes` is a list of nodes".into(),
        }),
        None => problems.push(Problem {
            pos: tree.pos,
            message: "缺少字段 / missing field `nodes`".into(),
        }),
    }
    let mut frame = top.clone();
    frame.insert("nodes".into(), Value::Array(Vec::new()));
    if !frame.contains_key("name") {
        problems.push(Problem {
            pos: tree.pos,
            message: "缺少字段 / missing field `name`".into(),
        });
        frame.insert("name".into(), Value::String(String::new()));
    }
    let flow = fieldwise::<Flow>(
        &Value::Object(frame),
        Some(tree),
        tree.pos,
        &["name", "nodes"],
        &mut problems,
    )
    .map(|mut flow| {
        flow.nodes = nodes;
        keep_file_order(&mut flow, tree);
        flow
    });
    (flow, problems)
}

/// JSON objects forget the file's key order; `parallel_outputs` items run in file order.
fn keep_file_order(flow: &mut Flow, tree: &Located) {
    let order = |map: Option<&Located>| -> Vec<String> {
        match map.map(|m| &m.kind) {
            Some(yaml::Kind::Map(entries)) => entries
                .iter()
                .filter_map(|(k, _)| k.as_str().map(str::to_string))
                .collect(),
            _ => Vec::new(),
        }
    };
    let sort = |pm: &mut PromptMap, keys: Vec<String>| {
        pm.0.sort_by_key(|(t, _)| keys.iter().position(|k| k == t).unwrap_or(usize::MAX));
    };
    let nodes = tree.get("nodes").map(Located::items).unwrap_or_default();
    for (node, at) in flow.nodes.iter_mut().zip(nodes) {
        if let Some(pm) = node.parallel_outputs.as_mut() {
            sort(pm, order(at.get("parallel_outputs")));
        }
    }
    for (id, pm) in flow.parallel_outputs.iter_mut() {
        sort(
            pm,
            order(tree.get("parallel_outputs").and_then(|p| p.get(id))),
        );
    }
}

/// Deserializes `value` one field at a time (`first` ones first), reporting each field that
/// does not fit at its key and leaving it out.
fn fieldwise<T: DeserializeOwned>(
    value: &Value,
    at: Option<&Located>,
    fallback: Pos,
    first: &[&str],
    problems: &mut Vec<Problem>,
) -> Option<T> {
    let pos = at.map_or(fallback, |n| n.pos);
    let Value::Object(map) = value else {
        problems.push(Problem {
            pos,
            message: "字段值无效 / invalid value: expected a mapping".into(),
        });
        return None;
    };
    let mut keys: Vec<&String> = map.keys().filter(|k| first.contains(&k.as_str())).collect();
    keys.extend(map.keys().filter(|k| !first.contains(&k.as_str())));
    let mut acc = Map::new();
    for key in keys {
        let mut trial = acc.clone();
        trial.insert(key.clone(), map[key].clone());
        match serde_json::from_value::<T>(Value::Object(trial.clone())) {
            Ok(_) => acc = trial,
            Err(e) if e.to_string().starts_with("missing field") => acc = trial,
            Err(e) => {
                let key_pos = at.and_then(|n| n.get(key)).map_or(pos, |v| v.pos);
                let got = at
                    .and_then(|n| n.get(key))
                    .and_then(Located::as_str)
                    .map(|v| format!(" (got `{v}`)"))
                    .unwrap_or_default();
                problems.push(Problem {
                    pos: key_pos,
                    message: format!("字段值无效 / invalid value: `{key}`: {e}{got}"),
                });
            }
        }
    }
    match serde_json::from_value::<T>(Value::Object(acc)) {
        Ok(t) => Some(t),
        Err(e) => {
            problems.push(Problem {
                pos,
                message: format!("字段缺失 / {e}"),
            });
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_of_the_wrong_type_is_reported_at_its_key() {
        let text = "name: f\nnodes:\n  - id: a\n    prompt: hi\n    workers: many\n  - id: b\n    prompt: hi\n    retry: {max: lots}\n";
        let tree = yaml::parse(text).expect("parses");
        let (flow, problems) = from_tree(&tree, &[]);
        let at: Vec<(usize, usize)> = problems.iter().map(|p| (p.pos.line, p.pos.col)).collect();
        assert_eq!(at, vec![(5, 14), (8, 12)], "{problems:?}");
        assert!(problems[0].message.contains("`workers`"), "{problems:?}");
        let flow = flow.expect("the rest still loads");
        assert_eq!(flow.nodes.len(), 2);
        assert_eq!(flow.nodes[0].prompt.as_deref(), Some("hi"));
        assert_eq!(flow.nodes[0].workers, None);
    }
}
