//! docs/commands.md: the seed manual's 23 command examples, each typed byte for byte as the manual writes
//! it (tests/fixtures/seed-manual/commands.md) into a real hub on port
//! 0 over real sockets, with scripted tabs for the sites the examples name and the manual's
//! scripts as small Python files in the exec workspace (exec on an allowlist of `python`, `echo`,
//! `grep`). Nothing sleeps to synchronise: every wait is for a frame, under a timeout.
//!
//! What each example does now (what the assertions below prove):
//!
//! | example | what it does now |
//! |---|---|
//! | `echo` | runs `echo` in the workspace; answers `hello` |
//! | `set_from_shell` | runs `python analyze.py data.csv`; `$result` holds its output |
//! | `parallel_echo` | deepseek and qianwen each get the prompt `echo "并行消息"` verbatim (no other tab); the answer is both replies, labelled |
//! | `from_doubao_set` | fails "no reply yet" naming doubao until doubao has answered; then sets `$data` to `python extract.py`'s output |
//! | `to_yuanbao_pipe` | sends yuanbao the text `echo <$data> \| python process.py` (a prompt; nothing runs on the hub); answers yuanbao's reply |
//! | `var_assign_form` | refused: "`shell` is the manual's placeholder for a command" with two commands to write instead (both shown to work) |
//! | `chain_form` | one chain `cmd1 → cmd2`, refused at `cmd1` the same way (placeholder, what to write) |
//! | `if_grep` | runs `echo $result \| grep ERROR`: no match → "condition false, nothing ran"; a match → `有错误` |
//! | `for_loop` | runs `echo` five times: `第 1 次` … `第 5 次` |
//! | `chain` | one chain of three scripts, each getting the previous output as `$RESULT`: `step3(step2(step1))` |
//! | `create_data_analysis` | saves flow 数据分析 with the three script steps in order; `manager run` runs load, clean, analyze and completes |
//! | `set_threshold` | sets `$threshold` to `5` |
//! | `create_monitor` | saves 3 steps: `python check.py`, `if $RESULT > $threshold then python send_alert.py`, `python log_result.py` (`\$result` = the step before's output, `$threshold` an input defaulting to the person's 5, bare scripts run with python); runs: 7 > 5 alerts, `threshold=10` does not; unset at create → a required input |
//! | `create_cross_platform` | saves flow 跨平台分析 as one node asking three sites at once (`parallel_outputs`); running it gives deepseek, qianwen, doubao each its line and the master every answer headed by its site |
//! | `from_doubao_pipe` | after doubao answered, sets `$raw_data` to `python extract.py`'s output (`CMD \| set NAME` = `set NAME = $(CMD)`) |
//! | `to_yuanbao_raw` | sends yuanbao the text `python process.py <$raw_data>`; answers yuanbao's reply |
//! | `create_auto_ops` | saves 3 steps (the check and its `if $exit_code != 0` stay one chain), retry 3; runs: check passes → log, restart; check exits 1 → alert, log, restart, completed |
//! | `flow_start` | runs the flow 数据处理流程 from the flows directory to completion; without one, answers "no flow named `数据处理流程`" |
//! | `agent_create` | creates agent 我的助手 on `auto` with tools [mcp:filesystem, shell, web] (the manual's names mapped); `agent list` shows it |
//! | `mcp_list` | lists the `filesystem` server of mcp.json and its `read_file` tool |
//! | `mcp_use` | calls `filesystem`'s `read_file` with path=/data/test.txt; answers the file's text |
//! | `mcp_config_add` | typed by the person: adds `server_name` (`command`, [`args...`]) to mcp.json, keeping the others; in a model's reply: refused "only the person", file unchanged |
//! | `create_smart_finally` | saves one step, the whole chain (`else then` with its `if`, `finally` guarding all before it); runs: check passes → continue, cleanup; check exits 2 → rollback, cleanup |

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use aicard::config::ExecFlag;
use common::*;
use serde_json::{json, Value};

// ---- the manual's texts, byte for byte (checked against the reference file below) ----------

const ECHO: &str = "?<echo hello>!";
const SET_FROM_SHELL: &str = "?<set result = $(python analyze.py data.csv)>!";
const PARALLEL_ECHO: &str = r#"?<parallel to=[deepseek,qianwen] echo "并行消息">!"#;
const FROM_DOUBAO_SET: &str = "?<from doubao: set data = $(python extract.py)>!";
const TO_YUANBAO_PIPE: &str = "?<to yuanbao: echo $data | python process.py>!";
const VAR_ASSIGN_FORM: &str = "?<$var = $(shell)>!";
const CHAIN_FORM: &str = "?<cmd1>! → ?<cmd2>!";
const IF_GREP: &str = r#"?<if $(echo $result | grep ERROR) then echo "有错误">!"#;
const FOR_LOOP: &str = r#"?<for i in {1..5} do echo "第 $i 次">!"#;
const CHAIN: &str =
    "?<python step1.py>! → ?<python step2.py $RESULT>! → ?<python step3.py $RESULT>!";
const CREATE_DATA_ANALYSIS: &str =
    r#"?<manager create 数据分析 from "python load.py -> python clean.py -> python analyze.py">!"#;
const SET_THRESHOLD: &str = "?<set threshold = 5>!";
const CREATE_MONITOR: &str = r#"?<manager create 监控流程 from "
python check.py
-> if \$result > \$threshold then send_alert.py
-> log_result.py
">!"#;
const CREATE_CROSS_PLATFORM: &str = r#"?<manager create 跨平台分析 from "
to:deepseek 分析这部分数据
to:qianwen 总结这份报告
to:doubao 生成图表
">!"#;
const FROM_DOUBAO_PIPE: &str = "?<from doubao: python extract.py | set raw_data>!";
const TO_YUANBAO_RAW: &str = "?<to yuanbao: python process.py $raw_data>!";
const CREATE_AUTO_OPS: &str = r#"?<manager create 自动运维 from "
check_system.py
-> if \$exit_code != 0 then alert.py
-> log_status.py
-> restart_service.py
" auto_retry=3>!"#;
const FLOW_START: &str = "?<flow start 数据处理流程>!";
const AGENT_CREATE: &str = "?<agent create 我的助手 with tools=[文件读写,命令执行,网络搜索]>!";
const MCP_LIST: &str = "?<mcp list>!";
const MCP_USE: &str = "?<mcp use filesystem read_file path=/data/test.txt>!";
const MCP_CONFIG_ADD: &str = "?<mcp config add server_name command args...>!";
const CREATE_SMART_FINALLY: &str = r#"?<manager create 智能流程 from "
check_status.py
-> if \$exit_code == 0 then continue.py
-> else then rollback.py
-> finally cleanup.py
">!"#;

/// Every example by the label the reference file gives it, in its order.
const EXAMPLES: [(&str, &str); 23] = [
    ("echo", ECHO),
    ("set_from_shell", SET_FROM_SHELL),
    ("parallel_echo", PARALLEL_ECHO),
    ("from_doubao_set", FROM_DOUBAO_SET),
    ("to_yuanbao_pipe", TO_YUANBAO_PIPE),
    ("var_assign_form", VAR_ASSIGN_FORM),
    ("chain_form", CHAIN_FORM),
    ("if_grep", IF_GREP),
    ("for_loop", FOR_LOOP),
    ("chain", CHAIN),
    ("create_data_analysis", CREATE_DATA_ANALYSIS),
    ("set_threshold", SET_THRESHOLD),
    ("create_monitor", CREATE_MONITOR),
    ("create_cross_platform", CREATE_CROSS_PLATFORM),
    ("from_doubao_pipe", FROM_DOUBAO_PIPE),
    ("to_yuanbao_raw", TO_YUANBAO_RAW),
    ("create_auto_ops", CREATE_AUTO_OPS),
    ("flow_start", FLOW_START),
    ("agent_create", AGENT_CREATE),
    ("mcp_list", MCP_LIST),
    ("mcp_use", MCP_USE),
    ("mcp_config_add", MCP_CONFIG_ADD),
    ("create_smart_finally", CREATE_SMART_FINALLY),
];

const REFERENCE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/seed-manual/commands.md"
);

// ---- the manual's scripts, as small real programs in the exec workspace ---------------------

/// A script that notes its name in `ran.log` (so a test sees what ran, in order) and says so.
fn noting(name: &str) -> String {
    format!("open('ran.log', 'a').write('{name}\\n')\nprint('{name} ran')\n")
}

const ANALYZE: &str = r#"import os, sys
open('ran.log', 'a').write('analyze\n')
path = sys.argv[1] if len(sys.argv) > 1 else 'data.csv'
if os.path.exists(path):
    rows = sum(1 for _ in open(path, encoding='utf-8')) - 1
    print(f'分析 {path}: {rows} 行')
else:
    print(f'ERROR: {path} not found')
"#;

const STEP: &str = r#"import os, sys
name = os.path.basename(sys.argv[0])[:-3]
print(f"{name}({' '.join(sys.argv[1:])})" if len(sys.argv) > 1 else name)
"#;

/// A stdio MCP server named `filesystem` with one tool, `read_file {path}`, serving absolute
/// paths from the directory given as its argument (newline-delimited JSON-RPC, no SDK).
const FS_SERVER: &str = r#"import json, os, sys
root = sys.argv[1]
def send(msg):
    sys.stdout.write(json.dumps(msg) + '\n')
    sys.stdout.flush()
while True:
    line = sys.stdin.readline()
    if not line:
        break
    msg = json.loads(line)
    method, rid = msg.get('method'), msg.get('id')
    if rid is None:
        continue
    if method == 'initialize':
        result = {'protocolVersion': msg['params']['protocolVersion'],
                  'capabilities': {'tools': {}},
                  'serverInfo': {'name': 'filesystem', 'version': '1'}}
    elif method == 'tools/list':
        result = {'tools': [{'name': 'read_file', 'description': 'Read a text file',
                             'inputSchema': {'type': 'object',
                                             'properties': {'path': {'type': 'string'}},
                                             'required': ['path']}}]}
    elif method == 'tools/call':
        path = os.path.join(root, msg['params']['arguments']['path'].lstrip('/'))
        try:
            result = {'content': [{'type': 'text', 'text': open(path, encoding='utf-8').read()}]}
        except OSError as e:
            result = {'content': [{'type': 'text', 'text': str(e)}], 'isError': True}
    else:
        send({'jsonrpc': '2.0', 'id': rid, 'error': {'code': -32601, 'message': method}})
        continue
    send({'jsonrpc': '2.0', 'id': rid, 'result': result})
"#;

fn scripts() -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = [
        ("data.csv", "id,value\n1,3\n2,5\n3,8\n"),
        ("analyze.py", ANALYZE),
        (
            "extract.py",
            "open('ran.log', 'a').write('extract\\n')\nprint('rows=3 sum=16')\n",
        ),
        (
            "process.py",
            "import sys\nopen('ran.log', 'a').write('process\\n')\nprint('processed', sys.argv[1:])\n",
        ),
        ("step1.py", STEP),
        ("step2.py", STEP),
        ("step3.py", STEP),
        ("check.py", "print(7)\n"),
        ("fs_server.py", FS_SERVER),
    ]
    .into_iter()
    .map(|(n, t)| (n.to_string(), t.to_string()))
    .collect();
    for name in [
        "load",
        "clean",
        "send_alert",
        "log_result",
        "check_system",
        "alert",
        "log_status",
        "restart_service",
        "check_status",
        "continue",
        "rollback",
        "cleanup",
    ] {
        all.push((format!("{name}.py"), noting(name)));
    }
    all
}

// ---- a hub with the manual's tabs -----------------------------------------------------------

/// A hub with exec on an allowlist, a flows directory, and the scripts in its workspace.
async fn manual_hub() -> TestHub {
    let h = TestHub::start_with(|c| {
        c.exec_mode = ExecFlag::Allowlist;
        c.exec_allow = vec!["python".into(), "echo".into(), "grep".into()];
        c.flows_dir = c.data_dir.join("flows");
    })
    .await;
    let ws = workspace(&h);
    std::fs::create_dir_all(&ws).unwrap();
    for (name, text) in scripts() {
        std::fs::write(ws.join(name), text).unwrap();
    }
    h
}

fn workspace(h: &TestHub) -> PathBuf {
    h.dir.path().join("workspace")
}

/// What ran, in order (the scripts' `ran.log`).
fn ran(h: &TestHub) -> String {
    std::fs::read_to_string(workspace(h).join("ran.log")).unwrap_or_default()
}

/// The person's tab (a master), and one worker tab per site the examples name; each worker
/// answers `SITE 答: PROMPT`.
struct Team {
    master: ScriptedTab,
    doubao: ScriptedTab,
    yuanbao: ScriptedTab,
    deepseek: ScriptedTab,
    qianwen: ScriptedTab,
}

async fn team(h: &TestHub) -> Team {
    let worker = |label: &'static str, site: &'static str| {
        h.scripted(label, site, "worker", move |p: &str| {
            Reply::Text(Duration::from_millis(1), format!("{site} 答: {p}"))
        })
    };
    Team {
        master: h
            .scripted("me", "kimi", "master", |_: &str| Reply::Silent)
            .await,
        doubao: worker("db", "doubao").await,
        yuanbao: worker("yb", "yuanbao").await,
        deepseek: worker("ds", "deepseek").await,
        qianwen: worker("qw", "qianwen").await,
    }
}

fn out(r: &Value) -> &str {
    r["result"]["output"].as_str().unwrap_or_default()
}

fn succeeded(r: &Value) -> bool {
    r["result"]["success"] == true
}

/// The commands of a saved flow's nodes, in order.
fn saved_steps(h: &TestHub, flow: &str) -> Vec<String> {
    let yaml = h
        .hub()
        .hub
        .store
        .flow_source(flow)
        .unwrap()
        .unwrap_or_else(|| panic!("flow {flow} is not saved"));
    let v: Value = serde_saphyr::from_str(&yaml).unwrap();
    v["nodes"]
        .as_array()
        .unwrap_or_else(|| panic!("no nodes: {yaml}"))
        .iter()
        .map(|n| n["command"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// A refusal that says what to write: never the generic answers.
fn assert_guides(r: &Value) {
    assert!(!succeeded(r), "{r}");
    for generic in [
        "unknown command",
        "shell execution is off",
        "command could not be parsed",
    ] {
        assert!(!out(r).contains(generic), "`{generic}`: {r}");
    }
}

// ---- the examples ---------------------------------------------------------------------------

/// Splits the reference file's "Command examples" block into (label, text).
fn reference_examples(doc: &str) -> Vec<(String, String)> {
    let block = doc
        .split("## Command examples")
        .nth(1)
        .expect("a Command examples section");
    let mut found: Vec<(String, String)> = Vec::new();
    for line in block.lines() {
        if let Some(head) = line.strip_prefix("=== ") {
            let label = head.split_whitespace().next().unwrap_or_default();
            found.push((label.to_string(), String::new()));
        } else if line.starts_with("```") {
            continue;
        } else if let Some((_, text)) = found.last_mut() {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(line);
        }
    }
    found
}

#[test]
fn every_example_is_the_manuals_text() {
    let doc = std::fs::read_to_string(REFERENCE).expect("the manual's examples");
    let reference = reference_examples(&doc);
    let ours: Vec<(String, String)> = EXAMPLES
        .iter()
        .map(|(l, t)| (l.to_string(), t.to_string()))
        .collect();
    assert_eq!(ours, reference);
}

#[tokio::test]
async fn echo_answers_hello() {
    let h = manual_hub().await;
    let mut t = team(&h).await;
    let r = t.master.command(ECHO).await;
    assert_eq!(r["command"], "echo hello", "{r}");
    assert!(succeeded(&r), "{r}");
    assert_eq!(out(&r), "hello");
}

#[tokio::test]
async fn set_from_shell_keeps_the_output_and_if_grep_tests_it() {
    if !have_python() {
        return;
    }
    let h = manual_hub().await;
    let mut t = team(&h).await;
    let r = t.master.command(SET_FROM_SHELL).await;
    assert!(succeeded(&r), "{r}");
    assert_eq!(out(&r), "result = 分析 data.csv: 3 行");
    let r = t.master.command("?<echo $result>!").await;
    assert_eq!(out(&r), "分析 data.csv: 3 行", "{r}");
    // No ERROR in $result: grep finds nothing, the condition is false, nothing runs.
    let r = t.master.command(IF_GREP).await;
    assert!(succeeded(&r), "{r}");
    assert_eq!(
        out(&r),
        "（条件不成立，未执行 / condition false, nothing ran）"
    );
    // Without its data the script reports an ERROR, and the same `if` answers.
    std::fs::remove_file(workspace(&h).join("data.csv")).unwrap();
    let r = t.master.command(SET_FROM_SHELL).await;
    assert_eq!(out(&r), "result = ERROR: data.csv not found", "{r}");
    let r = t.master.command(IF_GREP).await;
    assert!(succeeded(&r), "{r}");
    assert_eq!(out(&r), "有错误");
}

#[tokio::test]
async fn parallel_echo_sends_its_text_to_both_tabs() {
    let h = manual_hub().await;
    let mut t = team(&h).await;
    let r = t.master.command(PARALLEL_ECHO).await;
    assert!(succeeded(&r), "{r}");
    assert_eq!(
        out(&r),
        "[deepseek] deepseek 答: echo \"并行消息\"\n\n[qianwen] qianwen 答: echo \"并行消息\""
    );
    assert_eq!(t.deepseek.prompts(), vec!["echo \"并行消息\""]);
    assert_eq!(t.qianwen.prompts(), vec!["echo \"并行消息\""]);
    assert!(t.doubao.prompts().is_empty() && t.yuanbao.prompts().is_empty());
}

#[tokio::test]
async fn from_doubao_sets_data_and_to_yuanbao_sends_it() {
    if !have_python() {
        return;
    }
    let h = manual_hub().await;
    let mut t = team(&h).await;
    // Before doubao has answered anything, `from doubao:` says so and sets nothing.
    let r = t.master.command(FROM_DOUBAO_SET).await;
    assert!(!succeeded(&r), "{r}");
    assert!(
        out(&r).contains("doubao") && out(&r).contains("no reply yet"),
        "{r}"
    );
    assert_eq!(ran(&h), "", "extract.py ran without doubao's answer");
    let r = t.master.command(TO_YUANBAO_PIPE).await;
    assert!(out(&r).contains("undefined variable: $data"), "{r}");
    assert!(t.yuanbao.prompts().is_empty());
    // Once doubao has answered, the command after `from doubao:` runs.
    let r = t.master.command("?<to doubao: 给我今天的数据>!").await;
    assert_eq!(out(&r), "doubao 答: 给我今天的数据", "{r}");
    let r = t.master.command(FROM_DOUBAO_SET).await;
    assert!(succeeded(&r), "{r}");
    assert_eq!(out(&r), "data = rows=3 sum=16");
    // `to yuanbao:` sends the text, $data expanded; nothing runs on the hub.
    let r = t.master.command(TO_YUANBAO_PIPE).await;
    assert!(succeeded(&r), "{r}");
    assert_eq!(
        out(&r),
        "yuanbao 答: echo rows=3 sum=16 | python process.py"
    );
    assert_eq!(
        t.yuanbao.prompts(),
        vec!["echo rows=3 sum=16 | python process.py"]
    );
    assert_eq!(ran(&h), "extract\n", "process.py must not run");
}

#[tokio::test]
async fn the_manuals_placeholders_say_what_to_write() {
    let h = manual_hub().await;
    let mut t = team(&h).await;
    for (example, word) in [(VAR_ASSIGN_FORM, "shell"), (CHAIN_FORM, "cmd1")] {
        let r = t.master.command(example).await;
        assert_guides(&r);
        assert!(
            out(&r).contains(&format!(
                "`{word}` is the manual's placeholder for a command"
            )),
            "{r}"
        );
        assert!(out(&r).contains("?<$var = $(to deepseek: 你好)>!"), "{r}");
        assert!(
            out(&r).contains("?<to deepseek: 列出要点>! → ?<to qianwen: 翻译 $RESULT>!"),
            "{r}"
        );
    }
    // The chain form is read as one chain of two commands.
    let r = t.master.command(CHAIN_FORM).await;
    assert_eq!(r["command"], "cmd1 → cmd2", "{r}");
    assert!(t.deepseek.prompts().is_empty());
    // What the answer says to write does what the manual meant.
    let r = t.master.command("?<$var = $(to deepseek: 你好)>!").await;
    assert_eq!(out(&r), "var = deepseek 答: 你好", "{r}");
    let r = t
        .master
        .command("?<to deepseek: 列出要点>! → ?<to qianwen: 翻译 $RESULT>!")
        .await;
    assert!(succeeded(&r), "{r}");
    assert_eq!(out(&r), "qianwen 答: 翻译 deepseek 答: 列出要点");
}

#[tokio::test]
async fn for_loop_echoes_five_times() {
    let h = manual_hub().await;
    let mut t = team(&h).await;
    let r = t.master.command(FOR_LOOP).await;
    assert!(succeeded(&r), "{r}");
    assert_eq!(out(&r), "第 1 次\n第 2 次\n第 3 次\n第 4 次\n第 5 次");
}

#[tokio::test]
async fn chain_passes_each_result_to_the_next_script() {
    if !have_python() {
        return;
    }
    let h = manual_hub().await;
    let mut t = team(&h).await;
    let r = t.master.command(CHAIN).await;
    assert!(succeeded(&r), "{r}");
    assert_eq!(
        r["command"],
        "python step1.py → python step2.py $RESULT → python step3.py $RESULT"
    );
    assert_eq!(out(&r), "step3(step2(step1))");
}

#[tokio::test]
async fn create_data_analysis_saves_three_steps_that_run() {
    if !have_python() {
        return;
    }
    let h = manual_hub().await;
    let mut t = team(&h).await;
    let r = t.master.command(CREATE_DATA_ANALYSIS).await;
    assert!(succeeded(&r), "{r}");
    assert_eq!(out(&r), "已保存流程 / saved flow 数据分析");
    assert_eq!(
        saved_steps(&h, "数据分析"),
        vec!["python load.py", "python clean.py", "python analyze.py"]
    );
    assert_eq!(ran(&h), "", "creating runs nothing");
    let (state, _) = run_flow(&mut t.master, "?<manager run 数据分析>!").await;
    assert_eq!(state, "completed");
    assert_eq!(ran(&h), "load\nclean\nanalyze\n");
}

#[tokio::test]
async fn set_threshold_sets_five() {
    let h = manual_hub().await;
    let mut t = team(&h).await;
    let r = t.master.command(SET_THRESHOLD).await;
    assert!(succeeded(&r), "{r}");
    assert_eq!(out(&r), "threshold = 5");
    let r = t.master.command("?<echo $threshold>!").await;
    assert_eq!(out(&r), "5", "{r}");
}

/// `监控流程`: `\$result` is the step before's output, `\$threshold` the person's variable
/// (its value when the flow is created is the input's default), and a bare `send_alert.py`
/// runs with python. Run twice: over the threshold the alert runs, under it not.
#[tokio::test]
async fn create_monitor_saves_its_steps_and_runs_them() {
    if !have_python() {
        return;
    }
    let h = manual_hub().await;
    let mut t = team(&h).await;
    t.master.command(SET_THRESHOLD).await;
    let r = t.master.command(CREATE_MONITOR).await;
    assert!(succeeded(&r), "{r}");
    assert_eq!(out(&r), "已保存流程 / saved flow 监控流程");
    assert_eq!(
        saved_steps(&h, "监控流程"),
        vec![
            "python check.py",
            "if $RESULT > $threshold then python send_alert.py",
            "python log_result.py"
        ]
    );
    let saved = h.hub().hub.store.flow_source("监控流程").unwrap().unwrap();
    assert!(saved.contains("threshold: {default: \"5\"}"), "{saved}");
    // check.py prints 7: over 5, the alert runs, then the log.
    let (state, _) = run_flow(&mut t.master, "?<manager run 监控流程>!").await;
    assert_eq!(state, "completed");
    assert_eq!(ran(&h), "send_alert\nlog_result\n");
    // Over a threshold of 10 it does not.
    std::fs::remove_file(workspace(&h).join("ran.log")).unwrap();
    let (state, _) = run_flow(&mut t.master, "?<manager run 监控流程 threshold=10>!").await;
    assert_eq!(state, "completed");
    assert_eq!(ran(&h), "log_result\n");
}

/// A variable that is not set when the flow is created is an input it must be given.
#[tokio::test]
async fn create_monitor_without_a_threshold_asks_for_one_at_run() {
    let h = manual_hub().await;
    let mut t = team(&h).await;
    let r = t.master.command(CREATE_MONITOR).await;
    assert!(succeeded(&r), "{r}");
    let saved = h.hub().hub.store.flow_source("监控流程").unwrap().unwrap();
    assert!(saved.contains("threshold: {required: true}"), "{saved}");
    let r = t.master.command("?<manager run 监控流程>!").await;
    assert!(!succeeded(&r), "{r}");
    assert!(
        out(&r).contains("missing required input `threshold`"),
        "{r}"
    );
}

#[tokio::test]
async fn create_cross_platform_gives_each_site_its_line() {
    let h = manual_hub().await;
    let mut t = team(&h).await;
    let r = t.master.command(CREATE_CROSS_PLATFORM).await;
    assert!(succeeded(&r), "{r}");
    assert_eq!(out(&r), "已保存流程 / saved flow 跨平台分析");
    // The manual calls it parallel: one node asking the three sites at once, each its line.
    let yaml = h
        .hub()
        .hub
        .store
        .flow_source("跨平台分析")
        .unwrap()
        .unwrap();
    let v: Value = serde_saphyr::from_str(&yaml).unwrap();
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 1, "{yaml}");
    assert_eq!(
        nodes[0]["parallel_outputs"],
        json!({"deepseek": "分析这部分数据", "qianwen": "总结这份报告", "doubao": "生成图表"}),
        "{yaml}"
    );
    let (state, answer) = run_flow(&mut t.master, "?<manager run 跨平台分析>!").await;
    assert_eq!(state, "completed");
    // The master's answer holds every line's answer, each headed by the tab that answered.
    let answer = answer.expect("the answer is delivered to the master");
    for (tab, site) in [("ds", "deepseek"), ("qw", "qianwen"), ("db", "doubao")] {
        let head = format!("[{tab}]\n{site} 答");
        assert!(answer.contains(&head), "{head}: {answer}");
    }
    assert_eq!(t.deepseek.prompts(), vec!["分析这部分数据"]);
    assert_eq!(t.qianwen.prompts(), vec!["总结这份报告"]);
    assert_eq!(t.doubao.prompts(), vec!["生成图表"]);
    assert!(t.yuanbao.prompts().is_empty());
}

#[tokio::test]
async fn from_doubao_pipes_into_set_and_to_yuanbao_sends_raw_data() {
    if !have_python() {
        return;
    }
    let h = manual_hub().await;
    let mut t = team(&h).await;
    let r = t.master.command("?<to doubao: 给我原始数据>!").await;
    assert!(succeeded(&r), "{r}");
    let r = t.master.command(FROM_DOUBAO_PIPE).await;
    assert!(succeeded(&r), "{r}");
    assert_eq!(out(&r), "raw_data = rows=3 sum=16");
    let r = t.master.command(TO_YUANBAO_RAW).await;
    assert!(succeeded(&r), "{r}");
    assert_eq!(out(&r), "yuanbao 答: python process.py rows=3 sum=16");
    assert_eq!(t.yuanbao.prompts(), vec!["python process.py rows=3 sum=16"]);
    assert_eq!(ran(&h), "extract\n", "process.py must not run");
}

/// `自动运维`: `\$exit_code` is the exit code of the step before, so the check and the `if` on
/// it stay one step; `auto_retry=3` gives every step three retries.
#[tokio::test]
async fn create_auto_ops_runs_the_alert_only_when_the_check_fails() {
    if !have_python() {
        return;
    }
    let h = manual_hub().await;
    let mut t = team(&h).await;
    let r = t.master.command(CREATE_AUTO_OPS).await;
    assert!(succeeded(&r), "{r}");
    assert_eq!(out(&r), "已保存流程 / saved flow 自动运维");
    assert_eq!(
        saved_steps(&h, "自动运维"),
        vec![
            "python check_system.py -> if $exit_code != 0 then python alert.py",
            "python log_status.py",
            "python restart_service.py"
        ]
    );
    let saved = h.hub().hub.store.flow_source("自动运维").unwrap().unwrap();
    assert!(saved.contains("retry: {max: 3}"), "{saved}");
    let (state, _) = run_flow(&mut t.master, "?<manager run 自动运维>!").await;
    assert_eq!(state, "completed");
    assert_eq!(ran(&h), "check_system\nlog_status\nrestart_service\n");
    // The check fails (exit 1): the alert runs, and the flow goes on.
    std::fs::remove_file(workspace(&h).join("ran.log")).unwrap();
    std::fs::write(
        workspace(&h).join("check_system.py"),
        "import sys\nopen('ran.log', 'a').write('check_system\\n')\nsys.exit(1)\n",
    )
    .unwrap();
    let (state, _) = run_flow(&mut t.master, "?<manager run 自动运维>!").await;
    assert_eq!(state, "completed");
    assert_eq!(
        ran(&h),
        "check_system\nalert\nlog_status\nrestart_service\n",
        "the alert once, no retry of a check the `if` answered"
    );
}

#[tokio::test]
async fn flow_start_runs_the_named_flow() {
    if !have_python() {
        return;
    }
    let h = manual_hub().await;
    let mut t = team(&h).await;
    let r = t.master.command(FLOW_START).await;
    assert!(!succeeded(&r), "{r}");
    assert!(out(&r).contains("no flow named `数据处理流程`"), "{r}");
    write_flow(
        &h.hub().config.flows_dir,
        "数据处理流程",
        "name: 数据处理流程\nnodes:\n  - id: load\n    command: python load.py\n  - id: analyze\n    depends_on: load\n    command: python analyze.py\n",
    );
    let (state, _) = run_flow(&mut t.master, FLOW_START).await;
    assert_eq!(state, "completed");
    assert_eq!(ran(&h), "load\nanalyze\n");
}

#[tokio::test]
async fn agent_create_makes_an_agent_with_the_manuals_tools() {
    let h = manual_hub().await;
    let mut t = team(&h).await;
    let r = t.master.command(AGENT_CREATE).await;
    assert!(succeeded(&r), "{r}");
    assert!(
        out(&r)
            .contains("agent `我的助手` created on auto with tools [mcp:filesystem, shell, web]"),
        "{r}"
    );
    let r = t.master.command("?<agent list>!").await;
    assert!(
        out(&r).contains("我的助手 on auto tools [mcp:filesystem, shell, web]"),
        "{r}"
    );
}

/// `mcp.json` with the test's `filesystem` server, serving `/data/test.txt` from a temp dir.
fn filesystem_server(h: &TestHub) -> PathBuf {
    let root = h.dir.path().join("fsroot");
    std::fs::create_dir_all(root.join("data")).unwrap();
    std::fs::write(root.join("data").join("test.txt"), "测试文件的内容\n").unwrap();
    let server = workspace(h).join("fs_server.py");
    let cfg = json!({"mcpServers": {"filesystem": {
        "command": "python", "args": [server, root]}}});
    let path = h.dir.path().join("mcp.json");
    std::fs::write(&path, cfg.to_string()).unwrap();
    path
}

fn servers(path: &Path) -> Value {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    v["mcpServers"].clone()
}

#[tokio::test]
async fn mcp_list_shows_the_server_and_mcp_use_reads_the_file() {
    if !have_python() {
        return;
    }
    let h = manual_hub().await;
    filesystem_server(&h);
    let mut t = team(&h).await;
    let r = t.master.command(MCP_LIST).await;
    assert!(succeeded(&r), "{r}");
    assert!(
        out(&r).contains("filesystem — stdio `python` — 1 tools"),
        "{r}"
    );
    assert!(
        out(&r).contains("read_file (path*): Read a text file"),
        "{r}"
    );
    let r = t.master.command(MCP_USE).await;
    assert!(succeeded(&r), "{r}");
    assert_eq!(out(&r).trim_end(), "测试文件的内容");
}

#[tokio::test]
async fn mcp_config_add_writes_mcp_json_only_for_the_person() {
    let h = manual_hub().await;
    let path = filesystem_server(&h);
    let before = servers(&path);
    let mut t = team(&h).await;
    // In the master model's reply: refused, the file untouched.
    t.master.send(json!({"type":"turn_end","turn_id":"t1",
        "text": format!("好的，我来添加：{MCP_CONFIG_ADD}")}));
    let r = t.master.next("cmd_result").await;
    assert!(!succeeded(&r), "{r}");
    assert!(out(&r).contains("only the person"), "{r}");
    assert_eq!(servers(&path), before);
    // Typed by the person: written, the other servers kept.
    let r = t.master.command(MCP_CONFIG_ADD).await;
    assert!(succeeded(&r), "{r}");
    assert!(out(&r).contains("MCP server `server_name` added"), "{r}");
    let now = servers(&path);
    assert_eq!(
        now["server_name"],
        json!({"command": "command", "args": ["args..."]})
    );
    assert_eq!(now["filesystem"], before["filesystem"]);
}

/// `智能流程`: `else then` stays with its `if`, and `finally` guards every step before it, so
/// the whole body is one step, run as one chain: the cleanup runs whichever way the check went.
#[tokio::test]
async fn create_smart_finally_keeps_else_and_finally_with_their_if() {
    if !have_python() {
        return;
    }
    let h = manual_hub().await;
    let mut t = team(&h).await;
    let r = t.master.command(CREATE_SMART_FINALLY).await;
    assert!(succeeded(&r), "{r}");
    assert_eq!(out(&r), "已保存流程 / saved flow 智能流程");
    assert_eq!(
        saved_steps(&h, "智能流程"),
        vec!["python check_status.py -> if $exit_code == 0 then python continue.py -> else then python rollback.py -> finally python cleanup.py"]
    );
    let (state, _) = run_flow(&mut t.master, "?<manager run 智能流程>!").await;
    assert_eq!(state, "completed");
    assert_eq!(ran(&h), "check_status\ncontinue\ncleanup\n");
    std::fs::remove_file(workspace(&h).join("ran.log")).unwrap();
    std::fs::write(
        workspace(&h).join("check_status.py"),
        "import sys\nopen('ran.log', 'a').write('check_status\\n')\nsys.exit(2)\n",
    )
    .unwrap();
    let (state, _) = run_flow(&mut t.master, "?<manager run 智能流程>!").await;
    assert_eq!(state, "completed");
    assert_eq!(ran(&h), "check_status\nrollback\ncleanup\n");
}

// ---- the manual's flow_report while a person holds the tab (docs/protocol.md) --------------

/// The manual's script asks with `flow_report` whether it may send; while the person holds the
/// tab (a key pressed in its box within `--agent-hold-ms`, reported as `task_update {state:
/// "held"}`) the answer is `wait`, `should_auto_send: false`, and `auto_send` again once the
/// hold has passed. Nothing sleeps: the script asks again until the answer changes.
#[tokio::test]
async fn flow_report_waits_while_a_person_holds_the_tab() {
    let hold = Duration::from_millis(400);
    let h = TestHub::start_with(move |c| c.agent.hold_ms = hold.as_millis() as u64).await;
    let mut m = h
        .scripted("m", "deepseek", "master", |_| {
            Reply::Text(Duration::ZERO, "unused".into())
        })
        .await;
    let report = json!({"type":"flow_report","turn_id":"t1","event":"flow_end"});
    m.send(report.clone());
    let c = m.next("flow_control").await;
    assert_eq!(c["action"], "auto_send", "no hold yet: {c}");
    // The person presses a key while a delivery waits in the box.
    let held_at = std::time::Instant::now();
    m.send(json!({"type":"task_update","deliver_id":"d-1","state":"held"}));
    m.send(report.clone());
    let c = m.next("flow_control").await;
    assert_eq!(c["action"], "wait", "{c}");
    assert_eq!(c["should_auto_send"], false, "{c}");
    assert!(c["reason"].as_str().unwrap().contains("typing"), "{c}");
    // Asked again and again, the answer turns to auto_send only after the hold has passed.
    let c = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            m.send(report.clone());
            let c = m.next("flow_control").await;
            if c["action"] == "auto_send" {
                return c;
            }
            assert!(c["reason"].as_str().unwrap().contains("typing"), "{c}");
        }
    })
    .await
    .expect("the hold ends");
    assert_eq!(c["should_auto_send"], true, "{c}");
    assert!(held_at.elapsed() >= hold, "auto_send came within the hold");
}

/// A hold the tab reports for its task (`task_id`, no `deliver_id`: the person types while a
/// task waits in the box) makes `flow_report` wait too, as a delivery's hold does (issue 45).
#[tokio::test]
async fn flow_report_waits_while_a_person_holds_the_tabs_task() {
    let hold = Duration::from_millis(400);
    let h = TestHub::start_with(move |c| c.agent.hold_ms = hold.as_millis() as u64).await;
    let mut m = h
        .scripted("m", "deepseek", "master", |_| {
            Reply::Text(Duration::ZERO, "unused".into())
        })
        .await;
    let report = json!({"type":"flow_report","turn_id":"t1","event":"flow_end"});
    m.send(report.clone());
    let c = m.next("flow_control").await;
    assert_eq!(c["action"], "auto_send", "no hold yet: {c}");
    let held_at = std::time::Instant::now();
    m.send(json!({"type":"task_update","task_id":"t-7","state":"held"}));
    m.send(report.clone());
    let c = m.next("flow_control").await;
    assert_eq!(c["action"], "wait", "a task's hold counts: {c}");
    assert_eq!(c["should_auto_send"], false, "{c}");
    assert!(c["reason"].as_str().unwrap().contains("typing"), "{c}");
    let c = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            m.send(report.clone());
            let c = m.next("flow_control").await;
            if c["action"] == "auto_send" {
                return c;
            }
        }
    })
    .await
    .expect("the hold ends");
    assert_eq!(c["should_auto_send"], true, "{c}");
    assert!(held_at.elapsed() >= hold, "auto_send came within the hold");
}
