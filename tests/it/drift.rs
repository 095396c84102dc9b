//! A changed site never gives a silent empty answer (docs/reliability.md, issue 28), on a real hub over real
//! sockets: an empty `turn_end` for a task fails it as a parser miss naming the adapter (not a
//! success, not held against the tab); `turn_end.source` is counted per tab and per site, and a
//! site answered mostly from the page is flagged in `?<tabs>!`, `/metrics` and `/v1/models`.

use crate::common;

use std::time::Duration;

use aicard::hub::tasks::{TaskError, TaskRequest};
use common::*;
use serde_json::json;

async fn ask_in_background(
    h: &TestHub,
    client_id: &str,
    prompt: &str,
) -> tokio::task::JoinHandle<Result<String, TaskError>> {
    let client = h.hub().registry.get(client_id).unwrap();
    let tasks = h.hub().tasks.clone();
    let prompt = prompt.to_string();
    tokio::spawn(async move {
        tasks
            .ask(
                &client,
                TaskRequest::new(prompt.as_str(), Duration::from_secs(10)),
            )
            .await
    })
}

#[tokio::test]
async fn an_empty_turn_end_for_a_task_is_a_parser_miss_not_a_success() {
    let h = TestHub::start().await;
    let (mut ws, welcome) = h.tab("deepseek", Some("ds")).await;
    let id = welcome["client_id"].as_str().unwrap().to_string();
    let ask = ask_in_background(&h, &id, "first").await;
    let task = recv_type(&mut ws, "task").await;
    // An older tab whose adapter read nothing: the turn ends with no text.
    send(
        &mut ws,
        &json!({"type":"turn_end","turn_id":"t1","text":"","task_id":task["task_id"]}),
    )
    .await;
    let err = tokio::time::timeout(WAIT, ask)
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("parser_miss: deepseek adapter found no answer"),
        "{msg}"
    );
    let client = h.hub().registry.get(&id).unwrap();
    assert_eq!(
        aicard::pick::health(&h.hub().asks.pick, &client).outcomes,
        0,
        "an outdated adapter is not held against the tab"
    );
    assert_eq!(h.hub().paths.tab(&id).empty, 1);

    // The next task is answered from the page: a success, counted as `dom`.
    let ask = ask_in_background(&h, &id, "second").await;
    let task = recv_type(&mut ws, "task").await;
    send(
        &mut ws,
        &json!({"type":"turn_end","turn_id":"t2","text":"1. one\n2. two","task_id":task["task_id"],"source":"dom"}),
    )
    .await;
    let answer = tokio::time::timeout(WAIT, ask).await.unwrap().unwrap();
    assert_eq!(answer.unwrap(), "1. one\n2. two");
    let counts = h.hub().paths.tab(&id);
    assert_eq!((counts.network, counts.dom, counts.empty), (0, 1, 1));
}

#[tokio::test]
async fn a_tab_reported_parser_miss_counts_as_empty_and_the_site_is_flagged_everywhere() {
    let h = TestHub::start().await;
    let (mut ws, welcome) = h.tab("deepseek", Some("ds-flag")).await;
    let id = welcome["client_id"].as_str().unwrap().to_string();
    // One answer by the network, then four from the page and one parser miss.
    for (n, how) in ["network", "dom", "dom", "dom", "dom", "miss"]
        .iter()
        .enumerate()
    {
        let ask = ask_in_background(&h, &id, &format!("q{n}")).await;
        let task = recv_type(&mut ws, "task").await;
        let frame = if *how == "miss" {
            json!({"type":"task_update","task_id":task["task_id"],"state":"failed",
                "error":"parser_miss: deepseek adapter found no answer (the page showed no reply either)",
                "trouble":"parser_miss"})
        } else {
            json!({"type":"turn_end","turn_id":format!("t{n}"),"text":format!("answer {n}"),
                "task_id":task["task_id"],"source":how})
        };
        send(&mut ws, &frame).await;
        let result = tokio::time::timeout(WAIT, ask).await.unwrap().unwrap();
        assert_eq!(result.is_ok(), *how != "miss", "{how}: {result:?}");
    }
    let counts = h.hub().paths.site("deepseek");
    assert_eq!((counts.network, counts.dom, counts.empty), (1, 4, 1));
    let flag = h.hub().paths.flag("deepseek").expect("flagged");
    assert!(
        flag.starts_with("deepseek: 4/6 replies via page text, 1/6 empty — adapter outdated"),
        "{flag}"
    );

    let report = aicard::pick::tabs_report(&h.hub().asks.pick);
    assert!(report.contains("1/4/1"), "{report}");
    assert!(report.contains(&format!("⚠ {flag}")), "{report}");

    let http = aicard::http_client::plain();
    let metrics = http
        .get(h.http_url("/metrics"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(r#"aicard_site_answers_total{site="deepseek",path="dom"} 4"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"aicard_site_adapter_outdated{site="deepseek"} 1"#),
        "{metrics}"
    );
    assert!(metrics.contains(r#"path="empty"} 1"#), "{metrics}");

    let models: serde_json::Value = serde_json::from_str(
        &http
            .get(h.http_url("/v1/models"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    )
    .unwrap();
    let data = models["data"].as_array().unwrap();
    let site = data.iter().find(|m| m["id"] == "site/deepseek").unwrap();
    assert_eq!(site["aicard"]["answers"]["flag"], json!(flag), "{site}");
    assert_eq!(site["aicard"]["answers"]["site"]["dom"], 4, "{site}");
    let tab = data.iter().find(|m| m["id"] == "tab/ds-flag").unwrap();
    assert_eq!(
        tab["aicard"]["health"]["answers"]["tab"],
        json!({"network":1,"dom":4,"empty":1}),
        "{tab}"
    );
}

#[tokio::test]
async fn an_empty_turn_of_the_persons_own_is_counted_and_never_run() {
    let h = TestHub::start().await;
    let (mut ws, welcome) = h.tab("kimi", Some("k")).await;
    let id = welcome["client_id"].as_str().unwrap();
    send(
        &mut ws,
        &json!({"type":"turn_end","turn_id":"mine","text":"  "}),
    )
    .await;
    // A heartbeat after it is answered: the frame was taken, nothing else came back.
    send(&mut ws, &json!({"type":"heartbeat","time":1})).await;
    assert_eq!(recv(&mut ws).await["type"], "heartbeat");
    assert_eq!(h.hub().paths.tab(id).empty, 1);
}
