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

/// One message, its content reduced to text (a file part leaves `[file: NAME]` where it was).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub role: String,
    pub name: Option<String>,
    pub content: String,
    /// Its `image_url` and `file` parts, not yet decoded (`super::attach` keeps them).
    pub files: Vec<FilePart>,
}

/// An `image_url` or `file` content part (docs/api.md "Files and images").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePart {
    /// Where it is in the request (`messages[0].content[1]`), for the error's `param`.
    pub param: String,
    /// The name the tab attaches it under.
    pub name: String,
    pub source: FileSource,
}

/// Where a file part's bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileSource {
    /// Base64 in the request (a `data:` URL or `file_data`), with its declared type.
    Data { mime: String, base64: String },
    /// A remote `http(s)` image URL (fetched only with `--fetch-urls`).
    Url(String),
}

/// Image types an `image_url` may carry (every site's composer takes them).
pub const IMAGE_TYPES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];

/// Types a `file` part may carry: the images, and the documents every site takes.
pub const FILE_TYPES: &[&str] = &[
    "application/pdf",
    "text/plain",
    "text/markdown",
    "text/csv",
    "application/json",
    "application/msword",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "application/vnd.ms-excel",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "application/vnd.ms-powerpoint",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation",
];

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
        let v: Value = serde_json::from_slice(body).map_err(|e| invalid_json(&e))?;
        ChatRequest::from_value(v)
    }

    /// Checks a parsed body; the file parts' base64 is moved out, not copied.
    pub fn from_value(mut v: Value) -> Result<ChatRequest, ApiError> {
        let mut raw = v
            .get_mut("messages")
            .and_then(Value::as_array_mut)
            .map(std::mem::take);
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
        let Some(raw) = raw.as_mut() else {
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
        let mut count = 0;
        for (i, m) in raw.iter_mut().enumerate() {
            messages.push(message(i, m, &mut count)?);
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

    /// Every file part of every message, in order (moved out of the request).
    pub fn take_files(&mut self) -> Vec<FilePart> {
        self.messages
            .iter_mut()
            .flat_map(|m| std::mem::take(&mut m.files))
            .collect()
    }

    /// Whether any message carries a file part.
    pub fn has_files(&self) -> bool {
        self.messages.iter().any(|m| !m.files.is_empty())
    }
}

/// 400 `invalid_json`.
pub fn invalid_json(e: &serde_json::Error) -> ApiError {
    ApiError::invalid(
        "invalid_json",
        format!("请求体不是合法 JSON / body is not valid JSON: {e}"),
    )
}

fn message(i: usize, m: &mut Value, count: &mut usize) -> Result<Message, ApiError> {
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
    let mut files = Vec::new();
    let content = match m.get_mut("content") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::new();
            for (j, p) in parts.iter_mut().enumerate() {
                let param = format!("messages[{i}].content[{j}]");
                let ty = p
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                match ty.as_str() {
                    "text" | "input_text" => texts.push(
                        p.get("text")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                    ),
                    "image_url" | "input_image" | "file" | "input_file" => {
                        *count += 1;
                        let part = file_part(&ty, p, param, *count)?;
                        texts.push(format!("[file: {}]", part.name));
                        files.push(part);
                    }
                    other => {
                        return Err(ApiError::unsupported(
                            &param,
                            &format!(
                            "content part `{other}` is not supported; text, image_url and file are"
                        ),
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
        files,
    })
}

/// A string field moved out of the request (its base64 is not copied).
fn take_str(v: Option<&mut Value>) -> Option<String> {
    match v {
        Some(Value::String(s)) => Some(std::mem::take(s)),
        _ => None,
    }
}

/// An `image_url` part (`{"image_url": {"url"}}`, or the Responses form `{"image_url": "…"}`)
/// or a `file` part (`{"file": {"file_data", "filename"}}`); the `n`-th file of the request.
fn file_part(ty: &str, p: &mut Value, param: String, n: usize) -> Result<FilePart, ApiError> {
    let bad = |code: &'static str, msg: String| ApiError::invalid(code, msg).param(param.clone());
    if ty == "image_url" || ty == "input_image" {
        let url = match p.get_mut("image_url") {
            Some(Value::Object(o)) => take_str(o.get_mut("url")),
            other => take_str(other),
        }
        .ok_or_else(|| bad("invalid_image_url", "`image_url.url` is missing".into()))?;
        if url.starts_with("http://") || url.starts_with("https://") {
            return Ok(FilePart {
                param,
                name: format!("image-{n}.png"),
                source: FileSource::Url(url),
            });
        }
        let (mime, base64) = data_url(url).map_err(|why| bad("invalid_image_url", why))?;
        if !IMAGE_TYPES.contains(&mime.as_str()) {
            return Err(unsupported_type(&param, &mime, IMAGE_TYPES));
        }
        let ext = mime
            .rsplit('/')
            .next()
            .unwrap_or("png")
            .replace("jpeg", "jpg");
        return Ok(FilePart {
            param,
            name: format!("image-{n}.{ext}"),
            source: FileSource::Data { mime, base64 },
        });
    }
    let f = match p.get_mut("file") {
        Some(Value::Object(o)) => o,
        _ => {
            return Err(bad(
                "invalid_value",
                "`file` must be an object with `file_data` and `filename`".into(),
            ))
        }
    };
    if f.get("file_id").is_some_and(present) {
        return Err(ApiError::unsupported(
            &param,
            "`file_id` names a file in OpenAI's storage, which the hub has not: send `file_data` (base64) and `filename`",
        ));
    }
    let filename = f
        .get("filename")
        .and_then(Value::as_str)
        .map(clean_name)
        .filter(|n| !n.is_empty());
    let data = take_str(f.get_mut("file_data")).ok_or_else(|| {
        bad(
            "invalid_value",
            "`file.file_data` (base64) is missing".into(),
        )
    })?;
    let (mime, base64) = if data.starts_with("data:") {
        data_url(data).map_err(|why| bad("invalid_file_data", why))?
    } else {
        let by_name = crate::hub::files::mime_of(filename.as_deref().unwrap_or(""));
        (by_name.to_string(), data)
    };
    if !(FILE_TYPES.contains(&mime.as_str()) || IMAGE_TYPES.contains(&mime.as_str())) {
        let all: Vec<&str> = IMAGE_TYPES.iter().chain(FILE_TYPES).copied().collect();
        return Err(unsupported_type(&param, &mime, &all));
    }
    let name = filename.unwrap_or_else(|| format!("file-{n}"));
    Ok(FilePart {
        param,
        name,
        source: FileSource::Data { mime, base64 },
    })
}

/// A file name from a client: its last component, without control characters.
fn clean_name(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    base.chars()
        .filter(|c| !c.is_control())
        .collect::<String>()
        .trim()
        .to_string()
}

fn unsupported_type(param: &str, mime: &str, accepted: &[&str]) -> ApiError {
    ApiError::invalid(
        "unsupported_file_type",
        format!(
            "不支持的文件类型 / `{mime}` is not a type the tabs take here; accepted: {}",
            accepted.join(", ")
        ),
    )
    .param(param)
}

/// `data:TYPE[;param]*;base64,DATA` → (type, base64); the error says what is wrong.
pub fn data_url(url: String) -> Result<(String, String), String> {
    let Some(rest) = url.strip_prefix("data:") else {
        let scheme = url.split(':').next().unwrap_or("");
        return Err(format!(
            "not a data: URL or an http(s) URL (`{}:`)",
            scheme.chars().take(16).collect::<String>()
        ));
    };
    let Some(comma) = rest.find(',') else {
        return Err("a data: URL needs a `,` before its data".into());
    };
    let header = &rest[..comma];
    let mut params = header.split(';');
    let mime = params.next().unwrap_or("").trim().to_ascii_lowercase();
    if mime.is_empty() {
        return Err("the data: URL names no media type (data:image/png;base64,…)".into());
    }
    if !params.any(|p| p.trim().eq_ignore_ascii_case("base64")) {
        return Err("only base64 data: URLs are taken (data:TYPE;base64,…)".into());
    }
    let skip = "data:".len() + comma + 1;
    let mut url = url;
    url.drain(..skip);
    if url.is_empty() {
        return Err("the data: URL holds no data".into());
    }
    Ok((mime, url))
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
        b["messages"] = json!([{"role":"user","content":[{"type":"text","text":"see"},{"type":"input_audio","input_audio":{}}]}]);
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

    #[test]
    fn image_and_file_parts_become_files_and_leave_their_name_in_the_text() {
        let mut r = parse(json!({"model":"auto","messages":[{"role":"user","content":[
            {"type":"text","text":"看"},
            {"type":"image_url","image_url":{"url":"data:image/jpeg;base64,AAAA"}},
            {"type":"input_image","image_url":"https://example.com/x.png"},
            {"type":"file","file":{"filename":"dir/报告.pdf","file_data":"JVBERg=="}}
        ]}]}))
        .unwrap();
        assert_eq!(
            r.prompt(),
            "看\n[file: image-1.jpg]\n[file: image-2.png]\n[file: 报告.pdf]"
        );
        let files = r.take_files();
        assert_eq!(
            files[0].source,
            FileSource::Data {
                mime: "image/jpeg".into(),
                base64: "AAAA".into()
            }
        );
        assert_eq!(
            files[1].source,
            FileSource::Url("https://example.com/x.png".into())
        );
        assert_eq!(files[2].name, "报告.pdf");
        assert_eq!(files[2].param, "messages[0].content[3]");
        assert!(
            matches!(&files[2].source, FileSource::Data { mime, .. } if mime == "application/pdf")
        );
    }

    #[test]
    fn data_urls_are_base64_with_a_type() {
        assert_eq!(
            data_url("data:image/PNG;charset=x;base64,QUJD".into()),
            Ok(("image/png".into(), "QUJD".into()))
        );
        for bad in [
            "data:image/png,QUJD",
            "data:;base64,QUJD",
            "data:image/png;base64",
            "data:image/png;base64,",
            "javascript:alert(1)",
        ] {
            assert!(data_url(bad.into()).is_err(), "{bad}");
        }
    }
}
