//! Deciding what to run: lexing a command line by POSIX quoting rules, refusing shell syntax
//! in allowlist mode, turning `$var`s into quoted words (allowlist) or environment
//! references (on: `"${AICARD_VAR_x}"` for `sh`, `!AICARD_VAR_x!` for Windows' `cmd`), and
//! checking every pipeline stage against the allowlist.

use super::{ExecError, ExecMode, ExecPolicy, ExecRequest, VAR_ENV_PREFIX};
use std::collections::BTreeMap;

/// What will be spawned: pipeline stages (argv each) plus extra environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ExecPlan {
    /// argv of each pipeline stage.
    pub(super) stages: Vec<Vec<String>>,
    /// Extra environment (the `AICARD_VAR_*` values in `On` mode).
    pub(super) env: Vec<(String, String)>,
    /// Windows only (`cmd`): `argv[1]` goes on the command line as written, for `cmd`'s own
    /// parsing, instead of being quoted as one argument.
    pub(super) verbatim: bool,
}

impl ExecPlan {
    pub(super) fn argvs(&self) -> Vec<Vec<String>> {
        self.stages.clone()
    }
}

/// Decide what to run, or why not.
pub(super) fn plan(policy: &ExecPolicy, req: ExecRequest<'_>) -> Result<ExecPlan, ExecError> {
    if req.command.trim().is_empty() {
        return Err(ExecError::Empty);
    }
    match &policy.mode {
        ExecMode::Off => Err(ExecError::Disabled),
        ExecMode::Allowlist(allowed) => plan_allowlist(allowed, req),
        ExecMode::On if cfg!(windows) => plan_cmd(req),
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
fn plan_allowlist(allowed: &[String], req: ExecRequest<'_>) -> Result<ExecPlan, ExecError> {
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
    Ok(ExecPlan {
        stages,
        env: Vec::new(),
        verbatim: false,
    })
}

/// On mode: `sh -c` with each AIcard variable replaced by a quoted environment reference.
/// Names that are not AIcard variables are left for the shell (its own loop variables etc.).
fn plan_shell(req: ExecRequest<'_>) -> Result<ExecPlan, ExecError> {
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
    Ok(ExecPlan {
        stages: vec![vec!["sh".into(), "-c".into(), script]],
        env: mapped
            .into_iter()
            .map(|(_, k, v)| (k, v.to_string()))
            .collect(),
        verbatim: false,
    })
}

/// On mode on Windows (docs/windows.md): `cmd /V:ON /D /S /C "script"` with each AIcard
/// variable as `!AICARD_VAR_x!`, which cmd expands after it parsed the line, so a value is
/// never cmd syntax (`%AICARD_VAR_x%` would be: cmd expands `%…%` before parsing). A reference
/// outside double quotes is put in quotes, one argument as `"${…}"` is in sh. cmd knows only
/// `"` and `^`, so the line is read by its rules here. Refused: a variable in a line with a
/// pipe or a `for /f` (cmd runs those commands in a second cmd, which would parse the value),
/// and a line break (cmd runs only the first line; join commands with `&`).
pub(super) fn plan_cmd(req: ExecRequest<'_>) -> Result<ExecPlan, ExecError> {
    let cmd = req.command;
    let b = cmd.as_bytes();
    let mut script = String::new();
    let mut mapped: Vec<(&str, String, &str)> = Vec::new();
    let mut reparsed: Option<(&'static str, usize)> = None;
    let (mut raw_start, mut i, mut quoted) = (0, 0, false);
    while i < b.len() {
        match b[i] {
            b'\r' | b'\n' => {
                return Err(ExecError::CmdRefused {
                    what: "a line break (cmd runs one line; join commands with `&`)",
                    pos: i,
                })
            }
            b'"' => quoted = !quoted,
            b'^' if !quoted => {
                i += 2;
                continue;
            }
            b'|' if !quoted && b.get(i + 1) == Some(&b'|') => {
                i += 2;
                continue;
            }
            b'|' if !quoted => {
                reparsed.get_or_insert(("a variable in a pipeline `|`", i));
            }
            b'$' => {
                let Some(((s, e), next)) = super::var_ref_at(b, i) else {
                    i += 1;
                    continue;
                };
                let name = &cmd[s..e];
                let Some(value) = req.vars.get(name) else {
                    i = next;
                    continue;
                };
                if value.contains('\0') {
                    return Err(ExecError::Nul);
                }
                let key = match mapped.iter().find(|(n, _, _)| *n == name) {
                    Some((_, key, _)) => key.clone(),
                    None => {
                        let key = env_name(name, mapped.iter().map(|(_, k, _)| k.as_str()));
                        mapped.push((name, key.clone(), value));
                        key
                    }
                };
                script.push_str(&cmd[raw_start..i]);
                if quoted {
                    script.push_str(&format!("!{key}!"));
                } else {
                    script.push_str(&format!("\"!{key}!\""));
                }
                raw_start = next;
                i = next;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    script.push_str(&cmd[raw_start..]);
    if let Some(pos) = for_f_at(cmd) {
        reparsed.get_or_insert(("a variable in a `for /f`", pos));
    }
    if let (Some((what, pos)), false) = (reparsed, mapped.is_empty()) {
        return Err(ExecError::CmdRefused { what, pos });
    }
    Ok(ExecPlan {
        stages: vec![vec!["cmd".into(), super::win::cmd_tail(&script)]],
        env: mapped
            .into_iter()
            .map(|(_, k, v)| (k, v.to_string()))
            .collect(),
        verbatim: true,
    })
}

/// Where a `for` followed by `/f` starts (cmd's words: case-insensitive, split at blanks and
/// `(`, `&`, `|`, `@`; all one byte, so a word's offset is the sum of those before it).
fn for_f_at(cmd: &str) -> Option<usize> {
    let words: Vec<(usize, &str)> = cmd
        .split(|c: char| c.is_ascii_whitespace() || matches!(c, '(' | '&' | '|' | '@'))
        .scan(0, |at, w| {
            let start = *at;
            *at += w.len() + 1;
            Some((start, w))
        })
        .filter(|(_, w)| !w.is_empty())
        .collect();
    words.windows(2).find_map(|pair| {
        let ((at, first), (_, second)) = (pair[0], pair[1]);
        let is_f = second.len() >= 2 && second[..2].eq_ignore_ascii_case("/f");
        (first.eq_ignore_ascii_case("for") && is_f).then_some(at)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd_plan(command: &str, vars: &[(&str, &str)]) -> Result<ExecPlan, ExecError> {
        let vars: BTreeMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        plan_cmd(ExecRequest {
            command,
            vars: &vars,
            caller: "test",
        })
    }

    /// The script cmd runs (inside `/S /C "…"`) and the environment it gets.
    fn script(plan: &ExecPlan) -> (&str, Vec<(&str, &str)>) {
        assert!(plan.verbatim);
        assert_eq!(plan.stages.len(), 1);
        assert_eq!(plan.stages[0][0], "cmd");
        let tail = plan.stages[0][1].as_str();
        let script = tail
            .strip_prefix("/V:ON /D /S /C \"")
            .and_then(|s| s.strip_suffix('"'))
            .expect(tail);
        let env = plan
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        (script, env)
    }

    #[test]
    fn cmd_gets_variables_as_delayed_expansion_never_in_the_line() {
        let evil = "a\" & calc & \"%PATH%^!x!";
        let plan = cmd_plan("echo $x", &[("x", evil)]).unwrap();
        let (s, env) = script(&plan);
        assert_eq!(s, r#"echo "!AICARD_VAR_x!""#);
        assert_eq!(env, vec![("AICARD_VAR_x", evil)]);
        // Inside double quotes no extra quotes; `${a.b}` and `$a_b` keep apart.
        let plan = cmd_plan(
            r#"python -c "print('${a.b}')" $a_b"#,
            &[("a.b", "1"), ("a_b", "2")],
        )
        .unwrap();
        let (s, env) = script(&plan);
        assert_eq!(
            s,
            r#"python -c "print('!AICARD_VAR_a_b!')" "!AICARD_VAR_a_b_1!""#
        );
        assert_eq!(
            env,
            vec![("AICARD_VAR_a_b", "1"), ("AICARD_VAR_a_b_1", "2")]
        );
        // A `$name` that is no AIcard variable is left as written, for cmd.
        let plan = cmd_plan("echo $nope %PATH%", &[]).unwrap();
        assert_eq!(script(&plan), ("echo $nope %PATH%", vec![]));
        assert!(matches!(
            cmd_plan("echo $x", &[("x", "a\0b")]),
            Err(ExecError::Nul)
        ));
    }

    #[test]
    fn cmd_refuses_what_a_second_cmd_would_parse() {
        let refused = |c: &str| match cmd_plan(c, &[("x", "v")]) {
            Err(ExecError::CmdRefused { what, pos }) => Some((what, pos)),
            other => {
                assert!(other.is_ok(), "{c}: {other:?}");
                None
            }
        };
        assert_eq!(
            refused("type f | findstr $x"),
            Some(("a variable in a pipeline `|`", 7))
        );
        assert_eq!(
            refused("for /f %a in ('echo $x') do echo %a"),
            Some(("a variable in a `for /f`", 0))
        );
        assert_eq!(
            refused("echo x & FOR  /F \"delims=\" %a in ('ver') do echo $x"),
            Some(("a variable in a `for /f`", 9))
        );
        assert!(refused("echo $x\ndel *").is_some());
        // Not a pipe: `||`, `^|`, `|` in quotes; a pipe with no variable in the line.
        for fine in [
            "dir $x || echo none",
            "echo a^|b $x",
            "echo \"a|b\" $x",
            "for %a in (1 2) do echo $x",
        ] {
            assert_eq!(refused(fine), None, "{fine}");
        }
        assert!(cmd_plan("dir | findstr x", &[("x", "v")]).is_ok());
    }
}
