//! `remember TEXT [scope=S]` and `memory add|search|list|show|rewrite|del|pin|unpin|summarize…`
//! (docs/memory-and-skills.md): the team's memory, through the `Services` port.
//! Permission: [`Intent::Memory`] for every scope read or written (a tab reaches `global`, its
//! group and its own scope; writing needs `memory_write`). `summarize` asks a tab through the
//! `Tabs` port like `to`. Help: `remember`, `memory`.

use std::sync::Arc;

use super::failed;
use crate::commands::ast::{MemoryCmd, Role, Target, Template};
use crate::commands::interp::{CmdError, Ctx, Frame, Host, Interpreter, Res};
use crate::commands::permissions::Intent;
use crate::memory::{self, commands as say, Memory, NewMemory};

/// The help topics this module answers for (checked against the help table in `verbs`).
#[cfg(test)]
pub(crate) const HELP: &[&str] = &["remember", "memory"];

fn ids(list: &[i64]) -> String {
    list.iter()
        .map(|i| format!("#{i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl<H: Host> Interpreter<H> {
    fn mem(&self) -> Result<Arc<Memory>, CmdError> {
        self.host
            .memory()
            .ok_or_else(|| failed("记忆不可用 / memory is not available on this hub"))
    }

    fn mem_check(&self, ctx: &Ctx<'_>, write: bool, scope: &str) -> Result<(), CmdError> {
        Ok(self.check(ctx.caller, Intent::Memory { write, scope })?)
    }

    pub(in crate::commands) async fn remember(
        &self,
        ctx: &Ctx<'_>,
        scope: Option<&str>,
        text: &Template,
        frame: &Frame,
    ) -> Res {
        let mem = self.mem()?;
        let scope = scope.unwrap_or(ctx.caller.default_scope());
        self.mem_check(ctx, true, scope)?;
        let text = self.expand(ctx, text, frame)?;
        mem.set_note(scope, text.trim()).map_err(failed)?;
        Ok(if text.trim().is_empty() {
            format!("短期记忆已清除 / note cleared ({scope})")
        } else {
            format!("短期记忆已更新 / note set ({scope})")
        })
    }

    /// The scopes of these memories, each checked for writing.
    fn check_ids(&self, ctx: &Ctx<'_>, mem: &Memory, list: &[i64]) -> Result<(), CmdError> {
        for id in list {
            let e = mem.get(*id).map_err(failed)?;
            self.mem_check(ctx, true, &e.scope)?;
        }
        Ok(())
    }

    pub(in crate::commands) async fn memory(
        &self,
        ctx: &Ctx<'_>,
        m: &MemoryCmd,
        frame: &Frame,
    ) -> Res {
        let mem = self.mem()?;
        match m {
            MemoryCmd::Add {
                scope,
                text,
                tags,
                pin,
                importance,
                rate,
            } => {
                let scope = scope.as_deref().unwrap_or(ctx.caller.default_scope());
                self.mem_check(ctx, true, scope)?;
                let text = self.expand(ctx, text, frame)?;
                let mut note = String::new();
                let mut importance = *importance;
                if let Some(target) = rate {
                    let tab = self.resolve(ctx, target, frame)?[0].clone();
                    self.step(ctx)?;
                    let answer = self
                        .host
                        .ask(ctx.caller, &tab, say::importance_prompt(text.trim()).into())
                        .await?;
                    match say::parse_importance(&answer) {
                        Some(n) => {
                            importance = Some(n);
                            note = format!(", importance {n} rated by {tab}");
                        }
                        None => {
                            note = format!(
                                "; {tab} 未给出 1–10 的数字，重要性取默认值 / gave no number from 1 to 10, importance left at the default"
                            );
                        }
                    }
                }
                let id = mem
                    .add(&NewMemory {
                        scope,
                        text: text.trim(),
                        tags,
                        pinned: *pin,
                        importance,
                        author: Some(&ctx.caller.client_id),
                        sources: &[],
                    })
                    .map_err(failed)?;
                Ok(format!("已记住 / remembered #{id} ({scope}{note})"))
            }
            MemoryCmd::Rewrite {
                id,
                text,
                tags,
                importance,
            } => {
                self.check_ids(ctx, &mem, &[*id])?;
                let text = self.expand(ctx, text, frame)?;
                mem.rewrite(*id, text.trim(), tags.as_deref(), *importance)
                    .map_err(failed)?;
                Ok(format!("已改写 / rewrote #{id}"))
            }
            MemoryCmd::Search { scope, words } => {
                let scope = scope.as_deref().unwrap_or(ctx.caller.default_scope());
                self.mem_check(ctx, false, scope)?;
                let words = self.expand(ctx, words, frame)?;
                let hits = mem
                    .search(scope, &words, memory::SEARCH_LIMIT)
                    .map_err(failed)?;
                Ok(say::hits(scope, &words, &hits))
            }
            MemoryCmd::Del(list) => {
                self.check_ids(ctx, &mem, list)?;
                let n = mem.delete(list).map_err(failed)?;
                Ok(format!("已删除 / deleted {n}: {}", ids(list)))
            }
            MemoryCmd::Pin(list) | MemoryCmd::Unpin(list) => {
                let pin = matches!(m, MemoryCmd::Pin(_));
                self.check_ids(ctx, &mem, list)?;
                mem.set_pinned(list, pin).map_err(failed)?;
                Ok(if pin {
                    format!("已置顶 / pinned {}", ids(list))
                } else {
                    format!("已取消置顶 / unpinned {} (back at 100°)", ids(list))
                })
            }
            MemoryCmd::Tags { scope } => {
                let scope = scope.as_deref().unwrap_or(ctx.caller.default_scope());
                self.mem_check(ctx, false, scope)?;
                Ok(say::tag_cloud(scope, &mem.tags(scope).map_err(failed)?))
            }
            MemoryCmd::List { scope, n } => {
                let scope = scope.as_deref().unwrap_or(ctx.caller.default_scope());
                self.mem_check(ctx, false, scope)?;
                Ok(say::list(scope, &mem.hottest(scope, *n).map_err(failed)?))
            }
            MemoryCmd::Summarize { scope, to, n } => {
                self.summarize(ctx, &mem, scope.as_deref(), to.as_ref(), *n, frame)
                    .await
            }
        }
    }

    async fn summarize(
        &self,
        ctx: &Ctx<'_>,
        mem: &Memory,
        scope: Option<&str>,
        to: Option<&Target>,
        n: usize,
        frame: &Frame,
    ) -> Res {
        let scope = scope.unwrap_or(ctx.caller.default_scope());
        self.mem_check(ctx, true, scope)?;
        let entries = mem.hottest(scope, n).map_err(failed)?;
        if entries.is_empty() {
            return Err(failed(format!(
                "没有可总结的记忆 / no memories in `{scope}` to summarise"
            )));
        }
        let target = match to {
            Some(t) => t.clone(),
            None => Target::Role(Role::Worker),
        };
        let names = self.resolve(ctx, &target, frame)?;
        let tab = names[0].clone();
        self.step(ctx)?;
        let answer = self
            .host
            .ask(
                ctx.caller,
                &tab,
                say::summary_prompt(scope, &entries).into(),
            )
            .await?;
        // The tab rates the summary on its last line; without one it counts as important (8).
        let (answer, rated) = say::split_importance(&answer);
        let sources: Vec<i64> = entries.iter().map(|e| e.id).collect();
        let mut tags = vec!["summary".to_string()];
        for e in &entries {
            for t in &e.tags {
                if tags.len() < 10 && !tags.contains(t) {
                    tags.push(t.clone());
                }
            }
        }
        let id = mem
            .add(&NewMemory {
                scope,
                text: answer.trim(),
                tags: &tags,
                pinned: false,
                importance: Some(rated.unwrap_or(8)),
                author: Some(&tab),
                sources: &sources,
            })
            .map_err(failed)?;
        Ok(format!(
            "已写入摘要 / summary #{id} ({scope}) by {tab}, from {}:\n{}",
            ids(&sources),
            answer.trim()
        ))
    }
}
