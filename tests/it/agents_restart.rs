//! docs/agents.md "never twice … sessions survive a hub restart", with a real kill: the `aicard
//! serve` binary is SIGKILLed after a looping tab's command ran and before its results were
//! delivered, and started again on the same data dir. The tab reconnects and sends its turn
//! again: the session goes on from where it was, and the command does not run a second time
//! (its result comes from the journal keyed by (tab, turn, index)). A session's pending files
//! survive it too (docs/files.md "In the agent loop"): a message sent with files and not yet seen
//! goes again with them, or pauses when their bytes are gone; a `returns: file` skill's file of the
//! cut round goes with its results message.

use crate::common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::{agent_event, have_python3, hello, Reply, ScriptedTab, TOKEN};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// `aicard serve` on port 0 over `dir`, sending results at once (`--agent-gap 0-0`); returns
/// the child and its WebSocket URL once it listens.
async fn serve(dir: &Path) -> (Child, String) {
    serve_with(dir, &[]).await
}

/// [`serve`] with more arguments.
async fn serve_with(dir: &Path, more: &[&str]) -> (Child, String) {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("hub.log"))
        .expect("log file");
    let mut child = Command::new(env!("CARGO_BIN_EXE_aicard"))
        .args([
            "serve",
            "--port",
            "0",
            "--token",
            TOKEN,
            "--agent-gap",
            "0-0",
        ])
        .args(more)
        .arg("--data-dir")
        .arg(dir)
        .arg("--flows")
        .arg(dir.join("flows"))
        .arg("--role-cards")
        .arg(dir.join("role-cards"))
        .arg("--skills")
        .arg(dir.join("skills"))
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .expect("spawn aicard serve");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let line = tokio::time::timeout(Duration::from_secs(20), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("listening on http://") {
                return line;
            }
        }
        panic!("the hub ended before it listened")
    })
    .await
    .expect("the hub listens within 20 s");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let addr = line.rsplit("http://").next().unwrap().trim().to_string();
    (child, format!("ws://{addr}/realtime"))
}

/// Memories whose text holds `needle`, counted in the store the hub left.
fn memories_with(dir: &Path, needle: &str) -> i64 {
    let store = aicard::store::Store::open(dir).expect("open the store");
    store.with_conn(|c| {
        c.query_row(
            "SELECT count(*) FROM memories WHERE text LIKE ?1",
            [format!("%{needle}%")],
            |r| r.get(0),
        )
        .expect("count")
    })
}

#[tokio::test]
async fn sigkill_between_a_command_and_its_deliver_runs_nothing_twice() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut hub, url) = serve(dir.path()).await;
    let mut m =
        ScriptedTab::connect(&url, hello("m", "deepseek", "master"), |_| Reply::Silent).await;
    let on = m.command("?<agent loop on>!").await;
    assert_eq!(on["result"]["success"], true, "{on}");

    // The model streams a command (it runs as it arrives); the turn has not ended yet.
    let turn = "t-restart-1";
    let text = "记下来 ?<memory 只写一次的事实 tag: 重启>! 然后继续";
    m.send(json!({"type":"chunk","turn_id":turn,"seq":0,"text":text}));
    let running = agent_event(&mut m, &["running"]).await;
    let session = running["run_id"].as_str().unwrap().to_string();
    let ran = m.next("cmd_result").await;
    assert_eq!(ran["result"]["success"], true, "{ran}");

    // SIGKILL: no shutdown, nothing flushed on the way out; the deliver never happened.
    hub.start_kill().expect("SIGKILL the hub");
    hub.wait().await.expect("the hub ended");
    let client_id = m.client_id.clone();
    m.kill();
    assert_eq!(memories_with(dir.path(), "只写一次的事实"), 1);

    let (mut hub, url) = serve(dir.path()).await;
    let mut back = hello("m", "deepseek", "master");
    back["client_id"] = json!(client_id);
    let mut m = ScriptedTab::connect(&url, back, |_| Reply::Silent).await;
    assert_eq!(m.client_id, client_id, "the tab keeps its identity");
    // The userscript sends the reply again from its start with the same turn id, then ends it.
    m.send(json!({"type":"chunk","turn_id":turn,"seq":0,"text":text}));
    m.send(json!({"type":"turn_end","turn_id":turn,"text":text}));
    let d = m.next("deliver").await;
    assert_eq!(
        d["agent"]["session"],
        session.as_str(),
        "the same session: {d}"
    );
    assert_eq!(d["agent"]["round"], 1, "{d}");
    let results = d["text"].as_str().unwrap();
    assert!(
        results.contains("⟦aicard result 1/1⟧ memory 只写一次的事实 tag: 重启 → ✓"),
        "the journaled result is delivered: {results}"
    );

    m.send(json!({"type":"chunk","turn_id":"t-restart-2","seq":0,"text":"已记下。"}));
    m.send(json!({"type":"turn_end","turn_id":"t-restart-2","text":"已记下。"}));
    let end = agent_event(&mut m, &["ended"]).await;
    assert!(
        end["detail"]["why"].as_str().unwrap().contains("answered"),
        "{end}"
    );
    assert_eq!(end["run_id"], session.as_str());
    hub.start_kill().expect("stop the hub");
    hub.wait().await.expect("the hub ended");
    assert_eq!(
        memories_with(dir.path(), "只写一次的事实"),
        1,
        "the command ran once across the restart"
    );
}

const CHART: &[u8] = b"\x89PNG\r\n\x1a\n agent chart across a restart";

/// `GET /files/ID` on the hub behind `ws_url`, as the tab's manager does it.
async fn fetch(ws_url: &str, id: &str, client: &str) -> (u16, Vec<u8>) {
    let base = ws_url
        .trim_start_matches("ws://")
        .trim_end_matches("/realtime");
    let r = aicard::http_client::plain()
        .get(format!("http://{base}/files/{id}"))
        .bearer_auth(TOKEN)
        .header("x-aicard-client", client)
        .send()
        .await
        .expect("GET /files/ID");
    let status = r.status().as_u16();
    (status, r.bytes().await.expect("body").to_vec())
}

/// The frames a tab gets until an agent `flow_event` in one of `states`: (the frames before, it).
async fn until_agent_event(tab: &mut ScriptedTab, states: &[&str]) -> (Vec<Value>, Value) {
    let mut before = Vec::new();
    loop {
        let v = tab.next_any().await;
        if v["type"] == "flow_event"
            && v["detail"]["kind"] == "agent"
            && states.contains(&v["state"].as_str().unwrap_or(""))
        {
            return (before, v);
        }
        before.push(v);
    }
}

/// A hub with an agent `researcher` on tab `kimi-1` whose `agent task … with files=[chart.png]`
/// was accepted and delivered (the tab holds the delivery, its turn not shown yet), then
/// SIGKILLed. Returns (the tab's client id, the first delivery).
async fn task_with_a_file_then_sigkill(dir: &Path) -> (String, Value) {
    std::fs::create_dir_all(dir.join("files")).expect("files folder");
    std::fs::write(dir.join("files").join("chart.png"), CHART).expect("the file");
    let (mut hub, url) = serve(dir).await;
    let mut boss =
        ScriptedTab::connect(&url, hello("boss", "deepseek", "master"), |_| Reply::Silent).await;
    let mut kimi =
        ScriptedTab::connect(&url, hello("kimi-1", "kimi", "worker"), |_| Reply::Silent).await;
    let made = boss.command("?<agent create researcher on kimi-1>!").await;
    assert_eq!(made["result"]["success"], true, "{made}");
    boss.send(json!({"type":"user_input",
        "text":"?<agent task researcher with files=[chart.png]: 这张图里画了什么？>!"}));
    let first = kimi.next("deliver").await;
    assert_eq!(
        first["attachments"].as_array().map(Vec::len),
        Some(1),
        "{first}"
    );
    let id = first["attachments"][0]["id"].as_str().unwrap();
    assert_eq!(
        fetch(&url, id, &kimi.client_id).await,
        (200, CHART.to_vec())
    );

    hub.start_kill().expect("SIGKILL the hub");
    hub.wait().await.expect("the hub ended");
    let client_id = kimi.client_id.clone();
    kimi.kill();
    boss.kill();
    (client_id, first)
}

/// The tab `kimi-1` back on the hub behind `url` with its client id.
async fn kimi_back(url: &str, client_id: &str) -> ScriptedTab {
    let mut back = hello("kimi-1", "kimi", "worker");
    back["client_id"] = json!(client_id);
    let kimi = ScriptedTab::connect(url, back, |_| Reply::Silent).await;
    assert_eq!(kimi.client_id, client_id, "the tab keeps its identity");
    kimi
}

/// What the store says a session has pending (NULL: nothing).
fn pending_of(dir: &Path, session: &str) -> Option<String> {
    let store = aicard::store::Store::open(dir).expect("open the store");
    aicard::agents::store::pending(&store, session).expect("read")
}

#[tokio::test]
async fn a_message_with_files_goes_again_with_them_after_a_sigkill() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (client_id, first) = task_with_a_file_then_sigkill(dir.path()).await;
    let session = first["agent"]["session"].as_str().unwrap().to_string();
    assert!(
        pending_of(dir.path(), &session).is_some_and(|p| p.contains(&sha256(CHART))),
        "journaled with its file"
    );

    let (mut hub, url) = serve(dir.path()).await;
    let mut kimi = kimi_back(&url, &client_id).await;
    // The ids of the delivery the tab held died with the old hub: that one can only fail.
    let old = first["attachments"][0]["id"].as_str().unwrap();
    assert_eq!(fetch(&url, old, &client_id).await.0, 404);
    let again = kimi.next("deliver").await;
    assert_eq!(again["agent"]["session"], session.as_str(), "{again}");
    assert_eq!(again["agent"]["round"], 0, "{again}");
    assert_ne!(again["deliver_id"], first["deliver_id"], "a new deliver id");
    assert!(
        again["text"]
            .as_str()
            .unwrap()
            .contains("这张图里画了什么？"),
        "{again}"
    );
    let att = again["attachments"]
        .as_array()
        .expect("attachments")
        .clone();
    assert_eq!(att.len(), 1, "the message goes with its file: {again}");
    assert_eq!(att[0]["name"], "chart.png");
    assert_eq!(att[0]["sha256"], sha256(CHART));
    let id = att[0]["id"].as_str().unwrap();
    assert_ne!(
        id,
        first["attachments"][0]["id"].as_str().unwrap(),
        "a fresh grant"
    );
    assert_eq!(fetch(&url, id, &client_id).await, (200, CHART.to_vec()));

    // A userscript that still held the old delivery says its file could not be fetched: that
    // delivery was replaced, so the session does not pause for it.
    kimi.send(
        json!({"type":"task_update","deliver_id":first["deliver_id"],"state":"failed",
        "error":"chart.png: HTTP 404"}),
    );
    // The turn shows: the grant goes, and so does the journaled file.
    let said = "图里是一张图表 ?<done 一张图表>!";
    kimi.send(json!({"type":"chunk","turn_id":"k1","seq":0,"text":said}));
    kimi.send(json!({"type":"turn_end","turn_id":"k1","text":said}));
    let (_, end) = until_agent_event(&mut kimi, &["ended", "paused"]).await;
    assert_eq!(end["state"], "ended", "{end}");
    assert_eq!(end["run_id"], session.as_str(), "{end}");
    assert_eq!(fetch(&url, id, &client_id).await.0, 404);
    hub.start_kill().expect("stop the hub");
    hub.wait().await.expect("the hub ended");
    assert_eq!(pending_of(dir.path(), &session), None, "cleared once seen");
}

#[tokio::test]
async fn a_message_whose_files_bytes_are_gone_pauses_instead_of_going_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (client_id, first) = task_with_a_file_then_sigkill(dir.path()).await;
    let session = first["agent"]["session"].as_str().unwrap().to_string();
    std::fs::remove_file(dir.path().join("blobs").join(sha256(CHART)))
        .expect("the kept bytes are there to delete");

    let (mut hub, url) = serve(dir.path()).await;
    let mut kimi = kimi_back(&url, &client_id).await;
    let (before, paused) = until_agent_event(&mut kimi, &["paused"]).await;
    assert_eq!(paused["run_id"], session.as_str(), "{paused}");
    let why = paused["detail"]["why"].as_str().unwrap();
    assert!(
        why.contains("chart.png") && why.contains("no longer has the bytes"),
        "{why}"
    );
    assert!(why.contains("集线器已没有文件"), "{why}");
    assert!(
        before.iter().all(|f| f["type"] != "deliver"),
        "nothing is sent without its file: {before:?}"
    );
    hub.start_kill().expect("stop the hub");
    hub.wait().await.expect("the hub ended");
}

fn sha256(bytes: &[u8]) -> String {
    aicard::skills::program::sha256_hex(bytes)
}

const SHOT: &str = "#!/usr/bin/env python3\n# name: shot\n# description: draws a picture\n\
# param color: string, required — the colour\n# returns: file\nimport json, os, sys\n\
a = json.load(sys.stdin)\n\
open(os.path.join(os.environ['AICARD_OUT'], 'shot.png'), 'wb').write(b'\\x89PNG\\r\\n\\x1a\\n' + a['color'].encode())\n\
print('drawn')\n";

/// A `returns: file` skill ran in a looping tab's round and the hub was SIGKILLed before the
/// round's results message: after the restart the turn is sent again, the skill's journaled
/// result is used (it does not run again), and the results message that says the file "is
/// attached" does carry it.
#[tokio::test]
async fn a_skills_file_of_a_round_cut_by_a_sigkill_goes_with_its_results_message() {
    if !have_python3() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let skills = dir.path().join("skills");
    std::fs::create_dir_all(&skills).expect("skills folder");
    std::fs::write(skills.join("shot.py"), SHOT).expect("the skill");
    let enabled = std::process::Command::new(env!("CARGO_BIN_EXE_aicard"))
        .args(["skill", "enable", "shot", "--skills"])
        .arg(&skills)
        .arg("--data-dir")
        .arg(dir.path())
        .output()
        .expect("aicard runs");
    assert!(enabled.status.success(), "{enabled:?}");
    let exec = ["--exec", "allowlist", "--allow", "skill:shot"];
    let (mut hub, url) = serve_with(dir.path(), &exec).await;
    let mut m =
        ScriptedTab::connect(&url, hello("m", "deepseek", "master"), |_| Reply::Silent).await;
    let on = m.command("?<agent loop on>!").await;
    assert_eq!(on["result"]["success"], true, "{on}");
    let turn = "t-shot-1";
    let text = "我画一张 ?<skill shot color=red>! 然后看看";
    m.send(json!({"type":"chunk","turn_id":turn,"seq":0,"text":text}));
    let running = agent_event(&mut m, &["running"]).await;
    let session = running["run_id"].as_str().unwrap().to_string();
    let ran = m.next("cmd_result").await;
    assert_eq!(ran["result"]["success"], true, "{ran}");
    assert!(
        ran["result"]["output"]
            .as_str()
            .unwrap()
            .contains("attached to this results message"),
        "{ran}"
    );
    hub.start_kill().expect("SIGKILL the hub");
    hub.wait().await.expect("the hub ended");
    let client_id = m.client_id.clone();
    m.kill();

    let (mut hub, url) = serve_with(dir.path(), &exec).await;
    let mut back = hello("m", "deepseek", "master");
    back["client_id"] = json!(client_id);
    let mut m = ScriptedTab::connect(&url, back, |_| Reply::Silent).await;
    m.send(json!({"type":"chunk","turn_id":turn,"seq":0,"text":text}));
    m.send(json!({"type":"turn_end","turn_id":turn,"text":text}));
    let d = m.next("deliver").await;
    assert_eq!(d["agent"]["session"], session.as_str(), "{d}");
    assert_eq!(d["agent"]["round"], 1, "{d}");
    assert!(
        d["text"]
            .as_str()
            .unwrap()
            .contains("attached to this results message"),
        "{d}"
    );
    let drawn = b"\x89PNG\r\n\x1a\nred";
    let att = d["attachments"]
        .as_array()
        .expect("the file goes with the results")
        .clone();
    assert_eq!(att.len(), 1, "{d}");
    assert_eq!(att[0]["name"], "shot.png");
    assert_eq!(att[0]["sha256"], sha256(drawn));
    let id = att[0]["id"].as_str().unwrap();
    assert_eq!(fetch(&url, id, &client_id).await, (200, drawn.to_vec()));
    hub.start_kill().expect("stop the hub");
    hub.wait().await.expect("the hub ended");
}
