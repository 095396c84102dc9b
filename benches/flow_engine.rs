//! Flow engine benchmark: a generated 10,000-node layered DAG (seeded random dependencies).
//! Measures validation (parse + schema check + typed load + semantic checks) and the engine's
//! scheduling overhead per node when every tab answers instantly (target ≤ 50 µs per node).
//!
//! Run: `cargo bench --bench flow_engine`

use std::collections::BTreeMap;
use std::fmt::Write;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aicard::flows::engine::{Effect, JournalEvent, Plan, RunState};
use aicard::flows::{load_str, Flow};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const NODES: usize = 10_000;
const WIDTH: usize = 100;

/// A layered DAG: `WIDTH` nodes per layer, each depending on 1–3 nodes of the layer above,
/// prompting with its first dependency's output and an input.
fn generate(nodes: usize, width: usize, seed: u64) -> String {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = String::from(
        "name: generated\ninputs:\n  topic: {default: benchmarks}\nlimits: {max_parallel: 64}\nnodes:\n",
    );
    for i in 0..nodes {
        let layer = i / width;
        let _ = writeln!(out, "  - id: n{i}");
        if layer == 0 {
            let _ = writeln!(out, "    to: role:worker\n    prompt: \"start $topic\"");
            continue;
        }
        let above = (layer - 1) * width;
        let count = rng.random_range(1..=3);
        let mut deps: Vec<usize> = (0..count)
            .map(|_| above + rng.random_range(0..width))
            .collect();
        deps.dedup();
        let list: Vec<String> = deps.iter().map(|d| format!("n{d}")).collect();
        let _ = writeln!(out, "    depends_on: [{}]", list.join(", "));
        let _ = writeln!(
            out,
            "    to: sim-{}\n    prompt: \"step {i} on $topic after ${{n{}.output}}\"",
            i % 7,
            deps[0]
        );
    }
    out
}

/// Drives a run to completion with instant replies; returns the number of dispatches.
fn drive(flow: &Arc<Flow>, plan: &Arc<Plan>) -> usize {
    let mut state =
        RunState::with_plan(flow.clone(), plan.clone(), "bench".into(), BTreeMap::new())
            .expect("run starts");
    let mut now = 0;
    let mut dispatched = 0;
    loop {
        now += 1;
        let actions = state.next_actions(now);
        let mut replies = Vec::new();
        for action in actions {
            match action {
                Effect::Dispatch(d) => {
                    dispatched += 1;
                    replies.push(JournalEvent::ItemOutput {
                        node: d.node,
                        item: d.item,
                        attempt: d.attempt,
                        client: String::new(),
                        text: "ok".into(),
                        first_chunk_at_ms: None,
                    });
                }
                Effect::Complete { .. } | Effect::Fail { .. } => return dispatched,
                _ => {}
            }
        }
        for reply in &replies {
            state.apply(reply);
        }
    }
}

fn report(label: &str, total: Duration, per: usize) {
    println!(
        "{label}: {:.1} ms total, {:.2} µs per node",
        total.as_secs_f64() * 1e3,
        total.as_secs_f64() * 1e6 / per as f64
    );
}

fn bench(c: &mut Criterion) {
    let text = generate(NODES, WIDTH, 42);

    // Plain figures first, printed whatever criterion's output settings.
    let t = Instant::now();
    let flow = Arc::new(load_str("generated.yaml", &text).expect("valid flow"));
    report("validate 10k nodes", t.elapsed(), NODES);
    let t = Instant::now();
    let plan = Arc::new(Plan::compile(&flow).expect("compiles"));
    report("compile plan", t.elapsed(), NODES);
    let t = Instant::now();
    let sent = drive(&flow, &plan);
    assert_eq!(sent, NODES);
    report("schedule (instant tabs)", t.elapsed(), NODES);

    let mut group = c.benchmark_group("flow_engine_10k");
    group.sample_size(10);
    group.throughput(Throughput::Elements(NODES as u64));
    group.bench_function("validate", |b| {
        b.iter(|| load_str("generated.yaml", black_box(&text)).expect("valid"))
    });
    group.bench_function("compile_plan", |b| {
        b.iter(|| Plan::compile(black_box(&flow)).expect("compiles"))
    });
    group.bench_function("schedule_instant_tabs", |b| {
        b.iter(|| drive(black_box(&flow), &plan))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
