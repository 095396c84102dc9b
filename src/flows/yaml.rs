//! A located YAML tree (every node keeps its line and column) built from the parser's event
//! stream, and a schema-driven check that reports every unknown field with a suggestion.
//!
//! serde reports only the first error and forgets positions once a value is deserialized;
//! validation needs the position of every node id, dependency and field, so the loader walks
//! this tree for positions while serde-saphyr does the typed deserialization.

use std::collections::HashMap;

use serde_json::Value;
use serde_saphyr::granit_parser::{Event, Parser, ScalarStyle, Span};

/// A 1-based line and column in the source text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PartialOrd, Ord)]
pub struct Pos {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1.
    pub col: usize,
}

impl Pos {
    fn from_span(span: &Span) -> Pos {
        Pos {
            line: span.start.line(),
            col: span.start.col() + 1,
        }
    }
}

/// One YAML node with its position.
#[derive(Debug, Clone, PartialEq)]
pub struct Located {
    /// Where the node starts.
    pub pos: Pos,
    /// What the node holds.
    pub kind: Kind,
}

/// The shape of a [`Located`] node.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// A scalar and whether it was written plain (unquoted).
    Scalar(String, bool),
    /// A sequence.
    Seq(Vec<Located>),
    /// A mapping, entries in file order.
    Map(Vec<(Located, Located)>),
}

impl Located {
    /// The scalar text, if this is a scalar.
    pub fn as_str(&self) -> Option<&str> {
        match &self.kind {
            Kind::Scalar(s, _) => Some(s),
            _ => None,
        }
    }

    /// The entry `key` of a mapping: (key node, value node).
    pub fn entry(&self, key: &str) -> Option<(&Located, &Located)> {
        match &self.kind {
            Kind::Map(entries) => entries
                .iter()
                .find(|(k, _)| k.as_str() == Some(key))
                .map(|(k, v)| (k, v)),
            _ => None,
        }
    }

    /// The value of `key` in a mapping.
    pub fn get(&self, key: &str) -> Option<&Located> {
        self.entry(key).map(|(_, v)| v)
    }

    /// The items of a sequence (empty for other kinds).
    pub fn items(&self) -> &[Located] {
        match &self.kind {
            Kind::Seq(items) => items,
            _ => &[],
        }
    }
}

/// The mapping key whose value starts at `pos`, and that value (for error messages).
pub fn key_at(node: &Located, pos: Pos) -> Option<(&str, &Located)> {
    match &node.kind {
        Kind::Map(entries) => entries.iter().find_map(|(k, v)| {
            if v.pos == pos {
                k.as_str().map(|key| (key, v))
            } else {
                key_at(v, pos)
            }
        }),
        Kind::Seq(items) => items.iter().find_map(|item| key_at(item, pos)),
        Kind::Scalar(..) => None,
    }
}

/// The tree as JSON, with the mapping keys at the positions in `fixes` renamed to their
/// suggestion (when the mapping does not already have that key) or left out. Plain scalars are
/// typed as YAML 1.2's core schema does (null, booleans, numbers); quoted ones stay strings.
/// Used to go on validating a file after reporting its unknown fields.
pub fn to_json(node: &Located, fixes: &[(Pos, Option<String>)]) -> Value {
    match &node.kind {
        Kind::Scalar(text, false) => Value::String(text.clone()),
        Kind::Scalar(text, true) => plain_scalar(text),
        Kind::Seq(items) => Value::Array(items.iter().map(|i| to_json(i, fixes)).collect()),
        Kind::Map(entries) => {
            let mut out = serde_json::Map::new();
            for (key, value) in entries {
                let name = key.as_str().unwrap_or_default();
                let name = match fixes.iter().find(|(pos, _)| *pos == key.pos) {
                    None => name,
                    Some((_, Some(suggestion))) if node.get(suggestion).is_none() => suggestion,
                    Some(_) => continue,
                };
                out.insert(name.to_string(), to_json(value, fixes));
            }
            Value::Object(out)
        }
    }
}

fn plain_scalar(text: &str) -> Value {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => Value::Null,
        "true" | "True" | "TRUE" => Value::Bool(true),
        "false" | "False" | "FALSE" => Value::Bool(false),
        _ => text
            .parse::<u64>()
            .map(Value::from)
            .or_else(|_| text.parse::<i64>().map(Value::from))
            .ok()
            .or_else(|| {
                text.parse::<f64>()
                    .ok()
                    .and_then(serde_json::Number::from_f64)
                    .map(Value::Number)
            })
            .unwrap_or_else(|| Value::String(text.to_string())),
    }
}

/// A YAML syntax error with its position.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntaxError {
    /// Where the parser stopped.
    pub pos: Pos,
    /// The parser's explanation.
    pub message: String,
}

/// What aliases may add to a tree: at least this many nodes, or one per byte of the text.
const ALIAS_NODES_FLOOR: usize = 10_000;
/// What aliases may add in scalar text: at least 1 MiB, or four times the text.
const ALIAS_BYTES_FLOOR: usize = 1024 * 1024;

/// How much alias expansion a text of `len` bytes may do: `(nodes, scalar bytes)`. A flow,
/// a draft or a model's answer that reuses a block a few times stays far below; an "alias
/// bomb" (each level ten aliases of the one before) passes it at its fourth or fifth level.
pub fn alias_budget(len: usize) -> (usize, usize) {
    (
        ALIAS_NODES_FLOOR.max(len),
        ALIAS_BYTES_FLOOR.max(len.saturating_mul(4)),
    )
}

/// serde-saphyr's options with the same alias bound, for the YAML it deserializes directly
/// (its default lets one document replay a million events).
pub fn saphyr_options(text: &str) -> serde_saphyr::Options {
    let (nodes, _) = alias_budget(text.len());
    serde_saphyr::options! {
        alias_limits: serde_saphyr::alias_limits! {
            // A node is one to two events (start and end of a collection).
            max_total_replayed_events: nodes.saturating_mul(2),
        },
    }
}

/// Parses `text` into a located tree. An empty document gives an empty mapping. Aliases are
/// copied into the tree, within [`alias_budget`]: past it the text is refused at the alias.
pub fn parse(text: &str) -> Result<Located, SyntaxError> {
    let (nodes, bytes) = alias_budget(text.len());
    let mut builder = Builder {
        budget: Budget {
            nodes,
            bytes,
            ..Budget::default()
        },
        ..Builder::default()
    };
    for item in Parser::new_from_str(text) {
        let (event, span) = item.map_err(|e| SyntaxError {
            pos: Pos {
                line: e.marker().line(),
                col: e.marker().col() + 1,
            },
            message: e.info(),
        })?;
        builder.event(event, &span)?;
    }
    Ok(builder.root.unwrap_or(Located {
        pos: Pos { line: 1, col: 1 },
        kind: Kind::Map(Vec::new()),
    }))
}

/// Builds the tree from events; keeps anchors so aliases expand to a copy.
#[derive(Default)]
struct Builder {
    stack: Vec<(Located, Option<usize>, Option<Located>)>,
    /// Each anchored node, with its size (so an alias is charged without walking it).
    anchors: HashMap<usize, (Located, Size)>,
    root: Option<Located>,
    documents: usize,
    budget: Budget,
}

/// The nodes and scalar bytes in a subtree.
#[derive(Debug, Clone, Copy, Default)]
struct Size {
    nodes: usize,
    bytes: usize,
}

impl Size {
    fn of(node: &Located) -> Size {
        match &node.kind {
            Kind::Scalar(text, _) => Size {
                nodes: 1,
                bytes: text.len(),
            },
            Kind::Seq(items) => items
                .iter()
                .fold(Size { nodes: 1, bytes: 0 }, |acc, i| acc.plus(Size::of(i))),
            Kind::Map(entries) => entries
                .iter()
                .fold(Size { nodes: 1, bytes: 0 }, |acc, (k, v)| {
                    acc.plus(Size::of(k)).plus(Size::of(v))
                }),
        }
    }

    fn plus(self, other: Size) -> Size {
        Size {
            nodes: self.nodes.saturating_add(other.nodes),
            bytes: self.bytes.saturating_add(other.bytes),
        }
    }
}

/// What aliases may still add (see [`alias_budget`]) and what they added so far.
#[derive(Debug, Default)]
struct Budget {
    nodes: usize,
    bytes: usize,
    spent: Size,
}

impl Budget {
    /// Charges one alias's copy; an error once the copies pass the budget.
    fn charge(&mut self, copy: Size, pos: Pos) -> Result<(), SyntaxError> {
        self.spent = self.spent.plus(copy);
        if self.spent.nodes <= self.nodes && self.spent.bytes <= self.bytes {
            return Ok(());
        }
        Err(SyntaxError {
            pos,
            message: format!(
                "别名展开过多 / aliases expand too far: more than {} nodes or {} bytes of \
                 copies for a text of this size; write the repeated part out, or reuse it \
                 fewer times",
                self.nodes, self.bytes
            ),
        })
    }
}

impl Builder {
    fn event(&mut self, event: Event<'_>, span: &Span) -> Result<(), SyntaxError> {
        let pos = Pos::from_span(span);
        match event {
            Event::DocumentStart(..) => {
                self.documents += 1;
                if self.documents > 1 {
                    return Err(SyntaxError {
                        pos,
                        message: "a flow file holds one YAML document".into(),
                    });
                }
            }
            Event::Scalar(value, style, anchor, _) => {
                let plain = matches!(style, ScalarStyle::Plain);
                let node = Located {
                    pos,
                    kind: Kind::Scalar(value.into_owned(), plain),
                };
                self.finish(node, anchor);
            }
            Event::SequenceStart(_, anchor, _) => self.stack.push((
                Located {
                    pos,
                    kind: Kind::Seq(Vec::new()),
                },
                Some(anchor),
                None,
            )),
            Event::MappingStart(_, anchor, _) => self.stack.push((
                Located {
                    pos,
                    kind: Kind::Map(Vec::new()),
                },
                Some(anchor),
                None,
            )),
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some((node, anchor, _)) = self.stack.pop() {
                    self.finish(node, anchor.unwrap_or(0));
                }
            }
            Event::Alias(id) => {
                let (node, size) = self.anchors.get(&id).ok_or(SyntaxError {
                    pos,
                    message: "alias to an unknown anchor".into(),
                })?;
                // Charged before the copy is made: a bomb stops before it takes memory.
                self.budget.charge(*size, pos)?;
                let node = Located {
                    pos,
                    ..node.clone()
                };
                self.finish(node, 0);
            }
            _ => {}
        }
        Ok(())
    }

    fn finish(&mut self, node: Located, anchor: usize) {
        if anchor != 0 {
            self.anchors.insert(anchor, (node.clone(), Size::of(&node)));
        }
        let Some((parent, _, pending_key)) = self.stack.last_mut() else {
            self.root = Some(node);
            return;
        };
        match &mut parent.kind {
            Kind::Seq(items) => items.push(node),
            Kind::Map(entries) => match pending_key.take() {
                Some(key) => entries.push((key, node)),
                None => *pending_key = Some(node),
            },
            Kind::Scalar(..) => {}
        }
    }
}

/// An unknown field found by [`unknown_fields`].
#[derive(Debug, Clone, PartialEq)]
pub struct UnknownField {
    /// Position of the key.
    pub pos: Pos,
    /// The key as written.
    pub field: String,
    /// The closest known field, if one is close enough to be a typo.
    pub suggestion: Option<String>,
    /// Every field allowed at that place.
    pub expected: Vec<String>,
}

/// Walks `node` against a JSON Schema (as generated by schemars) and reports every mapping key
/// that the schema does not allow, with a "did you mean" suggestion.
pub fn unknown_fields(node: &Located, schema: &Value) -> Vec<UnknownField> {
    let mut out = Vec::new();
    walk(node, schema, schema, &mut out);
    out
}

fn walk(node: &Located, schema: &Value, root: &Value, out: &mut Vec<UnknownField>) {
    let Some(schema) = pick(schema, root, &node.kind) else {
        return;
    };
    match &node.kind {
        Kind::Map(entries) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let extra = schema.get("additionalProperties");
            for (key, value) in entries {
                let name = key.as_str().unwrap_or_default();
                if let Some(sub) = props.and_then(|p| p.get(name)) {
                    walk(value, sub, root, out);
                } else if let Some(extra) = extra.filter(|e| e.is_object()) {
                    walk(value, extra, root, out);
                } else if props.is_some() && extra == Some(&Value::Bool(false)) {
                    let expected: Vec<String> = props
                        .map(|p| p.keys().cloned().collect())
                        .unwrap_or_default();
                    out.push(UnknownField {
                        pos: key.pos,
                        field: name.to_string(),
                        suggestion: closest(name, &expected),
                        expected,
                    });
                }
            }
        }
        Kind::Seq(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    walk(item, item_schema, root, out);
                }
            }
        }
        Kind::Scalar(..) => {}
    }
}

/// Resolves `$ref`s and picks the `anyOf`/`oneOf` branch that fits the node's shape.
fn pick<'a>(schema: &'a Value, root: &'a Value, kind: &Kind) -> Option<&'a Value> {
    let schema = resolve(schema, root)?;
    let alternatives = schema
        .get("anyOf")
        .or_else(|| schema.get("oneOf"))
        .and_then(Value::as_array);
    let Some(alternatives) = alternatives else {
        return Some(schema);
    };
    alternatives.iter().find_map(|alt| {
        let alt = resolve(alt, root)?;
        let fits = match kind {
            Kind::Map(_) => alt.get("properties").is_some() || has_type(alt, "object"),
            Kind::Seq(_) => alt.get("items").is_some() || has_type(alt, "array"),
            Kind::Scalar(..) => false,
        };
        fits.then_some(alt).or_else(|| {
            alt.get("anyOf")
                .is_some()
                .then(|| pick(alt, root, kind))
                .flatten()
        })
    })
}

fn resolve<'a>(schema: &'a Value, root: &'a Value) -> Option<&'a Value> {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(reference) => {
            let path = reference.strip_prefix("#/")?;
            path.split('/')
                .try_fold(root, |value, part| value.get(part))
                .and_then(|target| resolve(target, root))
        }
        None => Some(schema),
    }
}

fn has_type(schema: &Value, ty: &str) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == ty,
        Some(Value::Array(ts)) => ts.iter().any(|t| t == ty),
        _ => false,
    }
}

/// The closest candidate to `word`, if it is near enough to be a typo.
pub fn closest(word: &str, candidates: &[String]) -> Option<String> {
    candidates
        .iter()
        .map(|c| (strsim::damerau_levenshtein(word, c), c))
        .filter(|(distance, c)| *distance <= (c.len().max(word.len()) / 3).max(1))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, c)| c.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based_and_point_at_the_node() {
        let tree = parse("name: x\nnodes:\n  - id: a\n    prompt: hi\n").expect("parses");
        let (key, value) = tree.entry("name").expect("name");
        assert_eq!(key.pos, Pos { line: 1, col: 1 });
        assert_eq!(value.pos, Pos { line: 1, col: 7 });
        let node = &tree.get("nodes").expect("nodes").items()[0];
        let (key, value) = node.entry("prompt").expect("prompt");
        assert_eq!(key.pos, Pos { line: 4, col: 5 });
        assert_eq!(value.as_str(), Some("hi"));
    }

    #[test]
    fn syntax_errors_carry_a_position() {
        let err = parse("name: x\nnodes: [a, b\n").expect_err("unclosed flow sequence");
        assert!(err.pos.line >= 2, "{err:?}");
    }

    #[test]
    fn aliases_expand_to_the_anchored_value() {
        let tree = parse("a: &x [1, 2]\nb: *x\n").expect("parses");
        assert_eq!(tree.get("b").expect("b").items().len(), 2);
    }

    /// Six levels of ten aliases each: 291 bytes that expand to a million nodes (123 MB
    /// through `/api/flows/validate` before the bound).
    pub(crate) fn alias_bomb() -> String {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for level in 1..=6 {
            let prev = format!("*a{}", level - 1);
            let items = [prev.as_str(); 10].join(", ");
            text.push_str(&format!("a{level}: &a{level} [{items}]\n"));
        }
        text
    }

    #[test]
    fn an_alias_bomb_is_refused_at_the_alias_that_passes_the_budget() {
        let text = alias_bomb();
        let err = parse(&text).expect_err("an alias bomb is refused");
        assert!(err.message.contains("aliases expand too far"), "{err:?}");
        assert!(err.message.contains("别名"), "bilingual: {err:?}");
        // Level 4 already copies 10,000 nodes; the refusal points into that line or the next.
        assert!((4..=6).contains(&err.pos.line), "{err:?}");
        assert!(err.pos.col > 1, "{err:?}");
    }

    #[test]
    fn a_block_reused_a_few_times_is_within_the_budget() {
        let block = format!("&p \"{}\"", "word ".repeat(2_000));
        let mut text = format!("base: {block}\nuses:\n");
        for _ in 0..50 {
            text.push_str("  - *p\n");
        }
        let tree = parse(&text).expect("50 copies of a 10 KB prompt are fine");
        assert_eq!(tree.get("uses").expect("uses").items().len(), 50);
    }

    #[test]
    fn serde_saphyr_gets_the_same_bound() {
        let text = alias_bomb();
        let raw: Result<serde_json::Value, _> =
            serde_saphyr::from_str_with_options(&text, saphyr_options(&text));
        assert!(raw.is_err(), "the bomb is refused by serde-saphyr too");
    }

    #[test]
    fn typos_get_a_suggestion() {
        let known = vec!["prompt".to_string(), "command".to_string()];
        assert_eq!(closest("promt", &known).as_deref(), Some("prompt"));
        assert_eq!(closest("zzz", &known), None);
    }
}
