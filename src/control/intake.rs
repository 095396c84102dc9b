//! Intake: the commands found in a tab's text. Streamed replies are scanned as they come
//! (`on_chunk`, `on_turn_end`), the person's messages as they are sent (`on_user_input`);
//! each command runs with its caller's authority, a looping tab's commands feed the agent loop,
//! and a person's Stop holds the tab (docs/agents.md, "Stop is final").

use super::*;
use crate::agent_loop::{Show, Start, TurnEvent};

/// A streamed delta of a tab's reply: commands complete in it run now.
pub fn on_chunk(control: &Arc<Control>, client: &Arc<Client>, turn_id: &str, seq: u64, text: &str) {
    if control.commands.turn_ended(&client.id, turn_id) {
        return;
    }
    let (items, first) = {
        let mut turn = control
            .commands
            .turns
            .entry(client.id.clone())
            .or_insert_with(|| Turn::new(turn_id));
        if turn.id != turn_id {
            *turn = Turn::new(turn_id);
        } else if seq == 0 && turn.chunks > 0 {
            turn.restart();
        }
        turn.chunks += 1;
        let items = turn.scanner.push_chunk(text);
        let items = turn.skip_replayed(items);
        let first = turn.note(&items);
        (items, first)
    };
    control.loops.send(TurnEvent::Streaming {
        tab: client.id.clone(),
    });
    run_items(
        control,
        client,
        Source::Reply,
        items,
        Some((turn_id, first)),
    );
}

/// The reply is complete: commands not already seen in its chunks run now. A turn that
/// already ended (a re-sent `turn_end`, a re-rendered page) runs nothing again.
pub fn on_turn_end(control: &Arc<Control>, client: &Arc<Client>, turn_id: &str, text: &str) {
    if control.commands.turn_ended(&client.id, turn_id) {
        tracing::debug!(client = %client.id, turn_id, "turn already ended: its commands ran once");
        return;
    }
    let mut turn = match control.commands.turns.remove(&client.id) {
        Some((_, turn)) if turn.id == turn_id => turn,
        _ => Turn::new(turn_id),
    };
    let items = turn.scanner.turn_end(text);
    let items = turn.skip_replayed(items);
    let first = turn.note(&items);
    control.commands.end_turn(&client.id, turn_id);
    control.asks.note_reply(&client.id, text);
    run_items(
        control,
        client,
        Source::Reply,
        items,
        Some((turn_id, first)),
    );
    control.loops.send(TurnEvent::TurnEnded {
        tab: client.id.clone(),
        turn_id: turn_id.to_string(),
        text: text.to_string(),
        commands: std::mem::take(&mut turn.found),
    });
}

/// A reply finished (a free turn or a task's answer): one turn of the memory scopes the tab
/// is in (`global` and its group), whose memories cool down.
pub fn count_turn(control: &Control, client: &Client) {
    let group = client.with_info(|i| i.group.clone());
    let mut scopes = vec![crate::memory::GLOBAL];
    if let Some(g) = group.as_deref().filter(|g| *g != crate::memory::GLOBAL) {
        scopes.push(g);
    }
    control.commands.memory.turn(&scopes);
}

/// What the person typed: every command in it runs with the person's authority. A message
/// to a tab that loops pauses its session, unless it only says `agent stop|pause|resume`
/// (the panel's buttons send exactly that).
pub fn on_user_input(control: &Arc<Control>, client: &Arc<Client>, text: &str) {
    let items = scan_text(text);
    if !only_agent_control(text, &items) {
        // The person's own message: a Stop there is over, a running session pauses.
        control.loops.send(TurnEvent::PersonSpoke {
            tab: client.id.clone(),
        });
    }
    for group in chained(text, items) {
        match group {
            Chained::One(item) => run_items(control, client, Source::UserInput, vec![item], None),
            Chained::Chain(found) => run_chain(control, client, found),
        }
    }
}

/// The commands of one message, with `?<a>! → ?<b>!` (or `->`) runs joined into chains.
pub(super) enum Chained {
    One(ScanItem),
    Chain(Vec<FoundCommand>),
}

/// Groups found commands joined only by an arrow (`→` or `->`, whitespace around it).
pub(super) fn chained(text: &str, items: Vec<ScanItem>) -> Vec<Chained> {
    let mut out: Vec<Chained> = Vec::new();
    for item in items {
        let joined = match (&item, out.last()) {
            (Ok(found), Some(Chained::One(Ok(prev)))) => arrow_between(text, prev, found),
            (Ok(found), Some(Chained::Chain(steps))) => steps
                .last()
                .is_some_and(|prev| arrow_between(text, prev, found)),
            _ => false,
        };
        let Ok(found) = item else {
            out.push(Chained::One(item));
            continue;
        };
        if !joined {
            out.push(Chained::One(Ok(found)));
            continue;
        }
        match out.pop() {
            Some(Chained::One(Ok(prev))) => out.push(Chained::Chain(vec![prev, found])),
            Some(Chained::Chain(mut steps)) => {
                steps.push(found);
                out.push(Chained::Chain(steps));
            }
            _ => unreachable!("joined only after a found command"),
        }
    }
    out
}

pub(super) fn arrow_between(text: &str, prev: &FoundCommand, next: &FoundCommand) -> bool {
    text.get(prev.end..next.start)
        .is_some_and(|between| matches!(between.trim(), "→" | "->"))
}

/// A chain across commands the person typed: one task, steps in order, one `cmd_result`.
pub(super) fn run_chain(control: &Arc<Control>, client: &Arc<Client>, found: Vec<FoundCommand>) {
    let caller = control.commands.caller(client, Source::UserInput);
    let bodies: Vec<String> = found
        .into_iter()
        .map(|f| f.body.trim().to_string())
        .collect();
    let control = control.clone();
    let client = client.clone();
    crate::spawn::tracked(&control.tracker.clone(), async move {
        let cmd = LiveCmd::new(&client, &bodies.join(" → "));
        let refs: Vec<&str> = bodies.iter().map(String::as_str).collect();
        let outcome = run_command_with(&control, &caller, &refs, None, Some(&cmd)).await;
        answer(&control, &client, &cmd, outcome);
    });
}

/// Whether a message is nothing but `agent stop|pause|resume|status` commands.
pub(super) fn only_agent_control(text: &str, items: &[ScanItem]) -> bool {
    use crate::commands::agent::AgentCmd;
    let mut rest = text.to_string();
    for item in items {
        let Ok(found) = item else { return false };
        // Only a body whose first word is `agent`/`agents` parses to an agent command: any
        // other (a fan-out's 1,000 targets) is not parsed here a first time.
        if !found.body.trim_start().starts_with("agent") {
            return false;
        }
        match crate::commands::parser::parse(&found.body) {
            Ok(Command::Agent(
                AgentCmd::Stop(_) | AgentCmd::Pause(_) | AgentCmd::Resume(_) | AgentCmd::Status(_),
            )) => rest = rest.replacen(&format!("?<{}>!", found.body), "", 1),
            _ => return false,
        }
    }
    !items.is_empty() && rest.trim().is_empty()
}

impl Commands {
    /// Whether `turn_id` of this tab already ended.
    fn turn_ended(&self, tab: &str, turn_id: &str) -> bool {
        self.ended_turns
            .get(tab)
            .is_some_and(|t| t.iter().any(|id| id == turn_id))
    }

    fn end_turn(&self, tab: &str, turn_id: &str) {
        let mut ended = self.ended_turns.entry(tab.to_string()).or_default();
        ended.push_back(turn_id.to_string());
        while ended.len() > ENDED_TURNS_KEPT {
            ended.pop_front();
        }
    }

    /// The variables of every caller (the agent loop keeps `$R1`, `$R2`, … there).
    pub fn vars(&self) -> Arc<Variables> {
        self.vars.clone()
    }
}

/// Whether this tab's replies loop when no session runs there yet: `Some(max_rounds)` for a
/// master or foreman whose card says `loop: true` or that said `agent loop on`.
pub(super) fn loop_wish(control: &Control, client: &Client) -> Option<Option<u32>> {
    let card = control.commands.card_for(client);
    let role = client.role();
    if role == Role::Worker {
        return None;
    }
    let card_loop = card.as_ref().is_some_and(|c| c.looping && c.role == role);
    (card_loop || control.loops.loop_is_on(&client.id)).then(|| card.and_then(|c| c.max_rounds))
}

pub(super) fn run_items(
    control: &Arc<Control>,
    client: &Arc<Client>,
    source: Source,
    items: Vec<ScanItem>,
    turn: Option<(&str, u32)>,
) {
    for (k, item) in items.into_iter().enumerate() {
        // (turn id, index in the turn) of a reply's command, for the agent loop.
        let at = turn.map(|(id, first)| (id.to_string(), first + k as u32));
        match item {
            Ok(found) => run_found(control, client, source, found, at),
            Err(e) => {
                let output = e.to_string();
                if let Some((turn_id, index)) = at {
                    // A session counts it as a mistake; it runs nothing.
                    let (start, _) = tokio::sync::oneshot::channel();
                    control.loops.send(TurnEvent::CommandFound {
                        tab: client.clone(),
                        turn_id: turn_id.clone(),
                        index,
                        body: output.clone(),
                        malformed: true,
                        wants: loop_wish(control, client),
                        start,
                    });
                    control.loops.send(TurnEvent::CommandDone {
                        tab: client.id.clone(),
                        turn_id,
                        index,
                        ok: false,
                        output: output.clone(),
                        show: None,
                    });
                }
                answer(
                    control,
                    client,
                    &LiveCmd::new(client, ""),
                    CmdOutcome {
                        success: false,
                        output,
                    },
                )
            }
        }
    }
}

/// One command found in a tab's text, run with its caller's authority. A reply's command
/// goes to the agent loop first ([`TurnEvent::CommandFound`]), which says whether it runs
/// as a session's command, already ran, or belongs to no session.
fn run_found(
    control: &Arc<Control>,
    client: &Arc<Client>,
    source: Source,
    found: FoundCommand,
    at: Option<(String, u32)>,
) {
    let mut caller = control.commands.caller(client, source);
    if source == Source::Reply {
        // An agent session's tab acts with its agent's tools.
        if let Some((p, scope)) = control.loops.agent_permissions(&client.id) {
            caller.permissions = p;
            caller.memory_scope = Some(scope);
        }
    }
    if source == Source::Reply && control.loops.is_stopped(&client.id) {
        // A person stopped this tab: the reply that was streaming (or any before they speak
        // again) runs nothing; the panel lists what was not run.
        tracing::info!(client = %client.id, command = %found.body.trim(), "not run: the person stopped this tab");
        control.loops.send(TurnEvent::NotRun {
            tab: client.id.clone(),
            command: found.body.clone(),
        });
        answer(
            control,
            client,
            &LiveCmd::new(client, found.body.trim()),
            CmdOutcome {
                success: false,
                output: "未运行：你已停止这个标签页的循环 / not run: you stopped this tab's loop (write in this tab to start again)".into(),
            },
        );
        return;
    }
    if source == Source::Reply && !caller.permissions.reply_commands {
        // A worker's reply: commands are data. Say so once, quietly, in the log; an MCP call
        // refused gets its audit line like every other MCP call.
        tracing::debug!(client = %client.id, "command in a reply not run (role)");
        if found.body.trim_start().starts_with("mcp") {
            tracing::info!(target: "aicard::audit", caller = %client.id, command = %found.body.trim(), decision = "refused: a worker's reply", "mcp");
        }
        return;
    }
    let start = at.as_ref().map(|(turn_id, index)| {
        let (tx, rx) = tokio::sync::oneshot::channel();
        control.loops.send(TurnEvent::CommandFound {
            tab: client.clone(),
            turn_id: turn_id.clone(),
            index: *index,
            body: found.body.clone(),
            malformed: crate::commands::parser::parse(&found.body).is_err(),
            wants: loop_wish(control, client),
            start: tx,
        });
        rx
    });
    let control = control.clone();
    let client = client.clone();
    let from_reply = source == Source::Reply;
    if from_reply {
        control.commands.count_running(&client.id, true);
    }
    crate::spawn::tracked(&control.tracker.clone(), async move {
        let start = match start {
            // The loop is gone (the hub stops): the command runs as any other.
            Some(rx) => rx.await.unwrap_or(Start::Free),
            None => Start::Free,
        };
        let cmd = LiveCmd::new(&client, found.body.trim());
        let bodies = [found.body.as_str()];
        let run = run_command_with(&control, &caller, &bodies, None, Some(&cmd));
        let (outcome, cancel) = match start {
            Start::Replayed => {
                if from_reply {
                    control.commands.count_running(&client.id, false);
                }
                return;
            }
            Start::Free => (run.await, None),
            // A person's Stop cancels a session's running command: its tasks are withdrawn
            // from their tabs and its processes killed as it is dropped.
            Start::Session(token) => (
                tokio::select! {
                    outcome = run => outcome,
                    () = token.cancelled() => CmdOutcome {
                        success: false,
                        output: "已取消：你停止了会话 / cancelled: you stopped the session".into(),
                    },
                },
                Some(()),
            ),
        };
        let show: Show = {
            let control = control.clone();
            let client = client.clone();
            let outcome = outcome.clone();
            Box::new(move || {
                answer(&control, &client, &cmd, outcome);
                if from_reply {
                    control.commands.count_running(&client.id, false);
                }
            })
        };
        match (cancel, at) {
            // The loop journals it, shows it, then hears it, in that order.
            (Some(()), Some((turn_id, index))) => {
                control
                    .loops
                    .done(TurnEvent::CommandDone {
                        tab: client.id.clone(),
                        turn_id,
                        index,
                        ok: outcome.success,
                        output: outcome.output,
                        show: Some(show),
                    })
                    .await
            }
            _ => show(),
        }
    });
}
