//! The simple command forms (`set`, `parallel`, `to`, `from`, `manager`, `flow`, `role`)
//! and their pieces (targets, target lists, flow sources, `key=value` parameters).

use super::{is_flow_name, is_name, ParseError, Parser, Span};
use crate::commands::ast::{
    Command, FlowAction, FlowSource, Job, ManagerCmd, Role, SetValue, Target, Template,
};
use std::ops::ControlFlow;
use std::path::PathBuf;

impl<'a> Parser<'a> {
    /// set := "set" ["global"] NAME "=" ( "$(" chain ")" | text )
    pub(super) fn parse_set(&mut self, rest: Span) -> Result<Command, ParseError> {
        let (mut name, mut at) = self.name_at(rest.s, rest.e);
        let mut global = false;
        if name == "global" && self.skip_ws(at, rest.e).1 != Some(b'=') {
            global = true;
            (name, at) = self.name_at(at, rest.e);
        }
        if !is_name(name) {
            return Err(self.err(at, "set", "expected a variable name after `set`"));
        }
        let (eq, next) = self.skip_ws(at, rest.e);
        if next != Some(b'=') {
            return Err(self.err(eq, "set", "expected `=` after the variable name"));
        }
        let value_span = self.trim(Span::new(eq + 1, rest.e));
        let value = match self.capture(value_span) {
            Some(inner) => SetValue::Capture(Box::new(self.chain(inner)?)),
            None => SetValue::Literal(self.free_text(value_span)),
        };
        Ok(Command::Set {
            name: name.to_string(),
            global,
            value,
        })
    }

    /// Skip ASCII whitespace from `at`; the position reached and the byte there.
    fn skip_ws(&self, mut at: usize, end: usize) -> (usize, Option<u8>) {
        while at < end && self.b[at].is_ascii_whitespace() {
            at += 1;
        }
        (at, (at < end).then(|| self.b[at]))
    }

    /// The `[A-Za-z0-9_]*` run after whitespace from `at`, and the index after it.
    fn name_at(&self, at: usize, end: usize) -> (&'a str, usize) {
        let (s, _) = self.skip_ws(at, end);
        let mut e = s;
        while e < end && (self.b[e].is_ascii_alphanumeric() || self.b[e] == b'_') {
            e += 1;
        }
        (self.text(Span::new(s, e)), e)
    }

    /// A target at `at` (after whitespace): quoted, `role:R`, `group:G` or a bare name.
    pub(super) fn target_at(
        &self,
        at: usize,
        end: usize,
        topic: &'static str,
    ) -> Result<(Target, usize), ParseError> {
        let (s, first) = self.skip_ws(at, end);
        if let Some(q @ (b'"' | b'\'')) = first {
            let close = memchr::memchr(q, &self.b[s + 1..end])
                .map(|n| s + 1 + n)
                .ok_or_else(|| {
                    self.err(s, topic, "expected the closing quote of the target name")
                })?;
            let name = self.text(Span::new(s + 1, close));
            if name.trim().is_empty() {
                return Err(self.err(
                    s,
                    topic,
                    "expected a target (site name, label or client id)",
                ));
            }
            return Ok((Target::Name(name.to_string()), close + 1));
        }
        let token_end = |from: usize| {
            (from..end)
                .find(|&i| {
                    let c = self.b[i];
                    c.is_ascii_whitespace()
                        || matches!(c, b',' | b'[' | b']' | b':' | b'"' | b'\'' | b'=')
                })
                .unwrap_or(end)
        };
        let e = token_end(s);
        let word = self.text(Span::new(s, e));
        if word.is_empty() {
            return Err(self.err(
                s,
                topic,
                "expected a target (site name, label or client id)",
            ));
        }
        // `auto:SITE` / `auto:SITE,SITE` (a tab of those sites, picked by the decision
        // engine): the sites are part of the target, never of the prompt. In a parallel's
        // list a comma ends the target; elsewhere it separates the sites.
        if word == "auto" && self.b.get(e) == Some(&b':') {
            let site_byte = |c: u8| {
                c.is_ascii_alphanumeric()
                    || matches!(c, b'-' | b'_' | b'.')
                    || (c == b',' && topic != "parallel")
            };
            let ve = (e + 1..end).find(|&i| !site_byte(self.b[i])).unwrap_or(end);
            if ve > e + 1 {
                let sites = self.text(Span::new(e + 1, ve)).trim_end_matches(',');
                return Ok((Target::Name(format!("auto:{sites}")), ve));
            }
        }
        let selector = (word == "role" || word == "group")
            && self.b.get(e) == Some(&b':')
            && e + 1 < end
            && !self.b[e + 1].is_ascii_whitespace();
        if !selector {
            return Ok((Target::Name(word.to_string()), e));
        }
        let ve = token_end(e + 1);
        let value = self.text(Span::new(e + 1, ve));
        if word == "group" {
            return Ok((Target::Group(value.to_string()), ve));
        }
        let role = Role::parse(value).ok_or_else(|| {
            self.err(
                e + 1,
                topic,
                "expected role:master, role:foreman or role:worker",
            )
        })?;
        Ok((Target::Role(role), ve))
    }

    /// `TARGET: TEXT` (for `to`).
    pub(super) fn job(&self, rest: Span, topic: &'static str) -> Result<Job, ParseError> {
        let (target, after) = self.target_at(rest.s, rest.e, topic)?;
        let (files, after) = self.with_files(after, rest.e, topic)?;
        let (colon, c) = self.skip_ws(after, rest.e);
        if c != Some(b':') {
            let message = match &target {
                Target::Name(n) if n.starts_with("auto:") => format!(
                    "expected `:` after the target `{n}` (`to auto: TEXT` asks any tab, \
                     `to auto:SITE: TEXT` a tab of SITE)"
                ),
                _ => "expected `:` after the target".into(),
            };
            return Err(self.err(colon, topic, message));
        }
        let prompt = self.trim(Span::new(colon + 1, rest.e));
        if prompt.is_empty() {
            return Err(self.err(colon + 1, topic, "expected the prompt text after `:`"));
        }
        Ok(Job {
            target,
            prompt: self.free_text(prompt),
            files,
        })
    }

    /// `with files=[a.png, "报告 1.pdf"]` at `at` (after whitespace): the names and the index
    /// after `]`; no names and `at` itself when the words are not there (docs/files.md).
    pub(super) fn with_files(
        &self,
        at: usize,
        end: usize,
        topic: &'static str,
    ) -> Result<(Vec<String>, usize), ParseError> {
        let (s, _) = self.skip_ws(at, end);
        let rest = self.text(Span::new(s, end));
        let Some(after_with) = rest.strip_prefix("with") else {
            return Ok((Vec::new(), at));
        };
        let (f, _) = self.skip_ws(s + 4, end);
        if !after_with.starts_with(char::is_whitespace)
            || !self.text(Span::new(f, end)).starts_with("files")
        {
            return Ok((Vec::new(), at));
        }
        let (eq, c) = self.skip_ws(f + 5, end);
        let (open, c2) = self.skip_ws(eq + 1, end);
        if c != Some(b'=') || c2 != Some(b'[') {
            return Err(self.err(f, topic, "expected `with files=[NAME, …]`"));
        }
        let close = self
            .closing_bracket(Span::new(open + 1, end))
            .ok_or_else(|| self.err(end, topic, "expected `]` to close the file list"))?;
        let mut names = Vec::new();
        for piece in self.split_commas(Span::new(open + 1, close)) {
            let raw = self.text(piece);
            let name = raw
                .strip_prefix('"')
                .and_then(|r| r.strip_suffix('"'))
                .or_else(|| raw.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')))
                .unwrap_or(raw);
            if name.trim().is_empty() {
                return Err(self.err(piece.s, topic, "expected a file name in `files=[…]`"));
            }
            names.push(name.to_string());
        }
        if names.is_empty() {
            return Err(self.err(
                open,
                topic,
                "expected at least one file name in `files=[…]`",
            ));
        }
        Ok((names, close + 1))
    }

    pub(super) fn parse_from(&mut self, rest: Span) -> Result<Command, ParseError> {
        let (target, after) = self.target_at(rest.s, rest.e, "from")?;
        let (colon, c) = self.skip_ws(after, rest.e);
        if c != Some(b':') {
            return Err(self.err(colon, "from", "expected `:` after the target"));
        }
        let cmd = self.trim(Span::new(colon + 1, rest.e));
        let then = if cmd.is_empty() {
            None
        } else {
            Some(Box::new(self.chain(cmd)?))
        };
        Ok(Command::From { target, then })
    }

    /// send_to_all := "send_to_all" ["with" "files" "=" "[" NAMES "]"] TEXT
    pub(super) fn parse_send_to_all(&self, rest: Span) -> Result<Command, ParseError> {
        let (files, text_at) = self.with_files(rest.s, rest.e, "send_to_all")?;
        let text = self.trim(Span::new(text_at, rest.e));
        if text.is_empty() {
            return Err(self.err(text.s, "send_to_all", "expected the prompt text"));
        }
        Ok(Command::SendToAll {
            prompt: self.free_text(text),
            files,
        })
    }

    /// parallel := "parallel" "to" "=" "[" targets "]" TEXT | "parallel" "to" "=" "[" T ":" P ("," T ":" P)* "]"
    pub(super) fn parse_parallel(&self, rest: Span) -> Result<Command, ParseError> {
        let expect_open = || self.err(rest.s, "parallel", "expected `to=[` after `parallel`");
        if !self.text(rest).starts_with("to") {
            return Err(expect_open());
        }
        let (eq, c) = self.skip_ws(rest.s + 2, rest.e);
        if c != Some(b'=') {
            return Err(expect_open());
        }
        let (open, c) = self.skip_ws(eq + 1, rest.e);
        if c != Some(b'[') {
            return Err(expect_open());
        }
        let close = self
            .closing_bracket(Span::new(open + 1, rest.e))
            .ok_or_else(|| self.err(rest.e, "parallel", "expected `]` to close the target list"))?;
        let list = Span::new(open + 1, close);
        // `with files=[…]` after the list goes to every target.
        let (shared_files, tail_at) = self.with_files(close + 1, rest.e, "parallel")?;
        let tail = self.trim(Span::new(tail_at, rest.e));
        let (first, after_first) =
            self.target_at(list.s, list.e, "parallel")
                .map_err(|mut e| {
                    e.message = "expected at least one target in `to=[…]`".into();
                    e
                })?;
        let per_target = self.skip_ws(after_first, list.e).1 == Some(b':');
        let jobs = if per_target {
            if !tail.is_empty() {
                return Err(self.err(
                    tail.s,
                    "parallel",
                    "nothing may follow `]` when each target has its own prompt",
                ));
            }
            self.per_target_jobs(list)?
        } else {
            if tail.is_empty() {
                return Err(self.err(close + 1, "parallel", "expected the prompt text after `]`"));
            }
            let targets = self.target_list(list, first, after_first)?;
            match self.line_jobs(tail, &targets)? {
                Some(jobs) => jobs,
                None => {
                    let prompt = self.free_text(tail);
                    targets
                        .into_iter()
                        .map(|target| Job {
                            target,
                            prompt: prompt.clone(),
                            files: Vec::new(),
                        })
                        .collect()
                }
            }
        };
        let jobs = jobs
            .into_iter()
            .map(|mut j| {
                // A per-target line's own files come after the shared ones.
                let own = std::mem::take(&mut j.files);
                j.files = shared_files.iter().cloned().chain(own).collect();
                j
            })
            .collect();
        Ok(Command::Parallel { jobs })
    }

    /// A body after `to=[…]` written as one `TARGET: TEXT` line per target (docs/commands.md,
    /// "parallel, one line per target"): each target's job, in the list's order. None when no
    /// line names a target of the list (a plain body, sent whole to every target). Once one
    /// line does, every line must name a different target of the list and every target must
    /// have its line; anything else is refused, naming the line, rather than sent whole.
    fn line_jobs(&self, body: Span, targets: &[Target]) -> Result<Option<Vec<Job>>, ParseError> {
        let same = |a: &Target, b: &Target| match (a, b) {
            (Target::Name(x), Target::Name(y)) => x.eq_ignore_ascii_case(y),
            _ => a == b,
        };
        // Top-level lines (a quoted prompt may span several), trimmed, empty ones left out.
        let mut lines = Vec::new();
        let mut start = body.s;
        self.walk::<()>(body, |i, b, top| {
            if top && b == b'\n' {
                lines.push(Span::new(start, i));
                start = i + 1;
            }
            ControlFlow::Continue(())
        });
        lines.push(Span::new(start, body.e));
        let lines: Vec<Span> = lines
            .into_iter()
            .map(|l| self.trim(l))
            .filter(|l| !l.is_empty())
            .collect();
        // Each line's `TARGET:` and where its text starts, when it begins with one.
        let named: Vec<Option<(Target, usize, Vec<String>)>> = lines
            .iter()
            .map(|l| {
                let (target, after) = self.target_at(l.s, l.e, "parallel").ok()?;
                let (files, after) = self.with_files(after, l.e, "parallel").ok()?;
                let (colon, c) = self.skip_ws(after, l.e);
                (c == Some(b':')).then_some((target, colon + 1, files))
            })
            .collect();
        let in_list = |t: &Target| targets.iter().any(|x| same(x, t));
        if !named.iter().flatten().any(|(t, _, _)| in_list(t)) {
            return Ok(None);
        }
        let list = targets
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        let shown = |l: Span| {
            let text = self.text(l);
            match text.char_indices().nth(60) {
                Some((cut, _)) => format!("{}…", &text[..cut]),
                None => text.to_string(),
            }
        };
        let mut prompts: Vec<Option<(Template, Vec<String>)>> = vec![None; targets.len()];
        for (k, (line, named)) in lines.iter().zip(&named).enumerate() {
            let n = k + 1;
            let Some((target, text_at, files)) = named else {
                return Err(self.err(
                    line.s,
                    "parallel",
                    format!(
                        "line {n} `{}` names no target, but other lines are `TARGET: TEXT`: \
                         give it one of to=[{list}] (or quote a prompt that spans lines)",
                        shown(*line)
                    ),
                ));
            };
            let Some(slot) = targets.iter().position(|x| same(x, target)) else {
                return Err(self.err(
                    line.s,
                    "parallel",
                    format!(
                        "line {n} `{}` names `{target}`, which is not in to=[{list}]",
                        shown(*line)
                    ),
                ));
            };
            if prompts[slot].is_some() {
                return Err(self.err(
                    line.s,
                    "parallel",
                    format!("line {n} `{}` names `{target}` a second time", shown(*line)),
                ));
            }
            let text = self.trim(Span::new(*text_at, line.e));
            if text.is_empty() {
                return Err(self.err(
                    *text_at,
                    "parallel",
                    format!("line {n} has no prompt for {target} after `:`"),
                ));
            }
            prompts[slot] = Some((self.free_text(text), files.clone()));
        }
        targets
            .iter()
            .zip(prompts)
            .map(|(target, prompt)| match prompt {
                Some((prompt, files)) => Ok(Job {
                    target: target.clone(),
                    prompt,
                    files,
                }),
                None => Err(self.err(
                    body.s,
                    "parallel",
                    format!(
                        "`{target}` in to=[{list}] has no `{target}: TEXT` line, while other targets do"
                    ),
                )),
            })
            .collect::<Result<_, _>>()
            .map(Some)
    }

    /// Index of the top-level `]` matching an already-consumed `[`.
    fn closing_bracket(&self, span: Span) -> Option<usize> {
        let mut depth = 0u32;
        self.walk(span, |i, b, top| {
            match (top, b) {
                (true, b'[') => depth += 1,
                (true, b']') if depth == 0 => return ControlFlow::Break(i),
                (true, b']') => depth -= 1,
                _ => {}
            }
            ControlFlow::Continue(())
        })
    }

    /// `a, b, c` → targets (the first already parsed).
    fn target_list(
        &self,
        list: Span,
        first: Target,
        mut at: usize,
    ) -> Result<Vec<Target>, ParseError> {
        let mut targets = vec![first];
        loop {
            let (p, c) = self.skip_ws(at, list.e);
            match c {
                None => return Ok(targets),
                Some(b',') => {
                    let (t, next) = self.target_at(p + 1, list.e, "parallel")?;
                    targets.push(t);
                    at = next;
                }
                Some(_) => {
                    return Err(self.err(p, "parallel", "expected `,` or `]` in the target list"));
                }
            }
        }
    }

    /// `a: p1, b: p2` → jobs; a new item starts at a top-level `, NAME:`.
    fn per_target_jobs(&self, list: Span) -> Result<Vec<Job>, ParseError> {
        let mut starts = vec![list.s];
        self.walk::<()>(list, |i, b, top| {
            if top && b == b',' {
                if let Ok((_, after)) = self.target_at(i + 1, list.e, "parallel") {
                    if self.skip_ws(after, list.e).1 == Some(b':') {
                        starts.push(i + 1);
                    }
                }
            }
            ControlFlow::Continue(())
        });
        let mut jobs = Vec::with_capacity(starts.len());
        for (k, &s) in starts.iter().enumerate() {
            let e = starts.get(k + 1).map_or(list.e, |&n| n - 1);
            let (target, after) = self.target_at(s, e, "parallel")?;
            let (colon, _) = self.skip_ws(after, e);
            let prompt = self.trim(Span::new(colon + 1, e));
            if prompt.is_empty() {
                return Err(self.err(
                    colon + 1,
                    "parallel",
                    format!("expected a prompt for {target} after `:`"),
                ));
            }
            jobs.push(Job {
                target,
                prompt: self.free_text(prompt),
                files: Vec::new(),
            });
        }
        Ok(jobs)
    }

    pub(super) fn parse_manager(&self, rest: Span) -> Result<ManagerCmd, ParseError> {
        let words = self.words(rest);
        let verb = words.first().map(|w| self.text(*w));
        let name = |k: usize| -> Result<String, ParseError> {
            let w = words
                .get(k)
                .ok_or_else(|| self.err(rest.e, "manager", "expected a flow name"))?;
            let n = self.text(*w);
            if is_flow_name(n) {
                Ok(n.to_string())
            } else {
                Err(self.err(
                    w.s,
                    "manager",
                    format!("`{n}` is not a flow name (letters, digits, _ . -)"),
                ))
            }
        };
        let exactly = |n: usize, cmd: ManagerCmd| match words.get(n) {
            Some(w) => Err(self.err(w.s, "manager", format!("unexpected `{}`", self.text(*w)))),
            None => Ok(cmd),
        };
        match verb {
            Some("create") => {
                let name = name(1)?;
                if words.get(2).map(|w| self.text(*w)) != Some("from") {
                    let at = words.get(2).map_or(rest.e, |w| w.s);
                    return Err(self.err(at, "manager", "expected `from` after the flow name"));
                }
                let mut src = self.trim(Span::new(words[2].e, rest.e));
                // `auto_retry=N` after the definition (seed manual).
                let mut auto_retry = None;
                if let Some(at) = self.text(src).rfind("auto_retry") {
                    let tail = self.text(src)[at..].trim();
                    // Outside the definition: what comes before it is a whole quoted string
                    // or a `file:` path (else it is the flow's own text).
                    let head = self.trim(Span::new(src.s, src.s + at));
                    let outside = self.quoted(head).is_some()
                        || (self.text(head).starts_with("file:")
                            && !self.text(head).contains(char::is_whitespace));
                    if outside {
                        let n = tail
                            .strip_prefix("auto_retry")
                            .map(|t| t.trim_start().trim_start_matches('=').trim())
                            .and_then(|n| n.parse::<u32>().ok())
                            .filter(|n| *n <= 10)
                            .ok_or_else(|| {
                                self.err(
                                    src.s + at,
                                    "manager",
                                    "expected auto_retry=N (N from 0 to 10) after the definition",
                                )
                            })?;
                        auto_retry = Some(n);
                        src = self.trim(Span::new(src.s, src.s + at));
                    }
                }
                let source = self.flow_source(src)?;
                Ok(ManagerCmd::Create {
                    name,
                    source,
                    auto_retry,
                })
            }
            Some("run") => self.manager_run(name(1)?, &words[2..]),
            Some("pause") => exactly(2, ManagerCmd::Pause(name(1)?)),
            Some("resume") => exactly(2, ManagerCmd::Resume(name(1)?)),
            Some("stop") => exactly(2, ManagerCmd::Stop(name(1)?)),
            Some("status") => exactly(2, ManagerCmd::Status(name(1)?)),
            Some("show") => exactly(2, ManagerCmd::Show(name(1)?)),
            Some("delete") => exactly(2, ManagerCmd::Delete(name(1)?)),
            Some("list") => exactly(1, ManagerCmd::List),
            Some("export") => {
                let name = name(1)?;
                if words.get(2).map(|w| self.text(*w)) != Some("to") {
                    let at = words.get(2).map_or(rest.e, |w| w.s);
                    return Err(self.err(at, "manager", "expected `to file:PATH` after the flow name"));
                }
                let dest = self.trim(Span::new(words[2].e, rest.e));
                if !self.text(dest).starts_with("file:") {
                    return Err(self.err(dest.s, "manager", "expected `file:PATH` after `to`"));
                }
                match self.flow_source(dest)? {
                    FlowSource::File(path) => Ok(ManagerCmd::Export { name, path }),
                    FlowSource::Inline(_) => {
                        Err(self.err(dest.s, "manager", "expected `file:PATH` after `to`"))
                    }
                }
            }
            Some("plan") => {
                let goal = self.trim(Span::new(words[0].e, rest.e));
                if goal.is_empty() {
                    return Err(self.err(goal.s, "manager", "expected the goal after `plan`"));
                }
                Ok(ManagerCmd::Plan(self.text(goal).to_string()))
            }
            Some("approve") => {
                let id = name(1)?;
                let params = words[2..]
                    .iter()
                    .map(|w| self.param_for(*w, "manager"))
                    .collect::<Result<_, _>>()?;
                Ok(ManagerCmd::Approve { id, params })
            }
            Some("modify") => {
                let after = self.trim(Span::new(words[0].e, rest.e));
                let text = self.text(after);
                let colon = text.find(':').ok_or_else(|| {
                    self.err(after.e, "manager", "expected `modify ID: FEEDBACK`")
                })?;
                let id = text[..colon].trim();
                if !is_flow_name(id) {
                    return Err(self.err(after.s, "manager", "expected a draft id before `:`"));
                }
                let feedback = text[colon + 1..].trim();
                if feedback.is_empty() {
                    return Err(self.err(
                        after.s + colon + 1,
                        "manager",
                        "expected the feedback after `:`",
                    ));
                }
                Ok(ManagerCmd::Modify {
                    id: id.to_string(),
                    feedback: feedback.to_string(),
                })
            }
            Some("reject") => exactly(2, ManagerCmd::Reject(name(1)?)),
            Some("save") => {
                let id = name(1)?;
                if words.get(2).map(|w| self.text(*w)) != Some("as") {
                    let at = words.get(2).map_or(rest.e, |w| w.s);
                    return Err(self.err(at, "manager", "expected `as NAME` after the draft id"));
                }
                let cmd = ManagerCmd::Save { id, name: name(3)? };
                exactly(4, cmd)
            }
            Some("why") => {
                let run = name(1)?;
                let cmd = ManagerCmd::Why { run, node: name(2)? };
                exactly(3, cmd)
            }
            _ => Err(self.err(
                words.first().map_or(rest.s, |w| w.s),
                "manager",
                "expected a verb: create, run, pause, resume, stop, status, show, delete, list, export, plan, approve, modify, reject, save or why",
            )),
        }
    }

    /// `"a -> b"` or `file:PATH` (the path may be quoted).
    fn flow_source(&self, src: Span) -> Result<FlowSource, ParseError> {
        let text = self.text(src);
        if let Some(path) = text.strip_prefix("file:") {
            let path_span = Span::new(src.s + 5, src.e);
            let path = match self.quoted(path_span) {
                Some((inner, _)) => self.text(inner),
                None => path,
            };
            let unquoted_space =
                self.quoted(path_span).is_none() && path.chars().any(char::is_whitespace);
            if path.is_empty() || unquoted_space {
                return Err(self.err(
                    src.s + 5,
                    "manager",
                    "expected a path after `file:` (quote it if it has spaces)",
                ));
            }
            return Ok(FlowSource::File(PathBuf::from(path)));
        }
        match self.quoted(src) {
            Some((inner, _)) if !inner.is_empty() => {
                Ok(FlowSource::Inline(self.text(inner).to_string()))
            }
            _ => Err(self.err(
                src.s,
                "manager",
                "expected a quoted definition (\"a -> b\") or file:PATH",
            )),
        }
    }

    fn manager_run(&self, name: String, args: &[Span]) -> Result<ManagerCmd, ParseError> {
        let mut from_node = None;
        let mut params = Vec::new();
        let mut k = 0;
        while k < args.len() {
            let w = self.text(args[k]);
            if w == "--from-node" {
                let id = args
                    .get(k + 1)
                    .map(|a| self.text(*a))
                    .filter(|id| is_flow_name(id))
                    .ok_or_else(|| {
                        self.err(args[k].e, "manager", "expected a node id after --from-node")
                    })?;
                from_node = Some(id.to_string());
                k += 2;
                continue;
            }
            if let Some(id) = w.strip_prefix("--from-node=") {
                if !is_flow_name(id) {
                    return Err(self.err(
                        args[k].s,
                        "manager",
                        "expected a node id after --from-node=",
                    ));
                }
                from_node = Some(id.to_string());
            } else {
                params.push(self.param(args[k])?);
            }
            k += 1;
        }
        Ok(ManagerCmd::Run {
            name,
            from_node,
            params,
        })
    }

    /// `key=value` (value may be quoted; its `$var`s are expanded when the command runs).
    fn param(&self, w: Span) -> Result<(String, String), ParseError> {
        self.param_for(w, "manager")
    }

    /// `key=value` for the command of help topic `topic`.
    pub(super) fn param_for(
        &self,
        w: Span,
        topic: &'static str,
    ) -> Result<(String, String), ParseError> {
        let text = self.text(w);
        let bad = || {
            self.err(
                w.s,
                topic,
                if topic == "manager" {
                    format!("expected key=value or --from-node ID, found `{text}`")
                } else {
                    format!("expected key=value, found `{text}`")
                },
            )
        };
        let eq = text.find('=').ok_or_else(bad)?;
        let key = &text[..eq];
        if !is_name(key) {
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

    pub(super) fn parse_flow(&self, rest: Span) -> Result<Command, ParseError> {
        let words = self.words(rest);
        let action = match words.first().map(|w| self.text(*w)) {
            Some("start") => FlowAction::Start,
            Some("pause") => FlowAction::Pause,
            Some("resume") => FlowAction::Resume,
            Some("stop") => FlowAction::Stop,
            Some("status") => FlowAction::Status,
            _ => {
                return Err(self.err(
                    rest.s,
                    "flow",
                    "expected start, pause, resume, stop or status",
                ));
            }
        };
        if let Some(w) = words.get(1) {
            // `flow start NAME [key=value…]` (seed manual): an alias of `manager run NAME`.
            if action == FlowAction::Start {
                let n = self.text(*w);
                if !is_flow_name(n) {
                    return Err(self.err(
                        w.s,
                        "flow",
                        format!("`{n}` is not a flow name (letters, digits, _ . -)"),
                    ));
                }
                return self
                    .manager_run(n.to_string(), &words[2..])
                    .map(Command::Manager);
            }
            return Err(self.err(w.s, "flow", format!("unexpected `{}`", self.text(*w))));
        }
        Ok(Command::Flow(action))
    }

    pub(super) fn parse_role(&self, rest: Span) -> Result<Command, ParseError> {
        let words = self.words(rest);
        if words.first().is_some_and(|w| self.text(*w) == "test") {
            return match words.as_slice() {
                [_] => Ok(Command::RoleTest(None)),
                [_, card] => Ok(Command::RoleTest(Some(self.text(*card).to_string()))),
                [_, _, extra, ..] => Err(self.err(
                    extra.s,
                    "role",
                    format!("unexpected `{}`", self.text(*extra)),
                )),
                [] => unreachable!("a first word was seen"),
            };
        }
        let role = words
            .first()
            .and_then(|w| Role::parse(self.text(*w)))
            .ok_or_else(|| self.err(rest.s, "role", "expected master, foreman or worker"))?;
        let group = match words.get(1) {
            None => None,
            Some(w) => match self.text(*w).strip_prefix("group=") {
                Some(g) if is_flow_name(g) => Some(g.to_string()),
                _ => return Err(self.err(w.s, "role", "expected group=NAME")),
            },
        };
        if let Some(w) = words.get(2) {
            return Err(self.err(w.s, "role", format!("unexpected `{}`", self.text(*w))));
        }
        Ok(Command::Role { role, group })
    }
}
