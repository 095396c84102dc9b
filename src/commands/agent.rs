//! The agent forms of the command language (docs/agents.md): their syntax tree ([`AgentCmd`]), the
//! tool names an agent is given ([`Tool`]) and the rule that an agent's tools are never wider
//! than what its creator may do ([`tools_within`]).
//!
//! The parser is in `parser/agent_forms.rs`; the interpreter checks permissions and hands the
//! command, its text expanded, to [`super::ports::Services::agent`].

use std::fmt;

use super::permissions::{Caller, Denied, Permissions};
use super::template::Template;

/// One `agent …` verb, or `done [TEXT]`. `T` is the text type: a [`Template`] as parsed, a
/// `String` once the interpreter has expanded its `$var`s for the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentCmd<T = Template> {
    /// `agent create NAME [on TARGET] [with tools=[T,…]] [max_rounds=N] [memory=SCOPE]`.
    Create(AgentSpec),
    /// `agent task NAME [with files=[…]] TEXT`: start a session on the agent's tab; answers
    /// its final answer.
    Task {
        /// The agent.
        name: String,
        /// The task, sent after the primer.
        text: T,
        /// Names in the files folder (`$var`s expanded by the interpreter), attached to the
        /// session's first message (docs/files.md).
        files: Vec<String>,
    },
    /// `agent status [NAME]`: sessions, round, last command, why stopped.
    Status(Option<String>),
    /// `agent memory [NAME]`: the agent's memory stream (no name: this tab's agent, or each
    /// agent's scope in one line).
    Memory(Option<String>),
    /// `agent list`.
    List,
    /// `agent stop [NAME]` (no name: this tab's session).
    Stop(Option<String>),
    /// `agent pause [NAME]`.
    Pause(Option<String>),
    /// `agent resume [NAME]`.
    Resume(Option<String>),
    /// `agent loop on|off`: this tab's replies loop (or stop looping).
    Loop(bool),
    /// `done [TEXT]`: the session's final answer (empty: that turn's text before the command).
    Done(T),
}

/// What `agent create` binds a name to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSpec {
    /// The agent's name (letters of any script, digits, `_ . -`).
    pub name: String,
    /// A label, a site, or `auto` (the default): which tab runs the agent's sessions.
    pub target: String,
    /// Its tools; `None` is the default `[tabs, memory]`.
    pub tools: Option<Vec<Tool>>,
    /// Most rounds per session; `None` is the hub's `--agent-max-rounds`.
    pub max_rounds: Option<u32>,
    /// The memory scope of its observations; `None` is `agent.NAME`.
    pub memory: Option<String>,
}

impl AgentSpec {
    /// The tools, with the default `[tabs, memory]` filled in.
    pub fn tools_or_default(&self) -> Vec<Tool> {
        self.tools
            .clone()
            .unwrap_or_else(|| vec![Tool::Tabs, Tool::Memory])
    }
}

impl<T> AgentCmd<T> {
    /// Whether the verb changes state (everything but status, memory and list).
    pub fn mutates(&self) -> bool {
        !matches!(
            self,
            AgentCmd::Status(_) | AgentCmd::Memory(_) | AgentCmd::List | AgentCmd::Done(_)
        )
    }

    /// The same verb with its text mapped (the interpreter expands `$var`s with it).
    pub fn try_map<U, E>(&self, mut f: impl FnMut(&T) -> Result<U, E>) -> Result<AgentCmd<U>, E> {
        Ok(match self {
            AgentCmd::Create(s) => AgentCmd::Create(s.clone()),
            AgentCmd::Task { name, text, files } => AgentCmd::Task {
                name: name.clone(),
                text: f(text)?,
                files: files.clone(),
            },
            AgentCmd::Status(n) => AgentCmd::Status(n.clone()),
            AgentCmd::Memory(n) => AgentCmd::Memory(n.clone()),
            AgentCmd::List => AgentCmd::List,
            AgentCmd::Stop(n) => AgentCmd::Stop(n.clone()),
            AgentCmd::Pause(n) => AgentCmd::Pause(n.clone()),
            AgentCmd::Resume(n) => AgentCmd::Resume(n.clone()),
            AgentCmd::Loop(on) => AgentCmd::Loop(*on),
            AgentCmd::Done(t) => AgentCmd::Done(f(t)?),
        })
    }
}

/// The tool names of the seed manual's `?<agent create 我的助手 with tools=[文件读写,命令执行,网络搜索]>!`
/// and the tools they are: files through the `filesystem` MCP server (the manual's own
/// `?<mcp use filesystem read_file …>!`), commands through the shell, web search as the site's
/// own text answers. `agent create` answers with the tools it made of them.
pub const MANUAL_TOOLS: &[(&str, &str)] = &[
    ("文件读写", "mcp:filesystem"),
    ("命令执行", "shell"),
    ("网络搜索", "web"),
];

/// One tool of an agent (docs/agents.md): what its replies may use.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tool {
    /// `tabs`: `to`, `parallel`, `send_to_all`, `from`.
    Tabs,
    /// `shell`: shell commands (still under the hub's exec policy).
    Shell,
    /// `flows`: `manager …` and `flow …`.
    Flows,
    /// `memory`: search and write the agent's memory.
    Memory,
    /// `mcp:SERVER`: the tools of one MCP server.
    Mcp(String),
    /// `skill:NAME`: one skill (what it does is checked when it runs).
    Skill(String),
    /// `web`: nothing but text.
    Web,
}

impl Tool {
    /// Parses `tabs`, `shell`, `flows`, `memory`, `mcp:SERVER`, `skill:NAME`, `web`, and the
    /// seed manual's names ([`MANUAL_TOOLS`]).
    pub fn parse(s: &str) -> Option<Tool> {
        if let Some((_, tool)) = MANUAL_TOOLS.iter().find(|(zh, _)| *zh == s) {
            return Tool::parse(tool);
        }
        let named = |n: &str| {
            (!n.is_empty()
                && n.chars()
                    .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.')))
            .then(|| n.to_string())
        };
        match s {
            "tabs" => Some(Tool::Tabs),
            "shell" => Some(Tool::Shell),
            "flows" => Some(Tool::Flows),
            "memory" => Some(Tool::Memory),
            "web" => Some(Tool::Web),
            _ => {
                if let Some(n) = s.strip_prefix("mcp:") {
                    named(n).map(Tool::Mcp)
                } else {
                    s.strip_prefix("skill:").and_then(named).map(Tool::Skill)
                }
            }
        }
    }

    /// Whether a tab with permissions `p` may itself do what this tool allows.
    pub fn allowed_by(&self, p: &Permissions) -> bool {
        match self {
            Tool::Tabs => p.dispatch,
            Tool::Shell => p.shell,
            Tool::Flows => p.flows,
            Tool::Memory => p.memory_write,
            Tool::Mcp(_) => p.mcp,
            Tool::Skill(_) | Tool::Web => true,
        }
    }

    /// The permissions an agent's tab gets from its tools (commands in its replies run).
    pub fn permissions(tools: &[Tool]) -> Permissions {
        let mut p = Permissions::none();
        p.reply_commands = true;
        for t in tools {
            match t {
                Tool::Tabs => {
                    p.dispatch = true;
                    p.any_target = true;
                }
                Tool::Shell => p.shell = true,
                Tool::Flows => p.flows = true,
                Tool::Memory => p.memory_write = true,
                Tool::Mcp(_) => p.mcp = true,
                Tool::Skill(_) | Tool::Web => {}
            }
        }
        p
    }
}

impl fmt::Display for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tool::Tabs => f.write_str("tabs"),
            Tool::Shell => f.write_str("shell"),
            Tool::Flows => f.write_str("flows"),
            Tool::Memory => f.write_str("memory"),
            Tool::Mcp(s) => write!(f, "mcp:{s}"),
            Tool::Skill(s) => write!(f, "skill:{s}"),
            Tool::Web => f.write_str("web"),
        }
    }
}

/// docs/commands.md/§17: an agent's tools are never wider than what its creator may do. The person
/// may give any tool (`shell` still obeys the exec policy when it runs).
pub fn tools_within(creator: &Caller, tools: &[Tool]) -> Result<(), Denied> {
    if creator.is_person() {
        return Ok(());
    }
    match tools.iter().find(|t| !t.allowed_by(&creator.permissions)) {
        Some(t) => Err(Denied::AgentTool(t.to_string())),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::permissions::Role;
    use crate::commands::permissions::Source;

    #[test]
    fn tool_names_round_trip() {
        for s in [
            "tabs",
            "shell",
            "flows",
            "memory",
            "web",
            "mcp:time",
            "skill:summarize",
        ] {
            let t = Tool::parse(s).unwrap_or_else(|| panic!("{s}"));
            assert_eq!(t.to_string(), s);
        }
        for bad in ["", "mcp:", "skill:", "bash", "mcp:a b", "TABS"] {
            assert_eq!(Tool::parse(bad), None, "{bad}");
        }
    }

    /// (creator role, source, tools, allowed?)
    #[test]
    fn tools_never_wider_than_the_creator() {
        let t = |s: &str| Tool::parse(s).expect("tool");
        let cases = [
            (
                Role::Master,
                Source::Reply,
                vec![t("shell"), t("mcp:x")],
                None,
            ),
            (Role::Foreman, Source::Reply, vec![t("tabs")], None),
            (
                Role::Foreman,
                Source::Reply,
                vec![t("tabs"), t("shell")],
                Some("shell"),
            ),
            (
                Role::Foreman,
                Source::Reply,
                vec![t("memory")],
                Some("memory"),
            ),
            (
                Role::Foreman,
                Source::Reply,
                vec![t("mcp:time")],
                Some("mcp:time"),
            ),
            (
                Role::Foreman,
                Source::Reply,
                vec![t("web"), t("skill:s")],
                None,
            ),
            (
                Role::Worker,
                Source::UserInput,
                vec![t("shell"), t("flows")],
                None,
            ),
        ];
        for (role, source, tools, want) in cases {
            let c = Caller::new("c", role, None, source);
            let got = tools_within(&c, &tools);
            match want {
                None => assert_eq!(got, Ok(()), "{role} {tools:?}"),
                Some(tool) => assert_eq!(got, Err(Denied::AgentTool(tool.into()))),
            }
        }
    }

    #[test]
    fn an_agents_permissions_follow_its_tools() {
        let p = Tool::permissions(&[Tool::Web]);
        assert!(p.reply_commands && !p.dispatch && !p.shell && !p.memory_write && !p.mcp);
        let p = Tool::permissions(&[Tool::Tabs, Tool::Memory]);
        assert!(p.dispatch && p.any_target && p.memory_write && !p.shell && !p.flows);
    }
}
