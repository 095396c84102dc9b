//! The flow's DAG as a petgraph `DiGraph`: dependency lists both ways, a topological order,
//! levels for display, and the cycles when there is no order.

use std::collections::HashMap;

use petgraph::algo::{tarjan_scc, toposort};
use petgraph::graph::{DiGraph, NodeIndex};

use super::model::Flow;

/// The dependency graph of a flow. Graph node `i` is `flow.nodes[i]`; an edge `a → b` means
/// `b` depends on `a`. Unknown dependencies and repeated ids are left out (validation reports
/// them).
#[derive(Debug, Clone)]
pub struct Dag {
    /// The petgraph graph (weights are node indexes).
    pub graph: DiGraph<usize, ()>,
    /// Node id → index (first occurrence).
    pub index: HashMap<String, usize>,
    /// For each node, the indexes it depends on, in file order, without repeats.
    pub deps: Vec<Vec<usize>>,
    /// For each node, the indexes that depend on it.
    pub dependents: Vec<Vec<usize>>,
    /// A topological order, or empty when there is a cycle.
    pub topo: Vec<usize>,
}

impl Dag {
    /// Builds the graph of `flow`.
    pub fn build(flow: &Flow) -> Dag {
        let n = flow.nodes.len();
        let mut index = HashMap::with_capacity(n);
        for (i, node) in flow.nodes.iter().enumerate() {
            index.entry(node.id.clone()).or_insert(i);
        }
        let mut graph = DiGraph::with_capacity(n, n);
        for i in 0..n {
            graph.add_node(i);
        }
        let mut deps = vec![Vec::new(); n];
        let mut dependents = vec![Vec::new(); n];
        for (i, node) in flow.nodes.iter().enumerate() {
            for dep in node.depends_on.iter() {
                if let Some(&d) = index.get(dep) {
                    if !deps[i].contains(&d) {
                        deps[i].push(d);
                        dependents[d].push(i);
                        graph.add_edge(NodeIndex::new(d), NodeIndex::new(i), ());
                    }
                }
            }
        }
        let topo = toposort(&graph, None)
            .map(|order| order.into_iter().map(NodeIndex::index).collect())
            .unwrap_or_default();
        Dag {
            graph,
            index,
            deps,
            dependents,
            topo,
        }
    }

    /// True when the graph has no cycle.
    pub fn is_acyclic(&self) -> bool {
        self.topo.len() == self.deps.len()
    }

    /// Each cycle as a closed path of indexes (`[a, b, a]`), starting at its first node in
    /// file order.
    pub fn cycles(&self) -> Vec<Vec<usize>> {
        let mut out = Vec::new();
        for component in tarjan_scc(&self.graph) {
            let members: Vec<usize> = component.iter().map(|n| n.index()).collect();
            let self_loop = members.len() == 1 && self.deps[members[0]].contains(&members[0]);
            if members.len() < 2 && !self_loop {
                continue;
            }
            let start = members.iter().copied().min().unwrap_or_default();
            out.push(self.closed_path(start, &members));
        }
        out.sort();
        out
    }

    /// A path from `start` back to itself inside `members` (a strongly connected component).
    fn closed_path(&self, start: usize, members: &[usize]) -> Vec<usize> {
        // Depth-first search along dependency edges (dependent → dependency reads as "needs").
        let mut path = vec![start];
        let mut visited = vec![start];
        while let Some(&last) = path.last() {
            let next = self.dependents[last]
                .iter()
                .copied()
                .filter(|n| members.contains(n))
                .find(|n| *n == start || !visited.contains(n));
            match next {
                Some(n) if n == start => {
                    path.push(start);
                    return path;
                }
                Some(n) => {
                    visited.push(n);
                    path.push(n);
                }
                None => {
                    path.pop();
                }
            }
        }
        vec![start, start]
    }

    /// For each node, its depth: 0 for roots, else 1 + the deepest dependency.
    pub fn levels(&self) -> Vec<usize> {
        let mut level = vec![0; self.deps.len()];
        for &i in &self.topo {
            level[i] = self.deps[i]
                .iter()
                .map(|&d| level[d] + 1)
                .max()
                .unwrap_or(0);
        }
        level
    }

    /// Every node upstream of `i` (its dependencies, transitively), as a bitmap.
    pub fn ancestors(&self, i: usize) -> Vec<bool> {
        let mut seen = vec![false; self.deps.len()];
        let mut stack: Vec<usize> = self.deps[i].clone();
        while let Some(n) = stack.pop() {
            if !seen[n] {
                seen[n] = true;
                stack.extend(self.deps[n].iter().copied());
            }
        }
        seen
    }
}
