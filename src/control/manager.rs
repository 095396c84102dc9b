//! `manager …` and `flow …`: flows saved, run, paused, stopped, planned, imported and exported
//! (docs/flows.md); an inline body becomes a flow through `commands::inline`.

use super::*;

/// `manager …` and `flow …` verbs.
pub(super) fn manager(
    control: &Arc<Control>,
    caller: &Caller,
    request: FlowRequest,
    cause: &crate::events::Cause,
) -> Result<String, crate::runner::RunError> {
    use crate::runner::RunError;
    let runner: &Runner = &control.runner;
    let master = control
        .registry
        .get(&caller.client_id)
        .filter(|c| c.state() == ConnState::Connected)
        .map(|c| c.id.clone());
    let m = match request {
        FlowRequest::Manager(m) => m,
        FlowRequest::Flow(action) => {
            // Seed aliases act on this tab's latest run.
            let latest = runner
                .list()
                .into_iter()
                .rev()
                .find(|(id, _, _)| {
                    runner.master_of(id).as_deref() == Some(caller.client_id.as_str())
                })
                .map(|(id, _, _)| id);
            return match (action, latest) {
                (FlowAction::Start, _) => Err(RunError::Other(
                    "用 ?<manager run NAME>! 启动流程 / start a flow with ?<manager run NAME>!"
                        .into(),
                )),
                (FlowAction::Status, Some(id)) => runner.status(&id),
                (_, None) => Err(RunError::NotRunning("(this tab)".into())),
                (FlowAction::Pause, Some(id)) => runner.control(&id, RunControl::Pause),
                (FlowAction::Resume, Some(id)) => runner.control(&id, RunControl::Resume),
                (FlowAction::Stop, Some(id)) => {
                    runner.control(&id, RunControl::Stop("stopped by the master".into()))
                }
            };
        }
    };
    match m {
        ManagerCmd::Run {
            name,
            from_node,
            params,
        } => {
            let inputs: BTreeMap<String, String> = params.into_iter().collect();
            // A run a rule started carries the rule in its events' cause (the loop guard),
            // known to the bus before the run's first event.
            let note = |run: &str| control.bus.note_run(run, cause);
            let id = runner.start_noting(&name, master, inputs, from_node, &note)?;
            Ok(format!("已启动 / started {id}"))
        }
        ManagerCmd::Pause(n) => runner.control(&n, RunControl::Pause),
        ManagerCmd::Resume(n) => runner.control(&n, RunControl::Resume),
        ManagerCmd::Stop(n) => runner.control(&n, RunControl::Stop("stopped by the master".into())),
        ManagerCmd::Status(n) => runner.status(&n),
        ManagerCmd::Show(n) if n.starts_with("plan-") => {
            plan_verb(crate::planner::show(&control.planner, &n))
        }
        ManagerCmd::Show(n) => {
            let (flow, _) = Runner::load_flow(control, &n)?;
            Ok(crate::flows::render::text(&flow))
        }
        ManagerCmd::Approve { id, params } => plan_verb(crate::planner::approve(
            &control.planner,
            master,
            &id,
            params.into_iter().collect(),
        )),
        ManagerCmd::Reject(id) => plan_verb(crate::planner::reject(&control.planner, &id)),
        ManagerCmd::Save { id, name } => {
            plan_verb(crate::planner::save(&control.planner, &id, &name))
        }
        ManagerCmd::Why { run, node } => {
            crate::pick::why(&control.asks.pick, &run, &node).map_err(RunError::Other)
        }
        ManagerCmd::Tabs => Ok(crate::pick::tabs_report(&control.asks.pick)),
        ManagerCmd::Budget { site, quota } => {
            crate::pick::budget(&control.asks.pick, site.as_deref(), quota.as_deref())
                .map_err(RunError::Other)
        }
        ManagerCmd::Plan(_) | ManagerCmd::Modify { .. } => Err(RunError::Other(
            "内部错误 / internal: planning is answered by the command host".into(),
        )),
        ManagerCmd::List => {
            let mut out = String::from("流程 / flows:\n");
            let mut names = control.store.saved_flows()?;
            if let Ok(entries) = std::fs::read_dir(&control.config.flows_dir) {
                for e in entries.flatten() {
                    let p = e.path();
                    if matches!(p.extension().and_then(|x| x.to_str()), Some("yaml" | "yml")) {
                        if let Some(stem) = p.file_stem().and_then(|s| s.to_str()) {
                            names.push(stem.to_string());
                        }
                    }
                }
            }
            names.sort();
            names.dedup();
            for n in names {
                out.push_str(&format!("  {n}\n"));
            }
            out.push_str(&crate::planner::list(&control.planner));
            let runs = runner.list();
            if !runs.is_empty() {
                out.push_str("运行中 / runs in progress:\n");
                for (id, flow, st) in runs {
                    out.push_str(&format!("  {id} ({flow}): {st}\n"));
                }
            }
            Ok(out)
        }
        ManagerCmd::Delete(n) => {
            if control.store.delete_flow(&n)? {
                Ok(format!("已删除 / deleted saved flow {n}"))
            } else {
                Err(RunError::Other(format!(
                    "只能删除用 manager create 保存的流程 / only flows saved with `manager create` can be deleted; `{n}` is not one"
                )))
            }
        }
        ManagerCmd::Create {
            name,
            source,
            auto_retry,
        } => {
            let text = match source {
                FlowSource::Inline(chain) => {
                    let known = control.commands.vars.snapshot(&caller.client_id);
                    let policy = &control.commands.exec;
                    let may_run =
                        |line: &str| crate::exec::check(policy, line).map_err(|e| e.to_string());
                    crate::commands::inline::flow_yaml(&name, &chain, &known, auto_retry, &may_run)
                        .map_err(RunError::Invalid)?
                }
                FlowSource::File(path) => {
                    if auto_retry.is_some() {
                        return Err(RunError::Other(
                            "auto_retry 只用于内联定义 / auto_retry is for an inline definition; \
                             in a file write `defaults: {retry: {max: N}}`"
                                .into(),
                        ));
                    }
                    read_flow_file(control, &path)?
                }
            };
            crate::flows::load_str(&name, &text).map_err(|d| {
                RunError::Invalid(
                    d.iter()
                        .map(|d| d.to_string())
                        .collect::<Vec<_>>()
                        .join("\n"),
                )
            })?;
            control
                .store
                .save_flow(&name, &text, crate::store::now_ms())?;
            Ok(format!("已保存流程 / saved flow {name}"))
        }
        ManagerCmd::Export { name, path } => {
            let (flow, _) = Runner::load_flow(control, &name)?;
            let file = export_path(control, &path)?;
            let json =
                serde_json::to_string_pretty(&flow).map_err(|e| RunError::Other(e.to_string()))?;
            std::fs::create_dir_all(file.parent().unwrap_or(&control.config.data_dir))
                .and_then(|_| std::fs::write(&file, json))
                .map_err(|e| RunError::Other(format!("cannot write {}: {e}", file.display())))?;
            Ok(format!("已导出 / exported {name} to {}", file.display()))
        }
    }
}

pub(super) fn plan_verb(
    r: Result<String, crate::planner::PlanError>,
) -> Result<String, crate::runner::RunError> {
    r.map_err(|e| crate::runner::RunError::Other(e.to_string()))
}

/// Reads a flow file named in a command: relative, inside the working directory.
pub(super) fn read_flow_file(
    control: &Control,
    path: &std::path::Path,
) -> Result<String, crate::runner::RunError> {
    use crate::runner::RunError;
    if path.is_absolute()
        || path
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(RunError::Other(
            "只接受当前目录下的相对路径 / only a relative path inside the working directory is accepted".into(),
        ));
    }
    let candidates = [path.to_path_buf(), control.config.flows_dir.join(path)];
    for p in candidates {
        if let Ok(text) = std::fs::read_to_string(&p) {
            return Ok(text);
        }
    }
    Err(RunError::Other(format!(
        "找不到文件 / no file {}",
        path.display()
    )))
}

/// Exports go under `data_dir/exports`, whatever path was asked for (file name kept).
pub(super) fn export_path(
    control: &Control,
    path: &std::path::Path,
) -> Result<std::path::PathBuf, crate::runner::RunError> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| !n.starts_with('.'))
        .ok_or_else(|| crate::runner::RunError::Other("无效文件名 / bad file name".into()))?;
    Ok(control.config.data_dir.join("exports").join(name))
}
