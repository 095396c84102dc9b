//! What the loop sends a tab: the results message (the loop's one `deliver` frame, typed
//! with `auto_send` and tagged with its session and round; never into a tab a person
//! stopped) with the files it carries (`attachments`, granted to that connection until the
//! turn it starts shows or the session pauses or ends; docs/files.md; journaled with the session
//! until then, and never sent without them), and the panel's
//! `flow_event`s (a session's progress, a command not run, what a Stop says).

use super::*;
use crate::agents::store as agent_store;
use crate::protocol::{AgentDelivery, AgentTag, ServerFrame};

impl Loops {
    /// A command of a stopped tab's reply that was not run: the panel lists it.
    pub(super) fn not_run(&self, tab: &str, command: &str) {
        let frame = ServerFrame::FlowEvent {
            run_id: String::new(),
            flow: "agent".into(),
            node_id: None,
            state: "note".into(),
            detail: Some(serde_json::json!({
                "kind": "agent",
                "not_run": [command.trim()],
                "why": "未运行：已被停止 / not run: the person stopped the session",
            })),
        };
        let _ = self.registry.send(tab, &frame);
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn deliver(
        &self,
        tab: &str,
        text: String,
        round: u32,
        of: u32,
        deliver_id: String,
        primer: bool,
        vars: Vec<(String, String)>,
    ) {
        let (session_id, agent, commands, files, journal) = {
            let mut live = self.live.lock().expect("loops");
            let Some(l) = live.get_mut(tab) else { return };
            let had_pending = l.has_pending();
            let commands: Vec<RoundCommand> = std::mem::take(&mut l.round).into_values().collect();
            // A resend of the same round carries the same files; a new round its own.
            if l.sent_files.0 != Some(round) {
                l.sent_files = (Some(round), std::mem::take(&mut l.next_files));
            }
            l.last_deliver = deliver_id.clone();
            // Journaled with its files until its turn shows: a restart sends it again.
            l.sent_message = (!l.sent_files.1.is_empty()).then(|| PendingMessage {
                text: text.clone(),
                round,
                primer,
                vars: vars.clone(),
                sends: sends_of(&deliver_id),
                files: l.sent_files.1.clone(),
            });
            (
                l.session.id().to_string(),
                l.agent.clone(),
                commands,
                l.sent_files.1.clone(),
                had_pending || l.has_pending(),
            )
        };
        // Only a session with files touches the journal: a delivery without is no write.
        if journal {
            self.journal_pending(tab);
        }
        let store = &self.store;
        let mut text = text;
        if round > 0 && !commands.is_empty() {
            if let Err(e) =
                agent_store::add_round(store, &session_id, round, &commands, crate::store::now_ms())
            {
                tracing::warn!("round {round} of {session_id} not journaled: {e}");
            }
            if let Some(a) = &agent {
                // Past the threshold, this message also asks for a reflection (once: a resend
                // of the same round carries the same text).
                if let Some((prompt, ids)) = self.observe(a, round, &commands) {
                    text = format!("{text}\n\n{prompt}");
                    if let Some(l) = self.live.lock().expect("loops").get_mut(tab) {
                        l.reflection = Some(ids);
                    }
                }
            }
        }
        for (k, v) in vars {
            if let Err(e) = self.vars.set(tab, &k, v) {
                tracing::warn!("${k} not kept: {e}");
            }
        }
        // After a restart the tab may not be back yet: the store knows it (the frame waits).
        let client = self.registry.resume(tab);
        let text = match (primer, &client) {
            (true, Some(c)) => {
                let limits = self.limits(agent.as_ref().and_then(|a| a.spec.max_rounds));
                // The first message recalls by the task; a later primer by the round's commands.
                let about = if round == 0 {
                    text.clone()
                } else {
                    commands
                        .iter()
                        .map(|c| c.command.as_str())
                        .collect::<Vec<_>>()
                        .join(" ")
                };
                let recalled = agent.as_ref().and_then(|a| self.recall(a, &about));
                format!(
                    "{}\n\n{text}",
                    self.host
                        .primer(c, agent.as_ref(), &limits, recalled.as_deref())
                )
            }
            _ => text,
        };
        if self.is_stopped(tab) {
            tracing::info!(tab, "results not typed: a person stopped this tab");
            return;
        }
        let kept = &self.asks.hub().tasks.files;
        // Never the text without its files: a file whose bytes are gone from the data dir
        // (deleted while the hub was down) pauses the session instead.
        let missing: Vec<&str> = files
            .iter()
            .filter(|f| !kept.blob_path(f).is_file())
            .map(|f| f.name.as_str())
            .collect();
        if !missing.is_empty() {
            let why = format!(
                "集线器已没有文件 {0} 的内容 / the hub no longer has the bytes of {0} (gone from its data dir): attach it again",
                missing.join(", ")
            );
            tracing::warn!(tab, "agent results not sent: {why}");
            kept.revoke_deliveries(tab);
            self.feed(tab, Input::DeliveryFailed(why));
            return;
        }
        // Granted to this connection for this delivery only; an earlier send's ids go.
        kept.revoke_deliveries(tab);
        let attachments = files
            .iter()
            .map(|f| kept.grant_delivery(tab, &deliver_id, f))
            .collect();
        if let Some(c) = &client {
            // The page may echo the sent text as the person's message: it is not theirs.
            c.typed_by_hub(&crate::protocol::Prompt::from(text.clone()));
        }
        let frame = ServerFrame::Deliver {
            text,
            auto_send: true,
            run_id: None,
            deliver_id: Some(deliver_id),
            agent: Some(AgentDelivery {
                agent: AgentTag {
                    session: session_id.clone(),
                    round,
                    of,
                    name: agent.as_ref().map(|a| a.spec.name.clone()),
                },
                attachments,
            }),
        };
        if let Err(e) = self.registry.send(tab, &frame) {
            tracing::warn!("agent results not sent to {tab}: {e}");
        }
        self.progress(tab, &session_id, "sent", None, None);
    }
}

impl Loops {
    /// A command of `tab` produced `file` (a `returns: file` skill): it goes with the tab's
    /// next message when a session runs there; false when none does.
    pub fn result_file(&self, tab: &str, file: FileRef) -> bool {
        let mut live = self.live.lock().expect("loops");
        let Some(l) = live.get_mut(tab) else {
            return false;
        };
        if !l
            .next_files
            .iter()
            .any(|f| f.sha256 == file.sha256 && f.name == file.name)
        {
            l.next_files.push(file);
        }
        drop(live);
        self.journal_pending(tab);
        true
    }

    /// The turn a delivery started shows in `tab`: its files were attached (or the model
    /// answered the person instead); their grants go.
    pub(super) fn delivery_seen(&self, tab: &str) {
        // Called on every chunk of every tab: only a delivery with files has grants to drop.
        let had = match self.live.lock().expect("loops").get_mut(tab) {
            Some(l) if !l.sent_files.1.is_empty() => {
                l.sent_files.1.clear();
                l.sent_message = None;
                true
            }
            _ => false,
        };
        if had {
            self.withdraw_files(tab);
            self.journal_pending(tab);
        }
    }

    /// The tab may no longer fetch the files of any delivery (seen, withdrawn, or the
    /// session over).
    pub(super) fn withdraw_files(&self, tab: &str) {
        self.asks.hub().tasks.files.revoke_deliveries(tab);
    }
}

/// The send count in a deliver id (`SESSION-rROUND-sN`).
fn sends_of(deliver_id: &str) -> u32 {
    deliver_id
        .rsplit("-s")
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// A `flow_event` for a tab's panel about one session.
pub(super) fn progress_frame(
    session: &str,
    agent: Option<&AgentRecord>,
    state: &str,
    command: Option<&str>,
    why: Option<&str>,
    (round, of): (u32, u32),
) -> ServerFrame {
    let mut detail = serde_json::json!({"kind": "agent", "round": round, "of": of});
    if let Some(c) = command {
        detail["command"] = c.into();
    }
    if let Some(w) = why {
        detail["why"] = w.into();
    }
    ServerFrame::FlowEvent {
        run_id: session.to_string(),
        flow: match agent {
            Some(a) => format!("agent:{}", a.spec.name),
            None => "agent".into(),
        },
        node_id: None,
        state: state.to_string(),
        detail: Some(detail),
    }
}

/// What a person's Stop says: the commands it cancelled, and the background jobs the tab
/// started that still run (they go on: `?<jobs kill ID>!` ends one).
pub(super) fn stopped_text(cancelled: &[String], jobs: &[String]) -> String {
    let mut out =
        String::from("已停止 / stopped: nothing is typed into this tab until you write in it");
    if !cancelled.is_empty() {
        let list: Vec<String> = cancelled.iter().map(|c| format!("`{c}`")).collect();
        out.push_str(&format!("; 已取消 / cancelled: {}", list.join(", ")));
    }
    if !jobs.is_empty() {
        out.push_str(&format!(
            "; 后台任务仍在运行 / background jobs still running: {} (?‹jobs kill ID›! ends one)",
            jobs.join(", ")
        ));
    }
    out
}
