//! `aicard mcp doctor`: the config snippets for Claude Desktop, Cursor and Cline, and one
//! round trip through the hub's `/mcp` (initialize, tools/list, list_tabs).

use rmcp::model::CallToolRequestParams;
use serde_json::json;

/// The snippets, for a binary at `exe`, a hub at `url` with `data_dir`.
pub fn snippets(exe: &str, url: &str, data_dir: &str) -> String {
    let stdio = json!({"mcpServers": {"aicard": {
        "command": exe, "args": ["mcp", "--hub", url, "--data-dir", data_dir]}}});
    let cursor = json!({"mcpServers": {"aicard": {
        "url": format!("{url}/mcp"), "headers": {"Authorization": "Bearer <aicard token>"}}}});
    let cline = json!({"mcpServers": {"aicard": {
        "command": exe, "args": ["mcp", "--hub", url, "--data-dir", data_dir],
        "disabled": false, "autoApprove": ["list_tabs", "list_flows", "get_run"], "timeout": 600}}});
    format!(
        "Claude Desktop (claude_desktop_config.json; stdio only):\n{}\n\n\
         Cursor (~/.cursor/mcp.json; Streamable HTTP, token from `aicard token`):\n{}\n\n\
         Cline (cline_mcp_settings.json):\n{}\n",
        serde_json::to_string_pretty(&stdio).unwrap_or_default(),
        serde_json::to_string_pretty(&cursor).unwrap_or_default(),
        serde_json::to_string_pretty(&cline).unwrap_or_default(),
    )
}

/// One round trip; `Ok(summary)` or what went wrong.
pub async fn round_trip(url: &str, token: &str) -> Result<String, String> {
    let client = super::relay::hub_client(url, token).await?;
    let version = client
        .peer_info()
        .map(|i| i.protocol_version.to_string())
        .unwrap_or_default();
    let tools = client
        .list_all_tools()
        .await
        .map_err(|e| format!("tools/list failed: {e}"))?;
    let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    let want = [
        "list_tabs",
        "ask",
        "fan_out",
        "run_flow",
        "get_run",
        "cancel",
        "list_flows",
    ];
    if names.len() < want.len() || names[..want.len()] != want {
        return Err(format!("unexpected tools: {names:?}"));
    }
    let r = client
        .call_tool(CallToolRequestParams::new("list_tabs"))
        .await
        .map_err(|e| format!("list_tabs failed: {e}"))?;
    let tabs = r
        .structured_content
        .as_ref()
        .and_then(|v| v["tabs"].as_array().map(Vec::len))
        .unwrap_or(0);
    let _ = client.cancel().await;
    Ok(format!(
        "ok: {url}/mcp answered (protocol {version}); {} tools; {tabs} tabs connected",
        names.len()
    ))
}
