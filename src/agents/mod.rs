//! The agent loop (docs/agents.md): a tab whose model writes commands, reads what they returned and
//! goes on until it is done — as pure, tested parts the hub's wiring calls.
//!
//! - [`session`]: one session's state machine (both thresholds, order, limits, pacing,
//!   arrival, pause and stop, never counting a command twice), time passed in;
//! - [`results`]: the results message the tab reads, defused so quoting it runs nothing, and
//!   the detection of result headers a model forged;
//! - [`primer`]: what the model is told first, from facts passed in, under 3,000 characters;
//! - [`memory_stream`]: one observation per round, importance summed into reflections;
//! - [`store`]: agents, sessions and rounds in the SQLite store (a numbered migration).
//!
//! Not here (wired in the next step, after the "ask a tab" service): the hub hooks that feed a
//! session with `turn_end` / `cmd_result` / `task_update` and send its `deliver`s.

pub mod memory_stream;
pub mod primer;
pub mod results;
pub mod session;
pub mod store;
