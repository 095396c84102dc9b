//! An agent's memory in its loop: one observation per command of a round in the agent's
//! scope, a reflection asked for past the threshold and kept from the reply that cites the
//! observations, and the memories recalled for the primer.

use super::*;
use crate::agents::memory_stream::{self, Observation};

impl Loops {
    /// One observation per command of the round in the agent's memory scope, added to its
    /// stream; a round is a turn of the scope (its memories cool). Returns the reflection
    /// prompt and the ids it cites when the stream passed its threshold.
    pub(super) fn observe(
        &self,
        agent: &AgentRecord,
        round: u32,
        commands: &[RoundCommand],
    ) -> Option<(String, Vec<i64>)> {
        let scope = scope_of(agent);
        let tags = vec!["observation".to_string()];
        let mut streams = self.streams.lock().expect("loops");
        let stream = streams
            .entry(agent.spec.name.clone())
            .or_insert_with(|| MemoryStream::new(self.settings.reflect_threshold));
        let mut due = false;
        for c in commands {
            let o = Observation::new(round, &c.command, c.ok, &c.output, None);
            let text = o.text();
            match self.memory.add(&o.as_memory(&scope, &text, &tags)) {
                Ok(id) => due |= stream.push(id, o),
                Err(e) => tracing::warn!("observation not kept: {e}"),
            }
        }
        self.memory.turn(&[&scope]);
        due.then(|| stream.reflect())
    }

    /// The tab's turn after a reflection was asked: the lines citing `[#ID]` become one
    /// memory tagged `reflection` whose sources are the ids cited.
    pub(super) fn reflected(&self, tab: &str, text: &str) {
        let (asked, agent) = {
            let mut live = self.live.lock().expect("loops");
            let Some(l) = live.get_mut(tab) else { return };
            let Some(asked) = l.reflection.take() else {
                return;
            };
            let Some(agent) = l.agent.clone() else { return };
            (asked, agent)
        };
        let Some((reflection, sources)) = memory_stream::reflection(text, &asked) else {
            tracing::info!(agent = %agent.spec.name, "the reply cited no observation: no reflection kept");
            return;
        };
        let scope = scope_of(&agent);
        let tags = vec!["reflection".to_string()];
        let kept = self.memory.add(&crate::memory::NewMemory {
            scope: &scope,
            text: &reflection,
            tags: &tags,
            pinned: false,
            importance: Some(memory_stream::REFLECTION_IMPORTANCE),
            author: Some(&agent.spec.name),
            sources: &sources,
        });
        if let Err(e) = kept {
            tracing::warn!("reflection not kept: {e}");
        }
    }

    /// The agent's memories most relevant to `about`, ranked by relevance × recency ×
    /// importance (the team memory's own search), as the primer's memory block.
    pub(super) fn recall(&self, agent: &AgentRecord, about: &str) -> Option<String> {
        match self
            .memory
            .search(&scope_of(agent), about, memory_stream::RECALL)
        {
            Ok(hits) => memory_stream::recall_block(&hits),
            Err(e) => {
                tracing::warn!("agent memories not recalled: {e}");
                None
            }
        }
    }
}

/// The memory scope of an agent: its `memory=SCOPE`, or `agent.NAME`.
pub fn scope_of(agent: &AgentRecord) -> String {
    agent
        .spec
        .memory
        .clone()
        .unwrap_or_else(|| format!("agent.{}", agent.spec.name))
}
