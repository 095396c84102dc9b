//! Variable scopes: one per master tab (keyed by client id) plus a global scope for flows.
//!
//! Values are data: they are stored and substituted as text and never parsed as commands.
//! Bounded so a chatty model cannot grow the hub's memory: at most [`MAX_VARS_PER_SCOPE`]
//! names per scope, [`MAX_SCOPES`] scopes and [`MAX_VALUE_LEN`] bytes per value.

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
}

/// Shared variable store; the hub gives one `Arc<Variables>` to the interpreter and the
/// flow engine (which writes node outputs such as `review.output` into the global scope).
#[derive(Debug, Default)]
pub struct Variables {
    inner: Mutex<Scopes>,
}

#[derive(Debug, Default)]
struct Scopes {
    global: HashMap<String, String>,
    per_tab: HashMap<String, HashMap<String, String>>,
}

impl Variables {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
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
        insert(s.per_tab.entry(scope.to_string()).or_default(), name, value)
    }

    /// Set `name` in the global scope.
    pub fn set_global(&self, name: &str, value: String) -> Result<(), VarError> {
        check_len(name, &value)?;
        insert(&mut self.lock().global, name, value)
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
        self.lock().per_tab.remove(scope);
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

fn insert(map: &mut HashMap<String, String>, name: &str, value: String) -> Result<(), VarError> {
    if !map.contains_key(name) && map.len() >= MAX_VARS_PER_SCOPE {
        return Err(VarError::TooMany);
    }
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
