//! `mcp list`, `mcp use SERVER TOOL [key=value… | {JSON}]`, `mcp resources SERVER`,
//! `mcp read SERVER URI` and `mcp config add|remove …`.

use super::{ParseError, Parser, Span};
use crate::commands::ast::{Command, McpArgs, McpCmd};

/// Server and tool names: what `mcp.json` keys and MCP tool names use.
fn is_tool_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | '-' | '/' | ':'))
}

impl<'a> Parser<'a> {
    /// mcp := "mcp" ( "list" | "use" SERVER TOOL ( {key "=" value} | JSON-object ) )
    pub(super) fn parse_mcp(&self, rest: Span) -> Result<Command, ParseError> {
        let words = self.words(rest);
        match words.first().map(|w| self.text(*w)) {
            Some("list") => match words.get(1) {
                Some(w) => Err(self.err(w.s, "mcp", format!("unexpected `{}`", self.text(*w)))),
                None => Ok(Command::Mcp(McpCmd::List)),
            },
            Some("use") => {
                let name = |k: usize, what: &str| -> Result<String, ParseError> {
                    let w = words.get(k).ok_or_else(|| {
                        self.err(rest.e, "mcp", format!("expected the {what} name"))
                    })?;
                    let n = self.text(*w);
                    if is_tool_name(n) {
                        Ok(n.to_string())
                    } else {
                        Err(self.err(w.s, "mcp", format!("`{n}` is not a {what} name")))
                    }
                };
                let server = name(1, "server")?;
                let tool = name(2, "tool")?;
                let args_span = self.trim(Span::new(words[2].e, rest.e));
                let args = if self.text(args_span).starts_with('{') {
                    let text = self.text(args_span);
                    match serde_json::from_str::<serde_json::Value>(text) {
                        Ok(serde_json::Value::Object(_)) => McpArgs::Json(text.to_string()),
                        _ => {
                            return Err(self.err(
                                args_span.s,
                                "mcp",
                                "expected key=value pairs or one JSON object of arguments",
                            ))
                        }
                    }
                } else {
                    let mut pairs = Vec::new();
                    for w in &words[3..] {
                        pairs.push(self.mcp_param(*w)?);
                    }
                    McpArgs::Pairs(pairs)
                };
                Ok(Command::Mcp(McpCmd::Use { server, tool, args }))
            }
            Some("config") => self.mcp_config(rest, &words),
            Some(verb @ ("resources" | "read")) => self.mcp_resources(rest, &words, verb),
            _ => Err(self.err(
                words.first().map_or(rest.s, |w| w.s),
                "mcp",
                "expected `list`, `use SERVER TOOL key=value…`, `resources SERVER`, \
                 `read SERVER URI` or `config add|remove NAME …`",
            )),
        }
    }

    /// `resources SERVER` / `read SERVER URI` (the words after `mcp`); a quoted URI keeps
    /// its spaces.
    fn mcp_resources(&self, rest: Span, words: &[Span], verb: &str) -> Result<Command, ParseError> {
        let server = words
            .get(1)
            .map(|w| (w.s, self.text(*w)))
            .ok_or_else(|| self.err(rest.e, "mcp", "expected the server name"))?;
        if !is_tool_name(server.1) {
            return Err(self.err(
                server.0,
                "mcp",
                format!("`{}` is not a server name", server.1),
            ));
        }
        let server = server.1.to_string();
        let extra = |k: usize| {
            words.get(k).map_or(Ok(()), |w| {
                Err(self.err(w.s, "mcp", format!("unexpected `{}`", self.text(*w))))
            })
        };
        if verb == "resources" {
            extra(2)?;
            return Ok(Command::Mcp(McpCmd::Resources(server)));
        }
        let w = words
            .get(2)
            .ok_or_else(|| self.err(rest.e, "mcp", "expected the resource's URI"))?;
        extra(3)?;
        let uri = match self.quoted(*w) {
            Some((inner, _)) => self.text(inner).to_string(),
            None => self.text(*w).to_string(),
        };
        Ok(Command::Mcp(McpCmd::Read { server, uri }))
    }

    /// `config add NAME COMMAND ARGS…` / `config remove NAME` (the words after `mcp`).
    fn mcp_config(&self, rest: Span, words: &[Span]) -> Result<Command, ParseError> {
        let verb = words.get(1).map(|w| self.text(*w));
        let name = words
            .get(2)
            .map(|w| (w.s, self.text(*w)))
            .ok_or_else(|| self.err(rest.e, "mcp", "expected the server name"))?;
        if !is_tool_name(name.1) {
            return Err(self.err(name.0, "mcp", format!("`{}` is not a server name", name.1)));
        }
        let name = name.1.to_string();
        // A quoted word is one argument, without its quotes.
        let word = |w: &Span| match self.quoted(*w) {
            Some((inner, _)) => self.text(inner).to_string(),
            None => self.text(*w).to_string(),
        };
        match verb {
            Some("add") => {
                let command = words.get(3).map(&word).ok_or_else(|| {
                    self.err(
                        rest.e,
                        "mcp",
                        "expected the server's command after its name",
                    )
                })?;
                let args = words[4..].iter().map(word).collect();
                Ok(Command::Mcp(McpCmd::ConfigAdd {
                    name,
                    command,
                    args,
                }))
            }
            Some("remove") => match words.get(3) {
                Some(w) => Err(self.err(w.s, "mcp", format!("unexpected `{}`", self.text(*w)))),
                None => Ok(Command::Mcp(McpCmd::ConfigRemove(name))),
            },
            _ => Err(self.err(
                words.get(1).map_or(rest.e, |w| w.s),
                "mcp",
                "expected `config add NAME COMMAND ARGS…` or `config remove NAME`",
            )),
        }
    }

    /// `key=value`; a quoted value keeps its spaces, `$var`s expand when the command runs
    /// (not inside single quotes).
    fn mcp_param(&self, w: Span) -> Result<(String, String), ParseError> {
        let text = self.text(w);
        let bad = || self.err(w.s, "mcp", format!("expected key=value, found `{text}`"));
        let eq = text.find('=').ok_or_else(bad)?;
        let key = &text[..eq];
        if key.is_empty()
            || !key
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'))
        {
            return Err(bad());
        }
        let value_span = Span::new(w.s + eq + 1, w.e);
        let value = match self.quoted(value_span) {
            Some((inner, b'"')) => self.text(inner).replace("\\\"", "\""),
            Some((inner, _)) => self.text(inner).replace('$', "\\$"),
            None => self.text(value_span).to_string(),
        };
        Ok((key.to_string(), value))
    }
}
