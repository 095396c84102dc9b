//! Drawing a flow's DAG for `aicard flow show`: an indented text view by levels, Mermaid
//! (`flowchart TD`) and Graphviz DOT.

use std::fmt::Write;

use super::graph::Dag;
use super::model::{Flow, Node};

/// The output formats of `aicard flow show --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Indented levels.
    Text,
    /// Mermaid `flowchart TD`.
    Mermaid,
    /// Graphviz DOT.
    Dot,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "text" => Ok(Format::Text),
            "mermaid" => Ok(Format::Mermaid),
            "dot" => Ok(Format::Dot),
            other => Err(format!(
                "未知格式 / unknown format `{other}` (use text, mermaid or dot)"
            )),
        }
    }
}

/// Renders `flow` in `format`.
pub fn render(flow: &Flow, format: Format) -> String {
    match format {
        Format::Text => text(flow),
        Format::Mermaid => mermaid(flow),
        Format::Dot => dot(flow),
    }
}

/// Where a node sends its work, for labels.
fn destination(node: &Node) -> String {
    if node.command.is_some() {
        return "hub command".into();
    }
    if let Some(po) = &node.parallel_outputs {
        let targets: Vec<&str> = po.0.iter().map(|(t, _)| t.as_str()).collect();
        return targets.join(", ");
    }
    let to = if node.to.is_empty() {
        "role:worker".to_string()
    } else {
        node.to.0.join(", ")
    };
    match node.workers {
        Some(n) if n > 1 => format!("{n} × {to}"),
        _ => to,
    }
}

/// Extra facts worth showing: for_each, aggregate, when, on_failure.
fn notes(node: &Node) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(fe) = &node.for_each {
        out.push(format!("for_each {}", fe.var));
    }
    if let Some(agg) = node.aggregate {
        let name = serde_json::to_value(agg)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        match &node.judge {
            Some(judge) => out.push(format!("{name} by {judge}")),
            None => out.push(name),
        }
    }
    if let Some(when) = &node.when {
        out.push(format!("when {when}"));
    }
    if let Some(var) = &node.output_var {
        out.push(format!("→ ${var}"));
    }
    if node.on_failure == Some(super::model::OnFailure::Continue) {
        out.push("on_failure continue".into());
    }
    out
}

/// The indented text view: one block per level, each node with its targets and dependencies.
pub fn text(flow: &Flow) -> String {
    let dag = Dag::build(flow);
    let mut out = String::new();
    let _ = write!(out, "flow {}", flow.name);
    if let Some(d) = &flow.description {
        let _ = write!(out, " — {d}");
    }
    out.push('\n');
    if !flow.inputs.is_empty() {
        let names: Vec<&str> = flow.inputs.keys().map(String::as_str).collect();
        let _ = writeln!(out, "inputs: {}", names.join(", "));
    }
    let levels = dag.levels();
    let depth = levels.iter().copied().max().unwrap_or(0);
    for level in 0..=depth {
        let _ = writeln!(out, "level {level}");
        for &i in dag.topo.iter().filter(|&&i| levels[i] == level) {
            let node = &flow.nodes[i];
            let _ = write!(out, "  {}", node.id);
            if let Some(name) = &node.name {
                let _ = write!(out, " ({name})");
            }
            let _ = write!(out, " → {}", destination(node));
            let notes = notes(node);
            if !notes.is_empty() {
                let _ = write!(out, "  [{}]", notes.join("; "));
            }
            if !dag.deps[i].is_empty() {
                let deps: Vec<&str> = dag.deps[i]
                    .iter()
                    .map(|&d| flow.nodes[d].id.as_str())
                    .collect();
                let _ = write!(out, "  ← {}", deps.join(", "));
            }
            out.push('\n');
        }
    }
    out
}

fn label(node: &Node) -> String {
    let mut lines = vec![match &node.name {
        Some(name) => format!("{} · {name}", node.id),
        None => node.id.clone(),
    }];
    lines.push(destination(node));
    lines.extend(notes(node));
    lines.join("\n")
}

/// Mermaid `flowchart TD`; node ids are `n0, n1, …` so any id is safe.
pub fn mermaid(flow: &Flow) -> String {
    let dag = Dag::build(flow);
    let mut out = String::from("flowchart TD\n");
    for (i, node) in flow.nodes.iter().enumerate() {
        let text = label(node).replace('"', "#quot;").replace('\n', "<br/>");
        let (open, close) = if node.command.is_some() {
            ("[[\"", "\"]]")
        } else if node.to.iter().any(|t| t == "master") {
            ("([\"", "\"])")
        } else {
            ("[\"", "\"]")
        };
        let _ = writeln!(out, "    n{i}{open}{text}{close}");
    }
    for (i, deps) in dag.deps.iter().enumerate() {
        for d in deps {
            let _ = writeln!(out, "    n{d} --> n{i}");
        }
    }
    out
}

fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Graphviz DOT (`digraph`), one box per node, edges from dependency to dependent.
pub fn dot(flow: &Flow) -> String {
    let dag = Dag::build(flow);
    let mut out = String::new();
    let _ = writeln!(out, "digraph \"{}\" {{", dot_escape(&flow.name));
    out.push_str("    rankdir=TB;\n    node [shape=box, style=rounded];\n");
    for node in &flow.nodes {
        let shape = if node.command.is_some() {
            ", shape=component"
        } else if node.to.iter().any(|t| t == "master") {
            ", shape=doubleoctagon"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "    \"{}\" [label=\"{}\"{shape}];",
            dot_escape(&node.id),
            dot_escape(&label(node))
        );
    }
    for (i, deps) in dag.deps.iter().enumerate() {
        for &d in deps {
            let _ = writeln!(
                out,
                "    \"{}\" -> \"{}\";",
                dot_escape(&flow.nodes[d].id),
                dot_escape(&flow.nodes[i].id)
            );
        }
    }
    out.push_str("}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow() -> Flow {
        crate::flows::load_str(
            "t.yaml",
            "name: t\nnodes:\n  - id: a\n    name: 评审\n    to: [x, y]\n    prompt: \"say \\\"hi\\\"\"\n  - id: b\n    needs: a\n    command: echo ok\n  - id: c\n    needs: [a, b]\n    to: master\n    prompt: done\n",
        )
        .expect("valid")
    }

    #[test]
    fn text_lists_levels_in_order() {
        let out = text(&flow());
        assert_eq!(
            out,
            "flow t\nlevel 0\n  a (评审) → x, y\nlevel 1\n  b → hub command  ← a\nlevel 2\n  c → master  ← a, b\n"
        );
    }

    #[test]
    fn mermaid_has_every_node_and_edge() {
        let out = mermaid(&flow());
        assert!(out.starts_with("flowchart TD\n"));
        assert!(out.contains("n0[\"a · 评审<br/>x, y\"]"), "{out}");
        assert!(out.contains("n1[[\"b<br/>hub command\"]]"), "{out}");
        assert!(out.contains("n2([\"c<br/>master\"])"), "{out}");
        for edge in ["n0 --> n1", "n0 --> n2", "n1 --> n2"] {
            assert!(out.contains(edge), "{edge} missing in {out}");
        }
    }

    #[test]
    fn dot_escapes_and_links() {
        let out = dot(&flow());
        assert!(out.starts_with("digraph \"t\" {"));
        assert!(out.contains("\"a\" -> \"b\";"));
        assert!(
            out.contains("\"c\" [label=\"c\\nmaster\", shape=doubleoctagon];"),
            "{out}"
        );
        assert!(out.trim_end().ends_with('}'));
    }

    #[test]
    fn formats_parse() {
        assert_eq!("dot".parse::<Format>(), Ok(Format::Dot));
        assert!("svg".parse::<Format>().is_err());
    }
}
