//! The agent loop wired to the hub (docs/agents.md): one [`Loops`] service holds the sessions of
//! the tabs that loop, and one actor task ([`LoopActor`]) feeds each [`Session`] what its tab
//! does and carries out what the session decides.
//!
//! What a tab does reaches the loop as a [`TurnEvent`] on one bounded channel, sent by
//! `control`'s intake in the order it saw it (commands found, their results, the turn
//! streaming and ending, the person speaking, a held delivery). The actor consumes them in
//! that order and is the one place that journals a command, replays a journaled one, and
//! types the results message (`deliver.rs` builds the loop's only `deliver` frame). The doors'
//! verbs (`agent task`, Stop, Pause, Resume) change what must hold at once here and hand the
//! rest to the actor too.
//!
//! Files: `actor` (the task and its timer), `session` (feeding a session and acting on what
//! it decides), `journal` (commands, rounds, sessions in the store; restoring after a
//! restart), `deliver` (the results message, the files it carries, and the panel's frames),
//! `memory` (an agent's observations, reflections and recall).
//!
//! It stands on the ask service (`crate::ask`), the store and the pure core in
//! `crate::agents`; the primer comes from above through [`LoopHost`], given at construction.
//! It never runs a command itself: commands run in `control` like every other command, and
//! only their results come here.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::agents::memory_stream::MemoryStream;
use crate::agents::session::{Input, Session, SessionLimits, Why};
use crate::agents::store::{AgentRecord, RoundCommand};
use crate::ask::Asks;
use crate::commands::agent::Tool;
use crate::commands::permissions::Permissions;
use crate::commands::scanner::FoundCommand;
use crate::commands::vars::Variables;
use crate::config::AgentSettings;
use crate::hub::files::FileRef;
use crate::hub::registry::{Client, Registry};
use crate::store::Store;

mod actor;
mod deliver;
mod journal;
mod memory;
mod session;

pub use actor::LoopActor;
use deliver::stopped_text;
pub use memory::scope_of;

/// What the loop needs from the layers above it: the primer of a tab (its role card's
/// `system_prompt` and a guide of what it may do now), built where cards, skills and MCP live.
pub trait LoopHost: Send + Sync + 'static {
    /// The primer for `tab`, under 3,000 characters; `recalled` is the agent's memories
    /// retrieved for this message (its memory block), when it has some.
    fn primer(
        &self,
        tab: &Arc<Client>,
        agent: Option<&AgentRecord>,
        limits: &SessionLimits,
        recalled: Option<&str>,
    ) -> String;
}

/// What a tab did, as intake saw it, in the order it saw it: the agent loop's one input from
/// `control`. Each goes to the loop's actor over one bounded channel ([`Loops::send`]).
pub enum TurnEvent {
    /// Command `index` of a reply's turn is about to run. A tab that loops (`wants`: its
    /// card's `loop: true` or `agent loop on`, with the card's `max_rounds`) and has no
    /// session gets one now. `start` says whether to run it: as a session's command (with
    /// what cancels it), not at all (it already ran: its journaled result was used), or as a
    /// command of no session.
    CommandFound {
        tab: Arc<Client>,
        turn_id: String,
        index: u32,
        /// The command as written (for a malformed one, why it is).
        body: String,
        /// The text is no command the parser takes: the session counts it as a mistake.
        malformed: bool,
        wants: Option<Option<u32>>,
        start: oneshot::Sender<Start>,
    },
    /// A session's command has its result: journaled first, then `show` (the tab's
    /// `cmd_result`), then the session hears it, so the tab sees each result before the
    /// results message that holds it.
    CommandDone {
        tab: String,
        turn_id: String,
        index: u32,
        ok: bool,
        output: String,
        show: Option<Show>,
    },
    /// The tab's reply streams: its new turn arrived, and nothing is typed meanwhile.
    Streaming { tab: String },
    /// The tab's turn ended with these commands (all of them, in order).
    TurnEnded {
        tab: String,
        turn_id: String,
        text: String,
        commands: Vec<FoundCommand>,
    },
    /// The person submitted a message of their own in the tab.
    PersonSpoke { tab: String },
    /// The tab holds delivery `deliver_id` while the person types in its box.
    Held { tab: String, deliver_id: String },
    /// The tab could not send delivery `deliver_id` (a file the site refused; its words):
    /// nothing was sent.
    DeliveryFailed {
        tab: String,
        deliver_id: String,
        error: String,
    },
    /// A command of a stopped tab's reply that was not run: the panel lists it.
    NotRun { tab: String, command: String },
}

/// What shows a command's result in its tab (control's `cmd_result`), run by the actor
/// between the journal and the session.
pub type Show = Box<dyn FnOnce() + Send>;

/// Whether a command found in a reply runs (the actor's answer to
/// [`TurnEvent::CommandFound`]).
#[derive(Debug)]
pub enum Start {
    /// A session's command: run it, and send its result back ([`TurnEvent::CommandDone`]);
    /// the token is cancelled by a person's Stop.
    Session(CancellationToken),
    /// It already ran (it is journaled): its result went to the session; do not run it.
    Replayed,
    /// No session's: run it as any other command.
    Free,
}

/// The actor's inputs: what intake saw, and what the doors' verbs hand on.
enum ActorInput {
    Turn(TurnEvent),
    /// `agent task` started a session (already in `live`): journal it and send its first
    /// message.
    Begin {
        tab: String,
        task: String,
    },
    /// A verb for a session: Stop, Pause, Resume, its caller gone.
    Verb {
        tab: String,
        input: Input,
    },
}

/// How many events wait for the actor at most.
const EVENTS: usize = 1024;

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
    /// Files the next message carries (`agent task … with files=`, a `returns: file` skill's
    /// file of this round).
    next_files: Vec<FileRef>,
    /// The files of the message sent last and its round, until its turn shows (a resend
    /// carries them again).
    sent_files: (Option<u32>, Vec<FileRef>),
    /// The message sent last, while it carries files and its turn has not shown: journaled
    /// with them so a restart sends it again with its files (docs/files.md).
    sent_message: Option<PendingMessage>,
    /// The deliver id of the message sent last: a failure reported for an earlier one (a
    /// delivery the tab held across a restart) is not this message's.
    last_deliver: String,
}

/// What a session has pending, journaled with it (`agent_sessions.pending`): the files of its
/// next message, and the message sent but not yet seen with its files.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct PendingFiles {
    #[serde(default)]
    next_files: Vec<FileRef>,
    #[serde(default)]
    sent: Option<PendingMessage>,
}

/// A message sent and not yet seen, as the session built it (before its primer).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct PendingMessage {
    text: String,
    round: u32,
    primer: bool,
    vars: Vec<(String, String)>,
    /// How many sends the session had made (its next deliver id goes past them).
    sends: u32,
    files: Vec<FileRef>,
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
            next_files: Vec::new(),
            sent_files: (None, Vec::new()),
            sent_message: None,
            last_deliver: String::new(),
        }
    }

    /// Whether the session has files pending (what `journal_pending` writes).
    fn has_pending(&self) -> bool {
        self.sent_message.is_some() || !self.next_files.is_empty()
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
    /// Told once, by intake: the text is no command the parser takes.
    malformed: bool,
    cancel: CancellationToken,
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
    /// The hub's store: sessions, rounds and the command journal.
    store: Store,
    /// The hub's tabs: the results message and the panel's frames go there.
    registry: Arc<Registry>,
    /// The background jobs (`CMD &`): a person's Stop lists those its tab started.
    jobs: Arc<crate::exec::jobs::Jobs>,
    vars: Arc<Variables>,
    memory: Arc<crate::memory::Memory>,
    settings: AgentSettings,
    /// Builds primers (given at construction).
    host: Arc<dyn LoopHost>,
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
    streams: Mutex<HashMap<String, MemoryStream>>,
    /// To the actor: every input in order.
    tx: mpsc::Sender<ActorInput>,
}

/// Recently ended sessions kept for `agent status`.
const ENDED_KEPT: usize = 64;

fn now() -> u64 {
    crate::store::now_ms().max(0) as u64
}

/// What the loop stands on, given once at construction by the composition root.
pub struct LoopParts {
    pub asks: Arc<Asks>,
    pub store: Store,
    pub registry: Arc<Registry>,
    pub jobs: Arc<crate::exec::jobs::Jobs>,
    /// Receives `$R1`, `$R2`, … of each round.
    pub vars: Arc<Variables>,
    pub memory: Arc<crate::memory::Memory>,
    pub settings: AgentSettings,
    pub host: Arc<dyn LoopHost>,
}

impl Loops {
    /// The loop service and its actor (spawn [`LoopActor::run`] once; until it runs, inputs
    /// wait on the channel).
    pub fn new(parts: LoopParts) -> (Arc<Loops>, LoopActor) {
        let (tx, rx) = mpsc::channel(EVENTS);
        let loops = Arc::new(Loops {
            asks: parts.asks,
            store: parts.store,
            registry: parts.registry,
            jobs: parts.jobs,
            vars: parts.vars,
            memory: parts.memory,
            settings: parts.settings,
            host: parts.host,
            live: Mutex::new(HashMap::new()),
            loop_on: Mutex::new(HashSet::new()),
            ended: Mutex::new(Vec::new()),
            stopped: Mutex::new(HashSet::new()),
            inflight: Mutex::new(HashMap::new()),
            streams: Mutex::new(HashMap::new()),
            tx,
        });
        (loops.clone(), LoopActor::new(loops, rx))
    }

    /// Hands what a tab did to the actor, in order. Never waits: intake calls this on a
    /// socket's task. A full channel (the actor is far behind) sends it from a task of its
    /// own, and says so.
    pub fn send(&self, ev: TurnEvent) {
        if let TurnEvent::PersonSpoke { tab } = &ev {
            // At once: the next reply of this tab runs its commands again.
            if self.stopped.lock().expect("loops").remove(tab) {
                tracing::info!(
                    tab,
                    "the person spoke after a Stop: the tab's replies loop again"
                );
            }
        }
        self.post(ActorInput::Turn(ev));
    }

    fn post(&self, ev: ActorInput) {
        match self.tx.try_send(ev) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(ev)) => {
                tracing::warn!("the agent loop is behind: an input waits for room");
                let tx = self.tx.clone();
                crate::spawn::task(async move {
                    let _ = tx.send(ev).await;
                });
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }

    /// A session's command result for the actor (see [`TurnEvent::CommandDone`]). When the
    /// actor is gone (the hub stops) the result is still shown.
    pub async fn done(&self, ev: TurnEvent) {
        if let Err(mpsc::error::SendError(ActorInput::Turn(TurnEvent::CommandDone {
            show: Some(show),
            ..
        }))) = self.tx.send(ActorInput::Turn(ev)).await
        {
            show();
        }
    }

    /// Whether loops run at all on this hub.
    pub fn enabled(&self) -> bool {
        self.settings.enabled
    }

    /// The limits of a session: the hub's, with a card's or an agent's `max_rounds`.
    pub fn limits(&self, max_rounds: Option<u32>) -> SessionLimits {
        let s = &self.settings;
        SessionLimits {
            max_rounds: max_rounds.unwrap_or(s.max_rounds).max(1),
            max_wall_ms: s.max_minutes * 60_000,
            gap_ms: s.gap_ms,
            arrival_ms: s.arrival_ms,
            result_chars: s.result_chars,
            ..SessionLimits::default()
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

    /// Stop, pause or resume the session of a tab (or of an agent's tab, by name).
    ///
    /// A person's Stop is final: the tab is held until the person speaks there (nothing is
    /// typed into it automatically, its replies start no session and run no command), and
    /// the session's running commands are cancelled; the panel lists them. A Stop in a tab
    /// with no session still holds the tab (its model may be answering a results message).
    /// [`LoopControl::CallerLeft`] ends only that session: the tab is free at once.
    pub fn control(&self, who: &Who<'_>, what: LoopControl) -> Result<String, String> {
        let tab = match (self.tab_of(who), who, what) {
            (Some(tab), _, _) => tab,
            (None, Who::Tab(t), LoopControl::Stop) => {
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
            LoopControl::Stop => {
                self.stopped.lock().expect("loops").insert(tab.clone());
                Input::Stop
            }
            LoopControl::CallerLeft => Input::CallerLeft,
            LoopControl::Pause => Input::Pause,
            LoopControl::Resume => {
                if let Some(l) = self.live.lock().expect("loops").get_mut(&tab) {
                    l.paused_at = None;
                }
                Input::Resume
            }
        };
        let cancelled = match what {
            LoopControl::Stop | LoopControl::CallerLeft => self.cancel_inflight(&tab),
            LoopControl::Pause | LoopControl::Resume => Vec::new(),
        };
        if !cancelled.is_empty() {
            if let Some(l) = self.live.lock().expect("loops").get_mut(&tab) {
                l.cancelled = cancelled.clone();
            }
        }
        self.post(ActorInput::Verb {
            tab: tab.clone(),
            input,
        });
        Ok(match what {
            LoopControl::Stop => stopped_text(&cancelled, &self.jobs.running_of(&tab)),
            LoopControl::CallerLeft => "已结束 / ended (its caller left)".into(),
            LoopControl::Pause => "已暂停 / paused".into(),
            LoopControl::Resume => "已继续 / resumed".into(),
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
        self.task_with_files(agent, task, Vec::new()).await
    }

    /// [`Loops::task`] with `files` attached to the session's first message (docs/files.md).
    pub async fn task_with_files(
        &self,
        agent: AgentRecord,
        task: &str,
        files: Vec<FileRef>,
    ) -> Result<String, LoopError> {
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
        {
            let mut live = self.live.lock().expect("loops");
            if live.contains_key(&tab.id) {
                return Err(LoopError::Busy(tab.display()));
            }
            let id = format!("s-{}", uuid::Uuid::new_v4().simple());
            let session = Session::new(
                &id,
                &tab.id,
                self.limits(agent.spec.max_rounds),
                rand::random(),
                now(),
            );
            let mut l = Live::new(session, Some(agent));
            l.waiters.push(tx);
            l.next_files = files;
            live.insert(tab.id.clone(), l);
        }
        self.post(ActorInput::Begin {
            tab: tab.id.clone(),
            task: task.to_string(),
        });
        match rx.await {
            Ok(r) => r,
            Err(_) => Err(LoopError::Ended(
                "集线器正在停止 / the hub is stopping".into(),
            )),
        }
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
pub enum LoopControl {
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
