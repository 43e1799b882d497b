//! A validated workload: the operator DAG of MODEL.md plus its device set.
//!
//! A workload is built only through [`Workload::new`], which checks every rule of
//! MODEL.md ("Invalid instances") and returns a [`WorkloadError`] naming the culprit.
//! Once built, the graph is known to be a DAG with dense node indices `0..n`, one
//! communication cost `c(u)` per source node, and no backward→forward edge.
//!
//! Nodes are addressed internally by their index in [`Workload::nodes`]; the file's
//! integer `id` is kept in [`Node::id`] for messages and output.

use std::collections::HashMap;

use super::cluster::{Cluster, Platform};
use super::devices::DeviceSet;
use super::memory::NodeMemory;

/// One operator (or layer) of the DAG.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// The id from the input file (unique).
    pub id: i64,
    /// Informational name, when the file has one.
    pub name: Option<String>,
    /// Informational path of the framework module the node comes from
    /// (`model.layers.3.self_attn.q_proj`), when known.
    pub module: Option<String>,
    /// Time to run on one accelerator.
    pub fpga_latency: f64,
    /// Time to run on one CPU core.
    pub cpu_latency: f64,
    /// Bytes occupied in an accelerator's memory.
    pub size_bytes: f64,
    /// `false` means the node may only run on a CPU.
    pub supported_on_accelerator: bool,
    /// A backward (gradient) node of a training graph.
    pub is_backward: bool,
    /// Nodes of one colour class must share a device.
    pub color_class: Option<i64>,
    /// Informational layer id.
    pub layer_id: Option<i64>,
    /// What `size_bytes` is made of, when known ([`NodeMemory`]).
    pub memory: Option<NodeMemory>,
}

/// A directed edge between node indices.
#[derive(Clone, Debug, PartialEq)]
pub struct Edge {
    pub from: usize,
    pub to: usize,
    /// Transfer time of `from`'s output between accelerator and host memory.
    pub cost: f64,
    /// Informational size of the tensor, bytes.
    pub size_bytes: f64,
}

/// Why a workload was rejected. Every variant names the offending node, edge or field.
#[derive(Clone, Debug, thiserror::Error, PartialEq)]
pub enum WorkloadError {
    #[error("duplicate node id {id} (nodes #{first} and #{second} in the file)")]
    DuplicateId {
        id: i64,
        first: usize,
        second: usize,
    },
    #[error("edge #{edge} ({from} -> {to}) refers to unknown node id {unknown}")]
    UnknownEndpoint {
        edge: usize,
        from: i64,
        to: i64,
        unknown: i64,
    },
    #[error("edge #{edge} is a self-loop on node {id}")]
    SelfLoop { edge: usize, id: i64 },
    #[error("node {id} has out-edges with different costs: {first} and {second} (edge #{edge}); the cost of an edge is the cost of its source's output")]
    DifferingOutCosts {
        id: i64,
        first: f64,
        second: f64,
        edge: usize,
    },
    #[error("{field} of {what} is {value}; it must be a finite number >= 0")]
    BadNumber {
        what: String,
        field: &'static str,
        value: f64,
    },
    #[error("edge #{edge} goes from backward node {from} to forward node {to}")]
    BackwardToForward { edge: usize, from: i64, to: i64 },
    #[error("the graph has a cycle through node {id}: {path}")]
    Cycle { id: i64, path: String },
    #[error("no feasible placement: {reason}")]
    Infeasible { reason: Unplaceable },
    #[error("node {id}: weightBytes + gradientBytes + optimizerBytes + activationBytes = {parts} exceeds its size {size}; the parts are what size is made of")]
    MemoryExceedsSize { id: i64, parts: f64, size: f64 },
    #[error("the workload has no nodes")]
    Empty,
    #[error("cluster: {field} {message}")]
    BadCluster { field: String, message: String },
}

/// Why no placement of a workload can exist, found before any method runs
/// ([`WorkloadError::Infeasible`]): each variant names the node, colour class or device
/// count and the bytes that do not fit.
#[derive(Clone, Debug, thiserror::Error, PartialEq)]
pub enum Unplaceable {
    #[error("the device set has no accelerator and no CPU")]
    NoDevice,
    /// `node` may only run on a CPU and the device set has none.
    #[error("node {node} is not supported on an accelerator and maxCPUs is 0")]
    CpuOnlyWithoutCpu { node: i64 },
    /// `node` needs `size_bytes`, more than an accelerator's `memory_bytes`, without a CPU.
    #[error("node {node} needs {size_bytes} bytes, more than an accelerator's {memory_bytes} bytes, and maxCPUs is 0")]
    NodeTooLarge {
        node: i64,
        size_bytes: f64,
        memory_bytes: f64,
    },
    /// Colour class `class` (holding `node`) needs `size_bytes` on one device, more than
    /// an accelerator's `memory_bytes`, without a CPU.
    #[error("colour class {class} (with node {node}) needs {size_bytes} bytes together, more than an accelerator's {memory_bytes} bytes, and maxCPUs is 0")]
    ClassTooLarge {
        class: i64,
        node: i64,
        size_bytes: f64,
        memory_bytes: f64,
    },
    /// The nodes need `total_bytes`, more than the `accelerators`' `capacity_bytes`,
    /// without a CPU.
    #[error("the nodes need {total_bytes} bytes in all, more than the {accelerators} accelerators' {capacity_bytes} bytes, and maxCPUs is 0")]
    TotalTooLarge {
        total_bytes: f64,
        accelerators: usize,
        capacity_bytes: f64,
    },
    /// On a cluster: `node` may only run on a CPU and the cluster has no CPU core.
    #[error("node {node} is not supported on an accelerator and the cluster has no CPU core")]
    CpuOnlyOnClusterWithoutCpu { node: i64 },
    /// On a cluster: `node` needs `size_bytes`, more than its largest accelerator memory
    /// `largest_bytes`, and there is no CPU core.
    #[error("node {node} needs {size_bytes} bytes, more than the cluster's largest accelerator memory ({largest_bytes} bytes), and the cluster has no CPU core")]
    NodeTooLargeForCluster {
        node: i64,
        size_bytes: f64,
        largest_bytes: f64,
    },
}

/// A validated workload. See the module documentation.
#[derive(Clone, Debug)]
pub struct Workload {
    nodes: Vec<Node>,
    edges: Vec<Edge>,
    devices: DeviceSet,
    succ: Vec<Vec<usize>>,
    pred: Vec<Vec<usize>>,
    out_cost: Vec<f64>,
    index_of_id: HashMap<i64, usize>,
    topo_order: Vec<usize>,
    platform: Platform,
}

fn check_number(
    what: impl FnOnce() -> String,
    field: &'static str,
    value: f64,
) -> Result<(), WorkloadError> {
    if value.is_finite() && value >= 0.0 {
        Ok(())
    } else {
        Err(WorkloadError::BadNumber {
            what: what(),
            field,
            value,
        })
    }
}

/// The parts of a node's size: each a finite number ≥ 0, together at most `size` (up to a
/// relative 1e-9 for decimal rounding in files).
fn check_memory(id: i64, m: &NodeMemory, size: f64) -> Result<(), WorkloadError> {
    let what = || format!("node {id}");
    check_number(what, "weightBytes", m.weight_bytes)?;
    check_number(what, "gradientBytes", m.gradient_bytes)?;
    check_number(what, "optimizerBytes", m.optimizer_bytes)?;
    check_number(what, "activationBytes", m.activation_bytes)?;
    let parts = m.total_bytes();
    if parts > size * (1.0 + 1e-9) {
        return Err(WorkloadError::MemoryExceedsSize { id, parts, size });
    }
    Ok(())
}

impl Workload {
    /// Validates and builds a workload. Edges are given by file ids (`sourceId`, `destId`).
    ///
    /// Complexity: O(n + m) plus hashing, for n nodes and m edges.
    pub fn new(
        nodes: Vec<Node>,
        edges: Vec<(i64, i64, f64, f64)>,
        devices: DeviceSet,
    ) -> Result<Self, WorkloadError> {
        if nodes.is_empty() {
            return Err(WorkloadError::Empty);
        }
        devices.validate()?;
        let mut index_of_id = HashMap::with_capacity(nodes.len());
        for (i, node) in nodes.iter().enumerate() {
            if let Some(first) = index_of_id.insert(node.id, i) {
                return Err(WorkloadError::DuplicateId {
                    id: node.id,
                    first,
                    second: i,
                });
            }
            let what = || format!("node {}", node.id);
            check_number(what, "fpgaLatency", node.fpga_latency)?;
            check_number(what, "cpuLatency", node.cpu_latency)?;
            check_number(what, "size", node.size_bytes)?;
            if let Some(m) = &node.memory {
                check_memory(node.id, m, node.size_bytes)?;
            }
        }
        let n = nodes.len();
        let mut succ = vec![Vec::new(); n];
        let mut pred = vec![Vec::new(); n];
        let mut out_cost: Vec<Option<(f64, usize)>> = vec![None; n];
        let mut built = Vec::with_capacity(edges.len());
        for (e, &(from_id, to_id, cost, size)) in edges.iter().enumerate() {
            let lookup = |id: i64| {
                index_of_id
                    .get(&id)
                    .copied()
                    .ok_or(WorkloadError::UnknownEndpoint {
                        edge: e,
                        from: from_id,
                        to: to_id,
                        unknown: id,
                    })
            };
            let (from, to) = (lookup(from_id)?, lookup(to_id)?);
            if from == to {
                return Err(WorkloadError::SelfLoop {
                    edge: e,
                    id: from_id,
                });
            }
            let what = || format!("edge #{e} ({from_id} -> {to_id})");
            check_number(what, "cost", cost)?;
            check_number(what, "size", size)?;
            match out_cost[from] {
                Some((c, _)) if c != cost => {
                    return Err(WorkloadError::DifferingOutCosts {
                        id: from_id,
                        first: c,
                        second: cost,
                        edge: e,
                    })
                }
                Some(_) => {}
                None => out_cost[from] = Some((cost, e)),
            }
            if nodes[from].is_backward && !nodes[to].is_backward {
                return Err(WorkloadError::BackwardToForward {
                    edge: e,
                    from: from_id,
                    to: to_id,
                });
            }
            // Parallel edges carry no extra meaning in the model; keep one.
            if !succ[from].contains(&to) {
                succ[from].push(to);
                pred[to].push(from);
            }
            built.push(Edge {
                from,
                to,
                cost,
                size_bytes: size,
            });
        }
        let topo_order = topological_order(&nodes, &succ, &pred)?;
        let workload = Workload {
            out_cost: out_cost
                .into_iter()
                .map(|c| c.map_or(0.0, |(c, _)| c))
                .collect(),
            nodes,
            edges: built,
            devices,
            succ,
            pred,
            index_of_id,
            topo_order,
            platform: Platform::default(),
        };
        workload.check_some_placement_exists()?;
        Ok(workload)
    }

    /// Necessary conditions for a placement to exist, each with a reason a person can act on.
    fn check_some_placement_exists(&self) -> Result<(), WorkloadError> {
        let d = &self.devices;
        if d.accelerators == 0 && d.cpus == 0 {
            return Err(WorkloadError::Infeasible {
                reason: Unplaceable::NoDevice,
            });
        }
        if d.cpus > 0 {
            return Ok(());
        }
        if d.accelerators == 0 {
            unreachable!("handled above");
        }
        let mut class_size: HashMap<i64, (f64, i64)> = HashMap::new();
        for node in &self.nodes {
            if !node.supported_on_accelerator {
                return Err(WorkloadError::Infeasible {
                    reason: Unplaceable::CpuOnlyWithoutCpu { node: node.id },
                });
            }
            if node.size_bytes > d.memory_per_accelerator_bytes {
                return Err(WorkloadError::Infeasible {
                    reason: Unplaceable::NodeTooLarge {
                        node: node.id,
                        size_bytes: node.size_bytes,
                        memory_bytes: d.memory_per_accelerator_bytes,
                    },
                });
            }
            if let Some(c) = node.color_class {
                let e = class_size.entry(c).or_insert((0.0, node.id));
                e.0 += node.size_bytes;
            }
        }
        for (class, (size, some_node)) in class_size {
            if size > d.memory_per_accelerator_bytes {
                return Err(WorkloadError::Infeasible {
                    reason: Unplaceable::ClassTooLarge {
                        class,
                        node: some_node,
                        size_bytes: size,
                        memory_bytes: d.memory_per_accelerator_bytes,
                    },
                });
            }
        }
        let total: f64 = self.nodes.iter().map(|n| n.size_bytes).sum();
        let capacity = d.memory_per_accelerator_bytes * d.accelerators as f64;
        if total > capacity {
            return Err(WorkloadError::Infeasible {
                reason: Unplaceable::TotalTooLarge {
                    total_bytes: total,
                    accelerators: d.accelerators,
                    capacity_bytes: capacity,
                },
            });
        }
        Ok(())
    }

    /// The same graph with node `v` occupying `sizes[v]` bytes, each at least its `size`
    /// (the memory parts stay a part of it); not re-checked for feasibility, which the
    /// solvers report. Panics unless there is one size per node.
    pub fn with_sizes(&self, sizes: &[f64]) -> Self {
        assert_eq!(sizes.len(), self.nodes.len(), "one size per node");
        let mut w = self.clone();
        for (node, &s) in w.nodes.iter_mut().zip(sizes) {
            node.size_bytes = s;
        }
        w
    }

    /// The same graph with another device set (re-validated for feasibility).
    /// A workload with a cluster drops it (the device set is MODEL.md's again).
    pub fn with_devices(&self, devices: DeviceSet) -> Result<Self, WorkloadError> {
        devices.validate()?;
        let mut w = self.clone();
        w.devices = devices;
        w.platform.cluster = None;
        w.check_some_placement_exists()?;
        Ok(w)
    }

    /// The same graph with a [`Platform`]: per-profile node times, the reference its numbers
    /// were priced on and, when `platform.cluster` is set, the cluster whose devices replace
    /// the device set (which then only summarises it: all accelerators, the largest memory,
    /// all CPUs). Validates the platform and that every node fits some device of the cluster.
    pub fn with_platform(&self, platform: Platform) -> Result<Self, WorkloadError> {
        platform.validate(self.len(), |v| self.nodes[v].id)?;
        let mut w = self.clone();
        if let Some(cluster) = &platform.cluster {
            w.devices = cluster.device_set();
            w.check_fits_cluster(cluster)?;
        }
        w.platform = platform;
        if let Some(cluster) = w.platform.cluster.clone() {
            w.check_cluster_times(&cluster)?;
        }
        Ok(w)
    }

    /// Every time the cluster gives is finite: a node's time on each type (its
    /// `fpgaLatency` scaled by the speeds: 1e15 ms at a speed of 1e-300 overflows) and the
    /// largest transfer on each machine's links (a bandwidth of 1e-300 bytes/s overflows).
    fn check_cluster_times(&self, cluster: &Cluster) -> Result<(), WorkloadError> {
        let costs = super::ClusterCosts::new(self, cluster);
        for (t, ty) in cluster.types().iter().enumerate() {
            if let Some(v) = (0..self.len()).find(|&v| !costs.time(t, v).is_finite()) {
                return Err(WorkloadError::BadCluster {
                    field: format!("type {}", ty.name),
                    message: format!(
                        "node {}'s time on it overflows ({} ms at speed {:e} against the reference's {:e}); the speeds or times are out of range",
                        self.nodes[v].id,
                        self.nodes[v].fpga_latency,
                        ty.speed,
                        self.platform.reference.speed
                    ),
                });
            }
            // Stage loads are sums of these: their total must stay finite as well.
            let total: f64 = (0..self.len()).map(|v| costs.time(t, v)).sum();
            if !total.is_finite() {
                return Err(WorkloadError::BadCluster {
                    field: format!("type {}", ty.name),
                    message: format!(
                        "the node times on it add up past the largest number (speed {:e} against the reference's {:e}); the speeds or times are out of range",
                        ty.speed, self.platform.reference.speed
                    ),
                });
            }
        }
        let Some(u) =
            (0..self.len()).max_by(|&a, &b| self.out_cost(a).total_cmp(&self.out_cost(b)))
        else {
            return Ok(());
        };
        for (m, machine) in cluster.machines().iter().enumerate() {
            let times = [
                ("host", Some(costs.host(m, u))),
                ("peer", costs.peer(m, u)),
                ("network", Some(costs.network(m, u))),
            ];
            if let Some((link, _)) = times
                .iter()
                .find(|(_, t)| t.is_some_and(|t| !t.is_finite()))
            {
                return Err(WorkloadError::BadCluster {
                    field: format!("machines[{m}].{link}"),
                    message: format!(
                        "node {}'s output ({} ms at the reference bandwidth) takes an infinite time on machine {}'s {link} link; its bandwidth is out of range",
                        self.nodes[u].id,
                        self.out_cost(u),
                        machine.name
                    ),
                });
            }
        }
        Ok(())
    }

    /// Per-node necessary conditions on a cluster: every node fits some device.
    fn check_fits_cluster(&self, cluster: &Cluster) -> Result<(), WorkloadError> {
        if !cluster.cpu_machines().is_empty() {
            return Ok(());
        }
        let largest = cluster.largest_memory_bytes();
        for node in &self.nodes {
            if !node.supported_on_accelerator {
                return Err(WorkloadError::Infeasible {
                    reason: Unplaceable::CpuOnlyOnClusterWithoutCpu { node: node.id },
                });
            }
            if node.size_bytes > largest {
                return Err(WorkloadError::Infeasible {
                    reason: Unplaceable::NodeTooLargeForCluster {
                        node: node.id,
                        size_bytes: node.size_bytes,
                        largest_bytes: largest,
                    },
                });
            }
        }
        Ok(())
    }

    /// What the workload knows about devices beyond MODEL.md ([`Platform`]).
    pub fn platform(&self) -> &Platform {
        &self.platform
    }

    /// The cluster the workload targets, if it has one.
    pub fn cluster(&self) -> Option<&Cluster> {
        self.platform.cluster.as_ref()
    }

    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }
    pub fn node(&self, v: usize) -> &Node {
        &self.nodes[v]
    }
    pub fn edges(&self) -> &[Edge] {
        &self.edges
    }
    pub fn devices(&self) -> &DeviceSet {
        &self.devices
    }
    pub fn len(&self) -> usize {
        self.nodes.len()
    }
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
    /// Distinct successors of node `v`.
    pub fn successors(&self, v: usize) -> &[usize] {
        &self.succ[v]
    }
    /// Distinct predecessors of node `v`.
    pub fn predecessors(&self, v: usize) -> &[usize] {
        &self.pred[v]
    }
    /// `c(v)`: the cost of moving `v`'s output; 0 for nodes without out-edges.
    pub fn out_cost(&self, v: usize) -> f64 {
        self.out_cost[v]
    }
    /// Index of the node with file id `id`.
    pub fn index_of(&self, id: i64) -> Option<usize> {
        self.index_of_id.get(&id).copied()
    }
    /// A topological order of all nodes (Kahn's algorithm, smallest index first).
    pub fn topological_order(&self) -> &[usize] {
        &self.topo_order
    }
    /// True if the workload has backward nodes (a training graph).
    pub fn is_training(&self) -> bool {
        self.nodes.iter().any(|n| n.is_backward)
    }
}

/// Kahn's algorithm; on a cycle, returns the ids along one cycle.
fn topological_order(
    nodes: &[Node],
    succ: &[Vec<usize>],
    pred: &[Vec<usize>],
) -> Result<Vec<usize>, WorkloadError> {
    let n = nodes.len();
    let mut indegree: Vec<usize> = pred.iter().map(Vec::len).collect();
    let mut ready: std::collections::BinaryHeap<std::cmp::Reverse<usize>> = (0..n)
        .filter(|&v| indegree[v] == 0)
        .map(std::cmp::Reverse)
        .collect();
    let mut order = Vec::with_capacity(n);
    while let Some(std::cmp::Reverse(v)) = ready.pop() {
        order.push(v);
        for &w in &succ[v] {
            indegree[w] -= 1;
            if indegree[w] == 0 {
                ready.push(std::cmp::Reverse(w));
            }
        }
    }
    if order.len() == n {
        return Ok(order);
    }
    // Every unprocessed node has an unprocessed predecessor: walk backwards until a repeat.
    let start = (0..n)
        .find(|&v| indegree[v] > 0)
        .expect("some node is left");
    let mut seen = vec![usize::MAX; n];
    let mut walk = vec![start];
    let mut v = start;
    seen[v] = 0;
    loop {
        v = *pred[v]
            .iter()
            .find(|&&u| indegree[u] > 0)
            .expect("left nodes have left predecessors");
        if seen[v] != usize::MAX {
            let mut cycle: Vec<i64> = walk[seen[v]..].iter().map(|&u| nodes[u].id).collect();
            cycle.reverse();
            cycle.push(cycle[0]);
            let path = cycle
                .iter()
                .map(i64::to_string)
                .collect::<Vec<_>>()
                .join(" -> ");
            return Err(WorkloadError::Cycle {
                id: nodes[v].id,
                path,
            });
        }
        seen[v] = walk.len();
        walk.push(v);
    }
}
