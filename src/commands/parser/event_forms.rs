//! `publish TOPIC [TEXT]`, `subscribe TOPIC [where COND] do CMD`, `subscribe list`,
//! `unsubscribe ID`, and `on NODE: CMD` (docs/cluster.md).

use super::{ParseError, Parser, Span};
use crate::commands::ast::{Command, Cond, EventCmd};

/// Parses a condition as `if` reads it (a rule's `where`, read again when the rule fires).
pub fn parse_cond(text: &str) -> Result<Cond, ParseError> {
    let mut p = Parser {
        src: text,
        b: text.as_bytes(),
        nesting: 0,
    };
    let span = p.trim(Span::new(0, text.len()));
    if span.is_empty() {
        return Err(p.err(0, "subscribe", "expected a condition after `where`"));
    }
    p.cond(span)
}

impl<'a> Parser<'a> {
    /// The topic word at `w`, checked.
    fn topic(&self, w: Span, verb: &'static str) -> Result<String, ParseError> {
        let t = self.text(w);
        if crate::events::valid_topic(t) {
            Ok(t.to_string())
        } else {
            Err(self.err(
                w.s,
                verb,
                format!("`{t}` is not a topic (letters, digits, _ . - : /, or * for every topic)"),
            ))
        }
    }

    /// publish := "publish" TOPIC [TEXT]
    pub(super) fn parse_publish(&self, rest: Span) -> Result<Command, ParseError> {
        let words = self.words(rest);
        let Some(first) = words.first() else {
            return Err(self.err(rest.s, "publish", "expected a topic"));
        };
        let topic = self.topic(*first, "publish")?;
        if topic == "*" {
            return Err(self.err(
                first.s,
                "publish",
                "`*` subscribes to every topic; an event needs one topic",
            ));
        }
        let text_span = self.trim(Span::new(first.e, rest.e));
        Ok(Command::Event(EventCmd::Publish {
            topic,
            text: (!text_span.is_empty()).then(|| self.free_text(text_span)),
        }))
    }

    /// subscribe := "subscribe" ( "list" | TOPIC [ "where" COND ] "do" CMD )
    pub(super) fn parse_subscribe(&mut self, rest: Span) -> Result<Command, ParseError> {
        let words = self.words(rest);
        let Some(first) = words.first() else {
            return Err(self.err(rest.s, "subscribe", "expected a topic or `list`"));
        };
        if self.text(*first) == "list" && words.len() == 1 {
            return Ok(Command::Event(EventCmd::List));
        }
        let topic = self.topic(*first, "subscribe")?;
        let do_at = words
            .iter()
            .position(|w| self.text(*w) == "do")
            .ok_or_else(|| self.err(rest.e, "subscribe", "expected `do CMD` after the topic"))?;
        let cond = match words.get(1) {
            Some(w) if self.text(*w) == "where" => {
                if do_at <= 2 {
                    return Err(self.err(w.e, "subscribe", "expected a condition after `where`"));
                }
                let span = self.trim(Span::new(w.e, words[do_at].s));
                let text = self.text(span).to_string();
                parse_cond(&text).map_err(|e| {
                    self.err(
                        span.s + e.pos,
                        "subscribe",
                        format!("in `where`: {}", e.message),
                    )
                })?;
                Some(text)
            }
            Some(w) if do_at != 1 => {
                return Err(self.err(
                    w.s,
                    "subscribe",
                    format!(
                        "expected `where` or `do` after the topic, found `{}`",
                        self.text(*w)
                    ),
                ))
            }
            _ => None,
        };
        let body = self.trim(Span::new(words[do_at].e, rest.e));
        if body.is_empty() {
            return Err(self.err(words[do_at].e, "subscribe", "expected a command after `do`"));
        }
        // Checked now, so a rule that could never run is refused when it is made.
        self.chain(body)?;
        Ok(Command::Event(EventCmd::Subscribe {
            topic,
            cond,
            command: self.text(body).to_string(),
        }))
    }

    /// unsubscribe := "unsubscribe" ID
    pub(super) fn parse_unsubscribe(&self, rest: Span) -> Result<Command, ParseError> {
        let words = self.words(rest);
        match words.as_slice() {
            [w] => self
                .text(*w)
                .trim_start_matches('#')
                .parse::<i64>()
                .ok()
                .filter(|id| *id > 0)
                .map(|id| Command::Event(EventCmd::Unsubscribe(id)))
                .ok_or_else(|| {
                    self.err(
                        w.s,
                        "unsubscribe",
                        "expected a rule id (a number from ?<subscribe list>!)",
                    )
                }),
            _ => Err(self.err(
                rest.s,
                "unsubscribe",
                "expected one rule id (a number from ?<subscribe list>!)",
            )),
        }
    }
}

impl Parser<'_> {
    /// on := "on" NODE ":" CMD, CMD a shell command or a skill (docs/cluster.md).
    pub(in crate::commands) fn parse_on(&mut self, rest: Span) -> Result<Command, ParseError> {
        let text = self.text(rest);
        let Some(colon) = text.find(':') else {
            return Err(self.err(rest.s, "on", "expected `NODE:` then a command"));
        };
        let node = text[..colon].trim();
        let node_ok = !node.is_empty()
            && node.len() <= 64
            && node
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !node_ok {
            return Err(self.err(
                rest.s,
                "on",
                "expected a node name ([A-Za-z0-9_-], the node's --node) before `:`",
            ));
        }
        let body_span = self.trim(Span::new(rest.s + colon + 1, rest.e));
        if body_span.is_empty() {
            return Err(self.err(body_span.s, "on", "expected a command after `NODE:`"));
        }
        let body = self.simple(body_span)?;
        if !matches!(
            body,
            Command::Shell { .. } | Command::Skill(crate::commands::ast::SkillCmd::Run { .. })
        ) {
            return Err(self.err(
                body_span.s,
                "on",
                format!(
                    "`on {node}:` runs a shell command or a skill on node `{node}`, not `{}` \
                     (`on {node}: ls data`, `on {node}: skill NAME k=v`)",
                    self.first_word(body_span)
                ),
            ));
        }
        Ok(Command::On {
            node: node.to_string(),
            text: self.text(body_span).to_string(),
            body: Box::new(body),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::commands::ast::{Command, EventCmd};
    use crate::commands::parser::parse;

    #[test]
    fn publish_with_and_without_text() {
        match parse("publish review.done all good $x").unwrap() {
            Command::Event(EventCmd::Publish { topic, text }) => {
                assert_eq!(topic, "review.done");
                assert!(text.is_some());
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse("publish t").unwrap(),
            Command::Event(EventCmd::Publish { text: None, .. })
        ));
        assert!(parse("publish").is_err());
        assert!(parse("publish *").is_err());
        assert!(parse("publish a;b").is_err());
    }

    #[test]
    fn subscribe_forms() {
        assert_eq!(
            parse("subscribe node_result where $EVENT contains draft do to sim-b: review $EVENT")
                .unwrap(),
            Command::Event(EventCmd::Subscribe {
                topic: "node_result".into(),
                cond: Some("$EVENT contains draft".into()),
                command: "to sim-b: review $EVENT".into(),
            })
        );
        assert_eq!(
            parse("subscribe * do set global last = $EVENT").unwrap(),
            Command::Event(EventCmd::Subscribe {
                topic: "*".into(),
                cond: None,
                command: "set global last = $EVENT".into(),
            })
        );
        // The command is the rest of the chain, as a `for` body is.
        assert_eq!(
            parse("subscribe t do publish u x -> to log: $EVENT").unwrap(),
            Command::Event(EventCmd::Subscribe {
                topic: "t".into(),
                cond: None,
                command: "publish u x -> to log: $EVENT".into(),
            })
        );
        assert_eq!(
            parse("subscribe list").unwrap(),
            Command::Event(EventCmd::List)
        );
        let e = parse("subscribe t to x: y").unwrap_err();
        assert!(e.message.contains("`do"), "{e}");
        assert!(parse("subscribe t where do to x: y").is_err());
        assert!(parse("subscribe t do").is_err());
        assert!(parse("subscribe t oops do to x: y").is_err());
        assert!(
            parse("subscribe t do set = x").is_err(),
            "a broken command is refused now"
        );
    }

    #[test]
    fn unsubscribe_takes_one_id() {
        assert_eq!(
            parse("unsubscribe 7").unwrap(),
            Command::Event(EventCmd::Unsubscribe(7))
        );
        assert_eq!(
            parse("unsubscribe #7").unwrap(),
            Command::Event(EventCmd::Unsubscribe(7))
        );
        assert!(parse("unsubscribe").is_err());
        assert!(parse("unsubscribe x").is_err());
        assert!(parse("unsubscribe 1 2").is_err());
    }

    #[test]
    fn a_where_condition_reads_like_if() {
        assert!(super::parse_cond("$EVENT contains x").is_ok());
        assert!(super::parse_cond("").is_err());
    }
}
