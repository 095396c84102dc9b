//! The flow file model: serde types for `flows/*.yaml`, strict (`deny_unknown_fields`) and
//! described by a JSON Schema generated from these very types (see [`crate::flows::schema_json`]).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One flow file: a named DAG of nodes that fan prompts out to chat tabs.
///
/// Field names are the seed project's (`nodes`, `depends_on`, `output_var`, `parallel_outputs`,
/// `error_handling`); aliases from other engines (`needs`) are accepted where noted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "AIcard flow")]
pub struct Flow {
    /// Unique name of the flow (`?<manager run NAME>!`).
    pub name: String,
    /// What the flow does, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Seed metadata: how the flow starts. `手动触发` / `manual` (the only kind a flow file can
    /// name) means it runs when a command starts it (`?<manager run NAME>!`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<String>,
    /// `on: {event: TOPIC, where: EXPR}`: the flow also runs by itself, once for each event on
    /// the hub's bus that matches (docs/cluster.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on: Option<OnEvent>,
    /// Named inputs; `key=value` on `manager run` overrides the default.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub inputs: BTreeMap<String, InputSpec>,
    /// Per-node defaults (timeout, retry), overridable on each node.
    #[serde(default, skip_serializing_if = "Defaults::is_empty")]
    pub defaults: Defaults,
    /// The nodes of the DAG, in file order.
    pub nodes: Vec<Node>,
    /// Seed form at flow level: `{node_id: {target: prompt}}` — per-target prompts for a node.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parallel_outputs: BTreeMap<String, PromptMap>,
    /// Seed error handling: retries for nodes without a `retry`, and a fallback output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_handling: Option<ErrorHandling>,
    /// Concurrency limits for the whole run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<FlowLimits>,
}

/// Adds `needs` (GitHub Actions' name) to the node schema as an alias of `depends_on`,
/// so editors accept both spellings, as the loader does.
pub(crate) fn add_needs_alias(schema: &mut Schema) {
    let node = schema
        .get_mut("$defs")
        .and_then(|defs| defs.get_mut("Node"))
        .and_then(|node| node.get_mut("properties"))
        .and_then(|props| props.as_object_mut());
    if let Some(props) = node {
        if let Some(dep) = props.get("depends_on").cloned() {
            let mut alias = dep;
            if let Some(obj) = alias.as_object_mut() {
                obj.insert(
                    "description".into(),
                    "Alias of `depends_on` (GitHub Actions spelling).".into(),
                );
            }
            props.insert("needs".into(), alias);
        }
    }
}

/// An input of the flow: its default and whether a run must provide it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InputSpec {
    /// Value used when the run does not set this input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// What the input is, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A run without this input (and without a default) is refused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub required: bool,
}

/// Defaults applied to every node that does not set its own value.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    /// Default timeouts (a single duration is the per-attempt timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Timeout>,
    /// Default retry policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetrySpec>,
}

impl Defaults {
    fn is_empty(&self) -> bool {
        self.timeout.is_none() && self.retry.is_none()
    }
}

/// One node of the DAG: a prompt sent to one or more tabs, or a hub-side command.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Node {
    /// Identifier, `[A-Za-z0-9_-]+`, unique in the flow.
    pub id: String,
    /// Display name (any language).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Nodes that must finish first (a string or a list). `needs` is accepted.
    #[serde(default, alias = "needs", skip_serializing_if = "StringList::is_empty")]
    pub depends_on: StringList,
    /// Where the prompt goes: sites, labels, client ids, `role:worker`, `role:foreman`, `master`.
    #[serde(default, skip_serializing_if = "StringList::is_empty")]
    pub to: StringList,
    /// Fan the prompt out to N distinct tabs matching `to` (default `role:worker`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<u32>,
    /// The prompt: a minijinja template; seed references `$x`, `${x}`, `${node.output}` work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// Files the tab attaches before the prompt (docs/files.md): names inside the files folder
    /// (`--files`), `$x` / `${node.output}` expanded first; a name that leaves the folder is
    /// refused.
    #[serde(default, skip_serializing_if = "StringList::is_empty")]
    pub files: StringList,
    /// A hub-side command (`?<echo saved>!` or `echo saved`), run through the command executor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Run `command` (a shell command or a skill) on this node of the cluster, under its exec
    /// policy: the node that has the data (docs/cluster.md remote execution; `on NODE: CMD`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on: Option<String>,
    /// A tool of an MCP server in `mcp.json`; runs as the command `mcp use SERVER TOOL {args}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<McpStep>,
    /// Reads the team memory: runs as the command `memory search WORDS [scope=S]`; the
    /// node's output is the hits in full, with their neighbours' ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStep>,
    /// An agent (docs/agents.md, made with `?<agent create NAME …>!`) works on `task` in rounds;
    /// runs as the command `agent task NAME TASK`, the node's output is its final answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The task of an `agent:` node; `$x` / `${node.output}` are expanded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// Seed form: the variables the node reads (documentation; each must be an input or come
    /// from an upstream node, which validation checks).
    #[serde(default, skip_serializing_if = "StringList::is_empty")]
    pub input_var: StringList,
    /// Also publish the node's output under this variable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_var: Option<String>,
    /// A minijinja expression; when false the node is skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
    /// When dependencies that did not complete (skipped, failed) still let this node run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<Trigger>,
    /// Run the node once per item of a list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_each: Option<ForEach>,
    /// How the replies of a fanned-out node become its output (default `concat`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregate: Option<Aggregate>,
    /// The judge's target when `aggregate: judge`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<String>,
    /// Seed form: a different prompt per target, `{target: prompt}`, run in parallel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_outputs: Option<PromptMap>,
    /// What a failure (after retries) does to the run (default `fail`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<OnFailure>,
    /// Retry policy of this node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetrySpec>,
    /// Timeouts of this node (a single duration is the per-attempt timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Timeout>,
}

/// Which finished states of the dependencies let a node run (Airflow's trigger rules).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    /// Every dependency completed; otherwise the node is skipped (the default).
    #[default]
    AllSuccess,
    /// Every dependency finished, whatever its state.
    AllDone,
    /// No dependency failed (skipped ones are fine).
    NoneFailed,
    /// At least one dependency completed.
    OneSuccess,
}

/// `for_each`: map the node over a list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForEach {
    /// A YAML list, or an expression giving a list (a JSON array or one item per line).
    pub items: ForEachItems,
    /// The loop variable's name (default `item`).
    #[serde(default = "default_item_var", rename = "as")]
    pub var: String,
    /// At most this many items in flight at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_parallel: Option<u32>,
}

fn default_item_var() -> String {
    "item".to_string()
}

/// The items of a `for_each`: literal, or computed from variables at run time.
///
/// Deserialized by hand: serde's untagged buffering rejects plain (unquoted) YAML scalars
/// such as `items: [x, y]`, which people write all the time.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum ForEachItems {
    /// A literal YAML list.
    List(Vec<String>),
    /// An expression (`$files`, `${split.output}`, `plan.output | split("\n")`).
    Expr(String),
}

/// How replies of several items become one output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Aggregate {
    /// Replies in item order, each under a `[label]` header, separated by a blank line.
    #[default]
    Concat,
    /// A JSON array of the replies in item order.
    List,
    /// The most common reply (compared trimmed and case-folded); ties go to the earliest.
    Vote,
    /// Replies parsed as JSON objects (fenced ```json blocks accepted) and deep-merged.
    JsonMerge,
    /// The candidates go to the `judge` target, whose answer is the output.
    Judge,
}

/// What a node failure does to the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnFailure {
    /// The run fails (the default).
    #[default]
    Fail,
    /// The node is marked failed and the run goes on; dependents decide by their `trigger`.
    Continue,
}

/// A retry policy: how many extra attempts and how long to wait between them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetrySpec {
    /// Extra attempts after the first one.
    pub max: u32,
    /// Delay before the first retry (a duration), or `{initial, factor, max}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<Backoff>,
    /// Randomise each delay to between half and all of it (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<bool>,
}

/// Exponential backoff: `initial × factor^(retry-1)`, capped at `max`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Backoff {
    /// Delay before the first retry.
    pub initial: Duration,
    /// Growth factor per retry (default 2).
    #[serde(default = "default_factor")]
    pub factor: f64,
    /// Upper bound of one delay (default 60s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<Duration>,
}

fn default_factor() -> f64 {
    2.0
}

/// Timeouts, split as Temporal does.
#[derive(Debug, Clone, PartialEq, Default, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Timeout {
    /// Waiting for a free tab.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<Duration>,
    /// One attempt, from sending the prompt to the end of the reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<Duration>,
    /// No new tokens streamed for this long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle: Option<Duration>,
    /// The whole node, retries included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Duration>,
}

/// A flow's `on:`: the events that start it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OnEvent {
    /// The topic (`node_result`, `flow_complete`, a name a `publish` chose; `*` for every one).
    pub event: String,
    /// A condition over the event, in the language of a node's `when`: `$EVENT_FLOW ==
    /// 'review'`, `$EVENT_TEXT is containing('urgent')`. The event's variables are those a
    /// rule sees (`EVENT`, `EVENT_TOPIC`, `EVENT_TEXT`, `EVENT_<FIELD>`).
    #[serde(default, rename = "where", skip_serializing_if = "Option::is_none")]
    pub cond: Option<String>,
}

/// The seed's `error_handling` block.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorHandling {
    /// Retries for nodes without their own `retry` (and no `defaults.retry`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
    /// Delay before a retry (milliseconds, or a duration like `2s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_delay: Option<Duration>,
    /// What is done, once, when a node still fails after its retries (docs/commands.md): a message to
    /// the master, a command, or a node of the flow. The run still fails (or goes on, where
    /// the node says `on_failure: continue`): a fallback is an action, not a made-up answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<Fallback>,
}

/// `error_handling.fallback`: the action taken when a node fails for good.
///
/// Written as a string, `?<…>!` is a command, the id of a node of the flow is that node, and
/// any other text is a message to the master (the seed's `fallback: "发送告警消息"`). The
/// mapping forms say which one outright. Messages and commands run as a node of their own,
/// `fallback`, added when the flow is loaded (so the run's status and journal show it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Fallback {
    /// Typed into the master tab with the failure (`{message: TEXT}`).
    Message(String),
    /// A hub command run with `$ERROR` and `$FAILED_NODE` (`{command: "?<…>!"}`).
    Command(String),
    /// A node of this flow that runs only when another node fails, reading `$ERROR` and
    /// `$FAILED_NODE` (`{node: ID}`).
    Node(String),
    /// The failed node completes with this text instead (`{output: TEXT}`): the run goes on
    /// as if the node had answered it.
    Output(String),
    /// The bare string form before the flow is loaded: a node's id or a message (see
    /// [`desugar_fallback`]; a loaded flow never holds it).
    #[serde(untagged)]
    Text(String),
}

impl Fallback {
    /// The string form: `?<…>!` is a command, other text a node's id or a message (resolved
    /// when the flow is loaded, see [`desugar_fallback`]).
    pub fn from_text(text: &str) -> Fallback {
        let t = text.trim();
        if t.starts_with("?<") && t.ends_with(">!") {
            Fallback::Command(t.to_string())
        } else {
            Fallback::Text(text.to_string())
        }
    }
}

/// The mapping form of [`Fallback`], deserialized strictly.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FallbackRaw {
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    node: Option<String>,
    #[serde(default)]
    output: Option<String>,
}

impl<'de> Deserialize<'de> for Fallback {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Fallback;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a message, a `?<command>!`, a node id, or one of {message: …}, {command: …}, {node: …}, {output: …}")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Fallback, E> {
                Ok(Fallback::from_text(v))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Fallback, A::Error> {
                let raw = FallbackRaw::deserialize(de::value::MapAccessDeserializer::new(map))?;
                let mut set = [
                    raw.message.map(Fallback::Message),
                    raw.command.map(Fallback::Command),
                    raw.node.map(Fallback::Node),
                    raw.output.map(Fallback::Output),
                ]
                .into_iter()
                .flatten();
                match (set.next(), set.next()) {
                    (Some(one), None) => Ok(one),
                    _ => Err(de::Error::custom(
                        "a fallback is one of `message`, `command`, `node` or `output`",
                    )),
                }
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for Fallback {
    fn schema_name() -> Cow<'static, str> {
        "Fallback".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "What is done when a node still fails after its retries: a message to the master (text), a command (`?<…>!`), a node of the flow (its id), or one of the mapping forms.",
            "anyOf": [
                {"type": "string"},
                {
                    "type": "object",
                    "properties": {
                        "message": {"type": "string", "description": "Typed into the master tab with the failure."},
                        "command": {"type": "string", "description": "A hub command run with $ERROR and $FAILED_NODE."},
                        "node": {"type": "string", "description": "A node of this flow that runs only when another node fails."},
                        "output": {"type": "string", "description": "The failed node completes with this text instead."}
                    },
                    "additionalProperties": false,
                    "minProperties": 1,
                    "maxProperties": 1
                }
            ]
        })
    }
}

/// Run-wide concurrency limits.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
// Kept as `Limits` in flows/schema.json, the name editors show.
#[schemars(rename = "Limits")]
pub struct FlowLimits {
    /// At most this many prompts in flight for the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_parallel: Option<u32>,
    /// Per-site concurrency (`{chatgpt: 2}`), enforced by the hub when it picks tabs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pools: BTreeMap<String, u32>,
}

/// A duration in milliseconds, written `120s`, `2m`, `1h`, `500ms` or as a number of milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(pub u64);

impl Duration {
    /// The duration in milliseconds.
    pub fn as_ms(self) -> u64 {
        self.0
    }

    /// Parses `120s`, `2m`, `1.5h`, `500ms`, `250` (ms).
    pub fn parse(text: &str) -> Result<Duration, String> {
        let t = text.trim();
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let value: f64 = num.parse().map_err(|_| {
            format!(
                "invalid duration `{text}` (use 120s, 2m, 1h, 500ms or a number of milliseconds)"
            )
        })?;
        let factor = match unit.trim() {
            "" | "ms" => 1.0,
            "s" => 1_000.0,
            "m" | "min" => 60_000.0,
            "h" => 3_600_000.0,
            other => {
                return Err(format!(
                    "invalid duration unit `{other}` in `{text}` (use ms, s, m or h)"
                ))
            }
        };
        Ok(Duration((value * factor).round() as u64))
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0;
        if ms != 0 && ms.is_multiple_of(3_600_000) {
            write!(f, "{}h", ms / 3_600_000)
        } else if ms != 0 && ms.is_multiple_of(60_000) {
            write!(f, "{}m", ms / 60_000)
        } else if ms != 0 && ms.is_multiple_of(1_000) {
            write!(f, "{}s", ms / 1_000)
        } else {
            write!(f, "{ms}ms")
        }
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(DurationVisitor)
    }
}

struct DurationVisitor;

impl Visitor<'_> for DurationVisitor {
    type Value = Duration;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a duration like 120s, 2m, 500ms or a number of milliseconds")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Duration, E> {
        Ok(Duration(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Duration, E> {
        u64::try_from(v)
            .map(Duration)
            .map_err(|_| E::custom("a duration cannot be negative"))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Duration, E> {
        if v.is_finite() && v >= 0.0 {
            Ok(Duration(v.round() as u64))
        } else {
            Err(E::custom("a duration must be a positive number"))
        }
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
        Duration::parse(v).map_err(E::custom)
    }
}

impl JsonSchema for Duration {
    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A duration: `120s`, `2m`, `1h`, `500ms`, or a number of milliseconds.",
            "anyOf": [
                {"type": "string", "pattern": "^\\s*[0-9]+(\\.[0-9]+)?\\s*(ms|s|m|min|h)?\\s*$"},
                {"type": "integer", "minimum": 0}
            ]
        })
    }
}

/// Deserializes "a duration or a mapping" shapes without losing the mapping's strictness.
macro_rules! duration_or_struct {
    ($ty:ident, $raw:ident, $from_duration:expr, $expecting:literal) => {
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = $ty;
                    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                        f.write_str($expecting)
                    }
                    fn visit_u64<E: de::Error>(self, v: u64) -> Result<$ty, E> {
                        Ok($from_duration(Duration(v)))
                    }
                    fn visit_i64<E: de::Error>(self, v: i64) -> Result<$ty, E> {
                        DurationVisitor.visit_i64(v).map($from_duration)
                    }
                    fn visit_f64<E: de::Error>(self, v: f64) -> Result<$ty, E> {
                        DurationVisitor.visit_f64(v).map($from_duration)
                    }
                    fn visit_str<E: de::Error>(self, v: &str) -> Result<$ty, E> {
                        DurationVisitor.visit_str(v).map($from_duration)
                    }
                    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<$ty, A::Error> {
                        $raw::deserialize(de::value::MapAccessDeserializer::new(map))
                            .map(Into::into)
                    }
                }
                d.deserialize_any(V)
            }
        }
    };
}

/// The mapping form of [`Timeout`], deserialized strictly.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TimeoutRaw {
    #[serde(default)]
    queue: Option<Duration>,
    #[serde(default)]
    attempt: Option<Duration>,
    #[serde(default)]
    idle: Option<Duration>,
    #[serde(default)]
    deadline: Option<Duration>,
}

impl From<TimeoutRaw> for Timeout {
    fn from(r: TimeoutRaw) -> Self {
        Timeout {
            queue: r.queue,
            attempt: r.attempt,
            idle: r.idle,
            deadline: r.deadline,
        }
    }
}

duration_or_struct!(
    Timeout,
    TimeoutRaw,
    |d| Timeout {
        attempt: Some(d),
        ..Timeout::default()
    },
    "a duration (per attempt) or {queue, attempt, idle, deadline}"
);

/// The mapping form of [`Backoff`], deserialized strictly.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BackoffRaw {
    initial: Duration,
    #[serde(default = "default_factor")]
    factor: f64,
    #[serde(default)]
    max: Option<Duration>,
}

impl From<BackoffRaw> for Backoff {
    fn from(r: BackoffRaw) -> Self {
        Backoff {
            initial: r.initial,
            factor: r.factor,
            max: r.max,
        }
    }
}

duration_or_struct!(
    Backoff,
    BackoffRaw,
    |d| Backoff {
        initial: d,
        factor: default_factor(),
        max: None,
    },
    "a duration or {initial, factor, max}"
);

/// A string or a list of strings (`depends_on: a` or `depends_on: [a, b]`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StringList(pub Vec<String>);

impl StringList {
    /// True when no value was given.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// The values in file order.
    pub fn iter(&self) -> std::slice::Iter<'_, String> {
        self.0.iter()
    }
    /// How many values.
    pub fn len(&self) -> usize {
        self.0.len()
    }
}

impl Serialize for StringList {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0.as_slice() {
            [one] => s.serialize_str(one),
            many => many.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for StringList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = StringList;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or a list of strings")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<StringList, E> {
                Ok(StringList(vec![v.to_string()]))
            }
            fn visit_unit<E: de::Error>(self) -> Result<StringList, E> {
                Ok(StringList::default())
            }
            fn visit_none<E: de::Error>(self) -> Result<StringList, E> {
                Ok(StringList::default())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<StringList, A::Error> {
                let mut out = Vec::new();
                while let Some(v) = seq.next_element::<String>()? {
                    out.push(v);
                }
                Ok(StringList(out))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for ForEachItems {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ForEachItems;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of items or an expression string")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ForEachItems, E> {
                Ok(ForEachItems::Expr(v.to_string()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ForEachItems, A::Error> {
                let mut out = Vec::new();
                while let Some(v) = seq.next_element::<ScalarText>()? {
                    out.push(v.0);
                }
                Ok(ForEachItems::List(out))
            }
        }
        d.deserialize_any(V)
    }
}

/// Any YAML scalar (string, number, bool) as its text: list items like `[1, 2, x]`.
struct ScalarText(String);

impl<'de> Deserialize<'de> for ScalarText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ScalarText;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a scalar item")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ScalarText, E> {
                Ok(ScalarText(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ScalarText, E> {
                Ok(ScalarText(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ScalarText, E> {
                Ok(ScalarText(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<ScalarText, E> {
                Ok(ScalarText(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<ScalarText, E> {
                Ok(ScalarText(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for StringList {
    fn schema_name() -> Cow<'static, str> {
        "StringList".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A string or a list of strings.",
            "anyOf": [
                {"type": "string"},
                {"type": "array", "items": {"type": "string"}}
            ]
        })
    }
}

/// An ordered `{target: prompt}` mapping (file order is item order).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PromptMap(pub Vec<(String, String)>);

impl Serialize for PromptMap {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

impl<'de> Deserialize<'de> for PromptMap {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = PromptMap;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a mapping of target to prompt")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PromptMap, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, String>()? {
                    out.push((k, v));
                }
                Ok(PromptMap(out))
            }
        }
        d.deserialize_map(V)
    }
}

impl JsonSchema for PromptMap {
    fn schema_name() -> Cow<'static, str> {
        "PromptMap".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "Target (site, label, client id or role:…) to prompt, in order.",
            "type": "object",
            "additionalProperties": {"type": "string"}
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_units_and_numbers() {
        assert_eq!(Duration::parse("120s"), Ok(Duration(120_000)));
        assert_eq!(Duration::parse("2m"), Ok(Duration(120_000)));
        assert_eq!(Duration::parse("1.5s"), Ok(Duration(1_500)));
        assert_eq!(Duration::parse("500ms"), Ok(Duration(500)));
        assert_eq!(Duration::parse("250"), Ok(Duration(250)));
        assert!(Duration::parse("5 parsecs").is_err());
        assert_eq!(Duration(120_000).to_string(), "2m");
        assert_eq!(Duration(1_500).to_string(), "1500ms");
    }

    #[test]
    fn timeout_accepts_a_duration_or_a_mapping() {
        let t: Timeout = serde_saphyr::from_str("90s").expect("duration");
        assert_eq!(t.attempt, Some(Duration(90_000)));
        let t: Timeout = serde_saphyr::from_str("{queue: 1m, idle: 30s}").expect("mapping");
        assert_eq!(t.queue, Some(Duration(60_000)));
        assert_eq!(t.idle, Some(Duration(30_000)));
        let bad = serde_saphyr::from_str::<Timeout>("{atempt: 1m}");
        assert!(bad.is_err());
    }

    #[test]
    fn string_list_accepts_one_or_many() {
        let one: StringList = serde_saphyr::from_str("a").expect("one");
        assert_eq!(one.0, vec!["a"]);
        let many: StringList = serde_saphyr::from_str("[a, b]").expect("many");
        assert_eq!(many.0, vec!["a", "b"]);
    }
}

/// A flow node's `mcp: {server, tool, args}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpStep {
    /// A key of `mcpServers` in `mcp.json`.
    pub server: String,
    /// The tool's name.
    pub tool: String,
    /// The tool's arguments; `$x` / `${node.output}` in string values are expanded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<serde_json::Map<String, serde_json::Value>>,
}

impl McpStep {
    /// The command this node runs.
    pub fn command(&self) -> String {
        let args = serde_json::Value::Object(self.args.clone().unwrap_or_default());
        format!("mcp use {} {} {args}", self.server, self.tool)
    }
}

/// A flow node's `memory: {search, scope?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryStep {
    /// The words to search for; `$x` / `${node.output}` are expanded.
    pub search: String,
    /// `global` (the default) or a group's scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

impl MemoryStep {
    /// The command this node runs. Line breaks in the words become spaces (a command is one
    /// line of words).
    pub fn command(&self) -> String {
        let words = self.search.split_whitespace().collect::<Vec<_>>().join(" ");
        match &self.scope {
            Some(scope) => format!("memory search {words} scope={scope}"),
            None => format!("memory search {words}"),
        }
    }
}

/// `mcp:` and `memory:` nodes become command nodes; a node with two of `command`, `mcp` and
/// `memory` is an error (the node's id returned).
pub fn desugar_mcp(flow: &mut Flow) -> Result<(), String> {
    for node in &mut flow.nodes {
        let agent = match (&node.agent, &node.task) {
            (Some(name), task) => Some(format!(
                "agent task {} {}",
                name.trim(),
                task.as_deref()
                    .unwrap_or_default()
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            )),
            (None, Some(_)) => return Err(node.id.clone()),
            (None, None) => None,
        };
        let steps = [
            node.mcp.as_ref().map(McpStep::command),
            node.memory.as_ref().map(MemoryStep::command),
            agent,
        ];
        for command in steps.into_iter().flatten() {
            if node.command.is_some() {
                return Err(node.id.clone());
            }
            node.command = Some(command);
        }
    }
    Ok(())
}

/// The variables a fallback node reads besides the flow's own: why the run failed, and which
/// node failed.
pub const FALLBACK_VARS: &[&str] = &["ERROR", "FAILED_NODE"];

/// A fallback that is a message or a command becomes a node of its own (`fallback`, or
/// `fallback_2` … when taken) that only runs when another node fails; a message naming a node
/// of the flow is that node. Afterwards `error_handling.fallback` is a node or an output.
pub fn desugar_fallback(flow: &mut Flow) {
    let ids: Vec<String> = flow.nodes.iter().map(|n| n.id.clone()).collect();
    let Some(fallback) = flow
        .error_handling
        .as_mut()
        .and_then(|e| e.fallback.as_mut())
    else {
        return;
    };
    if let Fallback::Text(text) = &*fallback {
        *fallback = if ids.iter().any(|id| id == text.trim()) {
            Fallback::Node(text.trim().to_string())
        } else {
            Fallback::Message(text.clone())
        };
    }
    let node = match &*fallback {
        Fallback::Message(text) => Node {
            name: Some("告警 / alert".into()),
            to: StringList(vec!["master".into()]),
            prompt: Some(format!(
                "⚠ 流程 $flow_name 的节点 $FAILED_NODE 失败 / flow $flow_name: node $FAILED_NODE failed: $ERROR\n{}",
                text.trim()
            )),
            ..Node::default()
        },
        Fallback::Command(command) => Node {
            name: Some("失败处理 / on failure".into()),
            command: Some(command.clone()),
            ..Node::default()
        },
        Fallback::Node(_) | Fallback::Output(_) | Fallback::Text(_) => return,
    };
    let mut id = "fallback".to_string();
    let mut n = 2;
    while ids.contains(&id) {
        id = format!("fallback_{n}");
        n += 1;
    }
    *fallback = Fallback::Node(id.clone());
    flow.nodes.push(Node { id, ..node });
}

/// The node `error_handling.fallback` names, if it names one.
pub fn fallback_node(flow: &Flow) -> Option<&str> {
    match flow.error_handling.as_ref()?.fallback.as_ref()? {
        Fallback::Node(id) => Some(id),
        _ => None,
    }
}

#[cfg(test)]
mod step_tests {
    use super::*;

    #[test]
    fn memory_nodes_become_memory_search_commands() {
        let mut flow: Flow = serde_saphyr::from_str(
            "name: m\nnodes:\n  - id: recall\n    memory: {search: \"deploy\\n port\", scope: team-a}\n  - id: plain\n    memory: {search: rust}\n",
        )
        .expect("flow");
        desugar_mcp(&mut flow).expect("desugar");
        assert_eq!(
            flow.nodes[0].command.as_deref(),
            Some("memory search deploy port scope=team-a")
        );
        assert_eq!(flow.nodes[1].command.as_deref(), Some("memory search rust"));
        let mut both: Flow = serde_saphyr::from_str(
            "name: m\nnodes:\n  - id: x\n    command: echo hi\n    memory: {search: rust}\n",
        )
        .expect("flow");
        assert_eq!(desugar_mcp(&mut both), Err("x".to_string()));
    }

    #[test]
    fn agent_nodes_become_agent_task_commands() {
        let mut flow: Flow = serde_saphyr::from_str(
            "name: a\nnodes:\n  - id: research\n    agent: researcher\n    task: |\n      比较 ${draft.output}\n      给出结论\n",
        )
        .expect("flow");
        desugar_mcp(&mut flow).expect("desugar");
        assert_eq!(
            flow.nodes[0].command.as_deref(),
            Some("agent task researcher 比较 ${draft.output} 给出结论")
        );
        let mut orphan: Flow =
            serde_saphyr::from_str("name: a\nnodes:\n  - id: t\n    task: hi\n").expect("flow");
        assert_eq!(desugar_mcp(&mut orphan), Err("t".to_string()));
    }
}
