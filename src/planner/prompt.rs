//! The planning prompt: the flow format (summarised from the flow JSON Schema, so it never
//! drifts from the loader), example flows, what is online now, and the goal; and the repair
//! prompt that carries each diagnostic with its context.

use std::fmt::Write as _;

use serde_json::Value;

/// Example flows shown to the planner (the committed ones, embedded).
const EXAMPLES: &[(&str, &str)] = &[
    ("chain.yaml", include_str!("../../flows/chain.yaml")),
    (
        "cross-review.yaml",
        include_str!("../../flows/cross-review.yaml"),
    ),
];

/// One tab online now, as the planner is told about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnlineTab {
    pub site: String,
    pub label: String,
    pub role: String,
    pub group: Option<String>,
    /// The decision engine's word for it (`ready`, `cooling 20s`, `parked: captcha`, …).
    pub health: String,
}

/// What the planner may use: the tabs online now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Catalog {
    pub tabs: Vec<OnlineTab>,
}

impl Catalog {
    /// Every name a `to:` may use right now, sorted: sites, labels, roles, groups, `auto`.
    pub fn targets(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for t in &self.tabs {
            out.push(t.site.clone());
            out.push(t.label.clone());
            out.push(format!("role:{}", t.role));
            if let Some(g) = &t.group {
                out.push(format!("group:{g}"));
            }
        }
        out.push("master".into());
        if self.tabs.iter().any(|t| t.role == "worker") {
            out.push("auto".into());
        }
        out.sort();
        out.dedup();
        out
    }

    /// A stable text of the catalog for the plan cache: who is online, not their health.
    pub fn fingerprint(&self) -> String {
        let mut lines: Vec<String> = self
            .tabs
            .iter()
            .map(|t| {
                format!(
                    "{}|{}|{}|{}",
                    t.site,
                    t.label,
                    t.role,
                    t.group.as_deref().unwrap_or("")
                )
            })
            .collect();
        lines.sort();
        lines.join("\n")
    }
}

/// The flow format in a few lines per field, generated from the JSON Schema.
pub fn format_summary(schema: &Value) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Top-level fields (required: name, nodes):");
    fields(&mut out, schema, schema);
    if let Some(node) = schema.pointer("/$defs/Node") {
        let _ = writeln!(out, "Fields of each item of `nodes` (required: id):");
        fields(&mut out, schema, node);
    }
    out
}

fn fields(out: &mut String, root: &Value, obj: &Value) {
    let required: Vec<&str> = obj["required"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(props) = obj["properties"].as_object() else {
        return;
    };
    for (name, p) in props {
        let desc = p["description"]
            .as_str()
            .or_else(|| resolve(root, p).and_then(|d| d["description"].as_str()))
            .unwrap_or("")
            .lines()
            .next()
            .unwrap_or("");
        let req = if required.contains(&name.as_str()) {
            " (required)"
        } else {
            ""
        };
        let _ = writeln!(out, "  - {name}{req}: {desc}");
    }
}

fn resolve<'a>(root: &'a Value, p: &'a Value) -> Option<&'a Value> {
    let r = p["$ref"].as_str()?.strip_prefix('#')?;
    root.pointer(r)
}

/// The first prompt for a goal. `previous` (a draft's YAML) and `feedback` re-plan it.
pub fn planning(goal: &str, catalog: &Catalog, previous: Option<(&str, &str)>) -> String {
    let schema: Value = serde_json::from_str(&crate::flows::schema_json()).unwrap_or_default();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "You are the planner of AIcard, a hub that runs YAML flows over browser chat tabs.\n\
         Write ONE flow that reaches the goal below. Answer with exactly one fenced ```yaml block \
         holding the flow, and nothing else inside the fence.\n\
         你是 AIcard 的规划者：为下面的目标写一个流程，只回答一个 ```yaml 代码块。\n"
    );
    let _ = writeln!(out, "## Flow format (from the JSON Schema)\n");
    out.push_str(&format_summary(&schema));
    let _ = writeln!(
        out,
        "\nRules: node ids are [A-Za-z0-9_-]+ and unique; `depends_on` names earlier nodes (no \
         cycles); a prompt reads inputs as $name and upstream outputs as ${{node.output}} (a \
         fanned-out node: ${{node.outputs}}); `to: master` delivers the final text to the person; \
         `to: auto` (or `auto:SITE,SITE`) lets the hub pick the best worker; use only the \
         targets listed under \"Online now\". Do not add superfluous steps.\n"
    );
    let _ = writeln!(out, "## Examples\n");
    for (name, text) in EXAMPLES {
        let _ = writeln!(out, "{name}:\n```yaml\n{}```\n", strip_comments(text));
    }
    let _ = writeln!(out, "## Online now / 当前在线\n");
    if catalog.tabs.is_empty() {
        let _ = writeln!(out, "(no worker tab is online)");
    }
    for t in &catalog.tabs {
        let _ = writeln!(
            out,
            "- site `{}`, label `{}`, role:{}{}, health: {}",
            t.site,
            t.label,
            t.role,
            t.group
                .as_deref()
                .map(|g| format!(", group:{g}"))
                .unwrap_or_default(),
            t.health
        );
    }
    let _ = writeln!(out, "Valid targets: {}\n", catalog.targets().join(", "));
    if let Some((yaml, feedback)) = previous {
        let _ = writeln!(
            out,
            "## Previous plan\n```yaml\n{}\n```\n\n## Feedback on it / 修改意见\n{feedback}\n",
            yaml.trim_end()
        );
    }
    let _ = write!(out, "## Goal / 目标\n{goal}\n");
    out
}

/// The repair prompt: each diagnostic as `LINE:COL: message` with ±3 lines of context.
pub fn repair(yaml: &str, diagnostics: &[String], round: usize, max: usize) -> String {
    format!(
        "修复 / REPAIR (round {round} of {max}). Your flow is not valid. Fix exactly these \
         problems, change nothing else, and answer again with the whole flow in one ```yaml \
         block.\n\n{}\n\nYour flow was:\n```yaml\n{}\n```\n",
        diagnostics.join("\n\n"),
        yaml.trim_end()
    )
}

fn strip_comments(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_follows_the_schema() {
        let schema: Value = serde_json::from_str(&crate::flows::schema_json()).unwrap();
        let s = format_summary(&schema);
        // Every top-level and node field of the schema is named, required ones marked.
        for f in schema["properties"].as_object().unwrap().keys() {
            assert!(s.contains(&format!("  - {f}")), "{f} missing:\n{s}");
        }
        for f in schema["$defs"]["Node"]["properties"]
            .as_object()
            .unwrap()
            .keys()
        {
            assert!(
                s.contains(&format!("  - {f}")),
                "node field {f} missing:\n{s}"
            );
        }
        assert!(s.contains("  - name (required)"));
        assert!(s.contains("  - id (required)"));
    }

    #[test]
    fn the_prompt_names_what_is_online_and_the_goal() {
        let catalog = Catalog {
            tabs: vec![OnlineTab {
                site: "deepseek".into(),
                label: "ds-1".into(),
                role: "worker".into(),
                group: Some("team".into()),
                health: "ready".into(),
            }],
        };
        let p = planning("summarise the news", &catalog, None);
        assert!(p.contains("label `ds-1`"), "{p}");
        assert!(p.contains("Valid targets: auto, deepseek, ds-1, group:team, master, role:worker"));
        assert!(p.contains("## Goal / 目标\nsummarise the news"));
        assert!(p.contains("name: cross-review"));
        assert!(!p.contains("## Previous plan"));
        let p = planning("x", &catalog, Some(("name: a", "use kimi")));
        assert!(p.contains("## Previous plan\n```yaml\nname: a\n```"));
        assert!(p.contains("use kimi"));
    }
}
