//! Finding tabs: the name index (ids, sites, labels, display names) and the entries of tabs
//! that live on other nodes of a cluster.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::super::engine::Presence;
use super::tab::{close, Client, ClientInfo, ConnState, Remote};
use super::Registry;
use crate::protocol::Role;

/// The names a tab is found by besides its id (which `clients` finds): its site, its display
/// name and its label (each once). Not the id: a second entry per tab, with its key's copy of
/// the id, for what `clients` already answers.
fn name_keys(client: &Client) -> Vec<String> {
    let info = client.info();
    let mut keys = vec![info.site.to_lowercase(), client.display_of(&info)];
    keys.extend(info.label);
    keys.sort();
    keys.dedup();
    keys
}

impl Registry {
    /// Creates or refreshes the entry of a tab another node announced. Returns the entry,
    /// or `None` when the id is a tab of this node (the hub decides what that means).
    pub fn upsert_remote(&self, p: &Presence, deadline_ms: i64) -> Option<Arc<Client>> {
        let info = ClientInfo {
            site: p.site.clone(),
            label: p.label.clone(),
            role: Role::parse(&p.role).unwrap_or_default(),
            group: p.group.clone(),
            url: None,
            title: None,
        };
        let remote = Remote {
            node: p.node.clone(),
            connected: p.state == "connected",
            health: p.health.clone(),
            load: p.load,
            deadline_ms,
        };
        let client = match self.get(&p.id) {
            Some(c) if !c.is_remote() => return None,
            Some(c) => c,
            None => {
                let c = Arc::new(Client::new(p.id.clone(), info.clone()));
                c.set_remote(Some(remote.clone()));
                self.clients.entry(p.id.clone()).or_insert(c).clone()
            }
        };
        if !client.is_remote() {
            return None;
        }
        let renamed = client.info() != info;
        if renamed {
            self.unindex(&client);
            client.update_info(|i| *i = info);
        }
        client.set_since_ms(p.since_ms);
        client.set_remote(Some(remote));
        self.index(&client);
        Some(client)
    }

    /// Turns a tab of this node into the remote entry of a tab now on `node` (it connected
    /// there with its id). Its connection, if it still has one, is closed as replaced.
    pub fn make_remote(&self, client: &Client, remote: Remote) {
        let mut conn = client.conn();
        if let Some(h) = conn.handle.take() {
            h.kill.kill(close::REPLACED);
        }
        drop(conn);
        client.set_remote(Some(remote));
    }

    /// A remote tab's entry ends (its node said it left, or its presence was not refreshed
    /// in time). Entries of this node's tabs are never forgotten.
    pub fn forget_remote(&self, id: &str) -> Option<Arc<Client>> {
        let client = self.get(id).filter(|c| c.is_remote())?;
        self.unindex(&client);
        self.clients.remove_if(id, |_, c| c.is_remote());
        Some(client)
    }

    /// Drops a tab of this node from memory (not from the store: it can still come back
    /// with its id) if it is away and nothing of its connection is left. The caller checks
    /// that no task waits on it. True if it went.
    pub fn forget_local(&self, client: &Arc<Client>) -> bool {
        if client.is_remote() || client.flushing.load(Ordering::Acquire) > 0 {
            return false;
        }
        // Under the tab's lock: a connection attaching now either came first (kept) or
        // finds the entry gone and makes a new one from the store.
        let conn = client.conn();
        if conn.handle.is_some() {
            return false;
        }
        let gone = self
            .clients
            .remove_if(&client.id, |_, c| Arc::ptr_eq(c, client) && !c.is_remote())
            .is_some();
        drop(conn);
        if gone {
            self.unindex(client);
        }
        gone
    }

    fn unindex(&self, client: &Arc<Client>) {
        for k in name_keys(client) {
            if let Some(mut tabs) = self.names.get_mut(&k) {
                tabs.retain(|c| c.id != client.id);
            }
            self.names.remove_if(&k, |_, v| v.is_empty());
        }
    }

    /// Every remote entry of `node` lives until `deadline_ms` (its node's beat came).
    pub fn refresh_node(&self, node: &str, deadline_ms: i64) {
        for e in self.clients.iter() {
            if let Some(mut r) = e.value().remote().filter(|r| r.node == node) {
                r.deadline_ms = deadline_ms;
                e.value().set_remote(Some(r));
            }
        }
    }

    /// Remote entries whose presence ran out before `now_ms`.
    pub fn expired_remotes(&self, now_ms: i64) -> Vec<String> {
        self.clients
            .iter()
            .filter(|e| e.value().remote().is_some_and(|r| r.deadline_ms < now_ms))
            .map(|e| e.key().clone())
            .collect()
    }

    /// True when a connected tab other than `except` holds `label`, here or on another node.
    pub fn label_taken(&self, label: &str, except: &str) -> bool {
        self.names.get(label).is_some_and(|tabs| {
            tabs.iter().any(|c| {
                c.id != except
                    && c.state() == ConnState::Connected
                    && c.info().label.as_deref() == Some(label)
            })
        })
    }

    /// Adds a tab's names (id, label, site, display name) to the name index.
    pub fn index(&self, client: &Arc<Client>) {
        for k in name_keys(client) {
            let mut tabs = self.names.entry(k).or_default();
            if !tabs.iter().any(|c| c.id == client.id) {
                tabs.push(client.clone());
            }
        }
    }

    /// Connected tabs matching a target (site, label, client id, `role:R`, `group:G`).
    pub fn resolve(&self, target: &str) -> Vec<Arc<Client>> {
        let mut found: Vec<Arc<Client>> = if target.starts_with("role:")
            || target.starts_with("group:")
        {
            self.clients
                .iter()
                .filter(|e| e.value().state() == ConnState::Connected && e.value().matches(target))
                .map(|e| e.value().clone())
                .collect()
        } else {
            let mut found = Vec::new();
            // A client id: `clients` has it (ids are not in the name index).
            if let Some(c) = self.clients.get(target) {
                if c.state() == ConnState::Connected {
                    found.push(c.clone());
                }
            }
            let mut add = |key: &str| {
                let Some(tabs) = self.names.get(key) else {
                    return;
                };
                found.extend(
                    tabs.iter()
                        // The index may hold stale names (a label changed): re-check each.
                        .filter(|c| c.state() == ConnState::Connected && c.matches(target))
                        .cloned(),
                );
            };
            add(target);
            // Sites are indexed lower-case and match case-insensitively.
            if target.chars().any(char::is_uppercase) {
                add(&target.to_lowercase());
            }
            found
        };
        if found.len() > 1 {
            found.sort_by(|a, b| a.id.cmp(&b.id));
            found.dedup_by(|a, b| a.id == b.id);
        }
        found
    }
}
