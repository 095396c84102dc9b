//! Semantic validation of a parsed flow: ids, dependencies, cycles, targets, templates and
//! variables. Every problem is reported, each at the line and column of the node or field
//! it is about.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::graph::Dag;
use super::model::{fallback_node, Aggregate, Flow, ForEachItems, Node, FALLBACK_VARS};
use super::template::{self, Mode, Ref};
use super::yaml::{Located, Pos};

/// Variables every template may read besides inputs and upstream outputs.
pub const BUILTIN_VARS: &[&str] = &["RESULT", "run_id", "flow_name"];

/// The variables a command line sets for itself: a `for NAME in` loop variable, a `set NAME =`
/// or `$NAME =` target. A command node reading them needs no input or upstream node.
pub fn command_binds(text: &str) -> Vec<&str> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut bound = Vec::new();
    for w in words.windows(3) {
        match w {
            ["for", name, "in"] | ["set", "global", name] | ["set", name, "="] => bound.push(*name),
            [name, "=", _] if name.starts_with('$') => bound.push(&name[1..]),
            _ => {}
        }
    }
    bound
}

/// Roles a `role:` target may name.
pub const ROLES: &[&str] = &["worker", "foreman", "master"];

/// One semantic problem and where it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// Where in the file.
    pub pos: Pos,
    /// What is wrong (English, with the Chinese category first).
    pub message: String,
}

/// Where things are in the file, for messages; falls back to the enclosing node.
struct Positions<'a> {
    tree: &'a Located,
}

impl Positions<'_> {
    fn node(&self, i: usize) -> Option<&Located> {
        self.tree.get("nodes").and_then(|n| n.items().get(i))
    }

    /// The position of node `i` (its mapping), or of `nodes:` if absent.
    fn node_pos(&self, i: usize) -> Pos {
        // Only the node a fallback became has no mapping of its own: point at the fallback.
        self.node(i).map_or_else(
            || {
                self.tree
                    .get("error_handling")
                    .and_then(|e| e.get("fallback"))
                    .map_or(self.top("nodes"), |f| f.pos)
            },
            |n| n.pos,
        )
    }

    /// The value of `field` in node `i`, falling back to the node.
    fn field(&self, i: usize, field: &str) -> Pos {
        self.node(i)
            .and_then(|n| field_value(n, field))
            .map_or(self.node_pos(i), |v| v.pos)
    }

    /// The key `field` in node `i`, falling back to the node.
    fn key(&self, i: usize, field: &str) -> Pos {
        self.node(i)
            .and_then(|n| {
                n.entry(field)
                    .or_else(|| (field == "depends_on").then(|| n.entry("needs")).flatten())
            })
            .map_or(self.node_pos(i), |(k, _)| k.pos)
    }

    /// The `k`-th entry of a string-or-list field of node `i`.
    fn list_item(&self, i: usize, field: &str, k: usize) -> Pos {
        match self.node(i).and_then(|n| field_value(n, field)) {
            Some(v) if v.items().is_empty() => v.pos,
            Some(v) => v.items().get(k).map_or(v.pos, |item| item.pos),
            None => self.node_pos(i),
        }
    }

    /// A top-level key's value position.
    fn top(&self, key: &str) -> Pos {
        self.tree
            .get(key)
            .map_or(Pos { line: 1, col: 1 }, |v| v.pos)
    }

    /// The key of `key` inside a top-level mapping `section`.
    fn top_key(&self, section: &str, key: &str) -> Pos {
        self.tree
            .get(section)
            .and_then(|s| s.entry(key))
            .map_or(self.top(section), |(k, _)| k.pos)
    }
}

/// The value of `field`, accepting `needs` for `depends_on`.
fn field_value<'a>(node: &'a Located, field: &str) -> Option<&'a Located> {
    node.get(field).or_else(|| match field {
        "depends_on" => node.get("needs"),
        _ => None,
    })
}

/// True for `[A-Za-z0-9_-]+`.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Checks everything about `flow` beyond its shape; `tree` gives positions.
pub fn validate(flow: &Flow, tree: &Located) -> Vec<Problem> {
    let mut v = Validator {
        flow,
        at: Positions { tree },
        dag: Dag::build(flow),
        problems: Vec::new(),
    };
    v.flow_level();
    v.ids();
    v.dependencies();
    v.cycles();
    v.fallback();
    for (i, node) in flow.nodes.iter().enumerate() {
        v.body(i, node);
        v.targets(i, node);
    }
    if v.dag.is_acyclic() {
        v.variables();
    }
    v.problems.sort_by_key(|p| p.pos);
    v.problems
}

struct Validator<'a> {
    flow: &'a Flow,
    at: Positions<'a>,
    dag: Dag,
    problems: Vec<Problem>,
}

impl Validator<'_> {
    fn report(&mut self, pos: Pos, message: String) {
        self.problems.push(Problem { pos, message });
    }

    fn flow_level(&mut self) {
        let name = self.flow.name.trim();
        if name.is_empty()
            || name
                .chars()
                .any(|c| c.is_whitespace() || "?<>!".contains(c))
        {
            self.report(
                self.at.top("name"),
                format!(
                    "流程名无效 / invalid flow name `{}`: use no spaces and none of ?<>!",
                    self.flow.name
                ),
            );
        }
        if self.flow.nodes.is_empty() {
            self.report(
                self.at.top("nodes"),
                "流程为空 / the flow has no nodes".into(),
            );
        }
        for key in self.flow.inputs.keys() {
            if !valid_id(key) {
                let pos = self.at.top_key("inputs", key);
                self.report(
                    pos,
                    format!("输入名无效 / invalid input name `{key}`: use [A-Za-z0-9_-]"),
                );
            }
        }
        if let Some(on) = &self.flow.on {
            if !crate::events::valid_topic(&on.event) {
                let pos = self.at.top_key("on", "event");
                self.report(
                    pos,
                    format!(
                        "事件名无效 / invalid event topic `{}` in on.event: letters, digits, \
                         `_ . - : /`, up to {} characters, or `*`",
                        on.event,
                        crate::events::MAX_TOPIC
                    ),
                );
            }
            if let Some(cond) = &on.cond {
                let converted = template::convert(cond, Mode::Expression);
                if let Err(e) = template::environment().compile_expression(&converted.source) {
                    let pos = self.at.top_key("on", "where");
                    self.report(
                        pos,
                        format!(
                            "条件无效 / on.where does not parse: {}",
                            template::describe(&e)
                        ),
                    );
                }
            }
        }
        for key in self.flow.parallel_outputs.keys() {
            if !self.dag.index.contains_key(key) {
                let pos = self.at.top_key("parallel_outputs", key);
                self.report(
                    pos,
                    format!("未知节点 / parallel_outputs names unknown node `{key}`"),
                );
            }
        }
        if let Some(limits) = &self.flow.limits {
            if limits.max_parallel == Some(0) {
                let pos = self.at.top("limits");
                self.report(
                    pos,
                    "限制无效 / limits.max_parallel must be at least 1".into(),
                );
            }
            for (site, n) in &limits.pools {
                if *n == 0 {
                    let pos = self.at.top("limits");
                    self.report(
                        pos,
                        format!("限制无效 / pool `{site}` must allow at least 1 tab"),
                    );
                }
            }
        }
    }

    /// `error_handling.fallback` names a node that only a failure starts: it waits for no
    /// node and no node waits for it.
    fn fallback(&mut self) {
        let Some(id) = fallback_node(self.flow) else {
            return;
        };
        let pos = self
            .at
            .tree
            .get("error_handling")
            .and_then(|e| e.get("fallback"))
            .map_or(self.at.top("error_handling"), |f| f.pos);
        let Some(&h) = self.dag.index.get(id) else {
            let ids: Vec<String> = self.flow.nodes.iter().map(|n| n.id.clone()).collect();
            let hint = super::yaml::closest(id, &ids)
                .map(|s| format!(", did you mean `{s}`?"))
                .unwrap_or_default();
            self.report(
                pos,
                format!("未知节点 / error_handling.fallback names unknown node `{id}`{hint}"),
            );
            return;
        };
        if !self.flow.nodes[h].depends_on.is_empty() {
            self.report(
                self.at.key(h, "depends_on"),
                format!(
                    "失败处理节点 / node `{id}` is the fallback: it runs when another node fails, so it has no depends_on"
                ),
            );
        }
        for (i, node) in self.flow.nodes.iter().enumerate() {
            if node.depends_on.iter().any(|d| d == id) {
                self.report(
                    self.at.key(i, "depends_on"),
                    format!(
                        "失败处理节点 / node `{}` depends on the fallback `{id}`, which runs only when a node fails; depend on another node",
                        node.id
                    ),
                );
            }
        }
    }

    fn ids(&mut self) {
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for (i, node) in self.flow.nodes.iter().enumerate() {
            if !valid_id(&node.id) {
                self.report(
                    self.at.field(i, "id"),
                    format!(
                        "节点 id 无效 / invalid node id `{}`: use only A-Z a-z 0-9 _ -",
                        node.id
                    ),
                );
            }
            if let Some(first) = seen.insert(&node.id, i) {
                let line = self.at.field(first, "id").line;
                self.report(
                    self.at.field(i, "id"),
                    format!(
                        "重复的节点 id / duplicate node id `{}` (first defined on line {line})",
                        node.id
                    ),
                );
                seen.insert(&self.flow.nodes[first].id, first);
            }
        }
    }

    fn dependencies(&mut self) {
        let ids: Vec<String> = self.flow.nodes.iter().map(|n| n.id.clone()).collect();
        for (i, node) in self.flow.nodes.iter().enumerate() {
            for (k, dep) in node.depends_on.iter().enumerate() {
                let pos = self.at.list_item(i, "depends_on", k);
                if dep == &node.id {
                    self.report(
                        pos,
                        format!(
                            "循环依赖 / cycle: {dep} -> {dep} (a node cannot depend on itself)"
                        ),
                    );
                } else if !self.dag.index.contains_key(dep) {
                    let hint = super::yaml::closest(dep, &ids)
                        .map(|s| format!(", did you mean `{s}`?"))
                        .unwrap_or_default();
                    self.report(
                        pos,
                        format!(
                            "未知依赖 / node `{}` depends on unknown node `{dep}`{hint}",
                            node.id
                        ),
                    );
                }
            }
        }
    }

    fn cycles(&mut self) {
        for cycle in self.dag.cycles() {
            if cycle.len() <= 2 {
                continue; // a self-dependency, reported by `dependencies`
            }
            let names: Vec<&str> = cycle
                .iter()
                .map(|&i| self.flow.nodes[i].id.as_str())
                .collect();
            let first = cycle[0];
            let pos = self.at.key(
                first,
                if self.flow.nodes[first].depends_on.is_empty() {
                    "id"
                } else {
                    "depends_on"
                },
            );
            self.report(pos, format!("循环依赖 / cycle: {}", names.join(" -> ")));
        }
    }

    fn prompt_sources(&self, node: &Node) -> usize {
        usize::from(node.prompt.is_some())
            + usize::from(
                node.parallel_outputs.is_some()
                    || self.flow.parallel_outputs.contains_key(&node.id),
            )
    }

    /// `files:` goes with a prompt, and no name leaves the files folder.
    fn files(&mut self, i: usize, node: &Node) {
        if node.files.is_empty() {
            return;
        }
        if self.prompt_sources(node) == 0 {
            self.report(
                self.at.key(i, "files"),
                format!(
                    "files 需要 prompt / node `{}`: `files:` are attached to the node's prompt; it \
                     has none",
                    node.id
                ),
            );
        }
        for f in node.files.iter() {
            if let Some(why) = file_name_problem(f) {
                self.report(
                    self.at.field(i, "files"),
                    format!(
                        "文件名不安全 / node `{}`: file `{f}` is refused: {why} (names are \
                         relative to the files folder)",
                        node.id
                    ),
                );
            }
        }
    }

    fn body(&mut self, i: usize, node: &Node) {
        let prompts = self.prompt_sources(node);
        match (prompts, node.command.is_some()) {
            (0, false) => self.report(
                self.at.node_pos(i),
                format!(
                    "节点无内容 / node `{}` has neither `prompt` nor `command`",
                    node.id
                ),
            ),
            (p, true) if p > 0 => self.report(
                self.at.key(i, "command"),
                format!(
                    "节点内容冲突 / node `{}` has both a prompt and a `command`; use two nodes",
                    node.id
                ),
            ),
            (2.., false) => self.report(
                self.at.key(i, "prompt"),
                format!(
                    "节点内容冲突 / node `{}` has both `prompt` and `parallel_outputs`",
                    node.id
                ),
            ),
            _ => {}
        }
        self.files(i, node);
        if let Some(on) = &node.on {
            let name_ok = !on.is_empty()
                && on.len() <= 64
                && on
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
            if node.command.is_none() {
                self.report(
                    self.at.key(i, "on"),
                    format!(
                        "on 需要 command / node `{}`: `on: NODE` runs the node's `command` on \
                         that node; it has no `command`",
                        node.id
                    ),
                );
            } else if !name_ok {
                self.report(
                    self.at.field(i, "on"),
                    format!(
                        "节点名无效 / node `{}`: `on: {on}` is not a node name ([A-Za-z0-9_-], \
                         the node's --node)",
                        node.id
                    ),
                );
            }
        }
        if let Some(command) = &node.command {
            if command.contains("{{") || command.contains("{%") {
                self.report(
                    self.at.field(i, "command"),
                    format!(
                        "命令不能用模板 / the command of node `{}` uses {{{{ }}}}; commands take $variables, which the executor passes as quoted arguments",
                        node.id
                    ),
                );
            }
        }
        if node.command.is_some() && !node.to.is_empty() {
            self.report(
                self.at.key(i, "to"),
                format!(
                    "命令节点 / node `{}` is a hub-side command; `to` does not apply",
                    node.id
                ),
            );
        }
        if let Some(var) = &node.output_var {
            if !valid_id(var) {
                self.report(
                    self.at.field(i, "output_var"),
                    format!("变量名无效 / invalid output_var `{var}`: use [A-Za-z0-9_-]"),
                );
            }
        }
        if let Some(fe) = &node.for_each {
            if !valid_id(&fe.var) {
                self.report(
                    self.at.key(i, "for_each"),
                    format!("变量名无效 / invalid for_each `as` name `{}`", fe.var),
                );
            }
            if fe.max_parallel == Some(0) {
                self.report(
                    self.at.key(i, "for_each"),
                    "并行数无效 / for_each.max_parallel must be at least 1".into(),
                );
            }
        }
        let judge = node.aggregate == Some(Aggregate::Judge);
        if judge && node.judge.is_none() {
            self.report(
                self.at.key(i, "aggregate"),
                format!(
                    "缺少裁判 / node `{}` uses `aggregate: judge` but names no `judge:` target",
                    node.id
                ),
            );
        }
        if !judge && node.judge.is_some() {
            self.report(
                self.at.key(i, "judge"),
                format!(
                    "多余的裁判 / node `{}` has `judge:` but its aggregate is not `judge`",
                    node.id
                ),
            );
        }
        for retry in [&node.retry, &self.flow.defaults.retry]
            .into_iter()
            .flatten()
        {
            if let Some(b) = &retry.backoff {
                if !(b.factor.is_finite() && b.factor >= 1.0) {
                    self.report(
                        self.at.key(i, "retry"),
                        "退避无效 / backoff factor must be at least 1".into(),
                    );
                }
            }
        }
    }

    fn targets(&mut self, i: usize, node: &Node) {
        for (k, target) in node.to.iter().enumerate() {
            if let Some(message) = target_problem(target) {
                self.report(self.at.list_item(i, "to", k), message);
            }
        }
        let po = node
            .parallel_outputs
            .iter()
            .chain(self.flow.parallel_outputs.get(&node.id));
        for map in po {
            for (target, _) in &map.0 {
                if let Some(message) = target_problem(target) {
                    self.report(self.at.key(i, "parallel_outputs"), message);
                }
            }
        }
        if let Some(judge) = &node.judge {
            if let Some(message) = target_problem(judge) {
                self.report(self.at.field(i, "judge"), message);
            }
        }
        let to_master = node.to.iter().any(|t| t == "master" || t == "role:master");
        match node.workers {
            Some(0) => self.report(
                self.at.field(i, "workers"),
                format!("目标永远无法匹配 / node `{}` asks for `workers: 0`; it could never run", node.id),
            ),
            Some(n) if n > 1 && to_master => self.report(
                self.at.field(i, "workers"),
                format!("目标永远无法匹配 / there is one master; `workers: {n}` cannot go `to: master`"),
            ),
            Some(_) if node.to.len() > 1 => self.report(
                self.at.field(i, "workers"),
                "目标冲突 / `workers: N` picks N tabs from one target; give `to` a single site or role".into(),
            ),
            _ => {}
        }
        if to_master
            && (node.to.len() > 1 || node.for_each.is_some() || node.parallel_outputs.is_some())
        {
            self.report(
                self.at.key(i, "to"),
                "目标冲突 / a `to: master` node delivers one text to the master; it cannot fan out"
                    .into(),
            );
        }
    }

    fn variables(&mut self) {
        let env = template::environment();
        let output_vars: HashMap<&str, usize> = self
            .flow
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.output_var.as_deref().map(|v| (v, i)))
            .collect();
        let mut seen_vars: HashSet<&str> = HashSet::new();
        for (i, node) in self.flow.nodes.iter().enumerate() {
            if let Some(var) = node.output_var.as_deref() {
                if !seen_vars.insert(var) || self.flow.inputs.contains_key(var) {
                    self.report(
                        self.at.field(i, "output_var"),
                        format!(
                            "变量重名 / `{var}` is already an input or another node's output_var"
                        ),
                    );
                }
            }
            for (k, var) in node.input_var.iter().enumerate() {
                if let Some(message) =
                    self.unknown_ref(i, node, &Ref::Var(var.clone()), &output_vars)
                {
                    self.report(self.at.list_item(i, "input_var", k), message);
                }
            }
            for (field, text, mode) in texts(self.flow, node) {
                let converted = template::convert(text, mode);
                let refs = match template::references(&env, &converted, mode) {
                    Ok(refs) => refs,
                    Err(e) => {
                        let message = format!(
                            "模板错误 / `{field}` of node `{}` does not compile: {e}",
                            node.id
                        );
                        self.report(self.at.field(i, field), message);
                        continue;
                    }
                };
                for r in refs {
                    if let Some(message) = self.unknown_ref(i, node, &r, &output_vars) {
                        self.report(self.at.field(i, field), message);
                    }
                }
                for head in template::bare_output_reads(&env, &converted, mode) {
                    if self.dag.index.contains_key(head.as_str()) {
                        self.report(
                            self.at.field(i, field),
                            format!(
                                "写法错误 / `{head}.output` in node `{}` renders empty: write `{{{{ nodes.{head}.output }}}}` or `${{{head}.output}}`",
                                node.id
                            ),
                        );
                    }
                }
            }
        }
    }

    /// Why `r` is not available to node `i`, if it is not.
    fn unknown_ref(
        &self,
        i: usize,
        node: &Node,
        r: &Ref,
        output_vars: &HashMap<&str, usize>,
    ) -> Option<String> {
        let name = r.name();
        let handler = fallback_node(self.flow) == Some(node.id.as_str());
        let provider = match r {
            Ref::Node(id, _) => match self.dag.index.get(id) {
                Some(&p) => p,
                None => {
                    return Some(format!(
                        "未知变量 / `{}` reads `{id}`, which is not a node",
                        node.id
                    ))
                }
            },
            Ref::Var(_) => {
                let own = node.for_each.as_ref().is_some_and(|f| f.var == name);
                if own || BUILTIN_VARS.contains(&name) || self.flow.inputs.contains_key(name) {
                    return None;
                }
                if node
                    .command
                    .as_deref()
                    .is_some_and(|c| command_binds(c).contains(&name))
                {
                    return None;
                }
                if name == "exit_code" && node.command.is_some() {
                    // Set by the command's own chain (`check.py -> if $exit_code != 0 …`).
                    return None;
                }
                if FALLBACK_VARS.contains(&name) {
                    if handler {
                        return None;
                    }
                    return Some(format!(
                        "未知变量 / `${name}` in node `{}` is only set in the fallback node (error_handling.fallback)",
                        node.id
                    ));
                }
                match self.dag.index.get(name).or_else(|| output_vars.get(name)) {
                    Some(&p) => p,
                    None => {
                        return Some(format!(
                            "未知变量 / variable `{name}` in node `{}` is not an input and no upstream node provides it",
                            node.id
                        ))
                    }
                }
            }
        };
        // The fallback may run after any node: it reads every node (what has not run is empty).
        if handler || self.is_upstream(provider, i) {
            return None;
        }
        Some(format!(
            "未知变量 / node `{}` reads `{name}` from node `{}`, which is not upstream of it (add it to depends_on)",
            node.id, self.flow.nodes[provider].id
        ))
    }

    fn is_upstream(&self, candidate: usize, of: usize) -> bool {
        if self.dag.deps[of].contains(&candidate) {
            return true;
        }
        let mut seen: BTreeSet<usize> = BTreeSet::new();
        let mut stack = self.dag.deps[of].clone();
        while let Some(n) = stack.pop() {
            if n == candidate {
                return true;
            }
            if seen.insert(n) {
                stack.extend(self.dag.deps[n].iter().copied());
            }
        }
        false
    }
}

/// The texts of a node that read variables: (field, text, template or expression).
pub fn texts<'a>(flow: &'a Flow, node: &'a Node) -> Vec<(&'static str, &'a str, Mode)> {
    let mut out = Vec::new();
    if let Some(p) = &node.prompt {
        out.push(("prompt", p.as_str(), Mode::Template));
    }
    if let Some(c) = &node.command {
        out.push(("command", c.as_str(), Mode::Template));
    }
    if let Some(w) = &node.when {
        out.push(("when", w.as_str(), Mode::Expression));
    }
    if let Some(fe) = &node.for_each {
        if let ForEachItems::Expr(e) = &fe.items {
            out.push(("for_each", e.as_str(), Mode::Expression));
        }
    }
    for f in node.files.iter() {
        out.push(("files", f.as_str(), Mode::Template));
    }
    for map in node
        .parallel_outputs
        .iter()
        .chain(flow.parallel_outputs.get(&node.id))
    {
        for (_, prompt) in &map.0 {
            out.push(("parallel_outputs", prompt.as_str(), Mode::Template));
        }
    }
    out
}

/// Why a file name of a node's `files:` leaves the files folder, if it does: checked with each
/// variable standing for a plain name (the hub checks the expanded name again, on every OS's
/// rules, before it reads a byte; docs/files.md).
pub fn file_name_problem(name: &str) -> Option<&'static str> {
    let converted = template::convert(name, Mode::Template).source;
    let mut plain = String::with_capacity(converted.len());
    let mut rest = converted.as_str();
    while let Some(at) = rest.find("{{") {
        plain.push_str(&rest[..at]);
        plain.push('v');
        rest = rest[at..]
            .find("}}")
            .map_or("", |end| &rest[at + end + 2..]);
    }
    plain.push_str(rest);
    let plain = plain.trim();
    let b = plain.as_bytes();
    if plain.is_empty() {
        Some("the name is empty")
    } else if plain.starts_with('/') || plain.starts_with('\\') || plain.starts_with('~') {
        Some("it is an absolute path")
    } else if b.len() >= 2 && b[1] == b':' && b[0].is_ascii_alphabetic() {
        Some("it names a drive")
    } else if plain.contains(':') {
        Some("a `:` names an alternate data stream or a device")
    } else if plain.split(['/', '\\']).any(|p| p.trim() == "..") {
        Some("`..` leaves the folder")
    } else {
        None
    }
}

/// Why a target can never match a tab, if it cannot.
pub fn target_problem(target: &str) -> Option<String> {
    let t = target.trim();
    if t.is_empty() {
        return Some("目标为空 / empty target".into());
    }
    if let Some(role) = t.strip_prefix("role:") {
        if !ROLES.contains(&role.trim()) {
            return Some(format!(
                "目标永远无法匹配 / unknown role `{role}` in `{t}` (use role:worker, role:foreman or master)"
            ));
        }
    } else if t.chars().any(char::is_whitespace) {
        return Some(format!("目标无效 / target `{t}` contains spaces"));
    }
    None
}
