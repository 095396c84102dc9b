//! `aicard demo --agent`: a simulated master model finishes a task in several rounds of the
//! agent loop (docs/agents.md) — it asks two workers at once, runs a skill on what they said (`$R1`),
//! writes a memory, and answers — each round's results typed back into its tab by the hub.
//!
//! The master's "model" is scripted here: it reads each `deliver` the hub types into its tab
//! and writes its next turn, as a chat site's model would after the automatic send.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::sim::{chunks, Seen, SimTab};

/// What the person asks the master tab.
pub const TASK: &str = "请两位工人评审这段代码，总结他们的意见，记下结论 / have two workers review this code, summarise what they said, remember the verdict: def add(a, b): return a + b";

/// What a finished demo did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentRun {
    /// Rounds closed (results messages typed back).
    pub rounds: u32,
    /// The commands the model wrote, in order.
    pub commands: Vec<String>,
    /// The results messages the hub typed into the master tab.
    pub results: Vec<String>,
    /// The model's final answer.
    pub answer: String,
    /// Why the session ended, as the panel shows it.
    pub why: String,
}

/// The model's turn after `round` results messages (0: its answer to the person's task).
fn model_turn(round: u32, workers: &[String], last_results: &str) -> String {
    match round {
        0 => format!(
            "我先请两位工人同时评审。?<parallel to=[{}] 请评审这段代码，指出问题：def add(a, b): return a + b>!",
            workers.join(", ")
        ),
        1 => "两位都回答了。用技能把他们的意见总结成要点：?<skill summarize text=\"$R1\" words=40>!".into(),
        2 => "记下结论，以后用得上。?<memory 代码评审：add 函数正确，两位工人意见一致 tag: 评审,结论 importance=7>!".into(),
        _ => {
            // Quote what the last results said: the model read them.
            let said = last_results
                .lines()
                .find(|l| l.contains("remembered") || l.contains("已记住"))
                .unwrap_or("已记住")
                .trim()
                .to_string();
            format!("完成。?<done 结论：add 函数正确，两位工人意见一致；已写入记忆（{said}）>!")
        }
    }
}

/// A turn written by the master's model: streamed in chunks, then ended.
fn write_turn(master: &SimTab, turn: &str, text: &str) {
    for (seq, piece) in chunks(text, turn.len() as u64).into_iter().enumerate() {
        master.send(json!({"type":"chunk","turn_id":turn,"seq":seq,"text":piece}));
    }
    master.send(json!({"type":"turn_end","turn_id":turn,"text":text}));
}

/// Runs the loop from the master tab; prints progress with `t0`'s clock when `print`.
pub async fn run(
    master: &SimTab,
    seen: &mut mpsc::UnboundedReceiver<Seen>,
    workers: &[String],
    t0: Instant,
    timeout: Duration,
    print: bool,
) -> Result<AgentRun, String> {
    let say = |line: String| {
        if print {
            println!("[{:>6.2}s] {line}", t0.elapsed().as_secs_f64());
        }
    };
    master.send(json!({"type":"user_input","text":"?<agent loop on>!"}));
    let on = next_frame(seen, "cmd_result", timeout).await?;
    if on["result"]["success"] != true {
        return Err(format!("agent loop on: {}", on["result"]["output"]));
    }
    say(format!("master 输入 / the person types: {TASK}"));
    master.send(json!({"type":"user_input","text":TASK}));
    let mut run = AgentRun {
        rounds: 0,
        commands: Vec::new(),
        results: Vec::new(),
        answer: String::new(),
        why: String::new(),
    };
    let first = model_turn(0, workers, "");
    run.commands.extend(commands_of(&first));
    write_turn(master, "m0", &first);
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let frame = tokio::time::timeout_at(deadline, seen.recv())
            .await
            .map_err(|_| format!("timed out after {} s", timeout.as_secs()))?
            .ok_or("the master tab closed")?
            .frame;
        match frame["type"].as_str() {
            Some("flow_event") if frame["detail"]["kind"] == "agent" => {
                let d = &frame["detail"];
                match frame["state"].as_str() {
                    Some("running") => say(format!(
                        "round {}/{} · 运行 / running {}",
                        d["round"].as_u64().unwrap_or(0) + 1,
                        d["of"],
                        d["command"].as_str().unwrap_or("")
                    )),
                    Some("ended") => {
                        run.why = d["why"].as_str().unwrap_or("").to_string();
                        say(format!("会话结束 / session ended: {}", run.why));
                        return Ok(run);
                    }
                    Some("paused") => return Err(format!("paused: {}", d["why"])),
                    _ => {}
                }
            }
            Some("deliver") if frame["agent"].is_object() => {
                let text = frame["text"].as_str().unwrap_or("").to_string();
                run.rounds = frame["agent"]["round"].as_u64().unwrap_or(0) as u32;
                say(format!(
                    "round {} 的结果已输入并发送给总指挥 / results of round {} typed and sent into the master tab ({} chars)",
                    run.rounds,
                    run.rounds,
                    text.chars().count()
                ));
                let next = model_turn(run.rounds, workers, &text);
                run.results.push(text);
                run.commands.extend(commands_of(&next));
                if let Some(done) = next.split("?<done ").nth(1) {
                    run.answer = done.trim_end_matches(">!").trim().to_string();
                }
                write_turn(master, &format!("m{}", run.rounds), &next);
            }
            _ => {}
        }
    }
}

fn commands_of(text: &str) -> Vec<String> {
    crate::commands::scanner::scan_text(text)
        .into_iter()
        .filter_map(Result::ok)
        .map(|c| c.body.trim().to_string())
        .collect()
}

async fn next_frame(
    seen: &mut mpsc::UnboundedReceiver<Seen>,
    ty: &str,
    wait: Duration,
) -> Result<Value, String> {
    tokio::time::timeout(wait, async {
        while let Some(s) = seen.recv().await {
            if s.frame["type"] == ty {
                return Ok(s.frame);
            }
        }
        Err("the master tab closed".to_string())
    })
    .await
    .map_err(|_| format!("no {ty} in time"))?
}
