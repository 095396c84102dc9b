//! The agent forms (docs/agents.md): `agent create|task|status|memory|list|stop|pause|resume|loop`
//! and `done [TEXT]`.

use super::{is_flow_name, ParseError, Parser, Span};
use crate::commands::agent::{AgentCmd, AgentSpec, Tool};
use crate::commands::ast::{Command, Template};

/// The most rounds `max_rounds=N` may ask for.
pub const MAX_ROUNDS_LIMIT: u32 = 1000;

/// A tab reference after `on`: a label, a site, `auto` or `auto:SITE,SITE`.
fn is_target(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | '-' | ':' | ','))
}

impl<'a> Parser<'a> {
    /// `done [TEXT]`.
    pub(super) fn parse_done(&self, rest: Span) -> Command {
        Command::Agent(AgentCmd::Done(if rest.is_empty() {
            Template::default()
        } else {
            self.free_text(rest)
        }))
    }

    /// agent := "agent" ( create | task | status | memory | list | stop | pause | resume | loop )
    pub(super) fn parse_agent(&self, rest: Span) -> Result<Command, ParseError> {
        let words = self.words(rest);
        let Some(verb) = words.first() else {
            return Err(self.err(
                rest.s,
                "agent",
                "expected a verb: create, task, status, memory, list, stop, pause, resume or loop",
            ));
        };
        let args = &words[1..];
        let name_at = |k: usize| -> Result<String, ParseError> {
            let w = args
                .get(k)
                .ok_or_else(|| self.err(rest.e, "agent", "expected the agent's name"))?;
            self.agent_name(*w)
        };
        let optional_name = || -> Result<Option<String>, ParseError> {
            match args {
                [] => Ok(None),
                [w] => self.agent_name(*w).map(Some),
                [_, extra, ..] => Err(self.unexpected(*extra)),
            }
        };
        let cmd = match self.text(*verb) {
            "create" => AgentCmd::Create(self.agent_create(rest, args)?),
            "task" => {
                let name = name_at(0)?;
                // `with files=[…]` after the name (docs/files.md), then a `:` may be written.
                let (files, mut from) = self.with_files(args[0].e, rest.e, "agent")?;
                let after = self.text(Span::new(from, rest.e)).trim_start();
                if !files.is_empty() && after.starts_with(':') {
                    from = rest.e - after.len() + 1;
                }
                let text = self.trim(Span::new(from, rest.e));
                if text.is_empty() {
                    return Err(self.err(rest.e, "agent", "expected the task text after the name"));
                }
                AgentCmd::Task {
                    name,
                    text: self.free_text(text),
                    files,
                }
            }
            "status" => AgentCmd::Status(optional_name()?),
            "memory" => AgentCmd::Memory(optional_name()?),
            "list" => match args.first() {
                Some(w) => return Err(self.unexpected(*w)),
                None => AgentCmd::List,
            },
            "stop" => AgentCmd::Stop(optional_name()?),
            "pause" => AgentCmd::Pause(optional_name()?),
            "resume" => AgentCmd::Resume(optional_name()?),
            "loop" => match args.iter().map(|w| self.text(*w)).collect::<Vec<_>>()[..] {
                ["on"] => AgentCmd::Loop(true),
                ["off"] => AgentCmd::Loop(false),
                _ => return Err(self.err(verb.e, "agent", "expected `loop on` or `loop off`")),
            },
            other => {
                return Err(self.err(
                    verb.s,
                    "agent",
                    format!("unknown verb `{other}`: expected create, task, status, memory, list, stop, pause, resume or loop"),
                ))
            }
        };
        Ok(Command::Agent(cmd))
    }

    fn unexpected(&self, w: Span) -> ParseError {
        self.err(w.s, "agent", format!("unexpected `{}`", self.text(w)))
    }

    fn agent_name(&self, w: Span) -> Result<String, ParseError> {
        let n = self.text(w);
        if is_flow_name(n) {
            Ok(n.to_string())
        } else {
            Err(self.err(
                w.s,
                "agent",
                format!("`{n}` is not an agent name (letters, digits, _ . -)"),
            ))
        }
    }

    /// `create NAME [on TARGET] [with] [tools=[T,…]] [max_rounds=N] [memory=SCOPE]`; the
    /// tool list may hold spaces (`[tabs, memory]`), so it is cut out of the text first.
    fn agent_create(&self, rest: Span, args: &[Span]) -> Result<AgentSpec, ParseError> {
        let first = args
            .first()
            .ok_or_else(|| self.err(rest.e, "agent", "expected the agent's name"))?;
        let name = self.agent_name(*first)?;
        let mut spec = AgentSpec {
            name,
            target: "auto".into(),
            tools: None,
            max_rounds: None,
            memory: None,
        };
        let tail = Span::new(first.e, rest.e);
        let (tools, tail_words) = self.tools_list(tail)?;
        spec.tools = tools;
        let mut k = 0;
        while k < tail_words.len() {
            let w = tail_words[k];
            let t = self.text(w);
            if t == "on" {
                let target = tail_words
                    .get(k + 1)
                    .map(|w| self.text(*w))
                    .filter(|t| is_target(t))
                    .ok_or_else(|| {
                        self.err(
                            w.e,
                            "agent",
                            "expected a tab after `on` (a label, a site or auto)",
                        )
                    })?;
                spec.target = target.to_string();
                k += 2;
                continue;
            }
            if t == "with" {
                k += 1;
                continue;
            }
            if let Some(n) = t.strip_prefix("max_rounds=") {
                let n = n
                    .parse::<u32>()
                    .ok()
                    .filter(|n| (1..=MAX_ROUNDS_LIMIT).contains(n))
                    .ok_or_else(|| {
                        self.err(w.s, "agent", "max_rounds is a number from 1 to 1000")
                    })?;
                spec.max_rounds = Some(n);
            } else if let Some(s) = t.strip_prefix("memory=") {
                if !is_flow_name(s) {
                    return Err(self.err(
                        w.s,
                        "agent",
                        "expected memory=SCOPE (letters, digits, _ . -)",
                    ));
                }
                spec.memory = Some(s.to_string());
            } else {
                return Err(self.unexpected(w));
            }
            k += 1;
        }
        Ok(spec)
    }

    /// Finds `tools=[…]` in `span`: the parsed tools and the words of `span` outside it.
    fn tools_list(&self, span: Span) -> Result<(Option<Vec<Tool>>, Vec<Span>), ParseError> {
        let text = self.text(span);
        let Some(at) = text.find("tools=") else {
            return Ok((None, self.words(span)));
        };
        let open = span.s + at + "tools=".len();
        let bad = |pos| {
            self.err(pos, "agent", "expected tools=[T,…] with T one of tabs, shell, flows, memory, mcp:SERVER, skill:NAME, web (or the manual's 文件读写 = mcp:filesystem, 命令执行 = shell, 网络搜索 = web)")
        };
        if self.b.get(open) != Some(&b'[') {
            return Err(bad(open));
        }
        let close = self.b[open..span.e]
            .iter()
            .position(|&c| c == b']')
            .map(|n| open + n)
            .ok_or_else(|| bad(open))?;
        let mut tools = Vec::new();
        for piece in self.split_commas(Span::new(open + 1, close)) {
            let tool = Tool::parse(self.text(piece)).ok_or_else(|| bad(piece.s))?;
            if !tools.contains(&tool) {
                tools.push(tool);
            }
        }
        if tools.is_empty() {
            return Err(bad(open));
        }
        let mut words = self.words(Span::new(span.s, span.s + at));
        words.extend(self.words(Span::new(close + 1, span.e)));
        Ok((Some(tools), words))
    }
}

#[cfg(test)]
mod tests {
    use crate::commands::agent::{AgentCmd, AgentSpec, Tool};
    use crate::commands::ast::Command;
    use crate::commands::parser::{parse, parse_template};

    fn agent(src: &str) -> AgentCmd {
        match parse(src) {
            Ok(Command::Agent(a)) => a,
            other => panic!("{src:?} → {other:?}"),
        }
    }

    fn spec(name: &str, target: &str) -> AgentSpec {
        AgentSpec {
            name: name.into(),
            target: target.into(),
            tools: None,
            max_rounds: None,
            memory: None,
        }
    }

    /// (source, expected)
    #[test]
    fn every_agent_form_parses() {
        let full = AgentSpec {
            tools: Some(vec![Tool::Tabs, Tool::Memory, Tool::Mcp("time".into())]),
            max_rounds: Some(10),
            memory: Some("research".into()),
            ..spec("researcher", "kimi-1")
        };
        let cases: Vec<(&str, AgentCmd)> = vec![
            ("agent create r1", AgentCmd::Create(spec("r1", "auto"))),
            ("agent create 研究员 on deepseek", AgentCmd::Create(spec("研究员", "deepseek"))),
            (
                "agent create researcher on kimi-1 with tools=[tabs, memory, mcp:time] max_rounds=10 memory=research",
                AgentCmd::Create(full.clone()),
            ),
            (
                "agent create researcher max_rounds=10 with tools=[tabs,memory,mcp:time] on kimi-1 memory=research",
                AgentCmd::Create(full),
            ),
            (
                "agent create w tools=[web]",
                AgentCmd::Create(AgentSpec {
                    tools: Some(vec![Tool::Web]),
                    ..spec("w", "auto")
                }),
            ),
            (
                "agent task researcher 比较 qianwen 和 doubao 的评审 $x",
                AgentCmd::Task {
                    name: "researcher".into(),
                    text: parse_template("比较 qianwen 和 doubao 的评审 $x"),
                    files: vec![],
                },
            ),
            (
                "agent task researcher with files=[chart.png, \"年报 2025.pdf\"]: 这张图 $x",
                AgentCmd::Task {
                    name: "researcher".into(),
                    text: parse_template("这张图 $x"),
                    files: vec!["chart.png".into(), "年报 2025.pdf".into()],
                },
            ),
            (
                "agent task researcher with files=[$shot] 看看",
                AgentCmd::Task {
                    name: "researcher".into(),
                    text: parse_template("看看"),
                    files: vec!["$shot".into()],
                },
            ),
            (
                "agent task researcher with care: 看看",
                AgentCmd::Task {
                    name: "researcher".into(),
                    text: parse_template("with care: 看看"),
                    files: vec![],
                },
            ),
            ("agent status", AgentCmd::Status(None)),
            ("agent status r1", AgentCmd::Status(Some("r1".into()))),
            ("agent memory r1", AgentCmd::Memory(Some("r1".into()))),
            ("agent memory", AgentCmd::Memory(None)),
            ("agent list", AgentCmd::List),
            ("agents list", AgentCmd::List),
            ("agent stop", AgentCmd::Stop(None)),
            ("agent stop r1", AgentCmd::Stop(Some("r1".into()))),
            ("agent pause r1", AgentCmd::Pause(Some("r1".into()))),
            ("agent resume", AgentCmd::Resume(None)),
            ("agent loop on", AgentCmd::Loop(true)),
            ("agent loop off", AgentCmd::Loop(false)),
            ("done", AgentCmd::Done(parse_template(""))),
            ("done 结论：qianwen 更好", AgentCmd::Done(parse_template("结论：qianwen 更好"))),
            ("done \"a -> b\"", AgentCmd::Done(parse_template("a -> b"))),
        ];
        for (src, want) in cases {
            assert_eq!(agent(src), want, "{src}");
        }
    }

    /// (source, byte position of the error, text the message holds)
    #[test]
    fn bad_agent_forms_say_where_and_what() {
        let cases = [
            ("agent", 5, "expected a verb"),
            ("agent fly r1", 6, "unknown verb `fly`"),
            ("agent create", 12, "expected the agent's name"),
            ("agent create a/b", 13, "not an agent name"),
            ("agent create r1 on", 18, "expected a tab after `on`"),
            (
                "agent create r1 tools=[tabs, bash]",
                29,
                "expected tools=[T,…]",
            ),
            ("agent create r1 tools=[]", 22, "expected tools=[T,…]"),
            ("agent create r1 tools=tabs", 22, "expected tools=[T,…]"),
            ("agent create r1 max_rounds=0", 16, "max_rounds is a number"),
            ("agent create r1 memory=a/b", 16, "expected memory=SCOPE"),
            ("agent create r1 loudly", 16, "unexpected `loudly`"),
            ("agent task r1", 13, "expected the task text"),
            (
                "agent task r1 with files=[a.png]",
                32,
                "expected the task text",
            ),
            (
                "agent task r1 with files=[]: x",
                25,
                "at least one file name",
            ),
            ("agent memory a b", 15, "unexpected `b`"),
            ("agent list all", 11, "unexpected `all`"),
            ("agent stop a b", 13, "unexpected `b`"),
            ("agent loop maybe", 10, "expected `loop on` or `loop off`"),
        ];
        for (src, pos, msg) in cases {
            let e = parse(src).expect_err(src);
            assert_eq!(e.pos, pos, "{src}: {e}");
            assert!(e.message.contains(msg), "{src}: {}", e.message);
            assert_eq!(e.topic, "agent", "{src}");
            assert!(
                e.to_string().contains("?<agent create NAME"),
                "{src}: usage"
            );
        }
    }
}
