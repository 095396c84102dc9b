//! The forms that combine commands: `a -> b` (chain), `… -> finally C`,
//! `if … then … else …`,
//! `for X in … do …`, and `from TAB: CMD` (a tab's last answer as `$RESULT`)
//! (docs/commands.md). Permission: none of their own beyond the entry gate ([`Intent::Run`]);
//! `from` checks [`Intent::Dispatch`] for the tab it reads. Help: `chain`, `if`, `for`,
//! `from`.

use crate::commands::ast::{CmpOp, Command, Cond, ForItems, Operand, Target};
use crate::commands::interp::{
    trim_capture, CmdError, Ctx, Frame, Host, Interpreter, Res, EXIT_CODE,
};
use crate::commands::parser;
use std::future::Future;
use std::pin::Pin;

/// The help topics this module answers for (checked against the help table in `verbs`).
#[cfg(test)]
pub(crate) const HELP: &[&str] = &["chain", "if", "for", "from"];

impl<H: Host> Interpreter<H> {
    pub(in crate::commands) async fn from(
        &self,
        ctx: &Ctx<'_>,
        target: &Target,
        then: Option<&Command>,
        frame: &Frame,
    ) -> Res {
        let names = self.resolve(ctx, target, frame)?;
        let [name] = names.as_slice() else {
            return Err(CmdError::Failed(format!(
                "from 只能指定一个标签页 / `from` takes one tab, but {target} matches {}",
                names.join(", ")
            )));
        };
        let answer = self.host.last_reply(name).await?;
        let Some(then) = then else {
            return Ok(answer);
        };
        let mut inner = frame.clone();
        inner.insert("RESULT".into(), answer);
        self.eval(ctx, then, &inner).await
    }

    /// `a -> b -> c`: each step gets the one before's output as `$RESULT` and its exit code
    /// as `$exit_code` (the seed manual's `check.py -> if $exit_code != 0 then alert.py`): a
    /// shell step that exits non-zero stops the chain, unless the next step is an `if` on
    /// `$exit_code`, which then decides.
    pub(in crate::commands) async fn chain(
        &self,
        ctx: &Ctx<'_>,
        steps: &[Command],
        frame: &Frame,
    ) -> Res {
        let mut inner = frame.clone();
        let mut last = String::new();
        for (k, step) in steps.iter().enumerate() {
            let code = match self.eval(ctx, step, &inner).await {
                Ok(out) => {
                    last = out;
                    0
                }
                Err(CmdError::Exit(code, out))
                    if steps.get(k + 1).is_some_and(|n| n.tests_var(EXIT_CODE)) =>
                {
                    last = out;
                    code
                }
                Err(e) => return Err(e),
            };
            inner.insert("RESULT".into(), last.clone());
            inner.insert(EXIT_CODE.into(), code.to_string());
        }
        Ok(last)
    }

    /// `CMD -> finally CLEANUP`: the cleanup runs whether the body succeeded or not; the
    /// result is the body's.
    pub(in crate::commands) async fn finally(
        &self,
        ctx: &Ctx<'_>,
        body: &Command,
        cleanup: &Command,
        frame: &Frame,
    ) -> Res {
        let result = self.eval(ctx, body, frame).await;
        let mut inner = frame.clone();
        if let Ok(out) = &result {
            inner.insert("RESULT".into(), trim_capture(out.clone()));
        }
        match (result, self.eval(ctx, cleanup, &inner).await) {
            (Ok(out), Ok(_)) => Ok(out),
            (Err(e), Ok(_)) => Err(e),
            (Ok(out), Err(e)) => Err(CmdError::Failed(format!(
                "{out}\nfinally 失败 / finally failed: {e}"
            ))),
            (Err(e), Err(c)) => Err(CmdError::Failed(format!(
                "{e}\nfinally 失败 / finally failed: {c}"
            ))),
        }
    }

    pub(in crate::commands) async fn if_(
        &self,
        ctx: &Ctx<'_>,
        cond: &Cond,
        then: &Command,
        otherwise: Option<&Command>,
        frame: &Frame,
    ) -> Res {
        if self.cond(ctx, cond, frame).await? {
            self.eval(ctx, then, frame).await
        } else if let Some(o) = otherwise {
            self.eval(ctx, o, frame).await
        } else {
            Ok("（条件不成立，未执行 / condition false, nothing ran）".into())
        }
    }

    pub(in crate::commands) fn cond<'a>(
        &'a self,
        ctx: &'a Ctx<'a>,
        cond: &'a Cond,
        frame: &'a Frame,
    ) -> Pin<Box<dyn Future<Output = Result<bool, CmdError>> + Send + 'a>> {
        Box::pin(async move {
            match cond {
                Cond::Not(c) => Ok(!self.cond(ctx, c, frame).await?),
                // `if $(grep …) then …`: a command that ran and exited non-zero is false, as
                // in a shell; any other failure (refused, timed out, a tab failed) is an error.
                Cond::Truthy(Operand::Capture(cmd)) => match self.eval(ctx, cmd, frame).await {
                    Ok(out) => Ok(truthy(&trim_capture(out))),
                    Err(CmdError::Exit(..)) => Ok(false),
                    Err(e) => Err(e),
                },
                Cond::Truthy(o) => Ok(truthy(&self.operand(ctx, o, frame).await?)),
                Cond::Compare { left, op, right } => {
                    let l = self.operand(ctx, left, frame).await?;
                    let r = self.operand(ctx, right, frame).await?;
                    Ok(compare(&l, *op, &r))
                }
            }
        })
    }

    async fn operand(&self, ctx: &Ctx<'_>, o: &Operand, frame: &Frame) -> Res {
        match o {
            Operand::Text(t) => self.expand(ctx, t, frame),
            Operand::Capture(cmd) => Ok(trim_capture(self.eval(ctx, cmd, frame).await?)),
        }
    }

    pub(in crate::commands) async fn for_(
        &self,
        ctx: &Ctx<'_>,
        var: &str,
        items: &ForItems,
        body: &Command,
        frame: &Frame,
    ) -> Res {
        let values: Vec<String> = match items {
            ForItems::Range { from, to, step } => range(*from, *to, *step),
            ForItems::List(list) => list
                .iter()
                .map(|t| self.expand(ctx, t, frame))
                .collect::<Result<_, _>>()?,
        };
        let mut outputs = Vec::with_capacity(values.len());
        let mut inner = frame.clone();
        for value in values {
            inner.insert(var.to_string(), value);
            outputs.push(self.eval(ctx, body, &inner).await?);
        }
        Ok(outputs.join("\n"))
    }
}

/// True unless empty, `0` or `false` (after trimming).
fn truthy(s: &str) -> bool {
    let s = s.trim();
    !(s.is_empty() || s == "0" || s.eq_ignore_ascii_case("false"))
}

/// Numbers compare numerically when both sides parse; otherwise as trimmed strings.
fn compare(l: &str, op: CmpOp, r: &str) -> bool {
    use std::cmp::Ordering::{Equal, Greater, Less};
    let (l, r) = (l.trim(), r.trim());
    let ord = || match (l.parse::<f64>(), r.parse::<f64>()) {
        (Ok(a), Ok(b)) => a.partial_cmp(&b),
        _ => Some(l.cmp(r)),
    };
    match op {
        CmpOp::Contains => l.contains(r),
        CmpOp::Eq => ord() == Some(Equal),
        CmpOp::Ne => ord() != Some(Equal),
        CmpOp::Lt => ord() == Some(Less),
        CmpOp::Le => matches!(ord(), Some(Less | Equal)),
        CmpOp::Gt => ord() == Some(Greater),
        CmpOp::Ge => matches!(ord(), Some(Greater | Equal)),
    }
}

/// The values of `{from..to..step}`, counting down when from > to (length bounded by the
/// parser; bounded again here).
fn range(from: i64, to: i64, step: i64) -> Vec<String> {
    let (from, to, step) = (i128::from(from), i128::from(to), i128::from(step.max(1)));
    let step = if from <= to { step } else { -step };
    let mut out = Vec::new();
    let mut i = from;
    while out.len() < parser::MAX_LOOP_ITERATIONS as usize
        && (if step > 0 { i <= to } else { i >= to })
    {
        out.push(i.to_string());
        i += step;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparisons() {
        assert!(compare("10", CmpOp::Gt, "9"));
        assert!(compare("abc", CmpOp::Lt, "abd"));
        assert!(compare(" 1.0 ", CmpOp::Eq, "1"));
        assert!(compare("x", CmpOp::Ne, "y"));
        assert!(compare("hello world", CmpOp::Contains, "lo w"));
        assert!(!truthy(" 0 ") && !truthy("FALSE") && !truthy("") && truthy("no"));
        assert_eq!(range(1, 3, 1), vec!["1", "2", "3"]);
        assert_eq!(range(5, 0, 2), vec!["5", "3", "1"]);
        assert_eq!(
            range(i64::MAX - 1, i64::MAX, 5),
            vec![(i64::MAX - 1).to_string()]
        );
    }
}
