//! What the decision engine knows about one tab: a sliding window of outcomes, EWMAs of time
//! to first chunk and of seconds per 1,000 characters, its cooldown and whether it is parked.
//! Pure arithmetic over times passed in (milliseconds); no clock, no I/O.

use std::collections::VecDeque;

use crate::protocol::Trouble;

/// Outcomes kept per tab (the window is also cut at [`WINDOW_MS`]).
pub const WINDOW_LEN: usize = 20;
/// Outcomes older than this leave the window (10 min).
pub const WINDOW_MS: u64 = 10 * 60 * 1000;
/// Weight of a new sample in the EWMAs.
pub const EWMA_ALPHA: f64 = 0.3;
/// First cooldown after `rate_limited` (30 s); doubles on each repeat.
pub const COOLDOWN_BASE_MS: u64 = 30_000;
/// Longest cooldown (15 min).
pub const COOLDOWN_MAX_MS: u64 = 15 * 60 * 1000;

/// A task the tab is working on, for its timings.
#[derive(Debug, Clone, Copy)]
struct Started {
    at_ms: u64,
    first_chunk_ms: Option<u64>,
}

/// The measured behaviour of one tab.
#[derive(Debug, Clone, Default)]
pub struct TabStats {
    /// (finished at, succeeded), oldest first.
    window: VecDeque<(u64, bool)>,
    /// EWMA of seconds from `accepted` to the first streamed chunk.
    pub ttft_s: Option<f64>,
    /// EWMA of seconds per 1,000 characters of reply, after the first chunk.
    pub s_per_1k: Option<f64>,
    /// EWMA of a task's whole duration, from `accepted` to the answer (seconds).
    pub task_s: Option<f64>,
    current: Option<Started>,
    /// No task before this time (a cooldown after `rate_limited`).
    pub cooldown_until_ms: u64,
    /// `rate_limited` in a row without a success in between (sets the cooldown's length).
    pub strikes: u32,
    /// Set when a cooldown ended and no outcome came since: the next task is a probe.
    cooled: bool,
    /// `captcha` or `login`: no task until a person acts.
    pub parked: Option<Trouble>,
    /// Tasks this engine gave the tab.
    pub picks: u64,
}

impl TabStats {
    /// The tab accepted a task at `now` (the clock of its timings starts).
    pub fn started(&mut self, now: u64) {
        self.current = Some(Started {
            at_ms: now,
            first_chunk_ms: None,
        });
    }

    /// A chunk of the current task's reply streamed at `now`; the time to it (seconds) when it
    /// is the reply's first.
    pub fn chunk(&mut self, now: u64) -> Option<f64> {
        let s = self.current.as_mut()?;
        if s.first_chunk_ms.is_some() {
            return None;
        }
        s.first_chunk_ms = Some(now);
        let ttft = now.saturating_sub(s.at_ms) as f64 / 1000.0;
        self.ttft_s = Some(ewma(self.ttft_s, ttft));
        Some(ttft)
    }

    /// The current task succeeded with a reply of `chars` characters; how long it took
    /// (seconds from `accepted`) when its start was seen.
    pub fn succeeded(&mut self, chars: usize, now: u64) -> Option<f64> {
        let mut took_s = None;
        if let Some(s) = self.current.take() {
            let took = now.saturating_sub(s.at_ms) as f64 / 1000.0;
            self.task_s = Some(ewma(self.task_s, took));
            took_s = Some(took);
            let first = s.first_chunk_ms.unwrap_or(s.at_ms);
            if s.first_chunk_ms.is_none() {
                self.ttft_s = Some(ewma(
                    self.ttft_s,
                    now.saturating_sub(s.at_ms) as f64 / 1000.0,
                ));
            }
            if chars >= 50 {
                let secs = now.saturating_sub(first) as f64 / 1000.0;
                self.s_per_1k = Some(ewma(self.s_per_1k, secs * 1000.0 / chars as f64));
            }
        }
        self.push(now, true);
        self.strikes = 0;
        self.cooled = false;
        self.cooldown_until_ms = 0;
        took_s
    }

    /// The current task failed; `trouble` says why when the tab could tell.
    pub fn failed(&mut self, trouble: Option<Trouble>, now: u64) {
        self.current = None;
        if matches!(trouble, Some(Trouble::ParserMiss | Trouble::ContentFilter)) {
            // The adapter is outdated, the site answered (docs/reliability.md); or the prompt
            // was filtered, not the tab at fault: neither is held against the tab. The hub's
            // answer paths count a parser miss and flag the adapter.
            self.cooled = false;
            return;
        }
        self.push(now, false);
        self.cooled = false;
        match trouble {
            Some(Trouble::RateLimited) => {
                self.strikes = self.strikes.saturating_add(1);
                self.cooldown_until_ms = now + cooldown_ms(self.strikes);
                self.cooled = true;
            }
            Some(t @ (Trouble::Captcha | Trouble::Login)) => self.parked = Some(t),
            _ => {}
        }
    }

    /// Seconds since the tab accepted the task it works on now (None: no task in flight).
    pub fn running_s(&self, now: u64) -> Option<f64> {
        self.current
            .map(|s| now.saturating_sub(s.at_ms) as f64 / 1000.0)
    }

    /// A person acted in the tab: a parked tab may work again.
    pub fn unpark(&mut self) -> bool {
        self.parked.take().is_some()
    }

    fn push(&mut self, now: u64, ok: bool) {
        self.window.push_back((now, ok));
        while self.window.len() > WINDOW_LEN {
            self.window.pop_front();
        }
    }

    /// (successes, outcomes) in the window at `now`.
    pub fn window(&self, now: u64) -> (u32, u32) {
        let recent = self
            .window
            .iter()
            .filter(|(at, _)| now.saturating_sub(*at) <= WINDOW_MS);
        recent.fold((0, 0), |(s, n), (_, ok)| (s + u32::from(*ok), n + 1))
    }

    /// Success probability: the window's successes under a Beta(1,1) prior.
    pub fn success_p(&self, now: u64) -> f64 {
        let (s, n) = self.window(now);
        (f64::from(s) + 1.0) / (f64::from(n) + 2.0)
    }

    /// Cooling down at `now`: the milliseconds left.
    pub fn cooling(&self, now: u64) -> Option<u64> {
        (now < self.cooldown_until_ms).then(|| self.cooldown_until_ms - now)
    }

    /// A cooldown ended and nothing has been learnt since: the next task is a probe.
    pub fn probe_due(&self, now: u64) -> bool {
        self.cooled && self.cooling(now).is_none()
    }
}

/// The cooldown after the `strikes`-th `rate_limited` in a row: 30 s, 60 s, … ≤ 15 min.
pub fn cooldown_ms(strikes: u32) -> u64 {
    let doublings = strikes.saturating_sub(1).min(16);
    (COOLDOWN_BASE_MS << doublings).min(COOLDOWN_MAX_MS)
}

fn ewma(old: Option<f64>, sample: f64) -> f64 {
    match old {
        Some(o) => o + EWMA_ALPHA * (sample - o),
        None => sample,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cooldown_doubles_up_to_fifteen_minutes() {
        let got: Vec<u64> = (1..=7).map(cooldown_ms).collect();
        assert_eq!(
            got,
            [30_000, 60_000, 120_000, 240_000, 480_000, 900_000, 900_000]
        );
        assert_eq!(cooldown_ms(40), COOLDOWN_MAX_MS);
    }

    #[test]
    fn timings_are_ewmas_and_success_resets_the_strikes() {
        let mut t = TabStats::default();
        t.started(0);
        assert_eq!(t.chunk(2_000), Some(2.0));
        assert_eq!(t.chunk(3_000), None, "only the first chunk is timed");
        assert_eq!(t.succeeded(1_000, 12_000), Some(12.0));
        assert_eq!(t.ttft_s, Some(2.0));
        assert_eq!(t.s_per_1k, Some(10.0));
        t.started(20_000);
        t.chunk(24_000);
        t.succeeded(2_000, 44_000);
        assert!((t.ttft_s.unwrap() - 2.6).abs() < 1e-9);
        assert!((t.s_per_1k.unwrap() - 10.0).abs() < 1e-9);
        // Durations 12 s then 24 s.
        assert!((t.task_s.unwrap() - 15.6).abs() < 1e-9);
        assert_eq!(t.running_s(44_000), None);
        t.failed(Some(Trouble::RateLimited), 50_000);
        t.failed(Some(Trouble::RateLimited), 90_000);
        assert_eq!(t.strikes, 2);
        assert_eq!(t.cooling(90_000), Some(60_000));
        assert!(!t.probe_due(100_000));
        assert!(t.probe_due(150_000));
        t.started(150_000);
        t.succeeded(100, 151_000);
        assert_eq!((t.strikes, t.cooling(151_000)), (0, None));
        assert_eq!(t.window(151_000), (3, 5));
        assert!((t.success_p(151_000) - 4.0 / 7.0).abs() < 1e-9);
        // The window forgets outcomes older than ten minutes.
        assert_eq!(t.window(151_000 + WINDOW_MS + 1), (0, 0));
    }

    #[test]
    fn captcha_and_login_park_until_a_person_acts() {
        let mut t = TabStats::default();
        t.failed(Some(Trouble::Captcha), 1);
        assert_eq!(t.parked, Some(Trouble::Captcha));
        assert!(t.unpark());
        assert!(!t.unpark());
        t.failed(Some(Trouble::Network), 2);
        assert_eq!((t.parked, t.cooling(2)), (None, None));
    }

    #[test]
    fn a_parser_miss_is_not_held_against_the_tab() {
        let mut t = TabStats::default();
        t.started(0);
        t.failed(Some(Trouble::ParserMiss), 1_000);
        assert_eq!(t.window(1_000), (0, 0));
        assert_eq!((t.parked, t.cooling(1_000)), (None, None));
        assert!(t.current.is_none());
        t.failed(Some(Trouble::SiteError), 2_000);
        assert_eq!(t.window(2_000), (0, 1));
    }
}
