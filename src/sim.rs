//! Simulated chat tabs: deterministic fake models that speak the userscript's protocol over a
//! real WebSocket (hello, task_update, chunk, turn_end). Used by `aicard demo` and by tests
//! that need tabs without a browser.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

/// How a simulated tab behaves.
#[derive(Debug, Clone)]
pub struct SimSpec {
    pub label: String,
    pub site: String,
    pub role: Option<String>,
    /// Mean delay between streamed chunks.
    pub chunk_delay: Duration,
    /// Persona used to shape answers (e.g. "严谨的审稿人").
    pub persona: String,
    /// Answers prompts instead of [`fake_reply`] (e.g. [`planner_reply`]).
    pub reply: Option<fn(&SimSpec, &str) -> String>,
}

impl SimSpec {
    pub fn worker(label: &str, persona: &str) -> SimSpec {
        SimSpec {
            label: label.into(),
            site: "sim".into(),
            role: None,
            chunk_delay: Duration::from_millis(35),
            persona: persona.into(),
            reply: None,
        }
    }
}

/// A simulated planner for `aicard demo --plan`: writes a flow for the goal in the prompt
/// with one mistake (a target that is not online, `gpt9`), and fixes it when the repair
/// prompt names it — deterministic, so the demo always shows one repair round.
pub fn planner_reply(_spec: &SimSpec, prompt: &str) -> String {
    // The goal: at the end of a planning prompt; in a repair prompt, in the flow's description.
    let goal = match prompt.split("## Goal / 目标\n").nth(1) {
        Some(g) => g.trim().to_string(),
        None => prompt
            .lines()
            .find_map(|l| l.strip_prefix("description: "))
            .and_then(|d| serde_json::from_str::<String>(d).ok())
            .unwrap_or_else(|| "the goal".into()),
    };
    let quoted = serde_json::Value::String(goal).to_string();
    let repaired = prompt.starts_with("修复 / REPAIR") && prompt.contains("`gpt9`");
    let reviewers = if repaired {
        "[sim-a, sim-b]"
    } else {
        "[sim-a, gpt9]"
    };
    format!(
        "好的，这是流程 / Here is the flow:\n```yaml\nname: planned\ndescription: {quoted}\n\
         inputs:\n  goal: {{default: {quoted}}}\nnodes:\n  - id: ideas\n    name: 构思\n    \
         to: {reviewers}\n    prompt: \"Give three ideas for: $goal\"\n  - id: pick\n    \
         name: 选择\n    depends_on: ideas\n    to: auto\n    prompt: \"Pick the best idea and \
         say why:\\n${{ideas.outputs}}\"\n  - id: report\n    depends_on: pick\n    to: master\n    \
         prompt: \"${{pick.output}}\"\n```\n"
    )
}

/// The deterministic reply of a fake model to a prompt.
pub fn fake_reply(spec: &SimSpec, prompt: &str) -> String {
    let seed = fnv(&format!("{}|{prompt}", spec.label));
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let topic: String = prompt
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .chars()
        .take(48)
        .collect();
    let points = [
        "结构清晰，论点有据 / the structure is clear and the claims are supported",
        "第二部分缺少数据支撑 / section two needs data behind it",
        "结论可以更具体 / the conclusion could be more specific",
        "术语前后不一致 / terminology is inconsistent",
        "建议补充反例 / add a counter-example",
        "风险评估偏乐观 / the risk assessment is optimistic",
    ];
    let n = rng.random_range(2..=3);
    let mut picked: Vec<&str> = Vec::new();
    while picked.len() < n {
        let p = points[rng.random_range(0..points.len())];
        if !picked.contains(&p) {
            picked.push(p);
        }
    }
    let mut out = format!(
        "【{}·{}】关于 / on “{}”:\n",
        spec.label,
        spec.persona,
        topic.trim()
    );
    for (i, p) in picked.iter().enumerate() {
        out.push_str(&format!("{}. {}\n", i + 1, p));
    }
    out.push_str(&format!("评分 / score: {}/10", rng.random_range(6..=9)));
    out
}

fn fnv(s: &str) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// Splits a reply into stream chunks of 2–10 characters (never inside a character).
pub fn chunks(text: &str, seed: u64) -> Vec<String> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let n = rng.random_range(2..=10).min(chars.len() - i);
        out.push(chars[i..i + n].iter().collect());
        i += n;
    }
    out
}

/// A frame a simulated tab saw from the hub, for displays and tests.
#[derive(Debug, Clone)]
pub struct Seen {
    pub label: String,
    pub frame: Value,
}

/// A connected simulated tab; dropping it leaves the tab running until the hub stops.
pub struct SimTab {
    pub label: String,
    pub client_id: String,
    out: mpsc::UnboundedSender<Value>,
}

impl SimTab {
    /// Sends a frame as this tab (e.g. `user_input`).
    pub fn send(&self, frame: Value) {
        let _ = self.out.send(frame);
    }

    /// Connects to `ws_url` (`ws://host:port`), says hello and starts answering tasks.
    /// Every frame from the hub is copied to `seen`.
    pub async fn connect(
        ws_url: &str,
        token: &str,
        spec: SimSpec,
        seen: mpsc::UnboundedSender<Seen>,
    ) -> anyhow::Result<SimTab> {
        let (ws, _) = tokio_tungstenite::connect_async(format!("{ws_url}/realtime")).await?;
        let (mut sink, mut stream) = ws.split();
        let mut hello = json!({"type":"hello","token":token,"site":spec.site,"label":spec.label});
        if let Some(r) = &spec.role {
            hello["role"] = json!(r);
        }
        sink.send(Message::Text(hello.to_string().into())).await?;
        let welcome = loop {
            match stream.next().await {
                Some(Ok(Message::Text(t))) => {
                    let v: Value = serde_json::from_str(&t)?;
                    if v["type"] == "welcome" {
                        break v;
                    }
                    anyhow::bail!("hub refused the simulated tab: {v}");
                }
                Some(Ok(_)) => continue,
                other => anyhow::bail!("no welcome: {other:?}"),
            }
        };
        let client_id = welcome["client_id"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let (out_tx, mut out_rx) = mpsc::unbounded_channel::<Value>();
        crate::spawn::task(async move {
            while let Some(v) = out_rx.recv().await {
                if sink
                    .send(Message::Text(v.to_string().into()))
                    .await
                    .is_err()
                {
                    break;
                }
            }
        });
        let out = out_tx.clone();
        let label = spec.label.clone();
        crate::spawn::task(async move {
            let (task_tx, task_rx) = mpsc::unbounded_channel::<Value>();
            crate::spawn::task(answer_tasks(spec.clone(), task_rx, out.clone()));
            while let Some(Ok(msg)) = stream.next().await {
                let Message::Text(t) = msg else { continue };
                let Ok(v) = serde_json::from_str::<Value>(&t) else {
                    continue;
                };
                if v["type"] == "task" {
                    let _ = task_tx.send(v.clone());
                }
                let _ = seen.send(Seen {
                    label: spec.label.clone(),
                    frame: v,
                });
            }
        });
        Ok(SimTab {
            label,
            client_id,
            out: out_tx,
        })
    }
}

/// One task at a time, like a real tab: accept, stream the reply in chunks, end the turn.
async fn answer_tasks(
    spec: SimSpec,
    mut tasks: mpsc::UnboundedReceiver<Value>,
    out: mpsc::UnboundedSender<Value>,
) {
    let mut answered: Vec<String> = Vec::new();
    while let Some(task) = tasks.recv().await {
        let id = task["task_id"].as_str().unwrap_or_default().to_string();
        let prompt = task["prompt"].as_str().unwrap_or_default();
        let text = match spec.reply {
            Some(reply) => reply(&spec, prompt),
            None => fake_reply(&spec, prompt),
        };
        let turn = format!("turn-{}", answered.len() + 1);
        let _ = out.send(json!({"type":"task_update","task_id":id,"state":"accepted"}));
        let _ = out.send(json!({"type":"task_update","task_id":id,"state":"sent"}));
        let seed = fnv(&id);
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        for (seq, piece) in chunks(&text, seed).into_iter().enumerate() {
            let jitter = rng.random_range(0.5..1.5);
            tokio::time::sleep(spec.chunk_delay.mul_f64(jitter)).await;
            let _ = out.send(json!({"type":"chunk","turn_id":turn,"seq":seq,"text":piece}));
        }
        let _ = out.send(json!({"type":"turn_end","turn_id":turn,"text":text,"task_id":id}));
        answered.push(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_simulated_planner_makes_one_mistake_and_fixes_it() {
        let spec = SimSpec::worker("planner", "规划");
        let first = planner_reply(&spec, "…\n## Goal / 目标\nwrite a \"poem\"\n");
        let yaml = crate::planner::check::extract(&first).expect("one fenced block");
        let online = |t: &str| ["sim-a", "sim-b", "master", "auto"].contains(&t);
        let names = vec!["sim-a".to_string(), "sim-b".to_string()];
        let problems = crate::planner::check::check(&yaml, &online, &names).unwrap_err();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].message.contains("`gpt9`"));
        let repair =
            crate::planner::prompt::repair(&yaml, &[problems[0].with_context(&yaml)], 1, 3);
        let fixed = crate::planner::check::extract(&planner_reply(&spec, &repair)).unwrap();
        let flow = crate::planner::check::check(&fixed, &online, &names).expect("valid");
        assert_eq!(
            flow.inputs["goal"].default.as_deref(),
            Some("write a \"poem\"")
        );
    }

    #[test]
    fn replies_are_deterministic_and_chunks_rebuild_them() {
        let spec = SimSpec::worker("sim-a", "审稿人");
        let a = fake_reply(&spec, "评审这份文档");
        assert_eq!(a, fake_reply(&spec, "评审这份文档"));
        assert_ne!(
            a,
            fake_reply(&SimSpec::worker("sim-b", "审稿人"), "评审这份文档")
        );
        let parts = chunks(&a, 7);
        assert!(parts.len() > 5);
        assert_eq!(parts.concat(), a);
    }
}
