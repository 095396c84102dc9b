//! One tab as the registry holds it: its identity, its connection and what it keeps between
//! frames, and the connection's handles (the writer's queue, the kill switch).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Context, Poll};

use futures_util::task::AtomicWaker;

use super::super::outq;
use crate::protocol::{AppHeartbeat, Prompt, Role};
use crate::store::now_ms;

/// What the writer half of a tab's connection is asked to do.
#[derive(Debug)]
pub enum Outbound {
    /// One encoded JSON frame.
    Frame(String),
    /// The answer to the tab's ping (its payload): a WebSocket control frame, never kept.
    Pong(Vec<u8>),
}

impl Outbound {
    /// The JSON frame, if this is one.
    pub fn into_frame(self) -> Option<String> {
        match self {
            Outbound::Frame(text) => Some(text),
            Outbound::Pong(_) => None,
        }
    }
}

/// Close codes the hub uses besides the standard ones.
pub mod close {
    /// Going away: hub shutdown.
    pub const GOING_AWAY: u16 = 1001;
    /// Policy violation: bad token, no hello in time.
    pub const POLICY: u16 = 1008;
    /// Message too big.
    pub const TOO_BIG: u16 = 1009;
    /// No frame or pong within the heartbeat timeout.
    pub const HEARTBEAT_TIMEOUT: u16 = 4000;
    /// The tab's outbound queue overflowed.
    pub const SLOW_CONSUMER: u16 = 4008;
    /// Another connection resumed this client id.
    pub const REPLACED: u16 = 4009;
}

/// The sending side of one live connection.
#[derive(Debug, Clone)]
pub struct ConnHandle {
    /// Distinguishes a resumed connection from the one it replaced.
    pub conn_id: u64,
    pub tx: outq::Sender<Outbound>,
    /// Ends the connection at once, bypassing a full queue.
    pub kill: Killer,
}

/// A way to end a connection even when its outbound queue is full.
///
/// One word and one `Notify` (not a `CancellationToken`, whose check takes a lock and whose
/// tree node is a larger allocation per socket): `is_killed` is a load, on the path of every
/// frame routed to the tab.
#[derive(Debug, Clone, Default)]
pub struct Killer(Arc<Kill>);

#[derive(Debug, Default)]
struct Kill {
    /// `KILLED | code` once killed, 0 before.
    state: AtomicU32,
    woken: tokio::sync::Notify,
    /// The socket's writer, which polls for the kill (`poll_killed`) instead of holding a
    /// `Notified` in its task for as long as the tab is connected.
    writer: AtomicWaker,
}

const KILLED: u32 = 1 << 16;

/// Bytes of the state a `Killer` shares (for `a_tab_entry_stays_small`).
#[cfg(test)]
pub(super) fn kill_size() -> usize {
    std::mem::size_of::<Kill>()
}

impl Killer {
    /// Ends the connection with `code`; the first call's code wins.
    pub fn kill(&self, code: u16) {
        let first = self
            .0
            .state
            .compare_exchange(
                0,
                KILLED | u32::from(code),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok();
        if first {
            self.0.woken.notify_waiters();
            self.0.writer.wake();
        }
    }

    /// The kill as a poll, for the one task that owns the connection's writer: ready with the
    /// close code once `kill` was called. Nothing is held between polls but a waker here.
    pub fn poll_killed(&self, cx: &mut Context<'_>) -> Poll<u16> {
        self.0.writer.register(cx.waker());
        if self.is_killed() {
            Poll::Ready(self.code())
        } else {
            Poll::Pending
        }
    }

    /// True once `kill` was called.
    pub fn is_killed(&self) -> bool {
        self.0.state.load(Ordering::Acquire) != 0
    }

    /// The close code `kill` was called with (0 before).
    pub fn code(&self) -> u16 {
        (self.0.state.load(Ordering::Acquire) & 0xffff) as u16
    }

    /// Resolves with the close code once `kill` was called.
    pub async fn killed(&self) -> u16 {
        // Made before the check: `notify_waiters` wakes a `Notified` from its creation on.
        let woken = self.0.woken.notified();
        if !self.is_killed() {
            woken.await;
        }
        self.code()
    }
}

/// What the hub knows about a tab apart from its connection.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClientInfo {
    pub site: String,
    pub label: Option<String>,
    pub role: Role,
    pub group: Option<String>,
    pub url: Option<String>,
    pub title: Option<String>,
}

/// Connection state as shown in `status` and used for loss handling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnState {
    Connected,
    /// Disconnected or silent past the heartbeat timeout; may come back with its id.
    Lost,
}

/// A tab's connection, if it has one, and how frames reach it. Every frame for the tab is
/// routed under this lock, so a frame cannot overtake one sent before it.
#[derive(Default)]
pub(super) struct Conn {
    pub(super) handle: Option<ConnHandle>,
    /// The connection replays the store itself, page by page (the WebSocket). An SSE stream
    /// is handed everything kept at attach instead.
    pub(super) drains_store: bool,
    /// While set, every frame for the tab is kept in the store behind the ones its writer is
    /// still replaying; the writer clears it when the store is empty.
    pub(super) catching_up: bool,
    /// Set once a frame was routed to the connection after its kill: what its queue held
    /// went to the store then, and every later frame goes to the store too (within the
    /// per-tab cap), never to memory.
    pub(super) to_store: bool,
    /// The frame id set aside then for the frame its writer may still have been writing
    /// (older than everything its queue held); `release` keeps that frame there.
    pub(super) slot: Option<i64>,
    /// Frames meant for the connection that it did not get since its kill (for the log).
    pub(super) not_delivered: usize,
}

/// One tab, connected or not. Shared by the connection task, the task queue and commands.
pub struct Client {
    pub id: String,
    info: RwLock<ClientInfo>,
    conn: Mutex<Conn>,
    /// Set when frames for the tab were kept in the store while it is connected; its
    /// connection's writer, woken through `writer`, polls for it (`poll_kept`): no `Notify`
    /// per tab and no `Notified` in each socket's task.
    kept_news: AtomicBool,
    writer: AtomicWaker,
    /// Last frame or pong, in ms since the epoch.
    last_seen_ms: AtomicI64,
    /// Counts tasks given to this tab (for least-loaded scheduling).
    pub tasks_started: AtomicU64,
    /// The page's last app heartbeat (flow step, counts), for status displays.
    /// Boxed: most tabs never send one, and each would carry its room inline.
    heartbeat: Mutex<Option<Box<AppHeartbeat>>>,
    /// Last streamed chunk or task progress (for the "no new tokens" timeout).
    last_stream_ms: AtomicI64,
    /// Texts the hub itself typed into this tab (task prompts), newest last, as keyed hashes
    /// of their trimmed text: an idle tab does not keep its last prompts (each up to a frame
    /// long, and encoded twice). When the page reports one back as `user_input` it is not the
    /// person speaking and gets no authority. A collision could only take authority from the
    /// person's words, never give it to the hub's: the text the hub typed always matches.
    typed_by_hub: Mutex<VecDeque<u64>>,
    /// The tab's task queue (owned by `Tasks`).
    pub(in crate::hub) queue: Mutex<super::super::queue::TabQueue>,
    /// Set while the tab lives on another node of the cluster (then `conn` and `queue` are
    /// unused: its node has them).
    /// Boxed: a tab of this node (most of them) holds a pointer, not the node's name,
    /// health and deadline inline.
    remote: RwLock<Option<Box<Remote>>>,
    /// Fast check of `remote.is_some()` on the hot path.
    is_remote: AtomicBool,
    /// When the current connection was made (ms since the epoch).
    since_ms: AtomicI64,
    /// Tasks this node sent to the tab on its node and still waits for.
    pub(in crate::hub) remote_waiting: AtomicUsize,
    /// Batches of the tab's frames on their way to the store (written off the async workers,
    /// with ids set aside in order): a replay waits for them.
    pub(super) flushing: AtomicUsize,
}

/// What the cluster's presence says of a tab on another node.
#[derive(Debug, Clone, PartialEq)]
pub struct Remote {
    pub node: String,
    pub connected: bool,
    pub health: String,
    pub load: usize,
    /// Gone from every view unless told again before this (ms since the epoch).
    pub deadline_ms: i64,
}

impl Client {
    pub(super) fn new(id: String, info: ClientInfo) -> Client {
        Client {
            id,
            info: RwLock::new(info),
            conn: Mutex::default(),
            kept_news: AtomicBool::new(false),
            writer: AtomicWaker::new(),
            last_seen_ms: AtomicI64::new(now_ms()),
            tasks_started: AtomicU64::new(0),
            heartbeat: Mutex::new(None),
            last_stream_ms: AtomicI64::new(0),
            typed_by_hub: Mutex::new(VecDeque::new()),
            queue: Mutex::default(),
            remote: RwLock::new(None),
            is_remote: AtomicBool::new(false),
            since_ms: AtomicI64::new(0),
            remote_waiting: AtomicUsize::new(0),
            flushing: AtomicUsize::new(0),
        }
    }

    /// True while the tab lives on another node.
    pub fn is_remote(&self) -> bool {
        self.is_remote.load(Ordering::Acquire)
    }

    /// What presence says of a remote tab.
    pub fn remote(&self) -> Option<Remote> {
        self.remote
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_deref()
            .cloned()
    }

    /// The node a remote tab lives on; `None` for a tab of this node.
    pub fn node(&self) -> Option<String> {
        self.remote
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|r| r.node.clone())
    }

    pub(crate) fn set_remote(&self, remote: Option<Remote>) {
        let mut r = self.remote.write().unwrap_or_else(|p| p.into_inner());
        self.is_remote.store(remote.is_some(), Ordering::Release);
        *r = remote.map(Box::new);
    }

    /// When the tab's current connection was made.
    pub fn since_ms(&self) -> i64 {
        self.since_ms.load(Ordering::Relaxed)
    }

    pub(crate) fn set_since_ms(&self, ms: i64) {
        self.since_ms.store(ms, Ordering::Relaxed);
    }

    /// Remembers a prompt the hub typed into this tab (bounded to the last 16).
    pub fn typed_by_hub(&self, prompt: &Prompt) {
        let digest = prompt.digest();
        let mut q = self.typed_by_hub.lock().unwrap_or_else(|p| p.into_inner());
        q.push_back(digest);
        while q.len() > 16 {
            q.pop_front();
        }
    }

    /// True when `text` is something the hub typed here, not the person.
    pub fn was_typed_by_hub(&self, text: &str) -> bool {
        let digest = crate::protocol::text_digest(text);
        self.typed_by_hub
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&digest)
    }

    /// Records that the tab streamed something for its task.
    pub fn streamed(&self) {
        self.last_stream_ms.store(now_ms(), Ordering::Relaxed);
    }

    pub fn last_stream_ms(&self) -> i64 {
        self.last_stream_ms.load(Ordering::Relaxed)
    }

    pub fn set_heartbeat(&self, hb: AppHeartbeat) {
        *self.heartbeat.lock().unwrap_or_else(|p| p.into_inner()) = Some(Box::new(hb));
    }

    pub fn heartbeat(&self) -> Option<AppHeartbeat> {
        self.heartbeat
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_deref()
            .cloned()
    }

    pub fn info(&self) -> ClientInfo {
        self.info.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Reads the tab's info in place (no copy of its strings, as `info()` makes).
    pub fn with_info<R>(&self, f: impl FnOnce(&ClientInfo) -> R) -> R {
        f(&self.info.read().unwrap_or_else(|p| p.into_inner()))
    }

    pub fn role(&self) -> Role {
        self.info.read().unwrap_or_else(|p| p.into_inner()).role
    }

    pub fn update_info(&self, f: impl FnOnce(&mut ClientInfo)) {
        f(&mut self.info.write().unwrap_or_else(|p| p.into_inner()));
    }

    pub(super) fn conn(&self) -> std::sync::MutexGuard<'_, Conn> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Resolves when frames for this tab were kept in the store (for a test standing in for
    /// the writer: one waiter at a time, like `poll_kept`).
    #[cfg(test)]
    pub(super) async fn frames_kept(&self) {
        std::future::poll_fn(|cx| self.poll_kept(cx)).await
    }

    /// Tells the tab's connection's writer that frames were kept for it.
    pub(super) fn note_kept(&self) {
        self.kept_news.store(true, Ordering::Release);
        self.writer.wake();
    }

    /// For the connection's writer (one at a time): ready once frames were kept for the tab
    /// since the last time it was ready (news before the first poll counts).
    pub fn poll_kept(&self, cx: &mut Context<'_>) -> Poll<()> {
        self.writer.register(cx.waker());
        if self.kept_news.swap(false, Ordering::AcqRel) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    pub fn state(&self) -> ConnState {
        if self.is_remote() {
            let connected = self
                .remote
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .as_ref()
                .is_some_and(|r| r.connected);
            return if connected {
                ConnState::Connected
            } else {
                ConnState::Lost
            };
        }
        if self.conn().handle.is_some() {
            ConnState::Connected
        } else {
            ConnState::Lost
        }
    }

    pub fn touch(&self) {
        self.last_seen_ms.store(now_ms(), Ordering::Relaxed);
    }

    pub fn last_seen_ms(&self) -> i64 {
        self.last_seen_ms.load(Ordering::Relaxed)
    }

    /// Does `target` (site, label, client id, `role:R`, `group:G`) name this tab?
    pub fn matches(&self, target: &str) -> bool {
        let info = self.info.read().unwrap_or_else(|p| p.into_inner());
        if let Some(role) = target.strip_prefix("role:") {
            return Role::parse(role) == Some(info.role);
        }
        if let Some(group) = target.strip_prefix("group:") {
            return info.group.as_deref() == Some(group);
        }
        self.id == target
            || info.site.eq_ignore_ascii_case(target)
            || (!info.site.is_ascii() && info.site.to_lowercase() == target.to_lowercase())
            || match &info.label {
                Some(label) => label == target,
                // The display name without a label: `site#short-id`.
                None => target.rsplit_once('#').is_some_and(|(site, short)| {
                    site == info.site && !short.is_empty() && short == self.short_id()
                }),
            }
    }

    /// The first six characters of the client id (for `site#short-id`).
    fn short_id(&self) -> &str {
        match self.id.char_indices().nth(6) {
            Some((i, _)) => &self.id[..i],
            None => &self.id,
        }
    }

    /// The tab's display name: its label, else `site#short-id`.
    pub fn display(&self) -> String {
        self.display_of(&self.info())
    }

    pub(crate) fn display_of(&self, info: &ClientInfo) -> String {
        info.label
            .clone()
            .unwrap_or_else(|| format!("{}#{}", info.site, self.short_id()))
    }
}
