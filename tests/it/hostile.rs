//! Hostile input at every door (`/realtime`, `/send` + `/events`, `/mcp`, `/v1`, `/api`,
//! `/aicard.user.js`), against a real hub on port 0 over raw sockets: forged Origin, Host and
//! token, oversized and never-sent bodies, deep JSON, bad UTF-8, wrong methods, alias bombs,
//! silent and trickling connections. After all of them the hub still answers a normal request.

use crate::common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{close_code, recv, send, TestHub, TOKEN, WAIT};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What the hub did with a request.
#[derive(Debug, PartialEq)]
enum Outcome {
    /// Answered with this status.
    Status(u16),
    /// Closed the connection without an answer.
    Closed,
}

/// How long a door may take to refuse: far less than a body that never comes.
const PROMPT: Duration = Duration::from_secs(3);

/// Sends `head` (and `body`, if any) on a fresh connection; the status of the answer, or the
/// close. Panics when neither comes within `PROMPT`: a door that waits for a body it should
/// not read yet hangs here.
async fn exchange(addr: SocketAddr, head: &str, body: &[u8]) -> Outcome {
    let mut tcp = TcpStream::connect(addr).await.expect("connect");
    tcp.write_all(head.as_bytes()).await.expect("write head");
    if !body.is_empty() {
        // The hub may answer and close before reading it all.
        let _ = tcp.write_all(body).await;
    }
    let mut buf = Vec::new();
    let read = tokio::time::timeout(PROMPT, async {
        let mut chunk = [0u8; 1024];
        loop {
            match tcp.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            if buf.windows(2).any(|w| w == b"\r\n") {
                return;
            }
        }
    })
    .await;
    assert!(read.is_ok(), "no answer within {PROMPT:?} to {head:?}");
    let text = String::from_utf8_lossy(&buf);
    match text.split_whitespace().nth(1).and_then(|s| s.parse().ok()) {
        Some(status) => Outcome::Status(status),
        None => Outcome::Closed,
    }
}

/// A request head. `extra` lines end with `\r\n`.
fn head(method: &str, path: &str, host: &str, extra: &str) -> String {
    format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n{extra}\r\n")
}

fn deep_json(depth: usize) -> Vec<u8> {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth)).into_bytes()
}

struct Case {
    name: &'static str,
    head: String,
    body: Vec<u8>,
    expect: Outcome,
}

fn cases(host: &str) -> Vec<Case> {
    let bearer = format!("Authorization: Bearer {TOKEN}\r\n");
    let evil = "Origin: https://evil.example\r\n";
    let upgrade = "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\
                   Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";
    let len = |n: usize| format!("Content-Length: {n}\r\n");
    let big = 2 * 1024 * 1024;
    let mut c = Vec::new();
    let mut add = |name, head: String, body: Vec<u8>, status: u16| {
        c.push(Case {
            name,
            head,
            body,
            expect: Outcome::Status(status),
        })
    };
    // /realtime (the upgrade is refused before it happens).
    let up = |extra: &str| head("GET", "/realtime", host, &format!("{upgrade}{extra}"));
    add("realtime: forged Origin", up(evil), vec![], 403);
    add(
        "realtime: forged Host",
        head("GET", "/realtime", "evil.example", upgrade),
        vec![],
        403,
    );
    add(
        "realtime: POST",
        head("POST", "/realtime", host, &len(0)),
        vec![],
        405,
    );
    // /send: Host, Origin, then the token, all before a byte of the body is read.
    let send = |extra: &str| head("POST", "/send", host, extra);
    add(
        "send: no token, 2 MiB announced, none sent",
        send(&len(big)),
        vec![],
        401,
    );
    add(
        "send: wrong token, 2 MiB announced, none sent",
        send(&format!("Authorization: Bearer nope\r\n{}", len(big))),
        vec![],
        401,
    );
    add(
        "send: forged Origin",
        send(&format!("{evil}{bearer}{}", len(big))),
        vec![],
        403,
    );
    add(
        "send: forged Host",
        head(
            "POST",
            "/send",
            "evil.example",
            &format!("{bearer}{}", len(2)),
        ),
        b"{}".to_vec(),
        403,
    );
    add(
        "send: over the frame limit, announced",
        send(&format!("{bearer}{}", len(big))),
        vec![],
        413,
    );
    add(
        "send: bad UTF-8",
        send(&format!("{bearer}{}", len(4))),
        vec![0xff, 0xfe, b'{', b'}'],
        400,
    );
    let deep = deep_json(100_000);
    add(
        "send: deep JSON",
        send(&format!("{bearer}{}", len(deep.len()))),
        deep.clone(),
        400,
    );
    add(
        "send: GET",
        head("GET", "/send", host, &bearer),
        vec![],
        405,
    );
    // /events
    add(
        "events: no token",
        head("GET", "/events", host, ""),
        vec![],
        401,
    );
    add(
        "events: forged Host",
        head("GET", "/events", "evil.example", &bearer),
        vec![],
        403,
    );
    add(
        "events: POST",
        head("POST", "/events", host, &format!("{bearer}{}", len(0))),
        vec![],
        405,
    );
    // /mcp
    let mcp = |extra: &str| head("POST", "/mcp", host, extra);
    add("mcp: no token", mcp(&len(big)), vec![], 401);
    add(
        "mcp: forged Origin",
        mcp(&format!("{evil}{bearer}{}", len(big))),
        vec![],
        403,
    );
    // /v1
    let v1 = |extra: &str| head("POST", "/v1/chat/completions", host, extra);
    add(
        "v1: no token, 2 MiB announced, none sent",
        v1(&len(big)),
        vec![],
        401,
    );
    add(
        "v1: forged Origin, 2 MiB announced, none sent",
        v1(&format!("{evil}{bearer}{}", len(big))),
        vec![],
        403,
    );
    add(
        "v1: deep JSON",
        v1(&format!("{bearer}{}", len(deep.len()))),
        deep.clone(),
        400,
    );
    add(
        "v1: bad UTF-8",
        v1(&format!("{bearer}{}", len(4))),
        vec![0xff, 0xfe, b'{', b'}'],
        400,
    );
    add(
        "v1: over the body limit (text and files), announced",
        v1(&format!(
            "{bearer}{}",
            len(aicard::api::attach::MAX_BODY as usize + 1)
        )),
        vec![],
        400,
    );
    add(
        "v1: GET",
        head("GET", "/v1/chat/completions", host, &bearer),
        vec![],
        405,
    );
    // /api: Origin and token (or session) before the body is parsed.
    let api = |extra: &str| head("POST", "/api/runs", host, extra);
    add(
        "api: forged Origin, bad body",
        api(&format!(
            "{evil}{bearer}Content-Type: application/json\r\n{}",
            len(5)
        )),
        b"{bad}".to_vec(),
        403,
    );
    add(
        "api: no token, bad body",
        api(&format!("Content-Type: application/json\r\n{}", len(5))),
        b"{bad}".to_vec(),
        401,
    );
    add(
        "api: no token, 2 MiB announced, none sent",
        api(&format!("Content-Type: application/json\r\n{}", len(big))),
        vec![],
        401,
    );
    add(
        "api: forged Host",
        head(
            "POST",
            "/api/runs",
            "evil.example",
            &format!("{bearer}{}", len(0)),
        ),
        vec![],
        403,
    );
    add(
        "api: deep JSON",
        api(&format!(
            "{bearer}Content-Type: application/json\r\n{}",
            len(deep.len())
        )),
        deep,
        // axum's Json: syntactically JSON, but over serde_json's depth limit.
        422,
    );
    // /aicard.user.js
    add(
        "userscript: forged Host",
        head("GET", "/aicard.user.js", "evil.example", ""),
        vec![],
        403,
    );
    add(
        "userscript: forged Origin",
        head("GET", "/aicard.user.js", host, evil),
        vec![],
        403,
    );
    add(
        "userscript: POST",
        head("POST", "/aicard.user.js", host, &len(0)),
        vec![],
        405,
    );
    c
}

#[tokio::test]
async fn every_door_refuses_hostile_requests_and_the_hub_stays_up() {
    let h = TestHub::start().await;
    let addr = h.running.addr;
    let host = addr.to_string();
    let mut wrong = Vec::new();
    for case in cases(&host) {
        let got = exchange(addr, &case.head, &case.body).await;
        if got != case.expect {
            wrong.push(format!(
                "{}: got {got:?}, want {:?}",
                case.name, case.expect
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // Still answering, and a tab still gets in.
    let ok = exchange(addr, &head("GET", "/healthz", &host, ""), &[]).await;
    assert_eq!(ok, Outcome::Status(200));
    let (_ws, welcome) = h.tab("deepseek", Some("after")).await;
    assert_eq!(welcome["label"], "after");
}

/// Six levels of ten aliases: 291 bytes that took 123 MB through `/api/flows/validate`.
fn alias_bomb() -> String {
    let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for level in 1..=6 {
        let items = vec![format!("*a{}", level - 1); 10].join(", ");
        text.push_str(&format!("a{level}: &a{level} [{items}]\n"));
    }
    text
}

#[tokio::test]
async fn an_alias_bomb_is_refused_with_its_position() {
    let h = TestHub::start().await;
    let resp = aicard::http_client::plain()
        .post(h.http_url("/api/flows/validate?file=bomb.yaml"))
        .bearer_auth(TOKEN)
        .body(alias_bomb())
        .send()
        .await
        .expect("POST /api/flows/validate");
    let text = resp.text().await.expect("body");
    assert!(text.contains("aliases expand too far"), "{text}");
    assert!(text.contains("别名"), "bilingual: {text}");
    // FILE:LINE:COL of the alias that passed the budget.
    let at = regex_free_position(&text).expect("a bomb.yaml:LINE:COL position");
    assert!((4..=6).contains(&at.0) && at.1 > 1, "{at:?} in {text}");
}

/// The first `bomb.yaml:LINE:COL` in `text`.
fn regex_free_position(text: &str) -> Option<(usize, usize)> {
    let rest = &text[text.find("bomb.yaml:")? + "bomb.yaml:".len()..];
    let mut parts = rest.splitn(3, ':');
    let line = parts.next()?.parse().ok()?;
    let col = parts
        .next()?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .ok()?;
    Some((line, col))
}

#[tokio::test]
async fn hello_fields_are_capped() {
    let h = TestHub::start().await;
    // Over `/send` (the frame limit is 1 MiB): 600 KB labels grew the hub by 93 MB per 100.
    let long = "x".repeat(600 * 1024);
    let resp = aicard::http_client::plain()
        .post(h.http_url("/send"))
        .bearer_auth(TOKEN)
        .body(json!({"type": "hello", "token": TOKEN, "site": "kimi", "label": long}).to_string())
        .send()
        .await
        .expect("POST /send");
    assert_eq!(resp.status(), 401);
    let err: serde_json::Value =
        serde_json::from_str(&resp.text().await.expect("body")).expect("an error frame");
    assert_eq!(err["code"], "limit", "{err}");
    assert!(
        err["message"].as_str().unwrap_or("").contains("label"),
        "{err}"
    );
    // Over `/realtime`: a label of 4 KiB.
    let mut ws = h.connect("/realtime").await;
    send(
        &mut ws,
        &json!({"type": "hello", "token": TOKEN, "site": "deepseek", "label": "y".repeat(4096)}),
    )
    .await;
    let err = recv(&mut ws).await;
    assert_eq!(err["type"], "error", "{err}");
    assert_eq!(err["code"], "limit", "{err}");
    assert!(
        err["message"].as_str().unwrap_or("").contains("label"),
        "{err}"
    );
    assert!(close_code(&mut ws).await.is_some(), "the socket is closed");
    assert!(
        h.hub().registry.all().is_empty(),
        "no tab is kept for a refused hello"
    );
    // A long URL and title are cut, not refused.
    let mut ws = h.connect("/realtime").await;
    send(
        &mut ws,
        &json!({"type": "hello", "token": TOKEN, "site": "deepseek",
                "url": format!("https://chat.deepseek.com/{}", "x".repeat(10_000)),
                "title": "t".repeat(10_000)}),
    )
    .await;
    let welcome = recv(&mut ws).await;
    assert_eq!(welcome["type"], "welcome", "{welcome}");
    let id = welcome["client_id"].as_str().expect("client id");
    let info = h.hub().registry.get(id).expect("the tab").info();
    let (url, title) = (info.url.unwrap_or_default(), info.title.unwrap_or_default());
    assert!(url.len() <= 4096 && url.starts_with("https://chat.deepseek.com/x"));
    assert!(title.len() <= 1024, "{}", title.len());
    drop(ws);
}

/// Waits until the hub closes `tcp` (EOF or reset); panics if it stays open past `within`.
async fn closed_within(tcp: &mut TcpStream, within: Duration) {
    let mut buf = [0u8; 256];
    let closed = tokio::time::timeout(within, async {
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => continue,
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "still open after {within:?}");
}

#[tokio::test]
async fn silent_and_trickling_connections_time_out_and_streams_stay_up() {
    let header_read = Duration::from_secs(1);
    let h = TestHub::start_with(|c| {
        c.timing.http_header_read = header_read;
        // The test's tabs do not read while it waits: they must not be dropped as dead.
        c.timing.dead_after = Duration::from_secs(60);
    })
    .await;
    let addr = h.running.addr;
    // A tab on each transport, before the slow clients.
    let (mut ws, _) = h.tab("deepseek", Some("ws-tab")).await;
    let sse =
        common::SseTab::hello(&h, json!({"type": "hello", "token": TOKEN, "site": "kimi"})).await;
    let mut stream = sse.connect().await;

    let mut silent = TcpStream::connect(addr).await.expect("connect");
    let mut trickling = TcpStream::connect(addr).await.expect("connect");
    let request = format!(
        "GET /realtime HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    );
    let opened = tokio::time::Instant::now();
    // One byte every 300 ms: the head would take 45 s. Ends when the hub has closed it.
    let trickle = async {
        for byte in request.as_bytes() {
            if trickling.write_all(&[*byte]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        panic!("the whole trickled head was accepted");
    };
    tokio::time::timeout(WAIT, trickle)
        .await
        .expect("the trickling connection is closed");
    closed_within(&mut silent, WAIT).await;
    let took = opened.elapsed();
    assert!(took < header_read * 4, "closed after {took:?}");

    // Both tabs outlived the timeout: the WebSocket answers, the event stream carries frames.
    send(&mut ws, &json!({"type": "hello", "token": TOKEN})).await;
    let again = recv(&mut ws).await;
    assert_eq!(again["code"], "hello_required", "{again}");
    let answer = sse.post(&json!({"type": "heartbeat"})).await;
    assert_eq!(answer["type"], "heartbeat", "{answer}");
    let frame = aicard::protocol::ServerFrame::Heartbeat { time: 7 };
    h.hub().registry.send(&sse.id, &frame).expect("routed");
    assert_eq!(stream.next("heartbeat").await["time"], 7);
}

#[tokio::test]
async fn connections_not_yet_accepted_are_capped() {
    let h = TestHub::start_with(|c| {
        c.limits.pending_connections = 2;
        c.timing.http_header_read = Duration::from_secs(30);
    })
    .await;
    let addr = h.running.addr;
    let first = TcpStream::connect(addr).await.expect("connect");
    let _second = TcpStream::connect(addr).await.expect("connect");
    let mut third = TcpStream::connect(addr).await.expect("connect");
    third
        .write_all(format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await
        .expect("write");
    let mut buf = [0u8; 256];
    let early = tokio::time::timeout(Duration::from_millis(500), third.read(&mut buf)).await;
    assert!(early.is_err(), "served past the cap: {early:?}");
    // One of the silent two goes away: the third is served.
    drop(first);
    let n = tokio::time::timeout(WAIT, third.read(&mut buf))
        .await
        .expect("served once a slot is free")
        .expect("read");
    let text = String::from_utf8_lossy(&buf[..n]);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
}
