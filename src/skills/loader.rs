//! One skill file (`skills/NAME.yaml`): the model, its checks, and FILE:LINE:COL errors.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::is_skill_name;

/// A skill as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillFile {
    pub name: String,
    pub description: String,
    /// A JSON Schema for the arguments (an object schema; absent = no parameters).
    #[serde(default)]
    pub parameters: Option<Value>,
    #[serde(default)]
    pub run: Option<RunSpec>,
    #[serde(default)]
    pub flow: Option<FlowSpec>,
    #[serde(default)]
    pub prompt: Option<PromptSpec>,
    /// An example call shown by `skill help NAME`.
    #[serde(default)]
    pub example: Option<String>,
}

/// `run`: a program and its argv; `{{param}}` in an argument is replaced by the value, and
/// the argument stays one argument whatever the value holds.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    pub program: String,
    #[serde(default)]
    pub argv: Vec<String>,
}

/// `flow`: a flow name and its inputs (`{{param}}` placeholders in the values).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    pub name: String,
    #[serde(default)]
    pub inputs: BTreeMap<String, String>,
}

/// `prompt`: a template (`{{param}}` placeholders) sent to a target (default `role:worker`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptSpec {
    pub template: String,
    #[serde(default, alias = "target")]
    pub to: Option<String>,
}

/// How a skill runs.
#[derive(Debug, Clone)]
pub enum Body {
    Run(RunSpec),
    Flow(FlowSpec),
    Prompt(PromptSpec),
    /// A program (`NAME.py`, `.js`, `.sh`) that runs only while the person's pin matches.
    Program(super::spec::ProgramSpec),
}

/// A loaded, checked skill.
#[derive(Debug, Clone)]
pub struct Skill {
    pub name: String,
    pub description: String,
    pub schema: Value,
    pub validator: std::sync::Arc<jsonschema::Validator>,
    pub body: Body,
    pub example: Option<String>,
    pub file: String,
}

/// A problem with one skill file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillError {
    pub file: String,
    pub line: usize,
    pub col: usize,
    pub message: String,
}

impl std::fmt::Display for SkillError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.col, self.message
        )
    }
}

/// Pulls "line N column M" out of serde-saphyr's message.
fn line_col_in(msg: &str) -> Option<(usize, usize)> {
    let lower = msg.to_lowercase();
    let num_after = |key: &str| -> Option<usize> {
        let i = lower.find(key)? + key.len();
        let digits: String = lower[i..]
            .trim_start_matches([' ', ':'])
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        digits.parse().ok()
    };
    Some((
        num_after("line")?,
        num_after("column").or(num_after("col")).unwrap_or(1),
    ))
}

/// Where a top-level key (`name:`) is written, for errors about its value.
fn key_pos(text: &str, key: &str) -> (usize, usize) {
    for (i, line) in text.lines().enumerate() {
        if let Some(value) = line.strip_prefix(key).and_then(|r| r.strip_prefix(':')) {
            let col = key.len() + 2 + (value.len() - value.trim_start().len());
            return (i + 1, col);
        }
    }
    (1, 1)
}

/// The `{{name}}` placeholders of a string.
pub fn placeholders(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else { break };
        out.push(after[..close].trim());
        rest = &after[close + 2..];
    }
    out
}

/// Parses and checks one skill file.
pub fn parse_skill(file: &str, text: &str) -> Result<Skill, SkillError> {
    let at = |(line, col): (usize, usize), message: String| SkillError {
        file: file.to_string(),
        line,
        col,
        message,
    };
    let options = crate::flows::yaml::saphyr_options(text);
    let raw: SkillFile = serde_saphyr::from_str_with_options(text, options).map_err(|e| {
        let msg = e.to_string();
        at(
            line_col_in(&msg).unwrap_or((1, 1)),
            format!("技能文件无效 / invalid skill file: {msg}"),
        )
    })?;
    if !is_skill_name(&raw.name) {
        return Err(at(
            key_pos(text, "name"),
            format!(
                "技能名无效 / `{}` is not a skill name: use a-z, 0-9, _ and - only",
                raw.name
            ),
        ));
    }
    let schema = raw
        .parameters
        .clone()
        .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}}));
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err(at(
            key_pos(text, "parameters"),
            "parameters 必须是 object 类型的 JSON Schema / parameters must be a JSON Schema with type: object".into(),
        ));
    }
    let validator = jsonschema::validator_for(&schema).map_err(|e| {
        at(
            key_pos(text, "parameters"),
            format!(
                "parameters 不是有效的 JSON Schema / parameters is not a valid JSON Schema: {e}"
            ),
        )
    })?;
    let props: Vec<String> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    let bodies = [raw.run.is_some(), raw.flow.is_some(), raw.prompt.is_some()]
        .iter()
        .filter(|b| **b)
        .count();
    if bodies != 1 {
        return Err(at(
            (1, 1),
            "技能需要且只能有 run、flow、prompt 之一 / a skill needs exactly one of run, flow or prompt".into(),
        ));
    }
    let (body, key, used): (Body, &str, Vec<String>) = if let Some(r) = raw.run.clone() {
        if r.program.trim().is_empty() || r.program.contains("{{") {
            return Err(at(
                key_pos(text, "run"),
                "run.program 必须是固定的程序名 / run.program must be a fixed program name (no placeholders)".into(),
            ));
        }
        let used = r
            .argv
            .iter()
            .flat_map(|a| placeholders(a))
            .map(str::to_string)
            .collect();
        (Body::Run(r), "run", used)
    } else if let Some(f) = raw.flow.clone() {
        if !f
            .name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | '-'))
            || f.name.is_empty()
        {
            return Err(at(
                key_pos(text, "flow"),
                format!("流程名无效 / `{}` is not a flow name", f.name),
            ));
        }
        let used = f
            .inputs
            .values()
            .flat_map(|v| placeholders(v))
            .map(str::to_string)
            .collect();
        (Body::Flow(f), "flow", used)
    } else {
        let p = raw.prompt.clone().expect("one body");
        let used = placeholders(&p.template)
            .into_iter()
            .map(str::to_string)
            .collect();
        (Body::Prompt(p), "prompt", used)
    };
    if let Some(unknown) = used.iter().find(|u| !props.contains(u)) {
        return Err(at(
            key_pos(text, key),
            format!(
                "占位符没有对应参数 / placeholder {{{{{unknown}}}}} names no parameter (parameters: {})",
                if props.is_empty() { "none".into() } else { props.join(", ") }
            ),
        ));
    }
    Ok(Skill {
        name: raw.name,
        description: raw.description,
        schema,
        validator: std::sync::Arc::new(validator),
        body,
        example: raw.example,
        file: file.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_good_prompt_skill() {
        let s = parse_skill(
            "s.yaml",
            "name: sum\ndescription: d\nparameters:\n  type: object\n  properties:\n    text: {type: string}\n  required: [text]\nprompt:\n  template: 'Sum: {{text}}'\n  to: kimi\n",
        )
        .unwrap();
        assert_eq!(s.name, "sum");
        assert!(matches!(s.body, Body::Prompt(_)));
    }

    #[test]
    fn errors_carry_line_and_column() {
        let e = parse_skill("b.yaml", "name: x\ndescription: d\nrun: [unclosed\n").unwrap_err();
        assert_eq!(e.file, "b.yaml");
        assert!(e.line >= 3, "{e}");
        let e = parse_skill(
            "b.yaml",
            "description: d\nname: Bad/Name\nprompt: {template: x}\n",
        )
        .unwrap_err();
        assert_eq!((e.line, e.col), (2, 7), "{e}");
        let e = parse_skill(
            "b.yaml",
            "name: x\ndescription: d\nprompt: {template: '{{nope}}'}\n",
        )
        .unwrap_err();
        assert!(e.message.contains("nope"), "{e}");
        let e = parse_skill(
            "b.yaml",
            "name: x\ndescription: d\nrun: {program: echo}\nprompt: {template: t}\n",
        )
        .unwrap_err();
        assert!(e.message.contains("exactly one"), "{e}");
        let e = parse_skill(
            "b.yaml",
            "name: x\ndescription: d\nrun: {program: '{{p}}'}\n",
        )
        .unwrap_err();
        assert!(e.message.contains("program"), "{e}");
        let e = parse_skill(
            "b.yaml",
            "name: x\ndescription: d\nparameters: {type: object, properties: {n: {type: 12}}}\nprompt: {template: t}\n",
        )
        .unwrap_err();
        assert_eq!(e.line, 3, "{e}");
    }
}
