//! Exec policy tests: modes, the injection corpus with a marker file, timeout, caps, streams.

use super::plan::{env_name, lex, Seg};
use super::*;
use std::path::Path;

fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn allow(progs: &[&str]) -> ExecMode {
    ExecMode::Allowlist(progs.iter().map(|p| p.to_string()).collect())
}

fn policy(mode: ExecMode, dir: &Path) -> ExecPolicy {
    ExecPolicy::new(mode, dir.join("workspace"))
}

async fn run_cmd(
    p: &ExecPolicy,
    cmd: &str,
    v: &BTreeMap<String, String>,
) -> Result<ExecOutput, ExecError> {
    run(
        p,
        ExecRequest {
            command: cmd,
            vars: v,
            caller: "test",
        },
        None,
    )
    .await
}

#[tokio::test]
async fn off_refuses_with_a_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let e = run_cmd(&policy(ExecMode::Off, dir.path()), "echo hi", &vars(&[]))
        .await
        .expect_err("off");
    assert!(matches!(e, ExecError::Disabled));
    assert!(e
        .to_string()
        .contains("shell 执行已关闭 / shell execution is off"));
}

#[tokio::test]
async fn allowlist_runs_argv_and_pipelines() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = policy(allow(&["echo", "wc", "tr"]), dir.path());
    let out = run_cmd(&p, "echo 'a  b' \"c d\"", &vars(&[]))
        .await
        .expect("echo");
    assert_eq!(out.stdout, "a  b c d\n");
    assert!(out.success());
    let out = run_cmd(&p, "echo one two three | tr a-z A-Z | wc -w", &vars(&[]))
        .await
        .expect("pipe");
    assert_eq!(out.stdout.trim(), "3");
    let e = run_cmd(&p, "echo hi | sort", &vars(&[]))
        .await
        .expect_err("sort");
    assert!(
        matches!(e, ExecError::NotAllowed { ref program, .. } if program == "sort"),
        "{e}"
    );
    let e = run_cmd(&p, "/bin/echo hi", &vars(&[]))
        .await
        .expect_err("path");
    assert!(matches!(e, ExecError::NotAllowed { .. }));
    let e = run_cmd(&p, "echo 'unbalanced", &vars(&[]))
        .await
        .expect_err("quotes");
    assert!(matches!(e, ExecError::Syntax(_)));
    let e = run_cmd(&p, "echo $nope", &vars(&[]))
        .await
        .expect_err("undefined");
    assert!(e.to_string().contains("undefined variable: $nope"));
}

#[tokio::test]
async fn allowlist_variables_are_single_words() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = policy(allow(&["printf"]), dir.path());
    let v = vars(&[("x", "a b  c"), ("q", "it's \"q\"")]);
    let out = run_cmd(&p, "printf '[%s]' $x \"pre-$x-post\" ${q} '$x'", &v)
        .await
        .expect("printf");
    assert_eq!(out.stdout, "[a b  c][pre-a b  c-post][it's \"q\"][$x]");
}

/// Every payload that a shell would read as "also run `touch MARKER`".
fn payloads(marker: &Path) -> Vec<String> {
    let m = marker.display();
    vec![
        format!("; touch {m}"),
        format!("&& touch {m}"),
        format!("|| touch {m}"),
        format!("| touch {m}"),
        format!("& touch {m}"),
        format!("`touch {m}`"),
        format!("$(touch {m})"),
        format!("\ntouch {m}"),
        format!("> {m}"),
        format!(">> {m}"),
        format!("< /etc/passwd > {m}"),
        format!("\"; touch {m}; \""),
        format!("'; touch {m}; '"),
    ]
}

#[tokio::test]
async fn injection_corpus_never_creates_the_marker() {
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = dir.path().join("PWNED");
    // `touch` IS allowed: only the refusal of shell syntax stands between payload and marker.
    let allowlist = policy(allow(&["echo", "touch", "cat"]), dir.path());
    // For `| touch`, a legitimate pipeline, the allowlist itself must refuse `touch`.
    let no_touch = policy(allow(&["echo", "cat"]), dir.path());
    let on = policy(ExecMode::On, dir.path());
    for payload in payloads(&marker) {
        // Spliced directly into the command line: allowlist refuses, never runs.
        let cmd = format!("echo hi {payload}");
        let pipe = payload.starts_with("| ");
        let res = run_cmd(if pipe { &no_touch } else { &allowlist }, &cmd, &vars(&[])).await;
        let quoted = payload.starts_with(['"', '\'']);
        match res {
            Err(ExecError::NotAllowed { program, .. }) if pipe => assert_eq!(program, "touch"),
            Err(ExecError::Forbidden { .. }) => assert!(!quoted),
            // Quoted payloads are one literal argument: echoed, not run.
            Ok(out) if quoted => assert!(out.stdout.contains("touch"), "{out:?}"),
            other => panic!("allowlist ran {cmd:?}: {other:?}"),
        }
        assert!(!marker.exists(), "marker after {cmd:?}");
        // Through a variable, in every mode and quoting: the payload is printed, not run.
        let v = vars(&[("v", payload.as_str())]);
        for template in ["echo $v", "echo \"$v\"", "echo x${v}y", "echo \"x${v}y\""] {
            for p in [&allowlist, &on] {
                let out = run_cmd(p, template, &v).await.expect("runs as data");
                assert!(
                    out.stdout.contains(payload.trim_start_matches('\n')),
                    "{template} with {payload:?} in {:?}: {out:?}",
                    p.mode
                );
                assert!(
                    !marker.exists(),
                    "marker after {template} with {payload:?} ({:?})",
                    p.mode
                );
            }
        }
    }
}

#[tokio::test]
async fn on_mode_passes_variables_through_the_environment() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = policy(ExecMode::On, dir.path());
    let v = vars(&[("node.output", "from node"), ("node_output", "other")]);
    let out = run_cmd(
        &p,
        "echo ${node.output} / $node_output; for i in 1 2; do echo $i; done",
        &v,
    )
    .await
    .expect("sh");
    assert_eq!(out.stdout, "from node / other\n1\n2\n");
    let out = run_cmd(&p, "echo $node_output >/dev/null; env", &v)
        .await
        .expect("env");
    assert!(
        out.stdout.contains("AICARD_VAR_node_output=other"),
        "{}",
        out.stdout
    );
    assert!(
        !out.stdout.contains("AICARD_TOKEN"),
        "token leaked: {}",
        out.stdout
    );
}

#[tokio::test]
async fn stdout_stderr_apart_and_exit_code() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = policy(ExecMode::On, dir.path());
    let out = run_cmd(&p, "echo out; echo err 1>&2; exit 3", &vars(&[]))
        .await
        .expect("sh");
    assert_eq!(
        (out.stdout.as_str(), out.stderr.as_str()),
        ("out\n", "err\n")
    );
    assert_eq!(out.exit_code, Some(3));
    assert!(!out.success());
    assert_eq!(
        out.render(p.timeout),
        "out\n[stderr]\nerr\n[退出码 / exit code 3]"
    );
}

#[test]
fn rendered_output_has_unix_line_ends_and_no_trailing_ones() {
    let out = ExecOutput {
        stdout: "Pinging\r\nReply\r\n\r\n".into(),
        stderr: "warn\r\n".into(),
        exit_code: Some(0),
        timed_out: false,
    };
    assert_eq!(
        out.render(DEFAULT_TIMEOUT),
        "Pinging\nReply\n[stderr]\nwarn"
    );
}

#[tokio::test]
async fn workspace_is_created_and_is_the_cwd() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = policy(allow(&["pwd"]), dir.path());
    let out = run_cmd(&p, "pwd", &vars(&[])).await.expect("pwd");
    let ws = std::fs::canonicalize(dir.path().join("workspace")).expect("workspace exists");
    assert_eq!(out.stdout.trim(), ws.display().to_string());
}

#[tokio::test]
async fn timeout_kills_the_process_group_quickly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut p = policy(allow(&["sleep"]), dir.path());
    p.timeout = Duration::from_millis(300);
    let started = Instant::now();
    let out = run_cmd(&p, "sleep 30", &vars(&[])).await.expect("runs");
    assert!(out.timed_out && out.exit_code.is_none());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(out.render(p.timeout).contains("timed out after 0.3 s"));

    // A background grandchild in `on` mode dies with the group.
    let mut p = policy(ExecMode::On, dir.path());
    p.timeout = Duration::from_millis(500);
    let started = Instant::now();
    let out = run_cmd(&p, "sleep 30 & echo $!; wait", &vars(&[]))
        .await
        .expect("runs");
    assert!(out.timed_out, "{out:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    let pid = out.stdout.trim();
    // SIGKILL is asynchronous: the process may still show as running for a moment after
    // killpg returns. Wait (bounded) until it is gone or a zombie waiting for a reaper.
    let gone = |stat: &str| stat.is_empty() || stat.contains(") Z") || stat.contains(") X");
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    while !gone(&stat) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    }
    assert!(gone(&stat), "sleep {pid} still alive: {stat}");
}

#[tokio::test]
async fn output_is_capped_with_a_note_and_the_pipe_drained() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut p = policy(allow(&["seq"]), dir.path());
    p.output_cap = 1000;
    let out = run_cmd(&p, "seq 1 100000", &vars(&[])).await.expect("seq");
    assert!(out.success(), "{out:?}");
    let (kept, note) = out.stdout.split_once("\n…[").expect("note");
    assert!(kept.len() <= 1000);
    assert!(note.contains("输出已截断 / output truncated: "), "{note}");
}

#[tokio::test]
async fn cap_never_splits_a_character() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut p = policy(allow(&["printf"]), dir.path());
    p.output_cap = 4;
    let out = run_cmd(&p, "printf 中文", &vars(&[]))
        .await
        .expect("printf");
    assert!(out.stdout.starts_with("中\n…["), "{:?}", out.stdout);
    assert!(out.stdout.contains("3 more bytes"), "{:?}", out.stdout);
}

#[tokio::test]
async fn output_streams_while_running() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = policy(ExecMode::On, dir.path());
    let (tx, mut rx) = mpsc::channel(64);
    let v = vars(&[]);
    let req = ExecRequest {
        command: "echo a; echo b 1>&2",
        vars: &v,
        caller: "test",
    };
    let out = run(&p, req, Some(tx)).await.expect("runs");
    let mut chunks = Vec::new();
    while let Ok(Some(c)) = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await {
        chunks.push(c);
    }
    let text = |s: OutputStream| {
        chunks
            .iter()
            .filter(|c| c.stream == s)
            .map(|c| c.text.as_str())
            .collect::<String>()
    };
    assert_eq!(text(OutputStream::Stdout), out.stdout);
    assert_eq!(text(OutputStream::Stderr), "b\n");
}

#[test]
fn lex_finds_pipes_vars_and_forbidden_syntax() {
    let (segs, bad) = lex("a '$x|;' \"$y\" | b ${z}");
    assert_eq!(bad, None);
    assert_eq!(
        segs,
        vec![
            Seg::Raw("a '$x|;' \""),
            Seg::Var {
                name: "y",
                in_double: true
            },
            Seg::Raw("\" "),
            Seg::Pipe,
            Seg::Raw(" b "),
            Seg::Var {
                name: "z",
                in_double: false
            },
        ]
    );
    assert_eq!(lex("a \"x;y\" \\; b").1, None);
    assert_eq!(lex("a \"$(b)\"").1, Some(("command substitution $(…)", 3)));
    assert_eq!(lex("a 2>&1").1, Some(("redirection `<`/`>`", 3)));
}

#[test]
fn env_names_do_not_collide() {
    assert_eq!(env_name("a.b", std::iter::empty()), "AICARD_VAR_a_b");
    assert_eq!(
        env_name("a_b", ["AICARD_VAR_a_b"].into_iter()),
        "AICARD_VAR_a_b_1"
    );
}

#[test]
fn check_answers_what_a_run_would_without_running() {
    let off = ExecPolicy::new(ExecMode::Off, "/tmp");
    assert!(matches!(check(&off, "echo hi"), Err(ExecError::Disabled)));
    let list = ExecPolicy::new(
        ExecMode::Allowlist(vec!["echo".into(), "wc".into()]),
        "/tmp",
    );
    assert!(check(&list, "echo $x | wc -l").is_ok());
    assert!(matches!(
        check(&list, "echo a | rm -rf /"),
        Err(ExecError::NotAllowed { program, .. }) if program == "rm"
    ));
    assert!(matches!(
        check(&list, "echo a; rm x"),
        Err(ExecError::Forbidden { .. })
    ));
    let on = ExecPolicy::new(ExecMode::On, "/tmp");
    assert!(check(&on, "anything --at all").is_ok());
    assert!(matches!(check(&on, "  "), Err(ExecError::Empty)));
}
