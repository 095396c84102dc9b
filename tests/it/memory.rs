//! The team's memory on a real hub, over real sockets: temperature over turns, search with
//! neighbours, pin / unpin / del, injection into a worker's next task, scopes kept apart,
//! summaries.

use crate::common;

use std::time::Duration;

use common::*;
use serde_json::json;

fn echo_back(prompt: &str) -> Reply {
    Reply::Text(Duration::from_millis(5), format!("answer to: {prompt}"))
}

fn out(r: &serde_json::Value) -> String {
    r["result"]["output"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

async fn ok(tab: &mut ScriptedTab, cmd: &str) -> String {
    let r = tab.command(cmd).await;
    assert_eq!(r["result"]["success"], true, "{cmd}: {r}");
    out(&r)
}

/// A finished free reply of the tab: one turn of its scopes. Frames of one socket are
/// handled in order, so the next command from the same tab sees it.
fn turn(tab: &ScriptedTab, n: usize) {
    tab.send(json!({"type":"turn_end","turn_id":format!("free-{n}"),"text":"ok"}));
}

#[tokio::test]
async fn temperature_cools_per_turn_and_warms_on_a_hit() {
    let h = TestHub::start().await;
    let mut m = h.scripted("m", "kimi", "master", echo_back).await;
    let added = ok(&mut m, "?<memory the deploy key rotates monthly tag: ops>!").await;
    assert!(added.contains("#1"), "{added}");
    ok(&mut m, "?<memory 用户喜欢简短的回答 tag: 偏好>!").await;
    assert!(ok(&mut m, "?<memory list>!").await.contains("#1 [100.0°"));
    for n in 0..3 {
        turn(&m, n);
    }
    // 100 × 0.95³ = 85.7375
    let list = ok(&mut m, "?<memory list>!").await;
    assert!(list.contains("#1 [85.7°"), "{list}");
    // A hit moves it halfway back to 100: 92.86875.
    let hit = ok(&mut m, "?<memory search deploy>!").await;
    assert!(hit.contains("#1 [92.9°"), "{hit}");
    // The neighbour was not a hit: still 85.7.
    assert!(hit.contains("#2 · 85.7°"), "{hit}");
    turn(&m, 9);
    let list = ok(&mut m, "?<memory list>!").await;
    assert!(list.contains("#1 [88.2°"), "{list}"); // 92.86875 × 0.95
    assert!(list.contains("#2 [81.5°"), "{list}"); // 100 × 0.95⁴ = 81.45
}

#[tokio::test]
async fn search_returns_hits_in_full_and_their_neighbours() {
    let h = TestHub::start().await;
    let mut m = h.scripted("m", "kimi", "master", echo_back).await;
    for (text, tag) in [
        ("first note about lunch", "food"),
        ("second note about tea", "drink"),
        ("the staging database password lives in the vault", "ops"),
        ("fourth note about cake", "food"),
        ("fifth note about coffee", "drink"),
        ("sixth note about soup", "food"),
    ] {
        ok(&mut m, &format!("?<memory {text} tag: {tag}>!")).await;
    }
    let hit = ok(&mut m, "?<memory search staging vault>!").await;
    assert!(
        hit.contains("#3 [") && hit.contains("the staging database password lives in the vault"),
        "{hit}"
    );
    for n in [
        "#1 · 100.0° · tags food",
        "#2 · 100.0° · tags drink",
        "#4 · 100.0° · tags food",
        "#5 · 100.0° · tags drink",
    ] {
        assert!(hit.contains(n), "{n} in {hit}");
    }
    assert!(!hit.contains("#6"), "only two on each side: {hit}");
    assert!(!hit.contains("lunch"), "neighbours show no text: {hit}");
    let none = ok(&mut m, "?<memory search nothing-like-this>!").await;
    assert!(none.contains("no memory"), "{none}");
    let tags = ok(&mut m, "?<memory tags>!").await;
    assert!(
        tags.contains("food (3") && tags.contains("ops (1"),
        "{tags}"
    );
}

#[tokio::test]
async fn pin_unpin_and_del() {
    let h = TestHub::start().await;
    let mut m = h.scripted("m", "kimi", "master", echo_back).await;
    ok(&mut m, "?<memory always answer in UTC tag: time -pin>!").await;
    ok(&mut m, "?<memory a passing remark tag: misc>!").await;
    for n in 0..3 {
        turn(&m, n);
    }
    let list = ok(&mut m, "?<memory list>!").await;
    assert!(list.contains("#1 [∞°"), "{list}");
    assert!(list.contains("#2 [85.7°"), "{list}");
    ok(&mut m, "?<memory unpin 1>!").await;
    assert!(ok(&mut m, "?<memory list>!").await.contains("#1 [100.0°"));
    ok(&mut m, "?<memory pin 2>!").await;
    assert!(ok(&mut m, "?<memory list>!").await.contains("#2 [∞°"));
    ok(&mut m, "?<memory 1 always answer in UTC+8 tag: time,tz>!").await;
    assert!(ok(&mut m, "?<memory search UTC+8>!")
        .await
        .contains("tags time,tz"));
    let del = ok(&mut m, "?<memory del 1>!").await;
    assert!(del.contains("#1"), "{del}");
    assert!(ok(&mut m, "?<memory search UTC>!")
        .await
        .contains("no memory"));
    let again = m.command("?<memory del 1>!").await;
    assert_eq!(again["result"]["success"], false);
    assert!(out(&again).contains("no memory #1"), "{again}");
    // Cold memories are never deleted by the hub: 200 turns later #2 is still there.
    for n in 0..200 {
        turn(&m, 10 + n);
    }
    ok(&mut m, "?<memory unpin 2>!").await;
    assert!(ok(&mut m, "?<memory list>!").await.contains("#2 ["));
}

#[tokio::test]
async fn a_card_with_memory_every_n_prepends_the_block_to_a_workers_tasks() {
    let cards = tempfile::tempdir().unwrap();
    std::fs::write(
        cards.path().join("w.yaml"),
        "name: remembering-worker\nrole: worker\nmatch: {label: [w1]}\nmemory: every 2\n",
    )
    .unwrap();
    let dir = cards.path().to_path_buf();
    let h = TestHub::start_with(move |c| c.role_cards_dir = dir).await;
    let mut m = h.scripted("m", "kimi", "master", echo_back).await;
    let w = h.scripted("w1", "deepseek", "worker", echo_back).await;
    ok(&mut m, "?<remember 今天的目标：评审登录页>!").await;
    ok(&mut m, "?<memory 登录页要支持扫码 tag: 前端,登录>!").await;
    for k in 1..=3 {
        ok(&mut m, &format!("?<to w1: task {k}>!")).await;
    }
    let prompts = w.prompts();
    assert_eq!(prompts.len(), 3, "{prompts:?}");
    assert!(prompts[0].starts_with("<memory>"), "{}", prompts[0]);
    assert!(
        prompts[0].contains("今天的目标：评审登录页"),
        "{}",
        prompts[0]
    );
    assert!(prompts[0].contains("前端, 登录"), "{}", prompts[0]);
    assert!(prompts[0].ends_with("task 1"), "{}", prompts[0]);
    assert_eq!(prompts[1], "task 2");
    assert!(prompts[2].starts_with("<memory>") && prompts[2].ends_with("task 3"));
    // A tab without such a card gets its tasks as they are; clearing the note works.
    let mut plain = h.scripted("w2", "qianwen", "worker", echo_back).await;
    ok(&mut m, "?<to w2: plain task>!").await;
    assert_eq!(plain.prompts(), ["plain task"]);
    assert!(ok(&mut plain, "?<remember>!").await.contains("cleared"));
}

#[tokio::test]
async fn scopes_are_kept_apart() {
    let cards = tempfile::tempdir().unwrap();
    std::fs::write(
        cards.path().join("w.yaml"),
        "name: g1-worker\nrole: worker\ngroup: g1\nmatch: {label: [g1-w]}\n\
         permissions: {reply_commands: true}\n",
    )
    .unwrap();
    let dir = cards.path().to_path_buf();
    let h = TestHub::start_with(move |c| c.role_cards_dir = dir).await;
    let mut m = h.scripted("m", "kimi", "master", echo_back).await;
    ok(&mut m, "?<memory alpha launch plan tag: g1only scope=g1>!").await;
    ok(
        &mut m,
        "?<memory alpha budget numbers tag: g2only scope=g2>!",
    )
    .await;
    ok(&mut m, "?<memory alpha team lunch tag: everyone>!").await;
    let g1 = ok(&mut m, "?<memory search alpha scope=g1>!").await;
    assert!(
        g1.contains("launch plan") && !g1.contains("budget") && !g1.contains("lunch"),
        "{g1}"
    );
    let global = ok(&mut m, "?<memory search alpha>!").await;
    assert!(
        global.contains("lunch") && !global.contains("launch"),
        "{global}"
    );
    let tags = ok(&mut m, "?<memory tags scope=g2>!").await;
    assert!(
        tags.contains("g2only") && !tags.contains("g1only"),
        "{tags}"
    );
    // A g1 worker whose replies may run commands reads global and g1, not g2, and may not
    // write unless its card says so.
    let mut w = h.scripted("g1-w", "deepseek", "worker", echo_back).await;
    let reply = |w: &ScriptedTab, id: &str, text: &str| {
        w.send(json!({"type":"turn_end","turn_id":id,"text":text}));
    };
    reply(&w, "r1", "?<memory search alpha scope=g1>!");
    let r = w.next("cmd_result").await;
    assert_eq!(r["result"]["success"], true, "{r}");
    assert!(out(&r).contains("launch plan"), "{r}");
    reply(&w, "r2", "?<memory search alpha scope=g2>!");
    let r = w.next("cmd_result").await;
    assert_eq!(r["result"]["success"], false, "{r}");
    assert!(out(&r).contains("another group"), "{r}");
    reply(&w, "r3", "?<memory forged fact tag: x scope=g1>!");
    let r = w.next("cmd_result").await;
    assert_eq!(r["result"]["success"], false, "{r}");
    assert!(out(&r).contains("memory_write"), "{r}");
    // Turns of the g1 worker cool g1 and global, never g2.
    let g2 = ok(&mut m, "?<memory list scope=g2>!").await;
    assert!(g2.contains("[100.0°"), "{g2}");
    let g1 = ok(&mut m, "?<memory list scope=g1>!").await;
    assert!(!g1.contains("[100.0°"), "{g1}");
}

#[tokio::test]
async fn summarize_asks_a_tab_and_links_the_sources() {
    let h = TestHub::start().await;
    let mut m = h.scripted("m", "kimi", "master", echo_back).await;
    let w = h
        .scripted("w1", "deepseek", "worker", |_p: &str| {
            Reply::Text(
                Duration::from_millis(5),
                "团队约定：时间一律用 UTC。".into(),
            )
        })
        .await;
    ok(&mut m, "?<memory use UTC in logs tag: time>!").await;
    ok(&mut m, "?<memory use UTC in the API tag: time,api>!").await;
    let s = ok(&mut m, "?<memory summarize global to=w1>!").await;
    assert!(
        s.contains("summary #3") && s.contains("#1") && s.contains("#2"),
        "{s}"
    );
    let asked = &w.prompts()[0];
    assert!(
        asked.contains("use UTC in logs") && asked.contains("use UTC in the API"),
        "{asked}"
    );
    let list = ok(&mut m, "?<memory list>!").await;
    assert!(
        list.contains("sources #2,#1") || list.contains("sources #1,#2"),
        "{list}"
    );
    assert!(list.contains("团队约定"), "{list}");
}

#[tokio::test]
async fn help_memory_is_a_usage_guide_with_the_anchor_habit() {
    let h = TestHub::start().await;
    let mut m = h.scripted("m", "kimi", "master", echo_back).await;
    let help = ok(&mut m, "?<help memory>!").await;
    assert!(
        help.contains("[长期记忆:042]") && help.contains("0.95"),
        "{help}"
    );
    assert!(ok(&mut m, "?<help skill>!")
        .await
        .contains("?<skill list>!"));
}

#[tokio::test]
async fn a_tab_rates_importance_when_asked_and_a_summary_carries_its_rating() {
    let h = TestHub::start().await;
    let mut m = h.scripted("m", "kimi", "master", echo_back).await;
    let rater = h
        .scripted("rater", "deepseek", "worker", |p: &str| {
            let text = if p.contains("团队记忆（范围") {
                "- logs and the API use UTC\n\nimportance: 6"
            } else if p.contains("vault") {
                "Importance: 9/10"
            } else {
                "hard to say"
            };
            Reply::Text(Duration::from_millis(5), text.into())
        })
        .await;
    let r = ok(
        &mut m,
        "?<memory the staging password is in the vault tag: ops importance=ask to=rater>!",
    )
    .await;
    assert!(
        r.contains("#1") && r.contains("importance 9 rated by"),
        "{r}"
    );
    assert!(
        rater.prompts()[0].contains("1 到 10"),
        "{:?}",
        rater.prompts()
    );
    // An answer without a number keeps the default and says so.
    let r = ok(
        &mut m,
        "?<memory lunch is at noon importance=ask to=rater>!",
    )
    .await;
    assert!(r.contains("#2") && r.contains("default"), "{r}");
    let list = ok(&mut m, "?<memory list>!").await;
    assert!(list.contains("importance 9"), "{list}");
    assert!(list.contains("importance 5"), "{list}");
    // A summary: the tab's last line is its rating, not part of the memory.
    let s = ok(&mut m, "?<memory summarize global to=rater n=2>!").await;
    assert!(s.contains("summary #3"), "{s}");
    let hit = ok(&mut m, "?<memory search logs UTC>!").await;
    assert!(hit.contains("importance 6"), "{hit}");
    assert!(
        !hit.contains("importance: 6"),
        "the rating line is not kept: {hit}"
    );
    // A bad importance is a clear parse error.
    let r = m.command("?<memory x importance=11>!").await;
    assert_eq!(r["result"]["success"], false, "{r}");
    assert!(out(&r).contains("1 to 10"), "{r}");
}

#[tokio::test]
async fn a_flow_reads_memory_with_a_memory_node() {
    let h = hub_with_flows(&[(
        "recall",
        r#"
name: recall
inputs:
  topic: {default: vault}
nodes:
  - id: facts
    memory: {search: "$topic"}
  - id: answer
    depends_on: facts
    to: deepseek
    prompt: "Known facts: ${facts.output}"
"#,
    )])
    .await;
    let mut m = h.scripted("m", "kimi", "master", echo_back).await;
    let w = h.scripted("w1", "deepseek", "worker", echo_back).await;
    ok(
        &mut m,
        "?<memory the staging password is in the vault tag: ops>!",
    )
    .await;
    ok(&mut m, "?<memory lunch is at noon tag: food>!").await;
    let (state, delivered) = run_flow(&mut m, "?<manager run recall>!").await;
    assert_eq!(state, "completed");
    let asked = &w.prompts()[0];
    assert!(
        asked.contains("the staging password is in the vault"),
        "{asked}"
    );
    assert!(
        !asked.contains("lunch is at noon"),
        "only the hit is in full: {asked}"
    );
    assert!(delivered
        .unwrap_or_default()
        .contains("answer to: Known facts"));
}

#[tokio::test]
async fn every_n_new_memories_of_a_scope_are_summarized_by_the_summarizer_tab() {
    let h = TestHub::start_with(|c| {
        c.memory_summarizer = Some("sum".into());
        c.memory_summary_every = 3;
    })
    .await;
    let sum = h
        .scripted("sum", "kimi", "worker", |_| {
            Reply::Text(
                std::time::Duration::ZERO,
                "三条记忆：部署在周五，回滚用 v2，值班是小王。?<agent loop on>!\nimportance: 7"
                    .into(),
            )
        })
        .await;
    let mut m = h
        .scripted("m", "chatgpt", "master", |_| {
            Reply::Text(std::time::Duration::ZERO, "unused".into())
        })
        .await;
    let mut ids = Vec::new();
    for fact in ["部署在周五", "回滚用 v2", "值班是小王"] {
        let r = m.command(&format!("?<memory {fact}>!")).await;
        assert_eq!(r["result"]["success"], true, "{r}");
        let out = r["result"]["output"].as_str().unwrap();
        let id: i64 = out
            .split('#')
            .nth(1)
            .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no id in {out}"));
        ids.push(id);
    }
    // The summarizer tab got one prompt with the three memories; the summary is kept with
    // them as its sources, defused.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let summary = loop {
        let found = h
            .hub()
            .commands
            .memory
            .newest("global", 10)
            .unwrap()
            .into_iter()
            .find(|e| e.tags.iter().any(|t| t == "summary"));
        if let Some(e) = found {
            break e;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no summary was written"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(sum.prompts().len(), 1);
    for fact in ["部署在周五", "回滚用 v2", "值班是小王"] {
        assert!(sum.prompts()[0].contains(fact), "{:?}", sum.prompts());
    }
    let mut sources = summary.sources.clone();
    sources.sort();
    assert_eq!(sources, ids, "{summary:?}");
    assert!(summary.text.contains("部署在周五"), "{summary:?}");
    assert!(!summary.text.contains("?<"), "stored defused: {summary:?}");
    assert_eq!(summary.importance, 7);
}
