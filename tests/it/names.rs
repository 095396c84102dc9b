//! Names that explain themselves (docs/ARCHITECTURE.md "Names"): every module-level type in
//! `src/` has a name no other module uses, and a binding called `hub` is a `Hub`.
//!
//! Read from the source like `layers.rs`: a `struct`, `enum`, `trait` or `type` written at the
//! start of a line is a module-level type (types inside a function or a test module are
//! indented and stay local). Associated types (`type Target = …` in an impl) are indented too.

use std::collections::BTreeMap;

use super::layers::{rust_files, src};

/// Test files are modules of their own too, but only code the product runs is held to this.
fn is_test_file(rel: &str) -> bool {
    rel.ends_with("/tests.rs") || rel.ends_with("_tests.rs") || rel.contains("/tests/")
}

/// The name a module-level declaration gives, if the line is one.
fn declared_type(line: &str) -> Option<&str> {
    let mut rest = line;
    if let Some(r) = rest.strip_prefix("pub") {
        rest = r;
        if rest.starts_with('(') {
            rest = &rest[rest.find(')')? + 1..];
        }
        rest = rest.strip_prefix(' ')?;
    }
    let rest = ["struct ", "enum ", "trait ", "type "]
        .iter()
        .find_map(|kw| rest.strip_prefix(kw))?;
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    Some(&rest[..end]).filter(|n| !n.is_empty())
}

fn sources() -> Vec<(String, String)> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files
        .into_iter()
        .map(|f| {
            let rel = f
                .strip_prefix(env!("CARGO_MANIFEST_DIR"))
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            (rel, std::fs::read_to_string(&f).expect("readable"))
        })
        .filter(|(rel, _)| !is_test_file(rel))
        .collect()
}

#[test]
fn every_module_level_type_has_its_own_name() {
    let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (rel, text) in sources() {
        for (i, line) in text.lines().enumerate() {
            if let Some(name) = declared_type(line) {
                seen.entry(name.to_string())
                    .or_default()
                    .push(format!("{rel}:{}", i + 1));
            }
        }
    }
    assert!(seen.len() > 100, "the scan found only {} types", seen.len());
    let twice: Vec<String> = seen
        .iter()
        .filter(|(_, at)| at.len() > 1)
        .map(|(name, at)| format!("{name}: {}", at.join(", ")))
        .collect();
    assert!(
        twice.is_empty(),
        "one name per type across the crate; these are declared more than once:\n{}",
        twice.join("\n")
    );
}

#[test]
fn a_binding_called_hub_is_a_hub() {
    let mut wrong = Vec::new();
    let mut checked = 0;
    for (rel, text) in sources() {
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for (at, _) in code.match_indices("hub: ") {
                let before = &code[..at];
                // `self.hub: …` never occurs; `x.hub` and `crate::hub` are not bindings.
                if before
                    .ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '.' || c == ':')
                {
                    continue;
                }
                let ty = code[at + 5..].trim_start_matches(['&', '\'', 'a', ' ']);
                // A field or parameter with a type (`hub: &Hub`, `hub: Arc<Hub>`); a struct
                // literal (`hub: x.clone()`) starts with a lower-case value.
                let Some(first) = ty.chars().next() else {
                    continue;
                };
                if !first.is_ascii_uppercase() {
                    continue;
                }
                checked += 1;
                let ty = ty.strip_prefix("Arc<").unwrap_or(ty);
                let ty = ty.strip_prefix("crate::hub::").unwrap_or(ty);
                let name: String = ty
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if name != "Hub" {
                    wrong.push(format!("{rel}:{}: hub: {name}", i + 1));
                }
            }
            for (at, _) in code.match_indices("State(hub): State<Arc<") {
                checked += 1;
                let ty = &code[at + "State(hub): State<Arc<".len()..];
                if !ty.starts_with("Hub>") {
                    wrong.push(format!("{rel}:{}: State(hub) of {ty}", i + 1));
                }
            }
        }
    }
    assert!(
        checked > 10,
        "the scan found only {checked} typed `hub` bindings"
    );
    assert!(
        wrong.is_empty(),
        "`hub` names a Hub only (a door is `door`, the command host `control`, …):\n{}",
        wrong.join("\n")
    );
}

/// Every HTTP client is made by `aicard::http_client` (docs/ARCHITECTURE.md "Invariants"): one
/// TLS set-up, and no client built by reqwest alone, which panics when the process has no TLS
/// provider installed yet (a test run on its own would).
#[test]
fn every_http_client_comes_from_http_client() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "tests", "benches"] {
        rust_files(&root.join(dir), &mut files);
    }
    let made_alone = [
        "reqwest::Client::new(",
        "reqwest::Client::builder(",
        "reqwest::Client::default(",
        "reqwest::ClientBuilder::new(",
        "reqwest::get(",
    ];
    let this = file!().rsplit('/').next().unwrap_or_default();
    let mut wrong = Vec::new();
    for path in &files {
        let rel = path
            .strip_prefix(root)
            .unwrap_or(path)
            .display()
            .to_string();
        if rel == "src/http_client.rs" || rel == format!("tests/it/{this}") {
            continue;
        }
        let text = std::fs::read_to_string(path).expect("readable");
        for (i, line) in text.lines().enumerate() {
            if let Some(call) = made_alone.iter().find(|c| line.contains(*c)) {
                wrong.push(format!("{rel}:{}: {call}", i + 1));
            }
        }
    }
    assert!(
        files.len() > 100,
        "the scan read only {} files",
        files.len()
    );
    assert!(
        wrong.is_empty(),
        "an HTTP client is made by aicard::http_client::builder()/plain():\n{}",
        wrong.join("\n")
    );
}
