//! Wire protocol v1: every frame a tab and the hub exchange, as closed serde enums.
//!
//! Only this module knows the JSON shape of frames. `docs/protocol.md` documents the same
//! frames; `tests/it/protocol_doc.rs` fails when the two drift apart.

use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

/// Protocol version the hub speaks; sent back in `welcome`.
pub const PROTOCOL_VERSION: u32 = 1;

/// A frame a tab sends to the hub (on `/realtime`, `/heartbeat` or `POST /send`).
///
/// Unknown fields are ignored so newer userscripts keep working with an older hub.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ClientFrame {
    /// Must be the first frame on every channel: proves the token and names the tab.
    Hello(Hello),
    /// A delta of the assistant's reply as it streams.
    Chunk(Chunk),
    /// The seed's flow-state report from the page.
    FlowReport(FlowReport),
    /// The manual's window-to-window data: delivered to `to_window` as a frame of its own,
    /// never typed, sent or scanned (docs/protocol.md).
    FlowData(FlowData),
    /// The reply is complete; `text` is the whole reply.
    TurnEnd(TurnEnd),
    /// What the person submitted in this tab.
    UserInput(UserInput),
    /// Progress of a task the hub gave this tab.
    TaskUpdate(TaskUpdate),
    /// Application heartbeat (the seed's FlowHeartbeat), on `/heartbeat`.
    Heartbeat(AppHeartbeat),
    /// The tab received a frame: over SSE, `ack {received: "welcome"}` confirms that the
    /// event stream reaches the tab. Over WebSocket it is accepted and ignored.
    Ack(Ack),
}

/// The `hello` frame's fields.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct Hello {
    pub token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    #[serde(default)]
    pub site: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// The longest `hello` fields the hub accepts, in bytes. A tab's label, site, version and id
/// are short names (the longest real ones are under 40 bytes); a longer one is refused. The
/// page's URL and title are shown and kept, so a longer one is cut to its cap instead: a
/// chat URL is under 200 bytes, a title under 300.
pub const HELLO_CAPS: HelloCaps = HelloCaps {
    token: 256,
    client_id: 128,
    site: 64,
    label: 128,
    version: 64,
    url: 4096,
    title: 1024,
};

/// See [`HELLO_CAPS`].
#[derive(Debug, Clone, Copy)]
pub struct HelloCaps {
    pub token: usize,
    pub client_id: usize,
    pub site: usize,
    pub label: usize,
    pub version: usize,
    pub url: usize,
    pub title: usize,
}

/// A `hello` field over its cap (see [`HELLO_CAPS`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("hello 字段过长 / hello field `{field}` is longer than {max} bytes")]
pub struct FieldTooLong {
    pub field: &'static str,
    pub max: usize,
}

impl Hello {
    /// The hello within [`HELLO_CAPS`]: the name fields checked, the URL and title cut on a
    /// character boundary.
    pub fn bounded(mut self) -> Result<Hello, FieldTooLong> {
        let caps = HELLO_CAPS;
        let names = [
            ("token", Some(&self.token), caps.token),
            ("client_id", self.client_id.as_ref(), caps.client_id),
            ("site", Some(&self.site), caps.site),
            ("label", self.label.as_ref(), caps.label),
            ("version", self.version.as_ref(), caps.version),
        ];
        for (field, value, max) in names {
            if value.is_some_and(|v| v.len() > max) {
                return Err(FieldTooLong { field, max });
            }
        }
        for (value, max) in [(&mut self.url, caps.url), (&mut self.title, caps.title)] {
            if let Some(v) = value {
                cut(v, max);
            }
        }
        Ok(self)
    }
}

/// Shortens `text` to at most `max` bytes, on a character boundary.
fn cut(text: &mut String, max: usize) {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
}

/// `chunk`: a delta of the assistant's reply. `text` is answer text only; the model's thinking,
/// which the adapters keep apart, travels in `reasoning` (never scanned for commands).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Chunk {
    pub turn_id: String,
    #[serde(default)]
    pub seq: u64,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
}

/// `flow_report`: the seed's page-side flow state.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct FlowReport {
    pub turn_id: String,
    pub event: String,
    #[serde(default)]
    pub quasi_status: Option<String>,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub fragment_count: Option<u64>,
}

/// `flow_data` (the manual's frame): data for another window. The hub sets `from_window`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct FlowData {
    /// Set by the hub on delivery (what a tab writes here is ignored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_window: Option<String>,
    /// The tab it is for: a label or a client id.
    pub to_window: String,
    #[serde(default)]
    pub data: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

/// `turn_end`: the whole reply; with `task_id` it answers that task.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct TurnEnd {
    pub turn_id: String,
    pub text: String,
    #[serde(default)]
    pub task_id: Option<String>,
    /// How the tab read the reply (docs/reliability.md); absent from older tabs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<AnswerSource>,
}

/// `turn_end.source`: the path a reply took to the hub.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerSource {
    /// The adapter parsed the site's stream.
    Network,
    /// The stream was missed or not understood; the reply was read from the page.
    Dom,
}

impl AnswerSource {
    pub fn as_str(self) -> &'static str {
        match self {
            AnswerSource::Network => "network",
            AnswerSource::Dom => "dom",
        }
    }
}

/// `user_input`: what the person submitted.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct UserInput {
    pub text: String,
}

/// `task_update`: progress of a task in the tab.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct TaskUpdate {
    /// The task; empty when the update is about a delivery (`deliver_id`).
    #[serde(default)]
    pub task_id: String,
    /// The delivery a `held` update is about (an automatic `deliver`, which has no task).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deliver_id: Option<String>,
    /// `attaching`: files attached so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done: Option<u32>,
    /// `attaching`: files to attach.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub of: Option<u32>,
    pub state: TaskState,
    #[serde(default)]
    pub error: Option<String>,
    /// Why the site refused, when the tab can tell (the decision engine cools or parks it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trouble: Option<Trouble>,
}

/// `task_update.trouble`: what kept the site from answering (docs/flows.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Trouble {
    /// HTTP 429, "消息频繁", usage-limit codes: the tab cools down.
    RateLimited,
    /// A captcha or human check: the tab is parked until a person acts.
    Captcha,
    /// A login page or expired session: parked until a person acts.
    Login,
    /// The request did not reach the site.
    Network,
    /// The site failed (5xx, an error code, a web page instead of a stream).
    SiteError,
    /// The adapter found no answer in the stream and the page showed none either: the
    /// adapter is outdated, not the site at fault (not counted against the tab).
    ParserMiss,
    /// The site refused a file of the task (type, size, count): the text was not sent.
    AttachmentRefused,
    /// The site withdrew its answer (a content filter): the prompt, not the tab, caused it;
    /// the withdrawn text is never an answer.
    ContentFilter,
}

impl Trouble {
    pub fn as_str(self) -> &'static str {
        match self {
            Trouble::RateLimited => "rate_limited",
            Trouble::Captcha => "captcha",
            Trouble::Login => "login",
            Trouble::Network => "network",
            Trouble::SiteError => "site_error",
            Trouble::ParserMiss => "parser_miss",
            Trouble::ContentFilter => "content_filter",
            Trouble::AttachmentRefused => "attachment_refused",
        }
    }
}

/// `ack`: the tab says which frame it received.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Ack {
    pub received: String,
}

/// The seed's FlowHeartbeat: what the page says about itself every few seconds.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct AppHeartbeat {
    #[serde(default)]
    pub time: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_role: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<Step>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cmd_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<u64>,
    /// The tab still waits for a person (captcha / login); absent once it works again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trouble: Option<Trouble>,
}

/// `heartbeat.step`: the seed sends its flow step as a name (`idle`, `start`, `streaming`,
/// `done`, `sending`, `batch`); older pages and tests send a number. Both are kept as sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Step {
    Name(String),
    Number(u64),
}

impl<'de> Deserialize<'de> for Step {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Step, D::Error> {
        struct Visit;
        impl serde::de::Visitor<'_> for Visit {
            type Value = Step;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(
                    "a step name (idle, start, streaming, done, sending, batch) or a number",
                )
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Step, E> {
                Ok(Step::Number(n))
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Step, E> {
                Ok(Step::Name(s.to_string()))
            }
        }
        d.deserialize_any(Visit)
    }
}

/// Where a tab stands in the team.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// 总指挥: where the person works; runs flows, receives results.
    Master,
    /// 包工头: splits a task among its group's workers and merges their answers.
    Foreman,
    /// 工人: answers tasks; commands in its replies are data.
    #[default]
    Worker,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Master => "master",
            Role::Foreman => "foreman",
            Role::Worker => "worker",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        match s.trim().to_ascii_lowercase().as_str() {
            "master" | "总指挥" => Some(Role::Master),
            "foreman" | "包工头" => Some(Role::Foreman),
            "worker" | "工人" => Some(Role::Worker),
            _ => None,
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The life of a task inside a tab.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    Accepted,
    Sent,
    Streaming,
    Done,
    Failed,
    /// The tab waits to type it: the person is typing in the input box.
    Held,
    /// The tab is attaching the task's files (`done` of `of`).
    Attaching,
}

/// Which agent session and round a `deliver` belongs to (docs/agents.md): the panel shows
/// "round k/N"; round 0 is a session's first message (the primer and the task).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentTag {
    /// The session id.
    pub session: String,
    /// The round these results close (0: the first message).
    pub round: u32,
    /// The round limit.
    pub of: u32,
    /// The agent's name (none for a looping master or foreman tab).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// What an agent loop's `deliver` adds to the frame (docs/protocol.md): `agent`, and the
/// files the tab attaches before it sends the text, as a task's `attachments` are (granted
/// to that connection until the delivery is seen or withdrawn; docs/files.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentDelivery {
    pub agent: AgentTag,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment>,
}

/// A frame the hub sends to a tab.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerFrame {
    /// Answer to a valid `hello`: the tab's identity.
    Welcome {
        client_id: String,
        role: Role,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        label: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        group: Option<String>,
        heartbeat_ms: u64,
        protocol: u32,
        /// Nothing is typed automatically into a box the person pressed a key in this
        /// recently (ms); the tab reports such a hold as `task_update {state: "held"}`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hold_ms: Option<u64>,
    },
    /// The answer to a command found in this tab's text: sent once per command.
    CmdResult {
        cmd_id: String,
        command: String,
        result: CmdOutcome,
    },
    /// Live output of a command still running; its `cmd_result` carries the same `cmd_id`.
    CmdOutput {
        cmd_id: String,
        command: String,
        chunk: String,
    },
    /// The minimal info card: type `prompt` into the tab and send it.
    Task(TaskFrame),
    /// Put text into the input box (aggregated results for the master).
    Deliver {
        text: String,
        auto_send: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        run_id: Option<String>,
        /// Idempotency key: a deliver can be sent again after a hub crash; the tab puts
        /// the text of one `deliver_id` into the input box once.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        deliver_id: Option<String>,
        /// An agent loop's message (docs/agents.md): its session and round (`agent`), for the
        /// panel, and the files it carries (`attachments`), both fields of the frame itself.
        #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
        agent: Option<AgentDelivery>,
    },
    /// Ask the tab to change its sending behaviour.
    FlowControl {
        action: String,
        reason: String,
        /// The answer to the manual's `flow_report`: whether the tab's own script may send
        /// the next message now (`action` `auto_send` or `wait`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        should_auto_send: Option<bool>,
    },
    /// Another window's `flow_data`, with `from_window` set by the hub; never typed or sent.
    FlowData(FlowData),
    /// Progress of a flow run, for the master's panel.
    FlowEvent {
        run_id: String,
        flow: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node_id: Option<String>,
        state: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<Value>,
    },
    /// Stop working on this task (its caller left): stop the site's reply and move on. The
    /// hub has already freed the task's slot; a later `turn_end` for it completes nothing.
    Cancel { task_id: String },
    /// Acknowledges a frame that has no other answer (SSE transport's POST /send).
    Ack { received: String },
    /// Something the tab sent was refused; the connection stays open.
    Error { code: ErrorCode, message: String },
    /// Answer to an app heartbeat.
    Heartbeat { time: u64 },
}

/// What a tab is told of a file of its task (`task.attachments`; docs/files.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// Random, valid only for the connection holding the task, until the task ends.
    pub id: String,
    pub name: String,
    pub mime: String,
    pub size: u64,
    /// Lower-case hex SHA-256: the tab checks what it fetched.
    pub sha256: String,
}

/// `cmd_result.result`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct CmdOutcome {
    pub success: bool,
    pub output: String,
}

/// The `task` frame's fields.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct TaskFrame {
    pub task_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    pub role: Role,
    pub priority: i32,
    pub prompt: Prompt,
    pub timeout_ms: u64,
    pub retry: u32,
    pub auto_send: bool,
    /// Files to attach before sending (fetched from `GET /files/ID`; docs/files.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment>,
}

/// Machine-readable reasons in `error` frames; documented in docs/protocol.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The frame is not valid JSON, or has no `type`.
    BadJson,
    /// Valid JSON of a known `type`, but a field is missing or has the wrong type (or a
    /// binary WebSocket frame, which the hub does not read).
    BadFrame,
    /// The `type` is not one this hub knows.
    UnknownType,
    /// The first frame was not `hello`, or a second `hello` arrived.
    HelloRequired,
    /// The token in `hello` is wrong.
    BadToken,
    /// The frame refers to a task this tab does not hold.
    UnknownTask,
    /// A command was refused (parse error, permission, policy).
    CommandRefused,
    /// `flow_data` names no window this tab may reach.
    UnknownWindow,
    /// The hub is at a configured limit (clients, runs, queue).
    Limit,
    /// The client id in `X-AIcard-Client` is unknown (SSE transport).
    UnknownClient,
    /// An `ack` of `welcome` came over `POST /send`, but no event stream of this tab waits
    /// for it (SSE transport).
    NoStream,
}

/// Why a text frame could not be turned into a `ClientFrame`.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum DecodeError {
    #[error("帧不是合法 JSON / frame is not valid JSON: {0}")]
    BadJson(String),
    #[error("未知帧类型 / unknown frame type `{0}`")]
    UnknownType(String),
    #[error("帧缺少 `type` 字段 / frame has no `type` field")]
    NoType,
    /// Valid JSON of a known type whose field is missing or of the wrong type.
    #[error("`{ty}` 帧的字段 `{field}` 无效 / `{ty}` frame, field `{field}`: {reason}")]
    BadField {
        ty: String,
        field: String,
        reason: String,
    },
}

impl DecodeError {
    pub fn code(&self) -> ErrorCode {
        match self {
            DecodeError::UnknownType(_) => ErrorCode::UnknownType,
            DecodeError::BadJson(_) | DecodeError::NoType => ErrorCode::BadJson,
            DecodeError::BadField { .. } => ErrorCode::BadFrame,
        }
    }
}

/// Every client frame `type` this hub understands (kept in step with `ClientFrame`).
pub const CLIENT_TYPES: &[&str] = &[
    "hello",
    "chunk",
    "flow_report",
    "flow_data",
    "turn_end",
    "user_input",
    "task_update",
    "heartbeat",
    "ack",
];

/// Every server frame `type` (kept in step with `ServerFrame`).
pub const SERVER_TYPES: &[&str] = &[
    "welcome",
    "cmd_result",
    "cmd_output",
    "task",
    "deliver",
    "flow_control",
    "flow_data",
    "flow_event",
    "cancel",
    "ack",
    "error",
    "heartbeat",
];

/// Parses one text frame, telling malformed JSON apart from an unknown `type` and from a
/// known type with a bad field.
pub fn decode(text: &str) -> Result<ClientFrame, DecodeError> {
    match serde_json::from_str::<ClientFrame>(text) {
        Ok(frame) => Ok(frame),
        Err(err) => {
            let value: Value =
                serde_json::from_str(text).map_err(|e| DecodeError::BadJson(e.to_string()))?;
            match value.get("type").and_then(Value::as_str) {
                None => Err(DecodeError::NoType),
                Some(t) if !CLIENT_TYPES.contains(&t) => Err(DecodeError::UnknownType(t.into())),
                Some(t) => Err(
                    bad_field(t, &value).unwrap_or_else(|| DecodeError::BadField {
                        ty: t.into(),
                        field: "?".into(),
                        reason: err.to_string(),
                    }),
                ),
            }
        }
    }
}

/// Decodes a known type's fields again, on the error path only, to name the bad field (the
/// tagged enum's own error does not say which field it was).
fn bad_field(ty: &str, value: &Value) -> Option<DecodeError> {
    fn check<T: serde::de::DeserializeOwned>(value: &Value) -> Result<(), (String, String)> {
        serde_path_to_error::deserialize::<_, T>(value)
            .map(drop)
            .map_err(|e| (e.path().to_string(), e.into_inner().to_string()))
    }
    let checked = match ty {
        "hello" => check::<Hello>(value),
        "chunk" => check::<Chunk>(value),
        "flow_report" => check::<FlowReport>(value),
        "flow_data" => check::<FlowData>(value),
        "turn_end" => check::<TurnEnd>(value),
        "user_input" => check::<UserInput>(value),
        "task_update" => check::<TaskUpdate>(value),
        "heartbeat" => check::<AppHeartbeat>(value),
        "ack" => check::<Ack>(value),
        _ => Ok(()),
    };
    let (path, reason) = checked.err()?;
    // A missing field is reported at the frame itself; its name is in the reason.
    let field = match path.as_str() {
        "." | "" => reason.split('`').nth(1).unwrap_or("?").to_string(),
        _ => path,
    };
    Some(DecodeError::BadField {
        ty: ty.into(),
        field,
        reason,
    })
}

/// Serialises a server frame; infallible for these types.
pub fn encode(frame: &ServerFrame) -> String {
    serde_json::to_string(frame).unwrap_or_else(|e| {
        // Only reachable if a Value inside `detail` holds a non-string map key.
        format!(r#"{{"type":"error","code":"bad_json","message":"encode: {e}"}}"#)
    })
}

/// Encodes `ServerFrame::Task(frame)` without moving or cloning the frame (the hub keeps it
/// to resend after a reconnect). The prompt goes in as the JSON string [`Prompt`] made once,
/// so the tasks of a fan-out escape it once between them, and the frame is made in one
/// allocation of its final size.
pub fn encode_task(frame: &TaskFrame) -> String {
    // The fields before and after `prompt`, in the order `ServerFrame::Task` writes them.
    #[derive(Serialize)]
    #[serde(tag = "type", rename = "task")]
    struct Head<'a> {
        task_id: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        parent_id: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        run_id: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        node_id: Option<&'a str>,
        role: Role,
        priority: i32,
    }
    #[derive(Serialize)]
    struct Tail<'a> {
        timeout_ms: u64,
        retry: u32,
        auto_send: bool,
        #[serde(skip_serializing_if = "<[_]>::is_empty")]
        attachments: &'a [Attachment],
    }
    let prompt = frame.prompt.json().get();
    let ids = [&frame.parent_id, &frame.run_id, &frame.node_id]
        .iter()
        .map(|id| id.as_deref().map_or(0, |id| id.len() + 16))
        .sum::<usize>();
    // One buffer, written in place: `{head…,"prompt":…,tail…}`, where head and tail are each
    // a JSON object whose `}` and `{` give way to the commas between them.
    let mut out = Vec::with_capacity(128 + frame.task_id.len() + ids + prompt.len());
    let head = serde_json::to_writer(
        &mut out,
        &Head {
            task_id: &frame.task_id,
            parent_id: frame.parent_id.as_deref(),
            run_id: frame.run_id.as_deref(),
            node_id: frame.node_id.as_deref(),
            role: frame.role,
            priority: frame.priority,
        },
    );
    out.pop(); // the head's `}`
    out.extend_from_slice(br#","prompt":"#);
    out.extend_from_slice(prompt.as_bytes());
    let tail_at = out.len();
    let tail = serde_json::to_writer(
        &mut out,
        &Tail {
            timeout_ms: frame.timeout_ms,
            retry: frame.retry,
            auto_send: frame.auto_send,
            attachments: &frame.attachments,
        },
    );
    if let Err(e) = head.and(tail) {
        return format!(r#"{{"type":"error","code":"bad_json","message":"encode: {e}"}}"#);
    }
    out[tail_at] = b','; // the tail's `{`
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// A task's prompt. Cloning it is a reference count, so the tasks of a fan-out (and the
/// copies kept to fail over, resend and recognise the hub's own typing) share one text,
/// and its JSON string encoding and its digest are made once, the first time they are
/// needed, not once per tab.
#[derive(Clone, Default)]
pub struct Prompt(Arc<PromptText>);

#[derive(Default)]
struct PromptText {
    text: Box<str>,
    json: OnceLock<Box<RawValue>>,
    digest: OnceLock<u64>,
}

/// A keyed hash of a text's trimmed form: how the hub recognises, in a tab's reports, a
/// prompt it typed there itself. The key is random per process, so a text cannot be made to
/// collide from outside.
pub fn text_digest(text: &str) -> u64 {
    use std::hash::BuildHasher;
    static KEY: OnceLock<std::collections::hash_map::RandomState> = OnceLock::new();
    KEY.get_or_init(Default::default).hash_one(text.trim())
}

impl Prompt {
    pub fn new(text: impl Into<String>) -> Prompt {
        Prompt(Arc::new(PromptText {
            text: text.into().into_boxed_str(),
            json: OnceLock::new(),
            digest: OnceLock::new(),
        }))
    }

    pub fn as_str(&self) -> &str {
        &self.0.text
    }

    /// [`text_digest`] of the text, worked out once for all the tabs of a fan-out.
    pub fn digest(&self) -> u64 {
        *self.0.digest.get_or_init(|| text_digest(&self.0.text))
    }

    /// The text as a JSON string literal, quotes and escapes included.
    fn json(&self) -> &RawValue {
        self.0.json.get_or_init(|| {
            let literal = serde_json::to_string(&*self.0.text).expect("a string encodes");
            RawValue::from_string(literal).expect("a string literal is JSON")
        })
    }
}

impl std::ops::Deref for Prompt {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl From<String> for Prompt {
    fn from(text: String) -> Prompt {
        Prompt::new(text)
    }
}

impl From<&str> for Prompt {
    fn from(text: &str) -> Prompt {
        Prompt::new(text)
    }
}

impl std::fmt::Debug for Prompt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl std::fmt::Display for Prompt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq for Prompt {
    fn eq(&self, other: &Prompt) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Prompt {}

impl PartialEq<str> for Prompt {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Prompt {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Prompt {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

/// A plain JSON string, whatever the format.
impl Serialize for Prompt {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Prompt {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Prompt, D::Error> {
        String::deserialize(d).map(Prompt::new)
    }
}

impl ServerFrame {
    pub fn error(code: ErrorCode, message: impl Into<String>) -> ServerFrame {
        ServerFrame::Error {
            code,
            message: message.into(),
        }
    }

    /// The frame's `type` tag, for logs and tests.
    pub fn type_name(&self) -> &'static str {
        match self {
            ServerFrame::Welcome { .. } => "welcome",
            ServerFrame::CmdResult { .. } => "cmd_result",
            ServerFrame::CmdOutput { .. } => "cmd_output",
            ServerFrame::Task(_) => "task",
            ServerFrame::Deliver { .. } => "deliver",
            ServerFrame::FlowControl { .. } => "flow_control",
            ServerFrame::FlowData(_) => "flow_data",
            ServerFrame::FlowEvent { .. } => "flow_event",
            ServerFrame::Cancel { .. } => "cancel",
            ServerFrame::Ack { .. } => "ack",
            ServerFrame::Error { .. } => "error",
            ServerFrame::Heartbeat { .. } => "heartbeat",
        }
    }
}

impl ClientFrame {
    pub fn type_name(&self) -> &'static str {
        match self {
            ClientFrame::Hello(_) => "hello",
            ClientFrame::Chunk(_) => "chunk",
            ClientFrame::FlowReport(_) => "flow_report",
            ClientFrame::FlowData(_) => "flow_data",
            ClientFrame::TurnEnd(_) => "turn_end",
            ClientFrame::UserInput(_) => "user_input",
            ClientFrame::TaskUpdate(_) => "task_update",
            ClientFrame::Heartbeat(_) => "heartbeat",
            ClientFrame::Ack(_) => "ack",
        }
    }
}

/// The `type` of an encoded server frame (`deliver`, `task`, …): what the registry needs to
/// know about a frame it keeps for an absent tab, without decoding the whole frame.
pub fn frame_type(text: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Tag {
        #[serde(rename = "type")]
        ty: String,
    }
    serde_json::from_str::<Tag>(text).ok().map(|t| t.ty)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_hello_and_ignores_unknown_fields() {
        let f = decode(r#"{"type":"hello","token":"t","site":"deepseek","extra":1}"#).unwrap();
        match f {
            ClientFrame::Hello(h) => {
                assert_eq!(h.token, "t");
                assert_eq!(h.site, "deepseek");
                assert_eq!(h.client_id, None);
            }
            other => panic!("expected hello, got {other:?}"),
        }
    }

    #[test]
    fn hello_names_over_their_cap_are_refused_and_url_and_title_cut() {
        let long = "x".repeat(600 * 1024);
        let hello = |f: &dyn Fn(&mut Hello)| {
            let mut h = Hello {
                token: "t".into(),
                site: "deepseek".into(),
                ..Hello::default()
            };
            f(&mut h);
            h.bounded()
        };
        for (field, set) in [
            (
                "label",
                &(|h: &mut Hello| h.label = Some(long.clone())) as &dyn Fn(&mut Hello),
            ),
            ("site", &|h: &mut Hello| h.site = long.clone()),
            ("version", &|h: &mut Hello| h.version = Some(long.clone())),
            ("client_id", &|h: &mut Hello| {
                h.client_id = Some(long.clone())
            }),
            ("token", &|h: &mut Hello| h.token = long.clone()),
        ] {
            let err = hello(set).expect_err(field);
            assert_eq!(err.field, field);
            assert!(err.to_string().contains("过长"), "{err}");
        }
        // "页" is three bytes: the cut lands on a character boundary.
        let url = format!("https://x.example/{}", "页".repeat(10_000));
        let h = hello(&|h: &mut Hello| {
            h.url = Some(url.clone());
            h.title = Some(long.clone());
        })
        .expect("url and title are cut, not refused");
        let (u, t) = (h.url.expect("url"), h.title.expect("title"));
        assert!(
            u.len() <= HELLO_CAPS.url && u.len() > HELLO_CAPS.url - 3,
            "{}",
            u.len()
        );
        assert!(url.starts_with(&u));
        assert_eq!(t.len(), HELLO_CAPS.title);
    }

    #[test]
    fn encode_task_matches_the_server_frame_encoding() {
        let mut frame = TaskFrame {
            task_id: "run/n/0/1".into(),
            parent_id: None,
            run_id: Some("run".into()),
            node_id: Some("n".into()),
            role: Role::Worker,
            priority: 3,
            prompt: "写一首诗 \"quoted\"\n".into(),
            timeout_ms: 1000,
            retry: 2,
            auto_send: true,
            attachments: Vec::new(),
        };
        for parent in [None, Some("p".to_string())] {
            frame.parent_id = parent;
            let by_ref = encode_task(&frame);
            assert_eq!(by_ref, encode(&ServerFrame::Task(frame.clone())));
            assert_eq!(decode_server(&by_ref), ServerFrame::Task(frame.clone()));
        }
        frame.run_id = None;
        frame.node_id = None;
        let bare = encode_task(&frame);
        assert_eq!(bare, encode(&ServerFrame::Task(frame.clone())));
        assert!(
            !bare.contains("run_id") && !bare.contains("node_id"),
            "{bare}"
        );
        // With files: the tail's array, and a long prompt past the first guess of the size.
        frame.attachments = vec![Attachment {
            id: "f1".into(),
            name: "图 1.png".into(),
            mime: "image/png".into(),
            size: 42,
            sha256: "ab".repeat(32),
        }];
        frame.prompt = "长".repeat(500).into();
        let with_files = encode_task(&frame);
        assert_eq!(with_files, encode(&ServerFrame::Task(frame.clone())));
        assert_eq!(decode_server(&with_files), ServerFrame::Task(frame));
    }

    #[test]
    fn a_prompt_is_shared_and_escaped_once() {
        let p = Prompt::from("行一\n\"two\" \u{1}");
        let copy = p.clone();
        assert!(
            std::ptr::eq(p.as_str(), copy.as_str()),
            "a clone shares the text"
        );
        assert_eq!(p.json().get(), r#""行一\n\"two\" \u0001""#);
        assert!(
            std::ptr::eq(p.json(), copy.json()),
            "encoded once for every clone"
        );
        assert_eq!(serde_json::to_string(&copy).unwrap(), p.json().get());
        // The digest: made once, the same for every clone, and the one a tab's report of the
        // same text (around its whitespace) is looked up by.
        assert_eq!(p.digest(), copy.digest());
        assert_eq!(p.digest(), text_digest(&format!("  {}\n", p.as_str())));
        assert_ne!(p.digest(), text_digest("行一"));
        let back: Prompt = serde_json::from_str(p.json().get()).unwrap();
        assert_eq!(back, p);
        assert_eq!(p, "行一\n\"two\" \u{1}");
    }

    fn decode_server(text: &str) -> ServerFrame {
        serde_json::from_str(text).expect("a server frame")
    }

    #[test]
    fn tells_bad_json_from_unknown_type() {
        assert!(matches!(decode("{nope"), Err(DecodeError::BadJson(_))));
        assert_eq!(
            decode(r#"{"type":"launch_missiles"}"#),
            Err(DecodeError::UnknownType("launch_missiles".into()))
        );
        assert_eq!(decode(r#"{"text":"x"}"#), Err(DecodeError::NoType));
        // Known type, missing required field: valid JSON, so bad_frame naming the field.
        let missing = decode(r#"{"type":"chunk","seq":1}"#).unwrap_err();
        assert_eq!(missing.code(), ErrorCode::BadFrame);
        assert!(
            matches!(&missing, DecodeError::BadField { field, .. } if field == "turn_id"),
            "{missing:?}"
        );
        assert_eq!(decode("{nope").unwrap_err().code(), ErrorCode::BadJson);
    }

    #[test]
    fn the_seeds_heartbeat_with_a_step_name_decodes() {
        let seed = r#"{"type":"heartbeat","flow_id":"f","flow_role":"client","step":"idle","cmd_count":0,"result_count":0,"pending":0,"timestamp":1764500000000}"#;
        match decode(seed).unwrap() {
            ClientFrame::Heartbeat(hb) => assert_eq!(hb.step, Some(Step::Name("idle".into()))),
            other => panic!("expected a heartbeat, got {other:?}"),
        }
        match decode(r#"{"type":"heartbeat","step":2}"#).unwrap() {
            ClientFrame::Heartbeat(hb) => assert_eq!(hb.step, Some(Step::Number(2))),
            other => panic!("expected a heartbeat, got {other:?}"),
        }
    }

    #[test]
    fn a_field_of_the_wrong_type_is_bad_frame_and_named() {
        for (frame, field) in [
            (r#"{"type":"heartbeat","step":true}"#, "step"),
            (r#"{"type":"heartbeat","pending":"two"}"#, "pending"),
            (
                r#"{"type":"chunk","turn_id":"t","seq":"3","text":"x"}"#,
                "seq",
            ),
            (r#"{"type":"hello","token":"t","role":"boss"}"#, "role"),
            (
                r#"{"type":"task_update","task_id":"t","state":"asleep"}"#,
                "state",
            ),
        ] {
            let err = decode(frame).unwrap_err();
            assert_eq!(err.code(), ErrorCode::BadFrame, "{frame}: {err}");
            assert!(
                matches!(&err, DecodeError::BadField { field: f, .. } if f == field),
                "{frame}: {err:?}"
            );
            assert!(err.to_string().contains(&format!("`{field}`")), "{err}");
        }
    }

    #[test]
    fn server_frames_carry_their_type_tag() {
        let f = ServerFrame::Deliver {
            text: "hi".into(),
            auto_send: false,
            run_id: None,
            deliver_id: None,
            agent: None,
        };
        let v: Value = serde_json::from_str(&encode(&f)).unwrap();
        assert_eq!(v["type"], "deliver");
        assert_eq!(v["type"], f.type_name());
    }

    #[test]
    fn an_agent_delivery_carries_its_tag_and_attachments_on_the_frame() {
        let att = Attachment {
            id: "f1".into(),
            name: "shot.png".into(),
            mime: "image/png".into(),
            size: 3,
            sha256: "ab".into(),
        };
        let f = ServerFrame::Deliver {
            text: "r".into(),
            auto_send: true,
            run_id: None,
            deliver_id: Some("s1-r1-s1".into()),
            agent: Some(AgentDelivery {
                agent: AgentTag {
                    session: "s1".into(),
                    round: 1,
                    of: 25,
                    name: None,
                },
                attachments: vec![att.clone()],
            }),
        };
        let v: Value = serde_json::from_str(&encode(&f)).unwrap();
        assert_eq!(v["agent"]["session"], "s1");
        assert_eq!(v["attachments"][0]["id"], "f1");
        assert_eq!(serde_json::from_value::<ServerFrame>(v).unwrap(), f);
        // No files: no `attachments` key; no agent: neither key.
        let mut bare = f.clone();
        if let ServerFrame::Deliver { agent: Some(a), .. } = &mut bare {
            a.attachments.clear();
        }
        let v: Value = serde_json::from_str(&encode(&bare)).unwrap();
        assert!(v.get("attachments").is_none(), "{v}");
        assert_eq!(serde_json::from_value::<ServerFrame>(v).unwrap(), bare);
        let plain = r#"{"type":"deliver","text":"x","auto_send":false}"#;
        let v: ServerFrame = serde_json::from_str(plain).unwrap();
        assert!(matches!(v, ServerFrame::Deliver { agent: None, .. }));
        let v: Value = serde_json::from_str(&encode(&v)).unwrap();
        assert!(
            v.get("agent").is_none() && v.get("attachments").is_none(),
            "{v}"
        );
    }

    #[test]
    fn type_lists_match_the_enums() {
        // Every listed client type decodes to a variant with the same name.
        let samples = [
            r#"{"type":"hello","token":"t"}"#,
            r#"{"type":"chunk","turn_id":"a","text":"x"}"#,
            r#"{"type":"flow_report","turn_id":"a","event":"flow_start"}"#,
            r#"{"type":"flow_data","to_window":"w","data":1}"#,
            r#"{"type":"turn_end","turn_id":"a","text":"x"}"#,
            r#"{"type":"user_input","text":"x"}"#,
            r#"{"type":"task_update","task_id":"t","state":"done"}"#,
            r#"{"type":"heartbeat","time":1}"#,
            r#"{"type":"ack","received":"welcome"}"#,
        ];
        let names: Vec<_> = samples
            .iter()
            .map(|s| decode(s).unwrap().type_name())
            .collect();
        assert_eq!(names, CLIENT_TYPES);
    }
}
