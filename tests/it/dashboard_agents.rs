//! The dashboard's Agents page API on the real hub (issue 30): a scripted looping master's
//! session and its round appear in `/api/agents` and `/api/agents/sessions/{id}`; the API's
//! checks (401 without a token, 403 for a foreign Origin, 404 for an unknown session) hold;
//! Stop through the API ends the session at the tab within 1 s, and the list then says why.

use crate::common;

use std::time::{Duration, Instant};

use common::{agent_event, Reply, ScriptedTab, TestHub, TOKEN};
use serde_json::{json, Value};

fn client() -> reqwest::Client {
    aicard::http_client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

fn bearer() -> String {
    format!("Bearer {TOKEN}")
}

async fn get(h: &TestHub, path: &str) -> (u16, Value) {
    let r = client()
        .get(h.http_url(path))
        .header("authorization", bearer())
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("{status}: {text}")),
    )
}

async fn post(h: &TestHub, path: &str) -> (u16, Value) {
    let r = client()
        .post(h.http_url(path))
        .header("authorization", bearer())
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("{status}: {text}")),
    )
}

/// The model of a tab writes one turn.
fn say(tab: &ScriptedTab, turn: &str, text: &str) {
    tab.send(json!({"type":"chunk","turn_id":turn,"seq":0,"text":text}));
    tab.send(json!({"type":"turn_end","turn_id":turn,"text":text}));
}

#[tokio::test]
async fn the_agents_api_lists_a_looping_session_its_rounds_and_stops_it() {
    let hub = TestHub::start().await;
    let mut m = hub
        .scripted("m", "deepseek", "master", |_| {
            Reply::Text(Duration::ZERO, "unused".into())
        })
        .await;
    let on = m.command("?<agent loop on>!").await;
    assert_eq!(on["result"]["success"], true, "{on}");
    say(&m, "t1", "先看看技能 ?<skill list>! 然后继续");
    let d = m.next("deliver").await;
    assert_eq!(d["agent"]["round"], 1, "{d}");

    // The session, live, with its round.
    let (status, list) = get(&hub, "/api/agents").await;
    assert_eq!(status, 200, "{list}");
    assert!(list["agents"].is_array(), "{list}");
    let sessions = list["sessions"].as_array().unwrap();
    let s = sessions
        .iter()
        .find(|s| s["state"] == "running")
        .unwrap_or_else(|| panic!("no running session: {list}"));
    assert_eq!(s["round"], 1, "{s}");
    assert_eq!(s["of"], 25, "{s}");
    assert_eq!(s["live"], true, "{s}");
    let id = s["id"].as_str().unwrap().to_string();

    let (status, one) = get(&hub, &format!("/api/agents/sessions/{id}")).await;
    assert_eq!(status, 200, "{one}");
    assert_eq!(one["session"]["id"], id.as_str(), "{one}");
    let rounds = one["rounds"].as_array().unwrap();
    assert_eq!(rounds.len(), 1, "{one}");
    assert_eq!(rounds[0]["round"], 1, "{one}");
    let cmd = &rounds[0]["commands"][0];
    assert_eq!(cmd["command"], "skill list", "{one}");
    assert!(cmd["ok"].is_boolean(), "{one}");
    assert!(cmd["output"].is_string(), "{one}");

    // The same checks as every /api route.
    let r = client()
        .get(hub.http_url("/api/agents"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = client()
        .post(hub.http_url(&format!("/api/agents/sessions/{id}/stop")))
        .header("authorization", bearer())
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);

    // Unknown sessions and actions: a clear 404.
    let (status, err) = get(&hub, "/api/agents/sessions/nope").await;
    assert_eq!(status, 404, "{err}");
    assert!(err["error"].as_str().unwrap().contains("nope"), "{err}");
    let (status, err) = post(&hub, "/api/agents/sessions/nope/stop").await;
    assert_eq!(status, 404, "{err}");
    let (status, err) = post(&hub, &format!("/api/agents/sessions/{id}/jump")).await;
    assert_eq!(status, 404, "{err}");

    // Pause and resume, then Stop: the tab hears the end within a second.
    let (status, r) = post(&hub, &format!("/api/agents/sessions/{id}/pause")).await;
    assert_eq!(status, 200, "{r}");
    agent_event(&mut m, &["paused"]).await;
    let (status, r) = post(&hub, &format!("/api/agents/sessions/{id}/resume")).await;
    assert_eq!(status, 200, "{r}");
    let t0 = Instant::now();
    let (status, r) = post(&hub, &format!("/api/agents/sessions/{id}/stop")).await;
    assert_eq!(status, 200, "{r}");
    let end = agent_event(&mut m, &["ended"]).await;
    assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
    assert!(
        end["detail"]["why"].as_str().unwrap().contains("stopped"),
        "{end}"
    );

    // The list says it ended, and why; a second Stop has nothing to stop.
    let (_, list) = get(&hub, "/api/agents").await;
    let s = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id.as_str())
        .unwrap_or_else(|| panic!("{list}"));
    assert_eq!(s["state"], "ended", "{s}");
    assert!(s["why"].as_str().unwrap().contains("stopped"), "{s}");
    let (status, r) = post(&hub, &format!("/api/agents/sessions/{id}/stop")).await;
    assert_eq!(status, 409, "{r}");
}
