//! `--nodes N` of the load tool: a NATS server, N `serve --cluster` hubs and one agent
//! process per hub (`--agent`, a copy of the load tool holding that hub's tabs), so that no
//! process holds more sockets than the machine's per-process file limit (20,000 here).
//!
//! Per round, a master tab on node 0 sends `?<parallel to=[…]>!` to `--fanout` workers, once
//! all on node 0 (the single-node figure) and once spread over the other nodes (cross-node),
//! alternating, in the same run. Latency is from the master's send to each tab reading its
//! `task`, in wall-clock µs (all processes share the machine's clock). Agents answer every
//! task at once. Also printed: connect time, presence convergence, RSS per tab per node and
//! the NATS messages node 0 sent per cross-node round.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, Semaphore};

use super::floor::percentile;
use super::{open_tab, rss_kib, Args, Arrival};

/// Now, in µs since the epoch.
pub fn wall_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// `--agent`: opens the tabs, says `ready`, then prints `A <wall µs>` per task arrival.
pub async fn agent(args: &Args) {
    let url = args.url.clone().expect("--agent needs --url");
    let (seen_tx, mut seen_rx) = mpsc::unbounded_channel::<Arrival>();
    let (results_tx, _results) = mpsc::unbounded_channel::<Value>();
    let sem = Arc::new(Semaphore::new(args.concurrency));
    let t0 = Instant::now();
    let mut joins = Vec::with_capacity(args.tabs);
    for i in 0..args.tabs {
        let permit = sem.clone().acquire_owned().await.expect("semaphore");
        let (url, token, seen, results) = (
            url.clone(),
            args.token.clone(),
            seen_tx.clone(),
            results_tx.clone(),
        );
        let label = format!("{}{i}", args.label_prefix);
        joins.push(tokio::spawn(async move {
            let tab = open_tab(url, None, token, label, seen, results, true).await;
            drop(permit);
            tab
        }));
    }
    let mut tabs = Vec::with_capacity(args.tabs);
    for j in joins {
        tabs.push(j.await.expect("tab task"));
    }
    let mut out = tokio::io::stdout();
    let ready = format!("ready {} {:.3}\n", args.tabs, t0.elapsed().as_secs_f64());
    out.write_all(ready.as_bytes()).await.expect("stdout");
    out.flush().await.expect("stdout");
    let mut batch = Vec::new();
    loop {
        batch.clear();
        if seen_rx.recv_many(&mut batch, 4096).await == 0 {
            break;
        }
        let mut text = String::with_capacity(batch.len() * 20);
        for a in &batch {
            text.push_str(&format!("A {}\n", a.wall_us));
        }
        if out.write_all(text.as_bytes()).await.is_err() || out.flush().await.is_err() {
            break;
        }
    }
    drop(tabs);
}

fn nats_binary() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin")])
        .map(|d| d.join("nats-server"))
        .find(|p| p.is_file())
        .expect("nats-server not found: apt-get install nats-server")
}

/// Reads lines until one contains `needle`; keeps draining the rest in the background.
async fn line_with(
    stream: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    needle: &str,
) -> (
    String,
    tokio::io::Lines<BufReader<impl tokio::io::AsyncRead + Unpin>>,
) {
    let mut lines = BufReader::new(stream).lines();
    loop {
        let line = tokio::time::timeout(Duration::from_secs(600), lines.next_line())
            .await
            .expect("line in time")
            .expect("read")
            .unwrap_or_else(|| panic!("stream ended before `{needle}`"));
        if line.contains(needle) {
            return (line, lines);
        }
    }
}

async fn get(http: &reqwest::Client, base: &str, path: &str, token: &str) -> Value {
    let body = http
        .get(format!("{base}{path}"))
        .bearer_auth(token)
        .send()
        .await
        .expect("GET")
        .bytes()
        .await
        .expect("body");
    serde_json::from_slice(&body).expect("json")
}

struct Hub {
    child: tokio::process::Child,
    http: String,
    ws: String,
}

/// Runs the cluster measurement.
pub async fn run(args: &Args) {
    let n = args.nodes;
    let per_node = args.tabs / n;
    assert!(
        args.fanout <= per_node,
        "--fanout {} > {per_node} tabs per node",
        args.fanout
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut nats = tokio::process::Command::new(nats_binary())
        .args(["-a", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn nats-server");
    let (_, nats_lines) = line_with(nats.stderr.take().unwrap(), "Server is ready").await;
    tokio::spawn(async move {
        let mut l = nats_lines;
        while let Ok(Some(_)) = l.next_line().await {}
    });
    let nats_url = format!("nats://127.0.0.1:{port}");
    let mut hubs = Vec::new();
    for k in 0..n {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_aicard"))
            .args(["serve", "--port", "0", "--token", &args.token, "--data-dir"])
            .arg(dir.path().join(format!("hub{k}")))
            .args(["--cluster", &nats_url, "--node", &format!("n{k}")])
            .env("RUST_LOG", "aicard=warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn aicard serve");
        let (line, lines) = line_with(child.stdout.take().unwrap(), "listening on http://").await;
        tokio::spawn(async move {
            let mut l = lines;
            while let Ok(Some(_)) = l.next_line().await {}
        });
        let addr = line.rsplit("http://").next().unwrap().trim().to_string();
        hubs.push(Hub {
            child,
            http: format!("http://{addr}"),
            ws: format!("ws://{addr}"),
        });
    }
    let rss_before: Vec<Option<u64>> = hubs
        .iter()
        .map(|h| h.child.id().and_then(rss_kib))
        .collect();
    println!("cluster: nats-server {nats_url}, {n} hubs, {per_node} tabs per hub");

    // Agents: one per hub; each arrival line goes to one channel.
    let exe = std::env::current_exe().expect("current exe");
    let (arr_tx, mut arr_rx) = mpsc::unbounded_channel::<u64>();
    let t_connect = Instant::now();
    let mut agents = Vec::new();
    let mut ready = Vec::new();
    for (k, h) in hubs.iter().enumerate() {
        let mut child = tokio::process::Command::new(&exe)
            .args(["--agent", "--url", &h.ws, "--token", &args.token])
            .args(["--tabs", &per_node.to_string()])
            .args(["--label-prefix", &format!("n{k}w")])
            .args(["--concurrency", &args.concurrency.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn agent");
        let stdout = child.stdout.take().unwrap();
        let tx = arr_tx.clone();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel::<String>();
        tokio::spawn(async move {
            let (line, mut lines) = line_with(stdout, "ready").await;
            let _ = ready_tx.send(line);
            while let Ok(Some(l)) = lines.next_line().await {
                if let Some(us) = l.strip_prefix("A ").and_then(|v| v.parse().ok()) {
                    let _ = tx.send(us);
                }
            }
        });
        agents.push(child);
        ready.push(ready_rx);
    }
    for (k, r) in ready.into_iter().enumerate() {
        let line = r.await.expect("agent ready");
        println!("agent {k}: {line}");
    }
    let connect_s = t_connect.elapsed().as_secs_f64();
    println!(
        "connect: {} tabs over {n} hubs in {connect_s:.2} s = {:.0} tabs/s",
        per_node * n,
        (per_node * n) as f64 / connect_s
    );

    // Presence: every hub sees every tab.
    let http = aicard::http_client::plain();
    let t_presence = Instant::now();
    for (k, h) in hubs.iter().enumerate() {
        loop {
            let s = get(&http, &h.http, "/api/cluster", &args.token).await;
            if s["tabs_connected"].as_u64() == Some((per_node * n) as u64) {
                break;
            }
            assert!(
                t_presence.elapsed() < Duration::from_secs(600),
                "hub {k} sees {s} after 600 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    println!(
        "presence: every hub sees all {} tabs {:.2} s after the last agent was ready",
        per_node * n,
        t_presence.elapsed().as_secs_f64()
    );
    // RSS once it stops growing.
    for (k, h) in hubs.iter().enumerate() {
        let pid = h.child.id();
        let mut last = 0;
        for _ in 0..20 {
            tokio::time::sleep(Duration::from_millis(250)).await;
            let now = pid.and_then(rss_kib).unwrap_or(0);
            if now == last {
                break;
            }
            last = now;
        }
        let before = rss_before[k].unwrap_or(0);
        println!(
            "rss hub n{k}: {last} KiB with {per_node} tabs of its own and {} of other hubs' in its view → {:.1} KiB per own tab",
            per_node * (n - 1),
            last.saturating_sub(before) as f64 / per_node as f64
        );
    }

    // Fan-out rounds from a master on hub 0, alternating local and cross-node.
    let (results_tx, mut results_rx) = mpsc::unbounded_channel::<Value>();
    let master = open_tab(
        hubs[0].ws.clone(),
        None,
        args.token.clone(),
        "load-master".into(),
        mpsc::unbounded_channel().0,
        results_tx,
        false,
    )
    .await;
    let local: Vec<String> = (0..args.fanout).map(|i| format!("n0w{i}")).collect();
    let cross: Vec<String> = (0..args.fanout)
        .map(|i| format!("n{}w{}", 1 + i % (n - 1), i / (n - 1)))
        .collect();
    let mut lat = [Vec::new(), Vec::new()];
    let mut msgs = Vec::new();
    for round in 0..args.warmup + args.rounds {
        for (kind, targets) in [&local, &cross].into_iter().enumerate() {
            let before = get(&http, &hubs[0].http, "/api/cluster", &args.token).await;
            let cmd = format!("?<parallel to=[{}] load round {round}>!", targets.join(","));
            let t0 = wall_us();
            master
                .send(json!({"type":"user_input","text":cmd}))
                .expect("master send");
            let mut got = Vec::with_capacity(args.fanout);
            while got.len() < args.fanout {
                let us = tokio::time::timeout(Duration::from_secs(60), arr_rx.recv())
                    .await
                    .unwrap_or_else(|_| {
                        panic!(
                            "round {round}: {} of {} tasks in 60 s",
                            got.len(),
                            args.fanout
                        )
                    })
                    .expect("agents");
                got.push(us.saturating_sub(t0) as f64 / 1000.0);
            }
            let result = tokio::time::timeout(Duration::from_secs(60), results_rx.recv())
                .await
                .expect("master result in time")
                .expect("channel");
            assert_eq!(result["result"]["success"], true, "{result}");
            let after = get(&http, &hubs[0].http, "/api/cluster", &args.token).await;
            if round >= args.warmup {
                lat[kind].extend(got);
                if kind == 1 {
                    let d = after["batches_sent"].as_u64().unwrap_or(0)
                        - before["batches_sent"].as_u64().unwrap_or(0);
                    msgs.push(d);
                }
            }
            tokio::time::sleep(Duration::from_millis(args.settle_ms)).await;
        }
    }
    for l in &mut lat {
        l.sort_by(|a, b| a.total_cmp(b));
    }
    let [single, crossed] = &lat;
    println!(
        "fan-out 1 → {} × {} rounds, same run: on node n0 (single-node figure) p50 {:.2} ms, p99 {:.2} ms; \
         across nodes n1..n{} p50 {:.2} ms, p99 {:.2} ms → cross-node p99 is {:.2}× the single-node p99",
        args.fanout,
        args.rounds,
        percentile(single, 0.5),
        percentile(single, 0.99),
        n - 1,
        percentile(crossed, 0.5),
        percentile(crossed, 0.99),
        percentile(crossed, 0.99) / percentile(single, 0.99),
    );
    println!(
        "NATS requests node n0 sent per cross-node round (tasks to {} nodes): {:?}",
        n - 1,
        msgs
    );
    drop(master);
    drop(agents);
    drop(hubs);
    drop(nats);
}
