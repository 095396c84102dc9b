//! The interpreter's side of the agent forms: who may run them, the tools rule, `$var`s
//! expanded before the host sees them, and the default host's honest refusal.

use super::*;
use crate::commands::agent::AgentCmd;
use crate::commands::ast::Role;
use crate::commands::permissions::Source;
use crate::exec::ExecMode;
use crate::exec::ExecPolicy;
use crate::protocol::Prompt;
use std::sync::Mutex;

/// A host with no tabs that records the agent requests it gets (`wired: false` keeps the
/// trait's default `agent`, as every existing host has today).
struct AgentHost {
    wired: bool,
    got: Mutex<Vec<AgentCmd<String>>>,
}

impl Tabs for AgentHost {
    async fn ask(&self, _: &Caller, target: &str, _: Prompt) -> Result<String, HostError> {
        Err(HostError::UnknownTarget(target.into()))
    }
    async fn last_reply(&self, target: &str) -> Result<String, HostError> {
        Err(HostError::UnknownTarget(target.into()))
    }
    fn select(&self, _: &Target) -> Vec<String> {
        Vec::new()
    }
    fn all_workers(&self) -> Vec<String> {
        Vec::new()
    }
    fn in_group(&self, _: &str, _: &str) -> bool {
        false
    }
    async fn set_role(&self, _: &Caller, _: Role, _: Option<String>) -> Result<String, HostError> {
        Ok(String::new())
    }
}

impl Services for AgentHost {
    async fn agent(&self, caller: &Caller, cmd: AgentCmd<String>) -> Result<String, HostError> {
        if !self.wired {
            return Err(HostError::Other(
                "代理不可用 / agents are not available here".into(),
            ));
        }
        let _ = caller;
        self.got.lock().expect("lock").push(cmd);
        Ok("ok".into())
    }
}

impl Flows for AgentHost {}
impl Cluster for AgentHost {}
impl ExecSink for AgentHost {}

fn interp(wired: bool) -> (Interpreter<AgentHost>, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let host = AgentHost {
        wired,
        got: Mutex::new(Vec::new()),
    };
    let policy = ExecPolicy::new(ExecMode::Off, dir.path().join("ws"));
    (
        Interpreter::new(host, policy, Arc::new(Variables::new())),
        dir,
    )
}

fn reply(role: Role) -> Caller {
    Caller::new("tab-1", role, Some("g1".into()), Source::Reply)
}

/// A host without the agent loop compiles unchanged and answers clearly.
#[tokio::test]
async fn a_host_without_agents_says_so() {
    struct Plain;
    impl Tabs for Plain {
        async fn ask(&self, _: &Caller, t: &str, _: Prompt) -> Result<String, HostError> {
            Err(HostError::UnknownTarget(t.into()))
        }
        async fn last_reply(&self, t: &str) -> Result<String, HostError> {
            Err(HostError::UnknownTarget(t.into()))
        }
        fn select(&self, _: &Target) -> Vec<String> {
            Vec::new()
        }
        fn all_workers(&self) -> Vec<String> {
            Vec::new()
        }
        fn in_group(&self, _: &str, _: &str) -> bool {
            false
        }
        async fn set_role(
            &self,
            _: &Caller,
            _: Role,
            _: Option<String>,
        ) -> Result<String, HostError> {
            Ok(String::new())
        }
    }
    impl Flows for Plain {}
    impl Services for Plain {}
    impl Cluster for Plain {}
    impl ExecSink for Plain {}
    let dir = tempfile::tempdir().expect("tempdir");
    let i = Interpreter::new(
        Plain,
        ExecPolicy::new(ExecMode::Off, dir.path().join("ws")),
        Arc::new(Variables::new()),
    );
    let person = Caller::new("m", Role::Master, None, Source::UserInput);
    for body in ["agent list", "agent create r1", "done 42"] {
        let out = i.run_text(&person, body).await;
        assert!(!out.success, "{body}");
        assert_eq!(
            out.output, "代理不可用 / agents are not available here",
            "{body}"
        );
    }
}

/// (caller, command, Ok(request the host gets) | Err(text of the refusal))
#[tokio::test]
async fn who_may_run_the_agent_forms() {
    let (i, _d) = interp(true);
    let master = reply(Role::Master);
    let foreman = reply(Role::Foreman);
    let worker = reply(Role::Worker);
    let person = Caller::new("w", Role::Worker, None, Source::UserInput);
    let mut open_worker = reply(Role::Worker);
    open_worker.permissions.reply_commands = true;
    open_worker.permissions.flows = true;
    i.variables()
        .set("tab-1", "doc", "the text".into())
        .expect("set");
    let create = |tools: Option<Vec<crate::commands::agent::Tool>>| {
        AgentCmd::Create(crate::commands::agent::AgentSpec {
            name: "r1".into(),
            target: "auto".into(),
            tools,
            max_rounds: None,
            memory: None,
        })
    };
    use crate::commands::agent::Tool;
    type Case<'a> = (&'a Caller, &'a str, Result<AgentCmd<String>, &'a str>);
    let cases: Vec<Case<'_>> = vec![
        (
            &master,
            "agent create r1 with tools=[shell]",
            Ok(create(Some(vec![Tool::Shell]))),
        ),
        (
            &master,
            "agent task r1 review $doc",
            Ok(AgentCmd::Task {
                name: "r1".into(),
                text: "review the text".into(),
                files: vec![],
            }),
        ),
        (&foreman, "agent list", Ok(AgentCmd::List)),
        (
            &foreman,
            "agent status r1",
            Ok(AgentCmd::Status(Some("r1".into()))),
        ),
        (&foreman, "done $doc", Ok(AgentCmd::Done("the text".into()))),
        (
            &foreman,
            "agent create r1",
            Err("无权控制代理 / not allowed"),
        ),
        (&foreman, "agent stop r1", Err("无权控制代理 / not allowed")),
        (&worker, "agent list", Err("are data, not orders")),
        (&worker, "done", Err("are data, not orders")),
        // A card that opens flows but not shell: the default tools need `tabs` (dispatch).
        (&open_worker, "agent create r1", Err("may not use `tabs`")),
        (
            &open_worker,
            "agent create r1 tools=[web]",
            Ok(create(Some(vec![Tool::Web]))),
        ),
        (
            &open_worker,
            "agent create r1 tools=[web,shell]",
            Err("may not use `shell`"),
        ),
        (
            &person,
            "agent create r1 tools=[shell,mcp:x]",
            Ok(create(Some(vec![Tool::Shell, Tool::Mcp("x".into())]))),
        ),
        (
            &person,
            "agent task r1 $nope",
            Err("undefined variable: $nope"),
        ),
    ];
    for (caller, body, want) in cases {
        let before = i.host().got.lock().expect("lock").len();
        let out = i.run_text(caller, body).await;
        let got = i.host().got.lock().expect("lock")[before..].to_vec();
        match want {
            Ok(req) => {
                assert!(out.success, "{body}: {}", out.output);
                assert_eq!(got, vec![req], "{body}");
            }
            Err(text) => {
                assert!(
                    !out.success && out.output.contains(text),
                    "{body}: {}",
                    out.output
                );
                assert!(got.is_empty(), "{body} reached the host");
            }
        }
    }
}
