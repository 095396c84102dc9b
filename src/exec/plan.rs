//! Deciding what to run: lexing a command line by POSIX quoting rules, refusing shell syntax
//! in allowlist mode, turning `$var`s into quoted words (allowlist) or environment
//! references (on), and checking every pipeline stage against the allowlist.

use super::{ExecError, ExecMode, ExecPolicy, ExecRequest, VAR_ENV_PREFIX};
use std::collections::BTreeMap;

/// What will be spawned: pipeline stages (argv each) plus extra environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Plan {
    /// argv of each pipeline stage.
    pub(super) stages: Vec<Vec<String>>,
    /// Extra environment (the `AICARD_VAR_*` values in `On` mode).
    pub(super) env: Vec<(String, String)>,
}

impl Plan {
    pub(super) fn argvs(&self) -> Vec<Vec<String>> {
        self.stages.clone()
    }
}

/// Decide what to run, or why not.
pub(super) fn plan(policy: &ExecPolicy, req: ExecRequest<'_>) -> Result<Plan, ExecError> {
    if req.command.trim().is_empty() {
        return Err(ExecError::Empty);
    }
    match &policy.mode {
        ExecMode::Off => Err(ExecError::Disabled),
        ExecMode::Allowlist(allowed) => plan_allowlist(allowed, req),
        ExecMode::On => plan_shell(req),
    }
}

/// A piece of the lexed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Seg<'a> {
    /// Shell text, passed on as written.
    Raw(&'a str),
    /// A `$name` / `${name}` reference, and whether it sits inside double quotes.
    Var { name: &'a str, in_double: bool },
    /// A top-level `|` (pipeline separator).
    Pipe,
}

/// Lex a command line by POSIX quoting rules: variable references outside single quotes,
/// top-level pipes, and the first construct allowlist mode refuses (if any).
pub(super) fn lex(cmd: &str) -> (Vec<Seg<'_>>, Option<(&'static str, usize)>) {
    let b = cmd.as_bytes();
    let mut segs = Vec::new();
    let mut forbidden = None;
    let mut forbid = |what, pos| {
        forbidden.get_or_insert((what, pos));
    };
    let (mut raw_start, mut i) = (0, 0);
    let (mut single, mut double) = (false, false);
    while i < b.len() {
        let c = b[i];
        if single {
            single = c != b'\'';
            i += 1;
            continue;
        }
        match c {
            b'\\' => {
                i += 2;
                continue;
            }
            b'\'' if !double => single = true,
            b'"' => double = !double,
            b'`' => forbid("backtick `…`", i),
            b'$' => {
                if let Some(((s, e), next)) = super::var_ref_at(b, i) {
                    segs.push(Seg::Raw(&cmd[raw_start..i]));
                    segs.push(Seg::Var {
                        name: &cmd[s..e],
                        in_double: double,
                    });
                    raw_start = next;
                    i = next;
                    continue;
                }
                if b.get(i + 1) == Some(&b'(') {
                    forbid("command substitution $(…)", i);
                }
            }
            _ if double => {}
            b';' => forbid("`;`", i),
            b'&' if b.get(i + 1) == Some(&b'&') => forbid("`&&`", i),
            b'&' => forbid("`&`", i),
            b'|' if b.get(i + 1) == Some(&b'|') => forbid("`||`", i),
            b'|' => {
                segs.push(Seg::Raw(&cmd[raw_start..i]));
                segs.push(Seg::Pipe);
                raw_start = i + 1;
            }
            b'>' | b'<' => forbid("redirection `<`/`>`", i),
            b'\n' | b'\r' => forbid("newline", i),
            _ => {}
        }
        i += 1;
    }
    segs.push(Seg::Raw(&cmd[raw_start.min(b.len())..]));
    segs.retain(|s| !matches!(s, Seg::Raw("")));
    (segs, forbidden)
}

fn lookup<'v>(vars: &'v BTreeMap<String, String>, name: &str) -> Result<&'v str, ExecError> {
    vars.get(name)
        .map(String::as_str)
        .ok_or_else(|| ExecError::UndefinedVar(name.to_string()))
}

/// Allowlist mode: refuse shell syntax, quote values into the words, split with shlex,
/// check every stage's program.
fn plan_allowlist(allowed: &[String], req: ExecRequest<'_>) -> Result<Plan, ExecError> {
    let (segs, forbidden) = lex(req.command);
    if let Some((what, pos)) = forbidden {
        return Err(ExecError::Forbidden { what, pos });
    }
    let mut stages = Vec::new();
    let mut text = String::new();
    for seg in segs.iter().chain(std::iter::once(&Seg::Pipe)) {
        match seg {
            Seg::Raw(r) => text.push_str(r),
            Seg::Var { name, in_double } => {
                let value = lookup(req.vars, name)?;
                let quoted = shlex::try_quote(value).map_err(|_| ExecError::Nul)?;
                if *in_double {
                    text.push('"');
                    text.push_str(&quoted);
                    text.push('"');
                } else {
                    text.push_str(&quoted);
                }
            }
            Seg::Pipe => {
                let argv = shlex::split(&text).ok_or_else(|| {
                    ExecError::Syntax(
                        "引号不配对或结尾是反斜杠 / unbalanced quotes or a trailing backslash"
                            .into(),
                    )
                })?;
                let program = argv.first().ok_or(ExecError::Empty)?;
                if !allowed.iter().any(|a| a == program) {
                    return Err(ExecError::NotAllowed {
                        program: program.clone(),
                        allowed: if allowed.is_empty() {
                            "(none)".into()
                        } else {
                            allowed.join(", ")
                        },
                    });
                }
                stages.push(argv);
                text.clear();
            }
        }
    }
    Ok(Plan {
        stages,
        env: Vec::new(),
    })
}

/// On mode: `sh -c` with each AIcard variable replaced by a quoted environment reference.
/// Names that are not AIcard variables are left for the shell (its own loop variables etc.).
fn plan_shell(req: ExecRequest<'_>) -> Result<Plan, ExecError> {
    let (segs, _) = lex(req.command);
    let mut script = String::new();
    // (AIcard name, environment key, value)
    let mut mapped: Vec<(&str, String, &str)> = Vec::new();
    for seg in &segs {
        match seg {
            Seg::Raw(r) => script.push_str(r),
            Seg::Pipe => script.push('|'),
            Seg::Var { name, in_double } => {
                let Some(value) = req.vars.get(*name) else {
                    script.push_str(&format!("${{{name}}}"));
                    continue;
                };
                if value.contains('\0') {
                    return Err(ExecError::Nul);
                }
                let key = match mapped.iter().find(|(n, _, _)| n == name) {
                    Some((_, key, _)) => key.clone(),
                    None => {
                        let key = env_name(name, mapped.iter().map(|(_, k, _)| k.as_str()));
                        mapped.push((name, key.clone(), value));
                        key
                    }
                };
                if *in_double {
                    script.push_str(&format!("${{{key}}}"));
                } else {
                    script.push_str(&format!("\"${{{key}}}\""));
                }
            }
        }
    }
    Ok(Plan {
        stages: vec![vec!["sh".into(), "-c".into(), script]],
        env: mapped
            .into_iter()
            .map(|(_, k, v)| (k, v.to_string()))
            .collect(),
    })
}

/// `AICARD_VAR_<name>` with non-alphanumerics as `_`, suffixed to differ from `taken`
/// (`a.b` and `a_b` must not share a variable).
pub(super) fn env_name<'t>(name: &str, taken: impl Iterator<Item = &'t str> + Clone) -> String {
    let sanitised: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let base = format!("{VAR_ENV_PREFIX}{sanitised}");
    let mut key = base.clone();
    let mut k = 1;
    while taken.clone().any(|t| t == key) {
        key = format!("{base}_{k}");
        k += 1;
    }
    key
}
