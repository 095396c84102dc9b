//! A tab's primer: its role card's `system_prompt`, then what it may do now (docs/agents.md, "The primer").

use super::*;

/// What builds a looping tab's primer for the agent loop, from the services below the
/// command host: the hub's tabs, role cards, skills and memory (`Commands`), the decision
/// engine's health (the ask service) and the MCP servers. The loop gets it at construction.
pub fn primer(
    hub: Arc<Hub>,
    commands: Arc<Commands>,
    asks: Arc<Asks>,
    mcp: Arc<crate::mcp_client::Clients>,
) -> impl crate::agent_loop::LoopHost {
    Primers {
        hub,
        commands,
        asks,
        mcp,
    }
}

/// The services [`primer`] builds from.
struct Primers {
    hub: Arc<Hub>,
    commands: Arc<Commands>,
    asks: Arc<Asks>,
    mcp: Arc<crate::mcp_client::Clients>,
}

impl crate::agent_loop::LoopHost for Primers {
    fn primer(
        &self,
        tab: &Arc<Client>,
        agent: Option<&crate::agents::store::AgentRecord>,
        limits: &crate::agents::session::SessionLimits,
        recalled: Option<&str>,
    ) -> String {
        build(self, tab, agent, limits, recalled)
    }
}

/// The primer of a tab (docs/agents.md): its role card's `system_prompt`, then what it may do now.
fn build(
    primers: &Primers,
    tab: &Arc<Client>,
    agent: Option<&crate::agents::store::AgentRecord>,
    limits: &crate::agents::session::SessionLimits,
    recalled: Option<&str>,
) -> String {
    use crate::agents::primer::{Facts, SkillFact, TabFact};
    let card = primers.commands.card_for(tab);
    let tools = agent.map(|a| a.spec.tools_or_default());
    let permissions = match &tools {
        Some(t) => crate::commands::agent::Tool::permissions(t),
        None => primers.commands.caller(tab, Source::Reply).permissions,
    };
    let tabs = primers
        .hub
        .registry
        .all()
        .into_iter()
        .filter(|c| c.id != tab.id && c.state() == ConnState::Connected)
        .map(|c| TabFact {
            label: c.display(),
            site: c.info().site,
            health: if crate::pick::usable(&primers.asks.pick, &c) {
                "ready".into()
            } else {
                "busy".into()
            },
        })
        .collect();
    let skills = primers
        .commands
        .skills
        .get()
        .skills
        .iter()
        .map(|s| SkillFact {
            name: s.name.clone(),
            params: skill_params(&s.schema),
        })
        .collect();
    let memory_scope = agent.map(|a| {
        a.spec
            .memory
            .clone()
            .unwrap_or_else(|| format!("agent.{}", a.spec.name))
    });
    // The memories recalled for this message (relevance × recency × importance), else the
    // scope's note and hot tags.
    let memory_block = recalled.map(str::to_string).or_else(|| {
        memory_scope
            .as_deref()
            .and_then(|s| primers.commands.memory.block(&[s]).ok().flatten())
    });
    let mcp_tools: Vec<String> = primers
        .mcp
        .catalogue()
        .into_iter()
        // An agent sees only the servers its tools name (`mcp:SERVER`).
        .filter(|t| {
            let server = t.split('/').next().unwrap_or_default();
            tools.as_ref().is_none_or(|ts| {
                ts.contains(&crate::commands::agent::Tool::Mcp(server.to_string()))
            })
        })
        .collect();
    crate::agents::primer::build(&Facts {
        system_prompt: card.and_then(|c| c.instructions),
        permissions: Some(permissions),
        tools,
        tabs,
        skills,
        mcp_tools,
        memory_scope,
        memory_block,
        max_rounds: limits.max_rounds,
        result_chars: limits.result_chars,
    })
}

/// A skill's parameters as `name: type`, required first.
pub(super) fn skill_params(schema: &serde_json::Value) -> Vec<String> {
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    let mut params: Vec<(bool, String)> = schema["properties"]
        .as_object()
        .map(|props| {
            props
                .iter()
                .map(|(k, v)| {
                    let ty = v["type"].as_str().unwrap_or("any");
                    (!required.contains(&k.as_str()), format!("{k}: {ty}"))
                })
                .collect()
        })
        .unwrap_or_default();
    params.sort();
    params.into_iter().map(|(_, p)| p).collect()
}
