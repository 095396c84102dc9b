//! What the layers above the hub (commands, the API, MCP) do with a tab's frames: the frame
//! handler. `crate::app` builds it last, over the components it calls, and hands it to
//! [`Hub::serve`](super::Hub::serve), which gives it to the transports (the tabs' routes'
//! state, [`TabDoor`](super::TabDoor)) and to the cluster engine's event loop. The hub never
//! holds it and never names the modules that implement it, so nothing below `app` imports
//! anything above it.

use std::sync::Arc;

use super::registry::Client;
use crate::protocol::{TaskState, Trouble};

/// Callbacks from the transports to the layers above them. Every method has a no-op default:
/// a hub served with [`NoHooks`] routes frames and queues tasks, and does nothing else.
pub trait Hooks: Send + Sync {
    /// A streamed delta of a free turn (no task in flight): commands in it may run. `seq` 0
    /// for a turn already streaming is the same reply sent again from its start.
    fn free_chunk(&self, _client: &Arc<Client>, _turn_id: &str, _seq: u64, _text: &str) {}
    /// A streamed delta of a task's reply.
    fn task_chunk(
        &self,
        _client: &Arc<Client>,
        _task_id: &str,
        _turn_id: &str,
        _text: &str,
        _reasoning: Option<&str>,
    ) {
    }
    /// A turn finished (free or answering a task): counts for memory temperature.
    fn turn_counted(&self, _client: &Arc<Client>) {}
    /// A free turn finished: its commands may run.
    fn free_turn_end(&self, _client: &Arc<Client>, _turn_id: &str, _text: &str) {}
    /// The person typed something into the tab.
    fn user_input(&self, _client: &Arc<Client>, _text: &str) {}
    /// The manual's `flow_report`: the answer (`flow_control`), if any.
    fn flow_report(
        &self,
        _client: &Arc<Client>,
        _report: &crate::protocol::FlowReport,
    ) -> Option<crate::protocol::ServerFrame> {
        None
    }
    /// The manual's `flow_data`: delivered to its window, or the sender's error.
    fn flow_data(
        &self,
        _client: &Arc<Client>,
        _data: crate::protocol::FlowData,
    ) -> Option<crate::protocol::ServerFrame> {
        None
    }
    /// The tab holds what it was given while the person types in its box (or while it
    /// attaches a delivery's files): delivery `deliver_id` when the report names one, else
    /// the task the report names.
    fn held(&self, _client: &Arc<Client>, _deliver_id: Option<&str>) {}
    /// The tab could not send delivery `deliver_id` (`task_update {deliver_id, state:
    /// "failed"}`; `attachment_refused`: the site refused one of its files): nothing was sent.
    fn delivery_failed(
        &self,
        _client: &Arc<Client>,
        _deliver_id: &str,
        _error: &str,
        _trouble: Option<Trouble>,
    ) {
    }
    /// A tab reported progress on a task; `current` when it is the task the tab works on
    /// now (called before the task queue sees the update).
    fn task_update(
        &self,
        _client: &Arc<Client>,
        _task_id: &str,
        _state: TaskState,
        _trouble: Option<Trouble>,
        _current: bool,
    ) {
    }
    /// A tab finished the reply to its task (`chars` of answer text); the hub says that
    /// tasks moved right after.
    fn task_answered(&self, _client: &Arc<Client>, _chars: usize) {}
    /// A tab's heartbeat no longer reports trouble (a person solved the check).
    fn trouble_cleared(&self, _client: &Arc<Client>) {}
    /// Another node put an event on its bus (JSON of `events::Event`).
    fn bus_event(&self, _body: &[u8]) {}
    /// Another node asks this one to run a command; dropped, the asker hears no answer.
    fn remote_call(&self, _call: super::engine::RemoteCall) {}
    /// The server stops: called once the shutdown token is cancelled and before the hub
    /// closes its sockets.
    fn shutdown(&self) {}
}

/// The hooks of a bare hub: it routes frames and queues tasks.
pub struct NoHooks;

impl Hooks for NoHooks {}
