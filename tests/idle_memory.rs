//! What an idle tab costs the hub on the heap, counted by a global allocator in this test
//! binary. The hub runs on its own runtime whose worker threads are the only ones counted;
//! the tabs run on the test's thread. Idle tabs still trade pings and pongs (the ping
//! interval is short here), so buffers that a socket keeps after a frame would show.
//!
//! The test fails if an idle tab holds a read or a write buffer: a live allocation of 1 KiB
//! or more per tab, or more than `MAX_BYTES_PER_TAB` in all.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use aicard::app::App;
use aicard::config::HubConfig;
use aicard::hub::tasks::TaskRequest;
use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

/// Power-of-two size classes: live allocations and live bytes in each, from hub threads.
const CLASSES: usize = 24;
static LIVE_COUNT: [AtomicI64; CLASSES] = [const { AtomicI64::new(0) }; CLASSES];
static LIVE_BYTES: [AtomicI64; CLASSES] = [const { AtomicI64::new(0) }; CLASSES];

/// Allocations of 1 KiB to 64 KiB, live, by size in 64-byte steps (to tell a buffer from the
/// socket's task, which is one allocation of about the size of its future).
const BIG_STEP: usize = 64;
const BIG_SLOTS: usize = 1024;
static BIG: [AtomicI64; BIG_SLOTS] = [const { AtomicI64::new(0) }; BIG_SLOTS];

thread_local! {
    static COUNTED: Cell<bool> = const { Cell::new(false) };
    static IN_TRACE: Cell<bool> = const { Cell::new(false) };
}

/// `IDLE_MEMORY_TRACE=LO-HI` prints where the allocations of LO..HI bytes that hub threads
/// made while the tabs connected, and still hold, were made (a poor man's heap profile; the
/// figures of such a run include the profiler's own allocations).
static TRACE: std::sync::OnceLock<Option<(usize, usize)>> = std::sync::OnceLock::new();
static TRACING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
type Traces = std::collections::HashMap<usize, (usize, std::backtrace::Backtrace)>;
static TRACES: std::sync::Mutex<Option<Traces>> = std::sync::Mutex::new(None);

fn guarded(f: impl FnOnce()) {
    if IN_TRACE.try_with(|t| t.replace(true)).unwrap_or(true) {
        return;
    }
    f();
    let _ = IN_TRACE.try_with(|t| t.set(false));
}

fn trace_alloc(ptr: *mut u8, size: usize) {
    if !TRACING.load(Ordering::Relaxed) || !COUNTED.try_with(|c| c.get()).unwrap_or(false) {
        return;
    }
    if let Some(Some((lo, hi))) = TRACE.get() {
        if (*lo..*hi).contains(&size) {
            guarded(|| {
                let bt = std::backtrace::Backtrace::force_capture();
                let mut t = TRACES.lock().unwrap();
                t.get_or_insert_with(Default::default)
                    .insert(ptr as usize, (size, bt));
            });
        }
    }
}

fn trace_free(ptr: *mut u8) {
    if TRACE.get().is_some_and(|t| t.is_some()) {
        guarded(|| {
            let gone = TRACES
                .lock()
                .unwrap()
                .as_mut()
                .and_then(|t| t.remove(&(ptr as usize)));
            drop(gone);
        });
    }
}

fn print_traces() {
    guarded(|| {
        let Some(t) = TRACES.lock().unwrap().take() else {
            return;
        };
        let mut by_site: std::collections::HashMap<String, (usize, usize)> = Default::default();
        for (size, bt) in t.values() {
            let site: Vec<String> = bt
                .to_string()
                .lines()
                .filter(|l| !l.trim_start().starts_with("at "))
                .filter(|l| {
                    [
                        "aicard",
                        "tungstenite",
                        "hyper",
                        "axum",
                        "mpsc",
                        "dashmap",
                        "Arc",
                        "Vec",
                        "Box",
                        "spawn",
                    ]
                    .iter()
                    .any(|k| l.contains(k))
                })
                .take(8)
                .map(|l| l.trim().to_string())
                .collect();
            let e = by_site.entry(site.join("\n    ")).or_default();
            e.0 += 1;
            e.1 += size;
        }
        let mut sites: Vec<_> = by_site.into_iter().collect();
        sites.sort_by_key(|(_, (n, _))| std::cmp::Reverse(*n));
        for (site, (n, bytes)) in sites.into_iter().take(12) {
            eprintln!("{n} live, {bytes} B:\n    {site}");
        }
    });
}

struct Counting;

fn class(size: usize) -> usize {
    (usize::BITS - size.max(1).leading_zeros()) as usize % CLASSES
}

fn note(size: usize, sign: i64) {
    // `try_with`: the thread-local may be gone while a thread exits.
    if COUNTED.try_with(|c| c.get()).unwrap_or(false) {
        let c = class(size);
        LIVE_COUNT[c].fetch_add(sign, Ordering::Relaxed);
        LIVE_BYTES[c].fetch_add(sign * size as i64, Ordering::Relaxed);
        if (1024..BIG_STEP * BIG_SLOTS).contains(&size) {
            BIG[size / BIG_STEP].fetch_add(sign, Ordering::Relaxed);
        }
    }
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size(), 1);
        let ptr = unsafe { System.alloc(layout) };
        trace_alloc(ptr, layout.size());
        ptr
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(layout.size(), -1);
        trace_free(ptr);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size(), 1);
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(layout.size(), -1);
        note(new_size, 1);
        trace_free(ptr);
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        trace_alloc(new, new_size);
        new
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn snapshot() -> [(i64, i64); CLASSES] {
    std::array::from_fn(|c| {
        (
            LIVE_COUNT[c].load(Ordering::Relaxed),
            LIVE_BYTES[c].load(Ordering::Relaxed),
        )
    })
}

const TABS: usize = 400;
/// The length of the task each tab is sent, and of its answer, in the second part.
const LONG: usize = 100_000;
/// Everything an idle tab keeps on the hub's heap: its client record, queue, connection
/// task and socket state, with no read or write buffer. 1,942 B in this build since the live
/// socket is one hand-made future (its task 640 B, from 1,536; docs/benchmarks.md, "Eleventh
/// session"); 2,739 B before.
const MAX_BYTES_PER_TAB: f64 = 2048.0;

#[test]
fn an_idle_tab_holds_no_read_or_write_buffer() {
    let hub_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(|| COUNTED.with(|c| c.set(true)))
        .build()
        .expect("hub runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = HubConfig::for_tests(dir.path().to_path_buf());
    config.timing.ping_interval = Duration::from_millis(100);
    config.timing.dead_after = Duration::from_secs(30);
    let running = hub_rt.block_on(async move {
        // Started from a hub thread so that its accept loop and store count as the hub's.
        tokio::spawn(App::start(config))
            .await
            .expect("join")
            .expect("hub starts")
    });
    let url = format!("ws://{}/realtime", running.addr);
    let tabs_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tabs runtime");

    // One tab first, so that maps, pools and lazily made statics exist before counting.
    let open = |n: usize, base: usize| {
        let url = url.clone();
        tabs_rt.block_on(async move {
            for i in 0..n {
                let (mut ws, _) = tokio_tungstenite::connect_async(url.as_str())
                    .await
                    .expect("connect");
                let hello = json!({"type":"hello","token":"test-token","site":"sim",
                                   "label": format!("idle{}", base + i)});
                ws.send(Message::Text(hello.to_string().into()))
                    .await
                    .expect("hello");
                // Read on for ever (pongs are sent while the socket is read), and answer each
                // task at length.
                tokio::spawn(async move {
                    while let Some(Ok(msg)) = ws.next().await {
                        let Message::Text(text) = msg else { continue };
                        let frame: serde_json::Value = serde_json::from_str(&text).expect("json");
                        if frame["type"] != "task" {
                            continue;
                        }
                        let id = frame["task_id"].as_str().expect("task id");
                        let turn = format!("t-{id}");
                        let answer = "答".repeat(LONG / 3);
                        for reply in [
                            json!({"type":"task_update","task_id":id,"state":"accepted"}),
                            json!({"type":"turn_end","turn_id":turn,"text":answer,"task_id":id}),
                        ] {
                            let text = reply.to_string();
                            if ws.send(Message::Text(text.into())).await.is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        })
    };
    let settle = |want: usize| {
        tabs_rt.block_on(async {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
            while running.app.registry.connected_count() < want {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "tabs did not attach"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            // Several ping rounds, so each socket has written and read since its welcome.
            tokio::time::sleep(Duration::from_millis(700)).await;
        })
    };
    TRACE.get_or_init(|| {
        let v = std::env::var("IDLE_MEMORY_TRACE").ok()?;
        let (lo, hi) = v.split_once('-')?;
        Some((lo.parse().ok()?, hi.parse().ok()?))
    });
    open(1, 0);
    settle(1);
    let before = snapshot();
    let big_before: Vec<i64> = BIG.iter().map(|b| b.load(Ordering::Relaxed)).collect();
    TRACING.store(true, Ordering::Relaxed);
    open(TABS, 1);
    settle(TABS + 1);
    TRACING.store(false, Ordering::Relaxed);
    let after = snapshot();
    print_traces();
    let big: Vec<(usize, f64)> = BIG
        .iter()
        .zip(&big_before)
        .enumerate()
        .map(|(i, (b, was))| {
            (
                i * BIG_STEP,
                (b.load(Ordering::Relaxed) - was) as f64 / TABS as f64,
            )
        })
        .filter(|(_, n)| n.abs() >= 0.05)
        .collect();

    let mut total = 0.0;
    let mut lines = Vec::new();
    for c in 0..CLASSES {
        let count = (after[c].0 - before[c].0) as f64 / TABS as f64;
        let bytes = (after[c].1 - before[c].1) as f64 / TABS as f64;
        total += bytes;
        if count.abs() >= 0.05 {
            let lo = if c == 0 { 0 } else { 1usize << (c - 1) };
            lines.push(format!(
                "  {lo:>6}..{:<6} B: {count:6.2} allocations, {bytes:8.1} B per tab",
                1usize << c
            ));
        }
    }
    let sizes = aicard::hub::future_sizes();
    for (name, bytes) in &sizes {
        println!("future {name}: {bytes} B");
    }
    // The socket's task: its future plus tokio's task header and trailer (under 1 KiB since
    // the eleventh session, so none of these should be there).
    let task = sizes[0].1..sizes[0].1 + 512;
    let mut big_per_tab = 0.0;
    for (size, n) in &big {
        let what = if task.contains(size) {
            "the socket's task"
        } else {
            big_per_tab += n;
            "a buffer?"
        };
        println!("  {size}..{} B: {n:.2} per tab ({what})", size + BIG_STEP);
    }
    println!("live heap per idle tab ({TABS} tabs), by size class:");
    println!("{}", lines.join("\n"));
    println!("  total {total:.0} B per tab; other allocations of 1 KiB or more: {big_per_tab:.2} per tab");
    assert!(
        big_per_tab < 0.1,
        "an idle tab holds {big_per_tab:.2} allocations of 1 KiB or more (a read or write buffer)"
    );
    assert!(
        total <= MAX_BYTES_PER_TAB,
        "an idle tab holds {total:.0} B of heap, more than {MAX_BYTES_PER_TAB}"
    );

    // Then each tab is sent a long task and answers at length. Once idle again it keeps
    // neither frame's bytes: a WebSocket stack that keeps its buffers as large as the longest
    // frame it carried (tungstenite, tokio-websockets, fastwebsockets: benches/ws_stacks.rs)
    // would hold two allocations of 64 KiB or more per tab here.
    let before_long = snapshot();
    TRACING.store(true, Ordering::Relaxed);
    let clients = running.app.registry.all();
    let tasks = running.app.tasks.clone();
    let asks = hub_rt.spawn(async move {
        let asks: Vec<_> = clients
            .into_iter()
            .map(|client| {
                let tasks = tasks.clone();
                // Made and dropped on hub threads, so the counts stay balanced.
                tokio::spawn(async move {
                    let prompt = "问".repeat(LONG / 3);
                    let req = TaskRequest::new(prompt, Duration::from_secs(60));
                    tasks.ask(&client, req).await.map(|a| a.len())
                })
            })
            .collect();
        let mut lens = Vec::new();
        for a in asks {
            lens.push(a.await.expect("join").expect("answered"));
        }
        lens
    });
    let lens = tabs_rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(60), asks)
            .await
            .expect("every tab answers in time")
            .expect("join")
    });
    assert_eq!(lens.len(), TABS + 1);
    assert!(lens.iter().all(|&n| n == LONG / 3 * 3), "{lens:?}");
    settle(TABS + 1);
    TRACING.store(false, Ordering::Relaxed);
    let after_long = snapshot();
    print_traces();
    // Classes from 64 KiB up: a kept copy of either frame.
    let long_class = class(64 * 1024);
    let kept: f64 = (long_class..CLASSES)
        .map(|c| (after_long[c].0 - before_long[c].0) as f64)
        .sum::<f64>()
        / (TABS + 1) as f64;
    let grew: f64 = (0..CLASSES)
        .map(|c| (after_long[c].1 - before_long[c].1) as f64)
        .sum::<f64>()
        / (TABS + 1) as f64;
    println!(
        "after a {LONG} B task and a {LONG} B answer each: {kept:.2} allocations of 64 KiB or \
         more per tab, heap {grew:+.0} B per tab"
    );
    assert!(
        kept < 0.1,
        "a tab that was sent and sent {LONG} B keeps {kept:.2} allocations of 64 KiB or more"
    );
    drop(tabs_rt);
    hub_rt.block_on(running.shutdown());
}
