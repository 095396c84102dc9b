//! What came of the hub's work, counted for `/metrics` (docs/api.md, "Metrics"): every task by
//! its tab's site and its outcome, as its waiter saw it, and every command a tab sent by
//! outcome. Counts only grow; the API's metrics read them on every scrape.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::queue::TaskError;

/// Tasks by (site, outcome) and commands by outcome.
#[derive(Default)]
pub struct Tally {
    /// Site (lower case) → outcome → count. Nested, so that counting looks a site up by
    /// `&str` (no key made per task).
    tasks: Mutex<BTreeMap<String, BTreeMap<&'static str, u64>>>,
    commands_ok: AtomicU64,
    commands_failed: AtomicU64,
}

/// The outcome a task's result is counted under: `completed`, `failed` (the tab said so),
/// `timeout`, `lost` (its tab went away), `refused` (its tab's queue was full) or `cancelled`
/// (whoever waited gave up).
pub fn outcome_of(result: &Result<String, TaskError>) -> &'static str {
    match result {
        Ok(_) => "completed",
        Err(TaskError::TabFailed { .. }) => "failed",
        Err(TaskError::Timeout(_)) => "timeout",
        Err(TaskError::TabLost(_)) => "lost",
        Err(TaskError::QueueFull(_)) => "refused",
        Err(TaskError::Cancelled) => "cancelled",
    }
}

impl Tally {
    /// One task of a tab of `site` ended with `outcome` (see [`outcome_of`]).
    pub fn task(&self, site: &str, outcome: &'static str) {
        let site = lower(site);
        let mut t = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        if !t.contains_key(site.as_ref()) {
            t.insert(site.clone().into_owned(), BTreeMap::new());
        }
        if let Some(outcomes) = t.get_mut(site.as_ref()) {
            *outcomes.entry(outcome).or_default() += 1;
        }
    }

    /// Every (site, outcome) counted so far, with its count.
    pub fn tasks(&self) -> Vec<(String, &'static str, u64)> {
        let t = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        t.iter()
            .flat_map(|(s, o)| o.iter().map(move |(o, n)| (s.clone(), *o, *n)))
            .collect()
    }

    /// One command a tab sent was answered (its `cmd_result`), successfully or not.
    pub fn command(&self, ok: bool) {
        let c = if ok {
            &self.commands_ok
        } else {
            &self.commands_failed
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// (succeeded, failed) commands so far.
    pub fn commands(&self) -> (u64, u64) {
        (
            self.commands_ok.load(Ordering::Relaxed),
            self.commands_failed.load(Ordering::Relaxed),
        )
    }
}

/// `s` in lower case, borrowed when it is already (the usual case: site names).
pub(crate) fn lower(s: &str) -> Cow<'_, str> {
    if s.chars().any(char::is_uppercase) {
        Cow::Owned(s.to_lowercase())
    } else {
        Cow::Borrowed(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_count_by_site_and_outcome_and_commands_by_outcome() {
        let t = Tally::default();
        t.task("DeepSeek", outcome_of(&Ok(String::new())));
        t.task("deepseek", "completed");
        t.task("kimi", outcome_of(&Err(TaskError::Timeout("k".into()))));
        assert_eq!(
            t.tasks(),
            vec![
                ("deepseek".to_string(), "completed", 2),
                ("kimi".to_string(), "timeout", 1)
            ]
        );
        t.command(true);
        t.command(false);
        t.command(false);
        assert_eq!(t.commands(), (1, 2));
    }
}
