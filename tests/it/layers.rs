//! The crate's modules form no circle, and each layer of docs/ARCHITECTURE.md names only the
//! layers below it.
//!
//! A test over the source rather than a tool: `cargo-modules` (`dependencies --acyclic`)
//! would need a build from crates.io in CI (minutes, with a compiler toolchain pinned for it)
//! and knows nothing of our layer table. This reads `src/**/*.rs`, takes every
//! `crate::…` path (a `use` or written in place, `crate::{a, b::c}` groups too, and
//! `super::…` inside the hub), and draws an arrow between the modules they name: the
//! top-level modules, and the hub's own submodules (`hub::registry`, `hub::tasks`, …).
//! Comments are left out, so a doc link is no arrow; code under `#[cfg(test)]` counts.
//! The same paths, one folder at a time, tie its files and subfolders: no circle there either
//! (`api/chat.rs` → `api/flow.rs` → `api/chat.rs` would fail).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Circles known and owned elsewhere, each as its sorted members. Each entry must still
/// exist (a stale exception fails too).
const KNOWN_CIRCLES: &[&[&str]] = &[];

/// Arrows that still climb the layer table, each with what removes it; the test fails once
/// one is gone (then delete it here).
const KNOWN_CLIMBS: &[(&str, &str)] = &[];

type Graph = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

pub(crate) fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

pub(crate) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("src is readable")
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a file: `src/hub/engine/nats.rs` → `hub::engine::nats`,
/// `src/hub/mod.rs` → `hub`; None for the crate roots.
fn module_of(file: &Path) -> Option<Vec<String>> {
    let rel = file.strip_prefix(src()).ok()?;
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let last = parts.pop()?;
    let stem = last.strip_suffix(".rs")?.to_string();
    if parts.is_empty() && (stem == "lib" || stem == "main") {
        return None;
    }
    if stem != "mod" {
        parts.push(stem);
    }
    Some(parts)
}

/// The node a module path belongs to: its top-level module, or `hub::X` inside the hub.
fn node_of(path: &[String]) -> Option<String> {
    let top = path.first()?;
    if top == "hub" {
        if let Some(sub) = path.get(1) {
            let root = src().join("hub");
            if root.join(format!("{sub}.rs")).is_file() || root.join(sub).is_dir() {
                return Some(format!("hub::{sub}"));
            }
        }
    }
    if src().join(format!("{top}.rs")).is_file() || src().join(top).is_dir() {
        Some(top.clone())
    } else {
        None
    }
}

/// The text without `//` comments (doc comments included) and `/* */` blocks, string
/// literals kept as they are.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let (mut i, mut start) = (0, 0);
    let mut in_str = false;
    while i < b.len() {
        if in_str {
            match b[i] {
                b'\\' => i += 1,
                b'"' => in_str = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        if b[i] == b'"' && (i == 0 || b[i - 1] != b'\'') {
            in_str = true;
        } else if b[i..].starts_with(b"//") {
            out.push_str(&text[start..i]);
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            start = i;
            continue;
        } else if b[i..].starts_with(b"/*") {
            out.push_str(&text[start..i]);
            i = text[i..].find("*/").map_or(b.len(), |e| i + e + 2);
            start = i;
            continue;
        }
        i += 1;
    }
    out.push_str(&text[start.min(text.len())..]);
    out
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The first segments of each path in a `{a, b::c, d::{e, f}}` group at the start of `s`.
fn group_heads(s: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let (mut depth, mut expect) = (0usize, true);
    for (i, ch) in s.char_indices() {
        match ch {
            '{' => {
                depth += 1;
                if depth == 1 {
                    expect = true;
                }
            }
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    break;
                }
            }
            ',' if depth == 1 => expect = true,
            c if depth == 1 && expect && (c.is_ascii_alphabetic() || c == '_') => {
                heads.push(ident_at(&s[i..]).to_string());
                expect = false;
            }
            c if depth == 1 && !c.is_whitespace() => expect = false,
            _ => {}
        }
    }
    heads
}

/// Every module path (as segments from the crate root) a file's code names.
fn named_paths(code: &str, me: &[String]) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$') {
            continue; // `aicard_crate::`, `$crate::`
        }
        let rest = &code[at + "crate::".len()..];
        found.extend(expand(rest, Vec::new()));
    }
    // `super::…` (and `super::super::…`) from inside a folder module.
    for (at, _) in code.match_indices("super::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let mut base: Vec<String> = me.to_vec();
        let mut rest = &code[at..];
        while let Some(r) = rest.strip_prefix("super::") {
            base.pop();
            rest = r;
        }
        found.extend(expand(rest, base));
    }
    found
}

/// `a::b::{c, d}` after a prefix → the paths prefix::a::b::c, prefix::a::b::d (four
/// segments deep: enough for a node, and for a file two folders down).
fn expand(rest: &str, prefix: Vec<String>) -> Vec<Vec<String>> {
    let mut path = prefix;
    let mut rest = rest;
    loop {
        if rest.starts_with('{') {
            return group_heads(rest)
                .into_iter()
                .map(|h| {
                    let mut p = path.clone();
                    p.push(h);
                    p
                })
                .collect();
        }
        let id = ident_at(rest);
        if id.is_empty() {
            return vec![path];
        }
        path.push(id.to_string());
        rest = &rest[id.len()..];
        match rest.strip_prefix("::") {
            Some(r) if path.len() < 4 => rest = r,
            _ => return vec![path],
        }
    }
}

/// node → node it names → the files that name it.
fn graph() -> Graph {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut g = Graph::new();
    for file in files {
        let Some(me) = module_of(&file) else { continue };
        let Some(from) = node_of(&me) else { continue };
        let text = std::fs::read_to_string(&file).expect("a source file is readable");
        let entry = g.entry(from.clone()).or_default();
        for path in named_paths(&code_only(&text), &me) {
            if let Some(to) = node_of(&path).filter(|to| *to != from) {
                let shown = file.strip_prefix(src()).unwrap_or(&file).display();
                entry.entry(to).or_default().insert(format!("src/{shown}"));
            }
        }
    }
    g
}

/// Strongly connected components of two nodes or more (Tarjan), each sorted.
fn circles(g: &Graph) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let i = t.index.len();
        t.index.insert(v, i);
        t.low.insert(v, i);
        t.stack.push(v);
        t.on.insert(v);
        let next: Vec<&'a str> =
            t.g.get(v)
                .map(|m| m.keys().map(String::as_str).collect())
                .unwrap_or_default();
        for w in next {
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut scc = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                scc.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                t.out.push(scc);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

/// One loop through a circle, with the files that tie each step: `a → b (src/a.rs) → a`.
fn describe(g: &Graph, scc: &[String]) -> String {
    let inside: BTreeSet<&str> = scc.iter().map(String::as_str).collect();
    let start = scc[0].as_str();
    // Breadth-first from the start back to it, inside the circle.
    let mut prev: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    let mut end = None;
    'search: while let Some(v) = queue.pop_front() {
        for w in g.get(v).into_iter().flat_map(|m| m.keys()) {
            let w = w.as_str();
            if !inside.contains(w) {
                continue;
            }
            if w == start {
                end = Some(v);
                break 'search;
            }
            if !prev.contains_key(w) {
                prev.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    let mut path = vec![start];
    let mut v = end.unwrap_or(start);
    while v != start {
        path.push(v);
        v = prev[v];
    }
    path[1..].reverse();
    path.push(start);
    path.windows(2)
        .map(|w| {
            let files: Vec<&str> = g[w[0]][w[1]].iter().map(String::as_str).collect();
            format!("{} → {} ({})", w[0], w[1], files.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[test]
fn no_module_circles() {
    let g = graph();
    assert!(g.len() > 10, "the source was read: {:?}", g.keys());
    let found = circles(&g);
    let known: BTreeSet<Vec<String>> = KNOWN_CIRCLES
        .iter()
        .map(|c| c.iter().map(|s| s.to_string()).collect())
        .collect();
    let new: Vec<String> = found
        .iter()
        .filter(|c| !known.contains(*c))
        .map(|c| format!("circle {{{}}}: {}", c.join(", "), describe(&g, c)))
        .collect();
    assert!(
        new.is_empty(),
        "模块之间有环 / modules that name each other in a circle:\n{}",
        new.join("\n")
    );
    let stale: Vec<&Vec<String>> = known.iter().filter(|k| !found.contains(k)).collect();
    assert!(
        stale.is_empty(),
        "已不存在的例外 / known circles that are gone, delete them from KNOWN_CIRCLES: {stale:?}"
    );
}

/// Inside each folder, its children (files and folders) as nodes: child → child it names →
/// the files that name it. The folder's own `mod.rs` is left out: it declares its children,
/// and they may use what it defines.
fn sibling_graphs() -> BTreeMap<String, Graph> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut out: BTreeMap<String, Graph> = BTreeMap::new();
    for file in files {
        let Some(me) = module_of(&file) else { continue };
        let text = std::fs::read_to_string(&file).expect("a source file is readable");
        for path in named_paths(&code_only(&text), &me) {
            let k = me.iter().zip(&path).take_while(|(a, b)| a == b).count();
            if k >= me.len() || k >= path.len() {
                continue; // the folder's mod.rs, or a path into the file itself
            }
            let folder = src().join(me[..k].join("/"));
            let to = &path[k];
            if !(folder.join(format!("{to}.rs")).is_file() || folder.join(to).is_dir()) {
                continue; // an item the folder's mod.rs defines
            }
            let shown = file.strip_prefix(src()).unwrap_or(&file).display();
            out.entry(me[..k].join("::"))
                .or_default()
                .entry(me[k].clone())
                .or_default()
                .entry(to.clone())
                .or_default()
                .insert(format!("src/{shown}"));
        }
    }
    out
}

#[test]
fn no_file_circles_inside_a_folder() {
    let graphs = sibling_graphs();
    assert!(
        graphs.contains_key("api") && graphs.contains_key("commands"),
        "the folders were read: {:?}",
        graphs.keys()
    );
    let mut found = Vec::new();
    for (folder, g) in &graphs {
        for c in circles(g) {
            let at = if folder.is_empty() { "crate" } else { folder };
            found.push(format!("{at}: {{{}}}: {}", c.join(", "), describe(g, &c)));
        }
    }
    assert!(
        found.is_empty(),
        "同一目录下的文件互相引用成环 / files of one folder that name each other in a circle:\n{}",
        found.join("\n")
    );
}

/// The layer table of docs/ARCHITECTURE.md: the fenced block after the line holding
/// `<!-- layers -->`, one layer a line from the top down, `NAME  module, module  — words`.
fn layers() -> Vec<(String, Vec<String>)> {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/ARCHITECTURE.md"))
            .expect("docs/ARCHITECTURE.md is readable");
    let after = doc
        .split_once("<!-- layers -->")
        .expect("ARCHITECTURE.md marks its layer table with <!-- layers -->")
        .1;
    let block = after
        .split_once("```")
        .and_then(|(_, b)| b.split_once('\n'))
        .and_then(|(_, b)| b.split_once("```"))
        .expect("a fenced block follows the marker")
        .0;
    block
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let l = l.split('—').next().unwrap_or(l);
            let (name, mods) = l
                .trim()
                .split_once(char::is_whitespace)
                .unwrap_or((l.trim(), ""));
            let mods = mods
                .split(',')
                .map(str::trim)
                .filter(|m| !m.is_empty())
                .map(str::to_string)
                .collect();
            (name.to_string(), mods)
        })
        .collect()
}

#[test]
fn each_layer_names_only_layers_below_it() {
    let table = layers();
    assert!(table.len() > 3, "the layer table was read: {table:?}");
    // A node's layer: its own entry, else its top-level module's (`hub::tasks` → `hub`).
    let n = table.len();
    let rank: BTreeMap<&str, (usize, &str)> = table
        .iter()
        .enumerate()
        .flat_map(|(i, (name, mods))| {
            mods.iter()
                .map(move |m| (m.as_str(), (n - i, name.as_str())))
        })
        .collect();
    let layer_of = |node: &str| {
        rank.get(node)
            .or_else(|| rank.get(node.split("::").next().unwrap_or(node)))
            .copied()
    };
    let g = graph();
    let mut wrong = Vec::new();
    let mut climbs = BTreeSet::new();
    for (from, tos) in &g {
        let Some((fl, fname)) = layer_of(from) else {
            wrong.push(format!("{from}: in no layer of the table"));
            continue;
        };
        for (to, files) in tos {
            let Some((tl, tname)) = layer_of(to) else {
                continue; // reported as its own row
            };
            if tl >= fl && fname != tname {
                if KNOWN_CLIMBS.contains(&(from.as_str(), to.as_str())) {
                    climbs.insert((from.as_str(), to.as_str()));
                    continue;
                }
                let files: Vec<&str> = files.iter().map(String::as_str).collect();
                wrong.push(format!(
                    "{from} ({fname}) names {to} ({tname}), not below it: {}",
                    files.join(", ")
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "层次被违反 / the layers of docs/ARCHITECTURE.md are not kept:\n{}",
        wrong.join("\n")
    );
    let stale: Vec<_> = KNOWN_CLIMBS
        .iter()
        .filter(|c| !climbs.contains(*c))
        .collect();
    assert!(
        stale.is_empty(),
        "已不存在的例外 / known climbs that are gone, delete them from KNOWN_CLIMBS: {stale:?}"
    );
}

/// The agent loop's files: each says what it is for, none is over 1,200 lines, and inside
/// the folder only `session` names a sibling (`deliver`'s panel frame): the actor, the
/// journal, the results message and an agent's memory are each one file that any of them
/// may call through `Loops`, never a file circle.
#[test]
fn the_agent_loop_is_a_folder_of_small_modules_that_name_each_other_one_way() {
    let dir = src().join("agent_loop");
    assert!(
        !src().join("agent_loop.rs").exists(),
        "src/agent_loop.rs came back: the loop is the folder src/agent_loop/"
    );
    for name in ["mod", "actor", "session", "deliver", "journal", "memory"] {
        let file = dir.join(format!("{name}.rs"));
        let text = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("{} is readable: {e}", file.display()));
        assert!(
            text.starts_with("//!"),
            "src/agent_loop/{name}.rs starts with its `//!` doc"
        );
        let lines = text.lines().count();
        assert!(
            lines <= 1_200,
            "src/agent_loop/{name}.rs has {lines} lines (at most 1,200)"
        );
    }
    let graphs = sibling_graphs();
    let g = graphs.get("agent_loop").cloned().unwrap_or_default();
    let arrows: BTreeSet<(String, String)> = g
        .iter()
        .flat_map(|(from, tos)| tos.keys().map(move |to| (from.clone(), to.clone())))
        .collect();
    let want: BTreeSet<(String, String)> = [("session", "deliver")]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(
        arrows, want,
        "the files of src/agent_loop/ that name a sibling"
    );
}

/// What each of these strings does happens in one file of the loop only: the journal of a
/// session's command is written and read in `journal`, the results message is built in
/// `deliver`, and the loop's inputs are consumed in `actor`. Intake (`control`) only sends
/// `TurnEvent`s.
#[test]
fn the_loop_actor_alone_journals_replays_and_builds_the_results_message() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let owners = [
        ("agent_store::journal_command(", "agent_loop/journal.rs"),
        ("agent_store::journaled_command(", "agent_loop/journal.rs"),
        ("fn handle(&self, ev: ActorInput)", "agent_loop/actor.rs"),
    ];
    for (needle, owner) in owners {
        let at: Vec<String> = files
            .iter()
            .filter(|f| std::fs::read_to_string(f).is_ok_and(|t| code_only(&t).contains(needle)))
            .map(|f| f.strip_prefix(src()).unwrap_or(f).display().to_string())
            .collect();
        assert_eq!(
            at,
            vec![owner.to_string()],
            "`{needle}` is written only in {owner}"
        );
    }
    let loop_delivers: Vec<String> = files
        .iter()
        .filter(|f| f.starts_with(src().join("agent_loop")))
        .filter(|f| {
            std::fs::read_to_string(f).is_ok_and(|t| code_only(&t).contains("ServerFrame::Deliver"))
        })
        .map(|f| f.strip_prefix(src()).unwrap_or(f).display().to_string())
        .collect();
    assert_eq!(
        loop_delivers,
        vec!["agent_loop/deliver.rs".to_string()],
        "the loop builds its `deliver` frame in one place"
    );
    let intake = std::fs::read_to_string(src().join("control/intake.rs")).expect("intake");
    assert!(
        code_only(&intake).contains("TurnEvent::CommandFound"),
        "intake hands commands to the loop as TurnEvents"
    );
}

/// Back-references and hooks set after construction that the wiring still has, each with
/// why it stays (docs/ARCHITECTURE.md, "Wiring"); the test fails on a new one and on one
/// that is gone (then delete it here). None is left: the frame handler is built last and
/// handed to `Hub::serve`, the MCP door's skill tools to `McpState::new`.
const KNOWN_LATE: &[(&str, &str, &str)] = &[];

/// The composition root and the services it wires hold no `Weak` back-reference and set no
/// hook after construction, but the known ones above.
#[test]
fn the_wiring_holds_no_back_references() {
    let wiring = [
        "app.rs",
        "runner/mod.rs",
        "runner/pick.rs",
        "events.rs",
        "agent_loop/mod.rs",
        "agent_loop/actor.rs",
        "agent_loop/session.rs",
        "agent_loop/deliver.rs",
        "agent_loop/journal.rs",
        "agent_loop/memory.rs",
        "control/intake.rs",
        "control/primer.rs",
        "api/admission.rs",
        "hub/mod.rs",
        "hub/cluster.rs",
        "hub/tasks.rs",
        "hub/ws.rs",
        "hub/sse.rs",
        "mcp/mod.rs",
    ];
    let mut found = BTreeSet::new();
    for file in wiring {
        let text = std::fs::read_to_string(src().join(file)).expect("a wiring file is readable");
        let code = code_only(&text);
        for needle in [
            "Weak<",
            "Weak::",
            "new_cyclic",
            "set_hooks(",
            "set_skills(",
            "set_host(",
            "set_prompt_hook(",
            "set_usable(",
            "set_timing(",
            "set_outbound(",
            // A slot for a trait object filled in later (the hub's hooks, the MCP door's
            // skills were).
            "OnceLock<Arc<dyn",
            "RwLock<Option<Arc<dyn",
        ] {
            if code.contains(needle) {
                found.insert((file.to_string(), needle.to_string()));
            }
        }
    }
    let known: BTreeSet<(String, String)> = KNOWN_LATE
        .iter()
        .map(|(f, n, _)| (f.to_string(), n.to_string()))
        .collect();
    let new: Vec<_> = found.difference(&known).collect();
    assert!(
        new.is_empty(),
        "后设的钩子或弱引用 / back-references or late setters in the wiring: {new:?}"
    );
    let stale: Vec<_> = known.difference(&found).collect();
    assert!(
        stale.is_empty(),
        "已不存在的例外 / known late wiring that is gone, delete it from KNOWN_LATE: {stale:?}"
    );
}
