//! Presence between nodes as streams of deltas: the wire messages and both ends' bookkeeping,
//! without any I/O. The NATS engine publishes what [`Own`] hands it and feeds what arrives to
//! [`Views`]; both are plain data, so gaps, restarts and snapshots are unit-tested here.
//!
//! A node's messages carry its `epoch` (when it started) and a `seq` that grows by one per
//! delta. A receiver applies delta `seq + 1` and nothing else: a gap, a beat ahead of what it
//! applied or a new epoch makes it ask for a snapshot, and the deltas that come meanwhile wait
//! for it.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::Presence;

/// One presence message on `aicard.presence.<NODE>` (or `aicard.hello`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "snake_case")]
pub enum Msg {
    /// What changed on `node` since delta `seq - 1`.
    Delta {
        node: String,
        epoch: u64,
        seq: u64,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        up: Vec<Presence>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        gone: Vec<String>,
    },
    /// `node` is alive and its last delta was `seq`.
    Beat { node: String, epoch: u64, seq: u64 },
    /// `node` stops: its tabs leave every view now.
    Leave { node: String, epoch: u64 },
    /// `node` joined: every node answers with a beat, so it can sync at once.
    Hello { node: String },
}

/// One part of a node's snapshot, sent to the inbox that asked for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapPart {
    pub node: String,
    pub epoch: u64,
    /// The last delta the snapshot includes.
    pub seq: u64,
    pub part: u32,
    pub parts: u32,
    pub up: Vec<Presence>,
}

/// This node's tabs as the cluster should see them, and what changed since the last delta.
pub struct Own {
    node: String,
    epoch: u64,
    table: HashMap<String, Presence>,
    up: HashSet<String>,
    gone: HashSet<String>,
    seq: u64,
    /// After a graceful leave nothing more is published.
    pub left: bool,
}

impl Own {
    pub fn new(node: &str, epoch: u64) -> Own {
        Own {
            node: node.to_string(),
            epoch,
            table: HashMap::new(),
            up: HashSet::new(),
            gone: HashSet::new(),
            seq: 0,
            left: false,
        }
    }

    /// Records a tab's presence; false when nothing changed (a refresh costs no message).
    pub fn announce(&mut self, p: Presence) -> bool {
        if self.table.get(&p.id) == Some(&p) {
            return false;
        }
        self.gone.remove(&p.id);
        self.up.insert(p.id.clone());
        self.table.insert(p.id.clone(), p);
        true
    }

    /// Removes a tab; false when it was not there.
    pub fn withdraw(&mut self, id: &str) -> bool {
        if self.table.remove(id).is_none() {
            return false;
        }
        self.up.remove(id);
        self.gone.insert(id.to_string());
        true
    }

    pub fn has_changes(&self) -> bool {
        !self.up.is_empty() || !self.gone.is_empty()
    }

    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// The changes as encoded deltas of at most about `max_bytes` each, numbered in order.
    pub fn take_deltas(&mut self, max_bytes: usize) -> Vec<Vec<u8>> {
        let gone: Vec<String> = self.gone.drain().collect();
        let up: Vec<Presence> = self
            .up
            .drain()
            .filter_map(|id| self.table.get(&id).cloned())
            .collect();
        let mut out = Vec::new();
        let (mut cur_up, mut cur_gone, mut bytes) = (Vec::new(), Vec::new(), 0usize);
        for id in gone {
            bytes += id.len() + 3;
            cur_gone.push(id);
            if bytes >= max_bytes {
                out.push(self.delta(std::mem::take(&mut cur_up), std::mem::take(&mut cur_gone)));
                bytes = 0;
            }
        }
        for p in up {
            bytes += encoded_len(&p);
            cur_up.push(p);
            if bytes >= max_bytes {
                out.push(self.delta(std::mem::take(&mut cur_up), std::mem::take(&mut cur_gone)));
                bytes = 0;
            }
        }
        if !cur_up.is_empty() || !cur_gone.is_empty() {
            out.push(self.delta(cur_up, cur_gone));
        }
        out
    }

    fn delta(&mut self, up: Vec<Presence>, gone: Vec<String>) -> Vec<u8> {
        self.seq += 1;
        encode(&Msg::Delta {
            node: self.node.clone(),
            epoch: self.epoch,
            seq: self.seq,
            up,
            gone,
        })
    }

    pub fn beat(&self) -> Vec<u8> {
        encode(&Msg::Beat {
            node: self.node.clone(),
            epoch: self.epoch,
            seq: self.seq,
        })
    }

    pub fn leave(&self) -> Vec<u8> {
        encode(&Msg::Leave {
            node: self.node.clone(),
            epoch: self.epoch,
        })
    }

    /// Every tab, in parts of at most about `max_bytes`, tagged with the last delta's number
    /// (changes not yet sent are in it too; the delta that sends them later is a no-op).
    pub fn snapshot(&self, max_bytes: usize) -> Vec<Vec<u8>> {
        let mut chunks: Vec<Vec<Presence>> = vec![Vec::new()];
        let mut bytes = 0;
        for p in self.table.values() {
            let n = encoded_len(p);
            if bytes + n > max_bytes && !chunks.last().is_some_and(Vec::is_empty) {
                chunks.push(Vec::new());
                bytes = 0;
            }
            bytes += n;
            if let Some(last) = chunks.last_mut() {
                last.push(p.clone());
            }
        }
        let parts = chunks.len() as u32;
        chunks
            .into_iter()
            .enumerate()
            .map(|(i, up)| {
                serde_json::to_vec(&SnapPart {
                    node: self.node.clone(),
                    epoch: self.epoch,
                    seq: self.seq,
                    part: i as u32,
                    parts,
                    up,
                })
                .unwrap_or_default()
            })
            .collect()
    }
}

fn encoded_len(p: &Presence) -> usize {
    serde_json::to_vec(p).map(|v| v.len() + 1).unwrap_or(256)
}

pub fn encode(m: &Msg) -> Vec<u8> {
    serde_json::to_vec(m).unwrap_or_default()
}

/// What the receiver should tell the hub.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    Up(Presence),
    Gone {
        id: String,
        node: String,
    },
    /// Every tab of `node` lives another time to live.
    Alive(String),
}

/// The outcome of one message: changes for the hub, and a node to ask for a snapshot.
#[derive(Debug, Default, PartialEq)]
pub struct PresenceStep {
    pub changes: Vec<Change>,
    pub sync: Option<String>,
}

/// How long another node's tabs stay in view after its last message: 2.5 heartbeats, so a
/// node that misses one beat stays, and with the sweep below a killed node's tabs are gone
/// within 3 heartbeats of its kill even when its last beat came just before it
/// (docs/cluster.md).
pub fn ttl_for(heartbeat: Duration) -> Duration {
    heartbeat * 5 / 2
}

/// How often the views are checked for silent nodes: a tenth of a heartbeat, so the check
/// adds at most that to the time to live.
pub fn sweep_period(heartbeat: Duration) -> Duration {
    (heartbeat / 10).max(Duration::from_millis(20))
}

/// Deltas kept while a snapshot is on its way, per node; past this the oldest go (the
/// snapshot then shows a gap and another is asked for).
const PENDING_MAX: usize = 4096;

struct View {
    epoch: u64,
    seq: u64,
    ids: HashSet<String>,
    syncing: bool,
    pending: Vec<(u64, u64, Vec<Presence>, Vec<String>)>,
    heard_ms: u64,
}

impl View {
    fn new(epoch: u64, now_ms: u64) -> View {
        View {
            epoch,
            seq: 0,
            ids: HashSet::new(),
            syncing: false,
            pending: Vec::new(),
            heard_ms: now_ms,
        }
    }
}

/// Every other node's tabs as this node applied them.
pub struct Views {
    me: String,
    ttl: Duration,
    nodes: HashMap<String, View>,
}

impl Views {
    pub fn new(me: &str, ttl: Duration) -> Views {
        Views {
            me: me.to_string(),
            ttl,
            nodes: HashMap::new(),
        }
    }

    /// Tabs known per node (for `/api/cluster` and tests).
    pub fn counts(&self) -> Vec<(String, usize)> {
        let mut v: Vec<_> = self
            .nodes
            .iter()
            .map(|(n, view)| (n.clone(), view.ids.len()))
            .collect();
        v.sort();
        v
    }

    /// The view of `node` as a message of `epoch` arrives (a restart asks for a snapshot);
    /// `None` for this node's own messages.
    fn heard(
        &mut self,
        node: &str,
        epoch: u64,
        now_ms: u64,
        step: &mut PresenceStep,
    ) -> Option<&mut View> {
        if node == self.me {
            return None;
        }
        let view = self
            .nodes
            .entry(node.to_string())
            .or_insert_with(|| View::new(epoch, now_ms));
        view.heard_ms = now_ms;
        if view.epoch != epoch {
            restart(view, epoch);
            step.sync = Some(node.to_string());
        }
        Some(view)
    }

    pub fn on_msg(&mut self, msg: Msg, now_ms: u64) -> PresenceStep {
        let mut step = PresenceStep::default();
        match msg {
            Msg::Delta {
                node,
                epoch,
                seq,
                up,
                gone,
            } => {
                let Some(view) = self.heard(&node, epoch, now_ms, &mut step) else {
                    return step;
                };
                if view.syncing {
                    keep(view, epoch, seq, up, gone);
                } else if seq <= view.seq {
                    // A repeat: already applied.
                } else if seq == view.seq + 1 {
                    apply(view, &node, up, gone, &mut step.changes);
                    view.seq = seq;
                } else {
                    keep(view, epoch, seq, up, gone);
                    view.syncing = true;
                    step.sync = Some(node.clone());
                }
            }
            Msg::Beat { node, epoch, seq } => {
                let Some(view) = self.heard(&node, epoch, now_ms, &mut step) else {
                    return step;
                };
                if !view.syncing && seq > view.seq {
                    // A delta went missing (or we are new here): ask for the whole table.
                    view.syncing = true;
                    step.sync = Some(node.clone());
                }
                step.changes.push(Change::Alive(node));
            }
            Msg::Leave { node, .. } => {
                if let Some(view) = self.nodes.remove(&node) {
                    for id in view.ids {
                        step.changes.push(Change::Gone {
                            id,
                            node: node.clone(),
                        });
                    }
                }
            }
            Msg::Hello { .. } => {}
        }
        step
    }

    /// A snapshot of `node` arrived whole.
    pub fn on_snapshot(
        &mut self,
        node: &str,
        epoch: u64,
        seq: u64,
        up: Vec<Presence>,
        now_ms: u64,
    ) -> PresenceStep {
        let mut step = PresenceStep::default();
        let view = self
            .nodes
            .entry(node.to_string())
            .or_insert_with(|| View::new(epoch, now_ms));
        view.heard_ms = now_ms;
        let fresh: HashSet<String> = up.iter().map(|p| p.id.clone()).collect();
        for id in view.ids.difference(&fresh) {
            step.changes.push(Change::Gone {
                id: id.clone(),
                node: node.to_string(),
            });
        }
        step.changes.extend(up.into_iter().map(Change::Up));
        view.ids = fresh;
        view.epoch = epoch;
        view.seq = seq;
        view.syncing = false;
        let mut pending = std::mem::take(&mut view.pending);
        pending.sort_by_key(|(_, s, _, _)| *s);
        let mut rest = pending.into_iter();
        while let Some((ep, s, u, g)) = rest.next() {
            if ep != view.epoch || s > view.seq + 1 {
                // Newer than this snapshot, with a hole before it: another snapshot.
                keep(view, ep, s, u, g);
                view.pending.extend(rest);
                view.syncing = true;
                step.sync = Some(node.to_string());
                break;
            }
            if s == view.seq + 1 {
                apply(view, node, u, g, &mut step.changes);
                view.seq = s;
            }
        }
        step.changes.push(Change::Alive(node.to_string()));
        step
    }

    /// The snapshot of `node` did not come: the next beat asks again.
    pub fn sync_failed(&mut self, node: &str) {
        if let Some(view) = self.nodes.get_mut(node) {
            view.syncing = false;
            view.pending.clear();
        }
    }

    /// Nodes not heard from for a time to live: all their tabs leave.
    pub fn expire(&mut self, now_ms: u64) -> PresenceStep {
        let ttl = self.ttl.as_millis() as u64;
        let dead: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, v)| now_ms.saturating_sub(v.heard_ms) > ttl)
            .map(|(n, _)| n.clone())
            .collect();
        let mut step = PresenceStep::default();
        for node in dead {
            if let Some(view) = self.nodes.remove(&node) {
                tracing::info!(node = %node, tabs = view.ids.len(), "node silent for its time to live: its tabs leave");
                for id in view.ids {
                    step.changes.push(Change::Gone {
                        id,
                        node: node.clone(),
                    });
                }
            }
        }
        step
    }
}

fn restart(view: &mut View, epoch: u64) {
    // The node started again: what it had is diffed away by a snapshot, asked for now.
    view.epoch = epoch;
    view.seq = 0;
    view.pending.clear();
    view.syncing = true;
}

fn keep(view: &mut View, epoch: u64, seq: u64, up: Vec<Presence>, gone: Vec<String>) {
    if view.pending.len() >= PENDING_MAX {
        view.pending.remove(0);
    }
    view.pending.push((epoch, seq, up, gone));
}

fn apply(view: &mut View, node: &str, up: Vec<Presence>, gone: Vec<String>, out: &mut Vec<Change>) {
    for id in gone {
        if view.ids.remove(&id) {
            out.push(Change::Gone {
                id,
                node: node.to_string(),
            });
        }
    }
    for p in up {
        view.ids.insert(p.id.clone());
        out.push(Change::Up(p));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tab(id: &str, node: &str, load: usize) -> Presence {
        Presence {
            id: id.into(),
            node: node.into(),
            site: "deepseek".into(),
            label: None,
            role: "worker".into(),
            group: None,
            state: "connected".into(),
            health: "ok".into(),
            load,
            since_ms: 1,
        }
    }

    fn decode(b: &[u8]) -> Msg {
        serde_json::from_slice(b).unwrap()
    }

    fn ups(step: &PresenceStep) -> Vec<String> {
        let mut v: Vec<String> = step
            .changes
            .iter()
            .filter_map(|c| match c {
                Change::Up(p) => Some(p.id.clone()),
                _ => None,
            })
            .collect();
        v.sort();
        v
    }

    fn gones(step: &PresenceStep) -> Vec<String> {
        let mut v: Vec<String> = step
            .changes
            .iter()
            .filter_map(|c| match c {
                Change::Gone { id, .. } => Some(id.clone()),
                _ => None,
            })
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_refresh_that_changes_nothing_costs_no_message() {
        let mut own = Own::new("b", 7);
        assert!(own.announce(tab("c1", "b", 0)));
        assert_eq!(own.take_deltas(1 << 20).len(), 1);
        assert!(!own.announce(tab("c1", "b", 0)));
        assert!(!own.has_changes());
        assert!(own.announce(tab("c1", "b", 1)));
        assert!(own.withdraw("c1"));
        assert!(!own.withdraw("c1"));
        match decode(&own.take_deltas(1 << 20)[0]) {
            Msg::Delta { seq, up, gone, .. } => {
                assert_eq!(seq, 2);
                assert!(up.is_empty());
                assert_eq!(gone, ["c1"]);
            }
            m => panic!("{m:?}"),
        }
    }

    #[test]
    fn a_connect_storm_is_few_messages_each_under_the_limit() {
        let mut own = Own::new("b", 1);
        for i in 0..3000 {
            own.announce(tab(&format!("client-{i:05}"), "b", 0));
        }
        let msgs = own.take_deltas(64 * 1024);
        assert!(msgs.len() > 1 && msgs.len() < 20, "{}", msgs.len());
        assert!(msgs.iter().all(|m| m.len() < 80 * 1024));
        let mut views = Views::new("a", Duration::from_secs(60));
        let mut seen = 0;
        for m in msgs {
            let step = views.on_msg(decode(&m), 0);
            assert_eq!(step.sync, None);
            seen += ups(&step).len();
        }
        assert_eq!(seen, 3000);
        let parts = own.snapshot(64 * 1024);
        assert!(parts.len() > 1, "a big snapshot comes in parts");
        let total: usize = parts
            .iter()
            .map(|p| serde_json::from_slice::<SnapPart>(p).unwrap().up.len())
            .sum();
        assert_eq!(total, 3000);
    }

    #[test]
    fn a_gap_asks_for_a_snapshot_and_what_came_meanwhile_follows_it() {
        let mut own = Own::new("b", 1);
        let mut views = Views::new("a", Duration::from_secs(60));
        own.announce(tab("c1", "b", 0));
        let d1 = own.take_deltas(1 << 20).remove(0);
        own.announce(tab("c2", "b", 0));
        let _lost = own.take_deltas(1 << 20).remove(0);
        own.withdraw("c1");
        let d3 = own.take_deltas(1 << 20).remove(0);
        assert_eq!(ups(&views.on_msg(decode(&d1), 0)), ["c1"]);
        let step = views.on_msg(decode(&d3), 0);
        assert_eq!(step.sync.as_deref(), Some("b"));
        assert!(step.changes.is_empty());
        // The snapshot was taken after delta 2 (c1 and c2 there); delta 3 then removes c1.
        let step = views.on_snapshot("b", 1, 2, vec![tab("c1", "b", 0), tab("c2", "b", 0)], 0);
        assert_eq!(ups(&step), ["c1", "c2"]);
        assert_eq!(gones(&step), ["c1"]);
        assert_eq!(step.sync, None);
        assert_eq!(views.counts(), [("b".to_string(), 1)]);
    }

    #[test]
    fn a_beat_ahead_of_what_was_applied_asks_for_a_snapshot() {
        let mut own = Own::new("b", 1);
        own.announce(tab("c1", "b", 0));
        let _lost = own.take_deltas(1 << 20);
        let mut views = Views::new("a", Duration::from_secs(60));
        let step = views.on_msg(decode(&own.beat()), 0);
        assert_eq!(step.sync.as_deref(), Some("b"));
        assert_eq!(step.changes, [Change::Alive("b".into())]);
        // In step: no snapshot.
        let step = views.on_snapshot("b", 1, 1, vec![tab("c1", "b", 0)], 0);
        assert_eq!(ups(&step), ["c1"]);
        assert_eq!(views.on_msg(decode(&own.beat()), 0).sync, None);
    }

    #[test]
    fn a_restarted_node_is_synced_and_its_old_tabs_go() {
        let mut views = Views::new("a", Duration::from_secs(60));
        let mut old = Own::new("b", 1);
        old.announce(tab("c1", "b", 0));
        views.on_msg(decode(&old.take_deltas(1 << 20)[0]), 0);
        let mut new = Own::new("b", 2);
        new.announce(tab("c9", "b", 0));
        let step = views.on_msg(decode(&new.take_deltas(1 << 20)[0]), 0);
        // A new epoch: the delta waits for the snapshot that also takes the old tab away.
        assert_eq!(step.sync.as_deref(), Some("b"));
        assert!(step.changes.is_empty());
        assert_eq!(
            views.on_msg(decode(&new.beat()), 0).sync,
            None,
            "one sync at a time"
        );
        let step = views.on_snapshot("b", 2, 1, vec![tab("c9", "b", 0)], 0);
        assert_eq!(gones(&step), ["c1"]);
        assert_eq!(ups(&step), ["c9"]);
        assert_eq!(step.sync, None);
    }

    #[test]
    fn a_silent_node_expires_and_a_leaving_one_goes_at_once() {
        let mut views = Views::new("a", Duration::from_millis(600));
        let mut b = Own::new("b", 1);
        b.announce(tab("b1", "b", 0));
        views.on_msg(decode(&b.take_deltas(1 << 20)[0]), 1_000);
        let mut c = Own::new("c", 1);
        c.announce(tab("c1", "c", 0));
        views.on_msg(decode(&c.take_deltas(1 << 20)[0]), 1_000);
        views.on_msg(decode(&c.beat()), 1_500);
        assert_eq!(gones(&views.expire(1_601)), ["b1"]);
        assert_eq!(gones(&views.on_msg(decode(&c.leave()), 1_700)), ["c1"]);
        assert!(views.counts().is_empty());
        // Our own messages, seen back, change nothing.
        let mut a = Own::new("a", 1);
        a.announce(tab("a1", "a", 0));
        assert_eq!(
            views.on_msg(decode(&a.take_deltas(1 << 20)[0]), 0),
            PresenceStep::default()
        );
    }

    /// The default 20 s heartbeat on a virtual clock: a node killed right after its beat
    /// leaves within 3 heartbeats of the kill, checked only when the sweep runs; a live node
    /// that misses one beat stays.
    #[test]
    fn at_the_default_heartbeat_a_killed_node_leaves_within_three_beats() {
        let beat = Duration::from_secs(20);
        let (ttl, period) = (ttl_for(beat), sweep_period(beat));
        let ms = |d: Duration| d.as_millis() as u64;
        let mut views = Views::new("a", ttl);
        let mut b = Own::new("b", 1);
        b.announce(tab("b1", "b", 0));
        let mut c = Own::new("c", 1);
        c.announce(tab("c1", "c", 0));
        let t0 = 1_000_000;
        views.on_msg(decode(&b.take_deltas(1 << 20)[0]), t0);
        views.on_msg(decode(&c.take_deltas(1 << 20)[0]), t0);
        // b beats every heartbeat and is killed right after its beat at 60 s; c's beat at
        // 40 s is lost, the others come.
        let kill = t0 + 3 * ms(beat);
        let mut gone_at = None;
        let mut now = t0;
        let mut next_beat = t0 + ms(beat);
        while now < kill + 10 * ms(beat) {
            now += ms(period);
            while next_beat <= now {
                if next_beat <= kill {
                    views.on_msg(decode(&b.beat()), next_beat);
                }
                if next_beat != t0 + 2 * ms(beat) {
                    views.on_msg(decode(&c.beat()), next_beat);
                }
                next_beat += ms(beat);
            }
            let step = views.expire(now);
            assert!(
                !gones(&step).contains(&"c1".to_string()),
                "c lives at {now}"
            );
            if gones(&step).contains(&"b1".to_string()) {
                gone_at.get_or_insert(now);
            }
        }
        let gone_at = gone_at.expect("b's tab leaves");
        assert!(
            gone_at - kill <= 3 * ms(beat),
            "gone {} ms after the kill, over 3 heartbeats",
            gone_at - kill
        );
    }
}
