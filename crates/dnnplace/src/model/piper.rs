//! Piper's problem (Tarnawski et al., NeurIPS 2021, `msr-fiddle/piper`, `algo.cpp`): the
//! instance, validated, and the shape of a plan.
//!
//! An instance is a DAG `G = (V, E)` with a per-device memory `M` (`maxMemoryPerDevice`,
//! bytes), `K` devices (`maxDevices`), one bandwidth `β` (bytes/s) and `N` micro-batches per
//! batch (`mbsInBatch`). Edge `e = (u, v)` carries `c_e` bytes (`communicationCost`). Each
//! node `v` has, per tensor-parallel degree `t`, a list of *TMPCs* (configurations, e.g.
//! `vanilla` and `activation recomp`); configuration `l` has time per sample `p_l`,
//! parameter bytes `w_l`, memory `A_l·y + B_l` for `y` micro-batches in flight, and per
//! incident edge a synchronisation cost in bytes (`syncTimeFw[u]` for `u → v`,
//! `syncTimeBw[w]` for `v → w`).
//!
//! A plan is a sequence of stages `X_1, …, X_r` partitioning `V` with every edge going from
//! a stage to the same or a later one; stage `i` has degrees `t_i` (tensor) and `d_i`
//! (data, `d_i | N`) and one configuration per node for `t_i`; `Σ t_i d_i ≤ K` and
//! `Σ d_i ≤ N`. With `y_i = ⌈(Σ_{j ≥ i} d_j) / d_i⌉` in-flight micro-batches, stage `i`
//! takes, per sample,
//!
//! `T_i = (E_i / d_i + Σ_{v ∈ X_i} 4 (d_i − 1) w_v / (d_i N)) / β + Σ_{v ∈ X_i} p_v / d_i`
//!
//! where `E_i = Σ` over edges `(u, v)` leaving or entering `X_i` of `2 (c_e + sync_e)` (the
//! sync cost of the configuration of the endpoint inside `X_i`), and must fit
//! `Σ_{v ∈ X_i} (A_v y_i + B_v) ≤ M`. The objective is `max_i T_i` (time per sample).
//!
//! [`PiperInstance::build`] checks what `algo.cpp`'s `checkInputCorrectness` checks (and a
//! little more: finite numbers) and names the node, edge or field at fault.

use std::collections::{BTreeMap, HashMap};

/// Piper's largest device count (`DEVICES_LIMIT`), also the largest tensor-parallel key.
pub const DEVICES_LIMIT: usize = 10_000;

/// One configuration of a node at one tensor-parallel degree (Piper's `TMPC`).
#[derive(Clone, Debug, PartialEq)]
pub struct Tmpc {
    pub id: String,
    /// `p`, seconds per sample on the `t` devices of one replica.
    pub time_per_sample: f64,
    /// `w`, bytes (data-parallel synchronisation only).
    pub parameter_bytes: f64,
    /// Memory is `memory_a · y + memory_b` bytes for `y` micro-batches in flight.
    pub memory_a: f64,
    pub memory_b: f64,
    /// Sync bytes per incoming edge, aligned with [`PiperNode::incoming`].
    pub sync_fw: Vec<f64>,
    /// Sync bytes per outgoing edge, aligned with [`PiperNode::outgoing`].
    pub sync_bw: Vec<f64>,
}

/// A node with its configurations per tensor-parallel degree.
#[derive(Clone, Debug, PartialEq)]
pub struct PiperNode {
    /// The id in the input file.
    pub id: i64,
    pub name: String,
    /// `configs[t]`: the configurations for tensor-parallel degree `t` (never empty).
    pub configs: BTreeMap<usize, Vec<Tmpc>>,
    /// Indices (into [`PiperInstance::edges`]) of the edges into this node.
    pub incoming: Vec<usize>,
    /// Indices of the edges out of this node.
    pub outgoing: Vec<usize>,
}

/// An edge between node indices.
#[derive(Clone, Debug, PartialEq)]
pub struct PiperEdge {
    pub source: usize,
    pub dest: usize,
    /// `c_e`, bytes.
    pub bytes: f64,
}

/// A validated instance (module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct PiperInstance {
    pub max_memory_per_device: f64,
    pub max_devices: usize,
    pub bandwidth: f64,
    pub mbs_in_batch: usize,
    pub nodes: Vec<PiperNode>,
    pub edges: Vec<PiperEdge>,
}

/// A configuration as given, sync maps keyed by the input's node ids.
#[derive(Clone, Debug)]
pub struct TmpcSpec {
    pub id: String,
    pub time_per_sample: f64,
    pub parameter_bytes: f64,
    pub memory_a: f64,
    pub memory_b: f64,
    pub sync_fw: Vec<(i64, f64)>,
    pub sync_bw: Vec<(i64, f64)>,
}

/// A node as given.
#[derive(Clone, Debug)]
pub struct NodeSpec {
    pub id: i64,
    pub name: String,
    pub configs: Vec<(usize, Vec<TmpcSpec>)>,
}

/// The scalars of an instance.
#[derive(Clone, Copy, Debug)]
pub struct PiperHeader {
    pub max_memory_per_device: f64,
    pub max_devices: usize,
    pub bandwidth: f64,
    pub mbs_in_batch: usize,
}

/// One stage of a plan.
#[derive(Clone, Debug, PartialEq)]
pub struct PiperStage {
    /// Node indices, increasing.
    pub nodes: Vec<usize>,
    pub tensor_parallel: usize,
    pub data_parallel: usize,
    /// `configs[i]`: index into `nodes[i]`'s configurations for `tensor_parallel`.
    pub configs: Vec<usize>,
}

/// A plan: stages in pipeline order.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct PiperPlan {
    pub stages: Vec<PiperStage>,
}

/// What is wrong with an instance; each message names the field, node or edge.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PiperError {
    #[error("{field}: {message}")]
    Field { field: String, message: String },
    #[error("node {node}: {message}")]
    Node { node: i64, message: String },
    #[error("edges[{index}] ({source_id} -> {dest_id}): {message}")]
    Edge {
        index: usize,
        source_id: i64,
        dest_id: i64,
        message: String,
    },
}

fn field(field: &str, message: impl Into<String>) -> PiperError {
    PiperError::Field {
        field: field.into(),
        message: message.into(),
    }
}

fn node_err(node: i64, message: impl Into<String>) -> PiperError {
    PiperError::Node {
        node,
        message: message.into(),
    }
}

fn nonneg(x: f64) -> bool {
    x.is_finite() && x >= 0.0
}

impl PiperInstance {
    /// Checks and builds an instance from the header, nodes and edges `(source id, dest id,
    /// bytes)` as given in a file (module docs).
    pub fn build(
        header: PiperHeader,
        nodes: Vec<NodeSpec>,
        edges: Vec<(i64, i64, f64)>,
    ) -> Result<PiperInstance, PiperError> {
        check_header(&header)?;
        if nodes.is_empty() {
            return Err(field("nodes", "no nodes"));
        }
        let mut index: HashMap<i64, usize> = HashMap::new();
        for (i, n) in nodes.iter().enumerate() {
            if index.insert(n.id, i).is_some() {
                return Err(node_err(n.id, "duplicate node id"));
            }
        }
        let mut built_edges = Vec::with_capacity(edges.len());
        let mut seen = std::collections::HashSet::new();
        for (i, &(s, d, bytes)) in edges.iter().enumerate() {
            let err = |message: &str| PiperError::Edge {
                index: i,
                source_id: s,
                dest_id: d,
                message: message.into(),
            };
            let (Some(&source), Some(&dest)) = (index.get(&s), index.get(&d)) else {
                return Err(err("an endpoint is not a node id"));
            };
            if !nonneg(bytes) {
                return Err(err("communicationCost must be a finite number ≥ 0"));
            }
            if source == dest {
                return Err(err("a self-loop"));
            }
            if !seen.insert((source, dest)) {
                return Err(err("duplicate edge"));
            }
            built_edges.push(PiperEdge {
                source,
                dest,
                bytes,
            });
        }
        let mut incoming = vec![Vec::new(); nodes.len()];
        let mut outgoing = vec![Vec::new(); nodes.len()];
        for (i, e) in built_edges.iter().enumerate() {
            incoming[e.dest].push(i);
            outgoing[e.source].push(i);
        }
        check_acyclic(&nodes, &built_edges)?;
        let mut built = Vec::with_capacity(nodes.len());
        for (v, spec) in nodes.into_iter().enumerate() {
            let ids_in: Vec<i64> = incoming[v].iter().map(|&e| edges[e].0).collect::<Vec<_>>();
            let ids_out: Vec<i64> = outgoing[v].iter().map(|&e| edges[e].1).collect();
            let mut configs = BTreeMap::new();
            for (t, list) in spec.configs {
                if t == 0 || t > DEVICES_LIMIT {
                    return Err(node_err(
                        spec.id,
                        format!("TMPCs key {t} is not a device count (1 to {DEVICES_LIMIT})"),
                    ));
                }
                if list.is_empty() {
                    continue;
                }
                let list = list
                    .into_iter()
                    .map(|c| build_tmpc(spec.id, t, c, &ids_in, &ids_out))
                    .collect::<Result<Vec<_>, _>>()?;
                let mut names = std::collections::HashSet::new();
                for c in &list {
                    if !names.insert(c.id.clone()) {
                        return Err(node_err(
                            spec.id,
                            format!("TMPCs[{t}]: two TMPCs with id {:?}", c.id),
                        ));
                    }
                }
                if configs.insert(t, list).is_some() {
                    return Err(node_err(spec.id, format!("TMPCs key {t} given twice")));
                }
            }
            if configs.is_empty() {
                return Err(node_err(spec.id, "TMPCs: no configuration for any degree"));
            }
            built.push(PiperNode {
                id: spec.id,
                name: spec.name,
                configs,
                incoming: incoming[v].clone(),
                outgoing: outgoing[v].clone(),
            });
        }
        Ok(PiperInstance {
            max_memory_per_device: header.max_memory_per_device,
            max_devices: header.max_devices,
            bandwidth: header.bandwidth,
            mbs_in_batch: header.mbs_in_batch,
            nodes: built,
            edges: built_edges,
        })
    }

    /// The instance with `max_devices` replaced (`--devices`).
    pub fn with_devices(mut self, k: usize) -> Result<PiperInstance, PiperError> {
        if k == 0 || k > DEVICES_LIMIT {
            return Err(field(
                "maxDevices",
                format!("{k} is not in 1 to {DEVICES_LIMIT}"),
            ));
        }
        self.max_devices = k;
        Ok(self)
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The tensor-parallel degrees some node has, increasing.
    pub fn tensor_degrees(&self) -> Vec<usize> {
        let mut t: Vec<usize> = self
            .nodes
            .iter()
            .flat_map(|n| n.configs.keys().copied())
            .collect();
        t.sort_unstable();
        t.dedup();
        t
    }
}

fn check_header(h: &PiperHeader) -> Result<(), PiperError> {
    if h.max_devices == 0 || h.max_devices > DEVICES_LIMIT {
        return Err(field(
            "maxDevices",
            format!("{} is not in 1 to {DEVICES_LIMIT}", h.max_devices),
        ));
    }
    if !(h.bandwidth.is_finite() && h.bandwidth >= 1e-9) {
        return Err(field("bandwidth", "must be a finite number ≥ 1e-9 bytes/s"));
    }
    if !(h.max_memory_per_device.is_finite() && h.max_memory_per_device >= 1e-9) {
        return Err(field(
            "maxMemoryPerDevice",
            "must be a finite number ≥ 1e-9 bytes",
        ));
    }
    if h.mbs_in_batch == 0 {
        return Err(field("mbsInBatch", "must be at least 1"));
    }
    Ok(())
}

fn check_acyclic(nodes: &[NodeSpec], edges: &[PiperEdge]) -> Result<(), PiperError> {
    let n = nodes.len();
    let mut indeg = vec![0usize; n];
    let mut out = vec![Vec::new(); n];
    for e in edges {
        indeg[e.dest] += 1;
        out[e.source].push(e.dest);
    }
    let mut stack: Vec<usize> = (0..n).filter(|&v| indeg[v] == 0).collect();
    let mut done = 0;
    while let Some(v) = stack.pop() {
        done += 1;
        for &w in &out[v] {
            indeg[w] -= 1;
            if indeg[w] == 0 {
                stack.push(w);
            }
        }
    }
    if done < n {
        let on_cycle = (0..n).find(|&v| indeg[v] > 0).expect("a node left");
        return Err(node_err(nodes[on_cycle].id, "lies on a cycle of edges"));
    }
    Ok(())
}

fn build_tmpc(
    node: i64,
    t: usize,
    c: TmpcSpec,
    ids_in: &[i64],
    ids_out: &[i64],
) -> Result<Tmpc, PiperError> {
    let at = |f: &str| format!("TMPCs[{t}][{:?}].{f}", c.id);
    if c.id.is_empty() {
        return Err(node_err(
            node,
            format!("TMPCs[{t}]: a TMPC with an empty id"),
        ));
    }
    for (name, x) in [
        ("timePerSample", c.time_per_sample),
        ("parameterSize", c.parameter_bytes),
        ("memoryUsageA", c.memory_a),
        ("memoryUsageB", c.memory_b),
    ] {
        if !nonneg(x) {
            return Err(node_err(
                node,
                format!("{} must be a finite number ≥ 0", at(name)),
            ));
        }
    }
    let align = |given: &[(i64, f64)], ids: &[i64], name: &str| {
        let mut out = vec![f64::NAN; ids.len()];
        for &(u, x) in given {
            let Some(pos) = ids.iter().position(|&i| i == u) else {
                return Err(node_err(
                    node,
                    format!("{}: key {u} is not an edge of this node", at(name)),
                ));
            };
            if !nonneg(x) {
                return Err(node_err(
                    node,
                    format!("{}[{u}] must be a finite number ≥ 0", at(name)),
                ));
            }
            out[pos] = x;
        }
        if let Some(pos) = out.iter().position(|x| x.is_nan()) {
            return Err(node_err(
                node,
                format!("{}: missing the edge with node {}", at(name), ids[pos]),
            ));
        }
        Ok(out)
    };
    let sync_fw = align(&c.sync_fw, ids_in, "syncTimeFw")?;
    let sync_bw = align(&c.sync_bw, ids_out, "syncTimeBw")?;
    Ok(Tmpc {
        id: c.id,
        time_per_sample: c.time_per_sample,
        parameter_bytes: c.parameter_bytes,
        memory_a: c.memory_a,
        memory_b: c.memory_b,
        sync_fw,
        sync_bw,
    })
}
