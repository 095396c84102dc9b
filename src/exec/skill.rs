//! A program skill's run (docs/memory-and-skills.md): the interpreter and the script as argv,
//! never through a shell, with the skill's parameters as JSON on stdin. Allowed by the exec
//! policy: never under `off`, under `allowlist` only when `--allow skill:NAME` names it, and
//! under `on`. Everything else is [`super::run`]'s: workspace, reduced environment, one group
//! killed whole at the timeout, capped output, one audit line.

use std::collections::BTreeMap;

use super::{run_planned, ExecError, ExecMode, ExecOutput, ExecPlan, ExecPolicy, ExecRequest};

/// Whether the policy lets program skill `skill` run: never under `off`, under `allowlist`
/// when `--allow skill:NAME` names it, always under `on`.
pub fn check_skill(policy: &ExecPolicy, skill: &str) -> Result<(), ExecError> {
    match &policy.mode {
        ExecMode::Off => Err(ExecError::SkillOff {
            skill: skill.to_string(),
        }),
        ExecMode::Allowlist(allowed) if !allowed.iter().any(|a| *a == format!("skill:{skill}")) => {
            Err(ExecError::SkillNotAllowed {
                skill: skill.to_string(),
                allowed: allowed.join(", "),
            })
        }
        _ => Ok(()),
    }
}

/// Runs skill `skill` as `argv` with `env` added and `input` on its stdin, if the policy
/// allows program skills and this one.
pub async fn run_skill(
    policy: &ExecPolicy,
    skill: &str,
    argv: &[String],
    env: &[(String, String)],
    input: Vec<u8>,
    caller: &str,
) -> Result<ExecOutput, ExecError> {
    let shown = format!("skill:{skill} {}", argv.join(" "));
    let no_vars = BTreeMap::new();
    let req = ExecRequest {
        command: &shown,
        vars: &no_vars,
        caller,
    };
    let decided = if argv.is_empty() {
        Err(ExecError::Empty)
    } else if argv
        .iter()
        .chain(env.iter().map(|(_, v)| v))
        .any(|a| a.contains('\0'))
    {
        Err(ExecError::Nul)
    } else {
        check_skill(policy, skill).map(|()| ExecPlan {
            stages: vec![argv.to_vec()],
            env: env.to_vec(),
            verbatim: false,
        })
    };
    run_planned(policy, req, decided, None, Some(input)).await
}
