//! Running the standing rules (SPEC §19): every event on the bus is matched against the rules
//! kept by [`crate::events::Rules`]; each rule on its topic whose loop guard allows it runs
//! its command for its author, with the event bound as `$EVENT` (and `$EVENT_TOPIC`, …), its
//! `where` checked first. A rule's command runs in a task of its own, so a slow one never
//! holds up the bus or another rule.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::commands::permissions::{Caller, Role, Source};
use crate::control::Control;
use crate::events::{Event, Rule};

/// Hears the bus until `shutdown`.
pub async fn run(control: Arc<Control>, shutdown: CancellationToken) {
    let bus = control.bus.clone();
    let mut rx = bus.subscribe();
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
            control
                .tracker
                .spawn(async move { fire(&c, &rule, &ev).await });
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
