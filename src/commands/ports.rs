//! The ports the interpreter runs commands through, one per domain: [`Tabs`] (asking tabs,
//! roles), [`Flows`] (the flow engine), [`Services`] (memory, skills, MCP, events, agents),
//! [`Cluster`] (other nodes) and [`ExecSink`] (where live shell output goes). The hub
//! implements them all (`control::host`); a test double implements the tabs and takes the
//! honest "not here" defaults of the rest. [`Host`] is the sum the interpreter asks for.
//!
//! Async methods return `Send` futures so the interpreter can run inside `tokio::spawn`.

use super::agent::AgentCmd;
use super::ast::{EventCmd, FlowRequest, McpRequest, Role, Target};
use super::permissions::Caller;
use crate::exec::ExecChunk;
use crate::protocol::Prompt;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use thiserror::Error;
use tokio::sync::mpsc;

/// Errors the host reports (a missing tab, a tab that failed, no flow engine, …).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HostError {
    /// No tab matches the name.
    #[error("没有这个标签页 / no such tab: {0}")]
    UnknownTarget(String),
    /// The tab exists but is not connected.
    #[error("标签页未连接 / tab not connected: {0}")]
    NotConnected(String),
    /// The tab did not answer in time.
    #[error("等待超时 / no answer from {target} within {secs} s")]
    Timeout {
        /// The tab.
        target: String,
        /// The timeout.
        secs: u64,
    },
    /// The tab reported a failure (429, captcha, login page, …).
    #[error("{target} 失败 / {target} failed: {message}")]
    Failed {
        /// The tab.
        target: String,
        /// What it said.
        message: String,
    },
    /// `manager` / `flow` before the flow engine exists.
    #[error("流程引擎尚未启用 / no flow engine is available yet; `manager` and `flow` commands cannot run")]
    NoFlowEngine,
    /// Anything else, already worded for a person.
    #[error("{0}")]
    Other(String),
}

/// The tabs: asking them (`to`, `parallel`, `send_to_all`, `from`), choosing them by selector,
/// their groups, roles and role cards.
pub trait Tabs: Send + Sync {
    /// Send `prompt` to one tab (site name, label or client id) through its queue and wait
    /// for its reply. A missing or disconnected tab is an error naming it.
    fn ask(
        &self,
        caller: &Caller,
        target: &str,
        prompt: Prompt,
    ) -> impl Future<Output = Result<String, HostError>> + Send;

    /// Ask every `(target, prompt)` concurrently; the answers come back in the same order.
    /// A host can hand every prompt to its tab before waiting on any (the default just runs
    /// `ask`s side by side).
    fn ask_all(
        &self,
        caller: &Caller,
        work: Vec<(String, Prompt)>,
    ) -> impl Future<Output = Vec<Result<String, HostError>>> + Send {
        async move {
            let asks = work
                .into_iter()
                .map(|(target, prompt)| async move { self.ask(caller, &target, prompt).await });
            futures_util::future::join_all(asks).await
        }
    }

    /// [`Tabs::ask`] with files attached (names in the files folder, docs/files.md). A host
    /// that carries no files refuses them rather than sending the text alone.
    fn ask_files(
        &self,
        caller: &Caller,
        target: &str,
        prompt: Prompt,
        files: Vec<String>,
    ) -> impl Future<Output = Result<String, HostError>> + Send {
        async move {
            if files.is_empty() {
                self.ask(caller, target, prompt).await
            } else {
                Err(HostError::Other(
                    "这里不能附带文件 / files cannot be attached here".into(),
                ))
            }
        }
    }

    /// [`Tabs::ask_all`] where each prompt may carry files.
    fn ask_all_files(
        &self,
        caller: &Caller,
        work: Vec<(String, Prompt, Vec<String>)>,
    ) -> impl Future<Output = Vec<Result<String, HostError>>> + Send {
        async move {
            if work.iter().all(|(_, _, f)| f.is_empty()) {
                let plain = work.into_iter().map(|(t, p, _)| (t, p)).collect();
                return self.ask_all(caller, plain).await;
            }
            let asks = work.into_iter().map(|(target, prompt, files)| async move {
                self.ask_files(caller, &target, prompt, files).await
            });
            futures_util::future::join_all(asks).await
        }
    }

    /// The latest complete reply of a tab (for `from X:`).
    fn last_reply(&self, target: &str) -> impl Future<Output = Result<String, HostError>> + Send;

    /// Tabs matching a selector (`role:worker`, `group:g`), as names `ask` accepts.
    fn select(&self, selector: &Target) -> Vec<String>;

    /// Every connected worker tab, as names `ask` accepts.
    fn all_workers(&self) -> Vec<String>;

    /// Whether tab `target` belongs to group `group`.
    fn in_group(&self, target: &str, group: &str) -> bool;

    /// A role card's name and `test_command`: the named card, or the card of the caller's
    /// tab. Default: no cards.
    fn card_test(
        &self,
        _caller: &Caller,
        _card: Option<&str>,
    ) -> Result<(String, String), HostError> {
        Err(HostError::Other(
            "这里没有角色卡 / no role cards here".into(),
        ))
    }

    /// Set the calling tab's role; returns the confirmation to show.
    fn set_role(
        &self,
        caller: &Caller,
        role: Role,
        group: Option<String>,
    ) -> impl Future<Output = Result<String, HostError>> + Send;
}

/// The flow engine (`manager …`, `flow …`). Default: no engine yet.
pub trait Flows: Send + Sync {
    /// A `manager` or `flow` command, for the flow engine. Default: no engine yet.
    fn flows(
        &self,
        caller: &Caller,
        request: FlowRequest,
    ) -> impl Future<Output = Result<String, HostError>> + Send {
        let _ = (caller, request);
        async { Err(HostError::NoFlowEngine) }
    }
}

/// The team's services: memory, skills, MCP servers, the event bus and the agent loop.
/// Each default refuses in words a person can act on.
pub trait Services: Send + Sync {
    /// The team's memory (None: `remember` and `memory` are refused).
    fn memory(&self) -> Option<Arc<crate::memory::Memory>> {
        None
    }

    /// The skills loaded now (None: `skill` is refused).
    fn skills(&self) -> Option<Arc<crate::skills::SkillSet>> {
        None
    }

    /// An `mcp` command, for the hub's MCP client. Default: none configured.
    fn mcp(
        &self,
        caller: &Caller,
        request: McpRequest,
    ) -> impl Future<Output = Result<String, HostError>> + Send {
        let _ = (caller, request);
        async {
            Err(HostError::Other(
                "MCP 客户端不可用 / no MCP client is available here".into(),
            ))
        }
    }

    /// A command of `caller` produced a file (a `returns: file` skill, kept by the Files
    /// service): when an agent session runs in the caller's tab, the loop attaches it to that
    /// tab's next results message (docs/files.md "Back"); true then. Default: nobody takes it.
    fn result_file(&self, caller: &Caller, file: &crate::skills::KeptFile) -> bool {
        let _ = (caller, file);
        false
    }

    /// An `agent …` or `done` command, its text expanded, for the agent loop (docs/agents.md).
    /// Default: no agent loop here.
    fn agent(
        &self,
        caller: &Caller,
        cmd: AgentCmd<String>,
    ) -> impl Future<Output = Result<String, HostError>> + Send {
        let _ = (caller, cmd);
        async {
            Err(HostError::Other(
                "代理不可用 / agents are not available here".into(),
            ))
        }
    }

    /// `publish`, `subscribe`, `unsubscribe`, texts expanded: the hub's event bus (docs/cluster.md).
    /// Default: no bus here.
    fn events(
        &self,
        caller: &Caller,
        cmd: EventCmd<String>,
    ) -> impl Future<Output = Result<String, HostError>> + Send {
        let _ = (caller, cmd);
        async {
            Err(HostError::Other(
                "事件不可用 / events are not available here".into(),
            ))
        }
    }
}

/// The other nodes of a cluster (`on NODE: …`, docs/cluster.md). Default: no cluster.
pub trait Cluster: Send + Sync {
    /// This hub's node name (`local` outside a cluster): `on NODE:` naming it runs here.
    fn node(&self) -> String {
        "local".into()
    }

    /// `on NODE: CMD` for another node (docs/cluster.md): runs `command` there, as `caller`, with
    /// `vars` bound, under that node's exec policy; its live output goes where
    /// [`ExecSink::exec_output`] says. Returns (success, output). Default: no cluster.
    fn on_node(
        &self,
        caller: &Caller,
        node: &str,
        command: &str,
        vars: BTreeMap<String, String>,
    ) -> impl Future<Output = Result<(bool, String), HostError>> + Send {
        let _ = (caller, command, vars);
        let node = node.to_string();
        async move {
            Err(HostError::Other(format!(
                "没有节点 `{node}`：此集线器不在集群中 / no node `{node}`: this hub is not in a cluster"
            )))
        }
    }
}

/// Where live shell output of a running command goes (`cmd_output` frames).
pub trait ExecSink: Send + Sync {
    /// Where live shell output for this caller goes while a command runs (None: nowhere).
    fn exec_output(&self, caller: &Caller) -> Option<mpsc::Sender<ExecChunk>> {
        let _ = caller;
        None
    }
}

/// Everything the interpreter needs from the hub: every port. Implemented for any type
/// that implements them all.
pub trait Host: Tabs + Flows + Services + Cluster + ExecSink {}

impl<T: Tabs + Flows + Services + Cluster + ExecSink> Host for T {}
