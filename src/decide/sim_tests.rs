//! Seeded simulations of the decision engine on a virtual clock: tabs with known speeds and
//! troubles, tasks arriving at random, every pick made by [`Decider::choose`].

use std::collections::VecDeque;

use rand::{Rng, SeedableRng};

use super::*;

/// A simulated tab: how long a task takes, and what goes wrong when.
struct SimTab {
    id: String,
    /// Seconds to first chunk and per 1,000 characters.
    ttft_s: f64,
    s_per_1k: f64,
    /// `now_ms → Some(trouble)` when a task finishing at that time fails.
    trouble: Box<dyn Fn(u64) -> Option<Trouble>>,
    /// (task, first chunk at, ends at) of the task in service; then the queue.
    busy: Option<(usize, u64, u64)>,
    queue: VecDeque<usize>,
}

impl SimTab {
    fn new(id: &str, ttft_s: f64, s_per_1k: f64) -> SimTab {
        SimTab {
            id: id.into(),
            ttft_s,
            s_per_1k,
            trouble: Box::new(|_| None),
            busy: None,
            queue: VecDeque::new(),
        }
    }

    fn in_flight(&self) -> usize {
        self.queue.len() + usize::from(self.busy.is_some())
    }
}

/// One task of a simulation: where it went, how the engine saw the tab, how it ended.
#[derive(Debug, Clone, Default)]
struct Task {
    tab: usize,
    picked_at: u64,
    standing: Option<Standing>,
    ended_at: u64,
    trouble: Option<Trouble>,
}

const CHARS: usize = 1000;

/// Runs `n` tasks arriving every `gap_s` seconds on average (exponential). A task no tab is
/// eligible for waits and is offered again at the next event, like the runner's queue wait.
fn simulate(mut tabs: Vec<SimTab>, n: usize, gap_s: f64, seed: u64) -> (Vec<Task>, Decider) {
    let engine = Decider::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut tasks: Vec<Task> = Vec::new();
    let mut backlog: VecDeque<usize> = VecDeque::new();
    let (mut now, mut next_arrival) = (0u64, 0u64);
    loop {
        let tab_event = tabs
            .iter()
            .filter_map(|t| t.busy.map(|(_, c, e)| if c > now { c } else { e }))
            .min();
        // A waiting task is offered again when a cooldown may have ended: every second.
        let retry = (!backlog.is_empty()).then_some(now + 1000);
        let arrival = (tasks.len() < n).then_some(next_arrival);
        let Some(at) = [arrival, tab_event, retry].into_iter().flatten().min() else {
            break;
        };
        now = at;
        for t in tabs.iter_mut() {
            if let Some((task, chunk, end)) = t.busy {
                if chunk == now {
                    engine.chunk(&t.id, now);
                }
                if end == now {
                    let trouble = (t.trouble)(now);
                    match trouble {
                        None => {
                            engine.succeeded(&t.id, CHARS, now);
                        }
                        Some(tr) => engine.failed(&t.id, Some(tr), now),
                    }
                    tasks[task].ended_at = now;
                    tasks[task].trouble = trouble;
                    t.busy = None;
                }
            }
        }
        if arrival == Some(now) {
            tasks.push(Task::default());
            backlog.push_back(tasks.len() - 1);
            let gap = -gap_s * (1.0 - rng.random::<f64>()).ln();
            next_arrival = now + (gap * 1000.0) as u64 + 1;
        }
        while let Some(&task) = backlog.front() {
            let cands: Vec<Candidate> = tabs
                .iter()
                .map(|t| Candidate {
                    id: t.id.clone(),
                    label: t.id.clone(),
                    site: "sim".into(),
                    in_flight: t.in_flight(),
                    avoid: false,
                })
                .collect();
            let choice = engine.choose(&cands, CHARS, now);
            let Some(id) = &choice.picked else { break };
            backlog.pop_front();
            let i = tabs.iter().position(|t| &t.id == id).expect("picked tab");
            let standing = choice.rows.iter().find(|r| &r.id == id).map(|r| r.standing);
            tasks[task] = Task {
                tab: i,
                picked_at: now,
                standing,
                ..Task::default()
            };
            tabs[i].queue.push_back(task);
        }
        // Idle tabs start their next queued task.
        for t in tabs.iter_mut() {
            if t.busy.is_none() {
                if let Some(task) = t.queue.pop_front() {
                    let jitter = rng.random_range(0.8..1.2);
                    let chunk = now + (t.ttft_s * jitter * 1000.0) as u64 + 1;
                    let end = chunk + (t.s_per_1k * jitter * CHARS as f64) as u64 + 1;
                    engine.started(&t.id, now);
                    t.busy = Some((task, chunk, end));
                }
            }
        }
    }
    assert!(backlog.is_empty(), "every task was placed");
    (tasks, engine)
}

fn of_tab(tasks: &[Task], tab: usize) -> Vec<Task> {
    let mut v: Vec<Task> = tasks.iter().filter(|t| t.tab == tab).cloned().collect();
    v.sort_by_key(|t| t.picked_at);
    v
}

#[test]
fn a_tab_three_times_slower_gets_under_a_fifth_of_the_tasks() {
    for seed in [1, 7, 42] {
        let tabs = vec![
            SimTab::new("fast", 2.0, 8.0),
            SimTab::new("slow", 6.0, 24.0),
        ];
        let (tasks, _) = simulate(tabs, 1000, 14.0, seed);
        assert_eq!(tasks.len(), 1000);
        let slow = of_tab(&tasks, 1).len();
        assert!(
            (slow as f64) < 0.2 * 1000.0,
            "seed {seed}: the slow tab got {slow} of 1000"
        );
        assert!(slow >= EXPLORE_SAMPLES as usize, "it was explored: {slow}");
    }
}

#[test]
fn a_rate_limited_tab_gets_nothing_while_cooling_and_one_probe_after() {
    // `b`'s site limits it for 10 minutes from t = 200 s.
    let limited = 200_000..800_000;
    let mut b = SimTab::new("b", 2.0, 8.0);
    let window = limited.clone();
    b.trouble = Box::new(move |now| window.contains(&now).then_some(Trouble::RateLimited));
    let tabs = vec![SimTab::new("a", 2.0, 8.0), b];
    let (tasks, _) = simulate(tabs, 1000, 6.0, 3);
    let b_tasks = of_tab(&tasks, 1);
    // The cooldowns the contract gives b's outcomes: 30 s after the first rate limit,
    // doubling on repeats, reset by a success.
    let mut ends: Vec<&Task> = b_tasks.iter().collect();
    ends.sort_by_key(|t| t.ended_at);
    let mut strikes = 0u32;
    let mut cooldowns: Vec<(u64, u64)> = Vec::new();
    for t in ends {
        match t.trouble {
            Some(Trouble::RateLimited) => {
                strikes += 1;
                cooldowns.push((t.ended_at, t.ended_at + stats::cooldown_ms(strikes)));
            }
            _ => strikes = 0,
        }
    }
    assert!(
        cooldowns.len() >= 3,
        "b was rate limited repeatedly: {cooldowns:?}"
    );
    assert_eq!(
        cooldowns[1].1 - cooldowns[1].0,
        60_000,
        "the second cooldown doubled"
    );
    for (from, until) in &cooldowns {
        // Nothing while cooling.
        let during: Vec<u64> = b_tasks
            .iter()
            .map(|t| t.picked_at)
            .filter(|at| (*from..*until).contains(at))
            .collect();
        assert!(
            during.is_empty(),
            "b got tasks at {during:?} while cooling {from}..{until}"
        );
        // The first task after it is a probe, and nothing else goes to b while it runs.
        let probe = b_tasks
            .iter()
            .find(|t| t.picked_at >= *until)
            .expect("a probe after the cooldown");
        assert_eq!(probe.standing, Some(Standing::Probe), "{probe:?}");
        let alongside = b_tasks
            .iter()
            .filter(|t| t.picked_at > probe.picked_at && t.picked_at < probe.ended_at)
            .count();
        assert_eq!(alongside, 0, "one probe, alone: {probe:?}");
    }
    // While the site limits b, b gets only the probes, a few in 10 minutes.
    let in_window = b_tasks
        .iter()
        .filter(|t| limited.contains(&t.picked_at))
        .count();
    assert!(
        in_window <= cooldowns.len() + 1,
        "{in_window} tasks, {cooldowns:?}"
    );
    // After the site recovers, a successful probe makes b a normal worker again.
    let after = b_tasks.iter().filter(|t| t.picked_at > 1_000_000).count();
    assert!(after > 10, "b works again after the limit: {after}");
}

#[test]
fn a_parked_tab_gets_nothing_until_a_person_acts() {
    let mut b = SimTab::new("b", 1.0, 4.0);
    b.trouble = Box::new(|now| (now >= 100_000).then_some(Trouble::Captcha));
    let tabs = vec![SimTab::new("a", 2.0, 8.0), b];
    let (tasks, engine) = simulate(tabs, 500, 8.0, 5);
    let b_tasks = of_tab(&tasks, 1);
    let parked_at = b_tasks
        .iter()
        .find(|t| t.trouble == Some(Trouble::Captcha))
        .map(|t| t.ended_at)
        .expect("b met the captcha");
    let after: Vec<u64> = b_tasks
        .iter()
        .map(|t| t.picked_at)
        .filter(|at| *at >= parked_at)
        .collect();
    assert!(after.is_empty(), "a parked tab got tasks at {after:?}");
    assert!(of_tab(&tasks, 0).len() > 400, "a did the rest");
    assert_eq!(engine.parked("b"), Some(Trouble::Captcha));
    let cand = |id: &str| Candidate {
        id: id.into(),
        label: id.into(),
        site: "sim".into(),
        in_flight: 0,
        avoid: false,
    };
    let choice = engine.choose(&[cand("b")], CHARS, 10_000_000);
    assert_eq!(choice.picked, None);
    assert_eq!(choice.reason, "none eligible");
    assert!(
        choice.table().contains("parked: captcha"),
        "{}",
        choice.table()
    );
    assert!(engine.unpark("b"));
    let choice = engine.choose(&[cand("b")], CHARS, 10_000_000);
    assert_eq!(choice.picked.as_deref(), Some("b"));
}

#[test]
fn the_score_is_expected_time_over_success_probability() {
    let engine = Decider::new();
    for (id, ttft, end, ok) in [("x", 1_000, 11_000, true), ("y", 1_000, 11_000, false)] {
        for k in 0..4u64 {
            let base = k * 100_000;
            engine.started(id, base);
            engine.chunk(id, base + ttft);
            if ok {
                engine.succeeded(id, 1000, base + end);
            } else {
                engine.failed(id, Some(Trouble::SiteError), base + end);
            }
        }
    }
    let cands: Vec<Candidate> = ["x", "y"]
        .iter()
        .map(|id| Candidate {
            id: id.to_string(),
            label: id.to_string(),
            site: "sim".into(),
            in_flight: 0,
            avoid: false,
        })
        .collect();
    let c = engine.choose(&cands, 1000, 400_000);
    assert_eq!(c.picked.as_deref(), Some("x"));
    let x = &c.rows[0];
    // 1 s to first chunk + 10 s per 1,000 chars; 4 of 4 → p = 5/6.
    assert!((x.expected_s - 11.0).abs() < 1e-9, "{x:?}");
    assert!((x.p - 5.0 / 6.0).abs() < 1e-9);
    assert!((x.score - 11.0 * 6.0 / 5.0).abs() < 1e-9);
    let y = &c.rows[1];
    assert!((y.p - 1.0 / 6.0).abs() < 1e-9, "{y:?}");
    assert!(c.table().contains("▶ x"), "{}", c.table());
    // A tab that failed this task is tried only when no other is eligible.
    let mut avoid_x = cands.clone();
    avoid_x[0].avoid = true;
    let c2 = engine.choose(&avoid_x, 1000, 400_000);
    assert_eq!(c2.picked.as_deref(), Some("y"));
    assert_eq!(c2.rows[0].standing, Standing::Avoided);
    assert!(c2.table().contains("failed this task"), "{}", c2.table());
    engine.remember("run-1/review/0", c.clone());
    assert_eq!(engine.why("run-1/review"), Some(c));
    assert_eq!(engine.why("run-2"), None);
}
