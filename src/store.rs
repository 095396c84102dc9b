//! The durable store: one SQLite file (WAL) in the data dir holding identities, undelivered
//! frames, saved flows and the append-only run journal. Schema changes are numbered migrations.

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use rusqlite::{params, Connection, OptionalExtension};

/// Numbered schema migrations; `PRAGMA user_version` records how many have run.
const MIGRATIONS: &[&str] = &[
    // 1: identities and undelivered frames (hub foundation).
    "CREATE TABLE clients (
        client_id TEXT PRIMARY KEY,
        site TEXT NOT NULL,
        label TEXT,
        role TEXT NOT NULL,
        grp TEXT,
        url TEXT,
        last_seen_ms INTEGER NOT NULL
    );
    CREATE TABLE pending_frames (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        client_id TEXT NOT NULL,
        frame TEXT NOT NULL
    );
    CREATE INDEX pending_frames_client ON pending_frames(client_id, id);",
    // 2: flows saved with `manager create`, runs and their journal.
    "CREATE TABLE flows (
        name TEXT PRIMARY KEY,
        source TEXT NOT NULL,
        created_ms INTEGER NOT NULL
    );
    CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        flow TEXT NOT NULL,
        flow_hash TEXT NOT NULL,
        flow_source TEXT NOT NULL,
        master TEXT,
        state TEXT NOT NULL,
        started_ms INTEGER NOT NULL,
        updated_ms INTEGER NOT NULL
    );
    CREATE TABLE journal (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        at_ms INTEGER NOT NULL,
        event TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    );",
    // 3: what kind of frame is kept and how big, for the per-tab cap and its overflow policy.
    "ALTER TABLE pending_frames ADD COLUMN kind TEXT NOT NULL DEFAULT '';
    ALTER TABLE pending_frames ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;
    UPDATE pending_frames SET bytes = length(CAST(frame AS BLOB));",
    // 4: the team's memory (src/memory): memories with FTS5 full-text search, and per scope
    // its turn counter and short-term note. `heat_ref` encodes the temperature: it is
    // 100 x 0.95^(turns - heat_ref), so the hottest sort first by heat_ref alone.
    "CREATE TABLE memories (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        scope TEXT NOT NULL,
        text TEXT NOT NULL,
        tags TEXT NOT NULL DEFAULT '',
        importance INTEGER NOT NULL DEFAULT 5,
        pinned INTEGER NOT NULL DEFAULT 0,
        heat_ref REAL NOT NULL,
        sources TEXT NOT NULL DEFAULT '',
        author TEXT,
        created_ms INTEGER NOT NULL,
        updated_ms INTEGER NOT NULL
    );
    CREATE INDEX memories_scope ON memories(scope, id);
    CREATE VIRTUAL TABLE memories_fts USING fts5(text, tags, tokenize = 'trigram');
    CREATE TABLE memory_scopes (
        scope TEXT PRIMARY KEY,
        turns INTEGER NOT NULL DEFAULT 0,
        note TEXT NOT NULL DEFAULT ''
    );",
    // 5: plan drafts (src/planner): a goal's validated flow waiting for the master's answer.
    // `cache_key` = normalized goal + the online catalog, for the plan cache.
    "CREATE TABLE plan_drafts (
        id TEXT PRIMARY KEY,
        goal TEXT NOT NULL,
        yaml TEXT NOT NULL,
        state TEXT NOT NULL,
        parent TEXT,
        cache_key TEXT NOT NULL,
        master TEXT,
        planner TEXT,
        repairs INTEGER NOT NULL DEFAULT 0,
        run_id TEXT,
        saved_as TEXT,
        created_ms INTEGER NOT NULL,
        decided_ms INTEGER
    );
    CREATE INDEX plan_drafts_cache ON plan_drafts(cache_key, created_ms);",
    // 6: agents, their sessions and rounds (read and written by src/agents/store.rs).
    "CREATE TABLE agents (
        name TEXT PRIMARY KEY,
        target TEXT NOT NULL,
        tools TEXT NOT NULL,
        max_rounds INTEGER,
        memory TEXT,
        creator TEXT NOT NULL,
        created_ms INTEGER NOT NULL
    );
    CREATE TABLE agent_sessions (
        id TEXT PRIMARY KEY,
        agent TEXT,
        tab TEXT NOT NULL,
        state TEXT NOT NULL,
        round INTEGER NOT NULL DEFAULT 0,
        started_ms INTEGER NOT NULL,
        ended_ms INTEGER,
        why TEXT
    );
    CREATE INDEX agent_sessions_agent ON agent_sessions(agent, started_ms);
    CREATE TABLE agent_rounds (
        session TEXT NOT NULL,
        round INTEGER NOT NULL,
        commands TEXT NOT NULL,
        at_ms INTEGER NOT NULL,
        PRIMARY KEY (session, round)
    )",
    // 7: the per-tab cap's accounting reads `kind` and `bytes` from this index alone: in the
    // table they come after the frame text (up to a frame long), so reading them walked every
    // kept frame's overflow pages (about 65 ms per kept frame with 1,000 frames of 64 KiB).
    // Identities are forgotten by `last_seen_ms`.
    "CREATE INDEX pending_frames_cap ON pending_frames(client_id, kind, bytes);
    CREATE INDEX clients_last_seen ON clients(last_seen_ms);",
    // 8: standing event rules, `?<subscribe TOPIC [where COND] do CMD>!` (read and written
    // by src/events.rs). The author's role, group and source are kept so a rule whose author
    // is away still runs with no more than the author's authority.
    "CREATE TABLE event_rules (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        topic TEXT NOT NULL,
        cond TEXT,
        command TEXT NOT NULL,
        author TEXT NOT NULL,
        role TEXT NOT NULL,
        grp TEXT,
        person INTEGER NOT NULL,
        created_ms INTEGER NOT NULL
    );
    CREATE INDEX event_rules_topic ON event_rules(topic);",
    // 9: each command of a looping tab's turn and its result, keyed by (tab, turn, index):
    // after a restart a re-sent turn runs none of them twice (src/agents/store.rs).
    "CREATE TABLE agent_commands (
        tab TEXT NOT NULL,
        turn_id TEXT NOT NULL,
        idx INTEGER NOT NULL,
        ok INTEGER NOT NULL,
        output TEXT NOT NULL,
        at_ms INTEGER NOT NULL,
        PRIMARY KEY (tab, turn_id, idx)
    )",
    // 10: per-site quotas set with `?<tabs budget SITE N/hour>!` (docs/commands.md).
    "CREATE TABLE site_quotas (
        site TEXT PRIMARY KEY,
        sends INTEGER NOT NULL,
        per_ms INTEGER NOT NULL
    )",
    // 11: the command language's variables (`?<set x = 1>!`, `?<set global y = 2>!`, flow
    // node outputs), written through by src/commands/vars.rs so they survive a restart like
    // runs, rules and memory. `scope` is a tab's client id, or '' for the global scope.
    "CREATE TABLE variables (
        scope TEXT NOT NULL,
        name TEXT NOT NULL,
        value TEXT NOT NULL,
        updated_ms INTEGER NOT NULL,
        PRIMARY KEY (scope, name)
    )",
    // 12: a program skill's pinned SHA-256 (docs/memory-and-skills.md): the file runs only
    // while its bytes hash to the pin set by the person (`aicard skill enable`, the dashboard).
    "CREATE TABLE skill_pins (
        name TEXT PRIMARY KEY,
        sha256 TEXT NOT NULL,
        pinned_ms INTEGER NOT NULL
    )",
    // 13: an agent session's pending message and the files it carries (docs/files.md): the
    // next message's files and the message sent but not yet seen, as JSON, so a delivery
    // after a restart carries its files (src/agent_loop/journal.rs). NULL: nothing pending.
    "ALTER TABLE agent_sessions ADD COLUMN pending TEXT",
];

/// One row of the journal with its global id (the dashboard's SSE `id:`).
#[derive(Debug, Clone)]
pub struct JournalRow {
    pub id: i64,
    pub run_id: String,
    pub seq: i64,
    pub at_ms: i64,
    /// The event's JSON (`flows::engine::JournalEvent`).
    pub event: String,
}

impl JournalRow {
    /// From a row of `SELECT rowid, run_id, seq, at_ms, event FROM journal`.
    pub fn read(r: &rusqlite::Row<'_>) -> rusqlite::Result<JournalRow> {
        Ok(JournalRow {
            id: r.get(0)?,
            run_id: r.get(1)?,
            seq: r.get(2)?,
            at_ms: r.get(3)?,
            event: r.get(4)?,
        })
    }
}

/// Kinds of kept frames that the overflow policy drops first: progress that a later frame
/// supersedes, never an answer or a result.
pub const DROPPABLE_KINDS: &[&str] = &["flow_event", "heartbeat", "ack"];

/// How much is kept for one tab that is away (or still catching up).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeptCap {
    pub frames: usize,
    pub bytes: usize,
}

/// A journal event to write in the same transaction as a kept frame.
#[derive(Debug, Clone, Copy)]
pub struct JournalEntry<'a> {
    pub run_id: &'a str,
    pub event: &'a str,
    pub at_ms: i64,
}

/// One kept frame, as read back for a replay.
#[derive(Debug, Clone, PartialEq)]
pub struct KeptFrame {
    /// Orders the frames of a tab (the order they were kept in).
    pub id: i64,
    pub kind: String,
    pub text: String,
}

/// Errors from the store; they reach logs, not tabs.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("store: cannot create data dir: {0}")]
    Io(#[from] std::io::Error),
}

pub type StoreResult<T> = Result<T, StoreError>;

/// A tab's persisted identity.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientRecord {
    pub client_id: String,
    pub site: String,
    pub label: Option<String>,
    pub role: String,
    pub group: Option<String>,
    pub url: Option<String>,
    pub last_seen_ms: i64,
}

/// A run's header row.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    pub run_id: String,
    pub flow: String,
    pub flow_hash: String,
    pub flow_source: String,
    pub master: Option<String>,
    pub state: String,
    pub started_ms: i64,
    pub updated_ms: i64,
}

/// Handle to the SQLite file; cheap to clone, one connection behind a mutex (SQLite
/// serialises writers anyway, and every statement here is short).
#[derive(Clone)]
pub struct Store {
    conn: Arc<Mutex<Connection>>,
    /// Bumped after every journal write, so readers (the dashboard's event stream) wait on it
    /// instead of polling.
    journal_tick: Arc<tokio::sync::watch::Sender<u64>>,
}

impl Store {
    /// Opens (creating if needed) `data_dir/aicard.db` and runs pending migrations.
    pub fn open(data_dir: &Path) -> StoreResult<Store> {
        std::fs::create_dir_all(data_dir)?;
        let conn = Connection::open(data_dir.join("aicard.db"))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        migrate(&conn)?;
        Ok(Store {
            conn: Arc::new(Mutex::new(conn)),
            journal_tick: Arc::new(tokio::sync::watch::channel(0).0),
        })
    }

    /// Changes after every journal write (its value counts the writes).
    pub fn journal_watch(&self) -> tokio::sync::watch::Receiver<u64> {
        self.journal_tick.subscribe()
    }

    /// The journal rows of every run after global id `after` (the row id), oldest first, at
    /// most `limit`: what the dashboard's event stream and the webhooks follow.
    pub fn journal_after(&self, after: i64, limit: usize) -> Vec<JournalRow> {
        self.read(|c| {
            let mut st = c.prepare_cached(
                "SELECT rowid, run_id, seq, at_ms, event FROM journal WHERE rowid > ?1
                 ORDER BY rowid LIMIT ?2",
            )?;
            let rows = st.query_map(rusqlite::params![after, limit as i64], JournalRow::read)?;
            rows.collect()
        })
        .unwrap_or_default()
    }

    /// The newest global journal id (0: none yet).
    pub fn journal_last_id(&self) -> i64 {
        self.read(|c| {
            c.query_row("SELECT COALESCE(MAX(rowid), 0) FROM journal", [], |r| {
                r.get(0)
            })
        })
        .unwrap_or(0)
    }

    fn journal_written(&self) {
        self.journal_tick.send_modify(|n| *n += 1);
    }

    /// Runs `f` on the connection: read-only queries of modules with their own views of the
    /// tables (the dashboard).
    pub fn read<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> StoreResult<T> {
        Ok(f(&self.conn())?)
    }

    /// Runs `f` on the connection (for modules that own their own tables, e.g. memory).
    pub fn with_conn<T>(&self, f: impl FnOnce(&mut Connection) -> T) -> T {
        f(&mut self.conn())
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves SQLite consistent (statements are atomic).
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn upsert_client(&self, c: &ClientRecord) -> StoreResult<()> {
        self.conn().execute(
            "INSERT INTO clients (client_id, site, label, role, grp, url, last_seen_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT(client_id) DO UPDATE SET site=?2, label=?3, role=?4, grp=?5, url=?6,
               last_seen_ms=?7",
            params![
                c.client_id,
                c.site,
                c.label,
                c.role,
                c.group,
                c.url,
                c.last_seen_ms
            ],
        )?;
        Ok(())
    }

    pub fn client(&self, client_id: &str) -> StoreResult<Option<ClientRecord>> {
        Ok(self
            .conn()
            .query_row(
                "SELECT client_id, site, label, role, grp, url, last_seen_ms FROM clients
                 WHERE client_id = ?1",
                params![client_id],
                |r| {
                    Ok(ClientRecord {
                        client_id: r.get(0)?,
                        site: r.get(1)?,
                        label: r.get(2)?,
                        role: r.get(3)?,
                        group: r.get(4)?,
                        url: r.get(5)?,
                        last_seen_ms: r.get(6)?,
                    })
                },
            )
            .optional()?)
    }

    /// Forgets the identities of tabs last seen before `cutoff_ms`, and the frames kept for
    /// them, except `keep` (tabs something still waits on) and the masters of runs still in
    /// progress. Returns each forgotten tab with how many kept frames went with it.
    pub fn forget_clients_before(
        &self,
        cutoff_ms: i64,
        keep: &[String],
    ) -> StoreResult<Vec<(String, usize)>> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        let old: Vec<String> = {
            let mut stmt = tx.prepare(
                "SELECT client_id FROM clients WHERE last_seen_ms < ?1 AND client_id NOT IN
                   (SELECT master FROM runs WHERE master IS NOT NULL
                      AND state IN ('running', 'paused'))",
            )?;
            let rows = stmt.query_map(params![cutoff_ms], |r| r.get::<_, String>(0))?;
            rows.collect::<Result<Vec<_>, _>>()?
        };
        let mut gone = Vec::new();
        for id in old.into_iter().filter(|id| !keep.contains(id)) {
            tx.execute("DELETE FROM clients WHERE client_id = ?1", params![id])?;
            let frames = tx.execute(
                "DELETE FROM pending_frames WHERE client_id = ?1",
                params![id],
            )?;
            gone.push((id, frames));
        }
        tx.commit()?;
        Ok(gone)
    }

    /// Keeps a frame for a tab that is not connected (test helper; no cap).
    pub fn push_pending(&self, client_id: &str, frame: &str) -> StoreResult<()> {
        self.keep_frame(client_id, frame, "", None).map(|_| ())
    }

    /// Keeps a frame for a tab, then holds the tab's kept frames to `cap`: the oldest
    /// droppable frames (`DROPPABLE_KINDS`) go first, then the oldest of any kind; the frame
    /// just kept always stays. Returns how many frames were dropped.
    pub fn keep_frame(
        &self,
        client_id: &str,
        frame: &str,
        kind: &str,
        cap: Option<KeptCap>,
    ) -> StoreResult<usize> {
        self.keep_frame_journaled(client_id, frame, kind, cap, None)
    }

    /// `keep_frame`, and appends `journal` in the same transaction: a run's result and the
    /// frame that carries it to the master are written together or not at all.
    pub fn keep_frame_journaled(
        &self,
        client_id: &str,
        frame: &str,
        kind: &str,
        cap: Option<KeptCap>,
        journal: Option<JournalEntry<'_>>,
    ) -> StoreResult<usize> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        if let Some(j) = journal {
            append_in(&tx, j.run_id, j.event, j.at_ms)?;
        }
        tx.execute(
            "INSERT INTO pending_frames (client_id, frame, kind, bytes) VALUES (?1, ?2, ?3, ?4)",
            params![client_id, frame, kind, frame.len() as i64],
        )?;
        let newest = tx.last_insert_rowid();
        let dropped = match cap {
            Some(cap) => hold_to_cap(&tx, client_id, newest, cap)?,
            None => 0,
        };
        tx.commit()?;
        drop(conn);
        if journal.is_some() {
            self.journal_written();
        }
        Ok(dropped)
    }

    /// Sets aside `n` frame ids for a tab's frames that are not written yet: a frame kept
    /// later gets a larger id, so `keep_frames_at` can write these afterwards (off the
    /// caller's thread) and a replay still reads them first. Returns the first id.
    pub fn reserve_frame_ids(&self, n: usize) -> StoreResult<i64> {
        let conn = self.conn();
        // `sqlite_sequence` holds the largest id AUTOINCREMENT handed out; it has no row
        // before the table's first insert.
        conn.execute(
            "INSERT INTO sqlite_sequence (name, seq)
             SELECT 'pending_frames', COALESCE((SELECT MAX(id) FROM pending_frames), 0)
             WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'pending_frames')",
            [],
        )?;
        let last: i64 = conn.query_row(
            "UPDATE sqlite_sequence SET seq = seq + ?1 WHERE name = 'pending_frames'
             RETURNING seq",
            params![n as i64],
            |r| r.get(0),
        )?;
        Ok(last - n as i64 + 1)
    }

    /// Keeps a tab's frames (`(id, text, kind)`, oldest first, each id from
    /// `reserve_frame_ids`) in ONE transaction, then holds the tab's kept frames to `cap`
    /// once; the newest frame of the batch always stays. Returns how many frames were
    /// dropped to fit the cap.
    pub fn keep_frames_at(
        &self,
        client_id: &str,
        frames: &[(i64, String, String)],
        cap: KeptCap,
    ) -> StoreResult<usize> {
        let Some(newest) = frames.iter().map(|f| f.0).max() else {
            return Ok(0);
        };
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        {
            let mut insert = tx.prepare_cached(
                "INSERT INTO pending_frames (id, client_id, frame, kind, bytes)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )?;
            for (id, text, kind) in frames {
                insert.execute(params![id, client_id, text, kind, text.len() as i64])?;
            }
        }
        let dropped = hold_to_cap(&tx, client_id, newest, cap)?;
        tx.commit()?;
        Ok(dropped)
    }

    /// The oldest kept frames of a tab, at most `max_frames` and (past the first frame) at
    /// most `max_bytes` in all: a replay reads a page at a time, never everything.
    pub fn pending_page(
        &self,
        client_id: &str,
        max_frames: usize,
        max_bytes: usize,
    ) -> StoreResult<Vec<KeptFrame>> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT id, kind, frame, bytes FROM pending_frames WHERE client_id = ?1
             ORDER BY id LIMIT ?2",
        )?;
        let mut rows = stmt.query(params![client_id, max_frames as i64])?;
        let mut page = Vec::new();
        let mut total = 0usize;
        while let Some(r) = rows.next()? {
            let bytes: i64 = r.get(3)?;
            if !page.is_empty() && total + bytes as usize > max_bytes {
                break;
            }
            total += bytes as usize;
            page.push(KeptFrame {
                id: r.get(0)?,
                kind: r.get(1)?,
                text: r.get(2)?,
            });
        }
        Ok(page)
    }

    /// Forgets one kept frame once it was written to the tab's socket.
    pub fn drop_pending(&self, id: i64) -> StoreResult<()> {
        self.conn()
            .execute("DELETE FROM pending_frames WHERE id = ?1", params![id])?;
        Ok(())
    }

    /// Removes and returns a tab's undelivered frames, oldest first. Bounded by the cap
    /// `keep_frame` holds them to.
    pub fn take_pending(&self, client_id: &str) -> StoreResult<Vec<String>> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        let frames = {
            let mut stmt =
                tx.prepare("SELECT frame FROM pending_frames WHERE client_id = ?1 ORDER BY id")?;
            let rows = stmt.query_map(params![client_id], |r| r.get::<_, String>(0))?;
            rows.collect::<Result<Vec<_>, _>>()?
        };
        tx.execute(
            "DELETE FROM pending_frames WHERE client_id = ?1",
            params![client_id],
        )?;
        tx.commit()?;
        Ok(frames)
    }

    pub fn pending_count(&self, client_id: &str) -> StoreResult<usize> {
        let n: i64 = self.conn().query_row(
            "SELECT COUNT(*) FROM pending_frames WHERE client_id = ?1",
            params![client_id],
            |r| r.get(0),
        )?;
        Ok(n as usize)
    }

    pub fn save_flow(&self, name: &str, source: &str, now_ms: i64) -> StoreResult<()> {
        self.conn().execute(
            "INSERT INTO flows (name, source, created_ms) VALUES (?1, ?2, ?3)
             ON CONFLICT(name) DO UPDATE SET source=?2, created_ms=?3",
            params![name, source, now_ms],
        )?;
        Ok(())
    }

    pub fn flow_source(&self, name: &str) -> StoreResult<Option<String>> {
        Ok(self
            .conn()
            .query_row(
                "SELECT source FROM flows WHERE name = ?1",
                params![name],
                |r| r.get(0),
            )
            .optional()?)
    }

    pub fn saved_flows(&self) -> StoreResult<Vec<String>> {
        let conn = self.conn();
        let mut stmt = conn.prepare("SELECT name FROM flows ORDER BY name")?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// Sets (or, with `None`, removes) a site's quota: at most `sends` per `per_ms`.
    pub fn set_site_quota(&self, site: &str, quota: Option<(u32, u64)>) -> StoreResult<()> {
        let conn = self.conn();
        match quota {
            Some((sends, per_ms)) => conn.execute(
                "INSERT INTO site_quotas (site, sends, per_ms) VALUES (?1, ?2, ?3)
                 ON CONFLICT(site) DO UPDATE SET sends=?2, per_ms=?3",
                params![site, sends, per_ms as i64],
            )?,
            None => conn.execute("DELETE FROM site_quotas WHERE site = ?1", params![site])?,
        };
        Ok(())
    }

    /// Every site quota: (site, sends, per_ms).
    pub fn site_quotas(&self) -> StoreResult<Vec<(String, u32, u64)>> {
        let conn = self.conn();
        let mut stmt = conn.prepare("SELECT site, sends, per_ms FROM site_quotas ORDER BY site")?;
        let rows = stmt.query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)? as u64))
        })?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// Keeps a variable (`scope` '' is the global scope), replacing its value.
    pub fn set_variable(&self, scope: &str, name: &str, value: &str) -> StoreResult<()> {
        self.conn().execute(
            "INSERT INTO variables (scope, name, value, updated_ms) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT(scope, name) DO UPDATE SET value=?3, updated_ms=?4",
            params![scope, name, value, now_ms()],
        )?;
        Ok(())
    }

    /// Forgets every variable of `scope`.
    pub fn drop_variables(&self, scope: &str) -> StoreResult<()> {
        self.conn()
            .execute("DELETE FROM variables WHERE scope = ?1", params![scope])?;
        Ok(())
    }

    /// Every kept variable: (scope, name, value), scope '' being the global one.
    pub fn variables(&self) -> StoreResult<Vec<(String, String, String)>> {
        let conn = self.conn();
        let mut stmt =
            conn.prepare("SELECT scope, name, value FROM variables ORDER BY scope, name")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// Pins a program skill's SHA-256: the person enabled these bytes.
    pub fn pin_skill(&self, name: &str, sha256: &str) -> StoreResult<()> {
        self.conn().execute(
            "INSERT INTO skill_pins (name, sha256, pinned_ms) VALUES (?1, ?2, ?3)
             ON CONFLICT(name) DO UPDATE SET sha256=?2, pinned_ms=?3",
            params![name, sha256, now_ms()],
        )?;
        Ok(())
    }

    /// The SHA-256 pinned for a program skill, if the person enabled one.
    pub fn skill_pin(&self, name: &str) -> StoreResult<Option<String>> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached("SELECT sha256 FROM skill_pins WHERE name = ?1")?;
        let mut rows = stmt.query(params![name])?;
        Ok(match rows.next()? {
            Some(r) => Some(r.get(0)?),
            None => None,
        })
    }

    /// Every saved flow's name and when it was last saved (to notice a change cheaply).
    pub fn saved_flow_stamps(&self) -> StoreResult<Vec<(String, i64)>> {
        let conn = self.conn();
        let mut stmt = conn.prepare("SELECT name, created_ms FROM flows ORDER BY name")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    pub fn delete_flow(&self, name: &str) -> StoreResult<bool> {
        Ok(self
            .conn()
            .execute("DELETE FROM flows WHERE name = ?1", params![name])?
            > 0)
    }

    /// Records a new run and the first event of its journal in one transaction: a hub
    /// killed right after `manager run` leaves either nothing or a run it can resume.
    pub fn insert_run(&self, r: &RunRecord, first_event: &str) -> StoreResult<()> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        tx.execute(
            "INSERT INTO runs (run_id, flow, flow_hash, flow_source, master, state, started_ms,
               updated_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                r.run_id,
                r.flow,
                r.flow_hash,
                r.flow_source,
                r.master,
                r.state,
                r.started_ms,
                r.updated_ms
            ],
        )?;
        tx.execute(
            "INSERT INTO journal (run_id, seq, at_ms, event) VALUES (?1, 1, ?2, ?3)",
            params![r.run_id, r.started_ms, first_event],
        )?;
        tx.commit()?;
        drop(conn);
        self.journal_written();
        Ok(())
    }

    pub fn set_run_state(&self, run_id: &str, state: &str, now_ms: i64) -> StoreResult<()> {
        self.conn().execute(
            "UPDATE runs SET state = ?2, updated_ms = ?3 WHERE run_id = ?1",
            params![run_id, state, now_ms],
        )?;
        Ok(())
    }

    /// Runs whose state is one of `states` (e.g. running, paused), oldest first.
    pub fn runs_in(&self, states: &[&str]) -> StoreResult<Vec<RunRecord>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT run_id, flow, flow_hash, flow_source, master, state, started_ms, updated_ms
             FROM runs ORDER BY started_ms",
        )?;
        let rows = stmt.query_map([], run_from_row)?;
        let all = rows.collect::<Result<Vec<_>, _>>()?;
        Ok(all
            .into_iter()
            .filter(|r| states.contains(&r.state.as_str()))
            .collect())
    }

    pub fn run(&self, run_id: &str) -> StoreResult<Option<RunRecord>> {
        Ok(self
            .conn()
            .query_row(
                "SELECT run_id, flow, flow_hash, flow_source, master, state, started_ms,
                   updated_ms FROM runs WHERE run_id = ?1",
                params![run_id],
                run_from_row,
            )
            .optional()?)
    }

    /// Appends one journal event; `seq` is assigned here, dense per run.
    pub fn append_event(&self, run_id: &str, event_json: &str, now_ms: i64) -> StoreResult<i64> {
        let seq = append_in(&self.conn(), run_id, event_json, now_ms)?;
        self.journal_written();
        Ok(seq)
    }

    /// A run's journal in order.
    pub fn events(&self, run_id: &str) -> StoreResult<Vec<String>> {
        let conn = self.conn();
        let mut stmt = conn.prepare("SELECT event FROM journal WHERE run_id = ?1 ORDER BY seq")?;
        let rows = stmt.query_map(params![run_id], |r| r.get(0))?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }
}

fn append_in(conn: &Connection, run_id: &str, event_json: &str, now_ms: i64) -> StoreResult<i64> {
    let seq: i64 = conn.query_row(
        "SELECT COALESCE(MAX(seq), 0) + 1 FROM journal WHERE run_id = ?1",
        params![run_id],
        |r| r.get(0),
    )?;
    conn.execute(
        "INSERT INTO journal (run_id, seq, at_ms, event) VALUES (?1, ?2, ?3, ?4)",
        params![run_id, seq, now_ms, event_json],
    )?;
    Ok(seq)
}

/// Holds a tab's kept frames to `cap`: the oldest droppable frames (`DROPPABLE_KINDS`) go
/// first, then the oldest of any kind; `keep` (the frame just kept) always stays. Reads only
/// the `pending_frames_cap` index: one sum, then victims in order until the tab fits.
fn hold_to_cap(tx: &Connection, client_id: &str, keep: i64, cap: KeptCap) -> StoreResult<usize> {
    let (n, bytes): (i64, i64) = tx.query_row(
        "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM pending_frames INDEXED BY pending_frames_cap
         WHERE client_id = ?1",
        params![client_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let (mut n, mut bytes) = (n as usize, bytes as usize);
    if n <= cap.frames && bytes <= cap.bytes {
        return Ok(0);
    }
    let droppable = DROPPABLE_KINDS
        .iter()
        .map(|k| format!("'{k}'"))
        .collect::<Vec<_>>()
        .join(",");
    let victims: Vec<(i64, i64)> = {
        let mut stmt = tx.prepare_cached(&format!(
            "SELECT id, bytes FROM pending_frames INDEXED BY pending_frames_cap
             WHERE client_id = ?1 AND id != ?2
             ORDER BY (kind IN ({droppable})) DESC, id"
        ))?;
        let mut rows = stmt.query(params![client_id, keep])?;
        let mut v = Vec::new();
        while n > cap.frames || bytes > cap.bytes {
            let Some(r) = rows.next()? else { break };
            let (id, b): (i64, i64) = (r.get(0)?, r.get(1)?);
            v.push((id, b));
            n -= 1;
            bytes = bytes.saturating_sub(b as usize);
        }
        v
    };
    let mut delete = tx.prepare_cached("DELETE FROM pending_frames WHERE id = ?1")?;
    for (id, _) in &victims {
        delete.execute(params![id])?;
    }
    Ok(victims.len())
}

fn run_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RunRecord> {
    Ok(RunRecord {
        run_id: r.get(0)?,
        flow: r.get(1)?,
        flow_hash: r.get(2)?,
        flow_source: r.get(3)?,
        master: r.get(4)?,
        state: r.get(5)?,
        started_ms: r.get(6)?,
        updated_ms: r.get(7)?,
    })
}

fn migrate(conn: &Connection) -> StoreResult<()> {
    let done: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(done.max(0) as usize) {
        conn.execute_batch(&format!(
            "BEGIN; {sql}; PRAGMA user_version = {}; COMMIT;",
            i + 1
        ))?;
    }
    Ok(())
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Reads the secret kept in the file `path`, creating a new 256-bit one (hex, mode 0600, its
/// folder too) when there is none: the hub token, the webhook secret.
pub fn load_or_create_secret(path: &Path) -> std::io::Result<String> {
    match std::fs::read_to_string(path) {
        Ok(t) if !t.trim().is_empty() => return Ok(t.trim().to_string()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut bytes = [0u8; 32];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut bytes);
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(path)?;
    std::io::Write::write_all(&mut f, token.as_bytes())?;
    f.sync_all()?;
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_and_pending_frames_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = Store::open(dir.path()).unwrap();
            s.upsert_client(&ClientRecord {
                client_id: "c1".into(),
                site: "deepseek".into(),
                label: Some("ds".into()),
                role: "worker".into(),
                group: None,
                url: None,
                last_seen_ms: 1,
            })
            .unwrap();
            s.push_pending("c1", "{\"a\":1}").unwrap();
            s.push_pending("c1", "{\"a\":2}").unwrap();
        }
        let s = Store::open(dir.path()).unwrap();
        assert_eq!(
            s.client("c1").unwrap().unwrap().label.as_deref(),
            Some("ds")
        );
        assert_eq!(s.pending_count("c1").unwrap(), 2);
        assert_eq!(
            s.take_pending("c1").unwrap(),
            vec!["{\"a\":1}", "{\"a\":2}"]
        );
        assert!(s.take_pending("c1").unwrap().is_empty());
    }

    #[test]
    fn kept_frames_are_capped_progress_first_and_read_in_pages() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path()).unwrap();
        let cap = Some(KeptCap {
            frames: 3,
            bytes: 1000,
        });
        assert_eq!(s.keep_frame("c", "result-1", "deliver", cap).unwrap(), 0);
        assert_eq!(
            s.keep_frame("c", "progress-1", "flow_event", cap).unwrap(),
            0
        );
        assert_eq!(s.keep_frame("c", "result-2", "deliver", cap).unwrap(), 0);
        // Over the frame cap: the progress frame goes, not the older result.
        assert_eq!(s.keep_frame("c", "result-3", "deliver", cap).unwrap(), 1);
        let texts = |p: Vec<KeptFrame>| p.into_iter().map(|f| f.text).collect::<Vec<_>>();
        assert_eq!(
            texts(s.pending_page("c", 10, 1 << 20).unwrap()),
            ["result-1", "result-2", "result-3"]
        );
        // Only results left: the oldest goes.
        assert_eq!(s.keep_frame("c", "result-4", "deliver", cap).unwrap(), 1);
        // Over the byte cap: everything but the newest frame goes.
        let big = "x".repeat(2000);
        assert_eq!(s.keep_frame("c", &big, "deliver", cap).unwrap(), 3);
        assert_eq!(s.pending_count("c").unwrap(), 1);
        // Pages: by count, and by bytes past the first frame.
        for i in 0..5 {
            s.keep_frame("d", &format!("{i}{}", "y".repeat(99)), "", None)
                .unwrap();
        }
        let page = s.pending_page("d", 2, 1 << 20).unwrap();
        assert_eq!(page.len(), 2);
        assert_eq!(s.pending_page("d", 10, 250).unwrap().len(), 2);
        assert_eq!(s.pending_page("d", 10, 1).unwrap().len(), 1);
        s.drop_pending(page[0].id).unwrap();
        assert!(s.pending_page("d", 1, 1 << 20).unwrap()[0]
            .text
            .starts_with('1'));
    }

    #[test]
    fn journal_is_ordered_per_run() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path()).unwrap();
        assert_eq!(s.append_event("r1", "e1", 1).unwrap(), 1);
        assert_eq!(s.append_event("r2", "x1", 1).unwrap(), 1);
        assert_eq!(s.append_event("r1", "e2", 2).unwrap(), 2);
        assert_eq!(s.events("r1").unwrap(), vec!["e1", "e2"]);
    }

    #[test]
    fn migrations_are_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        Store::open(dir.path()).unwrap();
        let s = Store::open(dir.path()).unwrap();
        let v: i64 = s
            .conn()
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(v as usize, MIGRATIONS.len());
    }

    /// The cap's accounting reads an index, never the frames: with frames of 64 KiB it
    /// walked every kept frame's overflow pages, once per frame kept.
    #[test]
    fn kept_frame_accounting_reads_only_an_index() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path()).unwrap();
        let plan = |sql: &str| -> String {
            s.read(|c| {
                let mut stmt = c.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))?;
                let rows = stmt.query_map(["c"], |r| r.get::<_, String>(3))?;
                rows.collect::<Result<Vec<_>, _>>()
            })
            .unwrap()
            .join("; ")
        };
        let sum = plan(
            "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM pending_frames WHERE client_id = ?1",
        );
        assert!(sum.contains("COVERING INDEX pending_frames_cap"), "{sum}");
        let victims = plan(&format!(
            "SELECT id, bytes FROM pending_frames WHERE client_id = ?1 ORDER BY (kind IN ('{}')) DESC, id",
            DROPPABLE_KINDS[0]
        ));
        assert!(
            victims.contains("COVERING INDEX pending_frames_cap"),
            "{victims}"
        );
    }

    #[test]
    fn frames_written_later_at_set_aside_ids_are_read_first_and_capped_once() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path()).unwrap();
        let first = s.reserve_frame_ids(2).unwrap();
        s.keep_frame("c", "third", "deliver", None).unwrap();
        let cap = KeptCap {
            frames: 2,
            bytes: 1 << 20,
        };
        let batch = [
            (first, "first".to_string(), "flow_event".to_string()),
            (first + 1, "second".to_string(), "deliver".to_string()),
        ];
        // Three frames, a cap of two: the progress frame goes, once.
        assert_eq!(s.keep_frames_at("c", &batch, cap).unwrap(), 1);
        let texts: Vec<String> = s
            .pending_page("c", 10, 1 << 20)
            .unwrap()
            .into_iter()
            .map(|f| f.text)
            .collect();
        assert_eq!(texts, ["second", "third"]);
        // Ids set aside on an empty table too, and a later frame still sorts after them.
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path()).unwrap();
        let a = s.reserve_frame_ids(1).unwrap();
        s.keep_frame("d", "later", "", None).unwrap();
        s.keep_frames_at("d", &[(a, "earlier".into(), String::new())], cap)
            .unwrap();
        let texts: Vec<String> = s
            .pending_page("d", 10, 1 << 20)
            .unwrap()
            .into_iter()
            .map(|f| f.text)
            .collect();
        assert_eq!(texts, ["earlier", "later"]);
    }

    #[test]
    fn tabs_not_seen_for_long_are_forgotten_unless_still_needed() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path()).unwrap();
        let tab = |id: &str, seen: i64| ClientRecord {
            client_id: id.into(),
            site: "kimi".into(),
            label: None,
            role: "worker".into(),
            group: None,
            url: None,
            last_seen_ms: seen,
        };
        for (id, seen) in [("old", 10), ("master", 10), ("busy", 10), ("new", 1_000)] {
            s.upsert_client(&tab(id, seen)).unwrap();
        }
        s.push_pending("old", "{}").unwrap();
        s.insert_run(
            &RunRecord {
                run_id: "r".into(),
                flow: "f".into(),
                flow_hash: "h".into(),
                flow_source: "".into(),
                master: Some("master".into()),
                state: "running".into(),
                started_ms: 1,
                updated_ms: 1,
            },
            "{}",
        )
        .unwrap();
        let gone = s.forget_clients_before(500, &["busy".to_string()]).unwrap();
        assert_eq!(gone, vec![("old".to_string(), 1)]);
        assert!(s.client("old").unwrap().is_none());
        assert_eq!(s.pending_count("old").unwrap(), 0);
        for id in ["master", "busy", "new"] {
            assert!(s.client(id).unwrap().is_some(), "{id} stays");
        }
        assert_eq!(
            s.events("r").unwrap().len(),
            1,
            "journals are never touched"
        );
    }
}
