//! Layer-granular planning (`--granularity layer`) against exhaustive search: on small
//! random workloads with `layerId`s, the DP on the layer-relabelled workload finds exactly
//! the best contiguous placement that keeps every layer on one device, as found by trying
//! every assignment of layers to devices and scoring it with the evaluator on the original
//! workload; it is never better than the unrestricted optimum, and equal to it when every
//! layer is one node.

mod common;

use common::{random_workload, Rng, Shape};
use dnnplace::model::layers::{layer_labels, LayerError, Layers};
use dnnplace::model::{Device, Node, Placement, Workload};
use dnnplace::score::evaluate;
use dnnplace::solve::{
    dp::Dp,
    layer_granular::{contract_by_layers, plan_by_layers},
    plan, Problem, Status,
};
use proptest::prelude::*;

/// `w` with `layerId`s: runs of consecutive node indices (forward nodes first), so most
/// draws have a DAG of layers; colour classes may still join runs into cycles.
fn with_layer_ids(w: &Workload, seed: u64) -> Workload {
    let mut r = Rng::new(seed);
    let mut layer = 0i64;
    let nodes: Vec<Node> = w
        .nodes()
        .iter()
        .map(|n| {
            if r.chance(0.6) {
                layer += 1;
            }
            Node {
                layer_id: if r.chance(0.1) { None } else { Some(layer) },
                ..n.clone()
            }
        })
        .collect();
    let edges = w
        .edges()
        .iter()
        .map(|e| (w.node(e.from).id, w.node(e.to).id, e.cost, e.size_bytes))
        .collect();
    Workload::new(nodes, edges, w.devices().clone()).expect("same graph")
}

/// min TPS over valid placements that keep each layer on one device and whose devices hold
/// contiguous sets of layers in the layer graph (every such placement is contiguous on the
/// original workload too, which `plan_by_layers` checks).
fn exhaustive(w: &Workload, layers: &Layers) -> Option<f64> {
    let relabelled = contract_by_layers(w, layers).ok()?;
    let d = w.devices();
    let devices: Vec<Device> = (0..d.accelerators)
        .map(Device::Accelerator)
        .chain((0..d.cpus).map(Device::Cpu))
        .collect();
    let n = layers.len();
    let total = devices.len().checked_pow(n as u32)?;
    let mut best: Option<f64> = None;
    for code in 0..total {
        let mut c = code;
        let layer_device: Vec<Device> = (0..n)
            .map(|_| {
                let x = devices[c % devices.len()];
                c /= devices.len();
                x
            })
            .collect();
        let p = Placement::new(
            (0..w.len())
                .map(|v| layer_device[layers.layer_of[v]])
                .collect(),
        );
        let e = evaluate(w, &p, false);
        // Contiguity of the layers in the layer graph (the relabelled workload's class graph).
        if e.is_valid() && evaluate(&relabelled, &p, false).is_contiguous() {
            best = Some(best.map_or(e.max_load, |b: f64| b.min(e.max_load)));
        }
    }
    best
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn layer_dp_equals_exhaustive_layer_granular_optimum(seed in any::<u64>()) {
        let shape = Shape { max_nodes: 8, max_accelerators: 3, max_cpus: 1, ..Default::default() };
        let Some(w) = random_workload(seed, shape) else { return Ok(()) };
        let w = with_layer_ids(&w, seed ^ 0x5eed);
        let layers = match Layers::new(&w) {
            Ok(l) => l,
            Err(LayerError::NotContiguous { cycle }) => {
                prop_assert!(cycle.contains(" -> "), "{cycle}");
                return Ok(());
            }
        };
        prop_assume!(layers.len() <= 6);
        let oracle = exhaustive(&w, &layers);
        let result = plan_by_layers(&Dp, &Problem::throughput(&w), &layers).unwrap();
        match (oracle, &result.evaluation) {
            (None, None) => {
                let infeasible = matches!(result.outcome.status, Status::Infeasible { .. });
                prop_assert!(infeasible, "{:?}", result.outcome.status);
            }
            (Some(best), Some(e)) => {
                prop_assert!((e.max_load - best).abs() <= 1e-9 * best.max(1.0), "DP {} vs exhaustive {best}", e.max_load);
                let p = result.outcome.placement.as_ref().unwrap();
                for layer in &layers.layers {
                    prop_assert!(layer.nodes.iter().all(|&v| p.assignment[v] == p.assignment[layer.nodes[0]]));
                }
                let free = plan(&Dp, &Problem::throughput(&w)).unwrap();
                prop_assert!(free.objective(dnnplace::solve::Objective::Throughput) <= e.max_load * (1.0 + 1e-9));
            }
            (oracle, e) => prop_assert!(false, "exhaustive {oracle:?} but the DP gives {:?} ({:?})", e.as_ref().map(|e| e.max_load), result.outcome.status),
        }
    }

    #[test]
    fn one_node_per_layer_is_the_unrestricted_optimum(seed in any::<u64>()) {
        let shape = Shape { max_nodes: 9, color_classes: false, training: false, ..Default::default() };
        let Some(w) = random_workload(seed, shape) else { return Ok(()) };
        let nodes: Vec<Node> = w.nodes().iter().enumerate().map(|(i, n)| Node { layer_id: Some(i as i64), ..n.clone() }).collect();
        let edges = w.edges().iter().map(|e| (w.node(e.from).id, w.node(e.to).id, e.cost, e.size_bytes)).collect();
        let w = Workload::new(nodes, edges, w.devices().clone()).unwrap();
        let layers = Layers::new(&w).unwrap();
        prop_assert_eq!(layers.len(), w.len());
        let by_layers = plan_by_layers(&Dp, &Problem::throughput(&w), &layers).unwrap();
        let free = plan(&Dp, &Problem::throughput(&w)).unwrap();
        let o = dnnplace::solve::Objective::Throughput;
        let (a, b) = (by_layers.objective(o), free.objective(o));
        prop_assert!(a == b || (a - b).abs() <= 1e-9 * b.max(1.0), "by layers {a}, unrestricted {b}");
    }
}

/// The shared labelling: one label per layerId, colour classes joined, graph inputs with
/// the node they feed.
#[test]
fn labels_join_layer_ids_colour_classes_and_inputs() {
    let node = |id: i64, layer: Option<i64>, class: Option<i64>, ms: f64| Node {
        id,
        name: Some(format!("m.n{id}")),
        module: None,
        fpga_latency: ms,
        cpu_latency: ms,
        size_bytes: 0.0,
        supported_on_accelerator: true,
        is_backward: false,
        color_class: class,
        layer_id: layer,
        memory: None,
    };
    // 1 (input, no layer) -> 2 (layer 7) -> 3 (layer 7) -> 4 (layer 8, class 5) -> 5 (no layer, class 5) -> 6 (no layer)
    let nodes = vec![
        node(1, None, None, 0.0),
        node(2, Some(7), None, 1.0),
        node(3, Some(7), None, 1.0),
        node(4, Some(8), Some(5), 1.0),
        node(5, None, Some(5), 1.0),
        node(6, None, None, 1.0),
    ];
    let edges = (1..6).map(|i| (i, i + 1, 0.5, 0.0)).collect();
    let devices = dnnplace::model::DeviceSet {
        accelerators: 2,
        memory_per_accelerator_bytes: 1.0,
        cpus: 0,
    };
    let w = Workload::new(nodes, edges, devices).unwrap();
    let (labels, count) = layer_labels(&w);
    assert_eq!(count, 3);
    assert_eq!(labels, vec![0, 0, 0, 1, 1, 2]);
}
