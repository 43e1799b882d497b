//! What each device holds, by name: layer ranges and module paths per device.
//!
//! One row per device that holds nodes, in the order of the device's first layer (the
//! pipeline order for a contiguous plan): the layers it holds (`embed_tokens + layers
//! 0-7`, `part of …` for a layer it holds only partly), its load (ms), its memory
//! (MiB/GiB) and the module paths (`model.embed_tokens, model.layers.0-7`). Long lists
//! are cut after a few items with a count of the rest. Laid out by [`crate::report::tabular`].

use crate::model::human_bytes;
use crate::model::layers::Layers;
use crate::model::{Device, Placement, Workload};
use crate::report::tabular::{
    Align::{Left, Right},
    Table,
};
use crate::score::Evaluation;

/// Items shown per cell before `… (+N more)`.
const ITEMS_SHOWN: usize = 8;

/// The nodes of each device that holds any, devices in the order of their first layer.
fn nodes_by_device(layers: &Layers, placement: &Placement) -> Vec<(Device, Vec<usize>)> {
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
    by_device
}

/// The per-device table of names (module documentation).
pub fn holdings_table(
    w: &Workload,
    layers: &Layers,
    placement: &Placement,
    e: &Evaluation,
) -> String {
    let mut table = Table::new(["device", "holds", "load (ms)", "memory", "modules"])
        .aligned([Left, Left, Right, Right, Left]);
    for (d, nodes) in nodes_by_device(layers, placement) {
        let (load, memory) = e
            .devices
            .iter()
            .find(|x| x.device == d)
            .map_or((0.0, 0.0), |x| (x.load, x.memory_bytes));
        table.push([
            d.to_string(),
            layers.describe(w, &nodes, ITEMS_SHOWN),
            format!("{load:.3}"),
            human_bytes(memory),
            layers.modules_of(w, &nodes, ITEMS_SHOWN),
        ]);
    }
    table.text()
}

/// One line on the layers of a workload: how many, the block list, nodes without a layer.
pub fn layers_summary(layers: &Layers) -> String {
    let blocks = layers.layers.iter().filter(|l| l.block.is_some()).count();
    let mut s = format!("{} layers", layers.len());
    if let Some(list) = &layers.block_list {
        s.push_str(&format!(" ({blocks} blocks {list}.N)"));
    }
    if layers.unlabelled_nodes > 0 {
        s.push_str(&format!(
            ", {} nodes without a layerId are layers of their own",
            layers.unlabelled_nodes
        ));
    }
    s
}

/// The holdings as JSON: per device, what it holds and its module paths (all of them).
pub fn holdings_json(w: &Workload, layers: &Layers, placement: &Placement) -> serde_json::Value {
    serde_json::Value::Array(
        nodes_by_device(layers, placement)
            .iter()
            .map(|(d, nodes)| {
                serde_json::json!({"device": d.to_string(), "holds": layers.describe(w, nodes, usize::MAX),
                                   "modules": layers.modules_of(w, nodes, usize::MAX)})
            })
            .collect(),
    )
}
