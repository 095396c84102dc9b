//! `agent …` and `done`: agents kept in the store, their sessions in the agent loop (docs/agents.md).

use super::*;

/// `agent …` and `done` (docs/agents.md): agents are made and kept in the store, their sessions run
/// in the loop service (`crate::agent_loop`).
pub(super) async fn agent_verb(
    control: &Arc<Control>,
    caller: &Caller,
    cmd: crate::commands::agent::AgentCmd<String>,
) -> Result<String, String> {
    use crate::agent_loop::LoopControl;
    use crate::agents::store as agents;
    use crate::commands::agent::AgentCmd;
    let store = &control.store;
    match cmd {
        AgentCmd::Create(spec) => {
            let rec = agents::AgentRecord {
                creator: caller.client_id.clone(),
                spec,
            };
            agents::save_agent(store, &rec, crate::store::now_ms()).map_err(|e| e.to_string())?;
            let tools: Vec<String> = rec
                .spec
                .tools_or_default()
                .iter()
                .map(ToString::to_string)
                .collect();
            Ok(format!(
                "已创建代理 / agent `{}` created on {} with tools [{}]; give it work with ?‹agent task {} …›!",
                rec.spec.name,
                rec.spec.target,
                tools.join(", "),
                rec.spec.name
            ))
        }
        AgentCmd::Task { name, text, files } => {
            let rec = agents::agent(store, &name)
                .map_err(|e| e.to_string())?
                .ok_or_else(|| crate::agent_loop::LoopError::NoAgent(name.clone()).to_string())?;
            // Names in the files folder, each checked before anything is sent (docs/files.md).
            let files = control
                .tasks
                .files
                .named_all(&files)
                .map_err(|e| e.to_string())?;
            control
                .loops
                .task_with_files(rec, &text, files)
                .await
                .map_err(|e| e.to_string())
        }
        AgentCmd::Status(name) => Ok(agent_status(control, name.as_deref())),
        AgentCmd::Memory(None) => {
            // No name: the agent of this tab's session, else every agent's scope in a line.
            if let Some(rec) = control.loops.agent_of(&caller.client_id) {
                return agent_memory(control, &rec);
            }
            let list = agents::agents(store).map_err(|e| e.to_string())?;
            let mut out = String::from("代理的记忆 / agents' memory:\n");
            if list.is_empty() {
                out.push_str("  (none) — ?‹agent create NAME on TAB›!\n");
            }
            for a in list {
                let scope = crate::agent_loop::scope_of(&a);
                let n = control
                    .commands
                    .memory
                    .count(&scope)
                    .map_err(|e| e.to_string())?;
                out.push_str(&format!(
                    "  {} — {scope}: {n} 条 / entries (?‹agent memory {}›!)\n",
                    a.spec.name, a.spec.name
                ));
            }
            Ok(out)
        }
        AgentCmd::Memory(Some(name)) => {
            let rec = agents::agent(store, &name)
                .map_err(|e| e.to_string())?
                .ok_or_else(|| crate::agent_loop::LoopError::NoAgent(name.clone()).to_string())?;
            agent_memory(control, &rec)
        }
        AgentCmd::List => {
            let list = agents::agents(store).map_err(|e| e.to_string())?;
            let mut out = String::from("代理 / agents:\n");
            if list.is_empty() {
                out.push_str("  (none) — ?‹agent create NAME on TAB›!\n");
            }
            for a in list {
                let tools: Vec<String> = a
                    .spec
                    .tools_or_default()
                    .iter()
                    .map(ToString::to_string)
                    .collect();
                out.push_str(&format!(
                    "  {} on {} tools [{}]\n",
                    a.spec.name,
                    a.spec.target,
                    tools.join(", ")
                ));
            }
            Ok(out)
        }
        AgentCmd::Stop(name) => control
            .loops
            .control(&whose(&name, caller), LoopControl::Stop),
        AgentCmd::Pause(name) => control
            .loops
            .control(&whose(&name, caller), LoopControl::Pause),
        AgentCmd::Resume(name) => control
            .loops
            .control(&whose(&name, caller), LoopControl::Resume),
        AgentCmd::Loop(on) => {
            if caller.role == CmdRole::Worker && !caller.is_person() {
                return Err("工人的回复不循环 / a worker's replies never loop".into());
            }
            if !control.loops.enabled() {
                return Err(crate::agent_loop::LoopError::Off.to_string());
            }
            control.loops.set_loop(&caller.client_id, on);
            Ok(if on {
                "循环已开启：命令结果会发回这个对话 / loop on: the results of this tab's commands come back into its chat".into()
            } else {
                "循环已关闭 / loop off".into()
            })
        }
        AgentCmd::Done(_) => Ok(if control.loops.has_session(&caller.client_id) {
            "已完成 / done".into()
        } else {
            "没有运行中的会话 / no session runs in this tab".into()
        }),
    }
}

/// `agent memory NAME`: the agent's hottest memories.
pub(super) fn agent_memory(
    control: &Control,
    rec: &crate::agents::store::AgentRecord,
) -> Result<String, String> {
    let name = &rec.spec.name;
    let scope = crate::agent_loop::scope_of(rec);
    let entries = control
        .commands
        .memory
        .hottest(&scope, 20)
        .map_err(|e| e.to_string())?;
    let mut out = format!("代理 {name} 的记忆 / memory of agent `{name}` ({scope}):\n");
    if entries.is_empty() {
        out.push_str("  (none)\n");
    }
    for e in entries {
        out.push_str(&format!("  #{} [{}] {}\n", e.id, e.importance, e.text));
    }
    Ok(out)
}

/// The session an `agent stop|pause|resume [NAME]` acts on: the agent's, or the tab's own.
pub(super) fn whose<'a>(
    name: &'a Option<String>,
    caller: &'a Caller,
) -> crate::agent_loop::Who<'a> {
    match name {
        Some(n) => crate::agent_loop::Who::Agent(n),
        None => crate::agent_loop::Who::Tab(&caller.client_id),
    }
}

/// `agent status [NAME]`: sessions now and lately, newest first.
pub(super) fn agent_status(control: &Control, name: Option<&str>) -> String {
    let views: Vec<_> = control
        .loops
        .sessions()
        .into_iter()
        .filter(|v| name.is_none() || v.agent.as_deref() == name)
        .collect();
    let mut out = String::from("代理会话 / agent sessions:\n");
    if views.is_empty() {
        out.push_str("  (none)\n");
    }
    for v in views {
        let tab = control
            .registry
            .get(&v.tab)
            .map(|c| c.display())
            .unwrap_or(v.tab.clone());
        out.push_str(&format!(
            "  {} {} on {tab}: {} round {}/{}",
            v.session,
            v.agent.as_deref().unwrap_or("(loop)"),
            v.state,
            v.round,
            v.of
        ));
        if let Some(c) = &v.running {
            out.push_str(&format!(", running {}", crate::agents::results::defuse(c)));
        } else if let Some(last) = &v.last {
            let last = crate::agent_loop::LastCommand {
                command: crate::agents::results::defuse(&last.command),
                ok: last.ok,
            };
            out.push_str(&format!(", 最后命令 / last command {last}"));
        }
        if let Some(w) = &v.why {
            out.push_str(&format!(" — {w}"));
        }
        out.push('\n');
    }
    out
}
