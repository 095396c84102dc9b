//! Load tool: opens N authenticated tabs against a hub and measures connect rate, RSS per idle
//! tab and fan-out latency of `task` frames. It speaks only docs/protocol.md (hello, user_input with a
//! `?<parallel to=[…] …>!` command, task, turn_end, cmd_result), so it can drive any hub that
//! implements it.
//!
//! Each round, a master tab sends the command; latency is taken per tab from that send to the
//! tab reading its `task`. Tabs answer once the whole round has arrived (real tabs answer
//! seconds later; `--reply-at-once` answers at once instead), and the next round starts when
//! the master has its aggregated `cmd_result`. The tool runs on one thread so that, on a
//! small machine, it takes as little CPU from the hub as it can; it prints the CPU both
//! processes used per round, which is steadier than latency on a noisy machine.
//!
//! Run: `cargo bench --bench load -- --tabs 10000 --fanout 1000`
//! (spawns the release `aicard serve` on a free port; `--url`/`--token` drive another hub,
//! `--hub-pid` lets it read that hub's RSS).
//!
//! Cluster: `cargo bench --bench load -- --nodes 3 --tabs 45000 --fanout 1000` starts a
//! nats-server (JetStream) and three `serve --cluster` hubs, and one load *agent* process per
//! hub (a copy of this tool, `--agent`), so no process holds more sockets than its file limit.
//! It measures, in the same run, a fan-out from a master on node a to 1,000 tabs on a (the
//! single-node figure) and to 1,000 tabs on b and c (cross-node), and RSS per tab per node.
//! See `benches/support/cluster_load.rs`.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;

#[path = "support/cluster_load.rs"]
mod cluster_load;
#[path = "support/floor.rs"]
mod floor;
#[path = "support/floor_server.rs"]
mod floor_server;
use floor::{cpu_ms, percentile};
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
    /// The hub binary to spawn (default: the release `aicard` cargo built beside this tool),
    /// e.g. a copy built from another commit, for before and after in one session.
    #[arg(long)]
    hub_bin: Option<PathBuf>,
    /// PID of the hub when `--url` is given, to read its RSS.
    #[arg(long)]
    hub_pid: Option<u32>,
    /// Answer each task the moment it arrives, so the hub reads 1,000 replies while it is
    /// still sending. By default replies wait until the whole round has arrived (real tabs
    /// answer seconds later), and the next round starts once the master has its result.
    #[arg(long)]
    reply_at_once: bool,
    /// Rounds run first and left out of the figures (the hub's and the tool's first fan-out
    /// grows maps, buffers and allocator pages); their times are printed apart.
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// Skip the loopback floor (`benches/loopback_floor.rs`), as many bare sockets as
    /// `--fanout`, that otherwise runs one round right before each of the hub's rounds (the
    /// two interleaved, so both see the same noise) to put the fan-out figures in proportion.
    #[arg(long)]
    no_floor: bool,
    /// Local source addresses to spread the tabs over (127.0.0.2, 127.0.0.3, …), so that more
    /// tabs than one address has ephemeral ports (about 28,000) can be opened; 0 = the
    /// kernel's choice (127.0.0.1).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=250))]
    sources: u8,
    /// Only open and hold the tabs (no floor, no rounds), until killed: with `--url`, several
    /// tool processes can then load one hub, or several hubs, past one process's file limit.
    #[arg(long)]
    hold: bool,
    /// Pad each round's prompt to about this many bytes (mixed Chinese and English text with
    /// newlines, as real prompts have); 0 = the short "load round N".
    #[arg(long, default_value_t = 0)]
    prompt_bytes: usize,
    /// Pause between rounds, in ms.
    #[arg(long, default_value_t = 100)]
    settle_ms: u64,
    /// Hubs to run as one cluster over NATS (1 = the single hub, as before).
    #[arg(long, default_value_t = 1)]
    nodes: usize,
    /// Run as a load agent: open `--tabs` tabs on `--url` labelled `PREFIX0…`, answer every
    /// task at once and print each arrival's wall-clock time (used by `--nodes`).
    #[arg(long, hide = true)]
    agent: bool,
    #[arg(long, hide = true, default_value = "w")]
    label_prefix: String,
    /// Skip the tokio + JSON floor server (`benches/support/floor_server.rs`) that otherwise
    /// takes the same load after the hub, for the hub ÷ floor ratios printed last.
    #[arg(long)]
    no_floor_server: bool,
    /// Run as the floor server (started by the tool itself).
    #[arg(long, hide = true)]
    floor_server: bool,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

/// About `bytes` of prompt text after " load round N": Chinese and English, newlines and
/// tabs (JSON-escaped on the way out), cut at a character boundary. No ASCII `"`: in a
/// command it would open a quoted argument.
fn prompt_padding(bytes: usize) -> String {
    const LINE: &str =
        "\n请审阅下面的“草稿”，列出三处问题。\tReview the draft below; list three issues.";
    let mut pad = String::with_capacity(bytes + LINE.len());
    while pad.len() < bytes {
        pad.push_str(LINE);
    }
    let mut end = bytes.min(pad.len());
    while !pad.is_char_boundary(end) {
        end -= 1;
    }
    pad.truncate(end);
    pad
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
async fn spawn_hub(
    bin: Option<&std::path::Path>,
    token: &str,
    data: &std::path::Path,
) -> (tokio::process::Child, String) {
    let bin = bin.map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_aicard")),
        PathBuf::from,
    );
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
    let url = listening_url(&mut child).await;
    (child, url)
}

/// The fields of a hub frame the load tool looks at.
#[derive(serde::Deserialize)]
struct Head<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    #[serde(default)]
    task_id: Option<&'a str>,
}

/// A `task` frame as one tab saw it.
struct Arrival {
    at: Instant,
    /// The same moment in µs since the epoch (compared across processes by `--nodes`).
    wall_us: u64,
    task_id: String,
    /// Where to send this tab's reply.
    reply: mpsc::UnboundedSender<Value>,
}

fn turn_end(task_id: &str) -> Value {
    json!({"type":"turn_end","turn_id":task_id,"text":"ok","task_id":task_id})
}

/// One connected tab, run as one task over the unsplit socket: it forwards `task` frames (with
/// their arrival time) to `seen`, answering them at once with `reply_at_once`, final
/// `cmd_result`s to `results`, and writes whatever the returned sender brings.
#[allow(clippy::too_many_arguments)]
async fn open_tab(
    url: String,
    source: Option<std::net::IpAddr>,
    token: String,
    label: String,
    seen: mpsc::UnboundedSender<Arrival>,
    results: mpsc::UnboundedSender<Value>,
    reply_at_once: bool,
) -> mpsc::UnboundedSender<Value> {
    let mut cfg = WebSocketConfig::default();
    cfg.read_buffer_size = 4096;
    cfg.write_buffer_size = 0;
    let url = format!("{url}/realtime");
    let (mut ws, _) = match source {
        None => tokio_tungstenite::connect_async_with_config(url, Some(cfg), true)
            .await
            .expect("connect"),
        Some(ip) => {
            let host = url
                .trim_start_matches("ws://")
                .split('/')
                .next()
                .expect("host:port");
            let addr: std::net::SocketAddr = tokio::net::lookup_host(host)
                .await
                .expect("resolve")
                .next()
                .expect("address");
            let sock = tokio::net::TcpSocket::new_v4().expect("socket");
            sock.bind((ip, 0).into()).expect("bind the source address");
            let tcp = sock.connect(addr).await.expect("connect");
            tcp.set_nodelay(true).expect("nodelay");
            let tcp = tokio_tungstenite::MaybeTlsStream::Plain(tcp);
            tokio_tungstenite::client_async_with_config(url, tcp, Some(cfg))
                .await
                .expect("handshake")
        }
    };
    let hello = json!({"type":"hello","token":token,"site":"sim","label":label});
    ws.send(Message::Text(hello.to_string().into()))
        .await
        .expect("hello");
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(t))) if t.contains("\"welcome\"") => break,
            Some(Ok(_)) => continue,
            other => panic!("no welcome: {other:?}"),
        }
    }
    // One task per tab, the socket unsplit: it reads frames and writes what `out` brings.
    let (out, mut out_rx) = mpsc::unbounded_channel::<Value>();
    let reply = out.clone();
    tokio::spawn(async move {
        loop {
            let msg = tokio::select! {
                biased;
                msg = ws.next() => match msg {
                    Some(Ok(Message::Text(t))) => t,
                    Some(Ok(_)) => continue,
                    _ => return,
                },
                v = out_rx.recv() => {
                    let Some(v) = v else { return };
                    if ws.send(Message::Text(v.to_string().into())).await.is_err() {
                        return;
                    }
                    continue;
                }
            };
            let at = Instant::now();
            let wall_us = cluster_load::wall_us();
            // Only the type and task id matter here; a borrowed head skips the rest cheaply.
            let Ok(head) = serde_json::from_str::<Head>(&msg) else {
                continue;
            };
            if head.kind == "task" {
                let task_id = head.task_id.unwrap_or_default().to_string();
                if reply_at_once
                    && ws
                        .send(Message::Text(turn_end(&task_id).to_string().into()))
                        .await
                        .is_err()
                {
                    return;
                }
                let _ = seen.send(Arrival {
                    at,
                    wall_us,
                    task_id,
                    reply: reply.clone(),
                });
            } else if head.kind == "cmd_result" {
                // Live output is a separate `cmd_output` frame: a `cmd_result` is the answer.
                let Ok(v) = serde_json::from_str::<Value>(&msg) else {
                    continue;
                };
                let _ = results.send(v);
            }
        }
    });
    out
}

/// The load tool's own allocator is the hub's (mimalloc), because the tool also runs the
/// floor server (`--floor-server`, started by this binary as a child process), which must be
/// built like the hub. The tool itself keeps mimalloc's default options; the floor server's
/// process gets the hub's through the environment.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let args = Args::parse();
    if args.floor_server {
        return floor_server::run(args.token);
    }
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(tool(args));
}

/// Starts this binary as the floor server (`benches/support/floor_server.rs`) on a free port,
/// with the hub's allocator options, and returns (child, ws base url).
async fn spawn_floor_server(token: &str) -> (tokio::process::Child, String) {
    let me = std::env::current_exe().expect("the load tool's path");
    let mut child = tokio::process::Command::new(me)
        .args(["--floor-server", "--token", token])
        .env("MIMALLOC_PURGE_DELAY", "0")
        .env("MIMALLOC_ARENA_EAGER_COMMIT", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the floor server");
    let url = listening_url(&mut child).await;
    (child, url)
}

/// Reads a server's stdout up to its `listening on http://ADDR` line; the rest is drained.
async fn listening_url(child: &mut tokio::process::Child) -> String {
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let url = loop {
        let line = lines
            .next_line()
            .await
            .expect("read the server's stdout")
            .expect("the server printed its address");
        if let Some(rest) = line.split("listening on http://").nth(1) {
            break format!("ws://{}", rest.trim());
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    url
}

/// What one server did under the load (the figures `drive` prints).
#[derive(Default)]
struct Figures {
    rss_per_idle_tab_kib: Option<f64>,
    /// Every tab's latency in every counted round, ms, sorted.
    latencies: Vec<f64>,
    /// Server CPU per task until the last tab had it, and over the whole round, µs.
    cpu_until_last_us: f64,
    cpu_round_us: f64,
    /// The interleaved loopback floor's latencies, every socket in every counted round, ms,
    /// sorted (empty without a floor).
    floor_latencies: Vec<f64>,
    /// Per counted round: the server's per-tab p99 ÷ the floor round's per-socket p99.
    round_p99_ratios: Vec<f64>,
    /// The floor's CPU per message (its sender and receiver threads), µs.
    floor_cpu_us_per_message: f64,
}

async fn tool(mut args: Args) {
    if args.agent {
        return cluster_load::agent(&args).await;
    }
    if !args.bench {
        // Run by `cargo test --all-targets`: a small smoke run that proves the tool works.
        args.tabs = args.tabs.min(50);
        args.fanout = args.fanout.min(20);
        args.rounds = args.rounds.min(2);
    }
    if args.nodes > 1 {
        return cluster_load::run(&args).await;
    }
    // 0. The floor: the same fan-out through bare loopback sockets, opened before the hub;
    // `drive` runs one of its rounds right before each of the hub's.
    let mut floor = (!args.no_floor && !args.hold).then(|| {
        floor::Rig::open(
            args.fanout,
            std::thread::available_parallelism().map_or(2, |n| n.get()),
            300,
        )
    });
    let data = tempfile::tempdir().expect("tempdir");
    let (child, url) = match &args.url {
        Some(u) => (None, u.clone()),
        None => {
            let (c, u) = spawn_hub(args.hub_bin.as_deref(), &args.token, data.path()).await;
            (Some(c), u)
        }
    };
    let pid = args.hub_pid.or_else(|| child.as_ref().and_then(|c| c.id()));
    println!("hub: {url} (pid {pid:?})");
    let hub = drive(&args, &url, pid, floor.as_mut()).await;
    // The hub's sockets close with it, before the floor server takes the same load.
    drop(child);
    print_against_floor("this fan-out", &hub);
    if args.no_floor_server {
        return;
    }
    // 4. The tokio + JSON floor server, same tool, same load, same run.
    let (server, url) = spawn_floor_server(&args.token).await;
    println!("floor server: {url} (pid {:?})", server.id());
    // The loopback floor's rounds interleave with the floor server's too: how close a
    // minimal tokio + WebSocket + JSON server comes to the bare kernel, in the same run.
    let fl = drive(&args, &url, server.id(), floor.as_mut()).await;
    drop(server);
    drop(floor);
    print_against_floor("the floor server's fan-out", &fl);
    println!(
        "hub ÷ tokio + JSON floor server, same load: whole-round CPU per task {:.1} / {:.1} µs = \
         {:.2}×; until the last tab had its task {:.1} / {:.1} µs = {:.2}×; RSS per idle tab \
         {} / {} KiB; per-tab p99 {:.2} / {:.2} ms",
        hub.cpu_round_us,
        fl.cpu_round_us,
        hub.cpu_round_us / fl.cpu_round_us,
        hub.cpu_until_last_us,
        fl.cpu_until_last_us,
        hub.cpu_until_last_us / fl.cpu_until_last_us,
        hub.rss_per_idle_tab_kib
            .map_or("?".into(), |k| format!("{k:.1}")),
        fl.rss_per_idle_tab_kib
            .map_or("?".into(), |k| format!("{k:.1}")),
        percentile(&hub.latencies, 0.99),
        percentile(&fl.latencies, 0.99),
    );
}

/// Prints `server`'s fan-out p99 against the loopback floor rounds that ran interleaved with
/// its own rounds (nothing without a floor).
fn print_against_floor(what: &str, server: &Figures) {
    if server.floor_latencies.is_empty() {
        return;
    }
    let floor_p99 = percentile(&server.floor_latencies, 0.99);
    let mut ratios = server.round_p99_ratios.clone();
    ratios.sort_by(|a, b| a.total_cmp(b));
    println!(
        "loopback floor (bare TCP, no server; one round right before each server round): \
         per-socket p50 {:.2} ms, p99 {:.2} ms, {:.1} µs of CPU per message → {what}'s p99 is \
         {:.2}× the floor (p99 of every tab in every counted round ÷ p99 of every socket in the \
         floor rounds); per round, server p99 ÷ floor p99: median {:.2}×, min {:.2}×, max {:.2}×",
        percentile(&server.floor_latencies, 0.50),
        floor_p99,
        server.floor_cpu_us_per_message,
        percentile(&server.latencies, 0.99) / floor_p99,
        percentile(&ratios, 0.50),
        ratios.first().copied().unwrap_or(f64::NAN),
        ratios.last().copied().unwrap_or(f64::NAN),
    );
}

/// Opens the tabs on the server at `url`, measures its RSS per idle tab (with `pid`), runs the
/// rounds and prints what it measured. With a floor `rig`, one loopback floor round runs
/// right before each of the server's rounds (warm-up rounds too, left out alike).
async fn drive(
    args: &Args,
    url: &str,
    pid: Option<u32>,
    mut rig: Option<&mut floor::Rig>,
) -> Figures {
    let mut figures = Figures::default();
    let url = url.to_string();
    let rss_before = pid.and_then(rss_kib);
    println!("RSS before any tab: {rss_before:?} KiB");
    // 1. Connect rate.
    let (seen_tx, mut seen_rx) = mpsc::unbounded_channel::<Arrival>();
    let (results_tx, mut results_rx) = mpsc::unbounded_channel::<Value>();
    let sem = Arc::new(Semaphore::new(args.concurrency));
    let started = Instant::now();
    let mut joins = Vec::with_capacity(args.tabs);
    for i in 0..args.tabs {
        let permit = sem.clone().acquire_owned().await.expect("semaphore");
        let (url, token, seen, results) = (
            url.clone(),
            args.token.clone(),
            seen_tx.clone(),
            results_tx.clone(),
        );
        let reply_at_once = args.reply_at_once;
        let source = (args.sources > 0)
            .then(|| std::net::IpAddr::from([127, 0, 0, 2 + (i % args.sources as usize) as u8]));
        let label = if i < args.fanout {
            format!("w{i}")
        } else {
            format!("idle{i}")
        };
        joins.push(tokio::spawn(async move {
            let tab = open_tab(url, source, token, label, seen, results, reply_at_once).await;
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
        figures.rss_per_idle_tab_kib = Some(per_tab / 1024.0);
    }

    // 3. Fan-out: a master tab asks `send_to_all`-style fan-out to the labelled workers.
    if args.hold {
        println!("holding {} tabs until killed", tabs.len());
        std::future::pending::<()>().await;
    }
    let master = open_tab(
        url.clone(),
        None,
        args.token.clone(),
        "load-master".into(),
        mpsc::unbounded_channel().0,
        results_tx.clone(),
        false,
    )
    .await;
    let targets: Vec<String> = (0..args.fanout).map(|i| format!("w{i}")).collect();
    let mut all = Vec::new();
    let mut round_ms = Vec::new();
    let (mut hub_cpu, mut tool_cpu) = (0.0, 0.0);
    // The same, from the command to the master's aggregated result: the replies' handling
    // and the answer's delivery too.
    let (mut hub_round_cpu, mut tool_round_cpu) = (0.0, 0.0);
    let pad = prompt_padding(args.prompt_bytes);
    let me = std::process::id();
    let mut warmup_ms = Vec::new();
    for round in 0..args.warmup + args.rounds {
        let counted = round >= args.warmup;
        // The floor's round first, blocking this thread (the tabs are idle meanwhile).
        let floor_round = rig.as_mut().map(|rig| {
            let c0 = cpu_ms(me);
            let mut ms = rig.round();
            if let (Some(a), Some(b)) = (c0, cpu_ms(me)) {
                if counted {
                    figures.floor_cpu_us_per_message +=
                        (b - a) * 1000.0 / args.rounds.max(1) as f64 / args.fanout.max(1) as f64;
                }
            }
            ms.sort_by(|a, b| a.total_cmp(b));
            ms
        });
        let cpu0 = (pid.and_then(cpu_ms), cpu_ms(me));
        let cmd = format!(
            "?<parallel to=[{}] load round {round}{pad}>!",
            targets.join(",")
        );
        let t0 = Instant::now();
        master
            .send(json!({"type":"user_input","text":cmd}))
            .expect("master send");
        let mut arrivals = Vec::with_capacity(args.fanout);
        let deadline = tokio::time::sleep(Duration::from_secs(30));
        tokio::pin!(deadline);
        while arrivals.len() < args.fanout {
            tokio::select! {
                biased;
                n = seen_rx.recv_many(&mut arrivals, args.fanout) => assert!(n > 0, "tabs ended"),
                _ = &mut deadline => panic!(
                    "round {round}: {} of {} tasks arrived in 30 s", arrivals.len(), args.fanout
                ),
            }
        }
        let elapsed = t0.elapsed().as_secs_f64() * 1000.0;
        let (hub1, tool1) = (pid.and_then(cpu_ms), cpu_ms(me));
        if counted {
            let mut this: Vec<f64> = arrivals
                .iter()
                .map(|a| a.at.duration_since(t0).as_secs_f64() * 1000.0)
                .collect();
            this.sort_by(|a, b| a.total_cmp(b));
            if let Some(fl) = floor_round {
                figures
                    .round_p99_ratios
                    .push(percentile(&this, 0.99) / percentile(&fl, 0.99));
                figures.floor_latencies.extend(fl);
            }
            all.extend(this);
            round_ms.push(elapsed);
            if let (Some(h0), Some(h1)) = (cpu0.0, hub1) {
                hub_cpu += h1 - h0;
            }
            if let (Some(t0), Some(t1)) = (cpu0.1, tool1) {
                tool_cpu += t1 - t0;
            }
        } else {
            warmup_ms.push(format!("{elapsed:.1}"));
        }
        if !args.reply_at_once {
            for a in &arrivals {
                let _ = a.reply.send(turn_end(&a.task_id));
            }
        }
        // The round is over when the master has the aggregated answer.
        let result = tokio::time::timeout(Duration::from_secs(30), results_rx.recv())
            .await
            .expect("master got its result in time")
            .expect("channel");
        let (hub2, tool2) = (pid.and_then(cpu_ms), cpu_ms(me));
        if counted {
            if let (Some(h0), Some(h2)) = (cpu0.0, hub2) {
                hub_round_cpu += h2 - h0;
            }
            if let (Some(t0), Some(t2)) = (cpu0.1, tool2) {
                tool_round_cpu += t2 - t0;
            }
        }
        assert_eq!(
            result["result"]["success"], true,
            "round {round} failed: {result}"
        );
        // Let the hub finish the round's tail (acks, the master's answer) so the next
        // round's figures are the fan-out alone.
        tokio::time::sleep(Duration::from_millis(args.settle_ms)).await;
    }
    // A tab that had tasks should be back to what an idle tab costs (buffers let go).
    if let (Some(pid), Some(before)) = (pid, rss_before) {
        if let Some(now) = rss_kib(pid) {
            println!(
                "rss after the rounds: {now} KiB → {:.1} KiB per tab",
                now.saturating_sub(before) as f64 / args.tabs as f64
            );
        }
    }
    all.sort_by(|a, b| a.total_cmp(b));
    let in_order: Vec<String> = round_ms.iter().map(|ms| format!("{ms:.1}")).collect();
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
    println!(
        "arrival spread (ms after the command): first {:.2}, p10 {:.2}, p50 {:.2}, p90 {:.2}, p99 {:.2}",
        all.first().copied().unwrap_or(f64::NAN),
        percentile(&all, 0.10),
        percentile(&all, 0.50),
        percentile(&all, 0.90),
        percentile(&all, 0.99),
    );
    println!(
        "whole rounds in order (ms): {}; warm-up, not counted: {}",
        in_order.join(" "),
        if warmup_ms.is_empty() {
            "none".to_string()
        } else {
            warmup_ms.join(" ")
        }
    );
    let rounds = args.rounds.max(1) as f64;
    figures.cpu_until_last_us = hub_cpu / rounds / args.fanout.max(1) as f64 * 1000.0;
    figures.cpu_round_us = hub_round_cpu / rounds / args.fanout.max(1) as f64 * 1000.0;
    println!(
        "CPU per round until the last tab had its task: server {:.2} ms ({:.1} µs per task), \
         load tool {:.2} ms",
        hub_cpu / rounds,
        hub_cpu / rounds / args.fanout.max(1) as f64 * 1000.0,
        tool_cpu / rounds,
    );
    println!(
        "CPU per whole round (tasks out, replies in, the master's result): server {:.2} ms \
         ({:.1} µs per task), load tool {:.2} ms; prompt {} bytes",
        hub_round_cpu / rounds,
        hub_round_cpu / rounds / args.fanout.max(1) as f64 * 1000.0,
        tool_round_cpu / rounds,
        "load round 0".len() + pad.len(),
    );
    figures.latencies = all;
    figures.floor_latencies.sort_by(|a, b| a.total_cmp(b));
    drop(tabs);
    figures
}
