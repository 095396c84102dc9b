//! Shared test helpers: start a real hub on an ephemeral port and talk to it with real
//! WebSocket clients. Every wait has a timeout; nothing sleeps to synchronise.
#![allow(dead_code)]

use std::time::Duration;

use aicard::config::HubConfig;
use aicard::hub::{Hub, RunningHub};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

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
        let running = Hub::start(config).await.expect("hub starts");
        TestHub { running, dir }
    }

    pub fn ws_url(&self, path: &str) -> String {
        format!("ws://{}{}", self.running.addr, path)
    }

    pub fn http_url(&self, path: &str) -> String {
        format!("http://{}{}", self.running.addr, path)
    }

    pub fn hub(&self) -> &std::sync::Arc<Hub> {
        &self.running.hub
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
