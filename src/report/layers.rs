//! What each device holds, by name: layer ranges and module paths per device.
//!
//! One row per device that holds nodes, in the order of the device's first layer (the
//! pipeline order for a contiguous plan): the layers it holds (`embed_tokens + layers
//! 0-7`, `part of …` for a layer it holds only partly), its load (ms), its memory
//! (MiB/GiB) and the module paths (`model.embed_tokens, model.layers.0-7`). Long lists
//! are cut after a few items with a count of the rest.

use std::fmt::Write;

use crate::model::layers::Layers;
use crate::model::{Device, Placement, Workload};
use crate::report::table::human_bytes;
use crate::score::Evaluation;

/// Items shown per cell before `… (+N more)`.
const ITEMS_SHOWN: usize = 8;

/// The per-device table of names (module documentation).
pub fn holdings_table(w: &Workload, layers: &Layers, placement: &Placement, e: &Evaluation) -> String {
    let mut by_device: Vec<(Device, Vec<usize>, usize)> = Vec::new();
    for (l, layer) in layers.layers.iter().enumerate() {
        for &v in &layer.nodes {
            let d = placement.assignment[v];
            match by_device.iter_mut().find(|(x, _, _)| *x == d) {
                Some((_, nodes, _)) => nodes.push(v),
                None => by_device.push((d, vec![v], l)),
            }
        }
    }
    let rows: Vec<[String; 5]> = by_device
        .iter()
        .map(|(d, nodes, _)| {
            let (load, memory) = e.devices.iter().find(|x| x.device == *d).map_or((0.0, 0.0), |x| (x.load, x.memory_bytes));
            [
                d.to_string(),
                layers.describe(w, nodes, ITEMS_SHOWN),
                format!("{load:.3}"),
                human_bytes(memory),
                layers.modules_of(w, nodes, ITEMS_SHOWN),
            ]
        })
        .collect();
    let header = ["device", "holds", "load (ms)", "memory", "modules"];
    let width = |i: usize| rows.iter().map(|r| r[i].chars().count()).chain([header[i].len()]).max().unwrap_or(0);
    let (w0, w1, w2, w3) = (width(0), width(1), width(2), width(3));
    let mut s = String::new();
    let _ = writeln!(s, "{:<w0$}  {:<w1$}  {:>w2$}  {:>w3$}  {}", header[0], header[1], header[2], header[3], header[4]);
    for r in &rows {
        let _ = writeln!(s, "{:<w0$}  {:<w1$}  {:>w2$}  {:>w3$}  {}", r[0], r[1], r[2], r[3], r[4]);
    }
    s
}

/// One line on the layers of a workload: how many, the block list, nodes without a layer.
pub fn layers_summary(layers: &Layers) -> String {
    let blocks = layers.layers.iter().filter(|l| l.block.is_some()).count();
    let mut s = format!("{} layers", layers.len());
    if let Some(list) = &layers.block_list {
        s.push_str(&format!(" ({blocks} blocks {list}.N)"));
    }
    if layers.unlabelled_nodes > 0 {
        s.push_str(&format!(", {} nodes without a layerId are layers of their own", layers.unlabelled_nodes));
    }
    s
}

/// The holdings as JSON: per device, what it holds and its module paths (all of them).
pub fn holdings_json(w: &Workload, layers: &Layers, placement: &Placement) -> serde_json::Value {
    let mut by_device: Vec<(Device, Vec<usize>)> = Vec::new();
    for layer in &layers.layers {
        for &v in &layer.nodes {
            let d = placement.assignment[v];
            match by_device.iter_mut().find(|(x, _)| *x == d) {
                Some((_, nodes)) => nodes.push(v),
                None => by_device.push((d, vec![v])),
            }
        }
    }
    serde_json::Value::Array(
        by_device
            .iter()
            .map(|(d, nodes)| {
                serde_json::json!({"device": d.to_string(), "holds": layers.describe(w, nodes, usize::MAX),
                                   "modules": layers.modules_of(w, nodes, usize::MAX)})
            })
            .collect(),
    )
}
