//! A planner's answer → a flow, or located problems: the fenced YAML block is cut out,
//! validated exactly as `aicard flow validate` does, and every target must name a tab that is
//! online now. Problems are rendered as `LINE:COL: message` with ±3 lines of context.

use crate::flows::yaml::{self, Located, Pos};
use crate::flows::{Diagnostic, Flow};

/// Lines of context shown on each side of a problem.
pub const CONTEXT_LINES: usize = 3;

/// One problem in a plan.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PlanProblem {
    pub line: usize,
    pub col: usize,
    pub message: String,
}

impl PlanProblem {
    fn at(pos: Pos, message: String) -> PlanProblem {
        PlanProblem {
            line: pos.line,
            col: pos.col,
            message,
        }
    }

    /// `LINE:COL: message` and the lines around it, the problem's line marked `>`.
    pub fn with_context(&self, text: &str) -> String {
        let lines: Vec<&str> = text.lines().collect();
        let mut out = format!("{}:{}: {}", self.line, self.col, self.message);
        if lines.is_empty() {
            return out;
        }
        let at = self.line.clamp(1, lines.len());
        let from = at.saturating_sub(CONTEXT_LINES).max(1);
        let to = (at + CONTEXT_LINES).min(lines.len());
        let width = to.to_string().len();
        for n in from..=to {
            let mark = if n == at { '>' } else { ' ' };
            out.push_str(&format!("\n{mark} {n:>width$} | {}", lines[n - 1]));
            if n == at {
                let pad = " ".repeat(self.col.saturating_sub(1));
                out.push_str(&format!("\n  {:>width$} | {pad}^", ""));
            }
        }
        out
    }
}

/// The YAML inside the answer's one fenced ```yaml block.
pub fn extract(answer: &str) -> Result<String, PlanProblem> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in answer.lines() {
        let t = line.trim();
        match current.as_mut() {
            None => {
                if let Some(lang) = t.strip_prefix("```") {
                    let lang = lang.trim().to_ascii_lowercase();
                    if lang == "yaml" || lang == "yml" {
                        current = Some(Vec::new());
                    }
                }
            }
            Some(lines) => {
                if t.starts_with("```") {
                    blocks.push(lines.join("\n"));
                    current = None;
                } else {
                    lines.push(line);
                }
            }
        }
    }
    if let Some(lines) = current {
        // An unclosed fence at the end of the answer still holds the flow.
        blocks.push(lines.join("\n"));
    }
    let problem = |message: &str| PlanProblem {
        line: 1,
        col: 1,
        message: message.to_string(),
    };
    match blocks.len() {
        1 => Ok(format!("{}\n", blocks.remove(0).trim_end())),
        0 => Err(problem(
            "没有 ```yaml 代码块 / no fenced ```yaml block in the answer; answer with exactly one",
        )),
        _ => Err(problem(
            "多于一个 ```yaml 代码块 / more than one fenced ```yaml block; answer with exactly one",
        )),
    }
}

/// Validates plan text: the flow loader's checks, then every target against `online`
/// (true when a name reaches a tab now). `online_names` lists what is online, for messages.
pub fn check(
    text: &str,
    online: &(dyn Fn(&str) -> bool + Sync),
    online_names: &[String],
) -> Result<Flow, Vec<PlanProblem>> {
    let loaded = crate::flows::load_str("plan.yaml", text);
    let mut problems: Vec<PlanProblem> = match &loaded {
        Ok(_) => Vec::new(),
        Err(diags) => diags.iter().map(from_diag).collect(),
    };
    if let Ok(tree) = yaml::parse(text) {
        for (pos, target) in targets(&tree) {
            if !online(&target) {
                problems.push(PlanProblem::at(
                    pos,
                    format!(
                        "E_TARGET_UNKNOWN 未知目标 / no tab online answers to `{target}`; online: {}",
                        if online_names.is_empty() {
                            "(none)".to_string()
                        } else {
                            online_names.join(", ")
                        }
                    ),
                ));
            }
        }
    }
    problems.sort();
    problems.dedup();
    match loaded {
        Ok(flow) if problems.is_empty() => Ok(flow),
        _ => Err(problems),
    }
}

fn from_diag(d: &Diagnostic) -> PlanProblem {
    PlanProblem {
        line: d.line,
        col: d.col,
        message: d.message.clone(),
    }
}

/// Every target named in the flow with its position: `to`, `judge`, `parallel_outputs` keys.
fn targets(tree: &Located) -> Vec<(Pos, String)> {
    let mut out = Vec::new();
    let mut push = |v: &Located| {
        let items: Vec<&Located> = match &v.kind {
            yaml::Kind::Seq(items) => items.iter().collect(),
            _ => vec![v],
        };
        for item in items {
            if let Some(s) = item.as_str() {
                out.push((item.pos, s.trim().to_string()));
            }
        }
    };
    for node in tree.get("nodes").map(Located::items).unwrap_or_default() {
        for field in ["to", "judge"] {
            if let Some(v) = node.get(field) {
                push(v);
            }
        }
    }
    if let Some(yaml::Kind::Map(entries)) = tree.get("parallel_outputs").map(|p| &p.kind) {
        for (_, per_node) in entries {
            if let yaml::Kind::Map(targets) = &per_node.kind {
                for (k, _) in targets {
                    push(k);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "name: p\nnodes:\n  - id: a\n    to: deepseek\n    prompt: hi\n  - id: b\n    depends_on: a\n    to: master\n    prompt: \"${a.output}\"\n";

    fn online(t: &str) -> bool {
        matches!(t, "deepseek" | "kimi" | "master")
    }

    #[test]
    fn the_one_fenced_block_is_the_plan() {
        let answer = format!("Here is the plan:\n```yaml\n{GOOD}```\nEnjoy.");
        assert_eq!(extract(&answer).unwrap(), GOOD);
        assert_eq!(extract(&format!("```YML\n{GOOD}")).unwrap(), GOOD);
        assert!(extract("no block")
            .unwrap_err()
            .message
            .contains("no fenced"));
        let two = format!("```yaml\n{GOOD}```\n```yaml\n{GOOD}```");
        assert!(extract(&two).unwrap_err().message.contains("more than one"));
    }

    #[test]
    fn an_unknown_target_lists_what_is_online() {
        let bad = GOOD.replace("to: deepseek", "to: [gpt9, kimi]");
        let names = vec!["deepseek".to_string(), "kimi".to_string()];
        let problems = check(&bad, &online, &names).unwrap_err();
        assert_eq!(problems.len(), 1, "{problems:?}");
        let p = &problems[0];
        assert_eq!((p.line, p.col), (4, 10));
        assert!(
            p.message
                .contains("E_TARGET_UNKNOWN 未知目标 / no tab online answers to `gpt9`; online: deepseek, kimi"),
            "{}",
            p.message
        );
        assert!(check(GOOD, &online, &names).is_ok());
    }

    #[test]
    fn validator_errors_come_with_three_lines_of_context() {
        let bad = GOOD.replace("depends_on: a", "depends_on: zz");
        let problems = check(&bad, &online, &[]).unwrap_err();
        let text = problems[0].with_context(&bad);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("7:17: "), "{text}");
        assert!(lines[0].contains("zz"), "{text}");
        assert_eq!(lines[1], "  4 |     to: deepseek");
        assert!(lines.contains(&"> 7 |     depends_on: zz"), "{text}");
        assert!(lines.contains(&"    |                 ^"), "{text}");
        assert_eq!(*lines.last().unwrap(), "  9 |     prompt: \"${a.output}\"");
    }
}
