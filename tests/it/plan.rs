//! The AI Manager over real sockets (docs/flows.md): `manager plan` with scripted planner tabs —
//! a plan that converges on the second repair, one that never converges, approve / modify /
//! reject / save, the plan cache, and proof that no task reaches a tab before approval; and
//! the decision engine behind `auto` targets, `manager why` and `?<tabs>!`.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use serde_json::{json, Value};

const GOOD: &str = "name: essay-review
inputs:
  doc: {default: \"an essay\"}
nodes:
  - id: review
    to: auto
    prompt: \"Review: $doc\"
  - id: report
    depends_on: review
    to: master
    prompt: \"${review.output}\"
";

fn fenced(yaml: &str) -> String {
    format!("Here is the flow.\n```yaml\n{yaml}```\n")
}

/// A planner tab answering each prompt with `answer(prompt)` (fenced for it).
async fn planner(
    h: &TestHub,
    answer: impl Fn(&str) -> String + Send + Sync + 'static,
) -> ScriptedTab {
    h.scripted("planner", "kimi", "worker", move |p| {
        Reply::Text(Duration::from_millis(1), fenced(&answer(p)))
    })
    .await
}

async fn hub(repairs: usize, flows: &std::path::Path) -> TestHub {
    let flows = flows.to_path_buf();
    TestHub::start_with(move |c| {
        c.planner = Some("planner".into());
        c.plan_repairs = repairs;
        c.flows_dir = flows;
    })
    .await
}

/// The draft id in a plan answer.
fn draft_id(output: &str) -> String {
    let at = output.find("plan-").expect("a draft id");
    output[at..at + 13].to_string()
}

fn output(v: &Value) -> String {
    v["result"]["output"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

async fn body(r: reqwest::Response) -> Value {
    serde_json::from_slice(&r.bytes().await.unwrap()).unwrap()
}

/// Runs in the store, any state.
fn runs(h: &TestHub) -> usize {
    h.hub()
        .store
        .runs_in(&["running", "paused", "completed", "failed", "stopped"])
        .unwrap()
        .len()
}

#[tokio::test]
async fn a_plan_that_converges_on_the_second_repair_runs_only_once_approved() {
    let flows = tempfile::tempdir().unwrap();
    let h = hub(3, flows.path()).await;
    let two_bad = GOOD
        .replace("to: auto", "to: gpt9")
        .replace("depends_on: review", "depends_on: reviw");
    let one_bad = GOOD.replace("depends_on: review", "depends_on: reviw");
    let planner = planner(&h, move |p| {
        if p.contains("REPAIR (round 2 of 3)") {
            GOOD.to_string()
        } else if p.contains("REPAIR (round 1 of 3)") {
            one_bad.clone()
        } else {
            two_bad.clone()
        }
    })
    .await;
    let worker = h
        .scripted("w1", "deepseek", "worker", |p| {
            Reply::Text(Duration::from_millis(1), format!("reviewed: {p}"))
        })
        .await;
    let mut master = h
        .scripted("boss", "chatgpt", "master", |_| Reply::Silent)
        .await;

    let r = master
        .command("?<manager plan review my essay and report to me>!")
        .await;
    assert_eq!(r["result"]["success"], true, "{r}");
    let out = output(&r);
    assert!(out.contains("repairs: 2"), "{out}");
    assert!(out.contains("2 nodes"), "{out}");
    assert!(out.contains("targets: auto, master"), "{out}");
    assert!(out.contains("?<manager approve plan-"), "{out}");
    let id = draft_id(&out);

    // The planner got the plan prompt and two repairs, each with located context.
    let prompts = planner.prompts();
    assert_eq!(prompts.len(), 3, "{prompts:#?}");
    assert!(prompts[0].contains("## Flow format (from the JSON Schema)"));
    assert!(prompts[0].contains("label `w1`"), "{}", prompts[0]);
    assert!(prompts[0].contains("review my essay and report to me"));
    assert!(prompts[1].contains("E_TARGET_UNKNOWN"), "{}", prompts[1]);
    assert!(prompts[1].contains("online: "), "{}", prompts[1]);
    assert!(prompts[1].contains("> "), "context marker: {}", prompts[1]);
    assert!(prompts[1].contains("reviw"), "{}", prompts[1]);
    assert!(!prompts[2].contains("E_TARGET_UNKNOWN"), "{}", prompts[2]);

    // The barrier: a draft is not a run, and no worker has seen a task.
    assert!(worker.prompts().is_empty());
    assert_eq!(runs(&h), 0);
    let listed = output(&master.command("?<manager list>!").await);
    assert!(listed.contains(&format!("{id} [draft]")), "{listed}");

    let r = master
        .command(&format!("?<manager approve {id} doc=\"my essay\">!"))
        .await;
    assert_eq!(r["result"]["success"], true, "{r}");
    let run_id = output(&r).rsplit(' ').next().unwrap().trim().to_string();
    let done = run_event(&mut master, &["completed", "failed"]).await;
    assert_eq!(done["state"], "completed", "{done}");
    assert_eq!(worker.prompts(), vec!["Review: my essay".to_string()]);
    // The run started after the draft was approved in the store.
    let draft = h.hub().planner.drafts.get(&id).unwrap().unwrap();
    let run = h.hub().store.run(&run_id).unwrap().expect("the run");
    assert_eq!(draft.run_id.as_deref(), Some(run_id.as_str()));
    assert!(run.started_ms >= draft.decided_ms.unwrap());

    // The decision engine's pick is explained.
    let why = output(
        &master
            .command(&format!("?<manager why {run_id} review>!"))
            .await,
    );
    assert!(why.contains("▶ w1"), "{why}");
    assert!(why.contains("score"), "{why}");
    // A draft is approved once.
    let again = master.command(&format!("?<manager approve {id}>!")).await;
    assert_eq!(again["result"]["success"], false);
    assert!(output(&again).contains("already approved"), "{again}");
    // The same goal again: the plan cache offers the approved plan as a fresh draft, which
    // waits for approval like any other; the planner is not asked.
    let cached = output(
        &master
            .command("?<manager plan review my essay and report to me>!")
            .await,
    );
    assert!(cached.contains("from the plan cache"), "{cached}");
    assert!(cached.contains("[draft]"), "{cached}");
    assert_ne!(draft_id(&cached), id);
    assert_eq!(planner.prompts().len(), 3);
    assert_eq!(worker.prompts().len(), 1);
}

#[tokio::test]
async fn a_plan_that_never_converges_stops_at_the_limit_and_runs_nothing() {
    let flows = tempfile::tempdir().unwrap();
    let h = hub(2, flows.path()).await;
    // Fewer errors each round, never none.
    let round = Arc::new(Mutex::new(0usize));
    let planner = planner(&h, move |_| {
        let mut r = round.lock().unwrap();
        let bad: Vec<String> = (0..(3 - (*r).min(2))).map(|i| format!("gpt{i}")).collect();
        *r += 1;
        GOOD.replace("to: auto", &format!("to: [{}]", bad.join(", ")))
    })
    .await;
    let worker = h
        .scripted("w1", "deepseek", "worker", |_| {
            Reply::Text(Duration::from_millis(1), "x".into())
        })
        .await;
    let mut master = h
        .scripted("boss", "chatgpt", "master", |_| Reply::Silent)
        .await;
    let r = master
        .command("?<manager plan do something impossible>!")
        .await;
    assert_eq!(r["result"]["success"], false, "{r}");
    let out = output(&r);
    assert!(
        out.contains("still invalid after 2 repair round(s)"),
        "{out}"
    );
    assert!(out.contains("repair limit reached"), "{out}");
    assert!(out.contains("nothing was run"), "{out}");
    assert!(
        out.contains("E_TARGET_UNKNOWN 未知目标 / no tab online answers to `gpt0`; online: "),
        "{out}"
    );
    assert!(out.contains("w1"), "the online tabs are listed: {out}");
    assert_eq!(planner.prompts().len(), 3, "the plan and two repairs");
    assert!(worker.prompts().is_empty());
    assert_eq!(runs(&h), 0);
    assert!(h.hub().planner.drafts.recent(10).unwrap().is_empty());
}

#[tokio::test]
async fn modify_reject_save_and_the_plan_cache() {
    let flows = tempfile::tempdir().unwrap();
    let h = hub(3, flows.path()).await;
    let planner = planner(&h, |p| {
        if p.contains("use two reviewers") {
            GOOD.replace("to: auto", "to: [w1, w2]")
        } else {
            GOOD.to_string()
        }
    })
    .await;
    let w1 = h
        .scripted("w1", "deepseek", "worker", |_| {
            Reply::Text(Duration::from_millis(1), "a".into())
        })
        .await;
    let w2 = h
        .scripted("w2", "qwen", "worker", |_| {
            Reply::Text(Duration::from_millis(1), "b".into())
        })
        .await;
    let mut master = h
        .scripted("boss", "chatgpt", "master", |_| Reply::Silent)
        .await;

    let first = output(&master.command("?<manager plan review my essay>!").await);
    let id1 = draft_id(&first);
    // The same goal, the same tabs: the cached draft, the planner not asked again.
    let cached = output(&master.command("?<manager plan Review  my ESSAY>!").await);
    assert!(cached.contains("from the plan cache"), "{cached}");
    assert_eq!(draft_id(&cached), id1);
    assert_eq!(planner.prompts().len(), 1);

    let r = master
        .command(&format!("?<manager modify {id1}: use two reviewers>!"))
        .await;
    assert_eq!(r["result"]["success"], true, "{r}");
    let id2 = draft_id(&output(&r));
    assert_ne!(id1, id2);
    assert!(output(&r).contains(&format!("modifies: {id1}")));
    let p = planner.prompts();
    assert!(p[1].contains("## Previous plan"), "{}", p[1]);
    assert!(p[1].contains("use two reviewers"));
    // The earlier draft stays readable, and cannot be approved any more.
    let old = output(&master.command(&format!("?<manager show {id1}>!")).await);
    assert!(
        old.contains("[modified]") && old.contains("to: auto"),
        "{old}"
    );
    let r = master.command(&format!("?<manager approve {id1}>!")).await;
    assert_eq!(r["result"]["success"], false, "{r}");

    // Save writes flows/NAME.yaml with its name, and never over an existing file.
    let r = master
        .command(&format!("?<manager save {id2} as two-reviews>!"))
        .await;
    assert_eq!(r["result"]["success"], true, "{r}");
    let saved = std::fs::read_to_string(flows.path().join("two-reviews.yaml")).unwrap();
    assert!(saved.starts_with("name: two-reviews\n"), "{saved}");
    assert!(aicard::flows::load_file(flows.path().join("two-reviews.yaml")).is_ok());
    let r = master
        .command(&format!("?<manager save {id2} as two-reviews>!"))
        .await;
    assert_eq!(r["result"]["success"], false);
    assert!(output(&r).contains("exists already"), "{r}");

    let r = master.command(&format!("?<manager reject {id2}>!")).await;
    assert_eq!(r["result"]["success"], true, "{r}");
    let r = master.command(&format!("?<manager approve {id2}>!")).await;
    assert!(output(&r).contains("already rejected"), "{r}");
    // Nothing of any draft reached a worker.
    assert!(w1.prompts().is_empty() && w2.prompts().is_empty());
    assert_eq!(runs(&h), 0);
}

#[tokio::test]
async fn the_default_planner_is_the_masters_own_tab() {
    let h = TestHub::start().await;
    let _w = h
        .scripted("w1", "deepseek", "worker", |_| {
            Reply::Text(Duration::from_millis(1), "a".into())
        })
        .await;
    let mut master = h
        .scripted("boss", "chatgpt", "master", |_| {
            Reply::Text(Duration::from_millis(1), fenced(GOOD))
        })
        .await;
    let r = master.command("?<manager plan review my essay>!").await;
    assert_eq!(r["result"]["success"], true, "{r}");
    assert_eq!(master.prompts().len(), 1);
    assert!(master.prompts()[0].contains("## Goal / 目标\nreview my essay"));
}

#[tokio::test]
async fn auto_replaces_a_rate_limited_tab_and_tabs_shows_its_health() {
    let h = TestHub::start().await;
    let w1 = h
        .scripted("w1", "deepseek", "worker", |_| {
            Reply::Trouble("rate limited (HTTP 429)".into(), "rate_limited".into())
        })
        .await;
    let w2 = h
        .scripted("w2", "qwen", "worker", |p| {
            Reply::Text(Duration::from_millis(1), format!("ok: {p}"))
        })
        .await;
    let mut master = h
        .scripted("boss", "chatgpt", "master", |_| Reply::Silent)
        .await;
    // New tabs are explored first, each once: w1 gets one task (the first or the second),
    // is rate limited, and the task is replaced on w2; then w1 cools for 30 s.
    for k in 0..3 {
        let r = master.command(&format!("?<to auto: hello {k}>!")).await;
        assert_eq!(r["result"]["success"], true, "{r}");
        assert_eq!(output(&r), format!("ok: hello {k}"));
    }
    assert_eq!(
        w1.prompts().len(),
        1,
        "w1 got nothing while cooling: {:?}",
        w1.prompts()
    );
    assert_eq!(w2.prompts().len(), 3);
    let tabs = output(&master.command("?<tabs>!").await);
    assert!(tabs.contains("冷却 / cooling 3"), "{tabs}");
    for t in ["w1", "w2", "boss", "deepseek", "worker", "master"] {
        assert!(tabs.contains(t), "{t}: {tabs}");
    }
    assert!(tabs.contains("在线 / online"), "{tabs}");
}

#[tokio::test]
async fn a_captcha_parks_a_tab_until_the_person_acts() {
    let h = TestHub::start().await;
    let w1 = h
        .scripted("w1", "deepseek", "worker", |_| {
            Reply::Trouble("captcha".into(), "captcha".into())
        })
        .await;
    let mut master = h
        .scripted("boss", "chatgpt", "master", |_| Reply::Silent)
        .await;
    let r = master.command("?<to auto: hello>!").await;
    assert_eq!(r["result"]["success"], false, "{r}");
    assert_eq!(w1.prompts().len(), 1);
    let tabs = output(&master.command("?<tabs>!").await);
    assert!(tabs.contains("parked: captcha"), "{tabs}");
    // Parked: no tab is eligible.
    let r = master.command("?<to auto: again>!").await;
    assert_eq!(r["result"]["success"], false, "{r}");
    assert_eq!(w1.prompts().len(), 1);
    // The person types in the tab: it works again.
    w1.send(json!({"type":"user_input","text":"I solved the captcha"}));
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let tabs = output(&master.command("?<tabs>!").await);
        if !tabs.contains("parked") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still parked: {tabs}"
        );
    }
}

#[tokio::test]
async fn the_dashboard_api_lists_drafts_answers_them_and_shows_tab_health() {
    let flows = tempfile::tempdir().unwrap();
    let h = hub(3, flows.path()).await;
    let _planner = planner(&h, |_| GOOD.to_string()).await;
    let worker = h
        .scripted("w1", "deepseek", "worker", |_| {
            Reply::Text(Duration::from_millis(1), "fine".into())
        })
        .await;
    let mut master = h
        .scripted("boss", "chatgpt", "master", |_| Reply::Silent)
        .await;
    let id = draft_id(&output(
        &master.command("?<manager plan check my essay>!").await,
    ));
    let http = aicard::http_client::plain();
    let auth = format!("Bearer {TOKEN}");
    let get = |path: &str| {
        http.get(h.http_url(path))
            .header("authorization", auth.clone())
            .send()
    };
    let list = body(get("/api/plans").await.unwrap()).await;
    assert_eq!(list["plans"][0]["id"], id.as_str(), "{list}");
    assert_eq!(list["plans"][0]["state"], "draft");
    let one = body(get(&format!("/api/plans/{id}")).await.unwrap()).await;
    assert_eq!(one["nodes"], 2, "{one}");
    assert!(one["mermaid"].as_str().unwrap().contains("review"), "{one}");
    assert!(one["yaml"].as_str().unwrap().contains("to: auto"));
    let missing = get("/api/plans/plan-00000000").await.unwrap();
    assert_eq!(missing.status(), 404);

    let r = http
        .post(h.http_url(&format!("/api/plans/{id}/approve")))
        .header("authorization", auth.clone())
        .header("content-type", "application/json")
        .body(json!({"inputs": {"doc": "from the dashboard"}}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let done = run_event(&mut master, &["completed", "failed"]).await;
    assert_eq!(done["state"], "completed", "{done}");
    assert_eq!(
        worker.prompts(),
        vec!["Review: from the dashboard".to_string()]
    );
    let again = http
        .post(h.http_url(&format!("/api/plans/{id}/reject")))
        .header("authorization", auth.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 409, "a decided draft");

    let tabs = body(get("/api/tabs").await.unwrap()).await;
    let w1 = tabs["tabs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["label"] == "w1")
        .cloned()
        .expect("w1 listed");
    assert_eq!(w1["engine"]["outcomes"], 1, "{w1}");
    assert_eq!(w1["engine"]["successes"], 1, "{w1}");
    assert!(w1["engine"]["s_per_1k"].is_number() || w1["engine"]["ttft_s"].is_number());
}

#[tokio::test]
async fn a_flow_item_on_auto_moves_to_another_tab_when_its_tab_is_rate_limited() {
    let flows = tempfile::tempdir().unwrap();
    std::fs::write(
        flows.path().join("ask-auto.yaml"),
        "name: ask-auto\ndefaults: {retry: {max: 2, backoff: 1s}}\nnodes:\n  - id: ask\n    to: auto\n    prompt: hello\n  - id: report\n    depends_on: ask\n    to: master\n    prompt: \"${ask.output}\"\n",
    )
    .unwrap();
    let h = hub(3, flows.path()).await;
    let w1 = h
        .scripted("w1", "deepseek", "worker", |_| {
            Reply::Trouble("rate limited (HTTP 429)".into(), "rate_limited".into())
        })
        .await;
    let mut master = h
        .scripted("boss", "chatgpt", "master", |_| Reply::Silent)
        .await;
    master.send(json!({"type":"user_input","text":"?<manager run ask-auto>!"}));
    // The only worker is rate limited: the item fails and waits for an eligible tab.
    let failed = loop {
        let v = master.next("flow_event").await;
        if v["state"] == "item_failed" {
            break v;
        }
    };
    assert!(
        failed["detail"]["error"].as_str().unwrap().contains("429"),
        "{failed}"
    );
    let w2 = h
        .scripted("w2", "qwen", "worker", |p| {
            Reply::Text(Duration::from_millis(1), format!("ok: {p}"))
        })
        .await;
    let done = run_event(&mut master, &["completed", "failed"]).await;
    assert_eq!(done["state"], "completed", "{done}");
    assert_eq!(w1.prompts().len(), 1);
    assert_eq!(w2.prompts(), vec!["hello".to_string()]);
    let run = done["run_id"].as_str().unwrap().to_string();
    let why = output(&master.command(&format!("?<manager why {run} ask>!")).await);
    assert!(why.contains("▶ w2"), "{why}");
    assert!(why.contains("冷却 / cooling"), "w1 is shown cooling: {why}");
    // The dashboard's node panel gives the same pick and its reason.
    let node = aicard::http_client::plain()
        .get(h.http_url(&format!("/api/runs/{run}/nodes/ask")))
        .header("authorization", format!("Bearer {TOKEN}"))
        .send()
        .await
        .unwrap();
    let node = body(node).await;
    let item = &node["items"][0];
    let reason = item["why"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with("决策引擎 / decision engine: `w2`"),
        "{item}"
    );
    assert!(reason.contains("w1 冷却 / cooling"), "{item}");
    assert!(
        item["why_table"].as_str().unwrap().contains("▶ w2"),
        "{item}"
    );
}

#[tokio::test]
async fn a_role_card_with_planner_true_names_the_planner_tab() {
    let cards = tempfile::tempdir().unwrap();
    std::fs::write(
        cards.path().join("planner.yaml"),
        "name: planner\nrole: worker\nmatch:\n  label: [thinker]\nplanner: true\n",
    )
    .unwrap();
    let dir = cards.path().to_path_buf();
    let h = TestHub::start_with(move |c| c.role_cards_dir = dir).await;
    let thinker = h
        .scripted("thinker", "claude", "worker", |_| {
            Reply::Text(Duration::from_millis(1), fenced(GOOD))
        })
        .await;
    let mut master = h
        .scripted("boss", "chatgpt", "master", |_| {
            Reply::Text(Duration::from_millis(1), "the master does not plan".into())
        })
        .await;
    let r = master.command("?<manager plan review my essay>!").await;
    assert_eq!(r["result"]["success"], true, "{r}");
    assert_eq!(thinker.prompts().len(), 1);
    assert!(master.prompts().is_empty());
    assert!(output(&r).contains("targets: auto, master"), "{r}");
}

#[tokio::test]
async fn an_api_prompt_skips_a_tab_the_engine_cools_down() {
    let h = TestHub::start().await;
    let limited = Arc::new(Mutex::new(true));
    let flag = limited.clone();
    let w1 = h
        .scripted("w1", "deepseek", "worker", move |p| {
            if *flag.lock().unwrap() {
                Reply::Trouble("rate limited (HTTP 429)".into(), "rate_limited".into())
            } else {
                Reply::Text(Duration::from_millis(1), format!("ok: {p}"))
            }
        })
        .await;
    let mut master = h
        .scripted("boss", "chatgpt", "master", |_| Reply::Silent)
        .await;
    let r = master.command("?<to auto: hello>!").await;
    assert_eq!(r["result"]["success"], false, "{r}");
    *limited.lock().unwrap() = false;
    // w1 cools for 30 s: an API prompt for its site waits and gives up (429), untyped.
    let resp = aicard::http_client::plain()
        .post(h.http_url("/v1/chat/completions"))
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("content-type", "application/json")
        .header("x-aicard-queue-timeout", "1")
        .body(
            json!({"model": "site/deepseek", "messages": [{"role": "user", "content": "hi"}]})
                .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 429);
    assert_eq!(w1.prompts().len(), 1, "only the first, rate-limited prompt");
}

#[tokio::test]
async fn a_task_the_hub_times_out_counts_as_a_failure() {
    let h = TestHub::start_with(|c| c.timing.task_timeout = Duration::from_millis(300)).await;
    let _w1 = h
        .scripted("w1", "deepseek", "worker", |_| Reply::Silent)
        .await;
    let mut master = h
        .scripted("boss", "chatgpt", "master", |_| Reply::Silent)
        .await;
    let r = master.command("?<to auto: hello>!").await;
    assert_eq!(r["result"]["success"], false, "{r}");
    let tabs = output(&master.command("?<tabs>!").await);
    let w1 = tabs
        .lines()
        .find(|l| l.trim_start().starts_with("w1"))
        .unwrap();
    assert!(w1.contains(" 0/1 "), "{tabs}");
}

#[tokio::test]
async fn the_dashboard_modifies_a_draft_with_edited_yaml_and_shows_parked_tabs() {
    let flows = tempfile::tempdir().unwrap();
    let h = hub(3, flows.path()).await;
    let _planner = planner(&h, |_| GOOD.to_string()).await;
    let _worker = h
        .scripted("w1", "deepseek", "worker", |_| {
            Reply::Text(Duration::from_millis(1), "fine".into())
        })
        .await;
    let _captcha = h
        .scripted("w2", "doubao", "worker", |_| {
            Reply::Trouble("captcha".into(), "captcha".into())
        })
        .await;
    let mut master = h
        .scripted("boss", "chatgpt", "master", |_| Reply::Silent)
        .await;
    let id = draft_id(&output(
        &master.command("?<manager plan check my essay>!").await,
    ));
    let http = aicard::http_client::plain();
    let auth = format!("Bearer {TOKEN}");
    let modify = |yaml: &str| {
        http.post(h.http_url(&format!("/api/plans/{id}/modify")))
            .header("authorization", auth.clone())
            .header("content-type", "application/json")
            .body(json!({ "yaml": yaml }).to_string())
            .send()
    };
    // A target no tab answers to: refused with located problems, the draft untouched.
    let bad = modify(&GOOD.replace("to: auto", "to: nobody"))
        .await
        .unwrap();
    assert_eq!(bad.status(), 422);
    let bad = body(bad).await;
    assert_eq!(bad["diagnostics"][0]["line"], 6, "{bad}");
    assert!(
        bad["error"].as_str().unwrap().contains("E_TARGET_UNKNOWN"),
        "{bad}"
    );
    assert_eq!(
        h.hub()
            .planner
            .drafts
            .get(&id)
            .unwrap()
            .unwrap()
            .state
            .as_str(),
        "draft"
    );
    // Edited: a new draft (parent: the old one), the old one modified.
    let ok = body(
        modify(&GOOD.replace("Review:", "Review closely:"))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(ok["ok"], true, "{ok}");
    let new = ok["id"].as_str().unwrap();
    let d = h.hub().planner.drafts.get(new).unwrap().unwrap();
    assert_eq!(d.parent.as_deref(), Some(id.as_str()));
    assert!(d.yaml.contains("Review closely:"));
    assert_eq!(d.state.as_str(), "draft");
    assert_eq!(
        h.hub()
            .planner
            .drafts
            .get(&id)
            .unwrap()
            .unwrap()
            .state
            .as_str(),
        "modified"
    );
    assert_eq!(modify(GOOD).await.unwrap().status(), 409, "decided");

    // A captcha parks the tab: /api/tabs says so.
    let r = master.command("?<to w2: hello>!").await;
    assert_eq!(r["result"]["success"], false, "{r}");
    let tabs = body(
        http.get(h.http_url("/api/tabs"))
            .header("authorization", auth.clone())
            .send()
            .await
            .unwrap(),
    )
    .await;
    let status = |label: &str| {
        tabs["tabs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["label"] == label)
            .map(|t| t["status"].clone())
    };
    assert_eq!(status("w2"), Some(json!("parked")), "{tabs}");
    assert_eq!(status("w1"), Some(json!("idle")), "{tabs}");
}
