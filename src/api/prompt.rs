//! The request body of `POST /v1/chat/completions`, what we refuse in it, and the one text a
//! tab receives: the last user message with the earlier messages flattened above it.

use serde_json::Value;

use super::error::ApiError;

/// The parts of a chat request the hub honours.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<Message>,
    pub stream: bool,
    /// `stream_options.include_usage`: an extra usage chunk before `[DONE]`.
    pub include_usage: bool,
}

/// One message, its content reduced to text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub role: String,
    pub name: Option<String>,
    pub content: String,
}

/// Largest prompt handed to a tab (bytes).
pub const MAX_PROMPT_BYTES: usize = 512 * 1024;

/// Fields that ask for something a chat tab cannot do; present and not empty → 400.
const REFUSED: &[(&str, &str)] = &[
    (
        "tools",
        "chat tabs cannot call tools / 网页对话不能调用工具",
    ),
    (
        "functions",
        "chat tabs cannot call functions / 网页对话不能调用函数",
    ),
    (
        "function_call",
        "chat tabs cannot call functions / 网页对话不能调用函数",
    ),
    (
        "tool_choice",
        "chat tabs cannot call tools / 网页对话不能调用工具",
    ),
    ("audio", "chat tabs answer in text / 只支持文本"),
];

fn present(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Array(a) => !a.is_empty(),
        Value::String(s) => !(s.is_empty() || s == "none"),
        Value::Bool(b) => *b,
        _ => true,
    }
}

impl ChatRequest {
    /// Parses and checks a request body; the error names the field.
    pub fn parse(body: &[u8]) -> Result<ChatRequest, ApiError> {
        let v: Value = serde_json::from_slice(body).map_err(|e| {
            ApiError::invalid(
                "invalid_json",
                format!("请求体不是合法 JSON / body is not valid JSON: {e}"),
            )
        })?;
        let Some(obj) = v.as_object() else {
            return Err(ApiError::invalid(
                "invalid_request",
                "请求体必须是对象 / body must be a JSON object",
            ));
        };
        for (field, why) in REFUSED {
            if obj.get(*field).is_some_and(present) {
                return Err(ApiError::unsupported(field, why));
            }
        }
        if let Some(n) = obj.get("n").filter(|n| !n.is_null()) {
            match n.as_u64() {
                Some(1) => {}
                Some(0) | None => {
                    return Err(ApiError::invalid("invalid_value", "`n` must be 1").param("n"))
                }
                Some(_) => {
                    return Err(ApiError::unsupported(
                        "n",
                        "a tab gives one answer per prompt / 每个提示只有一个回答",
                    ))
                }
            }
        }
        if obj
            .get("logprobs")
            .is_some_and(|l| l.as_bool() == Some(true))
        {
            return Err(ApiError::unsupported(
                "logprobs",
                "chat sites do not expose log probabilities",
            ));
        }
        // A web chat cannot be held to a JSON schema: refused, never ignored, so a client such
        // as LangChain's `with_structured_output` learns it now, not from bad JSON later.
        if let Some(f) = obj.get("response_format").filter(|f| !f.is_null()) {
            let kind = f.get("type").and_then(Value::as_str).unwrap_or("");
            if kind != "text" {
                return Err(ApiError::unsupported(
                    "response_format",
                    "chat tabs cannot be held to JSON output; ask for JSON in the prompt and parse the text / 网页对话无法保证 JSON 输出：请在提示里要求 JSON 并自行解析",
                ));
            }
        }
        if let Some(m) = obj.get("modalities").and_then(Value::as_array) {
            if m.iter().any(|x| x.as_str() != Some("text")) {
                return Err(ApiError::unsupported(
                    "modalities",
                    "chat tabs answer in text / 只支持文本",
                ));
            }
        }
        let model = match obj.get("model") {
            Some(Value::String(m)) if !m.trim().is_empty() => m.trim().to_string(),
            _ => {
                return Err(ApiError::invalid(
                    "invalid_value",
                    "`model` is required (see GET /v1/models)",
                )
                .param("model"))
            }
        };
        let stream = match obj.get("stream") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                return Err(
                    ApiError::invalid("invalid_type", "`stream` must be a boolean").param("stream"),
                )
            }
        };
        let include_usage = obj
            .get("stream_options")
            .and_then(|o| o.get("include_usage"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let Some(raw) = obj.get("messages").and_then(Value::as_array) else {
            return Err(
                ApiError::invalid("invalid_value", "`messages` must be a non-empty array")
                    .param("messages"),
            );
        };
        if raw.is_empty() {
            return Err(
                ApiError::invalid("invalid_value", "`messages` must be a non-empty array")
                    .param("messages"),
            );
        }
        let mut messages = Vec::with_capacity(raw.len());
        for (i, m) in raw.iter().enumerate() {
            messages.push(message(i, m)?);
        }
        if messages.last().map(|m| m.role.as_str()) != Some("user") {
            return Err(ApiError::invalid(
                "invalid_value",
                "最后一条消息必须来自 user / the last message must have role `user` (the tab answers it)",
            )
            .param(format!("messages[{}].role", messages.len() - 1)));
        }
        Ok(ChatRequest {
            model,
            messages,
            stream,
            include_usage,
        })
    }

    /// The last user message's text.
    pub fn last_user(&self) -> &str {
        self.messages
            .last()
            .map(|m| m.content.as_str())
            .unwrap_or("")
    }

    /// The first user message's text: the same in every turn of one conversation (a client
    /// sends the whole conversation each time), so it names the conversation.
    pub fn first_user(&self) -> Option<&str> {
        self.messages
            .iter()
            .find(|m| m.role == "user")
            .map(|m| m.content.as_str())
    }

    /// The text typed into the tab (see docs/api.md, "Prompt").
    pub fn prompt(&self) -> String {
        flatten(&self.messages)
    }
}

fn message(i: usize, m: &Value) -> Result<Message, ApiError> {
    let role = match m.get("role").and_then(Value::as_str) {
        Some(r @ ("system" | "developer" | "user" | "assistant")) => r.to_string(),
        Some(r @ ("tool" | "function")) => {
            return Err(ApiError::unsupported(
                &format!("messages[{i}].role"),
                &format!("`{r}` messages need tool calling, which chat tabs cannot do"),
            ))
        }
        _ => {
            return Err(ApiError::invalid(
                "invalid_value",
                "role must be system, developer, user or assistant",
            )
            .param(format!("messages[{i}].role")))
        }
    };
    if m.get("tool_calls").is_some_and(present) {
        return Err(ApiError::unsupported(
            &format!("messages[{i}].tool_calls"),
            "chat tabs cannot call tools",
        ));
    }
    let content = match m.get("content") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::new();
            for (j, p) in parts.iter().enumerate() {
                let ty = p.get("type").and_then(Value::as_str).unwrap_or("");
                match ty {
                    "text" | "input_text" => texts.push(
                        p.get("text")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                    ),
                    "image_url" | "input_image" | "image" => return Err(ApiError::unsupported(
                        &format!("messages[{i}].content[{j}]"),
                        "images are not supported: the hub types text into the tab / 不支持图片",
                    )),
                    other => {
                        return Err(ApiError::unsupported(
                            &format!("messages[{i}].content[{j}]"),
                            &format!("content part `{other}` is not supported; only text"),
                        ))
                    }
                }
            }
            texts.join("\n")
        }
        Some(_) => {
            return Err(ApiError::invalid(
                "invalid_type",
                "content must be a string or an array of parts",
            )
            .param(format!("messages[{i}].content")))
        }
    };
    let name = m.get("name").and_then(Value::as_str).map(str::to_string);
    Ok(Message {
        role,
        name,
        content,
    })
}

/// Header above the earlier messages.
pub const CONTEXT_HEADER: &str = "以下是此前的对话 / Conversation so far:";
/// Header above the message the tab answers.
pub const REPLY_HEADER: &str = "请回复下面这条消息 / Reply to this message:";

/// The prompt for a conversation whose last message is the user's: that message alone when it
/// is the only one; otherwise every earlier message as a `[role]` (or `[role name]`) block
/// under [`CONTEXT_HEADER`], then [`REPLY_HEADER`] and the last message.
pub fn flatten(messages: &[Message]) -> String {
    let Some((last, earlier)) = messages.split_last() else {
        return String::new();
    };
    if earlier.is_empty() {
        return last.content.clone();
    }
    let mut out =
        String::with_capacity(messages.iter().map(|m| m.content.len() + 16).sum::<usize>() + 80);
    out.push_str(CONTEXT_HEADER);
    out.push_str("\n\n");
    for m in earlier {
        out.push('[');
        out.push_str(&m.role);
        if let Some(n) = &m.name {
            out.push(' ');
            out.push_str(n);
        }
        out.push_str("]\n");
        out.push_str(m.content.trim_end_matches('\n'));
        out.push_str("\n\n");
    }
    out.push_str(REPLY_HEADER);
    out.push_str("\n\n");
    out.push_str(&last.content);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<ChatRequest, ApiError> {
        ChatRequest::parse(v.to_string().as_bytes())
    }

    #[test]
    fn a_single_user_message_is_typed_as_is() {
        let r = parse(json!({"model":"site/sim","messages":[{"role":"user","content":"你好\n"}]}))
            .unwrap();
        assert_eq!(r.prompt(), "你好\n");
        assert!(!r.stream);
    }

    #[test]
    fn earlier_messages_are_flattened_above_the_last_user_message() {
        let r = parse(json!({"model":"auto","stream":true,"messages":[
            {"role":"system","content":"Be terse."},
            {"role":"user","content":"Hi","name":"ann"},
            {"role":"assistant","content":"Hello!\n"},
            {"role":"user","content":[{"type":"text","text":"What is"},{"type":"text","text":"2+2?"}]}
        ]}))
        .unwrap();
        assert_eq!(
            r.prompt(),
            "以下是此前的对话 / Conversation so far:\n\n\
             [system]\nBe terse.\n\n\
             [user ann]\nHi\n\n\
             [assistant]\nHello!\n\n\
             请回复下面这条消息 / Reply to this message:\n\n\
             What is\n2+2?"
        );
        assert_eq!(r.last_user(), "What is\n2+2?");
        assert!(r.stream);
    }

    #[test]
    fn what_a_tab_cannot_honour_is_refused_by_name() {
        let base = || json!({"model":"auto","messages":[{"role":"user","content":"x"}]});
        let cases = [
            (
                "tools",
                json!([{"type":"function","function":{"name":"f"}}]),
                "tools",
            ),
            ("n", json!(2), "n"),
            ("tool_choice", json!("auto"), "tool_choice"),
        ];
        for (field, value, param) in cases {
            let mut b = base();
            b[field] = value;
            let e = parse(b).unwrap_err();
            assert_eq!(
                (e.status.as_u16(), e.code, e.param.as_deref()),
                (400, "unsupported_parameter", Some(param))
            );
        }
        let mut b = base();
        b["messages"] = json!([{"role":"user","content":[{"type":"text","text":"see"},{"type":"image_url","image_url":{"url":"data:"}}]}]);
        let e = parse(b).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("messages[0].content[1]"));
        assert_eq!(e.code, "unsupported_parameter");
        // Empty tools, n = 1 and tool_choice "none" ask for nothing.
        let mut b = base();
        b["tools"] = json!([]);
        b["n"] = json!(1);
        b["tool_choice"] = json!("none");
        assert!(parse(b).is_ok());
    }

    #[test]
    fn malformed_requests_name_their_field() {
        assert_eq!(
            ChatRequest::parse(b"{nope").unwrap_err().code,
            "invalid_json"
        );
        let e = parse(json!({"messages":[{"role":"user","content":"x"}]})).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("model"));
        let e = parse(json!({"model":"auto","messages":[]})).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("messages"));
        let e = parse(json!({"model":"auto","messages":[{"role":"user","content":"x"},{"role":"assistant","content":"y"}]})).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("messages[1].role"));
    }
}
