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
}

const PERSONAS: &[&str] = &["严谨", "创意", "务实", "挑剔", "乐观", "简洁"];

/// Runs the demo; the process exit code (0 when the flow completed).
pub async fn run(args: DemoArgs) -> anyhow::Result<i32> {
    let tmp = tempfile::tempdir().context("creating a temporary data dir")?;
    let mut config = HubConfig::new(tmp.path().to_path_buf());
    config.bind = ([127, 0, 0, 1], 0).into();
    config.role_cards_dir = tmp.path().join("role-cards");
    config.flows_dir = tmp.path().join("flows");
    let token = uuid::Uuid::new_v4().simple().to_string();
    config.token = Some(token.clone());
    let running = App::start(config).await?;
    running
        .hub
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
    let master = SimTab::connect(&ws, &token, master_spec, seen_tx).await?;
    let labels: Vec<&str> = workers.iter().map(|w| w.label.as_str()).collect();
    println!("标签页 / tabs: {} (workers), master", labels.join(", "));

    let mut cmd = String::from("?<manager run demo");
    if let Some(topic) = &args.topic {
        cmd.push_str(&format!(" topic=\"{}\"", topic.replace('"', "'")));
    }
    cmd.push_str(">!");
    println!("master 输入 / types: {cmd}\n");
    master.send(json!({"type": "user_input", "text": cmd}));

    let mut view = Progress::default();
    if let Ok(flow) = crate::flows::load_str("demo.yaml", DEMO_FLOW) {
        for node in &flow.nodes {
            view.add(&node.id);
        }
    }
    let mut delivered: Option<String> = None;
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
            println!(
                "完成 / done in {:.2} s: {} nodes, {} tabs, all over real WebSockets.",
                t0.elapsed().as_secs_f64(),
                view.nodes.len(),
                n + 1
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
