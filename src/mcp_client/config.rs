//! `mcp.json`: the MCP servers the command language may use, in Claude Desktop's format
//! unchanged (`{"mcpServers": {NAME: {command, args, env} | {url}}}`), with the keys Cursor
//! (`headers`), Cline (`disabled`, `autoApprove`, `timeout`, `type`) and Claude Code (`type`)
//! add. A key nobody here knows is a warning, never an error: people paste their files as
//! they are.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

/// How to reach one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A program speaking MCP on its stdin/stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
    },
    /// Streamable HTTP.
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
    /// The legacy HTTP+SSE transport, which rmcp does not speak.
    Sse { url: String },
}

/// One configured server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    pub name: String,
    pub transport: Transport,
    pub disabled: bool,
    /// Tools a role card's `mcp_auto_approve` may let a reply call (Cline's `autoApprove`).
    pub auto_approve: Vec<String>,
    /// Per-call timeout (Cline's `timeout`, seconds); the exec timeout otherwise.
    pub timeout: Option<Duration>,
}

/// The parsed file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpConfig {
    pub servers: BTreeMap<String, Server>,
    /// Unknown keys and entries skipped, one line each.
    pub warnings: Vec<String>,
    /// Where it was read from.
    pub path: Option<PathBuf>,
}

const SERVER_KEYS: &[&str] = &[
    "command",
    "args",
    "env",
    "url",
    "headers",
    "type",
    "transport",
    "disabled",
    "autoApprove",
    "timeout",
];

/// Reads `path`; a missing file is an empty configuration, a broken one an error.
pub fn load(path: &Path) -> Result<McpConfig, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(McpConfig {
                path: Some(path.to_path_buf()),
                ..McpConfig::default()
            })
        }
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let mut c = parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    c.path = Some(path.to_path_buf());
    for w in &c.warnings {
        tracing::warn!("{}: {w}", path.display());
    }
    Ok(c)
}

/// `?<mcp config add NAME COMMAND ARGS…>!`: adds (or replaces) a stdio server in the file at
/// `path`, keeping everything else in it as it was. Returns what changed, for the person.
pub fn add_server(
    path: &Path,
    name: &str,
    command: &str,
    args: &[String],
) -> Result<String, String> {
    let mut root = read_raw(path)?;
    let servers = servers_of(&mut root, path)?;
    let replaced = servers.contains_key(name);
    let mut entry = Map::new();
    entry.insert("command".into(), Value::String(command.to_string()));
    entry.insert(
        "args".into(),
        Value::Array(args.iter().cloned().map(Value::String).collect()),
    );
    servers.insert(name.to_string(), Value::Object(entry));
    write_raw(path, &root)?;
    let line = std::iter::once(command)
        .chain(args.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ");
    Ok(format!(
        "MCP 服务器{} / MCP server `{name}` {}: {line} ({})",
        if replaced { "已替换" } else { "已添加" },
        if replaced { "replaced" } else { "added" },
        path.display()
    ))
}

/// `?<mcp config remove NAME>!`: removes a server from the file at `path`.
pub fn remove_server(path: &Path, name: &str) -> Result<String, String> {
    let mut root = read_raw(path)?;
    let servers = servers_of(&mut root, path)?;
    if servers.remove(name).is_none() {
        let known: Vec<&str> = servers.keys().map(String::as_str).collect();
        return Err(format!(
            "没有这个 MCP 服务器 / no MCP server `{name}` in {} (configured: {})",
            path.display(),
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        ));
    }
    write_raw(path, &root)?;
    Ok(format!(
        "MCP 服务器已删除 / MCP server `{name}` removed ({})",
        path.display()
    ))
}

/// The file as JSON (`{}` when it does not exist yet).
fn read_raw(path: &Path) -> Result<Value, String> {
    match std::fs::read_to_string(path) {
        Ok(t) => serde_json::from_str(&t).map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Value::Object(Map::new())),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// The `mcpServers` object of the file, created when missing.
fn servers_of<'a>(root: &'a mut Value, path: &Path) -> Result<&'a mut Map<String, Value>, String> {
    let Value::Object(top) = root else {
        return Err(format!("{}: expected a JSON object", path.display()));
    };
    match top
        .entry("mcpServers")
        .or_insert_with(|| Value::Object(Map::new()))
    {
        Value::Object(m) => Ok(m),
        _ => Err(format!("{}: `mcpServers` is not an object", path.display())),
    }
}

/// Writes the file whole: a temporary file beside it, then a rename.
fn write_raw(path: &Path, root: &Value) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(root).map_err(|e| e.to_string())?;
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text + "\n")
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn strings(v: Option<&Value>, what: &str, warnings: &mut Vec<String>) -> Vec<String> {
    match v {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|x| match x {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                other => {
                    warnings.push(format!("{what}: skipped a non-string item {other}"));
                    None
                }
            })
            .collect(),
        Some(other) => {
            warnings.push(format!("{what}: expected a list, got {other}"));
            Vec::new()
        }
    }
}

fn string_map(
    v: Option<&Value>,
    what: &str,
    warnings: &mut Vec<String>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    match v {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for (k, v) in m {
                match v {
                    Value::String(s) => {
                        out.insert(k.clone(), s.clone());
                    }
                    Value::Number(_) | Value::Bool(_) => {
                        out.insert(k.clone(), v.to_string());
                    }
                    _ => warnings.push(format!("{what}.{k}: expected a string")),
                }
            }
        }
        Some(other) => warnings.push(format!("{what}: expected an object, got {other}")),
    }
    out
}

/// Parses the text of an `mcp.json`.
pub fn parse(text: &str) -> Result<McpConfig, String> {
    let root: Value = serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?;
    let Value::Object(root) = root else {
        return Err("expected a JSON object with `mcpServers`".into());
    };
    let mut warnings = Vec::new();
    for k in root.keys() {
        if k != "mcpServers" {
            warnings.push(format!("unknown key `{k}` ignored"));
        }
    }
    let empty = Map::new();
    let servers = match root.get("mcpServers") {
        None => &empty,
        Some(Value::Object(m)) => m,
        Some(_) => return Err("`mcpServers` must be an object".into()),
    };
    let mut out = BTreeMap::new();
    for (name, v) in servers {
        let Value::Object(s) = v else {
            warnings.push(format!("server `{name}`: expected an object; skipped"));
            continue;
        };
        for k in s.keys() {
            if !SERVER_KEYS.contains(&k.as_str()) {
                warnings.push(format!("server `{name}`: unknown key `{k}` ignored"));
            }
        }
        let kind = s
            .get("type")
            .or_else(|| s.get("transport"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_ascii_lowercase();
        let what = format!("server `{name}`");
        let transport = match (
            s.get("command").and_then(Value::as_str),
            s.get("url").and_then(Value::as_str),
        ) {
            (Some(cmd), _) => Transport::Stdio {
                command: cmd.to_string(),
                args: strings(s.get("args"), &format!("{what}.args"), &mut warnings),
                env: string_map(s.get("env"), &format!("{what}.env"), &mut warnings),
            },
            (None, Some(url)) if kind == "sse" => Transport::Sse {
                url: url.to_string(),
            },
            (None, Some(url)) => Transport::Http {
                url: url.to_string(),
                headers: string_map(s.get("headers"), &format!("{what}.headers"), &mut warnings),
            },
            (None, None) => {
                warnings.push(format!("{what}: neither `command` nor `url`; skipped"));
                continue;
            }
        };
        let timeout = match s.get("timeout") {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) => n
                .as_f64()
                .filter(|t| t.is_finite() && *t > 0.0)
                .map(|t| Duration::from_secs_f64(t.min(3600.0))),
            Some(other) => {
                warnings.push(format!("{what}.timeout: expected seconds, got {other}"));
                None
            }
        };
        out.insert(
            name.clone(),
            Server {
                name: name.clone(),
                transport,
                disabled: s.get("disabled").and_then(Value::as_bool).unwrap_or(false),
                auto_approve: strings(
                    s.get("autoApprove"),
                    &format!("{what}.autoApprove"),
                    &mut warnings,
                ),
                timeout,
            },
        );
    }
    Ok(McpConfig {
        servers: out,
        warnings,
        path: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_desktop_cursor_and_cline_files_parse_unchanged() {
        let text = r#"{
          "mcpServers": {
            "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}},
            "remote": {"url": "http://127.0.0.1:9/mcp", "headers": {"X-Key": "k"}},
            "old": {"url": "http://127.0.0.1:9/sse", "type": "sse"},
            "cline": {"command": "node", "args": ["x.js"], "disabled": true,
                      "autoApprove": ["read"], "timeout": 90, "type": "stdio", "alwaysAllow": []}
          },
          "globalShortcut": "x"
        }"#;
        let c = parse(text).unwrap();
        assert_eq!(c.servers.len(), 4);
        assert_eq!(
            c.servers["time"].transport,
            Transport::Stdio {
                command: "uvx".into(),
                args: vec!["mcp-server-time".into()],
                env: [("TZ".to_string(), "UTC".to_string())].into(),
            }
        );
        assert!(matches!(c.servers["old"].transport, Transport::Sse { .. }));
        let cline = &c.servers["cline"];
        assert!(cline.disabled);
        assert_eq!(cline.auto_approve, vec!["read".to_string()]);
        assert_eq!(cline.timeout, Some(Duration::from_secs(90)));
        assert!(
            c.warnings.iter().any(|w| w.contains("alwaysAllow")),
            "{:?}",
            c.warnings
        );
        assert!(
            c.warnings.iter().any(|w| w.contains("globalShortcut")),
            "{:?}",
            c.warnings
        );
        assert!(parse("[1]").is_err());
        assert!(parse("{").is_err());
    }

    #[test]
    fn config_add_and_remove_keep_the_rest_of_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mcp.json");
        std::fs::write(
            &path,
            r#"{"mcpServers": {"web": {"url": "http://x/mcp", "autoApprove": ["get"]}}, "other": 1}"#,
        )
        .unwrap();
        let said = add_server(&path, "filesystem", "npx", &["-y".into(), "fs".into()]).unwrap();
        assert!(
            said.contains("added") && said.contains("npx -y fs"),
            "{said}"
        );
        let c = load(&path).unwrap();
        assert_eq!(
            c.servers["filesystem"].transport,
            Transport::Stdio {
                command: "npx".into(),
                args: vec!["-y".into(), "fs".into()],
                env: BTreeMap::new(),
            }
        );
        assert_eq!(c.servers["web"].auto_approve, vec!["get".to_string()]);
        let raw: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(raw["other"], 1);
        assert!(add_server(&path, "filesystem", "fs-server", &[])
            .unwrap()
            .contains("replaced"));
        assert!(remove_server(&path, "filesystem")
            .unwrap()
            .contains("removed"));
        let e = remove_server(&path, "filesystem").unwrap_err();
        assert!(
            e.contains("no MCP server `filesystem`") && e.contains("web"),
            "{e}"
        );
        assert!(!load(&path).unwrap().servers.contains_key("filesystem"));
    }

    #[test]
    fn config_add_creates_a_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("mcp.json");
        add_server(&path, "s", "prog", &[]).unwrap();
        assert!(load(&path).unwrap().servers.contains_key("s"));
    }
}
