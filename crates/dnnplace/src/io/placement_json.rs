//! Reader and writer of the placement JSON shape of MODEL.md (the reference tools' shape):
//!
//! ```json
//! {"maxLoad": 12.3, "fpgas": [{"load": 4.1, "nodes": [1,2,3]}], "cpus": [{"load": 0.0, "nodes": []}]}
//! ```
//! Latency results carry `totalLatency` instead of `maxLoad`, and an accelerator cut into
//! several calls lists them in call order: `{"nodes": [1,2,3,4], "pieces": [[1,2],[3,4]]}`
//! (`nodes` may then be left out; when given it must be the union of the pieces). If any
//! accelerator lists pieces the plan's cut is explicit and an accelerator without `pieces`
//! is one call; if none does, the scorer cuts greedily. A throughput plan made under the
//! interleaved schedule uses the same field for its *chunks*: `"pieces": [[1,2],[],[3]]`
//! puts nodes 1 and 2 in chunk 0, none in chunk 1 and node 3 in chunk 2 (list `j` is
//! chunk `j`, empty lists included; [`crate::model::Placement::chunk`]). A throughput plan
//! that has chunks (every plan made under interleaved) writes them, with the same number
//! of lists on every accelerator; one without writes none. Loads in a file are ignored on
//! reading (the scorer recomputes them); a load may be `null`, which is how JSON writes a
//! load that overflowed to infinity. A node that the file does not list is placed
//! with its colour class when the listed nodes of that class agree on one device (this is
//! how a forward-only expert split is completed for a training graph), in the piece of
//! the first listed node of its class; otherwise reading fails naming the node. An
//! accelerator that recomputes its activations under a pipeline schedule says so with
//! `"recompute": true` ([`crate::model::recompute`]); without the field it does not (every
//! older plan file), and a CPU that says so is refused. The file
//! is one JSON value (an optional UTF-8 BOM before it, nothing but whitespace after it;
//! [`super::json`]).

use serde::{Deserialize, Serialize};

use super::IoError;
use crate::model::{Device, Placement, Workload};

#[derive(Debug, Serialize, Deserialize)]
#[serde(expecting = "a device: an object with nodes (and optionally pieces)")]
pub struct RawDevice {
    /// Ignored on reading; `null` (how JSON writes a load that overflowed to infinity) reads.
    #[serde(default, deserialize_with = "number_or_null")]
    pub load: f64,
    #[serde(default)]
    pub nodes: Vec<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pieces: Option<Vec<Vec<i64>>>,
    /// The device recomputes its activations (accelerators only; absent: false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub recompute: bool,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(
    rename_all = "camelCase",
    expecting = "a placement: an object with fpgas and cpus"
)]
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

/// A number, or `null` read as NaN (a value the file could not hold).
fn number_or_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// Parses a placement for workload `w`, completing unlisted nodes by colour class.
pub fn parse_placement(text: &str, w: &Workload) -> Result<Placement, IoError> {
    let raw: RawPlacement = super::json::parse_json(text)?;
    let mut assignment: Vec<Option<Device>> = vec![None; w.len()];
    let mut rank: Vec<Option<usize>> = vec![None; w.len()];
    let explicit = raw.fpgas.iter().any(|d| d.pieces.is_some());
    if let Some(i) = raw.cpus.iter().position(|d| d.pieces.is_some()) {
        return Err(IoError::Format(format!(
            "cpus[{i}] lists pieces; a CPU runs its nodes one by one"
        )));
    }
    if let Some(i) = raw.cpus.iter().position(|d| d.recompute) {
        return Err(IoError::Format(format!(
            "cpus[{i}] sets recompute; only an accelerator recomputes its activations (a CPU has no memory limit to save)"
        )));
    }
    let recompute: Vec<Device> = raw
        .fpgas
        .iter()
        .enumerate()
        .filter(|(_, d)| d.recompute)
        .map(|(i, _)| Device::Accelerator(i))
        .collect();
    let lists = raw
        .fpgas
        .iter()
        .enumerate()
        .map(|(i, d)| (Device::Accelerator(i), format!("fpgas[{i}]"), d))
        .chain(
            raw.cpus
                .iter()
                .enumerate()
                .map(|(i, d)| (Device::Cpu(i), format!("cpus[{i}]"), d)),
        );
    for (device, path, list) in lists {
        let index = |id: i64, at: &str| {
            w.index_of(id).ok_or_else(|| {
                IoError::Format(format!(
                    "{at} lists node {id}, which the workload does not have"
                ))
            })
        };
        if let Some(pieces) = &list.pieces {
            for (j, piece) in pieces.iter().enumerate() {
                for &id in piece {
                    let v = index(id, &format!("{path}.pieces[{j}]"))?;
                    if let Some(other) = assignment[v] {
                        return Err(IoError::Format(format!(
                            "node {id} is listed twice: on {other} and in {path}.pieces[{j}]"
                        )));
                    }
                    assignment[v] = Some(device);
                    rank[v] = Some(j);
                }
            }
            for &id in &list.nodes {
                let v = index(id, &path)?;
                if assignment[v] != Some(device) {
                    return Err(IoError::Format(format!(
                        "{path}.nodes lists node {id}, which none of its pieces holds"
                    )));
                }
            }
            let listed = pieces.iter().map(Vec::len).sum::<usize>();
            if !list.nodes.is_empty() && list.nodes.len() != listed {
                return Err(IoError::Format(format!(
                    "{path}.nodes lists {} nodes but its pieces hold {listed}",
                    list.nodes.len()
                )));
            }
            continue;
        }
        for &id in &list.nodes {
            let v = index(id, &path)?;
            if let Some(other) = assignment[v] {
                return Err(IoError::Format(format!(
                    "node {id} is listed twice: on {other} and in {path}"
                )));
            }
            assignment[v] = Some(device);
            if matches!(device, Device::Accelerator(_)) {
                rank[v] = Some(0);
            }
        }
    }
    let listed: Vec<bool> = assignment.iter().map(Option::is_some).collect();
    complete_by_color_class(w, &mut assignment)?;
    let placement = Placement::new(
        assignment
            .into_iter()
            .map(|d| d.expect("completed"))
            .collect(),
    )
    .with_recompute(recompute);
    if !explicit {
        return Ok(placement);
    }
    // Completed nodes join the piece of the first listed node of their class.
    let mut class_rank: std::collections::HashMap<i64, usize> = Default::default();
    for (v, node) in w.nodes().iter().enumerate() {
        if let (true, Some(c), Some(r)) = (listed[v], node.color_class, rank[v]) {
            class_rank.entry(c).or_insert(r);
        }
    }
    let ranks = (0..w.len())
        .map(|v| {
            rank[v]
                .or_else(|| {
                    w.node(v)
                        .color_class
                        .and_then(|c| class_rank.get(&c).copied())
                })
                .unwrap_or(0)
        })
        .collect();
    Ok(placement.with_pieces(ranks))
}

fn complete_by_color_class(w: &Workload, assignment: &mut [Option<Device>]) -> Result<(), IoError> {
    let mut class_device: std::collections::HashMap<i64, Result<Device, (Device, Device)>> =
        Default::default();
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
            return Err(IoError::Format(format!(
                "node {id} is not listed and has no colour class to infer its device from"
            )));
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
    let ids = |set: &[usize]| {
        let mut nodes: Vec<i64> = set.iter().map(|&v| w.node(v).id).collect();
        nodes.sort_unstable();
        nodes
    };
    // Latency: an accelerator cut into several calls lists them. Otherwise the ranks are
    // interleaved chunks: every accelerator lists chunks 0 … c_max, empty ones as `[]`,
    // so that list j is chunk j on reading.
    let chunks = accs
        .iter()
        .flatten()
        .map(|&v| p.chunk(v))
        .max()
        .unwrap_or(0)
        + 1;
    let pieces_of = |set: &[usize]| -> Option<Vec<Vec<i64>>> {
        let ranks = p.pieces.as_ref()?;
        if !latency {
            let mut lists = vec![Vec::new(); chunks];
            for &v in set {
                lists[ranks[v]].push(v);
            }
            return Some(lists.iter().map(|chunk| ids(chunk)).collect());
        }
        let mut by_rank: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
        for &v in set {
            by_rank.entry(ranks[v]).or_default().push(v);
        }
        (by_rank.len() > 1).then(|| by_rank.values().map(|piece| ids(piece)).collect())
    };
    let fpgas = accs
        .iter()
        .zip(loads)
        .enumerate()
        .map(|(i, (set, &load))| RawDevice {
            load,
            nodes: ids(set),
            pieces: pieces_of(set),
            recompute: p.recomputes(Device::Accelerator(i)),
        })
        .collect();
    let cpus = cpus
        .iter()
        .zip(cpu_loads)
        .map(|(set, &load)| RawDevice {
            load,
            nodes: ids(set),
            pieces: None,
            recompute: false,
        })
        .collect();
    RawPlacement {
        max_load: (!latency).then_some(objective),
        total_latency: latency.then_some(objective),
        fpgas,
        cpus,
    }
}
