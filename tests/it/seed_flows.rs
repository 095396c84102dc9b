//! docs/commands.md / issue 27: the seed manual's own flow files (`flows/seed/`), byte for byte, run end
//! to end on a real hub over real sockets: the `数据分析流程` file with real Python scripts in
//! the exec workspace and simulated chat tabs, its `fallback` as an action when a step keeps
//! failing, and the staged `user-flow.yaml` across eleven tabs.

use crate::common;

use std::path::Path;
use std::time::Duration;

use aicard::config::ExecFlag;
use common::*;
use serde_json::json;

fn seed(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("flows/seed")
            .join(name),
    )
    .expect("seed fixture")
}

/// The scripts the manual's flow calls, as a user would have them next to `data.csv`.
const LOAD: &str = r#"import csv, json, sys
args = sys.argv[1:]
path = args[args.index("--input") + 1]
with open(path, newline="", encoding="utf-8") as f:
    print(json.dumps(list(csv.DictReader(f)), ensure_ascii=False))
"#;
const CLEAN: &str = r#"import json, sys
rows = json.loads(sys.argv[1])
kept = [{"region": r["region"].strip(), "sales": int(r["sales"])} for r in rows if r["sales"].strip()]
print(json.dumps(kept, ensure_ascii=False))
"#;
const ANALYZE: &str = r#"import json, sys
totals = {}
for r in json.loads(sys.argv[1]):
    totals[r["region"]] = totals.get(r["region"], 0) + r["sales"]
print(" ".join(f"{k}={v}" for k, v in sorted(totals.items())))
"#;
const REPORT: &str = r#"import sys
args = sys.argv[1:]
out = args[args.index("--output") + 1]
with open(out, "w", encoding="utf-8") as f:
    f.write("<html><body><h1>report</h1><p>" + args[0] + "</p></body></html>\n")
print("wrote " + out)
"#;

fn workspace(h: &TestHub, with_data: bool) -> std::path::PathBuf {
    let ws = h.dir.path().join("workspace");
    std::fs::create_dir_all(&ws).unwrap();
    for (name, body) in [
        ("load_data.py", LOAD),
        ("clean.py", CLEAN),
        ("analyze.py", ANALYZE),
        ("report.py", REPORT),
    ] {
        std::fs::write(ws.join(name), body).unwrap();
    }
    if with_data {
        std::fs::write(
            ws.join("data.csv"),
            "region,sales\nnorth,120\nsouth,90\nnorth,100\neast,\n",
        )
        .unwrap();
    }
    ws
}

async fn python_hub() -> TestHub {
    let h = TestHub::start_with(|c| {
        c.exec_mode = ExecFlag::Allowlist;
        c.exec_allow = vec!["python".into()];
        c.flows_dir = c.data_dir.join("flows");
    })
    .await;
    // Saved under the manual's own file name: `manager run` finds it by its `name:`.
    write_flow(
        &h.hub().config.flows_dir,
        "flow",
        &seed("data-analysis.yaml"),
    );
    h
}

fn answer(site: &'static str) -> impl Fn(&str) -> Reply + Send + Sync + 'static {
    move |p: &str| Reply::Text(Duration::from_millis(5), format!("[{site}] 收到：{p}"))
}

#[tokio::test]
async fn the_manuals_data_analysis_flow_runs_as_written() {
    if !have_python() {
        return;
    }
    let h = python_hub().await;
    let ws = workspace(&h, true);
    let mut boss = h.scripted("boss", "kimi", "master", answer("kimi")).await;
    let ds = h
        .scripted("ds", "deepseek", "worker", answer("deepseek"))
        .await;
    let qw = h
        .scripted("qw", "qianwen", "worker", answer("qianwen"))
        .await;
    let db = h.scripted("db", "doubao", "worker", answer("doubao")).await;
    let (state, delivered) = run_flow(&mut boss, "?<manager run 数据分析流程>!").await;
    assert_eq!(state, "completed", "{delivered:?}");
    // The three Python steps ran in the workspace, each reading the one before.
    let html = std::fs::read_to_string(ws.join("report.html")).expect("report.py wrote it");
    assert!(html.contains("<p>north=220 south=90</p>"), "{html}");
    // The list-form parallel_outputs: each site got its own prompt with the analysis.
    let analysis = "north=220 south=90";
    assert_eq!(ds.prompts()[0], format!("请分析以下结果：{analysis}"));
    assert_eq!(qw.prompts()[0], format!("总结：{analysis}"));
    assert_eq!(db.prompts()[0], format!("简要说明：{analysis}"));
    // `send_to_all` reached every worker after the report.
    for tab in [&ds, &qw, &db] {
        assert_eq!(
            tab.prompts().last().map(String::as_str),
            Some("分析完成，报告已生成")
        );
    }
    let text = delivered.expect("the master got the result");
    assert!(text.contains("[deepseek] 收到：请分析以下结果"), "{text}");
    assert!(
        !text.contains("发送告警消息"),
        "no failure, no alert: {text}"
    );
}

#[tokio::test]
async fn the_manuals_fallback_alerts_the_master_when_a_step_keeps_failing() {
    if !have_python() {
        return;
    }
    let h = python_hub().await;
    let ws = workspace(&h, false); // no data.csv: load_data.py fails every time
    let mut boss = h.scripted("boss", "kimi", "master", answer("kimi")).await;
    let ds = h
        .scripted("ds", "deepseek", "worker", answer("deepseek"))
        .await;
    boss.send(json!({"type":"user_input","text":"?<manager run 数据分析流程>!"}));
    let mut alert = None;
    let mut tries = 0;
    let failed = tokio::time::timeout(Duration::from_secs(40), async {
        loop {
            let v = boss.frames.recv().await.expect("master open");
            match v["type"].as_str() {
                Some("deliver") => alert = v["text"].as_str().map(str::to_string),
                Some("flow_event")
                    if v["node_id"] == "load_data" && v["state"] == "item_failed" =>
                {
                    tries += 1
                }
                Some("flow_event") if v["node_id"].is_null() && v["state"] == "failed" => {
                    return v;
                }
                Some("flow_event") if v["node_id"].is_null() && v["state"] == "completed" => {
                    panic!("a run whose first step cannot run completed: {v}")
                }
                _ => {}
            }
        }
    })
    .await
    .expect("the run ends in time");
    // `max_retries: 3`: one try and three retries, then the fallback — once.
    assert_eq!(tries, 4);
    let alert = alert.expect("the fallback's message reached the master");
    assert!(alert.contains("发送告警消息"), "{alert}");
    assert!(
        alert.contains("load_data") && alert.contains("data.csv"),
        "{alert}"
    );
    let error = failed["detail"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("node `load_data` failed"), "{failed}");
    assert!(error.contains("fallback `fallback` ran"), "{failed}");
    // Nothing after the failed step ran, and no tab was asked anything.
    assert!(!ws.join("report.html").exists());
    assert!(ds.prompts().is_empty(), "{:?}", ds.prompts());
}

#[tokio::test]
async fn the_manuals_staged_flow_runs_across_its_tabs() {
    let h = TestHub::start_with(|c| c.flows_dir = c.data_dir.join("flows")).await;
    write_flow(
        &h.hub().config.flows_dir,
        "user-flow",
        &seed("user-flow.yaml"),
    );
    let mut boss = h.scripted("boss", "kimi", "master", answer("kimi")).await;
    let mut analyzers = Vec::new();
    for label in ["analyzer_001", "analyzer_002", "analyzer_003"] {
        analyzers.push(
            h.scripted(label, "chatglm", "worker", answer("chatglm"))
                .await,
        );
    }
    let foreman = h
        .scripted("fm", "chatgpt", "foreman", answer("foreman"))
        .await;
    let mut sites = Vec::new();
    for site in ["deepseek", "doubao", "qianwen", "claude", "gemini"] {
        sites.push(h.scripted(site, site, "worker", answer(site)).await);
    }
    let yuanbao = h
        .scripted("yb", "yuanbao", "worker", answer("yuanbao"))
        .await;
    let (state, delivered) = run_flow(
        &mut boss,
        "?<manager run 跨平台深度分析流程 document=\"缓存层设计文档\">!",
    )
    .await;
    assert_eq!(state, "completed", "{delivered:?}");
    // Stage 1: the master's `parallel` reached the three analyzers with the document.
    for a in &analyzers {
        let p = a.prompts();
        assert!(
            p[0].contains("对以下技术文档进行深度分析") && p[0].contains("缓存层设计文档"),
            "{p:?}"
        );
    }
    // Stage 2: the foreman got the analyses and the rules.
    let f = foreman.prompts();
    assert!(
        f[0].contains("子任务1: 技术细节分析") && f[0].contains("[chatglm] 收到"),
        "{f:?}"
    );
    // Stage 3: the five sites in parallel, each with the foreman's split.
    for s in &sites {
        assert!(
            s.prompts().iter().any(|p| p.contains("[foreman] 收到")),
            "{:?}",
            s.prompts()
        );
    }
    // Stage 5: yuanbao got the weighted merge as `$aggregated_result`.
    let y = yuanbao.prompts();
    let last = y.last().cloned().unwrap_or_default();
    assert!(last.starts_with("综合分析结果 "), "{y:?}");
    assert!(!last.contains("$aggregated_result"), "{last}");
    let text = delivered.expect("the master got the final report");
    assert!(text.contains("[yuanbao] 收到：综合分析结果"), "{text}");
}

#[tokio::test]
async fn a_command_nodes_own_variables_are_its_own() {
    // A loop variable, a `set` target and a chain's `$exit_code`, in flow command nodes: valid,
    // and not emptied by the flow.
    let h = TestHub::start_with(|c| {
        c.exec_mode = ExecFlag::Allowlist;
        c.exec_allow = vec!["echo".into(), "false".into()];
        c.flows_dir = c.data_dir.join("flows");
    })
    .await;
    write_flow(
        &h.hub().config.flows_dir,
        "own",
        "name: own\nnodes:\n  - id: a\n    command: \"for i in {1..3} do echo n$i\"\n  - id: b\n    depends_on: a\n    command: \"set x = 5 -> echo got $x\"\n  - id: c\n    depends_on: b\n    command: \"false -> if $exit_code != 0 then echo exit $exit_code\"\n  - id: d\n    depends_on: c\n    to: master\n    prompt: \"${a.output} | ${b.output} | ${c.output}\"\n",
    );
    let mut boss = h.scripted("boss", "kimi", "master", answer("kimi")).await;
    let (state, delivered) = run_flow(&mut boss, "?<manager run own>!").await;
    assert_eq!(state, "completed", "{delivered:?}");
    let text = delivered.unwrap_or_default();
    assert!(text.contains("n1") && text.contains("n3"), "{text}");
    assert!(text.contains("got 5"), "{text}");
    assert!(text.contains("exit 1"), "{text}");
}
