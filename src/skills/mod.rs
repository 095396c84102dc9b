//! Skills (docs/memory-and-skills.md): tools described by `skills/*.yaml` — a name, a description, a JSON
//! Schema for the parameters, and one of `run` (a program and argv, through the exec policy),
//! `flow` (a flow and its inputs) or `prompt` (a template and a target) — and program skills,
//! `skills/NAME.py|js|sh` with a header block ([`program`]), which run only while the
//! person's pin of their SHA-256 (in the store) matches.
//!
//! - [`loader`]: one file → a checked [`Skill`] or a FILE:LINE:COL error;
//! - [`args`]: `key=value` words → schema-validated arguments → the [`SkillPlan`] to perform;
//! - [`Skills`]: the live set, swapped whole when a file watcher (`notify`) sees a change.
//!
//! Only regular files directly inside the skills directory are read (no subdirectories, no
//! symlinks leading out of it), and skills are looked up by a `[a-z0-9_-]+` name, never by
//! path.

pub mod args;
pub mod loader;
pub mod program;
pub mod spec;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use notify::Watcher;
use serde_json::Value;

pub use args::{prepare, SkillPlan};
pub use loader::{parse_skill, Body, Skill, SkillError};

/// `[a-z0-9_-]+`: a skill's name (also keeps every lookup inside the skills directory).
pub fn is_skill_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b'-')
}

/// Keeps the one file a `returns: file` skill made (the hub's Files service, by content).
pub trait FileKeeper: Send + Sync {
    /// The per-file limit in bytes.
    fn max_file(&self) -> u64;
    /// Keeps `bytes` as a file named `name`.
    fn keep(&self, name: &str, bytes: &[u8]) -> Result<KeptFile, String>;
}

/// A file kept for a skill's result: what the result carries as its attachment.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct KeptFile {
    pub name: String,
    pub mime: String,
    pub size: u64,
    /// Lower-case hex SHA-256: where the Files service keeps it.
    pub sha256: String,
}

/// What program skills need from the hub: the store holding the pins, what keeps a
/// `returns: file` skill's file, and each skill's last run error.
pub struct Runtime {
    pub store: crate::store::Store,
    pub files: Option<Arc<dyn FileKeeper>>,
    last_error: Mutex<std::collections::HashMap<String, String>>,
}

impl Runtime {
    pub fn new(store: crate::store::Store, files: Option<Arc<dyn FileKeeper>>) -> Runtime {
        Runtime {
            store,
            files,
            last_error: Mutex::default(),
        }
    }

    fn note(&self, name: &str, error: Option<&str>) {
        let mut m = self.last_error.lock().unwrap_or_else(|p| p.into_inner());
        match error {
            Some(e) => m.insert(name.to_string(), e.to_string()),
            None => m.remove(name),
        };
    }
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Runtime")
    }
}

/// One skill as the dashboard and `skill list` show it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SkillInfo {
    pub name: String,
    pub file: String,
    /// `run`, `flow`, `prompt`, `python`, `node`, `sh`; `broken` for a file that did not load.
    pub kind: String,
    pub description: String,
    /// A program skill: whether its pin matches its bytes (others: always true).
    pub enabled: bool,
    /// A program skill's SHA-256.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Why it did not load, or why its last run failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Every skill of the directory and the problems found; replaced whole on reload.
#[derive(Debug, Default)]
pub struct SkillSet {
    pub skills: Vec<Arc<Skill>>,
    pub errors: Vec<SkillError>,
    runtime: Option<Arc<Runtime>>,
}

/// A file the skills directory may hold: `*.yaml`/`*.yml`, or a program `*.py|js|sh`.
pub fn is_skill_file(p: &Path) -> bool {
    matches!(
        p.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml" | "py" | "js" | "sh")
    )
}

fn parse_any(file: &str, bytes: &[u8]) -> Result<Skill, SkillError> {
    let ext = file.rsplit_once('.').map_or("", |(_, e)| e);
    if program::Lang::of(ext).is_some() {
        return program::parse_program(file, bytes);
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => parse_skill(file, text),
        Err(_) => Err(SkillError {
            file: file.to_string(),
            line: 1,
            col: 1,
            message: "不是 UTF-8 文本 / the file is not UTF-8 text".into(),
        }),
    }
}

impl SkillSet {
    /// Loads every skill file directly in `dir` (a missing dir is an empty set).
    pub fn load(dir: &Path) -> SkillSet {
        Self::load_with(dir, None)
    }

    /// [`Self::load`], with what program skills need to run.
    pub fn load_with(dir: &Path, runtime: Option<Arc<Runtime>>) -> SkillSet {
        let mut set = SkillSet {
            runtime,
            ..SkillSet::default()
        };
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
            match std::fs::read(&real) {
                Ok(bytes) => match parse_any(&file, &bytes) {
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

    /// Whether a skill may run as far as the person is concerned: a program skill only while
    /// the pin in the store matches its bytes.
    pub fn enabled(&self, skill: &Skill) -> bool {
        match &skill.body {
            Body::Program(p) => self.pin(&skill.name).as_deref() == Some(p.sha256.as_str()),
            _ => true,
        }
    }

    fn pin(&self, name: &str) -> Option<String> {
        let rt = self.runtime.as_ref()?;
        rt.store.skill_pin(name).ok().flatten()
    }

    /// Every skill and every file that did not load, for the dashboard.
    pub fn infos(&self) -> Vec<SkillInfo> {
        let last = |name: &str| {
            self.runtime.as_ref().and_then(|rt| {
                rt.last_error
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(name)
                    .cloned()
            })
        };
        let mut out: Vec<SkillInfo> = self
            .skills
            .iter()
            .map(|s| {
                let (kind, sha256) = match &s.body {
                    Body::Run(_) => ("run", None),
                    Body::Flow(_) => ("flow", None),
                    Body::Prompt(_) => ("prompt", None),
                    Body::Program(p) => (
                        match p.lang {
                            program::Lang::Python => "python",
                            program::Lang::Node => "node",
                            program::Lang::Shell => "sh",
                        },
                        Some(p.sha256.clone()),
                    ),
                };
                SkillInfo {
                    name: s.name.clone(),
                    file: s.file.clone(),
                    kind: kind.into(),
                    description: s.description.trim().to_string(),
                    enabled: self.enabled(s),
                    sha256,
                    error: last(&s.name),
                }
            })
            .collect();
        out.extend(self.errors.iter().map(|e| {
            SkillInfo {
                name: e
                    .file
                    .rsplit_once('.')
                    .map_or(e.file.as_str(), |(n, _)| n)
                    .to_string(),
                file: e.file.clone(),
                kind: "broken".into(),
                description: String::new(),
                enabled: false,
                sha256: None,
                error: Some(e.to_string()),
            }
        }));
        out
    }

    /// Pins the loaded bytes of program skill `name` (what `aicard skill enable` and the
    /// dashboard's Enable do); answers the pinned hash.
    pub fn enable(&self, name: &str) -> Result<String, String> {
        let s = self.find(name)?;
        let Body::Program(p) = &s.body else {
            return Err(format!(
                "`{name}` 不是程序技能 / `{name}` is not a program skill: only .py, .js and .sh skills are enabled"
            ));
        };
        let rt = self
            .runtime
            .as_ref()
            .ok_or("技能未连接存储 / skills have no store here")?;
        rt.store
            .pin_skill(name, &p.sha256)
            .map_err(|e| format!("无法保存 / cannot pin: {e}"))?;
        rt.note(name, None);
        tracing::info!(target: "aicard::audit", skill = name, sha256 = %p.sha256, "program skill enabled");
        Ok(p.sha256.clone())
    }

    /// Runs a prepared program skill: refused by the exec policy, or until the person enabled
    /// these bytes; its last error is kept for `skill list` and the dashboard.
    pub async fn run_program(
        &self,
        policy: &crate::exec::ExecPolicy,
        name: &str,
        spec: &program::ProgramSpec,
        input: &Value,
        caller: &str,
    ) -> Result<program::ProgramOutput, String> {
        crate::exec::check_skill(policy, name).map_err(|e| e.to_string())?;
        let rt = self
            .runtime
            .as_ref()
            .ok_or("技能未连接存储 / program skills cannot run here (no store)")?;
        if self.pin(name).as_deref() != Some(spec.sha256.as_str()) {
            return Err(waits(name, &spec.sha256));
        }
        let out = program::run(policy, name, spec, input, caller, rt.files.as_deref()).await;
        match &out {
            Ok(o) if o.success => rt.note(name, None),
            Ok(o) => rt.note(name, Some(&o.text)),
            Err(e) => rt.note(name, Some(e)),
        }
        out
    }

    /// The answer to `skill list`.
    pub fn list(&self) -> String {
        let mut out = String::from("技能 / skills:\n");
        if self.skills.is_empty() {
            out.push_str("  (none)\n");
        }
        for s in &self.skills {
            let state = match &s.body {
                Body::Program(p) if self.enabled(s) => {
                    format!(
                        " [{} program, enabled, sha256 {}]",
                        p.lang.ext(),
                        &p.sha256[..12]
                    )
                }
                Body::Program(p) => format!(
                    " [{} program, 待启用 / waits to be enabled: aicard skill enable {}]",
                    p.lang.ext(),
                    s.name
                ),
                _ => String::new(),
            };
            out.push_str(&format!("  {} — {}{state}\n", s.name, s.description.trim()));
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
            Body::Program(p) => format!(
                "runs the {} program `{}` on the hub (only when the hub's exec policy allows it and the person enabled it); it returns {}",
                p.lang.interpreter(),
                s.file,
                match p.returns {
                    program::Returns::Text => "text",
                    program::Returns::File => "a file, attached to the result",
                }
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

/// Why a program skill did not run: the person has not enabled these bytes.
fn waits(name: &str, sha256: &str) -> String {
    format!(
        "技能 {name} 等待启用 / skill `{name}` waits to be enabled: it is new or changed (sha256 {sha256}). \
         The person enables it with `aicard skill enable {name}` in their terminal or Enable on the dashboard's skills page."
    )
}

/// The live skill set of a hub; `notify` reloads it when a file in the directory changes.
pub struct Skills {
    shared: Arc<SkillsShared>,
    _watcher: Mutex<Option<notify::RecommendedWatcher>>,
}

struct SkillsShared {
    dir: PathBuf,
    runtime: Option<Arc<Runtime>>,
    current: RwLock<Arc<SkillSet>>,
    /// Sends the reload count after each reload (tests and the log wait on it).
    reloaded: tokio::sync::broadcast::Sender<u64>,
    count: std::sync::atomic::AtomicU64,
}

impl SkillsShared {
    fn reload(&self) {
        let set = SkillSet::load_with(&self.dir, self.runtime.clone());
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
        Self::load_with(dir, None)
    }

    /// [`Self::load`], with what program skills need to run (without it they never run).
    pub fn load_with(dir: &Path, runtime: Option<Runtime>) -> Skills {
        let shared = Arc::new(SkillsShared {
            dir: dir.to_path_buf(),
            runtime: runtime.map(Arc::new),
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

    fn watch(shared: &Arc<SkillsShared>) -> Option<notify::RecommendedWatcher> {
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
