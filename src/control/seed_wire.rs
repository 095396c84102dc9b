//! The manual's own frames on `/realtime` (docs/protocol.md, "The manual's frames"): a tab
//! running the manual's script asks with `flow_report` whether it may send the next message
//! and is answered `flow_control {action: auto_send|wait, should_auto_send}` from the agent
//! loop's two thresholds — the model's turn ended, and every command found in it has its
//! result — and never after a person's Stop (until they speak there) nor while they hold the
//! tab (a key pressed in its input box within `--agent-hold-ms`). Its `flow_data` reaches the
//! window it names under the dispatch rules, as a frame of its own: never typed, sent or
//! scanned for commands.

use super::*;

/// The most a `flow_data` may carry (its `data` and `metadata` as JSON).
pub const FLOW_DATA_MAX: usize = 64 * 1024;

/// The answer to a `flow_report`.
pub fn flow_report(
    control: &Control,
    client: &Client,
    report: &crate::protocol::FlowReport,
) -> ServerFrame {
    let wait = |reason: &str| ServerFrame::FlowControl {
        action: "wait".into(),
        reason: reason.into(),
        should_auto_send: Some(false),
    };
    if control.loops.is_stopped(&client.id) {
        return wait("已停止：等你在这个标签页发消息 / stopped by a person: nothing is sent until they write here");
    }
    let hold = std::time::Duration::from_millis(control.config.agent.hold_ms);
    if control.commands.held_within(&client.id, hold) {
        return wait(&format!(
            "有人正在输入 / a person is typing in this tab: nothing is sent within {} ms of their last key",
            hold.as_millis()
        ));
    }
    let finished = report.event == "flow_end"
        || report
            .quasi_status
            .as_deref()
            .or(report.status.as_deref())
            .is_some_and(|s| s.eq_ignore_ascii_case("finished") || s.eq_ignore_ascii_case("done"));
    if !finished {
        return wait("模型还在回答 / the model is still answering");
    }
    let running = control.commands.running_in(&client.id);
    if running > 0 {
        return wait(&format!(
            "还有 {running} 条命令在运行 / {running} command(s) of this turn still run"
        ));
    }
    ServerFrame::FlowControl {
        action: "auto_send".into(),
        reason: "回合已结束，命令都有结果 / the turn ended and every command has its result".into(),
        should_auto_send: Some(true),
    }
}

/// Delivers a `flow_data` to the window it names; the sender's error otherwise.
pub fn flow_data(
    control: &Control,
    client: &Client,
    mut data: crate::protocol::FlowData,
) -> Option<ServerFrame> {
    let refuse = |code, message: String| Some(ServerFrame::error(code, message));
    let size = serde_json::to_string(&data.data).map_or(0, |s| s.len())
        + data
            .metadata
            .as_ref()
            .and_then(|m| serde_json::to_string(m).ok())
            .map_or(0, |s| s.len());
    if size > FLOW_DATA_MAX {
        return refuse(
            crate::protocol::ErrorCode::Limit,
            format!("flow_data 太大 / flow_data carries {size} bytes, over {FLOW_DATA_MAX}"),
        );
    }
    let window = data.to_window.clone();
    let unknown = || {
        refuse(
            crate::protocol::ErrorCode::UnknownWindow,
            format!(
                "没有这个窗口 / unknown window `{window}`: no tab this one may reach has that label or id"
            ),
        )
    };
    let targets: Vec<Arc<Client>> = control
        .registry
        .resolve(&data.to_window)
        .into_iter()
        .filter(|c| c.id != client.id && c.state() == ConnState::Connected)
        .collect();
    let [target] = targets.as_slice() else {
        return unknown();
    };
    // The tab's script has the tab's own authority, as its model's replies do (docs/commands.md).
    let caller = control.commands.caller(client, Source::Reply);
    let name = target.info().label.unwrap_or_else(|| target.id.clone());
    let in_group = |t: &str, g: &str| {
        let tabs = control.registry.resolve(t);
        !tabs.is_empty() && tabs.iter().all(|c| c.info().group.as_deref() == Some(g))
    };
    if crate::commands::permissions::check(
        &caller,
        crate::commands::permissions::Intent::Dispatch(&name),
        in_group,
    )
    .is_err()
    {
        return unknown();
    }
    data.from_window = Some(client.info().label.unwrap_or_else(|| client.id.clone()));
    if let Err(e) = control
        .registry
        .send(&target.id, &ServerFrame::FlowData(data))
    {
        tracing::warn!("flow_data not delivered: {e}");
        return unknown();
    }
    None
}
