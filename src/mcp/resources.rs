//! The hub's MCP resources (docs/mcp.md, "Resources"): `aicard://tabs` (the connected tabs, as
//! `list_tabs` gives them), `aicard://flows/NAME` (a flow's YAML) and `aicard://runs/ID` (a
//! run: an MCP call's, a flow's, a `/v1` prompt's). `resources/list` names the tabs, every
//! flow and the runs this hub holds or has in progress; `resources/read` gives one;
//! [`changed`] waits until a resource reads differently, for `resources/subscribe`'s
//! `notifications/resources/updated` (and the 2026-07-28 `subscriptions/listen`).

use std::time::Duration;

use rmcp::model::{Resource, ResourceContents, ResourceTemplate};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::runs::Status;
use super::McpDoor;
use crate::hub::registry::ConnState;

/// The scheme of the hub's resources.
pub const SCHEME: &str = "aicard://";
/// Runs listed by `resources/list` at most (every run is still readable by its URI).
pub const LISTED_RUNS: usize = 200;
/// How often a subscribed resource is read again when nothing woke its watcher (a flow file
/// edited on disk, a tab's health moving).
pub const RECHECK: Duration = Duration::from_secs(1);

const JSON: &str = "application/json";
const YAML: &str = "application/yaml";

/// A resource of the hub, by URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Uri {
    /// `aicard://tabs`.
    Tabs,
    /// `aicard://flows/NAME`.
    Flow(String),
    /// `aicard://runs/ID`.
    Run(String),
}

impl Uri {
    /// Reads `aicard://tabs`, `aicard://flows/NAME`, `aicard://runs/ID`; None for anything
    /// else.
    pub fn parse(uri: &str) -> Option<Uri> {
        let rest = uri.strip_prefix(SCHEME)?;
        if rest == "tabs" {
            return Some(Uri::Tabs);
        }
        let ok = |s: &str| {
            !s.is_empty()
                && !s.contains("..")
                && s.chars()
                    .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.'))
        };
        if let Some(name) = rest.strip_prefix("flows/").filter(|n| ok(n)) {
            return Some(Uri::Flow(name.to_string()));
        }
        if let Some(id) = rest.strip_prefix("runs/").filter(|n| ok(n)) {
            return Some(Uri::Run(id.to_string()));
        }
        None
    }

    pub fn to_uri(&self) -> String {
        match self {
            Uri::Tabs => format!("{SCHEME}tabs"),
            Uri::Flow(n) => format!("{SCHEME}flows/{n}"),
            Uri::Run(id) => format!("{SCHEME}runs/{id}"),
        }
    }

    fn mime(&self) -> &'static str {
        match self {
            Uri::Flow(_) => YAML,
            Uri::Tabs | Uri::Run(_) => JSON,
        }
    }
}

/// `resources/list`: the tabs, every flow, the runs held in memory and the flow runs in
/// progress (at most [`LISTED_RUNS`]).
pub fn list(door: &McpDoor) -> Vec<Resource> {
    let mut out = vec![Resource::new(Uri::Tabs.to_uri(), "tabs")
        .with_title("Tabs / 标签页")
        .with_description("The connected chat tabs: site, label, role, busy, health")
        .with_mime_type(JSON)];
    for name in crate::api::flow_names(door) {
        out.push(
            Resource::new(Uri::Flow(name.clone()).to_uri(), format!("flow {name}"))
                .with_description("The flow's YAML (run it with run_flow)")
                .with_mime_type(YAML),
        );
    }
    let mut runs: Vec<(String, bool)> = door
        .mcp
        .runs
        .ids()
        .into_iter()
        .map(|(id, s)| (id, s == Status::Running))
        .collect();
    for r in door
        .store
        .runs_in(&["running", "paused"])
        .unwrap_or_default()
        .into_iter()
        .rev()
    {
        if !runs.iter().any(|(id, _)| *id == r.run_id) {
            runs.push((r.run_id, true));
        }
    }
    runs.sort_by_key(|(_, running)| !running);
    for (id, running) in runs.into_iter().take(LISTED_RUNS) {
        let state = if running { "running" } else { "ended" };
        out.push(
            Resource::new(Uri::Run(id.clone()).to_uri(), format!("run {id}"))
                .with_description(format!("A run ({state}): status, answers, text"))
                .with_mime_type(JSON),
        );
    }
    out
}

/// `resources/templates/list`: a flow and a run by name.
pub fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new(format!("{SCHEME}flows/{{name}}"), "flow")
            .with_description("A flow's YAML by name (list_flows)")
            .with_mime_type(YAML),
        ResourceTemplate::new(format!("{SCHEME}runs/{{run_id}}"), "run")
            .with_description("A run by the run_id a tool returned")
            .with_mime_type(JSON),
    ]
}

/// A resource's text now; None when there is no such resource.
pub fn render(door: &McpDoor, uri: &Uri) -> Option<String> {
    match uri {
        Uri::Tabs => Some(pretty(&tabs_json(door))),
        Uri::Flow(name) => flow_text(door, name),
        Uri::Run(id) => run_json(door, id).map(|v| pretty(&v)),
    }
}

/// `resources/read`: the resource's one content, or None.
pub fn read(door: &McpDoor, uri: &Uri) -> Option<ResourceContents> {
    let text = render(door, uri)?;
    Some(ResourceContents::TextResourceContents {
        uri: uri.to_uri(),
        mime_type: Some(uri.mime().to_string()),
        text,
        meta: None,
    })
}

/// The connected tabs as `list_tabs` and `aicard://tabs` give them.
pub fn tabs_json(door: &McpDoor) -> Value {
    let adm = door.api.admission().clone();
    let mut tabs: Vec<Value> = door
        .registry
        .all()
        .into_iter()
        .filter(|c| c.state() == ConnState::Connected)
        .map(|c| {
            let info = c.info();
            json!({
                "tab": c.id,
                "site": info.site,
                "label": info.label.clone().unwrap_or_else(|| c.display_of(&info)),
                "role": info.role.as_str(),
                "group": info.group,
                "busy": adm.busy(&c),
                "title": info.title,
                // The decision engine's figures, as on the dashboard and in ?<tabs>!.
                "health": crate::pick::health_json(&door.asks.pick, &c),
            })
        })
        .collect();
    tabs.sort_by(|a, b| a["tab"].as_str().cmp(&b["tab"].as_str()));
    json!({"tabs": tabs})
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

/// A flow's source: a saved flow, a file of the flows directory (`NAME.yaml`, `.yml`), or the
/// file whose `name:` is NAME.
fn flow_text(door: &McpDoor, name: &str) -> Option<String> {
    if let Ok(Some(s)) = door.store.flow_source(name) {
        return Some(s);
    }
    for ext in ["yaml", "yml"] {
        let path = door.config.flows_dir.join(format!("{name}.{ext}"));
        if let Ok(s) = std::fs::read_to_string(path) {
            return Some(s);
        }
    }
    let path = crate::flows::find_by_name(&door.config.flows_dir, name)?;
    std::fs::read_to_string(path).ok()
}

/// A run as JSON: an MCP call's view (as `get_run` gives it), else a journaled run (a flow, a
/// `/v1` or MCP prompt) with its state, its outcome, how many journal events it has and the
/// last of them.
fn run_json(door: &McpDoor, id: &str) -> Option<Value> {
    let held = door.mcp.runs.watch(id).map(|rx| rx.borrow().structured());
    let rec = door.store.run(id).ok().flatten();
    let mut v = match (held, &rec) {
        (Some(v), _) => v,
        (None, Some(_)) => super::runs::stored_flow(door, id)?.structured(),
        (None, None) => return None,
    };
    if let Some(rec) = rec {
        let (events, last) = journal_end(door, id);
        v["flow"] = json!(rec.flow);
        v["state"] = json!(rec.state);
        v["events"] = json!(events);
        if let Some(last) = last {
            v["last_event"] = serde_json::from_str(&last).unwrap_or(Value::Null);
        }
    }
    Some(v)
}

/// How many journal events a run has, and its last (read on every wake of a subscription:
/// two indexed lookups, not the whole journal).
fn journal_end(door: &McpDoor, id: &str) -> (i64, Option<String>) {
    use rusqlite::OptionalExtension;
    door.store
        .read(|c| {
            let last: Option<(i64, String)> = c
                .prepare_cached(
                    "SELECT seq, event FROM journal WHERE run_id = ?1 ORDER BY seq DESC LIMIT 1",
                )?
                .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            // `seq` is dense per run, from 1: the last one is the count.
            Ok(match last {
                Some((n, e)) => (n, Some(e)),
                None => (0, None),
            })
        })
        .unwrap_or((0, None))
}

/// Waits until `uri` reads differently from `last` (None: it did not exist), then sets `last`
/// to what it reads now and returns true; false when `stop` is cancelled first. Woken by the
/// journal (runs), the hub's tab and run events, an MCP run's own changes, and every
/// [`RECHECK`] (flow files, health figures).
pub async fn changed(
    door: &McpDoor,
    uri: &Uri,
    last: &mut Option<String>,
    stop: &CancellationToken,
) -> bool {
    let mut journal = door.store.journal_watch();
    let mut events = door.events.subscribe();
    let mut held = match uri {
        Uri::Run(id) => door.mcp.runs.watch(id),
        _ => None,
    };
    let mut recheck = tokio::time::interval_at(tokio::time::Instant::now() + RECHECK, RECHECK);
    loop {
        // Marked seen before reading: a change after the read wakes the wait below.
        journal.borrow_and_update();
        if let Some(h) = held.as_mut() {
            h.borrow_and_update();
        }
        let now = render(door, uri);
        if now != *last {
            *last = now;
            return true;
        }
        tokio::select! {
            r = journal.changed() => {
                if r.is_err() { return false; }
            }
            r = events.recv() => {
                if let Err(tokio::sync::broadcast::error::RecvError::Closed) = r {
                    return false;
                }
            }
            r = async {
                match held.as_mut() {
                    Some(h) => h.changed().await.is_ok(),
                    None => std::future::pending().await,
                }
            } => {
                if !r {
                    // The run's driver is done: its last view stays readable.
                    held = None;
                }
            }
            _ = recheck.tick() => {}
            _ = stop.cancelled() => return false,
            _ = door.shutdown.cancelled() => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_read_back_and_nothing_else_is_one() {
        for u in [
            Uri::Tabs,
            Uri::Flow("demo".into()),
            Uri::Run("api-1f".into()),
        ] {
            assert_eq!(Uri::parse(&u.to_uri()), Some(u));
        }
        for bad in [
            "aicard://flows/",
            "aicard://flows/../x",
            "aicard://flows/a/b",
            "aicard://runs/",
            "file:///etc/passwd",
            "aicard://tab",
        ] {
            assert_eq!(Uri::parse(bad), None, "{bad}");
        }
    }
}
