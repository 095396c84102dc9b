//! Drawing a flow's DAG for `aicard flow show`: an indented text view by levels, Mermaid
//! (`flowchart TD`) and Graphviz DOT.

use std::fmt::Write;

use super::graph::Dag;
use super::model::{fallback_node, Flow, Node};

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
    let handler = fallback_node(flow).and_then(|id| dag.index.get(id).copied());
    let depth = (0..flow.nodes.len())
        .filter(|&i| Some(i) != handler)
        .map(|i| levels[i])
        .max()
        .unwrap_or(0);
    for level in 0..=depth + usize::from(handler.is_some()) {
        let in_level: Vec<usize> = if level > depth {
            let _ = writeln!(out, "失败时 / on failure (error_handling.fallback)");
            handler.into_iter().collect()
        } else {
            let _ = writeln!(out, "level {level}");
            dag.topo
                .iter()
                .copied()
                .filter(|&i| levels[i] == level && Some(i) != handler)
                .collect()
        };
        for i in in_level {
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

/// A node's label, with "on failure" for the fallback node.
fn label_in(flow: &Flow, node: &Node) -> String {
    if fallback_node(flow) == Some(node.id.as_str()) {
        format!("{}\n失败时 / on failure", label(node))
    } else {
        label(node)
    }
}

/// Mermaid `flowchart TD`; node ids are `n0, n1, …` so any id is safe.
pub fn mermaid(flow: &Flow) -> String {
    let dag = Dag::build(flow);
    let mut out = String::from("flowchart TD\n");
    for (i, node) in flow.nodes.iter().enumerate() {
        let text = label_in(flow, node)
            .replace('"', "#quot;")
            .replace('\n', "<br/>");
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
    if let Some(&h) = fallback_node(flow).and_then(|id| dag.index.get(id)) {
        let _ = writeln!(out, "    style n{h} stroke-dasharray: 5 5");
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
        let mut shape = if node.command.is_some() {
            ", shape=component".to_string()
        } else if node.to.iter().any(|t| t == "master") {
            ", shape=doubleoctagon".to_string()
        } else {
            String::new()
        };
        if fallback_node(flow) == Some(node.id.as_str()) {
            shape.push_str(", style=\"rounded,dashed\"");
        }
        let _ = writeln!(
            out,
            "    \"{}\" [label=\"{}\"{shape}];",
            dot_escape(&node.id),
            dot_escape(&label_in(flow, node))
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
    fn the_fallback_is_drawn_apart_as_what_runs_on_failure() {
        let f = crate::flows::load_str(
            "f.yaml",
            "name: f\nerror_handling: {fallback: 发送告警消息}\nnodes:\n  - id: a\n    prompt: hi\n  - id: b\n    needs: a\n    prompt: x\n",
        )
        .expect("valid");
        let t = text(&f);
        assert!(
            t.ends_with("level 1\n  b → role:worker  ← a\n失败时 / on failure (error_handling.fallback)\n  fallback (告警 / alert) → master\n"),
            "{t}"
        );
        assert!(mermaid(&f).contains("style n2 stroke-dasharray: 5 5"));
        assert!(dot(&f).contains("style=\"rounded,dashed\""));
    }

    #[test]
    fn formats_parse() {
        assert_eq!("dot".parse::<Format>(), Ok(Format::Dot));
        assert!("svg".parse::<Format>().is_err());
    }
}
