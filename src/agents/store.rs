//! Agents, their sessions and each session's rounds in the SQLite store ([`crate::store`]):
//! agents persist, and a session goes on from its last round after a hub restart.
//!
//! The schema is the store's migrations 6 and 13 (`src/store.rs`, which owns every migration: the
//! store names nothing above it); this module reads and writes those tables.

use rusqlite::{params, OptionalExtension};

use crate::commands::agent::{AgentSpec, Tool};
use crate::store::{Store, StoreResult};

/// An agent as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentRecord {
    /// What `agent create` said.
    pub spec: AgentSpec,
    /// The client id (or `person`) that created it.
    pub creator: String,
}

/// A session as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRecord {
    /// Session id.
    pub id: String,
    /// The agent, or `None` for a looping master/foreman tab.
    pub agent: Option<String>,
    /// The tab's client id.
    pub tab: String,
    /// `running`, `paused` or `ended`.
    pub state: String,
    /// Rounds closed.
    pub round: u32,
    /// When it started / ended (ms since the epoch).
    pub started_ms: i64,
    /// When it ended.
    pub ended_ms: Option<i64>,
    /// Why it paused or ended ([`super::session::Why::code`] and text).
    pub why: Option<String>,
}

/// One command of a round and its result, as journaled.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RoundCommand {
    /// The body.
    pub command: String,
    /// Success.
    pub ok: bool,
    /// The whole output.
    pub output: String,
}

fn tools_text(tools: &[Tool]) -> String {
    tools
        .iter()
        .map(Tool::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Creates or replaces an agent.
pub fn save_agent(store: &Store, a: &AgentRecord, now_ms: i64) -> StoreResult<()> {
    store.with_conn(|c| {
        c.execute(
            "INSERT INTO agents (name, target, tools, max_rounds, memory, creator, created_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT(name) DO UPDATE SET target=?2, tools=?3, max_rounds=?4, memory=?5,
               creator=?6",
            params![
                a.spec.name,
                a.spec.target,
                tools_text(&a.spec.tools_or_default()),
                a.spec.max_rounds,
                a.spec.memory,
                a.creator,
                now_ms
            ],
        )
    })?;
    Ok(())
}

fn agent_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<AgentRecord> {
    let tools: String = r.get(2)?;
    Ok(AgentRecord {
        spec: AgentSpec {
            name: r.get(0)?,
            target: r.get(1)?,
            tools: Some(tools.split(',').filter_map(Tool::parse).collect()),
            max_rounds: r.get(3)?,
            memory: r.get(4)?,
        },
        creator: r.get(5)?,
    })
}

/// One agent by name.
pub fn agent(store: &Store, name: &str) -> StoreResult<Option<AgentRecord>> {
    store.read(|c| {
        c.query_row(
            "SELECT name, target, tools, max_rounds, memory, creator FROM agents WHERE name = ?1",
            params![name],
            agent_row,
        )
        .optional()
    })
}

/// Every agent, by name.
pub fn agents(store: &Store) -> StoreResult<Vec<AgentRecord>> {
    store.read(|c| {
        let mut st = c.prepare(
            "SELECT name, target, tools, max_rounds, memory, creator FROM agents ORDER BY name",
        )?;
        let rows = st.query_map([], agent_row)?;
        rows.collect()
    })
}

/// Records a new session.
pub fn insert_session(store: &Store, s: &SessionRecord) -> StoreResult<()> {
    store.with_conn(|c| {
        c.execute(
            "INSERT INTO agent_sessions (id, agent, tab, state, round, started_ms, ended_ms, why)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                s.id,
                s.agent,
                s.tab,
                s.state,
                s.round,
                s.started_ms,
                s.ended_ms,
                s.why
            ],
        )
    })?;
    Ok(())
}

/// A session's state (and, when it paused or ended, why; `ended_ms` when it ended).
pub fn set_session_state(
    store: &Store,
    id: &str,
    state: &str,
    why: Option<&str>,
    ended_ms: Option<i64>,
) -> StoreResult<()> {
    store.with_conn(|c| {
        c.execute(
            "UPDATE agent_sessions SET state = ?2, why = ?3, ended_ms = ?4 WHERE id = ?1",
            params![id, state, why, ended_ms],
        )
    })?;
    Ok(())
}

fn session_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SessionRecord> {
    Ok(SessionRecord {
        id: r.get(0)?,
        agent: r.get(1)?,
        tab: r.get(2)?,
        state: r.get(3)?,
        round: r.get(4)?,
        started_ms: r.get(5)?,
        ended_ms: r.get(6)?,
        why: r.get(7)?,
    })
}

const SESSION_COLS: &str = "id, agent, tab, state, round, started_ms, ended_ms, why";

/// One session.
pub fn session(store: &Store, id: &str) -> StoreResult<Option<SessionRecord>> {
    store.read(|c| {
        c.query_row(
            &format!("SELECT {SESSION_COLS} FROM agent_sessions WHERE id = ?1"),
            params![id],
            session_row,
        )
        .optional()
    })
}

/// Sessions not ended (to go on with after a restart), oldest first.
pub fn open_sessions(store: &Store) -> StoreResult<Vec<SessionRecord>> {
    store.read(|c| {
        let mut st = c.prepare(&format!(
            "SELECT {SESSION_COLS} FROM agent_sessions WHERE state != 'ended' ORDER BY started_ms, id"
        ))?;
        let rows = st.query_map([], session_row)?;
        rows.collect()
    })
}

/// The newest sessions of every agent and looping tab, newest first, at most `limit`.
pub fn recent_sessions(store: &Store, limit: usize) -> StoreResult<Vec<SessionRecord>> {
    store.read(|c| {
        let mut st = c.prepare(&format!(
            "SELECT {SESSION_COLS} FROM agent_sessions ORDER BY started_ms DESC, id LIMIT ?1"
        ))?;
        let rows = st.query_map(params![limit as i64], session_row)?;
        rows.collect()
    })
}

/// An agent's sessions, newest first.
pub fn sessions_of(store: &Store, agent: &str) -> StoreResult<Vec<SessionRecord>> {
    store.read(|c| {
        let mut st = c.prepare(&format!(
            "SELECT {SESSION_COLS} FROM agent_sessions WHERE agent = ?1 ORDER BY started_ms DESC, id"
        ))?;
        let rows = st.query_map(params![agent], session_row)?;
        rows.collect()
    })
}

/// Journals what a session has pending (its next message's files and the message sent but
/// not yet seen, as the loop's JSON; `None` clears it): read back by [`pending`] after a
/// restart (migration 13).
pub fn set_pending(store: &Store, id: &str, pending: Option<&str>) -> StoreResult<()> {
    store.with_conn(|c| {
        c.execute(
            "UPDATE agent_sessions SET pending = ?2 WHERE id = ?1",
            params![id, pending],
        )
    })?;
    Ok(())
}

/// What a session had pending when it was last journaled ([`set_pending`]).
pub fn pending(store: &Store, id: &str) -> StoreResult<Option<String>> {
    Ok(store
        .read(|c| {
            c.query_row(
                "SELECT pending FROM agent_sessions WHERE id = ?1",
                params![id],
                |r| r.get::<_, Option<String>>(0),
            )
            .optional()
        })?
        .flatten())
}

/// Journals one round (its commands and results) and moves the session to it, in one
/// transaction. Writing the same round twice keeps the first.
pub fn add_round(
    store: &Store,
    session: &str,
    round: u32,
    commands: &[RoundCommand],
    now_ms: i64,
) -> StoreResult<bool> {
    let json = serde_json::to_string(commands).unwrap_or_else(|_| "[]".into());
    let added = store.with_conn(|c| -> rusqlite::Result<bool> {
        let tx = c.transaction()?;
        let n = tx.execute(
            "INSERT OR IGNORE INTO agent_rounds (session, round, commands, at_ms) VALUES (?1, ?2, ?3, ?4)",
            params![session, round, json, now_ms],
        )?;
        if n > 0 {
            tx.execute(
                "UPDATE agent_sessions SET round = max(round, ?2) WHERE id = ?1",
                params![session, round],
            )?;
        }
        tx.commit()?;
        Ok(n > 0)
    })?;
    Ok(added)
}

/// A session's rounds, in order.
pub fn rounds(store: &Store, session: &str) -> StoreResult<Vec<(u32, Vec<RoundCommand>)>> {
    let raw: Vec<(u32, String)> = store.read(|c| {
        let mut st = c.prepare(
            "SELECT round, commands FROM agent_rounds WHERE session = ?1 ORDER BY round",
        )?;
        let rows = st.query_map(params![session], |r| Ok((r.get(0)?, r.get(1)?)))?;
        rows.collect()
    })?;
    Ok(raw
        .into_iter()
        .map(|(round, json)| (round, serde_json::from_str(&json).unwrap_or_default()))
        .collect())
}

/// Journals the result of command `index` of `tab`'s turn `turn_id` (the first result
/// kept: a command runs once).
pub fn journal_command(
    store: &Store,
    tab: &str,
    turn_id: &str,
    index: u32,
    ok: bool,
    output: &str,
    now_ms: i64,
) -> StoreResult<()> {
    store.with_conn(|c| {
        c.execute(
            "INSERT OR IGNORE INTO agent_commands (tab, turn_id, idx, ok, output, at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![tab, turn_id, index, ok, output, now_ms],
        )
    })?;
    Ok(())
}

/// The journaled result of command `index` of `tab`'s turn `turn_id`: (ok, output), if it ran.
pub fn journaled_command(
    store: &Store,
    tab: &str,
    turn_id: &str,
    index: u32,
) -> StoreResult<Option<(bool, String)>> {
    Ok(store.with_conn(|c| {
        c.query_row(
            "SELECT ok, output FROM agent_commands WHERE tab = ?1 AND turn_id = ?2 AND idx = ?3",
            params![tab, turn_id, index],
            |r| Ok((r.get::<_, bool>(0)?, r.get::<_, String>(1)?)),
        )
        .optional()
    })?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str) -> AgentSpec {
        AgentSpec {
            name: name.into(),
            target: "kimi-1".into(),
            tools: Some(vec![Tool::Tabs, Tool::Mcp("time".into())]),
            max_rounds: Some(10),
            memory: Some("research".into()),
        }
    }

    #[test]
    fn a_command_is_journaled_once_by_tab_turn_and_index() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let store = Store::open(dir.path()).expect("open");
            assert_eq!(
                journaled_command(&store, "t", "turn", 0).expect("read"),
                None
            );
            journal_command(&store, "t", "turn", 0, true, "first", 1).expect("write");
            journal_command(&store, "t", "turn", 0, false, "second", 2).expect("write");
            journal_command(&store, "t", "turn", 1, false, "boom", 3).expect("write");
        }
        let store = Store::open(dir.path()).expect("reopen");
        assert_eq!(
            journaled_command(&store, "t", "turn", 0).expect("read"),
            Some((true, "first".to_string())),
            "the first result is kept"
        );
        assert_eq!(
            journaled_command(&store, "t", "turn", 1).expect("read"),
            Some((false, "boom".to_string()))
        );
        assert_eq!(
            journaled_command(&store, "u", "turn", 0).expect("read"),
            None
        );
    }

    #[test]
    fn agents_persist_across_a_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let store = Store::open(dir.path()).expect("open");
            let a = AgentRecord {
                spec: spec("researcher"),
                creator: "deepseek-1".into(),
            };
            save_agent(&store, &a, 1).expect("save");
            let mut b = AgentRecord {
                spec: spec("b"),
                creator: "person".into(),
            };
            b.spec.tools = None;
            b.spec.max_rounds = None;
            save_agent(&store, &b, 2).expect("save");
        }
        let store = Store::open(dir.path()).expect("reopen");
        let a = agent(&store, "researcher").expect("read").expect("there");
        assert_eq!(a.spec, spec("researcher"));
        assert_eq!(a.creator, "deepseek-1");
        let all = agents(&store).expect("list");
        assert_eq!(
            all.iter().map(|a| a.spec.name.as_str()).collect::<Vec<_>>(),
            ["b", "researcher"]
        );
        assert_eq!(
            all[0].spec.tools,
            Some(vec![Tool::Tabs, Tool::Memory]),
            "defaults stored"
        );
        assert_eq!(agent(&store, "nobody").expect("read"), None);
    }

    #[test]
    fn a_session_goes_on_from_its_last_round_after_a_restart() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cmds = |n: u32| {
            vec![
                RoundCommand {
                    command: format!("to kimi: step {n}"),
                    ok: true,
                    output: "好".into(),
                },
                RoundCommand {
                    command: "echo x".into(),
                    ok: false,
                    output: "exec off".into(),
                },
            ]
        };
        {
            let store = Store::open(dir.path()).expect("open");
            for (id, agent) in [("s1", Some("r1")), ("s2", None)] {
                insert_session(&store, &running(id, agent)).expect("insert");
            }
            assert!(add_round(&store, "s1", 1, &cmds(1), 11).expect("r1"));
            assert!(add_round(&store, "s1", 2, &cmds(2), 12).expect("r2"));
            assert!(
                !add_round(&store, "s1", 2, &cmds(9), 13).expect("again"),
                "a round is journaled once"
            );
            set_session_state(
                &store,
                "s2",
                "ended",
                Some("stopped: 已停止 / stopped by a person"),
                Some(20),
            )
            .expect("end");
        }
        let store = Store::open(dir.path()).expect("reopen");
        let open = open_sessions(&store).expect("open sessions");
        assert_eq!(open.len(), 1);
        assert_eq!((open[0].id.as_str(), open[0].round), ("s1", 2));
        let r = rounds(&store, "s1").expect("rounds");
        assert_eq!(r.iter().map(|(n, _)| *n).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(r[1].1, cmds(2));
        let s2 = session(&store, "s2").expect("read").expect("there");
        assert_eq!((s2.state.as_str(), s2.ended_ms), ("ended", Some(20)));
        assert!(s2
            .why
            .as_deref()
            .is_some_and(|w| w.contains("stopped by a person")));
        assert_eq!(sessions_of(&store, "r1").expect("of").len(), 1);
    }

    /// A session of tab `kimi-1` that started running at 10 ms.
    fn running(id: &str, agent: Option<&str>) -> SessionRecord {
        SessionRecord {
            id: id.into(),
            agent: agent.map(str::to_string),
            tab: "kimi-1".into(),
            state: "running".into(),
            round: 0,
            started_ms: 10,
            ended_ms: None,
            why: None,
        }
    }

    #[test]
    fn a_sessions_pending_message_survives_a_reopen_and_clears() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let store = Store::open(dir.path()).expect("open");
            insert_session(&store, &running("s1", None)).expect("insert");
            assert_eq!(pending(&store, "s1").expect("read"), None);
            set_pending(&store, "s1", Some("{\"files\":1}")).expect("write");
        }
        let store = Store::open(dir.path()).expect("reopen");
        assert_eq!(
            pending(&store, "s1").expect("read").as_deref(),
            Some("{\"files\":1}")
        );
        set_pending(&store, "s1", None).expect("clear");
        assert_eq!(pending(&store, "s1").expect("read"), None);
        assert_eq!(pending(&store, "nobody").expect("read"), None);
    }
}
