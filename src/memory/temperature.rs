//! Temperature and ranking arithmetic (pure; the seed's constants).
//!
//! A memory's temperature is `START × DECAY^(turns − heat_ref)`, where `turns` is its scope's
//! turn counter now. Storing `heat_ref` instead of the temperature means a turn of the scope
//! updates one counter, not every memory, and "hottest first" is `ORDER BY heat_ref DESC`.

/// A new memory's temperature.
pub const START: f64 = 100.0;
/// Factor per turn of the scope.
pub const DECAY: f64 = 0.95;
/// Importance when the writer gives none.
pub const DEFAULT_IMPORTANCE: u8 = 5;

/// The temperature of a memory whose reference turn is `heat_ref`, at scope turn `turns`.
pub fn temperature(heat_ref: f64, turns: i64) -> f64 {
    START * DECAY.powf(turns as f64 - heat_ref)
}

/// The reference turn that gives temperature `temp` at scope turn `turns`.
pub fn heat_ref_for(temp: f64, turns: i64) -> f64 {
    let temp = temp.clamp(f64::MIN_POSITIVE, START);
    turns as f64 - (temp / START).ln() / DECAY.ln()
}

/// A search hit moves the temperature halfway back to `START`.
pub fn after_hit(temp: f64) -> f64 {
    temp + (START - temp) / 2.0
}

/// Retrieval rank: relevance (bm25, larger is better) × recency (temperature / 100, 1 when
/// pinned) × importance (1–10, as a tenth).
pub fn rank(relevance: f64, temp: f64, pinned: bool, importance: u8) -> f64 {
    let recency = if pinned {
        1.0
    } else {
        (temp / START).clamp(0.0, 1.0)
    };
    relevance.max(1e-9) * recency * f64::from(importance.clamp(1, 10)) / 10.0
}

/// `85.7`, or `∞` when pinned.
pub fn show(temp: f64, pinned: bool) -> String {
    if pinned {
        "∞".into()
    } else {
        format!("{temp:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn decay_per_turn_and_hits() {
        let r = heat_ref_for(START, 0);
        assert!(close(temperature(r, 0), 100.0));
        assert!(close(temperature(r, 1), 95.0));
        assert!(close(temperature(r, 3), 100.0 * 0.95f64.powi(3)));
        let hot = after_hit(temperature(r, 3));
        assert!(close(hot, (85.7375 + 100.0) / 2.0));
        let r2 = heat_ref_for(hot, 3);
        assert!(close(temperature(r2, 3), hot));
        assert!(close(temperature(r2, 4), hot * 0.95));
        assert_eq!(show(temperature(r2, 4), false), "88.2");
        assert_eq!(show(1.0, true), "∞");
    }

    #[test]
    fn rank_weighs_relevance_recency_importance() {
        let base = rank(2.0, 100.0, false, 5);
        assert!(rank(4.0, 100.0, false, 5) > base);
        assert!(rank(2.0, 50.0, false, 5) < base);
        assert!(rank(2.0, 100.0, false, 10) > base);
        assert!(close(rank(2.0, 1.0, true, 5), base));
    }
}
