//! `aicard demo`: a hub on a temporary store, simulated chat tabs, and `flows/demo.yaml` run
//! from a simulated master tab — end to end over real sockets, with live progress.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::app::App;
use crate::config::HubConfig;
use crate::sim::{Seen, SimSpec, SimTab};

/// The demo flow, embedded so the demo runs from any directory.
const DEMO_FLOW: &str = include_str!("../flows/demo.yaml");

/// Options of `aicard demo`.
#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// Simulated worker tabs to open (at least 3 for the demo flow).
    #[arg(long, default_value_t = 4)]
    pub tabs: usize,
    /// What the workers brainstorm about.
    #[arg(long)]
    pub topic: Option<String>,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 60)]
    pub timeout: u64,
    /// Plan instead of running the demo flow: a simulated planner tab writes a flow for GOAL
    /// (with one mistake the repair loop fixes), the master approves the draft, it runs.
    #[arg(long, value_name = "GOAL", conflicts_with = "agent")]
    pub plan: Option<String>,
    /// The agent loop instead: the master's model asks two workers at once, runs a skill on
    /// their answers, writes a memory and answers, each round's results typed back into its
    /// tab by the hub / 演示代理循环
    #[arg(long)]
    pub agent: bool,
}

pub mod agent;

/// The skill the agent demo runs, embedded so the demo runs from any directory.
const SUMMARIZE_SKILL: &str = include_str!("../skills/summarize.yaml");

const PERSONAS: &[&str] = &["严谨", "创意", "务实", "挑剔", "乐观", "简洁"];

/// Runs the demo; the process exit code (0 when the flow completed).
pub async fn run(args: DemoArgs) -> anyhow::Result<i32> {
    let tmp = tempfile::tempdir().context("creating a temporary data dir")?;
    let mut config = HubConfig::new(tmp.path().to_path_buf());
    config.bind = ([127, 0, 0, 1], 0).into();
    config.role_cards_dir = tmp.path().join("role-cards");
    config.flows_dir = tmp.path().join("flows");
    if args.plan.is_some() {
        config.planner = Some("planner".into());
    }
    if args.agent {
        let skills = tmp.path().join("skills");
        std::fs::create_dir_all(&skills)?;
        std::fs::write(skills.join("summarize.yaml"), SUMMARIZE_SKILL)?;
        config.skills_dir = skills;
        // Short pauses between automatic sends, so the demo is quick but shows them.
        config.agent.gap_ms = (200, 500);
    }
    let token = uuid::Uuid::new_v4().simple().to_string();
    config.token = Some(token.clone());
    let running = App::start(config).await?;
    running
        .app
        .store
        .save_flow("demo", DEMO_FLOW, crate::store::now_ms())?;
    let ws = format!("ws://{}", running.addr);
    let t0 = Instant::now();
    println!(
        "AIcard demo — hub on {} (temporary store {})",
        running.url(),
        tmp.path().display()
    );

    let (seen_tx, mut seen_rx) = mpsc::unbounded_channel::<Seen>();
    let n = args.tabs.max(3);
    let mut workers = Vec::new();
    for i in 0..n {
        let label = format!("sim-{}", (b'a' + i as u8) as char);
        let spec = SimSpec::worker(&label, PERSONAS[i % PERSONAS.len()]);
        workers.push(SimTab::connect(&ws, &token, spec, mpsc::unbounded_channel().0).await?);
    }
    let mut master_spec = SimSpec::worker("master", "总指挥");
    master_spec.role = Some("master".into());
    let (planner_tx, planner_rx) = mpsc::unbounded_channel::<Seen>();
    let mut planner_spec = SimSpec::worker("planner", "规划");
    planner_spec.site = "planner".into();
    planner_spec.role = Some("foreman".into());
    planner_spec.reply = Some(crate::sim::planner_reply);
    planner_spec.chunk_delay = Duration::from_millis(5);
    let _planner = match args.plan {
        Some(_) => Some(SimTab::connect(&ws, &token, planner_spec, planner_tx).await?),
        None => None,
    };
    let master = SimTab::connect(&ws, &token, master_spec, seen_tx).await?;
    let labels: Vec<&str> = workers.iter().map(|w| w.label.as_str()).collect();
    let extra = if args.plan.is_some() { ", planner" } else { "" };
    println!(
        "标签页 / tabs: {} (workers){extra}, master",
        labels.join(", ")
    );

    if args.agent {
        let names: Vec<String> = workers.iter().take(2).map(|w| w.label.clone()).collect();
        let timeout = Duration::from_secs(args.timeout);
        let code = match agent::run(&master, &mut seen_rx, &names, t0, timeout, true).await {
            Ok(run) => {
                println!(
                    "\n──────── 答案 / answer ────────\n{}\n───────────────────────────────",
                    run.answer
                );
                println!(
                    "完成 / done in {:.2} s: {} rounds, commands: {}",
                    t0.elapsed().as_secs_f64(),
                    run.rounds,
                    run.commands.join(" · ")
                );
                0
            }
            Err(e) => {
                eprintln!("\n演示失败 / demo failed: {e}");
                1
            }
        };
        running.shutdown().await;
        return Ok(code);
    }
    let mut view = Progress::default();
    let cmd = match &args.plan {
        Some(goal) => {
            let plan = plan_phase(&master, &mut seen_rx, planner_rx, goal, t0, args.timeout).await;
            match plan {
                Ok(id) => format!("?<manager approve {id}>!"),
                Err(e) => {
                    eprintln!("\n演示失败 / demo failed: {e}");
                    running.shutdown().await;
                    return Ok(1);
                }
            }
        }
        None => {
            if let Ok(flow) = crate::flows::load_str("demo.yaml", DEMO_FLOW) {
                for node in &flow.nodes {
                    view.add(&node.id);
                }
            }
            let mut cmd = String::from("?<manager run demo");
            if let Some(topic) = &args.topic {
                cmd.push_str(&format!(" topic=\"{}\"", topic.replace('"', "'")));
            }
            cmd.push_str(">!");
            cmd
        }
    };
    println!("master 输入 / types: {cmd}\n");
    master.send(json!({"type": "user_input", "text": cmd}));
    let mut delivered: Option<String> = None;
    let mut run_id: Option<String> = None;
    let deadline = tokio::time::sleep(Duration::from_secs(args.timeout));
    tokio::pin!(deadline);
    let outcome = loop {
        let seen = tokio::select! {
            s = seen_rx.recv() => match s { Some(s) => s, None => break Err("master tab closed".to_string()) },
            _ = &mut deadline => break Err(format!("timed out after {} s", args.timeout)),
        };
        let f = &seen.frame;
        match f["type"].as_str() {
            Some("cmd_result") if f["result"]["success"] == false => {
                break Err(f["result"]["output"].as_str().unwrap_or("").to_string())
            }
            Some("flow_event") => {
                if let Some(r) = f["run_id"].as_str() {
                    run_id.get_or_insert_with(|| r.to_string());
                }
                if let Some(line) = view.update(f) {
                    println!("[{:>6.2}s] {line}", t0.elapsed().as_secs_f64());
                }
                match (f["node_id"].is_null(), f["state"].as_str()) {
                    (true, Some("failed")) => break Err(f["detail"]["error"].to_string()),
                    (true, Some("stopped")) => break Err("stopped".into()),
                    (true, Some("completed")) => {
                        break delivered
                            .take()
                            .ok_or_else(|| "no result was delivered".to_string())
                    }
                    _ => {}
                }
            }
            Some("deliver") => {
                let text = f["text"].as_str().unwrap_or_default().to_string();
                println!(
                    "[{:>6.2}s] 结果送达总指挥 / result delivered to the master tab",
                    t0.elapsed().as_secs_f64()
                );
                delivered.get_or_insert(text);
            }
            _ => {}
        }
    };
    let code = match outcome {
        Ok(text) => {
            println!("\n──────── 结果 / result ────────\n{text}\n───────────────────────────────");
            println!("{}", view.tree());
            if let (Some(_), Some(run)) = (&args.plan, &run_id) {
                // The node `pick` had `to: auto`: the decision engine explains its choice.
                let why = format!("?<manager why {run} pick>!");
                master.send(json!({"type": "user_input", "text": why}));
                if let Some(table) = next_answer(&mut seen_rx, Duration::from_secs(10)).await {
                    println!("master 输入 / types: {why}\n{}\n", indent(&table));
                }
            }
            println!(
                "完成 / done in {:.2} s: {} nodes, {} tabs, all over real WebSockets.",
                t0.elapsed().as_secs_f64(),
                view.nodes.len(),
                n + 1 + usize::from(args.plan.is_some())
            );
            0
        }
        Err(e) => {
            eprintln!("\n演示失败 / demo failed: {e}");
            eprintln!("{}", view.tree());
            1
        }
    };
    running.shutdown().await;
    Ok(code)
}

/// `--plan`: the master asks for a plan, the simulated planner answers (one mistake, one
/// repair); prints each round and the draft, and returns the draft's id.
async fn plan_phase(
    master: &SimTab,
    seen: &mut mpsc::UnboundedReceiver<Seen>,
    mut planner: mpsc::UnboundedReceiver<Seen>,
    goal: &str,
    t0: Instant,
    timeout: u64,
) -> Result<String, String> {
    let cmd = format!("?<manager plan {}>!", goal.replace(">!", "> !"));
    println!("master 输入 / types: {cmd}\n");
    master.send(json!({"type": "user_input", "text": cmd}));
    let deadline = tokio::time::sleep(Duration::from_secs(timeout));
    tokio::pin!(deadline);
    let at = || format!("[{:>6.2}s]", t0.elapsed().as_secs_f64());
    loop {
        tokio::select! {
            Some(s) = planner.recv() => {
                if s.frame["type"] != "task" {
                    continue;
                }
                let prompt = s.frame["prompt"].as_str().unwrap_or_default();
                match prompt.strip_prefix("修复 / REPAIR") {
                    None => println!(
                        "{} planner ← 规划提示 / planning prompt ({} chars: flow format from the JSON Schema, 2 examples, online tabs, the goal)",
                        at(),
                        prompt.chars().count()
                    ),
                    Some(rest) => {
                        let diags: Vec<&str> = rest.lines().skip(2).take_while(|l| !l.is_empty()).collect();
                        println!("{} planner ← 修复 / repair{}\n{}", at(), rest.lines().next().unwrap_or(""), indent(&diags.join("\n")));
                    }
                }
            }
            s = seen.recv() => {
                let Some(s) = s else { return Err("master tab closed".into()) };
                let f = &s.frame;
                if f["type"] != "cmd_result" {
                    continue;
                }
                let out = f["result"]["output"].as_str().unwrap_or_default();
                if f["result"]["success"] != true {
                    return Err(out.to_string());
                }
                println!("{} master ← 计划草案 / plan draft:\n{}\n", at(), indent(out));
                let id = out
                    .split_whitespace()
                    .find(|w| w.starts_with("plan-") && w.len() == 13)
                    .ok_or_else(|| format!("no draft id in: {out}"))?;
                return Ok(id.to_string());
            }
            _ = &mut deadline => return Err(format!("timed out after {timeout} s")),
        }
    }
}

/// The output of the next `cmd_result` the master sees, within `wait`.
async fn next_answer(seen: &mut mpsc::UnboundedReceiver<Seen>, wait: Duration) -> Option<String> {
    let answer = async {
        while let Some(s) = seen.recv().await {
            if s.frame["type"] == "cmd_result" {
                return s.frame["result"]["output"].as_str().map(str::to_string);
            }
        }
        None
    };
    tokio::time::timeout(wait, answer).await.ok().flatten()
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// What the master's panel would show: each node's state and tabs.
#[derive(Default)]
struct Progress {
    nodes: BTreeMap<String, (usize, String, Vec<String>)>,
    order: usize,
}

impl Progress {
    fn add(&mut self, node: &str) {
        let order = self.order;
        self.nodes
            .insert(node.to_string(), (order, "pending".into(), Vec::new()));
        self.order += 1;
    }

    fn update(&mut self, f: &Value) -> Option<String> {
        let state = f["state"].as_str().unwrap_or("?");
        let Some(node) = f["node_id"].as_str() else {
            return Some(format!(
                "运行 / run {} {state}",
                f["run_id"].as_str().unwrap_or("")
            ));
        };
        let order = self.order;
        let entry = self
            .nodes
            .entry(node.to_string())
            .or_insert_with(|| (order, "pending".into(), Vec::new()));
        if entry.0 == order {
            self.order += 1;
        }
        let detail = &f["detail"];
        let line = match state {
            "running" => format!("▶ {node} 开始 / started"),
            "sent" => {
                let tab = detail["tab"].as_str().unwrap_or("?").to_string();
                entry.2.push(tab.clone());
                format!("  {node} → {tab}")
            }
            "item_done" => format!(
                "  {node} ← {} ({} chars)",
                detail["tab"].as_str().unwrap_or("?"),
                detail["chars"]
            ),
            "item_failed" => format!("  {node} ✗ {}", detail["error"]),
            "completed" => format!("✔ {node} 完成 / completed {}", self.bar(node)),
            "failed" => format!("✘ {node} 失败 / failed: {}", detail["error"]),
            "skipped" => format!("↷ {node} 跳过 / skipped"),
            other => format!("  {node} {other}"),
        };
        if matches!(state, "running" | "completed" | "failed" | "skipped") {
            if let Some(e) = self.nodes.get_mut(node) {
                e.1 = state.to_string();
            }
        }
        Some(line)
    }

    fn bar(&self, just_done: &str) -> String {
        let total = self.nodes.len().max(1);
        let done = self
            .nodes
            .iter()
            .filter(|(id, e)| {
                id.as_str() == just_done || matches!(e.1.as_str(), "completed" | "skipped")
            })
            .count();
        let width = 20;
        let fill = done * width / total;
        format!(
            "[{}{}] {done}/{total}",
            "█".repeat(fill),
            "░".repeat(width - fill)
        )
    }

    fn tree(&self) -> String {
        let mut nodes: Vec<_> = self.nodes.iter().collect();
        nodes.sort_by_key(|(_, e)| e.0);
        let mut out = String::from("节点 / nodes:\n");
        for (i, (id, (_, state, tabs))) in nodes.iter().enumerate() {
            let branch = if i + 1 == nodes.len() {
                "└─"
            } else {
                "├─"
            };
            let tabs = if tabs.is_empty() {
                String::new()
            } else {
                format!(" ← {}", tabs.join(", "))
            };
            out.push_str(&format!("  {branch} {id:<10} {state}{tabs}\n"));
        }
        out
    }
}
