//! The decision engine (docs/flows.md): picks the tab for a task among eligible ones, from what it
//! has measured of each — success over a sliding window, EWMA time to first chunk and seconds
//! per 1,000 characters, tasks in flight, cooldowns after `rate_limited`, tabs parked by a
//! captcha or a login page.
//!
//! It knows nothing of the hub: callers pass each candidate's facts ([`Candidate`]) and report
//! what tabs do (`started`, `chunk`, `succeeded`, `failed`, `unpark`) with the time. So it can
//! sit beneath the runner, the command host and the API alike, and be simulated with a virtual
//! clock (`sim_tests`).
//!
//! The choice: a probe to a tab whose cooldown just ended (one at a time), else an idle new
//! tab (fewer than [`EXPLORE_SAMPLES`] outcomes and picks: bounded exploration), else the least
//! `expected completion time / success probability` (docs/flows.md, "Choosing tabs").

pub mod quota;
pub mod stats;

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::Mutex;

use dashmap::DashMap;

use crate::protocol::Trouble;
pub use quota::Quota;
pub use stats::TabStats;

/// A tab is "new" (explored, one task at a time) until it has this many outcomes.
pub const EXPLORE_SAMPLES: u32 = 3;
/// Time to first chunk assumed for a tab not measured yet (seconds).
pub const DEFAULT_TTFT_S: f64 = 5.0;
/// Seconds per 1,000 characters assumed for a tab not measured yet.
pub const DEFAULT_S_PER_1K: f64 = 20.0;
/// Reply length assumed when the caller has no better guess (characters).
pub const DEFAULT_REPLY_CHARS: usize = 1500;
/// The sites the userscript has adapters for (a tab's `hello.site`), plus the simulator's.
/// `auto:SITE` must name one of these or the site of a tab the hub has seen.
/// (`api::models::KNOWN_SITES` lists the same sites for model ids.)
pub const KNOWN_SITES: &[&str] = &[
    "deepseek", "doubao", "yuanbao", "qianwen", "chatgpt", "claude", "gemini", "kimi", "chatglm",
    "yiyan", "xinghuo", "sim",
];
/// Picks remembered for `manager why`.
const REMEMBERED: usize = 512;

/// What the caller knows of a candidate tab now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Client id (the key of the engine's statistics).
    pub id: String,
    /// Display name (label, else `site#short-id`).
    pub label: String,
    pub site: String,
    /// Tasks in flight and waiting in the tab's queue.
    pub in_flight: usize,
    /// The caller would rather not use this tab (it already failed this task).
    pub avoid: bool,
}

/// Where a tab stands for the engine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Standing {
    /// Eligible, scored on its measurements.
    Ready,
    /// Fewer than [`EXPLORE_SAMPLES`] outcomes and idle: explored before the others.
    New,
    /// Its cooldown ended: the next task is a probe.
    Probe,
    /// A probe is in flight: no second task until its outcome.
    Waiting,
    /// Cooling down after `rate_limited`: milliseconds left.
    Cooling(u64),
    /// A captcha or a login page: waits for a person.
    Parked(Trouble),
    /// Its site used its quota (docs/commands.md): milliseconds until a send is allowed again.
    OverQuota(u64),
    /// It already failed this task: another tab is tried first.
    Avoided,
}

impl Standing {
    fn eligible(self) -> bool {
        matches!(self, Standing::Ready | Standing::New | Standing::Probe)
    }

    /// Short bilingual word for tables.
    pub fn word(self) -> String {
        match self {
            Standing::Ready => "可用 / ready".into(),
            Standing::New => "新 / new".into(),
            Standing::Probe => "试探 / probe".into(),
            Standing::Waiting => "等待试探 / probing".into(),
            Standing::Cooling(ms) => format!("冷却 / cooling {}s", ms.div_ceil(1000)),
            Standing::Parked(Trouble::Captcha) => "暂停:人机验证 / parked: captcha".into(),
            Standing::Parked(Trouble::Login) => "暂停:未登录 / parked: login".into(),
            Standing::Parked(t) => format!("暂停 / parked: {}", t.as_str()),
            Standing::Avoided => "已失败 / failed this task".into(),
            Standing::OverQuota(ms) => {
                format!("配额用尽 / over quota {}s", ms.div_ceil(1000))
            }
        }
    }
}

/// One line of a pick's score table (also a tab's health).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub id: String,
    pub label: String,
    pub site: String,
    pub standing: Standing,
    /// Successes and outcomes in the window.
    pub successes: u32,
    pub outcomes: u32,
    /// Success probability (Beta(1,1) prior over the window).
    pub p: f64,
    pub ttft_s: Option<f64>,
    pub s_per_1k: Option<f64>,
    pub in_flight: usize,
    /// Expected seconds until this tab would finish the task.
    pub expected_s: f64,
    /// `expected_s / p`; lower is better.
    pub score: f64,
    pub picked: bool,
}

/// How long a tab's tasks take (the API's wait estimate, docs/api.md "Admission").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    /// Its typical task duration in seconds: the EWMA of its tasks, from `accepted` to the
    /// answer; until one is measured, time to first chunk plus a typical reply at its speed
    /// (the defaults where those are not measured either).
    pub task_s: f64,
    /// Whether `task_s` was measured.
    pub measured: bool,
    /// Seconds since it accepted the task it works on now.
    pub running_s: Option<f64>,
}

/// A pick and why: the chosen tab (if any was eligible) and every candidate's row.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub picked: Option<String>,
    /// Why the pick was made: `probe`, `explore`, `score` or `none eligible`.
    pub reason: &'static str,
    pub rows: Vec<Row>,
}

impl Choice {
    /// The score table, for `?<manager why RUN NODE>!`.
    pub fn table(&self) -> String {
        let mut out = String::from(
            "标签页 / tab           状态 / state           成功 / ok   首字 / ttft  s/1k字   在途 / busy  预计 / expected  得分 / score\n",
        );
        for r in &self.rows {
            let _ = writeln!(
                out,
                "{} {:<20} {:<22} {:>2}/{:<2} {:>4.0}%  {:>7}  {:>7}  {:>5}  {:>9.1}s  {:>10}",
                if r.picked { "▶" } else { " " },
                r.label,
                r.standing.word(),
                r.successes,
                r.outcomes,
                r.p * 100.0,
                secs(r.ttft_s),
                secs(r.s_per_1k),
                r.in_flight,
                r.expected_s,
                if r.standing.eligible() {
                    format!("{:.1}", r.score)
                } else {
                    "—".into()
                },
            );
        }
        let _ = write!(
            out,
            "选择 / pick: {} ({})",
            self.picked
                .as_deref()
                .and_then(|id| self.rows.iter().find(|r| r.id == id))
                .map_or("—", |r| r.label.as_str()),
            self.reason
        );
        out
    }
}

fn secs(v: Option<f64>) -> String {
    v.map_or("—".into(), |s| format!("{s:.1}s"))
}

/// The engine: statistics per tab (sharded: a streamed chunk touches one tab's shard, never
/// a lock every tab shares) and the last picks.
#[derive(Default)]
pub struct Decider {
    tabs: DashMap<String, TabStats, foldhash::fast::RandomState>,
    /// Per-site quotas and their recent sends.
    quotas: Mutex<quota::Quotas>,
    /// `RUN/NODE/ITEM` (or any key the caller picks) → the choice made, newest last.
    why: Mutex<VecDeque<(String, Choice)>>,
}

impl Decider {
    pub fn new() -> Decider {
        Decider::default()
    }

    fn with<T>(&self, tab: &str, f: impl FnOnce(&mut TabStats) -> T) -> T {
        match self.tabs.get_mut(tab) {
            Some(mut t) => f(&mut t),
            None => f(&mut self.tabs.entry(tab.to_string()).or_default()),
        }
    }

    fn stats(&self, tab: &str) -> TabStats {
        self.tabs.get(tab).map(|t| t.clone()).unwrap_or_default()
    }

    /// The tab accepted a task.
    pub fn started(&self, tab: &str, now_ms: u64) {
        self.with(tab, |t| t.started(now_ms));
    }

    fn quotas(&self) -> std::sync::MutexGuard<'_, quota::Quotas> {
        self.quotas.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A prompt was typed into a tab of `site` (counted against its quota).
    pub fn sent(&self, site: &str, now_ms: u64) {
        self.quotas().sent(site, now_ms);
    }

    /// Sets (None: removes) the quota a command gave `site`.
    pub fn set_quota(&self, site: &str, quota: Option<Quota>) {
        self.quotas().set(site, quota);
    }

    /// Replaces the quotas the role cards give (site → quota).
    pub fn set_card_quotas(&self, cards: &std::collections::HashMap<String, Quota>) {
        self.quotas().set_cards(cards);
    }

    /// Milliseconds until `site` may be sent to again under its quota (None: now).
    pub fn quota_wait(&self, site: &str, now_ms: u64) -> Option<u64> {
        self.quotas().wait(site, now_ms)
    }

    /// Every site with a quota: its use now.
    pub fn quota_uses(&self, now_ms: u64) -> Vec<quota::Use> {
        self.quotas().uses(now_ms)
    }

    /// The tab streamed a chunk of its task's reply; the time to it (seconds) when it is the
    /// reply's first.
    pub fn chunk(&self, tab: &str, now_ms: u64) -> Option<f64> {
        self.with(tab, |t| t.chunk(now_ms))
    }

    /// The tab answered its task with `chars` characters; how long the task took (seconds
    /// from `accepted`) when its start was seen.
    pub fn succeeded(&self, tab: &str, chars: usize, now_ms: u64) -> Option<f64> {
        self.with(tab, |t| t.succeeded(chars, now_ms))
    }

    /// The tab's task failed (`trouble`: what the tab could tell).
    pub fn failed(&self, tab: &str, trouble: Option<Trouble>, now_ms: u64) {
        self.with(tab, |t| t.failed(trouble, now_ms));
    }

    /// A person acted in the tab; true when it was parked and no longer is.
    pub fn unpark(&self, tab: &str) -> bool {
        self.tabs.get_mut(tab).is_some_and(|mut t| t.unpark())
    }

    /// How long the tab's tasks take and how far its current one is, at `now_ms`.
    pub fn timing(&self, tab: &str, now_ms: u64) -> Timing {
        let stats = self.stats(tab);
        let estimate = stats.ttft_s.unwrap_or(DEFAULT_TTFT_S)
            + stats.s_per_1k.unwrap_or(DEFAULT_S_PER_1K) * DEFAULT_REPLY_CHARS as f64 / 1000.0;
        Timing {
            task_s: stats.task_s.unwrap_or(estimate),
            measured: stats.task_s.is_some(),
            running_s: stats.running_s(now_ms),
        }
    }

    /// Whether a tab is parked (captcha / login), for the panel and `?<tabs>!`.
    pub fn parked(&self, tab: &str) -> Option<Trouble> {
        self.tabs.get(tab).and_then(|t| t.parked)
    }

    /// A tab's row as it stands now (its health).
    pub fn health(&self, c: &Candidate, now_ms: u64) -> Row {
        let stats = self.stats(&c.id);
        let over = self.quotas().wait(&c.site, now_ms);
        row(c, &stats, DEFAULT_REPLY_CHARS, now_ms, over)
    }

    /// Picks one of `candidates` for a task whose reply is expected to be `chars` long.
    pub fn choose(&self, candidates: &[Candidate], chars: usize, now_ms: u64) -> Choice {
        let mut rows: Vec<(Row, u64)> = candidates
            .iter()
            .map(|c| {
                let stats = self.stats(&c.id);
                let over = self.quotas().wait(&c.site, now_ms);
                (row(c, &stats, chars, now_ms, over), stats.picks)
            })
            .collect();
        // Among probes or new tabs: the least known first (fewest outcomes, then picks).
        let pick_first = |rows: &[(Row, u64)], want: Standing| {
            rows.iter()
                .enumerate()
                .filter(|(_, (r, _))| r.standing == want)
                .min_by_key(|(_, (r, picks))| (r.outcomes, *picks, r.id.clone()))
                .map(|(i, _)| i)
        };
        let (picked, reason) = if let Some(i) = pick_first(&rows, Standing::Probe) {
            (Some(i), "probe")
        } else if let Some(i) = pick_first(&rows, Standing::New) {
            (Some(i), "explore")
        } else {
            let best = rows
                .iter()
                .enumerate()
                .filter(|(_, (r, _))| r.standing.eligible())
                .min_by(|(_, (a, pa)), (_, (b, pb))| {
                    a.score
                        .total_cmp(&b.score)
                        .then(pa.cmp(pb))
                        .then(a.id.cmp(&b.id))
                })
                .map(|(i, _)| i);
            (
                best,
                if best.is_some() {
                    "score"
                } else {
                    "none eligible"
                },
            )
        };
        if let Some(i) = picked {
            rows[i].0.picked = true;
            // A probe in flight makes the tab `Waiting` (by its in-flight count) until its
            // outcome: one probe at a time.
            self.with(&rows[i].0.id, |t| t.picks += 1);
        }
        Choice {
            picked: picked.map(|i| rows[i].0.id.clone()),
            reason,
            rows: rows.into_iter().map(|(r, _)| r).collect(),
        }
    }

    /// Keeps a choice for `manager why` under `key` (e.g. `RUN/NODE`).
    pub fn remember(&self, key: &str, choice: Choice) {
        let mut why = self.why.lock().unwrap_or_else(|p| p.into_inner());
        why.retain(|(k, _)| k != key);
        why.push_back((key.to_string(), choice));
        while why.len() > REMEMBERED {
            why.pop_front();
        }
    }

    /// The choice kept under `key`, or under the newest key starting with `key` + `/`.
    pub fn why(&self, key: &str) -> Option<Choice> {
        let why = self.why.lock().unwrap_or_else(|p| p.into_inner());
        let prefix = format!("{key}/");
        why.iter()
            .rev()
            .find(|(k, _)| k == key || k.starts_with(&prefix))
            .map(|(_, c)| c.clone())
    }
}

fn standing(c: &Candidate, s: &TabStats, now: u64, over_quota: Option<u64>) -> Standing {
    if let Some(t) = s.parked {
        return Standing::Parked(t);
    }
    if let Some(left) = s.cooling(now) {
        return Standing::Cooling(left);
    }
    if let Some(left) = over_quota {
        return Standing::OverQuota(left);
    }
    if c.avoid {
        return Standing::Avoided;
    }
    let (_, n) = s.window(now);
    if s.probe_due(now) {
        // One probe at a time: a second task waits for the first one's outcome.
        return if c.in_flight > 0 {
            Standing::Waiting
        } else {
            Standing::Probe
        };
    }
    // A new tab is explored while idle; a busy one is scored like the others.
    if n < EXPLORE_SAMPLES && s.picks < u64::from(EXPLORE_SAMPLES) && c.in_flight == 0 {
        Standing::New
    } else {
        Standing::Ready
    }
}

fn row(c: &Candidate, s: &TabStats, chars: usize, now: u64, over_quota: Option<u64>) -> Row {
    let (successes, outcomes) = s.window(now);
    let p = s.success_p(now);
    let service = s.ttft_s.unwrap_or(DEFAULT_TTFT_S)
        + chars as f64 / 1000.0 * s.s_per_1k.unwrap_or(DEFAULT_S_PER_1K);
    // Tasks ahead of this one each take about one service time.
    let expected_s = service * (c.in_flight as f64 + 1.0);
    Row {
        id: c.id.clone(),
        label: c.label.clone(),
        site: c.site.clone(),
        standing: standing(c, s, now, over_quota),
        successes,
        outcomes,
        p,
        ttft_s: s.ttft_s,
        s_per_1k: s.s_per_1k,
        in_flight: c.in_flight,
        expected_s,
        score: expected_s / p,
        picked: false,
    }
}

#[cfg(test)]
mod sim_tests;
