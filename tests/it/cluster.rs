//! Many hubs as one (docs/cluster.md, docs/cluster.md). One conformance suite runs against both
//! engines — in-process (one hub process) and NATS (three hub processes and a nats-server):
//! exact counts, a reconnect storm, no leaks. Then the NATS-only cases: a master on node a
//! fanning out to workers on b and c in one batch per node, a flow across nodes, a SIGKILL
//! of b mid-task, labels unique cluster-wide, and presence convergence, measured.

use crate::common;

use std::time::{Duration, Instant};

use common::cluster::{converge, NatsServer, Node, HEARTBEAT_MS};
use common::*;
use serde_json::{json, Value};

#[derive(Clone, Copy, Debug)]
enum Engine {
    InProcess,
    Nats,
}

/// The nodes of one engine under test (and the NATS server they share).
struct Cluster {
    nodes: Vec<Node>,
    _nats: Option<NatsServer>,
}

impl Cluster {
    /// `None` when the engine is NATS and nats-server is absent (see common::cluster).
    async fn start(engine: Engine) -> Option<Cluster> {
        Self::start_with_flows(engine, None).await
    }

    async fn start_with_flows(engine: Engine, flows: Option<&std::path::Path>) -> Option<Cluster> {
        match engine {
            Engine::InProcess => Some(Cluster {
                nodes: vec![Node::start(None, "solo", flows).await],
                _nats: None,
            }),
            Engine::Nats => {
                let nats = NatsServer::start().await?;
                let mut nodes = Vec::new();
                for n in ["a", "b", "c"] {
                    nodes.push(Node::start(Some(&nats), n, flows).await);
                }
                Some(Cluster {
                    nodes,
                    _nats: Some(nats),
                })
            }
        }
    }

    /// The node tab number `i` connects to (round robin).
    fn node_for(&self, i: usize) -> &Node {
        &self.nodes[i % self.nodes.len()]
    }

    /// Waits until every node sees exactly `ids` connected; returns the time it took.
    async fn all_see(&self, ids: &[String], limit: Duration) -> Duration {
        let mut want = ids.to_vec();
        want.sort();
        let want = &want;
        converge(limit, "every node sees the same tabs", || async move {
            for n in &self.nodes {
                if n.connected().await != *want {
                    return false;
                }
            }
            true
        })
        .await
    }
}

fn echo(label: String) -> impl Fn(&str) -> Reply + Send + Sync + 'static {
    move |p: &str| Reply::Text(Duration::from_millis(5), format!("{label} says {p}"))
}

async fn workers(c: &Cluster, n: usize, skip_node0: bool) -> Vec<ScriptedTab> {
    let mut tabs = Vec::new();
    for i in 0..n {
        let node = if skip_node0 && c.nodes.len() > 1 {
            &c.nodes[1 + i % (c.nodes.len() - 1)]
        } else {
            c.node_for(i)
        };
        let label = format!("w{i}");
        tabs.push(
            ScriptedTab::connect(&node.ws_url(), hello(&label, "sim", "worker"), echo(label)).await,
        );
    }
    tabs
}

/// Every worker answers a `send_to_all` exactly once, and the master gets every answer.
async fn fan_out_exactly_once(master: &mut ScriptedTab, tabs: &[ScriptedTab], round: &str) {
    let before: Vec<usize> = tabs.iter().map(|t| t.prompts().len()).collect();
    let r = master.command(&format!("?<send_to_all {round}>!")).await;
    assert_eq!(r["result"]["success"], true, "{r}");
    let out = r["result"]["output"].as_str().unwrap();
    for (i, t) in tabs.iter().enumerate() {
        assert!(
            out.contains(&format!("w{i} says {round}")),
            "w{i} missing in {out}"
        );
        assert_eq!(
            t.prompts().len(),
            before[i] + 1,
            "w{i} prompted other than once"
        );
    }
}

async fn leak_free(c: &Cluster) {
    for n in &c.nodes {
        let s = n.cluster().await;
        assert_eq!(s["remote_waiting"], 0, "{}: {s}", n.name);
        assert_eq!(s["inbound_waiting"], 0, "{}: {s}", n.name);
    }
}

// ---- the conformance suite, once per engine ----

async fn exact_counts(engine: Engine) {
    let Some(c) = Cluster::start(engine).await else {
        return;
    };
    let mut master = ScriptedTab::connect(
        &c.nodes[0].ws_url(),
        hello("boss", "chatgpt", "master"),
        echo("m".into()),
    )
    .await;
    let tabs = workers(&c, 30, false).await;
    let mut ids: Vec<String> = tabs.iter().map(|t| t.client_id.clone()).collect();
    ids.push(master.client_id.clone());
    c.all_see(&ids, Duration::from_secs(10)).await;
    for n in &c.nodes {
        let s = n.cluster().await;
        assert_eq!(s["tabs_connected"], 31, "{}: {s}", n.name);
    }
    let here: u64 = {
        let mut sum = 0;
        for n in &c.nodes {
            sum += n.cluster().await["tabs_here"].as_u64().unwrap();
        }
        sum
    };
    assert_eq!(here, 31, "each tab is on exactly one node");
    fan_out_exactly_once(&mut master, &tabs, "ping").await;
    leak_free(&c).await;
}

async fn reconnect_storm(engine: Engine) {
    let Some(c) = Cluster::start(engine).await else {
        return;
    };
    let mut master = ScriptedTab::connect(
        &c.nodes[0].ws_url(),
        hello("boss", "chatgpt", "master"),
        echo("m".into()),
    )
    .await;
    let tabs = workers(&c, 24, false).await;
    let ids: Vec<String> = tabs.iter().map(|t| t.client_id.clone()).collect();
    let mut all = ids.clone();
    all.push(master.client_id.clone());
    c.all_see(&all, Duration::from_secs(10)).await;
    // Every worker drops at once and comes back with its id, on the next node over.
    for t in tabs {
        t.kill();
    }
    let mut back = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let node = c.node_for(i + 1);
        let label = format!("w{i}");
        let mut h = hello(&label, "sim", "worker");
        h["client_id"] = json!(id);
        let tab = ScriptedTab::connect(&node.ws_url(), h, echo(label)).await;
        assert_eq!(&tab.client_id, id, "the id is kept");
        back.push(tab);
    }
    c.all_see(&all, Duration::from_secs(10)).await;
    // Each id is on exactly one node, the one it came back to.
    for n in &c.nodes {
        for t in n.tabs().await {
            let Some(i) = ids.iter().position(|id| t["id"] == json!(id)) else {
                continue;
            };
            if engine_is_cluster(&c) {
                assert_eq!(t["node"], json!(c.node_for(i + 1).name), "{t}");
            }
        }
    }
    fan_out_exactly_once(&mut master, &back, "again").await;
    leak_free(&c).await;
}

fn engine_is_cluster(c: &Cluster) -> bool {
    c.nodes.len() > 1
}

async fn no_leaks(engine: Engine) {
    let Some(c) = Cluster::start(engine).await else {
        return;
    };
    for round in 0..3 {
        let mut master = ScriptedTab::connect(
            &c.nodes[0].ws_url(),
            hello("boss", "chatgpt", "master"),
            echo("m".into()),
        )
        .await;
        let tabs = workers(&c, 12, false).await;
        let mut ids: Vec<String> = tabs.iter().map(|t| t.client_id.clone()).collect();
        ids.push(master.client_id.clone());
        c.all_see(&ids, Duration::from_secs(10)).await;
        fan_out_exactly_once(&mut master, &tabs, &format!("r{round}")).await;
        for t in tabs {
            t.kill();
        }
        master.kill();
        c.all_see(&[], Duration::from_secs(10)).await;
        leak_free(&c).await;
    }
    // Past the grace, a closed tab leaves other nodes' registries altogether.
    if engine_is_cluster(&c) {
        converge(
            Duration::from_secs(10),
            "remote entries forgotten",
            || async {
                for n in &c.nodes {
                    let remote = n
                        .tabs()
                        .await
                        .iter()
                        .filter(|t| t["node"] != json!(n.name))
                        .count();
                    if remote != 0 {
                        return false;
                    }
                }
                true
            },
        )
        .await;
    }
}

macro_rules! conformance {
    ($($name:ident),*) => {
        mod in_process {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(super::Engine::InProcess).await })*
        }
        mod nats {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(super::Engine::Nats).await })*
        }
    };
}

conformance!(exact_counts, reconnect_storm, no_leaks);

// ---- NATS only ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fan_out_from_a_to_b_and_c_is_one_batch_per_node() {
    let Some(c) = Cluster::start(Engine::Nats).await else {
        return;
    };
    let mut master = ScriptedTab::connect(
        &c.nodes[0].ws_url(),
        hello("boss", "chatgpt", "master"),
        echo("m".into()),
    )
    .await;
    let tabs = workers(&c, 60, true).await; // 30 on b, 30 on c, none on a
    let mut ids: Vec<String> = tabs.iter().map(|t| t.client_id.clone()).collect();
    ids.push(master.client_id.clone());
    c.all_see(&ids, Duration::from_secs(10)).await;
    // The OpenAI-compatible API on node a offers the tabs of b and c.
    let models = c.nodes[0].get("/v1/models").await;
    let names: Vec<&str> = models["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    for want in ["tab/w0", "tab/w1", "tab/w59", "site/sim"] {
        assert!(
            names.contains(&want),
            "{want} missing from /v1/models on a: {names:?}"
        );
    }
    let site = models["data"]
        .as_array()
        .and_then(|d| d.iter().find(|m| m["id"] == "site/sim"))
        .expect("site/sim");
    assert_eq!(
        site["aicard"]["tabs"], 60,
        "every worker of b and c: {site}"
    );
    let before = c.nodes[0].cluster().await;
    fan_out_exactly_once(&mut master, &tabs, "batched").await;
    let after = c.nodes[0].cluster().await;
    let d = |k: &str| after[k].as_u64().unwrap() - before[k].as_u64().unwrap();
    assert_eq!(
        d("batches_sent"),
        2,
        "60 tasks to 2 nodes: {before} → {after}"
    );
    assert_eq!(d("envelopes_sent"), 60);
    leak_free(&c).await;
}

const ACROSS: &str = r#"
name: across
nodes:
  - id: left
    to: wb
    prompt: "left"
  - id: right
    to: wc
    prompt: "right"
  - id: join
    needs: [left, right]
    to: wa
    prompt: "${left.output} + ${right.output}"
  - id: out
    needs: join
    to: master
    prompt: "${join.output}"
"#;

/// Sends `cmd` and waits for the run's end; (final state, delivered text, run id).
fn write_flow(dir: &std::path::Path, name: &str, yaml: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(format!("{name}.yaml")), yaml).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flow_runs_across_nodes() {
    let flows = tempfile::tempdir().unwrap();
    write_flow(flows.path(), "across", ACROSS);
    let Some(c) = Cluster::start_with_flows(Engine::Nats, Some(flows.path())).await else {
        return;
    };
    let mut master = ScriptedTab::connect(
        &c.nodes[0].ws_url(),
        hello("boss", "chatgpt", "master"),
        echo("m".into()),
    )
    .await;
    let mut tabs = Vec::new();
    for (i, l) in ["wa", "wb", "wc"].iter().enumerate() {
        tabs.push(
            ScriptedTab::connect(
                &c.nodes[i].ws_url(),
                hello(l, "sim", "worker"),
                echo(l.to_string()),
            )
            .await,
        );
    }
    let mut ids: Vec<String> = tabs.iter().map(|t| t.client_id.clone()).collect();
    ids.push(master.client_id.clone());
    c.all_see(&ids, Duration::from_secs(10)).await;
    let (state, out) = run_flow(&mut master, "?<manager run across>!").await;
    assert_eq!(state, "completed");
    assert_eq!(out.unwrap(), "wa says wb says left + wc says right");
    for t in &tabs {
        assert_eq!(t.prompts().len(), 1);
    }
    leak_free(&c).await;
}

const FAILOVER: &str = r#"
name: failover
nodes:
  - id: ask
    to: site:sim
    prompt: "work"
    retry: {max: 2, backoff: {initial: 10ms, factor: 2, max: 50ms}}
  - id: out
    needs: ask
    to: master
    prompt: "${ask.output}"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkill_of_b_mid_task_re_dispatches_with_no_duplicate_completed_node() {
    let flows = tempfile::tempdir().unwrap();
    write_flow(
        flows.path(),
        "failover",
        &FAILOVER.replace("site:sim", "sim"),
    );
    let Some(mut c) = Cluster::start_with_flows(Engine::Nats, Some(flows.path())).await else {
        return;
    };
    let mut master = ScriptedTab::connect(
        &c.nodes[0].ws_url(),
        hello("boss", "chatgpt", "master"),
        echo("m".into()),
    )
    .await;
    // The only worker at first is on b, and it never answers.
    let (got_tx, mut got_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let stuck = ScriptedTab::connect(
        &c.nodes[1].ws_url(),
        hello("stuck", "sim", "worker"),
        move |p: &str| {
            let _ = got_tx.send(p.to_string());
            Reply::Silent
        },
    )
    .await;
    c.all_see(
        &[stuck.client_id.clone(), master.client_id.clone()],
        Duration::from_secs(10),
    )
    .await;
    master.send(json!({"type":"user_input","text":"?<manager run failover>!"}));
    let prompt = tokio::time::timeout(WAIT, got_rx.recv())
        .await
        .expect("b's tab got the task");
    assert_eq!(prompt.as_deref(), Some("work"));
    // A healthy worker on c, then b dies without a word.
    let good = ScriptedTab::connect(
        &c.nodes[2].ws_url(),
        hello("good", "sim", "worker"),
        echo("good".into()),
    )
    .await;
    let t_kill = Instant::now();
    c.nodes[1].kill().await;
    let (state, out, run_id) = tokio::time::timeout(Duration::from_secs(30), async {
        let mut delivered = None;
        loop {
            let v = master.frames.recv().await.expect("master open");
            match v["type"].as_str() {
                Some("deliver") => {
                    delivered.get_or_insert(v["text"].as_str().unwrap().to_string());
                }
                Some("flow_event") if v["node_id"].is_null() => {
                    let s = v["state"].as_str().unwrap().to_string();
                    if matches!(s.as_str(), "completed" | "failed" | "stopped") {
                        return (s, delivered, v["run_id"].as_str().unwrap().to_string());
                    }
                }
                _ => {}
            }
        }
    })
    .await
    .expect("the run ends");
    let took = t_kill.elapsed();
    assert_eq!(state, "completed", "{}", c.nodes[0].log());
    assert_eq!(out.as_deref(), Some("good says work"));
    assert_eq!(good.prompts().len(), 1);
    // The run's journal on a: exactly one completed `ask`.
    let store = aicard::store::Store::open(c.nodes[0].dir.path()).unwrap();
    let events: Vec<Value> = store
        .events(&run_id)
        .unwrap()
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    let completed = events
        .iter()
        .filter(|e| e["type"] == "node_completed" && e["node"] == "ask")
        .count();
    assert_eq!(completed, 1, "{events:?}");
    let ttl = Duration::from_millis(3 * HEARTBEAT_MS);
    eprintln!(
        "failover after SIGKILL of b: run completed {took:?} after the kill (presence TTL {ttl:?})"
    );
    assert!(took < ttl * 10, "{took:?}");
    drop(stuck);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_are_unique_cluster_wide() {
    let Some(c) = Cluster::start(Engine::Nats).await else {
        return;
    };
    let first = ScriptedTab::connect(
        &c.nodes[0].ws_url(),
        hello("lead", "sim", "worker"),
        echo("1".into()),
    )
    .await;
    c.all_see(
        std::slice::from_ref(&first.client_id),
        Duration::from_secs(10),
    )
    .await;
    let (mut ws, _) = tokio_tungstenite::connect_async(c.nodes[1].ws_url())
        .await
        .unwrap();
    send(&mut ws, &hello("lead", "sim", "worker")).await;
    let welcome = recv(&mut ws).await;
    assert_eq!(welcome["type"], "welcome");
    assert_eq!(
        welcome["label"],
        Value::Null,
        "a label held on node a was given on b: {welcome}"
    );
    // The second tab is reachable by its id, and `lead` still names only the first.
    let tabs = c.nodes[2].tabs().await;
    let leads: Vec<&Value> = tabs.iter().filter(|t| t["label"] == "lead").collect();
    assert!(leads.len() <= 1, "{tabs:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn presence_converges_within_its_time_to_live_measured() {
    let Some(mut c) = Cluster::start(Engine::Nats).await else {
        return;
    };
    let beat = Duration::from_millis(HEARTBEAT_MS);
    let ttl = beat * 5 / 2;
    // Join: a tab on b is seen on a and c.
    let t0 = Instant::now();
    let tab = ScriptedTab::connect(
        &c.nodes[1].ws_url(),
        hello("j", "sim", "worker"),
        echo("j".into()),
    )
    .await;
    let id = tab.client_id.clone();
    c.all_see(std::slice::from_ref(&id), Duration::from_secs(5))
        .await;
    let join = t0.elapsed();
    // Close: gone cluster-wide within 2 heartbeats (plus the measuring poll).
    let t1 = Instant::now();
    tab.kill();
    c.all_see(&[], Duration::from_secs(5)).await;
    let close = t1.elapsed();
    // Node death: c's tabs leave a's and b's view within the time to live.
    let mut on_c = Vec::new();
    for i in 0..20 {
        let l = format!("c{i}");
        on_c.push(
            ScriptedTab::connect(&c.nodes[2].ws_url(), hello(&l, "sim", "worker"), echo(l)).await,
        );
    }
    let ids: Vec<String> = on_c.iter().map(|t| t.client_id.clone()).collect();
    c.all_see(&ids, Duration::from_secs(5)).await;
    c.nodes[2].kill().await;
    let survivors = &c.nodes[..2];
    let dead = converge(
        Duration::from_secs(5),
        "a dead node's tabs leave",
        || async {
            for n in survivors {
                if !n.connected().await.is_empty() {
                    return false;
                }
            }
            true
        },
    )
    .await;
    eprintln!(
        "presence convergence (heartbeat {beat:?}, ttl {ttl:?}): join {join:?}, close {close:?}, node SIGKILL {dead:?}"
    );
    assert!(
        close <= beat * 2 + Duration::from_millis(300),
        "close took {close:?}"
    );
    // Within 3 heartbeats of the kill (TTL 2.5, swept every tenth), plus the poll.
    assert!(
        dead <= beat * 3 + Duration::from_millis(300),
        "node death took {dead:?}"
    );
    drop(on_c);
}

/// A killed node's tabs leave every other view within 3 heartbeats of its last message, at a
/// heartbeat long enough for the arithmetic to show (2 s; the default is 20 s, unit-tested on
/// a virtual clock in `presence.rs`). Before, the time to live was 3 heartbeats and the sweep
/// judged silence by the clock read before it waited: never under 3 heartbeats, up to 4.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_node_leaves_every_view_within_three_heartbeats() {
    let Some(nats) = NatsServer::start().await else {
        return;
    };
    let beat = Duration::from_secs(2);
    let mut nodes = Vec::new();
    for n in ["a", "b", "c"] {
        nodes.push(Node::start_with_heartbeat(Some(&nats), n, None, beat.as_millis() as u64).await);
    }
    let mut c = nodes.pop().expect("node c");
    let survivors_see = |mut want: Vec<String>| {
        want.sort();
        let nodes = &nodes;
        async move {
            for n in nodes {
                if n.connected().await != want {
                    return false;
                }
            }
            true
        }
    };
    let mut on_c = Vec::new();
    for i in 0..3 {
        let l = format!("c{i}");
        on_c.push(ScriptedTab::connect(&c.ws_url(), hello(&l, "sim", "worker"), echo(l)).await);
    }
    // c's last message is the delta of this tab: the clock runs from before it was sent.
    let t0 = Instant::now();
    on_c.push(
        ScriptedTab::connect(&c.ws_url(), hello("c3", "sim", "worker"), echo("c3".into())).await,
    );
    let ids: Vec<String> = on_c.iter().map(|t| t.client_id.clone()).collect();
    converge(beat * 2, "a and b see c's tabs", || {
        survivors_see(ids.clone())
    })
    .await;
    c.kill().await;
    let killed = t0.elapsed();
    converge(beat * 5, "a killed node's tabs leave", || {
        survivors_see(Vec::new())
    })
    .await;
    let gone = t0.elapsed();
    eprintln!("node SIGKILL at heartbeat {beat:?}: killed {killed:?} after its last message, gone from a and b {gone:?} after it");
    assert!(
        gone < beat * 3,
        "a killed node's tabs left {gone:?} after its last message, over 3 heartbeats"
    );
    drop(on_c);
}

/// A node that joins late learns the tabs already there from snapshots (not from deltas it
/// never saw), and a node that restarts under the same name has its old tabs dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_node_syncs_by_snapshot_and_a_restarted_node_loses_its_old_tabs() {
    let Some(mut c) = Cluster::start(Engine::Nats).await else {
        return;
    };
    let tabs = workers(&c, 24, false).await; // 8 on each of a, b, c
    let ids: Vec<String> = tabs.iter().map(|t| t.client_id.clone()).collect();
    c.all_see(&ids, Duration::from_secs(10)).await;
    let nats = c._nats.as_ref().expect("nats");
    let late = Node::start(Some(nats), "d", None).await;
    let mut want = ids.clone();
    want.sort();
    let took = converge(
        Duration::from_secs(5),
        "the late node sees every tab",
        || {
            let late = &late;
            let want = &want;
            async move { late.connected().await == *want }
        },
    )
    .await;
    eprintln!(
        "late node d saw all {} tabs {took:?} after it started",
        ids.len()
    );
    // b dies and comes back at once, empty: its 8 tabs go from every view.
    let on_b: Vec<String> = tabs
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 3 == 1)
        .map(|(_, t)| t.client_id.clone())
        .collect();
    c.nodes[1].kill().await;
    c.nodes[1] = Node::start(Some(nats), "b", None).await;
    let rest: Vec<String> = ids.iter().filter(|i| !on_b.contains(i)).cloned().collect();
    let mut all = c.nodes.iter().collect::<Vec<_>>();
    all.push(&late);
    let mut rest_sorted = rest.clone();
    rest_sorted.sort();
    converge(Duration::from_secs(5), "b's old tabs leave", || {
        let all = &all;
        let rest_sorted = &rest_sorted;
        async move {
            for n in all.iter() {
                if n.connected().await != *rest_sorted {
                    return false;
                }
            }
            true
        }
    })
    .await;
    drop(tabs);
}

/// docs/cluster.md: in a cluster, events reach rules on every node. A rule made on b hears what a
/// publishes, and each node's rule fires once per event (a node skips its own events coming
/// back from NATS).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_published_on_a_fires_the_rules_of_b() {
    let Some(c) = Cluster::start(Engine::Nats).await else {
        return;
    };
    let silent = |_: &str| Reply::Silent;
    let mut boss_a = ScriptedTab::connect(
        &c.nodes[0].ws_url(),
        hello("boss-a", "chatgpt", "master"),
        silent,
    )
    .await;
    let mut boss_b = ScriptedTab::connect(
        &c.nodes[1].ws_url(),
        hello("boss-b", "chatgpt", "master"),
        silent,
    )
    .await;
    // Workers that hand each prompt to the test as it arrives.
    let listening = |label: &'static str| {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let script = move |p: &str| {
            let _ = tx.send(p.to_string());
            Reply::Text(Duration::from_millis(1), format!("{label} ok"))
        };
        (script, rx)
    };
    let (script_a, mut heard_a) = listening("ra");
    let (script_b, mut heard_b) = listening("rb");
    let ra =
        ScriptedTab::connect(&c.nodes[0].ws_url(), hello("ra", "sim", "worker"), script_a).await;
    let rb =
        ScriptedTab::connect(&c.nodes[1].ws_url(), hello("rb", "sim", "worker"), script_b).await;
    let ids = [&boss_a, &boss_b, &ra, &rb].map(|t| t.client_id.clone());
    c.all_see(&ids, Duration::from_secs(10)).await;
    for (on_b, cmd) in [
        (false, "?<subscribe news do to ra: a heard $EVENT_TEXT>!"),
        (
            true,
            "?<subscribe news do to rb: b heard $EVENT_TEXT from $EVENT_FROM>!",
        ),
        (true, "?<subscribe end do to rb: E>!"),
    ] {
        let boss = if on_b { &mut boss_b } else { &mut boss_a };
        let r = boss.command(cmd).await;
        assert_eq!(r["result"]["success"], true, "{r}");
    }
    let r = boss_a.command("?<publish news hi>!").await;
    assert_eq!(r["result"]["success"], true, "{r}");
    let r = boss_a.command("?<publish end>!").await;
    assert_eq!(r["result"]["success"], true, "{r}");
    assert_eq!(
        next_heard(&mut heard_b).await,
        format!("b heard hi from {}", boss_a.client_id)
    );
    // `end` was published after `news`: once b heard it, b heard everything before it.
    assert_eq!(next_heard(&mut heard_b).await, "E");
    assert_eq!(next_heard(&mut heard_a).await, "a heard hi");
    assert_eq!(rb.prompts().len(), 2, "{:?}", rb.prompts());
    assert_eq!(ra.prompts(), vec!["a heard hi"]);
}

async fn next_heard(rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("a prompt in time")
        .expect("tab open")
}

const HYBRID: &str = r#"
name: hybrid
nodes:
  - id: count
    on: b
    command: "echo rows on b: 42"
  - id: out
    needs: count
    to: master
    prompt: "${count.output}"
"#;

/// docs/cluster.md remote execution, with a real nats-server and two hubs, exec on b only:
/// `?<on b: CMD>!` typed on a runs on b (the caller's variables sent along), its output
/// streams back as `cmd_output`, and b's audit line names who asked from where; `on a:`
/// typed on b is refused by a's policy; an unknown node is named; a flow node `on: b` runs
/// its command on b (a hybrid flow).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_node_runs_a_command_on_the_node_with_exec_and_only_there() {
    let Some(nats) = NatsServer::start().await else {
        return;
    };
    let flows = tempfile::tempdir().unwrap();
    write_flow(flows.path(), "hybrid", HYBRID);
    let a = Node::start(Some(&nats), "a", Some(flows.path())).await;
    let b = Node::start_with_args(Some(&nats), "b", None, HEARTBEAT_MS, &["--exec", "on"]).await;
    let silent = |_: &str| Reply::Silent;
    let mut boss_a = ScriptedTab::connect(
        &a.ws_url(),
        hello("boss-a", "chatgpt", "master"),
        echo("m".into()),
    )
    .await;
    let mut boss_b =
        ScriptedTab::connect(&b.ws_url(), hello("boss-b", "chatgpt", "master"), silent).await;
    let r = boss_a.command("?<set who = 老板>!").await;
    assert_eq!(r["result"]["success"], true, "{r}");
    boss_a.send(json!({"type":"user_input","text":"?<on b: echo hello $who; echo oops >&2>!"}));
    let frames = boss_a.frames_until("cmd_result").await;
    let result = frames.last().unwrap();
    assert_eq!(result["result"]["success"], true, "{result}");
    let out = result["result"]["output"].as_str().unwrap();
    assert!(out.contains("hello 老板"), "{out}");
    let streamed: String = frames
        .iter()
        .filter(|f| f["type"] == "cmd_output")
        .map(|f| f["chunk"].as_str().unwrap())
        .collect();
    assert!(
        streamed.contains("hello 老板"),
        "live output came back: {frames:?}"
    );
    assert!(streamed.contains("[stderr] oops"), "{frames:?}");
    // b wrote the audit line, naming the asker and its node.
    let log = b.log();
    let audit = log
        .lines()
        .find(|l| l.contains("aicard::audit") && l.contains("hello"))
        .unwrap_or_else(|| panic!("no audit line on b:\n{log}"));
    assert!(audit.contains("boss-a") && audit.contains("@ a"), "{audit}");
    assert!(!a.log().contains("hello $who"), "a ran nothing itself");
    // a has no exec: asked from b, it says so.
    let r = boss_b.command("?<on a: echo nope>!").await;
    assert_eq!(r["result"]["success"], false, "{r}");
    let out = r["result"]["output"].as_str().unwrap();
    assert!(
        out.contains("node `a`") && out.contains("--exec off"),
        "{out}"
    );
    // A node that is not there.
    let r = boss_a.command("?<on nowhere: echo x>!").await;
    assert_eq!(r["result"]["success"], false, "{r}");
    assert!(
        r["result"]["output"]
            .as_str()
            .unwrap()
            .contains("no node `nowhere`"),
        "{r}"
    );
    // The hybrid flow: its shell step runs on b, the rest on a.
    let (state, delivered) = run_flow(&mut boss_a, "?<manager run hybrid>!").await;
    assert_eq!(state, "completed");
    assert!(delivered.unwrap().contains("rows on b: 42"));
}

/// A refusal from a remote node names the node and says why: a program that is not there, a
/// program its allowlist does not hold, a command that is not a shell line or a skill, or a
/// node whose exec is off — never a bare "unknown command" that reads as if it came from here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_nodes_refusal_names_the_node_and_why() {
    let Some(nats) = NatsServer::start().await else {
        return;
    };
    let a = Node::start(Some(&nats), "a", None).await;
    let b = Node::start_with_args(
        Some(&nats),
        "b",
        None,
        HEARTBEAT_MS,
        &["--exec", "allowlist", "--allow", "echo"],
    )
    .await;
    let silent = |_: &str| Reply::Silent;
    let mut boss_a =
        ScriptedTab::connect(&a.ws_url(), hello("boss-a", "chatgpt", "master"), silent).await;
    let mut boss_b =
        ScriptedTab::connect(&b.ws_url(), hello("boss-b", "chatgpt", "master"), silent).await;
    let r = boss_a.command("?<on b: echo fine>!").await;
    assert_eq!(r["result"]["success"], true, "{r}");
    let mut wrong = Vec::new();
    for (on_b, cmd, node, why) in [
        (
            false,
            "?<on b: nosuchprogram-xyz>!",
            "b",
            "nosuchprogram-xyz",
        ),
        (false, "?<on b: ls>!", "b", "ls"),
        (false, "?<on b: to kimi: hi>!", "b", "shell"),
        (true, "?<on a: echo nope>!", "a", "--exec off"),
    ] {
        let tab = if on_b { &mut boss_b } else { &mut boss_a };
        let r = tab.command(cmd).await;
        let out = r["result"]["output"].as_str().unwrap().to_string();
        let named =
            out.contains(&format!("node `{node}`")) || out.contains(&format!("节点 `{node}`"));
        if r["result"]["success"] != false || !named || !out.contains(why) {
            wrong.push(format!("{cmd} → {out}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
