//! Per-site quotas (docs/commands.md, issue 27): `?<tabs budget SITE N/hour>!` or a role card's
//! `quota:`; the decision engine counts the prompts each site accepts and never picks a tab
//! of a site past its quota; `?<tabs>!` and `/api/tabs` show the use.

use crate::common;

use std::time::Duration;

use common::*;

fn answer(_: &str) -> Reply {
    Reply::Text(Duration::from_millis(1), "ok".into())
}

#[tokio::test]
async fn a_site_past_its_quota_is_not_picked_and_the_use_is_shown() {
    let h = TestHub::start().await;
    let url = h.ws_url("/realtime");
    let mut boss = ScriptedTab::connect(&url, hello("boss", "chatgpt", "master"), |_: &str| {
        Reply::Silent
    })
    .await;
    let k1 = ScriptedTab::connect(&url, hello("k1", "kimi", "worker"), answer).await;
    let k2 = ScriptedTab::connect(&url, hello("k2", "kimi", "worker"), answer).await;
    let set = boss.command("?<tabs budget kimi 2/hour>!").await;
    assert_eq!(set["result"]["success"], true, "{set}");
    for i in 0..2 {
        let r = boss.command(&format!("?<to kimi: question {i}>!")).await;
        assert_eq!(r["result"]["success"], true, "{r}");
    }
    // The third would be the site's third send this hour: no kimi tab is picked.
    let r = boss.command("?<to kimi: question 2>!").await;
    assert_eq!(r["result"]["success"], false, "{r}");
    let out = r["result"]["output"].as_str().unwrap();
    assert!(out.contains("quota") || out.contains("配额"), "{out}");
    assert_eq!(k1.prompts().len() + k2.prompts().len(), 2);
    let tabs = boss.command("?<tabs>!").await;
    let report = tabs["result"]["output"].as_str().unwrap();
    assert!(report.contains("kimi       2/2 (2/hour"), "{report}");
    assert!(report.contains("over quota"), "{report}");
    let api = aicard::http_client::plain()
        .get(h.http_url("/api/tabs"))
        .header("authorization", format!("Bearer {TOKEN}"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let api: serde_json::Value = serde_json::from_str(&api).unwrap();
    assert_eq!(api["quotas"][0]["site"], "kimi", "{api}");
    assert_eq!(api["quotas"][0]["used"], 2);
    // Cleared: kimi is picked again.
    boss.command("?<tabs budget kimi off>!").await;
    let r = boss.command("?<to kimi: question 3>!").await;
    assert_eq!(r["result"]["success"], true, "{r}");
}

#[tokio::test]
async fn a_budget_is_kept_in_the_store_and_a_bad_one_is_refused() {
    let h = TestHub::start().await;
    let url = h.ws_url("/realtime");
    let mut boss = ScriptedTab::connect(&url, hello("boss", "chatgpt", "master"), |_: &str| {
        Reply::Silent
    })
    .await;
    let bad = boss.command("?<tabs budget kimi lots>!").await;
    assert_eq!(bad["result"]["success"], false, "{bad}");
    assert!(bad["result"]["output"].as_str().unwrap().contains("N/hour"));
    let ok = boss.command("?<tabs budget deepseek 30/day>!").await;
    assert_eq!(ok["result"]["success"], true, "{ok}");
    let stored = h.hub().hub.store.site_quotas().unwrap();
    assert_eq!(stored, vec![("deepseek".to_string(), 30, 24 * 3_600_000)]);
}

/// A role card's `quota:` applies to the sites it matches; a card with a quota and no site, or
/// a quota no one can read, is refused where it is written.
#[tokio::test]
async fn a_role_cards_quota_holds_for_its_sites() {
    let h = TestHub::start_with(|c| {
        let dir = c.data_dir.join("cards");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("kimi.yaml"),
            "name: kimi-budget\nrole: worker\nmatch: {site: [kimi]}\nquota: 1/hour\n",
        )
        .unwrap();
        c.role_cards_dir = dir;
    })
    .await;
    let url = h.ws_url("/realtime");
    let mut boss = ScriptedTab::connect(&url, hello("boss", "chatgpt", "master"), |_: &str| {
        Reply::Silent
    })
    .await;
    let _k = ScriptedTab::connect(&url, hello("k1", "kimi", "worker"), answer).await;
    let r = boss.command("?<to k1: one>!").await;
    assert_eq!(r["result"]["success"], true, "{r}");
    let r = boss.command("?<to k1: two>!").await;
    assert_eq!(r["result"]["success"], false, "{r}");
    let tabs = boss.command("?<tabs>!").await;
    let report = tabs["result"]["output"].as_str().unwrap();
    assert!(
        report.contains("1/1 (1/hour; 角色卡 / role card)"),
        "{report}"
    );
    for (text, why) in [
        ("name: x\nquota: 1/hour\n", "quota needs `match: {site"),
        ("name: x\nmatch: {site: [kimi]}\nquota: often\n", "N/hour"),
    ] {
        let err = aicard::roles::parse_card("x.yaml", text)
            .unwrap_err()
            .to_string();
        assert!(err.contains(why), "{err}");
    }
}

/// A send refused by a quota says so and when the next send is allowed, whichever way the
/// site is named (`auto:SITE`, `auto`, the site, a label) — never "tab not connected".
#[tokio::test]
async fn a_send_refused_by_a_quota_says_quota_and_when() {
    let h = TestHub::start().await;
    let url = h.ws_url("/realtime");
    let mut boss = ScriptedTab::connect(&url, hello("boss", "chatgpt", "master"), |_: &str| {
        Reply::Silent
    })
    .await;
    let k1 = ScriptedTab::connect(&url, hello("k1", "kimi", "worker"), answer).await;
    let set = boss.command("?<tabs budget kimi 1/hour>!").await;
    assert_eq!(set["result"]["success"], true, "{set}");
    let r = boss.command("?<to kimi: one>!").await;
    assert_eq!(r["result"]["success"], true, "{r}");
    let mut wrong = Vec::new();
    for cmd in [
        "?<to \"auto:kimi\": two>!",
        "?<to auto:kimi: two>!",
        "?<to auto: two>!",
        "?<to kimi: two>!",
        "?<to k1: two>!",
        "?<parallel to=[kimi] two>!",
    ] {
        let r = boss.command(cmd).await;
        let out = r["result"]["output"].as_str().unwrap();
        let says = (out.contains("配额") || out.contains("quota"))
            && out.contains("next send in")
            && !out.contains("not connected");
        if r["result"]["success"] != false || !says {
            wrong.push(format!("{cmd} → {out}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert_eq!(k1.prompts(), vec!["one"]);
}
