//! The integration tests, one binary (docs/ARCHITECTURE.md, "Tests"): each module starts the
//! real hub on port 0 and talks to it over real sockets. One binary links the crate once
//! instead of once per file. `idle_memory` (its own global allocator) and `slow_consumer`
//! (timing under a stalled reader) stay binaries of their own.
//!
//! Run one module with `cargo test --test it agents::`.

mod common;

mod agents;
mod agents_files;
mod agents_restart;
mod api;
mod cluster;
mod commands;
mod dashboard;
mod dashboard_agents;
mod drift;
mod events;
mod flows;
mod hostile;
mod hub;
mod layers;
mod mcp;
mod memory;
mod names;
mod plan;
mod protocol_doc;
mod quotas;
mod roles;
mod seed_flows;
mod seed_idioms;
mod seed_manual;
mod skills;
mod webhooks;
mod ws_conformance;
