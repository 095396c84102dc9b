//! The repair loop: ask the planner, check its answer, send the problems back with their
//! context, up to N rounds; stop early when the problems do not get fewer. Generic over how
//! the planner is asked, so it is tested without a hub.

use std::future::Future;

use super::check::{self, PlanProblem};
use super::prompt;
use crate::flows::Flow;

/// How a planning session ended.
#[derive(Debug)]
pub enum PlanOutcome {
    /// A valid flow after `repairs` repair rounds.
    Valid {
        yaml: String,
        flow: Box<Flow>,
        repairs: usize,
    },
    /// Still invalid: the last problems (with context), after `repairs` rounds, and why the
    /// loop stopped.
    Invalid {
        problems: Vec<String>,
        repairs: usize,
        stopped: Stop,
    },
    /// The planner tab gave no answer.
    NoAnswer(String),
}

/// Why the loop gave up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The repair limit was reached.
    Limit,
    /// A repair left as many problems as before.
    NotShrinking,
}

/// Runs the loop. `ask(prompt, round)` sends a prompt to the planner (round 0 is the plan,
/// then the repairs); `check` validates the extracted YAML.
pub async fn converge<A, F>(
    mut ask: A,
    first_prompt: String,
    check: &(dyn Fn(&str) -> Result<Flow, Vec<PlanProblem>> + Sync),
    max_repairs: usize,
) -> PlanOutcome
where
    A: FnMut(String, usize) -> F,
    F: Future<Output = Result<String, String>>,
{
    let mut prompt = first_prompt;
    let mut before: Option<usize> = None;
    let mut round = 0;
    loop {
        let answer = match ask(prompt, round).await {
            Ok(a) => a,
            Err(e) => return PlanOutcome::NoAnswer(e),
        };
        let (yaml, result) = match check::extract(&answer) {
            Ok(yaml) => {
                let r = check(&yaml);
                (yaml, r)
            }
            Err(p) => (answer.clone(), Err(vec![p])),
        };
        let problems = match result {
            Ok(flow) => {
                return PlanOutcome::Valid {
                    yaml,
                    flow: Box::new(flow),
                    repairs: round,
                }
            }
            Err(p) => p,
        };
        let rendered: Vec<String> = problems.iter().map(|p| p.with_context(&yaml)).collect();
        let stop = if before.is_some_and(|b| problems.len() >= b) {
            Some(Stop::NotShrinking)
        } else if round >= max_repairs {
            Some(Stop::Limit)
        } else {
            None
        };
        if let Some(stopped) = stop {
            return PlanOutcome::Invalid {
                problems: rendered,
                repairs: round,
                stopped,
            };
        }
        before = Some(problems.len());
        round += 1;
        prompt = prompt::repair(&yaml, &rendered, round, max_repairs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    const GOOD: &str = "name: p\nnodes:\n  - id: a\n    to: kimi\n    prompt: hi\n";

    fn check_kimi(text: &str) -> Result<Flow, Vec<PlanProblem>> {
        let names = vec!["kimi".to_string()];
        check::check(text, &|t| t == "kimi", &names)
    }

    /// A planner that answers from a script, recording every prompt.
    async fn run(script: Vec<String>, max: usize) -> (PlanOutcome, Vec<String>) {
        let prompts = Mutex::new(Vec::new());
        let out = converge(
            |p, round| {
                prompts.lock().unwrap().push(p);
                let answer = script.get(round).cloned().unwrap_or_default();
                async move { Ok(format!("```yaml\n{answer}```")) }
            },
            "plan please".into(),
            &check_kimi,
            max,
        )
        .await;
        (out, prompts.into_inner().unwrap())
    }

    #[tokio::test]
    async fn converges_on_the_second_repair() {
        let two_bad = GOOD.replace("to: kimi", "to: [gpt9, gpt10]");
        let one_bad = GOOD.replace("to: kimi", "to: [gpt9, kimi]");
        let (out, prompts) = run(vec![two_bad, one_bad, GOOD.into()], 3).await;
        assert!(
            matches!(out, PlanOutcome::Valid { repairs: 2, .. }),
            "{out:?}"
        );
        assert_eq!(prompts.len(), 3);
        assert!(prompts[1].starts_with("修复 / REPAIR (round 1 of 3)"));
        assert!(
            prompts[1].contains("4:10: E_TARGET_UNKNOWN"),
            "{}",
            prompts[1]
        );
        assert!(prompts[1].contains(">"), "context marker");
        assert!(prompts[2].contains("round 2 of 3"));
    }

    #[tokio::test]
    async fn stops_at_the_limit_and_when_problems_do_not_shrink() {
        // Fewer problems each round, never none: stops after 3 repairs (4 prompts).
        let script: Vec<String> = (0..5)
            .map(|k| {
                let targets: Vec<String> = (0..(5 - k)).map(|i| format!("bad{i}")).collect();
                GOOD.replace("to: kimi", &format!("to: [{}]", targets.join(", ")))
            })
            .collect();
        let (out, prompts) = run(script, 3).await;
        match out {
            PlanOutcome::Invalid {
                problems,
                repairs,
                stopped,
            } => {
                assert_eq!((repairs, stopped, problems.len()), (3, Stop::Limit, 2));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(prompts.len(), 4);
        // The same mistake again: stops after one repair.
        let bad = GOOD.replace("to: kimi", "to: gpt9");
        let (out, prompts) = run(vec![bad.clone(), bad.clone(), bad], 3).await;
        assert!(
            matches!(
                out,
                PlanOutcome::Invalid {
                    repairs: 1,
                    stopped: Stop::NotShrinking,
                    ..
                }
            ),
            "{out:?}"
        );
        assert_eq!(prompts.len(), 2);
        // No repairs allowed: the first answer is final.
        let (out, prompts) = run(vec!["name: [".into()], 0).await;
        assert!(matches!(
            out,
            PlanOutcome::Invalid {
                repairs: 0,
                stopped: Stop::Limit,
                ..
            }
        ));
        assert_eq!(prompts.len(), 1);
    }
}
