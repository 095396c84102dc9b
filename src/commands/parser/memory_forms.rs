//! The memory and skill forms (docs/memory-and-skills.md): `remember`, `memory …`, `skill …`.

use super::{is_flow_name, ParseError, Parser, Span};
use crate::commands::ast::{Command, MemoryCmd, Role, SkillCmd, Target, Template};

/// How many memories `memory list` shows, and `memory summarize` summarises, by default.
pub const DEFAULT_LIST: usize = 10;

/// The option words of a memory command, pulled out of its words.
#[derive(Default)]
struct Options {
    scope: Option<String>,
    pin: bool,
    importance: Option<u8>,
    /// `importance=ask`: a tab rates the memory.
    ask: bool,
    to: Option<Target>,
    n: Option<usize>,
}

impl<'a> Parser<'a> {
    /// `remember TEXT [scope=S]`; an empty text clears the note.
    pub(super) fn parse_remember(&self, rest: Span) -> Result<Command, ParseError> {
        let words = self.words(rest);
        let mut end = rest.e;
        let mut scope = None;
        if let Some(w) = words.last() {
            if let Some(s) = self.text(*w).strip_prefix("scope=") {
                scope = Some(self.scope_name(w.s, s, "remember")?);
                end = w.s;
            }
        }
        let text = self.trim(Span::new(rest.s, end));
        Ok(Command::Remember {
            scope,
            text: if text.is_empty() {
                Template::default()
            } else {
                self.free_text(text)
            },
        })
    }

    fn scope_name(&self, at: usize, s: &str, topic: &'static str) -> Result<String, ParseError> {
        if is_flow_name(s) {
            Ok(s.to_string())
        } else {
            Err(self.err(
                at,
                topic,
                "expected scope=global or scope=GROUP (letters, digits, _ . -)",
            ))
        }
    }

    /// Recognises one option word; `Ok(false)` when the word is not an option.
    fn memory_option(&self, w: Span, o: &mut Options) -> Result<bool, ParseError> {
        let t = self.text(w);
        if t == "-pin" || t == "--pin" {
            o.pin = true;
        } else if let Some(s) = t.strip_prefix("scope=") {
            o.scope = Some(self.scope_name(w.s, s, "memory")?);
        } else if t == "importance=ask" {
            o.ask = true;
        } else if let Some(n) = t.strip_prefix("importance=") {
            let n: u8 = n
                .parse()
                .ok()
                .filter(|n| (1..=10).contains(n))
                .ok_or_else(|| {
                    self.err(
                        w.s,
                        "memory",
                        "importance is a number from 1 to 10, or ask (a tab rates it)",
                    )
                })?;
            o.importance = Some(n);
        } else if let Some(n) = t.strip_prefix("n=") {
            let n: usize = n
                .parse()
                .ok()
                .filter(|n| (1..=100).contains(n))
                .ok_or_else(|| self.err(w.s, "memory", "n is a number from 1 to 100"))?;
            o.n = Some(n);
        } else if t.starts_with("to=") {
            let (target, _) = self.target_at(w.s + 3, w.e, "memory")?;
            o.to = Some(target);
        } else {
            return Ok(false);
        }
        Ok(true)
    }

    /// Every word from `from` on must be an option.
    fn only_options(&self, words: &[Span], o: &mut Options) -> Result<(), ParseError> {
        for w in words {
            if !self.memory_option(*w, o)? {
                return Err(self.err(w.s, "memory", format!("unexpected `{}`", self.text(*w))));
            }
        }
        Ok(())
    }

    fn ids(&self, words: &[Span], at: usize) -> Result<Vec<i64>, ParseError> {
        if words.is_empty() {
            return Err(self.err(at, "memory", "expected one or more memory ids"));
        }
        words
            .iter()
            .map(|w| {
                parse_id(self.text(*w)).ok_or_else(|| {
                    self.err(
                        w.s,
                        "memory",
                        format!("`{}` is not a memory id", self.text(*w)),
                    )
                })
            })
            .collect()
    }

    pub(super) fn parse_memory(&self, rest: Span) -> Result<Command, ParseError> {
        let words = self.words(rest);
        let Some(first) = words.first() else {
            return Err(self.err(rest.s, "memory", "expected TEXT tag: T1,T2 or a verb"));
        };
        let mut o = Options::default();
        let cmd = match self.text(*first) {
            "search" => {
                let mut end = rest.e;
                for w in words[1..].iter().rev() {
                    if self.memory_option(*w, &mut o)? {
                        end = w.s;
                    } else {
                        break;
                    }
                }
                let q = self.trim(Span::new(first.e, end));
                if q.is_empty() {
                    return Err(self.err(first.e, "memory", "expected words to search for"));
                }
                MemoryCmd::Search {
                    scope: o.scope,
                    words: self.free_text(q),
                }
            }
            "del" | "delete" => MemoryCmd::Del(self.ids(&words[1..], first.e)?),
            "pin" => MemoryCmd::Pin(self.ids(&words[1..], first.e)?),
            "unpin" => MemoryCmd::Unpin(self.ids(&words[1..], first.e)?),
            "tags" => {
                self.only_options(&words[1..], &mut o)?;
                MemoryCmd::Tags { scope: o.scope }
            }
            "list" => {
                let mut rest_words = &words[1..];
                let mut n = DEFAULT_LIST;
                if let Some(w) = rest_words.first() {
                    if let Ok(k) = self.text(*w).parse::<usize>() {
                        n = k.clamp(1, 100);
                        rest_words = &rest_words[1..];
                    }
                }
                self.only_options(rest_words, &mut o)?;
                MemoryCmd::List {
                    scope: o.scope,
                    n: o.n.unwrap_or(n),
                }
            }
            "summarize" | "summarise" => {
                let mut rest_words = &words[1..];
                let mut scope = None;
                if let Some(w) = rest_words.first() {
                    let t = self.text(*w);
                    if !t.contains('=') {
                        scope = Some(self.scope_name(w.s, t, "memory")?);
                        rest_words = &rest_words[1..];
                    }
                }
                self.only_options(rest_words, &mut o)?;
                MemoryCmd::Summarize {
                    scope: o.scope.or(scope),
                    to: o.to,
                    n: o.n.unwrap_or(DEFAULT_LIST),
                }
            }
            t => match parse_id(t) {
                Some(id) => {
                    let (text, tags) = self.text_and_tags(rest, &words[1..], &mut o)?;
                    if o.pin || o.scope.is_some() {
                        return Err(self.err(
                            first.s,
                            "memory",
                            "a rewrite takes TEXT [tag: …] [importance=N]; use memory pin ID to pin",
                        ));
                    }
                    MemoryCmd::Rewrite {
                        id,
                        text: text.ok_or_else(|| {
                            self.err(first.e, "memory", "expected the new text after the id")
                        })?,
                        tags,
                        importance: o.importance,
                    }
                }
                None => {
                    let (text, tags) = self.text_and_tags(rest, &words, &mut o)?;
                    MemoryCmd::Add {
                        scope: o.scope,
                        text: text.ok_or_else(|| {
                            self.err(rest.s, "memory", "expected the text to remember")
                        })?,
                        tags: tags.unwrap_or_default(),
                        pin: o.pin,
                        importance: o.importance,
                        rate: o
                            .ask
                            .then(|| o.to.clone().unwrap_or(Target::Role(Role::Worker))),
                    }
                }
            },
        };
        Ok(Command::Memory(cmd))
    }

    /// `TEXT [tag: T1,T2] [options]`: the text ends at the first `tag:` or option word.
    fn text_and_tags(
        &self,
        rest: Span,
        words: &[Span],
        o: &mut Options,
    ) -> Result<(Option<Template>, Option<Vec<String>>), ParseError> {
        let is_tag_word = |t: &str| {
            ["tag:", "tags:", "标签:", "标签："]
                .iter()
                .any(|p| t.starts_with(p))
        };
        let mut text_end = rest.e;
        let mut tags: Option<Vec<String>> = None;
        let mut k = 0;
        while k < words.len() {
            let w = words[k];
            let t = self.text(w);
            if is_tag_word(t) {
                text_end = text_end.min(w.s);
                let first = ["tag:", "tags:", "标签:", "标签："]
                    .iter()
                    .find_map(|p| t.strip_prefix(p))
                    .unwrap_or("");
                let mut list = String::from(first);
                k += 1;
                while k < words.len() {
                    let t = self.text(words[k]);
                    if t.starts_with('-') || t.contains('=') {
                        break;
                    }
                    list.push(',');
                    list.push_str(t);
                    k += 1;
                }
                tags = Some(split_tags(&list));
                continue;
            }
            if self.memory_option(w, o)? {
                text_end = text_end.min(w.s);
            } else if text_end < rest.e {
                return Err(self.err(
                    w.s,
                    "memory",
                    format!("unexpected `{t}` after the tags (quote the text if it contains tag:)"),
                ));
            }
            k += 1;
        }
        let start = words.first().map_or(rest.e, |w| w.s);
        let span = self.trim(Span::new(start, text_end.max(start)));
        let text = (!span.is_empty()).then(|| self.free_text(span));
        Ok((text, tags))
    }

    /// `skill list | help [NAME] | NAME key=value…`
    pub(super) fn parse_skill(&self, rest: Span) -> Result<Command, ParseError> {
        let words = self.words(rest);
        let Some(first) = words.first() else {
            return Err(self.err(rest.s, "skill", "expected list, help or a skill name"));
        };
        let name_at = |w: &Span| -> Result<String, ParseError> {
            let n = self.text(*w);
            if crate::skills::is_skill_name(n) {
                Ok(n.to_string())
            } else {
                Err(self.err(
                    w.s,
                    "skill",
                    format!("`{n}` is not a skill name (a-z, 0-9, _ and - only)"),
                ))
            }
        };
        let cmd = match self.text(*first) {
            "list" if words.len() == 1 => SkillCmd::List,
            "help" if words.len() <= 2 => SkillCmd::Help(words.get(1).map(name_at).transpose()?),
            _ => {
                let name = name_at(first)?;
                let args = words[1..]
                    .iter()
                    .map(|w| self.param_for(*w, "skill"))
                    .collect::<Result<_, _>>()?;
                SkillCmd::Run { name, args }
            }
        };
        Ok(Command::Skill(cmd))
    }
}

/// `42` or `#42`.
fn parse_id(s: &str) -> Option<i64> {
    s.strip_prefix('#')
        .unwrap_or(s)
        .parse::<i64>()
        .ok()
        .filter(|n| *n > 0)
}

/// `a, b，c` → `[a, b, c]` (trimmed, empty and repeated ones dropped).
pub fn split_tags(list: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in list.split([',', '，', '、']) {
        let t = t.trim();
        if !t.is_empty() && !out.iter().any(|o| o == t) {
            out.push(t.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::commands::ast::{Command, MemoryCmd, Role, SkillCmd, Target, Template};
    use crate::commands::parser::parse;

    #[test]
    fn memory_add_with_tags_pin_and_scope() {
        let c = parse("memory 用户喜欢简短回答 tag: 偏好, style -pin scope=g1").unwrap();
        assert_eq!(
            c,
            Command::Memory(MemoryCmd::Add {
                scope: Some("g1".into()),
                text: Template::literal("用户喜欢简短回答"),
                tags: vec!["偏好".into(), "style".into()],
                pin: true,
                importance: None,
                rate: None,
            })
        );
    }

    #[test]
    fn importance_ask_names_the_rating_tab() {
        match parse("memory the key rotates importance=ask to=deepseek").unwrap() {
            Command::Memory(MemoryCmd::Add {
                importance, rate, ..
            }) => {
                assert_eq!(importance, None);
                assert_eq!(rate, Some(Target::Name("deepseek".into())));
            }
            other => panic!("{other:?}"),
        }
        match parse("memory the key rotates importance=ask").unwrap() {
            Command::Memory(MemoryCmd::Add { rate, .. }) => {
                assert_eq!(rate, Some(Target::Role(Role::Worker)))
            }
            other => panic!("{other:?}"),
        }
        assert!(parse("memory x importance=maybe").is_err());
    }

    #[test]
    fn memory_rewrite_search_and_ids() {
        match parse("memory #3 new text tag:a,b importance=9").unwrap() {
            Command::Memory(MemoryCmd::Rewrite {
                id,
                tags,
                importance,
                ..
            }) => {
                assert_eq!((id, importance), (3, Some(9)));
                assert_eq!(tags, Some(vec!["a".into(), "b".into()]));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            parse("memory del 1 #2 3").unwrap(),
            Command::Memory(MemoryCmd::Del(vec![1, 2, 3]))
        );
        assert!(parse("memory pin x").is_err());
        assert!(parse("memory importance=11 x").is_err());
        match parse("memory search rust async scope=g2").unwrap() {
            Command::Memory(MemoryCmd::Search { scope, words }) => {
                assert_eq!(scope.as_deref(), Some("g2"));
                assert_eq!(words, Template::literal("rust async"));
            }
            other => panic!("{other:?}"),
        }
        assert!(parse("memory search").is_err());
        assert!(parse("memory x tag: a -pin stray").is_err());
    }

    #[test]
    fn remember_and_skill_forms() {
        assert_eq!(
            parse("remember").unwrap(),
            Command::Remember {
                scope: None,
                text: Template::default()
            }
        );
        assert_eq!(parse("skill list").unwrap(), Command::Skill(SkillCmd::List));
        assert_eq!(
            parse("skill help summarize").unwrap(),
            Command::Skill(SkillCmd::Help(Some("summarize".into())))
        );
        assert_eq!(
            parse("skill summarize text=\"a b\" words=20").unwrap(),
            Command::Skill(SkillCmd::Run {
                name: "summarize".into(),
                args: vec![("text".into(), "a b".into()), ("words".into(), "20".into())]
            })
        );
        for bad in [
            "skill ../../etc/passwd",
            "skill help ../x",
            "skill Big",
            "skill x y",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
