//! The hub side of the decision engine (`crate::decide`): turns the registry's tabs into the
//! engine's [`Candidate`] facts, feeds it what tabs report (`task_update`, chunks, answers),
//! resolves `auto` / `auto:SITE,SITE` targets, and renders `?<tabs>!` and `manager why`.
//!
//! The engine itself never sees a `Hub`; this module is the only bridge. Its functions take
//! a [`Picker`]: the hub and the engine's state, owned by the ask service (`crate::ask`).

use std::fmt::Write as _;
use std::sync::Arc;

use crate::decide::{Candidate, Choice, Decider, Row, DEFAULT_REPLY_CHARS};
use crate::hub::registry::{Client, ConnState};
use crate::hub::Hub;
use crate::protocol::{Role, TaskState, Trouble};

/// The decision engine next to the hub whose tabs it judges. Dereferences to the [`Hub`].
pub struct Picker {
    hub: Arc<Hub>,
    /// Every tab's outcomes, timings, cooldowns and parks.
    pub decide: Decider,
}

impl Picker {
    pub fn new(hub: Arc<Hub>, decide: Decider) -> Picker {
        Picker { hub, decide }
    }
}

impl std::ops::Deref for Picker {
    type Target = Hub;

    fn deref(&self) -> &Hub {
        &self.hub
    }
}

/// `auto` → `Some([])` (any worker), `auto:deepseek,kimi` → `Some(["deepseek", "kimi"])`.
pub fn auto_sites(target: &str) -> Option<Vec<String>> {
    let t = target.trim();
    if t == "auto" {
        return Some(Vec::new());
    }
    let sites = t.strip_prefix("auto:")?;
    Some(
        sites
            .split(',')
            .map(|s| s.trim().to_lowercase())
            .filter(|s| !s.is_empty())
            .collect(),
    )
}

/// A `task_update` from a tab: the engine learns when it accepted a task and why one failed;
/// an update without trouble from a parked tab means a person fixed it.
pub fn on_task_update(
    picker: &Picker,
    client: &Client,
    state: TaskState,
    trouble: Option<Trouble>,
) {
    let now = crate::store::now_ms() as u64;
    match state {
        TaskState::Accepted => {
            picker.decide.started(&client.id, now);
            // A prompt typed into the site: counted against its quota.
            client.with_info(|i| picker.decide.sent(&i.site, now));
        }
        TaskState::Failed => {
            picker.decide.failed(&client.id, trouble, now);
            if let Some(t) = trouble {
                tracing::info!(tab = %client.display(), trouble = t.as_str(), "site trouble");
            }
        }
        _ => {}
    }
    if trouble.is_none() && state != TaskState::Failed {
        picker.decide.unpark(&client.id);
    }
}

/// A task ended without an answer the tab reported (the hub timed it out, or the tab was
/// lost): a failed outcome for the engine. A tab's own `failed` is counted by
/// [`on_task_update`].
pub fn on_task_error(picker: &Picker, client: &Client, err: &crate::hub::tasks::TaskError) {
    use crate::hub::tasks::TaskError;
    if matches!(err, TaskError::Timeout(_) | TaskError::TabLost(_)) {
        picker
            .decide
            .failed(&client.id, None, crate::store::now_ms() as u64);
    }
}

fn candidate(picker: &Picker, c: &Client, exclude: &[String]) -> Candidate {
    let info = c.info();
    let label = c.display_of(&info);
    Candidate {
        id: c.id.clone(),
        avoid: exclude.contains(&c.id) || exclude.contains(&label),
        label,
        site: info.site.to_lowercase(),
        in_flight: picker.tasks.load(c),
    }
}

/// Connected worker tabs an `auto` target may use (of `sites`, when named).
pub fn eligible(picker: &Picker, sites: &[String]) -> Vec<Arc<Client>> {
    let mut tabs: Vec<Arc<Client>> = picker
        .registry
        .all()
        .into_iter()
        .filter(|c| c.state() == ConnState::Connected && c.role() == Role::Worker)
        .filter(|c| sites.is_empty() || sites.contains(&c.info().site.to_lowercase()))
        .collect();
    tabs.sort_by(|a, b| a.id.cmp(&b.id));
    tabs
}

/// Picks a tab for `target` (`auto…`) among eligible workers not in `exclude` (shown in the
/// table as having failed the task); the choice is kept under `why_key` for `manager why`.
/// None: no tab is eligible now.
pub fn choose(
    picker: &Picker,
    target: &str,
    exclude: &[String],
    why_key: Option<&str>,
) -> Option<Arc<Client>> {
    let sites = auto_sites(target)?;
    let tabs = eligible(picker, &sites);
    let cands: Vec<Candidate> = tabs.iter().map(|c| candidate(picker, c, exclude)).collect();
    let choice = picker
        .decide
        .choose(&cands, DEFAULT_REPLY_CHARS, crate::store::now_ms() as u64);
    let picked = choice
        .picked
        .as_ref()
        .and_then(|id| tabs.iter().find(|c| &c.id == id).cloned());
    if let Some(key) = why_key {
        if picked.is_some() || picker.decide.why(key).is_none() {
            picker.decide.remember(key, choice);
        }
    }
    picked
}

/// Picks one of `tabs` (a site, role or group name that matches several) with the decision
/// engine: a tab cooling down, parked or over its site's quota is not picked while another
/// can take the task. None: none of them is eligible now.
pub fn choose_among(picker: &Picker, tabs: &[Arc<Client>]) -> Option<Arc<Client>> {
    let cands: Vec<Candidate> = tabs.iter().map(|c| candidate(picker, c, &[])).collect();
    let choice = picker
        .decide
        .choose(&cands, DEFAULT_REPLY_CHARS, crate::store::now_ms() as u64);
    let id = choice.picked?;
    tabs.iter().find(|c| c.id == id).cloned()
}

/// Whether `site` is one the hub knows: a site with an adapter, or the site of a tab it has
/// seen (any state).
pub fn known_site(picker: &Picker, site: &str) -> bool {
    crate::decide::KNOWN_SITES
        .iter()
        .any(|k| k.eq_ignore_ascii_case(site))
        || picker
            .registry
            .all()
            .iter()
            .any(|c| c.info().site.eq_ignore_ascii_case(site))
}

/// Every site the hub knows (adapters' and seen tabs'), sorted.
pub fn known_sites(picker: &Picker) -> Vec<String> {
    let mut sites: std::collections::BTreeSet<String> = crate::decide::KNOWN_SITES
        .iter()
        .map(|s| s.to_string())
        .collect();
    sites.extend(
        picker
            .registry
            .all()
            .iter()
            .map(|c| c.info().site.to_lowercase()),
    );
    sites.into_iter().collect()
}

/// Whether a tab may take work now: not cooling down, not parked, no probe in flight.
pub fn usable(picker: &Picker, c: &Client) -> bool {
    use crate::decide::Standing;
    !matches!(
        health(picker, c).standing,
        Standing::Cooling(_) | Standing::Parked(_) | Standing::Waiting | Standing::OverQuota(_)
    )
}

/// Whether an `auto` target could be served by a tab online now (for plan validation).
pub fn auto_online(picker: &Picker, target: &str) -> bool {
    auto_sites(target).is_some_and(|sites| !eligible(picker, &sites).is_empty())
}

/// One tab's health as the engine sees it.
pub fn health(picker: &Picker, c: &Client) -> Row {
    picker
        .decide
        .health(&candidate(picker, c, &[]), crate::store::now_ms() as u64)
}

/// `?<tabs>!`: every tab, connected first, with its role, group and health.
pub fn tabs_report(picker: &Picker) -> String {
    let mut tabs = picker.registry.all();
    tabs.sort_by_key(|c| (c.state() != ConnState::Connected, c.display()));
    let mut out = format!(
        "标签页 / tabs ({} 在线 / online):\n  {:<20} {:<9} {:<8} {:<8} {:<22} {:>6} {:>6} {:>7} {:>4} {:>12}\n",
        picker.registry.connected_count(),
        "tab",
        "site",
        "role",
        "group",
        "健康 / health",
        "ok",
        "ttft",
        "s/1k",
        "busy",
        "net/dom/空"
    );
    let mut flags = std::collections::BTreeSet::new();
    for c in tabs {
        let info = c.info();
        let row = health(picker, &c);
        let state = if c.state() == ConnState::Connected {
            row.standing.word()
        } else {
            "离线 / offline".to_string()
        };
        let _ = writeln!(
            out,
            "  {:<20} {:<9} {:<8} {:<8} {:<22} {:>6} {:>6} {:>7} {:>4} {:>12}",
            c.display_of(&info),
            info.site,
            info.role.as_str(),
            info.group.as_deref().unwrap_or("-"),
            state,
            if row.outcomes == 0 {
                "—".to_string()
            } else {
                format!("{}/{}", row.successes, row.outcomes)
            },
            row.ttft_s.map_or("—".into(), |s| format!("{s:.1}s")),
            row.s_per_1k.map_or("—".into(), |s| format!("{s:.1}s")),
            row.in_flight,
            {
                let a = picker.paths.tab(&c.id);
                format!("{}/{}/{}", a.network, a.dom, a.empty)
            }
        );
        if let Some(flag) = picker.paths.flag(&info.site) {
            flags.insert(flag);
        }
    }
    for flag in flags {
        let _ = writeln!(out, "  ⚠ {flag}");
    }
    let uses = picker.decide.quota_uses(crate::store::now_ms() as u64);
    if !uses.is_empty() {
        out.push_str("配额 / quotas:\n");
        for u in uses {
            let wait = if u.wait_ms > 0 {
                format!(
                    "，{}s 后可再发 / next send in {}s",
                    u.wait_ms.div_ceil(1000),
                    u.wait_ms.div_ceil(1000)
                )
            } else {
                String::new()
            };
            let from = if u.from == "card" {
                "角色卡 / role card"
            } else {
                "命令 / command"
            };
            let _ = writeln!(
                out,
                "  {:<10} {}/{} ({}; {from}){wait}",
                u.site, u.used, u.quota.sends, u.quota
            );
        }
    }
    out
}

/// `?<tabs budget …>!`: sets or clears a site's quota (kept in the store), or lists them.
pub fn budget(picker: &Picker, site: Option<&str>, quota: Option<&str>) -> Result<String, String> {
    let Some(site) = site else {
        let uses = picker.decide.quota_uses(crate::store::now_ms() as u64);
        if uses.is_empty() {
            return Ok("没有配额 / no quotas: `?<tabs budget SITE N/hour>!` sets one".into());
        }
        return Ok(uses
            .iter()
            .map(|u| {
                format!(
                    "{} {}/{} ({}, {})",
                    u.site, u.used, u.quota.sends, u.quota, u.from
                )
            })
            .collect::<Vec<_>>()
            .join("\n"));
    };
    let site = site.to_lowercase();
    match quota {
        None | Some("off") | Some("none") => {
            picker.decide.set_quota(&site, None);
            picker
                .store
                .set_site_quota(&site, None)
                .map_err(|e| e.to_string())?;
            Ok(format!("已取消 {site} 的配额 / no quota for {site}"))
        }
        Some(text) => {
            let q = crate::decide::Quota::parse(text)?;
            picker.decide.set_quota(&site, Some(q));
            picker
                .store
                .set_site_quota(&site, Some((q.sends, q.per_ms)))
                .map_err(|e| e.to_string())?;
            Ok(format!(
                "{site} 配额 {q} / quota for {site}: {q} (its tabs are not picked past it)"
            ))
        }
    }
}

/// Loads the quotas `?<tabs budget>!` kept in the store (at start).
pub fn load_budgets(picker: &Picker) {
    for (site, sends, per_ms) in picker.store.site_quotas().unwrap_or_default() {
        picker
            .decide
            .set_quota(&site, Some(crate::decide::Quota { sends, per_ms }));
    }
}

/// `?<manager why RUN NODE>!`: the score table of the node's latest pick.
pub fn why(picker: &Picker, run: &str, node: &str) -> Result<String, String> {
    let key = format!("{run}/{node}");
    let choice: Choice = picker.decide.why(&key).ok_or_else(|| {
        format!(
            "没有记录 / no pick recorded for node `{node}` of run `{run}` (only `auto` targets are picked by the decision engine)"
        )
    })?;
    Ok(format!(
        "{run} / {node} — 得分 = 预计完成时间 ÷ 成功概率 / score = expected completion ÷ success probability\n{}",
        choice.table()
    ))
}

/// A tab's health for JSON views (dashboard): standing, success, timings, in flight.
pub fn health_json(picker: &Picker, c: &Client) -> serde_json::Value {
    let r = health(picker, c);
    serde_json::json!({
        "standing": r.standing.word(),
        "parked": picker.decide.parked(&c.id).map(Trouble::as_str),
        "successes": r.successes,
        "outcomes": r.outcomes,
        "success_p": r.p,
        "ttft_s": r.ttft_s,
        "s_per_1k": r.s_per_1k,
        "in_flight": r.in_flight,
        // Which path its answers took, its site's, and the "adapter outdated" flag (docs/reliability.md).
        "answers": picker.paths.json(&c.id, &c.info().site),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_targets_name_their_sites() {
        assert_eq!(auto_sites("auto"), Some(vec![]));
        assert_eq!(
            auto_sites("auto:DeepSeek, kimi"),
            Some(vec!["deepseek".to_string(), "kimi".to_string()])
        );
        assert_eq!(auto_sites("automat"), None);
        assert_eq!(auto_sites("deepseek"), None);
    }
}
