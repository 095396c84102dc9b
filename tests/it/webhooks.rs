//! Signed callbacks (docs/cluster.md) against a real receiver on a real socket: the signature checks
//! out, a receiver that fails first gets the event again with the same delivery id and lands
//! it once, and a refusal (4xx) is final; and a real hub's flow run announced to a receiver.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aicard::webhooks::{sign, Delivery, Webhooks};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

const SECRET: &str = "webhook-test-secret";

/// What the receiver saw, and what it answers next.
#[derive(Default)]
struct Receiver {
    /// (delivery id, event, signature ok, body) per request.
    seen: Mutex<Vec<(String, String, bool, serde_json::Value)>>,
    /// Status codes to answer, in order; 200 once they run out.
    answers: Mutex<Vec<u16>>,
    arrived: Notify,
}

async fn receive(State(r): State<Arc<Receiver>>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let h = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let ok = h("x-aicard-signature") == sign(SECRET.as_bytes(), &body);
    let json = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    r.seen
        .lock()
        .unwrap()
        .push((h("x-aicard-delivery"), h("x-aicard-event"), ok, json));
    let status = {
        let mut a = r.answers.lock().unwrap();
        if a.is_empty() {
            200
        } else {
            a.remove(0)
        }
    };
    r.arrived.notify_one();
    StatusCode::from_u16(status).unwrap()
}

async fn start_receiver(answers: Vec<u16>) -> (Arc<Receiver>, String) {
    let r = Arc::new(Receiver {
        answers: Mutex::new(answers),
        ..Receiver::default()
    });
    let app = axum::Router::new()
        .route("/hook", post(receive))
        .with_state(r.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (r, url)
}

async fn wait_for(r: &Receiver, n: usize) {
    tokio::time::timeout(Duration::from_secs(10), async {
        while r.seen.lock().unwrap().len() < n {
            r.arrived.notified().await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{n} requests did not arrive"));
}

fn fast() -> Delivery {
    Delivery {
        first_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(100),
        ..Delivery::default()
    }
}

#[tokio::test]
async fn a_receiver_that_fails_then_succeeds_gets_the_event_once_signed() {
    let (r, url) = start_receiver(vec![500, 503]).await;
    let (shutdown, tracker) = (CancellationToken::new(), TaskTracker::new());
    let hooks = Webhooks::start(
        vec![url.parse().unwrap()],
        SECRET,
        fast(),
        shutdown.clone(),
        &tracker,
    );
    hooks.publish(
        "flow_complete",
        serde_json::json!({"run": "r1", "state": "completed"}),
    );
    wait_for(&r, 3).await;
    let seen = r.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3, "two failures, then the landing");
    assert!(seen.iter().all(|(_, _, ok, _)| *ok), "every try is signed");
    assert!(
        seen.iter().all(|(id, _, _, _)| *id == seen[0].0),
        "one delivery id"
    );
    assert_eq!(seen[0].1, "flow_complete");
    assert_eq!(seen[0].3["data"]["run"], "r1");
    assert_eq!(seen[0].3["delivery"], seen[0].0.as_str());
    let s = hooks.stats();
    use std::sync::atomic::Ordering::Relaxed;
    tokio::time::timeout(
        Duration::from_secs(10),
        s.wait_until(|s| s.delivered.load(Relaxed) == 1),
    )
    .await
    .expect("the landing is counted");
    assert_eq!(
        (
            s.delivered.load(Relaxed),
            s.retried.load(Relaxed),
            s.failed.load(Relaxed)
        ),
        (1, 2, 0)
    );
    // The signature is the receiver's to check: a wrong secret does not match.
    assert_ne!(
        sign(b"another", seen[0].3.to_string().as_bytes()),
        sign(SECRET.as_bytes(), seen[0].3.to_string().as_bytes())
    );
    shutdown.cancel();
}

#[tokio::test]
async fn a_refusal_is_final_and_filters_pick_the_events() {
    let (r, url) = start_receiver(vec![400]).await;
    let (shutdown, tracker) = (CancellationToken::new(), TaskTracker::new());
    let hooks = Webhooks::start(
        vec![format!("{url}#node_error,flow_complete").parse().unwrap()],
        SECRET,
        fast(),
        shutdown.clone(),
        &tracker,
    );
    hooks.publish("node_start", serde_json::json!({}));
    hooks.publish("node_error", serde_json::json!({"node": "a"}));
    hooks.publish("flow_complete", serde_json::json!({"run": "r2"}));
    wait_for(&r, 2).await;
    let seen = r.seen.lock().unwrap().clone();
    let events: Vec<&str> = seen.iter().map(|s| s.1.as_str()).collect();
    assert_eq!(
        events,
        ["node_error", "flow_complete"],
        "node_start is filtered out"
    );
    use std::sync::atomic::Ordering::Relaxed;
    let counted =
        |s: &aicard::webhooks::Stats| s.delivered.load(Relaxed) + s.failed.load(Relaxed) == 2;
    tokio::time::timeout(Duration::from_secs(10), hooks.stats().wait_until(counted))
        .await
        .expect("both outcomes are counted");
    assert_eq!(
        hooks.stats().failed.load(Relaxed),
        1,
        "the 400 is not retried"
    );
    assert_eq!(hooks.stats().delivered.load(Relaxed), 1);
    shutdown.cancel();
}

fn echo_back(prompt: &str) -> common::Reply {
    common::Reply::Text(Duration::ZERO, format!("echo: {prompt}"))
}

const TWO_STEPS: &str = r#"
name: two
nodes:
  - id: ask
    to: w1
    prompt: "say hi"
  - id: out
    needs: ask
    to: master
    prompt: "${ask.output}"
"#;

/// `serve --webhook URL#…` on a real hub: a flow run's lifecycle reaches the receiver in order,
/// signed with `--webhook-secret`, filtered to the events asked for.
#[tokio::test]
async fn a_flow_run_is_announced_to_the_webhook_in_order() {
    let (r, url) = start_receiver(vec![]).await;
    let h = common::TestHub::start_with(|c| {
        c.flows_dir = c.data_dir.join("flows");
        c.webhooks = vec![
            format!("{url}#flow_start,node_start,node_complete,flow_complete")
                .parse()
                .unwrap(),
        ];
        c.webhook_secret = Some(SECRET.into());
    })
    .await;
    common::write_flow(&h.hub().config.flows_dir, "two", TWO_STEPS);
    let ws = h.ws_url("/realtime");
    let mut master =
        common::ScriptedTab::connect(&ws, common::hello("boss", "chatgpt", "master"), echo_back)
            .await;
    let _w1 =
        common::ScriptedTab::connect(&ws, common::hello("w1", "sim", "worker"), echo_back).await;
    let (state, _) = common::run_flow(&mut master, "?<manager run two>!").await;
    assert_eq!(state, "completed");
    // flow_start, node_start ×2, node_complete ×2, flow_complete.
    wait_for(&r, 6).await;
    let seen = r.seen.lock().unwrap().clone();
    let events: Vec<&str> = seen.iter().map(|s| s.1.as_str()).collect();
    assert_eq!(events.first(), Some(&"flow_start"), "{events:?}");
    assert_eq!(events.last(), Some(&"flow_complete"), "{events:?}");
    assert_eq!(
        events.iter().filter(|e| **e == "node_complete").count(),
        2,
        "{events:?}"
    );
    assert!(
        seen.iter().all(|(_, _, ok, _)| *ok),
        "signed with --webhook-secret"
    );
    let run = seen[0].3["data"]["run"].as_str().unwrap().to_string();
    assert!(seen.iter().all(|s| s.3["data"]["run"] == run.as_str()));
    assert_eq!(seen.last().unwrap().3["data"]["state"], "completed");
    assert!(
        !h.dir.path().join("webhook-secret").exists(),
        "the given secret is not stored"
    );
}

/// `data_published` (docs/cluster.md) is a lifecycle event too: every `?<publish …>!` reaches a
/// webhook that asks for it, with its topic, text and author, signed.
#[tokio::test]
async fn a_publish_is_called_back_as_data_published() {
    let (r, url) = start_receiver(vec![]).await;
    let h = common::TestHub::start_with(|c| {
        c.webhooks = vec![format!("{url}#data_published").parse().unwrap()];
        c.webhook_secret = Some(SECRET.into());
    })
    .await;
    let ws = h.ws_url("/realtime");
    let mut master =
        common::ScriptedTab::connect(&ws, common::hello("boss", "chatgpt", "master"), echo_back)
            .await;
    let r1 = master.command("?<publish sales.daily 今天 42 单>!").await;
    assert_eq!(r1["result"]["success"], true, "{r1}");
    wait_for(&r, 1).await;
    let seen = r.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "only data_published was asked for");
    let (_, event, signed, body) = &seen[0];
    assert_eq!(event, "data_published");
    assert!(signed);
    assert_eq!(body["data"]["topic"], "sales.daily");
    assert_eq!(body["data"]["text"], "今天 42 单");
    assert_eq!(body["data"]["from"], master.client_id.as_str());
}
