//! Feeding a session and carrying out what it decides: a command noted in its round, a
//! result heard, a turn ended, the first message of `agent task`; a session ending (its
//! callers answered, the panel told) or pausing. Called by the actor only.

use super::deliver::progress_frame;
use super::*;
use crate::agents::session::{CmdId, SessionAction};
use crate::agents::store as agent_store;
use crate::protocol::ServerFrame;

impl Loops {
    /// Notes command `index` of the tab's turn in its session's round (starting a session
    /// for a tab that loops and has none); the session's id, or none when no session takes it.
    pub(super) fn note_command(
        &self,
        tab: &Arc<Client>,
        turn_id: &str,
        index: u32,
        body: &str,
        wants: Option<Option<u32>>,
    ) -> Option<String> {
        let mut live = self.live.lock().expect("loops");
        if !live.contains_key(&tab.id) {
            let max_rounds = wants.filter(|_| self.settings.enabled)?;
            let id = format!("s-{}", uuid::Uuid::new_v4().simple());
            let session =
                Session::new(&id, &tab.id, self.limits(max_rounds), rand::random(), now());
            self.record_start(&id, None, &tab.id);
            live.insert(tab.id.clone(), Live::new(session, None));
        }
        let l = live.get_mut(&tab.id)?;
        if l.round_turn != turn_id {
            // A new turn: what an earlier turn left uncollected is not this round's.
            l.round.clear();
            l.round_turn = turn_id.to_string();
        }
        l.round.insert(
            index,
            RoundCommand {
                command: body.trim().to_string(),
                ok: false,
                output: String::new(),
            },
        );
        l.running = Some(body.trim().to_string());
        l.last = Some(LastCommand {
            command: body.trim().to_string(),
            ok: None,
        });
        Some(l.session.id().to_string())
    }

    /// `agent task`'s session (already live): journaled, and its first message sent.
    pub(super) fn begin(&self, tab: &str, task: &str) {
        let (actions, with_files) = {
            let mut live = self.live.lock().expect("loops");
            let Some(l) = live.get_mut(tab) else { return };
            let name = l.agent.as_ref().map(|a| a.spec.name.clone());
            self.record_start(l.session.id(), name.as_deref(), tab);
            (l.session.begin(task, now()), l.has_pending())
        };
        if with_files {
            self.journal_pending(tab);
        }
        self.act(tab, actions);
    }

    /// Cancels the tab's session commands that run now; returns them.
    pub(super) fn cancel_inflight(&self, tab: &str) -> Vec<String> {
        let gone = self
            .inflight
            .lock()
            .expect("loops")
            .remove(tab)
            .unwrap_or_default();
        gone.into_iter()
            .map(|c| {
                c.cancel.cancel();
                c.command
            })
            .collect()
    }

    /// The tab's turn ended with these commands (all of them, in order).
    pub(super) fn turn_ended(
        &self,
        tab: &str,
        turn_id: &str,
        text: &str,
        commands: Vec<FoundCommand>,
    ) {
        if !self.has_session(tab) {
            return;
        }
        if let Some(l) = self.live.lock().expect("loops").get_mut(tab) {
            l.last_text = text.to_string();
        }
        self.reflected(tab, text);
        self.feed(tab, Input::Streaming(false));
        self.feed(
            tab,
            Input::TurnEnded {
                tab: tab.to_string(),
                turn_id: turn_id.to_string(),
                text: text.to_string(),
                commands,
            },
        );
    }

    /// A command of the tab's turn has its result.
    pub(super) fn result(
        &self,
        tab: &str,
        turn_id: &str,
        index: u32,
        ok: bool,
        output: &str,
        malformed: bool,
    ) {
        if let Some(list) = self.inflight.lock().expect("loops").get_mut(tab) {
            list.retain(|c| !(c.turn_id == turn_id && c.index == index));
        }
        {
            let mut live = self.live.lock().expect("loops");
            let Some(l) = live.get_mut(tab) else { return };
            if let Some(c) = l.round.get_mut(&index) {
                c.ok = ok;
                c.output = output.to_string();
                l.last = Some(LastCommand {
                    command: c.command.clone(),
                    ok: Some(ok),
                });
            }
            l.running = None;
        }
        self.feed(
            tab,
            Input::Result {
                id: CmdId {
                    tab: tab.to_string(),
                    turn_id: turn_id.to_string(),
                    index,
                },
                ok,
                output: output.to_string(),
                malformed,
            },
        );
    }

    /// Feeds one input to a tab's session and carries out what it decides.
    pub(super) fn feed(&self, tab: &str, input: Input) {
        let actions = {
            let mut live = self.live.lock().expect("loops");
            let Some(l) = live.get_mut(tab) else { return };
            l.session.handle(input, now())
        };
        if !actions.is_empty() {
            self.act(tab, actions);
        }
    }

    pub(super) fn act(&self, tab: &str, actions: Vec<SessionAction>) {
        for a in actions {
            match a {
                SessionAction::Deliver {
                    text,
                    round,
                    of,
                    deliver_id,
                    primer,
                    vars,
                } => self.deliver(tab, text, round, of, deliver_id, primer, vars),
                SessionAction::End { why, answer } => self.end(tab, why, answer),
                SessionAction::Pause { why } => self.paused(tab, why),
                SessionAction::ForgedResult => {
                    if let Some(id) = self.session_id(tab) {
                        self.progress(
                            tab,
                            &id,
                            "note",
                            None,
                            Some(
                                "模型自己写了结果，已忽略 / the model wrote a result itself (ignored)",
                            ),
                        );
                    }
                }
            }
        }
    }

    pub(super) fn session_id(&self, tab: &str) -> Option<String> {
        let live = self.live.lock().expect("loops");
        live.get(tab).map(|l| l.session.id().to_string())
    }

    pub(super) fn end(&self, tab: &str, why: Why, answer: Option<String>) {
        let Some(l) = self.live.lock().expect("loops").remove(tab) else {
            return;
        };
        self.withdraw_files(tab);
        let id = l.session.id().to_string();
        let why_text = why.text();
        let _ = agent_store::set_session_state(
            &self.store,
            &id,
            "ended",
            Some(&format!("{}: {why_text}", why.code())),
            Some(crate::store::now_ms()),
        );
        if l.has_pending() {
            // Nothing of an ended session is sent again.
            let _ = agent_store::set_pending(&self.store, &id, None);
        }
        tracing::info!(session = %id, tab, why = why.code(), round = l.session.round(), "agent session ended");
        {
            let mut ended = self.ended.lock().expect("loops");
            ended.retain(|e| e.tab != tab);
            ended.push(Ended {
                session: id.clone(),
                agent: l.agent.as_ref().map(|a| a.spec.name.clone()),
                tab: tab.to_string(),
                round: l.session.round(),
                of: l.session.max_rounds(),
                why: why_text.clone(),
                last: l.last.clone(),
            });
            if ended.len() > ENDED_KEPT {
                let over = ended.len() - ENDED_KEPT;
                ended.drain(..over);
            }
        }
        let mut frame = progress_frame(
            &id,
            l.agent.as_ref(),
            "ended",
            None,
            Some(&why_text),
            (l.session.round(), l.session.max_rounds()),
        );
        if let ServerFrame::FlowEvent {
            detail: Some(d), ..
        } = &mut frame
        {
            // A person's Stop: what it cancelled, and (empty now; each later one comes as a
            // note) what of the streaming turn will not run.
            d["cancelled"] = serde_json::json!(l.cancelled);
            d["not_run"] = serde_json::json!([]);
            d["jobs"] = serde_json::json!(self.jobs.running_of(tab));
        }
        let _ = self.registry.send(tab, &frame);
        let result = match answer {
            Some(a) => Ok(a),
            None => Err(LoopError::Ended(why_text)),
        };
        for w in l.waiters {
            let _ = w.send(result.clone());
        }
    }

    pub(super) fn paused(&self, tab: &str, why: Why) {
        let Some(id) = self.session_id(tab) else {
            return;
        };
        if let Some(l) = self.live.lock().expect("loops").get_mut(tab) {
            l.paused_at.get_or_insert(now());
        }
        // The tab drops a delivery of a paused session: its files are withdrawn (a resume
        // grants them again).
        self.withdraw_files(tab);
        let text = why.text();
        let _ = agent_store::set_session_state(
            &self.store,
            &id,
            "paused",
            Some(&format!("{}: {text}", why.code())),
            None,
        );
        self.progress(tab, &id, "paused", None, Some(&text));
    }

    /// A `flow_event` for the tab's panel: the session's round, the command running, why
    /// it paused or ended (for the person; never typed to the model).
    pub(super) fn progress(
        &self,
        tab: &str,
        session: &str,
        state: &str,
        command: Option<&str>,
        why: Option<&str>,
    ) {
        let (agent, round, of) = {
            let live = self.live.lock().expect("loops");
            match live.get(tab) {
                Some(l) => (l.agent.clone(), l.session.round(), l.session.max_rounds()),
                None => (None, 0, 0),
            }
        };
        self.progress_of(
            tab,
            session,
            agent.as_ref(),
            state,
            command,
            why,
            (round, of),
        );
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn progress_of(
        &self,
        tab: &str,
        session: &str,
        agent: Option<&AgentRecord>,
        state: &str,
        command: Option<&str>,
        why: Option<&str>,
        round: (u32, u32),
    ) {
        let frame = progress_frame(session, agent, state, command, why, round);
        let _ = self.registry.send(tab, &frame);
    }
}
