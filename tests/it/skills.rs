//! Skills on a real hub, over real sockets: schema errors naming the field, hot reload
//! without a restart (waiting on the watcher's event), a broken file isolated, path
//! traversal refused, and hostile values in a `run` skill never reaching a shell.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use aicard::config::ExecFlag;
use common::*;

fn echo_back(prompt: &str) -> Reply {
    Reply::Text(Duration::from_millis(5), format!("answer to: {prompt}"))
}

fn out(r: &serde_json::Value) -> String {
    r["result"]["output"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

const SAY: &str = "name: say\ndescription: repeat a text\nparameters:\n  type: object\n  \
properties:\n    text: {type: string}\n  required: [text]\nrun:\n  program: echo\n  \
argv: ['{{text}}']\n";

/// A skills dir holding the shipped skills plus `extra` files.
fn skills_dir(extra: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("skills");
    for e in std::fs::read_dir(shipped).unwrap().flatten() {
        std::fs::copy(e.path(), dir.path().join(e.file_name())).unwrap();
    }
    for (name, text) in extra {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    dir
}

async fn hub_with(dir: &Path, exec: ExecFlag, allow: &[&str]) -> TestHub {
    let dir: PathBuf = dir.to_path_buf();
    let allow: Vec<String> = allow.iter().map(|s| s.to_string()).collect();
    TestHub::start_with(move |c| {
        c.skills_dir = dir;
        c.exec_mode = exec;
        c.exec_allow = allow;
    })
    .await
}

/// Writes a file the way editors do: a temporary file (not `*.yaml`), renamed into place.
fn put(dir: &Path, name: &str, text: &str) {
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join(name)).unwrap();
}

/// Waits (on the watcher's reload events, with a timeout) until `pred` holds for the set.
async fn until_loaded(
    h: &TestHub,
    rx: &mut tokio::sync::broadcast::Receiver<u64>,
    pred: impl Fn(&aicard::skills::SkillSet) -> bool,
) {
    tokio::time::timeout(WAIT, async {
        loop {
            if pred(&h.hub().commands.skills.get()) {
                return;
            }
            match rx.recv().await {
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(e) => panic!("reload events: {e}"),
            }
        }
    })
    .await
    .expect("the watcher reloads the skills in time");
}

#[tokio::test]
async fn list_help_and_schema_errors_naming_the_field() {
    let dir = skills_dir(&[]);
    let h = hub_with(dir.path(), ExecFlag::Off, &[]).await;
    let mut m = h.scripted("m", "kimi", "master", echo_back).await;
    let list = out(&m.command("?<skill list>!").await);
    for name in ["summarize", "review", "utc-time"] {
        assert!(list.contains(name), "{list}");
    }
    let guide = m.command("?<skill help>!").await;
    assert!(out(&guide).contains("Do not guess"), "{guide}");
    let help = out(&m.command("?<skill help summarize>!").await);
    assert!(
        help.contains("text (string, required)") && help.contains("words (integer, default 80)"),
        "{help}"
    );
    let r = m.command("?<skill summarize words=5>!").await;
    assert_eq!(r["result"]["success"], false);
    let e = out(&r);
    assert!(
        e.contains("参数 `text`") && e.contains("参数 `words`"),
        "{e}"
    );
    let r = m.command("?<skill summarize text=x words=many>!").await;
    assert!(
        out(&r).contains("参数 `words`") && !out(&r).contains("参数 `text`"),
        "{r}"
    );
    let r = m.command("?<skill summarize text=x colour=red>!").await;
    assert!(out(&r).contains("unknown parameter `colour`"), "{r}");
    let r = m.command("?<skill nosuch>!").await;
    assert!(out(&r).contains("no skill named `nosuch`"), "{r}");
}

#[tokio::test]
async fn a_prompt_skill_asks_a_worker_and_a_flow_skill_starts_its_flow() {
    let dir = skills_dir(&[]);
    let h = hub_with(dir.path(), ExecFlag::Off, &[]).await;
    let mut m = h.scripted("m", "kimi", "master", echo_back).await;
    let w = h.scripted("w1", "deepseek", "worker", echo_back).await;
    let r = m
        .command("?<skill summarize text='Rust makes $HOME {{words}} safe' words=20>!")
        .await;
    assert_eq!(r["result"]["success"], true, "{r}");
    let asked = &w.prompts()[0];
    assert!(
        asked.contains("at most 20 words") && asked.contains("Rust makes $HOME {{words}} safe"),
        "{asked}"
    );
    assert!(out(&r).contains("answer to:"), "{r}");
    let r = m.command("?<skill review document='one $page'>!").await;
    assert_eq!(r["result"]["success"], true, "{r}");
    assert!(out(&r).contains("started"), "{r}");
}

#[tokio::test]
async fn hot_reload_without_restart_and_a_broken_file_is_isolated() {
    let dir = skills_dir(&[]);
    let h = hub_with(dir.path(), ExecFlag::Allowlist, &["echo"]).await;
    let mut m = h.scripted("m", "kimi", "master", echo_back).await;
    let mut rx = h.hub().commands.skills.subscribe();
    put(dir.path(), "say.yaml", SAY);
    until_loaded(&h, &mut rx, |s| s.get("say").is_some()).await;
    let r = m.command("?<skill say text=hello>!").await;
    assert_eq!(out(&r), "hello", "{r}");
    // A broken file: reported with line and column; every other skill keeps working.
    put(
        dir.path(),
        "broken.yaml",
        "name: broken\ndescription: d\nprompt: {template: [unclosed\n",
    );
    until_loaded(&h, &mut rx, |s| {
        s.errors.iter().any(|e| e.file == "broken.yaml")
    })
    .await;
    let list = out(&m.command("?<skill list>!").await);
    let line = list
        .lines()
        .find(|l| l.contains("broken.yaml:"))
        .expect("reported");
    let pos: Vec<&str> = line.trim().splitn(4, ':').collect();
    assert!(
        pos[1].parse::<usize>().unwrap() >= 3 && pos[2].parse::<usize>().is_ok(),
        "{line}"
    );
    assert!(list.contains("summarize") && list.contains("say"), "{list}");
    assert_eq!(out(&m.command("?<skill say text=still>!").await), "still");
    // Editing a skill changes it in place; deleting removes it.
    put(
        dir.path(),
        "say.yaml",
        &SAY.replace("argv: ['{{text}}']", "argv: ['said:', '{{text}}']"),
    );
    until_loaded(&h, &mut rx, |s| {
        s.get("say")
            .is_some_and(|k| matches!(&k.body, aicard::skills::Body::Run(r) if r.argv.len() == 2))
    })
    .await;
    assert_eq!(out(&m.command("?<skill say text=x>!").await), "said: x");
    std::fs::remove_file(dir.path().join("say.yaml")).unwrap();
    until_loaded(&h, &mut rx, |s| s.get("say").is_none()).await;
    assert!(out(&m.command("?<skill say text=x>!").await).contains("no skill named `say`"));
}

#[tokio::test]
async fn path_traversal_is_refused() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(
        outside.path().join("secret.yaml"),
        "name: secret\ndescription: outside\nprompt: {template: leaked}\n",
    )
    .unwrap();
    let dir = skills_dir(&[]);
    #[cfg(unix)]
    std::os::unix::fs::symlink(
        outside.path().join("secret.yaml"),
        dir.path().join("secret.yaml"),
    )
    .unwrap();
    let h = hub_with(dir.path(), ExecFlag::Off, &[]).await;
    let mut m = h.scripted("m", "kimi", "master", echo_back).await;
    for cmd in [
        "?<skill ../../etc/passwd>!",
        "?<skill help ../secret>!",
        "?<skill /etc/passwd>!",
        "?<skill help summarize/../../x>!",
    ] {
        let r = m.command(cmd).await;
        assert_eq!(r["result"]["success"], false, "{cmd}: {r}");
        assert!(out(&r).contains("not a skill name"), "{cmd}: {r}");
    }
    let list = out(&m.command("?<skill list>!").await);
    assert!(!list.contains("secret —"), "{list}");
    #[cfg(unix)]
    assert!(
        list.contains("secret.yaml:1:1: 拒绝读取 / refused"),
        "{list}"
    );
    let r = m.command("?<skill secret>!").await;
    assert!(out(&r).contains("no skill named `secret`"), "{r}");
}

#[tokio::test]
async fn hostile_values_in_a_run_skill_never_reach_a_shell() {
    for (mode, allow) in [(ExecFlag::Allowlist, vec!["echo"]), (ExecFlag::On, vec![])] {
        let dir = skills_dir(&[("say.yaml", SAY)]);
        let h = hub_with(dir.path(), mode, &allow).await;
        let marker = h.dir.path().join("workspace").join("PWNED");
        let mut m = h.scripted("m", "kimi", "master", echo_back).await;
        for (written, value) in [
            ("\"; touch PWNED\"", "; touch PWNED"),
            ("'; rm -rf / #'", "; rm -rf / #"),
            ("\"$(touch PWNED)\"", "$(touch PWNED)"),
            ("'`touch PWNED`'", "`touch PWNED`"),
            (
                "\"a \\\"quoted\\\" 'word' && touch PWNED\"",
                "a \"quoted\" 'word' && touch PWNED",
            ),
            ("'$HOME | touch PWNED > x'", "$HOME | touch PWNED > x"),
        ] {
            let r = m.command(&format!("?<skill say text={written}>!")).await;
            assert_eq!(r["result"]["success"], true, "{mode:?} {written}: {r}");
            assert_eq!(out(&r), value, "{mode:?}: echo got exactly one argument");
            assert!(!marker.exists(), "{mode:?}: {written} reached a shell");
        }
    }
    // With exec off a run skill is refused; the other skills still work.
    let dir = skills_dir(&[("say.yaml", SAY)]);
    let h = hub_with(dir.path(), ExecFlag::Off, &[]).await;
    let mut m = h.scripted("m", "kimi", "master", echo_back).await;
    let r = m.command("?<skill say text=hi>!").await;
    assert_eq!(r["result"]["success"], false);
    assert!(out(&r).contains("shell execution is off"), "{r}");
    // Allowlist mode checks the skill's program too.
    let dir = skills_dir(&[("say.yaml", SAY)]);
    let h = hub_with(dir.path(), ExecFlag::Allowlist, &["date"]).await;
    let mut m = h.scripted("m", "kimi", "master", echo_back).await;
    let r = m.command("?<skill say text=hi>!").await;
    assert!(out(&r).contains("not on the allowlist"), "{r}");
    let r = m
        .command("?<skill utc-time when=\"2026-05-01 10:00 +0800\">!")
        .await;
    assert_eq!(out(&r), "2026-05-01T02:00:00Z", "{r}");
}

// ---- program skills (skills/NAME.py): exec policy, the person's pin, JSON on stdin ---------

const SHOUT: &str = "#!/usr/bin/env python3\n# name: shout\n# description: upper-cases a text\n\
# param text: string, required — the text\n# param times: integer = 1 — how often\n\
# returns: text\nimport json, sys\nargs = json.load(sys.stdin)\n\
print(' '.join([args['text'].upper()] * args['times']))\n";

/// `aicard skill enable NAME` in the person's terminal: the real binary, on the hub's store.
fn enable(h: &TestHub, dir: &Path, name: &str) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_aicard"))
        .args(["skill", "enable", name, "--skills"])
        .arg(dir)
        .arg("--data-dir")
        .arg(h.dir.path())
        .output()
        .expect("aicard runs")
}

#[tokio::test]
async fn a_program_skill_runs_only_when_allowed_and_enabled_and_a_change_disables_it() {
    if !have_python3() {
        return;
    }
    let dir = skills_dir(&[]);
    let h = hub_with(dir.path(), ExecFlag::Allowlist, &["skill:shout"]).await;
    let mut m = h.scripted("m", "kimi", "master", echo_back).await;
    let mut rx = h.hub().commands.skills.subscribe();
    // Written while the hub runs: hot-loaded, but it waits for the person.
    put(dir.path(), "shout.py", SHOUT);
    until_loaded(&h, &mut rx, |s| s.get("shout").is_some()).await;
    let list = out(&m.command("?<skill list>!").await);
    assert!(list.contains("waits to be enabled"), "{list}");
    let r = m.command("?<skill shout text=hi>!").await;
    assert_eq!(r["result"]["success"], false, "{r}");
    assert!(
        out(&r).contains("waits to be enabled") && out(&r).contains("aicard skill enable shout"),
        "{r}"
    );
    // A model's reply cannot enable it: the language has no such command.
    for cmd in ["?<skill enable shout>!", "?<skill enable name=shout>!"] {
        let r = m.command(cmd).await;
        assert_eq!(r["result"]["success"], false, "{r}");
    }
    let r = m.command("?<skill shout text=hi>!").await;
    assert!(out(&r).contains("waits to be enabled"), "{r}");
    // The person enables it in their terminal; the hub sees the pin at the next call.
    let e = enable(&h, dir.path(), "shout");
    assert!(e.status.success(), "{e:?}");
    let said = String::from_utf8_lossy(&e.stdout);
    let sha = aicard::skills::program::sha256_hex(SHOUT.as_bytes());
    assert!(said.contains(&sha), "{said}");
    // Parameters arrive as JSON on stdin, typed and defaulted; a hostile value is data.
    let r = m
        .command("?<skill shout text=\"hi $(touch PWNED); x\" times=2>!")
        .await;
    assert_eq!(r["result"]["success"], true, "{r}");
    assert_eq!(out(&r), "HI $(TOUCH PWNED); X HI $(TOUCH PWNED); X", "{r}");
    assert!(!h.dir.path().join("workspace").join("PWNED").exists());
    let r = m.command("?<skill shout times=2>!").await;
    assert!(
        out(&r).contains("参数 `text`"),
        "the schema from the header: {r}"
    );
    // Changed: disabled again until the person enables the new bytes.
    let changed = SHOUT.replace(".upper()", ".upper() + '!'");
    put(dir.path(), "shout.py", &changed);
    until_loaded(&h, &mut rx, |s| {
        s.get("shout")
            .is_some_and(|k| matches!(&k.body, aicard::skills::Body::Program(p) if p.sha256 != sha))
    })
    .await;
    let r = m.command("?<skill shout text=hi>!").await;
    assert!(out(&r).contains("waits to be enabled"), "{r}");
    assert!(enable(&h, dir.path(), "shout").status.success());
    assert_eq!(out(&m.command("?<skill shout text=hi>!").await), "HI!");
    // Broken header: skipped with its error (file and line) in the list; the others work.
    put(
        dir.path(),
        "shout.py",
        &changed.replace("integer = 1", "int = 1"),
    );
    until_loaded(&h, &mut rx, |s| {
        s.errors.iter().any(|e| e.file == "shout.py")
    })
    .await;
    let list = out(&m.command("?<skill list>!").await);
    assert!(
        list.contains("shout.py:5:1:") && list.contains("unknown type `int`"),
        "{list}"
    );
    let r = m.command("?<skill shout text=hi>!").await;
    assert!(out(&r).contains("no skill named `shout`"), "{r}");
    let e = enable(&h, dir.path(), "shout");
    assert!(!e.status.success(), "a broken skill is not enabled: {e:?}");
    // Under the allowlist a skill needs its own `--allow skill:NAME`.
    put(
        dir.path(),
        "other.py",
        &SHOUT.replace("name: shout", "name: other"),
    );
    until_loaded(&h, &mut rx, |s| s.get("other").is_some()).await;
    assert!(enable(&h, dir.path(), "other").status.success());
    let r = m.command("?<skill other text=hi>!").await;
    assert!(out(&r).contains("--allow skill:other"), "{r}");
}

#[tokio::test]
async fn exec_off_refuses_a_program_skill_even_when_enabled() {
    let dir = skills_dir(&[("shout.py", SHOUT)]);
    let h = hub_with(dir.path(), ExecFlag::Off, &[]).await;
    let mut m = h.scripted("m", "kimi", "master", echo_back).await;
    assert!(enable(&h, dir.path(), "shout").status.success());
    let r = m.command("?<skill shout text=hi>!").await;
    assert_eq!(r["result"]["success"], false, "{r}");
    assert!(out(&r).contains("exec is off"), "{r}");
}

#[tokio::test]
async fn a_file_skill_leaves_one_file_kept_by_the_files_service() {
    if !have_python3() {
        return;
    }
    const REPORT: &str = "# name: report\n# description: writes a report file\n\
# param title: string, required\n# returns: file\nimport json, os, sys\n\
a = json.load(sys.stdin)\n\
open(os.path.join(os.environ['AICARD_OUT'], 'report.txt'), 'w').write('# ' + a['title'])\n\
print('written')\n";
    let dir = skills_dir(&[("report.py", REPORT)]);
    let h = hub_with(dir.path(), ExecFlag::On, &[]).await;
    let mut m = h.scripted("m", "kimi", "master", echo_back).await;
    assert!(enable(&h, dir.path(), "report").status.success());
    let r = m.command("?<skill report title=Q3>!").await;
    assert_eq!(r["result"]["success"], true, "{r}");
    let text = out(&r);
    let sha = aicard::skills::program::sha256_hex(b"# Q3");
    assert!(
        text.starts_with("written\n[附件 / attachment: report.txt (4 bytes, text/plain"),
        "{text}"
    );
    assert!(text.contains(&sha), "{text}");
    let kept = std::fs::read(h.dir.path().join("blobs").join(&sha)).unwrap();
    assert_eq!(kept, b"# Q3");
    // A path printed on stdout is not a result: only what is left in $AICARD_OUT counts.
    let liar = REPORT
        .replace("name: report", "name: liar")
        .replace("open(os.path.join(os.environ['AICARD_OUT'], 'report.txt'), 'w').write('# ' + a['title'])\n", "")
        .replace("print('written')", "print('/etc/passwd')");
    std::fs::write(dir.path().join("liar.py"), liar).unwrap();
    h.hub().commands.skills.reload();
    assert!(enable(&h, dir.path(), "liar").status.success());
    let r = m.command("?<skill liar title=x>!").await;
    assert_eq!(r["result"]["success"], false, "{r}");
    assert!(out(&r).contains("exactly one file"), "{r}");
}
