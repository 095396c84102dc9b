//! MCP both ways against a real hub: a scripted rmcp client (the official Rust SDK) drives the
//! `/mcp` tools at two protocol versions; the command language's MCP client drives a real
//! third-party server, `mcp-server-time` from PyPI (tests/sdk/install.sh installs it), which
//! runs offline. Nothing sleeps to synchronise: every wait is for a frame, an answer or an
//! event, under a timeout.

use std::time::Duration;

use crate::common::{answer_task, fetch_file, wait_event, Reply, TestHub, TOKEN, WAIT};
use aicard::hub::HubEvent;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
    ProtocolVersion,
};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{json, Value};

const TOOLS: [&str; 8] = [
    "list_tabs",
    "ask",
    "fan_out",
    "run_flow",
    "get_run",
    "cancel",
    "list_flows",
    "agent_task",
];

/// A client that asks for one protocol version in `initialize`.
#[derive(Clone)]
struct At(ProtocolVersion);

impl ClientHandler for At {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("aicard-tests", "1"),
        )
        .with_protocol_version(self.0.clone())
    }
}

async fn client(h: &TestHub, v: ProtocolVersion) -> RunningService<RoleClient, At> {
    let cfg = StreamableHttpClientTransportConfig::with_uri(h.http_url("/mcp")).auth_header(TOKEN);
    tokio::time::timeout(
        WAIT,
        At(v).serve(StreamableHttpClientTransport::from_config(cfg)),
    )
    .await
    .expect("initialize in time")
    .expect("initialize")
}

async fn call(c: &RunningService<RoleClient, At>, tool: &str, args: Value) -> Value {
    let p = CallToolRequestParams::new(tool.to_string())
        .with_arguments(args.as_object().expect("object").clone());
    let r: CallToolResult = tokio::time::timeout(WAIT * 2, c.call_tool(p))
        .await
        .expect("answer in time")
        .expect("call");
    let s = r.structured_content.clone().expect("structuredContent");
    let text = r.content[0].as_text().expect("text").text.clone();
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), s);
    s
}

#[tokio::test]
async fn rmcp_client_gets_the_same_transcript_at_two_versions() {
    let h = TestHub::start().await;
    let tab = h
        .scripted("ds-1", "deepseek", "worker", |p| {
            Reply::Text(Duration::ZERO, format!("re: {p}"))
        })
        .await;
    for v in [ProtocolVersion::V_2025_11_25, ProtocolVersion::V_2025_06_18] {
        let c = client(&h, v.clone()).await;
        let info = c.peer_info().expect("server info");
        assert_eq!(info.protocol_version, v);
        let tools = c.list_all_tools().await.unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names[..TOOLS.len()], TOOLS);
        assert!(
            names[TOOLS.len()..].contains(&"skill_summarize"),
            "{names:?}"
        );
        let ask = &tools[1];
        assert_eq!(ask.input_schema["required"], json!(["target", "prompt"]));
        let tabs = call(&c, "list_tabs", json!({})).await;
        assert_eq!(tabs["tabs"][0]["tab"], tab.client_id.as_str());
        let r = call(&c, "ask", json!({"target": "deepseek", "prompt": "hi"})).await;
        assert_eq!(r["status"], "completed", "{r}");
        assert_eq!(
            r["answers"],
            json!([{"tab": tab.client_id, "site": "deepseek", "label": "ds-1", "text": "re: hi"}])
        );
        let _ = c.cancel().await;
    }
}

#[tokio::test]
async fn tools_say_what_they_do_and_bad_arguments_are_the_tools_error() {
    let h = TestHub::start().await;
    let c = client(&h, ProtocolVersion::V_2025_11_25).await;
    let tools = c.list_all_tools().await.unwrap();
    for t in tools.iter().filter(|t| TOOLS.contains(&t.name.as_ref())) {
        let input = serde_json::to_string(&t.input_schema).unwrap();
        assert!(!input.contains("\"format\""), "{}: {input}", t.name);
        let a = t
            .annotations
            .as_ref()
            .unwrap_or_else(|| panic!("{} has annotations", t.name));
        assert!(a.title.is_some(), "{}", t.name);
        let out = t
            .output_schema
            .as_ref()
            .unwrap_or_else(|| panic!("{} has an outputSchema", t.name));
        assert_eq!(out["type"], "object", "{}", t.name);
    }
    let by = |n: &str| {
        tools
            .iter()
            .find(|t| t.name == n)
            .unwrap()
            .annotations
            .clone()
            .unwrap()
    };
    assert_eq!(by("list_tabs").read_only_hint, Some(true));
    assert_eq!(by("get_run").read_only_hint, Some(true));
    assert_eq!(by("ask").read_only_hint, Some(false));
    assert_eq!(by("ask").destructive_hint, Some(false));
    assert_eq!(by("run_flow").destructive_hint, Some(true));
    // A wrong argument is the tool's answer, which the model can read and fix.
    let (failed, text) = call_text(&c, "ask", json!({"target": "deepseek"})).await;
    assert!(failed, "{text}");
    assert!(text.contains("prompt") && text.contains("ask"), "{text}");
    let (failed, text) = call_text(&c, "get_run", json!({"run_id": 7})).await;
    assert!(failed && text.contains("get_run"), "{text}");
    // An unknown tool stays a protocol error.
    let p = CallToolRequestParams::new("no_such_tool".to_string());
    let err = c.call_tool(p).await.expect_err("unknown tool");
    assert!(
        format!("{err:?}").contains("-32602")
            || format!("{err:?}").contains("InvalidParams")
            || format!("{err}").contains("no tool"),
        "{err:?}"
    );
    let _ = c.cancel().await;
}

#[tokio::test]
async fn a_slow_tab_beyond_wait_s_is_picked_up_with_get_run() {
    let h = TestHub::start().await;
    let (mut ws, _) = h.tab("kimi", Some("slow")).await;
    let c = client(&h, ProtocolVersion::V_2025_11_25).await;
    // The tab holds the prompt: the call comes back `running` when wait_s is up.
    let first = call(
        &c,
        "ask",
        json!({"target": "tab/slow", "prompt": "think hard", "wait_s": 0.2}),
    )
    .await;
    assert_eq!(first["status"], "running", "{first}");
    let run_id = first["run_id"].as_str().unwrap().to_string();
    let task = answer_task(&mut ws, |p| format!("thought about {p}")).await;
    assert_eq!(task["prompt"], "think hard");
    let done = call(&c, "get_run", json!({"run_id": run_id, "wait_s": 10})).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["text"], "thought about think hard");
    assert_eq!(done["answers"][0]["label"], "slow");
    // cancel of a finished run answers with what it has; an unknown run is an error.
    let gone = c
        .call_tool(
            CallToolRequestParams::new("get_run")
                .with_arguments(json!({"run_id": "nope"}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_eq!(gone.is_error, Some(true));
}

#[tokio::test]
async fn the_same_idempotency_key_twice_types_one_prompt() {
    let h = TestHub::start().await;
    let tab = h
        .scripted("q", "qwen", "worker", |_| {
            Reply::Text(Duration::ZERO, "ok".into())
        })
        .await;
    let c = client(&h, ProtocolVersion::V_2025_11_25).await;
    let args = json!({"target": "qwen", "prompt": "once", "idempotency_key": "abc"});
    let one = call(&c, "ask", args.clone()).await;
    let two = call(&c, "ask", args).await;
    assert_eq!(one["run_id"], two["run_id"]);
    assert_eq!(two["status"], "completed");
    let other = call(
        &c,
        "ask",
        json!({"target": "qwen", "prompt": "once", "idempotency_key": "other"}),
    )
    .await;
    assert_ne!(other["run_id"], one["run_id"]);
    assert_eq!(tab.prompts(), vec!["once".to_string(), "once".to_string()]);
}

#[tokio::test]
async fn cancel_stops_the_prompt_in_the_tab() {
    let h = TestHub::start().await;
    let mut tab = h.scripted("s", "doubao", "worker", |_| Reply::Silent).await;
    let c = client(&h, ProtocolVersion::V_2025_11_25).await;
    let r = call(
        &c,
        "ask",
        json!({"target": "doubao", "prompt": "never", "wait_s": 0.1}),
    )
    .await;
    assert_eq!(r["status"], "running");
    let id = r["run_id"].as_str().unwrap();
    let stopped = call(&c, "cancel", json!({"run_id": id})).await;
    assert_eq!(stopped["status"], "cancelled", "{stopped}");
    let frame = tab.next("cancel").await;
    assert!(frame["task_id"].as_str().unwrap().starts_with("mcp-"));
}

/// What Claude Desktop, Cursor and the Inspector do: `notifications/cancelled` for a call in
/// flight. The tab gets `cancel`, and the next call is not stuck behind the cancelled prompt.
#[tokio::test]
async fn an_mcp_cancel_notification_stops_the_prompt_in_the_tab() {
    use rmcp::model::{ClientRequest, Request};
    use rmcp::service::PeerRequestOptions;
    let h = TestHub::start().await;
    let got = std::sync::Arc::new(tokio::sync::Notify::new());
    let arrived = got.clone();
    let mut tab = h
        .scripted("s", "doubao", "worker", move |p: &str| {
            if p.contains("never") {
                arrived.notify_one();
                Reply::Silent
            } else {
                Reply::Text(Duration::from_millis(5), "second answer".into())
            }
        })
        .await;
    let c = client(&h, ProtocolVersion::V_2025_11_25).await;
    let params = CallToolRequestParams::new("ask".to_string()).with_arguments(
        json!({"target": "doubao", "prompt": "never", "wait_s": 30})
            .as_object()
            .unwrap()
            .clone(),
    );
    let handle = c
        .peer()
        .send_cancellable_request(
            ClientRequest::CallToolRequest(Request::new(params)),
            PeerRequestOptions::no_options(),
        )
        .await
        .expect("sent");
    // The prompt is in the tab before the client gives up.
    tokio::time::timeout(WAIT, got.notified())
        .await
        .expect("the prompt reached the tab");
    handle
        .cancel(Some("the person pressed stop".into()))
        .await
        .expect("cancel sent");
    let frame = tab.next("cancel").await;
    assert!(
        frame["task_id"].as_str().unwrap().starts_with("mcp-"),
        "{frame}"
    );
    let next = call(
        &c,
        "ask",
        json!({"target": "doubao", "prompt": "again", "wait_s": 10}),
    )
    .await;
    assert_eq!(next["status"], "completed", "{next}");
}

#[tokio::test]
async fn security_refusals() {
    let h = TestHub::start().await;
    let http = aicard::http_client::plain();
    let url = h.http_url("/mcp");
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let post = |headers: Vec<(&'static str, String)>| {
        let mut r = http
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.clone());
        for (k, v) in headers {
            r = r.header(k, v);
        }
        r.send()
    };
    let bearer = format!("Bearer {TOKEN}");
    let r = post(vec![]).await.unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(r.headers()["www-authenticate"], "Bearer");
    let r = post(vec![("authorization", "Bearer nope".into())])
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = post(vec![
        ("authorization", bearer.clone()),
        ("origin", "https://evil.example".into()),
    ])
    .await
    .unwrap();
    assert_eq!(r.status(), 403);
    let r = post(vec![
        ("authorization", bearer.clone()),
        ("host", "evil.example".into()),
    ])
    .await
    .unwrap();
    assert_eq!(r.status(), 403);
    // A foreign Origin is refused even without a token (403 before 401).
    let r = post(vec![("origin", "https://evil.example".into())])
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
}

fn time_config(h: &TestHub) -> std::path::PathBuf {
    // The wrapper leaves a mark in the workspace when (and only when) the server starts.
    let cfg = json!({"mcpServers": {
        "time": {"command": "sh", "args": ["-c", "touch started && exec mcp-server-time --local-timezone UTC"],
                 "env": {"PYTHONUNBUFFERED": "1"}, "someFutureKey": true},
        "off": {"command": "false", "disabled": true}
    }});
    std::fs::write(h.dir.path().join("mcp.json"), cfg.to_string()).unwrap();
    h.dir.path().join("workspace").join("started")
}

fn have_time_server() {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join("mcp-server-time").is_file()))
        .unwrap_or(false);
    assert!(
        found,
        "mcp-server-time is not on PATH: run tests/sdk/install.sh (pip install mcp-server-time)"
    );
}

#[tokio::test]
async fn the_command_language_uses_a_real_third_party_server() {
    have_time_server();
    let h = TestHub::start().await;
    let marker = time_config(&h);
    let mut master = h
        .scripted("boss", "chatgpt", "master", |_| Reply::Silent)
        .await;
    let r = master
        .command("?<mcp use time get_current_time timezone=UTC>!")
        .await;
    assert_eq!(r["result"]["success"], true, "{r}");
    let out: Value = serde_json::from_str(r["result"]["output"].as_str().unwrap()).unwrap();
    assert_eq!(out["timezone"], "UTC", "{out}");
    assert!(marker.exists());
    let r = master.command("?<mcp list>!").await;
    let text = r["result"]["output"].as_str().unwrap();
    assert!(
        text.contains("get_current_time") && text.contains("convert_time"),
        "{text}"
    );
    assert!(
        text.contains("someFutureKey"),
        "unknown keys are warned: {text}"
    );
    assert!(text.contains("off — stdio `false` — disabled"), "{text}");
    // A JSON argument object, a $variable, and a tool error.
    let r = master.command("?<set tz = Asia/Tokyo>!").await;
    assert_eq!(r["result"]["success"], true);
    let r = master
        .command(r#"?<mcp use time convert_time {"source_timezone": "UTC", "time": "12:00", "target_timezone": "$tz"}>!"#)
        .await;
    assert_eq!(r["result"]["success"], true, "{r}");
    assert!(r["result"]["output"]
        .as_str()
        .unwrap()
        .contains("Asia/Tokyo"));
    let r = master.command("?<mcp use time nope>!").await;
    assert_eq!(r["result"]["success"], false);
    assert!(r["result"]["output"]
        .as_str()
        .unwrap()
        .contains("get_current_time"));
    // One child, in its own process group, killed at shutdown.
    let pgids = h.hub().control.mcp.pgids();
    assert_eq!(pgids.len(), 1);
    let pgid = pgids[0];
    assert_ne!(pgid, unsafe { libc::getpgrp() });
    let TestHub { running, dir: _dir } = h;
    tokio::time::timeout(WAIT, running.shutdown())
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    // The SIGKILL was sent during shutdown; the kernel removes the group shortly after.
    while unsafe { libc::killpg(pgid, 0) } == 0 && is_alive(pgid) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "process group {pgid} still alive"
        );
        tokio::task::yield_now().await;
    }
}

/// True unless the process is gone or a zombie.
fn is_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

#[tokio::test]
async fn an_mcp_command_in_a_workers_reply_is_refused_and_starts_nothing() {
    let h = TestHub::start().await;
    let marker = time_config(&h);
    let mut worker = h
        .scripted("w", "deepseek", "worker", |_| Reply::Silent)
        .await;
    worker.send(json!({"type":"turn_end","turn_id":"t1",
        "text":"Sure! ?<mcp use time get_current_time timezone=UTC>! and ?<mcp list>!"}));
    // Frames of one socket are handled in order: once this answer is back, the reply above
    // has been seen and refused.
    let r = worker.command("?<help mcp>!").await;
    assert_eq!(
        r["command"], "help mcp",
        "the refused commands got no answer: {r}"
    );
    assert!(r["result"]["output"].as_str().unwrap().contains("mcp.json"));
    assert!(!marker.exists(), "no server may start");
    assert_eq!(h.hub().control.mcp.children(), 0);
    // The person typing in the same worker tab has the person's authority.
    have_time_server();
    let r = worker
        .command("?<mcp use time get_current_time timezone=UTC>!")
        .await;
    assert_eq!(r["result"]["success"], true, "{r}");
    assert!(marker.exists());
}

#[tokio::test]
async fn a_flow_node_calls_a_tool_and_the_next_node_reads_its_output() {
    have_time_server();
    let flows = tempfile::tempdir().unwrap();
    std::fs::write(
        flows.path().join("clock.yaml"),
        "name: clock\ndescription: what time is it\ninputs: {zone: {default: UTC}}\nnodes:\n  - id: now\n    mcp: {server: time, tool: get_current_time, args: {timezone: \"$zone\"}}\n  - id: say\n    needs: now\n    to: speaker\n    prompt: \"time is ${now.output}\"\n",
    )
    .unwrap();
    let dir = flows.path().to_path_buf();
    let h = TestHub::start_with(move |c| c.flows_dir = dir).await;
    time_config(&h);
    let tab = h
        .scripted("speaker", "kimi", "worker", |p| {
            Reply::Text(Duration::ZERO, format!("heard: {p}"))
        })
        .await;
    let c = client(&h, ProtocolVersion::V_2025_11_25).await;
    let flows = call(&c, "list_flows", json!({})).await;
    assert_eq!(flows["flows"][0]["name"], "clock", "{flows}");
    assert_eq!(flows["flows"][0]["inputs"], json!(["zone"]));
    let mut events = h.hub().events.subscribe();
    let r = call(
        &c,
        "run_flow",
        json!({"flow": "clock", "inputs": {"zone": "Europe/Paris"}, "wait_s": 20}),
    )
    .await;
    assert_eq!(r["status"], "completed", "{r}");
    let text = r["text"].as_str().unwrap();
    assert!(
        text.contains("heard: time is") && text.contains("Europe/Paris"),
        "{text}"
    );
    assert_eq!(tab.prompts().len(), 1);
    let id = r["run_id"].as_str().unwrap().to_string();
    wait_event(
        &mut events,
        |e| matches!(e, HubEvent::RunFinished { run_id, .. } if *run_id == id),
    )
    .await;
    let again = call(&c, "get_run", json!({"run_id": id, "wait_s": 0})).await;
    assert_eq!(again["status"], "completed");
}

/// The text of a tool answer that carries no structured content (a skill's).
async fn call_text(c: &RunningService<RoleClient, At>, tool: &str, args: Value) -> (bool, String) {
    let p = CallToolRequestParams::new(tool.to_string())
        .with_arguments(args.as_object().expect("object").clone());
    let r: CallToolResult = tokio::time::timeout(WAIT * 2, c.call_tool(p))
        .await
        .expect("answer in time")
        .expect("call");
    let text = r.content[0].as_text().expect("text").text.clone();
    (r.is_error == Some(true), text)
}

#[tokio::test]
async fn skills_are_tools_and_their_arguments_are_checked_data() {
    let h = TestHub::start().await;
    let tab = h
        .scripted("w", "qwen", "worker", |p| {
            Reply::Text(Duration::ZERO, format!("summary of {} chars", p.len()))
        })
        .await;
    let c = client(&h, ProtocolVersion::V_2025_11_25).await;
    let tools = c.list_all_tools().await.unwrap();
    let summarize = tools
        .iter()
        .find(|t| t.name == "skill_summarize")
        .expect("skill_summarize is listed");
    assert_eq!(summarize.input_schema["required"], json!(["text"]));
    assert_eq!(summarize.input_schema["properties"]["words"]["default"], 80);

    // A bad argument: the error names the field, and no tab gets a prompt.
    let (err, text) = call_text(&c, "skill_summarize", json!({"text": "x", "words": 3})).await;
    assert!(err, "{text}");
    assert!(text.contains("words"), "{text}");
    assert!(tab.prompts.lock().unwrap().is_empty());

    // A good call reaches the worker; `$` in a value is data, not a variable.
    let (err, text) = call_text(
        &c,
        "skill_summarize",
        json!({"text": "it costs $HOME and ${RESULT}", "words": 20}),
    )
    .await;
    assert!(!err, "{text}");
    assert!(text.contains("summary of"), "{text}");
    let prompts = tab.prompts.lock().unwrap().clone();
    assert_eq!(prompts.len(), 1, "{prompts:?}");
    assert!(
        prompts[0].contains("it costs $HOME and ${RESULT}"),
        "{}",
        prompts[0]
    );
    assert!(prompts[0].contains("at most 20 words"), "{}", prompts[0]);

    // A run skill needs the exec policy's leave; it is off by default.
    let (err, text) = call_text(&c, "skill_utc-time", json!({"when": "now"})).await;
    assert!(err, "{text}");
    let _ = c.cancel().await;
}

/// `python3` with the official MCP SDK (tests/sdk/install.sh), which the resource fixture
/// server needs.
fn have_python_mcp() {
    let ok = std::process::Command::new("python3")
        .args(["-c", "import mcp"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "python3 cannot import mcp: run tests/sdk/install.sh (pip install mcp)"
    );
}

/// `?<mcp resources SERVER>!` lists a real MCP server's resources and templates;
/// `?<mcp read SERVER URI>!` shows a text resource's text, and for a binary one its MIME type
/// and size; an unknown URI is the server's error. The server: tests/sdk/resource_server.py
/// (the official Python SDK's server).
#[tokio::test]
async fn the_command_language_lists_and_reads_a_servers_resources() {
    have_python_mcp();
    let h = TestHub::start().await;
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/resource_server.py");
    let cfg = json!({"mcpServers": {"res": {"command": "python3", "args": [fixture]}}});
    std::fs::write(h.dir.path().join("mcp.json"), cfg.to_string()).unwrap();
    let mut master = h
        .scripted("boss", "chatgpt", "master", |_| Reply::Silent)
        .await;
    let r = master.command("?<mcp resources res>!").await;
    assert_eq!(r["result"]["success"], true, "{r}");
    let text = r["result"]["output"].as_str().unwrap();
    for want in [
        "note://hello",
        "text/plain",
        "A greeting",
        "img://dot.png",
        "image/png",
        "note://{name}",
    ] {
        assert!(text.contains(want), "{want} in {text}");
    }
    let r = master.command("?<mcp read res note://hello>!").await;
    assert_eq!(r["result"]["success"], true, "{r}");
    assert_eq!(
        r["result"]["output"], "你好, resources! 第二行 / second line",
        "{r}"
    );
    // A template's URI, with a variable.
    master.command("?<set who = ann>!").await;
    let r = master.command("?<mcp read res note://$who>!").await;
    assert_eq!(r["result"]["output"], "note ann", "{r}");
    // Binary: its type and size, not its bytes.
    let r = master.command("?<mcp read res img://dot.png>!").await;
    assert_eq!(r["result"]["success"], true, "{r}");
    let out = r["result"]["output"].as_str().unwrap();
    assert!(
        out.contains("image/png") && out.contains("25 bytes"),
        "{out}"
    );
    let r = master.command("?<mcp read res note://nope/deeper>!").await;
    assert_eq!(r["result"]["success"], false, "{r}");
    let r = master.command("?<mcp resources nowhere>!").await;
    assert_eq!(r["result"]["success"], false, "{r}");
    assert!(
        r["result"]["output"].as_str().unwrap().contains("res"),
        "{r}"
    );
}

/// A client that hands every `notifications/resources/updated` URI to the test.
#[derive(Clone)]
struct Updates(tokio::sync::mpsc::UnboundedSender<String>);

impl ClientHandler for Updates {
    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        let _ = self.0.send(params.uri);
    }
}

/// The hub's own resources through rmcp: a flow's YAML by its URI, the tabs, an unknown URI
/// refused with -32002; `aicard://tabs` subscribed to is announced when a tab connects; a
/// subscription to a resource that does not exist is refused.
#[tokio::test]
#[allow(deprecated)]
async fn the_hubs_resources_are_read_and_a_subscription_announces_a_new_tab() {
    use rmcp::model::{ReadResourceRequestParams, ResourceContents, SubscribeRequestParams};
    let yaml = "name: greet\nnodes:\n  - {id: a, to: sim, prompt: hi}\n";
    let h = crate::common::hub_with_flows(&[("greet", yaml)]).await;
    let cfg = StreamableHttpClientTransportConfig::with_uri(h.http_url("/mcp")).auth_header(TOKEN);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let c = tokio::time::timeout(
        WAIT,
        Updates(tx).serve(StreamableHttpClientTransport::from_config(cfg)),
    )
    .await
    .expect("initialize in time")
    .expect("initialize");
    let uris: Vec<String> = c
        .list_all_resources()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.uri)
        .collect();
    assert!(
        uris.contains(&"aicard://tabs".to_string())
            && uris.contains(&"aicard://flows/greet".to_string()),
        "{uris:?}"
    );
    let read = |uri: &str| c.read_resource(ReadResourceRequestParams::new(uri.to_string()));
    let flow = read("aicard://flows/greet").await.unwrap();
    match &flow.contents[..] {
        [ResourceContents::TextResourceContents {
            text, mime_type, ..
        }] => {
            assert_eq!(text, yaml);
            assert_eq!(mime_type.as_deref(), Some("application/yaml"));
        }
        other => panic!("{other:?}"),
    }
    match read("aicard://flows/nothing").await {
        Err(rmcp::ServiceError::McpError(e)) => assert_eq!(e.code.0, -32002, "{e:?}"),
        other => panic!("{other:?}"),
    }
    c.subscribe(SubscribeRequestParams::new("aicard://tabs"))
        .await
        .unwrap();
    let _tab = h
        .scripted("fresh", "sim", "worker", |_| Reply::Silent)
        .await;
    let got = tokio::time::timeout(WAIT, rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got, "aicard://tabs");
    let tabs = read("aicard://tabs").await.unwrap();
    let ResourceContents::TextResourceContents { text, .. } = &tabs.contents[0] else {
        panic!("{tabs:?}");
    };
    let v: Value = serde_json::from_str(text).unwrap();
    assert_eq!(v["tabs"][0]["label"], "fresh", "{v}");
    // A subscription to what does not exist is refused.
    let refused = c
        .subscribe(SubscribeRequestParams::new("aicard://runs/none"))
        .await;
    assert!(refused.is_err(), "{refused:?}");
}

// ---- Files (docs/mcp.md "Files") ----

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR mcp image";

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The next task's attachments, each fetched while the task is held, then the task answered.
async fn take_files(h: &TestHub, ws: &mut crate::common::Ws, me: &str) -> Vec<(Value, Vec<u8>)> {
    let task = crate::common::recv_type(ws, "task").await;
    let mut got = Vec::new();
    for a in task["attachments"].as_array().cloned().unwrap_or_default() {
        let (status, bytes) = fetch_file(h, a["id"].as_str().unwrap(), me).await;
        assert_eq!(status, 200, "{a}");
        got.push((a, bytes));
    }
    let id = task["task_id"].as_str().unwrap().to_string();
    crate::common::send(
        ws,
        &json!({"type":"turn_end","turn_id":format!("t-{id}"),"text":"seen","task_id":id}),
    )
    .await;
    got
}

#[tokio::test]
async fn ask_and_fan_out_carry_files_inline_or_named_and_bad_ones_are_the_tools_error() {
    let h = TestHub::start_with(|c| c.max_file_mb = 1).await;
    let folder = h.dir.path().join("files");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("report.pdf"), b"%PDF-1.4 named").unwrap();
    std::fs::write(h.dir.path().join("secret.txt"), b"secret").unwrap();
    let (mut ds, w1) = h.tab("deepseek", Some("ds")).await;
    let ds_id = w1["client_id"].as_str().unwrap().to_string();
    let (mut km, w2) = h.tab("kimi", Some("km")).await;
    let km_id = w2["client_id"].as_str().unwrap().to_string();
    let c = client(&h, ProtocolVersion::V_2025_11_25).await;
    let tools = c.list_all_tools().await.unwrap();
    for name in ["ask", "fan_out", "agent_task"] {
        let t = tools.iter().find(|t| t.name == name).unwrap();
        let schema = serde_json::to_string(&t.input_schema).unwrap();
        assert!(
            schema.contains("\"files\"") && schema.contains("mime_type"),
            "{name}: {schema}"
        );
    }
    let files =
        json!([{"name": "chart.png", "mime_type": "image/png", "data": b64(PNG)}, "report.pdf"]);
    let asked = tokio::spawn({
        let args = json!({"target": "ds", "prompt": "看图", "files": files});
        async move { call(&c, "ask", args).await }
    });
    let got = take_files(&h, &mut ds, &ds_id).await;
    assert_eq!(got.len(), 2);
    assert_eq!(
        (got[0].0["name"].as_str(), got[0].0["mime"].as_str()),
        (Some("chart.png"), Some("image/png"))
    );
    assert_eq!(got[0].1, PNG);
    assert_eq!(got[1].0["mime"], "application/pdf");
    assert_eq!(got[1].1, b"%PDF-1.4 named");
    let r = asked.await.unwrap();
    assert_eq!(r["status"], "completed", "{r}");
    // fan_out: every tab gets the same file (one blob), each under its own id.
    let c = client(&h, ProtocolVersion::V_2025_11_25).await;
    let fanned = tokio::spawn({
        let args = json!({"targets": ["ds", "km"], "prompt": "比较",
            "files": [{"name": "chart.png", "mime": "image/png", "data": b64(PNG)}]});
        async move { call(&c, "fan_out", args).await }
    });
    let a = take_files(&h, &mut ds, &ds_id).await;
    let b = take_files(&h, &mut km, &km_id).await;
    assert_eq!((a[0].1.as_slice(), b[0].1.as_slice()), (PNG, PNG));
    assert_eq!(a[0].0["sha256"], b[0].0["sha256"]);
    assert_ne!(a[0].0["id"], b[0].0["id"]);
    assert_eq!(fanned.await.unwrap()["status"], "completed");
    let blobs = std::fs::read_dir(h.dir.path().join("blobs"))
        .unwrap()
        .count();
    assert_eq!(
        blobs, 2,
        "the image sent twice is kept once, beside the PDF"
    );
    // Refusals are the tool's error, naming the file; no task is sent.
    let c = client(&h, ProtocolVersion::V_2025_11_25).await;
    let big = vec![1u8; 1024 * 1024 + 10];
    let bad = [
        (
            json!([{"name": "a.png", "data": "!!not base64!!"}]),
            "base64",
        ),
        (
            json!([{"name": "a.png", "data": b64(&big)}]),
            "--max-file-mb",
        ),
        (
            json!([{"name": "run.exe", "data": b64(b"MZ")}]),
            "application/octet-stream",
        ),
        (
            json!([{"name": "a.svg", "mime_type": "image/svg+xml", "data": b64(b"<svg/>")}]),
            "image/svg+xml",
        ),
        (json!(["../secret.txt"]), "secret.txt"),
        (json!(["/etc/passwd"]), "absolute"),
        (json!(["missing.png"]), "missing.png"),
    ];
    for (files, why) in bad {
        let (failed, text) = call_text(
            &c,
            "ask",
            json!({"target": "ds", "prompt": "x", "files": files}),
        )
        .await;
        assert!(failed, "{files}: {text}");
        assert!(text.contains(why), "{files}: {text}");
    }
    // The tab's next task is the next good call's: nothing was sent for the refused ones.
    let asked =
        tokio::spawn(
            async move { call(&c, "ask", json!({"target": "ds", "prompt": "plain"})).await },
        );
    let task = crate::common::answer_task(&mut ds, |p| format!("re: {p}")).await;
    assert_eq!(task["prompt"], "plain");
    assert!(
        task.get("attachments")
            .is_none_or(|a| a.as_array().is_some_and(|a| a.is_empty())),
        "{task}"
    );
    assert_eq!(asked.await.unwrap()["status"], "completed");
}

#[tokio::test]
async fn a_file_larger_than_rmcps_own_4_mb_cap_goes_through_ask() {
    let h = TestHub::start().await;
    let (mut ds, w) = h.tab("deepseek", Some("ds")).await;
    let me = w["client_id"].as_str().unwrap().to_string();
    let big: Vec<u8> = (0..6 * 1024 * 1024).map(|i| (i % 251) as u8).collect();
    let c = client(&h, ProtocolVersion::V_2025_11_25).await;
    let args = json!({"target": "ds", "prompt": "big",
        "files": [{"name": "big.pdf", "mime_type": "application/pdf", "data": b64(&big)}]});
    let asked = tokio::spawn(async move { call(&c, "ask", args).await });
    let got = take_files(&h, &mut ds, &me).await;
    assert_eq!(got[0].0["size"], big.len());
    assert!(got[0].1 == big, "the same 6 MB");
    assert_eq!(asked.await.unwrap()["status"], "completed");
}

#[tokio::test]
async fn agent_task_carries_files_to_the_sessions_first_message_and_a_bad_one_sends_nothing() {
    let h = TestHub::start().await;
    let folder = h.dir.path().join("files");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("report.pdf"), b"%PDF-1.4 for the agent").unwrap();
    std::fs::write(h.dir.path().join("secret.txt"), b"secret").unwrap();
    let (mut km, w) = h.tab("kimi", Some("km")).await;
    let me = w["client_id"].as_str().unwrap().to_string();
    let mut boss = h
        .scripted("boss", "deepseek", "master", |_| {
            Reply::Text(Duration::ZERO, "unused".into())
        })
        .await;
    let made = boss.command("?<agent create looker on km>!").await;
    assert_eq!(made["result"]["success"], true, "{made}");
    let c = client(&h, ProtocolVersion::V_2025_11_25).await;
    // A name out of the files folder is the tool's error, and the tab gets nothing.
    let (failed, text) = call_text(
        &c,
        "agent_task",
        json!({"agent": "looker", "task": "x", "files": ["../secret.txt"]}),
    )
    .await;
    assert!(failed && text.contains("secret.txt"), "{text}");
    let run = tokio::spawn(async move {
        call(
            &c,
            "agent_task",
            json!({"agent": "looker", "task": "看图和报告", "wait_s": 30, "files": [
                {"name": "chart.png", "mime_type": "image/png", "data": b64(PNG)}, "report.pdf"]}),
        )
        .await
    });
    // The tab's first delivery is the good call's: the primer and the task, with both files.
    let d = crate::common::recv_type(&mut km, "deliver").await;
    assert_eq!(d["agent"]["round"], 0, "{d}");
    assert!(d["text"].as_str().unwrap().contains("看图和报告"), "{d}");
    let att = d["attachments"].as_array().expect("attachments").clone();
    let names: Vec<_> = att.iter().map(|a| a["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["chart.png", "report.pdf"], "{d}");
    let mut got = Vec::new();
    for a in &att {
        got.push(fetch_file(&h, a["id"].as_str().unwrap(), &me).await);
    }
    assert_eq!(
        got,
        [
            (200, PNG.to_vec()),
            (200, b"%PDF-1.4 for the agent".to_vec())
        ]
    );
    let answer = "看到了：一张图和一份报告 ?<done 图和报告都看到了>!";
    for v in [
        json!({"type":"chunk","turn_id":"k1","seq":0,"text":answer}),
        json!({"type":"turn_end","turn_id":"k1","text":answer}),
    ] {
        crate::common::send(&mut km, &v).await;
    }
    let r = run.await.unwrap();
    assert_eq!(r["status"], "completed", "{r}");
    assert_eq!(r["text"], "图和报告都看到了", "{r}");
    // The turn showed: the files are no longer the tab's to fetch.
    let (status, _) = fetch_file(&h, att[0]["id"].as_str().unwrap(), &me).await;
    assert_eq!(status, 404);
}

/// An mcp.json server at an `https://` url goes through the hub's one TLS set-up: used when
/// its certificate chains to a trusted root, refused with a reason (and nothing sent) when it
/// does not. The server is another hub's `/mcp` behind an https front.
#[tokio::test]
async fn an_https_mcp_server_is_used_when_trusted_and_refused_when_not() {
    use crate::common::tls::{TestCa, TlsServer};
    let server = TestHub::start().await;
    let plain: std::net::SocketAddr = server.running.addr;
    let ca = TestCa::new();
    let trusted = ca.server(&["127.0.0.1"]).forward(plain).await;
    let stranger = TlsServer::self_signed().forward(plain).await;
    let root = ca.der.clone();
    let h = TestHub::start_with(|c| c.test_roots = vec![root]).await;
    let auth = json!({"Authorization": "Bearer test-token"});
    let cfg = json!({"mcpServers": {
        "remote": {"url": format!("https://{trusted}/mcp"), "headers": auth},
        "stranger": {"url": format!("https://{stranger}/mcp"), "headers": auth}
    }});
    std::fs::write(h.dir.path().join("mcp.json"), cfg.to_string()).unwrap();
    let mut master = h
        .scripted("boss", "chatgpt", "master", |_| Reply::Silent)
        .await;
    let r = master.command("?<mcp list>!").await;
    let text = r["result"]["output"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let remote = text
        .lines()
        .skip_while(|l| !l.contains("remote"))
        .take_while(|l| !l.contains("stranger"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        remote.contains(&format!("http https://{trusted}/mcp")) && remote.contains("list_tabs"),
        "the trusted server's tools are listed: {text}"
    );
    let stranger_line = text
        .lines()
        .find(|l| l.contains("stranger"))
        .unwrap_or_default();
    assert!(
        stranger_line.contains("error") && !stranger_line.contains("list_tabs"),
        "a certificate no root signs is refused: {text}"
    );
    let r = master.command("?<mcp use stranger list_tabs>!").await;
    assert_eq!(r["result"]["success"], false, "{r}");
    let r = master.command("?<mcp use remote list_tabs>!").await;
    assert_eq!(r["result"]["success"], true, "{r}");
}
