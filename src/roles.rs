//! Role cards (`role-cards/*.yaml`, or the seed's JSON cards): which tab is Master, Foreman or
//! Worker, its group, the instructions its model gets, and what its replies may do. Cards are
//! reloaded when the files change; a bad card is reported with FILE:LINE:COL and the others
//! keep working.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use serde::Deserialize;

use crate::commands::permissions::Permissions;
use crate::protocol::Role;

/// One role card as written in YAML.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleCard {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub role: Role,
    /// Which tabs this card applies to; a card without rules applies to none.
    #[serde(default, rename = "match")]
    pub matches: MatchRules,
    #[serde(default)]
    pub group: Option<String>,
    /// Sent to the tab's model before its first task in a conversation.
    #[serde(default, alias = "system_prompt")]
    pub instructions: Option<String>,
    /// Foreman: wraps the task it receives; `{{ task }}` and `{{ workers }}` are filled in.
    #[serde(default)]
    pub split_template: Option<String>,
    /// Foreman: the follow-up with its workers' answers; `{{ task }}` and `{{ answers }}`.
    #[serde(default)]
    pub followup_template: Option<String>,
    #[serde(default)]
    pub permissions: CardPermissions,
    /// The seed's `test_command`: a command that checks the card works (shown in status).
    #[serde(default)]
    pub test_command: Option<String>,
    /// `memory: every N`: prepend a `<memory>` block to this tab's tasks every N turns.
    #[serde(default)]
    pub memory: Option<crate::memory::Injection>,
    /// This tab writes the plans of `?<manager plan GOAL>!` (unless `--planner` names one).
    #[serde(default)]
    pub planner: bool,
    /// `loop: true`: a master's or foreman's replies loop (docs/agents.md): the results of its
    /// commands go back into its chat until it is done.
    #[serde(default, rename = "loop")]
    pub looping: bool,
    /// The most rounds of this tab's agent sessions (default: `--agent-max-rounds`).
    #[serde(default)]
    pub max_rounds: Option<u32>,
    /// `quota: 20/hour`: at most that many prompts to each site in `match.site` (docs/commands.md;
    /// `?<tabs budget …>!` wins over it).
    #[serde(default)]
    pub quota: Option<String>,
}

impl CardSet {
    /// The quotas the cards give: site → quota (a card's `quota` for each of its `match.site`).
    pub fn quotas(&self) -> std::collections::HashMap<String, crate::decide::Quota> {
        let mut out = std::collections::HashMap::new();
        for card in &self.cards {
            let Some(q) = card
                .quota
                .as_deref()
                .and_then(|q| crate::decide::Quota::parse(q).ok())
            else {
                continue;
            };
            for site in &card.matches.site {
                out.insert(site.to_lowercase(), q);
            }
        }
        out
    }
}

/// Tabs a card applies to: every listed rule must hold; entries in a list are alternatives.
/// Labels, client ids and URLs take `*` wildcards.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatchRules {
    #[serde(default)]
    pub site: Vec<String>,
    #[serde(default)]
    pub label: Vec<String>,
    #[serde(default)]
    pub client_id: Vec<String>,
    #[serde(default)]
    pub url: Vec<String>,
}

/// Overrides of the role's default permissions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CardPermissions {
    pub reply_commands: Option<bool>,
    pub shell: Option<bool>,
    pub dispatch: Option<bool>,
    pub any_target: Option<bool>,
    pub flows: Option<bool>,
    pub set_role: Option<bool>,
    pub memory_write: Option<bool>,
    /// May use the MCP servers (`?<mcp …>!`).
    pub mcp: Option<bool>,
}

/// The seed's JSON card: `{name, description, system_prompt, test_command}`; it applies to
/// tabs labelled with its name.
#[derive(Debug, Deserialize)]
struct SeedCard {
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    system_prompt: Option<String>,
    #[serde(default)]
    test_command: Option<String>,
}

/// What a tab looks like to the matcher.
#[derive(Debug, Clone, Copy)]
pub struct TabFacts<'a> {
    pub site: &'a str,
    pub label: Option<&'a str>,
    pub client_id: &'a str,
    pub url: Option<&'a str>,
}

impl RoleCard {
    pub fn applies_to(&self, tab: &TabFacts<'_>) -> bool {
        let m = &self.matches;
        if m.site.is_empty() && m.label.is_empty() && m.client_id.is_empty() && m.url.is_empty() {
            return false;
        }
        let any = |pats: &[String], value: Option<&str>| {
            pats.is_empty() || value.is_some_and(|v| pats.iter().any(|p| wildcard(p, v)))
        };
        any(&m.site, Some(tab.site))
            && any(&m.label, tab.label)
            && any(&m.client_id, Some(tab.client_id))
            && any(&m.url, tab.url)
    }

    /// The role's defaults with this card's overrides.
    pub fn permissions(&self) -> Permissions {
        let mut p = Permissions::for_role(to_cmd_role(self.role));
        let o = self.permissions;
        let set = |field: &mut bool, v: Option<bool>| {
            if let Some(v) = v {
                *field = v;
            }
        };
        set(&mut p.reply_commands, o.reply_commands);
        set(&mut p.shell, o.shell);
        set(&mut p.dispatch, o.dispatch);
        set(&mut p.any_target, o.any_target);
        set(&mut p.flows, o.flows);
        set(&mut p.set_role, o.set_role);
        set(&mut p.memory_write, o.memory_write);
        set(&mut p.mcp, o.mcp);
        p
    }
}

/// Maps the protocol role to the command language's role.
pub fn to_cmd_role(role: Role) -> crate::commands::ast::Role {
    use crate::commands::ast::Role as R;
    match role {
        Role::Master => R::Master,
        Role::Foreman => R::Foreman,
        Role::Worker => R::Worker,
    }
}

/// Case-insensitive match with `*` standing for any run of characters.
fn wildcard(pattern: &str, value: &str) -> bool {
    let p: Vec<char> = pattern.to_lowercase().chars().collect();
    let v: Vec<char> = value.to_lowercase().chars().collect();
    let (mut pi, mut vi, mut star, mut mark) = (0, 0, None, 0);
    while vi < v.len() {
        if pi < p.len() && p[pi] != '*' && p[pi] == v[vi] {
            pi += 1;
            vi += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = vi;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            vi = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// A problem with one card file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardError {
    pub file: String,
    pub line: usize,
    pub col: usize,
    pub message: String,
}

impl std::fmt::Display for CardError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.col, self.message
        )
    }
}

/// Parses one card file (YAML, or the seed's JSON).
pub fn parse_card(file: &str, text: &str) -> Result<RoleCard, CardError> {
    let located = |msg: String, line: usize, col: usize| CardError {
        file: file.to_string(),
        line,
        col,
        message: msg,
    };
    if file.ends_with(".json") {
        let seed: SeedCard = serde_json::from_str(text).map_err(|e| {
            located(
                format!("角色卡无效 / invalid role card: {e}"),
                e.line(),
                e.column(),
            )
        })?;
        return Ok(RoleCard {
            matches: MatchRules {
                label: vec![seed.name.clone()],
                ..MatchRules::default()
            },
            name: seed.name,
            description: seed.description,
            role: Role::Worker,
            group: None,
            instructions: seed.system_prompt,
            split_template: None,
            followup_template: None,
            permissions: CardPermissions::default(),
            test_command: seed.test_command,
            memory: None,
            planner: false,
            looping: false,
            max_rounds: None,
            quota: None,
        });
    }
    let options = crate::flows::yaml::saphyr_options(text);
    let card = serde_saphyr::from_str_with_options::<RoleCard>(text, options).map_err(|e| {
        let msg = e.to_string();
        let (line, col) = line_col_in(&msg).unwrap_or((1, 1));
        located(format!("角色卡无效 / invalid role card: {msg}"), line, col)
    })?;
    if let Some(q) = &card.quota {
        let at = text
            .lines()
            .position(|l| l.trim_start().starts_with("quota"))
            .map_or(1, |i| i + 1);
        if let Err(e) = crate::decide::Quota::parse(q) {
            return Err(located(
                format!("角色卡无效 / invalid role card: quota: {e}"),
                at,
                1,
            ));
        }
        if card.matches.site.is_empty() {
            return Err(located(
                "角色卡无效 / invalid role card: quota needs `match: {site: …}` (a quota is per site)"
                    .into(),
                at,
                1,
            ));
        }
    }
    Ok(card)
}

/// Pulls "line N column M" (serde-saphyr's wording) out of an error message.
fn line_col_in(msg: &str) -> Option<(usize, usize)> {
    let lower = msg.to_lowercase();
    let num_after = |key: &str| -> Option<usize> {
        let i = lower.find(key)? + key.len();
        let digits: String = lower[i..]
            .trim_start_matches([' ', ':'])
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        digits.parse().ok()
    };
    Some((
        num_after("line")?,
        num_after("column").or(num_after("col")).unwrap_or(1),
    ))
}

/// All cards of a directory plus the problems found; replaced whole on reload.
#[derive(Debug, Default)]
pub struct CardSet {
    pub cards: Vec<RoleCard>,
    pub errors: Vec<CardError>,
    stamps: BTreeMap<PathBuf, SystemTime>,
}

impl CardSet {
    /// Loads every `*.yaml`, `*.yml` and `*.json` in `dir` (a missing dir is an empty set).
    pub fn load(dir: &Path) -> CardSet {
        let mut set = CardSet::default();
        let Ok(entries) = std::fs::read_dir(dir) else {
            return set;
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                matches!(
                    p.extension().and_then(|e| e.to_str()),
                    Some("yaml" | "yml" | "json")
                )
            })
            .collect();
        paths.sort();
        for path in paths {
            let stamp = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
            if let Some(s) = stamp {
                set.stamps.insert(path.clone(), s);
            }
            let file = path.display().to_string();
            match std::fs::read_to_string(&path) {
                Ok(text) => match parse_card(&file, &text) {
                    Ok(card) => set.cards.push(card),
                    Err(e) => set.errors.push(e),
                },
                Err(e) => set.errors.push(CardError {
                    file,
                    line: 1,
                    col: 1,
                    message: format!("无法读取 / cannot read: {e}"),
                }),
            }
        }
        set
    }

    /// The first card (in file-name order) that applies to the tab.
    pub fn card_for(&self, tab: &TabFacts<'_>) -> Option<&RoleCard> {
        self.cards.iter().find(|c| c.applies_to(tab))
    }

    pub fn by_name(&self, name: &str) -> Option<&RoleCard> {
        self.cards.iter().find(|c| c.name == name)
    }

    /// True when a file was added, removed or modified since this set was loaded.
    fn is_stale(&self, dir: &Path) -> bool {
        let now = CardSet::stamps_of(dir);
        now != self.stamps
    }

    fn stamps_of(dir: &Path) -> BTreeMap<PathBuf, SystemTime> {
        let mut out = BTreeMap::new();
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                let p = e.path();
                if matches!(
                    p.extension().and_then(|e| e.to_str()),
                    Some("yaml" | "yml" | "json")
                ) {
                    if let Ok(t) = e.metadata().and_then(|m| m.modified()) {
                        out.insert(p, t);
                    }
                }
            }
        }
        out
    }
}

/// The live card set of a hub: read by role assignment, swapped whole by the reloader.
pub struct RoleCards {
    dir: PathBuf,
    current: RwLock<Arc<CardSet>>,
}

impl RoleCards {
    pub fn load(dir: &Path) -> RoleCards {
        let set = CardSet::load(dir);
        for e in &set.errors {
            tracing::warn!("{e}");
        }
        RoleCards {
            dir: dir.to_path_buf(),
            current: RwLock::new(Arc::new(set)),
        }
    }

    pub fn get(&self) -> Arc<CardSet> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Reloads when the directory changed; true if it did.
    pub fn reload_if_changed(&self) -> bool {
        if !self.get().is_stale(&self.dir) {
            return false;
        }
        let set = CardSet::load(&self.dir);
        for e in &set.errors {
            tracing::warn!("{e}");
        }
        tracing::info!(cards = set.cards.len(), "role cards reloaded");
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(set);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts<'a>(site: &'a str, label: Option<&'a str>) -> TabFacts<'a> {
        TabFacts {
            site,
            label,
            client_id: "c-1",
            url: None,
        }
    }

    #[test]
    fn yaml_card_matches_and_grants() {
        let card = parse_card(
            "f.yaml",
            "name: lead\nrole: foreman\ngroup: g1\nmatch: {site: [deepseek], label: ['fm-*']}\n\
             permissions: {shell: false}\n",
        )
        .unwrap();
        assert!(card.applies_to(&facts("deepseek", Some("fm-1"))));
        assert!(!card.applies_to(&facts("deepseek", Some("w-1"))));
        assert!(!card.applies_to(&facts("kimi", Some("fm-1"))));
        let p = card.permissions();
        assert!(p.dispatch && p.reply_commands && !p.any_target && !p.shell);
    }

    #[test]
    fn unknown_field_is_reported_with_position() {
        let err = parse_card("bad.yaml", "name: x\nrole: worker\nrol: master\n").unwrap_err();
        assert_eq!(err.file, "bad.yaml");
        assert!(err.message.contains("rol"), "{err}");
        assert_eq!(err.line, 3, "{err}");
    }

    #[test]
    fn seed_json_card_applies_by_label() {
        let card = parse_card(
            "t.json",
            r#"{"name":"测试角色","description":"d","system_prompt":"你是测试员","test_command":"?<echo ok>!"}"#,
        )
        .unwrap();
        assert!(card.applies_to(&facts("qianwen", Some("测试角色"))));
        assert_eq!(card.role, Role::Worker);
        assert_eq!(card.instructions.as_deref(), Some("你是测试员"));
    }

    #[test]
    fn the_shipped_cards_load_and_match() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("role-cards");
        let set = CardSet::load(&dir);
        assert!(set.errors.is_empty(), "{:?}", set.errors);
        assert_eq!(set.cards.len(), 4);
        let fm = set
            .card_for(&facts("deepseek", Some("foreman-g1")))
            .unwrap();
        assert_eq!((fm.role, fm.group.as_deref()), (Role::Foreman, Some("g1")));
        let split = fm.split_template.as_deref().unwrap();
        let env = minijinja::Environment::new();
        let text = env
            .render_str(
                split,
                minijinja::context! {task => "T", workers => "g1-a, g1-b", example => "g1-a: …",
                instructions => fm.instructions.clone()},
            )
            .unwrap();
        assert!(
            text.contains("g1-a, g1-b") && text.contains("?<parallel"),
            "{text}"
        );
        assert_eq!(
            set.card_for(&facts("qianwen", Some("g1-7"))).unwrap().role,
            Role::Worker
        );
        assert!(set.card_for(&facts("qianwen", Some("测试角色"))).is_some());
        assert_eq!(
            set.card_for(&facts("x", Some("master"))).unwrap().role,
            Role::Master
        );
    }

    #[test]
    fn wildcards() {
        assert!(wildcard("fm-*", "FM-12"));
        assert!(wildcard("*", ""));
        assert!(wildcard(
            "https://*.deepseek.com/*",
            "https://chat.deepseek.com/a"
        ));
        assert!(!wildcard("a*b", "acd"));
    }

    #[test]
    fn a_bad_card_does_not_hide_the_good_ones_and_reload_sees_changes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.yaml"), "name: a\nmatch: {site: [x]}\n").unwrap();
        std::fs::write(dir.path().join("b.yaml"), "name: [unclosed\n").unwrap();
        let cards = RoleCards::load(dir.path());
        assert_eq!(cards.get().cards.len(), 1);
        assert_eq!(cards.get().errors.len(), 1);
        assert!(!cards.reload_if_changed());
        std::fs::write(dir.path().join("c.yaml"), "name: c\nrole: master\n").unwrap();
        assert!(cards.reload_if_changed());
        assert_eq!(cards.get().cards.len(), 2);
        assert_eq!(cards.get().by_name("c").unwrap().role, Role::Master);
    }
}
