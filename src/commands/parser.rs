//! Hand-written recursive-descent parser from a command body to an [`super::ast::Command`].
//!
//! Why hand-written: most of a command is free text (prompts, shell lines) around a few
//! keywords, and the separators (`->`, `then`, `else`, `do`, `,`, `]`) only count at *top
//! level* — outside quotes, `$(…)` and nested `?<…>!`, by the same quote rules as the
//! streaming scanner ([`super::lex`]). A token grammar (pest, nom, chumsky) would need a
//! custom lexer for exactly that anyway; walking byte spans keeps prompts verbatim, gives
//! byte-accurate error positions and needs no dependency.
//!
//! Precedence, loosest first: `->` chain; `if … then … else …` and `for … do …` (each takes
//! the rest of the chain as its branch/body, `else` pairs with the nearest `if`); simple
//! commands selected by their first word. A first word that is not a keyword makes the whole
//! step a shell command.

use super::ast::{CmpOp, Command, Cond, ForItems, Operand, Part, SetValue, Template};
use super::help;
use super::lex::{Nesting, Quote};
use std::ops::ControlFlow;
use thiserror::Error;

/// Most iterations one `for` may declare.
pub const MAX_LOOP_ITERATIONS: u64 = 1000;
/// Deepest nesting of chains, branches and captures.
pub const MAX_NESTING: usize = 32;

/// A command that does not parse: where, what was expected, and the command's usage line.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "命令无法解析 / command could not be parsed: {message} (at byte {pos})\n用法 / usage: {usage}"
)]
pub struct ParseError {
    /// Byte offset in the command body.
    pub pos: usize,
    /// What was expected there.
    pub message: String,
    /// The help topic of the command being parsed.
    pub topic: &'static str,
    /// That command's one-line usage.
    pub usage: &'static str,
}

/// Parse one command body (the text between `?<` and `>!`).
pub fn parse(body: &str) -> Result<Command, ParseError> {
    let mut p = Parser {
        src: body,
        b: body.as_bytes(),
        nesting: 0,
    };
    p.chain(Span::new(0, body.len()))
}

/// Split text into literal pieces and `$name` / `${name}` references. `\$` is a literal `$`;
/// a `$` not followed by a name (or `$(`) stays literal.
pub fn parse_template(text: &str) -> Template {
    let b = text.as_bytes();
    let mut parts = Vec::new();
    let mut lit = String::new();
    let mut i = 0;
    while let Some(off) = memchr::memchr2(b'$', b'\\', &b[i..]) {
        let at = i + off;
        lit.push_str(&text[i..at]);
        i = at + 1;
        if b[at] == b'\\' {
            if b.get(at + 1) == Some(&b'$') {
                lit.push('$');
                i = at + 2;
            } else {
                lit.push('\\');
            }
            continue;
        }
        match var_ref(b, at) {
            Some((name, next)) => {
                if !lit.is_empty() {
                    parts.push(Part::Lit(std::mem::take(&mut lit)));
                }
                parts.push(Part::Var(text[name.s..name.e].to_string()));
                i = next;
            }
            None => lit.push('$'),
        }
    }
    lit.push_str(&text[i..]);
    if !lit.is_empty() {
        parts.push(Part::Lit(lit));
    }
    Template { parts }
}

/// The name span and the index after a reference starting with the `$` at `at` (`$name` or
/// `${name}`; the one reading of a reference, shared with the exec policy's splitter).
fn var_ref(b: &[u8], at: usize) -> Option<(Span, usize)> {
    crate::exec::var_ref_at(b, at).map(|((s, e), next)| (Span::new(s, e), next))
}

/// A byte range of the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    s: usize,
    e: usize,
}

impl Span {
    fn new(s: usize, e: usize) -> Self {
        Self { s, e: e.max(s) }
    }

    fn is_empty(self) -> bool {
        self.s >= self.e
    }
}

/// Parser state: the body and the current nesting depth (bounded, for fuzzed input).
struct Parser<'a> {
    src: &'a str,
    b: &'a [u8],
    nesting: usize,
}

impl<'a> Parser<'a> {
    fn err(&self, pos: usize, topic: &'static str, message: impl Into<String>) -> ParseError {
        ParseError {
            pos,
            message: message.into(),
            topic,
            usage: help::usage(topic),
        }
    }

    fn text(&self, span: Span) -> &'a str {
        &self.src[span.s..span.e]
    }

    /// `span` without surrounding whitespace.
    fn trim(&self, span: Span) -> Span {
        let t = self.text(span);
        let start = span.s + (t.len() - t.trim_start().len());
        let end = span.s + t.trim_end().len();
        Span::new(start, end)
    }

    /// Walk `span`, calling `f(index, byte, top_level)`; stops early when `f` breaks.
    ///
    /// Top level = outside quotes, nested `?<…>!` and `$(…)`.
    fn walk<T>(
        &self,
        span: Span,
        mut f: impl FnMut(usize, u8, bool) -> ControlFlow<T>,
    ) -> Option<T> {
        let mut nest = Nesting::default();
        let mut paren = 0u32;
        for i in span.s..span.e {
            let b = self.b[i];
            let was_top = nest.top_level();
            nest.step(b);
            let mut top = was_top && nest.top_level() && paren == 0;
            if nest.quote == Quote::None && nest.depth == 0 {
                if paren > 0 {
                    match b {
                        b'(' => paren += 1,
                        b')' => paren -= 1,
                        _ => {}
                    }
                } else if b == b'(' && i > span.s && self.b[i - 1] == b'$' && was_top {
                    paren = 1;
                    top = false;
                }
            }
            if let ControlFlow::Break(t) = f(i, b, top) {
                return Some(t);
            }
        }
        None
    }

    /// Whitespace-separated words at top level (a quoted part keeps its spaces).
    fn words(&self, span: Span) -> Vec<Span> {
        let mut out = Vec::new();
        let mut start: Option<usize> = None;
        self.walk::<()>(span, |i, b, top| {
            let ws = top && b.is_ascii_whitespace();
            match (ws, start) {
                (true, Some(s)) => {
                    out.push(Span::new(s, i));
                    start = None;
                }
                (false, None) => start = Some(i),
                _ => {}
            }
            ControlFlow::Continue(())
        });
        if let Some(s) = start {
            out.push(Span::new(s, span.e));
        }
        out
    }

    /// The leading run of non-whitespace bytes (enough to recognise a keyword); O(word).
    fn first_word(&self, span: Span) -> &'a str {
        let text = self.text(self.trim(span));
        text.split(|c: char| c.is_ascii_whitespace())
            .next()
            .unwrap_or("")
    }

    /// Index and length of the first top-level `->` (or the manual's `→`) in `span`.
    fn find_arrow(&self, span: Span) -> Option<(usize, usize)> {
        const ARROW: &[u8] = "→".as_bytes();
        self.walk(span, |i, b, top| {
            if top && b == b'-' && i + 1 < span.e && self.b[i + 1] == b'>' {
                ControlFlow::Break((i, 2))
            } else if top && b == ARROW[0] && self.b[i..span.e].starts_with(ARROW) {
                ControlFlow::Break((i, ARROW.len()))
            } else {
                ControlFlow::Continue(())
            }
        })
    }

    /// If `span` is exactly one quoted string, its content span and quote kind.
    fn quoted(&self, span: Span) -> Option<(Span, u8)> {
        if span.is_empty() || !matches!(self.b[span.s], b'"' | b'\'') {
            return None;
        }
        let mut nest = Nesting::default();
        for i in span.s..span.e {
            nest.step(self.b[i]);
            if i > span.s && nest.quote == Quote::None {
                return (i + 1 == span.e).then_some((Span::new(span.s + 1, i), self.b[span.s]));
            }
        }
        None
    }

    /// A quoted string's value: `'…'` literally, `"…"` with `\"` unescaped and `$var`s.
    fn quoted_template(&self, inner: Span, q: u8) -> Template {
        let text = self.text(inner);
        if q == b'\'' {
            Template::literal(text)
        } else {
            parse_template(&text.replace("\\\"", "\""))
        }
    }

    /// Free text (a prompt, a literal): one quoted string is unquoted, anything else verbatim.
    fn free_text(&self, span: Span) -> Template {
        let span = self.trim(span);
        match self.quoted(span) {
            Some((inner, q)) => self.quoted_template(inner, q),
            None => parse_template(self.text(span)),
        }
    }

    /// If `span` is exactly `$(…)`, the span inside the parentheses.
    fn capture(&self, span: Span) -> Option<Span> {
        let span = self.trim(span);
        if !self.text(span).starts_with("$(") {
            return None;
        }
        let inner = Span::new(span.s + 2, span.e);
        let mut paren = 1u32;
        let close = self.walk(inner, |i, b, top| {
            if top {
                match b {
                    b'(' => paren += 1,
                    b')' => {
                        paren -= 1;
                        if paren == 0 {
                            return ControlFlow::Break(i);
                        }
                    }
                    _ => {}
                }
            }
            ControlFlow::Continue(())
        })?;
        (close + 1 == span.e).then_some(Span::new(inner.s, close))
    }

    // ---- grammar -------------------------------------------------------------------------

    /// chain := step ( "->" step )* ; an `if`/`for` step takes the rest.
    fn chain(&mut self, span: Span) -> Result<Command, ParseError> {
        self.nesting += 1;
        if self.nesting > MAX_NESTING {
            return Err(self.err(
                span.s,
                "help",
                "command nested too deeply (more than 32 levels)",
            ));
        }
        let result = self.chain_inner(span);
        self.nesting -= 1;
        result
    }

    fn chain_inner(&mut self, span: Span) -> Result<Command, ParseError> {
        let mut rest = self.trim(span);
        if rest.is_empty() {
            return Err(self.err(rest.s, "help", "expected a command"));
        }
        if let Some((body, cleanup)) = self.split_finally(rest) {
            if self.trim(body).is_empty() {
                return Err(self.err(body.s, "chain", "expected a command before `finally`"));
            }
            if self.trim(cleanup).is_empty() {
                return Err(self.err(cleanup.s, "chain", "expected a command after `finally`"));
            }
            return Ok(Command::Finally {
                body: Box::new(self.chain(body)?),
                cleanup: Box::new(self.chain(cleanup)?),
            });
        }
        let mut steps = Vec::new();
        loop {
            match self.first_word(rest) {
                "if" => {
                    steps.push(self.parse_if(rest)?);
                    break;
                }
                "for" => {
                    steps.push(self.parse_for(rest)?);
                    break;
                }
                // Like `for … do`, a rule's command is the rest of the chain.
                "subscribe" => {
                    steps.push(self.simple(rest)?);
                    break;
                }
                _ => {}
            }
            let Some((arrow, arrow_len)) = self.find_arrow(rest) else {
                steps.push(self.simple(rest)?);
                break;
            };
            let left = self.trim(Span::new(rest.s, arrow));
            if left.is_empty() {
                return Err(self.err(arrow, "chain", "expected a command before `->`"));
            }
            steps.push(self.simple(left)?);
            rest = self.trim(Span::new(arrow + arrow_len, rest.e));
            if rest.is_empty() {
                return Err(self.err(arrow + arrow_len, "chain", "expected a command after `->`"));
            }
        }
        Ok(if steps.len() == 1 {
            steps.remove(0)
        } else {
            Command::Chain(steps)
        })
    }

    /// `… -> finally CMD` (or `… finally CMD` after an `if`): the span before (without its
    /// trailing `->`) and the cleanup after the first top-level `finally` that follows an arrow
    /// or an `if`'s branch. A `finally` inside a shell line's words (`echo finally`) is text.
    fn split_finally(&self, span: Span) -> Option<(Span, Span)> {
        let words = self.words(span);
        let is_if = self.text(words[0]) == "if";
        let k = words.iter().enumerate().skip(1).find_map(|(k, w)| {
            let prev = self.text(words[k - 1]);
            (self.text(*w) == "finally" && (prev.ends_with("->") || prev == "→" || is_if))
                .then_some(k)
        })?;
        let mut end = words[k].s;
        let prev = words[k - 1];
        let prev_text = self.text(prev);
        if prev_text == "->" || prev_text == "→" {
            end = prev.s;
        } else if let Some(stripped) = prev_text.strip_suffix("->") {
            end = prev.s + stripped.len();
        }
        Some((Span::new(span.s, end), Span::new(words[k].e, span.e)))
    }

    /// Whether `span` is `$NAME = …` / `$NAME=…`.
    fn is_dollar_assign(&self, span: Span) -> bool {
        let t = self.text(span);
        let Some(after) = t.strip_prefix('$') else {
            return false;
        };
        let name_len = after
            .bytes()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == b'_')
            .count();
        let rest = after[name_len..].trim_start();
        is_name(&after[..name_len]) && rest.starts_with('=') && !rest.starts_with("==")
    }

    /// if := "if" cond "then" chain [ "else" chain ]
    fn parse_if(&mut self, span: Span) -> Result<Command, ParseError> {
        let words = self.words(span);
        let then_at = words
            .iter()
            .position(|w| self.text(*w) == "then")
            .ok_or_else(|| self.err(span.e, "if", "expected `then` after the condition"))?;
        let cond_span = Span::new(words[0].e, words[then_at].s);
        if self.trim(cond_span).is_empty() {
            return Err(self.err(words[0].e, "if", "expected a condition after `if`"));
        }
        let mut depth = 0usize;
        let mut else_at = None;
        for (k, w) in words.iter().enumerate().skip(then_at + 1) {
            match self.text(*w) {
                "if" => depth += 1,
                "else" if depth == 0 => {
                    else_at = Some(k);
                    break;
                }
                "else" => depth -= 1,
                _ => {}
            }
        }
        let mut then_end = else_at.map_or(span.e, |k| words[k].s);
        // The seed manual writes `if C then A -> else then B`: the arrow before `else` and the
        // `then` after it are only layout.
        if else_at.is_some() {
            let t = self.text(Span::new(words[then_at].e, then_end)).trim_end();
            if let Some(before) = t.strip_suffix("->").or_else(|| t.strip_suffix('→')) {
                then_end = words[then_at].e + before.len();
            }
        }
        let then_span = Span::new(words[then_at].e, then_end);
        if self.trim(then_span).is_empty() {
            return Err(self.err(words[then_at].e, "if", "expected a command after `then`"));
        }
        let cond = self.cond(cond_span)?;
        let then = Box::new(self.chain(then_span)?);
        let otherwise = match else_at {
            Some(k) => {
                let after = words.get(k + 1).filter(|w| self.text(**w) == "then");
                let else_span = Span::new(after.unwrap_or(&words[k]).e, span.e);
                if self.trim(else_span).is_empty() {
                    return Err(self.err(words[k].e, "if", "expected a command after `else`"));
                }
                Some(Box::new(self.chain(else_span)?))
            }
            None => None,
        };
        Ok(Command::If {
            cond,
            then,
            otherwise,
        })
    }

    /// cond := "not" cond | operand [ op operand ]
    fn cond(&mut self, span: Span) -> Result<Cond, ParseError> {
        let span = self.trim(span);
        let words = self.words(span);
        // `not not … x`: only the parity matters (and no recursion on long runs).
        let nots = words.iter().take_while(|w| self.text(**w) == "not").count();
        if nots > 0 {
            let rest = Span::new(words[nots - 1].e, span.e);
            if self.trim(rest).is_empty() {
                return Err(self.err(words[nots - 1].e, "if", "expected a condition after `not`"));
            }
            let inner = self.compare(rest, &words[nots..])?;
            return Ok(if nots % 2 == 1 {
                Cond::Not(Box::new(inner))
            } else {
                inner
            });
        }
        self.compare(span, &words)
    }

    /// operand [ op operand ], given the span's top-level words.
    fn compare(&mut self, span: Span, words: &[Span]) -> Result<Cond, ParseError> {
        let span = self.trim(span);
        let op = words.iter().enumerate().skip(1).find_map(|(k, w)| {
            let op = match self.text(*w) {
                "==" | "=" => CmpOp::Eq,
                "!=" => CmpOp::Ne,
                "<" => CmpOp::Lt,
                "<=" => CmpOp::Le,
                ">" => CmpOp::Gt,
                ">=" => CmpOp::Ge,
                "contains" => CmpOp::Contains,
                _ => return None,
            };
            Some((k, op))
        });
        let Some((k, op)) = op else {
            return Ok(Cond::Truthy(self.operand(span)?));
        };
        let right = Span::new(words[k].e, span.e);
        if self.trim(right).is_empty() {
            return Err(self.err(words[k].e, "if", "expected a value after the comparison"));
        }
        Ok(Cond::Compare {
            left: self.operand(Span::new(span.s, words[k].s))?,
            op,
            right: self.operand(right)?,
        })
    }

    fn operand(&mut self, span: Span) -> Result<Operand, ParseError> {
        match self.capture(span) {
            Some(inner) => Ok(Operand::Capture(Box::new(self.chain(inner)?))),
            None => Ok(Operand::Text(self.free_text(span))),
        }
    }

    /// for := "for" NAME "in" items "do" chain
    fn parse_for(&mut self, span: Span) -> Result<Command, ParseError> {
        let words = self.words(span);
        let var = words
            .get(1)
            .map(|w| self.text(*w))
            .filter(|v| is_name(v))
            .ok_or_else(|| {
                self.err(
                    words[0].e,
                    "for",
                    "expected a loop variable name after `for`",
                )
            })?;
        if words.get(2).map(|w| self.text(*w)) != Some("in") {
            return Err(self.err(words[1].e, "for", "expected `in` after the loop variable"));
        }
        let do_at = words
            .iter()
            .skip(3)
            .position(|w| self.text(*w) == "do")
            .map(|k| k + 3)
            .ok_or_else(|| self.err(span.e, "for", "expected `do` after the items"))?;
        let items_span = self.trim(Span::new(words[2].e, words[do_at].s));
        if items_span.is_empty() {
            return Err(self.err(words[2].e, "for", "expected items after `in`"));
        }
        let items = self.for_items(items_span)?;
        let body_span = Span::new(words[do_at].e, span.e);
        if self.trim(body_span).is_empty() {
            return Err(self.err(words[do_at].e, "for", "expected a command after `do`"));
        }
        Ok(Command::For {
            var: var.to_string(),
            items,
            body: Box::new(self.chain(body_span)?),
        })
    }

    fn for_items(&self, span: Span) -> Result<ForItems, ParseError> {
        let text = self.text(span);
        if let Some(inner) = text.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
            return self.range(span.s, inner);
        }
        if let Some(inner) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            let items = self.split_commas(Span::new(span.s + 1, span.s + 1 + inner.len()));
            return Ok(ForItems::List(
                items.into_iter().map(|s| self.free_text(s)).collect(),
            ));
        }
        Ok(ForItems::List(
            self.words(span)
                .into_iter()
                .map(|w| self.free_text(w))
                .collect(),
        ))
    }

    fn range(&self, pos: usize, inner: &str) -> Result<ForItems, ParseError> {
        let bad = || self.err(pos, "for", "expected a range like {1..5} or {10..0..2}");
        let nums: Vec<&str> = inner.split("..").collect();
        if !(2..=3).contains(&nums.len()) {
            return Err(bad());
        }
        let parse = |s: &str| s.trim().parse::<i64>().map_err(|_| bad());
        let (from, to) = (parse(nums[0])?, parse(nums[1])?);
        let step = if nums.len() == 3 { parse(nums[2])? } else { 1 };
        if step <= 0 {
            return Err(self.err(pos, "for", "the range step must be a positive number"));
        }
        let count = from.abs_diff(to) / step.unsigned_abs() + 1;
        if count > MAX_LOOP_ITERATIONS {
            return Err(self.err(
                pos,
                "for",
                format!("the range has {count} items; at most {MAX_LOOP_ITERATIONS} are allowed"),
            ));
        }
        Ok(ForItems::Range { from, to, step })
    }

    /// Top-level comma-separated, trimmed, non-empty pieces of `span`.
    fn split_commas(&self, span: Span) -> Vec<Span> {
        let mut out = Vec::new();
        let mut start = span.s;
        self.walk::<()>(span, |i, b, top| {
            if top && b == b',' {
                out.push(Span::new(start, i));
                start = i + 1;
            }
            ControlFlow::Continue(())
        });
        out.push(Span::new(start, span.e));
        out.into_iter()
            .map(|s| self.trim(s))
            .filter(|s| !s.is_empty())
            .collect()
    }

    /// A simple (non-chain, non-if/for) command, chosen by its first word.
    fn simple(&mut self, span: Span) -> Result<Command, ParseError> {
        let words = self.words(span);
        let head = self.text(words[0]);
        let rest = self.trim(Span::new(words[0].e, span.e));
        if self.is_dollar_assign(span) {
            // `$v = VALUE` (seed manual): an alias of `set v = VALUE`.
            return self.parse_set(Span::new(span.s + 1, span.e));
        }
        match head {
            "set" => self.parse_set(rest),
            "parallel" => self.parse_parallel(rest),
            "to" => Ok(Command::To(self.job(rest, "to")?)),
            "from" => self.parse_from(rest),
            "send_to_all" => self.parse_send_to_all(rest),
            "manager" => self.parse_manager(rest).map(Command::Manager),
            "tabs" if rest.is_empty() => {
                Ok(Command::Manager(crate::commands::ast::ManagerCmd::Tabs))
            }
            "tabs" => {
                let words: Vec<&str> = self.text(rest).split_whitespace().collect();
                match words.as_slice() {
                    ["budget", more @ ..] if more.len() <= 2 => {
                        Ok(Command::Manager(crate::commands::ast::ManagerCmd::Budget {
                            site: more.first().map(|s| s.to_string()),
                            quota: more.get(1).map(|s| s.to_string()),
                        }))
                    }
                    _ => Err(self.err(
                        rest.s,
                        "tabs",
                        "expected `tabs` or `tabs budget [SITE [N/hour|off]]`",
                    )),
                }
            }
            "flow" => self.parse_flow(rest),
            "role" => self.parse_role(rest),
            "remember" => self.parse_remember(rest),
            "memory" => self.parse_memory(rest),
            "skill" | "skills" => self.parse_skill(rest),
            "mcp" => self.parse_mcp(rest),
            "publish" => self.parse_publish(rest),
            "subscribe" => self.parse_subscribe(rest),
            "unsubscribe" => self.parse_unsubscribe(rest),
            "on" => self.parse_on(rest),
            "agent" | "agents" => self.parse_agent(rest),
            "jobs" => {
                let words: Vec<&str> = self.text(rest).split_whitespace().collect();
                match words.as_slice() {
                    [] => Ok(Command::Jobs(crate::commands::ast::JobsCmd::List)),
                    ["kill", id] => Ok(Command::Jobs(crate::commands::ast::JobsCmd::Kill(
                        id.to_string(),
                    ))),
                    _ => Err(self.err(rest.s, "jobs", "expected `jobs` or `jobs kill ID`")),
                }
            }
            "done" => Ok(self.parse_done(rest)),
            "help" => Ok(Command::Help {
                topic: (!rest.is_empty()).then(|| self.text(rest).to_string()),
            }),
            "then" | "else" | "do" => Err(self.err(
                words[0].s,
                if head == "do" { "for" } else { "if" },
                format!("`{head}` without a matching `if`/`for` before it"),
            )),
            _ => match self.pipe_into_set(span) {
                // `CMD | set NAME` (seed manual): an alias of `set NAME = $(CMD)`.
                Some((cmd, global, name)) => Ok(Command::Set {
                    name: name.to_string(),
                    global,
                    value: SetValue::Capture(Box::new(self.chain(cmd)?)),
                }),
                None => {
                    let text = self.text(span);
                    // `CMD &` (seed manual): a background job, answered at once with its id.
                    match text.strip_suffix('&').filter(|t| !t.ends_with('&')) {
                        Some(cmd) if !cmd.trim().is_empty() => Ok(Command::Background {
                            text: cmd.trim_end().to_string(),
                        }),
                        _ => Ok(Command::Shell {
                            text: text.to_string(),
                        }),
                    }
                }
            },
        }
    }

    /// `CMD | set [global] NAME`: the command before the last top-level `|` (not `||`), and
    /// the variable after it. A shell's `set` builtin would swallow the output and set
    /// nothing, so the seed manual's pipe into `set` means what it says.
    fn pipe_into_set(&self, span: Span) -> Option<(Span, bool, &'a str)> {
        let b = self.b;
        let mut last = None;
        self.walk::<()>(span, |i, c, top| {
            let single = b.get(i + 1) != Some(&b'|') && (i == span.s || b[i - 1] != b'|');
            if top && c == b'|' && single {
                last = Some(i);
            }
            ControlFlow::Continue(())
        });
        let bar = last?;
        let left = self.trim(Span::new(span.s, bar));
        let right = self.text(self.trim(Span::new(bar + 1, span.e)));
        let words: Vec<&str> = right.split_whitespace().collect();
        let (global, name) = match words.as_slice() {
            ["set", name] => (false, *name),
            ["set", "global", name] => (true, *name),
            _ => return None,
        };
        (is_name(name) && !left.is_empty()).then_some((left, global, name))
    }
}

/// The words that start a command (besides `if`, `for` and `$v = …`): anything else is a
/// shell command line, run only under an exec policy that allows it.
pub const COMMAND_WORDS: &[&str] = &[
    "set",
    "parallel",
    "to",
    "from",
    "send_to_all",
    "manager",
    "tabs",
    "flow",
    "role",
    "remember",
    "memory",
    "skill",
    "skills",
    "mcp",
    "publish",
    "subscribe",
    "unsubscribe",
    "on",
    "agent",
    "done",
    "help",
    "if",
    "for",
];

/// The known command words nearest to `word` (edit distance ≤ 2, or `word` of 3+ letters
/// begins one),
/// best first: for "unknown command" answers.
pub fn nearest_words(word: &str) -> Vec<&'static str> {
    let w = word.to_ascii_lowercase();
    let mut near: Vec<(usize, &'static str)> = COMMAND_WORDS
        .iter()
        .map(|k| (strsim::damerau_levenshtein(&w, k), *k))
        .filter(|(d, k)| *d <= 2 || (w.len() >= 3 && k.starts_with(w.as_str())))
        .collect();
    near.sort();
    near.into_iter().map(|(_, k)| k).take(3).collect()
}

/// Whether `word` is one of the seed manual's stand-ins for a command (`?<$var = $(shell)>!`,
/// `?<cmd1>! → ?<cmd2>!`): `shell`, `cmd`, `cmd1`, `cmdN`, `COMMAND`. Typed as written, it is
/// answered with what to put in its place rather than as an unknown command.
pub fn is_placeholder(word: &str) -> bool {
    let lower = word.to_ascii_lowercase();
    let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit() || c == 'n');
    lower == "shell"
        || word == "COMMAND"
        || lower
            .strip_prefix("cmd")
            .is_some_and(|n| n.len() <= 2 && digits(n))
}

/// The `$name` / `${name}` references in a command's text, in order, each once.
pub fn var_refs(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'$' {
            if let Some(((s, e), next)) = crate::exec::var_ref_at(b, i) {
                let name = text[s..e].to_string();
                if !out.contains(&name) {
                    out.push(name);
                }
                i = next;
                continue;
            }
        }
        i += 1;
    }
    out
}

/// Whether a command's text reads `$var`.
pub fn reads_var(text: &str, var: &str) -> bool {
    var_refs(text).iter().any(|v| v == var)
}

/// The variables a command's text reads that it does not set itself (a `for NAME in` loop
/// variable, a `set NAME =` or `$NAME =` target).
pub fn free_vars(text: &str) -> Vec<String> {
    let bound = crate::flows::validate::command_binds(text);
    var_refs(text)
        .into_iter()
        .filter(|v| !bound.contains(&v.as_str()))
        .collect()
}

/// `[A-Za-z_][A-Za-z0-9_]*`
fn is_name(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// Flow, node and group names: letters (any script), digits, `_`, `.`, `-`.
fn is_flow_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

mod forms;
mod memory_forms;

pub use memory_forms::split_tags;
mod agent_forms;
mod event_forms;
mod mcp;

pub use event_forms::parse_cond;

#[cfg(test)]
mod tests;
