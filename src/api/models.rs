//! Model ids (`site/<site>`, bare `<site>`, `tab/<label>`, `flow/<name>`, `agent/<name>`,
//! `auto`), the tabs that serve each, and the live list behind `GET /v1/models`.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::hub::registry::{Client, ConnState, Registry};
use crate::protocol::Role;

/// What a request's `model` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelId {
    /// Any worker tab of this site (`site/deepseek` or `deepseek`).
    Site(String),
    /// One tab, by label (or display name / client id).
    Tab(String),
    /// A flow; the last user message becomes its first input.
    Flow(String),
    /// An agent (docs/agents.md); the last user message is its task, its final answer the reply.
    Agent(String),
    /// The least loaded worker tab (until the decision engine exists).
    Auto,
}

impl ModelId {
    pub fn parse(model: &str) -> ModelId {
        let m = model.trim();
        if m.eq_ignore_ascii_case("auto") {
            return ModelId::Auto;
        }
        if let Some(s) = m.strip_prefix("site/") {
            return ModelId::Site(s.to_lowercase());
        }
        if let Some(t) = m.strip_prefix("tab/") {
            return ModelId::Tab(t.to_string());
        }
        if let Some(f) = m.strip_prefix("flow/") {
            return ModelId::Flow(f.to_string());
        }
        if let Some(a) = m.strip_prefix("agent/") {
            return ModelId::Agent(a.to_string());
        }
        ModelId::Site(m.to_lowercase())
    }

    /// The canonical id, also the key of the model's FIFO queue.
    pub fn key(&self) -> String {
        match self {
            ModelId::Site(s) => format!("site/{s}"),
            ModelId::Tab(t) => format!("tab/{t}"),
            ModelId::Flow(f) => format!("flow/{f}"),
            ModelId::Agent(a) => format!("agent/{a}"),
            ModelId::Auto => "auto".into(),
        }
    }
}

/// The sites the userscript has adapters for (`hello.site`), plus the test site.
pub const KNOWN_SITES: &[&str] = &[
    "deepseek", "doubao", "yuanbao", "qianwen", "chatgpt", "claude", "gemini", "kimi", "chatglm",
    "yiyan", "xinghuo", "sim",
];

impl ModelId {
    /// False when the id can never be served: not a site we have an adapter for (nor one a
    /// tab said it is), not a tab this hub has ever seen. Such an id is 404 `model_not_found`
    /// (a client must not retry it); a known one with no tab online now is 503.
    pub fn exists(&self, registry: &Registry) -> bool {
        match self {
            // A flow or an agent is looked up when it is asked for (404 if unknown).
            ModelId::Auto | ModelId::Flow(_) | ModelId::Agent(_) => true,
            ModelId::Site(site) => {
                KNOWN_SITES.contains(&site.as_str())
                    || registry
                        .all()
                        .iter()
                        .any(|c| c.info().site.eq_ignore_ascii_case(site))
            }
            ModelId::Tab(name) => !registry.resolve(name).is_empty(),
        }
    }
}

fn worker(c: &Client) -> bool {
    c.state() == ConnState::Connected && c.role() == Role::Worker
}

/// Connected tabs that serve `model`, busy or not (empty for flows: a flow picks its own).
pub fn candidates(registry: &Registry, model: &ModelId) -> Vec<Arc<Client>> {
    match model {
        ModelId::Site(site) => registry
            .resolve(site)
            .into_iter()
            .filter(|c| worker(c) && c.info().site.to_lowercase() == *site)
            .collect(),
        ModelId::Tab(name) => registry
            .resolve(name)
            .into_iter()
            .filter(|c| {
                let info = c.info();
                c.state() == ConnState::Connected
                    && (info.label.as_deref() == Some(name.as_str())
                        || c.id == *name
                        || c.display_of(&info) == *name)
            })
            .collect(),
        ModelId::Auto => {
            let mut all: Vec<_> = registry.all().into_iter().filter(|c| worker(c)).collect();
            all.sort_by(|a, b| a.id.cmp(&b.id));
            all
        }
        ModelId::Flow(_) | ModelId::Agent(_) => Vec::new(),
    }
}

/// Per-model numbers shown in `/v1/models` under `aicard`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Load {
    pub tabs: usize,
    pub busy: usize,
    /// Tabs that cannot take a prompt now whatever their load (cooling down after a rate
    /// limit, waiting for a person at a captcha or a login page).
    pub unavailable: usize,
    pub queue_depth: usize,
}

/// A stored agent as a model (`agent/<name>`): its target and the connected tabs it names.
pub struct AgentModel {
    pub name: String,
    /// What `agent create … on TARGET` said.
    pub target: String,
    /// Connected tabs the target names now.
    pub tabs: Vec<Arc<Client>>,
}

/// The `GET /v1/models` body: what is online now. `busy(c)` says whether a tab is taken;
/// `unavailable(c)` whether it cannot take work now whatever its load; `depth(key)` how many API requests wait for a model; `health(c)` is a tab's health as
/// the decision engine sees it, shown on its `tab/…` entry.
#[allow(clippy::too_many_arguments)]
pub fn list(
    registry: &Registry,
    flows: &[String],
    agents: &[AgentModel],
    busy: impl Fn(&Client) -> bool,
    unavailable: impl Fn(&Client) -> bool,
    depth: impl Fn(&str) -> usize,
    health: impl Fn(&Client) -> Value,
    created: i64,
) -> Value {
    let mut entries: BTreeMap<String, Load> = BTreeMap::new();
    let mut healths: BTreeMap<String, Value> = BTreeMap::new();
    let mut auto = Load::default();
    for c in registry.all() {
        if c.state() != ConnState::Connected {
            continue;
        }
        let info = c.info();
        let b = usize::from(busy(&c));
        let u = usize::from(unavailable(&c));
        let key = format!("tab/{}", c.display_of(&info));
        healths.insert(key.clone(), health(&c));
        let count = |load: &mut Load| {
            load.tabs += 1;
            load.busy += b;
            load.unavailable += u;
        };
        count(entries.entry(key).or_default());
        if info.role == Role::Worker {
            count(
                entries
                    .entry(format!("site/{}", info.site.to_lowercase()))
                    .or_default(),
            );
            count(&mut auto);
        }
    }
    if auto.tabs > 0 {
        entries.insert("auto".into(), auto);
    }
    let mut data = Vec::new();
    for (id, mut load) in entries {
        load.queue_depth = depth(&id);
        let mut aicard = json!({
            "tabs": load.tabs,
            "busy": load.busy,
            "unavailable": load.unavailable,
            "queue_depth": load.queue_depth,
        });
        if let Some(h) = healths.remove(&id) {
            aicard["health"] = h;
        }
        data.push(model_object(&id, created, aicard));
    }
    for f in flows {
        let id = format!("flow/{f}");
        let d = depth(&id);
        data.push(model_object(
            &id,
            created,
            json!({"tabs": 0, "busy": 0, "unavailable": 0, "queue_depth": d}),
        ));
    }
    for a in agents {
        let mut load = Load::default();
        for c in &a.tabs {
            load.tabs += 1;
            load.busy += usize::from(busy(c));
            load.unavailable += usize::from(unavailable(c));
        }
        data.push(model_object(
            &format!("agent/{}", a.name),
            created,
            json!({"tabs": load.tabs, "busy": load.busy, "unavailable": load.unavailable,
                   "queue_depth": 0, "target": a.target}),
        ));
    }
    json!({"object": "list", "data": data})
}

/// A model entry with no tab load: an id chat accepts though no tab serves it now (a known
/// site offline, a flow, `auto` with no worker).
pub fn idle_entry(id: &str, created: i64) -> Value {
    model_object(
        id,
        created,
        json!({"tabs": 0, "busy": 0, "unavailable": 0, "queue_depth": 0}),
    )
}

fn model_object(id: &str, created: i64, aicard: Value) -> Value {
    json!({"id": id, "object": "model", "created": created, "owned_by": "aicard", "aicard": aicard})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_ids() {
        assert_eq!(
            ModelId::parse("site/DeepSeek"),
            ModelId::Site("deepseek".into())
        );
        assert_eq!(ModelId::parse("kimi"), ModelId::Site("kimi".into()));
        assert_eq!(ModelId::parse("tab/ds-1"), ModelId::Tab("ds-1".into()));
        assert_eq!(ModelId::parse("flow/chain"), ModelId::Flow("chain".into()));
        assert_eq!(
            ModelId::parse("agent/研究员"),
            ModelId::Agent("研究员".into())
        );
        assert_eq!(ModelId::parse("agent/r").key(), "agent/r");
        assert_eq!(ModelId::parse("AUTO"), ModelId::Auto);
        assert_eq!(ModelId::parse("kimi").key(), "site/kimi");
    }
}
