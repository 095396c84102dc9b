//! Load tool: opens N authenticated tabs against a hub and measures connect rate, RSS per idle
//! tab and fan-out latency of `task` frames. It speaks only SPEC §2 (hello, user_input with a
//! `?<send_to_all …>!` command, task, turn_end), so it can drive any hub that implements it.
//!
//! Run: `cargo bench --bench load -- --tabs 10000 --fanout 1000`
//! (spawns the release `aicard serve` on a free port; `--url`/`--token` drive another hub,
//! `--hub-pid` lets it read that hub's RSS).

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::{mpsc, Semaphore};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;

#[derive(Parser, Debug)]
#[command(about = "AIcard hub load tool")]
struct Args {
    /// Tabs to open and hold.
    #[arg(long, default_value_t = 10_000)]
    tabs: usize,
    /// Worker tabs that receive each fan-out (the others are sent elsewhere).
    #[arg(long, default_value_t = 1_000)]
    fanout: usize,
    /// Fan-out rounds to measure.
    #[arg(long, default_value_t = 20)]
    rounds: usize,
    /// Connections opened at once.
    #[arg(long, default_value_t = 256)]
    concurrency: usize,
    /// Hub to drive (ws://host:port); default: spawn the release binary.
    #[arg(long)]
    url: Option<String>,
    #[arg(long, default_value = "load-token")]
    token: String,
    /// PID of the hub when `--url` is given, to read its RSS.
    #[arg(long)]
    hub_pid: Option<u32>,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Starts `aicard serve` on port 0 and returns (child, ws base url).
async fn spawn_hub(token: &str, data: &std::path::Path) -> (tokio::process::Child, String) {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_aicard"));
    let mut child = tokio::process::Command::new(bin)
        .args(["serve", "--port", "0", "--data-dir"])
        .arg(data)
        .args(["--token", token])
        .env("RUST_LOG", "aicard=warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn aicard serve");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let url = loop {
        let line = lines
            .next_line()
            .await
            .expect("read hub stdout")
            .expect("hub printed its address");
        if let Some(rest) = line.split("listening on http://").nth(1) {
            break format!("ws://{}", rest.trim());
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, url)
}

/// One connected tab: a reader task forwards `task` frames (with arrival time) to `seen`
/// and answers them, so the hub's per-tab queue keeps moving.
async fn open_tab(
    url: String,
    token: String,
    label: String,
    seen: mpsc::UnboundedSender<(Instant, String)>,
) -> mpsc::UnboundedSender<Value> {
    let mut cfg = WebSocketConfig::default();
    cfg.read_buffer_size = 4096;
    cfg.write_buffer_size = 0;
    let (ws, _) =
        tokio_tungstenite::connect_async_with_config(format!("{url}/realtime"), Some(cfg), false)
            .await
            .expect("connect");
    let (mut sink, mut stream) = ws.split();
    let hello = json!({"type":"hello","token":token,"site":"sim","label":label});
    sink.send(Message::Text(hello.to_string().into()))
        .await
        .expect("hello");
    loop {
        match stream.next().await {
            Some(Ok(Message::Text(t))) if t.contains("\"welcome\"") => break,
            Some(Ok(_)) => continue,
            other => panic!("no welcome: {other:?}"),
        }
    }
    let (out_tx, mut out_rx) = mpsc::unbounded_channel::<Value>();
    let out = out_tx.clone();
    tokio::spawn(async move {
        while let Some(v) = out_rx.recv().await {
            if sink
                .send(Message::Text(v.to_string().into()))
                .await
                .is_err()
            {
                break;
            }
        }
    });
    tokio::spawn(async move {
        while let Some(Ok(msg)) = stream.next().await {
            let Message::Text(t) = msg else { continue };
            let Ok(v) = serde_json::from_str::<Value>(&t) else {
                continue;
            };
            if v["type"] == "task" {
                let now = Instant::now();
                let id = v["task_id"].as_str().unwrap_or_default().to_string();
                let _ = seen.send((now, label.clone()));
                let _ = out.send(json!({"type":"turn_end","turn_id":id,"text":"ok","task_id":id}));
            }
        }
    });
    out_tx
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let data = tempfile::tempdir().expect("tempdir");
    let (child, url) = match &args.url {
        Some(u) => (None, u.clone()),
        None => {
            let (c, u) = spawn_hub(&args.token, data.path()).await;
            (Some(c), u)
        }
    };
    let pid = args.hub_pid.or_else(|| child.as_ref().and_then(|c| c.id()));
    let rss_before = pid.and_then(rss_kib);
    println!("hub: {url} (pid {pid:?}), RSS before: {rss_before:?} KiB");

    // 1. Connect rate.
    let (seen_tx, mut seen_rx) = mpsc::unbounded_channel();
    let sem = Arc::new(Semaphore::new(args.concurrency));
    let started = Instant::now();
    let mut joins = Vec::with_capacity(args.tabs);
    for i in 0..args.tabs {
        let permit = sem.clone().acquire_owned().await.expect("semaphore");
        let (url, token, seen) = (url.clone(), args.token.clone(), seen_tx.clone());
        let label = if i < args.fanout {
            format!("w{i}")
        } else {
            format!("idle{i}")
        };
        joins.push(tokio::spawn(async move {
            let tab = open_tab(url, token, label, seen).await;
            drop(permit);
            tab
        }));
    }
    let mut tabs = Vec::with_capacity(args.tabs);
    for j in joins {
        tabs.push(j.await.expect("tab task"));
    }
    let connect_s = started.elapsed().as_secs_f64();
    println!(
        "connect: {} tabs in {:.2} s = {:.0} tabs/s",
        args.tabs,
        connect_s,
        args.tabs as f64 / connect_s
    );

    // 2. RSS per idle tab (after the hub settles: wait for RSS to stop growing).
    if let (Some(pid), Some(before)) = (pid, rss_before) {
        let mut last = 0;
        for _ in 0..20 {
            tokio::time::sleep(Duration::from_millis(250)).await;
            let now = rss_kib(pid).unwrap_or(0);
            if now == last {
                break;
            }
            last = now;
        }
        let per_tab = (last.saturating_sub(before) as f64 * 1024.0) / args.tabs as f64;
        println!(
            "rss: {last} KiB with {} tabs → {:.1} KiB per idle tab",
            args.tabs,
            per_tab / 1024.0
        );
    }

    // 3. Fan-out: a master tab asks `send_to_all`-style fan-out to the labelled workers.
    let master = open_tab(
        url.clone(),
        args.token.clone(),
        "load-master".into(),
        mpsc::unbounded_channel().0,
    )
    .await;
    let targets: Vec<String> = (0..args.fanout).map(|i| format!("w{i}")).collect();
    let mut all = Vec::new();
    let mut round_ms = Vec::new();
    for round in 0..args.rounds {
        let cmd = format!("?<parallel to=[{}] load round {round}>!", targets.join(","));
        let t0 = Instant::now();
        master
            .send(json!({"type":"user_input","text":cmd}))
            .expect("master send");
        let mut got = 0;
        while got < args.fanout {
            let (at, _label) = tokio::time::timeout(Duration::from_secs(30), seen_rx.recv())
                .await
                .expect("fan-out arrived in time")
                .expect("channel");
            all.push(at.duration_since(t0).as_secs_f64() * 1000.0);
            got += 1;
        }
        round_ms.push(t0.elapsed().as_secs_f64() * 1000.0);
    }
    all.sort_by(|a, b| a.total_cmp(b));
    round_ms.sort_by(|a, b| a.total_cmp(b));
    println!(
        "fan-out to {} tabs × {} rounds: per-tab latency p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; \
         whole round p50 {:.2} ms",
        args.fanout,
        args.rounds,
        percentile(&all, 0.50),
        percentile(&all, 0.99),
        all.last().copied().unwrap_or(f64::NAN),
        percentile(&round_ms, 0.50),
    );
    drop(tabs);
    drop(child);
}
