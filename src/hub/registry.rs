//! The registry of tabs: which tab is connected where, and delivering a frame to a tab. A tab
//! on another node of a cluster is a *remote* entry here, kept from the engine's presence:
//! it resolves like any tab, and what is routed to it goes to its node through the engine.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use super::outq;
use dashmap::DashMap;

use super::engine::{Engine, Envelope, Presence};
use crate::protocol::{encode, frame_type, AppHeartbeat, Prompt, Role, ServerFrame};
use crate::store::{now_ms, ClientRecord, JournalEntry, KeptCap, KeptFrame, Store};

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
#[derive(Debug, Clone, Default)]
pub struct Killer {
    token: tokio_util::sync::CancellationToken,
    code: Arc<std::sync::atomic::AtomicU16>,
}

impl Killer {
    /// Ends the connection with `code`; the first call's code wins.
    pub fn kill(&self, code: u16) {
        if !self.token.is_cancelled() {
            let _ = self
                .code
                .compare_exchange(0, code, Ordering::AcqRel, Ordering::Relaxed);
            self.token.cancel();
        }
    }

    /// True once `kill` was called.
    pub fn is_killed(&self) -> bool {
        self.token.is_cancelled()
    }

    /// The close code `kill` was called with (0 before).
    pub fn code(&self) -> u16 {
        self.code.load(Ordering::Relaxed)
    }

    /// Resolves with the close code once `kill` was called.
    pub async fn killed(&self) -> u16 {
        self.token.cancelled().await;
        self.code.load(Ordering::Relaxed)
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
struct Conn {
    handle: Option<ConnHandle>,
    /// The connection replays the store itself, page by page (the WebSocket). An SSE stream
    /// is handed everything kept at attach instead.
    drains_store: bool,
    /// While set, every frame for the tab is kept in the store behind the ones its writer is
    /// still replaying; the writer clears it when the store is empty.
    catching_up: bool,
    /// Set once a frame was routed to the connection after its kill: what its queue held
    /// went to the store then, and every later frame goes to the store too (within the
    /// per-tab cap), never to memory.
    to_store: bool,
    /// The frame id set aside then for the frame its writer may still have been writing
    /// (older than everything its queue held); `release` keeps that frame there.
    slot: Option<i64>,
    /// Frames meant for the connection that it did not get since its kill (for the log).
    not_delivered: usize,
}

/// One tab, connected or not. Shared by the connection task, the task queue and commands.
pub struct Client {
    pub id: String,
    info: RwLock<ClientInfo>,
    conn: Mutex<Conn>,
    /// Wakes the connection's writer when frames for it were kept in the store.
    kept: tokio::sync::Notify,
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
    pub(super) queue: Mutex<super::tasks::TabQueue>,
    /// Set while the tab lives on another node of the cluster (then `conn` and `queue` are
    /// unused: its node has them).
    remote: RwLock<Option<Remote>>,
    /// Fast check of `remote.is_some()` on the hot path.
    is_remote: AtomicBool,
    /// When the current connection was made (ms since the epoch).
    since_ms: AtomicI64,
    /// Tasks this node sent to the tab on its node and still waits for.
    pub(super) remote_waiting: AtomicUsize,
    /// Batches of the tab's frames on their way to the store (written off the async workers,
    /// with ids set aside in order): a replay waits for them.
    flushing: AtomicUsize,
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
    fn new(id: String, info: ClientInfo) -> Client {
        Client {
            id,
            info: RwLock::new(info),
            conn: Mutex::default(),
            kept: tokio::sync::Notify::new(),
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
            .clone()
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
        *r = remote;
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
        let digest = typed_digest(prompt);
        let mut q = self.typed_by_hub.lock().unwrap_or_else(|p| p.into_inner());
        q.push_back(digest);
        while q.len() > 16 {
            q.pop_front();
        }
    }

    /// True when `text` is something the hub typed here, not the person.
    pub fn was_typed_by_hub(&self, text: &str) -> bool {
        let digest = typed_digest(text);
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

    pub fn role(&self) -> Role {
        self.info.read().unwrap_or_else(|p| p.into_inner()).role
    }

    pub fn update_info(&self, f: impl FnOnce(&mut ClientInfo)) {
        f(&mut self.info.write().unwrap_or_else(|p| p.into_inner()));
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Conn> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Resolves when frames for this tab were kept in the store while it is connected.
    pub async fn frames_kept(&self) {
        self.kept.notified().await
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

/// Why a frame did not reach a tab right now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    #[error("没有这个标签页 / no tab `{0}`")]
    NoSuchClient(String),
}

/// How a send went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// Queued on the live connection.
    Live,
    /// Kept for delivery when the tab comes back.
    Stored,
    /// The tab could not keep up and was disconnected; the frame was kept for it.
    SlowConsumerClosed,
}

/// All tabs by client id; lock-free reads on the hot path (dashmap shards).
pub struct Registry {
    clients: DashMap<String, Arc<Client>>,
    /// Name → client ids, for O(1) resolution of sites, labels and ids (fan-out to 1,000 tabs
    /// resolves 1,000 names; a scan per name would be quadratic).
    /// Clients are never removed from `clients`, so holding them here keeps nothing alive
    /// that would otherwise go.
    names: DashMap<String, Vec<Arc<Client>>>,
    store: Store,
    offline_cap: KeptCap,
    next_conn: AtomicU64,
    /// Frames dropped to hold tabs to the per-tab cap, since the start (each drop is logged).
    dropped: Arc<AtomicU64>,
    /// Where frames for remote tabs go.
    engine: Arc<dyn Engine>,
}

/// A replay reads at most this many kept frames at a time…
const PAGE_FRAMES: usize = 64;
/// …and at most this many bytes (past the first frame).
const PAGE_BYTES: usize = 1024 * 1024;

/// The names a tab is found by: its id, its site, its display name and its label (each once).
/// A keyed hash of a text's trimmed form, for `Client::typed_by_hub` (the key is random per
/// process, so a text cannot be made to collide from outside).
fn typed_digest(text: &str) -> u64 {
    use std::hash::BuildHasher;
    static KEY: std::sync::OnceLock<std::collections::hash_map::RandomState> =
        std::sync::OnceLock::new();
    KEY.get_or_init(Default::default).hash_one(text.trim())
}

fn name_keys(client: &Client) -> Vec<String> {
    let info = client.info();
    let mut keys = vec![
        client.id.clone(),
        info.site.to_lowercase(),
        client.display_of(&info),
    ];
    keys.extend(info.label);
    keys.sort();
    keys.dedup();
    keys
}

impl Registry {
    /// A registry keeping at most `offline_frames` frames (and 16 MiB) per absent tab.
    pub fn new(store: Store, offline_frames: usize) -> Registry {
        Registry {
            clients: DashMap::new(),
            names: DashMap::new(),
            store,
            offline_cap: KeptCap {
                frames: offline_frames.max(1),
                bytes: 16 * 1024 * 1024,
            },
            next_conn: AtomicU64::new(1),
            dropped: Arc::default(),
            engine: super::engine::Local::new().0,
        }
    }

    /// Routes frames for remote tabs through `engine`.
    pub fn with_engine(mut self, engine: Arc<dyn Engine>) -> Registry {
        self.engine = engine;
        self
    }

    pub fn engine(&self) -> &Arc<dyn Engine> {
        &self.engine
    }

    /// Creates or refreshes the entry of a tab another node announced. Returns the entry,
    /// or `None` when the id is a tab of this node (the hub decides what that means).
    pub fn upsert_remote(&self, p: &Presence, deadline_ms: i64) -> Option<Arc<Client>> {
        let info = ClientInfo {
            site: p.site.clone(),
            label: p.label.clone(),
            role: Role::parse(&p.role).unwrap_or_default(),
            group: p.group.clone(),
            url: None,
            title: None,
        };
        let remote = Remote {
            node: p.node.clone(),
            connected: p.state == "connected",
            health: p.health.clone(),
            load: p.load,
            deadline_ms,
        };
        let client = match self.get(&p.id) {
            Some(c) if !c.is_remote() => return None,
            Some(c) => c,
            None => {
                let c = Arc::new(Client::new(p.id.clone(), info.clone()));
                c.set_remote(Some(remote.clone()));
                self.clients.entry(p.id.clone()).or_insert(c).clone()
            }
        };
        if !client.is_remote() {
            return None;
        }
        let renamed = client.info() != info;
        if renamed {
            self.unindex(&client);
            client.update_info(|i| *i = info);
        }
        client.set_since_ms(p.since_ms);
        client.set_remote(Some(remote));
        self.index(&client);
        Some(client)
    }

    /// Turns a tab of this node into the remote entry of a tab now on `node` (it connected
    /// there with its id). Its connection, if it still has one, is closed as replaced.
    pub fn make_remote(&self, client: &Client, remote: Remote) {
        let mut conn = client.conn();
        if let Some(h) = conn.handle.take() {
            h.kill.kill(close::REPLACED);
        }
        drop(conn);
        client.set_remote(Some(remote));
    }

    /// A remote tab's entry ends (its node said it left, or its presence was not refreshed
    /// in time). Entries of this node's tabs are never forgotten.
    pub fn forget_remote(&self, id: &str) -> Option<Arc<Client>> {
        let client = self.get(id).filter(|c| c.is_remote())?;
        self.unindex(&client);
        self.clients.remove_if(id, |_, c| c.is_remote());
        Some(client)
    }

    /// Drops a tab of this node from memory (not from the store: it can still come back
    /// with its id) if it is away and nothing of its connection is left. The caller checks
    /// that no task waits on it. True if it went.
    pub fn forget_local(&self, client: &Arc<Client>) -> bool {
        if client.is_remote() || client.flushing.load(Ordering::Acquire) > 0 {
            return false;
        }
        // Under the tab's lock: a connection attaching now either came first (kept) or
        // finds the entry gone and makes a new one from the store.
        let conn = client.conn();
        if conn.handle.is_some() {
            return false;
        }
        let gone = self
            .clients
            .remove_if(&client.id, |_, c| Arc::ptr_eq(c, client) && !c.is_remote())
            .is_some();
        drop(conn);
        if gone {
            self.unindex(client);
        }
        gone
    }

    fn unindex(&self, client: &Arc<Client>) {
        for k in name_keys(client) {
            if let Some(mut tabs) = self.names.get_mut(&k) {
                tabs.retain(|c| c.id != client.id);
            }
            self.names.remove_if(&k, |_, v| v.is_empty());
        }
    }

    /// Every remote entry of `node` lives until `deadline_ms` (its node's beat came).
    pub fn refresh_node(&self, node: &str, deadline_ms: i64) {
        for e in self.clients.iter() {
            if let Some(mut r) = e.value().remote().filter(|r| r.node == node) {
                r.deadline_ms = deadline_ms;
                e.value().set_remote(Some(r));
            }
        }
    }

    /// Remote entries whose presence ran out before `now_ms`.
    pub fn expired_remotes(&self, now_ms: i64) -> Vec<String> {
        self.clients
            .iter()
            .filter(|e| e.value().remote().is_some_and(|r| r.deadline_ms < now_ms))
            .map(|e| e.key().clone())
            .collect()
    }

    /// True when a connected tab other than `except` holds `label`, here or on another node.
    pub fn label_taken(&self, label: &str, except: &str) -> bool {
        self.names.get(label).is_some_and(|tabs| {
            tabs.iter().any(|c| {
                c.id != except
                    && c.state() == ConnState::Connected
                    && c.info().label.as_deref() == Some(label)
            })
        })
    }

    /// Sets the byte cap on what is kept per absent tab.
    pub fn with_offline_bytes(mut self, bytes: usize) -> Registry {
        self.offline_cap.bytes = bytes.max(1);
        self
    }

    /// Frames dropped to hold tabs to the per-tab cap since the hub started.
    pub fn frames_dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    pub fn next_conn_id(&self) -> u64 {
        self.next_conn.fetch_add(1, Ordering::Relaxed)
    }

    pub fn get(&self, id: &str) -> Option<Arc<Client>> {
        self.clients.get(id).map(|c| c.clone())
    }

    /// Finds a client id in memory, else in the store (after a hub restart).
    pub fn resume(&self, id: &str) -> Option<Arc<Client>> {
        if let Some(c) = self.get(id) {
            return Some(c);
        }
        let rec = self.store.client(id).ok().flatten()?;
        let info = ClientInfo {
            site: rec.site,
            label: rec.label,
            role: Role::parse(&rec.role).unwrap_or_default(),
            group: rec.group,
            url: rec.url,
            title: None,
        };
        // Its kept frames stay in the store until a connection replays them.
        let client = Arc::new(Client::new(rec.client_id, info));
        let client = self.clients.entry(id.to_string()).or_insert(client).clone();
        self.index(&client);
        Some(client)
    }

    /// Adds a tab's names (id, label, site, display name) to the name index.
    pub fn index(&self, client: &Arc<Client>) {
        for k in name_keys(client) {
            let mut tabs = self.names.entry(k).or_default();
            if !tabs.iter().any(|c| c.id == client.id) {
                tabs.push(client.clone());
            }
        }
    }

    /// Registers a brand-new tab.
    pub fn create(&self, info: ClientInfo) -> Arc<Client> {
        let id = uuid::Uuid::new_v4().to_string();
        let client = Arc::new(Client::new(id.clone(), info));
        self.clients.insert(id, client.clone());
        self.index(&client);
        client
    }

    /// Records a tab's identity in the store (role, label, group survive restarts).
    pub fn persist(&self, client: &Client) {
        if client.is_remote() {
            return; // its node keeps it
        }
        let info = client.info();
        let rec = ClientRecord {
            client_id: client.id.clone(),
            site: info.site,
            label: info.label,
            role: info.role.as_str().to_string(),
            group: info.group,
            url: info.url,
            last_seen_ms: client.last_seen_ms(),
        };
        if let Err(e) = self.store.upsert_client(&rec) {
            tracing::warn!(client = %client.id, "could not persist identity: {e}");
        }
    }

    /// Attaches a live connection that is handed everything kept for the tab (SSE); any
    /// previous connection of this id is told to close. Returns the frames that waited while
    /// the tab was away, oldest first (bounded by the per-tab cap).
    pub fn attach(&self, client: &Arc<Client>, handle: ConnHandle) -> Vec<String> {
        let mut conn = self.replace_conn(client, handle, false);
        let waiting = self.store.take_pending(&client.id).unwrap_or_else(|e| {
            tracing::warn!(client = %client.id, "could not read kept frames: {e}");
            Vec::new()
        });
        conn.catching_up = false;
        waiting
    }

    /// Attaches a live connection that replays the kept frames itself, a page at a time
    /// (`kept_page`, `replayed`), before any newer frame (the WebSocket).
    pub fn attach_draining(&self, client: &Arc<Client>, handle: ConnHandle) {
        let mut conn = self.replace_conn(client, handle, true);
        conn.catching_up = true;
    }

    fn replace_conn<'c>(
        &self,
        client: &'c Arc<Client>,
        handle: ConnHandle,
        drains_store: bool,
    ) -> std::sync::MutexGuard<'c, Conn> {
        // A tab that was on another node is ours from its first connection here.
        client.set_remote(None);
        client.set_since_ms(now_ms());
        let mut conn = client.conn();
        // Found just before `forget_local` dropped it from memory: it is known again (under
        // its lock, so the two cannot cross).
        let inserted = match self.clients.entry(client.id.clone()) {
            dashmap::mapref::entry::Entry::Occupied(e) => {
                if !Arc::ptr_eq(e.get(), client) {
                    tracing::warn!(client = %client.id, "a tab known twice: its new entry is used");
                }
                false
            }
            dashmap::mapref::entry::Entry::Vacant(v) => {
                v.insert(client.clone());
                true
            }
        };
        if inserted {
            self.index(client);
        }
        if let Some(old) = conn.handle.replace(handle) {
            old.kill.kill(close::REPLACED);
        }
        // What the replaced connection did not send after its kill is in the store already.
        conn.to_store = false;
        conn.slot = None;
        conn.not_delivered = 0;
        conn.drains_store = drains_store;
        client.touch();
        conn
    }

    /// The next page of frames kept for a tab whose connection drains the store. Empty when
    /// nothing is left; from then on frames go to the connection's queue again.
    pub fn kept_page(&self, client: &Client) -> Vec<KeptFrame> {
        if client.flushing.load(Ordering::Acquire) > 0 {
            // Older frames are still on their way to the store: nothing is replayed past
            // them. The connection stays catching up; the batch's end wakes its writer.
            return Vec::new();
        }
        let page = |store: &Store| {
            store
                .pending_page(&client.id, PAGE_FRAMES, PAGE_BYTES)
                .unwrap_or_else(|e| {
                    tracing::warn!(client = %client.id, "could not read kept frames: {e}");
                    Vec::new()
                })
        };
        let frames = page(&self.store);
        if !frames.is_empty() {
            return frames;
        }
        // Checked again under the lock: a frame kept in between is replayed, not overtaken.
        let mut conn = client.conn();
        let frames = page(&self.store);
        if frames.is_empty() {
            conn.catching_up = false;
        }
        frames
    }

    /// A kept frame reached the tab's socket; it is no longer kept.
    pub fn replayed(&self, frame: &KeptFrame) {
        if let Err(e) = self.store.drop_pending(frame.id) {
            tracing::warn!("could not forget a replayed frame: {e}");
        }
    }

    /// Ends connection `conn_id` and keeps what it did not send: `unsent` (the frame being
    /// written when it ended, oldest first), whatever is still queued, and what was sent
    /// after its kill. All of it is kept before any later frame can be routed. True if it was
    /// still the tab's current connection (the tab is now away); else what it did not send
    /// goes on to the connection that replaced it.
    pub fn release(
        &self,
        client: &Client,
        conn_id: u64,
        unsent: impl IntoIterator<Item = String>,
        rx: &mut outq::Receiver<Outbound>,
    ) -> bool {
        rx.close();
        let queued = std::iter::from_fn(|| rx.try_recv().ok()).filter_map(Outbound::into_frame);
        let mut conn = client.conn();
        let ours = conn.handle.as_ref().map(|h| h.conn_id) == Some(conn_id);
        if !ours {
            drop(conn);
            for text in unsent.into_iter().chain(queued) {
                self.send_text(client, text);
            }
            return false;
        }
        let code = conn.handle.as_ref().map_or(0, |h| h.kill.code());
        let mut unsent: Vec<String> = unsent.into_iter().collect();
        // The frame being written when it ended goes where its id was set aside, if it was
        // (it is older than what its queue held, which went to the store at the kill).
        let mut batch = Vec::new();
        if let (Some(slot), 1) = (conn.slot, unsent.len()) {
            let text = unsent.remove(0);
            batch.push((slot, frame_type(&text).unwrap_or_default(), text));
        }
        let rest: Vec<String> = unsent.into_iter().chain(queued).collect();
        let not_delivered = conn.not_delivered + batch.len() + rest.len();
        if !rest.is_empty() {
            match self.store.reserve_frame_ids(rest.len()) {
                Ok(first) => batch.extend(rest.into_iter().enumerate().map(|(i, text)| {
                    (
                        first + i as i64,
                        frame_type(&text).unwrap_or_default(),
                        text,
                    )
                })),
                Err(e) => {
                    tracing::warn!(client = %client.id, "could not set frame ids aside: {e}");
                    for text in rest {
                        self.keep_offline(client, text);
                    }
                }
            }
        }
        *conn = Conn::default();
        // Counted before the lock is let go: a replay cannot pass the batch.
        if !batch.is_empty() {
            client.flushing.fetch_add(1, Ordering::AcqRel);
        }
        drop(conn);
        if not_delivered > 0 {
            tracing::warn!(
                client = %client.id,
                code,
                not_delivered,
                "connection ended with frames it did not get: kept for its return (within the per-tab cap)"
            );
        }
        self.flush(client, batch);
        self.persist(client);
        true
    }

    /// Writes a batch of a tab's frames (ids set aside, `flushing` already counted) to the
    /// store in one transaction, on a blocking thread when there is a runtime, never under
    /// the tab's lock; then wakes the tab's writer, which may be waiting to replay them.
    fn flush(&self, client: &Client, batch: Vec<(i64, String, String)>) {
        if batch.is_empty() {
            return;
        }
        let store = self.store.clone();
        let cap = self.offline_cap;
        let counter = self.dropped.clone();
        let owner = self.get(&client.id);
        let write = move |client: &Client| {
            let n = batch.len();
            let frames: Vec<(i64, String, String)> = batch
                .into_iter()
                .map(|(id, kind, text)| (id, text, kind))
                .collect();
            match store.keep_frames_at(&client.id, &frames, cap) {
                Ok(0) => {}
                Ok(dropped) => {
                    counter.fetch_add(dropped as u64, Ordering::Relaxed);
                    tracing::warn!(
                        client = %client.id,
                        dropped,
                        "kept frames over the cap: dropped the {dropped} oldest (progress first)"
                    )
                }
                Err(e) => tracing::warn!(
                    client = %client.id,
                    lost = n,
                    "could not store {n} frames: {e}"
                ),
            }
            client.flushing.fetch_sub(1, Ordering::AcqRel);
            client.kept.notify_one();
        };
        match (owner, tokio::runtime::Handle::try_current()) {
            (Some(owner), Ok(rt)) => {
                rt.spawn_blocking(move || write(&owner));
            }
            _ => write(client),
        }
    }

    /// The first frame routed to a killed connection: what its queue holds goes to the store
    /// (after an id set aside for the frame its writer may still hold), and so does every
    /// later frame. Called under the tab's lock.
    fn spill_to_store(&self, client: &Client, conn: &mut Conn) {
        if conn.to_store {
            return;
        }
        conn.to_store = true;
        let Some(handle) = conn.handle.as_ref() else {
            return;
        };
        let queued: Vec<String> = handle
            .tx
            .close_take()
            .into_iter()
            .filter_map(Outbound::into_frame)
            .collect();
        conn.not_delivered += queued.len();
        let first = match self.store.reserve_frame_ids(queued.len() + 1) {
            Ok(first) => first,
            Err(e) => {
                tracing::warn!(client = %client.id, "could not set frame ids aside: {e}");
                for text in queued {
                    self.keep_offline(client, text);
                }
                return;
            }
        };
        conn.slot = Some(first);
        let batch: Vec<(i64, String, String)> = queued
            .into_iter()
            .enumerate()
            .map(|(i, text)| {
                (
                    first + 1 + i as i64,
                    frame_type(&text).unwrap_or_default(),
                    text,
                )
            })
            .collect();
        if !batch.is_empty() {
            client.flushing.fetch_add(1, Ordering::AcqRel);
            self.flush(client, batch);
        }
    }

    /// Detaches connection `conn_id` if it is still the current one; true if it was.
    pub fn detach(&self, client: &Client, conn_id: u64) -> bool {
        let mut conn = client.conn();
        if conn.handle.as_ref().map(|h| h.conn_id) == Some(conn_id) {
            // What came after its kill is in the store already.
            *conn = Conn::default();
            drop(conn);
            self.persist(client);
            true
        } else {
            false
        }
    }

    /// Finds a tab in memory, else in the store (a tab known from before a restart that has
    /// not said hello yet): frames for it are kept for its return either way.
    fn known(&self, client_id: &str) -> Result<Arc<Client>, RouteError> {
        self.get(client_id)
            .or_else(|| self.resume(client_id))
            .ok_or_else(|| RouteError::NoSuchClient(client_id.to_string()))
    }

    /// Sends one frame to a tab: live if connected, else kept for its return (also for a
    /// tab only the store knows, after a restart).
    pub fn send(&self, client_id: &str, frame: &ServerFrame) -> Result<Sent, RouteError> {
        let client = self.known(client_id)?;
        Ok(self.route(&client, encode(frame), false))
    }

    /// Sends a frame that must survive a crash of the hub (a run's result): it is written to
    /// the store before it is routed, and leaves the store only once a WebSocket wrote it (an
    /// SSE stream gets it live and it is kept only if the stream ends first).
    /// `journal`, if given, is written in the same transaction as the kept frame (or, for
    /// an SSE stream, before the frame is queued). On an error nothing was written.
    pub fn send_durable(
        &self,
        client_id: &str,
        frame: &ServerFrame,
        journal: Option<JournalEntry<'_>>,
    ) -> Result<Sent, RouteError> {
        let client = self.known(client_id)?;
        Ok(self.route_journaled(&client, encode(frame), true, journal))
    }

    /// Sends an already encoded frame.
    pub fn send_text(&self, client: &Client, text: String) -> Sent {
        self.route(client, text, false)
    }

    /// Sends an already encoded frame that must survive a crash (see `send_durable`).
    pub fn send_text_durable(&self, client: &Client, text: String) -> Sent {
        self.route(client, text, true)
    }

    fn route(&self, client: &Client, text: String, durable: bool) -> Sent {
        self.route_journaled(client, text, durable, None)
    }

    fn route_journaled(
        &self,
        client: &Client,
        text: String,
        durable: bool,
        mut journal: Option<JournalEntry<'_>>,
    ) -> Sent {
        if let Some(node) = client.node() {
            // The run's journal is this node's: written here before the frame leaves.
            if let Some(j) = journal.take() {
                if let Err(e) = self.store.append_event(j.run_id, j.event, j.at_ms) {
                    tracing::error!(run = j.run_id, "journal write failed: {e}");
                }
            }
            self.engine.send(
                &node,
                Envelope::Frame {
                    to: client.id.clone(),
                    text,
                    durable,
                },
            );
            return Sent::Live;
        }
        let mut conn = client.conn();
        let Some(handle) = conn.handle.as_ref() else {
            drop(conn);
            self.keep(client, &text, journal);
            return Sent::Stored;
        };
        if handle.kill.is_killed() {
            // Behind what its queue held (in the store now, or on its way there): kept in
            // the store within the per-tab cap, with its journal entry, never in memory.
            self.spill_to_store(client, &mut conn);
            conn.not_delivered += 1;
            drop(conn);
            self.keep(client, &text, journal);
            return Sent::Stored;
        }
        if durable && !conn.drains_store {
            // Not kept by the paths below: the journal goes first, on its own.
            if let Some(j) = journal.take() {
                if let Err(e) = self.store.append_event(j.run_id, j.event, j.at_ms) {
                    tracing::error!(run = j.run_id, "journal write failed: {e}");
                }
            }
        }
        if conn.drains_store && (conn.catching_up || durable) {
            // Kept under the lock, so the writer's "store is empty" check cannot miss it.
            self.keep(client, &text, journal);
            conn.catching_up = true;
            client.kept.notify_one();
            return Sent::Live;
        }
        match handle.tx.try_send(Outbound::Frame(text)) {
            Ok(()) => Sent::Live,
            Err(outq::TrySendError::Full(Outbound::Frame(text)))
            | Err(outq::TrySendError::Closed(Outbound::Frame(text))) => {
                // The writer cannot keep up (or is gone): drop the connection, keep the frame.
                tracing::warn!(client = %client.id, "slow consumer: closing its connection");
                handle.kill.kill(close::SLOW_CONSUMER);
                self.spill_to_store(client, &mut conn);
                conn.not_delivered += 1;
                drop(conn);
                self.keep(client, &text, journal);
                Sent::SlowConsumerClosed
            }
            Err(_) => unreachable!("a frame was sent, not a pong"),
        }
    }

    /// Hands back what a closed connection did not send: `unsent` (the rest of its replay)
    /// and whatever is still in its queue. It goes to the connection that replaced it, or
    /// waits for the tab's return; nothing meant for a tab is dropped with a socket.
    pub fn hand_back(
        &self,
        client: &Client,
        unsent: impl IntoIterator<Item = String>,
        rx: &mut outq::Receiver<Outbound>,
    ) {
        rx.close();
        let queued = std::iter::from_fn(|| rx.try_recv().ok()).filter_map(Outbound::into_frame);
        for text in unsent.into_iter().chain(queued) {
            self.send_text(client, text);
        }
    }

    /// Keeps a frame in the store for a tab that is away (or catching up), within the
    /// per-tab cap (see `Store::keep_frame` for what goes first when it is full).
    pub fn keep_offline(&self, client: &Client, text: String) {
        self.keep(client, &text, None);
    }

    fn keep(&self, client: &Client, text: &str, journal: Option<JournalEntry<'_>>) {
        let kind = frame_type(text).unwrap_or_default();
        match self.store.keep_frame_journaled(
            &client.id,
            text,
            &kind,
            Some(self.offline_cap),
            journal,
        ) {
            Ok(0) => {}
            Ok(n) => {
                self.dropped.fetch_add(n as u64, Ordering::Relaxed);
                tracing::warn!(
                    client = %client.id,
                    dropped = n,
                    "kept frames over the cap: dropped the {n} oldest (progress first)"
                )
            }
            Err(e) => tracing::warn!(client = %client.id, "could not store frame: {e}"),
        }
    }

    /// Every tab, connected or not.
    pub fn all(&self) -> Vec<Arc<Client>> {
        self.clients.iter().map(|e| e.value().clone()).collect()
    }

    /// Connected tabs matching a target (site, label, client id, `role:R`, `group:G`).
    pub fn resolve(&self, target: &str) -> Vec<Arc<Client>> {
        let mut found: Vec<Arc<Client>> = if target.starts_with("role:")
            || target.starts_with("group:")
        {
            self.clients
                .iter()
                .filter(|e| e.value().state() == ConnState::Connected && e.value().matches(target))
                .map(|e| e.value().clone())
                .collect()
        } else {
            let mut found = Vec::new();
            let mut add = |key: &str| {
                let Some(tabs) = self.names.get(key) else {
                    return;
                };
                found.extend(
                    tabs.iter()
                        // The index may hold stale names (a label changed): re-check each.
                        .filter(|c| c.state() == ConnState::Connected && c.matches(target))
                        .cloned(),
                );
            };
            add(target);
            // Sites are indexed lower-case and match case-insensitively.
            if target.chars().any(char::is_uppercase) {
                add(&target.to_lowercase());
            }
            found
        };
        if found.len() > 1 {
            found.sort_by(|a, b| a.id.cmp(&b.id));
            found.dedup_by(|a, b| a.id == b.id);
        }
        found
    }

    /// Connected tabs, on every node.
    pub fn connected_count(&self) -> usize {
        self.clients
            .iter()
            .filter(|e| e.value().state() == ConnState::Connected)
            .count()
    }

    /// Connected tabs of this node only.
    pub fn local_connected_count(&self) -> usize {
        self.clients
            .iter()
            .filter(|e| !e.value().is_remote() && e.value().state() == ConnState::Connected)
            .count()
    }

    /// Ends every live connection with `code` (shutdown). Each socket sends its close frame
    /// at once; frames still queued for it are kept for the tab's return.
    pub fn close_all(&self, code: u16) {
        for e in self.clients.iter() {
            if let Some(h) = e.value().conn().handle.as_ref() {
                h.kill.kill(code);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connected(reg: &Registry, site: &str, label: Option<&str>) -> Arc<Client> {
        let c = reg.create(ClientInfo {
            site: site.into(),
            label: label.map(str::to_string),
            ..ClientInfo::default()
        });
        // Nothing is sent in these tests, so the receiving end can go.
        let (tx, _) = outq::channel(1);
        reg.attach(
            &c,
            ConnHandle {
                conn_id: reg.next_conn_id(),
                tx,
                kill: Killer::default(),
            },
        );
        c
    }

    fn ids(found: Vec<Arc<Client>>) -> Vec<String> {
        found.into_iter().map(|c| c.id.clone()).collect()
    }

    fn presence(id: &str, node: &str, label: Option<&str>, state: &str) -> Presence {
        Presence {
            id: id.into(),
            node: node.into(),
            site: "kimi".into(),
            label: label.map(str::to_string),
            role: "worker".into(),
            group: None,
            state: state.into(),
            health: "ok".into(),
            load: 2,
            since_ms: 1,
        }
    }

    #[test]
    fn remote_entries_resolve_expire_and_leave_no_trace() {
        let dir = tempfile::tempdir().unwrap();
        let reg = Registry::new(Store::open(dir.path()).unwrap(), 4);
        let local = connected(&reg, "kimi", Some("here"));
        let r = reg
            .upsert_remote(&presence("r1", "b", Some("there"), "connected"), 1_000)
            .expect("a remote entry");
        assert_eq!(r.node().as_deref(), Some("b"));
        assert_eq!(r.state(), ConnState::Connected);
        let mut both = vec![local.id.clone(), "r1".to_string()];
        both.sort();
        assert_eq!(ids(reg.resolve("kimi")), both, "a site spans nodes");
        assert_eq!(ids(reg.resolve("there")), vec!["r1".to_string()]);
        assert!(reg.label_taken("there", "someone-else"));
        assert!(!reg.label_taken("there", "r1"));
        assert!(
            reg.upsert_remote(&presence(&local.id, "b", None, "connected"), 1_000)
                .is_none(),
            "a tab of this node is never overwritten by presence"
        );
        // Renamed on its node: the old label no longer names it.
        reg.upsert_remote(&presence("r1", "b", Some("moved"), "connected"), 2_000);
        assert!(reg.resolve("there").is_empty());
        assert_eq!(ids(reg.resolve("moved")), vec!["r1".to_string()]);
        // Lost on its node: not picked, still known.
        reg.upsert_remote(&presence("r1", "b", Some("moved"), "lost"), 3_000);
        assert!(reg.resolve("moved").is_empty());
        assert_eq!(reg.connected_count(), 1);
        assert_eq!(reg.local_connected_count(), 1);
        // Past its deadline it goes, from the map and from the name index.
        assert!(reg.expired_remotes(2_999).is_empty());
        assert_eq!(reg.expired_remotes(3_001), vec!["r1".to_string()]);
        assert!(reg.forget_remote("r1").is_some());
        assert!(reg.get("r1").is_none());
        assert!(reg
            .names
            .iter()
            .all(|e| e.value().iter().all(|c| c.id != "r1")));
        assert!(
            reg.forget_remote(&local.id).is_none(),
            "local tabs are never forgotten"
        );
        // Nothing of a remote entry reaches this node's store.
        reg.upsert_remote(&presence("r2", "c", None, "connected"), 9_000);
        let r2 = reg.get("r2").unwrap();
        reg.persist(&r2);
        assert!(reg.store.client("r2").unwrap().is_none());
    }

    #[test]
    fn resolves_labels_sites_display_names_and_ids() {
        let dir = tempfile::tempdir().unwrap();
        let reg = Registry::new(Store::open(dir.path()).unwrap(), 4);
        let a = connected(&reg, "deepseek", Some("w1"));
        let b = connected(&reg, "deepseek", None);
        let c = connected(&reg, "kimi", None);
        let d = connected(&reg, "Ärzte#1", None);

        assert_eq!(ids(reg.resolve("w1")), vec![a.id.clone()]);
        let mut both = vec![a.id.clone(), b.id.clone()];
        both.sort();
        assert_eq!(ids(reg.resolve("deepseek")), both);
        assert_eq!(
            ids(reg.resolve("DeepSeek")),
            both,
            "sites match in any case"
        );
        assert_eq!(ids(reg.resolve(&c.display())), vec![c.id.clone()]);
        assert_eq!(c.display(), format!("kimi#{}", &c.id[..6]));
        assert_eq!(ids(reg.resolve(&c.id)), vec![c.id.clone()]);
        assert!(reg.resolve("kimi#").is_empty());
        assert_eq!(ids(reg.resolve("ärzte#1")), vec![d.id.clone()]);
        assert_eq!(ids(reg.resolve("Ärzte#1")), vec![d.id.clone()]);
        assert_eq!(
            ids(reg.resolve(&d.display())),
            vec![d.id.clone()],
            "a site may hold `#`"
        );
        assert!(reg.resolve("w2").is_empty());

        // A renamed tab no longer answers to its old label, though the index still has it.
        a.update_info(|i| i.label = Some("lead".into()));
        reg.index(&a);
        assert!(reg.resolve("w1").is_empty());
        assert_eq!(ids(reg.resolve("lead")), vec![a.id.clone()]);
    }

    fn numbered(i: usize) -> String {
        encode(&ServerFrame::Deliver {
            text: format!("frame {i}"),
            auto_send: false,
            run_id: None,
            deliver_id: None,
            agent: None,
        })
    }

    /// A connection killed as a slow consumer: what its queue held and everything sent to it
    /// afterwards is in the store at once (nothing waits in memory for the connection to
    /// end), and the frame its writer held goes first when it ends: the replay order is the
    /// order the frames were sent in.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_killed_connection_s_frames_go_to_the_store_in_order_not_to_memory() {
        let dir = tempfile::tempdir().unwrap();
        let reg = Registry::new(Store::open(dir.path()).unwrap(), 1000);
        let c = reg.create(ClientInfo {
            site: "s".into(),
            ..ClientInfo::default()
        });
        let (tx, mut rx) = outq::channel(3);
        let conn_id = reg.next_conn_id();
        let kill = Killer::default();
        assert!(reg
            .attach(
                &c,
                ConnHandle {
                    conn_id,
                    tx,
                    kill: kill.clone(),
                },
            )
            .is_empty());
        for i in 0..4 {
            assert_eq!(reg.send_text(&c, numbered(i)), Sent::Live);
            if i == 0 {
                // The writer takes frame 0 and is stuck writing it.
                assert!(rx.try_recv().is_ok());
            }
        }
        assert_eq!(reg.send_text(&c, numbered(4)), Sent::SlowConsumerClosed);
        assert!(kill.is_killed());
        for i in 5..10 {
            assert_eq!(reg.send_text(&c, numbered(i)), Sent::Stored);
        }
        // Frames 1–9 are in the store before the connection ends (the queue's three are
        // written off this thread: wait for them).
        tokio::time::timeout(std::time::Duration::from_secs(5), async {
            while c.flushing.load(Ordering::Acquire) > 0 {
                c.frames_kept().await;
            }
        })
        .await
        .expect("the batch is written");
        assert_eq!(reg.store.pending_count(&c.id).unwrap(), 9);
        assert!(rx.try_recv().is_err(), "the killed queue holds nothing");
        // The connection ends with frame 0 unsent: it is replayed first.
        assert!(reg.release(&c, conn_id, Some(numbered(0)), &mut rx));
        tokio::time::timeout(std::time::Duration::from_secs(5), async {
            while c.flushing.load(Ordering::Acquire) > 0 {
                c.frames_kept().await;
            }
        })
        .await
        .expect("the last frame is written");
        let texts: Vec<String> = reg
            .store
            .pending_page(&c.id, 100, 1 << 20)
            .unwrap()
            .into_iter()
            .map(|f| f.text)
            .collect();
        assert_eq!(texts, (0..10).map(numbered).collect::<Vec<_>>());
        assert_eq!(c.state(), ConnState::Lost);
    }

    #[test]
    fn a_tab_that_is_away_can_be_dropped_from_memory_and_still_come_back() {
        let dir = tempfile::tempdir().unwrap();
        let reg = Registry::new(Store::open(dir.path()).unwrap(), 4);
        let here = connected(&reg, "kimi", Some("here"));
        assert!(!reg.forget_local(&here), "a connected tab stays");
        let away = reg.create(ClientInfo {
            site: "kimi".into(),
            label: Some("away".into()),
            ..ClientInfo::default()
        });
        reg.persist(&away);
        assert!(reg.forget_local(&away));
        assert!(reg.get(&away.id).is_none());
        assert!(reg.names.get("away").is_none());
        // Its identity is in the store: it comes back with its id and label.
        let back = reg.resume(&away.id).expect("known from the store");
        assert_eq!(back.info().label.as_deref(), Some("away"));
    }
}
