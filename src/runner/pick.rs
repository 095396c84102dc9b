//! Which tab a flow node's item goes to (docs/flows.md, "Targets"): matching the target, not the
//! run's master unless named exactly, not in the item's `avoid`, spread across a node's items,
//! within the run's per-site pools, least loaded first; waiting up to the queue timeout for one.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use crate::flows::engine::{Dispatch, PromptTarget};
use crate::hub::registry::Client;

use super::{RunCtx, QUEUE_WAIT};

/// Picks a connected tab for a dispatch: matching the target, not the run's master (unless
/// named exactly), not in `avoid`, not already busy with another item of the same node,
/// least loaded first. Waits up to the queue timeout for one to connect.
/// What tab choice needs to know about the run.
pub(super) struct Pick<'a> {
    pub(super) run_id: &'a str,
    pub(super) master: Option<&'a str>,
    /// `limits.pools`: at most N of this run's tasks in flight per site.
    pub(super) pools: &'a BTreeMap<String, u32>,
}

pub(super) async fn pick_tab(
    ctx: &Arc<RunCtx>,
    d: &Dispatch,
    pick: &Pick<'_>,
) -> Option<Arc<Client>> {
    let wait = d
        .timeout
        .queue_ms
        .map(Duration::from_millis)
        .unwrap_or(QUEUE_WAIT);
    let deadline = tokio::time::Instant::now() + wait;
    let mut events = ctx.events.subscribe();
    loop {
        if let Some(c) = choose(ctx, d, pick) {
            return Some(c);
        }
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return None;
        }
        // Wake on any tab connecting, or re-check periodically (tabs free up).
        tokio::select! {
            _ = events.recv() => {}
            _ = tokio::time::sleep(left.min(Duration::from_millis(250))) => {}
        }
    }
}

fn choose(ctx: &RunCtx, d: &Dispatch, pick: &Pick<'_>) -> Option<Arc<Client>> {
    let master = pick.master;
    let target = match &d.target {
        PromptTarget::Role(r) => format!("role:{r}"),
        PromptTarget::Name(n) => n.clone(),
    };
    if crate::pick::auto_sites(&target).is_some() {
        // `auto`: the decision engine picks among eligible workers, never a tab that failed
        // this item before (a tab that fails mid-task is replaced by another).
        let why = format!("{}/{}/{}", pick.run_id, d.node, d.item);
        return crate::pick::choose(&ctx.asks.pick, &target, &d.avoid, Some(&why))
            .or_else(|| crate::pick::choose(&ctx.asks.pick, &target, &[], Some(&why)));
    }
    let mut candidates: Vec<Arc<Client>> = ctx
        .registry
        .resolve(&target)
        .into_iter()
        .filter(|c| {
            Some(c.id.as_str()) != master
                || c.id == target
                || c.info().label.as_deref() == Some(target.as_str())
        })
        .collect();
    if candidates.is_empty() {
        return None;
    }
    let avoid = |c: &Client| d.avoid.contains(&c.id) || d.avoid.contains(&c.display());
    if candidates.iter().any(|c| !avoid(c)) {
        candidates.retain(|c| !avoid(c));
    }
    // This run's tasks in flight per site, for `limits.pools` and site diversity.
    let run_prefix = format!("{}/", pick.run_id);
    let node_prefix = format!("{}/{}/", pick.run_id, d.node);
    let mut per_site: HashMap<String, (u32, u32)> = HashMap::new(); // site → (run, node)
    for c in ctx.registry.all() {
        if let Some((task, _)) = ctx.tasks.current(&c) {
            if task.starts_with(&run_prefix) {
                let e = per_site.entry(c.info().site.to_lowercase()).or_default();
                e.0 += 1;
                e.1 += u32::from(task.starts_with(&node_prefix));
            }
        }
    }
    candidates.retain(|c| {
        let site = c.info().site.to_lowercase();
        match pick.pools.get(&site) {
            Some(cap) => per_site.get(&site).map_or(0, |e| e.0) < *cap,
            None => true,
        }
    });
    if candidates.is_empty() {
        return None; // every eligible site is at its pool limit: wait for one to free up
    }
    // Items of one node go to distinct tabs when there are enough: skip busy tabs that
    // already hold a task of this run's node.
    let prefix = d
        .idempotency_key
        .rsplitn(3, '/')
        .nth(2)
        .unwrap_or_default()
        .to_string();
    let busy_with_node = |c: &Client| {
        ctx.tasks
            .current(c)
            .is_some_and(|(task, _)| task.starts_with(&prefix) && !prefix.is_empty())
    };
    let spread: Vec<Arc<Client>> = candidates
        .iter()
        .filter(|c| !busy_with_node(c))
        .cloned()
        .collect();
    let pool = if spread.is_empty() {
        candidates
    } else {
        spread
    };
    // Least loaded first; then sites this node is not already using (diversity for
    // `workers: N`); then fewest tasks ever; then item index rotation for spread.
    let site_use = |c: &Client| {
        per_site
            .get(&c.info().site.to_lowercase())
            .map_or(0, |e| e.1)
    };
    let tasks_started = |c: &Client| c.tasks_started.load(std::sync::atomic::Ordering::Relaxed);
    pick_least(
        pool,
        |c| (ctx.tasks.load(c), site_use(c), tasks_started(c)),
        d.item,
    )
}

/// Picks among the candidates with the least `(load, site use)`, rotating by `item` among
/// ties (the third key component only orders them). Each candidate's key is read exactly
/// once: live load changes while we look, and a second read can leave no candidate equal to
/// the least one seen (a division by zero in the rotation, after a restart under load).
pub(super) fn pick_least<T>(
    pool: Vec<T>,
    mut key: impl FnMut(&T) -> (usize, u32, u64),
    item: usize,
) -> Option<T> {
    let mut ranked: Vec<((usize, u32, u64), T)> = pool.into_iter().map(|c| (key(&c), c)).collect();
    ranked.sort_by_key(|(k, _)| *k);
    let (least_load, least_site, _) = ranked.first()?.0;
    let ties = ranked
        .iter()
        .take_while(|(k, _)| k.0 == least_load && k.1 == least_site)
        .count()
        .max(1);
    Some(ranked.swap_remove(item % ties).1)
}
