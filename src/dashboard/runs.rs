//! What the dashboard shows of runs, read from the store: the run list, a run's detail (the
//! flow's graph, each node's state, counts, attempts and timings, folded from the journal) and
//! one node's items with their attempts, rendered prompts and outputs.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use rusqlite::params;
use serde_json::{json, Value};

use super::DashboardDoor;
use crate::decide::{Choice, Standing};
use crate::flows::engine::{Effect, ItemStatus, JournalEvent, RunState};
use crate::flows::Flow;
use crate::store::RunRecord;

/// Nodes with more items than this are sent as counts only; their items come page by page
/// from `/api/runs/{id}/nodes/{node}`.
pub const INLINE_ITEMS: usize = 50;
/// Longest text (reply, output, prompt) sent in one field.
pub const MAX_TEXT: usize = 20_000;
/// At most this many of the journal's latest events come with a run's detail.
pub const JOURNAL_TAIL: usize = 300;

/// One row of the journal with its global id (the SSE `id:`).
pub use crate::store::JournalRow as Row;

/// The journal rows of every run after global id `after`, oldest first, at most `limit`.
pub fn rows_after(door: &DashboardDoor, after: i64, limit: usize) -> Vec<Row> {
    door.store.journal_after(after, limit)
}

/// The newest global journal id (0: none yet).
pub fn last_id(door: &DashboardDoor) -> i64 {
    door.store.journal_last_id()
}

fn run_rows(door: &DashboardDoor, run_id: &str) -> Vec<Row> {
    door.store
        .read(|c| {
            let mut st = c.prepare_cached(
                "SELECT rowid, run_id, seq, at_ms, event FROM journal WHERE run_id = ?1
                 ORDER BY seq",
            )?;
            let rows = st.query_map(params![run_id], Row::read)?;
            rows.collect()
        })
        .unwrap_or_default()
}

/// Cuts long text to [`MAX_TEXT`] characters, saying so.
pub fn clip(text: &str) -> String {
    match text.char_indices().nth(MAX_TEXT) {
        None => text.to_string(),
        Some((i, _)) => format!(
            "{}\n… [{} more characters]",
            &text[..i],
            text[i..].chars().count()
        ),
    }
}

/// The journal event as the dashboard sends it: its type and fields, long texts clipped.
pub fn event_json(row: &Row) -> Value {
    let mut ev: Value = serde_json::from_str(&row.event).unwrap_or(Value::Null);
    if let Some(obj) = ev.as_object_mut() {
        for key in ["text", "output"] {
            if let Some(Value::String(s)) = obj.get_mut(key) {
                if s.chars().count() > 2_000 {
                    *s = format!("{}…", s.chars().take(2_000).collect::<String>());
                }
            }
        }
        obj.remove("prior_outputs");
    }
    json!({"id": row.id, "run_id": row.run_id, "seq": row.seq, "at_ms": row.at_ms, "event": ev})
}

/// Which runs `GET /api/runs?kind=` lists: flow runs, API/MCP calls (the runs of the flows
/// `api` and `mcp`: one prompt each, journaled like a run), or all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    Flows,
    Calls,
    All,
}

impl RunKind {
    /// `flows`, `calls` or `all`; anything else (or nothing) is all, as before the filter.
    pub fn parse(s: Option<&str>) -> RunKind {
        match s {
            Some("flows") => RunKind::Flows,
            Some("calls") => RunKind::Calls,
            _ => RunKind::All,
        }
    }
}

/// `GET /api/runs[?kind=flows|calls|all]`: the newest runs of that kind first, and how many
/// runs there are of each kind. `updated_ms` is the run's last journal event (or its last
/// state change, whichever is later), so it moves while the run works.
pub fn list(door: &DashboardDoor, kind: RunKind) -> Value {
    let filter = match kind {
        RunKind::Flows => "WHERE flow NOT IN ('api', 'mcp')",
        RunKind::Calls => "WHERE flow IN ('api', 'mcp')",
        RunKind::All => "",
    };
    // The newest 200 first, then each one's last journal event (an index lookup by run).
    let sql = format!(
        "SELECT run_id, flow, state, started_ms,
                MAX(updated_ms, COALESCE((SELECT j.at_ms FROM journal j
                    WHERE j.run_id = r.run_id ORDER BY j.seq DESC LIMIT 1), 0)),
                master
         FROM (SELECT rowid AS rid, * FROM runs {filter}
               ORDER BY started_ms DESC, rowid DESC LIMIT 200) AS r
         ORDER BY started_ms DESC, rid DESC"
    );
    let (runs, counts) = door
        .store
        .read(|c| {
            let mut st = c.prepare(&sql)?;
            let rows = st.query_map([], |r| {
                Ok(json!({
                    "run_id": r.get::<_, String>(0)?,
                    "flow": r.get::<_, String>(1)?,
                    "state": r.get::<_, String>(2)?,
                    "started_ms": r.get::<_, i64>(3)?,
                    "updated_ms": r.get::<_, i64>(4)?,
                    "master": r.get::<_, Option<String>>(5)?,
                }))
            })?;
            let runs: Vec<Value> = rows.collect::<Result<_, _>>()?;
            let (all, calls) = c.query_row(
                "SELECT COUNT(*), COALESCE(SUM(flow IN ('api', 'mcp')), 0) FROM runs",
                [],
                |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)),
            )?;
            Ok((runs, (all, calls)))
        })
        .unwrap_or_default();
    let (all, calls) = counts;
    json!({
        "runs": runs,
        "counts": {"flows": all - calls, "calls": calls, "all": all},
    })
}

/// The graph of a flow for drawing: nodes (id, name, kind, targets, fan-out) and edges.
pub fn graph(flow: &Flow) -> Value {
    let nodes: Vec<Value> = flow
        .nodes
        .iter()
        .map(|n| {
            let kind = if n.command.is_some() {
                "command"
            } else if n.to.iter().any(|t| t == "master") {
                "master"
            } else {
                "prompt"
            };
            let fanout = n.for_each.is_some()
                || n.workers.is_some_and(|w| w > 1)
                || n.to.len() > 1
                || n.parallel_outputs.is_some();
            json!({
                "id": n.id,
                "name": n.name,
                "depends_on": n.depends_on.0,
                "kind": kind,
                "to": n.to.0,
                "fanout": fanout,
            })
        })
        .collect();
    let inputs: Vec<Value> = flow
        .inputs
        .iter()
        .map(|(k, v)| {
            json!({"name": k, "default": v.default, "description": v.description,
                   "required": v.required})
        })
        .collect();
    json!({"name": flow.name, "description": flow.description, "nodes": nodes,
           "inputs": inputs})
}

/// A run's flow (as it started) and its journal, decoded.
struct Loaded {
    rec: RunRecord,
    flow: Arc<Flow>,
    rows: Vec<Row>,
    events: Vec<JournalEvent>,
}

fn load(door: &DashboardDoor, run_id: &str) -> Option<Loaded> {
    let rec = door.store.run(run_id).ok()??;
    let flow = crate::flows::load_str(&rec.flow, &rec.flow_source).ok()?;
    let rows = run_rows(door, run_id);
    let events = rows
        .iter()
        .filter_map(|r| serde_json::from_str::<JournalEvent>(&r.event).ok())
        .collect();
    Some(Loaded {
        rec,
        flow: Arc::new(flow),
        rows,
        events,
    })
}

/// One attempt of one item, from the journal.
#[derive(Debug, Clone, Default)]
struct Attempt {
    attempt: u32,
    started_ms: Option<i64>,
    sent_ms: Option<i64>,
    /// When the tab streamed the reply's first chunk (recorded with the reply).
    first_chunk_at_ms: Option<i64>,
    ended_ms: Option<i64>,
    client: Option<String>,
    outcome: &'static str,
    error: Option<String>,
    retryable: Option<bool>,
    chars: Option<usize>,
}

impl Attempt {
    fn json(&self) -> Value {
        let queue = match (self.started_ms, self.sent_ms) {
            (Some(a), Some(b)) => Some(b - a),
            _ => None,
        };
        let first_chunk = match (self.started_ms, self.first_chunk_at_ms) {
            (Some(a), Some(b)) => Some(b - a),
            _ => None,
        };
        let total = match (self.started_ms, self.ended_ms) {
            (Some(a), Some(b)) => Some(b - a),
            _ => None,
        };
        json!({
            "attempt": self.attempt, "started_ms": self.started_ms, "sent_ms": self.sent_ms,
            "ended_ms": self.ended_ms, "client": self.client, "outcome": self.outcome,
            "error": self.error, "retryable": self.retryable, "chars": self.chars,
            "queue_ms": queue, "first_chunk_ms": first_chunk, "total_ms": total,
        })
    }
}

/// Node id → item → attempts; node id → (queued, ended) times.
type Attempts = HashMap<String, BTreeMap<usize, Vec<Attempt>>>;
/// Node id → (queued ms, ended ms).
type NodeTimes = HashMap<String, (Option<i64>, Option<i64>)>;

fn attempts(l: &Loaded) -> (Attempts, NodeTimes) {
    let mut out: Attempts = HashMap::new();
    let mut times: NodeTimes = HashMap::new();
    for row in &l.rows {
        let Ok(ev) = serde_json::from_str::<JournalEvent>(&row.event) else {
            continue;
        };
        let at = row.at_ms;
        let slot = |out: &mut Attempts, node: &str, item: usize, attempt: u32| {
            let list = out
                .entry(node.to_string())
                .or_default()
                .entry(item)
                .or_default();
            if !list.iter().any(|a| a.attempt == attempt) {
                list.push(Attempt {
                    attempt,
                    outcome: "running",
                    ..Default::default()
                });
            }
            list.iter().position(|a| a.attempt == attempt).unwrap_or(0)
        };
        match ev {
            JournalEvent::NodeQueued { node, .. } => {
                times.entry(node).or_default().0 = Some(at);
            }
            JournalEvent::NodeCompleted { node, .. }
            | JournalEvent::NodeFailed { node, .. }
            | JournalEvent::NodeSkipped { node, .. } => {
                times.entry(node).or_default().1 = Some(at);
            }
            JournalEvent::AttemptStarted {
                node,
                item,
                attempt,
                ..
            } => {
                let i = slot(&mut out, &node, item, attempt);
                out.get_mut(&node).and_then(|m| m.get_mut(&item)).unwrap()[i].started_ms = Some(at);
            }
            JournalEvent::PromptSent {
                node,
                item,
                attempt,
                client,
            } => {
                let i = slot(&mut out, &node, item, attempt);
                let a = &mut out.get_mut(&node).and_then(|m| m.get_mut(&item)).unwrap()[i];
                a.sent_ms = Some(at);
                a.client = Some(client);
            }
            JournalEvent::ItemOutput {
                node,
                item,
                attempt,
                client,
                text,
                first_chunk_at_ms,
            } => {
                let i = slot(&mut out, &node, item, attempt);
                let a = &mut out.get_mut(&node).and_then(|m| m.get_mut(&item)).unwrap()[i];
                a.ended_ms = Some(at);
                a.first_chunk_at_ms = first_chunk_at_ms.map(|t| t as i64);
                a.outcome = "completed";
                a.chars = Some(text.chars().count());
                if a.client.is_none() && !client.is_empty() {
                    a.client = Some(client);
                }
            }
            JournalEvent::ItemFailed {
                node,
                item,
                attempt,
                error,
                retryable,
                ..
            } => {
                let i = slot(&mut out, &node, item, attempt);
                let a = &mut out.get_mut(&node).and_then(|m| m.get_mut(&item)).unwrap()[i];
                a.ended_ms = Some(at);
                a.outcome = "failed";
                a.error = Some(error);
                a.retryable = Some(retryable);
            }
            _ => {}
        }
    }
    (out, times)
}

fn item_state(s: &ItemStatus) -> &'static str {
    match s {
        ItemStatus::Idle => "pending",
        ItemStatus::InFlight => "running",
        ItemStatus::Backoff { .. } => "retrying",
        ItemStatus::Done => "completed",
        ItemStatus::Failed { .. } => "failed",
        ItemStatus::Cancelled => "cancelled",
    }
}

/// Whether the node's tab is picked by the decision engine (`auto` / `auto:SITE,…` targets).
fn auto_target(flow: &Flow, node: &str) -> bool {
    flow.nodes
        .iter()
        .find(|n| n.id == node)
        .is_some_and(|n| n.to.iter().any(|t| crate::pick::auto_sites(t).is_some()))
}

/// The score table's rows as data, for the node panel to lay out as a table that fits.
fn why_rows(choice: &Choice) -> Vec<Value> {
    choice
        .rows
        .iter()
        .map(|r| {
            json!({
                "tab": r.label,
                "picked": r.picked,
                "state": r.standing.word(),
                "successes": r.successes,
                "outcomes": r.outcomes,
                "p": r.p,
                "ttft_s": r.ttft_s,
                "s_per_1k": r.s_per_1k,
                "in_flight": r.in_flight,
                "expected_s": r.expected_s,
                // As the table: a score only for the tabs the engine may pick.
                "score": matches!(r.standing, Standing::Ready | Standing::New | Standing::Probe)
                    .then_some(r.score),
            })
        })
        .collect()
}

/// The decision engine's reason for a pick, in words (its score table goes alongside).
fn engine_reason(choice: &Choice) -> String {
    let picked = choice.rows.iter().find(|r| r.picked);
    let head = match (choice.reason, picked) {
        ("probe", Some(r)) => format!(
            "`{}`: 冷却结束后的试探 / a probe: its cooldown just ended",
            r.label
        ),
        ("explore", Some(r)) => format!(
            "`{}`: 探索新标签页 / exploring a new tab (fewer than {} outcomes)",
            r.label,
            crate::decide::EXPLORE_SAMPLES
        ),
        (_, Some(r)) => format!(
            "`{}`: 得分最低 / lowest score {:.1} = 预计 / expected {:.1}s ÷ 成功率 / success {:.0}%",
            r.label,
            r.score,
            r.expected_s,
            r.p * 100.0
        ),
        (_, None) => "没有可用的标签页 / no tab was eligible".to_string(),
    };
    let others: Vec<String> = choice
        .rows
        .iter()
        .filter(|r| !r.picked)
        .map(|r| format!("{} {}", r.label, r.standing.word()))
        .collect();
    let mut text = format!("决策引擎 / decision engine: {head}");
    if !others.is_empty() {
        text.push_str(&format!("; 其他 / others: {}", others.join(", ")));
    }
    text
}

/// Why the runner gave an item to its tab: the decision engine's choice for `auto` targets
/// (kept in memory since the hub started), else as far as the journal and the flow tell.
/// Returns the reason and, for engine picks, the choice (its score table).
fn why(
    ctx: &ItemCtx<'_>,
    node: &str,
    item: usize,
    attempts: &[Attempt],
) -> (Option<String>, Option<Choice>) {
    let auto = auto_target(ctx.flow, node);
    if auto {
        let key = format!("{}/{node}/{item}", ctx.run_id);
        if let Some(choice) = ctx.door.asks.pick.decide.why(&key) {
            let reason = engine_reason(&choice);
            return (Some(reason), Some(choice));
        }
    }
    let Some(tab) = attempts.last().and_then(|a| a.client.as_deref()) else {
        return (None, None);
    };
    if auto {
        // Picks are remembered in memory only: the hub restarted, or many picks came since.
        return (
            Some(format!(
                "决策引擎选择了 / the decision engine picked `{tab}`; 它的得分表已不在内存中 / its score table is no longer kept (hub restarted or too many picks since)"
            )),
            None,
        );
    }
    let to = ctx
        .flow
        .nodes
        .iter()
        .find(|n| n.id == node)
        .map(|n| {
            if n.to.is_empty() {
                "role:worker".to_string()
            } else {
                n.to.0.join(", ")
            }
        })
        .unwrap_or_default();
    let avoided: Vec<&str> = attempts[..attempts.len() - 1]
        .iter()
        .filter(|a| a.outcome == "failed")
        .filter_map(|a| a.client.as_deref())
        .collect();
    let mut text =
        format!("`{tab}` 匹配 / matches `{to}`; 当时负载最低 / least loaded of the matching tabs");
    if !avoided.is_empty() {
        text.push_str(&format!(
            "; 避开了失败过的 / avoiding tabs that failed: {}",
            avoided.join(", ")
        ));
    }
    (Some(text), None)
}

/// What item views need besides the node: the door (the engine's picks), the run, its flow.
struct ItemCtx<'a> {
    door: &'a DashboardDoor,
    run_id: &'a str,
    flow: &'a Flow,
}

fn items_json(
    ctx: &ItemCtx<'_>,
    node: &crate::flows::engine::NodeSnapshot,
    by_item: Option<&BTreeMap<usize, Vec<Attempt>>>,
    range: std::ops::Range<usize>,
    prompts: &HashMap<(usize, u32), String>,
) -> Vec<Value> {
    node.items
        .iter()
        .enumerate()
        .skip(range.start)
        .take(range.len())
        .map(|(i, it)| {
            let att: &[Attempt] = by_item.and_then(|m| m.get(&i)).map_or(&[], |v| v);
            let mut atts: Vec<Value> = att.iter().map(Attempt::json).collect();
            for (a, v) in att.iter().zip(atts.iter_mut()) {
                if let Some(p) = prompts.get(&(i, a.attempt)) {
                    v["prompt"] = Value::String(clip(p));
                }
            }
            let (why, choice) = why(ctx, &node.id, i, att);
            json!({
                "index": i,
                "label": it.label,
                "state": item_state(&it.status),
                "attempt": it.attempt,
                "client": it.client,
                "why": why,
                "why_table": choice.as_ref().map(Choice::table),
                "why_rows": choice.as_ref().map(why_rows),
                "output": it.text.as_deref().map(clip),
                "error": match &it.status { ItemStatus::Failed { error } => Some(error.clone()), _ => None },
                "attempts": atts,
            })
        })
        .collect()
}

/// `GET /api/runs/{id}`.
pub fn detail(door: &DashboardDoor, run_id: &str) -> Option<Value> {
    let l = load(door, run_id)?;
    let state = RunState::replay(l.flow.clone(), &l.events, true).ok()?;
    let snap = state.snapshot();
    let (atts, times) = attempts(&l);
    let none = HashMap::new();
    let ctx = ItemCtx {
        door,
        run_id,
        flow: &l.flow,
    };
    let nodes: Vec<Value> = snap
        .nodes
        .iter()
        .map(|n| {
            let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
            for it in &n.items {
                *counts.entry(item_state(&it.status)).or_default() += 1;
            }
            let attempts_total: u32 = n.items.iter().map(|i| i.attempt).sum();
            let (queued, ended) = times.get(&n.id).copied().unwrap_or_default();
            let inline = n.items.len() <= INLINE_ITEMS;
            json!({
                "id": n.id,
                "name": n.name,
                "state": n.state.name(),
                "error": n.error,
                "output": n.output.as_deref().map(clip),
                "queued_ms": queued,
                "ended_ms": ended,
                "total": n.items.len(),
                "counts": counts,
                "attempts": attempts_total,
                "items": if inline {
                    Value::Array(items_json(&ctx, n, atts.get(&n.id), 0..n.items.len(), &none))
                } else {
                    Value::Null
                },
            })
        })
        .collect();
    let tail_from = l.rows.len().saturating_sub(JOURNAL_TAIL);
    Some(json!({
        "run": {
            "run_id": l.rec.run_id, "flow": l.rec.flow, "state": l.rec.state,
            "master": l.rec.master, "started_ms": l.rec.started_ms, "updated_ms": l.rec.updated_ms,
        },
        "status": snap.status,
        "output": snap.output.as_deref().map(clip),
        "error": snap.error,
        "seq": l.rows.last().map_or(0, |r| r.id),
        "journal_len": l.rows.len(),
        "journal": l.rows[tail_from..].iter().map(event_json).collect::<Vec<_>>(),
        "graph": graph(&l.flow),
        "nodes": nodes,
    }))
}

/// The prompts the engine rendered for `node`'s attempts: the engine is pure, so a copy of
/// the state just before an attempt was journaled asks for that same attempt again, prompt
/// included. At most `limit` copies are made (each may render many items).
fn prompts(l: &Loaded, node: &str, limit: usize) -> HashMap<(usize, u32), String> {
    let mut out = HashMap::new();
    let Some(JournalEvent::RunStarted { .. }) = l.events.first() else {
        return out;
    };
    let Ok(mut state) = RunState::replay(l.flow.clone(), &l.events[..1], true) else {
        return out;
    };
    let mut copies = 0;
    for ev in &l.events[1..] {
        if let JournalEvent::AttemptStarted {
            node: n,
            item,
            attempt,
            at_ms,
            ..
        } = ev
        {
            if n == node && !out.contains_key(&(*item, *attempt)) && copies < limit {
                copies += 1;
                let mut copy = state.clone();
                for a in copy.next_actions(*at_ms) {
                    if let Effect::Dispatch(d) = a {
                        if d.node == node {
                            out.entry((d.item, d.attempt)).or_insert(d.prompt);
                        }
                    }
                }
            }
        }
        state.apply(ev);
    }
    out
}

/// `GET /api/runs/{id}/nodes/{node}?offset=&limit=`: one node's items.
pub fn node(
    door: &DashboardDoor,
    run_id: &str,
    node: &str,
    offset: usize,
    limit: usize,
) -> Option<Value> {
    let l = load(door, run_id)?;
    let state = RunState::replay(l.flow.clone(), &l.events, true).ok()?;
    let snap = state.snapshot();
    let n = snap.nodes.iter().find(|n| n.id == node)?;
    let (atts, _) = attempts(&l);
    let end = (offset + limit).min(n.items.len());
    let start = offset.min(end);
    let prompts = if end - start <= INLINE_ITEMS {
        prompts(&l, node, 20)
    } else {
        HashMap::new()
    };
    let spec = l.flow.nodes.iter().find(|x| x.id == node);
    let ctx = ItemCtx {
        door,
        run_id,
        flow: &l.flow,
    };
    Some(json!({
        "id": n.id,
        "state": n.state.name(),
        "total": n.items.len(),
        "offset": start,
        "template": spec.and_then(|s| s.prompt.clone().or(s.command.clone())),
        "items": items_json(&ctx, n, atts.get(node), start..end, &prompts),
    }))
}
