//! The set bound on clusters (`solve::bounds::cluster::set`) against exhaustive search over
//! every placement (contiguous or not) on small random clusters: 1–3 types, 1–2 machines,
//! with and without peer links, tight memory, CPU-only nodes, training graphs.
//!
//! The oracle is `B* = max_g min_P load_P(d_P(g))` over all valid placements `P`: the
//! least load a device holding colour class `g` can have in any plan. The set bound is a
//! relaxation of it (memory left out on the other devices), so `bound ≤ B* ≤ optimum`, and
//! it should meet `B*` on most instances.

mod cluster_gen;
mod common;

use cluster_gen::{random_clustered, ClusterShape};
use common::Shape;
use dnnplace::model::contraction::class_index;
use dnnplace::model::{ClusterCosts, Device, Placement, Workload};
use dnnplace::score::evaluate_on_cluster;
use dnnplace::solve::bounds::cluster::set::set_bound;
use dnnplace::solve::budget::Budget;

/// `B*` and the optimum over all valid placements (`None` when there is none).
fn per_class_oracle(w: &Workload, costs: &ClusterCosts) -> Option<(f64, f64)> {
    let (class, classes) = class_index(w);
    let cluster = costs.cluster();
    let devices: Vec<Device> = (0..cluster.accelerators().len())
        .map(Device::Accelerator)
        .chain((0..cluster.cpu_machines().len()).map(Device::Cpu))
        .collect();
    let mut least = vec![f64::INFINITY; classes];
    let mut optimum = f64::INFINITY;
    let mut labels = vec![0usize; classes];
    loop {
        let p = Placement::new(class.iter().map(|&c| devices[labels[c]]).collect());
        let e = evaluate_on_cluster(w, costs, &p);
        if e.is_valid() {
            optimum = optimum.min(e.max_load);
            for (c, &l) in labels.iter().enumerate() {
                let load = e
                    .devices
                    .iter()
                    .find(|d| d.device == devices[l])
                    .map_or(0.0, |d| d.load);
                least[c] = least[c].min(load);
            }
        }
        // The next assignment, as a number in base |devices|.
        let mut k = 0;
        while k < classes {
            labels[k] += 1;
            if labels[k] < devices.len() {
                break;
            }
            labels[k] = 0;
            k += 1;
        }
        if k == classes {
            break;
        }
    }
    optimum
        .is_finite()
        .then(|| (least.iter().copied().fold(0.0, f64::max), optimum))
}

#[test]
fn the_set_bound_is_below_every_plan_and_meets_the_per_class_oracle() {
    let (mut checked, mut met, mut above_cheapest) = (0, 0, 0);
    for seed in 0..250 {
        let shape = Shape {
            max_nodes: 6,
            training: seed % 2 == 0,
            ..Shape::default()
        };
        let cluster = ClusterShape {
            max_devices: 4,
            max_machines: 2,
            peer: [None, Some(true), Some(false)][seed as usize % 3],
            ..ClusterShape::default()
        };
        let Some(w) = random_clustered(seed, shape, cluster) else {
            continue;
        };
        let costs = ClusterCosts::of(&w);
        let Some((oracle, optimum)) = per_class_oracle(&w, &costs) else {
            continue;
        };
        let bound = set_bound(&w, &costs, &Budget::new(None, None));
        let tolerance = 1e-9 * oracle.max(1.0);
        assert!(
            bound <= oracle + tolerance && oracle <= optimum + tolerance,
            "seed {seed}: set bound {bound}, per-class oracle {oracle}, optimum {optimum}"
        );
        checked += 1;
        met += usize::from(bound >= oracle - tolerance);
        // The cheapest time of the slowest class, the bound the set bound refines.
        let cluster = costs.cluster();
        let (class, classes) = class_index(&w);
        let cheapest = (0..classes)
            .map(|c| {
                let nodes: Vec<usize> = (0..w.len()).filter(|&v| class[v] == c).collect();
                let cpu: f64 = nodes.iter().map(|&v| w.node(v).cpu_latency).sum();
                (0..cluster.accelerators().len())
                    .map(|i| {
                        nodes
                            .iter()
                            .map(|&v| costs.compute(&w, v, Device::Accelerator(i)))
                            .sum()
                    })
                    .chain((!cluster.cpu_machines().is_empty()).then_some(cpu))
                    .fold(f64::INFINITY, f64::min)
            })
            .fold(0.0, f64::max);
        above_cheapest += usize::from(bound > cheapest + tolerance);
    }
    assert!(checked > 100, "only {checked} feasible instances");
    assert!(
        met * 10 >= checked * 7,
        "the set bound met the per-class oracle on {met} of {checked} instances"
    );
    assert!(
        above_cheapest * 4 >= checked,
        "the set bound was above the cheapest time on {above_cheapest} of {checked} instances"
    );
    eprintln!(
        "{checked} instances: met the oracle {met}, above the cheapest time {above_cheapest}"
    );
}
