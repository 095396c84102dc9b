//! Per-tab task queues: a tab types one task at a time; the rest wait in a bounded queue.
//! `ask` hands a prompt to a tab and resolves with its reply (or why there is none).

use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use tokio::sync::oneshot;

use super::engine::{Envelope, WireTask};
pub use super::queue::{Outcome, TaskError};
use super::queue::{Pending, TabQueue};
use super::registry::{Client, Registry};
use crate::protocol::{encode_task, Prompt, TaskFrame, TaskState};

/// What a caller wants typed into a tab.
#[derive(Debug, Clone)]
pub struct TaskRequest {
    pub prompt: Prompt,
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
    /// Record the task under `parent_id` in the subtask tree (`manager status` shows it for
    /// a foreman's task; a master's commands, parented by its client id, need no tree).
    pub track: bool,
    /// Files the tab attaches before it sends the prompt (docs/files.md).
    pub files: Vec<super::files::FileRef>,
    /// From the hub's own commands or flows: the tab's role card prompt goes with the first
    /// such task of a conversation (a door's client sends its prompt as it was written).
    pub from_hub: bool,
}

impl TaskRequest {
    pub fn new(prompt: impl Into<Prompt>, timeout: Duration) -> TaskRequest {
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
            track: false,
            files: Vec::new(),
            from_hub: false,
        }
    }
}

/// A task handed to a tab; `wait` resolves with the tab's reply (or why there is none).
#[must_use = "a ticket does nothing unless waited on"]
pub struct Ticket {
    client: Arc<Client>,
    task_id: String,
    /// The parent the task is recorded under in the subtask tree, if tracked.
    parent: Option<String>,
    deadline: tokio::time::Instant,
    reply: oneshot::Receiver<Outcome>,
    /// The task carries files, whose grants end with it.
    files: bool,
}

impl Ticket {
    /// When the task times out, unless a shared timer ends it first.
    pub fn deadline(&self) -> tokio::time::Instant {
        self.deadline
    }

    /// The tab the task went to.
    pub fn tab(&self) -> &Arc<Client> {
        &self.client
    }

    /// Waits for the reply until the task's deadline; on timeout the task is dropped from
    /// the tab's queue so the tab moves on.
    pub async fn wait(self, tasks: &Tasks) -> Result<String, TaskError> {
        self.wait_outcome(tasks).await.result
    }

    /// [`Ticket::wait`], with when the reply's first chunk came.
    pub async fn wait_outcome(self, tasks: &Tasks) -> Outcome {
        let deadline = self.deadline;
        self.wait_until(tasks, tokio::time::sleep_until(deadline))
            .await
    }

    /// [`Ticket::wait_outcome`], timed by `expired`: the task times out when `expired`
    /// completes before the reply. (A fan-out's tickets are waited on together instead:
    /// [`Tasks::wait_many`].)
    async fn wait_until(
        self,
        tasks: &Tasks,
        expired: impl std::future::Future<Output = ()>,
    ) -> Outcome {
        let Ticket {
            client,
            task_id,
            parent,
            deadline: _,
            reply,
            files,
        } = self;
        // Dropped before the answer (its caller gave up: a person's Stop, a cancelled
        // command), the wait withdraws the task from its tab.
        let mut guard = Withdraw {
            tasks,
            client: &client,
            task_id: &task_id,
            armed: true,
        };
        let outcome = tokio::select! {
            biased;
            answer = reply => match answer {
                Ok(outcome) => outcome,
                Err(_) => Outcome::without_chunk(Err(TaskError::Cancelled)),
            },
            () = expired => {
                tasks.cancel(&client, &task_id);
                tasks.pump(&client);
                Outcome::without_chunk(Err(TaskError::Timeout(client.display())))
            }
        };
        guard.armed = false;
        drop(guard);
        tasks.settle(&client, &task_id, parent.as_deref(), files, &outcome);
        outcome
    }
}

impl Tasks {
    /// What every waiter does once its task has an outcome: the tally, the files' grants,
    /// the subtask tree.
    fn settle(
        &self,
        client: &Client,
        task_id: &str,
        parent: Option<&str>,
        files: bool,
        outcome: &Outcome,
    ) {
        client.with_info(|i| {
            self.tally
                .task(&i.site, super::tally::outcome_of(&outcome.result))
        });
        if files {
            self.files.revoke_task(task_id);
        }
        if let Some(p) = parent {
            let state = if outcome.result.is_ok() {
                "done"
            } else {
                "failed"
            };
            self.set_subtask(p, task_id, client, state);
        }
    }

    /// Waits on many tickets with one waiter (a fan-out's): see [`Waits`].
    pub fn wait_many(&self, tickets: Vec<Ticket>) -> Waits<'_> {
        // The latest deadline of the batch: no task is ended before its own.
        let deadline = tickets.iter().map(Ticket::deadline).max();
        let mut open = Vec::with_capacity(tickets.len());
        let replies = futures_util::stream::FuturesUnordered::new();
        for (at, t) in tickets.into_iter().enumerate() {
            replies.push(AwaitedReply { at, rx: t.reply });
            open.push(Some(OpenTask {
                client: t.client,
                task_id: t.task_id,
                parent: t.parent,
                files: t.files,
            }));
        }
        Waits {
            tasks: self,
            left: open.len(),
            open,
            replies,
            deadline: deadline.map(|d| Box::pin(tokio::time::sleep_until(d))),
            expired: Vec::new(),
        }
    }
}

/// Many tickets waited on by one waiter: a stream of `(place, tab, outcome)` in the order
/// the outcomes come, `place` being the ticket's in the list given. A fan-out to 1,000 tabs
/// holds one small entry per task here, not a future per task: no allocation per task
/// beyond the entry, and nothing large made and freed each round (docs/benchmarks.md).
///
/// Each outcome is settled as [`Ticket::wait_outcome`] settles one. One timer, at the latest
/// deadline of the batch, ends the tasks still open then (timed out); dropped before the
/// end (its caller gave up), the waiter withdraws every task still open from its tab.
pub struct Waits<'a> {
    tasks: &'a Tasks,
    /// By place: the task still open, or `None` once settled.
    open: Vec<Option<OpenTask>>,
    left: usize,
    replies: futures_util::stream::FuturesUnordered<AwaitedReply>,
    deadline: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    /// Outcomes of the tasks the timer ended, not handed out yet.
    expired: Vec<(usize, Arc<Client>, Outcome)>,
}

/// An open task of a [`Waits`] (its ticket without the reply receiver).
struct OpenTask {
    client: Arc<Client>,
    task_id: String,
    parent: Option<String>,
    files: bool,
}

/// One reply awaited by a [`Waits`], with its ticket's place.
struct AwaitedReply {
    at: usize,
    rx: oneshot::Receiver<Outcome>,
}

impl std::future::Future for AwaitedReply {
    type Output = (usize, Result<Outcome, oneshot::error::RecvError>);

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let at = self.at;
        std::future::Future::poll(std::pin::Pin::new(&mut self.rx), cx).map(|r| (at, r))
    }
}

impl Waits<'_> {
    /// Settles the open task at `at` with `outcome`.
    fn close(&mut self, at: usize, outcome: Outcome) -> Option<(usize, Arc<Client>, Outcome)> {
        let open = self.open.get_mut(at)?.take()?;
        self.left -= 1;
        self.tasks.settle(
            &open.client,
            &open.task_id,
            open.parent.as_deref(),
            open.files,
            &outcome,
        );
        Some((at, open.client, outcome))
    }
}

impl futures_util::Stream for Waits<'_> {
    type Item = (usize, Arc<Client>, Outcome);

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use std::task::Poll;
        let this = &mut *self;
        if let Some(done) = this.expired.pop() {
            return Poll::Ready(Some(done));
        }
        while this.left > 0 {
            match futures_util::StreamExt::poll_next_unpin(&mut this.replies, cx) {
                Poll::Ready(Some((at, answer))) => {
                    let outcome = match answer {
                        Ok(outcome) => outcome,
                        Err(_) => Outcome::without_chunk(Err(TaskError::Cancelled)),
                    };
                    if let Some(done) = this.close(at, outcome) {
                        return Poll::Ready(Some(done));
                    }
                }
                Poll::Ready(None) | Poll::Pending => break,
            }
        }
        if this.left == 0 {
            return Poll::Ready(None);
        }
        let Some(timer) = this.deadline.as_mut() else {
            return Poll::Pending;
        };
        if std::future::Future::poll(timer.as_mut(), cx).is_pending() {
            return Poll::Pending;
        }
        // The batch's deadline: every task still open times out.
        this.deadline = None;
        this.replies.clear();
        for at in 0..this.open.len() {
            let Some(open) = &this.open[at] else { continue };
            let client = open.client.clone();
            this.tasks.cancel(&client, &open.task_id);
            this.tasks.pump(&client);
            let timeout = Outcome::without_chunk(Err(TaskError::Timeout(client.display())));
            if let Some(done) = this.close(at, timeout) {
                this.expired.push(done);
            }
        }
        this.expired.reverse();
        Poll::Ready(this.expired.pop())
    }
}

impl Drop for Waits<'_> {
    fn drop(&mut self) {
        // Dropped before the end (a person's Stop, a cancelled command): what is still open
        // is withdrawn from its tab, as a dropped `Ticket::wait_outcome` does.
        for open in self.open.iter_mut().filter_map(Option::take) {
            open.client
                .with_info(|i| self.tasks.tally.task(&i.site, "cancelled"));
            self.tasks.withdraw(&open.client, &open.task_id);
        }
    }
}

/// Withdraws a task whose wait was dropped before it ended.
struct Withdraw<'a> {
    tasks: &'a Tasks,
    client: &'a Arc<Client>,
    task_id: &'a str,
    armed: bool,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.client
                .with_info(|i| self.tasks.tally.task(&i.site, "cancelled"));
            self.tasks.withdraw(self.client, self.task_id);
        }
    }
}

/// A tab named a task it does not hold: never given to it, another tab's, or long gone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("此标签页没有任务 `{0}` / this tab holds no task `{0}`")]
pub struct UnknownTask(pub String);

/// What a `turn_end` was to the tab's tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnOutcome {
    /// It carried the in-flight task's id and answered it.
    Answered,
    /// Untagged: the person's own conversation in the tab, not a task's answer.
    Free,
    /// Tagged with a task this tab held that already ended (a repeat or a late reply).
    Stale,
}

/// One subtask under a parent task, for the tree shown by `manager status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubTask {
    pub task_id: String,
    pub tab: String,
    pub state: &'static str,
}

/// Most subtasks remembered under one parent (a master's commands all share its client id
/// as parent, so without a bound the tree would grow with every command).
const MAX_SUBTASKS: usize = 256;

/// The subtasks of one parent, in the order they were sent, with O(1) updates by task id
/// (a fan-out to 1,000 tabs updates each subtask three times).
#[derive(Default)]
struct SubTree {
    order: Vec<SubTask>,
    index: std::collections::HashMap<String, usize>,
}

impl SubTree {
    /// Records `task_id`'s state (a task stays on one tab, so its name is taken once).
    fn set(&mut self, task_id: &str, tab: &Client, state: &'static str) {
        if let Some(&i) = self.index.get(task_id) {
            self.order[i].state = state;
        } else if self.order.len() < MAX_SUBTASKS {
            self.index.insert(task_id.to_string(), self.order.len());
            self.order.push(SubTask {
                task_id: task_id.to_string(),
                tab: tab.display(),
                state,
            });
        }
    }
}

/// A task this node sent to a tab on another node, waiting for its outcome.
struct RemotePending {
    client: Arc<Client>,
    reply: oneshot::Sender<Outcome>,
    fail_on_loss: bool,
}

/// All tabs' queues.
pub struct Tasks {
    /// Task id → tasks sent to tabs on other nodes (their queue is on their node).
    remote: DashMap<String, RemotePending>,
    /// Task ids this node took from other nodes and has not answered yet (a repeat of the
    /// same batch is taken once).
    inbound: DashMap<String, ()>,
    /// parent task id → its subtasks (bounded: finished parents are forgotten with their run).
    tree: DashMap<String, SubTree>,
    registry: Arc<Registry>,
    max_waiting: usize,
    /// The files tasks carry (granted to a task while a tab holds it).
    pub files: Arc<super::files::Files>,
    /// Shapes every prompt once, when it is submitted (the memory block of role cards with
    /// `memory: every N`); given at construction, none for a hub with no commands.
    prompt_hook: Option<PromptHook>,
    /// Tasks by site and outcome (counted where their waiters learn it), commands by outcome.
    pub tally: super::tally::Tally,
}

/// What [`Tasks::new`] passes every prompt through when it is submitted.
/// The flag says the task comes from the hub's own commands or flows (not a door's client).
pub type PromptHook = Box<dyn Fn(&Client, Prompt, bool) -> Prompt + Send + Sync>;

impl Tasks {
    /// Task queues over `registry`; every prompt submitted passes through `prompt_hook`
    /// first, when there is one.
    pub fn new(
        registry: Arc<Registry>,
        max_waiting: usize,
        files: Arc<super::files::Files>,
        prompt_hook: Option<PromptHook>,
    ) -> Tasks {
        Tasks {
            files,
            remote: DashMap::new(),
            inbound: DashMap::new(),
            tree: DashMap::new(),
            registry,
            max_waiting,
            prompt_hook,
            tally: super::tally::Tally::default(),
        }
    }

    fn queue(client: &Client) -> std::sync::MutexGuard<'_, TabQueue> {
        client.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Types `req.prompt` into `client` and waits for its reply.
    pub async fn ask(&self, client: &Arc<Client>, req: TaskRequest) -> Result<String, TaskError> {
        self.ask_outcome(client, req).await.result
    }

    /// [`Tasks::ask`], with when the reply's first chunk came.
    pub async fn ask_outcome(&self, client: &Arc<Client>, req: TaskRequest) -> Outcome {
        match self.submit(client, req) {
            Ok(ticket) => ticket.wait_outcome(self).await,
            Err(e) => Outcome::without_chunk(Err(e)),
        }
    }

    /// Hands `req.prompt` to `client` now (sent at once if the tab is idle, else queued) and
    /// returns the ticket to wait on. A fan-out submits to every tab before waiting on any.
    pub fn submit(&self, client: &Arc<Client>, req: TaskRequest) -> Result<Ticket, TaskError> {
        // The atomic first: a local tab (the usual case) takes no lock here.
        if let Some(node) = client.is_remote().then(|| client.node()).flatten() {
            return Ok(self.submit_remote(client, &node, req));
        }
        let task_id = req
            .task_id
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let deadline = tokio::time::Instant::now() + req.timeout;
        let frame = TaskFrame {
            task_id: task_id.clone(),
            parent_id: req.parent_id,
            run_id: req.run_id,
            node_id: req.node_id,
            role: client.role(),
            priority: req.priority,
            prompt: match &self.prompt_hook {
                Some(hook) => hook(client, req.prompt, req.from_hub),
                None => req.prompt,
            },
            timeout_ms: req.timeout.as_millis() as u64,
            retry: req.retry,
            auto_send: true,
            attachments: req
                .files
                .iter()
                .map(|f| self.files.grant(&client.id, &task_id, f))
                .collect(),
        };
        let parent = frame.parent_id.clone().filter(|_| req.track);
        let files = !frame.attachments.is_empty();
        let (tx, rx) = oneshot::channel();
        let pending = Pending {
            frame,
            reply: tx,
            fail_on_loss: req.fail_on_loss,
            track: req.track,
            first_chunk_at_ms: None,
        };
        let mut q = Self::queue(client);
        let idle = q.current.is_none() && q.waiting.is_empty();
        if !idle && q.waiting.len() >= self.max_waiting {
            return Err(TaskError::QueueFull(client.display()));
        }
        if let Some(p) = &parent {
            self.set_subtask(p, &task_id, client, "queued");
        }
        client
            .tasks_started
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if idle {
            // An idle tab (the usual case in a fan-out): send at once.
            self.start(client, q, pending);
        } else {
            // Higher priority first; FIFO among equals.
            let pos = q
                .waiting
                .iter()
                .position(|p| p.frame.priority < pending.frame.priority)
                .unwrap_or(q.waiting.len());
            q.waiting.insert(pos, pending);
            drop(q);
            self.pump(client);
        }
        Ok(Ticket {
            client: client.clone(),
            task_id,
            parent,
            deadline,
            reply: rx,
            files,
        })
    }

    /// A task for a tab on another node: sent to its node (batched with whatever else goes
    /// there now), answered by an `Envelope::Result`. The tab's node shapes the prompt.
    fn submit_remote(&self, client: &Arc<Client>, node: &str, req: TaskRequest) -> Ticket {
        let task_id = req
            .task_id
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let deadline = tokio::time::Instant::now() + req.timeout;
        let parent = req.parent_id.clone().filter(|_| req.track);
        let (tx, rx) = oneshot::channel();
        self.remote.insert(
            task_id.clone(),
            RemotePending {
                client: client.clone(),
                reply: tx,
                fail_on_loss: req.fail_on_loss,
            },
        );
        client
            .remote_waiting
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        client
            .tasks_started
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Some(p) = &parent {
            self.set_subtask(p, &task_id, client, "sent");
        }
        let task = WireTask {
            to: client.id.clone(),
            task_id: task_id.clone(),
            prompt: req.prompt,
            parent_id: req.parent_id,
            run_id: req.run_id,
            node_id: req.node_id,
            priority: req.priority,
            timeout_ms: req.timeout.as_millis() as u64,
            retry: req.retry,
            fail_on_loss: req.fail_on_loss,
        };
        let engine = self.registry.engine();
        engine.send(
            node,
            Envelope::Task {
                task,
                reply_to: engine.node().to_string(),
            },
        );
        Ticket {
            client: client.clone(),
            task_id,
            parent,
            deadline,
            reply: rx,
            files: false,
        }
    }

    /// The outcome of a task sent to another node (or why it never got there). A repeat,
    /// or the outcome of a task this node gave up on, is dropped.
    pub fn complete_remote(&self, task_id: &str, result: Result<String, TaskError>) -> bool {
        let Some((_, p)) = self.remote.remove(task_id) else {
            return false;
        };
        p.client
            .remote_waiting
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        let _ = p.reply.send(Outcome::without_chunk(result));
        true
    }

    /// Tasks sent to other nodes that still wait for an outcome (a leak check for tests).
    pub fn remote_waiting(&self) -> usize {
        self.remote.len()
    }

    /// Tasks taken from other nodes that are not answered yet.
    pub fn inbound_waiting(&self) -> usize {
        self.inbound.len()
    }

    /// Takes task `id` from another node once; false if it was already taken.
    pub fn take_inbound(&self, task_id: &str) -> bool {
        self.inbound.insert(task_id.to_string(), ()).is_none()
    }

    /// A task taken from another node was answered (or failed).
    pub fn inbound_done(&self, task_id: &str) {
        self.inbound.remove(task_id);
    }

    fn set_subtask(&self, parent: &str, task_id: &str, tab: &Client, state: &'static str) {
        match self.tree.get_mut(parent) {
            Some(mut subs) => subs.set(task_id, tab, state),
            None => self
                .tree
                .entry(parent.to_string())
                .or_default()
                .set(task_id, tab, state),
        }
    }

    /// The subtasks sent on behalf of `parent` (a foreman's task), in order.
    pub fn children(&self, parent: &str) -> Vec<SubTask> {
        self.tree
            .get(parent)
            .map(|s| s.order.clone())
            .unwrap_or_default()
    }

    /// Forgets the subtask tree under every task whose id starts with `prefix` (a run id).
    pub fn forget_tree(&self, prefix: &str) {
        self.tree.retain(|k, _| !k.starts_with(prefix));
    }

    /// Sends the next waiting task if the tab is idle.
    pub fn pump(&self, client: &Client) {
        if client.is_remote() {
            return; // its node pumps its queue
        }
        let mut q = Self::queue(client);
        if q.current.is_some() {
            return;
        }
        // Skip tasks whose caller already gave up.
        while let Some(next) = q.waiting.pop_front() {
            if !next.reply.is_closed() {
                self.start(client, q, next);
                return;
            }
        }
    }

    /// Makes `task` the tab's current one and sends it (`q` is the tab's idle queue).
    fn start(&self, client: &Client, mut q: std::sync::MutexGuard<'_, TabQueue>, task: Pending) {
        let text = encode_task(&task.frame);
        client.typed_by_hub(&task.frame.prompt);
        if let Some(p) = task.frame.parent_id.as_ref().filter(|_| task.track) {
            self.set_subtask(p, &task.frame.task_id, client, "sent");
        }
        q.current = Some(Box::new(task));
        drop(q);
        self.registry.send_text(client, text);
    }

    /// Resends the in-flight task after a reconnect (same task id), then continues the queue.
    /// `delivered` are the frames kept for the tab while it was away, already sent to it: a
    /// task sent just as the tab dropped is among them and is not sent twice.
    pub fn on_connected(&self, client: &Client, delivered: &[String]) {
        let resend = Self::queue(client)
            .current
            .as_ref()
            .map(|p| encode_task(&p.frame))
            .filter(|text| !delivered.contains(text));
        match resend {
            Some(text) => {
                self.registry.send_text(client, text);
            }
            None => self.pump(client),
        }
    }

    /// The tab has been gone past the grace period: hand back tasks whose callers fail over.
    pub fn on_lost(&self, client: &Client) {
        self.fail_remote_of(client);
        let mut q = Self::queue(client);
        if q.current.as_ref().is_some_and(|p| p.fail_on_loss) {
            if let Some(p) = q.end_current() {
                p.answer(Err(TaskError::TabLost(client.display())));
            }
        }
        let waiting = std::mem::take(&mut q.waiting);
        for p in waiting {
            if p.fail_on_loss {
                p.answer(Err(TaskError::TabLost(client.display())));
            } else {
                q.waiting.push_back(p);
            }
        }
    }

    /// Fails over the tasks sent to `client` on another node (its node died or the tab left
    /// it): those whose caller fails over get `TabLost`.
    pub fn fail_remote_of(&self, client: &Client) {
        let ids: Vec<String> = self
            .remote
            .iter()
            .filter(|e| e.value().client.id == client.id && e.value().fail_on_loss)
            .map(|e| e.key().clone())
            .collect();
        for id in ids {
            self.complete_remote(&id, Err(TaskError::TabLost(client.display())));
        }
    }

    /// A reply arrived. It answers the in-flight task only when it carries that task's id:
    /// an untagged reply is the person's own conversation in the tab, not the task's answer.
    /// A reply naming a task the tab does not hold completes nothing.
    pub fn on_turn_end(
        &self,
        client: &Client,
        task_id: Option<&str>,
        text: &str,
    ) -> Result<TurnOutcome, UnknownTask> {
        let Some(id) = task_id else {
            return Ok(TurnOutcome::Free);
        };
        if self.finish(client, id, Ok(text.to_string()))? {
            self.pump(client);
            Ok(TurnOutcome::Answered)
        } else {
            Ok(TurnOutcome::Stale)
        }
    }

    /// A `task_update`; `failed` ends the task with the tab's reason. An update for a task
    /// that already ended here (the `done` after its `turn_end`) is ignored.
    pub fn on_update(
        &self,
        client: &Client,
        task_id: &str,
        state: TaskState,
        error: Option<&str>,
    ) -> Result<(), UnknownTask> {
        if state != TaskState::Failed {
            let q = Self::queue(client);
            return if q.holds(task_id) || q.ended.iter().any(|t| t == task_id) {
                Ok(())
            } else {
                Err(UnknownTask(task_id.to_string()))
            };
        }
        let reason = error.unwrap_or("unknown").to_string();
        let err = TaskError::TabFailed {
            tab: client.display(),
            reason,
        };
        if self.finish(client, task_id, Err(err))? {
            self.pump(client);
        }
        Ok(())
    }

    /// Ends the in-flight task `task_id` with `result`: Ok(true) if it did, Ok(false) for a
    /// task that already ended here, Err for a task this tab never held.
    fn finish(
        &self,
        client: &Client,
        task_id: &str,
        result: Result<String, TaskError>,
    ) -> Result<bool, UnknownTask> {
        let mut q = Self::queue(client);
        if !q.holds(task_id) {
            return if q.ended.iter().any(|t| t == task_id) {
                Ok(false)
            } else {
                Err(UnknownTask(task_id.to_string()))
            };
        }
        if let Some(p) = q.end_current() {
            p.answer(result);
        }
        Ok(true)
    }

    /// Whoever waited on a task gave up before its answer: a tab typing it is told
    /// (`cancel`: it stops the site's reply), and the task leaves the queue either way.
    pub fn withdraw(&self, client: &Client, task_id: &str) {
        if client.node().is_none() {
            let typing = {
                let q = Self::queue(client);
                if !q.holds(task_id) && !q.waiting.iter().any(|p| p.frame.task_id == task_id) {
                    return;
                }
                q.holds(task_id)
            };
            if typing {
                let frame = crate::protocol::ServerFrame::Cancel {
                    task_id: task_id.to_string(),
                };
                let _ = self.registry.send(&client.id, &frame);
            }
        }
        tracing::info!(client = %client.id, task_id, "task withdrawn: its caller gave up");
        self.files.revoke_task(task_id);
        self.cancel(client, task_id);
        self.pump(client);
    }

    /// Whether `client` holds `task_id` now (typing it, or waiting to).
    pub fn holds(&self, client: &Client, task_id: &str) -> bool {
        let q = Self::queue(client);
        q.holds(task_id) || q.waiting.iter().any(|p| p.frame.task_id == task_id)
    }

    /// Drops a task wherever it is (caller timed out or gave up).
    pub fn cancel(&self, client: &Client, task_id: &str) {
        if let Some(node) = client.node() {
            if let Some((_, p)) = self.remote.remove(task_id) {
                p.client
                    .remote_waiting
                    .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
                self.registry.engine().send(
                    &node,
                    Envelope::Cancel {
                        to: client.id.clone(),
                        task_id: task_id.to_string(),
                    },
                );
            }
            return;
        }
        let mut q = Self::queue(client);
        if q.holds(task_id) {
            q.end_current();
        }
        q.waiting.retain(|p| p.frame.task_id != task_id);
    }

    /// Tasks in flight plus waiting for a tab (for least-loaded scheduling and status).
    pub fn load(&self, client: &Client) -> usize {
        if let Some(r) = client.remote() {
            // What its node said, plus what this node sent since.
            return r.load
                + client
                    .remote_waiting
                    .load(std::sync::atomic::Ordering::Relaxed);
        }
        let q = Self::queue(client);
        q.waiting.len() + usize::from(q.current.is_some())
    }

    /// A chunk of a reply streamed in: the id of the task it belongs to (the tab's in-flight
    /// one), if any. The task's first chunk records when it came.
    pub fn on_chunk(&self, client: &Client) -> Option<String> {
        let mut q = Self::queue(client);
        let p = q.current.as_mut()?;
        if p.first_chunk_at_ms.is_none() {
            p.first_chunk_at_ms = Some(crate::store::now_ms());
        }
        Some(p.frame.task_id.clone())
    }

    /// The task a tab is working on, if any: (task id, prompt head).
    pub fn current(&self, client: &Client) -> Option<(String, String)> {
        Self::queue(client).current.as_ref().map(|p| {
            let head: String = p.frame.prompt.chars().take(40).collect();
            (p.frame.task_id.clone(), head)
        })
    }
}

#[cfg(test)]
mod tests;
