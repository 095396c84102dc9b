//! Engine tests: a tiny in-memory runner drives [`RunState`] the way the hub does.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;
use crate::flows::load_str;

fn flow(text: &str) -> Arc<Flow> {
    match load_str("t.yaml", text) {
        Ok(f) => Arc::new(f),
        Err(d) => panic!("invalid test flow: {d:#?}"),
    }
}

fn inputs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// What the fake tabs answer: `Ok(text)` or `Err((error, retryable))`.
type ItemReply = Result<String, (String, bool)>;

/// An in-memory runner: keeps the journal, answers dispatches with a closure.
struct Sim {
    state: RunState,
    journal: Vec<JournalEvent>,
    now: u64,
    dispatches: Vec<Dispatch>,
    commands: Vec<CommandCall>,
    delivered: Vec<(Option<String>, String)>,
    cancels: Vec<String>,
    result: Option<Result<String, String>>,
}

impl Sim {
    fn new(state: RunState) -> Sim {
        Sim {
            state,
            journal: Vec::new(),
            now: 1_000,
            dispatches: Vec::new(),
            commands: Vec::new(),
            delivered: Vec::new(),
            cancels: Vec::new(),
            result: None,
        }
    }

    fn start(text: &str, given: &[(&str, &str)]) -> Sim {
        let state = RunState::new(flow(text), "run1", inputs(given)).expect("starts");
        Sim::new(state.with_seed(7))
    }

    fn feed(&mut self, event: JournalEvent) {
        self.journal.push(event.clone());
        self.state.apply(&event);
    }

    /// One `next_actions` call; returns the side effects (records are journaled).
    fn step(&mut self) -> Vec<Effect> {
        let actions = self.state.next_actions(self.now);
        let mut effects = Vec::new();
        for action in actions {
            match action {
                Effect::Record(ev) => self.journal.push(ev),
                Effect::Dispatch(d) => {
                    self.dispatches.push(d.clone());
                    effects.push(Effect::Dispatch(d));
                }
                Effect::RunCommand(c) => {
                    self.commands.push(c.clone());
                    effects.push(Effect::RunCommand(c));
                }
                Effect::Deliver { node, text } => self.delivered.push((node, text)),
                Effect::Cancel {
                    idempotency_key, ..
                } => self.cancels.push(idempotency_key),
                Effect::Complete { output } => self.result = Some(Ok(output)),
                Effect::Fail { error } => self.result = Some(Err(error)),
                Effect::Wait { until_ms } => effects.push(Effect::Wait { until_ms }),
            }
        }
        effects
    }

    fn answer(&mut self, d: &Dispatch, reply: ItemReply) {
        let client = format!("tab-{}", d.item);
        self.feed(JournalEvent::PromptSent {
            node: d.node.clone(),
            item: d.item,
            attempt: d.attempt,
            client: client.clone(),
        });
        let event = match reply {
            Ok(text) => JournalEvent::ItemOutput {
                node: d.node.clone(),
                item: d.item,
                attempt: d.attempt,
                client,
                text,
                first_chunk_at_ms: Some(self.now),
            },
            Err((error, retryable)) => JournalEvent::ItemFailed {
                node: d.node.clone(),
                item: d.item,
                attempt: d.attempt,
                error,
                retryable,
                at_ms: self.now,
            },
        };
        self.feed(event);
    }

    /// Drives the run to its end, answering every dispatch with `reply`.
    fn run(&mut self, mut reply: impl FnMut(&Dispatch) -> ItemReply) {
        for _ in 0..10_000 {
            let effects = self.step();
            if self.result.is_some() {
                return;
            }
            let busy = effects
                .iter()
                .any(|e| matches!(e, Effect::Dispatch(_) | Effect::RunCommand(_)));
            let mut progressed = false;
            for effect in effects {
                match effect {
                    Effect::Dispatch(d) => {
                        let r = reply(&d);
                        self.answer(&d, r);
                        progressed = true;
                    }
                    Effect::RunCommand(c) => {
                        self.feed(JournalEvent::ItemOutput {
                            node: c.node.clone(),
                            item: c.item,
                            attempt: c.attempt,
                            client: String::new(),
                            text: format!("ran: {}", c.command),
                            first_chunk_at_ms: None,
                        });
                        progressed = true;
                    }
                    Effect::Wait { until_ms } if !busy => {
                        self.now = until_ms;
                        progressed = true;
                    }
                    _ => {}
                }
            }
            assert!(progressed, "the run is stuck: {:#?}", self.state.snapshot());
        }
        panic!("the run did not finish");
    }

    fn output(&self) -> &str {
        match &self.result {
            Some(Ok(out)) => out,
            other => panic!("run did not complete: {other:?}"),
        }
    }

    fn prompts_of(&self, node: &str) -> Vec<&str> {
        self.dispatches
            .iter()
            .filter(|d| d.node == node)
            .map(|d| d.prompt.as_str())
            .collect()
    }
}

const CROSS: &str = r#"
name: cross
inputs: {document: {default: "the doc"}}
nodes:
  - id: review
    to: [deepseek, qianwen, doubao]
    prompt: "Review: $document"
    output_var: reviews
  - id: synth
    depends_on: review
    to: chatgpt
    prompt: "Merge:\n${review.outputs}\n--\n$reviews"
  - id: report
    depends_on: synth
    to: master
    prompt: "Report: ${synth.output}"
"#;

#[test]
fn siblings_are_dispatched_together_and_aggregated_in_item_order() {
    let mut sim = Sim::start(CROSS, &[]);
    let effects = sim.step();
    let first: Vec<&Dispatch> = effects
        .iter()
        .filter_map(|a| match a {
            Effect::Dispatch(d) => Some(d),
            _ => None,
        })
        .collect();
    assert_eq!(first.len(), 3, "three reviews at once");
    assert_eq!(
        first
            .iter()
            .map(|d| d.target.to_string())
            .collect::<Vec<_>>(),
        vec!["deepseek", "qianwen", "doubao"]
    );
    assert!(first
        .iter()
        .all(|d| d.prompt == "Review: the doc" && d.items == 3));
    assert_eq!(first[1].idempotency_key, "run1/review/1/1");
    // Answer out of order: aggregation still follows item order.
    let ds: Vec<Dispatch> = first.into_iter().cloned().collect();
    for d in ds.iter().rev() {
        sim.answer(d, Ok(format!("R{}", d.item)));
    }
    sim.run(|d| Ok(format!("merged({})", d.prompt.len())));
    let synth_prompt = sim.prompts_of("synth")[0];
    assert_eq!(
        synth_prompt,
        "Merge:\nR0\n\nR1\n\nR2\n--\n[tab-0]\nR0\n\n[tab-1]\nR1\n\n[tab-2]\nR2"
    );
    let out = sim.output().to_string();
    assert!(out.starts_with("Report: merged("), "{out}");
    assert_eq!(sim.delivered, vec![(Some("report".to_string()), out)]);
    assert_eq!(sim.state.status(), RunStatus::Completed);
}

#[test]
fn a_chain_passes_result_along() {
    let text = "name: c\nnodes:\n  - id: a\n    prompt: start\n  - id: b\n    needs: a\n    prompt: \"after $RESULT\"\n  - id: c\n    needs: b\n    prompt: \"then $RESULT\"\n";
    let mut sim = Sim::start(text, &[]);
    sim.run(|d| Ok(format!("<{}>", d.prompt)));
    assert_eq!(sim.output(), "<then <after <start>>>");
    assert_eq!(
        sim.delivered.len(),
        1,
        "the final result goes to the master"
    );
    assert_eq!(sim.delivered[0].0, None);
}

#[test]
fn when_false_skips_and_the_skip_propagates_unless_the_trigger_says_otherwise() {
    let text = r#"
name: w
inputs: {mode: {default: quick}}
nodes:
  - id: deep
    when: "$mode == 'deep'"
    prompt: deep dive
  - id: after_deep
    needs: deep
    prompt: "use ${deep.output}"
  - id: always
    needs: deep
    trigger: all_done
    prompt: "deep said '$deep'"
"#;
    let mut sim = Sim::start(text, &[]);
    sim.run(|d| Ok(format!("ok {}", d.node)));
    let snap = sim.state.snapshot();
    let states: Vec<NodeState> = snap.nodes.iter().map(|n| n.state).collect();
    assert_eq!(
        states,
        vec![NodeState::Skipped, NodeState::Skipped, NodeState::Completed]
    );
    assert_eq!(sim.prompts_of("always"), vec!["deep said ''"]);
    assert!(snap.nodes[1]
        .error
        .as_deref()
        .unwrap_or_default()
        .contains("skipped"));

    let mut deep = Sim::start(text, &[("mode", "deep")]);
    deep.run(|d| Ok(format!("ok {}", d.node)));
    assert_eq!(
        deep.state.node_state("after_deep"),
        Some(NodeState::Completed)
    );
}

#[test]
fn for_each_maps_over_a_json_list_with_a_cap() {
    let text = r#"
name: m
nodes:
  - id: plan
    prompt: plan it
    output_var: parts
  - id: each
    needs: plan
    for_each: {items: "$parts", as: part, max_parallel: 2}
    aggregate: list
    prompt: "do {{ part }}"
"#;
    let mut sim = Sim::start(text, &[]);
    let mut max_seen = 0;
    let mut in_flight: Vec<Dispatch> = Vec::new();
    for _ in 0..50 {
        for a in sim.step() {
            if let Effect::Dispatch(d) = a {
                in_flight.push(d);
            }
        }
        if sim.result.is_some() {
            break;
        }
        let each = in_flight.iter().filter(|d| d.node == "each").count();
        max_seen = max_seen.max(each);
        if let Some(d) = (!in_flight.is_empty()).then(|| in_flight.remove(0)) {
            let reply = if d.node == "plan" {
                "```json\n[\"a\", \"b\", \"c\"]\n```".to_string()
            } else {
                d.prompt.to_uppercase()
            };
            sim.answer(&d, Ok(reply));
        }
    }
    assert_eq!(max_seen, 2, "max_parallel caps items in flight");
    assert_eq!(sim.output(), "[\"DO A\",\"DO B\",\"DO C\"]");
}

#[test]
fn workers_n_fans_out_to_n_items() {
    let text = "name: w\nnodes:\n  - id: ideas\n    to: role:worker\n    workers: 3\n    aggregate: vote\n    prompt: pick a colour\n";
    let mut sim = Sim::start(text, &[]);
    let mut answers = vec!["Blue.", "red", "blue"].into_iter();
    sim.run(|d| {
        assert_eq!(d.target, PromptTarget::Role("worker".into()));
        assert_eq!(d.items, 3);
        Ok(answers.next().unwrap_or_default().to_string())
    });
    assert_eq!(sim.dispatches.len(), 3);
    assert_eq!(sim.dispatches[2].label, "role:worker #3");
    assert_eq!(sim.output(), "Blue.");
}

#[test]
fn parallel_outputs_send_a_prompt_per_target() {
    let text = "name: p\ninputs: {d: {default: X}}\nnodes:\n  - id: a\n    parallel_outputs:\n      deepseek: \"trends in $d\"\n      qianwen: \"summary of $d\"\n";
    let mut sim = Sim::start(text, &[]);
    sim.run(|d| Ok(d.prompt.clone()));
    let targets: Vec<String> = sim
        .dispatches
        .iter()
        .map(|d| d.target.to_string())
        .collect();
    assert_eq!(targets, vec!["deepseek", "qianwen"]);
    assert_eq!(
        sim.output(),
        "[tab-0]\ntrends in X\n\n[tab-1]\nsummary of X"
    );
}

#[test]
fn judge_gets_the_candidates_and_decides() {
    let text = "name: j\nnodes:\n  - id: a\n    to: [x, y]\n    aggregate: judge\n    judge: z\n    prompt: capital of France?\n";
    let mut sim = Sim::start(text, &[]);
    sim.run(|d| {
        Ok(match d.target.to_string().as_str() {
            "z" => "Paris (judged)".to_string(),
            t => format!("{t} says Paris"),
        })
    });
    let judge = sim.dispatches.last().expect("judge dispatch");
    assert_eq!(judge.target, PromptTarget::Name("z".into()));
    assert_eq!(judge.item, 2);
    assert!(judge.prompt.contains("capital of France?"));
    assert!(judge.prompt.contains("[1] (tab-0)\nx says Paris"));
    assert!(judge.prompt.contains("[2] (tab-1)\ny says Paris"));
    assert_eq!(sim.output(), "Paris (judged)");
}

#[test]
fn json_merge_failure_fails_the_node_with_a_clear_error() {
    let text = "name: j\nnodes:\n  - id: a\n    to: [x, y]\n    aggregate: json_merge\n    prompt: give json\n";
    let mut sim = Sim::start(text, &[]);
    sim.run(|d| {
        Ok(if d.item == 0 {
            "{\"a\":1}".into()
        } else {
            "no json here".into()
        })
    });
    let err = match &sim.result {
        Some(Err(e)) => e.clone(),
        other => panic!("expected failure, got {other:?}"),
    };
    assert!(err.contains("[tab-1] is not JSON"), "{err}");
    assert_eq!(sim.state.status(), RunStatus::Failed);
}

#[test]
fn retries_back_off_deterministically_and_avoid_the_failed_tab() {
    let text = "name: r\nnodes:\n  - id: a\n    prompt: hi\n    retry: {max: 2, backoff: {initial: 1s, factor: 2}, jitter: false}\n";
    let mut sim = Sim::start(text, &[]);
    let mut failures = 2;
    let mut waits = Vec::new();
    for _ in 0..20 {
        let effects = sim.step();
        if sim.result.is_some() {
            break;
        }
        for e in effects {
            match e {
                Effect::Dispatch(d) => {
                    let r = if failures > 0 {
                        failures -= 1;
                        Err(("429 rate limited".to_string(), true))
                    } else {
                        Ok("finally".to_string())
                    };
                    sim.answer(&d, r);
                }
                Effect::Wait { until_ms } => {
                    waits.push(until_ms - sim.now);
                    sim.now = until_ms;
                }
                _ => {}
            }
        }
    }
    assert_eq!(waits, vec![1_000, 2_000]);
    let keys: Vec<&str> = sim
        .dispatches
        .iter()
        .map(|d| d.idempotency_key.as_str())
        .collect();
    assert_eq!(keys, vec!["run1/a/0/1", "run1/a/0/2", "run1/a/0/3"]);
    assert_eq!(sim.dispatches[2].avoid, vec!["tab-0", "tab-0"]);
    assert_eq!(sim.output(), "finally");
}

const FAILING: &str = "nodes:\n  - id: a\n    prompt: hi\n    retry: {max: 1, backoff: 10ms}\n  - id: b\n    needs: a\n    prompt: \"got $a\"\n  - id: side\n    prompt: side work\n";

fn fail_a(d: &Dispatch) -> ItemReply {
    if d.node == "a" {
        Err(("tab closed".into(), true))
    } else {
        Ok(format!("ok: {}", d.prompt))
    }
}

fn run_error(sim: &Sim) -> String {
    match &sim.result {
        Some(Err(e)) => e.clone(),
        other => panic!("the run did not fail: {other:?}"),
    }
}

#[test]
fn a_message_fallback_tells_the_master_why_and_the_run_still_fails() {
    // The seed's own line: `fallback: "发送告警消息"`.
    let text = format!(
        "name: f\nerror_handling: {{max_retries: 1, fallback: \"发送告警消息\"}}\n{FAILING}"
    );
    let f = flow(&text);
    assert_eq!(f.nodes.last().map(|n| n.id.as_str()), Some("fallback"));
    let mut sim = Sim::new(RunState::new(f, "run1", inputs(&[])).expect("starts"));
    sim.run(fail_a);
    let err = run_error(&sim);
    assert!(
        err.contains("node `a` failed") && err.contains("tab closed"),
        "{err}"
    );
    assert!(err.contains("fallback `fallback` ran"), "{err}");
    assert_eq!(sim.delivered.len(), 1, "{:?}", sim.delivered);
    let (node, alert) = &sim.delivered[0];
    assert_eq!(node.as_deref(), Some("fallback"));
    assert!(alert.contains("发送告警消息"), "{alert}");
    assert!(
        alert.contains("node a failed") && alert.contains("tab closed"),
        "{alert}"
    );
    assert!(alert.contains("flow f"), "{alert}");
    assert_eq!(sim.state.node_state("a"), Some(NodeState::Failed));
    assert_eq!(sim.state.node_state("b"), Some(NodeState::Cancelled));
    assert_eq!(sim.state.node_state("fallback"), Some(NodeState::Completed));
    assert_eq!(sim.state.status(), RunStatus::Failed);
    assert!(
        sim.prompts_of("b").is_empty(),
        "nothing downstream of the failure runs"
    );
}

#[test]
fn a_fallback_that_is_not_needed_is_skipped_and_sends_nothing() {
    let text = format!("name: f\nerror_handling: {{fallback: \"发送告警消息\"}}\n{FAILING}");
    let mut sim = Sim::start(&text, &[]);
    sim.run(|d| Ok(format!("ok {}", d.node)));
    assert_eq!(
        sim.output(),
        "ok b\n\nok side",
        "the fallback is no part of the answer"
    );
    assert_eq!(sim.state.node_state("fallback"), Some(NodeState::Skipped));
    assert_eq!(
        sim.delivered,
        vec![(None, "ok b\n\nok side".to_string())],
        "only the answer reaches the master"
    );
}

#[test]
fn a_command_fallback_runs_once_with_the_error_and_the_failed_node() {
    let text = format!(
        "name: f\nerror_handling: {{max_retries: 3, fallback: \"?<publish alerts $FAILED_NODE: $ERROR>!\"}}\n{FAILING}"
    );
    let mut sim = Sim::start(&text, &[]);
    sim.run(fail_a);
    let calls: Vec<&CommandCall> = sim
        .commands
        .iter()
        .filter(|c| c.node == "fallback")
        .collect();
    assert_eq!(calls.len(), 1, "{:?}", sim.commands);
    assert_eq!(calls[0].command, "publish alerts $FAILED_NODE: $ERROR");
    assert_eq!(
        calls[0].vars.get("FAILED_NODE").map(String::as_str),
        Some("a")
    );
    let error = calls[0].vars.get("ERROR").cloned().unwrap_or_default();
    assert!(error.contains("tab closed"), "{error}");
    assert!(run_error(&sim).contains("fallback `fallback` ran"));
    assert!(sim.delivered.is_empty(), "{:?}", sim.delivered);
}

#[test]
fn a_fallback_node_runs_only_on_failure_and_its_own_failure_is_told() {
    let text = format!(
        "name: f\nerror_handling: {{fallback: {{node: alert}}}}\n{FAILING}  - id: alert\n    to: deepseek\n    prompt: \"{{{{ FAILED_NODE }}}} broke: $ERROR (side said ${{side.output}})\"\n"
    );
    // No failure: the node never runs.
    let mut fine = Sim::start(&text, &[]);
    fine.run(|d| Ok(format!("ok {}", d.node)));
    assert!(fine.prompts_of("alert").is_empty());
    assert_eq!(fine.state.node_state("alert"), Some(NodeState::Skipped));

    let mut sim = Sim::start(&text, &[]);
    sim.run(fail_a);
    let prompts = sim.prompts_of("alert");
    assert_eq!(prompts.len(), 1);
    assert!(prompts[0].starts_with("a broke: "), "{}", prompts[0]);

    // The fallback fails too: the run's error says both.
    let mut both = Sim::start(&text, &[]);
    both.run(|d| match d.node.as_str() {
        "a" => Err(("tab closed".into(), true)),
        "alert" => Err(("deepseek is down".into(), true)),
        _ => Ok("ok".into()),
    });
    let err = run_error(&both);
    assert!(err.contains("node `a` failed"), "{err}");
    assert!(
        err.contains("fallback `alert` failed too") && err.contains("deepseek is down"),
        "{err}"
    );
    assert_eq!(
        both.prompts_of("alert").len(),
        1,
        "a fallback is tried once"
    );
}

#[test]
fn a_failure_that_continues_runs_the_fallback_beside_the_rest() {
    let text = format!(
        "name: f\nerror_handling: {{fallback: \"发送告警消息\"}}\n{}",
        FAILING.replace(
            "    prompt: hi\n",
            "    prompt: hi\n    on_failure: continue\n"
        )
    );
    let mut sim = Sim::start(&text, &[]);
    sim.run(fail_a);
    assert_eq!(sim.state.status(), RunStatus::Completed);
    assert_eq!(sim.output(), "ok: side work", "{:?}", sim.result);
    let nodes: Vec<Option<&str>> = sim.delivered.iter().map(|(n, _)| n.as_deref()).collect();
    assert_eq!(
        nodes,
        vec![Some("fallback"), None],
        "the alert, then the answer"
    );
}

#[test]
fn a_replay_in_the_middle_of_a_fallback_does_not_run_it_twice() {
    let text =
        format!("name: f\nerror_handling: {{fallback: \"?<publish alerts $ERROR>!\"}}\n{FAILING}");
    let f = flow(&text);
    let mut sim = Sim::new(RunState::new(f.clone(), "run1", inputs(&[])).expect("starts"));
    // Run until the fallback command is handed out, but do not answer it.
    for _ in 0..100 {
        let effects = sim.step();
        if sim.commands.iter().any(|c| c.node == "fallback") {
            break;
        }
        for e in effects {
            match e {
                Effect::Dispatch(d) => {
                    let r = fail_a(&d);
                    sim.answer(&d, r);
                }
                Effect::Wait { until_ms } => sim.now = until_ms,
                _ => {}
            }
        }
    }
    assert_eq!(sim.commands.len(), 1, "{:?}", sim.commands);
    let mut again = Sim::new(RunState::replay(f, &sim.journal, false).expect("replays"));
    again.journal = sim.journal.clone();
    again.now = sim.now;
    again.run(fail_a);
    let issued: Vec<&str> = again
        .commands
        .iter()
        .map(|c| c.idempotency_key.as_str())
        .collect();
    assert_eq!(
        issued,
        vec!["run1/fallback/0/1"],
        "re-issued with the same key, once"
    );
    assert!(run_error(&again).contains("fallback `fallback` ran"));
}

#[test]
fn exhausted_retries_use_the_fallback_or_fail_or_continue() {
    let base = "nodes:\n  - id: a\n    prompt: hi\n    retry: {max: 1, backoff: 10ms}\n  - id: b\n    needs: a\n    prompt: \"got $a\"\n";
    let always_fail = |_: &Dispatch| -> ItemReply { Err(("tab closed".into(), true)) };

    let with_fallback =
        format!("name: f\nerror_handling: {{fallback: {{output: \"(none)\"}}}}\n{base}");
    let mut sim = Sim::start(&with_fallback, &[]);
    sim.run(|d| {
        if d.node == "a" {
            always_fail(d)
        } else {
            Ok(d.prompt.clone())
        }
    });
    assert_eq!(sim.output(), "got (none)");
    assert_eq!(sim.prompts_of("a").len(), 2, "one try + one retry");

    let mut failing = Sim::start(&format!("name: f\n{base}"), &[]);
    failing.run(always_fail);
    let err = failing
        .result
        .clone()
        .and_then(Result::err)
        .unwrap_or_default();
    assert!(
        err.contains("node `a` failed") && err.contains("tab closed"),
        "{err}"
    );
    assert_eq!(failing.state.node_state("b"), Some(NodeState::Cancelled));

    let cont = format!(
        "name: f\n{}",
        base.replace(
            "    prompt: hi\n",
            "    prompt: hi\n    on_failure: continue\n"
        )
    );
    let mut sim = Sim::start(&cont, &[]);
    sim.run(always_fail);
    assert_eq!(sim.state.node_state("a"), Some(NodeState::Failed));
    assert_eq!(sim.state.node_state("b"), Some(NodeState::Skipped));
    assert_eq!(sim.state.status(), RunStatus::Completed);
}

#[test]
fn non_retryable_errors_are_not_retried() {
    let text = "name: r\nnodes:\n  - id: a\n    prompt: hi\n    retry: {max: 3}\n";
    let mut sim = Sim::start(text, &[]);
    sim.run(|_| Err(("login page".into(), false)));
    assert_eq!(sim.dispatches.len(), 1);
    assert_eq!(sim.state.status(), RunStatus::Failed);
}

#[test]
fn replay_rebuilds_the_same_state_and_reissues_in_flight_attempts() {
    let mut sim = Sim::start(CROSS, &[]);
    let effects = sim.step();
    let reviews: Vec<Dispatch> = effects
        .into_iter()
        .filter_map(|a| match a {
            Effect::Dispatch(d) => Some(d),
            _ => None,
        })
        .collect();
    // Two reviews answered, one still in flight (its prompt was sent) when the hub "crashes".
    sim.answer(&reviews[0], Ok("R0".into()));
    sim.answer(&reviews[2], Ok("R2".into()));
    sim.feed(JournalEvent::PromptSent {
        node: "review".into(),
        item: 1,
        attempt: 1,
        client: "tab-1".into(),
    });
    let before = sim.state.snapshot();

    // The journal survives as JSON lines.
    let lines: Vec<String> = sim
        .journal
        .iter()
        .map(|e| serde_json::to_string(e).expect("json"))
        .collect();
    let journal: Vec<JournalEvent> = lines
        .iter()
        .map(|l| serde_json::from_str(l).expect("parse"))
        .collect();
    let state = RunState::replay(flow(CROSS), &journal, false).expect("replays");
    assert_eq!(state.snapshot(), before, "same journal, same state");

    let mut resumed = Sim::new(state);
    resumed.journal = journal;
    let effects = resumed.step();
    let reissued: Vec<&Dispatch> = effects
        .iter()
        .filter_map(|a| match a {
            Effect::Dispatch(d) => Some(d),
            _ => None,
        })
        .collect();
    assert_eq!(reissued.len(), 1, "only the in-flight review is sent again");
    assert_eq!(reissued[0].idempotency_key, "run1/review/1/1");
    assert_eq!(reissued[0].prompt, "Review: the doc");
    let new_records = resumed.journal.len() - lines.len();
    assert_eq!(new_records, 0, "re-issuing records nothing new");
    let d = reissued[0].clone();
    resumed.answer(&d, Ok("R1".into()));
    resumed.run(|d| Ok(format!("done {}", d.node)));
    let review_dispatches = resumed
        .dispatches
        .iter()
        .filter(|d| d.node == "review")
        .count();
    assert_eq!(review_dispatches, 1, "completed items are never sent again");
    assert_eq!(resumed.output(), "Report: done synth");

    // Replaying the finished journal gives the finished state, with nothing left to do.
    let mut done = RunState::replay(flow(CROSS), &resumed.journal, false).expect("replays");
    assert_eq!(done.snapshot(), resumed.state.snapshot());
    assert!(done.next_actions(99_999).is_empty());
}

#[test]
fn replay_refuses_a_changed_flow() {
    let mut sim = Sim::start(CROSS, &[]);
    sim.step();
    let changed = flow(&CROSS.replace("Review: $document", "Critique: $document"));
    let err = RunState::replay(changed.clone(), &sim.journal, false).expect_err("changed");
    assert!(matches!(err, EngineError::FlowChanged { .. }));
    assert!(RunState::replay(changed, &sim.journal, true).is_ok());
    assert_eq!(
        RunState::replay(flow(CROSS), &[], false).err(),
        Some(EngineError::BadJournal)
    );
}

#[test]
fn pause_holds_new_work_and_resume_continues() {
    let text =
        "name: p\nnodes:\n  - id: a\n    prompt: one\n  - id: b\n    needs: a\n    prompt: two\n";
    let mut sim = Sim::start(text, &[]);
    let first = sim.step();
    let Some(Effect::Dispatch(a)) = first.into_iter().find(|e| matches!(e, Effect::Dispatch(_)))
    else {
        panic!("a is dispatched");
    };
    sim.feed(JournalEvent::RunPaused { at_ms: 1 });
    sim.answer(&a, Ok("A".into()));
    assert!(sim.step().is_empty(), "nothing new while paused");
    assert_eq!(sim.state.node_state("a"), Some(NodeState::Completed));
    assert_eq!(sim.state.node_state("b"), Some(NodeState::Paused));
    sim.feed(JournalEvent::RunResumed { at_ms: 2 });
    sim.run(|d| Ok(d.prompt.clone()));
    assert_eq!(sim.output(), "two");
}

#[test]
fn stop_cancels_in_flight_work() {
    let mut sim = Sim::start(CROSS, &[]);
    sim.step();
    sim.feed(JournalEvent::RunStopped {
        reason: "stopped by the master".into(),
    });
    sim.step();
    assert_eq!(sim.cancels.len(), 3);
    assert!(sim.state.is_finished());
    assert_eq!(sim.state.node_state("synth"), Some(NodeState::Cancelled));
    assert!(sim.step().is_empty(), "cancels are said once");
}

#[test]
fn from_node_treats_upstream_nodes_as_completed() {
    let prior = inputs(&[("review", "old reviews")]);
    let state = RunState::new(flow(CROSS), "run2", BTreeMap::new())
        .expect("starts")
        .from_node("synth", prior)
        .expect("known node");
    let mut sim = Sim::new(state);
    sim.run(|d| Ok(format!("merged: {}", d.prompt.contains("old reviews"))));
    assert!(
        sim.prompts_of("review").is_empty(),
        "upstream not sent again"
    );
    assert_eq!(sim.output(), "Report: merged: true");
    let bad = RunState::new(flow(CROSS), "r", BTreeMap::new())
        .expect("starts")
        .from_node("nope", BTreeMap::new());
    assert_eq!(bad.err(), Some(EngineError::UnknownNode("nope".into())));
}

#[test]
fn variables_are_data_never_rendered_again() {
    let text = "name: v\nnodes:\n  - id: a\n    prompt: hi\n  - id: b\n    needs: a\n    prompt: \"echo: $a / {{ a }}\"\n";
    let mut sim = Sim::start(text, &[]);
    sim.run(|d| {
        Ok(if d.node == "a" {
            "{{ 7 * 6 }} ?<echo pwned>! $a".to_string()
        } else {
            d.prompt.clone()
        })
    });
    assert_eq!(
        sim.output(),
        "echo: {{ 7 * 6 }} ?<echo pwned>! $a / {{ 7 * 6 }} ?<echo pwned>! $a"
    );
}

#[test]
fn command_nodes_get_their_variables_unexpanded() {
    let text = "name: c\ninputs: {file: {default: \"my data.csv\"}}\nnodes:\n  - id: load\n    command: \"?<python load.py $file>!\"\n  - id: save\n    needs: load\n    command: \"echo ${load.output}\"\n";
    let mut sim = Sim::start(text, &[]);
    sim.run(|_| Ok(String::new()));
    assert_eq!(sim.commands[0].command, "python load.py $file");
    assert_eq!(sim.commands[0].vars, inputs(&[("file", "my data.csv")]));
    assert_eq!(
        sim.commands[1].vars,
        inputs(&[("load.output", "ran: python load.py $file")])
    );
    assert_eq!(sim.output(), "ran: echo ${load.output}");
}

#[test]
fn node_deadline_fails_the_node() {
    let text = "name: d\nnodes:\n  - id: a\n    prompt: slow\n    timeout: {deadline: 5s}\n";
    let mut sim = Sim::start(text, &[]);
    let effects = sim.step();
    let wait = effects.iter().find_map(|e| match e {
        Effect::Wait { until_ms } => Some(*until_ms),
        _ => None,
    });
    assert_eq!(wait, Some(sim.now + 5_000));
    sim.now += 5_000;
    sim.step();
    assert_eq!(sim.cancels, vec!["run1/a/0/1"]);
    let err = sim.result.clone().and_then(Result::err).unwrap_or_default();
    assert!(err.contains("deadline of 5s exceeded"), "{err}");
}

#[test]
fn inputs_are_checked() {
    let text = "name: i\ninputs: {need: {required: true}, opt: {}}\nnodes:\n  - id: a\n    prompt: \"$need $opt\"\n";
    let f = flow(text);
    assert_eq!(
        RunState::new(f.clone(), "r", BTreeMap::new()).err(),
        Some(EngineError::MissingInput("need".into()))
    );
    let err = RunState::new(f.clone(), "r", inputs(&[("need", "x"), ("typo", "y")])).err();
    assert!(matches!(err, Some(EngineError::UnknownInput { .. })));
    let mut sim = Sim::new(RunState::new(f, "r", inputs(&[("need", "x")])).expect("ok"));
    sim.run(|d| Ok(d.prompt.clone()));
    assert_eq!(sim.output(), "x ");
}

#[test]
fn run_wide_max_parallel_is_respected() {
    let text = "name: l\nlimits: {max_parallel: 2}\nnodes:\n  - id: a\n    to: [s1, s2, s3, s4]\n    prompt: go\n";
    let mut sim = Sim::start(text, &[]);
    let first: Vec<Dispatch> = sim
        .step()
        .into_iter()
        .filter_map(|a| match a {
            Effect::Dispatch(d) => Some(d),
            _ => None,
        })
        .collect();
    assert_eq!(first.len(), 2);
    assert!(sim.step().is_empty(), "no third prompt while two are out");
    for d in &first {
        sim.answer(d, Ok("x".into()));
    }
    sim.run(|_| Ok("x".into()));
    assert_eq!(sim.dispatches.len(), 4);
}

#[test]
fn every_example_flow_runs_to_completion() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/flows");
    for entry in std::fs::read_dir(dir).expect("flows dir") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let flow = Arc::new(crate::flows::load_file(&path).expect("valid"));
        let mut sim = Sim::new(RunState::new(flow, "ex", BTreeMap::new()).expect("starts"));
        sim.run(|d| {
            Ok(if d.prompt.contains("JSON array") {
                "[\"part one\", \"part two\"]".into()
            } else {
                format!("answer from {}", d.target)
            })
        });
        assert!(
            !sim.output().is_empty(),
            "{} produced no output",
            path.display()
        );
        assert!(
            !sim.delivered.is_empty(),
            "{} delivered nothing",
            path.display()
        );
    }
}

mod replay_property {
    //! Property: for random DAGs and random tab failures, replaying any prefix of the journal
    //! rebuilds exactly the state the live run had at that point.
    use super::*;
    use proptest::prelude::*;

    /// A random flow: node i depends on some earlier nodes, fans out to 1–3 targets.
    fn arb_flow() -> impl Strategy<Value = String> {
        prop::collection::vec(
            (
                prop::collection::vec(any::<prop::sample::Index>(), 0..3),
                1usize..4,
                0usize..3,
                any::<bool>(),
                0u32..3,
            ),
            1..8,
        )
        .prop_map(|nodes| {
            let mut out = String::from("name: p\nnodes:\n");
            for (i, (deps, targets, agg, cont, retries)) in nodes.into_iter().enumerate() {
                out.push_str(&format!("  - id: n{i}\n"));
                let mut ds: Vec<usize> =
                    deps.iter().filter(|_| i > 0).map(|d| d.index(i)).collect();
                ds.sort_unstable();
                ds.dedup();
                if !ds.is_empty() {
                    let list: Vec<String> = ds.iter().map(|d| format!("n{d}")).collect();
                    out.push_str(&format!("    needs: [{}]\n", list.join(", ")));
                }
                let to: Vec<String> = (0..targets).map(|t| format!("t{t}")).collect();
                out.push_str(&format!("    to: [{}]\n", to.join(", ")));
                out.push_str(&format!(
                    "    aggregate: {}\n",
                    ["concat", "list", "vote"][agg]
                ));
                if cont {
                    out.push_str("    on_failure: continue\n");
                }
                out.push_str(&format!("    retry: {{max: {retries}, backoff: 10ms}}\n"));
                out.push_str(&format!("    prompt: \"step {i} $RESULT\"\n"));
            }
            out
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn any_journal_prefix_replays_to_the_same_state(text in arb_flow(), fail_seed in any::<u64>()) {
            let f = flow(&text);
            let mut sim = Sim::new(RunState::new(f.clone(), "p", BTreeMap::new()).expect("starts"));
            let mut checkpoints: Vec<(usize, RunSnapshot)> = Vec::new();
            for _ in 0..500 {
                let effects = sim.step();
                checkpoints.push((sim.journal.len(), sim.state.snapshot()));
                if sim.result.is_some() {
                    break;
                }
                let mut waited = false;
                for e in effects {
                    match e {
                        Effect::Dispatch(d) => {
                            let h = crate::flows::engine::retry::fnv1a(
                                format!("{fail_seed}/{}", d.idempotency_key).as_bytes(),
                            );
                            let reply = if h.is_multiple_of(3) {
                                Err(("flaky tab".to_string(), h.is_multiple_of(2)))
                            } else {
                                Ok(format!("r{}", h % 5))
                            };
                            sim.answer(&d, reply);
                            checkpoints.push((sim.journal.len(), sim.state.snapshot()));
                        }
                        Effect::Wait { until_ms } if !waited => {
                            sim.now = until_ms;
                            waited = true;
                        }
                        _ => {}
                    }
                }
            }
            prop_assert!(sim.result.is_some(), "run did not finish");
            for (len, snapshot) in &checkpoints {
                let replayed = RunState::replay(f.clone(), &sim.journal[..*len], false).expect("replays");
                prop_assert_eq!(&replayed.snapshot(), snapshot);
            }
            let mut keys: Vec<&str> = sim
                .journal
                .iter()
                .filter_map(|e| match e {
                    JournalEvent::AttemptStarted { idempotency_key, .. } => Some(idempotency_key.as_str()),
                    _ => None,
                })
                .collect();
            let total = keys.len();
            keys.sort_unstable();
            keys.dedup();
            prop_assert_eq!(keys.len(), total, "an attempt was started twice");
        }
    }
}

#[test]
fn a_result_is_journaled_before_it_is_delivered() {
    // The runner writes a `Record` followed by a `Deliver` in one transaction; a `Deliver`
    // before its record would reach the master once more after a crash between the two.
    for text in [
        "name: m\nnodes:\n  - {id: a, command: \"?<echo hi>!\"}\n  - {id: out, needs: a, to: master, prompt: \"${a.output}\"}\n",
        "name: r\nnodes:\n  - {id: a, command: \"?<echo hi>!\"}\n",
    ] {
        let mut sim = Sim::start(text, &[]);
        let mut seen = Vec::new();
        for _ in 0..20 {
            let actions = sim.state.next_actions(sim.now);
            if actions.is_empty() {
                break;
            }
            for a in actions {
                match a {
                    Effect::RunCommand(c) => sim.feed(JournalEvent::ItemOutput {
                        node: c.node.clone(),
                        item: c.item,
                        attempt: c.attempt,
                        client: String::new(),
                        text: "hi".into(),
                        first_chunk_at_ms: None,
                    }),
                    Effect::Record(ev) => {
                        let v = serde_json::to_value(&ev).expect("json");
                        seen.push(format!("record {}", v["type"].as_str().unwrap_or("")));
                        sim.journal.push(ev);
                    }
                    Effect::Deliver { .. } => seen.push("deliver".into()),
                    _ => {}
                }
            }
        }
        let at = seen.iter().position(|s| s == "deliver").expect("delivered");
        assert!(at > 0, "{seen:?}");
        let before = &seen[at - 1];
        assert!(
            before == "record node_completed" || before == "record run_completed",
            "the deliver follows its record: {seen:?}"
        );
    }
}
