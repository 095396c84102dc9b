//! The team's memory (docs/memory-and-skills.md): a short-term note and long-term memories per scope
//! (`global` or a group), kept in SQLite with FTS5. Memories cool down as their scope takes
//! turns and warm up when found; nothing is deleted except by `memory del`.
//!
//! - [`temperature`]: the pure arithmetic (decay, hits, rank);
//! - [`store`]: the SQL;
//! - [`commands`]: the answers of `remember` / `memory …`, worded for a tab;
//! - [`Memory`]: the handle the hub holds, and the `<memory>` block injected into tasks.

pub mod commands;
pub mod store;
pub mod temperature;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use dashmap::DashMap;
use serde::Deserialize;

pub use store::{Hit, MemoryEntry, NewMemory};

/// The scope used when a command names none.
pub const GLOBAL: &str = "global";
/// How many hits `memory search` returns.
pub const SEARCH_LIMIT: usize = 5;
/// How many of the hottest memories lend their tags to the `<memory>` block.
pub const INJECT_HOTTEST: usize = 20;

/// A role card's `memory:` field: `every N` (or `{every: N, scope: S}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Injection {
    /// Prepend the block to the 1st, (N+1)th, (2N+1)th … task of the tab.
    pub every: u32,
    /// The scope shown; default: `global`, plus the tab's group when it has one.
    pub scope: Option<String>,
}

impl<'de> Deserialize<'de> for Injection {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Number(u32),
            Map {
                every: u32,
                #[serde(default)]
                scope: Option<String>,
            },
        }
        let bad = || {
            serde::de::Error::custom("memory: expected `every N` (N ≥ 1) or {every: N, scope: S}")
        };
        let (every, scope) = match Raw::deserialize(d)? {
            Raw::Text(t) => {
                let n = t.trim().strip_prefix("every").ok_or_else(bad)?;
                (n.trim().parse::<u32>().map_err(|_| bad())?, None)
            }
            Raw::Number(n) => (n, None),
            Raw::Map { every, scope } => (every, scope),
        };
        if every == 0 {
            return Err(bad());
        }
        Ok(Injection { every, scope })
    }
}

/// Why a memory command failed.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error("记忆库错误 / memory store error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("没有这条记忆 / no memory #{0}")]
    NoSuch(i64),
}

pub type MemoryResult<T> = Result<T, MemoryError>;

/// The hub's memory: the store, and how many tasks each tab has had (for `every N`).
pub struct Memory {
    store: crate::store::Store,
    tasks_of_tab: DashMap<String, u64>,
    /// Turns counted since they were last written, per scope. Every reply is a turn, so a
    /// fan-out to 1,000 tabs would otherwise be 1,000 transactions on the socket threads.
    /// They are written before anything reads the store, by [`Memory::flush`] (the app
    /// calls it every second and at shutdown), and kept when a write fails.
    pending_turns: Mutex<HashMap<String, i64>>,
    /// New entries per scope since its last periodic summary, and the scopes now due
    /// (docs/memory-and-skills.md, "Summaries by themselves"); off unless `set_summary_every`.
    summary: Mutex<SummaryCount>,
    /// Wakes the summarizer when a scope is due.
    pub summary_due: tokio::sync::Notify,
}

#[derive(Default)]
struct SummaryCount {
    every: Option<u64>,
    since: HashMap<String, u64>,
    due: Vec<String>,
}

impl Memory {
    pub fn new(store: crate::store::Store) -> Arc<Memory> {
        Arc::new(Memory {
            store,
            tasks_of_tab: DashMap::new(),
            pending_turns: Mutex::new(HashMap::new()),
            summary: Mutex::new(SummaryCount::default()),
            summary_due: tokio::sync::Notify::new(),
        })
    }

    /// Every `n` new entries of a scope (summaries not counted) make it due for a summary.
    pub fn set_summary_every(&self, n: u64) {
        self.summary.lock().unwrap_or_else(|p| p.into_inner()).every = Some(n.max(1));
    }

    /// The scopes due for a summary now (each once).
    pub fn take_due(&self) -> Vec<String> {
        std::mem::take(&mut self.summary.lock().unwrap_or_else(|p| p.into_inner()).due)
    }

    fn counted(&self, m: &NewMemory<'_>) {
        if m.tags.iter().any(|t| t == "summary") {
            return;
        }
        let mut s = self.summary.lock().unwrap_or_else(|p| p.into_inner());
        let Some(every) = s.every else { return };
        let n = s.since.entry(m.scope.to_string()).or_insert(0);
        *n += 1;
        if *n >= every {
            *n = 0;
            let scope = m.scope.to_string();
            if !s.due.contains(&scope) {
                s.due.push(scope);
            }
            drop(s);
            self.summary_due.notify_one();
        }
    }

    /// The newest `n` memories of a scope, newest first.
    pub fn newest(&self, scope: &str, n: usize) -> MemoryResult<Vec<MemoryEntry>> {
        self.conn(|c| store::newest(c, scope, n))
    }

    /// Runs `f` on the store once the turns counted so far are written, so every read sees
    /// them.
    fn conn<T>(
        &self,
        f: impl FnOnce(&mut rusqlite::Connection) -> rusqlite::Result<T>,
    ) -> MemoryResult<T> {
        Ok(self.store.with_conn(|c| {
            self.write_turns(c)?;
            f(c)
        })?)
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<String, i64>> {
        self.pending_turns.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes the counted turns in one transaction; on failure they stay counted.
    fn write_turns(&self, c: &mut rusqlite::Connection) -> rusqlite::Result<()> {
        let turns = std::mem::take(&mut *self.pending());
        if turns.is_empty() {
            return Ok(());
        }
        let rows: Vec<(&str, i64)> = turns.iter().map(|(s, n)| (s.as_str(), *n)).collect();
        let written = store::add_turns(c, &rows);
        if written.is_err() {
            let mut pending = self.pending();
            for (scope, n) in turns {
                *pending.entry(scope).or_insert(0) += n;
            }
        }
        written
    }

    /// A turn of these scopes: each of their memories cools by [`temperature::DECAY`].
    /// Counted in memory and written with the next flush or read.
    pub fn turn(&self, scopes: &[&str]) {
        let mut pending = self.pending();
        for scope in scopes {
            match pending.get_mut(*scope) {
                Some(n) => *n += 1,
                None => {
                    pending.insert(scope.to_string(), 1);
                }
            }
        }
    }

    /// Writes the turns counted since the last write (one transaction; none if there are
    /// none).
    pub fn flush(&self) -> MemoryResult<()> {
        if self.pending().is_empty() {
            return Ok(());
        }
        self.conn(|_| Ok(()))
    }

    pub fn turns(&self, scope: &str) -> MemoryResult<i64> {
        self.conn(|c| store::turns(c, scope))
    }

    pub fn set_note(&self, scope: &str, note: &str) -> MemoryResult<()> {
        self.conn(|c| store::set_note(c, scope, note))
    }

    pub fn note(&self, scope: &str) -> MemoryResult<String> {
        self.conn(|c| store::note(c, scope))
    }

    pub fn add(&self, m: &NewMemory<'_>) -> MemoryResult<i64> {
        let now = crate::store::now_ms();
        let id = self.conn(|c| store::insert(c, m, now))?;
        self.counted(m);
        Ok(id)
    }

    pub fn get(&self, id: i64) -> MemoryResult<MemoryEntry> {
        self.conn(|c| store::get(c, id))?
            .ok_or(MemoryError::NoSuch(id))
    }

    pub fn rewrite(
        &self,
        id: i64,
        text: &str,
        tags: Option<&[String]>,
        importance: Option<u8>,
    ) -> MemoryResult<()> {
        let now = crate::store::now_ms();
        if self.conn(|c| store::rewrite(c, id, text, tags, importance, now))? {
            Ok(())
        } else {
            Err(MemoryError::NoSuch(id))
        }
    }

    pub fn delete(&self, ids: &[i64]) -> MemoryResult<usize> {
        self.conn(|c| store::delete(c, ids))
    }

    pub fn set_pinned(&self, ids: &[i64], pinned: bool) -> MemoryResult<usize> {
        self.conn(|c| store::set_pinned(c, ids, pinned))
    }

    /// How many memories `scope` holds.
    pub fn count(&self, scope: &str) -> MemoryResult<i64> {
        self.conn(|c| store::count(c, scope))
    }

    pub fn hottest(&self, scope: &str, n: usize) -> MemoryResult<Vec<MemoryEntry>> {
        self.conn(|c| store::hottest(c, scope, n))
    }

    pub fn tags(&self, scope: &str) -> MemoryResult<Vec<(String, usize, MemoryEntry)>> {
        self.conn(|c| store::tags(c, scope))
    }

    /// Searches and warms the hits.
    pub fn search(&self, scope: &str, words: &str, limit: usize) -> MemoryResult<Vec<Hit>> {
        self.conn(|c| store::search(c, scope, words, limit))
    }

    /// Counts a task for `tab`; true when this one gets the `<memory>` block (the 1st,
    /// then every `every`th).
    pub fn task_due(&self, tab: &str, every: u32) -> bool {
        let mut n = self.tasks_of_tab.entry(tab.to_string()).or_insert(0);
        let due = (*n).is_multiple_of(u64::from(every.max(1)));
        *n += 1;
        due
    }

    /// The `<memory>` block for these scopes (note + tags of the 20 hottest), or `None`
    /// when there is nothing to show.
    pub fn block(&self, scopes: &[&str]) -> MemoryResult<Option<String>> {
        let mut lines = Vec::new();
        let labelled = scopes.len() > 1;
        for scope in scopes {
            let label = if labelled {
                format!(" ({scope})")
            } else {
                String::new()
            };
            let note = self.note(scope)?;
            if !note.trim().is_empty() {
                lines.push(format!("短期记忆 / note{label}: {}", note.trim()));
            }
            let mut tags: Vec<String> = Vec::new();
            for e in self.hottest(scope, INJECT_HOTTEST)? {
                for t in e.tags {
                    if !tags.contains(&t) {
                        tags.push(t);
                    }
                }
            }
            if !tags.is_empty() {
                lines.push(format!("热门标签 / hot tags{label}: {}", tags.join(", ")));
            }
        }
        if lines.is_empty() {
            return Ok(None);
        }
        lines.push(
            "（用 ?<memory search 关键词>! 查看详情 / look details up with ?<memory search WORDS>!）"
                .into(),
        );
        Ok(Some(format!("<memory>\n{}\n</memory>", lines.join("\n"))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory() -> (tempfile::TempDir, Arc<Memory>) {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::Store::open(dir.path()).unwrap();
        (dir, Memory::new(store))
    }

    fn add(m: &Memory, scope: &str, text: &str, tags: &[&str]) -> i64 {
        let tags: Vec<String> = tags.iter().map(|t| t.to_string()).collect();
        m.add(&NewMemory {
            scope,
            text,
            tags: &tags,
            ..NewMemory::default()
        })
        .unwrap()
    }

    #[test]
    fn injection_field_forms() {
        let card: Injection = serde_json::from_str("\"every 3\"").unwrap();
        assert_eq!(card.every, 3);
        let card: Injection = serde_json::from_str("{\"every\": 2, \"scope\": \"g1\"}").unwrap();
        assert_eq!((card.every, card.scope.as_deref()), (2, Some("g1")));
        assert!(serde_json::from_str::<Injection>("\"every 0\"").is_err());
        assert!(serde_json::from_str::<Injection>("\"sometimes\"").is_err());
    }

    #[test]
    fn turns_cool_hits_warm_pins_hold() {
        let (_d, m) = memory();
        let a = add(&m, GLOBAL, "the deploy key rotates monthly", &["ops"]);
        let b = add(&m, GLOBAL, "用户喜欢简短的回答", &["偏好"]);
        m.set_pinned(&[b], true).unwrap();
        for _ in 0..3 {
            m.turn(&[GLOBAL]);
        }
        let t = m.get(a).unwrap().temperature;
        assert!((t - 85.7375).abs() < 1e-9, "{t}");
        assert_eq!(m.get(b).unwrap().temp(), "∞");
        let hits = m.search(GLOBAL, "deploy", 5).unwrap();
        assert_eq!(hits[0].entry.id, a);
        assert!((m.get(a).unwrap().temperature - 92.86875).abs() < 1e-9);
        m.set_pinned(&[b], false).unwrap();
        assert!((m.get(b).unwrap().temperature - 100.0).abs() < 1e-9);
    }

    #[test]
    fn turns_wait_in_memory_until_a_flush_or_a_read() {
        let (_d, m) = memory();
        let written = |scope: &str| m.store.with_conn(|c| store::turns(c, scope)).unwrap();
        for _ in 0..1000 {
            m.turn(&[GLOBAL, "g1"]);
        }
        assert_eq!(
            (written(GLOBAL), written("g1")),
            (0, 0),
            "nothing written per turn"
        );
        m.flush().unwrap();
        assert_eq!((written(GLOBAL), written("g1")), (1000, 1000));
        m.turn(&[GLOBAL]);
        assert_eq!(
            m.turns(GLOBAL).unwrap(),
            1001,
            "a read sees the counted turns"
        );
        assert_eq!(written(GLOBAL), 1001);
    }

    #[test]
    fn turns_survive_a_failed_write() {
        let (_d, m) = memory();
        m.turn(&[GLOBAL]);
        m.store
            .with_conn(|c| c.execute_batch("DROP TABLE memory_scopes"))
            .unwrap();
        assert!(m.flush().is_err());
        assert_eq!(m.pending().get(GLOBAL), Some(&1), "kept for the next write");
    }

    #[test]
    fn search_ranks_and_finds_chinese_and_short_words() {
        let (_d, m) = memory();
        add(&m, GLOBAL, "登录页面需要支持扫码登录", &["前端"]);
        add(&m, GLOBAL, "AI tabs answer in parallel", &["ai"]);
        add(&m, "g1", "登录 in another scope", &[]);
        let hits = m.search(GLOBAL, "扫码登录", 5).unwrap();
        assert_eq!(hits.len(), 1);
        assert!(hits[0].entry.text.contains("扫码"));
        let hits = m.search(GLOBAL, "AI", 5).unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(m.search("g1", "扫码登录", 5).unwrap().len(), 0);
        assert_eq!(m.search("g1", "登录", 5).unwrap().len(), 1);
    }

    #[test]
    fn block_has_note_and_hot_tags_and_due_counts() {
        let (_d, m) = memory();
        assert_eq!(m.block(&[GLOBAL]).unwrap(), None);
        m.set_note(GLOBAL, "ship on Friday").unwrap();
        add(&m, GLOBAL, "x", &["alpha", "beta"]);
        let b = m.block(&[GLOBAL]).unwrap().unwrap();
        assert!(b.starts_with("<memory>") && b.ends_with("</memory>"));
        assert!(
            b.contains("ship on Friday") && b.contains("alpha, beta"),
            "{b}"
        );
        let due: Vec<bool> = (0..5).map(|_| m.task_due("t1", 2)).collect();
        assert_eq!(due, [true, false, true, false, true]);
    }
}
