//! Data-driven tests for the parser: every docs/commands.md form, precedence, and error positions.

use super::*;
use crate::commands::ast::Command as C;
use crate::commands::ast::{FlowAction, FlowSource, Job, ManagerCmd, Role, SetValue, Target};

fn t(s: &str) -> Template {
    parse_template(s)
}

fn name(s: &str) -> Target {
    Target::Name(s.into())
}

fn job(target: &str, prompt: &str) -> Job {
    Job {
        target: name(target),
        prompt: t(prompt),
        files: Vec::new(),
    }
}

fn shell(s: &str) -> Command {
    C::Shell { text: s.into() }
}

fn ok(src: &str) -> Command {
    parse(src).unwrap_or_else(|e| panic!("{src:?} failed: {e}"))
}

#[test]
fn shell_and_bare_words() {
    assert_eq!(ok("echo hello"), shell("echo hello"));
    assert_eq!(ok("  ls -la | wc -l  "), shell("ls -la | wc -l"));
    assert_eq!(ok("./help me"), shell("./help me"));
}

#[test]
fn templates() {
    assert_eq!(
        t("a $x ${y} ${node.output} \\$z $ 5$ $(no)").parts,
        vec![
            Part::Lit("a ".into()),
            Part::Var("x".into()),
            Part::Lit(" ".into()),
            Part::Var("y".into()),
            Part::Lit(" ".into()),
            Part::Var("node.output".into()),
            Part::Lit(" $z $ 5$ $(no)".into()),
        ]
    );
    assert_eq!(t("${unclosed").parts, vec![Part::Lit("${unclosed".into())]);
    assert_eq!(
        t("$a.b").parts,
        vec![Part::Var("a".into()), Part::Lit(".b".into())]
    );
    assert!(t("").parts.is_empty());
}

#[test]
fn set_forms() {
    assert_eq!(
        ok("set n = 5"),
        C::Set {
            name: "n".into(),
            global: false,
            value: SetValue::Literal(t("5"))
        }
    );
    assert_eq!(
        ok("set result = $(python analyze.py data.csv)"),
        C::Set {
            name: "result".into(),
            global: false,
            value: SetValue::Capture(Box::new(shell("python analyze.py data.csv")))
        }
    );
    assert_eq!(
        ok("set global greeting=\"hi $who\""),
        C::Set {
            name: "greeting".into(),
            global: true,
            value: SetValue::Literal(t("hi $who"))
        }
    );
    assert_eq!(
        ok("set global = 'x'"),
        C::Set {
            name: "global".into(),
            global: false,
            value: SetValue::Literal(Template::literal("x"))
        }
    );
    assert_eq!(
        ok("set a = $(to deepseek: pick -> to kimi: $RESULT)"),
        C::Set {
            name: "a".into(),
            global: false,
            value: SetValue::Capture(Box::new(C::Chain(vec![
                C::To(job("deepseek", "pick")),
                C::To(job("kimi", "$RESULT")),
            ])))
        }
    );
}

#[test]
fn parallel_forms() {
    assert_eq!(
        ok("parallel to=[deepseek,qianwen] 总结 $doc"),
        C::Parallel {
            jobs: vec![job("deepseek", "总结 $doc"), job("qianwen", "总结 $doc")]
        }
    );
    assert_eq!(
        ok("parallel to=[deepseek: analyze $d, qianwen: summarize, briefly, $d]"),
        C::Parallel {
            jobs: vec![
                job("deepseek", "analyze $d"),
                job("qianwen", "summarize, briefly, $d")
            ]
        }
    );
    assert_eq!(
        ok("parallel to = [ role:worker , \"my tab\" , group:g1 ] hi"),
        C::Parallel {
            jobs: vec![
                Job {
                    target: Target::Role(Role::Worker),
                    prompt: t("hi"),
                    files: Vec::new(),
                },
                job("my tab", "hi"),
                Job {
                    target: Target::Group("g1".into()),
                    prompt: t("hi"),
                    files: Vec::new(),
                },
            ]
        }
    );
}

#[test]
fn to_from_send_to_all() {
    assert_eq!(
        ok("to yuanbao: 写一首诗"),
        C::To(job("yuanbao", "写一首诗"))
    );
    assert_eq!(
        ok("to kimi: \"quoted, with -> arrow\""),
        C::To(job("kimi", "quoted, with -> arrow"))
    );
    assert_eq!(
        ok("from doubao: to kimi: check $RESULT"),
        C::From {
            target: name("doubao"),
            then: Some(Box::new(C::To(job("kimi", "check $RESULT"))))
        }
    );
    assert_eq!(
        ok("from doubao:"),
        C::From {
            target: name("doubao"),
            then: None
        }
    );
    assert_eq!(
        ok("send_to_all 准备好了吗？"),
        C::SendToAll {
            prompt: t("准备好了吗？"),
            files: Vec::new(),
        }
    );
    assert_eq!(
        ok("send_to_all with files=[chart.png, \"年报 2025.pdf\"] 看看这张图"),
        C::SendToAll {
            prompt: t("看看这张图"),
            files: vec!["chart.png".into(), "年报 2025.pdf".into()],
        }
    );
    // `with` that is not `with files=` is the prompt's own text.
    assert_eq!(
        ok("send_to_all with care: hello"),
        C::SendToAll {
            prompt: t("with care: hello"),
            files: Vec::new(),
        }
    );
}

#[test]
fn chains() {
    assert_eq!(
        ok("echo a -> to x: $RESULT -> echo done"),
        C::Chain(vec![
            shell("echo a"),
            C::To(job("x", "$RESULT")),
            shell("echo done")
        ])
    );
    // Quotes, $( ) and nested commands hide the arrow.
    assert_eq!(ok("echo 'a -> b'"), shell("echo 'a -> b'"));
    assert_eq!(ok("echo $(a -> b)"), shell("echo $(a -> b)"));
    assert_eq!(ok("echo ?<a -> b>!"), shell("echo ?<a -> b>!"));
}

#[test]
fn if_precedence_and_dangling_else() {
    let cond = |l: &str, op, r: &str| Cond::Compare {
        left: Operand::Text(t(l)),
        op,
        right: Operand::Text(t(r)),
    };
    assert_eq!(
        ok("if $n > 3 then echo big -> echo more else echo small"),
        C::If {
            cond: cond("$n", CmpOp::Gt, "3"),
            then: Box::new(C::Chain(vec![shell("echo big"), shell("echo more")])),
            otherwise: Some(Box::new(shell("echo small"))),
        }
    );
    assert_eq!(
        ok("echo x -> if $RESULT contains x then echo yes"),
        C::Chain(vec![
            shell("echo x"),
            C::If {
                cond: cond("$RESULT", CmpOp::Contains, "x"),
                then: Box::new(shell("echo yes")),
                otherwise: None,
            }
        ])
    );
    // else pairs with the nearest if
    let C::If {
        then, otherwise, ..
    } = ok("if a then if b then x else y else z")
    else {
        panic!("not an if")
    };
    assert!(matches!(
        *then,
        C::If {
            otherwise: Some(_),
            ..
        }
    ));
    assert_eq!(otherwise, Some(Box::new(shell("z"))));
    assert_eq!(
        ok("if not $(test -f x) then echo missing"),
        C::If {
            cond: Cond::Not(Box::new(Cond::Truthy(Operand::Capture(Box::new(shell(
                "test -f x"
            )))))),
            then: Box::new(shell("echo missing")),
            otherwise: None,
        }
    );
    assert_eq!(
        ok("if \"a b\" == 'a b' then echo eq"),
        C::If {
            cond: Cond::Compare {
                left: Operand::Text(t("a b")),
                op: CmpOp::Eq,
                right: Operand::Text(Template::literal("a b")),
            },
            then: Box::new(shell("echo eq")),
            otherwise: None,
        }
    );
}

#[test]
fn for_loops() {
    assert_eq!(
        ok("for i in {1..5} do echo $i"),
        C::For {
            var: "i".into(),
            items: ForItems::Range {
                from: 1,
                to: 5,
                step: 1
            },
            body: Box::new(shell("echo $i")),
        }
    );
    assert_eq!(
        ok("for t in [deepseek, qianwen] do to $t: hi -> echo $RESULT"),
        C::For {
            var: "t".into(),
            items: ForItems::List(vec![t("deepseek"), t("qianwen")]),
            body: Box::new(C::Chain(vec![
                C::To(job("$t", "hi")),
                shell("echo $RESULT")
            ])),
        }
    );
    assert_eq!(
        ok("for w in a 'b c' $x do echo $w"),
        C::For {
            var: "w".into(),
            items: ForItems::List(vec![t("a"), Template::literal("b c"), t("$x")]),
            body: Box::new(shell("echo $w")),
        }
    );
    assert!(matches!(
        ok("for i in {10..0..5} do echo"),
        C::For {
            items: ForItems::Range {
                from: 10,
                to: 0,
                step: 5
            },
            ..
        }
    ));
}

#[test]
fn manager_forms() {
    let m = |s: &str| match ok(s) {
        C::Manager(m) => m,
        other => panic!("{s}: {other:?}"),
    };
    assert_eq!(
        m("manager create review from \"a -> b\""),
        ManagerCmd::Create {
            name: "review".into(),
            source: FlowSource::Inline("a -> b".into()),
            auto_retry: None,
        }
    );
    assert_eq!(
        m("manager create review from \"a -> b\" auto_retry=3"),
        ManagerCmd::Create {
            name: "review".into(),
            source: FlowSource::Inline("a -> b".into()),
            auto_retry: Some(3),
        }
    );
    // Inside the quotes it is the flow's text, not the option.
    assert_eq!(
        m("manager create r from \"echo auto_retry=2\""),
        ManagerCmd::Create {
            name: "r".into(),
            source: FlowSource::Inline("echo auto_retry=2".into()),
            auto_retry: None,
        }
    );
    assert!(parse("manager create r from \"a\" auto_retry=many").is_err());
    assert!(parse("manager create r from \"a\" auto_retry=99").is_err());
    assert_eq!(
        m("manager create x from file:flows/x.yaml"),
        ManagerCmd::Create {
            name: "x".into(),
            source: FlowSource::File("flows/x.yaml".into()),
            auto_retry: None,
        }
    );
    assert_eq!(
        m("manager run cross-review --from-node synth document=$doc lang=\"zh cn\""),
        ManagerCmd::Run {
            name: "cross-review".into(),
            from_node: Some("synth".into()),
            params: vec![
                ("document".into(), "$doc".into()),
                ("lang".into(), "zh cn".into())
            ],
        }
    );
    assert_eq!(
        m("manager run r --from-node=a"),
        ManagerCmd::Run {
            name: "r".into(),
            from_node: Some("a".into()),
            params: vec![]
        }
    );
    assert_eq!(m("manager pause r"), ManagerCmd::Pause("r".into()));
    assert_eq!(m("manager resume r"), ManagerCmd::Resume("r".into()));
    assert_eq!(m("manager stop r"), ManagerCmd::Stop("r".into()));
    assert_eq!(m("manager status r"), ManagerCmd::Status("r".into()));
    assert_eq!(m("manager show r"), ManagerCmd::Show("r".into()));
    assert_eq!(m("manager delete r"), ManagerCmd::Delete("r".into()));
    assert_eq!(m("manager list"), ManagerCmd::List);
    assert_eq!(
        m("manager export r to file:x.json"),
        ManagerCmd::Export {
            name: "r".into(),
            path: "x.json".into()
        }
    );
}

#[test]
fn planning_forms() {
    let m = |s: &str| match ok(s) {
        C::Manager(m) => m,
        other => panic!("{s}: {other:?}"),
    };
    assert_eq!(
        m("manager plan review my essay, then merge: 两个模型"),
        ManagerCmd::Plan("review my essay, then merge: 两个模型".into())
    );
    assert_eq!(
        m("manager approve plan-1a2b3c4d doc=$d n=\"2 3\""),
        ManagerCmd::Approve {
            id: "plan-1a2b3c4d".into(),
            params: vec![("doc".into(), "$d".into()), ("n".into(), "2 3".into())],
        }
    );
    assert_eq!(
        m("manager modify plan-1a2b3c4d: use kimi for the review"),
        ManagerCmd::Modify {
            id: "plan-1a2b3c4d".into(),
            feedback: "use kimi for the review".into(),
        }
    );
    assert_eq!(
        m("manager modify plan-1a2b3c4d :add a summary"),
        ManagerCmd::Modify {
            id: "plan-1a2b3c4d".into(),
            feedback: "add a summary".into(),
        }
    );
    assert_eq!(
        m("manager reject plan-1"),
        ManagerCmd::Reject("plan-1".into())
    );
    assert_eq!(
        m("manager save plan-1 as my-flow"),
        ManagerCmd::Save {
            id: "plan-1".into(),
            name: "my-flow".into()
        }
    );
    assert_eq!(
        m("manager why run-1 review"),
        ManagerCmd::Why {
            run: "run-1".into(),
            node: "review".into()
        }
    );
    assert_eq!(ok("tabs"), C::Manager(ManagerCmd::Tabs));
    assert!(!ManagerCmd::Tabs.mutates() && !m("manager why a b").mutates());
    assert!(m("manager approve plan-1").mutates() && m("manager plan x").mutates());
}

#[test]
fn flow_role_help() {
    assert_eq!(ok("flow start"), C::Flow(FlowAction::Start));
    assert_eq!(ok("flow pause"), C::Flow(FlowAction::Pause));
    assert_eq!(ok("flow resume"), C::Flow(FlowAction::Resume));
    assert_eq!(ok("flow stop"), C::Flow(FlowAction::Stop));
    assert_eq!(ok("flow status"), C::Flow(FlowAction::Status));
    assert_eq!(
        ok("role foreman group=review"),
        C::Role {
            role: Role::Foreman,
            group: Some("review".into())
        }
    );
    assert_eq!(
        ok("role master"),
        C::Role {
            role: Role::Master,
            group: None
        }
    );
    assert_eq!(ok("help"), C::Help { topic: None });
    assert_eq!(
        ok("help parallel"),
        C::Help {
            topic: Some("parallel".into())
        }
    );
}

/// `parallel to=[a,b]` and a body with one `TARGET: TEXT` line per target: each target gets
/// its line (in the list's order); a plain body still goes whole to every target.
#[test]
fn parallel_with_a_line_per_target() {
    assert_eq!(
        ok("parallel to=[deepseek,qianwen]\ndeepseek: 深度分析技术细节\nqianwen: 总结概述与结论\n"),
        C::Parallel {
            jobs: vec![
                job("deepseek", "深度分析技术细节"),
                job("qianwen", "总结概述与结论")
            ]
        }
    );
    // Lines in another order, blank lines, a site written in capitals, a quoted line.
    assert_eq!(
        ok("parallel to=[deepseek, kimi]\n\n  Kimi: 乙 $d\ndeepseek: \"甲\n续\"\n"),
        C::Parallel {
            jobs: vec![job("deepseek", "甲\n续"), job("kimi", "乙 $d")]
        }
    );
    assert_eq!(
        ok("parallel to=[role:worker, group:g] \nrole:worker: 甲\ngroup:g: 乙"),
        C::Parallel {
            jobs: vec![
                Job {
                    target: Target::Role(Role::Worker),
                    prompt: t("甲"),
                    files: Vec::new(),
                },
                Job {
                    target: Target::Group("g".into()),
                    prompt: t("乙"),
                    files: Vec::new(),
                },
            ]
        }
    );
    // No line names a target of the list: the body is one prompt.
    assert_eq!(
        ok("parallel to=[a,b]\n注意: 简短\nQ: why"),
        C::Parallel {
            jobs: vec![
                job("a", "注意: 简短\nQ: why"),
                job("b", "注意: 简短\nQ: why")
            ]
        }
    );
    for (src, says) in [
        (
            "parallel to=[a,b]\na: 1\nc: 2",
            "line 2 `c: 2` names `c`, which is not in to=[a, b]",
        ),
        (
            "parallel to=[a,b]\na: 1\nmore\nb: 2",
            "line 2 `more` names no target",
        ),
        (
            "parallel to=[a,b]\na: 1\na: 2\nb: 3",
            "names `a` a second time",
        ),
        (
            "parallel to=[a,b]\na: 1",
            "`b` in to=[a, b] has no `b: TEXT` line",
        ),
        ("parallel to=[a,b]\na: 1\nb:", "line 2 has no prompt for b"),
    ] {
        let e = parse(src).expect_err(src);
        assert!(e.message.contains(says), "{src:?}: {}", e.message);
        assert_eq!(e.topic, "parallel");
    }
}

/// `auto:SITE` unquoted is one target: the site is never part of the prompt.
#[test]
fn auto_site_targets() {
    assert_eq!(ok("to auto:yiyan: hi"), C::To(job("auto:yiyan", "hi")));
    assert_eq!(ok("to auto: hi"), C::To(job("auto", "hi")));
    assert_eq!(ok("to auto:yiyan:hi"), C::To(job("auto:yiyan", "hi")));
    assert_eq!(
        ok("to auto:deepseek,kimi: hi"),
        C::To(job("auto:deepseek,kimi", "hi"))
    );
    assert_eq!(
        ok("to \"auto:deepseek,kimi\": hi"),
        C::To(job("auto:deepseek,kimi", "hi"))
    );
    // No site after the colon: `auto` and the prompt, as `to kimi:写` is.
    assert_eq!(ok("to auto:写一首诗"), C::To(job("auto", "写一首诗")));
    assert_eq!(
        ok("parallel to=[auto:kimi,deepseek] hi"),
        C::Parallel {
            jobs: vec![job("auto:kimi", "hi"), job("deepseek", "hi")]
        }
    );
    assert_eq!(
        ok("parallel to=[auto:kimi: a, qianwen: b]"),
        C::Parallel {
            jobs: vec![job("auto:kimi", "a"), job("qianwen", "b")]
        }
    );
    let e = parse("to auto:yiyan hi").expect_err("no colon after the site");
    assert!(e.message.contains("`auto:yiyan`"), "{}", e.message);
}

/// (input, byte position, message fragment, usage topic)
const ERRORS: &[(&str, usize, &str, &str)] = &[
    ("", 0, "expected a command", "help"),
    ("   ", 3, "expected a command", "help"),
    ("set = 5", 4, "expected a variable name", "set"),
    ("set x 5", 6, "expected `=`", "set"),
    ("parallel deepseek hi", 9, "expected `to=[`", "parallel"),
    ("parallel to=[a,b hi", 19, "expected `]`", "parallel"),
    (
        "parallel to=[a,b]",
        17,
        "expected the prompt text after `]`",
        "parallel",
    ),
    (
        "parallel to=[] hi",
        13,
        "expected at least one target",
        "parallel",
    ),
    (
        "parallel to=[a b] hi",
        15,
        "expected `,` or `]`",
        "parallel",
    ),
    (
        "parallel to=[a: x, b:] ",
        21,
        "expected a prompt for b",
        "parallel",
    ),
    (
        "parallel to=[a: x] extra",
        19,
        "nothing may follow",
        "parallel",
    ),
    ("to deepseek hi", 12, "expected `:`", "to"),
    ("to deepseek:", 12, "expected the prompt text", "to"),
    ("to : hi", 3, "expected a target", "to"),
    ("to role:boss: hi", 8, "expected role:master", "to"),
    ("from x hi", 7, "expected `:`", "from"),
    ("send_to_all", 11, "expected the prompt text", "send_to_all"),
    (
        "send_to_all with files=[a.png]",
        30,
        "expected the prompt text",
        "send_to_all",
    ),
    (
        "send_to_all with files=[] hi",
        23,
        "expected at least one file name",
        "send_to_all",
    ),
    ("echo a ->", 9, "expected a command after `->`", "chain"),
    ("-> echo a", 0, "expected a command before `->`", "chain"),
    ("if x echo", 9, "expected `then`", "if"),
    ("if then echo", 2, "expected a condition", "if"),
    ("if x then", 9, "expected a command after `then`", "if"),
    (
        "if x then a else",
        16,
        "expected a command after `else`",
        "if",
    ),
    (
        "if x == then a",
        7,
        "expected a value after the comparison",
        "if",
    ),
    ("else echo", 0, "without a matching", "if"),
    ("for 1 in {1..2} do x", 3, "expected a loop variable", "for"),
    ("for i {1..2} do x", 5, "expected `in`", "for"),
    ("for i in {1..2} x", 17, "expected `do`", "for"),
    ("for i in {1..x} do y", 9, "expected a range", "for"),
    (
        "for i in {1..5..0} do y",
        9,
        "step must be a positive",
        "for",
    ),
    ("for i in {1..100000} do y", 9, "at most 1000", "for"),
    (
        "for i in {1..2} do",
        18,
        "expected a command after `do`",
        "for",
    ),
    ("manager", 7, "expected a verb", "manager"),
    ("manager fly x", 8, "expected a verb", "manager"),
    ("manager run", 11, "expected a flow name", "manager"),
    ("manager run a/b", 12, "is not a flow name", "manager"),
    ("manager run a b", 14, "expected key=value", "manager"),
    (
        "manager run a --from-node",
        25,
        "expected a node id",
        "manager",
    ),
    ("manager pause a b", 16, "unexpected `b`", "manager"),
    ("manager plan", 12, "expected the goal", "manager"),
    (
        "manager modify plan-1 more",
        26,
        "expected `modify ID: FEEDBACK`",
        "manager",
    ),
    (
        "manager modify plan-1:",
        22,
        "expected the feedback",
        "manager",
    ),
    (
        "manager save plan-1 to x",
        20,
        "expected `as NAME`",
        "manager",
    ),
    (
        "manager save plan-1 as a b",
        25,
        "unexpected `b`",
        "manager",
    ),
    ("manager why r", 13, "expected a flow name", "manager"),
    (
        "manager approve plan-1 x",
        23,
        "expected key=value",
        "manager",
    ),
    ("manager create a b", 17, "expected `from`", "manager"),
    (
        "manager create a from a -> b",
        22,
        "expected a quoted definition",
        "manager",
    ),
    (
        "manager create a from file:",
        27,
        "expected a path",
        "manager",
    ),
    (
        "manager export a to x.json",
        20,
        "expected `file:PATH`",
        "manager",
    ),
    ("manager list all", 13, "unexpected `all`", "manager"),
    ("flow go", 5, "expected start", "flow"),
    ("flow stop now", 10, "unexpected `now`", "flow"),
    ("role boss", 5, "expected master", "role"),
    ("role worker team", 12, "expected group=NAME", "role"),
];

#[test]
fn errors_carry_position_message_and_usage() {
    let mut wrong = Vec::new();
    for &(src, pos, fragment, topic) in ERRORS {
        match parse(src) {
            Err(e) if e.message.contains(fragment) && (e.pos, e.topic) == (pos, topic) => {}
            other => wrong.push(format!(
                "{src:?} (want {pos} {topic} {fragment:?}): {other:?}"
            )),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    for &(src, _, _, topic) in ERRORS {
        let e = parse(src).expect_err(src);
        assert_eq!(e.usage, help::usage(topic), "{src:?}");
        assert!(!e.usage.is_empty(), "{src:?} has no usage line");
        let shown = e.to_string();
        assert!(
            shown.starts_with("命令无法解析 / command could not be parsed: "),
            "{shown}"
        );
        assert!(shown.contains("用法 / usage: "), "{shown}");
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let deep = format!(
        "set x = {}echo{}",
        "$(set y = ".repeat(100),
        ")".repeat(100)
    );
    let e = parse(&deep).expect_err("too deep");
    assert!(e.message.contains("nested too deeply"), "{e}");
}

#[test]
fn long_chains_parse() {
    // The speed of this (linear, not quadratic) is measured in benches/scanner.rs.
    let body = vec!["to kimi: x"; 6000].join(" -> ");
    let C::Chain(steps) = ok(&body) else {
        panic!("not a chain")
    };
    assert_eq!(steps.len(), 6000);
}

#[test]
fn long_not_runs_collapse_by_parity() {
    let odd = format!("if {}x then echo y", "not ".repeat(20_001));
    let C::If { cond, .. } = ok(&odd) else {
        panic!("not an if")
    };
    assert_eq!(
        cond,
        Cond::Not(Box::new(Cond::Truthy(Operand::Text(t("x")))))
    );
    let even = format!("if {}x then echo y", "not ".repeat(20_000));
    let C::If { cond, .. } = ok(&even) else {
        panic!("not an if")
    };
    assert_eq!(cond, Cond::Truthy(Operand::Text(t("x"))));
}

#[test]
fn seed_dollar_assign_is_set() {
    // Seed manual line 721: `?<$var = $(shell)>!`.
    assert_eq!(
        ok("$r = $(echo hi)"),
        C::Set {
            name: "r".into(),
            global: false,
            value: SetValue::Capture(Box::new(shell("echo hi"))),
        }
    );
    assert_eq!(
        ok("$n=5"),
        C::Set {
            name: "n".into(),
            global: false,
            value: SetValue::Literal(t("5")),
        }
    );
    // A comparison or a bare reference is not an assignment.
    assert_eq!(ok("$x == 1"), shell("$x == 1"));
}

#[test]
fn seed_arrow_inside_one_command() {
    assert_eq!(
        ok("python step1.py → python step2.py $RESULT"),
        C::Chain(vec![
            shell("python step1.py"),
            shell("python step2.py $RESULT")
        ])
    );
}

#[test]
fn seed_flow_start_name_is_manager_run() {
    assert_eq!(
        ok("flow start 数据处理流程"),
        C::Manager(ManagerCmd::Run {
            name: "数据处理流程".into(),
            from_node: None,
            params: vec![],
        })
    );
    assert_eq!(ok("flow start"), C::Flow(FlowAction::Start));
    assert!(parse("flow stop x").is_err());
}

#[test]
fn seed_if_else_then_finally() {
    // Seed manual lines 1090-1095, the body of `智能流程`.
    let body = "check_status.py\n-> if $exit_code == 0 then continue.py\n-> else then rollback.py\n-> finally cleanup.py";
    let C::Finally { body, cleanup } = ok(body) else {
        panic!("not a finally")
    };
    assert_eq!(*cleanup, shell("cleanup.py"));
    let C::Chain(steps) = *body else {
        panic!("not a chain")
    };
    assert_eq!(steps[0], shell("check_status.py"));
    let C::If {
        then, otherwise, ..
    } = &steps[1]
    else {
        panic!("not an if")
    };
    assert_eq!(**then, shell("continue.py"));
    assert_eq!(otherwise.as_deref(), Some(&shell("rollback.py")));
    // `finally` as a word of a shell line is text.
    assert_eq!(ok("echo finally"), shell("echo finally"));
    let e = parse("a -> finally").unwrap_err();
    assert!(e.message.contains("after `finally`"), "{e}");
}

#[test]
fn seed_mcp_config_add_and_remove() {
    use crate::commands::ast::McpCmd;
    // Seed line 957, exactly.
    assert_eq!(
        ok("mcp config add server_name command args..."),
        C::Mcp(McpCmd::ConfigAdd {
            name: "server_name".into(),
            command: "command".into(),
            args: vec!["args...".into()],
        })
    );
    assert_eq!(
        ok("mcp config add fs npx -y \"@scope/server fs\" /data"),
        C::Mcp(McpCmd::ConfigAdd {
            name: "fs".into(),
            command: "npx".into(),
            args: vec!["-y".into(), "@scope/server fs".into(), "/data".into()],
        })
    );
    assert_eq!(
        ok("mcp config remove fs"),
        C::Mcp(McpCmd::ConfigRemove("fs".into()))
    );
    assert!(parse("mcp config add fs")
        .unwrap_err()
        .message
        .contains("command"));
    assert!(parse("mcp config rm fs").is_err());
}

#[test]
fn on_node_takes_a_shell_command_or_a_skill() {
    match parse("on db-1: wc -l $file").unwrap() {
        Command::On { node, text, body } => {
            assert_eq!(node, "db-1");
            assert_eq!(text, "wc -l $file");
            assert!(matches!(*body, Command::Shell { .. }));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        parse("on b: skill count path=x").unwrap(),
        Command::On { .. }
    ));
    // A chain around it: only the step is remote.
    assert!(matches!(
        parse("on b: ls -> to kimi: $RESULT").unwrap(),
        Command::Chain(_)
    ));
    for bad in [
        "on b: to kimi: hi",
        "on : ls",
        "on b ls",
        "on b:",
        "on b c: ls",
    ] {
        assert!(parse(bad).is_err(), "{bad}");
    }
    let e = parse("on b: to kimi: hi").unwrap_err();
    assert!(
        e.message
            .contains("runs a shell command or a skill on node `b`, not `to`"),
        "{}",
        e.message
    );
}

#[test]
fn seed_pipe_into_set_is_set_from_a_capture() {
    // Seed manual line 881: `?<from doubao: python extract.py | set raw_data>!`.
    let capture = |name: &str, global: bool, cmd: &str| C::Set {
        name: name.into(),
        global,
        value: SetValue::Capture(Box::new(shell(cmd))),
    };
    assert_eq!(
        ok("python extract.py | set raw_data"),
        capture("raw_data", false, "python extract.py")
    );
    assert_eq!(
        ok("cat a | grep x | set global hits"),
        capture("hits", true, "cat a | grep x")
    );
    assert_eq!(
        ok("from doubao: python extract.py | set raw_data"),
        C::From {
            target: name("doubao"),
            then: Some(Box::new(capture("raw_data", false, "python extract.py"))),
        }
    );
    // Anything else after the pipe, `||`, or a quoted `|` stays a shell line.
    for line in [
        "a | set",
        "a | set x y",
        "a || set x",
        "echo \"| set x\"",
        "a | set 1x",
        "| set x",
    ] {
        assert_eq!(ok(line), shell(line), "{line}");
    }
}

#[test]
fn seed_placeholders() {
    for w in ["shell", "cmd", "cmd1", "cmd2", "CMDN", "COMMAND"] {
        assert!(is_placeholder(w), "{w}");
    }
    for w in ["echo", "cmdline", "command", "shellcheck", "cmd123"] {
        assert!(!is_placeholder(w), "{w}");
    }
}

#[test]
fn with_files_on_to_and_parallel() {
    let Command::To(j) = parse("to w1 with files=[a.png, \"年报 2025.pdf\"]: 看看").unwrap()
    else {
        panic!()
    };
    assert_eq!(j.files, vec!["a.png".to_string(), "年报 2025.pdf".into()]);
    assert_eq!(j.prompt, t("看看"));
    let Command::Parallel { jobs } =
        parse("parallel to=[a, b] with files=[x.png]\na with files=[y.pdf]: 一\nb: 二").unwrap()
    else {
        panic!()
    };
    assert_eq!(jobs[0].files, vec!["x.png".to_string(), "y.pdf".into()]);
    assert_eq!(jobs[1].files, vec!["x.png".to_string()]);
    // `with` that is not `with files=` is the prompt's own word.
    let Command::To(j) = parse("to w1: with files is a phrase").unwrap() else {
        panic!()
    };
    assert!(j.files.is_empty());
    assert!(parse("to w1 with files=[]: x").is_err());
    assert!(parse("to w1 with files=[a.png: x").is_err());
}
