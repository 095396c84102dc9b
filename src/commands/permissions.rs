//! Who may run what (docs/commands.md): the caller model and the ONE permission check.
//!
//! Every command the interpreter runs passes through [`check`] with the action it is about to
//! take; there is no other place that decides. What a person typed (`user_input`) is trusted
//! like the person; what a model wrote in a reply is limited by its tab's role and role card.

use thiserror::Error;

/// A tab's role (docs/commands.md): the wire's own type.
pub use crate::protocol::Role;

/// Where the command text came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Typed by the person in the tab (`user_input`): the person's own authority.
    UserInput,
    /// Written by the model in its reply (`chunk` / `turn_end`): limited by role and card.
    Reply,
}

/// What a tab's replies may do; from its role card, defaulting by role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permissions {
    /// Commands in this tab's replies run at all (false: they are data).
    pub reply_commands: bool,
    /// May run shell commands (still subject to the exec policy).
    pub shell: bool,
    /// May send prompts to other tabs (`to`, `parallel`, `send_to_all`, `from`).
    pub dispatch: bool,
    /// May dispatch to any tab; otherwise only to tabs of its own group.
    pub any_target: bool,
    /// May create, run, pause, resume, stop, delete or export flows.
    pub flows: bool,
    /// May change roles.
    pub set_role: bool,
    /// May write the team's memory (`remember`, `memory` add/rewrite/del/pin/unpin/summarize).
    pub memory_write: bool,
    /// May list and call the tools of the configured MCP servers (`mcp …`).
    pub mcp: bool,
}

impl Permissions {
    /// The defaults for a role without a role card.
    pub fn for_role(role: Role) -> Self {
        match role {
            Role::Master => Self {
                reply_commands: true,
                shell: true,
                dispatch: true,
                any_target: true,
                flows: true,
                set_role: true,
                memory_write: true,
                mcp: true,
            },
            Role::Foreman => Self {
                reply_commands: true,
                dispatch: true,
                ..Self::none()
            },
            Role::Worker => Self::none(),
        }
    }

    /// Nothing allowed.
    pub fn none() -> Self {
        Self {
            reply_commands: false,
            shell: false,
            dispatch: false,
            any_target: false,
            flows: false,
            set_role: false,
            memory_write: false,
            mcp: false,
        }
    }
}

/// The tab (and text source) a command came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The hub's client id of the tab; also the key of its variable scope.
    pub client_id: String,
    /// The tab's role.
    pub role: Role,
    /// The tab's group (a foreman manages it; a worker belongs to it).
    pub group: Option<String>,
    /// Typed by the person or written by the model.
    pub source: Source,
    /// What its replies may do.
    pub permissions: Permissions,
    /// Where its memory commands go when they name no scope: an agent's own scope for its
    /// session's replies (docs/agents.md); none: `global`.
    pub memory_scope: Option<String>,
}

impl Caller {
    /// A caller with the role's default permissions.
    pub fn new(
        client_id: impl Into<String>,
        role: Role,
        group: Option<String>,
        source: Source,
    ) -> Self {
        Self {
            client_id: client_id.into(),
            role,
            group,
            source,
            permissions: Permissions::for_role(role),
            memory_scope: None,
        }
    }

    /// The memory scope a command that names none uses.
    pub fn default_scope(&self) -> &str {
        self.memory_scope.as_deref().unwrap_or("global")
    }

    /// Whether the person's own authority applies.
    pub fn is_person(&self) -> bool {
        self.source == Source::UserInput
    }
}

/// What the interpreter is about to do, for [`check`].
#[derive(Debug, Clone, Copy)]
pub enum Intent<'a> {
    /// Run anything at all (the entry gate; also covers `set`, `help`, `if`, `for`, chains).
    Run,
    /// Run a shell command.
    Shell,
    /// Send a prompt to, or read the answer of, this tab.
    Dispatch(&'a str),
    /// A flow verb; `mutates` = changes state (reading status is always allowed).
    Flow {
        /// Whether it changes state.
        mutates: bool,
    },
    /// Change the caller's role.
    SetRole,
    /// Read (`write: false`) or write the memory of `scope`.
    Memory {
        /// Whether it writes.
        write: bool,
        /// `global` or a group.
        scope: &'a str,
    },
    /// List or call MCP tools.
    Mcp,
    /// Change the MCP client config (it starts programs): only what the person typed.
    McpConfig,
    /// `publish` (`mutates: true`, it can start rules), `subscribe`, `unsubscribe`; listing
    /// the rules (`mutates: false`) is always allowed.
    Events {
        /// Whether it publishes or changes the standing rules.
        mutates: bool,
    },
    /// An `agent …` verb; `mutates` = changes state (create, task, stop, pause, resume, loop).
    Agent {
        /// Whether it changes state.
        mutates: bool,
    },
}

/// Why [`check`] said no.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Denied {
    /// Replies of this tab are data.
    #[error("未执行 / not executed: commands in a {0}'s reply are data, not orders (its role card does not allow them)")]
    ReplyCommands(Role),
    /// No shell for this tab's replies.
    #[error("无权执行 shell / not allowed: a {0}'s reply may not run shell commands")]
    Shell(Role),
    /// No dispatch for this tab's replies.
    #[error("无权派发 / not allowed: a {0}'s reply may not send prompts to other tabs")]
    Dispatch(Role),
    /// A foreman reaching outside its group.
    #[error("不在本组 / not allowed: `{target}` is not in group `{group}`")]
    OutsideGroup {
        /// The tab asked for.
        target: String,
        /// The caller's group.
        group: String,
    },
    /// A group-limited dispatcher without a group.
    #[error("没有组 / not allowed: this tab has no group; the person can set one with ?<role foreman group=NAME>!")]
    NoGroup,
    /// Flow control by someone other than the master or the person.
    #[error("无权控制流程 / not allowed: only the master or the person may create, run, pause, resume, stop, delete or export flows")]
    Flows,
    /// Role change by someone other than the master or the person.
    #[error("无权改变角色 / not allowed: only the master or the person may change roles")]
    SetRole,
    /// Memory writes by a tab whose card does not allow them.
    #[error("无权写入记忆 / not allowed: a {0}'s reply may not write the team's memory (its role card can allow it with permissions: {{memory_write: true}})")]
    MemoryWrite(Role),
    /// A group-limited tab reaching another group's memory.
    #[error("不在本组 / not allowed: the memory of scope `{scope}` belongs to another group (this tab may use `global` and its own group)")]
    MemoryScope {
        /// The scope asked for.
        scope: String,
    },
    /// MCP by someone other than the master or the person (no role card allows it).
    #[error("无权使用 MCP / not allowed: only the master or the person may use MCP tools, unless a role card allows `mcp`")]
    Mcp,
    /// An MCP config change not typed by the person.
    #[error("无权修改 MCP 配置 / not allowed: only the person may add or remove MCP servers (`mcp config` starts programs), never a tab's reply")]
    McpConfig,
    /// Events published or rules made by a tab whose card does not allow flows.
    #[error("无权发布或订阅事件 / not allowed: only the master or the person may publish events or make rules, unless a role card allows `flows`")]
    Events,
    /// Agent control by someone other than the master or the person.
    #[error("无权控制代理 / not allowed: only the master or the person may create, task, stop, pause or resume agents")]
    Agents,
    /// An agent tool wider than what its creator may do.
    #[error("工具超出权限 / not allowed: an agent's tools are never wider than its creator's, and this tab may not use `{0}`")]
    AgentTool(String),
}

/// THE permission check. `in_group(tab, group)` tells whether a tab is in a group (the host
/// knows). The exec policy (off/allowlist/on) applies after this, in [`crate::exec`].
pub fn check(
    caller: &Caller,
    action: Intent<'_>,
    in_group: impl Fn(&str, &str) -> bool,
) -> Result<(), Denied> {
    if caller.is_person() {
        return Ok(());
    }
    let p = &caller.permissions;
    if !p.reply_commands {
        return Err(Denied::ReplyCommands(caller.role));
    }
    match action {
        Intent::Run => Ok(()),
        Intent::Shell if p.shell => Ok(()),
        Intent::Shell => Err(Denied::Shell(caller.role)),
        Intent::Dispatch(_) if !p.dispatch => Err(Denied::Dispatch(caller.role)),
        Intent::Dispatch(_) if p.any_target => Ok(()),
        Intent::Dispatch(target) => match &caller.group {
            None => Err(Denied::NoGroup),
            Some(g) if in_group(target, g) => Ok(()),
            Some(g) => Err(Denied::OutsideGroup {
                target: target.to_string(),
                group: g.clone(),
            }),
        },
        Intent::Flow { mutates: false } => Ok(()),
        Intent::Flow { mutates: true } if p.flows => Ok(()),
        Intent::Flow { .. } => Err(Denied::Flows),
        Intent::SetRole if p.set_role => Ok(()),
        Intent::SetRole => Err(Denied::SetRole),
        Intent::Memory { write: true, .. } if !p.memory_write => {
            Err(Denied::MemoryWrite(caller.role))
        }
        Intent::Memory { scope, .. } => {
            if p.any_target
                || scope == "global"
                || caller.group.as_deref() == Some(scope)
                || caller.memory_scope.as_deref() == Some(scope)
            {
                Ok(())
            } else {
                Err(Denied::MemoryScope {
                    scope: scope.to_string(),
                })
            }
        }
        Intent::Mcp if p.mcp => Ok(()),
        Intent::Mcp => Err(Denied::Mcp),
        Intent::McpConfig => Err(Denied::McpConfig),
        Intent::Events { mutates: false } => Ok(()),
        Intent::Events { .. } if p.flows => Ok(()),
        Intent::Events { .. } => Err(Denied::Events),
        Intent::Agent { mutates: false } => Ok(()),
        Intent::Agent { .. } if p.flows => Ok(()),
        Intent::Agent { .. } => Err(Denied::Agents),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(role: Role, group: Option<&str>) -> Caller {
        Caller::new("c1", role, group.map(str::to_string), Source::Reply)
    }

    fn in_g1(tab: &str, group: &str) -> bool {
        group == "g1" && tab.starts_with("g1-")
    }

    /// (caller, action, expected)
    #[test]
    fn the_table() {
        let master = reply(Role::Master, None);
        let foreman = reply(Role::Foreman, Some("g1"));
        let lone_foreman = reply(Role::Foreman, None);
        let worker = reply(Role::Worker, Some("g1"));
        let person_in_worker_tab = Caller::new("c2", Role::Worker, None, Source::UserInput);
        let cases: Vec<(&Caller, Intent<'_>, Result<(), Denied>)> = vec![
            (&master, Intent::Shell, Ok(())),
            (&master, Intent::Dispatch("anyone"), Ok(())),
            (&master, Intent::Flow { mutates: true }, Ok(())),
            (&master, Intent::SetRole, Ok(())),
            (&master, Intent::Events { mutates: true }, Ok(())),
            (&foreman, Intent::Events { mutates: false }, Ok(())),
            (
                &foreman,
                Intent::Events { mutates: true },
                Err(Denied::Events),
            ),
            (&foreman, Intent::Run, Ok(())),
            (&foreman, Intent::Dispatch("g1-deepseek"), Ok(())),
            (
                &foreman,
                Intent::Dispatch("kimi"),
                Err(Denied::OutsideGroup {
                    target: "kimi".into(),
                    group: "g1".into(),
                }),
            ),
            (
                &lone_foreman,
                Intent::Dispatch("g1-x"),
                Err(Denied::NoGroup),
            ),
            (&foreman, Intent::Shell, Err(Denied::Shell(Role::Foreman))),
            (&foreman, Intent::Flow { mutates: false }, Ok(())),
            (&foreman, Intent::Flow { mutates: true }, Err(Denied::Flows)),
            (&foreman, Intent::SetRole, Err(Denied::SetRole)),
            (
                &worker,
                Intent::Run,
                Err(Denied::ReplyCommands(Role::Worker)),
            ),
            (
                &worker,
                Intent::Dispatch("g1-x"),
                Err(Denied::ReplyCommands(Role::Worker)),
            ),
            (&person_in_worker_tab, Intent::Shell, Ok(())),
            (
                &person_in_worker_tab,
                Intent::Flow { mutates: true },
                Ok(()),
            ),
            (&person_in_worker_tab, Intent::Dispatch("kimi"), Ok(())),
        ];
        for (caller, action, want) in cases {
            assert_eq!(check(caller, action, in_g1), want, "{caller:?} {action:?}");
        }
    }

    #[test]
    fn memory_writes_and_scopes() {
        let master = reply(Role::Master, None);
        let mut worker = reply(Role::Worker, Some("g1"));
        worker.permissions.reply_commands = true;
        let read = |scope| Intent::Memory {
            write: false,
            scope,
        };
        let write = |scope| Intent::Memory { write: true, scope };
        assert_eq!(check(&master, write("g2"), in_g1), Ok(()));
        assert_eq!(check(&worker, read("global"), in_g1), Ok(()));
        assert_eq!(check(&worker, read("g1"), in_g1), Ok(()));
        assert!(matches!(
            check(&worker, read("g2"), in_g1),
            Err(Denied::MemoryScope { .. })
        ));
        assert_eq!(
            check(&worker, write("g1"), in_g1),
            Err(Denied::MemoryWrite(Role::Worker))
        );
        worker.permissions.memory_write = true;
        assert_eq!(check(&worker, write("g1"), in_g1), Ok(()));
        let person = Caller::new("p", Role::Worker, None, Source::UserInput);
        assert_eq!(check(&person, write("g9"), in_g1), Ok(()));
    }

    #[test]
    fn a_role_card_can_open_a_worker() {
        let mut w = reply(Role::Worker, Some("g1"));
        w.permissions.reply_commands = true;
        assert_eq!(check(&w, Intent::Run, in_g1), Ok(()));
        assert_eq!(
            check(&w, Intent::Shell, in_g1),
            Err(Denied::Shell(Role::Worker))
        );
        w.permissions.dispatch = true;
        assert_eq!(check(&w, Intent::Dispatch("g1-a"), in_g1), Ok(()));
    }
}
