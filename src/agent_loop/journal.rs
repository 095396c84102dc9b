//! The loop's journal in the store: a session started, each command's result by (tab, turn,
//! index) before the session hears it (so a hub killed meanwhile runs it no second time),
//! the result of one that already ran, what a session has pending (its files and the message
//! sent with them and not yet seen), and the sessions open at a restart. Called by the
//! actor only.

use super::*;
use crate::agents::store::{self as agent_store, SessionRecord};

impl Loops {
    /// Goes on with the sessions journaled before a restart.
    pub(super) fn restore(&self) {
        let open = match agent_store::open_sessions(&self.store) {
            Ok(o) => o,
            Err(e) => {
                tracing::warn!("agent sessions not restored: {e}");
                return;
            }
        };
        for rec in open {
            let agent = rec
                .agent
                .as_deref()
                .and_then(|n| agent_store::agent(&self.store, n).ok().flatten());
            let limits = self.limits(agent.as_ref().and_then(|a| a.spec.max_rounds));
            let session = Session::restore(
                rec.id.clone(),
                rec.tab.clone(),
                limits,
                rand::random(),
                rec.started_ms.max(0) as u64,
                rec.round,
                rec.state == "paused",
            );
            tracing::info!(session = %rec.id, tab = %rec.tab, round = rec.round, "agent session goes on after a restart");
            let mut l = Live::new(session, agent);
            self.restore_pending(&rec.id, &mut l);
            self.live.lock().expect("loops").insert(rec.tab.clone(), l);
        }
    }

    /// A restored session's pending files: its next message's, and the message sent but not
    /// yet seen, which goes again (its files granted anew, or, when their bytes are gone,
    /// the session pauses: deliver checks).
    fn restore_pending(&self, id: &str, l: &mut Live) {
        let pending = match agent_store::pending(&self.store, id) {
            Ok(Some(json)) => match serde_json::from_str::<PendingFiles>(&json) {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!(session = id, "pending files not read: {e}");
                    return;
                }
            },
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(session = id, "pending files not read: {e}");
                return;
            }
        };
        l.next_files = pending.next_files;
        if let Some(m) = pending.sent {
            tracing::info!(
                session = id,
                round = m.round,
                files = m.files.len(),
                "a message with files not yet seen goes again after the restart"
            );
            l.session.restore_outgoing(
                m.text.clone(),
                m.round,
                m.primer,
                m.vars.clone(),
                m.sends,
                now(),
            );
            l.sent_files = (Some(m.round), m.files.clone());
            l.sent_message = Some(m);
        }
    }

    /// Journals what the tab's session has pending (its next message's files, the message
    /// sent with files and not yet seen); nothing pending clears it.
    pub(super) fn journal_pending(&self, tab: &str) {
        let (id, pending) = {
            let live = self.live.lock().expect("loops");
            let Some(l) = live.get(tab) else { return };
            (
                l.session.id().to_string(),
                PendingFiles {
                    next_files: l.next_files.clone(),
                    sent: l.sent_message.clone(),
                },
            )
        };
        let json = (pending != PendingFiles::default())
            .then(|| serde_json::to_string(&pending).ok())
            .flatten();
        if let Err(e) = agent_store::set_pending(&self.store, &id, json.as_deref()) {
            tracing::warn!(session = %id, "pending files not journaled: {e}");
        }
    }

    /// Journals a session's command result by (tab, turn, index), before the loop hears it:
    /// a hub killed after this and before the deliver runs it no second time.
    pub(super) fn journal_command(
        &self,
        tab: &str,
        turn_id: &str,
        index: u32,
        ok: bool,
        output: &str,
    ) {
        if let Err(e) = agent_store::journal_command(
            &self.store,
            tab,
            turn_id,
            index,
            ok,
            output,
            crate::store::now_ms(),
        ) {
            tracing::warn!("command {turn_id}#{index} of {tab} not journaled: {e}");
        }
    }

    /// The journaled result of command `index` of the tab's turn, when it already ran.
    pub(super) fn journaled(&self, tab: &str, turn_id: &str, index: u32) -> Option<(bool, String)> {
        match agent_store::journaled_command(&self.store, tab, turn_id, index) {
            Ok(j) => j,
            Err(e) => {
                tracing::warn!("command journal not read: {e}");
                None
            }
        }
    }

    pub(super) fn record_start(&self, id: &str, agent: Option<&str>, tab: &str) {
        let rec = SessionRecord {
            id: id.to_string(),
            agent: agent.map(str::to_string),
            tab: tab.to_string(),
            state: "running".into(),
            round: 0,
            started_ms: crate::store::now_ms(),
            ended_ms: None,
            why: None,
        };
        if let Err(e) = agent_store::insert_session(&self.store, &rec) {
            tracing::warn!("agent session {id} not journaled: {e}");
        }
    }
}
