//! Interpreter tests against a deterministic fake host (no sleeps, no sockets).

use super::*;
use crate::commands::ast::{FlowRequest, ManagerCmd, Role};
use crate::commands::permissions::Source;
use crate::exec::ExecMode;
use crate::exec::ExecPolicy;
use crate::protocol::Prompt;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::Barrier;

/// A fake hub: tabs answer `<tab> says: <prompt>`; `group-*` tabs are in group `g1`.
#[derive(Default)]
struct FakeHost {
    tabs: Vec<&'static str>,
    /// Every ask, in the order they started.
    asked: Mutex<Vec<(String, String)>>,
    /// The prompts as handed over (to see which share their text).
    prompts: Mutex<Vec<Prompt>>,
    last: HashMap<&'static str, &'static str>,
    /// When set, every ask waits here (proves concurrency).
    barrier: Option<Barrier>,
    roles: Mutex<Vec<(Role, Option<String>)>>,
    flows: Mutex<Vec<FlowRequest>>,
    has_flow_engine: bool,
    /// The files each ask with files carried, by tab.
    files: Mutex<Vec<(String, Vec<String>)>>,
}

impl FakeHost {
    fn new() -> Self {
        Self {
            tabs: vec!["deepseek", "qianwen", "kimi", "group-a", "group-b"],
            last: HashMap::from([("doubao", "doubao's last answer")]),
            ..Self::default()
        }
    }

    fn asked(&self) -> Vec<(String, String)> {
        self.asked.lock().expect("lock").clone()
    }
}

impl Tabs for FakeHost {
    async fn ask(
        &self,
        _caller: &Caller,
        target: &str,
        prompt: Prompt,
    ) -> Result<String, HostError> {
        // A group names several tabs: the host picks one (here the first), as the hub's ask
        // service does.
        let picked = target
            .strip_prefix("group:")
            .and_then(|g| self.select(&Target::Group(g.into())).into_iter().next());
        let target = picked.as_deref().unwrap_or(target);
        if !self.tabs.contains(&target) {
            return Err(HostError::UnknownTarget(target.to_string()));
        }
        self.asked
            .lock()
            .expect("lock")
            .push((target.to_string(), prompt.to_string()));
        self.prompts.lock().expect("lock").push(prompt.clone());
        if let Some(b) = &self.barrier {
            b.wait().await;
        }
        Ok(format!("{target} says: {prompt}"))
    }

    /// Records the files, then answers as `ask` does.
    async fn ask_files(
        &self,
        caller: &Caller,
        target: &str,
        prompt: Prompt,
        files: Vec<String>,
    ) -> Result<String, HostError> {
        self.files
            .lock()
            .expect("lock")
            .push((target.to_string(), files));
        self.ask(caller, target, prompt).await
    }

    async fn last_reply(&self, target: &str) -> Result<String, HostError> {
        self.last
            .get(target)
            .map(|s| s.to_string())
            .ok_or_else(|| HostError::NotConnected(target.to_string()))
    }

    fn select(&self, selector: &Target) -> Vec<String> {
        match selector {
            Target::Group(g) if g == "g1" => vec!["group-a".into(), "group-b".into()],
            Target::Role(Role::Worker) => self.all_workers(),
            _ => Vec::new(),
        }
    }

    fn all_workers(&self) -> Vec<String> {
        self.tabs.iter().map(|t| t.to_string()).collect()
    }

    fn in_group(&self, target: &str, group: &str) -> bool {
        group == "g1" && target.starts_with("group-")
    }

    async fn set_role(
        &self,
        _caller: &Caller,
        role: Role,
        group: Option<String>,
    ) -> Result<String, HostError> {
        self.roles.lock().expect("lock").push((role, group));
        Ok(format!("role set: {role}"))
    }
}

impl Cluster for FakeHost {
    /// Node `b` refuses every command, `c` does too and names itself, `d` runs it.
    async fn on_node(
        &self,
        _caller: &Caller,
        node: &str,
        command: &str,
        _vars: BTreeMap<String, String>,
    ) -> Result<(bool, String), HostError> {
        match node {
            "b" => Ok((false, format!("未知命令 / unknown command `{command}`"))),
            "c" => Ok((false, "node `c` runs no shell commands (--exec off)".into())),
            "d" => Ok((true, format!("ran {command}"))),
            _ => Err(HostError::Other(format!("no node `{node}`"))),
        }
    }
}

impl Flows for FakeHost {
    async fn flows(&self, _caller: &Caller, request: FlowRequest) -> Result<String, HostError> {
        if !self.has_flow_engine {
            return Err(HostError::NoFlowEngine);
        }
        self.flows.lock().expect("lock").push(request.clone());
        Ok(format!("flow engine got {request:?}"))
    }
}

impl Services for FakeHost {}

impl ExecSink for FakeHost {}

fn interp_with(host: FakeHost, mode: ExecMode) -> (Interpreter<FakeHost>, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = ExecPolicy::new(mode, dir.path().join("ws"));
    (
        Interpreter::new(host, policy, Arc::new(Variables::new())),
        dir,
    )
}

fn interp() -> (Interpreter<FakeHost>, tempfile::TempDir) {
    interp_with(FakeHost::new(), ExecMode::Off)
}

fn person() -> Caller {
    Caller::new("master-1", Role::Master, None, Source::UserInput)
}

fn reply(role: Role, group: Option<&str>) -> Caller {
    Caller::new("tab-9", role, group.map(str::to_string), Source::Reply)
}

async fn ok(i: &Interpreter<FakeHost>, c: &Caller, body: &str) -> String {
    let out = i.run_text(c, body).await;
    assert!(out.success, "{body}: {}", out.output);
    out.output
}

async fn fails(i: &Interpreter<FakeHost>, c: &Caller, body: &str) -> String {
    let out = i.run_text(c, body).await;
    assert!(
        !out.success,
        "{body} unexpectedly succeeded: {}",
        out.output
    );
    out.output
}

#[tokio::test]
async fn help_and_parse_errors_answer_with_usage() {
    let (i, _d) = interp();
    assert!(ok(&i, &person(), "help")
        .await
        .contains("?<parallel to=[T1,T2,…] TEXT>!"));
    assert!(ok(&i, &person(), "help parallel")
        .await
        .contains("Example:"));
    assert!(fails(&i, &person(), "help nope")
        .await
        .contains("no such command"));
    let e = fails(&i, &person(), "parallel deepseek hi").await;
    assert!(
        e.contains("command could not be parsed") && e.contains("用法 / usage: ?<parallel"),
        "{e}"
    );
}

#[tokio::test]
async fn to_expands_variables_as_data() {
    let (i, _d) = interp();
    let c = person();
    ok(&i, &c, "set evil = ; rm -rf / ?<echo pwned>! $(touch x)").await;
    let out = ok(&i, &c, "to deepseek: look at $evil").await;
    assert_eq!(
        out,
        "deepseek says: look at ; rm -rf / ?<echo pwned>! $(touch x)"
    );
    assert_eq!(i.host().asked().len(), 1);
    let e = fails(&i, &c, "to deepseek: $missing").await;
    assert!(e.contains("undefined variable: $missing"), "{e}");
}

#[tokio::test]
async fn unknown_target_is_an_error_naming_it() {
    let (i, _d) = interp();
    let e = fails(&i, &person(), "to nowhere: hi").await;
    assert_eq!(e, "没有这个标签页 / no such tab: nowhere");
}

#[tokio::test]
async fn parallel_aggregates_labelled_answers_in_order() {
    let (i, _d) = interp();
    let out = ok(&i, &person(), "parallel to=[deepseek,qianwen] 你好").await;
    assert_eq!(
        out,
        "[deepseek] deepseek says: 你好\n\n[qianwen] qianwen says: 你好"
    );
    let out = ok(
        &i,
        &person(),
        "set d = doc -> parallel to=[deepseek: analyze $d, kimi: summarize $d]",
    )
    .await;
    assert_eq!(
        out,
        "[deepseek] deepseek says: analyze doc\n\n[kimi] kimi says: summarize doc"
    );
}

#[tokio::test]
async fn parallel_to_many_tabs_shares_one_prompt() {
    let (i, _d) = interp();
    ok(
        &i,
        &person(),
        "parallel to=[deepseek,qianwen,kimi] 同一个问题",
    )
    .await;
    ok(&i, &person(), "parallel to=[deepseek: a, qianwen: b]").await;
    let prompts = i.host.prompts.lock().expect("lock").clone();
    let [one, two, three, a, b] = prompts.as_slice() else {
        panic!("{prompts:?}");
    };
    assert!(std::ptr::eq(one.as_str(), two.as_str()) && std::ptr::eq(two.as_str(), three.as_str()));
    assert_eq!((a.as_str(), b.as_str()), ("a", "b"));
}

#[tokio::test]
async fn parallel_keeps_answers_when_one_target_fails() {
    let (i, _d) = interp();
    let e = fails(&i, &person(), "parallel to=[deepseek,ghost] hi").await;
    assert_eq!(
        e,
        "[deepseek] deepseek says: hi\n\n[ghost] 错误 / error: 没有这个标签页 / no such tab: ghost"
    );
}

#[tokio::test]
async fn parallel_really_runs_concurrently() {
    let host = FakeHost {
        barrier: Some(Barrier::new(3)),
        ..FakeHost::new()
    };
    let (i, _d) = interp_with(host, ExecMode::Off);
    // Each ask waits until all three have started: sequential asks would never finish.
    let caller = person();
    let run = i.run_text(&caller, "parallel to=[deepseek,qianwen,kimi] go");
    let out = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("concurrent");
    assert!(out.success, "{}", out.output);
}

#[tokio::test]
async fn chain_passes_result_and_stops_on_failure() {
    let (i, _d) = interp();
    let out = ok(&i, &person(), "to deepseek: a -> to kimi: got $RESULT").await;
    assert_eq!(out, "kimi says: got deepseek says: a");
    let e = fails(&i, &person(), "to ghost: a -> to kimi: never").await;
    assert!(e.contains("ghost"));
    // Only the first chain's two asks happened: the failed step stopped the second chain.
    assert_eq!(i.host().asked().len(), 2);
}

#[tokio::test]
async fn set_capture_if_and_for() {
    let (i, _d) = interp();
    let c = person();
    assert_eq!(ok(&i, &c, "set n = 5").await, "n = 5");
    assert_eq!(
        ok(
            &i,
            &c,
            "if $n > 3 then set size = big else set size = small"
        )
        .await,
        "size = big"
    );
    assert_eq!(
        ok(&i, &c, "if $n >= 10 then to kimi: x else to kimi: small").await,
        "kimi says: small"
    );
    assert_eq!(
        ok(&i, &c, "if $n == 4 then to kimi: x").await,
        "（条件不成立，未执行 / condition false, nothing ran）"
    );
    assert_eq!(
        ok(&i, &c, "set a = $(to deepseek: pick)").await,
        "a = deepseek says: pick"
    );
    assert_eq!(
        ok(&i, &c, "if $a contains pick then to kimi: yes").await,
        "kimi says: yes"
    );
    assert_eq!(
        ok(
            &i,
            &c,
            "if not $(to deepseek: x) then to kimi: no else to kimi: yes"
        )
        .await,
        "kimi says: yes"
    );
    let out = ok(&i, &c, "for i in {3..1} do to kimi: item $i").await;
    assert_eq!(
        out,
        "kimi says: item 3\nkimi says: item 2\nkimi says: item 1"
    );
    let out = ok(&i, &c, "for t in [deepseek, qianwen] do to $t: hi").await;
    assert_eq!(out, "deepseek says: hi\nqianwen says: hi");
}

#[tokio::test]
async fn scopes_per_master_and_global() {
    let (i, _d) = interp();
    let m1 = person();
    let m2 = Caller::new("master-2", Role::Master, None, Source::UserInput);
    ok(&i, &m1, "set x = mine").await;
    ok(&i, &m1, "set global shared = everyone").await;
    assert!(fails(&i, &m2, "to kimi: $x")
        .await
        .contains("undefined variable: $x"));
    assert_eq!(ok(&i, &m2, "to kimi: $shared").await, "kimi says: everyone");
    i.variables()
        .set_global("review.output", "LGTM".into())
        .expect("set");
    assert_eq!(
        ok(&i, &m2, "to kimi: ${review.output}").await,
        "kimi says: LGTM"
    );
}

#[tokio::test]
async fn from_takes_the_last_answer() {
    let (i, _d) = interp();
    assert_eq!(
        ok(&i, &person(), "from doubao:").await,
        "doubao's last answer"
    );
    assert_eq!(
        ok(&i, &person(), "from doubao: to kimi: check $RESULT").await,
        "kimi says: check doubao's last answer"
    );
    assert!(fails(&i, &person(), "from kimi:")
        .await
        .contains("not connected: kimi"));
}

#[tokio::test]
async fn worker_replies_run_nothing() {
    let (i, _d) = interp_with(FakeHost::new(), ExecMode::On);
    let w = reply(Role::Worker, Some("g1"));
    for body in [
        "echo hi",
        "to deepseek: hi",
        "help",
        "set x = 1",
        "manager run x",
        "role master",
    ] {
        let e = fails(&i, &w, body).await;
        assert!(e.starts_with("未执行 / not executed"), "{body}: {e}");
    }
    assert!(i.host().asked().is_empty());
    assert!(i.host().roles.lock().expect("lock").is_empty());
}

#[tokio::test]
async fn foreman_dispatches_only_to_its_group() {
    let (i, _d) = interp();
    let f = reply(Role::Foreman, Some("g1"));
    assert_eq!(
        ok(&i, &f, "parallel to=[group-a: p1, group-b: p2]").await,
        "[group-a] group-a says: p1\n\n[group-b] group-b says: p2"
    );
    let e = fails(&i, &f, "parallel to=[group-a, deepseek] hi").await;
    assert!(e.contains("`deepseek` is not in group `g1`"), "{e}");
    // Nothing was sent when the permission check failed.
    assert_eq!(i.host().asked().len(), 2);
    let out = ok(&i, &f, "send_to_all 准备").await;
    assert_eq!(
        out,
        "[group-a] group-a says: 准备\n\n[group-b] group-b says: 准备"
    );
    // `to` reaches exactly one tab of the group (docs/commands.md), not all of them.
    assert_eq!(ok(&i, &f, "to group:g1: x").await, "group-a says: x");
    assert!(fails(&i, &f, "echo hi")
        .await
        .contains("may not run shell commands"));
    assert!(fails(&i, &f, "manager run x")
        .await
        .contains("only the master or the person"));
    assert!(fails(&i, &f, "role master")
        .await
        .contains("may change roles"));
    let e = fails(&i, &reply(Role::Foreman, None), "to group-a: x").await;
    assert!(e.contains("has no group"), "{e}");
}

#[tokio::test]
async fn master_send_to_all_reaches_every_worker() {
    let (i, _d) = interp();
    let out = ok(&i, &reply(Role::Master, None), "send_to_all ping").await;
    assert_eq!(out.matches("says: ping").count(), 5);
}

#[tokio::test]
async fn send_to_all_with_files_gives_every_reachable_worker_the_same_files() {
    let (i, _d) = interp();
    ok(&i, &person(), "set f = chart.png").await;
    let out = ok(
        &i,
        &person(),
        "send_to_all with files=[$f, \"报告 1.pdf\"] 看图",
    )
    .await;
    assert_eq!(out.matches("says: 看图").count(), 5, "{out}");
    let mut got = i.host().files.lock().expect("lock").clone();
    got.sort();
    let want: Vec<String> = vec!["chart.png".into(), "报告 1.pdf".into()];
    assert_eq!(got.len(), 5, "{got:?}");
    assert!(got.iter().all(|(_, f)| *f == want), "{got:?}");
    // A foreman's reply reaches its group only, files and all.
    i.host().files.lock().expect("lock").clear();
    let f = reply(Role::Foreman, Some("g1"));
    ok(&i, &f, "send_to_all with files=[a.png] 准备").await;
    let tabs: Vec<String> = i
        .host()
        .files
        .lock()
        .expect("lock")
        .iter()
        .map(|(t, _)| t.clone())
        .collect();
    assert_eq!(tabs, vec!["group-a", "group-b"]);
    // An undefined `$var` in a name fails before anything is sent.
    let asked = i.host().asked().len();
    let e = fails(&i, &person(), "send_to_all with files=[$nope] hi").await;
    assert!(e.contains("undefined variable: $nope"), "{e}");
    assert_eq!(i.host().asked().len(), asked);
}

#[tokio::test]
async fn flows_without_an_engine_say_so() {
    let (i, _d) = interp();
    let e = fails(&i, &person(), "manager run cross-review").await;
    assert!(e.contains("no flow engine"), "{e}");
    assert!(fails(&i, &person(), "flow status")
        .await
        .contains("no flow engine"));
}

#[tokio::test]
async fn manager_requests_reach_the_engine_with_params_expanded() {
    let host = FakeHost {
        has_flow_engine: true,
        ..FakeHost::new()
    };
    let (i, _d) = interp_with(host, ExecMode::Off);
    ok(&i, &person(), "set doc = 'the; text'").await;
    ok(
        &i,
        &person(),
        "manager run review --from-node synth document=$doc n=2",
    )
    .await;
    ok(
        &i,
        &reply(Role::Foreman, Some("g1")),
        "manager status review",
    )
    .await;
    ok(&i, &person(), "flow pause").await;
    let got = i.host().flows.lock().expect("lock").clone();
    assert_eq!(
        got,
        vec![
            FlowRequest::Manager(ManagerCmd::Run {
                name: "review".into(),
                from_node: Some("synth".into()),
                params: vec![
                    ("document".into(), "the; text".into()),
                    ("n".into(), "2".into())
                ],
            }),
            FlowRequest::Manager(ManagerCmd::Status("review".into())),
            FlowRequest::Flow(crate::commands::ast::FlowAction::Pause),
        ]
    );
}

#[tokio::test]
async fn role_changes_go_to_the_host() {
    let (i, _d) = interp();
    assert_eq!(
        ok(&i, &person(), "role foreman group=g1").await,
        "role set: foreman"
    );
    assert_eq!(
        *i.host().roles.lock().expect("lock"),
        vec![(Role::Foreman, Some("g1".to_string()))]
    );
}

#[tokio::test]
async fn shell_follows_the_exec_policy() {
    let (off, _d) = interp();
    let refused = fails(&off, &person(), "echo hi").await;
    assert!(
        refused.contains("unknown command `echo`") && refused.contains("--exec on"),
        "{refused}"
    );
    let (on, _d2) = interp_with(FakeHost::new(), ExecMode::Allowlist(vec!["echo".into()]));
    let c = person();
    assert_eq!(ok(&on, &c, "echo hello").await, "hello");
    ok(&on, &c, "set v = a; b").await;
    assert_eq!(ok(&on, &c, "echo $v").await, "a; b");
    assert_eq!(
        ok(&on, &c, "to kimi: x -> echo $RESULT").await,
        "kimi says: x"
    );
    assert_eq!(ok(&on, &c, "for i in {1..3} do echo $i").await, "1\n2\n3");
    assert_eq!(
        ok(&on, &c, "set r = $(echo captured)").await,
        "r = captured"
    );
    assert!(fails(&on, &c, "echo a; echo b")
        .await
        .contains("not allowed in allowlist mode: `;`"));
}

#[tokio::test]
async fn step_budget_stops_runaway_loops() {
    let (i, _d) = interp();
    let e = fails(
        &i,
        &person(),
        "for i in {1..1000} do for j in {1..1000} do to kimi: $i.$j",
    )
    .await;
    assert!(e.contains("too many steps"), "{e}");
}

#[tokio::test]
async fn run_found_gives_the_cmd_result_fields() {
    use crate::commands::scanner::{scan_text, ScanError};
    let (i, _d) = interp();
    let items = scan_text("please ?< to kimi: hi >! thanks");
    let (command, outcome) = i.run_found(&person(), &items[0]).await;
    assert_eq!(command, "to kimi: hi");
    assert_eq!(
        outcome,
        CommandOutcome {
            success: true,
            output: "kimi says: hi".into()
        }
    );
    let err: ScanItem = Err(ScanError::TooLong { start: 0, limit: 8 });
    let (command, outcome) = i.run_found(&person(), &err).await;
    assert!(command.is_empty() && !outcome.success && outcome.output.contains("command too long"));
    let json = serde_json::to_value(&outcome).expect("serialize");
    assert_eq!(json["success"], false);
}

#[tokio::test]
async fn an_unknown_word_is_an_unknown_command_with_the_nearest_ones() {
    let (off, _d) = interp();
    for (typed, word, near) in [
        ("frobnicate", "frobnicate", None),
        ("manger run x", "manger", Some("manager")),
        ("remeber this", "remeber", Some("remember")),
        ("agnet list", "agnet", Some("agent")),
    ] {
        let r = fails(&off, &person(), typed).await;
        assert!(
            r.contains(&format!("unknown command `{word}`")),
            "{typed}: {r}"
        );
        assert!(!r.contains("shell execution is off"), "{typed}: {r}");
        match near {
            Some(n) => assert!(r.contains(&format!("did you mean: {n}")), "{typed}: {r}"),
            None => assert!(!r.contains("did you mean"), "{typed}: {r}"),
        }
    }
}

#[tokio::test]
async fn the_manuals_placeholders_and_bare_scripts_say_what_to_write() {
    // Seed lines 721 and 739: `$(shell)` and `cmd1` stand for a command.
    let (off, _d) = interp();
    for (typed, word) in [
        ("$var = $(shell)", "shell"),
        ("cmd1", "cmd1"),
        ("CMD", "CMD"),
    ] {
        let r = fails(&off, &person(), typed).await;
        assert!(
            r.contains(&format!("`{word}` is the manual's placeholder")),
            "{typed}: {r}"
        );
        assert!(
            r.contains("?<$var = $(to deepseek: 你好)>!"),
            "{typed}: {r}"
        );
        assert!(!r.contains("unknown command"), "{typed}: {r}");
    }
    // Seed lines 885-890: `check_system.py` is a script, run by its interpreter.
    let r = fails(&off, &person(), "check_system.py").await;
    assert!(r.contains("write `python check_system.py`"), "{r}");
    assert!(
        r.contains("put it there first") && r.contains("--exec allowlist --allow python"),
        "{r}"
    );
    let (on, d) = interp_with(FakeHost::new(), ExecMode::Allowlist(vec!["echo".into()]));
    std::fs::create_dir_all(d.path().join("ws")).expect("ws");
    std::fs::write(d.path().join("ws").join("log_result.py"), "print(1)\n").expect("script");
    let r = fails(&on, &person(), "log_result.py --now").await;
    assert!(r.contains("write `python log_result.py`"), "{r}");
    assert!(
        r.contains("(it is there)") && r.contains("start the hub with `--allow python`"),
        "{r}"
    );
    // A word that is neither is still an unknown command, and with exec on it says why.
    let r = fails(&on, &person(), "frobnicate").await;
    assert!(
        r.contains("unknown command `frobnicate`") && r.contains("no program of that name"),
        "{r}"
    );
}

#[tokio::test]
async fn a_lone_capture_that_exits_non_zero_is_false() {
    // Seed line 747: `if $(echo $result | grep ERROR) then …` when nothing matches.
    let (on, _d) = interp_with(
        FakeHost::new(),
        ExecMode::Allowlist(vec!["echo".into(), "grep".into(), "false".into()]),
    );
    let c = person();
    ok(&on, &c, "set result = all good").await;
    assert_eq!(
        ok(&on, &c, "if $(echo $result | grep ERROR) then echo bad").await,
        "（条件不成立，未执行 / condition false, nothing ran）"
    );
    assert_eq!(
        ok(&on, &c, "if $(false) then echo a else echo b").await,
        "b"
    );
    ok(&on, &c, "set result = ERROR: disk full").await;
    assert_eq!(
        ok(&on, &c, "if $(echo $result | grep ERROR) then echo bad").await,
        "bad"
    );
    // Not run at all is still an error, and so is a failing capture in a comparison.
    assert!(fails(&on, &c, "if $(rm x) then echo a")
        .await
        .contains("not on the allowlist: `rm`"));
    assert!(fails(&on, &c, "if $(false) == 1 then echo a")
        .await
        .contains("exit code 1"));
}

#[tokio::test]
async fn a_pipe_into_set_sets_the_variable() {
    // Seed line 881: `python extract.py | set raw_data`.
    let (on, _d) = interp_with(FakeHost::new(), ExecMode::Allowlist(vec!["echo".into()]));
    let c = person();
    assert_eq!(
        ok(&on, &c, "echo 42 rows | set raw_data").await,
        "raw_data = 42 rows"
    );
    assert_eq!(
        ok(&on, &c, "to kimi: $raw_data").await,
        "kimi says: 42 rows"
    );
    assert_eq!(
        ok(&on, &c, "from doubao: echo $RESULT | set global g").await,
        "g = doubao's last answer"
    );
}

/// What another node refused reads as coming from it: the node is named in front, unless
/// its answer already names it.
#[tokio::test]
async fn a_remote_nodes_refusal_names_the_node() {
    let (i, _d) = interp();
    let out = i.run_text(&person(), "on b: nosuch").await;
    assert!(!out.success);
    assert_eq!(
        out.output,
        "节点 `b` / node `b`: 未知命令 / unknown command `nosuch`"
    );
    let out = i.run_text(&person(), "on c: ls").await;
    assert_eq!(out.output, "node `c` runs no shell commands (--exec off)");
    let out = i.run_text(&person(), "on d: ls").await;
    assert!(out.success);
    assert_eq!(out.output, "ran ls");
    let out = i.run_text(&person(), "on nowhere: ls").await;
    assert_eq!(out.output, "no node `nowhere`");
}
