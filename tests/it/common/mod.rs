//! Shared test helpers: start a real hub on an ephemeral port and talk to it with real
//! WebSocket clients. Every wait has a timeout; nothing sleeps to synchronise.
#![allow(dead_code)]

use std::time::Duration;

use aicard::app::{App, RunningHub};
use aicard::config::HubConfig;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub mod cluster;
pub mod tls;

pub const TOKEN: &str = "test-token";
pub const WAIT: Duration = Duration::from_secs(10);

pub type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A hub on port 0 with short timings and its temp data dir (kept alive with it).
pub struct TestHub {
    pub running: RunningHub,
    pub dir: tempfile::TempDir,
}

impl TestHub {
    pub async fn start() -> TestHub {
        Self::start_with(|_| {}).await
    }

    pub async fn start_with(tweak: impl FnOnce(&mut HubConfig)) -> TestHub {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = HubConfig::for_tests(dir.path().to_path_buf());
        tweak(&mut config);
        let running = App::start(config).await.expect("hub starts");
        TestHub { running, dir }
    }

    /// A scripted tab on `/realtime` that says `hello(label, site, role)` and answers each
    /// task with `script`.
    pub async fn scripted(
        &self,
        label: &str,
        site: &str,
        role: &str,
        script: impl Fn(&str) -> Reply + Send + Sync + 'static,
    ) -> ScriptedTab {
        ScriptedTab::connect(&self.ws_url("/realtime"), hello(label, site, role), script).await
    }

    pub fn ws_url(&self, path: &str) -> String {
        format!("ws://{}{}", self.running.addr, path)
    }

    pub fn http_url(&self, path: &str) -> String {
        format!("http://{}{}", self.running.addr, path)
    }

    pub fn hub(&self) -> &std::sync::Arc<App> {
        &self.running.app
    }

    /// Connects to `/realtime` and says hello; returns the socket and the welcome frame.
    pub async fn tab(&self, site: &str, label: Option<&str>) -> (Ws, Value) {
        let mut ws = self.connect("/realtime").await;
        let mut hello = json!({"type": "hello", "token": TOKEN, "site": site});
        if let Some(l) = label {
            hello["label"] = json!(l);
        }
        send(&mut ws, &hello).await;
        let welcome = recv(&mut ws).await;
        assert_eq!(welcome["type"], "welcome", "{welcome}");
        (ws, welcome)
    }

    pub async fn connect(&self, path: &str) -> Ws {
        let (ws, _) =
            tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(self.ws_url(path)))
                .await
                .expect("connect in time")
                .expect("connect");
        ws
    }

    /// Connects with extra request headers (Origin, Host); returns the HTTP error if refused.
    pub async fn connect_with(
        &self,
        path: &str,
        headers: &[(&str, &str)],
    ) -> Result<Ws, tokio_tungstenite::tungstenite::Error> {
        let mut req = self.ws_url(path).into_client_request().unwrap();
        for (k, v) in headers {
            let name: tokio_tungstenite::tungstenite::http::HeaderName =
                k.parse().expect("header name");
            req.headers_mut()
                .insert(name, v.parse().expect("header value"));
        }
        tokio_tungstenite::connect_async(req)
            .await
            .map(|(ws, _)| ws)
    }
}

pub async fn send(ws: &mut Ws, v: &Value) {
    ws.send(Message::Text(v.to_string().into()))
        .await
        .expect("send");
}

pub async fn send_raw(ws: &mut Ws, text: &str) {
    ws.send(Message::Text(text.to_string().into()))
        .await
        .expect("send");
}

/// Next JSON frame (skipping pings/pongs); panics on timeout or close.
pub async fn recv(ws: &mut Ws) -> Value {
    loop {
        let msg = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("frame in time")
            .expect("socket open")
            .expect("frame ok");
        match msg {
            Message::Text(t) => return serde_json::from_str(&t).expect("json frame"),
            Message::Close(c) => panic!("closed: {c:?}"),
            _ => continue,
        }
    }
}

/// Next frame of a given type, skipping others.
pub async fn recv_type(ws: &mut Ws, ty: &str) -> Value {
    loop {
        let v = recv(ws).await;
        if v["type"] == ty {
            return v;
        }
    }
}

/// Reads until the hub closes the socket; returns the close code.
pub async fn close_code(ws: &mut Ws) -> Option<CloseCode> {
    loop {
        let msg = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("close in time");
        match msg {
            Some(Ok(Message::Close(c))) => return c.map(|c| c.code),
            Some(Ok(_)) => continue,
            Some(Err(_)) | None => return None,
        }
    }
}

/// Answers the next task with `reply(prompt)`; returns the task frame.
pub async fn answer_task(ws: &mut Ws, reply: impl FnOnce(&str) -> String) -> Value {
    let task = recv_type(ws, "task").await;
    let id = task["task_id"].as_str().unwrap().to_string();
    let text = reply(task["prompt"].as_str().unwrap());
    send(
        ws,
        &json!({"type":"task_update","task_id":id,"state":"accepted"}),
    )
    .await;
    send(
        ws,
        &json!({"type":"chunk","turn_id":format!("t-{id}"),"seq":0,"text":text}),
    )
    .await;
    send(
        ws,
        &json!({"type":"turn_end","turn_id":format!("t-{id}"),"text":text,"task_id":id}),
    )
    .await;
    task
}

/// Waits for a hub event matching `pred`.
pub async fn wait_event(
    rx: &mut tokio::sync::broadcast::Receiver<aicard::hub::HubEvent>,
    pred: impl Fn(&aicard::hub::HubEvent) -> bool,
) -> aicard::hub::HubEvent {
    tokio::time::timeout(WAIT, async {
        loop {
            match rx.recv().await {
                Ok(e) if pred(&e) => return e,
                Ok(_) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(e) => panic!("event channel: {e}"),
            }
        }
    })
    .await
    .expect("event in time")
}

/// How a scripted tab answers a prompt.
pub enum Reply {
    /// Stream this text after the delay (the model "thinking"; not synchronisation).
    Text(Duration, String),
    /// Answer with this text after the delay in one `turn_end`, streaming no chunk.
    Unstreamed(Duration, String),
    /// Report the task failed with this reason.
    Fail(String),
    /// Never answer (a stuck tab).
    Silent,
    /// Report the task failed with this reason and `trouble` (`rate_limited`, `captcha`, …).
    Trouble(String, String),
}

/// A scripted tab: answers every task with `script(prompt)`, records the prompts it got, and
/// forwards every other frame to `frames`.
pub struct ScriptedTab {
    pub client_id: String,
    pub prompts: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    pub frames: tokio::sync::mpsc::UnboundedReceiver<Value>,
    out: tokio::sync::mpsc::UnboundedSender<Value>,
    reader: tokio::task::JoinHandle<()>,
}

impl ScriptedTab {
    pub async fn connect(
        ws_url: &str,
        hello: Value,
        script: impl Fn(&str) -> Reply + Send + Sync + 'static,
    ) -> ScriptedTab {
        let (ws, _) = tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(ws_url))
            .await
            .expect("connect in time")
            .expect("connect");
        let (mut sink, mut stream) = ws.split();
        sink.send(Message::Text(hello.to_string().into()))
            .await
            .unwrap();
        let welcome: Value = loop {
            match tokio::time::timeout(WAIT, stream.next())
                .await
                .expect("welcome in time")
            {
                Some(Ok(Message::Text(t))) => break serde_json::from_str(&t).unwrap(),
                Some(Ok(_)) => continue,
                other => panic!("no welcome: {other:?}"),
            }
        };
        assert_eq!(welcome["type"], "welcome", "{welcome}");
        let client_id = welcome["client_id"].as_str().unwrap().to_string();
        let (out_tx, mut out_rx) = tokio::sync::mpsc::unbounded_channel::<Value>();
        tokio::spawn(async move {
            while let Some(v) = out_rx.recv().await {
                if sink
                    .send(Message::Text(v.to_string().into()))
                    .await
                    .is_err()
                {
                    break;
                }
            }
        });
        let prompts = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (frames_tx, frames) = tokio::sync::mpsc::unbounded_channel();
        let out = out_tx.clone();
        let seen = prompts.clone();
        let script = std::sync::Arc::new(script);
        let reader = tokio::spawn(async move {
            while let Some(Ok(msg)) = stream.next().await {
                let Message::Text(t) = msg else { continue };
                let v: Value = serde_json::from_str(&t).unwrap();
                if v["type"] != "task" {
                    let _ = frames_tx.send(v);
                    continue;
                }
                let id = v["task_id"].as_str().unwrap().to_string();
                let prompt = v["prompt"].as_str().unwrap().to_string();
                seen.lock().unwrap().push(prompt.clone());
                let out = out.clone();
                let script = script.clone();
                tokio::spawn(async move {
                    let _ = out.send(json!({"type":"task_update","task_id":id,"state":"accepted"}));
                    match script(&prompt) {
                        Reply::Text(delay, text) => {
                            tokio::time::sleep(delay).await;
                            let turn = format!("turn-{id}");
                            let _ = out
                                .send(json!({"type":"chunk","turn_id":turn,"seq":0,"text":text}));
                            let _ = out.send(
                                json!({"type":"turn_end","turn_id":turn,"text":text,"task_id":id}),
                            );
                        }
                        Reply::Unstreamed(delay, text) => {
                            tokio::time::sleep(delay).await;
                            let _ = out.send(json!({"type":"turn_end","turn_id":format!("turn-{id}"),"text":text,"task_id":id}));
                        }
                        Reply::Fail(reason) => {
                            let _ = out.send(json!({"type":"task_update","task_id":id,"state":"failed","error":reason}));
                        }
                        Reply::Trouble(reason, trouble) => {
                            let _ = out.send(json!({"type":"task_update","task_id":id,"state":"failed","error":reason,"trouble":trouble}));
                        }
                        Reply::Silent => {}
                    }
                });
            }
        });
        ScriptedTab {
            client_id,
            prompts,
            frames,
            out: out_tx,
            reader,
        }
    }

    pub fn send(&self, v: Value) {
        let _ = self.out.send(v);
    }

    /// Next frame of type `ty` (others skipped).
    pub async fn next(&mut self, ty: &str) -> Value {
        tokio::time::timeout(WAIT, async {
            loop {
                let v = self.frames.recv().await.expect("tab open");
                if v["type"] == ty {
                    return v;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no `{ty}` frame in time"))
    }

    /// The next frame, whatever its type (tasks aside).
    pub async fn next_any(&mut self) -> Value {
        tokio::time::timeout(WAIT, self.frames.recv())
            .await
            .expect("a frame in time")
            .expect("tab open")
    }

    /// Every frame (tasks aside) up to and including the next one of type `ty`.
    pub async fn frames_until(&mut self, ty: &str) -> Vec<Value> {
        tokio::time::timeout(WAIT, async {
            let mut seen = Vec::new();
            loop {
                let v = self.frames.recv().await.expect("tab open");
                let done = v["type"] == ty;
                seen.push(v);
                if done {
                    return seen;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no `{ty}` frame in time"))
    }

    /// Types a command as the person would; returns its cmd_result.
    pub async fn command(&mut self, text: &str) -> Value {
        self.send(json!({"type":"user_input","text":text}));
        self.next("cmd_result").await
    }

    pub fn prompts(&self) -> Vec<String> {
        self.prompts.lock().unwrap().clone()
    }

    /// Drops the connection abruptly.
    pub fn kill(self) {
        self.reader.abort();
    }
}

pub fn hello(label: &str, site: &str, role: &str) -> Value {
    json!({"type":"hello","token":TOKEN,"site":site,"label":label,"role":role})
}

/// Waits until a run-level flow_event with one of `states` arrives; returns it.
pub async fn run_event(tab: &mut ScriptedTab, states: &[&str]) -> Value {
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let v = tab.next("flow_event").await;
            if v["node_id"].is_null() && states.contains(&v["state"].as_str().unwrap_or("")) {
                return v;
            }
        }
    })
    .await
    .expect("run event in time")
}

/// Reads SSE events from an `/events` body until one whose data has `"type": ty`; returns
/// that data. `buf` carries a partial event over to the next call.
pub async fn next_sse<B, E>(
    body: &mut (impl futures_util::Stream<Item = Result<B, E>> + Unpin),
    buf: &mut String,
    ty: &str,
) -> Value
where
    B: AsRef<[u8]>,
    E: std::fmt::Debug,
{
    tokio::time::timeout(WAIT, async {
        loop {
            let v = next_sse_event(body, buf).await.expect("stream open");
            if v["type"] == ty {
                return v;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no `{ty}` event in time"))
}

/// The next SSE event's data, whatever its type; None when the stream ended.
pub async fn next_sse_event<B, E>(
    body: &mut (impl futures_util::Stream<Item = Result<B, E>> + Unpin),
    buf: &mut String,
) -> Option<Value>
where
    B: AsRef<[u8]>,
    E: std::fmt::Debug,
{
    loop {
        while let Some(end) = buf.find("\n\n") {
            let event: String = buf.drain(..end + 2).collect();
            for line in event.lines() {
                if let Some(data) = line.strip_prefix("data: ") {
                    return Some(serde_json::from_str(data).expect("json event"));
                }
            }
        }
        let chunk = body.next().await?.expect("chunk");
        buf.push_str(std::str::from_utf8(chunk.as_ref()).expect("utf-8"));
    }
}

/// A tab on the SSE + POST transport: `hello` over `POST /send`, frames over `GET /events`.
pub struct SseTab {
    pub id: String,
    pub welcome: Value,
    http: reqwest::Client,
    base: String,
}

/// An open `GET /events` body.
pub struct SseStream {
    pub body: futures_util::stream::BoxStream<'static, reqwest::Result<Vec<u8>>>,
    pub buf: String,
}

impl SseStream {
    /// Next event of type `ty` (others skipped).
    pub async fn next(&mut self, ty: &str) -> Value {
        next_sse(&mut self.body, &mut self.buf, ty).await
    }

    /// Next event of any type; None when the hub ended the stream.
    pub async fn next_any(&mut self) -> Option<Value> {
        tokio::time::timeout(WAIT, next_sse_event(&mut self.body, &mut self.buf))
            .await
            .expect("an event or the end in time")
    }
}

impl SseTab {
    /// Says `hello` over `POST /send`.
    pub async fn hello(h: &TestHub, hello: Value) -> SseTab {
        let http = aicard::http_client::plain();
        let base = h.http_url("");
        let resp = http
            .post(format!("{base}/send"))
            .bearer_auth(TOKEN)
            .body(hello.to_string())
            .send()
            .await
            .expect("POST /send");
        let welcome: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
        assert_eq!(welcome["type"], "welcome", "{welcome}");
        let id = welcome["client_id"].as_str().unwrap().to_string();
        SseTab {
            id,
            welcome,
            http,
            base,
        }
    }

    /// Posts one frame as this tab; returns the hub's answer.
    pub async fn post(&self, frame: &Value) -> Value {
        self.post_raw(frame.to_string()).await
    }

    pub async fn post_raw(&self, body: String) -> Value {
        let resp = self
            .http
            .post(format!("{}/send", self.base))
            .bearer_auth(TOKEN)
            .header("X-AIcard-Client", &self.id)
            .body(body)
            .send()
            .await
            .expect("POST /send");
        serde_json::from_str(&resp.text().await.unwrap()).expect("json answer")
    }

    /// Opens `GET /events` and reads its first event, which must be this tab's `welcome`.
    /// The stream is not attached until `ack_welcome`.
    pub async fn open(&self) -> SseStream {
        let resp = self
            .http
            .get(format!("{}/events", self.base))
            .bearer_auth(TOKEN)
            .header("X-AIcard-Client", &self.id)
            .send()
            .await
            .expect("GET /events");
        assert_eq!(resp.status(), 200);
        use futures_util::TryStreamExt;
        let mut stream = SseStream {
            body: Box::pin(resp.bytes_stream().map_ok(|b| b.to_vec())),
            buf: String::new(),
        };
        let first = stream.next_any().await.expect("a first event");
        assert_eq!(first["type"], "welcome", "the first event: {first}");
        assert_eq!(first["client_id"], self.id.as_str());
        stream
    }

    /// Confirms that the stream's `welcome` arrived; the hub attaches the stream.
    pub async fn ack_welcome(&self) {
        let a = self.post(&json!({"type":"ack","received":"welcome"})).await;
        assert_eq!(a["type"], "ack", "{a}");
    }

    /// Opens the event stream and confirms it: frames for the tab now flow to it.
    pub async fn connect(&self) -> SseStream {
        let stream = self.open().await;
        self.ack_welcome().await;
        stream
    }
}

// ---- flows: write them into a hub's flows dir, run one from a master and wait for its end.

pub fn write_flow(dir: &std::path::Path, name: &str, yaml: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(format!("{name}.yaml")), yaml).unwrap();
}

pub async fn hub_with_flows(flows: &[(&str, &str)]) -> TestHub {
    let h = TestHub::start_with(|c| c.flows_dir = c.data_dir.join("flows")).await;
    for (name, yaml) in flows {
        write_flow(&h.hub().config.flows_dir, name, yaml);
    }
    h
}

/// Runs `cmd` from the master and waits for the run to finish; returns (final state, the
/// text delivered to the master).
pub async fn run_flow(master: &mut ScriptedTab, cmd: &str) -> (String, Option<String>) {
    master.send(json!({"type":"user_input","text":cmd}));
    let mut delivered = None;
    let state = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let v = master.frames.recv().await.expect("master open");
            match v["type"].as_str() {
                Some("deliver") => {
                    delivered.get_or_insert(v["text"].as_str().unwrap().to_string());
                }
                Some("cmd_result") if v["result"]["success"] == false => {
                    panic!("run refused: {v}")
                }
                Some("flow_event") if v["node_id"].is_null() => {
                    let s = v["state"].as_str().unwrap().to_string();
                    if matches!(s.as_str(), "completed" | "failed" | "stopped") {
                        return s;
                    }
                }
                _ => {}
            }
        }
    })
    .await
    .expect("run finished in time");
    (state, delivered)
}

/// Whether `python` (as the seed manual writes it) runs here. Without it a test prints a skip
/// line and returns, unless `AICARD_REQUIRE_PYTHON=1` (the README's test command) makes that a
/// failure.
pub fn have_python() -> bool {
    let found = std::process::Command::new("python")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var("AICARD_REQUIRE_PYTHON").as_deref() != Ok("1"),
            "python is not on PATH and AICARD_REQUIRE_PYTHON=1 (test-all.sh installs python-is-python3)"
        );
        eprintln!("skipped: python is not on PATH (AICARD_REQUIRE_PYTHON=1 makes this fail)");
    }
    found
}

/// The next `flow_event` of an agent session with one of `states`.
pub async fn agent_event(tab: &mut ScriptedTab, states: &[&str]) -> Value {
    tokio::time::timeout(Duration::from_secs(15), async {
        loop {
            let v = tab.next("flow_event").await;
            if v["detail"]["kind"] == "agent" && states.contains(&v["state"].as_str().unwrap_or(""))
            {
                return v;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no agent event {states:?} in time"))
}

/// `GET /files/ID` as the tab's manager does it.
pub async fn fetch_file(h: &TestHub, id: &str, client: &str) -> (u16, Vec<u8>) {
    let r = aicard::http_client::plain()
        .get(h.http_url(&format!("/files/{id}")))
        .bearer_auth(TOKEN)
        .header("x-aicard-client", client)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.bytes().await.unwrap().to_vec())
}

/// Whether `python3` runs here (program skills are Python); without it a test prints a skip line.
pub fn have_python3() -> bool {
    let found = std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("skipped: python3 is not on PATH");
    }
    found
}
