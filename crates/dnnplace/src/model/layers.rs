//! Layers: the units that a layer-granular plan never cuts, with the names people use
//! for them (module paths such as `model.layers.3`).
//!
//! **Labels.** [`layer_labels`] gives every node a label in `0..C`: nodes with one `layerId`
//! share a label, a node without `layerId` has a label of its own, and the two rules are
//! closed under colour classes (union–find over "same `layerId`" ∪ "same `colorClass`"),
//! since a colour class must sit on one device anyway. A graph input without a `layerId`
//! (no predecessor, no work) that feeds a single node joins that node's label. A backward
//! node joins a layer only through its colour class (the generator gives it its forward
//! node's): a backward class without forward nodes keeps a label of its own, so that its
//! mirror arcs (below) are kept and the layer graph is the projection of the colour-class
//! graph onto the labels.
//!
//! **Layer graph.** The arcs are those of the colour-class graph of
//! [`crate::model::contraction::class_graph`] taken over the labels: `A → B` for every
//! forward edge `u → v` with `label(u) = A ≠ B = label(v)`, plus mirror arcs for a layer
//! that holds only backward nodes. A plan whose stage boundaries fall only between layers
//! needs this graph to be a DAG: a cycle `A → B → A` means a path leaves layer `A` and comes
//! back, so `A` is not contiguous and no stage boundary can separate `A` from `B`.
//! [`Layers::new`] refuses such a labelling, naming the layers and the edges of the cycle
//! (the colour-class contraction would silently fuse them instead).
//!
//! **Order.** Layers are numbered in Kahn's order of the layer graph, ties broken by the
//! position of the layer's first node in the workload's topological order, so for a model
//! written as a chain of blocks the order is the program order.
//!
//! **Names.** A node's module path is its `module` field when the workload has one (the
//! cost model records it), else it comes from its name ([`module_path`]): a dotted name
//! (`model.layers.3.self_attn.q_proj`) is its own path; a scoped ONNX name
//! (`/model/layers.3/self_attn/q_proj/MatMul`) drops its last segment (the operator) and
//! joins the scopes with dots. A layer's modules are the common dotted prefixes of its
//! forward nodes' paths, one per distinct first component (`model.norm` and `lm_head` for
//! a head layer holding both); graph inputs (no predecessor, no work) name no module
//! unless nothing else does, and a path that is an ancestor of another layer's path (a
//! *container* such as `transformer`, whose own forward adds GPT-2's embeddings) names no
//! module of the layer, nor may a common prefix be one (GPT-2's embedding layer is
//! `transformer.wte` and `transformer.wpe`, not `transformer`). The *block list* is the
//! prefix `P` shared by the most layers whose single module is `P.<i>` (`model.layers`,
//! `bert.encoder.layer`, `transformer.h`); those layers are the blocks, numbered `i`.
//!
//! Complexity: O(n α(n) + m log m) for n nodes and m edges, plus the names' lengths.

use std::collections::HashMap;

use super::contraction::{class_graph, strongly_connected_components};
use super::workload::Workload;

/// One layer: nodes that a layer-granular plan keeps on one device.
#[derive(Clone, Debug, PartialEq)]
pub struct Layer {
    /// Distinct `layerId`s of its nodes, sorted (empty for a node without one).
    pub layer_ids: Vec<i64>,
    /// Node indices (forward and backward), in the workload's topological order.
    pub nodes: Vec<usize>,
    /// Module paths the layer covers (see the module documentation); empty when its nodes
    /// have no names.
    pub modules: Vec<String>,
    /// Index `i` when the layer is block `P.<i>` of the block list.
    pub block: Option<usize>,
}

/// The layers of a workload, in order. See the module documentation.
#[derive(Clone, Debug)]
pub struct Layers {
    pub layers: Vec<Layer>,
    /// `layer_of[v]` for node index `v`.
    pub layer_of: Vec<usize>,
    /// Distinct successor layers in the layer graph (all with a higher index).
    pub succ: Vec<Vec<usize>>,
    /// The block list prefix `P` (e.g. `model.layers`), when some layer is `P.<i>`.
    pub block_list: Option<String>,
    /// Nodes without a `layerId` (each is a layer of its own unless a colour class joins it).
    pub unlabelled_nodes: usize,
}

/// Why a workload cannot be split at layer boundaries.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum LayerError {
    #[error("layers are not contiguous in the graph: {cycle}; no stage boundary can fall between these layers (give them one layerId, or plan at operator granularity)")]
    NotContiguous { cycle: String },
}

/// Node labels in `0..C` and C: one per `layerId`, one per node without a `layerId`,
/// closed under colour classes (module documentation). Labels are numbered in order of
/// first appearance in the workload's node list.
///
/// Complexity: O(n α(n)) plus hashing.
pub fn layer_labels(w: &Workload) -> (Vec<usize>, usize) {
    let n = w.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn find(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    let mut by_layer: HashMap<i64, usize> = HashMap::new();
    let mut by_class: HashMap<i64, usize> = HashMap::new();
    for (v, node) in w.nodes().iter().enumerate() {
        // A backward node joins a layer through its colour class only (see the module
        // documentation: an orphan backward class keeps its own label).
        let layer_id = if node.is_backward {
            None
        } else {
            node.layer_id
        };
        for (key, map) in [(layer_id, &mut by_layer), (node.color_class, &mut by_class)] {
            if let Some(k) = key {
                let first = *map.entry(k).or_insert(v);
                let (a, b) = (find(&mut parent, first), find(&mut parent, v));
                if a != b {
                    parent[a.max(b)] = a.min(b);
                }
            }
        }
    }
    // A graph input without a layerId (no predecessor, no work) joins the layer it feeds
    // when it feeds one node: its tensor lives where it is consumed.
    for (v, node) in w.nodes().iter().enumerate() {
        let input = node.layer_id.is_none()
            && w.predecessors(v).is_empty()
            && node.fpga_latency == 0.0
            && node.cpu_latency == 0.0;
        if let (true, [only]) = (input && !node.is_backward, w.successors(v)) {
            let (a, b) = (find(&mut parent, v), find(&mut parent, *only));
            if a != b {
                parent[a.max(b)] = a.min(b);
            }
        }
    }
    let mut dense: HashMap<usize, usize> = HashMap::new();
    let labels: Vec<usize> = (0..n)
        .map(|v| {
            let root = find(&mut parent, v);
            let next = dense.len();
            *dense.entry(root).or_insert(next)
        })
        .collect();
    (labels, dense.len())
}

/// The module path a node name stands for (module documentation): a dotted name as is,
/// a `/`-scoped ONNX name without its last segment, scopes joined by dots (a scope that
/// already repeats the path so far, as in `/layer1/layer1.0/conv1/Conv`, replaces it).
pub fn module_path(name: &str) -> String {
    if !name.contains('/') {
        return name.to_string();
    }
    let segments: Vec<&str> = name.split('/').filter(|s| !s.is_empty()).collect();
    let scopes = if segments.len() > 1 {
        &segments[..segments.len() - 1]
    } else {
        &segments[..]
    };
    let mut path = String::new();
    for s in scopes {
        if path.is_empty() || s.starts_with(&format!("{path}.")) {
            path = s.to_string();
        } else {
            path = format!("{path}.{s}");
        }
    }
    path
}

/// The module path of node `v`: its `module` field when the workload has one, else the
/// path its name stands for ([`module_path`]; a backward node's `_grad` suffix dropped).
pub fn node_module(w: &Workload, v: usize) -> Option<String> {
    let node = w.node(v);
    if let Some(m) = node.module.as_deref().filter(|m| !m.is_empty()) {
        return Some(m.to_string());
    }
    let name = node.name.as_deref()?;
    let name = if node.is_backward {
        name.strip_suffix("_grad").unwrap_or(name)
    } else {
        name
    };
    Some(module_path(name)).filter(|p| !p.is_empty())
}

/// The longest common prefix of dotted paths, by whole components.
fn common_prefix<'a>(paths: impl IntoIterator<Item = &'a str>) -> String {
    let mut prefix: Option<Vec<&str>> = None;
    for p in paths {
        let parts: Vec<&str> = p.split('.').collect();
        prefix = Some(match prefix {
            None => parts,
            Some(q) => q
                .iter()
                .zip(&parts)
                .take_while(|(a, b)| a == b)
                .map(|(a, _)| *a)
                .collect(),
        });
    }
    prefix.unwrap_or_default().join(".")
}

/// `P.<i>` → `(P, i)`.
fn block_of(path: &str) -> Option<(&str, usize)> {
    let (prefix, last) = path.rsplit_once('.')?;
    if prefix.is_empty() || last.is_empty() || !last.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((prefix, last.parse().ok()?))
}

impl Layers {
    /// Labels, orders and names the layers of `w`; fails when the layer graph has a cycle.
    pub fn new(w: &Workload) -> Result<Layers, LayerError> {
        let (labels, count) = layer_labels(w);
        Layers::from_labels(w, &labels, count)
    }

    /// Every node a layer of its own (no colour-class or `layerId` merging); never fails,
    /// since the workload is a DAG. For naming what a device holds at operator granularity.
    pub fn per_node(w: &Workload) -> Layers {
        let labels: Vec<usize> = (0..w.len()).collect();
        Layers::from_labels(w, &labels, w.len()).expect("a workload is a DAG")
    }

    fn from_labels(w: &Workload, labels: &[usize], count: usize) -> Result<Layers, LayerError> {
        let succ = class_graph(w, labels, count);
        let mut position_of_node = vec![0usize; w.len()];
        for (i, &v) in w.topological_order().iter().enumerate() {
            position_of_node[v] = i;
        }
        let mut first = vec![usize::MAX; count];
        for v in 0..w.len() {
            first[labels[v]] = first[labels[v]].min(position_of_node[v]);
        }
        let mut indegree = vec![0usize; count];
        for list in &succ {
            for &b in list {
                indegree[b] += 1;
            }
        }
        let mut ready: std::collections::BinaryHeap<std::cmp::Reverse<(usize, usize)>> = (0..count)
            .filter(|&a| indegree[a] == 0)
            .map(|a| std::cmp::Reverse((first[a], a)))
            .collect();
        let mut order = Vec::with_capacity(count);
        while let Some(std::cmp::Reverse((_, a))) = ready.pop() {
            order.push(a);
            for &b in &succ[a] {
                indegree[b] -= 1;
                if indegree[b] == 0 {
                    ready.push(std::cmp::Reverse((first[b], b)));
                }
            }
        }
        if order.len() < count {
            return Err(LayerError::NotContiguous {
                cycle: describe_cycle(w, labels, &succ),
            });
        }
        let mut index_of_label = vec![0usize; count];
        for (i, &a) in order.iter().enumerate() {
            index_of_label[a] = i;
        }
        let layer_of: Vec<usize> = labels.iter().map(|&a| index_of_label[a]).collect();
        let mut layers: Vec<Layer> = (0..count)
            .map(|_| Layer {
                layer_ids: Vec::new(),
                nodes: Vec::new(),
                modules: Vec::new(),
                block: None,
            })
            .collect();
        for &v in w.topological_order() {
            let layer = &mut layers[layer_of[v]];
            layer.nodes.push(v);
            if let Some(id) = w.node(v).layer_id {
                if !layer.layer_ids.contains(&id) {
                    layer.layer_ids.push(id);
                }
            }
        }
        let paths: Vec<Vec<String>> = layers
            .iter()
            .map(|layer| layer_paths(w, &layer.nodes))
            .collect();
        for (layer, modules) in layers.iter_mut().zip(layer_modules(&paths)) {
            layer.layer_ids.sort_unstable();
            layer.modules = modules;
        }
        let mut layer_succ = vec![Vec::new(); count];
        for (a, list) in succ.iter().enumerate() {
            for &b in list {
                layer_succ[index_of_label[a]].push(index_of_label[b]);
            }
        }
        for list in &mut layer_succ {
            list.sort_unstable();
            list.dedup();
        }
        let block_list = find_block_list(&layers);
        if let Some(prefix) = &block_list {
            for layer in &mut layers {
                if let [m] = layer.modules.as_slice() {
                    if let Some((p, i)) = block_of(m) {
                        if p == prefix {
                            layer.block = Some(i);
                        }
                    }
                }
            }
        }
        let unlabelled_nodes = w.nodes().iter().filter(|n| n.layer_id.is_none()).count();
        Ok(Layers {
            layers,
            layer_of,
            succ: layer_succ,
            block_list,
            unlabelled_nodes,
        })
    }

    pub fn len(&self) -> usize {
        self.layers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }

    /// A layer's name for people: its modules joined by `+`, else `layerId N`, else the
    /// first node's id.
    pub fn name(&self, w: &Workload, l: usize) -> String {
        let layer = &self.layers[l];
        if !layer.modules.is_empty() {
            layer.modules.join("+")
        } else if let Some(id) = layer.layer_ids.first() {
            format!("layerId {id}")
        } else {
            format!("node {}", w.node(layer.nodes[0]).id)
        }
    }

    /// The short name of a layer inside a range description: `layer i` for a block, else
    /// the last component of each module (`embed_tokens`, `norm + lm_head`).
    fn short_name(&self, w: &Workload, l: usize) -> String {
        let layer = &self.layers[l];
        if let Some(i) = layer.block {
            return format!("layer {i}");
        }
        if layer.modules.is_empty() {
            return self.name(w, l);
        }
        layer
            .modules
            .iter()
            .map(|m| m.rsplit('.').next().unwrap_or(m).to_string())
            .collect::<Vec<_>>()
            .join(" + ")
    }

    /// What a set of nodes holds, for people: whole layers in order with runs of blocks
    /// compressed (`embed_tokens + layers 0-7`), and `part of X (k of n nodes)` for a layer
    /// the set only partly holds. At most `limit` items, then `… (+N more)`.
    pub fn describe(&self, w: &Workload, nodes: &[usize], limit: usize) -> String {
        self.summarise(w, nodes, limit, false)
    }

    /// The module paths a set of nodes holds, runs of blocks compressed
    /// (`model.embed_tokens, model.layers.0-7`). At most `limit` items.
    pub fn modules_of(&self, w: &Workload, nodes: &[usize], limit: usize) -> String {
        self.summarise(w, nodes, limit, true)
    }

    fn summarise(&self, w: &Workload, nodes: &[usize], limit: usize, full: bool) -> String {
        let mut held: std::collections::BTreeMap<usize, usize> = Default::default();
        for &v in nodes {
            *held.entry(self.layer_of[v]).or_insert(0) += 1;
        }
        let mut items: Vec<String> = Vec::new();
        let mut run: Option<(usize, usize, usize)> = None; // (first block, last block, last layer)
        let flush = |run: &mut Option<(usize, usize, usize)>, items: &mut Vec<String>| {
            if let Some((a, b, _)) = run.take() {
                let range = if a == b {
                    format!("{a}")
                } else {
                    format!("{a}-{b}")
                };
                items.push(match (full, &self.block_list) {
                    (true, Some(p)) => format!("{p}.{range}"),
                    _ if a == b => format!("layer {range}"),
                    _ => format!("layers {range}"),
                });
            }
        };
        for (&l, &count) in &held {
            let layer = &self.layers[l];
            let whole = count == layer.nodes.len();
            match (whole, layer.block) {
                (true, Some(i)) => {
                    run = match run {
                        Some((a, b, last)) if i == b + 1 && l == last + 1 => Some((a, i, l)),
                        other => {
                            let mut r = other;
                            flush(&mut r, &mut items);
                            Some((i, i, l))
                        }
                    };
                }
                _ => {
                    flush(&mut run, &mut items);
                    let name = match (full, layer.modules.is_empty()) {
                        (true, false) => layer.modules.join(", "),
                        (true, true) => self.name(w, l),
                        (false, _) => self.short_name(w, l),
                    };
                    if whole {
                        items.push(name);
                    } else {
                        items.push(format!(
                            "part of {name} ({count} of {} nodes)",
                            layer.nodes.len()
                        ));
                    }
                }
            }
        }
        flush(&mut run, &mut items);
        let sep = if full { ", " } else { " + " };
        if items.len() > limit {
            let more = items.len() - limit;
            items.truncate(limit);
            return format!("{}{sep}… (+{more} more)", items.join(sep));
        }
        items.join(sep)
    }
}

/// The distinct module paths a layer's nodes name, in order (module documentation): its
/// forward nodes' (its backward nodes' when it has no forward node), graph inputs left out
/// unless nothing else names one.
fn layer_paths(w: &Workload, nodes: &[usize]) -> Vec<String> {
    let named = |v: &usize| -> Option<(String, bool)> {
        let path = node_module(w, *v)?;
        let node = w.node(*v);
        let input =
            w.predecessors(*v).is_empty() && node.fpga_latency == 0.0 && node.cpu_latency == 0.0;
        Some((path, !input))
    };
    let forward: Vec<&usize> = nodes.iter().filter(|&&v| !w.node(v).is_backward).collect();
    let candidates: Vec<(String, bool)> = if forward.is_empty() {
        nodes.iter().filter_map(named).collect()
    } else {
        forward.into_iter().filter_map(named).collect()
    };
    let working: Vec<&String> = candidates
        .iter()
        .filter(|(_, work)| *work)
        .map(|(p, _)| p)
        .collect();
    let paths: Vec<&String> = if working.is_empty() {
        candidates.iter().map(|(p, _)| p).collect()
    } else {
        working
    };
    let mut distinct: Vec<String> = Vec::new();
    for p in paths {
        if !distinct.contains(p) {
            distinct.push(p.clone());
        }
    }
    distinct
}

/// The modules of every layer from its paths (module documentation). A path that is an
/// ancestor of another layer's path (`transformer`, `model`) is a *container*: the node
/// runs in the container's own forward, and the container is no module of this layer.
/// Paths are grouped by first component, each group named by its common prefix unless
/// that prefix is empty or a container, when the group's paths are listed.
fn layer_modules(paths: &[Vec<String>]) -> Vec<Vec<String>> {
    // Proper ancestors of every path, with the layers they are ancestors for.
    let mut ancestors: HashMap<&str, Vec<usize>> = HashMap::new();
    for (l, list) in paths.iter().enumerate() {
        for p in list {
            for (i, _) in p.match_indices('.') {
                let owners = ancestors.entry(&p[..i]).or_default();
                if owners.last() != Some(&l) {
                    owners.push(l);
                }
            }
        }
    }
    let container = |p: &str, l: usize| {
        ancestors
            .get(p)
            .is_some_and(|owners| owners.iter().any(|&m| m != l))
    };
    paths
        .iter()
        .enumerate()
        .map(|(l, list)| {
            let own: Vec<&String> = list.iter().filter(|p| !container(p, l)).collect();
            let own = if own.is_empty() {
                list.iter().collect()
            } else {
                own
            };
            let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
            for p in own {
                let head = p.split('.').next().unwrap_or(p);
                match groups.iter_mut().find(|(h, _)| *h == head) {
                    Some((_, members)) => members.push(p),
                    None => groups.push((head, vec![p])),
                }
            }
            let mut modules = Vec::new();
            for (_, members) in groups {
                let prefix = common_prefix(members.iter().copied());
                if prefix.is_empty() || container(&prefix, l) {
                    modules.extend(members.iter().map(|m| m.to_string()));
                } else {
                    modules.push(prefix);
                }
            }
            modules
        })
        .collect()
}

/// The prefix `P` with the most layers whose single module is `P.<i>` with distinct `i`.
fn find_block_list(layers: &[Layer]) -> Option<String> {
    let mut count: Vec<(String, Vec<usize>)> = Vec::new();
    for layer in layers {
        if let [m] = layer.modules.as_slice() {
            if let Some((p, i)) = block_of(m) {
                match count.iter_mut().find(|(q, _)| q == p) {
                    Some((_, list)) => list.push(i),
                    None => count.push((p.to_string(), vec![i])),
                }
            }
        }
    }
    count.retain(|(_, list)| {
        let mut sorted = list.clone();
        sorted.sort_unstable();
        sorted.dedup();
        sorted.len() == list.len()
    });
    let best = count.iter().map(|(_, list)| list.len()).max()?;
    count
        .into_iter()
        .find(|(_, list)| list.len() == best)
        .map(|(p, _)| p)
}

/// One cycle of the layer graph, each arc with a witness edge:
/// `A -> B (edge 12 -> 30) -> A (edge 31 -> 14)`. Called only when Kahn's order stalled,
/// so some strongly connected component has two labels or more.
fn describe_cycle(w: &Workload, labels: &[usize], succ: &[Vec<usize>]) -> String {
    let component = strongly_connected_components(succ);
    let mut size: HashMap<usize, usize> = HashMap::new();
    for &c in &component {
        *size.entry(c).or_insert(0) += 1;
    }
    let start = (0..succ.len())
        .find(|&a| size[&component[a]] > 1)
        .expect("a stalled order has a cycle");
    let inside = |a: usize| component[a] == component[start];
    // Breadth-first search inside the component for the shortest way back to `start`.
    let mut parent: HashMap<usize, usize> = HashMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(x) = queue.pop_front() {
        for &y in &succ[x] {
            if y == start {
                let mut cycle = vec![x];
                let mut z = x;
                while z != start {
                    z = parent[&z];
                    cycle.push(z);
                }
                cycle.reverse();
                cycle.push(start);
                return render_cycle(w, labels, &cycle);
            }
            if inside(y) && y != start && !parent.contains_key(&y) {
                parent.insert(y, x);
                queue.push_back(y);
            }
        }
    }
    unreachable!("a strongly connected component of two labels or more has a cycle through each")
}

fn render_cycle(w: &Workload, labels: &[usize], cycle: &[usize]) -> String {
    let label_name = |a: usize| -> String {
        let nodes: Vec<usize> = (0..w.len()).filter(|&v| labels[v] == a).collect();
        let modules = layer_modules(&[layer_paths(w, &nodes)]).remove(0);
        let ids: Vec<i64> = {
            let mut ids: Vec<i64> = nodes.iter().filter_map(|&v| w.node(v).layer_id).collect();
            ids.sort_unstable();
            ids.dedup();
            ids
        };
        match (modules.is_empty(), ids.first()) {
            (false, _) => format!("layer {}", modules.join("+")),
            (true, Some(id)) => format!("layerId {id}"),
            (true, None) => format!("node {}", w.node(nodes[0]).id),
        }
    };
    let mut text = label_name(cycle[0]);
    for pair in cycle.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let forward =
            |e: &&crate::model::Edge| !w.node(e.from).is_backward && !w.node(e.to).is_backward;
        let witness = match w
            .edges()
            .iter()
            .filter(forward)
            .find(|e| labels[e.from] == a && labels[e.to] == b)
        {
            Some(e) => format!(" (edge {} -> {})", w.node(e.from).id, w.node(e.to).id),
            // A mirror arc: a backward edge from b's layer to a's.
            None => w
                .edges()
                .iter()
                .find(|e| labels[e.from] == b && labels[e.to] == a)
                .map(|e| {
                    format!(
                        " (mirroring backward edge {} -> {})",
                        w.node(e.from).id,
                        w.node(e.to).id
                    )
                })
                .unwrap_or_default(),
        };
        text.push_str(&format!(" -> {}{witness}", label_name(b)));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_paths_of_onnx_and_dotted_names() {
        assert_eq!(
            module_path("model.layers.3.self_attn.q_proj"),
            "model.layers.3.self_attn.q_proj"
        );
        assert_eq!(
            module_path("/model/layers.3/self_attn/q_proj/MatMul"),
            "model.layers.3.self_attn.q_proj"
        );
        assert_eq!(module_path("/layer1/layer1.0/conv1/Conv"), "layer1.0.conv1");
        assert_eq!(module_path("/Add_3"), "Add_3");
    }

    #[test]
    fn common_prefix_by_components() {
        assert_eq!(
            common_prefix(["model.layers.3.mlp", "model.layers.3.self_attn.q"]),
            "model.layers.3"
        );
        assert_eq!(
            common_prefix(["model.layers.1", "model.layers.12"]),
            "model.layers"
        );
        assert_eq!(block_of("model.layers.12"), Some(("model.layers", 12)));
        assert_eq!(block_of("lm_head"), None);
    }
}
