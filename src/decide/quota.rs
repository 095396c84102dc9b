//! Per-site quotas (docs/commands.md 成本优化): at most N sends to a site per window. The engine
//! counts the prompts each site's tabs accept; a site at its quota is not picked until its
//! oldest send leaves the window (its tabs stand `OverQuota`, with the wait).

use std::collections::{HashMap, VecDeque};
use std::fmt;

/// At most `sends` prompts per `per_ms` milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    pub sends: u32,
    pub per_ms: u64,
}

const MINUTE: u64 = 60_000;
const HOUR: u64 = 60 * MINUTE;
const DAY: u64 = 24 * HOUR;

impl Quota {
    /// `20/hour`, `5/min`, `100/day`, `3/10min` (also `小时`, `分钟`, `天`).
    pub fn parse(text: &str) -> Result<Quota, String> {
        let bad =
            || format!("配额写法 / a quota is N/hour, N/min or N/day (e.g. 20/hour), not `{text}`");
        let (n, per) = text.trim().split_once('/').ok_or_else(bad)?;
        let sends: u32 = n.trim().parse().map_err(|_| bad())?;
        let per = per.trim();
        let digits: String = per.chars().take_while(char::is_ascii_digit).collect();
        let count: u64 = if digits.is_empty() {
            1
        } else {
            digits.parse().map_err(|_| bad())?
        };
        let unit = match per[digits.len()..].trim() {
            "m" | "min" | "mins" | "minute" | "minutes" | "分钟" => MINUTE,
            "h" | "hr" | "hour" | "hours" | "小时" => HOUR,
            "d" | "day" | "days" | "天" => DAY,
            _ => return Err(bad()),
        };
        if sends == 0 || count == 0 {
            return Err(bad());
        }
        Ok(Quota {
            sends,
            per_ms: unit * count,
        })
    }
}

impl fmt::Display for Quota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (n, unit) = [(DAY, "day"), (HOUR, "hour"), (MINUTE, "min")]
            .into_iter()
            .find(|(u, _)| self.per_ms.is_multiple_of(*u))
            .map_or((self.per_ms / MINUTE, "min"), |(u, name)| {
                (self.per_ms / u, name)
            });
        if n == 1 {
            write!(f, "{}/{unit}", self.sends)
        } else {
            write!(f, "{}/{n}{unit}", self.sends)
        }
    }
}

/// One site's quota and its recent sends.
#[derive(Debug, Default)]
struct Site {
    /// Set by a command (kept in the store): wins over a card's.
    set: Option<Quota>,
    /// From a role card.
    card: Option<Quota>,
    /// Times (ms) of the latest sends, oldest first, at most the quota's count kept.
    sends: VecDeque<u64>,
}

impl Site {
    fn quota(&self) -> Option<Quota> {
        self.set.or(self.card)
    }

    fn prune(&mut self, now: u64) {
        if let Some(q) = self.quota() {
            while self
                .sends
                .front()
                .is_some_and(|t| now.saturating_sub(*t) >= q.per_ms)
            {
                self.sends.pop_front();
            }
        }
    }
}

/// What `?<tabs>!` and the dashboard show for a site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Use {
    pub site: String,
    pub quota: Quota,
    /// Sends in the window now.
    pub used: u32,
    /// `command` or `card`.
    pub from: &'static str,
    /// Milliseconds until a send is allowed again (0: now).
    pub wait_ms: u64,
}

/// Every site's quota and use.
#[derive(Debug, Default)]
pub struct Quotas {
    sites: HashMap<String, Site>,
}

impl Quotas {
    /// Sets or clears the quota a command gave `site`.
    pub fn set(&mut self, site: &str, quota: Option<Quota>) {
        self.sites.entry(site.to_lowercase()).or_default().set = quota;
    }

    /// Replaces every quota the role cards give (site → quota).
    pub fn set_cards(&mut self, cards: &HashMap<String, Quota>) {
        for s in self.sites.values_mut() {
            s.card = None;
        }
        for (site, q) in cards {
            self.sites.entry(site.to_lowercase()).or_default().card = Some(*q);
        }
    }

    /// A prompt was typed into a tab of `site`.
    pub fn sent(&mut self, site: &str, now: u64) {
        let Some(s) = self.sites.get_mut(&site.to_lowercase()) else {
            return;
        };
        let Some(q) = s.quota() else { return };
        s.prune(now);
        s.sends.push_back(now);
        while s.sends.len() > q.sends as usize {
            s.sends.pop_front();
        }
    }

    /// Milliseconds until `site` may be sent to again; None when it may now.
    pub fn wait(&mut self, site: &str, now: u64) -> Option<u64> {
        let s = self.sites.get_mut(&site.to_lowercase())?;
        let q = s.quota()?;
        s.prune(now);
        if s.sends.len() < q.sends as usize {
            return None;
        }
        let oldest = *s.sends.front()?;
        Some((oldest + q.per_ms).saturating_sub(now).max(1))
    }

    /// Every site with a quota, by name.
    pub fn uses(&mut self, now: u64) -> Vec<Use> {
        let mut out: Vec<Use> = Vec::new();
        let names: Vec<String> = self.sites.keys().cloned().collect();
        for name in names {
            let wait_ms = self.wait(&name, now).unwrap_or(0);
            let s = &self.sites[&name];
            let Some(quota) = s.quota() else { continue };
            out.push(Use {
                site: name.clone(),
                quota,
                used: s.sends.len() as u32,
                from: if s.set.is_some() { "command" } else { "card" },
                wait_ms,
            });
        }
        out.sort_by(|a, b| a.site.cmp(&b.site));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotas_are_written_as_people_write_them() {
        assert_eq!(
            Quota::parse("20/hour").unwrap(),
            Quota {
                sends: 20,
                per_ms: HOUR
            }
        );
        assert_eq!(Quota::parse(" 5 / min ").unwrap().per_ms, MINUTE);
        assert_eq!(Quota::parse("3/10min").unwrap().per_ms, 10 * MINUTE);
        assert_eq!(Quota::parse("100/天").unwrap().per_ms, DAY);
        assert_eq!(Quota::parse("3/10min").unwrap().to_string(), "3/10min");
        assert_eq!(Quota::parse("20/小时").unwrap().to_string(), "20/hour");
        for bad in ["", "20", "x/hour", "0/hour", "20/fortnight", "20/0min"] {
            assert!(Quota::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_site_at_its_quota_waits_until_its_oldest_send_leaves_the_window() {
        let mut q = Quotas::default();
        q.set("DeepSeek", Some(Quota::parse("2/min").unwrap()));
        q.sent("deepseek", 1_000);
        assert_eq!(q.wait("deepseek", 1_000), None);
        q.sent("deepseek", 5_000);
        assert_eq!(q.wait("deepseek", 6_000), Some(55_000));
        assert_eq!(
            q.wait("deepseek", 61_000),
            None,
            "the first send left the window"
        );
        // Sites without a quota are not counted.
        q.sent("kimi", 1_000);
        assert_eq!(q.wait("kimi", 1_000), None);
        let uses = q.uses(6_000);
        assert_eq!(uses.len(), 1);
        assert_eq!((uses[0].used, uses[0].from), (1, "command"));
    }

    #[test]
    fn a_command_quota_wins_over_a_cards_and_cards_are_replaced_whole() {
        let mut q = Quotas::default();
        let cards: HashMap<String, Quota> =
            [("kimi".to_string(), Quota::parse("1/hour").unwrap())].into();
        q.set_cards(&cards);
        q.sent("kimi", 0);
        assert!(q.wait("kimi", 10).is_some());
        q.set("kimi", Some(Quota::parse("5/hour").unwrap()));
        assert_eq!(q.wait("kimi", 10), None);
        q.set("kimi", None);
        q.set_cards(&HashMap::new());
        assert_eq!(q.wait("kimi", 10), None);
        assert!(q.uses(10).is_empty());
    }
}
