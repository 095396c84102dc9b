//! docs/agents.md "never twice … sessions survive a hub restart", with a real kill: the `aicard
//! serve` binary is SIGKILLed after a looping tab's command ran and before its results were
//! delivered, and started again on the same data dir. The tab reconnects and sends its turn
//! again: the session goes on from where it was, and the command does not run a second time
//! (its result comes from the journal keyed by (tab, turn, index)).

use crate::common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::{agent_event, hello, Reply, ScriptedTab, TOKEN};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// `aicard serve` on port 0 over `dir`, sending results at once (`--agent-gap 0-0`); returns
/// the child and its WebSocket URL once it listens.
async fn serve(dir: &Path) -> (Child, String) {
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
