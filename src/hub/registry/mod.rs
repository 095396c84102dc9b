//! The registry of tabs: which tab is connected where, and delivering a frame to a tab. A tab
//! on another node of a cluster is a *remote* entry here, kept from the engine's presence:
//! it resolves like any tab, and what is routed to it goes to its node through the engine.
//!
//! `tab` is one tab (`Client`) and its connection's handles; `index` finds tabs by name and
//! keeps the entries of other nodes' tabs; `route` delivers a frame to a tab, live or kept in
//! the store for its return.

mod index;
mod route;
mod tab;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use dashmap::DashMap;

use super::engine::Engine;
use crate::protocol::Role;
use crate::store::{ClientRecord, KeptCap, Store};

pub use tab::{close, Client, ClientInfo, ConnHandle, ConnState, Killer, Outbound, Remote};

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
    clients: DashMap<String, Arc<Client>, foldhash::fast::RandomState>,
    /// Name → client ids, for O(1) resolution of sites, labels and ids (fan-out to 1,000 tabs
    /// resolves 1,000 names; a scan per name would be quadratic).
    /// Clients are never removed from `clients`, so holding them here keeps nothing alive
    /// that would otherwise go.
    names: DashMap<String, Vec<Arc<Client>>, foldhash::fast::RandomState>,
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

impl Registry {
    /// A registry keeping at most `offline_frames` frames (and 16 MiB) per absent tab.
    pub fn new(store: Store, offline_frames: usize) -> Registry {
        Registry {
            clients: DashMap::default(),
            names: DashMap::default(),
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

    /// Every tab, connected or not.
    pub fn all(&self) -> Vec<Arc<Client>> {
        self.clients.iter().map(|e| e.value().clone()).collect()
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
    use super::super::engine::Presence;
    use super::super::outq;
    use super::*;
    use crate::protocol::{encode, ServerFrame};

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

    /// What a tab's entry costs in memory, held once per tab for as long as the hub runs
    /// (docs/benchmarks.md, "Eighth session"): the `Client` and the kill switch its
    /// connection shares. A field added to either shows here first.
    #[test]
    fn a_tab_entry_stays_small() {
        use std::mem::size_of;
        let client = size_of::<Client>();
        let fields = [
            ("info", size_of::<std::sync::RwLock<ClientInfo>>()),
            ("conn", size_of::<std::sync::Mutex<tab::Conn>>()),
            (
                "kept_news and writer",
                size_of::<futures_util::task::AtomicWaker>() + 8,
            ),
            (
                "typed_by_hub",
                size_of::<std::sync::Mutex<std::collections::VecDeque<u64>>>(),
            ),
            (
                "queue",
                size_of::<std::sync::Mutex<super::super::queue::TabQueue>>(),
            ),
            (
                "remote",
                size_of::<std::sync::RwLock<Option<Box<Remote>>>>(),
            ),
        ];
        println!(
            "Client {client} B: {fields:?}; Killer's shared state {} B",
            tab::kill_size()
        );
        // With the `Arc`'s two counts, at most 512 B: mimalloc's next size class is 640.
        assert!(client <= 496, "a tab's entry grew to {client} B");
        assert!(tab::kill_size() <= 64, "the kill switch grew");
    }
}
