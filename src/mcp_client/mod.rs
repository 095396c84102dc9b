//! The MCP client side of the command language (docs/mcp.md): the servers of `mcp.json`
//! ([`config`]) that `?<mcp list>!`, `?<mcp use …>!` and flow nodes `mcp:` call, through
//! [`client::Clients`]. Below the command host, so `control` and the runner reach it without
//! climbing to the MCP door (`crate::mcp`, the server side). With `mcp`, the only modules
//! that name `rmcp`.

use std::path::{Path, PathBuf};

pub mod client;
pub mod config;
pub mod pipe;

pub use client::Clients;

/// The path of `mcp.json` in a data dir.
pub fn default_config_path(data_dir: &Path) -> PathBuf {
    data_dir.join("mcp.json")
}

/// The hub's MCP servers, from `--mcp-config` or `DATA_DIR/mcp.json`. Nothing starts until
/// the first call.
pub fn open(config: &crate::config::HubConfig) -> Clients {
    let path = config
        .mcp_config
        .clone()
        .unwrap_or_else(|| default_config_path(&config.data_dir));
    if let Ok(c) = config::load(&path) {
        if !c.servers.is_empty() {
            tracing::info!(servers = c.servers.len(), file = %path.display(), "MCP servers configured");
        }
    }
    Clients::new(
        path,
        config.data_dir.join("workspace"),
        crate::exec::DEFAULT_TIMEOUT,
    )
    .trusting(config.test_roots.clone())
}
