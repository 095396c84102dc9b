//! The AI Manager's planner (docs/flows.md): `?<manager plan GOAL…>!` asks the planner tab for a
//! flow, checks it (`check`), sends located problems back (`repair`) and keeps the valid plan
//! as a draft (`drafts`) that runs only once the master approves it.
//!
//! - [`prompt`]: the planning prompt (format from the JSON Schema, examples, what is online)
//!   and the repair prompt.
//! - [`check`]: the fenced YAML block, the loader's diagnostics, online targets, ±3 lines.
//! - [`repair`]: the loop, generic over how the planner is asked.
//! - [`drafts`]: drafts and the plan cache in the store (migration 5).
//!
//! **Approval is the barrier**: a draft is a row in `plan_drafts`, not a run; the run and its
//! journal are created only after the draft's state became `approved` in the store.

pub mod check;
pub mod drafts;
pub mod prompt;
pub mod repair;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use crate::ask::Asks;
use crate::hub::registry::{Client, ConnState};
use crate::hub::tasks::TaskRequest;
use crate::hub::Hub;
use crate::roles::RoleCard;
use crate::runner::Runner;
use crate::store::now_ms;
use drafts::{Draft, DraftState, Drafts};
use prompt::{Catalog, OnlineTab};

/// The planner: the drafts table (and through it the plan cache), and the handles it plans
/// with: the hub (tabs, settings, store), the ask service (the planner tab's answer, each
/// tab's health), the runner (an approved plan's run) and the role cards.
pub struct Planner {
    pub drafts: Drafts,
    hub: Arc<Hub>,
    asks: Arc<Asks>,
    runner: Arc<Runner>,
    cards: CardOf,
}

/// The role card that applies to a tab now (the command host keeps the cards; `app` wires
/// this to them).
pub type CardOf = Box<dyn Fn(&Client) -> Option<RoleCard> + Send + Sync>;

impl Planner {
    pub fn new(hub: Arc<Hub>, asks: Arc<Asks>, runner: Arc<Runner>, cards: CardOf) -> Planner {
        Planner {
            drafts: Drafts::new(hub.store.clone()),
            hub,
            asks,
            runner,
            cards,
        }
    }

    fn card_for(&self, client: &Client) -> Option<RoleCard> {
        (self.cards)(client)
    }
}

/// Why a planner verb failed; shown to the person.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("没有草案 / no plan draft `{0}` (see ?<manager list>!)")]
    NoDraft(String),
    #[error("草案 {id} 已{word} / draft {id} was already {state}")]
    Decided {
        id: String,
        word: &'static str,
        state: &'static str,
    },
    #[error("规划者不在线 / the planner tab `{0}` is not online")]
    PlannerOffline(String),
    #[error("规划者没有回答 / the planner tab {tab} gave no plan: {reason}")]
    NoAnswer { tab: String, reason: String },
    #[error(
        "计划仍无效，未运行任何任务 / the plan is still invalid after {repairs} repair round(s) ({why}); nothing was run. Last diagnostics:\n{problems}"
    )]
    Invalid {
        repairs: usize,
        why: &'static str,
        problems: String,
    },
    #[error("{0}")]
    Other(String),
    #[error("存储错误 / store error: {0}")]
    Store(#[from] crate::store::StoreError),
}

/// The tabs online now, as the planner is told about them (connected, with their health).
fn catalog(p: &Planner) -> Catalog {
    let mut tabs: Vec<OnlineTab> = p
        .hub
        .registry
        .all()
        .into_iter()
        .filter(|c| c.state() == ConnState::Connected)
        .map(|c| {
            let info = c.info();
            OnlineTab {
                site: info.site.to_lowercase(),
                label: c.display_of(&info),
                role: info.role.as_str().to_string(),
                group: info.group.clone(),
                health: crate::pick::health(&p.asks.pick, &c).standing.word(),
            }
        })
        .collect();
    tabs.sort_by(|a, b| a.label.cmp(&b.label));
    Catalog { tabs }
}

/// Whether `target` reaches a tab online now (`master` always does: it is the asker).
fn online(p: &Planner, target: &str) -> bool {
    let t = target.trim();
    t == "master"
        || crate::pick::auto_online(&p.asks.pick, t)
        || (crate::pick::auto_sites(t).is_none() && !p.hub.registry.resolve(t).is_empty())
}

/// Checks plan text against the flow rules and what is online now.
pub fn check_plan(p: &Planner, text: &str) -> Result<crate::flows::Flow, Vec<check::PlanProblem>> {
    let names = catalog(p).targets();
    check::check(text, &|t| online(p, t), &names)
}

/// The planner tab: `--planner`, else a `planner: true` role card's tab, else the master's.
fn planner_tab(p: &Planner, master: &str) -> Result<Arc<Client>, PlanError> {
    if let Some(t) = &p.hub.config.planner {
        return p
            .hub
            .registry
            .resolve(t)
            .into_iter()
            .next()
            .ok_or_else(|| PlanError::PlannerOffline(t.clone()));
    }
    let mut tabs = p.hub.registry.all();
    tabs.sort_by(|a, b| a.id.cmp(&b.id));
    if let Some(c) = tabs.into_iter().find(|c| {
        c.state() == ConnState::Connected && p.card_for(c).is_some_and(|card| card.planner)
    }) {
        return Ok(c);
    }
    p.hub
        .registry
        .get(master)
        .filter(|c| c.state() == ConnState::Connected)
        .ok_or_else(|| PlanError::PlannerOffline(master.to_string()))
}

/// The plan cache's key: the goal (case and spacing ignored) and who is online.
pub fn cache_key(goal: &str, catalog: &Catalog) -> String {
    let goal: Vec<String> = goal.split_whitespace().map(str::to_lowercase).collect();
    let text = format!("{}\n{}", goal.join(" "), catalog.fingerprint());
    let mut h: u64 = 0xcbf29ce484222325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{h:016x}")
}

fn new_id() -> String {
    format!("plan-{}", &uuid::Uuid::new_v4().simple().to_string()[..8])
}

/// `manager plan GOAL`: a draft for the master `master` (a client id), from the cache when
/// the same goal was planned against the same tabs.
pub async fn plan(p: &Planner, master: &str, goal: &str) -> Result<String, PlanError> {
    let goal = goal.trim();
    if goal.is_empty() {
        return Err(PlanError::Other(
            "用法 / usage: ?<manager plan GOAL…>! — 用一句话说明目标 / say the goal in plain words"
                .into(),
        ));
    }
    let cat = catalog(p);
    let key = cache_key(goal, &cat);
    if let Some(hit) = p.drafts.cached(&key)? {
        if check_plan(p, &hit.yaml).is_ok() {
            let draft = if hit.state == DraftState::Draft {
                hit
            } else {
                let copy = Draft {
                    id: new_id(),
                    state: DraftState::Draft,
                    parent: None,
                    master: Some(master.to_string()),
                    run_id: None,
                    saved_as: None,
                    repairs: 0,
                    created_ms: now_ms(),
                    decided_ms: None,
                    ..hit
                };
                p.drafts.insert(&copy)?;
                copy
            };
            let mut text = present(&draft)?;
            text.insert_str(
                0,
                "(来自计划缓存，未询问规划者 / from the plan cache; the planner was not asked)\n",
            );
            return Ok(text);
        }
    }
    let first = prompt::planning(goal, &cat, None);
    make_draft(p, master, goal, first, None, key).await
}

/// `manager modify ID: FEEDBACK`: re-plans with the feedback; the earlier draft stays readable.
pub async fn modify(
    p: &Planner,
    master: &str,
    id: &str,
    feedback: &str,
) -> Result<String, PlanError> {
    let old = open_draft(p, id)?;
    let cat = catalog(p);
    let first = prompt::planning(&old.goal, &cat, Some((&old.yaml, feedback)));
    let key = cache_key(&old.goal, &cat);
    let text = make_draft(p, master, &old.goal, first, Some(old.id.clone()), key).await?;
    p.drafts
        .decide(&old.id, DraftState::Modified, None, now_ms())?;
    Ok(text)
}

/// Asks the planner, runs the repair loop, stores the valid plan as a draft.
async fn make_draft(
    p: &Planner,
    master: &str,
    goal: &str,
    first: String,
    parent: Option<String>,
    key: String,
) -> Result<String, PlanError> {
    let tab = planner_tab(p, master)?;
    let id = new_id();
    let max = p.hub.config.plan_repairs;
    let timeout = p.hub.config.timing.task_timeout;
    let ask = |prompt: String, round: usize| {
        let asks = p.asks.clone();
        let tab = tab.clone();
        let mut req = TaskRequest::new(prompt, timeout);
        req.task_id = Some(format!("{id}/round-{round}"));
        req.parent_id = Some(master.to_string());
        async move { asks.ask_tab(&tab, req).await.map_err(|e| e.to_string()) }
    };
    let check = |text: &str| check_plan(p, text);
    let outcome = repair::converge(ask, first, &check, max).await;
    let (yaml, repairs) = match outcome {
        repair::PlanOutcome::Valid { yaml, repairs, .. } => (yaml, repairs),
        repair::PlanOutcome::NoAnswer(reason) => {
            return Err(PlanError::NoAnswer {
                tab: tab.display(),
                reason,
            })
        }
        repair::PlanOutcome::Invalid {
            problems,
            repairs,
            stopped,
        } => {
            return Err(PlanError::Invalid {
                repairs,
                why: match stopped {
                    repair::Stop::Limit => "修复次数已用完 / repair limit reached",
                    repair::Stop::NotShrinking => "错误没有减少 / the errors did not get fewer",
                },
                problems: problems.join("\n\n"),
            })
        }
    };
    let draft = Draft {
        id,
        goal: goal.to_string(),
        yaml,
        state: DraftState::Draft,
        parent,
        cache_key: key,
        master: Some(master.to_string()),
        planner: Some(tab.display()),
        repairs: repairs as u32,
        run_id: None,
        saved_as: None,
        created_ms: now_ms(),
        decided_ms: None,
    };
    p.drafts.insert(&draft)?;
    tracing::info!(draft = %draft.id, repairs, "plan draft ready");
    present(&draft)
}

fn open_draft(p: &Planner, id: &str) -> Result<Draft, PlanError> {
    let d = p
        .drafts
        .get(id)?
        .ok_or_else(|| PlanError::NoDraft(id.to_string()))?;
    if d.state != DraftState::Draft {
        return Err(decided(&d));
    }
    Ok(d)
}

fn decided(d: &Draft) -> PlanError {
    PlanError::Decided {
        id: d.id.clone(),
        word: match d.state {
            DraftState::Approved => "批准",
            DraftState::Modified => "修改",
            DraftState::Rejected => "拒绝",
            DraftState::Draft => "处理",
        },
        state: d.state.as_str(),
    }
}

/// What the master sees of a draft: id, DAG, node count, targets and how to answer.
pub fn present(d: &Draft) -> Result<String, PlanError> {
    let flow = crate::flows::load_str("plan.yaml", &d.yaml).map_err(|diags| {
        PlanError::Other(
            diags
                .iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join("\n"),
        )
    })?;
    let mut targets: Vec<String> = flow
        .nodes
        .iter()
        .flat_map(|n| n.to.iter().cloned().chain(n.judge.clone()))
        .collect();
    targets.sort();
    targets.dedup();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "计划草案 / plan draft {} [{}] — {} 个节点 / {} nodes, 修复 / repairs: {}",
        d.id,
        d.state.as_str(),
        flow.nodes.len(),
        flow.nodes.len(),
        d.repairs
    );
    let _ = writeln!(out, "目标 / goal: {}", d.goal);
    if let Some(p) = &d.parent {
        let _ = writeln!(out, "修改自 / modifies: {p}");
    }
    let _ = writeln!(out, "目标标签页 / targets: {}", targets.join(", "));
    out.push_str(&crate::flows::render::text(&flow));
    if !out.ends_with('\n') {
        out.push('\n');
    }
    if d.state == DraftState::Draft {
        let _ = write!(
            out,
            "批准前不会向任何标签页发送任务 / nothing is sent to any tab before approval. 回复 / answer:\n  \
             ?<manager approve {id} [key=value…]>!\n  ?<manager modify {id}: FEEDBACK>!\n  \
             ?<manager reject {id}>!\n  ?<manager save {id} as NAME>!",
            id = d.id
        );
    }
    Ok(out)
}

/// `manager approve ID [key=value…]`: the draft becomes `approved` in the store, then its
/// run starts (never the other way round).
pub fn approve(
    p: &Planner,
    master: Option<String>,
    id: &str,
    inputs: BTreeMap<String, String>,
) -> Result<String, PlanError> {
    let d = open_draft(p, id)?;
    let flow = crate::flows::load_str(&format!("{id}.yaml"), &d.yaml)
        .map_err(|_| PlanError::Other(format!("草案 {id} 无法加载 / draft {id} does not load")))?;
    if !p.drafts.decide(id, DraftState::Approved, None, now_ms())? {
        let again = p
            .drafts
            .get(id)?
            .ok_or_else(|| PlanError::NoDraft(id.into()))?;
        return Err(decided(&again));
    }
    match p
        .runner
        .start_flow(flow, d.yaml.clone(), master, inputs, None)
    {
        Ok(run_id) => {
            p.drafts.set_run(id, &run_id)?;
            Ok(format!("已批准 / approved {id}; 已启动 / started {run_id}"))
        }
        Err(e) => {
            // Not started: the draft waits again.
            p.drafts.reopen(id)?;
            Err(PlanError::Other(e.to_string()))
        }
    }
}

/// `manager reject ID`.
pub fn reject(p: &Planner, id: &str) -> Result<String, PlanError> {
    open_draft(p, id)?;
    if p.drafts.decide(id, DraftState::Rejected, None, now_ms())? {
        Ok(format!(
            "已拒绝 / rejected {id}; 没有运行任何任务 / nothing was run"
        ))
    } else {
        let d = p
            .drafts
            .get(id)?
            .ok_or_else(|| PlanError::NoDraft(id.into()))?;
        Err(decided(&d))
    }
}

/// `manager save ID as NAME`: writes `flows/NAME.yaml` (its `name:` set to NAME). An existing
/// file is never overwritten.
pub fn save(p: &Planner, id: &str, name: &str) -> Result<String, PlanError> {
    let d = p
        .drafts
        .get(id)?
        .ok_or_else(|| PlanError::NoDraft(id.to_string()))?;
    let path = p.hub.config.flows_dir.join(format!("{name}.yaml"));
    if path.exists() || p.hub.store.flow_source(name)?.is_some() {
        return Err(PlanError::Other(format!(
            "流程 {name} 已存在，未覆盖 / a flow named `{name}` exists already ({}); pick another name",
            path.display()
        )));
    }
    let text = rename(&d.yaml, name);
    crate::flows::load_str(&path.display().to_string(), &text).map_err(|diags| {
        PlanError::Other(
            diags
                .iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join("\n"),
        )
    })?;
    std::fs::create_dir_all(&p.hub.config.flows_dir)
        .and_then(|_| std::fs::write(&path, &text))
        .map_err(|e| PlanError::Other(format!("cannot write {}: {e}", path.display())))?;
    p.drafts.set_saved(id, name)?;
    Ok(format!(
        "已保存 / saved {id} as {} (?<manager run {name}>!)",
        path.display()
    ))
}

/// The flow text with its top-level `name:` set to `name`.
fn rename(yaml: &str, name: &str) -> String {
    let mut done = false;
    let mut out: Vec<String> = yaml
        .lines()
        .map(|l| {
            if !done && l.starts_with("name:") {
                done = true;
                format!("name: {name}")
            } else {
                l.to_string()
            }
        })
        .collect();
    if !done {
        out.insert(0, format!("name: {name}"));
    }
    out.join("\n") + "\n"
}

/// `manager show plan-…`: the draft, whatever its state.
pub fn show(p: &Planner, id: &str) -> Result<String, PlanError> {
    let d = p
        .drafts
        .get(id)?
        .ok_or_else(|| PlanError::NoDraft(id.to_string()))?;
    let mut out = present(&d)?;
    let _ = write!(out, "\n```yaml\n{}```", d.yaml);
    Ok(out)
}

/// The drafts part of `manager list`.
pub fn list(p: &Planner) -> String {
    let drafts = p.drafts.recent(20).unwrap_or_default();
    if drafts.is_empty() {
        return String::new();
    }
    let mut out = String::from("计划草案 / plan drafts:\n");
    for d in drafts {
        let run = d.run_id.map(|r| format!(" → {r}")).unwrap_or_default();
        let _ = writeln!(out, "  {} [{}] {}{run}", d.id, d.state.as_str(), d.goal);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_key_ignores_case_and_spacing_not_the_tabs() {
        let a = Catalog::default();
        let b = Catalog {
            tabs: vec![OnlineTab {
                site: "kimi".into(),
                label: "k".into(),
                role: "worker".into(),
                group: None,
                health: "ready".into(),
            }],
        };
        assert_eq!(
            cache_key("Write  a poem", &a),
            cache_key("write a POEM", &a)
        );
        assert_ne!(cache_key("write a poem", &a), cache_key("write a poem", &b));
        let mut c = b.clone();
        c.tabs[0].health = "cooling 3s".into();
        assert_eq!(
            cache_key("x", &b),
            cache_key("x", &c),
            "health is not identity"
        );
    }

    #[test]
    fn saving_renames_the_flow() {
        assert_eq!(rename("name: a\nnodes: []\n", "b"), "name: b\nnodes: []\n");
        assert_eq!(rename("nodes: []\n", "b"), "name: b\nnodes: []\n");
    }
}
