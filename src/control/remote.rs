//! `on NODE: CMD` served here: a command another node of the cluster sent (docs/cluster.md).

use super::*;

/// How much longer than the exec timeout a node asking another waits for its answer.
pub(super) const REMOTE_MARGIN: std::time::Duration = std::time::Duration::from_secs(10);

/// `on NODE: CMD` as sent to NODE (docs/cluster.md remote execution).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct RemoteRequest {
    pub(super) command: String,
    /// Who asked: its client id on its own node, and its name there.
    pub(super) client_id: String,
    pub(super) shown: String,
    pub(super) role: String,
    pub(super) group: Option<String>,
    /// Typed by the person (else written by a model).
    pub(super) person: bool,
    /// Its shell permission on its own node (its role card's).
    pub(super) shell: bool,
    /// Its variables, for the command's `$var`s.
    pub(super) vars: BTreeMap<String, String>,
}

/// What NODE answers: the command's outcome, and how many pieces of live output it sent first.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct RemoteAnswer {
    pub(super) success: bool,
    pub(super) output: String,
    pub(super) pieces: u64,
}

/// Runs a command another node asked for (docs/cluster.md): a shell command or a skill, under this
/// node's exec policy, as the asker (its role, its shell permission, never more than this
/// node would give that role). The audit line names who asked from which node.
pub async fn serve_remote(control: Arc<Control>, call: crate::hub::engine::RemoteCall) {
    let crate::hub::engine::RemoteCall {
        from,
        body,
        output,
        answer,
    } = call;
    let pieces = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let outcome = match serde_json::from_slice::<RemoteRequest>(&body) {
        Err(e) => (false, format!("无效请求 / a bad request: {e}")),
        Ok(req) => run_remote(&control, &from, req, output, pieces.clone()).await,
    };
    let reply = RemoteAnswer {
        success: outcome.0,
        output: outcome.1,
        pieces: pieces.load(std::sync::atomic::Ordering::Relaxed),
    };
    let _ = answer.send(serde_json::to_vec(&reply).unwrap_or_default());
}

pub(super) async fn run_remote(
    control: &Arc<Control>,
    from: &str,
    req: RemoteRequest,
    output: tokio::sync::mpsc::Sender<String>,
    pieces: Arc<std::sync::atomic::AtomicU64>,
) -> (bool, String) {
    use crate::commands::permissions::{Role as CmdRole, Source};
    let cmd = match crate::commands::parser::parse(&req.command) {
        Ok(c @ (Command::Shell { .. } | Command::Skill(_))) => c,
        Ok(_) => {
            return (
                false,
                "on NODE: 只能运行 shell 命令或技能 / runs a shell command or a skill only".into(),
            )
        }
        Err(e) => return (false, e.to_string()),
    };
    let role = CmdRole::parse(&req.role).unwrap_or(CmdRole::Worker);
    let source = if req.person {
        Source::UserInput
    } else {
        Source::Reply
    };
    // The audit line's caller: who, from which node.
    let who = format!("{} ({}) @ {from}", req.shown, req.client_id);
    let mut caller = Caller::new(who, role, req.group.clone(), source);
    caller.permissions.shell &= req.shell;
    let node = control.engine.node().to_string();
    let forwarders = tokio_util::task::TaskTracker::new();
    let host = HubHost {
        control: control.clone(),
        parent: None,
        live: None,
        cause: crate::events::Cause::default(),
        remote: Some(RemoteOutput {
            to: output,
            pieces,
            forwarders: forwarders.clone(),
        }),
    };
    let interp = Interpreter::new(
        host,
        control.commands.exec.clone(),
        control.commands.vars.clone(),
    );
    let out = interp.run_with(&caller, &cmd, req.vars).await;
    // Every piece of output is on its way before the answer (the asker counts them).
    drop(interp);
    forwarders.close();
    forwarders.wait().await;
    let text = if out.success {
        out.output
    } else if control.commands.exec.mode == crate::exec::ExecMode::Off
        && matches!(cmd, Command::Shell { .. })
    {
        format!("节点 `{node}` 未开启 shell（--exec off）/ node `{node}` runs no shell commands (--exec off): {}", out.output)
    } else {
        out.output
    };
    (out.success, text)
}
