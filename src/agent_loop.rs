//! The agent loop wired to the hub (docs/agents.md): one [`Loops`] service holds the sessions of
//! the tabs that loop, feeds each [`Session`] what its tab does (commands found, their results,
//! the turn's end, the next turn starting, the person speaking) and carries out what the
//! session decides: the results message typed and sent through the ask service, the journal,
//! the panel's progress, the caller of `agent task` answered.
//!
//! It stands on the ask service (`crate::ask`), the store and the pure core in
//! `crate::agents`; `control` feeds it, and the doors start agents' tasks through it. It never
//! runs a command itself: commands run in `control` like every other command, and only their
//! results come here.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::{oneshot, Notify};

use crate::agents::memory_stream::{self, Observation, Stream};
use crate::agents::session::{Action, CmdId, Input, Limits, Session, Why};
use crate::agents::store::{self as agent_store, AgentRecord, RoundCommand, SessionRecord};
use crate::ask::Asks;
use crate::commands::agent::Tool;
use crate::commands::permissions::Permissions;
use crate::commands::scanner::FoundCommand;
use crate::commands::vars::Variables;
use crate::config::AgentSettings;
use crate::hub::registry::Client;
use crate::protocol::{AgentTag, ServerFrame};

/// What the loop needs from the layers above it: the primer of a tab (its role card's
/// `system_prompt` and a guide of what it may do now), built where cards, skills and MCP live.
pub trait LoopHost: Send + Sync + 'static {
    /// The primer for `tab`, under 3,000 characters; `recalled` is the agent's memories
    /// retrieved for this message (its memory block), when it has some.
    fn primer(
        &self,
        tab: &Arc<Client>,
        agent: Option<&AgentRecord>,
        limits: &Limits,
        recalled: Option<&str>,
    ) -> String;
}

/// Why `agent task` (or a door's agent call) could not start or did not answer.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum LoopError {
    /// The hub runs with `--agent-loop off`.
    #[error("代理循环已关闭 / the agent loop is off on this hub (--agent-loop off)")]
    Off,
    /// No agent of that name.
    #[error("没有代理 {0} / no agent `{0}`: create it with ?<agent create {0} on TAB>!")]
    NoAgent(String),
    /// The agent's tab is not connected.
    #[error(
        "代理 {name} 的标签页 {target} 不在线 / agent `{name}`: no tab `{target}` is connected"
    )]
    NoTab {
        /// The agent.
        name: String,
        /// Its target.
        target: String,
    },
    /// The tab already runs a session.
    #[error("标签页 {0} 已在运行一个会话 / tab {0} already runs a session: stop it first (?<agent stop>!)")]
    Busy(String),
    /// The session ended without an answer (a limit, Stop).
    #[error("{0}")]
    Ended(String),
    /// The store refused.
    #[error("存储错误 / store: {0}")]
    Store(String),
}

/// One session in progress.
struct Live {
    session: Session,
    /// The agent, when `agent task` started it; none for a looping master or foreman.
    agent: Option<AgentRecord>,
    /// The commands of the round being collected, by index, with their results.
    round: BTreeMap<u32, RoundCommand>,
    /// The turn they came from.
    round_turn: String,
    /// The command running now (for the panel).
    running: Option<String>,
    /// Callers waiting for the final answer (`agent task`).
    waiters: Vec<oneshot::Sender<Result<String, LoopError>>>,
    /// The observation ids a reflection was asked about in the last message, until the
    /// tab's next turn answers.
    reflection: Option<Vec<i64>>,
    /// The session's last command and how it went (`None`: still running), for `agent status`.
    last: Option<LastCommand>,
    /// The model's last reply, for a caller answered while the session is paused.
    last_text: String,
    /// Since when it waits for the person (ms), while its caller still waits.
    paused_at: Option<u64>,
    /// The commands a person's Stop cancelled (the panel lists them when it ends).
    cancelled: Vec<String>,
}

impl Live {
    fn new(session: Session, agent: Option<AgentRecord>) -> Live {
        Live {
            session,
            agent,
            round: BTreeMap::new(),
            round_turn: String::new(),
            running: None,
            waiters: Vec::new(),
            reflection: None,
            last: None,
            last_text: String::new(),
            paused_at: None,
            cancelled: Vec::new(),
        }
    }
}

/// A session's last command, as `agent status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LastCommand {
    /// The command as written.
    pub command: String,
    /// ✓ or ✗; none while it runs.
    pub ok: Option<bool>,
}

impl std::fmt::Display for LastCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mark = match self.ok {
            Some(true) => "✓",
            Some(false) => "✗",
            None => "…",
        };
        write!(f, "{mark} `{}`", self.command)
    }
}

/// A session's command that runs now, with what cancels it.
struct Inflight {
    turn_id: String,
    index: u32,
    command: String,
    cancel: tokio_util::sync::CancellationToken,
}

/// A session that ended, kept for `agent status` until the next one of its tab.
#[derive(Debug, Clone)]
struct Ended {
    session: String,
    agent: Option<String>,
    tab: String,
    round: u32,
    of: u32,
    why: String,
    last: Option<LastCommand>,
}

/// The sessions of looping tabs, by tab client id.
pub struct Loops {
    asks: Arc<Asks>,
    /// The background jobs (`CMD &`): a person's Stop lists those its tab started.
    jobs: Arc<crate::exec::jobs::Jobs>,
    vars: Arc<Variables>,
    memory: Arc<crate::memory::Memory>,
    settings: AgentSettings,
    host: OnceLock<Arc<dyn LoopHost>>,
    live: Mutex<HashMap<String, Live>>,
    /// Tabs whose replies loop after `?<agent loop on>!` (a role card's `loop: true` is asked
    /// of the card each time).
    loop_on: Mutex<HashSet<String>>,
    /// Recently ended sessions, newest last (bounded).
    ended: Mutex<Vec<Ended>>,
    /// Tabs a person stopped: nothing is typed into them automatically and their replies
    /// start no session and run no command until the person speaks there (docs/agents.md,
    /// "Stop is final").
    stopped: Mutex<HashSet<String>>,
    /// The sessions' commands running now, by tab.
    inflight: Mutex<HashMap<String, Vec<Inflight>>>,
    /// Each agent's memory stream (observations since its last reflection), by agent name.
    streams: Mutex<HashMap<String, Stream>>,
    /// Wakes the timer task when a session changed.
    wake: Notify,
}

/// Recently ended sessions kept for `agent status`.
const ENDED_KEPT: usize = 64;

fn now() -> u64 {
    crate::store::now_ms().max(0) as u64
}

impl Loops {
    /// A loop service asking through `asks`; `vars` receives `$R1`, `$R2`, … of each round.
    pub fn new(
        asks: Arc<Asks>,
        jobs: Arc<crate::exec::jobs::Jobs>,
        vars: Arc<Variables>,
        memory: Arc<crate::memory::Memory>,
        settings: AgentSettings,
    ) -> Arc<Loops> {
        Arc::new(Loops {
            asks,
            jobs,
            vars,
            memory,
            settings,
            host: OnceLock::new(),
            live: Mutex::new(HashMap::new()),
            loop_on: Mutex::new(HashSet::new()),
            ended: Mutex::new(Vec::new()),
            stopped: Mutex::new(HashSet::new()),
            inflight: Mutex::new(HashMap::new()),
            streams: Mutex::new(HashMap::new()),
            wake: Notify::new(),
        })
    }

    /// Installs what builds primers (the composition root does, once).
    pub fn set_host(&self, host: Arc<dyn LoopHost>) {
        let _ = self.host.set(host);
    }

    /// Whether loops run at all on this hub.
    pub fn enabled(&self) -> bool {
        self.settings.enabled
    }

    /// The limits of a session: the hub's, with a card's or an agent's `max_rounds`.
    pub fn limits(&self, max_rounds: Option<u32>) -> Limits {
        let s = &self.settings;
        Limits {
            max_rounds: max_rounds.unwrap_or(s.max_rounds).max(1),
            max_wall_ms: s.max_minutes * 60_000,
            gap_ms: s.gap_ms,
            arrival_ms: s.arrival_ms,
            result_chars: s.result_chars,
            ..Limits::default()
        }
    }

    /// Goes on with the sessions journaled before a restart and runs the timers; returns
    /// when the hub stops.
    pub async fn run(self: Arc<Self>, shutdown: tokio_util::sync::CancellationToken) {
        self.restore();
        loop {
            let next = self.next_wake();
            let sleep = match next {
                Some(t) => std::time::Duration::from_millis(t.saturating_sub(now()).min(1_000)),
                None => std::time::Duration::from_secs(1),
            };
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(sleep) => {}
            }
            self.tick_due();
        }
    }

    fn restore(&self) {
        let open = match agent_store::open_sessions(&self.asks.hub().store) {
            Ok(o) => o,
            Err(e) => {
                tracing::warn!("agent sessions not restored: {e}");
                return;
            }
        };
        for rec in open {
            let agent = rec
                .agent
                .as_deref()
                .and_then(|n| agent_store::agent(&self.asks.hub().store, n).ok().flatten());
            let limits = self.limits(agent.as_ref().and_then(|a| a.spec.max_rounds));
            let session = Session::restore(
                rec.id.clone(),
                rec.tab.clone(),
                limits,
                rand::random(),
                rec.started_ms.max(0) as u64,
                rec.round,
                rec.state == "paused",
            );
            tracing::info!(session = %rec.id, tab = %rec.tab, round = rec.round, "agent session goes on after a restart");
            self.live
                .lock()
                .expect("loops")
                .insert(rec.tab.clone(), Live::new(session, agent));
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

    /// Whether `tab` runs a session now (running or paused).
    pub fn has_session(&self, tab: &str) -> bool {
        self.live.lock().expect("loops").contains_key(tab)
    }

    /// The permissions an agent session gives its tab (its tools) and the agent's memory
    /// scope (where its memory commands go), if one runs there.
    pub fn agent_permissions(&self, tab: &str) -> Option<(Permissions, String)> {
        let live = self.live.lock().expect("loops");
        let a = live.get(tab)?.agent.as_ref()?;
        Some((Tool::permissions(&a.spec.tools_or_default()), scope_of(a)))
    }

    /// The agent whose session runs in `tab`, if any.
    pub fn agent_of(&self, tab: &str) -> Option<AgentRecord> {
        self.live.lock().expect("loops").get(tab)?.agent.clone()
    }

    /// `?<agent loop on|off>!` in a tab.
    pub fn set_loop(&self, tab: &str, on: bool) {
        let mut set = self.loop_on.lock().expect("loops");
        if on {
            set.insert(tab.to_string());
        } else {
            set.remove(tab);
        }
    }

    /// Whether the tab turned its loop on with `agent loop on`.
    pub fn loop_is_on(&self, tab: &str) -> bool {
        self.loop_on.lock().expect("loops").contains(tab)
    }

    /// Whether a person stopped this tab and has not spoken there since: its replies start
    /// no session and run no command, and nothing is typed into it automatically.
    pub fn is_stopped(&self, tab: &str) -> bool {
        self.stopped.lock().expect("loops").contains(tab)
    }

    /// A command of a stopped tab's reply that was not run: the panel lists it.
    pub fn not_run(&self, tab: &str, command: &str) {
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
        let _ = self.asks.hub().registry.send(tab, &frame);
    }

    /// A command of a tab's turn is about to run (`index` in the turn). A tab that loops
    /// (`wants`: its card's `loop: true` or `agent loop on`, with the card's `max_rounds`)
    /// and has no session gets one now (its first message will carry the primer). Returns
    /// what cancels the command when it belongs to a session (a person's Stop does).
    pub fn command_started(
        &self,
        tab: &Arc<Client>,
        turn_id: &str,
        index: u32,
        body: &str,
        wants: Option<Option<u32>>,
    ) -> Option<tokio_util::sync::CancellationToken> {
        if self.is_stopped(&tab.id) {
            return None;
        }
        let session_id = {
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
            l.session.id().to_string()
        };
        let cancel = tokio_util::sync::CancellationToken::new();
        self.inflight
            .lock()
            .expect("loops")
            .entry(tab.id.clone())
            .or_default()
            .push(Inflight {
                turn_id: turn_id.to_string(),
                index,
                command: body.trim().to_string(),
                cancel: cancel.clone(),
            });
        self.progress(&tab.id, &session_id, "running", Some(body.trim()), None);
        Some(cancel)
    }

    /// Cancels the tab's session commands that run now; returns them.
    fn cancel_inflight(&self, tab: &str) -> Vec<String> {
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

    /// Journals a session's command result by (tab, turn, index), before the loop hears it:
    /// a hub killed after this and before the deliver runs it no second time.
    pub fn journal_command(&self, tab: &str, turn_id: &str, index: u32, ok: bool, output: &str) {
        if let Err(e) = agent_store::journal_command(
            &self.asks.hub().store,
            tab,
            turn_id,
            index,
            ok,
            output,
            crate::store::now_ms(),
        ) {
            tracing::warn!("command {turn_id}#{index} of {tab} not journaled: {e}");
        }
    }

    /// When command `index` of the tab's turn already ran (it is journaled), feeds its result
    /// to the session instead of running it again; true when it did.
    pub fn replay_journaled(&self, tab: &str, turn_id: &str, index: u32, body: &str) -> bool {
        let journaled =
            match agent_store::journaled_command(&self.asks.hub().store, tab, turn_id, index) {
                Ok(j) => j,
                Err(e) => {
                    tracing::warn!("command journal not read: {e}");
                    None
                }
            };
        let Some((ok, output)) = journaled else {
            return false;
        };
        tracing::info!(
            tab,
            turn_id,
            index,
            "command already ran: its journaled result is used"
        );
        let malformed = crate::commands::parser::parse(body).is_err();
        self.result(tab, turn_id, index, ok, &output, malformed);
        true
    }

    /// The tab's reply streams: the new turn has arrived, and nothing is typed meanwhile.
    pub fn chunk(&self, tab: &str) {
        if !self.has_session(tab) {
            return;
        }
        self.feed(tab, Input::Streaming(true));
        self.feed(
            tab,
            Input::TurnSeen {
                tab: tab.to_string(),
            },
        );
    }

    /// The tab's turn ended with these commands (all of them, in order).
    pub fn turn_ended(&self, tab: &str, turn_id: &str, text: &str, commands: Vec<FoundCommand>) {
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
    pub fn result(
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

    /// The person submitted a message of their own in the tab: a Stop there is over (the
    /// tab's replies start sessions again), and a session that runs pauses.
    pub fn person_spoke(&self, tab: &str) {
        if self.stopped.lock().expect("loops").remove(tab) {
            tracing::info!(
                tab,
                "the person spoke after a Stop: the tab's replies loop again"
            );
        }
        if self.has_session(tab) {
            self.feed(tab, Input::PersonMessage);
        }
    }

    /// The tab holds a delivery while the person types in its box (`task_update {deliver_id,
    /// state: "held"}`): the session's arrival window starts again.
    pub fn held(&self, tab: &str, deliver_id: &str) {
        let ours = self
            .live
            .lock()
            .expect("loops")
            .get(tab)
            .is_some_and(|l| deliver_id.starts_with(l.session.id()));
        if ours {
            self.feed(tab, Input::Held);
        }
    }

    /// Stop, pause or resume the session of a tab (or of an agent's tab, by name).
    ///
    /// A person's Stop is final: the tab is held until the person speaks there (nothing is
    /// typed into it automatically, its replies start no session and run no command), and
    /// the session's running commands are cancelled; the panel lists them. A Stop in a tab
    /// with no session still holds the tab (its model may be answering a results message).
    /// [`Control::CallerLeft`] ends only that session: the tab is free at once.
    pub fn control(&self, who: &Who<'_>, what: Control) -> Result<String, String> {
        let tab = match (self.tab_of(who), who, what) {
            (Some(tab), _, _) => tab,
            (None, Who::Tab(t), Control::Stop) => {
                self.stopped.lock().expect("loops").insert(t.to_string());
                let cancelled = self.cancel_inflight(t);
                return Ok(stopped_text(&cancelled, &self.jobs.running_of(t)));
            }
            (None, _, _) => {
                return Err(match who {
                    Who::Tab(_) => {
                        "这个标签页没有运行中的会话 / no session runs in this tab".to_string()
                    }
                    Who::Agent(n) => {
                        format!("代理 {n} 没有运行中的会话 / agent `{n}` runs no session")
                    }
                    Who::Session(s) => format!("没有会话 {s} / no session `{s}` runs"),
                })
            }
        };
        let input = match what {
            Control::Stop => {
                self.stopped.lock().expect("loops").insert(tab.clone());
                Input::Stop
            }
            Control::CallerLeft => Input::CallerLeft,
            Control::Pause => Input::Pause,
            Control::Resume => {
                if let Some(l) = self.live.lock().expect("loops").get_mut(&tab) {
                    l.paused_at = None;
                }
                Input::Resume
            }
        };
        let cancelled = match what {
            Control::Stop | Control::CallerLeft => self.cancel_inflight(&tab),
            Control::Pause | Control::Resume => Vec::new(),
        };
        if !cancelled.is_empty() {
            if let Some(l) = self.live.lock().expect("loops").get_mut(&tab) {
                l.cancelled = cancelled.clone();
            }
        }
        self.feed(&tab, input);
        Ok(match what {
            Control::Stop => stopped_text(&cancelled, &self.jobs.running_of(&tab)),
            Control::CallerLeft => "已结束 / ended (its caller left)".into(),
            Control::Pause => "已暂停 / paused".into(),
            Control::Resume => "已继续 / resumed".into(),
        })
    }

    fn tab_of(&self, who: &Who<'_>) -> Option<String> {
        let live = self.live.lock().expect("loops");
        match who {
            Who::Tab(t) => live.contains_key(*t).then(|| t.to_string()),
            Who::Agent(n) => live
                .iter()
                .find(|(_, l)| l.agent.as_ref().is_some_and(|a| a.spec.name == *n))
                .map(|(t, _)| t.clone()),
            Who::Session(s) => live
                .iter()
                .find(|(_, l)| l.session.id() == *s)
                .map(|(t, _)| t.clone()),
        }
    }

    /// Starts a session of `agent` on its tab with `task` after the primer, and waits for
    /// its final answer (or why it ended without one).
    pub async fn task(&self, agent: AgentRecord, task: &str) -> Result<String, LoopError> {
        if !self.settings.enabled {
            return Err(LoopError::Off);
        }
        let name = agent.spec.name.clone();
        let target = agent.spec.target.clone();
        let tab = self
            .asks
            .resolve(&target)
            .ok()
            .and_then(|tabs| {
                tabs.into_iter()
                    .find(|c| c.state() == crate::hub::registry::ConnState::Connected)
            })
            .ok_or_else(|| LoopError::NoTab {
                name: name.clone(),
                target: target.clone(),
            })?;
        let (tx, rx) = oneshot::channel();
        let actions = {
            let mut live = self.live.lock().expect("loops");
            if live.contains_key(&tab.id) {
                return Err(LoopError::Busy(tab.display()));
            }
            let id = format!("s-{}", uuid::Uuid::new_v4().simple());
            let mut session = Session::new(
                &id,
                &tab.id,
                self.limits(agent.spec.max_rounds),
                rand::random(),
                now(),
            );
            self.record_start(&id, Some(&name), &tab.id);
            let actions = session.begin(task, now());
            let mut l = Live::new(session, Some(agent));
            l.waiters.push(tx);
            live.insert(tab.id.clone(), l);
            actions
        };
        self.act(&tab.id, actions);
        self.wake.notify_one();
        match rx.await {
            Ok(r) => r,
            Err(_) => Err(LoopError::Ended(
                "集线器正在停止 / the hub is stopping".into(),
            )),
        }
    }

    fn record_start(&self, id: &str, agent: Option<&str>, tab: &str) {
        let rec = SessionRecord {
            id: id.to_string(),
            agent: agent.map(str::to_string),
            tab: tab.to_string(),
            state: "running".into(),
            round: 0,
            started_ms: crate::store::now_ms(),
            ended_ms: None,
            why: None,
        };
        if let Err(e) = agent_store::insert_session(&self.asks.hub().store, &rec) {
            tracing::warn!("agent session {id} not journaled: {e}");
        }
    }

    /// Feeds one input to a tab's session and carries out what it decides.
    fn feed(&self, tab: &str, input: Input) {
        let actions = {
            let mut live = self.live.lock().expect("loops");
            let Some(l) = live.get_mut(tab) else { return };
            l.session.handle(input, now())
        };
        if !actions.is_empty() {
            self.act(tab, actions);
        }
        self.wake.notify_one();
    }

    fn act(&self, tab: &str, actions: Vec<Action>) {
        for a in actions {
            match a {
                Action::Deliver {
                    text,
                    round,
                    of,
                    deliver_id,
                    primer,
                    vars,
                } => self.deliver(tab, text, round, of, deliver_id, primer, vars),
                Action::End { why, answer } => self.end(tab, why, answer),
                Action::Pause { why } => self.paused(tab, why),
                Action::ForgedResult => {
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

    fn session_id(&self, tab: &str) -> Option<String> {
        let live = self.live.lock().expect("loops");
        live.get(tab).map(|l| l.session.id().to_string())
    }

    #[allow(clippy::too_many_arguments)]
    fn deliver(
        &self,
        tab: &str,
        text: String,
        round: u32,
        of: u32,
        deliver_id: String,
        primer: bool,
        vars: Vec<(String, String)>,
    ) {
        let (session_id, agent, commands) = {
            let mut live = self.live.lock().expect("loops");
            let Some(l) = live.get_mut(tab) else { return };
            let commands: Vec<RoundCommand> = std::mem::take(&mut l.round).into_values().collect();
            (l.session.id().to_string(), l.agent.clone(), commands)
        };
        let store = &self.asks.hub().store;
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
        let client = self.asks.hub().registry.get(tab);
        let text = match (primer, self.host.get(), &client) {
            (true, Some(host), Some(c)) => {
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
                    host.primer(c, agent.as_ref(), &limits, recalled.as_deref())
                )
            }
            _ => text,
        };
        if self.is_stopped(tab) {
            tracing::info!(tab, "results not typed: a person stopped this tab");
            return;
        }
        if let Some(c) = &client {
            // The page may echo the sent text as the person's message: it is not theirs.
            c.typed_by_hub(&crate::protocol::Prompt::from(text.clone()));
        }
        let frame = ServerFrame::Deliver {
            text,
            auto_send: true,
            run_id: None,
            deliver_id: Some(deliver_id),
            agent: Some(AgentTag {
                session: session_id.clone(),
                round,
                of,
                name: agent.as_ref().map(|a| a.spec.name.clone()),
            }),
        };
        if let Err(e) = self.asks.hub().registry.send(tab, &frame) {
            tracing::warn!("agent results not sent to {tab}: {e}");
        }
        self.progress(tab, &session_id, "sent", None, None);
    }

    /// One observation per command of the round in the agent's memory scope, added to its
    /// stream; a round is a turn of the scope (its memories cool). Returns the reflection
    /// prompt and the ids it cites when the stream passed its threshold.
    fn observe(
        &self,
        agent: &AgentRecord,
        round: u32,
        commands: &[RoundCommand],
    ) -> Option<(String, Vec<i64>)> {
        let scope = scope_of(agent);
        let tags = vec!["observation".to_string()];
        let mut streams = self.streams.lock().expect("loops");
        let stream = streams
            .entry(agent.spec.name.clone())
            .or_insert_with(|| Stream::new(self.settings.reflect_threshold));
        let mut due = false;
        for c in commands {
            let o = Observation::new(round, &c.command, c.ok, &c.output, None);
            let text = o.text();
            match self.memory.add(&o.as_memory(&scope, &text, &tags)) {
                Ok(id) => due |= stream.push(id, o),
                Err(e) => tracing::warn!("observation not kept: {e}"),
            }
        }
        self.memory.turn(&[&scope]);
        due.then(|| stream.reflect())
    }

    /// The tab's turn after a reflection was asked: the lines citing `[#ID]` become one
    /// memory tagged `reflection` whose sources are the ids cited.
    fn reflected(&self, tab: &str, text: &str) {
        let (asked, agent) = {
            let mut live = self.live.lock().expect("loops");
            let Some(l) = live.get_mut(tab) else { return };
            let Some(asked) = l.reflection.take() else {
                return;
            };
            let Some(agent) = l.agent.clone() else { return };
            (asked, agent)
        };
        let Some((reflection, sources)) = memory_stream::reflection(text, &asked) else {
            tracing::info!(agent = %agent.spec.name, "the reply cited no observation: no reflection kept");
            return;
        };
        let scope = scope_of(&agent);
        let tags = vec!["reflection".to_string()];
        let kept = self.memory.add(&crate::memory::NewMemory {
            scope: &scope,
            text: &reflection,
            tags: &tags,
            pinned: false,
            importance: Some(memory_stream::REFLECTION_IMPORTANCE),
            author: Some(&agent.spec.name),
            sources: &sources,
        });
        if let Err(e) = kept {
            tracing::warn!("reflection not kept: {e}");
        }
    }

    /// The agent's memories most relevant to `about`, ranked by relevance × recency ×
    /// importance (the team memory's own search), as the primer's memory block.
    fn recall(&self, agent: &AgentRecord, about: &str) -> Option<String> {
        match self
            .memory
            .search(&scope_of(agent), about, memory_stream::RECALL)
        {
            Ok(hits) => memory_stream::recall_block(&hits),
            Err(e) => {
                tracing::warn!("agent memories not recalled: {e}");
                None
            }
        }
    }

    fn end(&self, tab: &str, why: Why, answer: Option<String>) {
        let Some(l) = self.live.lock().expect("loops").remove(tab) else {
            return;
        };
        let id = l.session.id().to_string();
        let why_text = why.text();
        let _ = agent_store::set_session_state(
            &self.asks.hub().store,
            &id,
            "ended",
            Some(&format!("{}: {why_text}", why.code())),
            Some(crate::store::now_ms()),
        );
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
        let _ = self.asks.hub().registry.send(tab, &frame);
        let result = match answer {
            Some(a) => Ok(a),
            None => Err(LoopError::Ended(why_text)),
        };
        for w in l.waiters {
            let _ = w.send(result.clone());
        }
    }

    fn paused(&self, tab: &str, why: Why) {
        let Some(id) = self.session_id(tab) else {
            return;
        };
        if let Some(l) = self.live.lock().expect("loops").get_mut(tab) {
            l.paused_at.get_or_insert(now());
        }
        let text = why.text();
        let _ = agent_store::set_session_state(
            &self.asks.hub().store,
            &id,
            "paused",
            Some(&format!("{}: {text}", why.code())),
            None,
        );
        self.progress(tab, &id, "paused", None, Some(&text));
    }

    /// A `flow_event` for the tab's panel: the session's round, the command running, why
    /// it paused or ended (for the person; never typed to the model).
    fn progress(
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
    fn progress_of(
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
        let _ = self.asks.hub().registry.send(tab, &frame);
    }

    /// Sessions now and lately, for `agent status`, the dashboard and the doors.
    pub fn sessions(&self) -> Vec<SessionView> {
        let mut out: Vec<SessionView> = {
            let live = self.live.lock().expect("loops");
            live.iter()
                .map(|(tab, l)| {
                    let (state, why) = l.session.status();
                    SessionView {
                        session: l.session.id().to_string(),
                        agent: l.agent.as_ref().map(|a| a.spec.name.clone()),
                        tab: tab.clone(),
                        state: state.to_string(),
                        round: l.session.round(),
                        of: l.session.max_rounds(),
                        running: l.running.clone(),
                        why: why.map(Why::text),
                        last: l.last.clone(),
                    }
                })
                .collect()
        };
        let ended = self.ended.lock().expect("loops");
        out.extend(ended.iter().rev().map(|e| SessionView {
            session: e.session.clone(),
            agent: e.agent.clone(),
            tab: e.tab.clone(),
            state: "ended".into(),
            round: e.round,
            of: e.of,
            running: None,
            why: Some(e.why.clone()),
            last: e.last.clone(),
        }));
        out
    }
}

/// A `flow_event` for a tab's panel about one session.
fn progress_frame(
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
fn stopped_text(cancelled: &[String], jobs: &[String]) -> String {
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

/// The memory scope of an agent: its `memory=SCOPE`, or `agent.NAME`.
pub fn scope_of(agent: &AgentRecord) -> String {
    agent
        .spec
        .memory
        .clone()
        .unwrap_or_else(|| format!("agent.{}", agent.spec.name))
}

/// Whose session a control verb acts on.
#[derive(Debug, Clone, Copy)]
pub enum Who<'a> {
    /// The session of this tab (client id).
    Tab(&'a str),
    /// The session of this agent.
    Agent(&'a str),
    /// This session id.
    Session(&'a str),
}

/// Stop, pause, resume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// A person ends it now (within 1 s); the tab is held until they speak there.
    Stop,
    /// Its caller left (an MCP cancel, an API client gone): it ends, the tab is free.
    CallerLeft,
    /// Wait for the person.
    Pause,
    /// Go on.
    Resume,
}

/// A session as `agent status`, the panel and the dashboard show it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SessionView {
    /// Its id.
    pub session: String,
    /// The agent, if any.
    pub agent: Option<String>,
    /// The tab's client id.
    pub tab: String,
    /// `running`, `paused`, `ended`.
    pub state: String,
    /// Rounds closed.
    pub round: u32,
    /// The round limit.
    pub of: u32,
    /// The command running now.
    pub running: Option<String>,
    /// Why it paused or ended.
    pub why: Option<String>,
    /// Its last command, with ✓/✗.
    pub last: Option<LastCommand>,
}
