//! Help texts: one-line usage per command (for `help` and for parse errors) and the full
//! usage with an example (for `help TOPIC`). Bilingual, because the people using AIcard read
//! Chinese and the models read both.

/// One command's help entry.
#[derive(Debug, Clone, Copy)]
pub struct HelpEntry {
    /// Topic name as typed after `help`.
    pub topic: &'static str,
    /// One-line usage.
    pub usage: &'static str,
    /// One-line summary, 中文.
    pub zh: &'static str,
    /// One-line summary, English.
    pub en: &'static str,
    /// Longer explanation and an example (with the answer it produces).
    pub details: &'static str,
}

/// Every command, in the order `help` lists them.
pub const ENTRIES: &[HelpEntry] = &[
    HelpEntry {
        topic: "shell",
        usage: "?<PROGRAM ARGS…>!",
        zh: "运行 shell 命令（需 --exec allowlist/on）",
        en: "run a shell command (needs --exec allowlist or on)",
        details: "Any command that does not start with a keyword is a shell command. It runs in the \
workspace directory with a timeout and an output cap. --exec off (default) refuses it; \
--exec allowlist runs argv directly (pipelines allowed, no ; && || ` $( ) > <); --exec on uses sh -c \
with $variables passed through the environment. A script is run by its interpreter: write `python \
check.py`, not `check.py` (a bare script name is answered with what to write).\nExample: ?<echo hello>!  →  hello",
    },
    HelpEntry {
        topic: "jobs",
        usage: "?<PROGRAM ARGS… &>!  ?<jobs>!  ?<jobs kill ID>!",
        zh: "后台运行命令；查看或结束后台任务",
        en: "run a command in the background; list or end background jobs",
        details: "A shell command ending in `&` runs in the background under the exec policy and is \
answered at once with its job id. `jobs` lists each job's state and output; `jobs kill ID` ends one. \
At most 8 run at once; the exec timeout applies; jobs end when the hub stops.\nExample: ?<python \
long_report.py &>!  →  job j1 started in the background",
    },
    HelpEntry {
        topic: "set",
        usage: "?<set [global] NAME = VALUE | $(COMMAND)>!",
        zh: "设置变量：字面值或命令输出",
        en: "set a variable to a literal or to a command's output",
        details: "VALUE is literal text ($var expanded once, never re-parsed) or $(COMMAND), the output \
of any command form; `COMMAND | set NAME` (the seed manual's form) is the same as `set NAME = \
$(COMMAND)`. Variables belong to the calling master tab; `global` writes the scope shared \
with flows.\nExample: ?<set n = 5>!  →  n = 5\nExample: ?<set d = $(to deepseek: name a colour)>!  →  d = blue",
    },
    HelpEntry {
        topic: "vars",
        usage: "$name  ${name}  ${node.output}",
        zh: "变量引用，使用前展开",
        en: "variable references, expanded before use",
        details: "$name and ${name} read a variable (the caller's scope first, then the global scope); \
${node.output} reads a flow node's output. \\$ is a literal dollar. An undefined variable is an \
error. Values are data: a value holding `; rm -rf /` is text, never a command.\nExample: ?<to kimi: translate $text>!",
    },
    HelpEntry {
        topic: "parallel",
        usage: "?<parallel to=[T1,T2,…] TEXT>!  |  ?<parallel to=[T1: P1, T2: P2]>!",
        zh: "同时发给多个标签页并汇总回答",
        en: "send prompts to several tabs at once and collect the answers",
        details: "Targets are site names, labels, client ids, role:worker or group:NAME. The first form \
sends the same TEXT to every target; the second sends each target its own prompt (a new item \
starts at `, NAME:`). After `to=[a,b]` the body may also be one `a: TEXT` line per target: each \
target gets only its line, and a line naming a tab outside the list, a line naming none, or a \
target without its line is refused. All prompts run concurrently (each tab still handles one task at a time); \
the answers come back labelled by tab. If some targets fail, the others' answers are kept and \
the result is marked failed.\nExample: ?<parallel to=[deepseek,qianwen] 用一句话介绍 Rust>!\n  →  [deepseek] Rust 是……\n\n     [qianwen] Rust 是……",
    },
    HelpEntry {
        topic: "to",
        usage: "?<to TARGET: TEXT>!",
        zh: "发给一个标签页，返回它的回答",
        en: "send a prompt to one tab and return its answer",
        details: "Example: ?<to yuanbao: 写一首关于秋天的短诗>!  →  the poem yuanbao wrote",
    },
    HelpEntry {
        topic: "from",
        usage: "?<from TARGET: [COMMAND]>!",
        zh: "取某标签页最近的回答作为 $RESULT",
        en: "take a tab's latest answer as $RESULT (and run COMMAND with it)",
        details: "Without COMMAND the answer itself is the result.\nExample: ?<from doubao: to kimi: 检查这段代码 $RESULT>!",
    },
    HelpEntry {
        topic: "send_to_all",
        usage: "?<send_to_all TEXT>!",
        zh: "发给所有工人标签页",
        en: "send a prompt to every worker tab",
        details: "A foreman reaches the workers of its group. Answers come back labelled like parallel.\nExample: ?<send_to_all 准备好了吗？>!",
    },
    HelpEntry {
        topic: "chain",
        usage: "?<A -> B -> C>!",
        zh: "链式执行，上一步结果为 $RESULT",
        en: "chain: each step gets the previous result as $RESULT",
        details: "`->` binds loosest: it splits the whole command, except inside quotes, $( ) and nested \
?< >!. An `if` or `for` step takes the rest of the chain as its branch/body. Quote text that \
contains a literal ->. The chain stops at the first failing step.\nExample: ?<to deepseek: 列出三个要点 -> to qianwen: 把这些翻译成英文：$RESULT>!",
    },
    HelpEntry {
        topic: "if",
        usage: "?<if COND then COMMAND [else COMMAND]>!",
        zh: "条件执行",
        en: "run a command when a condition holds",
        details: "COND is VALUE, `not COND`, or VALUE OP VALUE with OP one of == = != < <= > >= contains \
(numbers compare as numbers). A VALUE is text, \"quoted text\", $var or $(COMMAND). A lone value is \
true unless empty, 0 or false; a lone $(COMMAND) whose shell command exits non-zero is false, as in a \
shell (?<if $(echo $r | grep ERROR) then …>!). `else` pairs with the nearest `if`.\nExample: ?<if $n > 3 then to kimi: 多 else to kimi: 少>!",
    },
    HelpEntry {
        topic: "for",
        usage: "?<for VAR in {A..B[..STEP]} | ITEM… | [ITEM, …] do COMMAND>!",
        zh: "循环（最多 1000 次）",
        en: "loop (at most 1000 iterations)",
        details: "The body sees the loop variable as $VAR; the results are joined line by line.\nExample: ?<for i in {1..3} do echo $i>!  →  1\\n2\\n3 (with exec enabled)",
    },
    HelpEntry {
        topic: "manager",
        usage: "?<manager create NAME from \"A -> B\"|file:PATH | run NAME [--from-node ID] [key=value…] | pause|resume|stop|status|show|delete NAME | list | export NAME to file:PATH | plan GOAL… | approve ID [key=value…] | modify ID: FEEDBACK | reject ID | save ID as NAME | why RUN NODE>!",
        zh: "定义、运行和管理流程；按目标规划流程",
        en: "define, run and manage flows; plan a flow from a goal",
        details: "The tab that runs `manager run` is the master of that run. Only the master (or the \
person) may create, run, pause, resume, stop, delete or export flows.\n\
`plan GOAL…` asks the planner tab (serve --planner TARGET, a role card with `planner: true`, else this \
tab) to write a flow for the goal; the hub validates it like `aicard flow validate`, checks that every \
target is online, and sends problems back as LINE:COL with 3 lines of context, up to --plan-repairs \
rounds (default 3). A valid plan becomes a draft plan-XXXXXXXX; nothing reaches a tab until you \
answer `approve ID [key=value…]` (runs it), `modify ID: FEEDBACK` (re-plans; the old draft stays \
readable with `show ID`), `reject ID` or `save ID as NAME` (writes flows/NAME.yaml, never over an \
existing file). The same goal with the same tabs online reuses the last draft (plan cache).\n\
A target `auto` (or `auto:SITE,SITE`) lets the decision engine pick the worker; `why RUN NODE` shows \
the score table of its pick, ?<tabs>! every tab's health.\n\
Example: ?<manager run cross-review document=$doc>!  →  run started: …\n\
Example: ?<manager plan review my essay with two models, then merge>!  →  plan draft plan-1a2b3c4d …",
    },
    HelpEntry {
        topic: "tabs",
        usage: "?<tabs>!  |  ?<tabs budget [SITE [N/hour|N/day|off]]>!",
        zh: "所有标签页及其健康状况（成功率、首字时间、冷却、暂停）；各站点的发送配额",
        en: "every tab and its health (success, time to first chunk, cooldown, parked); per-site quotas",
        details: "Health comes from the decision engine: the success rate over the last 20 outcomes (10 \
minutes), EWMAs of time to first chunk and seconds per 1,000 characters, tasks in flight, a cooldown \
after the site rate-limited the tab (30 s, doubling to 15 min) and `parked` after a captcha or login \
page, until a person acts in the tab. `tabs budget SITE N/hour` gives a site a quota (kept across \
restarts; a role card's `quota:` does too): past it, no prompt goes to that site's tabs until the oldest \
send leaves the window; `off` removes it; bare `tabs budget` lists them.\nExample: ?<tabs>!  →  sim-a  sim  worker  -  可用 / ready  3/3  1.2s  8.0s  0 · ?<tabs budget deepseek 20/hour>!",
    },
    HelpEntry {
        topic: "mcp",
        usage: "?<mcp list | use SERVER TOOL [key=value…] | use SERVER TOOL {JSON} | resources SERVER | read SERVER URI | config add NAME COMMAND ARGS… | config remove NAME>!",
        zh: "列出并调用 MCP 服务器的工具，列出并读取它们的资源（mcp.json）",
        en: "list and call the tools of the MCP servers in mcp.json, list and read their resources",
        details: "Servers are configured in DATA_DIR/mcp.json (or --mcp-config FILE) in Claude Desktop's \
format: {\"mcpServers\": {NAME: {\"command\": …, \"args\": […], \"env\": {…}} | {\"url\": …}}}. A stdio server \
starts on first use in its own process group, times out like a shell command and stops with the hub. \
`list` starts the servers and shows their tools; `use` calls one: values are text unless the tool's \
schema wants a number, boolean, array or object; $var expands. `resources SERVER` lists a server's \
resources and templates; `read SERVER URI` shows one's text (a binary one: its MIME type and size). Only the master or the person may use \
MCP, unless a role card says `mcp: true`; an mcp command in a worker's reply never runs. Every call \
is audited. In a flow: a node `mcp: {server: S, tool: T, args: {…}}`, output as ${node.output}. \
`config add NAME COMMAND ARGS…` / `config remove NAME` write mcp.json (a stdio server); only as typed \
by the person, never from a tab's reply, since it starts a program.\n\
Example: ?<mcp use time get_current_time timezone=Europe/Paris>!  →  {\"timezone\": \"Europe/Paris\", …}",
    },
    HelpEntry {
        topic: "publish",
        usage: "?<publish TOPIC [TEXT]>!",
        zh: "发布事件（TEXT 省略时为上一步的 $RESULT）",
        en: "publish an event (TEXT, or the previous step's $RESULT)",
        details: "Publishes {topic, text, from} on the hub's event bus; standing rules (subscribe) on that \
topic run. Flow runs publish their lifecycle events too: flow_start, flow_pause, flow_resume, \
flow_stop, flow_complete, node_start, node_complete, node_error, and node_result {run, flow, node, \
output} for every node's result. In a cluster every node's rules hear it. From a reply it needs the \
`flows` permission (the master's, or a role card's).\nExample: ?<to deepseek: draft a plan -> publish plan.ready>!  →  已发布 / published plan.ready",
    },
    HelpEntry {
        topic: "subscribe",
        usage: "?<subscribe TOPIC [where COND] do CMD>!  |  ?<subscribe list>!",
        zh: "订阅事件：事件到达时运行 CMD（$EVENT 为事件），规则会保存",
        en: "a standing rule: run CMD when an event arrives ($EVENT is the event); stored",
        details: "TOPIC is a topic name or * for every topic. COND is an `if` condition; CMD any command. \
When an event arrives, $EVENT is the event as JSON ({\"topic\": …, …its fields}), $EVENT_TOPIC its topic, \
$EVENT_TEXT its text, output or error, and each field its own $EVENT_FIELD ($EVENT_RUN, $EVENT_FLOW, \
$EVENT_NODE, $EVENT_OUTPUT, …). The rule runs with its author's authority, checked when it \
fires. An event that a rule's own command caused never fires that rule again, and rules stop three \
deep. Rules are kept in the store and survive a restart; `subscribe list` shows them with their ids.\n\
Example: ?<subscribe node_result where $EVENT_FLOW == cross-review do to reviewer: 请审阅 / review: $EVENT_TEXT>!  →  规则 #1 / rule #1",
    },
    HelpEntry {
        topic: "unsubscribe",
        usage: "?<unsubscribe ID>!",
        zh: "删除一条订阅规则",
        en: "remove a standing rule",
        details: "ID is the number `subscribe` answered (and `subscribe list` shows). A person or the \
master may remove any rule; a tab's reply only its own tab's rules.\nExample: ?<unsubscribe 1>!  →  已删除 / removed rule #1",
    },
    HelpEntry {
        topic: "on",
        usage: "?<on NODE: CMD>!",
        zh: "在集群的另一个节点上运行 shell 命令或技能",
        en: "run a shell command or a skill on another node of the cluster",
        details: "NODE is a node's --node name; CMD is a shell command or `skill NAME k=v`. It runs there under that node's exec policy (off by default there too, and then it says so), with your variables (`$x`) sent along; its live output and its result come back as if it ran here, and the node that ran it writes the audit line, naming who asked from which node. Naming this node runs it here. In a flow, a node with `on: NODE` and `command:` does the same.
Example: ?<on db-host: wc -l /data/orders.csv>!  →  12408 /data/orders.csv",
    },
    HelpEntry {
        topic: "agent",
        usage: "?<agent create NAME [on TARGET] [with tools=[T,…]] [max_rounds=N] [memory=SCOPE] | task NAME TEXT | status [NAME] | memory NAME | list | stop|pause|resume [NAME] | loop on|off>!",
        zh: "代理：一个标签页的模型执行命令、读到结果、继续，直到完成",
        en: "agents: a tab whose model runs commands, reads their results and goes on until done",
        details: "`create` binds NAME to a tab (a label, a site, or auto, the default) and tools: tabs, shell, \
flows, memory, mcp:SERVER, skill:NAME, web (text only); default [tabs, memory]; the seed manual's 文件读写, \
命令执行 and 网络搜索 are mcp:filesystem, shell and web. An agent's tools are never \
wider than what its creator may use, and shell still obeys the exec policy. `task` starts a session: the \
tab gets a primer and the task; after each of its replies that holds commands the hub runs them and \
sends back one results message (⟦aicard result k/N⟧ per command, errors included), until the model \
answers without a command or writes ?<done ANSWER>!. Limits: max_rounds (default 25), 30 minutes, the \
same command a 4th time within 5 rounds, 3 rounds in a row where every command failed (pauses). \
`status` says the round and why a session stopped; `stop|pause|resume` act on NAME or this tab's \
session; `loop on|off` makes this tab's own replies loop. Only the master or the person may create, \
task or stop agents.\n\
Example: ?<agent create researcher on kimi-1 with tools=[tabs,memory]>!  →  agent researcher created\n\
Example: ?<agent task researcher 比较 qianwen 和 doubao 的评审>!  →  the agent's final answer",
    },
    HelpEntry {
        topic: "done",
        usage: "?<done [TEXT]>!",
        zh: "结束代理会话，TEXT 为最终回答",
        en: "end the agent session; TEXT is the final answer",
        details: "Written by a looping model when the task is finished. Without TEXT the final answer is the \
text of that reply before the command. A reply with no command at all also ends the session.\n\
Example: ?<done qianwen 的评审更完整>!  →  the caller of agent task receives: qianwen 的评审更完整",
    },
    HelpEntry {
        topic: "flow",
        usage: "?<flow start|pause|resume|stop|status>!",
        zh: "控制当前流程（旧命令别名）",
        en: "control the current flow (seed aliases)",
        details: "Example: ?<flow status>!  →  the current run's node states",
    },
    HelpEntry {
        topic: "role",
        usage: "?<role master|foreman|worker [group=G]>!",
        zh: "设置本标签页的角色",
        en: "set this tab's role",
        details: "A reply can change roles only from a master tab; what the person types always can.\nExample: ?<role foreman group=review>!  →  role set: foreman (group review)",
    },
    HelpEntry {
        topic: "remember",
        usage: "?<remember TEXT [scope=S]>!",
        zh: "设置团队的短期记忆（留空则清除）",
        en: "set the team's short-term note (empty clears it)",
        details: "The note of a scope (global by default, or a group with scope=NAME) is shown at the top of \
every <memory> block the hub prepends to tasks (role cards with `memory: every N`).\n\
Example: ?<remember 今天的目标：完成登录页评审>!  →  短期记忆已更新 / note set (global)",
    },
    HelpEntry {
        topic: "memory",
        usage: "?<memory TEXT tag: T1,T2 [-pin] [importance=N|importance=ask [to=TAB]] [scope=S]>!  |  ?<memory ID TEXT [tag: …]>!  |  ?<memory search WORDS>!  |  ?<memory del|pin|unpin ID…>!  |  ?<memory tags|list [N]|summarize [SCOPE] [to=TAB]>!",
        zh: "团队长期记忆：写入、改写、搜索、删除、置顶、标签",
        en: "the team's long-term memory: add, rewrite, search, delete, pin, tags",
        details: "USAGE GUIDE (for people and models)\n\
Memory is shared by every tab of the team. Scopes: `global` (default) and one per group (scope=NAME).\n\
- ?<memory TEXT tag: T1,T2>! appends a memory and answers its id (#42). -pin pins it; importance=1..10 \
(default 5) says how much it matters; importance=ask [to=TAB] lets a tab (a worker by default) rate it.\n\
- ?<memory 42 NEW TEXT tag: …>! rewrites memory 42 (tags kept unless given).\n\
- ?<memory search WORDS>! returns each hit in full with its id, and the id, temperature and tags of the 2 \
memories written before and after it (its neighbours), so you can ask for them next. Hits are ranked by \
relevance (bm25) x recency (temperature) x importance.\n\
- ?<memory tags>! the tag cloud, hottest first; ?<memory list 10>! the 10 hottest memories.\n\
- ?<memory del 42>!, ?<memory pin 42>!, ?<memory unpin 42>!.\n\
- ?<memory summarize [SCOPE] [to=TAB]>! asks a tab to write one summary memory of the hottest 10; it \
links to its sources, and the tab rates its importance on the summary's last line.\n\
- A flow reads memory with a node `memory: {search: WORDS, scope: S}`; its output is what search answers.\n\
TEMPERATURE: a new memory is at 100; every turn of its scope (a reply finished by any tab in it) \
multiplies it by 0.95; a search hit moves it halfway back to 100; a pinned memory is always hot (∞). \
Nothing is ever deleted except by `memory del`: a cold memory is only shown less.\n\
MEMORY ANCHORS: when code or a document you write depends on a memory, leave its id in a comment, e.g. \
`// [长期记忆:042] 用户要求所有时间用 UTC`, so whoever reads it later can run ?<memory search 042>! \
or find it by the anchor. Do not guess what the team remembers: search first.\n\
WHO MAY WRITE: the master and the person; other tabs when their role card sets \
permissions: {memory_write: true}. Everyone whose commands run may search.\n\
Example: ?<memory 用户喜欢简短的回答 tag: 偏好,风格 importance=8>!  →  已记住 / remembered #1 (global)",
    },
    HelpEntry {
        topic: "skill",
        usage: "?<skill list>!  |  ?<skill help [NAME]>!  |  ?<skill NAME key=value…>!",
        zh: "技能：skills/ 目录里热加载的工具",
        en: "skills: hot-loaded tools from the skills/ directory",
        details: "A skill is a tool described by a file skills/NAME.yaml: what it does, its parameters (a JSON \
Schema) and how it runs (a prompt to a tab, a flow, or a program under the exec policy). Files are \
reloaded as soon as they change.\n\
Do not guess a skill's name or parameters: run ?<skill list>! to see what exists and ?<skill help NAME>! \
for its parameters and an example call. Arguments are key=value words; quote a value with spaces: \
text=\"two words\". Arguments are checked against the schema, and an error names the field.\n\
Example: ?<skill summarize text=\"…\" words=50>!  →  the summary a tab wrote",
    },
    HelpEntry {
        topic: "help",
        usage: "?<help [COMMAND]>!",
        zh: "命令列表或某个命令的用法",
        en: "the command list, or one command's usage",
        details: "Example: ?<help parallel>!",
    },
];

/// Topic aliases accepted after `help`.
fn canonical(topic: &str) -> &str {
    match topic {
        "exec" | "sh" | "echo" => "shell",
        "var" | "variables" | "$" => "vars",
        "->" | "chains" => "chain",
        "else" | "then" => "if",
        "loop" => "for",
        "flows" => "flow",
        "memories" | "mem" => "memory",
        "skills" => "skill",
        "plan" | "approve" | "why" => "manager",
        "tab" | "health" => "tabs",
        "agents" => "agent",
        other => other,
    }
}

/// The entry for a topic (aliases accepted, case-insensitive).
pub fn entry(topic: &str) -> Option<&'static HelpEntry> {
    let t = topic.trim().to_ascii_lowercase();
    let t = canonical(t.as_str());
    ENTRIES.iter().find(|e| e.topic == t)
}

/// One-line usage for a topic (empty string if unknown).
pub fn usage(topic: &str) -> &'static str {
    entry(topic).map_or("", |e| e.usage)
}

/// The answer to `help` (no topic): every command with one-line usage.
pub fn overview() -> String {
    let mut out = String::from("AIcard 命令 / commands (?<…>!):\n");
    for e in ENTRIES {
        out.push_str(&format!("  {}\n      {} / {}\n", e.usage, e.zh, e.en));
    }
    out.push_str("?<help COMMAND>! 查看详细用法 / shows full usage and an example.");
    out
}

/// The answer to `help TOPIC`: full usage and an example, or an error naming the topics.
pub fn topic(topic: &str) -> Result<String, String> {
    match entry(topic) {
        Some(e) => Ok(format!("{}\n{} / {}\n\n{}", e.usage, e.zh, e.en, e.details)),
        None => Err(format!(
            "没有这个命令 / no such command: {topic}. 可用 / available: {}",
            ENTRIES
                .iter()
                .map(|e| e.topic)
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overview_lists_every_command_in_both_languages() {
        let o = overview();
        for e in ENTRIES {
            assert!(o.contains(e.usage), "{}", e.topic);
            assert!(o.contains(e.zh) && o.contains(e.en), "{}", e.topic);
        }
    }

    #[test]
    fn parallel_help_has_usage_and_example() {
        let t = topic("parallel").expect("parallel is a topic");
        assert!(t.starts_with("?<parallel to=[T1,T2,…] TEXT>!"));
        assert!(t.contains("Example: ?<parallel to=[deepseek,qianwen]"));
    }

    #[test]
    fn aliases_and_unknown_topics() {
        assert_eq!(entry("->").map(|e| e.topic), Some("chain"));
        assert_eq!(entry("PARALLEL").map(|e| e.topic), Some("parallel"));
        let err = topic("nope").expect_err("unknown topic");
        assert!(err.contains("no such command: nope") && err.contains("parallel"));
    }

    #[test]
    fn every_entry_has_an_example() {
        for e in ENTRIES {
            assert!(e.details.contains("Example:"), "{}", e.topic);
        }
    }
}
