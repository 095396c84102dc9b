//! Flow files: the YAML model, validation with line/column errors, the DAG, its rendering, and
//! the sans-IO run engine (a pure state machine the hub's runner drives with journal events).
//!
//! - [`model`]: serde types of `flows/*.yaml` and their JSON Schema ([`schema_json`]).
//! - [`load_file`] / [`load_str`]: parse + validate, every problem as a [`Diagnostic`].
//! - [`render`]: the DAG as text, Mermaid or DOT.
//! - [`inline`]: `manager create NAME from "…"` — an inline body becomes a flow file.
//! - [`engine`]: [`engine::RunState`], folded from [`engine::JournalEvent`]s, asks for
//!   [`engine::Effect`]s.

pub mod engine;
pub mod graph;
pub mod inline;
pub mod model;
pub mod render;
pub mod seed;
pub mod template;
mod typed;
pub mod validate;
pub mod yaml;

use std::fmt;
use std::path::Path;

pub use model::Flow;

/// One problem in a flow file, shown as `FILE:LINE:COL: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file (as given to the loader).
    pub file: String,
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1.
    pub col: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.col, self.message
        )
    }
}

impl Diagnostic {
    fn at(file: &str, pos: yaml::Pos, message: String) -> Diagnostic {
        Diagnostic {
            file: file.to_string(),
            line: pos.line,
            col: pos.col,
            message,
        }
    }
}

/// The JSON Schema of flow files, generated from [`model::Flow`] (committed as
/// `flows/schema.json`; a test keeps the two equal).
pub fn schema_json() -> String {
    let schema = schema();
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    text
}

fn schema() -> schemars::Schema {
    let mut schema = schemars::schema_for!(Flow);
    model::add_needs_alias(&mut schema);
    schema
}

fn schema_value() -> serde_json::Value {
    serde_json::to_value(schema()).unwrap_or_default()
}

/// The flow file in `dir` whose top-level `name:` is `name` (the manual names flows by their
/// `name`, `数据分析流程`, while the file is `flow.yaml`); file names in order, first match.
pub fn find_by_name(dir: &Path, name: &str) -> Option<std::path::PathBuf> {
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    files.into_iter().take(10_000).find(|path| {
        std::fs::read_to_string(path).is_ok_and(|text| {
            text.lines().any(|line| {
                line.strip_prefix("name:").is_some_and(|v| {
                    let v = v.split(" #").next().unwrap_or_default().trim();
                    v.trim_matches(|c| c == '"' || c == '\'') == name
                })
            })
        })
    })
}

/// Reads and validates a flow file. Every problem is returned, each with its position.
pub fn load_file(path: impl AsRef<Path>) -> Result<Flow, Vec<Diagnostic>> {
    let path = path.as_ref();
    let file = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(text) => load_str(&file, &text),
        Err(e) => Err(vec![Diagnostic {
            file,
            line: 1,
            col: 1,
            message: format!("无法读取文件 / cannot read the file: {e}"),
        }]),
    }
}

/// Parses and validates flow text; `name` is the file name used in diagnostics.
///
/// Order: YAML syntax (stop on error) → the seed forms rewritten into the native shape
/// ([`seed`]) → unknown fields anywhere (all of them) → typed deserialization (every field of
/// the wrong type; a file with neither seed forms nor unknown fields is read by serde-saphyr
/// first) → semantic checks (all of them). One pass reports every problem.
pub fn load_str(name: &str, text: &str) -> Result<Flow, Vec<Diagnostic>> {
    let mut tree = yaml::parse(text).map_err(|e| {
        vec![Diagnostic::at(
            name,
            e.pos,
            format!("YAML 语法错误 / invalid YAML: {}", e.message),
        )]
    })?;
    let seed = seed::normalize(&mut tree);
    let mut problems = seed.problems;
    let unknown = yaml::unknown_fields(&tree, &schema_value());
    for u in &unknown {
        let hint = match &u.suggestion {
            Some(s) => format!(", did you mean `{s}`?"),
            None => format!("; expected one of: {}", u.expected.join(", ")),
        };
        problems.push(validate::Problem {
            pos: u.pos,
            message: format!("未知字段 / unknown field `{}`{hint}", u.field),
        });
    }
    // Go on as if each typo were its suggestion (other unknown fields left out), so one pass
    // shows the other problems too.
    let fixes: Vec<(yaml::Pos, Option<String>)> = unknown
        .iter()
        .map(|u| (u.pos, u.suggestion.clone()))
        .collect();
    let mut extra = Vec::new();
    let flow = if unknown.is_empty() && !seed.changed {
        match serde_saphyr::from_str_with_options::<Flow>(text, yaml::saphyr_options(text)) {
            Ok(flow) => Some(flow),
            Err(e) => {
                let first = serde_diagnostic(name, &e, &tree);
                let (flow, typed) = typed::from_tree(&tree, &fixes);
                problems.extend(typed.into_iter().filter(|p| p.pos.line != first.line));
                extra.push(first);
                flow
            }
        }
    } else {
        let (flow, typed) = typed::from_tree(&tree, &fixes);
        problems.extend(typed);
        flow
    };
    let mut flow = flow;
    if let Some(flow) = flow.as_mut() {
        if let Err(node) = model::desugar_mcp(flow) {
            problems.push(validate::Problem {
                pos: yaml::Pos { line: 1, col: 1 },
                message: format!("节点内容冲突 / node `{node}` has more than one of `command`, `mcp`, `memory` and `agent` (or `task` without `agent`); use one node each"),
            });
        } else {
            model::desugar_fallback(flow);
            problems.extend(validate::validate(flow, &tree));
        }
    }
    let mut diags: Vec<Diagnostic> = extra;
    diags.extend(
        problems
            .into_iter()
            .map(|p| Diagnostic::at(name, p.pos, p.message)),
    );
    if diags
        .iter()
        .any(|d| d.message.contains("missing field `name`"))
    {
        diags.retain(|d| !d.message.contains("invalid flow name ``"));
    }
    diags.sort_by_key(|d| (d.line, d.col));
    diags.dedup();
    match flow {
        Some(flow) if diags.is_empty() => Ok(flow),
        _ if diags.is_empty() => Err(vec![Diagnostic::at(
            name,
            yaml::Pos { line: 1, col: 1 },
            "流程无效 / not a flow file".into(),
        )]),
        _ => Err(diags),
    }
}

/// A serde-saphyr error as a diagnostic, naming the field and the value it refused.
fn serde_diagnostic(name: &str, err: &serde_saphyr::Error, tree: &yaml::Located) -> Diagnostic {
    let pos = err
        .location()
        .map_or(yaml::Pos { line: 1, col: 1 }, |l| yaml::Pos {
            line: (l.line() as usize).max(1),
            col: (l.column() as usize).max(1),
        });
    let text = err.without_snippet().to_string();
    let mut message = text.split(" at line ").next().unwrap_or(&text).to_string();
    if ["invalid u", "invalid i"]
        .iter()
        .any(|p| message.starts_with(p))
    {
        message = "expected a whole number".into();
    }
    if let Some((key, value)) = yaml::key_at(tree, pos) {
        message = match value.as_str() {
            Some(v) => format!("`{key}`: {message} (got `{v}`)"),
            None => format!("`{key}`: {message}"),
        };
    }
    Diagnostic::at(name, pos, format!("字段值无效 / invalid value: {message}"))
}

#[cfg(test)]
mod load_tests;

/// A loaded flow as native YAML (what `aicard flow import` writes); `from` names the source
/// in a comment. Loading the text gives the same flow back.
pub fn native_yaml(flow: &Flow, from: &str) -> anyhow::Result<String> {
    let body = serde_saphyr::to_string(&to_native(flow))?;
    Ok(format!(
        "# yaml-language-server: $schema=./schema.json\n# 由 aicard flow import 生成 / written by `aicard flow import` from {from}\n{body}"
    ))
}

/// The same flow with no seed-only key left (docs/flows.md, "Importing a seed file"): a manual
/// `trigger` goes (an event's is already `on:`), a node's `input_var` goes (the validator
/// checked it; `$x` reads the variable), `error_handling.max_retries`/`retry_delay` become
/// `defaults.retry` when the flow has none (the same policy: `max`, the delay as the backoff's
/// `initial`), and flow-level `parallel_outputs` move onto their nodes. It runs as before.
pub fn to_native(flow: &Flow) -> Flow {
    let mut f = flow.clone();
    f.trigger = None;
    for node in &mut f.nodes {
        node.input_var = model::StringList::default();
        if node.parallel_outputs.is_none() {
            if let Some(map) = f.parallel_outputs.get(&node.id) {
                node.parallel_outputs = Some(map.clone());
            }
        }
    }
    f.parallel_outputs.clear();
    if let Some(eh) = f.error_handling.as_mut() {
        if eh.max_retries.is_some() || eh.retry_delay.is_some() {
            if f.defaults.retry.is_none() {
                f.defaults.retry = Some(model::RetrySpec {
                    max: eh.max_retries.unwrap_or(engine::retry::DEFAULT_MAX_RETRIES),
                    backoff: eh.retry_delay.map(|d| model::Backoff {
                        initial: d,
                        factor: 2.0,
                        max: None,
                    }),
                    jitter: None,
                });
            }
            eh.max_retries = None;
            eh.retry_delay = None;
        }
        if eh.fallback.is_none() {
            f.error_handling = None;
        }
    }
    f
}

/// What `flow validate` prints for one file (also the answer of `POST /api/flows/validate`).
pub fn validate_output(file: &str, loaded: &Result<Flow, Vec<Diagnostic>>) -> String {
    match loaded {
        Ok(flow) => format!("{file}: ok ({} nodes)\n", flow.nodes.len()),
        Err(diags) => diags.iter().map(|d| format!("{d}\n")).collect(),
    }
}
