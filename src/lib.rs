//! AIcard hub library: everything the `aicard` binary does, as modules a test can drive.
//!
//! Code map (see docs/ARCHITECTURE.md): `protocol` (wire frames, the only module that knows
//! JSON shapes), `hub` (server, auth, registry/routing, task queues, transports), `commands`
//! (the `?<…>!` language), `exec` (the only module that spawns processes), `mcp` (MCP server
//! and client; the only module that names rmcp), `flows` (flow files
//! and the pure run engine), `decide` (the pure decision engine behind `auto` targets), `pick`
//! (its bridge to the hub), `ask` (asking tabs: resolve, pick, submit, wait), `agents` (the
//! agent loop's pure core), `planner` (`manager plan`: goal → validated, repaired, approved
//! flow), `store` (SQLite), `webhooks` (signed lifecycle callbacks), `events` (the event bus and its stored rules), `rules` (running them), `spawn` (the cold-path
//! tasks, boxed), `config`, `cli`.

pub mod agent_loop;
pub mod agents;
pub mod api;
pub mod app;
pub mod ask;
pub mod cli;
pub mod commands;
pub mod config;
pub mod control;
pub mod dashboard;
pub mod decide;
pub mod demo;
pub mod events;
pub mod exec;
pub mod flows;
pub mod foreman;
pub mod http_client;
pub mod hub;
pub mod mcp;
pub mod mcp_client;
pub mod memory;
pub mod pick;
pub mod planner;
pub mod protocol;
pub mod roles;
pub mod rules;
pub mod runner;
pub mod sim;
pub mod skills;
pub mod spawn;
pub mod store;
pub mod webhooks;
