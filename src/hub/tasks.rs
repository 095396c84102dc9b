//! Per-tab task queues: a tab types one task at a time; the rest wait in a bounded queue.
//! `ask` hands a prompt to a tab and resolves with its reply (or why there is none).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dashmap::DashMap;
use tokio::sync::oneshot;

use super::registry::{Client, Registry};
use crate::protocol::{encode, ServerFrame, TaskFrame, TaskState};

/// What a caller wants typed into a tab.
#[derive(Debug, Clone)]
pub struct TaskRequest {
    pub prompt: String,
    /// Idempotency key: a re-sent attempt keeps its id so the tab and journal can dedupe.
    pub task_id: Option<String>,
    pub parent_id: Option<String>,
    pub run_id: Option<String>,
    pub node_id: Option<String>,
    pub priority: i32,
    pub timeout: Duration,
    pub retry: u32,
    /// On loss of the tab: give the task back to the caller (to fail over) instead of
    /// waiting for the same tab to return.
    pub fail_on_loss: bool,
}

impl TaskRequest {
    pub fn new(prompt: impl Into<String>, timeout: Duration) -> TaskRequest {
        TaskRequest {
            prompt: prompt.into(),
            task_id: None,
            parent_id: None,
            run_id: None,
            node_id: None,
            priority: 0,
            timeout,
            retry: 0,
            fail_on_loss: true,
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

impl TaskError {
    /// Worth trying again, maybe on another tab.
    pub fn retryable(&self) -> bool {
        !matches!(self, TaskError::Cancelled)
    }
}

struct Pending {
    frame: TaskFrame,
    reply: oneshot::Sender<Result<String, TaskError>>,
    fail_on_loss: bool,
}

#[derive(Default)]
struct TabQueue {
    current: Option<Pending>,
    waiting: VecDeque<Pending>,
}

/// One subtask under a parent task, for the tree shown by `manager status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubTask {
    pub task_id: String,
    pub tab: String,
    pub state: &'static str,
}

/// All tabs' queues.
pub struct Tasks {
    queues: DashMap<String, Arc<Mutex<TabQueue>>>,
    /// parent task id → its subtasks (bounded: finished parents are forgotten with their run).
    tree: DashMap<String, Vec<SubTask>>,
    registry: Arc<Registry>,
    max_waiting: usize,
}

impl Tasks {
    pub fn new(registry: Arc<Registry>, max_waiting: usize) -> Tasks {
        Tasks {
            queues: DashMap::new(),
            tree: DashMap::new(),
            registry,
            max_waiting,
        }
    }

    fn queue(&self, client_id: &str) -> Arc<Mutex<TabQueue>> {
        self.queues
            .entry(client_id.to_string())
            .or_default()
            .value()
            .clone()
    }

    /// Types `req.prompt` into `client` and waits for its reply.
    pub async fn ask(&self, client: &Arc<Client>, req: TaskRequest) -> Result<String, TaskError> {
        let task_id = req
            .task_id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let frame = TaskFrame {
            task_id: task_id.clone(),
            parent_id: req.parent_id,
            run_id: req.run_id,
            node_id: req.node_id,
            role: client.info().role,
            priority: req.priority,
            prompt: req.prompt,
            timeout_ms: req.timeout.as_millis() as u64,
            retry: req.retry,
            auto_send: true,
        };
        let parent = frame.parent_id.clone();
        if let Some(p) = &parent {
            self.set_subtask(p, &task_id, client.display(), "queued");
        }
        let (tx, rx) = oneshot::channel();
        {
            let q = self.queue(&client.id);
            let mut q = q.lock().unwrap_or_else(|p| p.into_inner());
            if q.waiting.len() >= self.max_waiting {
                return Err(TaskError::QueueFull(client.display()));
            }
            let pending = Pending {
                frame,
                reply: tx,
                fail_on_loss: req.fail_on_loss,
            };
            // Higher priority first; FIFO among equals.
            let pos = q
                .waiting
                .iter()
                .position(|p| p.frame.priority < pending.frame.priority)
                .unwrap_or(q.waiting.len());
            q.waiting.insert(pos, pending);
        }
        client
            .tasks_started
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.pump(client);
        let result = match tokio::time::timeout(req.timeout, rx).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(TaskError::Cancelled),
            Err(_) => {
                self.cancel(&client.id, &task_id);
                self.pump(client);
                Err(TaskError::Timeout(client.display()))
            }
        };
        if let Some(p) = &parent {
            let state = if result.is_ok() { "done" } else { "failed" };
            self.set_subtask(p, &task_id, client.display(), state);
        }
        result
    }

    fn set_subtask(&self, parent: &str, task_id: &str, tab: String, state: &'static str) {
        let mut subs = self.tree.entry(parent.to_string()).or_default();
        if let Some(s) = subs.iter_mut().find(|s| s.task_id == task_id) {
            s.state = state;
            s.tab = tab;
        } else if subs.len() < 256 {
            subs.push(SubTask {
                task_id: task_id.to_string(),
                tab,
                state,
            });
        }
    }

    /// The subtasks sent on behalf of `parent` (a foreman's task), in order.
    pub fn children(&self, parent: &str) -> Vec<SubTask> {
        self.tree.get(parent).map(|s| s.clone()).unwrap_or_default()
    }

    /// Forgets the subtask tree under every task whose id starts with `prefix` (a run id).
    pub fn forget_tree(&self, prefix: &str) {
        self.tree.retain(|k, _| !k.starts_with(prefix));
    }

    /// Sends the next waiting task if the tab is idle.
    pub fn pump(&self, client: &Client) {
        let q = self.queue(&client.id);
        let mut q = q.lock().unwrap_or_else(|p| p.into_inner());
        if q.current.is_some() {
            return;
        }
        // Skip tasks whose caller already gave up.
        while let Some(next) = q.waiting.pop_front() {
            if next.reply.is_closed() {
                continue;
            }
            let text = encode(&ServerFrame::Task(next.frame.clone()));
            client.typed_by_hub(&next.frame.prompt);
            if let Some(p) = &next.frame.parent_id {
                self.set_subtask(p, &next.frame.task_id, client.display(), "sent");
            }
            q.current = Some(next);
            drop(q);
            self.registry.send_text(client, text);
            return;
        }
    }

    /// Resends the in-flight task after a reconnect (same task id), then continues the queue.
    pub fn on_connected(&self, client: &Client) {
        let q = self.queue(&client.id);
        let resend = {
            let q = q.lock().unwrap_or_else(|p| p.into_inner());
            q.current
                .as_ref()
                .map(|p| encode(&ServerFrame::Task(p.frame.clone())))
        };
        match resend {
            Some(text) => {
                self.registry.send_text(client, text);
            }
            None => self.pump(client),
        }
    }

    /// The tab has been gone past the grace period: hand back tasks whose callers fail over.
    pub fn on_lost(&self, client: &Client) {
        let q = self.queue(&client.id);
        let mut q = q.lock().unwrap_or_else(|p| p.into_inner());
        if q.current.as_ref().is_some_and(|p| p.fail_on_loss) {
            if let Some(p) = q.current.take() {
                let _ = p.reply.send(Err(TaskError::TabLost(client.display())));
            }
        }
        let waiting = std::mem::take(&mut q.waiting);
        for p in waiting {
            if p.fail_on_loss {
                let _ = p.reply.send(Err(TaskError::TabLost(client.display())));
            } else {
                q.waiting.push_back(p);
            }
        }
    }

    /// A reply arrived. Without a task id it answers the in-flight task, if any.
    /// Returns true when it completed a task.
    pub fn on_turn_end(&self, client: &Client, task_id: Option<&str>, text: &str) -> bool {
        let done = self.finish(client, task_id, Ok(text.to_string()));
        if done {
            self.pump(client);
        }
        done
    }

    /// A `task_update`; `failed` ends the task with the tab's reason.
    pub fn on_update(&self, client: &Client, task_id: &str, state: TaskState, error: Option<&str>) {
        if state == TaskState::Failed {
            let reason = error.unwrap_or("unknown").to_string();
            let err = TaskError::TabFailed {
                tab: client.display(),
                reason,
            };
            if self.finish(client, Some(task_id), Err(err)) {
                self.pump(client);
            }
        }
    }

    fn finish(
        &self,
        client: &Client,
        task_id: Option<&str>,
        result: Result<String, TaskError>,
    ) -> bool {
        let q = self.queue(&client.id);
        let mut q = q.lock().unwrap_or_else(|p| p.into_inner());
        let matches = match (&q.current, task_id) {
            (Some(p), Some(id)) => p.frame.task_id == id,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if !matches {
            return false;
        }
        if let Some(p) = q.current.take() {
            let _ = p.reply.send(result);
        }
        true
    }

    /// Drops a task wherever it is (caller timed out or gave up).
    pub fn cancel(&self, client_id: &str, task_id: &str) {
        let q = self.queue(client_id);
        let mut q = q.lock().unwrap_or_else(|p| p.into_inner());
        if q.current
            .as_ref()
            .is_some_and(|p| p.frame.task_id == task_id)
        {
            q.current = None;
        }
        q.waiting.retain(|p| p.frame.task_id != task_id);
    }

    /// Tasks in flight plus waiting for a tab (for least-loaded scheduling and status).
    pub fn load(&self, client_id: &str) -> usize {
        self.queues
            .get(client_id)
            .map(|q| {
                let q = q.lock().unwrap_or_else(|p| p.into_inner());
                q.waiting.len() + usize::from(q.current.is_some())
            })
            .unwrap_or(0)
    }

    /// The task a tab is working on, if any: (task id, prompt head).
    pub fn current(&self, client_id: &str) -> Option<(String, String)> {
        let q = self.queues.get(client_id)?;
        let q = q.lock().unwrap_or_else(|p| p.into_inner());
        q.current.as_ref().map(|p| {
            let head: String = p.frame.prompt.chars().take(40).collect();
            (p.frame.task_id.clone(), head)
        })
    }
}
