//! Events that start work (docs/cluster.md) on the real hub with scripted tabs: publish → rule → the
//! prompt arrives; `where` filters; node results of a flow reach a reviewer; the loop guard;
//! unsubscribe; rules survive a restart.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::common::*;
use aicard::app::App;
use aicard::config::HubConfig;
use tokio::sync::mpsc;

/// A tab that answers every prompt with `ok` and hands each prompt it gets to the test.
async fn listening_tab(
    h_url: &str,
    label: &str,
    role: &str,
) -> (ScriptedTab, mpsc::UnboundedReceiver<String>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let tab = ScriptedTab::connect(h_url, hello(label, "sim", role), move |p: &str| {
        let _ = tx.send(p.to_string());
        Reply::Text(Duration::from_millis(1), "ok".into())
    })
    .await;
    (tab, rx)
}

async fn next_prompt(rx: &mut mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(WAIT, rx.recv())
        .await
        .expect("a prompt in time")
        .expect("tab open")
}

async fn ok(master: &mut ScriptedTab, cmd: &str) -> String {
    let r = master.command(cmd).await;
    assert_eq!(r["result"]["success"], true, "{cmd}: {r}");
    r["result"]["output"].as_str().unwrap().to_string()
}

/// The rule id in `rule #N` of a `subscribe` answer.
fn rule_id(answer: &str) -> String {
    answer
        .split("rule #")
        .nth(1)
        .and_then(|s| s.split(':').next())
        .unwrap_or_else(|| panic!("no rule id in {answer}"))
        .to_string()
}

#[tokio::test]
async fn a_published_event_fires_a_rule_and_the_prompt_reaches_the_tab() {
    let h = TestHub::start().await;
    let url = h.ws_url("/realtime");
    let mut master = ScriptedTab::connect(&url, hello("boss", "chatgpt", "master"), |_: &str| {
        Reply::Silent
    })
    .await;
    let (_reviewer, mut prompts) = listening_tab(&url, "reviewer", "worker").await;
    let made = ok(
        &mut master,
        "?<subscribe news do to reviewer: 请看 / look: $EVENT_TEXT ($EVENT_TOPIC)>!",
    )
    .await;
    assert!(made.contains("rule #"), "{made}");
    let out = ok(&mut master, "?<publish news hello world>!").await;
    assert!(out.contains("news"), "{out}");
    assert_eq!(
        next_prompt(&mut prompts).await,
        "请看 / look: hello world (news)"
    );
    // Without TEXT a publish carries the previous step's result.
    ok(&mut master, "?<set x = carried -> publish news>!").await;
    assert_eq!(
        next_prompt(&mut prompts).await,
        "请看 / look: x = carried (news)"
    );
    let listed = ok(&mut master, "?<subscribe list>!").await;
    assert!(listed.contains("news do to reviewer"), "{listed}");
}

#[tokio::test]
async fn where_filters_the_events_a_rule_hears() {
    let h = TestHub::start().await;
    let url = h.ws_url("/realtime");
    let mut master = ScriptedTab::connect(&url, hello("boss", "chatgpt", "master"), |_: &str| {
        Reply::Silent
    })
    .await;
    let (reviewer, mut urgent) = listening_tab(&url, "reviewer", "worker").await;
    let (_log, mut all) = listening_tab(&url, "log", "worker").await;
    ok(
        &mut master,
        "?<subscribe alert where $EVENT_TEXT contains urgent do to reviewer: U $EVENT_TEXT>!",
    )
    .await;
    ok(&mut master, "?<subscribe alert do to log: L $EVENT_TEXT>!").await;
    ok(&mut master, "?<publish alert calm day>!").await;
    ok(&mut master, "?<publish alert urgent fire>!").await;
    assert_eq!(next_prompt(&mut urgent).await, "U urgent fire");
    let mut logged = vec![next_prompt(&mut all).await, next_prompt(&mut all).await];
    logged.sort();
    assert_eq!(logged, vec!["L calm day", "L urgent fire"]);
    assert_eq!(reviewer.prompts(), vec!["U urgent fire"]);
    // A condition that cannot parse is refused when the rule is made.
    let bad = master
        .command("?<subscribe alert where do to reviewer: x>!")
        .await;
    assert_eq!(bad["result"]["success"], false, "{bad}");
}

const ONE: &str = r#"
name: draft
nodes:
  - id: write
    to: w1
    prompt: "write a line"
  - id: polish
    needs: write
    to: w1
    prompt: "polish ${write.output}"
"#;

#[tokio::test]
async fn every_node_result_of_a_flow_is_forwarded_to_a_reviewer() {
    let h = hub_with_flows(&[("draft", ONE)]).await;
    let url = h.ws_url("/realtime");
    let mut master = ScriptedTab::connect(&url, hello("boss", "chatgpt", "master"), |_: &str| {
        Reply::Silent
    })
    .await;
    let _w1 = ScriptedTab::connect(&url, hello("w1", "sim", "worker"), |p: &str| {
        Reply::Text(Duration::from_millis(1), format!("w1 did {p}"))
    })
    .await;
    let (_reviewer, mut prompts) = listening_tab(&url, "reviewer", "worker").await;
    ok(
        &mut master,
        "?<subscribe node_result where $EVENT_FLOW == draft do to reviewer: review $EVENT_NODE: $EVENT_OUTPUT>!",
    )
    .await;
    let (state, _) = run_flow(&mut master, "?<manager run draft>!").await;
    assert_eq!(state, "completed");
    assert_eq!(
        next_prompt(&mut prompts).await,
        "review write: w1 did write a line"
    );
    assert_eq!(
        next_prompt(&mut prompts).await,
        "review polish: w1 did polish w1 did write a line"
    );
}

#[tokio::test]
async fn a_rule_never_fires_on_its_own_event_and_rules_stop_three_deep() {
    let h = TestHub::start().await;
    let url = h.ws_url("/realtime");
    let mut master = ScriptedTab::connect(&url, hello("boss", "chatgpt", "master"), |_: &str| {
        Reply::Silent
    })
    .await;
    let (log, mut logged) = listening_tab(&url, "log", "worker").await;
    // Rule 1 answers every ping with a ping: without the guard it would never stop.
    ok(&mut master, "?<subscribe ping do publish ping again>!").await;
    ok(&mut master, "?<subscribe ping do to log: P $EVENT_TEXT>!").await;
    // A chain a → b → c → d: the event on d is three rules deep and fires nothing.
    ok(&mut master, "?<subscribe a do publish b from-a>!").await;
    ok(&mut master, "?<subscribe b do publish c from-b>!").await;
    ok(
        &mut master,
        "?<subscribe c do publish d from-c -> to log: C $EVENT_TEXT>!",
    )
    .await;
    ok(&mut master, "?<subscribe d do to log: D $EVENT_TEXT>!").await;
    ok(&mut master, "?<publish ping first>!").await;
    let mut seen = vec![
        next_prompt(&mut logged).await,
        next_prompt(&mut logged).await,
    ];
    seen.sort();
    assert_eq!(seen, vec!["P again", "P first"]);
    ok(&mut master, "?<publish a start>!").await;
    assert_eq!(next_prompt(&mut logged).await, "C from-b");
    // A last event through the same bus: everything published before it was heard.
    ok(&mut master, "?<subscribe end do to log: E>!").await;
    ok(&mut master, "?<publish end>!").await;
    assert_eq!(next_prompt(&mut logged).await, "E");
    // ping 1 (once), ping 2 (twice), a, b and c once each, end once; never d, never ping 1
    // again.
    let stats = &h.hub().control.bus.stats;
    tokio::time::timeout(
        WAIT,
        stats.wait_until(|s| s.fired.load(Ordering::Relaxed) >= 7),
    )
    .await
    .expect("the rules ran");
    assert_eq!(stats.fired.load(Ordering::Relaxed), 7);
    assert_eq!(stats.failed.load(Ordering::Relaxed), 0);
    let mut all = log.prompts();
    all.sort();
    assert_eq!(all, vec!["C from-b", "E", "P again", "P first"]);
}

#[tokio::test]
async fn a_rule_that_restarts_its_flow_when_it_completes_runs_it_once_more_not_for_ever() {
    let h = hub_with_flows(&[("draft", ONE)]).await;
    let url = h.ws_url("/realtime");
    let mut master = ScriptedTab::connect(&url, hello("boss", "chatgpt", "master"), |_: &str| {
        Reply::Silent
    })
    .await;
    let (w1, _) = listening_tab(&url, "w1", "worker").await;
    let (log, mut logged) = listening_tab(&url, "log", "worker").await;
    // Without the run carrying its cause, this would restart draft every time it completes.
    ok(
        &mut master,
        "?<subscribe flow_complete where $EVENT_FLOW == draft do manager run draft>!",
    )
    .await;
    ok(
        &mut master,
        "?<subscribe flow_complete do to log: done $EVENT_FLOW>!",
    )
    .await;
    let (state, _) = run_flow(&mut master, "?<manager run draft>!").await;
    assert_eq!(state, "completed");
    // The first completion, then the second run's (started by the rule).
    assert_eq!(next_prompt(&mut logged).await, "done draft");
    assert_eq!(next_prompt(&mut logged).await, "done draft");
    // A last event through the same bus: every event before it was heard.
    ok(&mut master, "?<subscribe end do to log: E>!").await;
    ok(&mut master, "?<publish end>!").await;
    assert_eq!(next_prompt(&mut logged).await, "E");
    let stats = &h.hub().control.bus.stats;
    tokio::time::timeout(
        WAIT,
        stats.wait_until(|s| s.fired.load(Ordering::Relaxed) >= 4),
    )
    .await
    .expect("the rules ran");
    // restart once, "done" twice, E once; the second run's completion restarted nothing.
    assert_eq!(stats.fired.load(Ordering::Relaxed), 4);
    assert_eq!(w1.prompts().len(), 4, "{:?}", w1.prompts());
    assert_eq!(log.prompts().len(), 3, "{:?}", log.prompts());
}

#[tokio::test]
async fn unsubscribe_removes_a_rule() {
    let h = TestHub::start().await;
    let url = h.ws_url("/realtime");
    let mut master = ScriptedTab::connect(&url, hello("boss", "chatgpt", "master"), |_: &str| {
        Reply::Silent
    })
    .await;
    let (reviewer, _) = listening_tab(&url, "reviewer", "worker").await;
    let (_log, mut logged) = listening_tab(&url, "log", "worker").await;
    let id = rule_id(&ok(&mut master, "?<subscribe t do to reviewer: R>!").await);
    ok(&mut master, "?<subscribe t do to log: L>!").await;
    let gone = ok(&mut master, &format!("?<unsubscribe {id}>!")).await;
    assert!(gone.contains(&format!("#{id}")), "{gone}");
    let again = master.command(&format!("?<unsubscribe {id}>!")).await;
    assert_eq!(again["result"]["success"], false, "{again}");
    ok(&mut master, "?<publish t>!").await;
    assert_eq!(next_prompt(&mut logged).await, "L");
    assert!(reviewer.prompts().is_empty(), "{:?}", reviewer.prompts());
    let listed = ok(&mut master, "?<subscribe list>!").await;
    assert!(!listed.contains("reviewer"), "{listed}");
}

#[tokio::test]
async fn rules_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let start = || async {
        App::start(HubConfig::for_tests(dir.path().to_path_buf()))
            .await
            .expect("hub starts")
    };
    let first = start().await;
    let url = format!("ws://{}/realtime", first.addr);
    let mut master = ScriptedTab::connect(&url, hello("boss", "chatgpt", "master"), |_: &str| {
        Reply::Silent
    })
    .await;
    ok(
        &mut master,
        "?<subscribe kept do to reviewer: still here $EVENT_TEXT>!",
    )
    .await;
    master.kill();
    first.shutdown().await;

    let second = start().await;
    let url = format!("ws://{}/realtime", second.addr);
    let mut master = ScriptedTab::connect(&url, hello("boss", "chatgpt", "master"), |_: &str| {
        Reply::Silent
    })
    .await;
    let (_reviewer, mut prompts) = listening_tab(&url, "reviewer", "worker").await;
    let listed = ok(&mut master, "?<subscribe list>!").await;
    assert!(listed.contains("kept do to reviewer"), "{listed}");
    ok(&mut master, "?<publish kept yes>!").await;
    assert_eq!(next_prompt(&mut prompts).await, "still here yes");
    second.shutdown().await;
}

#[tokio::test]
async fn a_foremans_reply_may_not_publish() {
    let h = TestHub::start().await;
    let url = h.ws_url("/realtime");
    let mut worker =
        ScriptedTab::connect(&url, hello("f", "sim", "foreman"), |_: &str| Reply::Silent).await;
    // What the person types in the tab runs; a reply of a foreman (no `flows` permission)
    // may not publish.
    ok(&mut worker, "?<subscribe list>!").await;
    worker.send(serde_json::json!({"type":"turn_end","turn_id":"t1","text":"?<publish x>!"}));
    let r = worker.next("cmd_result").await;
    assert_eq!(r["result"]["success"], false, "{r}");
}

/// The bus's counters reach `/metrics` as counters that grow: events published, rules fired.
#[tokio::test]
async fn the_bus_is_counted_in_metrics() {
    let h = TestHub::start().await;
    let url = h.ws_url("/realtime");
    let mut master = ScriptedTab::connect(&url, hello("boss", "chatgpt", "master"), |_: &str| {
        Reply::Silent
    })
    .await;
    let (_reviewer, mut prompts) = listening_tab(&url, "reviewer", "worker").await;
    let scrape = || async {
        let text = aicard::http_client::plain()
            .get(h.http_url("/metrics"))
            .header("authorization", format!("Bearer {TOKEN}"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let value = |name: &str| -> u64 {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{name} ")))
                .unwrap_or_else(|| panic!("{name} not in /metrics:\n{text}"))
                .trim()
                .parse()
                .unwrap()
        };
        // The Prometheus text format: a counter's TYPE names its samples.
        assert!(
            text.contains("# TYPE aicard_events_published_total counter"),
            "{text}"
        );
        (
            value("aicard_events_published_total"),
            value("aicard_rules_fired_total"),
        )
    };
    let (published, fired) = scrape().await;
    ok(
        &mut master,
        "?<subscribe tick do to reviewer: $EVENT_TEXT>!",
    )
    .await;
    ok(&mut master, "?<publish tick one>!").await;
    assert_eq!(next_prompt(&mut prompts).await, "one");
    let stats = &h.hub().control.bus.stats;
    tokio::time::timeout(
        WAIT,
        stats.wait_until(|s| s.fired.load(Ordering::Relaxed) > fired),
    )
    .await
    .expect("the rule is counted");
    let (published2, fired2) = scrape().await;
    // tick and its data_published.
    assert!(published2 >= published + 2, "{published} → {published2}");
    assert_eq!(fired2, fired + 1);
}

const TRIAGE: &str = r#"
name: triage
on:
  event: ticket
  where: "'urgent' in $EVENT_TEXT"
inputs:
  text: {default: ""}
  from: {default: ""}
nodes:
  - id: tell
    to: reviewer
    prompt: "急 / urgent: $text"
"#;

/// A flow file with `on:` runs by itself for each matching event, with the event's fields as
/// its inputs; `where` filters; a flow with a bad `on:` is refused by `flow validate` at once.
#[tokio::test]
async fn a_flow_with_on_runs_once_for_each_matching_event() {
    let h = hub_with_flows(&[("triage", TRIAGE)]).await;
    let url = h.ws_url("/realtime");
    let mut master = ScriptedTab::connect(&url, hello("boss", "chatgpt", "master"), |_: &str| {
        Reply::Silent
    })
    .await;
    let (reviewer, mut prompts) = listening_tab(&url, "reviewer", "worker").await;
    ok(&mut master, "?<publish ticket minor: typo on the page>!").await;
    ok(&mut master, "?<publish other urgent but another topic>!").await;
    ok(
        &mut master,
        "?<publish ticket urgent: the database is down>!",
    )
    .await;
    assert_eq!(
        next_prompt(&mut prompts).await,
        "急 / urgent: urgent: the database is down"
    );
    ok(&mut master, "?<publish ticket urgent: again>!").await;
    assert_eq!(
        next_prompt(&mut prompts).await,
        "急 / urgent: urgent: again"
    );
    assert_eq!(reviewer.prompts().len(), 2, "{:?}", reviewer.prompts());
    let runs: Vec<_> = h
        .hub()
        .hub
        .store
        .runs_in(&["completed", "running"])
        .unwrap()
        .into_iter()
        .filter(|r| r.flow == "triage")
        .collect();
    assert_eq!(runs.len(), 2, "one run per matching event");
}

const AGAIN: &str = r#"
name: again
on: {event: flow_complete, where: "$EVENT_FLOW == 'again'"}
nodes:
  - id: one
    to: w1
    prompt: "once more"
"#;

/// A flow started by its own completion runs once more, not for ever: the run it starts
/// carries the flow in its cause.
#[tokio::test]
async fn a_flow_on_its_own_completion_runs_once_more_not_for_ever() {
    let h = hub_with_flows(&[("again", AGAIN)]).await;
    let url = h.ws_url("/realtime");
    let mut master = ScriptedTab::connect(&url, hello("boss", "chatgpt", "master"), |_: &str| {
        Reply::Silent
    })
    .await;
    let (w1, _) = listening_tab(&url, "w1", "worker").await;
    let (_log, mut logged) = listening_tab(&url, "log", "worker").await;
    ok(
        &mut master,
        "?<subscribe flow_complete do to log: done $EVENT_RUN>!",
    )
    .await;
    let (state, _) = run_flow(&mut master, "?<manager run again>!").await;
    assert_eq!(state, "completed");
    let first = next_prompt(&mut logged).await;
    let second = next_prompt(&mut logged).await;
    assert_ne!(first, second, "two runs completed");
    // A last event through the same bus: every event before it was heard.
    ok(&mut master, "?<subscribe end do to log: E>!").await;
    ok(&mut master, "?<publish end>!").await;
    assert_eq!(next_prompt(&mut logged).await, "E");
    assert_eq!(w1.prompts(), vec!["once more", "once more"]);
}

#[tokio::test]
async fn a_bad_on_is_reported_where_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.yaml");
    std::fs::write(
        &path,
        "name: bad\non:\n  event: \"two words\"\n  where: \"$EVENT_TEXT ==\"\nnodes:\n  - id: a\n    prompt: hi\n",
    )
    .unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let errs = aicard::flows::load_str("bad.yaml", &text).unwrap_err();
    let all: Vec<String> = errs.iter().map(|d| d.to_string()).collect();
    assert_eq!(all.len(), 2, "{all:?}");
    assert!(
        all[0].contains("bad.yaml:3:") && all[0].contains("on.event"),
        "{all:?}"
    );
    assert!(
        all[1].contains("bad.yaml:4:") && all[1].contains("on.where"),
        "{all:?}"
    );
}
