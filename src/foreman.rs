//! The foreman cycle (包工头): a task given to a foreman tab is wrapped in its card's split
//! instructions; the dispatch commands in its reply run against its own group only; the
//! answers go back to it as a follow-up; its reply to that is the result.

use std::sync::Arc;

use minijinja::{context, Environment};

use crate::commands::permissions::Source;
use crate::commands::scanner::scan_text;
use crate::control::Control;
use crate::hub::registry::Client;
use crate::hub::tasks::{TaskError, TaskRequest};
use crate::hub::HubEvent;
use crate::protocol::Role;

/// Used when the foreman's card has no `split_template`.
pub const DEFAULT_SPLIT: &str = "{% if instructions %}{{ instructions }}\n\n{% endif %}\
你是包工头，手下的工人是 / You are a foreman. Your workers: {{ workers }}.\n\
任务 / Task:\n{{ task }}\n\n\
把任务拆成子任务，用一条命令分派给工人，只回复这条命令 / Split the task into subtasks and \
dispatch them with ONE command, replying with nothing else, e.g.\n\
?<parallel to=[{{ example }}]>!\n\
如果任务很小，直接回答即可 / If the task is small, just answer it yourself.";

/// Used when the foreman's card has no `followup_template`.
pub const DEFAULT_FOLLOWUP: &str = "工人们的回答 / Your workers answered:\n\n{{ answers }}\n\n\
请综合成最终结果 / Now write the final result for the task:\n{{ task }}";

/// Runs one task through a foreman. `req.task_id` is the idempotency key of the whole cycle.
pub async fn cycle(
    control: &Arc<Control>,
    foreman: &Arc<Client>,
    req: TaskRequest,
) -> Result<String, TaskError> {
    let mut lost = control.events.subscribe();
    let id = foreman.id.clone();
    let work = run(control, foreman, req);
    tokio::pin!(work);
    loop {
        tokio::select! {
            r = &mut work => return r,
            ev = lost.recv() => {
                if matches!(ev, Ok(HubEvent::Lost(ref c)) if *c == id) {
                    // Dropping `work` drops its subtasks' waits; queued subtasks are skipped.
                    return Err(TaskError::TabLost(foreman.display()));
                }
            }
        }
    }
}

async fn run(
    control: &Arc<Control>,
    foreman: &Arc<Client>,
    req: TaskRequest,
) -> Result<String, TaskError> {
    let info = foreman.info();
    let card = control.commands.card_for(foreman);
    let card = card.as_ref();
    let workers: Vec<String> = match &info.group {
        Some(g) => control
            .registry
            .resolve(&format!("group:{g}"))
            .into_iter()
            .filter(|c| c.info().role == Role::Worker)
            .map(|c| c.display())
            .collect(),
        None => Vec::new(),
    };
    let key = req.task_id.clone().unwrap_or_default();
    let split = card
        .and_then(|c| c.split_template.as_deref())
        .unwrap_or(DEFAULT_SPLIT);
    let example = workers
        .iter()
        .take(2)
        .map(|w| format!("{w}: …"))
        .collect::<Vec<_>>()
        .join(", ");
    let prompt = render(
        split,
        context! {
            task => req.prompt,
            workers => workers.join(", "),
            example => example,
            instructions => card.and_then(|c| c.instructions.clone()),
        },
    );
    let mut first = req.clone();
    first.prompt = prompt.into();
    let reply = control.asks.ask_outcome(foreman, first).await.result?;
    let commands: Vec<String> = scan_text(&reply)
        .into_iter()
        .filter_map(Result::ok)
        .map(|f| f.body)
        .collect();
    if commands.is_empty() {
        // Taken at its word: the foreman answered the task itself.
        return Ok(reply);
    }
    let caller = control.commands.caller(foreman, Source::Reply);
    let mut answers = Vec::new();
    for body in &commands {
        let out = crate::control::run_command_for(control, &caller, body, Some(&key)).await;
        if out.success {
            answers.push(out.output);
        } else {
            answers.push(format!("(失败 / failed: {})", out.output));
        }
    }
    let follow = card
        .and_then(|c| c.followup_template.as_deref())
        .unwrap_or(DEFAULT_FOLLOWUP);
    let mut second = req.clone();
    second.task_id = Some(format!("{key}/followup"));
    second.prompt = render(
        follow,
        context! { task => req.prompt, answers => answers.join("\n\n") },
    )
    .into();
    control.asks.ask_outcome(foreman, second).await.result
}

/// Renders a card template; a broken template falls back to the raw text plus the values.
fn render(template: &str, ctx: minijinja::Value) -> String {
    let env = Environment::new();
    match env.render_str(template, ctx.clone()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("role card template: {e}");
            format!("{template}\n\n{ctx}")
        }
    }
}
