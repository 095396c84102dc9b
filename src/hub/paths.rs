//! Which path each answer took (docs/reliability.md): per tab and per site, how many replies came by the
//! network (the adapter parsed the stream), by `dom` (read from the page) or empty (no answer
//! at all). A site whose adapter no longer reads its stream shows it here before anyone
//! complains: more than half of its last answers by page text or empty flags it
//! ("deepseek: 5/5 replies via page text — adapter outdated").

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use serde::Serialize;

use crate::protocol::AnswerSource;

/// How many of a site's latest answers the flag looks at.
pub const RECENT: usize = 10;

/// The path one answer took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerPath {
    Network,
    Dom,
    /// No answer text: an empty `turn_end`, or a `parser_miss` failure.
    Empty,
}

impl From<Option<AnswerSource>> for AnswerPath {
    /// A tab too old to say is taken at its word that it parsed the stream.
    fn from(source: Option<AnswerSource>) -> Self {
        match source {
            Some(AnswerSource::Dom) => AnswerPath::Dom,
            Some(AnswerSource::Network) | None => AnswerPath::Network,
        }
    }
}

/// Answers counted by path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PathCounts {
    pub network: u64,
    pub dom: u64,
    pub empty: u64,
}

impl PathCounts {
    fn add(&mut self, path: AnswerPath) {
        match path {
            AnswerPath::Network => self.network += 1,
            AnswerPath::Dom => self.dom += 1,
            AnswerPath::Empty => self.empty += 1,
        }
    }

    pub fn total(&self) -> u64 {
        self.network + self.dom + self.empty
    }
}

#[derive(Default)]
struct SiteBook {
    counts: PathCounts,
    recent: VecDeque<AnswerPath>,
}

#[derive(Default)]
struct Books {
    tabs: HashMap<String, PathCounts, foldhash::fast::RandomState>,
    sites: HashMap<String, SiteBook, foldhash::fast::RandomState>,
}

/// The hub's answer-path counters.
#[derive(Default)]
pub struct Paths {
    books: Mutex<Books>,
}

impl Paths {
    /// Counts one answer of tab `tab` on `site`.
    pub fn record(&self, tab: &str, site: &str, path: AnswerPath) {
        let site = super::tally::lower(site);
        let mut b = self.books.lock().unwrap_or_else(|e| e.into_inner());
        // Looked up by `&str` first: a key is made only for a tab or site not seen yet.
        match b.tabs.get_mut(tab) {
            Some(counts) => counts.add(path),
            None => b.tabs.entry(tab.to_string()).or_default().add(path),
        }
        if !b.sites.contains_key(site.as_ref()) {
            b.sites
                .insert(site.clone().into_owned(), SiteBook::default());
        }
        let Some(book) = b.sites.get_mut(site.as_ref()) else {
            return;
        };
        book.counts.add(path);
        book.recent.push_back(path);
        while book.recent.len() > RECENT {
            book.recent.pop_front();
        }
    }

    /// One tab's counts since the hub started.
    pub fn tab(&self, tab: &str) -> PathCounts {
        let b = self.books.lock().unwrap_or_else(|e| e.into_inner());
        b.tabs.get(tab).copied().unwrap_or_default()
    }

    /// One site's counts since the hub started.
    pub fn site(&self, site: &str) -> PathCounts {
        let b = self.books.lock().unwrap_or_else(|e| e.into_inner());
        b.sites
            .get(&site.to_lowercase())
            .map(|s| s.counts)
            .unwrap_or_default()
    }

    /// The warning for `site` when more than half of its last `RECENT` answers came by page
    /// text or empty, e.g. "deepseek: 5/5 replies via page text — adapter outdated".
    pub fn flag(&self, site: &str) -> Option<String> {
        let site = site.to_lowercase();
        let b = self.books.lock().unwrap_or_else(|e| e.into_inner());
        let recent = &b.sites.get(&site)?.recent;
        let n = recent.len();
        let dom = recent.iter().filter(|p| **p == AnswerPath::Dom).count();
        let empty = recent.iter().filter(|p| **p == AnswerPath::Empty).count();
        if n == 0 || 2 * (dom + empty) <= n {
            return None;
        }
        let (en, zh) = match (dom, empty) {
            (_, 0) => (
                format!("{dom}/{n} replies via page text"),
                format!("{dom}/{n} 条回复来自页面文本"),
            ),
            (0, _) => (
                format!("{empty}/{n} replies empty"),
                format!("{empty}/{n} 条回复为空"),
            ),
            _ => (
                format!("{dom}/{n} replies via page text, {empty}/{n} empty"),
                format!("{dom}/{n} 条来自页面文本，{empty}/{n} 条为空"),
            ),
        };
        Some(format!(
            "{site}: {en} — adapter outdated / {site}：{zh}，适配器已过时"
        ))
    }

    /// The JSON shown wherever tab health is shown: the tab's counts, its site's, and the flag.
    pub fn json(&self, tab: &str, site: &str) -> serde_json::Value {
        serde_json::json!({
            "tab": self.tab(tab),
            "site": self.site(site),
            "flag": self.flag(site),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_tab_and_site_and_flags_a_mostly_dom_site() {
        let p = Paths::default();
        p.record("a", "DeepSeek", AnswerPath::Network);
        assert_eq!(p.flag("deepseek"), None);
        for _ in 0..5 {
            p.record("b", "deepseek", AnswerPath::Dom);
        }
        assert_eq!(
            p.tab("b"),
            PathCounts {
                network: 0,
                dom: 5,
                empty: 0
            }
        );
        assert_eq!(p.site("deepseek").total(), 6);
        assert_eq!(
            p.flag("deepseek").as_deref(),
            Some("deepseek: 5/6 replies via page text — adapter outdated / deepseek：5/6 条回复来自页面文本，适配器已过时")
        );
        // Half is not more than half: ten answers, five by the network.
        for _ in 0..10 {
            p.record("a", "kimi", AnswerPath::Network);
        }
        for _ in 0..5 {
            p.record("a", "kimi", AnswerPath::Empty);
        }
        assert_eq!(p.flag("kimi"), None);
        p.record("a", "kimi", AnswerPath::Empty);
        assert!(p.flag("kimi").unwrap().contains("6/10 replies empty"));
    }

    #[test]
    fn a_tab_that_does_not_say_counts_as_network() {
        assert_eq!(AnswerPath::from(None), AnswerPath::Network);
        assert_eq!(AnswerPath::from(Some(AnswerSource::Dom)), AnswerPath::Dom);
    }
}
