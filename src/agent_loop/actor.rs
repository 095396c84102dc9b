//! The agent loop's one actor task: it takes [`TurnEvent`]s (and the doors' verbs) off the
//! loop's bounded channel in the order they were sent, and wakes for the sessions' timers
//! (pacing gaps, arrival checks, wall time, a paused caller's answer). Every session input
//! goes through here, so a command's journal line, its `cmd_result` and the results message
//! that holds it leave in that order.

use super::*;

/// The task that runs the loop; [`Loops::new`] makes it, the composition root spawns
/// [`LoopActor::run`] once.
pub struct LoopActor {
    loops: Arc<Loops>,
    rx: mpsc::Receiver<ActorInput>,
}

impl LoopActor {
    pub(super) fn new(loops: Arc<Loops>, rx: mpsc::Receiver<ActorInput>) -> LoopActor {
        LoopActor { loops, rx }
    }

    /// Goes on with the sessions journaled before a restart, then handles inputs and timers
    /// until the hub stops.
    pub async fn run(mut self, shutdown: CancellationToken) {
        let loops = self.loops;
        loops.restore();
        loop {
            let sleep = match loops.next_wake() {
                Some(t) => std::time::Duration::from_millis(t.saturating_sub(now()).min(1_000)),
                None => std::time::Duration::from_secs(1),
            };
            tokio::select! {
                _ = shutdown.cancelled() => return,
                ev = self.rx.recv() => match ev {
                    Some(ev) => loops.handle(ev),
                    None => return,
                },
                _ = tokio::time::sleep(sleep) => {}
            }
            loops.tick_due();
        }
    }
}

impl Loops {
    /// One input, in order.
    fn handle(&self, ev: ActorInput) {
        match ev {
            ActorInput::Turn(TurnEvent::CommandFound {
                tab,
                turn_id,
                index,
                body,
                malformed,
                wants,
                start,
            }) => {
                let s = self.command_found(&tab, &turn_id, index, &body, malformed, wants);
                let _ = start.send(s);
            }
            ActorInput::Turn(TurnEvent::CommandDone {
                tab,
                turn_id,
                index,
                ok,
                output,
                show,
            }) => self.command_done(&tab, &turn_id, index, ok, &output, show),
            ActorInput::Turn(TurnEvent::Streaming { tab }) => {
                // The turn a delivery started shows: its files are no longer the tab's to fetch.
                self.delivery_seen(&tab);
                self.feed(&tab, Input::Streaming(true));
                self.feed(&tab, Input::TurnSeen { tab: tab.clone() });
            }
            ActorInput::Turn(TurnEvent::TurnEnded {
                tab,
                turn_id,
                text,
                commands,
            }) => self.turn_ended(&tab, &turn_id, &text, commands),
            ActorInput::Turn(TurnEvent::PersonSpoke { tab }) => {
                self.feed(&tab, Input::PersonMessage)
            }
            ActorInput::Turn(TurnEvent::Held { tab, deliver_id }) => {
                let ours = self
                    .live
                    .lock()
                    .expect("loops")
                    .get(&tab)
                    .is_some_and(|l| deliver_id.starts_with(l.session.id()));
                if ours {
                    self.feed(&tab, Input::Held);
                }
            }
            ActorInput::Turn(TurnEvent::DeliveryFailed {
                tab,
                deliver_id,
                error,
            }) => {
                let ours = self
                    .live
                    .lock()
                    .expect("loops")
                    .get(&tab)
                    // A paused session withdrew its delivery already (the fetch that failed
                    // may be the withdrawal's doing): it stays paused for its own reason.
                    // Only the message sent last counts: a delivery the tab held across a
                    // restart (its files' ids gone with the old hub) was sent again since.
                    .is_some_and(|l| deliver_id == l.last_deliver && l.paused_at.is_none());
                if ours {
                    self.feed(&tab, Input::DeliveryFailed(error));
                }
            }
            ActorInput::Turn(TurnEvent::NotRun { tab, command }) => self.not_run(&tab, &command),
            ActorInput::Begin { tab, task } => self.begin(&tab, &task),
            ActorInput::Verb { tab, input } => self.feed(&tab, input),
        }
    }

    /// A command of a tab's turn is about to run: the session's round notes it (a tab that
    /// loops and has no session gets one, whose first message will carry the primer); one
    /// that already ran has its journaled result fed instead.
    fn command_found(
        &self,
        tab: &Arc<Client>,
        turn_id: &str,
        index: u32,
        body: &str,
        malformed: bool,
        wants: Option<Option<u32>>,
    ) -> Start {
        if self.is_stopped(&tab.id) {
            return Start::Free;
        }
        let Some(session_id) = self.note_command(tab, turn_id, index, body, wants) else {
            return Start::Free;
        };
        // A session's command that already ran (before a hub restart, the turn sent again) is
        // not run twice: its journaled result goes to the session.
        if let Some((ok, output)) = self.journaled(&tab.id, turn_id, index) {
            tracing::info!(tab = %tab.id, turn_id, index, "command already ran: its journaled result is used");
            self.result(&tab.id, turn_id, index, ok, &output, malformed);
            return Start::Replayed;
        }
        let cancel = CancellationToken::new();
        self.inflight
            .lock()
            .expect("loops")
            .entry(tab.id.clone())
            .or_default()
            .push(Inflight {
                turn_id: turn_id.to_string(),
                index,
                command: body.trim().to_string(),
                malformed,
                cancel: cancel.clone(),
            });
        self.progress(&tab.id, &session_id, "running", Some(body.trim()), None);
        Start::Session(cancel)
    }

    /// A session's command finished: journaled first (a hub killed after the tab saw the
    /// result runs it no second time), then the tab gets its `cmd_result`, then the session
    /// hears it. A command Stop cancelled is shown, and the ended session hears nothing.
    fn command_done(
        &self,
        tab: &str,
        turn_id: &str,
        index: u32,
        ok: bool,
        output: &str,
        show: Option<Show>,
    ) {
        let pending = {
            let mut inflight = self.inflight.lock().expect("loops");
            let list = inflight.get_mut(tab);
            let at = list.as_ref().and_then(|l| {
                l.iter()
                    .position(|c| c.turn_id == turn_id && c.index == index)
            });
            match (list, at) {
                (Some(list), Some(at)) => Some(list.remove(at)),
                _ => None,
            }
        };
        if pending.is_some() {
            self.journal_command(tab, turn_id, index, ok, output);
        }
        if let Some(show) = show {
            show();
        }
        if let Some(c) = pending {
            self.result(tab, turn_id, index, ok, output, c.malformed);
        }
    }

    fn next_wake(&self) -> Option<u64> {
        let live = self.live.lock().expect("loops");
        let pause = self.settings.task_pause_ms;
        live.values()
            .map(|l| {
                let t = l
                    .session
                    .next_wake()
                    .map_or(l.session.deadline(), |t| t.min(l.session.deadline()));
                match l.paused_at.filter(|_| !l.waiters.is_empty()) {
                    Some(p) => t.min(p + pause),
                    None => t,
                }
            })
            .min()
    }

    /// Callers of sessions paused longer than `--agent-task-pause-s` get their answer now:
    /// ✗ with the pause's why and the text so far. The session stays paused; a later resume
    /// goes on in the panel and `agent status`, and does not answer them again.
    fn answer_paused_callers(&self, t: u64) {
        let pause = self.settings.task_pause_ms;
        let mut answered = Vec::new();
        {
            let mut live = self.live.lock().expect("loops");
            for l in live.values_mut() {
                let Some(p) = l.paused_at else { continue };
                if l.waiters.is_empty() || p + pause > t {
                    continue;
                }
                let why = l
                    .session
                    .status()
                    .1
                    .map(Why::text)
                    .unwrap_or_else(|| "已暂停 / paused".into());
                let so_far = l.last_text.trim();
                let msg = if so_far.is_empty() {
                    format!(
                        "{why}（暂停超过 {} 秒 / paused for over {} s; the session waits for `?<agent resume>!`）",
                        pause / 1000,
                        pause / 1000
                    )
                } else {
                    format!(
                        "{why}（暂停超过 {} 秒 / paused for over {} s; the session waits for `?<agent resume>!`）\n\n目前的回复 / the reply so far:\n{so_far}",
                        pause / 1000,
                        pause / 1000
                    )
                };
                answered.push((std::mem::take(&mut l.waiters), msg));
            }
        }
        for (waiters, msg) in answered {
            for w in waiters {
                let _ = w.send(Err(LoopError::Ended(msg.clone())));
            }
        }
    }

    fn tick_due(&self) {
        let t = now();
        self.answer_paused_callers(t);
        let due: Vec<String> = {
            let live = self.live.lock().expect("loops");
            live.iter()
                .filter(|(_, l)| {
                    l.session.deadline() <= t || l.session.next_wake().is_some_and(|w| w <= t)
                })
                .map(|(tab, _)| tab.clone())
                .collect()
        };
        for tab in due {
            self.feed(&tab, Input::Tick);
        }
    }
}
