//! Running the standing rules (docs/cluster.md): every event on the bus is matched against the rules
//! kept by [`crate::events::Rules`]; each rule on its topic whose loop guard allows it runs
//! its command for its author, with the event bound as `$EVENT` (and `$EVENT_TOPIC`, …), its
//! `where` checked first. A rule's command runs in a task of its own, so a slow one never
//! holds up the bus or another rule.
//!
//! Flows whose file says `on: {event, where}` run the same way: once per matching event, the
//! run carrying the flow in its cause (so its own events never start it again), at most
//! [`crate::events::MAX_DEPTH`] deep like any rule.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use crate::commands::permissions::{Caller, Role, Source};
use crate::control::Control;
use crate::events::{Event, Rule};

/// Hears the bus until `shutdown`.
pub async fn run(control: Arc<Control>, shutdown: CancellationToken) {
    let bus = control.bus.clone();
    let mut rx = bus.subscribe();
    let triggers = FlowTriggers::default();
    loop {
        let ev = tokio::select! {
            ev = bus.next(&mut rx) => match ev { Some(ev) => ev, None => return },
            _ = shutdown.cancelled() => return,
        };
        for rule in control.rules.for_topic(&ev.topic) {
            if !ev.cause.may_fire(rule.id) {
                tracing::debug!(rule = rule.id, topic = %ev.topic, "rule not fired: its own event, or too deep");
                continue;
            }
            let (c, ev) = (control.clone(), ev.clone());
            crate::spawn::tracked(&control.tracker, async move { fire(&c, &rule, &ev).await });
        }
        for t in triggers.current(&control).iter() {
            if crate::events::matches(&t.on.event, &ev.topic) && ev.cause.may_fire(t.id) {
                start_flow(&control, t, &ev);
            }
        }
    }
}

/// A flow with `on:`, as last loaded.
struct RuleTrigger {
    flow: String,
    on: crate::flows::model::OnEvent,
    /// Its declared inputs.
    inputs: Vec<String>,
    /// Its id in an event's cause: negative, so never a rule's.
    id: i64,
}

/// The flows with `on:`: rescanned when a flow file's size or time, or a saved flow, changed
/// (a directory listing and one query per event; the files are parsed only after a change).
#[derive(Default)]
struct FlowTriggers {
    cache: Mutex<(Vec<Stamp>, Arc<Vec<RuleTrigger>>)>,
}

/// A flow's (name, time, size): saved flows carry their save time and size 0.
type Stamp = (String, i64, u64);

impl FlowTriggers {
    fn current(&self, control: &Control) -> Arc<Vec<RuleTrigger>> {
        let stamps = stamps(control);
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.0 != stamps {
            let mut names: Vec<&str> = stamps.iter().map(|s| s.0.as_str()).collect();
            names.dedup();
            let triggers = names
                .into_iter()
                .filter_map(|name| {
                    let (flow, _) = crate::runner::Runner::load_flow(control, name).ok()?;
                    let on = flow.on?;
                    Some(RuleTrigger {
                        id: trigger_id(&flow.name),
                        flow: flow.name,
                        on,
                        inputs: flow.inputs.keys().cloned().collect(),
                    })
                })
                .collect();
            *cache = (stamps, Arc::new(triggers));
        }
        cache.1.clone()
    }
}

/// (name, time, size) of every flow a run may name: saved flows and `flows_dir/*.yaml`.
fn stamps(control: &Control) -> Vec<Stamp> {
    let mut out: Vec<Stamp> = control
        .store
        .saved_flow_stamps()
        .unwrap_or_default()
        .into_iter()
        .map(|(name, ms)| (name, ms, 0))
        .collect();
    if let Ok(dir) = std::fs::read_dir(&control.config.flows_dir) {
        for e in dir.flatten() {
            let p = e.path();
            if !matches!(p.extension().and_then(|x| x.to_str()), Some("yaml" | "yml")) {
                continue;
            }
            let (Some(stem), Ok(meta)) = (p.file_stem().and_then(|s| s.to_str()), e.metadata())
            else {
                continue;
            };
            let modified = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos() as i64);
            out.push((stem.to_string(), modified, meta.len()));
        }
    }
    out.sort();
    out
}

/// A flow's id in causes: a stable negative number from its name (FNV-1a).
fn trigger_id(flow: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in flow.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    -((h >> 2) as i64) - 1
}

/// The inputs a run started by `ev` gets: each declared input named like one of the event's
/// variables without `EVENT_` (`topic`, `text`, `run`, `flow`, `node`, `output`, …), and
/// `event` for the whole event as JSON.
fn event_inputs(declared: &[String], ev: &Event) -> BTreeMap<String, String> {
    let vars = ev.vars();
    declared
        .iter()
        .filter_map(|name| {
            let key = match name.as_str() {
                "event" => "EVENT".to_string(),
                other => format!("EVENT_{}", other.to_ascii_uppercase()),
            };
            vars.get(&key).map(|v| (name.clone(), v.clone()))
        })
        .collect()
}

fn start_flow(control: &Arc<Control>, t: &RuleTrigger, ev: &Event) {
    let stats = &control.bus.stats;
    if let Some(cond) = &t.on.cond {
        match crate::flows::template::eval_condition(cond, &ev.vars()) {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                stats.count_failed();
                tracing::warn!(flow = %t.flow, "on.where: {e}");
                return;
            }
        }
    }
    let inputs = event_inputs(&t.inputs, ev);
    let cause = ev.cause.then(t.id);
    let note = |run: &str| control.bus.note_run(run, &cause);
    match control
        .runner
        .start_noting(&t.flow, None, inputs, None, &note)
    {
        Ok(run) => {
            stats.count_fired(false);
            tracing::info!(flow = %t.flow, run = %run, topic = %ev.topic, "flow started by an event");
        }
        Err(e) => {
            stats.count_fired(true);
            tracing::warn!(flow = %t.flow, topic = %ev.topic, "flow not started by an event: {e}");
        }
    }
}

/// Who a rule runs as: its author now (role and role card, if the tab is here), else as the
/// author was when the rule was made.
fn author(control: &Control, rule: &Rule) -> Caller {
    let source = match rule.person {
        true => Source::UserInput,
        false => Source::Reply,
    };
    match control.registry.get(&rule.author) {
        Some(client) => control.commands.caller(&client, source),
        None => Caller::new(
            rule.author.clone(),
            Role::parse(&rule.role).unwrap_or(Role::Worker),
            rule.group.clone(),
            source,
        ),
    }
}

async fn fire(control: &Arc<Control>, rule: &Rule, ev: &Event) {
    let stats = &control.bus.stats;
    let cmd = match crate::commands::parser::parse(&rule.command) {
        Ok(c) => c,
        Err(e) => {
            stats.count_failed();
            tracing::warn!(rule = rule.id, "rule command does not parse: {e}");
            return;
        }
    };
    let cond = match rule
        .cond
        .as_deref()
        .map(crate::commands::parser::parse_cond)
    {
        None => None,
        Some(Ok(c)) => Some(c),
        Some(Err(e)) => {
            stats.count_failed();
            tracing::warn!(rule = rule.id, "rule condition does not parse: {e}");
            return;
        }
    };
    let caller = author(control, rule);
    let out = crate::control::run_for_event(
        control,
        &caller,
        cond.as_ref(),
        &cmd,
        ev.vars(),
        ev.cause.then(rule.id),
    )
    .await;
    let Some(out) = out else { return };
    stats.count_fired(!out.success);
    if out.success {
        tracing::info!(rule = rule.id, topic = %ev.topic, "rule ran");
    } else {
        tracing::warn!(rule = rule.id, topic = %ev.topic, output = %out.output, "rule failed");
    }
}
