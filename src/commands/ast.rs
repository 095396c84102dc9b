//! The typed syntax tree of one command (the text between `?<` and `>!`).
//!
//! Closed enums: the interpreter matches exhaustively, so a new form cannot be added without
//! deciding how it runs and who may run it.

use std::fmt;
use std::path::PathBuf;

pub use super::permissions::Role;
pub use super::template::{Part, Template};

/// `jobs …`: the background jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobsCmd {
    /// `jobs`: each job, its state and output.
    List,
    /// `jobs kill ID`.
    Kill(String),
}

/// One parsed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Anything that does not start with a keyword: a shell command line, handed to
    /// [`crate::exec`] verbatim (variables are expanded there, safely for the exec mode).
    Shell {
        /// The command line as written.
        text: String,
    },
    /// `CMD &`: a shell command run in the background under the exec policy; the answer is
    /// the job's id, at once (docs/commands.md, "Background jobs").
    Background {
        /// The command line, without its `&`.
        text: String,
    },
    /// `jobs` / `jobs kill ID`.
    Jobs(JobsCmd),
    /// `set NAME = VALUE` / `set global NAME = VALUE`.
    Set {
        /// Variable name (`[A-Za-z_][A-Za-z0-9_]*`).
        name: String,
        /// Write to the global scope instead of the caller's.
        global: bool,
        /// Where the value comes from.
        value: SetValue,
    },
    /// `parallel to=[a,b] TEXT` or `parallel to=[a: p1, b: p2]`: prompts to several tabs at once.
    Parallel {
        /// One prompt per target, in the written order.
        jobs: Vec<Job>,
    },
    /// `to TARGET: TEXT`: one prompt to one tab; the answer is the result.
    To(Job),
    /// `from TARGET: [CMD]`: take the tab's latest answer as `$RESULT` (and run CMD with it).
    From {
        /// The tab whose answer is taken.
        target: Target,
        /// The command to run with `$RESULT` bound; `None` returns the answer itself.
        then: Option<Box<Command>>,
    },
    /// `send_to_all [with files=[…]] TEXT`: the prompt to every worker the caller may reach,
    /// each with the same files (docs/files.md).
    SendToAll {
        /// The prompt.
        prompt: Template,
        /// Names in the files folder, attached for every worker (`$var`s expanded at run time).
        files: Vec<String>,
    },
    /// `a -> b -> c`: each step runs with the previous step's output as `$RESULT`.
    Chain(Vec<Command>),
    /// `CMD -> finally CLEANUP` (seed manual): `cleanup` runs after `body` whether it succeeded
    /// or failed; the result is `body`'s (its error, if it failed).
    Finally {
        /// The guarded command (a chain, an `if`, …).
        body: Box<Command>,
        /// Runs last, always.
        cleanup: Box<Command>,
    },
    /// `if COND then CMD [else CMD]`.
    If {
        /// The condition.
        cond: Cond,
        /// Runs when the condition holds.
        then: Box<Command>,
        /// Runs otherwise (if present).
        otherwise: Option<Box<Command>>,
    },
    /// `for VAR in ITEMS do CMD`.
    For {
        /// Loop variable name.
        var: String,
        /// What it iterates over.
        items: ForItems,
        /// The body, run once per item.
        body: Box<Command>,
    },
    /// `manager …`: define and drive flows (answered by the flow engine through the host).
    Manager(ManagerCmd),
    /// `flow start|pause|resume|stop|status`: seed aliases acting on the caller's current flow.
    Flow(FlowAction),
    /// `role test [CARD]`: run a role card's `test_command` (this tab's card without a name).
    RoleTest(Option<String>),
    /// `role master|foreman|worker [group=G]`: set the calling tab's role.
    Role {
        /// The new role.
        role: Role,
        /// The group (for a foreman: the workers it manages; for a worker: its foreman's).
        group: Option<String>,
    },
    /// `remember TEXT [scope=S]`: set (or, empty, clear) the scope's short-term note.
    Remember {
        /// The scope (`global` or a group); `None` is `global`.
        scope: Option<String>,
        /// The note; empty clears it.
        text: Template,
    },
    /// `memory …`: the team's long-term memory (see [`MemoryCmd`]).
    Memory(MemoryCmd),
    /// `skill list | help [NAME] | NAME key=value…`.
    Skill(SkillCmd),
    /// `mcp list` / `mcp use SERVER TOOL …`: the MCP servers of `mcp.json` (through the host).
    Mcp(McpCmd),
    /// `publish TOPIC [TEXT]`, `subscribe …`, `unsubscribe ID`: the event bus (docs/cluster.md).
    Event(EventCmd<Option<Template>>),
    /// `agent …` and `done [TEXT]`: the agent loop (docs/agents.md; see [`super::agent`]).
    Agent(super::agent::AgentCmd),
    /// `on NODE: CMD` (docs/cluster.md remote execution): a shell command or a skill, run on
    /// another node of the cluster under that node's exec policy.
    On {
        /// The node's name (`--node`).
        node: String,
        /// The command as written, sent to the node (its `$var`s expanded there, from the
        /// caller's variables sent along).
        text: String,
        /// The same, parsed here (a shell command or a skill).
        body: Box<Command>,
    },
    /// `help [TOPIC]`.
    Help {
        /// The command asked about; `None` lists every command.
        topic: Option<String>,
    },
}

impl Command {
    /// Whether this is an `if` whose condition reads `$var` (what a chain asks of the step
    /// after a failed one: `-> if $exit_code != 0 then …`).
    pub fn tests_var(&self, var: &str) -> bool {
        fn operand(o: &Operand, var: &str) -> bool {
            match o {
                Operand::Text(t) => t
                    .parts
                    .iter()
                    .any(|p| matches!(p, Part::Var(v) if v == var)),
                Operand::Capture(_) => false,
            }
        }
        fn cond(c: &Cond, var: &str) -> bool {
            match c {
                Cond::Truthy(o) => operand(o, var),
                Cond::Not(c) => cond(c, var),
                Cond::Compare { left, right, .. } => operand(left, var) || operand(right, var),
            }
        }
        match self {
            Command::If { cond: c, .. } => cond(c, var),
            Command::Finally { body, .. } => body.tests_var(var),
            _ => false,
        }
    }
}

/// The right-hand side of `set`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetValue {
    /// `$(COMMAND)`: the command's output (any command form, not only a shell command).
    Capture(Box<Command>),
    /// Literal text with `$var` references expanded when `set` runs.
    Literal(Template),
}

/// One prompt for one tab.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// Which tab.
    pub target: Target,
    /// What to send it.
    pub prompt: Template,
    /// `with files=[…]`: names in the files folder, attached before the prompt is sent
    /// (docs/files.md).
    pub files: Vec<String>,
}

/// A tab reference: a site name (`deepseek`), a label, a client id, or a selector.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// A site name, label or client id; the host resolves it.
    Name(String),
    /// `role:NAME` — every tab with that role (the host resolves it).
    Role(Role),
    /// `group:NAME` — every tab in that group.
    Group(String),
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Name(n) => f.write_str(n),
            Target::Role(r) => write!(f, "role:{r}"),
            Target::Group(g) => write!(f, "group:{g}"),
        }
    }
}

/// An `if` condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cond {
    /// A single operand: true unless empty (after trimming), `0` or `false`.
    Truthy(Operand),
    /// `not COND`.
    Not(Box<Cond>),
    /// `LEFT OP RIGHT`.
    Compare {
        /// Left operand.
        left: Operand,
        /// The comparison.
        op: CmpOp,
        /// Right operand.
        right: Operand,
    },
}

/// A value in a condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operand {
    /// Text with variables.
    Text(Template),
    /// `$(COMMAND)`: the command's output. Alone in a condition, a shell command that exits
    /// non-zero is false (as in a shell's `if`); any other failure makes the condition an error.
    Capture(Box<Command>),
}

/// Comparison operators; numbers compare numerically when both sides parse as numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    /// `==` or `=`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `contains` (substring)
    Contains,
}

/// What a `for` loop iterates over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForItems {
    /// `{FROM..TO}` or `{FROM..TO..STEP}`, inclusive, counting down when FROM > TO.
    Range {
        /// First value.
        from: i64,
        /// Last value (inclusive).
        to: i64,
        /// Positive step.
        step: i64,
    },
    /// `a b c` or `[a, b, c]`: one iteration per item (a `$var` item is one item).
    List(Vec<Template>),
}

/// `manager …` verbs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ManagerCmd {
    /// `manager create NAME from "a -> b"` / `from file:flows/x.yaml`.
    Create {
        /// Flow name.
        name: String,
        /// Its definition.
        source: FlowSource,
        /// `auto_retry=N` (seed manual): each step is tried again up to N times.
        auto_retry: Option<u32>,
    },
    /// `manager run NAME [--from-node ID] [key=value…]`.
    Run {
        /// Flow name.
        name: String,
        /// Resume from this node (earlier nodes' stored outputs are reused).
        from_node: Option<String>,
        /// Inputs; values have `$var` expanded by the interpreter before the host sees them.
        params: Vec<(String, String)>,
    },
    /// `manager pause NAME`.
    Pause(String),
    /// `manager resume NAME`.
    Resume(String),
    /// `manager stop NAME`.
    Stop(String),
    /// `manager status NAME`.
    Status(String),
    /// `manager show NAME`.
    Show(String),
    /// `manager delete NAME`.
    Delete(String),
    /// `manager list`.
    List,
    /// `manager export NAME to file:PATH`.
    Export {
        /// Flow name.
        name: String,
        /// Destination (relative to the hub's data/flows directory; the host decides).
        path: PathBuf,
    },
    /// `manager plan GOAL…`: the planner tab writes a flow for the goal (a draft).
    Plan(String),
    /// `manager approve ID [key=value…]`: runs a plan draft.
    Approve {
        /// Draft id (`plan-XXXXXXXX`).
        id: String,
        /// Inputs; values have `$var` expanded like `manager run`'s.
        params: Vec<(String, String)>,
    },
    /// `manager modify ID: FEEDBACK`: re-plans a draft with the feedback.
    Modify {
        /// Draft id.
        id: String,
        /// What to change, in plain words.
        feedback: String,
    },
    /// `manager reject ID`.
    Reject(String),
    /// `manager save ID as NAME`: writes the draft to `flows/NAME.yaml`.
    Save {
        /// Draft id.
        id: String,
        /// Flow name (and file name).
        name: String,
    },
    /// `manager why RUN NODE`: the score table of the decision engine's pick.
    Why {
        /// Run id.
        run: String,
        /// Node id.
        node: String,
    },
    /// `tabs`: every tab's health.
    Tabs,
    /// `tabs budget [SITE [N/hour|off]]`: a site's quota (docs/commands.md); bare, the list.
    Budget {
        site: Option<String>,
        /// `20/hour`, `off`; `None` with a site clears it too.
        quota: Option<String>,
    },
}

impl ManagerCmd {
    /// Whether the verb changes state (create, run, pause, …) rather than only reading it.
    pub fn mutates(&self) -> bool {
        !matches!(
            self,
            ManagerCmd::Status(_)
                | ManagerCmd::Show(_)
                | ManagerCmd::List
                | ManagerCmd::Why { .. }
                | ManagerCmd::Tabs
                | ManagerCmd::Budget { site: None, .. }
        )
    }
}

/// Where a flow definition comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlowSource {
    /// A quoted inline definition, e.g. `"a -> b"`.
    Inline(String),
    /// `file:PATH`.
    File(PathBuf),
}

/// `flow …` seed aliases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowAction {
    /// `flow start`
    Start,
    /// `flow pause`
    Pause,
    /// `flow resume`
    Resume,
    /// `flow stop`
    Stop,
    /// `flow status`
    Status,
}

impl FlowAction {
    /// Whether the action changes state.
    pub fn mutates(self) -> bool {
        self != FlowAction::Status
    }
}

/// Either a `manager` verb or a `flow` alias: what the host's flow engine receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlowRequest {
    /// A `manager …` command (params already expanded).
    Manager(ManagerCmd),
    /// A `flow …` alias.
    Flow(FlowAction),
}

/// `memory …` verbs (docs/memory-and-skills.md). `scope: None` is `global`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryCmd {
    /// `memory TEXT tag: T1,T2 [-pin] [importance=N] [scope=S]`: append; answers the id.
    Add {
        /// The scope.
        scope: Option<String>,
        /// The memory.
        text: Template,
        /// Its tags.
        tags: Vec<String>,
        /// Pinned memories never cool down.
        pin: bool,
        /// 1–10 (default 5).
        importance: Option<u8>,
        /// `importance=ask [to=TAB]`: this tab rates the memory's importance.
        rate: Option<Target>,
    },
    /// `memory ID TEXT [tag: …]`: rewrite one memory (tags kept unless given).
    Rewrite {
        /// The memory.
        id: i64,
        /// The new text.
        text: Template,
        /// New tags, if given.
        tags: Option<Vec<String>>,
        /// New importance, if given.
        importance: Option<u8>,
    },
    /// `memory search WORDS [scope=S]`.
    Search {
        /// The scope.
        scope: Option<String>,
        /// What to look for.
        words: Template,
    },
    /// `memory del ID…`.
    Del(Vec<i64>),
    /// `memory pin ID…`.
    Pin(Vec<i64>),
    /// `memory unpin ID…`.
    Unpin(Vec<i64>),
    /// `memory tags [scope=S]`: the tag cloud, hottest first.
    Tags {
        /// The scope.
        scope: Option<String>,
    },
    /// `memory list [N] [scope=S]`: the hottest N memories (reading does not warm them).
    List {
        /// The scope.
        scope: Option<String>,
        /// How many.
        n: usize,
    },
    /// `memory summarize [SCOPE] [to=TAB] [n=N]`: a tab writes a summary of the hottest N.
    Summarize {
        /// The scope.
        scope: Option<String>,
        /// Who writes it (default: a worker).
        to: Option<Target>,
        /// How many memories it summarises.
        n: usize,
    },
}

impl MemoryCmd {
    /// Whether the verb writes (add, rewrite, del, pin, unpin, summarize).
    pub fn writes(&self) -> bool {
        !matches!(
            self,
            MemoryCmd::Search { .. } | MemoryCmd::Tags { .. } | MemoryCmd::List { .. }
        )
    }
}

/// `skill …` verbs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkillCmd {
    /// `skill list`.
    List,
    /// `skill help [NAME]`: a guide written for a model to read.
    Help(Option<String>),
    /// `skill NAME key=value…` (values have `$var`s expanded before validation).
    Run {
        /// The skill (`[a-z0-9_-]+`).
        name: String,
        /// Its arguments, as written.
        args: Vec<(String, String)>,
    },
}

/// `mcp …` verbs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpCmd {
    /// `mcp list`: the servers and their tools.
    List,
    /// `mcp use SERVER TOOL ARGS`: call one tool.
    Use {
        /// A key of `mcpServers`.
        server: String,
        /// The tool's name.
        tool: String,
        /// Its arguments.
        args: McpArgs,
    },
    /// `mcp config add NAME COMMAND ARGS…`: add a stdio server to `mcp.json` (person only).
    ConfigAdd {
        /// The server's name (a key of `mcpServers`).
        name: String,
        /// The program.
        command: String,
        /// Its arguments, as written.
        args: Vec<String>,
    },
    /// `mcp config remove NAME`: remove a server from `mcp.json` (person only).
    ConfigRemove(String),
    /// `mcp resources SERVER`: the server's resources and resource templates.
    Resources(String),
    /// `mcp read SERVER URI`: one resource's contents.
    Read {
        /// A key of `mcpServers`.
        server: String,
        /// The resource's URI, a template (`$var` expanded when the command runs).
        uri: String,
    },
}

/// The arguments of `mcp use`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpArgs {
    /// `key=value…`; values are templates (`$var` expanded when the command runs).
    Pairs(Vec<(String, String)>),
    /// One JSON object; its string values are templates.
    Json(String),
}

/// What the host's MCP client receives: arguments already expanded.
#[derive(Debug, Clone, PartialEq)]
pub enum McpRequest {
    /// List servers and tools.
    List,
    /// Call a tool.
    Use {
        /// Server.
        server: String,
        /// Tool.
        tool: String,
        /// Arguments (strings may still be coerced to the tool's schema by the host).
        args: serde_json::Map<String, serde_json::Value>,
    },
    /// Add a stdio server to the MCP client config.
    ConfigAdd {
        /// Server name.
        name: String,
        /// Program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
    },
    /// Remove a server from the MCP client config.
    ConfigRemove(String),
    /// List a server's resources.
    Resources(String),
    /// Read one resource of a server.
    Read {
        /// Server.
        server: String,
        /// The resource's URI.
        uri: String,
    },
}

/// The event verbs (docs/cluster.md). `T` is a published text: a template as parsed (`None`: the
/// step's `$RESULT`), expanded text for the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventCmd<T> {
    /// `publish TOPIC [TEXT]`.
    Publish {
        /// The topic.
        topic: String,
        /// The text.
        text: T,
    },
    /// `subscribe TOPIC [where COND] do CMD`: a standing rule.
    Subscribe {
        /// A topic, or `*` for every one.
        topic: String,
        /// The condition as written (`if` syntax; `$EVENT` is the event), checked to parse.
        cond: Option<String>,
        /// The command as written, checked to parse; it runs when an event arrives.
        command: String,
    },
    /// `subscribe list`.
    List,
    /// `unsubscribe ID`.
    Unsubscribe(i64),
}

impl<T> EventCmd<T> {
    /// Whether the verb changes the standing rules (subscribe, unsubscribe).
    pub fn mutates(&self) -> bool {
        matches!(self, EventCmd::Subscribe { .. } | EventCmd::Unsubscribe(_))
    }
}
