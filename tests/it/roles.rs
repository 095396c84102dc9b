//! Roles on the real hub: role cards assign roles and groups; the foreman cycle (split →
//! group fan-out → follow-up → synthesis); a lost worker replaced within its group; and the
//! permission refusals.

use crate::common;

use std::time::Duration;

use common::*;
use serde_json::json;

const CARDS: &[(&str, &str)] = &[
    (
        "master.yaml",
        "name: master\nrole: master\nmatch: {label: [boss]}\n",
    ),
    (
        "foreman-1.yaml",
        "name: foreman-1\nrole: foreman\ngroup: g1\nmatch: {label: [fm1]}\n",
    ),
    (
        "foreman-2.yaml",
        "name: foreman-2\nrole: foreman\ngroup: g2\nmatch: {label: [fm2]}\n",
    ),
    (
        "g1.yaml",
        "name: g1\nrole: worker\ngroup: g1\nmatch: {label: ['g1-*']}\n",
    ),
    (
        "g2.yaml",
        "name: g2\nrole: worker\ngroup: g2\nmatch: {label: ['g2-*']}\n",
    ),
];

const TREE: &str = r#"
name: tree
nodes:
  - id: research
    to: role:foreman
    for_each: {items: [alpha, beta], as: half}
    prompt: "research {{ half }}"
    aggregate: list
  - id: out
    needs: research
    to: master
    prompt: "${research.output}"
"#;

async fn hub_with_cards() -> TestHub {
    let h = TestHub::start_with(|c| {
        c.role_cards_dir = c.data_dir.join("cards");
        c.flows_dir = c.data_dir.join("flows");
        std::fs::create_dir_all(&c.role_cards_dir).unwrap();
        for (f, text) in CARDS {
            std::fs::write(c.role_cards_dir.join(f), text).unwrap();
        }
        std::fs::create_dir_all(&c.flows_dir).unwrap();
        std::fs::write(c.flows_dir.join("tree.yaml"), TREE).unwrap();
    })
    .await;
    h
}

/// A foreman model: splits among the workers its prompt names, then synthesises.
fn foreman(name: &'static str, extra: &'static str) -> impl Fn(&str) -> Reply + Send + Sync {
    move |p: &str| {
        if let Some(rest) = p.split("answered:").nth(1) {
            let answers = rest.split("请综合").next().unwrap_or("").replace('\n', " ");
            return Reply::Text(
                Duration::from_millis(5),
                format!("SYNTH[{name}]: {answers}"),
            );
        }
        let workers: Vec<&str> = match p.split("Your workers: ").nth(1) {
            Some(rest) => rest.split('.').next().unwrap().split(", ").collect(),
            None => vec!["g1-a"],
        };
        let jobs: Vec<String> = workers
            .iter()
            .map(|w| format!("{w}: part for {w}"))
            .collect();
        Reply::Text(
            Duration::from_millis(5),
            format!("分派如下 ?<parallel to=[{}]>! {extra}", jobs.join(", ")),
        )
    }
}

fn worker(label: &'static str) -> impl Fn(&str) -> Reply + Send + Sync {
    move |_p: &str| Reply::Text(Duration::from_millis(5), format!("answer from {label}"))
}

#[tokio::test]
async fn role_cards_assign_roles_and_groups() {
    let h = hub_with_cards().await;
    let url = h.ws_url("/realtime");
    // The card wins over the role asked for in hello.
    let mut fm = ScriptedTab::connect(&url, hello("fm1", "deepseek", "worker"), worker("x")).await;
    let rec = h.hub().registry.get(&fm.client_id).unwrap().info();
    assert_eq!(rec.role, aicard::protocol::Role::Foreman);
    assert_eq!(rec.group.as_deref(), Some("g1"));
    // A card forbids changing the role by command.
    let r = fm.command("?<role master>!").await;
    assert_eq!(r["result"]["success"], false, "{r}");
}

#[tokio::test]
async fn two_foremen_each_synthesise_exactly_their_own_workers() {
    let h = hub_with_cards().await;
    let url = h.ws_url("/realtime");
    let mut master =
        ScriptedTab::connect(&url, hello("boss", "chatgpt", "worker"), worker("boss")).await;
    let fm1 =
        ScriptedTab::connect(&url, hello("fm1", "deepseek", "worker"), foreman("fm1", "")).await;
    let fm2 = ScriptedTab::connect(&url, hello("fm2", "kimi", "worker"), foreman("fm2", "")).await;
    let mut workers = Vec::new();
    for l in ["g1-a", "g1-b", "g1-c", "g2-a", "g2-b", "g2-c"] {
        workers.push(ScriptedTab::connect(&url, hello(l, "sim", "worker"), worker(l)).await);
    }
    master.send(json!({"type":"user_input","text":"?<manager run tree>!"}));
    let delivered = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let v = master.frames.recv().await.unwrap();
            if v["type"] == "deliver" {
                return v["text"].as_str().unwrap().to_string();
            }
            if v["type"] == "cmd_result" && v["result"]["success"] == false {
                panic!("{v}");
            }
        }
    })
    .await
    .expect("delivered");
    let list: Vec<String> = serde_json::from_str(&delivered).expect("list of two syntheses");
    assert_eq!(list.len(), 2);
    for synth in &list {
        let (own, other) = if synth.starts_with("SYNTH[fm1]") {
            ("g1", "g2")
        } else {
            ("g2", "g1")
        };
        for w in ["a", "b", "c"] {
            assert!(synth.contains(&format!("answer from {own}-{w}")), "{synth}");
        }
        assert!(
            !synth.contains(other),
            "a foreman got another group's answers: {synth}"
        );
    }
    // Each worker answered exactly one subtask; both foremen worked.
    for w in &workers {
        assert_eq!(w.prompts().len(), 1);
    }
    assert_eq!(fm1.prompts().len(), 2, "split + follow-up");
    assert_eq!(fm2.prompts().len(), 2, "split + follow-up");
}

#[tokio::test]
async fn a_foreman_cannot_dispatch_outside_its_group_or_run_flows() {
    let h = hub_with_cards().await;
    let url = h.ws_url("/realtime");
    let mut master =
        ScriptedTab::connect(&url, hello("boss", "chatgpt", "worker"), worker("boss")).await;
    // fm1's split also tries to reach group g2 and to start a flow.
    let _fm1 = ScriptedTab::connect(
        &url,
        hello("fm1", "deepseek", "worker"),
        foreman("fm1", "?<to g2-a: leak>! ?<manager run tree>!"),
    )
    .await;
    let g1 = ScriptedTab::connect(&url, hello("g1-a", "sim", "worker"), worker("g1-a")).await;
    let g2 = ScriptedTab::connect(&url, hello("g2-a", "sim", "worker"), worker("g2-a")).await;
    let r = master.command("?<to fm1: research gamma>!").await;
    // `to FOREMAN` from a chat runs the foreman cycle, as a flow's foreman stage does: its
    // split reaches its own workers (never another group's), and the caller gets the merged
    // answer, never the foreman's raw split command.
    let out = r["result"]["output"].as_str().unwrap();
    assert_eq!(r["result"]["success"], true, "{r}");
    assert!(out.starts_with("SYNTH[fm1]"), "{r}");
    assert!(out.contains("answer from g1-a"), "{r}");
    assert!(!out.contains("?<parallel"), "{r}");
    assert!(
        g2.prompts().is_empty(),
        "a foreman reached outside its group"
    );
    assert_eq!(g1.prompts().len(), 1);

    // Through a flow node the foreman cycle runs its commands — within its group only.
    std::fs::write(
        h.hub().config.flows_dir.join("one.yaml"),
        "name: one\nnodes:\n  - id: r\n    to: fm1\n    prompt: research\n  - id: o\n    needs: r\n    to: master\n    prompt: \"${r.output}\"\n",
    )
    .unwrap();
    master.send(json!({"type":"user_input","text":"?<manager run one>!"}));
    let delivered = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let v = master.frames.recv().await.unwrap();
            if v["type"] == "deliver" {
                return v["text"].as_str().unwrap().to_string();
            }
        }
    })
    .await
    .expect("delivered");
    assert!(delivered.contains("answer from g1-a"), "{delivered}");
    assert!(
        g2.prompts().is_empty(),
        "a foreman reached outside its group"
    );
    assert!(
        delivered.contains("failed"),
        "refusals are reported: {delivered}"
    );
    assert_eq!(
        h.hub().runner.list().len(),
        0,
        "a foreman's reply started a flow"
    );
}

#[tokio::test]
async fn a_lost_worker_is_replaced_within_its_group() {
    let h = TestHub::start_with(|c| {
        c.role_cards_dir = c.data_dir.join("cards");
        std::fs::create_dir_all(&c.role_cards_dir).unwrap();
        for (f, text) in CARDS {
            std::fs::write(c.role_cards_dir.join(f), text).unwrap();
        }
    })
    .await;
    let url = h.ws_url("/realtime");
    let mut events = h.hub().events.subscribe();
    let mut master =
        ScriptedTab::connect(&url, hello("boss", "chatgpt", "worker"), worker("boss")).await;
    let fm =
        ScriptedTab::connect(&url, hello("fm1", "deepseek", "worker"), foreman("fm1", "")).await;
    let dead = ScriptedTab::connect(&url, hello("g1-dead", "sim", "worker"), |_: &str| {
        Reply::Silent
    })
    .await;
    let dead_id = dead.client_id.clone();
    let alive = ScriptedTab::connect(&url, hello("g1-ok", "sim", "worker"), worker("g1-ok")).await;
    let _other = ScriptedTab::connect(&url, hello("g2-x", "sim", "worker"), worker("g2-x")).await;
    let fm_client = h.hub().registry.get(&fm.client_id).unwrap();
    let hub = h.hub().clone();
    let cycle = tokio::spawn(async move {
        let mut req = aicard::hub::tasks::TaskRequest::new("build it", Duration::from_secs(20));
        req.task_id = Some("run/n/0/1".into());
        aicard::foreman::cycle(&hub.control, &fm_client, req).await
    });
    // Kill the silent worker once its subtask reached it.
    tokio::time::timeout(WAIT, async {
        while dead.prompts().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("subtask reached the worker");
    dead.kill();
    wait_event(&mut events, |e| {
        *e == aicard::hub::HubEvent::Lost(dead_id.clone())
    })
    .await;
    let result = tokio::time::timeout(Duration::from_secs(20), cycle)
        .await
        .expect("cycle finished")
        .unwrap()
        .expect("cycle ok");
    assert!(result.contains("answer from g1-ok"), "{result}");
    assert!(!result.contains("g2-x"), "{result}");
    assert_eq!(
        alive.prompts().len(),
        2,
        "the replacement took the lost subtask too"
    );
    let _ = master.command("?<help>!").await;
}

#[tokio::test]
async fn a_cards_system_prompt_goes_with_the_first_task_of_a_conversation_and_role_test_runs_its_check(
) {
    let h = TestHub::start_with(|c| {
        c.role_cards_dir = c.data_dir.join("cards");
        std::fs::create_dir_all(&c.role_cards_dir).unwrap();
        std::fs::write(
            c.role_cards_dir.join("reviewer.yaml"),
            "name: reviewer\nrole: worker\nmatch: {label: [rev]}\nsystem_prompt: 你是严格的审稿人，只指出问题。\ntest_command: \"?<help set>!\"\n",
        )
        .unwrap();
        std::fs::write(
            c.role_cards_dir.join("boss.yaml"),
            "name: boss\nrole: master\nmatch: {label: [boss]}\n",
        )
        .unwrap();
    })
    .await;
    let url = h.ws_url("/realtime");
    let rev = ScriptedTab::connect(&url, hello("rev", "kimi", "worker"), worker("rev")).await;
    let mut boss =
        ScriptedTab::connect(&url, hello("boss", "chatgpt", "master"), worker("boss")).await;
    let r = boss.command("?<to rev: 看看第一段>!").await;
    assert_eq!(r["result"]["success"], true, "{r}");
    let r = boss.command("?<to rev: 再看第二段>!").await;
    assert_eq!(r["result"]["success"], true, "{r}");
    let prompts = rev.prompts();
    assert_eq!(
        prompts[0], "【角色 / Role】\n你是严格的审稿人，只指出问题。\n\n看看第一段",
        "the card's prompt goes with the first task"
    );
    assert_eq!(prompts[1], "再看第二段", "once per conversation");

    // `role test CARD` runs the card's test_command as the one who asked; a card without
    // one, or no such card, says so.
    let r = boss.command("?<role test reviewer>!").await;
    let out = r["result"]["output"].as_str().unwrap();
    assert_eq!(r["result"]["success"], true, "{r}");
    assert!(
        out.contains("card `reviewer` test passed") && out.contains("help set"),
        "{out}"
    );
    let r = boss.command("?<role test boss>!").await;
    assert!(
        r["result"]["output"]
            .as_str()
            .unwrap()
            .contains("no test_command"),
        "{r}"
    );
    let r = boss.command("?<role test nosuch>!").await;
    assert!(
        r["result"]["output"]
            .as_str()
            .unwrap()
            .contains("no role card `nosuch`"),
        "{r}"
    );
}
