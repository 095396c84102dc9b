//! Retry policy resolution (node `retry` → `defaults.retry` → `error_handling` → built-in) and
//! the exponential backoff with jitter, deterministic for a given seed.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::flows::model::{Flow, Node, RetrySpec};

/// Built-in policy when a flow says nothing: one retry after about a second.
pub const DEFAULT_MAX_RETRIES: u32 = 1;
/// Built-in first delay.
pub const DEFAULT_INITIAL_MS: u64 = 1_000;
/// Built-in cap of one delay.
pub const DEFAULT_MAX_DELAY_MS: u64 = 60_000;

/// A node's effective retry policy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Extra attempts after the first.
    pub max_retries: u32,
    /// Delay before the first retry.
    pub initial_ms: u64,
    /// Growth per retry.
    pub factor: f64,
    /// Cap of one delay.
    pub max_delay_ms: u64,
    /// Randomise each delay within [delay/2, delay].
    pub jitter: bool,
}

impl RetryPolicy {
    /// The policy of `node` in `flow`.
    pub fn resolve(flow: &Flow, node: &Node) -> RetryPolicy {
        if let Some(spec) = node.retry.as_ref().or(flow.defaults.retry.as_ref()) {
            return Self::from_spec(spec);
        }
        match &flow.error_handling {
            Some(eh) if eh.max_retries.is_some() || eh.retry_delay.is_some() => RetryPolicy {
                max_retries: eh.max_retries.unwrap_or(DEFAULT_MAX_RETRIES),
                initial_ms: eh.retry_delay.map_or(DEFAULT_INITIAL_MS, |d| d.as_ms()),
                ..Self::default()
            },
            _ => Self::default(),
        }
    }

    fn from_spec(spec: &RetrySpec) -> RetryPolicy {
        let base = Self::default();
        let (initial_ms, factor, max_delay_ms) = match &spec.backoff {
            Some(b) => (
                b.initial.as_ms(),
                b.factor,
                b.max.map_or(base.max_delay_ms, |m| m.as_ms()),
            ),
            None => (base.initial_ms, base.factor, base.max_delay_ms),
        };
        RetryPolicy {
            max_retries: spec.max,
            initial_ms,
            factor,
            max_delay_ms,
            jitter: spec.jitter.unwrap_or(true),
        }
    }

    /// The delay before retry number `retry` (1 for the first retry), jittered with a value
    /// derived from `seed` and `salt` (the same inputs give the same delay).
    pub fn delay_ms(&self, retry: u32, seed: u64, salt: &str) -> u64 {
        let exp = retry.saturating_sub(1).min(64) as i32;
        let raw = (self.initial_ms as f64) * self.factor.max(1.0).powi(exp);
        let capped = raw.min(self.max_delay_ms.max(self.initial_ms) as f64) as u64;
        if !self.jitter || capped < 2 {
            return capped;
        }
        let mut rng = StdRng::seed_from_u64(seed ^ fnv1a(salt.as_bytes()));
        capped / 2 + rng.random_range(0..=capped - capped / 2)
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: DEFAULT_MAX_RETRIES,
            initial_ms: DEFAULT_INITIAL_MS,
            factor: 2.0,
            max_delay_ms: DEFAULT_MAX_DELAY_MS,
            jitter: true,
        }
    }
}

/// FNV-1a, 64 bits: a stable hash (unlike `DefaultHasher`, the same across Rust versions),
/// used for jitter salts and flow hashes.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(text: &str) -> Flow {
        crate::flows::load_str("t.yaml", text).expect("valid")
    }

    #[test]
    fn resolution_prefers_node_then_defaults_then_error_handling() {
        let f = flow(
            "name: t\ndefaults: {retry: {max: 4, backoff: 3s}}\nerror_handling: {max_retries: 9, retry_delay: 50}\nnodes:\n  - id: a\n    prompt: x\n    retry: {max: 2, backoff: {initial: 1s, factor: 3, max: 5s}, jitter: false}\n  - id: b\n    prompt: y\n",
        );
        let a = RetryPolicy::resolve(&f, &f.nodes[0]);
        assert_eq!(
            (a.max_retries, a.initial_ms, a.factor, a.max_delay_ms),
            (2, 1000, 3.0, 5000)
        );
        let b = RetryPolicy::resolve(&f, &f.nodes[1]);
        assert_eq!((b.max_retries, b.initial_ms), (4, 3000));
        let g = flow("name: t\nerror_handling: {max_retries: 3, retry_delay: 250}\nnodes:\n  - id: a\n    prompt: x\n");
        let c = RetryPolicy::resolve(&g, &g.nodes[0]);
        assert_eq!((c.max_retries, c.initial_ms), (3, 250));
        let h = flow("name: t\nnodes:\n  - id: a\n    prompt: x\n");
        assert_eq!(
            RetryPolicy::resolve(&h, &h.nodes[0]),
            RetryPolicy::default()
        );
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let p = RetryPolicy {
            max_retries: 5,
            initial_ms: 1000,
            factor: 2.0,
            max_delay_ms: 5000,
            jitter: false,
        };
        let delays: Vec<u64> = (1..=5).map(|r| p.delay_ms(r, 7, "a/0/1")).collect();
        assert_eq!(delays, vec![1000, 2000, 4000, 5000, 5000]);
    }

    #[test]
    fn jitter_is_bounded_and_deterministic() {
        let p = RetryPolicy {
            jitter: true,
            ..RetryPolicy::default()
        };
        let d1 = p.delay_ms(3, 42, "n/0/3");
        assert_eq!(d1, p.delay_ms(3, 42, "n/0/3"));
        assert!((2000..=4000).contains(&d1), "{d1}");
        let spread: std::collections::HashSet<u64> =
            (0..20).map(|s| p.delay_ms(3, s, "n/0/3")).collect();
        assert!(spread.len() > 1, "jitter should vary with the seed");
    }
}
