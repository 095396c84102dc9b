//! Flows on the real hub with scripted tabs: parallel fan-out, chains, aggregation, `when`,
//! `for_each`, retries with failover, pause/resume/stop, and durability across a SIGKILL.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

fn slow(label: &'static str, ms: u64) -> impl Fn(&str) -> Reply + Send + Sync + 'static {
    move |p: &str| Reply::Text(Duration::from_millis(ms), format!("{label}: {p}"))
}

const PARALLEL: &str = r#"
name: par
nodes:
  - id: fan
    to: [w1, w2, w3]
    prompt: "think about it"
    aggregate: list
  - id: out
    needs: fan
    to: master
    prompt: "${fan.output}"
"#;

#[tokio::test]
async fn three_one_second_workers_take_about_one_second_not_three() {
    let h = hub_with_flows(&[("par", PARALLEL)]).await;
    let url = h.ws_url("/realtime");
    let mut master =
        ScriptedTab::connect(&url, hello("boss", "chatgpt", "master"), slow("m", 1)).await;
    let mut tabs = Vec::new();
    for l in ["w1", "w2", "w3"] {
        tabs.push(ScriptedTab::connect(&url, hello(l, "sim", "worker"), slow(l, 1000)).await);
    }
    let t0 = Instant::now();
    let (state, out) = run_flow(&mut master, "?<manager run par>!").await;
    let took = t0.elapsed();
    assert_eq!(state, "completed");
    assert!(
        took < Duration::from_millis(2500),
        "took {took:?}: not parallel"
    );
    let list: Vec<String> = serde_json::from_str(&out.unwrap()).unwrap();
    assert_eq!(
        list,
        vec![
            "w1: think about it",
            "w2: think about it",
            "w3: think about it"
        ]
    );
}

const CHAIN: &str = r#"
name: chain
inputs: {topic: {default: tea}}
nodes:
  - id: a
    to: up
    prompt: "start $topic"
  - id: b
    needs: a
    to: up
    prompt: "next ${a.output}"
  - id: skipme
    needs: b
    to: up
    when: "false"
    prompt: "never"
  - id: each
    needs: b
    to: up
    for_each: {items: [apple, pear], as: it}
    prompt: "item {{ it }}"
    aggregate: list
  - id: vote
    needs: b
    to: [v1, v2, v3]
    prompt: "pick"
    aggregate: vote
  - id: out
    needs: [each, vote]
    to: master
    prompt: "${b.output} | ${each.output} | ${vote.output}"
"#;

#[tokio::test]
async fn chains_when_for_each_and_vote() {
    let h = hub_with_flows(&[("chain", CHAIN)]).await;
    let url = h.ws_url("/realtime");
    let mut master =
        ScriptedTab::connect(&url, hello("boss", "chatgpt", "master"), slow("m", 1)).await;
    let up = ScriptedTab::connect(&url, hello("up", "deepseek", "worker"), |p: &str| {
        Reply::Text(Duration::from_millis(5), p.to_uppercase())
    })
    .await;
    let _v1 = ScriptedTab::connect(&url, hello("v1", "sim", "worker"), |_: &str| {
        Reply::Text(Duration::ZERO, "Blue".into())
    })
    .await;
    let _v2 = ScriptedTab::connect(&url, hello("v2", "sim", "worker"), |_: &str| {
        Reply::Text(Duration::ZERO, "blue ".into())
    })
    .await;
    let _v3 = ScriptedTab::connect(&url, hello("v3", "sim", "worker"), |_: &str| {
        Reply::Text(Duration::ZERO, "red".into())
    })
    .await;
    let (state, out) = run_flow(&mut master, "?<manager run chain topic=tea>!").await;
    assert_eq!(state, "completed");
    let out = out.unwrap();
    assert!(out.starts_with("NEXT START TEA | "), "{out}");
    assert!(out.contains(r#"["ITEM APPLE","ITEM PEAR"]"#), "{out}");
    assert!(out.to_lowercase().ends_with("blue"), "{out}");
    assert!(
        !up.prompts().iter().any(|p| p == "never"),
        "when: false still ran"
    );
}

const RETRY: &str = r#"
name: retry
nodes:
  - id: ask
    to: role:worker
    prompt: "hello"
    retry: {max: 2, backoff: {initial: 10ms, factor: 2, max: 50ms}}
  - id: out
    needs: ask
    to: master
    prompt: "${ask.output}"
"#;

#[tokio::test]
async fn a_failing_tab_is_retried_on_another_tab() {
    let h = hub_with_flows(&[("retry", RETRY)]).await;
    let url = h.ws_url("/realtime");
    let mut master =
        ScriptedTab::connect(&url, hello("boss", "chatgpt", "master"), slow("m", 1)).await;
    let bad = ScriptedTab::connect(&url, hello("bad", "doubao", "worker"), |_: &str| {
        Reply::Fail("429 rate limited".into())
    })
    .await;
    let good = ScriptedTab::connect(&url, hello("good", "kimi", "worker"), slow("good", 5)).await;
    let (state, out) = run_flow(&mut master, "?<manager run retry>!").await;
    assert_eq!(state, "completed");
    assert_eq!(out.unwrap(), "good: hello");
    assert_eq!(good.prompts().len(), 1);
    assert!(
        bad.prompts().len() <= 1,
        "the failing tab was not avoided: {:?}",
        bad.prompts()
    );
}

#[tokio::test]
async fn a_flow_that_cannot_succeed_fails_with_the_reason() {
    let h = hub_with_flows(&[("retry", RETRY)]).await;
    let url = h.ws_url("/realtime");
    let mut master =
        ScriptedTab::connect(&url, hello("boss", "chatgpt", "master"), slow("m", 1)).await;
    let _bad = ScriptedTab::connect(&url, hello("bad", "doubao", "worker"), |_: &str| {
        Reply::Fail("captcha".into())
    })
    .await;
    let (state, _) = run_flow(&mut master, "?<manager run retry>!").await;
    assert_eq!(state, "failed");
    let status = master.command("?<manager status retry>!").await;
    assert!(
        status["result"]["output"]
            .as_str()
            .unwrap()
            .contains("captcha"),
        "{status}"
    );
}

const TWO_STEP: &str = r#"
name: twostep
nodes:
  - id: first
    to: w
    prompt: "one"
  - id: second
    needs: first
    to: w
    prompt: "two"
  - id: out
    needs: second
    to: master
    prompt: "${second.output}"
"#;

#[tokio::test]
async fn pause_resume_and_stop() {
    let h = hub_with_flows(&[("twostep", TWO_STEP)]).await;
    let url = h.ws_url("/realtime");
    let mut master =
        ScriptedTab::connect(&url, hello("boss", "chatgpt", "master"), slow("m", 1)).await;
    let w = ScriptedTab::connect(&url, hello("w", "claude", "worker"), slow("w", 300)).await;
    master.send(json!({"type":"user_input","text":"?<manager run twostep>!"}));
    // Pause while `first` is in flight: `second` must not start until resumed.
    loop {
        let v = master.next("flow_event").await;
        if v["node_id"] == "first" && v["state"] == "sent" {
            break;
        }
    }
    let r = master.command("?<manager pause twostep>!").await;
    assert_eq!(r["result"]["success"], true, "{r}");
    loop {
        let v = master.next("flow_event").await;
        if v["node_id"] == "first" && v["state"] == "completed" {
            break;
        }
    }
    let status = master.command("?<manager status twostep>!").await;
    let text = status["result"]["output"].as_str().unwrap().to_string();
    assert!(text.contains("Paused"), "{text}");
    assert_eq!(w.prompts(), vec!["one"], "second started while paused");
    master.command("?<manager resume twostep>!").await;
    let (state, out) = {
        let mut delivered = None;
        let state = loop {
            let v = master.frames.recv().await.unwrap();
            if v["type"] == "deliver" {
                delivered = v["text"].as_str().map(String::from);
            }
            if v["type"] == "flow_event" && v["node_id"].is_null() && v["state"] != "running" {
                break v["state"].as_str().unwrap().to_string();
            }
        };
        (state, delivered)
    };
    assert_eq!(state, "completed");
    assert_eq!(out.unwrap(), "w: two");

    // Stop: a run stopped mid-way ends as stopped.
    master.send(json!({"type":"user_input","text":"?<manager run twostep>!"}));
    loop {
        let v = master.next("flow_event").await;
        if v["node_id"] == "first" && v["state"] == "sent" {
            break;
        }
    }
    master.command("?<manager stop twostep>!").await;
    let end = run_event(&mut master, &["stopped", "completed", "failed"]).await;
    assert_eq!(end["state"], "stopped");
}

const DURABLE: &str = r#"
name: durable
nodes:
  - id: a
    to: wa
    prompt: "alpha"
  - id: b
    needs: a
    to: wb
    prompt: "beta after ${a.output}"
  - id: out
    needs: b
    to: master
    prompt: "${b.output}"
"#;

/// The real binary, killed with SIGKILL mid-run and restarted on the same data dir.
struct HubProcess {
    child: std::process::Child,
}

impl HubProcess {
    fn start(data: &Path, flows: &Path, port: u16) -> HubProcess {
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_aicard"))
            .args([
                "serve",
                "--port",
                &port.to_string(),
                "--token",
                TOKEN,
                "--data-dir",
            ])
            .arg(data)
            .arg("--flows")
            .arg(flows)
            .arg("--role-cards")
            .arg(data.join("no-cards"))
            .env("RUST_LOG", "aicard=warn")
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("start aicard serve");
        HubProcess { child }
    }

    fn kill9(mut self) {
        let _ = self.child.kill(); // SIGKILL on Unix
        let _ = self.child.wait();
    }
}

impl Drop for HubProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn wait_healthy(port: u16) {
    tokio::time::timeout(WAIT, async {
        loop {
            if let Ok(r) = aicard::http_client::plain()
                .get(format!("http://127.0.0.1:{port}/healthz"))
                .send()
                .await
            {
                if r.status() == 200 {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("hub up in time");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn resume_hello(label: &str, site: &str, role: &str, id: &str) -> Value {
    let mut h = hello(label, site, role);
    h["client_id"] = json!(id);
    h
}

#[tokio::test]
async fn a_run_survives_sigkill_and_completed_nodes_are_not_sent_again() {
    let data = tempfile::tempdir().unwrap();
    let flows = data.path().join("flows");
    write_flow(&flows, "durable", DURABLE);
    let port = free_port();
    let hub = HubProcess::start(data.path(), &flows, port);
    wait_healthy(port).await;
    let url = format!("ws://127.0.0.1:{port}/realtime");
    let mut master =
        ScriptedTab::connect(&url, hello("boss", "chatgpt", "master"), slow("m", 1)).await;
    let wa = ScriptedTab::connect(&url, hello("wa", "deepseek", "worker"), slow("wa", 5)).await;
    // wb never answers before the crash: its task is in flight when the hub dies.
    let wb = ScriptedTab::connect(&url, hello("wb", "qianwen", "worker"), |_: &str| {
        Reply::Silent
    })
    .await;
    master.send(json!({"type":"user_input","text":"?<manager run durable>!"}));
    loop {
        let v = master.next("flow_event").await;
        if v["node_id"] == "b" && v["state"] == "sent" {
            break;
        }
    }
    // b's task reached wb (its prompt is recorded by the scripted tab).
    tokio::time::timeout(WAIT, async {
        while wb.prompts().is_empty() {
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("b reached wb");
    let (master_id, wa_id, wb_id) = (
        master.client_id.clone(),
        wa.client_id.clone(),
        wb.client_id.clone(),
    );
    let wa_prompts_before = wa.prompts();
    hub.kill9();
    master.kill();
    wa.kill();
    wb.kill();

    let hub = HubProcess::start(data.path(), &flows, port);
    wait_healthy(port).await;
    let mut master = ScriptedTab::connect(
        &url,
        resume_hello("boss", "chatgpt", "master", &master_id),
        slow("m", 1),
    )
    .await;
    let wa = ScriptedTab::connect(
        &url,
        resume_hello("wa", "deepseek", "worker", &wa_id),
        slow("wa", 5),
    )
    .await;
    let wb = ScriptedTab::connect(
        &url,
        resume_hello("wb", "qianwen", "worker", &wb_id),
        slow("wb", 5),
    )
    .await;
    assert_eq!(master.client_id, master_id);
    let delivered = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let v = master.frames.recv().await.unwrap();
            if v["type"] == "deliver" {
                return v["text"].as_str().unwrap().to_string();
            }
        }
    })
    .await
    .expect("the resumed run delivered");
    assert_eq!(delivered, "wb: beta after wa: alpha");
    assert_eq!(wa_prompts_before, vec!["alpha"]);
    assert!(
        wa.prompts().is_empty(),
        "completed node a was sent again: {:?}",
        wa.prompts()
    );
    assert_eq!(wb.prompts(), vec!["beta after wa: alpha"]);
    drop(hub);
}

const POOLED: &str = r#"
name: pooled
limits: {pools: {chatgpt: 1}}
nodes:
  - id: fan
    to: [c1, c2, d1]
    prompt: "go"
    aggregate: list
  - id: out
    needs: fan
    to: master
    prompt: "${fan.output}"
"#;

#[tokio::test]
async fn a_site_pool_limits_how_many_tabs_of_that_site_work_at_once() {
    let h = hub_with_flows(&[("pooled", POOLED)]).await;
    let url = h.ws_url("/realtime");
    let mut master =
        ScriptedTab::connect(&url, hello("boss", "claude", "master"), slow("m", 1)).await;
    let _c1 = ScriptedTab::connect(&url, hello("c1", "chatgpt", "worker"), slow("c1", 400)).await;
    let _c2 = ScriptedTab::connect(&url, hello("c2", "chatgpt", "worker"), slow("c2", 400)).await;
    let _d1 = ScriptedTab::connect(&url, hello("d1", "deepseek", "worker"), slow("d1", 400)).await;
    let t0 = Instant::now();
    let (state, out) = run_flow(&mut master, "?<manager run pooled>!").await;
    let took = t0.elapsed();
    assert_eq!(state, "completed");
    assert_eq!(
        serde_json::from_str::<Vec<String>>(&out.unwrap())
            .unwrap()
            .len(),
        3
    );
    // The two chatgpt tabs ran one after the other (≥ 800 ms); deepseek ran beside them.
    assert!(
        took >= Duration::from_millis(780),
        "pool not enforced: {took:?}"
    );
    assert!(took < Duration::from_millis(2500), "{took:?}");
}

/// Copies the store's files as they are at this instant: what a SIGKILL right now leaves.
fn snapshot_store(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for name in ["aicard.db", "aicard.db-wal"] {
        if from.join(name).exists() {
            std::fs::copy(from.join(name), to.join(name)).unwrap();
        }
    }
}

#[tokio::test]
async fn a_run_killed_right_after_it_started_resumes() {
    let h = hub_with_flows(&[("par", PARALLEL)]).await;
    let master = h.scripted("boss", "chatgpt", "master", slow("m", 1)).await;
    // Nothing else runs between the start and the snapshot (one-threaded test runtime).
    let run_id = h
        .hub()
        .runner
        .start(
            "par",
            Some(master.client_id.clone()),
            Default::default(),
            None,
        )
        .expect("the run starts");
    let copy = tempfile::tempdir().unwrap();
    snapshot_store(&h.hub().config.data_dir, copy.path());

    let flows_dir = h.hub().config.flows_dir.clone();
    let restarted = TestHub::start_with(|c| {
        c.data_dir = copy.path().to_path_buf();
        c.flows_dir = flows_dir;
    })
    .await;
    let rec = restarted
        .hub()
        .store
        .run(&run_id)
        .unwrap()
        .expect("the run row");
    assert_eq!(rec.state, "running", "the run was resumed, not interrupted");
    assert!(
        restarted
            .hub()
            .runner
            .list()
            .iter()
            .any(|(id, _, _)| *id == run_id),
        "the resumed run is in progress"
    );
}

/// A hub on `data` (port 0, the test token, flows from `flows`).
async fn hub_on(data: &Path, flows: &Path) -> aicard::app::RunningHub {
    let mut c = aicard::config::HubConfig::for_tests(data.to_path_buf());
    c.flows_dir = flows.to_path_buf();
    c.role_cards_dir = data.join("no-cards");
    aicard::app::App::start(c).await.expect("hub starts")
}

async fn stop(running: aicard::app::RunningHub) {
    tokio::time::timeout(WAIT, running.shutdown())
        .await
        .expect("the hub shut down in time");
}

fn ws_of(running: &aicard::app::RunningHub) -> String {
    format!("ws://{}/realtime", running.addr)
}

#[tokio::test]
async fn a_result_for_a_master_not_back_after_a_restart_waits_for_it() {
    let data = tempfile::tempdir().unwrap();
    let flows = data.path().join("flows");
    write_flow(&flows, "durable", DURABLE);
    let hub = hub_on(data.path(), &flows).await;
    let mut master = ScriptedTab::connect(
        &ws_of(&hub),
        hello("boss", "chatgpt", "master"),
        slow("m", 1),
    )
    .await;
    let wa = ScriptedTab::connect(
        &ws_of(&hub),
        hello("wa", "deepseek", "worker"),
        |_: &str| Reply::Silent,
    )
    .await;
    master.send(json!({"type":"user_input","text":"?<manager run durable>!"}));
    loop {
        let v = master.next("flow_event").await;
        if v["node_id"] == "a" && v["state"] == "sent" {
            break;
        }
    }
    let (master_id, wa_id) = (master.client_id.clone(), wa.client_id.clone());
    stop(hub).await;
    master.kill();
    wa.kill();

    // After the restart only the workers come back; the run finishes without its master.
    let hub = hub_on(data.path(), &flows).await;
    let mut events = hub.app.events.subscribe();
    let _wa = ScriptedTab::connect(
        &ws_of(&hub),
        resume_hello("wa", "deepseek", "worker", &wa_id),
        slow("wa", 1),
    )
    .await;
    let _wb = ScriptedTab::connect(
        &ws_of(&hub),
        hello("wb", "qianwen", "worker"),
        slow("wb", 1),
    )
    .await;
    let finished = wait_event(&mut events, |e| {
        matches!(e, aicard::hub::HubEvent::RunFinished { .. })
    })
    .await;
    assert!(
        matches!(&finished, aicard::hub::HubEvent::RunFinished { state, .. } if state == "completed"),
        "{finished:?}"
    );
    // And the hub restarts once more before the master is back: the result was kept.
    stop(hub).await;
    let hub = hub_on(data.path(), &flows).await;
    let mut master = ScriptedTab::connect(
        &ws_of(&hub),
        resume_hello("boss", "chatgpt", "master", &master_id),
        slow("m", 1),
    )
    .await;
    let d = master.next("deliver").await;
    assert_eq!(d["text"], "wb: beta after wa: alpha");
    let run_id = d["run_id"].as_str().expect("run_id");
    assert_eq!(
        d["deliver_id"],
        format!("{run_id}/out"),
        "the idempotency key"
    );
    let done = run_event(&mut master, &["completed"]).await;
    assert_eq!(done["state"], "completed", "progress was kept too");
    stop(hub).await;
}

// ---- A node's `files:` (docs/files.md) ----

const WITH_FILES: &str = r#"
name: withfiles
inputs: {doc: {default: report.pdf}}
nodes:
  - id: look
    to: w1
    files: [chart.png, "$doc"]
    prompt: "compare them"
"#;

const ESCAPES: &str = r#"
name: escapes
inputs: {x: {default: a}}
nodes:
  - id: look
    to: w1
    files: ["../secret.txt", "$x/../../etc/passwd", "/etc/passwd"]
    prompt: "hi"
"#;

#[tokio::test]
async fn a_nodes_files_are_attached_and_names_out_of_the_folder_are_refused() {
    let h = hub_with_flows(&[("withfiles", WITH_FILES), ("escapes", ESCAPES)]).await;
    let folder = h.dir.path().join("files");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("chart.png"), b"\x89PNG chart").unwrap();
    std::fs::write(folder.join("report.pdf"), b"%PDF report").unwrap();
    std::fs::write(h.dir.path().join("secret.txt"), b"secret").unwrap();
    let (mut w, welcome) = h.tab("sim", Some("w1")).await;
    let me = welcome["client_id"].as_str().unwrap().to_string();
    let url = h.ws_url("/realtime");
    let mut master =
        ScriptedTab::connect(&url, hello("boss", "chatgpt", "master"), slow("m", 1)).await;
    // Refused by validation, naming each bad name; nothing is sent.
    master.send(json!({"type":"user_input","text":"?<manager run escapes>!"}));
    let refused = loop {
        let v = master.next("cmd_result").await;
        if v["result"]["success"] == false {
            break v["result"]["output"]
                .as_str()
                .unwrap_or_default()
                .to_string()
                + v["result"]["error"].as_str().unwrap_or_default();
        }
    };
    for bad in ["../secret.txt", "$x/../../etc/passwd", "/etc/passwd"] {
        assert!(refused.contains(bad), "{bad}: {refused}");
    }
    // A name that expands out of the folder is refused when the node runs.
    let run = tokio::spawn(async move {
        let out = run_flow(&mut master, "?<manager run withfiles doc=../secret.txt>!").await;
        (master, out)
    });
    let (mut master, (state, _)) = run.await.unwrap();
    assert_eq!(state, "failed");
    // The good run: the tab gets both files, `$doc` expanded, and fetches the bytes.
    let run = tokio::spawn(async move { run_flow(&mut master, "?<manager run withfiles>!").await });
    let task = recv_type(&mut w, "task").await;
    assert_eq!(task["prompt"], "compare them");
    let att = task["attachments"].as_array().expect("attachments").clone();
    let names: Vec<&str> = att.iter().map(|a| a["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["chart.png", "report.pdf"]);
    let r = aicard::http_client::plain()
        .get(h.http_url(&format!("/files/{}", att[1]["id"].as_str().unwrap())))
        .bearer_auth(TOKEN)
        .header("x-aicard-client", &me)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.bytes().await.unwrap().as_ref(), b"%PDF report");
    let id = task["task_id"].as_str().unwrap().to_string();
    send(
        &mut w,
        &json!({"type":"turn_end","turn_id":format!("t-{id}"),"text":"seen","task_id":id}),
    )
    .await;
    let (state, _) = run.await.unwrap();
    assert_eq!(state, "completed");
}
