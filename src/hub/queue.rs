//! One tab's task queue and what a task comes to: the part of the task queues that a tab's
//! `Client` holds (`hub::registry`) and `hub::tasks` works on, so neither names the other's
//! types through a circle.

use std::collections::VecDeque;

use tokio::sync::oneshot;

use super::engine::WireError;
use crate::protocol::TaskFrame;

/// What a task came to: the tab's reply (or why there is none), and when the first chunk of
/// that reply streamed in.
#[derive(Debug)]
pub struct Outcome {
    pub result: Result<String, TaskError>,
    /// When (ms since the epoch) the tab streamed the reply's first chunk. `None` when it
    /// streamed none (answered in one piece), or the outcome came without one (a tab on
    /// another node, a timeout, a refused task).
    pub first_chunk_at_ms: Option<i64>,
}

impl Outcome {
    pub(super) fn without_chunk(result: Result<String, TaskError>) -> Outcome {
        Outcome {
            result,
            first_chunk_at_ms: None,
        }
    }
}

/// Why a task produced no reply; each is something a person or the flow engine acts on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaskError {
    #[error("标签页 {0} 超时未回答 / tab {0} did not answer in time")]
    Timeout(String),
    #[error("标签页 {tab} 报告失败 / tab {tab} failed: {reason}")]
    TabFailed { tab: String, reason: String },
    #[error("标签页 {0} 已断开 / tab {0} was lost")]
    TabLost(String),
    #[error("标签页 {0} 的任务队列已满 / tab {0} has too many queued tasks")]
    QueueFull(String),
    #[error("任务已取消 / task cancelled")]
    Cancelled,
}

impl From<TaskError> for WireError {
    fn from(e: TaskError) -> WireError {
        match e {
            TaskError::Timeout(t) => WireError::Timeout(t),
            TaskError::TabFailed { tab, reason } => WireError::TabFailed { tab, reason },
            TaskError::TabLost(t) => WireError::TabLost(t),
            TaskError::QueueFull(t) => WireError::QueueFull(t),
            TaskError::Cancelled => WireError::Cancelled,
        }
    }
}

impl From<WireError> for TaskError {
    fn from(e: WireError) -> TaskError {
        match e {
            WireError::Timeout(t) => TaskError::Timeout(t),
            WireError::TabFailed { tab, reason } => TaskError::TabFailed { tab, reason },
            WireError::TabLost(t) => TaskError::TabLost(t),
            WireError::QueueFull(t) => TaskError::QueueFull(t),
            WireError::Cancelled => TaskError::Cancelled,
        }
    }
}

impl TaskError {
    /// Worth trying again, maybe on another tab.
    pub fn retryable(&self) -> bool {
        !matches!(self, TaskError::Cancelled)
    }
}

/// A task in a tab's queue, waiting or in flight.
pub(crate) struct Pending {
    /// Encoded when sent (and again for a resend after a reconnect: the prompt's JSON is
    /// kept with it, so that costs a copy, not another escape).
    pub(super) frame: TaskFrame,
    pub(super) reply: oneshot::Sender<Outcome>,
    pub(super) fail_on_loss: bool,
    pub(super) track: bool,
    /// When the tab streamed the first chunk of its reply (ms since the epoch).
    pub(super) first_chunk_at_ms: Option<i64>,
}

impl Pending {
    /// Ends the task with `result`, telling whoever waits (if anyone still does).
    pub(super) fn answer(self, result: Result<String, TaskError>) {
        let _ = self.reply.send(Outcome {
            result,
            first_chunk_at_ms: self.first_chunk_at_ms,
        });
    }
}

/// One tab's tasks; it lives in the tab's `Client`, so the hot path needs no map lookup.
#[derive(Default)]
pub(crate) struct TabQueue {
    /// Boxed: an idle tab (most of them) then holds a pointer, not a whole task.
    pub(super) current: Option<Box<Pending>>,
    pub(super) waiting: VecDeque<Pending>,
    /// Tasks this tab held that ended (answered, failed, timed out, handed back), newest last:
    /// the `done` a tab reports after its `turn_end`, or a late reply, is not an unknown task.
    pub(super) ended: VecDeque<String>,
}

/// How many ended task ids a tab remembers.
const MAX_ENDED: usize = 16;

impl TabQueue {
    /// Takes the in-flight task and remembers its id as ended.
    pub(super) fn end_current(&mut self) -> Option<Pending> {
        let p = *self.current.take()?;
        self.ended.push_back(p.frame.task_id.clone());
        while self.ended.len() > MAX_ENDED {
            self.ended.pop_front();
        }
        Some(p)
    }

    pub(super) fn holds(&self, task_id: &str) -> bool {
        self.current
            .as_ref()
            .is_some_and(|p| p.frame.task_id == task_id)
    }
}
