//! Skills (docs/memory-and-skills.md): tools described by `skills/*.yaml` — a name, a description, a JSON
//! Schema for the parameters, and one of `run` (a program and argv, through the exec policy),
//! `flow` (a flow and its inputs) or `prompt` (a template and a target).
//!
//! - [`loader`]: one file → a checked [`Skill`] or a FILE:LINE:COL error;
//! - [`args`]: `key=value` words → schema-validated arguments → the [`Action`] to perform;
//! - [`Skills`]: the live set, swapped whole when a file watcher (`notify`) sees a change.
//!
//! Only regular files directly inside the skills directory are read (no subdirectories, no
//! symlinks leading out of it), and skills are looked up by a `[a-z0-9_-]+` name, never by
//! path.

pub mod args;
pub mod loader;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use notify::Watcher;
use serde_json::Value;

pub use args::{prepare, Action};
pub use loader::{parse_skill, Body, Skill, SkillError};

/// `[a-z0-9_-]+`: a skill's name (also keeps every lookup inside the skills directory).
pub fn is_skill_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b'-')
}

/// Every skill of the directory and the problems found; replaced whole on reload.
#[derive(Debug, Default)]
pub struct SkillSet {
    pub skills: Vec<Arc<Skill>>,
    pub errors: Vec<SkillError>,
}

fn is_skill_file(p: &Path) -> bool {
    matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml"))
}

impl SkillSet {
    /// Loads every `*.yaml` / `*.yml` directly in `dir` (a missing dir is an empty set).
    pub fn load(dir: &Path) -> SkillSet {
        let mut set = SkillSet::default();
        let Ok(root) = dir.canonicalize() else {
            return set;
        };
        let Ok(entries) = std::fs::read_dir(&root) else {
            return set;
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| is_skill_file(p))
            .collect();
        paths.sort();
        for path in paths {
            let file = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let fail = |message: String| SkillError {
                file: file.clone(),
                line: 1,
                col: 1,
                message,
            };
            // Confinement: the real file must sit directly in the skills directory.
            let inside = path
                .canonicalize()
                .ok()
                .filter(|real| real.parent() == Some(root.as_path()) && real.is_file());
            let Some(real) = inside else {
                set.errors.push(fail(
                    "拒绝读取 / refused: a skill file must be a regular file inside the skills directory (no links leading out of it)".into(),
                ));
                continue;
            };
            match std::fs::read_to_string(&real) {
                Ok(text) => match parse_skill(&file, &text) {
                    Ok(skill) => {
                        if set.skills.iter().any(|s| s.name == skill.name) {
                            set.errors.push(fail(format!(
                                "技能重名 / duplicate skill name `{}` (the first file keeps it)",
                                skill.name
                            )));
                        } else {
                            set.skills.push(Arc::new(skill));
                        }
                    }
                    Err(e) => set.errors.push(e),
                },
                Err(e) => set
                    .errors
                    .push(fail(format!("无法读取 / cannot read: {e}"))),
            }
        }
        set
    }

    pub fn get(&self, name: &str) -> Option<Arc<Skill>> {
        self.skills.iter().find(|s| s.name == name).cloned()
    }

    /// The answer to `skill list`.
    pub fn list(&self) -> String {
        let mut out = String::from("技能 / skills:\n");
        if self.skills.is_empty() {
            out.push_str("  (none)\n");
        }
        for s in &self.skills {
            out.push_str(&format!("  {} — {}\n", s.name, s.description.trim()));
        }
        if !self.errors.is_empty() {
            out.push_str("未加载 / not loaded:\n");
            for e in &self.errors {
                out.push_str(&format!("  {e}\n"));
            }
        }
        out.push_str("?<skill help NAME>! 查看参数 / shows a skill's parameters and an example.");
        out
    }

    /// The answer to `skill help [NAME]`: written for a model to read.
    pub fn help(&self, name: Option<&str>) -> Result<String, String> {
        let Some(name) = name else {
            let mut out = String::from(
                "HOW TO USE SKILLS / 如何使用技能\n\
                 A skill is a tool the hub runs for you. Do not guess names or parameters: look them up.\n\
                 1. ?<skill list>! — every skill and what it does.\n\
                 2. ?<skill help NAME>! — its parameters (type, required or default) and an example call.\n\
                 3. ?<skill NAME key=value key2=\"a value with spaces\">! — call it; the answer comes back to you.\n\
                 Arguments are checked before anything runs; an error names the field to fix.\n\
                 Values are data: they are never run as commands.\n\n",
            );
            out.push_str(&self.list());
            return Ok(out);
        };
        let s = self.get(name).ok_or_else(|| self.unknown(name))?;
        let kind = match &s.body {
            Body::Run(r) => format!(
                "runs the program `{}` on the hub (only when the hub's exec policy allows it)",
                r.program
            ),
            Body::Flow(f) => format!("runs the flow `{}`", f.name),
            Body::Prompt(p) => format!(
                "sends a prompt to {}",
                p.to.as_deref().unwrap_or("role:worker")
            ),
        };
        let mut out = format!(
            "skill {}: {}\nIt {kind}.\nParameters:\n",
            s.name,
            s.description.trim()
        );
        let required: Vec<&str> = s
            .schema
            .get("required")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut example = format!("?<skill {}", s.name);
        match s.schema.get("properties").and_then(Value::as_object) {
            Some(props) if !props.is_empty() => {
                for (k, p) in props {
                    let ty = p.get("type").and_then(Value::as_str).unwrap_or("any");
                    let need = if required.contains(&k.as_str()) {
                        "required".to_string()
                    } else if let Some(d) = p.get("default") {
                        format!("default {d}")
                    } else {
                        "optional".to_string()
                    };
                    let desc = p.get("description").and_then(Value::as_str).unwrap_or("");
                    out.push_str(&format!("  {k} ({ty}, {need}) {desc}\n"));
                    if required.contains(&k.as_str()) {
                        let v = match ty {
                            "integer" | "number" => "3".to_string(),
                            "boolean" => "true".to_string(),
                            _ => "\"…\"".to_string(),
                        };
                        example.push_str(&format!(" {k}={v}"));
                    }
                }
            }
            _ => out.push_str("  (none)\n"),
        }
        example.push_str(">!");
        out.push_str(&format!(
            "Example: {}",
            s.example.clone().unwrap_or(example)
        ));
        Ok(out)
    }

    fn unknown(&self, name: &str) -> String {
        let names: Vec<&str> = self.skills.iter().map(|s| s.name.as_str()).collect();
        format!(
            "没有这个技能 / no skill named `{name}`. 可用 / available: {}. Run ?<skill list>!",
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        )
    }

    /// The skill, or an error listing those that exist.
    pub fn find(&self, name: &str) -> Result<Arc<Skill>, String> {
        self.get(name).ok_or_else(|| self.unknown(name))
    }
}

/// The live skill set of a hub; `notify` reloads it when a file in the directory changes.
pub struct Skills {
    shared: Arc<Shared>,
    _watcher: Mutex<Option<notify::RecommendedWatcher>>,
}

struct Shared {
    dir: PathBuf,
    current: RwLock<Arc<SkillSet>>,
    /// Sends the reload count after each reload (tests and the log wait on it).
    reloaded: tokio::sync::broadcast::Sender<u64>,
    count: std::sync::atomic::AtomicU64,
}

impl Shared {
    fn reload(&self) {
        let set = SkillSet::load(&self.dir);
        for e in &set.errors {
            tracing::warn!("{e}");
        }
        tracing::info!(skills = set.skills.len(), "skills reloaded");
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(set);
        let n = self.count.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        let _ = self.reloaded.send(n);
    }
}

impl Skills {
    /// Loads `dir` and watches it (a directory that does not exist has no skills and is not
    /// watched).
    pub fn load(dir: &Path) -> Skills {
        let shared = Arc::new(Shared {
            dir: dir.to_path_buf(),
            current: RwLock::new(Arc::new(SkillSet::default())),
            reloaded: tokio::sync::broadcast::channel(64).0,
            count: std::sync::atomic::AtomicU64::new(0),
        });
        shared.reload();
        let watcher = Self::watch(&shared);
        Skills {
            shared,
            _watcher: Mutex::new(watcher),
        }
    }

    fn watch(shared: &Arc<Shared>) -> Option<notify::RecommendedWatcher> {
        if !shared.dir.is_dir() {
            tracing::debug!(dir = %shared.dir.display(), "no skills directory; not watched");
            return None;
        }
        let weak = Arc::downgrade(shared);
        let handler = move |res: notify::Result<notify::Event>| {
            let Ok(ev) = res else { return };
            if matches!(ev.kind, notify::EventKind::Access(_)) {
                return;
            }
            if !ev.paths.iter().any(|p| is_skill_file(p)) {
                return;
            }
            if let Some(shared) = weak.upgrade() {
                shared.reload();
            }
        };
        let mut w = match notify::recommended_watcher(handler) {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!("skills are not watched: {e}");
                return None;
            }
        };
        if let Err(e) = w.watch(&shared.dir, notify::RecursiveMode::NonRecursive) {
            tracing::warn!("skills are not watched: {e}");
            return None;
        }
        Some(w)
    }

    pub fn get(&self) -> Arc<SkillSet> {
        self.shared
            .current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Reload events: each carries the number of reloads so far.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<u64> {
        self.shared.reloaded.subscribe()
    }

    /// Reloads now (the watcher does this by itself).
    pub fn reload(&self) {
        self.shared.reload();
    }

    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_skills_load() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("skills");
        let set = SkillSet::load(&dir);
        assert!(set.errors.is_empty(), "{:?}", set.errors);
        assert!(set.skills.len() >= 3);
        for s in &set.skills {
            let help = set.help(Some(&s.name)).unwrap();
            assert!(help.contains("Example: ?<skill "), "{help}");
        }
        assert!(set.help(None).unwrap().contains("?<skill list>!"));
    }

    #[cfg(unix)]
    #[test]
    fn a_link_out_of_the_directory_is_refused() {
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret.yaml");
        std::fs::write(
            &secret,
            "name: leak\ndescription: d\nprompt: {template: x}\n",
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(&secret, dir.path().join("leak.yaml")).unwrap();
        let set = SkillSet::load(dir.path());
        assert!(set.skills.is_empty());
        assert!(
            set.errors[0].message.contains("refused"),
            "{:?}",
            set.errors
        );
    }
}
