//! Hub foundation, over real sockets: refusals, identity and resume, bad frames, limits,
//! heartbeats, slow consumers, the SSE+POST transport, task queues, 1,000 tabs, shutdown.

use crate::common;

use std::time::Duration;

use aicard::app::RunningHub;
use aicard::hub::tasks::TaskRequest;
use aicard::hub::HubEvent;
use aicard::protocol::ServerFrame;
use common::*;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;

fn http_status(err: tokio_tungstenite::tungstenite::Error) -> StatusCode {
    match err {
        tokio_tungstenite::tungstenite::Error::Http(resp) => resp.status(),
        other => panic!("expected an HTTP refusal, got {other}"),
    }
}

#[tokio::test]
async fn welcome_gives_id_role_and_heartbeat() {
    let h = TestHub::start().await;
    let (_ws, welcome) = h.tab("deepseek", Some("ds-1")).await;
    assert_eq!(welcome["role"], "worker");
    assert_eq!(welcome["label"], "ds-1");
    assert_eq!(welcome["heartbeat_ms"], 200);
    assert_eq!(welcome["client_id"].as_str().unwrap().len(), 36);
}

#[tokio::test]
async fn refuses_bad_token() {
    let h = TestHub::start().await;
    let mut ws = h.connect("/realtime").await;
    send(&mut ws, &json!({"type":"hello","token":"wrong","site":"x"})).await;
    let err = recv(&mut ws).await;
    assert_eq!(err["type"], "error");
    assert_eq!(err["code"], "bad_token");
    assert_eq!(close_code(&mut ws).await, Some(CloseCode::Policy));
}

#[tokio::test]
async fn refuses_foreign_host_and_origin_before_upgrade() {
    let h = TestHub::start().await;
    let e = h
        .connect_with("/realtime", &[("Host", "evil.example:8027")])
        .await
        .expect_err("bad host refused");
    assert_eq!(http_status(e), StatusCode::FORBIDDEN);
    let e = h
        .connect_with("/realtime", &[("Origin", "https://evil.example")])
        .await
        .expect_err("bad origin refused");
    assert_eq!(http_status(e), StatusCode::FORBIDDEN);
    let e = h
        .connect_with("/heartbeat", &[("Origin", "http://claude.ai")])
        .await
        .expect_err("plain-http chat origin refused");
    assert_eq!(http_status(e), StatusCode::FORBIDDEN);
    // A real chat site's origin and the hub's own are fine.
    h.connect_with("/realtime", &[("Origin", "https://chat.deepseek.com")])
        .await
        .expect("chat origin allowed");
    let own = h.http_url("");
    h.connect_with("/realtime", &[("Origin", own.as_str())])
        .await
        .expect("hub origin allowed");
}

#[tokio::test]
async fn closes_a_socket_that_never_says_hello() {
    let h = TestHub::start().await;
    let mut ws = h.connect("/realtime").await;
    assert_eq!(close_code(&mut ws).await, Some(CloseCode::Policy));
}

#[tokio::test]
async fn first_frame_must_be_hello() {
    let h = TestHub::start().await;
    let mut ws = h.connect("/realtime").await;
    send(&mut ws, &json!({"type":"chunk","turn_id":"a","text":"x"})).await;
    let err = recv(&mut ws).await;
    assert_eq!(err["code"], "hello_required");
    assert_eq!(close_code(&mut ws).await, Some(CloseCode::Policy));
}

#[tokio::test]
async fn bad_json_and_unknown_types_get_errors_and_the_connection_lives() {
    let h = TestHub::start().await;
    let (mut ws, _) = h.tab("deepseek", None).await;
    send_raw(&mut ws, "{not json").await;
    let e = recv(&mut ws).await;
    assert_eq!(e["type"], "error");
    assert_eq!(e["code"], "bad_json");
    send(&mut ws, &json!({"type":"self_destruct"})).await;
    let e = recv(&mut ws).await;
    assert_eq!(e["code"], "unknown_type");
    assert!(e["message"].as_str().unwrap().contains("self_destruct"));
    send(&mut ws, &json!({"type":"hello","token":TOKEN})).await;
    assert_eq!(recv(&mut ws).await["code"], "hello_required");
    // An ack over WebSocket is accepted and ignored.
    send(&mut ws, &json!({"type":"ack","received":"welcome"})).await;
    // Still alive: a heartbeat gets its answer.
    send(&mut ws, &json!({"type":"heartbeat","time":1})).await;
    assert_eq!(recv(&mut ws).await["type"], "heartbeat");
}

#[tokio::test]
async fn oversized_frame_closes_1009_and_the_hub_keeps_running() {
    let h = TestHub::start_with(|c| c.limits.max_frame_bytes = 16 * 1024).await;
    let (mut ws, _) = h.tab("deepseek", None).await;
    let big = "x".repeat(64 * 1024);
    let _ = ws
        .send(Message::Text(
            json!({"type":"chunk","turn_id":"a","text":big})
                .to_string()
                .into(),
        ))
        .await;
    assert_eq!(close_code(&mut ws).await, Some(CloseCode::Size));
    let (_ws2, welcome) = h.tab("deepseek", None).await;
    assert_eq!(welcome["type"], "welcome");
}

#[tokio::test]
async fn resume_keeps_identity_and_delivers_what_waited() {
    let h = TestHub::start().await;
    let mut events = h.hub().events.subscribe();
    let (ws, welcome) = h.tab("qianwen", Some("qw")).await;
    let id = welcome["client_id"].as_str().unwrap().to_string();
    drop(ws);
    wait_event(&mut events, |e| *e == HubEvent::Disconnected(id.clone())).await;
    // Sent while the tab is away: kept for it.
    let frame = ServerFrame::Deliver {
        text: "while you were away".into(),
        auto_send: false,
        run_id: None,
        deliver_id: None,
        agent: None,
    };
    h.hub().registry.send(&id, &frame).unwrap();
    let mut ws = h.connect("/realtime").await;
    send(
        &mut ws,
        &json!({"type":"hello","token":TOKEN,"client_id":id,"site":"qianwen"}),
    )
    .await;
    let w = recv(&mut ws).await;
    assert_eq!(w["client_id"], id.as_str());
    assert_eq!(w["label"], "qw");
    let d = recv(&mut ws).await;
    assert_eq!(d["type"], "deliver");
    assert_eq!(d["text"], "while you were away");
}

#[tokio::test]
async fn resume_after_hub_restart_uses_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let mk = || {
        let mut c = aicard::config::HubConfig::for_tests(dir.path().to_path_buf());
        c.token = Some(TOKEN.into());
        c
    };
    let hello = json!({"type":"hello","token":TOKEN,"site":"kimi","label":"k1"});
    let (running, mut ws, welcome) = start_with_tab(mk(), hello).await;
    let id = welcome["client_id"].as_str().unwrap().to_string();
    stop(running).await;
    assert_eq!(close_code(&mut ws).await, Some(CloseCode::Away));

    let back = json!({"type":"hello","token":TOKEN,"client_id":id,"site":"kimi"});
    let (running, _ws, w) = start_with_tab(mk(), back).await;
    assert_eq!(w["client_id"], id.as_str());
    assert_eq!(w["label"], "k1");
    stop(running).await;
}

#[tokio::test]
async fn a_silent_tab_is_marked_lost_and_its_task_fails_over() {
    let h = TestHub::start().await;
    let mut events = h.hub().events.subscribe();
    let (mut ws, welcome) = h.tab("doubao", None).await;
    let id = welcome["client_id"].as_str().unwrap().to_string();
    let client = h.hub().registry.get(&id).unwrap();
    let tasks = h.hub().tasks.clone();
    let ask = tokio::spawn(async move {
        tasks
            .ask(&client, TaskRequest::new("hello?", Duration::from_secs(10)))
            .await
    });
    let task = recv_type(&mut ws, "task").await;
    assert_eq!(task["prompt"], "hello?");
    // Stop reading: pings go unanswered, the hub times the tab out.
    wait_event(&mut events, |e| *e == HubEvent::Disconnected(id.clone())).await;
    wait_event(&mut events, |e| *e == HubEvent::Lost(id.clone())).await;
    let result = tokio::time::timeout(WAIT, ask).await.unwrap().unwrap();
    assert!(
        matches!(result, Err(aicard::hub::tasks::TaskError::TabLost(_))),
        "{result:?}"
    );
    drop(ws);
}

#[tokio::test]
async fn a_tab_that_answers_pings_stays_connected_past_the_silence_limit() {
    let h = TestHub::start().await;
    let dead_after = h.hub().config.timing.dead_after;
    let mut events = h.hub().events.subscribe();
    let (mut ws, welcome) = h.tab("kimi", None).await;
    let id = welcome["client_id"].as_str().unwrap().to_string();
    // Reading answers the hub's pings (the client library sends the pongs): the socket's
    // one timer keeps moving its silence deadline, for four times the limit.
    let until = tokio::time::Instant::now() + dead_after * 4;
    let mut pings = 0;
    while let Ok(msg) = tokio::time::timeout_at(until, ws.next()).await {
        match msg {
            Some(Ok(Message::Ping(_))) => pings += 1,
            Some(Ok(_)) => {}
            other => panic!("the hub ended a tab that answers its pings: {other:?}"),
        }
    }
    assert!(pings >= 4, "pings every ping_interval, got {pings}");
    while let Ok(e) = events.try_recv() {
        assert_ne!(
            e,
            HubEvent::Disconnected(id.clone()),
            "disconnected while answering"
        );
    }
    assert_eq!(
        h.hub().registry.get(&id).unwrap().state(),
        aicard::hub::registry::ConnState::Connected
    );
}

#[tokio::test]
async fn a_slow_consumer_is_closed_not_buffered() {
    let h = TestHub::start_with(|c| {
        c.limits.outbound_queue = 4;
        c.timing.dead_after = Duration::from_secs(30);
    })
    .await;
    let mut events = h.hub().events.subscribe();
    let (mut ws, welcome) = h.tab("chatgpt", None).await;
    let id = welcome["client_id"].as_str().unwrap().to_string();
    let big = "y".repeat(256 * 1024);
    let frame = ServerFrame::Deliver {
        text: big,
        auto_send: false,
        run_id: None,
        deliver_id: None,
        agent: None,
    };
    // The tab does not read; the socket buffers fill, then the bounded queue does.
    let mut closed = false;
    for _ in 0..2000 {
        if h.hub().registry.send(&id, &frame).unwrap()
            == aicard::hub::registry::Sent::SlowConsumerClosed
        {
            closed = true;
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(closed, "the hub never gave up on the slow tab");
    // The close frame is queued behind the unfinished frame; the tab reads on at once and
    // sees the rest of that frame, then 4008.
    let code = close_code(&mut ws).await;
    assert_eq!(code, Some(CloseCode::Library(4008)));
    wait_event(&mut events, |e| *e == HubEvent::Disconnected(id.clone())).await;
}

#[tokio::test]
async fn tasks_queue_per_tab_one_at_a_time() {
    let h = TestHub::start().await;
    let (mut ws, welcome) = h.tab("claude", Some("cl")).await;
    let client = h
        .hub()
        .registry
        .get(welcome["client_id"].as_str().unwrap())
        .unwrap();
    let mut asks = Vec::new();
    for i in 0..3 {
        let tasks = h.hub().tasks.clone();
        let client = client.clone();
        asks.push(tokio::spawn(async move {
            tasks
                .ask(
                    &client,
                    TaskRequest::new(format!("q{i}"), Duration::from_secs(10)),
                )
                .await
        }));
        // Make the queue order deterministic.
        tokio::task::yield_now().await;
    }
    let mut seen = Vec::new();
    for _ in 0..3 {
        let task = answer_task(&mut ws, |p| format!("answer to {p}")).await;
        seen.push(task["prompt"].as_str().unwrap().to_string());
        // The next task is only sent after this one's turn_end.
    }
    seen.sort();
    assert_eq!(seen, vec!["q0", "q1", "q2"]);
    for a in asks {
        let r = a.await.unwrap().unwrap();
        assert!(r.starts_with("answer to q"), "{r}");
    }
}

#[tokio::test]
async fn the_persons_own_chat_in_a_worker_tab_does_not_answer_its_task() {
    let h = TestHub::start().await;
    let (mut ws, welcome) = h.tab("deepseek", Some("w")).await;
    let client = h
        .hub()
        .registry
        .get(welcome["client_id"].as_str().unwrap())
        .unwrap();
    let tasks = h.hub().tasks.clone();
    let ask = tokio::spawn(async move {
        tasks
            .ask(
                &client,
                TaskRequest::new("the task", Duration::from_secs(10)),
            )
            .await
    });
    let task = recv_type(&mut ws, "task").await;
    // The person chats in the tab while the task is in flight: an untagged turn.
    send(
        &mut ws,
        &json!({"type":"turn_end","turn_id":"mine","text":"the person's chat"}),
    )
    .await;
    send(
        &mut ws,
        &json!({"type":"turn_end","turn_id":"t","text":"the task's answer","task_id":task["task_id"]}),
    )
    .await;
    let answer = tokio::time::timeout(WAIT, ask).await.unwrap().unwrap();
    assert_eq!(answer.unwrap(), "the task's answer");
}

#[tokio::test]
async fn a_frame_naming_a_task_the_tab_does_not_hold_gets_unknown_task() {
    let h = TestHub::start().await;
    let (mut ws, welcome) = h.tab("deepseek", Some("a")).await;
    let (mut other, _) = h.tab("kimi", Some("b")).await;
    let client = h
        .hub()
        .registry
        .get(welcome["client_id"].as_str().unwrap())
        .unwrap();
    let tasks = h.hub().tasks.clone();
    let ask = tokio::spawn(async move {
        tasks
            .ask(
                &client,
                TaskRequest::new("the task", Duration::from_secs(10)),
            )
            .await
    });
    let task = recv_type(&mut ws, "task").await;
    let id = task["task_id"].as_str().unwrap();
    // Another tab names a's task; a names a task that does not exist.
    send(
        &mut other,
        &json!({"type":"turn_end","turn_id":"x","text":"not yours","task_id":id}),
    )
    .await;
    let e = recv(&mut other).await;
    assert_eq!(
        (&e["type"], &e["code"]),
        (&json!("error"), &json!("unknown_task")),
        "{e}"
    );
    assert!(e["message"].as_str().unwrap().contains(id), "{e}");
    send(
        &mut ws,
        &json!({"type":"turn_end","turn_id":"y","text":"stale","task_id":"gone"}),
    )
    .await;
    assert_eq!(recv(&mut ws).await["code"], "unknown_task");
    send(
        &mut ws,
        &json!({"type":"task_update","task_id":"gone","state":"failed","error":"x"}),
    )
    .await;
    assert_eq!(recv(&mut ws).await["code"], "unknown_task");
    // Both tabs stay connected, and the task was completed by neither frame.
    send(&mut other, &json!({"type":"heartbeat","time":1})).await;
    assert_eq!(recv(&mut other).await["type"], "heartbeat");
    send(
        &mut ws,
        &json!({"type":"turn_end","turn_id":"t","text":"the answer","task_id":id}),
    )
    .await;
    // The `done` a tab reports after its turn_end is no unknown task: the next frame the
    // tab gets is the heartbeat's answer, not an error.
    send(
        &mut ws,
        &json!({"type":"task_update","task_id":id,"state":"done"}),
    )
    .await;
    send(&mut ws, &json!({"type":"heartbeat","time":1})).await;
    assert_eq!(recv(&mut ws).await["type"], "heartbeat");
    let answer = tokio::time::timeout(WAIT, ask).await.unwrap().unwrap();
    assert_eq!(answer.unwrap(), "the answer");
}

#[tokio::test]
async fn a_binary_frame_gets_bad_frame_and_the_socket_lives() {
    let h = TestHub::start().await;
    let (mut ws, welcome) = h.tab("deepseek", None).await;
    ws.send(Message::Binary(vec![1, 2, 3].into()))
        .await
        .unwrap();
    let e = recv(&mut ws).await;
    assert_eq!(e["code"], "bad_frame", "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("text frames only"),
        "{e}"
    );
    send(&mut ws, &json!({"type":"heartbeat","time":1})).await;
    assert_eq!(recv(&mut ws).await["type"], "heartbeat");
    // The same on /heartbeat.
    let mut hb = h.connect("/heartbeat").await;
    send(
        &mut hb,
        &json!({"type":"hello","token":TOKEN,"client_id":welcome["client_id"]}),
    )
    .await;
    hb.send(Message::Binary(vec![0].into())).await.unwrap();
    assert_eq!(recv(&mut hb).await["code"], "bad_frame");
}

#[tokio::test]
async fn a_ping_gets_its_pong_and_a_request_that_is_no_websocket_is_told_why() {
    let h = TestHub::start().await;
    let (mut ws, _) = h.tab("kimi", None).await;
    ws.send(Message::Ping(b"are you there".to_vec().into()))
        .await
        .unwrap();
    let pong = tokio::time::timeout(WAIT, async {
        loop {
            match ws.next().await.expect("open").expect("read") {
                Message::Pong(p) => return p,
                _ => continue, // the hub's own pings
            }
        }
    })
    .await
    .expect("a pong in time");
    assert_eq!(&pong[..], b"are you there");
    send(&mut ws, &json!({"type":"heartbeat","time":1})).await;
    assert_eq!(recv(&mut ws).await["type"], "heartbeat");

    let http = aicard::http_client::plain();
    let plain = http.get(h.http_url("/realtime")).send().await.unwrap();
    assert_eq!(plain.status().as_u16(), 426);
    let why = plain.text().await.unwrap();
    assert!(
        why.contains("WebSocket only") && why.contains("只接受"),
        "{why}"
    );
    let old = http
        .get(h.http_url("/realtime"))
        .header("Connection", "Upgrade")
        .header("Upgrade", "websocket")
        .header("Sec-WebSocket-Version", "8")
        .header("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
        .send()
        .await
        .unwrap();
    assert_eq!(old.status().as_u16(), 426);
    assert_eq!(old.headers()["sec-websocket-version"], "13");
}

#[tokio::test]
async fn a_task_the_tab_reports_failed_returns_its_reason() {
    let h = TestHub::start().await;
    let (mut ws, welcome) = h.tab("gemini", None).await;
    let client = h
        .hub()
        .registry
        .get(welcome["client_id"].as_str().unwrap())
        .unwrap();
    let tasks = h.hub().tasks.clone();
    let ask = tokio::spawn(async move {
        tasks
            .ask(&client, TaskRequest::new("hi", Duration::from_secs(10)))
            .await
    });
    let task = recv_type(&mut ws, "task").await;
    send(
        &mut ws,
        &json!({"type":"task_update","task_id":task["task_id"],"state":"failed","error":"429 rate limited"}),
    )
    .await;
    let err = ask.await.unwrap().unwrap_err();
    assert!(err.to_string().contains("429 rate limited"), "{err}");
}

#[tokio::test]
async fn heartbeat_channel_answers_app_heartbeats() {
    let h = TestHub::start().await;
    let (_rt, welcome) = h.tab("kimi", None).await;
    let id = welcome["client_id"].as_str().unwrap();
    let mut hb = h.connect("/heartbeat").await;
    send(
        &mut hb,
        &json!({"type":"hello","token":TOKEN,"client_id":id}),
    )
    .await;
    send(
        &mut hb,
        &json!({"type":"heartbeat","time":5,"flow_id":"f1","step":3,"pending":2}),
    )
    .await;
    let answer = recv(&mut hb).await;
    assert_eq!(answer["type"], "heartbeat");
    assert!(answer["time"].as_u64().unwrap() > 0);
    let client = h.hub().registry.get(id).unwrap();
    let seen = client.heartbeat().unwrap();
    assert_eq!(seen.flow_id.as_deref(), Some("f1"));
    assert_eq!(seen.step, Some(aicard::protocol::Step::Number(3)));
    // An unknown id on /heartbeat is refused.
    let mut hb2 = h.connect("/heartbeat").await;
    send(
        &mut hb2,
        &json!({"type":"hello","token":TOKEN,"client_id":"nope"}),
    )
    .await;
    assert_eq!(recv(&mut hb2).await["code"], "unknown_client");
}

#[tokio::test]
async fn the_seeds_heartbeat_gets_an_answer_and_a_bad_field_is_named() {
    let h = TestHub::start().await;
    let (_rt, welcome) = h.tab("deepseek", None).await;
    let id = welcome["client_id"].as_str().unwrap();
    let mut hb = h.connect("/heartbeat").await;
    send(
        &mut hb,
        &json!({"type":"hello","token":TOKEN,"client_id":id}),
    )
    .await;
    // The seed's FlowHeartbeat, as its page sends it.
    send(
        &mut hb,
        &json!({"type":"heartbeat","flow_id":"f1","flow_role":"client","step":"idle",
                "cmd_count":0,"result_count":0,"pending":0,"results":[],"timestamp":1764500000000u64}),
    )
    .await;
    let answer = recv(&mut hb).await;
    assert_eq!(answer["type"], "heartbeat", "{answer}");
    let seen = h.hub().registry.get(id).unwrap().heartbeat().unwrap();
    assert_eq!(seen.step, Some(aicard::protocol::Step::Name("idle".into())));
    // Valid JSON of a known type with a field of the wrong type: bad_frame, naming the field.
    send(&mut hb, &json!({"type":"heartbeat","pending":"many"})).await;
    let e = recv(&mut hb).await;
    assert_eq!(e["code"], "bad_frame", "{e}");
    assert!(e["message"].as_str().unwrap().contains("`pending`"), "{e}");
    send_raw(&mut hb, "{\"type\":\"heartbeat\",").await;
    assert_eq!(recv(&mut hb).await["code"], "bad_json");
}

#[tokio::test]
async fn sse_and_post_transport_carries_the_same_frames() {
    let h = TestHub::start().await;
    let http = aicard::http_client::plain();
    let welcome: Value = serde_json::from_str(
        &http
            .post(h.http_url("/send"))
            .bearer_auth(TOKEN)
            .body(json!({"type":"hello","token":TOKEN,"site":"yuanbao","label":"yb"}).to_string())
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(welcome["type"], "welcome");
    let id = welcome["client_id"].as_str().unwrap().to_string();

    // No token → 401; unknown client → 404.
    let r = http.get(h.http_url("/events")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = http
        .get(h.http_url("/events"))
        .bearer_auth(TOKEN)
        .header("X-AIcard-Client", "nope")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);

    let resp = http
        .get(h.http_url("/events"))
        .bearer_auth(TOKEN)
        .header("X-AIcard-Client", &id)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut body = resp.bytes_stream();
    let mut buf = String::new();
    // The stream's first event is the welcome; the tab confirms it received it.
    let first = next_sse_event(&mut body, &mut buf).await.unwrap();
    assert_eq!(first, welcome);
    let ack: Value = serde_json::from_str(
        &http
            .post(h.http_url("/send"))
            .bearer_auth(TOKEN)
            .header("X-AIcard-Client", &id)
            .body(json!({"type":"ack","received":"welcome"}).to_string())
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(ack["type"], "ack", "{ack}");
    let client = h.hub().registry.get(&id).unwrap();
    let tasks = h.hub().tasks.clone();
    let ask = tokio::spawn(async move {
        tasks
            .ask(
                &client,
                TaskRequest::new("via sse", Duration::from_secs(10)),
            )
            .await
    });
    // Read SSE events until the task arrives.
    let task = next_sse(&mut body, &mut buf, "task").await;
    assert_eq!(task["prompt"], "via sse");
    let ack: Value = serde_json::from_str(
        &http
            .post(h.http_url("/send"))
            .bearer_auth(TOKEN)
            .header("X-AIcard-Client", &id)
            .body(
                json!({"type":"turn_end","turn_id":"t","text":"sse answer","task_id":task["task_id"]})
                    .to_string(),
            )
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(ack["type"], "ack");
    assert_eq!(ask.await.unwrap().unwrap(), "sse answer");
    // Bad JSON over POST gets the same error frame.
    let e: Value = serde_json::from_str(
        &http
            .post(h.http_url("/send"))
            .bearer_auth(TOKEN)
            .header("X-AIcard-Client", &id)
            .body("{oops")
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(e["code"], "bad_json");
}

#[tokio::test]
async fn healthz_and_the_plain_userscript_without_the_token() {
    let h = TestHub::start().await;
    let ok = aicard::http_client::plain()
        .get(h.http_url("/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    assert_eq!(ok.text().await.unwrap(), "ok");
    let script = aicard::http_client::plain()
        .get(h.http_url("/aicard.user.js"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(script.contains("==UserScript=="));
    assert!(!script.contains("__AICARD_HUB_URL__"));
    assert!(script.contains(&h.http_url("")));
    assert!(!script.contains(TOKEN), "the plain script carries no token");
    assert!(
        !script.contains("__AICARD_TOKEN__"),
        "the placeholder is emptied"
    );
}

/// The request a browser makes for `<script src="http://127.0.0.1:PORT/aicard.user.js">` on
/// any web page (docs/reliability.md): it must never get the token, whatever the page's own GM_setValue
/// would do with the script.
#[tokio::test]
async fn a_web_page_cannot_load_the_token() {
    let h = TestHub::start().await;
    let client = aicard::http_client::plain();
    let page_load = |path: String| {
        client
            .get(path)
            .header("Referer", "https://evil.example/")
            .header("Sec-Fetch-Site", "cross-site")
            .header("Sec-Fetch-Mode", "no-cors")
            .header("Sec-Fetch-Dest", "script")
    };
    let plain = page_load(h.http_url("/aicard.user.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status(), 403, "a subresource load is refused");
    let why = plain.text().await.unwrap();
    assert!(!why.contains(TOKEN) && why.contains("subresource"), "{why}");

    // Even with a valid install code (it could only have leaked), a script load is refused.
    let link = h.hub().install_url();
    let path = link.split_once("/install/").unwrap().1;
    let leaked = page_load(h.http_url(&format!("/install/{path}")))
        .send()
        .await
        .unwrap();
    assert_eq!(leaked.status(), 403);
    assert!(!leaked.text().await.unwrap().contains(TOKEN));

    // An old browser without Fetch Metadata gets the plain script: still no token.
    let old = client
        .get(h.http_url("/aicard.user.js"))
        .header("Referer", "https://evil.example/")
        .send()
        .await
        .unwrap();
    assert_eq!(old.status(), 200);
    assert!(!old.text().await.unwrap().contains(TOKEN));

    // And a page cannot mint an install link: that needs the token.
    let mint = client
        .post(h.http_url("/install-codes"))
        .header("Origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(mint.status(), 403);
    let mint = client
        .post(h.http_url("/install-codes"))
        .send()
        .await
        .unwrap();
    assert_eq!(mint.status(), 401);
}

/// The person's way in: the one-time link (opened as a page, then fetched again by the
/// manager), or a tool that holds the token already.
#[tokio::test]
async fn the_install_link_carries_the_token_for_a_short_while() {
    let h = TestHub::start().await;
    let client = aicard::http_client::plain();
    let minted: Value = serde_json::from_str(
        &client
            .post(h.http_url("/install-codes"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    )
    .unwrap();
    let link = minted["url"].as_str().unwrap().to_string();
    assert!(link.starts_with(&h.http_url("/install/")) && link.ends_with("/aicard.user.js"));
    // Opened as a page by the person, then fetched by the manager's extension.
    for dest in ["document", "empty"] {
        let r = client
            .get(&link)
            .header("Sec-Fetch-Site", "none")
            .header("Sec-Fetch-Dest", dest)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{dest}");
        assert!(r.text().await.unwrap().contains(&format!("\"{TOKEN}\"")));
    }
    let unknown = client
        .get(h.http_url("/install/0123456789abcdef0123456789abcdef/aicard.user.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 403);
    assert!(unknown.text().await.unwrap().contains("aicard install"));

    let bearer = client
        .get(h.http_url("/aicard.user.js"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert!(bearer
        .text()
        .await
        .unwrap()
        .contains(&format!("\"{TOKEN}\"")));
    let wrong = client
        .get(h.http_url("/aicard.user.js"))
        .bearer_auth("not-the-token")
        .send()
        .await
        .unwrap();
    assert!(!wrong.text().await.unwrap().contains(TOKEN));
}

#[tokio::test]
async fn a_thousand_tabs_connect_and_all_get_a_task() {
    let h = TestHub::start_with(|c| c.timing.dead_after = Duration::from_secs(60)).await;
    let mut tabs = Vec::new();
    for chunk in 0..10 {
        let mut joins = Vec::new();
        for i in 0..100 {
            let url = h.ws_url("/realtime");
            joins.push(tokio::spawn(async move {
                let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
                let label = format!("tab-{}", chunk * 100 + i);
                send(
                    &mut ws,
                    &json!({"type":"hello","token":TOKEN,"site":"sim","label":label}),
                )
                .await;
                let w = recv(&mut ws).await;
                (ws, w["client_id"].as_str().unwrap().to_string())
            }));
        }
        for j in joins {
            tabs.push(j.await.unwrap());
        }
    }
    assert_eq!(h.hub().registry.connected_count(), 1000);
    let mut replies = Vec::new();
    for (ws, id) in tabs {
        let client = h.hub().registry.get(&id).unwrap();
        let tasks = h.hub().tasks.clone();
        let mut ws = ws;
        replies.push(tokio::spawn(async move {
            let ask = tasks.ask(&client, TaskRequest::new("ping", Duration::from_secs(30)));
            let answer = async { answer_task(&mut ws, |_| format!("pong {id}")).await };
            let (r, _) = tokio::join!(ask, answer);
            r.unwrap()
        }));
    }
    let mut n = 0;
    for r in replies {
        assert!(r.await.unwrap().starts_with("pong "));
        n += 1;
    }
    assert_eq!(n, 1000);
}

#[tokio::test]
async fn shutdown_closes_every_socket_with_1001() {
    let h = TestHub::start().await;
    let (mut a, _) = h.tab("deepseek", None).await;
    let (mut b, _) = h.tab("doubao", None).await;
    let TestHub { running, dir } = h;
    running.shutdown().await;
    assert_eq!(close_code(&mut a).await, Some(CloseCode::Away));
    assert_eq!(close_code(&mut b).await, Some(CloseCode::Away));
    drop(dir);
}

/// Starts a hub with `config` and opens a `/realtime` tab that says `hello`; returns the
/// hub, the socket and the tab's `welcome`.
async fn start_with_tab(
    config: aicard::config::HubConfig,
    hello: Value,
) -> (RunningHub, Ws, Value) {
    let running = aicard::app::App::start(config).await.unwrap();
    let url = format!("ws://{}/realtime", running.addr);
    let (mut ws, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
    send(&mut ws, &hello).await;
    let welcome = recv(&mut ws).await;
    assert_eq!(welcome["type"], "welcome", "{welcome}");
    (running, ws, welcome)
}

async fn stop(running: RunningHub) {
    tokio::time::timeout(WAIT, running.shutdown())
        .await
        .expect("the hub shut down in time");
}

#[tokio::test]
async fn shutdown_keeps_the_frames_still_queued_for_a_tab() {
    let dir = tempfile::tempdir().unwrap();
    let mk = || {
        let mut c = aicard::config::HubConfig::for_tests(dir.path().to_path_buf());
        c.token = Some(TOKEN.into());
        c.limits.outbound_queue = 128;
        c.timing.dead_after = Duration::from_secs(30);
        c
    };
    let hello = json!({"type":"hello","token":TOKEN,"site":"kimi"});
    let (running, ws, welcome) = start_with_tab(mk(), hello).await;
    let id = welcome["client_id"].as_str().unwrap().to_string();
    let back = json!({"type":"hello","token":TOKEN,"client_id":id,"site":"kimi"});
    // The tab stops reading. 24 MiB is more than the loopback socket buffers hold, so part of
    // it is still in the tab's queue when the hub shuts down.
    let frame = ServerFrame::Deliver {
        text: "z".repeat(256 * 1024),
        auto_send: false,
        run_id: None,
        deliver_id: None,
        agent: None,
    };
    for i in 0..96 {
        assert_eq!(
            running.app.registry.send(&id, &frame).unwrap(),
            aicard::hub::registry::Sent::Live,
            "frame {i}"
        );
    }
    stop(running).await;
    drop(ws);

    let (running, mut ws, _) = start_with_tab(mk(), back.clone()).await;
    let kept = recv(&mut ws).await;
    assert_eq!(kept["type"], "deliver", "a queued frame came back: {kept}");
    assert_eq!(kept["text"].as_str().map(str::len), Some(256 * 1024));

    // The tab stops reading again in the middle of that replay; shutdown interrupts it, and
    // the frames the replay did not get through are kept once more.
    stop(running).await;
    drop(ws);
    let (running, mut ws, _) = start_with_tab(mk(), back).await;
    assert_eq!(recv(&mut ws).await["type"], "deliver");
    stop(running).await;
}

#[tokio::test]
async fn an_sse_replay_cut_short_keeps_the_rest() {
    let h = TestHub::start().await;
    let tab = SseTab::hello(&h, json!({"type":"hello","token":TOKEN,"site":"yuanbao"})).await;
    let id = tab.id.clone();
    // No event stream yet: 24 MiB of frames wait for the tab.
    let frame = ServerFrame::Deliver {
        text: "s".repeat(256 * 1024),
        auto_send: false,
        run_id: None,
        deliver_id: None,
        agent: None,
    };
    for _ in 0..96 {
        assert_eq!(
            h.hub().registry.send(&id, &frame).unwrap(),
            aicard::hub::registry::Sent::Stored
        );
    }
    // The tab reads one frame of the replay and goes away; more than the socket buffers
    // hold was still to come.
    let mut events = h.hub().events.subscribe();
    let mut stream = tab.connect().await;
    let first = stream.next("deliver").await;
    assert_eq!(first["text"].as_str().map(str::len), Some(256 * 1024));
    drop(stream);
    wait_event(&mut events, |e| *e == HubEvent::Disconnected(id.clone())).await;
    // What the replay had not sent comes with the next stream.
    let mut stream = tab.connect().await;
    let again = stream.next("deliver").await;
    assert_eq!(again["text"].as_str().map(str::len), Some(256 * 1024));
}

#[tokio::test]
async fn an_event_stream_gets_nothing_until_the_tab_acks_its_welcome() {
    let h = TestHub::start().await;
    let tab = SseTab::hello(&h, json!({"type":"hello","token":TOKEN,"site":"gemini"})).await;
    let client = h.hub().registry.get(&tab.id).unwrap();
    let deliver = |text: &str| ServerFrame::Deliver {
        text: text.into(),
        auto_send: false,
        run_id: None,
        deliver_id: None,
        agent: None,
    };
    // Opened, its welcome sent, but not confirmed (a manager that buffers the response
    // never hands the tab a byte): the tab is not live and nothing is sent on the stream.
    let mut stream = tab.open().await;
    assert_eq!(client.state(), aicard::hub::registry::ConnState::Lost);
    assert_eq!(h.hub().registry.connected_count(), 0);
    assert!(h.hub().registry.resolve("gemini").is_empty());
    assert_eq!(
        h.hub().registry.send(&tab.id, &deliver("kept")).unwrap(),
        aicard::hub::registry::Sent::Stored
    );
    let tasks = h.hub().tasks.clone();
    let asked = client.clone();
    let ask = tokio::spawn(async move {
        tasks
            .ask(
                &asked,
                TaskRequest::new("after the ack", Duration::from_secs(10)),
            )
            .await
    });
    // The ack attaches the stream: what waited comes in order, then frames flow live.
    let mut events = h.hub().events.subscribe();
    tab.ack_welcome().await;
    wait_event(&mut events, |e| *e == HubEvent::Connected(tab.id.clone())).await;
    assert_eq!(client.state(), aicard::hub::registry::ConnState::Connected);
    assert_eq!(stream.next_any().await.unwrap()["text"], "kept");
    let task = stream.next_any().await.unwrap();
    assert_eq!(task["prompt"], "after the ack", "{task}");
    assert_eq!(
        h.hub().registry.send(&tab.id, &deliver("live")).unwrap(),
        aicard::hub::registry::Sent::Live
    );
    assert_eq!(stream.next_any().await.unwrap()["text"], "live");
    let answer = tab
        .post(&json!({"type":"turn_end","turn_id":"t","text":"done","task_id":task["task_id"]}))
        .await;
    assert_eq!(answer["type"], "ack");
    assert_eq!(ask.await.unwrap().unwrap(), "done");
    // A second ack of the attached stream is harmless.
    tab.ack_welcome().await;
}

#[tokio::test]
async fn an_event_stream_never_confirmed_is_closed_and_a_late_ack_is_refused() {
    let h = TestHub::start_with(|c| c.timing.stream_confirm = Duration::from_millis(200)).await;
    let tab = SseTab::hello(&h, json!({"type":"hello","token":TOKEN,"site":"kimi"})).await;
    let mut stream = tab.open().await;
    assert_eq!(stream.next_any().await, None, "the hub ended the stream");
    let e = tab.post(&json!({"type":"ack","received":"welcome"})).await;
    assert_eq!(e["code"], "no_stream", "{e}");
}

#[tokio::test]
async fn a_newer_event_stream_replaces_one_still_waiting_for_its_ack() {
    let h = TestHub::start().await;
    let tab = SseTab::hello(&h, json!({"type":"hello","token":TOKEN,"site":"kimi"})).await;
    let mut older = tab.open().await;
    let mut newer = tab.connect().await;
    assert_eq!(older.next_any().await, None, "the replaced stream ended");
    h.hub()
        .registry
        .send(
            &tab.id,
            &ServerFrame::Deliver {
                text: "to the newer".into(),
                auto_send: false,
                run_id: None,
                deliver_id: None,
                agent: None,
            },
        )
        .unwrap();
    assert_eq!(newer.next_any().await.unwrap()["text"], "to the newer");
}

fn numbered(i: usize) -> ServerFrame {
    ServerFrame::Deliver {
        text: format!("frame {i} {}", "n".repeat(8 * 1024)),
        auto_send: false,
        run_id: None,
        deliver_id: None,
        agent: None,
    }
}

#[tokio::test]
async fn a_returning_tab_gets_its_frames_in_the_order_they_were_sent() {
    let h = TestHub::start().await;
    let mut events = h.hub().events.subscribe();
    let (ws, welcome) = h.tab("kimi", None).await;
    let id = welcome["client_id"].as_str().unwrap().to_string();
    drop(ws);
    wait_event(&mut events, |e| *e == HubEvent::Disconnected(id.clone())).await;
    // More than a tab's outbound queue holds (and than the hub once kept in memory), kept
    // while it is away.
    for i in 0..600 {
        assert_eq!(
            h.hub().registry.send(&id, &numbered(i)).unwrap(),
            aicard::hub::registry::Sent::Stored
        );
    }
    let mut ws = h.connect("/realtime").await;
    send(
        &mut ws,
        &json!({"type":"hello","token":TOKEN,"client_id":id,"site":"kimi"}),
    )
    .await;
    assert_eq!(recv(&mut ws).await["type"], "welcome");
    let first = recv_type(&mut ws, "deliver").await;
    // Frames sent while the replay may still be under way come after it.
    for i in 600..700 {
        h.hub().registry.send(&id, &numbered(i)).unwrap();
    }
    let seq = |f: &Value| -> usize {
        f["text"]
            .as_str()
            .unwrap()
            .split(' ')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(seq(&first), 0);
    for i in 1..700 {
        let f = recv_type(&mut ws, "deliver").await;
        assert_eq!(seq(&f), i, "in the order they were sent");
    }
}

fn seq_of(f: &Value) -> usize {
    f["text"]
        .as_str()
        .and_then(|t| t.split(' ').nth(1))
        .and_then(|n| n.parse().ok())
        .expect("a numbered frame")
}

#[tokio::test]
async fn the_frame_being_written_when_a_slow_tab_is_closed_is_kept() {
    let h = TestHub::start_with(|c| {
        c.limits.outbound_queue = 4;
        c.timing.dead_after = Duration::from_secs(30);
    })
    .await;
    let mut events = h.hub().events.subscribe();
    let (mut ws, welcome) = h.tab("chatgpt", None).await;
    let id = welcome["client_id"].as_str().unwrap().to_string();
    let big = |i: usize| ServerFrame::Deliver {
        text: format!("frame {i} {}", "b".repeat(256 * 1024)),
        auto_send: false,
        run_id: None,
        deliver_id: None,
        agent: None,
    };
    // The tab does not read: one frame is stuck half written when the hub gives up.
    let mut n = 0;
    loop {
        let sent = h.hub().registry.send(&id, &big(n)).unwrap();
        n += 1;
        if sent == aicard::hub::registry::Sent::SlowConsumerClosed {
            break;
        }
        assert!(n < 2000, "the hub never gave up on the slow tab");
        tokio::task::yield_now().await;
    }
    h.hub().registry.send(&id, &big(n)).unwrap();
    // It does not read on within the close grace either: the socket ends mid-frame.
    wait_event(&mut events, |e| *e == HubEvent::Disconnected(id.clone())).await;
    let mut seen = std::collections::BTreeSet::new();
    while let Ok(Some(Ok(msg))) =
        tokio::time::timeout(WAIT, futures_util::StreamExt::next(&mut ws)).await
    {
        if let Message::Text(t) = msg {
            seen.insert(seq_of(&serde_json::from_str(&t).unwrap()));
        }
    }
    let mut ws = h.connect("/realtime").await;
    send(
        &mut ws,
        &json!({"type":"hello","token":TOKEN,"client_id":id,"site":"chatgpt"}),
    )
    .await;
    loop {
        let i = seq_of(&recv_type(&mut ws, "deliver").await);
        seen.insert(i);
        if i == n {
            break;
        }
    }
    let missing: Vec<usize> = (0..=n).filter(|i| !seen.contains(i)).collect();
    assert!(
        missing.is_empty(),
        "frames lost with the socket: {missing:?}"
    );
}

#[tokio::test]
async fn what_is_kept_for_an_absent_tab_is_capped_progress_first() {
    let h = TestHub::start_with(|c| c.limits.offline_frames = 50).await;
    let mut events = h.hub().events.subscribe();
    let (ws, welcome) = h.tab("kimi", None).await;
    let id = welcome["client_id"].as_str().unwrap().to_string();
    drop(ws);
    wait_event(&mut events, |e| *e == HubEvent::Disconnected(id.clone())).await;
    let progress = |i: usize| ServerFrame::FlowEvent {
        run_id: "r".into(),
        flow: "f".into(),
        node_id: Some("n".into()),
        state: "running".into(),
        detail: Some(json!({ "i": i })),
    };
    // 30 results among 120 progress frames: more than the 50 kept.
    for i in 0..150 {
        if i % 5 == 0 {
            h.hub().registry.send(&id, &numbered(i)).unwrap();
        } else {
            h.hub().registry.send(&id, &progress(i)).unwrap();
        }
    }
    assert_eq!(h.hub().store.pending_count(&id).unwrap(), 50);
    let mut ws = h.connect("/realtime").await;
    send(
        &mut ws,
        &json!({"type":"hello","token":TOKEN,"client_id":id,"site":"kimi"}),
    )
    .await;
    assert_eq!(recv(&mut ws).await["type"], "welcome");
    let mut order = Vec::new();
    for _ in 0..50 {
        let f = recv(&mut ws).await;
        order.push(match f["type"].as_str() {
            Some("deliver") => seq_of(&f),
            _ => f["detail"]["i"].as_u64().unwrap() as usize,
        });
    }
    // Every result survived; the newest progress filled the rest; all in order.
    let results: Vec<usize> = order.iter().copied().filter(|i| i % 5 == 0).collect();
    assert_eq!(results, (0..150).step_by(5).collect::<Vec<_>>());
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
    assert_eq!(order.last(), Some(&149));
    // Nothing is left over.
    send(&mut ws, &json!({"type":"heartbeat","time":1})).await;
    assert_eq!(recv(&mut ws).await["type"], "heartbeat");
}
