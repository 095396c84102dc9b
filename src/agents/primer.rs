//! The primer (docs/agents.md): what a looping tab's model is told when a session starts (and again
//! every `primer_every` rounds, or after two malformed commands in a row). Built only from
//! facts passed in: the role card's `system_prompt`, then a guide of what this tab may do now.
//!
//! Kept under [`MAX_CHARS`] characters: a `system_prompt` longer than [`PROMPT_CHARS`] is cut
//! first (with a note); then, if the whole is still too long, guide sections are dropped in
//! this order — the memory block, the MCP tools, the skills, the tabs online — and the last
//! section left is cut to the room there is. The command forms, the result format and
//! how to finish are never dropped.
//!
//! Command forms are shown defused (`?‹ … ›!`, see [`super::results::defuse`]): the primer
//! itself can never be scanned as a command.

use super::results::{self, defuse};
use crate::commands::agent::Tool;
use crate::commands::permissions::Permissions;

/// The most characters of a primer.
pub const MAX_CHARS: usize = 3000;
/// The most characters of the role card's `system_prompt` inside it.
pub const PROMPT_CHARS: usize = 1500;

/// One tab online, as the primer lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TabFact {
    /// Its label (what `to` accepts).
    pub label: String,
    /// Its site.
    pub site: String,
    /// Its health in a word (`ready`, `cooldown`, `parked`).
    pub health: String,
}

/// One skill: its name and its parameters (`name: type`, required first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillFact {
    /// The skill's name.
    pub name: String,
    /// Its parameters.
    pub params: Vec<String>,
}

/// What the primer is built from (the wiring gathers it).
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// The role card's `system_prompt`.
    pub system_prompt: Option<String>,
    /// What this tab may do (its role card's permissions).
    pub permissions: Option<Permissions>,
    /// The agent's tools (`None`: not an agent — the permissions alone decide).
    pub tools: Option<Vec<Tool>>,
    /// Tabs online.
    pub tabs: Vec<TabFact>,
    /// Skills loaded.
    pub skills: Vec<SkillFact>,
    /// MCP tools as `server/tool`.
    pub mcp_tools: Vec<String>,
    /// The memory scope of this agent.
    pub memory_scope: Option<String>,
    /// Retrieved memories (already ranked), one per line.
    pub memory_block: Option<String>,
    /// The round limit.
    pub max_rounds: u32,
    /// `--agent-result-chars`.
    pub result_chars: usize,
}

/// The command forms this tab may use: by its permissions, narrowed by its tools.
pub fn allowed_forms(p: &Permissions, tools: Option<&[Tool]>) -> Vec<&'static str> {
    let has = |t: &Tool| tools.is_none_or(|ts| ts.contains(t));
    let has_kind = |f: fn(&Tool) -> bool| tools.is_none_or(|ts| ts.iter().any(f));
    let mut forms = Vec::new();
    if p.dispatch && has(&Tool::Tabs) {
        forms.push("?<to TAB: TEXT>!");
        forms.push("?<parallel to=[A,B] TEXT>!");
    }
    if p.memory_write && has(&Tool::Memory) {
        forms.push("?<memory TEXT tag: T1,T2>!");
    }
    if has(&Tool::Memory) || tools.is_none() {
        forms.push("?<memory search WORDS>!");
    }
    if p.shell && has(&Tool::Shell) {
        forms.push("?<PROGRAM ARGS>!");
    }
    if p.flows && has(&Tool::Flows) {
        forms.push("?<manager run FLOW key=value>!");
    }
    if p.mcp && has_kind(|t| matches!(t, Tool::Mcp(_))) {
        forms.push("?<mcp use SERVER TOOL key=value>!");
    }
    if has_kind(|t| matches!(t, Tool::Skill(_))) {
        forms.push("?<skill NAME key=value>!");
    }
    forms.push("?<help COMMAND>!");
    forms
}

/// The primer, at most [`MAX_CHARS`] characters.
pub fn build(f: &Facts) -> String {
    let mut head = String::new();
    if let Some(sp) = f
        .system_prompt
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let (shown, more) = results::cut(sp, PROMPT_CHARS);
        head.push_str(&defuse(shown));
        if more > 0 {
            head.push_str(&format!(
                "\n…[系统提示已截短 {more} 字 / system prompt cut: {more} more chars]"
            ));
        }
        head.push_str("\n\n");
    }
    let p = f.permissions.unwrap_or_else(Permissions::none);
    let forms = allowed_forms(&p, f.tools.as_deref());
    let essentials = format!(
        "【AIcard】你可以写命令，AIcard 执行后把结果发回给你 / You may write commands; AIcard runs them and sends you the results.\n\
命令 / commands (写 < > 代替 ‹ › / write < > for ‹ ›): {}\n\
结果格式 / results: ⟦aicard result k/N⟧ COMMAND → ✓|✗, then its output (long outputs cut, whole text in $Rk). 不要自己写结果 / never write results yourself.\n\
最多 {} 轮 / at most {} rounds. 完成后写 / when done write {}",
        defuse(&forms.join("  ")),
        f.max_rounds,
        f.max_rounds,
        defuse("?<done ANSWER>!"),
    );
    // Optional sections, in the order they are dropped (first dropped first).
    let mut optional: Vec<String> = Vec::new();
    if let Some(m) = f.memory_block.as_deref().filter(|m| !m.trim().is_empty()) {
        optional.push(format!(
            "记忆 / memory ({}):\n{}",
            f.memory_scope.as_deref().unwrap_or("global"),
            defuse(m.trim())
        ));
    } else if let Some(scope) = &f.memory_scope {
        optional.push(format!("记忆范围 / memory scope: {scope}"));
    }
    if !f.mcp_tools.is_empty() && forms.contains(&"?<mcp use SERVER TOOL key=value>!") {
        optional.push(format!("MCP: {}", f.mcp_tools.join(", ")));
    }
    if !f.skills.is_empty() {
        let list: Vec<String> = f
            .skills
            .iter()
            .filter(|s| {
                f.tools
                    .as_ref()
                    .is_none_or(|ts| ts.contains(&Tool::Skill(s.name.clone())))
            })
            .map(|s| format!("{}({})", s.name, s.params.join(", ")))
            .collect();
        if !list.is_empty() {
            optional.push(format!("技能 / skills: {}", list.join("; ")));
        }
    }
    if !f.tabs.is_empty() && forms.contains(&"?<to TAB: TEXT>!") {
        let list: Vec<String> = f
            .tabs
            .iter()
            .map(|t| format!("{} ({}, {})", t.label, t.site, t.health))
            .collect();
        optional.push(format!("在线标签页 / tabs online: {}", list.join(", ")));
    }
    assemble(&head, &essentials, optional)
}

/// Head + the optional sections that fit (the last ones kept first) + the essentials.
fn assemble(head: &str, essentials: &str, mut optional: Vec<String>) -> String {
    let len = |s: &str| s.chars().count();
    let fixed = len(head) + len(essentials);
    loop {
        let extra: usize = optional.iter().map(|s| len(s) + 1).sum();
        if fixed + extra <= MAX_CHARS || optional.is_empty() {
            break;
        }
        // With one section left: cut it to the room there is (its newline included).
        if optional.len() == 1 {
            let room = MAX_CHARS.saturating_sub(fixed + 1);
            if room > 40 {
                let (cut, _) = results::cut(&optional[0], room - 1);
                optional[0] = format!("{cut}…");
                break;
            }
        }
        optional.remove(0);
    }
    let mut out = String::from(head);
    for s in optional.iter().rev() {
        out.push_str(s);
        out.push('\n');
    }
    out.push_str(essentials);
    if len(&out) > MAX_CHARS {
        let (cut, _) = results::cut(&out, MAX_CHARS);
        return cut.to_string();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::ast::Role;
    use crate::commands::scanner::scan_text;

    fn facts() -> Facts {
        Facts {
            system_prompt: Some("你是研究员 / You are a researcher.".into()),
            permissions: Some(Permissions::for_role(Role::Master)),
            tools: Some(vec![
                Tool::Tabs,
                Tool::Memory,
                Tool::Skill("summarize".into()),
            ]),
            tabs: vec![TabFact {
                label: "kimi-1".into(),
                site: "kimi".into(),
                health: "ready".into(),
            }],
            skills: vec![
                SkillFact {
                    name: "summarize".into(),
                    params: vec!["text: string".into()],
                },
                SkillFact {
                    name: "deploy".into(),
                    params: vec![],
                },
            ],
            mcp_tools: vec!["time/get_current_time".into()],
            memory_scope: Some("agent.r1".into()),
            memory_block: None,
            max_rounds: 25,
            result_chars: 4000,
        }
    }

    #[test]
    fn the_primer_says_what_this_tab_may_do() {
        let p = build(&facts());
        assert!(p.starts_with("你是研究员 / You are a researcher."), "{p}");
        for want in [
            "?‹to TAB: TEXT›!",
            "?‹memory TEXT tag: T1,T2›!",
            "?‹skill NAME key=value›!",
            "?‹done ANSWER›!",
            "kimi-1 (kimi, ready)",
            "summarize(text: string)",
            "⟦aicard result k/N⟧",
            "25",
            "agent.r1",
        ] {
            assert!(p.contains(want), "missing {want}:\n{p}");
        }
        // Tools narrow the master's permissions: no shell, no flows, no MCP, no other skill.
        for not in [
            "PROGRAM ARGS",
            "manager run",
            "mcp use",
            "time/get_current_time",
            "deploy",
        ] {
            assert!(!p.contains(not), "{not}:\n{p}");
        }
        assert!(scan_text(&p).is_empty(), "the primer holds no live command");
    }

    /// (permissions, tools, forms expected, forms not expected)
    #[test]
    fn forms_follow_permissions_and_tools() {
        let master = Permissions::for_role(Role::Master);
        let foreman = Permissions::for_role(Role::Foreman);
        let web = [Tool::Web];
        let shell = [Tool::Shell, Tool::Mcp("x".into())];
        type Case<'a> = (
            Permissions,
            Option<&'a [Tool]>,
            &'a [&'a str],
            &'a [&'a str],
        );
        let cases: [Case<'_>; 4] = [
            (
                master,
                None,
                &[
                    "?<to TAB: TEXT>!",
                    "?<PROGRAM ARGS>!",
                    "?<mcp use SERVER TOOL key=value>!",
                ],
                &[],
            ),
            (
                master,
                Some(&web),
                &["?<help COMMAND>!"],
                &["?<to TAB: TEXT>!", "?<memory search WORDS>!"],
            ),
            (
                master,
                Some(&shell),
                &["?<PROGRAM ARGS>!", "?<mcp use SERVER TOOL key=value>!"],
                &["?<to TAB: TEXT>!"],
            ),
            (
                foreman,
                Some(&shell),
                &[],
                &["?<PROGRAM ARGS>!", "?<mcp use SERVER TOOL key=value>!"],
            ),
        ];
        for (p, tools, yes, no) in cases {
            let forms = allowed_forms(&p, tools);
            for y in yes {
                assert!(forms.contains(y), "{tools:?} lacks {y}");
            }
            for n in no {
                assert!(!forms.contains(n), "{tools:?} has {n}");
            }
        }
    }

    #[test]
    fn a_long_system_prompt_is_cut_first_and_the_total_stays_under_3000() {
        let mut f = facts();
        f.system_prompt = Some("很长的说明。".repeat(1000));
        f.tabs = (0..200)
            .map(|i| TabFact {
                label: format!("tab-{i}"),
                site: "sim".into(),
                health: "ready".into(),
            })
            .collect();
        f.memory_block = Some("记住这个。".repeat(300));
        let p = build(&f);
        let n = p.chars().count();
        assert!(n <= MAX_CHARS, "{n}");
        assert!(p.contains("system prompt cut: 4500 more chars"), "{p}");
        assert!(p.contains("?‹done ANSWER›!"), "essentials kept");
        // The memory block goes first; the tab list is cut to what is left.
        assert!(!p.contains("记住这个"), "memory dropped first");
        assert!(
            p.contains("tab-0 (sim, ready)"),
            "tabs kept as far as they fit"
        );
    }

    #[test]
    fn short_facts_make_a_short_primer() {
        let f = Facts {
            max_rounds: 25,
            ..Facts::default()
        };
        let p = build(&f);
        assert!(p.chars().count() < 700, "{}", p.chars().count());
        assert!(p.contains("?‹help COMMAND›!") && p.contains("?‹done ANSWER›!"));
    }
}
