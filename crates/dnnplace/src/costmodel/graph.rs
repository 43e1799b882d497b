//! An operator graph with costs, and its conversion to a [`Workload`].
//!
//! The importers ([`crate::costmodel::onnx`], [`crate::costmodel::transformer`]) build an
//! [`OpGraph`]: operators in topological order, each with its [`OpCost`] and the operators
//! it reads from. [`to_workload`] prices it on two device profiles:
//!
//! - `fpgaLatency(v) = t(v, accelerator)`, `cpuLatency(v) = t(v, cpu)`, both in
//!   **milliseconds** by the roofline of [`crate::costmodel::operators`];
//! - `size(v) = param_bytes(v) + output_bytes(v)`: the weights and the output buffer, the
//!   convention of the published profiled workloads (their BERT-24 layers hold exactly
//!   fp32 parameters + one output activation); training adds the backward nodes' sizes of
//!   [`crate::costmodel::training`]. The parts are kept apart in the node's
//!   [`NodeMemory`]: `weightBytes = param_bytes(v)`, the output buffer being the rest
//!   (`size` is computed as the sum of the parts, so they add up exactly);
//! - edge cost `c(u) = 1e3 · output_bytes(u) / host_link_bytes_per_s` (ms): moving `u`'s
//!   output over the accelerator's host link; every out-edge of `u` carries it;
//! - node ids `1..=n` in operator order; `colorClass(v) = id(v)` (each operator is its own
//!   class; its backward node joins it); `name`, `module` and `layerId` from the operator;
//! - the workload's [`Reference`] is the accelerator profile: its name, speed and host
//!   link, what `fpgaLatency` and `c(u)` are priced on.
//!
//! [`to_workload_on_cluster`] prices the same graph for a cluster
//! ([`crate::model::cluster`]): every node gets its roofline time on every profile of the
//! cluster (`latencies`), `fpgaLatency` and `c(u)` are priced on the first type's profile
//! (the reference), and the cluster replaces the device set.

use super::operators::{DType, OpCost};
use super::profiles::DeviceProfile;
use super::training;
use crate::model::{
    Cluster, DeviceSet, Node, NodeMemory, Platform, ProfileTimes, Reference, Workload,
    WorkloadError,
};

/// One operator of an [`OpGraph`].
#[derive(Clone, Debug)]
pub struct Op {
    /// Operator name (the ONNX node name, or a generated one), unique in the graph.
    pub name: String,
    /// Path of the framework module the operator comes from (`model.layers.3.mlp.up_proj`),
    /// when known.
    pub module: Option<String>,
    /// Operator type (`Conv`, `MatMul`, `Input`, ...).
    pub op_type: String,
    pub cost: OpCost,
    /// Indices of the operators whose outputs this one reads (each earlier than this one).
    pub inputs: Vec<usize>,
    /// Informational layer number (the transformer block index, or none).
    pub layer_id: Option<i64>,
    /// A graph input: no work, and no backward node.
    pub is_input: bool,
}

/// Operators in topological order.
#[derive(Clone, Debug, Default)]
pub struct OpGraph {
    pub ops: Vec<Op>,
}

impl OpGraph {
    /// Adds an operator and returns its index.
    pub fn push(&mut self, op: Op) -> usize {
        debug_assert!(op.inputs.iter().all(|&i| i < self.ops.len()));
        self.ops.push(op);
        self.ops.len() - 1
    }

    /// Total forward FLOPs.
    pub fn flops(&self) -> f64 {
        self.ops.iter().map(|o| o.cost.flops).sum()
    }

    /// Total forward multiply-adds of matrix products.
    pub fn macs(&self) -> f64 {
        self.ops.iter().map(|o| o.cost.macs).sum()
    }

    /// Total parameter bytes.
    pub fn param_bytes(&self) -> f64 {
        self.ops.iter().map(|o| o.cost.param_bytes).sum()
    }
}

/// How to price an [`OpGraph`].
#[derive(Clone, Debug)]
pub struct CostSettings {
    /// The accelerator (`fpgaLatency`, edge costs, `maxSizePerFPGA`).
    pub accelerator: DeviceProfile,
    /// One CPU core (`cpuLatency`).
    pub cpu: DeviceProfile,
    pub dtype: DType,
    /// Add backward nodes ([`crate::costmodel::training`]).
    pub training: bool,
    /// `maxFPGAs` of the workload.
    pub accelerators: usize,
    /// `maxCPUs` of the workload.
    pub cpus: usize,
}

/// Milliseconds to move `bytes` over the accelerator's host link.
pub fn transfer_ms(bytes: f64, accelerator: &DeviceProfile) -> f64 {
    1e3 * bytes / accelerator.host_link_bytes_per_s
}

/// Builds and validates the workload (module documentation).
///
/// Complexity: O(n + m) for n operators and m operator inputs.
pub fn to_workload(graph: &OpGraph, settings: &CostSettings) -> Result<Workload, WorkloadError> {
    let n = graph.ops.len() as i64;
    let dtype = settings.dtype;
    let mut nodes = Vec::with_capacity(graph.ops.len() * if settings.training { 2 } else { 1 });
    let mut edges = Vec::new();
    for (i, op) in graph.ops.iter().enumerate() {
        let id = i as i64 + 1;
        let memory = NodeMemory {
            weight_bytes: op.cost.param_bytes,
            ..NodeMemory::default()
        };
        nodes.push(Node {
            id,
            name: Some(op.name.clone()),
            module: op.module.clone(),
            fpga_latency: op.cost.time_ms(&settings.accelerator, dtype),
            cpu_latency: op.cost.time_ms(&settings.cpu, dtype),
            size_bytes: memory.total_bytes() + op.cost.output_bytes,
            supported_on_accelerator: true,
            is_backward: false,
            color_class: Some(id),
            layer_id: op.layer_id,
            memory: Some(memory),
        });
        for &u in &op.inputs {
            let bytes = graph.ops[u].cost.output_bytes;
            edges.push((
                u as i64 + 1,
                id,
                transfer_ms(bytes, &settings.accelerator),
                bytes,
            ));
        }
    }
    if settings.training {
        training::add_backward(graph, settings, n, &mut nodes, &mut edges);
    }
    let devices = DeviceSet {
        accelerators: settings.accelerators,
        memory_per_accelerator_bytes: settings.accelerator.memory_bytes,
        cpus: settings.cpus,
    };
    let a = &settings.accelerator;
    let reference = Reference {
        profile: a.name.clone(),
        speed: a.speed(),
        host_bytes_per_s: a.host_link_bytes_per_s,
    };
    Workload::new(nodes, edges, devices)?.with_platform(Platform {
        reference,
        ..Platform::default()
    })
}

/// The cost of every node in workload order: the forward operators, then (training) the
/// backward node of every operator that is not a graph input.
pub fn node_costs(graph: &OpGraph, training: bool) -> Vec<OpCost> {
    let forward = graph.ops.iter().map(|o| o.cost.clone());
    let backward = graph
        .ops
        .iter()
        .filter(|o| training && !o.is_input)
        .map(|o| training::backward_cost(&o.cost));
    forward.chain(backward).collect()
}

/// Prices `graph` for `cluster` (module documentation). `settings.accelerator` should be the
/// profile of the cluster's first type (it prices `fpgaLatency` and `c(u)`); `profiles`
/// must hold the profile of every type. `settings.accelerators` and `settings.cpus` are not
/// read: the cluster has its own devices.
///
/// Complexity: O(|P| · n + m) for |P| distinct profiles.
pub fn to_workload_on_cluster(
    graph: &OpGraph,
    settings: &CostSettings,
    cluster: &Cluster,
    profiles: &[DeviceProfile],
) -> Result<Workload, WorkloadError> {
    let base = to_workload(graph, settings)?;
    let costs = node_costs(graph, settings.training);
    debug_assert_eq!(costs.len(), base.len());
    let mut names: Vec<String> = Vec::new();
    for t in cluster.types() {
        if !names.contains(&t.profile) {
            names.push(t.profile.clone());
        }
    }
    let mut times = Vec::with_capacity(names.len());
    for name in &names {
        let profile = profiles
            .iter()
            .find(|p| p.name.eq_ignore_ascii_case(name))
            .ok_or_else(|| WorkloadError::BadCluster {
                field: format!("type {name}"),
                message: "has no device profile to price the nodes with".into(),
            })?;
        times.push(
            costs
                .iter()
                .map(|c| c.time_ms(profile, settings.dtype))
                .collect(),
        );
    }
    let platform = Platform {
        reference: base.platform().reference.clone(),
        profile_times: ProfileTimes {
            profiles: names,
            times,
        },
        cluster: Some(cluster.clone()),
    };
    base.with_platform(platform)
}
