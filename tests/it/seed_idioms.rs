//! docs/commands.md / issue 27: the seed manual's command idioms, typed exactly as the manual writes
//! them (tests/fixtures/seed-manual/commands.md), on a real hub over real sockets.

use crate::common;

use std::time::Duration;

use aicard::config::ExecFlag;
use common::*;

fn echo_back(prompt: &str) -> Reply {
    Reply::Text(Duration::from_millis(10), format!("answer to: {prompt}"))
}

fn out(r: &serde_json::Value) -> &str {
    r["result"]["output"].as_str().unwrap_or_default()
}

async fn exec_on_hub() -> TestHub {
    TestHub::start_with(|c| c.exec_mode = ExecFlag::On).await
}

#[tokio::test]
async fn an_unknown_word_is_an_unknown_command_not_shell_off() {
    let h = TestHub::start().await;
    let mut tab = h.scripted("m", "kimi", "master", echo_back).await;
    let r = tab.command("?<frobnicate>!").await;
    assert_eq!(r["result"]["success"], false, "{r}");
    assert!(out(&r).contains("unknown command `frobnicate`"), "{r}");
    assert!(out(&r).contains("未知命令"), "{r}");
    assert!(!out(&r).contains("shell execution is off"), "{r}");
    let r = tab.command("?<manger list>!").await;
    assert!(out(&r).contains("did you mean: manager"), "{r}");
}

#[tokio::test]
async fn an_unknown_program_with_exec_on_is_an_unknown_command() {
    let h = exec_on_hub().await;
    let mut tab = h.scripted("m", "kimi", "master", echo_back).await;
    let r = tab.command("?<frobnicate>!").await;
    assert_eq!(r["result"]["success"], false, "{r}");
    assert!(out(&r).contains("unknown command `frobnicate`"), "{r}");
    assert!(!out(&r).contains("not found"), "{r}");
    // A program that exists still runs (seed line 706).
    let r = tab.command("?<echo hello>!").await;
    assert_eq!(r["result"]["success"], true, "{r}");
    assert!(out(&r).contains("hello"), "{r}");
}

#[tokio::test]
async fn dollar_assign_takes_a_commands_output() {
    // Seed line 721: `?<$var = $(shell)>!`.
    let h = exec_on_hub().await;
    let mut tab = h.scripted("m", "kimi", "master", echo_back).await;
    let r = tab.command("?<$r = $(echo hi)>!").await;
    assert_eq!(r["result"]["success"], true, "{r}");
    assert_eq!(out(&r), "r = hi");
    let r = tab.command("?<echo $r>!").await;
    assert!(out(&r).contains("hi"), "{r}");
    // Any command form inside `$( )`: here a prompt to a tab.
    let _w = h.scripted("w", "deepseek", "worker", echo_back).await;
    let r = tab.command("?<$a = $(to deepseek: 你好)>!").await;
    assert_eq!(r["result"]["success"], true, "{r}");
    assert!(out(&r).contains("answer to: 你好"), "{r}");
}

#[tokio::test]
async fn a_chain_across_commands_runs_in_order_with_result() {
    // Seed line 751, the manual's exact text, with `echo` standing in for the scripts.
    let h = exec_on_hub().await;
    let mut tab = h.scripted("m", "kimi", "master", echo_back).await;
    let r = tab
        .command("?<echo step1>! → ?<echo step2 $RESULT>! → ?<echo step3 $RESULT>!")
        .await;
    assert_eq!(r["result"]["success"], true, "{r}");
    assert!(out(&r).contains("step3 step2 step1"), "{r}");
    assert_eq!(
        r["command"],
        "echo step1 → echo step2 $RESULT → echo step3 $RESULT"
    );
    // `->` between commands is the same chain.
    let r = tab.command("?<echo a>! -> ?<echo b $RESULT>!").await;
    assert!(out(&r).contains("b a"), "{r}");
}

#[tokio::test]
async fn a_failed_chain_answers_once() {
    // Seed line 751 as written: with no such scripts, one answer, no undefined `$RESULT`.
    let h = exec_on_hub().await;
    let mut tab = h.scripted("m", "kimi", "master", echo_back).await;
    let r = tab
        .command("?<python step1.py>! → ?<python step2.py $RESULT>! → ?<python step3.py $RESULT>!")
        .await;
    assert_eq!(r["result"]["success"], false, "{r}");
    assert!(!out(&r).contains("undefined variable"), "{r}");
    // The next answer is for the next command: the chain answered once.
    let r = tab.command("?<help>!").await;
    assert_eq!(r["command"], "help", "{r}");
}

#[tokio::test]
async fn finally_runs_after_the_chain_either_way() {
    // Seed lines 1090-1095: the body of `智能流程`, the scripts replaced by `sh -c` stand-ins.
    // `$exit_code` is the exit code of the step before: a failed step followed by an `if` on
    // it is handled by that `if`, and `finally` runs whatever happened.
    let h = exec_on_hub().await;
    let mut tab = h.scripted("m", "kimi", "master", echo_back).await;
    let ws = h.dir.path().join("workspace");
    let body = |first: &str, mark: &str| {
        format!("?<{first}\n-> if $exit_code == 0 then echo continue\n-> else then echo rollback\n-> finally touch {mark}>!")
    };
    let r = tab.command(&body("false", "CLEANED")).await;
    assert_eq!(r["result"]["success"], true, "{r}");
    assert!(
        out(&r).contains("rollback") && !out(&r).contains("continue"),
        "{r}"
    );
    assert!(ws.join("CLEANED").exists(), "{r}");
    let r = tab.command(&body("true", "CLEANED2")).await;
    assert_eq!(r["result"]["success"], true, "{r}");
    assert!(
        out(&r).contains("continue") && !out(&r).contains("rollback"),
        "{r}"
    );
    assert!(ws.join("CLEANED2").exists(), "{r}");
    // The exit code is the step before's, not a variable of the person's of that name.
    let r = tab.command("?<set exit_code = 1>! ").await;
    assert_eq!(r["result"]["success"], true, "{r}");
    let r = tab.command(&body("true", "CLEANED3")).await;
    assert!(out(&r).contains("continue"), "{r}");
    // A failed step that nothing after it looks at still stops the chain; finally still runs.
    let r = tab
        .command("?<false -> echo never -> finally touch CLEANED4>!")
        .await;
    assert_eq!(r["result"]["success"], false, "{r}");
    assert!(!out(&r).contains("never"), "{r}");
    assert!(ws.join("CLEANED4").exists(), "{r}");
}

#[tokio::test]
async fn flow_start_name_runs_the_flow() {
    // Seed line 494: `?<flow start 数据处理流程>!`.
    let h = exec_on_hub().await;
    let mut tab = h.scripted("m", "kimi", "master", echo_back).await;
    let r = tab
        .command("?<manager create 数据处理流程 from \"echo 一 -> echo 二\">!")
        .await;
    assert_eq!(r["result"]["success"], true, "{r}");
    let r = tab.command("?<flow start 数据处理流程>!").await;
    assert_eq!(r["result"]["success"], true, "{r}");
    let r = tab.command("?<flow start 没有这个流程>!").await;
    assert_eq!(r["result"]["success"], false, "{r}");
    assert!(out(&r).contains("没有这个流程"), "{r}");
}

#[tokio::test]
async fn to_a_role_reaches_exactly_one_tab() {
    let h = TestHub::start().await;
    let mut boss = h.scripted("m", "kimi", "master", echo_back).await;
    let _a = h.scripted("w1", "deepseek", "worker", echo_back).await;
    let _b = h.scripted("w2", "qianwen", "worker", echo_back).await;
    let _c = h.scripted("w3", "doubao", "worker", echo_back).await;
    let r = boss.command("?<to role:worker: 你好>!").await;
    assert_eq!(r["result"]["success"], true, "{r}");
    assert_eq!(out(&r).matches("answer to: 你好").count(), 1, "{r}");
    assert!(
        !out(&r).contains("[w"),
        "one answer, not labelled sections: {r}"
    );
    // `parallel` and `send_to_all` still reach many (seed line 710 / the `notify` node).
    let r = boss.command("?<send_to_all 分析完成，报告已生成>!").await;
    assert_eq!(out(&r).matches("answer to: 分析完成").count(), 3, "{r}");
    let r = boss
        .command("?<parallel to=[deepseek,qianwen] \"并行消息\">!")
        .await;
    assert_eq!(out(&r).matches("answer to: 并行消息").count(), 2, "{r}");
}

#[tokio::test]
async fn from_reads_a_tabs_latest_answer_whoever_asked() {
    let h = TestHub::start().await;
    let mut boss = h.scripted("m", "kimi", "master", echo_back).await;
    let _d = h.scripted("d", "doubao", "worker", echo_back).await;
    let r = boss.command("?<from doubao:>!").await;
    assert!(out(&r).contains("no reply yet"), "{r}");
    let r = boss.command("?<to doubao: 提取数据>!").await;
    assert_eq!(r["result"]["success"], true, "{r}");
    // The hub asked doubao (not the person): `from` still reads that answer.
    let r = boss.command("?<from doubao:>!").await;
    assert_eq!(r["result"]["success"], true, "{r}");
    assert!(out(&r).contains("answer to: 提取数据"), "{r}");
    // Seed line 712's shape: the answer as `$RESULT` for a command.
    let r = boss.command("?<from doubao: set data = $RESULT>!").await;
    assert!(out(&r).contains("data = answer to: 提取数据"), "{r}");
}

#[tokio::test]
async fn mcp_config_add_and_remove_write_mcp_json_for_the_person_only() {
    // Seed line 957: `?<mcp config add server_name command args...>!`, exactly.
    let h = TestHub::start().await;
    let mut tab = h.scripted("m", "kimi", "master", echo_back).await;
    let path = h.dir.path().join("mcp.json");
    let r = tab
        .command("?<mcp config add server_name command args...>!")
        .await;
    assert_eq!(r["result"]["success"], true, "{r}");
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("mcp.json written")).unwrap();
    assert_eq!(
        written["mcpServers"]["server_name"],
        serde_json::json!({"command": "command", "args": ["args..."]})
    );
    // A tab's reply may not change it (it starts programs), not even the master's.
    tab.send(serde_json::json!({"type":"turn_end","turn_id":"t1",
        "text":"?<mcp config remove server_name>!"}));
    let r = tab.next("cmd_result").await;
    assert_eq!(r["result"]["success"], false, "{r}");
    assert!(out(&r).contains("only the person"), "{r}");
    let r = tab.command("?<mcp config remove server_name>!").await;
    assert_eq!(r["result"]["success"], true, "{r}");
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(
        written["mcpServers"].get("server_name").is_none(),
        "{written}"
    );
}

#[tokio::test]
async fn manager_create_checks_its_steps_when_created() {
    let h = TestHub::start().await;
    let mut tab = h.scripted("m", "kimi", "master", echo_back).await;
    // Seed lines 875-879, exactly: one `to:SITE TEXT` step per line.
    let r = tab
        .command("?<manager create 跨平台分析 from \"\nto:deepseek 分析这部分数据\nto:qianwen 总结这份报告\nto:doubao 生成图表\n\">!")
        .await;
    assert_eq!(r["result"]["success"], true, "{r}");
    let r = tab
        .command("?<manager export 跨平台分析 to file:cross.json>!")
        .await;
    assert_eq!(r["result"]["success"], true, "{r}");
    let saved = std::fs::read_to_string(h.dir.path().join("exports").join("cross.json"))
        .expect("exported flow");
    for line in ["分析这部分数据", "总结这份报告", "生成图表"] {
        assert!(saved.contains(line), "{line}: {saved}");
    }
    assert!(saved.contains("parallel_outputs"), "{saved}");
    // `to:` lines mixed with a line that is neither: refused at create, naming the line.
    let r = tab
        .command(
            "?<manager create 混合 from \"\nto:deepseek 分析\necho 中间\nto:qianwen 总结\n\">!",
        )
        .await;
    assert_eq!(r["result"]["success"], false, "{r}");
    assert!(out(&r).contains("line 3 `echo 中间`"), "{r}");
    // A `->` step holding two `to:` lines is neither series nor parallel.
    let r = tab
        .command(
            "?<manager create 混合2 from \"\nto:deepseek 分析\nto:qianwen 总结\n-> echo 完\n\">!",
        )
        .await;
    assert_eq!(r["result"]["success"], false, "{r}");
    assert!(out(&r).contains("line 2"), "{r}");
    // A step that is no command is refused now, naming every bad step, not at run time.
    let r = tab
        .command("?<manager create 坏流程 from \"set = 5 -> echo ok -> parallel to=[x\">!")
        .await;
    assert_eq!(r["result"]["success"], false, "{r}");
    assert!(out(&r).contains("step 1 `set = 5`"), "{r}");
    assert!(out(&r).contains("step 3 `parallel to=[x`"), "{r}");
    assert!(!out(&r).contains("step 2"), "{r}");
    let r = tab.command("?<manager show 坏流程>!").await;
    assert_eq!(r["result"]["success"], false, "{r}");
}

/// `manager create NAME from "…" auto_retry=N` (seed manual): each step is tried again up to
/// N times; a step that fails once then answers completes the run.
#[tokio::test]
async fn manager_create_with_auto_retry_tries_a_failed_step_again() {
    let h = TestHub::start().await;
    let mut boss = h.scripted("m", "kimi", "master", echo_back).await;
    let tries = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = tries.clone();
    let _flaky = h
        .scripted("flaky", "deepseek", "worker", move |p: &str| {
            if seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
                Reply::Fail("site error".into())
            } else {
                Reply::Text(Duration::from_millis(1), format!("done: {p}"))
            }
        })
        .await;
    let r = boss
        .command("?<manager create 重试流程 from \"to:flaky 分析数据\" auto_retry=2>!")
        .await;
    assert_eq!(r["result"]["success"], true, "{r}");
    let saved = h.hub().hub.store.flow_source("重试流程").unwrap().unwrap();
    assert!(saved.contains("retry: {max: 2}"), "{saved}");
    let (state, _) = run_flow(&mut boss, "?<manager run 重试流程>!").await;
    assert_eq!(state, "completed");
    assert_eq!(tries.load(std::sync::atomic::Ordering::SeqCst), 2);
    // Without auto_retry the same failure fails the run.
    let r = boss
        .command("?<manager create 不重试 from \"to:flaky 再来\" auto_retry=0>!")
        .await;
    assert_eq!(r["result"]["success"], true, "{r}");
    let bad = boss
        .command("?<manager create x from \"to:flaky a\" auto_retry=lots>!")
        .await;
    assert_eq!(bad["result"]["success"], false, "{bad}");
    assert!(out(&bad).contains("auto_retry=N"), "{bad}");
}

#[tokio::test]
async fn manager_create_refuses_a_step_the_exec_policy_would_refuse() {
    // Exec off (the default): a flow whose step runs a program is refused when created.
    let h = TestHub::start().await;
    let mut tab = h.scripted("m", "kimi", "master", echo_back).await;
    let r = tab
        .command("?<manager create 运维 from \"check_system.py -> to m: 看看\">!")
        .await;
    assert_eq!(r["result"]["success"], false, "{r}");
    assert!(out(&r).contains("step 1 `python check_system.py`"), "{r}");
    assert!(out(&r).contains("--exec"), "{r}");
    let r = tab.command("?<manager show 运维>!").await;
    assert_eq!(r["result"]["success"], false, "never saved: {r}");

    // Under an allowlist, a program not on it is refused naming the step; one on it passes.
    let h = TestHub::start_with(|c| {
        c.exec_mode = ExecFlag::Allowlist;
        c.exec_allow = vec!["echo".into()];
    })
    .await;
    let mut tab = h.scripted("m", "kimi", "master", echo_back).await;
    let r = tab
        .command("?<manager create 三层 from \"echo a -> if $exit_code != 0 then rm -rf x\">!")
        .await;
    assert_eq!(r["result"]["success"], false, "{r}");
    assert!(out(&r).contains("`rm -rf x`"), "{r}");
    assert!(out(&r).contains("allowlist"), "{r}");
    let r = tab
        .command("?<manager create 好 from \"echo a -> echo $result b\">!")
        .await;
    assert_eq!(r["result"]["success"], true, "{r}");
}

/// `?<jobs>!` until `done` says the list is as wanted (a job ends in its own time: the wait is
/// bounded, and each look is a real command on the hub).
async fn jobs_until(tab: &mut ScriptedTab, done: impl Fn(&str) -> bool) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let r = tab.command("?<jobs>!").await;
        let o = out(&r).to_string();
        if done(&o) {
            return o;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "jobs never got there: {o}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_background_job_answers_at_once_runs_on_and_can_be_listed_and_killed() {
    // Manual §15.3: `CMD &` runs in the background; the answer comes at once with its id.
    let h = exec_on_hub().await;
    let mut tab = h.scripted("m", "kimi", "master", echo_back).await;
    let started = std::time::Instant::now();
    let r = tab.command("?<sh -c 'sleep 0.3; echo 后台完成' &>!").await;
    assert_eq!(r["result"]["success"], true, "{r}");
    assert!(out(&r).contains("job j1 started"), "{r}");
    assert!(
        started.elapsed() < Duration::from_millis(300),
        "answered at once"
    );
    // The answer did not kill it: it finishes and its output is kept.
    let list = jobs_until(&mut tab, |o| o.contains("done (exit 0)")).await;
    assert!(list.contains("后台完成"), "{list}");

    // `jobs kill` ends one; at most 8 run at once.
    for n in 2..=9 {
        let r = tab.command("?<sleep 30 &>!").await;
        assert_eq!(r["result"]["success"], true, "job {n}: {r}");
    }
    let r = tab.command("?<sleep 30 &>!").await;
    assert_eq!(r["result"]["success"], false, "{r}");
    assert!(out(&r).contains("8 background jobs already run"), "{r}");
    let r = tab.command("?<jobs kill j2>!").await;
    assert_eq!(r["result"]["success"], true, "{r}");
    let list = jobs_until(&mut tab, |o| {
        o.contains("j2 `sleep 30` — ✗ 已终止 / killed")
    })
    .await;
    assert!(list.contains("j3 `sleep 30` — 运行中 / running"), "{list}");
    let r = tab.command("?<jobs kill j2>!").await;
    assert!(out(&r).contains("already ended"), "{r}");
    let r = tab.command("?<jobs kill j99>!").await;
    assert!(out(&r).contains("no job `j99`"), "{r}");

    // The hub stopping ends every job (their process groups killed).
    let pid_file = h.dir.path().join("workspace").join("pid");
    let r = tab
        .command("?<sh -c 'echo $$ > pid; exec sleep 30' &>!")
        .await;
    assert_eq!(r["result"]["success"], true, "{r}");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let pid = loop {
        if let Some(p) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
        {
            break p;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the job never wrote its pid"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let proc = std::path::PathBuf::from(format!("/proc/{pid}"));
    assert!(proc.exists());
    let TestHub { running, dir } = h;
    running.shutdown().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while proc.exists() {
        let zombie = std::fs::read_to_string(proc.join("stat"))
            .map(|s| s.contains(") Z "))
            .unwrap_or(true);
        if zombie {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "job {pid} outlived the hub"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(dir);
}

#[tokio::test]
async fn a_background_job_with_exec_off_is_refused_not_an_empty_success() {
    let h = TestHub::start().await;
    let mut tab = h.scripted("m", "kimi", "master", echo_back).await;
    let r = tab.command("?<python slow.py &>!").await;
    assert_eq!(r["result"]["success"], false, "{r}");
    assert!(out(&r).contains("--exec"), "{r}");
    let r = tab.command("?<jobs>!").await;
    assert!(out(&r).contains("(none)"), "{r}");
}
