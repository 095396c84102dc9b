//! `manager create NAME from "…"`: the command language's side of turning an inline body
//! into a flow. The translation itself is pure and lives with the flows
//! ([`crate::flows::inline`]); this gives it the [`inline::Grammar`] it needs — whether a
//! step parses, the shell lines it would run, the `$var`s it reads.

use crate::commands::ast::{Command, SetValue};
use crate::commands::parser;
use crate::flows::inline;
use std::collections::BTreeMap;

/// The command language, as the inline translation sees it.
pub struct CommandGrammar;

impl inline::Grammar for CommandGrammar {
    fn parse_error(&self, body: &str) -> Option<String> {
        parser::parse(body).err().map(|e| e.to_string())
    }

    fn shell_lines(&self, body: &str) -> Vec<String> {
        parser::parse(body)
            .map(|c| shell_lines(&c))
            .unwrap_or_default()
    }

    fn reads_var(&self, text: &str, var: &str) -> bool {
        parser::reads_var(text, var)
    }

    fn free_vars(&self, text: &str) -> Vec<String> {
        parser::free_vars(text)
    }

    fn var_ref_at(&self, b: &[u8], i: usize) -> Option<((usize, usize), usize)> {
        crate::exec::var_ref_at(b, i)
    }
}

/// The YAML of the flow an inline body describes, or what is wrong with it, line by line.
/// `may_run` says whether a shell line could run under the hub's exec policy (checked now,
/// so a step it would refuse is refused when the flow is created).
pub fn flow_yaml(
    name: &str,
    body: &str,
    known: &BTreeMap<String, String>,
    auto_retry: Option<u32>,
    may_run: &dyn Fn(&str) -> Result<(), String>,
) -> Result<String, String> {
    inline::flow_yaml(&CommandGrammar, name, body, known, auto_retry, may_run)
}

/// The shell lines a command would run here (a remote `on NODE:` runs under that node's
/// policy and is not checked here).
fn shell_lines(cmd: &Command) -> Vec<String> {
    match cmd {
        Command::Shell { text } => vec![text.clone()],
        Command::Chain(steps) => steps.iter().flat_map(shell_lines).collect(),
        Command::Finally { body, cleanup } => {
            let mut v = shell_lines(body);
            v.extend(shell_lines(cleanup));
            v
        }
        Command::If {
            then, otherwise, ..
        } => {
            let mut v = shell_lines(then);
            if let Some(o) = otherwise {
                v.extend(shell_lines(o));
            }
            v
        }
        Command::For { body, .. } => shell_lines(body),
        Command::From { then: Some(t), .. } => shell_lines(t),
        Command::Set {
            value: SetValue::Capture(c),
            ..
        } => shell_lines(c),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(body: &str) -> Result<Vec<String>, String> {
        inline::inline_steps(&CommandGrammar, body)
    }

    #[test]
    fn inline_steps_keep_else_exit_code_and_finally_with_the_steps_they_belong_to() {
        assert_eq!(
            steps("\npython check.py\n-> if \\$result > \\$threshold then send_alert.py\n-> log_result.py\n"),
            Ok(vec![
                "python check.py".to_string(),
                "if $RESULT > $threshold then python send_alert.py".into(),
                "python log_result.py".into()
            ])
        );
        assert_eq!(
            steps("a.sh -> if $exit_code != 0 then python b.py -> echo c.py"),
            Ok(vec![
                "sh a.sh -> if $exit_code != 0 then python b.py".to_string(),
                "echo c.py".into()
            ]),
            "a script name that is an argument stays one"
        );
        assert_eq!(
            steps("echo 1 -> echo 2 -> finally echo 3"),
            Ok(vec!["echo 1 -> echo 2 -> finally echo 3".to_string()])
        );
        // `${result}` too, and a variable that merely starts with `result` is left alone.
        assert_eq!(
            steps("echo ${result} $results"),
            Ok(vec!["echo $RESULT $results".to_string()])
        );
    }

    #[test]
    fn inline_inputs_are_the_persons_variables_not_what_the_run_sets() {
        let steps = vec![
            "if $RESULT > $threshold then echo $exit_code".to_string(),
            "for i in {1..3} do echo $i $who".into(),
        ];
        let known: BTreeMap<String, String> = [("threshold".to_string(), "5".to_string())].into();
        assert_eq!(
            inline::step_inputs(&CommandGrammar, &steps, &known),
            vec![
                ("threshold".to_string(), Some("5".to_string())),
                ("who".to_string(), None)
            ]
        );
        let yaml = inline::chain_to_yaml(&CommandGrammar, "m", &steps, &known);
        assert!(
            yaml.contains("  threshold: {default: \"5\"}\n  who: {required: true}\n"),
            "{yaml}"
        );
    }
}
