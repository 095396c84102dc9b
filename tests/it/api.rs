//! The OpenAI-compatible API over real sockets: a hub on port 0, tabs on `/realtime` driven by
//! the test (each chunk sent when the test says so), HTTP requests with reqwest. Every wait
//! has a timeout; nothing sleeps to synchronise.

use std::time::{Duration, Instant};

use crate::common::tls::{TestCa, TlsServer};
use crate::common::*;
use futures_util::StreamExt;
use serde_json::{json, Value};

fn http() -> reqwest::Client {
    aicard::http_client::plain()
}

fn chat_body(model: &str, text: &str, stream: bool) -> Value {
    json!({"model": model, "stream": stream, "messages": [{"role": "user", "content": text}]})
}

async fn post(h: &TestHub, body: &Value, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut req = http()
        .post(h.http_url("/v1/chat/completions"))
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("content-type", "application/json")
        .body(body.to_string());
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    tokio::time::timeout(WAIT, req.send())
        .await
        .expect("response in time")
        .expect("response")
}

async fn json_of(resp: reqwest::Response) -> Value {
    let text = resp.text().await.expect("body");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not json ({e}): {text}"))
}

/// An SSE body read event by event.
struct Sse {
    body: futures_util::stream::BoxStream<'static, reqwest::Result<axum::body::Bytes>>,
    buf: String,
}

impl Sse {
    fn new(resp: reqwest::Response) -> Sse {
        assert_eq!(resp.status(), 200);
        assert!(resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream"));
        Sse {
            body: resp.bytes_stream().boxed(),
            buf: String::new(),
        }
    }

    /// The next event's raw text (a `data: …` line or a `: comment`); None at the end.
    async fn next_raw(&mut self) -> Option<String> {
        tokio::time::timeout(WAIT, async {
            loop {
                if let Some(end) = self.buf.find("\n\n") {
                    let ev: String = self.buf.drain(..end + 2).collect();
                    return Some(ev.trim_end().to_string());
                }
                match self.body.next().await {
                    Some(Ok(b)) => self.buf.push_str(std::str::from_utf8(&b).expect("utf-8")),
                    _ => return None,
                }
            }
        })
        .await
        .expect("an event in time")
    }

    /// The next `data:` event, comments skipped: Some(json), or None for `[DONE]`.
    async fn next_data(&mut self) -> Option<Value> {
        loop {
            let ev = self.next_raw().await.expect("stream ended before [DONE]");
            if ev.starts_with(':') {
                continue;
            }
            let data = ev.strip_prefix("data: ").expect("a data event");
            if data == "[DONE]" {
                return None;
            }
            return Some(serde_json::from_str(data).expect("json data"));
        }
    }

    /// Every data event up to `[DONE]`, then checks the stream ends there.
    async fn rest(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(v) = self.next_data().await {
            out.push(v);
        }
        assert_eq!(self.next_raw().await, None, "nothing after [DONE]");
        out
    }
}

/// Content deltas joined, and the finish reasons seen.
fn reassemble(events: &[Value]) -> (String, Vec<String>) {
    let mut text = String::new();
    let mut finishes = Vec::new();
    for e in events {
        assert_eq!(e["object"], "chat.completion.chunk", "{e}");
        for c in e["choices"].as_array().unwrap() {
            if let Some(t) = c["delta"]["content"].as_str() {
                text.push_str(t);
            }
            if let Some(f) = c["finish_reason"].as_str() {
                finishes.push(f.to_string());
            }
        }
    }
    (text, finishes)
}

/// The tab's side of one task: accepted, then `pieces` as chunks, then turn_end with `full`.
async fn stream_answer(ws: &mut Ws, task: &Value, pieces: &[&str], full: &str) {
    let id = task["task_id"].as_str().unwrap();
    let turn = format!("turn-{id}");
    send(
        ws,
        &json!({"type":"task_update","task_id":id,"state":"accepted"}),
    )
    .await;
    for (i, p) in pieces.iter().enumerate() {
        send(ws, &json!({"type":"chunk","turn_id":turn,"seq":i,"text":p})).await;
    }
    send(
        ws,
        &json!({"type":"turn_end","turn_id":turn,"text":full,"task_id":id}),
    )
    .await;
}

async fn accept(ws: &mut Ws, task: &Value) {
    let id = task["task_id"].as_str().unwrap();
    send(
        ws,
        &json!({"type":"task_update","task_id":id,"state":"accepted"}),
    )
    .await;
}

/// Waits until `cond` holds (hub state the test cannot be told about directly).
async fn until(what: &str, cond: impl Fn() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < WAIT, "timed out waiting for {what}");
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test]
async fn a_stream_reassembles_the_tabs_text_byte_for_byte_with_one_finish_reason() {
    let h = TestHub::start().await;
    let (mut ws, _) = h.tab("sim", Some("w")).await;
    let full = "Hello, 世界! 🚀 line one\nline two — \"quoted\" \\ end.";
    // Chunks split inside words (never inside a char: a chunk is a JSON string); the last
    // piece comes only in turn_end.
    let pieces = ["Hel", "lo, 世", "界! 🚀", " line one\nli", "ne two — \"quo"];
    let req = tokio::spawn({
        let url = h.http_url("/v1/chat/completions");
        async move {
            let resp = http()
                .post(url)
                .header("authorization", format!("Bearer {TOKEN}"))
                .body(chat_body("site/sim", "say hello", true).to_string())
                .send()
                .await
                .unwrap();
            let mut sse = Sse::new(resp);
            sse.rest().await
        }
    });
    let task = recv_type(&mut ws, "task").await;
    assert_eq!(task["prompt"], "say hello");
    stream_answer(&mut ws, &task, &pieces, full).await;
    let events = req.await.unwrap();
    assert_eq!(events[0]["choices"][0]["delta"]["role"], "assistant");
    let (text, finishes) = reassemble(&events);
    assert_eq!(text.as_bytes(), full.as_bytes());
    assert_eq!(finishes, ["stop"]);
    let ids: std::collections::HashSet<_> = events.iter().map(|e| e["id"].clone()).collect();
    assert_eq!(ids.len(), 1, "every chunk has the same id");
    assert!(
        events
            .iter()
            .all(|e| e["choices"][0]["delta"].get("reasoning_content").is_none()),
        "the tab sent no reasoning; none is invented"
    );
}

#[tokio::test]
async fn a_models_thinking_streams_as_reasoning_content_never_as_content() {
    let h = TestHub::start().await;
    let (mut ws, _) = h.tab("sim", Some("w")).await;
    let req = tokio::spawn({
        let url = h.http_url("/v1/chat/completions");
        async move {
            let resp = http()
                .post(url)
                .header("authorization", format!("Bearer {TOKEN}"))
                .body(chat_body("site/sim", "think first", true).to_string())
                .send()
                .await
                .unwrap();
            Sse::new(resp).rest().await
        }
    });
    let task = recv_type(&mut ws, "task").await;
    let id = task["task_id"].as_str().unwrap();
    accept(&mut ws, &task).await;
    for (i, frame) in [
        json!({"text":"","reasoning":"先想一想，"}),
        json!({"text":"Answer","reasoning":"再想。"}),
        json!({"text":" done."}),
    ]
    .iter()
    .enumerate()
    {
        let mut f = json!({"type":"chunk","turn_id":"t-think","seq":i});
        f.as_object_mut()
            .unwrap()
            .extend(frame.as_object().unwrap().clone());
        send(&mut ws, &f).await;
    }
    send(
        &mut ws,
        &json!({"type":"turn_end","turn_id":"t-think","text":"Answer done.","task_id":id}),
    )
    .await;
    let events = req.await.unwrap();
    let (text, finishes) = reassemble(&events);
    assert_eq!(text, "Answer done.", "thinking never leaks into content");
    assert_eq!(finishes, ["stop"]);
    // The prompt is journaled like a one-node run.
    let run = h
        .hub()
        .store
        .run(id)
        .unwrap()
        .expect("the API prompt has a run");
    assert_eq!(
        (run.flow.as_str(), run.state.as_str()),
        ("api", "completed")
    );
    let journal = h.hub().store.events(id).unwrap().join("\n");
    assert!(
        journal.contains("\"run_completed\"") && journal.contains("Answer done."),
        "{journal}"
    );
    let status = h.hub().runner.status(id).expect("shown like any run");
    assert!(status.contains("ask"), "{status}");
    let thinking: String = events
        .iter()
        .filter_map(|e| e["choices"][0]["delta"]["reasoning_content"].as_str())
        .collect();
    assert_eq!(thinking, "先想一想，再想。");
}

#[tokio::test]
async fn a_non_stream_request_gets_one_completion_with_estimated_usage() {
    let h = TestHub::start().await;
    let (mut ws, _) = h.tab("sim", Some("w")).await;
    let req = tokio::spawn({
        let body = json!({"model":"tab/w","messages":[
            {"role":"system","content":"Be brief."},
            {"role":"user","content":"2+2?"}]});
        let url = h.http_url("/v1/chat/completions");
        async move {
            http()
                .post(url)
                .header("authorization", format!("Bearer {TOKEN}"))
                .body(body.to_string())
                .send()
                .await
                .unwrap()
        }
    });
    let task = recv_type(&mut ws, "task").await;
    assert_eq!(
        task["prompt"],
        "以下是此前的对话 / Conversation so far:\n\n[system]\nBe brief.\n\n请回复下面这条消息 / Reply to this message:\n\n2+2?"
    );
    stream_answer(&mut ws, &task, &["4"], "4.").await;
    let resp = req.await.unwrap();
    assert_eq!(resp.status(), 200);
    let v = json_of(resp).await;
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["model"], "tab/w");
    assert_eq!(v["choices"][0]["message"]["content"], "4.");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert!(v["usage"]["total_tokens"].as_u64().unwrap() > 0);
    assert_eq!(v["aicard"]["usage_estimated"], true);
    assert_eq!(v["aicard"]["tab"], "w");
}

#[tokio::test]
async fn three_concurrent_requests_to_one_tab_are_served_in_arrival_order() {
    let h = TestHub::start().await;
    let (mut ws, _) = h.tab("sim", Some("w")).await;
    let adm = h.hub().api.admission().clone();
    let mut reqs = Vec::new();
    for i in 0..3 {
        let url = h.http_url("/v1/chat/completions");
        reqs.push(tokio::spawn(async move {
            let resp = http()
                .post(url)
                .header("authorization", format!("Bearer {TOKEN}"))
                .body(chat_body("tab/w", &format!("request {i}"), false).to_string())
                .send()
                .await
                .unwrap();
            json_of(resp).await
        }));
        // The next one is sent only once this one holds the tab or waits in the queue.
        let adm = adm.clone();
        until("the request to queue", move || {
            adm.busy_count("tab/w") + adm.depth("tab/w") == i + 1
        })
        .await;
    }
    let mut seen = Vec::new();
    for _ in 0..3 {
        let task = recv_type(&mut ws, "task").await;
        let prompt = task["prompt"].as_str().unwrap().to_string();
        stream_answer(&mut ws, &task, &[], &format!("answer to {prompt}")).await;
        seen.push(prompt);
    }
    assert_eq!(seen, ["request 0", "request 1", "request 2"]);
    for (i, r) in reqs.into_iter().enumerate() {
        let v = r.await.unwrap();
        assert_eq!(
            v["choices"][0]["message"]["content"],
            format!("answer to request {i}")
        );
    }
}

#[tokio::test]
async fn a_wait_beyond_the_queue_timeout_is_429_with_retry_after() {
    let h = TestHub::start().await;
    let (mut ws, _) = h.tab("sim", Some("w")).await;
    let holder = tokio::spawn({
        let url = h.http_url("/v1/chat/completions");
        async move {
            http()
                .post(url)
                .header("authorization", format!("Bearer {TOKEN}"))
                .body(chat_body("site/sim", "long one", false).to_string())
                .send()
                .await
                .unwrap()
        }
    });
    let task = recv_type(&mut ws, "task").await;
    for timeout in ["0", "1"] {
        let resp = post(
            &h,
            &chat_body("site/sim", "impatient", false),
            &[("x-aicard-queue-timeout", timeout)],
        )
        .await;
        assert_eq!(resp.status(), 429, "timeout {timeout}");
        let retry: u64 = resp.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(retry >= 1);
        let v = json_of(resp).await;
        assert_eq!(v["error"]["type"], "rate_limit_error");
        assert_eq!(v["error"]["code"], "tabs_busy");
        assert!(v["error"]["message"].is_string());
        assert!(v["error"].get("param").is_some());
    }
    stream_answer(&mut ws, &task, &[], "done").await;
    assert_eq!(holder.await.unwrap().status(), 200);
}

#[tokio::test]
async fn refusals_carry_real_statuses_and_openai_error_bodies() {
    let h = TestHub::start().await;
    let (_ws, _) = h.tab("sim", Some("w")).await;
    // 503: a site we serve, but no tab of it is online now (worth a retry).
    let resp = post(&h, &chat_body("site/kimi", "x", true), &[]).await;
    assert_eq!(resp.status(), 503);
    assert!(resp.headers().contains_key("retry-after"));
    assert_eq!(json_of(resp).await["error"]["code"], "model_not_available");
    // 404: an id that can never be served (OpenAI's answer; SDKs do not retry it).
    for model in ["gpt-4o", "site/nowhere", "tab/ghost"] {
        let resp = post(&h, &chat_body(model, "x", false), &[]).await;
        assert_eq!(resp.status(), 404, "{model}");
        assert!(!resp.headers().contains_key("retry-after"), "{model}");
        let e = json_of(resp).await;
        assert_eq!(e["error"]["code"], "model_not_found", "{model}");
        assert_eq!(e["error"]["param"], "model", "{model}");
    }
    // GET /v1/models/{id}: one entry, or 404 with the same body.
    let one = http()
        .get(h.http_url("/v1/models/site/sim"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(one.status(), 200);
    assert_eq!(json_of(one).await["id"], "site/sim");
    let none = http()
        .get(h.http_url("/v1/models/gpt-4o"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(none.status(), 404);
    assert_eq!(json_of(none).await["error"]["code"], "model_not_found");
    // response_format asking for JSON is refused, never ignored; `text` is fine.
    let mut json_mode = chat_body("site/sim", "x", false);
    json_mode["response_format"] = json!({"type": "json_object"});
    let resp = post(&h, &json_mode, &[]).await;
    assert_eq!(resp.status(), 400);
    assert_eq!(json_of(resp).await["error"]["param"], "response_format");
    // 401: no token, wrong token, on both endpoints.
    for path in ["/v1/chat/completions", "/v1/models"] {
        let r = http()
            .post(h.http_url(path))
            .body("{}")
            .send()
            .await
            .unwrap();
        assert!(r.status() == 401 || r.status() == 405, "{path}");
        let r = http()
            .get(h.http_url("/v1/models"))
            .header("authorization", "Bearer wrong")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401);
        assert_eq!(json_of(r).await["error"]["code"], "invalid_api_key");
    }
    let r = http()
        .post(h.http_url("/v1/chat/completions"))
        .body(chat_body("site/sim", "x", false).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    // 400: what a tab cannot honour, naming the field.
    let mut tools = chat_body("site/sim", "x", true);
    tools["tools"] = json!([{"type":"function","function":{"name":"f","parameters":{}}}]);
    let mut n = chat_body("site/sim", "x", false);
    n["n"] = json!(3);
    let audio = json!({"model":"site/sim","messages":[{"role":"user","content":[
        {"type":"text","text":"what is this"},
        {"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]});
    for (body, param) in [
        (tools, "tools"),
        (n, "n"),
        (audio, "messages[0].content[1]"),
    ] {
        let r = post(&h, &body, &[]).await;
        assert_eq!(r.status(), 400);
        let v = json_of(r).await;
        assert_eq!(v["error"]["code"], "unsupported_parameter", "{v}");
        assert_eq!(v["error"]["param"], param);
        assert_eq!(v["error"]["type"], "invalid_request_error");
    }
    let r = http()
        .post(h.http_url("/v1/chat/completions"))
        .header("authorization", format!("Bearer {TOKEN}"))
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(json_of(r).await["error"]["code"], "invalid_json");
    // 403: a foreign Origin or Host, before the token is even looked at; no CORS headers.
    for (k, v) in [("origin", "https://evil.example"), ("host", "evil.example")] {
        let r = post(&h, &chat_body("site/sim", "x", false), &[(k, v)]).await;
        assert_eq!(r.status(), 403, "{k}");
        assert!(!r.headers().contains_key("access-control-allow-origin"));
        assert_eq!(json_of(r).await["error"]["type"], "permission_error");
    }
    // Unknown paths under /v1, and /v1 itself, answer in the same shape.
    for path in ["/v1/embeddings", "/v1", "/v1/"] {
        let r = http()
            .get(h.http_url(path))
            .header("authorization", format!("Bearer {TOKEN}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "{path}");
        assert_eq!(json_of(r).await["error"]["code"], "unknown_url", "{path}");
    }
}

#[tokio::test]
async fn models_lists_what_is_online_with_load() {
    let h = TestHub::start().await;
    let (mut ws, _) = h.tab("sim", Some("w1")).await;
    let (_ws2, _) = h.tab("sim", Some("w2")).await;
    let (_ws3, _) = h.tab("kimi", Some("k1")).await;
    let holder = tokio::spawn({
        let url = h.http_url("/v1/chat/completions");
        async move {
            http()
                .post(url)
                .header("authorization", format!("Bearer {TOKEN}"))
                .body(chat_body("tab/w1", "hold", false).to_string())
                .send()
                .await
                .unwrap()
        }
    });
    let task = recv_type(&mut ws, "task").await;
    let r = http()
        .get(h.http_url("/v1/models"))
        .header("authorization", format!("Bearer {TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v = json_of(r).await;
    assert_eq!(v["object"], "list");
    let by_id = |id: &str| {
        v["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == id)
            .unwrap_or_else(|| panic!("no {id} in {v}"))
            .clone()
    };
    assert_eq!(
        by_id("site/sim")["aicard"],
        json!({"tabs":2,"busy":1,"unavailable":0,"queue_depth":0,
            "answers":{"site":{"network":0,"dom":0,"empty":0},"flag":null}})
    );
    assert_eq!(by_id("site/kimi")["aicard"]["tabs"], 1);
    assert_eq!(by_id("tab/w1")["aicard"]["busy"], 1);
    assert_eq!(by_id("auto")["aicard"]["tabs"], 3);
    assert_eq!(by_id("tab/k1")["object"], "model");
    // Each tab's entry carries its health as the decision engine sees it.
    let health = &by_id("tab/w2")["aicard"]["health"];
    assert!(health["standing"].is_string(), "{health}");
    assert_eq!(health["outcomes"], 0);
    assert!(by_id("site/sim")["aicard"].get("health").is_none());
    // The same figures for Prometheus, behind the same door (OpenMetrics when asked for).
    let metrics = http()
        .get(h.http_url("/metrics"))
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("accept", "application/openmetrics-text")
        .send()
        .await
        .unwrap();
    assert_eq!(metrics.status(), 200);
    assert!(metrics.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/openmetrics-text"));
    let text = metrics.text().await.unwrap();
    let sample = |name: &str, has: &str| -> String {
        text.lines()
            .find(|l| l.starts_with(&format!("{name}{{")) && l.contains(has))
            .unwrap_or_else(|| panic!("no {name} with {has} in\n{text}"))
            .rsplit(' ')
            .next()
            .unwrap()
            .to_string()
    };
    assert_eq!(sample("aicard_tabs", "state=\"connected\""), "3");
    assert_eq!(sample("aicard_tab_up", "tab=\"k1\""), "1");
    assert_eq!(sample("aicard_tab_window_outcomes", "tab=\"w2\""), "0");
    assert!(text.trim_end().ends_with("# EOF"), "{text}");
    for (auth, origin, want) in [
        (None, None, 401),
        (Some("Bearer wrong"), None, 401),
        (
            Some(format!("Bearer {TOKEN}").as_str()),
            Some("https://evil.example"),
            403,
        ),
    ] {
        let mut req = http().get(h.http_url("/metrics"));
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        if let Some(o) = origin {
            req = req.header("origin", o);
        }
        assert_eq!(
            req.send().await.unwrap().status(),
            want,
            "{auth:?} {origin:?}"
        );
    }
    stream_answer(&mut ws, &task, &[], "ok").await;
    assert_eq!(holder.await.unwrap().status(), 200);
}

#[tokio::test]
async fn an_abort_mid_stream_cancels_the_prompt_and_frees_the_tab_within_2s() {
    let h = TestHub::start().await;
    let (mut ws, _) = h.tab("sim", Some("w")).await;
    let adm = h.hub().api.admission().clone();
    let resp = {
        let post = http()
            .post(h.http_url("/v1/chat/completions"))
            .header("authorization", format!("Bearer {TOKEN}"))
            .body(chat_body("tab/w", "a long essay", true).to_string())
            .send();
        let (resp, task) = tokio::join!(post, async {
            let task = recv_type(&mut ws, "task").await;
            accept(&mut ws, &task).await;
            task
        });
        (resp.unwrap(), task)
    };
    let (resp, task) = resp;
    let id = task["task_id"].as_str().unwrap().to_string();
    let turn = format!("turn-{id}");
    send(
        &mut ws,
        &json!({"type":"chunk","turn_id":turn,"seq":0,"text":"Half of "}),
    )
    .await;
    let mut sse = Sse::new(resp);
    assert_eq!(
        sse.next_data().await.unwrap()["choices"][0]["delta"]["role"],
        "assistant"
    );
    let first = sse.next_data().await.unwrap();
    assert_eq!(first["choices"][0]["delta"]["content"], "Half of ");
    // A second request waits for the same tab.
    let next = tokio::spawn({
        let url = h.http_url("/v1/chat/completions");
        async move {
            let resp = http()
                .post(url)
                .header("authorization", format!("Bearer {TOKEN}"))
                .body(chat_body("tab/w", "the next one", true).to_string())
                .send()
                .await
                .unwrap();
            Sse::new(resp).rest().await
        }
    });
    until("the second request to queue", || adm.depth("tab/w") == 1).await;

    let aborted = Instant::now();
    drop(sse);
    let cancel = recv_type(&mut ws, "cancel").await;
    assert_eq!(cancel["task_id"], id.as_str());
    let run = h.hub().store.run(&id).unwrap().expect("journaled");
    assert_eq!(run.state, "stopped", "the journal says the client left");
    // The old turn's late chunk must not leak into the next stream.
    send(
        &mut ws,
        &json!({"type":"chunk","turn_id":turn,"seq":1,"text":"LATE"}),
    )
    .await;
    let task2 = recv_type(&mut ws, "task").await;
    let freed = aborted.elapsed();
    assert!(freed < Duration::from_secs(2), "tab freed after {freed:?}");
    assert_eq!(task2["prompt"], "the next one");
    stream_answer(&mut ws, &task2, &["fresh ", "text"], "fresh text").await;
    let (text, finishes) = reassemble(&next.await.unwrap());
    assert_eq!(text, "fresh text");
    assert_eq!(finishes, ["stop"]);
}

#[tokio::test]
async fn a_failure_mid_stream_is_an_error_event_then_done() {
    let h = TestHub::start().await;
    let (mut ws, _) = h.tab("sim", Some("w")).await;
    h.hub().api.set_keepalive(Duration::from_millis(20));
    let post = http()
        .post(h.http_url("/v1/chat/completions"))
        .header("authorization", format!("Bearer {TOKEN}"))
        .body(chat_body("tab/w", "x", true).to_string())
        .send();
    let (resp, task) = tokio::join!(post, async {
        let task = recv_type(&mut ws, "task").await;
        accept(&mut ws, &task).await;
        task
    });
    let mut sse = Sse::new(resp.unwrap());
    sse.next_data().await.unwrap();
    // Silent tab: keepalive comments.
    assert_eq!(sse.next_raw().await.unwrap(), ": keepalive");
    let id = task["task_id"].as_str().unwrap();
    send(
        &mut ws,
        &json!({"type":"chunk","turn_id":"t1","seq":0,"text":"partial"}),
    )
    .await;
    send(
        &mut ws,
        &json!({"type":"task_update","task_id":id,"state":"failed","error":"captcha"}),
    )
    .await;
    let events = sse.rest().await;
    let last = events.last().unwrap();
    assert_eq!(last["error"]["code"], "tab_failed", "{last}");
    let (text, finishes) = reassemble(&events[..events.len() - 1]);
    assert_eq!(text, "partial");
    assert!(finishes.is_empty());
}

#[tokio::test]
async fn a_tab_that_fails_before_answering_gives_a_real_status() {
    let h = TestHub::start().await;
    let (mut ws, _) = h.tab("sim", Some("w")).await;
    let body = chat_body("tab/w", "x", true);
    let (resp, _) = tokio::join!(post(&h, &body, &[]), async {
        let task = recv_type(&mut ws, "task").await;
        let id = task["task_id"].as_str().unwrap();
        send(
            &mut ws,
            &json!({"type":"task_update","task_id":id,"state":"failed","error":"login"}),
        )
        .await;
    });
    assert_eq!(resp.status(), 502);
    assert_eq!(json_of(resp).await["error"]["code"], "tab_failed");
}

#[tokio::test]
async fn a_client_that_leaves_a_non_stream_request_cancels_its_prompt() {
    let h = TestHub::start().await;
    let (mut ws, _) = h.tab("sim", Some("w")).await;
    let req = tokio::spawn({
        let url = h.http_url("/v1/chat/completions");
        async move {
            http()
                .post(url)
                .header("authorization", format!("Bearer {TOKEN}"))
                .body(chat_body("tab/w", "never mind", false).to_string())
                .send()
                .await
        }
    });
    let task = recv_type(&mut ws, "task").await;
    accept(&mut ws, &task).await;
    req.abort();
    let cancel = recv_type(&mut ws, "cancel").await;
    assert_eq!(cancel["task_id"], task["task_id"]);
    let adm = h.hub().api.admission().clone();
    until("the tab to be free", || adm.busy_count("tab/w") == 0).await;
}

#[tokio::test]
async fn a_flow_model_runs_the_flow_with_the_last_user_message_as_input() {
    let flows = tempfile::tempdir().unwrap();
    std::fs::write(
        flows.path().join("ask.yaml"),
        "name: ask\ninputs:\n  question: {default: \"\"}\nnodes:\n  - id: a\n    to: role:worker\n    prompt: \"Q: $question\"\n",
    )
    .unwrap();
    let dir = flows.path().to_path_buf();
    let h = TestHub::start_with(move |c| c.flows_dir = dir).await;
    let (mut ws, _) = h.tab("sim", Some("w")).await;
    let models = http()
        .get(h.http_url("/v1/models"))
        .header("authorization", format!("Bearer {TOKEN}"))
        .send()
        .await
        .unwrap();
    let listed = json_of(models).await;
    assert!(
        listed["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["id"] == "flow/ask"),
        "{listed}"
    );
    let body = json!({"model":"flow/ask","messages":[
        {"role":"system","content":"ignored by the flow"},
        {"role":"user","content":"why is the sky blue"}]});
    let (resp, _) = tokio::join!(post(&h, &body, &[]), async {
        let task = recv_type(&mut ws, "task").await;
        assert_eq!(task["prompt"], "Q: why is the sky blue");
        stream_answer(&mut ws, &task, &["Rayleigh"], "Rayleigh scattering").await;
    });
    assert_eq!(resp.status(), 200);
    let v = json_of(resp).await;
    assert_eq!(v["choices"][0]["message"]["content"], "Rayleigh scattering");
    let r = post(&h, &chat_body("flow/none-such", "x", false), &[]).await;
    assert_eq!(r.status(), 404);
    assert_eq!(json_of(r).await["error"]["code"], "model_not_found");
}

/// `/metrics` as a Prometheus parser reads it: `# TYPE` per family, samples by name.
struct Exposition {
    types: std::collections::BTreeMap<String, String>,
    samples: Vec<(String, String, f64)>,
}

impl Exposition {
    fn parse(text: &str) -> Exposition {
        let mut types = std::collections::BTreeMap::new();
        let mut samples = Vec::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, ty) = rest.split_once(' ').expect("# TYPE name type");
                types.insert(name.to_string(), ty.to_string());
            } else if !line.starts_with('#') && !line.is_empty() {
                let (series, value) = line.rsplit_once(' ').expect("a sample and its value");
                let (name, labels) = match series.split_once('{') {
                    Some((n, l)) => (n, l.trim_end_matches('}')),
                    None => (series, ""),
                };
                let value: f64 = value.parse().unwrap_or_else(|_| panic!("a number: {line}"));
                samples.push((name.to_string(), labels.to_string(), value));
            }
        }
        Exposition { types, samples }
    }

    /// The one sample of `name` whose labels hold every one of `has` (0 when there is none).
    fn value(&self, name: &str, has: &[&str]) -> f64 {
        let found: Vec<f64> = self
            .samples
            .iter()
            .filter(|(n, l, _)| n == name && has.iter().all(|h| l.contains(h)))
            .map(|(_, _, v)| *v)
            .collect();
        assert!(found.len() <= 1, "{name} {has:?} matches {found:?}");
        found.first().copied().unwrap_or(0.0)
    }
}

async fn scrape(h: &TestHub) -> Exposition {
    let r = http()
        .get(h.http_url("/metrics"))
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("accept", "application/openmetrics-text; version=1.0.0")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    assert!(text.trim_end().ends_with("# EOF"), "{text}");
    Exposition::parse(&text)
}

#[tokio::test]
async fn metrics_are_typed_counters_grow_and_answer_times_fill_a_histogram() {
    let h = TestHub::start().await;
    let (mut ws, _) = h.tab("sim", Some("w")).await;
    let before = scrape(&h).await;
    for (family, ty) in [
        ("aicard_requests", "counter"),
        ("aicard_answer_seconds", "histogram"),
        ("aicard_cluster_batches_sent", "counter"),
        ("aicard_webhook_delivered", "counter"),
        ("aicard_webhook_backlog", "gauge"),
        ("aicard_tab_answers", "counter"),
        ("aicard_tab_up", "gauge"),
        ("aicard_runs_active", "gauge"),
    ] {
        assert_eq!(
            before.types.get(family).map(String::as_str),
            Some(ty),
            "{family}: {:?}",
            before.types
        );
    }
    assert_eq!(before.value("aicard_answer_seconds_count", &[]), 0.0);

    // One answered prompt and one unknown model.
    let req = tokio::spawn({
        let url = h.http_url("/v1/chat/completions");
        async move {
            http()
                .post(url)
                .header("authorization", format!("Bearer {TOKEN}"))
                .body(chat_body("tab/w", "2+2?", false).to_string())
                .send()
                .await
                .unwrap()
        }
    });
    let task = recv_type(&mut ws, "task").await;
    stream_answer(&mut ws, &task, &["4"], "4.").await;
    assert_eq!(req.await.unwrap().status(), 200);
    let missing = post(&h, &chat_body("gpt-4o", "hi", false), &[]).await;
    assert_eq!(missing.status(), 404);

    let after = scrape(&h).await;
    // A family shows once it has a sample.
    assert_eq!(
        after.types.get("aicard_request_errors").map(String::as_str),
        Some("counter")
    );
    let ok = ["door=\"v1\"", "status=\"200\""];
    assert_eq!(
        after.value("aicard_requests_total", &ok) - before.value("aicard_requests_total", &ok),
        1.0
    );
    let lost = ["door=\"v1\"", "status=\"404\""];
    assert_eq!(after.value("aicard_requests_total", &lost), 1.0);
    assert_eq!(
        after.value(
            "aicard_request_errors_total",
            &["door=\"v1\"", "class=\"4xx\""]
        ),
        1.0
    );
    // The first scrape itself was counted when it was answered.
    assert!(
        after.value(
            "aicard_requests_total",
            &["door=\"metrics\"", "status=\"200\""]
        ) >= 1.0
    );
    assert_eq!(after.value("aicard_answer_seconds_count", &[]), 1.0);
    let buckets: Vec<(f64, f64)> = after
        .samples
        .iter()
        .filter(|(n, _, _)| n == "aicard_answer_seconds_bucket")
        .map(|(_, l, v)| {
            let le = l
                .split("le=\"")
                .nth(1)
                .and_then(|s| s.split('"').next())
                .expect("a bucket has le");
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap()
            };
            (le, *v)
        })
        .collect();
    assert!(buckets.len() >= 5, "{buckets:?}");
    assert!(
        buckets
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1),
        "bounds rise and counts never fall: {buckets:?}"
    );
    assert_eq!(buckets.last().unwrap(), &(f64::INFINITY, 1.0));
    assert!(after.value("aicard_answer_seconds_sum", &[]) > 0.0);
}

/// A tab parked on a captcha (docs/reliability.md, issue 32 item 4): a request for its model is refused
/// at once with 503 `tabs_unavailable` and `x-should-retry: false`, not after the queue
/// timeout as "busy"; `/v1/models` counts it unavailable; once the person acts, it answers.
#[tokio::test]
async fn a_model_whose_every_tab_waits_for_a_person_is_refused_at_once() {
    let h = TestHub::start().await;
    let (mut ws, _) = h.tab("sim", Some("w")).await;
    let body = chat_body("site/sim", "x", false);
    let (resp, _) = tokio::join!(post(&h, &body, &[]), async {
        let task = recv_type(&mut ws, "task").await;
        let id = task["task_id"].as_str().unwrap();
        send(
            &mut ws,
            &json!({"type":"task_update","task_id":id,"state":"failed","error":"captcha","trouble":"captcha"}),
        )
        .await;
    });
    assert_eq!(resp.status(), 502);
    let adm = h.hub().api.admission().clone();
    let c = h.hub().hub.registry.resolve("w").pop().unwrap();
    until("the tab to be parked", || adm.unavailable(&c)).await;
    let started = std::time::Instant::now();
    let resp = post(
        &h,
        &chat_body("site/sim", "again", false),
        &[("x-aicard-queue-timeout", "120")],
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "refused at once, took {:?}",
        started.elapsed()
    );
    assert_eq!(resp.status(), 503);
    assert_eq!(resp.headers()["x-should-retry"], "false");
    assert!(resp.headers().contains_key("retry-after"));
    let v = json_of(resp).await;
    assert_eq!(v["error"]["code"], "tabs_unavailable", "{v}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("w captcha"), "{msg}");
    let models = json_of(
        http()
            .get(h.http_url("/v1/models/site/sim"))
            .header("authorization", format!("Bearer {TOKEN}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(models["aicard"]["unavailable"], 1, "{models}");
    assert_eq!(models["aicard"]["tabs"], 1, "{models}");
    // The person solves the captcha: the tab takes prompts again.
    send(&mut ws, &json!({"type":"user_input","text":"solved"})).await;
    until("the tab to be usable", || !adm.unavailable(&c)).await;
    let body = chat_body("site/sim", "after", false);
    let (resp, _) = tokio::join!(post(&h, &body, &[]), async {
        let task = recv_type(&mut ws, "task").await;
        stream_answer(&mut ws, &task, &[], "back").await;
    });
    assert_eq!(resp.status(), 200);
}

/// A request waiting for its model while the only other tab gets parked is told at once too,
/// not at its timeout; with one tab parked and one busy, the request waits for the busy one.
#[tokio::test]
async fn a_parked_tab_beside_a_busy_one_leaves_the_request_waiting_for_the_busy_one() {
    let h = TestHub::start().await;
    let (mut a, _) = h.tab("sim", Some("a")).await;
    let (mut b, _) = h.tab("sim", Some("b")).await;
    // a parks on a captcha.
    let body = chat_body("tab/a", "x", false);
    let (resp, _) = tokio::join!(post(&h, &body, &[]), async {
        let task = recv_type(&mut a, "task").await;
        let id = task["task_id"].as_str().unwrap();
        send(
            &mut a,
            &json!({"type":"task_update","task_id":id,"state":"failed","error":"login","trouble":"login"}),
        )
        .await;
    });
    assert_eq!(resp.status(), 502);
    // b is busy with a first request; a second waits for b and gets it.
    let first = tokio::spawn(post_owned(h.http_url("/v1/chat/completions"), "first"));
    let t1 = recv_type(&mut b, "task").await;
    let second = tokio::spawn(post_owned(h.http_url("/v1/chat/completions"), "second"));
    let adm = h.hub().api.admission().clone();
    until("the second to wait", || adm.depth("site/sim") == 1).await;
    stream_answer(&mut b, &t1, &[], "one").await;
    let t2 = recv_type(&mut b, "task").await;
    assert!(t2["prompt"].as_str().unwrap().contains("second"));
    stream_answer(&mut b, &t2, &[], "two").await;
    assert_eq!(first.await.unwrap(), 200);
    assert_eq!(second.await.unwrap(), 200);
}

async fn post_owned(url: String, text: &str) -> u16 {
    http()
        .post(url)
        .header("authorization", format!("Bearer {TOKEN}"))
        .body(chat_body("site/sim", text, false).to_string())
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// Stickiness (issue 32 item 9): the turns of one conversation go to the tab that answered its
/// first turn, whether the client names the conversation (`x-aicard-conversation`) or sends
/// the whole conversation again (the first user message names it), even when another tab is
/// less used.
#[tokio::test]
async fn the_turns_of_one_conversation_go_to_one_tab() {
    let h = TestHub::start().await;
    let (mut a, _) = h.tab("sim", Some("a")).await;
    let (mut b, _) = h.tab("sim", Some("b")).await;
    let ask = |body: Value, headers: Vec<(&'static str, String)>| {
        let url = h.http_url("/v1/chat/completions");
        async move {
            let mut req = http()
                .post(url)
                .header("authorization", format!("Bearer {TOKEN}"));
            for (k, v) in headers {
                req = req.header(k, v);
            }
            let resp = req.body(body.to_string()).send().await.unwrap();
            json_of(resp).await
        }
    };
    // Answers whichever tab got the task; says which.
    async fn serve(a: &mut Ws, b: &mut Ws) -> &'static str {
        tokio::select! {
            t = recv_type(a, "task") => { stream_answer(a, &t, &[], "from a").await; "a" }
            t = recv_type(b, "task") => { stream_answer(b, &t, &[], "from b").await; "b" }
        }
    }
    let turn1 = json!({"model":"site/sim","messages":[{"role":"user","content":"讲个故事"}]});
    let (v, first) = tokio::join!(ask(turn1, vec![]), serve(&mut a, &mut b));
    assert!(v["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .ends_with(first));
    // The other tab stays idle: the least used tab is never the conversation's own.
    for turn in 0..3 {
        let body = json!({"model":"site/sim","messages":[
            {"role":"user","content":"讲个故事"},
            {"role":"assistant","content":"从前……"},
            {"role":"user","content":format!("然后呢 {turn}")}
        ]});
        let (_v, tab) = tokio::join!(ask(body, vec![]), serve(&mut a, &mut b));
        assert_eq!(tab, first, "follow-up {turn} went to another tab");
    }
    // A named conversation sticks whatever its messages, past the point where its tab is the
    // more used one.
    let named =
        |text: &str| json!({"model":"site/sim","messages":[{"role":"user","content":text}]});
    let hdr = || vec![("x-aicard-conversation", "chat-42".to_string())];
    let (_v, tab1) = tokio::join!(ask(named("one"), hdr()), serve(&mut a, &mut b));
    for text in ["two", "three", "four", "five", "six", "seven"] {
        let (_v, tab) = tokio::join!(ask(named(text), hdr()), serve(&mut a, &mut b));
        assert_eq!(tab, tab1, "named conversation moved on `{text}`");
    }
}

/// Two conversations that open with the same words are not queued on one tab: a first turn
/// only records its tab; it is the follow-ups that stick.
#[tokio::test]
async fn conversations_that_open_alike_are_not_queued_on_one_tab() {
    let h = TestHub::start().await;
    let (mut a, _) = h.tab("sim", Some("a")).await;
    let (mut b, _) = h.tab("sim", Some("b")).await;
    let url = h.http_url("/v1/chat/completions");
    let first = tokio::spawn(post_owned(url.clone(), "你好"));
    // Whichever tab took the first one keeps it unanswered.
    let (mut busy, mut other, t1) = tokio::select! {
        t = recv_type(&mut a, "task") => (a, b, t),
        t = recv_type(&mut b, "task") => (b, a, t),
    };
    let second = tokio::spawn(post_owned(url, "你好"));
    let t2 = recv_type(&mut other, "task").await;
    assert_eq!(t2["prompt"], "你好");
    stream_answer(&mut other, &t2, &[], "two").await;
    stream_answer(&mut busy, &t1, &[], "one").await;
    assert_eq!(first.await.unwrap(), 200);
    assert_eq!(second.await.unwrap(), 200);
}

async fn get_model(h: &TestHub, id: &str) -> (u16, Value) {
    let r = http()
        .get(h.http_url(&format!("/v1/models/{id}")))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), json_of(r).await)
}

#[tokio::test]
async fn models_lists_agents_and_retrieve_answers_every_id_chat_accepts() {
    let h = hub_with_flows(&[(
        "greet",
        "name: greet\ninputs: {question: {type: string}}\nnodes:\n  - {id: a, target: sim, prompt: \"$question\"}\n",
    )])
    .await;
    let mut boss = h.scripted("boss", "sim", "master", |_| Reply::Silent).await;
    let w = h.scripted("w1", "sim", "worker", |_| Reply::Silent).await;
    let made = boss.command("?<agent create scout on w1>!").await;
    assert_eq!(made["result"]["success"], true, "{made}");
    // The list names the agent as a model id chat accepts.
    let list = json_of(
        http()
            .get(h.http_url("/v1/models"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap(),
    )
    .await;
    let ids: Vec<&str> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"agent/scout"), "{ids:?}");
    let entry = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "agent/scout")
        .unwrap();
    assert_eq!(entry["object"], "model");
    assert_eq!(entry["aicard"]["target"], "w1", "{entry}");
    assert_eq!(entry["aicard"]["tabs"], 1, "{entry}");
    // Retrieve answers every id chat accepts: each listed one, and those chat takes though
    // the list does not show them now (a known site with no tab online, a tab by client id,
    // a bare site name).
    for id in &ids {
        let (status, v) = get_model(&h, id).await;
        assert_eq!(status, 200, "{id}: {v}");
        assert_eq!(v["id"], *id);
    }
    for (asked, id) in [
        ("agent/scout", "agent/scout"),
        ("flow/greet", "flow/greet"),
        ("site/kimi", "site/kimi"),
        ("kimi", "site/kimi"),
        ("sim", "site/sim"),
        ("auto", "auto"),
        (&format!("tab/{}", w.client_id) as &str, "tab/w1"),
    ] {
        let (status, v) = get_model(&h, asked).await;
        assert_eq!(status, 200, "{asked}: {v}");
        assert_eq!(v["id"], id, "{asked}");
        assert_eq!(v["object"], "model");
    }
    let (_, kimi) = get_model(&h, "site/kimi").await;
    assert_eq!(kimi["aicard"]["tabs"], 0, "{kimi}");
    // Ids chat refuses with 404 are 404 here too, and the hint names every kind of id.
    for id in [
        "agent/nobody",
        "flow/nothing",
        "gpt-4o",
        "site/nowhere",
        "tab/ghost",
    ] {
        let (status, v) = get_model(&h, id).await;
        assert_eq!(status, 404, "{id}: {v}");
        assert_eq!(v["error"]["code"], "model_not_found", "{id}");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(msg.contains("agent/NAME"), "{msg}");
        let chat = post(&h, &chat_body(id, "x", false), &[]).await;
        assert_eq!(chat.status(), 404, "chat {id}");
        let msg = json_of(chat).await["error"]["message"].to_string();
        assert!(msg.contains("agent/NAME"), "{msg}");
    }
}

/// A 429's `Retry-After` and the wait its message states (the same number of seconds).
async fn stated_wait(resp: reqwest::Response) -> (u64, String) {
    assert_eq!(resp.status(), 429);
    let retry: u64 = resp.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let msg = json_of(resp).await["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    (retry, msg)
}

#[tokio::test]
async fn a_busy_tabs_429_states_its_measured_time_left_plus_the_queue_ahead() {
    // The tab's tasks take TYPICAL (the model writing; not synchronisation).
    const TYPICAL: Duration = Duration::from_secs(2);
    let h = TestHub::start().await;
    let mut boss = h.scripted("boss", "sim", "master", |_| Reply::Silent).await;
    let w = h
        .scripted("w", "sim", "worker", |p| {
            Reply::Text(TYPICAL, format!("answer to {p}"))
        })
        .await;
    // One task through the command language: the decision engine measures its duration
    // (the API's own timings never saw it).
    let r = boss.command("?<to w: first>!").await;
    assert_eq!(r["result"]["success"], true, "{r}");
    let held_at = Instant::now();
    let holder = tokio::spawn({
        let url = h.http_url("/v1/chat/completions");
        async move {
            http()
                .post(url)
                .bearer_auth(TOKEN)
                .body(chat_body("site/sim", "second", false).to_string())
                .send()
                .await
                .unwrap()
        }
    });
    let prompts = w.prompts.clone();
    until("the tab took the API prompt", || {
        prompts.lock().unwrap().len() == 2
    })
    .await;
    let resp = post(
        &h,
        &chat_body("site/sim", "impatient", false),
        &[("x-aicard-queue-timeout", "0")],
    )
    .await;
    let elapsed = held_at.elapsed();
    let (retry, msg) = stated_wait(resp).await;
    // What is left of the tab's measured task time, in whole seconds up.
    let most = TYPICAL.as_secs_f64().ceil() as u64;
    let least = ((TYPICAL.as_secs_f64() - elapsed.as_secs_f64()).ceil() as u64).max(1);
    assert!(
        (least..=most).contains(&retry),
        "Retry-After {retry}, want {least}..={most}: {msg}"
    );
    assert!(msg.contains(&format!("estimated wait {retry} s")), "{msg}");
    // A request queued ahead adds the tab's typical task time.
    let admission = h.hub().api.admission().clone();
    let patient = tokio::spawn({
        let url = h.http_url("/v1/chat/completions");
        async move {
            http()
                .post(url)
                .bearer_auth(TOKEN)
                .header("x-aicard-queue-timeout", "60")
                .body(chat_body("site/sim", "patient", false).to_string())
                .send()
                .await
                .unwrap()
        }
    });
    until("the patient request waits", || {
        admission.depth("site/sim") == 1
    })
    .await;
    let resp = post(
        &h,
        &chat_body("site/sim", "impatient again", false),
        &[("x-aicard-queue-timeout", "0")],
    )
    .await;
    let elapsed = held_at.elapsed();
    let (retry, msg) = stated_wait(resp).await;
    let most = (2.0 * TYPICAL.as_secs_f64()).ceil() as u64;
    let least = (2.0 * TYPICAL.as_secs_f64() - elapsed.as_secs_f64()).ceil() as u64;
    assert!(
        (least..=most).contains(&retry),
        "Retry-After {retry}, want {least}..={most}: {msg}"
    );
    assert!(msg.contains(&format!("estimated wait {retry} s")), "{msg}");
    assert_eq!(holder.await.unwrap().status(), 200);
    assert_eq!(patient.await.unwrap().status(), 200);
}

/// `promtool check metrics` on `text`: None when promtool is not installed (the test then
/// skips, unless AICARD_REQUIRE_PROMTOOL=1: test-all.sh installs it, tests/sdk/install.sh).
fn promtool_check(text: &str) -> Option<(bool, String)> {
    use std::io::Write;
    let spawned = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            assert!(
                std::env::var("AICARD_REQUIRE_PROMTOOL").as_deref() != Ok("1"),
                "promtool is required (AICARD_REQUIRE_PROMTOOL=1) but cannot run: {e}"
            );
            eprintln!("promtool not installed: `promtool check metrics` skipped");
            return None;
        }
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "exit {:?}\n{}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some((out.status.success(), said))
}

async fn scrape_as(h: &TestHub, accept: Option<&str>) -> (String, String) {
    let mut req = http()
        .get(h.http_url("/metrics"))
        .header("authorization", format!("Bearer {TOKEN}"));
    if let Some(a) = accept {
        req = req.header("accept", a);
    }
    let r = req.send().await.unwrap();
    assert_eq!(r.status(), 200);
    let ct = r.headers()["content-type"].to_str().unwrap().to_string();
    (ct, r.text().await.unwrap())
}

/// The sample `NAME{LABELS} VALUE` whose name is `name` and whose labels hold every one of
/// `has`; 0 when none.
fn sample(text: &str, name: &str, has: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            let n = l.split(['{', ' ']).next().unwrap();
            n == name && has.iter().all(|h| l.contains(h))
        })
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum()
}

/// `/metrics` speaks the Prometheus text format (0.0.4) unless the scraper asks for
/// OpenMetrics; `promtool check metrics` accepts a live scrape; tasks and commands are counted
/// by outcome, and times to first chunk and task durations fill histograms by site.
#[tokio::test]
async fn metrics_speak_prometheus_text_unless_openmetrics_is_asked_and_promtool_accepts_them() {
    let h = TestHub::start().await;
    let mut boss = h.scripted("boss", "sim", "master", |_| Reply::Silent).await;
    let _w = h
        .scripted("w", "sim", "worker", |p| {
            if p.contains("fail") {
                Reply::Fail("site error".into())
            } else {
                Reply::Text(Duration::from_millis(20), "ok".into())
            }
        })
        .await;
    let r = post(&h, &chat_body("site/sim", "hello", false), &[]).await;
    assert_eq!(r.status(), 200);
    let ok = boss.command("?<to w: hi>!").await;
    assert_eq!(ok["result"]["success"], true, "{ok}");
    let failed = boss.command("?<to w: please fail>!").await;
    assert_eq!(failed["result"]["success"], false, "{failed}");

    let (ct, text) = scrape_as(&h, None).await;
    assert!(ct.starts_with("text/plain; version=0.0.4"), "{ct}");
    assert!(!text.contains("# EOF"), "{text}");
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, ty) = rest.split_once(' ').unwrap();
            if ty == "counter" {
                assert!(name.ends_with("_total"), "{line}");
            }
            assert!(
                text.contains(&format!("# HELP {name} ")),
                "{name} has no HELP naming it"
            );
        }
    }
    let site = "site=\"sim\"";
    assert_eq!(
        sample(
            &text,
            "aicard_tasks_total",
            &[site, "outcome=\"completed\""]
        ),
        2.0,
        "{text}"
    );
    assert_eq!(
        sample(&text, "aicard_tasks_total", &[site, "outcome=\"failed\""]),
        1.0
    );
    assert_eq!(
        sample(&text, "aicard_commands_total", &["outcome=\"ok\""]),
        1.0
    );
    assert_eq!(
        sample(&text, "aicard_commands_total", &["outcome=\"failed\""]),
        1.0
    );
    assert_eq!(
        sample(&text, "aicard_task_first_chunk_seconds_count", &[site]),
        2.0
    );
    assert_eq!(sample(&text, "aicard_task_seconds_count", &[site]), 2.0);
    assert!(sample(&text, "aicard_task_seconds_sum", &[site]) > 0.0);
    assert_eq!(
        sample(&text, "aicard_task_seconds_bucket", &[site, "le=\"+Inf\""]),
        2.0
    );
    if let Some((passed, said)) = promtool_check(&text) {
        assert!(passed, "promtool check metrics: {said}\n{text}");
    }
    // A scraper that asks for OpenMetrics gets it.
    let (ct, om) = scrape_as(
        &h,
        Some("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"),
    )
    .await;
    assert!(ct.starts_with("application/openmetrics-text"), "{ct}");
    assert!(om.trim_end().ends_with("# EOF"), "{om}");
    assert!(om.contains("# TYPE aicard_tasks counter"), "{om}");
}

// ---- Files and images (docs/api.md "Files and images") ----

/// A small PNG's bytes (the header is real; the hub does not decode images).
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR fake image bytes";

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn image_body(model: &str, url: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "看看这张图"},
        {"type": "image_url", "image_url": {"url": url}}
    ]}]})
}

fn blobs(h: &TestHub) -> usize {
    std::fs::read_dir(h.dir.path().join("blobs"))
        .map(|d| d.flatten().filter(|e| e.path().is_file()).count())
        .unwrap_or(0)
}

/// Posts `body` in the background; the tab answers its task with "seen"; returns the task.
async fn attached(h: &TestHub, ws: &mut Ws, body: Value) -> Value {
    let url = h.http_url("/v1/chat/completions");
    let req = tokio::spawn(async move {
        http()
            .post(url)
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap()
    });
    let task = recv_type(ws, "task").await;
    let id = task["task_id"].as_str().unwrap().to_string();
    // The files are still granted while the task is held: the test fetches them now.
    let held = task.clone();
    accept(ws, &task).await;
    send(
        ws,
        &json!({"type":"turn_end","turn_id":format!("t-{id}"),"text":"seen","task_id":id}),
    )
    .await;
    let resp = req.await.unwrap();
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
    held
}

#[tokio::test]
async fn an_image_data_url_and_a_file_part_reach_the_tab_and_one_content_is_kept_once() {
    let h = TestHub::start().await;
    let (mut ws, welcome) = h.tab("sim", Some("w")).await;
    let me = welcome["client_id"].as_str().unwrap().to_string();
    let pdf = b"%PDF-1.4 a small report".to_vec();
    let body = json!({"model": "tab/w", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "比较图和报告"},
        {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{}", b64(PNG)), "detail": "high"}},
        {"type": "file", "file": {"filename": "报告.pdf", "file_data": format!("data:application/pdf;base64,{}", b64(&pdf))}}
    ]}]});
    let url = h.http_url("/v1/chat/completions");
    let req = tokio::spawn(async move {
        http()
            .post(url)
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap()
    });
    let task = recv_type(&mut ws, "task").await;
    assert_eq!(
        task["prompt"], "比较图和报告\n[file: image-1.png]\n[file: 报告.pdf]",
        "{task}"
    );
    let att = task["attachments"].as_array().expect("attachments").clone();
    assert_eq!(att.len(), 2, "{task}");
    assert_eq!(
        (att[0]["name"].as_str(), att[0]["mime"].as_str()),
        (Some("image-1.png"), Some("image/png"))
    );
    assert_eq!(
        (att[1]["name"].as_str(), att[1]["mime"].as_str()),
        (Some("报告.pdf"), Some("application/pdf"))
    );
    assert_eq!(att[1]["size"], pdf.len());
    // The holding tab fetches the very bytes; another client id gets 404.
    let (status, bytes) = fetch_file(&h, att[0]["id"].as_str().unwrap(), &me).await;
    assert_eq!((status, bytes.as_slice()), (200, PNG));
    let (status, bytes) = fetch_file(&h, att[1]["id"].as_str().unwrap(), &me).await;
    assert_eq!((status, bytes), (200, pdf.clone()));
    assert_eq!(
        fetch_file(&h, att[0]["id"].as_str().unwrap(), "someone-else")
            .await
            .0,
        404
    );
    stream_answer(&mut ws, &task, &["ok"], "ok").await;
    assert_eq!(req.await.unwrap().status(), 200);
    assert_eq!(blobs(&h), 2);
    // The same image again, and twice in one request: the same blob, attached once.
    let url = format!("data:image/png;base64,{}", b64(PNG));
    let mut twice = image_body("tab/w", &url);
    twice["messages"][0]["content"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "image_url", "image_url": {"url": url}}));
    let again = attached(&h, &mut ws, twice).await;
    let att2 = again["attachments"].as_array().unwrap();
    assert_eq!(att2.len(), 1, "one content, one attachment: {again}");
    assert_eq!(att2[0]["sha256"], att[0]["sha256"]);
    assert_ne!(att2[0]["id"], att[0]["id"], "a new grant per task");
    assert_eq!(blobs(&h), 2, "a file sent twice is kept once");
    // The first task ended: its grant is gone.
    assert_eq!(
        fetch_file(&h, att[0]["id"].as_str().unwrap(), &me).await.0,
        404
    );
}

#[tokio::test]
async fn bad_files_are_400_in_openais_shape_and_nothing_reaches_the_tab() {
    let h = TestHub::start_with(|c| c.max_file_mb = 1).await;
    let (mut ws, _) = h.tab("sim", Some("w")).await;
    let big = vec![7u8; 1024 * 1024 + 10];
    let file = |name: &str, data: String| {
        json!({"model": "tab/w", "messages": [{"role": "user", "content": [
            {"type": "file", "file": {"filename": name, "file_data": data}}
        ]}]})
    };
    let cases = [
        (
            image_body("tab/w", &format!("data:image/png;base64,{}", b64(&big))),
            "file_too_large",
            "messages[0].content[1]",
        ),
        (
            file("big.pdf", b64(&big)),
            "file_too_large",
            "messages[0].content[0]",
        ),
        (
            image_body("tab/w", "data:image/png,plain"),
            "invalid_image_url",
            "messages[0].content[1]",
        ),
        (
            image_body("tab/w", "data:image/png;base64"),
            "invalid_image_url",
            "messages[0].content[1]",
        ),
        (
            image_body("tab/w", "ftp://example.com/a.png"),
            "invalid_image_url",
            "messages[0].content[1]",
        ),
        (
            image_body("tab/w", "https://example.com/a.png"),
            "invalid_image_url",
            "messages[0].content[1]",
        ),
        (
            image_body(
                "tab/w",
                &format!("data:image/svg+xml;base64,{}", b64(b"<svg/>")),
            ),
            "unsupported_file_type",
            "messages[0].content[1]",
        ),
        (
            file("run.exe", b64(b"MZ")),
            "unsupported_file_type",
            "messages[0].content[0]",
        ),
        (
            file("a.pdf", "!!!not base64!!!".into()),
            "invalid_file_data",
            "messages[0].content[0]",
        ),
        (
            json!({"model": "tab/w", "messages": [{"role": "user", "content": [
                {"type": "file", "file": {"file_id": "file-abc"}}]}]}),
            "unsupported_parameter",
            "messages[0].content[0]",
        ),
    ];
    for (body, code, param) in cases {
        let resp = post(&h, &body, &[]).await;
        assert_eq!(resp.status(), 400, "{code}");
        let v = json_of(resp).await;
        assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
        assert_eq!(v["error"]["code"], code, "{v}");
        assert_eq!(v["error"]["param"], param, "{v}");
        assert!(!v["error"]["message"].as_str().unwrap().is_empty());
    }
    let v = json_of(post(&h, &image_body("tab/w", "https://example.com/a.png"), &[]).await).await;
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--fetch-urls"),
        "{v}"
    );
    // Nothing was kept, and the first task the tab sees is the next good request.
    assert_eq!(blobs(&h), 0);
    let task = attached(&h, &mut ws, chat_body("tab/w", "only text", false)).await;
    assert_eq!(task["prompt"], "only text");
    // Without the token the body is never read: 401, not 400.
    let resp = http()
        .post(h.http_url("/v1/chat/completions"))
        .body(image_body("tab/w", "data:nope").to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
}

/// A stand-in for the internet on 127.0.0.1 (the hub is told to let exactly this address
/// through): an image, redirects to loopback and to a name that resolves to loopback, and
/// a non-image. `secret` counts what reached the other, forbidden, server.
async fn origin(secret_port: u16) -> std::net::SocketAddr {
    use axum::response::{IntoResponse, Redirect};
    use axum::routing::get;
    let app = axum::Router::new()
        .route(
            "/img.png",
            get(|| async { ([("content-type", "image/png")], PNG).into_response() }),
        )
        .route(
            "/page",
            get(|| async { ([("content-type", "text/html")], "<html>").into_response() }),
        )
        .route(
            "/hop",
            get(|| async { Redirect::temporary("/img.png").into_response() }),
        )
        .route(
            "/to-loopback",
            get(move || async move {
                Redirect::temporary(&format!("http://127.0.0.1:{secret_port}/secret.png"))
                    .into_response()
            }),
        )
        .route(
            "/to-localhost",
            get(move || async move {
                Redirect::temporary(&format!("http://localhost:{secret_port}/secret.png"))
                    .into_response()
            }),
        )
        .route(
            "/to-metadata",
            get(|| async {
                Redirect::temporary("http://169.254.169.254/latest/meta-data").into_response()
            }),
        );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    addr
}

#[tokio::test]
async fn fetch_urls_fetches_a_public_image_and_never_follows_a_redirect_to_loopback() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    // The forbidden server: anything reaching it is a hole.
    let hits = Arc::new(AtomicUsize::new(0));
    let secret = {
        let hits = hits.clone();
        let app = axum::Router::new().fallback(move || {
            let hits = hits.clone();
            async move {
                hits.fetch_add(1, Ordering::SeqCst);
                ([("content-type", "image/png")], PNG)
            }
        });
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
        addr
    };
    let public = origin(secret.port()).await;
    let h = TestHub::start_with(|c| {
        c.fetch_urls = true;
        c.fetch_allow = vec![public];
    })
    .await;
    let (mut ws, _) = h.tab("sim", Some("w")).await;
    for path in ["/img.png", "/hop"] {
        let task = attached(
            &h,
            &mut ws,
            image_body("tab/w", &format!("http://{public}{path}")),
        )
        .await;
        let att = &task["attachments"][0];
        assert_eq!(att["mime"], "image/png", "{task}");
        assert_eq!(att["size"], PNG.len(), "{task}");
        // The grant ended with the task; the bytes are the blob the sha names.
        let kept = std::fs::read(
            h.dir
                .path()
                .join("blobs")
                .join(att["sha256"].as_str().unwrap()),
        )
        .unwrap();
        assert_eq!(kept, PNG);
    }
    let refused = [
        (format!("http://{public}/to-loopback"), "127.0.0.1"),
        (format!("http://{public}/to-localhost"), "localhost"),
        (format!("http://{public}/to-metadata"), "169.254.169.254"),
        (
            format!("http://{secret}/secret.png"),
            "not a public address",
        ),
        (
            format!("http://[::ffff:127.0.0.1]:{}/img.png", public.port()),
            "not a public address",
        ),
        (
            format!("http://localhost:{}/img.png", public.port()),
            "no public address",
        ),
        (format!("http://{public}/page"), "not an image"),
    ];
    for (url, why) in refused {
        let resp = post(&h, &image_body("tab/w", &url), &[]).await;
        assert_eq!(resp.status(), 400, "{url}");
        let v = json_of(resp).await;
        assert_eq!(v["error"]["code"], "invalid_image_url", "{url}: {v}");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(msg.contains(why), "{url}: {msg}");
    }
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "nothing reached the loopback server"
    );
}

/// A server that must never be reached: it counts every request and answers with an image.
fn counting(hits: &std::sync::Arc<std::sync::atomic::AtomicUsize>) -> axum::Router {
    let hits = hits.clone();
    axum::Router::new().fallback(move || {
        let hits = hits.clone();
        async move {
            hits.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            ([("content-type", "image/png")], PNG)
        }
    })
}

/// The https stand-in for the internet: an image, a hop to it, and redirects inward (to
/// `secret`, an https server whose certificate the hub trusts but whose address is not
/// public), to private and metadata addresses, and down to `plain` over http.
fn tls_origin(secret: std::net::SocketAddr, plain: std::net::SocketAddr) -> axum::Router {
    use axum::response::{IntoResponse, Redirect};
    use axum::routing::get;
    let to = |url: String| get(move || async move { Redirect::temporary(&url).into_response() });
    let port = secret.port();
    axum::Router::new()
        .route(
            "/img.png",
            get(|| async { ([("content-type", "image/png")], PNG).into_response() }),
        )
        .route("/hop", to("/img.png".into()))
        .route("/to-loopback", to(format!("https://{secret}/secret.png")))
        .route(
            "/to-localhost",
            to(format!("https://localhost:{port}/s.png")),
        )
        .route("/to-private", to("https://10.0.0.1/secret.png".into()))
        .route("/to-metadata", to("https://169.254.169.254/latest".into()))
        .route("/down", to(format!("http://{plain}/img.png")))
}

/// The hub under test, with `allow` let through and the test CA trusted.
async fn fetching_hub(ca: &TestCa, allow: Vec<std::net::SocketAddr>) -> TestHub {
    let root = ca.der.clone();
    TestHub::start_with(|c| {
        c.fetch_urls = true;
        c.fetch_allow = allow;
        c.test_roots = vec![root];
    })
    .await
}

/// Posts an image URL that must be refused, and returns the refusal's message.
async fn refused_fetch(h: &TestHub, url: &str) -> String {
    let resp = post(h, &image_body("tab/w", url), &[]).await;
    assert_eq!(resp.status(), 400, "{url}");
    let v = json_of(resp).await;
    assert_eq!(v["error"]["code"], "invalid_image_url", "{url}: {v}");
    v["error"]["message"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn fetch_urls_fetches_over_https_and_refuses_a_certificate_it_does_not_trust() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let hits = std::sync::Arc::new(AtomicUsize::new(0));
    let ca = TestCa::new();
    let secret = ca.server(&["127.0.0.1"]).serve(counting(&hits)).await;
    // This test follows none of the origin's redirects: `plain` is never listened on.
    let plain = "127.0.0.1:9".parse().unwrap();
    let origin = ca
        .server(&["127.0.0.1"])
        .serve(tls_origin(secret, plain))
        .await;
    // Allowed addresses whose certificates must still fail: one that signs itself, one from
    // the trusted CA for another name.
    let untrusted = TlsServer::self_signed().serve(counting(&hits)).await;
    let misnamed = ca.server(&["example.com"]).serve(counting(&hits)).await;
    let h = fetching_hub(&ca, vec![origin, untrusted, misnamed]).await;
    let (mut ws, _) = h.tab("sim", Some("w")).await;
    for path in ["/img.png", "/hop"] {
        let task = attached(
            &h,
            &mut ws,
            image_body("tab/w", &format!("https://{origin}{path}")),
        )
        .await;
        let att = &task["attachments"][0];
        assert_eq!(att["mime"], "image/png", "{task}");
        assert_eq!(att["size"], PNG.len(), "{task}");
        let kept = std::fs::read(
            h.dir
                .path()
                .join("blobs")
                .join(att["sha256"].as_str().unwrap()),
        )
        .unwrap();
        assert_eq!(kept, PNG);
    }
    let msg = refused_fetch(&h, &format!("https://{untrusted}/img.png")).await;
    assert!(
        msg.contains("certificate") && msg.contains("UnknownIssuer"),
        "{msg}"
    );
    let msg = refused_fetch(&h, &format!("https://{misnamed}/img.png")).await;
    assert!(
        msg.contains("certificate") && msg.contains("not valid for name"),
        "{msg}"
    );
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "no request went over a refused TLS"
    );
}

#[tokio::test]
async fn fetch_urls_over_https_never_follows_a_redirect_inward_or_down_to_http() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let hits = std::sync::Arc::new(AtomicUsize::new(0));
    let ca = TestCa::new();
    // A trusted certificate on a loopback address that is not let through.
    let secret = ca
        .server(&["127.0.0.1", "localhost"])
        .serve(counting(&hits))
        .await;
    // An http server that IS let through: only the downgrade rule keeps the hub out.
    let plain = {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let app = counting(&hits);
        tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
        addr
    };
    let origin = ca
        .server(&["127.0.0.1"])
        .serve(tls_origin(secret, plain))
        .await;
    let h = fetching_hub(&ca, vec![origin, plain]).await;
    let (mut ws, _) = h.tab("sim", Some("w")).await;
    // The redirect policy names the hop it refused; a name is refused by the resolver when
    // the hop connects.
    let cases = [
        (
            "/to-loopback",
            format!("redirect to https://{secret}/secret.png refused"),
        ),
        (
            "/to-localhost",
            "`localhost` resolves to no public address".into(),
        ),
        (
            "/to-private",
            "redirect to https://10.0.0.1/secret.png refused".into(),
        ),
        (
            "/to-metadata",
            "169.254.169.254 is not a public address".into(),
        ),
        (
            "/down",
            format!(
                "redirect to http://{plain}/img.png refused: a redirect from https down to http"
            ),
        ),
    ];
    for (path, why) in cases {
        let msg = refused_fetch(&h, &format!("https://{origin}{path}")).await;
        assert!(msg.contains(&why), "{path}: {msg}");
    }
    let msg = refused_fetch(&h, &format!("https://{secret}/secret.png")).await;
    assert!(msg.contains("not a public address"), "{msg}");
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "nothing reached the forbidden servers"
    );
    // The plain server is let through when asked directly: what kept the redirect out was
    // the downgrade rule alone.
    let task = attached(
        &h,
        &mut ws,
        image_body("tab/w", &format!("http://{plain}/img.png")),
    )
    .await;
    assert_eq!(task["attachments"][0]["size"], PNG.len(), "{task}");
    assert_eq!(hits.load(Ordering::SeqCst), 1);
}
