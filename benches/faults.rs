//! Fault injection: the real hub (`aicard serve`) runs concurrent flows for simulated tabs and
//! is SIGKILLed at random points; the tabs reconnect with jittered backoff (some 1–3 s late)
//! to each new hub on the same data directory. At the end it checks, per run, against the
//! store: the run completed, its result reached its master exactly once (distinct
//! `deliver_id`; repeats are deduplicated the way the userscript does), no step that had
//! completed was sent again, and no answer was lost. Seeded; exits non-zero when an
//! invariant breaks.
//!
//! Short (CI): `cargo bench --bench faults -- --kills 5 --seed 1`
//! Long: `cargo bench --bench faults -- --kills 100 --seed 1` (figures in docs/reliability.md)

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use futures_util::{SinkExt, StreamExt};
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::Message;

const TOKEN: &str = "fault-token";

const FLOW: &str = r#"
name: chain
nodes:
  - id: a
    to: role:worker
    prompt: "alpha"
  - id: b
    needs: a
    to: role:worker
    prompt: "beta after ${a.output}"
  - id: out
    needs: b
    to: master
    prompt: "${b.output}"
"#;

#[derive(Parser, Debug)]
#[command(about = "SIGKILL the hub during concurrent flows and check what the tabs saw")]
struct Args {
    /// How many times the hub is killed.
    #[arg(long, default_value_t = 5)]
    kills: usize,
    /// Seed of every random choice (printed; default: from the clock).
    #[arg(long)]
    seed: Option<u64>,
    /// Master tabs (each starts a run in every hub lifetime).
    #[arg(long, default_value_t = 3)]
    masters: usize,
    /// Worker tabs.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Passed by `cargo bench`; without it (`cargo test --all-targets`) one kill only.
    #[arg(long, hide = true)]
    bench: bool,
}

/// What every simulated tab saw, shared with the checker.
#[derive(Default)]
struct Seen {
    /// run id → deliver_id → how many deliver frames carried it.
    delivers: HashMap<String, BTreeMap<String, usize>>,
    /// Deliver frames of a run without a deliver_id.
    untagged: HashMap<String, usize>,
    /// (run, node) the master was told had completed.
    completed: HashSet<(String, String)>,
    /// Tasks for a (run, node) that had already completed.
    resent: Vec<String>,
}

type Shared = Arc<Mutex<Seen>>;

fn lock(s: &Shared) -> std::sync::MutexGuard<'_, Seen> {
    s.lock().unwrap_or_else(|p| p.into_inner())
}

/// The hub process.
struct HubProc {
    child: tokio::process::Child,
}

impl HubProc {
    /// Starts `aicard serve --port 0` and returns it with its `ws://host:port`.
    async fn start(data: &Path, flows: &Path) -> anyhow::Result<(HubProc, String)> {
        let bin = PathBuf::from(env!("CARGO_BIN_EXE_aicard"));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(data.join("hub.log"))?;
        let mut child = tokio::process::Command::new(bin)
            .args(["serve", "--port", "0", "--token", TOKEN, "--data-dir"])
            .arg(data)
            .arg("--flows")
            .arg(flows)
            .arg("--role-cards")
            .arg(data.join("no-cards"))
            .env("RUST_LOG", "aicard=warn")
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
        let mut lines = BufReader::new(stdout).lines();
        let url = tokio::time::timeout(Duration::from_secs(20), async {
            while let Some(line) = lines.next_line().await? {
                if let Some(rest) = line.split("listening on http://").nth(1) {
                    return Ok(format!("ws://{}/realtime", rest.trim()));
                }
            }
            anyhow::bail!("the hub exited before it listened")
        })
        .await??;
        // Keep reading so that the hub never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok((HubProc { child }, url))
    }

    async fn kill9(mut self) {
        let _ = self.child.start_kill(); // SIGKILL
        let _ = self.child.wait().await;
    }
}

/// How a simulated tab behaves.
#[derive(Clone)]
struct TabSpec {
    label: String,
    role: &'static str,
    seed: u64,
}

/// A tab that connects to whichever hub `url` names, reconnecting after every loss.
/// Masters take `cmds` (typed commands); workers answer tasks after a short delay.
async fn tab(
    spec: TabSpec,
    mut url: watch::Receiver<String>,
    mut cmds: mpsc::UnboundedReceiver<String>,
    seen: Shared,
) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(spec.seed);
    let mut client_id: Option<String> = None;
    loop {
        let target = url.borrow_and_update().clone();
        let Ok(Ok((ws, _))) = tokio::time::timeout(
            Duration::from_secs(2),
            tokio_tungstenite::connect_async(target.as_str()),
        )
        .await
        else {
            backoff(&mut rng, &mut url).await;
            continue;
        };
        let (mut sink, mut stream) = ws.split();
        let mut hello = json!({"type":"hello","token":TOKEN,"site":"sim",
            "label":spec.label,"role":spec.role});
        if let Some(id) = &client_id {
            hello["client_id"] = json!(id);
        }
        if sink
            .send(Message::Text(hello.to_string().into()))
            .await
            .is_err()
        {
            backoff(&mut rng, &mut url).await;
            continue;
        }
        let (out_tx, mut out_rx) = mpsc::unbounded_channel::<Value>();
        let writer = tokio::spawn(async move {
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
        loop {
            let msg = tokio::select! {
                m = stream.next() => m,
                Some(cmd) = cmds.recv() => {
                    let _ = out_tx.send(json!({"type":"user_input","text":cmd}));
                    continue;
                }
            };
            let Some(Ok(msg)) = msg else { break };
            let Message::Text(text) = msg else { continue };
            let Ok(v) = serde_json::from_str::<Value>(&text) else {
                continue;
            };
            match v["type"].as_str() {
                Some("welcome") => {
                    if let Some(id) = v["client_id"].as_str() {
                        client_id = Some(id.to_string());
                    }
                }
                Some("task") => {
                    let run = v["run_id"].as_str().unwrap_or_default().to_string();
                    let node = v["node_id"].as_str().unwrap_or_default().to_string();
                    let task_id = v["task_id"].as_str().unwrap_or_default().to_string();
                    {
                        let mut s = lock(&seen);
                        if s.completed.contains(&(run.clone(), node.clone())) {
                            s.resent.push(task_id.clone());
                        }
                    }
                    let prompt = v["prompt"].as_str().unwrap_or_default().to_string();
                    let delay = Duration::from_millis(rng.random_range(20..250));
                    let out = out_tx.clone();
                    let label = spec.label.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(delay).await;
                        let text =
                            format!("{label}: {}", prompt.chars().take(60).collect::<String>());
                        let turn = format!("t-{task_id}");
                        let _ = out.send(
                            json!({"type":"task_update","task_id":task_id,"state":"accepted"}),
                        );
                        let _ = out.send(
                            json!({"type":"turn_end","turn_id":turn,"text":text,"task_id":task_id}),
                        );
                    });
                }
                Some("deliver") => {
                    let run = v["run_id"].as_str().unwrap_or_default().to_string();
                    let mut s = lock(&seen);
                    match v["deliver_id"].as_str() {
                        Some(id) => {
                            *s.delivers
                                .entry(run)
                                .or_default()
                                .entry(id.to_string())
                                .or_default() += 1
                        }
                        None => *s.untagged.entry(run).or_default() += 1,
                    }
                }
                Some("flow_event") if v["state"] == "completed" => {
                    if let (Some(run), Some(node)) = (v["run_id"].as_str(), v["node_id"].as_str()) {
                        lock(&seen)
                            .completed
                            .insert((run.to_string(), node.to_string()));
                    }
                }
                _ => {}
            }
        }
        writer.abort();
        backoff(&mut rng, &mut url).await;
    }
}

/// Jittered reconnect delay: 50–400 ms, and one time in five 1–3 s (a late tab). Cut short
/// when the hub's address changes (a new hub is up).
async fn backoff(rng: &mut rand::rngs::StdRng, url: &mut watch::Receiver<String>) {
    let ms = if rng.random_bool(0.2) {
        rng.random_range(1000..3000)
    } else {
        rng.random_range(50..400)
    };
    let late = ms >= 1000;
    let sleep = tokio::time::sleep(Duration::from_millis(ms));
    if late {
        // A late tab stays away its whole delay, even when the hub is back.
        sleep.await;
    } else {
        tokio::select! {
            _ = sleep => {}
            _ = url.changed() => {}
        }
    }
}

#[tokio::main]
async fn main() {
    let mut args = Args::parse();
    if !args.bench {
        // Run by `cargo test --all-targets`: one kill proves the tool works.
        args.kills = args.kills.min(1);
    }
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    println!(
        "faults: seed {seed}, {} kills, {} masters, {} workers",
        args.kills, args.masters, args.workers
    );
    match run(&args, seed).await {
        Ok(true) => println!("faults: ok (seed {seed})"),
        Ok(false) => {
            println!("faults: INVARIANT BROKEN (seed {seed})");
            std::process::exit(1);
        }
        Err(e) => {
            println!("faults: error: {e:#} (seed {seed})");
            std::process::exit(2);
        }
    }
}

async fn run(args: &Args, seed: u64) -> anyhow::Result<bool> {
    let started = Instant::now();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir()?;
    let data = dir.path().join("data");
    let flows = dir.path().join("flows");
    std::fs::create_dir_all(&flows)?;
    std::fs::create_dir_all(&data)?;
    std::fs::write(flows.join("chain.yaml"), FLOW)?;

    let (mut hub, url) = HubProc::start(&data, &flows).await?;
    let (url_tx, url_rx) = watch::channel(url);
    let seen: Shared = Arc::default();
    let mut masters = Vec::new();
    let mut tabs = Vec::new();
    for i in 0..args.masters + args.workers {
        let (tx, rx) = mpsc::unbounded_channel();
        let spec = TabSpec {
            label: if i < args.masters {
                format!("m{i}")
            } else {
                format!("w{i}")
            },
            role: if i < args.masters { "master" } else { "worker" },
            seed: rng.random(),
        };
        if i < args.masters {
            masters.push(tx);
        }
        tabs.push(tokio::spawn(tab(spec, url_rx.clone(), rx, seen.clone())));
    }
    let mut runs_asked = 0;
    let mut lifetimes = Vec::new();
    for kill in 0..=args.kills {
        // Every master asks for a run shortly after the hub is up.
        tokio::time::sleep(Duration::from_millis(rng.random_range(100..400))).await;
        for m in &masters {
            let _ = m.send("?<manager run chain>!".to_string());
            runs_asked += 1;
        }
        if kill == args.kills {
            break;
        }
        // Then SIGKILL at a random point of the runs in flight.
        let life = rng.random_range(150..1500);
        lifetimes.push(life);
        tokio::time::sleep(Duration::from_millis(life)).await;
        hub.kill9().await;
        let (next, url) = HubProc::start(&data, &flows).await?;
        hub = next;
        let _ = url_tx.send(url);
    }

    // No more kills: every run must finish and its result reach its master.
    let store = aicard::store::Store::open(&data)?;
    let deadline = Instant::now() + Duration::from_secs(45);
    let finished = ["completed", "failed", "stopped", "interrupted"];
    let runs = loop {
        let all = store.runs_in(&[
            "running",
            "paused",
            "completed",
            "failed",
            "stopped",
            "interrupted",
        ])?;
        let delivered = {
            let s = lock(&seen);
            all.iter()
                .filter(|r| r.state == "completed")
                .all(|r| s.delivers.contains_key(&r.run_id))
        };
        if (all.iter().all(|r| finished.contains(&r.state.as_str())) && delivered)
            || Instant::now() > deadline
        {
            break all;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    hub.kill9().await;
    for t in tabs {
        t.abort();
    }

    let s = lock(&seen);
    let mut completed = 0;
    let mut exactly_once = 0;
    let mut repeats_deduped = 0;
    let mut lost = Vec::new();
    let mut not_once = Vec::new();
    let mut unfinished = Vec::new();
    for r in &runs {
        if r.state == "completed" {
            completed += 1;
        } else {
            unfinished.push(format!("{} ({})", r.run_id, r.state));
        }
        let ids = s.delivers.get(&r.run_id);
        let distinct = ids.map_or(0, |m| m.len());
        repeats_deduped += ids.map_or(0, |m| m.values().map(|n| n - 1).sum::<usize>());
        match (r.state.as_str(), distinct) {
            ("completed", 1) => exactly_once += 1,
            ("completed", 0) => lost.push(r.run_id.clone()),
            (_, 0) => {}
            _ => not_once.push(format!("{} ({distinct} deliver ids)", r.run_id)),
        }
        if s.untagged.contains_key(&r.run_id) {
            not_once.push(format!("{} (deliver without deliver_id)", r.run_id));
        }
    }
    let log = std::fs::read_to_string(data.join("hub.log")).unwrap_or_default();
    let panics = log.matches("panicked").count();
    let unresumable = log.matches("cannot resume").count();
    let undeliverable = log.matches("cannot deliver").count();
    let mean_life = lifetimes.iter().sum::<u64>() as f64 / lifetimes.len().max(1) as f64;
    println!("kills                          {}", args.kills);
    println!("mean hub lifetime              {mean_life:.0} ms");
    println!(
        "runs asked / recorded          {runs_asked} / {}",
        runs.len()
    );
    println!("completed                      {completed}");
    println!("result delivered exactly once  {exactly_once}");
    println!("repeat delivers (deduplicated) {repeats_deduped}");
    println!("completed steps re-sent        {}", s.resent.len());
    println!("answers lost                   {}", lost.len());
    println!("hub panics                     {panics}");
    println!("runs that could not resume     {unresumable}");
    println!("frames the hub could not route {undeliverable}");
    println!(
        "elapsed                        {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let ok = lost.is_empty()
        && s.resent.is_empty()
        && not_once.is_empty()
        && unfinished.is_empty()
        && panics == 0
        && unresumable == 0;
    if !ok {
        for (what, list) in [
            ("lost", &lost),
            ("not exactly once", &not_once),
            ("unfinished", &unfinished),
            ("re-sent", &s.resent),
        ] {
            if !list.is_empty() {
                println!("  {what}: {}", list.join(", "));
            }
        }
        println!("  hub log: {}", data.join("hub.log").display());
        // Keep the data dir for a look.
        let kept = dir.keep();
        println!("  data kept in {}", kept.display());
    }
    Ok(ok)
}
