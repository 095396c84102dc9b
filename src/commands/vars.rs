//! Variable scopes: one per master tab (keyed by client id) plus a global scope for flows.
//!
//! Values are data: they are stored and substituted as text and never parsed as commands.
//! Bounded so a chatty model cannot grow the hub's memory: at most [`MAX_VARS_PER_SCOPE`]
//! names per scope, [`MAX_SCOPES`] scopes and [`MAX_VALUE_LEN`] bytes per value.
//!
//! The hub's variables are kept in the store ([`Variables::stored`], migration 11): every
//! `set` and every dropped scope is written through before it is seen, and a hub started on
//! the same data dir reads them back, so `?<set x = 1>!` survives a restart like runs, rules
//! and memory (docs/commands.md, "set"). A tab that comes back with its client id finds its
//! own scope.

use crate::store::Store;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use thiserror::Error;

/// Most variables in one scope.
pub const MAX_VARS_PER_SCOPE: usize = 1024;
/// Most per-tab scopes kept.
pub const MAX_SCOPES: usize = 4096;
/// Longest value (1 MiB).
pub const MAX_VALUE_LEN: usize = 1024 * 1024;

/// Why a variable could not be stored.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum VarError {
    /// Value too long.
    #[error("变量值过长 / value of `{name}` is {len} bytes; at most {MAX_VALUE_LEN} are kept")]
    TooLong {
        /// Variable name.
        name: String,
        /// Its length.
        len: usize,
    },
    /// Too many names in the scope.
    #[error("变量过多 / too many variables in this scope (at most {MAX_VARS_PER_SCOPE})")]
    TooMany,
    /// The store refused the write: the value is not set (it would not survive a restart).
    #[error("变量未保存 / `{name}` could not be kept: {why}")]
    Store {
        /// Variable name.
        name: String,
        /// The store's error.
        why: String,
    },
}

/// The store's key of the global scope (a tab's scope is its client id, never empty).
const GLOBAL: &str = "";

/// Scopes of a flow's `command:` call (`flow:KEY`): they live for one call, and one a crash
/// left behind is not read back.
const CALL_SCOPE_PREFIX: &str = "flow:";

/// Shared variable store; the hub gives one `Arc<Variables>` to the interpreter and the
/// flow engine (which writes node outputs such as `review.output` into the global scope).
#[derive(Default)]
pub struct Variables {
    inner: Mutex<Scopes>,
    /// Where every change is written through (None: in memory only, as in unit tests).
    store: Option<Store>,
}

impl std::fmt::Debug for Variables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Variables")
            .field("scopes", &self.lock().per_tab.len())
            .field("stored", &self.store.is_some())
            .finish()
    }
}

#[derive(Debug, Default)]
struct Scopes {
    global: HashMap<String, String>,
    per_tab: HashMap<String, HashMap<String, String>>,
}

impl Variables {
    /// An empty set of scopes, in memory only.
    pub fn new() -> Self {
        Self::default()
    }

    /// The variables kept in `store`, read back; every change from now on is written there
    /// before it is seen. Variables the store cannot give back are logged and left out.
    pub fn stored(store: Store) -> Self {
        let mut scopes = Scopes::default();
        let rows = store.variables().unwrap_or_else(|e| {
            tracing::warn!("variables not read back from the store: {e}");
            Vec::new()
        });
        let mut stale = std::collections::BTreeSet::new();
        for (scope, name, value) in rows {
            if scope == GLOBAL {
                let _ = insert(&mut scopes.global, &name, value);
            } else if scope.starts_with(CALL_SCOPE_PREFIX) {
                stale.insert(scope);
            } else if scopes.per_tab.contains_key(&scope) || scopes.per_tab.len() < MAX_SCOPES {
                let _ = insert(scopes.per_tab.entry(scope).or_default(), &name, value);
            }
        }
        for scope in stale {
            if let Err(e) = store.drop_variables(&scope) {
                tracing::warn!(scope, "a call's variables not forgotten: {e}");
            }
        }
        Self {
            inner: Mutex::new(scopes),
            store: Some(store),
        }
    }

    /// Writes `name = value` of `scope` through to the store, if there is one.
    fn keep(&self, scope: &str, name: &str, value: &str) -> Result<(), VarError> {
        match &self.store {
            Some(store) => store
                .set_variable(scope, name, value)
                .map_err(|e| VarError::Store {
                    name: name.to_string(),
                    why: e.to_string(),
                }),
            None => Ok(()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Scopes> {
        // A panic while holding the lock cannot leave a map half-updated: recover the data.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Set `name` in the scope of tab `scope`.
    pub fn set(&self, scope: &str, name: &str, value: String) -> Result<(), VarError> {
        check_len(name, &value)?;
        let mut s = self.lock();
        if !s.per_tab.contains_key(scope) && s.per_tab.len() >= MAX_SCOPES {
            return Err(VarError::TooMany);
        }
        let map = s.per_tab.entry(scope.to_string()).or_default();
        room_for(map, name)?;
        // Kept before it is seen, under the lock: the store holds the values in set order.
        self.keep(scope, name, &value)?;
        insert(map, name, value)
    }

    /// Set `name` in the global scope.
    pub fn set_global(&self, name: &str, value: String) -> Result<(), VarError> {
        check_len(name, &value)?;
        let mut s = self.lock();
        room_for(&s.global, name)?;
        self.keep(GLOBAL, name, &value)?;
        insert(&mut s.global, name, value)
    }

    /// `name` as seen from tab `scope`: its own scope first, then the global one.
    pub fn get(&self, scope: &str, name: &str) -> Option<String> {
        let s = self.lock();
        s.per_tab
            .get(scope)
            .and_then(|m| m.get(name))
            .or_else(|| s.global.get(name))
            .cloned()
    }

    /// Everything tab `scope` can see (its own values win over global ones).
    pub fn snapshot(&self, scope: &str) -> BTreeMap<String, String> {
        let s = self.lock();
        let mut out: BTreeMap<String, String> = s.global.clone().into_iter().collect();
        if let Some(m) = s.per_tab.get(scope) {
            out.extend(m.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        out
    }

    /// Forget a tab's scope (the tab is gone for good).
    pub fn drop_scope(&self, scope: &str) {
        let mut s = self.lock();
        if s.per_tab.remove(scope).is_some() {
            if let Some(store) = &self.store {
                if let Err(e) = store.drop_variables(scope) {
                    tracing::warn!(scope, "variables not forgotten in the store: {e}");
                }
            }
        }
    }
}

fn check_len(name: &str, value: &str) -> Result<(), VarError> {
    if value.len() > MAX_VALUE_LEN {
        return Err(VarError::TooLong {
            name: name.to_string(),
            len: value.len(),
        });
    }
    Ok(())
}

/// Whether `map` may hold `name` (already there, or room for one more).
fn room_for(map: &HashMap<String, String>, name: &str) -> Result<(), VarError> {
    if !map.contains_key(name) && map.len() >= MAX_VARS_PER_SCOPE {
        return Err(VarError::TooMany);
    }
    Ok(())
}

fn insert(map: &mut HashMap<String, String>, name: &str, value: String) -> Result<(), VarError> {
    room_for(map, name)?;
    map.insert(name.to_string(), value);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_are_separate_and_global_is_shared() {
        let v = Variables::new();
        v.set("m1", "x", "one".into()).expect("set");
        v.set_global("g", "shared".into()).expect("set");
        v.set_global("x", "global x".into()).expect("set");
        assert_eq!(v.get("m1", "x").as_deref(), Some("one"));
        assert_eq!(v.get("m2", "x").as_deref(), Some("global x"));
        assert_eq!(v.get("m2", "g").as_deref(), Some("shared"));
        assert_eq!(v.snapshot("m1").get("x").map(String::as_str), Some("one"));
        v.drop_scope("m1");
        assert_eq!(v.get("m1", "x").as_deref(), Some("global x"));
    }

    /// What one `Variables` over a store sets, another over the same data dir reads back;
    /// a dropped scope and a call's scope a crash left behind are not.
    #[test]
    fn stored_variables_are_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let v = Variables::stored(store.clone());
        v.set("tab-1", "x", "1".into()).unwrap();
        v.set("tab-1", "x", "one".into()).unwrap();
        v.set_global("y", "2".into()).unwrap();
        v.set("tab-2", "z", "3".into()).unwrap();
        v.drop_scope("tab-2");
        v.set("flow:key-1", "arg", "left behind".into()).unwrap();
        drop(v);
        let again = Variables::stored(Store::open(dir.path()).unwrap());
        assert_eq!(again.get("tab-1", "x").as_deref(), Some("one"));
        assert_eq!(again.get("tab-1", "y").as_deref(), Some("2"));
        assert_eq!(again.get("tab-2", "z"), None);
        assert_eq!(again.get("flow:key-1", "arg"), None);
        let kept = store.variables().unwrap();
        assert_eq!(
            kept,
            vec![
                (String::new(), "y".into(), "2".into()),
                ("tab-1".into(), "x".into(), "one".into()),
            ]
        );
    }

    #[test]
    fn limits() {
        let v = Variables::new();
        let big = "x".repeat(MAX_VALUE_LEN + 1);
        assert!(matches!(
            v.set("m", "b", big),
            Err(VarError::TooLong { .. })
        ));
        for i in 0..MAX_VARS_PER_SCOPE {
            v.set("m", &format!("v{i}"), String::new())
                .expect("within limit");
        }
        assert_eq!(
            v.set("m", "one_more", String::new()),
            Err(VarError::TooMany)
        );
        assert_eq!(v.set("m", "v0", "overwrite ok".into()), Ok(()));
    }
}
