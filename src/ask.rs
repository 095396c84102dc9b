//! Asking tabs, once for everything that asks: a target is resolved (a label, an id, a site,
//! `role:…`, `group:…`, `auto…`), a tab is picked (the decision engine through `pick` for
//! `auto`, the least loaded otherwise), the prompt is submitted to its task queue, and the
//! answer is waited for (the task's timeout, a fan-out's shared deadline, a failed tab's
//! task handed to another).
//!
//! The command host (`control`), the runner, the planner, the foreman, MCP and the API stand
//! on this service; it names only the hub, `pick` / `decide` and `protocol`.
//!
//! ```text
//! asks.ask("kimi", prompt, &AskOpts::from_tab(me))      → Ok(Answer { tab, text })
//! asks.ask_all(vec![(target, prompt), …], &opts)         → one result per target, in order
//! asks.deliver("boss", "text", false)                    → typed into the tab's input box
//! ```

use std::sync::Arc;

use crate::hub::registry::Client;
use crate::hub::tasks::{Outcome, TaskError, TaskRequest, Ticket};
use crate::hub::Hub;
use crate::pick::Picker;
use crate::protocol::{Prompt, Role, ServerFrame};

/// The ask service: the hub's registry and task queues, and the decision engine's view of
/// every tab (through [`Picker`]).
pub struct Asks {
    hub: Arc<Hub>,
    /// The decision engine over the hub's tabs (`auto` targets, health, `manager why`).
    pub pick: Picker,
    /// Tab id → its latest complete reply, whoever asked (a hub task or the person): what
    /// `from TAB:` reads (docs/commands.md).
    latest: dashmap::DashMap<String, String>,
}

/// Where a task's result leads ([`Asks::after`]).
enum Next {
    /// The answer, or why there is none.
    Done(Result<Answer, AskError>),
    /// The task was handed out again, to another tab.
    Again(Ticket),
}

/// Who asks, and how its tasks are followed.
#[derive(Clone, Debug, Default)]
pub struct AskOpts {
    /// The asking tab's id: not asked itself when the target names several tabs, and the
    /// tasks' `parent_id` unless `parent` is given.
    pub from: String,
    /// The task on whose behalf this asks (a foreman's), for the subtasks' `parent_id`;
    /// such subtasks are tracked.
    pub parent: Option<String>,
    /// A foreman's group: a worker that was lost or failed gets its subtask moved to another
    /// worker of this group.
    pub regroup: Option<String>,
    /// Files each task attaches before its prompt (docs/files.md).
    pub files: Vec<crate::hub::files::FileRef>,
}

impl AskOpts {
    /// A tab asks for itself.
    pub fn from_tab(id: impl Into<String>) -> AskOpts {
        AskOpts {
            from: id.into(),
            ..AskOpts::default()
        }
    }
}

/// A tab's answer.
#[derive(Clone)]
pub struct Answer {
    /// The tab that answered (after a hand-over, the last one).
    pub tab: Arc<Client>,
    /// Its reply.
    pub text: String,
}

/// Why an ask got no answer. The command language words each the same way as its
/// `HostError` twin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AskError {
    /// No tab matches the name.
    UnknownTarget(String),
    /// The tab exists but is not connected (or no tab of an `auto` target is eligible).
    NotConnected(String),
    /// The task timed out.
    Timeout { target: String },
    /// The tab failed, was lost, or the task could not be submitted.
    Failed { target: String, message: String },
}

impl std::fmt::Display for AskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AskError::UnknownTarget(t) => write!(f, "没有这个标签页 / no such tab: {t}"),
            AskError::NotConnected(t) => write!(f, "标签页未连接 / tab not connected: {t}"),
            AskError::Timeout { target } => {
                write!(f, "等待超时 / no answer from {target} in time")
            }
            AskError::Failed { target, message } => {
                write!(f, "{target} 失败 / {target} failed: {message}")
            }
        }
    }
}

impl std::error::Error for AskError {}

/// Tabs an `auto` command target tries before it gives up.
const AUTO_TRIES: usize = 3;

fn task_error(e: TaskError, target: &str) -> AskError {
    match e {
        TaskError::Timeout(_) => AskError::Timeout {
            target: target.to_string(),
        },
        other => AskError::Failed {
            target: target.to_string(),
            message: other.to_string(),
        },
    }
}

/// A send refused by a site's quota: says so, and when the next send is allowed.
fn over_quota(target: &str, site: &str, wait_ms: u64) -> AskError {
    AskError::Failed {
        target: target.to_string(),
        message: format!(
            "配额用尽 / over quota: {site} has used its quota; next send in {}s \
             (`?<tabs>!` shows it, `?<tabs budget {site} …>!` changes it)",
            wait_ms.div_ceil(1000)
        ),
    }
}

impl Asks {
    pub fn new(hub: Arc<Hub>, decide: crate::decide::Decider) -> Asks {
        Asks {
            pick: Picker::new(hub.clone(), decide),
            hub,
            latest: dashmap::DashMap::new(),
        }
    }

    /// Notes a tab's complete reply (a free turn; a task's answer is noted when it arrives).
    pub fn note_reply(&self, tab_id: &str, text: &str) {
        // A tab that answered before keeps its entry: the text is written over the old one
        // (no new key, and no new buffer unless the reply is longer).
        match self.latest.get_mut(tab_id) {
            Some(mut latest) => {
                latest.clear();
                latest.push_str(text);
            }
            None => {
                self.latest.insert(tab_id.to_string(), text.to_string());
            }
        }
    }

    /// The tab's latest complete reply, whoever asked.
    pub fn latest_reply(&self, tab_id: &str) -> Option<String> {
        self.latest.get(tab_id).map(|r| r.clone())
    }

    /// The hub this service asks through.
    pub fn hub(&self) -> &Arc<Hub> {
        &self.hub
    }

    /// Connected tabs a name resolves to; an error names the target when there are none.
    pub fn resolve(&self, target: &str) -> Result<Vec<Arc<Client>>, AskError> {
        if let Some(sites) = crate::pick::auto_sites(target) {
            // `auto:SITE` names a site the hub knows, or is refused with the ones it knows.
            if let Some(unknown) = sites
                .iter()
                .find(|s| !crate::pick::known_site(&self.pick, s))
            {
                return Err(AskError::UnknownTarget(format!(
                    "{target} — 没有站点 / no site `{unknown}`; 已知站点 / known sites: {}",
                    crate::pick::known_sites(&self.pick).join(", ")
                )));
            }
            // `auto`: the decision engine picks one eligible worker.
            return match crate::pick::choose(&self.pick, target, &[], None) {
                Some(c) => Ok(vec![c]),
                None => Err(self.none_eligible(target, &crate::pick::eligible(&self.pick, &sites))),
            };
        }
        let found = self.hub.registry.resolve(target);
        if !found.is_empty() {
            return Ok(found);
        }
        let known = self
            .hub
            .registry
            .all()
            .into_iter()
            .any(|c| c.matches(target));
        Err(if known {
            AskError::NotConnected(target.to_string())
        } else {
            AskError::UnknownTarget(target.to_string())
        })
    }

    /// Why none of `tabs` (the connected tabs a target names) can take a task now: their
    /// site's quota and when the next send is allowed, else each tab's standing (cooling,
    /// parked, …). `NotConnected` when there is no tab at all.
    fn none_eligible(&self, target: &str, tabs: &[Arc<Client>]) -> AskError {
        if tabs.is_empty() {
            return AskError::NotConnected(target.to_string());
        }
        let now = crate::store::now_ms() as u64;
        let waits: Vec<(String, u64)> = tabs
            .iter()
            .filter_map(|c| {
                let site = c.info().site;
                self.pick.decide.quota_wait(&site, now).map(|w| (site, w))
            })
            .collect();
        if waits.len() == tabs.len() {
            if let Some((site, wait)) = waits.into_iter().min_by_key(|(_, w)| *w) {
                return over_quota(target, &site, wait);
            }
        }
        let why = tabs
            .iter()
            .map(|c| {
                let standing = crate::pick::health(&self.pick, c).standing;
                format!("{} {}", c.display(), standing.word())
            })
            .collect::<Vec<_>>()
            .join(", ");
        AskError::Failed {
            target: target.to_string(),
            message: format!("没有可用的标签页 / no tab can take it now: {why}"),
        }
    }

    /// One of several tabs a name matches, chosen by the decision engine (a tab cooling down
    /// after `rate_limited`, parked or over quota is not picked while another can take it).
    /// When none is eligible, a tab that is only waiting for its probe's outcome still gets
    /// the task in its queue (the least loaded); cooling and parked tabs are refused, each
    /// with its standing.
    fn pick_one(&self, target: &str, tabs: &[Arc<Client>]) -> Result<Arc<Client>, AskError> {
        use crate::decide::Standing;
        if let Some(tab) = crate::pick::choose_among(&self.pick, tabs) {
            return Ok(tab);
        }
        tabs.iter()
            .filter(|c| {
                !matches!(
                    crate::pick::health(&self.pick, c).standing,
                    Standing::Cooling(_) | Standing::Parked(_) | Standing::OverQuota(_)
                )
            })
            .min_by_key(|c| self.hub.tasks.load(c))
            .cloned()
            .ok_or_else(|| self.none_eligible(target, tabs))
    }

    /// Hands `prompt` to the tab `target` names; when it names several (a site with two tabs,
    /// a role, a group), the decision engine picks one of them, never the asker, skipping tabs
    /// in `tried`.
    pub fn hand_out(
        &self,
        opts: &AskOpts,
        target: &str,
        prompt: Prompt,
        tabs: &[Arc<Client>],
        tried: &[String],
    ) -> Result<Ticket, AskError> {
        // A site past its quota (docs/commands.md) gets no prompt, however it is named.
        let now = crate::store::now_ms() as u64;
        let over = |c: &Arc<Client>| {
            c.with_info(|i| self.pick.decide.quota_wait(&i.site, now))
                .is_some()
        };
        let tab = match tabs {
            // One tab (a fan-out's every target): the same checks as below, each once.
            [one] if over(one) => return Err(self.none_eligible(target, tabs)),
            [one] if tried.contains(&one.id) => {
                return Err(AskError::NotConnected(target.to_string()))
            }
            [one] => one.clone(),
            _ => {
                if !tabs.is_empty() && tabs.iter().all(over) {
                    return Err(self.none_eligible(target, tabs));
                }
                let untried: Vec<Arc<Client>> = tabs
                    .iter()
                    .filter(|c| !tried.contains(&c.id))
                    .filter(|c| !over(c))
                    .filter(|c| c.id != opts.from)
                    .cloned()
                    .collect();
                match untried.as_slice() {
                    [] => return Err(AskError::NotConnected(target.to_string())),
                    several => self.pick_one(target, several)?,
                }
            }
        };
        let tab = &tab;
        let mut req = TaskRequest::new(prompt, self.hub.config.timing.task_timeout);
        req.files = opts.files.clone();
        req.from_hub = true;
        req.track = opts.parent.is_some();
        req.parent_id = Some(opts.parent.clone().unwrap_or_else(|| opts.from.clone()));
        self.hub
            .tasks
            .submit(tab, req)
            .map_err(|e| task_error(e, target))
    }

    /// Waits for a handed-out task. A foreman's worker that was lost or failed gets its
    /// subtask moved to another worker of the same group; an `auto` target's failed tab is
    /// replaced by another. `tried` names the tabs tried already.
    pub async fn follow(
        &self,
        opts: &AskOpts,
        target: &str,
        prompt: Prompt,
        mut ticket: Ticket,
        mut tried: Vec<String>,
    ) -> Result<Answer, AskError> {
        loop {
            let tab = ticket.tab().clone();
            let result = ticket.wait(&self.hub.tasks).await;
            match self.after(opts, target, &prompt, tab, result, &mut tried) {
                Next::Done(answer) => return answer,
                Next::Again(next) => ticket = next,
            }
        }
    }

    /// What a task's result leads to: the answer (or why there is none), or the task handed
    /// out again to another tab (a foreman's group, an `auto` target).
    fn after(
        &self,
        opts: &AskOpts,
        target: &str,
        prompt: &Prompt,
        tab: Arc<Client>,
        result: Result<String, TaskError>,
        tried: &mut Vec<String>,
    ) -> Next {
        if let Err(e) = &result {
            crate::pick::on_task_error(&self.pick, &tab, e);
        }
        let e = match result {
            Ok(text) => {
                self.note_reply(&tab.id, &text);
                return Next::Done(Ok(Answer { tab, text }));
            }
            Err(e) => e,
        };
        let lost = matches!(e, TaskError::TabLost(_) | TaskError::TabFailed { .. });
        let again = if lost && opts.regroup.is_some() {
            tracing::info!(tab = %tab.display(), "subtask failed ({e}); trying another worker of the group");
            tried.push(tab.id.clone());
            let group = opts.regroup.clone().unwrap_or_default();
            let workers: Vec<Arc<Client>> = self
                .hub
                .registry
                .resolve(&format!("group:{group}"))
                .into_iter()
                .filter(|c| c.role() == Role::Worker && c.id != opts.from)
                .collect();
            self.hand_out(opts, target, prompt.clone(), &workers, tried)
        } else if lost && crate::pick::auto_sites(target).is_some() && tried.len() < AUTO_TRIES {
            // An `auto` target: a tab that failed mid-task is replaced by another.
            tracing::info!(tab = %tab.display(), "auto target failed ({e}); picking another tab");
            tried.push(tab.id.clone());
            match crate::pick::choose(&self.pick, target, tried, None) {
                Some(next) => self.hand_out(opts, target, prompt.clone(), &[next], &[]),
                None => Err(task_error(e, target)),
            }
        } else {
            Err(task_error(e, target))
        };
        match again {
            Ok(ticket) => Next::Again(ticket),
            Err(e) => Next::Done(Err(e)),
        }
    }

    /// Asks a tab already chosen a task as it is (its own id, run, node, timeout) and waits
    /// for the answer; a task that ends without one counts against the tab.
    pub async fn ask_tab(&self, tab: &Arc<Client>, req: TaskRequest) -> Result<String, TaskError> {
        let result = self.hub.tasks.ask(tab, req).await;
        if let Err(e) = &result {
            crate::pick::on_task_error(&self.pick, tab, e);
        }
        result
    }

    /// Asks a tab already chosen a task and waits for the whole outcome (the answer and when
    /// its first chunk came). The caller counts a failure against the tab (the runner does,
    /// once for the foreman's two turns and a worker's one).
    pub async fn ask_outcome(&self, tab: &Arc<Client>, req: TaskRequest) -> Outcome {
        self.hub.tasks.ask_outcome(tab, req).await
    }

    /// Submits a task to a tab already chosen (the API's admission lease picked it) and
    /// hands back its ticket to wait on.
    pub fn submit(&self, tab: &Arc<Client>, req: TaskRequest) -> Result<Ticket, TaskError> {
        self.hub.tasks.submit(tab, req)
    }

    /// Asks one target and waits for its answer.
    pub async fn ask(
        &self,
        target: &str,
        prompt: Prompt,
        opts: &AskOpts,
    ) -> Result<Answer, AskError> {
        let tabs = self.resolve(target)?;
        let ticket = self.hand_out(opts, target, prompt.clone(), &tabs, &[])?;
        self.follow(opts, target, prompt, ticket, Vec::new()).await
    }

    /// Every prompt reaches its tab before the first answer is awaited, in one pass: a
    /// fan-out to 1,000 tabs pays no per-future scheduling before the last task is sent.
    /// One waiter follows every task (`Tasks::wait_many`: one timer at the batch's latest
    /// deadline, one small entry per task, not a future per task); only a task handed out
    /// again (a failed tab's, to another) is followed by a future of its own.
    pub async fn ask_all(
        &self,
        work: Vec<(String, Prompt)>,
        opts: &AskOpts,
    ) -> Vec<Result<Answer, AskError>> {
        use futures_util::StreamExt;
        // Tasks for tabs on other nodes leave as one batch per node, after the loop.
        let batch = self.hub.engine.hold();
        let mut answers: Vec<Option<Result<Answer, AskError>>> = Vec::with_capacity(work.len());
        let mut tickets = Vec::with_capacity(work.len());
        // A ticket's place in `tickets` → its place in `work`.
        let mut place = Vec::with_capacity(work.len());
        for (at, (target, prompt)) in work.iter().enumerate() {
            let ticket = self
                .resolve(target)
                .and_then(|tabs| self.hand_out(opts, target, prompt.clone(), &tabs, &[]));
            match ticket {
                Ok(t) => {
                    tickets.push(t);
                    place.push(at);
                    answers.push(None);
                }
                Err(e) => answers.push(Some(Err(e))),
            }
        }
        drop(batch);
        let mut waits = self.hub.tasks.wait_many(tickets);
        let mut again = futures_util::stream::FuturesUnordered::new();
        loop {
            tokio::select! {
                Some((t, tab, outcome)) = waits.next() => {
                    let at = place[t];
                    let (target, prompt) = &work[at];
                    let mut tried = Vec::new();
                    match self.after(opts, target, prompt, tab, outcome.result, &mut tried) {
                        Next::Done(answer) => answers[at] = Some(answer),
                        Next::Again(ticket) => again.push(async move {
                            (at, self.follow(opts, target, prompt.clone(), ticket, tried).await)
                        }),
                    }
                }
                Some((at, answer)) = again.next() => answers[at] = Some(answer),
                else => break,
            }
        }
        // Every place has its answer by now: each ticket comes out of `waits` once (answered
        // or timed out), and each task handed out again out of `again`.
        answers
            .into_iter()
            .zip(&work)
            .map(|(answer, (target, _))| {
                answer.unwrap_or_else(|| {
                    Err(AskError::Failed {
                        target: target.clone(),
                        message: "任务结果丢失 / the task's outcome was lost".into(),
                    })
                })
            })
            .collect()
    }

    /// Types `text` into the input box of the tab `target` names (sent with `auto_send`),
    /// without a task: nothing is waited for. A tab that is away gets it when it returns.
    pub fn deliver(&self, target: &str, text: &str, auto_send: bool) -> Result<(), AskError> {
        let tab = self
            .resolve(target)?
            .into_iter()
            .next()
            .ok_or_else(|| AskError::NotConnected(target.to_string()))?;
        let frame = ServerFrame::Deliver {
            text: text.to_string(),
            auto_send,
            run_id: None,
            deliver_id: None,
            agent: None,
        };
        self.hub
            .registry
            .send(&tab.id, &frame)
            .map(|_| ())
            .map_err(|e| AskError::Failed {
                target: target.to_string(),
                message: e.to_string(),
            })
    }
}
