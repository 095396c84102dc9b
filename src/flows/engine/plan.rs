//! A flow compiled for running: the DAG, each node's templates registered in one minijinja
//! environment with the variables they read, targets parsed, policies resolved.

use std::collections::HashMap;

use minijinja::Environment;

use super::events::{PromptTarget, Timeouts};
use super::retry::RetryPolicy;
use super::EngineError;
use crate::flows::graph::Dag;
use crate::flows::model::{
    fallback_node, Aggregate, Fallback, Flow, ForEachItems, Node, OnFailure, Trigger,
};
use crate::flows::template::{self, Field, Mode, Ref};

/// What a node does.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeWork {
    /// Prompts sent to tabs (one per item).
    Prompt,
    /// A hub command.
    Command {
        /// The command without a `?<` … `>!` wrapper.
        command: String,
        /// (key as written, reference) for each variable it uses.
        refs: Vec<(String, Ref)>,
    },
    /// A text delivered into the master tab.
    Master,
}

/// How a node's items are made.
#[derive(Debug, Clone, PartialEq)]
pub enum Fanout {
    /// One item per (target, template): `to: [a, b]`, `parallel_outputs`, or a single target.
    Fixed(Vec<(PromptTarget, String, String)>),
    /// N items to one target (`workers: N`).
    Workers(PromptTarget, u32, String),
    /// One item per value; targets used round-robin.
    ForEach {
        /// Literal items, or an expression.
        items: ForEachItems,
        /// The expression's variables (empty for literal items).
        refs: Vec<Ref>,
        /// Loop variable.
        var: String,
        /// Targets, round-robin.
        targets: Vec<PromptTarget>,
        /// Template name.
        template: String,
        /// In-flight cap.
        max_parallel: Option<u32>,
    },
}

/// A compiled template: its name in the environment and the variables it reads.
#[derive(Debug, Clone, PartialEq)]
pub struct Compiled {
    /// Name in [`Plan::env`].
    pub name: String,
    /// Variables read.
    pub refs: Vec<Ref>,
}

/// One node, ready to run.
#[derive(Debug, Clone)]
pub struct NodePlan {
    /// Node id.
    pub id: String,
    /// What it does.
    pub work: NodeWork,
    /// How its items are made (prompt and master nodes).
    pub fanout: Fanout,
    /// `when`, converted to a minijinja expression, with its variables.
    pub when: Option<(String, Vec<Ref>)>,
    /// Trigger rule.
    pub trigger: Trigger,
    /// Aggregation.
    pub aggregate: Aggregate,
    /// Judge target (`aggregate: judge`).
    pub judge: Option<PromptTarget>,
    /// Failure policy.
    pub on_failure: OnFailure,
    /// Retry policy.
    pub retry: RetryPolicy,
    /// A command node whose flow wrote a retry policy (the node's `retry`, `defaults.retry`,
    /// `error_handling.max_retries`, `auto_retry=N`): its failed command is tried again. A
    /// command is not retried by the built-in policy: it may not be safe to run twice.
    pub retry_command: bool,
    /// Timeouts.
    pub timeout: Timeouts,
    /// Templates of the file names the node's prompts attach (`files:`).
    pub files: Vec<String>,
}

/// The compiled flow shared by every run state of it.
pub struct Plan {
    /// Nodes in file order.
    pub nodes: Vec<NodePlan>,
    /// Templates by name, with their variables.
    pub templates: HashMap<String, Compiled>,
    /// The DAG.
    pub dag: Dag,
    /// The environment holding every template.
    pub env: Environment<'static>,
    /// `error_handling.fallback: {output: TEXT}`: what a node that fails for good answers.
    pub fallback_output: Option<String>,
    /// The fallback node (`error_handling.fallback` naming a node): held back until a node
    /// fails for good, then run once.
    pub handler: Option<usize>,
    /// `limits.max_parallel`.
    pub max_parallel: Option<u32>,
    /// Node id → index.
    pub index: HashMap<String, usize>,
    /// `output_var` → index of the node that publishes it.
    pub output_vars: HashMap<String, usize>,
}

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plan")
            .field("nodes", &self.nodes.len())
            .finish()
    }
}

impl Plan {
    /// Compiles `flow` (which should have passed validation).
    pub fn compile(flow: &Flow) -> Result<Plan, EngineError> {
        let dag = Dag::build(flow);
        if !dag.is_acyclic() {
            return Err(EngineError::Invalid("the flow has a cycle".into()));
        }
        let handler = fallback_node(flow).and_then(|id| dag.index.get(id).copied());
        let mut plan = Plan {
            nodes: Vec::with_capacity(flow.nodes.len()),
            templates: HashMap::new(),
            index: dag.index.clone(),
            dag,
            env: template::environment(),
            fallback_output: match flow
                .error_handling
                .as_ref()
                .and_then(|e| e.fallback.as_ref())
            {
                Some(Fallback::Output(text)) => Some(text.clone()),
                _ => None,
            },
            handler,
            max_parallel: flow.limits.as_ref().and_then(|l| l.max_parallel),
            output_vars: flow
                .nodes
                .iter()
                .enumerate()
                .filter_map(|(i, n)| n.output_var.clone().map(|v| (v, i)))
                .collect(),
        };
        for (i, node) in flow.nodes.iter().enumerate() {
            let mut compiled = plan.node(flow, node)?;
            if plan.handler == Some(i) && node.retry.is_none() {
                // A fallback is tried once unless it says otherwise: it must not loop.
                compiled.retry.max_retries = 0;
                compiled.retry_command = false;
            }
            plan.nodes.push(compiled);
        }
        Ok(plan)
    }

    fn template(&mut self, node: &str, field: &str, text: &str) -> Result<String, EngineError> {
        let name = format!("{node}#{field}#{}", self.templates.len());
        let converted = template::convert(text, Mode::Template);
        self.env
            .add_template_owned(name.clone(), converted.source)
            .map_err(|e| template_error(node, field, template::describe(&e)))?;
        let names = self
            .env
            .get_template(&name)
            .map_err(|e| template_error(node, field, template::describe(&e)))?
            .undeclared_variables(true);
        let refs = template::classify(&converted.refs, names);
        self.templates.insert(
            name.clone(),
            Compiled {
                name: name.clone(),
                refs: refs.into_iter().collect(),
            },
        );
        Ok(name)
    }

    fn expression(
        &self,
        node: &str,
        field: &str,
        text: &str,
    ) -> Result<(String, Vec<Ref>), EngineError> {
        let converted = template::convert(text, Mode::Expression);
        let refs = template::references(&self.env, &converted, Mode::Expression)
            .map_err(|message| template_error(node, field, message))?;
        Ok((converted.source, refs.into_iter().collect()))
    }

    fn node(&mut self, flow: &Flow, node: &Node) -> Result<NodePlan, EngineError> {
        let id = node.id.as_str();
        let to_master = node.to.iter().any(|t| t == "master" || t == "role:master");
        let targets: Vec<PromptTarget> = if node.to.is_empty() {
            vec![PromptTarget::Role("worker".into())]
        } else {
            node.to.iter().map(|t| PromptTarget::parse(t)).collect()
        };
        let (work, fanout) = if let Some(command) = &node.command {
            // What the command sets itself (a loop variable, a `set` target, a chain's
            // `$exit_code`) is its own, not the flow's: not passed in, so not shadowed.
            let own = crate::flows::validate::command_binds(command);
            let refs = template::convert(command, Mode::Template)
                .refs
                .into_iter()
                .filter(
                    |r| !matches!(r, Ref::Var(v) if own.contains(&v.as_str()) || v == "exit_code"),
                )
                .map(|r| (ref_key(&r), r))
                .collect();
            let command = strip_wrapper(command);
            let command = match &node.on {
                Some(on) => format!("on {on}: {command}"),
                None => command.to_string(),
            };
            let work = NodeWork::Command { command, refs };
            (work, Fanout::Fixed(Vec::new()))
        } else {
            let per_target = node
                .parallel_outputs
                .as_ref()
                .or_else(|| flow.parallel_outputs.get(id));
            let fanout = match (per_target, &node.for_each, node.workers) {
                (Some(map), _, _) => {
                    let mut items = Vec::new();
                    for (target, prompt) in &map.0 {
                        let t = self.template(id, "parallel_outputs", prompt)?;
                        items.push((PromptTarget::parse(target), target.clone(), t));
                    }
                    Fanout::Fixed(items)
                }
                (None, Some(fe), _) => {
                    let t =
                        self.template(id, "prompt", node.prompt.as_deref().unwrap_or_default())?;
                    let refs = match &fe.items {
                        ForEachItems::Expr(e) => self.expression(id, "for_each", e)?.1,
                        ForEachItems::List(_) => Vec::new(),
                    };
                    Fanout::ForEach {
                        items: fe.items.clone(),
                        refs,
                        var: fe.var.clone(),
                        targets: targets.clone(),
                        template: t,
                        max_parallel: fe.max_parallel,
                    }
                }
                (None, None, Some(n)) if n > 1 && !to_master => {
                    let t =
                        self.template(id, "prompt", node.prompt.as_deref().unwrap_or_default())?;
                    Fanout::Workers(targets[0].clone(), n, t)
                }
                (None, None, _) => {
                    let t =
                        self.template(id, "prompt", node.prompt.as_deref().unwrap_or_default())?;
                    let labels: Vec<String> = if node.to.is_empty() {
                        vec!["role:worker".into()]
                    } else {
                        node.to.0.clone()
                    };
                    let items = targets
                        .iter()
                        .zip(labels)
                        .map(|(target, label)| (target.clone(), label, t.clone()))
                        .collect();
                    Fanout::Fixed(items)
                }
            };
            let work = if to_master {
                NodeWork::Master
            } else {
                NodeWork::Prompt
            };
            (work, fanout)
        };
        let when = match &node.when {
            Some(w) => Some(self.expression(id, "when", w)?),
            None => None,
        };
        let files = node
            .files
            .iter()
            .map(|f| self.template(id, "files", f))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(NodePlan {
            id: node.id.clone(),
            work,
            fanout,
            when,
            trigger: node.trigger.unwrap_or_default(),
            aggregate: node.aggregate.unwrap_or_default(),
            judge: node.judge.as_deref().map(PromptTarget::parse),
            on_failure: node.on_failure.unwrap_or_default(),
            retry: RetryPolicy::resolve(flow, node),
            retry_command: node.command.is_some()
                && (node.retry.is_some()
                    || flow.defaults.retry.is_some()
                    || flow
                        .error_handling
                        .as_ref()
                        .is_some_and(|e| e.max_retries.is_some())),
            timeout: timeouts(flow, node),
            files,
        })
    }
}

fn template_error(node: &str, field: &str, message: String) -> EngineError {
    EngineError::Template {
        node: node.to_string(),
        field: field.to_string(),
        message,
    }
}

/// The key a command's variable is passed under: `x`, `n.output`, `n.outputs`.
fn ref_key(r: &Ref) -> String {
    match r {
        Ref::Var(n) => n.clone(),
        Ref::Node(n, Field::Output) => format!("{n}.output"),
        Ref::Node(n, Field::Outputs) => format!("{n}.outputs"),
    }
}

/// `?<echo saved>!` → `echo saved`; other text is returned trimmed.
pub fn strip_wrapper(command: &str) -> &str {
    let t = command.trim();
    t.strip_prefix("?<")
        .and_then(|rest| rest.strip_suffix(">!"))
        .map_or(t, str::trim)
}

/// Node timeouts over flow defaults, field by field.
fn timeouts(flow: &Flow, node: &Node) -> Timeouts {
    let own = node.timeout.clone().unwrap_or_default();
    let def = flow.defaults.timeout.clone().unwrap_or_default();
    let pick = |a: Option<crate::flows::model::Duration>,
                b: Option<crate::flows::model::Duration>| {
        a.or(b).map(|d| d.as_ms())
    };
    Timeouts {
        queue_ms: pick(own.queue, def.queue),
        attempt_ms: pick(own.attempt, def.attempt),
        idle_ms: pick(own.idle, def.idle),
        deadline_ms: pick(own.deadline, def.deadline),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrappers_are_stripped() {
        assert_eq!(strip_wrapper(" ?<echo saved>! "), "echo saved");
        assert_eq!(strip_wrapper("echo saved"), "echo saved");
    }
}
