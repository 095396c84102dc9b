//! `manager create NAME from "…"`: an inline body becomes a native flow file (docs/flows.md,
//! "Inline flows"). Pure: text in, YAML out, every step checked now so that a step the flow
//! could not run is refused when it is created, naming its line, never saved to fail later.
//!
//! The body's shape decides the flow's:
//! - steps joined by `->` run in series, each step's output the next one's `$result`;
//! - a body of `to:SITE TEXT` lines (one per line, no arrow: the manual's 跨平台分析) asks every
//!   site at once, and the answer holds every line's answer headed by its target;
//! - a body of command lines with no arrow runs them in series, one per line;
//! - anything else (a line that is neither, `to:` lines mixed with other lines, a `->` step
//!   holding several `to:` lines, the same target twice at once) is refused, naming the line.
//!
//! The command language sits above flows: what this needs of it (does a step parse, which
//! shell lines would it run, which `$var`s does it read) comes in as a [`Grammar`], which
//! `commands::inline` implements.

use std::collections::BTreeMap;

/// What the translation asks of the command language.
pub trait Grammar {
    /// Why `body` (a command without `?<`/`>!`) does not parse, worded for a person.
    fn parse_error(&self, body: &str) -> Option<String>;
    /// The shell lines `body` would run on this hub (none when it does not parse; a remote
    /// `on NODE:` runs under that node's policy and is not counted).
    fn shell_lines(&self, body: &str) -> Vec<String>;
    /// Whether `text` reads `$var`.
    fn reads_var(&self, text: &str, var: &str) -> bool;
    /// The variables `text` reads that it does not set itself.
    fn free_vars(&self, text: &str) -> Vec<String>;
    /// The `$name` / `${name}` reference at byte `i` of `b`: the name's span and the index
    /// after the reference.
    fn var_ref_at(&self, b: &[u8], i: usize) -> Option<((usize, usize), usize)>;
}

/// The YAML of the flow an inline body describes, or what is wrong with it, line by line.
/// `may_run` says whether a shell line could run under the hub's exec policy (checked now,
/// so a step it would refuse is refused when the flow is created).
pub fn flow_yaml(
    grammar: &dyn Grammar,
    name: &str,
    body: &str,
    known: &BTreeMap<String, String>,
    auto_retry: Option<u32>,
    may_run: &dyn Fn(&str) -> Result<(), String>,
) -> Result<String, String> {
    let mut yaml = match parallel_lines(grammar, body)? {
        Some(lines) => parallel_yaml(name, &lines),
        None => {
            let steps = inline_steps(grammar, body)?;
            let refused: Vec<String> = steps
                .iter()
                .enumerate()
                .flat_map(|(i, step)| {
                    let lines = grammar.shell_lines(step);
                    lines.into_iter().filter_map(move |line| {
                        may_run(&line)
                            .err()
                            .map(|e| format!("步骤 / step {} `{line}`: {e}", i + 1))
                    })
                })
                .collect();
            if !refused.is_empty() {
                return Err(refused.join("\n"));
            }
            chain_to_yaml(grammar, name, &steps, known)
        }
    };
    if let Some(n) = auto_retry {
        yaml.push_str(&format!("defaults:\n  retry: {{max: {n}}}\n"));
    }
    Ok(yaml)
}

/// One `to:SITE TEXT` line of a parallel body.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ToLine {
    target: String,
    text: String,
}

/// `Some` when the body is `to:` lines only (no arrow): they run at once. `None` when it is a
/// chain (arrows) or command lines. An error for a body that mixes the two, naming the line.
fn parallel_lines(grammar: &dyn Grammar, body: &str) -> Result<Option<Vec<ToLine>>, String> {
    let body = body.replace("\\$", "$");
    let lines: Vec<(usize, &str)> = body
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty())
        .collect();
    if body.contains("->") {
        // A chain: each step is one line (or one piece); a step of several `to:` lines is
        // neither series nor parallel.
        for piece in body.split("->") {
            let tos = piece
                .lines()
                .filter(|l| l.trim().starts_with("to:"))
                .count();
            if tos > 1 {
                let line = lines
                    .iter()
                    .find(|(_, l)| piece.contains(l) && l.starts_with("to:"))
                    .map_or(0, |(n, _)| *n);
                return Err(format!(
                    "第 {line} 行 / line {line}: 一个 `->` 步骤里有多行 to: / one `->` step holds several `to:` lines: \
                     join every step with `->` to run them in series, or drop the arrows to ask them all at once"
                ));
            }
        }
        return Ok(None);
    }
    let is_to = |l: &str| l.starts_with("to:");
    if !lines.iter().any(|(_, l)| is_to(l)) {
        return Ok(None);
    }
    if let Some((n, l)) = lines.iter().find(|(_, l)| !is_to(l)) {
        return Err(format!(
            "第 {n} 行 / line {n} `{l}`: 这是并行的 to: 行中的一行，但不是 to: 行 / the other lines are parallel `to:SITE TEXT` lines and this one is not: \
             write it as `to:SITE TEXT`, or join every step with `->` to run them in series"
        ));
    }
    let mut out: Vec<ToLine> = Vec::new();
    for (n, l) in lines {
        let rest = &l[3..];
        let (target, text) = rest
            .split_once(char::is_whitespace)
            .map(|(t, x)| (t.trim(), x.trim()))
            .unwrap_or((rest.trim(), ""));
        if target.is_empty() || text.is_empty() {
            return Err(format!(
                "第 {n} 行 / line {n} `{l}`: 需要 to:SITE TEXT / expected `to:SITE TEXT`"
            ));
        }
        if out.iter().any(|o| o.target == target) {
            return Err(format!(
                "第 {n} 行 / line {n}: {target} 出现两次 / `{target}` is asked twice at once: \
                 give each line its own tab, or join the lines with `->` to run them in series"
            ));
        }
        let body = format!("to {target}: {text}");
        if let Some(e) = grammar.parse_error(&body) {
            return Err(format!("第 {n} 行 / line {n} `{l}`: {e}"));
        }
        out.push(ToLine {
            target: target.to_string(),
            text: text.to_string(),
        });
    }
    Ok(Some(out))
}

/// One node asking every target its own line at once (`parallel_outputs`); its answer is
/// every reply headed by its target.
fn parallel_yaml(name: &str, lines: &[ToLine]) -> String {
    let json = |s: &str| serde_json::Value::String(s.to_string());
    let mut out = format!(
        "name: {name}\ndescription: created with manager create (parallel)\nnodes:\n  - id: ask\n    parallel_outputs:\n"
    );
    for l in lines {
        out.push_str(&format!("      {}: {}\n", json(&l.target), json(&l.text)));
    }
    out.push_str("    aggregate: concat\n");
    out
}

/// The steps of an inline `manager create NAME from "…"` body, checked now rather than when
/// the flow runs (docs/commands.md):
/// - steps are split at `->` (or, with no arrow, one per line, as the seed manual writes
///   `to:deepseek 分析…` lines); the manual's `to:SITE TEXT` is `to SITE: TEXT`;
/// - `\$x` (the manual escapes `$` so the outer command does not expand it) is `$x`, and
///   `$result` is the step before's output (`$RESULT`);
/// - what belongs to the step before stays with it, as one chain: `-> else …` (of an `if`),
///   a step reading `$exit_code` (the step before's exit code), and `-> finally …` (which
///   guards every step before it);
/// - every step must parse as a command, and every one that does not is reported.
pub fn inline_steps(grammar: &dyn Grammar, chain: &str) -> Result<Vec<String>, String> {
    let chain = chain.replace("\\$", "$");
    let pieces: Vec<&str> = if chain.contains("->") {
        chain.split("->").collect()
    } else {
        chain.lines().collect()
    };
    let mut steps: Vec<String> = Vec::new();
    for piece in pieces.into_iter().map(str::trim).filter(|s| !s.is_empty()) {
        let step = match piece.strip_prefix("to:") {
            Some(rest) => match rest.split_once(char::is_whitespace) {
                Some((site, text)) => format!("to {site}: {}", text.trim()),
                None => format!("to {rest}:"),
            },
            None => run_scripts(&result_is_result(grammar, piece)),
        };
        let word = step.split_whitespace().next().unwrap_or_default();
        let reads_exit = grammar.reads_var(&step, "exit_code");
        match steps.last_mut() {
            Some(_) if word == "finally" => {
                let body = steps.join(" -> ");
                steps = vec![format!("{body} -> {step}")];
            }
            Some(last) if word == "else" || reads_exit => {
                last.push_str(" -> ");
                last.push_str(&step);
            }
            _ => steps.push(step),
        }
    }
    let problems: Vec<String> = steps
        .iter()
        .enumerate()
        .filter_map(|(i, step)| {
            let body = step
                .strip_prefix("?<")
                .and_then(|b| b.strip_suffix(">!"))
                .unwrap_or(step);
            grammar
                .parse_error(body)
                .map(|e| format!("步骤 / step {} `{step}`: {e}", i + 1))
        })
        .collect();
    if steps.is_empty() {
        return Err("流程没有步骤 / the flow has no steps".into());
    }
    if problems.is_empty() {
        Ok(steps)
    } else {
        Err(problems.join("\n"))
    }
}

/// A bare script name where a command starts (`check_system.py`, `then send_alert.py`): the
/// manual's way to say "run this script", which no shell does by the bare name. It becomes
/// `python NAME.py` (`sh NAME.sh`); the saved flow shows it so.
fn run_scripts(step: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut at_start = true;
    for word in step.split(' ') {
        let runner = match word.rsplit_once('.') {
            Some((stem, "py")) if script_name(stem) => Some("python"),
            Some((stem, "sh")) if script_name(stem) => Some("sh"),
            _ => None,
        };
        match runner {
            Some(r) if at_start => out.push(format!("{r} {word}")),
            _ => out.push(word.to_string()),
        }
        if !word.is_empty() {
            at_start = matches!(word, "then" | "else" | "do" | "finally");
        }
    }
    out.join(" ")
}

fn script_name(stem: &str) -> bool {
    !stem.is_empty()
        && stem
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '-' || c == '.')
}

/// `$result` / `${result}` in an inline step: the step before's output, `$RESULT`.
fn result_is_result(grammar: &dyn Grammar, step: &str) -> String {
    let mut out = String::with_capacity(step.len());
    let b = step.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'$' {
            if let Some(((s, e), next)) = grammar.var_ref_at(b, i) {
                if &step[s..e] == "result" {
                    out.push_str("$RESULT");
                    i = next;
                    continue;
                }
            }
        }
        let ch = step[i..].chars().next().unwrap_or_default();
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

/// The variables an inline flow's steps read that neither the flow nor a chain sets: the
/// person's (`?<set threshold = 5>!`), as inputs whose default is their value when the flow
/// is created (`manager run NAME threshold=7` overrides it), required when they have none.
pub fn step_inputs(
    grammar: &dyn Grammar,
    steps: &[String],
    known: &BTreeMap<String, String>,
) -> Vec<(String, Option<String>)> {
    const SET_BY_THE_RUN: &[&str] = &["RESULT", "exit_code", "run_id", "flow_name"];
    let mut names: Vec<String> = Vec::new();
    for name in steps.iter().flat_map(|s| grammar.free_vars(s)) {
        if !SET_BY_THE_RUN.contains(&name.as_str()) && !names.contains(&name) {
            names.push(name);
        }
    }
    names
        .into_iter()
        .map(|n| {
            let v = known.get(&n).cloned();
            (n, v)
        })
        .collect()
}

/// The flow file of a chain of steps: one node a step, each depending on the one before.
pub fn chain_to_yaml(
    grammar: &dyn Grammar,
    name: &str,
    steps: &[String],
    known: &BTreeMap<String, String>,
) -> String {
    let json = |s: &str| serde_json::Value::String(s.to_string());
    let mut out = format!("name: {name}\ndescription: created with manager create\n");
    let inputs = step_inputs(grammar, steps, known);
    if !inputs.is_empty() {
        out.push_str("inputs:\n");
        for (n, v) in inputs {
            match v {
                Some(v) => out.push_str(&format!("  {n}: {{default: {}}}\n", json(&v))),
                None => out.push_str(&format!("  {n}: {{required: true}}\n")),
            }
        }
    }
    out.push_str("nodes:\n");
    for (i, step) in steps.iter().enumerate() {
        out.push_str(&format!("  - id: step{}\n", i + 1));
        if i > 0 {
            out.push_str(&format!("    depends_on: step{i}\n"));
        }
        out.push_str(&format!("    command: {}\n", json(step)));
    }
    out
}
