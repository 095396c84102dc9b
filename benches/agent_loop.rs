//! The agent loop's cost (docs/agents.md, issue 30): the real hub (`aicard serve --agent-gap 0-0`)
//! on a port, a looping master tab scripted over a real WebSocket, and a worker.
//!
//! - **last threshold → deliver**: each round the tab streams a command (it runs as it
//!   arrives), waits for its `cmd_result`, then ends the turn; the time from that `turn_end`
//!   (the last of the two thresholds) to the `deliver` frame, median and p99;
//! - **hub CPU per round**: utime + stime of the hub process (`/proc/PID/stat`) over the
//!   rounds, divided by the rounds;
//! - **routing while a loop runs**: a second master asks the worker (`?<to w: …>!`) one at a
//!   time; the time from its `user_input` to the worker's `task` frame, idle and while the
//!   loop runs, median and p99, and the ratio.
//!
//! `nice cargo bench --bench agent_loop` (`-- --rounds N --asks N` to change the counts).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use clap::Parser;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

const TOKEN: &str = "agent-loop-bench";
const WAIT: Duration = Duration::from_secs(20);

#[derive(Parser, Debug)]
#[command(about = "the agent loop: last threshold to deliver, hub CPU per round, routing")]
struct Args {
    /// Rounds of the looping tab.
    #[arg(long, default_value_t = 300)]
    rounds: usize,
    /// Plain asks in each routing phase (idle, and while the loop runs).
    #[arg(long, default_value_t = 200)]
    asks: usize,
    /// Passed by `cargo bench`; without it (`cargo test --all-targets`) a short smoke run.
    #[arg(long, hide = true)]
    bench: bool,
}

/// Starts `aicard serve` on port 0; returns (child, ws url).
async fn spawn_hub(data: &std::path::Path) -> (tokio::process::Child, String) {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_aicard"));
    let mut child = tokio::process::Command::new(bin)
        .args(["serve", "--port", "0", "--token", TOKEN])
        .args(["--agent-gap", "0-0", "--agent-max-rounds", "1000"])
        .arg("--data-dir")
        .arg(data)
        .arg("--flows")
        .arg(data.join("flows"))
        .arg("--role-cards")
        .arg(data.join("role-cards"))
        .arg("--skills")
        .arg(data.join("skills"))
        .env("RUST_LOG", "aicard=warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn aicard serve");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let url = loop {
        let line = lines
            .next_line()
            .await
            .expect("read hub stdout")
            .expect("hub printed its address");
        if let Some(rest) = line.split("listening on http://").nth(1) {
            break format!("ws://{}/realtime", rest.trim());
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, url)
}

/// One tab: frames in (with their arrival time), frames out.
struct Tab {
    out: mpsc::UnboundedSender<Value>,
    frames: mpsc::UnboundedReceiver<(Instant, Value)>,
}

impl Tab {
    /// Connects; a worker answers every `task` at once (a turn with its id) and reports it.
    async fn open(url: &str, label: &str, role: &str) -> Tab {
        let (ws, _) = tokio_tungstenite::connect_async(url)
            .await
            .expect("connect");
        let (mut sink, mut stream) = ws.split();
        let hello = json!({"type":"hello","token":TOKEN,"site":"sim","label":label,"role":role});
        sink.send(Message::Text(hello.to_string().into()))
            .await
            .expect("hello");
        let (out, mut out_rx) = mpsc::unbounded_channel::<Value>();
        let (frames_tx, frames) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Some(v) = out_rx.recv().await {
                if sink
                    .send(Message::Text(v.to_string().into()))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        });
        let answer = (role == "worker").then(|| out.clone());
        tokio::spawn(async move {
            while let Some(Ok(msg)) = stream.next().await {
                let at = Instant::now();
                let Message::Text(t) = msg else { continue };
                let Ok(v) = serde_json::from_str::<Value>(&t) else {
                    continue;
                };
                if let (Some(a), "task") = (&answer, v["type"].as_str().unwrap_or("")) {
                    let id = v["task_id"].as_str().unwrap_or_default();
                    let _ = a.send(json!({"type":"turn_end","turn_id":format!("turn-{id}"),"text":"pong","task_id":id}));
                }
                if frames_tx.send((at, v)).is_err() {
                    return;
                }
            }
        });
        let mut tab = Tab { out, frames };
        tab.next("welcome").await;
        tab
    }

    fn send(&self, v: Value) {
        self.out.send(v).expect("tab open");
    }

    /// The next frame of type `ty`, with its arrival time.
    async fn next(&mut self, ty: &str) -> (Instant, Value) {
        tokio::time::timeout(WAIT, async {
            loop {
                let (at, v) = self.frames.recv().await.expect("tab open");
                if v["type"] == ty {
                    return (at, v);
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no `{ty}` frame within {WAIT:?}"))
    }
}

/// utime + stime of `pid`, in clock ticks (`/proc/PID/stat` fields 14 and 15).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/PID/stat");
    // The command name may hold spaces: fields are counted after its closing parenthesis.
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().expect("utime") + f[12].parse::<u64>().expect("stime")
}

fn ticks_per_second() -> f64 {
    // SAFETY: sysconf reads a constant of the system; no memory is touched.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// (median, p99) in milliseconds.
fn summary(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    let at = |q: f64| {
        let i = ((v.len() as f64 - 1.0) * q).round() as usize;
        v[i].as_secs_f64() * 1000.0
    };
    (at(0.5), at(0.99))
}

/// `n` plain asks from `asker` to the worker, one at a time: user_input → the worker's task.
async fn route(asker: &mut Tab, worker: &mut Tab, n: usize, tag: &str) -> Vec<Duration> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let t0 = Instant::now();
        asker.send(json!({"type":"user_input","text":format!("?<to w: {tag} {i}>!")}));
        let (at, _) = worker.next("task").await;
        out.push(at - t0);
        let (_, r) = asker.next("cmd_result").await;
        assert_eq!(r["result"]["success"], true, "{r}");
    }
    out
}

/// `rounds` rounds of the looping tab; returns (last threshold → deliver) per round.
async fn run_loop(m: &mut Tab, rounds: usize) -> Vec<Duration> {
    let mut out = Vec::with_capacity(rounds);
    for r in 0..rounds {
        let turn = format!("bench-{r}");
        // A new command each round (the repeat guard stops a 4th same command).
        let text = format!("round {r} ?<memory search bench{r}>!");
        m.send(json!({"type":"chunk","turn_id":turn,"seq":0,"text":text}));
        let (_, res) = m.next("cmd_result").await;
        assert_eq!(res["result"]["success"], true, "{res}");
        let t0 = Instant::now();
        m.send(json!({"type":"turn_end","turn_id":turn,"text":text}));
        let (at, d) = m.next("deliver").await;
        assert_eq!(d["agent"]["round"], r + 1, "{d}");
        out.push(at - t0);
    }
    out
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = Args::parse();
    if !args.bench {
        // Run by `cargo test --all-targets`: a few rounds prove the tool works.
        args.rounds = args.rounds.min(10);
        args.asks = args.asks.min(10);
    }
    // Both phases share one session, under the hub's cap of 1,000 rounds.
    assert!(args.rounds * 2 < 1000, "--rounds at most 499");
    let dir = tempfile::tempdir().expect("tempdir");
    let (hub, url) = spawn_hub(dir.path()).await;
    let pid = hub.id().expect("hub pid");
    let mut worker = Tab::open(&url, "w", "worker").await;
    let mut asker = Tab::open(&url, "p", "master").await;
    let mut m = Tab::open(&url, "m", "master").await;
    m.send(json!({"type":"user_input","text":"?<agent loop on>!"}));
    let (_, on) = m.next("cmd_result").await;
    assert_eq!(on["result"]["success"], true, "{on}");

    // Warm-up, then routing idle.
    route(&mut asker, &mut worker, 20, "warm").await;
    let idle = route(&mut asker, &mut worker, args.asks, "idle").await;

    // The loop alone: latency and CPU.
    let c0 = cpu_ticks(pid);
    let t0 = Instant::now();
    let lat = run_loop(&mut m, args.rounds).await;
    let wall = t0.elapsed();
    let cpu_s = (cpu_ticks(pid) - c0) as f64 / ticks_per_second();

    // Routing while the loop runs (on its own task, its tab moved there).
    let busy_rounds = args.rounds;
    let looping = tokio::spawn(async move {
        let mut m = m;
        // Its session goes on: round numbers continue after the first phase.
        let mut out = 0;
        for r in 0..busy_rounds {
            let turn = format!("busy-{r}");
            let text = format!("busy {r} ?<memory search busy{r}>!");
            m.send(json!({"type":"chunk","turn_id":turn,"seq":0,"text":text}));
            m.next("cmd_result").await;
            m.send(json!({"type":"turn_end","turn_id":turn,"text":text}));
            m.next("deliver").await;
            out += 1;
        }
        out
    });
    let busy = route(&mut asker, &mut worker, args.asks, "busy").await;
    let busy_done = looping.await.expect("loop task");

    let (lat_med, lat_p99) = summary(lat);
    let (idle_med, idle_p99) = summary(idle);
    let (busy_med, busy_p99) = summary(busy);
    println!(
        "agent loop bench: {} rounds, {} asks per phase, --agent-gap 0-0",
        args.rounds, args.asks
    );
    println!("last threshold (turn_end after the result) -> deliver: median {lat_med:.3} ms, p99 {lat_p99:.3} ms");
    println!(
        "hub CPU: {:.3} ms per round ({cpu_s:.2} s over {} rounds in {:.2} s wall)",
        cpu_s * 1000.0 / args.rounds as f64,
        args.rounds,
        wall.as_secs_f64()
    );
    println!("routing idle: median {idle_med:.3} ms, p99 {idle_p99:.3} ms");
    println!("routing while a loop runs ({busy_done} rounds meanwhile): median {busy_med:.3} ms, p99 {busy_p99:.3} ms");
    println!(
        "ratio busy/idle: median {:.2}, p99 {:.2}",
        busy_med / idle_med,
        busy_p99 / idle_p99
    );
}
