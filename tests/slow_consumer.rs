//! One tab that stops reading never slows the others (docs/reliability.md "Slow consumers and dead
//! nodes", docs/protocol.md): a real hub, a tab with a 4 KiB receive buffer that stops
//! reading while many runs deliver 64 KiB frames to it, and other tabs answering tasks at
//! the same time. Every frame sent to the stalled tab is counted end to end: it reached its
//! socket, was kept and replayed on its return, or was dropped by the per-tab cap (counted).

#[path = "it/common/mod.rs"]
mod common;

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aicard::hub::tasks::TaskRequest;
use aicard::hub::HubEvent;
use aicard::protocol::ServerFrame;
use aicard::store::{now_ms, JournalEntry};
use common::*;
use futures_util::StreamExt;
use serde_json::json;
use tokio::sync::broadcast;
use tokio_tungstenite::tungstenite::Message;

/// Runs delivering to the stalled tab, and frames each delivers (paced over ~4 s).
const RUNS: usize = 40;
const PER_RUN: usize = 40;
const FRAME_BYTES: usize = 64 * 1024;
/// No task of another tab may take longer than this while the stalled tab is handled.
const BOUND: Duration = Duration::from_secs(3);

fn seq_of(text: &str) -> Option<usize> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    v["text"].as_str()?.split(' ').nth(1)?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_tab_never_slows_the_others_and_every_frame_is_counted() {
    let h = TestHub::start_with(|c| {
        c.timing.ping_interval = Duration::from_secs(20);
        c.timing.dead_after = Duration::from_secs(60);
    })
    .await;
    let mut events = h.hub().events.subscribe();

    // The stalled tab: a 4 KiB receive buffer, and after its welcome it reads nothing.
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    let tcp = sock.connect(h.running.addr).await.unwrap();
    let tcp = tokio_tungstenite::MaybeTlsStream::Plain(tcp);
    let (mut stalled, _) = tokio_tungstenite::client_async(h.ws_url("/realtime"), tcp)
        .await
        .unwrap();
    send(
        &mut stalled,
        &json!({"type": "hello", "token": TOKEN, "site": "stall"}),
    )
    .await;
    let welcome = recv(&mut stalled).await;
    let stalled_id = welcome["client_id"].as_str().unwrap().to_string();

    // The others: three tabs that answer at once.
    let mut others = Vec::new();
    for i in 0..3 {
        others.push(
            h.scripted(&format!("w{i}"), "kimi", "worker", |p: &str| {
                Reply::Text(Duration::ZERO, format!("re: {p}"))
            })
            .await,
        );
    }

    // The runs: each delivers its frames to the stalled tab, durable, with a journal entry,
    // paced (the runs' own work between deliveries, not synchronisation).
    let senders: Vec<_> = (0..RUNS)
        .map(|r| {
            let hub = h.hub().clone();
            let id = stalled_id.clone();
            tokio::spawn(async move {
                let run_id = format!("run-{r}");
                for k in 0..PER_RUN {
                    let seq = r * PER_RUN + k;
                    let frame = ServerFrame::Deliver {
                        text: format!("frame {seq} {}", "d".repeat(FRAME_BYTES)),
                        auto_send: false,
                        run_id: Some(run_id.clone()),
                        deliver_id: Some(format!("d-{seq}")),
                        agent: None,
                    };
                    let event = json!({"type": "delivered", "seq": seq}).to_string();
                    let journal = JournalEntry {
                        run_id: &run_id,
                        event: &event,
                        at_ms: now_ms(),
                    };
                    hub.registry
                        .send_durable(&id, &frame, Some(journal))
                        .unwrap();
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
        })
        .collect();

    // Meanwhile the other tabs answer task after task, until the runs are done and the
    // stalled tab's connection was let go; none may take longer than the bound.
    let gone = Arc::new(AtomicBool::new(false));
    let watch = {
        let gone = gone.clone();
        let id = stalled_id.clone();
        tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(HubEvent::Disconnected(d)) if d == id => break,
                    Err(broadcast::error::RecvError::Closed) => return,
                    _ => {}
                }
            }
            gone.store(true, Ordering::SeqCst);
        })
    };
    let mut slowest = Duration::ZERO;
    let mut answered = 0usize;
    let t0 = Instant::now();
    while !(gone.load(Ordering::SeqCst) && senders.iter().all(|s| s.is_finished())) {
        let asks = (0..3).map(|i| {
            let hub = h.hub().clone();
            let c = hub.registry.resolve(&format!("w{i}"))[0].clone();
            async move {
                let t = Instant::now();
                let r = tokio::time::timeout(
                    BOUND,
                    hub.tasks.ask(
                        &c,
                        TaskRequest::new(format!("q{i}"), Duration::from_secs(30)),
                    ),
                )
                .await;
                (t.elapsed(), r)
            }
        });
        for (took, r) in futures_util::future::join_all(asks).await {
            let reply = r.unwrap_or_else(|_| {
                panic!(
                    "another tab's task took over {BOUND:?} while the stalled tab was handled \
                     (at {:?}, {answered} answered before)",
                    t0.elapsed()
                )
            });
            assert!(reply.unwrap().starts_with("re: "));
            slowest = slowest.max(took);
            answered += 1;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the stalled tab was never closed"
        );
    }
    for s in senders {
        s.await.unwrap();
    }
    watch.await.unwrap();
    let total = RUNS * PER_RUN;
    eprintln!(
        "slow consumer: {answered} tasks of other tabs answered in {:?}, slowest {slowest:?}; \
         {total} frames of {FRAME_BYTES} B sent to the stalled tab",
        t0.elapsed()
    );

    // End to end: what reached the stalled tab's socket (it reads now, to the end)…
    let mut seen = BTreeSet::new();
    while let Ok(Some(Ok(msg))) = tokio::time::timeout(WAIT, stalled.next()).await {
        if let Message::Text(t) = msg {
            seen.extend(seq_of(&t));
        }
    }
    // …what was kept for it (bounded by the per-tab cap), replayed when it comes back…
    let store = &h.hub().store;
    let kept = store.pending_count(&stalled_id).unwrap();
    assert!(kept <= 1024, "kept {kept} frames for one tab");
    let kept_bytes: i64 = store
        .read(|c| {
            c.query_row(
                "SELECT COALESCE(SUM(bytes), 0) FROM pending_frames WHERE client_id = ?1",
                [&stalled_id],
                |r| r.get(0),
            )
        })
        .unwrap();
    assert!(kept_bytes as usize <= 16 * 1024 * 1024 + FRAME_BYTES + 64);
    let mut back = h.connect("/realtime").await;
    send(
        &mut back,
        &json!({"type": "hello", "token": TOKEN, "site": "stall", "client_id": stalled_id}),
    )
    .await;
    assert_eq!(recv(&mut back).await["type"], "welcome");
    let mut replayed = Vec::new();
    while replayed.len() < kept {
        let f = recv_type(&mut back, "deliver").await;
        replayed.extend(
            f["text"]
                .as_str()
                .and_then(|t| t.split(' ').nth(1)?.parse::<usize>().ok()),
        );
    }
    let mut last_of_run = HashMap::new();
    for &seq in &replayed {
        if let Some(before) = last_of_run.insert(seq / PER_RUN, seq) {
            assert!(
                before < seq,
                "a run's frames are replayed in order: {replayed:?}"
            );
        }
    }
    seen.extend(replayed);
    // …and what the cap dropped, counted (and logged).
    let dropped = h.hub().registry.frames_dropped() as usize;
    eprintln!(
        "stalled tab: {} frames reached it before it stopped or on its return, {dropped} dropped by the cap",
        seen.len()
    );
    assert_eq!(
        seen.len() + dropped,
        total,
        "every frame reached the tab or was counted as dropped"
    );
    // Every delivery is in its run's journal, whatever the tab got.
    for r in 0..RUNS {
        assert_eq!(store.events(&format!("run-{r}")).unwrap().len(), PER_RUN);
    }
}

/// Every `hello` without a `client_id` makes a tab; those that never come back are
/// forgotten, from memory after `forget_in_memory` and from the store after `forget_after`
/// (short here), except a tab a task still waits on: it comes back and gets its task.
#[tokio::test]
async fn tabs_that_do_not_come_back_are_forgotten_but_not_one_a_task_waits_on() {
    let h = TestHub::start_with(|c| {
        c.timing.forget_in_memory = Duration::from_millis(300);
        c.timing.forget_after = Duration::from_secs(1);
    })
    .await;
    let hub = h.hub().clone();
    let mut events = hub.events.subscribe();
    let mut gone = Vec::new();
    for _ in 0..20 {
        let (ws, welcome) = h.tab("kimi", None).await;
        gone.push(welcome["client_id"].as_str().unwrap().to_string());
        drop(ws);
    }
    let (mut ws, welcome) = h.tab("kimi", Some("keep")).await;
    let keep = welcome["client_id"].as_str().unwrap().to_string();
    let mut req = TaskRequest::new("wait for me", Duration::from_secs(60));
    req.fail_on_loss = false;
    let client = hub.registry.get(&keep).unwrap();
    let ticket = hub.tasks.submit(&client, req).unwrap();
    let task = recv_type(&mut ws, "task").await;
    drop(ws);
    let mut left = gone.len() + 1;
    while left > 0 {
        wait_event(&mut events, |e| matches!(e, HubEvent::Disconnected(_))).await;
        left -= 1;
    }
    // Forgotten by the hub's own sweep, within a few of its periods.
    let t0 = Instant::now();
    loop {
        let in_memory = gone
            .iter()
            .filter(|id| hub.registry.get(id).is_some())
            .count();
        let in_store = gone
            .iter()
            .filter(|id| hub.store.client(id).unwrap().is_some())
            .count();
        if in_memory == 0 && in_store == 0 {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "still known: {in_memory} in memory, {in_store} in the store"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(hub.registry.get(&keep).is_some(), "a task waits on it");
    assert!(hub.store.client(&keep).unwrap().is_some());
    // It comes back with its id and gets the same task again.
    let mut back = h.connect("/realtime").await;
    send(
        &mut back,
        &json!({"type": "hello", "token": TOKEN, "site": "kimi", "client_id": keep}),
    )
    .await;
    assert_eq!(recv(&mut back).await["label"], "keep");
    let again = recv_type(&mut back, "task").await;
    assert_eq!(again["task_id"], task["task_id"]);
    drop(ticket);
}
