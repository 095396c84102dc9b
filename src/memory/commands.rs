//! How memory answers are worded for a tab (bilingual, ids as `#N` so they can be quoted).

use super::{Hit, MemoryEntry};

fn tags(e: &MemoryEntry) -> String {
    if e.tags.is_empty() {
        "-".into()
    } else {
        e.tags.join(",")
    }
}

/// `#3 · 85.7° · tags a,b`: a neighbour's line (no text).
pub fn short(e: &MemoryEntry) -> String {
    format!("#{} · {}° · tags {}", e.id, e.temp(), tags(e))
}

/// A memory in full.
pub fn full(e: &MemoryEntry) -> String {
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
pub fn list(scope: &str, entries: &[MemoryEntry]) -> String {
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
pub fn tag_cloud(scope: &str, tags: &[(String, usize, MemoryEntry)]) -> String {
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
pub fn summary_prompt(scope: &str, entries: &[MemoryEntry]) -> String {
    let mut out = format!(
        "请把下面团队记忆（范围 {scope}）总结成一条简洁的记忆，保留具体的事实、决定和约定；只回复总结本身，最后一行写 `importance: N`（1–10，团队有多需要它）。\n\
         Summarise the team memories below (scope `{scope}`) into one concise memory that keeps \
         the concrete facts, decisions and conventions. Reply with the summary only, then a \
         last line `importance: N` (N from 1 to 10: how much the team needs it).\n\n"
    );
    for e in entries {
        out.push_str(&format!("[#{} · tags {}] {}\n", e.id, tags(e), e.text));
    }
    out
}

/// The prompt that asks a tab how important a memory is.
pub fn importance_prompt(text: &str) -> String {
    format!(
        "这条团队记忆有多重要？只回复一个 1 到 10 的数字（10 = 团队每次都需要，1 = 几乎用不到）。\n\
         How important is this team memory? Reply with one number from 1 to 10 only \
         (10 = the team needs it every time, 1 = hardly ever).\n\n{text}"
    )
}

/// The first whole number in a tab's answer, if it is from 1 to 10 ("7", "Importance: 7/10").
pub fn parse_importance(answer: &str) -> Option<u8> {
    let digits: String = answer
        .chars()
        .skip_while(|c| !c.is_ascii_digit())
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok().filter(|n| (1..=10).contains(n))
}

/// A summary without its last line `importance: N` (any case, `重要性:` too), and that N.
pub fn split_importance(answer: &str) -> (String, Option<u8>) {
    let trimmed = answer.trim_end();
    let (body, last) = match trimmed.rfind('\n') {
        Some(i) => (&trimmed[..i], &trimmed[i + 1..]),
        None => ("", trimmed),
    };
    let l = last
        .trim()
        .trim_matches(|c| c == '*' || c == '`')
        .to_lowercase();
    let rest = l
        .strip_prefix("importance")
        .or_else(|| l.strip_prefix("重要性"))
        .map(|r| r.trim_start_matches([':', '：', ' ', '=']));
    match rest.and_then(parse_importance) {
        Some(n) if !body.trim().is_empty() => (body.trim_end().to_string(), Some(n)),
        _ => (trimmed.to_string(), None),
    }
}

#[cfg(test)]
mod rating_tests {
    use super::*;

    #[test]
    fn importance_is_read_from_a_tabs_answer() {
        assert_eq!(parse_importance("7"), Some(7));
        assert_eq!(parse_importance("Importance: 9/10"), Some(9));
        assert_eq!(parse_importance("10"), Some(10));
        assert_eq!(parse_importance("0"), None);
        assert_eq!(parse_importance("42"), None);
        assert_eq!(parse_importance("very important"), None);
    }

    #[test]
    fn a_summarys_last_line_carries_its_importance() {
        let (body, n) = split_importance("- uses port 8027\n- tabs: 9\n\nimportance: 6\n");
        assert_eq!((body.as_str(), n), ("- uses port 8027\n- tabs: 9", Some(6)));
        let (body, n) = split_importance("要点一\n**重要性：9**");
        assert_eq!((body.as_str(), n), ("要点一", Some(9)));
        // No rating line: the text is kept whole.
        let (body, n) = split_importance("just a summary\nsecond line");
        assert_eq!((body.as_str(), n), ("just a summary\nsecond line", None));
        // A rating alone is not a summary.
        assert_eq!(split_importance("importance: 5").1, None);
    }
}
