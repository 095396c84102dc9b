//! Items and templates: how a node's items are made, and how prompts are rendered from the
//! run's variables.

use std::collections::BTreeMap;

use minijinja::Value;

use super::aggregate::{self, ItemReply};
use super::events::PromptTarget;
use super::plan::{Fanout, NodeWork};
use super::{list_items, ItemRun, ItemStatus, RunState};
use crate::flows::model::ForEachItems;
use crate::flows::template::Ref;

impl RunState {
    pub(super) fn build_items(&self, i: usize) -> Result<Vec<ItemRun>, String> {
        let item =
            |label: String, target: PromptTarget, template: &str, value: Option<String>| ItemRun {
                label: label.clone(),
                target,
                template: template.to_string(),
                value,
                prompt_override: None,
                status: ItemStatus::Idle,
                attempt: 0,
                dispatched: false,
                client: None,
                failed_clients: Vec::new(),
                text: None,
                reply_label: label,
            };
        let plan = &self.plan.nodes[i];
        if let NodeWork::Command { .. } = plan.work {
            return Ok(vec![item(
                "hub".into(),
                PromptTarget::Name("hub".into()),
                "",
                None,
            )]);
        }
        Ok(match &plan.fanout {
            Fanout::Fixed(list) => list
                .iter()
                .map(|(t, label, tpl)| item(label.clone(), t.clone(), tpl, None))
                .collect(),
            Fanout::Workers(t, n, tpl) => (1..=*n)
                .map(|k| item(format!("{t} #{k}"), t.clone(), tpl, None))
                .collect(),
            Fanout::ForEach {
                items,
                refs,
                var,
                targets,
                template,
                ..
            } => {
                let values = match items {
                    ForEachItems::List(list) => list.clone(),
                    ForEachItems::Expr(_) => self.eval_items(i, refs)?,
                };
                values
                    .into_iter()
                    .enumerate()
                    .map(|(k, v)| {
                        let label = format!("{var} {}", k + 1);
                        let target = targets[k % targets.len().max(1)].clone();
                        item(label, target, template, Some(v))
                    })
                    .collect()
            }
        })
    }

    pub(super) fn eval_items(&self, i: usize, refs: &[Ref]) -> Result<Vec<String>, String> {
        let flow_node = &self.flow.nodes[i];
        let Some(fe) = &flow_node.for_each else {
            return Ok(Vec::new());
        };
        let ForEachItems::Expr(text) = &fe.items else {
            return Ok(Vec::new());
        };
        let source =
            crate::flows::template::convert(text, crate::flows::template::Mode::Expression).source;
        let expr = self
            .plan
            .env
            .compile_expression(&source)
            .map_err(|e| format!("for_each: {}", crate::flows::template::describe(&e)))?;
        let value = expr
            .eval(self.context(i, refs, None))
            .map_err(|e| format!("for_each: {}", crate::flows::template::describe(&e)))?;
        Ok(list_items(&value))
    }

    pub(super) fn add_judge_item(&mut self, i: usize) {
        let Some(target) = self.plan.nodes[i].judge.clone() else {
            return;
        };
        let task = self.nodes[i]
            .items
            .first()
            .and_then(|it| self.render(i, it).ok())
            .unwrap_or_default();
        let replies: Vec<ItemReply<'_>> = self.nodes[i]
            .items
            .iter()
            .map(|it| ItemReply {
                label: &it.reply_label,
                text: it.text.as_deref().unwrap_or_default(),
            })
            .collect();
        let prompt = aggregate::judge_prompt(&task, &replies);
        let label = format!("judge {target}");
        self.nodes[i].items.push(ItemRun {
            label: label.clone(),
            target,
            template: String::new(),
            value: None,
            prompt_override: Some(prompt),
            status: ItemStatus::Idle,
            attempt: 0,
            dispatched: false,
            client: None,
            failed_clients: Vec::new(),
            text: None,
            reply_label: label,
        });
    }

    /// The value of variable `name` as seen by node `i`.
    pub(super) fn lookup(
        &self,
        i: usize,
        name: &str,
        item: Option<(&str, &str)>,
    ) -> Option<String> {
        if let Some((var, value)) = item {
            if var == name {
                return Some(value.to_string());
            }
        }
        match name {
            "RESULT" => {
                let outs: Vec<&str> = self.plan.dag.deps[i]
                    .iter()
                    .filter_map(|&d| self.nodes[d].output.as_deref())
                    .collect();
                return Some(outs.join("\n\n"));
            }
            "ERROR" | "FAILED_NODE" if self.plan.handler == Some(i) => {
                let (node, error) = self.failure.clone().unwrap_or_default();
                return Some(if name == "ERROR" { error } else { node });
            }
            "run_id" => return Some(self.run_id.clone()),
            "flow_name" => return Some(self.flow.name.clone()),
            _ => {}
        }
        if let Some(v) = self.inputs.get(name) {
            return Some(v.clone());
        }
        let provider = self
            .plan
            .index
            .get(name)
            .or_else(|| self.plan.output_vars.get(name))
            .copied()?;
        Some(self.nodes[provider].output.clone().unwrap_or_default())
    }

    pub(super) fn node_outputs(&self, p: usize) -> Vec<String> {
        let run = &self.nodes[p];
        run.items
            .iter()
            .take(run.candidates)
            .filter_map(|it| it.text.clone())
            .collect()
    }

    /// The minijinja context for `refs`: each variable at top level and under `vars`, and
    /// `nodes.<id>.output / outputs`.
    pub(super) fn context(&self, i: usize, refs: &[Ref], item: Option<(&str, &str)>) -> Value {
        let mut top: BTreeMap<String, Value> = BTreeMap::new();
        let mut vars: BTreeMap<String, Value> = BTreeMap::new();
        let mut nodes: BTreeMap<String, Value> = BTreeMap::new();
        for r in refs {
            match r {
                Ref::Var(name) => {
                    if let Some(v) = self.lookup(i, name, item) {
                        top.insert(name.clone(), Value::from(v.clone()));
                        vars.insert(name.clone(), Value::from(v));
                    }
                }
                Ref::Node(id, _) => {
                    if let Some(&p) = self.plan.index.get(id) {
                        let mut obj: BTreeMap<&str, Value> = BTreeMap::new();
                        obj.insert(
                            "output",
                            Value::from(self.nodes[p].output.clone().unwrap_or_default()),
                        );
                        obj.insert("outputs", Value::from(self.node_outputs(p)));
                        nodes.insert(id.clone(), Value::from(obj));
                    }
                }
            }
        }
        top.insert("vars".into(), Value::from(vars));
        top.insert("nodes".into(), Value::from(nodes));
        Value::from(top)
    }

    pub(super) fn item_var(&self, i: usize) -> Option<&str> {
        match &self.plan.nodes[i].fanout {
            Fanout::ForEach { var, .. } => Some(var.as_str()),
            _ => None,
        }
    }

    /// The node's `files:` names for this item, each rendered like its prompt.
    pub(super) fn render_files(&self, i: usize, it: &ItemRun) -> Result<Vec<String>, String> {
        let item = self.item_var(i).zip(it.value.as_deref());
        let mut names = Vec::new();
        for name in &self.plan.nodes[i].files {
            let compiled = self.plan.templates.get(name).ok_or_else(|| {
                format!("no template for the files of `{}`", self.flow.nodes[i].id)
            })?;
            let ctx = self.context(i, &compiled.refs, item);
            let rendered = self
                .plan
                .env
                .get_template(&compiled.name)
                .and_then(|t| t.render(ctx))
                .map_err(|e| {
                    format!(
                        "文件名渲染失败 / a file name could not be rendered: {}",
                        crate::flows::template::describe(&e)
                    )
                })?;
            names.push(rendered.trim().to_string());
        }
        Ok(names)
    }

    pub(super) fn render(&self, i: usize, it: &ItemRun) -> Result<String, String> {
        if let Some(p) = &it.prompt_override {
            return Ok(p.clone());
        }
        let compiled = self
            .plan
            .templates
            .get(&it.template)
            .ok_or_else(|| format!("no template for node `{}`", self.flow.nodes[i].id))?;
        let item = self.item_var(i).zip(it.value.as_deref());
        let ctx = self.context(i, &compiled.refs, item);
        self.plan
            .env
            .get_template(&compiled.name)
            .and_then(|t| t.render(ctx))
            .map_err(|e| {
                format!(
                    "模板渲染失败 / prompt could not be rendered: {}",
                    crate::flows::template::describe(&e)
                )
            })
    }
}
