//! The memory tables (migration 4 of [`crate::store`]): memories, their FTS5 index (trigram
//! tokenizer, so Chinese text without spaces is searchable) and per-scope turns and notes.

use rusqlite::{params, Connection, OptionalExtension, Row};

use super::temperature::{self, DEFAULT_IMPORTANCE};

/// One memory as stored, with its temperature now.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryEntry {
    pub id: i64,
    pub scope: String,
    pub text: String,
    pub tags: Vec<String>,
    pub importance: u8,
    pub pinned: bool,
    /// The temperature at the scope's current turn.
    pub temperature: f64,
    /// The memories a summary was written from.
    pub sources: Vec<i64>,
}

impl MemoryEntry {
    /// `85.7` or `∞`.
    pub fn temp(&self) -> String {
        temperature::show(self.temperature, self.pinned)
    }
}

/// A search hit and its neighbours (the memories written just before and after it).
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub entry: MemoryEntry,
    pub rank: f64,
    pub before: Vec<MemoryEntry>,
    pub after: Vec<MemoryEntry>,
}

/// What a new memory carries.
#[derive(Debug, Clone, Default)]
pub struct NewMemory<'a> {
    pub scope: &'a str,
    pub text: &'a str,
    pub tags: &'a [String],
    pub pinned: bool,
    pub importance: Option<u8>,
    pub author: Option<&'a str>,
    pub sources: &'a [i64],
}

const COLS: &str = "id, scope, text, tags, importance, pinned, heat_ref, sources";

fn join_ids(ids: &[i64]) -> String {
    ids.iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

fn entry(row: &Row<'_>, turns: i64) -> rusqlite::Result<MemoryEntry> {
    let tags: String = row.get(3)?;
    let sources: String = row.get(7)?;
    let heat_ref: f64 = row.get(6)?;
    Ok(MemoryEntry {
        id: row.get(0)?,
        scope: row.get(1)?,
        text: row.get(2)?,
        tags: tags
            .split(',')
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect(),
        importance: row.get::<_, i64>(4)?.clamp(1, 10) as u8,
        pinned: row.get::<_, i64>(5)? != 0,
        temperature: temperature::temperature(heat_ref, turns),
        sources: sources.split(',').filter_map(|s| s.parse().ok()).collect(),
    })
}

/// The scope's turn counter (0 for a scope never seen).
pub fn turns(conn: &Connection, scope: &str) -> rusqlite::Result<i64> {
    Ok(conn
        .query_row(
            "SELECT turns FROM memory_scopes WHERE scope = ?1",
            params![scope],
            |r| r.get(0),
        )
        .optional()?
        .unwrap_or(0))
}

/// `n` turns of each scope, in one transaction (a fan-out's replies are counted together).
pub fn add_turns(conn: &mut Connection, turns: &[(&str, i64)]) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    {
        let mut add = tx.prepare_cached(
            "INSERT INTO memory_scopes (scope, turns) VALUES (?1, ?2)
             ON CONFLICT(scope) DO UPDATE SET turns = turns + ?2",
        )?;
        for (scope, n) in turns {
            add.execute(params![scope, n])?;
        }
    }
    tx.commit()
}

pub fn set_note(conn: &Connection, scope: &str, note: &str) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO memory_scopes (scope, note) VALUES (?1, ?2)
         ON CONFLICT(scope) DO UPDATE SET note = ?2",
        params![scope, note],
    )?;
    Ok(())
}

pub fn note(conn: &Connection, scope: &str) -> rusqlite::Result<String> {
    Ok(conn
        .query_row(
            "SELECT note FROM memory_scopes WHERE scope = ?1",
            params![scope],
            |r| r.get(0),
        )
        .optional()?
        .unwrap_or_default())
}

pub fn insert(conn: &mut Connection, m: &NewMemory<'_>, now_ms: i64) -> rusqlite::Result<i64> {
    let tx = conn.transaction()?;
    let turns = turns(&tx, m.scope)?;
    let tags = m.tags.join(",");
    tx.execute(
        "INSERT INTO memories (scope, text, tags, importance, pinned, heat_ref, sources, author,
           created_ms, updated_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)",
        params![
            m.scope,
            m.text,
            tags,
            i64::from(m.importance.unwrap_or(DEFAULT_IMPORTANCE)),
            m.pinned as i64,
            turns as f64,
            join_ids(m.sources),
            m.author,
            now_ms
        ],
    )?;
    let id = tx.last_insert_rowid();
    tx.execute(
        "INSERT INTO memories_fts (rowid, text, tags) VALUES (?1, ?2, ?3)",
        params![id, m.text, tags.replace(',', " ")],
    )?;
    tx.commit()?;
    Ok(id)
}

pub fn get(conn: &Connection, id: i64) -> rusqlite::Result<Option<MemoryEntry>> {
    let scope: Option<String> = conn
        .query_row(
            "SELECT scope FROM memories WHERE id = ?1",
            params![id],
            |r| r.get(0),
        )
        .optional()?;
    let Some(scope) = scope else {
        return Ok(None);
    };
    let t = turns(conn, &scope)?;
    conn.query_row(
        &format!("SELECT {COLS} FROM memories WHERE id = ?1"),
        params![id],
        |r| entry(r, t),
    )
    .optional()
}

/// Rewrites a memory's text (and tags / importance when given); true if it exists.
pub fn rewrite(
    conn: &mut Connection,
    id: i64,
    text: &str,
    tags: Option<&[String]>,
    importance: Option<u8>,
    now_ms: i64,
) -> rusqlite::Result<bool> {
    let tx = conn.transaction()?;
    let Some(old) = get(&tx, id)? else {
        return Ok(false);
    };
    let tags = tags.map_or_else(|| old.tags.join(","), |t| t.join(","));
    let importance = importance.unwrap_or(old.importance);
    tx.execute(
        "UPDATE memories SET text = ?2, tags = ?3, importance = ?4, updated_ms = ?5 WHERE id = ?1",
        params![id, text, tags, i64::from(importance), now_ms],
    )?;
    tx.execute("DELETE FROM memories_fts WHERE rowid = ?1", params![id])?;
    tx.execute(
        "INSERT INTO memories_fts (rowid, text, tags) VALUES (?1, ?2, ?3)",
        params![id, text, tags.replace(',', " ")],
    )?;
    tx.commit()?;
    Ok(true)
}

/// Deletes memories; the number deleted.
pub fn delete(conn: &mut Connection, ids: &[i64]) -> rusqlite::Result<usize> {
    let tx = conn.transaction()?;
    let mut n = 0;
    for id in ids {
        n += tx.execute("DELETE FROM memories WHERE id = ?1", params![id])?;
        tx.execute("DELETE FROM memories_fts WHERE rowid = ?1", params![id])?;
    }
    tx.commit()?;
    Ok(n)
}

/// Pins or unpins; an unpinned memory starts again at 100. The number changed.
pub fn set_pinned(conn: &mut Connection, ids: &[i64], pinned: bool) -> rusqlite::Result<usize> {
    let tx = conn.transaction()?;
    let mut n = 0;
    for id in ids {
        let Some(e) = get(&tx, *id)? else { continue };
        let turns = turns(&tx, &e.scope)?;
        n += tx.execute(
            "UPDATE memories SET pinned = ?2, heat_ref = ?3 WHERE id = ?1",
            params![id, pinned as i64, turns as f64],
        )?;
    }
    tx.commit()?;
    Ok(n)
}

/// The newest `n` memories of a scope, newest first.
pub fn newest(conn: &Connection, scope: &str, n: usize) -> rusqlite::Result<Vec<MemoryEntry>> {
    let t = turns(conn, scope)?;
    let mut st = conn.prepare(&format!(
        "SELECT {COLS} FROM memories WHERE scope = ?1 ORDER BY id DESC LIMIT ?2"
    ))?;
    let rows = st.query_map(params![scope, n as i64], |r| entry(r, t))?;
    rows.collect()
}

/// How many memories a scope holds.
pub fn count(conn: &Connection, scope: &str) -> rusqlite::Result<i64> {
    conn.query_row(
        "SELECT COUNT(*) FROM memories WHERE scope = ?1",
        params![scope],
        |r| r.get(0),
    )
}

/// The `n` hottest memories of a scope (pinned first). Reading does not warm them.
pub fn hottest(conn: &Connection, scope: &str, n: usize) -> rusqlite::Result<Vec<MemoryEntry>> {
    let t = turns(conn, scope)?;
    let mut st = conn.prepare(&format!(
        "SELECT {COLS} FROM memories WHERE scope = ?1
         ORDER BY pinned DESC, heat_ref DESC, id DESC LIMIT ?2"
    ))?;
    let rows = st.query_map(params![scope, n as i64], |r| entry(r, t))?;
    rows.collect()
}

/// Every tag of a scope with how many memories carry it and the hottest of them, hottest
/// first.
pub fn tags(conn: &Connection, scope: &str) -> rusqlite::Result<Vec<(String, usize, MemoryEntry)>> {
    let all = hottest(conn, scope, usize::MAX >> 1)?;
    let mut out: Vec<(String, usize, MemoryEntry)> = Vec::new();
    for e in all {
        for t in &e.tags {
            match out.iter_mut().find(|(name, _, _)| name == t) {
                Some(slot) => slot.1 += 1,
                None => out.push((t.clone(), 1, e.clone())),
            }
        }
    }
    Ok(out)
}

fn neighbours(
    conn: &Connection,
    e: &MemoryEntry,
    turns: i64,
) -> rusqlite::Result<(Vec<MemoryEntry>, Vec<MemoryEntry>)> {
    let mut before = conn.prepare(&format!(
        "SELECT {COLS} FROM memories WHERE scope = ?1 AND id < ?2 ORDER BY id DESC LIMIT 2"
    ))?;
    let mut b: Vec<MemoryEntry> = before
        .query_map(params![e.scope, e.id], |r| entry(r, turns))?
        .collect::<Result<_, _>>()?;
    b.reverse();
    let mut after = conn.prepare(&format!(
        "SELECT {COLS} FROM memories WHERE scope = ?1 AND id > ?2 ORDER BY id ASC LIMIT 2"
    ))?;
    let a = after
        .query_map(params![e.scope, e.id], |r| entry(r, turns))?
        .collect::<Result<_, _>>()?;
    Ok((b, a))
}

/// A full-text phrase for FTS5 (quotes doubled).
fn phrase(word: &str) -> String {
    format!("\"{}\"", word.replace('"', "\"\""))
}

/// Searches a scope: words of 3+ characters through FTS5 (bm25), shorter ones by substring,
/// a number also by id. The best `limit` hits by rank, each warmed, with neighbours.
pub fn search(
    conn: &mut Connection,
    scope: &str,
    words: &str,
    limit: usize,
) -> rusqlite::Result<Vec<Hit>> {
    let tx = conn.transaction()?;
    let turns = turns(&tx, scope)?;
    let words: Vec<&str> = words.split_whitespace().collect();
    let mut relevance: std::collections::BTreeMap<i64, f64> = Default::default();
    let long: Vec<String> = words
        .iter()
        .filter(|w| w.chars().count() >= 3)
        .map(|w| phrase(w))
        .collect();
    if !long.is_empty() {
        let mut st = tx.prepare(
            "SELECT m.id, bm25(memories_fts) FROM memories_fts
             JOIN memories m ON m.id = memories_fts.rowid
             WHERE memories_fts MATCH ?1 AND m.scope = ?2",
        )?;
        let rows = st.query_map(params![long.join(" OR "), scope], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, f64>(1)?))
        })?;
        for row in rows {
            let (id, bm25) = row?;
            // SQLite's bm25 is negative, more negative = more relevant.
            *relevance.entry(id).or_default() += (-bm25).max(0.0) + 1e-6;
        }
    }
    for w in words.iter().filter(|w| w.chars().count() < 3) {
        let like = format!(
            "%{}%",
            w.replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_")
        );
        let mut st = tx.prepare(
            "SELECT id FROM memories WHERE scope = ?1
             AND (text LIKE ?2 ESCAPE '\\' OR tags LIKE ?2 ESCAPE '\\')",
        )?;
        for id in st.query_map(params![scope, like], |r| r.get::<_, i64>(0))? {
            *relevance.entry(id?).or_default() += 1.0;
        }
    }
    for w in &words {
        let digits = w.trim_start_matches('#').trim_start_matches('0');
        if let Ok(id) = digits.parse::<i64>() {
            let here: Option<i64> = tx
                .query_row(
                    "SELECT id FROM memories WHERE id = ?1 AND scope = ?2",
                    params![id, scope],
                    |r| r.get(0),
                )
                .optional()?;
            if let Some(id) = here {
                *relevance.entry(id).or_default() += 10.0;
            }
        }
    }
    let mut ranked = Vec::new();
    for (id, rel) in relevance {
        if let Some(e) = get(&tx, id)? {
            let rank = temperature::rank(rel, e.temperature, e.pinned, e.importance);
            ranked.push((e, rank));
        }
    }
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.id.cmp(&b.0.id)));
    ranked.truncate(limit);
    let mut hits = Vec::with_capacity(ranked.len());
    for (mut e, rank) in ranked {
        if !e.pinned {
            let hot = temperature::after_hit(e.temperature);
            tx.execute(
                "UPDATE memories SET heat_ref = ?2 WHERE id = ?1",
                params![e.id, temperature::heat_ref_for(hot, turns)],
            )?;
            e.temperature = hot;
        }
        hits.push((e, rank));
    }
    // Neighbours are read after every hit is warmed, so a hit shown as a neighbour is shown
    // at its new temperature.
    let mut out = Vec::with_capacity(hits.len());
    for (e, rank) in hits {
        let (before, after) = neighbours(&tx, &e, turns)?;
        out.push(Hit {
            entry: e,
            rank,
            before,
            after,
        });
    }
    tx.commit()?;
    Ok(out)
}
