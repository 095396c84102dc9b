//! Files in the agent loop, over real sockets (docs/files.md "Back", docs/agents.md): `agent task
//! NAME with files=[…] TEXT` attaches the files to the session's first message; a `returns: file`
//! skill's file goes with the next results message; each `deliver`'s `attachments` can be fetched
//! from `GET /files/ID` by its tab only, and only while the tab holds the delivery (until the turn
//! it starts shows); a name out of the files folder is refused with nothing sent; a delivery the tab
//! could not send (a refused file) pauses the session with the tab's words.

use crate::common;

use std::path::Path;
use std::time::Duration;

use aicard::config::ExecFlag;
use common::{agent_event, fetch_file, have_python3, Reply, ScriptedTab, TestHub, TOKEN};
use serde_json::{json, Value};

/// The model of a tab writes one turn.
fn say(tab: &ScriptedTab, turn: &str, text: &str) {
    tab.send(json!({"type":"chunk","turn_id":turn,"seq":0,"text":text}));
    tab.send(json!({"type":"turn_end","turn_id":turn,"text":text}));
}

async fn quiet(h: &TestHub, label: &str, site: &str, role: &str) -> ScriptedTab {
    h.scripted(label, site, role, |_| {
        Reply::Text(Duration::ZERO, "unused".into())
    })
    .await
}

fn sha256(bytes: &[u8]) -> String {
    aicard::skills::program::sha256_hex(bytes)
}

const CHART: &[u8] = b"\x89PNG\r\n\x1a\n agent chart";

#[tokio::test]
async fn agent_task_with_files_attaches_them_to_the_first_message_only_while_the_tab_holds_it() {
    let h = TestHub::start().await;
    let folder = h.dir.path().join("files");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("chart.png"), CHART).unwrap();
    std::fs::write(h.dir.path().join("secret.txt"), b"secret").unwrap();
    let mut boss = quiet(&h, "boss", "deepseek", "master").await;
    let mut kimi = quiet(&h, "kimi-1", "kimi", "worker").await;
    let other = quiet(&h, "other", "qianwen", "worker").await;
    let made = boss
        .command("?<agent create researcher on kimi-1 with tools=[tabs,memory]>!")
        .await;
    assert_eq!(made["result"]["success"], true, "{made}");

    // A name out of the files folder (or missing) is refused, and nothing reaches the tab.
    for bad in ["../secret.txt", "/etc/passwd", "missing.png"] {
        let r = boss
            .command(&format!(
                "?<agent task researcher with files=[{bad}] 看看这个>!"
            ))
            .await;
        assert_eq!(r["result"]["success"], false, "{bad}: {r}");
        let out = r["result"]["output"].as_str().unwrap();
        assert!(out.contains(bad.trim_start_matches("../")), "{bad}: {out}");
    }

    boss.send(json!({"type":"user_input",
        "text":"?<agent task researcher with files=[chart.png]: 这张图里画了什么？>!"}));
    // The tab's first delivery is this task's (the refused ones sent nothing).
    let first = kimi.next("deliver").await;
    assert_eq!(first["agent"]["round"], 0, "{first}");
    assert!(
        first["text"]
            .as_str()
            .unwrap()
            .contains("这张图里画了什么？"),
        "{first}"
    );
    let att = first["attachments"]
        .as_array()
        .expect("attachments")
        .clone();
    assert_eq!(att.len(), 1, "{first}");
    assert_eq!(att[0]["name"], "chart.png");
    assert_eq!(att[0]["mime"], "image/png");
    assert_eq!(att[0]["size"], CHART.len());
    assert_eq!(att[0]["sha256"], sha256(CHART));
    let id = att[0]["id"].as_str().unwrap();
    // Its tab fetches the same bytes while it holds the delivery; no other tab can.
    assert_eq!(
        fetch_file(&h, id, &kimi.client_id).await,
        (200, CHART.to_vec())
    );
    assert_eq!(fetch_file(&h, id, &other.client_id).await.0, 404);
    // The turn the delivery started shows: the grant is gone.
    say(&kimi, "k1", "图里是一张图表 ?<done 一张图表>!");
    let answer = boss.next("cmd_result").await;
    assert_eq!(answer["result"]["success"], true, "{answer}");
    assert_eq!(answer["result"]["output"], "一张图表", "{answer}");
    assert_eq!(fetch_file(&h, id, &kimi.client_id).await.0, 404);
}

const SHOT: &str = "#!/usr/bin/env python3\n# name: shot\n# description: draws a picture\n\
# param color: string, required — the colour\n# returns: file\nimport json, os, sys\n\
a = json.load(sys.stdin)\n\
open(os.path.join(os.environ['AICARD_OUT'], 'shot.png'), 'wb').write(b'\\x89PNG\\r\\n\\x1a\\n' + a['color'].encode())\n\
print('drawn')\n";

/// `aicard skill enable NAME` in the person's terminal, on the hub's store.
fn enable(h: &TestHub, dir: &Path, name: &str) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_aicard"))
        .args(["skill", "enable", name, "--skills"])
        .arg(dir)
        .arg("--data-dir")
        .arg(h.dir.path())
        .output()
        .expect("aicard runs");
    assert!(out.status.success(), "{out:?}");
}

#[tokio::test]
async fn a_skills_file_goes_with_the_next_results_message_and_a_refused_one_pauses_the_loop() {
    if !have_python3() {
        return;
    }
    let skills = tempfile::tempdir().unwrap();
    std::fs::write(skills.path().join("shot.py"), SHOT).unwrap();
    let dir = skills.path().to_path_buf();
    let h = TestHub::start_with(move |c| {
        c.skills_dir = dir;
        c.exec_mode = ExecFlag::Allowlist;
        c.exec_allow = vec!["skill:shot".into()];
    })
    .await;
    enable(&h, skills.path(), "shot");
    h.hub().commands.skills.reload();
    let mut m = quiet(&h, "m", "deepseek", "master").await;
    let other = quiet(&h, "w", "kimi", "worker").await;
    let on = m.command("?<agent loop on>!").await;
    assert_eq!(on["result"]["success"], true, "{on}");

    say(&m, "t1", "我画一张 ?<skill shot color=red>!");
    let d = m.next("deliver").await;
    assert_eq!(d["agent"]["round"], 1, "{d}");
    let text = d["text"].as_str().unwrap();
    assert!(text.contains("⟦aicard result 1/1⟧"), "{text}");
    assert!(
        text.contains("shot.png") && text.contains("attached to this results message"),
        "the result names the file it carries: {text}"
    );
    let drawn = b"\x89PNG\r\n\x1a\nred";
    let att = d["attachments"].as_array().expect("attachments").clone();
    assert_eq!(att.len(), 1, "{d}");
    assert_eq!(att[0]["name"], "shot.png");
    assert_eq!(att[0]["mime"], "image/png");
    assert_eq!(att[0]["sha256"], sha256(drawn));
    let id = att[0]["id"].as_str().unwrap();
    assert_eq!(
        fetch_file(&h, id, &m.client_id).await,
        (200, drawn.to_vec())
    );
    assert_eq!(
        fetch_file(&h, id, &other.client_id).await.0,
        404,
        "another tab"
    );

    // The next round carries only its own files: none here.
    say(&m, "t2", "再看看 ?<echo again>!");
    let d2 = m.next("deliver").await;
    assert_eq!(d2["agent"]["round"], 2, "{d2}");
    assert!(d2.get("attachments").is_none(), "{d2}");
    assert_eq!(
        fetch_file(&h, id, &m.client_id).await.0,
        404,
        "the delivery was seen"
    );

    // A delivery whose file the site refuses: the tab says so, the session pauses with its words.
    say(&m, "t3", "再画一张 ?<skill shot color=blue>!");
    let d3 = m.next("deliver").await;
    assert_eq!(d3["attachments"].as_array().map(Vec::len), Some(1), "{d3}");
    m.send(
        json!({"type":"task_update","deliver_id":d3["deliver_id"],"state":"failed",
        "trouble":"attachment_refused","error":"shot.png: the site does not take this type"}),
    );
    let paused = agent_event(&mut m, &["paused"]).await;
    let why = paused["detail"]["why"].as_str().unwrap();
    assert!(
        why.contains("shot.png: the site does not take this type"),
        "{why}"
    );
    let gone = d3["attachments"][0]["id"].as_str().unwrap();
    assert_eq!(fetch_file(&h, gone, &m.client_id).await.0, 404, "withdrawn");
    // Resume: the same message goes again, with its file under a new id.
    m.send(json!({"type":"user_input","text":"?<agent resume>!"}));
    let again = m.next("deliver").await;
    assert_eq!(again["text"], d3["text"]);
    let id2 = again["attachments"][0]["id"].as_str().unwrap();
    assert_ne!(id2, gone);
    assert_eq!(
        fetch_file(&h, id2, &m.client_id).await,
        (200, b"\x89PNG\r\n\x1a\nblue".to_vec())
    );
}

/// The OpenAI door's `agent/NAME` model takes an image like a tab model does: kept before the
/// session starts, it rides on the session's first message; `flow/…` still refuses files.
#[tokio::test]
async fn the_openai_door_gives_an_agent_its_image_with_the_first_message() {
    use base64::Engine as _;
    let h = TestHub::start().await;
    let mut boss = quiet(&h, "boss", "deepseek", "master").await;
    let mut kimi = quiet(&h, "kimi-1", "kimi", "worker").await;
    let made = boss.command("?<agent create looker on kimi-1>!").await;
    assert_eq!(made["result"]["success"], true, "{made}");
    let url = h.http_url("/v1/chat/completions");
    let data = base64::engine::general_purpose::STANDARD.encode(CHART);
    let post = move |model: &str| {
        let body = json!({"model": model, "messages": [{"role": "user", "content": [
            {"type": "text", "text": "图里是什么？"},
            {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{data}")}},
        ]}]});
        aicard::http_client::plain()
            .post(url.clone())
            .header("authorization", format!("Bearer {TOKEN}"))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
    };
    let flow = post("flow/anything").await.unwrap();
    assert_eq!(flow.status(), 400);
    let err: Value = serde_json::from_str(&flow.text().await.unwrap()).unwrap();
    assert_eq!(err["error"]["code"], "unsupported_parameter", "{err}");

    let asked = tokio::spawn(post("agent/looker"));
    let first = kimi.next("deliver").await;
    assert!(
        first["text"].as_str().unwrap().contains("图里是什么？"),
        "{first}"
    );
    let att = first["attachments"]
        .as_array()
        .expect("attachments")
        .clone();
    assert_eq!(att.len(), 1, "{first}");
    assert_eq!(att[0]["mime"], "image/png");
    assert_eq!(att[0]["sha256"], sha256(CHART));
    let id = att[0]["id"].as_str().unwrap();
    assert_eq!(
        fetch_file(&h, id, &kimi.client_id).await,
        (200, CHART.to_vec())
    );
    say(&kimi, "k1", "?<done 一张图表>!");
    let r = asked.await.unwrap().unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
    assert_eq!(
        body["choices"][0]["message"]["content"], "一张图表",
        "{body}"
    );
}
