//! Reader and writer of the placement JSON shape of MODEL.md (the reference tools' shape):
//!
//! ```json
//! {"maxLoad": 12.3, "fpgas": [{"load": 4.1, "nodes": [1,2,3]}], "cpus": [{"load": 0.0, "nodes": []}]}
//! ```
//! Latency results carry `totalLatency` instead of `maxLoad`. Loads in a file are ignored
//! on reading (the scorer recomputes them). A node that the file does not list is placed
//! with its colour class when the listed nodes of that class agree on one device (this is
//! how a forward-only expert split is completed for a training graph); otherwise reading
//! fails naming the node.

use serde::{Deserialize, Serialize};

use super::IoError;
use crate::model::{Device, Placement, Workload};

#[derive(Debug, Serialize, Deserialize)]
pub struct RawDevice {
    #[serde(default)]
    pub load: f64,
    pub nodes: Vec<i64>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawPlacement {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_load: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_latency: Option<f64>,
    #[serde(default)]
    pub fpgas: Vec<RawDevice>,
    #[serde(default)]
    pub cpus: Vec<RawDevice>,
}

/// Parses a placement for workload `w`, completing unlisted nodes by colour class.
pub fn parse_placement(text: &str, w: &Workload) -> Result<Placement, IoError> {
    let de = &mut serde_json::Deserializer::from_str(text);
    let raw: RawPlacement = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        IoError::Format(format!("at {path}: {}", e.into_inner()))
    })?;
    let mut assignment: Vec<Option<Device>> = vec![None; w.len()];
    let lists = raw
        .fpgas
        .iter()
        .enumerate()
        .map(|(i, d)| (Device::Accelerator(i), format!("fpgas[{i}]"), d))
        .chain(raw.cpus.iter().enumerate().map(|(i, d)| (Device::Cpu(i), format!("cpus[{i}]"), d)));
    for (device, path, list) in lists {
        for &id in &list.nodes {
            let v = w
                .index_of(id)
                .ok_or_else(|| IoError::Format(format!("{path} lists node {id}, which the workload does not have")))?;
            if let Some(other) = assignment[v] {
                return Err(IoError::Format(format!("node {id} is listed twice: on {other} and in {path}")));
            }
            assignment[v] = Some(device);
        }
    }
    complete_by_color_class(w, &mut assignment)?;
    Ok(Placement::new(assignment.into_iter().map(|d| d.expect("completed")).collect()))
}

fn complete_by_color_class(w: &Workload, assignment: &mut [Option<Device>]) -> Result<(), IoError> {
    let mut class_device: std::collections::HashMap<i64, Result<Device, (Device, Device)>> = Default::default();
    for (v, node) in w.nodes().iter().enumerate() {
        if let (Some(c), Some(d)) = (node.color_class, assignment[v]) {
            class_device
                .entry(c)
                .and_modify(|e| {
                    if let Ok(prev) = *e {
                        if prev != d {
                            *e = Err((prev, d));
                        }
                    }
                })
                .or_insert(Ok(d));
        }
    }
    for (v, node) in w.nodes().iter().enumerate() {
        if assignment[v].is_some() {
            continue;
        }
        let id = node.id;
        let Some(class) = node.color_class else {
            return Err(IoError::Format(format!("node {id} is not listed and has no colour class to infer its device from")));
        };
        match class_device.get(&class) {
            Some(Ok(d)) => assignment[v] = Some(*d),
            Some(Err((a, b))) => {
                return Err(IoError::Format(format!(
                    "node {id} is not listed and its colour class {class} is split between {a} and {b}"
                )))
            }
            None => {
                return Err(IoError::Format(format!(
                    "node {id} is not listed and no node of its colour class {class} is listed"
                )))
            }
        }
    }
    Ok(())
}

/// Reads a placement file for workload `w`.
pub fn read_placement(path: &std::path::Path, w: &Workload) -> Result<Placement, IoError> {
    let text = super::read_text(path)?;
    parse_placement(&text, w).map_err(|e| e.in_file(path))
}

/// The placement in the reference shape, with per-device loads and the objective value.
/// `loads[i]` are accelerator loads, `cpu_loads[j]` CPU loads; `objective` goes to
/// `maxLoad` or, when `latency` is true, `totalLatency`.
pub fn placement_to_raw(
    w: &Workload,
    p: &Placement,
    loads: &[f64],
    cpu_loads: &[f64],
    objective: f64,
    latency: bool,
) -> RawPlacement {
    let (accs, cpus) = p.node_sets(loads.len(), cpu_loads.len());
    let to_raw = |sets: Vec<Vec<usize>>, loads: &[f64]| {
        sets.into_iter()
            .zip(loads)
            .map(|(set, &load)| {
                let mut nodes: Vec<i64> = set.into_iter().map(|v| w.node(v).id).collect();
                nodes.sort_unstable();
                RawDevice { load, nodes }
            })
            .collect()
    };
    RawPlacement {
        max_load: (!latency).then_some(objective),
        total_latency: latency.then_some(objective),
        fpgas: to_raw(accs, loads),
        cpus: to_raw(cpus, cpu_loads),
    }
}
