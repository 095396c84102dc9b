//! Prompt templates and `when` conditions: the seed's `$x` / `${x}` / `${node.output}` syntax is
//! rewritten to minijinja lookups, and every template's variable references are listed so that
//! validation can check them and rendering can build a small context.
//!
//! Variables are data: values are inserted by minijinja and never rendered or parsed again, so a
//! reply containing `{{ }}` or `?<…>!` stays literal text.

use std::collections::{BTreeSet, HashSet};

use minijinja::Environment;

/// What a `${name.field}` reference reads from a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Field {
    /// `${node.output}`: the node's (aggregated) output.
    Output,
    /// `${node.outputs}`: every item's reply, in item order.
    Outputs,
}

/// One variable a template or expression reads.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Ref {
    /// A plain name: an input, a node id, an `output_var`, the loop variable, `RESULT`.
    Var(String),
    /// A node's output(s): `${node.output}`, `${node.outputs}`, `nodes.node.output`.
    Node(String, Field),
}

impl Ref {
    /// The name the reference starts with (the node id for [`Ref::Node`]).
    pub fn name(&self) -> &str {
        match self {
            Ref::Var(n) | Ref::Node(n, _) => n,
        }
    }
}

/// Whether seed references become `{{ … }}` (prompt templates) or bare lookups (conditions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A template: `$x` → `{{ vars["x"] }}`.
    Template,
    /// An expression: `$x` → `vars["x"]`.
    Expression,
}

/// The result of rewriting a template or expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Converted {
    /// minijinja source.
    pub source: String,
    /// The seed references found.
    pub refs: Vec<Ref>,
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn is_id_char(c: char) -> bool {
    is_name_char(c) || c == '-'
}

/// Rewrites seed references in `text` to minijinja lookups, leaving `{{ }}`, `{% %}`, `{# #}`
/// blocks, `$(…)` and lone `$` untouched.
pub fn convert(text: &str, mode: Mode) -> Converted {
    let mut source = String::with_capacity(text.len() + 16);
    let mut refs = Vec::new();
    let mut rest = text;
    while let Some(idx) = rest.find(['$', '{']) {
        source.push_str(&rest[..idx]);
        rest = &rest[idx..];
        if mode == Mode::Template {
            if let Some(close) = jinja_block_end(rest) {
                source.push_str(&rest[..close]);
                rest = &rest[close..];
                continue;
            }
        }
        match parse_seed_ref(rest) {
            Some((reference, len)) => {
                let lookup = lookup_expr(&reference);
                match mode {
                    Mode::Template => {
                        source.push_str("{{ ");
                        source.push_str(&lookup);
                        source.push_str(" }}");
                    }
                    Mode::Expression => source.push_str(&lookup),
                }
                refs.push(reference);
                rest = &rest[len..];
            }
            None => {
                let ch = rest.chars().next().map_or(1, char::len_utf8);
                source.push_str(&rest[..ch]);
                rest = &rest[ch..];
            }
        }
    }
    source.push_str(rest);
    Converted { source, refs }
}

/// If `text` starts a minijinja block, the byte length of the whole block.
fn jinja_block_end(text: &str) -> Option<usize> {
    let close = match text.get(..2)? {
        "{{" => "}}",
        "{%" => "%}",
        "{#" => "#}",
        _ => return None,
    };
    text[2..].find(close).map(|i| i + 4)
}

/// Parses `$name`, `${name}`, `${node.output}`, `${node.outputs}` at the start of `text`.
fn parse_seed_ref(text: &str) -> Option<(Ref, usize)> {
    let body = text.strip_prefix('$')?;
    if let Some(inner) = body.strip_prefix('{') {
        let end = inner.find('}')?;
        let content = inner[..end].trim();
        let (name, field) = match content.split_once('.') {
            Some((name, "output")) => (name, Some(Field::Output)),
            Some((name, "outputs")) => (name, Some(Field::Outputs)),
            Some(_) => return None,
            None => (content, None),
        };
        if name.is_empty() || !name.chars().all(is_id_char) {
            return None;
        }
        let reference = match field {
            Some(f) => Ref::Node(name.to_string(), f),
            None => Ref::Var(name.to_string()),
        };
        return Some((reference, end + 3));
    }
    let first = body.chars().next()?;
    if !is_name_start(first) {
        return None;
    }
    let len = body.find(|c: char| !is_name_char(c)).unwrap_or(body.len());
    Some((Ref::Var(body[..len].to_string()), len + 1))
}

fn lookup_expr(reference: &Ref) -> String {
    match reference {
        Ref::Var(name) => format!("vars[{}]", quote(name)),
        Ref::Node(name, Field::Output) => format!("nodes[{}].output", quote(name)),
        Ref::Node(name, Field::Outputs) => {
            format!("nodes[{}].outputs | join(\"\\n\\n\")", quote(name))
        }
    }
}

fn quote(name: &str) -> String {
    // Names are restricted to [A-Za-z0-9_-], so no escaping is needed.
    format!("\"{name}\"")
}

/// Builds the environment templates are compiled in: no HTML escaping, newlines kept,
/// undefined values render empty.
pub fn environment<'a>() -> Environment<'a> {
    let mut env = Environment::new();
    env.set_keep_trailing_newline(true);
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Lenient);
    env
}

/// Evaluates condition `text` (a node's `when` language: `$X == 'y'`) over `vars`, each
/// readable as `$NAME` or `NAME`. Undefined names are empty.
pub fn eval_condition(
    text: &str,
    vars: &std::collections::BTreeMap<String, String>,
) -> Result<bool, String> {
    let converted = convert(text, Mode::Expression);
    let env = environment();
    let expr = env
        .compile_expression(&converted.source)
        .map_err(|e| describe(&e))?;
    let mut ctx: std::collections::BTreeMap<String, minijinja::Value> = vars
        .iter()
        .map(|(k, v)| (k.clone(), minijinja::Value::from(v.as_str())))
        .collect();
    ctx.insert("vars".into(), minijinja::Value::from_serialize(vars));
    expr.eval(minijinja::Value::from_serialize(&ctx))
        .map(|v| v.is_true())
        .map_err(|e| describe(&e))
}

/// Every variable a converted template or expression reads: the seed references plus the
/// names minijinja finds (`x`, `nodes.x.output`, `vars.x`).
pub fn references<'s>(
    env: &Environment<'s>,
    converted: &'s Converted,
    mode: Mode,
) -> Result<BTreeSet<Ref>, String> {
    let names = match mode {
        Mode::Template => env
            .template_from_str(&converted.source)
            .map_err(|e| describe(&e))?
            .undeclared_variables(true),
        Mode::Expression => env
            .compile_expression(&converted.source)
            .map_err(|e| describe(&e))?
            .undeclared_variables(true),
    };
    Ok(classify(&converted.refs, names))
}

/// The heads `x` of `x.output` / `x.outputs` in a converted template or expression: in
/// minijinja syntax a node's output is `nodes.x.output` (`x` alone is its text), so these
/// render empty. The validator names them with the spelling that works.
pub fn bare_output_reads<'s>(
    env: &Environment<'s>,
    converted: &'s Converted,
    mode: Mode,
) -> Vec<String> {
    let names = match mode {
        Mode::Template => env
            .template_from_str(&converted.source)
            .map(|t| t.undeclared_variables(true))
            .unwrap_or_default(),
        Mode::Expression => env
            .compile_expression(&converted.source)
            .map(|e| e.undeclared_variables(true))
            .unwrap_or_default(),
    };
    let mut heads: Vec<String> = names
        .iter()
        .filter_map(|n| {
            let mut parts = n.split('.');
            let head = parts.next()?;
            let field = parts.next()?;
            (matches!(field, "output" | "outputs") && !matches!(head, "nodes" | "vars" | "loop"))
                .then(|| head.to_string())
        })
        .collect();
    heads.sort();
    heads.dedup();
    heads
}

/// Merges seed references with the dotted names minijinja reports (`x`, `nodes.x.outputs`,
/// `vars.x`) into one set of [`Ref`]s.
pub fn classify(seed_refs: &[Ref], names: HashSet<String>) -> BTreeSet<Ref> {
    let mut refs: BTreeSet<Ref> = seed_refs.iter().cloned().collect();
    for name in names {
        let mut parts = name.split('.');
        let head = parts.next().unwrap_or_default();
        let second = parts.next();
        match (head, second) {
            ("vars", Some(var)) => {
                refs.insert(Ref::Var(var.to_string()));
            }
            ("nodes", Some(node)) => {
                let field = match parts.next() {
                    Some("outputs") => Field::Outputs,
                    _ => Field::Output,
                };
                refs.insert(Ref::Node(node.to_string(), field));
            }
            ("vars" | "nodes" | "loop", None) => {}
            (head, _) => {
                refs.insert(Ref::Var(head.to_string()));
            }
        }
    }
    refs
}

/// A short one-line description of a minijinja error.
pub fn describe(err: &minijinja::Error) -> String {
    match err.line() {
        Some(line) => format!("{} (template line {line})", err.kind_detail()),
        None => err.kind_detail(),
    }
}

/// minijinja's error message without the debug dump.
trait KindDetail {
    fn kind_detail(&self) -> String;
}

impl KindDetail for minijinja::Error {
    fn kind_detail(&self) -> String {
        match self.detail() {
            Some(detail) => format!("{}: {detail}", self.kind()),
            None => self.kind().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_syntax_becomes_lookups() {
        let c = convert(
            "Review $document and ${review.output}; all: ${review.outputs}; ${x-y} costs $(ls) $5",
            Mode::Template,
        );
        assert_eq!(
            c.source,
            "Review {{ vars[\"document\"] }} and {{ nodes[\"review\"].output }}; all: \
             {{ nodes[\"review\"].outputs | join(\"\\n\\n\") }}; {{ vars[\"x-y\"] }} costs $(ls) $5"
        );
        assert_eq!(c.refs.len(), 4);
    }

    #[test]
    fn jinja_blocks_are_left_alone() {
        let c = convert("{{ '$not_a_ref' }} and $yes", Mode::Template);
        assert_eq!(c.source, "{{ '$not_a_ref' }} and {{ vars[\"yes\"] }}");
        assert_eq!(c.refs, vec![Ref::Var("yes".into())]);
    }

    #[test]
    fn expressions_convert_without_braces() {
        let c = convert("$score > 3 and ${a.output} != ''", Mode::Expression);
        assert_eq!(
            c.source,
            "vars[\"score\"] > 3 and nodes[\"a\"].output != ''"
        );
    }

    #[test]
    fn references_include_jinja_names() {
        let env = environment();
        let c = convert(
            "{{ topic }} {{ nodes.plan.outputs }} {% for x in items %}{{ x }}{% endfor %} $doc",
            Mode::Template,
        );
        let refs = references(&env, &c, Mode::Template).expect("compiles");
        assert!(refs.contains(&Ref::Var("topic".into())));
        assert!(refs.contains(&Ref::Var("items".into())));
        assert!(refs.contains(&Ref::Var("doc".into())));
        assert!(refs.contains(&Ref::Node("plan".into(), Field::Outputs)));
        assert!(!refs.contains(&Ref::Var("x".into())));
    }
}
