//! Aggregation strategies: how the replies of a fanned-out node become its one output.

use serde_json::{Map, Value};

use crate::flows::model::Aggregate;

/// One reply, in item order.
#[derive(Debug, Clone, PartialEq)]
pub struct ItemReply<'a> {
    /// `[label]` header for `concat` (the tab's label, or the item's).
    pub label: &'a str,
    /// The reply text.
    pub text: &'a str,
}

/// Combines `replies` (item order) by `strategy`. `Judge` is handled by the engine (it sends the
/// candidates to the judge); here it falls back to `concat`, the text the judge is shown.
pub fn aggregate(strategy: Aggregate, replies: &[ItemReply<'_>]) -> Result<String, String> {
    match strategy {
        Aggregate::Concat | Aggregate::Judge => Ok(concat(replies)),
        Aggregate::List => Ok(list(replies)),
        Aggregate::Vote => Ok(vote(replies)),
        Aggregate::JsonMerge => json_merge(replies),
    }
}

/// `[label]\ntext` blocks separated by a blank line; a single reply is returned as is.
pub fn concat(replies: &[ItemReply<'_>]) -> String {
    if let [one] = replies {
        return one.text.to_string();
    }
    replies
        .iter()
        .map(|r| format!("[{}]\n{}", r.label, r.text))
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// A JSON array of the replies.
pub fn list(replies: &[ItemReply<'_>]) -> String {
    let texts: Vec<&str> = replies.iter().map(|r| r.text).collect();
    serde_json::to_string(&texts).unwrap_or_else(|_| "[]".into())
}

/// Lower-cased, whitespace-collapsed, without surrounding punctuation: `" Yes."` ≈ `"yes"`.
pub fn normalise(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    words
        .join(" ")
        .trim_matches(|c: char| c.is_ascii_punctuation() || "。！？，、".contains(c))
        .to_lowercase()
}

/// The most common reply after [`normalise`]; ties go to the earliest; the winner's first
/// original text is returned.
pub fn vote(replies: &[ItemReply<'_>]) -> String {
    let keys: Vec<String> = replies.iter().map(|r| normalise(r.text)).collect();
    let mut best: Option<(usize, usize)> = None; // (count, first index)
    for (i, key) in keys.iter().enumerate() {
        if keys[..i].contains(key) {
            continue;
        }
        let count = keys.iter().filter(|k| *k == key).count();
        if best.is_none_or(|(c, _)| count > c) {
            best = Some((count, i));
        }
    }
    best.map(|(_, i)| replies[i].text.trim().to_string())
        .unwrap_or_default()
}

/// The JSON inside a reply: the first fenced ```json (or ```) block, else the whole text.
pub fn extract_json(text: &str) -> &str {
    let fenced = text.find("```json").map(|i| i + 7).or_else(|| {
        text.find("```").map(|i| {
            let rest = &text[i + 3..];
            i + 3 + rest.find('\n').unwrap_or(0)
        })
    });
    match fenced {
        Some(start) => {
            let body = &text[start..];
            body.find("```").map_or(body, |end| &body[..end]).trim()
        }
        None => text.trim(),
    }
}

/// Deep-merges the replies parsed as JSON: objects merge key by key, arrays concatenate,
/// later scalars win.
pub fn json_merge(replies: &[ItemReply<'_>]) -> Result<String, String> {
    let mut merged = Value::Object(Map::new());
    for reply in replies {
        let value: Value = serde_json::from_str(extract_json(reply.text)).map_err(|e| {
            format!(
                "回复不是 JSON / the reply of [{}] is not JSON ({e}); json_merge needs JSON replies",
                reply.label
            )
        })?;
        merge(&mut merged, value);
    }
    serde_json::to_string_pretty(&merged).map_err(|e| e.to_string())
}

fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(&k) {
                    Some(existing) => merge(existing, v),
                    None => {
                        a.insert(k, v);
                    }
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => a.extend(b),
        (slot, value) => *slot = value,
    }
}

/// The prompt sent to the judge of `aggregate: judge`.
pub fn judge_prompt(task: &str, replies: &[ItemReply<'_>]) -> String {
    let mut out =
        String::from("You are the judge. Several assistants answered the same task.\n\nTask:\n");
    out.push_str(task.trim());
    out.push_str("\n\nCandidates:\n");
    for (i, reply) in replies.iter().enumerate() {
        out.push_str(&format!(
            "\n[{}] ({})\n{}\n",
            i + 1,
            reply.label,
            reply.text.trim()
        ));
    }
    out.push_str(
        "\nChoose the best answer, improving it with the others' good points if useful. \
         ItemReply with the final answer only.",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r<'a>(label: &'a str, text: &'a str) -> ItemReply<'a> {
        ItemReply { label, text }
    }

    #[test]
    fn concat_uses_headers_in_item_order() {
        let out = concat(&[r("sim-a", "one"), r("sim-b", "two")]);
        assert_eq!(out, "[sim-a]\none\n\n[sim-b]\ntwo");
        assert_eq!(concat(&[r("x", "only")]), "only");
    }

    #[test]
    fn list_is_a_json_array() {
        assert_eq!(list(&[r("a", "x\"y"), r("b", "z")]), "[\"x\\\"y\",\"z\"]");
    }

    #[test]
    fn vote_normalises_and_breaks_ties_by_order() {
        let out = vote(&[
            r("a", "Blue"),
            r("b", " yes."),
            r("c", "YES"),
            r("d", "blue"),
        ]);
        assert_eq!(out, "Blue");
        let out = vote(&[r("a", "no"), r("b", "Yes!"), r("c", "yes")]);
        assert_eq!(out, "Yes!");
    }

    #[test]
    fn json_merge_deep_merges_and_reads_fences() {
        let a = "Here you go:\n```json\n{\"a\": {\"x\": 1}, \"tags\": [\"p\"]}\n```";
        let b = "{\"a\": {\"y\": 2}, \"tags\": [\"q\"], \"n\": 3}";
        let out = json_merge(&[r("a", a), r("b", b)]).expect("merges");
        let v: Value = serde_json::from_str(&out).expect("json");
        assert_eq!(v["a"]["x"], 1);
        assert_eq!(v["a"]["y"], 2);
        assert_eq!(v["tags"], serde_json::json!(["p", "q"]));
        assert_eq!(v["n"], 3);
    }

    #[test]
    fn json_merge_names_the_reply_that_is_not_json() {
        let err = json_merge(&[r("a", "{}"), r("sim-b", "sorry, no")]).expect_err("not json");
        assert!(err.contains("[sim-b] is not JSON"), "{err}");
    }

    #[test]
    fn judge_prompt_lists_candidates() {
        let p = judge_prompt("Name a colour", &[r("a", "red"), r("b", "blue")]);
        assert!(p.contains("[1] (a)\nred"));
        assert!(p.contains("[2] (b)\nblue"));
    }
}
