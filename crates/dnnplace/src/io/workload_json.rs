//! Reader and writer of the workload JSON format of MODEL.md.
//!
//! ```json
//! {"maxSizePerFPGA": 17185374208.0, "maxFPGAs": 6, "maxCPUs": 1,
//!  "nodes": [{"id": 1, "fpgaLatency": 0.7, "cpuLatency": 6.9, "size": 131325952.0,
//!             "supportedOnFpga": 1, "isBackwardNode": 0, "colorClass": 1, "name": "node1"}],
//!  "edges": [{"sourceId": 1, "destId": 3, "cost": 0.1, "size": 4194304.0}]}
//! ```
//! Flags (`supportedOnFpga`, `isBackwardNode`) are booleans or the integers 0/1. Optional:
//! `size` (0), `colorClass`, `name`, `layerId`, an edge's `size`; `supportedOnFpga`
//! defaults to true and `isBackwardNode` to false. Unknown fields are ignored. A missing or
//! mistyped field is reported with its JSON path (`nodes[3].fpgaLatency`). The file is one
//! JSON object (an optional UTF-8 BOM before it, nothing but whitespace after it; [`super::json`]).
//!
//! Optional node fields beyond MODEL.md, written by the cost models
//! ([`crate::costmodel`]) and kept through a read/write round trip:
//! - `module`: the framework module path the node comes from
//!   (`"model.layers.3.self_attn.q_proj"`), informational like `name`;
//! - `weightBytes`, `gradientBytes`, `optimizerBytes`, `activationBytes`: what `size` is
//!   made of ([`crate::model::memory`]); when any is present the others default to 0, and
//!   together they may not exceed `size`. Without them `size` keeps its MODEL.md meaning.
//!
//! - `tensorParallel`: the node's costs per tensor-parallel degree, read only by
//!   `plan --parallel 3d` ([`super::tensor_parallel_json`], which states the format); this
//!   reader ignores it and the writer does not write it.
//!
//! Optional fields for clusters ([`crate::model::cluster`], `docs/cluster.md`); a file
//! without them means exactly what it means in MODEL.md:
//! - node `latencies`: the node's time, ms, per device profile
//!   (`{"a100-80gb": 0.41, "v100": 0.93}`); every node lists the same profiles;
//! - `reference`: `{"profile": "a100-80gb", "speed": 1.68, "hostBytesPerS": 31.5e9}`, what
//!   `fpgaLatency` and the edge costs were priced on [default: the paper's V100, speed 1,
//!   15.75e9];
//! - `cluster`: the cluster document of [`crate::io::cluster_file`] (same keys). It replaces
//!   the device set; `maxFPGAs`, `maxSizePerFPGA` and `maxCPUs` then only summarise it and
//!   are not read.

use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use super::cluster_file::ClusterFile;
use super::IoError;
use crate::model::{DeviceSet, Node, NodeMemory, Platform, ProfileTimes, Reference, Workload};

/// A 0/1 integer or a boolean.
#[derive(Clone, Copy, Debug, Serialize)]
#[serde(untagged)]
enum Flag {
    Bool(bool),
    Int(u8),
}

impl Flag {
    /// The flag as a boolean; an integer other than 0/1 is an error naming `nodes[i].field`.
    fn value(self, i: usize, field: &str) -> Result<bool, IoError> {
        match self {
            Flag::Bool(b) => Ok(b),
            Flag::Int(0) => Ok(false),
            Flag::Int(1) => Ok(true),
            Flag::Int(other) => Err(IoError::Format(format!(
                "nodes[{i}].{field}: expected true/false or 0/1, found {other}"
            ))),
        }
    }
}

/// Read by type, not as an untagged enum: serde would try `bool` first and build an error
/// message for every integer flag (two per node of a typical file).
impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Flag, D::Error> {
        struct FlagVisitor;
        impl serde::de::Visitor<'_> for FlagVisitor {
            type Value = Flag;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("true/false or 0/1")
            }
            fn visit_bool<E: serde::de::Error>(self, b: bool) -> Result<Flag, E> {
                Ok(Flag::Bool(b))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Flag, E> {
                u8::try_from(v)
                    .map(Flag::Int)
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Unsigned(v), &self))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Flag, E> {
                u8::try_from(v)
                    .map(Flag::Int)
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(v), &self))
            }
        }
        d.deserialize_any(FlagVisitor)
    }
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(
    rename_all = "camelCase",
    expecting = "a node: an object with id, fpgaLatency and cpuLatency"
)]
struct RawNode {
    id: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    fpga_latency: f64,
    cpu_latency: f64,
    #[serde(default)]
    size: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    supported_on_fpga: Option<Flag>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    is_backward_node: Option<Flag>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    color_class: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    layer_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    module: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    weight_bytes: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gradient_bytes: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    optimizer_bytes: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    activation_bytes: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    latencies: Option<BTreeMap<String, f64>>,
}

impl RawNode {
    /// The memory breakdown, when the file gives any part of it (the others are then 0).
    fn memory(&self) -> Option<NodeMemory> {
        let parts = [
            self.weight_bytes,
            self.gradient_bytes,
            self.optimizer_bytes,
            self.activation_bytes,
        ];
        parts.iter().any(Option::is_some).then(|| NodeMemory {
            weight_bytes: self.weight_bytes.unwrap_or(0.0),
            gradient_bytes: self.gradient_bytes.unwrap_or(0.0),
            optimizer_bytes: self.optimizer_bytes.unwrap_or(0.0),
            activation_bytes: self.activation_bytes.unwrap_or(0.0),
        })
    }
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(
    rename_all = "camelCase",
    expecting = "an edge: an object with sourceId, destId and cost"
)]
struct RawEdge {
    source_id: i64,
    dest_id: i64,
    cost: f64,
    #[serde(default)]
    size: f64,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(
    rename_all = "camelCase",
    expecting = "a reference: an object with profile, speed and hostBytesPerS"
)]
struct RawReference {
    profile: String,
    speed: f64,
    host_bytes_per_s: f64,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(
    expecting = "a workload: an object with maxSizePerFPGA, maxFPGAs, maxCPUs, nodes and edges"
)]
struct RawWorkload {
    #[serde(rename = "maxSizePerFPGA")]
    max_size_per_fpga: f64,
    #[serde(rename = "maxFPGAs")]
    max_fpgas: usize,
    #[serde(rename = "maxCPUs")]
    max_cpus: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reference: Option<RawReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cluster: Option<ClusterFile>,
    nodes: Vec<RawNode>,
    edges: Vec<RawEdge>,
}

/// Parses and validates a workload from JSON text.
pub fn parse_workload(text: &str) -> Result<Workload, IoError> {
    let raw: RawWorkload = super::json::parse_json(text)?;
    let cluster = match &raw.cluster {
        Some(file) => Some(
            super::cluster_resolve::resolve_for(file, &[], Some(raw.nodes.len()))
                .map_err(|e| IoError::Format(format!("at cluster.{e}")))?,
        ),
        None => None,
    };
    let devices = match &cluster {
        Some(c) => c.device_set(),
        None => DeviceSet {
            accelerators: raw.max_fpgas,
            memory_per_accelerator_bytes: raw.max_size_per_fpga,
            cpus: raw.max_cpus,
        },
    };
    let profile_times = profile_times(&raw.nodes)?;
    let reference = match raw.reference {
        Some(r) => Reference {
            profile: r.profile,
            speed: r.speed,
            host_bytes_per_s: r.host_bytes_per_s,
        },
        None => Reference::paper(),
    };
    let platform = Platform {
        reference,
        profile_times,
        cluster,
    };
    let mut nodes = Vec::with_capacity(raw.nodes.len());
    for (i, n) in raw.nodes.into_iter().enumerate() {
        let memory = n.memory();
        nodes.push(Node {
            id: n.id,
            name: n.name,
            module: n.module,
            fpga_latency: n.fpga_latency,
            cpu_latency: n.cpu_latency,
            size_bytes: n.size,
            supported_on_accelerator: match n.supported_on_fpga {
                Some(f) => f.value(i, "supportedOnFpga")?,
                None => true,
            },
            is_backward: match n.is_backward_node {
                Some(f) => f.value(i, "isBackwardNode")?,
                None => false,
            },
            color_class: n.color_class,
            layer_id: n.layer_id,
            memory,
        });
    }
    let edges = raw
        .edges
        .into_iter()
        .map(|e| (e.source_id, e.dest_id, e.cost, e.size))
        .collect();
    let w = Workload::new(nodes, edges, devices)?;
    if platform == Platform::default() {
        return Ok(w);
    }
    Ok(w.with_platform(platform)?)
}

/// The nodes' `latencies` as one list per profile; every node must list the same profiles.
fn profile_times(nodes: &[RawNode]) -> Result<ProfileTimes, IoError> {
    let Some(first) = nodes.iter().position(|n| n.latencies.is_some()) else {
        return Ok(ProfileTimes::default());
    };
    let profiles: Vec<String> = nodes[first]
        .latencies
        .as_ref()
        .expect("some")
        .keys()
        .cloned()
        .collect();
    let mut times = vec![Vec::with_capacity(nodes.len()); profiles.len()];
    for (i, n) in nodes.iter().enumerate() {
        let missing = |p: &str| {
            IoError::Format(format!(
                "at nodes[{i}].latencies: node {} has no time for profile '{p}', which node {} has; every node lists the same profiles",
                n.id, nodes[first].id
            ))
        };
        let Some(map) = &n.latencies else {
            return Err(missing(&profiles[0]));
        };
        for (p, list) in profiles.iter().zip(times.iter_mut()) {
            list.push(*map.get(p).ok_or_else(|| missing(p))?);
        }
        if let Some(extra) = map.keys().find(|k| !profiles.contains(k)) {
            return Err(IoError::Format(format!(
                "at nodes[{i}].latencies: node {} has a time for profile '{extra}', which node {} lacks; every node lists the same profiles",
                n.id, nodes[first].id
            )));
        }
    }
    Ok(ProfileTimes { profiles, times })
}

/// Reads and validates a workload file.
pub fn read_workload(path: &std::path::Path) -> Result<Workload, IoError> {
    let text = super::read_text(path)?;
    parse_workload(&text).map_err(|e| e.in_file(path))
}

/// Serialises a workload in the same format (flags as booleans).
pub fn workload_to_json(w: &Workload) -> String {
    let platform = w.platform();
    let extended = *platform != Platform::default();
    let pt = &platform.profile_times;
    let raw = RawWorkload {
        reference: extended.then(|| RawReference {
            profile: platform.reference.profile.clone(),
            speed: platform.reference.speed,
            host_bytes_per_s: platform.reference.host_bytes_per_s,
        }),
        cluster: platform.cluster.as_ref().map(ClusterFile::of_cluster),
        max_size_per_fpga: w.devices().memory_per_accelerator_bytes,
        max_fpgas: w.devices().accelerators,
        max_cpus: w.devices().cpus,
        nodes: w
            .nodes()
            .iter()
            .enumerate()
            .map(|(v, n)| RawNode {
                latencies: (!pt.profiles.is_empty()).then(|| {
                    pt.profiles
                        .iter()
                        .cloned()
                        .zip(pt.times.iter().map(|t| t[v]))
                        .collect()
                }),
                id: n.id,
                name: n.name.clone(),
                fpga_latency: n.fpga_latency,
                cpu_latency: n.cpu_latency,
                size: n.size_bytes,
                supported_on_fpga: Some(Flag::Bool(n.supported_on_accelerator)),
                is_backward_node: Some(Flag::Bool(n.is_backward)),
                color_class: n.color_class,
                layer_id: n.layer_id,
                module: n.module.clone(),
                weight_bytes: n.memory.map(|m| m.weight_bytes),
                gradient_bytes: n.memory.map(|m| m.gradient_bytes),
                optimizer_bytes: n.memory.map(|m| m.optimizer_bytes),
                activation_bytes: n.memory.map(|m| m.activation_bytes),
            })
            .collect(),
        edges: w
            .edges()
            .iter()
            .map(|e| RawEdge {
                source_id: w.node(e.from).id,
                dest_id: w.node(e.to).id,
                cost: e.cost,
                size: e.size_bytes,
            })
            .collect(),
    };
    serde_json::to_string_pretty(&raw).expect("a workload serialises")
}
