//! The tokio + JSON floor server (`benches/load.rs --floor-server`): the least a server must do
//! for the load tool's round, written the plain way, so the hub's CPU per routed task can be
//! put in proportion to it in the same run.
//!
//! It is built like the hub: tokio's multi-thread runtime with the default worker count,
//! mimalloc with the hub's options (the load tool starts it with `MIMALLOC_PURGE_DELAY=0
//! MIMALLOC_ARENA_EAGER_COMMIT=0`, what `src/main.rs` sets), `serde_json`, the release
//! profile. Per connection one task, fed by an unbounded channel, over tokio-tungstenite
//! (RFC 6455 framing, one write per frame, a 4 KiB read buffer per socket). A `hello` with
//! the token gets a `welcome`; a `user_input` holding `?<parallel to=[…] TEXT>!` sends a
//! `task` frame (the prompt encoded once, spliced into each frame) to every named tab; each
//! `turn_end` is matched to its task by id, and when the last has come the master gets a
//! `cmd_result` carrying every reply. No store, timers, heartbeats, queues per tab, retries
//! or failover: what is left is the runtime, the framing, the JSON and the routing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures_util::{SinkExt, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;

/// A frame from a tab (the fields the floor looks at).
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum In {
    Hello {
        token: String,
        #[serde(default)]
        label: Option<String>,
    },
    UserInput {
        text: String,
    },
    TurnEnd {
        task_id: String,
        #[serde(default)]
        text: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Serialize)]
#[serde(tag = "type", rename = "welcome")]
struct Welcome<'a> {
    client_id: &'a str,
    role: &'static str,
    label: Option<&'a str>,
    heartbeat_ms: u64,
    protocol: u32,
}

#[derive(Serialize)]
#[serde(tag = "type", rename = "task")]
struct Task<'a> {
    task_id: &'a str,
    parent_id: &'a str,
    role: &'static str,
    priority: i32,
    prompt: &'a RawValue,
    timeout_ms: u64,
    retry: u32,
    auto_send: bool,
}

#[derive(Serialize)]
struct Outcome {
    success: bool,
    output: String,
}

#[derive(Serialize)]
#[serde(tag = "type", rename = "cmd_result")]
struct CmdResult<'a> {
    cmd_id: &'a str,
    command: &'a str,
    result: Outcome,
}

/// One fan-out waiting for its replies.
struct Round {
    master: mpsc::UnboundedSender<String>,
    cmd_id: String,
    command: String,
    /// (label, reply) per target, in the order the targets were named.
    replies: Vec<(String, Option<String>)>,
    left: usize,
}

/// A task's round and its place there.
type Waiting = (Arc<Mutex<Round>>, usize);

#[derive(Default)]
struct State {
    token: String,
    /// Label → the tab's outbound channel.
    tabs: Mutex<HashMap<String, mpsc::UnboundedSender<String>>>,
    /// Task id → (its round, its place there).
    waiting: Mutex<HashMap<String, Waiting>>,
}

/// Serves on 127.0.0.1 (a free port), printing `listening on http://ADDR` as the hub does.
pub fn run(token: String) {
    raise_nofile();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        println!(
            "floor server listening on http://{}",
            listener.local_addr().expect("addr")
        );
        let state = Arc::new(State {
            token,
            ..State::default()
        });
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let _ = tcp.set_nodelay(true);
            tokio::spawn(connection(state.clone(), tcp));
        }
    });
}

fn raise_nofile() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid out-pointer for getrlimit/setrlimit.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

async fn connection(state: Arc<State>, tcp: tokio::net::TcpStream) {
    // tungstenite's default read buffer is 128 KiB per socket, allocated up front; the load
    // tool's own 4 KiB, and frames written at once (no write buffer kept).
    let mut cfg = WebSocketConfig::default();
    cfg.read_buffer_size = 4096;
    cfg.write_buffer_size = 0;
    let Ok(mut ws) = tokio_tungstenite::accept_async_with_config(tcp, Some(cfg)).await else {
        return;
    };
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let mut label = None;
    loop {
        let text = tokio::select! {
            biased;
            out = rx.recv() => {
                let Some(out) = out else { break };
                if ws.send(Message::Text(out.into())).await.is_err() {
                    break;
                }
                continue;
            }
            msg = ws.next() => match msg {
                Some(Ok(Message::Text(t))) => t,
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => continue,
            },
        };
        let Ok(frame) = serde_json::from_str::<In>(&text) else {
            continue;
        };
        match frame {
            In::Hello { token, label: l } => {
                if token != state.token {
                    break;
                }
                let id = uuid::Uuid::new_v4().to_string();
                let welcome = serde_json::to_string(&Welcome {
                    client_id: &id,
                    role: "worker",
                    label: l.as_deref(),
                    heartbeat_ms: 20_000,
                    protocol: 1,
                })
                .expect("encode");
                if let Some(l) = &l {
                    state.tabs.lock().unwrap().insert(l.clone(), tx.clone());
                }
                label = l;
                let _ = tx.send(welcome);
            }
            In::UserInput { text } => fan_out(&state, &tx, &text),
            In::TurnEnd { task_id, text } => answer(&state, &task_id, text),
            In::Other => {}
        }
    }
    if let Some(l) = label {
        state.tabs.lock().unwrap().remove(&l);
    }
}

/// `?<parallel to=[a,b,…] TEXT>!`: TEXT to every named tab.
fn fan_out(state: &State, master: &mpsc::UnboundedSender<String>, text: &str) {
    let Some(rest) = text
        .trim()
        .strip_prefix("?<parallel to=[")
        .and_then(|r| r.strip_suffix(">!"))
    else {
        return;
    };
    let Some((targets, prompt)) = rest.split_once(']') else {
        return;
    };
    let prompt = serde_json::value::to_raw_value(prompt.trim()).expect("encode");
    let cmd_id = uuid::Uuid::new_v4().to_string();
    let targets: Vec<&str> = targets.split(',').map(str::trim).collect();
    let round = Arc::new(Mutex::new(Round {
        master: master.clone(),
        cmd_id: cmd_id.clone(),
        command: text.to_string(),
        replies: targets.iter().map(|t| (t.to_string(), None)).collect(),
        left: targets.len(),
    }));
    let tabs = state.tabs.lock().unwrap();
    for (i, target) in targets.iter().enumerate() {
        let Some(tab) = tabs.get(*target) else {
            continue;
        };
        let task_id = uuid::Uuid::new_v4().to_string();
        let frame = serde_json::to_string(&Task {
            task_id: &task_id,
            parent_id: &cmd_id,
            role: "worker",
            priority: 0,
            prompt: &prompt,
            timeout_ms: 600_000,
            retry: 0,
            auto_send: true,
        })
        .expect("encode");
        state
            .waiting
            .lock()
            .unwrap()
            .insert(task_id, (round.clone(), i));
        let _ = tab.send(frame);
    }
}

/// A tab's reply; the last one of a round answers the master.
fn answer(state: &State, task_id: &str, text: String) {
    let Some((round, i)) = state.waiting.lock().unwrap().remove(task_id) else {
        return;
    };
    let mut r = round.lock().unwrap();
    r.replies[i].1 = Some(text);
    r.left -= 1;
    if r.left > 0 {
        return;
    }
    let mut output = String::new();
    for (label, reply) in &r.replies {
        output.push_str(label);
        output.push_str(": ");
        output.push_str(reply.as_deref().unwrap_or(""));
        output.push('\n');
    }
    let frame = serde_json::to_string(&CmdResult {
        cmd_id: &r.cmd_id,
        command: &r.command,
        result: Outcome {
            success: true,
            output,
        },
    })
    .expect("encode");
    let _ = r.master.send(frame);
}
