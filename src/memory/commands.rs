//! How memory answers are worded for a tab (bilingual, ids as `#N` so they can be quoted).

use super::{Entry, Hit};

fn tags(e: &Entry) -> String {
    if e.tags.is_empty() {
        "-".into()
    } else {
        e.tags.join(",")
    }
}

/// `#3 · 85.7° · tags a,b`: a neighbour's line (no text).
pub fn short(e: &Entry) -> String {
    format!("#{} · {}° · tags {}", e.id, e.temp(), tags(e))
}

/// A memory in full.
pub fn full(e: &Entry) -> String {
    let mut head = format!(
        "#{} [{}° · importance {} · tags {}",
        e.id,
        e.temp(),
        e.importance,
        tags(e)
    );
    if e.pinned {
        head.push_str(" · pinned");
    }
    if !e.sources.is_empty() {
        let s: Vec<String> = e.sources.iter().map(|i| format!("#{i}")).collect();
        head.push_str(&format!(" · sources {}", s.join(",")));
    }
    head.push(']');
    format!("{head}\n{}", e.text)
}

/// The answer to `memory search`.
pub fn hits(scope: &str, words: &str, hits: &[Hit]) -> String {
    if hits.is_empty() {
        return format!("没有找到 / no memory in `{scope}` matches: {words}");
    }
    let mut out = format!(
        "记忆搜索 / memory search in `{scope}`: {} hit(s)\n",
        hits.len()
    );
    for h in hits {
        out.push('\n');
        out.push_str(&full(&h.entry));
        out.push('\n');
        let n: Vec<String> = h.before.iter().chain(h.after.iter()).map(short).collect();
        if n.is_empty() {
            out.push_str("  相邻 / neighbours: -\n");
        } else {
            out.push_str(&format!("  相邻 / neighbours: {}\n", n.join(" | ")));
        }
    }
    out.trim_end().to_string()
}

/// The answer to `memory list`.
pub fn list(scope: &str, entries: &[Entry]) -> String {
    if entries.is_empty() {
        return format!("记忆为空 / no memories in `{scope}`");
    }
    let mut out = format!("最热的记忆 / hottest memories in `{scope}`:\n");
    for e in entries {
        out.push_str(&full(e));
        out.push('\n');
    }
    out.trim_end().to_string()
}

/// The answer to `memory tags`.
pub fn tag_cloud(scope: &str, tags: &[(String, usize, Entry)]) -> String {
    if tags.is_empty() {
        return format!("没有标签 / no tags in `{scope}`");
    }
    let items: Vec<String> = tags
        .iter()
        .map(|(t, n, hottest)| format!("{t} ({n}, {}°)", hottest.temp()))
        .collect();
    format!(
        "标签 / tags in `{scope}` (hottest first): {}",
        items.join(", ")
    )
}

/// The prompt that asks a tab for a summary of `entries`.
pub fn summary_prompt(scope: &str, entries: &[Entry]) -> String {
    let mut out = format!(
        "请把下面团队记忆（范围 {scope}）总结成一条简洁的记忆，保留具体的事实、决定和约定；只回复总结本身。\n\
         Summarise the team memories below (scope `{scope}`) into one concise memory that keeps \
         the concrete facts, decisions and conventions. Reply with the summary only.\n\n"
    );
    for e in entries {
        out.push_str(&format!("[#{} · tags {}] {}\n", e.id, tags(e), e.text));
    }
    out
}
