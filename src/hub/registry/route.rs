//! Delivering a frame to a tab: on its live connection's queue, or kept in the store for its
//! return; a connection's attach, replay and end, so no frame overtakes one sent before it.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::super::engine::Envelope;
use super::super::outq;
use super::tab::{close, Client, Conn, ConnHandle, Outbound};
use super::{Registry, RouteError, Sent, PAGE_BYTES, PAGE_FRAMES};
use crate::protocol::{encode, frame_type, ServerFrame};
use crate::store::{now_ms, JournalEntry, KeptFrame, Store};

impl Registry {
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
            client.note_kept();
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
        // The atomic first: a local tab (the usual case) takes no lock here.
        if let Some(node) = client.is_remote().then(|| client.node()).flatten() {
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
            client.note_kept();
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
}
