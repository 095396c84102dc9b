//! Plan drafts in the store (migration 5): a validated flow for a goal, waiting for the
//! master's `approve`, `modify`, `reject` or `save`. A modified draft stays readable; the plan
//! cache is the newest valid draft for the same goal and the same online catalog.

use rusqlite::{params, OptionalExtension, Row};

use crate::store::{Store, StoreResult};

/// Where a draft stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DraftState {
    /// Waiting for the master.
    Draft,
    /// Approved; its run id is set.
    Approved,
    /// Re-planned with feedback; the new draft names this one as its parent.
    Modified,
    Rejected,
}

impl DraftState {
    pub fn as_str(self) -> &'static str {
        match self {
            DraftState::Draft => "draft",
            DraftState::Approved => "approved",
            DraftState::Modified => "modified",
            DraftState::Rejected => "rejected",
        }
    }

    fn parse(s: &str) -> DraftState {
        match s {
            "approved" => DraftState::Approved,
            "modified" => DraftState::Modified,
            "rejected" => DraftState::Rejected,
            _ => DraftState::Draft,
        }
    }
}

/// One draft as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Draft {
    /// `plan-XXXXXXXX`.
    pub id: String,
    pub goal: String,
    /// The validated flow text.
    pub yaml: String,
    pub state: DraftState,
    /// The draft this one re-plans (`modify`).
    pub parent: Option<String>,
    pub cache_key: String,
    /// The master tab that asked.
    pub master: Option<String>,
    /// The tab that wrote it.
    pub planner: Option<String>,
    /// Repair rounds it took.
    pub repairs: u32,
    pub run_id: Option<String>,
    pub saved_as: Option<String>,
    pub created_ms: i64,
    pub decided_ms: Option<i64>,
}

const COLUMNS: &str = "id, goal, yaml, state, parent, cache_key, master, planner, repairs, \
                       run_id, saved_as, created_ms, decided_ms";

fn from_row(r: &Row<'_>) -> rusqlite::Result<Draft> {
    Ok(Draft {
        id: r.get(0)?,
        goal: r.get(1)?,
        yaml: r.get(2)?,
        state: DraftState::parse(&r.get::<_, String>(3)?),
        parent: r.get(4)?,
        cache_key: r.get(5)?,
        master: r.get(6)?,
        planner: r.get(7)?,
        repairs: r.get(8)?,
        run_id: r.get(9)?,
        saved_as: r.get(10)?,
        created_ms: r.get(11)?,
        decided_ms: r.get(12)?,
    })
}

/// The drafts table.
#[derive(Clone)]
pub struct Drafts {
    store: Store,
}

impl Drafts {
    pub fn new(store: Store) -> Drafts {
        Drafts { store }
    }

    pub fn insert(&self, d: &Draft) -> StoreResult<()> {
        self.store.read(|c| {
            c.execute(
                &format!("INSERT INTO plan_drafts ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"),
                params![
                    d.id,
                    d.goal,
                    d.yaml,
                    d.state.as_str(),
                    d.parent,
                    d.cache_key,
                    d.master,
                    d.planner,
                    d.repairs,
                    d.run_id,
                    d.saved_as,
                    d.created_ms,
                    d.decided_ms
                ],
            )
            .map(|_| ())
        })
    }

    pub fn get(&self, id: &str) -> StoreResult<Option<Draft>> {
        self.store.read(|c| {
            c.query_row(
                &format!("SELECT {COLUMNS} FROM plan_drafts WHERE id = ?1"),
                [id],
                from_row,
            )
            .optional()
        })
    }

    /// Moves a draft from `draft` to `state`; false if it was no longer a draft (someone
    /// answered it first), so one draft is approved at most once.
    pub fn decide(
        &self,
        id: &str,
        state: DraftState,
        run_id: Option<&str>,
        now_ms: i64,
    ) -> StoreResult<bool> {
        self.store.read(|c| {
            c.execute(
                "UPDATE plan_drafts SET state = ?2, run_id = COALESCE(?3, run_id), decided_ms = ?4
                 WHERE id = ?1 AND state = 'draft'",
                params![id, state.as_str(), run_id, now_ms],
            )
            .map(|n| n == 1)
        })
    }

    /// An approval whose run could not start: the draft waits again.
    pub fn reopen(&self, id: &str) -> StoreResult<()> {
        self.store.read(|c| {
            c.execute(
                "UPDATE plan_drafts SET state = 'draft', decided_ms = NULL WHERE id = ?1",
                [id],
            )
            .map(|_| ())
        })
    }

    /// Records the run an approved draft started.
    pub fn set_run(&self, id: &str, run_id: &str) -> StoreResult<()> {
        self.store.read(|c| {
            c.execute(
                "UPDATE plan_drafts SET run_id = ?2 WHERE id = ?1",
                params![id, run_id],
            )
            .map(|_| ())
        })
    }

    pub fn set_saved(&self, id: &str, name: &str) -> StoreResult<()> {
        self.store.read(|c| {
            c.execute(
                "UPDATE plan_drafts SET saved_as = ?2 WHERE id = ?1",
                params![id, name],
            )
            .map(|_| ())
        })
    }

    /// The newest draft for a cache key that is still valid to offer (not rejected).
    pub fn cached(&self, cache_key: &str) -> StoreResult<Option<Draft>> {
        self.store.read(|c| {
            c.query_row(
                &format!(
                    "SELECT {COLUMNS} FROM plan_drafts WHERE cache_key = ?1 AND state != 'rejected'
                     ORDER BY created_ms DESC, rowid DESC LIMIT 1"
                ),
                [cache_key],
                from_row,
            )
            .optional()
        })
    }

    /// The newest drafts, newest first (`limit` of them).
    pub fn recent(&self, limit: usize) -> StoreResult<Vec<Draft>> {
        self.store.read(|c| {
            let mut st = c.prepare(&format!(
                "SELECT {COLUMNS} FROM plan_drafts ORDER BY created_ms DESC, rowid DESC LIMIT ?1"
            ))?;
            let rows = st.query_map([limit as i64], from_row)?;
            rows.collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draft(id: &str, key: &str, at: i64) -> Draft {
        Draft {
            id: id.into(),
            goal: "g".into(),
            yaml: "name: x\n".into(),
            state: DraftState::Draft,
            parent: None,
            cache_key: key.into(),
            master: Some("m".into()),
            planner: None,
            repairs: 1,
            run_id: None,
            saved_as: None,
            created_ms: at,
            decided_ms: None,
        }
    }

    #[test]
    fn a_draft_is_decided_once_and_cached_until_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let drafts = Drafts::new(Store::open(dir.path()).unwrap());
        drafts.insert(&draft("plan-1", "k", 1)).unwrap();
        drafts.insert(&draft("plan-2", "k", 2)).unwrap();
        assert_eq!(drafts.cached("k").unwrap().unwrap().id, "plan-2");
        assert!(drafts
            .decide("plan-2", DraftState::Approved, Some("r-1"), 5)
            .unwrap());
        assert!(!drafts
            .decide("plan-2", DraftState::Rejected, None, 6)
            .unwrap());
        let d = drafts.get("plan-2").unwrap().unwrap();
        assert_eq!(
            (d.state, d.run_id.as_deref(), d.decided_ms),
            (DraftState::Approved, Some("r-1"), Some(5))
        );
        assert!(drafts
            .decide("plan-1", DraftState::Rejected, None, 7)
            .unwrap());
        assert_eq!(drafts.cached("k").unwrap().unwrap().id, "plan-2");
        assert_eq!(drafts.recent(10).unwrap().len(), 2);
        assert_eq!(drafts.cached("other").unwrap(), None);
    }
}
