//! From `key=value` words to a validated JSON object, and from there to what runs.

use serde_json::{Map, Value};

use super::loader::{Body, Skill};

/// What a skill call turns into; the interpreter performs it (with its permission checks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkillPlan {
    /// Run this argv through the exec policy (never a shell).
    Run(Vec<String>),
    /// Run the flow with these inputs.
    Flow {
        name: String,
        inputs: Vec<(String, String)>,
    },
    /// Send this prompt to this target.
    Prompt { to: String, text: String },
    /// Run this program skill (if enabled and allowed) with `input` as JSON on stdin.
    Program {
        name: String,
        spec: super::program::ProgramSpec,
        input: Value,
    },
}

impl PartialEq for super::program::ProgramSpec {
    fn eq(&self, other: &Self) -> bool {
        self.sha256 == other.sha256
    }
}

impl Eq for super::program::ProgramSpec {}

/// The text a value takes in a placeholder: a string as is, anything else as JSON.
fn as_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Replaces every `{{name}}` once; the inserted values are never scanned again.
pub fn fill(template: &str, args: &Map<String, Value>) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else { break };
        out.push_str(&rest[..open]);
        let key = after[..close].trim();
        if let Some(v) = args.get(key) {
            out.push_str(&as_text(v));
        }
        rest = &after[close + 2..];
    }
    out.push_str(rest);
    out
}

/// A written value, typed by the property's schema (`integer`, `number`, `boolean`,
/// `array`, `object`); left a string when it does not parse, so the validator names it.
fn typed(raw: &str, prop: Option<&Value>) -> Value {
    let ty = prop.and_then(|p| p.get("type")).and_then(Value::as_str);
    let parsed = match ty {
        Some("integer") => raw.parse::<i64>().ok().map(Value::from),
        Some("number") => raw.parse::<f64>().ok().map(Value::from),
        Some("boolean") => match raw {
            "true" | "yes" | "1" => Some(Value::Bool(true)),
            "false" | "no" | "0" => Some(Value::Bool(false)),
            _ => None,
        },
        Some("array") => serde_json::from_str::<Value>(raw)
            .ok()
            .filter(Value::is_array)
            .or_else(|| {
                Some(Value::Array(
                    raw.split(',')
                        .map(|s| s.trim())
                        .filter(|s| !s.is_empty())
                        .map(|s| Value::String(s.to_string()))
                        .collect(),
                ))
            }),
        Some("object") => serde_json::from_str::<Value>(raw)
            .ok()
            .filter(Value::is_object),
        _ => None,
    };
    parsed.unwrap_or_else(|| Value::String(raw.to_string()))
}

/// The field a validation error is about: its instance path, or the property a `required`
/// error names.
fn field_of(e: &jsonschema::ValidationError<'_>) -> String {
    let path = e.instance_path().to_string();
    let path = path.trim_start_matches('/');
    if !path.is_empty() {
        return path.replace('/', ".");
    }
    let msg = e.to_string();
    match msg.split('"').nth(1) {
        Some(name) if msg.contains("required") => name.to_string(),
        _ => "(arguments)".into(),
    }
}

/// Checks the arguments against the skill's schema (defaults filled in) and plans the call.
/// Every error names its field.
pub fn prepare(skill: &Skill, args: &[(String, String)]) -> Result<SkillPlan, Vec<String>> {
    let props = skill.schema.get("properties").and_then(Value::as_object);
    let mut obj = Map::new();
    let mut errors = Vec::new();
    for (k, v) in args {
        let prop = props.and_then(|p| p.get(k));
        if prop.is_none() {
            let known: Vec<&str> = props
                .map(|p| p.keys().map(String::as_str).collect())
                .unwrap_or_default();
            errors.push(format!(
                "参数 `{k}`: 未知参数 / unknown parameter `{k}`; {} takes: {}",
                skill.name,
                if known.is_empty() {
                    "no parameters".to_string()
                } else {
                    known.join(", ")
                }
            ));
            continue;
        }
        obj.insert(k.clone(), typed(v, prop));
    }
    if let Some(props) = props {
        for (k, p) in props {
            if let (false, Some(d)) = (obj.contains_key(k), p.get("default")) {
                obj.insert(k.clone(), d.clone());
            }
        }
    }
    let instance = Value::Object(obj);
    for e in skill.validator.iter_errors(&instance) {
        let field = field_of(&e);
        errors.push(format!("参数 `{field}`: {e}"));
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let Value::Object(obj) = instance else {
        unreachable!("built as an object")
    };
    Ok(match &skill.body {
        Body::Run(r) => {
            let mut argv = vec![r.program.clone()];
            argv.extend(r.argv.iter().map(|a| fill(a, &obj)));
            SkillPlan::Run(argv)
        }
        Body::Flow(f) => SkillPlan::Flow {
            name: f.name.clone(),
            inputs: f
                .inputs
                .iter()
                .map(|(k, v)| (k.clone(), fill(v, &obj)))
                .collect(),
        },
        Body::Prompt(p) => SkillPlan::Prompt {
            to: p.to.clone().unwrap_or_else(|| "role:worker".into()),
            text: fill(&p.template, &obj),
        },
        Body::Program(p) => SkillPlan::Program {
            name: skill.name.clone(),
            spec: p.clone(),
            input: Value::Object(obj),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skills::loader::parse_skill;

    fn skill() -> Skill {
        parse_skill(
            "s.yaml",
            "name: count\ndescription: d\nparameters:\n  type: object\n  properties:\n    text: {type: string, minLength: 1}\n    n: {type: integer, minimum: 1, default: 3}\n  required: [text]\nrun:\n  program: echo\n  argv: ['-n', '{{n}}:{{text}}']\n",
        )
        .unwrap()
    }

    #[test]
    fn values_are_typed_defaulted_and_kept_as_one_argument() {
        let a = prepare(&skill(), &[("text".into(), "; rm -rf / $(x) 'q\"".into())]).unwrap();
        assert_eq!(
            a,
            SkillPlan::Run(vec![
                "echo".into(),
                "-n".into(),
                "3:; rm -rf / $(x) 'q\"".into()
            ])
        );
    }

    #[test]
    fn errors_name_the_field() {
        let e = prepare(&skill(), &[("n".into(), "0".into())]).unwrap_err();
        assert!(e.iter().any(|m| m.starts_with("参数 `text`")), "{e:?}");
        assert!(e.iter().any(|m| m.starts_with("参数 `n`")), "{e:?}");
        let e = prepare(
            &skill(),
            &[("text".into(), "x".into()), ("n".into(), "many".into())],
        )
        .unwrap_err();
        assert!(e[0].starts_with("参数 `n`"), "{e:?}");
        let e = prepare(
            &skill(),
            &[("text".into(), "x".into()), ("bogus".into(), "1".into())],
        )
        .unwrap_err();
        assert!(e[0].contains("unknown parameter `bogus`"), "{e:?}");
    }

    #[test]
    fn fill_inserts_once() {
        let mut m = Map::new();
        m.insert("a".into(), Value::String("{{b}}".into()));
        m.insert("b".into(), Value::String("no".into()));
        assert_eq!(fill("x{{a}}y{{ b }}", &m), "x{{b}}yno");
    }
}
