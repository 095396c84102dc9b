//! The agent's memory stream (docs/agents.md, after "Readable Minds" / generative agents): every
//! round adds one observation per command (the command, a digest of its result, an
//! importance 1–10); when the importance summed since the last reflection passes a threshold
//! (default 50) the session asks the agent's tab for a reflection, which becomes a memory
//! citing the observations it was written from.
//!
//! Observations are ordinary memories of the agent's scope (`src/memory`), so retrieval is the
//! team memory's own ranking — relevance (bm25) × recency (temperature) × importance,
//! [`crate::memory::temperature::rank`] — and is not repeated here.

use crate::commands::agent::AgentCmd;
use crate::commands::ast::{Command, MemoryCmd};
use crate::commands::parser;
use crate::memory::NewMemory;

/// Default importance sum that asks for a reflection.
pub const REFLECT_THRESHOLD: u32 = 50;
/// Most characters of a result kept in an observation's digest.
pub const DIGEST_CHARS: usize = 200;

/// One observation: what one command of one round did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    /// The round.
    pub round: u32,
    /// The command's body.
    pub command: String,
    /// Whether it succeeded.
    pub ok: bool,
    /// A one-line digest of its result.
    pub digest: String,
    /// 1–10.
    pub importance: u8,
}

impl Observation {
    /// An observation with the importance the agent stated, or else the estimate.
    pub fn new(round: u32, command: &str, ok: bool, output: &str, stated: Option<u8>) -> Self {
        Self {
            round,
            command: command.trim().to_string(),
            ok,
            digest: digest(output),
            importance: stated
                .map(|n| n.clamp(1, 10))
                .unwrap_or_else(|| estimate_importance(command, ok)),
        }
    }

    /// The memory text: `round 3 ✓ to kimi: … → digest`.
    pub fn text(&self) -> String {
        format!(
            "round {} {} {} → {}",
            self.round,
            if self.ok { "✓" } else { "✗" },
            self.command,
            self.digest
        )
    }

    /// As a memory of `scope` (tagged `observation`).
    pub fn as_memory<'a>(
        &self,
        scope: &'a str,
        text: &'a str,
        tags: &'a [String],
    ) -> NewMemory<'a> {
        NewMemory {
            scope,
            text,
            tags,
            pinned: false,
            importance: Some(self.importance),
            author: None,
            sources: &[],
        }
    }
}

/// The result on one line, cut at [`DIGEST_CHARS`] characters, with its full length.
pub fn digest(output: &str) -> String {
    let one_line = output.split_whitespace().collect::<Vec<_>>().join(" ");
    let total = one_line.chars().count();
    if total <= DIGEST_CHARS {
        return one_line;
    }
    let cut: String = one_line.chars().take(DIGEST_CHARS).collect();
    format!("{cut}… ({total} chars)")
}

/// The importance the hub estimates when the agent states none. The heuristic, by what the
/// command does (a failure adds 2, at most 10):
///
/// | command | importance |
/// |---|---|
/// | `done` | 9 |
/// | a memory write (`memory TEXT…`, `remember`) | 7 |
/// | asking tabs (`to`, `parallel`, `send_to_all`), a flow, an agent task | 5 |
/// | shell, `skill`, `mcp use` | 4 |
/// | reading (`help`, `memory search/list/tags`, `from`, status, lists) | 2 |
/// | anything else (a chain, `if`, `for`, `set`) | 3 |
/// | a command that does not parse | 3 (+2 failed) |
pub fn estimate_importance(command: &str, ok: bool) -> u8 {
    let base: u8 = match parser::parse(command) {
        Err(_) => 3,
        Ok(c) => match c {
            Command::Agent(AgentCmd::Done(_)) => 9,
            Command::Memory(m) if m.writes() => 7,
            Command::Remember { .. } => 7,
            Command::To(_) | Command::Parallel { .. } | Command::SendToAll { .. } => 5,
            Command::Manager(m) if m.mutates() => 5,
            Command::Agent(AgentCmd::Task { .. }) => 5,
            Command::Shell { .. } | Command::Skill(_) | Command::Mcp(_) => 4,
            Command::Help { .. }
            | Command::Memory(
                MemoryCmd::Search { .. } | MemoryCmd::List { .. } | MemoryCmd::Tags { .. },
            )
            | Command::From { .. }
            | Command::Manager(_)
            | Command::Flow(_)
            | Command::Agent(_) => 2,
            _ => 3,
        },
    };
    if ok {
        base
    } else {
        (base + 2).min(10)
    }
}

/// The observations of one agent since its last reflection, and when to reflect.
#[derive(Debug, Clone, Default)]
pub struct MemoryStream {
    threshold: u32,
    /// (memory id, observation) since the last reflection.
    pending: Vec<(i64, Observation)>,
    sum: u32,
}

impl MemoryStream {
    /// A stream asking for a reflection past `threshold` (0: [`REFLECT_THRESHOLD`]).
    pub fn new(threshold: u32) -> Self {
        Self {
            threshold: if threshold == 0 {
                REFLECT_THRESHOLD
            } else {
                threshold
            },
            ..Self::default()
        }
    }

    /// Adds an observation stored as memory `id`; true when a reflection is due now.
    pub fn push(&mut self, id: i64, o: Observation) -> bool {
        self.sum += u32::from(o.importance);
        self.pending.push((id, o));
        self.sum >= self.threshold
    }

    /// Importance summed since the last reflection.
    pub fn sum(&self) -> u32 {
        self.sum
    }

    /// The prompt asking for a reflection, citing each observation by its memory id, and the
    /// ids (the reflection memory's `sources`). Starts a new sum.
    pub fn reflect(&mut self) -> (String, Vec<i64>) {
        let mut prompt = String::from(
            "请反思：从下面的观察中，你学到了哪些更高层的结论？每条结论写一行，并用 [#ID] 注明依据。\n\
Reflect: what higher-level conclusions follow from these observations? One per line, citing its sources as [#ID].\n",
        );
        let mut ids = Vec::with_capacity(self.pending.len());
        for (id, o) in self.pending.drain(..) {
            prompt.push_str(&format!("[#{id}] {}\n", super::results::defuse(&o.text())));
            ids.push(id);
        }
        self.sum = 0;
        (prompt, ids)
    }
}

/// How many memories the primer retrieves for an agent.
pub const RECALL: usize = 5;
/// Importance of a reflection memory.
pub const REFLECTION_IMPORTANCE: u8 = 8;

/// The reflection in a reply to [`MemoryStream::reflect`]'s prompt: the lines that cite one of the
/// `asked` memory ids as `[#ID]` (a line holding a command is not a conclusion, it is left
/// out), and the ids cited, sorted. `None` when no line cites one.
pub fn reflection(reply: &str, asked: &[i64]) -> Option<(String, Vec<i64>)> {
    let mut lines = Vec::new();
    let mut cited: Vec<i64> = Vec::new();
    for line in reply.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.contains("?<") {
            continue;
        }
        let here: Vec<i64> = citations(line)
            .into_iter()
            .filter(|id| asked.contains(id))
            .collect();
        if here.is_empty() {
            continue;
        }
        lines.push(line.to_string());
        cited.extend(here);
    }
    if lines.is_empty() {
        return None;
    }
    cited.sort_unstable();
    cited.dedup();
    Some((lines.join("\n"), cited))
}

/// The ids written as `[#ID]` in a line.
fn citations(line: &str) -> Vec<i64> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("[#") {
        rest = &rest[at + 2..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if rest[digits.len()..].starts_with(']') {
            if let Ok(id) = digits.parse() {
                out.push(id);
            }
        }
    }
    out
}

/// The primer's memory block from retrieved memories (best first): `[#ID] text`, one a line;
/// reflections marked. `None` when nothing was found.
pub fn recall_block(hits: &[crate::memory::Hit]) -> Option<String> {
    if hits.is_empty() {
        return None;
    }
    let lines: Vec<String> = hits
        .iter()
        .map(|h| {
            let kind = if h.entry.tags.iter().any(|t| t == "reflection") {
                "反思 / reflection: "
            } else {
                ""
            };
            format!("[#{}] {kind}{}", h.entry.id, digest(&h.entry.text))
        })
        .collect();
    Some(lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (command, ok, expected importance)
    #[test]
    fn importance_heuristic() {
        let cases = [
            ("done 42", true, 9),
            ("memory 用户喜欢短答 tag: 偏好", true, 7),
            ("remember 目标", true, 7),
            ("to kimi: hi", true, 5),
            ("parallel to=[a,b] hi", false, 7),
            ("manager run f", true, 5),
            ("echo hi", true, 4),
            ("skill summarize text=x", false, 6),
            ("mcp use time now", true, 4),
            ("help", true, 2),
            ("memory search 登录", true, 2),
            ("agent status", true, 2),
            ("manager status f", true, 2),
            ("set x = 1", true, 3),
            ("to", false, 5),
        ];
        for (c, ok, want) in cases {
            assert_eq!(estimate_importance(c, ok), want, "{c}");
        }
        assert_eq!(
            Observation::new(1, "echo", true, "", Some(12)).importance,
            10
        );
        assert_eq!(Observation::new(1, "echo", true, "", Some(0)).importance, 1);
    }

    #[test]
    fn digests_are_one_line_and_bounded() {
        assert_eq!(digest("a\n  b\tc"), "a b c");
        let long = "字".repeat(250);
        let d = digest(&long);
        assert!(
            d.starts_with(&"字".repeat(200)) && d.ends_with("… (250 chars)"),
            "{d}"
        );
    }

    #[test]
    fn a_reflection_is_asked_past_the_threshold_and_cites_its_sources() {
        let mut s = MemoryStream::new(0);
        let obs = |r, c: &str| Observation::new(r, c, true, "out", None);
        // 5 + 5 + ... : to (5) ten times reaches 50 on the 10th.
        for r in 1..10 {
            assert!(!s.push(i64::from(r), obs(r, "to kimi: x")), "round {r}");
        }
        assert_eq!(s.sum(), 45);
        assert!(s.push(10, obs(10, "to kimi: x")));
        let (prompt, ids) = s.reflect();
        assert_eq!(ids, (1..=10).collect::<Vec<i64>>());
        assert!(prompt.contains("[#1] round 1 ✓ to kimi: x → out"));
        assert!(prompt.contains("[#10]"));
        assert_eq!(s.sum(), 0);
        assert!(crate::commands::scanner::scan_text(&prompt).is_empty());
    }

    #[test]
    fn a_reflection_is_the_lines_citing_asked_ids() {
        let reply = "好的。\n[#3] 工人总是先答数字 [#4]\n[#99] 不是我们问的\n[#3] 再问 ?<to w1: x>!\n结论 [#5]";
        let (text, ids) = reflection(reply, &[3, 4, 5]).expect("a reflection");
        assert_eq!(text, "[#3] 工人总是先答数字 [#4]\n结论 [#5]");
        assert_eq!(ids, vec![3, 4, 5]);
        assert_eq!(reflection("没有引用 [#x] [#7", &[7]), None);
        assert_eq!(reflection("[#8] only unasked ids", &[7]), None);
    }

    #[test]
    fn retrieval_reuses_the_team_memory_ranking() {
        // Observations are memories of the agent's scope, ranked by memory::search.
        let dir = tempfile::tempdir().expect("tempdir");
        let store = crate::store::Store::open(dir.path()).expect("store");
        let mem = crate::memory::Memory::new(store);
        let tags = vec!["observation".to_string()];
        let low = Observation::new(1, "echo 登录", true, "登录页 ok", Some(1));
        let high = Observation::new(2, "echo 登录", true, "登录页 ok", Some(10));
        for o in [&low, &high] {
            let text = o.text();
            mem.add(&o.as_memory("agent.r1", &text, &tags))
                .expect("add");
        }
        let hits = mem.search("agent.r1", "登录页", 5).expect("search");
        assert_eq!(hits.len(), 2);
        assert_eq!(hits[0].entry.importance, 10, "importance ranks first");
    }
}
