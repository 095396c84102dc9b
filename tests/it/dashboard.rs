//! The dashboard's HTTP side on the real hub: embedded assets (ETag, CSP, no inline script),
//! login codes and the session cookie, the `/api/` checks (401, 403 on a foreign Origin, the
//! CSRF cases), `POST /api/flows/validate` byte-identical to `aicard flow validate`, runs
//! started and read through the API (attempts of a retried node), tab roles, and the event
//! stream resumed with `Last-Event-ID`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use aicard::dashboard::events::FeedPos;
use futures_util::StreamExt;
use serde_json::{json, Value};

fn client() -> reqwest::Client {
    aicard::http_client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

async fn hub() -> TestHub {
    let h = TestHub::start_with(|c| c.flows_dir = c.data_dir.join("flows")).await;
    std::fs::create_dir_all(&h.hub().config.flows_dir).unwrap();
    h
}

fn bearer() -> String {
    format!("Bearer {TOKEN}")
}

/// Logs in with a fresh code; the session cookie (`name=value`).
async fn login(h: &TestHub) -> String {
    let code = h.hub().dashboard.login_code();
    let r = client()
        .get(h.http_url(&format!("/login?code={code}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/");
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Strict"), "{cookie}");
    cookie.split(';').next().unwrap().to_string()
}

async fn json_of(r: reqwest::Response) -> Value {
    let status = r.status();
    let text = r.text().await.unwrap();
    serde_json::from_str(&text).unwrap_or_else(|_| panic!("{status}: {text}"))
}

#[tokio::test]
async fn assets_are_embedded_with_etag_and_a_strict_csp() {
    let h = hub().await;
    let r = client().get(h.http_url("/")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let csp = r.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(csp.contains("default-src 'self'"), "{csp}");
    assert!(csp.contains("script-src 'self'"), "{csp}");
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    let etag = r.headers()["etag"].to_str().unwrap().to_string();
    let html = r.text().await.unwrap();
    let expected = std::fs::read_to_string("dashboard/dist/index.html").unwrap();
    assert_eq!(html, expected, "served bytes are the committed build");
    // Every script is a file of the hub's own: no inline script.
    for tag in html.split("<script").skip(1) {
        let head = tag.split('>').next().unwrap();
        assert!(
            head.contains("src=\"/assets/"),
            "inline or foreign script: {head}"
        );
    }
    let again = client()
        .get(h.http_url("/"))
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);
    for file in ["app.js", "app.css"] {
        let r = client()
            .get(h.http_url(&format!("/assets/{file}")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{file}");
        assert!(r.headers().contains_key("etag"));
    }
    let r = client()
        .get(h.http_url("/"))
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "DNS rebinding: a foreign Host is refused");
}

#[tokio::test]
async fn api_needs_a_token_or_a_session_and_refuses_foreign_origins() {
    let h = hub().await;
    let c = client();
    let url = h.http_url("/api/tabs");
    assert_eq!(c.get(&url).send().await.unwrap().status(), 401);
    let bad = c.get(&url).header("authorization", "Bearer nope");
    assert_eq!(bad.send().await.unwrap().status(), 401);
    assert_eq!(
        c.get(&url)
            .header("authorization", bearer())
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    for origin in [
        "https://evil.example",
        "https://chat.deepseek.com",
        "http://127.0.0.1:1",
        "null",
    ] {
        let r = c
            .get(&url)
            .header("authorization", bearer())
            .header("origin", origin)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "{origin}");
    }
    let r = c
        .get(&url)
        .header("authorization", bearer())
        .header("host", "evil.example:80")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    // A made-up cookie is no session.
    let r = c
        .get(&url)
        .header("cookie", "aicard_session=forged")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
}

#[tokio::test]
async fn login_codes_are_one_time_and_open_a_session() {
    let h = hub().await;
    let c = client();
    let code = h.hub().dashboard.login_code();
    let first = c
        .get(h.http_url(&format!("/login?code={code}")))
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 303);
    let again = c
        .get(h.http_url(&format!("/login?code={code}")))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 403, "a code works once");
    let wrong = c.get(h.http_url("/login?code=guess")).send().await.unwrap();
    assert_eq!(wrong.status(), 403);

    let cookie = login(&h).await;
    let s = json_of(
        c.get(h.http_url("/api/session"))
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s["auth"], "session");
    assert!(s["csrf"].as_str().unwrap().len() >= 16);

    // `aicard open`'s request: a fresh code for the token only.
    let v = json_of(
        c.post(h.http_url("/api/login-codes"))
            .header("authorization", bearer())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert!(v["url"].as_str().unwrap().contains("/login?code="));
    let r = c
        .post(h.http_url("/api/login-codes"))
        .header("cookie", &cookie)
        .header("x-csrf-token", s["csrf"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "a session cannot mint login codes");
}

#[tokio::test]
async fn state_changing_requests_with_a_cookie_need_same_origin_or_the_csrf_token() {
    let h = hub().await;
    let c = client();
    let cookie = login(&h).await;
    let csrf = json_of(
        c.get(h.http_url("/api/session"))
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap(),
    )
    .await["csrf"]
        .as_str()
        .unwrap()
        .to_string();
    let url = h.http_url("/api/flows/validate");
    let body = "name: x\nnodes: [{id: a, prompt: hi}]\n";
    let post = || c.post(&url).header("cookie", &cookie).body(body);
    assert_eq!(
        post().send().await.unwrap().status(),
        403,
        "no Origin, no CSRF token"
    );
    let r = post().header("x-csrf-token", "wrong").send().await.unwrap();
    assert_eq!(r.status(), 403);
    let r = post().header("x-csrf-token", &csrf).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let own = format!("http://{}", h.running.addr);
    let r = post().header("origin", &own).send().await.unwrap();
    assert_eq!(r.status(), 200, "same-origin Origin");
    let r = post()
        .header("origin", "https://evil.example")
        .header("x-csrf-token", &csrf)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "foreign Origin even with the token");
    // Reads need neither.
    let r = c
        .get(h.http_url("/api/runs"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // The token alone (no cookie) needs no CSRF header.
    let r = c
        .post(&url)
        .header("authorization", bearer())
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

fn percent(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test]
async fn validate_is_byte_identical_to_the_cli() {
    let h = hub().await;
    let mut files: Vec<_> = std::fs::read_dir("tests/fixtures/invalid-flows")
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 6);
    files.push("flows/demo.yaml".into());
    for path in files {
        let name = path.display().to_string();
        let cli = std::process::Command::new(env!("CARGO_BIN_EXE_aicard"))
            .args(["flow", "validate", &name])
            .output()
            .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let r = client()
            .post(h.http_url(&format!("/api/flows/validate?file={}", percent(&name))))
            .header("authorization", bearer())
            .body(text.clone())
            .send()
            .await
            .unwrap();
        let valid = cli.status.success();
        assert_eq!(r.status().is_success(), valid, "{name}");
        let api = r.bytes().await.unwrap();
        assert_eq!(
            String::from_utf8_lossy(&api),
            String::from_utf8_lossy(&cli.stdout),
            "{name}"
        );
        assert_eq!(&api[..], &cli.stdout[..], "{name}");
        // The JSON form carries the same text and each diagnostic's line and column.
        let v = json_of(
            client()
                .post(h.http_url(&format!(
                    "/api/flows/validate?format=json&file={}",
                    percent(&name)
                )))
                .header("authorization", bearer())
                .body(text)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(v["output"].as_str().unwrap().as_bytes(), &cli.stdout[..]);
        assert_eq!(v["ok"], valid);
        if valid {
            assert!(v["graph"]["nodes"].as_array().unwrap().len() > 1);
        } else {
            let first = &v["diagnostics"][0];
            let line = String::from_utf8_lossy(&cli.stdout);
            let expect = format!("{name}:{}:{}: ", first["line"], first["col"]);
            assert!(line.starts_with(&expect), "{line} / {expect}");
        }
    }
}

const RETRY: &str = r#"
name: retry
nodes:
  - id: ask
    to: role:worker
    prompt: "hello {{ topic }}"
    retry: {max: 2, backoff: {initial: 10ms, factor: 2, max: 50ms}}
  - id: fan
    needs: ask
    for_each: {items: [a, b, c]}
    to: role:worker
    prompt: "item {{ item }}"
inputs: {topic: {default: "world"}}
"#;

async fn api_post(h: &TestHub, path: &str, body: Value) -> Value {
    json_of(
        client()
            .post(h.http_url(path))
            .header("authorization", bearer())
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap(),
    )
    .await
}

async fn api_get(h: &TestHub, path: &str) -> Value {
    json_of(
        client()
            .get(h.http_url(path))
            .header("authorization", bearer())
            .send()
            .await
            .unwrap(),
    )
    .await
}

/// Reads SSE events (id, event name, data) from `/api/events` until `stop` says so.
async fn read_events(
    h: &TestHub,
    query: &str,
    last_event_id: Option<&str>,
    mut stop: impl FnMut(&[(Option<String>, String, Value)]) -> bool,
) -> Vec<(Option<String>, String, Value)> {
    let mut req = client()
        .get(h.http_url(&format!("/api/events{query}")))
        .header("authorization", bearer());
    if let Some(id) = last_event_id {
        req = req.header("last-event-id", id);
    }
    let r = req.send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let mut body = r.bytes_stream();
    let mut buf = String::new();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(chunk) = body.next().await {
            buf.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
            while let Some(i) = buf.find("\n\n") {
                let block: String = buf.drain(..i + 2).collect();
                let (mut id, mut ev, mut data) = (None, String::from("message"), String::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().to_string());
                    } else if let Some(v) = line.strip_prefix("event:") {
                        ev = v.trim().to_string();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                if data.is_empty() {
                    continue;
                }
                out.push((id, ev, serde_json::from_str(&data).unwrap_or(Value::Null)));
                if stop(&out) {
                    return;
                }
            }
        }
    })
    .await
    .expect("events in time");
    out
}

fn finished(evs: &[(Option<String>, String, Value)]) -> bool {
    evs.iter().any(|(_, _, v)| {
        matches!(
            v["event"]["type"].as_str(),
            Some("run_completed" | "run_failed" | "run_stopped")
        )
    })
}

#[tokio::test]
async fn a_run_started_from_the_api_shows_both_attempts_and_the_events_resume() {
    let h = hub().await;
    std::fs::write(h.hub().config.flows_dir.join("retry.yaml"), RETRY).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let n = calls.clone();
    // One tab: its first answer fails, then it answers.
    let _tab = h
        .scripted("w1", "kimi", "worker", move |p: &str| {
            if n.fetch_add(1, Ordering::SeqCst) == 0 {
                Reply::Fail("429 rate limited".into())
            } else {
                Reply::Text(Duration::from_millis(5), format!("re: {p}"))
            }
        })
        .await;
    let tabs = api_get(&h, "/api/tabs").await;
    assert_eq!(tabs["tabs"][0]["label"], "w1");
    assert_eq!(tabs["tabs"][0]["state"], "idle");

    // Read from the journal's start while the run is started, to its end.
    let before = api_get(&h, "/api/runs").await;
    assert_eq!(before["runs"].as_array().unwrap().len(), 0);
    let reader = read_events(&h, "", Some("0"), finished);
    let started = api_post(
        &h,
        "/api/runs",
        json!({"flow": "retry", "inputs": {"topic": "dash"}}),
    );
    let (evs, started) = tokio::join!(reader, started);
    let run_id = started["run_id"].as_str().unwrap().to_string();
    let journal: Vec<_> = evs.iter().filter(|(_, e, _)| e == "journal").collect();
    assert!(journal.len() > 8, "{journal:?}");
    // ids are the global journal sequence: increasing by one here (one run).
    let ids: Vec<i64> = journal
        .iter()
        .map(|(id, _, _)| id.as_ref().unwrap().parse().unwrap())
        .collect();
    assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "{ids:?}");
    assert_eq!(ids[0], 1);

    // Resume after the 4th event: exactly the rest, in order, nothing twice.
    let cut = ids[3].to_string();
    let rest = read_events(&h, "", Some(&cut), finished).await;
    let rest_ids: Vec<i64> = rest
        .iter()
        .filter(|(_, e, _)| e == "journal")
        .map(|(id, _, _)| id.as_ref().unwrap().parse().unwrap())
        .collect();
    assert_eq!(rest_ids, ids[4..].to_vec());
    // The query parameter works the same (a page reopening its stream after a reload).
    let q = format!("?run={run_id}&last_event_id={cut}");
    let same = read_events(&h, &q, None, finished).await;
    let same_ids: Vec<i64> = same
        .iter()
        .filter(|(_, e, _)| e == "journal")
        .map(|(id, _, _)| id.as_ref().unwrap().parse().unwrap())
        .collect();
    assert_eq!(same_ids, rest_ids);

    // The run's detail: states, the retried node's two attempts, the fan-out's counts.
    let d = api_get(&h, &format!("/api/runs/{run_id}")).await;
    assert_eq!(d["status"], "completed", "{d}");
    assert_eq!(d["seq"], json!(ids.last().unwrap()));
    let ask = &d["nodes"][0];
    assert_eq!(ask["state"], "completed");
    let atts = ask["items"][0]["attempts"].as_array().unwrap();
    assert_eq!(atts.len(), 2, "{ask}");
    assert_eq!(atts[0]["outcome"], "failed");
    assert!(atts[0]["error"]
        .as_str()
        .unwrap()
        .contains("429 rate limited"));
    assert_eq!(atts[1]["outcome"], "completed");
    assert_eq!(atts[1]["client"], "w1");
    assert!(atts[1]["total_ms"].is_number());
    assert!(ask["items"][0]["why"].as_str().unwrap().contains("w1"));
    let fan = &d["nodes"][1];
    assert_eq!(fan["total"], 3);
    assert_eq!(fan["counts"]["completed"], 3);
    assert_eq!(d["graph"]["nodes"][1]["fanout"], true);
    // The node panel's rendered prompts.
    let node = api_get(&h, &format!("/api/runs/{run_id}/nodes/ask")).await;
    assert_eq!(
        node["items"][0]["attempts"][1]["prompt"], "hello dash",
        "{node}"
    );
    let list = api_get(&h, "/api/runs").await;
    assert_eq!(list["runs"][0]["run_id"], run_id.as_str());
}

#[tokio::test]
async fn pause_resume_stop_and_errors_of_runs() {
    let h = hub().await;
    std::fs::write(h.hub().config.flows_dir.join("retry.yaml"), RETRY).unwrap();
    let r = api_post(&h, "/api/runs", json!({"flow": "nope"})).await;
    assert!(r["error"].as_str().unwrap().contains("nope"));
    // A source given with the request is saved under its name and run.
    let src = "name: quick\nnodes:\n  - id: a\n    command: \"?<echo hi>!\"\n";
    let r = api_post(&h, "/api/runs", json!({"flow": "", "source": src})).await;
    let id = r["run_id"].as_str().unwrap().to_string();
    assert!(id.starts_with("quick-"));
    let bad = api_post(&h, "/api/runs", json!({"flow": "", "source": "name: [\n"})).await;
    assert!(
        bad["error"].as_str().unwrap().contains("flow.yaml:"),
        "{bad}"
    );
    // No worker tab: the run waits, so it can be paused, resumed and stopped.
    let r = api_post(&h, "/api/runs", json!({"flow": "retry"})).await;
    let id = r["run_id"].as_str().unwrap().to_string();
    for action in ["pause", "resume", "stop"] {
        let v = api_post(&h, &format!("/api/runs/{id}/{action}"), json!({})).await;
        assert_eq!(v["ok"], true, "{action}: {v}");
    }
    let evs = read_events(&h, &format!("?run={id}"), Some("0"), finished).await;
    let types: Vec<&str> = evs
        .iter()
        .filter_map(|(_, _, v)| v["event"]["type"].as_str())
        .collect();
    for t in ["run_started", "run_paused", "run_resumed", "run_stopped"] {
        assert!(types.contains(&t), "{t} in {types:?}");
    }
}

#[tokio::test]
async fn a_tabs_role_changes_through_the_role_command_code() {
    let h = hub().await;
    let mut tab = h
        .scripted("w1", "kimi", "worker", |_: &str| Reply::Silent)
        .await;
    let v = api_post(
        &h,
        &format!("/api/tabs/{}/role", tab.client_id),
        json!({"role": "foreman", "group": "g1"}),
    )
    .await;
    assert_eq!(v["ok"], true, "{v}");
    let welcome = tab.next("welcome").await;
    assert_eq!(welcome["role"], "foreman");
    assert_eq!(welcome["group"], "g1");
    let tabs = api_get(&h, "/api/tabs").await;
    assert_eq!(tabs["tabs"][0]["role"], "foreman");
    assert_eq!(tabs["tabs"][0]["group"], "g1");
    let v = api_post(&h, "/api/tabs/nobody/role", json!({"role": "worker"})).await;
    assert!(v["error"].is_string());
}

const CHUNKS: &str = r#"
name: chunks
nodes:
  - id: streamed
    to: streamer
    prompt: "stream it"
  - id: whole
    to: whole
    prompt: "in one piece"
"#;

/// The one attempt of `node`'s item 0, as the run's detail and its node view show it.
async fn only_attempt(h: &TestHub, run_id: &str, node: &str) -> Value {
    let d = api_get(h, &format!("/api/runs/{run_id}")).await;
    let n = d["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == node)
        .unwrap_or_else(|| panic!("no node {node}: {d}"))
        .clone();
    assert_eq!(n["state"], "completed", "{n}");
    let atts = n["items"][0]["attempts"].as_array().unwrap();
    assert_eq!(atts.len(), 1, "{n}");
    let from_node = api_get(h, &format!("/api/runs/{run_id}/nodes/{node}")).await;
    let a = from_node["items"][0]["attempts"][0].clone();
    assert_eq!(a["first_chunk_ms"], atts[0]["first_chunk_ms"], "{a}");
    atts[0].clone()
}

#[tokio::test]
async fn an_attempts_first_chunk_time_is_recorded_when_its_tab_streamed() {
    let h = hub().await;
    std::fs::write(h.hub().config.flows_dir.join("chunks.yaml"), CHUNKS).unwrap();
    // Each waits before answering (the model thinking); one streams its reply, one does not.
    let _streamer = h
        .scripted("streamer", "kimi", "worker", |p: &str| {
            Reply::Text(Duration::from_millis(60), format!("re: {p}"))
        })
        .await;
    let _whole = h
        .scripted("whole", "deepseek", "worker", |p: &str| {
            Reply::Unstreamed(Duration::from_millis(20), format!("re: {p}"))
        })
        .await;
    let started = api_post(&h, "/api/runs", json!({"flow": "chunks"})).await;
    let run_id = started["run_id"].as_str().unwrap().to_string();
    let evs = read_events(&h, &format!("?run={run_id}"), Some("0"), finished).await;
    let outputs: Vec<&Value> = evs
        .iter()
        .map(|(_, _, v)| &v["event"])
        .filter(|e| e["type"] == "item_output")
        .collect();
    assert_eq!(outputs.len(), 2, "{evs:?}");
    for e in &outputs {
        let recorded = e.get("first_chunk_at_ms").is_some();
        assert_eq!(recorded, e["node"] == "streamed", "{e}");
    }

    let a = only_attempt(&h, &run_id, "streamed").await;
    assert_eq!(a["client"], "streamer");
    let first = a["first_chunk_ms"]
        .as_i64()
        .unwrap_or_else(|| panic!("{a}"));
    let total = a["total_ms"].as_i64().unwrap();
    // The tab took 60 ms before its first chunk, counted from the attempt's start.
    assert!(first >= 60, "first chunk {first} ms: {a}");
    assert!(
        first <= total,
        "first chunk {first} ms after a total of {total} ms: {a}"
    );
    assert!(a["queue_ms"].as_i64().unwrap() <= first, "{a}");

    let b = only_attempt(&h, &run_id, "whole").await;
    assert_eq!(b["client"], "whole");
    assert!(b["total_ms"].is_number(), "{b}");
    assert_eq!(b["first_chunk_ms"], Value::Null, "streamed nothing: {b}");
}

/// Every event of the stream carries an `id:` (the hello, tab and run events too, not only
/// journal rows), and a resume with `Last-Event-ID` after any of them gives exactly the
/// journal rows that followed it: no gap, nothing twice.
#[tokio::test]
async fn every_event_carries_an_id_and_a_resume_after_any_of_them_misses_nothing() {
    let h = hub().await;
    std::fs::write(h.hub().config.flows_dir.join("retry.yaml"), RETRY).unwrap();
    let _tab = h
        .scripted("w1", "kimi", "worker", |p: &str| {
            Reply::Text(Duration::from_millis(5), format!("re: {p}"))
        })
        .await;
    // Read from the journal's start until the run's end event (`event: run`).
    let run_end = |evs: &[(Option<String>, String, Value)]| evs.iter().any(|(_, e, _)| e == "run");
    let reader = read_events(&h, "", Some("0"), run_end);
    let started = api_post(&h, "/api/runs", json!({"flow": "retry"}));
    let (evs, started) = tokio::join!(reader, started);
    assert!(started["run_id"].is_string(), "{started}");
    for (id, name, data) in &evs {
        assert!(
            id.as_deref().and_then(FeedPos::parse).is_some(),
            "an event without an id: {name} {data}"
        );
    }
    let kinds: Vec<&str> = evs.iter().map(|(_, e, _)| e.as_str()).collect();
    assert_eq!(kinds[0], "hello");
    assert_eq!(kinds.last(), Some(&"run"));
    // Resume after every event that is not a journal row (and after a journal row).
    let journal_after = |i: usize| -> Vec<String> {
        evs[i + 1..]
            .iter()
            .filter(|(_, e, _)| e == "journal")
            .map(|(id, _, _)| id.clone().unwrap())
            .collect()
    };
    let cuts: Vec<usize> = (0..evs.len())
        .filter(|&i| evs[i].1 != "journal" || i == 3)
        .collect();
    assert!(cuts.len() >= 3, "{kinds:?}");
    for i in cuts {
        let want = journal_after(i);
        let at = evs[i].0.clone().unwrap();
        let n = want.len();
        let got = read_events(&h, "", Some(&at), |evs| {
            evs.iter().filter(|(_, e, _)| e == "journal").count() >= n
        })
        .await;
        let got: Vec<String> = got
            .iter()
            .filter(|(_, e, _)| e == "journal")
            .map(|(id, _, _)| id.clone().unwrap())
            .collect();
        assert_eq!(
            got, want,
            "resumed after {} (id {at}): the journal rows after it",
            evs[i].1
        );
    }
}

/// One open `/api/events` stream read event by event: (id, event name, data).
struct Events {
    body: futures_util::stream::BoxStream<'static, reqwest::Result<axum::body::Bytes>>,
    buf: String,
}

type Ev = (String, String, Value);

impl Events {
    async fn open(h: &TestHub, last_event_id: Option<&str>) -> Events {
        let mut req = client()
            .get(h.http_url("/api/events"))
            .header("authorization", bearer());
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), 200);
        Events {
            body: r.bytes_stream().boxed(),
            buf: String::new(),
        }
    }

    /// The next event, or None when none comes within `wait`.
    async fn next_within(&mut self, wait: Duration) -> Option<Ev> {
        tokio::time::timeout(wait, async {
            loop {
                while let Some(i) = self.buf.find("\n\n") {
                    let block: String = self.buf.drain(..i + 2).collect();
                    let (mut id, mut ev, mut data) = (None, String::from("message"), String::new());
                    for line in block.lines() {
                        if let Some(v) = line.strip_prefix("id:") {
                            id = Some(v.trim().to_string());
                        } else if let Some(v) = line.strip_prefix("event:") {
                            ev = v.trim().to_string();
                        } else if let Some(v) = line.strip_prefix("data:") {
                            data.push_str(v.trim_start());
                        }
                    }
                    if data.is_empty() {
                        continue;
                    }
                    let id = id.unwrap_or_else(|| panic!("an event without an id: {ev} {data}"));
                    return (id, ev, serde_json::from_str(&data).unwrap());
                }
                let chunk = self.body.next().await.expect("stream open").unwrap();
                self.buf.push_str(&String::from_utf8_lossy(&chunk));
            }
        })
        .await
        .ok()
    }

    async fn next(&mut self) -> Ev {
        self.next_within(WAIT).await.expect("an event in time")
    }

    /// Events until one satisfies `stop` (included).
    async fn until(&mut self, stop: impl Fn(&Ev) -> bool) -> Vec<Ev> {
        let mut out = Vec::new();
        loop {
            let e = self.next().await;
            let done = stop(&e);
            out.push(e);
            if done {
                return out;
            }
        }
    }
}

/// An event id as the stream orders them: `J` (journal row J) or `J.K` (the K-th event after
/// it that is not a journal row).
fn event_pos(id: &str) -> FeedPos {
    FeedPos::parse(id).unwrap_or_else(|| panic!("id {id}"))
}

/// Ids never repeat and only grow on one stream, whatever the kind of event (journal rows,
/// tab and run events), and a reconnect with `Last-Event-ID` set to any of them gets exactly
/// the events that followed it — tab and run events too — none twice.
#[tokio::test]
async fn event_ids_only_grow_and_a_resume_gets_exactly_the_events_missed() {
    let h = hub().await;
    std::fs::write(h.hub().config.flows_dir.join("retry.yaml"), RETRY).unwrap();
    let mut live = Events::open(&h, Some("0")).await;
    let hello = live.next().await;
    assert_eq!(hello.1, "hello");
    let _w1 = h
        .scripted("w1", "kimi", "worker", |p: &str| {
            Reply::Text(Duration::from_millis(5), format!("re: {p}"))
        })
        .await;
    let mut evs = live
        .until(|(_, e, d)| e == "tab" && d["kind"] == "connected")
        .await;
    let started = api_post(&h, "/api/runs", json!({"flow": "retry"})).await;
    assert!(started["run_id"].is_string(), "{started}");
    evs.extend(live.until(|(_, e, _)| e == "run").await);
    // A second tab comes and goes after the run.
    let w2 = h.scripted("w2", "kimi", "worker", |_| Reply::Silent).await;
    evs.extend(
        live.until(|(_, e, d)| e == "tab" && d["kind"] == "connected")
            .await,
    );
    w2.kill();
    evs.extend(
        live.until(|(_, e, d)| e == "tab" && d["kind"] != "connected")
            .await,
    );
    let ids: Vec<&str> = evs.iter().map(|(id, _, _)| id.as_str()).collect();
    for pair in evs.windows(2) {
        assert!(
            event_pos(&pair[0].0) < event_pos(&pair[1].0),
            "ids must grow: {} ({}) then {} ({}) in {ids:?}",
            pair[0].0,
            pair[0].1,
            pair[1].0,
            pair[1].1
        );
    }
    let kinds: Vec<&str> = evs.iter().map(|(_, e, _)| e.as_str()).collect();
    assert!(
        kinds.contains(&"journal") && kinds.contains(&"run"),
        "{kinds:?}"
    );
    // Resume after each event: exactly what followed it...
    let mut streams = Vec::new();
    for i in 0..evs.len() {
        let at = &evs[i].0;
        let mut resumed = Events::open(&h, Some(at)).await;
        let hello = resumed.next().await;
        assert_eq!(hello.1, "hello", "{hello:?}");
        assert_eq!(&hello.0, at, "the hello stands where the client stood");
        let want = &evs[i + 1..];
        let mut got = Vec::new();
        while got.len() < want.len() {
            match resumed.next_within(Duration::from_secs(2)).await {
                Some(e) => got.push(e),
                None => break,
            }
        }
        assert_eq!(
            got.iter().map(|(id, e, _)| (id, e)).collect::<Vec<_>>(),
            want.iter().map(|(id, e, _)| (id, e)).collect::<Vec<_>>(),
            "resumed after {} (id {at})",
            evs[i].1
        );
        assert_eq!(got, want, "resumed after id {at}");
        streams.push(resumed);
    }
    // ...then nothing more: every resumed stream goes on with exactly what the live one gets
    // next, up to a third tab's arrival (the run may still be journaling before it: on a busy
    // machine its last rows come after the events above).
    let _w3 = h.scripted("w3", "kimi", "worker", |_| Reply::Silent).await;
    let next = live
        .until(|(_, e, d)| e == "tab" && d["kind"] == "connected")
        .await;
    for s in &mut streams {
        for want in &next {
            assert_eq!(&s.next().await, want);
        }
    }
}

/// `FILE:LINE:COL: MESSAGE` lines, as `aicard flow validate` prints them, as JSON.
fn cli_diagnostics(out: &str) -> Vec<Value> {
    out.lines()
        .map(|l| {
            let mut parts = l.splitn(4, ':');
            let (file, line, col, msg) = (
                parts.next().unwrap(),
                parts.next().unwrap(),
                parts.next().unwrap(),
                parts.next().unwrap(),
            );
            json!({"file": file, "line": line.parse::<u64>().unwrap(),
                   "col": col.parse::<u64>().unwrap(), "message": msg.strip_prefix(' ').unwrap()})
        })
        .collect()
}

/// Validate-and-run refuses an invalid flow with 422 and JSON: `error` (the CLI's text) and
/// each diagnostic as `{file, line, col, message}`, the CLI's own — for flow text sent with
/// the request and for a flow file of the flows directory alike; the validate API's JSON form
/// names each diagnostic's file too.
#[tokio::test]
async fn validate_and_run_refuses_an_invalid_flow_with_the_clis_diagnostics_as_json() {
    let h = hub().await;
    let mut files: Vec<_> = std::fs::read_dir("tests/fixtures/invalid-flows")
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        // Sent with the request, under the editor's file name.
        let name = path.display().to_string();
        let cli = std::process::Command::new(env!("CARGO_BIN_EXE_aicard"))
            .args(["flow", "validate", &name])
            .output()
            .unwrap();
        let cli = String::from_utf8(cli.stdout).unwrap();
        let r = client()
            .post(h.http_url("/api/runs"))
            .header("authorization", bearer())
            .header("content-type", "application/json")
            .body(json!({"flow": "x", "source": text, "file": name}).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 422, "{name}");
        let v = json_of(r).await;
        assert_eq!(v["error"], cli.as_str(), "{name}: {v}");
        assert_eq!(v["diagnostics"], json!(cli_diagnostics(&cli)), "{name}");
        let checked = json_of(
            client()
                .post(h.http_url(&format!(
                    "/api/flows/validate?format=json&file={}",
                    percent(&name)
                )))
                .header("authorization", bearer())
                .body(text.clone())
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(checked["diagnostics"], v["diagnostics"], "{name}");
        // A file of the flows directory, run by name.
        let stem = format!("bad-{}", path.file_stem().unwrap().to_string_lossy());
        let file = h.hub().config.flows_dir.join(format!("{stem}.yaml"));
        std::fs::write(&file, &text).unwrap();
        let cli = std::process::Command::new(env!("CARGO_BIN_EXE_aicard"))
            .args(["flow", "validate", &file.display().to_string()])
            .output()
            .unwrap();
        let cli = String::from_utf8(cli.stdout).unwrap();
        let r = client()
            .post(h.http_url("/api/runs"))
            .header("authorization", bearer())
            .header("content-type", "application/json")
            .body(json!({"flow": stem}).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 422, "{stem}");
        let v = json_of(r).await;
        assert_eq!(
            v["diagnostics"],
            json!(cli_diagnostics(&cli)),
            "{stem}: {v}"
        );
        assert!(v["error"].as_str().unwrap().contains(cli.trim_end()), "{v}");
    }
    // A body that is not the run's JSON: the same shape, no diagnostics.
    let r = client()
        .post(h.http_url("/api/runs"))
        .header("authorization", bearer())
        .header("content-type", "application/json")
        .body(r#"{"inputs": 3}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    let v = json_of(r).await;
    assert!(v["error"].is_string(), "{v}");
    assert_eq!(v["diagnostics"], json!([]), "{v}");
}

/// Percent-encodes every byte but letters, digits, `-` and `_` (so `/` reaches the handler).
fn every_byte(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `PUT /api/flows/NAME` with the token: (status, JSON answer).
async fn put_flow(h: &TestHub, name: &str, body: Value) -> (u16, Value) {
    let r = client()
        .put(h.http_url(&format!("/api/flows/{}", every_byte(name))))
        .header("authorization", bearer())
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

const SAVED: &str =
    "# a comment kept as written\nname: saved\nnodes:\n  - id: a   # first\n    prompt: hi\n";

#[tokio::test]
async fn the_designer_saves_a_flow_file_after_validation_and_refuses_a_stale_version() {
    let h = hub().await;
    let dir = h.hub().config.flows_dir.clone();
    let path = dir.join("saved.yaml");
    // New file: no base; written byte for byte, its hash answered and read back.
    let (status, v) = put_flow(&h, "saved", json!({"source": SAVED})).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), SAVED);
    let got = api_get(&h, "/api/flows/saved?file=1").await;
    assert_eq!(got["source"], SAVED);
    assert_eq!(got["file"], "saved.yaml");
    assert_eq!(got["hash"], v["hash"]);
    let base = v["hash"].as_str().unwrap().to_string();
    // A new file over an existing one is refused: the designer did not open it.
    let (status, v) = put_flow(&h, "saved", json!({"source": SAVED})).await;
    assert_eq!(status, 409, "{v}");
    assert_eq!(v["disk"], SAVED);
    // Invalid text: 422 with the CLI's diagnostics, the file untouched.
    let bad = "name: saved\nnodes:\n  - id: a\n    promtp: hi\n";
    let (status, v) = put_flow(&h, "saved", json!({"source": bad, "base": base})).await;
    assert_eq!(status, 422, "{v}");
    assert_eq!(v["diagnostics"][0]["line"], 4, "{v}");
    assert!(v["error"].as_str().unwrap().contains("promtp"), "{v}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), SAVED);
    // The opened version: saved; the answer's hash is the next base.
    let next = SAVED.replace("hi", "hello");
    let (status, v) = put_flow(&h, "saved", json!({"source": next, "base": base})).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), next);
    // Someone changes the file on disk: a save from the old version is refused, showing the
    // disk's text and hash; the disk's version stays.
    let theirs = SAVED.replace("hi", "theirs");
    std::fs::write(&path, &theirs).unwrap();
    let (status, v) = put_flow(&h, "saved", json!({"source": SAVED, "base": v["hash"]})).await;
    assert_eq!(status, 409, "{v}");
    assert_eq!(v["disk"], theirs.as_str());
    assert!(
        v["error"].as_str().unwrap().contains("changed on disk"),
        "{v}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), theirs);
    // With the disk's hash it goes through; no temporary file is left behind.
    let (status, _) = put_flow(
        &h,
        "saved",
        json!({"source": SAVED, "base": v["disk_hash"]}),
    )
    .await;
    assert_eq!(status, 200);
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, vec!["saved.yaml".to_string()]);
    // The saved file is what `aicard flow validate` accepts.
    assert!(
        aicard::flows::load_str("saved.yaml", &std::fs::read_to_string(&path).unwrap()).is_ok()
    );
}

#[tokio::test]
async fn the_designer_writes_only_into_the_flows_folder_and_needs_the_csrf_token() {
    let h = hub().await;
    let dir = h.hub().config.flows_dir.clone();
    for bad in ["../escape", "a/b", "a\\b", ".hidden", "x..y", "../../etc/x"] {
        let (status, v) = put_flow(&h, bad, json!({"source": SAVED})).await;
        assert_eq!(status, 400, "{bad}: {v}");
        assert!(
            v["error"].as_str().unwrap().contains("bad flow file name"),
            "{v}"
        );
    }
    // `..` itself is a dot segment the client resolves before sending: never a write either.
    let (status, _) = put_flow(&h, "..", json!({"source": SAVED})).await;
    assert_ne!(status, 200);
    assert!(!dir.parent().unwrap().join("escape.yaml").exists());
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "nothing written"
    );
    let r = client()
        .get(h.http_url("/api/flows/..%2Fx?file=1"))
        .header("authorization", bearer())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    // A browser session needs the CSRF token or its own Origin; a foreign Origin never.
    let cookie = login(&h).await;
    let c = client();
    let csrf = json_of(
        c.get(h.http_url("/api/session"))
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap(),
    )
    .await["csrf"]
        .as_str()
        .unwrap()
        .to_string();
    let url = h.http_url("/api/flows/mine");
    let body = json!({"source": SAVED}).to_string();
    let put = || {
        c.put(&url)
            .header("cookie", &cookie)
            .header("content-type", "application/json")
            .body(body.clone())
    };
    assert_eq!(put().send().await.unwrap().status(), 403);
    let r = put()
        .header("origin", "https://evil.example")
        .header("x-csrf-token", &csrf)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert!(!dir.join("mine.yaml").exists());
    let r = put().header("x-csrf-token", &csrf).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        std::fs::read_to_string(dir.join("mine.yaml")).unwrap(),
        SAVED
    );
    // Without the `file` query the flow's source is read as before.
    let v = api_get(&h, "/api/flows/mine").await;
    assert_eq!(v["source"], SAVED);
}
