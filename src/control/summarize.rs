//! Memory that summarizes itself (docs/memory-and-skills.md, "Summaries by themselves"): with
//! `--memory-summarizer TARGET`, every `--memory-summary-every N` new entries of a scope are
//! summarized by that tab into one memory that cites them as its sources. The summary is the
//! model's text, so it is stored defused: a `?<…>!` in it can never run. Off by default —
//! memories go to a site only when the person says so.

use super::*;

/// Waits for due scopes and summarizes each; returns when the hub stops.
pub async fn run(
    control: Arc<Control>,
    target: String,
    every: usize,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let memory = control.commands.memory.clone();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = memory.summary_due.notified() => {}
        }
        for scope in memory.take_due() {
            match summarize(&control, &target, &scope, every).await {
                Ok(id) => tracing::info!(scope, id, "memory summarized"),
                Err(e) => tracing::warn!(scope, "memory not summarized: {e}"),
            }
        }
    }
}

async fn summarize(
    control: &Control,
    target: &str,
    scope: &str,
    every: usize,
) -> Result<i64, String> {
    let memory = &control.commands.memory;
    let mut entries = memory.newest(scope, every).map_err(|e| e.to_string())?;
    entries.retain(|e| !e.tags.iter().any(|t| t == "summary"));
    if entries.is_empty() {
        return Err("nothing to summarize".into());
    }
    entries.reverse();
    let prompt = crate::memory::commands::summary_prompt(scope, &entries);
    let answer = control
        .asks
        .ask(target, prompt.into(), &AskOpts::default())
        .await
        .map_err(|e| e.to_string())?;
    let (text, rated) = crate::memory::commands::split_importance(&answer.text);
    let text = crate::agents::results::defuse(text.trim());
    let sources: Vec<i64> = entries.iter().map(|e| e.id).collect();
    let tags = vec!["summary".to_string(), "auto".to_string()];
    memory
        .add(&crate::memory::NewMemory {
            scope,
            text: &text,
            tags: &tags,
            pinned: false,
            importance: Some(rated.unwrap_or(8)),
            author: Some(&answer.tab.display()),
            sources: &sources,
        })
        .map_err(|e| e.to_string())
}
