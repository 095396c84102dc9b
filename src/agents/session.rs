//! One agent session as a pure state machine (docs/agents.md): inputs in, actions out, the time
//! passed in with every input (no clock inside, like `src/decide`), randomness from a seed.
//!
//! A round: the tab's turn ends holding N ≥ 1 commands; the hub runs them; when **every**
//! command has its result **and** the turn has ended, the session says [`SessionAction::Deliver`]
//! once (after the pacing gap, never while a draft or a stream is in the way). After a send,
//! the tab must show the new turn within [`SessionLimits::arrival_ms`]; otherwise one resend with a
//! new deliver id, then a pause "send failed".
//!
//! It ends on a turn without a command (the answer), on `?<done [TEXT]>!`, or on a limit:
//! rounds, wall time, the same command a 4th time within 5 rounds (the 3rd adds a note). It
//! pauses for the person after 3 rounds in a row where every command failed, when the person
//! sends a message, on `agent pause`, and when a send does not arrive. Every end and pause
//! carries a [`Why`] with a bilingual text for the panel, `agent status` and the journal —
//! never for the model.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::results::{self, Note, ResultItem};
use crate::commands::agent::AgentCmd;
use crate::commands::ast::{Command, Part, Template};
use crate::commands::parser;
use crate::commands::scanner::FoundCommand;

/// The limits and pacing of a session (the hub's flags; a role card's `max_rounds`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionLimits {
    /// `--agent-max-rounds` (default 25) or the card's `max_rounds`.
    pub max_rounds: u32,
    /// `--agent-max-minutes` (default 30), in milliseconds.
    pub max_wall_ms: u64,
    /// Rounds the repeat guard looks back over (5).
    pub repeat_window: u32,
    /// Times the same command may run in the window before a note (the 3rd adds it).
    pub repeat_note: u32,
    /// Times that stop the session (the 4th).
    pub repeat_stop: u32,
    /// Rounds in a row where every command failed that pause the session (3).
    pub failed_rounds: u32,
    /// How long a send may take to show the new turn (15 s).
    pub arrival_ms: u64,
    /// `--agent-gap MIN-MAX`, in milliseconds (default 2,000–5,000; tests 0–0).
    pub gap_ms: (u64, u64),
    /// The primer comes again every this many rounds (10).
    pub primer_every: u32,
    /// `--agent-result-chars` (4,000).
    pub result_chars: usize,
}

impl Default for SessionLimits {
    fn default() -> Self {
        Self {
            max_rounds: 25,
            max_wall_ms: 30 * 60 * 1000,
            repeat_window: 5,
            repeat_note: 3,
            repeat_stop: 4,
            failed_rounds: 3,
            arrival_ms: 15_000,
            gap_ms: (2_000, 5_000),
            primer_every: 10,
            result_chars: results::DEFAULT_RESULT_CHARS,
        }
    }
}

/// Why a session ended or paused. Shown to the person (panel, status, journal), never sent
/// to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// A turn held no command: its text is the answer.
    Answered,
    /// The model wrote `?<done [TEXT]>!`.
    Done,
    /// The round limit.
    RoundLimit(u32),
    /// The wall-time limit, in minutes.
    WallTime(u64),
    /// The same command a 4th time within the window.
    Repeated(String),
    /// Stop from the panel, the dashboard or `agent stop`.
    Stopped,
    /// The caller that started it left (an MCP cancel, an API client gone): only its own
    /// session ends, and the tab takes the next work at once.
    CallerLeft,
    /// Every command failed this many rounds in a row.
    AllFailed(u32),
    /// The person sent a message in the tab.
    PersonSpoke,
    /// `agent pause` or the panel's pause.
    PausedByPerson,
    /// The results did not arrive in the tab, even after one resend.
    SendFailed,
    /// The tab could not send the message: a file it carries was refused by the site (or
    /// could not be fetched); the tab's words. Nothing was sent.
    DeliveryFailed(String),
}

impl Why {
    /// A short stable code for the journal and the store.
    pub fn code(&self) -> &'static str {
        match self {
            Why::Answered => "answered",
            Why::Done => "done",
            Why::RoundLimit(_) => "round_limit",
            Why::WallTime(_) => "wall_time",
            Why::Repeated(_) => "repeated",
            Why::Stopped => "stopped",
            Why::CallerLeft => "caller_left",
            Why::AllFailed(_) => "all_failed",
            Why::PersonSpoke => "person_spoke",
            Why::PausedByPerson => "paused",
            Why::SendFailed => "send_failed",
            Why::DeliveryFailed(_) => "delivery_failed",
        }
    }

    /// `中文 / English`, for a person.
    pub fn text(&self) -> String {
        match self {
            Why::Answered => "已回答 / answered: the reply held no command".into(),
            Why::Done => "已完成 / done: the model finished with its done command".into(),
            Why::RoundLimit(n) => format!("轮数已达上限 / stopped: round limit {n}/{n}"),
            Why::WallTime(m) => format!("超时 / stopped: wall-time limit {m} min"),
            Why::Repeated(c) => format!(
                "重复命令 / stopped: the same command a 4th time within 5 rounds: {}",
                results::defuse(c.trim())
            ),
            Why::Stopped => "已停止 / stopped by a person".into(),
            Why::CallerLeft => "调用方已离开 / ended: its caller left (cancelled)".into(),
            Why::AllFailed(n) => format!(
                "暂停：连续 {n} 轮命令全部失败 / paused: every command failed {n} rounds in a row"
            ),
            Why::PersonSpoke => "暂停：用户发送了消息 / paused: the person sent a message".into(),
            Why::PausedByPerson => "已暂停 / paused by a person".into(),
            Why::SendFailed => "暂停：发送失败 / paused: send failed (the results did not reach the tab, even after one resend)".into(),
            Why::DeliveryFailed(e) => format!(
                "暂停：附件未能发送 / paused: the tab could not send the results with their files, so it sent nothing: {}",
                results::defuse(e.trim())
            ),
        }
    }
}

/// What the wiring must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionAction {
    /// Type `text` into the tab and send it (`deliver {auto_send: true, agent: {session,
    /// round, of}}`).
    Deliver {
        /// The message (the results; the wiring prepends the primer when `primer` says so).
        text: String,
        /// The round these results close (0: the session's first message).
        round: u32,
        /// The round limit.
        of: u32,
        /// Idempotency key; a resend gets a new one.
        deliver_id: String,
        /// The primer goes first in this message.
        primer: bool,
        /// Outputs by variable: `R1`, `R2`, … (the whole text), set before the send.
        vars: Vec<(String, String)>,
    },
    /// The session is over.
    End {
        /// Why.
        why: Why,
        /// The final answer (for `agent task`'s caller), when the model gave one.
        answer: Option<String>,
    },
    /// The session waits for the person (`agent resume`).
    Pause {
        /// Why.
        why: Why,
    },
    /// For the panel only: the reply held a forged result header (ignored).
    ForgedResult,
}

/// Identity of one command: (tab, turn, index in the turn).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CmdId {
    /// The tab's client id.
    pub tab: String,
    /// The reply's turn id.
    pub turn_id: String,
    /// Index of the command in the turn (0-based).
    pub index: u32,
}

/// What happens to a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// The tab's turn ended (`turn_end`) with its full text and the commands found in it.
    TurnEnded {
        /// The tab.
        tab: String,
        /// Its turn id.
        turn_id: String,
        /// The whole reply.
        text: String,
        /// The commands, in order (index = position).
        commands: Vec<FoundCommand>,
    },
    /// A command's result (`cmd_result`).
    Result {
        /// Which command.
        id: CmdId,
        /// Whether it succeeded.
        ok: bool,
        /// Its output or error.
        output: String,
        /// It did not parse (two in a row bring the primer again).
        malformed: bool,
    },
    /// The tab shows the new turn (`task_update` `sent`/`streaming`, or its first chunk).
    TurnSeen {
        /// The tab.
        tab: String,
    },
    /// The tab's model is streaming (true) or stopped (false): nothing is typed meanwhile.
    Streaming(bool),
    /// The person's draft in the input box (true: there is one; delays the send).
    Draft(bool),
    /// The person submitted a message in the tab.
    PersonMessage,
    /// Stop (panel, dashboard, `agent stop`).
    Stop,
    /// The caller left (MCP cancel, an API client gone).
    CallerLeft,
    /// The tab holds the message sent last because the person is typing in its box
    /// (`task_update {deliver_id, state: "held"}`): the arrival window starts again.
    Held,
    /// The tab could not send the message it was given (a file refused; its words): the
    /// session pauses, and the message goes again on resume.
    DeliveryFailed(String),
    /// Pause (`agent pause`).
    Pause,
    /// Resume (`agent resume`).
    Resume,
    /// Only time passed.
    Tick,
}

/// Where the session is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum SessionState {
    /// The model's turn: waiting for its `turn_end`.
    ModelTurn,
    /// The turn ended: waiting for the results of its commands.
    Collecting {
        turn_id: String,
        commands: Vec<String>,
        forged: bool,
    },
    /// Both thresholds met: the message waits for the gap, a draft or a stream.
    Ready(Box<Outgoing>),
    /// Sent: waiting for the tab to show the new turn.
    Sent {
        out: Box<Outgoing>,
        at_ms: u64,
        attempt: u32,
    },
    /// Waiting for the person; `before` is where the session goes on from on resume (a
    /// message waiting to be sent, results still being collected, or the model's turn).
    Paused { why: Why, before: Box<SessionState> },
    /// Over.
    Ended(Why),
}

/// A message waiting to be sent.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Outgoing {
    text: String,
    round: u32,
    primer: bool,
    vars: Vec<(String, String)>,
    due_ms: u64,
    /// It went to the tab at least once (a pause may have come before its turn showed).
    sent: bool,
}

/// One session of one tab.
#[derive(Debug)]
pub struct Session {
    id: String,
    tab: String,
    limits: SessionLimits,
    started_ms: u64,
    state: SessionState,
    /// Rounds closed so far (results messages built).
    round: u32,
    /// Turns already ended (a re-sent `turn_end` is ignored).
    seen_turns: BTreeSet<String>,
    /// Results already counted, by (turn, index); also those that came before their turn end.
    results: BTreeMap<(String, u32), (bool, String)>,
    /// (round, normalised command) of recent rounds, for the repeat guard.
    history: VecDeque<(u32, String)>,
    failed_in_a_row: u32,
    malformed_in_a_row: u32,
    primer_due: bool,
    /// The session's first message carries the primer (every session's does, docs/agents.md).
    first_primer: bool,
    last_send_ms: Option<u64>,
    draft: bool,
    streaming: bool,
    rng: StdRng,
    sends: u32,
}

impl Session {
    /// A session of `tab`, started at `now_ms`; `seed` drives the pacing gaps.
    pub fn new(
        id: impl Into<String>,
        tab: impl Into<String>,
        limits: SessionLimits,
        seed: u64,
        now_ms: u64,
    ) -> Self {
        Self {
            id: id.into(),
            tab: tab.into(),
            limits,
            started_ms: now_ms,
            state: SessionState::ModelTurn,
            round: 0,
            seen_turns: BTreeSet::new(),
            results: BTreeMap::new(),
            history: VecDeque::new(),
            failed_in_a_row: 0,
            malformed_in_a_row: 0,
            primer_due: false,
            first_primer: true,
            last_send_ms: None,
            draft: false,
            streaming: false,
            rng: StdRng::seed_from_u64(seed),
            sends: 0,
        }
    }

    /// A session journaled before a hub restart, going on from its last round: it waits for
    /// the tab's next turn (or, `paused`, for the person).
    pub fn restore(
        id: impl Into<String>,
        tab: impl Into<String>,
        limits: SessionLimits,
        seed: u64,
        started_ms: u64,
        round: u32,
        paused: bool,
    ) -> Self {
        let mut s = Self::new(id, tab, limits, seed, started_ms);
        s.round = round;
        // A session past its first message already gave the model its primer.
        s.first_primer = round == 0;
        if paused {
            s.state = SessionState::Paused {
                why: Why::PausedByPerson,
                before: Box::new(SessionState::ModelTurn),
            };
        }
        s
    }

    /// A restored session's message that was due or sent and not yet seen before the restart
    /// (journaled by the wiring): it goes again at once (or on resume, when paused), under a
    /// deliver id past `sends` (the tab drops an id it has seen).
    pub fn restore_outgoing(
        &mut self,
        text: String,
        round: u32,
        primer: bool,
        vars: Vec<(String, String)>,
        sends: u32,
        now_ms: u64,
    ) {
        self.sends = self.sends.max(sends);
        self.first_primer = false;
        let out = SessionState::Ready(Box::new(Outgoing {
            text,
            round,
            primer,
            vars,
            due_ms: now_ms,
            sent: true,
        }));
        match &mut self.state {
            SessionState::Paused { before, .. } => **before = out,
            SessionState::Ended(_) => {}
            _ => self.state = out,
        }
    }

    /// When the wall-time limit ends the session, whatever it waits for.
    pub fn deadline(&self) -> u64 {
        self.started_ms + self.limits.max_wall_ms
    }

    /// The tab's client id.
    pub fn tab(&self) -> &str {
        &self.tab
    }

    /// The round limit.
    pub fn max_rounds(&self) -> u32 {
        self.limits.max_rounds
    }

    /// The first message (`agent task`): the primer and the task, sent at once.
    pub fn begin(&mut self, task: &str, now_ms: u64) -> Vec<SessionAction> {
        self.first_primer = false;
        self.state = SessionState::Ready(Box::new(Outgoing {
            text: task.to_string(),
            round: 0,
            primer: true,
            vars: Vec::new(),
            due_ms: now_ms,
            sent: false,
        }));
        self.poll(now_ms)
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Rounds closed so far.
    pub fn round(&self) -> u32 {
        self.round
    }

    /// `running`, `paused` or `ended`, and why (for status and the store).
    pub fn status(&self) -> (&'static str, Option<&Why>) {
        match &self.state {
            SessionState::Paused { why, .. } => ("paused", Some(why)),
            SessionState::Ended(why) => ("ended", Some(why)),
            _ => ("running", None),
        }
    }

    /// When the wiring should call again with [`Input::Tick`] (a due send or an arrival
    /// check), if anything waits on time.
    pub fn next_wake(&self) -> Option<u64> {
        let wall = self.started_ms + self.limits.max_wall_ms;
        let t = match &self.state {
            SessionState::Ready(out) => Some(out.due_ms),
            SessionState::Sent { at_ms, .. } => Some(at_ms + self.limits.arrival_ms),
            SessionState::Ended(_) | SessionState::Paused { .. } => return None,
            _ => None,
        };
        Some(t.map_or(wall, |t| t.min(wall)))
    }

    /// Feeds one input at `now_ms`; returns what to do (empty: nothing).
    pub fn handle(&mut self, input: Input, now_ms: u64) -> Vec<SessionAction> {
        if matches!(self.state, SessionState::Ended(_)) {
            return Vec::new();
        }
        if let Input::Stop = input {
            return self.end(Why::Stopped, None);
        }
        if let Input::CallerLeft = input {
            return self.end(Why::CallerLeft, None);
        }
        if now_ms.saturating_sub(self.started_ms) >= self.limits.max_wall_ms {
            return self.end(Why::WallTime(self.limits.max_wall_ms / 60_000), None);
        }
        let mut actions = match input {
            Input::TurnEnded {
                tab,
                turn_id,
                text,
                commands,
            } if tab == self.tab => self.turn_ended_maybe_paused(turn_id, &text, commands, now_ms),
            Input::Result {
                id,
                ok,
                output,
                malformed,
            } if id.tab == self.tab => self.result(id, ok, output, malformed, now_ms),
            Input::TurnSeen { tab } if tab == self.tab => {
                if matches!(self.state, SessionState::Sent { .. }) {
                    self.state = SessionState::ModelTurn;
                }
                Vec::new()
            }
            Input::Streaming(on) => {
                self.streaming = on;
                if on && matches!(self.state, SessionState::Sent { .. }) {
                    self.state = SessionState::ModelTurn;
                }
                Vec::new()
            }
            Input::Draft(on) => {
                self.draft = on;
                Vec::new()
            }
            Input::Held => {
                // The person types in the box: the tab holds the message; it is neither sent
                // again nor given up while the holds keep coming.
                if let SessionState::Sent { at_ms, .. } = &mut self.state {
                    *at_ms = now_ms;
                }
                Vec::new()
            }
            Input::PersonMessage => self.pause(Why::PersonSpoke),
            Input::Pause => self.pause(Why::PausedByPerson),
            Input::DeliveryFailed(e) => self.pause(Why::DeliveryFailed(e)),
            Input::Resume => {
                if let SessionState::Paused { before, .. } = &mut self.state {
                    let mut before = std::mem::replace(&mut **before, SessionState::ModelTurn);
                    if let SessionState::Ready(out) = &mut before {
                        out.due_ms = now_ms;
                    }
                    self.state = before;
                    self.failed_in_a_row = 0;
                }
                self.try_close(now_ms)
            }
            _ => Vec::new(),
        };
        if actions.is_empty() {
            actions = self.poll(now_ms);
        } else if !actions
            .iter()
            .any(|a| matches!(a, SessionAction::End { .. } | SessionAction::Pause { .. }))
        {
            actions.extend(self.poll(now_ms));
        }
        actions
    }

    fn end(&mut self, why: Why, answer: Option<String>) -> Vec<SessionAction> {
        self.state = SessionState::Ended(why.clone());
        vec![SessionAction::End { why, answer }]
    }

    fn pause(&mut self, why: Why) -> Vec<SessionAction> {
        let before = match std::mem::replace(&mut self.state, SessionState::ModelTurn) {
            // A message not yet seen by the tab is sent again on resume.
            SessionState::Sent { out, .. } => SessionState::Ready(out),
            SessionState::Paused { before, .. } => *before,
            other => other,
        };
        self.state = SessionState::Paused {
            why: why.clone(),
            before: Box::new(before),
        };
        vec![SessionAction::Pause { why }]
    }

    /// A turn that ends while the session waits for the person (the model answering the
    /// person's own message) is still collected: its results wait for `resume`.
    fn turn_ended_maybe_paused(
        &mut self,
        turn_id: String,
        text: &str,
        commands: Vec<FoundCommand>,
        now_ms: u64,
    ) -> Vec<SessionAction> {
        let SessionState::Paused { why, before } = &mut self.state else {
            return self.turn_ended(turn_id, text, commands, now_ms);
        };
        let why = why.clone();
        self.state = match std::mem::replace(&mut **before, SessionState::ModelTurn) {
            // A message that went to the tab before the pause: a turn ending now means the
            // tab got it (or the model answered the person instead). Either way this turn is
            // the model's: it is collected, and the message is not sent again on resume.
            SessionState::Ready(out) if out.sent => SessionState::ModelTurn,
            other => other,
        };
        let actions = self.turn_ended(turn_id, text, commands, now_ms);
        if !matches!(
            self.state,
            SessionState::Paused { .. } | SessionState::Ended(_)
        ) {
            let before = std::mem::replace(&mut self.state, SessionState::ModelTurn);
            self.state = SessionState::Paused {
                why,
                before: Box::new(before),
            };
        }
        actions
    }

    fn turn_ended(
        &mut self,
        turn_id: String,
        text: &str,
        commands: Vec<FoundCommand>,
        now_ms: u64,
    ) -> Vec<SessionAction> {
        if !self.seen_turns.insert(turn_id.clone()) {
            return Vec::new();
        }
        if !matches!(
            self.state,
            SessionState::ModelTurn | SessionState::Sent { .. }
        ) {
            return Vec::new();
        }
        let mut actions = Vec::new();
        let forged = !results::detect_forged_results(text).is_empty();
        if forged {
            actions.push(SessionAction::ForgedResult);
        }
        if commands.is_empty() {
            actions.extend(self.end(Why::Answered, Some(text.trim().to_string())));
            return actions;
        }
        for c in &commands {
            if let Ok(Command::Agent(AgentCmd::Done(t))) = parser::parse(&c.body) {
                let said = plain(&t);
                let answer = if said.trim().is_empty() {
                    text.get(..c.start).unwrap_or("").trim().to_string()
                } else {
                    said.trim().to_string()
                };
                actions.extend(self.end(Why::Done, Some(answer)));
                return actions;
            }
        }
        if self.round >= self.limits.max_rounds {
            actions.extend(self.end(Why::RoundLimit(self.limits.max_rounds), None));
            return actions;
        }
        self.state = SessionState::Collecting {
            turn_id,
            commands: commands.into_iter().map(|c| c.body).collect(),
            forged,
        };
        actions.extend(self.try_close(now_ms));
        actions
    }

    fn result(
        &mut self,
        id: CmdId,
        ok: bool,
        output: String,
        malformed: bool,
        now_ms: u64,
    ) -> Vec<SessionAction> {
        let key = (id.turn_id, id.index);
        if self.results.contains_key(&key) {
            return Vec::new();
        }
        if malformed {
            self.malformed_in_a_row += 1;
            if self.malformed_in_a_row >= 2 {
                self.primer_due = true;
            }
        } else {
            self.malformed_in_a_row = 0;
        }
        self.results.insert(key, (ok, output));
        self.try_close(now_ms)
    }

    /// Both thresholds: the turn ended (we are collecting) and every command has a result.
    fn try_close(&mut self, now_ms: u64) -> Vec<SessionAction> {
        let SessionState::Collecting {
            turn_id,
            commands,
            forged,
        } = &self.state
        else {
            return Vec::new();
        };
        let mut items = Vec::with_capacity(commands.len());
        for (k, c) in commands.iter().enumerate() {
            match self.results.get(&(turn_id.clone(), k as u32)) {
                Some((ok, output)) => items.push(ResultItem {
                    command: c.clone(),
                    ok: *ok,
                    output: output.clone(),
                }),
                None => return Vec::new(),
            }
        }
        let forged = *forged;
        self.round += 1;
        let round = self.round;
        let mut notes = Vec::new();
        if forged {
            notes.push(Note::Forged);
        }
        // The repeat guard: the same command (whitespace-normalised) within the window.
        self.history
            .retain(|(r, _)| r + self.limits.repeat_window > round);
        for it in &items {
            let key = normalise(&it.command);
            let times = 1 + self.history.iter().filter(|(_, c)| *c == key).count() as u32;
            self.history.push_back((round, key));
            if times >= self.limits.repeat_stop {
                return self.end(Why::Repeated(it.command.clone()), None);
            }
            if times >= self.limits.repeat_note
                && !notes.iter().any(|n| matches!(n, Note::Repeated { .. }))
            {
                notes.push(Note::Repeated {
                    command: it.command.clone(),
                    times,
                });
            }
        }
        let primer = self.primer_due
            || self.first_primer
            || (self.limits.primer_every > 0 && round.is_multiple_of(self.limits.primer_every));
        self.first_primer = false;
        if self.primer_due {
            notes.push(Note::PrimerAgain);
        }
        self.primer_due = false;
        let text = results::render(
            &items,
            round,
            self.limits.max_rounds,
            self.limits.result_chars,
            &notes,
        );
        let vars = items
            .iter()
            .enumerate()
            .map(|(k, it)| (format!("R{}", k + 1), it.output.clone()))
            .collect();
        let (lo, hi) = self.limits.gap_ms;
        let gap = if hi > lo {
            self.rng.random_range(lo..=hi)
        } else {
            lo
        };
        let due_ms = self.last_send_ms.map_or(now_ms, |t| (t + gap).max(now_ms));
        let out = Box::new(Outgoing {
            text,
            round,
            primer,
            vars,
            due_ms,
            sent: false,
        });
        if items.iter().all(|i| !i.ok) {
            self.failed_in_a_row += 1;
        } else {
            self.failed_in_a_row = 0;
        }
        if self.failed_in_a_row >= self.limits.failed_rounds {
            let why = Why::AllFailed(self.failed_in_a_row);
            self.state = SessionState::Paused {
                why: why.clone(),
                before: Box::new(SessionState::Ready(out)),
            };
            return vec![SessionAction::Pause { why }];
        }
        self.state = SessionState::Ready(out);
        Vec::new()
    }

    /// Sends a due message, or checks a sent one's arrival.
    fn poll(&mut self, now_ms: u64) -> Vec<SessionAction> {
        match &mut self.state {
            SessionState::Ready(out) if out.due_ms <= now_ms && !self.draft && !self.streaming => {
                let out = out.clone();
                self.send(out, now_ms, 1)
            }
            SessionState::Sent {
                out,
                at_ms,
                attempt,
            } if now_ms >= *at_ms + self.limits.arrival_ms => {
                if *attempt >= 2 {
                    let out = out.clone();
                    self.state = SessionState::Paused {
                        why: Why::SendFailed,
                        before: Box::new(SessionState::Ready(out)),
                    };
                    return vec![SessionAction::Pause {
                        why: Why::SendFailed,
                    }];
                }
                let (out, attempt) = (out.clone(), *attempt + 1);
                self.send(out, now_ms, attempt)
            }
            _ => Vec::new(),
        }
    }

    fn send(&mut self, mut out: Box<Outgoing>, now_ms: u64, attempt: u32) -> Vec<SessionAction> {
        self.sends += 1;
        out.sent = true;
        let action = SessionAction::Deliver {
            text: out.text.clone(),
            round: out.round,
            of: self.limits.max_rounds,
            deliver_id: format!("{}-r{}-s{}", self.id, out.round, self.sends),
            primer: out.primer,
            vars: out.vars.clone(),
        };
        self.last_send_ms = Some(now_ms);
        self.state = SessionState::Sent {
            out,
            at_ms: now_ms,
            attempt,
        };
        vec![action]
    }
}

/// A template as written (`$name` kept): the final answer is text for the caller.
fn plain(t: &Template) -> String {
    t.parts
        .iter()
        .map(|p| match p {
            Part::Lit(s) => s.clone(),
            Part::Var(v) => format!("${v}"),
        })
        .collect()
}

/// A command's identity for the repeat guard: its words, whitespace collapsed.
fn normalise(command: &str) -> String {
    command.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
